//! `netpol matrix FILE | -f PATH...`: the computed connectivity between every pair of pods, for
//! one protocol and port or every port the policies mention. Printed as `expect` items of the
//! scenario format (text), as JSON, or as a self-contained HTML page.

use std::io::{self, Write};
use std::path::PathBuf;

use netpol_engine::flow::{decide_flow, DirectionOracle, FlowDecision};
use netpol_engine::Protocol;
use serde::Serialize;

use super::engine::EngineArgs;
use super::input::{self, ManifestArgs};
use super::probes::ProbeArgs;
use super::report::{write_json, FlowJson};
use super::{decider, html, Outcome};
use crate::scenario::{Cluster, Endpoint};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A scenario file, or a manifest file or folder (or name manifests with `-f`).
    #[arg(required_unless_present = "filenames", conflicts_with = "filenames")]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub manifests: ManifestArgs,
    #[command(flatten)]
    pub probes: ProbeArgs,
    /// `text` (scenario `expect` items), `json` or `html` (one self-contained page).
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: Format,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Text,
    Json,
    Html,
}

pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    let Some(input) = args.manifests.input(args.file.as_deref()) else {
        writeln!(err, "error: name a scenario file or manifests with -f")?;
        return Ok(Outcome::Invalid);
    };
    let Some(scenario) = input::load(&input, err)? else {
        return Ok(Outcome::Invalid);
    };
    let Some(oracle) = decider(args.engine, &scenario, err)? else {
        return Ok(Outcome::Invalid);
    };
    let cluster = &scenario.cluster;
    let matrices: Vec<Matrix> = args
        .probes
        .ports(&[cluster])
        .into_iter()
        .map(|(protocol, port)| compute(cluster, oracle.as_ref(), protocol, port))
        .collect();
    match args.output {
        Format::Text => {
            for matrix in &matrices {
                writeln!(out, "- protocol: {}", matrix.protocol)?;
                writeln!(out, "  port: {}", matrix.port)?;
                writeln!(out, "  matrix: |")?;
                for line in render(&matrix.pods, &matrix.symbols()) {
                    writeln!(out, "    {line}")?;
                }
            }
        }
        Format::Json => write_json(out, &MatricesJson::new(&matrices))?,
        Format::Html => {
            let title = format!("netpol matrix: {}", scenario.name);
            out.write_all(html::page(&title, &html::PageData::new(&matrices)).as_bytes())?;
        }
    }
    Ok(Outcome::Success)
}

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

/// A matrix as scenario text: a header row of destinations, then one row per source with one
/// symbol (`.`, `X`, `-`) per destination, every column as wide as the longest pod name so that
/// the cells line up.
pub fn render(pods: &[String], symbols: &[Vec<char>]) -> Vec<String> {
    let width = pods.iter().map(String::len).max().unwrap_or(1);
    let row = |first: &str, rest: Vec<String>| {
        let mut cells = vec![format!("{first:<width$}")];
        cells.extend(rest.iter().map(|c| format!("{c:<width$}")));
        cells.join("  ").trim_end().to_owned()
    };
    let mut lines = vec![row("-", pods.to_vec())];
    for (pod, cells) in pods.iter().zip(symbols) {
        lines.push(row(pod, cells.iter().map(char::to_string).collect()));
    }
    lines
}

/// `matrix --output json`: one item per protocol and port.
#[derive(Debug, Serialize)]
pub struct MatricesJson {
    pub matrices: Vec<MatrixJson>,
}

/// One protocol and port: the pods in row and column order, and every defined flow between them
/// (row by row; a pod to itself and pods without a common address family are left out).
#[derive(Debug, Serialize)]
pub struct MatrixJson {
    pub protocol: String,
    pub port: u16,
    /// `namespace/pod`, by namespace then name.
    pub pods: Vec<String>,
    pub flows: Vec<FlowJson>,
}

impl MatricesJson {
    pub fn new(matrices: &[Matrix]) -> Self {
        let matrices = matrices
            .iter()
            .map(|m| MatrixJson {
                protocol: m.protocol.to_string(),
                port: m.port,
                pods: m.pods.clone(),
                flows: m
                    .defined_cells()
                    .map(|(from, to, d)| FlowJson::new(from, to, m.protocol, m.port, d))
                    .collect(),
            })
            .collect();
        MatricesJson { matrices }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netpol_engine::reference::{Decision, Reason};
    use netpol_engine::Verdict;

    fn decided(verdict: Verdict) -> Option<FlowDecision> {
        let side = Decision {
            verdict,
            auth: None,
            reason: Reason::Default,
        };
        Some(FlowDecision {
            egress: Some(side.clone()),
            ingress: Some(side),
        })
    }

    #[test]
    fn rendered_columns_line_up_under_the_longest_name() {
        let matrix = Matrix {
            protocol: Protocol::Tcp,
            port: 80,
            pods: vec!["x/a".into(), "web/frontend".into()],
            cells: vec![
                vec![None, decided(Verdict::Deny)],
                vec![decided(Verdict::Allow), None],
            ],
        };
        assert_eq!(
            render(&matrix.pods, &matrix.symbols()),
            [
                "-             x/a           web/frontend",
                "x/a           -             X",
                "web/frontend  .             -",
            ]
        );
        let json = MatricesJson::new(std::slice::from_ref(&matrix));
        let flows: Vec<(&str, &str, &str)> = json.matrices[0]
            .flows
            .iter()
            .map(|f| (f.from.as_str(), f.to.as_str(), f.decision.verdict))
            .collect();
        assert_eq!(
            flows,
            [
                ("x/a", "web/frontend", "deny"),
                ("web/frontend", "x/a", "allow")
            ]
        );
    }
}
