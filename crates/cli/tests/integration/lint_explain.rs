//! Every `lint` finding agrees with `explain` on the same inputs, over an app of several
//! namespaces, workloads and policy kinds (NetworkPolicies, an AdminNetworkPolicy, a
//! BaselineAdminNetworkPolicy) with the mistakes lint looks for:
//!
//! - a finding that says something decides nothing (`shadowed-rule`, `redundant-policy`,
//!   `default-deny-covered`, `selects-nothing`, `peer-selects-nothing`) is checked by taking that
//!   thing out of the manifests: `explain` must then give every flow (every pod and an outside
//!   address, both ways, on every probe port) the verdict it gave before;
//! - `named-port-unresolved`: `explain` names the rule as deciding no flow;
//! - the exposure rules (`open-to-*`): `explain` says the flows they warn of are admitted by the
//!   rule named, or decided in the admin tier ahead of it;
//! - `ipblock-covers-pods`: `explain` says the block's rule decides a flow with a pod.
//!
//! A rule id this test does not know fails it, so a new rule comes with its check.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use support::{netpol, stderr};

/// The pods, by workload, and an address outside the cluster.
const PARTIES: [&str; 6] = [
    "shop/web",
    "shop/api",
    "data/postgres",
    "ops/prober",
    "sandbox/toolbox",
    "203.0.113.9",
];
const OUTSIDE: &str = "203.0.113.9";
/// The ports the policies write, one no rule names, and another protocol.
const PORTS: [&str; 4] = ["TCP/5432", "TCP/8080", "TCP/9999", "UDP/53"];

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}})
}

fn workload(kind: &str, ns: &str, app: &str, port: Option<(&str, u16)>) -> Value {
    let ports = port.map_or(
        json!([]),
        |(name, number)| json!([{"name": name, "containerPort": number}]),
    );
    json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": app, "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": app}}, "template": {
            "metadata": {"labels": {"app": app}},
            "spec": {"containers": [{"name": app, "image": app, "ports": ports}]}}}})
}

fn network_policy(ns: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns}, "spec": spec})
}

