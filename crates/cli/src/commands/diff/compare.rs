//! Deciding both sides of a diff and keeping the flows whose verdict changes.
//!
//! Pods are decided per class of pods alike on both sides ([`Classes`]), as `matrix` does, and
//! only the class rows and columns (and other parties) that can change ([`Changing`]); the
//! changes are expanded to pods at the end. The sides are decided one after the other: BEFORE
//! is dropped (its policies, and its pods where AFTER does not share them) before AFTER is
//! decided, and each side's engine before the next is built.

use std::collections::{BTreeSet, HashMap};
use std::io::{self, Write};
use std::rc::Rc;

use netpol_engine::flow::DirectionOracle;

use super::newcomers::lend_missing_pods;
use super::report::{ClassChange, End, Report};
use crate::decide::changing::Changing;
use crate::decide::matrix::{
    compute_some, deciding_pods_where, node_parties, outside_parties, pods_among, Classes, Matrix,
    Party, Prepared,
};
use crate::decide::what_if::WhatIf;
use crate::decide::{decider, is_mapstate, EngineArgs};
use crate::output::report::DecisionJson;
use crate::probes::{probe_labels, ProbeArgs};
use crate::scenario::{Cluster, PodRef, Scenario};

/// What both sides are compared over, found while both are loaded.
struct Setup {
    probes: Vec<(netpol_engine::Protocol, u16)>,
    probe_labels: Vec<String>,
    /// BEFORE's parties: the common pods, then the nodes both sides have, then the regions
    /// outside; AFTER's, where they differ (a node's address may differ between the sides).
    parties: Vec<Party>,
    after_parties: Option<Vec<Party>>,
    pods_compared: usize,
    pods_only_before: Vec<String>,
    pods_only_after: Vec<String>,
    nodes_compared: usize,
    outside_regions: Vec<String>,
    classes: Rc<Classes>,
    changing: Changing,
}

impl Setup {
    fn new(clusters: [&Cluster; 2], probes: ProbeArgs) -> Setup {
        let probes = probes.ports(&clusters);
        let probe_labels = probe_labels(&clusters, &probes);
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
        Setup {
            probes,
            probe_labels,
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

/// Decides every flow between pods both sides have, and between those pods and the nodes both
/// sides have and the regions outside the cluster either side's policies tell apart, on every
/// probe port, and keeps those whose verdict differs. Pods are decided per class of pods alike
/// on both sides ([`Classes`]), as `matrix` does, and expanded to pods only where a verdict
/// changes. `None` where a side has no decider (reported on `err`).
pub fn compare(
    scenarios: [Scenario; 2],
    engine: EngineArgs,
    probes: ProbeArgs,
    err: &mut dyn Write,
) -> io::Result<Option<Report>> {
    let [mut before, mut after] = scenarios;
    // Pods only one side has are lent to the other, so their flows are compared too.
    let new = lend_missing_pods(&mut before.cluster, &after.cluster);
    let gone = lend_missing_pods(&mut after.cluster, &before.cluster);
    let setup = Setup::new([&before.cluster, &after.cluster], probes);
    // BEFORE is decided and dropped first: AFTER names the pods' workloads in the report.
    let Some(was) = decide(&setup, 0, &before, engine, err)? else {
        return Ok(None);
    };
    drop(before);
    let Some(now) = decide(&setup, 1, &after, engine, err)? else {
        return Ok(None);
    };
    // Every matrix of a side knows each pod's own node alike.
    let own_nodes = (0..setup.pods_compared)
        .map(|pod| [&was, &now].map(|side| side.first().and_then(|m| m.own_node(pod))))
        .collect();
    let (changes, decisions) = changes(&setup, &[was, now]);
    let workload = |party: &Party| match party {
        Party::Pod(pod) => Some(workload(&after.cluster, pod)),
        _ => None,
    };
    let Setup {
        probes,
        probe_labels,
        parties,
        classes,
        pods_compared,
        pods_only_before,
        pods_only_after,
        nodes_compared,
        outside_regions,
        ..
    } = setup;
    Ok(Some(Report {
        probes: probes.iter().map(|(p, n)| format!("{p}/{n}")).collect(),
        probe_ports: probes.iter().map(|&(p, n)| (p.to_string(), n)).collect(),
        probe_labels,
        pods_compared,
        pods_only_before,
        pods_only_after,
        pods_gone: gone.lent,
        pods_new: new.lent,
        stand_ins: Vec::new(),
        nodes_compared,
        outside_regions,
        workloads: parties.iter().map(workload).collect(),
        parties: parties
            .iter()
            .map(|party| (party.to_string(), party.kind()))
            .collect(),
        decisions,
        classes,
        own_nodes,
        changes,
    }))
}

/// Side `i`'s matrices (0 BEFORE, 1 AFTER): only the flows that may change, per probe. `None`
/// where the side has no decider (reported on `err`).
fn decide(
    setup: &Setup,
    i: usize,
    side: &Scenario,
    engine: EngineArgs,
    err: &mut dyn Write,
) -> io::Result<Option<Vec<Matrix>>> {
    let (classes, changing) = (&setup.classes, &setup.changing);
    let parties = setup.parties(i);
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
        setup
            .probes
            .iter()
            .map(|&(protocol, port)| {
                compute_some(&mut prepared, oracle.as_ref(), protocol, port, changing)
            })
            .collect(),
    ))
}

/// The workload a pod belongs to, `ns/name`, or the pod itself.
fn workload(cluster: &Cluster, pod: &PodRef) -> String {
    match cluster.facts(pod).and_then(|f| f.owner.as_ref()) {
        Some(owner) => format!("{}/{}", pod.namespace, owner.name),
        None => pod.to_string(),
    }
}

/// Per probe and side, the decisions changes name (each converted once).
type Decisions = Vec<[Vec<DecisionJson>; 2]>;

/// Every class-level change between the sides' matrices: between two classes whose cells'
/// verdicts differ (and that have two distinct pods), and between a class and another party
/// (where some pod of the class is not on it), by probe.
fn changes(setup: &Setup, matrices: &[Vec<Matrix>; 2]) -> (Vec<ClassChange>, Decisions) {
    let (classes, changing) = (&setup.classes, &setup.changing);
    let mut changes = Vec::new();
    let mut decisions: Decisions = Vec::new();
    let k = classes.len();
    let others = setup.parties.len() - setup.pods_compared;
    let columns: Vec<usize> = (0..k).filter(|&b| changing.column(b)).collect();
    let every: Vec<usize> = (0..k).collect();
    let changing_others: Vec<usize> = (0..others).filter(|&o| changing.other(o)).collect();
    let every_other: Vec<usize> = (0..others).collect();
    for (p, (was, now)) in matrices[0].iter().zip(&matrices[1]).enumerate() {
        let mut converted: [(HashMap<u32, u32>, Vec<DecisionJson>); 2] = Default::default();
        let mut position = |side: usize, code: u32, matrix: &Matrix| {
            let (index, list) = &mut converted[side];
            *index.entry(code).or_insert_with(|| {
                list.push(
                    matrix
                        .decisions
                        .get(code)
                        .expect("a changed flow is defined")
                        .into(),
                );
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
