//! Datapath calls for one-pod changes in a 10,000-pod synthetic cluster. The counts are
//! deterministic, so the test asserts them exactly: a pod change modifies exactly the local
//! endpoints whose rendered ACLs it changes, and, with HNS IP sets, the network's sets whose
//! addresses it changes, and nothing else. Run with addresses inline and with IP sets.
//! `--nocapture` prints the figures.

use crate::agent_support;

use std::collections::BTreeMap;
use std::sync::Arc;

use agent_support::*;
use netpol_agent::indexes::SourceEvent;
use netpol_agent::metrics::Metrics;
use netpol_agent::reconciler::Pipeline;
use netpol_agent::SourceKind;
use netpol_api::Object;
use netpol_hcn::discovery::SimulatedCni;
use netpol_hcn::ipsets::SetTable;
use netpol_hcn::render::Remotes;
use netpol_hcn::sim::{Call, CallKind, HcnSim};
use netpol_hcn::{
    AclRemoval, HcnAcls, HcnDatapath, IpSetMode, WriteOptions, DEFAULT_MAX_ACLS_PER_REQUEST,
};
use netpol_indexes::Event;
use serde_json::{json, Value};

const NAMESPACES: usize = 50;
const PODS: usize = 10_000;
const NODES: usize = 20;
const APPS: usize = 25;

fn object(value: Value) -> Object {
    Object::from_value(value).unwrap()
}

fn pod_ip(i: usize) -> String {
    format!("10.128.{}.{}", i / 250, i % 250 + 1)
}

fn pod(i: usize, name: &str, app: usize, node: usize) -> Object {
    object(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": format!("ns-{}", i % NAMESPACES),
            "labels": {"app": format!("app-{app}")}
        },
        "spec": {
            "nodeName": format!("node-{node}"),
            "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]
        },
        "status": {"phase": "Running", "podIP": pod_ip(i)}
    }))
}

/// The synthetic cluster, kind by kind.
fn cluster() -> BTreeMap<SourceKind, Vec<Object>> {
    let mut objects: BTreeMap<SourceKind, Vec<Object>> = BTreeMap::new();
    let mut add = |object: Object| {
        objects
            .entry(SourceKind::of(&object))
            .or_default()
            .push(object)
    };
    for n in 0..NODES {
        add(object(json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("node-{n}")},
            "status": {"addresses": [{"type": "InternalIP", "address": format!("10.0.0.{}", n + 1)}]}
        })));
    }
    for ns in 0..NAMESPACES {
        let env = if ns % 3 == 0 { "prod" } else { "dev" };
        add(object(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": format!("ns-{ns}"), "labels": {"team": format!("team-{}", ns % 10), "env": env}}
        })));
        // Each app admits the next app of its namespace on its named port.
        add(object(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "chain", "namespace": format!("ns-{ns}")},
            "spec": {"podSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
                     "ingress": [{"from": [{"podSelector": {}}], "ports": [{"port": "http"}]}]}
        })));
    }
    for i in 0..PODS {
        add(pod(i, &format!("pod-{i}"), i % APPS, i % NODES));
    }
    add(object(json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
        "metadata": {"name": "protect-prod"},
        "spec": {"priority": 10, "subject": {"namespaces": {"matchLabels": {"env": "prod"}}},
                 "ingress": [{"name": "deny-team-3", "action": "Deny",
                              "from": [{"namespaces": {"matchLabels": {"team": "team-3"}}}]}]}
    })));
    add(object(json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "BaselineAdminNetworkPolicy",
        "metadata": {"name": "default"},
        "spec": {"subject": {"namespaces": {}},
                 "egress": [{"name": "no-metadata", "action": "Deny",
                             "to": [{"networks": ["169.254.169.254/32"]}]}]}
    })));
    objects
}

fn relist(kind: SourceKind, objects: Vec<Object>) -> Vec<SourceEvent> {
    let mut events = vec![SourceEvent::new(kind, Event::Init)];
    events.extend(
        objects
            .into_iter()
            .map(|o| SourceEvent::new(kind, Event::InitApply(o))),
    );
    events.push(SourceEvent::new(kind, Event::InitDone));
    events
}

fn count(calls: &[Call], kind: CallKind) -> usize {
    calls.iter().filter(|c| c.kind() == kind).count()
}