/// The app: its objects by `Kind namespace/name` (as lint names them), in order.
fn app() -> Vec<(String, Value)> {
    let mut objects = vec![
        namespace("shop"),
        namespace("data"),
        namespace("ops"),
        namespace("sandbox"),
        workload("Deployment", "shop", "web", Some(("http", 8080))),
        workload("Deployment", "shop", "api", Some(("http", 8080))),
        workload("StatefulSet", "data", "postgres", Some(("pg", 5432))),
        workload("Deployment", "ops", "prober", None),
        workload("Deployment", "sandbox", "toolbox", None),
        // A default deny that the policies below happen to cover today.
        network_policy(
            "shop",
            "default-deny",
            json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
        ),
        // Ports only: every address, the internet included.
        network_policy(
            "shop",
            "web-open",
            json!({"podSelector": {"matchLabels": {"app": "web"}},
            "ingress": [{"ports": [{"port": 8080}]}]}),
        ),
        network_policy(
            "shop",
            "api-from-web",
            json!({"podSelector": {"matchLabels": {"app": "api"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}],
                "ports": [{"port": "http"}]}]}),
        ),
        // A typo'd peer, and a named port no pod declares.
        network_policy(
            "shop",
            "api-admin",
            json!({"podSelector": {"matchLabels": {"app": "api"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "admin"}}}]},
                {"from": [{"podSelector": {"matchLabels": {"app": "web"}}}],
                 "ports": [{"port": "metrics"}]}]}),
        ),
        // namespaceSelector: {} standing alone: every pod of the cluster.
        network_policy(
            "data",
            "postgres",
            json!({"podSelector": {"matchLabels": {"app": "postgres"}},
            "ingress": [{"from": [
                {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "shop"}},
                 "podSelector": {"matchLabels": {"app": "api"}}},
                {"namespaceSelector": {}}],
                "ports": [{"protocol": "TCP", "port": 5432}]}]}),
        ),
        // Admits what `postgres` already admits.
        network_policy(
            "data",
            "postgres-from-api",
            json!({"podSelector": {"matchLabels": {"app": "postgres"}},
            "ingress": [{"from": [
                {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "shop"}},
                 "podSelector": {"matchLabels": {"app": "api"}}}],
                "ports": [{"port": 5432}]}]}),
        ),
        // Egress to every address, pods' included.
        network_policy(
            "ops",
            "prober-egress",
            json!({"podSelector": {"matchLabels": {"app": "prober"}},
            "policyTypes": ["Egress"], "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]}),
        ),
        // Selects nothing (app: toolbx).
        network_policy(
            "sandbox",
            "typo",
            json!({"podSelector": {"matchLabels": {"app": "toolbx"}},
            "policyTypes": ["Ingress"]}),
        ),
        json!({"apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
            "metadata": {"name": "sandbox-out"}, "spec": {"priority": 10,
            "subject": {"namespaces": {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                "operator": "NotIn", "values": ["sandbox"]}]}},
            "ingress": [
                {"name": "deny-sandbox", "action": "Deny",
                 "from": [{"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": "sandbox"}}}]},
                {"name": "deny-sandbox-again", "action": "Deny",
                 "from": [{"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": "sandbox"}}}]}]}}),
        json!({"apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "BaselineAdminNetworkPolicy",
            "metadata": {"name": "default"}, "spec": {
            "subject": {"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": "data"}}},
            "ingress": [{"name": "deny-all", "action": "Deny", "from": [{"namespaces": {}}]}]}}),
    ];
    objects
        .drain(..)
        .map(|object| {
            let kind = object["kind"].as_str().unwrap().to_owned();
            let name = object["metadata"]["name"].as_str().unwrap().to_owned();
            let key = match object["metadata"]["namespace"].as_str() {
                Some(ns) => format!("{kind} {ns}/{name}"),
                None => format!("{kind} {name}"),
            };
            (key, object)
        })
        .collect()
}

/// Writes `objects` as one JSON list into `dir/name.json`.
fn write(dir: &Path, name: &str, objects: &[(String, Value)]) -> String {
    let path: PathBuf = dir.join(format!("{name}.json"));
    let items: Vec<&Value> = objects.iter().map(|(_, o)| o).collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(&path, serde_json::to_vec_pretty(&list).unwrap()).unwrap();
    path.to_str().unwrap().to_owned()
}

