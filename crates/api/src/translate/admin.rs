//! AdminNetworkPolicy and BaselineAdminNetworkPolicy (v1alpha1), and the parts of them that
//! ClusterNetworkPolicy (v1alpha2) shares: subjects, peers, priorities, actions and the ordered
//! rule lists.

use netpol_engine::{
    AddressScope, CidrSelector, Direction, Entity, LabelSelector, Peer, PodSelector, PolicyEntry,
    PortRule, Priority, Provenance, Tier, Verdict,
};

use super::cidr::{parse_cidr, Notation};
use super::ports::{k8s_protocol, named_port, port_number, port_range};
use crate::crd::admin::{
    AdminEgressRule, AdminIngressRule, AdminPort, EgressPeer, IngressPeer, NamespacedPod, Subject,
};
use crate::crd::{AdminNetworkPolicy, BaselineAdminNetworkPolicy};
use crate::error::{Diagnostics, FieldError, FieldPath};
use crate::selector::label_selector;

/// The only name a BaselineAdminNetworkPolicy may have: it is a singleton.
const BASELINE_NAME: &str = "default";

/// Most rules one direction of an (Baseline)AdminNetworkPolicy may have, and most peers one of
/// its rules may list (v1alpha1's `MaxItems`).
const MAX_ADMIN_RULES: usize = 100;
const MAX_ADMIN_PEERS: usize = 100;

/// Most CIDRs one `networks` peer may list, in v1alpha1 and v1alpha2 alike.
const MAX_NETWORKS: usize = 25;
/// The longest spelling of a CIDR the API accepts (`MaxLength` of the `CIDR` type).
const MAX_CIDR_LENGTH: usize = 43;

const ADMIN_ACTIONS: &[(&str, Verdict)] = &[
    ("Allow", Verdict::Allow),
    ("Deny", Verdict::Deny),
    ("Pass", Verdict::Pass),
];
const BASELINE_ACTIONS: &[(&str, Verdict)] = &[("Allow", Verdict::Allow), ("Deny", Verdict::Deny)];

pub(super) fn translate_admin(
    policy: &AdminNetworkPolicy,
    diags: &mut Diagnostics,
) -> Vec<PolicyEntry> {
    let spec = &policy.spec;
    let spec_path = FieldPath::root("spec");
    let priority = diags.check(priority(spec.priority, &spec_path.field("priority")));
    let subject = diags.check(subject(&spec.subject, &spec_path.field("subject")));
    let (Some(priority), Some(subject)) = (priority, subject) else {
        return Vec::new();
    };
    let ordered = OrderedPolicy {
        kind: "AdminNetworkPolicy",
        name: policy.metadata.name.clone().unwrap_or_default(),
        tier: Tier::Admin,
        priority,
        subject,
        max_rules: MAX_ADMIN_RULES,
    };
    admin_rules(&ordered, &spec.ingress, &spec.egress, ADMIN_ACTIONS, diags)
}

pub(super) fn translate_baseline(
    policy: &BaselineAdminNetworkPolicy,
    diags: &mut Diagnostics,
) -> Vec<PolicyEntry> {
    let spec = &policy.spec;
    let name = policy.metadata.name.clone().unwrap_or_default();
    if name != BASELINE_NAME {
        diags.error(FieldPath::root("metadata").field("name").error(format!(
            "a BaselineAdminNetworkPolicy must be named {BASELINE_NAME:?}, not {name:?}"
        )));
    }
    let Some(subject) = diags.check(subject(
        &spec.subject,
        &FieldPath::root("spec").field("subject"),
    )) else {
        return Vec::new();
    };
    let ordered = OrderedPolicy {
        kind: "BaselineAdminNetworkPolicy",
        name,
        tier: Tier::Baseline,
        priority: 0,
        subject,
        max_rules: MAX_ADMIN_RULES,
    };
    admin_rules(
        &ordered,
        &spec.ingress,
        &spec.egress,
        BASELINE_ACTIONS,
        diags,
    )
}

