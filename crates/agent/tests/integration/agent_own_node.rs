//! This node's own Node object is what the node-probe allowance hangs on (issue 34). When it is
//! missing, the agent says so (a warning, `netpol_own_node_missing`, `/readyz` 503 with the
//! reason) and its last known addresses keep admitting kubelet's probes; once it is back, the
//! allowance follows its addresses again. Never seen at all, no address is known to admit.

use crate::agent_support;

use agent_support::cluster::*;
use agent_support::*;
use netpol_engine::{Direction, Protocol};
use netpol_hcn::oracle::packet;
use netpol_hcn::schema::AclAction;
use netpol_testkit::apiserver::ApiServer;
use serde_json::json;

/// A namespace whose pods admit no ingress at all, and a pod of it on this node.
fn isolated_namespace(server: &ApiServer) {
    server.apply(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "probed", "labels": {"kubernetes.io/metadata.name": "probed"}},
    }));
    server.apply(network_policy(
        "no-ingress",
        "probed",
        json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
    ));
    server.apply(probed_pod("app-1", "10.244.1.201"));
}

fn probed_pod(name: &str, ip: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "probed", "labels": {"app": "probed"}},
        "spec": {"nodeName": NODE, "containers": [{"name": "app"}]},
        "status": {"phase": "Running", "podIP": ip},
    })
}

fn node_1(address: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NODE, "labels": {"kubernetes.io/os": "windows"}},
        "status": {"addresses": [{"type": "InternalIP", "address": address}]},
    })
}

/// Whether the programmed rules admit a probe from `from` to `pod`'s port 8080.
fn probe_admitted(agent: &ClusterAgent, pod: &str, from: &str) -> bool {
    agent
        .sim
        .calls()
        .evaluate(
            &endpoint_of(&agent.pipeline, pod),
            &packet(Direction::Ingress, ip(from), Protocol::Tcp, 8080),
        )
        .unwrap()
        .action
        == AclAction::Allow
}

#[test]
fn a_deleted_own_node_keeps_its_last_addresses_admitting_probes_and_says_so() {
    let server = example_server();
    isolated_namespace(&server);
    let mut agent = ClusterAgent::start(&server, config());
    agent.run_until("ready", |a| {
        a.pipeline.synced() && a.health.readiness().is_ok() && a.has_endpoint("probed/app-1")
    });
    agent.assert_metric("netpol_own_node_missing 0");
    assert!(probe_admitted(&agent, "probed/app-1", "10.0.0.1"));
    assert!(
        !probe_admitted(&agent, "probed/app-1", "10.0.0.2"),
        "another node's address"
    );

    // The Node object goes (deleted by hand, or by a node controller while the kubelet is out).
    server.delete("Node", NODE);
    agent.run_until("the missing Node reported", |a| {
        a.health
            .readiness()
            .is_err_and(|r| r.contains("Node object node-1 is missing"))
    });
    let reason = agent.health.readiness().unwrap_err();
    assert!(reason.contains("last known addresses"), "{reason}");
    agent.assert_metric("netpol_own_node_missing 1");
    // A pod that arrives meanwhile is computed with the kept addresses too.
    server.apply(probed_pod("app-2", "10.244.1.202"));
    agent.run_until("the new pod programmed", |a| a.has_endpoint("probed/app-2"));
    for pod in ["probed/app-1", "probed/app-2"] {
        assert!(
            probe_admitted(&agent, pod, "10.0.0.1"),
            "{pod}: probe denied"
        );
        assert!(!probe_admitted(&agent, pod, "10.0.0.2"), "{pod}");
    }

    // It comes back with another address: the allowance follows it, and the node is ready.
    server.apply(node_1("10.0.0.11"));
    agent.run_until("ready again", |a| a.health.readiness().is_ok());
    agent.assert_metric("netpol_own_node_missing 0");
    agent.run_until("the new address admitted", |a| {
        probe_admitted(a, "probed/app-1", "10.0.0.11")
    });
    assert!(
        !probe_admitted(&agent, "probed/app-1", "10.0.0.1"),
        "the old address kept"
    );
    agent.assert_programs(&server, "own-node-back");
}

#[test]
fn an_own_node_never_seen_is_reported_with_no_address_to_admit() {
    let server = example_server();
    isolated_namespace(&server);
    server.delete_unseen("Node", NODE);
    let mut agent = ClusterAgent::start(&server, config());
    agent.run_until("synced", |a| {
        a.pipeline.synced() && a.has_endpoint("probed/app-1")
    });
    let reason = agent.health.readiness().unwrap_err();
    assert!(reason.contains("Node object node-1 is missing"), "{reason}");
    assert!(reason.contains("never known"), "{reason}");
    agent.assert_metric("netpol_own_node_missing 1");
    // Fail-closed: no address of this node is known, so none is admitted.
    assert!(!probe_admitted(&agent, "probed/app-1", "10.0.0.1"));

    server.apply(node_1("10.0.0.1"));
    agent.run_until("ready", |a| a.health.readiness().is_ok());
    agent.run_until("probes admitted", |a| {
        probe_admitted(a, "probed/app-1", "10.0.0.1")
    });
    agent.assert_metric("netpol_own_node_missing 0");
}
