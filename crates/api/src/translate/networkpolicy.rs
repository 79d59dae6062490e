//! NetworkPolicy (networking.k8s.io/v1): the unordered Normal tier, allow rules only, each listed
//! direction isolating the selected pods.

use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use netpol_engine::{
    AddressScope, Direction, Entity, Peer, PodSelector, PolicyEntry, PortRule, Priority,
    Provenance, Tier, Verdict,
};

use super::cidr::{cidr_selector, Notation};
use super::ports::{k8s_protocol, named_port, port_number, port_range};
use crate::error::{Diagnostics, FieldError, FieldPath};
use crate::object::DEFAULT_NAMESPACE;
use crate::selector::{label_selector, optional_label_selector};

/// One rule of either direction: `from` or `to` peers, and ports.
struct Rule<'a> {
    peers: Option<&'a [NetworkPolicyPeer]>,
    ports: Option<&'a [NetworkPolicyPort]>,
}

pub(crate) fn translate(policy: &NetworkPolicy, diags: &mut Diagnostics) -> Vec<PolicyEntry> {
    let namespace = policy
        .metadata
        .namespace
        .as_deref()
        .unwrap_or(DEFAULT_NAMESPACE);
    let name = policy.metadata.name.as_deref().unwrap_or_default();
    // The API server defaults an absent spec to the zero spec: every pod, isolated for ingress.
    let spec = policy.spec.clone().unwrap_or_default();
    let spec_path = FieldPath::root("spec");

    let Some(pods) = diags.check(optional_label_selector(
        spec.pod_selector.as_ref(),
        &spec_path.field("podSelector"),
    )) else {
        return Vec::new();
    };
    let subject = PodSelector::in_namespace(namespace, pods);

    let ingress: Vec<Rule> = spec
        .ingress
        .iter()
        .flatten()
        .map(|r| Rule {
            peers: r.from.as_deref(),
            ports: r.ports.as_deref(),
        })
        .collect();
    let egress: Vec<Rule> = spec
        .egress
        .iter()
        .flatten()
        .map(|r| Rule {
            peers: r.to.as_deref(),
            ports: r.ports.as_deref(),
        })
        .collect();

    let directions = policy_types(spec.policy_types.as_deref(), !egress.is_empty(), diags);
    for (rules, field, direction) in [
        (&ingress, "ingress", Direction::Ingress),
        (&egress, "egress", Direction::Egress),
    ] {
        if !rules.is_empty() && !directions.contains(&direction) {
            diags.warn(spec_path.field(field).error(format!(
                "{field} rules are ignored because policyTypes does not list {direction:?}"
            )));
        }
    }

    let mut entries = Vec::new();
    for direction in directions {
        let (rules, peer_field) = match direction {
            Direction::Ingress => (&ingress, "from"),
            Direction::Egress => (&egress, "to"),
        };
        let entry = |peers, ports, rule| PolicyEntry {
            tier: Tier::Normal,
            priority: Priority::unordered(),
            verdict: Verdict::Allow,
            subject: subject.clone(),
            direction,
            peers,
            ports,
            default_deny: true,
            enforcement: netpol_engine::Enforcement::Enforce,
            auth: None,
            provenance: Provenance {
                kind: "NetworkPolicy".into(),
                namespace: Some(namespace.to_owned()),
                name: name.to_owned(),
                rule,
            },
        };
        if rules.is_empty() {
            // A listed direction without rules isolates and allows nothing.
            entries.push(entry(Vec::new(), Vec::new(), String::new()));
        }
        for (i, rule) in rules.iter().enumerate() {
            let path = spec_path.field(&direction.to_string()).index(i);
            let peers = translate_peers(rule.peers, namespace, &path.field(peer_field), diags);
            let ports = diags.check(translate_ports(rule.ports, &path.field("ports")));
            if let (Some(peers), Some(ports)) = (peers, ports) {
                entries.push(entry(peers, ports, format!("{direction}[{i}]")));
            }
        }
    }
    entries
}

