//! `netpol check PATH...`: evaluates every expectation of every scenario under the paths.
//!
//! Text output prints one line per mismatch (the flow, what was expected, what was decided, and
//! the rule that decided it), warnings and load errors on stderr, and finally exactly
//! `checked N scenarios, M flows: K mismatches`. `--output json` and `--output junit` print
//! every expectation, passed or not, for CI systems (see [`super::junit`]).

use std::collections::hash_map::{Entry, HashMap};
use std::io::{self, Write};
use std::path::PathBuf;

use netpol_engine::flow::{decide_flow, DirectionOracle, FlowDecision};
use serde::Serialize;

use super::describe;
use super::engine::EngineArgs;
use super::junit;
use super::report::{write_json, DecisionJson};
use super::{decider, load_scenario, Outcome};
use crate::scenario::{scenario_files, ExpectedFlow, FlowExpectation, Scenario};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scenario files, or folders searched recursively (skipping `topologies/` and files that
    /// are not YAML).
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// `text` (mismatches only), `json` or `junit` (every expectation).
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
    Junit,
}

/// Everything a run checked.
#[derive(Debug, Default)]
pub struct Report {
    pub scenarios: Vec<Checked>,
    /// Files that did not load, each with its error lines.
    pub invalid: Vec<(PathBuf, Vec<String>)>,
}

/// One scenario's expectations, each with what was decided.
#[derive(Debug)]
pub struct Checked {
    pub file: PathBuf,
    pub name: String,
    pub flows: Vec<(FlowExpectation, FlowDecision)>,
}

impl Report {
    pub fn flows(&self) -> usize {
        self.scenarios.iter().map(|s| s.flows.len()).sum()
    }

    pub fn mismatches(&self) -> impl Iterator<Item = (&Checked, &FlowExpectation, &FlowDecision)> {
        self.scenarios.iter().flat_map(|s| {
            s.flows
                .iter()
                .filter(|(e, d)| !passed(e, d))
                .map(move |(e, d)| (s, e, d))
        })
    }
}

/// Whether the engine decided a flow as expected.
pub fn passed(expectation: &FlowExpectation, decision: &FlowDecision) -> bool {
    decision.allowed() == expectation.expected.allowed()
}

pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    let files = match scenario_files(&args.paths) {
        Ok(files) => files,
        Err(e) => {
            writeln!(err, "error: {e}")?;
            return Ok(Outcome::Invalid);
        }
    };
    let report = evaluate(args.engine, files, err)?;
    let mismatches = report.mismatches().count();
    match args.output {
        Format::Text => {
            for (scenario, expectation, decision) in report.mismatches() {
                writeln!(out, "{}", mismatch_line(scenario, expectation, decision))?;
            }
            writeln!(
                out,
                "checked {} scenarios, {} flows: {mismatches} mismatches",
                report.scenarios.len(),
                report.flows(),
            )?;
        }
        Format::Json => write_json(out, &CheckJson::new(&report))?,
        Format::Junit => out.write_all(junit::document(&report).as_bytes())?,
    }
    Ok(if !report.invalid.is_empty() {
        Outcome::Invalid
    } else if mismatches > 0 {
        Outcome::Mismatch
    } else {
        Outcome::Success
    })
}

