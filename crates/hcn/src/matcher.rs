//! How HCN reads one ACL: protocol numbers with 256 for any, comma-separated address and port
//! lists, `a-b` port ranges, and a missing field matching anything. The simulator evaluates
//! packets with it and checks rule sets for priority conflicts.

use std::net::IpAddr;
use std::sync::Arc;

use crate::addresses::AddressRanges;
use crate::conventions::IngressSetField;
use crate::schema::{AclAction, AclDirection, AclPolicySetting, RuleType};

/// A field HCN would reject.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("ACL {id:?}: field `{field}` value {value:?}: {problem}")]
pub struct AclParseError {
    pub id: String,
    pub field: &'static str,
    pub value: String,
    pub problem: String,
}

/// One packet as an endpoint's ACLs see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    pub direction: AclDirection,
    /// The other side: the source of an `In` packet, the destination of an `Out` packet.
    pub remote_address: IpAddr,
    /// The IANA protocol number.
    pub protocol: u8,
    /// The endpoint's own port: the destination port of an `In` packet.
    pub local_port: u16,
    /// The other side's port: the destination port of an `Out` packet.
    pub remote_port: u16,
}

/// A parsed ACL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclMatcher {
    pub id: String,
    pub priority: u16,
    pub action: AclAction,
    pub direction: AclDirection,
    /// `RuleType: Host`: evaluated at the host layer, not the switch port.
    pub host_scope: bool,
    /// None matches every protocol.
    protocols: Option<Vec<u8>>,
    /// Shared: the simulator's endpoints hold copies of the same rules, and a rule naming a set
    /// shares the set's addresses.
    local_addresses: Option<Arc<AddressRanges>>,
    remote_addresses: Option<Arc<AddressRanges>>,
    /// The ids of network IP sets (`SetPolicy` of type `IPSET`) named in `RemoteAddresses`, as
    /// Azure NPM's ACLs name them. Empty once [`AclMatcher::resolve`]d.
    remote_sets: Vec<String>,
    /// The ids of IP sets named in `LocalAddresses`. Empty once resolved.
    local_sets: Vec<String>,
    local_ports: Option<Vec<(u16, u16)>>,
    remote_ports: Option<Vec<(u16, u16)>>,
}

