//! `netpol matrix FILE | -f PATH...`: the computed connectivity between every pair of pods, and
//! between pods and the nodes and the regions outside the cluster that policies tell apart, for
//! one protocol and port or every port the policies mention.
//!
//! Text output is for reading: one numbered grid per probe, pods of one workload collapsed into
//! one row (`--per-pod` keeps a row per pod). `--output scenario` prints the pods' matrices as
//! `expect` items to paste into a scenario; `json` and `html` are for tools and browsers.

use std::io::{self, Write};
use std::path::PathBuf;

use serde::Serialize;

use std::rc::Rc;

use crate::decide::audit::{Audit, FromTo, WOULD_DENY};
use crate::decide::class_matrix::{
    compute_every, deciding_pods, node_parties, outside_parties, pod_classes, pod_parties, Matrix,
    Party, Prepared,
};
use crate::decide::what_if::WhatIf;
use crate::decide::workload_rows::{group, Group, Grouped};
use crate::decide::{decider_over, is_mapstate, EngineArgs};
use crate::input::{self, ManifestArgs};
use crate::loader::{add_stand_ins, ClusterModel};
use crate::outcome::Outcome;
use crate::output::cells::Cells;
use crate::output::html;
use crate::output::matrix_text::{render_numbered_rows, render_rows};
use crate::output::report::FlowJson;
use crate::probe_ports::{port_names, probe_labels, PortPlan, ProbeArgs};
use netpol_engine::flow::DirectionOracle;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A scenario file, or a manifest file or folder (or name manifests with `-f`); with
    /// `--cluster`, manifests applied to the live cluster.
    #[arg(
        required_unless_present_any = ["filenames", "cluster"],
        conflicts_with = "filenames"
    )]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub manifests: ManifestArgs,
    #[command(flatten)]
    pub probes: ProbeArgs,
    /// `text` (numbered grids, grouped by workload), `scenario` (the pods' matrices as scenario
    /// `expect` items), `json` or `html` (one self-contained page).
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: Format,
    /// One row per pod instead of one per workload (text, JSON and HTML).
    #[arg(long)]
    pub per_pod: bool,
    /// `-o json`: also list every defined flow between two groups whole, as `flows` and
    /// `other_flows` (the form before `rows`; about a kilobyte per pair of groups).
    #[arg(long)]
    pub flows: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Text,
    Scenario,
    Json,
    Html,
}

pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    let Some(input) = args.manifests.input(args.file.as_deref()) else {
        writeln!(err, "error: name a scenario file or manifests with -f")?;
        return Ok(Outcome::Invalid);
    };
    let flags = args.manifests.read.flags();
    let Some(mut scenario) = input::load(&input, flags.clone(), err)? else {
        return Ok(Outcome::Invalid);
    };
    if args.output != Format::Scenario {
        // `-o scenario` writes expectations to paste into a scenario, which has no stand-ins.
        add_stand_ins(&mut [&mut scenario.cluster], &flags.placement);
    }
    let cluster = &scenario.cluster;
    if scenario.inventory.pods == 0 {
        writeln!(
            err,
            "error: {}: no pods with an address, so no flow to decide",
            scenario.file.display()
        )?;
        return Ok(Outcome::Invalid);
    }
    let mut parties = pod_parties(cluster);
    let classes = Rc::new(pod_classes(cluster, &parties));
    // The MapState engine decides with what-if maps, resolving no endpoint (as `diff` does:
    // at 10,000 pods half the time and memory of resolving two pods per class); the other
    // deciders resolve the pods the matrix asks about.
    let deciding = (!is_mapstate(args.engine)).then(|| deciding_pods(cluster, &parties, &classes));
    let Some(oracle) = matrix_oracle(args, &scenario, cluster, deciding.as_ref(), err)? else {
        return Ok(Outcome::Invalid);
    };
    if args.output != Format::Scenario {
        parties.extend(node_parties(cluster));
        parties.extend(outside_parties(&[cluster]));
    }
    let probes = args.probes.ports(&[cluster]);
    let mut prepared = Prepared::new(cluster, &parties, &classes);
    let mut all: Vec<Matrix> = probes
        .iter()
        .map(|&(protocol, port)| compute_every(&mut prepared, oracle.as_ref(), protocol, port))
        .collect();
    drop(prepared);
    // Policies in audit mode: the same matrices in the would-be view, to mark what they would
    // deny of what is allowed.
    let would_be_cluster = cluster.would_be();
    if let Some(would_be_cluster) = &would_be_cluster {
        {
            let Some(oracle) =
                matrix_oracle(args, &scenario, would_be_cluster, deciding.as_ref(), err)?
            else {
                return Ok(Outcome::Invalid);
            };
            let mut prepared = Prepared::new(would_be_cluster, &parties, &classes);
            for &(protocol, port) in &probes {
                all.push(compute_every(
                    &mut prepared,
                    oracle.as_ref(),
                    protocol,
                    port,
                ));
            }
        }
    }
    // The scenario's matrices, then the would-be ones (as many, or none).
    let (matrices, would_be) = all.split_at(probes.len());
    let audit = Audit::new(would_be);
    let groups = if args.per_pod {
        per_pod(cluster, &parties)
    } else {
        // Groups decide alike in both views, so that a group's marks hold for every member.
        group(cluster, &parties, &all)
    };
    let mut out = io::BufWriter::with_capacity(1 << 16, out);
    match args.output {
        Format::Text => write_text(&mut out, cluster, &groups, matrices, &audit)?,
        Format::Scenario => write_scenario(&mut out, cluster, &parties, matrices, &audit)?,
        Format::Json => {
            let flows = args.flows;
            let json = JsonParts {
                parties: &parties,
                groups: &groups,
                matrices,
                audit: &audit,
            };
            write_matrices_json(&mut out, cluster, &json, flows)?
        }
        Format::Html => {
            let title = format!("netpol matrix: {}", scenario.name);
            let data = html::PageData::new(&parties, &groups, matrices, &audit);
            out.write_all(html::page(&title, &data).as_bytes())?;
        }
    }
    out.flush()?;
    Ok(Outcome::Success)
}

