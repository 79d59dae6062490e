//! End to end in embedded mode: files → indexes → engine → compiler → programmer → simulated
//! HCN. Every check compares the rules the simulator holds with a from-scratch engine over the
//! same files, flow by flow.

use crate::agent_support;

use agent_support::*;
use netpol_engine::Protocol;
use netpol_hcn::sim::{Call, CallKind, Fault};

#[test]
fn example_cluster_converges_and_a_restart_makes_no_modify_calls() {
    let dir = scratch_dir("example-restart");
    copy_example_cluster(&dir);
    let sim = new_sim();
    let mut agent = Agent::start(&dir, &sim);
    let report = agent.sync();
    assert!(report.complete(), "{report:?}");
    assert_eq!(agent.pipeline.engine().endpoints().count(), 6);
    assert_eq!(modified(&sim.calls().take_calls()).len(), 6);
    assert!(assert_converged(&dir, &sim) > 1000);
    assert!(agent.pipeline.synced());
    assert!(agent.pipeline.synced());

    // Nothing changed: another scan and reconcile modifies nothing; what it calls only reads
    // (the network's name and type, the first time the simulated CNI's endpoints name it).
    let report = agent.sync();
    assert!(report.complete());
    let calls = sim.calls().take_calls();
    assert_eq!(modified(&calls), Vec::<String>::new());
    assert!(calls.iter().all(|c| reads_only(c.kind())), "{calls:?}");
    // From then on a sync with nothing to do costs no call at all: the network's name and
    // type are known for the client's life (a network keeps both; a restarted HNS brings a new
    // client), the sets and endpoints as netpol last wrote or read them.
    let report = agent.sync();
    assert!(report.complete());
    assert_eq!(sim.calls().take_calls(), vec![]);

    // A new agent over the same simulator reads every endpoint back and modifies none.
    drop(agent);
    let mut restarted = Agent::start(&dir, &sim);
    let report = restarted.sync();
    assert!(report.complete(), "{report:?}");
    let calls = sim.calls().take_calls();
    assert_eq!(modified(&calls), Vec::<String>::new());
    assert!(calls.iter().all(|c| reads_only(c.kind())), "{calls:?}");
    assert_converged(&dir, &sim);
}

/// A call that changes nothing on the host.
fn reads_only(kind: CallKind) -> bool {
    matches!(
        kind,
        CallKind::Enumerate | CallKind::Query | CallKind::QueryNetwork
    )
}

#[test]
fn a_policy_edit_modifies_only_the_endpoints_it_selects() {
    let dir = scratch_dir("policy-edit");
    copy_example_cluster(&dir);
    let sim = new_sim();
    let mut agent = Agent::start(&dir, &sim);
    agent.sync();
    sim.calls().take_calls();

    agent.edit(
        "policies/networkpolicies.yaml",
        "{protocol: TCP, port: 1433}",
        "{protocol: TCP, port: 1434}",
    );
    let report = agent.sync();
    assert_eq!(report.changed_pods, ["shop/db-0"]);
    assert_eq!(
        modified(&sim.calls().take_calls()),
        [agent.endpoint_of("shop/db-0")]
    );
    assert_converged(&dir, &sim);

    // A new policy selecting the API only.
    agent.write(
        "policies/api-egress.yaml",
        "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: api-egress, namespace: shop}
spec:
  podSelector: {matchLabels: {app: api}}
  policyTypes: [Egress]
  egress:
  - to:
    - podSelector: {matchLabels: {app: db}}
",
    );
    agent.sync();
    assert_eq!(
        modified(&sim.calls().take_calls()),
        [agent.endpoint_of("shop/api-1")]
    );
    assert_converged(&dir, &sim);

    // Deleting it restores the API's previous rules.
    agent.remove("policies/api-egress.yaml");
    agent.sync();
    assert_eq!(
        modified(&sim.calls().take_calls()),
        [agent.endpoint_of("shop/api-1")]
    );
    assert_converged(&dir, &sim);
}

