//! Real packets through the real kernel: a routed network of private namespaces, netpol's table
//! loaded on the router with `nft -f`, TCP and UDP probes between hosts, each fate compared with
//! the in-process evaluation of the same rules and with the MapState lookup.
//!
//! Needs root (unshare, nft, ip). Elsewhere it fails with the reason, unless `NETPOL_SKIP_KERNEL=1`.
#![cfg(target_os = "linux")]

use std::net::IpAddr;
use std::time::Duration;

use netpol_datapath::testing::*;
use netpol_datapath::{compile_entries, CompileOptions};
use netpol_engine::*;
use netpol_nft::eval::{evaluate, Packet};
use netpol_nft::programmer::{program, Known, NftBackend};
use netpol_nft::ruleset::SetCache;
use netpol_nft::{script, Ruleset};
use netpol_testbed::netns;
use netpol_testbed::probe::{self, Probe, ProbeOptions, ProbeResult, Transport};
use netpol_testbed::topology::{Host, Topology};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Pod a (dual stack) is isolated for ingress: TCP 80 from pod b, UDP 53 from anyone, and TCP
/// 8000-8080 from fd00:2::/32. Pod b and the outside host are not endpoints.
fn ruleset() -> Ruleset {
    ruleset_with_ports(&[80])
}

/// [`ruleset`] with pod b allowed on each of `ports` (TCP).
fn ruleset_with_ports(ports: &[u16]) -> Ruleset {
    let (store, ids) = store_with(&["fd00:2::/32"], &["10.1.0.2"]);
    let mut b = MapBuilder::new(Verdict::Allow);
    b.set(
        Direction::Ingress,
        None,
        PortKey::ANY,
        value(1, Verdict::Deny, None),
    );
    let allow = value(1, Verdict::Allow, None);
    for &port in ports {
        b.set(
            Direction::Ingress,
            Some(ids["10.1.0.2"]),
            key(Some(Protocol::Tcp), port, 16),
            allow.clone(),
        );
    }
    b.set(
        Direction::Ingress,
        None,
        key(Some(Protocol::Udp), 53, 16),
        allow.clone(),
    );
    b.range(
        Direction::Ingress,
        Some(ids["fd00:2::/32"]),
        Protocol::Tcp,
        8000,
        8080,
        allow,
    );
    let compiled = compile_entries(b.build().iter(), &store, &CompileOptions::default())
        .expect("the MapState compiles");
    let mut ruleset = Ruleset::default();
    ruleset.add(
        "x/a",
        vec![ip("10.1.0.1"), ip("fd00:1::1")],
        &compiled.rules,
        &store,
    );
    ruleset
}

use netpol_engine::mapstate::PortKey;

#[test]
fn the_kernel_forwards_exactly_what_the_rules_allow() {
    if netns::skip_kernel_test("the_kernel_forwards_exactly_what_the_rules_allow") {
        return;
    }
    let mut hosts = hosts();
    hosts.extend([
        Host {
            name: "outside".into(),
            addresses: vec![ip("8.8.8.8")],
        },
        Host {
            name: "outside6".into(),
            addresses: vec![ip("fd00:2::7")],
        },
    ]);
    let topology = Topology::build(hosts).expect("the network builds");
    let ruleset = ruleset();
    let text = script::render(&ruleset).unwrap();
    topology.router().nft(&text).expect("nft loads the script");
    let listed = topology
        .router()
        .run("nft", &["list", "table", "inet", "netpol"], "")
        .unwrap();
    assert!(
        listed.contains("ct state established,related accept"),
        "{listed}"
    );

    // (from, to, transport, port, passes)
    let cases = [
        ("10.1.0.2", "10.1.0.1", Transport::Tcp, 80, true),
        ("10.1.0.2", "10.1.0.1", Transport::Tcp, 81, false),
        ("8.8.8.8", "10.1.0.1", Transport::Tcp, 80, false),
        ("8.8.8.8", "10.1.0.1", Transport::Udp, 53, true),
        ("8.8.8.8", "10.1.0.1", Transport::Udp, 54, false),
        ("fd00:2::7", "fd00:1::1", Transport::Tcp, 8080, true),
        ("fd00:2::7", "fd00:1::1", Transport::Tcp, 8081, false),
        // Egress is not isolated, and the replies pass as established.
        ("10.1.0.1", "10.1.0.2", Transport::Tcp, 81, true),
        ("10.1.0.1", "8.8.8.8", Transport::Udp, 9, true),
        // Neither side is an endpoint.
        ("8.8.8.8", "10.1.0.2", Transport::Tcp, 22, true),
    ];
    let probes: Vec<Probe> = cases
        .iter()
        .map(|&(from, to, transport, port, _)| Probe {
            from: ip(from),
            to: ip(to),
            transport,
            port,
        })
        .collect();
    let options = ProbeOptions {
        timeout: Duration::from_millis(1000),
        parallel: 16,
    };
    let results = probe::run(&topology, &probes, options);
    for ((case, probe), result) in cases.iter().zip(&probes).zip(&results) {
        let want = if case.4 {
            ProbeResult::Passed
        } else {
            ProbeResult::Dropped
        };
        assert_eq!(result, &want, "{case:?}\n{text}");
        let protocol = match probe.transport {
            Transport::Tcp => Protocol::Tcp,
            Transport::Udp => Protocol::Udp,
        };
        let model = evaluate(
            &ruleset,
            &Packet {
                source: probe.from,
                destination: probe.to,
                protocol,
                dport: probe.port,
            },
        );
        assert_eq!(model.accepted, case.4, "in-process evaluation of {case:?}");
    }
}

