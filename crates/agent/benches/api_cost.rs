//! What one agent's start costs the API server, and what an idle agent costs it: bytes and
//! requests counted by the list/watch stand-in while the agent's real followers list and watch
//! every kind of a cluster of realistic pods (about 6 KB of JSON each, as a real API server
//! serves them: `netpol_testkit::realistic`), until every kind is listed; then an idle window.
//! Each way of listing is measured on its own: paged lists with gzip accepted (the default;
//! the stand-in compresses responses from 128 KiB as kube-apiserver does), streaming lists from
//! the watch cache (`--streaming-lists`; a watch is never compressed), and the fallback to pages
//! on a server that refuses streaming lists.
//!
//! Each start also reports the CPU time of the agent's runtime threads (listing, watching and
//! decoding every object, up to the reconcile loop's channel: the stand-in's threads are not
//! counted) and how far the start raised the process's peak RSS (the stand-in's pre-rendered
//! pages are counted before the start, not in it).
//!
//! Slice mode (`--source slices`) is measured after `netpol controller` has published the
//! cluster as NetpolEndpointSlices: the agent reads the slices and its own node's Pods
//! (`fieldSelector=spec.nodeName=node-0`). The controller runs in a process of its own (this
//! bench started again with `NETPOL_API_COST_CONTROLLER` set), so that its CPU time and peak
//! RSS are its own; it is paused (SIGSTOP) while the agent starts and idles, so that its Lease
//! renewals are not counted as the agent's. Its cost is printed below the table: the writes
//! to publish the cluster, its CPU and peak RSS until then, how long a pod change took to reach
//! its slice, and how long a change of a pod on another node took to reach the agent's inputs
//! (what the reconcile loop then programs, after its debounce).
//!
//! `cargo bench -p netpol-agent --bench api_cost` (`NETPOL_API_COST_PODS`, default 10,000;
//! `NETPOL_API_COST_IDLE_MS`, the idle window, default 2,000; `NETPOL_API_COST_ROWS=paged,slices`
//! measures only the rows whose names start so). Bytes and requests do not depend
//! on the build profile: `cargo test -p netpol-agent --release --bench api_cost` or a debug
//! build gives the same counts. Not a timed test: the figures are printed, not asserted.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use netpol_agent::controller::{self, ControllerConfig};
use netpol_agent::driver::Input;
use netpol_agent::health::Health;
use netpol_agent::metrics::Metrics;
use netpol_agent::sources::cluster::{spawn_watches, PodSource, Sinks, WatchConfig};
use netpol_agent::SourceKind;
use netpol_indexes::Event;
use netpol_testkit::apiserver::{ApiServer, TrafficCount};
use netpol_testkit::realistic;
use prometheus_client::registry::Registry;
use serde_json::json;

// The `netpol` binary's allocator: the agent's and the controller's CPU and peak RSS are
// measured as they are in the binary.
netpol_agent::use_mimalloc!();

/// Set in the controller's own process: the kubeconfig to use.
const CONTROLLER_CHILD: &str = "NETPOL_API_COST_CONTROLLER";

fn main() {
    if let Some(kubeconfig) = std::env::var_os(CONTROLLER_CHILD) {
        let listen = "127.0.0.1:0".parse().unwrap();
        let config =
            ControllerConfig::new(Some(kubeconfig.into()), listen, "netpol-system", "bench");
        controller::run(&config).unwrap();
        return;
    }
    let var = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let pods = var("NETPOL_API_COST_PODS", 10_000) as usize;
    let idle = Duration::from_millis(var("NETPOL_API_COST_IDLE_MS", 2_000));
    // The rows to measure, by the start of their name (`paged,slices`); all by default.
    let rows: Option<Vec<String>> = std::env::var("NETPOL_API_COST_ROWS")
        .ok()
        .map(|r| r.split(',').map(str::to_owned).collect());
    println!("| lists | pods | requests at start | lists | watches | MB read at start | bytes per pod | agent CPU s | peak RSS added MB | requests in {} s idle (non-watch) |", idle.as_secs_f64());
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut published: Option<(Published, Controller)> = None;
    for (name, streaming, refused, sliced) in [
        ("paged, gzip (default)", false, false, false),
        ("streaming (--streaming-lists)", true, false, false),
        ("streaming refused → paged", true, true, false),
        ("slices (--source slices), paged", false, false, true),
    ]
    .into_iter()
    .filter(|row| {
        rows.as_ref()
            .is_none_or(|rows| rows.iter().any(|r| row.0.starts_with(r)))
    }) {
        let server = cluster(pods);
        if refused {
            server.refuse_streaming_lists();
        }
        let config = WatchConfig {
            streaming_lists: streaming,
            ..WatchConfig::default()
        };
        let source = if sliced {
            published = Some(publish(&server, pods));
            PodSource::Slices {
                node: "node-0".into(),
            }
        } else {
            PodSource::Pods
        };
        let (start, idle_cost) = agent_start(&server, config, idle, &source, |inputs| {
            if let Some((published, controller)) = &mut published {
                controller.signal("CONT");
                published.to_agent_ms = Some(change_to_agent(&server, pods, inputs));
            }
        });
        println!(
            "| {name} | {pods} | {} | {} | {} | {:.1} | {:.0} | {:.2} | {:.0} | {} ({}) |",
            start.traffic.requests(),
            start.traffic.lists,
            start.traffic.watches,
            start.traffic.bytes() as f64 / 1e6,
            start.traffic.bytes() as f64 / pods.max(1) as f64,
            start.cpu.as_secs_f64(),
            start.peak_rss_added as f64 / 1e6,
            idle_cost.requests(),
            idle_cost.non_watch_requests()
        );
    }
    if let Some((published, controller)) = published {
        drop(controller);
        println!();
        println!("| controller | pods | slices | requests to publish (slices, Lease) | CPU s | peak RSS MB (its process) | a pod change in its slice, ms | a remote pod change in an agent's inputs, ms |");
        println!("|---|---|---|---|---|---|---|---|");
        println!(
            "| netpol controller | {pods} | {} | {} | {:.2} | {:.0} | {} | {} |",
            published.slices,
            published.writes,
            published.cpu.as_secs_f64(),
            published.peak_rss as f64 / 1e6,
            published.change_ms,
            published
                .to_agent_ms
                .map_or_else(|| "-".to_owned(), |ms| ms.to_string()),
        );
    }
}

