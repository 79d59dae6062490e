//! World identities as classes of prefixes (issue 33, "memory follows what can match").
//!
//! The prefixes live policies name are the *atoms* of the address space outside the cluster: an
//! address resolves to the longest atom holding it, as before. Atoms that every live entry
//! treats alike share one identity, as replicas share one pod identity: a policy allowing egress
//! to 50,000 `/32`s makes one identity of 50,000 prefixes, one MapState entry per endpoint and one
//! address set, not 50,000 of each. [`WorldClass`] is what makes atoms alike; the engine computes
//! it (`engine::identities`) and moves an atom to another class when it changes.

use std::sync::Arc;

use ipnet::IpNet;

use super::{Identity, IdentityId, IdentityKey, IdentityStore};

/// A live policy entry as a world class names it: its policy's key and its position among the
/// policy's entries. Unlike a position in the engine's entry list, it does not move when another
/// policy comes or goes, so the classes of prefixes that policy does not name keep their ids.
pub type EntryRef = (Arc<str>, u32);

/// What makes world prefixes one identity.
///
/// Two prefixes are alike when they are of one [`Leaves`] kind and the same live entries select
/// them through a CIDR peer: every MapState is built from entries (a peer adds its entry's rule
/// for what it selects), and the entity peers (`world`, `all`) select every world identity. A
/// CIDR selector then selects a class when it covers any of its prefixes: an entry covering one
/// prefix of a class is in the class's key, so it covers all of them (through one peer or
/// another).
///
/// Only *leaf* prefixes (no other world prefix inside them) are pooled. A datapath matches
/// addresses, not identities, so a rule for a prefix also catches the prefixes inside it; it
/// decides per identity whether those need rules of their own ahead of it (`netpol_datapath`'s
/// nesting). A class of leaves has nothing of another world identity inside it, so that
/// decision stays one per class. A prefix holding others (`0.0.0.0/0`, an `except`'s outer
/// prefix) is an identity of its own, as before; so are `0.0.0.0/0` and `::/0`, the outside
/// addresses no policy names.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorldClass {
    /// A prefix that holds other world prefixes.
    Prefix(IpNet),
    /// Leaf prefixes of one kind that exactly these live entries select, sorted (none: only
    /// entity peers can select them, like an `except` hole no other peer names).
    SelectedBy(Arc<[EntryRef]>, Leaves),
}

/// Whether a class of leaf prefixes holds single addresses or wider ranges, never both.
///
/// An identity's addresses then stay of one kind as prefixes join and leave it, so a datapath
/// can match a set of single-address identities exactly, which it never has to change into a
/// range match: nftables keeps such a set in a hash table, where an interval set inserts each
/// prefix twice into a tree with overlap checks (most of the kernel's cost of a live policy of
/// 50,000 `/32`s). Entries that name both kinds make two identities where they made one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Leaves {
    SingleAddresses,
    Ranges,
}

impl Leaves {
    pub fn of(prefix: &IpNet) -> Leaves {
        if crate::prefixes::is_single_address(prefix) {
            Leaves::SingleAddresses
        } else {
            Leaves::Ranges
        }
    }
}

impl WorldClass {
    /// Whether the identity of this class may hold a prefix wider than one address.
    pub fn holds_ranges(&self) -> bool {
        !matches!(self, WorldClass::SelectedBy(_, Leaves::SingleAddresses))
    }
}