/// libnftables loaded on a thread inside `namespace`: the context's socket is bound there.
fn library_in(namespace: &netns::Netns) -> netpol_nft::libnft::LibNft {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                namespace.enter().expect("entering the namespace");
                netpol_nft::libnft::LibNft::load().expect("libnftables is installed with nft")
            })
            .join()
            .unwrap()
    })
}

fn hosts() -> Vec<Host> {
    vec![
        Host {
            name: "x/a".into(),
            addresses: vec![ip("10.1.0.1"), ip("fd00:1::1")],
        },
        Host {
            name: "x/b".into(),
            addresses: vec![ip("10.1.0.2")],
        },
    ]
}

fn tcp(topology: &Topology, from: &str, to: &str, port: u16) -> ProbeResult {
    let probe = Probe {
        from: ip(from),
        to: ip(to),
        transport: Transport::Tcp,
        port,
    };
    let options = ProbeOptions {
        timeout: Duration::from_millis(1000),
        parallel: 1,
    };
    probe::run(topology, &[probe], options).remove(0)
}

#[test]
fn the_programmer_changes_only_what_changed_removes_orphans_and_restarts_quietly() {
    if netns::skip_kernel_test(
        "the_programmer_changes_only_what_changed_removes_orphans_and_restarts_quietly",
    ) {
        return;
    }
    let topology = Topology::build(hosts()).expect("the network builds");
    let router = topology.router();
    let mut first = ruleset();
    // Pod b is an endpoint too, with chains that allow everything.
    first.add("x/b", vec![ip("10.1.0.2")], &[], &IdentityStore::new());

    let created = program(router, &mut None, &first).unwrap();
    assert_eq!(
        created.added.len(),
        9,
        "two chains per endpoint, the dispatch chain, a base chain per hook and the log chain of \
         x/a's deny rule"
    );
    assert!(created.deleted.is_empty());
    assert_eq!(
        tcp(&topology, "10.1.0.2", "10.1.0.1", 81),
        ProbeResult::Dropped
    );

    // A restart with nothing changed reads the table back and changes no chain and no set; it
    // refills the sets, whose elements it does not read back: flushed, then declared again with
    // their elements.
    let restart = program(router, &mut None, &first).unwrap();
    assert!(restart.added.is_empty() && restart.deleted.is_empty());
    assert_eq!(restart.sets_added + restart.sets_deleted, 0);
    // The eight chains and the log chain.
    assert_eq!(restart.unchanged, 9);
    let script = restart.script.unwrap_or_default();
    assert!(
        script.lines().all(|l| l.starts_with("flush set ")
            || l == "table inet netpol {"
            || l.starts_with("\tset ")
            || l == "}"),
        "{script}"
    );
    assert!(script.contains("elements = {"), "{script}");

    // A chain netpol no longer wants (left by an earlier run) is removed.
    router
        .nft("add chain inet netpol ep_0000000000000000_in_0000000000000000\n")
        .unwrap();
    let cleaned = program(router, &mut None, &first).unwrap();
    assert_eq!(
        cleaned.deleted,
        vec!["ep_0000000000000000_in_0000000000000000"]
    );
    assert!(cleaned.added.is_empty());
    assert_eq!(router.chains().unwrap().unwrap().len(), 9);

    // One pod's change replaces its chain, the dispatch chain and the base chains, nothing else:
    // its deny rule is the same policy rule, so its log chain stays.
    let before: Vec<String> = router.chains().unwrap().unwrap();
    let mut second = ruleset_with_ports(&[80, 81]);
    second.add("x/b", vec![ip("10.1.0.2")], &[], &IdentityStore::new());
    let changed = program(router, &mut None, &second).unwrap();
    assert_eq!(changed.added.len(), 5, "{changed:?}");
    assert_eq!(changed.deleted.len(), 5, "{changed:?}");
    for prefix in ["forward_", "input_", "output_", "pods_"] {
        assert!(changed.added.iter().any(|n| n.starts_with(prefix)));
    }
    assert!(changed.added.iter().any(|n| n.contains("_in_")));
    assert!(!changed.added.iter().any(|n| n.starts_with("log_")));
    let after: Vec<String> = router.chains().unwrap().unwrap();
    let kept = before.iter().filter(|n| after.contains(n)).count();
    assert_eq!(
        kept, 4,
        "x/b's two chains, x/a's egress chain and the log chain are untouched"
    );
    assert_eq!(
        tcp(&topology, "10.1.0.2", "10.1.0.1", 81),
        ProbeResult::Passed
    );
    assert_eq!(
        tcp(&topology, "10.1.0.2", "10.1.0.1", 82),
        ProbeResult::Dropped
    );

    // A removed endpoint's chains go.
    let gone = program(router, &mut None, &ruleset_with_ports(&[80, 81])).unwrap();
    assert_eq!(
        gone.deleted.len(),
        6,
        "x/b's chains, the old dispatch and base chains: {gone:?}"
    );
    // x/a's two chains, the dispatch chain, three base chains and the log chain of its deny rule.
    assert_eq!(router.chains().unwrap().unwrap().len(), 7);
}

