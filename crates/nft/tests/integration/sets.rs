//! Named address sets: a replica changes set elements only, and after any sequence of replicas
//! coming and going the kernel (the fake, which keeps every set's elements and refuses what the
//! kernel refuses) holds exactly the table a fresh build makes, whose verdicts equal the
//! MapState lookup.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use ipnet::IpNet;
use netpol_datapath::testing::*;
use netpol_datapath::{
    compile_entries, Backoff, CompileOptions, CompiledPods, Desired, Enforcer, LocalPods,
    RuleAction,
};
use netpol_engine::mapstate::MapState;
use netpol_engine::*;
use netpol_nft::eval::{evaluate, Packet};
use netpol_nft::fake::FakeNft;
use netpol_nft::script::Table;
use netpol_nft::{NftEnforcer, Ruleset};
use proptest::prelude::*;

const LOCAL: &str = "x/local";
const LOCAL_V4: &str = "10.99.0.1";
const LOCAL_V6: &str = "fd99::1";

/// The store of `store_with(&WORLDS, &HOSTS)`, same ids, but each host a shared identity that
/// replicas can join (one namespace per host, so none share one).
fn shared_store() -> IdentityStore {
    let (reference, _) = store_with(&WORLDS, &HOSTS);
    let mut store = IdentityStore::new();
    for w in ["0.0.0.0/0", "::/0"].iter().chain(WORLDS.iter()) {
        store.insert(Identity::world(w.parse().unwrap()));
    }
    for (i, h) in HOSTS.iter().enumerate() {
        let address: IpAddr = h.parse().unwrap();
        let (id, _) = store.insert_shared(pod(i, address), cidrs(address));
        assert_eq!(reference.resolve(address), Some(id), "ids as store_with's");
    }
    // The pooled world class `build` adds after the hosts.
    pool(&mut store);
    store
}

fn pod(i: usize, address: IpAddr) -> Identity {
    let mut info = pod_info(&format!("p{i}-{address}"));
    info.namespace = format!("ns{i}");
    Identity::pod(info, address)
}

fn cidrs(address: IpAddr) -> Vec<IpNet> {
    WORLDS
        .iter()
        .chain(POOLED.iter())
        .map(|w| w.parse::<IpNet>().unwrap())
        .filter(|w| w.contains(&address))
        .collect()
}

/// A new replica of host `i`, `offset` addresses after it, if that address lies in the same
/// policy prefixes and is free.
fn replica(store: &IdentityStore, i: usize, offset: u8) -> Option<IpAddr> {
    let original: IpAddr = HOSTS[i].parse().unwrap();
    let candidate = match original {
        IpAddr::V4(a) => IpAddr::from((u32::from(a)).checked_add(u32::from(offset))?.to_be_bytes()),
        IpAddr::V6(a) => IpAddr::from(
            (u128::from(a))
                .checked_add(u128::from(offset))?
                .to_be_bytes(),
        ),
    };
    let taken = store
        .resolve(candidate)
        .and_then(|id| store.get(id))
        .is_some_and(|identity| !identity.is_world());
    (cidrs(candidate) == cidrs(original) && !taken && candidate.to_string() != LOCAL_V4)
        .then_some(candidate)
}

fn enforcer(kernel: &FakeNft) -> NftEnforcer {
    let backoff = Backoff {
        initial: Duration::from_secs(1),
        max: Duration::from_secs(1),
    };
    NftEnforcer::new(Box::new(kernel.clone()), backoff)
}

fn local_pods() -> LocalPods {
    let addresses = vec![LOCAL_V4.parse().unwrap(), LOCAL_V6.parse().unwrap()];
    LocalPods::from([(LOCAL.to_string(), addresses)])
}

/// A fresh build of the table (no cache), as the kernel must hold it.
fn fresh(pods: &LocalPods, compiled: &CompiledPods, store: &IdentityStore) -> Ruleset {
    let mut ruleset = Ruleset::default();
    for (key, addresses) in pods {
        let rules = &compiled[key].rules;
        ruleset.add(key.clone(), addresses.clone(), rules, store);
    }
    ruleset
}

