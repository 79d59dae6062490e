//! `netpol`: parses the command line and hands each subcommand to its module.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use netpol_cli::cli::{Cli, Command};
use netpol_cli::commands::{
    acls, agent, check, cleanup, controller, crds, diff, explain, flows, lint, matrix, version,
};
use netpol_cli::Outcome;

/// mimalloc rather than glibc's allocator on Linux: the engine makes millions of small
/// allocations (label maps, class entries, identities), and at 150,000 pods glibc's malloc and
/// free were nearly half of an initial sync's CPU (`agent --once`: 7.8 s with glibc, 4.7 s with
/// mimalloc, with a lower peak; see docs/performance.md). Windows keeps the system allocator
/// until mimalloc is measured there.
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's arenas are not committed up front. Linux overcommits, so by default mimalloc
/// commits each arena (1 GiB of address space) as it reserves it, and memory it later purges
/// stays counted in the RSS: at an initial sync of 150,000 pods the agent's peak RSS was about
/// 40 MB higher (449 against 408 MB, the same CPU). Set by a constructor, before the first
/// allocation reserves the first arena (the Rust runtime allocates before `main`).
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static ALLOCATOR_OPTIONS: extern "C" fn() = allocator_options;

#[cfg(target_os = "linux")]
extern "C" fn allocator_options() {
    /// `mi_option_arena_eager_commit` in mimalloc's `mi_option_t`.
    const ARENA_EAGER_COMMIT: std::ffi::c_int = 4;
    extern "C" {
        /// mimalloc's, linked with its allocator.
        fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
    }
    // SAFETY: setting an option is valid at any time; it only takes effect for arenas reserved
    // later, and none is reserved before this runs.
    unsafe { mi_option_set(ARENA_EAGER_COMMIT, 0) };
}

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
