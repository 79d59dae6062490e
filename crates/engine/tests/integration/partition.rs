//! The partition the tools decide by is the engine's: pods with one key have, address by
//! address, one security identity in an engine loaded with the same policies, are selected by
//! the same entries, and have equal MapStates where they run on one node.

use crate::common;

use common::*;
use netpol_engine::engine::{Partition, PodKey};
use netpol_engine::*;
use proptest::prelude::*;

/// An engine with every pod a local endpoint (the tools' view), and each pod's identities.
fn load(entries: &[PolicyEntry], specs: &[PodSpec]) -> (Engine, Vec<Vec<Identity>>) {
    let mut engine = Engine::new(EngineConfig {
        local_node: None,
        allow_node_probes: true,
    });
    engine.set_policy("p", entries.to_vec());
    for (n, (name, ..)) in NODES.iter().enumerate() {
        engine.set_node(*name, node_identities(n));
    }
    let pods: Vec<Vec<Identity>> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| pod_identities(i, spec, false))
        .collect();
    for (i, identities) in pods.iter().enumerate() {
        engine.set_pod(format!("pod{i}"), identities.clone());
    }
    engine.commit_unreported();
    (engine, pods)
}

/// Each address's identity in `engine`.
fn identity_ids(engine: &Engine, identities: &[Identity]) -> Vec<Option<IdentityId>> {
    identities
        .iter()
        .map(|i| engine.identities().host(i.prefix.addr()))
        .collect()
}

fn key<'a>(partition: &Partition, identities: &'a [Identity]) -> PodKey<'a> {
    let info = identities[0].as_pod().expect("a pod");
    partition.pod_key(info, identities.iter().map(|i| i.prefix.addr()))
}

fn subject_selected(entries: &[PolicyEntry], pod: &PodInfo) -> Vec<bool> {
    entries.iter().map(|e| e.subject.matches(pod)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn the_partition_is_the_engines(
        entries in entries(6),
        specs in prop::collection::vec(pod_spec(), 1..10),
    ) {
        let (engine, pods) = load(&entries, &specs);
        let partition = Partition::of(engine.entries());
        let canonical = canonical(&engine);
        for a in 0..pods.len() {
            for b in 0..pods.len() {
                let (x, y) = (&pods[a], &pods[b]);
                let (px, py) = (x[0].as_pod().unwrap(), y[0].as_pod().unwrap());
                let same_identities = identity_ids(&engine, x) == identity_ids(&engine, y);
                if key(&partition, x) == key(&partition, y) {
                    prop_assert!(same_identities, "pod{a} and pod{b}: one key, other identities");
                    prop_assert_eq!(
                        subject_selected(engine.entries(), px),
                        subject_selected(engine.entries(), py)
                    );
                    if specs[a].node == specs[b].node {
                        prop_assert_eq!(
                            &canonical[&format!("pod{a}")],
                            &canonical[&format!("pod{b}")],
                            "pod{} and pod{}: one key, other MapStates", a, b
                        );
                    }
                }
            }
        }
    }
}

/// Replicas that differ only in labels no selector names are one class; a selector naming one
/// replica's own label splits that replica off, and only it.
#[test]
fn a_selector_naming_one_replica_splits_off_that_replica() {
    let spec = |_| PodSpec {
        namespace: 0,
        app: "db",
        node: 0,
        http_port: 80,
        ipv6: false,
    };
    let specs: Vec<PodSpec> = (0..4).map(spec).collect();
    let pods: Vec<Vec<Identity>> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| pod_identities(i, s, false))
        .collect();
    let classes = |entries: &[PolicyEntry]| {
        let partition = Partition::of(entries);
        let keys: Vec<PodKey> = pods
            .iter()
            .map(|p| partition.pod_key(p[0].as_pod().unwrap(), [p[0].prefix.addr()]))
            .collect();
        (0..keys.len())
            .map(|i| keys.iter().position(|k| *k == keys[i]).unwrap())
            .collect::<Vec<_>>()
    };
    let naming = |name: &str| PolicyEntry {
        peers: vec![Peer::pods(PodSelector::in_namespace(
            "ns0",
            LabelSelector::from_labels([(POD_NAME_LABEL, name)]),
        ))],
        ..PolicyEntry::node_probe_allowance()
    };
    assert_eq!(classes(&[]), [0, 0, 0, 0]);
    assert_eq!(classes(&[naming("pod2")]), [0, 0, 2, 0]);
}
