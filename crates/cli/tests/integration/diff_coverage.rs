//! `netpol diff` never reads "0 flows change" when something changed: a policy widened to every
//! port shows on the probe for every other port, and a workload only AFTER has is compared
//! (its flows in and out) and makes the exit status 1.

use crate::support;

use std::path::Path;

use support::{netpol, stderr, stdout};

const CLUSTER: &str = "\
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Namespace, metadata: {name: app, labels: {kubernetes.io/metadata.name: app}}}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: api, namespace: app}
  spec:
    selector: {matchLabels: {app: api}}
    template:
      metadata: {labels: {app: api}}
      spec: {containers: [{name: c, image: i, ports: [{name: grpc, containerPort: 50051}]}]}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, namespace: app}
  spec:
    selector: {matchLabels: {app: web}}
    template:
      metadata: {labels: {app: web}}
      spec: {containers: [{name: c, image: i}]}
";

fn policy(ports: bool) -> String {
    let ports = if ports {
        "    ports: [{port: grpc}]\n"
    } else {
        ""
    };
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: api, namespace: app}}\n\
         spec:\n  podSelector: {{matchLabels: {{app: api}}}}\n  ingress:\n  \
         - from: [{{podSelector: {{matchLabels: {{app: web}}}}}}]\n{ports}"
    )
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn removing_ports_shows_on_every_other_port() {
    let dir = support::scratch_dir("diff-ports-removed");
    let cluster = write(&dir, "cluster.yaml", CLUSTER);
    let before = write(&dir, "before/api.yaml", &policy(true));
    let after = write(&dir, "after/api.yaml", &policy(false));
    let output = netpol(&["diff", "-f", &cluster, &before, &after]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(
        out.contains("app/web -> app/api TCP/80 (every other port): deny -> allow"),
        "{out}"
    );
    assert!(
        out.contains("app/web -> app/api UDP/80 (every UDP and SCTP port): deny -> allow"),
        "{out}"
    );
    // The port the policy named is unchanged.
    assert!(!out.contains("TCP/50051 (grpc): deny -> allow"), "{out}");
}

#[test]
fn a_new_workload_is_compared_and_is_a_change() {
    let dir = support::scratch_dir("diff-new-workload");
    let before = write(
        &dir,
        "before/all.yaml",
        &format!("{CLUSTER}---\n{}", policy(true)),
    );
    let with_admin = format!(
        "{CLUSTER}- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {{name: admin, namespace: app}}\n  \
         spec:\n    selector: {{matchLabels: {{app: admin}}}}\n    template:\n      \
         metadata: {{labels: {{app: admin}}}}\n      spec: {{containers: [{{name: c, image: i}}]}}\n---\n{}",
        policy(true)
    );
    let after = write(&dir, "after/all.yaml", &with_admin);
    let (before, after) = (
        Path::new(&before)
            .parent()
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned(),
        Path::new(&after)
            .parent()
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned(),
    );
    let output = netpol(&["diff", &before, &after]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(out.contains("new in AFTER"), "{out}");
    assert!(out.contains("app/admin"), "{out}");
    let output = netpol(&["diff", &before, &after, "-o", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["format"], "netpol.diff/v1");
    assert_eq!(json["pods_new"], serde_json::json!(["app/admin"]));
    // Compared: admin is one of the pods both sides are decided on.
    assert_eq!(json["pods_compared"], 3);
    assert_eq!(output.status.code(), Some(1));
}
