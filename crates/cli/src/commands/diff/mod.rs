//! `netpol diff BEFORE AFTER [-f SHARED]...`: the flows whose verdict changes from one set of
//! policies to another (between pods, and between pods and nodes or the regions outside the
//! cluster that policies tell apart), each with the rule that decided it before and after, one
//! line per pair of workloads; "what breaks if I apply this?" answered before it is applied.
//!
//! BEFORE and AFTER are each a scenario file or manifests (a file or folder). `-f` names
//! manifests both sides share, typically the cluster's pods and namespaces as `kubectl get -o
//! yaml` prints them, so that BEFORE and AFTER can be two folders of policies. Exit status as
//! diff(1): 0 when nothing changes, 1 when something does, 2 when an input does not load or
//! the sides have no pod in common (nothing was compared).

use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::path::PathBuf;

use std::collections::HashMap;
use std::rc::Rc;

mod report;

use report::{write_text, Change, Report};

use crate::decide::changing::Changing;
use crate::decide::matrix::{
    compute_some, deciding_pods_where, node_parties, outside_parties, Classes, Matrix, Party,
};
use crate::decide::what_if::WhatIf;
use crate::decide::{decider, is_mapstate, EngineArgs};
use crate::input::{load_with_stdin, ManifestArgs};
use crate::outcome::Outcome;
use crate::output::report::{write_json, DecisionJson, TextOrJson};
use crate::probes::{probe_label, ProbeArgs};
use crate::scenario::{Cluster, Input, LoadErrors, PodRef, Scenario, STDIN};
use netpol_engine::flow::DirectionOracle;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// `BEFORE AFTER`: the cluster before and after, each a scenario file, or a manifest file
    /// or folder. With `--cluster`, `AFTER...`: manifests applied to the live cluster (BEFORE).
    #[arg(value_name = "BEFORE AFTER | AFTER", num_args = 0..)]
    pub paths: Vec<PathBuf>,
    /// Manifests both sides share (e.g. the cluster's pods and namespaces), added to BEFORE and
    /// to AFTER; these need BEFORE and AFTER to be manifests too. With `--cluster`, more AFTER
    /// manifests.
    #[command(flatten)]
    pub shared: ManifestArgs,
    /// Probe ports: every port the policies of either side mention, unless narrowed.
    #[command(flatten)]
    pub probes: ProbeArgs,
    /// `text` or `json`.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: TextOrJson,
    #[command(flatten)]
    pub engine: EngineArgs,
}

pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    let loaded = if args.shared.live.cluster {
        load_live(args, err)?
    } else {
        load_files(args, err)?
    };
    let Some((before, after)) = loaded else {
        return Ok(Outcome::Invalid);
    };
    let Some(report) = compare([&before, &after], args.engine, args.probes, err)? else {
        return Ok(Outcome::Invalid);
    };
    if report.pods_compared == 0 {
        // An empty diff reads as "safe" in CI; with no pods there was nothing to compare.
        writeln!(
            err,
            "error: BEFORE and AFTER have no pod (with an address) in common, so no flow to \
             compare; give the cluster's pods with -f (kubectl get pods,namespaces,nodes -A -o \
             yaml) or the workloads that run them"
        )?;
        return Ok(Outcome::Invalid);
    }
    match args.output {
        TextOrJson::Text => write_text(out, &report)?,
        TextOrJson::Json => write_json(out, &report)?,
    }
    Ok(if report.changes.is_empty() {
        Outcome::Success
    } else {
        Outcome::Mismatch
    })
}

/// Stdin, read once if any path names it (both sides may: it is given to each).
fn read_stdin<'a>(paths: impl IntoIterator<Item = &'a PathBuf>) -> io::Result<Vec<u8>> {
    let mut stdin = Vec::new();
    if paths.into_iter().any(|p| p.as_os_str() == STDIN) {
        io::stdin().read_to_end(&mut stdin)?;
    }
    Ok(stdin)
}

