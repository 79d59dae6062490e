//! Audit mode with real packets: the agent on nftables, in a private network namespace (the
//! node), passes what an audited policy would deny, logs it in the drop log as `would-deny`
//! naming the rule `netpol explain` names, and counts it under `verdict="would-deny"`.
//! Needs root, `nft` and network namespaces; elsewhere it fails with the reason, unless
//! `NETPOL_SKIP_KERNEL=1`.
#![cfg(target_os = "linux")]

use crate::support;

use netpol_testbed::probe::ProbeResult;
use support::agent_netns::{
    eventually, explain_remote_to_web, flows, http_get, probe_web, rule_packets, spawn_agent,
    web_client_remote,
};
use support::scratch_dir;

/// web admits only app=client on TCP 80, in audit mode: it isolates nothing.
const AUDITED_POLICY: &str = r#"apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: lockdown
  namespace: shop
  annotations: {"netpol.io/enforcement": audit}
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress]
  ingress:
  - from: [{podSelector: {matchLabels: {app: client}}}]
    ports: [{protocol: TCP, port: 80}]
"#;

#[test]
fn an_audited_deny_passes_and_is_logged_and_counted_as_would_deny_naming_the_rule_explain_names() {
    if netpol_testbed::netns::skip_kernel_test(
        "an_audited_deny_passes_and_is_logged_and_counted_as_would_deny_naming_the_rule_explain_names",
    ) {
        return;
    }
    let dir = scratch_dir("agent-audit-nftables");
    let topology = web_client_remote(&dir, ("lockdown.yaml", AUDITED_POLICY));
    let router = topology.router();
    let port = 9593;
    let agent = spawn_agent(router, &dir, port, &["--nflog-group", "7743"]);
    assert!(
        agent.log().contains("policy in audit mode") && agent.log().contains("would-deny"),
        "{}",
        agent.log()
    );
    let table = router
        .run("nft", &["list", "table", "inet", "netpol"], "")
        .unwrap();
    assert!(table.contains("goto audit_"), "{table}");

    // What the audited policy would deny passes, as does what it would allow.
    let labels = [
        "policy=\"lockdown\"",
        "rule=\"default-deny\"",
        "direction=\"ingress\"",
        "verdict=\"would-deny\"",
    ];
    let before = rule_packets(&http_get(router, port, "/metrics"), &labels);
    let results = probe_web(&topology, [("10.244.2.10", 81), ("10.244.1.11", 80)]);
    assert_eq!(results, vec![ProbeResult::Passed, ProbeResult::Passed]);

    let would_deny = eventually(100, || {
        flows(router, port)
            .into_iter()
            .find(|r| r["source"] == "10.244.2.10" && r["port"] == 81)
    });
    let Some(would_deny) = would_deny else {
        panic!("the would-deny was not logged:\n{}", agent.log());
    };
    assert_eq!(
        (&would_deny["verdict"], &would_deny["direction"]),
        (&"would-deny".into(), &"ingress".into()),
        "{would_deny}"
    );
    assert_eq!(
        would_deny["destination"], "shop/web (10.244.1.10)",
        "{would_deny}"
    );
    assert_eq!(
        would_deny["policy_rule"], "NetworkPolicy shop/lockdown rule default-deny",
        "{would_deny}"
    );
    // The allowed flow of the audited policy is no would-deny.
    assert!(
        !flows(router, port)
            .iter()
            .any(|r| r["source"] == "shop/client (10.244.1.11)"),
        "{:?}",
        flows(router, port)
    );
    // `explain` says the audited policy would deny it, in the same words.
    let explained = explain_remote_to_web(&dir, 81);
    let reason = would_deny["reason"].as_str().unwrap();
    assert!(
        explained.contains(&format!("would deny (audit): {reason}")),
        "explain:\n{explained}\ndrop log: {would_deny}"
    );
    // Counted, every packet, though it passed.
    let after = rule_packets(&http_get(router, port, "/metrics"), &labels);
    assert!(after > before, "would-deny counter {before} -> {after}");
}
