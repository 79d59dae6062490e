//! `netpol check PATH...`: evaluates every expectation of every scenario under the paths.
//!
//! Text output prints one line per mismatch (the flow, what was expected, what was decided, and
//! the rule that decided it), warnings and load errors on stderr, and finally exactly
//! `checked N scenarios, M flows: K mismatches`. `--output json` and `--output junit` print
//! every expectation, passed or not, for CI systems (see [`crate::output::junit`]).
//!
//! With `--datapath nftables` flows are decided by real packets (see [`crate::decide::packets`]). Flows
//! no packet can decide here (SCTP, ...) are listed one per line, `not probed: ...`, and counted on
//! a line of their own before the summary; the summary's M counts decided flows only. A probe
//! that fails (an error, not a verdict) is listed the same way and makes the exit status 2.
//!
//! Policies in audit mode (`netpol.io/enforcement: audit`) decide nothing: expectations are of
//! the enforced verdict. Each allowed flow they would deny is listed, `would-deny: ...` with the
//! rule, and counted on a line of its own before the summary (JSON: the expectation's
//! `would_deny`; JUnit: the test case's `<system-out>`), so that an audited flow never reads as
//! plainly allowed. The engine and simulated datapaths decide the would-be view (every policy
//! enforced); on nftables the table carries audit chains, as the agent's does (see
//! [`crate::decide::packets`]).

use std::collections::hash_map::{Entry, HashMap};
use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use netpol_engine::flow::{decide_flow, DirectionOracle};
use serde::Serialize;

use crate::checked::{flow_name, mismatch_line, passed, Checked, Fate, Report};
use crate::decide::packets::{self, ProbeSettings};
use crate::decide::{decider, decider_over, DatapathKind, EngineArgs};
use crate::input::load_scenario;
use crate::loader::{scenario_files, ClusterModel, ExpectedFlow, ReadFlags, Scenario};
use crate::outcome::Outcome;
use crate::output::report::{write_json, DecisionJson};
use crate::output::{describe, junit};

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
    /// With `--datapath nftables`: how long a probe waits for an answer before it counts the
    /// flow as dropped, in milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub probe_timeout: u64,
    /// With `--datapath nftables`: how many probes run at once.
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub probe_parallel: usize,
    /// Load a policy with a field its kind does not have (misspelt or misplaced), warning,
    /// instead of refusing the scenario as `kubectl apply` would refuse the policy.
    #[arg(long)]
    pub lenient: bool,
    #[command(flatten)]
    pub placement: crate::input::PlacementArgs,
    /// The ClusterNetworkPolicy CRD channel of network-policy-api v0.2.0 the scenarios are
    /// written for: `standard` refuses the experimental fields (`nodes`, `domainNames`);
    /// `experimental` (the default) accepts `nodes` and applies its named-port rule.
    #[arg(long, value_name = "CHANNEL", default_value_t = netpol_api::CrdChannel::default())]
    pub crd_channel: netpol_api::CrdChannel,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Text,
    Json,
    Junit,
}

pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    let files = match scenario_files(&args.paths) {
        Ok(files) => files,
        Err(e) => {
            writeln!(err, "error: {e}")?;
            return Ok(Outcome::Invalid);
        }
    };
    if files.is_empty() {
        let paths: Vec<String> = args.paths.iter().map(|p| p.display().to_string()).collect();
        writeln!(
            err,
            "error: no scenario files (.yaml, .yml) under {}: nothing to check",
            paths.join(", ")
        )?;
        return Ok(Outcome::Invalid);
    }
    let report = evaluate(args, files, err)?;
    let mismatches = report.mismatches().count();
    let probe_failures = report.probe_failures();
    match args.output {
        Format::Text => {
            for (scenario, expectation, decision) in report.mismatches() {
                writeln!(out, "{}", mismatch_line(scenario, expectation, decision))?;
            }
            let would_deny = report.would_denies().count();
            for (scenario, e, why) in report.would_denies() {
                writeln!(
                    out,
                    "would-deny: {}: allowed; {why}",
                    flow_name(scenario, e)
                )?;
            }
            if would_deny > 0 {
                writeln!(
                    out,
                    "audit: {would_deny} allowed flows a policy in audit mode \
                     (netpol.io/enforcement: audit) would deny"
                )?;
            }
            let not_probed = report.not_probed().count();
            for (scenario, e, why) in report.not_probed() {
                writeln!(out, "not probed: {}: {why}", flow_name(scenario, e))?;
            }
            if not_probed > 0 {
                writeln!(
                    out,
                    "not probed: {not_probed} flows ({} cannot be probed here, {probe_failures} probes failed)",
                    not_probed - probe_failures
                )?;
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
    Ok(if !report.invalid.is_empty() || probe_failures > 0 {
        Outcome::Invalid
    } else if mismatches > 0 {
        Outcome::Mismatch
    } else {
        Outcome::Success
    })
}

/// Loads and decides every scenario, reporting load errors and warnings on `err` as they come.
fn evaluate(args: &Args, files: Vec<PathBuf>, err: &mut dyn Write) -> io::Result<Report> {
    let mut report = Report::default();
    // Scenario names are unique, so that a report can name a scenario unambiguously.
    let mut names: HashMap<String, PathBuf> = HashMap::new();
    for file in files {
        // Load errors go to stderr and into the report, where JSON and JUnit show them.
        let mut errors = Vec::new();
        let flags = ReadFlags {
            lenient: args.lenient,
            strict_kinds: true,
            placement: args.placement.placement(),
            channel: args.crd_channel,
        };
        let loaded = load_scenario(&file, flags, &mut errors)?;
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
        if scenario.flows.is_empty() {
            // A scenario that expects nothing passes whatever its policies do: in CI that
            // would read as "checked".
            let message = format!(
                "{}: expect: the scenario expects no flow, so it tests nothing",
                file.display()
            );
            writeln!(err, "error: {message}")?;
            report.invalid.push((file, vec![message]));
            continue;
        }
        let mut errors = Vec::new();
        let Some(fates) = fates(args, &scenario, &mut errors)? else {
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
            .map(|flow| flow.expectation.clone())
            .zip(fates)
            .collect();
        report.scenarios.push(Checked {
            file,
            name: scenario.name.clone(),
            flows,
        });
    }
    Ok(report)
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
        return match packets::decide(scenario, settings) {
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
    let Some(oracle) = decider(args.engine, scenario, None, err)? else {
        return Ok(None);
    };
    // Policies in audit mode decide nothing; what they would deny is what the same decider
    // denies with them enforced (the would-be view, on the same identities).
    let would_be_cluster = scenario.cluster.would_be();
    let would_be = match &would_be_cluster {
        None => None,
        Some(cluster) => match decider_over(args.engine, scenario, cluster, None, err)? {
            Some(oracle) => Some((cluster, oracle)),
            None => return Ok(None),
        },
    };
    let would_be = would_be.as_ref().map(|(c, o)| (*c, o.as_ref()));
    Ok(Some(
        scenario
            .flows
            .iter()
            .map(|flow| engine_fate(scenario, oracle.as_ref(), would_be, flow))
            .collect(),
    ))
}

/// A flow as the engine or a simulated datapath decides it, and, where allowed, as it decides
/// the would-be view `would_be` (if any): a denial there is the flow's would-deny.
fn engine_fate(
    scenario: &Scenario,
    oracle: &dyn DirectionOracle,
    would_be: Option<(&ClusterModel, &dyn DirectionOracle)>,
    flow: &ExpectedFlow,
) -> Fate {
    let e = &flow.expectation;
    let decide = |oracle, cluster: &ClusterModel| {
        decide_flow(
            oracle,
            cluster.store(),
            flow.src,
            flow.dst,
            e.protocol,
            e.port,
        )
    };
    let decision = decide(oracle, &scenario.cluster);
    let mut json: DecisionJson = (&decision).into();
    if let Some((cluster, oracle)) = would_be.filter(|_| decision.allowed()) {
        let would_be = decide(oracle, cluster);
        if !would_be.allowed() {
            json.would_deny = Some(describe::would_deny_flow(would_be.as_ref()));
        }
    }
    Fate::Decided(Box::new(json))
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
    /// False for a flow no packet decided.
    pub passed: bool,
    /// Absent for a flow no packet decided.
    #[serde(flatten)]
    pub decided: Option<DecisionJson>,
    /// `--datapath nftables` only: why no packet decided this flow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_probed: Option<String>,
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
    /// Flows no packet decided (`--datapath nftables`), failed probes included.
    pub not_probed: usize,
    pub probe_failures: usize,
    /// Allowed flows a policy in audit mode would deny (each expectation's `would_deny`).
    pub would_deny: usize,
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
                            decided: match d {
                                Fate::Decided(d) => Some((**d).clone()),
                                _ => None,
                            },
                            not_probed: d.not_probed_reason(),
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
                not_probed: report.not_probed().count(),
                probe_failures: report.probe_failures(),
                would_deny: report.would_denies().count(),
            },
        }
    }
}
