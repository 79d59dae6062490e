//! A connectivity matrix: the flow between every ordered pair of parties (pods, and for the
//! readable view nodes and the regions outside the cluster), decided by any decider, for one
//! protocol and port.

use std::fmt;
use std::net::IpAddr;

use netpol_engine::flow::{decide_flow, DirectionOracle, FlowDecision};
use netpol_engine::Protocol;

use super::outside::{regions, Region};
use crate::scenario::{Cluster, Endpoint, PodRef};

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
pub fn pod_parties(cluster: &Cluster) -> Vec<Party> {
    cluster
        .addressed_pods()
        .map(|(pod, _)| Party::Pod(pod.clone()))
        .collect()
}

/// The nodes of `cluster`, each by its first address.
pub fn node_parties(cluster: &Cluster) -> Vec<Party> {
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
pub fn outside_parties(clusters: &[&Cluster]) -> Vec<Party> {
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

/// A computed matrix for one protocol and port: party names, and for each source row one cell
/// per destination, `None` where no flow is defined (a party to itself, two parties neither of
/// which is a pod, a pod and its own node, no common address family).
#[derive(Debug)]
pub struct Matrix {
    pub protocol: Protocol,
    pub port: u16,
    pub pods: Vec<String>,
    pub cells: Vec<Vec<Option<FlowDecision>>>,
}

impl Matrix {
    /// The scenario-format character of a cell: `.` allowed, `X` denied, `-` undefined.
    pub fn symbol(cell: &Option<FlowDecision>) -> char {
        match cell {
            Some(d) if d.allowed() => '.',
            Some(_) => 'X',
            None => '-',
        }
    }

    /// Every cell with a flow, row by row: source, destination and decision.
    pub fn defined_cells(&self) -> impl Iterator<Item = (&String, &String, &FlowDecision)> {
        self.pods
            .iter()
            .zip(&self.cells)
            .flat_map(move |(from, row)| {
                self.pods
                    .iter()
                    .zip(row)
                    .filter_map(move |(to, cell)| cell.as_ref().map(|d| (from, to, d)))
            })
    }

    /// Every cell's symbol, row by row.
    pub fn symbols(&self) -> Vec<Vec<char>> {
        self.cells
            .iter()
            .map(|row| row.iter().map(Matrix::symbol).collect())
            .collect()
    }
}

/// Decides the flow between every ordered pair of pods.
pub fn compute(
    cluster: &Cluster,
    oracle: &dyn DirectionOracle,
    protocol: Protocol,
    port: u16,
) -> Matrix {
    compute_between(cluster, oracle, &pod_parties(cluster), protocol, port)
}

/// Decides the flow between every ordered pair of `parties`.
pub fn compute_between(
    cluster: &Cluster,
    oracle: &dyn DirectionOracle,
    parties: &[Party],
    protocol: Protocol,
    port: u16,
) -> Matrix {
    let cells = parties
        .iter()
        .map(|from| {
            parties
                .iter()
                .map(|to| decide_between(cluster, oracle, from, to, protocol, port))
                .collect()
        })
        .collect();
    Matrix {
        protocol,
        port,
        pods: parties.iter().map(ToString::to_string).collect(),
        cells,
    }
}

/// The flow from one party to another, or `None` where it is not defined.
pub fn decide_between(
    cluster: &Cluster,
    oracle: &dyn DirectionOracle,
    from: &Party,
    to: &Party,
    protocol: Protocol,
    port: u16,
) -> Option<FlowDecision> {
    if from == to || !(from.is_pod() || to.is_pod()) || own_node(cluster, from, to) {
        return None;
    }
    let (src, dst) = cluster
        .flow_identities(&from.endpoint(), &to.endpoint())
        .ok()?;
    Some(decide_flow(
        oracle,
        cluster.store(),
        src,
        dst,
        protocol,
        port,
    ))
}

/// Whether one party is a pod and the other its own node: traffic Kubernetes leaves undefined.
fn own_node(cluster: &Cluster, a: &Party, b: &Party) -> bool {
    let (pod, node) = match (a, b) {
        (Party::Pod(pod), Party::Node { name, .. })
        | (Party::Node { name, .. }, Party::Pod(pod)) => (pod, name),
        _ => return false,
    };
    cluster.pod_node(pod) == Some(node.as_str())
}
