//! Audit mode in the pipeline: the would-be rules (`netpol_engine::audit`: every policy
//! enforced, audited ones included) of each local pod an audited policy selects, compiled on the
//! engine's identities beside its enforced rules, for a datapath that reports would-denies
//! (`Enforcer::reports_would_deny`: nftables' audit chains). Where the datapath cannot (HCN),
//! none are computed and the engine does not keep audited entries at all.
//!
//! *Why recomputed at each commit, not patched:* only endpoints an audited policy selects have
//! would-be rules, audit mode is a rollout state, and a full recompute of those endpoints is
//! simple to trust; an unchanged list keeps its allocation, so the datapath rebuilds nothing.

use netpol_engine::Shared;

use netpol_datapath::{compile_entries, CompileOptions, CompiledPods};
use netpol_engine::Engine;

/// The would-be rules of the local pods an audited policy selects.
#[derive(Default)]
pub struct WouldBeRules {
    compiled: CompiledPods,
}

impl WouldBeRules {
    /// Brings the would-be rules up to `engine`'s committed state (an engine that keeps
    /// audited entries, `Engine::keep_audited`). A would-be map that does not compile leaves
    /// that pod without audit rules (it is enforced as before, its would-denies unreported) and
    /// is logged.
    pub fn update(&mut self, engine: &Engine, options: &CompileOptions) {
        let mut next = CompiledPods::new();
        for (key, _) in engine.endpoints() {
            let Some(map) = engine.would_be_map(key) else {
                continue;
            };
            match compile_entries(map.iter(), engine.identities(), options) {
                Ok(rules) => {
                    let rules = match self.compiled.get(key) {
                        Some(old) if **old == rules => old.clone(),
                        _ => Shared::new(rules),
                    };
                    next.insert(key.to_owned(), rules);
                }
                Err(error) => tracing::error!(
                    endpoint = %key,
                    %error,
                    "compiling the would-be rules of audited policies failed; this pod's \
                     would-denies are not reported"
                ),
            }
        }
        self.compiled = next;
    }

    /// The would-be rules by pod key.
    pub fn compiled(&self) -> &CompiledPods {
        &self.compiled
    }
}
