//! `netpol check --datapath nftables`: scenarios decided by real packets through the kernel, in
//! private network namespaces. Needs root with `unshare`, `ip` and `nft`; elsewhere each test
//! fails with the reason, unless `NETPOL_SKIP_KERNEL=1` is set.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn netpol(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_netpol"))
        .args(args)
        .output()
        .expect("the netpol binary runs")
}

macro_rules! require_kernel {
    ($test:literal) => {
        if netpol_testbed::netns::skip_kernel_test($test) {
            return;
        }
    };
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `check --datapath nftables path`, asserting its exit status; returns stdout.
fn check_on_packets(path: &Path, status: i32) -> String {
    let output = netpol(&["check", "--datapath", "nftables", path.to_str().unwrap()]);
    let out = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(status),
        "{out}{}",
        text(&output.stderr)
    );
    out
}

#[test]
fn a_wrong_expectation_is_caught_by_real_packets() {
    require_kernel!("a_wrong_expectation_is_caught_by_real_packets");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scenarios/mismatch.yaml");
    let out = check_on_packets(&file, 1);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0].contains("x/a -> x/b TCP/80: expected allow, decided deny (ingress: deny:"),
        "{}",
        lines[0]
    );
    assert_eq!(lines[1], "checked 1 scenarios, 2 flows: 1 mismatches");
}

#[test]
fn sctp_flows_are_listed_and_counted_never_passed() {
    require_kernel!("sctp_flows_are_listed_and_counted_never_passed");
    let file = repo_root().join("examples/scenarios/np-sctp-is-not-tcp.yaml");
    let out = check_on_packets(&file, 0);
    let unprobed: Vec<&str> = out
        .lines()
        .filter(|l| l.ends_with("SCTP: this kernel has no SCTP sockets"))
        .collect();
    assert!(!unprobed.is_empty(), "{out}");
    assert!(unprobed
        .iter()
        .all(|l| l.starts_with("not probed: ") && l.contains("SCTP/")));
    let count = format!(
        "not probed: {} flows ({} cannot be probed here, 0 probes failed)",
        unprobed.len(),
        unprobed.len()
    );
    assert!(out.lines().any(|l| l == count), "{out}");
    let last = out.lines().last().unwrap();
    assert!(last.starts_with("checked 1 scenarios, ") && last.ends_with(" flows: 0 mismatches"));
    // TCP and UDP flows of the scenario were decided by packets.
    let decided: usize = last["checked 1 scenarios, ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(decided > 0, "{out}");
}

#[test]
fn the_projects_examples_pass_on_real_packets() {
    require_kernel!("the_projects_examples_pass_on_real_packets");
    let dir = repo_root().join("examples/scenarios");
    let out = check_on_packets(&dir, 0);
    assert!(
        out.lines()
            .last()
            .unwrap()
            .ends_with(" flows: 0 mismatches"),
        "{out}"
    );
    assert!(
        out.lines()
            .filter(|l| l.starts_with("not probed: ") && !l.ends_with("probes failed)"))
            .all(|l| l.contains("SCTP")),
        "only SCTP flows go unprobed: {out}"
    );
}

#[test]
fn other_commands_refuse_the_packet_datapath() {
    let dir = repo_root().join("examples/scenarios/np-sctp-is-not-tcp.yaml");
    let output = netpol(&[
        "matrix",
        "--datapath",
        "nftables",
        "--port",
        "80",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("only `netpol check` runs it"),
        "{}",
        text(&output.stderr)
    );
}
