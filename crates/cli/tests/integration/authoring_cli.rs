//! The policy author's tools on manifests, run as a user runs them: `matrix` and `explain` on
//! `-f` files, folders and stdin, `diff` between two sets of policies, and every output form
//! (text, JSON, JUnit, HTML in a real headless chromium).

use crate::support;

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use support::{netpol, netpol_with_stdin, stderr, stdout};

/// The example manifests (`examples/manifests`), or the broken ones among the test fixtures.
fn manifests(name: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = if name == "broken" {
        root.join("tests/fixtures/manifests")
    } else {
        root.join("../../examples/manifests")
    };
    dir.join(name).to_str().unwrap().to_owned()
}

fn scenario(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/scenarios")
        .join(name)
        .to_str()
        .unwrap()
        .to_owned()
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", stdout(output)))
}

/// The matrix the shop cluster has after its proposed policies, on TCP/8080 and the named
/// port `pg` (5432), as scenario `expect` items (`--output scenario`).
const AFTER_MATRIX: &str = "\
- protocol: TCP
  port: 80
  matrix: |
    -           ops/prober  shop/db     shop/web
    ops/prober  .           X           X
    shop/db     .           .           X
    shop/web    .           X           .
- protocol: TCP
  port: 5432
  matrix: |
    -           ops/prober  shop/db     shop/web
    ops/prober  .           X           X
    shop/db     .           .           X
    shop/web    .           .           .
- protocol: TCP
  port: 8080
  matrix: |
    -           ops/prober  shop/db     shop/web
    ops/prober  .           X           X
    shop/db     .           .           .
    shop/web    .           X           .
- protocol: UDP
  port: 80
  matrix: |
    -           ops/prober  shop/db     shop/web
    ops/prober  .           X           X
    shop/db     .           .           X
    shop/web    .           X           .
";

#[test]
fn matrix_reads_a_kubectl_list_and_a_policy_folder() {
    let output = netpol(&[
        "matrix",
        "-f",
        &manifests("cluster.yaml"),
        "-f",
        &manifests("policies-after"),
        "-o",
        "scenario",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), AFTER_MATRIX);
}

