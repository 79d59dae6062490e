//! The ruleset as an `nft -f` script. The script deletes and re-creates netpol's table in one
//! transaction: the kernel swaps the whole table atomically or, on any error, keeps the old one.
//! Nothing outside table `inet netpol` is named.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::net::IpAddr;

use ipnet::IpNet;
use netpol_engine::{Direction, Protocol};
use sha2::{Digest, Sha256};

use crate::ruleset::{ChainRule, ChainVerdict, Ruleset};

/// The family and name of the one table netpol owns.
pub const TABLE: &str = "inet netpol";

/// The name of the base chain on the forward hook.
pub const FORWARD_CHAIN: &str = "forward";

/// Why a ruleset cannot be written as a script.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScriptError {
    #[error("address {address} belongs to endpoints {first} and {second}; a packet could not tell them apart")]
    SharedAddress {
        address: IpAddr,
        first: String,
        second: String,
    },
}

/// The chain of one endpoint direction: `ep_` plus 64 bits of the SHA-256 of the endpoint key, so
/// names are stable across restarts and valid whatever characters the key holds.
pub fn chain_name(endpoint: &str, direction: Direction) -> String {
    let digest = Sha256::digest(endpoint.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let suffix = match direction {
        Direction::Ingress => "in",
        Direction::Egress => "out",
    };
    format!("ep_{hex}_{suffix}")
}

/// The script that replaces netpol's table with `ruleset`.
pub fn render(ruleset: &Ruleset) -> Result<String, ScriptError> {
    let mut out = format!("add table {TABLE}\ndelete table {TABLE}\ntable {TABLE} {{\n");
    out.push_str(&render_chains(ruleset));
    out.push_str(&render_base_chain(ruleset)?);
    out.push_str("}\n");
    Ok(out)
}

/// Every endpoint chain (they come before the base chain that jumps to them).
pub fn render_chains(ruleset: &Ruleset) -> String {
    let mut out = String::new();
    for (key, chains) in &ruleset.endpoints {
        for direction in Direction::BOTH {
            let comment = format!("{direction} of {}", key.replace('"', "'"));
            let _ = writeln!(
                out,
                "\tchain {} {{\n\t\tcomment \"{comment}\"",
                chain_name(key, direction)
            );
            for rule in chains.chain(direction) {
                let _ = writeln!(out, "\t\t{}", render_rule(rule));
            }
            out.push_str("\t}\n");
        }
    }
    out
}

/// The forward-hook base chain: replies first, then the source's egress chain, then the
/// destination's ingress chain.
pub fn render_base_chain(ruleset: &Ruleset) -> Result<String, ScriptError> {
    let mut owner: BTreeMap<IpAddr, &str> = BTreeMap::new();
    for (key, chains) in &ruleset.endpoints {
        for address in &chains.addresses {
            if let Some(first) = owner.insert(*address, key) {
                return Err(ScriptError::SharedAddress {
                    address: *address,
                    first: first.to_string(),
                    second: key.clone(),
                });
            }
        }
    }
    let mut out = format!(
        "\tchain {FORWARD_CHAIN} {{\n\t\ttype filter hook forward priority filter; policy accept;\n\
         \t\tct state established,related accept\n"
    );
    for (direction, field) in [(Direction::Egress, "saddr"), (Direction::Ingress, "daddr")] {
        for v6 in [false, true] {
            let elements: Vec<String> = owner
                .iter()
                .filter(|(a, _)| a.is_ipv6() == v6)
                .map(|(a, key)| format!("{a} : jump {}", chain_name(key, direction)))
                .collect();
            if !elements.is_empty() {
                let family = if v6 { "ip6" } else { "ip" };
                let _ = writeln!(
                    out,
                    "\t\t{family} {field} vmap {{ {} }}",
                    elements.join(", ")
                );
            }
        }
    }
    out.push_str("\t}\n");
    Ok(out)
}

/// One chain rule, e.g. `ip saddr { 10.0.0.0/8, 10.1.0.1 } meta l4proto tcp th dport { 80, 8000-8080 } return`.
pub fn render_rule(rule: &ChainRule) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(remote) = &rule.remote {
        let family = if remote.is_v6() { "ip6" } else { "ip" };
        let field = if remote.source { "saddr" } else { "daddr" };
        let nets: Vec<String> = remote.nets.iter().map(render_net).collect();
        parts.push(format!("{family} {field} {}", set_or_single(nets)));
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
    parts.push(
        match rule.verdict {
            ChainVerdict::Return => "return",
            ChainVerdict::Drop => "drop",
        }
        .to_string(),
    );
    parts.join(" ")
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

fn render_net(net: &IpNet) -> String {
    if net.prefix_len() == net.max_prefix_len() {
        net.addr().to_string()
    } else {
        net.to_string()
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
mod tests {
    use super::*;
    use crate::ruleset::RemoteMatch;
    use netpol_engine::reference::Reason;
    use std::sync::Arc;

    #[test]
    fn a_rule_renders_sets_ranges_and_its_verdict() {
        let rule = ChainRule {
            remote: Some(RemoteMatch {
                source: true,
                nets: vec![
                    "10.0.0.0/8".parse().unwrap(),
                    "192.168.1.1/32".parse().unwrap(),
                ],
            }),
            protocol: Some(Protocol::Tcp),
            dports: vec![(80, 80), (8000, 8080)],
            verdict: ChainVerdict::Return,
            reason: Arc::new(Reason::Default),
        };
        assert_eq!(
            render_rule(&rule),
            "ip saddr { 10.0.0.0/8, 192.168.1.1 } meta l4proto tcp th dport { 80, 8000-8080 } return"
        );
        let v6 = ChainRule {
            remote: Some(RemoteMatch {
                source: false,
                nets: vec!["fd00::/16".parse().unwrap()],
            }),
            protocol: Some(Protocol::IcmpV6),
            dports: vec![],
            verdict: ChainVerdict::Drop,
            reason: Arc::new(Reason::Default),
        };
        assert_eq!(render_rule(&v6), "ip6 daddr fd00::/16 meta l4proto 58 drop");
    }

    #[test]
    fn chain_names_are_stable_identifiers() {
        let name = chain_name("x/a \"quoted\"", Direction::Ingress);
        assert_eq!(name, chain_name("x/a \"quoted\"", Direction::Ingress));
        assert!(name.starts_with("ep_") && name.ends_with("_in"));
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    }
}
