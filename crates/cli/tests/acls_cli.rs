//! `netpol acls`: the HCN Update request per endpoint, with its rule count.

use std::process::Command;

fn netpol(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_netpol"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .expect("netpol runs")
}

#[test]
fn prints_one_update_request_with_its_rule_count() {
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
    assert_eq!(request["RequestType"], "Update");
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
