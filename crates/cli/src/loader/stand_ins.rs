//! Stand-ins for pods the input does not hold. A peer such as `namespaceSelector: {}` admits
//! every pod of the cluster, present and future, but a matrix or diff of manifests decides only
//! the pods the manifests give: without more, such a peer reads as admitting exactly the pods
//! listed. As regions stand for the addresses outside the cluster, a stand-in pod stands for the
//! pods a peer can select that the input does not hold, so that `matrix` and `diff` show what
//! the rule admits:
//!
//! - `NS/(other pods)`: another pod of namespace NS, without labels (a new workload there);
//! - `(other namespaces)/(any pod)`: a pod without labels in a namespace the input does not hold
//!   (its only label its name);
//! - `NS/(pods {app=admin})`, `(namespaces {team=x})/(any pod)`: for a pod peer that selects no
//!   pod of the input (a selector on labels no manifest carries, a namespace the input does not
//!   hold), a pod (and namespace) labelled as the selector asks.
//!
//! A stand-in is added only where some policy's pod peer (or Cilium `cluster`/`all` entity) selects
//! it, so a matrix whose peers name only the pods the input holds is unchanged. Stand-ins are
//! placed as workload pods are (`--pod-cidr`, on a node of the input), and are pods to every
//! policy: a default deny of their namespace isolates them as it would a new pod.

use std::collections::BTreeMap;
use std::sync::Arc;

use netpol_engine::{
    Entity, Identity, IdentityKind, LabelSelector, Labels, Peer, PodInfo, PodSelector, Requirement,
    SharedLabels, NAMESPACE_NAME_LABEL,
};

use super::cluster_model::{ClusterModel, PodFacts};
use super::expect::PodRef;
use netpol_api::workloads::Placement;

/// The namespace standing for every namespace the input does not hold.
pub const OTHER_NAMESPACES: &str = "(other namespaces)";
/// The name of the stand-in for the unlabelled pods of a namespace the input holds.
pub const OTHER_PODS: &str = "(other pods)";
/// The name of the stand-in for any pod of a namespace the input does not hold.
pub const ANY_POD: &str = "(any pod)";

/// A pod a stand-in would be, before it is known that a peer selects it.
struct Candidate {
    pod: PodRef,
    labels: Labels,
    namespace_labels: SharedLabels,
}

/// Adds to every cluster of `clusters` (the sides of a diff, or one matrix's) the same
/// stand-ins: those some policy peer of any of them selects. Clusters that shared their pods
/// keep sharing them. Returns the stand-ins added, by name.
pub fn add_stand_ins(clusters: &mut [&mut ClusterModel], placement: &Placement) -> Vec<PodRef> {
    let namespaces = known_namespaces(clusters);
    let mut candidates = generic_candidates(&namespaces);
    for cluster in clusters.iter() {
        for peer in cluster
            .policy_entries()
            .iter()
            .flat_map(|entry| &entry.peers)
        {
            if let Peer::Pods(selector) = peer {
                if !selects_a_pod(cluster, selector) {
                    candidates.extend(labelled_candidate(selector, &namespaces));
                }
            }
        }
    }
    let mut by_name: BTreeMap<PodRef, Candidate> = BTreeMap::new();
    for candidate in candidates {
        by_name.entry(candidate.pod.clone()).or_insert(candidate);
    }
    let mut placement = placement.clone();
    for cluster in clusters.iter() {
        for address in cluster.cluster_addresses() {
            placement.reserve(address);
        }
    }
    let nodes = common_nodes(clusters);
    let mut added = Vec::new();
    let mut identities: Vec<(PodRef, Identity)> = Vec::new();
    for (pod, candidate) in by_name {
        if clusters.iter().any(|c| c.has_pod(&pod)) {
            continue;
        }
        let node = Placement::node_among(&nodes, &pod.namespace, &pod.name).map(str::to_owned);
        let info = PodInfo {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            labels: Arc::new(candidate.labels),
            namespace_labels: candidate.namespace_labels,
            node,
            ports: Vec::new(),
        };
        let probe = Identity::pod(info.clone(), placement.pod_cidr.addr());
        if !clusters.iter().any(|c| some_peer_selects(c, &probe)) {
            continue;
        }
        let Some(address) = placement.address(&pod.namespace, &pod.name) else {
            continue;
        };
        identities.push((pod.clone(), Identity::pod(info, address)));
        added.push(pod);
    }
    let Some((first, rest)) = clusters.split_first_mut() else {
        return added;
    };
    let shared: Vec<bool> = rest.iter().map(|c| c.shares_pods_with(first)).collect();
    for cluster in std::iter::once(&mut **first).chain(
        rest.iter_mut()
            .zip(&shared)
            .filter(|(_, &shared)| !shared)
            .map(|(c, _)| &mut **c),
    ) {
        for (pod, identity) in &identities {
            cluster.set_facts(
                pod.clone(),
                PodFacts {
                    stand_in: true,
                    ..PodFacts::default()
                },
            );
            cluster.add_pod(pod.clone(), vec![identity.clone()]);
        }
    }
    for (cluster, shared) in rest.iter_mut().zip(shared) {
        if shared {
            cluster.share_pods_of(first);
        }
    }
    added
}