/// The ingress and egress rules of an ANP or BANP.
fn admin_rules(
    policy: &OrderedPolicy,
    ingress: &[AdminIngressRule],
    egress: &[AdminEgressRule],
    actions: &[(&str, Verdict)],
    diags: &mut Diagnostics,
) -> Vec<PolicyEntry> {
    let mut entries = policy.entries(Direction::Ingress, ingress, diags, |rule, path, diags| {
        let (verdict, action) = action(&rule.action, actions, &path.field("action"))?;
        Ok(TranslatedRule {
            name: rule.name.clone(),
            verdict,
            peers: rule_peers(
                &rule.from,
                MAX_ADMIN_PEERS,
                ingress_peer,
                action,
                &path.field("from"),
                diags,
            )?,
            ports: admin_ports(rule.ports.as_deref(), &path.field("ports"))?,
        })
    });
    entries.extend(
        policy.entries(Direction::Egress, egress, diags, |rule, path, diags| {
            let (verdict, action) = action(&rule.action, actions, &path.field("action"))?;
            Ok(TranslatedRule {
                name: rule.name.clone(),
                verdict,
                peers: rule_peers(
                    &rule.to,
                    MAX_ADMIN_PEERS,
                    egress_peer,
                    action,
                    &path.field("to"),
                    diags,
                )?,
                ports: admin_ports(rule.ports.as_deref(), &path.field("ports"))?,
            })
        }),
    );
    entries
}

/// A policy whose rules are ordered: by priority, then name, then rule index.
pub(super) struct OrderedPolicy {
    pub kind: &'static str,
    pub name: String,
    pub tier: Tier,
    pub priority: u32,
    pub subject: PodSelector,
    pub max_rules: usize,
}

/// One rule with its action, peers and ports translated.
pub(super) struct TranslatedRule {
    pub name: Option<String>,
    pub verdict: Verdict,
    pub peers: Vec<Peer>,
    pub ports: Vec<PortRule>,
}

impl OrderedPolicy {
    /// The entries of one direction's rules, in order. A rule that fails is reported and the
    /// others are still checked, so that every error of the object surfaces at once.
    pub fn entries<R>(
        &self,
        direction: Direction,
        rules: &[R],
        diags: &mut Diagnostics,
        translate_rule: impl Fn(&R, &FieldPath, &mut Diagnostics) -> Result<TranslatedRule, FieldError>,
    ) -> Vec<PolicyEntry> {
        let path = FieldPath::root("spec").field(&direction.to_string());
        if rules.len() > self.max_rules {
            diags.error(path.error(format!(
                "{} rules, but at most {} are allowed per direction",
                rules.len(),
                self.max_rules
            )));
            return Vec::new();
        }
        let mut entries = Vec::with_capacity(rules.len());
        for (i, rule) in rules.iter().enumerate() {
            let translated = translate_rule(rule, &path.index(i), diags);
            let Some(rule) = diags.check(translated) else {
                continue;
            };
            let index = u32::try_from(i).unwrap_or(u32::MAX);
            entries.push(PolicyEntry {
                tier: self.tier,
                priority: Priority::new(self.priority, self.name.clone(), index),
                verdict: rule.verdict,
                subject: self.subject.clone(),
                direction,
                peers: rule.peers,
                ports: rule.ports,
                default_deny: false,
                enforcement: netpol_engine::Enforcement::Enforce,
                auth: None,
                provenance: Provenance {
                    kind: self.kind.into(),
                    namespace: None,
                    name: self.name.clone(),
                    rule: rule
                        .name
                        .filter(|n| !n.is_empty())
                        .unwrap_or_else(|| format!("{direction}[{i}]")),
                },
            });
        }
        entries
    }
}

/// `spec.priority`: 0-1000, lower first.
pub(super) fn priority(value: i64, path: &FieldPath) -> Result<u32, FieldError> {
    u32::try_from(value)
        .ok()
        .filter(|p| *p <= 1000)
        .ok_or_else(|| path.error(format!("priority {value} is outside 0-1000")))
}

