//! `diff -o json`: the changes grouped as the text is, by the pods of one workload within one
//! class of pods alike, each group's pods listed once and each distinct decision once, so that
//! the document grows with what differs, not with the pods that differ squared (one removed
//! policy at 10,000 pods: 386 MB of per-pod changes). `--per-pod` writes every changed pod flow
//! whole instead ([`super::report::PerPod`]). Fields are described in docs/cli.md.

use std::collections::HashMap;

use serde::Serialize;

use super::report::Report;
use super::workload_groups::{GroupEnd, Groups};
use crate::output::report::DecisionJson;

/// The version of the grouped document, changed when a field changes meaning or shape.
pub const FORMAT: &str = "netpol.diff/v1";

/// The grouped document.
#[derive(Serialize)]
struct DiffJson<'a> {
    /// [`FORMAT`].
    format: &'static str,
    probes: &'a [String],
    /// Per probe, as the text names it: with the names pods give the port, and what it stands
    /// for beyond itself (`TCP/80 (every other port)`).
    probe_labels: &'a [String],
    /// Pods of the inputs both sides have.
    pods_compared: usize,
    /// Stand-ins for pods the inputs do not hold that a policy's peer can select, compared
    /// as pods (not counted in `pods_compared`).
    stand_ins: &'a [String],
    pods_only_before: &'a [String],
    pods_only_after: &'a [String],
    pods_new: &'a [String],
    pods_gone: &'a [String],
    nodes_compared: usize,
    outside_regions: &'a [String],
    /// Pod flows that change, and of them newly denied and newly allowed.
    flows_changed: u64,
    newly_denied: u64,
    newly_allowed: u64,
    /// The groups changes name, numbered from 0, then the other parties from after them.
    groups: Vec<GroupJson<'a>>,
    others: Vec<OtherJson<'a>>,
    /// Each distinct decision once; changes name them by position.
    decisions: Vec<&'a DecisionJson>,
    changes: Vec<ChangeJson<'a>>,
}

#[derive(Serialize)]
struct GroupJson<'a> {
    /// The workload, numbered (`ns/app part 2`) where its pods are in several groups.
    label: String,
    workload: &'a str,
    pods: Vec<&'a str>,
}

#[derive(Serialize)]
struct OtherJson<'a> {
    name: &'a str,
    /// `node` or `outside`.
    kind: &'static str,
}

#[derive(Serialize)]
struct ChangeJson<'a> {
    protocol: &'a str,
    port: u16,
    /// Parties by number: groups first, then others.
    from: u32,
    to: u32,
    /// How many pod flows change: every pod of `from` to every pod of `to` (a pod to itself
    /// excepted), less, with a node, the pods `except` names.
    flows: u64,
    /// Pods of the group that run on the node at the other end: a pod and its own node have no
    /// flow.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    except: Vec<&'a str>,
    before: u32,
    after: u32,
}

pub fn write_json<'a>(out: &mut dyn std::io::Write, report: &'a Report) -> std::io::Result<()> {
    let groups = Groups::new(report, false);
    let changes = groups.changes(report);
    // The groups and others changes name: groups by their first pod, others as listed.
    let mut others: Vec<u32> = changes
        .iter()
        .flat_map(|c| [c.from, c.to])
        .filter_map(|end| match end {
            GroupEnd::Other(o) => Some(o),
            GroupEnd::Group(_) => None,
        })
        .collect();
    others.sort_unstable();
    others.dedup();
    let named: Vec<u32> = {
        let mut named: Vec<u32> = changes
            .iter()
            .flat_map(|c| [c.from, c.to])
            .filter_map(|end| match end {
                GroupEnd::Group(g) => Some(g),
                GroupEnd::Other(_) => None,
            })
            .collect();
        named.sort_unstable();
        named.dedup();
        named
    };
    let group_number: HashMap<u32, u32> = named
        .iter()
        .enumerate()
        .map(|(i, &g)| (g, i as u32))
        .collect();
    let other_number: HashMap<u32, u32> = others
        .iter()
        .enumerate()
        .map(|(i, &o)| (o, (named.len() + i) as u32))
        .collect();
    let number = |end: GroupEnd| match end {
        GroupEnd::Group(g) => group_number[&g],
        GroupEnd::Other(o) => other_number[&o],
    };
    // A workload in several groups: its groups are numbered parts.
    let mut parts: HashMap<&str, usize> = HashMap::new();
    for &g in &named {
        *parts.entry(groups.list[g as usize].workload).or_default() += 1;
    }
    let mut part: HashMap<&str, usize> = HashMap::new();
    let groups_json = named
        .iter()
        .map(|&g| {
            let group = &groups.list[g as usize];
            let label = if parts[group.workload] > 1 {
                let n = part.entry(group.workload).or_default();
                *n += 1;
                format!("{} part {n}", group.workload)
            } else {
                group.workload.to_owned()
            };
            GroupJson {
                label,
                workload: group.workload,
                pods: group
                    .pods
                    .iter()
                    .map(|&p| report.parties[p].0.as_str())
                    .collect(),
            }
        })
        .collect();
    let mut decisions: Vec<&DecisionJson> = Vec::new();
    let mut decision_number: HashMap<&DecisionJson, u32> = HashMap::new();
    let mut number_of = |decision: &'a DecisionJson| -> u32 {
        let next = decisions.len() as u32;
        *decision_number.entry(decision).or_insert_with(|| {
            decisions.push(decision);
            next
        })
    };
    let (flows_changed, newly_denied) = report.counts();
    let changes_json = changes
        .iter()
        .map(|change| {
            let [before, after] = report.decisions_of(change.probe, change.before, change.after);
            let (protocol, port) = &report.probe_ports[change.probe as usize];
            let excepted = |end: GroupEnd, other: GroupEnd| -> Vec<&str> {
                match (end, other) {
                    (GroupEnd::Group(g), GroupEnd::Other(o)) => groups.list[g as usize]
                        .pods
                        .iter()
                        .filter(|&&p| !report.with_other(p, o))
                        .map(|&p| report.parties[p].0.as_str())
                        .collect(),
                    _ => Vec::new(),
                }
            };
            let mut except = excepted(change.from, change.to);
            except.extend(excepted(change.to, change.from));
            ChangeJson {
                protocol,
                port: *port,
                from: number(change.from),
                to: number(change.to),
                flows: change.flows,
                except,
                before: number_of(before),
                after: number_of(after),
            }
        })
        .collect();
    let document = DiffJson {
        format: FORMAT,
        probes: &report.probes,
        probe_labels: &report.probe_labels,
        pods_compared: report.input_pods(),
        stand_ins: &report.stand_ins,
        pods_only_before: &report.pods_only_before,
        pods_only_after: &report.pods_only_after,
        pods_new: &report.pods_new,
        pods_gone: &report.pods_gone,
        nodes_compared: report.nodes_compared,
        outside_regions: &report.outside_regions,
        flows_changed,
        newly_denied,
        newly_allowed: flows_changed - newly_denied,
        groups: groups_json,
        others: others
            .iter()
            .map(|&o| {
                let (name, kind) = &report.parties[report.other_party(o)];
                OtherJson { name, kind }
            })
            .collect(),
        decisions,
        changes: changes_json,
    };
    crate::output::report::write_json(out, &document)
}