impl AclMatcher {
    pub fn parse(acl: &AclPolicySetting) -> Result<Self, AclParseError> {
        let err = |field: &'static str, value: &str, problem: String| AclParseError {
            id: acl.id.clone(),
            field,
            value: value.to_string(),
            problem,
        };
        let (remote_addresses, remote_sets) = parse_with_sets(&acl.remote_addresses)
            .map_err(|p| err("RemoteAddresses", &acl.remote_addresses, p))?;
        let (local_addresses, local_sets) = parse_with_sets(&acl.local_addresses)
            .map_err(|p| err("LocalAddresses", &acl.local_addresses, p))?;
        Ok(AclMatcher {
            id: acl.id.clone(),
            priority: acl.priority,
            action: acl.action,
            direction: acl.direction,
            host_scope: acl.rule_type == Some(RuleType::Host),
            protocols: parse_protocols(&acl.protocols)
                .map_err(|p| err("Protocols", &acl.protocols, p))?,
            local_addresses,
            remote_addresses,
            remote_sets,
            local_sets,
            local_ports: parse_ports(&acl.local_ports)
                .map_err(|p| err("LocalPorts", &acl.local_ports, p))?,
            remote_ports: parse_ports(&acl.remote_ports)
                .map_err(|p| err("RemotePorts", &acl.remote_ports, p))?,
        })
    }

    /// The network IP sets the rule names in `RemoteAddresses`.
    pub fn remote_sets(&self) -> &[String] {
        &self.remote_sets
    }

    /// The network IP sets the rule names in `LocalAddresses`.
    pub fn local_sets(&self) -> &[String] {
        &self.local_sets
    }

    /// Every network IP set the rule names, in either field.
    pub fn named_sets(&self) -> impl Iterator<Item = &String> {
        self.remote_sets.iter().chain(&self.local_sets)
    }

    /// The rule with the IP sets it names replaced by their members (`sets` gives a set's
    /// members by id), as an HNS following `convention` evaluates it: a set named in the
    /// convention's field of an `In` rule (and in `RemoteAddresses` of an `Out` rule) is matched
    /// against the peer, a set in the other field against the endpoint's own address. An error
    /// names a set that does not exist.
    pub fn resolve<'a>(
        &self,
        sets: impl Fn(&str) -> Option<&'a Arc<AddressRanges>>,
        convention: IngressSetField,
    ) -> Result<AclMatcher, String> {
        if self.remote_sets.is_empty() && self.local_sets.is_empty() {
            return Ok(self.clone());
        }
        let members = |name: &String| {
            sets(name).ok_or_else(|| {
                format!(
                    "ACL {:?} names IP set {name:?}, which the network does not hold",
                    self.id
                )
            })
        };
        let swapped = self.direction == AclDirection::In && convention == IngressSetField::Local;
        let (peer_sets, own_sets) = if swapped {
            (&self.local_sets, &self.remote_sets)
        } else {
            (&self.remote_sets, &self.local_sets)
        };
        let with = |fixed: &Option<Arc<AddressRanges>>,
                    names: &[String]|
         -> Result<Option<Arc<AddressRanges>>, String> {
            let named = names.iter().map(members).collect::<Result<Vec<_>, _>>()?;
            Ok(match (fixed, named.as_slice()) {
                (_, []) => fixed.clone(),
                // The usual rule names one set and nothing else: it shares the set's addresses.
                (None, [only]) => Some(Arc::clone(only)),
                _ => Some(Arc::new(AddressRanges::union(
                    fixed.iter().chain(named.iter().copied()).map(|a| &**a),
                ))),
            })
        };
        Ok(AclMatcher {
            remote_addresses: with(&self.remote_addresses, peer_sets)?,
            local_addresses: with(&self.local_addresses, own_sets)?,
            remote_sets: Vec::new(),
            local_sets: Vec::new(),
            ..self.clone()
        })
    }

    /// Whether the rule matches `packet` on an endpoint with addresses `local`. A rule naming IP
    /// sets must be [`AclMatcher::resolve`]d first: unresolved, its sets match nothing.
    pub fn matches(&self, packet: &Packet, local: &[IpAddr]) -> bool {
        // Unresolved, a set matches no address rather than every one.
        self.remote_sets.is_empty()
            && self.local_sets.is_empty()
            && self.direction == packet.direction
            && self
                .protocols
                .as_ref()
                .is_none_or(|ps| ps.contains(&packet.protocol))
            && self
                .remote_addresses
                .as_ref()
                .is_none_or(|nets| nets.contains(&packet.remote_address))
            && self.local_addresses.as_ref().is_none_or(|nets| {
                local
                    .iter()
                    .any(|a| a.is_ipv4() == packet.remote_address.is_ipv4() && nets.contains(a))
            })
            && port_matches(&self.local_ports, packet.local_port)
            && port_matches(&self.remote_ports, packet.remote_port)
    }

    /// Whether some packet could match both rules.
    pub fn overlaps(&self, other: &AclMatcher) -> bool {
        self.direction == other.direction
            && optional_overlap(&self.protocols, &other.protocols, |a, b| a == b)
            && addresses_overlap(&self.remote_addresses, &other.remote_addresses)
            && addresses_overlap(&self.local_addresses, &other.local_addresses)
            && optional_overlap(&self.local_ports, &other.local_ports, ranges_overlap)
            && optional_overlap(&self.remote_ports, &other.remote_ports, ranges_overlap)
    }
}

impl AclMatcher {
    /// The fields in which two rules differ in meaning, by their HCN names. The order of list
    /// items, a host written with or without `/32`, and `256` against an absent protocol do not
    /// count, nor does the id: what HCN may normalise on read-back is not a difference.
    pub fn differences(&self, other: &AclMatcher) -> Vec<&'static str> {
        fn sorted<T: Ord + Clone>(list: &Option<Vec<T>>) -> Option<Vec<T>> {
            list.as_ref().map(|l| {
                let mut l = l.clone();
                l.sort();
                l.dedup();
                l
            })
        }
        let mut out = Vec::new();
        let mut differ = |field, same: bool| {
            if !same {
                out.push(field);
            }
        };
        differ("Action", self.action == other.action);
        differ("Direction", self.direction == other.direction);
        differ("Priority", self.priority == other.priority);
        differ(
            "Protocols",
            sorted(&self.protocols) == sorted(&other.protocols),
        );
        differ(
            "LocalAddresses",
            self.local_addresses == other.local_addresses
                && sorted(&Some(self.local_sets.clone()))
                    == sorted(&Some(other.local_sets.clone())),
        );
        differ(
            "RemoteAddresses",
            self.remote_addresses == other.remote_addresses
                && sorted(&Some(self.remote_sets.clone()))
                    == sorted(&Some(other.remote_sets.clone())),
        );
        differ(
            "LocalPorts",
            sorted(&self.local_ports) == sorted(&other.local_ports),
        );
        differ(
            "RemotePorts",
            sorted(&self.remote_ports) == sorted(&other.remote_ports),
        );
        out
    }
}

