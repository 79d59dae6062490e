//! Identities follow the labels policies read.
//!
//! Two pods are one security identity when nothing a selector reads tells them apart. Labels no
//! selector in force refers to — a StatefulSet pod's `statefulset.kubernetes.io/pod-name`, a
//! Deployment's `pod-template-hash`, a Job's `controller-uid` — would otherwise make each pod an
//! identity of its own, and the MapState and every address set would grow with pods rather than
//! with what policies distinguish. So an address enters the identity store with only the label
//! keys some peer selector reads (pod labels, namespace labels and node labels, separately).
//!
//! Cilium drops such labels by a fixed list and then cannot select on them; here the list comes
//! from the policies themselves. When a policy starts (or stops) reading a key, every address is
//! re-keyed, so selection stays exact: a selector only ever reads keys that were kept.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::entry::PolicyEntry;
use crate::identity::{Identity, IdentityKind, NodeInfo, PodInfo};
use crate::labels::{LabelInterner, LabelSelector, Labels, Requirement, SharedLabels};
use crate::selector::Peer;

/// The label keys the peer selectors of a policy set read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct KeysInUse {
    pods: BTreeSet<String>,
    namespaces: BTreeSet<String>,
    nodes: BTreeSet<String>,
}

fn keys_of(selector: &LabelSelector, into: &mut BTreeSet<String>) {
    into.extend(selector.match_labels.keys().cloned());
    for requirement in &selector.match_expressions {
        let key = match requirement {
            Requirement::In(key, _)
            | Requirement::NotIn(key, _)
            | Requirement::Exists(key)
            | Requirement::DoesNotExist(key) => key,
        };
        into.insert(key.clone());
    }
}

impl KeysInUse {
    pub(crate) fn of<'a>(entries: impl IntoIterator<Item = &'a PolicyEntry>) -> Self {
        let mut keys = KeysInUse::default();
        for peer in entries.into_iter().flat_map(|e| &e.peers) {
            match peer {
                Peer::Pods(selector) => {
                    keys_of(&selector.pods, &mut keys.pods);
                    keys_of(&selector.namespaces, &mut keys.namespaces);
                }
                Peer::Nodes(selector) => keys_of(selector, &mut keys.nodes),
                Peer::Cidr(_) | Peer::Entity(_) => {}
            }
        }
        keys
    }

    /// The label keys the subject selectors of a policy set read: what decides which entries
    /// select a local endpoint. Two pods that differ only in other keys are selected by the same
    /// entries.
    pub(crate) fn of_subjects(entries: &[PolicyEntry]) -> Self {
        let mut keys = KeysInUse::default();
        for entry in entries {
            keys_of(&entry.subject.pods, &mut keys.pods);
            keys_of(&entry.subject.namespaces, &mut keys.namespaces);
        }
        keys
    }

    /// `pod` with only the pod and namespace label keys in use (not interned: a key to compare,
    /// not to keep).
    pub(crate) fn trim_pod(&self, pod: &PodInfo) -> PodInfo {
        let keep = |labels: &SharedLabels, keys: &BTreeSet<String>| -> SharedLabels {
            if labels.keys().all(|k| keys.contains(k)) {
                return labels.clone();
            }
            Arc::new(
                labels
                    .iter()
                    .filter(|(k, _)| keys.contains(*k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )
        };
        PodInfo {
            labels: keep(&pod.labels, &self.pods),
            namespace_labels: keep(&pod.namespace_labels, &self.namespaces),
            ..pod.clone()
        }
    }

    /// The identity with only the label keys in use, each distinct trimmed set held once.
    pub(crate) fn trim(&self, identity: Identity, interner: &mut LabelInterner) -> Identity {
        let kind = match identity.kind {
            IdentityKind::Pod(pod) => IdentityKind::Pod(PodInfo {
                labels: trimmed(&pod.labels, &self.pods, interner),
                namespace_labels: trimmed(&pod.namespace_labels, &self.namespaces, interner),
                ..pod
            }),
            IdentityKind::Node(node) => IdentityKind::Node(NodeInfo {
                labels: trimmed(&node.labels, &self.nodes, interner),
                ..node
            }),
            IdentityKind::World => IdentityKind::World,
        };
        Identity { kind, ..identity }
    }
}

fn trimmed(
    labels: &SharedLabels,
    keys: &BTreeSet<String>,
    interner: &mut LabelInterner,
) -> SharedLabels {
    if labels.keys().all(|k| keys.contains(k)) {
        return labels.clone();
    }
    let kept: Labels = labels
        .iter()
        .filter(|(k, _)| keys.contains(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    interner.intern(Arc::new(kept))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::NAMESPACE_NAME_LABEL;
    use crate::selector::PodSelector;

    #[test]
    fn only_keys_a_peer_reads_are_kept() {
        let peer = Peer::Pods(PodSelector {
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
        let keys = KeysInUse::of(&[entry]);
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
        assert_eq!(*pod.labels, *labels(&[("app", "web"), ("canary", "yes")]));
        assert_eq!(
            *pod.namespace_labels,
            *labels(&[(NAMESPACE_NAME_LABEL, "shop")])
        );
    }
}