/// The controller's process, killed when dropped.
struct Controller(std::process::Child);

impl Controller {
    /// Sends the process `signal` (`STOP`, `CONT`).
    fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.0.id().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} failed");
    }

    fn proc(&self) -> std::path::PathBuf {
        Path::new("/proc").join(self.0.id().to_string())
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.signal("CONT");
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Relabels a pod of another node than the agent's and returns how long, in ms, until the
/// agent's inputs hold its slice with the new label.
fn change_to_agent(server: &ApiServer, pods: usize, inputs: &mpsc::Receiver<Input>) -> u128 {
    let nodes = nodes(pods);
    // The pods are dealt to the nodes in turn: pod 1 is on node-1 (node-0 with one node).
    let mut pod = realistic::pod(1.min(pods - 1), nodes);
    pod["metadata"]["labels"]["bench"] = json!("changed-again");
    let changed = Instant::now();
    server.apply(pod);
    let deadline = changed + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "the change never reached the agent"
        );
        let Ok(Input::Slice(event)) = inputs.recv_timeout(Duration::from_millis(50)) else {
            continue;
        };
        let Event::Apply(slice) = *event else {
            continue;
        };
        let labelled = slice
            .spec
            .label_sets
            .iter()
            .any(|labels| labels.get("bench").map(String::as_str) == Some("changed-again"));
        if labelled {
            return changed.elapsed().as_millis();
        }
    }
}

/// What publishing the cluster cost the controller.
struct Published {
    slices: usize,
    writes: u64,
    /// CPU time of the controller's process, until everything was published.
    cpu: Duration,
    /// The controller process's peak RSS, in bytes, until then.
    peak_rss: u64,
    /// From a pod's relabel on the server to its slice holding the new label.
    change_ms: u128,
    /// From a remote pod's relabel on the server to the agent's inputs holding it.
    to_agent_ms: Option<u128>,
}

