//! Cluster mode against embedded mode at the same size: peak RSS of the long-running agent once
//! it is ready.
//!
//! `cargo bench -p netpol-cli --bench cluster_memory` writes a synthetic cluster with
//! `netpol synth` (`NETPOL_MEMORY_PODS`, default 10,000 pods), serves it from the list/watch
//! stand-in for kube-apiserver the protocol tests use, and starts the release binary twice: once
//! watching the stand-in through a kubeconfig, once following the YAML files. Each run is polled
//! on `/readyz` until ready, then its `VmHWM` is read and it is stopped.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use netpol_testkit::apiserver;
use serde_json::Value;

fn main() {
    let netpol = env!("CARGO_BIN_EXE_netpol");
    let pods: u64 = std::env::var("NETPOL_MEMORY_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let work = std::env::temp_dir().join(format!("netpol-memory-{}", std::process::id()));
    let cluster = work.join("cluster");
    let synth = Command::new(netpol)
        .args(["synth", "--pods", &pods.to_string(), "--out"])
        .arg(&cluster)
        .status()
        .expect("netpol synth runs");
    assert!(synth.success());

    let server = apiserver::ApiServer::start();
    let objects = load_objects(&cluster, &server);
    let kubeconfig = work.join("kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_text(server.address)).unwrap();

    let cluster_mode = measure(netpol, &["--kubeconfig".as_ref(), kubeconfig.as_os_str()]);
    let embedded = measure(netpol, &["--from-dir".as_ref(), cluster.as_os_str()]);
    println!("| mode | pods | objects | ready after s | peak RSS MB |");
    println!("|---|---|---|---|---|");
    for (mode, (ready, rss)) in [("cluster", cluster_mode), ("embedded", embedded)] {
        println!(
            "| {mode} | {pods} | {objects} | {:.1} | {:.0} |",
            ready.as_secs_f64(),
            rss as f64 / 1e6
        );
    }
    println!(
        "cluster mode uses {:.0}% of embedded mode's peak RSS",
        100.0 * cluster_mode.1 as f64 / embedded.1 as f64
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&work);
}

/// Serves every object of the synthetic cluster, `kind: List` files unpacked.
fn load_objects(dir: &Path, server: &apiserver::ApiServer) -> usize {
    let mut count = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let documents: Vec<Value> = serde_saphyr::from_multiple_with_options(
            &text,
            netpol_api::yaml_options_for(text.len()),
        )
        .unwrap();
        for document in documents.into_iter().filter(|d| !d.is_null()) {
            let items = match document.get("items") {
                Some(Value::Array(items)) => items.clone(),
                _ => vec![document],
            };
            for item in items {
                server.apply(item);
                count += 1;
            }
        }
    }
    count
}

fn kubeconfig_text(address: SocketAddr) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: standin\n  cluster:\n    server: http://{address}\n\
         contexts:\n- name: standin\n  context:\n    cluster: standin\n    user: nobody\n\
         current-context: standin\nusers:\n- name: nobody\n  user: {{}}\n"
    )
}

/// Starts the agent with `source`, waits until `/readyz` says ready, and returns how long that
/// took and the process's peak RSS in bytes.
fn measure(netpol: &str, source: &[&std::ffi::OsStr]) -> (Duration, u64) {
    let listen = free_port();
    let started = Instant::now();
    let mut child: Child = Command::new(netpol)
        .args([
            "agent",
            "--node",
            "node-1",
            "--datapath",
            "hcn-sim",
            "--listen",
        ])
        .arg(listen.to_string())
        .args(source)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("netpol agent starts");
    let deadline = started + Duration::from_secs(600);
    while !ready(listen) {
        assert!(Instant::now() < deadline, "the agent never became ready");
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the agent exited with {status}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let ready_after = started.elapsed();
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmHWM in /proc/PID/status");
    (ready_after, rss_kb * 1024)
}

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

fn ready(address: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.1 200")
}
