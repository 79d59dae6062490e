//! Policies of every kind: each policy's translation, keyed `Kind/namespace/name` (or
//! `Kind/name` for cluster-scoped kinds), as the engine keys policies.
//!
//! An invalid policy contributes no entries: it is treated as absent, exactly as after a restart,
//! so that what the agent enforces never depends on which version of a policy it happened to see
//! first. Its errors are reported when its translation changes, not on every relist.

use std::collections::BTreeMap;

use kube::runtime::watcher::Event;
use netpol_api::{translate, Object, ObjectRef, Translation, ValidationError};

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
    by_kind: BTreeMap<SourceKind, Keyed<Translation>>,
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
        let changes = match event {
            Event::Apply((key, translation)) => keyed.set(key, translation).into_iter().collect(),
            Event::Delete((key, _)) => keyed.remove(&key).into_iter().collect(),
            Event::Init => {
                keyed.begin_relist();
                Vec::new()
            }
            Event::InitApply((key, translation)) => {
                keyed.relisted(key, translation);
                Vec::new()
            }
            Event::InitDone => keyed.end_relist(),
        };
        let mut applied = Applied::default();
        for change in changes {
            match change {
                Change::Set { key, old, new } => {
                    let was_enforced = old.as_ref().is_some_and(Translation::is_ok);
                    applied.warnings.extend(new.warnings.iter().cloned());
                    if new.is_ok() {
                        // A change of warnings alone leaves the engine as it is.
                        if old.is_none_or(|old| !old.is_ok() || old.entries != new.entries) {
                            applied.updates.push(EngineUpdate::Policy {
                                key,
                                entries: new.entries,
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
                for (_, translation) in self.by_kind.get(&kind).into_iter().flat_map(Keyed::iter) {
                    if translation.is_ok() {
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
