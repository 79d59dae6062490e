//! Cluster mode against embedded mode at the same size: peak RSS and CPU of the long-running
//! agent once it is ready.
//!
//! `cargo bench -p netpol-cli --bench cluster_memory` writes a synthetic cluster with
//! `netpol-dev synth` (`NETPOL_MEMORY_PODS`, default 10,000 pods; `NETPOL_MEMORY_WORKLOADS`, default
//! `deployments`; `NETPOL_MEMORY_NODES`, default one per 100 pods), serves it from the list/watch
//! stand-in for kube-apiserver the protocol tests use, and starts the release binary twice: once
//! watching the stand-in through a kubeconfig, once following the cluster's files (written in
//! `NETPOL_MEMORY_FORMAT`: `list`, the default, `multidoc` or `json`). Each run is polled on
//! `/readyz` until ready, then its `VmHWM` and CPU time are read and it is stopped.
//!
//! `NETPOL_MEMORY_CIDR=KIND:COUNT[:SELECTS]` adds CIDR-heavy policies (`netpol-dev cidr`, issue
//! 33) to both: e.g. `cilium:400`, 400 CiliumNetworkPolicies of 50,000 `/32`s from one
//! namespace. An agent refusing some over budget stays ready (`/readyz` names them beside
//! "ok"), and the row says how many it refused.
//!
//! With `NETPOL_MEMORY_CIDR_WATCHED=1` the CIDR-heavy policies come later, to the cluster-mode
//! agent alone: they are served once it is ready, reach it as watch events, and its peak is
//! read once it counts them (a running agent meeting large policies; the embedded agent then
//! runs without them).
//!
//! `NETPOL_MEMORY_REALISTIC=1` serves the pods as a real API server does (about 6 KB of JSON
//! each: `netpol_testkit::realistic::dress` adds managedFields, the container spec and the
//! status, and nothing a policy reads), so that cluster mode and the tools' `--cluster` pay
//! for skipping what they do not read (issue 36); the embedded agent reads the lean files.
//!
//! Then the authoring tools read the same live cluster (`--cluster`, the stand-in over HTTP,
//! paged lists) and answer: `explain` of one flow, `lint`, a what-if `diff --cluster --delete`
//! of one policy, and `matrix` in text and JSON; each is timed whole (read, build, decide, write)
//! in wall and CPU seconds with its peak RSS (`NETPOL_MEMORY_TOOLS=0` skips them).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use netpol_testkit::apiserver;
use serde_json::Value;

