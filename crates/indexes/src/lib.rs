//! The indexes: pure state machines that turn watch events into engine updates.
//!
//! Every kind is fed [`Event`]s, whether they come from a Kubernetes watch or from the files of
//! the embedded mode. Each index keeps the values it derives from objects
//! (identities, translated entries), not the objects themselves, and reports only the updates
//! that change what the engine sees. Namespace labels are part of every pod identity, so a
//! namespace relabel turns into updates of that namespace's pods.

mod budget;
pub mod decode;
pub mod event;
mod keyed;
pub mod kind;
mod nodes;
mod pods;
mod policies;
mod slices;

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Namespace;
use netpol_api::cluster::{namespace_labels, namespace_name_labels};
use netpol_api::{Object, ObjectRef, ValidationError, Warning};
use netpol_engine::{Engine, Identity, PolicyEntry, SharedLabels};

pub use budget::{is_over_budget, PolicyBudgets, PolicyCost, OVER_BUDGET_PREFIX};
pub use event::Event;
pub use keyed::{Change, Keyed};
pub use nodes::{Nodes, OwnNode};
pub use pods::{PodClaim, Pods};
pub use policies::{Policies, PolicyCounts};
pub use slices::Slices;

pub use kind::SourceKind;

/// One watch event of one kind.
#[derive(Clone, Debug)]
pub struct SourceEvent {
    pub kind: SourceKind,
    pub event: Event<Object>,
    /// When the agent received it (a watch event arrived, a changed file was read): where
    /// `netpol_change_latency_seconds` starts counting.
    pub received: Instant,
}

impl SourceEvent {
    pub fn new(kind: SourceKind, event: Event<Object>) -> Self {
        SourceEvent {
            kind,
            event,
            received: Instant::now(),
        }
    }
}

/// One change to stage in the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineUpdate {
    /// A pod's identities; empty removes the pod. The index and the engine share them.
    /// `created` (seconds) orders claims on an address two pods list at once.
    Pod {
        key: String,
        identities: Arc<[Identity]>,
        created: Option<i64>,
    },
    /// A node's identities; empty removes the node.
    Node {
        name: String,
        identities: Vec<Identity>,
        created: Option<i64>,
    },
    Policy {
        key: String,
        entries: Vec<PolicyEntry>,
    },
    RemovePolicy {
        key: String,
    },
}

impl EngineUpdate {
    pub fn stage(self, engine: &mut Engine) {
        match self {
            EngineUpdate::Pod {
                key,
                identities,
                created,
            } => engine.set_pod_created(key, identities, created),
            EngineUpdate::Node {
                name,
                identities,
                created,
            } => engine.set_node_created(name, identities, created),
            EngineUpdate::Policy { key, entries } => engine.set_policy(key, entries),
            EngineUpdate::RemovePolicy { key } => engine.remove_policy(&key),
        }
    }
}

/// A policy that failed validation and is skipped, or is over a budget and keeps only its
/// isolation, reported once per change of its problems.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    pub kind: SourceKind,
    /// Refused for a budget (`PolicyBudgets`), not for being invalid.
    pub over_budget: bool,
    pub errors: Vec<ValidationError>,
}

/// What one event did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Applied {
    pub updates: Vec<EngineUpdate>,
    /// Policies newly found invalid (or invalid in a new way).
    pub rejections: Vec<Rejection>,
    /// Warnings of policies that are new or changed.
    pub warnings: Vec<Warning>,
    /// An event whose object is not of the event's kind; it was ignored.
    pub mismatched: Option<String>,
    /// Keys of the policies that became audited (new, or enforced before).
    pub audited: Vec<String>,
}

impl Applied {
    fn updates(updates: Vec<EngineUpdate>) -> Self {
        Applied {
            updates,
            ..Applied::default()
        }
    }
}

/// All indexes of one agent.
#[derive(Debug, Default)]
pub struct Indexes {
    namespaces: Keyed<SharedLabels>,
    pods: Pods,
    nodes: Nodes,
    policies: Policies,
    /// Slice mode: the pods of other nodes, read from NetpolEndpointSlices (see [`Slices`]);
    /// `pods` then holds the agent's own node's pods alone.
    remote: Option<RemotePods>,
}

