//! Compiled rules patched by the change: pods of new label sets come and go elsewhere, and the
//! endpoints that select them have their rules patched rather than compiled anew, always equal
//! to a full compile of their MapState.

use crate::agent_support;

use agent_support::*;
use netpol_datapath::compile_endpoint_with;

/// A pod of label set `app` (its own identity: no other pod has these labels and ports).
fn pod(name: &str, namespace: &str, app: &str, node: &str, ip: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {namespace}, labels: {{app: {app}, tier: extra}}}}
spec:
  nodeName: {node}
  containers:
  - name: main
    ports: [{{name: http, containerPort: 8080}}]
status: {{phase: Running, podIP: {ip}}}
"
    )
}

/// Every local endpoint's rules equal a full compile of its MapState now.
fn assert_rules_as_compiled(agent: &Agent, after: &str) {
    let engine = agent.pipeline.engine();
    for (key, rules) in agent.pipeline.compiled() {
        let map = engine
            .endpoint(key)
            .expect("a compiled endpoint is an endpoint");
        let full =
            compile_endpoint_with(map, engine.identities(), agent.pipeline.compile_options())
                .expect("compiles");
        assert_eq!(**rules, full, "{key} after {after}");
    }
}

#[test]
fn pods_of_new_label_sets_elsewhere_patch_the_rules_that_select_them() {
    let dir = scratch_dir("patch-churn");
    copy_example_cluster(&dir);
    let sim = new_sim();
    let mut agent = Agent::start(&dir, &sim);
    agent.sync();
    let pods = [
        ("shop", "api", "node-2", "10.244.2.71"),
        ("shop", "web", "node-2", "10.244.2.72"),
        ("payments", "ledger", "node-3", "10.244.3.73"),
        ("shop", "api", "node-3", "10.244.3.74"),
        ("sandbox", "builder", "node-2", "10.244.2.75"),
    ];
    let mut patched = 0;
    for (i, (namespace, app, node, ip)) in pods.iter().enumerate() {
        let file = format!("pods/new-{i}.yaml");
        agent.write(&file, &pod(&format!("new-{i}"), namespace, app, node, ip));
        let report = agent.sync();
        patched += report.patched;
        assert_rules_as_compiled(&agent, &format!("adding {file}"));
    }
    for i in [1, 3, 0, 4, 2] {
        let file = format!("pods/new-{i}.yaml");
        agent.remove(&file);
        let report = agent.sync();
        patched += report.patched;
        assert_rules_as_compiled(&agent, &format!("removing {file}"));
    }
    assert!(patched > 0, "some endpoint's rules were patched");
    // A resync compiles everything anew and finds nothing to correct.
    agent.pipeline.request_resync();
    let report = agent.reconcile();
    assert!(report.changed_pods.is_empty(), "{:?}", report.changed_pods);
}
