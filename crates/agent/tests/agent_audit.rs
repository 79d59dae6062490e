//! Audit mode in the agent's policy index: `--audit` audits every policy, the annotation one;
//! each policy that becomes audited is reported once (for one log line), not at every event, and
//! counted; the engine is handed audited entries, which its enforced view leaves out.

use kube::runtime::watcher::Event;
use netpol_agent::indexes::{EngineUpdate, Indexes, SourceEvent};
use netpol_agent::SourceKind;
use netpol_api::Object;
use netpol_engine::{Enforcement, PolicyEntry};
use serde_json::json;

fn deny_all(enforcement: Option<&str>) -> Object {
    let mut metadata = json!({"name": "lockdown", "namespace": "shop"});
    if let Some(mode) = enforcement {
        metadata["annotations"] = json!({"netpol.io/enforcement": mode});
    }
    Object::from_value(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": metadata,
        "spec": {"podSelector": {}}
    }))
    .unwrap()
}

fn synced(audit_all: bool) -> Indexes {
    let mut indexes = Indexes::new();
    if audit_all {
        indexes.audit_all();
    }
    for kind in SourceKind::ALL {
        indexes.apply(SourceEvent::new(kind, Event::Init));
        indexes.apply(SourceEvent::new(kind, Event::InitDone));
    }
    indexes
}

fn policy_entries(updates: &[EngineUpdate]) -> &[PolicyEntry] {
    match updates {
        [EngineUpdate::Policy { entries, .. }] => entries,
        other => panic!("expected one policy update, got {other:?}"),
    }
}

fn audited_count(indexes: &Indexes) -> usize {
    indexes.policy_counts()[&SourceKind::NetworkPolicy].audited
}

#[test]
fn audit_flag_audits_every_policy_and_reports_each_once() {
    let mut indexes = synced(true);
    let apply = |indexes: &mut Indexes, object| {
        indexes.apply(SourceEvent::new(
            SourceKind::NetworkPolicy,
            Event::Apply(object),
        ))
    };
    let applied = apply(&mut indexes, deny_all(None));
    let entries = policy_entries(&applied.updates);
    assert!(!entries.is_empty());
    assert!(entries.iter().all(|e| e.enforcement == Enforcement::Audit));
    assert_eq!(applied.audited, ["NetworkPolicy/shop/lockdown"]);
    assert_eq!(audited_count(&indexes), 1);
    // The same object again (a resync): nothing new to say.
    let again = apply(&mut indexes, deny_all(None));
    assert!(again.audited.is_empty());
    assert!(again.updates.is_empty());
}

#[test]
fn the_annotation_audits_one_policy_and_taking_it_off_enforces_it_again() {
    let mut indexes = synced(false);
    let mut apply = |object| {
        indexes.apply(SourceEvent::new(
            SourceKind::NetworkPolicy,
            Event::Apply(object),
        ))
    };
    let enforced = apply(deny_all(None));
    assert!(enforced.audited.is_empty());
    assert!(policy_entries(&enforced.updates)
        .iter()
        .all(|e| e.enforcement == Enforcement::Enforce));

    let audited = apply(deny_all(Some("audit")));
    assert_eq!(audited.audited, ["NetworkPolicy/shop/lockdown"]);
    assert!(policy_entries(&audited.updates)
        .iter()
        .all(|e| e.enforcement == Enforcement::Audit));

    let back = apply(deny_all(Some("enforce")));
    assert!(back.audited.is_empty());
    assert!(policy_entries(&back.updates)
        .iter()
        .all(|e| e.enforcement == Enforcement::Enforce));
    assert_eq!(audited_count(&indexes), 0);

    // An unknown mode refuses the object, which stops enforcing its previous version.
    let refused = indexes.apply(SourceEvent::new(
        SourceKind::NetworkPolicy,
        Event::Apply(deny_all(Some("dry-run"))),
    ));
    assert_eq!(refused.rejections.len(), 1);
    assert_eq!(
        refused.rejections[0].errors[0].field,
        "metadata.annotations[\"netpol.io/enforcement\"]"
    );
}
