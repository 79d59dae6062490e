//! The per-endpoint entry budget: an endpoint whose MapState would exceed it is isolated on
//! purpose (fail closed), not programmed with part of its policy, and the policies that made it
//! so large are named.
//!
//! Storage follows distinct decisions (shared identity classes), so valid policies stay far
//! below the budget; it is the bound for what sharing cannot shrink, e.g. thousands of CIDRs
//! each with ports of its own. Isolation, not the previous rules: the previous rules may allow
//! what the new policy denies, and part of a policy could allow what its other part denies.
//! Ingress from the pod's own node stays allowed (when node probes are allowed at all), so
//! kubelet probes keep answering and the pod is not restarted in a loop for a policy error.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::{EndpointState, Engine};
use crate::entry::{Direction, PolicyEntry, Provenance, Tier, Verdict};
use crate::mapstate::{ClassChange, MapState, MapValue, PortKey};
use crate::reference::Reason;
use crate::resolve::SelectorRule;
use crate::selector::PeerGroup;
use crate::shared::Shared;

/// The default budget: MapState entries per endpoint, each shared class counted once plus one per
/// identity class. An entry costs about 100 bytes with its share of the class tables, so one
/// endpoint at the budget holds about 20 MB.
pub const DEFAULT_MAX_ENTRIES: usize = 200_000;

/// Why an endpoint is isolated: its MapState would hold `entries` (> `limit`), and these
/// policies (kind namespace/name) contribute most to it, largest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverBudget {
    pub entries: usize,
    pub limit: usize,
    pub policies: Vec<String>,
}

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "policy needs {} MapState entries, over the budget of {} per endpoint; largest: {}",
            self.entries,
            self.limit,
            self.policies.join(", ")
        )
    }
}

/// The provenance kind of the engine's own entries (`PolicyEntry::node_probe_allowance`).
const ENGINE_KIND: &str = "netpol";

/// How many policies an [`OverBudget`] names: enough to find the culprit, bounded for a log line.
const NAMED_POLICIES: usize = 5;

/// The policies of `rules` ranked by how many keys they can produce for this endpoint (selected
/// identities times port clauses), largest first.
fn largest_policies(engine: &Engine, rules: &[SelectorRule]) -> Vec<String> {
    let mut weight: BTreeMap<String, usize> = BTreeMap::new();
    for rule in rules {
        let Reason::Rule { provenance, .. } = rule.reason.as_ref() else {
            continue;
        };
        if provenance.kind == ENGINE_KIND {
            continue; // the engine's own node-probe allowance: never the culprit
        }
        let identities = engine.cache.selected(rule.selector).len().max(1);
        *weight.entry(policy_name(provenance)).or_default() += identities * rule.ports.len();
    }
    let mut ranked: Vec<(String, usize)> = weight.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked
        .into_iter()
        .take(NAMED_POLICIES)
        .map(|(name, _)| name)
        .collect()
}

fn policy_name(p: &Provenance) -> String {
    match &p.namespace {
        Some(ns) => format!("{} {}/{}", p.kind, ns, p.name),
        None => format!("{} {}", p.kind, p.name),
    }
}

impl Engine {
    /// Sets the per-endpoint budget (MapState entries; see [`MapState::footprint`]). Endpoints
    /// are held to it from the next commit that recomputes them.
    pub fn set_max_entries(&mut self, limit: usize) {
        self.max_entries = limit;
    }

    /// The endpoints isolated for exceeding the budget, with why.
    pub fn over_budget(&self) -> impl Iterator<Item = (&str, &OverBudget)> {
        self.endpoints
            .iter()
            .filter_map(|(k, e)| Some((k.as_str(), e.over_budget.as_deref()?)))
    }

    /// Holds a freshly computed `state` to the budget: over it, its map becomes the isolation
    /// map and the changes (which led from the old map to the computed one) lead to that instead.
    pub(super) fn enforce_budget(&self, state: &mut EndpointState, changes: &mut Vec<ClassChange>) {
        state.budget_checked = self.max_entries;
        // Counting shared classes once by allocation over-counts equal classes computed apart,
        // so it is an upper bound: within it, the exact (content) count need not be taken.
        let bound = state.map.stored_len() + state.map.class_count();
        state.budget_used = bound;
        let entries = if bound <= self.max_entries {
            0
        } else {
            state.map.footprint()
        };
        if entries <= self.max_entries {
            state.over_budget = None;
            return;
        }
        let over = OverBudget {
            entries,
            limit: self.max_entries,
            policies: largest_policies(self, &state.policy.rules),
        };
        let isolated = self.isolation_map(state, &over);
        // The map before this recompute: the changes' old sides, over the classes left alone.
        let mut before = (*state.map).clone();
        let mut ignored = Vec::new();
        for change in changes.iter().rev() {
            before.replace_class_shared(change.class, change.old.clone(), &mut ignored);
        }
        *changes = before.changes_to(&isolated);
        state.map = Shared::new(isolated);
        state.wildcard = Arc::default();
        state.over_budget = Some(Arc::new(over));
    }

    /// Deny everything both ways, above every policy, except ingress from the pod's own node
    /// when node probes are allowed.
    fn isolation_map(&self, state: &EndpointState, over: &OverBudget) -> MapState {
        let reason = Arc::new(Reason::Isolated {
            tier: Tier::Admin,
            provenance: Provenance {
                kind: ENGINE_KIND.into(),
                namespace: None,
                name: "entry-budget".into(),
                rule: over.to_string(),
            },
        });
        let value = |verdict, reason: &Arc<Reason>| MapValue {
            precedence: u128::MAX,
            verdict,
            auth: None,
            reason: reason.clone(),
        };
        let mut map = MapState::default();
        let mut ignored = Vec::new();
        for direction in Direction::BOTH {
            let deny = HashMap::from([(PortKey::ANY, value(Verdict::Deny, &reason))]);
            map.replace_class((direction, None), deny, &mut ignored);
        }
        if self.config.allow_node_probes {
            let allowance = PolicyEntry::node_probe_allowance();
            let probes = Arc::new(Reason::Rule {
                tier: allowance.tier,
                priority: allowance.priority.clone(),
                provenance: allowance.provenance.clone(),
            });
            let host = &allowance.peers[0];
            let selector = self
                .cache
                .id_of(PeerGroup::One(host))
                .expect("held for the engine's life");
            for id in self.cache.selected(selector) {
                let own_node = self
                    .store
                    .get(*id)
                    .is_some_and(|i| host.node_relation_holds(i, state.pod.node.as_deref()));
                if own_node {
                    let allow = HashMap::from([(PortKey::ANY, value(Verdict::Allow, &probes))]);
                    map.replace_class((Direction::Ingress, Some(*id)), allow, &mut ignored);
                }
            }
        }
        map
    }
}
