//! One folder, one reading: `check`, the authoring tools and the agent's `--from-dir` read the
//! same kinds the same way. Workloads give pods placed alike (the same address, the same node),
//! other kinds are skipped and counted in the same words, and a node can be named.

use crate::support;

use std::path::Path;

use support::{netpol, scratch_dir, stderr, stdout, NODE};

/// A repository's folder: a node, two workloads and a job, a Service, and a policy admitting
/// the web workload to the database.
const APP: &str = "apiVersion: v1
kind: Node
metadata: {name: node-1}
status: {addresses: [{type: InternalIP, address: 192.168.1.10}]}
---
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: web:1, ports: [{name: http, containerPort: 8080}]}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: shop}
spec:
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: pg:16, ports: [{name: pg, containerPort: 5432}]}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: report, namespace: shop}
spec:
  schedule: '@daily'
  jobTemplate:
    spec:
      template:
        metadata: {labels: {app: report}}
        spec: {containers: [{name: report, image: report:1}]}
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: shop}
spec: {selector: {app: db}, ports: [{port: 5432}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db-from-web, namespace: shop}
spec:
  podSelector: {matchLabels: {app: db}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: web}}}]
    ports: [{port: pg}]
";

fn app(test: &str) -> std::path::PathBuf {
    let dir = scratch_dir(test);
    std::fs::write(dir.join("app.yaml"), APP).unwrap();
    dir
}

fn agent_once(dir: &Path, probe: &str) -> std::process::Output {
    let dir = dir.to_str().unwrap();
    let args = ["agent", "--once", "--node", NODE, "--from-dir", dir];
    let args: Vec<&str> = args
        .into_iter()
        .chain(["--matrix", "--probe", probe])
        .collect();
    std::process::Command::new(env!("CARGO_BIN_EXE_netpol"))
        .args(&args)
        .env("RUST_LOG", "info")
        .output()
        .expect("the netpol binary runs")
}

/// The address `explain` gives `pod` (`pod shop/web (10.244.1.2, assigned), ...`).
fn explained_address(dir: &Path, pod: &str) -> String {
    let output = netpol(&["explain", "-f", dir.to_str().unwrap(), pod, pod, "TCP/1"]);
    let text = stdout(&output);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("source:"))
        .unwrap_or_else(|| panic!("{text}{}", stderr(&output)));
    let start = line.find('(').unwrap() + 1;
    let end = line.find(", assigned").unwrap_or_else(|| panic!("{line}"));
    line[start..end].to_owned()
}

