//! The indexes as pure state machines: watch events in, engine updates out.

use netpol_agent::indexes::{EngineUpdate, Indexes, SourceEvent};
use netpol_agent::SourceKind;
use netpol_api::Object;
use netpol_engine::{Identity, IdentityKind};
use netpol_indexes::Event;
use serde_json::{json, Value};

fn object(value: Value) -> Object {
    Object::from_value(value).unwrap()
}

fn namespace(name: &str, labels: Value) -> Object {
    object(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": labels}
    }))
}

fn pod(namespace: &str, name: &str, labels: Value, ip: &str) -> Object {
    object(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c"}]},
        "status": {"phase": "Running", "podIP": ip}
    }))
}

fn node(name: &str, ip: &str) -> Object {
    object(json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "status": {"addresses": [{"type": "InternalIP", "address": ip}]}
    }))
}

fn deny_all(namespace: &str, name: &str) -> Object {
    object(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"podSelector": {}}
    }))
}

fn allow_port(namespace: &str, name: &str, port: u16) -> Object {
    object(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"podSelector": {}, "ingress": [{"ports": [{"port": port}]}]}
    }))
}

fn bad_cidr(namespace: &str, name: &str) -> Object {
    object(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]}]}
    }))
}

fn event(kind: SourceKind, event: Event<Object>) -> SourceEvent {
    SourceEvent::new(kind, event)
}

/// Lists every kind with nothing in it, so that the indexes count as synced.
fn synced_empty() -> Indexes {
    let mut indexes = Indexes::new();
    for kind in SourceKind::ALL {
        indexes.apply(event(kind, Event::Init));
        indexes.apply(event(kind, Event::InitDone));
    }
    assert!(indexes.is_synced());
    indexes
}

fn pod_update(updates: &[EngineUpdate]) -> (&str, &[Identity]) {
    match updates {
        [EngineUpdate::Pod {
            key, identities, ..
        }] => (key, identities),
        other => panic!("expected one pod update, got {other:?}"),
    }
}

fn pod_labels(identity: &Identity) -> (&netpol_engine::Labels, &netpol_engine::Labels) {
    match &identity.kind {
        IdentityKind::Pod(info) => (&info.labels, &info.namespace_labels),
        other => panic!("not a pod: {other:?}"),
    }
}

#[test]
fn pod_create_relabel_and_delete() {
    let mut indexes = synced_empty();
    let applied = indexes.apply(event(
        SourceKind::Pod,
        Event::Apply(pod("x", "a", json!({"app": "web"}), "10.1.0.1")),
    ));
    let (key, identities) = pod_update(&applied.updates);
    assert_eq!(key, "x/a");
    assert_eq!(identities.len(), 1);
    assert_eq!(identities[0].prefix.to_string(), "10.1.0.1/32");
    assert_eq!(pod_labels(&identities[0]).0["app"], "web");

    // The same pod again (a resync, a status-only change) changes nothing.
    let applied = indexes.apply(event(
        SourceKind::Pod,
        Event::Apply(pod("x", "a", json!({"app": "web"}), "10.1.0.1")),
    ));
    assert_eq!(applied.updates, vec![]);

    let applied = indexes.apply(event(
        SourceKind::Pod,
        Event::Apply(pod("x", "a", json!({"app": "db"}), "10.1.0.1")),
    ));
    let (_, identities) = pod_update(&applied.updates);
    assert_eq!(pod_labels(&identities[0]).0["app"], "db");

    let applied = indexes.apply(event(
        SourceKind::Pod,
        Event::Delete(pod("x", "a", json!({"app": "db"}), "10.1.0.1")),
    ));
    let (key, identities) = pod_update(&applied.updates);
    assert_eq!(
        (key, identities.len()),
        ("x/a", 0),
        "an empty list removes the pod"
    );
    assert_eq!(indexes.pods().len(), 0);
}

