//! A connectivity matrix: the flow between every ordered pair of a cluster's pods, decided by any
//! decider, for one protocol and port.

use netpol_engine::flow::{decide_flow, DirectionOracle, FlowDecision};
use netpol_engine::Protocol;

use crate::scenario::{Cluster, Endpoint};

/// A computed matrix for one protocol and port: pod names, and for each source row one cell per
/// destination, `None` where no flow is defined (a pod to itself, no common address family).
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
    let pods: Vec<Endpoint> = cluster
        .addressed_pods()
        .map(|(pod, _)| Endpoint::Pod(pod.clone()))
        .collect();
    let cells = pods
        .iter()
        .map(|from| {
            pods.iter()
                .map(|to| {
                    if from == to {
                        return None;
                    }
                    let (src, dst) = cluster.flow_identities(from, to).ok()?;
                    Some(decide_flow(
                        oracle,
                        cluster.store(),
                        src,
                        dst,
                        protocol,
                        port,
                    ))
                })
                .collect()
        })
        .collect();
    Matrix {
        protocol,
        port,
        pods: pods.iter().map(ToString::to_string).collect(),
        cells,
    }
}
