//! The `netpol` subcommands that work on scenario files. Each module holds one subcommand's
//! arguments and its `run`; `main.rs` only dispatches.

pub mod acls;
pub mod check;
pub mod describe;
pub mod diff;
pub mod engine;
pub mod explain;
pub mod html;
pub mod input;
pub mod junit;
pub mod matrix;
pub mod nftables;
pub mod probes;
pub mod report;

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use netpol_engine::flow::DirectionOracle;

use crate::scenario::{Input, Scenario};
use engine::EngineArgs;

/// How a command ended, as its exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Everything held: exit 0.
    Success,
    /// Some expectation did not hold: exit 1.
    Mismatch,
    /// Some input could not be used (a file that does not load, an unknown endpoint): exit 2.
    Invalid,
}

impl From<Outcome> for ExitCode {
    fn from(outcome: Outcome) -> Self {
        ExitCode::from(match outcome {
            Outcome::Success => 0,
            Outcome::Mismatch => 1,
            Outcome::Invalid => 2,
        })
    }
}

/// Loads a scenario file, reporting its warnings, or every problem that keeps it from loading,
/// on `err`.
fn load_scenario(file: &Path, err: &mut dyn Write) -> io::Result<Option<Scenario>> {
    input::load(&Input::Scenario(file.to_owned()), err)
}

/// The decider the user chose for `scenario`, or the reason there is none, reported on `err`.
fn decider<'a>(
    args: EngineArgs,
    scenario: &'a Scenario,
    err: &mut dyn Write,
) -> io::Result<Option<Box<dyn DirectionOracle + 'a>>> {
    match engine::oracle(args, &scenario.cluster) {
        Ok(oracle) => Ok(Some(oracle)),
        Err(e) => {
            writeln!(err, "error: {}: {e}", scenario.file.display())?;
            Ok(None)
        }
    }
}
