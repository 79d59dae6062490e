//! The authoring tools as a new user meets them on an app of their own (issue 24): one test per
//! way they used to mislead by staying silent or pointing the wrong way, each asserting what is
//! printed now.

use crate::support;

use std::path::{Path, PathBuf};

use support::{netpol, netpol_with_stdin, stderr, stdout};

/// A file of `examples/manifests`.
fn example(name: &str) -> String {
    support::example(&format!("manifests/{name}"))
}

/// A scratch folder with files, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str, files: &[(&str, &str)]) -> Self {
        let dir =
            std::env::temp_dir().join(format!("netpol-findings-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (file, text) in files {
            let path = dir.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        Scratch(dir)
    }

    fn path(&self, file: &str) -> String {
        self.0.join(file).to_str().unwrap().to_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Namespace x with pods a and b (labels `pod: a`, `pod: b`) on node-1.
const PODS_AB: &str = "\
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Namespace, metadata: {name: x}}
- {apiVersion: v1, kind: Node, metadata: {name: node-1}, status: {addresses: [{type: InternalIP, address: 10.0.0.1}]}}
- apiVersion: v1
  kind: Pod
  metadata: {name: a, namespace: x, labels: {pod: a}}
  spec: {nodeName: node-1, containers: [{name: c, ports: [{name: http-api, containerPort: 8080}]}]}
  status: {phase: Running, podIP: 10.1.0.11}
- apiVersion: v1
  kind: Pod
  metadata: {name: b, namespace: x, labels: {pod: b}}
  spec: {nodeName: node-1, containers: [{name: c}]}
  status: {phase: Running, podIP: 10.1.0.12}
";

/// Finding 1: a misplaced or misspelt field used to be dropped, widening the policy.
#[test]
fn a_misplaced_or_misspelt_policy_field_is_refused_naming_file_object_and_field() {
    let dedented_ports = "\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: only-80-from-b, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress:
  - from: [{podSelector: {matchLabels: {pod: b}}}]
  ports: [{port: 80}]
";
    let dedented_selector = "\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-b, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress:
  - from:
    podSelector: {matchLabels: {pod: b}}
";
    let misspelt = "\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: isolate-a, namespace: x}
spec:
  podselector: {matchLabels: {pod: a}}
";
    let scratch = Scratch::new(
        "strict",
        &[
            ("pods.yaml", PODS_AB),
            ("p/ports.yaml", dedented_ports),
            ("p/selector.yaml", dedented_selector),
            ("p/misspelt.yaml", misspelt),
        ],
    );
    let pods = scratch.path("pods.yaml");
    let policies = scratch.path("p");
    let output = netpol(&[
        "explain", "-f", &pods, "-f", &policies, "x/b", "x/a", "TCP/22",
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert_eq!(
        stdout(&output),
        "",
        "nothing is decided on a refused policy"
    );
    let err = stderr(&output);
    for (file, object, field) in [
        (
            "misspelt.yaml",
            "documents[0] (NetworkPolicy x/isolate-a)",
            "spec.podselector",
        ),
        (
            "ports.yaml",
            "documents[0] (NetworkPolicy x/only-80-from-b)",
            "spec.ports",
        ),
        (
            "selector.yaml",
            "documents[0] (NetworkPolicy x/from-b)",
            "spec.ingress[0].podSelector",
        ),
    ] {
        let line = err
            .lines()
            .find(|l| l.contains(file))
            .unwrap_or_else(|| panic!("{file} not named: {err}"));
        assert!(
            line.starts_with(&format!(
                "error: {}/{file}: {object}: {field}: unknown field",
                policies
            )),
            "{line}"
        );
    }

    // --lenient reads them anyway, as before, and says what it ignored.
    let output = netpol(&[
        "explain",
        "-f",
        &pods,
        "-f",
        &policies,
        "--lenient",
        "x/b",
        "x/a",
        "TCP/22",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("spec.ports: unknown field \"ports\""),
        "{}",
        stderr(&output)
    );
    assert!(stderr(&output).contains("(read anyway: --lenient)"));
}

/// Finding 2: `diff` saw only pod-to-pod flows.
#[test]
fn diff_reports_regions_outside_the_cluster_one_line_each() {
    let web_from = |cidr: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n\
             metadata: {{name: web-ingress, namespace: shop}}\n\
             spec:\n  podSelector: {{matchLabels: {{app: web}}}}\n  ingress:\n\
             \x20 - from: [{{ipBlock: {{cidr: {cidr}}}}}]\n    ports: [{{port: 8080}}]\n"
        )
    };
    let scratch = Scratch::new(
        "outside",
        &[
            ("before.yaml", &web_from("0.0.0.0/0")),
            ("after.yaml", &web_from("10.0.0.0/8")),
        ],
    );
    let output = netpol(&[
        "diff",
        "-f",
        &example("cluster.yaml"),
        &scratch.path("before.yaml"),
        &scratch.path("after.yaml"),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(
        out.starts_with(
            "TCP/8080 (http) from 0.0.0.0/0 except 10.0.0.0/8 into shop/web: allow -> deny\n"
        ),
        "{out}"
    );
    assert!(
        out.ends_with(
            "1 flows change (1 newly denied, 0 newly allowed) between 3 pods, 1 nodes and 2 \
             regions outside the cluster on TCP/80 (every other port), TCP/8080 (http), UDP/80 \
             (every UDP and SCTP port)\n"
        ),
        "{out}"
    );
}

/// Finding 3: empty inputs passed as "no change" and empty matrices.
#[test]
fn inputs_with_nothing_to_decide_are_refused() {
    let before = example("policies-before");
    let after = example("policies-after");
    let output = netpol(&["diff", &before, &after]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("BEFORE and AFTER have no pod (with an address) in common"),
        "{}",
        stderr(&output)
    );
    assert!(stderr(&output).contains("warning: no pods in the manifests"));

    let output = netpol(&["matrix", "-f", &after]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stdout(&output), "");
    assert!(stderr(&output).contains("no pods with an address, so no flow to decide"));

    let empty = Scratch::new("empty", &[("notes.txt", "")]);
    let output = netpol(&["check", &empty.path("")]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no scenario files"),
        "{}",
        stderr(&output)
    );

    // A policy that selects no pod is said, and so is an input without policies.
    let stray = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n\
                 metadata: {name: stray, namespace: x}\nspec: {podSelector: {matchLabels: {pod: zz}}}\n";
    let scratch = Scratch::new("stray", &[("pods.yaml", PODS_AB), ("stray.yaml", stray)]);
    let output = netpol(&["matrix", "-f", &scratch.path("")]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("stray.yaml: documents[0] (NetworkPolicy x/stray): NetworkPolicy x/stray selects no pod of the manifests"),
        "{}",
        stderr(&output)
    );
    let output = netpol(&["matrix", "-f", &scratch.path("pods.yaml")]);
    assert!(
        stderr(&output).contains("warning: no policies in the manifests: every flow is allowed")
    );
}

/// Finding 4: any other kind was fatal, and pods had to be running.
#[test]
fn an_app_folder_is_read_with_workloads_as_pods_and_other_kinds_counted() {
    let app = support::example("app");
    let output = netpol(&["matrix", "-f", &app, "--port", "8080"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("warning: skipped 3 objects of kinds netpol does not read: ConfigMap (1), Service (2) (--strict-kinds refuses them)"),
        "{err}"
    );
    assert!(
        err.contains("(CiliumNetworkPolicy shop/web-get-only): spec.ingress[0].toPorts[0].rules: unsupported"),
        "{err}"
    );
    assert!(err.contains("the policy is skipped"), "{err}");
    // One pod per workload, addresses assigned and marked; the L7 policy did not apply.
    assert_eq!(
        stdout(&output),
        "\
TCP/8080 (http): 13 of 18 flows allowed
  from \\ to                          1  2  3  4  5  6
  1 ops/prober *                     .  X  .  -  .  .
  2 shop/db *                        .  .  .  -  .  .
  3 shop/web *                       .  X  .  -  .  .
  4 node assigned-node               -  -  -  -  -  -
  5 0.0.0.0/0 except 192.168.0.0/16  .  X  .  -  -  -
  6 192.168.0.0/16                   .  X  X  -  -  -

. allowed (a pod to itself always: it is not subject to policy), X denied, - no flow (a node or outside address to itself; between nodes and outside addresses; a pod and its own node)
* the pod of a workload's template, its address and node assigned (--pod-cidr, --assign-nodes)
"
    );
    let output = netpol(&["explain", "-f", &app, "shop/web", "shop/db", "TCP/pg"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with(
            "shop/web -> shop/db TCP/5432 (pg): allow\n\
             \x20 source:      pod shop/web (10.244.253.115, assigned), the pod of Deployment shop/web\n\
             \x20 destination: pod shop/db (10.244.9.69, assigned), the pod of StatefulSet shop/db\n"
        ),
        "{}",
        stdout(&output)
    );

    let output = netpol(&["matrix", "-f", &app, "--strict-kinds"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("unsupported kind \"Service\""),
        "{}",
        stderr(&output)
    );

    // `helm template ... | netpol matrix -f -`
    let mut stream = String::new();
    for file in ["namespaces.yaml", "web.yaml", "db.yaml", "policies.yaml"] {
        stream.push_str(&std::fs::read_to_string(Path::new(&app).join(file)).unwrap());
        stream.push_str("\n---\n");
    }
    let output = netpol_with_stdin(
        &[
            "matrix", "-f", "-", "-o", "json", "--port", "5432", "--flows",
        ],
        &stream,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let matrix = &json["matrices"][0];
    let labels: Vec<&str> = json["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["shop/db", "shop/web"]);
    assert_eq!(matrix["port_names"], serde_json::json!(["pg"]));
    let verdicts: Vec<(String, String, String)> = matrix["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["from"].as_str().unwrap().to_owned(),
                f["to"].as_str().unwrap().to_owned(),
                f["verdict"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            ("shop/db".into(), "shop/db".into(), "allow".into()),
            ("shop/db".into(), "shop/web".into(), "deny".into()),
            ("shop/web".into(), "shop/db".into(), "allow".into()),
            ("shop/web".into(), "shop/web".into(), "allow".into()),
        ]
    );
}

/// Finding 5: `explain` named one rule and hid the chain behind it.
#[test]
fn explain_shows_every_tier_the_isolating_policies_and_the_except() {
    let policies = "\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny, namespace: x}
spec: {podSelector: {}, policyTypes: [Ingress]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: only-80-from-b, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress:
  - from: [{podSelector: {matchLabels: {pod: b}}}]
    ports: [{port: 80}]
  - from: [{ipBlock: {cidr: 0.0.0.0/0, except: [203.0.113.0/24]}}]
    ports: [{port: 443}]
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: pass-monitoring}
spec:
  priority: 5
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: x}}}
  ingress:
  - {name: pass-b, action: Pass, from: [{pods: {namespaceSelector: {}, podSelector: {matchLabels: {pod: b}}}}]}
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: allow-b}
spec:
  priority: 10
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: x}}}
  ingress:
  - {name: allow-b, action: Allow, from: [{pods: {namespaceSelector: {}, podSelector: {matchLabels: {pod: b}}}}]}
";
    let scratch = Scratch::new(
        "chain",
        &[("pods.yaml", PODS_AB), ("policies.yaml", policies)],
    );
    let (pods, policies) = (scratch.path("pods.yaml"), scratch.path("policies.yaml"));
    let output = netpol(&[
        "explain", "-f", &pods, "-f", &policies, "x/b", "x/a", "TCP/22",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "x/b -> x/a TCP/22: deny
  source:      pod x/b (10.1.0.12)
  destination: pod x/a (10.1.0.11)
  egress:      allow: no rule matched and nothing isolates the pod: default allow
    Admin tier: no rule matched and nothing isolates the pod
    NetworkPolicy tier: no rule matched and nothing isolates the pod
    Baseline tier: no rule matched and nothing isolates the pod
  ingress:     deny: no Normal-tier rule matched and NetworkPolicy x/default-deny isolates the pod
    Admin tier: pass by AdminNetworkPolicy pass-monitoring rule pass-b (priority 5): the rest of the tier is skipped, including allow by AdminNetworkPolicy allow-b rule allow-b (priority 10)
    NetworkPolicy tier: no rule matched; isolated by NetworkPolicy x/default-deny, NetworkPolicy x/only-80-from-b: deny
    Baseline tier: not reached
"
    );

    // An outside address is shown as given, with its region and the except that holds it.
    let output = netpol(&[
        "explain",
        "-f",
        &pods,
        "-f",
        &policies,
        "203.0.113.9",
        "x/a",
        "TCP/443",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(
        out.contains(
            "  source:      address 203.0.113.9, outside the cluster (region 203.0.113.0/24)\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("      203.0.113.9 is in except 203.0.113.0/24 of NetworkPolicy x/only-80-from-b rule ingress[1] (cidr 0.0.0.0/0), so that rule does not match\n"),
        "{out}"
    );

    // A named port of the destination, and a workload's name, are accepted.
    let output = netpol(&[
        "explain",
        "-f",
        &pods,
        "-f",
        &policies,
        "x/b",
        "x/a",
        "TCP/http-api",
        "-o",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["port"], 8080);
    assert_eq!(json["port_name"], "http-api");
    assert_eq!(json["chain"]["ingress"][0]["outcome"], "passed");
    assert_eq!(
        json["chain"]["ingress"][1]["isolating"][0]["name"],
        "default-deny"
    );
}

/// Finding 5: equal-priority admin policies with different actions are settled by name: said.
#[test]
fn explain_warns_of_an_equal_priority_tie() {
    let tie = |name: &str, action: &str| {
        format!(
            "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\n\
             metadata: {{name: {name}}}\nspec:\n  priority: 7\n  subject: {{namespaces: {{}}}}\n\
             \x20 ingress: [{{name: r, action: {action}, from: [{{namespaces: {{}}}}]}}]\n"
        )
    };
    let scratch = Scratch::new(
        "tie",
        &[
            ("pods.yaml", PODS_AB),
            ("a.yaml", &tie("a-allow", "Allow")),
            ("b.yaml", &tie("b-deny", "Deny")),
        ],
    );
    let output = netpol(&["explain", "-f", &scratch.path(""), "x/b", "x/a", "TCP/80"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains(
            "  note: AdminNetworkPolicy a-allow rule r and AdminNetworkPolicy b-deny rule r both \
             match at priority 7 with different actions (allow, deny); upstream leaves their \
             order undefined, netpol orders equal priorities by policy name, so a-allow decides\n"
        ),
        "{}",
        stdout(&output)
    );
}

/// Finding 6: errors that pointed the wrong way.
#[test]
fn errors_point_at_the_cause() {
    let odd_pods = "\
- apiVersion: v1
  kind: Pod
  metadata: {name: host, namespace: x}
  spec: {nodeName: node-1, hostNetwork: true, containers: []}
  status: {phase: Running, podIP: 10.0.0.1}
- apiVersion: v1
  kind: Pod
  metadata: {name: done, namespace: x}
  spec: {nodeName: node-1, containers: []}
  status: {phase: Succeeded, podIP: 10.1.0.99}
";
    let scratch = Scratch::new("errors", &[("pods.yaml", PODS_AB), ("odd.yaml", odd_pods)]);
    let all = scratch.path("");
    let explain =
        |from: &str, to: &str, port: &str| netpol(&["explain", "-f", &all, from, to, port]);
    let err = stderr(&explain("x/host", "x/a", "TCP/80"));
    assert!(
        err.contains(
            "pod x/host uses the host network (spec.hostNetwork): its address 10.0.0.1 is node-1's"
        ),
        "{err}"
    );
    let err = stderr(&explain("x/done", "x/a", "TCP/80"));
    assert!(
        err.contains("pod x/done has finished (status.phase Succeeded)"),
        "{err}"
    );
    // Manifests are not "the scenario", and a name that is not there gets the ones that are.
    let err = stderr(&explain("x/aa", "x/a", "TCP/80"));
    assert!(
        err.contains("no pod or workload x/aa in the manifests; did you mean x/a?"),
        "{err}"
    );

    // A missing port: one line saying what is missing, not clap's usage.
    let output = netpol(&["explain", "-f", &all, "x/b", "x/a"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).starts_with(
            "error: with -f or --cluster, give FROM TO PROTO/PORT (2 given: x/b x/a)\nusage: netpol explain"
        ),
        "{}",
        stderr(&output)
    );

    // A wrong -f path in diff is reported once.
    let output = netpol(&[
        "diff",
        "-f",
        "/no/such/cluster.yaml",
        &example("policies-before"),
        &example("policies-after"),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output).matches("/no/such/cluster.yaml").count(),
        1,
        "{}",
        stderr(&output)
    );

    // A named port in a scenario flow says scenarios take numbers.
    let scenario = "name: named\nobjects: []\nexpect:\n- flows:\n  - {from: x/a, to: x/b, protocol: TCP, port: http, verdict: allow}\n";
    let scenarios = Scratch::new("named-port", &[("s.yaml", scenario)]);
    let output = netpol(&["check", &scenarios.path("s.yaml")]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains(
            "expect[0].flows[0].port: `http` is not a port number: scenarios give ports by number"
        ),
        "{}",
        stderr(&output)
    );

    // Pod to its own node: undefined upstream, and explain says so.
    let out = stdout(&explain("x/a", "10.0.0.1", "TCP/10250"));
    assert!(out.contains("note: x/a runs on node node-1: Kubernetes (and the scenario format) leave traffic between a pod and its own node undefined"), "{out}");
}

/// Readable at size: replicas collapse into one row per workload, and `diff` prints one line
/// per pair of workloads.
#[test]
fn matrices_and_diffs_read_by_workload() {
    let mut cluster = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for (name, ip) in [
        ("web-abc-1", "10.2.0.1"),
        ("web-abc-2", "10.2.0.2"),
        ("web-abc-3", "10.2.0.3"),
    ] {
        cluster.push_str(&format!(
            "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: {name}\n    namespace: shop\n\
             \x20   labels: {{app: web, pod-template-hash: abc}}\n\
             \x20   ownerReferences: [{{kind: ReplicaSet, name: web-abc, controller: true}}]\n\
             \x20 spec: {{containers: [{{name: c}}]}}\n  status: {{phase: Running, podIP: {ip}}}\n"
        ));
    }
    cluster.push_str(
        "- apiVersion: v1\n  kind: Pod\n  metadata: {name: db-0, namespace: shop, labels: {app: db}}\n\
         \x20 spec: {containers: [{name: c, ports: [{name: pg, containerPort: 5432}]}]}\n\
         \x20 status: {phase: Running, podIP: 10.2.0.9}\n",
    );
    let db_from = |app: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: db, namespace: shop}}\n\
             spec:\n  podSelector: {{matchLabels: {{app: db}}}}\n  ingress:\n\
             \x20 - from: [{{podSelector: {{matchLabels: {{app: {app}}}}}}}]\n    ports: [{{port: pg}}]\n"
        )
    };
    let scratch = Scratch::new(
        "workloads",
        &[
            ("cluster.yaml", &cluster),
            ("before/db.yaml", &db_from("web")),
            ("after/db.yaml", &db_from("api")),
        ],
    );
    let (cluster, before, after) = (
        scratch.path("cluster.yaml"),
        scratch.path("before"),
        scratch.path("after"),
    );
    let output = netpol(&["matrix", "-f", &cluster, "-f", &before, "--port", "5432"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "\
TCP/5432 (pg): 19 of 20 flows allowed
  from \\ to            1  2  3
  1 shop/db-0          .  .  .
  2 shop/web (3 pods)  .  .  .
  3 0.0.0.0/0          X  .  -

. allowed (a pod to itself always: it is not subject to policy), X denied, - no flow (a node or outside address to itself; between nodes and outside addresses; a pod and its own node)
"
    );
    let output = netpol(&["matrix", "-f", &cluster, "-f", &before, "--per-pod"]);
    assert!(
        stdout(&output).contains("  4 shop/web-abc-3  "),
        "{}",
        stdout(&output)
    );

    let output = netpol(&["diff", "-f", &cluster, &before, &after]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let out = stdout(&output);
    // AFTER admits pods labelled app=api, which no manifest holds: their stand-in shows it.
    assert!(
        out.starts_with(
            "shop/(pods {app=api}) -> shop/db-0 TCP/5432 (pg): deny -> allow\n  before: \
             ingress: deny: no Normal-tier rule matched and NetworkPolicy shop/db isolates the \
             pod\n  after:  egress: allow: no rule matched and nothing isolates the pod: default \
             allow; ingress: allow by NetworkPolicy shop/db rule ingress[0] (Normal tier)\n\
             shop/web (3 pods) -> shop/db-0 TCP/5432 (pg): allow -> deny\n"
        ),
        "{out}"
    );
    assert_eq!(out.matches(" -> deny\n").count(), 1, "{out}");
    assert!(
        out.contains(
            "4 flows change (3 newly denied, 1 newly allowed) between 4 pods, 1 stand-ins"
        ),
        "{out}"
    );
}
