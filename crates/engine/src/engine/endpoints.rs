//! Local endpoints' MapStates: which pods are local, full recomputes, recomputes of single
//! identity classes, twins sharing one computation, and which endpoint holds which address.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use std::net::IpAddr;

use super::{EndpointState, Engine};
use crate::entry::Direction;
use crate::identity::{Identity, IdentityId, PodInfo};
use crate::mapstate::{
    compute_identity_class, compute_wildcard, ClassChange, ClassEntries, ClassKey,
};
use crate::ports::NamedPort;
use crate::resolve::{EndpointPolicy, RulePort, SelectorRule};
use crate::selector_cache::{SelectorDelta, SelectorId};
use crate::shared::{Shared, SharedId};

impl Engine {
    /// Whether the pod `key` exists, runs on the local node and is among the endpoints the engine
    /// was restricted to, if any.
    pub(super) fn is_local_pod(&self, key: &str) -> bool {
        if self
            .only_endpoints
            .as_ref()
            .is_some_and(|only| !only.contains(key))
        {
            return false;
        }
        let Some(identities) = self.pods.get(key) else {
            return false;
        };
        let pod = identities.first().and_then(Identity::as_pod);
        // A pod that owns none of its addresses any more (a newer pod was given them: its
        // sandbox is gone) is no endpoint.
        let owns_one = identities
            .iter()
            .any(|i| self.pod_owns(key, i.prefix.addr()));
        owns_one
            && pod.is_some_and(|p| {
                self.config.local_node.is_none() || p.node == self.config.local_node
            })
    }

    /// Recomputes endpoint `key` in full, or copies the state a twin got earlier in the same
    /// commit. `computed` maps the twin keys done so far to the endpoint that holds the result.
    pub(super) fn recompute_or_adopt(
        &mut self,
        key: &str,
        computed: &mut HashMap<PodInfo, String>,
    ) -> Vec<ClassChange> {
        let twin_key = self.twin_key(key);
        match twin_key.as_ref().and_then(|t| computed.get(t)) {
            Some(twin) => self.adopt_twin(key, twin),
            None => {
                let changes = self.recompute_endpoint(key);
                if let Some(twin_key) = twin_key {
                    computed.insert(twin_key, key.to_owned());
                }
                changes
            }
        }
    }

    /// What an endpoint's MapState is a function of, besides the policies and the identities: its
    /// pod without its name, and with its labels as subject selectors see them (which entries
    /// select it; a StatefulSet pod's own `pod-name` label decides nothing unless a subject names it). Endpoints with equal
    /// twin keys have equal MapStates.
    fn twin_key(&self, key: &str) -> Option<PodInfo> {
        let mut pod = self
            .subject_labels
            .trim_pod(self.pods.get(key)?.first()?.as_pod()?);
        pod.name.clear();
        Some(pod)
    }

    /// Gives endpoint `key` the state just computed for its twin, with its own pod and addresses.
    fn adopt_twin(&mut self, key: &str, twin: &str) -> Vec<ClassChange> {
        let identities = self.pods.get(key).map_or(&[][..], |i| &i[..]);
        let Some(pod) = identities.first().and_then(Identity::as_pod).cloned() else {
            return Vec::new();
        };
        let addresses = self.owned_addresses(key, identities);
        let Some(source) = self.endpoints.get(twin) else {
            return self.recompute_endpoint(key);
        };
        let state = EndpointState {
            pod,
            addresses,
            policy: source.policy.clone(),
            wildcard: source.wildcard.clone(),
            map: source.map.clone(),
            over_budget: source.over_budget.clone(),
            budget_checked: source.budget_checked,
            budget_used: source.budget_used,
        };
        let old = self.endpoints.remove(key);
        self.readdress_endpoint(
            key,
            old.as_ref().map(|o| &o.addresses[..]),
            &state.addresses,
        );
        let old_map = old.map(|o| o.map).unwrap_or_default();
        let changes = old_map.changes_to(&state.map);
        self.endpoints.insert(key.to_owned(), state);
        changes
    }

