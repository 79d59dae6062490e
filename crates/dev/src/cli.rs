//! The `netpol-dev` command line. [`run`] takes the arguments as the binary does, so that tests
//! and benchmarks of other crates write clusters exactly as a developer's command would.

use std::io::Write;

use clap::{Parser, Subcommand};

use crate::synth;

#[derive(Debug, Parser)]
#[command(name = "netpol-dev", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a synthetic cluster of the usual shape as YAML or JSON files (for scale tests).
    Synth(synth::Args),
}

/// Runs `netpol-dev ARGS` (without the program name), writing what it reports to `out`.
pub fn run<I, S>(args: I, out: &mut dyn Write) -> anyhow::Result<()>
where
    I: IntoIterator<Item = S>,
    S: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::try_parse_from(
        std::iter::once("netpol-dev".into()).chain(args.into_iter().map(Into::into)),
    )?;
    match &cli.command {
        Command::Synth(args) => synth::run(args, out),
    }
}