/// A replica of the workload a policy admits: one element added to the set in the kernel, no
/// chain changed, and its packets pass at once; its removal drops them again.
#[test]
fn a_replica_is_admitted_by_one_element_and_no_chain_changes() {
    if netns::skip_kernel_test("a_replica_is_admitted_by_one_element_and_no_chain_changes") {
        return;
    }
    let mut all = hosts();
    all.push(Host {
        name: "x/c".into(),
        addresses: vec![ip("10.1.0.3")],
    });
    let topology = Topology::build(all).expect("the network builds");
    let router = topology.router();
    let shared = |address: &str| {
        let mut info = pod_info("b");
        info.namespace = "web".into();
        Identity::pod(info, ip(address))
    };
    let mut store = IdentityStore::new();
    let (b, _) = store.insert_shared(shared("10.1.0.2"), Vec::new());
    let mut map = MapBuilder::new(Verdict::Deny);
    map.set(
        Direction::Ingress,
        Some(b),
        key(Some(Protocol::Tcp), 80, 16),
        value(1, Verdict::Allow, None),
    );
    let compiled = compile_entries(map.build().iter(), &store, &CompileOptions::default()).unwrap();
    let mut cache = SetCache::default();
    let mut known: Option<Known> = None;
    let build = |store: &IdentityStore, cache: &mut SetCache| {
        let mut ruleset = Ruleset::default();
        ruleset.add_cached("x/a", vec![ip("10.1.0.1")], &compiled.rules, store, cache);
        ruleset
    };
    program(router, &mut known, &build(&store, &mut cache)).unwrap();
    assert_eq!(
        tcp(&topology, "10.1.0.2", "10.1.0.1", 80),
        ProbeResult::Passed
    );
    assert_eq!(
        tcp(&topology, "10.1.0.3", "10.1.0.1", 80),
        ProbeResult::Dropped
    );
    let chains = router.chains().unwrap().unwrap();

    let (joined, _) = store.insert_shared(shared("10.1.0.3"), Vec::new());
    assert_eq!(joined, b, "a replica of the same workload");
    cache.update(&store, &[b].into());
    let done = program(router, &mut known, &build(&store, &mut cache)).unwrap();
    let script = done.script.unwrap();
    assert!(
        script.starts_with("table inet netpol {\n\tset a4_")
            && script.contains("elements = { 10.1.0.3 }")
            && script.lines().count() == 3,
        "one set declared again with the new element: {script}"
    );
    assert_eq!(router.chains().unwrap().unwrap(), chains);
    assert_eq!(
        tcp(&topology, "10.1.0.3", "10.1.0.1", 80),
        ProbeResult::Passed
    );

    store.remove_address(ip("10.1.0.3"));
    cache.update(&store, &[b].into());
    let done = program(router, &mut known, &build(&store, &mut cache)).unwrap();
    let script = done.script.unwrap();
    assert!(
        script.starts_with("flush set inet netpol a4_")
            && script.contains("elements = { 10.1.0.2 }"),
        "the small set is refilled with what is left: {script}"
    );
    assert_eq!(router.chains().unwrap().unwrap(), chains);
    assert_eq!(
        tcp(&topology, "10.1.0.3", "10.1.0.1", 80),
        ProbeResult::Dropped
    );
    assert_eq!(
        tcp(&topology, "10.1.0.2", "10.1.0.1", 80),
        ProbeResult::Passed
    );
}

