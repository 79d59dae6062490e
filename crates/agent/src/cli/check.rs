//! `netpol check PATH...`: evaluates every expectation of every scenario under the paths.
//!
//! Prints one line per mismatch (the flow, what was expected, what was decided, and the rule that
//! decided it), warnings and load errors on stderr, and finally exactly
//! `checked N scenarios, M flows: K mismatches`.

use std::collections::hash_map::{Entry, HashMap};
use std::io::{self, Write};
use std::path::PathBuf;

use netpol_engine::flow::{decide_flow, DirectionOracle};

use super::describe;
use super::engine::EngineArgs;
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
}

#[derive(Debug, Default)]
struct Tally {
    scenarios: usize,
    flows: usize,
    mismatches: usize,
    invalid: usize,
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
        let Some(oracle) = decider(args.engine, &scenario, err)? else {
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
        for flow in &scenario.flows {
            tally.flows += 1;
            if let Some(line) = mismatch(&scenario, oracle.as_ref(), flow) {
                tally.mismatches += 1;
                writeln!(out, "{line}")?;
            }
        }
    }
    writeln!(
        out,
        "checked {} scenarios, {} flows: {} mismatches",
        tally.scenarios, tally.flows, tally.mismatches
    )?;
    Ok(if tally.invalid > 0 {
        Outcome::Invalid
    } else if tally.mismatches > 0 {
        Outcome::Mismatch
    } else {
        Outcome::Success
    })
}

/// The report line for `flow` if the engine decides it otherwise than expected.
fn mismatch(
    scenario: &Scenario,
    oracle: &dyn DirectionOracle,
    flow: &ExpectedFlow,
) -> Option<String> {
    let e = &flow.expectation;
    let decision = decide_flow(
        oracle,
        scenario.cluster.store(),
        flow.src,
        flow.dst,
        e.protocol,
        e.port,
    );
    let allowed = decision.allowed();
    (allowed != e.expected.allowed()).then(|| {
        format!(
            "{}: {}: {} -> {} {}/{}: expected {}, decided {} ({})",
            scenario.file.display(),
            e.field,
            e.from,
            e.to,
            e.protocol,
            e.port,
            e.expected,
            describe::verdict_word(allowed),
            describe::deciding_rules(&decision),
        )
    })
}
