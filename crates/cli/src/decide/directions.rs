//! Flows between pod classes decided one direction at a time, each direction once per what it
//! depends on. The egress half of a flow depends only on the entries that select the source as
//! their subject in that direction (with its named ports) and on the destination's identity;
//! the ingress half likewise. Classes with the same entries share those halves, so a matrix of
//! `k` classes asks the decider about `k` times the distinct rule sets, not `k` squared, and
//! every flow is interned as a pair of interned halves (no decision is cloned or hashed per
//! cell). A remote pod, in turn, matters to a half only through which peers of its entries
//! select it (and, for egress, its named ports): halves are decided once per signature and
//! such view of the remote ([`Views`]), not once per remote pod. A node likewise, towards the
//! pods not on it: a hundred nodes alike are one view, not a hundred decisions per signature.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::net::IpAddr;

use netpol_engine::flow::{DirectionOracle, FlowDecision, FlowDecisionRef};
use netpol_engine::reference::Decision;
use netpol_engine::{Direction, IdentityId, IdentityStore, NamedPort, Peer, PodInfo, Protocol};

use netpol_engine::resolve::SubjectIndex;

/// A map keyed by small numbers or slices of them, hashed by foldhash: a matrix looks up
/// millions of halves, views and pairs, where SipHash was a tenth of its time.
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

use crate::loader::ClusterModel;

/// What one side of a flow is decided by: the entries of one direction whose subject selects
/// the pod, and its named ports.
pub struct Signatures {
    /// Per class: its egress and its ingress signature.
    pub egress: Vec<u32>,
    pub ingress: Vec<u32>,
    /// Per signature: the entries that select its pods, by position in `cluster.entries()`.
    selecting: Vec<Vec<u32>>,
}

impl Signatures {
    /// The signatures of pods described by `infos` (one per class) in `cluster`. Each pod is
    /// matched against the entries whose subject may select it (a subject index), not every
    /// entry: at 150,000 pods, classes times entries is about a billion selector matches.
    pub fn new<'a>(cluster: &ClusterModel, infos: &[&'a PodInfo]) -> Signatures {
        let entries = cluster.entries();
        let subjects = SubjectIndex::new(entries);
        let mut index: HashMap<(bool, Vec<u32>, &[netpol_engine::NamedPort]), u32> = HashMap::new();
        let mut signature = |egress: bool, info: &'a PodInfo, candidates: &[usize]| {
            let direction = if egress {
                Direction::Egress
            } else {
                Direction::Ingress
            };
            let selecting: Vec<u32> = candidates
                .iter()
                .filter(|&&e| {
                    let entry = &entries[e];
                    entry.direction == direction && entry.subject.matches(info)
                })
                .map(|&e| e as u32)
                .collect();
            let next = index.len() as u32;
            *index
                .entry((egress, selecting, &info.ports[..]))
                .or_insert(next)
        };
        let (mut egress, mut ingress) = (Vec::new(), Vec::new());
        for &info in infos {
            let candidates = subjects.candidates(info);
            egress.push(signature(true, info, &candidates));
            ingress.push(signature(false, info, &candidates));
        }
        let mut selecting = vec![Vec::new(); index.len()];
        for ((_, entries, _), code) in index {
            selecting[code as usize] = entries;
        }
        Signatures {
            egress,
            ingress,
            selecting,
        }
    }

    /// The entries that select the pods of `signature`, by position in `cluster.entries()`.
    pub fn entries(&self, signature: u32) -> &[u32] {
        &self.selecting[signature as usize]
    }
}

/// The remotes' views, per signature: what a remote pod is to the entries of one signature,
/// which of their peers select it, and for egress its named ports (an egress rule's named port
/// is the destination's). Two remote pods with the same view get the same half from the
/// signature's pods.
pub struct Views<'a> {
    store: &'a IdentityStore,
    /// The distinct peers of the entries.
    peers: Vec<&'a Peer>,
    /// The pod peers (by position in `peers`) indexed by what they require of a pod, and the
    /// other peers: a remote pod is matched against the pod peers that may select it, not
    /// against every peer (at 40,000 pods, remotes times peers was a third of a diff).
    pod_peers: (SubjectIndex, Vec<u32>),
    other_peers: Vec<u32>,
    /// Per signature: the peers of its entries, by position in `peers`, ascending.
    of_signature: Vec<Vec<u32>>,
    /// Per remote identity: the peers (by position) that select it and its named ports (by
    /// position in `port_lists`; [`NODE`] for a node), or `None` where the identity is not one
    /// to share halves over (outside the cluster, or a pod at a node's address).
    selecting: FastMap<IdentityId, Option<(Vec<u32>, u32)>>,
    port_lists: FastMap<&'a [NamedPort], u32>,
    node_addresses: HashSet<IpAddr>,
    /// Views by `[signature, direction and ports, selecting peers...]`: one flat key, so that
    /// a view is looked up from a reused buffer, without building a key per half.
    interned: FastMap<Vec<u32>, u32>,
    key: Vec<u32>,
}

