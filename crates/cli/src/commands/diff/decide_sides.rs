//! Deciding both sides of a diff ([`crate::decide::before_after`]) and holding what changes as
//! a [`Report`].

use std::io::{self, Write};

use super::newcomers::lend_missing_pods;
use super::report::Report;
use crate::decide::before_after::{class_changes, decide_side, Sides};
use crate::decide::class_matrix::Party;
use crate::decide::EngineArgs;
use crate::loader::{ClusterModel, PodRef, Scenario};
use crate::probe_ports::{probe_labels, ProbeArgs};

/// Decides every flow between pods both sides have, and between those pods and the nodes both
/// sides have and the regions outside the cluster either side's policies tell apart, on every
/// probe port, and keeps those whose verdict differs. Pods are decided per class of pods alike
/// on both sides ([`crate::decide::class_matrix::Classes`]), as `matrix` does, and expanded to pods only where a verdict
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
    let probes = probes.ports(&[&before.cluster, &after.cluster]);
    let probe_labels = probe_labels(&[&before.cluster, &after.cluster], &probes);
    let sides = Sides::new([&before.cluster, &after.cluster]);
    // BEFORE is decided and dropped first: AFTER names the pods' workloads in the report.
    let Some(was) = decide_side(&sides, 0, &before, engine, &probes, err)? else {
        return Ok(None);
    };
    drop(before);
    let Some(now) = decide_side(&sides, 1, &after, engine, &probes, err)? else {
        return Ok(None);
    };
    // Every matrix of a side knows each pod's own node alike.
    let own_nodes = (0..sides.pods_compared)
        .map(|pod| [&was, &now].map(|side| side.first().and_then(|m| m.own_node(pod))))
        .collect();
    let (changes, decisions) = class_changes(&sides, &[was, now], |decision| decision.into());
    let workload = |party: &Party| match party {
        Party::Pod(pod) => Some(workload(&after.cluster, pod)),
        _ => None,
    };
    let Sides {
        parties,
        classes,
        pods_compared,
        pods_only_before,
        pods_only_after,
        nodes_compared,
        outside_regions,
        ..
    } = sides;
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

/// The workload a pod belongs to, `ns/name`, or the pod itself.
fn workload(cluster: &ClusterModel, pod: &PodRef) -> String {
    match cluster.facts(pod).and_then(|f| f.owner.as_ref()) {
        Some(owner) => format!("{}/{}", pod.namespace, owner.name),
        None => pod.to_string(),
    }
}
