//! `netpol lint`: policy smells, found with the engine's own precedence and MapStates rather
//! than by reading the objects' text. Every finding is exact for the cluster given: a rule is
//! `shadowed-rule` when taking it out leaves every endpoint's MapState deciding every key as
//! before, a policy is `redundant-policy` when taking it out does, and so on (see
//! `docs/cli.md`). [`rules`] finds them; [`report`] writes them as text, JSON or SARIF 2.1.0.

mod exposure;
mod lab;
mod locate;
mod naming;
pub mod report;
mod representatives;
pub mod rules;

use serde::Serialize;

use crate::loader::ClusterModel;

/// How much a finding matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; the policy does what it says.
    Note,
    /// The policy almost certainly does not do what its author meant, or opens more than it
    /// should.
    Warning,
    /// The input could not be linted (bad input).
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
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

/// Whether the object of `finding` acknowledges it: its `netpol.io/lint-ignore` annotation
/// lists the finding's rule (`RULE[,RULE]`, spaces around commas allowed).
pub fn acknowledged(cluster: &ClusterModel, finding: &Finding) -> bool {
    let Some(listed) = cluster
        .policy_origin(&finding.object)
        .and_then(|o| o.lint_ignore.as_deref())
    else {
        return false;
    };
    listed.split(',').any(|rule| rule.trim() == finding.rule)
}

/// The rule ids lint knows, with a one-line description and their severity.
pub const RULES: [(&str, Severity, &str); 12] = [
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
        "default-deny-covered",
        Severity::Note,
        "A default deny whose pods other policies isolate today; it still isolates pods added later.",
    ),
    (
        "open-to-all-pods",
        Severity::Warning,
        "An ingress rule admits every pod of every namespace (a namespaceSelector: {} standing alone).",
    ),
    (
        "egress-open-to-all-pods",
        Severity::Warning,
        "An egress rule reaches every pod of every namespace (a namespaceSelector: {} standing alone).",
    ),
    (
        "open-to-world",
        Severity::Warning,
        "An ingress rule admits every address, the internet included (only ports, no peers; 0.0.0.0/0).",
    ),
    (
        "egress-open-to-world",
        Severity::Warning,
        "An egress rule reaches every address, the internet included (only ports, no peers; 0.0.0.0/0).",
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
