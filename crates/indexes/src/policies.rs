//! Policies of every kind: each policy's translation, keyed `Kind/namespace/name` (or
//! `Kind/name` for cluster-scoped kinds), as the engine keys policies.
//!
//! An invalid policy contributes no entries: it is treated as absent, exactly as after a restart,
//! so that what the agent enforces never depends on which version of a policy it happened to see
//! first. Its errors are reported when its translation changes, not on every relist. A valid
//! policy over a budget (`budget`) is refused too, but keeps its isolation in the engine.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;

use crate::event::Event;
use netpol_api::{translate, Object, ObjectRef, Translation, ValidationError, Warning};
use netpol_engine::{Enforcement, PolicyEntry};

use super::budget::{is_over_budget, BudgetBook, PolicyBudgets};
use super::keyed::{Change, Keyed};
use super::{Applied, EngineUpdate, Rejection};
use crate::SourceKind;

/// How many policies of each kind are known, valid and invalid.
pub type PolicyCounts = BTreeMap<SourceKind, ValidityCounts>;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ValidityCounts {
    pub valid: usize,
    pub invalid: usize,
    /// Valid policies in audit mode (a subset of `valid`): enforced by no datapath.
    pub audited: usize,
}

#[derive(Debug, Default)]
pub struct Policies {
    by_kind: BTreeMap<SourceKind, Keyed<Kept>>,
    /// Translations handed to an index but not yet passed on: the one of the event being
    /// applied, or those of a relist in progress (passed on when it completes). The engine holds
    /// the entries of every enforced policy; the index keeps only their digest.
    pending: BTreeMap<SourceKind, HashMap<String, Translation>>,
    /// What each namespace's admitted policies name, held to the budgets.
    budgets: BudgetBook,
    /// `--audit`: every policy is audited, whatever its annotation (a first rollout).
    audit_all: bool,
}

/// What the index keeps of a policy's translation: enough to tell a change of its entries from
/// a change of its warnings, and whether it is enforced, without a second copy of its entries.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Kept {
    /// A hash of the entries the engine enforces: None for an invalid translation (it
    /// contributes none); a policy over budget contributes its isolation.
    entries: Option<(u64, u64)>,
    warnings: Vec<Warning>,
    errors: Vec<ValidationError>,
    /// Its entries are audited (`netpol.io/enforcement: audit` or `--audit`).
    audited: bool,
}

impl Kept {
    fn of(translation: &Translation) -> Kept {
        Kept {
            audited: translation.entries.iter().any(PolicyEntry::is_audited),
            entries: (translation.is_ok() || !translation.entries.is_empty())
                .then(|| entries_digest(&translation.entries)),
            warnings: translation.warnings.clone(),
            errors: translation.errors.clone(),
        }
    }

    fn is_enforced(&self) -> bool {
        self.entries.is_some()
    }

    fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Two independent 64-bit hashes of the entries: a change is missed only if both collide.
/// foldhash with two fixed seeds, not SipHash: the entries of a 50,000-prefix policy are
/// hundreds of thousands of small writes, where SipHash cost 2% of adding the policy (its fixed
/// zero keys resisted no chosen input either).
fn entries_digest(entries: &[PolicyEntry]) -> (u64, u64) {
    let hash = |seed: u64| foldhash::quality::FixedState::with_seed(seed).hash_one(entries);
    (hash(0x6e65_7470_6f6c_0001), hash(0x6e65_7470_6f6c_0002))
}

/// A policy's engine key.
pub fn policy_key(object: &Object) -> String {
    policy_key_of(&object.object_ref())
}

/// The engine key of the policy `object` names.
pub fn policy_key_of(object: &ObjectRef) -> String {
    match &object.namespace {
        Some(ns) => format!("{}/{ns}/{}", object.kind, object.name),
        None => format!("{}/{}", object.kind, object.name),
    }
}

impl Policies {
    /// An index holding every policy to `budgets`.
    pub fn with_budgets(budgets: PolicyBudgets) -> Self {
        Policies {
            budgets: BudgetBook::new(budgets),
            ..Policies::default()
        }
    }

    /// Audits every policy from now on (`--audit`): call it before any policy event.
    pub fn audit_all(&mut self) {
        self.audit_all = true;
    }

