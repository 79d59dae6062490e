//! Target (b): the incremental engine against the reference evaluator and against a full
//! recomputation, on policy sets and changes made from the fuzzer's bytes. After every change:
//! every endpoint whose MapState changed is reported and the incremental state equals a full
//! recompute. After the last change: the state equals an engine built afresh, and every lookup
//! equals the reference evaluator.
//!
//! The last two are the expensive checks (every endpoint address against every remote, both
//! directions, every probe, through both evaluators), and ran after every change until
//! 2026-11-27: replaying the committed corpus, once at the end doubles the rate (14.5 -> 28.3
//! inputs a second, docs/performance.md). Running them once loses no reachable state: a state
//! reached after k changes is the final state of the input cut after its k-th change, which the
//! fuzzer tries as readily. An incremental slip that a later change hides is still caught by the
//! per-change recompute.
#![no_main]

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use netpol_engine::{Engine, EngineConfig, PolicyEntry};
use netpol_fuzz::generate::common::{
    canonical, canonical_by_id, described_identities, first_disagreement, node_identities,
    pod_identities,
};
use netpol_fuzz::generate::{self, PodSpec, Step, NODES};

/// The cluster as the steps left it, from which a fresh engine is built.
#[derive(Default)]
struct Model {
    pods: Vec<Option<PodSpec>>,
    relabelled: [bool; 3],
    policies: Vec<Option<Vec<PolicyEntry>>>,
}

impl Model {
    fn stage_pod(&self, engine: &mut Engine, i: usize) {
        let identities = match &self.pods[i] {
            Some(spec) => pod_identities(i, spec, self.relabelled[spec.namespace]),
            None => Vec::new(),
        };
        engine.set_pod(format!("pod{i}"), identities);
    }

    fn apply(&mut self, engine: &mut Engine, step: Step) {
        match step {
            Step::AddPod(spec) => {
                self.pods.push(Some(spec));
                self.stage_pod(engine, self.pods.len() - 1);
            }
            Step::RemovePod(i) => {
                if self.pods.get_mut(i).and_then(Option::take).is_some() {
                    self.stage_pod(engine, i);
                }
            }
            Step::RelabelPod(i, app) => {
                if let Some(Some(spec)) = self.pods.get_mut(i) {
                    spec.app = app;
                    self.stage_pod(engine, i);
                }
            }
            Step::RelabelNamespace(ns) => {
                self.relabelled[ns] = !self.relabelled[ns];
                for i in 0..self.pods.len() {
                    if self.pods[i].as_ref().is_some_and(|s| s.namespace == ns) {
                        self.stage_pod(engine, i);
                    }
                }
            }
            Step::SetPolicy(k, entries) => {
                engine.set_policy(format!("policy{k}"), entries.clone());
                self.policies[k] = Some(entries);
            }
            Step::RemovePolicy(k) => {
                engine.remove_policy(&format!("policy{k}"));
                self.policies[k] = None;
            }
        }
    }

    fn fresh(&self) -> Engine {
        let mut engine = Engine::new(EngineConfig::default());
        for (n, node) in NODES.iter().enumerate() {
            engine.set_node(node.0, node_identities(n));
        }
        for i in 0..self.pods.len() {
            if self.pods[i].is_some() {
                self.stage_pod(&mut engine, i);
            }
        }
        for (k, entries) in self.policies.iter().enumerate() {
            if let Some(entries) = entries {
                engine.set_policy(format!("policy{k}"), entries.clone());
            }
        }
        engine.commit();
        engine
    }
}

fn run(u: &mut Unstructured) -> arbitrary::Result<()> {
    let mut model = Model {
        policies: vec![None; 3],
        ..Model::default()
    };
    let mut engine = Engine::new(EngineConfig::default());
    for (n, node) in NODES.iter().enumerate() {
        engine.set_node(node.0, node_identities(n));
    }
    for _ in 0..u.int_in_range(1..=5)? {
        let spec = generate::pod_spec(u)?;
        model.apply(&mut engine, Step::AddPod(spec));
    }
    model.apply(&mut engine, Step::SetPolicy(0, generate::entries(u, 8)?));
    engine.commit();
    assert_no_drift(&mut engine);
    // Checked at the end whatever happens to the rest of the input: a step the bytes run out in
    // the middle of ends the sequence, not the test.
    let result = steps(u, &mut engine, &mut model);
    check(&mut engine, &model);
    result
}

/// The changes the rest of the input makes, each committed and checked for drift and reports.
fn steps(u: &mut Unstructured, engine: &mut Engine, model: &mut Model) -> arbitrary::Result<()> {
    for _ in 0..u.int_in_range(0..=8)? {
        let step = generate::step(u)?;
        model.apply(engine, step);
        // Entries by identity id: an endpoint is reported when its entries change. Addresses
        // joining or leaving an identity change no entry; the identity is reported instead, and
        // a datapath updates the address sets that name it.
        let before = canonical_by_id(engine);
        let members_before = described_identities(engine);
        let reported: Vec<String> = engine
            .commit()
            .into_iter()
            .filter(|c| !c.is_empty())
            .map(|c| c.endpoint)
            .collect();
        for (key, rows) in canonical_by_id(engine) {
            if before.get(&key) != Some(&rows) {
                assert!(
                    reported.contains(&key),
                    "{key} changed but was not reported"
                );
            }
        }
        let members_after = described_identities(engine);
        for id in members_before.keys().chain(members_after.keys()) {
            if members_before.get(id) != members_after.get(id) {
                assert!(
                    engine.changed_identities().contains(id),
                    "identity {id} changed its addresses but was not reported"
                );
            }
        }
        assert_no_drift(engine);
    }
    Ok(())
}

/// The incremental state equals a full recompute.
fn assert_no_drift(engine: &mut Engine) {
    let drift = engine.recompute_all();
    assert!(
        drift.is_empty(),
        "incremental state differs from a recompute: {drift:?}"
    );
}

/// The engine equals a full recompute, a fresh engine and the reference evaluator.
fn check(engine: &mut Engine, model: &Model) {
    assert_no_drift(engine);
    assert_eq!(
        canonical(engine),
        canonical(&model.fresh()),
        "differs from a fresh engine"
    );
    if let Some(difference) = first_disagreement(engine) {
        panic!("engine and reference disagree: {difference}");
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
