//! The whole chain behind one direction of one flow, for `netpol explain`: per tier, in
//! evaluation order, every entry that matches the flow (the one that decided, a Pass and the
//! rules it skipped, rules never reached), the policies that isolate the endpoint, and the
//! `except`s that kept the remote address out of a rule. [`crate::reference::decide`] gives
//! only the deciding entry; this walks the same order and keeps everything it met, so that a
//! user can see why a rule they expected did not decide.

use crate::audit::decide_audited;
use crate::entry::{PolicyEntry, Provenance, Tier, Verdict};
use crate::reference::{applicable, Decision, DirectedFlow, Reason};
use crate::selector::Peer;

/// What one tier did with the flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TierOutcome {
    /// `matched[0]` allowed or denied: the flow's verdict.
    Decided,
    /// `matched[0]` passed: the rest of the tier was skipped.
    Passed,
    /// Nothing matched and `isolating` policies isolate the endpoint: denied.
    Isolated,
    /// Nothing matched and nothing isolates: on to the next tier.
    FellThrough,
    /// An earlier tier decided.
    NotReached,
}

/// An entry whose CIDR peer holds the remote address, but one of whose `except`s removes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exclusion<'a> {
    pub entry: &'a PolicyEntry,
    pub cidr: ipnet::IpNet,
    pub except: ipnet::IpNet,
}

/// One tier of the chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TierChain<'a> {
    pub tier: Tier,
    pub outcome: TierOutcome,
    /// The entries of this tier that apply to the endpoint and match the flow, in evaluation
    /// order: the first decided or passed, the others were not reached.
    pub matched: Vec<&'a PolicyEntry>,
    /// The policies of this tier that isolate the endpoint in this direction (rule left empty),
    /// each once.
    pub isolating: Vec<Provenance>,
    /// Entries that would have matched but for an `except` holding the remote address.
    pub excluded: Vec<Exclusion<'a>>,
    /// Matching entries of other policies at the deciding entry's priority with another
    /// verdict (Admin and Baseline tiers): upstream leaves their order undefined and netpol
    /// settles it by policy name.
    pub ties: Vec<&'a PolicyEntry>,
}

/// Every tier's part in one direction's decision, and the decision. The chain is the enforced
/// one: audited entries are left out of it ([`crate::audit`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain<'a> {
    pub tiers: Vec<TierChain<'a>>,
    pub decision: Decision,
    /// Where the decision allows and the audited policies, enforced, would deny: the reason
    /// they would deny by (what the datapath reports as `would-deny`).
    pub would_deny: Option<Reason>,
}

/// The chain of `flow` over `entries`, in the order [`crate::reference::decide`] walks them.
pub fn chain<'a>(entries: &'a [PolicyEntry], flow: &DirectedFlow<'_>) -> Chain<'a> {
    let mut tiers = Vec::new();
    // A pod reaching its own address is decided before any tier.
    let mut decided = flow.is_own_address();
    for tier in Tier::ALL {
        let applicable = applicable(entries, tier, flow);
        let matched: Vec<&PolicyEntry> = applicable
            .iter()
            .copied()
            .filter(|e| flow.matched_by(e))
            .collect();
        let mut isolating: Vec<Provenance> = Vec::new();
        for entry in applicable.iter().filter(|e| e.default_deny) {
            let policy = Provenance {
                rule: String::new(),
                ..entry.provenance.clone()
            };
            if !isolating.contains(&policy) {
                isolating.push(policy);
            }
        }
        let outcome = if decided {
            TierOutcome::NotReached
        } else {
            match matched.first() {
                Some(first) if first.verdict == Verdict::Pass => TierOutcome::Passed,
                Some(_) => TierOutcome::Decided,
                None if !isolating.is_empty() => TierOutcome::Isolated,
                None => TierOutcome::FellThrough,
            }
        };
        decided |= matches!(outcome, TierOutcome::Decided | TierOutcome::Isolated);
        let ties = match matched.first() {
            Some(first) if tier != Tier::Normal => matched
                .iter()
                .copied()
                .filter(|e| {
                    e.priority.value == first.priority.value
                        && e.priority.tiebreak != first.priority.tiebreak
                        && e.verdict != first.verdict
                })
                .collect(),
            _ => Vec::new(),
        };
        let excluded = applicable
            .iter()
            .filter(|e| !flow.matched_by(e))
            .flat_map(|e| exclusions(e, flow))
            .collect();
        tiers.push(TierChain {
            tier,
            outcome,
            matched,
            isolating,
            excluded,
            ties,
        });
    }
    let audited = decide_audited(entries, flow);
    Chain {
        tiers,
        would_deny: audited.would_deny().cloned(),
        decision: audited.enforced,
    }
}

