//! A sorted set of prefixes that is cheap to copy and to change: chunks of at most
//! [`MAX_CHUNK`] sorted prefixes, each shared until changed.
//!
//! A set's addresses are held by the set book and by the datapath's model of what it sent (the
//! nftables table), so patching one address into a set of 100,000 must not copy all of them:
//! with one vector, the copy (and the fresh pages it faults in) was most of what a replica cost
//! on nftables at 40,000 pods. Here a copy shares every chunk, and a change copies the one chunk
//! it touches.

use std::sync::Arc;

use ipnet::IpNet;

/// The most prefixes a chunk holds; a fuller one is split in two.
const MAX_CHUNK: usize = 1024;
/// A chunk this small is merged into its neighbour where both fit in one.
const MIN_CHUNK: usize = MAX_CHUNK / 4;

/// Sorted, distinct prefixes in shared chunks.
#[derive(Clone, Debug, Default)]
pub struct SortedNets {
    /// Each non-empty and sorted; every prefix of a chunk below every prefix of the next.
    chunks: Vec<Arc<Vec<IpNet>>>,
    len: usize,
}

impl SortedNets {
    /// The set of `nets`, which must be sorted and distinct.
    pub fn from_sorted(nets: Vec<IpNet>) -> SortedNets {
        debug_assert!(nets.windows(2).all(|w| w[0] < w[1]));
        let len = nets.len();
        let chunks = nets
            .chunks(MAX_CHUNK / 2)
            .map(|chunk| Arc::new(chunk.to_vec()))
            .collect();
        SortedNets { chunks, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The prefixes in order.
    pub fn iter(&self) -> impl Iterator<Item = &IpNet> + Clone {
        self.chunks.iter().flat_map(|chunk| chunk.iter())
    }

    /// The chunk that holds `net` or would: the first whose last prefix is not below it (the
    /// last chunk for a prefix above every one).
    fn chunk_of(&self, net: &IpNet) -> usize {
        let at = self
            .chunks
            .partition_point(|chunk| chunk.last().is_some_and(|last| last < net));
        at.min(self.chunks.len().saturating_sub(1))
    }

    pub fn contains(&self, net: &IpNet) -> bool {
        if self.chunks.is_empty() {
            return false;
        }
        self.chunks[self.chunk_of(net)].binary_search(net).is_ok()
    }

    /// Adds `net`; false if it was there.
    pub fn insert(&mut self, net: IpNet) -> bool {
        if self.chunks.is_empty() {
            self.chunks.push(Arc::new(vec![net]));
            self.len = 1;
            return true;
        }
        let at = self.chunk_of(&net);
        let Err(position) = self.chunks[at].binary_search(&net) else {
            return false;
        };
        let chunk = Arc::make_mut(&mut self.chunks[at]);
        chunk.insert(position, net);
        if chunk.len() > MAX_CHUNK {
            let upper = chunk.split_off(chunk.len() / 2);
            self.chunks.insert(at + 1, Arc::new(upper));
        }
        self.len += 1;
        true
    }

    /// Takes `net` out; false if it was not there.
    pub fn remove(&mut self, net: &IpNet) -> bool {
        if self.chunks.is_empty() {
            return false;
        }
        let at = self.chunk_of(net);
        let Ok(position) = self.chunks[at].binary_search(net) else {
            return false;
        };
        let chunk = Arc::make_mut(&mut self.chunks[at]);
        chunk.remove(position);
        self.len -= 1;
        if chunk.is_empty() {
            self.chunks.remove(at);
        } else if chunk.len() < MIN_CHUNK {
            self.merge_small(at);
        }
        true
    }

    /// Merges the small chunk `at` into a neighbour when both fit in one chunk.
    fn merge_small(&mut self, at: usize) {
        let fits = |other: usize| self.chunks[at].len() + self.chunks[other].len() <= MAX_CHUNK;
        let (left, right) = if at + 1 < self.chunks.len() && fits(at + 1) {
            (at, at + 1)
        } else if at > 0 && fits(at - 1) {
            (at - 1, at)
        } else {
            return;
        };
        let upper = self.chunks.remove(right);
        Arc::make_mut(&mut self.chunks[left]).extend(upper.iter().copied());
    }

    /// Whether both share every chunk (then they are equal without comparing).
    pub fn shares_with(&self, other: &SortedNets) -> bool {
        self.chunks.len() == other.chunks.len()
            && self
                .chunks
                .iter()
                .zip(&other.chunks)
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }

    /// The prefixes in one vector.
    pub fn to_vec(&self) -> Vec<IpNet> {
        self.iter().copied().collect()
    }
}

impl PartialEq for SortedNets {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && (self.shares_with(other) || self.iter().eq(other.iter()))
    }
}

impl Eq for SortedNets {}

impl FromIterator<IpNet> for SortedNets {
    /// Sorts and deduplicates.
    fn from_iter<I: IntoIterator<Item = IpNet>>(nets: I) -> Self {
        let mut nets: Vec<IpNet> = nets.into_iter().collect();
        nets.sort_unstable();
        nets.dedup();
        SortedNets::from_sorted(nets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn host(n: u32) -> IpNet {
        IpNet::from(std::net::IpAddr::from(n.to_be_bytes()))
    }

    proptest! {
        /// Any history of inserts and removals, from any start, holds what a sorted set would,
        /// chunks within their bounds; a copy taken midway keeps what it held.
        #[test]
        fn behaves_as_a_sorted_set(
            start in proptest::collection::btree_set(0u32..5000, 0..3000),
            ops in proptest::collection::vec((any::<bool>(), 0u32..5000), 0..3000),
        ) {
            let mut model: BTreeSet<IpNet> = start.iter().map(|n| host(*n)).collect();
            let mut set = SortedNets::from_sorted(model.iter().copied().collect());
            let mut snapshot = None;
            for (i, (insert, n)) in ops.iter().enumerate() {
                let net = host(*n);
                if *insert {
                    prop_assert_eq!(set.insert(net), model.insert(net));
                } else {
                    prop_assert_eq!(set.remove(&net), model.remove(&net));
                }
                if i == ops.len() / 2 {
                    snapshot = Some((set.clone(), model.clone()));
                }
            }
            prop_assert_eq!(set.len(), model.len());
            prop_assert!(set.iter().eq(model.iter()));
            prop_assert!(set.chunks.iter().all(|c| !c.is_empty() && c.len() <= MAX_CHUNK));
            for n in 0..5000u32 {
                prop_assert_eq!(set.contains(&host(n)), model.contains(&host(n)));
            }
            if let Some((copy, then)) = snapshot {
                prop_assert!(copy.iter().eq(then.iter()));
            }
            let rebuilt: SortedNets = model.iter().copied().collect();
            prop_assert_eq!(&rebuilt, &set);
        }
    }

    #[test]
    fn a_copy_shares_its_chunks_until_one_changes() {
        let set = SortedNets::from_sorted((0..10_000).map(host).collect());
        let mut copy = set.clone();
        assert!(copy.shares_with(&set));
        copy.insert(host(20_000));
        assert!(!copy.shares_with(&set));
        let shared = copy
            .chunks
            .iter()
            .filter(|c| set.chunks.iter().any(|s| Arc::ptr_eq(s, c)))
            .count();
        assert_eq!(
            shared,
            copy.chunks.len() - 1,
            "only the changed chunk was copied"
        );
    }
}
