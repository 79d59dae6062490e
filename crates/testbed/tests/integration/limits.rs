//! Objects at Kubernetes' limits and beyond, through the real kernel: the longest pod keys the API
//! allows, keys a file may hold that no API server would (quotes, newlines, semicolons, braces,
//! non-ASCII), thousands of ports and peers, and an endpoint whose chains nft refuses. Each is
//! enforced, or refused alone, by name, and never keeps another endpoint from being programmed.
//!
//! Needs root (unshare, nft, ip); elsewhere it fails with the reason, unless
//! `NETPOL_SKIP_KERNEL=1`.
#![cfg(target_os = "linux")]

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use netpol_datapath::testing::*;
use netpol_datapath::{compile_entries, CompileOptions};
use netpol_engine::reference::Reason;
use netpol_engine::*;
use netpol_nft::isolate::program_isolating;
use netpol_nft::programmer::program;
use netpol_nft::{ChainRule, ChainVerdict, Ruleset};
use netpol_testbed::netns;
use netpol_testbed::probe::{self, ProbeResult};
use netpol_testbed::topology::{Host, Topology};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A MapState isolated for ingress (nothing admitted yet), open for egress.
fn isolated_for_ingress() -> MapBuilder {
    let mut map = MapBuilder::new(Verdict::Allow);
    map.set(
        Direction::Ingress,
        None,
        key(None, 0, 0),
        value(1, Verdict::Deny, None),
    );
    map
}

/// The rules of a pod that admits TCP from `peer` on `ports` and nothing else.
/// Adds `endpoint` at `address`, admitting TCP from `peer` on `ports`.
fn admit(ruleset: &mut Ruleset, endpoint: &str, address: &str, peer: &str, ports: &[u16]) {
    let (store, ids) = store_with(&[], &[peer]);
    let mut map = isolated_for_ingress();
    for &port in ports {
        map.set(
            Direction::Ingress,
            Some(ids[peer]),
            key(Some(Protocol::Tcp), port, 16),
            value(1, Verdict::Allow, None),
        );
    }
    let rules = compile_entries(map.build().iter(), &store, &CompileOptions::default())
        .expect("the MapState compiles")
        .rules;
    ruleset.add(endpoint, vec![ip(address)], &rules, &store);
}

fn hosts(addresses: &[&str]) -> Vec<Host> {
    addresses
        .iter()
        .map(|a| Host {
            name: a.to_string(),
            addresses: vec![ip(a)],
        })
        .collect()
}

fn tcp(topology: &Topology, cases: &[(&str, &str, u16)]) -> Vec<ProbeResult> {
    let flows: Vec<(IpAddr, IpAddr, u16)> = cases
        .iter()
        .map(|&(from, to, port)| (ip(from), ip(to), port))
        .collect();
    probe::tcp(topology, &flows, Duration::from_millis(1000))
}

use ProbeResult::{Dropped, Passed};

#[test]
fn the_longest_keys_and_hostile_keys_are_carried_safely() {
    if netns::skip_kernel_test("the_longest_keys_and_hostile_keys_are_carried_safely") {
        return;
    }
    // 63-character namespace, 253-character name: the longest key the API allows (317 bytes).
    let longest = format!("{}/{}", "n".repeat(63), "p".repeat(253));
    let keys = [
        longest.as_str(),
        "x/a\" drop; }\ntable inet evil { chain c { type filter hook forward priority -500; policy drop; accept",
        "x/{brace}; flush ruleset",
        "x/ünïcødé-名前\t#comment",
    ];
    let peer = "10.1.0.100";
    let addresses = ["10.1.0.1", "10.1.0.2", "10.1.0.3", "10.1.0.4"];
    let topology =
        Topology::build(hosts(&[&addresses[..], &[peer]].concat())).expect("the network builds");
    let mut ruleset = Ruleset::default();
    for (key, address) in keys.iter().zip(addresses) {
        admit(&mut ruleset, key, address, peer, &[80]);
    }
    let done = program(topology.router(), &mut None, &ruleset).expect("nft takes every key");
    // Two chains per endpoint, the dispatch chain, three base chains, and one log chain: every
    // endpoint's deny comes from the same policy rule, which shares its log chain.
    assert_eq!(done.added.len(), 2 * keys.len() + 4 + 1, "{done:?}");
    assert_eq!(
        done.added.iter().filter(|n| n.starts_with("log_")).count(),
        1,
        "{done:?}"
    );
    let tables = topology
        .router()
        .run("nft", &["list", "tables"], "")
        .unwrap();
    assert_eq!(tables.trim(), "table inet netpol", "nothing was injected");
    let listing = topology
        .router()
        .run("nft", &["list", "table", "inet", "netpol"], "")
        .unwrap();
    assert!(
        !listing.contains("priority -500") && !listing.contains("evil {"),
        "{listing}"
    );
    // Every endpoint is enforced: its one allowed port passes, the next does not.
    for address in addresses {
        assert_eq!(
            tcp(&topology, &[(peer, address, 80), (peer, address, 81)]),
            vec![Passed, Dropped],
            "{address}"
        );
    }
    // A restart reads the same chains back; it changes none, and refills the sets it cannot
    // know the contents of.
    let again = program(topology.router(), &mut None, &ruleset).unwrap();
    assert!(
        again.added.is_empty() && again.deleted.is_empty(),
        "{again:?}"
    );
    assert_eq!(again.sets_added + again.sets_deleted, 0);
}

