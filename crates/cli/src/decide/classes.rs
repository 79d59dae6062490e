//! Classes of pods alike: pods that every decider decides alike towards every party, so that a
//! matrix decides once per pair of classes, not per pair of pods. The engine says which pods are
//! alike to it ([`Partition`]); this adds what the tools read of a pod beyond that.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use netpol_engine::engine::{Partition, PodKey};
use netpol_engine::Identity;

use crate::loader::{ClusterModel, PodRef};

/// Pods that every decider decides alike, towards every party: pods of one class of the
/// engine's partition ([`Partition`]: one security identity address by address, selected by
/// the same entries as subjects; this covers their namespace, what selectors read of their
/// labels, their named ports and the policy prefixes holding their addresses), with the same
/// address families. A pod whose address is also a node's stands alone. What the class leaves
/// out (the pod's name, its node) only decides flows between a pod and its own node, which
/// [`compute_between`] decides per pod.
///
/// [`compute_between`]: super::class_matrix::compute_between
#[derive(Debug, Default)]
pub struct Classes {
    /// The class of each pod, by its position among the pods.
    pub of: Vec<u32>,
    /// Each class's pods by position, the first its representative.
    pub members: Vec<Vec<usize>>,
}

/// What a pod's class is made of in one cluster, beyond the engine's partition: what the tools
/// read of a pod that the engine's identities do not.
#[derive(PartialEq, Eq, Hash)]
struct PodClass<'a> {
    partition: PodKey<'a>,
    /// Per address (primary first): whether it is IPv4 (a flow pairs the families both sides
    /// have).
    families: Vec<bool>,
    /// The pod's own name, where its address is also a node's: a flow from that node is then
    /// from the pod as well.
    alone: Option<String>,
}

/// Each pod's class in `cluster`, numbered in the order of `pods`. Every pod must be in the
/// cluster.
fn pod_classes(cluster: &ClusterModel, pods: &[&PodRef]) -> Vec<u32> {
    let partition = Partition::of(cluster.entries());
    let node_addresses: HashSet<IpAddr> = cluster
        .nodes()
        .flat_map(|(_, ids)| ids.into_iter().map(|i| i.prefix.addr()))
        .collect();
    let identities: HashMap<&PodRef, Vec<&Identity>> = cluster.pods().collect();
    let mut numbers: HashMap<PodClass, u32> = HashMap::new();
    pods.iter()
        .map(|pod| {
            let identities = identities
                .get(pod)
                .filter(|ids| !ids.is_empty())
                .expect("every pod has an address in every cluster");
            let info = identities[0].as_pod().expect("a pod's identity");
            let addresses = identities.iter().map(|i| i.prefix.addr());
            let class = PodClass {
                partition: partition.pod_key(info, addresses.clone()),
                families: addresses.clone().map(|a| a.is_ipv4()).collect(),
                alone: addresses
                    .clone()
                    .any(|a| node_addresses.contains(&a))
                    .then(|| pod.to_string()),
            };
            let next = numbers.len() as u32;
            *numbers.entry(class).or_insert(next)
        })
        .collect()
}

impl Classes {
    /// The classes of `pods` in every one of `clusters` (a pod is in one class with another
    /// only where it is so in each cluster). Every pod must be in every cluster.
    pub fn new(clusters: &[&ClusterModel], pods: &[&PodRef]) -> Classes {
        // A class per cluster for each pod (only its identity in the partition is kept, not a
        // key per pod: at 150,000 pods a key each was tens of megabytes), then a class per
        // distinct combination.
        let per_cluster: Vec<Vec<u32>> = clusters.iter().map(|c| pod_classes(c, pods)).collect();
        let mut index: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut classes = Classes::default();
        for position in 0..pods.len() {
            let key: Vec<u32> = per_cluster.iter().map(|c| c[position]).collect();
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
