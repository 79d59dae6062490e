//! Budgets per policy object and per namespace (issue 33): an object over one is refused alone,
//! keeps only its isolation in the engine (its pods fail closed), is reported as over budget,
//! and every other object and namespace keeps working.

use netpol_agent::indexes::{EngineUpdate, Indexes, PolicyBudgets, SourceEvent};
use netpol_agent::SourceKind;
use netpol_api::Object;
use netpol_indexes::Event;
use serde_json::{json, Value};

const KIND: SourceKind = SourceKind::NetworkPolicy;

fn object(value: Value) -> Object {
    Object::from_value(value).unwrap()
}

/// An egress NetworkPolicy of `app` pods to `count` /32s (first octet `octet`) on TCP/443.
fn cidr_policy(namespace: &str, name: &str, octet: u8, count: u32) -> Object {
    let to: Vec<Value> = (0..count)
        .map(|i| json!({"ipBlock": {"cidr": format!("{octet}.{}.{}.{}/32", i >> 16, (i >> 8) & 255, i & 255)}}))
        .collect();
    object(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "podSelector": {"matchLabels": {"app": "web"}},
            "policyTypes": ["Egress"],
            "egress": [{"to": to, "ports": [{"protocol": "TCP", "port": 443}]}]
        }
    }))
}

fn budgets() -> PolicyBudgets {
    PolicyBudgets {
        prefixes_per_object: 100,
        selectors_per_object: 10,
        ports_per_object: 10,
        prefixes_per_namespace: 150,
    }
}

fn synced(budgets: PolicyBudgets) -> Indexes {
    let mut indexes = Indexes::with_budgets(budgets);
    for kind in SourceKind::ALL {
        indexes.apply(SourceEvent::new(kind, Event::Init));
        indexes.apply(SourceEvent::new(kind, Event::InitDone));
    }
    indexes
}

fn apply(indexes: &mut Indexes, event: Event<Object>) -> netpol_agent::indexes::Applied {
    indexes.apply(SourceEvent::new(KIND, event))
}

/// The entries the engine got for `key`, if any.
fn entries_of<'a>(
    updates: &'a [EngineUpdate],
    key: &str,
) -> Option<&'a [netpol_engine::PolicyEntry]> {
    updates.iter().find_map(|update| match update {
        EngineUpdate::Policy { key: k, entries } if k == key => Some(&entries[..]),
        _ => None,
    })
}

#[test]
fn an_object_over_its_budget_is_refused_alone_and_keeps_only_its_isolation() {
    let mut indexes = synced(budgets());
    let applied = apply(&mut indexes, Event::Apply(cidr_policy("a", "big", 20, 101)));
    assert_eq!(applied.rejections.len(), 1);
    let rejection = &applied.rejections[0];
    assert!(rejection.over_budget);
    let message = &rejection.errors[0].message;
    assert!(message.contains("101 CIDR prefixes"), "{message}");
    assert!(message.contains("--max-policy-prefixes"), "{message}");
    assert_eq!(
        rejection.errors[0].object.to_string(),
        "NetworkPolicy a/big"
    );
    // Fail closed: the engine gets the policy's isolation of its pods, and nothing it allowed.
    let entries = entries_of(&applied.updates, "NetworkPolicy/a/big").expect("isolation kept");
    assert!(!entries.is_empty());
    assert!(entries.iter().all(|e| e.default_deny && e.peers.is_empty()));
    let counts = indexes.policy_counts();
    assert_eq!(counts[&KIND].invalid, 1);

    // An object within the budget, in the same namespace, is enforced as it is.
    let applied = apply(
        &mut indexes,
        Event::Apply(cidr_policy("a", "small", 21, 100)),
    );
    assert!(applied.rejections.is_empty());
    let entries = entries_of(&applied.updates, "NetworkPolicy/a/small").expect("enforced");
    assert_eq!(entries.iter().map(|e| e.peers.len()).sum::<usize>(), 100);

    // Shrunk under the budget, the big one is enforced in full.
    let applied = apply(&mut indexes, Event::Apply(cidr_policy("a", "big", 20, 40)));
    assert!(applied.rejections.is_empty());
    let entries = entries_of(&applied.updates, "NetworkPolicy/a/big").expect("enforced");
    assert_eq!(entries.iter().map(|e| e.peers.len()).sum::<usize>(), 40);
}