fn explain(file: &str, from: &str, to: &str, port: &str) -> Value {
    let output = netpol(&["explain", "-f", file, from, to, port, "-o", "json"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{from} {to} {port}: {}",
        stderr(&output)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Every flow's `explain`, by (from, to, port).
fn every_flow(file: &str) -> BTreeMap<(String, String, String), Value> {
    let mut flows = BTreeMap::new();
    for from in PARTIES {
        for to in PARTIES {
            if from == to || (from == OUTSIDE && to == OUTSIDE) {
                continue;
            }
            for port in PORTS {
                let key = (from.to_owned(), to.to_owned(), port.to_owned());
                flows.insert(key, explain(file, from, to, port));
            }
        }
    }
    flows
}

/// `Kind namespace/name` of the policy a direction's decision names.
fn policy_of(direction: &Value) -> Option<String> {
    let policy = direction.get("policy")?;
    let kind = policy["kind"].as_str()?;
    let name = policy["name"].as_str()?;
    Some(match policy["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    })
}

/// Whether `direction` was decided by a rule of `object` (its `rule` field: `ingress[0]`, or an
/// admin rule's name), or in the admin tier ahead of it.
fn decided_by_or_ahead(direction: &Value, object: &str, rule: &str) -> bool {
    let by_it = policy_of(direction).as_deref() == Some(object)
        && direction["reason"] == "rule"
        && direction["policy"]["rule"]
            .as_str()
            .is_some_and(|r| r == rule);
    by_it || (direction["tier"] == "Admin" && direction["reason"] == "rule")
}

/// The objects with `field` (`spec`, `spec.ingress[1]`, `spec.ingress[0].from[1]`) of `object`
/// taken out: the whole object for `spec`.
fn without(objects: &[(String, Value)], object: &str, field: &str) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = objects.to_vec();
    let at = out
        .iter()
        .position(|(k, _)| k == object)
        .unwrap_or_else(|| panic!("{object}"));
    if field == "spec" {
        out.remove(at);
        return out;
    }
    // `spec.a[i].b[j]`: walk to the last list and remove its element.
    let steps: Vec<(&str, Option<usize>)> = field
        .split('.')
        .map(|step| match step.split_once('[') {
            Some((name, index)) => (name, Some(index.trim_end_matches(']').parse().unwrap())),
            None => (step, None),
        })
        .collect();
    let (last, path) = steps.split_last().unwrap();
    let mut node = &mut out[at].1;
    for (name, index) in path {
        node = &mut node[*name];
        if let Some(i) = index {
            node = &mut node[*i];
        }
    }
    let list = node[last.0].as_array_mut().unwrap();
    list.remove(last.1.unwrap());
    out
}

/// The rule part of a field as explain names it: `ingress[1]` of `spec.ingress[1].from[0]`; for
/// an admin policy, the rule's name.
fn rule_name(objects: &[(String, Value)], object: &str, field: &str) -> String {
    let rule: String = field
        .trim_start_matches("spec.")
        .split('.')
        .next()
        .unwrap()
        .to_owned();
    if object.starts_with("NetworkPolicy") {
        return rule;
    }
    let (direction, index) = rule.split_once('[').unwrap();
    let index: usize = index.trim_end_matches(']').parse().unwrap();
    let spec = &objects.iter().find(|(k, _)| k == object).unwrap().1["spec"];
    spec[direction][index]["name"].as_str().unwrap().to_owned()
}

/// The probe ports a rule of `object` at `field` names: `TCP/8080` for `ports: [{port: 8080}]`.
fn rule_ports(objects: &[(String, Value)], object: &str, field: &str) -> Vec<String> {
    let rule = field.trim_start_matches("spec.").split('.').next().unwrap();
    let (direction, index) = rule.split_once('[').unwrap();
    let index: usize = index.trim_end_matches(']').parse().unwrap();
    let spec = &objects.iter().find(|(k, _)| k == object).unwrap().1["spec"];
    match spec[direction][index]["ports"].as_array() {
        Some(ports) => ports
            .iter()
            .map(|p| {
                let protocol = p["protocol"].as_str().unwrap_or("TCP");
                format!("{protocol}/{}", p["port"])
            })
            .collect(),
        None => PORTS.iter().map(|p| p.to_string()).collect(),
    }
}

/// The pods (workloads) a NetworkPolicy's `podSelector` selects, by `app` label.
fn subject_pods(objects: &[(String, Value)], object: &str) -> Vec<&'static str> {
    let (_, policy) = objects.iter().find(|(k, _)| k == object).unwrap();
    let ns = policy["metadata"]["namespace"].as_str().unwrap();
    let app = &policy["spec"]["podSelector"]["matchLabels"]["app"];
    PARTIES
        .iter()
        .copied()
        .filter(|p| p.starts_with(&format!("{ns}/")))
        .filter(|p| app.is_null() || app.as_str() == p.split('/').nth(1))
        .collect()
}

#[test]
fn every_lint_finding_agrees_with_explain() {
    let dir = support::scratch_dir("lint-explain-app");
    let objects = app();
    let file = write(&dir, "app", &objects);
    let output = netpol(&["lint", "-f", &file, "-o", "json"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let lint: Value = serde_json::from_slice(&output.stdout).unwrap();
    let findings = lint["findings"].as_array().unwrap();
    let before = every_flow(&file);
    let verdicts = |flows: &BTreeMap<(String, String, String), Value>| -> Vec<String> {
        flows
            .iter()
            .map(|((f, t, p), v)| format!("{f} -> {t} {p}: {}", v["verdict"]))
            .collect()
    };
    let mut checked: BTreeMap<String, usize> = BTreeMap::new();
    for finding in findings {
        let rule = finding["rule"].as_str().unwrap();
        let object = finding["object"].as_str().unwrap();
        let field = finding["field"].as_str().unwrap();
        let what = format!("{rule} {object} {field}: {}", finding["message"]);
        match rule {
            "shadowed-rule"
            | "redundant-policy"
            | "default-deny-covered"
            | "selects-nothing"
            | "peer-selects-nothing" => {
                // A policy finding (its field `spec`, or the selector that selects nothing) is
                // checked without the policy; a rule's without the rule.
                let whole = matches!(
                    rule,
                    "redundant-policy" | "default-deny-covered" | "selects-nothing"
                );
                let field = if whole { "spec" } else { field };
                let after = write(&dir, "without", &without(&objects, object, field));
                assert_eq!(verdicts(&every_flow(&after)), verdicts(&before), "{what}");
            }
            "named-port-unresolved" => {
                let rule = rule_name(&objects, object, field);
                for (flow, decision) in &before {
                    for side in ["egress", "ingress"] {
                        let named = policy_of(&decision[side]).as_deref() == Some(object)
                            && decision[side]["policy"]["rule"] == rule.as_str();
                        assert!(
                            !named,
                            "{what}: explain {flow:?} names the rule: {decision}"
                        );
                    }
                }
            }
            "open-to-world" | "open-to-all-pods" => {
                let rule = rule_name(&objects, object, field);
                let sources: Vec<&str> = if finding["rule"] == "open-to-world" {
                    vec![OUTSIDE]
                } else {
                    PARTIES.iter().copied().filter(|p| *p != OUTSIDE).collect()
                };
                for to in subject_pods(&objects, object) {
                    for port in rule_ports(&objects, object, field) {
                        for from in sources.iter().filter(|f| **f != to) {
                            let decision = explain(&file, from, to, &port);
                            assert!(
                                decided_by_or_ahead(&decision["ingress"], object, &rule),
                                "{what}: explain {from} -> {to} {port}: {decision}"
                            );
                        }
                    }
                }
            }
            "egress-open-to-world" | "egress-open-to-all-pods" | "ipblock-covers-pods" => {
                let rule = rule_name(&objects, object, field);
                let targets: Vec<&str> = if finding["rule"] == "egress-open-to-world" {
                    vec![OUTSIDE]
                } else {
                    PARTIES.iter().copied().filter(|p| *p != OUTSIDE).collect()
                };
                for from in subject_pods(&objects, object) {
                    for to in targets.iter().filter(|t| **t != from) {
                        let decision = explain(&file, from, to, "TCP/9999");
                        assert!(
                            decided_by_or_ahead(&decision["egress"], object, &rule),
                            "{what}: explain {from} -> {to}: {decision}"
                        );
                    }
                }
            }
            other => panic!("lint rule {other} has no check against explain here: {what}"),
        }
        *checked.entry(rule.to_owned()).or_default() += 1;
    }
    // The app's mistakes are all found (and so checked), one kind each at least.
    for rule in [
        "shadowed-rule",
        "redundant-policy",
        "default-deny-covered",
        "selects-nothing",
        "peer-selects-nothing",
        "named-port-unresolved",
        "open-to-world",
        "open-to-all-pods",
        "egress-open-to-world",
        "ipblock-covers-pods",
    ] {
        assert!(
            checked.contains_key(rule),
            "no {rule} finding: {findings:#?}"
        );
    }
}