    /// The id of endpoint `key`'s map: equal for twins that share it.
    pub(super) fn map_id(&self, key: &str) -> Option<SharedId> {
        self.endpoints.get(key).map(|state| state.map.id())
    }

    /// Drops endpoint `key`'s hold on its map, which a twin is about to change in place and
    /// give it back ([`Engine::follow_twin`]).
    pub(super) fn let_go_of_map(&mut self, key: &str) {
        if let Some(state) = self.endpoints.get_mut(key) {
            state.map = Shared::default();
        }
    }

    /// Gives endpoint `key`, whose map it shared with `twin` before `twin` was brought up to
    /// date in this commit, what `twin` now has: the same classes recomputed from the same
    /// inputs give the same result, and sharing it keeps one copy for the replicas of a
    /// workload on this node however often it changes.
    pub(super) fn follow_twin(&mut self, key: &str, twin: &str) {
        let Some(source) = self.endpoints.get(twin) else {
            return;
        };
        let (policy, wildcard, map, over_budget, budget_checked, budget_used) = (
            source.policy.clone(),
            source.wildcard.clone(),
            source.map.clone(),
            source.over_budget.clone(),
            source.budget_checked,
            source.budget_used,
        );
        if let Some(state) = self.endpoints.get_mut(key) {
            state.policy = policy;
            state.wildcard = wildcard;
            state.map = map;
            state.over_budget = over_budget;
            state.budget_checked = budget_checked;
            state.budget_used = budget_used;
        }
    }

    /// The addresses of pod `key` that it owns: an address a newer pod was given is that pod's.
    fn owned_addresses(&self, key: &str, identities: &[Identity]) -> Vec<IpAddr> {
        identities
            .iter()
            .map(|i| i.prefix.addr())
            .filter(|address| self.pod_owns(key, *address))
            .collect()
    }

    /// Points the endpoint's addresses, and no longer its old ones, at it.
    fn readdress_endpoint(&mut self, key: &str, old: Option<&[IpAddr]>, new: &[IpAddr]) {
        for address in old.unwrap_or_default() {
            // Unless another endpoint took it over first in this commit.
            if self.endpoint_addresses.get(address).map(String::as_str) == Some(key) {
                self.endpoint_addresses.remove(address);
            }
        }
        for address in new {
            self.endpoint_addresses.insert(*address, key.to_owned());
        }
    }

    /// Resolves the endpoint's rules afresh and recomputes every class they can produce.
    pub(super) fn recompute_endpoint(&mut self, key: &str) -> Vec<ClassChange> {
        let identities = self.pods.get(key).map_or(&[][..], |i| &i[..]);
        let Some(pod) = identities.first().and_then(Identity::as_pod).cloned() else {
            return Vec::new();
        };
        let addresses = self.owned_addresses(key, identities);
        let policy = self.resolve_policy(&pod);
        let mut state = self.endpoints.remove(key).unwrap_or_else(|| EndpointState {
            pod: pod.clone(),
            addresses: Vec::new(),
            policy: Arc::default(),
            wildcard: Arc::default(),
            map: Shared::default(),
            over_budget: None,
            budget_checked: 0,
            budget_used: 0,
        });
        self.readdress_endpoint(key, Some(&state.addresses), &addresses);
        state.pod = pod;
        state.addresses = addresses;
        state.policy = Arc::new(policy);
        // An isolated endpoint's map is the isolation map: compute from nothing, then report
        // the difference from the isolation map.
        let isolated = state.over_budget.is_some().then(|| {
            state.wildcard = Arc::default();
            std::mem::take(&mut state.map)
        });
        let classes = self.every_class(&state);
        let mut changes = self.recompute_state_classes(&mut state, classes);
        self.enforce_budget(&mut state, &mut changes);
        if let Some(isolated) = isolated {
            changes = isolated.changes_to(&state.map);
        }
        self.endpoints.insert(key.to_owned(), state);
        changes
    }

