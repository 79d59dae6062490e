//! Grouping never changes a verdict: every cell of a class-based matrix (pods, nodes and the
//! regions outside the cluster) equals the flow decided for that pair of parties on its own,
//! on every scenario of the project and the shared scenarios, with every decider.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::changing::Changing;
use super::class_matrix::{compute_between, decide_between, node_parties, outside_parties};
use super::class_matrix::{deciding_pods, pod_classes, pod_parties, pods_among, Classes, Wanted};
use super::what_if::WhatIf;
use super::{is_mapstate, oracle, oracle_at, DatapathKind, EngineArgs, EngineKind, HcnIpSets};
use crate::probe_ports::ProbeArgs;
use netpol_engine::flow::{DirectionOracle, FlowDecision};
use netpol_engine::{
    AddressScope, CidrSelector, Direction, Entity, Identity, LabelSelector, Labels, NodeInfo, Peer,
    PodInfo, PodSelector, PolicyEntry, PortRule, Priority, Protocol, Provenance, Tier, Verdict,
};
use proptest::prelude::*;

use crate::loader::{ClusterModel, Input, PodRef, ReadFlags, Scenario};

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "topologies") {
                yaml_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "yaml") {
            out.push(path);
        }
    }
}

/// Every cell of the class-based matrices of `scenario` against the per-pair decision.
fn assert_classes_decide_as_pods(cluster: &ClusterModel, name: &str) -> usize {
    let mut cells = 0;
    let args = |engine, datapath, hcn_ip_sets| EngineArgs {
        engine,
        datapath,
        hcn_ip_sets,
        hcn_sim_mode: netpol_hcn::sim::SimMode::Ideal,
    };
    for args in [
        args(EngineKind::Mapstate, None, HcnIpSets::Auto),
        args(EngineKind::Reference, None, HcnIpSets::Auto),
        args(
            EngineKind::Mapstate,
            Some(DatapathKind::HcnSim),
            HcnIpSets::On,
        ),
        args(
            EngineKind::Mapstate,
            Some(DatapathKind::HcnSim),
            HcnIpSets::Off,
        ),
    ] {
        let Ok(oracle) = oracle(args, cluster) else {
            continue;
        };
        let mut parties = pod_parties(cluster);
        let classes = Rc::new(pod_classes(cluster, &parties));
        // The matrix is decided by an oracle that resolves only the pods it names; the pairs
        // alone by one that resolves every pod.
        let deciding = deciding_pods(cluster, &parties, &classes);
        let by_class = oracle_at(args, cluster, Some(&deciding)).expect("built once already");
        // The MapState engine also through what-if maps, resolving no endpoint (as `diff`
        // decides).
        let mut deciders: Vec<(&str, Box<dyn DirectionOracle>)> = vec![("endpoints", by_class)];
        if is_mapstate(args) {
            deciders.push(("what-if maps", Box::new(WhatIf::new(cluster))));
        }
        parties.extend(node_parties(cluster));
        parties.extend(outside_parties(&[cluster]));
        let probes = ProbeArgs::default().ports(&[cluster]);
        for (protocol, port) in probes {
            for (how, decider) in &deciders {
                let matrix = compute_between(
                    cluster,
                    decider.as_ref(),
                    &parties,
                    &classes,
                    protocol,
                    port,
                );
                for (i, from) in parties.iter().enumerate() {
                    for (j, to) in parties.iter().enumerate() {
                        let alone =
                            decide_between(cluster, oracle.as_ref(), from, to, protocol, port);
                        assert_eq!(
                            matrix.cell(i, j),
                            alone.as_ref().map(FlowDecision::as_ref),
                            "{name}: {from} -> {to} {protocol}/{port} with {args:?} ({how}): \
                             the class matrix and the pair decided alone differ"
                        );
                        cells += 1;
                    }
                }
            }
        }
    }
    cells
}

