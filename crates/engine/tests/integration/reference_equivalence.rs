//! proptest: MapState lookups equal the reference evaluator, and incremental updates equal a
//! full recompute. Case counts come from PROPTEST_CASES (default 256 here; the long run in
//! docs/performance.md used far more).

use crate::common;

use common::*;
use netpol_engine::*;
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(256),
        ..ProptestConfig::default()
    }
}

/// The engine's view: every pod local (the authoring tools'), or one node's (the agent's), where
/// only entries selecting a local pod make identities and hold selectors.
fn engine_config(on_node: bool) -> EngineConfig {
    EngineConfig {
        local_node: on_node.then(|| NODES[0].0.to_string()),
        ..EngineConfig::default()
    }
}

/// An engine of `view` ([`PolicyView`]: the enforced verdict, audited entries left out, or the
/// would-be verdict, every entry enforced).
fn engine_with(
    pods: &[PodSpec],
    entries: Vec<PolicyEntry>,
    on_node: bool,
    view: PolicyView,
) -> Engine {
    let mut engine = Engine::new(engine_config(on_node));
    engine.set_view(view);
    for (n, node) in NODES.iter().enumerate() {
        engine.set_node(node.0, node_identities(n));
    }
    for (i, spec) in pods.iter().enumerate() {
        engine.set_pod(format!("pod{i}"), pod_identities(i, spec, false));
    }
    engine.set_policy("random", entries);
    engine.commit();
    engine
}