    /// The rules of the entries of the engine's view whose subject selects `pod` (entries kept
    /// for [`Engine::would_be_map`] are not the view's).
    fn resolve_policy(&self, pod: &PodInfo) -> EndpointPolicy {
        let selecting = self.selecting(pod);
        let entries = selecting.into_iter().map(|i| (Some(i), &self.entries[i]));
        self.resolve_entries(entries.filter(|(_, e)| self.view.admits(e)), pod)
    }

    /// Every class the endpoint's rules can produce, and every class it holds now, so that the
    /// ones no rule produces any more are emptied.
    pub(super) fn every_class(&self, state: &EndpointState) -> BTreeSet<ClassKey> {
        let mut classes: BTreeSet<ClassKey> = state.map.class_keys().collect();
        for direction in Direction::BOTH {
            classes.insert((direction, None));
            for rule in state
                .policy
                .rules
                .iter()
                .filter(|r| r.direction == direction)
            {
                if rule.peer.is_wildcard() {
                    if has_named_port(rule) {
                        let pods = self.store.iter().filter(|(_, i)| i.as_pod().is_some());
                        classes.extend(pods.map(|(id, _)| (direction, Some(id))));
                    }
                } else {
                    classes.extend(
                        self.cache
                            .selected(rule.selector)
                            .iter()
                            .map(|id| (direction, Some(*id))),
                    );
                }
            }
        }
        classes
    }

    /// Recomputes some classes of an existing endpoint, against the rules it already has.
    pub(super) fn recompute_classes(
        &mut self,
        key: &str,
        classes: BTreeSet<ClassKey>,
    ) -> Vec<ClassChange> {
        let Some(mut state) = self.endpoints.remove(key) else {
            return Vec::new();
        };
        if state.over_budget.is_some() {
            // An isolated endpoint keeps no classes to update: any change may bring it back
            // under the budget, so it is computed in full.
            self.endpoints.insert(key.to_owned(), state);
            return self.recompute_endpoint(key);
        }
        let mut changes = self.recompute_state_classes(&mut state, classes);
        // An unchanged map within the budget it was last held to is still within it: counting
        // its classes (thousands at 150,000 pods) cost a fifth of every replica's CPU. A changed
        // one is within it while the upper bound of what the changes added is.
        if !changes.is_empty() || state.budget_checked != self.max_entries {
            let added: usize = changes.iter().map(|c| c.new.len() + 1).sum();
            let bound = state.budget_used.saturating_add(added);
            if state.budget_checked == self.max_entries && bound <= self.max_entries {
                state.budget_used = bound;
            } else {
                self.enforce_budget(&mut state, &mut changes);
            }
        }
        self.endpoints.insert(key.to_owned(), state);
        changes
    }

