//! Policies of every kind: each policy's translation, keyed `Kind/namespace/name` (or
//! `Kind/name` for cluster-scoped kinds), as the engine keys policies.
//!
//! An invalid policy contributes no entries: it is treated as absent, exactly as after a restart,
//! so that what the agent enforces never depends on which version of a policy it happened to see
//! first. Its errors are reported when its translation changes, not on every relist.

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};

use kube::runtime::watcher::Event;
use netpol_api::{translate, Object, ObjectRef, Translation, ValidationError, Warning};
use netpol_engine::PolicyEntry;

use super::keyed::{Change, Keyed};
use super::{Applied, EngineUpdate, Rejection};
use crate::kind::SourceKind;

/// How many policies of each kind are known, valid and invalid.
pub type PolicyCounts = BTreeMap<SourceKind, ValidityCounts>;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ValidityCounts {
    pub valid: usize,
    pub invalid: usize,
}

#[derive(Debug, Default)]
pub struct Policies {
    by_kind: BTreeMap<SourceKind, Keyed<Kept>>,
    /// Translations handed to an index but not yet passed on: the one of the event being
    /// applied, or those of a relist in progress (passed on when it completes). The engine holds
    /// the entries of every enforced policy; the index keeps only their digest.
    pending: BTreeMap<SourceKind, HashMap<String, Translation>>,
}

/// What the index keeps of a policy's translation: enough to tell a change of its entries from
/// a change of its warnings, and whether it is enforced, without a second copy of its entries.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Kept {
    /// A hash of the entries; None when the translation has errors (it contributes none).
    entries: Option<(u64, u64)>,
    warnings: Vec<Warning>,
    errors: Vec<ValidationError>,
}

impl Kept {
    fn of(translation: &Translation) -> Kept {
        Kept {
            entries: translation
                .is_ok()
                .then(|| entries_digest(&translation.entries)),
            warnings: translation.warnings.clone(),
            errors: translation.errors.clone(),
        }
    }

    fn is_ok(&self) -> bool {
        self.entries.is_some()
    }
}

/// Two independent 64-bit hashes of the entries: a change is missed only if both collide.
fn entries_digest(entries: &[PolicyEntry]) -> (u64, u64) {
    let hash = |seed: u8| {
        let mut hasher = DefaultHasher::new();
        seed.hash(&mut hasher);
        entries.hash(&mut hasher);
        hasher.finish()
    };
    (hash(0), hash(1))
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
    /// Feeds one event of a policy kind; every object in it is of that kind.
    pub fn apply(&mut self, kind: SourceKind, event: Event<Object>) -> Applied {
        let translated =
            super::map_event(event, |object| (policy_key(&object), translate(&object)));
        self.apply_translated(kind, translated)
    }

    /// Feeds an event of an object the source could not read as its kind (its shape does not
    /// fit): it stands in the index as an invalid policy, so that it replaces (and stops
    /// enforcing) an earlier valid version, is counted, and goes when deleted or not relisted.
    pub fn apply_rejected(&mut self, kind: SourceKind, event: Event<ValidationError>) -> Applied {
        let translated = super::map_event(event, |error| {
            let key = policy_key_of(&error.object);
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
                    let was_enforced = old.as_ref().is_some_and(Kept::is_ok);
                    applied.warnings.extend(new.warnings.iter().cloned());
                    if new.is_ok() {
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
                    } else {
                        applied.rejections.push(Rejection {
                            kind,
                            errors: new.errors,
                        });
                        if was_enforced {
                            applied.updates.push(EngineUpdate::RemovePolicy { key });
                        }
                    }
                }
                Change::Removed { key, old } => {
                    if old.is_ok() {
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

    pub fn counts(&self) -> PolicyCounts {
        SourceKind::POLICIES
            .into_iter()
            .map(|kind| {
                let mut counts = ValidityCounts::default();
                for (_, kept) in self.by_kind.get(&kind).into_iter().flat_map(Keyed::iter) {
                    if kept.is_ok() {
                        counts.valid += 1;
                    } else {
                        counts.invalid += 1;
                    }
                }
                (kind, counts)
            })
            .collect()
    }
}
