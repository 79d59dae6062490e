//! The selector cache: for every distinct peer selector in use, the set of identities it selects.
//! Identity changes are applied to every selector first and returned as one batch of deltas, so
//! that no MapState is updated from a half-applied change (CFP-23380: transactional delivery).
//!
//! A new selector is evaluated against candidates from an inverted index (label `key=value` →
//! identities, for pod and namespace labels), so a selector pinned to a namespace or requiring a
//! label looks at the identities carrying it, not at the whole cluster. The other way round, an
//! identity arriving or leaving is tested against the selectors that can select it: CIDR
//! selectors by prefix, the others by one label each requires ([`SelectorAnchors`]), not against
//! every selector of 36,000 policies.
//!
//! An entry's CIDR peers are one selector together ([`PeerGroup`]): a policy of 50,000 `/32`s is
//! one selector whose prefixes sit in the shared prefix index, not 50,000 selectors.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasher, Hash, Hasher};

use ipnet::IpNet;

use crate::prefix_map::PrefixMap;

use crate::identity::{Identity, IdentityId, IdentityKind, IdentityStore};
use crate::labels::Labels;
use crate::prefixes::truncations;
use crate::selector::{CidrSelector, Peer, PeerGroup};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SelectorId(pub u32);

#[derive(Debug)]
struct CachedSelector {
    selects: Selects,
    users: usize,
    selected: BTreeSet<IdentityId>,
}

/// What a cached selector selects by.
#[derive(Debug)]
enum Selects {
    /// One peer other than a CIDR one.
    Peer(Peer),
    /// An entry's CIDR peers, in the entry's order (what its key compares).
    Cidrs(Box<[CidrSelector]>),
}

impl Selects {
    fn selects_ignoring_node(&self, identity: &Identity) -> bool {
        match self {
            Selects::Peer(peer) => peer.selects_ignoring_node(identity),
            Selects::Cidrs(cidrs) => cidrs.iter().any(|c| c.selects(identity)),
        }
    }

    fn cidrs(&self) -> &[CidrSelector] {
        match self {
            Selects::Peer(_) => &[],
            Selects::Cidrs(cidrs) => cidrs,
        }
    }
}

/// The key of a CIDR group: a hash of its selectors, in order. Every endpoint an entry selects
/// looks its group up again (50,000 selectors for a CIDR-heavy entry), so the hasher is a fast
/// one: SipHash made this a tenth of such a policy's CPU.
fn group_hash<'a>(cidrs: impl Iterator<Item = &'a CidrSelector>) -> u64 {
    let mut hasher = foldhash::fast::FixedState::with_seed(0).build_hasher();
    for cidr in cidrs {
        cidr.hash(&mut hasher);
    }
    hasher.finish()
}

/// What one identity change did to one selector.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SelectorDelta {
    pub added: Vec<IdentityId>,
    pub removed: Vec<IdentityId>,
}

#[derive(Debug, Default)]
pub struct SelectorCache {
    next: u32,
    /// The selectors of single peers (none of them CIDR peers).
    by_peer: HashMap<Peer, SelectorId>,
    /// The selectors of CIDR groups by [`group_hash`] (several only where hashes collide).
    by_cidrs: HashMap<u64, Vec<SelectorId>>,
    selectors: HashMap<SelectorId, CachedSelector>,
    index: IdentityIndex,
    /// CIDR selectors by their prefix, so an identity finds the ones that may select it among
    /// its own truncations: one policy can name 30,000 CIDRs, and testing each identity
    /// against each is 30,000 tests per pod.
    cidrs: CidrSelectors,
    /// The other selectors by a label each requires.
    anchors: SelectorAnchors,
}

/// The world identities CIDR selectors select: the classes of the world prefixes they cover.
/// Every prefix of a class is selected by the same live entries, so the selectors' entry covers
/// the whole class through its peers ([`crate::identity::WorldClass`]).
fn worlds_covered<'a>(
    cidrs: impl IntoIterator<Item = &'a CidrSelector>,
    store: &IdentityStore,
) -> BTreeSet<IdentityId> {
    let mut out = BTreeSet::new();
    for cidr in cidrs {
        out.extend(
            store
                .worlds_within(cidr.net)
                .filter(|(prefix, _)| cidr.covers(prefix))
                .map(|(_, id)| id),
        );
    }
    out
}