/// Whether the fake kernel holds exactly `ruleset`'s chains and sets, element for element.
fn kernel_mismatch(kernel: &FakeNft, ruleset: &Ruleset) -> Option<String> {
    let table = Table::new(ruleset).unwrap();
    let held = kernel.table()?;
    let chains: BTreeSet<String> = table.names().map(str::to_string).collect();
    let have: BTreeSet<String> = held.chains.keys().cloned().collect();
    if chains != have {
        return Some(format!("chains {have:?}, want {chains:?}"));
    }
    let sets: BTreeMap<String, BTreeSet<String>> = table
        .sets
        .iter()
        .map(|(n, s)| {
            let elements = s
                .nets
                .iter()
                .map(|n| {
                    if n.prefix_len() == n.max_prefix_len() {
                        n.addr().to_string()
                    } else {
                        n.to_string()
                    }
                })
                .collect();
            (n.to_string(), elements)
        })
        .collect();
    (sets != held.sets).then(|| format!("sets {:?}, want {sets:?}", held.sets))
}

/// The first probe flow where the table's verdict differs from the MapState lookup.
fn verdict_mismatch(map: &MapState, store: &IdentityStore, ruleset: &Ruleset) -> Option<String> {
    let local: [IpAddr; 2] = [LOCAL_V4.parse().unwrap(), LOCAL_V6.parse().unwrap()];
    for address in probe_addresses(store) {
        let Some(remote) = store.resolve(address) else {
            continue;
        };
        let endpoint = local[usize::from(address.is_ipv6())];
        for direction in Direction::BOTH {
            for protocol in [Protocol::Tcp, Protocol::Udp, Protocol::Icmp] {
                for port in PROBE_PORTS {
                    let want = expected(&map.lookup(direction, remote, protocol, port));
                    let (source, destination) = match direction {
                        Direction::Ingress => (address, endpoint),
                        Direction::Egress => (endpoint, address),
                    };
                    let packet = Packet {
                        source,
                        destination,
                        protocol,
                        dport: port,
                    };
                    let got = evaluate(ruleset, &packet);
                    if got.accepted != (want == RuleAction::Allow) {
                        return Some(format!(
                            "{direction} {address} {protocol}/{port}: accepted={}, lookup {want:?}",
                            got.accepted
                        ));
                    }
                }
            }
        }
    }
    None
}

#[derive(Clone, Debug)]
enum Change {
    Add { host: usize, offset: u8 },
    Remove { host: usize, nth: usize },
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        (0..HOSTS.len(), 1..40u8).prop_map(|(host, offset)| Change::Add { host, offset }),
        (0..HOSTS.len(), 0..4usize).prop_map(|(host, nth)| Change::Remove { host, nth }),
    ]
}

/// Applies `change` to the store; the identity whose addresses changed, if any. An identity
/// keeps its first address, as the MapState names it.
fn apply(store: &mut IdentityStore, change: &Change) -> Option<IdentityId> {
    match *change {
        Change::Add { host, offset } => {
            let address = replica(store, host, offset)?;
            let (id, _) = store.insert_shared(pod(host, address), cidrs(address));
            Some(id)
        }
        Change::Remove { host, nth } => {
            let first: IpAddr = HOSTS[host].parse().unwrap();
            let id = store.resolve(first)?;
            let replicas: Vec<IpAddr> = store
                .members(id)
                .iter()
                .map(IpNet::addr)
                .filter(|a| *a != first)
                .collect();
            let gone = *replicas.get(nth % replicas.len().max(1))?;
            store.remove_address(gone);
            Some(id)
        }
    }
}

