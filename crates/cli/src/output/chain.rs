//! The whole chain behind one direction of a flow (see [`netpol_engine::explain`]) in words and
//! as JSON: per tier, what matched (the rule that decided or passed, the rules it skipped), the
//! policies that isolate, and the `except`s that kept the address out of a rule.

use netpol_engine::explain::{Chain, TierChain, TierOutcome};
use netpol_engine::{PolicyEntry, Tier, Verdict};
use serde::Serialize;

use super::report::RuleJson;

/// One tier's part, as JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TierJson {
    /// `Admin`, `Normal` or `Baseline`.
    pub tier: String,
    /// `decided`, `passed`, `isolated`, `no match` or `not reached`.
    pub outcome: &'static str,
    /// The matching rules in evaluation order: the first decided or passed.
    pub matched: Vec<MatchJson>,
    /// The policies of the tier that isolate the pod in this direction.
    pub isolating: Vec<RuleJson>,
    /// Rules that would have matched but for an `except` holding the address.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub excluded: Vec<ExclusionJson>,
}

/// A matching rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MatchJson {
    /// `allow`, `deny` or `pass`.
    pub action: &'static str,
    /// Admin and Baseline tiers only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    pub policy: RuleJson,
}

/// An `except` that kept the address out of a rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExclusionJson {
    pub policy: RuleJson,
    pub cidr: String,
    pub except: String,
}

fn action(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Allow => "allow",
        Verdict::Deny => "deny",
        Verdict::Pass => "pass",
    }
}

fn tier_name(tier: Tier) -> &'static str {
    match tier {
        Tier::Admin => "Admin tier",
        Tier::Normal => "NetworkPolicy tier",
        Tier::Baseline => "Baseline tier",
    }
}

fn outcome_word(outcome: TierOutcome) -> &'static str {
    match outcome {
        TierOutcome::Decided => "decided",
        TierOutcome::Passed => "passed",
        TierOutcome::Isolated => "isolated",
        TierOutcome::FellThrough => "no match",
        TierOutcome::NotReached => "not reached",
    }
}

/// `allow by NetworkPolicy x/web rule ingress[0]` or, with a priority, `... (priority 10)`.
fn rule(entry: &PolicyEntry) -> String {
    let priority = match entry.tier {
        Tier::Normal => String::new(),
        _ => format!(" (priority {})", entry.priority.value),
    };
    format!(
        "{} by {}{priority}",
        action(entry.verdict),
        entry.provenance
    )
}

/// The chain as JSON, one item per tier.
pub fn json(chain: &Chain<'_>) -> Vec<TierJson> {
    chain
        .tiers
        .iter()
        .map(|t| TierJson {
            tier: format!("{:?}", t.tier),
            outcome: outcome_word(t.outcome),
            matched: t
                .matched
                .iter()
                .map(|e| MatchJson {
                    action: action(e.verdict),
                    priority: (e.tier != Tier::Normal).then_some(e.priority.value),
                    policy: (&e.provenance).into(),
                })
                .collect(),
            isolating: t.isolating.iter().map(Into::into).collect(),
            excluded: t
                .excluded
                .iter()
                .map(|x| ExclusionJson {
                    policy: (&x.entry.provenance).into(),
                    cidr: x.cidr.to_string(),
                    except: x.except.to_string(),
                })
                .collect(),
        })
        .collect()
}

/// The chain in words, one line per tier (and one per `except` that kept the address out),
/// for an address named `remote`.
pub fn lines(chain: &Chain<'_>, remote: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for tier in &chain.tiers {
        lines.push(format!("{}: {}", tier_name(tier.tier), tier_line(tier)));
        for x in &tier.excluded {
            lines.push(format!(
                "  {remote} is in except {} of {} (cidr {}), so that rule does not match",
                x.except, x.entry.provenance, x.cidr
            ));
        }
    }
    if let Some(reason) = &chain.would_deny {
        lines.push(super::describe::would_deny(reason));
    }
    lines
}

fn tier_line(tier: &TierChain<'_>) -> String {
    let isolating = || {
        let names: Vec<String> = tier.isolating.iter().map(ToString::to_string).collect();
        names.join(", ")
    };
    let rest = |from: usize| -> String {
        let skipped: Vec<String> = tier.matched.iter().skip(from).map(|e| rule(e)).collect();
        skipped.join("; ")
    };
    match tier.outcome {
        TierOutcome::Decided => {
            let mut line = rule(tier.matched[0]);
            if tier.matched.len() > 1 {
                line.push_str(&format!("; also matched, not reached: {}", rest(1)));
            }
            line
        }
        TierOutcome::Passed => {
            let mut line = format!("{}: the rest of the tier is skipped", rule(tier.matched[0]));
            if tier.matched.len() > 1 {
                line.push_str(&format!(", including {}", rest(1)));
            }
            line
        }
        TierOutcome::Isolated => format!("no rule matched; isolated by {}: deny", isolating()),
        TierOutcome::FellThrough => "no rule matched and nothing isolates the pod".to_owned(),
        TierOutcome::NotReached if tier.matched.is_empty() => "not reached".to_owned(),
        TierOutcome::NotReached => format!("not reached (would have matched: {})", rest(0)),
    }
}

/// Notes on ties: rules of different policies at the same priority with different actions,
/// which upstream leaves undefined and netpol settles by policy name.
pub fn tie_notes(chain: &Chain<'_>) -> Vec<String> {
    chain
        .tiers
        .iter()
        .filter_map(|t| {
            let first = t.matched.first()?;
            let other = t.ties.first()?;
            Some(format!(
                "{} and {} both match at priority {} with different actions ({}, {}); upstream \
                 leaves their order undefined, netpol orders equal priorities by policy name, \
                 so {} decides",
                first.provenance,
                other.provenance,
                first.priority.value,
                action(first.verdict),
                action(other.verdict),
                first.provenance.name
            ))
        })
        .collect()
}