fn port_matches(ranges: &Option<Vec<(u16, u16)>>, port: u16) -> bool {
    ranges
        .as_ref()
        .is_none_or(|rs| rs.iter().any(|(lo, hi)| (*lo..=*hi).contains(&port)))
}

fn optional_overlap<T>(
    a: &Option<Vec<T>>,
    b: &Option<Vec<T>>,
    overlap: fn(&T, &T) -> bool,
) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.iter().any(|x| b.iter().any(|y| overlap(x, y))),
        _ => true,
    }
}

fn addresses_overlap(a: &Option<Arc<AddressRanges>>, b: &Option<Arc<AddressRanges>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.overlaps(b),
        _ => true,
    }
}

fn ranges_overlap(a: &(u16, u16), b: &(u16, u16)) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

fn items(field: &str) -> impl Iterator<Item = &str> {
    field.split(',').map(str::trim)
}

fn parse_protocols(field: &str) -> Result<Option<Vec<u8>>, String> {
    if field.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::new();
    for item in items(field) {
        match item.parse::<u16>() {
            Ok(256) => return Ok(None),
            Ok(n) if n < 256 => out.push(n as u8),
            _ => {
                return Err(format!(
                    "{item:?} is not a protocol number (0-255, or 256 for any)"
                ))
            }
        }
    }
    Ok(Some(out))
}

/// A `RemoteAddresses` item that names an IP set rather than an address: a letter, then
/// letters, digits, `-` and `_`, with at least one `-` or `_` (netpol's `netpol-set-…` and Azure
/// NPM's `azure-npm-…` have this form). HCN keywords such as `Any` are not set names, and stay
/// refused as unreadable addresses.
fn is_set_name(item: &str) -> bool {
    item.starts_with(|c: char| c.is_ascii_alphabetic())
        && item.contains(['-', '_'])
        && item
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && item.parse::<IpAddr>().is_err()
}

/// `RemoteAddresses` or `LocalAddresses`: addresses and CIDRs, and the ids of IP sets.
#[allow(clippy::type_complexity)]
fn parse_with_sets(field: &str) -> Result<(Option<Arc<AddressRanges>>, Vec<String>), String> {
    if field.is_empty() {
        return Ok((None, Vec::new()));
    }
    let (sets, addresses): (Vec<&str>, Vec<&str>) = items(field).partition(|i| is_set_name(i));
    let sets: Vec<String> = sets.into_iter().map(str::to_string).collect();
    if addresses.is_empty() {
        // Only sets: no literal address (until resolved, `matches` matches nothing).
        return Ok((None, sets));
    }
    let addresses = AddressRanges::parse(&addresses.join(","))
        .map_err(|e| format!("{e} (HCN rejects keywords like Any)"))?;
    Ok((Some(Arc::new(addresses)), sets))
}

