//! What a chain rule's packets are counted and logged under: the policy rule that put the rule
//! there (its MapState entry's reason), the direction and the verdict. Bounded by the policies'
//! rules, never by flows or pod pairs: every endpoint a policy rule applies to adds to the same
//! labels.

use netpol_engine::reference::Reason;
use netpol_engine::Direction;

use crate::naming::hash;
use crate::ruleset::ChainVerdict;

/// The `rule` label of the catch-all that denies what no rule of an isolating policy admits.
pub const DEFAULT_DENY: &str = "default-deny";
/// The `rule` label of the catch-all that admits what no policy isolates.
pub const DEFAULT_ALLOW: &str = "default-allow";

/// The labels of one rule's counters and drop-log lines.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleLabels {
    /// The policy's API kind (`NetworkPolicy`, ...); empty for the default allow.
    pub kind: String,
    /// Empty for cluster-scoped policies and the default allow.
    pub namespace: String,
    /// The policy's name; empty for the default allow.
    pub policy: String,
    /// The rule's name or index (`ingress[0]`), [`DEFAULT_DENY`] or [`DEFAULT_ALLOW`].
    pub rule: String,
    /// `ingress` or `egress`.
    pub direction: &'static str,
    /// `allow`, `deny` or [`WOULD_DENY`].
    pub verdict: &'static str,
}

/// The rule label of a pod reaching its own address (not subject to policy).
pub const OWN_ADDRESS: &str = "own-address";

impl RuleLabels {
    /// The labels of a rule of `direction` that `reason` put there with `verdict`.
    pub fn of(reason: &Reason, direction: Direction, verdict: ChainVerdict) -> RuleLabels {
        let (kind, namespace, policy, rule) = match reason {
            Reason::Rule { provenance, .. } => (
                provenance.kind.clone(),
                provenance.namespace.clone().unwrap_or_default(),
                provenance.name.clone(),
                provenance.rule.clone(),
            ),
            Reason::Isolated { provenance, .. } => (
                provenance.kind.clone(),
                provenance.namespace.clone().unwrap_or_default(),
                provenance.name.clone(),
                DEFAULT_DENY.to_string(),
            ),
            Reason::Default => (
                String::new(),
                String::new(),
                String::new(),
                DEFAULT_ALLOW.to_string(),
            ),
            // No compiled rule carries it (a pod's own address never reaches the filter), but
            // its words are kept should one.
            Reason::OwnAddress => (
                String::new(),
                String::new(),
                String::new(),
                OWN_ADDRESS.to_string(),
            ),
        };
        RuleLabels {
            kind,
            namespace,
            policy,
            rule,
            direction: match direction {
                Direction::Ingress => "ingress",
                Direction::Egress => "egress",
            },
            verdict: verdict_word(verdict),
        }
    }

    /// A short, stable identifier of these labels (64 bits of a hash, in hex): what a drop-log
    /// prefix carries, since a prefix is limited to 127 bytes and the names are not.
    pub fn id(&self) -> String {
        hash([
            self.kind.as_str(),
            &self.namespace,
            &self.policy,
            &self.rule,
            self.direction,
            self.verdict,
        ])
    }

    /// The policy and rule in `explain`'s words: `NetworkPolicy shop/web rule ingress[0]`.
    pub fn policy_rule(&self) -> String {
        if self.policy.is_empty() {
            return self.rule.clone();
        }
        let scope = if self.namespace.is_empty() {
            self.policy.clone()
        } else {
            format!("{}/{}", self.namespace, self.policy)
        };
        format!("{} {scope} rule {}", self.kind, self.rule)
    }
}

/// The verdict label of what an audited policy would deny and the datapath passes.
pub const WOULD_DENY: &str = "would-deny";

/// The verdict label of a chain verdict.
pub fn verdict_word(verdict: ChainVerdict) -> &'static str {
    match verdict {
        ChainVerdict::Return => "allow",
        ChainVerdict::Drop => "deny",
        ChainVerdict::WouldDeny => WOULD_DENY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netpol_engine::entry::Provenance;

    fn provenance() -> Provenance {
        Provenance {
            kind: "NetworkPolicy".into(),
            namespace: Some("shop".into()),
            name: "web".into(),
            rule: "ingress[0]".into(),
        }
    }

    #[test]
    fn labels_name_the_policy_rule_and_isolation_and_ids_tell_them_apart() {
        let rule = Reason::Rule {
            tier: netpol_engine::Tier::Normal,
            priority: Default::default(),
            provenance: provenance(),
        };
        let allow = RuleLabels::of(&rule, Direction::Ingress, ChainVerdict::Return);
        assert_eq!(
            (
                allow.kind.as_str(),
                allow.namespace.as_str(),
                allow.policy.as_str()
            ),
            ("NetworkPolicy", "shop", "web")
        );
        assert_eq!(
            allow.policy_rule(),
            "NetworkPolicy shop/web rule ingress[0]"
        );
        let isolated = Reason::Isolated {
            tier: netpol_engine::Tier::Normal,
            provenance: provenance(),
        };
        let deny = RuleLabels::of(&isolated, Direction::Ingress, ChainVerdict::Drop);
        assert_eq!((deny.rule.as_str(), deny.verdict), (DEFAULT_DENY, "deny"));
        let egress = RuleLabels::of(&isolated, Direction::Egress, ChainVerdict::Drop);
        assert_ne!(deny.id(), egress.id());
        assert_eq!(deny.id(), deny.clone().id());
        assert_eq!(deny.id().len(), 16);
        let default = RuleLabels::of(&Reason::Default, Direction::Egress, ChainVerdict::Return);
        assert_eq!(default.policy_rule(), DEFAULT_ALLOW);
    }
}