proptest! {
    #![proptest_config(proptest_config())]

    #[test]
    fn after_replicas_come_and_go_the_kernel_holds_the_fresh_table_and_verdicts_equal_lookup(
        entries in prop::collection::vec(random_entry(), 0..24),
        roots in prop::array::uniform2((0..3u128, prop::sample::select(vec![Verdict::Allow, Verdict::Deny]))),
        changes in prop::collection::vec(change(), 1..12),
    ) {
        let (map, _) = build(&entries, roots);
        let mut store = shared_store();
        let compiled = compile_entries(map.iter(), &store, &CompileOptions::default()).unwrap();
        let compiled = CompiledPods::from([(LOCAL.to_string(), Shared::new(compiled))]);
        let pods = local_pods();
        let kernel = FakeNft::new();
        let mut enforcer = enforcer(&kernel);
        let now = Instant::now();
        let none = BTreeSet::new();
        let desired = Desired { pods: &pods, compiled: &compiled, identities: &store, changed: &none, audit: &Default::default() };
        enforcer.enforce(&desired, false, now).unwrap();
        let chains_before = kernel.chain_names();
        for change in &changes {
            let Some(id) = apply(&mut store, change) else { continue };
            let changed = BTreeSet::from([id]);
            let desired = Desired { pods: &pods, compiled: &compiled, identities: &store, changed: &changed, audit: &Default::default() };
            enforcer.enforce(&desired, false, now).unwrap();
            let ruleset = fresh(&pods, &compiled, &store);
            if let Some(m) = kernel_mismatch(&kernel, &ruleset) {
                prop_assert!(false, "after {change:?}: {m}");
            }
            if let Some(m) = verdict_mismatch(&map, &store, &ruleset) {
                prop_assert!(false, "after {change:?}: {m}");
            }
        }
        // Replicas never change a decision: the chains are the same ones.
        prop_assert_eq!(kernel.chain_names(), chains_before);
        // A resync reads the names back and refills the sets: nothing else changes.
        let desired = Desired { pods: &pods, compiled: &compiled, identities: &store, changed: &none, audit: &Default::default() };
        enforcer.enforce(&desired, true, now).unwrap();
        let ruleset = fresh(&pods, &compiled, &store);
        prop_assert_eq!(kernel_mismatch(&kernel, &ruleset), None);
    }
}

/// A new replica of a workload a policy names: the transaction declares its set again with the
/// one new element and nothing else; its removal flushes the (small) set and declares it with
/// the elements left (no `delete element`, which makes libnftables read every interval set).
#[test]
fn a_replica_is_one_element_added_and_its_removal_one_set_refilled() {
    let mut store = shared_store();
    let host = 1; // 10.1.2.4, inside 10.1.2.0/24
    let id = store.resolve(HOSTS[host].parse().unwrap()).unwrap();
    let mut b = MapBuilder::new(Verdict::Deny);
    b.set(
        Direction::Ingress,
        Some(id),
        key(Some(Protocol::Tcp), 80, 16),
        value(1, Verdict::Allow, None),
    );
    let map = b.build();
    let compiled = compile_entries(map.iter(), &store, &CompileOptions::default()).unwrap();
    let compiled = CompiledPods::from([(LOCAL.to_string(), Shared::new(compiled))]);
    let pods = local_pods();
    let kernel = FakeNft::new();
    let mut enforcer = enforcer(&kernel);
    let now = Instant::now();
    let none = BTreeSet::new();
    let desired = Desired {
        pods: &pods,
        compiled: &compiled,
        identities: &store,
        changed: &none,
        audit: &Default::default(),
    };
    enforcer.enforce(&desired, false, now).unwrap();
    let (applied, _, _) = kernel.counts();
    let before = kernel.table().unwrap();
    let set = before
        .chains
        .values()
        .flatten()
        .next()
        .expect("the ingress chain references a set")
        .clone();

    let change = Change::Add { host, offset: 9 };
    assert_eq!(apply(&mut store, &change), Some(id));
    let changed = BTreeSet::from([id]);
    let desired = Desired {
        pods: &pods,
        compiled: &compiled,
        identities: &store,
        changed: &changed,
        audit: &Default::default(),
    };
    let report = enforcer.enforce(&desired, false, now).unwrap();
    assert_eq!(kernel.counts().0, applied + 1);
    let after = kernel.table().unwrap();
    assert_eq!(after.chains, before.chains, "no chain changed");
    assert_eq!(
        after.sets[&set],
        BTreeSet::from(["10.1.2.13".to_string(), "10.1.2.4".to_string()])
    );
    assert!(report
        .outcomes
        .values()
        .all(|o| matches!(o, netpol_datapath::Outcome::Unchanged)));
    let sent = kernel.last_script().unwrap();
    assert_eq!(
        sent,
        format!("table inet netpol {{\n\tset {set} {{ type ipv4_addr; elements = {{ 10.1.2.13 }} }}\n}}\n")
    );

    store.remove_address("10.1.2.13".parse().unwrap());
    let desired = Desired {
        pods: &pods,
        compiled: &compiled,
        identities: &store,
        changed: &changed,
        audit: &Default::default(),
    };
    enforcer.enforce(&desired, false, now).unwrap();
    let sent = kernel.last_script().unwrap();
    assert_eq!(
        sent,
        format!(
            "flush set inet netpol {set}\ntable inet netpol {{\n\tset {set} {{ type ipv4_addr; elements = {{ 10.1.2.4 }} }}\n}}\n"
        )
    );
    assert_eq!(
        kernel.table().unwrap().sets[&set],
        BTreeSet::from(["10.1.2.4".to_string()])
    );
    assert_eq!(kernel.table().unwrap().chains, before.chains);

    // An identity nobody's rules name changes nothing at all.
    let other = store.resolve(HOSTS[4].parse().unwrap()).unwrap();
    apply(&mut store, &Change::Add { host: 4, offset: 3 });
    let changed = BTreeSet::from([other]);
    let desired = Desired {
        pods: &pods,
        compiled: &compiled,
        identities: &store,
        changed: &changed,
        audit: &Default::default(),
    };
    let applied = kernel.counts().0;
    enforcer.enforce(&desired, false, now).unwrap();
    assert_eq!(kernel.counts().0, applied, "nothing sent");
}