/// Slice mode's pods of other nodes: the slices they are listed in, and their identities.
#[derive(Debug, Default)]
struct RemotePods {
    slices: Slices,
    pods: Pods,
}

impl Indexes {
    pub fn new() -> Self {
        Self::default()
    }

    /// The indexes of an agent on node `own`, which follow its own Node object (see
    /// [`Nodes`]).
    pub fn for_node(own: &str) -> Self {
        Indexes {
            nodes: Nodes::for_node(own),
            ..Self::default()
        }
    }

    /// The indexes of an agent on node `own` in slice mode: pods of other nodes come from
    /// [`Indexes::apply_slices`], the pod watch carries the node's own pods alone.
    pub fn for_node_with_slices(own: &str) -> Self {
        let mut indexes = Self::for_node(own);
        indexes.read_remote_pods_from_slices(own);
        indexes
    }

    /// From now on, pods of other nodes than `own` come from [`Indexes::apply_slices`] (see
    /// [`Indexes::for_node_with_slices`]); call it before any event.
    pub fn read_remote_pods_from_slices(&mut self, own: &str) {
        self.remote = Some(RemotePods {
            slices: Slices::for_node(own),
            pods: Pods::default(),
        });
    }

    /// Feeds one NetpolEndpointSlice event (slice mode; ignored otherwise) and returns the
    /// engine updates of the remote pods it adds, changes or removes.
    pub fn apply_slices(&mut self, event: Event<netpol_api::crd::NetpolEndpointSlice>) -> Applied {
        let Some(remote) = self.remote.as_mut() else {
            return Applied::default();
        };
        let mut updates = Vec::new();
        for pod_event in remote.slices.apply(event) {
            updates.extend(remote.pods.apply(pod_event, &self.namespaces));
        }
        Applied::updates(updates)
    }

    /// Where this node's own Node object stands (see [`Nodes::own_node`]).
    pub fn own_node(&self) -> Option<OwnNode> {
        self.nodes.own_node()
    }

    /// Indexes holding every policy to `budgets`.
    pub fn with_budgets(budgets: PolicyBudgets) -> Self {
        Indexes {
            policies: Policies::with_budgets(budgets),
            ..Indexes::default()
        }
    }

    /// Holds every policy to `budgets` from now on: the policy index is replaced, so call it
    /// before any policy event.
    pub fn set_policy_budgets(&mut self, budgets: PolicyBudgets) {
        self.policies = Policies::with_budgets(budgets);
    }

    /// Audits every policy from now on (`--audit`): call it before any policy event.
    pub fn audit_all(&mut self) {
        self.policies.audit_all();
    }

    /// Feeds one event and returns the engine updates it causes.
    pub fn apply(&mut self, source: SourceEvent) -> Applied {
        let kind = source.kind;
        let narrowed = match kind {
            SourceKind::Namespace => narrow(source.event, |o| match o {
                Object::Namespace(ns) => Ok(ns),
                other => Err(other.object_ref()),
            })
            .map(|event| Applied::updates(self.apply_namespace(event))),
            SourceKind::Pod => narrow(source.event, |o| match o {
                Object::Pod(pod) => Ok(pod),
                other => Err(other.object_ref()),
            })
            .map(|event| Applied::updates(self.pods.apply(event, &self.namespaces))),
            SourceKind::Node => narrow(source.event, |o| match o {
                Object::Node(node) => Ok(node),
                other => Err(other.object_ref()),
            })
            .map(|event| Applied::updates(self.nodes.apply(event))),
            policy => narrow(source.event, |o| {
                if SourceKind::of(&o) == policy {
                    Ok(o)
                } else {
                    Err(o.object_ref())
                }
            })
            .map(|event| self.policies.apply(policy, event)),
        };
        narrowed.unwrap_or_else(|stray| Applied {
            mismatched: Some(format!(
                "{stray} arrived on the {kind} watch and was ignored"
            )),
            ..Applied::default()
        })
    }

