//! `netpol`: parses the command line and hands each subcommand to its module.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use netpol_cli::commands::{acls, agent, check, crds, diff, explain, flows, lint, matrix};
use netpol_cli::{synth, Outcome};

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

/// Kubernetes network policy for Windows nodes: one engine for NetworkPolicy,
/// AdminNetworkPolicy, ClusterNetworkPolicy and Cilium policies.
#[derive(Debug, Parser)]
#[command(name = "netpol", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check scenario files: print every flow whose verdict differs from the expectation.
    Check(check::Args),
    /// Print the computed connectivity matrix of a scenario's or manifests' pods.
    Matrix(matrix::Args),
    /// Explain the verdict of one flow: the rule that decided each direction.
    Explain(explain::Args),
    /// Print the flows whose verdict changes from BEFORE to AFTER, with the deciding rules.
    Diff(diff::Args),
    /// Report policy smells (rules that never decide, policies that change nothing, peers that
    /// select nothing, ...), as text, JSON or SARIF.
    Lint(lint::Args),
    /// Print the HCN ACL requests the agent would send for a scenario's pods, with rule counts.
    Acls(acls::Args),
    /// Run the node agent: keep this node's endpoint rules equal to what the policies say.
    Agent(agent::Args),
    /// Follow a running agent's drop log: each denied connection with the rule that denied it.
    Flows(flows::Args),
    /// Print the CustomResourceDefinitions of the policy kinds netpol reads.
    Crds,
    /// Write a synthetic cluster of the usual shape as YAML files (for scale tests).
    Synth(synth::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The agent's threads log to stderr: it must not run under the locks taken below.
    if let Command::Agent(args) = &cli.command {
        return agent::run(args);
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
        Command::Crds => crds::run(&mut out),
        Command::Flows(args) => flows::run(args, &mut out, &mut err),
        Command::Synth(args) => match synth::run(args, &mut out) {
            Ok(()) => Ok(Outcome::Success),
            Err(error) => {
                let _ = writeln!(err, "netpol synth: {error:#}");
                Ok(Outcome::Invalid)
            }
        },
        Command::Agent(_) => Ok(Outcome::Success), // ran above
    };
    match result.and_then(|outcome| out.flush().map(|()| outcome)) {
        Ok(outcome) => outcome.into(),
        // Output that cannot be written (a closed pipe) leaves nothing more to do or report.
        Err(_) => Outcome::Invalid.into(),
    }
}
