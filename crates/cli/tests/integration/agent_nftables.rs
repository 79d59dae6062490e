//! `netpol agent --datapath nftables`: the agent programs the kernel of the network namespace it
//! runs in. Each test runs the agent inside a private namespace of its own (`unshare --net`), so
//! nothing on the machine is touched, and reads back what the kernel holds with `nft`.
//! Needs root with `unshare` and `nft`; elsewhere it fails with the reason, unless
//! `NETPOL_SKIP_KERNEL=1`.
#![cfg(target_os = "linux")]

use crate::support;

use std::path::Path;
use std::process::Command;

use support::agent_netns::{
    cluster, eventually, explain_remote_to_web, flows, http_get, pod, probe_web, rule_packets,
    spawn_agent, web_client_remote, without_colours, NODES, WEB_POLICY,
};
use support::{copy_example_cluster, names_at_the_limits, policy_at_the_size_limit, scratch_dir};

/// Runs `script` with `sh` in a fresh network namespace; `$NETPOL` is the agent binary. Returns
/// stdout, failing the test if the script fails.
fn in_private_namespace(script: &str, dir: &Path) -> String {
    let output = Command::new("unshare")
        .args(["--net", "sh", "-euc", script])
        .current_dir(dir)
        .env("NETPOL", env!("CARGO_BIN_EXE_netpol"))
        .env(
            "RUST_LOG",
            "netpol_cli=info,netpol_agent=debug,netpol_nft=debug",
        )
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
    // One ingress and one egress chain per local pod, the dispatch chain, and a base chain on
    // each of the forward, input and output hooks.
    let endpoint_chains = names.iter().filter(|n| n.starts_with("ep_")).count();
    assert_eq!(endpoint_chains, 2 * endpoints, "{first}");
    assert_eq!(
        names.iter().filter(|n| n.starts_with("forward_")).count(),
        1,
        "{first}"
    );
    for hook in ["hook forward", "hook input", "hook output"] {
        assert!(first.contains(hook), "{hook}: {first}");
    }
    assert_eq!(
        names.iter().filter(|n| n.starts_with("pods_")).count(),
        1,
        "{first}"
    );
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

#[test]
fn the_agent_filters_every_path_of_its_node_and_admits_its_node_probes() {
    use netpol_testbed::probe::{self, Probe, ProbeOptions, ProbeResult, Transport};
    use netpol_testbed::topology::{Host, Topology};
    if netpol_testbed::netns::skip_kernel_test(
        "the_agent_filters_every_path_of_its_node_and_admits_its_node_probes",
    ) {
        return;
    }
    let dir = scratch_dir("agent-nftables-paths");
    let pods = [
        pod("web", "node-1", "web", "10.244.1.10", false),
        pod("client", "node-1", "client", "10.244.1.11", false),
        pod("remote", "node-2", "client", "10.244.2.10", false),
        // A hostNetwork pod shares its node's address: its packets are the node's.
        pod("agent", "node-1", "agent", "10.0.0.1", true),
    ]
    .concat();
    cluster(
        &dir,
        &[
            ("cluster.yaml", NODES.to_string()),
            ("pods.yaml", pods),
            ("web.yaml", WEB_POLICY.to_string()),
        ],
    );
    let host = |name: &str, address: &str| Host {
        name: name.into(),
        addresses: vec![address.parse().unwrap()],
    };
    let topology = Topology::build_node(
        vec!["10.0.0.1".parse().unwrap()],
        vec![
            host("web", "10.244.1.10"),
            host("client", "10.244.1.11"),
            host("remote", "10.244.2.10"),
        ],
    )
    .expect("the network builds");
    // The agent runs on the node: in the router's namespace.
    let output = topology
        .router()
        .command(env!("CARGO_BIN_EXE_netpol"))
        .args(AGENT.trim_start_matches("$NETPOL ").split(' '))
        .current_dir(&dir)
        .env(
            "RUST_LOG",
            "netpol_cli=info,netpol_agent=debug,netpol_nft=debug",
        )
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );

    // (from, to, port, passes, path)
    let cases = [
        (
            "10.244.1.11",
            "10.244.1.10",
            80,
            true,
            "forward: a client pod",
        ),
        (
            "10.244.2.10",
            "10.244.1.10",
            80,
            true,
            "forward: a remote client pod",
        ),
        (
            "10.244.2.10",
            "10.244.1.10",
            81,
            false,
            "forward: another port",
        ),
        (
            "10.244.1.10",
            "10.244.1.11",
            80,
            true,
            "forward: web's allowed egress",
        ),
        (
            "10.244.1.10",
            "10.244.2.10",
            81,
            false,
            "forward: web's other egress",
        ),
        (
            "10.0.0.1",
            "10.244.1.10",
            8080,
            true,
            "output: the node's probe of isolated web",
        ),
        (
            "10.244.1.10",
            "10.0.0.1",
            9100,
            false,
            "input: web to its node, not allowed",
        ),
        (
            "10.244.1.11",
            "10.0.0.1",
            9100,
            true,
            "input: client is not isolated",
        ),
    ];
    let probes: Vec<Probe> = cases
        .iter()
        .map(|&(from, to, port, _, _)| Probe {
            from: from.parse().unwrap(),
            to: to.parse().unwrap(),
            transport: Transport::Tcp,
            port,
        })
        .collect();
    let options = ProbeOptions {
        timeout: std::time::Duration::from_millis(1000),
        parallel: 8,
    };
    let results = probe::run(&topology, &probes, options);
    let wrong: Vec<String> = cases
        .iter()
        .zip(&results)
        .filter(|(case, result)| {
            let want = if case.3 {
                ProbeResult::Passed
            } else {
                ProbeResult::Dropped
            };
            **result != want
        })
        .map(|(case, result)| format!("{case:?}: {result:?}"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_agent_refuses_a_node_whose_dataplane_bypasses_netfilter() {
    if netpol_testbed::netns::skip_kernel_test(
        "the_agent_refuses_a_node_whose_dataplane_bypasses_netfilter",
    ) {
        return;
    }
    let dir = scratch_dir("agent-nftables-bypass");
    copy_example_cluster(&dir.join("cluster"));
    // A bridge with a port while bridged traffic skips netfilter, then Cilium's host device with
    // no readable node configuration: each refused, nothing programmed; the override programs.
    let script = format!(
        "ip link add br0 type bridge\n\
         ip link add v0 type veth peer name v1\n\
         ip link set v0 master br0\n\
         sysctl -qw net.bridge.bridge-nf-call-iptables=0\n\
         if {AGENT} > bridge.txt 2> bridge.log; then echo bridge-ran; else echo bridge=$?; fi\n\
         nft list tables > bridge.nft\n\
         sysctl -qw net.bridge.bridge-nf-call-iptables=1\n\
         ip link add cilium_host type veth peer name cilium_net\n\
         if {AGENT} > cilium.txt 2> cilium.log; then echo cilium-ran; else echo cilium=$?; fi\n\
         nft list tables > cilium.nft\n\
         {AGENT} --ignore-netfilter-bypass > override.txt 2> override.log\n\
         nft list tables"
    );
    let stdout = in_private_namespace(&script, &dir);
    let read = |name: &str| without_colours(&std::fs::read_to_string(dir.join(name)).unwrap());
    assert!(
        stdout.contains("bridge=2"),
        "{stdout}\n{}",
        read("bridge.log")
    );
    assert!(
        stdout.contains("cilium=2"),
        "{stdout}\n{}",
        read("cilium.log")
    );
    let bridge = read("bridge.log");
    assert!(
        bridge.contains("bridge br0 has ports (v0)")
            && bridge.contains("net.bridge.bridge-nf-call-iptables")
            && bridge.contains("--ignore-netfilter-bypass"),
        "{bridge}"
    );
    let cilium = read("cilium.log");
    assert!(
        cilium.contains("cilium_host") && cilium.contains("node_config.h"),
        "{cilium}"
    );
    assert_eq!(read("bridge.nft").trim(), "", "nothing programmed");
    assert_eq!(read("cilium.nft").trim(), "", "nothing programmed");
    assert!(stdout.trim_end().ends_with("table inet netpol"), "{stdout}");
    assert!(read("override.log").contains("not checking"));
}

#[test]
fn the_longest_names_and_hostile_names_are_programmed_safely() {
    if netpol_testbed::netns::skip_kernel_test(
        "the_longest_names_and_hostile_names_are_programmed_safely",
    ) {
        return;
    }
    let dir = scratch_dir("agent-nftables-names");
    let (docs, pods) = names_at_the_limits();
    cluster(&dir, &[("all.yaml", docs)]);
    let tables = in_private_namespace(
        &format!(
            "{AGENT} > out.txt 2> out.log\nnft list table inet netpol > table.nft\nnft list tables"
        ),
        &dir,
    );
    let listing = std::fs::read_to_string(dir.join("table.nft")).unwrap();
    assert_eq!(tables.trim(), "table inet netpol", "nothing was injected");
    let names = chains(&listing);
    assert_eq!(
        names.iter().filter(|n| n.starts_with("ep_")).count(),
        2 * pods,
        "every pod is programmed:\n{listing}"
    );
    let comments: Vec<&str> = listing
        .lines()
        .filter_map(|l| l.trim().strip_prefix("comment \""))
        .collect();
    assert_eq!(comments.len(), 2 * pods);
    for comment in &comments {
        let text = comment.strip_suffix('"').unwrap();
        assert!(text.len() <= 128, "{text}");
        assert!(
            text.chars().all(|c| c.is_ascii_graphic() || c == ' ')
                && !text.contains(['"', ';', '{', '}']),
            "{text}"
        );
    }
    assert!(
        listing.contains("comment \"ingress of shop/plain\""),
        "{listing}"
    );
    // Every pod is isolated for ingress, as its namespace's policy says: its chain ends in a
    // counted drop (through the policy's log chain, which logs and drops).
    let ending_in_drop = listing
        .split("\n\t}")
        .filter(|chain| {
            chain.rsplit('\n').next().is_some_and(|last| {
                last.trim_start().starts_with("counter ") && last.contains(" jump log_")
            })
        })
        .count();
    assert_eq!(ending_in_drop, pods, "{listing}");
    // The names' words stay inside comments, never statements of their own.
    assert!(
        listing
            .lines()
            .all(|l| !l.contains("flush") || l.trim().starts_with("comment \"")),
        "{listing}"
    );
}

/// A valid policy at etcd's size limit (60,000 `except`s) loads into the kernel with every
/// endpoint of the node: the excepted addresses are one interval set, not 60,000 rules.
#[test]
fn a_policy_at_the_size_limit_is_programmed_with_every_endpoint() {
    if netpol_testbed::netns::skip_kernel_test(
        "a_policy_at_the_size_limit_is_programmed_with_every_endpoint",
    ) {
        return;
    }
    let dir = scratch_dir("agent-nftables-size-limit");
    copy_example_cluster(&dir.join("cluster"));
    let (policy, excepted, allowed) = policy_at_the_size_limit();
    std::fs::write(dir.join("cluster/policies/at-the-limit.json"), policy).unwrap();
    // The excepted addresses are a hash set of 60,000 elements, which the kernel may still be
    // growing in the background when the agent exits: a listing meanwhile can skip elements
    // (see `set_dump::hosts_of`), so the table is listed again, for up to 5 s, until it shows
    // the last one.
    in_private_namespace(
        &format!(
            "{AGENT} > out.txt 2> out.log\n\
             for i in $(seq 50); do\n\
             nft list table inet netpol > table.nft\n\
             grep -q '{excepted}' table.nft && break\n\
             sleep 0.1\n\
             done"
        ),
        &dir,
    );
    let out = std::fs::read_to_string(dir.join("out.txt")).unwrap();
    assert!(out.contains("(0 invalid, skipped)"), "{out}");
    let listing = std::fs::read_to_string(dir.join("table.nft")).unwrap();
    let endpoints = chains(&listing)
        .iter()
        .filter(|n| n.starts_with("ep_"))
        .count();
    assert_eq!(endpoints, 2 * 6, "every local pod is programmed:\n{out}");
    // nft lists set elements; the last except is there, the address after it is not.
    assert!(
        listing.contains(excepted),
        "the excepted address is in a set"
    );
    assert!(!listing.contains(&format!("{allowed},")) && !listing.contains(&format!("{allowed} ")));
}

#[test]
fn cleanup_deletes_netpols_table_and_leaves_another_table_intact() {
    if netpol_testbed::netns::skip_kernel_test(
        "cleanup_deletes_netpols_table_and_leaves_another_table_intact",
    ) {
        return;
    }
    let dir = scratch_dir("agent-nftables-cleanup");
    copy_example_cluster(&dir.join("cluster"));
    // Another owner's table (as a CNI plugin or kube-proxy keeps), netpol's programmed beside
    // it, then `cleanup` twice.
    let script = format!(
        "nft add table inet other\n\
         nft add chain inet other forward '{{ type filter hook forward priority 0; policy accept; }}'\n\
         nft add rule inet other forward ip saddr 10.9.9.9 drop\n\
         nft list table inet other > other-before.nft\n\
         {AGENT} > agent.txt 2> agent.log\n\
         nft list tables > tables-programmed.txt\n\
         $NETPOL cleanup --datapath nftables > first.txt\n\
         $NETPOL cleanup --datapath nftables > second.txt\n\
         nft list table inet other > other-after.nft\n\
         nft list tables"
    );
    let tables = in_private_namespace(&script, &dir);
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    assert_eq!(
        read("tables-programmed.txt").trim(),
        "table inet other\ntable inet netpol"
    );
    assert_eq!(tables.trim(), "table inet other");
    assert_eq!(read("other-after.nft"), read("other-before.nft"));
    assert!(read("other-after.nft").contains("ip saddr 10.9.9.9 drop"));
    assert_eq!(read("first.txt").trim(), "deleted table inet netpol");
    assert_eq!(
        read("second.txt").trim(),
        "no table inet netpol: nothing to remove"
    );
}

/// Real packets through the running agent: a denied connection appears in the drop log naming
/// the rule `netpol explain` names for that flow; a flood of denied connections is logged under
/// the node's rate limit while the rule's counter counts every packet.
#[test]
fn the_drop_log_names_the_rule_explain_names_and_counters_count_a_rate_limited_flood() {
    use netpol_testbed::probe::ProbeResult;
    if netpol_testbed::netns::skip_kernel_test(
        "the_drop_log_names_the_rule_explain_names_and_counters_count_a_rate_limited_flood",
    ) {
        return;
    }
    let dir = scratch_dir("agent-nftables-drop-log");
    let topology = web_client_remote(&dir, ("web.yaml", WEB_POLICY));
    let router = topology.router();
    let port = 9591;
    // Not the default group: the table logs to the group the agent reads.
    let agent = spawn_agent(
        router,
        &dir,
        port,
        &["--nflog-group", "7742", "--drop-log-rate", "100"],
    );
    let log = || agent.log();

    // A denied connection, and an allowed one.
    let results = probe_web(&topology, [("10.244.2.10", 81), ("10.244.1.11", 80)]);
    assert_eq!(results, vec![ProbeResult::Dropped, ProbeResult::Passed]);
    let denied = eventually(100, || {
        flows(router, port)
            .into_iter()
            .find(|r| r["source"] == "10.244.2.10" && r["port"] == 81)
    });
    let Some(denied) = denied else {
        panic!("the denied connection was not logged:\n{}", log());
    };
    assert_eq!(denied["destination"], "shop/web (10.244.1.10)", "{denied}");
    assert_eq!(denied["protocol"], "TCP");
    assert_eq!(
        (&denied["verdict"], &denied["direction"]),
        (&"deny".into(), &"ingress".into())
    );
    // `explain` names the same rule, in the same words.
    let explained = explain_remote_to_web(&dir, 81);
    let reason = denied["reason"].as_str().unwrap();
    assert!(
        explained.contains(reason),
        "explain:\n{explained}\ndrop log: {denied}"
    );
    assert!(log().contains("datapath decision"), "{}", log());

    // A flood of new connections to the denied port (UDP: each from a new socket).
    let labels = [
        "policy=\"web\"",
        "rule=\"default-deny\"",
        "direction=\"ingress\"",
        "verdict=\"deny\"",
    ];
    let before_count = rule_packets(&http_get(router, port, "/metrics"), &labels);
    let before_logged = flows(router, port).last().unwrap()["seq"].as_u64().unwrap();
    let flood = 3000;
    topology
        .host_at("10.244.2.10".parse().unwrap())
        .unwrap()
        .run(
            "bash",
            &[
                "-c",
                &format!("for i in $(seq {flood}); do echo x > /dev/udp/10.244.1.10/81; done"),
            ],
            "",
        )
        .unwrap();
    let after_count = rule_packets(&http_get(router, port, "/metrics"), &labels);
    // Wait for the log to go quiet, then count what it logged of the flood.
    let mut last = before_logged;
    let _ = eventually(50, || {
        let now = flows(router, port).last().unwrap()["seq"].as_u64().unwrap();
        let quiet = now == last;
        last = now;
        quiet.then_some(())
    });
    let logged = last - before_logged;
    assert!(
        after_count - before_count >= flood,
        "the counter saw {} of {flood} packets",
        after_count - before_count
    );
    assert!(logged > 0, "nothing of the flood was logged");
    assert!(
        logged < flood / 2,
        "{logged} of {flood} denied connections logged: the rate limit did not hold"
    );
}
