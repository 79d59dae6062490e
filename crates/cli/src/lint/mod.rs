//! `netpol lint`: policy smells, found with the engine's own precedence and MapStates rather
//! than by reading the objects' text. Every finding is exact for the cluster given: a rule is
//! `shadowed-rule` when taking it out leaves every endpoint's MapState deciding every key as
//! before, a policy is `redundant-policy` when taking it out does, and so on (see
//! `docs/cli.md`). [`rules`] finds them; [`report`] writes them as text, JSON or SARIF 2.1.0.

mod lab;
mod probes;
pub mod report;
pub mod rules;

use serde::Serialize;

/// How much a finding matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; the policy does what it says.
    Note,
    /// The policy almost certainly does not do what its author meant.
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
        }
    }
}

/// One smell in one object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule id, e.g. `shadowed-rule`.
    pub rule: &'static str,
    pub severity: Severity,
    /// `Kind namespace/name`, or `Kind name` for cluster-scoped kinds.
    pub object: String,
    /// The field the finding is about, e.g. `spec.ingress[1]`.
    pub field: String,
    pub message: String,
    /// What to do about it.
    pub hint: String,
}

/// The rule ids lint knows, with a one-line description and their severity.
pub const RULES: [(&str, Severity, &str); 7] = [
    (
        "selects-nothing",
        Severity::Warning,
        "The policy's subject selects no pod, so it has no effect.",
    ),
    (
        "peer-selects-nothing",
        Severity::Warning,
        "A peer of a rule selects no pod or node (often a misspelt label or namespace).",
    ),
    (
        "shadowed-rule",
        Severity::Warning,
        "A rule never decides a flow: rules before it (or beside it) decide every flow it matches.",
    ),
    (
        "redundant-policy",
        Severity::Warning,
        "Removing the policy leaves every decision unchanged.",
    ),
    (
        "unordered-overlap",
        Severity::Warning,
        "Admin policies of equal priority overlap with different actions; upstream leaves their order undefined.",
    ),
    (
        "ipblock-covers-pods",
        Severity::Note,
        "An ipBlock (or networks) peer covers pod addresses, so it also matches those pods.",
    ),
    (
        "named-port-unresolved",
        Severity::Warning,
        "A named port that no pod the rule can match declares, so the port clause matches nothing.",
    ),
];
