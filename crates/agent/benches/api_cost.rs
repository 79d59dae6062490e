//! What one agent's start costs the API server, and what an idle agent costs it: bytes and
//! requests counted by the list/watch stand-in while the agent's real followers list and watch
//! every kind of a cluster of realistic pods (about 6 KB of JSON each, as a real API server
//! serves them: `netpol_testkit::realistic`), until every kind is listed; then an idle window.
//! Each way of listing is measured on its own: paged lists with gzip accepted (the default;
//! the stand-in compresses responses from 128 KiB as kube-apiserver does), streaming lists from
//! the watch cache (`--streaming-lists`; a watch is never compressed), and the fallback to pages
//! on a server that refuses streaming lists.
//!
//! `cargo bench -p netpol-agent --bench api_cost` (`NETPOL_API_COST_PODS`, default 10,000;
//! `NETPOL_API_COST_IDLE_MS`, the idle window, default 2,000). Bytes and requests do not depend
//! on the build profile: `cargo test -p netpol-agent --release --bench api_cost` or a debug
//! build gives the same counts. Not a timed test: the figures are printed, not asserted.

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::runtime::watcher::Event;
use netpol_agent::driver::Input;
use netpol_agent::health::Health;
use netpol_agent::metrics::Metrics;
use netpol_agent::sources::cluster::{spawn_watches, Sinks, WatchConfig};
use netpol_agent::SourceKind;
use netpol_testkit::apiserver::{ApiServer, TrafficCount};
use netpol_testkit::realistic;
use prometheus_client::registry::Registry;
use serde_json::json;

fn main() {
    let var = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let pods = var("NETPOL_API_COST_PODS", 10_000) as usize;
    let idle = Duration::from_millis(var("NETPOL_API_COST_IDLE_MS", 2_000));
    println!("| lists | pods | requests at start | lists | watches | MB read at start | bytes per pod | requests in {} s idle (non-watch) |", idle.as_secs_f64());
    println!("|---|---|---|---|---|---|---|---|");
    for (name, streaming, refused) in [
        ("paged, gzip (default)", false, false),
        ("streaming (--streaming-lists)", true, false),
        ("streaming refused → paged", true, true),
    ] {
        let server = cluster(pods);
        if refused {
            server.refuse_streaming_lists();
        }
        let config = WatchConfig {
            streaming_lists: streaming,
            ..WatchConfig::default()
        };
        let (start, idle_cost) = agent_start(&server, config, idle);
        println!(
            "| {name} | {pods} | {} | {} | {} | {:.1} | {:.0} | {} ({}) |",
            start.requests(),
            start.lists,
            start.watches,
            start.bytes() as f64 / 1e6,
            start.bytes() as f64 / pods.max(1) as f64,
            idle_cost.requests(),
            idle_cost.non_watch_requests()
        );
    }
}

/// The example cluster's policies with `pods` realistic pods on `pods / 100` nodes in 50
/// namespaces.
fn cluster(pods: usize) -> ApiServer {
    let server = ApiServer::with_example_cluster();
    let nodes = (pods / 100).max(1);
    for n in 0..50 {
        server.preload(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": format!("ns-{n}"), "labels": {"kubernetes.io/metadata.name": format!("ns-{n}")}}}));
    }
    for n in 0..nodes {
        server.preload(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("node-{n}"), "labels": {"kubernetes.io/os": "linux"}},
            "status": {"addresses": [{"type": "InternalIP", "address": format!("192.168.{}.{}", n / 250, n % 250 + 1)}]}}));
    }
    for i in 0..pods {
        server.preload(realistic::pod(i, nodes));
    }
    server
}

/// Starts the agent's followers, takes their inputs until every kind is listed, and returns
/// the traffic until then, and during the idle window after.
fn agent_start(
    server: &ApiServer,
    config: WatchConfig,
    idle: Duration,
) -> (TrafficCount, TrafficCount) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (inputs, receiver) = mpsc::sync_channel(1024);
    let before = server.traffic();
    {
        let _entered = runtime.enter();
        let mut registry = Registry::default();
        let sinks = Sinks {
            inputs,
            metrics: Metrics::register(&mut registry),
            health: Arc::new(Health::default()),
        };
        spawn_watches(&server.client(), &sinks, config);
    }
    let mut listed = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(600);
    while listed.len() < SourceKind::ALL.len() {
        assert!(
            Instant::now() < deadline,
            "not every kind listed: {listed:?}"
        );
        if let Ok(Input::Event(event)) = receiver.recv_timeout(Duration::from_millis(100)) {
            if matches!(event.event, Event::InitDone) {
                listed.insert(event.kind);
            }
        }
    }
    let start = server.traffic().since(&before);
    let idle_from = server.traffic();
    let until = Instant::now() + idle;
    while Instant::now() < until {
        let _ = receiver.recv_timeout(Duration::from_millis(50));
    }
    let idle_cost = server.traffic().since(&idle_from);
    runtime.shutdown_background();
    (start, idle_cost)
}
