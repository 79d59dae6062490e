//! The agent's HTTP endpoints over real HTTP on loopback: a bounded number of requests, each with
//! a timeout, and a server that is shut down at the end.

use crate::agent_support;

use std::sync::Arc;

use agent_support::*;
use netpol_agent::health::{self, Health};

#[test]
fn metrics_and_probes_are_served_over_http() {
    // An agent that has synced the example cluster, so that the metrics have values.
    let dir = scratch_dir("http");
    copy_example_cluster(&dir);
    let sim = new_sim();
    let mut agent = Agent::start(&dir, &sim);
    assert!(agent.sync().complete());

    let health = Arc::new(Health::default());
    health.heartbeat();
    let registry = Arc::new(std::mem::take(&mut agent.registry));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = runtime.spawn(health::serve(listener, health.clone(), registry, async {
        let _ = stopped.await;
    }));
    // The runtime serves on its own thread while this one makes blocking requests.
    let serving = std::thread::spawn(move || runtime.block_on(server));

    let (status, metrics) = http_get(address, "/metrics");
    assert_eq!(status, 200);
    for line in [
        "netpol_endpoints 6",
        "netpol_policies{kind=\"NetworkPolicy\",validity=\"valid\"} 4",
        "netpol_policies{kind=\"AdminNetworkPolicy\",validity=\"valid\"} 2",
        "netpol_policies{kind=\"CiliumClusterwideNetworkPolicy\",validity=\"valid\"} 1",
        "netpol_datapath_calls_total{call=\"add_policies\"} 6",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "missing {line:?} in:\n{metrics}"
        );
    }
    for family in [
        "netpol_identities",
        "netpol_mapstate_entries",
        "netpol_acl_rules",
        "netpol_datapath_call_duration_seconds_bucket",
        "netpol_reconcile_duration_seconds_count",
        "netpol_last_sync_timestamp_seconds",
    ] {
        assert!(metrics.contains(family), "missing {family} in:\n{metrics}");
    }
    assert!(metrics.trim_end().ends_with("# EOF"));

    assert_eq!(http_get(address, "/healthz").0, 200);
    let (status, reason) = http_get(address, "/readyz");
    assert_eq!(status, 503);
    assert!(reason.contains("first full sync"), "{reason}");
    health.set_synced();
    assert_eq!(http_get(address, "/readyz").0, 200);
    health.set_datapath_answers(false);
    let (status, reason) = http_get(address, "/readyz");
    assert_eq!(
        (status, reason.trim()),
        (503, "the datapath does not answer")
    );
    health.stopped();
    assert_eq!(http_get(address, "/healthz").0, 503);
    assert_eq!(http_get(address, "/nothing-here").0, 404);

    stop.send(()).unwrap();
    serving.join().unwrap().unwrap().unwrap();
}