    /// Recomputes the given classes of `state`, which is out of `self.endpoints` meanwhile, so
    /// that it can be changed while the rest of the engine is read.
    pub(super) fn recompute_state_classes(
        &self,
        state: &mut EndpointState,
        classes: BTreeSet<ClassKey>,
    ) -> Vec<ClassChange> {
        let mut changes = Vec::new();
        // Wildcard classes first: identity classes are computed against them.
        for class in classes.iter().filter(|c| c.1.is_none()) {
            let (wildcard, entries) = compute_wildcard(&state.policy, class.0);
            Arc::make_mut(&mut state.wildcard).insert(class.0, wildcard);
            state
                .map
                .make_mut()
                .replace_class(*class, entries, &mut changes);
        }
        // Remote identities selected by rules of the same content (with the same named ports,
        // where a rule names one) get equal classes: each is computed once and shared. Content,
        // not rule: the rules of one entry differ only in their peer, and a policy of 3,000
        // CIDRs with the same ports must cost one class, not 3,000.
        let rules = &state.policy.rules;
        let same_as = rule_signatures(rules);
        let selecting = self.selecting_rules(state, &classes);
        let mut computed: HashMap<ClassInputs, ClassEntries> = HashMap::new();
        for class in classes.iter().filter(|c| c.1.is_some()) {
            let (direction, Some(id)) = *class else {
                continue;
            };
            let entries = match (self.store.get(id), state.wildcard.get(&direction)) {
                (Some(remote), Some(wildcard)) => {
                    let selected: Vec<usize> = match &selecting {
                        Some(by_class) => by_class.get(class).cloned().unwrap_or_default(),
                        None => (0..rules.len())
                            .filter(|i| {
                                self.rule_selects(&rules[*i], direction, id, remote, &state.pod)
                            })
                            .collect(),
                    };
                    let named = selected
                        .iter()
                        .any(|i| has_named_port(&rules[*i]))
                        .then(|| remote.named_ports().map(<[_]>::to_vec).unwrap_or_default());
                    let mut representatives: Vec<usize> =
                        selected.iter().map(|i| same_as[*i]).collect();
                    representatives.sort_unstable();
                    representatives.dedup();
                    computed
                        .entry(ClassInputs {
                            direction,
                            rules: representatives,
                            named,
                        })
                        .or_insert_with_key(|inputs| {
                            let rules = inputs.rules.iter().map(|i| &rules[*i]);
                            ClassEntries::from_map(compute_identity_class(rules, remote, wildcard))
                        })
                        .clone()
                }
                _ => ClassEntries::default(),
            };
            state
                .map
                .make_mut()
                .replace_class_shared(*class, entries, &mut changes);
        }
        changes
    }

