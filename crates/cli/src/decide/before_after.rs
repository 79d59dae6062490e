//! A cluster decided before and after a change, and the flows whose verdict differs: what
//! `netpol diff` reports.
//!
//! Pods are decided per class of pods alike on both sides ([`Classes`]), as a matrix is, and
//! only the class rows and columns (and other parties) that can change ([`Changing`]); the
//! changes are class-level, expanded to pods by the caller. The sides are decided one after
//! the other ([`decide_side`]), so that the caller can drop BEFORE (its policies, and its pods
//! where AFTER does not share them) before AFTER is decided, and each side's engine before the
//! next is built.

use std::collections::{BTreeSet, HashMap};
use std::io::{self, Write};
use std::rc::Rc;

use netpol_engine::flow::{DirectionOracle, FlowDecisionRef};
use netpol_engine::Protocol;

use super::changing::Changing;
use super::class_matrix::{
    compute_some, deciding_pods_where, node_parties, outside_parties, pods_among, Classes, Matrix,
    Party, Prepared,
};
use super::what_if::WhatIf;
use super::{decider, is_mapstate, EngineArgs};
use crate::loader::{ClusterModel, PodRef, Scenario};

/// One end of a class-level change: the pods of a class, or another party (a node or a region
/// outside the cluster, by position after the pods).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum End {
    Class(u32),
    Other(u32),
}

/// A change between two ends on one probe: positions in the probes and in each side's
/// decisions of that probe.
#[derive(Clone, Copy, Debug)]
pub struct ClassChange {
    pub probe: u32,
    pub from: End,
    pub to: End,
    pub before: u32,
    pub after: u32,
}

/// What both sides are compared over, found while both are loaded.
pub struct Sides {
    /// BEFORE's parties: the common pods, then the nodes both sides have, then the regions
    /// outside; AFTER's, where they differ (a node's address may differ between the sides).
    pub parties: Vec<Party>,
    after_parties: Option<Vec<Party>>,
    pub pods_compared: usize,
    /// Pods (`namespace/name`) only BEFORE has, and only AFTER has: not compared.
    pub pods_only_before: Vec<String>,
    pub pods_only_after: Vec<String>,
    pub nodes_compared: usize,
    pub outside_regions: Vec<String>,
    /// The classes of the common pods, alike on both sides.
    pub classes: Rc<Classes>,
    changing: Changing,
}

impl Sides {
    pub fn new(clusters: [&ClusterModel; 2]) -> Sides {
        let pods = clusters.map(|cluster| {
            cluster
                .addressed_pods()
                .map(|(pod, _)| pod)
                .collect::<BTreeSet<&PodRef>>()
        });
        let names = |pods: std::collections::btree_set::Difference<&PodRef>| {
            pods.map(ToString::to_string).collect::<Vec<_>>()
        };
        let mut parties: Vec<Party> = pods[0]
            .intersection(&pods[1])
            .map(|&pod| Party::Pod(pod.clone()))
            .collect();
        let pods_compared = parties.len();
        // Sides sharing their pods (policies were all that changed) share their parties.
        let shared = clusters[0].shares_pods_with(clusters[1]);
        let mut after_parties = (!shared).then(|| parties.clone());
        let after_nodes: HashMap<String, Party> = node_parties(clusters[1])
            .into_iter()
            .rev()
            .map(|a| (a.to_string(), a))
            .collect();
        for b in node_parties(clusters[0]) {
            if let Some(a) = after_nodes.get(&b.to_string()) {
                parties.push(b);
                if let Some(after) = &mut after_parties {
                    after.push(a.clone());
                }
            }
        }
        let nodes_compared = parties.len() - pods_compared;
        let outside = outside_parties(&clusters);
        let outside_regions = outside.iter().map(ToString::to_string).collect();
        for side in [Some(&mut parties), after_parties.as_mut()]
            .into_iter()
            .flatten()
        {
            side.extend(outside.iter().cloned());
        }
        let common = pods_among(&parties);
        let classes = Rc::new(Classes::new(&clusters, &common));
        let after = after_parties.as_deref().unwrap_or(&parties);
        let changing = Changing::new(clusters, [&parties, after], &classes);
        Sides {
            pods_compared,
            pods_only_before: names(pods[0].difference(&pods[1])),
            pods_only_after: names(pods[1].difference(&pods[0])),
            parties,
            after_parties,
            nodes_compared,
            outside_regions,
            classes,
            changing,
        }
    }

    /// The parties of side `i` (0 BEFORE, 1 AFTER).
    fn parties(&self, i: usize) -> &[Party] {
        match (i, &self.after_parties) {
            (1, Some(after)) => after,
            _ => &self.parties,
        }
    }
}

