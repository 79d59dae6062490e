//! `diff`'s output forms: the grouped JSON (by workload within classes of pods alike, the
//! default) against the per-pod list (`--per-pod`, the JSON every `diff -o json` was before),
//! and the per-pod text. The grouped form must lose no change: expanded by its documented rule
//! (every pod of `from` to every pod of `to`, a pod to itself excepted, less the pods `except`
//! names) it is the per-pod list, flow for flow.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use serde_json::{json, Value};
use support::{netpol, scratch_dir, stderr, stdout};

fn example(path: &str) -> String {
    support::example(path)
}

fn json_of(output: &Output) -> Value {
    assert_eq!(output.status.code(), Some(1), "{}", stderr(output));
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", stdout(output)))
}

/// A changed flow: protocol, port, source, destination, decisions before and after.
type Flow = (String, u64, String, String, Value, Value);

/// The per-pod flows of a grouped document, by its documented rule, checking each change's
/// `flows` count on the way.
fn expand(grouped: &Value) -> Vec<Flow> {
    let groups = grouped["groups"].as_array().unwrap();
    let others = grouped["others"].as_array().unwrap();
    let decisions = grouped["decisions"].as_array().unwrap();
    let party = |n: u64| -> Vec<String> {
        let n = n as usize;
        match groups.get(n) {
            Some(group) => group["pods"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap().to_owned())
                .collect(),
            None => vec![others[n - groups.len()]["name"]
                .as_str()
                .unwrap()
                .to_owned()],
        }
    };
    let mut flows = Vec::new();
    for change in grouped["changes"].as_array().unwrap() {
        let except: Vec<&str> = change["except"]
            .as_array()
            .map(|e| e.iter().map(|p| p.as_str().unwrap()).collect())
            .unwrap_or_default();
        let (from, to) = (
            party(change["from"].as_u64().unwrap()),
            party(change["to"].as_u64().unwrap()),
        );
        let before = &decisions[change["before"].as_u64().unwrap() as usize];
        let after = &decisions[change["after"].as_u64().unwrap() as usize];
        let mut count = 0;
        for source in &from {
            for destination in &to {
                if source == destination
                    || except.contains(&source.as_str())
                    || except.contains(&destination.as_str())
                {
                    continue;
                }
                flows.push((
                    change["protocol"].as_str().unwrap().to_owned(),
                    change["port"].as_u64().unwrap(),
                    source.clone(),
                    destination.clone(),
                    before.clone(),
                    after.clone(),
                ));
                count += 1;
            }
        }
        assert_eq!(change["flows"], count, "{change}");
    }
    flows
}

/// The flows of a per-pod document, in its order.
fn per_pod(document: &Value) -> Vec<Flow> {
    document["pod_changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["protocol"].as_str().unwrap().to_owned(),
                c["port"].as_u64().unwrap(),
                c["from"].as_str().unwrap().to_owned(),
                c["to"].as_str().unwrap().to_owned(),
                c["before"].clone(),
                c["after"].clone(),
            )
        })
        .collect()
}

#[test]
fn grouped_json_of_the_example_names_groups_others_and_decisions_once() {
    let output = netpol(&[
        "diff",
        "-f",
        &example("manifests/cluster.yaml"),
        &example("manifests/policies-before"),
        &example("manifests/policies-after"),
        "--port",
        "8080",
        "-o",
        "json",
    ]);
    let diff = json_of(&output);
    assert_eq!(
        (
            &diff["flows_changed"],
            &diff["newly_denied"],
            &diff["newly_allowed"]
        ),
        (&json!(2), &json!(2), &json!(0))
    );
    assert_eq!(
        diff["groups"],
        json!([
            {"label": "ops/prober", "workload": "ops/prober", "pods": ["ops/prober"]},
            {"label": "shop/web", "workload": "shop/web", "pods": ["shop/web"]},
        ])
    );
    assert_eq!(
        diff["others"],
        json!([{"name": "0.0.0.0/0", "kind": "outside"}])
    );
    assert_eq!(
        diff["changes"],
        json!([
            {"protocol": "TCP", "port": 8080, "from": 0, "to": 1, "flows": 1, "before": 0, "after": 1},
            {"protocol": "TCP", "port": 8080, "from": 2, "to": 1, "flows": 1, "before": 2, "after": 3},
        ])
    );
    let decisions = diff["decisions"].as_array().unwrap();
    assert_eq!(decisions.len(), 4, "each distinct decision once");
    assert_eq!(decisions[1]["verdict"], "deny");
    assert_eq!(decisions[1]["ingress"]["policy"]["name"], "web-from-shop");
    assert_eq!(
        decisions[2]["egress"],
        Value::Null,
        "from outside: no egress"
    );
}

