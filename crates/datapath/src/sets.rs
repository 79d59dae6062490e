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
//! [`ResolvedSets`] keeps every set in use with its addresses and, per identity, the members
//! the sets were last given: a replica that joins or leaves is one address added to or removed
//! from each set naming its identity ([`SetDelta`]), whatever the sets' sizes. Both datapaths
//! build on it: the HCN `SetTable` renders a changed set's `Values`, nftables sends the delta as
//! elements.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use ipnet::IpNet;
use netpol_engine::{IdentityId, IdentityStore, PrefixSet};

use crate::ordered::{Family, RemoteSet};

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
    /// Whether a world identity of any family is in the set (its addresses may be prefixes).
    names_world: bool,
    /// Sorted. Shared, so that a datapath's model of the set holds it without a copy; a patch
    /// copies it only while an older model still holds it.
    nets: Arc<Vec<IpNet>>,
}

impl SetAddresses {
    /// Resolves `set` in full.
    pub fn resolve(set: &RemoteSet, store: &IdentityStore) -> SetAddresses {
        let worlds = PrefixSet::new(
            set.identities
                .iter()
                .filter_map(|id| store.get(*id).filter(|i| i.is_world()).map(|i| i.prefix))
                .filter(|prefix| family_matches(set.family, prefix)),
        );
        let names_world = set
            .identities
            .iter()
            .any(|id| store.get(*id).is_some_and(|i| i.is_world()));
        let mut resolved = SetAddresses {
            family: set.family,
            worlds,
            names_world,
            nets: Arc::default(),
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
        nets.sort_unstable();
        nets.dedup();
        resolved.nets = Arc::new(nets);
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

    /// Whether a world identity (a prefix of either family) is in the set: only then may its
    /// addresses be prefixes rather than hosts.
    pub fn names_world(&self) -> bool {
        self.names_world
    }

    /// The addresses, sorted and disjoint.
    pub fn nets(&self) -> std::slice::Iter<'_, IpNet> {
        self.nets.iter()
    }

    /// The addresses, sorted and disjoint, shared rather than copied.
    pub fn shared(&self) -> Arc<Vec<IpNet>> {
        self.nets.clone()
    }

    pub fn len(&self) -> usize {
        self.nets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }

    /// Applies one identity's change of members; returns what it changed in this set.
    fn patch(&mut self, added: &[IpNet], removed: &[IpNet], world: bool) -> SetDelta {
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
        let nets = Arc::make_mut(&mut self.nets);
        for net in removed {
            if let Ok(at) = nets.binary_search(&net) {
                nets.remove(at);
                delta.removed.push(net);
            }
        }
        for net in added {
            if let Err(at) = nets.binary_search(&net) {
                nets.insert(at, net);
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

    fn extend(&mut self, other: SetDelta) {
        self.added.extend(other.added);
        self.removed.extend(other.removed);
    }
}

/// Every remote set in use with its addresses, patched as identities gain and lose members.
///
/// A set that falls out of use is kept one more sweep ([`ResolvedSets::retain`]), still
/// patched: a pod of a new label set replaces sets of thousands of identities by the same sets
/// plus its own identity, and such a set is then derived from the one it replaces (its
/// addresses plus the new identity's) rather than resolved and sorted again.
#[derive(Debug, Default)]
pub struct ResolvedSets {
    sets: HashMap<Arc<RemoteSet>, SetAddresses>,
    /// Sets dropped by the last [`ResolvedSets::retain`], kept up to date until the next one.
    retired: HashMap<Arc<RemoteSet>, SetAddresses>,
    /// The sets (in use or retired) naming each identity, so a change finds its sets without a
    /// scan. Shared, not copied: a set of k identities is listed under each of them, and k
    /// copies of it would cost k² identity ids.
    holders: HashMap<IdentityId, Vec<Arc<RemoteSet>>>,
    /// Each named identity's members as the sets were last given them, sorted: what a change
    /// is measured against. An identity unknown to the store has none until it arrives.
    given: HashMap<IdentityId, Vec<IpNet>>,
    /// The world identities among those, whose prefixes decide what else a set admits: a set
    /// differing from another by one of them is resolved, not derived.
    worlds: HashSet<IdentityId>,
    /// Every set (in use or retired) by [`identities_sum`]: a set differing from a known one
    /// by one identity is found by one lookup per candidate identity.
    by_sum: HashMap<u64, Vec<Arc<RemoteSet>>>,
    /// The identities of the last [`ResolvedSets::update`]: the candidates by which a new set
    /// may differ from a known one.
    recent: Vec<IdentityId>,
}

/// A set made from a known one, and what it changed: lets a datapath derive its own form of
/// the set (HCN's shortest form) from the known set's the same way.
#[derive(Clone, Debug)]
pub struct Derivation {
    pub from: Arc<RemoteSet>,
    pub delta: SetDelta,
}

/// At most this many identities of the last change are tried as the difference between a new
/// set and a known one: a larger change (a resync) resolves its new sets.
const MAX_CANDIDATES: usize = 16;

impl ResolvedSets {
    /// The addresses of `set`, resolved on first use.
    pub fn get(&mut self, set: &RemoteSet, store: &IdentityStore) -> &SetAddresses {
        self.entry(set, store).0
    }

    /// The addresses of `set`; on first use, derived from a known set that differs from it by
    /// one identity of the last change when there is one (with that derivation), else
    /// resolved.
    pub fn entry(
        &mut self,
        set: &RemoteSet,
        store: &IdentityStore,
    ) -> (&SetAddresses, Option<Derivation>) {
        if let Some((shared, addresses)) = self.retired.remove_entry(set) {
            self.sets.insert(shared, addresses);
        }
        if self.sets.contains_key(set) {
            return (&self.sets[set], None);
        }
        let sum = identities_sum(set);
        let shared = Arc::new(set.clone());
        for id in &set.identities {
            self.holders.entry(*id).or_default().push(shared.clone());
            if !self.given.contains_key(id) {
                self.given.insert(*id, sorted_members(store, *id));
                if store.get(*id).is_some_and(|i| i.is_world()) {
                    self.worlds.insert(*id);
                }
            }
        }
        let derived = self.derive(set, sum);
        let (addresses, derivation) = match derived {
            Some((addresses, derivation)) => (addresses, Some(derivation)),
            None => (SetAddresses::resolve(set, store), None),
        };
        self.by_sum.entry(sum).or_default().push(shared.clone());
        self.sets.insert(shared, addresses);
        (&self.sets[set], derivation)
    }

    /// `set` made from a known set that differs from it by one non-world identity of the last
    /// change: the known set's addresses (up to date: retired sets are patched too) plus or
    /// minus that identity's members. Members of different identities never share an address
    /// (the ipcache maps an address to one identity), so this is exactly what resolving gives.
    fn derive(&self, set: &RemoteSet, sum: u64) -> Option<(SetAddresses, Derivation)> {
        if self.recent.len() > MAX_CANDIDATES {
            return None;
        }
        for &id in &self.recent {
            if self.worlds.contains(&id) {
                continue;
            }
            let joins = set.contains(id);
            let neighbour_sum = if joins {
                sum.wrapping_sub(identity_hash(id))
            } else {
                sum.wrapping_add(identity_hash(id))
            };
            let Some(candidates) = self.by_sum.get(&neighbour_sum) else {
                continue;
            };
            let Some(from) = candidates.iter().find(|known| {
                known.family == set.family
                    && if joins {
                        one_more(&set.identities, &known.identities, id)
                    } else {
                        one_more(&known.identities, &set.identities, id)
                    }
            }) else {
                continue;
            };
            let Some(known) = self.sets.get(from).or_else(|| self.retired.get(from)) else {
                continue;
            };
            let members = self.given.get(&id).map_or(&[][..], Vec::as_slice);
            let mut addresses = known.clone();
            let delta = if joins {
                addresses.patch(members, &[], false)
            } else {
                addresses.patch(&[], members, false)
            };
            let derivation = Derivation {
                from: from.clone(),
                delta,
            };
            return Some((addresses, derivation));
        }
        None
    }

    /// The addresses of `set`, if it is in use.
    pub fn peek(&self, set: &RemoteSet) -> Option<&SetAddresses> {
        self.sets.get(set)
    }

    /// Brings every set naming a `changed` identity up to date with its members now; returns
    /// the sets (in use or retired) whose addresses changed, with what changed. Costs the members that came
    /// and went, not the sets' sizes.
    pub fn update(
        &mut self,
        store: &IdentityStore,
        changed: &BTreeSet<IdentityId>,
    ) -> Vec<(Arc<RemoteSet>, SetDelta)> {
        self.recent = changed.iter().take(MAX_CANDIDATES + 1).copied().collect();
        let mut deltas: HashMap<Arc<RemoteSet>, SetDelta> = HashMap::new();
        for id in changed {
            let (Some(holders), Some(given)) = (self.holders.get(id), self.given.get_mut(id))
            else {
                continue;
            };
            let now = sorted_members(store, *id);
            let (added, removed) = difference(&now, given);
            *given = now;
            if added.is_empty() && removed.is_empty() {
                continue;
            }
            let world = self.worlds.contains(id);
            for set in holders {
                let addresses = match self.sets.get_mut(set) {
                    Some(addresses) => addresses,
                    None => self.retired.get_mut(set).expect("holders list known sets"),
                };
                let delta = addresses.patch(&added, &removed, world);
                if !delta.is_empty() {
                    deltas.entry(set.clone()).or_default().extend(delta);
                }
            }
        }
        deltas.into_iter().collect()
    }

    /// Takes the sets `keep` refuses out of use (kept, patched, one more sweep, as what new
    /// sets are derived from); returns the sets forgotten for good, those already out of use at
    /// the last sweep. Visits only the identities of the sets it forgets: a sweep that drops
    /// nothing (every reconcile of a replica) costs one look per set, not one per identity of
    /// every set.
    pub fn retain(&mut self, mut keep: impl FnMut(&RemoteSet) -> bool) -> Vec<Arc<RemoteSet>> {
        let mut retiring: Vec<(Arc<RemoteSet>, SetAddresses)> = Vec::new();
        let mut kept = HashMap::with_capacity(self.sets.len());
        for (set, addresses) in self.sets.drain() {
            if keep(&set) {
                kept.insert(set, addresses);
            } else {
                retiring.push((set, addresses));
            }
        }
        self.sets = kept;
        let forgotten: Vec<Arc<RemoteSet>> =
            std::mem::take(&mut self.retired).into_keys().collect();
        self.retired = retiring.into_iter().collect();
        for set in &forgotten {
            let sum = identities_sum(set);
            if let Some(same_sum) = self.by_sum.get_mut(&sum) {
                same_sum.retain(|s| !Arc::ptr_eq(s, set));
                if same_sum.is_empty() {
                    self.by_sum.remove(&sum);
                }
            }
            for id in &set.identities {
                let Some(holders) = self.holders.get_mut(id) else {
                    continue;
                };
                holders.retain(|s| !Arc::ptr_eq(s, set));
                if holders.is_empty() {
                    self.holders.remove(id);
                    self.given.remove(id);
                    self.worlds.remove(id);
                }
            }
        }
        forgotten
    }

    pub fn clear(&mut self) {
        *self = ResolvedSets::default();
    }

    /// The sets in use.
    pub fn len(&self) -> usize {
        self.sets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }
}

/// A well-mixed hash of one identity (SplitMix64's finaliser), summed over a set's identities.
fn identity_hash(id: IdentityId) -> u64 {
    let mut z = u64::from(id.0).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The sum of a set's identity hashes: a set with one more (or one fewer) identity is one
/// addition away, so its neighbours are found without comparing sets.
fn identities_sum(set: &RemoteSet) -> u64 {
    set.identities
        .iter()
        .fold(0u64, |sum, id| sum.wrapping_add(identity_hash(*id)))
}

/// Whether sorted `longer` is sorted `shorter` with `id` inserted.
fn one_more(longer: &[IdentityId], shorter: &[IdentityId], id: IdentityId) -> bool {
    if longer.len() != shorter.len() + 1 {
        return false;
    }
    let Ok(at) = longer.binary_search(&id) else {
        return false;
    };
    longer[..at] == shorter[..at] && longer[at + 1..] == shorter[at..]
}

fn sorted_members(store: &IdentityStore, id: IdentityId) -> Vec<IpNet> {
    let mut members = store.members(id).to_vec();
    members.sort_unstable();
    members.dedup();
    members
}

/// What `now` has that `before` lacks, and what `before` has that `now` lacks (both sorted).
fn difference(now: &[IpNet], before: &[IpNet]) -> (Vec<IpNet>, Vec<IpNet>) {
    let (mut added, mut removed) = (Vec::new(), Vec::new());
    let (mut a, mut b) = (now.iter().peekable(), before.iter().peekable());
    loop {
        match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if x == y => {
                a.next();
                b.next();
            }
            (Some(x), Some(y)) if x < y => added.extend(a.next()),
            (Some(_), Some(_)) | (None, Some(_)) => removed.extend(b.next()),
            (Some(_), None) => added.extend(a.next()),
            (None, None) => break,
        }
    }
    (added, removed)
}

/// The addresses of a set: disjoint prefixes, sorted.
pub fn addresses(set: &RemoteSet, store: &IdentityStore) -> Vec<IpNet> {
    SetAddresses::resolve(set, store).nets().copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use netpol_engine::{Identity, Labels, PodInfo};
    use proptest::prelude::*;

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

    #[test]
    fn a_replica_is_one_address_in_each_set_naming_its_identity() {
        let mut store = IdentityStore::new();
        let (web, _) = store.insert_shared(
            Identity::pod(pod("web-1"), "10.2.0.1".parse().unwrap()),
            vec![],
        );
        let (world, _) = store.insert(Identity::world(net("10.1.0.0/16")));
        let both = RemoteSet {
            family: Family::V4,
            identities: vec![web, world],
        };
        let web_only = RemoteSet {
            family: Family::V4,
            identities: vec![web],
        };
        let mut sets = ResolvedSets::default();
        sets.get(&both, &store);
        sets.get(&web_only, &store);
        store.insert_shared(
            Identity::pod(pod("web-2"), "10.2.0.2".parse().unwrap()),
            vec![],
        );
        let mut deltas = sets.update(&store, &BTreeSet::from([web]));
        deltas.sort_by(|a, b| a.0.cmp(&b.0));
        let expected = SetDelta {
            added: vec![net("10.2.0.2/32")],
            removed: vec![],
        };
        assert_eq!(deltas.len(), 2);
        assert!(deltas.iter().all(|(_, d)| *d == expected));
        assert_eq!(
            sets.peek(&both)
                .unwrap()
                .nets()
                .copied()
                .collect::<Vec<_>>(),
            vec![net("10.1.0.0/16"), net("10.2.0.1/32"), net("10.2.0.2/32")]
        );
        // Unchanged members change nothing.
        assert!(sets
            .update(&store, &BTreeSet::from([web, world]))
            .is_empty());
    }

    #[test]
    fn a_set_with_one_identity_more_or_less_is_derived_from_the_set_it_replaces() {
        let mut store = IdentityStore::new();
        let mut labelled = |app: &str, ip: &str| {
            let mut info = pod(ip);
            info.labels = Labels::from([("app".to_string(), app.to_string())]).into();
            store
                .insert_shared(Identity::pod(info, ip.parse().unwrap()), vec![])
                .0
        };
        let web = labelled("web", "10.0.0.1");
        let db = labelled("db", "10.0.0.2");
        let new = labelled("new", "10.0.0.3");
        let before = RemoteSet {
            family: Family::V4,
            identities: vec![web, db],
        };
        let after = RemoteSet {
            family: Family::V4,
            identities: vec![web, db, new],
        };
        let mut sets = ResolvedSets::default();
        sets.get(&before, &store);
        sets.update(&store, &BTreeSet::from([new]));
        sets.retain(|s| *s != before);
        let (got, derivation) = sets.entry(&after, &store);
        assert_eq!(
            got.nets().copied().collect::<Vec<_>>(),
            addresses(&after, &store)
        );
        let derivation = derivation.expect("derived from the set it replaces");
        assert_eq!(*derivation.from, before);
        assert_eq!(derivation.delta.added, vec![net("10.0.0.3/32")]);
        // The pod leaves: its identity goes, and the set without it is derived again.
        store.remove_address("10.0.0.3".parse().unwrap());
        sets.update(&store, &BTreeSet::from([new]));
        // This sweep forgets `before` (out of use since the last one) and retires `after`.
        let forgotten = sets.retain(|s| *s != after);
        assert_eq!(forgotten.len(), 1);
        assert_eq!(*forgotten[0], before);
        assert!(sets.peek(&before).is_none());
        let (got, derivation) = sets.entry(&before, &store);
        assert_eq!(
            got.nets().copied().collect::<Vec<_>>(),
            addresses(&before, &store)
        );
        assert_eq!(*derivation.expect("derived").from, after);
    }

    /// One step of a random history: an address joins the shared identity of label set
    /// `labels` (a new identity when no pod has those labels), or leaves.
    #[derive(Clone, Debug)]
    enum Step {
        Join {
            host: u8,
            labels: u8,
        },
        Leave {
            host: u8,
        },
        /// The set falls out of use and comes back.
        Forget {
            set: usize,
        },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (any::<u8>(), 0u8..8).prop_map(|(host, labels)| Step::Join { host, labels }),
            any::<u8>().prop_map(|host| Step::Leave { host }),
            (0usize..3).prop_map(|set| Step::Forget { set }),
        ]
    }

    proptest! {
        /// Sets patched member by member hold exactly what resolving them again would, through
        /// any history of joins and leaves, with world prefixes holding some of the addresses.
        #[test]
        fn patched_sets_equal_sets_resolved_again(
            worlds in proptest::collection::vec((0u8..=255, 24u8..=32), 0..4),
            steps in proptest::collection::vec(step(), 1..40),
        ) {
            let host = |h: u8| -> std::net::IpAddr { [10, 0, 0, h].into() };
            let mut store = IdentityStore::new();
            let world_ids: Vec<IdentityId> = worlds
                .iter()
                .map(|(h, len)| {
                    let prefix = IpNet::new(host(*h), *len).unwrap().trunc();
                    store.insert(Identity::world(prefix)).0
                })
                .collect();
            let cidrs = |store: &IdentityStore, h: u8| -> Vec<IpNet> {
                let mut cidrs: Vec<IpNet> = store
                    .world_prefixes()
                    .map(|(p, _)| *p)
                    .filter(|p| p.contains(&host(h)))
                    .collect();
                cidrs.sort();
                cidrs
            };
            let labelled = |labels: u8, h: u8| {
                let mut info = pod(&format!("p{h}"));
                info.labels = Labels::from([("app".to_string(), labels.to_string())]).into();
                Identity::pod(info, host(h))
            };
            // Every label set starts with one member, so that the sets name its identity.
            let mut ids = Vec::new();
            for labels in 0..4u8 {
                let h = 200 + labels;
                ids.push(store.insert_shared(labelled(labels, h), cidrs(&store, h)).0);
            }
            let mut all: Vec<IdentityId> = ids.iter().chain(&world_ids).copied().collect();
            all.sort();
            all.dedup();
            let candidates = [all.clone(), ids[..2].to_vec(), vec![ids[0], ids[3]]];
            let remote_sets: Vec<RemoteSet> = candidates
                .into_iter()
                .map(|identities| RemoteSet { family: Family::V4, identities })
                .collect();
            let mut sets = ResolvedSets::default();
            for set in &remote_sets {
                sets.get(set, &store);
            }
            for step in steps {
                let mut changed = BTreeSet::new();
                match step {
                    Step::Join { host: h, labels } => {
                        if store.host(host(h)).is_none() {
                            let (id, _) = store.insert_shared(labelled(labels, h), cidrs(&store, h));
                            changed.insert(id);
                        }
                    }
                    Step::Leave { host: h } => {
                        if let Some((id, _)) = store.remove_address(host(h)) {
                            changed.insert(id);
                        }
                    }
                    Step::Forget { set } => {
                        sets.retain(|s| *s != remote_sets[set]);
                        prop_assert!(sets.peek(&remote_sets[set]).is_none());
                        sets.get(&remote_sets[set], &store);
                    }
                }
                sets.update(&store, &changed);
                for set in &remote_sets {
                    let patched: Vec<IpNet> = sets.peek(set).unwrap().nets().copied().collect();
                    prop_assert_eq!(patched, addresses(set, &store));
                }
                // A set of every identity (a namespace selector's): a new label set or the last
                // pod of one leaving makes a new set, derived from the one it replaces.
                let every = RemoteSet {
                    family: Family::V4,
                    identities: store.iter().map(|(id, _)| id).collect(),
                };
                sets.retain(|s| remote_sets.contains(s) || *s == every);
                let got: Vec<IpNet> = sets.get(&every, &store).nets().copied().collect();
                prop_assert_eq!(got, addresses(&every, &store));
            }
        }
    }
}
