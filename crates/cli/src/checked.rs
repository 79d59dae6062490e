//! What a check run found: each scenario's expectations with how each came out (its [`Fate`]),
//! and the files that did not load. `check` builds it; the text, JSON and JUnit outputs and the
//! real-packet decider read it.

use std::path::PathBuf;

use crate::loader::FlowExpectation;
use crate::output::report::DecisionJson;

/// Everything a run checked.
#[derive(Debug, Default)]
pub struct Report {
    pub scenarios: Vec<Checked>,
    /// Files that did not load, each with its error lines.
    pub invalid: Vec<(PathBuf, Vec<String>)>,
}

/// One scenario's expectations, each with what was decided.
#[derive(Debug)]
pub struct Checked {
    pub file: PathBuf,
    pub name: String,
    pub flows: Vec<(FlowExpectation, Fate)>,
}

/// How one expectation came out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Decided by the engine, a simulated datapath or a real packet, with the rules that decided it.
    Decided(Box<DecisionJson>),
    /// Not decided by a packet, and why (no SCTP sockets here, no port to listen on, ...).
    Unprobed(String),
    /// The probe itself went wrong (an error, not a verdict).
    Failed(String),
}

impl Fate {
    /// Why no packet decided the flow, as reports word it; None for a decided flow.
    pub fn not_probed_reason(&self) -> Option<String> {
        match self {
            Fate::Decided(_) => None,
            Fate::Unprobed(why) => Some(why.clone()),
            Fate::Failed(why) => Some(format!("probe failed: {why}")),
        }
    }
}

impl Report {
    /// How many flows were decided (probed, on the nftables datapath).
    pub fn flows(&self) -> usize {
        self.fates()
            .filter(|(_, _, f)| matches!(f, Fate::Decided(_)))
            .count()
    }

    pub fn mismatches(&self) -> impl Iterator<Item = (&Checked, &FlowExpectation, &DecisionJson)> {
        self.fates().filter_map(|(s, e, fate)| match fate {
            Fate::Decided(d) if d.allowed() != e.expected.allowed() => Some((s, e, &**d)),
            _ => None,
        })
    }

    /// Flows no packet decided, each with why.
    pub fn not_probed(&self) -> impl Iterator<Item = (&Checked, &FlowExpectation, String)> {
        self.fates()
            .filter_map(|(s, e, fate)| Some((s, e, fate.not_probed_reason()?)))
    }

    /// Allowed flows a policy in audit mode would deny, each with what would deny it.
    pub fn would_denies(&self) -> impl Iterator<Item = (&Checked, &FlowExpectation, &str)> {
        self.fates().filter_map(|(s, e, fate)| match fate {
            Fate::Decided(d) => Some((s, e, d.would_deny.as_deref()?)),
            _ => None,
        })
    }

    /// Flows whose probe itself failed (counted among [`Report::not_probed`]).
    pub fn probe_failures(&self) -> usize {
        self.fates()
            .filter(|(_, _, f)| matches!(f, Fate::Failed(_)))
            .count()
    }

    fn fates(&self) -> impl Iterator<Item = (&Checked, &FlowExpectation, &Fate)> {
        self.scenarios
            .iter()
            .flat_map(|s| s.flows.iter().map(move |(e, f)| (s, e, f)))
    }
}

/// Whether a flow was decided as expected (a flow no packet decided has not passed).
pub fn passed(expectation: &FlowExpectation, fate: &Fate) -> bool {
    matches!(fate, Fate::Decided(d) if d.allowed() == expectation.expected.allowed())
}

/// `file: field: from -> to protocol/port`.
pub fn flow_name(scenario: &Checked, e: &FlowExpectation) -> String {
    format!(
        "{}: {}: {} -> {} {}/{}",
        scenario.file.display(),
        e.field,
        e.from,
        e.to,
        e.protocol,
        e.port
    )
}

/// The report line of a flow decided otherwise than expected.
pub fn mismatch_line(scenario: &Checked, e: &FlowExpectation, decision: &DecisionJson) -> String {
    format!(
        "{}: expected {}, decided {} ({})",
        flow_name(scenario, e),
        e.expected,
        decision.verdict,
        decision.deciding_rule,
    )
}
