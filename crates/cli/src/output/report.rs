//! The machine-readable form of decisions, shared by every `--output json`. Field names are
//! stable and documented in `docs/cli.md`; a new field may be added, none renamed or removed.

use netpol_engine::flow::{FlowDecision, FlowDecisionRef};
use netpol_engine::reference::{Decision, Reason};
use netpol_engine::{AuthMode, Protocol, Provenance, Tier};
use serde::Serialize;

use super::describe;

/// `--output` of the commands that print text or JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TextOrJson {
    #[default]
    Text,
    Json,
}

/// The policy rule behind a decision.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct RuleJson {
    /// The API kind, e.g. `NetworkPolicy`.
    pub kind: String,
    /// Absent for cluster-scoped kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    /// The rule's name, or its `ingress[2]`-style index; empty when the object as a whole decided.
    pub rule: String,
}

impl From<&Provenance> for RuleJson {
    fn from(p: &Provenance) -> Self {
        RuleJson {
            kind: p.kind.clone(),
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            rule: p.rule.clone(),
        }
    }
}

/// How one direction (egress of the source, ingress of the destination) was decided.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct DirectionJson {
    /// `allow` or `deny`.
    pub verdict: &'static str,
    /// `rule` (a rule matched), `isolated` (no rule matched and a policy isolates the pod) or
    /// `default` (nothing applies: allowed) or `own-address` (a pod reaching its own address,
    /// which no policy applies to: allowed).
    pub reason: &'static str,
    /// `Admin`, `Normal` or `Baseline`; absent for `default` and `own-address`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// The rule's priority (Admin and Baseline tiers only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// The matching rule, or the policy that isolates; absent for `default`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<RuleJson>,
    pub authentication_required: bool,
    /// The same in words, as the text output prints it.
    pub text: String,
}

impl From<&Decision> for DirectionJson {
    fn from(d: &Decision) -> Self {
        let tier_name = |tier: &Tier| format!("{tier:?}");
        let (reason, tier, priority, policy) = match &d.reason {
            Reason::Rule {
                tier,
                priority,
                provenance,
            } => (
                "rule",
                Some(tier_name(tier)),
                (*tier != Tier::Normal).then_some(priority.value),
                Some(provenance.into()),
            ),
            Reason::Isolated { tier, provenance } => (
                "isolated",
                Some(tier_name(tier)),
                None,
                Some((&describe::policy_only(provenance)).into()),
            ),
            Reason::Default => ("default", None, None, None),
            Reason::OwnAddress => ("own-address", None, None, None),
        };
        DirectionJson {
            verdict: describe::verdict_word(d.allowed()),
            reason,
            tier,
            priority,
            policy,
            authentication_required: d.auth == Some(AuthMode::Required),
            text: describe::decision(d),
        }
    }
}

/// How a whole flow was decided.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct DecisionJson {
    /// `allow` or `deny`: the whole flow's verdict.
    pub verdict: &'static str,
    /// Absent where the source is not a pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress: Option<DirectionJson>,
    /// Absent where the destination is not a pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingress: Option<DirectionJson>,
    /// The rule behind the verdict in words: the denying direction, or both allowing ones.
    pub deciding_rule: String,
    /// `check`, where policies are in audit mode (`netpol.io/enforcement: audit`): for an
    /// allowed flow they would deny, what would deny it (`would deny (audit): <rule>`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub would_deny: Option<String>,
}

impl DecisionJson {
    pub fn allowed(&self) -> bool {
        self.verdict == describe::verdict_word(true)
    }
}

impl From<FlowDecisionRef<'_>> for DecisionJson {
    fn from(decision: FlowDecisionRef) -> Self {
        DecisionJson {
            verdict: describe::verdict_word(decision.allowed()),
            egress: decision.egress.map(Into::into),
            ingress: decision.ingress.map(Into::into),
            deciding_rule: describe::deciding_rules(decision),
            would_deny: None,
        }
    }
}

impl From<&FlowDecision> for DecisionJson {
    fn from(decision: &FlowDecision) -> Self {
        decision.as_ref().into()
    }
}

/// One flow and how it was decided.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FlowJson {
    /// `namespace/pod` or an IP address, as given.
    pub from: String,
    pub to: String,
    /// The identity the source resolved to, e.g. `pod x/a (10.1.0.1)` (`explain` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The identity the destination resolved to (`explain` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    pub port: u16,
    #[serde(flatten)]
    pub decision: DecisionJson,
}

impl FlowJson {
    pub fn new(
        from: impl ToString,
        to: impl ToString,
        protocol: Protocol,
        port: u16,
        decision: FlowDecisionRef,
    ) -> Self {
        FlowJson {
            from: from.to_string(),
            to: to.to_string(),
            source: None,
            destination: None,
            protocol: protocol.to_string(),
            port,
            decision: decision.into(),
        }
    }
}

/// Writes `value` as pretty JSON and a newline.
pub fn write_json(out: &mut dyn std::io::Write, value: &impl Serialize) -> std::io::Result<()> {
    use std::io::Write;
    // Buffered here: stdout is line-buffered, and pretty JSON is a line per field (a diff's
    // hundreds of megabytes were millions of write calls).
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use netpol_engine::{Priority, Verdict};

    #[test]
    fn a_rule_decision_names_tier_priority_and_policy() {
        let decision = Decision {
            verdict: Verdict::Deny,
            auth: None,
            reason: Reason::Rule {
                tier: Tier::Admin,
                priority: Priority::new(50, "deny-egress", 1),
                provenance: Provenance {
                    kind: "AdminNetworkPolicy".into(),
                    namespace: None,
                    name: "deny-egress".into(),
                    rule: "no-test-net".into(),
                },
            },
        };
        let json = serde_json::to_value(DirectionJson::from(&decision)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "verdict": "deny",
                "reason": "rule",
                "tier": "Admin",
                "priority": 50,
                "policy": {"kind": "AdminNetworkPolicy", "name": "deny-egress", "rule": "no-test-net"},
                "authentication_required": false,
                "text": "deny by AdminNetworkPolicy deny-egress rule no-test-net (Admin tier, priority 50)"
            })
        );
    }
}
