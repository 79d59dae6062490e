//! From symbolic remote sets to addresses, through the ipcache ([`IdentityStore`]), kept up to
//! date by the change rather than resolved again.
//!
//! A [`RemoteSet`] names identities; its addresses are their members of the set's family. Where
//! a world identity of the set holds an address (a pod inside a CIDR both allowed at one level,
//! or a longer prefix inside a shorter one), the inner one adds nothing: the outer prefix already
//! matches it. Leaving inner members out keeps a set's addresses disjoint, which nftables'
//! interval sets require, and keeps it small. Whether an address is left out depends only on the
//! address and the set's world prefixes ([`SetAddresses::admits`]), never on which identity it
//! came from or in what order members arrived, so a set patched member by member holds exactly
//! what resolving it again would.
//!
//! [`SetBook`] keeps every set a datapath's rules name, with its name and addresses: a replica
//! that joins or leaves is one address added to or removed from each set naming its identity
//! ([`SetDelta`]), whatever the sets' sizes, and a set that replaces another differing only by
//! identities that just came or went takes over its name (see [`book`]). Both datapaths build
//! on it: the HCN `SetTable` renders a changed set's `Values`, nftables sends the delta as
//! elements.

use std::cmp::Ordering;

use ipnet::IpNet;
use netpol_engine::{IdentityStore, PrefixSet};

use crate::ordered::{Family, RemoteSet};

pub mod book;
mod chunked;
mod digests;

pub use book::{BookedSet, SetBook, SetStep, SlotId};
pub use chunked::SortedNets;
pub use digests::{IdentityDigest, IdentityDigests};

/// Whether an identity of `set` may hold prefixes wider than one address: see
/// [`SetAddresses::holds_ranges`].
pub fn holds_ranges(set: &RemoteSet, store: &IdentityStore) -> bool {
    set.identities
        .iter()
        .any(|id| store.world_holds_ranges(*id))
}

fn family_matches(family: Family, net: &IpNet) -> bool {
    family == Family::Any || Family::of(net) == family
}

/// The addresses of one remote set: disjoint prefixes, sorted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetAddresses {
    family: Family,
    /// The set's world prefixes of its family, the only members that can hold others: whether
    /// one holds an address is a lookup per distinct prefix length, not a scan, so a set of
    /// 70,000 `except` holes resolves in linear time, not quadratic.
    worlds: PrefixSet,
    /// Whether a world identity that may hold ranges is in the set (of either family): only then
    /// may its addresses be prefixes wider than one address.
    holds_ranges: bool,
    /// Sorted, in shared chunks: a datapath's model of the set holds it without a copy, and a
    /// patch copies only the chunk it changes.
    nets: SortedNets,
}

impl SetAddresses {
    /// Resolves `set` in full.
    pub fn resolve(set: &RemoteSet, store: &IdentityStore) -> SetAddresses {
        // Every prefix of every world identity (a class of prefixes has many).
        let worlds = PrefixSet::new(
            set.identities
                .iter()
                .filter(|id| store.get(**id).is_some_and(|i| i.is_world()))
                .flat_map(|id| store.members(*id).iter().copied())
                .filter(|prefix| family_matches(set.family, prefix)),
        );
        let mut resolved = SetAddresses {
            family: set.family,
            worlds,
            holds_ranges: holds_ranges(set, store),
            nets: SortedNets::default(),
        };
        let mut nets = Vec::new();
        for id in &set.identities {
            let world = store.get(*id).is_some_and(|i| i.is_world());
            nets.extend(
                store
                    .members(*id)
                    .iter()
                    .filter(|net| resolved.admits(net, world)),
            );
        }
        // Each identity's members come sorted (a world class's in address order): the stable
        // sort merges those runs (O(n log k) for k identities) instead of sorting the whole
        // again.
        nets.sort();
        nets.dedup();
        resolved.nets = SortedNets::from_sorted(nets);
        resolved
    }

    /// Whether `net`, a member of an identity of the set (`world`: a world identity's prefix),
    /// is one of its addresses: of the set's family and held by none of its world prefixes. A
    /// world prefix is held by a strictly shorter one (it holds itself); a pod or node address
    /// also by a world prefix of its own length (a `/32` naming the same address).
    pub fn admits(&self, net: &IpNet, world: bool) -> bool {
        if !family_matches(self.family, net) {
            return false;
        }
        let held = if world {
            net.prefix_len() > 0 && self.worlds.holds(net, net.prefix_len() - 1)
        } else {
            self.worlds.contains(net)
        };
        !held
    }

    /// Whether the set may hold prefixes wider than one address: whether a world identity that
    /// may hold them is in it ([`IdentityStore::world_holds_ranges`]). The answer is one for
    /// the set's identities, whatever addresses they hold now.
    pub fn holds_ranges(&self) -> bool {
        self.holds_ranges
    }