/// Starts `netpol controller` in a process of its own (this bench again), waits until the
/// server's slices hold every pod with an address, measures a change's trip to its slice, and
/// returns with the controller paused.
fn publish(server: &ApiServer, pods: usize) -> (Published, Controller) {
    let dir = std::env::temp_dir().join(format!("netpol-api-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig);
    // Every realistic pod runs with an address: each is an endpoint.
    let expected = pods;
    let before = server.traffic();
    let controller = Controller(
        std::process::Command::new(std::env::current_exe().unwrap())
            .env(CONTROLLER_CHILD, &kubeconfig)
            .env("RUST_LOG", "warn")
            .spawn()
            .unwrap(),
    );
    let endpoints = |server: &ApiServer| -> usize {
        server
            .objects("NetpolEndpointSlice")
            .iter()
            .map(|s| s["spec"]["endpoints"].as_array().map_or(0, Vec::len))
            .sum()
    };
    let deadline = Instant::now() + Duration::from_secs(900);
    while endpoints(server) < expected {
        assert!(Instant::now() < deadline, "the slices never held every pod");
        std::thread::sleep(Duration::from_millis(200));
    }
    let cpu = process_cpu(&controller.proc());
    let peak_rss = status_kib(&controller.proc(), "VmHWM:") * 1024;
    let writes = server.traffic().since(&before).writable;
    // One pod relabelled: how long until its slice says so.
    let mut pod = realistic::pod(0, nodes(pods));
    pod["metadata"]["labels"]["bench"] = json!("changed");
    let changed = Instant::now();
    let mut writes_seen = server.traffic().writable;
    server.apply(pod);
    // Timed at the write that lands it (a cheap counter, read often), checked in the slices.
    let change_ms = loop {
        assert!(
            Instant::now() < deadline,
            "the change never reached its slice"
        );
        let writes = server.traffic().writable;
        if writes == writes_seen {
            std::thread::sleep(Duration::from_micros(200));
            continue;
        }
        let at = changed.elapsed().as_millis();
        writes_seen = writes;
        let landed = server
            .objects("NetpolEndpointSlice")
            .iter()
            .any(|s| s.to_string().contains("\"bench\":\"changed\""));
        if landed {
            break at;
        }
    };
    let slices = server.objects("NetpolEndpointSlice").len();
    controller.signal("STOP");
    let published = Published {
        slices,
        writes,
        cpu,
        peak_rss,
        change_ms,
        to_agent_ms: None,
    };
    (published, controller)
}

/// CPU time so far of a process's threads (`/proc/PID`), the ones that ended included.
fn process_cpu(process: &Path) -> Duration {
    // utime and stime, in clock ticks (100 a second), after the command's closing parenthesis.
    let stat = std::fs::read_to_string(process.join("stat")).unwrap();
    let fields: Vec<u64> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    Duration::from_millis((fields[11] + fields[12]) * 10)
}

/// The example cluster's policies with `pods` realistic pods on `pods / 100` nodes in 50
/// namespaces.
fn cluster(pods: usize) -> ApiServer {
    let server = ApiServer::with_example_cluster();
    let nodes = nodes(pods);
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

/// The cluster's nodes: 100 pods each.
fn nodes(pods: usize) -> usize {
    (pods / 100).max(1)
}

/// What one agent start cost.
struct Start {
    traffic: TrafficCount,
    /// CPU time of the agent's runtime threads.
    cpu: Duration,
    /// How far the start raised the process's peak RSS, in bytes.
    peak_rss_added: u64,
}

/// Starts the agent's followers, takes their inputs until every kind is listed, and returns
/// the start's cost, and the traffic during the idle window after.
fn agent_start(
    server: &ApiServer,
    config: WatchConfig,
    idle: Duration,
    source: &PodSource,
    then: impl FnOnce(&mpsc::Receiver<Input>),
) -> (Start, TrafficCount) {
    let threads = Arc::new(Mutex::new(Vec::new()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start({
            let threads = threads.clone();
            move || {
                if let Ok(link) = std::fs::read_link("/proc/thread-self") {
                    threads.lock().unwrap().push(link);
                }
            }
        })
        .build()
        .unwrap();
    let rss_before = reset_peak_rss();
    let (inputs, receiver) = mpsc::sync_channel(1024);
    let before = server.traffic();
    {
        let _entered = runtime.enter();
        let mut registry = Registry::default();
        let sinks = Sinks::new(
            inputs,
            Metrics::register(&mut registry),
            Arc::new(Health::default()),
        );
        spawn_watches(&server.client(), &sinks, config, source);
    }
    let mut listed = BTreeSet::new();
    let kinds = SourceKind::ALL.len() + usize::from(matches!(source, PodSource::Slices { .. }));
    let deadline = Instant::now() + Duration::from_secs(600);
    while listed.len() < kinds {
        assert!(
            Instant::now() < deadline,
            "not every kind listed: {listed:?}"
        );
        match receiver.recv_timeout(Duration::from_millis(100)) {
            Ok(Input::Event(event)) if matches!(event.event, Event::InitDone) => {
                listed.insert(event.kind);
            }
            Ok(Input::Slice(event)) if matches!(*event, Event::InitDone) => {
                listed.insert(SourceKind::NetpolEndpointSlice);
            }
            _ => {}
        }
    }
    let start = Start {
        traffic: server.traffic().since(&before),
        cpu: threads
            .lock()
            .unwrap()
            .iter()
            .map(|thread| cpu_time(&Path::new("/proc").join(thread)))
            .sum(),
        peak_rss_added: status_kib(Path::new("/proc/self"), "VmHWM:").saturating_sub(rss_before)
            * 1024,
    };
    let idle_from = server.traffic();
    let until = Instant::now() + idle;
    while Instant::now() < until {
        let _ = receiver.recv_timeout(Duration::from_millis(50));
    }
    let idle_cost = server.traffic().since(&idle_from);
    then(&receiver);
    runtime.shutdown_background();
    (start, idle_cost)
}

/// A thread's CPU time so far, from `/proc/PID/task/TID/schedstat` (nanoseconds on the CPU).
fn cpu_time(thread: &Path) -> Duration {
    std::fs::read_to_string(thread.join("schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .map_or(Duration::ZERO, Duration::from_nanos)
}

/// Resets the process's peak RSS to its current RSS (`clear_refs` 5) and returns it, in KiB.
fn reset_peak_rss() -> u64 {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    status_kib(Path::new("/proc/self"), "VmRSS:")
}

/// A figure of a process's `/proc/PID/status`, in KiB.
fn status_kib(process: &Path, field: &str) -> u64 {
    std::fs::read_to_string(process.join("status"))
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with(field))?;
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}