/// Side `i`'s matrices (0 BEFORE, 1 AFTER, `side` its scenario): only the flows that may
/// change, per probe. `None` where the side has no decider (reported on `err`).
pub fn decide_side(
    sides: &Sides,
    i: usize,
    side: &Scenario,
    engine: EngineArgs,
    probes: &[(Protocol, u16)],
    err: &mut dyn Write,
) -> io::Result<Option<Vec<Matrix>>> {
    let (classes, changing) = (&sides.classes, &sides.changing);
    let parties = sides.parties(i);
    let cluster = &side.cluster;
    // The MapState engine decides with what-if maps, resolving no endpoint; the other deciders
    // resolve the pods the matrix asks about: a class none of whose flows within itself or with
    // other parties can change only through its first pod.
    let oracle: Box<dyn DirectionOracle> = if is_mapstate(engine) {
        Box::new(WhatIf::new(cluster))
    } else {
        let deciding = deciding_pods_where(cluster, parties, classes, &|class| {
            changing.every_member(class)
        });
        match decider(engine, side, Some(&deciding), err)? {
            Some(oracle) => oracle,
            None => return Ok(None),
        }
    };
    let mut prepared = Prepared::new(cluster, parties, classes);
    Ok(Some(
        probes
            .iter()
            .map(|&(protocol, port)| {
                compute_some(&mut prepared, oracle.as_ref(), protocol, port, changing)
            })
            .collect(),
    ))
}

/// Per probe and side, the decisions changes name, each converted once.
pub type Decisions<T> = Vec<[Vec<T>; 2]>;

/// Every class-level change between the sides' matrices (per probe, as [`decide_side`] made
/// them): between two classes whose cells' verdicts differ (and that have two distinct pods),
/// and between a class and another party (where some pod of the class is not on it), by probe.
/// The decisions they name are `convert`ed once each.
pub fn class_changes<T>(
    sides: &Sides,
    matrices: &[Vec<Matrix>; 2],
    convert: impl Fn(FlowDecisionRef) -> T,
) -> (Vec<ClassChange>, Decisions<T>) {
    let (classes, changing) = (&sides.classes, &sides.changing);
    let mut changes = Vec::new();
    let mut decisions: Decisions<T> = Vec::new();
    let k = classes.len();
    let others = sides.parties.len() - sides.pods_compared;
    let columns: Vec<usize> = (0..k).filter(|&b| changing.column(b)).collect();
    let every: Vec<usize> = (0..k).collect();
    let changing_others: Vec<usize> = (0..others).filter(|&o| changing.other(o)).collect();
    let every_other: Vec<usize> = (0..others).collect();
    for (p, (was, now)) in matrices[0].iter().zip(&matrices[1]).enumerate() {
        let mut converted: [(HashMap<u32, u32>, Vec<T>); 2] = Default::default();
        let mut position = |side: usize, code: u32, matrix: &Matrix| {
            let (index, list) = &mut converted[side];
            *index.entry(code).or_insert_with(|| {
                list.push(convert(
                    matrix
                        .decisions
                        .get(code)
                        .expect("a changed flow is defined"),
                ));
                list.len() as u32 - 1
            })
        };
        let mut change = |from: End, to: End, x: u32, y: u32| {
            let verdict = |m: &Matrix, code: u32| m.decisions.get(code).map(|d| d.allowed());
            if matches!((verdict(was, x), verdict(now, y)), (Some(a), Some(b)) if a != b) {
                changes.push(ClassChange {
                    probe: p as u32,
                    from,
                    to,
                    before: position(0, x, was),
                    after: position(1, y, now),
                });
            }
        };
        for a in 0..k {
            // Between classes: among every class for a row that may change, else among the
            // columns that may.
            let candidates = if changing.row(a) { &every } else { &columns };
            for &b in candidates {
                if a == b && classes.members[a].len() < 2 {
                    continue;
                }
                let (x, y) = (was.class_code(a, b), now.class_code(a, b));
                change(End::Class(a as u32), End::Class(b as u32), x, y);
            }
            // With other parties: only where the class or the party may change; the others
            // are undefined on both sides.
            let line = changing.row(a) || changing.column(a);
            for &o in if line { &every_other } else { &changing_others } {
                for outwards in [true, false] {
                    let (x, y) = (
                        was.class_other_code(a, o, outwards),
                        now.class_other_code(a, o, outwards),
                    );
                    let (class, other) = (End::Class(a as u32), End::Other(o as u32));
                    let (from, to) = if outwards {
                        (class, other)
                    } else {
                        (other, class)
                    };
                    change(from, to, x, y);
                }
            }
        }
        let [(_, before), (_, after)] = converted;
        decisions.push([before, after]);
    }
    (changes, decisions)
}