fn main() {
    let netpol = env!("CARGO_BIN_EXE_netpol");
    let var = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    let pods: u64 = var("NETPOL_MEMORY_PODS", "10000")
        .parse()
        .expect("NETPOL_MEMORY_PODS is a number");
    let workloads = var("NETPOL_MEMORY_WORKLOADS", "deployments");
    let format = var("NETPOL_MEMORY_FORMAT", "list");
    let nodes = std::env::var("NETPOL_MEMORY_NODES").ok();
    let work = std::env::temp_dir().join(format!("netpol-memory-{}", std::process::id()));
    // The stand-in is loaded from JSON (fast to read here); the embedded agent reads `format`.
    let synth = |format: &str, out: &Path| {
        let pods = pods.to_string();
        let out = out.to_str().expect("a UTF-8 scratch path");
        let mut args = vec!["synth", "--pods", &pods, "--workloads", &workloads];
        args.extend(["--format", format, "--out", out]);
        if let Some(nodes) = &nodes {
            args.extend(["--nodes", nodes]);
        }
        netpol_dev::run(args, &mut std::io::stdout()).expect("netpol-dev synth writes the cluster");
    };
    let served_files = work.join("served");
    synth("json", &served_files);
    let cluster = work.join("cluster");
    synth(&format, &cluster);

    let server = apiserver::ApiServer::start();
    let realistic = std::env::var("NETPOL_MEMORY_REALISTIC").as_deref() == Ok("1");
    let served = load_objects(&served_files, &server, realistic);
    let _ = std::fs::remove_dir_all(&served_files);
    let cidr = std::env::var("NETPOL_MEMORY_CIDR").ok();
    let watched = std::env::var("NETPOL_MEMORY_CIDR_WATCHED").as_deref() == Ok("1");
    if let (Some(spec), false) = (&cidr, watched) {
        add_cidr_policies(spec, &server, &cluster);
    }
    let objects = served.len();
    let kubeconfig = work.join("kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_text(server.address)).unwrap();

    let later = |listen: SocketAddr, agent: u32| {
        let spec = cidr
            .as_deref()
            .expect("NETPOL_MEMORY_CIDR names the policies");
        let before = policies_counted(listen);
        let at_ready = peak_of(agent);
        let started = Instant::now();
        let added = add_cidr_policies(spec, &server, &work.join("watched"));
        while policies_counted(listen) < before + added {
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "never counted"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        println!(
            "{added} CIDR-heavy policies ({spec}) watched by the ready cluster-mode agent: \
             counted after {:.1} s; peak RSS {:.0} MB at ready",
            started.elapsed().as_secs_f64(),
            at_ready as f64 / 1e6
        );
    };
    let cluster_mode = measure(
        netpol,
        &["--kubeconfig".as_ref(), kubeconfig.as_os_str()],
        watched.then_some(&later as &dyn Fn(SocketAddr, u32)),
    );
    let embedded = measure(netpol, &["--from-dir".as_ref(), cluster.as_os_str()], None);
    println!("| mode | pods | workloads | files | objects | identities | refused | ready after s | CPU s | peak RSS MB |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (mode, files, run) in [
        (
            if realistic {
                "cluster, realistic pods"
            } else {
                "cluster"
            },
            "-",
            cluster_mode,
        ),
        ("embedded", format.as_str(), embedded),
    ] {
        println!(
            "| {mode} | {pods} | {workloads} | {files} | {objects} | {} | {} | {:.1} | {:.2} | {:.0} |",
            run.identities,
            run.refused,
            run.ready.as_secs_f64(),
            run.cpu_seconds,
            run.peak_rss as f64 / 1e6
        );
    }
    println!(
        "cluster mode uses {:.0}% of embedded mode's peak RSS",
        100.0 * cluster_mode.peak_rss as f64 / embedded.peak_rss as f64
    );
    if std::env::var("NETPOL_MEMORY_TOOLS").as_deref() != Ok("0") {
        tools_against_the_live_cluster(netpol, &served, &kubeconfig, pods);
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&work);
}

/// Serves the CIDR-heavy policies `KIND:COUNT[:SELECTS]` and writes them into the cluster's
/// files; returns how many.
fn add_cidr_policies(spec: &str, server: &apiserver::ApiServer, cluster: &Path) -> usize {
    std::fs::create_dir_all(cluster).unwrap();
    let file = cluster.join("cidr-heavy.json");
    netpol_dev::cidr::write_spec(spec, &file).expect("netpol-dev cidr writes the policies");
    let text = std::fs::read_to_string(file).unwrap();
    let mut list: Value = serde_json::from_str(&text).unwrap();
    drop(text);
    let Value::Array(items) = list["items"].take() else {
        return 0;
    };
    let count = items.len();
    for item in items {
        server.apply(item);
    }
    count
}

/// The policy objects the agent counts, valid or not (`netpol_policies`).
fn policies_counted(address: SocketAddr) -> usize {
    let metrics = get(address, "/metrics").unwrap_or_default();
    metrics
        .lines()
        .filter(|l| l.starts_with("netpol_policies{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<usize>().ok())
        .sum()
}

/// A process's peak RSS so far, in bytes.
fn peak_of(pid: u32) -> u64 {
    vm_hwm_kb(&std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap()) * 1024
}

fn vm_hwm_kb(status: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

/// Serves every object of the synthetic cluster (its JSON files, `kind: List`s unpacked);
/// returns each object's kind and `namespace/name`.
fn load_objects(
    dir: &Path,
    server: &apiserver::ApiServer,
    realistic: bool,
) -> Vec<(String, String)> {
    let mut served = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let mut document: Value = serde_json::from_str(&text).unwrap();
        let items = match document.get_mut("items").map(Value::take) {
            Some(Value::Array(items)) => items,
            _ => vec![document],
        };
        for mut item in items {
            let text = |field: &str| item["metadata"][field].as_str().unwrap_or("").to_string();
            let kind = item["kind"].as_str().unwrap_or("").to_string();
            served.push((kind, format!("{}/{}", text("namespace"), text("name"))));
            if realistic && item["kind"] == "Pod" {
                netpol_testkit::realistic::dress(&mut item);
            }
            // Served from the start: no watch event kept for it (150,000 realistic pods kept
            // twice would be gigabytes).
            server.preload(item);
        }
    }
    served
}

/// The authoring tools on the live cluster, each a process of its own, measured whole.
fn tools_against_the_live_cluster(
    netpol: &str,
    served: &[(String, String)],
    kubeconfig: &Path,
    pods: u64,
) {
    let keys = |kind: &str| -> Vec<&str> {
        served
            .iter()
            .filter(|(k, _)| k == kind)
            .map(|(_, key)| key.as_str())
            .collect()
    };
    let pod_keys = keys("Pod");
    let (from, to) = (pod_keys[0], pod_keys[pod_keys.len() / 2]);
    let policy = *keys("NetworkPolicy")
        .first()
        .expect("the synthetic cluster has NetworkPolicies");
    let delete = format!("NetworkPolicy/{policy}");
    let kubeconfig = kubeconfig.to_str().unwrap();
    let runs: [(&str, Vec<&str>); 5] = [
        ("explain", vec!["explain", "--cluster", from, to, "TCP/80"]),
        ("lint", vec!["lint", "--cluster"]),
        (
            "diff --delete",
            vec!["diff", "--cluster", "--delete", &delete],
        ),
        (
            "matrix (text)",
            vec!["matrix", "--cluster", "--protocol", "TCP", "--port", "80"],
        ),
        (
            "matrix (json)",
            vec![
                "matrix",
                "--cluster",
                "--protocol",
                "TCP",
                "--port",
                "80",
                "-o",
                "json",
            ],
        ),
    ];
    println!();
    println!("| `--cluster` tool | pods | exit | output MB | wall s | CPU s | peak RSS MB |");
    println!("|---|---|---|---|---|---|---|");
    for (name, args) in runs {
        let run = run_measured(netpol, &args, kubeconfig);
        println!(
            "| {name} | {pods} | {} | {:.1} | {:.2} | {:.2} | {:.0} |",
            run.exit,
            run.output_bytes as f64 / 1e6,
            run.wall.as_secs_f64(),
            run.cpu_seconds,
            run.peak_rss as f64 / 1e6
        );
        // 0 and 1 are answers (1: findings, or changes); 2 is a failure to answer.
        assert!(
            run.exit == 0 || run.exit == 1,
            "{name} failed with exit {}",
            run.exit
        );
        assert!(run.output_bytes > 0, "{name} printed nothing");
    }
}

/// What one measured run of the tool took.
struct Measured {
    exit: i32,
    output_bytes: u64,
    wall: Duration,
    cpu_seconds: f64,
    peak_rss: u64,
}

/// Runs `netpol ARGS` with `KUBECONFIG`, its output counted and dropped, and reads its own
/// resource use from `wait4` (not the sum over every child, as `RUSAGE_CHILDREN` gives).
// wait4 reaps the child, which clippy cannot see.
#[allow(clippy::zombie_processes)]
fn run_measured(netpol: &str, args: &[&str], kubeconfig: &str) -> Measured {
    // The peak RSS is taken by /usr/bin/time, whose own small process is what netpol's is
    // started from: a process started from this one (which holds the served cluster, hundreds
    // of megabytes) inherits this one's peak as its own `ru_maxrss`, since Linux carries the
    // high-water mark across exec.
    let peak_file = std::env::temp_dir().join(format!("netpol-peak-{}", std::process::id()));
    let started = Instant::now();
    let mut child = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&peak_file)
        .arg(netpol)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("netpol starts");
    let mut stdout = child.stdout.take().unwrap();
    let counter = std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    let mut status = 0;
    // SAFETY: wait4 writes the child's status and usage into the values it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4");
    let wall = started.elapsed();
    let output_bytes = counter.join().unwrap().unwrap_or(0);
    let seconds = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    let peak = std::fs::read_to_string(&peak_file).unwrap_or_default();
    let _ = std::fs::remove_file(&peak_file);
    Measured {
        exit: if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            -1
        },
        output_bytes,
        wall,
        cpu_seconds: seconds(usage.ru_utime) + seconds(usage.ru_stime),
        peak_rss: peak
            .lines()
            .last()
            .and_then(|line| line.trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024),
    }
}

fn kubeconfig_text(address: SocketAddr) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: standin\n  cluster:\n    server: http://{address}\n\
         contexts:\n- name: standin\n  context:\n    cluster: standin\n    user: nobody\n\
         current-context: standin\nusers:\n- name: nobody\n  user: {{}}\n"
    )
}

