//! PolicyEntry: the one internal rule form every policy API is translated into (CFP-39646).
//! Nothing downstream of translation knows which API an entry came from; `provenance` is carried
//! only so that decisions can be explained.

use serde::{Deserialize, Serialize};

use crate::ports::PortRule;
use crate::selector::{Peer, PodSelector};

/// Evaluation tiers, in evaluation order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Tier {
    /// AdminNetworkPolicy, ClusterNetworkPolicy `tier: Admin`.
    Admin,
    /// NetworkPolicy, CiliumNetworkPolicy, CiliumClusterwideNetworkPolicy.
    Normal,
    /// BaselineAdminNetworkPolicy, ClusterNetworkPolicy `tier: Baseline`.
    Baseline,
}

impl Tier {
    pub const ALL: [Tier; 3] = [Tier::Admin, Tier::Normal, Tier::Baseline];

    pub fn next(self) -> Option<Tier> {
        match self {
            Tier::Admin => Some(Tier::Normal),
            Tier::Normal => Some(Tier::Baseline),
            Tier::Baseline => None,
        }
    }
}

/// What a matching entry does. The declaration order is the tie-break at equal priority:
/// Deny before Allow before Pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Verdict {
    Deny,
    Allow,
    /// Skip the rest of this tier and continue with the next one.
    Pass,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Direction {
    Ingress,
    Egress,
}

impl Direction {
    pub const BOTH: [Direction; 2] = [Direction::Ingress, Direction::Egress];
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Direction::Ingress => "ingress",
            Direction::Egress => "egress",
        })
    }
}

/// Mutual authentication an allowed flow requires. Ordered by strength: merging keeps the
/// strongest, and an entry without a mode inherits one from an equal-precedence covering entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AuthMode {
    Disabled,
    Required,
}

/// Order within a tier: lower sorts first and wins. `value` is the API priority (0 for the
/// unordered NetworkPolicy tier), `tiebreak` the policy name (the documented deterministic
/// tie-break between policies of equal priority), `rule` the rule's index inside its policy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Priority {
    pub value: u32,
    pub tiebreak: String,
    pub rule: u32,
}

impl Priority {
    /// The single priority every entry of an unordered tier (NetworkPolicy, Cilium) shares, so
    /// that its entries merge: deny over allow, any allow over no match.
    pub fn unordered() -> Self {
        Self::default()
    }

    pub fn new(value: u32, tiebreak: impl Into<String>, rule: u32) -> Self {
        Self {
            value,
            tiebreak: tiebreak.into(),
            rule,
        }
    }
}

impl std::fmt::Display for Priority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.value)?;
        if !self.tiebreak.is_empty() {
            write!(f, " ({} rule {})", self.tiebreak, self.rule)?;
        }
        Ok(())
    }
}

/// Where an entry came from, for `explain` and logs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Provenance {
    /// The API kind, e.g. `NetworkPolicy`.
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    /// The rule's name, or `ingress[2]`-style index where rules are unnamed.
    pub rule: String,
}

impl std::fmt::Display for Provenance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind, ns, self.name)?,
            None => write!(f, "{} {}", self.kind, self.name)?,
        }
        if !self.rule.is_empty() {
            write!(f, " rule {}", self.rule)?;
        }
        Ok(())
    }
}

/// Whether an entry is enforced or only audited (`netpol.io/enforcement: audit`, or the agent's
/// `--audit`). An audited entry decides nothing the datapath enforces: the enforced verdict is
/// computed as if it did not exist, the would-be verdict as if it were enforced, and where the
/// first allows and the second denies the datapath passes the packet and reports `would-deny`
/// (see [`crate::audit`]). Set at translation for every kind; nothing later asks the kind.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub enum Enforcement {
    #[default]
    Enforce,
    Audit,
}

/// Which verdict a policy set is evaluated for ([`crate::audit`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PolicyView {
    /// What the datapath enforces: audited entries are left out.
    #[default]
    Enforced,
    /// What would be enforced if audited entries were: every entry counts.
    WouldBe,
}

impl PolicyView {
    pub const BOTH: [PolicyView; 2] = [PolicyView::Enforced, PolicyView::WouldBe];

    /// Whether `entry` takes part in this view's evaluation.
    pub fn admits(self, entry: &PolicyEntry) -> bool {
        self == PolicyView::WouldBe || entry.enforcement == Enforcement::Enforce
    }
}

/// One flat rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PolicyEntry {
    pub tier: Tier,
    pub priority: Priority,
    pub verdict: Verdict,
    /// The endpoints (local pods) the entry applies to.
    pub subject: PodSelector,
    pub direction: Direction,
    /// Remote identities the entry matches: the union of the peers. Empty matches nothing
    /// (an entry that only isolates).
    pub peers: Vec<Peer>,
    /// Traffic the entry matches: the union of the clauses. Empty means all traffic.
    pub ports: Vec<PortRule>,
    /// The subject is isolated in this direction within this tier: traffic no entry of the tier
    /// matches is denied instead of falling through to the next tier.
    pub default_deny: bool,
    /// Enforced, or audited only: what it would deny is reported, not denied.
    #[serde(default)]
    pub enforcement: Enforcement,
    pub auth: Option<AuthMode>,
    pub provenance: Provenance,
}

impl PolicyEntry {
    /// The total evaluation order of entries: tier, then priority, then verdict.
    pub fn order_key(&self) -> OrderKey {
        OrderKey {
            tier: self.tier,
            priority: self.priority.clone(),
            verdict: self.verdict,
        }
    }

    pub fn is_audited(&self) -> bool {
        self.enforcement == Enforcement::Audit
    }

    /// The allowance the engine adds so that a pod's own node (kubelet probes, host services)
    /// can always reach it, ahead of every policy.
    pub fn node_probe_allowance() -> PolicyEntry {
        PolicyEntry {
            tier: Tier::Admin,
            priority: Priority::unordered(),
            verdict: crate::Verdict::Allow,
            subject: PodSelector::all(),
            direction: Direction::Ingress,
            peers: vec![Peer::Entity(crate::selector::Entity::Host)],
            ports: Vec::new(),
            default_deny: false,
            enforcement: Enforcement::Enforce,
            auth: None,
            provenance: Provenance {
                kind: "netpol".into(),
                namespace: None,
                name: "node-probes".into(),
                rule: "allow ingress from the pod's own node".into(),
            },
        }
    }
}

/// The sort key that decides which of two matching entries wins (smaller wins).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OrderKey {
    pub tier: Tier,
    pub priority: Priority,
    pub verdict: Verdict,
}
