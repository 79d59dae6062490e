//! What CIDR-heavy policies that select local pods cost the engine (issue 33): policies of
//! 50,000 `/32`s each (`NETPOL_LIVE_CIDR_POLICIES`, 5 unless set), each selecting the 20 local
//! pods of a 200-pod namespace, added one by one, one commit each. Prints, per policy, the CPU
//! seconds of its commit and the heap bytes it left allocated (a counting allocator of this
//! binary), then the total. A scale bench, not criterion: each step changes the state the next
//! one runs on. Figures are reported in docs/performance.md.
//!
//! `cargo bench -p netpol-engine --bench live_cidr`

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicUsize, Ordering};

use netpol_dev::cpu::process_cpu_seconds as cpu_seconds;
use netpol_engine::*;

/// The system allocator, counting the bytes allocated and not yet freed.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const PREFIXES: u32 = 50_000;
const PODS: u32 = 200;
const LOCAL_PODS: u32 = 20;

/// An engine on `node-0` with the 200 pods of `ns-1`, the first 20 on `node-0`.
fn cluster() -> Engine {
    let mut engine = Engine::new(EngineConfig {
        local_node: Some("node-0".into()),
        ..EngineConfig::default()
    });
    let namespace: Labels = [(NAMESPACE_NAME_LABEL.to_string(), "ns-1".to_string())].into();
    for i in 0..PODS {
        let node = if i < LOCAL_PODS { "node-0" } else { "node-1" };
        let info = PodInfo {
            namespace: "ns-1".into(),
            name: format!("pod{i}"),
            labels: Labels::from([("app".to_string(), format!("app-{}", i % 10))]).into(),
            namespace_labels: namespace.clone().into(),
            node: Some(node.into()),
            ports: vec![],
        };
        let address = IpAddr::from(Ipv4Addr::from(0x0a00_000a + i));
        engine.set_pod(format!("ns-1/pod{i}"), vec![Identity::pod(info, address)]);
    }
    engine.commit();
    engine
}

/// Policy `k`: egress from every pod of `ns-1` to 50,000 `/32`s of its own (as `toCIDR`).
fn policy(k: u32) -> Vec<PolicyEntry> {
    let peers = (0..PREFIXES)
        .map(|j| {
            let address = IpAddr::from(Ipv4Addr::from(0x4000_0000 + k * PREFIXES + j));
            Peer::Cidr(CidrSelector {
                net: address.into(),
                except: Default::default(),
                scope: AddressScope::OutsideCluster,
            })
        })
        .collect();
    vec![PolicyEntry {
        tier: Tier::Normal,
        priority: Priority::unordered(),
        verdict: Verdict::Allow,
        subject: PodSelector::in_namespace("ns-1", LabelSelector::default()),
        direction: Direction::Egress,
        peers,
        ports: vec![],
        default_deny: true,
        enforcement: Enforcement::Enforce,
        auth: None,
        provenance: Provenance::default(),
    }]
}

fn main() {
    let policies: u32 = std::env::var("NETPOL_LIVE_CIDR_POLICIES")
        .ok()
        .map_or(5, |s| s.parse().expect("a number of policies"));
    let mut engine = cluster();
    let start = LIVE.load(Ordering::Relaxed);
    let mut cpu_total = 0.0;
    for k in 0..policies {
        let entries = policy(k);
        let before = LIVE.load(Ordering::Relaxed);
        let cpu = cpu_seconds();
        engine.set_policy(format!("CiliumNetworkPolicy/ns-1/cidr-{k}"), entries);
        engine.commit();
        let cpu = cpu_seconds() - cpu;
        cpu_total += cpu;
        let retained = LIVE.load(Ordering::Relaxed) as isize - before as isize;
        let entries: usize = engine.endpoints().map(|(_, map)| map.len()).sum();
        eprintln!(
            "policy {k}: {cpu:.2} s CPU, {retained} bytes retained ({} a prefix); {} identities, \
             {} selectors, {entries} MapState entries",
            retained / PREFIXES as isize,
            engine.identities().len(),
            engine.selector_count(),
        );
    }
    let total = LIVE.load(Ordering::Relaxed) - start;
    eprintln!(
        "{policies} policies: {total} bytes retained ({} a prefix), {cpu_total:.2} s CPU",
        total / (policies * PREFIXES) as usize
    );
}
