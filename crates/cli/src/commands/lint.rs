//! `netpol lint FILE` (or `netpol lint -f PATH...`): policy smells, each with its rule id,
//! severity, object, field, message and hint. Rules are switched off with `--disable RULE`,
//! findings acknowledged per object with the annotation `netpol.io/lint-ignore: RULE[,RULE]`,
//! and findings already accepted are left out with `--baseline FILE`. Exit 0 when no finding reaches `--fail-on`,
//! 1 when one does, 2 on bad input.

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::path::PathBuf;

use crate::input::{self, ManifestArgs};
use crate::lint::{acknowledged, report, rules, Finding, Severity, RULES};
use crate::outcome::Outcome;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LintOutput {
    #[default]
    Text,
    Json,
    /// SARIF 2.1.0, for code-scanning views in CI.
    Sarif,
}

/// The least severity that fails the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    Error,
    #[default]
    Warning,
    Note,
}

impl FailOn {
    fn fails(self, severity: Severity) -> bool {
        let least = match self {
            FailOn::Error => Severity::Error,
            FailOn::Warning => Severity::Warning,
            FailOn::Note => Severity::Note,
        };
        severity >= least
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A scenario file, or a manifest file or folder; leave it out when `-f` names the manifests.
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub manifests: ManifestArgs,
    /// `text`, `json` or `sarif`.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: LintOutput,
    /// Switch a rule off (its id, e.g. `open-to-world`); repeatable.
    #[arg(long, value_name = "RULE")]
    pub disable: Vec<String>,
    /// The least severity that makes the exit status 1: `error` (only bad input fails),
    /// `warning` or `note`.
    #[arg(long, value_enum, default_value_t)]
    pub fail_on: FailOn,
    /// Findings already accepted: a `lint -o json` document; a finding with the same rule,
    /// object and field is left out.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
}

pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    let sarif = args.output == LintOutput::Sarif;
    let mut failed = |out: &mut dyn Write, message: String| -> io::Result<Outcome> {
        writeln!(err, "error: {message}")?;
        if sarif {
            report::write_sarif_failure(out, &[message])?;
        }
        Ok(Outcome::Invalid)
    };
    if args.file.is_some() && !args.manifests.filenames.is_empty() {
        return failed(out, "give FILE or -f PATH, not both".into());
    }
    if let Some(unknown) = args
        .disable
        .iter()
        .find(|id| !RULES.iter().any(|(rule, _, _)| rule == id))
    {
        let known: Vec<&str> = RULES.iter().map(|(id, _, _)| *id).collect();
        return failed(
            out,
            format!(
                "--disable {unknown}: no such rule (rules: {})",
                known.join(", ")
            ),
        );
    }
    let baseline = match args.baseline.as_deref().map(read_baseline).transpose() {
        Ok(baseline) => baseline.unwrap_or_default(),
        Err(e) => return failed(out, e),
    };
    let Some(input) = args.manifests.input(args.file.as_deref()) else {
        return failed(
            out,
            "give a scenario FILE or -f PATH (usage: netpol lint FILE, netpol lint -f app/)".into(),
        );
    };
    // The loader's messages go to stderr as always, and on bad input into the SARIF log too.
    let mut messages = Vec::new();
    let loaded = input::load(&input, args.manifests.read.flags(), &mut messages)?;
    err.write_all(&messages)?;
    let Some(scenario) = loaded else {
        if sarif {
            let lines: Vec<String> = String::from_utf8_lossy(&messages)
                .lines()
                .filter(|l| l.starts_with("error"))
                .map(str::to_owned)
                .collect();
            report::write_sarif_failure(out, &lines)?;
        }
        return Ok(Outcome::Invalid);
    };
    let findings: Vec<Finding> = rules::lint(&scenario.cluster)
        .into_iter()
        .filter(|f| !args.disable.iter().any(|id| id == f.rule))
        .filter(|f| !acknowledged(&scenario.cluster, f))
        .filter(|f| !baseline.contains(&(f.rule.to_owned(), f.object.clone(), f.field.clone())))
        .collect();
    match args.output {
        LintOutput::Text => report::write_text(out, &findings)?,
        LintOutput::Json => report::write_json(out, &findings)?,
        LintOutput::Sarif => {
            let places = report::places(&findings, &scenario.cluster);
            report::write_sarif(out, &findings, &places)?
        }
    }
    Ok(
        match findings.iter().any(|f| args.fail_on.fails(f.severity)) {
            true => Outcome::Mismatch,
            false => Outcome::Success,
        },
    )
}

/// The (rule, object, field) of every finding of a `lint -o json` document.
fn read_baseline(path: &std::path::Path) -> Result<BTreeSet<(String, String, String)>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--baseline {}: {e}", path.display()))?;
    let document: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("--baseline {}: not JSON: {e}", path.display()))?;
    let Some(findings) = document["findings"].as_array() else {
        return Err(format!(
            "--baseline {}: no `findings` list (write one with netpol lint -o json)",
            path.display()
        ));
    };
    findings
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let field = |name: &str| {
                f[name].as_str().map(str::to_owned).ok_or_else(|| {
                    format!(
                        "--baseline {}: findings[{i}].{name}: missing",
                        path.display()
                    )
                })
            };
            Ok((field("rule")?, field("object")?, field("field")?))
        })
        .collect()
}
