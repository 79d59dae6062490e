//! A selector that reads a per-pod label costs what it selects (issue 33): a policy naming two
//! StatefulSet pods by `statefulset.kubernetes.io/pod-name` splits off those two pods'
//! identities, not one identity per pod carrying the key, and an endpoint whose rules cover
//! every pod gains keys for those two only.

use crate::common;

use common::*;
use netpol_engine::*;

const PODS: usize = 60;

fn spec(index: usize) -> PodSpec {
    PodSpec {
        namespace: index % 3,
        app: ["web", "db", "api"][index % 3],
        node: usize::from(index >= 2),
        http_port: 80,
        ipv6: false,
    }
}

fn entry(
    name: &str,
    subject: PodSelector,
    direction: Direction,
    peers: Vec<Peer>,
) -> Vec<PolicyEntry> {
    vec![PolicyEntry {
        tier: Tier::Normal,
        priority: Priority::unordered(),
        verdict: Verdict::Allow,
        subject,
        direction,
        peers,
        ports: vec![PortRule::single(Protocol::Tcp, 5432)],
        default_deny: true,
        enforcement: Enforcement::Enforce,
        auth: None,
        provenance: Provenance {
            kind: "NetworkPolicy".into(),
            namespace: None,
            name: name.into(),
            rule: "0".into(),
        },
    }]
}

/// Ingress to the local `web` pod (pod0) from every pod of the cluster: its MapState covers
/// every identity, and its rules read no per-pod label.
fn open_web() -> Vec<PolicyEntry> {
    entry(
        "web-from-all",
        PodSelector::in_namespace("ns0", LabelSelector::from_labels([("app", "web")])),
        Direction::Ingress,
        vec![Peer::pods(PodSelector::all())],
    )
}

/// Egress from the local `db` pod (pod1) to two replicas named by their `pod-name` label, in any
/// namespace: the shape of the issue.
fn to_two_replicas() -> Vec<PolicyEntry> {
    let replicas = LabelSelector {
        match_labels: Labels::new(),
        match_expressions: vec![Requirement::In(
            POD_NAME_LABEL.into(),
            vec!["pod7".into(), "pod11".into()],
        )],
    };
    entry(
        "db-to-replicas",
        PodSelector::in_namespace("ns1", LabelSelector::from_labels([("app", "db")])),
        Direction::Egress,
        vec![Peer::pods(PodSelector {
            namespaces: LabelSelector::everything(),
            pods: replicas,
        })],
    )
}

fn cluster() -> Engine {
    let mut engine = Engine::new(EngineConfig {
        local_node: Some(NODES[0].0.into()),
        ..EngineConfig::default()
    });
    for (index, (name, _, _)) in NODES.iter().enumerate() {
        engine.set_node(*name, node_identities(index));
    }
    for index in 0..PODS {
        engine.set_pod(
            format!("pod{index}"),
            pod_identities(index, &spec(index), false),
        );
    }
    engine.set_policy("web-from-all", open_web());
    engine.commit();
    engine
}

fn rows(engine: &Engine, pod: &str) -> usize {
    canonical(engine).get(pod).map_or(0, Vec::len)
}

#[test]
fn a_selector_naming_two_replicas_splits_off_two_identities() {
    let mut engine = cluster();
    let identities = engine.identities().len();
    let web_rows = rows(&engine, "pod0");
    assert!(
        identities < PODS / 2,
        "without the policy, replicas of one workload share an identity ({identities} identities)"
    );

    engine.set_policy("db-to-replicas", to_two_replicas());
    engine.commit();
    assert_eq!(
        engine.identities().len(),
        identities + 2,
        "the two named replicas split off; every other pod keeps its identity"
    );
    // The web endpoint's rule covers every identity: it gains keys for the two new ones only
    // (one per identity and port prefix), not one per pod carrying the key.
    let gained = rows(&engine, "pod0") - web_rows;
    assert!(gained <= 2, "web gained {gained} MapState rows");
    assert!(
        first_disagreement(&engine).is_none(),
        "{:?}",
        first_disagreement(&engine)
    );
    assert!(engine.recompute_all().is_empty(), "incremental equals full");

    // The db endpoint reaches the two replicas and nothing else on 5432.
    let db = engine.endpoint("pod1").expect("pod1 is local");
    let resolve = |index: usize| {
        let address = pod_identities(index, &spec(index), false)[0].prefix.addr();
        engine
            .identities()
            .resolve(address)
            .expect("a pod identity")
    };
    let verdict = |index| {
        db.lookup(Direction::Egress, resolve(index), Protocol::Tcp, 5432)
            .verdict
    };
    assert_eq!(verdict(7), Verdict::Allow);
    assert_eq!(verdict(11), Verdict::Allow);
    assert_eq!(
        verdict(10),
        Verdict::Deny,
        "pod10 shares pod7's workload, not its name"
    );

    engine.set_policy("db-to-replicas", Vec::new());
    engine.commit();
    assert_eq!(engine.identities().len(), identities, "the two merge back");
    assert_eq!(rows(&engine, "pod0"), web_rows);
    assert!(engine.recompute_all().is_empty(), "incremental equals full");
}

#[test]
fn presence_tests_keep_the_key_with_one_stand_in_value() {
    let mut engine = cluster();
    let identities = engine.identities().len();
    let without_name = LabelSelector {
        match_labels: Labels::new(),
        match_expressions: vec![Requirement::DoesNotExist(POD_NAME_LABEL.into())],
    };
    engine.set_policy(
        "db-to-unnamed",
        entry(
            "db-to-unnamed",
            PodSelector::in_namespace("ns1", LabelSelector::from_labels([("app", "db")])),
            Direction::Egress,
            vec![Peer::pods(PodSelector {
                namespaces: LabelSelector::everything(),
                pods: without_name,
            })],
        ),
    );
    engine.commit();
    // Every pod carries the key: its presence is now read, its values still are not, so no pod
    // becomes an identity of its own.
    assert_eq!(engine.identities().len(), identities);
    assert!(
        first_disagreement(&engine).is_none(),
        "{:?}",
        first_disagreement(&engine)
    );
    assert!(engine.recompute_all().is_empty(), "incremental equals full");
}
