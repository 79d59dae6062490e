//! The scale benchmark: `netpol agent --once` on synthetic clusters of growing size.
//!
//! `cargo bench -p netpol-cli --bench scale` writes each cluster with `netpol synth` and runs
//! the release binary on it in a process of its own, so that peak RSS is the run's own, and
//! prints one table row per size (the table in docs/performance.md). Sizes come from
//! `NETPOL_SCALE_PODS` (comma-separated pod counts, default `2500,5000,10000,20000,40000`);
//! 150,000 pods takes a few minutes and about 1 GB of disk in the temporary directory.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const DEFAULT_SIZES: &str = "2500,5000,10000,20000,40000";

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
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not meaningful here.
    let netpol = env!("CARGO_BIN_EXE_netpol");
    let sizes = std::env::var("NETPOL_SCALE_PODS").unwrap_or_else(|_| DEFAULT_SIZES.into());
    let work = std::env::temp_dir().join(format!("netpol-scale-{}", std::process::id()));
    println!(
        "| pods | policies | wall s | CPU s | peak RSS MB | identities | MapState entries | local endpoints | HCN rules | RSS bytes/pod |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut previous: Option<(u64, f64)> = None;
    for pods in sizes
        .split(',')
        .filter_map(|s| s.trim().parse::<u64>().ok())
    {
        let dir = work.join(pods.to_string());
        let run = run_size(netpol, pods, &dir);
        let _ = std::fs::remove_dir_all(&dir);
        println!(
            "| {pods} | {} | {:.2} | {:.2} | {:.0} | {} | {} | {} | {} | {:.0} |",
            run.policies,
            run.wall,
            run.cpu,
            run.rss_mb,
            run.identities,
            run.entries,
            run.endpoints,
            run.rules,
            run.rss_mb * 1e6 / pods as f64
        );
        if let Some((p, cpu)) = previous {
            eprintln!(
                "  {}x the pods cost {:.2}x the CPU",
                pods as f64 / p as f64,
                run.cpu / cpu
            );
        }
        previous = Some((pods, run.cpu));
    }
    let _ = std::fs::remove_dir_all(&work);
}

fn run_size(netpol: &str, pods: u64, dir: &Path) -> Run {
    let synth = Command::new(netpol)
        .args(["synth", "--pods", &pods.to_string(), "--out"])
        .arg(dir)
        .output()
        .expect("netpol synth runs");
    assert!(synth.status.success(), "netpol synth failed: {synth:?}");
    let wrote = String::from_utf8_lossy(&synth.stdout).into_owned();
    // Files modified in the last 2 s are looked at twice, a poll apart, before they are read (a
    // writer may still be at work): let them age, so that the curve measures the sync alone.
    std::thread::sleep(netpol_agent::sources::files::SETTLE_AGE + Duration::from_millis(100));
    let started = Instant::now();
    let agent = Command::new(netpol)
        .args([
            "agent",
            "--datapath",
            "hcn-sim",
            "--node",
            "node-1",
            "--once",
        ])
        .arg("--from-dir")
        .arg(dir)
        .output()
        .expect("netpol agent runs");
    let elapsed = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&agent.stdout).into_owned();
    assert!(
        agent.status.success(),
        "netpol agent --once failed on {pods} pods: {}",
        String::from_utf8_lossy(&agent.stderr)
    );
    let mut run = parse_summary(&stdout).unwrap_or_else(|| panic!("no summary in:\n{stdout}"));
    run.policies = number_before(&wrote, " policies").unwrap_or(0);
    eprintln!("{pods} pods: process ran {elapsed:.2} s");
    run
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
        policies: 0,
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
