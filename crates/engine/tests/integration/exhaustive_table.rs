//! In the spirit of Cilium's distillery test: every subset of a set of canonical rules (L3, L4
//! and L3L4 shapes; allow, deny and pass; admin and normal tiers) must give the reference
//! evaluator's verdict for every probe flow.

use crate::common;

use common::*;
use netpol_engine::*;

#[derive(Clone, Copy)]
enum Shape {
    L3,
    L4,
    L3L4,
}

fn rule(index: u32, tier: Tier, shape: Shape, verdict: Verdict) -> PolicyEntry {
    let five = Peer::pods(PodSelector {
        namespaces: LabelSelector::everything(),
        pods: LabelSelector::from_labels([("app", "db")]),
    });
    let (peer, ports) = match shape {
        Shape::L3 => (five, vec![]),
        Shape::L4 => (
            Peer::Entity(Entity::All),
            vec![PortRule::single(Protocol::Tcp, 80)],
        ),
        Shape::L3L4 => (five, vec![PortRule::range(Protocol::Tcp, 80, 81)]),
    };
    let priority = if tier == Tier::Normal {
        Priority::unordered()
    } else {
        Priority::new(index, "table", index)
    };
    PolicyEntry {
        tier,
        priority,
        verdict,
        subject: PodSelector::all(),
        direction: Direction::Ingress,
        peers: vec![peer],
        ports,
        default_deny: tier == Tier::Normal,
        enforcement: netpol_engine::Enforcement::Enforce,
        auth: None,
        provenance: Provenance {
            kind: "Table".into(),
            namespace: None,
            name: format!("rule{index}"),
            rule: String::new(),
        },
    }
}

#[test]
fn every_subset_of_canonical_rules_matches_the_reference() {
    let canonical = [
        rule(0, Tier::Admin, Shape::L3, Verdict::Allow),
        rule(1, Tier::Admin, Shape::L4, Verdict::Deny),
        rule(2, Tier::Admin, Shape::L3L4, Verdict::Pass),
        rule(3, Tier::Admin, Shape::L3, Verdict::Pass),
        rule(4, Tier::Admin, Shape::L4, Verdict::Allow),
        rule(5, Tier::Admin, Shape::L3L4, Verdict::Deny),
        rule(6, Tier::Normal, Shape::L3, Verdict::Allow),
        rule(7, Tier::Normal, Shape::L4, Verdict::Allow),
        rule(8, Tier::Normal, Shape::L3L4, Verdict::Allow),
        rule(9, Tier::Normal, Shape::L3, Verdict::Deny),
        rule(10, Tier::Normal, Shape::L4, Verdict::Deny),
        rule(11, Tier::Normal, Shape::L3L4, Verdict::Deny),
    ];
    let pods: Vec<PodSpec> = ["web", "db", "api"]
        .into_iter()
        .map(|app| PodSpec {
            namespace: 0,
            app,
            node: 0,
            http_port: 80,
            ipv6: false,
        })
        .collect();
    let mut checked = 0;
    for subset in 0u32..(1 << canonical.len()) {
        let entries: Vec<PolicyEntry> = canonical
            .iter()
            .enumerate()
            .filter(|(i, _)| subset & (1 << i) != 0)
            .map(|(_, e)| e.clone())
            .collect();
        let mut engine = Engine::new(EngineConfig {
            local_node: None,
            allow_node_probes: false,
        });
        for (i, spec) in pods.iter().enumerate() {
            engine.set_pod(format!("pod{i}"), pod_identities(i, spec, false));
        }
        engine.set_policy("table", entries);
        engine.commit();
        if let Some(d) = first_disagreement(&engine) {
            panic!("subset {subset:#014b}: {d}");
        }
        checked += 1;
    }
    assert_eq!(checked, 4096);
}
