//! Identities follow the labels policies read: the keys, and of each key the values.
//!
//! Two pods are one security identity when nothing a selector reads tells them apart. Labels no
//! selector in force refers to — a Deployment's `pod-template-hash`, a Job's `controller-uid` —
//! would otherwise make each pod an identity of its own, and the MapState and every address set
//! would grow with pods rather than with what policies distinguish. So an address enters the
//! identity store with only what some peer selector reads of its labels (pod labels, namespace
//! labels and node labels, separately).
//!
//! Of a key a selector reads, only the values selectors name are told apart (issue 33). Every
//! selector operator (`matchLabels`, `In`, `NotIn`, `Exists`, `DoesNotExist`) decides by whether
//! the key is there and whether its value is one the selector names, so a value no selector names
//! becomes [`OTHER_VALUE`] where some selector tests the key's presence, and is dropped with its
//! key where none does. A selector reading a per-pod label (a StatefulSet pod's
//! `statefulset.kubernetes.io/pod-name`, `In [db-0, db-1]`) then splits off the two pods it names,
//! not every pod carrying the key: identities, and the MapState entries of every endpoint whose
//! rules cover them, stay what they were.
//!
//! Cilium drops such labels by a fixed list and then cannot select on them; here the projection
//! comes from the policies themselves. When what policies read of a key changes, the addresses
//! carrying that key are re-keyed ([`LabelsInUse::changed_keys`]), so selection stays exact: a
//! selector only ever reads values that were kept.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::entry::PolicyEntry;
use crate::identity::{Identity, IdentityKind, NodeInfo, PodInfo};
use crate::labels::{LabelInterner, LabelSelector, Labels, Requirement, SharedLabels};
use crate::selector::Peer;

/// The value a kept key takes when no selector names the pod's own value. No Kubernetes label
/// value can be it (they are alphanumerics, `-`, `_` and `.`); should a selector name it anyway,
/// the key keeps every value (see [`KeyUse::project`]).
pub(crate) const OTHER_VALUE: &str = "<other>";

/// What the selectors read of one label key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct KeyUse {
    /// Some selector tests whether the key is there (`Exists`, `DoesNotExist`).
    presence: bool,
    /// The values selectors name (`matchLabels`, `In`, `NotIn`).
    values: BTreeSet<String>,
}

impl KeyUse {
    /// What selectors can see of `value`: itself when one names it; [`OTHER_VALUE`] when only
    /// presence is tested; nothing (the key is dropped) otherwise.
    fn project<'v>(&self, value: &'v str) -> Option<&'v str> {
        if self.values.contains(value) || self.values.contains(OTHER_VALUE) {
            Some(value)
        } else if self.presence {
            Some(OTHER_VALUE)
        } else {
            None
        }
    }
}

/// What the selectors of one label domain (pods, namespaces or nodes) read, by key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct DomainUse(BTreeMap<String, KeyUse>);

impl DomainUse {
    fn read(&mut self, selector: &LabelSelector) {
        for (key, value) in selector.match_labels.iter() {
            self.key(key).values.insert(value.clone());
        }
        for requirement in &selector.match_expressions {
            match requirement {
                Requirement::In(key, values) | Requirement::NotIn(key, values) => {
                    self.key(key).values.extend(values.iter().cloned())
                }
                Requirement::Exists(key) | Requirement::DoesNotExist(key) => {
                    self.key(key).presence = true
                }
            }
        }
    }

    fn key(&mut self, key: &str) -> &mut KeyUse {
        if !self.0.contains_key(key) {
            self.0.insert(key.to_owned(), KeyUse::default());
        }
        self.0.get_mut(key).expect("just inserted")
    }

