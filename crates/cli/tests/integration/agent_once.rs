//! `netpol agent --once` run as a user runs it: the summary is always printed, and the exit code
//! says whether everything in the files was read and enforced.

use crate::support;

use std::path::Path;
use std::process::{Command, Output};

use support::{
    copy_example_cluster, names_at_the_limits, policy_at_the_size_limit, scratch_dir,
    INVALID_POLICY, NODE,
};

fn once(dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_netpol"))
        .args(["agent", "--once", "--node", NODE, "--from-dir"])
        .arg(dir)
        .env("RUST_LOG", "warn")
        .output()
        .expect("the netpol binary runs")
}

/// The summary's first line: `node ...: N local endpoints, ...`.
fn summary_line(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find(|l| l.starts_with(&format!("node {NODE}:")))
        .unwrap_or_else(|| panic!("no summary in {output:?}"))
        .to_owned()
}

#[test]
fn everything_read_exits_0() {
    let dir = scratch_dir("once-ok");
    copy_example_cluster(&dir);
    let output = once(&dir);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let summary = summary_line(&output);
    assert!(summary.contains("6 local endpoints"), "{summary}");
    assert!(summary.contains("(0 invalid, skipped)"), "{summary}");
}

#[test]
fn a_file_that_does_not_parse_exits_1_after_the_summary() {
    let dir = scratch_dir("once-unreadable");
    copy_example_cluster(&dir);
    std::fs::write(dir.join("policies/broken.yaml"), "kind: [unclosed\n").unwrap();
    let output = once(&dir);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    // What could be read is still enforced and summarized.
    let summary = summary_line(&output);
    assert!(summary.contains("6 local endpoints"), "{summary}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("broken.yaml"), "{stderr}");
    assert!(stderr.contains("not every object was read"), "{stderr}");
}

#[test]
fn an_invalid_object_exits_1() {
    let dir = scratch_dir("once-invalid");
    copy_example_cluster(&dir);
    std::fs::write(dir.join("policies/invalid.yaml"), INVALID_POLICY).unwrap();
    let output = once(&dir);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let summary = summary_line(&output);
    assert!(summary.contains("(1 invalid, skipped)"), "{summary}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("NetworkPolicy shop/broken"), "{stderr}");
}

/// The names the nftables test carries through a real kernel, through the simulated HCN: the
/// simulator parses the JSON each endpoint is given, so a name that broke out of its string would
/// fail the endpoint. Every pod is programmed, each isolated for ingress by its namespace.
#[test]
fn the_longest_names_and_hostile_names_are_programmed_on_hcn() {
    let dir = scratch_dir("agent-once-hcn-names");
    let (docs, pods) = names_at_the_limits();
    std::fs::write(dir.join("all.yaml"), docs).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_netpol"))
        .args([
            "agent",
            "--once",
            "--node",
            "node-1",
            "--datapath",
            "hcn-sim",
        ])
        .args(["--probe", "TCP/80", "--from-dir"])
        .arg(&dir)
        .env("RUST_LOG", "warn")
        .output()
        .expect("the netpol binary runs");
    let (out, err) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(output.status.success(), "{out}\n{err}");
    assert!(
        out.contains(&format!("node node-1: {pods} local endpoints")),
        "{out}"
    );
    let pairs = pods * (pods - 1);
    assert!(
        out.contains(&format!(
            "TCP/80 between the {pods} local pods, as the programmed HCN rules decide it: \
             0 of {pairs} pairs allowed, {pairs} denied"
        )),
        "{out}"
    );
    assert!(!err.contains("could not be programmed"), "{err}");
    // The summary stays readable: long names are shortened, not padded to 317 columns.
    assert!(out.lines().all(|l| l.chars().count() <= 160), "{out}");
}

/// A valid policy at etcd's size limit (60,000 `except`s) is enforced like any other: every
/// endpoint of the node programmed through the simulated HCN, and the flows it decides decided
/// by the programmed rules (an excepted address denied, the rest of the world allowed).
#[test]
fn a_policy_at_the_size_limit_is_enforced_on_hcn() {
    let dir = scratch_dir("agent-once-hcn-size-limit");
    copy_example_cluster(&dir);
    let (policy, excepted, allowed) = policy_at_the_size_limit();
    std::fs::write(dir.join("policies/at-the-limit.json"), policy).unwrap();
    // The Linux default datapath is the simulated HCN.
    let output = once(&dir);
    let (out, err) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(output.status.success(), "{out}\n{err}");
    assert!(out.contains("(0 invalid, skipped)"), "{out}");
    assert!(out.contains("node node-1: 6 local endpoints"), "{out}");
    assert!(!err.contains("could not be programmed"), "{err}");
    for (to, verdict) in [(excepted, "deny"), (allowed, "allow")] {
        let output = Command::new(env!("CARGO_BIN_EXE_netpol"))
            .args(["explain", "--datapath", "hcn-sim", "-f"])
            .arg(&dir)
            .args(["shop/web-1", to, "TCP/443", "-o", "json"])
            .output()
            .expect("the netpol binary runs");
        let json: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)));
        assert_eq!(json["verdict"], verdict, "shop/web-1 -> {to}: {json}");
    }
}