/// Writes the messages of both sides, each once (the shared manifests are read by both).
fn write_once(messages: &[u8], err: &mut dyn Write) -> io::Result<()> {
    let mut said = BTreeSet::new();
    for line in String::from_utf8_lossy(messages).lines() {
        if said.insert(line.to_owned()) {
            writeln!(err, "{line}")?;
        }
    }
    Ok(())
}

/// BEFORE and AFTER from files: scenario files or manifests, with the shared manifests.
fn load_files(args: &Args, err: &mut dyn Write) -> io::Result<Option<(Scenario, Scenario)>> {
    if !args.shared.live.delete.is_empty() {
        writeln!(err, "error: --delete needs --cluster")?;
        return Ok(None);
    }
    let [before, after] = args.paths.as_slice() else {
        writeln!(
            err,
            "error: give BEFORE AFTER ({} paths given), or --cluster AFTER...",
            args.paths.len()
        )?;
        return Ok(None);
    };
    let (before_input, after_input) = match (side(args, before), side(args, after)) {
        (Ok(before), Ok(after)) => (before, after),
        (Err(e), _) | (_, Err(e)) => {
            writeln!(err, "error: {e}")?;
            return Ok(None);
        }
    };
    let stdin = read_stdin(args.shared.filenames.iter().chain([before, after]))?;
    let flags = args.shared.read.flags();
    let mut messages = Vec::new();
    let before = load_with_stdin(&before_input, &mut stdin.as_slice(), flags, &mut messages)?;
    let after = load_with_stdin(&after_input, &mut stdin.as_slice(), flags, &mut messages)?;
    write_once(&messages, err)?;
    Ok(before.zip(after))
}

/// BEFORE is the live cluster, read once; AFTER is it with the `--delete`d objects taken out and
/// the AFTER manifests (positional and `-f`) applied, as `kubectl apply` would.
fn load_live(args: &Args, err: &mut dyn Write) -> io::Result<Option<(Scenario, Scenario)>> {
    let live = &args.shared.live;
    let apply: Vec<PathBuf> = args
        .shared
        .filenames
        .iter()
        .chain(&args.paths)
        .cloned()
        .collect();
    if apply.is_empty() && live.delete.is_empty() {
        writeln!(
            err,
            "error: with --cluster, give the AFTER manifests to apply (files, folders, -) or \
             --delete KIND/NAMESPACE/NAME"
        )?;
        return Ok(None);
    }
    let snapshot = match crate::live::read(live) {
        Ok(snapshot) => snapshot,
        Err(e) => {
            writeln!(err, "error: {e}")?;
            return Ok(None);
        }
    };
    let stdin = read_stdin(&apply)?;
    let flags = args.shared.read.flags();
    let mut messages = Vec::new();
    let report = |built: Result<Scenario, LoadErrors>, messages: &mut Vec<u8>| match built {
        Ok(scenario) => {
            for warning in &scenario.warnings {
                let _ = writeln!(messages, "warning: {warning}");
            }
            Some(scenario)
        }
        Err(errors) => {
            for error in errors.0 {
                let _ = writeln!(messages, "error: {error}");
            }
            None
        }
    };
    let before = crate::live::build(&snapshot, &[], &[], &mut [].as_slice(), flags);
    let before = report(before, &mut messages);
    let after = crate::live::build(
        &snapshot,
        &apply,
        &live.delete,
        &mut stdin.as_slice(),
        flags,
    );
    let after = report(after, &mut messages);
    write_once(&messages, err)?;
    Ok(before.zip(after))
}

/// The input of one side: with shared manifests, those and the side's own manifests.
fn side(args: &Args, path: &std::path::Path) -> Result<Input, String> {
    if args.shared.filenames.is_empty() {
        return Ok(Input::detect(path));
    }
    match Input::detect(path) {
        Input::Scenario(file) => Err(format!(
            "{}: a scenario file cannot be combined with -f manifests",
            file.display()
        )),
        Input::Manifests(own) => {
            let mut paths = args.shared.filenames.clone();
            paths.extend(own);
            Ok(Input::Manifests(paths))
        }
        Input::Live(_) => unreachable!("a path is never the live cluster"),
    }
}

