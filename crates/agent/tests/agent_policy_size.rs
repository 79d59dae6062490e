//! What a CIDR-heavy policy costs a node it selects nothing on (issue 33): no identity, selector
//! or datapath set, and in memory its parsed entries only. Heap bytes are counted by a global
//! allocator of this test binary, so the figure is the agent's own retained memory (the source,
//! the indexes, the engine, the HCN simulator), not the process's RSS. One test, so that no
//! other test's allocations run meanwhile. `--nocapture` prints, per kind, what the agent
//! retains and its peak, and the part of each taken by reading the object and by its entries.
//!
//! The bounds are what the entries cost today, one 32-byte `Peer` a prefix (the label-selector
//! variants boxed, the exceptions one pointer), against about 100 bytes a prefix with an unboxed
//! `Peer` and about 2 KB before issue 33 (a world identity and a selector each); and the issue's
//! goal, under 4x the JSON for every kind (a `toCIDR` list is about 16 bytes of JSON a prefix).
//!
//! Every kind that can hold addresses is tried: NetworkPolicy `ipBlock`, AdminNetworkPolicy and
//! BaselineAdminNetworkPolicy `networks`, ClusterNetworkPolicy `networks`, Cilium `toCIDR`,
//! `toCIDRSet` and `fromCIDR`, CiliumClusterwideNetworkPolicy `toCIDR`.

mod agent_support;

use std::sync::atomic::Ordering;

use agent_support::counting::{Counting, LIVE, PEAK};
use agent_support::*;
use netpol_dev::cidr::{self, Kind, Selects, Way};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What the agent may retain per prefix of a policy selecting no local pod (see the module): a
/// 32-byte `Peer` and the slack of the vector holding it.
const BYTES_PER_PREFIX: usize = 48;

/// What the agent may retain of such a policy, as a multiple of its JSON (issue 33's goal).
const TIMES_THE_JSON: usize = 4;

/// Within every kind's schema (a ClusterNetworkPolicy's egress holds at most 15,625).
const PREFIXES: u32 = 15_000;

fn policy_args(kind: Kind, selects: Selects, direction: Way) -> cidr::Args {
    cidr::Args {
        kind,
        count: 1,
        prefixes: PREFIXES,
        selects,
        direction,
        namespace: "ns-0".into(),
        out: Default::default(),
    }
}

/// Every kind and form that can hold addresses, with the way it points.
const FORMS: [(Kind, Way); 8] = [
    (Kind::NetworkPolicy, Way::Egress),
    (Kind::NetworkPolicy, Way::Ingress),
    (Kind::Admin, Way::Egress),
    (Kind::Baseline, Way::Egress),
    (Kind::ClusterNetworkPolicy, Way::Egress),
    (Kind::Cilium, Way::Egress),
    (Kind::Cilium, Way::Ingress),
    (Kind::CiliumCidrSet, Way::Egress),
];

#[test]
fn a_policy_selecting_no_local_pod_adds_nothing_to_the_node_beyond_its_entries() {
    let dir = scratch_dir("policy-size");
    synth_cluster(&dir, 200);
    let sim = new_sim();
    let mut agent = Agent::start(&dir, &sim);
    assert!(agent.sync().complete());
    let identities = agent.pipeline.engine().identities().len();
    let selectors = agent.pipeline.engine().selector_count();
    let sets = sim.calls().sets().len();
    let mut forms: Vec<(Kind, Way)> = FORMS.to_vec();
    forms.push((Kind::CiliumClusterwide, Way::Egress));
    let mut report = Vec::new();
    let mut over = Vec::new();
    for (kind, direction) in forms {
        let args = policy_args(kind, Selects::None, direction);
        let text = cidr::policies(&args)
            .unwrap()
            .map(|p| serde_json::to_string(&p).unwrap())
            .collect::<Vec<_>>()
            .join(",");
        let json = text.len();
        // Where the peak goes: reading the object (as a file's JSON is read), then translating it.
        let before = LIVE.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        let object = netpol_api::parse_yaml(&text).unwrap().remove(0).unwrap();
        let read = (
            LIVE.load(Ordering::Relaxed) - before,
            PEAK.load(Ordering::Relaxed) - before,
        );
        let before = LIVE.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        let translation = netpol_api::translate(&object);
        let translated = (
            LIVE.load(Ordering::Relaxed) - before,
            PEAK.load(Ordering::Relaxed) - before,
        );
        drop((object, translation));
        // First in path order, so that its BaselineAdminNetworkPolicy `default` is the one read
        // (the synthetic cluster has one too).
        agent.write(
            "0-cidr.json",
            &format!(r#"{{"apiVersion":"v1","kind":"List","items":[{text}]}}"#),
        );
        drop(text);
        let before = LIVE.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        assert!(agent.sync().complete());
        let retained = LIVE.load(Ordering::Relaxed).saturating_sub(before);
        let peak = PEAK.load(Ordering::Relaxed) - before;
        let x = |bytes: usize| bytes as f64 / json as f64;
        report.push(format!(
            "{kind:?} {direction:?}: {json} bytes of JSON, {retained} retained by the agent ({:.2}x), \
             its peak {peak} ({:.2}x); the object read {:.2}x (peak {:.2}x), its entries {:.2}x \
             (peak {:.2}x)",
            x(retained),
            x(peak),
            x(read.0),
            x(read.1),
            x(translated.0),
            x(translated.1)
        ));
        let engine = agent.pipeline.engine();
        let held: usize = engine
            .entries()
            .iter()
            .flat_map(|e| &e.peers)
            .filter(|p| matches!(p, netpol_engine::Peer::Cidr(_)))
            .count();
        report.push(format!("  the engine holds {held} CIDR peers"));
        // Nothing is added (the baseline policy replaces the cluster's own, which named a set).
        assert!(
            engine.identities().len() <= identities,
            "{kind:?}: an identity"
        );
        assert!(engine.selector_count() <= selectors, "{kind:?}: a selector");
        assert!(sim.calls().sets().len() <= sets, "{kind:?}: an HCN set");
        if retained >= BYTES_PER_PREFIX * PREFIXES as usize || retained >= TIMES_THE_JSON * json {
            over.push(format!("{kind:?} {direction:?}"));
        }
        agent.remove("0-cidr.json");
        assert!(agent.sync().complete());
    }
    println!("{}", report.join("\n"));
    assert!(
        over.is_empty(),
        "over {BYTES_PER_PREFIX} bytes a prefix or {TIMES_THE_JSON}x the JSON: {over:?}\n{}",
        report.join("\n")
    );
}