/// A rule's `action`, one of `allowed`. Returns the verdict and the action's spelling.
pub(super) fn action<'a>(
    value: &str,
    allowed: &[(&'a str, Verdict)],
    path: &FieldPath,
) -> Result<(Verdict, &'a str), FieldError> {
    allowed
        .iter()
        .find(|(name, _)| *name == value)
        .map(|(name, verdict)| (*verdict, *name))
        .ok_or_else(|| {
            let names: Vec<&str> = allowed.iter().map(|(n, _)| *n).collect();
            path.error(format!(
                "unknown action {value:?} (expected {})",
                names.join(", ")
            ))
        })
}

/// `spec.subject`: exactly one of `namespaces` and `pods`.
pub(super) fn subject(subject: &Subject, path: &FieldPath) -> Result<PodSelector, FieldError> {
    match (&subject.namespaces, &subject.pods) {
        (Some(namespaces), None) => Ok(PodSelector {
            namespaces: label_selector(namespaces, &path.field("namespaces"))?,
            pods: LabelSelector::everything(),
        }),
        (None, Some(pods)) => namespaced_pod(pods, &path.field("pods")),
        _ => Err(path.error("exactly one of namespaces and pods must be set")),
    }
}

fn namespaced_pod(pods: &NamespacedPod, path: &FieldPath) -> Result<PodSelector, FieldError> {
    Ok(PodSelector {
        namespaces: label_selector(&pods.namespace_selector, &path.field("namespaceSelector"))?,
        pods: label_selector(&pods.pod_selector, &path.field("podSelector"))?,
    })
}

/// What one peer object selects, or `None` when it sets no field this version knows.
pub(super) type PeerResult = Result<Option<Vec<Peer>>, FieldError>;

/// The peers of a rule: at least one, at most `max`. A peer that sets no known field comes from a
/// newer API version: as the API prescribes, it fails closed (matching nothing for Allow and
/// Accept rules, everything for Deny and Pass rules), with a warning.
pub(super) fn rule_peers<P>(
    peers: &[P],
    max: usize,
    translate_peer: impl Fn(&P, &FieldPath, &mut Diagnostics) -> PeerResult,
    action: &str,
    path: &FieldPath,
    diags: &mut Diagnostics,
) -> Result<Vec<Peer>, FieldError> {
    if peers.is_empty() {
        return Err(path.error("a rule needs at least one peer"));
    }
    if peers.len() > max {
        return Err(path.error(format!(
            "{} peers, but at most {max} are allowed per rule",
            peers.len()
        )));
    }
    let fails_open_if_ignored = !matches!(action, "Allow" | "Accept");
    let mut out = Vec::new();
    for (i, peer) in peers.iter().enumerate() {
        let peer_path = path.index(i);
        match translate_peer(peer, &peer_path, diags)? {
            Some(selected) => out.extend(selected),
            None if fails_open_if_ignored => {
                diags.warn(peer_path.error(format!(
                    "peer sets no known field; failing closed, this {action} rule matches all traffic"
                )));
                out.push(Peer::Entity(Entity::All));
            }
            None => diags.warn(peer_path.error(format!(
                "peer sets no known field; failing closed, it matches nothing in this {action} rule"
            ))),
        }
    }
    Ok(out)
}

/// Sources: `namespaces` or `pods`.
pub(super) fn ingress_peer(
    peer: &IngressPeer,
    path: &FieldPath,
    _: &mut Diagnostics,
) -> PeerResult {
    one_peer_field(path, [peer.namespaces.is_some(), peer.pods.is_some()])?;
    if let Some(namespaces) = &peer.namespaces {
        return namespaces_peer(namespaces, path).map(Some);
    }
    if let Some(pods) = &peer.pods {
        return Ok(Some(vec![Peer::pods(namespaced_pod(
            pods,
            &path.field("pods"),
        )?)]));
    }
    Ok(None)
}

/// Destinations: `namespaces`, `pods`, `nodes` or `networks`. `domainNames` is rejected.
pub(super) fn egress_peer(
    peer: &EgressPeer,
    path: &FieldPath,
    diags: &mut Diagnostics,
) -> PeerResult {
    if peer.domain_names.is_some() {
        return Err(path
            .field("domainNames")
            .unsupported("FQDN rules are not supported"));
    }
    one_peer_field(
        path,
        [
            peer.namespaces.is_some(),
            peer.pods.is_some(),
            peer.nodes.is_some(),
            peer.networks.is_some(),
        ],
    )?;
    if let Some(namespaces) = &peer.namespaces {
        return namespaces_peer(namespaces, path).map(Some);
    }
    if let Some(pods) = &peer.pods {
        return Ok(Some(vec![Peer::pods(namespaced_pod(
            pods,
            &path.field("pods"),
        )?)]));
    }
    if let Some(nodes) = &peer.nodes {
        return Ok(Some(vec![Peer::nodes(label_selector(
            nodes,
            &path.field("nodes"),
        )?)]));
    }
    if let Some(networks) = &peer.networks {
        let networks_path = path.field("networks");
        if networks.is_empty() {
            return Err(networks_path.error("networks must list at least one CIDR"));
        }
        if networks.len() > MAX_NETWORKS {
            return Err(networks_path.error(format!(
                "{} CIDRs, but at most {MAX_NETWORKS} are allowed",
                networks.len()
            )));
        }
        let mut out = Vec::with_capacity(networks.len());
        for (i, text) in networks.iter().enumerate() {
            let path = || networks_path.index(i);
            if text.len() > MAX_CIDR_LENGTH {
                return Err(path().error(format!(
                    "{:?} is {} characters long, but at most {MAX_CIDR_LENGTH} are allowed",
                    text,
                    text.len()
                )));
            }
            let net = parse_cidr(text, Notation::Cidr, path, diags)?;
            // Networks match pod and node addresses too, not only outside ones.
            out.push(Peer::Cidr(CidrSelector {
                net,
                except: Default::default(),
                scope: AddressScope::Any,
            }));
        }
        return Ok(Some(out));
    }
    Ok(None)
}

fn namespaces_peer(
    namespaces: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    path: &FieldPath,
) -> Result<Vec<Peer>, FieldError> {
    Ok(vec![Peer::pods(PodSelector {
        namespaces: label_selector(namespaces, &path.field("namespaces"))?,
        pods: LabelSelector::everything(),
    })])
}

fn one_peer_field<const N: usize>(path: &FieldPath, set: [bool; N]) -> Result<(), FieldError> {
    if set.iter().filter(|s| **s).count() > 1 {
        Err(path.error("a peer must set exactly one field"))
    } else {
        Ok(())
    }
}

/// `ports`: absent or empty means all traffic.
fn admin_ports(ports: Option<&[AdminPort]>, path: &FieldPath) -> Result<Vec<PortRule>, FieldError> {
    ports
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, port)| admin_port(port, &path.index(i)))
        .collect()
}

