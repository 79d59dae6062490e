//! `netpol acls --compare` on a node whose netpol ACLs name network IP sets (HNS 13.0 and later,
//! the agent's default there): the dump records the networks' `SetPolicy` list, compare computes
//! the set form the agent programs and resolves every set id to its members on both sides, so a
//! rule compares by what it matches. Also `--node`, which leaves out Linux nodes' pods.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

fn netpol(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_netpol"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .expect("netpol runs")
}

const CLUSTER: [&str; 4] = [
    "-f",
    "examples/manifests/cluster.yaml",
    "-f",
    "examples/manifests/policies-after",
];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hns")
        .join(name)
}

/// What netpol computes in IP-set form, as `acls --hcn-ip-sets on --output json` prints it.
fn computed_with_sets() -> Value {
    let mut args = vec!["acls"];
    args.extend(CLUSTER);
    args.extend(["--hcn-ip-sets", "on", "--output", "json"]);
    let out = netpol(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The node recorded before netpol ran, with each pod's computed ACLs added, its endpoints on
/// network `NET-1`, which holds the computed sets and another owner's set.
fn node_with_sets(computed: &Value) -> Value {
    let mut node: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("node-1-before-netpol.json")).unwrap(),
    )
    .unwrap();
    let pods = computed["endpoints"].as_array().unwrap();
    for endpoint in node["endpoints"].as_array_mut().unwrap() {
        endpoint["network"] = json!("NET-1");
        let address = endpoint["addresses"][0].clone();
        if let Some(pod) = pods.iter().find(|p| p["addresses"][0] == address) {
            let policies = pod["policies"].as_array().unwrap().clone();
            endpoint["policies"]
                .as_array_mut()
                .unwrap()
                .extend(policies);
        }
    }
    let mut sets = computed["networks"][0]["policies"]
        .as_array()
        .unwrap()
        .clone();
    sets.push(json!({"Type": "SetPolicy", "Settings": {"Id": "azure-npm-3102813542", "Name": "azure-npm-3102813542", "PolicyType": "IPSET", "Values": "10.244.1.12"}}));
    node["networks"] = json!([{"id": "NET-1", "name": "azure", "policies": sets}]);
    node
}

fn write(test: &str, document: &Value) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{test}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(document).unwrap()).unwrap();
    path
}