fn parse_ports(field: &str) -> Result<Option<Vec<(u16, u16)>>, String> {
    if field.is_empty() {
        return Ok(None);
    }
    items(field)
        .map(|item| {
            let (lo, hi) = item.split_once('-').unwrap_or((item, item));
            match (lo.trim().parse::<u16>(), hi.trim().parse::<u16>()) {
                (Ok(lo), Ok(hi)) if lo <= hi => Ok((lo, hi)),
                _ => Err(format!("{item:?} is not a port or an ascending a-b range")),
            }
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(protocols: &str, remote: &str, local_ports: &str) -> AclPolicySetting {
        AclPolicySetting {
            id: "r".into(),
            protocols: protocols.into(),
            action: AclAction::Allow,
            direction: AclDirection::In,
            local_addresses: String::new(),
            remote_addresses: remote.into(),
            local_ports: local_ports.into(),
            remote_ports: String::new(),
            rule_type: None,
            priority: 1,
        }
    }

    fn packet(remote: &str, protocol: u8, port: u16) -> Packet {
        Packet {
            direction: AclDirection::In,
            remote_address: remote.parse().unwrap(),
            protocol,
            local_port: port,
            remote_port: 50000,
        }
    }

    #[test]
    fn lists_ranges_and_any() {
        let m = AclMatcher::parse(&acl("6", "10.0.0.0/8,192.0.2.1", "80,8000-8080")).unwrap();
        assert!(m.matches(&packet("10.9.9.9", 6, 80), &[]));
        assert!(m.matches(&packet("192.0.2.1", 6, 8080), &[]));
        assert!(!m.matches(&packet("192.0.2.2", 6, 80), &[]));
        assert!(!m.matches(&packet("10.9.9.9", 17, 80), &[]));
        assert!(!m.matches(&packet("10.9.9.9", 6, 81), &[]));
        let any = AclMatcher::parse(&acl("256", "", "")).unwrap();
        assert!(any.matches(&packet("fd00::1", 132, 9), &[]));
    }

    #[test]
    fn malformed_fields_are_rejected_by_name() {
        let e = AclMatcher::parse(&acl("6", "Any", "")).unwrap_err();
        assert_eq!(e.field, "RemoteAddresses");
        let e = AclMatcher::parse(&acl("6", "", "90-80")).unwrap_err();
        assert_eq!(e.field, "LocalPorts");
        let e = AclMatcher::parse(&acl("TCP", "", "")).unwrap_err();
        assert_eq!(e.field, "Protocols");
    }

    #[test]
    fn differences_ignore_what_hcn_may_normalise() {
        let a = AclMatcher::parse(&acl("256", "10.0.0.1,10.2.0.0/16", "80,90")).unwrap();
        let same = AclMatcher::parse(&acl("", "10.2.0.0/16,10.0.0.1/32", "90,80")).unwrap();
        assert!(a.differences(&same).is_empty());
        let other = AclMatcher::parse(&acl("6", "10.0.0.1", "80,90")).unwrap();
        assert_eq!(a.differences(&other), ["Protocols", "RemoteAddresses"]);
    }

    #[test]
    fn set_references_resolve_to_their_members_and_match_nothing_before() {
        let m = AclMatcher::parse(&acl("6", "netpol-set-00ff", "80")).unwrap();
        assert_eq!(m.remote_sets(), ["netpol-set-00ff"]);
        // Unresolved, a set matches no address rather than every one.
        assert!(!m.matches(&packet("10.1.0.1", 6, 80), &[]));
        let members = Arc::new(AddressRanges::parse("10.1.0.1/32").unwrap());
        let resolved = m
            .resolve(
                |id| (id == "netpol-set-00ff").then_some(&members),
                IngressSetField::Remote,
            )
            .unwrap();
        assert!(resolved.matches(&packet("10.1.0.1", 6, 80), &[]));
        assert!(!resolved.matches(&packet("10.1.0.2", 6, 80), &[]));
        assert!(m
            .resolve(|_| None, IngressSetField::Remote)
            .unwrap_err()
            .contains("netpol-set-00ff"));
        // On an HNS that matches an ingress set named in LocalAddresses against the peer, a set
        // in RemoteAddresses is matched against the endpoint's own address instead.
        let swapped = m
            .resolve(|_| Some(&members), IngressSetField::Local)
            .unwrap();
        let own: std::net::IpAddr = "10.1.0.9".parse().unwrap();
        assert!(!swapped.matches(&packet("10.1.0.1", 6, 80), &[own]));
        let mut local = acl("6", "", "80");
        local.local_addresses = "netpol-set-00ff".into();
        let local = AclMatcher::parse(&local).unwrap();
        assert_eq!(local.local_sets(), ["netpol-set-00ff"]);
        let resolved = local
            .resolve(|_| Some(&members), IngressSetField::Local)
            .unwrap();
        assert!(resolved.matches(&packet("10.1.0.1", 6, 80), &[own]));
        assert!(!resolved.matches(&packet("10.1.0.2", 6, 80), &[own]));
        let other = AclMatcher::parse(&acl("6", "netpol-set-0100", "80")).unwrap();
        assert_eq!(m.differences(&other), ["RemoteAddresses"]);
    }

    #[test]
    fn overlap_needs_every_field_to_intersect() {
        let a = AclMatcher::parse(&acl("6", "10.0.0.0/8", "80-90")).unwrap();
        let b = AclMatcher::parse(&acl("256", "10.1.0.1", "90")).unwrap();
        let c = AclMatcher::parse(&acl("6", "10.1.0.1", "91")).unwrap();
        let d = AclMatcher::parse(&acl("17", "", "")).unwrap();
        assert!(a.overlaps(&b));
        assert!(!a.overlaps(&c));
        assert!(!a.overlaps(&d));
    }
}
