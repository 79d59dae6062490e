//! ClusterNetworkPolicy (policy.networking.k8s.io/v1alpha2): AdminNetworkPolicy's successor,
//! covering both the Admin and the Baseline tier, with Accept/Deny/Pass and `protocols`.

use netpol_engine::{PolicyEntry, PortRule, Protocol, Tier, Verdict};

use super::admin::{
    action, egress_peer, ingress_peer, priority, rule_peers, subject, OrderedPolicy, TranslatedRule,
};
use super::ports::{named_port, port_number, port_range};
use crate::crd::cluster_network_policy::{ClusterProtocol, ProtocolPorts};
use crate::crd::ClusterNetworkPolicy;
use crate::error::{Diagnostics, FieldError, FieldPath};
use netpol_engine::Direction;

/// Most rules one direction of a ClusterNetworkPolicy may have.
const MAX_RULES: usize = 25;

const ACTIONS: &[(&str, Verdict)] = &[
    ("Accept", Verdict::Allow),
    ("Deny", Verdict::Deny),
    ("Pass", Verdict::Pass),
];

pub(super) fn translate(
    policy: &ClusterNetworkPolicy,
    diags: &mut Diagnostics,
) -> Vec<PolicyEntry> {
    let spec = &policy.spec;
    let spec_path = FieldPath::root("spec");
    let tier = diags.check(tier(&spec.tier, &spec_path.field("tier")));
    let priority = diags.check(priority(spec.priority, &spec_path.field("priority")));
    let subject = diags.check(subject(&spec.subject, &spec_path.field("subject")));
    let (Some(tier), Some(priority), Some(subject)) = (tier, priority, subject) else {
        return Vec::new();
    };
    let ordered = OrderedPolicy {
        kind: "ClusterNetworkPolicy",
        name: policy.metadata.name.clone().unwrap_or_default(),
        tier,
        priority,
        subject,
        max_rules: MAX_RULES,
    };
    let mut entries = ordered.entries(
        Direction::Ingress,
        &spec.ingress,
        diags,
        |rule, path, diags| {
            let (verdict, action) = action(&rule.action, ACTIONS, &path.field("action"))?;
            Ok(TranslatedRule {
                name: rule.name.clone(),
                verdict,
                peers: rule_peers(&rule.from, ingress_peer, action, &path.field("from"), diags)?,
                ports: protocols(rule.protocols.as_deref(), &path.field("protocols"))?,
            })
        },
    );
    entries.extend(ordered.entries(
        Direction::Egress,
        &spec.egress,
        diags,
        |rule, path, diags| {
            let (verdict, action) = action(&rule.action, ACTIONS, &path.field("action"))?;
            Ok(TranslatedRule {
                name: rule.name.clone(),
                verdict,
                peers: rule_peers(&rule.to, egress_peer, action, &path.field("to"), diags)?,
                ports: protocols(rule.protocols.as_deref(), &path.field("protocols"))?,
            })
        },
    ));
    entries
}

fn tier(value: &str, path: &FieldPath) -> Result<Tier, FieldError> {
    match value {
        "Admin" => Ok(Tier::Admin),
        "Baseline" => Ok(Tier::Baseline),
        other => Err(path.error(format!(
            "unknown tier {other:?} (expected Admin or Baseline)"
        ))),
    }
}

/// `protocols`: absent means all traffic; when present it lists at least one clause.
fn protocols(
    list: Option<&[ClusterProtocol]>,
    path: &FieldPath,
) -> Result<Vec<PortRule>, FieldError> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    if list.is_empty() {
        return Err(path.error("protocols must list at least one protocol when set"));
    }
    list.iter()
        .enumerate()
        .map(|(i, clause)| protocol_clause(clause, &path.index(i)))
        .collect()
}