/// Every identity CIDR selectors select: world classes, and the pods and nodes inside an
/// `ipBlock`-like selector's prefix, found by range, not by scan.
fn cidr_selection<'a>(
    cidrs: impl IntoIterator<Item = &'a CidrSelector> + Clone,
    store: &IdentityStore,
) -> BTreeSet<IdentityId> {
    let mut selected = worlds_covered(cidrs.clone(), store);
    for cidr in cidrs {
        selected.extend(
            store
                .hosts_within(cidr.net)
                .into_iter()
                .filter(|id| store.get(*id).is_some_and(|i| cidr.selects(i))),
        );
    }
    selected
}

/// One label a selector requires of every identity it selects: a pod label or a namespace label
/// (`matchLabels`); None where it requires none (every pod, expressions only, nodes, entities).
fn anchor(peer: &Peer) -> Option<(bool, (String, String))> {
    let Peer::Pods(selector) = peer else {
        return None;
    };
    // A pod label narrows more than a namespace label (a namespace's pods share those).
    let pick =
        |labels: &crate::labels::Labels| labels.iter().next().map(|(k, v)| (k.clone(), v.clone()));
    pick(&selector.pods.match_labels)
        .map(|label| (true, label))
        .or_else(|| pick(&selector.namespaces.match_labels).map(|label| (false, label)))
}

/// The selectors other than CIDR ones, by the label they require ([`anchor`]): those that can
/// select an identity are the ones anchored at one of its labels, and the unanchored ones.
#[derive(Debug, Default)]
struct SelectorAnchors {
    by_pod_label: HashMap<(String, String), BTreeSet<SelectorId>>,
    by_namespace_label: HashMap<(String, String), BTreeSet<SelectorId>>,
    unanchored: BTreeSet<SelectorId>,
}

impl SelectorAnchors {
    fn insert(&mut self, peer: &Peer, id: SelectorId) {
        match anchor(peer) {
            Some((true, label)) => self.by_pod_label.entry(label).or_default().insert(id),
            Some((false, label)) => self.by_namespace_label.entry(label).or_default().insert(id),
            None => self.unanchored.insert(id),
        };
    }

    fn remove(&mut self, peer: &Peer, id: SelectorId) {
        let (map, label) = match anchor(peer) {
            Some((true, label)) => (&mut self.by_pod_label, label),
            Some((false, label)) => (&mut self.by_namespace_label, label),
            None => {
                self.unanchored.remove(&id);
                return;
            }
        };
        if let Some(ids) = map.get_mut(&label) {
            ids.remove(&id);
            if ids.is_empty() {
                map.remove(&label);
            }
        }
    }

    /// The selectors that may select `identity`, each once.
    fn candidates(&self, identity: &Identity) -> BTreeSet<SelectorId> {
        let mut out = self.unanchored.clone();
        if let IdentityKind::Pod(pod) = &identity.kind {
            let lookup = |map: &HashMap<(String, String), BTreeSet<SelectorId>>,
                          labels: &crate::labels::Labels,
                          out: &mut BTreeSet<SelectorId>| {
                for (k, v) in labels {
                    if let Some(ids) = map.get(&(k.clone(), v.clone())) {
                        out.extend(ids.iter().copied());
                    }
                }
            };
            lookup(&self.by_pod_label, &pod.labels, &mut out);
            lookup(&self.by_namespace_label, &pod.namespace_labels, &mut out);
        }
        out
    }
}

/// The CIDR selectors by prefix, with the distinct prefix lengths they have.
#[derive(Debug, Default)]
struct CidrSelectors {
    /// The first selector naming each prefix: most prefixes have one (an entry's group), and a
    /// slot of the prefix and an id, with nothing allocated, is most of what a prefix of a
    /// 50,000-prefix policy costs here (a vector a prefix cost 60 bytes more; a hash table keyed
    /// by `IpNet` 52 bytes a prefix, against about 20 here; issue 33).
    first: PrefixMap<SelectorId>,
    /// The other selectors of prefixes several name.
    more: PrefixMap<Vec<SelectorId>>,
    lengths: BTreeMap<u8, usize>,
}