#[test]
fn the_agent_reads_a_folder_of_workloads_as_the_tools_do() {
    let dir = app("one-loader-agent");
    // The tools: three pods from workloads, on the folder's node, the Service skipped.
    let output = netpol(&["matrix", "-f", dir.to_str().unwrap(), "--port", "5432"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let skipped = "skipped 1 objects of kinds netpol does not read: Service (1)";
    assert!(stderr(&output).contains(skipped), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("shop/report *"),
        "{}",
        stdout(&output)
    );

    // A policy naming the web pod by the address the tools gave it: the agent enforces it only
    // if it gave the pod the same address.
    let web = explained_address(&dir, "shop/web");
    std::fs::write(
        dir.join("by-address.yaml"),
        format!(
            "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{name: db-from-web-address, namespace: shop}}
spec:
  podSelector: {{matchLabels: {{app: db}}}}
  ingress:
  - from: [{{ipBlock: {{cidr: {web}/32}}}}]
    ports: [{{port: 6000}}]
"
        ),
    )
    .unwrap();

    let output = agent_once(&dir, "TCP/6000");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("3 local endpoints"), "{text}");
    assert!(stderr(&output).contains(skipped), "{}", stderr(&output));
    // Rows are sources: web reaches db on TCP/6000, the report job does not.
    let matrix = &text[text.find("TCP/6000 between").expect("a matrix")..];
    let row = |pod: &str| {
        matrix
            .lines()
            .find(|l| l.trim_start().starts_with(pod))
            .unwrap_or_else(|| panic!("no row {pod} in {text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    // Columns: shop/db, shop/report, shop/web.
    assert_eq!(row("shop/web")[1], ".", "{text}");
    assert_eq!(row("shop/report")[1], "X", "{text}");

    // The tools agree, flow by flow.
    let dir = dir.to_str().unwrap();
    for (from, verdict) in [("shop/web", "allow"), ("shop/report", "deny")] {
        let output = netpol(&["explain", "-f", dir, from, "shop/db", "TCP/6000"]);
        let first = stdout(&output)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned();
        assert!(first.ends_with(verdict), "{first}");
    }
}

#[test]
fn a_workload_keeps_its_address_when_others_come_and_the_pod_cidr_says_where() {
    let dir = app("one-loader-stable");
    let web = explained_address(&dir, "shop/web");
    assert!(web.starts_with("10.244."), "{web}");
    let mut more = APP.to_owned();
    for i in 0..20 {
        more.push_str(&format!(
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: extra-{i}, namespace: shop}}\n\
             spec: {{template: {{metadata: {{labels: {{app: extra-{i}}}}}, spec: {{containers: []}}}}}}\n"
        ));
    }
    std::fs::write(dir.join("app.yaml"), more).unwrap();
    assert_eq!(explained_address(&dir, "shop/web"), web);

    let output = netpol(&[
        "explain",
        "-f",
        dir.to_str().unwrap(),
        "--pod-cidr",
        "172.20.0.0/24",
        "shop/web",
        "shop/db",
        "TCP/5432",
    ]);
    assert!(
        stdout(&output).contains("(172.20.0."),
        "{}",
        stdout(&output)
    );
}

#[test]
fn explain_takes_a_node_by_name_and_admits_its_probes_to_a_workload_pod() {
    let dir = app("one-loader-node");
    let dir = dir.to_str().unwrap();
    let output = netpol(&["explain", "-f", dir, "node-1", "shop/db", "TCP/5432"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.starts_with("node-1 -> shop/db TCP/5432: allow"),
        "{text}"
    );
    assert!(
        text.contains("source:      node node-1 (192.168.1.10)"),
        "{text}"
    );
    assert!(text.contains("shop/db runs on node node-1"), "{text}");

    let output = netpol(&["explain", "-f", dir, "node-9", "shop/db", "TCP/5432"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no node node-9 (nodes: node-1)"),
        "{}",
        stderr(&output)
    );

    // Spread over other nodes on request: no longer this node's pod.
    let output = netpol(&[
        "explain",
        "-f",
        dir,
        "--assign-nodes",
        "node-2",
        "node-1",
        "shop/db",
        "TCP/5432",
    ]);
    assert!(
        stdout(&output).starts_with("node-1 -> shop/db TCP/5432: deny"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn check_reads_workloads_in_a_scenario() {
    let dir = scratch_dir("one-loader-check");
    let mut objects = String::new();
    for doc in APP.split("---\n") {
        objects.push_str("- ");
        objects.push_str(&doc.trim_end().replace('\n', "\n  "));
        objects.push('\n');
    }
    let scenario = format!(
        "name: workloads
description: a Deployment and a StatefulSet, checked as their pods
objects:
{objects}expect:
- flows:
  - {{from: shop/web, to: shop/db, protocol: TCP, port: 5432, verdict: allow}}
  - {{from: shop/report, to: shop/db, protocol: TCP, port: 5432, verdict: deny}}
"
    );
    let file = dir.join("workloads.yaml");
    std::fs::write(&file, scenario).unwrap();
    // Scenario files are tests: the Service is refused there, as any kind netpol does not read.
    let output = netpol(&["check", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("unsupported kind \"Service\""),
        "{}",
        stderr(&output)
    );
    assert!(
        !stderr(&output).contains("Deployment"),
        "{}",
        stderr(&output)
    );

    let without_service = std::fs::read_to_string(&file)
        .unwrap()
        .replace("- apiVersion: v1\n  kind: Service\n  metadata: {name: db, namespace: shop}\n  spec: {selector: {app: db}, ports: [{port: 5432}]}\n", "");
    std::fs::write(&file, without_service).unwrap();
    let output = netpol(&["check", file.to_str().unwrap()]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
    assert!(
        stdout(&output).contains("2 flows: 0 mismatches"),
        "{}",
        stdout(&output)
    );
}

/// On the simulated HCN one ACL of the database's endpoint admits the node's address and the web
/// pod's on every port (the node's probes, and a policy admitting web on every port): the reason
/// given for each is the endpoint's MapState rule that decided it, not that ACL's first source.
#[test]
fn hcn_sim_reasons_name_the_rule_that_decided_each_remote() {
    let dir = app("one-loader-hcn-reason");
    std::fs::write(
        dir.join("all-ports.yaml"),
        "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db-all-from-web, namespace: shop}
spec:
  podSelector: {matchLabels: {app: db}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: web}}}]
",
    )
    .unwrap();
    let dir = dir.to_str().unwrap();
    for (from, rule) in [
        (
            "shop/web",
            "allow by NetworkPolicy shop/db-all-from-web rule ingress[0]",
        ),
        ("node-1", "allow by netpol node-probes"),
    ] {
        let args = [
            "explain",
            "-f",
            dir,
            "--datapath",
            "hcn-sim",
            from,
            "shop/db",
            "TCP/7000",
        ];
        let output = netpol(&args);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let ingress = stdout(&output)
            .lines()
            .find(|l| l.trim_start().starts_with("ingress:"))
            .map(str::to_owned)
            .unwrap_or_default();
        assert!(ingress.contains(rule), "{from}: {}", stdout(&output));
    }
}
