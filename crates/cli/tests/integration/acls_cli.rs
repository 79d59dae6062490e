//! `netpol acls`: the HCN request per endpoint with its rule count, the JSON endpoint document,
//! and `--compare`: a node's live endpoints (recorded HNS dumps) against what netpol computes.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

fn netpol(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_netpol"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .expect("netpol runs")
}

#[test]
fn prints_one_add_request_with_its_rule_count() {
    let out = netpol(&[
        "acls",
        "examples/scenarios/np-sctp-is-not-tcp.yaml",
        "--endpoint",
        "x/a",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (header, json) = text.split_once('\n').unwrap();
    assert!(header.starts_with("# x/a: "), "{header}");
    let request: serde_json::Value = serde_json::from_str(json).expect("the request is JSON");
    // What the agent sends to a fresh endpoint: netpol never replaces a whole policy list.
    assert_eq!(request["RequestType"], "Add");
    let policies = request["Settings"]["Policies"].as_array().unwrap();
    let announced: usize = header["# x/a: ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(policies.len(), announced);
    assert!(policies.iter().all(
        |p| p["Type"] == "ACL" && p["Settings"]["Id"].as_str().unwrap().starts_with("netpol-")
    ));
    // Each direction ends with an explicit final rule matching everything.
    for direction in ["In", "Out"] {
        let last = policies
            .iter()
            .rev()
            .find(|p| p["Settings"]["Direction"] == direction)
            .unwrap();
        assert_eq!(last["Settings"]["Protocols"], "256");
        assert!(last["Settings"].get("RemoteAddresses").is_none());
    }
}

#[test]
fn an_unknown_endpoint_is_an_error() {
    let out = netpol(&[
        "acls",
        "examples/scenarios/np-sctp-is-not-tcp.yaml",
        "--endpoint",
        "nope/pod",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope/pod"));
}

const CLUSTER: [&str; 4] = [
    "-f",
    "examples/manifests/cluster.yaml",
    "-f",
    "examples/manifests/policies-after",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hns")
        .join(name)
}

/// What netpol computes for the example cluster, as `acls --output json` prints it.
fn computed() -> Value {
    let mut args = vec!["acls"];
    args.extend(CLUSTER);
    args.extend(["--output", "json"]);
    let out = netpol(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the document is JSON")
}

/// The computed policies of `pod`.
fn rules_of(computed: &Value, pod: &str) -> Vec<Value> {
    computed["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["pod"] == pod)
        .unwrap_or_else(|| panic!("no {pod}"))["policies"]
        .as_array()
        .unwrap()
        .clone()
}

/// The node as recorded before netpol ran, with `add(address)` appended to each endpoint's
/// policies, written to a scratch file.
fn live(test: &str, add: impl Fn(&str) -> Vec<Value>) -> PathBuf {
    let mut node: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("node-1-before-netpol.json")).unwrap(),
    )
    .unwrap();
    for endpoint in node["endpoints"].as_array_mut().unwrap() {
        let address = endpoint["addresses"][0].as_str().unwrap().to_string();
        endpoint["policies"]
            .as_array_mut()
            .unwrap()
            .extend(add(&address));
    }
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{test}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&node).unwrap()).unwrap();
    path
}

fn pod_at(address: &str) -> &'static str {
    match address {
        "10.244.1.10" => "shop/web",
        "10.244.1.11" => "shop/db",
        "10.244.1.12" => "ops/prober",
        _ => "",
    }
}

fn compare(file: &Path, extra: &[&str]) -> (Option<i32>, String, String) {
    let mut args = vec!["acls"];
    args.extend(CLUSTER);
    let file = file.to_str().unwrap();
    args.extend(["--compare", file]);
    args.extend(extra);
    let out = netpol(&args);
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn report_of<'a>(report: &'a Value, pod: &str) -> &'a Value {
    report["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["pod"] == pod)
        .unwrap_or_else(|| panic!("no {pod} in {report}"))
}

#[test]
fn the_json_document_holds_each_pods_policies_and_counts() {
    let computed = computed();
    assert_eq!(computed["format"], "netpol.endpoint-acls/v1");
    assert_eq!(computed["source"], "netpol");
    let endpoints = computed["endpoints"].as_array().unwrap();
    assert_eq!(endpoints.len(), 3);
    for endpoint in endpoints {
        let policies = endpoint["policies"].as_array().unwrap();
        assert_eq!(endpoint["rules"]["total"], policies.len());
        assert_eq!(
            endpoint["rules"]["total"].as_u64().unwrap(),
            endpoint["rules"]["ingress"].as_u64().unwrap()
                + endpoint["rules"]["egress"].as_u64().unwrap()
        );
        assert!(policies
            .iter()
            .all(|p| p["Type"] == "ACL"
                && p["Settings"]["Id"].as_str().unwrap().starts_with("netpol-")));
    }
    let web = endpoints.iter().find(|e| e["pod"] == "shop/web").unwrap();
    assert_eq!(web["addresses"], json!(["10.244.1.10"]));
}

#[test]
fn a_node_before_netpol_runs_lacks_every_rule_and_its_cni_policies_are_only_counted() {
    let computed = computed();
    let (code, out, err) = compare(&fixture("node-1-before-netpol.json"), &["-o", "json"]);
    assert_eq!(code, Some(1), "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["node"], "node-1");
    for pod in ["shop/web", "shop/db", "ops/prober"] {
        let endpoint = report_of(&report, pod);
        assert_eq!(endpoint["equal"], false);
        assert_eq!(
            endpoint["missing"],
            json!(rules_of(&computed, pod)),
            "{pod}"
        );
        assert_eq!(endpoint["in_place"], 0);
    }
    let prober = report_of(&report, "ops/prober");
    assert_eq!(prober["foreign"]["count"], 4);
    assert_eq!(
        prober["foreign"]["types"],
        json!({"ACL": 1, "L4WFPPROXY": 1, "OutBoundNAT": 1, "SDNRoute": 1})
    );
    // Azure CNI's wireserver block (priority 200, egress TCP 80) comes before netpol's egress
    // rules, whichever of them it overlaps.
    assert_eq!(prober["foreign"]["acls_evaluated_first"], 1);
    let first = &prober["foreign"]["evaluated_first"][0];
    assert_eq!(first["acl"]["Settings"]["Priority"], 200);
    assert_eq!(
        first["acl"]["Settings"]["RemoteAddresses"],
        "168.63.129.16/32"
    );
    let egress: Vec<Value> = rules_of(&computed, "ops/prober")
        .into_iter()
        .filter(|r| r["Settings"]["Direction"] == "Out")
        .map(|r| r["Settings"]["Id"].clone())
        .collect();
    let before = first["netpol_rules"].as_array().unwrap();
    assert!(!before.is_empty());
    for id in before {
        assert!(
            egress.contains(id),
            "{id} is not an egress rule of ops/prober"
        );
    }
    // The host's endpoint belongs to no pod and should hold no netpol rule: it does not.
    let host = report["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "azure-host")
        .unwrap();
    assert!(host.get("pod").is_none());
    assert_eq!(host["equal"], true);
    assert_eq!(report["summary"]["differing"], 3);
}

#[test]
fn a_node_holding_exactly_netpols_rules_amid_other_owners_policies_compares_equal() {
    let computed = computed();
    let file = live("in-sync", |address| match pod_at(address) {
        "" => Vec::new(),
        pod => rules_of(&computed, pod),
    });
    let (code, out, err) = compare(&file, &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.ends_with("0 of 4 endpoints differ from what netpol computes (0 missing, 0 altered, 0 extra netpol rules)\n"),
        "{out}"
    );
    assert!(
        out.contains("3 policies of other owners left alone (ACL 1, OutBoundNAT 1, SDNRoute 1)"),
        "{out}"
    );
    assert!(
        out.contains(
            "warning: 1 ACLs of other owners are evaluated before netpol rules they overlap"
        ),
        "{out}"
    );
    assert!(
        out.contains("(no Id) Out Block priority 200 protocols 6 remote 168.63.129.16/32 remote ports 80 before"),
        "{out}"
    );
}

#[test]
fn missing_altered_and_extra_rules_are_reported_per_pod() {
    let computed = computed();
    let tcp = |rules: &[Value]| -> usize {
        rules
            .iter()
            .position(|r| r["Settings"]["Protocols"] == "6")
            .expect("a TCP rule")
    };
    let stale = json!({"Type": "ACL", "Settings": {"Id": "netpol-5a17c0de9b3f2e41", "Protocols": "6", "Action": "Allow", "Direction": "In", "RemoteAddresses": "10.0.0.0/8", "LocalPorts": "22", "RuleType": "Switch", "Priority": 1002}});
    let file = live("drifted", |address| {
        let pod = pod_at(address);
        if pod.is_empty() {
            return Vec::new();
        }
        let mut rules = rules_of(&computed, pod);
        match pod {
            // db lost its TCP rule, and still holds one of a deleted policy.
            "shop/db" => {
                rules.remove(tcp(&rules));
                rules.push(stale.clone());
            }
            // web holds an older version of its TCP rule: same slot, other peer, other id.
            "shop/web" => {
                let i = tcp(&rules);
                rules[i]["Settings"]["RemoteAddresses"] = json!("10.244.1.99");
                rules[i]["Settings"]["Id"] = json!("netpol-77a1c0e4b2d95f13");
            }
            // Someone edited one of prober's rules in place, keeping its id.
            _ => rules[0]["Settings"]["RemoteAddresses"] = json!("192.0.2.7"),
        }
        rules
    });
    let (code, out, err) = compare(&file, &["-o", "json"]);
    assert_eq!(code, Some(1), "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();

    let db = report_of(&report, "shop/db");
    let db_rules = rules_of(&computed, "shop/db");
    assert_eq!(db["missing"], json!([db_rules[tcp(&db_rules)]]));
    assert_eq!(db["extra"], json!([stale]));
    assert_eq!(db["altered"], json!([]));
    assert_eq!(db["in_place"], db_rules.len() - 1);

    let web = report_of(&report, "shop/web");
    let web_rules = rules_of(&computed, "shop/web");
    assert_eq!(web["missing"], json!([]));
    assert_eq!(web["altered"][0]["wanted"], web_rules[tcp(&web_rules)]);
    assert_eq!(
        web["altered"][0]["live"]["Settings"]["Id"],
        "netpol-77a1c0e4b2d95f13"
    );
    assert_eq!(web["altered"][0]["differences"], json!(["RemoteAddresses"]));

    let prober = report_of(&report, "ops/prober");
    assert_eq!(
        prober["altered"][0]["wanted"],
        rules_of(&computed, "ops/prober")[0]
    );
    assert_eq!(
        prober["altered"][0]["differences"],
        json!(["RemoteAddresses"])
    );

    assert_eq!(
        report["summary"],
        json!({"endpoints": 4, "differing": 3, "missing": 1, "altered": 2, "extra": 1})
    );

    // The text form says the same per pod, and `--endpoint` narrows it to one.
    let (code, out, _) = compare(&file, &["--endpoint", "shop/web"]);
    assert_eq!(code, Some(1));
    assert!(out.starts_with("shop/web: endpoint 5B0C1E6A-41C2-4F3E-9D7A-0A8F3C2E1D10 (9f1c7e2ab4d04c3e8d5f_azure) [10.244.1.10]:"), "{out}");
    assert!(
        out.contains("RemoteAddresses: live \"10.244.1.99\", wanted \"10.244.1.10/31\""),
        "{out}"
    );
    assert!(out.ends_with("1 of 1 endpoints differ from what netpol computes (0 missing, 1 altered, 0 extra netpol rules)\n"), "{out}");
}

#[test]
fn get_hnsendpoint_output_as_windows_powershell_writes_it_is_compared_too() {
    let computed = computed();
    let (code, out, err) = compare(&fixture("get-hnsendpoint-v1.utf16.json"), &["-o", "json"]);
    assert_eq!(code, Some(1), "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    let web = report_of(&report, "shop/web");
    assert_eq!(web["id"], "5B0C1E6A-41C2-4F3E-9D7A-0A8F3C2E1D10");
    assert_eq!(web["missing"], json!(rules_of(&computed, "shop/web")));
    // The V1 flat policy, read as the V2 one it stands for.
    assert_eq!(web["extra"][0]["Settings"]["Id"], "netpol-00000000deadbeef");
    assert_eq!(web["extra"][0]["Settings"]["LocalPorts"], "22");
    assert_eq!(
        web["foreign"]["types"],
        json!({"ACL": 1, "OutBoundNAT": 1, "ROUTE": 1})
    );
    assert_eq!(report["summary"]["endpoints"], 2);
}

#[test]
fn unreadable_input_is_exit_2_naming_the_endpoint_and_field() {
    let bad = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bad-live.json");
    std::fs::write(
        &bad,
        r#"{"format": "netpol.endpoint-acls/v1", "endpoints": [{"id": "E1", "addresses": ["10.244.1.10"], "policies": [{"Settings": {}}]}]}"#,
    )
    .unwrap();
    let (code, _, err) = compare(&bad, &[]);
    assert_eq!(code, Some(2));
    assert!(err.contains("endpoint E1: policies[0]: no Type"), "{err}");

    let (code, _, err) = compare(&repo().join("no/such/file.json"), &[]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no/such/file.json"), "{err}");

    let (code, _, err) = compare(
        &fixture("node-1-before-netpol.json"),
        &["--hns-version", "9.1"],
    );
    assert_eq!(code, Some(2));
    assert!(err.contains("HNS 9.1 lacks the V2 HCN API"), "{err}");

    let (code, _, err) = compare(
        &fixture("node-1-before-netpol.json"),
        &["--endpoint", "shop/nope"],
    );
    assert_eq!(code, Some(2));
    assert!(err.contains("no pod shop/nope"), "{err}");
}
