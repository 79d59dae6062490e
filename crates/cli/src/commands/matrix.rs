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

use crate::decide::groups::{collapse, group, Group};
use crate::decide::matrix::{
    compute_between, node_parties, outside_parties, pod_parties, Matrix, Party,
};
use crate::decide::{decider, EngineArgs};
use crate::input::{self, ManifestArgs};
use crate::outcome::Outcome;
use crate::output::grid::{render, render_numbered};
use crate::output::html;
use crate::output::report::{write_json, FlowJson};
use crate::probes::{port_names, probe_label, ProbeArgs};
use crate::scenario::{Cluster, ASSIGNED_POD_CIDR};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A scenario file, or a manifest file or folder (or name manifests with `-f`).
    #[arg(required_unless_present = "filenames", conflicts_with = "filenames")]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub manifests: ManifestArgs,
    #[command(flatten)]
    pub probes: ProbeArgs,
    /// `text` (numbered grids, grouped by workload), `scenario` (the pods' matrices as scenario
    /// `expect` items), `json` or `html` (one self-contained page).
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: Format,
    /// In the text grids, one row per pod instead of one per workload.
    #[arg(long)]
    pub per_pod: bool,
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
    let Some(scenario) = input::load(&input, args.manifests.read.flags(), err)? else {
        return Ok(Outcome::Invalid);
    };
    let cluster = &scenario.cluster;
    if scenario.inventory.pods == 0 {
        writeln!(
            err,
            "error: {}: no pods with an address, so no flow to decide",
            scenario.file.display()
        )?;
        return Ok(Outcome::Invalid);
    }
    let Some(oracle) = decider(args.engine, &scenario, err)? else {
        return Ok(Outcome::Invalid);
    };
    let mut parties = pod_parties(cluster);
    if args.output != Format::Scenario {
        parties.extend(node_parties(cluster));
        parties.extend(outside_parties(&[cluster]));
    }
    let matrices: Vec<Matrix> = args
        .probes
        .ports(&[cluster])
        .into_iter()
        .map(|(protocol, port)| compute_between(cluster, oracle.as_ref(), &parties, protocol, port))
        .collect();
    let pods_only: Vec<usize> = (0..parties.len())
        .filter(|&i| parties[i].is_pod())
        .collect();
    match args.output {
        Format::Text => write_text(out, cluster, &parties, &matrices, args.per_pod)?,
        Format::Scenario => {
            for matrix in &matrices {
                writeln!(out, "- protocol: {}", matrix.protocol)?;
                writeln!(out, "  port: {}", matrix.port)?;
                writeln!(out, "  matrix: |")?;
                for line in render(&matrix.pods, &matrix.symbols()) {
                    writeln!(out, "    {line}")?;
                }
            }
        }
        Format::Json => write_json(out, &MatricesJson::new(cluster, &parties, &matrices))?,
        Format::Html => {
            let title = format!("netpol matrix: {}", scenario.name);
            let pods: Vec<Matrix> = matrices.iter().map(|m| restrict(m, &pods_only)).collect();
            out.write_all(html::page(&title, &html::PageData::new(&pods)).as_bytes())?;
        }
    }
    Ok(Outcome::Success)
}

