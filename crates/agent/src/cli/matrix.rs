//! `netpol matrix FILE --protocol TCP --port 80`: the computed connectivity between every pair of
//! pods of a scenario, printed as an `expect` item of the scenario format.

use std::io::{self, Write};
use std::path::PathBuf;

use netpol_engine::flow::{decide_flow, DirectionOracle};
use netpol_engine::Protocol;

use super::engine::EngineArgs;
use super::{decider, load_scenario, Outcome};
use crate::scenario::{parse_protocol, Cluster, Endpoint};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The scenario file.
    pub file: PathBuf,
    /// TCP, UDP or SCTP.
    #[arg(long, default_value = "TCP", value_parser = parse_protocol)]
    pub protocol: Protocol,
    /// The destination port.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,
    #[command(flatten)]
    pub engine: EngineArgs,
}

pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    let Some(scenario) = load_scenario(&args.file, err)? else {
        return Ok(Outcome::Invalid);
    };
    let Some(oracle) = decider(args.engine, &scenario, err)? else {
        return Ok(Outcome::Invalid);
    };
    let matrix = compute(&scenario.cluster, oracle.as_ref(), args.protocol, args.port);
    writeln!(out, "- protocol: {}", args.protocol)?;
    writeln!(out, "  port: {}", args.port)?;
    writeln!(out, "  matrix: |")?;
    for line in render(&matrix) {
        writeln!(out, "    {line}")?;
    }
    Ok(Outcome::Success)
}

/// A computed matrix: pod names, and for each source row one cell per destination.
#[derive(Debug, PartialEq, Eq)]
pub struct Matrix {
    pub pods: Vec<String>,
    pub cells: Vec<Vec<char>>,
}

/// Decides the flow between every ordered pair of pods. A pod to itself, and pods without an
/// address family in common, are `-`.
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
                        return '-';
                    }
                    match cluster.flow_identities(from, to) {
                        Ok((src, dst)) => {
                            let decision =
                                decide_flow(oracle, cluster.store(), src, dst, protocol, port);
                            if decision.allowed() {
                                '.'
                            } else {
                                'X'
                            }
                        }
                        Err(_) => '-',
                    }
                })
                .collect()
        })
        .collect();
    Matrix {
        pods: pods.iter().map(ToString::to_string).collect(),
        cells,
    }
}

/// The matrix as scenario text: a header row of destinations, then one row per source, every
/// column as wide as the longest pod name so that the cells line up.
pub fn render(matrix: &Matrix) -> Vec<String> {
    let width = matrix.pods.iter().map(String::len).max().unwrap_or(1);
    let row = |first: &str, rest: Vec<String>| {
        let mut cells = vec![format!("{first:<width$}")];
        cells.extend(rest.iter().map(|c| format!("{c:<width$}")));
        cells.join("  ").trim_end().to_owned()
    };
    let mut lines = vec![row("-", matrix.pods.clone())];
    for (pod, cells) in matrix.pods.iter().zip(&matrix.cells) {
        lines.push(row(pod, cells.iter().map(char::to_string).collect()));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_columns_line_up_under_the_longest_name() {
        let matrix = Matrix {
            pods: vec!["x/a".into(), "web/frontend".into()],
            cells: vec![vec!['-', 'X'], vec!['.', '-']],
        };
        assert_eq!(
            render(&matrix),
            [
                "-             x/a           web/frontend",
                "x/a           -             X",
                "web/frontend  .             -",
            ]
        );
    }
}
