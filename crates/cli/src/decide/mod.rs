//! The one place that chooses what decides flows. Every command that decides flows takes
//! `--engine` (and `--datapath`) and asks [`oracle`] for a [`DirectionOracle`] over a scenario's
//! cluster, so a new engine or datapath simulator is a new variant here and nothing else.
//! [`packets`] decides whole flows by real packets instead (`check --datapath nftables`),
//! [`matrix`] decides every pair of pods, and [`before_after`] the flows whose verdict a change
//! of policies changes (`diff`).

pub mod audit;
pub mod before_after;
mod cell_codes;
pub mod changing;
pub mod class_matrix;
mod classes;
#[cfg(test)]
mod differential;
pub mod directions;
pub mod outside;
pub mod packets;
mod parties;
pub mod what_if;
pub mod workload_rows;

use std::collections::BTreeSet;
use std::io::{self, Write};

use netpol_engine::flow::{AddressOracle, ByAddress, DirectionOracle, ReferenceOracle};
use netpol_engine::reference::Decision;
use netpol_engine::{Direction, Protocol};
use netpol_engine::{Engine, EngineConfig};
use netpol_hcn::oracle::{SimOracle, SimOracleError};

use crate::loader::{ClusterModel, Scenario};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineKind {
    /// The incremental MapState engine, as the agent runs it.
    #[default]
    Mapstate,
    /// The reference evaluator: a direct first-match reading of the policy entries.
    Reference,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DatapathKind {
    /// Compile each pod's MapState to HCN ACLs and evaluate them in the HCN simulator.
    HcnSim,
    /// Compile each pod's MapState to nftables, load it into a real kernel inside private
    /// network namespaces and decide each flow by a real packet (Linux, as root; `netpol check`
    /// only).
    Nftables,
}

#[derive(Clone, Copy, Debug, clap::Args)]
pub struct EngineArgs {
    /// Which engine decides the flows.
    #[arg(long, value_enum, default_value_t)]
    pub engine: EngineKind,
    /// Decide flows on a simulated datapath programmed from the MapState engine, instead of
    /// asking the engine directly.
    #[arg(long, value_enum)]
    pub datapath: Option<DatapathKind>,
    /// `--datapath hcn-sim`: whether ACLs name network IP sets (the simulated HNS has them, so
    /// `auto` is `on`) or inline every address, as the agent's flag of the same name.
    #[arg(long, value_enum, default_value_t)]
    pub hcn_ip_sets: HcnIpSets,
    /// `--datapath hcn-sim`: the Windows Server build the simulator models (its HNS version
    /// and quirks: ideal, ws2019, ws2022, ws2025, ws2022-remote-sets; docs/windows.md).
    #[arg(long, default_value = "ideal")]
    pub hcn_sim_mode: netpol_hcn::sim::SimMode,
}

/// Whether HCN ACLs name network IP sets (`SetPolicy` of type `IPSET`) instead of inlining
/// every address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum HcnIpSets {
    #[default]
    /// Where the HNS has them (HNS 13.0 and later; the simulator is HNS 15.0), inline otherwise.
    Auto,
    /// Always; refuse to start on an HNS without them.
    On,
    /// Never: every address inlined in every ACL, as before IP sets.
    Off,
}

impl From<HcnIpSets> for netpol_hcn::IpSetMode {
    fn from(mode: HcnIpSets) -> Self {
        match mode {
            HcnIpSets::Auto => netpol_hcn::IpSetMode::Auto,
            HcnIpSets::On => netpol_hcn::IpSetMode::On,
            HcnIpSets::Off => netpol_hcn::IpSetMode::Off,
        }
    }
}

/// Why no decider could be built for a scenario.
#[derive(Debug, thiserror::Error)]
pub enum OracleError {
    #[error("--datapath needs --engine mapstate: a datapath is programmed from MapStates")]
    DatapathNeedsMapState,
    #[error("the HCN simulator could not be programmed: {0}")]
    Simulator(#[from] SimOracleError),
    #[error(
        "--datapath nftables decides whole flows by real packets; only `netpol check` runs it"
    )]
    PacketsOnly,
}

/// A decider for flows of `cluster`, as the user chose. Identity ids are those of
/// `cluster.store()`.
pub fn oracle(
    args: EngineArgs,
    cluster: &ClusterModel,
) -> Result<Box<dyn DirectionOracle + '_>, OracleError> {
    oracle_at(args, cluster, None)
}

