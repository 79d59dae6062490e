//! Classes of pods alike: pods that every decider decides alike towards every party, so that a
//! matrix decides once per pair of classes, not per pair of pods.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::rc::Rc;

use netpol_engine::resolve::SubjectIndex;
use netpol_engine::{CidrSelector, LabelSelector, Peer, PodSelector, Requirement};

use crate::scenario::{Cluster, PodRef};

/// Pods that every decider decides alike, towards every party: pods of one namespace whose
/// labels and namespace labels agree on every key some selector of the policies reads, with
/// the same named ports (a named port may map to different numbers on pods of one label set),
/// the same address families, and addresses inside the same policy prefixes (`ipBlock`). A pod
/// whose address is also a node's stands alone. This is the agent's security identity, refined
/// by what the engine reads of a pod beyond its labels; what the class leaves out (the pod's
/// name, its node) only decides flows between a pod and its own node, which
/// [`compute_between`] decides per pod.
#[derive(Debug, Default)]
pub struct Classes {
    /// The class of each pod, by its position among the pods.
    pub of: Vec<u32>,
    /// Each class's pods by position, the first its representative.
    pub members: Vec<Vec<usize>>,
}

/// What a pod's class is made of, in one cluster.
#[derive(PartialEq, Eq, Hash)]
struct PodKey<'a> {
    namespace: &'a str,
    /// Which of the cluster's pod selectors (subjects and peers) select the pod: the engine
    /// reads a pod's labels only through these, so pods that differ only in labels no selector
    /// tells apart (a StatefulSet's `pod-name` where one rule names one replica) share a class.
    selected: Rc<[u32]>,
    ports: &'a [netpol_engine::NamedPort],
    /// Per address (primary first): its family and the policy prefixes that cover it.
    addresses: Vec<(bool, Vec<u32>)>,
    /// The pod's own name, where its address is also a node's.
    alone: Option<String>,
}

/// The distinct pod selectors of `cluster`'s entries (subjects and pod peers), and the label
/// keys they read: of pods, and of namespaces.
fn selectors(cluster: &Cluster) -> (Vec<&PodSelector>, BTreeSet<&str>, BTreeSet<&str>) {
    fn keys<'a>(selector: &'a LabelSelector, out: &mut BTreeSet<&'a str>) {
        out.extend(selector.match_labels.keys().map(String::as_str));
        for requirement in &selector.match_expressions {
            out.insert(match requirement {
                Requirement::In(k, _)
                | Requirement::NotIn(k, _)
                | Requirement::Exists(k)
                | Requirement::DoesNotExist(k) => k.as_str(),
            });
        }
    }
    let mut distinct = BTreeSet::new();
    for entry in cluster.entries() {
        distinct.insert(&entry.subject);
        distinct.extend(entry.peers.iter().filter_map(|peer| match peer {
            Peer::Pods(selector) => Some(&**selector),
            _ => None,
        }));
    }
    let (mut pods, mut namespaces) = (BTreeSet::new(), BTreeSet::new());
    for selector in &distinct {
        keys(&selector.pods, &mut pods);
        keys(&selector.namespaces, &mut namespaces);
    }
    (distinct.into_iter().collect(), pods, namespaces)
}

/// Each pod's key in `cluster`, for the pods it has.
fn pod_keys<'a>(cluster: &'a Cluster) -> HashMap<&'a PodRef, PodKey<'a>> {
    let (selectors, pod_keys, namespace_keys) = selectors(cluster);
    // Each pod is matched against the selectors that may select it, not all of them.
    let index = SubjectIndex::of_subjects(selectors.iter().copied());
    let cidrs: Vec<&CidrSelector> = cluster
        .entries()
        .iter()
        .flat_map(|e| &e.peers)
        .filter_map(|p| match p {
            Peer::Cidr(c) => Some(c),
            _ => None,
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let node_addresses: HashSet<IpAddr> = cluster
        .nodes()
        .flat_map(|(_, ids)| ids.into_iter().map(|i| i.prefix.addr()))
        .collect();
    let project = |labels: &'a netpol_engine::Labels, keys: &BTreeSet<&str>| {
        labels
            .iter()
            .filter(|(k, _)| keys.contains(k.as_str()))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect::<Vec<_>>()
    };
    // The selectors that select a pod, once per namespace and label set the selectors read.
    type Projection<'a> = (&'a str, Vec<(&'a str, &'a str)>, Vec<(&'a str, &'a str)>);
    let mut selected: HashMap<Projection<'a>, Rc<[u32]>> = HashMap::new();
    cluster
        .pods()
        .filter_map(|(pod, identities)| {
            let info = identities.first()?.as_pod()?;
            let projection = (
                info.namespace.as_str(),
                project(&info.labels, &pod_keys),
                project(&info.namespace_labels, &namespace_keys),
            );
            let selected = Rc::clone(selected.entry(projection).or_insert_with(|| {
                index
                    .candidates(info)
                    .into_iter()
                    .filter(|&s| selectors[s].matches(info))
                    .map(|s| s as u32)
                    .collect()
            }));
            let addresses = identities
                .iter()
                .map(|identity| {
                    let covering = (0..cidrs.len() as u32)
                        .filter(|&i| cidrs[i as usize].covers(&identity.prefix))
                        .collect();
                    (identity.prefix.addr().is_ipv4(), covering)
                })
                .collect();
            let alone = identities
                .iter()
                .any(|i| node_addresses.contains(&i.prefix.addr()))
                .then(|| pod.to_string());
            Some((
                pod,
                PodKey {
                    namespace: &info.namespace,
                    selected,
                    ports: &info.ports,
                    addresses,
                    alone,
                },
            ))
        })
        .collect()
}

impl Classes {
    /// The classes of `pods` in every one of `clusters` (a pod is in one class with another
    /// only where it is so in each cluster). Every pod must be in every cluster.
    pub fn new(clusters: &[&Cluster], pods: &[&PodRef]) -> Classes {
        let keys: Vec<HashMap<&PodRef, PodKey>> = clusters.iter().map(|c| pod_keys(c)).collect();
        let mut index: HashMap<Vec<&PodKey>, u32> = HashMap::new();
        let mut classes = Classes::default();
        for (position, pod) in pods.iter().enumerate() {
            let key: Vec<&PodKey> = keys
                .iter()
                .map(|k| {
                    k.get(pod)
                        .expect("every pod has an address in every cluster")
                })
                .collect();
            let next = classes.members.len() as u32;
            let class = *index.entry(key).or_insert(next);
            if class == next {
                classes.members.push(Vec::new());
            }
            classes.members[class as usize].push(position);
            classes.of.push(class);
        }
        classes
    }

    /// Every pod its own class: the per-pod computation the classes stand in for.
    pub fn singletons(pods: usize) -> Classes {
        Classes {
            of: (0..pods as u32).collect(),
            members: (0..pods).map(|p| vec![p]).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}
