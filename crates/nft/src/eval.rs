//! nftables semantics over the model, in process: what the kernel does with the first packet of
//! a flow in netpol's table. Used by the property tests (against the MapState lookup) and to
//! name the rule behind a real packet's fate.

use std::net::IpAddr;

use netpol_engine::{Direction, Protocol};

use crate::ruleset::{ChainRule, ChainVerdict, Holder, Ruleset};

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
}

/// Runs the dispatch chain every base chain (forward, input, output) jumps to: the source's
/// egress chain, then the destination's ingress chain; a `drop` ends it, the policy accepts what
/// is left. The hooks differ only in which packets reach them, so one evaluation serves all three.
pub fn evaluate<'a>(ruleset: &'a Ruleset, packet: &Packet) -> Evaluation<'a> {
    let mut out = Evaluation {
        accepted: true,
        chains: Vec::new(),
        isolated: None,
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
        let rule = chains
            .chain(direction)
            .iter()
            .find(|r| matches(ruleset, r, packet));
        out.chains.push((key, direction, rule));
        if rule.is_some_and(|r| r.verdict == ChainVerdict::Drop) {
            out.accepted = false;
            break;
        }
    }
    out
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
