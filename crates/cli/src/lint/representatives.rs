//! Which endpoints, and which remote identities of theirs, stand for every pod of the cluster in
//! the lint's what-if comparisons ([`super::lab`]).
//!
//! An endpoint's MapState is a function of the entries that select its pod, the pod's named
//! ports (ingress rules resolve names against them) and its node, and the node matters only to
//! host-relative peers (`host`, `remote-node`), which select node identities. So pods alike in
//! those three share their decisions, and one pod of each such group, a [`Probe`], is enough.
//! Nodes enter only through which peers select them: two nodes selected by the same peers are
//! interchangeable, and pods on such nodes are grouped together.
//!
//! Within an endpoint's map, a remote identity that is not a node is decided by the endpoint's
//! rules that select it and its named ports alone, so one remote per distinct *view* (the peers
//! of the probe's entries that select it, and its named ports) decides as every other remote of
//! that view. A node identity is decided by its view and by whether it is the endpoint's own
//! node: a probe holds its own node and, per node view, one node that is not its own, which
//! covers every (view, own or not) pair any pod of its group meets (see [`probes`]).
//!
//! At 150,000 pods a probe's rules can select nearly every identity (a front app open to every
//! namespace), so views are not found identity by identity: peers that select many identities
//! ("wide" ones) split the identities once into [`Atoms`], and only the few identities the
//! probe's other peers select are looked at one by one.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};

use netpol_engine::{Engine, IdentityId, IdentityKind, IdentityStore, NamedPort, Peer, PodInfo};

use crate::loader::{ClusterModel, PodRef};

/// A peer selecting more identities than this is wide: identities are grouped by the wide peers
/// selecting them once, instead of per probe.
const WIDE: usize = 256;

/// One pod standing for every pod selected by the same entries, with the same named ports, on a
/// node the same peers select.
pub struct Probe {
    pub pod: PodInfo,
    /// The entries selecting the pod, by position in the engine's entries, ascending.
    pub selecting: Vec<usize>,
    /// The remote identities whose classes decide as every remote's do.
    pub remotes: Vec<IdentityId>,
}

/// The probes of a cluster, and which of them each entry selects.
pub struct Probes {
    pub list: Vec<Probe>,
    /// Per engine entry: the probes whose pods it selects, ascending.
    pub by_entry: Vec<Vec<u32>>,
    /// Per probe: the pods it stands for, by position among [`pods`].
    pub members: Vec<Vec<u32>>,
}

/// The distinct peers of the engine's entries, and which of them select each identity.
struct PeerIndex<'e> {
    /// Per entry: its peers, by position among the distinct peers.
    of_entry: Vec<Vec<u32>>,
    /// Per distinct peer: the identities it selects (the node relation aside).
    selection: Vec<Cow<'e, BTreeSet<IdentityId>>>,
    /// Per identity selected by some peer: the peers selecting it, ascending.
    selecting: HashMap<IdentityId, Vec<u32>>,
}

impl<'e> PeerIndex<'e> {
    fn new(engine: &'e Engine) -> PeerIndex<'e> {
        let mut index: HashMap<&Peer, u32> = HashMap::new();
        let mut selection = Vec::new();
        let of_entry = engine
            .entries()
            .iter()
            .map(|entry| {
                entry
                    .peers
                    .iter()
                    .map(|peer| {
                        *index.entry(peer).or_insert_with(|| {
                            selection.push(
                                engine
                                    .selected_by(peer)
                                    .expect("every peer of the entries has a selector"),
                            );
                            selection.len() as u32 - 1
                        })
                    })
                    .collect()
            })
            .collect();
        let mut selecting: HashMap<IdentityId, Vec<u32>> = HashMap::new();
        for (p, ids) in selection.iter().enumerate() {
            for id in ids.iter() {
                selecting.entry(*id).or_default().push(p as u32);
            }
        }
        PeerIndex {
            of_entry,
            selection,
            selecting,
        }
    }

    fn selecting(&self, id: IdentityId) -> &[u32] {
        self.selecting.get(&id).map_or(&[], Vec::as_slice)
    }

    fn is_wide(&self, peer: u32) -> bool {
        self.selection[peer as usize].len() > WIDE
    }
}

/// Identities that are not nodes, grouped by the wide peers selecting them and their named
/// ports: those of one atom that no narrow peer of a probe selects look alike to the probe.
struct Atoms<'e> {
    list: Vec<Atom<'e>>,
}

/// The wide peers selecting an atom's identities, their named ports, and the identities.
struct Atom<'e> {
    wide: Vec<u32>,
    ports: Option<&'e [NamedPort]>,
    members: Vec<IdentityId>,
}

impl<'e> Atoms<'e> {
    fn new(engine: &'e Engine, peers: &PeerIndex) -> Atoms<'e> {
        type Key<'a> = (Vec<u32>, Option<&'a [NamedPort]>);
        let mut index: HashMap<Key<'e>, usize> = HashMap::new();
        let mut list: Vec<Atom<'e>> = Vec::new();
        for (id, identity) in engine.identities().iter() {
            if matches!(identity.kind, IdentityKind::Node(_)) {
                continue;
            }
            let wide: Vec<u32> = peers
                .selecting(id)
                .iter()
                .copied()
                .filter(|&p| peers.is_wide(p))
                .collect();
            let key = (wide, identity.named_ports());
            let next = list.len();
            let atom = *index.entry(key.clone()).or_insert(next);
            if atom == next {
                list.push(Atom {
                    wide: key.0,
                    ports: key.1,
                    members: Vec::new(),
                });
            }
            list[atom].members.push(id);
        }
        Atoms { list }
    }
}