    /// The rules selecting each of `classes`, by walking each rule's selected identities, when
    /// that is cheaper than testing every rule against every class (a full recompute of an
    /// endpoint with thousands of CIDR rules: rules × classes would be millions of tests). None
    /// when testing per class is cheaper (an identity change touching a few classes).
    fn selecting_rules(
        &self,
        state: &EndpointState,
        classes: &BTreeSet<ClassKey>,
    ) -> Option<HashMap<ClassKey, Vec<usize>>> {
        let rules = &state.policy.rules;
        let walk: usize = rules
            .iter()
            .filter(|r| !r.peer.is_wildcard())
            .map(|r| self.cache.selected(r.selector).len())
            .sum();
        let wildcard_named = rules
            .iter()
            .filter(|r| r.peer.is_wildcard() && has_named_port(r))
            .count();
        let walk = walk + wildcard_named * classes.len();
        if walk >= classes.len().saturating_mul(rules.len()) {
            return None;
        }
        let mut by_class: HashMap<ClassKey, Vec<usize>> = HashMap::new();
        for (i, rule) in rules.iter().enumerate() {
            let candidates: Box<dyn Iterator<Item = IdentityId> + '_> = if rule.peer.is_wildcard() {
                if !has_named_port(rule) {
                    continue;
                }
                Box::new(classes.iter().filter_map(|c| c.1))
            } else {
                Box::new(self.cache.selected(rule.selector).iter().copied())
            };
            for id in candidates {
                let class = (rule.direction, Some(id));
                if !classes.contains(&class) {
                    continue;
                }
                let Some(remote) = self.store.get(id) else {
                    continue;
                };
                if self.rule_selects(rule, rule.direction, id, remote, &state.pod) {
                    by_class.entry(class).or_default().push(i);
                }
            }
        }
        Some(by_class)
    }

    /// Whether `rule` has a say in the class of remote identity `id`. A wildcard rule's keys are
    /// in the wildcard class, except for named ports, which resolve per remote pod. The selector
    /// cache is shared by every endpoint, so a host-relative peer's side of the node is checked
    /// here, against this endpoint's node.
    fn rule_selects(
        &self,
        rule: &SelectorRule,
        direction: Direction,
        id: IdentityId,
        remote: &Identity,
        pod: &PodInfo,
    ) -> bool {
        if rule.direction != direction {
            return false;
        }
        if rule.peer.is_wildcard() {
            return remote.as_pod().is_some() && has_named_port(rule);
        }
        self.cache.selects(rule.selector, id)
            && rule.peer.node_relation_holds(remote, pod.node.as_deref())
    }

    /// The identity classes of one endpoint that an identity change touches.
    pub(super) fn affected_classes(
        &self,
        key: &str,
        deltas: &HashMap<SelectorId, SelectorDelta>,
        added_pods: &[IdentityId],
        removed: &HashMap<IdentityId, Identity>,
    ) -> BTreeSet<ClassKey> {
        let mut classes = BTreeSet::new();
        let Some(state) = self.endpoints.get(key) else {
            return classes;
        };
        for rule in &state.policy.rules {
            if let Some(delta) = deltas.get(&rule.selector) {
                classes.extend(
                    delta
                        .added
                        .iter()
                        .chain(&delta.removed)
                        .map(|id| (rule.direction, Some(*id))),
                );
            }
            if rule.peer.is_wildcard() && has_named_port(rule) {
                classes.extend(added_pods.iter().map(|id| (rule.direction, Some(*id))));
                let gone_pods = removed.iter().filter(|(_, i)| i.as_pod().is_some());
                classes.extend(gone_pods.map(|(id, _)| (rule.direction, Some(*id))));
            }
        }
        // Classes of removed identities disappear even if no rule mentions them any more.
        for id in removed.keys() {
            for direction in Direction::BOTH {
                if state.map.class((direction, Some(*id))).is_some() {
                    classes.insert((direction, Some(*id)));
                }
            }
        }
        classes
    }

    /// Whether an endpoint's MapState names one of `worlds` (the world identities holding a
    /// host that came or went): a lookup per world and direction, not a scan of its classes
    /// (the scan, for each of a node's endpoints, was a third of a new label set's cost at
    /// 150,000 pods).
    pub(super) fn names_any_world(&self, key: &str, worlds: &[IdentityId]) -> bool {
        let Some(state) = self.endpoints.get(key) else {
            return false;
        };
        worlds.iter().any(|id| {
            Direction::BOTH
                .iter()
                .any(|direction| state.map.class((*direction, Some(*id))).is_some())
        })
    }
}

/// Everything an identity class is computed from, besides the endpoint's wildcard class: the
/// rules that select the remote identity and, where one of them names a port, the remote's
/// named ports.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ClassInputs {
    direction: Direction,
    rules: Vec<usize>,
    named: Option<Vec<NamedPort>>,
}

/// For each rule, the first rule whose content is the same: everything a class computed from it
/// reads (direction, whether the peer is the wildcard, band, level, verdict, ports,
/// authentication, reason), which leaves the peer's selector out. Such rules add the same
/// candidates to any class they are in, so a class is a function of their representatives.
fn rule_signatures(rules: &[SelectorRule]) -> Vec<usize> {
    type Signature<'a> = (
        Direction,
        bool,
        crate::resolve::Band,
        u32,
        crate::entry::Verdict,
        &'a [RulePort],
        Option<crate::entry::AuthMode>,
        &'a crate::reference::Reason,
    );
    let mut first: HashMap<Signature, usize> = HashMap::new();
    rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let signature = (
                r.direction,
                r.peer.is_wildcard(),
                r.band,
                r.level,
                r.verdict,
                &r.ports[..],
                r.auth,
                &*r.reason,
            );
            *first.entry(signature).or_insert(i)
        })
        .collect()
}

/// Whether a rule names a port by name. With a wildcard peer such a rule still has a class per
/// remote pod identity, because the name resolves to a port number per remote pod.
fn has_named_port(rule: &SelectorRule) -> bool {
    rule.ports.iter().any(|p| matches!(p, RulePort::Named(..)))
}