#[derive(Clone, Debug)]
enum Step {
    AddPod(PodSpec),
    RemovePod(usize),
    RelabelPod(usize, &'static str),
    RelabelNamespace(usize),
    SetPolicy(usize, Vec<PolicyEntry>),
    RemovePolicy(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => pod_spec().prop_map(Step::AddPod),
        2 => (0..8usize).prop_map(Step::RemovePod),
        2 => (0..8usize, prop::sample::select(vec!["web", "db", "api"])).prop_map(|(i, a)| Step::RelabelPod(i, a)),
        1 => (0..3usize).prop_map(Step::RelabelNamespace),
        1 => (0..3usize, entries(3)).prop_map(|(k, e)| Step::SetPolicy(k, e)),
        1 => (0..3usize).prop_map(Step::RemovePolicy),
    ]
}

proptest! {
    #![proptest_config(config())]

    /// `commit_endpoints` reports exactly the endpoints `commit` does, and leaves the same
    /// MapStates, through a change of pods and policy.
    #[test]
    fn endpoint_reports_equal_change_reports(
        initial in prop::collection::vec(pod_spec(), 1..4),
        policy in entries(5),
        added in prop::collection::vec(pod_spec(), 0..3),
        replacement in entries(5),
        on_node in any::<bool>(),
        view in prop::sample::select(PolicyView::BOTH.to_vec()),
    ) {
        let mut listed = engine_with(&initial, policy.clone(), on_node, view);
        let mut unlisted = engine_with(&initial, policy, on_node, view);
        for engine in [&mut listed, &mut unlisted] {
            for (i, spec) in added.iter().enumerate() {
                let index = initial.len() + i;
                engine.set_pod(format!("pod{index}"), pod_identities(index, spec, false));
            }
            engine.set_policy("random", replacement.clone());
        }
        let keys = |changes: Vec<netpol_engine::EndpointChanges>| -> Vec<(String, bool)> {
            changes.into_iter().map(|c| (c.endpoint.clone(), c.is_empty())).collect()
        };
        let from_changes = keys(listed.commit());
        let from_endpoints = keys(unlisted.commit_endpoints());
        prop_assert_eq!(from_changes, from_endpoints);
        prop_assert_eq!(canonical_by_id(&listed), canonical_by_id(&unlisted));
    }

    /// An engine that keeps audited entries (the agent's) holds the enforced verdict in its
    /// MapStates and the would-be verdict in its would-be maps, both on one identity store.
    #[test]
    fn kept_audited_entries_give_both_views_on_one_store(
        pods in prop::collection::vec(pod_spec(), 1..6),
        entries in entries(8),
        on_node in any::<bool>(),
    ) {
        let engine = engine_keeping_audited(&pods, entries, on_node);
        let every_entry = engine.entries().to_vec();
        if let Some(d) = first_disagreement_in(&engine, &every_entry, PolicyView::Enforced) {
            prop_assert!(false, "{}", d);
        }
        if let Some(d) = first_would_be_disagreement(&engine, &every_entry) {
            prop_assert!(false, "{}", d);
        }
    }

    /// Entries are audited at random: the engine of each view agrees with the reference's
    /// verdict of that view, which the reference computes from every entry and its audit mark.
    #[test]
    fn lookup_equals_reference(
        pods in prop::collection::vec(pod_spec(), 1..6),
        entries in entries(8),
        on_node in any::<bool>(),
    ) {
        let would_be = engine_with(&pods, entries.clone(), on_node, PolicyView::WouldBe);
        let every_entry = would_be.entries().to_vec();
        let enforced = engine_with(&pods, entries, on_node, PolicyView::Enforced);
        for engine in [&enforced, &would_be] {
            if let Some(d) = first_disagreement_in(engine, &every_entry, engine.view()) {
                prop_assert!(false, "{}", d);
            }
        }
    }

    #[test]
    fn incremental_equals_full_recompute(
        initial in prop::collection::vec(pod_spec(), 1..4),
        policy in entries(5),
        steps in prop::collection::vec(step(), 1..10),
        on_node in any::<bool>(),
        view in prop::sample::select(PolicyView::BOTH.to_vec()),
    ) {
        let mut engine = engine_with(&initial, policy.clone(), on_node, view);
        let mut pods: Vec<Option<PodSpec>> = initial.into_iter().map(Some).collect();
        let mut ns_relabelled = [false; 3];
        let mut policies: Vec<Option<Vec<PolicyEntry>>> = vec![None, None, None];
        for step in steps {
            match step {
                Step::AddPod(spec) => {
                    let i = pods.len();
                    engine.set_pod(format!("pod{i}"), pod_identities(i, &spec, ns_relabelled[spec.namespace]));
                    pods.push(Some(spec));
                }
                Step::RemovePod(i) => {
                    if i < pods.len() && pods[i].take().is_some() {
                        engine.set_pod(format!("pod{i}"), vec![]);
                    }
                }
                Step::RelabelPod(i, app) => {
                    if let Some(Some(spec)) = pods.get_mut(i) {
                        spec.app = app;
                        engine.set_pod(format!("pod{i}"), pod_identities(i, spec, ns_relabelled[spec.namespace]));
                    }
                }
                Step::RelabelNamespace(ns) => {
                    ns_relabelled[ns] = !ns_relabelled[ns];
                    for (i, spec) in pods.iter().enumerate() {
                        if let Some(spec) = spec.as_ref().filter(|s| s.namespace == ns) {
                            engine.set_pod(format!("pod{i}"), pod_identities(i, spec, ns_relabelled[ns]));
                        }
                    }
                }
                Step::SetPolicy(k, e) => {
                    engine.set_policy(format!("policy{k}"), e.clone());
                    policies[k] = Some(e);
                }
                Step::RemovePolicy(k) => {
                    engine.remove_policy(&format!("policy{k}"));
                    policies[k] = None;
                }
            }
            let before = canonical_by_id(&engine);
            let members_before = described_identities(&engine);
            let reported: Vec<String> = engine.commit().into_iter().filter(|c| !c.is_empty()).map(|c| c.endpoint).collect();
            // Every endpoint whose entries changed is reported, so a datapath that compiles only
            // reported endpoints stays right.
            for (key, rows) in canonical_by_id(&engine) {
                if before.get(&key) != Some(&rows) {
                    prop_assert!(reported.contains(&key), "{} changed but was not reported", key);
                }
            }
            // Every identity whose addresses changed (or that came or went) is reported, so a
            // datapath that updates only their address sets stays right.
            let members_after = described_identities(&engine);
            let ids: std::collections::BTreeSet<_> = members_before.keys().chain(members_after.keys()).collect();
            for id in ids {
                if members_before.get(id) != members_after.get(id) {
                    prop_assert!(engine.changed_identities().contains(id), "identity {} changed its addresses but was not reported", id);
                }
            }
            let drift = engine.recompute_all();
            prop_assert!(drift.is_empty(), "incremental state differs from a recompute: {:?}", drift);

            // An engine built from scratch with the same state has the same maps.
            let mut fresh = Engine::new(engine_config(on_node));
            fresh.set_view(view);
            for (n, node) in NODES.iter().enumerate() {
                fresh.set_node(node.0, node_identities(n));
            }
            for (i, spec) in pods.iter().enumerate() {
                if let Some(spec) = spec {
                    fresh.set_pod(format!("pod{i}"), pod_identities(i, spec, ns_relabelled[spec.namespace]));
                }
            }
            fresh.set_policy("random", policy.clone());
            for (k, p) in policies.iter().enumerate() {
                if let Some(p) = p {
                    fresh.set_policy(format!("policy{k}"), p.clone());
                }
            }
            fresh.commit();
            prop_assert_eq!(canonical(&engine), canonical(&fresh));
            // The reference reads every entry with its audit mark, whatever the engine's view.
            let mut every_entry = vec![PolicyEntry::node_probe_allowance()];
            every_entry.extend(policy.iter().cloned());
            every_entry.extend(policies.iter().flatten().flatten().cloned());
            if let Some(d) = first_disagreement_in(&engine, &every_entry, view) {
                prop_assert!(false, "{}", d);
            }
        }
    }
}