/// libnftables in the agent's process programs the same table as the `nft` command: the
/// transaction lands in the namespace the library was loaded in, packets meet the rules, a
/// refused script is refused, and a restart through the library reads the table back and
/// changes no chain.
#[test]
fn libnftables_in_process_programs_the_table_the_command_would() {
    if netns::skip_kernel_test("libnftables_in_process_programs_the_table_the_command_would") {
        return;
    }
    let topology = Topology::build(hosts()).expect("the network builds");
    let router = topology.router();
    // Loaded on a thread inside the router's namespace: the context's socket is bound there.
    let library = library_in(router);
    let first = ruleset();
    let created = program(&library, &mut None, &first).unwrap();
    // Two chains of x/a, the dispatch chain, three base chains and the log chain of its deny rule.
    assert_eq!(created.added.len(), 7, "{created:?}");
    assert_eq!(
        created
            .added
            .iter()
            .filter(|n| n.starts_with("log_"))
            .count(),
        1,
        "{created:?}"
    );
    let mut through_command = router.chains().unwrap().unwrap();
    let mut through_library = library.chains().unwrap().unwrap();
    through_command.sort();
    through_library.sort();
    assert_eq!(through_library, through_command);
    assert_eq!(
        library.sets().unwrap().unwrap().len(),
        router.sets().unwrap().unwrap().len()
    );
    assert_eq!(
        tcp(&topology, "10.1.0.2", "10.1.0.1", 80),
        ProbeResult::Passed
    );
    assert_eq!(
        tcp(&topology, "10.1.0.2", "10.1.0.1", 81),
        ProbeResult::Dropped
    );

    // Checked only: nothing changes, and a bad script is refused with the kernel's reason.
    let table = script::Table::new(&ruleset_with_ports(&[80, 81])).unwrap();
    let names: Vec<&str> = table.names().collect();
    library
        .check(&script::render_check(&table, &names))
        .unwrap();
    assert_eq!(
        tcp(&topology, "10.1.0.2", "10.1.0.1", 81),
        ProbeResult::Dropped
    );
    let refused = library.apply("add rule inet netpol no_such_chain drop\n");
    assert!(
        matches!(refused, Err(netpol_nft::NftError::Refused(ref m)) if m.contains("No such file")),
        "{refused:?}"
    );

    // A restart through the library reads the names back and changes no chain.
    let restart = program(&library, &mut None, &first).unwrap();
    assert!(
        restart.added.is_empty() && restart.deleted.is_empty(),
        "{restart:?}"
    );
    // A change through the library is seen by the kernel at once.
    program(&library, &mut None, &ruleset_with_ports(&[80, 81])).unwrap();
    assert_eq!(
        tcp(&topology, "10.1.0.2", "10.1.0.1", 81),
        ProbeResult::Passed
    );
}

