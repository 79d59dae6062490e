//! `netpol diff BEFORE AFTER [-f SHARED]...`: the flows between pods whose verdict changes from
//! one set of policies to another, each with the rule that decided it before and after; "what
//! breaks if I apply this?" answered before it is applied.
//!
//! BEFORE and AFTER are each a scenario file or manifests (a file or folder). `-f` names
//! manifests both sides share, typically the cluster's pods and namespaces as `kubectl get -o
//! yaml` prints them, so that BEFORE and AFTER can be two folders of policies. Exit status as
//! diff(1): 0 when nothing changes, 1 when something does, 2 when an input does not load.

use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::path::PathBuf;

use netpol_engine::flow::{decide_flow, DirectionOracle, FlowDecision};
use netpol_engine::Protocol;
use serde::Serialize;

use crate::decide::{decider, EngineArgs};
use crate::input::{load_with_stdin, ManifestArgs};
use crate::outcome::Outcome;
use crate::output::describe;
use crate::output::report::{write_json, DecisionJson, TextOrJson};
use crate::probes::ProbeArgs;
use crate::scenario::{Endpoint, Input, PodRef, Scenario, STDIN};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The cluster before: a scenario file, or a manifest file or folder.
    pub before: PathBuf,
    /// The cluster after: a scenario file, or a manifest file or folder.
    pub after: PathBuf,
    /// Manifests both sides share (e.g. the cluster's pods and namespaces), added to BEFORE and
    /// to AFTER; these need BEFORE and AFTER to be manifests too.
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
    let (before, after) = match (side(args, &args.before), side(args, &args.after)) {
        (Ok(before), Ok(after)) => (before, after),
        (Err(e), _) | (_, Err(e)) => {
            writeln!(err, "error: {e}")?;
            return Ok(Outcome::Invalid);
        }
    };
    // Both sides may name stdin (through the shared manifests): it is read once and given to
    // each.
    let mut stdin = Vec::new();
    if args.shared.filenames.iter().any(|p| p.as_os_str() == STDIN)
        || [&args.before, &args.after]
            .iter()
            .any(|p| p.as_os_str() == STDIN)
    {
        io::stdin().read_to_end(&mut stdin)?;
    }
    let before = load_with_stdin(&before, &mut stdin.as_slice(), err)?;
    let after = load_with_stdin(&after, &mut stdin.as_slice(), err)?;
    let (Some(before), Some(after)) = (before, after) else {
        return Ok(Outcome::Invalid);
    };
    let (Some(before_oracle), Some(after_oracle)) = (
        decider(args.engine, &before, err)?,
        decider(args.engine, &after, err)?,
    ) else {
        return Ok(Outcome::Invalid);
    };
    let sides = [
        Side {
            scenario: &before,
            oracle: before_oracle.as_ref(),
        },
        Side {
            scenario: &after,
            oracle: after_oracle.as_ref(),
        },
    ];
    let report = compare(&sides, args.probes);
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
    }
}

/// One side of the comparison: its cluster and what decides its flows.
pub struct Side<'a> {
    pub scenario: &'a Scenario,
    pub oracle: &'a dyn DirectionOracle,
}

impl Side<'_> {
    fn decide(
        &self,
        from: &PodRef,
        to: &PodRef,
        protocol: Protocol,
        port: u16,
    ) -> Option<FlowDecision> {
        let cluster = &self.scenario.cluster;
        let (src, dst) = cluster
            .flow_identities(&Endpoint::Pod(from.clone()), &Endpoint::Pod(to.clone()))
            .ok()?;
        Some(decide_flow(
            self.oracle,
            cluster.store(),
            src,
            dst,
            protocol,
            port,
        ))
    }

    fn pods(&self) -> BTreeSet<PodRef> {
        self.scenario
            .cluster
            .addressed_pods()
            .map(|(pod, _)| pod.clone())
            .collect()
    }
}

/// `diff --output json`.
#[derive(Debug, Serialize)]
pub struct DiffJson {
    /// The protocol/port pairs probed, e.g. `TCP/80`.
    pub probes: Vec<String>,
    /// How many pods both sides have (flows between them are compared).
    pub pods_compared: usize,
    /// Pods only BEFORE has, and only AFTER has (`namespace/pod`): their flows are not compared.
    pub pods_only_before: Vec<String>,
    pub pods_only_after: Vec<String>,
    /// Every flow whose verdict changes, by protocol, port, source and destination.
    pub changes: Vec<ChangeJson>,
}

/// One flow whose verdict changes.
#[derive(Debug, Serialize)]
pub struct ChangeJson {
    pub from: String,
    pub to: String,
    pub protocol: String,
    pub port: u16,
    pub before: DecisionJson,
    pub after: DecisionJson,
}

/// Decides every flow between pods both sides have, on every probe port, and keeps those whose
/// verdict differs.
pub fn compare(sides: &[Side; 2], probes: ProbeArgs) -> DiffJson {
    let [before, after] = sides;
    let probes = probes.ports(&[&before.scenario.cluster, &after.scenario.cluster]);
    let (before_pods, after_pods) = (before.pods(), after.pods());
    let common: Vec<&PodRef> = before_pods.intersection(&after_pods).collect();
    let names = |pods: std::collections::btree_set::Difference<PodRef>| {
        pods.map(ToString::to_string).collect::<Vec<_>>()
    };
    let mut changes = Vec::new();
    for &(protocol, port) in &probes {
        for from in &common {
            for to in common.iter().filter(|to| *to != from) {
                let (Some(was), Some(now)) = (
                    before.decide(from, to, protocol, port),
                    after.decide(from, to, protocol, port),
                ) else {
                    continue;
                };
                if was.allowed() != now.allowed() {
                    changes.push(ChangeJson {
                        from: from.to_string(),
                        to: to.to_string(),
                        protocol: protocol.to_string(),
                        port,
                        before: (&was).into(),
                        after: (&now).into(),
                    });
                }
            }
        }
    }
    DiffJson {
        probes: probes.iter().map(|(p, n)| format!("{p}/{n}")).collect(),
        pods_compared: common.len(),
        pods_only_before: names(before_pods.difference(&after_pods)),
        pods_only_after: names(after_pods.difference(&before_pods)),
        changes,
    }
}

fn write_text(out: &mut dyn Write, report: &DiffJson) -> io::Result<()> {
    for change in &report.changes {
        writeln!(
            out,
            "{} -> {} {}/{}: {} -> {}",
            change.from,
            change.to,
            change.protocol,
            change.port,
            change.before.verdict,
            change.after.verdict
        )?;
        writeln!(out, "  before: {}", change.before.deciding_rule)?;
        writeln!(out, "  after:  {}", change.after.deciding_rule)?;
    }
    for (pods, side) in [
        (&report.pods_only_before, "BEFORE"),
        (&report.pods_only_after, "AFTER"),
    ] {
        if !pods.is_empty() {
            writeln!(out, "only in {side} (not compared): {}", pods.join(", "))?;
        }
    }
    let newly_denied = report
        .changes
        .iter()
        .filter(|c| c.after.verdict == describe::verdict_word(false))
        .count();
    writeln!(
        out,
        "{} flows change ({newly_denied} newly denied, {} newly allowed) between {} pods on {}",
        report.changes.len(),
        report.changes.len() - newly_denied,
        report.pods_compared,
        report.probes.join(", ")
    )
}