/// The local pods whose compiled rules differ between two snapshots.
fn rule_changes(
    before: &BTreeMap<String, Vec<String>>,
    after: &BTreeMap<String, Vec<String>>,
) -> usize {
    after
        .iter()
        .filter(|(pod, ids)| before.get(*pod) != Some(ids))
        .count()
        + before
            .keys()
            .filter(|pod| !after.contains_key(*pod))
            .count()
}

/// The calls the programmer makes for a change, under the default write protocol
/// ([`netpol_hcn::WriteOptions::default`]): per endpoint whose ACLs change, a read, the rules it
/// gains in `Add`s of at most [`DEFAULT_MAX_ACLS_PER_REQUEST`], then, if it loses some, a read of
/// the list and one `Update` carrying it without them, and a read back. Returns the `Modify`
/// and `Query` calls.
fn requests(
    before: &BTreeMap<String, Vec<String>>,
    after: &BTreeMap<String, Vec<String>>,
) -> (usize, usize) {
    assert_eq!(WriteOptions::default().removal, AclRemoval::Replace);
    let mut modifies = 0;
    let mut queries = 0;
    for (pod, ids) in after {
        let old = before.get(pod).cloned().unwrap_or_default();
        if old == *ids {
            continue;
        }
        let added = ids.iter().filter(|id| !old.contains(id)).count();
        let removes = old.iter().any(|id| !ids.contains(id));
        modifies += added.div_ceil(DEFAULT_MAX_ACLS_PER_REQUEST) + usize::from(removes);
        queries += 2 + usize::from(removes);
    }
    (modifies, queries)
}

/// What the enforcer writes, rendered as it renders: per local pod its ACL ids (with sets, an
/// ACL names its set, so its id does not follow the addresses) and the network's sets.
struct Snapshot {
    rules: BTreeMap<String, Vec<String>>,
    sets: BTreeMap<String, String>,
}

fn snapshot(pipeline: &Pipeline, mode: IpSetMode) -> Snapshot {
    let store = pipeline.engine().identities();
    let mut table = SetTable::default();
    let rules = pipeline
        .compiled()
        .iter()
        .map(|(pod, compiled)| {
            let acls = match mode {
                IpSetMode::Off => HcnAcls::render(compiled, store),
                _ => HcnAcls::render_with(compiled, store, &mut Remotes::Sets(&mut table)),
            };
            (
                pod.clone(),
                acls.rules.iter().map(|r| r.id.clone()).collect(),
            )
        })
        .collect();
    let sets = table
        .all()
        .into_iter()
        .map(|(id, set)| (id.to_string(), set.values.clone()))
        .collect();
    Snapshot { rules, sets }
}