/// How a class of several prefixes reads: its first prefix and how many more.
pub(super) fn describe_class(representative: &Identity, members: usize) -> String {
    let more = members - 1;
    let noun = if more == 1 { "prefix" } else { "prefixes" };
    format!("{representative} (+{} {noun})", thousands(more))
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl IdentityStore {
    /// Adds the world prefix `prefix` to the identity of `class`, made if new. Returns the
    /// identity and whether it is new. The identity's representative is its lowest prefix, so
    /// that it reads the same whatever order its prefixes arrived in.
    pub fn insert_world_member(&mut self, prefix: IpNet, class: WorldClass) -> (IdentityId, bool) {
        let prefix = prefix.trunc();
        debug_assert!(
            !matches!(&class, WorldClass::SelectedBy(_, leaves) if *leaves != Leaves::of(&prefix)),
            "{prefix} joins a class of the other kind"
        );
        let key = IdentityKey::World(class);
        let Some(&id) = self.by_key.get(&key) else {
            return self.insert_keyed(key, Identity::world(prefix));
        };
        self.add_world_member(id, prefix);
        (id, false)
    }

    /// Adds the world prefix `prefix` to the existing world identity `id` (of the class
    /// [`IdentityStore::insert_world_member`] would find).
    pub(crate) fn add_world_member(&mut self, id: IdentityId, prefix: IpNet) {
        let prefix = prefix.trunc();
        if self.world.insert(prefix, id) != Some(id) {
            let stored = self.by_id.get_mut(&id).expect("indexed identity exists");
            stored.members.push(prefix);
            if prefix < stored.representative.prefix {
                stored.representative.prefix = prefix;
            }
        }
    }

    /// Takes world prefixes out of their identities. Returns each identity that lost some, with
    /// the identity itself where that was its last prefix (it is then gone), in id order.
    pub fn remove_world_members(
        &mut self,
        prefixes: &[IpNet],
    ) -> Vec<(IdentityId, Option<Identity>)> {
        let mut by_id: std::collections::BTreeMap<IdentityId, foldhash::HashSet<IpNet>> =
            Default::default();
        for prefix in prefixes {
            if let Some(id) = self.world.remove(prefix) {
                by_id.entry(id).or_default().insert(*prefix);
            }
        }
        let mut out = Vec::new();
        for (id, gone) in by_id {
            let stored = self.by_id.get_mut(&id).expect("indexed identity exists");
            // One pass, whatever the number of prefixes leaving: a class of 50,000 losing them
            // one by one was quadratic.
            stored.members.retain(|m| !gone.contains(m));
            if stored.members.is_empty() {
                let identity = self.remove(id);
                out.push((id, identity));
                continue;
            }
            if gone.contains(&stored.representative.prefix) {
                let lowest = *stored.members.iter().min().expect("not empty");
                stored.representative.prefix = lowest;
            }
            out.push((id, None));
        }
        out
    }

    /// Gives back the room a world identity's prefix list grew beyond what it holds: a class
    /// of 50,000 prefixes joined one by one kept room for 65,536.
    pub(crate) fn trim_world_members(&mut self, id: IdentityId) {
        if let Some(stored) = self.by_id.get_mut(&id) {
            stored.members.shrink_to_fit();
        }
    }

    /// The class of a world identity made by [`IdentityStore::insert_world_member`].
    pub fn world_class(&self, id: IdentityId) -> Option<&WorldClass> {
        match self.by_id.get(&id).map(|s| &s.key) {
            Some(IdentityKey::World(class)) => Some(class),
            _ => None,
        }
    }

    /// Whether `id` is a world identity that may hold a prefix wider than one address (see
    /// [`Leaves`]); false for every other identity, whose addresses are single addresses.
    pub fn world_holds_ranges(&self, id: IdentityId) -> bool {
        let Some(stored) = self.by_id.get(&id) else {
            return false;
        };
        match &stored.key {
            IdentityKey::World(class) => class.holds_ranges(),
            // A world identity of one prefix, inserted as itself.
            _ => {
                stored.representative.is_world()
                    && Leaves::of(&stored.representative.prefix) == Leaves::Ranges
            }
        }
    }

    /// For each of `nets` (best given in order), the world prefixes holding it other than itself
    /// and the whole address spaces: `f` gets each such prefix.
    pub fn world_prefixes_holding_each_strictly<'n>(
        &self,
        nets: impl IntoIterator<Item = &'n IpNet>,
        mut f: impl FnMut(IpNet),
    ) {
        self.world
            .holding_each(nets, |n| 1..n.prefix_len(), |_, outer, _| f(outer));
    }

    /// The world identities holding any of `nets` (best given in order; themselves included),
    /// unsorted and possibly repeated.
    pub fn worlds_holding_any<'n>(
        &self,
        nets: impl IntoIterator<Item = &'n IpNet>,
    ) -> Vec<IdentityId> {
        self.worlds_holding_at(nets, |n| 0..n.prefix_len() + 1)
    }

    /// The world identities of prefixes strictly shorter than one of `nets` holding it (best
    /// given in order), unsorted and possibly repeated.
    pub fn worlds_strictly_holding_any<'n>(
        &self,
        nets: impl IntoIterator<Item = &'n IpNet>,
    ) -> Vec<IdentityId> {
        self.worlds_holding_at(nets, |n| 0..n.prefix_len())
    }

    fn worlds_holding_at<'n>(
        &self,
        nets: impl IntoIterator<Item = &'n IpNet>,
        lengths: impl Fn(&IpNet) -> std::ops::Range<u8>,
    ) -> Vec<IdentityId> {
        let mut out = Vec::new();
        self.world
            .holding_each(nets, lengths, |_, _, id| out.push(id));
        out
    }

    /// The world identity of exactly the prefix `prefix`, if it is one.
    pub fn world_of(&self, prefix: &IpNet) -> Option<IdentityId> {
        self.world.get(prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn class(policy: &str, leaves: Leaves) -> WorldClass {
        WorldClass::SelectedBy(Arc::from([(Arc::from(policy), 0)]), leaves)
    }

    #[test]
    fn prefixes_of_one_class_share_an_identity_and_resolve_to_it() {
        let mut store = IdentityStore::new();
        let (all, _) =
            store.insert_world_member(net("0.0.0.0/0"), WorldClass::Prefix(net("0.0.0.0/0")));
        let (a, new_a) = store.insert_world_member(net("192.0.2.0/25"), class("p", Leaves::Ranges));
        let (b, new_b) =
            store.insert_world_member(net("198.51.100.0/24"), class("p", Leaves::Ranges));
        assert!(new_a && !new_b);
        assert_eq!(a, b);
        assert_eq!(store.members(a).len(), 2);
        assert_eq!(store.resolve("192.0.2.1".parse().unwrap()), Some(a));
        assert_eq!(store.resolve("198.51.100.7".parse().unwrap()), Some(a));
        assert_eq!(store.resolve("192.0.2.200".parse().unwrap()), Some(all));
        assert_eq!(store.summary(a), "world 192.0.2.0/25 (+1 prefix)");
        assert_eq!(store.describe(a), "world [192.0.2.0/25,198.51.100.0/24]");
        assert_eq!(store.identities_within(net("0.0.0.0/0")), vec![all, a]);
        // The representative is the lowest prefix, and follows it when it leaves.
        let gone = store.remove_world_members(&[net("192.0.2.0/25")]);
        assert_eq!(gone, vec![(a, None)]);
        assert_eq!(store.get(a).unwrap().prefix, net("198.51.100.0/24"));
        assert_eq!(store.resolve("192.0.2.1".parse().unwrap()), Some(all));
        let gone = store.remove_world_members(&[net("198.51.100.0/24")]);
        assert_eq!(gone.len(), 1);
        assert!(gone[0].1.is_some());
        assert!(store.get(a).is_none());
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn a_class_has_an_address_of_its_own_while_one_prefix_has_one() {
        let mut store = IdentityStore::new();
        let hosts = class("p", Leaves::SingleAddresses);
        let (class_id, _) = store.insert_world_member(net("10.0.0.1/32"), hosts.clone());
        store.insert_world_member(net("10.0.0.2/32"), hosts);
        let pod = crate::identity::NodeInfo {
            name: "n".into(),
            labels: Default::default(),
        };
        // A node at the lowest prefix's address claims it first.
        store.insert(Identity::node(pod, "10.0.0.1".parse().unwrap()));
        let reps = store.representative_addresses();
        assert_eq!(reps.get(&class_id), Some(&"10.0.0.2".parse().unwrap()));
    }

    #[test]
    fn single_addresses_and_ranges_of_the_same_entries_are_two_identities() {
        let mut store = IdentityStore::new();
        let (all, _) =
            store.insert_world_member(net("0.0.0.0/0"), WorldClass::Prefix(net("0.0.0.0/0")));
        let of = |prefix: &str| {
            let prefix = net(prefix);
            (prefix, class("p", Leaves::of(&prefix)))
        };
        let mut ids = Vec::new();
        for (prefix, class) in [of("10.0.0.1/32"), of("10.1.0.0/24"), of("10.0.0.2/32")] {
            ids.push(store.insert_world_member(prefix, class).0);
        }
        assert_eq!(ids[0], ids[2]);
        assert_ne!(ids[0], ids[1]);
        assert!(!store.world_holds_ranges(ids[0]));
        assert!(store.world_holds_ranges(ids[1]));
        assert!(
            store.world_holds_ranges(all),
            "a prefix holding others is a range"
        );
        let (alone, _) = store.insert(Identity::world(net("192.0.2.0/24")));
        let (host, _) = store.insert(Identity::world(net("192.0.2.9/32")));
        assert!(store.world_holds_ranges(alone) && !store.world_holds_ranges(host));
        assert_eq!(Leaves::of(&net("2001:db8::1/128")), Leaves::SingleAddresses);
        assert_eq!(Leaves::of(&net("2001:db8::/127")), Leaves::Ranges);
    }

    #[test]
    fn large_counts_read_with_separators() {
        assert_eq!(thousands(49_999), "49,999");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_000), "1,000,000");
    }
}