    /// Feeds one event of a policy kind; every object in it is of that kind.
    pub fn apply(&mut self, kind: SourceKind, event: Event<Object>) -> Applied {
        let budgets = &mut self.budgets;
        let audit_all = self.audit_all;
        let mut admit = |object: Object| {
            let key = policy_key(&object);
            let mut translation = translate(&object);
            if audit_all {
                for entry in &mut translation.entries {
                    entry.enforcement = Enforcement::Audit;
                }
            }
            let translation = budgets.admit(kind, &key, &object.object_ref(), translation);
            (key, translation)
        };
        let translated = match event {
            Event::Apply(object) => Event::Apply(admit(object)),
            Event::InitApply(object) => Event::InitApply(admit(object)),
            // A deleted object's translation is not needed: only its key is.
            Event::Delete(object) => Event::Delete((policy_key(&object), Translation::default())),
            Event::Init => Event::Init,
            Event::InitDone => Event::InitDone,
        };
        self.apply_translated(kind, translated)
    }

    /// Feeds an event of an object the source could not read as its kind (its shape does not
    /// fit): it stands in the index as an invalid policy, so that it replaces (and stops
    /// enforcing) an earlier valid version, is counted, and goes when deleted or not relisted.
    pub fn apply_rejected(&mut self, kind: SourceKind, event: Event<ValidationError>) -> Applied {
        let translated = super::map_event(event, |error| {
            let key = policy_key_of(&error.object);
            // What an earlier valid version held of its namespace's budget is given back.
            self.budgets.release(kind, &key);
            let translation = Translation {
                entries: Vec::new(),
                warnings: Vec::new(),
                errors: vec![error],
            };
            (key, translation)
        });
        self.apply_translated(kind, translated)
    }

    fn apply_translated(
        &mut self,
        kind: SourceKind,
        event: Event<(String, Translation)>,
    ) -> Applied {
        let keyed = self.by_kind.entry(kind).or_default();
        let pending = self.pending.entry(kind).or_default();
        let (changes, relist_done) = match event {
            Event::Apply((key, translation)) => {
                let kept = Kept::of(&translation);
                pending.insert(key.clone(), translation);
                (keyed.set(key, kept).into_iter().collect(), true)
            }
            Event::Delete((key, _)) => (keyed.remove(&key).into_iter().collect(), true),
            Event::Init => {
                // A relist in progress is abandoned: the watch restarted.
                pending.clear();
                // The relist admits every object of the kind again, in its order.
                self.budgets.release_kind(kind);
                keyed.begin_relist();
                (Vec::new(), false)
            }
            Event::InitApply((key, translation)) => {
                keyed.relisted(key.clone(), Kept::of(&translation));
                pending.insert(key, translation);
                (Vec::new(), false)
            }
            Event::InitDone => (keyed.end_relist(), true),
        };
        let mut applied = Applied::default();
        for change in changes {
            match change {
                Change::Set { key, old, new } => {
                    let was_enforced = old.as_ref().is_some_and(Kept::is_enforced);
                    if new.audited && !old.as_ref().is_some_and(|old| old.audited) {
                        applied.audited.push(key.clone());
                    }
                    applied.warnings.extend(new.warnings.iter().cloned());
                    if !new.is_valid() {
                        applied.rejections.push(Rejection {
                            kind,
                            over_budget: new.errors.iter().any(is_over_budget),
                            errors: new.errors.clone(),
                        });
                    }
                    if new.is_enforced() {
                        // A change of warnings alone leaves the engine as it is.
                        if old.is_none_or(|old| old.entries != new.entries) {
                            let translation = pending
                                .remove(&key)
                                .expect("a set policy's translation is pending until passed on");
                            applied.updates.push(EngineUpdate::Policy {
                                key,
                                entries: translation.entries,
                            });
                        }
                    } else if was_enforced {
                        applied.updates.push(EngineUpdate::RemovePolicy { key });
                    }
                }
                Change::Removed { key, old } => {
                    self.budgets.release(kind, &key);
                    if old.is_enforced() {
                        applied.updates.push(EngineUpdate::RemovePolicy { key });
                    }
                }
            }
        }
        if relist_done {
            // Translations whose entries did not change are not needed any more.
            pending.clear();
        }
        applied
    }

    pub fn is_synced(&self, kind: SourceKind) -> bool {
        self.by_kind.get(&kind).is_some_and(Keyed::is_synced)
    }

    /// The refused policies (invalid, or over a budget): each one's first error, in key order.
    pub fn refused(&self) -> impl Iterator<Item = &ValidationError> {
        self.by_kind
            .values()
            .flat_map(Keyed::iter)
            .filter_map(|(_, kept)| kept.errors.first())
    }

    pub fn counts(&self) -> PolicyCounts {
        SourceKind::POLICIES
            .into_iter()
            .map(|kind| {
                let mut counts = ValidityCounts::default();
                for (_, kept) in self.by_kind.get(&kind).into_iter().flat_map(Keyed::iter) {
                    if kept.is_valid() {
                        counts.valid += 1;
                        counts.audited += usize::from(kept.audited);
                    } else {
                        counts.invalid += 1;
                    }
                }
                (kind, counts)
            })
            .collect()
    }
}