#[test]
fn pods_come_change_labels_and_go() {
    let dir = scratch_dir("pod-churn");
    copy_example_cluster(&dir);
    let sim = new_sim();
    let mut agent = Agent::start(&dir, &sim);
    agent.sync();
    sim.calls().take_calls();

    let api2 = "apiVersion: v1
kind: Pod
metadata: {name: api-2, namespace: shop, labels: {app: api}}
spec:
  nodeName: node-1
  containers:
  - name: api
    image: shop/api
    ports: [{name: http, containerPort: 8080}]
status: {phase: Running, podIP: 10.244.1.13}
";
    agent.write("pods/api-2.yaml", api2);
    let report = agent.sync();
    assert!(report.changed_pods.contains(&"shop/api-2".to_owned()));
    let api2_endpoint = agent.endpoint_of("shop/api-2");
    // The new API pod gets its rules; it is an identity of its own (it names one port fewer
    // than api-1), so the rules of the two pods that admit API pods (the database and the
    // ledger) now name a set with one identity more. That set takes over the name of the set
    // it replaces: the pods learn the new address through one update of the network's sets,
    // and no other endpoint is touched.
    let calls = sim.calls().take_calls();
    assert_eq!(modified(&calls), std::slice::from_ref(&api2_endpoint));
    let set_updates: Vec<&String> = calls
        .iter()
        .filter_map(|c| match c {
            Call::ModifyNetwork { request } => Some(request),
            _ => None,
        })
        .collect();
    assert!(
        set_updates
            .iter()
            .any(|r| r.contains("\"RequestType\":\"Update\"") && r.contains("10.244.1.13")),
        "{set_updates:?}"
    );
    assert!(flow_allowed(
        &agent,
        sim.calls(),
        "shop/api-2",
        "shop/db-0",
        Protocol::Tcp,
        1433
    ));
    assert_converged(&dir, &sim);

    // Relabelled as a web pod: it now takes web's rules, and the database no longer admits it.
    agent.edit(
        "pods/api-2.yaml",
        "labels: {app: api}",
        "labels: {app: web}",
    );
    agent.sync();
    let touched = modified(&sim.calls().take_calls());
    assert!(touched.contains(&api2_endpoint), "{touched:?}");
    // The database's rules name the same sets as before, which lost the pod's address.
    assert!(
        !touched.contains(&agent.endpoint_of("shop/db-0")),
        "{touched:?}"
    );
    assert!(!flow_allowed(
        &agent,
        sim.calls(),
        "shop/api-2",
        "shop/db-0",
        Protocol::Tcp,
        1433
    ));
    assert!(flow_allowed(
        &agent,
        sim.calls(),
        "shop/api-2",
        "shop/api-1",
        Protocol::Tcp,
        8080
    ));
    assert_converged(&dir, &sim);

    // Deleted: its endpoint goes with it (the CNI deletes it) and the others forget its address.
    agent.remove("pods/api-2.yaml");
    agent.sync();
    assert!(sim.calls().endpoint(&api2_endpoint).is_none());
    assert_converged(&dir, &sim);
}

#[test]
fn a_namespace_relabel_reaches_its_pods_rules() {
    let dir = scratch_dir("namespace-relabel");
    copy_example_cluster(&dir);
    let sim = new_sim();
    let mut agent = Agent::start(&dir, &sim);
    agent.sync();
    sim.calls().take_calls();

    // While untrusted, the sandbox's toolbox reaches no web pod, though web admits everyone.
    let toolbox_to_web = |agent: &Agent| {
        flow_allowed(
            agent,
            sim.calls(),
            "sandbox/toolbox",
            "shop/web-1",
            Protocol::Tcp,
            80,
        )
    };
    assert!(!toolbox_to_web(&agent));

    // Trusted now: the admin policy's Deny no longer matches its pods.
    agent.edit("cluster.yaml", "untrusted: \"true\"", "trusted: \"true\"");
    let report = agent.sync();
    assert!(
        report.changed_pods.contains(&"shop/web-1".to_owned()),
        "{report:?}"
    );
    assert!(toolbox_to_web(&agent));
    assert_converged(&dir, &sim);
}