impl<'a> Views<'a> {
    pub fn new(cluster: &'a ClusterModel, signatures: &Signatures) -> Views<'a> {
        let entries = cluster.entries();
        let mut index: HashMap<&Peer, u32> = HashMap::new();
        let mut peers = Vec::new();
        let of_signature = signatures
            .selecting
            .iter()
            .map(|selecting| {
                let mut of: Vec<u32> = selecting
                    .iter()
                    .flat_map(|&e| &entries[e as usize].peers)
                    .map(|peer| {
                        *index.entry(peer).or_insert_with(|| {
                            peers.push(peer);
                            peers.len() as u32 - 1
                        })
                    })
                    .collect();
                of.sort_unstable();
                of.dedup();
                of
            })
            .collect();
        let (mut pod_peers, mut other_peers) = (Vec::new(), Vec::new());
        for (p, peer) in peers.iter().enumerate() {
            match peer {
                Peer::Pods(selector) => pod_peers.push((p as u32, &**selector)),
                _ => other_peers.push(p as u32),
            }
        }
        let index = SubjectIndex::of_subjects(pod_peers.iter().map(|(_, s)| *s));
        Views {
            store: cluster.store(),
            pod_peers: (index, pod_peers.iter().map(|(p, _)| *p).collect()),
            other_peers,
            peers,
            of_signature,
            selecting: FastMap::default(),
            port_lists: FastMap::default(),
            node_addresses: cluster
                .nodes()
                .flat_map(|(_, ids)| ids.into_iter().map(|i| i.prefix.addr()))
                .collect(),
            interned: FastMap::default(),
            key: Vec::new(),
        }
    }

    /// The view of `remote` from the pods of `signature`, as a number unique per signature, or
    /// `None` where the remote is decided on its own. A node is a remote node to the pods asked
    /// about it (a class is decided against a node by a member that is not on it, see
    /// `compute_some`), so which peers select it is all a half reads of it.
    fn view(&mut self, egress: bool, signature: u32, remote: IdentityId) -> Option<u32> {
        let (peers, node_addresses, store) = (&self.peers, &self.node_addresses, self.store);
        let (pod_peers, other_peers) = (&self.pod_peers, &self.other_peers);
        let port_lists = &mut self.port_lists;
        let selecting = self.selecting.entry(remote).or_insert_with(|| {
            let identity = store.get(remote)?;
            if identity.as_node().is_some() {
                let selecting = (0..peers.len() as u32)
                    .filter(|&p| {
                        let peer = peers[p as usize];
                        peer.selects_ignoring_node(identity)
                            && peer.node_relation_holds(identity, None)
                    })
                    .collect();
                return Some((selecting, NODE));
            }
            let pod = identity.as_pod()?;
            if node_addresses.contains(&identity.prefix.addr()) {
                return None;
            }
            let next = port_lists.len() as u32;
            let ports = *port_lists.entry(&pod.ports[..]).or_insert(next);
            let (index, numbers) = pod_peers;
            let mut selecting: Vec<u32> = index
                .candidates(pod)
                .into_iter()
                .map(|c| numbers[c])
                .chain(other_peers.iter().copied())
                .filter(|&p| peers[p as usize].selects_ignoring_node(identity))
                .collect();
            selecting.sort_unstable();
            Some((selecting, ports))
        });
        let (selecting, ports) = selecting.as_ref()?;
        // An ingress half does not read the remote's named ports; a node has none.
        let ports = match *ports {
            NODE => NODE,
            ports if egress => ports + 1,
            _ => 0,
        };
        let of = &self.of_signature[signature as usize];
        self.key.clear();
        self.key.extend([signature, ports]);
        self.key.extend(
            of.iter()
                .copied()
                .filter(|p| selecting.binary_search(p).is_ok()),
        );
        if let Some(&view) = self.interned.get(self.key.as_slice()) {
            return Some(view);
        }
        let next = self.interned.len() as u32;
        self.interned.insert(self.key.clone(), next);
        Some(next)
    }
}

/// Interned decisions: whole flows (what a matrix cell names) as pairs of their halves, the
/// halves, and the halves already decided per signature and remote identity.
#[derive(Default)]
pub struct Interner {
    pub decisions: Decisions,
    half_index: HashMap<Decision, u32>,
    pairs: FastMap<(u32, u32), u32>,
    decided: FastMap<(bool, u32, Remote), u32>,
}

/// Each distinct flow decision of a matrix, by code: a pair of positions in `halves`, each
/// distinct direction decision held once. *Why:* a direction names its policy and rule in four
/// strings; a matrix of every probe port at 10,000 pods has half a million distinct flows but
/// a few thousand distinct directions, and a flow cloned its two was two thirds of its memory.
#[derive(Debug, Default)]
pub struct Decisions {
    halves: Vec<Decision>,
    flows: Vec<[u32; 2]>,
}

impl Decisions {
    /// The flow decision of `code`, or `None` where the code names none ([`UNDEFINED`]).
    pub fn get(&self, code: u32) -> Option<FlowDecisionRef<'_>> {
        let [egress, ingress] = *self.flows.get(code as usize)?;
        let half = |h: u32| (h != NO_HALF).then(|| &self.halves[h as usize]);
        Some(FlowDecisionRef {
            egress: half(egress),
            ingress: half(ingress),
        })
    }