/// A failed transaction leaves the kernel as it was; the next one reads the table back and
/// refills its sets, so the model never drifts from the kernel.
#[test]
fn a_failed_element_change_is_sent_again_and_the_model_stays_true() {
    let mut store = shared_store();
    let id = store.resolve(HOSTS[2].parse().unwrap()).unwrap();
    let mut b = MapBuilder::new(Verdict::Deny);
    b.set(
        Direction::Egress,
        Some(id),
        key(None, 0, 0),
        value(1, Verdict::Allow, None),
    );
    let map = b.build();
    let compiled = compile_entries(map.iter(), &store, &CompileOptions::default()).unwrap();
    let compiled = CompiledPods::from([(LOCAL.to_string(), Shared::new(compiled))]);
    let pods = local_pods();
    let kernel = FakeNft::new();
    let mut enforcer = enforcer(&kernel);
    let start = Instant::now();
    let none = BTreeSet::new();
    let desired = Desired {
        pods: &pods,
        compiled: &compiled,
        identities: &store,
        changed: &none,
        audit: &Default::default(),
    };
    enforcer.enforce(&desired, false, start).unwrap();
    apply(&mut store, &Change::Add { host: 2, offset: 1 });
    kernel.set_unavailable(true);
    let changed = BTreeSet::from([id]);
    let desired = Desired {
        pods: &pods,
        compiled: &compiled,
        identities: &store,
        changed: &changed,
        audit: &Default::default(),
    };
    let report = enforcer.enforce(&desired, false, start).unwrap();
    assert!(report
        .outcomes
        .values()
        .all(|o| matches!(o, netpol_datapath::Outcome::Failed { .. })));
    assert_eq!(
        kernel_mismatch(&kernel, &fresh(&pods, &compiled, &shared_store())),
        None,
        "the kernel holds the table before the replica"
    );
    kernel.set_unavailable(false);
    // Retried once the backoff passed, with nothing new changed.
    let later = start + Duration::from_secs(2);
    let desired = Desired {
        pods: &pods,
        compiled: &compiled,
        identities: &store,
        changed: &none,
        audit: &Default::default(),
    };
    enforcer.enforce(&desired, false, later).unwrap();
    let sent = kernel.last_script().unwrap();
    assert!(sent.starts_with("flush set inet netpol a4"), "{sent}");
    assert!(sent.contains("10.2.0.5, 10.2.0.6 }"), "{sent}");
    assert_eq!(
        kernel_mismatch(&kernel, &fresh(&pods, &compiled, &store)),
        None
    );
}