/// A synthetic cluster (seven nodes, so that a workload's pods run on several) whose AFTER
/// isolates every pod of `ns-1` for egress and drops the policy that opens `ns-0`'s `app-0`:
/// flows change between pods, into pods and from pods to nodes (a pod and its own node
/// excepted) and outside regions.
fn synthetic_diff(dir: &Path) -> [String; 3] {
    let synth = dir.join("synth");
    let out = synth.to_str().unwrap();
    netpol_dev::run(
        ["synth", "--pods", "300", "--nodes", "7", "--out", out],
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
    let after = policies
        .split("\n---\n")
        .filter(|doc| !doc.contains(removed))
        .chain([
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: no-egress, \
             namespace: ns-1}\nspec: {podSelector: {}, policyTypes: [Egress]}\n",
        ])
        .collect::<Vec<_>>()
        .join("\n---\n");
    [
        folder("shared", &shared),
        folder("before", &[("np.yaml", policies)]),
        folder("after", &[("np.yaml", after)]),
    ]
}

/// Every pod flow of `matrix -o json` over `paths` (each row's runs expanded to the pods of
/// its groups, a pod to itself and to its own node excepted: `nodes` names each pod's node),
/// by protocol, port, source and destination: verdict.
fn matrix_verdicts(
    paths: &[&str],
    nodes: &BTreeMap<String, String>,
) -> BTreeMap<(String, u64, String, String), String> {
    let mut args = vec!["matrix", "-o", "json"];
    for path in paths {
        args.extend(["-f", path]);
    }
    let output = netpol(&args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut parties: Vec<Vec<String>> = json["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            g["pods"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap().to_owned())
                .collect()
        })
        .collect();
    parties.extend(
        json["others"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| vec![o["name"].as_str().unwrap().to_owned()]),
    );
    let mut verdicts = BTreeMap::new();
    for m in json["matrices"].as_array().unwrap() {
        let (protocol, port) = (m["protocol"].as_str().unwrap(), m["port"].as_u64().unwrap());
        for row in m["rows"].as_array().unwrap() {
            let from = &parties[row["from"].as_u64().unwrap() as usize];
            for run in row["to"].as_array().unwrap() {
                let run: Vec<u64> = run
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| n.as_u64().unwrap())
                    .collect();
                let verdict = m["decisions"][run[2] as usize]["verdict"].as_str().unwrap();
                for to in &parties[run[0] as usize..=run[1] as usize] {
                    for source in from {
                        let own = |pod: &String, node: &String| {
                            nodes.get(pod).is_some_and(|n| format!("node {n}") == *node)
                        };
                        let defined =
                            |d: &&String| *d != source && !own(source, d) && !own(d, source);
                        for destination in to.iter().filter(defined) {
                            let key = (
                                protocol.to_owned(),
                                port,
                                source.clone(),
                                destination.clone(),
                            );
                            verdicts.insert(key, verdict.to_owned());
                        }
                    }
                }
            }
        }
    }
    verdicts
}