/// What one long-running agent took until it was ready.
#[derive(Clone, Copy)]
struct Ready {
    ready: Duration,
    /// User and system CPU time until then.
    cpu_seconds: f64,
    peak_rss: u64,
    /// Security identities the agent holds (`netpol_identities`).
    identities: u64,
    /// Policy objects refused (`/readyz` names them).
    refused: u64,
}

/// Starts the agent with `source`, waits until `/readyz` says ready, and returns how long that
/// took, the CPU it used and the process's peak RSS in bytes; with `once_ready`, what it is
/// given to do to the ready agent (its address and process id) is done before they are read.
fn measure(
    netpol: &str,
    source: &[&std::ffi::OsStr],
    once_ready: Option<&dyn Fn(SocketAddr, u32)>,
) -> Ready {
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
    while !ready_for_the_rest(listen) {
        if Instant::now() >= deadline {
            // Not left running after the bench.
            let _ = child.kill();
            let _ = child.wait();
            panic!("the agent never became ready");
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the agent exited with {status}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let ready_after = started.elapsed();
    if let Some(then) = once_ready {
        then(listen, child.id());
    }
    let identities = gauge(listen, "netpol_identities").unwrap_or(0);
    let refused = get(listen, "/readyz")
        .and_then(|r| {
            let at = r.find(" policy object(s) refused")?;
            r[..at].rsplit(' ').next()?.parse().ok()
        })
        .unwrap_or(0);
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let rss_kb = vm_hwm_kb(&status);
    // utime and stime, the 14th and 15th fields, counted after the command name's parenthesis.
    let fields: Vec<&str> = stat[stat.rfind(')').expect("(comm)") + 2..]
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ready {
        ready: ready_after,
        cpu_seconds: ticks / per_second,
        peak_rss: rss_kb * 1024,
        identities,
        refused,
    }
}

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// Ready: refused policies do not make an agent not ready (`/readyz` names them beside "ok").
fn ready_for_the_rest(address: SocketAddr) -> bool {
    get(address, "/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 200"))
}

/// The response to `GET path`, if the agent answered.
fn get(address: SocketAddr, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_millis(200)).ok()?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    Some(response)
}

/// A gauge's value in the agent's `/metrics`.
fn gauge(address: SocketAddr, name: &str) -> Option<u64> {
    let metrics = get(address, "/metrics")?;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))?
        .trim()
        .parse()
        .ok()
}