/// The nodes, grouped by the peers selecting their identities.
struct Nodes {
    /// Per node name: its view and its identities.
    by_name: HashMap<String, (u32, Vec<IdentityId>)>,
    /// Per view: its nodes' identities, by node name order.
    views: Vec<Vec<(String, Vec<IdentityId>)>>,
}

impl Nodes {
    fn new(engine: &Engine, peers: &PeerIndex) -> Nodes {
        let mut of_node: std::collections::BTreeMap<String, Vec<IdentityId>> = Default::default();
        for (id, identity) in engine.identities().iter() {
            if let IdentityKind::Node(node) = &identity.kind {
                of_node.entry(node.name.clone()).or_default().push(id);
            }
        }
        let mut index: HashMap<Vec<&[u32]>, u32> = HashMap::new();
        let mut nodes = Nodes {
            by_name: HashMap::new(),
            views: Vec::new(),
        };
        for (name, ids) in of_node {
            let key: Vec<&[u32]> = ids.iter().map(|id| peers.selecting(*id)).collect();
            let next = index.len() as u32;
            let view = *index.entry(key).or_insert(next);
            if view == next {
                nodes.views.push(Vec::new());
            }
            nodes.views[view as usize].push((name.clone(), ids.clone()));
            nodes.by_name.insert(name, (view, ids));
        }
        nodes
    }

    /// The node identities an endpoint on `node` meets in every way its group's pods do: its
    /// own node's, and per view one node that is not its own. A pod of the group on another node
    /// of the same view meets its own node as this one does, and this one as this one meets a
    /// node of that view that is not its own; so no pair (view, own or not) is missed.
    fn remotes(&self, node: Option<&str>) -> Vec<IdentityId> {
        let own = node.and_then(|n| self.by_name.get(n));
        let mut out: Vec<IdentityId> = own.map(|(_, ids)| ids.clone()).unwrap_or_default();
        for view in &self.views {
            if let Some((_, ids)) = view.iter().find(|(name, _)| Some(name.as_str()) != node) {
                out.extend(ids);
            }
        }
        out
    }
}

/// One probe per group of pods that decide alike, in the order of their first pods.
pub fn probes(engine: &Engine, cluster: &ClusterModel) -> Probes {
    let peers = PeerIndex::new(engine);
    let atoms = Atoms::new(engine, &peers);
    let nodes = Nodes::new(engine, &peers);
    type Group<'a> = (Vec<usize>, &'a [NamedPort], Option<u32>);
    let mut index: HashMap<Group, usize> = HashMap::new();
    let mut list = Vec::new();
    let mut members: Vec<Vec<u32>> = Vec::new();
    for (position, (_, info)) in pods(cluster).enumerate() {
        let selecting = engine.selecting(info);
        let view = info
            .node
            .as_deref()
            .and_then(|n| nodes.by_name.get(n))
            .map(|(view, _)| *view);
        let key = (selecting, &info.ports[..], view);
        if let Some(&probe) = index.get(&key) {
            members[probe].push(position as u32);
            continue;
        }
        index.insert(key.clone(), list.len());
        members.push(vec![position as u32]);
        let mut remotes = views(engine.identities(), &key.0, &peers, &atoms);
        remotes.extend(nodes.remotes(info.node.as_deref()));
        list.push(Probe {
            pod: info.clone(),
            selecting: key.0,
            remotes,
        });
    }
    let mut by_entry = vec![Vec::new(); engine.entries().len()];
    for (p, probe) in list.iter().enumerate() {
        for &e in &probe.selecting {
            by_entry[e].push(p as u32);
        }
    }
    Probes {
        list,
        by_entry,
        members,
    }
}

/// The pods of `cluster` with an address, each by its first identity's pod: the order
/// [`Probes::members`] numbers them in.
pub fn pods(cluster: &ClusterModel) -> impl Iterator<Item = (&PodRef, &PodInfo)> {
    cluster
        .pods()
        .filter_map(|(pod, identities)| Some((pod, identities.first()?.as_pod()?)))
}

/// One remote identity (not a node) per view the entries `selecting` have of the identities.
fn views<'e>(
    store: &'e IdentityStore,
    selecting: &[usize],
    peers: &PeerIndex,
    atoms: &Atoms<'e>,
) -> Vec<IdentityId> {
    let mut own: Vec<u32> = selecting
        .iter()
        .flat_map(|&e| peers.of_entry[e].iter().copied())
        .collect();
    own.sort_unstable();
    own.dedup();
    let within = |selected_by: &[u32]| -> Vec<u32> {
        selected_by
            .iter()
            .copied()
            .filter(|p| own.binary_search(p).is_ok())
            .collect()
    };
    let mut seen: HashSet<(Vec<u32>, Option<&[NamedPort]>)> = HashSet::new();
    let mut out = Vec::new();
    // The identities a narrow peer selects, one by one.
    let narrow: BTreeSet<IdentityId> = own
        .iter()
        .filter(|&&p| !peers.is_wide(p))
        .flat_map(|&p| peers.selection[p as usize].iter().copied())
        .collect();
    for &id in &narrow {
        let Some(identity) = store.get(id) else {
            continue;
        };
        if matches!(identity.kind, IdentityKind::Node(_)) {
            continue;
        }
        if seen.insert((within(peers.selecting(id)), identity.named_ports())) {
            out.push(id);
        }
    }
    // The rest by atom: no narrow peer of these entries selects them.
    for Atom {
        wide,
        ports,
        members,
    } in &atoms.list
    {
        let key = (within(wide), *ports);
        if seen.contains(&key) {
            continue;
        }
        if let Some(id) = members.iter().find(|id| !narrow.contains(id)) {
            seen.insert(key);
            out.push(*id);
        }
    }
    out
}
