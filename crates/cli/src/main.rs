//! `netpol`: parses the command line and hands each subcommand to its module.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use netpol_cli::cli::{Cli, Command};
use netpol_cli::commands::{
    acls, agent, check, cleanup, controller, crds, diff, explain, flows, lint, matrix, version,
};
use netpol_cli::Outcome;

// mimalloc, set up as the agent's benchmarks set it up (`netpol_agent::allocator`).
netpol_agent::use_mimalloc!();

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The agent's threads log to stderr: it must not run under the locks taken below.
    if let Command::Agent(args) = &cli.command {
        return agent::run(args);
    }
    if let Command::Controller(args) = &cli.command {
        return controller::run(args);
    }
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr().lock();
    let result = match &cli.command {
        Command::Check(args) => check::run(args, &mut out, &mut err),
        Command::Matrix(args) => matrix::run(args, &mut out, &mut err),
        Command::Explain(args) => explain::run(args, &mut out, &mut err),
        Command::Diff(args) => diff::run(args, &mut out, &mut err),
        Command::Lint(args) => lint::run(args, &mut out, &mut err),
        Command::Acls(args) => acls::run(args, &mut out, &mut err),
        Command::Cleanup(args) => cleanup::run(args, &mut out, &mut err),
        Command::Crds(args) => crds::run(args, &mut out, &mut err),
        Command::Version(args) => version::run(args, &mut out),
        Command::Flows(args) => flows::run(args, &mut out, &mut err),
        Command::Agent(_) | Command::Controller(_) => Ok(Outcome::Success), // ran above
    };
    match result.and_then(|outcome| out.flush().map(|()| outcome)) {
        Ok(outcome) => outcome.into(),
        // Output that cannot be written (a closed pipe) leaves nothing more to do or report.
        Err(_) => Outcome::Invalid.into(),
    }
}
