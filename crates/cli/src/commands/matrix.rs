//! `netpol matrix FILE | -f PATH...`: the computed connectivity between every pair of pods, for
//! one protocol and port or every port the policies mention. Printed as `expect` items of the
//! scenario format (text), as JSON, or as a self-contained HTML page.

use std::io::{self, Write};
use std::path::PathBuf;

use serde::Serialize;

use crate::decide::matrix::{compute, Matrix};
use crate::decide::{decider, EngineArgs};
use crate::input::{self, ManifestArgs};
use crate::outcome::Outcome;
use crate::output::grid::render;
use crate::output::html;
use crate::output::report::{write_json, FlowJson};
use crate::probes::ProbeArgs;

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
    use netpol_engine::flow::FlowDecision;
    use netpol_engine::reference::{Decision, Reason};
    use netpol_engine::{Protocol, Verdict};

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