/// The directions the policy isolates: `policyTypes`, or when absent Ingress plus Egress if there
/// are egress rules.
fn policy_types(
    listed: Option<&[String]>,
    has_egress_rules: bool,
    diags: &mut Diagnostics,
) -> Vec<Direction> {
    let Some(listed) = listed else {
        return if has_egress_rules {
            vec![Direction::Ingress, Direction::Egress]
        } else {
            vec![Direction::Ingress]
        };
    };
    let mut directions = Vec::new();
    for (i, value) in listed.iter().enumerate() {
        let direction =
            match value.as_str() {
                "Ingress" => Direction::Ingress,
                "Egress" => Direction::Egress,
                other => {
                    diags.error(FieldPath::root("spec").field("policyTypes").index(i).error(
                        format!("unknown policy type {other:?} (expected Ingress or Egress)"),
                    ));
                    continue;
                }
            };
        if !directions.contains(&direction) {
            directions.push(direction);
        }
    }
    directions.sort();
    directions
}

/// `from`/`to`: absent or empty means every peer, including addresses outside the cluster.
fn translate_peers(
    peers: Option<&[NetworkPolicyPeer]>,
    namespace: &str,
    path: &FieldPath,
    diags: &mut Diagnostics,
) -> Option<Vec<Peer>> {
    let peers = peers.unwrap_or_default();
    if peers.is_empty() {
        return Some(vec![Peer::Entity(Entity::All)]);
    }
    let mut out = Vec::with_capacity(peers.len());
    let mut ok = true;
    for (i, peer) in peers.iter().enumerate() {
        match translate_peer(peer, namespace, || path.index(i), diags) {
            Ok(p) => out.push(p),
            Err(e) => {
                diags.error(e);
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

/// `path` names the peer, built only where it is needed: a policy may list 50,000 `ipBlock`
/// peers (issue 33).
fn translate_peer(
    peer: &NetworkPolicyPeer,
    namespace: &str,
    path: impl Fn() -> FieldPath,
    diags: &mut Diagnostics,
) -> Result<Peer, FieldError> {
    let pods_path = || path().field("podSelector");
    match (&peer.pod_selector, &peer.namespace_selector, &peer.ip_block) {
        (None, None, None) => {
            Err(path().error("a peer must set podSelector, namespaceSelector or ipBlock"))
        }
        (None, None, Some(block)) => {
            let block_path = || path().field("ipBlock");
            cidr_selector(
                (&block.cidr, || block_path().field("cidr")),
                (block.except.as_deref().unwrap_or_default(), || {
                    block_path().field("except")
                }),
                Notation::Cidr,
                AddressScope::Any,
                diags,
            )
            .map(Peer::Cidr)
        }
        (_, _, Some(_)) => Err(path()
            .field("ipBlock")
            .error("ipBlock cannot be combined with podSelector or namespaceSelector")),
        // A bare podSelector selects pods of the policy's own namespace.
        (Some(pods), None, None) => Ok(Peer::pods(PodSelector::in_namespace(
            namespace,
            label_selector(pods, &pods_path())?,
        ))),
        // A namespaceSelector selects pods only, never outside addresses; with a podSelector the
        // two are ANDed.
        (pods, Some(namespaces), None) => Ok(Peer::pods(PodSelector {
            namespaces: label_selector(namespaces, &path().field("namespaceSelector"))?,
            pods: optional_label_selector(pods.as_ref(), &pods_path())?,
        })),
    }
}

/// `ports`: absent or empty means all traffic.
fn translate_ports(
    ports: Option<&[NetworkPolicyPort]>,
    path: &FieldPath,
) -> Result<Vec<PortRule>, FieldError> {
    ports
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, port)| translate_port(port, &path.index(i)))
        .collect()
}

fn translate_port(port: &NetworkPolicyPort, path: &FieldPath) -> Result<PortRule, FieldError> {
    let protocol = k8s_protocol(port.protocol.as_deref(), &path.field("protocol"))?;
    match (&port.port, port.end_port) {
        (None, None) => Ok(PortRule::protocol(protocol)),
        (None, Some(_)) => Err(path
            .field("endPort")
            .error("endPort requires a numeric port")),
        (Some(IntOrString::Int(number)), None) => Ok(PortRule::single(
            protocol,
            port_number((*number).into(), &path.field("port"))?,
        )),
        (Some(IntOrString::Int(start)), Some(end)) => {
            let (start, end) =
                port_range(path, ("port", (*start).into()), ("endPort", end.into()))?;
            Ok(PortRule::range(protocol, start, end))
        }
        (Some(IntOrString::String(name)), None) => Ok(PortRule::named(
            Some(protocol),
            named_port(name, &path.field("port"))?,
        )),
        (Some(IntOrString::String(name)), Some(_)) => Err(path.field("endPort").error(format!(
            "endPort cannot be used with the named port {name:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::testing::*;
    use netpol_engine::{Identity, Protocol, Protocol::*};

    fn np(spec: &str) -> String {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: np, namespace: x}}\nspec:\n{spec}"
        )
    }

    fn by_direction(entries: &[PolicyEntry], d: Direction) -> Vec<&PolicyEntry> {
        entries.iter().filter(|e| e.direction == d).collect()
    }

    #[test]
    fn deny_all_ingress_is_one_isolating_entry_without_peers() {
        let e = entries(&np("  podSelector: {}\n  policyTypes: [Ingress]"));
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].direction, Direction::Ingress);
        assert!(e[0].peers.is_empty());
        assert!(e[0].default_deny);
        assert_eq!(e[0].tier, Tier::Normal);
        assert_eq!(e[0].priority, Priority::unordered());
        assert_eq!(e[0].provenance.to_string(), "NetworkPolicy x/np");
        let xa = pod("x", "a", "10.1.0.11");
        assert!(!ingress_allowed(
            &e,
            &xa,
            &pod("y", "a", "10.1.1.11"),
            Tcp,
            80
        ));
        assert!(egress_allowed(
            &e,
            &xa,
            &pod("y", "a", "10.1.1.11"),
            Tcp,
            80
        ));
    }

    #[test]
    fn policy_types_are_inferred() {
        // Ingress always; egress only when there are egress rules.
        let e = entries(&np("  podSelector: {}"));
        assert_eq!(by_direction(&e, Direction::Ingress).len(), 1);
        assert!(by_direction(&e, Direction::Egress).is_empty());
        let e = entries(&np("  podSelector: {}\n  egress: [{}]"));
        assert_eq!(by_direction(&e, Direction::Ingress).len(), 1);
        assert_eq!(by_direction(&e, Direction::Egress).len(), 1);
        assert!(e.iter().all(|e| e.default_deny));
        // `egress: []` is not "egress rules": no egress isolation without policyTypes.
        let e = entries(&np("  podSelector: {}\n  egress: []"));
        assert!(by_direction(&e, Direction::Egress).is_empty());
    }

    #[test]
    fn explicit_egress_only_ignores_ingress_rules_with_a_warning() {
        let yaml = np("  podSelector: {}\n  policyTypes: [Egress]\n  ingress: [{}]");
        let e = entries(&yaml);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].direction, Direction::Egress);
        let w = warnings(&yaml);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].field, "spec.ingress");
    }

    #[test]
    fn empty_ingress_list_isolates_and_allows_nothing() {
        let e = entries(&np("  podSelector: {}\n  ingress: []"));
        assert_eq!(e.len(), 1);
        assert!(e[0].peers.is_empty());
        assert!(e[0].default_deny);
    }

    #[test]
    fn absent_or_empty_from_means_every_source_including_outside() {
        for rule in ["{}", "{from: []}"] {
            let e = entries(&np(&format!("  podSelector: {{}}\n  ingress: [{rule}]")));
            assert_eq!(e.len(), 1);
            assert_eq!(e[0].peers, vec![Peer::Entity(Entity::All)]);
            assert_eq!(e[0].provenance.rule, "ingress[0]");
            let xa = pod("x", "a", "10.1.0.11");
            assert!(ingress_allowed(&e, &xa, &world("192.0.2.0/24"), Udp, 53));
        }
    }

    #[test]
    fn pod_and_namespace_selectors() {
        let e = entries(&np(r#"
  podSelector: {matchLabels: {pod: a}}
  ingress:
  - from:
    - podSelector: {matchLabels: {pod: c}}
    - namespaceSelector: {matchLabels: {ns: y}}
      podSelector: {matchLabels: {pod: b}}
    - namespaceSelector: {matchLabels: {ns: z}}
"#));
        let xa = pod("x", "a", "10.1.0.11");
        let allowed = |remote: &Identity| ingress_allowed(&e, &xa, remote, Tcp, 80);
        // Bare podSelector: own namespace only.
        assert!(allowed(&pod("x", "c", "10.1.0.13")));
        assert!(!allowed(&pod("y", "c", "10.1.1.13")));
        // Both selectors in one peer: AND.
        assert!(allowed(&pod("y", "b", "10.1.1.12")));
        assert!(!allowed(&pod("y", "a", "10.1.1.11")));
        // namespaceSelector alone: every pod there, but never outside addresses.
        assert!(allowed(&pod("z", "a", "10.1.2.11")));
        assert!(!allowed(&world("0.0.0.0/0")));
        // The policy selects x/a only.
        let xb = pod("x", "b", "10.1.0.12");
        assert!(ingress_allowed(&e, &xb, &world("0.0.0.0/0"), Tcp, 80));
    }

    #[test]
    fn empty_namespace_selector_means_all_pods_but_no_outside_address() {
        let e = entries(&np(
            "  podSelector: {}\n  ingress: [{from: [{namespaceSelector: {}}]}]",
        ));
        let xa = pod("x", "a", "10.1.0.11");
        assert!(ingress_allowed(
            &e,
            &xa,
            &pod("z", "q", "10.1.2.1"),
            Tcp,
            80
        ));
        assert!(!ingress_allowed(&e, &xa, &world("192.0.2.0/24"), Tcp, 80));
        assert!(!ingress_allowed(
            &e,
            &xa,
            &node("node-2", "b", "10.0.0.2"),
            Tcp,
            80
        ));
    }

    #[test]
    fn ip_block_with_except_matches_pods_nodes_and_outside() {
        let e = entries(&np(r#"
  podSelector: {}
  policyTypes: [Egress]
  egress:
  - to:
    - ipBlock: {cidr: 10.0.0.0/8, except: [10.1.1.0/24]}
    - ipBlock: {cidr: "2001:db8::/32"}
"#));
        let xa = pod("x", "a", "10.1.0.11");
        assert!(egress_allowed(
            &e,
            &xa,
            &pod("z", "a", "10.1.2.11"),
            Tcp,
            80
        ));
        assert!(egress_allowed(
            &e,
            &xa,
            &node("node-1", "a", "10.0.0.1"),
            Tcp,
            80
        ));
        assert!(egress_allowed(&e, &xa, &world("10.9.0.0/16"), Tcp, 80));
        assert!(!egress_allowed(
            &e,
            &xa,
            &pod("y", "a", "10.1.1.11"),
            Tcp,
            80
        ));
        assert!(!egress_allowed(&e, &xa, &world("192.0.2.0/24"), Tcp, 80));
        assert!(egress_allowed(&e, &xa, &world("2001:db8:5::/48"), Tcp, 80));
    }

    #[test]
    fn ports_protocols_ranges_and_named_ports() {
        let e = entries(&np(r#"
  podSelector: {}
  ingress:
  - ports:
    - port: 80
    - protocol: UDP
    - protocol: SCTP
      port: 9000
      endPort: 9010
    - port: http
"#));
        assert_eq!(
            e[0].ports,
            vec![
                PortRule::single(Tcp, 80),
                PortRule::protocol(Udp),
                PortRule::range(Sctp, 9000, 9010),
                PortRule::named(Some(Tcp), "http"),
            ]
        );
        let xa = pod("x", "a", "10.1.0.11");
        let from = pod("y", "a", "10.1.1.11");
        let allowed = |proto: Protocol, port| ingress_allowed(&e, &xa, &from, proto, port);
        assert!(allowed(Tcp, 80));
        assert!(!allowed(Tcp, 81));
        assert!(allowed(Udp, 1234));
        assert!(allowed(Sctp, 9010));
        assert!(!allowed(Sctp, 9011));
        // SCTP is not TCP.
        assert!(!allowed(Tcp, 9005));
        // Named port http is TCP 8080 on the destination pod.
        assert!(allowed(Tcp, 8080));
        assert!(!allowed(Tcp, 8081));
    }

    #[test]
    fn ipv6_peers_and_provenance_of_each_rule() {
        let e = entries(&np(r#"
  podSelector: {}
  ingress:
  - from: [{ipBlock: {cidr: "fd00::/8", except: ["fd00:1::/32"]}}]
  - from: [{podSelector: {}}]
"#));
        let rules: Vec<&str> = e.iter().map(|e| e.provenance.rule.as_str()).collect();
        assert_eq!(rules, ["ingress[0]", "ingress[1]"]);
        let xa = pod("x", "a", "fd00:2::11");
        assert!(ingress_allowed(&e, &xa, &world("fd00:3::/48"), Tcp, 80));
        assert!(!ingress_allowed(&e, &xa, &world("fd00:1:5::/48"), Tcp, 80));
    }

    #[test]
    fn bad_input_names_object_and_field() {
        let cases = [
            (
                "  ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/33}}]}]",
                "spec.ingress[0].from[0].ipBlock.cidr",
                "invalid CIDR",
            ),
            (
                "  ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/16, except: [10.2.0.0/24]}}]}]",
                "spec.ingress[0].from[0].ipBlock.except[0]",
                "not strictly inside",
            ),
            (
                "  ingress: [{ports: [{port: 0}]}]",
                "spec.ingress[0].ports[0].port",
                "port 0 is outside 1-65535",
            ),
            (
                "  egress: [{ports: [{port: 70000}]}]",
                "spec.egress[0].ports[0].port",
                "port 70000 is outside 1-65535",
            ),
            (
                "  ingress: [{ports: [{port: 80}, {port: 80, endPort: 70}]}]",
                "spec.ingress[0].ports[1].endPort",
                "endPort 70 is below port 80",
            ),
            (
                "  ingress: [{ports: [{port: 80, endPort: 70000}]}]",
                "spec.ingress[0].ports[0].endPort",
                "outside 1-65535",
            ),
            (
                "  ingress: [{ports: [{port: http, endPort: 90}]}]",
                "spec.ingress[0].ports[0].endPort",
                "endPort cannot be used with the named port",
            ),
            (
                "  ingress: [{ports: [{endPort: 90}]}]",
                "spec.ingress[0].ports[0].endPort",
                "endPort requires a numeric port",
            ),
            (
                "  ingress: [{ports: [{port: Bad_Name}]}]",
                "spec.ingress[0].ports[0].port",
                "invalid port name",
            ),
            (
                "  ingress: [{ports: [{protocol: XYZ}]}]",
                "spec.ingress[0].ports[0].protocol",
                "unknown protocol \"XYZ\"",
            ),
            (
                "  podSelector: {matchExpressions: [{key: a, operator: Foo}]}",
                "spec.podSelector.matchExpressions[0].operator",
                "unknown operator \"Foo\"",
            ),
            (
                "  ingress: [{from: [{namespaceSelector: {matchExpressions: [{key: a, operator: In}]}}]}]",
                "spec.ingress[0].from[0].namespaceSelector.matchExpressions[0].values",
                "at least one value",
            ),
            (
                "  ingress: [{from: [{}]}]",
                "spec.ingress[0].from[0]",
                "must set podSelector, namespaceSelector or ipBlock",
            ),
            (
                "  ingress: [{from: [{podSelector: {}, ipBlock: {cidr: 10.0.0.0/8}}]}]",
                "spec.ingress[0].from[0].ipBlock",
                "cannot be combined",
            ),
            (
                "  policyTypes: [Ingress, Sideways]",
                "spec.policyTypes[1]",
                "unknown policy type",
            ),
        ];
        for (spec, field, message) in cases {
            let err = error(&np(spec));
            assert_eq!(err.field, field, "{spec}");
            assert!(err.message.contains(message), "{spec}: {err}");
            assert!(err.to_string().starts_with("NetworkPolicy x/np: "), "{err}");
        }
    }

    #[test]
    fn every_bad_rule_is_reported() {
        let errs = errors(&np(
            "  ingress: [{ports: [{port: 0}]}, {}, {ports: [{protocol: XYZ}]}]",
        ));
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.ingress[0].ports[0].port",
                "spec.ingress[2].ports[0].protocol"
            ]
        );
    }
}
