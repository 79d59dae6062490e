//! Words for decisions: which rule decided a direction of a flow, or why the default applied.
//! Shared by `check` (one line per mismatch) and `explain` (one line per direction).

use netpol_engine::flow::FlowDecisionRef;
use netpol_engine::reference::{Decision, Reason};
use netpol_engine::{AuthMode, Direction, Provenance, Tier};

/// `allow` or `deny`.
pub fn verdict_word(allowed: bool) -> &'static str {
    if allowed {
        "allow"
    } else {
        "deny"
    }
}

/// Why one direction decided as it did: the rule with its tier, priority, kind, namespace/name
/// and rule, or the isolation or default that applied.
pub fn reason(reason: &Reason) -> String {
    match reason {
        Reason::Rule {
            tier,
            priority,
            provenance,
        } => {
            // NetworkPolicy-tier rules are unordered: a priority there would mean nothing.
            let place = match tier {
                Tier::Normal => format!("{tier:?} tier"),
                _ => format!("{tier:?} tier, priority {}", priority.value),
            };
            format!("{provenance} ({place})")
        }
        Reason::Isolated { tier, provenance } => {
            // A policy isolates as a whole; the rule the evaluator met it by is beside the point.
            let policy = policy_only(provenance);
            format!("no {tier:?}-tier rule matched and {policy} isolates the pod")
        }
        Reason::Default => "no rule matched and nothing isolates the pod: default allow".into(),
        Reason::OwnAddress => reason.to_string(),
    }
}

/// The policy of a rule, without the rule: what isolates a pod is a policy.
pub fn policy_only(provenance: &Provenance) -> Provenance {
    Provenance {
        rule: String::new(),
        ..provenance.clone()
    }
}

/// One direction's decision: `deny by <rule>`, `allow by <rule>`, or the isolation or default.
pub fn decision(decision: &Decision) -> String {
    let verdict = verdict_word(decision.allowed());
    let auth = match decision.auth {
        Some(AuthMode::Required) => ", requiring authentication",
        _ => "",
    };
    match &decision.reason {
        Reason::Rule { .. } => format!("{verdict} by {}{auth}", reason(&decision.reason)),
        other => format!("{verdict}: {}{auth}", reason(other)),
    }
}

/// What audited policies would do to an allowed direction (`netpol.io/enforcement: audit`):
/// `would deny (audit) by <rule>`, in [`decision`]'s words, as the datapath reports it.
pub fn would_deny(would_deny: &Reason) -> String {
    match would_deny {
        Reason::Rule { .. } => format!("would deny (audit) by {}", reason(would_deny)),
        other => format!("would deny (audit): {}", reason(other)),
    }
}

/// What audited policies would do to an allowed flow, from its would-be decision (every policy
/// enforced): `would deny (audit): <direction>: <decision>`, the denying direction in
/// [`deciding_rules`]' words.
pub fn would_deny_flow(would_be: FlowDecisionRef) -> String {
    format!("would deny (audit): {}", deciding_rules(would_be))
}

/// The rule behind a whole flow's verdict: the denying direction for a denied flow, both
/// directions that were evaluated for an allowed one.
pub fn deciding_rules(flow: FlowDecisionRef) -> String {
    if let Some((direction, denial)) = flow.denying() {
        return format!("{direction}: {}", decision(denial));
    }
    let sides: Vec<String> = [
        (Direction::Egress, flow.egress),
        (Direction::Ingress, flow.ingress),
    ]
    .into_iter()
    .filter_map(|(direction, d)| d.map(|d| format!("{direction}: {}", decision(d))))
    .collect();
    if sides.is_empty() {
        "neither side is a pod, so no policy applies".into()
    } else {
        sides.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netpol_engine::flow::FlowDecision;
    use netpol_engine::{Priority, Verdict};

    fn rule(tier: Tier, verdict: Verdict) -> Decision {
        Decision {
            verdict,
            auth: None,
            reason: Reason::Rule {
                tier,
                priority: Priority::new(50, "deny-egress", 1),
                provenance: Provenance {
                    kind: "AdminNetworkPolicy".into(),
                    namespace: None,
                    name: "deny-egress".into(),
                    rule: "no-test-net".into(),
                },
            },
        }
    }

    fn default_allow() -> Decision {
        Decision {
            verdict: Verdict::Allow,
            auth: Some(AuthMode::Required),
            reason: Reason::Default,
        }
    }

    #[test]
    fn a_denied_flow_names_the_denying_direction_and_rule() {
        let flow = FlowDecision {
            egress: Some(rule(Tier::Admin, Verdict::Deny)),
            ingress: None,
        };
        assert_eq!(
            deciding_rules(flow.as_ref()),
            "egress: deny by AdminNetworkPolicy deny-egress rule no-test-net (Admin tier, priority 50)"
        );
    }

    #[test]
    fn an_allowed_flow_names_both_directions() {
        let isolated = Decision {
            verdict: Verdict::Deny,
            auth: None,
            reason: Reason::Isolated {
                tier: Tier::Normal,
                provenance: Provenance {
                    kind: "NetworkPolicy".into(),
                    namespace: Some("x".into()),
                    name: "deny-all".into(),
                    rule: String::new(),
                },
            },
        };
        let flow = FlowDecision {
            egress: Some(default_allow()),
            ingress: Some(rule(Tier::Normal, Verdict::Allow)),
        };
        assert_eq!(
            deciding_rules(flow.as_ref()),
            "egress: allow: no rule matched and nothing isolates the pod: default allow, \
             requiring authentication; ingress: allow by AdminNetworkPolicy deny-egress rule \
             no-test-net (Normal tier)"
        );
        let denied = FlowDecision {
            egress: Some(default_allow()),
            ingress: Some(isolated),
        };
        assert_eq!(
            deciding_rules(denied.as_ref()),
            "ingress: deny: no Normal-tier rule matched and NetworkPolicy x/deny-all isolates the pod"
        );
    }
}
