//! nftables semantics over the model, in process: what the kernel does with the first packet of
//! a flow in netpol's table. Used by the property tests (against the MapState lookup) and to
//! name the rule behind a real packet's fate.

use std::net::IpAddr;

use netpol_engine::{Direction, Protocol};

use crate::ruleset::{ChainRule, ChainVerdict, EndpointChains, Holder, Ruleset};

/// The first packet of a flow (conntrack state `new`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    pub source: IpAddr,
    pub destination: IpAddr,
    pub protocol: Protocol,
    pub dport: u16,
}

/// The fate of a packet and the chain rule that decided it, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evaluation<'a> {
    pub accepted: bool,
    /// Each endpoint chain the packet went through: (endpoint, direction, the rule that matched).
    /// A chain without a matching rule returns (None).
    pub chains: Vec<(&'a str, Direction, Option<&'a ChainRule>)>,
    /// The isolated endpoint (its chains were refused) that dropped the packet, if one did.
    pub isolated: Option<&'a str>,
    /// The would-denies the packet met in audit chains (it passed them): (endpoint, direction,
    /// the rule).
    pub would_deny: Vec<(&'a str, Direction, &'a ChainRule)>,
}

/// Runs the dispatch chain every base chain (forward, input, output) jumps to: the source's
/// egress chain, then the destination's ingress chain (each allow going through the endpoint's
/// audit chain of that direction, if it has one); a `drop` ends it, the policy accepts what is
/// left. The hooks differ only in which packets reach them, so one evaluation serves all three.
pub fn evaluate<'a>(ruleset: &'a Ruleset, packet: &Packet) -> Evaluation<'a> {
    let mut out = Evaluation {
        accepted: true,
        chains: Vec::new(),
        isolated: None,
        would_deny: Vec::new(),
    };
    for (direction, address) in [
        (Direction::Egress, packet.source),
        (Direction::Ingress, packet.destination),
    ] {
        let (key, chains) = match ruleset.holder_of(address) {
            None => continue,
            Some(Holder::Isolated(key)) => {
                out.accepted = false;
                out.isolated = Some(key);
                break;
            }
            Some(Holder::Chains(key, chains)) => (key, chains),
        };
        let side = evaluate_side(ruleset, chains, direction, packet);
        out.chains.push((key, direction, side.rule));
        if let Some(rule) = side.would_deny {
            out.would_deny.push((key, direction, rule));
        }
        if side.rule.is_some_and(|r| r.verdict == ChainVerdict::Drop) {
            out.accepted = false;
            break;
        }
    }
    out
}

/// What one endpoint's chain of one direction did with a packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Side<'a> {
    /// The rule of the endpoint chain that matched; None: the chain returned.
    pub rule: Option<&'a ChainRule>,
    /// The would-deny of the audit chain the matching allow went to, if it met one.
    pub would_deny: Option<&'a ChainRule>,
}

/// One endpoint chain of `chains` (an endpoint of `ruleset`) and, after an allow, its audit
/// chain: the first match of each decides.
pub fn evaluate_side<'a>(
    ruleset: &Ruleset,
    chains: &'a EndpointChains,
    direction: Direction,
    packet: &Packet,
) -> Side<'a> {
    let first = |rules: &'a [ChainRule]| rules.iter().find(|r| matches(ruleset, r, packet));
    let rule = first(chains.chain(direction));
    // An allow goes to the audit chain where there is one; what it matches first is the
    // would-be verdict, and the packet goes on either way.
    let would_deny = rule
        .filter(|r| r.verdict != ChainVerdict::Drop)
        .and_then(|_| first(chains.audit(direction)))
        .filter(|r| r.verdict == ChainVerdict::WouldDeny);
    Side { rule, would_deny }
}

/// Whether every match of `rule` (a rule of `ruleset`, whose sets it names) holds for `packet`.
pub fn matches(ruleset: &Ruleset, rule: &ChainRule, packet: &Packet) -> bool {
    if let Some(remote) = &rule.remote {
        let address = if remote.source {
            packet.source
        } else {
            packet.destination
        };
        // `ip saddr` never matches an IPv6 packet and the reverse: containment checks family.
        if !ruleset.set_holds(&remote.set, address) {
            return false;
        }
    }
    if rule.protocol.is_some_and(|p| p != packet.protocol) {
        return false;
    }
    rule.dports.is_empty()
        || rule
            .dports
            .iter()
            .any(|&(lo, hi)| lo <= packet.dport && packet.dport <= hi)
}
