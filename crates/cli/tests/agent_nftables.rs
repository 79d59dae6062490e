//! `netpol agent --datapath nftables`: the agent programs the kernel of the network namespace it
//! runs in. Each test runs the agent inside a private namespace of its own (`unshare --net`), so
//! nothing on the machine is touched, and reads back what the kernel holds with `nft`.
//! Needs root with `unshare` and `nft`; elsewhere it fails with the reason, unless
//! `NETPOL_SKIP_KERNEL=1`.
#![cfg(target_os = "linux")]

mod support;

use std::path::Path;
use std::process::Command;

use support::{copy_example_cluster, scratch_dir};

/// Runs `script` with `sh` in a fresh network namespace; `$NETPOL` is the agent binary. Returns
/// stdout, failing the test if the script fails.
fn in_private_namespace(script: &str, dir: &Path) -> String {
    let output = Command::new("unshare")
        .args(["--net", "sh", "-euc", script])
        .current_dir(dir)
        .env("NETPOL", env!("CARGO_BIN_EXE_netpol"))
        .env("RUST_LOG", "netpol_agent=debug,netpol_nft=debug")
        .output()
        .expect("unshare runs");
    assert!(
        output.status.success(),
        "{script}\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The chain names of a `nft list table inet netpol` listing.
fn chains(listing: &str) -> Vec<&str> {
    listing
        .lines()
        .filter_map(|l| l.trim().strip_prefix("chain "))
        .filter_map(|rest| rest.strip_suffix(" {"))
        .collect()
}

/// Log text without its ANSI colour sequences.
fn without_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|c| *c == 'm');
        } else {
            out.push(c);
        }
    }
    out
}

const AGENT: &str = "$NETPOL agent --from-dir cluster --node node-1 --datapath nftables --once";

#[test]
fn the_agent_programs_its_kernel_restarts_quietly_and_follows_a_policy_change() {
    if netpol_testbed::netns::skip_kernel_test(
        "the_agent_programs_its_kernel_restarts_quietly_and_follows_a_policy_change",
    ) {
        return;
    }
    let dir = scratch_dir("agent-nftables");
    copy_example_cluster(&dir.join("cluster"));
    // Three agent runs in one namespace: the first programs, the second (a restart with nothing
    // changed) must send nothing, the third follows a deleted policy file.
    let policies = dir.join("cluster/policies");
    let doomed = std::fs::read_dir(&policies)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .min()
        .expect("the example cluster has policy files");
    let script = format!(
        "{AGENT} > first.txt 2> first.log\n\
         nft list table inet netpol > first.nft\n\
         {AGENT} > second.txt 2> second.log\n\
         nft list table inet netpol > second.nft\n\
         rm '{}'\n\
         {AGENT} > third.txt 2> third.log\n\
         nft list table inet netpol > third.nft\n\
         nft list tables",
        doomed.display()
    );
    let tables = in_private_namespace(&script, &dir);
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();

    // Nothing but netpol's own table exists.
    assert_eq!(tables.trim(), "table inet netpol");

    let summary = read("first.txt");
    let endpoints: usize = summary
        .lines()
        .find_map(|l| l.strip_prefix("node node-1: "))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no endpoint count in:\n{summary}"));
    assert!(endpoints > 0, "{summary}");

    let first = read("first.nft");
    let names = chains(&first);
    // One ingress and one egress chain per local pod, and the base chain on the forward hook.
    let endpoint_chains = names.iter().filter(|n| n.starts_with("ep_")).count();
    assert_eq!(endpoint_chains, 2 * endpoints, "{first}");
    assert_eq!(
        names.iter().filter(|n| n.starts_with("forward_")).count(),
        1,
        "{first}"
    );
    assert!(first.contains("hook forward"), "{first}");
    assert!(
        first.contains("ct state established,related accept"),
        "{first}"
    );
    assert!(
        first.contains(" drop"),
        "the example's policies deny something:\n{first}"
    );

    // The restart read the table back and found nothing to change.
    assert_eq!(read("second.nft"), first);
    let second = without_colours(&read("second.log"));
    assert!(
        second.contains("nftables table programmed") && second.contains("added=0 deleted=0"),
        "{second}"
    );

    // A deleted policy: new chains for the pods it selected, the old ones gone (no orphans).
    let third = read("third.nft");
    assert_ne!(
        third,
        first,
        "deleting {} changed nothing",
        doomed.display()
    );
    let after = chains(&third);
    assert_eq!(
        after.iter().filter(|n| n.starts_with("ep_")).count(),
        2 * endpoints,
        "{third}"
    );
    assert_eq!(
        after.iter().filter(|n| n.starts_with("forward_")).count(),
        1
    );
}