/// A decider for flows of `cluster` that only answers for flows at the pods `endpoints` names
/// (`namespace/name`), where given: the MapState engine (and the datapath programmed from it)
/// resolves those pods' MapStates only, as a tool deciding per class of alike pods needs one
/// pod per class ([`class_matrix::deciding_pods`]). A flow at any other pod is decided as if no policy
/// selected it.
pub fn oracle_at<'a>(
    args: EngineArgs,
    cluster: &'a ClusterModel,
    endpoints: Option<&BTreeSet<String>>,
) -> Result<Box<dyn DirectionOracle + 'a>, OracleError> {
    match (args.engine, args.datapath) {
        (EngineKind::Reference, None) => Ok(Box::new(ReferenceOracle {
            entries: cluster.entries(),
            store: cluster.store(),
        })),
        (EngineKind::Reference, Some(_)) => Err(OracleError::DatapathNeedsMapState),
        (EngineKind::Mapstate, datapath) => {
            let engine = load_engine_at(cluster, endpoints);
            let store = cluster.store();
            Ok(match datapath {
                None => Box::new(ByAddress::new(store, engine)),
                Some(DatapathKind::HcnSim) => {
                    let datapath = SimOracle::build_in(
                        &engine,
                        &Default::default(),
                        args.hcn_ip_sets != HcnIpSets::Off,
                        args.hcn_sim_mode,
                    )?;
                    let mapstate = engine;
                    Box::new(ByAddress::new(
                        store,
                        MapStateReasons { datapath, mapstate },
                    ))
                }
                Some(DatapathKind::Nftables) => return Err(OracleError::PacketsOnly),
            })
        }
    }
}

/// A datapath's verdicts, each with the reason of the endpoint's MapState entry that decided it.
/// One HCN ACL may merge several MapState entries (the node's address with pods', allowed by
/// different rules), and what it was compiled from names only its first source; the MapState
/// says which rule decided this remote. Where the two disagree on the verdict (a datapath bug),
/// the datapath's own reason is kept, and `explain` says they differ.
struct MapStateReasons<D, M> {
    datapath: D,
    mapstate: M,
}

impl<D: AddressOracle, M: AddressOracle> AddressOracle for MapStateReasons<D, M> {
    fn decide_address(
        &self,
        endpoint: std::net::IpAddr,
        direction: Direction,
        remote: std::net::IpAddr,
        protocol: Protocol,
        port: u16,
    ) -> Decision {
        let decided = self
            .datapath
            .decide_address(endpoint, direction, remote, protocol, port);
        let mapstate = self
            .mapstate
            .decide_address(endpoint, direction, remote, protocol, port);
        if mapstate.verdict == decided.verdict {
            Decision {
                reason: mapstate.reason,
                ..decided
            }
        } else {
            decided
        }
    }
}

/// The decider the user chose for `scenario` (answering at `endpoints` only, where given: see
/// [`oracle_at`]), or the reason there is none, reported on `err`.
pub fn decider<'a>(
    args: EngineArgs,
    scenario: &'a Scenario,
    endpoints: Option<&BTreeSet<String>>,
    err: &mut dyn Write,
) -> io::Result<Option<Box<dyn DirectionOracle + 'a>>> {
    decider_over(args, scenario, &scenario.cluster, endpoints, err)
}

/// [`decider`] over `cluster`: the scenario's, or another view of it (its would-be view,
/// policies in audit mode enforced).
pub fn decider_over<'a>(
    args: EngineArgs,
    scenario: &Scenario,
    cluster: &'a ClusterModel,
    endpoints: Option<&BTreeSet<String>>,
    err: &mut dyn Write,
) -> io::Result<Option<Box<dyn DirectionOracle + 'a>>> {
    match oracle_at(args, cluster, endpoints) {
        Ok(oracle) => Ok(Some(oracle)),
        Err(e) => {
            writeln!(err, "error: {}: {e}", scenario.file.display())?;
            Ok(None)
        }
    }
}

/// Whether `args` name the MapState engine itself, which [`what_if::WhatIf`] decides as well.
pub fn is_mapstate(args: EngineArgs) -> bool {
    args.engine == EngineKind::Mapstate && args.datapath.is_none()
}

/// The MapState engine loaded with a whole scenario, every pod a local endpoint.
pub(crate) fn load_engine(cluster: &ClusterModel) -> Engine {
    load_engine_at(cluster, None)
}

/// [`load_engine`], keeping the entries of policies in audit mode for
/// [`Engine::would_be_map`] (the enforced maps are the same).
pub(crate) fn load_engine_keeping_audited(cluster: &ClusterModel) -> Engine {
    load_engine_with(cluster, None, true)
}

/// The MapState engine loaded with a whole scenario, the pods `endpoints` names (every pod
/// where `None`) local endpoints.
fn load_engine_at(cluster: &ClusterModel, endpoints: Option<&BTreeSet<String>>) -> Engine {
    load_engine_with(cluster, endpoints, false)
}