#[test]
fn class_matrices_decide_every_cell_as_the_pair_alone() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in [
        "examples/scenarios",
        "../shared/scenarios",
        "crates/cli/tests/fixtures",
    ] {
        yaml_files(&root.join(dir), &mut files);
    }
    let mut checked = 0;
    let mut cells = 0;
    for file in &files {
        // Fixtures include files made not to load.
        let Ok(scenario) = Scenario::load(file, ReadFlags::default()) else {
            continue;
        };
        cells += assert_classes_decide_as_pods(&scenario.cluster, &file.display().to_string());
        checked += 1;
    }
    let manifests = Input::Manifests(vec![
        root.join("examples/manifests/cluster.yaml"),
        root.join("examples/manifests/policies-after"),
    ]);
    let scenario = crate::input::load(&manifests, ReadFlags::default(), &mut std::io::sink())
        .expect("the example manifests are read")
        .expect("the example manifests load");
    cells += assert_classes_decide_as_pods(&scenario.cluster, "examples/manifests");
    assert!(checked >= 10, "only {checked} scenarios loaded");
    assert!(cells > 1000, "only {cells} cells compared");
}

/// A random pod: namespace, `app` and `role` labels (few values, so pods share classes), node.
fn arb_pod() -> impl Strategy<Value = (u8, u8, u8, u8)> {
    (0..2u8, 0..3u8, 0..2u8, 0..2u8)
}

/// A random entry: tier, verdict, direction, subject's namespace and app, a peer (pods of a
/// namespace and app or role, a pod's /32, the host, remote nodes, nodes by label, a node's
/// /32), a port or all traffic.
/// Tier, allow, egress, subject namespace, subject app, peer kind, peer value, port 80 only.
type RandomEntry = (u8, bool, bool, u8, u8, u8, u8, bool);

fn arb_entry() -> impl Strategy<Value = RandomEntry> {
    (
        0..3u8,
        any::<bool>(),
        any::<bool>(),
        0..2u8,
        0..3u8,
        0..7u8,
        0..8u8,
        any::<bool>(),
    )
}

fn random_cluster(pods: &[(u8, u8, u8, u8)], entries: &[RandomEntry]) -> ClusterModel {
    random_cluster_keeping(pods, entries, |_| true)
}

/// [`random_cluster`] with only the entries `keep` says yes to (by position).
fn random_cluster_keeping(
    pods: &[(u8, u8, u8, u8)],
    entries: &[RandomEntry],
    keep: impl Fn(usize) -> bool,
) -> ClusterModel {
    let ns = |n: u8| ["x", "y"][n as usize];
    let mut cluster = ClusterModel::new();
    for (i, &(n, app, role, node)) in pods.iter().enumerate() {
        let name = format!("p{i}");
        let labels = Labels::from([
            ("app".to_string(), format!("a{app}")),
            ("role".to_string(), format!("r{role}")),
            ("pod-name".to_string(), name.clone()),
        ]);
        let info = PodInfo {
            namespace: ns(n).into(),
            name: name.clone(),
            labels: labels.into(),
            namespace_labels: Labels::from([(
                netpol_engine::NAMESPACE_NAME_LABEL.to_string(),
                ns(n).to_string(),
            )])
            .into(),
            node: Some(format!("n{node}")),
            ports: vec![],
        };
        let address = format!("10.1.0.{}", i + 1).parse().unwrap();
        cluster.add_pod(
            PodRef {
                namespace: ns(n).into(),
                name,
            },
            vec![Identity::pod(info, address)],
        );
    }
    // Three nodes, told apart by a label (n0 and n2 alike) and by address; no pod runs on n2.
    for node in 0..3 {
        let name = format!("n{node}");
        let zone = if node == 1 { "b" } else { "a" };
        let info = NodeInfo {
            name: name.clone(),
            labels: Labels::from([("zone".to_string(), zone.to_string())]).into(),
        };
        let address = format!("10.0.0.{}", node + 1).parse().unwrap();
        cluster.add_node(&name, vec![Identity::node(info, address)]);
    }
    let entries = entries.iter().enumerate().filter(|(i, _)| keep(*i)).map(
        |(i, &(tier, allow, egress, n, app, peer, value, port))| {
            let selector =
                |key: &str, value: String| LabelSelector::from_labels([(key, value.as_str())]);
            let peers = match peer {
                0 => vec![Peer::pods(PodSelector::in_namespace(
                    ns(value % 2),
                    selector("app", format!("a{}", value % 3)),
                ))],
                1 => vec![Peer::pods(PodSelector::in_namespace(
                    ns(value % 2),
                    selector("pod-name", format!("p{value}")),
                ))],
                2 => vec![Peer::Cidr(CidrSelector {
                    net: format!("10.1.0.{}/32", value + 1).parse().unwrap(),
                    except: Default::default(),
                    scope: AddressScope::Any,
                })],
                3 => vec![Peer::Entity(Entity::Host)],
                4 => vec![Peer::Entity(Entity::RemoteNode)],
                5 => vec![Peer::nodes(selector(
                    "zone",
                    ["a", "b"][value as usize % 2].into(),
                ))],
                _ => vec![Peer::Cidr(CidrSelector {
                    net: format!("10.0.0.{}/32", value % 3 + 1).parse().unwrap(),
                    except: Default::default(),
                    scope: AddressScope::Any,
                })],
            };
            PolicyEntry {
                tier: [Tier::Admin, Tier::Normal, Tier::Baseline][tier as usize],
                priority: if tier == 1 {
                    Priority::unordered()
                } else {
                    Priority::new(i as u32, format!("p{i}"), 0)
                },
                verdict: if allow || tier == 1 {
                    Verdict::Allow
                } else {
                    Verdict::Deny
                },
                subject: PodSelector::in_namespace(ns(n), selector("app", format!("a{app}"))),
                direction: if egress {
                    Direction::Egress
                } else {
                    Direction::Ingress
                },
                peers,
                ports: if port {
                    vec![PortRule::single(Protocol::Tcp, 80)]
                } else {
                    vec![]
                },
                default_deny: tier == 1,
                enforcement: netpol_engine::Enforcement::Enforce,
                auth: None,
                provenance: Provenance::default(),
            }
        },
    );
    cluster.add_entries(entries.collect::<Vec<_>>());
    cluster
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random small clusters and rules in every tier: the class matrices decide every cell as
    /// the pair alone.
    #[test]
    fn random_clusters_decide_every_cell_as_the_pair_alone(
        pods in prop::collection::vec(arb_pod(), 1..8),
        entries in prop::collection::vec(arb_entry(), 0..6),
    ) {
        let cluster = random_cluster(&pods, &entries);
        assert_classes_decide_as_pods(&cluster, "random cluster");
    }

    /// Random small clusters and the same with some entries taken out, as `diff` compares
    /// them: every pair of classes [`Changing`] says cannot change decides alike on both sides.
    #[test]
    fn pairs_of_classes_with_unchanged_entries_decide_alike_on_both_sides(
        pods in prop::collection::vec(arb_pod(), 1..8),
        entries in prop::collection::vec(arb_entry(), 0..6),
        removed in prop::collection::vec(any::<bool>(), 6),
    ) {
        let before = random_cluster(&pods, &entries);
        let after = random_cluster_keeping(&pods, &entries, |i| !removed[i]);
        assert_unchanged_pairs_decide_alike([&before, &after]);
    }
}