fn compare(file: &Path, extra: &[&str]) -> (Option<i32>, String, String) {
    let mut args = vec!["acls"];
    args.extend(CLUSTER);
    args.extend(["--compare", file.to_str().unwrap()]);
    args.extend(extra);
    let out = netpol(&args);
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn the_set_form_names_sets_the_network_document_holds() {
    let computed = computed_with_sets();
    let sets = computed["networks"][0]["policies"].as_array().unwrap();
    assert!(!sets.is_empty(), "{computed}");
    let ids: Vec<&str> = sets
        .iter()
        .map(|s| s["Settings"]["Id"].as_str().unwrap())
        .collect();
    assert!(
        ids.iter().all(|id| id.starts_with("netpol-set-")),
        "{ids:?}"
    );
    let named: Vec<&str> = computed["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["policies"].as_array().unwrap())
        .flat_map(|p| {
            ["RemoteAddresses", "LocalAddresses"]
                .into_iter()
                .filter_map(move |field| p["Settings"][field].as_str())
        })
        .filter(|r| r.starts_with("netpol-set-"))
        .collect();
    assert!(!named.is_empty());
    assert!(named.iter().all(|id| ids.contains(id)), "{named:?} {ids:?}");
}

#[test]
fn the_recorded_node_with_ip_sets_compares_equal() {
    // Recorded after the form the script writes (see fixtures/hns/README.md).
    let (code, out, err) = compare(&fixture("node-1-ip-sets.json"), &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("0 of 4 endpoints differ from what netpol computes"),
        "{out}"
    );
    // The same node built from what netpol computes now: the recorded file is not stale.
    let built = write("ip-sets-built", &node_with_sets(&computed_with_sets()));
    let (code, out, err) = compare(&built, &[]);
    assert_eq!(code, Some(0), "{out}{err}");
}

#[test]
fn a_set_whose_members_drifted_is_an_altered_rule_naming_the_members() {
    let mut node = node_with_sets(&computed_with_sets());
    // The first netpol set loses its first member (a replica's address the agent missed).
    let set = node["networks"][0]["policies"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|s| {
            s["Settings"]["Id"]
                .as_str()
                .unwrap()
                .starts_with("netpol-set-")
        })
        .unwrap();
    let values = set["Settings"]["Values"].as_str().unwrap().to_string();
    let kept: Vec<&str> = values.split(',').skip(1).collect();
    let drifted = if kept.is_empty() {
        "192.0.2.1".to_string()
    } else {
        kept.join(",")
    };
    set["Settings"]["Values"] = json!(drifted);
    let (code, out, err) = compare(&write("ip-sets-drifted", &node), &["-o", "json"]);
    assert_eq!(code, Some(1), "{out}{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    let altered: Vec<&Value> = report["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["altered"].as_array().unwrap())
        .collect();
    assert!(!altered.is_empty(), "{report}");
    for a in &altered {
        // netpol names an ingress rule's peer set in `LocalAddresses` (the default
        // convention), an egress rule's in `RemoteAddresses`.
        let field = if a["live"]["Settings"]["Direction"] == "In" {
            "LocalAddresses"
        } else {
            "RemoteAddresses"
        };
        assert_eq!(a["differences"], json!([field]), "{a}");
        assert_eq!(a["live"]["Settings"][field], json!(drifted), "{a}");
        assert_eq!(a["wanted"]["Settings"][field], json!(values), "{a}");
    }
    assert_eq!(report["summary"]["missing"], 0);
    assert_eq!(report["summary"]["extra"], 0);
}

#[test]
fn without_the_networks_the_sets_are_unknown_and_the_rules_differ() {
    let mut node = node_with_sets(&computed_with_sets());
    node.as_object_mut().unwrap().remove("networks");
    let (code, out, err) = compare(&write("ip-sets-no-networks", &node), &[]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("unknown set: netpol-set-"), "{out}");
}

#[test]
fn a_stale_netpol_set_is_noted() {
    let mut node = node_with_sets(&computed_with_sets());
    node["networks"][0]["policies"].as_array_mut().unwrap().push(json!({"Type": "SetPolicy", "Settings": {"Id": "netpol-set-00000000000000ff", "Name": "netpol-set-00000000000000ff", "PolicyType": "IPSET", "Values": "10.244.9.9"}}));
    let (code, out, err) = compare(&write("ip-sets-stale", &node), &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("note: 1 netpol IP sets on the network are named by no rule netpol computes: netpol-set-00000000000000ff"),
        "{out}"
    );
}

#[test]
fn node_keeps_one_nodes_pods_and_refuses_linux_and_unknown_nodes() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("acls-node");
    std::fs::create_dir_all(&dir).unwrap();
    let pod = |name: &str, node: &str, ip: &str| {
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: x, labels: {{app: {name}}}}}\nspec: {{nodeName: {node}, containers: [{{name: c, image: c}}]}}\nstatus: {{phase: Running, podIP: {ip}}}\n---\n")
    };
    let node = |name: &str, os: &str, ip: &str| {
        format!("apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{kubernetes.io/os: {os}}}}}\nstatus: {{addresses: [{{type: InternalIP, address: {ip}}}]}}\n---\n")
    };
    let policy = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny, namespace: x}\nspec: {podSelector: {}, policyTypes: [Ingress]}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n";
    let text = [
        node("win-1", "windows", "10.0.0.1"),
        node("win-2", "windows", "10.0.0.2"),
        node("lin-1", "linux", "10.0.0.3"),
        pod("a", "win-1", "10.1.0.1"),
        pod("b", "win-2", "10.1.0.2"),
        pod("c", "lin-1", "10.1.0.3"),
        policy.to_string(),
    ]
    .concat();
    let file = dir.join("cluster.yaml");
    std::fs::write(&file, text).unwrap();
    let file = file.to_str().unwrap();
    let pods = |extra: &[&str]| -> (Option<i32>, Vec<String>, String) {
        let mut args = vec!["acls", "-f", file, "-o", "json"];
        args.extend(extra);
        let out = netpol(&args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let pods = serde_json::from_slice::<Value>(&out.stdout)
            .map(|d| {
                d["endpoints"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e["pod"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default();
        (out.status.code(), pods, stderr)
    };
    let (code, all, err) = pods(&[]);
    assert_eq!(
        (code, all),
        (Some(0), vec!["x/a".to_string(), "x/b".to_string()]),
        "{err}"
    );
    assert!(
        err.contains("1 pods on nodes labelled kubernetes.io/os=linux left out"),
        "{err}"
    );
    let (code, one, err) = pods(&["--node", "win-2"]);
    assert_eq!((code, one), (Some(0), vec!["x/b".to_string()]), "{err}");
    let (code, _, err) = pods(&["--node", "lin-1"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("node lin-1 is labelled kubernetes.io/os=linux"),
        "{err}"
    );
    let (code, _, err) = pods(&["--node", "win-9"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no node win-9"), "{err}");
}
