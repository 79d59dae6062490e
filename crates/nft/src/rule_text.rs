//! One chain rule as nft text: its matches (remote set, protocol, ports), its counter and where
//! it goes (return, drop, a log chain, an audit chain).

use netpol_engine::Protocol;

use crate::ruleset::{ChainRule, ChainVerdict};

/// One chain rule, with a counter, e.g. `ip saddr @a4i_1 meta l4proto tcp th dport { 80, 8000-8080 } counter return`;
/// a drop rule drops at once.
pub fn render_rule(rule: &ChainRule) -> String {
    render_rule_logged(rule, None)
}

/// [`render_rule`], a drop rule jumping to the log chain `log` instead of dropping itself where
/// one is given (the log chain drops).
pub fn render_rule_logged(rule: &ChainRule, log: Option<&str>) -> String {
    render_enforced_rule(rule, log, None)
}

/// A rule of an endpoint chain: [`render_rule_logged`], an allow going to the audit chain
/// `audit` instead of returning where the endpoint has one (which returns, or logs a
/// would-deny, for it).
pub(crate) fn render_enforced_rule(
    rule: &ChainRule,
    log: Option<&str>,
    audit: Option<&str>,
) -> String {
    let mut parts = rule_matches(rule);
    // Every rule counts what it decides (`crate::counters` reads them back).
    parts.push("counter".to_string());
    parts.push(match (rule.verdict, log, audit) {
        (ChainVerdict::Return | ChainVerdict::WouldDeny, _, Some(chain)) => format!("goto {chain}"),
        (ChainVerdict::Return | ChainVerdict::WouldDeny, _, None) => "return".to_string(),
        (ChainVerdict::Drop, None, _) => "drop".to_string(),
        (ChainVerdict::Drop, Some(chain), _) => format!("jump {chain}"),
    });
    parts.join(" ")
}

/// A rule of an audit chain: a would-deny counts and goes to its log chain `log` (which ends,
/// so the packet passes); an allow returns uncounted (the enforced chain's allow counted it).
pub(crate) fn render_audit_rule(rule: &ChainRule, log: Option<&str>) -> String {
    let mut parts = rule_matches(rule);
    match (rule.verdict, log) {
        (ChainVerdict::WouldDeny, Some(chain)) => {
            parts.push(format!("counter goto {chain}"));
        }
        (ChainVerdict::WouldDeny, None) => parts.push("counter return".to_string()),
        // Audit chains hold no drop: `as_would_be` made them would-denies.
        (ChainVerdict::Return | ChainVerdict::Drop, _) => parts.push("return".to_string()),
    }
    parts.join(" ")
}

/// The matches of a rule: its remote set, protocol and ports.
fn rule_matches(rule: &ChainRule) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    if let Some(remote) = &rule.remote {
        let family = if remote.is_v6() { "ip6" } else { "ip" };
        let field = if remote.source { "saddr" } else { "daddr" };
        parts.push(format!("{family} {field} @{}", remote.set.name));
    }
    if let Some(protocol) = rule.protocol {
        parts.push(format!("meta l4proto {}", protocol_name(protocol)));
    }
    if !rule.dports.is_empty() {
        let ports: Vec<String> = rule
            .dports
            .iter()
            .map(|&(lo, hi)| {
                if lo == hi {
                    lo.to_string()
                } else {
                    format!("{lo}-{hi}")
                }
            })
            .collect();
        parts.push(format!("th dport {}", set_or_single(ports)));
    }
    parts
}

/// nft's keywords for the protocols with ports, numbers otherwise (ICMP for IPv4 and IPv6 are
/// different protocols; netpol's key names each).
fn protocol_name(protocol: Protocol) -> String {
    match protocol {
        Protocol::Tcp => "tcp".into(),
        Protocol::Udp => "udp".into(),
        Protocol::Sctp => "sctp".into(),
        other => other.number().to_string(),
    }
}

/// A single value as itself, several as an anonymous set (nft makes it an interval set when it
/// holds prefixes or ranges; the compiler has merged overlaps away, as nft requires).
fn set_or_single(mut values: Vec<String>) -> String {
    if values.len() == 1 {
        values.pop().unwrap_or_default()
    } else {
        format!("{{ {} }}", values.join(", "))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ruleset::{AddressSet, RemoteMatch};
    use netpol_engine::reference::Reason;
    use std::sync::Arc;

    /// An interval set of `nets` for tests.
    pub(crate) fn set(name: &str, v6: bool, nets: &[&str]) -> Arc<AddressSet> {
        Arc::new(AddressSet {
            name: name.into(),
            v6,
            interval: true,
            nets: nets.iter().map(|n| n.parse().unwrap()).collect(),
            revision: 0,
            patch: None,
        })
    }

    #[test]
    fn a_rule_renders_its_set_ports_and_verdict() {
        let rule = ChainRule {
            remote: Some(RemoteMatch {
                source: true,
                set: set("a4i_1", false, &["10.0.0.0/8", "192.168.1.1/32"]).reference(),
            }),
            protocol: Some(Protocol::Tcp),
            dports: vec![(80, 80), (8000, 8080)],
            verdict: ChainVerdict::Return,
            reason: Arc::new(Reason::Default),
        };
        assert_eq!(
            render_rule(&rule),
            "ip saddr @a4i_1 meta l4proto tcp th dport { 80, 8000-8080 } counter return"
        );
        let v6 = ChainRule {
            remote: Some(RemoteMatch {
                source: false,
                set: set("a6i_2", true, &["fd00::/16"]).reference(),
            }),
            protocol: Some(Protocol::IcmpV6),
            dports: vec![],
            verdict: ChainVerdict::Drop,
            reason: Arc::new(Reason::Default),
        };
        assert_eq!(
            render_rule(&v6),
            "ip6 daddr @a6i_2 meta l4proto 58 counter drop"
        );
    }
}
