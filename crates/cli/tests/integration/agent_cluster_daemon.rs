//! The `netpol agent` binary in cluster mode against the in-process API server stand-in.

use crate::support;

use std::time::{Duration, Instant};

use netpol_testkit::apiserver::ApiServer;
use serde_json::json;
use support::*;

/// How long any awaited condition may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// The `netpol agent` binary in cluster mode against the stand-in: it becomes ready with an
/// invalid object skipped, and however large the objects and errors, its log lines stay short
/// and never carry an object's body.
#[test]
fn the_daemon_keeps_its_log_lines_short_and_free_of_object_bodies() {
    let server = ApiServer::with_example_cluster();
    let huge = "X".repeat(100_000);
    server.apply(json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "huge", "namespace": "shop"},
        "spec": {"endpointSelector": {}, "ingress": huge},
    }));
    // The agent lists in pages by default: its first NetworkPolicy list page fails here with a
    // huge message.
    server.fail_lists_saying("NetworkPolicy", &[500], &huge);
    let dir = scratch_dir("cluster-daemon");
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig);
    let address = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap()
    };
    let log = dir.join("agent.log");
    let mut agent = std::process::Command::new(env!("CARGO_BIN_EXE_netpol"))
        .args([
            "agent",
            "--datapath",
            "hcn-sim",
            "--node",
            NODE,
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .args(["--listen", &address.to_string()])
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // Synced and ready (the refused object is enforced as designed), with /readyz naming the
    // refused object alone (bounded).
    let ready = || {
        std::net::TcpStream::connect(address).is_ok() && {
            let (code, body) = http_get(address, "/readyz");
            code == 200
                && body.starts_with("ok\nrefused policies: 1 policy object(s) refused")
                && body.contains("CiliumNetworkPolicy shop/huge")
                && body.len() < 2048
        }
    };
    let deadline = Instant::now() + PATIENCE;
    while !ready() {
        if Instant::now() > deadline {
            let _ = agent.kill();
            panic!("not ready: {}", std::fs::read_to_string(&log).unwrap());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, metrics) = http_get(address, "/metrics");
    agent.kill().unwrap();
    agent.wait().unwrap();
    for line in [
        "netpol_policies{kind=\"CiliumNetworkPolicy\",validity=\"invalid\"} 1",
        "netpol_policies{kind=\"CiliumNetworkPolicy\",validity=\"valid\"} 1",
        "netpol_watch_errors_total{kind=\"NetworkPolicy\"} 1",
        "netpol_endpoints 6",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line:?} in:\n{metrics}"
        );
    }
    // The failed request was a paged list, and the kind was then listed again in pages; no
    // streaming list was asked for (`--streaming-lists` is off by default).
    let lists = server.lists_of("NetworkPolicy");
    assert!(lists.len() >= 2, "{lists:?}");
    let streaming: Vec<String> = server
        .watches_of("NetworkPolicy")
        .into_iter()
        .filter(|r| r.contains("sendInitialEvents=true"))
        .collect();
    assert!(streaming.is_empty(), "a streaming list: {streaming:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("shop/huge"),
        "the invalid object is named:\n{text}"
    );
    let longest = text.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 2048, "a log line of {longest} bytes");
    assert!(
        !text.contains(&"X".repeat(1000)),
        "an object body in the log"
    );
}
