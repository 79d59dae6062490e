//! The reference evaluator: a deliberately simple, flow-by-flow reading of the PolicyEntry
//! semantics. It is the oracle the MapState engine is tested against, so it favours obviousness
//! over speed and shares nothing with the engine but the model's matching predicates.
//!
//! Audited entries ([`crate::audit`]) are left out of the verdict [`decide`] gives (the enforced
//! one); [`decide_in`] gives either view's.
//!
//! For one endpoint and one direction: walk the tiers in order; inside a tier take the first
//! matching entry by (priority, verdict). Allow and Deny decide; Pass skips to the next tier.
//! If nothing in a tier matched and some entry of that tier isolates the endpoint in this
//! direction, the flow is denied. After the last tier the flow is allowed.
//!
//! Before all of that, a pod reaching one of its own addresses is allowed whatever the policies:
//! network-policy-api PR #390 says a pod connecting to its own pod IP is not subject to
//! ClusterNetworkPolicy, and issue #343 there records, for NetworkPolicy too, the consensus that
//! such a connection succeeds (the packets never leave the pod: no datapath could stop them).

use crate::entry::{
    AuthMode, Direction, PolicyEntry, PolicyView, Priority, Provenance, Tier, Verdict,
};
use crate::identity::{Identity, PodInfo};
use crate::ports::Protocol;

/// Why a direction decided as it did.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// A rule matched.
    Rule {
        tier: Tier,
        priority: Priority,
        provenance: Provenance,
    },
    /// No rule of `tier` matched and `provenance` isolates the endpoint in that tier.
    Isolated { tier: Tier, provenance: Provenance },
    /// No rule matched and nothing isolates: traffic is allowed by default.
    Default,
    /// The remote is one of the endpoint's own addresses (hairpin): not subject to policy.
    OwnAddress,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Rule {
                tier,
                priority,
                provenance,
            } => {
                write!(f, "{tier:?} tier, priority {priority}: {provenance}")
            }
            Reason::Isolated { tier, provenance } => {
                write!(
                    f,
                    "no {tier:?}-tier rule matched and {provenance} isolates the pod"
                )
            }
            Reason::Default => {
                f.write_str("no rule matched and nothing isolates the pod: default allow")
            }
            Reason::OwnAddress => {
                f.write_str("a pod reaching its own address is not subject to policy")
            }
        }
    }
}

/// The decision of one direction of one flow.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Decision {
    /// Allow or Deny; never Pass.
    pub verdict: Verdict,
    /// The strongest authentication of the matching entries at the deciding order.
    pub auth: Option<AuthMode>,
    pub reason: Reason,
}

impl Decision {
    pub fn allowed(&self) -> bool {
        self.verdict == Verdict::Allow
    }

    /// The decision of a pod's flow to one of its own addresses, in either direction.
    pub fn own_address() -> Decision {
        Decision {
            verdict: Verdict::Allow,
            auth: None,
            reason: Reason::OwnAddress,
        }
    }
}

/// One direction of one flow, seen from a local endpoint.
#[derive(Clone, Copy, Debug)]
pub struct DirectedFlow<'a> {
    /// The pod whose policy is evaluated (destination for ingress, source for egress).
    pub endpoint: &'a PodInfo,
    pub direction: Direction,
    /// The other side of the flow.
    pub remote: &'a Identity,
    pub protocol: Protocol,
    pub port: u16,
}

impl DirectedFlow<'_> {
    /// Whether the remote is the endpoint pod itself (one of its addresses).
    pub fn is_own_address(&self) -> bool {
        self.remote
            .as_pod()
            .is_some_and(|remote| remote.is_same_pod(self.endpoint))
    }

    /// Whether `entry` applies to this flow. Named ports resolve against the destination: the
    /// endpoint itself for ingress, the remote pod for egress.
    pub fn matched_by(&self, entry: &PolicyEntry) -> bool {
        let dest_ports = match self.direction {
            Direction::Ingress => Some(self.endpoint.ports.as_slice()),
            Direction::Egress => self.remote.named_ports(),
        };
        entry.direction == self.direction
            && entry.subject.matches(self.endpoint)
            && entry
                .peers
                .iter()
                .any(|p| p.selects(self.remote, self.endpoint.node.as_deref()))
            && (entry.ports.is_empty()
                || entry
                    .ports
                    .iter()
                    .any(|r| r.matches(self.protocol, self.port, dest_ports)))
    }
}

/// The entries of `tier` that apply to the flow's endpoint in its direction, in evaluation
/// order (first match wins); audited entries are left out (the enforced view).
pub fn applicable<'a>(
    entries: &'a [PolicyEntry],
    tier: Tier,
    flow: &DirectedFlow<'_>,
) -> Vec<&'a PolicyEntry> {
    applicable_in(PolicyView::Enforced, entries, tier, flow)
}

/// [`applicable`] in `view`: in the would-be view audited entries count as enforced.
pub fn applicable_in<'a>(
    view: PolicyView,
    entries: &'a [PolicyEntry],
    tier: Tier,
    flow: &DirectedFlow<'_>,
) -> Vec<&'a PolicyEntry> {
    let mut applicable: Vec<&PolicyEntry> = entries
        .iter()
        .filter(|e| {
            view.admits(e)
                && e.tier == tier
                && e.direction == flow.direction
                && e.subject.matches(flow.endpoint)
        })
        .collect();
    applicable.sort_by_key(|e| e.order_key());
    applicable
}

/// Decides one direction of one flow over `entries`: the enforced verdict, audited entries left
/// out (see [`crate::audit`]).
pub fn decide(entries: &[PolicyEntry], flow: &DirectedFlow<'_>) -> Decision {
    decide_in(PolicyView::Enforced, entries, flow)
}

/// [`decide`] in `view`.
pub fn decide_in(view: PolicyView, entries: &[PolicyEntry], flow: &DirectedFlow<'_>) -> Decision {
    if flow.is_own_address() {
        return Decision::own_address();
    }
    for tier in Tier::ALL {
        let applicable = applicable_in(view, entries, tier, flow);
        if let Some(first) = applicable.iter().find(|e| flow.matched_by(e)) {
            if first.verdict == Verdict::Pass {
                continue;
            }
            let key = first.order_key();
            let auth = applicable
                .iter()
                .filter(|e| e.order_key() == key && flow.matched_by(e))
                .filter_map(|e| e.auth)
                .max();
            return Decision {
                verdict: first.verdict,
                auth: if first.verdict == Verdict::Allow {
                    auth
                } else {
                    None
                },
                reason: Reason::Rule {
                    tier,
                    priority: first.priority.clone(),
                    provenance: first.provenance.clone(),
                },
            };
        }
        if let Some(isolating) = applicable.iter().find(|e| e.default_deny) {
            return Decision {
                verdict: Verdict::Deny,
                auth: None,
                reason: Reason::Isolated {
                    tier,
                    provenance: isolating.provenance.clone(),
                },
            };
        }
    }
    Decision {
        verdict: Verdict::Allow,
        auth: None,
        reason: Reason::Default,
    }
}
