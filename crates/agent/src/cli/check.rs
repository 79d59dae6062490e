//! `netpol check PATH...`: evaluates every expectation of every scenario under the paths.
//!
//! Prints one line per mismatch (the flow, what was expected, what was decided, and the rule that
//! decided it), warnings and load errors on stderr, and finally exactly
//! `checked N scenarios, M flows: K mismatches`.
//!
//! With `--datapath nftables` flows are decided by real packets (see [`super::nftables`]). Flows
//! no packet can decide here (SCTP, ...) are listed one per line, `not probed: ...`, and counted on
//! a line of their own before the summary; the summary's M counts decided flows only. A probe
//! that fails (an error, not a verdict) is listed the same way and makes the exit status 2.

use std::collections::hash_map::{Entry, HashMap};
use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use netpol_engine::flow::{decide_flow, DirectionOracle};

use super::describe;
use super::engine::{DatapathKind, EngineArgs};
use super::nftables::{self, Fate, ProbeSettings};
use super::{decider, load_scenario, Outcome};
use crate::scenario::{scenario_files, ExpectedFlow, Scenario};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scenario files, or folders searched recursively (skipping `topologies/` and files that
    /// are not YAML).
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// With `--datapath nftables`: how long a probe waits for an answer before it counts the
    /// flow as dropped, in milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub probe_timeout: u64,
    /// With `--datapath nftables`: how many probes run at once.
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub probe_parallel: usize,
}

#[derive(Debug, Default)]
struct Tally {
    scenarios: usize,
    flows: usize,
    mismatches: usize,
    invalid: usize,
    unprobed: usize,
    failed: usize,
}

pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    let files = match scenario_files(&args.paths) {
        Ok(files) => files,
        Err(e) => {
            writeln!(err, "error: {e}")?;
            return Ok(Outcome::Invalid);
        }
    };
    let mut tally = Tally::default();
    // Scenario names are unique, so that a report can name a scenario unambiguously.
    let mut names: HashMap<String, PathBuf> = HashMap::new();
    for file in files {
        let Some(scenario) = load_scenario(&file, err)? else {
            tally.invalid += 1;
            continue;
        };
        let Some(fates) = fates(args, &scenario, err)? else {
            tally.invalid += 1;
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
        tally.scenarios += 1;
        for (flow, fate) in scenario.flows.iter().zip(fates) {
            match fate {
                Fate::Decided {
                    allowed,
                    explanation,
                } => {
                    tally.flows += 1;
                    if allowed != flow.expectation.expected.allowed() {
                        tally.mismatches += 1;
                        writeln!(out, "{}", mismatch(&scenario, flow, allowed, &explanation))?;
                    }
                }
                Fate::Unprobed(why) => {
                    tally.unprobed += 1;
                    writeln!(out, "not probed: {}: {why}", flow_name(&scenario, flow))?;
                }
                Fate::Failed(why) => {
                    tally.failed += 1;
                    writeln!(
                        out,
                        "not probed: {}: probe failed: {why}",
                        flow_name(&scenario, flow)
                    )?;
                }
            }
        }
    }
    if tally.unprobed + tally.failed > 0 {
        writeln!(
            out,
            "not probed: {} flows ({} cannot be probed here, {} probes failed)",
            tally.unprobed + tally.failed,
            tally.unprobed,
            tally.failed
        )?;
    }
    writeln!(
        out,
        "checked {} scenarios, {} flows: {} mismatches",
        tally.scenarios, tally.flows, tally.mismatches
    )?;
    Ok(if tally.invalid + tally.failed > 0 {
        Outcome::Invalid
    } else if tally.mismatches > 0 {
        Outcome::Mismatch
    } else {
        Outcome::Success
    })
}

/// The fate of every flow of `scenario` under the decider the user chose, or None (reported on
/// `err`) if there is none.
fn fates(args: &Args, scenario: &Scenario, err: &mut dyn Write) -> io::Result<Option<Vec<Fate>>> {
    if args.engine.datapath == Some(DatapathKind::Nftables)
        && args.engine.engine == Default::default()
    {
        let settings = ProbeSettings {
            timeout: Duration::from_millis(args.probe_timeout),
            parallel: args.probe_parallel,
        };
        return match nftables::decide(scenario, settings) {
            Ok(fates) => Ok(Some(fates)),
            Err(e) => {
                writeln!(
                    err,
                    "error: {}: --datapath nftables: {e}",
                    scenario.file.display()
                )?;
                Ok(None)
            }
        };
    }
    let Some(oracle) = decider(args.engine, scenario, err)? else {
        return Ok(None);
    };
    Ok(Some(
        scenario
            .flows
            .iter()
            .map(|flow| engine_fate(scenario, oracle.as_ref(), flow))
            .collect(),
    ))
}

/// A flow as the engine or a simulated datapath decides it.
fn engine_fate(scenario: &Scenario, oracle: &dyn DirectionOracle, flow: &ExpectedFlow) -> Fate {
    let e = &flow.expectation;
    let decision = decide_flow(
        oracle,
        scenario.cluster.store(),
        flow.src,
        flow.dst,
        e.protocol,
        e.port,
    );
    Fate::Decided {
        allowed: decision.allowed(),
        explanation: describe::deciding_rules(&decision),
    }
}

/// `file: field: from -> to protocol/port`.
fn flow_name(scenario: &Scenario, flow: &ExpectedFlow) -> String {
    let e = &flow.expectation;
    format!(
        "{}: {}: {} -> {} {}/{}",
        scenario.file.display(),
        e.field,
        e.from,
        e.to,
        e.protocol,
        e.port
    )
}

/// The report line of a flow decided otherwise than expected.
fn mismatch(scenario: &Scenario, flow: &ExpectedFlow, allowed: bool, explanation: &str) -> String {
    format!(
        "{}: expected {}, decided {} ({explanation})",
        flow_name(scenario, flow),
        flow.expectation.expected,
        describe::verdict_word(allowed),
    )
}
