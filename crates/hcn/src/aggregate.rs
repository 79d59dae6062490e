//! A set of disjoint prefixes kept in its shortest form (every pair of sibling prefixes merged
//! into their parent, recursively), patched one prefix at a time.
//!
//! HNS takes an IP set's `Values` whole, so a replica's cost on HCN is rendering the set again;
//! the shortest form keeps that small (pods of one node are usually consecutive addresses, which
//! merge into a few prefixes). Aggregating a set of n addresses anew sorts them; patching the
//! shortest form is a few lookups per prefix added or removed, as a buddy allocator merges and
//! splits its blocks. The result is the same as [`IpNet::aggregate`] of the same addresses: a
//! prefix is kept exactly when it is covered and its parent is not.

use std::collections::BTreeSet;

use ipnet::IpNet;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Aggregated {
    nets: BTreeSet<IpNet>,
}

/// The other half of `net`'s parent.
fn sibling(net: &IpNet) -> Option<IpNet> {
    let parent = net.supernet()?;
    parent
        .subnets(net.prefix_len())
        .expect("one bit longer than the parent")
        .find(|half| half != net)
}

impl Aggregated {
    /// The shortest form of disjoint prefixes, in one sort (a tree built in order), not one
    /// merge at a time.
    pub fn of_disjoint<'a>(nets: impl IntoIterator<Item = &'a IpNet>) -> Aggregated {
        let nets: Vec<IpNet> = nets.into_iter().copied().collect();
        Aggregated {
            nets: IpNet::aggregate(&nets).into_iter().collect(),
        }
    }

    /// Adds `net`, which overlaps nothing the set covers.
    pub fn insert(&mut self, net: IpNet) {
        let mut net = net.trunc();
        while let Some(sibling) = sibling(&net) {
            if !self.nets.remove(&sibling) {
                break;
            }
            net = net
                .supernet()
                .expect("a prefix with a sibling has a parent");
        }
        self.nets.insert(net);
    }

    /// Takes `net`, which the set covers, out of it: the prefix holding it is split into the
    /// halves along the way down that do not hold it.
    pub fn remove(&mut self, net: IpNet) {
        let net = net.trunc();
        let last = IpNet::new(net.network(), net.max_prefix_len()).expect("a host length");
        // Prefixes are disjoint, so the one holding `net` is the last starting at or before it.
        let Some(holder) = self
            .nets
            .range(..=last)
            .next_back()
            .copied()
            .filter(|held| held.contains(&net))
        else {
            return;
        };
        self.nets.remove(&holder);
        let mut current = holder;
        while current.prefix_len() < net.prefix_len() {
            let mut halves = current
                .subnets(current.prefix_len() + 1)
                .expect("one bit longer");
            let (low, high) = (halves.next().expect("two"), halves.next().expect("two"));
            let (toward, away) = if low.contains(&net) {
                (low, high)
            } else {
                (high, low)
            };
            self.nets.insert(away);
            current = toward;
        }
    }

    /// The prefixes, sorted.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &IpNet> + '_ {
        self.nets.iter()
    }

    pub fn len(&self) -> usize {
        self.nets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn net(text: &str) -> IpNet {
        text.parse().unwrap()
    }

    #[test]
    fn consecutive_addresses_merge_and_split_again() {
        let mut set = Aggregated::default();
        for host in 0..4 {
            set.insert(net(&format!("10.0.0.{host}/32")));
        }
        assert_eq!(
            set.iter().copied().collect::<Vec<_>>(),
            vec![net("10.0.0.0/30")]
        );
        set.remove(net("10.0.0.2/32"));
        assert_eq!(
            set.iter().copied().collect::<Vec<_>>(),
            vec![net("10.0.0.0/31"), net("10.0.0.3/32")]
        );
    }

    proptest! {
        /// Any history of adding and removing addresses and prefixes leaves what aggregating
        /// the remaining ones anew gives.
        #[test]
        fn patched_equals_aggregated_anew(
            steps in proptest::collection::vec((any::<bool>(), 0u8..64, 28u8..=32, any::<bool>()), 1..80),
        ) {
            let mut set = Aggregated::default();
            let mut members: BTreeSet<IpNet> = BTreeSet::new();
            for (add, host, len, v6) in steps {
                let candidate = if v6 {
                    IpNet::new([0xfd00, 0, 0, 0, 0, 0, 0, host as u16].into(), 96 + len).unwrap()
                } else {
                    IpNet::new([10, 0, 0, host].into(), len).unwrap()
                }
                .trunc();
                if add {
                    if members.iter().all(|m| !m.contains(&candidate) && !candidate.contains(m)) {
                        members.insert(candidate);
                        set.insert(candidate);
                    }
                } else if let Some(member) = members.iter().find(|m| **m == candidate).copied() {
                    members.remove(&member);
                    set.remove(member);
                }
                let anew = IpNet::aggregate(&members.iter().copied().collect());
                prop_assert_eq!(set.iter().copied().collect::<Vec<_>>(), anew);
            }
        }
    }
}