/// [`load_engine_at`], keeping audited entries where `keep_audited`.
fn load_engine_with(
    cluster: &ClusterModel,
    endpoints: Option<&BTreeSet<String>>,
    keep_audited: bool,
) -> Engine {
    let mut engine = Engine::new(EngineConfig {
        local_node: None,
        allow_node_probes: true,
    });
    if keep_audited {
        engine.keep_audited();
    }
    if let Some(endpoints) = endpoints {
        engine.only_endpoints(endpoints.iter().cloned());
    }
    engine.set_policy("scenario", cluster.policy_entries().to_vec());
    for (pod, identities) in cluster.pods() {
        engine.set_pod(pod.to_string(), identities.into_iter().cloned().collect());
    }
    for (node, identities) in cluster.nodes() {
        engine.set_node(node, identities.into_iter().cloned().collect());
    }
    engine.commit_unreported();
    engine
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::PodRef;
    use netpol_engine::flow::decide_flow;
    use netpol_engine::{
        Direction, Identity, IdentityId, LabelSelector, Labels, NodeInfo, Peer, PodInfo,
        PodSelector, PolicyEntry, PortRule, Priority, Protocol, Provenance, Tier, Verdict,
    };

    fn pod(ns: &str, name: &str, node: &str, ip: &str) -> (PodRef, Vec<Identity>) {
        let info = PodInfo {
            namespace: ns.into(),
            name: name.into(),
            labels: Labels::from([("pod".to_string(), name.to_string())]).into(),
            namespace_labels: Labels::from([(
                netpol_engine::NAMESPACE_NAME_LABEL.to_string(),
                ns.to_string(),
            )])
            .into(),
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
    fn cluster() -> ClusterModel {
        let mut cluster = ClusterModel::new();
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
                labels: Default::default(),
            };
            cluster.add_node(name, vec![Identity::node(info, ip.parse().unwrap())]);
        }
        cluster.add_entries([PolicyEntry {
            tier: Tier::Normal,
            priority: Priority::unordered(),
            verdict: Verdict::Allow,
            subject: PodSelector::in_namespace("x", LabelSelector::from_labels([("pod", "a")])),
            direction: Direction::Ingress,
            peers: vec![Peer::pods(PodSelector::in_namespace(
                "x",
                LabelSelector::from_labels([("pod", "b")]),
            ))],
            ports: vec![PortRule::single(Protocol::Tcp, 80)],
            default_deny: true,
            enforcement: netpol_engine::Enforcement::Enforce,
            auth: None,
            provenance: Provenance::default(),
        }]);
        cluster
    }

    /// Every way of deciding flows the CLI offers.
    const DECIDERS: [EngineArgs; 4] = [
        EngineArgs {
            engine: EngineKind::Reference,
            datapath: None,
            hcn_ip_sets: HcnIpSets::Auto,
            hcn_sim_mode: netpol_hcn::sim::SimMode::Ideal,
        },
        EngineArgs {
            engine: EngineKind::Mapstate,
            datapath: None,
            hcn_ip_sets: HcnIpSets::Auto,
            hcn_sim_mode: netpol_hcn::sim::SimMode::Ideal,
        },
        EngineArgs {
            engine: EngineKind::Mapstate,
            datapath: Some(DatapathKind::HcnSim),
            hcn_ip_sets: HcnIpSets::On,
            hcn_sim_mode: netpol_hcn::sim::SimMode::Ideal,
        },
        EngineArgs {
            engine: EngineKind::Mapstate,
            datapath: Some(DatapathKind::HcnSim),
            hcn_ip_sets: HcnIpSets::Off,
            hcn_sim_mode: netpol_hcn::sim::SimMode::Ideal,
        },
    ];

    fn verdicts(args: EngineArgs, cluster: &ClusterModel) -> Vec<bool> {
        let oracle = oracle(args, cluster).unwrap();
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
    fn every_decider_decides_every_flow_alike() {
        let cluster = cluster();
        let reference = verdicts(DECIDERS[0], &cluster);
        assert!(reference.contains(&false), "the policy denies something");
        for args in &DECIDERS[1..] {
            assert_eq!(reference, verdicts(*args, &cluster), "{args:?}");
        }
    }

    #[test]
    fn only_the_allowed_peer_and_the_own_node_reach_the_isolated_pod() {
        let cluster = cluster();
        for args in DECIDERS {
            let oracle = oracle(args, &cluster).unwrap();
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
            assert!(decide("x/b", "x/a", 80), "{args:?}");
            assert!(!decide("x/b", "x/a", 81), "{args:?}");
            assert!(!decide("y/a", "x/a", 80), "{args:?}");
            assert!(decide("10.0.0.1", "x/a", 81), "{args:?}: own node probes");
            assert!(!decide("10.0.0.2", "x/a", 81), "{args:?}: other node");
            assert!(decide("x/a", "y/a", 81), "{args:?}: egress is not isolated");
        }
    }

    #[test]
    fn a_datapath_needs_the_mapstate_engine() {
        let args = EngineArgs {
            engine: EngineKind::Reference,
            datapath: Some(DatapathKind::HcnSim),
            hcn_ip_sets: HcnIpSets::Auto,
            hcn_sim_mode: netpol_hcn::sim::SimMode::Ideal,
        };
        assert!(matches!(
            oracle(args, &cluster()),
            Err(OracleError::DatapathNeedsMapState)
        ));
    }
}