    /// How many distinct flow decisions there are (codes `0..len`).
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Each distinct direction decision, once.
    pub fn halves(&self) -> &[Decision] {
        &self.halves
    }

    /// The positions in [`Decisions::halves`] of the egress and ingress halves of `code`,
    /// `None` where that side is not a pod.
    pub fn halves_of(&self, code: u32) -> [Option<u32>; 2] {
        self.flows[code as usize].map(|h| (h != NO_HALF).then_some(h))
    }
}

/// A remote as halves are shared over: by its view, or by itself.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Remote {
    View(u32),
    Identity(IdentityId),
}

/// The place of a remote's named ports in a view's key that marks a node.
const NODE: u32 = u32::MAX;

/// A cell with no flow.
pub const UNDEFINED: u32 = u32::MAX;

/// No half: that side is not a pod.
const NO_HALF: u32 = u32::MAX;

impl Interner {
    /// A whole decision's code.
    pub fn flow(&mut self, decision: Option<FlowDecision>) -> u32 {
        let Some(decision) = decision else {
            return UNDEFINED;
        };
        let egress = decision.egress.map_or(NO_HALF, |d| self.intern_half(d));
        let ingress = decision.ingress.map_or(NO_HALF, |d| self.intern_half(d));
        self.pair(egress, ingress)
    }

    /// The position of a direction decision among the halves.
    fn intern_half(&mut self, decision: Decision) -> u32 {
        let next = self.decisions.halves.len() as u32;
        let halves = &mut self.decisions.halves;
        *self.half_index.entry(decision).or_insert_with_key(|d| {
            halves.push(d.clone());
            next
        })
    }

    /// One half, decided by `oracle` at `endpoint` unless a pod of the same signature has been
    /// decided against `remote` or a remote of the same view.
    #[allow(clippy::too_many_arguments)]
    pub fn half(
        &mut self,
        oracle: &dyn DirectionOracle,
        views: &mut Views,
        egress: bool,
        signature: u32,
        endpoint: IdentityId,
        remote: IdentityId,
        protocol: Protocol,
        port: u16,
    ) -> u32 {
        let key = match views.view(egress, signature, remote) {
            Some(view) => Remote::View(view),
            None => Remote::Identity(remote),
        };
        if let Some(&code) = self.decided.get(&(egress, signature, key)) {
            return code;
        }
        let direction = if egress {
            Direction::Egress
        } else {
            Direction::Ingress
        };
        let decision = oracle.decide_direction(endpoint, direction, remote, protocol, port);
        let code = self.intern_half(decision);
        self.decided.insert((egress, signature, key), code);
        code
    }

    /// The code of the flow made of two halves (either may be [`NO_HALF`]).
    pub fn pair(&mut self, egress: u32, ingress: u32) -> u32 {
        let flows = &mut self.decisions.flows;
        *self.pairs.entry((egress, ingress)).or_insert_with(|| {
            flows.push([egress, ingress]);
            flows.len() as u32 - 1
        })
    }
}

/// The identities of a flow between two pods given their identities by family (primary first),
/// as [`ClusterModel::flow_identities`] chooses them: the destination's first family the source has.
pub fn pod_pair(
    from: &[(bool, IdentityId)],
    to: &[(bool, IdentityId)],
) -> Option<(IdentityId, IdentityId)> {
    to.iter().find_map(|&(v4, dst)| {
        from.iter()
            .find(|&&(w4, _)| w4 == v4)
            .map(|&(_, src)| (src, dst))
    })
}

/// A flow between a pod (`pod_is_source` or not) and an address's identity, both halves where
/// each side is a pod: the pod's half by signature, the other side's (a pod at a node's
/// address) directly.
#[allow(clippy::too_many_arguments)]
pub fn with_address(
    interner: &mut Interner,
    views: &mut Views,
    cluster: &ClusterModel,
    oracle: &dyn DirectionOracle,
    signatures: (u32, u32),
    pod: IdentityId,
    other: IdentityId,
    pod_is_source: bool,
    protocol: Protocol,
    port: u16,
) -> u32 {
    let is_pod = |id| cluster.store().get(id).and_then(|i| i.as_pod()).is_some();
    let (egress_sig, ingress_sig) = signatures;
    let other_pod = is_pod(other);
    let (src, dst) = if pod_is_source {
        (pod, other)
    } else {
        (other, pod)
    };
    if other_pod {
        // A pod at a node's address: decide it whole.
        return interner.flow(Some(netpol_engine::flow::decide_flow(
            oracle,
            cluster.store(),
            src,
            dst,
            protocol,
            port,
        )));
    }
    let (egress, ingress) = if pod_is_source {
        (
            interner.half(oracle, views, true, egress_sig, src, dst, protocol, port),
            NO_HALF,
        )
    } else {
        (
            NO_HALF,
            interner.half(oracle, views, false, ingress_sig, dst, src, protocol, port),
        )
    };
    interner.pair(egress, ingress)
}
