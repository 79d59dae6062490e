//! The `netpol-dev` command line. [`run`] takes the arguments as the binary does, so that tests
//! and benchmarks of other crates write clusters exactly as a developer's command would.

use std::io::Write;

use clap::{Parser, Subcommand};

use crate::{cidr, synth};

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
    /// Write CIDR-heavy policies of one kind (thousands of /32s each) selecting no pod or the
    /// pods of one namespace, as one JSON list (for the memory benchmarks of issue 33).
    Cidr(cidr::Args),
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
        Command::Cidr(args) => cidr::run(args, out),
    }
}
