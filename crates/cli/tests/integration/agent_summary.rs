//! The agent's `--once` summary: a screenful on a node with 100+ pods (counts of allowed and
//! denied local pairs), every endpoint and the full matrix with `--matrix`, and the counts agree
//! with the matrix they summarize.

use std::path::{Path, PathBuf};
use std::process::Command;

fn netpol(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_netpol"))
        .args(args)
        .output()
        .expect("the netpol binary runs");
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// A synthetic cluster with over 100 pods on each of two nodes.
fn large_cluster() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("netpol-summary-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    netpol_dev::run(
        [
            "synth",
            "--pods",
            "232",
            "--nodes",
            "2",
            "--out",
            dir.to_str().unwrap(),
        ],
        &mut std::io::sink(),
    )
    .expect("netpol-dev synth writes the cluster");
    dir
}

fn once(dir: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "agent",
        "--from-dir",
        dir.to_str().unwrap(),
        "--datapath",
        "hcn-sim",
        "--node",
        "node-0",
        "--once",
        "--probe",
        "TCP/8080",
    ];
    args.extend(extra);
    netpol(&args)
}

/// The allowed and denied counts of the probe line.
fn counts(summary: &str) -> (usize, usize, usize) {
    let line = summary
        .lines()
        .find(|l| l.starts_with("TCP/8080 between the "))
        .unwrap_or_else(|| panic!("no probe line:\n{summary}"));
    let number = |after: &str| -> usize {
        let rest = &line[line.find(after).unwrap() + after.len()..];
        rest.split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    (
        number("between the "),
        number(": "),
        number("pairs allowed, "),
    )
}

#[test]
fn a_node_with_100_pods_gets_counts_and_the_matrix_only_on_request() {
    let dir = large_cluster();
    let short = once(&dir, &[]);
    let full = once(&dir, &["--matrix"]);
    std::fs::remove_dir_all(&dir).unwrap();

    assert!(short.lines().count() < 12, "a screenful:\n{short}");
    let (pods, allowed, denied) = counts(&short);
    assert!(pods > 100, "{short}");
    assert!(
        short.contains(&format!(
            "{pods} local endpoints (--matrix lists each with its rule counts)"
        )),
        "{short}"
    );
    assert_eq!(
        allowed + denied,
        pods * (pods - 1),
        "every ordered pair is counted"
    );
    assert!(allowed > 0 && denied > 0, "{short}");
    assert!(short.contains("--matrix prints every pair."));

    // The full form: the same counts, every endpoint, and a matrix whose cells they count.
    assert_eq!(counts(&full), (pods, allowed, denied));
    let rows: Vec<&str> = full
        .lines()
        .skip_while(|l| *l != "(. allowed, X denied)")
        .skip(2)
        .collect();
    assert_eq!(rows.len(), pods, "{full}");
    let cells = |symbol: &str| -> usize {
        rows.iter()
            .map(|row| {
                row.split_whitespace()
                    .skip(1)
                    .filter(|c| *c == symbol)
                    .count()
            })
            .sum()
    };
    assert_eq!((cells("."), cells("X")), (allowed, denied));
    assert!(full.lines().count() > 2 * pods, "endpoints and matrix rows");
}

#[test]
fn the_example_cluster_lists_its_endpoints_without_a_flag() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster");
    let out = netpol(&[
        "agent",
        "--from-dir",
        example.to_str().unwrap(),
        "--datapath",
        "hcn-sim",
        "--node",
        "node-1",
        "--once",
    ]);
    assert!(out.contains("node node-1: 6 local endpoints"), "{out}");
    assert!(out.contains("\npod "), "the endpoint table:\n{out}");
    assert!(out.contains("shop/web-1  "), "{out}");
    assert!(
        out.contains(
            "TCP/80 between the 6 local pods, as the programmed HCN rules decide it: \
             7 of 30 pairs allowed, 23 denied"
        ),
        "{out}"
    );
    assert!(
        !out.contains("(. allowed, X denied)"),
        "no matrix unasked:\n{out}"
    );
}