impl CidrSelectors {
    fn insert(&mut self, net: IpNet, id: SelectorId) {
        let net = net.trunc();
        // One search of the tree for the common case, a prefix no other selector names.
        match self.first.insert(net, id) {
            None => {}
            Some(first) if first == id => {}
            Some(first) => {
                self.first.insert(net, first);
                match self.more.get_mut(&net) {
                    Some(ids) if ids.contains(&id) => {}
                    Some(ids) => ids.push(id),
                    None => {
                        self.more.insert(net, vec![id]);
                    }
                }
            }
        }
        *self.lengths.entry(net.prefix_len()).or_default() += 1;
    }

    fn remove(&mut self, net: IpNet, id: SelectorId) {
        let net = net.trunc();
        if self.first.get(&net) == Some(&id) {
            // Another selector of the prefix, if any, becomes its first.
            match self.more.get_mut(&net).and_then(Vec::pop) {
                Some(next) => {
                    self.first.insert(net, next);
                }
                None => {
                    self.first.remove(&net);
                }
            }
        } else if let Some(ids) = self.more.get_mut(&net) {
            ids.retain(|i| *i != id);
        }
        if self.more.get(&net).is_some_and(Vec::is_empty) {
            self.more.remove(&net);
        }
        if let Some(count) = self.lengths.get_mut(&net.prefix_len()) {
            *count -= 1;
            if *count == 0 {
                self.lengths.remove(&net.prefix_len());
            }
        }
    }

    /// The CIDR selectors whose prefix holds `prefix`.
    fn holding<'a>(&'a self, prefix: &'a IpNet) -> impl Iterator<Item = SelectorId> + 'a {
        truncations(prefix, self.lengths.keys()).flat_map(|net| {
            let more = self.more.get(&net).map(Vec::as_slice).unwrap_or_default();
            self.first.get(&net).into_iter().chain(more).copied()
        })
    }
}

/// Which identities carry each label, for pods' own labels and their namespaces' labels.
#[derive(Debug, Default)]
struct IdentityIndex {
    pod_labels: HashMap<(String, String), BTreeSet<IdentityId>>,
    namespace_labels: HashMap<(String, String), BTreeSet<IdentityId>>,
    pods: BTreeSet<IdentityId>,
}

impl IdentityIndex {
    fn postings(
        map: &mut HashMap<(String, String), BTreeSet<IdentityId>>,
        labels: &Labels,
        id: IdentityId,
        add: bool,
    ) {
        for (k, v) in labels {
            let key = (k.clone(), v.clone());
            if add {
                map.entry(key).or_default().insert(id);
            } else if let Some(set) = map.get_mut(&key) {
                set.remove(&id);
                if set.is_empty() {
                    map.remove(&key);
                }
            }
        }
    }

    fn update(&mut self, id: IdentityId, identity: &Identity, add: bool) {
        let IdentityKind::Pod(pod) = &identity.kind else {
            return;
        };
        Self::postings(&mut self.pod_labels, &pod.labels, id, add);
        Self::postings(&mut self.namespace_labels, &pod.namespace_labels, id, add);
        if add {
            self.pods.insert(id);
        } else {
            self.pods.remove(&id);
        }
    }

    /// Pod identities that may match a pod selector: those carrying its rarest required label,
    /// or every pod identity when it requires none. None for other peers (callers scan).
    fn candidates(&self, peer: &Peer) -> Option<&BTreeSet<IdentityId>> {
        let Peer::Pods(selector) = peer else {
            return None;
        };
        static EMPTY: BTreeSet<IdentityId> = BTreeSet::new();
        fn lookup<'a>(
            map: &'a HashMap<(String, String), BTreeSet<IdentityId>>,
            labels: &Labels,
        ) -> impl Iterator<Item = &'a BTreeSet<IdentityId>> {
            labels
                .iter()
                .map(|(k, v)| map.get(&(k.clone(), v.clone())).unwrap_or(&EMPTY))
                .collect::<Vec<_>>()
                .into_iter()
        }
        let postings = lookup(&self.namespace_labels, &selector.namespaces.match_labels)
            .chain(lookup(&self.pod_labels, &selector.pods.match_labels));
        Some(
            postings
                .into_iter()
                .min_by_key(|p| p.len())
                .unwrap_or(&self.pods),
        )
    }
}