#[test]
fn grouped_json_expands_to_the_per_pod_list_flow_for_flow() {
    let dir = scratch_dir("diff-outputs-expand");
    let [shared, before, after] = synthetic_diff(&dir);
    let run = |extra: &[&str]| {
        let mut args = vec!["diff", "-f", &shared, &before, &after, "-o", "json"];
        args.extend(extra);
        json_of(&netpol(&args))
    };
    let (grouped, pods) = (run(&[]), run(&["--per-pod"]));
    let mut expanded = expand(&grouped);
    let listed = per_pod(&pods);
    assert_eq!(grouped["flows_changed"], listed.len() as u64);
    assert!(listed.len() > 1000, "{} flows", listed.len());
    let sorted = |flows: &mut Vec<Flow>| {
        flows.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    };
    let mut listed_sorted = listed.clone();
    sorted(&mut expanded);
    sorted(&mut listed_sorted);
    assert!(
        expanded == listed_sorted,
        "the grouped form lost or added a flow"
    );
    // And the list is what the two sides' matrices, decided on their own, tell apart.
    let pod_objects: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(Path::new(&shared).join("pods.yaml")).unwrap(),
    )
    .unwrap();
    let nodes: BTreeMap<String, String> = pod_objects["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pod| {
            let name = |m: &Value| m.as_str().unwrap().to_owned();
            let metadata = &pod["metadata"];
            (
                format!(
                    "{}/{}",
                    name(&metadata["namespace"]),
                    name(&metadata["name"])
                ),
                name(&pod["spec"]["nodeName"]),
            )
        })
        .collect();
    let [was, now] = [&before, &after].map(|side| matrix_verdicts(&[&shared, side], &nodes));
    let mut differing: Vec<(String, u64, String, String)> = was
        .iter()
        .filter(|(flow, verdict)| now.get(*flow).is_some_and(|v| v != *verdict))
        .map(|(flow, _)| flow.clone())
        .collect();
    let mut changed: Vec<(String, u64, String, String)> = listed
        .iter()
        .map(|(protocol, port, from, to, _, _)| (protocol.clone(), *port, from.clone(), to.clone()))
        .collect();
    differing.sort();
    changed.sort();
    let only = |a: &[(String, u64, String, String)], b: &[(String, u64, String, String)]| {
        a.iter()
            .filter(|x| b.binary_search(x).is_err())
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
    };
    assert!(
        changed == differing,
        "diff and the sides' matrices disagree: {} against {}; only diff: {:?}; only matrices: {:?}",
        changed.len(),
        differing.len(),
        only(&changed, &differing),
        only(&differing, &changed)
    );
    // Every kind of change is there: between pods, pods to nodes with a node's own pods
    // excepted, pods to regions outside.
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for change in pods["pod_changes"].as_array().unwrap() {
        *kinds
            .entry(change["to_kind"].as_str().unwrap())
            .or_default() += 1;
    }
    assert_eq!(
        kinds.keys().copied().collect::<Vec<_>>(),
        ["node", "outside", "pod"]
    );
    assert!(
        grouped["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["except"].as_array().is_some_and(|e| !e.is_empty())),
        "some pod runs on a node its group's flows change to"
    );
    // Groups are a workload's pods within one class: their labels name a group once.
    let labels: Vec<&str> = grouped["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["label"].as_str().unwrap())
        .collect();
    let mut unique = labels.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), labels.len());
    // Much smaller than the list: each group's pods once, each decision once.
    assert!(
        grouped.to_string().len() * 20 < pods.to_string().len(),
        "{} against {} bytes",
        grouped.to_string().len(),
        pods.to_string().len()
    );

    // Text, per pod: one line per changed pair, in the order of the per-pod list.
    let text = netpol(&["diff", "-f", &shared, &before, &after, "--per-pod"]);
    assert_eq!(text.status.code(), Some(1), "{}", stderr(&text));
    let out = stdout(&text);
    // Heads of changes, then the stand-ins line (where peers select pods the input does not
    // hold), then the summary.
    let heads: Vec<&str> = out
        .lines()
        .filter(|l| !l.starts_with("  ") && !l.starts_with("stand-ins "))
        .collect();
    let (last, lines) = heads.split_last().unwrap();
    assert_eq!(lines.len(), listed.len());
    let (protocol, port, from, to, _, _) = &listed[0];
    assert!(
        lines[0].starts_with(&format!("{from} -> {to} {protocol}/{port}")),
        "{}",
        lines[0]
    );
    let grouped_text = stdout(&netpol(&["diff", "-f", &shared, &before, &after]));
    assert_eq!(grouped_text.lines().last(), Some(*last), "the same summary");
    assert!(grouped_text.lines().count() < out.lines().count() / 10);
    std::fs::remove_dir_all(&dir).unwrap();
}