/// The generation the agent reads before each libnftables command moves by one a commit, and
/// the step taken at the generations libnftables misreads (multiples of 65,536) commits once
/// and leaves nothing behind. Reaching such a generation takes 65,536 commits (six minutes
/// here), so the misreading itself is shown outside the suite (`fuzz/artifacts/render/`).
#[test]
fn the_nftables_generation_moves_one_a_commit_and_the_step_leaves_nothing() {
    use netpol_nft::generation::{Generation, STEP_SCRIPT};
    if netns::skip_kernel_test(
        "the_nftables_generation_moves_one_a_commit_and_the_step_leaves_nothing",
    ) {
        return;
    }
    let namespace = netns::Netns::new().expect("a network namespace");
    let (mut generation, library) = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                namespace.enter().expect("entering the namespace");
                (
                    Generation::open().expect("a netlink socket"),
                    netpol_nft::libnft::LibNft::load().expect("libnftables is installed with nft"),
                )
            })
            .join()
            .unwrap()
    });
    let before = generation.read().unwrap();
    library.apply("add table inet netpol\n").unwrap();
    assert_eq!(generation.read().unwrap(), before + 1);
    library.apply(STEP_SCRIPT).unwrap();
    assert_eq!(generation.read().unwrap(), before + 2);
    let tables = namespace.run("nft", &["list", "tables"], "").unwrap();
    assert_eq!(tables.trim(), "table inet netpol", "{tables}");
    // A listing commits nothing.
    library.chains().unwrap();
    assert_eq!(generation.read().unwrap(), before + 2);
}