impl SelectorCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a user of `group`, computing its selection on first use.
    pub fn acquire(&mut self, group: PeerGroup<'_>, store: &IdentityStore) -> SelectorId {
        if let Some(id) = self.id_of(group) {
            self.selectors
                .get_mut(&id)
                .expect("indexed selector exists")
                .users += 1;
            return id;
        }
        let id = SelectorId(self.next);
        self.next += 1;
        let peer = match group {
            PeerGroup::One(peer) => peer,
            PeerGroup::Cidrs(_) => {
                let cidrs: Box<[CidrSelector]> = group.cidrs().cloned().collect();
                let selected = cidr_selection(cidrs.iter(), store);
                for cidr in cidrs.iter() {
                    self.cidrs.insert(cidr.net, id);
                }
                let hash = group_hash(cidrs.iter());
                self.by_cidrs.entry(hash).or_default().push(id);
                self.selectors.insert(
                    id,
                    CachedSelector {
                        selects: Selects::Cidrs(cidrs),
                        users: 1,
                        selected,
                    },
                );
                return id;
            }
        };
        debug_assert!(!matches!(peer, Peer::Cidr(_)), "CIDR peers come as a group");
        let selected = match self.index.candidates(peer) {
            Some(candidates) => candidates
                .iter()
                .copied()
                .filter(|id| {
                    store
                        .get(*id)
                        .is_some_and(|i| peer.selects_ignoring_node(i))
                })
                .collect(),
            None => store
                .iter()
                .filter(|(_, i)| peer.selects_ignoring_node(i))
                .map(|(id, _)| id)
                .collect(),
        };
        self.anchors.insert(peer, id);
        self.by_peer.insert(peer.clone(), id);
        self.selectors.insert(
            id,
            CachedSelector {
                selects: Selects::Peer(peer.clone()),
                users: 1,
                selected,
            },
        );
        id
    }

    /// Drops a user; the selector is forgotten when its last user goes.
    pub fn release(&mut self, id: SelectorId) {
        if let Some(sel) = self.selectors.get_mut(&id) {
            sel.users -= 1;
            if sel.users == 0 {
                let sel = self.selectors.remove(&id).expect("present");
                match &sel.selects {
                    Selects::Cidrs(cidrs) => {
                        for cidr in cidrs.iter() {
                            self.cidrs.remove(cidr.net, id);
                        }
                        let hash = group_hash(cidrs.iter());
                        if let Some(ids) = self.by_cidrs.get_mut(&hash) {
                            ids.retain(|i| *i != id);
                            if ids.is_empty() {
                                self.by_cidrs.remove(&hash);
                            }
                        }
                    }
                    Selects::Peer(peer) => {
                        self.anchors.remove(peer, id);
                        self.by_peer.remove(peer);
                    }
                }
            }
        }
    }

    /// Gives back the tables' room once most selectors are gone: hash tables keep their largest
    /// size, and five CIDR-heavy policies taken out left 84 MB of empty slots (issue 33).
    /// Amortized: a table shrinks when under a quarter full, to what it holds.
    pub fn trim(&mut self) {
        if self.selectors.len() * 4 < self.selectors.capacity() {
            self.selectors.shrink_to_fit();
            self.by_peer.shrink_to_fit();
        }
        if self.by_cidrs.len() * 4 < self.by_cidrs.capacity() {
            self.by_cidrs.shrink_to_fit();
        }
    }

    pub fn selected(&self, id: SelectorId) -> &BTreeSet<IdentityId> {
        &self.selectors[&id].selected
    }

    pub fn selects(&self, id: SelectorId, identity: IdentityId) -> bool {
        self.selectors[&id].selected.contains(&identity)
    }

    pub fn len(&self) -> usize {
        self.selectors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.selectors.is_empty()
    }

    /// Applies a batch of identity additions and removals to every selector, and only then
    /// returns the per-selector deltas.
    pub fn apply(
        &mut self,
        added: &[(IdentityId, &Identity)],
        removed: &[(IdentityId, &Identity)],
    ) -> HashMap<SelectorId, SelectorDelta> {
        for (id, identity) in removed {
            self.index.update(*id, identity, false);
        }
        for (id, identity) in added {
            self.index.update(*id, identity, true);
        }
        let mut deltas: HashMap<SelectorId, SelectorDelta> = HashMap::new();
        // A selector that selected a removed identity matches it: it is among its candidates.
        for (id, identity) in removed {
            for sid in self.candidates(identity) {
                let sel = self
                    .selectors
                    .get_mut(&sid)
                    .expect("indexed selector exists");
                if sel.selected.remove(id) {
                    deltas.entry(sid).or_default().removed.push(*id);
                }
            }
        }
        for (id, identity) in added {
            for sid in self.candidates(identity) {
                let sel = self
                    .selectors
                    .get_mut(&sid)
                    .expect("indexed selector exists");
                if sel.selects.selects_ignoring_node(identity) && sel.selected.insert(*id) {
                    deltas.entry(sid).or_default().added.push(*id);
                }
            }
        }
        deltas
    }
}

