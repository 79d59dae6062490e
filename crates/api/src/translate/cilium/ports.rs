//! `toPorts`: the L4 part of a Cilium rule.
//!
//! Only ports and protocols are read. A port rule's L7 and TLS fields are rejected, not dropped:
//! enforcing only the L4 part of an L7 rule would allow more than the policy says.

use netpol_engine::{PortRule, Protocol};

use crate::crd::cilium::{CiliumPort, CiliumPortProtocol, CiliumPortRule};
use crate::error::{FieldError, FieldPath};
use crate::translate::ports::{named_port, port_number, port_range};

/// The protocols a Cilium `ANY` port expands to.
const PORT_PROTOCOLS: [Protocol; 3] = [Protocol::Tcp, Protocol::Udp, Protocol::Sctp];

/// `toPorts`: absent or empty means all traffic; an element without `ports` too.
pub(super) fn to_ports(
    rules: Option<&[CiliumPortRule]>,
    path: &FieldPath,
) -> Result<Vec<PortRule>, FieldError> {
    let mut out = Vec::new();
    for (i, rule) in rules.into_iter().flatten().enumerate() {
        let rule_path = path.index(i);
        let unsupported = [
            ("rules", rule.rules.is_some(), "L7 rules are not supported"),
            (
                "serverNames",
                rule.server_names.is_some(),
                "TLS server names are L7 and not supported",
            ),
            (
                "listener",
                rule.listener.is_some(),
                "L7 listeners are not supported",
            ),
            (
                "originatingTLS",
                rule.originating_tls.is_some(),
                "TLS interception is L7 and not supported",
            ),
            (
                "terminatingTLS",
                rule.terminating_tls.is_some(),
                "TLS interception is L7 and not supported",
            ),
        ];
        if let Some((field, _, why)) = unsupported.iter().find(|(_, set, _)| *set) {
            return Err(rule_path.field(field).unsupported(why));
        }
        let ports = rule.ports.as_deref().unwrap_or_default();
        if ports.is_empty() {
            out.push(PortRule::any());
        }
        for (j, port) in ports.iter().enumerate() {
            out.extend(port_protocol(port, &rule_path.field("ports").index(j))?);
        }
    }
    Ok(out)
}

/// One `ports` element. `protocol` defaults to ANY; port `"0"` or absent means every port.
fn port_protocol(port: &CiliumPortProtocol, path: &FieldPath) -> Result<Vec<PortRule>, FieldError> {
    let protocol = match port.protocol.as_deref() {
        None | Some("ANY") => None,
        Some("TCP") => Some(Protocol::Tcp),
        Some("UDP") => Some(Protocol::Udp),
        Some("SCTP") => Some(Protocol::Sctp),
        Some(p @ ("ICMP" | "ICMPV6" | "VRRP" | "IGMP")) => {
            return Err(path.field("protocol").error(format!(
                "unsupported: protocol {p} (only TCP, UDP, SCTP and ANY are supported)"
            )))
        }
        Some(other) => {
            return Err(path.field("protocol").error(format!(
                "unknown protocol {other:?} (expected TCP, UDP, SCTP or ANY)"
            )))
        }
    };
    let number = match &port.port {
        None => Some(0),
        Some(CiliumPort::Number(n)) => Some(*n),
        Some(CiliumPort::Text(text)) => text.trim().parse::<i64>().ok(),
    };
    let end_port = port.end_port.filter(|e| *e != 0);
    let rules_for = |port: Option<(u16, u16)>| -> Vec<PortRule> {
        match (protocol, port) {
            (None, None) => vec![PortRule::any()],
            (Some(p), None) => vec![PortRule::protocol(p)],
            (Some(p), Some((lo, hi))) => vec![PortRule::range(p, lo, hi)],
            (None, Some((lo, hi))) => PORT_PROTOCOLS
                .iter()
                .map(|p| PortRule::range(*p, lo, hi))
                .collect(),
        }
    };
    match (number, end_port) {
        (Some(0), None) => Ok(rules_for(None)),
        (Some(0), Some(_)) => Err(path
            .field("endPort")
            .error("endPort requires a non-zero port")),
        (Some(n), None) => {
            let single = port_number(n, &path.field("port"))?;
            Ok(rules_for(Some((single, single))))
        }
        (Some(n), Some(end)) => Ok(rules_for(Some(port_range(
            path,
            ("port", n),
            ("endPort", end),
        )?))),
        (None, Some(_)) => Err(path
            .field("endPort")
            .error("endPort cannot be used with a named port")),
        (None, None) => {
            let Some(CiliumPort::Text(name)) = &port.port else {
                return Err(path.field("port").error("invalid port"));
            };
            let name = named_port(&name.to_ascii_lowercase(), &path.field("port"))?;
            Ok(vec![PortRule::named(protocol, name)])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::translate::testing::*;
    use netpol_engine::Protocol::*;

    #[test]
    fn to_ports_protocols_ranges_and_named_ports() {
        let e = entries(&cnp(
            "x",
            r#"
spec:
  endpointSelector: {}
  ingress:
  - fromEntities: [all]
    toPorts:
    - ports:
      - {port: "53"}
      - {port: "8000", endPort: 8010, protocol: UDP}
      - {port: http}
      - {port: dns, protocol: UDP}
      - {port: "0", protocol: SCTP}
      - {port: 443, protocol: TCP}
"#,
        ));
        assert_eq!(
            e[0].ports,
            vec![
                PortRule::single(Tcp, 53),
                PortRule::single(Udp, 53),
                PortRule::single(Sctp, 53),
                PortRule::range(Udp, 8000, 8010),
                PortRule::named(None, "http"),
                PortRule::named(Some(Udp), "dns"),
                PortRule::protocol(Sctp),
                PortRule::single(Tcp, 443),
            ]
        );
        let any = entries(&cnp(
            "x",
            "spec:\n  endpointSelector: {}\n  ingress: [{toPorts: [{ports: [{protocol: ANY}]}, {}]}]",
        ));
        assert_eq!(any[0].ports, vec![PortRule::any(), PortRule::any()]);
    }
}
