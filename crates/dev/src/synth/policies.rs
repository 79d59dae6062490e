//! The namespaces, nodes and policies of a synthetic cluster.
//!
//! Per namespace a default deny, app-internal allows on named ports (the front app from every
//! namespace, each further app from the app in front of it), a monitoring scrape allow and for
//! every third namespace an egress limit to a CIDR. Eight AdminNetworkPolicies (Allow, Deny and
//! Pass) and the BaselineAdminNetworkPolicy cover the cluster.

use std::io;

use serde_json::{json, Value};

use super::emit::ObjectStream;
use super::workloads::{apps, TIERS};
use super::{namespace_labels, Sizes};

pub(crate) fn namespaces(sizes: &Sizes, out: &mut ObjectStream) -> io::Result<()> {
    let monitoring = [
        ("kubernetes.io/metadata.name", "monitoring".to_string()),
        ("team", "team-ops".to_string()),
        ("env", "prod".to_string()),
    ];
    let labelled = (0..sizes.namespaces).map(namespace_labels);
    for labels in labelled.chain([monitoring]) {
        let labels: serde_json::Map<String, Value> = labels
            .into_iter()
            .map(|(k, v)| (k.to_string(), Value::String(v)))
            .collect();
        out.push(&json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": labels["kubernetes.io/metadata.name"], "labels": labels},
        }))?;
    }
    Ok(())
}

pub(crate) fn nodes(sizes: &Sizes, out: &mut ObjectStream) -> io::Result<()> {
    for n in 0..sizes.nodes {
        out.push(&json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"labels": {"topology.kubernetes.io/zone": format!("zone-{}", n % 3)}, "name": format!("node-{n}")},
            "status": {"addresses": [{"address": format!("10.{}.{}.{}", (n + 1) / 65_536, (n + 1) / 256 % 256, (n + 1) % 256), "type": "InternalIP"}]},
        }))?;
    }
    Ok(())
}

fn network_policy(ns: usize, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": format!("ns-{ns}")},
        "spec": spec,
    })
}

/// Per namespace: default deny, one allow per app, a monitoring allow, and for every third
/// namespace an egress limit. Returns the number written.
pub(crate) fn network_policies(sizes: &Sizes, out: &mut ObjectStream) -> io::Result<usize> {
    let mut count = 0;
    for ns in 0..sizes.namespaces {
        out.push(&network_policy(
            ns,
            "default-deny",
            json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
        ))?;
        for (app, tier) in TIERS.iter().enumerate().take(apps(ns)) {
            // The front app takes traffic from every namespace; each further app only from the
            // app in front of it, on its named port.
            let (from, port) = match app {
                0 => (json!({"namespaceSelector": {}}), "http"),
                _ => (
                    json!({"podSelector": {"matchLabels": {"app": format!("app-{}", app - 1)}}}),
                    if *tier == "db" { "db" } else { "http" },
                ),
            };
            out.push(&network_policy(
                ns,
                &format!("allow-app-{app}"),
                json!({
                    "ingress": [{"from": [from], "ports": [{"port": port}]}],
                    "podSelector": {"matchLabels": {"app": format!("app-{app}")}},
                }),
            ))?;
            count += 1;
        }
        out.push(&network_policy(
            ns,
            "allow-monitoring",
            json!({
                "ingress": [{
                    "from": [{
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                        "podSelector": {"matchLabels": {"app": "prometheus"}},
                    }],
                    "ports": [{"port": "metrics"}],
                }],
                "podSelector": {},
            }),
        ))?;
        count += 2;
        if ns % 3 == 0 {
            out.push(&network_policy(
                ns,
                "limit-egress",
                json!({
                    "egress": [
                        {"ports": [{"port": 443}], "to": [{"ipBlock": {"cidr": "192.168.0.0/16", "except": ["192.168.1.0/24"]}}]},
                        {"to": [{"podSelector": {}}]},
                        {"ports": [{"port": 53, "protocol": "UDP"}],
                         "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}]},
                    ],
                    "podSelector": {"matchLabels": {"app": "app-0"}},
                    "policyTypes": ["Egress"],
                }),
            ))?;
            count += 1;
        }
    }
    Ok(count)
}

fn admin(name: &str, priority: u32, subject: Value, rules: Value) -> Value {
    let mut spec = json!({"priority": priority, "subject": subject});
    if let (Value::Object(spec), Value::Object(rules)) = (&mut spec, rules) {
        spec.extend(rules);
    }
    json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha1",
        "kind": "AdminNetworkPolicy",
        "metadata": {"name": name},
        "spec": spec,
    })
}

fn namespace_named(name: &str) -> Value {
    json!({"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": name}}})
}

/// Eight AdminNetworkPolicies and the BaselineAdminNetworkPolicy.
pub(crate) fn admin_policies(out: &mut ObjectStream) -> io::Result<usize> {
    let all = json!({"namespaces": {}});
    out.push(&admin(
        "allow-monitoring",
        5,
        all.clone(),
        json!({"ingress": [{"action": "Allow", "from": [namespace_named("monitoring")], "name": "scrape",
                            "ports": [{"portNumber": {"port": 9090, "protocol": "TCP"}}]}]}),
    ))?;
    out.push(&admin(
        "deny-dev-to-prod",
        10,
        json!({"namespaces": {"matchLabels": {"env": "prod"}}}),
        json!({"ingress": [{"action": "Deny", "from": [{"namespaces": {"matchLabels": {"env": "dev"}}}], "name": "from-dev"}]}),
    ))?;
    out.push(&admin(
        "pass-kube-system",
        15,
        all.clone(),
        json!({"egress": [{"action": "Pass", "name": "dns", "to": [namespace_named("kube-system")]}]}),
    ))?;
    out.push(&admin(
        "deny-metadata-service",
        20,
        all.clone(),
        json!({"egress": [{"action": "Deny", "name": "imds", "to": [{"networks": ["169.254.169.254/32"]}]}]}),
    ))?;
    for team in 0..4 {
        let same_team = json!({"namespaces": {"matchLabels": {"team": format!("team-{team}")}}});
        out.push(&admin(
            &format!("pass-team-{team}"),
            30 + team,
            same_team.clone(),
            json!({"ingress": [{"action": "Pass", "from": [same_team], "name": "same-team"}]}),
        ))?;
    }
    out.push(&json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha1",
        "kind": "BaselineAdminNetworkPolicy",
        "metadata": {"name": "default"},
        "spec": {
            "ingress": [{"action": "Deny", "from": [{"namespaces": {}}], "name": "deny-other-namespaces"}],
            "subject": all,
        },
    }))?;
    Ok(9)
}
