//! Audit mode: policies whose entries are [`Enforcement::Audit`] decide nothing the datapath
//! enforces, and what they would deny is reported.
//!
//! Two verdicts per direction of a flow, each an ordinary first-match evaluation:
//! - the **enforced** verdict, as if audited entries did not exist ([`PolicyView::Enforced`]);
//! - the **would-be** verdict, as if they were enforced ([`PolicyView::WouldBe`]).
//!
//! Where the enforced verdict allows and the would-be verdict denies, the packet passes and the
//! datapath reports `would-deny`, naming the rule the would-be evaluation decided by (for
//! NetworkPolicy-style isolation, the isolating policy). A flow the enforced verdict denies is
//! denied and reported as an ordinary deny, whatever the audited policies say; an audited allow
//! that would let through what is denied now is not reported. Each view is an ordinary policy
//! set, so an engine computes one view's MapStates exactly as it computes any MapState
//! ([`crate::Engine::set_view`]), and the reference evaluator decides both
//! ([`decide_audited`]).

use crate::entry::PolicyEntry;
pub use crate::entry::PolicyView;
use crate::reference::{self, Decision, DirectedFlow, Reason};

/// Both verdicts of one direction of one flow.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AuditedDecision {
    pub enforced: Decision,
    pub would_be: Decision,
}

impl AuditedDecision {
    /// The decision of `view`.
    pub fn of(&self, view: PolicyView) -> &Decision {
        match view {
            PolicyView::Enforced => &self.enforced,
            PolicyView::WouldBe => &self.would_be,
        }
    }

    /// The rule that would deny what the datapath passes: the would-be decision's reason where
    /// the enforced verdict allows and the would-be verdict denies.
    pub fn would_deny(&self) -> Option<&Reason> {
        (self.enforced.allowed() && !self.would_be.allowed()).then_some(&self.would_be.reason)
    }
}

/// Decides one direction of one flow in both views (the reference evaluator, twice).
pub fn decide_audited(entries: &[PolicyEntry], flow: &DirectedFlow<'_>) -> AuditedDecision {
    AuditedDecision {
        enforced: reference::decide_in(PolicyView::Enforced, entries, flow),
        would_be: reference::decide_in(PolicyView::WouldBe, entries, flow),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{Direction, Enforcement, Priority, Provenance, Tier, Verdict};
    use crate::identity::{Identity, PodInfo};
    use crate::labels::{LabelSelector, Labels};
    use crate::ports::Protocol;
    use crate::selector::{Peer, PodSelector};

    fn isolating(name: &str, enforcement: Enforcement) -> PolicyEntry {
        PolicyEntry {
            tier: Tier::Normal,
            priority: Priority::unordered(),
            verdict: Verdict::Allow,
            subject: PodSelector::all(),
            direction: Direction::Ingress,
            peers: vec![Peer::pods(PodSelector {
                namespaces: LabelSelector::everything(),
                pods: LabelSelector::from_labels([("app", "nobody")]),
            })],
            ports: Vec::new(),
            default_deny: true,
            enforcement,
            auth: None,
            provenance: Provenance {
                kind: "NetworkPolicy".into(),
                namespace: Some("shop".into()),
                name: name.into(),
                rule: "ingress[0]".into(),
            },
        }
    }

    fn decide(entries: &[PolicyEntry]) -> AuditedDecision {
        let pod = |name: &str| PodInfo {
            namespace: "shop".into(),
            name: name.into(),
            labels: Labels::from([("app".to_string(), name.to_string())]).into(),
            namespace_labels: Labels::from([(
                crate::NAMESPACE_NAME_LABEL.to_string(),
                "shop".to_string(),
            )])
            .into(),
            node: Some("n1".into()),
            ports: vec![],
        };
        let endpoint = pod("web");
        let remote = Identity::pod(pod("client"), "10.0.0.2".parse().unwrap());
        decide_audited(
            entries,
            &DirectedFlow {
                endpoint: &endpoint,
                direction: Direction::Ingress,
                remote: &remote,
                protocol: Protocol::Tcp,
                port: 80,
            },
        )
    }

    #[test]
    fn an_audited_isolation_passes_the_flow_and_names_the_policy_that_would_deny_it() {
        let decision = decide(&[isolating("lockdown", Enforcement::Audit)]);
        assert!(decision.enforced.allowed());
        assert!(!decision.would_be.allowed());
        match decision.would_deny() {
            Some(Reason::Isolated { provenance, .. }) => assert_eq!(provenance.name, "lockdown"),
            other => panic!("expected the audited isolation, got {other:?}"),
        }
    }

    #[test]
    fn an_enforced_deny_is_a_deny_whatever_an_audited_policy_says() {
        let decision = decide(&[
            isolating("lockdown", Enforcement::Audit),
            isolating("enforced", Enforcement::Enforce),
        ]);
        assert!(!decision.enforced.allowed());
        assert_eq!(decision.would_deny(), None);
    }
}
