//! The scale benchmark: `netpol agent --once` on synthetic clusters of every shape, form and
//! size.
//!
//! `cargo bench -p netpol-cli --bench scale` writes each cluster with `netpol-dev synth` and runs
//! the release binary on it in a process of its own, so that peak RSS is the run's own, and
//! prints one table row per run (the tables in docs/performance.md): the sync's own figures as
//! `--once` prints them, and the whole process's peak RSS and CPU (which add the summary's
//! evaluation of every pair of local pods in the simulated HCN). What runs:
//! - `NETPOL_SCALE_PODS`: comma-separated pod counts (default `10000,40000`; 150,000 pods takes
//!   minutes per run and up to 200 MB of disk in the temporary directory);
//! - `NETPOL_SCALE_WORKLOADS`: `deployments,statefulsets,daemonsets,jobs,mixed` (the default);
//! - `NETPOL_SCALE_FORMATS`: `list,multidoc,json` (the default);
//! - `NETPOL_SCALE_NODES`: nodes (default: one per 100 pods);
//! - `NETPOL_SCALE_CIDR`: CIDR-heavy policies added to the cluster (issue 33), comma-separated
//!   `KIND:COUNT[:SELECTS]` as `netpol-dev cidr` takes them (`none` for the cluster alone), e.g.
//!   `none,cilium:5,cilium:100,network-policy:5`; each is a run of its own (default `none`);
//! - `NETPOL_SCALE_DATAPATHS`: `hcn-sim` (the default) and `nftables` (run in a network namespace
//!   of its own, `unshare --net`, as root).
//!
//! The CIDR-heavy figures of docs/performance.md: `NETPOL_SCALE_PODS=1000
//! NETPOL_SCALE_WORKLOADS=deployments NETPOL_SCALE_FORMATS=list
//! NETPOL_SCALE_CIDR=none,cilium:5,cilium:100,network-policy:5 NETPOL_SCALE_DATAPATHS=hcn-sim,nftables
//! cargo bench -p netpol-cli --bench scale`. An agent that refuses a policy over its budget exits
//! 1 after programming the rest; the row counts the refused.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const DEFAULT_SIZES: &str = "10000,40000";
const DEFAULT_WORKLOADS: &str = "deployments,statefulsets,daemonsets,jobs,mixed";
const DEFAULT_FORMATS: &str = "list,multidoc,json";

/// What one run printed, read back from its summary.
#[derive(Debug, Default)]
struct Run {
    wall: f64,
    cpu: f64,
    rss_mb: f64,
    identities: u64,
    entries: u64,
    endpoints: u64,
    rules: u64,
    policies: u64,
    /// Policies refused (invalid or over a budget), as the summary counts them.
    refused: u64,
    /// The whole process's peak RSS and CPU.
    process_rss_mb: f64,
    process_cpu: f64,
}