#[test]
fn thousands_of_ports_and_peers_load_and_filter() {
    if netns::skip_kernel_test("thousands_of_ports_and_peers_load_and_filter") {
        return;
    }
    // Pod b on 5,000 single ports (every other one from 20000); 4,000 other peers on 443.
    let ports: Vec<u16> = (0..5000).map(|i| 20000 + 2 * i).collect();
    let peers: Vec<String> = (0..4000)
        .map(|i| format!("10.{}.{}.{}", 100 + i / 65536, (i / 256) % 256, i % 256))
        .collect();
    let mut names: Vec<&str> = peers.iter().map(String::as_str).collect();
    names.push("10.1.0.2");
    let (store, ids) = store_with(&[], &names);
    let mut map = isolated_for_ingress();
    let allow = value(1, Verdict::Allow, None);
    for &port in &ports {
        map.set(
            Direction::Ingress,
            Some(ids["10.1.0.2"]),
            key(Some(Protocol::Tcp), port, 16),
            allow.clone(),
        );
    }
    for peer in &peers {
        map.set(
            Direction::Ingress,
            Some(ids[peer.as_str()]),
            key(Some(Protocol::Tcp), 443, 16),
            allow.clone(),
        );
    }
    let compiled = compile_entries(map.build().iter(), &store, &CompileOptions::default())
        .expect("the MapState compiles");
    let mut ruleset = Ruleset::default();
    ruleset.add("x/a", vec![ip("10.1.0.1")], &compiled.rules, &store);
    let topology = Topology::build(hosts(&[
        "10.1.0.1",
        "10.1.0.2",
        "10.1.0.3",
        "10.100.15.159",
    ]))
    .expect("the network builds");
    let started = Instant::now();
    program(topology.router(), &mut None, &ruleset)
        .expect("nft takes thousands of ports and peers");
    eprintln!(
        "{} chain rules ({} ports, {} peers) programmed in {:?}",
        ruleset.endpoints["x/a"].rules(),
        ports.len(),
        peers.len(),
        started.elapsed()
    );
    assert_eq!(
        tcp(
            &topology,
            &[
                ("10.1.0.2", "10.1.0.1", 20000),
                ("10.1.0.2", "10.1.0.1", 29998),
                ("10.1.0.2", "10.1.0.1", 20001),
                ("10.1.0.3", "10.1.0.1", 20000),
                ("10.100.15.159", "10.1.0.1", 443),
                ("10.100.15.159", "10.1.0.1", 444),
            ]
        ),
        vec![Passed, Passed, Dropped, Dropped, Passed, Dropped]
    );
}

#[test]
fn an_endpoint_the_kernel_refuses_is_isolated_alone_and_named() {
    if netns::skip_kernel_test("an_endpoint_the_kernel_refuses_is_isolated_alone_and_named") {
        return;
    }
    let peer = "10.1.0.100";
    let addresses: Vec<String> = (1..=20).map(|i| format!("10.1.0.{i}")).collect();
    let mut all: Vec<&str> = addresses.iter().map(String::as_str).collect();
    all.push(peer);
    let topology = Topology::build(hosts(&all)).expect("the network builds");
    let mut ruleset = Ruleset::default();
    for (i, address) in addresses.iter().enumerate() {
        let key = if i == 12 {
            "x/refused".to_string()
        } else {
            format!("x/p{i}")
        };
        admit(&mut ruleset, &key, address, peer, &[80]);
    }
    // A port range nft refuses ("Range has zero or negative size"), in one endpoint's chain.
    let refused = ruleset.endpoints.get_mut("x/refused").unwrap();
    let mut ingress = refused.ingress.to_vec();
    ingress.insert(
        0,
        ChainRule {
            remote: None,
            protocol: Some(Protocol::Tcp),
            dports: vec![(2000, 1000)],
            verdict: ChainVerdict::Drop,
            reason: Arc::new(Reason::Default),
        },
    );
    refused.ingress = ingress.into();
    assert!(
        program(topology.router(), &mut None, &ruleset).is_err(),
        "the whole transaction is refused"
    );
    let done =
        program_isolating(topology.router(), &mut None, &ruleset).expect("the rest is programmed");
    assert_eq!(done.refused.keys().collect::<Vec<_>>(), vec!["x/refused"]);
    assert!(
        done.refused["x/refused"].contains("negative size"),
        "{}",
        done.refused["x/refused"]
    );
    let chains = topology
        .router()
        .run("nft", &["list", "table", "inet", "netpol"], "")
        .unwrap();
    assert_eq!(chains.matches("comment \"ingress of x/p").count(), 19);
    assert!(!chains.contains("of x/refused"));
    // Every other endpoint is enforced; the refused one is isolated (fail closed).
    let refused_address = addresses[12].as_str();
    for address in [addresses[0].as_str(), addresses[19].as_str()] {
        assert_eq!(
            tcp(&topology, &[(peer, address, 80), (peer, address, 81)]),
            vec![Passed, Dropped],
            "{address}"
        );
    }
    assert_eq!(
        tcp(
            &topology,
            &[(peer, refused_address, 80), (refused_address, peer, 80)]
        ),
        vec![Dropped, Dropped]
    );
}
