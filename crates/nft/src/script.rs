//! The ruleset as `nft -f` scripts: one that deletes and re-creates netpol's table, and one that
//! applies a diff. Either is one transaction: the kernel applies all of it or, on any error, none.
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

/// netpol's table as chains named by their content: a chain's name ends in a hash of its lines,
/// so a changed chain is a new chain, an unchanged one keeps its name, and comparing the chain
/// names in the kernel with these is a complete diff (see [`crate::programmer`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    /// Endpoint chains by name: their lines (a comment, then the rules).
    pub chains: BTreeMap<String, Vec<String>>,
    /// The forward-hook base chain: its name and lines.
    pub base: (String, Vec<String>),
}

/// The prefix of the base chain's name (`forward_<hash>`).
pub const BASE_PREFIX: &str = "forward_";

/// 64 bits of the SHA-256 of `parts`, in hex.
fn hash<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    let mut digest = Sha256::new();
    for part in parts {
        digest.update(part.as_bytes());
        digest.update(b"\n");
    }
    digest.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The chain of one endpoint direction with these lines: `ep_` plus a hash of the endpoint key
/// (stable across restarts, valid whatever characters the key holds), the direction, and a hash
/// of the lines.
pub fn chain_name(endpoint: &str, direction: Direction, lines: &[String]) -> String {
    let suffix = match direction {
        Direction::Ingress => "in",
        Direction::Egress => "out",
    };
    let content = hash(lines.iter().map(String::as_str));
    format!("ep_{}_{suffix}_{content}", hash([endpoint]))
}

impl Table {
    pub fn new(ruleset: &Ruleset) -> Result<Table, ScriptError> {
        let mut table = Table::default();
        let mut names: BTreeMap<(&str, Direction), String> = BTreeMap::new();
        for (key, chains) in &ruleset.endpoints {
            for direction in Direction::BOTH {
                let mut lines = vec![format!(
                    "comment \"{direction} of {}\"",
                    key.replace('"', "'")
                )];
                lines.extend(chains.chain(direction).iter().map(render_rule));
                let name = chain_name(key, direction, &lines);
                names.insert((key.as_str(), direction), name.clone());
                table.chains.insert(name, lines);
            }
        }
        let lines = base_chain(ruleset, &names)?;
        let name = format!("{BASE_PREFIX}{}", hash(lines.iter().map(String::as_str)));
        table.base = (name, lines);
        Ok(table)
    }

    /// Every chain name, the base chain's included.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.chains
            .keys()
            .map(String::as_str)
            .chain([self.base.0.as_str()])
    }
}

/// `chain NAME { lines }`, indented for a table block.
fn chain_block(name: &str, lines: &[String]) -> String {
    let mut out = format!("\tchain {name} {{\n");
    for line in lines {
        let _ = writeln!(out, "\t\t{line}");
    }
    out.push_str("\t}\n");
    out
}

/// The script that replaces netpol's table with `ruleset` in one transaction.
pub fn render(ruleset: &Ruleset) -> Result<String, ScriptError> {
    let table = Table::new(ruleset)?;
    let mut out = format!("add table {TABLE}\ndelete table {TABLE}\ntable {TABLE} {{\n");
    // Endpoint chains come before the base chain that jumps to them.
    for (name, lines) in &table.chains {
        out.push_str(&chain_block(name, lines));
    }
    out.push_str(&chain_block(&table.base.0, &table.base.1));
    out.push_str("}\n");
    Ok(out)
}

/// A script that adds `chains` (by name, from `table`) and deletes `obsolete` chain names, in
/// an order the kernel accepts in one transaction: new chains, then the new base chain, then
/// deletions (the old base chain first, which releases its jumps).
pub fn render_changes(
    table: &Table,
    create_table: bool,
    add: &[&str],
    obsolete: &[&str],
) -> String {
    let mut out = String::new();
    if create_table {
        let _ = writeln!(out, "add table {TABLE}");
    }
    let mut block = String::new();
    for name in add.iter().filter(|n| **n != table.base.0) {
        if let Some(lines) = table.chains.get(*name) {
            block.push_str(&chain_block(name, lines));
        }
    }
    if add.contains(&table.base.0.as_str()) {
        block.push_str(&chain_block(&table.base.0, &table.base.1));
    }
    if !block.is_empty() {
        let _ = write!(out, "table {TABLE} {{\n{block}}}\n");
    }
    let mut obsolete: Vec<&&str> = obsolete.iter().collect();
    obsolete.sort_by_key(|n| !n.starts_with(BASE_PREFIX));
    for name in obsolete {
        let _ = writeln!(out, "delete chain {TABLE} {name}");
    }
    out
}

/// The forward-hook base chain: replies first, then the source's egress chain, then the
/// destination's ingress chain.
fn base_chain(
    ruleset: &Ruleset,
    names: &BTreeMap<(&str, Direction), String>,
) -> Result<Vec<String>, ScriptError> {
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
    let mut lines = vec![
        "type filter hook forward priority filter; policy accept;".to_string(),
        "ct state established,related accept".to_string(),
    ];
    for (direction, field) in [(Direction::Egress, "saddr"), (Direction::Ingress, "daddr")] {
        for v6 in [false, true] {
            let elements: Vec<String> = owner
                .iter()
                .filter(|(a, _)| a.is_ipv6() == v6)
                .map(|(a, key)| format!("{a} : jump {}", names[&(*key, direction)]))
                .collect();
            if !elements.is_empty() {
                let family = if v6 { "ip6" } else { "ip" };
                lines.push(format!(
                    "{family} {field} vmap {{ {} }}",
                    elements.join(", ")
                ));
            }
        }
    }
    Ok(lines)
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
    fn chain_names_are_stable_identifiers_that_change_with_content() {
        let lines = vec!["drop".to_string()];
        let name = chain_name("x/a \"quoted\"", Direction::Ingress, &lines);
        assert_eq!(
            name,
            chain_name("x/a \"quoted\"", Direction::Ingress, &lines)
        );
        assert_ne!(name, chain_name("x/a \"quoted\"", Direction::Ingress, &[]));
        assert!(name.starts_with("ep_") && name.contains("_in_"));
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    }
}