/// The decider of a matrix over `cluster` (the scenario's, or its would-be view): the MapState
/// engine decides with what-if maps, resolving no endpoint (as `diff` does: at 10,000 pods half
/// the time and memory of resolving two pods per class); the other deciders resolve the pods
/// the matrix asks about (`deciding`).
fn matrix_oracle<'a>(
    args: &Args,
    scenario: &crate::loader::Scenario,
    cluster: &'a ClusterModel,
    deciding: Option<&std::collections::BTreeSet<String>>,
    err: &mut dyn Write,
) -> io::Result<Option<Box<dyn DirectionOracle + 'a>>> {
    if is_mapstate(args.engine) {
        return Ok(Some(Box::new(WhatIf::new(cluster))));
    }
    decider_over(args.engine, scenario, cluster, deciding, err)
}

/// Every party its own group, pods labelled by name.
fn per_pod(cluster: &ClusterModel, parties: &[Party]) -> Vec<Group> {
    group(cluster, parties, &[])
        .into_iter()
        .flat_map(|g| {
            let (derived, stand_in) = (g.derived, g.stand_in);
            g.members.into_iter().map(move |m| Group {
                label: parties[m].to_string(),
                members: vec![m],
                derived,
                stand_in,
            })
        })
        .collect()
}

/// The numbered grids, one row per group, and a legend.
fn write_text(
    out: &mut dyn Write,
    cluster: &ClusterModel,
    groups: &[Group],
    matrices: &[Matrix],
    audit: &Audit<'_>,
) -> io::Result<()> {
    let labels: Vec<String> = groups
        .iter()
        .map(|g| match (g.derived, g.stand_in) {
            (true, _) => format!("{} *", g.label),
            (_, true) => format!("{} ~", g.label),
            _ => g.label.clone(),
        })
        .collect();
    let probes: Vec<_> = matrices.iter().map(|m| (m.protocol, m.port)).collect();
    let probe_labels = probe_labels(&[cluster], &probes);
    for (index, (matrix, probe_label)) in matrices.iter().zip(probe_labels).enumerate() {
        let cells = audit.cells(groups, index, matrix);
        let (pods, pods_allowed) = matrix.pod_counts();
        let (others, others_allowed) = matrix.other_counts();
        writeln!(
            out,
            "{}: {} of {} flows allowed",
            probe_label,
            pods_allowed + others_allowed,
            pods + others
        )?;
        render_numbered_rows(out, &labels, "  ", |row| cells.symbol_row(row))?;
        writeln!(out)?;
    }
    writeln!(
        out,
        ". allowed (a pod to itself always: it is not subject to policy), X denied, - no flow \
         (a node or outside address to itself; between nodes and outside addresses; a pod and its \
         own node)"
    )?;
    if !audit.is_empty() {
        writeln!(
            out,
            "{WOULD_DENY} allowed, and a policy in audit mode (netpol.io/enforcement: audit) would \
             deny it"
        )?;
    }
    if groups.iter().any(|g| g.derived) {
        writeln!(
            out,
            "* the pod of a workload's template, its address and node assigned (--pod-cidr, \
             --assign-nodes)"
        )?;
    }
    if groups.iter().any(|g| g.stand_in) {
        writeln!(
            out,
            "~ a stand-in for the pods a policy's peer can select that the input does not hold \
             (other pods of a namespace, pods of any other namespace, pods labelled as a \
             selector asks): placed as a workload's pod; its flows among the pods it stands for \
             are not shown"
        )?;
    }
    Ok(())
}