/// One side of the comparison.
struct Side<'a> {
    scenario: &'a Scenario,
}

impl Side<'_> {
    fn cluster(&self) -> &Cluster {
        &self.scenario.cluster
    }

    fn pods(&self) -> BTreeSet<PodRef> {
        self.cluster()
            .addressed_pods()
            .map(|(pod, _)| pod.clone())
            .collect()
    }

    /// The workload a pod belongs to, `ns/name`, or the pod itself.
    fn workload(&self, pod: &PodRef) -> String {
        match self.cluster().facts(pod).and_then(|f| f.owner.as_ref()) {
            Some(owner) => format!("{}/{}", pod.namespace, owner.name),
            None => pod.to_string(),
        }
    }
}

/// Decides every flow between pods both sides have, and between those pods and the nodes both
/// sides have and the regions outside the cluster either side's policies tell apart, on every
/// probe port, and keeps those whose verdict differs. Pods are decided per class of pods alike
/// on both sides ([`Classes`]), as `matrix` does, and expanded to pods only where a verdict
/// changes. `None` where a side has no decider (reported on `err`).
pub fn compare(
    scenarios: [&Scenario; 2],
    engine: EngineArgs,
    probes: ProbeArgs,
    err: &mut dyn Write,
) -> io::Result<Option<Report>> {
    let [before, after] = scenarios.map(|scenario| Side { scenario });
    let clusters = [before.cluster(), after.cluster()];
    let probes = probes.ports(&clusters);
    let (before_pods, after_pods) = (before.pods(), after.pods());
    let common: Vec<&PodRef> = before_pods.intersection(&after_pods).collect();
    let names = |pods: std::collections::btree_set::Difference<PodRef>| {
        pods.map(ToString::to_string).collect::<Vec<_>>()
    };
    // Each side's parties: the common pods, then the nodes both sides have (a node's address
    // may differ between the sides), then the regions outside.
    let pods: Vec<Party> = common.iter().map(|p| Party::Pod((*p).clone())).collect();
    let mut parties = [pods.clone(), pods];
    let after_nodes: HashMap<String, Party> = node_parties(after.cluster())
        .into_iter()
        .rev()
        .map(|a| (a.to_string(), a))
        .collect();
    for b in node_parties(before.cluster()) {
        if let Some(a) = after_nodes.get(&b.to_string()) {
            parties[0].push(b);
            parties[1].push(a.clone());
        }
    }
    let nodes_compared = parties[0].len() - common.len();
    let outside = outside_parties(&clusters);
    let outside_regions = outside.iter().map(ToString::to_string).collect();
    for side in &mut parties {
        side.extend(outside.iter().cloned());
    }
    let classes = Rc::new(Classes::new(&clusters, &common));
    let changing = Changing::new(clusters, [&parties[0], &parties[1]], &classes);
    // One side at a time: its engine is dropped before the other side's is built (at 10,000
    // pods each holds a MapState per class, most of the memory a diff needs).
    let mut matrices: [Vec<Matrix>; 2] = Default::default();
    for (i, side) in scenarios.iter().enumerate() {
        // A class none of whose flows within itself or with other parties can change is asked
        // about only through its first pod.
        // The MapState engine decides with what-if maps, resolving no endpoint; the other
        // deciders resolve the pods the matrix asks about.
        let oracle: Box<dyn DirectionOracle> = if is_mapstate(engine) {
            Box::new(WhatIf::new(&side.cluster))
        } else {
            let deciding = deciding_pods_where(&side.cluster, &parties[i], &classes, &|class| {
                changing.every_member(class)
            });
            match decider(engine, side, Some(&deciding), err)? {
                Some(oracle) => oracle,
                None => return Ok(None),
            }
        };
        matrices[i] = probes
            .iter()
            .map(|&(protocol, port)| {
                compute_some(
                    clusters[i],
                    oracle.as_ref(),
                    &parties[i],
                    &classes,
                    protocol,
                    port,
                    &changing,
                )
            })
            .collect();
    }
    let mut changes = Vec::new();
    // Per probe and side, the decisions changes name, each converted once.
    let mut decisions: Vec<[Vec<DecisionJson>; 2]> = Vec::new();
    for (p, (was, now)) in matrices[0].iter().zip(&matrices[1]).enumerate() {
        let mut converted: [(HashMap<u32, u32>, Vec<DecisionJson>); 2] = Default::default();
        let mut position = |side: usize, code: u32, matrix: &Matrix| {
            let (index, list) = &mut converted[side];
            *index.entry(code).or_insert_with(|| {
                list.push((&matrix.decisions[code as usize]).into());
                list.len() as u32 - 1
            })
        };
        let mut change = |from: usize, to: usize| {
            let (x, y) = (was.code(from, to), now.code(from, to));
            let (Some(before), Some(after)) = (was.cell(from, to), now.cell(from, to)) else {
                return;
            };
            if before.allowed() == after.allowed() {
                return;
            }
            changes.push(Change {
                probe: p as u32,
                from: from as u32,
                to: to as u32,
                before: position(0, x, was),
                after: position(1, y, now),
            });
        };
        // Per class of sources, the pods of the classes towards which some verdict changes:
        // among every class for a row that may change, else among the columns that may.
        let k = classes.len();
        let columns: Vec<usize> = (0..k).filter(|&b| changing.column(b)).collect();
        let every: Vec<usize> = (0..k).collect();
        let changed_towards: Vec<Vec<usize>> = (0..k)
            .map(|a| {
                let candidates = if changing.row(a) { &every } else { &columns };
                let mut pods: Vec<usize> = candidates
                    .iter()
                    .copied()
                    .filter(|&b| {
                        let (x, y) = (was.class_code(a, b), now.class_code(a, b));
                        let verdict = |m: &Matrix, code: u32| {
                            m.decisions.get(code as usize).map(|d| d.allowed())
                        };
                        matches!(
                            (verdict(was, x), verdict(now, y)),
                            (Some(p), Some(q)) if p != q
                        )
                    })
                    .flat_map(|b| classes.members[b].iter().copied())
                    .collect();
                pods.sort_unstable();
                pods
            })
            .collect();
        // Flows between a pod and another party are asked for only where the pod's class or
        // the party may change; the others are undefined on both sides.
        let (n, all) = (common.len(), parties[0].len());
        let class_line = |pod: usize| {
            let class = classes.of[pod] as usize;
            changing.row(class) || changing.column(class)
        };
        let changing_others: Vec<usize> = (n..all).filter(|&o| changing.other(o - n)).collect();
        let pods_with_lines: Vec<usize> = (0..n).filter(|&p| class_line(p)).collect();
        for from in 0..all {
            if from < n {
                for &to in &changed_towards[classes.of[from] as usize] {
                    change(from, to);
                }
                if class_line(from) {
                    for to in n..all {
                        change(from, to);
                    }
                } else {
                    for &to in &changing_others {
                        change(from, to);
                    }
                }
            } else if changing.other(from - n) {
                for to in 0..n {
                    change(from, to);
                }
            } else {
                for &to in &pods_with_lines {
                    change(from, to);
                }
            }
        }
        let [(_, before), (_, after)] = converted;
        decisions.push([before, after]);
    }
    let workload = |party: &Party| match party {
        Party::Pod(pod) => Some(after.workload(pod)),
        _ => None,
    };
    Ok(Some(Report {
        probes: probes.iter().map(|(p, n)| format!("{p}/{n}")).collect(),
        probe_labels: probes
            .iter()
            .map(|&(p, n)| probe_label(&clusters, p, n))
            .collect(),
        probe_ports: probes.iter().map(|&(p, n)| (p.to_string(), n)).collect(),
        pods_compared: common.len(),
        pods_only_before: names(before_pods.difference(&after_pods)),
        pods_only_after: names(after_pods.difference(&before_pods)),
        nodes_compared,
        outside_regions,
        workloads: parties[0].iter().map(workload).collect(),
        parties: parties[0]
            .iter()
            .map(|party| (party.to_string(), party.kind()))
            .collect(),
        decisions,
        changes,
    }))
}
