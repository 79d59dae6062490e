//! How a command ended, as its exit status.

use std::process::ExitCode;

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