/// The `except`s of `entry` that keep the flow's remote address out of it, where nothing else
/// in the entry (ports, other peers) would have kept it out anyway.
fn exclusions<'a>(entry: &'a PolicyEntry, flow: &DirectedFlow<'_>) -> Vec<Exclusion<'a>> {
    let remote = &flow.remote.prefix;
    let mut found = Vec::new();
    for peer in &entry.peers {
        let Peer::Cidr(cidr) = peer else { continue };
        if !cidr.net.contains(remote) {
            continue;
        }
        for except in cidr.except.iter().filter(|e| e.contains(remote)) {
            let mut without = cidr.clone();
            without.except.retain(|e| e != except);
            let widened = PolicyEntry {
                peers: vec![Peer::Cidr(without)],
                ..entry.clone()
            };
            if flow.matched_by(&widened) {
                found.push(Exclusion {
                    entry,
                    cidr: cidr.net,
                    except: *except,
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{Direction, Priority};
    use crate::identity::{Identity, PodInfo};
    use crate::labels::Labels;
    use crate::ports::{PortRule, Protocol};
    use crate::reference::decide;
    use crate::selector::{AddressScope, CidrSelector, PodSelector};

    fn pod() -> PodInfo {
        PodInfo {
            namespace: "x".into(),
            name: "a".into(),
            labels: Labels::from([("pod".to_string(), "a".to_string())]).into(),
            namespace_labels: Labels::from([(
                crate::NAMESPACE_NAME_LABEL.to_string(),
                "x".to_string(),
            )])
            .into(),
            node: Some("n1".into()),
            ports: vec![],
        }
    }

    fn entry(tier: Tier, priority: Priority, verdict: Verdict, name: &str) -> PolicyEntry {
        PolicyEntry {
            tier,
            priority,
            verdict,
            subject: PodSelector::all(),
            direction: Direction::Ingress,
            peers: vec![Peer::Cidr(CidrSelector {
                net: "0.0.0.0/0".parse().unwrap(),
                except: Default::default(),
                scope: AddressScope::Any,
            })],
            ports: vec![],
            default_deny: tier == Tier::Normal,
            enforcement: crate::entry::Enforcement::Enforce,
            auth: None,
            provenance: Provenance {
                kind: "K".into(),
                namespace: None,
                name: name.into(),
                rule: "r".into(),
            },
        }
    }

    fn flow<'a>(endpoint: &'a PodInfo, remote: &'a Identity) -> DirectedFlow<'a> {
        DirectedFlow {
            endpoint,
            direction: Direction::Ingress,
            remote,
            protocol: Protocol::Tcp,
            port: 80,
        }
    }

    #[test]
    fn a_pass_names_what_it_skipped_and_the_tier_that_decided() {
        let pass = entry(Tier::Admin, Priority::new(5, "p", 0), Verdict::Pass, "p");
        let skipped = entry(Tier::Admin, Priority::new(10, "q", 0), Verdict::Allow, "q");
        let mut deny_all = entry(Tier::Normal, Priority::unordered(), Verdict::Allow, "d");
        deny_all.peers.clear();
        let baseline = entry(
            Tier::Baseline,
            Priority::new(0, "b", 0),
            Verdict::Allow,
            "b",
        );
        let entries = [skipped, pass, deny_all, baseline];
        let (endpoint, remote) = (pod(), Identity::world("0.0.0.0/0".parse().unwrap()));
        let chain = chain(&entries, &flow(&endpoint, &remote));
        let tiers: Vec<(TierOutcome, Vec<&str>, Vec<&str>)> = chain
            .tiers
            .iter()
            .map(|t| {
                (
                    t.outcome,
                    t.matched
                        .iter()
                        .map(|e| e.provenance.name.as_str())
                        .collect(),
                    t.isolating.iter().map(|p| p.name.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(
            tiers,
            [
                (TierOutcome::Passed, vec!["p", "q"], vec![]),
                (TierOutcome::Isolated, vec![], vec!["d"]),
                (TierOutcome::NotReached, vec!["b"], vec![]),
            ]
        );
        assert_eq!(chain.decision.verdict, Verdict::Deny);
        assert_eq!(chain.decision, decide(&entries, &flow(&endpoint, &remote)));
    }

    #[test]
    fn an_except_holding_the_address_is_named_and_ties_are_found() {
        let mut allow = entry(Tier::Normal, Priority::unordered(), Verdict::Allow, "np");
        allow.peers = vec![Peer::Cidr(CidrSelector {
            net: "10.0.0.0/8".parse().unwrap(),
            except: vec!["10.1.0.0/16".parse().unwrap()].into(),
            scope: AddressScope::Any,
        })];
        allow.ports = vec![PortRule::single(Protocol::Tcp, 80)];
        let mut other_port = allow.clone();
        other_port.ports = vec![PortRule::single(Protocol::Tcp, 81)];
        let tie_allow = entry(Tier::Admin, Priority::new(7, "a", 0), Verdict::Allow, "a");
        let tie_deny = entry(Tier::Admin, Priority::new(7, "b", 0), Verdict::Deny, "b");
        let entries = [allow, other_port, tie_deny, tie_allow];
        let endpoint = pod();
        let remote = Identity::world("10.1.0.0/16".parse().unwrap());
        let chain = chain(&entries, &flow(&endpoint, &remote));
        let normal = &chain.tiers[1];
        assert_eq!(normal.excluded.len(), 1, "only the rule whose port matches");
        assert_eq!(normal.excluded[0].except.to_string(), "10.1.0.0/16");
        let admin = &chain.tiers[0];
        assert_eq!(admin.matched[0].provenance.name, "a", "a sorts before b");
        assert_eq!(admin.ties.len(), 1);
        assert_eq!(admin.ties[0].provenance.name, "b");
    }
}