    /// What selectors see of one label: the pair, its key with [`OTHER_VALUE`], or nothing.
    fn seen<'l>(&self, key: &'l String, value: &'l str) -> Option<(&'l String, &'l str)> {
        let value = self.0.get(key)?.project(value)?;
        Some((key, value))
    }

    /// `labels` as selectors see them; `None` when that is `labels` unchanged.
    fn project(&self, labels: &Labels) -> Option<Labels> {
        if labels
            .iter()
            .all(|(k, v)| self.seen(k, v) == Some((k, v.as_str())))
        {
            return None;
        }
        Some(
            labels
                .iter()
                .filter_map(|(k, v)| self.seen(k, v))
                .map(|(k, v)| (k.clone(), v.to_owned()))
                .collect(),
        )
    }

    fn project_shared(&self, labels: &SharedLabels) -> SharedLabels {
        self.project(labels)
            .map_or_else(|| labels.clone(), Arc::new)
    }

    fn project_interned(
        &self,
        labels: &SharedLabels,
        interner: &mut LabelInterner,
    ) -> SharedLabels {
        match self.project(labels) {
            None => labels.clone(),
            Some(projected) => interner.intern(Arc::new(projected)),
        }
    }

    /// The keys whose use differs between `self` and `other`.
    fn changed_keys(&self, other: &DomainUse) -> BTreeSet<String> {
        let keys = self.0.keys().chain(other.0.keys());
        keys.filter(|k| self.0.get(*k) != other.0.get(*k))
            .cloned()
            .collect()
    }
}

/// What the peer (or subject) selectors of a policy set read of pod, namespace and node labels.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LabelsInUse {
    pods: DomainUse,
    namespaces: DomainUse,
    nodes: DomainUse,
}

/// The keys whose use changed between two [`LabelsInUse`], per domain: only addresses carrying
/// one of them can be seen differently.
#[derive(Debug, Default)]
pub(crate) struct ChangedKeys {
    pods: BTreeSet<String>,
    namespaces: BTreeSet<String>,
    nodes: BTreeSet<String>,
}

impl ChangedKeys {
    pub(crate) fn is_empty(&self) -> bool {
        self.pods.is_empty() && self.namespaces.is_empty() && self.nodes.is_empty()
    }

    /// Whether `identity` carries a key whose use changed.
    pub(crate) fn touch(&self, identity: &Identity) -> bool {
        let carries =
            |labels: &Labels, keys: &BTreeSet<String>| keys.iter().any(|k| labels.contains_key(k));
        match &identity.kind {
            IdentityKind::Pod(pod) => {
                carries(&pod.labels, &self.pods) || carries(&pod.namespace_labels, &self.namespaces)
            }
            IdentityKind::Node(node) => carries(&node.labels, &self.nodes),
            IdentityKind::World => false,
        }
    }
}

