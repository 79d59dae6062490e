//! The lint's lab: the engine loaded once with every policy under its own key, and what-if
//! MapStates of the [`Probe`]s with a policy, or one rule's peers, taken out.
//!
//! The precedence levels, world identities and selectors stay those of the whole policy set
//! whatever is taken out, so maps before and after compare key by key. Only the probes an
//! entry selects can change when it is taken out (an endpoint's map is made from the entries
//! selecting it), so the cost of each question is the few pods it is about, not the cluster.

use std::cell::OnceCell;
use std::collections::BTreeSet;

use netpol_engine::{
    Direction, Engine, EngineConfig, IdentityId, IdentityKind, MapState, Peer, PodInfo,
    PolicyEntry, PortMatch, Protocol,
};

use super::representatives::{pods, probes, Probes};
use crate::loader::ClusterModel;

pub const PROTOCOLS: [Protocol; 5] = [
    Protocol::Tcp,
    Protocol::Udp,
    Protocol::Sctp,
    Protocol::Icmp,
    Protocol::IcmpV6,
];

pub struct Lab<'c> {
    pub engine: Engine,
    pub probes: Probes,
    /// Per entry of `cluster.policy_entries()`: its position in the engine's entries.
    position: Vec<usize>,
    /// Per probe: its map with every entry in place, once asked for.
    before: Vec<OnceCell<MapState>>,
    cluster: &'c ClusterModel,
    /// The pods' endpoint keys (`namespace/name`), once asked for.
    keys: OnceCell<Vec<(String, &'c PodInfo)>>,
}

/// An entry of the engine replaced, for a what-if map: by nothing, or by another entry.
pub type Replacement<'a> = (usize, Option<&'a PolicyEntry>);

impl<'c> Lab<'c> {
    /// `policies`: each policy's entries by position in `cluster.policy_entries()`.
    pub fn new(cluster: &'c ClusterModel, policies: &[&[usize]]) -> Lab<'c> {
        let entries = cluster.policy_entries();
        let mut engine = Engine::new(EngineConfig {
            local_node: None,
            allow_node_probes: true,
        });
        // Lint reads what policies mean, audited ones too (a smell is worth knowing before a
        // policy is enforced), and positions entries by the policies' own lists: every entry in.
        engine.set_view(netpol_engine::PolicyView::WouldBe);
        for (i, indexes) in policies.iter().enumerate() {
            engine.set_policy(
                format!("lint/{i}"),
                indexes.iter().map(|&j| entries[j].clone()).collect(),
            );
        }
        // Every pod is an identity; none is an endpoint: maps are asked for per probe.
        engine.only_endpoints([]);
        for (pod, identities) in cluster.pods() {
            engine.set_pod(pod.to_string(), identities.into_iter().cloned().collect());
        }
        for (node, identities) in cluster.nodes() {
            engine.set_node(node, identities.into_iter().cloned().collect());
        }
        engine.commit_unreported();
        let mut position = vec![0; entries.len()];
        for (key, range) in engine.policy_ranges() {
            let i: usize = key["lint/".len()..].parse().expect("the lab's own keys");
            for (&j, at) in policies[i].iter().zip(range) {
                position[j] = at;
            }
        }
        let probes = probes(&engine, cluster);
        let before = (0..probes.list.len()).map(|_| OnceCell::new()).collect();
        Lab {
            engine,
            probes,
            position,
            before,
            cluster,
            keys: OnceCell::new(),
        }
    }

    /// The engine position of entry `j` of `cluster.policy_entries()`.
    pub fn position(&self, j: usize) -> usize {
        self.position[j]
    }

    /// Whether entry `j` of `cluster.policy_entries()` selects some pod.
    pub fn selects_a_pod(&self, j: usize) -> bool {
        !self.probes.by_entry[self.position(j)].is_empty()
    }

    /// The pods entry `j` of `cluster.policy_entries()` selects, one per probe.
    pub fn selected_pods(&self, j: usize) -> impl Iterator<Item = &PodInfo> + use<'_, 'c> {
        self.probes.by_entry[self.position(j)]
            .iter()
            .map(|&p| &self.probes.list[p as usize].pod)
    }

    /// The identities `peer` selects, the node relation aside (none for a peer of no entry).
    pub fn selected_by(&self, peer: &Peer) -> impl Iterator<Item = IdentityId> + '_ {
        let selected = self.engine.selected_by(peer);
        let ids: Vec<IdentityId> = selected.iter().flat_map(|s| s.iter().copied()).collect();
        ids.into_iter()
    }