/// Every namespace some pod of the clusters is in, with its labels.
fn known_namespaces(clusters: &[&mut ClusterModel]) -> BTreeMap<String, SharedLabels> {
    let mut namespaces = BTreeMap::new();
    for cluster in clusters {
        for (_, identities) in cluster.pods() {
            for identity in identities {
                if let IdentityKind::Pod(info) = &identity.kind {
                    namespaces
                        .entry(info.namespace.clone())
                        .or_insert_with(|| info.namespace_labels.clone());
                }
            }
        }
    }
    namespaces
}

/// The unlabelled other pods of each namespace, and any pod of a namespace not held.
fn generic_candidates(namespaces: &BTreeMap<String, SharedLabels>) -> Vec<Candidate> {
    let mut candidates: Vec<Candidate> = namespaces
        .iter()
        .map(|(namespace, labels)| Candidate {
            pod: PodRef {
                namespace: namespace.clone(),
                name: OTHER_PODS.to_owned(),
            },
            labels: Labels::new(),
            namespace_labels: labels.clone(),
        })
        .collect();
    candidates.push(Candidate {
        pod: PodRef {
            namespace: OTHER_NAMESPACES.to_owned(),
            name: ANY_POD.to_owned(),
        },
        labels: Labels::new(),
        namespace_labels: Arc::new(name_label(OTHER_NAMESPACES)),
    });
    candidates
}

/// A pod the pod peer `selector` selects, labelled as it asks, in a namespace of the input it
/// selects, else in one labelled as it asks (`None` where no label set satisfies it).
fn labelled_candidate(
    selector: &PodSelector,
    namespaces: &BTreeMap<String, SharedLabels>,
) -> Option<Candidate> {
    let labels = satisfying(&selector.pods)?;
    let held = namespaces
        .iter()
        .find(|(_, labels)| selector.namespaces.matches(labels));
    let (namespace, namespace_labels) = match held {
        Some((namespace, labels)) => (namespace.clone(), labels.clone()),
        None => {
            let mut wanted = satisfying(&selector.namespaces)?;
            let name = match wanted.get(NAMESPACE_NAME_LABEL) {
                Some(name) => name.clone(),
                None if selector.namespaces.is_everything() => OTHER_NAMESPACES.to_owned(),
                None => format!("(namespaces {})", selector.namespaces),
            };
            wanted.insert(NAMESPACE_NAME_LABEL.to_owned(), name.clone());
            if !selector.namespaces.matches(&wanted) {
                return None;
            }
            (name, Arc::new(wanted))
        }
    };
    let name = match (
        selector.pods.is_everything(),
        namespaces.contains_key(&namespace),
    ) {
        (true, true) => OTHER_PODS.to_owned(),
        (true, false) => ANY_POD.to_owned(),
        (false, _) => format!("(pods {})", selector.pods),
    };
    Some(Candidate {
        pod: PodRef { namespace, name },
        labels,
        namespace_labels,
    })
}

/// The fewest labels `selector` matches: its `matchLabels`, and a value for each `In` and
/// `Exists` key; `None` where they do not match (contradictory requirements).
fn satisfying(selector: &LabelSelector) -> Option<Labels> {
    let mut labels = selector.match_labels.clone();
    for requirement in &selector.match_expressions {
        match requirement {
            Requirement::In(key, values) if !labels.contains_key(key) => {
                labels.insert(key.clone(), values.first()?.clone());
            }
            Requirement::Exists(key) if !labels.contains_key(key) => {
                labels.insert(key.clone(), "any".to_owned());
            }
            _ => {}
        }
    }
    selector.matches(&labels).then_some(labels)
}

fn name_label(namespace: &str) -> Labels {
    Labels::from([(NAMESPACE_NAME_LABEL.to_owned(), namespace.to_owned())])
}

/// Whether a pod of `cluster` is one `selector` selects.
fn selects_a_pod(cluster: &ClusterModel, selector: &PodSelector) -> bool {
    cluster.pods().any(|(_, identities)| {
        identities
            .iter()
            .any(|i| matches!(&i.kind, IdentityKind::Pod(info) if selector.matches(info)))
    })
}

/// Whether a pod peer (or an entity every pod is in) of a policy of `cluster` selects `pod`.
fn some_peer_selects(cluster: &ClusterModel, pod: &Identity) -> bool {
    cluster
        .policy_entries()
        .iter()
        .flat_map(|entry| &entry.peers)
        .any(|peer| match peer {
            Peer::Pods(_) | Peer::Entity(Entity::All | Entity::Cluster) => {
                peer.selects_ignoring_node(pod)
            }
            _ => false,
        })
}

/// The nodes every cluster has, by name, sorted.
fn common_nodes(clusters: &[&mut ClusterModel]) -> Vec<String> {
    let Some((first, rest)) = clusters.split_first() else {
        return Vec::new();
    };
    let mut nodes: Vec<String> = first
        .nodes()
        .map(|(name, _)| name.to_owned())
        .filter(|name| rest.iter().all(|c| c.nodes().any(|(n, _)| n == name)))
        .collect();
    nodes.sort();
    nodes
}