impl LabelsInUse {
    pub(crate) fn of<'a>(entries: impl IntoIterator<Item = &'a PolicyEntry>) -> Self {
        let mut used = LabelsInUse::default();
        for peer in entries.into_iter().flat_map(|e| &e.peers) {
            match peer {
                Peer::Pods(selector) => {
                    used.pods.read(&selector.pods);
                    used.namespaces.read(&selector.namespaces);
                }
                Peer::Nodes(selector) => used.nodes.read(selector),
                Peer::Cidr(_) | Peer::Entity(_) => {}
            }
        }
        used
    }

    /// What the subject selectors of a policy set read: what decides which entries select a
    /// local endpoint. Two pods that look alike through it are selected by the same entries.
    pub(crate) fn of_subjects(entries: &[PolicyEntry]) -> Self {
        let mut used = LabelsInUse::default();
        for entry in entries {
            used.pods.read(&entry.subject.pods);
            used.namespaces.read(&entry.subject.namespaces);
        }
        used
    }

    /// The keys whose use differs between `self` and `other`.
    pub(crate) fn changed_keys(&self, other: &LabelsInUse) -> ChangedKeys {
        ChangedKeys {
            pods: self.pods.changed_keys(&other.pods),
            namespaces: self.namespaces.changed_keys(&other.namespaces),
            nodes: self.nodes.changed_keys(&other.nodes),
        }
    }

    /// `pod`'s labels and namespace labels as the selectors see them, borrowed where the
    /// selectors see them whole: a key to compare, not to keep ([`super::partition`]).
    pub(crate) fn seen_pod<'a>(&self, pod: &'a PodInfo) -> (Cow<'a, Labels>, Cow<'a, Labels>) {
        let seen = |domain: &DomainUse, labels: &'a Labels| {
            domain
                .project(labels)
                .map_or(Cow::Borrowed(labels), Cow::Owned)
        };
        (
            seen(&self.pods, &pod.labels),
            seen(&self.namespaces, &pod.namespace_labels),
        )
    }

    /// `pod` as the selectors see it (not interned: a key to compare, not to keep).
    pub(crate) fn trim_pod(&self, pod: &PodInfo) -> PodInfo {
        PodInfo {
            labels: self.pods.project_shared(&pod.labels),
            namespace_labels: self.namespaces.project_shared(&pod.namespace_labels),
            ..pod.clone()
        }
    }

    /// Whether the selectors see `identity` as they see `stored` (an identity already trimmed),
    /// without interning a projection nobody keeps.
    pub(crate) fn sees_alike(&self, identity: &Identity, stored: &Identity) -> bool {
        let seen = |domain: &DomainUse, labels: &Labels, stored: &Labels| {
            domain.project(labels).as_ref().unwrap_or(labels) == stored
        };
        match (&identity.kind, &stored.kind) {
            (IdentityKind::Pod(pod), IdentityKind::Pod(kept)) => {
                seen(&self.pods, &pod.labels, &kept.labels)
                    && seen(
                        &self.namespaces,
                        &pod.namespace_labels,
                        &kept.namespace_labels,
                    )
            }
            (IdentityKind::Node(node), IdentityKind::Node(kept)) => {
                seen(&self.nodes, &node.labels, &kept.labels)
            }
            _ => false,
        }
    }

    /// The identity as the selectors see it, each distinct projected set held once.
    pub(crate) fn trim(&self, identity: Identity, interner: &mut LabelInterner) -> Identity {
        let kind = match identity.kind {
            IdentityKind::Pod(pod) => IdentityKind::Pod(PodInfo {
                labels: self.pods.project_interned(&pod.labels, interner),
                namespace_labels: self
                    .namespaces
                    .project_interned(&pod.namespace_labels, interner),
                ..pod
            }),
            IdentityKind::Node(node) => IdentityKind::Node(NodeInfo {
                labels: self.nodes.project_interned(&node.labels, interner),
                ..node
            }),
            IdentityKind::World => IdentityKind::World,
        };
        Identity { kind, ..identity }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::NAMESPACE_NAME_LABEL;
    use crate::selector::PodSelector;

    #[test]
    fn only_what_a_peer_reads_is_kept() {
        let peer = Peer::pods(PodSelector {
            namespaces: LabelSelector::from_labels([(NAMESPACE_NAME_LABEL, "shop")]),
            pods: LabelSelector {
                match_labels: Labels::from([("app".into(), "web".into())]),
                match_expressions: vec![Requirement::DoesNotExist("canary".into())],
            },
        });
        let entry = PolicyEntry {
            peers: vec![peer],
            ..PolicyEntry::node_probe_allowance()
        };
        let keys = LabelsInUse::of(&[entry]);
        let labels = |pairs: &[(&str, &str)]| -> SharedLabels {
            Arc::new(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        };
        let pod = Identity::pod(
            PodInfo {
                namespace: "shop".into(),
                name: "web-0".into(),
                labels: labels(&[
                    ("app", "web"),
                    ("canary", "yes"),
                    ("statefulset.kubernetes.io/pod-name", "web-0"),
                ]),
                namespace_labels: labels(&[(NAMESPACE_NAME_LABEL, "shop"), ("team", "a")]),
                node: None,
                ports: Vec::new(),
            },
            "10.0.0.1".parse().unwrap(),
        );
        let mut interner = LabelInterner::default();
        let trimmed = keys.trim(pod, &mut interner);
        let pod = trimmed.as_pod().unwrap();
        // `canary`'s presence is tested, its value named by no selector.
        assert_eq!(
            *pod.labels,
            *labels(&[("app", "web"), ("canary", OTHER_VALUE)])
        );
        assert_eq!(
            *pod.namespace_labels,
            *labels(&[(NAMESPACE_NAME_LABEL, "shop")])
        );
    }

    fn pod_entry(pods: LabelSelector) -> PolicyEntry {
        PolicyEntry {
            peers: vec![Peer::pods(PodSelector {
                namespaces: LabelSelector::everything(),
                pods,
            })],
            ..PolicyEntry::node_probe_allowance()
        }
    }

    fn pod_labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const POD_NAME: &str = "statefulset.kubernetes.io/pod-name";

    #[test]
    fn a_per_pod_label_keeps_only_the_values_selectors_name() {
        let named = LabelSelector {
            match_labels: Labels::default(),
            match_expressions: vec![Requirement::In(
                POD_NAME.into(),
                vec!["db-0".into(), "db-1".into()],
            )],
        };
        let used = LabelsInUse::of(&[pod_entry(named)]);
        let seen = |name: &str| {
            used.pods
                .project(&pod_labels(&[("app", "db"), (POD_NAME, name)]))
        };
        assert_eq!(seen("db-0"), Some(pod_labels(&[(POD_NAME, "db-0")])));
        assert_eq!(seen("db-1"), Some(pod_labels(&[(POD_NAME, "db-1")])));
        // Every other replica looks like a pod without the key: one identity between them.
        assert_eq!(seen("db-2"), Some(Labels::default()));
        assert_eq!(seen("db-3"), seen("db-2"));
    }

    #[test]
    fn a_projection_decides_every_operator_as_the_full_labels_do() {
        let requirements = [
            Requirement::In(POD_NAME.into(), vec!["a".into()]),
            Requirement::NotIn(POD_NAME.into(), vec!["a".into(), "b".into()]),
            Requirement::Exists(POD_NAME.into()),
            Requirement::DoesNotExist(POD_NAME.into()),
        ];
        let selectors: Vec<LabelSelector> = requirements
            .iter()
            .map(|r| LabelSelector {
                match_labels: Labels::default(),
                match_expressions: vec![r.clone()],
            })
            .chain([LabelSelector::from_labels([(POD_NAME, "b")])])
            .collect();
        // Every subset of the selectors in force, every kind of pod: the projection under the
        // selectors in force must decide each of them as the pod's full labels do.
        for mask in 0..(1u32 << selectors.len()) {
            let in_force: Vec<LabelSelector> = (0..selectors.len())
                .filter(|i| mask & (1 << i) != 0)
                .map(|i| selectors[i].clone())
                .collect();
            let used =
                LabelsInUse::of(&in_force.iter().cloned().map(pod_entry).collect::<Vec<_>>());
            for pod in [
                pod_labels(&[]),
                pod_labels(&[(POD_NAME, "a")]),
                pod_labels(&[(POD_NAME, "b")]),
                pod_labels(&[(POD_NAME, "c")]),
                pod_labels(&[(POD_NAME, OTHER_VALUE)]),
            ] {
                let seen = used.pods.project(&pod).unwrap_or_else(|| pod.clone());
                for selector in &in_force {
                    assert_eq!(
                        selector.matches(&seen),
                        selector.matches(&pod),
                        "{selector} on {pod:?} seen as {seen:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn only_keys_whose_use_changed_are_reported() {
        let one = LabelsInUse::of(&[pod_entry(LabelSelector::from_labels([("app", "db")]))]);
        let two = LabelsInUse::of(&[
            pod_entry(LabelSelector::from_labels([("app", "db")])),
            pod_entry(LabelSelector::from_labels([(POD_NAME, "db-0")])),
        ]);
        let changed = two.changed_keys(&one);
        assert_eq!(changed.pods, BTreeSet::from([POD_NAME.to_owned()]));
        assert!(changed.namespaces.is_empty() && changed.nodes.is_empty());
        assert!(one.changed_keys(&one).is_empty());
    }
}