    /// Whether every pod decides every key as before with `replaced` applied.
    pub fn unchanged(&self, replaced: &[Replacement]) -> bool {
        let affected: BTreeSet<u32> = replaced
            .iter()
            .flat_map(|(e, _)| &self.probes.by_entry[*e])
            .copied()
            .collect();
        affected.into_iter().all(|p| {
            let probe = &self.probes.list[p as usize];
            let before = self.before[p as usize]
                .get_or_init(|| self.map(&probe.pod, &probe.selecting, &[], &probe.remotes));
            let after = self.map(&probe.pod, &probe.selecting, replaced, &probe.remotes);
            same_decisions(before, &after)
        })
    }

    fn map(
        &self,
        pod: &PodInfo,
        selecting: &[usize],
        replaced: &[Replacement],
        remotes: &[IdentityId],
    ) -> MapState {
        let all = self.engine.entries();
        let entries =
            selecting
                .iter()
                .filter_map(|&e| match replaced.iter().find(|(r, _)| *r == e) {
                    Some((_, by)) => *by,
                    None => Some(&all[e]),
                });
        self.engine.map_with(pod, entries, remotes.iter().copied())
    }

    /// The keys (`namespace/name`) of the pods, by position among [`pods`].
    fn keys(&self) -> &[(String, &'c PodInfo)] {
        self.keys.get_or_init(|| {
            pods(self.cluster)
                .map(|(pod, info)| (pod.to_string(), info))
                .collect()
        })
    }

    /// What decides, with `replaced` applied, a flow `entry` (at engine position `position`)
    /// matches: the reason of the first pod (by endpoint key) `entry` selects towards the first
    /// identity (by id) its peers select from that pod, on the entry's first numbered port
    /// (TCP/80 where it has none).
    pub fn decider_of(
        &self,
        position: usize,
        entry: &PolicyEntry,
        replaced: &[Replacement],
    ) -> Option<String> {
        let (protocol, port) = entry
            .ports
            .iter()
            .find_map(|p| match p.port {
                PortMatch::Any => Some((p.protocol.unwrap_or(Protocol::Tcp), 80)),
                PortMatch::Range(lo, _) => Some((p.protocol.unwrap_or(Protocol::Tcp), lo)),
                PortMatch::Named(_) => None,
            })
            .unwrap_or((Protocol::Tcp, 80));
        let store = self.engine.identities();
        let keys = self.keys();
        // The pods the entry selects are its probes' members.
        let mut selected: Vec<u32> = self.probes.by_entry[position]
            .iter()
            .flat_map(|&p| &self.probes.members[p as usize])
            .copied()
            .collect();
        selected.sort_unstable_by(|a, b| keys[*a as usize].0.cmp(&keys[*b as usize].0));
        for pod in selected.into_iter().map(|p| keys[p as usize].1) {
            for (id, identity) in store.iter() {
                if !entry
                    .peers
                    .iter()
                    .any(|p| p.selects(identity, pod.node.as_deref()))
                {
                    continue;
                }
                if matches!(identity.kind, IdentityKind::World)
                    && entry.peers.iter().all(|p| matches!(p, Peer::Pods(_)))
                {
                    continue;
                }
                let selecting = self.engine.selecting(pod);
                let map = self.map(pod, &selecting, replaced, &[id]);
                let value = map.lookup(entry.direction, id, protocol, port);
                return Some(value.reason.to_string());
            }
        }
        None
    }
}

/// Whether `a` and `b` decide every key alike: every (direction, remote identity, protocol,
/// port) looks up the same verdict and authentication. Lookups are constant between the
/// boundaries of the keys that can match, so the boundaries are the only points to compare.
fn same_decisions(a: &MapState, b: &MapState) -> bool {
    let classes: BTreeSet<(Direction, Option<IdentityId>)> =
        a.class_keys().chain(b.class_keys()).collect();
    // An identity no class names: decided by the wildcard class alone.
    let phantom = IdentityId(u32::MAX);
    for direction in Direction::BOTH {
        let remotes: BTreeSet<IdentityId> = classes
            .iter()
            .filter(|(d, _)| *d == direction)
            .filter_map(|(_, id)| *id)
            .chain([phantom])
            .collect();
        for remote in remotes {
            let mut points: BTreeSet<(Protocol, u16)> =
                PROTOCOLS.iter().flat_map(|&p| [(p, 0), (p, 1)]).collect();
            for map in [a, b] {
                for class in [(direction, Some(remote)), (direction, None)] {
                    let Some(entries) = map.class(class) else {
                        continue;
                    };
                    for (key, _) in entries.iter() {
                        let Some(protocol) = key.protocol else {
                            continue;
                        };
                        let (lo, hi) = key.range();
                        points.insert((protocol, lo));
                        if hi < u16::MAX {
                            points.insert((protocol, hi + 1));
                        }
                    }
                }
            }
            for (protocol, port) in points {
                let x = a.lookup(direction, remote, protocol, port);
                let y = b.lookup(direction, remote, protocol, port);
                if (x.verdict, x.auth) != (y.verdict, y.auth) {
                    return false;
                }
            }
        }
    }
    true
}