/// Loads and decides every scenario, reporting load errors and warnings on `err` as they come.
fn evaluate(engine: EngineArgs, files: Vec<PathBuf>, err: &mut dyn Write) -> io::Result<Report> {
    let mut report = Report::default();
    // Scenario names are unique, so that a report can name a scenario unambiguously.
    let mut names: HashMap<String, PathBuf> = HashMap::new();
    for file in files {
        // Load errors go to stderr and into the report, where JSON and JUnit show them.
        let mut errors = Vec::new();
        let loaded = load_scenario(&file, &mut errors)?;
        err.write_all(&errors)?;
        let error_lines = |errors: &[u8]| {
            String::from_utf8_lossy(errors)
                .lines()
                .filter_map(|l| l.strip_prefix("error: "))
                .map(String::from)
                .collect::<Vec<_>>()
        };
        let Some(scenario) = loaded else {
            report.invalid.push((file, error_lines(&errors)));
            continue;
        };
        let mut errors = Vec::new();
        let Some(oracle) = decider(engine, &scenario, &mut errors)? else {
            err.write_all(&errors)?;
            report.invalid.push((file, error_lines(&errors)));
            continue;
        };
        match names.entry(scenario.name.clone()) {
            Entry::Occupied(first) => writeln!(
                err,
                "warning: {}: scenario name `{}` is already used by {}",
                file.display(),
                scenario.name,
                first.get().display()
            )?,
            Entry::Vacant(slot) => {
                slot.insert(file.clone());
            }
        }
        let flows = scenario
            .flows
            .iter()
            .map(|flow| {
                (
                    flow.expectation.clone(),
                    decide(&scenario, oracle.as_ref(), flow),
                )
            })
            .collect();
        report.scenarios.push(Checked {
            file,
            name: scenario.name.clone(),
            flows,
        });
    }
    Ok(report)
}

fn decide(scenario: &Scenario, oracle: &dyn DirectionOracle, flow: &ExpectedFlow) -> FlowDecision {
    let e = &flow.expectation;
    decide_flow(
        oracle,
        scenario.cluster.store(),
        flow.src,
        flow.dst,
        e.protocol,
        e.port,
    )
}

/// The report line of a flow decided otherwise than expected.
pub fn mismatch_line(scenario: &Checked, e: &FlowExpectation, decision: &FlowDecision) -> String {
    format!(
        "{}: {}: {} -> {} {}/{}: expected {}, decided {} ({})",
        scenario.file.display(),
        e.field,
        e.from,
        e.to,
        e.protocol,
        e.port,
        e.expected,
        describe::verdict_word(decision.allowed()),
        describe::deciding_rules(decision),
    )
}

/// `check --output json`.
#[derive(Debug, Serialize)]
pub struct CheckJson {
    pub scenarios: Vec<ScenarioJson>,
    /// Files that did not load; nothing in them was checked.
    pub load_errors: Vec<LoadErrorJson>,
    pub summary: SummaryJson,
}

#[derive(Debug, Serialize)]
pub struct ScenarioJson {
    pub file: String,
    pub name: String,
    pub expectations: Vec<ExpectationJson>,
}

/// One expectation and what was decided; `verdict` and the fields after it are the decision.
#[derive(Debug, Serialize)]
pub struct ExpectationJson {
    /// Where the expectation is written, e.g. `expect[0].matrix` or `expect[1].flows[2]`.
    pub field: String,
    pub from: String,
    pub to: String,
    pub protocol: String,
    pub port: u16,
    /// `allow` or `deny`.
    pub expected: String,
    pub passed: bool,
    #[serde(flatten)]
    pub decided: DecisionJson,
}

#[derive(Debug, Serialize)]
pub struct LoadErrorJson {
    pub file: String,
    pub errors: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct SummaryJson {
    pub scenarios: usize,
    pub flows: usize,
    pub mismatches: usize,
    pub invalid_files: usize,
}

impl CheckJson {
    pub fn new(report: &Report) -> Self {
        CheckJson {
            scenarios: report
                .scenarios
                .iter()
                .map(|s| ScenarioJson {
                    file: s.file.display().to_string(),
                    name: s.name.clone(),
                    expectations: s
                        .flows
                        .iter()
                        .map(|(e, d)| ExpectationJson {
                            field: e.field.clone(),
                            from: e.from.to_string(),
                            to: e.to.to_string(),
                            protocol: e.protocol.to_string(),
                            port: e.port,
                            expected: e.expected.to_string(),
                            passed: passed(e, d),
                            decided: d.into(),
                        })
                        .collect(),
                })
                .collect(),
            load_errors: report
                .invalid
                .iter()
                .map(|(file, errors)| LoadErrorJson {
                    file: file.display().to_string(),
                    errors: errors.clone(),
                })
                .collect(),
            summary: SummaryJson {
                scenarios: report.scenarios.len(),
                flows: report.flows(),
                mismatches: report.mismatches().count(),
                invalid_files: report.invalid.len(),
            },
        }
    }
}
