//! Engine benchmarks (issue 3): Cilium's CIDR workload, resolving one endpoint among many
//! unselected rules, and identity churn in a large synthetic cluster. Figures are reported in
//! docs/performance.md.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use netpol_dev::synth::engine_terms::{cidr_workload, ClusterSize, SyntheticCluster};
use netpol_engine::*;

fn allow_all_egress_subject() -> PodSelector {
    PodSelector::in_namespace("ns-0", LabelSelector::from_labels([("app", "app-0")]))
}

fn bench_cidr_workload(c: &mut Criterion) {
    let cluster = SyntheticCluster::new(ClusterSize {
        namespaces: 1,
        pods: 1,
        nodes: 1,
        policies: 0,
    });
    let (key, pod) = cluster.pod(0);
    let entries = cidr_workload(&allow_all_egress_subject());
    let mut probe = Engine::new(EngineConfig::default());
    probe.set_pod(key.clone(), vec![pod.clone()]);
    probe.set_policy("cidr", entries.clone());
    probe.commit();
    eprintln!(
        "cidr workload: {} MapState entries",
        probe.endpoint(&key).unwrap().len()
    );
    let mut group = c.benchmark_group("cidr_workload");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    group.bench_function("2000_cidr_rules_one_endpoint", |b| {
        b.iter_batched(
            || entries.clone(),
            |entries| {
                let mut engine = Engine::new(EngineConfig::default());
                engine.set_pod(key.clone(), vec![pod.clone()]);
                engine.set_policy("cidr", entries);
                engine.commit();
                engine
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

fn bench_unselected_rules(c: &mut Criterion) {
    // 20,000 rules, each selecting a namespace the endpoint is not in.
    let cluster = SyntheticCluster::new(ClusterSize {
        namespaces: 2,
        pods: 1,
        nodes: 1,
        policies: 0,
    });
    let (key, pod) = cluster.pod(0);
    let mut engine = Engine::new(EngineConfig::default());
    engine.set_pod(key.clone(), vec![pod]);
    for i in 0..20_000 {
        let ns = format!("other-{}", i % 1000);
        let entry = PolicyEntry {
            tier: Tier::Normal,
            priority: Priority::unordered(),
            verdict: Verdict::Allow,
            subject: PodSelector::in_namespace(
                &ns,
                LabelSelector::from_labels([("app", format!("app-{i}"))]),
            ),
            direction: Direction::Ingress,
            peers: vec![Peer::pods(PodSelector::in_namespace(
                &ns,
                LabelSelector::everything(),
            ))],
            ports: vec![PortRule::single(Protocol::Tcp, 80)],
            default_deny: true,
            enforcement: netpol_engine::Enforcement::Enforce,
            auth: None,
            provenance: Provenance::default(),
        };
        engine.set_policy(format!("np-{i}"), vec![entry]);
    }
    engine.commit();
    c.bench_function(
        "unselected_rules/resolve_one_endpoint_among_20000_rules",
        |b| b.iter(|| engine.recompute_all()),
    );
}

fn bench_identity_churn(c: &mut Criterion) {
    let size = ClusterSize {
        namespaces: 500,
        pods: 10_000,
        nodes: 100,
        policies: 2_000,
    };
    let cluster = SyntheticCluster::new(size.clone());
    // node-0 holds pods 0..99: 100 local endpoints over 100 namespaces and every app.
    let mut engine = Engine::new(EngineConfig {
        local_node: Some(cluster.node_name(0)),
        allow_node_probes: true,
    });
    cluster.stage_into(&mut engine);
    engine.commit();
    let entries: usize = engine.endpoints().map(|(_, m)| m.len()).sum();
    eprintln!(
        "identity churn: {} endpoints, {} MapState entries, {} selectors, {} identities",
        engine.endpoints().count(),
        entries,
        engine.selector_count(),
        engine.identities().len()
    );
    // A pod like pod 1 (same namespace and app), so policies select it.
    let (_, template) = cluster.pod(1);
    let mut pod = template.clone();
    pod.prefix = "10.200.0.1/32".parse().unwrap();
    let key = "ns-1/churn".to_string();
    let mut changed = 0;
    c.bench_function(
        "identity_churn/add_and_remove_one_pod_10000_pods_2000_policies",
        |b| {
            b.iter(|| {
                engine.set_pod(key.clone(), vec![pod.clone()]);
                changed += engine.commit().len();
                engine.set_pod(key.clone(), vec![]);
                changed += engine.commit().len();
            })
        },
    );
    eprintln!(
        "identity churn: endpoints changed per add+remove cycle (summed over runs): {changed}"
    );
}

/// One pod change at Kubernetes' published limits (150,000 pods, 5,000 nodes, 36,000 policies):
/// a new replica of an existing workload (its label set has an identity already) and a pod with
/// a label set of its own. The replica must change address sets only: no MapState entry.
fn bench_one_pod_change_150k(c: &mut Criterion) {
    let size = ClusterSize {
        namespaces: 7_500,
        pods: 150_000,
        nodes: 5_000,
        policies: 36_000,
    };
    let cluster = SyntheticCluster::new(size);
    let mut engine = Engine::new(EngineConfig {
        local_node: Some(cluster.node_name(0)),
        allow_node_probes: true,
    });
    let started = std::time::Instant::now();
    cluster.stage_into(&mut engine);
    engine.commit();
    let entries: usize = engine.endpoints().map(|(_, m)| m.len()).sum();
    eprintln!(
        "150k pods: built in {:.1} s; {} endpoints, {entries} MapState entries, {} identities for {} addresses",
        started.elapsed().as_secs_f64(),
        engine.endpoints().count(),
        engine.identities().len(),
        engine.identities().address_count()
    );
    // Pod 7,501 (ns-1, app-1, tier back, on node-250) is a replica of local pod 1: a new pod
    // like it on another node has its label set's identity already.
    let (_, template) = cluster.pod(7_501);
    let mut replica = template.clone();
    replica.prefix = "10.250.0.1/32".parse().unwrap();
    let mut mapstate_changes = 0;
    c.bench_function("one_pod_change_150k/add_and_remove_a_replica", |b| {
        b.iter(|| {
            engine.set_pod("ns-1/replica".to_string(), vec![replica.clone()]);
            let added = engine.commit();
            engine.set_pod("ns-1/replica".to_string(), vec![]);
            let removed = engine.commit();
            mapstate_changes += added
                .iter()
                .chain(&removed)
                .map(|c| c.changes.len())
                .sum::<usize>();
        })
    });
    assert_eq!(mapstate_changes, 0, "a replica changed MapState entries");
    let mut unique = template.clone();
    unique.prefix = "10.250.0.2/32".parse().unwrap();
    if let IdentityKind::Pod(info) = &mut unique.kind {
        let mut labels = Labels::clone(&info.labels);
        labels.insert("canary".into(), "true".into());
        info.labels = labels.into();
    }
    c.bench_function("one_pod_change_150k/add_and_remove_a_new_label_set", |b| {
        b.iter(|| {
            engine.set_pod("ns-1/canary".to_string(), vec![unique.clone()]);
            engine.commit();
            engine.set_pod("ns-1/canary".to_string(), vec![]);
            engine.commit();
        })
    });
}

criterion_group!(
    benches,
    bench_cidr_workload,
    bench_unselected_rules,
    bench_identity_churn,
    bench_one_pod_change_150k
);
criterion_main!(benches);