fn assert_unchanged_pairs_decide_alike(clusters: [&ClusterModel; 2]) {
    let mut parties = pod_parties(clusters[0]);
    let classes = Rc::new(Classes::new(&clusters, &pods_among(&parties)));
    let n = parties.len();
    parties.extend(node_parties(clusters[0]));
    parties.extend(outside_parties(&clusters));
    let changing = Changing::new(clusters, [&parties, &parties], &classes);
    let wanted = |i: usize, j: usize| match (i < n, j < n) {
        (true, true) => changing.classes(classes.of[i] as usize, classes.of[j] as usize),
        (true, false) => changing.with_other(classes.of[i] as usize, j - n),
        (false, true) => changing.with_other(classes.of[j] as usize, i - n),
        (false, false) => false,
    };
    for args in [EngineKind::Mapstate, EngineKind::Reference] {
        let args = EngineArgs {
            engine: args,
            datapath: None,
            hcn_ip_sets: HcnIpSets::Auto,
            hcn_sim_mode: netpol_hcn::sim::SimMode::Ideal,
        };
        let oracles = clusters.map(|c| oracle(args, c).expect("a decider"));
        for (protocol, port) in ProbeArgs::default().ports(&clusters) {
            let [was, now] = [0, 1].map(|i| {
                compute_between(
                    clusters[i],
                    oracles[i].as_ref(),
                    &parties,
                    &classes,
                    protocol,
                    port,
                )
            });
            for i in 0..parties.len() {
                for j in 0..parties.len() {
                    if wanted(i, j) {
                        continue;
                    }
                    assert_eq!(
                        was.cell(i, j).map(|d| d.allowed()),
                        now.cell(i, j).map(|d| d.allowed()),
                        "{} -> {} on {protocol}/{port} with {args:?}",
                        parties[i],
                        parties[j]
                    );
                }
            }
        }
    }
}
