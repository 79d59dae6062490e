//! The parties of a matrix: pods, nodes (by one of their addresses) and the regions outside
//! the cluster that policies tell apart (by a representative address).

use std::fmt;
use std::net::IpAddr;

use super::outside::{regions, Region};
use crate::loader::{ClusterModel, Endpoint, PodRef};

/// One row and column of a matrix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Party {
    Pod(PodRef),
    /// A node, by one of its addresses.
    Node {
        name: String,
        address: IpAddr,
    },
    /// A region of addresses outside the cluster, by its representative.
    Outside(Region),
}

impl Party {
    /// The endpoint a flow to or from this party names.
    pub fn endpoint(&self) -> Endpoint {
        match self {
            Party::Pod(pod) => Endpoint::Pod(pod.clone()),
            Party::Node { address, .. } => Endpoint::Address(*address),
            Party::Outside(region) => Endpoint::Address(region.representative),
        }
    }

    /// `pod`, `node` or `outside`.
    pub fn kind(&self) -> &'static str {
        match self {
            Party::Pod(_) => "pod",
            Party::Node { .. } => "node",
            Party::Outside(_) => "outside",
        }
    }

    pub fn is_pod(&self) -> bool {
        matches!(self, Party::Pod(_))
    }
}

impl fmt::Display for Party {
    /// `ns/pod`, `node node-1`, `0.0.0.0/0 except 10.0.0.0/8`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Party::Pod(pod) => write!(f, "{pod}"),
            Party::Node { name, .. } => write!(f, "node {name}"),
            Party::Outside(region) => write!(f, "{region}"),
        }
    }
}

/// The pods of `cluster` that have an address, by namespace then name.
pub fn pod_parties(cluster: &ClusterModel) -> Vec<Party> {
    cluster
        .addressed_pods()
        .map(|(pod, _)| Party::Pod(pod.clone()))
        .collect()
}

/// The nodes of `cluster`, each by its first address.
pub fn node_parties(cluster: &ClusterModel) -> Vec<Party> {
    cluster
        .nodes()
        .filter_map(|(name, identities)| {
            let address = identities.first()?.prefix.addr();
            Some(Party::Node {
                name: name.to_owned(),
                address,
            })
        })
        .collect()
}

/// The regions outside the cluster that the policies of `clusters` tell apart, of the address
/// families some pod of theirs has.
pub fn outside_parties(clusters: &[&ClusterModel]) -> Vec<Party> {
    let prefixes = clusters.iter().flat_map(|c| c.outside_prefixes());
    let taken = clusters
        .iter()
        .flat_map(|c| c.cluster_addresses())
        .collect();
    let families: Vec<bool> = clusters
        .iter()
        .flat_map(|c| c.pods().flat_map(|(_, ids)| ids))
        .map(|identity| identity.prefix.addr().is_ipv4())
        .collect();
    regions(prefixes, &taken)
        .into_iter()
        .filter(|r| families.contains(&r.representative.is_ipv4()))
        .map(Party::Outside)
        .collect()
}
