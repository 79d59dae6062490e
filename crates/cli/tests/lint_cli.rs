//! `netpol lint`: each rule on a policy set with the smell, clean sets without findings, the
//! output forms and the exit codes.

mod support;

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

/// What the SARIF 2.1.0 schema requires of each object the log uses (its `required` lists and
/// types): `version` and `runs` at the root; per run `tool.driver.name`; per rule `id`; per
/// invocation `executionSuccessful`; per notification and result `message.text`; per physical
/// location an `artifactLocation.uri` and a region whose `startLine` is at least 1; fingerprints
/// as strings; levels from the schema's enumeration.
fn assert_sarif_2_1_0(log: &Value) {
    let levels = ["none", "note", "warning", "error"];
    assert_eq!(log["version"], "2.1.0");
    assert!(log["$schema"].as_str().unwrap().contains("sarif-2.1.0"));
    for run in log["runs"].as_array().expect("runs") {
        let driver = &run["tool"]["driver"];
        assert!(driver["name"].as_str().is_some_and(|n| !n.is_empty()));
        let rules = driver["rules"].as_array().expect("rules");
        for rule in rules {
            assert!(rule["id"].is_string(), "{rule}");
            assert!(rule["shortDescription"]["text"].is_string(), "{rule}");
            let level = rule["defaultConfiguration"]["level"].as_str().unwrap();
            assert!(levels.contains(&level), "{rule}");
        }
        for invocation in run["invocations"].as_array().expect("invocations") {
            assert!(
                invocation["executionSuccessful"].is_boolean(),
                "{invocation}"
            );
            for n in invocation["toolExecutionNotifications"]
                .as_array()
                .into_iter()
                .flatten()
            {
                assert!(n["message"]["text"].as_str().is_some_and(|t| !t.is_empty()));
                assert!(levels.contains(&n["level"].as_str().unwrap()), "{n}");
            }
        }
        for result in run["results"].as_array().expect("results") {
            assert!(result["message"]["text"]
                .as_str()
                .is_some_and(|t| !t.is_empty()));
            let index = result["ruleIndex"].as_u64().unwrap() as usize;
            assert_eq!(rules[index]["id"], result["ruleId"]);
            assert!(levels.contains(&result["level"].as_str().unwrap()));
            for (_, print) in result["partialFingerprints"]
                .as_object()
                .expect("fingerprints")
            {
                assert!(print.is_string());
            }
            for location in result["locations"].as_array().unwrap() {
                let Some(physical) = location.get("physicalLocation") else {
                    continue;
                };
                assert!(
                    physical["artifactLocation"]["uri"].is_string(),
                    "{physical}"
                );
                for region in ["region", "contextRegion"] {
                    if let Some(region) = physical.get(region) {
                        assert!(region["startLine"].as_u64().unwrap() >= 1, "{physical}");
                    }
                }
            }
        }
    }
}

/// Each result points at its object's file (relative to the working directory), the line of its
/// field and of its object, with a fingerprint that does not change from run to run.
#[test]
fn sarif_results_have_physical_locations_and_stable_fingerprints() {
    let cluster = fixture("cluster.yaml");
    let set = fixture("shadowed-rule.yaml");
    let run = || {
        let output = netpol(&["lint", "-f", &cluster, "-f", &set, "-o", "sarif"]);
        assert_eq!(output.status.code(), Some(1));
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    let log = run();
    assert_sarif_2_1_0(&log);
    let results = log["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    let places: Vec<(String, u64, u64)> = results
        .iter()
        .map(|r| {
            let physical = &r["locations"][0]["physicalLocation"];
            (
                physical["artifactLocation"]["uri"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                physical["region"]["startLine"].as_u64().unwrap(),
                physical["contextRegion"]["startLine"].as_u64().unwrap(),
            )
        })
        .collect();
    // Tests run in the crate's folder: the fixture is named below it. allow-y-http starts at
    // line 14, its `spec` is line 17 and its `ingress[0]` line 21.
    let uri = "tests/fixtures/lint/shadowed-rule.yaml".to_owned();
    assert_eq!(places, [(uri.clone(), 17, 14), (uri, 21, 14)]);
    let prints = |log: &Value| -> Vec<Value> {
        log["runs"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["partialFingerprints"].clone())
            .collect()
    };
    assert_eq!(prints(&log), prints(&run()));
    assert_ne!(prints(&log)[0], prints(&log)[1]);
}

/// On bad input the SARIF log is still a valid log: no results, the run not successful, each
/// error a tool execution notification naming the object and field; exit 2.
#[test]
fn sarif_on_bad_input_is_a_valid_log_with_the_error() {
    let dir = support::scratch_dir("lint-sarif-bad-input");
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\n\
         spec:\n  podSelector: {}\n  ingress:\n  - ports: [{port: 0}]\n",
    )
    .unwrap();
    let output = netpol(&["lint", "-f", bad.to_str().unwrap(), "-o", "sarif"]);
    assert_eq!(output.status.code(), Some(2));
    let log: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(&output)));
    assert_sarif_2_1_0(&log);
    let run = &log["runs"][0];
    assert_eq!(run["results"], serde_json::json!([]));
    assert_eq!(run["invocations"][0]["executionSuccessful"], false);
    let text = run["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("x/p") && text.contains("ports"), "{text}");
    // An unknown rule id is bad input too.
    let output = netpol(&[
        "lint",
        "-f",
        bad.to_str().unwrap(),
        "-o",
        "sarif",
        "--disable",
        "nope",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let log: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_sarif_2_1_0(&log);
}

/// Every rule's `helpUri` names a section of docs/cli.md: a heading whose GitHub anchor (lower
/// case, punctuation but `-` dropped, spaces as `-`) is the fragment.
#[test]
fn sarif_help_uris_resolve_in_docs_cli_md() {
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md"))
            .unwrap();
    let anchors: Vec<String> = docs
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| {
            l.trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect()
        })
        .collect();
    let output = netpol(&[
        "lint",
        "-f",
        &fixture("cluster.yaml"),
        "-f",
        &fixture("clean.yaml"),
        "-o",
        "sarif",
    ]);
    let log: Value = serde_json::from_slice(&output.stdout).unwrap();
    let rules = log["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .unwrap();
    assert!(rules.len() >= 12);
    for rule in rules {
        let uri = rule["helpUri"].as_str().unwrap();
        let (page, anchor) = uri.split_once('#').unwrap();
        assert!(page.ends_with("docs/cli.md"), "{uri}");
        assert!(
            anchors.iter().any(|a| a == anchor),
            "{uri}: no such heading"
        );
    }
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