#[test]
fn a_namespace_over_its_budget_refuses_what_arrives_later_and_no_other_namespace() {
    let mut indexes = synced(budgets());
    for (name, octet) in [("p1", 20), ("p2", 21)] {
        let applied = apply(
            &mut indexes,
            Event::Apply(cidr_policy("a", name, octet, 70)),
        );
        assert!(applied.rejections.is_empty(), "{name} fits: 140 of 150");
    }
    // 210 of 150: the third is refused; the first two stay enforced (nothing was sent for them).
    let applied = apply(&mut indexes, Event::Apply(cidr_policy("a", "p3", 22, 70)));
    assert_eq!(applied.rejections.len(), 1);
    let message = &applied.rejections[0].errors[0].message;
    assert!(message.contains("--max-namespace-prefixes"), "{message}");
    assert!(message.contains("name 140"), "{message}");
    assert!(entries_of(&applied.updates, "NetworkPolicy/a/p1").is_none());

    // Another namespace has a budget of its own.
    let applied = apply(&mut indexes, Event::Apply(cidr_policy("b", "p1", 23, 100)));
    assert!(applied.rejections.is_empty());

    // Deleting one gives its prefixes back: a later change of p3 is admitted.
    apply(&mut indexes, Event::Delete(cidr_policy("a", "p1", 20, 70)));
    let applied = apply(&mut indexes, Event::Apply(cidr_policy("a", "p3", 22, 71)));
    assert!(applied.rejections.is_empty(), "{:?}", applied.rejections);
    let entries = entries_of(&applied.updates, "NetworkPolicy/a/p3").expect("enforced");
    assert_eq!(entries.iter().map(|e| e.peers.len()).sum::<usize>(), 71);

    // A relist admits in its own order, from nothing: p2 and p3 fit (141), p1 back would not.
    apply(&mut indexes, Event::Init);
    for (name, octet, count) in [("p2", 21, 70), ("p3", 22, 71)] {
        apply(
            &mut indexes,
            Event::InitApply(cidr_policy("a", name, octet, count)),
        );
    }
    apply(
        &mut indexes,
        Event::InitApply(cidr_policy("a", "p4", 24, 70)),
    );
    let applied = apply(&mut indexes, Event::InitDone);
    let refused: Vec<String> = applied
        .rejections
        .iter()
        .map(|r| r.errors[0].object.to_string())
        .collect();
    assert_eq!(refused, vec!["NetworkPolicy a/p4"]);
}

#[test]
fn selectors_and_ports_have_budgets_too() {
    let mut indexes = synced(budgets());
    let peers: Vec<Value> = (0..11)
        .map(|i| json!({"podSelector": {"matchLabels": {"app": format!("a{i}")}}}))
        .collect();
    let many_peers = object(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "peers", "namespace": "a"},
        "spec": {"podSelector": {}, "ingress": [{"from": peers}]}
    }));
    let applied = apply(&mut indexes, Event::Apply(many_peers));
    assert!(applied.rejections[0].errors[0]
        .message
        .contains("--max-policy-selectors"));
    let ports: Vec<Value> = (0..11).map(|i| json!({"port": 1000 + i})).collect();
    let many_ports = object(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "ports", "namespace": "a"},
        "spec": {"podSelector": {}, "ingress": [{"ports": ports}]}
    }));
    let applied = apply(&mut indexes, Event::Apply(many_ports));
    assert!(applied.rejections[0].errors[0]
        .message
        .contains("--max-policy-ports"));
}