fn protocol_clause(clause: &ClusterProtocol, path: &FieldPath) -> Result<PortRule, FieldError> {
    let set = [
        ("tcp", Protocol::Tcp, &clause.tcp),
        ("udp", Protocol::Udp, &clause.udp),
        ("sctp", Protocol::Sctp, &clause.sctp),
    ];
    let mut chosen = set
        .iter()
        .filter_map(|(field, protocol, ports)| ports.as_ref().map(|p| (*field, *protocol, p)));
    match (chosen.next(), chosen.next(), &clause.destination_named_port) {
        (Some((field, protocol, ports)), None, None) => {
            protocol_ports(protocol, ports, &path.field(field))
        }
        // A named port takes the protocol of the container port it names.
        (None, None, Some(name)) => Ok(PortRule::named(
            None,
            named_port(name, &path.field("destinationNamedPort"))?,
        )),
        _ => Err(path.error(
            "a protocol clause must set exactly one of tcp, udp, sctp and destinationNamedPort",
        )),
    }
}

fn protocol_ports(
    protocol: Protocol,
    ports: &ProtocolPorts,
    path: &FieldPath,
) -> Result<PortRule, FieldError> {
    let Some(port) = &ports.destination_port else {
        return Ok(PortRule::protocol(protocol));
    };
    let path = path.field("destinationPort");
    match (port.number, &port.range) {
        (Some(number), None) => Ok(PortRule::single(
            protocol,
            port_number(number, &path.field("number"))?,
        )),
        (None, Some(range)) => {
            let (start, end) = port_range(
                &path.field("range"),
                ("start", range.start),
                ("end", range.end),
            )?;
            Ok(PortRule::range(protocol, start, end))
        }
        _ => Err(path.error("destinationPort must set exactly one of number and range")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::testing::*;
    use netpol_engine::{Entity, Peer, Priority, Protocol::*};

    fn cnp(name: &str, spec: &str) -> String {
        format!(
            "apiVersion: policy.networking.k8s.io/v1alpha2\nkind: ClusterNetworkPolicy\nmetadata: {{name: {name}}}\nspec:\n{spec}"
        )
    }

    #[test]
    fn both_tiers_and_accept_deny_pass() {
        let admin = entries(&cnp(
            "admin-z",
            r#"
  tier: Admin
  priority: 10
  subject: {namespaces: {matchLabels: {ns: z}}}
  ingress:
  - name: pass-web
    action: Pass
    from: [{namespaces: {matchLabels: {ns: y}}}]
    protocols: [{tcp: {destinationPort: {number: 80}}}]
  - {name: deny-y, action: Deny, from: [{namespaces: {matchLabels: {ns: y}}}]}
  - {name: accept-x, action: Accept, from: [{namespaces: {matchLabels: {ns: x}}}]}
"#,
        ));
        assert!(admin.iter().all(|e| e.tier == Tier::Admin));
        let verdicts: Vec<Verdict> = admin.iter().map(|e| e.verdict).collect();
        assert_eq!(verdicts, [Verdict::Pass, Verdict::Deny, Verdict::Allow]);
        assert_eq!(admin[2].priority, Priority::new(10, "admin-z", 2));
        assert_eq!(admin[0].ports, vec![PortRule::single(Tcp, 80)]);

        let baseline = entries(&cnp(
            "base",
            "  tier: Baseline\n  priority: 100\n  subject: {namespaces: {}}\n  egress: [{action: Deny, to: [{networks: [0.0.0.0/0]}]}]",
        ));
        assert_eq!(baseline[0].tier, Tier::Baseline);
        assert_eq!(baseline[0].provenance.rule, "egress[0]");

        let za = pod("z", "a", "10.1.2.11");
        let ya = pod("y", "a", "10.1.1.11");
        // TCP 80 from y is passed on; nothing below decides, so the default allows.
        assert!(ingress_allowed(&admin, &za, &ya, Tcp, 80));
        assert!(!ingress_allowed(&admin, &za, &ya, Tcp, 81));
    }

    #[test]
    fn protocols_ports_ranges_and_named_ports() {
        let e = entries(&cnp(
            "p",
            r#"
  tier: Admin
  priority: 0
  subject: {namespaces: {}}
  ingress:
  - action: Accept
    from: [{pods: {namespaceSelector: {}, podSelector: {}}}]
    protocols:
    - udp: {}
    - sctp: {destinationPort: {range: {start: 1, end: 65535}}}
    - tcp: {destinationPort: {number: 443}}
    - destinationNamedPort: http
"#,
        ));
        assert_eq!(
            e[0].ports,
            vec![
                PortRule::protocol(Udp),
                PortRule::range(Sctp, 1, 65535),
                PortRule::single(Tcp, 443),
                PortRule::named(None, "http"),
            ]
        );
    }

    #[test]
    fn empty_peer_fails_closed_for_accept_and_deny() {
        let yaml = |action: &str| {
            cnp(
                "fc",
                &format!("  tier: Admin\n  priority: 1\n  subject: {{namespaces: {{}}}}\n  egress: [{{action: {action}, to: [{{}}]}}]"),
            )
        };
        let accept = entries(&yaml("Accept"));
        assert!(accept[0].peers.is_empty());
        assert_eq!(warnings(&yaml("Accept"))[0].field, "spec.egress[0].to[0]");
        let deny = entries(&yaml("Deny"));
        assert_eq!(deny[0].peers, vec![Peer::Entity(Entity::All)]);
        let xa = pod("x", "a", "10.1.0.11");
        assert!(!egress_allowed(&deny, &xa, &world("192.0.2.0/24"), Udp, 53));
    }

    #[test]
    fn bad_input_names_object_and_field() {
        let rule = "  ingress: [{action: Accept, from: [{namespaces: {}}]}]";
        let cases = [
            (
                format!("  tier: Middle\n  priority: 1\n  subject: {{namespaces: {{}}}}\n{rule}"),
                "spec.tier",
                "unknown tier \"Middle\"",
            ),
            (
                format!("  tier: Admin\n  priority: 5000\n  subject: {{namespaces: {{}}}}\n{rule}"),
                "spec.priority",
                "outside 0-1000",
            ),
            (
                "  tier: Admin\n  priority: 1\n  subject: {namespaces: {}}\n  ingress: [{action: Allow, from: [{namespaces: {}}]}]".into(),
                "spec.ingress[0].action",
                "unknown action \"Allow\" (expected Accept, Deny, Pass)",
            ),
            (
                "  tier: Admin\n  priority: 1\n  subject: {namespaces: {}}\n  egress: [{action: Accept, to: [{domainNames: [\"*.example.com\"]}]}]".into(),
                "spec.egress[0].to[0].domainNames",
                "unsupported: domainNames (FQDN rules are not supported)",
            ),
            (
                "  tier: Admin\n  priority: 1\n  subject: {namespaces: {}}\n  ingress: [{action: Deny, from: [{namespaces: {}}], protocols: [{tcp: {destinationPort: {number: 0}}}]}]".into(),
                "spec.ingress[0].protocols[0].tcp.destinationPort.number",
                "outside 1-65535",
            ),
            (
                "  tier: Admin\n  priority: 1\n  subject: {namespaces: {}}\n  ingress: [{action: Deny, from: [{namespaces: {}}], protocols: [{udp: {destinationPort: {range: {start: 90, end: 80}}}}]}]".into(),
                "spec.ingress[0].protocols[0].udp.destinationPort.range.end",
                "end 80 is below start 90",
            ),
            (
                "  tier: Admin\n  priority: 1\n  subject: {namespaces: {}}\n  ingress: [{action: Deny, from: [{namespaces: {}}], protocols: [{tcp: {}, udp: {}}]}]".into(),
                "spec.ingress[0].protocols[0]",
                "exactly one of tcp, udp, sctp",
            ),
            (
                "  tier: Admin\n  priority: 1\n  subject: {namespaces: {}}\n  ingress: [{action: Deny, from: [{namespaces: {}}], protocols: []}]".into(),
                "spec.ingress[0].protocols",
                "at least one protocol",
            ),
        ];
        for (spec, field, message) in cases {
            let err = error(&cnp("bad", &spec));
            assert_eq!(err.field, field, "{spec}");
            assert!(err.message.contains(message), "{spec}: {err}");
            assert!(err.to_string().starts_with("ClusterNetworkPolicy bad: "));
        }
    }

    #[test]
    fn at_most_25_rules_per_direction() {
        let rules = "  - {action: Deny, from: [{namespaces: {}}]}\n".repeat(26);
        let err = error(&cnp(
            "many",
            &format!("  tier: Admin\n  priority: 1\n  subject: {{namespaces: {{}}}}\n  ingress:\n{rules}"),
        ));
        assert_eq!(err.field, "spec.ingress");
    }
}
