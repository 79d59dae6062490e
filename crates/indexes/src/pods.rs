//! Pods: each pod's identities (one per address), keyed `namespace/name` as the engine keys its
//! endpoints.

use std::sync::Arc;

use crate::event::Event;
use netpol_api::cluster::{namespace_name_labels, pod_identities};
use netpol_api::{Pod, DEFAULT_NAMESPACE};
use netpol_engine::{Identity, IdentityKind, LabelInterner, SharedLabels};

use super::keyed::{Change, Keyed};
use super::EngineUpdate;

/// What the engine needs of a pod: its identities and when it was created, which decides who
/// owns an address two pods list at once (a reused address before the old pod's delete).
#[derive(Clone, Debug, PartialEq)]
pub struct PodClaim {
    /// Shared with the engine (one copy of each pod's identities between them).
    pub identities: Arc<[Identity]>,
    /// `metadata.creationTimestamp`, in seconds since the epoch.
    pub created: Option<i64>,
}

#[derive(Debug, Default)]
pub struct Pods {
    identities: Keyed<PodClaim>,
    /// Replicas carry equal label sets: each distinct set is kept once, here and in the engine.
    labels: LabelInterner,
}

/// A pod's key: `namespace/name`.
pub fn pod_key(pod: &Pod) -> String {
    let namespace = pod
        .metadata
        .namespace
        .as_deref()
        .unwrap_or(DEFAULT_NAMESPACE);
    format!(
        "{namespace}/{}",
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

impl Pods {
    /// Feeds one pod event. `namespaces` holds the labels of the namespaces seen so far; a pod
    /// whose namespace is not known yet gets the name label alone until it is.
    pub fn apply(
        &mut self,
        event: Event<Pod>,
        namespaces: &Keyed<SharedLabels>,
    ) -> Vec<EngineUpdate> {
        let interner = &mut self.labels;
        let mut derive = |pod: &Pod| {
            let namespace = pod
                .metadata
                .namespace
                .as_deref()
                .unwrap_or(DEFAULT_NAMESPACE);
            // Before the namespaces' first list completes, the labels it lists: the pods of an
            // initial sync are then derived once, not once more when the namespaces complete.
            let labels = namespaces
                .get(namespace)
                .or_else(|| (!namespaces.is_synced()).then(|| namespaces.listing(namespace))?)
                .cloned()
                .unwrap_or_else(|| namespace_name_labels(namespace).into());
            PodClaim {
                identities: intern(interner, pod_identities(pod, &labels)),
                created: created_seconds(&pod.metadata),
            }
        };
        let changes = match event {
            Event::Apply(pod) => self
                .identities
                .set(pod_key(&pod), derive(&pod))
                .into_iter()
                .collect(),
            Event::Delete(pod) => self.identities.remove(&pod_key(&pod)).into_iter().collect(),
            Event::Init => {
                self.identities.begin_relist();
                Vec::new()
            }
            Event::InitApply(pod) => {
                self.identities.relisted(pod_key(&pod), derive(&pod));
                Vec::new()
            }
            Event::InitDone => self.identities.end_relist(),
        };
        changes.into_iter().map(to_update).collect()
    }

    /// Gives every pod of `namespace` the namespace's new labels.
    pub fn relabel_namespace(
        &mut self,
        namespace: &str,
        labels: &SharedLabels,
    ) -> Vec<EngineUpdate> {
        let relabel = |claim: &PodClaim| {
            if claim.identities.iter().all(|i| {
                i.as_pod()
                    .is_none_or(|info| info.namespace_labels == *labels)
            }) {
                return claim.clone();
            }
            let identities = claim
                .identities
                .iter()
                .cloned()
                .map(|mut identity| {
                    if let IdentityKind::Pod(info) = &mut identity.kind {
                        info.namespace_labels = labels.clone();
                    }
                    identity
                })
                .collect();
            PodClaim {
                identities,
                created: claim.created,
            }
        };
        self.identities
            .rederive_prefix(&format!("{namespace}/"), relabel)
            .into_iter()
            .map(to_update)
            .collect()
    }

    pub fn is_synced(&self) -> bool {
        self.identities.is_synced()
    }

    /// The pods known, with their identities (empty for pods without an address yet).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[Identity])> {
        self.identities.iter().map(|(k, v)| (k, &v.identities[..]))
    }

    pub fn get(&self, key: &str) -> Option<&[Identity]> {
        self.identities.get(key).map(|v| &v.identities[..])
    }

    pub fn len(&self) -> usize {
        self.identities.len()
    }

    pub fn is_empty(&self) -> bool {
        self.identities.is_empty()
    }
}

/// The identities with their label sets shared through `interner`.
fn intern(interner: &mut LabelInterner, mut identities: Vec<Identity>) -> Arc<[Identity]> {
    for identity in &mut identities {
        if let IdentityKind::Pod(info) = &mut identity.kind {
            info.labels = interner.intern(info.labels.clone());
            info.namespace_labels = interner.intern(info.namespace_labels.clone());
        }
    }
    identities.into()
}

fn to_update(change: Change<PodClaim>) -> EngineUpdate {
    match change {
        Change::Set { key, new, .. } => EngineUpdate::Pod {
            key,
            identities: new.identities,
            created: new.created,
        },
        Change::Removed { key, .. } => EngineUpdate::Pod {
            key,
            identities: Arc::from([]),
            created: None,
        },
    }
}

/// An object's `creationTimestamp` in seconds since the epoch.
pub(super) fn created_seconds(
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<i64> {
    metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
}
