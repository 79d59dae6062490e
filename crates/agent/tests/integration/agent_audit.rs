//! Audit mode in the agent's policy index: `--audit` audits every policy, the annotation one;
//! each policy that becomes audited is reported once (for one log line), not at every event, and
//! counted; the engine is handed audited entries, which its enforced view leaves out. Then the
//! pipeline: on HCN an audited policy programs nothing; on nftables its pods get audit chains.

use crate::agent_support;

use netpol_agent::indexes::{EngineUpdate, Indexes, SourceEvent};
use netpol_agent::SourceKind;
use netpol_api::Object;
use netpol_engine::{Enforcement, PolicyEntry};
use netpol_indexes::Event;
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

/// The example cluster's shop namespace isolated by a policy in audit mode.
const AUDITED_LOCKDOWN: &str = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n\
metadata:\n  name: lockdown\n  namespace: shop\n  annotations: {\"netpol.io/enforcement\": audit}\n\
spec:\n  podSelector: {}\n  policyTypes: [Ingress, Egress]\n";

/// On HCN, whose ACLs cannot count or log, an audited policy programs nothing: the endpoints
/// hold exactly the enforced view's rules, and no would-be rules are computed.
#[test]
fn on_hcn_an_audited_policy_programs_nothing() {
    use agent_support::*;
    let dir = scratch_dir("audit-hcn");
    copy_example_cluster(&dir);
    let sim = new_sim();
    let mut agent = Agent::start(&dir, &sim);
    assert!(agent.sync().complete());
    let before: Vec<_> = agent.pipeline.compiled().values().cloned().collect();
    agent.write("policies/lockdown.yaml", AUDITED_LOCKDOWN);
    assert!(agent.sync().complete());
    assert!(agent.pipeline.would_be_rules().is_empty());
    let after: Vec<_> = agent.pipeline.compiled().values().cloned().collect();
    assert_eq!(before, after, "the audited policy changed enforced rules");
    // The simulator decides every flow as the enforced view does (the audited policy left out).
    assert!(assert_converged(&dir, &sim) > 0);
}

/// On nftables the pods the audited policy selects get would-be rules, and the table audit
/// chains; taking the policy away takes them away.
#[test]
fn on_nftables_the_audited_pods_get_audit_chains() {
    use agent_support::*;
    use netpol_agent::metrics::Metrics;
    use netpol_agent::reconciler::Pipeline;
    use netpol_agent::sources::files::FileSource;
    use netpol_nft::fake::FakeNft;
    use netpol_nft::{NftBackend, NftEnforcer};
    let dir = scratch_dir("audit-nft");
    copy_example_cluster(&dir);
    std::fs::write(dir.join("policies/lockdown.yaml"), AUDITED_LOCKDOWN).unwrap();
    let kernel = FakeNft::new();
    let enforcer = NftEnforcer::new(Box::new(kernel.clone()), backoff());
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Metrics::register(&mut registry);
    let mut pipeline = Pipeline::with_enforcer(NODE, Box::new(enforcer), metrics);
    let mut source = FileSource::new(&dir);
    let mut sync = |pipeline: &mut Pipeline| {
        for event in settled_scan(&mut source).events {
            pipeline.ingest(event);
        }
        assert!(pipeline
            .reconcile(std::time::Instant::now())
            .unwrap()
            .complete());
    };
    sync(&mut pipeline);
    let audited: Vec<&String> = pipeline.would_be_rules().keys().collect();
    assert!(!audited.is_empty());
    assert!(
        audited.iter().all(|pod| pod.starts_with("shop/")),
        "{audited:?}"
    );
    let audit_chains = |kernel: &FakeNft| {
        kernel
            .chains()
            .unwrap()
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.starts_with("audit_"))
            .count()
    };
    // At most ingress and egress of each audited pod: a direction its enforced policies already
    // isolate as the audited one would needs none.
    let chains = audit_chains(&kernel);
    assert!(
        chains > 0 && chains <= 2 * audited.len(),
        "{chains} audit chains"
    );
    std::fs::remove_file(dir.join("policies/lockdown.yaml")).unwrap();
    sync(&mut pipeline);
    assert!(pipeline.would_be_rules().is_empty());
    assert_eq!(audit_chains(&kernel), 0);
}
