//! `netpol lint`: each rule on a policy set with the smell, clean sets without findings, the
//! output forms and the exit codes.

use crate::support;

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use support::{netpol, stderr, stdout};

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/lint")
        .join(name)
        .to_str()
        .unwrap()
        .to_owned()
}

/// `netpol lint -f cluster.yaml -f SET.yaml -o json`, with its findings.
fn lint_set(set: &str) -> (Output, Vec<Value>) {
    let (cluster, set) = (fixture("cluster.yaml"), fixture(set));
    let output = netpol(&["lint", "-f", &cluster, "-f", &set, "-o", "json"]);
    let findings = json_findings(&output);
    (output, findings)
}

fn json_findings(output: &Output) -> Vec<Value> {
    let json: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}{}", stdout(output), stderr(output)));
    json["findings"].as_array().unwrap().clone()
}

fn summary(findings: &[Value]) -> Vec<(String, String, String)> {
    findings
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_owned(),
                f["object"].as_str().unwrap().to_owned(),
                f["field"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn owned(rule: &str, object: &str, field: &str) -> (String, String, String) {
    (rule.into(), object.into(), field.into())
}

#[test]
fn each_rule_reports_its_smell_with_object_field_message_and_hint() {
    let cases = [
        (
            "selects-nothing.yaml",
            vec![owned(
                "selects-nothing",
                "NetworkPolicy x/web-typo",
                "spec.podSelector",
            )],
        ),
        (
            "peer-selects-nothing.yaml",
            vec![owned(
                "peer-selects-nothing",
                "NetworkPolicy x/web-from-client",
                "spec.ingress[0]",
            )],
        ),
        (
            "shadowed-rule.yaml",
            vec![
                owned(
                    "redundant-policy",
                    "AdminNetworkPolicy allow-y-http",
                    "spec",
                ),
                owned(
                    "shadowed-rule",
                    "AdminNetworkPolicy allow-y-http",
                    "spec.ingress[0]",
                ),
            ],
        ),
        (
            "redundant-policy.yaml",
            vec![
                owned("redundant-policy", "NetworkPolicy z/allow-all", "spec"),
                owned(
                    "open-to-world",
                    "NetworkPolicy z/allow-all",
                    "spec.ingress[0]",
                ),
            ],
        ),
        (
            "unordered-overlap.yaml",
            vec![owned(
                "unordered-overlap",
                "AdminNetworkPolicy deny-web",
                "spec.ingress[0]",
            )],
        ),
        (
            "ipblock-covers-pods.yaml",
            vec![owned(
                "ipblock-covers-pods",
                "NetworkPolicy y/egress-outside",
                "spec.egress[0]",
            )],
        ),
        (
            "named-port-unresolved.yaml",
            vec![owned(
                "named-port-unresolved",
                "NetworkPolicy x/web-http",
                "spec.ingress[0].ports[0]",
            )],
        ),
    ];
    for (set, expected) in cases {
        let (output, findings) = lint_set(set);
        assert_eq!(summary(&findings), expected, "{set}: {findings:#?}");
        // A note alone does not fail by default (`--fail-on warning`).
        let warned = findings.iter().any(|f| f["severity"] == "warning");
        let code = if warned { 1 } else { 0 };
        assert_eq!(
            output.status.code(),
            Some(code),
            "{set}: {}",
            stderr(&output)
        );
        for f in &findings {
            for field in ["severity", "message", "hint"] {
                assert!(
                    f[field].as_str().is_some_and(|s| !s.is_empty()),
                    "{set}: {field} missing in {f}"
                );
            }
        }
    }
}

#[test]
fn shadowed_rule_names_the_rule_that_shadows_it() {
    let (_, findings) = lint_set("shadowed-rule.yaml");
    let shadowed = findings
        .iter()
        .find(|f| f["rule"] == "shadowed-rule")
        .unwrap();
    let message = shadowed["message"].as_str().unwrap();
    assert!(
        message.contains("AdminNetworkPolicy deny-y rule deny-all-from-y"),
        "{message}"
    );
}

#[test]
fn unordered_overlap_names_both_policies_and_the_winner() {
    let (_, findings) = lint_set("unordered-overlap.yaml");
    let message = findings[0]["message"].as_str().unwrap();
    assert!(
        message.contains("AdminNetworkPolicy allow-y rule allow-from-y"),
        "{message}"
    );
    assert!(message.contains("priority 30"), "{message}");
}

#[test]
fn a_clean_set_has_no_findings_and_exits_0() {
    let (output, findings) = lint_set("clean.yaml");
    assert!(findings.is_empty(), "{findings:#?}");
    assert_eq!(output.status.code(), Some(0));
    let text = netpol(&[
        "lint",
        "-f",
        &fixture("cluster.yaml"),
        "-f",
        &fixture("clean.yaml"),
    ]);
    assert_eq!(stdout(&text), "no findings\n");
    assert_eq!(text.status.code(), Some(0));
}

/// Every scenario of the shared set and the examples lints without findings, except those
/// named here, which each genuinely have the smell.
#[test]
fn scenarios_lint_without_false_findings() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let known: Vec<(&str, (String, String, String))> = vec![
        // The hairpin scenario allows ingress from every entity (open to the world) and denies
        // everything over it, on purpose: its allow and its egress deny decide nothing the
        // ingress deny and the isolation do not (the only flow left, the pod to itself, is not
        // subject to policy).
        (
            "hairpin-cilium-deny.yaml",
            owned(
                "open-to-world",
                "CiliumNetworkPolicy z/deny-everything",
                "spec.ingress[0]",
            ),
        ),
        (
            "hairpin-cilium-deny.yaml",
            owned(
                "shadowed-rule",
                "CiliumNetworkPolicy z/deny-everything",
                "spec.egressDeny[0]",
            ),
        ),
        (
            "hairpin-cilium-deny.yaml",
            owned(
                "shadowed-rule",
                "CiliumNetworkPolicy z/deny-everything",
                "spec.ingress[0]",
            ),
        ),
        // allow-all is the only NetworkPolicy of x: allowing all ingress changes nothing (the
        // admin deny decides y -> x either way).
        (
            "anp-deny-overrides-networkpolicy.yaml",
            owned("redundant-policy", "NetworkPolicy x/allow-all", "spec"),
        ),
        // The Cilium policy's allow is merged with allow-all's equal-tier allow of everything.
        (
            "cilium-deny-wins-in-its-tier.yaml",
            owned(
                "shadowed-rule",
                "CiliumNetworkPolicy y/deny-x-web",
                "spec.ingress[0]",
            ),
        ),
        (
            "np-egress-ipblock-except.yaml",
            owned(
                "ipblock-covers-pods",
                "NetworkPolicy x/egress-cidr",
                "spec.egress[0]",
            ),
        ),
        // The admin deny of x is what the NetworkPolicy's isolation does anyway.
        (
            "anp-named-port-and-banp-rule-order.yaml",
            owned(
                "shadowed-rule",
                "AdminNetworkPolicy z-from-x-sctp-only",
                "spec.ingress[1]",
            ),
        ),
        (
            "np-ipv6-and-dual-stack.yaml",
            owned(
                "ipblock-covers-pods",
                "NetworkPolicy v6/a-from-ula",
                "spec.ingress[0]",
            ),
        ),
        (
            "np-ipv6-and-dual-stack.yaml",
            owned(
                "ipblock-covers-pods",
                "NetworkPolicy v6/b-egress",
                "spec.egress[1]",
            ),
        ),
        (
            "np-ipv6-and-dual-stack.yaml",
            owned(
                "ipblock-covers-pods",
                "NetworkPolicy v6/d-ipv4-only",
                "spec.egress[0]",
            ),
        ),
        // Rules that admit every address or every pod: genuine in these scenarios, which test
        // allow-all policies, entities and named ports on purpose.
        (
            "anp-deny-overrides-networkpolicy.yaml",
            owned(
                "open-to-world",
                "NetworkPolicy x/allow-all",
                "spec.ingress[0]",
            ),
        ),
        (
            "cilium-deny-wins-in-its-tier.yaml",
            owned(
                "open-to-world",
                "CiliumNetworkPolicy y/deny-x-web",
                "spec.ingress[0]",
            ),
        ),
        (
            "cilium-deny-wins-in-its-tier.yaml",
            owned(
                "open-to-world",
                "NetworkPolicy y/allow-all",
                "spec.ingress[0]",
            ),
        ),
        (
            "np-egress-ipblock-except.yaml",
            owned(
                "egress-open-to-world",
                "NetworkPolicy x/egress-cidr",
                "spec.egress[1]",
            ),
        ),
        (
            "np-named-port-and-endport.yaml",
            owned(
                "open-to-all-pods",
                "NetworkPolicy x/ports",
                "spec.ingress[0]",
            ),
        ),
        (
            "cilium-entities.yaml",
            owned(
                "open-to-world",
                "CiliumNetworkPolicy x/web-from-all",
                "spec.ingress[0]",
            ),
        ),
        (
            "cilium-entities.yaml",
            owned(
                "open-to-world",
                "CiliumNetworkPolicy y/a-host-and-outside",
                "spec.ingress[0]",
            ),
        ),
        (
            "cilium-entities.yaml",
            owned(
                "egress-open-to-world",
                "CiliumNetworkPolicy z/a-to-world-only",
                "spec.egress[0]",
            ),
        ),
        (
            "cnp-named-ports.yaml",
            owned(
                "open-to-all-pods",
                "ClusterNetworkPolicy x-only-udp-81",
                "spec.ingress[0]",
            ),
        ),
        (
            "cnp-named-ports.yaml",
            owned(
                "egress-open-to-all-pods",
                "ClusterNetworkPolicy y-web-only",
                "spec.egress[0]",
            ),
        ),
        (
            "cnp-named-ports.yaml",
            owned(
                "egress-open-to-world",
                "NetworkPolicy y/c-egress-open",
                "spec.egress[0]",
            ),
        ),
        (
            "np-egress-named-ports.yaml",
            owned(
                "egress-open-to-world",
                "NetworkPolicy x/egress-by-port-name",
                "spec.egress[1]",
            ),
        ),
        (
            "np-ipv6-and-dual-stack.yaml",
            owned(
                "egress-open-to-world",
                "NetworkPolicy v6/d-ipv4-only",
                "spec.egress[0]",
            ),
        ),
    ];
    let mut files = Vec::new();
    for dir in [
        root.join("../../../shared/scenarios"),
        root.join("../../examples/scenarios"),
    ] {
        let Ok(read) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in read {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                files.push(path);
            }
        }
    }
    assert!(files.len() >= 8, "scenarios found: {files:?}");
    for file in files {
        let name = file.file_name().unwrap().to_str().unwrap().to_owned();
        let output = netpol(&["lint", file.to_str().unwrap(), "-o", "json"]);
        let findings = json_findings(&output);
        let mut found = summary(&findings);
        let mut expected: Vec<_> = known
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, f)| f.clone())
            .collect();
        found.sort();
        expected.sort();
        assert_eq!(found, expected, "{name}");
        // Notes alone do not fail (`--fail-on warning` by default).
        let warned = findings.iter().any(|f| f["severity"] == "warning");
        let code = if warned { 1 } else { 0 };
        assert_eq!(
            output.status.code(),
            Some(code),
            "{name}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn bad_input_exits_2_naming_the_object_and_field() {
    let dir = support::scratch_dir("lint-bad-input");
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\n\
         spec:\n  podSelector: {}\n  ingress:\n  - ports: [{port: 0}]\n",
    )
    .unwrap();
    let output = netpol(&[
        "lint",
        "-f",
        &fixture("cluster.yaml"),
        "-f",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    let err = stderr(&output);
    assert!(err.contains("x/p") && err.contains("ports"), "{err}");
    assert!(stdout(&output).is_empty());
}

/// The fixture cluster with every pod run as `replicas` pods of the same labels and ports,
/// spread over three nodes: lint decides per group of alike pods, so the findings must be the
/// fixture's own (`ipblock-covers-pods` aside, which counts and names the pods).
fn replicated_cluster(replicas: usize) -> String {
    let pods = [
        ("x", "web", "web", "[{name: http, containerPort: 8080}]"),
        ("x", "db", "db", "[{name: pg, containerPort: 5432}]"),
        ("y", "client", "client", "[]"),
        ("y", "web", "web", "[]"),
        ("z", "a", "a", "[]"),
        ("z", "b", "b", "[]"),
    ];
    let mut yaml = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for ns in ["x", "y", "z"] {
        yaml += &format!(
            "- {{apiVersion: v1, kind: Namespace, metadata: {{name: {ns}, labels: \
             {{kubernetes.io/metadata.name: {ns}, ns: {ns}}}}}}}\n"
        );
    }
    for n in 1..=3 {
        yaml += &format!(
            "- {{apiVersion: v1, kind: Node, metadata: {{name: node-{n}}}, status: {{addresses: \
             [{{type: InternalIP, address: 10.0.0.{n}}}]}}}}\n"
        );
    }
    for (p, (ns, name, app, ports)) in pods.iter().enumerate() {
        for r in 0..replicas {
            yaml += &format!(
                "- {{apiVersion: v1, kind: Pod, metadata: {{name: {name}-{r}, namespace: {ns}, \
                 labels: {{app: {app}}}}}, spec: {{nodeName: node-{}, containers: [{{name: c, \
                 image: nginx, ports: {ports}}}]}}, status: {{phase: Running, podIP: \
                 10.244.{}.{}}}}}\n",
                r % 3 + 1,
                p + 1,
                r + 10
            );
        }
    }
    yaml
}

#[test]
fn replicas_on_many_nodes_lint_as_one_pod_each() {
    let dir = support::scratch_dir("lint-replicas");
    let many = dir.join("cluster.yaml");
    std::fs::write(&many, replicated_cluster(7)).unwrap();
    let sets = [
        "clean.yaml",
        "named-port-unresolved.yaml",
        "peer-selects-nothing.yaml",
        "redundant-policy.yaml",
        "selects-nothing.yaml",
        "shadowed-rule.yaml",
        "unordered-overlap.yaml",
    ];
    for set in sets {
        let (_, alone) = lint_set(set);
        let output = netpol(&[
            "lint",
            "-f",
            many.to_str().unwrap(),
            "-f",
            &fixture(set),
            "-o",
            "json",
        ]);
        let replicated = json_findings(&output);
        // Pod names appear in no message of these rules, so the findings are equal whole.
        assert_eq!(replicated, alone, "{set}");
    }
}