/// A set too large for one transaction ([`netpol_nft::staging`]) is filled in parts before the
/// chains that name it: the kernel holds every element, and an address of the last part passes
/// where one outside the set is dropped.
#[test]
fn a_large_set_filled_in_parts_admits_its_last_address() {
    use netpol_nft::staging::STAGE_ELEMENTS;
    if netns::skip_kernel_test("a_large_set_filled_in_parts_admits_its_last_address") {
        return;
    }
    let mut hosts = hosts();
    for (name, address) in [("inside", "8.8.8.8"), ("outside", "9.9.9.9")] {
        hosts.push(Host {
            name: name.into(),
            addresses: vec![ip(address)],
        });
    }
    let topology = Topology::build(hosts).expect("the network builds");
    let router = topology.router();

    // 2.5 parts of addresses, 8.8.8.8 among the last ones.
    let count = STAGE_ELEMENTS * 5 / 2;
    let last = u32::from(std::net::Ipv4Addr::new(8, 8, 8, 8)) + 10;
    let (mut store, _) = store_with(&[], &[]);
    let class = WorldClass::SelectedBy(
        std::sync::Arc::from([(std::sync::Arc::from("big"), 0)]),
        netpol_engine::Leaves::SingleAddresses,
    );
    let mut id = None;
    for address in last + 1 - count as u32..=last {
        let net = ipnet::IpNet::from(IpAddr::from(std::net::Ipv4Addr::from(address)));
        id = Some(store.insert_world_member(net, class.clone()).0);
    }
    let mut b = MapBuilder::new(Verdict::Allow);
    b.set(
        Direction::Ingress,
        None,
        PortKey::ANY,
        value(1, Verdict::Deny, None),
    );
    b.set(
        Direction::Ingress,
        id,
        key(Some(Protocol::Tcp), 80, 16),
        value(1, Verdict::Allow, None),
    );
    let compiled = compile_entries(b.build().iter(), &store, &CompileOptions::default()).unwrap();
    let mut ruleset = Ruleset::default();
    ruleset.add(
        "x/a",
        vec![ip("10.1.0.1"), ip("fd00:1::1")],
        &compiled.rules,
        &store,
    );

    let created = program(router, &mut None, &ruleset).unwrap();
    assert!(created.sets_added >= 1, "{created:?}");
    let main = created.script.unwrap();
    assert!(
        !main.contains("8.8.8.8"),
        "the main transaction only names the set"
    );
    let sets = router.sets().unwrap().unwrap();
    let elements_of = |name: &str| {
        let listed = router
            .run("nft", &["list", "set", "inet", "netpol", name], "")
            .unwrap();
        listed.matches(',').count() + 1
    };
    let name = sets
        .iter()
        .find(|name| elements_of(name) > STAGE_ELEMENTS)
        .expect("the large set is in the kernel");
    // The kernel grows a large hash set in the background after the agent filled it, and a
    // listing meanwhile can skip or repeat elements (`set_dump::hosts_of`): it is read until it
    // shows every element twice in a row, for up to 5 s, before it is counted and before the
    // restart below reads it.
    let mut listed = Vec::new();
    for _ in 0..50 {
        listed.push(elements_of(name));
        if listed.ends_with(&[count, count]) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(listed.ends_with(&[count, count]), "{listed:?}");
    // A class of single addresses is a hash set (no `i` after the family): no interval tree.
    assert!(name.starts_with("a4_"), "{name}");
    assert_eq!(
        tcp(&topology, "8.8.8.8", "10.1.0.1", 80),
        ProbeResult::Passed
    );
    assert_eq!(
        tcp(&topology, "9.9.9.9", "10.1.0.1", 80),
        ProbeResult::Dropped
    );
    assert_eq!(
        tcp(&topology, "8.8.8.8", "10.1.0.1", 81),
        ProbeResult::Dropped
    );
    // A restart through libnftables reads the large set back from the kernel (netlink) and,
    // the set being as wanted, sends nothing; an address removed meanwhile is added back alone.
    let library = library_in(router);
    let restart = program(&library, &mut None, &ruleset).unwrap();
    assert_eq!(restart.script, None, "{restart:?}");
    router
        .nft(&format!(
            "delete element inet netpol {name} {{ 8.8.8.8 }}\n"
        ))
        .unwrap();
    assert_eq!(
        tcp(&topology, "8.8.8.8", "10.1.0.1", 80),
        ProbeResult::Dropped
    );
    let mut known = None;
    let repaired = program(&library, &mut known, &ruleset).unwrap();
    let script = repaired.script.unwrap();
    assert!(
        script.contains("elements = { 8.8.8.8 }") && script.len() < 200,
        "{script}"
    );
    assert_eq!(
        tcp(&topology, "8.8.8.8", "10.1.0.1", 80),
        ProbeResult::Passed
    );

    // More than a part's worth of addresses joining the class, 9.9.9.9 among them, and leaving it again:
    // set contents alone change, so each goes as one batch of element messages, no script; the
    // chains stay.
    let chains = router.chains().unwrap().unwrap();
    let id = id.unwrap();
    let joining: Vec<ipnet::IpNet> = (0..=STAGE_ELEMENTS as u32)
        .map(|i| u32::from(std::net::Ipv4Addr::new(9, 9, 9, 9)) - i)
        .map(|a| ipnet::IpNet::from(IpAddr::from(std::net::Ipv4Addr::from(a))))
        .collect();
    // Through one set cache, as the agent's: it numbers each set's contents (`KnownSet`).
    let mut cache = SetCache::default();
    let mut rebuilt = |store: &IdentityStore| {
        cache.update(store, &[id].into());
        let mut ruleset = Ruleset::default();
        ruleset.add_cached(
            "x/a",
            vec![ip("10.1.0.1"), ip("fd00:1::1")],
            &compiled.rules,
            store,
            &mut cache,
        );
        ruleset
    };
    program(&library, &mut known, &rebuilt(&store)).unwrap();
    for net in &joining {
        assert_eq!(store.insert_world_member(*net, class.clone()).0, id);
    }
    // Each change: no script, exactly its elements, the same chains, and 9.9.9.9 as it says.
    let mut check = |store: &IdentityStore, (added, deleted), nine_nine| {
        let done = program(&library, &mut known, &rebuilt(store)).unwrap();
        let script = done.script.as_ref().map_or(0, String::len);
        assert_eq!(script, 0, "no script, but one of {script} bytes");
        assert_eq!(
            (done.elements_added, done.elements_deleted),
            (added, deleted)
        );
        assert_eq!(router.chains().unwrap().unwrap(), chains);
        assert_eq!(tcp(&topology, "9.9.9.9", "10.1.0.1", 80), nine_nine);
        assert_eq!(
            tcp(&topology, "8.8.8.8", "10.1.0.1", 80),
            ProbeResult::Passed
        );
    };
    check(&store, (joining.len(), 0), ProbeResult::Passed);
    store.remove_world_members(&joining);
    check(&store, (0, joining.len()), ProbeResult::Dropped);
}
