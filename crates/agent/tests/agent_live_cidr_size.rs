//! What CIDR-heavy policies cost the node whose pods they select (issue 33, "memory follows what
//! can match"): five CiliumNetworkPolicies of 50,000 `/32`s each (`NETPOL_LIVE_CIDR_POLICIES`
//! for another count), selecting the pods of `ns-1` (all on this node), added one by one to a
//! 200-pod synth cluster through the embedded mode's files. The prefixes of one policy are selected by the same entry, so they are one world
//! identity of 50,000 prefixes: one MapState entry per endpoint and one HCN set, not 50,000 of
//! each (before, about 2.8 KB a prefix). Heap bytes are counted by a global allocator of this test
//! binary (see `agent_support::counting`); one test, so that no other test's allocations run
//! meanwhile. `--nocapture` prints what each policy added.

mod agent_support;

use std::time::Instant;

use agent_support::counting::{self, Counting};
use agent_support::*;
use netpol_dev::cidr::{self, Kind, Selects, Way};
use netpol_dev::cpu::process_cpu_seconds;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const PREFIXES: u32 = 50_000;

/// How many policies: 5, or `NETPOL_LIVE_CIDR_POLICIES`.
fn policy_count() -> usize {
    std::env::var("NETPOL_LIVE_CIDR_POLICIES")
        .ok()
        .map_or(5, |n| n.parse().expect("a number of policies"))
}

/// What a live prefix may cost this process, the HCN simulator's copy of the set included: its
/// peer in the entries (32 bytes), its copy in its entry's CIDR selector and its slot in the
/// shared prefix index (an entry's CIDR peers are one selector), its place in the ipcache's
/// prefix map, its class and the cluster CIDRs, and its address in the class's one set.
/// Measured 189 on average over the five on 2026-11-28 (release and test profile alike: 210 the
/// evening before, with a copy of the cluster CIDRs; 312 that morning, before the compact prefix
/// maps and the trimmed peer lists; 802 with a selector per prefix, 2.8 KB with an identity per
/// prefix).
const BYTES_PER_LIVE_PREFIX: usize = 240;

fn map_entries(agent: &Agent) -> usize {
    agent
        .pipeline
        .engine()
        .endpoints()
        .map(|(_, map)| map.len())
        .sum()
}

#[test]
fn live_cidr_policies_cost_one_identity_each_and_bytes_a_prefix() {
    let dir = scratch_dir("live-cidr-size");
    synth_cluster(&dir, 200);
    let sim = new_sim();
    let mut agent = Agent::start(&dir, &sim);
    assert!(agent.sync().complete());
    let policy_total = policy_count();
    let args = cidr::Args {
        kind: Kind::Cilium,
        count: policy_total,
        prefixes: PREFIXES,
        selects: Selects::Local,
        direction: Way::Egress,
        namespace: "ns-1".into(),
        out: Default::default(),
    };
    let policies: Vec<String> = cidr::policies(&args)
        .unwrap()
        .map(|p| serde_json::to_string(&p).unwrap())
        .collect();
    let start = counting::live();
    let mut report = Vec::new();
    for (k, text) in policies.iter().enumerate() {
        let engine = agent.pipeline.engine();
        let (identities, entries) = (engine.identities().len(), map_entries(&agent));
        agent.write(&format!("0-cidr-{k}.json"), text);
        let before = counting::reset_peak();
        let (clock, cpu) = (Instant::now(), process_cpu_seconds());
        assert!(agent.sync().complete(), "every endpoint programmed");
        let (wall, cpu) = (clock.elapsed(), process_cpu_seconds() - cpu);
        let retained = counting::live().saturating_sub(before);
        let peak = counting::peak() - before;
        let engine = agent.pipeline.engine();
        let added_identities = engine.identities().len() - identities;
        let added_entries = map_entries(&agent) - entries;
        let endpoints = engine.endpoints().count();
        report.push(format!(
            "policy {k}: {} bytes of JSON, {retained} retained ({} a prefix), peak {peak}, \
             {added_identities} identities and {added_entries} MapState entries added over \
             {endpoints} endpoints, {:.3} s wall, {cpu:.3} s CPU",
            text.len(),
            retained / PREFIXES as usize,
            wall.as_secs_f64()
        ));
        // One identity for the policy's 50,000 prefixes, one entry per endpoint it selects.
        assert_eq!(added_identities, 1, "{}", report.join("\n"));
        assert!(added_entries <= endpoints, "{}", report.join("\n"));
        let class = engine
            .identities()
            // `netpol-dev cidr` numbers each policy's prefixes from 64.0.0.0 on.
            .resolve(std::net::Ipv4Addr::from(0x4000_0000 + k as u32 * PREFIXES + 7).into())
            .unwrap();
        assert_eq!(
            engine.identities().members(class).len(),
            PREFIXES as usize,
            "{}",
            engine.identities().summary(class)
        );
    }
    let total = counting::live() - start;
    report.push(format!(
        "{policy_total} policies: {total} bytes retained ({} a prefix)",
        total / (policy_total * PREFIXES as usize)
    ));
    println!("{}", report.join("\n"));
    assert!(
        total < BYTES_PER_LIVE_PREFIX * policy_total * PREFIXES as usize,
        "{}",
        report.join("\n")
    );
    if std::env::var("SKIP_REMOVAL").is_ok() {
        return;
    }
    // Taken out again: the classes go, and what the policies held with them.
    for k in 0..policy_total {
        agent.remove(&format!("0-cidr-{k}.json"));
    }
    assert!(agent.sync().complete());
    let left = counting::live().saturating_sub(start);
    assert!(
        left < total / 10,
        "{left} bytes left of {total} after removing the policies"
    );
}
