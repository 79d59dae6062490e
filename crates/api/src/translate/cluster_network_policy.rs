//! ClusterNetworkPolicy (policy.networking.k8s.io/v1alpha2): AdminNetworkPolicy's successor,
//! covering both the Admin and the Baseline tier, with Accept/Deny/Pass and `protocols`.

use netpol_engine::{PolicyEntry, PortRule, Protocol, Tier, Verdict};

use super::admin::{
    action, egress_peer, ingress_peer, priority, rule_peers, subject, OrderedPolicy, PeerResult,
    TranslatedRule,
};
use super::channel::CrdChannel;
use super::ports::{named_port, port_number};
use crate::crd::admin::EgressPeer;
use crate::crd::cluster_network_policy::{ClusterEgressRule, ClusterProtocol, ProtocolPorts};
use crate::crd::ClusterNetworkPolicy;
use crate::error::{Diagnostics, FieldError, FieldPath};
use netpol_engine::Direction;

/// v0.2.0's `MaxItems`: rules per direction, peers per rule, protocol clauses per rule.
const MAX_RULES: usize = 25;
const MAX_PEERS: usize = 25;
const MAX_PROTOCOLS: usize = 25;
/// v0.2.0's `MaxLength` of a rule's name.
const MAX_RULE_NAME: usize = 100;

const ACTIONS: &[(&str, Verdict)] = &[
    ("Accept", Verdict::Allow),
    ("Deny", Verdict::Deny),
    ("Pass", Verdict::Pass),
];

pub(super) fn translate(
    policy: &ClusterNetworkPolicy,
    channel: CrdChannel,
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
            rule_name(rule.name.as_deref(), &path.field("name"))?;
            let (verdict, action) = action(&rule.action, ACTIONS, &path.field("action"))?;
            Ok(TranslatedRule {
                name: rule.name.clone(),
                verdict,
                peers: rule_peers(
                    &rule.from,
                    MAX_PEERS,
                    ingress_peer,
                    action,
                    &path.field("from"),
                    diags,
                )?,
                ports: protocols(rule.protocols.as_deref(), &path.field("protocols"))?,
            })
        },
    );
    let egress_peer_in_channel =
        |peer: &EgressPeer, path: &FieldPath, diags: &mut Diagnostics| -> PeerResult {
            experimental_peer_fields(peer, channel, path)?;
            egress_peer(peer, path, diags)
        };
    entries.extend(ordered.entries(
        Direction::Egress,
        &spec.egress,
        diags,
        |rule, path, diags| {
            rule_name(rule.name.as_deref(), &path.field("name"))?;
            let (verdict, action) = action(&rule.action, ACTIONS, &path.field("action"))?;
            let peers = rule_peers(
                &rule.to,
                MAX_PEERS,
                egress_peer_in_channel,
                action,
                &path.field("to"),
                diags,
            )?;
            if channel.has_experimental_fields() {
                named_port_without_address_peers(rule, path)?;
            }
            Ok(TranslatedRule {
                name: rule.name.clone(),
                verdict,
                peers,
                ports: protocols(rule.protocols.as_deref(), &path.field("protocols"))?,
            })
        },
    ));
    entries
}

/// A rule's `name`: at most 100 characters.
fn rule_name(name: Option<&str>, path: &FieldPath) -> Result<(), FieldError> {
    match name {
        Some(name) if name.chars().count() > MAX_RULE_NAME => Err(path.error(format!(
            "a rule name has at most {MAX_RULE_NAME} characters, this one {}",
            name.chars().count()
        ))),
        _ => Ok(()),
    }
}

/// The egress peers only the experimental CRD has. The standard CRD has no such field: the
/// server prunes it, and `kubectl apply` refuses it as unknown.
fn experimental_peer_fields(
    peer: &EgressPeer,
    channel: CrdChannel,
    path: &FieldPath,
) -> Result<(), FieldError> {
    if channel.has_experimental_fields() {
        return Ok(());
    }
    let experimental = [
        ("nodes", peer.nodes.is_some()),
        ("domainNames", peer.domain_names.is_some()),
    ];
    match experimental.into_iter().find(|(_, set)| *set) {
        Some((field, _)) => Err(path.field(field).error(format!(
            "{field} is a field of the experimental channel of ClusterNetworkPolicy (v0.2.0); \
             the standard CRD has no such field (read with --crd-channel experimental if the \
             cluster serves the experimental CRD)"
        ))),
        None => Ok(()),
    }
}