/// The pods' matrices as scenario `expect` items. A scenario expects the enforced verdict, so a
/// flow a policy in audit mode would deny is written allowed (`.`); a YAML comment above its
/// item names it as a would-deny, so that pasting the items keeps what the audit found.
fn write_scenario(
    out: &mut dyn Write,
    cluster: &ClusterModel,
    parties: &[Party],
    matrices: &[Matrix],
    audit: &Audit<'_>,
) -> io::Result<()> {
    let names: Vec<String> = parties.iter().map(ToString::to_string).collect();
    let pods = per_pod(cluster, parties);
    for (index, matrix) in matrices.iter().enumerate() {
        let would_deny = audit.cells(&pods, index, matrix).would_deny_flows();
        if let Some(flows) = would_deny.filter(|flows| !flows.is_empty()) {
            writeln!(
                out,
                "# allowed ('.'), and a policy in audit mode (netpol.io/enforcement: audit) \
                 would deny it:"
            )?;
            for flow in flows {
                writeln!(out, "#   would-deny: {} -> {}", flow.from, flow.to)?;
            }
        }
        writeln!(out, "- protocol: {}", matrix.protocol)?;
        writeln!(out, "  port: {}", matrix.port)?;
        writeln!(out, "  matrix: |")?;
        render_rows(out, &names, "    ", |row| matrix.symbol_row(row))?;
    }
    Ok(())
}

/// The version of `matrix --output json`, changed when a field changes meaning or shape.
pub const FORMAT: &str = "netpol.matrix/v1";

/// `matrix --output json`, written as it is made: the groups and other parties once, then per
/// protocol and port the flows between groups, one row at a time.
#[derive(Serialize)]
pub struct MatricesJson<'a> {
    /// [`FORMAT`].
    pub format: &'static str,
    /// The pods in rows: by workload (pods that decide alike), or one per pod with `--per-pod`.
    pub groups: Vec<GroupJson>,
    /// Nodes (`node NAME`) and regions outside the cluster (`0.0.0.0/0 except 10.0.0.0/8`).
    pub others: Vec<OtherJson>,
    pub matrices: Vec<MatrixJson<'a>>,
}

/// One protocol and port: every defined flow between groups, and between groups and nodes or
/// outside regions, as runs of destinations per source (`rows`, see [`Cells`]). A flow between
/// two groups holds for every pod of the one to every pod of the other (a pod to itself
/// excepted).
#[derive(Serialize)]
pub struct MatrixJson<'a> {
    pub protocol: String,
    pub port: u16,
    /// The names pods give this port.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub port_names: Vec<String>,
    /// What the probe stands for beyond its own port (`every other port`, `ports 11-19`, `every
    /// UDP and SCTP port`); absent for a port rules write.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stands_for: Option<String>,
    /// Flows between pods: how many are defined, how many allowed.
    pub pod_flows: u64,
    pub pod_flows_allowed: u64,
    /// `directions`, `decisions` and `rows`.
    #[serde(flatten)]
    pub cells: Cells<'a>,
    /// With `--flows`: between groups of pods, `from` and `to` naming groups by label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flows: Option<GroupFlows<'a>>,
    /// With `--flows`: between groups of pods and other parties.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other_flows: Option<GroupFlows<'a>>,
    /// Where a policy is in audit mode (`netpol.io/enforcement: audit`): the allowed flows
    /// between groups (and other parties) that the audited policies would deny.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub would_deny: Option<Vec<FromTo>>,
}

