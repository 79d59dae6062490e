//! Protocols and port matches.

use serde::{Deserialize, Serialize};

/// An L4 protocol a policy can name. `Any` is the wildcard used by rules without a protocol
/// (Cilium's `ANY`, or a peer-only rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
    Icmp,
    IcmpV6,
}

impl Protocol {
    /// The IANA protocol number, as HCN and the datapath key use it.
    pub fn number(self) -> u8 {
        match self {
            Protocol::Icmp => 1,
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
            Protocol::IcmpV6 => 58,
            Protocol::Sctp => 132,
        }
    }

    /// Whether the protocol has ports. ICMP rules can only match the whole protocol.
    pub fn has_ports(self) -> bool {
        matches!(self, Protocol::Tcp | Protocol::Udp | Protocol::Sctp)
    }

    pub fn parse(name: &str) -> Option<Protocol> {
        match name.to_ascii_uppercase().as_str() {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            "ICMP" => Some(Protocol::Icmp),
            "ICMPV6" => Some(Protocol::IcmpV6),
            _ => None,
        }
    }

    pub const ALL: [Protocol; 5] = [
        Protocol::Tcp,
        Protocol::Udp,
        Protocol::Sctp,
        Protocol::Icmp,
        Protocol::IcmpV6,
    ];
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
            Protocol::Icmp => "ICMP",
            Protocol::IcmpV6 => "ICMPv6",
        })
    }
}

/// Which destination ports of a protocol a rule matches.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PortMatch {
    /// Every port of the protocol.
    Any,
    /// An inclusive range; a single port is `Range(p, p)`. Never contains 0.
    Range(u16, u16),
    /// A container port name, resolved against the destination pod's own ports. It never matches
    /// an address outside the cluster.
    Named(String),
}

/// One port clause of a rule. `protocol: None` means every protocol (and then `port` is `Any`),
/// except for named ports, where `None` means "whatever protocol the container port declares".
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PortRule {
    pub protocol: Option<Protocol>,
    pub port: PortMatch,
}

impl PortRule {
    pub fn any() -> Self {
        Self {
            protocol: None,
            port: PortMatch::Any,
        }
    }
    pub fn protocol(protocol: Protocol) -> Self {
        Self {
            protocol: Some(protocol),
            port: PortMatch::Any,
        }
    }
    pub fn single(protocol: Protocol, port: u16) -> Self {
        Self {
            protocol: Some(protocol),
            port: PortMatch::Range(port, port),
        }
    }
    pub fn range(protocol: Protocol, start: u16, end: u16) -> Self {
        Self {
            protocol: Some(protocol),
            port: PortMatch::Range(start, end),
        }
    }
    pub fn named(protocol: Option<Protocol>, name: impl Into<String>) -> Self {
        Self {
            protocol,
            port: PortMatch::Named(name.into()),
        }
    }

    /// Whether this clause matches `protocol/port` towards a destination that declares
    /// `dest_ports` (None for a destination outside the cluster or a node).
    pub fn matches(&self, protocol: Protocol, port: u16, dest_ports: Option<&[NamedPort]>) -> bool {
        match &self.port {
            PortMatch::Any => self.protocol.is_none_or(|p| p == protocol),
            PortMatch::Range(lo, hi) => {
                self.protocol == Some(protocol) && (*lo..=*hi).contains(&port)
            }
            PortMatch::Named(name) => dest_ports.unwrap_or_default().iter().any(|np| {
                np.name == *name
                    && np.port == port
                    && np.protocol == protocol
                    && self.protocol.is_none_or(|p| p == protocol)
            }),
        }
    }
}

impl std::fmt::Display for PortRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let proto = self.protocol.map_or("ANY".to_string(), |p| p.to_string());
        match &self.port {
            PortMatch::Any => write!(f, "{proto}"),
            PortMatch::Range(lo, hi) if lo == hi => write!(f, "{proto}/{lo}"),
            PortMatch::Range(lo, hi) => write!(f, "{proto}/{lo}-{hi}"),
            PortMatch::Named(n) => write!(f, "{proto}/{n}"),
        }
    }
}

/// A named container port of a pod.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NamedPort {
    pub name: String,
    pub protocol: Protocol,
    pub port: u16,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_and_protocol_matching() {
        assert!(PortRule::any().matches(Protocol::Sctp, 9, None));
        assert!(PortRule::protocol(Protocol::Udp).matches(Protocol::Udp, 9, None));
        assert!(!PortRule::protocol(Protocol::Udp).matches(Protocol::Tcp, 9, None));
        assert!(PortRule::range(Protocol::Tcp, 80, 90).matches(Protocol::Tcp, 90, None));
        assert!(!PortRule::range(Protocol::Tcp, 80, 90).matches(Protocol::Tcp, 91, None));
        assert!(!PortRule::range(Protocol::Tcp, 80, 90).matches(Protocol::Sctp, 80, None));
    }

    #[test]
    fn named_ports_need_the_destination_to_declare_them() {
        let ports = [NamedPort {
            name: "http".into(),
            protocol: Protocol::Tcp,
            port: 8080,
        }];
        let rule = PortRule::named(Some(Protocol::Tcp), "http");
        assert!(rule.matches(Protocol::Tcp, 8080, Some(&ports)));
        assert!(!rule.matches(Protocol::Tcp, 80, Some(&ports)));
        assert!(!rule.matches(Protocol::Udp, 8080, Some(&ports)));
        assert!(!rule.matches(Protocol::Tcp, 8080, None));
        let udp_rule = PortRule::named(Some(Protocol::Udp), "http");
        assert!(!udp_rule.matches(Protocol::Udp, 8080, Some(&ports)));
        let any_proto = PortRule::named(None, "http");
        assert!(any_proto.matches(Protocol::Tcp, 8080, Some(&ports)));
    }
}