/// The numbered grids, grouped by workload unless `per_pod`, and a legend.
fn write_text(
    out: &mut dyn Write,
    cluster: &Cluster,
    parties: &[Party],
    matrices: &[Matrix],
    per_pod: bool,
) -> io::Result<()> {
    let symbols: Vec<Vec<Vec<char>>> = matrices.iter().map(Matrix::symbols).collect();
    let groups = if per_pod {
        group(cluster, parties, &[])
            .into_iter()
            .flat_map(|g| {
                let derived = g.derived;
                g.members.into_iter().map(move |m| Group {
                    label: parties[m].to_string(),
                    members: vec![m],
                    derived,
                })
            })
            .collect()
    } else {
        group(cluster, parties, &symbols)
    };
    let labels: Vec<String> = groups
        .iter()
        .map(|g| {
            if g.derived {
                format!("{} *", g.label)
            } else {
                g.label.clone()
            }
        })
        .collect();
    for (matrix, symbols) in matrices.iter().zip(&symbols) {
        let cells: Vec<char> = symbols
            .iter()
            .flatten()
            .copied()
            .filter(|&c| c != '-')
            .collect();
        let allowed = cells.iter().filter(|&&c| c == '.').count();
        writeln!(
            out,
            "{}: {allowed} of {} flows allowed",
            probe_label(&[cluster], matrix.protocol, matrix.port),
            cells.len()
        )?;
        for line in render_numbered(&labels, &collapse(&groups, symbols)) {
            writeln!(out, "  {line}")?;
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        ". allowed, X denied, - no flow (a party to itself; between nodes and outside addresses; \
         a pod and its own node)"
    )?;
    if groups.iter().any(|g| g.derived) {
        writeln!(
            out,
            "* the pod of a workload's template, its address assigned from {ASSIGNED_POD_CIDR}"
        )?;
    }
    Ok(())
}

/// The rows and columns `keep` of a matrix.
fn restrict(matrix: &Matrix, keep: &[usize]) -> Matrix {
    Matrix {
        protocol: matrix.protocol,
        port: matrix.port,
        pods: keep.iter().map(|&i| matrix.pods[i].clone()).collect(),
        cells: keep
            .iter()
            .map(|&i| keep.iter().map(|&j| matrix.cells[i][j].clone()).collect())
            .collect(),
    }
}

/// `matrix --output json`: one item per protocol and port.
#[derive(Debug, Serialize)]
pub struct MatricesJson {
    pub matrices: Vec<MatrixJson>,
}

/// One protocol and port: the pods in row and column order, every defined flow between them
/// (row by row; a pod to itself and pods without a common address family are left out), and
/// the flows between pods and nodes or regions outside the cluster.
#[derive(Debug, Serialize)]
pub struct MatrixJson {
    pub protocol: String,
    pub port: u16,
    /// The names pods give this port.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub port_names: Vec<String>,
    /// `namespace/pod`, by namespace then name.
    pub pods: Vec<String>,
    pub flows: Vec<FlowJson>,
    /// Nodes (`node NAME`) and regions outside the cluster (`0.0.0.0/0 except 10.0.0.0/8`).
    pub others: Vec<OtherJson>,
    /// Every defined flow between a pod and a node or an outside region.
    pub other_flows: Vec<FlowJson>,
    /// Pods that decide alike, by workload (as the text output groups them).
    pub groups: Vec<GroupJson>,
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

/// Pods collapsed into one row of the text output.
#[derive(Clone, Debug, Serialize)]
pub struct GroupJson {
    pub label: String,
    pub pods: Vec<String>,
    /// Derived from a workload's template, addresses assigned.
    pub derived: bool,
}

impl MatricesJson {
    pub fn new(cluster: &Cluster, parties: &[Party], matrices: &[Matrix]) -> Self {
        let symbols: Vec<Vec<Vec<char>>> = matrices.iter().map(Matrix::symbols).collect();
        let groups: Vec<GroupJson> = group(cluster, parties, &symbols)
            .into_iter()
            .filter(|g| parties[g.members[0]].is_pod())
            .map(|g| GroupJson {
                label: g.label,
                pods: g.members.iter().map(|&m| parties[m].to_string()).collect(),
                derived: g.derived,
            })
            .collect();
        let others: Vec<OtherJson> = parties
            .iter()
            .filter(|p| !p.is_pod())
            .map(|p| OtherJson {
                name: p.to_string(),
                kind: p.kind(),
                address: p.endpoint().to_string(),
            })
            .collect();
        let matrices = matrices
            .iter()
            .map(|m| {
                let (mut flows, mut other_flows) = (Vec::new(), Vec::new());
                for (i, row) in m.cells.iter().enumerate() {
                    for (j, cell) in row.iter().enumerate() {
                        let Some(decision) = cell else { continue };
                        let flow =
                            FlowJson::new(&m.pods[i], &m.pods[j], m.protocol, m.port, decision);
                        if parties[i].is_pod() && parties[j].is_pod() {
                            flows.push(flow);
                        } else {
                            other_flows.push(flow);
                        }
                    }
                }
                MatrixJson {
                    protocol: m.protocol.to_string(),
                    port: m.port,
                    port_names: port_names(&[cluster], m.protocol, m.port),
                    pods: parties
                        .iter()
                        .filter(|p| p.is_pod())
                        .map(ToString::to_string)
                        .collect(),
                    flows,
                    others: others.clone(),
                    other_flows,
                    groups: groups.clone(),
                }
            })
            .collect();
        MatricesJson { matrices }
    }
}