/// The network modify calls a change of sets takes: one `Add` of the new sets, one `Update`
/// of those whose addresses changed, one `Remove` of those no ACL names any more.
fn set_requests(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> usize {
    let added = after.keys().any(|id| !before.contains_key(id));
    let updated = after
        .iter()
        .any(|(id, values)| before.get(id).is_some_and(|old| old != values));
    let removed = before.keys().any(|id| !after.contains_key(id));
    usize::from(added) + usize::from(updated) + usize::from(removed)
}

/// Local replicas (one security identity) share one compiled rule set, and every shared set is
/// exactly what compiling the endpoint's own MapState gives.
fn assert_replicas_share_compiled_rules(pipeline: &Pipeline) {
    let options = netpol_datapath::CompileOptions::default();
    let mut distinct: Vec<netpol_engine::SharedId> = Vec::new();
    for (pod, acls) in pipeline.compiled() {
        let map = pipeline.engine().endpoint(pod).unwrap();
        let own =
            netpol_datapath::compile_endpoint_with(map, pipeline.engine().identities(), &options)
                .unwrap();
        assert_eq!(own.rules, acls.rules, "{pod}");
        if !distinct.contains(&acls.id()) {
            distinct.push(acls.id());
        }
    }
    let local = pipeline.compiled().len();
    assert!(
        distinct.len() < local / 2,
        "{} compiled rule sets for {local} endpoints",
        distinct.len()
    );
}

#[test]
fn one_pod_changes_in_a_10k_pod_cluster_modify_only_the_endpoints_they_affect() {
    one_pod_changes(IpSetMode::Off);
}

#[test]
fn with_ip_sets_one_pod_changes_modify_only_the_sets_and_endpoints_they_affect() {
    one_pod_changes(IpSetMode::On);
}

fn one_pod_changes(mode: IpSetMode) {
    let sim = Arc::new(HcnDatapath::with_ip_sets(HcnSim::new(), mode));
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Metrics::register(&mut registry);
    let mut pipeline = Pipeline::new(
        NODE,
        Arc::new(netpol_agent::instrumented::Instrumented::new(
            sim.clone(),
            metrics.clone(),
        )),
        Box::new(SimulatedCni::new(sim.clone())),
        backoff(),
        metrics,
    );
    let mut objects = cluster();
    for kind in SourceKind::ALL {
        for event in relist(kind, objects.remove(&kind).unwrap_or_default()) {
            pipeline.ingest(event);
        }
    }
    let now = std::time::Instant::now();
    assert!(pipeline.reconcile(now).unwrap().complete());
    let local = pipeline.compiled().len();
    assert_eq!(local, PODS / NODES);
    assert_replicas_share_compiled_rules(&pipeline);
    let initial = sim.calls().take_calls();
    eprintln!(
        "10k-pod cluster, {local} local endpoints: initial sync {} modify, {} query, {} enumerate",
        count(&initial, CallKind::Modify),
        count(&initial, CallKind::Query),
        count(&initial, CallKind::Enumerate)
    );

    let cases: [(&str, Event<Object>); 5] = [
        // A remote pod of a dev namespace without local pods: no local rule names it.
        (
            "a remote pod added in ns-2",
            Event::Apply(pod(10_002, "extra-2", 0, 2)),
        ),
        // A remote pod in a dev namespace: only the local pods of its namespace admit it (the
        // namespace's chain policy), so only they change.
        (
            "a remote pod added in ns-1",
            Event::Apply(pod(10_001, "extra-1", 0, 2)),
        ),
        // A remote pod of team 3: the prod endpoints' admin Deny names its address too, and its
        // namespace's own pods admit it.
        (
            "a remote pod added in ns-3",
            Event::Apply(pod(10_003, "extra-3", 0, 2)),
        ),
        // A new local pod: its own endpoint, and its namespace's local pods that admit it.
        (
            "a local pod added in ns-21",
            Event::Apply(pod(10_021, "extra-21", 0, 1)),
        ),
        (
            "the ns-3 pod deleted again",
            Event::Delete(pod(10_003, "extra-3", 0, 2)),
        ),
    ];
    for (what, event) in cases {
        let before = snapshot(&pipeline, mode);
        pipeline.ingest(SourceEvent::new(SourceKind::Pod, event));
        let report = pipeline.reconcile(now).unwrap();
        assert!(report.complete());
        let calls = sim.calls().take_calls();
        let after = snapshot(&pipeline, mode);
        let changed = rule_changes(&before.rules, &after.rules);
        let (modifies, queries) = requests(&before.rules, &after.rules);
        eprintln!(
            "{mode:?}, {what}: {} MapStates changed, {changed} ACL lists changed, datapath calls: {} modify, {} query, {} enumerate, {} network modify",
            report.changed_pods.len(),
            count(&calls, CallKind::Modify),
            count(&calls, CallKind::Query),
            count(&calls, CallKind::Enumerate),
            count(&calls, CallKind::ModifyNetwork),
        );
        // Only the endpoints whose ACLs changed get requests: batched `Add`s of the rules they
        // gain, one `Update` without those they lose.
        assert_eq!(
            count(&calls, CallKind::Modify),
            modifies,
            "{mode:?}, {what}"
        );
        // Each is read before the requests, again before an `Update`, and back after them;
        // nothing lists the endpoints again, and the network's sets are not read again either.
        assert_eq!(count(&calls, CallKind::Query), queries, "{mode:?}, {what}");
        assert_eq!(count(&calls, CallKind::Enumerate), 0, "{mode:?}, {what}");
        assert_eq!(count(&calls, CallKind::QueryNetwork), 0, "{mode:?}, {what}");
        assert_eq!(
            count(&calls, CallKind::ModifyNetwork),
            set_requests(&before.sets, &after.sets),
            "{mode:?}, {what}"
        );
        assert!(
            changed < local / 4,
            "{what}: a one-pod change rewrote {changed} of {local} endpoints"
        );
        if mode == IpSetMode::On {
            // A pod of an existing label set changes addresses only: with sets, no endpoint's
            // ACLs change but a new (or gone) local endpoint's own.
            let arrived_or_left = after
                .rules
                .keys()
                .filter(|p| !before.rules.contains_key(*p))
                .count()
                + before
                    .rules
                    .keys()
                    .filter(|p| !after.rules.contains_key(*p))
                    .count();
            assert_eq!(
                changed, arrived_or_left,
                "{what}: with IP sets, an address change rewrote ACLs"
            );
        }
    }
}