/// The flows of one matrix between groups, serialized one at a time.
pub struct GroupFlows<'a> {
    matrix: &'a Matrix,
    groups: &'a [Group],
    parties: &'a [Party],
    /// Flows between pods, or between pods and other parties.
    pods: bool,
}

impl std::fmt::Debug for GroupFlows<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GroupFlows")
    }
}

impl Serialize for GroupFlows<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let grouped = Grouped::new(self.groups, self.matrix);
        let is_pod = |g: &Group| self.parties[g.members[0]].is_pod();
        let n = self.groups.len();
        let flows = (0..n)
            .flat_map(|a| (0..n).map(move |b| (a, b)))
            .filter_map(|(a, b)| {
                let (from, to) = (&self.groups[a], &self.groups[b]);
                if (is_pod(from) && is_pod(to)) != self.pods {
                    return None;
                }
                let decision = grouped.cell(self.matrix, a, b)?;
                Some(FlowJson::new(
                    &from.label,
                    &to.label,
                    self.matrix.protocol,
                    self.matrix.port,
                    decision,
                ))
            });
        serializer.collect_seq(flows)
    }
}

/// A node or a region outside the cluster.
#[derive(Clone, Debug, Serialize)]
pub struct OtherJson {
    /// As `from` and `to` name it.
    pub name: String,
    /// `node` or `outside`.
    pub kind: &'static str,
    /// The address that stands for it.
    pub address: String,
}

/// Pods that decide alike: one row of the text output.
#[derive(Clone, Debug, Serialize)]
pub struct GroupJson {
    /// As `from` and `to` name it: `shop/web (3 pods)`, or the pod `shop/web-0`.
    pub label: String,
    pub pods: Vec<String>,
    /// Derived from a workload's template, addresses assigned.
    pub derived: bool,
    /// A stand-in for pods the input does not hold that a policy's peer can select.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stand_in: bool,
}

/// What `matrix --output json` writes from.
struct JsonParts<'a> {
    parties: &'a [Party],
    groups: &'a [Group],
    matrices: &'a [Matrix],
    audit: &'a Audit<'a>,
}

fn write_matrices_json(
    out: &mut dyn Write,
    cluster: &ClusterModel,
    parts: &JsonParts<'_>,
    flows: bool,
) -> io::Result<()> {
    let JsonParts {
        parties,
        groups,
        matrices,
        audit,
    } = *parts;
    let plan = PortPlan::new(&[cluster]);
    let value = MatricesJson {
        format: FORMAT,
        groups: groups
            .iter()
            .filter(|g| parties[g.members[0]].is_pod())
            .map(|g| GroupJson {
                label: g.label.clone(),
                pods: g.members.iter().map(|&m| parties[m].to_string()).collect(),
                derived: g.derived,
                stand_in: g.stand_in,
            })
            .collect(),
        others: parties
            .iter()
            .filter(|p| !p.is_pod())
            .map(|p| OtherJson {
                name: p.to_string(),
                kind: p.kind(),
                address: p.endpoint().to_string(),
            })
            .collect(),
        matrices: matrices
            .iter()
            .enumerate()
            .map(|(index, m)| {
                let (pod_flows, pod_flows_allowed) = m.pod_counts();
                MatrixJson {
                    protocol: m.protocol.to_string(),
                    port: m.port,
                    port_names: port_names(&[cluster], m.protocol, m.port),
                    stands_for: plan.stands_for(m.protocol, m.port).describe(),
                    pod_flows,
                    pod_flows_allowed,
                    cells: Cells::new(m, groups),
                    flows: flows.then_some(GroupFlows {
                        matrix: m,
                        groups,
                        parties,
                        pods: true,
                    }),
                    other_flows: flows.then_some(GroupFlows {
                        matrix: m,
                        groups,
                        parties,
                        pods: false,
                    }),
                    would_deny: audit.cells(groups, index, m).would_deny_flows(),
                }
            })
            .collect(),
    };
    // Compact: a row's runs are many small arrays.
    serde_json::to_writer(&mut *out, &value)?;
    writeln!(out)
}