/// The default text output: numbered grids, nodes and the outside as rows and columns, named
/// ports by name and number.
#[test]
fn matrix_text_is_a_numbered_grid_with_nodes_and_the_outside() {
    let output = netpol(&[
        "matrix",
        "-f",
        &manifests("cluster.yaml"),
        "-f",
        &manifests("policies-after"),
        "--port",
        "8080",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // shop/web-from-shop admits every pod of shop: a new one (the stand-in) may reach web, and
    // is held to db-from-web as any pod of shop would be.
    assert_eq!(
        stdout(&output),
        "\
TCP/8080 (http): 14 of 20 flows allowed
  from \\ to              1  2  3  4  5  6
  1 ops/prober           .  .  X  X  -  .
  2 shop/(other pods) ~  .  -  X  .  -  .
  3 shop/db              .  .  .  .  -  .
  4 shop/web             .  .  X  .  -  .
  5 node node-1          -  -  -  -  -  -
  6 0.0.0.0/0            .  .  X  X  -  -

. allowed (a pod to itself always: it is not subject to policy), X denied, - no flow (a node or outside address to itself; between nodes and outside addresses; a pod and its own node)
~ a stand-in for the pods a policy's peer can select that the input does not hold (other pods of a namespace, pods of any other namespace, pods labelled as a selector asks): placed as a workload's pod; its flows among the pods it stands for are not shown
"
    );
}

#[test]
fn matrix_reads_manifests_from_stdin() {
    let list = std::fs::read_to_string(manifests("cluster.yaml")).unwrap();
    let output = netpol_with_stdin(
        &[
            "matrix",
            "-f",
            "-",
            "-f",
            &manifests("policies-after"),
            "-o",
            "scenario",
        ],
        &list,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), AFTER_MATRIX);
}

#[test]
fn a_bad_manifest_is_named_by_file_object_and_field() {
    let output = netpol(&[
        "matrix",
        "-f",
        &manifests("cluster.yaml"),
        "-f",
        &manifests("broken"),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stdout(&output).is_empty(),
        "nothing is decided on a broken input"
    );
    let err = stderr(&output);
    assert!(
        err.contains(
            "broken/bad.yaml: documents[0] (NetworkPolicy shop/bad-port): \
             spec.ingress[0].ports[0].endPort: endPort 70 is below port 80"
        ),
        "{err}"
    );
}

#[test]
fn scenario_objects_may_be_a_kind_list() {
    // The same cluster as `mismatch.yaml`, its objects wrapped in a `kind: List`.
    let dir = std::env::temp_dir().join(format!("netpol-list-scenario-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("listed.yaml");
    let original = std::fs::read_to_string(scenario("mismatch.yaml")).unwrap();
    let objects_at = original.find("objects:\n").unwrap() + "objects:\n".len();
    let expect_at = original.find("expect:").unwrap();
    let indented: String = original[objects_at..expect_at]
        .lines()
        .map(|l| format!("    {l}\n"))
        .collect();
    let listed =
        format!("name: listed\nobjects:\n- apiVersion: v1\n  kind: List\n  items:\n{indented}");
    std::fs::write(&file, listed).unwrap();
    let output = netpol(&[
        "matrix",
        file.to_str().unwrap(),
        "--port",
        "80",
        "-o",
        "scenario",
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).ends_with("    -    x/a  x/b\n    x/a  .    X\n    x/b  .    .\n"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn explain_reads_manifests_and_prints_json() {
    let cluster = manifests("cluster.yaml");
    let after = manifests("policies-after");
    let output = netpol(&[
        "explain",
        "-f",
        &cluster,
        "-f",
        &after,
        "ops/prober",
        "shop/web",
        "TCP/8080",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(
        out.starts_with("ops/prober -> shop/web TCP/8080: deny\n"),
        "{out}"
    );
    assert!(
        out.contains(
            "ingress:     deny: no Normal-tier rule matched and NetworkPolicy \
             shop/web-from-shop isolates the pod"
        ),
        "{out}"
    );

    let output = netpol(&[
        "explain", "-f", &cluster, "-f", &after, "shop/db", "shop/web", "TCP/8080", "-o", "json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let flow = json(&output);
    assert_eq!(flow["verdict"], "allow");
    assert_eq!(flow["source"], "pod shop/db (10.244.1.11)");
    assert_eq!(flow["ingress"]["reason"], "rule");
    assert_eq!(flow["ingress"]["tier"], "Normal");
    assert_eq!(
        flow["ingress"]["policy"],
        serde_json::json!({"kind": "NetworkPolicy", "namespace": "shop", "name": "web-from-shop", "rule": "ingress[0]"})
    );
    assert_eq!(flow["egress"]["reason"], "default");
}

#[test]
fn explain_without_a_file_or_manifests_is_a_usage_error() {
    let output = netpol(&["explain", "x/a", "x/b", "TCP/80"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("give FILE FROM TO PROTO/PORT, or -f PATH"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn diff_names_each_changed_flow_with_its_rule_before_and_after() {
    let output = netpol(&[
        "diff",
        "-f",
        &manifests("cluster.yaml"),
        &manifests("policies-before"),
        &manifests("policies-after"),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let out = stdout(&output);
    let default = "no rule matched and nothing isolates the pod: default allow";
    let isolated = "ingress: deny: no Normal-tier rule matched and NetworkPolicy \
                    shop/web-from-shop isolates the pod";
    // Every port web-from-shop does not admit is newly denied: the other TCP ports and every
    // UDP and SCTP port too, each shown by the probe that stands for them.
    // The stand-in for other pods of shop (which web-from-shop's peer selects) is newly denied
    // where shop/db is: on every port but http.
    let expected: String = [
        ("ops/prober -> shop/web TCP/80 (every other port)", true),
        ("shop/(other pods) -> shop/web TCP/80 (every other port)", true),
        ("shop/db -> shop/web TCP/80 (every other port)", true),
        ("TCP/80 (every other port) from 0.0.0.0/0 into shop/web", false),
        ("ops/prober -> shop/web TCP/5432 (pg)", true),
        ("shop/(other pods) -> shop/web TCP/5432 (pg)", true),
        ("shop/db -> shop/web TCP/5432 (pg)", true),
        ("TCP/5432 (pg) from 0.0.0.0/0 into shop/web", false),
        ("ops/prober -> shop/web TCP/8080 (http)", true),
        ("TCP/8080 (http) from 0.0.0.0/0 into shop/web", false),
        ("ops/prober -> shop/web UDP/80 (every UDP and SCTP port)", true),
        ("shop/(other pods) -> shop/web UDP/80 (every UDP and SCTP port)", true),
        ("shop/db -> shop/web UDP/80 (every UDP and SCTP port)", true),
        ("UDP/80 (every UDP and SCTP port) from 0.0.0.0/0 into shop/web", false),
    ]
    .iter()
    .map(|(flow, from_pod)| {
        let egress = if *from_pod {
            format!("egress: allow: {default}; ")
        } else {
            String::new()
        };
        format!(
            "{flow}: allow -> deny\n  before: {egress}ingress: allow: {default}\n  after:  {isolated}\n"
        )
    })
    .collect();
    assert_eq!(
        out,
        format!(
            "{expected}stand-ins (for pods the inputs do not hold that a policy's peer can \
             select), compared as pods: shop/(other pods)\n14 flows change (14 newly denied, 0 \
             newly allowed) between 3 pods, 1 stand-ins, 1 nodes and 1 regions outside the cluster on TCP/80 (every other port), TCP/5432 \
             (pg), TCP/8080 (http), UDP/80 (every UDP and SCTP port)\n"
        )
    );
}

#[test]
fn diff_narrows_to_a_port_and_prints_json_per_pod() {
    let output = netpol(&[
        "diff",
        "-f",
        &manifests("cluster.yaml"),
        &manifests("policies-before"),
        &manifests("policies-after"),
        "--port",
        "8080",
        "--output",
        "json",
        "--per-pod",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let diff = json(&output);
    assert_eq!(diff["probes"], serde_json::json!(["TCP/8080"]));
    assert_eq!(diff["pods_compared"], 3);
    assert_eq!(diff["outside_regions"], serde_json::json!(["0.0.0.0/0"]));
    let changes = diff["pod_changes"].as_array().unwrap();
    assert_eq!(changes.len(), 2, "{diff:#}");
    assert_eq!(
        (
            &changes[1]["from"],
            &changes[1]["from_kind"],
            &changes[1]["to_workload"]
        ),
        (&"0.0.0.0/0".into(), &"outside".into(), &"shop/web".into())
    );
    let change = &changes[0];
    assert_eq!(
        (&change["from"], &change["to"], &change["port"]),
        (&"ops/prober".into(), &"shop/web".into(), &8080.into())
    );
    assert_eq!(change["before"]["verdict"], "allow");
    assert_eq!(change["after"]["verdict"], "deny");
    assert_eq!(change["after"]["ingress"]["reason"], "isolated");
    assert_eq!(
        change["after"]["ingress"]["policy"]["name"],
        "web-from-shop"
    );
}

#[test]
fn diff_of_equal_policies_changes_nothing_and_a_broken_side_is_exit_2() {
    let cluster = manifests("cluster.yaml");
    let before = manifests("policies-before");
    let output = netpol(&["diff", "-f", &cluster, &before, &before]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "0 flows change (0 newly denied, 0 newly allowed) between 3 pods, 1 nodes and 1 \
         regions outside the cluster on TCP/80 (every other port), TCP/5432 (pg), UDP/80 \
         (every UDP and SCTP port)\n"
    );

    let output = netpol(&["diff", "-f", &cluster, &before, &manifests("broken")]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("bad.yaml"), "{}", stderr(&output));
}

#[test]
fn diff_compares_two_scenario_files() {
    // mismatch.yaml isolates x/b; a copy without its policy allows everything.
    let dir = std::env::temp_dir().join(format!("netpol-diff-scenarios-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let original = std::fs::read_to_string(scenario("mismatch.yaml")).unwrap();
    let open = original[..original.find("- apiVersion: networking.k8s.io/v1").unwrap()].to_owned();
    let open_file = dir.join("open.yaml");
    std::fs::write(&open_file, open).unwrap();
    let output = netpol(&[
        "diff",
        open_file.to_str().unwrap(),
        &scenario("mismatch.yaml"),
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(
        out.starts_with("x/a -> x/b TCP/80 (every TCP, UDP and SCTP port): allow -> deny\n"),
        "{out}"
    );
    assert!(
        out.ends_with(
            "2 flows change (2 newly denied, 0 newly allowed) between 2 pods, 0 nodes and 1 \
             regions outside the cluster on TCP/80 (every TCP, UDP and SCTP port)\n"
        ),
        "{out}"
    );
}

#[test]
fn matrix_json_has_one_flow_per_defined_cell() {
    let output = netpol(&[
        "matrix",
        "--flows",
        "-f",
        &manifests("cluster.yaml"),
        "-f",
        &manifests("policies-after"),
        "-o",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let json = json(&output);
    let matrices = json["matrices"].as_array().unwrap().clone();
    // TCP/80 (every other port), TCP/5432, TCP/8080, UDP/80 (every UDP and SCTP port).
    assert_eq!(matrices.len(), 4);
    assert_eq!(matrices[0]["stands_for"], "every other port");
    assert_eq!(matrices[3]["stands_for"], "every UDP and SCTP port");
    assert_eq!(matrices[2]["protocol"], "TCP");
    assert_eq!(matrices[2]["port"], 8080);
    // One pod per workload here: each group is one pod, named as the pod.
    let groups: Vec<(String, Vec<String>)> = json["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let pods = g["pods"].as_array().unwrap();
            let pods = pods.iter().map(|p| p.as_str().unwrap().to_owned());
            (g["label"].as_str().unwrap().to_owned(), pods.collect())
        })
        .collect();
    let pod = |name: &str| (name.to_owned(), vec![name.to_owned()]);
    // The stand-in for other pods of shop, which web-from-shop's peer selects, is a group too.
    assert_eq!(
        groups,
        [
            pod("ops/prober"),
            pod("shop/(other pods)"),
            pod("shop/db"),
            pod("shop/web")
        ]
    );
    assert_eq!(json["groups"][1]["stand_in"], true);
    assert_eq!(json["groups"][0].get("stand_in"), None);
    assert_eq!(matrices[2]["pod_flows"], 12);
    assert_eq!(matrices[2]["pod_flows_allowed"], 8);
    let verdicts: Vec<String> = matrices[2]["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            format!(
                "{} {} {}",
                f["from"].as_str().unwrap(),
                f["to"].as_str().unwrap(),
                f["verdict"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            "ops/prober ops/prober allow",
            "ops/prober shop/(other pods) allow",
            "ops/prober shop/db deny",
            "ops/prober shop/web deny",
            "shop/(other pods) ops/prober allow",
            "shop/(other pods) shop/db deny",
            "shop/(other pods) shop/web allow",
            "shop/db ops/prober allow",
            "shop/db shop/(other pods) allow",
            "shop/db shop/db allow",
            "shop/db shop/web allow",
            "shop/web ops/prober allow",
            "shop/web shop/(other pods) allow",
            "shop/web shop/db deny",
            "shop/web shop/web allow",
        ]
    );
    // A pod to itself is a defined flow, decided before any policy; the pod flow counts are
    // between distinct pods.
    let own = &matrices[1]["flows"][0]["ingress"]["reason"];
    assert_eq!(own, "own-address", "{}", matrices[1]["flows"][0]);
}

/// `rows` are `flows` and `other_flows` as runs: expanded, they name the same cells with the
/// same decisions.
#[test]
fn matrix_json_rows_expand_to_the_flows() {
    let output = netpol(&[
        "matrix",
        "--flows",
        "-f",
        &manifests("cluster.yaml"),
        "-f",
        &manifests("policies-after"),
        "-o",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let json = json(&output);
    let str_of = |v: &serde_json::Value| v.as_str().unwrap().to_owned();
    let mut parties: Vec<String> = json["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| str_of(&g["label"]))
        .collect();
    parties.extend(
        json["others"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| str_of(&o["name"])),
    );
    for m in json["matrices"].as_array().unwrap() {
        let text = |d: &serde_json::Value| d.get("text").map(str_of);
        let mut expected: Vec<_> = m["flows"]
            .as_array()
            .unwrap()
            .iter()
            .chain(m["other_flows"].as_array().unwrap())
            .map(|f| {
                let direction = |k: &str| f.get(k).and_then(text);
                (
                    str_of(&f["from"]),
                    str_of(&f["to"]),
                    str_of(&f["verdict"]),
                    direction("egress"),
                    direction("ingress"),
                )
            })
            .collect();
        let directions = m["directions"].as_array().unwrap();
        let direction = |d: &serde_json::Value, k: &str| {
            d.get(k)
                .map(|i| str_of(&directions[i.as_u64().unwrap() as usize]["text"]))
        };
        let mut expanded = Vec::new();
        for row in m["rows"].as_array().unwrap() {
            let from = &parties[row["from"].as_u64().unwrap() as usize];
            for run in row["to"].as_array().unwrap() {
                let run: Vec<u64> = run
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| n.as_u64().unwrap())
                    .collect();
                let decision = &m["decisions"][run[2] as usize];
                for to in run[0]..=run[1] {
                    expanded.push((
                        from.clone(),
                        parties[to as usize].clone(),
                        str_of(&decision["verdict"]),
                        direction(decision, "egress"),
                        direction(decision, "ingress"),
                    ));
                }
            }
        }
        expected.sort();
        expanded.sort();
        assert!(expected.len() > 6, "{expected:?}");
        assert_eq!(expanded, expected);
    }
}

#[test]
fn check_json_lists_every_expectation_with_its_decision() {
    let output = netpol(&[
        "check",
        &scenario("mismatch.yaml"),
        &scenario("malformed-object.yaml"),
        "--output",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(2), "a file does not load");
    let report = json(&output);
    assert_eq!(
        report["summary"],
        serde_json::json!({
            "scenarios": 1, "flows": 2, "mismatches": 1, "invalid_files": 1,
            "not_probed": 0, "probe_failures": 0, "would_deny": 0
        })
    );
    let expectations = report["scenarios"][0]["expectations"].as_array().unwrap();
    let summary: Vec<String> = expectations
        .iter()
        .map(|e| {
            format!(
                "{} {} -> {} {}/{} expected {} decided {} passed {}",
                e["field"].as_str().unwrap(),
                e["from"].as_str().unwrap(),
                e["to"].as_str().unwrap(),
                e["protocol"].as_str().unwrap(),
                e["port"],
                e["expected"].as_str().unwrap(),
                e["verdict"].as_str().unwrap(),
                e["passed"]
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            "expect[0].matrix x/a -> x/b TCP/80 expected allow decided deny passed false",
            "expect[0].matrix x/b -> x/a TCP/80 expected allow decided allow passed true",
        ]
    );
    assert_eq!(expectations[0]["ingress"]["policy"]["name"], "isolate-b");
    let load_error = &report["load_errors"][0];
    assert!(load_error["file"]
        .as_str()
        .unwrap()
        .ends_with("malformed-object.yaml"));
    assert!(
        load_error["errors"][0]
            .as_str()
            .unwrap()
            .contains("spec.ingress[0].ports[0].port: port 70000 is outside 1-65535"),
        "{load_error}"
    );
}

#[test]
fn check_junit_has_a_testcase_per_expectation_and_failures_carry_the_rule() {
    let output = netpol(&[
        "check",
        &scenario("mismatch.yaml"),
        &scenario("malformed-object.yaml"),
        "-o",
        "junit",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let xml = stdout(&output);
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}:\n{xml}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    assert_eq!(
        (
            root.attribute("tests"),
            root.attribute("failures"),
            root.attribute("errors")
        ),
        (Some("3"), Some("1"), Some("1"))
    );
    let cases: Vec<roxmltree::Node> = root
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    let names: Vec<&str> = cases.iter().map(|c| c.attribute("name").unwrap()).collect();
    assert_eq!(
        names,
        [
            "expect[0].matrix: x/a -> x/b TCP/80 is allow",
            "expect[0].matrix: x/b -> x/a TCP/80 is allow",
            "loads",
        ]
    );
    let failure = cases[0]
        .children()
        .find(|n| n.has_tag_name("failure"))
        .expect("the mismatch fails");
    assert_eq!(
        failure.attribute("message"),
        Some("expected allow, decided deny")
    );
    assert!(
        failure.text().unwrap().ends_with(
            "expect[0].matrix: x/a -> x/b TCP/80: expected allow, decided deny \
             (ingress: deny: no Normal-tier rule matched and NetworkPolicy x/isolate-b isolates the pod)"
        ),
        "{xml}"
    );
    assert_eq!(cases[1].children().filter(|n| n.is_element()).count(), 0);
    let error = cases[2]
        .children()
        .find(|n| n.has_tag_name("error"))
        .unwrap();
    assert!(error
        .text()
        .unwrap()
        .contains("port 70000 is outside 1-65535"));
}

/// `diff -f SHARED BEFORE AFTER` with policy folders reads the shared pods once and builds
/// both sides from them; its findings are those of two whole inputs read each on its own.
#[test]
fn diff_of_policy_folders_over_shared_manifests_finds_what_whole_inputs_find() {
    let dir = support::scratch_dir("diff-shared-manifests");
    let synth = dir.join("synth");
    netpol_dev::run(
        ["synth", "--pods", "300", "--out", synth.to_str().unwrap()],
        &mut std::io::sink(),
    )
    .expect("netpol-dev synth writes the cluster");
    let folder = |name: &str, files: &[(&str, String)]| {
        let path = dir.join(name);
        std::fs::create_dir_all(&path).unwrap();
        for (file, text) in files {
            std::fs::write(path.join(file), text).unwrap();
        }
        path.to_str().unwrap().to_owned()
    };
    let read = |file: &str| std::fs::read_to_string(synth.join(file)).unwrap();
    let shared: Vec<(&str, String)> = ["namespaces.yaml", "nodes.yaml", "pods.yaml"]
        .iter()
        .map(|f| (*f, read(f)))
        .collect();
    let policies = read("networkpolicies.yaml");
    let removed = "name: allow-app-0\n  namespace: ns-0\n";
    assert!(policies.contains(removed));
    // AFTER: one policy removed, one added that names outside prefixes BEFORE does not.
    let after_policies = policies
        .split("\n---\n")
        .filter(|doc| !doc.contains(removed))
        .chain([
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: out, \
             namespace: ns-1}\nspec:\n  podSelector: {}\n  policyTypes: [Egress]\n  egress: \
             [{to: [{ipBlock: {cidr: 192.0.2.0/24, except: [192.0.2.128/25]}}]}]\n",
        ])
        .collect::<Vec<_>>()
        .join("\n---\n");
    let before_files = [("admin.yaml", read("admin.yaml")), ("np.yaml", policies)];
    let after_files = [
        ("admin.yaml", read("admin.yaml")),
        ("np.yaml", after_policies),
    ];
    let shared_dir = folder("shared", &shared);
    let before = folder("before", &before_files);
    let after = folder("after", &after_files);
    let whole = |name: &str, own: &[(&str, String)]| {
        let files: Vec<(&str, String)> = shared.iter().chain(own).cloned().collect();
        folder(name, &files)
    };
    let (whole_before, whole_after) = (
        whole("whole-before", &before_files),
        whole("whole-after", &after_files),
    );
    for output in ["text", "json"] {
        let shared_run = netpol(&["diff", "-f", &shared_dir, &before, &after, "-o", output]);
        let whole_run = netpol(&["diff", &whole_before, &whole_after, "-o", output]);
        assert_eq!(shared_run.status.code(), Some(1), "{}", stderr(&shared_run));
        assert_eq!(whole_run.status.code(), Some(1), "{}", stderr(&whole_run));
        assert_eq!(stdout(&shared_run), stdout(&whole_run), "-o {output}");
        if output == "text" {
            let out = stdout(&shared_run);
            assert!(out.contains("by NetworkPolicy ns-0/allow-app-0"), "{out}");
            assert!(out.contains("to 192.0.2.128/25: allow -> deny"), "{out}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