#[test]
fn an_invalid_policy_is_skipped_and_reported_once() {
    let dir = scratch_dir("invalid-policy");
    copy_example_cluster(&dir);
    let sim = new_sim();
    let mut agent = Agent::start(&dir, &sim);
    agent.sync();
    agent.write("policies/broken.yaml", INVALID_POLICY);
    agent.sync();
    assert_converged(&dir, &sim);
    let text = agent.metrics_text();
    assert!(
        text.contains("netpol_policy_rejections_total{kind=\"NetworkPolicy\"} 1"),
        "{text}"
    );
    assert!(text.contains("netpol_policies{kind=\"NetworkPolicy\",validity=\"invalid\"} 1"));
    assert!(text.contains("netpol_policies{kind=\"NetworkPolicy\",validity=\"valid\"} 4"));

    // Relisting everything (the periodic resync) does not report it again.
    for event in agent.source.relist().unwrap().events {
        agent.pipeline.ingest(event);
    }
    agent.reconcile();
    assert!(agent
        .metrics_text()
        .contains("netpol_policy_rejections_total{kind=\"NetworkPolicy\"} 1"));
}

#[test]
fn datapath_faults_are_retried_until_converged() {
    let dir = scratch_dir("faults");
    copy_example_cluster(&dir);
    let sim = new_sim();
    let mut agent = Agent::start(&dir, &sim);
    agent.sync();
    let db = agent.endpoint_of("shop/db-0");
    sim.calls().take_calls();
    let acknowledged = latency_observations(&agent);
    assert!(
        acknowledged >= 1,
        "the first sync's changes are acknowledged"
    );

    sim.calls().inject(Fault::Fail {
        kind: CallKind::Modify,
        endpoint: Some(db.clone()),
    });
    agent.edit("policies/networkpolicies.yaml", "port: 1433", "port: 1434");
    let report = agent.sync();
    assert_eq!(report.apply.failed(), 1);
    assert!(!report.complete());
    // The datapath has not taken the change: its latency is still running.
    assert_eq!(latency_observations(&agent), acknowledged);
    let retry = agent.pipeline.next_wakeup().expect("a retry is scheduled");

    // Before the backoff expires the endpoint is left alone.
    let report = agent.reconcile();
    assert_eq!(report.apply.failed(), 1);
    assert_eq!(modified(&sim.calls().take_calls()), [db.as_str()]);

    agent.now = retry;
    let report = agent.reconcile();
    assert!(report.complete(), "{report:?}");
    assert_converged(&dir, &sim);
    assert_eq!(latency_observations(&agent), acknowledged + 1);

    // A failed listing leaves the agent retrying too.
    sim.calls().inject(Fault::Fail {
        kind: CallKind::Enumerate,
        endpoint: None,
    });
    agent.pipeline.request_resync();
    let report = agent.reconcile();
    assert!(report.discovery_error.is_some());
    let retry = agent
        .pipeline
        .next_wakeup()
        .expect("the listing is retried on its own");
    agent.now = retry;
    let report = agent.reconcile();
    assert!(report.complete());
    assert_converged(&dir, &sim);
}