impl SelectorCache {
    /// The selectors that may select `identity`: the CIDR selectors holding its address and
    /// the others anchored at one of its labels or at none, in id order. A world identity's
    /// CIDR selectors are left to [`SelectorCache::refresh_worlds`]: one may select it through a
    /// prefix of its class other than the representative's.
    fn candidates(&self, identity: &Identity) -> BTreeSet<SelectorId> {
        let mut out = self.anchors.candidates(identity);
        if !identity.is_world() {
            out.extend(self.cidrs.holding(&identity.prefix));
        }
        out
    }

    /// Brings the CIDR selectors up to date with the world prefixes that came, went or moved to
    /// another class (`moved`), after [`SelectorCache::apply`] has applied the commit's other
    /// identity changes, adding what changed to `deltas`. A CIDR selector selects the classes
    /// of the world prefixes it covers; only those holding a moved prefix can differ, and each
    /// is evaluated once.
    pub fn refresh_worlds(
        &mut self,
        store: &IdentityStore,
        moved: &[IpNet],
        deltas: &mut HashMap<SelectorId, SelectorDelta>,
    ) {
        let holding: BTreeSet<SelectorId> =
            moved.iter().flat_map(|p| self.cidrs.holding(p)).collect();
        for sid in holding {
            let sel = self
                .selectors
                .get_mut(&sid)
                .expect("indexed selector exists");
            let now = worlds_covered(sel.selects.cidrs(), store);
            // Pod and node identities went through `apply`: what is left of the selection that is
            // not a pod or node now is a world identity, present or gone.
            let before: Vec<IdentityId> = sel
                .selected
                .iter()
                .filter(|id| store.get(**id).is_none_or(Identity::is_world))
                .copied()
                .collect();
            let mut delta = SelectorDelta::default();
            for id in &before {
                if !now.contains(id) {
                    sel.selected.remove(id);
                    delta.removed.push(*id);
                }
            }
            for id in now {
                if sel.selected.insert(id) {
                    delta.added.push(id);
                }
            }
            if !delta.added.is_empty() || !delta.removed.is_empty() {
                let entry = deltas.entry(sid).or_default();
                entry.added.extend(delta.added);
                entry.removed.extend(delta.removed);
            }
        }
    }

    /// The id of a selector already in use.
    pub fn id_of(&self, group: PeerGroup<'_>) -> Option<SelectorId> {
        match group {
            PeerGroup::One(peer) => self.by_peer.get(peer).copied(),
            PeerGroup::Cidrs(_) => self
                .by_cidrs
                .get(&group_hash(group.cidrs()))?
                .iter()
                .copied()
                .find(|id| self.selectors[id].selects.cidrs().iter().eq(group.cidrs())),
        }
    }

    /// The identities one peer selects, the node relation aside: its selector's selection, or
    /// for a CIDR peer (whose selector is its entry's group) its own, computed. None for a peer
    /// other than a CIDR one that no selector in use stands for.
    pub fn selected_by(
        &self,
        peer: &Peer,
        store: &IdentityStore,
    ) -> Option<Cow<'_, BTreeSet<IdentityId>>> {
        match peer {
            Peer::Cidr(cidr) => Some(Cow::Owned(cidr_selection([cidr], store))),
            peer => self
                .by_peer
                .get(peer)
                .map(|id| Cow::Borrowed(&self.selectors[id].selected)),
        }
    }
}