#[test]
fn namespace_relabel_updates_only_its_pods() {
    let mut indexes = synced_empty();
    indexes.apply(event(
        SourceKind::Namespace,
        Event::Apply(namespace("x", json!({"env": "dev"}))),
    ));
    indexes.apply(event(
        SourceKind::Pod,
        Event::Apply(pod("x", "a", json!({}), "10.1.0.1")),
    ));
    indexes.apply(event(
        SourceKind::Pod,
        Event::Apply(pod("xy", "a", json!({}), "10.1.0.2")),
    ));
    indexes.apply(event(
        SourceKind::Pod,
        Event::Apply(pod("y", "a", json!({}), "10.1.0.3")),
    ));
    let applied = indexes.apply(event(
        SourceKind::Pod,
        Event::Apply(pod("x", "b", json!({}), "10.1.0.4")),
    ));
    let (_, identities) = pod_update(&applied.updates);
    let (_, ns_labels) = pod_labels(&identities[0]);
    assert_eq!(ns_labels["env"], "dev");
    assert_eq!(ns_labels["kubernetes.io/metadata.name"], "x");

    let applied = indexes.apply(event(
        SourceKind::Namespace,
        Event::Apply(namespace("x", json!({"env": "prod"}))),
    ));
    let keys: Vec<&str> = applied
        .updates
        .iter()
        .map(|u| match u {
            EngineUpdate::Pod {
                key, identities, ..
            } => {
                assert_eq!(pod_labels(&identities[0]).1["env"], "prod");
                key.as_str()
            }
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        keys,
        ["x/a", "x/b"],
        "pods of namespaces x-something are not touched"
    );

    // A pod of a namespace not seen yet carries the name label alone until it is.
    let applied = indexes.apply(event(
        SourceKind::Pod,
        Event::Apply(pod("z", "a", json!({}), "10.1.0.5")),
    ));
    let (_, identities) = pod_update(&applied.updates);
    assert_eq!(pod_labels(&identities[0]).1.len(), 1);
    let applied = indexes.apply(event(
        SourceKind::Namespace,
        Event::Apply(namespace("z", json!({"env": "qa"}))),
    ));
    assert_eq!(applied.updates.len(), 1);
}

/// An initial sync lists every kind before any completes (a file source sends every `Init`
/// first and every `InitDone` last): pods listed while the namespaces' first list is still open
/// get the labels it lists, so their namespace's completion changes none of them.
#[test]
fn pods_of_a_first_list_take_the_labels_of_the_namespaces_being_listed() {
    let mut indexes = Indexes::new();
    for kind in SourceKind::ALL {
        indexes.apply(event(kind, Event::Init));
    }
    indexes.apply(event(
        SourceKind::Namespace,
        Event::InitApply(namespace("x", json!({"team": "a"}))),
    ));
    indexes.apply(event(
        SourceKind::Pod,
        Event::InitApply(pod("x", "a", json!({"app": "web"}), "10.1.0.1")),
    ));
    let mut pods = Vec::new();
    for kind in SourceKind::ALL {
        for update in indexes.apply(event(kind, Event::InitDone)).updates {
            if let EngineUpdate::Pod {
                key, identities, ..
            } = update
            {
                pods.push((kind, key, identities));
            }
        }
    }
    assert!(indexes.is_synced());
    // One update, from the pods' own list, with the namespace's labels.
    let [(SourceKind::Pod, key, identities)] = &pods[..] else {
        panic!("expected the pod once, from the pods' list: {pods:?}");
    };
    assert_eq!(key, "x/a");
    assert_eq!(pod_labels(&identities[0]).1["team"], "a");
    // The update carries the index's own copy: one allocation between the index and the engine.
    let kept = indexes.pods().get("x/a").unwrap();
    assert!(std::ptr::eq(kept, &identities[..]));
}

#[test]
fn policy_create_update_and_delete() {
    let mut indexes = synced_empty();
    let applied = indexes.apply(event(
        SourceKind::NetworkPolicy,
        Event::Apply(deny_all("x", "p")),
    ));
    let entries = match applied.updates.as_slice() {
        [EngineUpdate::Policy { key, entries }] => {
            assert_eq!(key, "NetworkPolicy/x/p");
            entries.clone()
        }
        other => panic!("{other:?}"),
    };
    assert!(!entries.is_empty());

    let applied = indexes.apply(event(
        SourceKind::NetworkPolicy,
        Event::Apply(allow_port("x", "p", 80)),
    ));
    assert!(matches!(
        applied.updates.as_slice(),
        [EngineUpdate::Policy { entries: new, .. }] if *new != entries
    ));

    let applied = indexes.apply(event(
        SourceKind::NetworkPolicy,
        Event::Delete(allow_port("x", "p", 80)),
    ));
    assert_eq!(
        applied.updates,
        vec![EngineUpdate::RemovePolicy {
            key: "NetworkPolicy/x/p".into()
        }]
    );
}

#[test]
fn events_for_objects_that_do_not_exist_change_nothing() {
    let mut indexes = synced_empty();
    for (kind, object) in [
        (SourceKind::Pod, pod("x", "ghost", json!({}), "10.1.0.9")),
        (SourceKind::Node, node("ghost", "10.0.0.9")),
        (SourceKind::Namespace, namespace("ghost", json!({}))),
        (SourceKind::NetworkPolicy, deny_all("x", "ghost")),
    ] {
        let applied = indexes.apply(event(kind, Event::Delete(object)));
        assert_eq!(applied.updates, vec![], "deleting an unknown {kind}");
    }
    // An object delivered on another kind's watch is ignored, not misfiled.
    let applied = indexes.apply(event(SourceKind::Pod, Event::Apply(node("n", "10.0.0.1"))));
    assert_eq!(applied.updates, vec![]);
    assert!(applied.mismatched.unwrap().contains("Node n"));
}

#[test]
fn an_invalid_policy_is_skipped_and_reported_once_per_change() {
    let mut indexes = synced_empty();
    indexes.apply(event(
        SourceKind::NetworkPolicy,
        Event::Apply(deny_all("x", "p")),
    ));
    // Broken by an update: the policy's old entries are removed, not kept.
    let applied = indexes.apply(event(
        SourceKind::NetworkPolicy,
        Event::Apply(bad_cidr("x", "p")),
    ));
    assert_eq!(
        applied.updates,
        vec![EngineUpdate::RemovePolicy {
            key: "NetworkPolicy/x/p".into()
        }]
    );
    assert_eq!(applied.rejections.len(), 1);
    let error = &applied.rejections[0].errors[0];
    assert_eq!(error.object.to_string(), "NetworkPolicy x/p");
    assert!(error.field.contains("ipBlock"), "{error}");

    // The same broken policy again (a relist) is not reported again.
    indexes.apply(event(SourceKind::NetworkPolicy, Event::Init));
    indexes.apply(event(
        SourceKind::NetworkPolicy,
        Event::InitApply(bad_cidr("x", "p")),
    ));
    let applied = indexes.apply(event(SourceKind::NetworkPolicy, Event::InitDone));
    assert_eq!(applied, Default::default());
    let counts = indexes.policy_counts();
    assert_eq!(counts[&SourceKind::NetworkPolicy].invalid, 1);
    assert_eq!(counts[&SourceKind::NetworkPolicy].valid, 0);

    // Deleting a policy that was never enforced removes nothing from the engine.
    let applied = indexes.apply(event(
        SourceKind::NetworkPolicy,
        Event::Delete(bad_cidr("x", "p")),
    ));
    assert_eq!(applied.updates, vec![]);
}

#[test]
fn a_relist_deletes_what_it_no_longer_lists_and_nothing_else() {
    let mut indexes = synced_empty();
    indexes.apply(event(
        SourceKind::Pod,
        Event::Apply(pod("x", "a", json!({}), "10.1.0.1")),
    ));
    indexes.apply(event(
        SourceKind::Pod,
        Event::Apply(pod("x", "b", json!({}), "10.1.0.2")),
    ));
    indexes.apply(event(
        SourceKind::Node,
        Event::Apply(node("n1", "10.0.0.1")),
    ));

    indexes.apply(event(SourceKind::Pod, Event::Init));
    indexes.apply(event(
        SourceKind::Pod,
        Event::InitApply(pod("x", "a", json!({}), "10.1.0.1")),
    ));
    indexes.apply(event(
        SourceKind::Pod,
        Event::InitApply(pod("x", "c", json!({}), "10.1.0.3")),
    ));
    let applied = indexes.apply(event(SourceKind::Pod, Event::InitDone));
    let keys: Vec<(&str, usize)> = applied
        .updates
        .iter()
        .map(|u| match u {
            EngineUpdate::Pod {
                key, identities, ..
            } => (key.as_str(), identities.len()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(keys, [("x/b", 0), ("x/c", 1)]);

    // Nodes relist on their own watch.
    indexes.apply(event(SourceKind::Node, Event::Init));
    let applied = indexes.apply(event(SourceKind::Node, Event::InitDone));
    assert!(matches!(
        applied.updates.as_slice(),
        [EngineUpdate::Node { name, identities, .. }] if name == "n1" && identities.is_empty()
    ));
}

#[test]
fn nothing_counts_as_synced_until_every_kind_is_listed() {
    let mut indexes = Indexes::new();
    for kind in SourceKind::ALL {
        assert!(!indexes.is_synced());
        indexes.apply(event(kind, Event::Init));
        indexes.apply(event(kind, Event::InitDone));
    }
    assert!(indexes.is_synced());
    assert_eq!(indexes.unsynced(), vec![]);
}