fn admin_port(port: &AdminPort, path: &FieldPath) -> Result<PortRule, FieldError> {
    match (&port.port_number, &port.named_port, &port.port_range) {
        (Some(number), None, None) => {
            let path = path.field("portNumber");
            Ok(PortRule::single(
                k8s_protocol(number.protocol.as_deref(), &path.field("protocol"))?,
                port_number(number.port, &path.field("port"))?,
            ))
        }
        // The protocol of a named port is the one the container port declares.
        (None, Some(name), None) => Ok(PortRule::named(
            None,
            named_port(name, &path.field("namedPort"))?,
        )),
        (None, None, Some(range)) => {
            let path = path.field("portRange");
            let protocol = k8s_protocol(range.protocol.as_deref(), &path.field("protocol"))?;
            let (start, end) = port_range(&path, ("start", range.start), ("end", range.end))?;
            Ok(PortRule::range(protocol, start, end))
        }
        _ => Err(path.error("a port must set exactly one of portNumber, namedPort and portRange")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::testing::*;
    use netpol_engine::Protocol::*;

    fn anp(name: &str, spec: &str) -> String {
        format!(
            "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {{name: {name}}}\nspec:\n{spec}"
        )
    }

    fn banp(name: &str, spec: &str) -> String {
        format!(
            "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: BaselineAdminNetworkPolicy\nmetadata: {{name: {name}}}\nspec:\n{spec}"
        )
    }

    #[test]
    fn rules_become_ordered_admin_entries() {
        let e = entries(&anp(
            "mon",
            r#"
  priority: 7
  subject: {namespaces: {matchLabels: {ns: x}}}
  ingress:
  - name: allow-scraper
    action: Allow
    from: [{pods: {namespaceSelector: {matchLabels: {ns: z}}, podSelector: {matchLabels: {pod: c}}}}]
    ports: [{portNumber: {protocol: TCP, port: 81}}]
  - action: Deny
    from: [{namespaces: {matchLabels: {ns: z}}}]
  egress:
  - name: pass-dns
    action: Pass
    to: [{networks: [192.0.2.0/24, "2001:db8::/32"]}]
"#,
        ));
        assert_eq!(e.len(), 3);
        assert!(e.iter().all(|e| e.tier == Tier::Admin && !e.default_deny));
        assert_eq!(e[0].priority, Priority::new(7, "mon", 0));
        assert_eq!(e[1].priority, Priority::new(7, "mon", 1));
        assert_eq!(e[2].priority, Priority::new(7, "mon", 0));
        assert_eq!(e[0].provenance.rule, "allow-scraper");
        assert_eq!(e[1].provenance.rule, "ingress[1]");
        assert_eq!(e[1].verdict, Verdict::Deny);
        assert_eq!(e[2].verdict, Verdict::Pass);
        assert_eq!(e[2].peers.len(), 2);

        let xa = pod("x", "a", "10.1.0.11");
        let zc = pod("z", "c", "10.1.2.13");
        let za = pod("z", "a", "10.1.2.11");
        assert!(ingress_allowed(&e, &xa, &zc, Tcp, 81));
        assert!(!ingress_allowed(&e, &xa, &zc, Tcp, 80));
        assert!(!ingress_allowed(&e, &xa, &za, Tcp, 81));
        // Not selected by the subject.
        assert!(ingress_allowed(
            &e,
            &pod("y", "a", "10.1.1.11"),
            &za,
            Tcp,
            81
        ));
    }

    #[test]
    fn subject_pods_and_egress_peers_nodes_and_networks() {
        let e = entries(&anp(
            "egress",
            r#"
  priority: 0
  subject: {pods: {namespaceSelector: {matchLabels: {ns: x}}, podSelector: {matchLabels: {pod: a}}}}
  egress:
  - name: no-zone-b
    action: Deny
    to: [{nodes: {matchLabels: {zone: b}}}]
  - name: no-net
    action: Deny
    to: [{networks: [10.0.0.0/8]}]
"#,
        ));
        let xa = pod("x", "a", "10.1.0.11");
        assert!(!egress_allowed(
            &e,
            &xa,
            &node("n2", "b", "172.16.0.2"),
            Tcp,
            22
        ));
        assert!(egress_allowed(
            &e,
            &xa,
            &node("n1", "a", "172.16.0.1"),
            Tcp,
            22
        ));
        // networks match pods and nodes too.
        assert!(!egress_allowed(
            &e,
            &xa,
            &pod("y", "a", "10.1.1.11"),
            Tcp,
            80
        ));
        assert!(!egress_allowed(
            &e,
            &xa,
            &node("n3", "a", "10.0.0.3"),
            Tcp,
            80
        ));
        assert!(egress_allowed(&e, &xa, &world("192.0.2.0/24"), Tcp, 80));
        assert!(egress_allowed(
            &e,
            &pod("x", "b", "10.1.0.12"),
            &world("10.0.0.0/8"),
            Tcp,
            80
        ));
    }

    #[test]
    fn ports_number_named_and_range() {
        let e = entries(&anp(
            "p",
            r#"
  priority: 1
  subject: {namespaces: {}}
  ingress:
  - action: Allow
    from: [{namespaces: {}}]
    ports:
    - portNumber: {port: 80}
    - namedPort: dns
    - portRange: {protocol: SCTP, start: 100, end: 200}
"#,
        ));
        assert_eq!(
            e[0].ports,
            vec![
                PortRule::single(Tcp, 80),
                PortRule::named(None, "dns"),
                PortRule::range(Sctp, 100, 200),
            ]
        );
        let xa = pod("x", "a", "10.1.0.11");
        let yb = pod("y", "b", "10.1.1.12");
        // The named port takes its protocol from the container port: dns is UDP 53.
        assert_eq!(
            verdict(&e, &xa, Direction::Ingress, &yb, Udp, 53),
            Verdict::Allow
        );
    }

    #[test]
    fn peer_with_no_field_fails_closed_with_a_warning() {
        let policy = |action: &str| {
            anp(
                "fc",
                &format!(
                    "  priority: 1\n  subject: {{namespaces: {{}}}}\n  ingress:\n  - action: {action}\n    from: [{{}}, {{namespaces: {{matchLabels: {{ns: y}}}}}}]\n"
                ),
            )
        };
        let xa = pod("x", "a", "10.1.0.11");
        let za = pod("z", "a", "10.1.2.11");
        let ya = pod("y", "a", "10.1.1.11");

        let allow = policy("Allow");
        let w = warnings(&allow);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].field, "spec.ingress[0].from[0]");
        assert!(w[0].message.contains("matches nothing"), "{}", w[0]);
        let e = entries(&allow);
        assert_eq!(
            e[0].peers.len(),
            1,
            "the empty peer adds nothing to an Allow"
        );
        assert_eq!(
            verdict(&e, &xa, Direction::Ingress, &ya, Tcp, 80),
            Verdict::Allow
        );

        for action in ["Deny", "Pass"] {
            let p = policy(action);
            let w = warnings(&p);
            assert!(w[0].message.contains("matches all traffic"), "{}", w[0]);
            let e = entries(&p);
            assert!(e[0].peers.contains(&Peer::Entity(Entity::All)));
            let expected = if action == "Deny" {
                Verdict::Deny
            } else {
                // Pass skips the admin tier; nothing else decides, so the default allows.
                Verdict::Allow
            };
            assert_eq!(verdict(&e, &xa, Direction::Ingress, &za, Tcp, 80), expected);
        }
    }

    #[test]
    fn baseline_is_the_last_tier_with_allow_and_deny() {
        let e = entries(&banp(
            "default",
            r#"
  subject: {namespaces: {}}
  ingress:
  - {name: allow-z, action: Allow, from: [{namespaces: {matchLabels: {ns: z}}}]}
  - {name: deny-all, action: Deny, from: [{namespaces: {}}]}
"#,
        ));
        assert!(e.iter().all(|e| e.tier == Tier::Baseline));
        assert_eq!(e[1].priority, Priority::new(0, "default", 1));
        let xa = pod("x", "a", "10.1.0.11");
        assert!(ingress_allowed(
            &e,
            &xa,
            &pod("z", "b", "10.1.2.12"),
            Tcp,
            80
        ));
        assert!(!ingress_allowed(
            &e,
            &xa,
            &pod("y", "b", "10.1.1.12"),
            Tcp,
            80
        ));
    }

    #[test]
    fn bad_input_names_object_and_field() {
        let ok_rule = "  ingress: [{action: Allow, from: [{namespaces: {}}]}]";
        let cases = [
            (
                format!("  priority: 1001\n  subject: {{namespaces: {{}}}}\n{ok_rule}"),
                "spec.priority",
                "priority 1001 is outside 0-1000",
            ),
            (
                format!("  priority: -1\n  subject: {{namespaces: {{}}}}\n{ok_rule}"),
                "spec.priority",
                "outside 0-1000",
            ),
            (
                format!("  priority: 1\n  subject: {{}}\n{ok_rule}"),
                "spec.subject",
                "exactly one of namespaces and pods",
            ),
            (
                "  priority: 1\n  subject: {namespaces: {}}\n  ingress: [{action: Foo, from: [{namespaces: {}}]}]".into(),
                "spec.ingress[0].action",
                "unknown action \"Foo\"",
            ),
            (
                "  priority: 1\n  subject: {namespaces: {}}\n  ingress: [{action: Allow, from: []}]".into(),
                "spec.ingress[0].from",
                "at least one peer",
            ),
            (
                "  priority: 1\n  subject: {namespaces: {}}\n  ingress: [{action: Allow, from: [{namespaces: {}, pods: {podSelector: {}}}]}]".into(),
                "spec.ingress[0].from[0]",
                "exactly one field",
            ),
            (
                "  priority: 1\n  subject: {namespaces: {}}\n  egress: [{action: Allow, to: [{networks: [10.0.0.0/40]}]}]".into(),
                "spec.egress[0].to[0].networks[0]",
                "invalid CIDR",
            ),
            (
                "  priority: 1\n  subject: {namespaces: {}}\n  egress: [{action: Allow, to: [{domainNames: [example.com]}]}]".into(),
                "spec.egress[0].to[0].domainNames",
                "unsupported: domainNames",
            ),
            (
                "  priority: 1\n  subject: {namespaces: {}}\n  ingress: [{action: Allow, from: [{namespaces: {}}], ports: [{portNumber: {port: 0}}]}]".into(),
                "spec.ingress[0].ports[0].portNumber.port",
                "outside 1-65535",
            ),
            (
                "  priority: 1\n  subject: {namespaces: {}}\n  ingress: [{action: Allow, from: [{namespaces: {}}], ports: [{portNumber: {protocol: XYZ, port: 80}}]}]".into(),
                "spec.ingress[0].ports[0].portNumber.protocol",
                "unknown protocol",
            ),
            (
                "  priority: 1\n  subject: {namespaces: {}}\n  ingress: [{action: Allow, from: [{namespaces: {}}], ports: [{portRange: {start: 90, end: 80}}]}]".into(),
                "spec.ingress[0].ports[0].portRange.end",
                "end 80 is below start 90",
            ),
            (
                "  priority: 1\n  subject: {namespaces: {}}\n  ingress: [{action: Allow, from: [{namespaces: {}}], ports: [{}]}]".into(),
                "spec.ingress[0].ports[0]",
                "exactly one of portNumber",
            ),
            (
                "  priority: 1\n  subject: {namespaces: {matchExpressions: [{key: a, operator: In, values: []}]}}".into(),
                "spec.subject.namespaces.matchExpressions[0].values",
                "at least one value",
            ),
        ];
        for (spec, field, message) in cases {
            let err = error(&anp("bad", &spec));
            assert_eq!(err.field, field, "{spec}");
            assert!(err.message.contains(message), "{spec}: {err}");
            assert!(err.to_string().starts_with("AdminNetworkPolicy bad: "));
        }
    }

    #[test]
    fn too_many_rules() {
        let rules = "  - {action: Allow, from: [{namespaces: {}}]}\n".repeat(101);
        let err = error(&anp(
            "many",
            &format!("  priority: 1\n  subject: {{namespaces: {{}}}}\n  ingress:\n{rules}"),
        ));
        assert_eq!(err.field, "spec.ingress");
    }

    #[test]
    fn baseline_must_be_named_default_and_cannot_pass() {
        let err = error(&banp(
            "other",
            "  subject: {namespaces: {}}\n  ingress: [{action: Allow, from: [{namespaces: {}}]}]",
        ));
        assert_eq!(err.field, "metadata.name");
        assert_eq!(
            err.to_string(),
            "BaselineAdminNetworkPolicy other: metadata.name: a BaselineAdminNetworkPolicy must be \
             named \"default\", not \"other\""
        );
        let err = error(&banp(
            "default",
            "  subject: {namespaces: {}}\n  ingress: [{action: Pass, from: [{namespaces: {}}]}]",
        ));
        assert_eq!(err.field, "spec.ingress[0].action");
    }
}
