//! Budgets per policy object and per namespace (issue 33): no namespace can exhaust the fleet.
//!
//! Every agent reads every policy of the cluster, so one namespace's objects reach every node.
//! An object over a budget is refused alone: it is logged, counted and reported as an Event like
//! an invalid policy, every other object keeps working, and its subject pods **fail closed**: the
//! engine gets the object's isolation only (its entries that isolate, without peers or ports), so
//! the pods it selects lose what it allowed rather than falling open. (An invalid object gets no
//! entries at all, since what it selects cannot be trusted; an object over budget is valid, so
//! its subject and what it isolates are known.)
//!
//! A namespace's prefixes are admitted in the order its objects arrive, never taken back: an
//! object that would take its namespace over the budget is refused, and an object admitted
//! earlier stays admitted. Agents see the watch's events in one order, so they agree; a refused
//! object is looked at again when it changes, or at the next relist (a restart lists objects in
//! key order and admits them in that order). Cluster-scoped objects share one budget of their
//! own, keyed by the empty namespace.

use std::collections::HashMap;

use netpol_api::{ObjectRef, Translation, ValidationError};
use netpol_engine::{Peer, PolicyEntry};

use crate::SourceKind;

/// How much one object, and the objects of one namespace together, may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyBudgets {
    /// CIDR prefixes (each `cidr` and each `except`) one object may name.
    pub prefixes_per_object: usize,
    /// Peers other than CIDRs (pod, namespace and node selectors, entities) one object may name.
    pub selectors_per_object: usize,
    /// Port clauses one object may list, over all its rules.
    pub ports_per_object: usize,
    /// CIDR prefixes the admitted objects of one namespace may name together.
    pub prefixes_per_namespace: usize,
}

impl Default for PolicyBudgets {
    /// Far above any object of the largest valid shapes measured (a 1.45 MB object, etcd's
    /// limit being 1.5 MB, holds at most about 75,000 `/32`s or 40,000 ports), and a namespace
    /// may hold about ten such objects' worth of prefixes.
    fn default() -> Self {
        PolicyBudgets {
            prefixes_per_object: 100_000,
            selectors_per_object: 20_000,
            ports_per_object: 50_000,
            prefixes_per_namespace: 500_000,
        }
    }
}

/// What an object's entries name, as the budgets count it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolicyCost {
    pub prefixes: usize,
    pub selectors: usize,
    pub ports: usize,
}

impl PolicyCost {
    pub fn of(entries: &[PolicyEntry]) -> PolicyCost {
        let mut cost = PolicyCost::default();
        for entry in entries {
            cost.ports += entry.ports.len();
            for peer in &entry.peers {
                match peer {
                    Peer::Cidr(cidr) => cost.prefixes += 1 + cidr.except.len(),
                    _ => cost.selectors += 1,
                }
            }
        }
        cost
    }
}

/// The prefixes each namespace's admitted objects hold.
#[derive(Debug, Default)]
pub struct BudgetBook {
    limits: PolicyBudgets,
    used: HashMap<String, usize>,
    /// Per kind, each admitted object's key, namespace and prefixes.
    admitted: HashMap<SourceKind, HashMap<String, (String, usize)>>,
}

impl BudgetBook {
    pub fn new(limits: PolicyBudgets) -> Self {
        BudgetBook {
            limits,
            ..BudgetBook::default()
        }
    }

    /// Gives back what the object `key` held.
    pub fn release(&mut self, kind: SourceKind, key: &str) {
        let Some((namespace, prefixes)) = self
            .admitted
            .get_mut(&kind)
            .and_then(|admitted| admitted.remove(key))
        else {
            return;
        };
        if let Some(used) = self.used.get_mut(&namespace) {
            *used -= prefixes;
            if *used == 0 {
                self.used.remove(&namespace);
            }
        }
    }

    /// Gives back what every object of `kind` held: a relist admits them again, in its order.
    pub fn release_kind(&mut self, kind: SourceKind) {
        let keys: Vec<String> = self
            .admitted
            .get(&kind)
            .map(|admitted| admitted.keys().cloned().collect())
            .unwrap_or_default();
        for key in keys {
            self.release(kind, &key);
        }
    }

    /// The translation of object `key` as the engine gets it: unchanged within every budget,
    /// else its refused form (see the module). Whatever the object held before is given back
    /// first, so a changed object is judged against the others alone.
    pub fn admit(
        &mut self,
        kind: SourceKind,
        key: &str,
        object: &ObjectRef,
        translation: Translation,
    ) -> Translation {
        self.release(kind, key);
        if !translation.is_ok() {
            return translation;
        }
        let cost = PolicyCost::of(&translation.entries);
        let namespace = object.namespace.clone().unwrap_or_default();
        let used = self.used.get(&namespace).copied().unwrap_or(0);
        let limits = self.limits;
        let over = if cost.prefixes > limits.prefixes_per_object {
            Some(format!(
                "names {} CIDR prefixes, over the budget of {} per object (--max-policy-prefixes)",
                cost.prefixes, limits.prefixes_per_object
            ))
        } else if cost.selectors > limits.selectors_per_object {
            Some(format!(
                "names {} peer selectors, over the budget of {} per object (--max-policy-selectors)",
                cost.selectors, limits.selectors_per_object
            ))
        } else if cost.ports > limits.ports_per_object {
            Some(format!(
                "lists {} port clauses, over the budget of {} per object (--max-policy-ports)",
                cost.ports, limits.ports_per_object
            ))
        } else if used + cost.prefixes > limits.prefixes_per_namespace {
            Some(format!(
                "names {} CIDR prefixes, and the policies admitted before it in namespace {:?} \
                 name {used}: over the budget of {} per namespace (--max-namespace-prefixes)",
                cost.prefixes, namespace, limits.prefixes_per_namespace
            ))
        } else {
            None
        };
        match over {
            None => {
                if cost.prefixes > 0 {
                    *self.used.entry(namespace.clone()).or_default() += cost.prefixes;
                    self.admitted
                        .entry(kind)
                        .or_default()
                        .insert(key.to_owned(), (namespace, cost.prefixes));
                }
                translation
            }
            Some(message) => refused(object, translation, message),
        }
    }
}

/// The refused form of a translation over budget: an error naming the budget, and the entries
/// that isolate, without their peers and ports (the subject pods fail closed).
fn refused(object: &ObjectRef, translation: Translation, message: String) -> Translation {
    let entries = translation
        .entries
        .into_iter()
        .filter(|entry| entry.default_deny)
        .map(|entry| PolicyEntry {
            peers: Vec::new(),
            ports: Vec::new(),
            ..entry
        })
        .collect();
    Translation {
        entries,
        warnings: translation.warnings,
        errors: vec![ValidationError {
            object: object.clone(),
            field: "spec".to_owned(),
            message: format!("{OVER_BUDGET_PREFIX}{message}; its pods keep only its isolation"),
        }],
    }
}

/// How the message of every refusal over budget begins, which tells it from an invalid object.
pub const OVER_BUDGET_PREFIX: &str = "over budget: ";

/// Whether a refusal is one over budget.
pub fn is_over_budget(error: &ValidationError) -> bool {
    error.message.starts_with(OVER_BUDGET_PREFIX)
}