/// The experimental CRD's CEL rule on egress rules: a named port exists only on pods, so it
/// cannot be combined with a `networks`, `nodes` or `domainNames` peer.
fn named_port_without_address_peers(
    rule: &ClusterEgressRule,
    path: &FieldPath,
) -> Result<(), FieldError> {
    let address_peer = rule
        .to
        .iter()
        .any(|p| p.networks.is_some() || p.nodes.is_some() || p.domain_names.is_some());
    let named_port = rule
        .protocols
        .iter()
        .flatten()
        .any(|p| p.destination_named_port.is_some());
    if address_peer && named_port {
        Err(path.error(
            "networks/nodes/domainNames peer cannot be set with namedPorts since there are no \
             namedPorts for networks/nodes/domainNames",
        ))
    } else {
        Ok(())
    }
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
    if list.len() > MAX_PROTOCOLS {
        return Err(path.error(format!(
            "{} protocol clauses, but at most {MAX_PROTOCOLS} are allowed per rule",
            list.len()
        )));
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
    // The API requires at least one field (`minProperties: 1`): `tcp: {}` is refused; every
    // port of a protocol is the range 1-65535.
    let Some(port) = &ports.destination_port else {
        return Err(path.error(
            "must set destinationPort (the API refuses an empty protocol clause; for every port, \
             give the range 1-65535)",
        ));
    };
    let path = path.field("destinationPort");
    match (port.number, &port.range) {
        (Some(number), None) => Ok(PortRule::single(
            protocol,
            port_number(number, &path.field("number"))?,
        )),
        (None, Some(range)) => {
            let path = path.field("range");
            let start = port_number(range.start, &path.field("start"))?;
            let end = port_number(range.end, &path.field("end"))?;
            // Stricter than NetworkPolicy's endPort: v0.2.0 requires start < end.
            if start >= end {
                return Err(path.error(format!(
                    "start {start} must be less than end {end} (Start port must be less than \
                     End port)"
                )));
            }
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
    - udp: {destinationPort: {range: {start: 1, end: 65535}}}
    - sctp: {destinationPort: {range: {start: 1, end: 65535}}}
    - tcp: {destinationPort: {number: 443}}
    - destinationNamedPort: http
"#,
        ));
        assert_eq!(
            e[0].ports,
            vec![
                PortRule::range(Udp, 1, 65535),
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
                "spec.ingress[0].protocols[0].udp.destinationPort.range",
                "start 90 must be less than end 80",
            ),
            (
                "  tier: Admin\n  priority: 1\n  subject: {namespaces: {}}\n  ingress: [{action: Deny, from: [{namespaces: {}}], protocols: [{udp: {destinationPort: {range: {start: 80, end: 80}}}}]}]".into(),
                "spec.ingress[0].protocols[0].udp.destinationPort.range",
                "Start port must be less than End port",
            ),
            (
                "  tier: Admin\n  priority: 1\n  subject: {namespaces: {}}\n  ingress: [{action: Deny, from: [{namespaces: {}}], protocols: [{udp: {destinationPort: {range: {start: 0, end: 80}}}}]}]".into(),
                "spec.ingress[0].protocols[0].udp.destinationPort.range.start",
                "outside 1-65535",
            ),
            (
                "  tier: Admin\n  priority: 1\n  subject: {namespaces: {}}\n  ingress: [{action: Deny, from: [{namespaces: {}}], protocols: [{tcp: {}}]}]".into(),
                "spec.ingress[0].protocols[0].tcp",
                "must set destinationPort",
            ),
            (
                "  tier: Admin\n  priority: 1\n  subject: {namespaces: {}}\n  egress: [{action: Deny, to: [{networks: [010.0.0.0/8]}]}]".into(),
                "spec.egress[0].to[0].networks[0]",
                "leading zero",
            ),
            (
                "  tier: Admin\n  priority: 1\n  subject: {namespaces: {}}\n  egress: [{action: Deny, to: [{networks: [\"::ffff:10.0.0.0/104\"]}]}]".into(),
                "spec.egress[0].to[0].networks[0]",
                "IPv4-mapped",
            ),
            (
                "  tier: Admin\n  priority: 1\n  subject: {namespaces: {}}\n  egress: [{action: Deny, to: [{networks: [\"0000:0000:0000:0000:0000:0001:255.255.255.255/128\"]}]}]".into(),
                "spec.egress[0].to[0].networks[0]",
                "at most 43",
            ),
            (
                "  tier: Admin\n  priority: 1\n  subject: {namespaces: {}}\n  egress: [{action: Accept, to: [{networks: [10.0.0.0/8]}], protocols: [{destinationNamedPort: http}]}]".into(),
                "spec.egress[0]",
                "cannot be set with namedPorts",
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
    fn list_and_length_limits_of_v0_2_0() {
        let head = "  tier: Admin\n  priority: 1\n  subject: {namespaces: {}}\n";
        let peers = vec!["{namespaces: {}}"; 26].join(", ");
        let clauses = vec!["{tcp: {destinationPort: {number: 80}}}"; 26].join(", ");
        let networks = (0..26)
            .map(|i| format!("10.{i}.0.0/16"))
            .collect::<Vec<_>>()
            .join(", ");
        let long_name = "n".repeat(101);
        let cases = [
            (
                format!("{head}  ingress: [{{action: Deny, from: [{peers}]}}]"),
                "spec.ingress[0].from",
                "26 peers, but at most 25",
            ),
            (
                format!("{head}  egress: [{{action: Deny, to: [{peers}]}}]"),
                "spec.egress[0].to",
                "26 peers, but at most 25",
            ),
            (
                format!("{head}  ingress: [{{action: Deny, from: [{{namespaces: {{}}}}], protocols: [{clauses}]}}]"),
                "spec.ingress[0].protocols",
                "26 protocol clauses, but at most 25",
            ),
            (
                format!("{head}  egress: [{{action: Deny, to: [{{networks: [{networks}]}}]}}]"),
                "spec.egress[0].to[0].networks",
                "26 CIDRs, but at most 25",
            ),
            (
                format!("{head}  ingress: [{{name: {long_name}, action: Deny, from: [{{namespaces: {{}}}}]}}]"),
                "spec.ingress[0].name",
                "at most 100 characters",
            ),
        ];
        for (spec, field, message) in cases {
            let err = error(&cnp("limits", &spec));
            assert_eq!(err.field, field, "{spec}");
            assert!(err.message.contains(message), "{spec}: {err}");
        }
        // At the limits, all is well.
        let peers = vec!["{namespaces: {}}"; 25].join(", ");
        let name = "n".repeat(100);
        let e = entries(&cnp(
            "limits",
            &format!("{head}  ingress: [{{name: {name}, action: Deny, from: [{peers}]}}]"),
        ));
        assert_eq!(e[0].peers.len(), 25);
    }

    #[test]
    fn experimental_fields_only_in_the_experimental_channel() {
        let head = "  tier: Admin\n  priority: 1\n  subject: {namespaces: {}}\n";
        let nodes = cnp(
            "to-nodes",
            &format!(
                "{head}  egress: [{{action: Deny, to: [{{nodes: {{matchLabels: {{zone: b}}}}}}]}}]"
            ),
        );
        let standard = translate_yaml_in(&nodes, CrdChannel::Standard);
        assert_eq!(standard.errors.len(), 1);
        assert_eq!(standard.errors[0].field, "spec.egress[0].to[0].nodes");
        assert!(standard.errors[0].message.contains("experimental channel"));
        assert!(standard.entries.is_empty());
        let experimental = translate_yaml_in(&nodes, CrdChannel::Experimental);
        assert!(experimental.is_ok(), "{:?}", experimental.errors);
        assert_eq!(experimental.entries.len(), 1);

        // domainNames: not in the standard CRD; in the experimental one, refused as unsupported.
        let fqdn = cnp(
            "fqdn",
            &format!("{head}  egress: [{{action: Accept, to: [{{domainNames: [example.com]}}]}}]"),
        );
        let standard = translate_yaml_in(&fqdn, CrdChannel::Standard);
        assert_eq!(standard.errors[0].field, "spec.egress[0].to[0].domainNames");
        assert!(standard.errors[0].message.contains("experimental channel"));
        let experimental = translate_yaml_in(&fqdn, CrdChannel::Experimental);
        assert_eq!(
            experimental.errors[0].field,
            "spec.egress[0].to[0].domainNames"
        );
        assert!(experimental.errors[0].is_unsupported());

        // The named-port CEL rule is the experimental CRD's only: the standard server accepts it.
        let named = cnp(
            "named",
            &format!("{head}  egress: [{{action: Accept, to: [{{networks: [10.0.0.0/8]}}], protocols: [{{destinationNamedPort: http}}]}}]"),
        );
        assert!(translate_yaml_in(&named, CrdChannel::Standard).is_ok());
        assert_eq!(
            translate_yaml_in(&named, CrdChannel::Experimental).errors[0].field,
            "spec.egress[0]"
        );
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