    /// The addresses, sorted and disjoint.
    pub fn nets(&self) -> impl Iterator<Item = &IpNet> + Clone + '_ {
        self.nets.iter()
    }

    /// The addresses, sorted and disjoint, shared rather than copied.
    pub fn shared(&self) -> SortedNets {
        self.nets.clone()
    }

    pub fn len(&self) -> usize {
        self.nets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }

    /// Applies one identity's change of members; returns what it changed in this set.
    pub(crate) fn patch(&mut self, added: &[IpNet], removed: &[IpNet], world: bool) -> SetDelta {
        let mut delta = SetDelta::default();
        let removed: Vec<IpNet> = removed
            .iter()
            .filter(|net| self.admits(net, world))
            .copied()
            .collect();
        let added: Vec<IpNet> = added
            .iter()
            .filter(|net| self.admits(net, world))
            .copied()
            .collect();
        if removed.is_empty() && added.is_empty() {
            return delta;
        }
        for net in removed {
            if self.nets.remove(&net) {
                delta.removed.push(net);
            }
        }
        for net in added {
            if self.nets.insert(net) {
                delta.added.push(net);
            }
        }
        delta
    }
}

/// What changed in one set's addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetDelta {
    pub added: Vec<IpNet>,
    pub removed: Vec<IpNet>,
}

impl SetDelta {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }

    /// This delta followed by `then`, as one delta from the state before this one. Each delta
    /// names an address at most once; over the two, an address added then removed (or removed
    /// then added) is back where it was and in neither list.
    pub fn then(self, then: SetDelta) -> SetDelta {
        if self.is_empty() {
            return then;
        }
        if then.is_empty() {
            return self;
        }
        // Per address: whether its first and its last change added it.
        let mut changes: std::collections::BTreeMap<IpNet, (bool, bool)> = Default::default();
        for (nets, added) in [(self.removed, false), (self.added, true)] {
            for net in nets {
                changes.insert(net, (added, added));
            }
        }
        for (nets, added) in [(then.removed, false), (then.added, true)] {
            for net in nets {
                changes.entry(net).or_insert((added, added)).1 = added;
            }
        }
        let mut out = SetDelta::default();
        for (net, (first, last)) in changes {
            match (first, last) {
                (true, true) => out.added.push(net),
                (false, false) => out.removed.push(net),
                _ => {}
            }
        }
        out
    }
}

/// The addresses of a set: disjoint prefixes, sorted.
pub fn addresses(set: &RemoteSet, store: &IdentityStore) -> Vec<IpNet> {
    SetAddresses::resolve(set, store).nets().copied().collect()
}

/// What differs between two sorted sequences without repeats: the items only `before` has and
/// the items only `after` has, each in order. One merge pass over both, neither copied: a set's
/// addresses before and after a change may be 250,000 prefixes each.
pub fn sorted_differences<T: Ord>(
    before: impl IntoIterator<Item = T>,
    after: impl IntoIterator<Item = T>,
) -> (Vec<T>, Vec<T>) {
    let (mut gone, mut came) = (Vec::new(), Vec::new());
    let (mut b, mut a) = (before.into_iter().peekable(), after.into_iter().peekable());
    loop {
        let order = match (b.peek(), a.peek()) {
            (Some(x), Some(y)) => x.cmp(y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => break,
        };
        match order {
            Ordering::Equal => {
                b.next();
                a.next();
            }
            Ordering::Less => gone.extend(b.next()),
            Ordering::Greater => came.extend(a.next()),
        }
    }
    (gone, came)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_differences_of_two_sorted_lists() {
        let n = |s: &str| s.parse::<IpNet>().unwrap();
        let (gone, came) = sorted_differences(
            [n("10.0.0.1/32"), n("10.0.0.2/32"), n("10.0.0.5/32")],
            [n("10.0.0.2/32"), n("10.0.0.3/32"), n("10.0.0.9/32")],
        );
        assert_eq!(gone, vec![n("10.0.0.1/32"), n("10.0.0.5/32")]);
        assert_eq!(came, vec![n("10.0.0.3/32"), n("10.0.0.9/32")]);
        assert_eq!(
            sorted_differences([1, 2], Vec::<i32>::new()),
            (vec![1, 2], vec![])
        );
        assert_eq!(
            sorted_differences(Vec::<i32>::new(), [3]),
            (vec![], vec![3])
        );
    }
    use netpol_engine::{Identity, Labels, PodInfo};

    fn pod(name: &str) -> PodInfo {
        PodInfo {
            namespace: "ns".into(),
            name: name.into(),
            labels: Labels::new().into(),
            namespace_labels: Labels::new().into(),
            node: None,
            ports: Vec::new(),
        }
    }

    fn net(text: &str) -> IpNet {
        text.parse().unwrap()
    }

    #[test]
    fn members_inside_a_prefix_of_the_set_add_nothing() {
        let mut store = IdentityStore::new();
        let (wide, _) = store.insert(Identity::world(net("10.0.0.0/8")));
        let (narrow, _) = store.insert(Identity::world(net("10.1.0.0/16")));
        let (inside, _) = store.insert(Identity::pod(pod("a"), "10.1.2.3".parse().unwrap()));
        let (outside, _) = store.insert(Identity::pod(pod("b"), "192.168.0.1".parse().unwrap()));
        let (v6, _) = store.insert(Identity::pod(pod("c"), "fd00::1".parse().unwrap()));
        let set = RemoteSet {
            family: Family::V4,
            identities: vec![wide, narrow, inside, outside, v6],
        };
        assert_eq!(
            addresses(&set, &store),
            vec![net("10.0.0.0/8"), net("192.168.0.1/32")]
        );
        let alone = RemoteSet {
            family: Family::V4,
            identities: vec![narrow, inside],
        };
        assert_eq!(addresses(&alone, &store), vec![net("10.1.0.0/16")]);
    }
}