/// How many changes `netpol_change_latency_seconds` has seen acknowledged by the datapath.
fn latency_observations(agent: &Agent) -> u64 {
    let text = agent.metrics_text();
    let line = text
        .lines()
        .find(|l| l.starts_with("netpol_change_latency_seconds_count "))
        .unwrap_or_else(|| panic!("no change latency in:\n{text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn an_hns_restart_is_reprogrammed() {
    let dir = scratch_dir("hns-restart");
    copy_example_cluster(&dir);
    let sim = new_sim();
    let mut agent = Agent::start(&dir, &sim);
    agent.sync();
    sim.calls().restart();
    let report = agent.reconcile();
    assert_eq!(report.apply.updated(), 6);
    assert_converged(&dir, &sim);
}

#[test]
fn changes_made_while_the_agent_was_down_are_repaired_at_start() {
    let dir = scratch_dir("offline-changes");
    copy_example_cluster(&dir);
    let sim = new_sim();
    let mut agent = Agent::start(&dir, &sim);
    agent.sync();
    let db = agent.endpoint_of("shop/db-0");
    drop(agent);

    // While down: the database's policy is deleted, and a stray endpoint keeps netpol rules that
    // no pod claims any more.
    let stray_rules = sim.calls().endpoint(&db).unwrap().policies;
    sim.calls().add_endpoint(
        netpol_datapath::EndpointInfo {
            id: "stray".into(),
            name: "stray".into(),
            addresses: vec![ip("10.244.1.99")],
        },
        stray_rules,
    );
    let file = dir.join("policies/networkpolicies.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let kept: Vec<&str> = text
        .split("\n---\n")
        .filter(|doc| !doc.contains("  name: db\n"))
        .collect();
    assert_eq!(kept.len(), 3);
    std::fs::write(&file, kept.join("\n---\n")).unwrap();
    sim.calls().take_calls();

    let mut agent = Agent::start(&dir, &sim);
    let report = agent.sync();
    assert!(report.complete());
    assert_eq!(
        modified(&sim.calls().take_calls()),
        sorted([db, "stray".to_owned()])
    );
    assert!(sim.calls().endpoint("stray").unwrap().policies.is_empty());
    assert_converged(&dir, &sim);
}

fn sorted<const N: usize>(mut items: [String; N]) -> Vec<String> {
    items.sort();
    items.to_vec()
}

#[test]
fn an_unreadable_file_keeps_its_policies_and_the_node_not_ready() {
    use netpol_agent::sources::files::report::publish_state;

    let dir = scratch_dir("unreadable-file");
    copy_example_cluster(&dir);
    let sim = new_sim();
    let mut agent = Agent::start(&dir, &sim);
    assert!(agent.sync().complete());
    let health = synced_health();
    publish_state(&agent.source, &agent.metrics, &health);
    assert_eq!(health.readiness(), Ok(()));
    sim.calls().take_calls();

    // Every policy file is truncated to garbage: nothing in force goes away.
    let policies: Vec<_> = std::fs::read_dir(dir.join("policies"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for path in &policies {
        std::fs::write(path, "spec: {ingress: [unclosed\n").unwrap();
    }
    let scan = agent.scan();
    assert_eq!(scan.problems.len(), policies.len(), "{:?}", scan.problems);
    agent.reconcile();
    assert_eq!(modified(&sim.calls().take_calls()), Vec::<String>::new());
    publish_state(&agent.source, &agent.metrics, &health);
    let reason = health.readiness().unwrap_err();
    assert!(reason.contains("unreadable file"), "{reason}");
    let line = format!("netpol_unreadable_files {}", policies.len());
    assert!(agent.metrics_text().contains(&line), "{line}");

    // A restart while the files are broken: the new agent holds its first list back, so the
    // rules the previous agent programmed stay in force meanwhile.
    let mut restarted = Agent::start(&dir, &sim);
    restarted.scan();
    assert!(!restarted.source.is_listed());
    assert!(!restarted.pipeline.sources_synced());
    assert!(sim.calls().take_calls().is_empty());

    // Repaired: back to ready, and converged on the repaired files.
    copy_example_cluster(&dir);
    agent.sync();
    publish_state(&agent.source, &agent.metrics, &health);
    assert_eq!(health.readiness(), Ok(()));
    assert!(agent.metrics_text().contains("netpol_unreadable_files 0"));
    assert_converged(&dir, &sim);
}

#[test]
fn an_endpoint_that_cannot_be_read_is_skipped_and_readiness_names_it() {
    use netpol_datapath::Outcome;

    let dir = scratch_dir("unreadable-endpoint");
    copy_example_cluster(&dir);
    let sim = new_sim();
    let mut agent = Agent::start(&dir, &sim);
    assert!(agent.sync().complete());
    let health = synced_health();
    let db = agent.endpoint_of("shop/db-0");

    // HNS comes back empty, and db's endpoint cannot be read when the endpoints are listed.
    sim.calls().restart();
    sim.calls().inject(Fault::Fail {
        kind: CallKind::Query,
        endpoint: Some(db.clone()),
    });
    agent.pipeline.request_resync();
    let report = agent.reconcile();
    health.record_apply(&report.apply);
    assert!(report.discovery_error.is_none(), "{report:?}");
    assert!(
        matches!(report.apply.outcomes[&db], Outcome::Failed { .. }),
        "{:?}",
        report.apply.outcomes[&db]
    );
    assert_eq!(
        report.apply.updated(),
        5,
        "every other endpoint is programmed"
    );
    let reason = health.readiness().unwrap_err();
    assert!(
        reason.starts_with("1 endpoints do not hold their rules") && reason.contains(&db),
        "{reason}"
    );
    assert!(agent
        .metrics_text()
        .contains("netpol_endpoint_programs_total{outcome=\"failed\"} 1"));

    // After the backoff the endpoints are listed again; db reads and is programmed.
    let retry = agent
        .pipeline
        .next_wakeup()
        .expect("a new listing is scheduled");
    agent.now = retry;
    let report = agent.reconcile();
    health.record_apply(&report.apply);
    assert!(report.complete(), "{report:?}");
    assert_eq!(health.readiness(), Ok(()));
    assert_converged(&dir, &sim);
}

/// docs/semantics.md: every refused policy object, whether the files refused it (a field its kind
/// does not have) or its translation did, is counted in `netpol_policies{validity="invalid"}` and
/// named by `/readyz` until it is fixed or removed, while the node stays ready (it enforces the
/// refusal as designed: one tenant's object must not mark every agent not ready).
#[test]
fn every_refused_policy_is_counted_and_named_while_the_node_stays_ready() {
    use netpol_agent::driver::report_own_node;
    use netpol_agent::sources::files::report::publish_state;

    let dir = scratch_dir("refused-readiness");
    copy_example_cluster(&dir);
    let sim = new_sim();
    let mut agent = Agent::start(&dir, &sim);
    assert!(agent.sync().complete());
    let health = synced_health();
    let publish = |agent: &Agent| {
        publish_state(&agent.source, &agent.metrics, &health);
        report_own_node(&agent.pipeline, &health);
    };
    publish(&agent);
    assert_eq!(health.readiness(), Ok(()));

    // Refused by the files: a misspelt field (strict field validation).
    agent.write(
        "policies/misspelt.yaml",
        "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: misspelt, namespace: shop}
spec: {podSelector: {}, ingres: []}
",
    );
    agent.sync();
    publish(&agent);
    assert_eq!(health.readiness(), Ok(()));
    let notices = health.notices().join("\n");
    assert!(notices.contains("NetworkPolicy shop/misspelt"), "{notices}");
    let invalid = "netpol_policies{kind=\"NetworkPolicy\",validity=\"invalid\"}";
    assert!(agent.metrics_text().contains(&format!("{invalid} 1")));

    // Refused by translation too: both counted, both named.
    agent.write("policies/broken.yaml", INVALID_POLICY);
    agent.sync();
    publish(&agent);
    assert_eq!(health.readiness(), Ok(()));
    let notices = health.notices().join("\n");
    assert!(notices.contains("NetworkPolicy shop/misspelt"), "{notices}");
    assert!(notices.contains("NetworkPolicy shop/broken"), "{notices}");
    assert!(agent.metrics_text().contains(&format!("{invalid} 2")));

    // Removed: counted no more, ready again.
    agent.remove("policies/misspelt.yaml");
    agent.remove("policies/broken.yaml");
    agent.sync();
    publish(&agent);
    assert_eq!(health.readiness(), Ok(()));
    assert!(health.notices().is_empty(), "{:?}", health.notices());
    assert!(agent.metrics_text().contains(&format!("{invalid} 0")));
}
