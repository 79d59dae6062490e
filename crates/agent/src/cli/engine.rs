//! The one place that chooses which engine decides flows. Every command that decides flows takes
//! `--engine` and asks [`oracle`] for a [`DirectionOracle`] over a scenario's cluster, so a new
//! engine or datapath simulator is a new variant here and nothing else.

use netpol_engine::flow::{DirectionOracle, ReferenceOracle};
use netpol_engine::reference::Decision;
use netpol_engine::{Direction, Engine, EngineConfig, IdentityId, Protocol};

use crate::scenario::Cluster;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineKind {
    /// The incremental MapState engine, as the agent runs it.
    #[default]
    Mapstate,
    /// The reference evaluator: a direct first-match reading of the policy entries.
    Reference,
}

#[derive(Clone, Copy, Debug, clap::Args)]
pub struct EngineArgs {
    /// Which engine decides the flows.
    #[arg(long, value_enum, default_value_t)]
    pub engine: EngineKind,
}

/// A decider for flows of `cluster`, by the engine the user chose. Identity ids are those of
/// `cluster.store()`.
pub fn oracle(kind: EngineKind, cluster: &Cluster) -> Box<dyn DirectionOracle + '_> {
    match kind {
        EngineKind::Reference => Box::new(ReferenceOracle {
            entries: cluster.entries(),
            store: cluster.store(),
        }),
        EngineKind::Mapstate => Box::new(MapStateOracle::new(cluster)),
    }
}

/// The MapState engine loaded with a whole scenario, every pod a local endpoint. The engine keeps
/// its own identity store, so ids are mapped through the identities they stand for.
struct MapStateOracle<'a> {
    cluster: &'a Cluster,
    engine: Engine,
}

impl<'a> MapStateOracle<'a> {
    fn new(cluster: &'a Cluster) -> Self {
        let mut engine = Engine::new(EngineConfig {
            local_node: None,
            allow_node_probes: true,
        });
        engine.set_policy("scenario", cluster.policy_entries().to_vec());
        for (pod, identities) in cluster.pods() {
            engine.set_pod(pod.to_string(), identities.into_iter().cloned().collect());
        }
        for (node, identities) in cluster.nodes() {
            engine.set_node(node, identities.into_iter().cloned().collect());
        }
        engine.commit();
        MapStateOracle { cluster, engine }
    }

    fn engine_id(&self, id: IdentityId) -> IdentityId {
        self.cluster
            .store()
            .get(id)
            .and_then(|identity| self.engine.identities().id_of(identity))
            .expect("the engine holds every identity of the cluster it was loaded with")
    }
}

impl DirectionOracle for MapStateOracle<'_> {
    fn decide_direction(
        &self,
        endpoint: IdentityId,
        direction: Direction,
        remote: IdentityId,
        protocol: Protocol,
        port: u16,
    ) -> Decision {
        self.engine.decide_direction(
            self.engine_id(endpoint),
            direction,
            self.engine_id(remote),
            protocol,
            port,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::PodRef;
    use netpol_engine::flow::decide_flow;
    use netpol_engine::{
        Identity, LabelSelector, Labels, NodeInfo, Peer, PodInfo, PodSelector, PolicyEntry,
        PortRule, Priority, Provenance, Tier, Verdict,
    };

    fn pod(ns: &str, name: &str, node: &str, ip: &str) -> (PodRef, Vec<Identity>) {
        let info = PodInfo {
            namespace: ns.into(),
            name: name.into(),
            labels: Labels::from([("pod".to_string(), name.to_string())]),
            namespace_labels: Labels::from([(
                netpol_engine::NAMESPACE_NAME_LABEL.to_string(),
                ns.to_string(),
            )]),
            node: Some(node.into()),
            ports: vec![],
        };
        let pod = PodRef {
            namespace: ns.into(),
            name: name.into(),
        };
        (pod, vec![Identity::pod(info, ip.parse().unwrap())])
    }

    /// x/a is isolated for ingress and admits only x/b on TCP 80.
    fn cluster() -> Cluster {
        let mut cluster = Cluster::new();
        for (ns, name, node, ip) in [
            ("x", "a", "n1", "10.1.0.1"),
            ("x", "b", "n2", "10.1.0.2"),
            ("y", "a", "n1", "10.1.1.1"),
        ] {
            let (pod, identities) = pod(ns, name, node, ip);
            cluster.add_pod(pod, identities);
        }
        for (name, ip) in [("n1", "10.0.0.1"), ("n2", "10.0.0.2")] {
            let info = NodeInfo {
                name: name.into(),
                labels: Labels::new(),
            };
            cluster.add_node(name, vec![Identity::node(info, ip.parse().unwrap())]);
        }
        cluster.add_entries([PolicyEntry {
            tier: Tier::Normal,
            priority: Priority::unordered(),
            verdict: Verdict::Allow,
            subject: PodSelector::in_namespace("x", LabelSelector::from_labels([("pod", "a")])),
            direction: Direction::Ingress,
            peers: vec![Peer::Pods(PodSelector::in_namespace(
                "x",
                LabelSelector::from_labels([("pod", "b")]),
            ))],
            ports: vec![PortRule::single(Protocol::Tcp, 80)],
            default_deny: true,
            auth: None,
            provenance: Provenance::default(),
        }]);
        cluster
    }

    fn verdicts(kind: EngineKind, cluster: &Cluster) -> Vec<bool> {
        let oracle = oracle(kind, cluster);
        let ids: Vec<IdentityId> = cluster.store().iter().map(|(id, _)| id).collect();
        let mut out = Vec::new();
        for &src in &ids {
            for &dst in &ids {
                for port in [80, 81] {
                    let d = decide_flow(
                        oracle.as_ref(),
                        cluster.store(),
                        src,
                        dst,
                        Protocol::Tcp,
                        port,
                    );
                    out.push(d.allowed());
                }
            }
        }
        out
    }

    #[test]
    fn both_engines_decide_every_flow_alike() {
        let cluster = cluster();
        let reference = verdicts(EngineKind::Reference, &cluster);
        assert_eq!(reference, verdicts(EngineKind::Mapstate, &cluster));
        assert!(reference.contains(&false), "the policy denies something");
    }

    #[test]
    fn only_the_allowed_peer_and_the_own_node_reach_the_isolated_pod() {
        let cluster = cluster();
        for kind in [EngineKind::Reference, EngineKind::Mapstate] {
            let oracle = oracle(kind, &cluster);
            let decide = |from: &str, to: &str, port| {
                let (src, dst) = cluster
                    .flow_identities(&from.parse().unwrap(), &to.parse().unwrap())
                    .unwrap();
                decide_flow(
                    oracle.as_ref(),
                    cluster.store(),
                    src,
                    dst,
                    Protocol::Tcp,
                    port,
                )
                .allowed()
            };
            assert!(decide("x/b", "x/a", 80), "{kind:?}");
            assert!(!decide("x/b", "x/a", 81), "{kind:?}");
            assert!(!decide("y/a", "x/a", 80), "{kind:?}");
            assert!(decide("10.0.0.1", "x/a", 81), "{kind:?}: own node probes");
            assert!(!decide("10.0.0.2", "x/a", 81), "{kind:?}: other node");
            assert!(decide("x/a", "y/a", 81), "{kind:?}: egress is not isolated");
        }
    }
}
