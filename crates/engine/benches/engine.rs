//! Engine benchmarks (issue 3): Cilium's CIDR workload, resolving one endpoint among many
//! unselected rules, and identity churn in a large synthetic cluster. Figures are reported in
//! docs/performance.md.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use netpol_engine::synthetic::{ClusterSize, SyntheticCluster};
use netpol_engine::*;

fn allow_all_egress_subject() -> PodSelector {
    PodSelector::in_namespace("ns-0", LabelSelector::from_labels([("app", "app-0")]))
}

/// 1000 egress allows over CIDRs with prefix lengths cycling /8,/16,/24,/28,/32 on TCP
/// 80+i%97, and the same again as denies.
fn cidr_workload() -> Vec<PolicyEntry> {
    let lens = [8u8, 16, 24, 28, 32];
    let mut entries = Vec::new();
    for verdict in [Verdict::Allow, Verdict::Deny] {
        for i in 0..1000u32 {
            let len = lens[i as usize % lens.len()];
            let addr =
                std::net::Ipv4Addr::from(0x0b00_0000u32.wrapping_add(i.wrapping_mul(0x0101_0711)));
            let net = ipnet::IpNet::new(addr.into(), len).unwrap().trunc();
            entries.push(PolicyEntry {
                tier: Tier::Normal,
                priority: Priority::unordered(),
                verdict,
                subject: allow_all_egress_subject(),
                direction: Direction::Egress,
                peers: vec![Peer::Cidr(CidrSelector {
                    net,
                    except: vec![],
                    scope: AddressScope::Any,
                })],
                ports: vec![PortRule::single(Protocol::Tcp, 80 + (i % 97) as u16)],
                default_deny: true,
                auth: None,
                provenance: Provenance {
                    kind: "Bench".into(),
                    namespace: None,
                    name: format!("cidr-{i}"),
                    rule: String::new(),
                },
            });
        }
    }
    entries
}

fn bench_cidr_workload(c: &mut Criterion) {
    let cluster = SyntheticCluster::new(ClusterSize {
        namespaces: 1,
        pods: 1,
        nodes: 1,
        policies: 0,
    });
    let (key, pod) = cluster.pod(0);
    let entries = cidr_workload();
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
            peers: vec![Peer::Pods(PodSelector::in_namespace(
                &ns,
                LabelSelector::everything(),
            ))],
            ports: vec![PortRule::single(Protocol::Tcp, 80)],
            default_deny: true,
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
    for i in 0..size.nodes {
        let (name, id) = cluster.node(i);
        engine.set_node(name, vec![id]);
    }
    for i in 0..size.pods {
        let (key, id) = cluster.pod(i);
        engine.set_pod(key, vec![id]);
    }
    for i in 0..size.policies {
        let (key, entries) = cluster.policy(i);
        engine.set_policy(key, entries);
    }
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

criterion_group!(
    benches,
    bench_cidr_workload,
    bench_unselected_rules,
    bench_identity_churn
);
criterion_main!(benches);
