//! `netpol lint FILE` (or `netpol lint -f PATH...`): policy smells, each with its rule id,
//! severity, object, field, message and hint. Exit 0 when clean, 1 with findings, 2 on bad input.

use std::io::{self, Write};
use std::path::PathBuf;

use crate::input::{self, ManifestArgs};
use crate::lint::{report, rules};
use crate::outcome::Outcome;
use crate::scenario::Input;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LintOutput {
    #[default]
    Text,
    Json,
    /// SARIF 2.1.0, for code-scanning views in CI.
    Sarif,
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
}

pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    if args.file.is_some() && !args.manifests.filenames.is_empty() {
        writeln!(err, "error: give FILE or -f PATH, not both")?;
        return Ok(Outcome::Invalid);
    }
    let Some(input) = args.manifests.input(args.file.as_deref()) else {
        writeln!(
            err,
            "error: give a scenario FILE or -f PATH (usage: netpol lint FILE, netpol lint -f app/)"
        )?;
        return Ok(Outcome::Invalid);
    };
    let Some(scenario) = input::load(&input, args.manifests.read.flags(), err)? else {
        return Ok(Outcome::Invalid);
    };
    let findings = rules::lint(&scenario.cluster);
    let artifact = match &input {
        Input::Scenario(file) => Some(file.display().to_string()),
        Input::Manifests(paths) if paths.len() == 1 && paths[0].is_file() => {
            Some(paths[0].display().to_string())
        }
        Input::Manifests(_) | Input::Live(_) => None,
    };
    match args.output {
        LintOutput::Text => report::write_text(out, &findings)?,
        LintOutput::Json => report::write_json(out, &findings)?,
        LintOutput::Sarif => report::write_sarif(out, &findings, artifact.as_deref())?,
    }
    Ok(if findings.is_empty() {
        Outcome::Success
    } else {
        Outcome::Mismatch
    })
}
