//! What applying rules did to each endpoint: the one report every datapath gives, so metrics,
//! readiness and summaries do not know which datapath ran.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::error::DatapathError;

/// What happened to one endpoint in one apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Its netpol rules already were the desired ones.
    Unchanged,
    /// Its netpol rules were replaced.
    Updated { added: usize, removed: usize },
    /// The call failed; retried after `retry_at`.
    Failed {
        error: DatapathError,
        failures: u32,
        retry_at: Instant,
    },
    /// Skipped: still backing off from an earlier failure.
    Deferred { retry_at: Instant },
    /// The endpoint no longer exists.
    Gone,
    /// The desired rules include one netpol does not own; nothing was sent.
    Refused { rule: String },
}

/// Per-endpoint outcomes of one apply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApplyReport {
    pub outcomes: BTreeMap<String, Outcome>,
}

impl ApplyReport {
    pub fn updated(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Updated { .. }))
    }

    pub fn failed(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Failed { .. } | Outcome::Deferred { .. }))
    }

    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.outcomes.values().filter(|o| f(o)).count()
    }
}