fn list(variable: &str, default: &str) -> Vec<String> {
    std::env::var(variable)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not meaningful here.
    let netpol = env!("CARGO_BIN_EXE_netpol");
    let nodes = std::env::var("NETPOL_SCALE_NODES").ok();
    let work = std::env::temp_dir().join(format!("netpol-scale-{}", std::process::id()));
    println!(
        "| workloads | format | pods | CIDR-heavy policies | datapath | policies | refused | wall s | CPU s | peak RSS MB | process CPU s | process peak RSS MB | identities | MapState entries | local endpoints | HCN rules | RSS bytes/pod |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for workloads in list("NETPOL_SCALE_WORKLOADS", DEFAULT_WORKLOADS) {
        for format in list("NETPOL_SCALE_FORMATS", DEFAULT_FORMATS) {
            for (pods, cidr, datapath) in list("NETPOL_SCALE_PODS", DEFAULT_SIZES)
                .iter()
                .filter_map(|s| s.parse::<u64>().ok())
                .flat_map(|pods| {
                    list("NETPOL_SCALE_CIDR", "none")
                        .into_iter()
                        .map(move |cidr| (pods, cidr))
                })
                .flat_map(|(pods, cidr)| {
                    list("NETPOL_SCALE_DATAPATHS", "hcn-sim")
                        .into_iter()
                        .map(move |datapath| (pods, cidr.clone(), datapath))
                })
            {
                let dir = work.join(format!("{workloads}-{format}-{pods}"));
                let mut synth = vec![
                    "synth".to_owned(),
                    "--pods".into(),
                    pods.to_string(),
                    "--workloads".into(),
                    workloads.clone(),
                    "--format".into(),
                    format.clone(),
                ];
                if let Some(nodes) = &nodes {
                    synth.extend(["--nodes".into(), nodes.clone()]);
                }
                let cidr_json = write_cidr_policies(&cidr, &dir);
                let run = run_size(netpol, &synth, &dir, &datapath);
                let _ = std::fs::remove_dir_all(&dir);
                let cidr_column = match cidr_json {
                    Some(bytes) => format!("{cidr} ({:.1} MB)", bytes as f64 / 1e6),
                    None => "-".to_owned(),
                };
                println!(
                    "| {workloads} | {format} | {pods} | {cidr_column} | {datapath} | {} | {} | {:.2} | {:.2} | {:.0} | {:.2} | {:.0} | {} | {} | {} | {} | {:.0} |",
                    run.policies,
                    run.refused,
                    run.wall,
                    run.cpu,
                    run.rss_mb,
                    run.process_cpu,
                    run.process_rss_mb,
                    run.identities,
                    run.entries,
                    run.endpoints,
                    run.rules,
                    run.rss_mb * 1e6 / pods as f64
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// Writes the CIDR-heavy policies `KIND:COUNT[:SELECTS]` into `dir` (`none`: none); returns their
/// file's size.
fn write_cidr_policies(spec: &str, dir: &Path) -> Option<u64> {
    if spec == "none" {
        return None;
    }
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("cidr-heavy.json");
    let bytes = netpol_dev::cidr::write_spec(spec, &file)
        .unwrap_or_else(|e| panic!("netpol-dev cidr {spec}: {e}"));
    Some(bytes)
}

fn run_size(netpol: &str, synth_args: &[String], dir: &Path, datapath: &str) -> Run {
    let mut report = Vec::new();
    let out = dir.to_str().expect("a UTF-8 scratch path").to_owned();
    netpol_dev::run(
        synth_args.iter().cloned().chain(["--out".to_owned(), out]),
        &mut report,
    )
    .expect("netpol-dev synth writes the cluster");
    let wrote = String::from_utf8_lossy(&report).into_owned();
    // Files modified in the last 2 s are looked at twice, a poll apart, before they are read (a
    // writer may still be at work): let them age, so that the curve measures the sync alone.
    std::thread::sleep(netpol_agent::sources::files::SETTLE_AGE + Duration::from_millis(100));
    let started = Instant::now();
    // nftables programs the kernel of the agent's network namespace: a private one. `unshare`
    // execs the agent in its own process, so wait4 still reads the agent's own usage.
    let mut agent = if datapath == "nftables" {
        let mut command = Command::new("unshare");
        command.args(["--net", netpol]);
        command
    } else {
        Command::new(netpol)
    };
    let mut agent = agent
        .args([
            "agent",
            "--datapath",
            datapath,
            "--node",
            "node-1",
            "--once",
        ])
        .arg("--from-dir")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("netpol agent runs");
    let mut out = agent.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = out.read_to_string(&mut text);
        text
    });
    let (status, usage) = wait_with_usage(&mut agent);
    let elapsed = started.elapsed().as_secs_f64();
    let stdout = reader.join().expect("stdout read");
    let mut run = parse_summary(&stdout).unwrap_or_else(|| panic!("no summary in:\n{stdout}"));
    run.policies = number_before(&wrote, " policies").unwrap_or(0);
    run.refused = number_before(&stdout, " invalid, skipped").unwrap_or(0);
    // Exit 1 with refused policies: the rest is programmed (the summary says so).
    assert!(
        status == 0 || (status == 1 && run.refused > 0),
        "netpol agent --once failed (exit {status}) on {synth_args:?}:\n{stdout}"
    );
    let seconds = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    run.process_cpu = seconds(usage.ru_utime) + seconds(usage.ru_stime);
    run.process_rss_mb = usage.ru_maxrss as f64 * 1024.0 / 1e6;
    eprintln!("{synth_args:?}: process ran {elapsed:.2} s");
    run
}

/// Waits for `child` and returns its exit code (-1 if it did not exit) and its own resource use
/// (`wait4`, not the sum over every child that `RUSAGE_CHILDREN` gives).
// wait4 reaps the child, which clippy cannot see.
#[allow(clippy::zombie_processes)]
fn wait_with_usage(child: &mut std::process::Child) -> (i32, libc::rusage) {
    let mut status = 0;
    // SAFETY: wait4 writes the child's status and usage into the values it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4");
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (code, usage)
}

/// Reads `synced in W s, C s CPU, peak RSS R MB: I identities for A pod and node addresses, E
/// MapState entries` and `N local endpoints, R ACL rules` from the summary.
fn parse_summary(stdout: &str) -> Option<Run> {
    let synced = stdout.lines().find(|l| l.starts_with("synced in "))?;
    let words: Vec<&str> = synced
        .split([' ', ',', ':'])
        .filter(|w| !w.is_empty())
        .collect();
    let before = |unit: &str| -> Option<f64> {
        let i = words.iter().position(|w| *w == unit)?;
        words.get(i.checked_sub(1)?)?.parse().ok()
    };
    Some(Run {
        wall: words.get(2)?.parse().ok()?,
        cpu: words
            .windows(3)
            .find(|w| w[1] == "s" && w[2] == "CPU")?
            .first()?
            .parse()
            .ok()?,
        rss_mb: before("MB")?,
        identities: before("identities")? as u64,
        entries: number_before(synced, " MapState entries")?,
        endpoints: number_before(stdout, " local endpoints").unwrap_or(0),
        rules: number_before(stdout, " ACL rules").unwrap_or(0),
        ..Run::default()
    })
}

/// The number written just before the first `suffix` in `text`.
fn number_before(text: &str, suffix: &str) -> Option<u64> {
    let end = text.find(suffix)?;
    let digits: String = text[..end]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.chars().rev().collect::<String>().parse().ok()
}