    /// Feeds the event of a policy the source could not read as its kind (see
    /// [`Policies::apply_rejected`]). Other kinds have no invalid state: their sources send an
    /// unreadable object as absent.
    pub fn apply_rejected(&mut self, kind: SourceKind, event: Event<ValidationError>) -> Applied {
        if kind.is_policy() {
            self.policies.apply_rejected(kind, event)
        } else {
            Applied::default()
        }
    }

    /// Whether every kind has been listed completely at least once.
    pub fn is_synced(&self) -> bool {
        self.namespaces.is_synced()
            && self.pods.is_synced()
            && self.nodes.is_synced()
            && self.remote.as_ref().is_none_or(|r| r.pods.is_synced())
            && SourceKind::POLICIES
                .iter()
                .all(|kind| self.policies.is_synced(*kind))
    }

    /// The kinds not yet listed completely.
    pub fn unsynced(&self) -> Vec<SourceKind> {
        SourceKind::ALL
            .into_iter()
            .filter(|kind| match kind {
                SourceKind::Namespace => !self.namespaces.is_synced(),
                SourceKind::Pod => !self.pods.is_synced(),
                SourceKind::Node => !self.nodes.is_synced(),
                policy => !self.policies.is_synced(*policy),
            })
            .chain(
                self.remote
                    .as_ref()
                    .filter(|r| !r.pods.is_synced())
                    .map(|_| SourceKind::NetpolEndpointSlice),
            )
            .collect()
    }

    pub fn pods(&self) -> &Pods {
        &self.pods
    }

    /// Every refused policy's first error (see [`Policies::refused`]).
    pub fn refused_policies(&self) -> impl Iterator<Item = &ValidationError> {
        self.policies.refused()
    }

    pub fn policy_counts(&self) -> PolicyCounts {
        self.policies.counts()
    }

    fn apply_namespace(&mut self, event: Event<Namespace>) -> Vec<EngineUpdate> {
        let name = |ns: &Namespace| ns.metadata.name.clone().unwrap_or_default();
        let changes = match event {
            Event::Apply(ns) => self
                .namespaces
                .set(name(&ns), namespace_labels(&ns).into())
                .into_iter()
                .collect(),
            Event::Delete(ns) => self.namespaces.remove(&name(&ns)).into_iter().collect(),
            Event::Init => {
                self.namespaces.begin_relist();
                Vec::new()
            }
            Event::InitApply(ns) => {
                self.namespaces
                    .relisted(name(&ns), namespace_labels(&ns).into());
                Vec::new()
            }
            Event::InitDone => self.namespaces.end_relist(),
        };
        let mut updates = Vec::new();
        for change in changes {
            let (namespace, labels) = match change {
                Change::Set { key, new, .. } => (key, new),
                Change::Removed { key, .. } => {
                    // Pods outlive their namespace only briefly; until they go they keep the name
                    // label the API server gave every namespace.
                    let labels = namespace_name_labels(&key).into();
                    (key, labels)
                }
            };
            updates.extend(self.pods.relabel_namespace(&namespace, &labels));
            if let Some(remote) = self.remote.as_mut() {
                updates.extend(remote.pods.relabel_namespace(&namespace, &labels));
            }
        }
        updates
    }
}

/// The same event with its object mapped.
pub fn map_event<A, B>(event: Event<A>, f: impl FnOnce(A) -> B) -> Event<B> {
    match event {
        Event::Apply(o) => Event::Apply(f(o)),
        Event::Delete(o) => Event::Delete(f(o)),
        Event::InitApply(o) => Event::InitApply(f(o)),
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
    }
}

/// Narrows an event of any object to an event of one type; a stray object of another type is
/// named in the error.
fn narrow<T>(
    event: Event<Object>,
    pick: impl Fn(Object) -> Result<T, ObjectRef>,
) -> Result<Event<T>, ObjectRef> {
    Ok(match event {
        Event::Apply(o) => Event::Apply(pick(o)?),
        Event::Delete(o) => Event::Delete(pick(o)?),
        Event::InitApply(o) => Event::InitApply(pick(o)?),
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
    })
}
