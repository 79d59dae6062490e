//! Local replicas that policies cannot tell apart share one MapState, even when each carries a
//! label of its own (a StatefulSet pod's `pod-name`) that no subject selector reads.

use crate::common;

use common::*;
use netpol_engine::*;

fn policy_for_app(app: &str) -> Vec<PolicyEntry> {
    vec![PolicyEntry {
        tier: Tier::Normal,
        priority: Priority::unordered(),
        verdict: Verdict::Allow,
        subject: PodSelector::in_namespace("ns0", LabelSelector::from_labels([("app", app)])),
        direction: Direction::Ingress,
        peers: vec![Peer::pods(PodSelector::in_namespace(
            "ns0",
            LabelSelector::from_labels([("app", "db")]),
        ))],
        ports: Vec::new(),
        default_deny: true,
        enforcement: netpol_engine::Enforcement::Enforce,
        auth: None,
        provenance: Provenance::default(),
    }]
}

fn spec(app: &'static str) -> PodSpec {
    PodSpec {
        namespace: 0,
        app,
        node: 0,
        http_port: 80,
        ipv6: false,
    }
}

#[test]
fn replicas_differing_only_in_labels_no_subject_reads_share_one_map() {
    let mut engine = Engine::new(EngineConfig {
        local_node: Some(NODES[0].0.into()),
        ..EngineConfig::default()
    });
    // Each pod carries its own `statefulset.kubernetes.io/pod-name` and a `pod-template-hash`.
    for (i, app) in ["web", "web", "web", "db"].into_iter().enumerate() {
        engine.set_pod(format!("pod{i}"), pod_identities(i, &spec(app), false));
    }
    engine.set_policy("web", policy_for_app("web"));
    engine.commit();
    let map = |key: &str| engine.endpoint(key).expect("a local endpoint") as *const MapState;
    assert_eq!(map("pod0"), map("pod1"));
    assert_eq!(map("pod0"), map("pod2"));
    assert_ne!(
        map("pod0"),
        map("pod3"),
        "the db pod is selected by other entries"
    );

    // A policy whose subject reads the pod-name label tells every pod apart: pod1 gets a map of
    // its own (and pod0 and pod2, which that policy does not select, no longer count as twins).
    let mut own = policy_for_app("web");
    own[0].subject = PodSelector::in_namespace(
        "ns0",
        LabelSelector::from_labels([(POD_NAME_LABEL, "pod1")]),
    );
    own[0].peers = vec![Peer::Entity(Entity::All)];
    engine.set_policy("pod1", own);
    engine.commit();
    let map = |key: &str| engine.endpoint(key).expect("a local endpoint") as *const MapState;
    assert_ne!(map("pod0"), map("pod1"));
    assert_ne!(map("pod2"), map("pod1"));
    // Shared or not, every map equals a fresh engine's and decides as the reference evaluator.
    assert_eq!(canonical(&engine), canonical(&engine_snapshot(&engine)));
    assert_eq!(first_disagreement(&engine), None);
}

/// A fresh engine with the same pods, nodes and policies, committed once.
fn engine_snapshot(engine: &Engine) -> Engine {
    let mut fresh = Engine::new(EngineConfig {
        local_node: Some(NODES[0].0.into()),
        ..EngineConfig::default()
    });
    for (key, identities) in engine.pods() {
        fresh.set_pod(key, identities.to_vec());
    }
    fresh.set_policy("all", engine.entries().iter().skip(1).cloned().collect());
    fresh.commit();
    fresh
}
