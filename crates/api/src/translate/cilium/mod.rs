//! CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy (cilium.io/v2), at L3/L4.
//!
//! Cilium rules share the NetworkPolicy tier: allow and deny rules are unordered, and a deny
//! that matches wins over every allow of the tier. Each rule (`spec`, or each of `specs`)
//! isolates its subject in every direction it has rules for, deny rules included, unless
//! `enableDefaultDeny` says otherwise. L7, FQDN and other identity-based features are rejected by
//! name.
//!
//! This module walks a policy's rules (`spec` and `specs`, each direction, allow and deny) and
//! builds one entry per rule. The parts of a rule are read by modules of their own:
//! [`rule_view`] gives ingress and egress rules one shape, [`selectors`] maps endpoint and node
//! selectors, [`peers`] reads the peer fields, [`ports`] the `toPorts` list and [`auth`] the
//! authentication mode.

mod auth;
mod peers;
mod ports;
mod rule_view;
mod selectors;
#[cfg(test)]
mod testing;

use netpol_engine::{
    AuthMode, Direction, Entity, Peer, PolicyEntry, PortRule, Priority, Provenance, Tier, Verdict,
};

use crate::crd::cilium::CiliumRule;
use crate::crd::{CiliumClusterwideNetworkPolicy, CiliumNetworkPolicy};
use crate::error::{Diagnostics, FieldError, FieldPath};
use crate::object::DEFAULT_NAMESPACE;
use rule_view::{views, RuleView};

pub(super) fn translate_namespaced(
    policy: &CiliumNetworkPolicy,
    diags: &mut Diagnostics,
) -> Vec<PolicyEntry> {
    let namespace = policy
        .metadata
        .namespace
        .as_deref()
        .unwrap_or(DEFAULT_NAMESPACE);
    let context = PolicyContext {
        kind: "CiliumNetworkPolicy",
        name: policy.metadata.name.as_deref().unwrap_or_default(),
        namespace: Some(namespace),
    };
    context.translate(
        policy.spec.spec.as_ref(),
        policy.spec.specs.as_deref(),
        diags,
    )
}

pub(super) fn translate_clusterwide(
    policy: &CiliumClusterwideNetworkPolicy,
    diags: &mut Diagnostics,
) -> Vec<PolicyEntry> {
    let context = PolicyContext {
        kind: "CiliumClusterwideNetworkPolicy",
        name: policy.metadata.name.as_deref().unwrap_or_default(),
        namespace: None,
    };
    context.translate(
        policy.spec.spec.as_ref(),
        policy.spec.specs.as_deref(),
        diags,
    )
}

/// The policy being translated.
struct PolicyContext<'a> {
    kind: &'static str,
    name: &'a str,
    /// The namespace of a CiliumNetworkPolicy, which confines its selectors; `None` for the
    /// cluster-wide kind.
    namespace: Option<&'a str>,
}

/// One rule of the policy: `spec`, or an element of `specs`.
struct RuleContext<'a> {
    policy: &'a PolicyContext<'a>,
    path: FieldPath,
    /// Prefix of provenance rule names: empty for `spec`, `specs[1].` for the second of `specs`.
    label: String,
}

impl PolicyContext<'_> {
    fn translate(
        &self,
        spec: Option<&CiliumRule>,
        specs: Option<&[CiliumRule]>,
        diags: &mut Diagnostics,
    ) -> Vec<PolicyEntry> {
        let mut rules: Vec<(&CiliumRule, FieldPath, String)> = Vec::new();
        if let Some(rule) = spec {
            rules.push((rule, FieldPath::root("spec"), String::new()));
        }
        for (i, rule) in specs.unwrap_or_default().iter().enumerate() {
            rules.push((
                rule,
                FieldPath::root("specs").index(i),
                format!("specs[{i}]."),
            ));
        }
        if rules.is_empty() {
            diags.error(FieldPath::root("spec").error("a Cilium policy needs spec or specs"));
            return Vec::new();
        }
        let mut entries = Vec::new();
        for (rule, path, label) in rules {
            let context = RuleContext {
                policy: self,
                path,
                label,
            };
            entries.extend(context.translate(rule, diags));
        }
        entries
    }
}

/// What one translated rule matches.
struct RuleMatch {
    peers: Vec<Peer>,
    ports: Vec<PortRule>,
    auth: Option<AuthMode>,
}

impl RuleContext<'_> {
    fn translate(&self, rule: &CiliumRule, diags: &mut Diagnostics) -> Vec<PolicyEntry> {
        if rule.node_selector.is_some() {
            diags.error(
                self.path
                    .field("nodeSelector")
                    .unsupported("host policies are not supported"),
            );
            return Vec::new();
        }
        let selector_path = self.path.field("endpointSelector");
        let Some(selector) = &rule.endpoint_selector else {
            diags.error(selector_path.error("required (or nodeSelector, which is unsupported)"));
            return Vec::new();
        };
        let subject = selectors::subject(selector, self.policy.namespace, &selector_path, diags);
        let Some(subject) = diags.check(subject) else {
            return Vec::new();
        };

        let ingress = [
            (
                Verdict::Allow,
                "ingress",
                views(rule.ingress.as_deref(), RuleView::ingress),
            ),
            (
                Verdict::Deny,
                "ingressDeny",
                views(rule.ingress_deny.as_deref(), RuleView::ingress),
            ),
        ];
        let egress = [
            (
                Verdict::Allow,
                "egress",
                views(rule.egress.as_deref(), RuleView::egress),
            ),
            (
                Verdict::Deny,
                "egressDeny",
                views(rule.egress_deny.as_deref(), RuleView::egress),
            ),
        ];
        let default_deny = rule.enable_default_deny.as_ref();

        let mut entries = Vec::new();
        for (direction, rules, override_) in [
            (
                Direction::Ingress,
                ingress,
                default_deny.and_then(|d| d.ingress),
            ),
            (
                Direction::Egress,
                egress,
                default_deny.and_then(|d| d.egress),
            ),
        ] {
            // A direction with rules, deny rules included, isolates unless overridden.
            let has_rules = rules.iter().any(|(_, _, views)| !views.is_empty());
            let isolates = override_.unwrap_or(has_rules);
            let entry = |verdict, peers, ports, auth, rule: String| PolicyEntry {
                tier: Tier::Normal,
                priority: Priority::unordered(),
                verdict,
                subject: subject.clone(),
                direction,
                peers,
                ports,
                default_deny: isolates,
                enforcement: netpol_engine::Enforcement::Enforce,
                auth,
                provenance: Provenance {
                    kind: self.policy.kind.into(),
                    namespace: self.policy.namespace.map(str::to_owned),
                    name: self.policy.name.into(),
                    rule: format!("{}{rule}", self.label),
                },
            };
            if !has_rules && isolates {
                // `enableDefaultDeny: true` without rules: isolation only.
                entries.push(entry(
                    Verdict::Allow,
                    Vec::new(),
                    Vec::new(),
                    None,
                    format!("enableDefaultDeny.{direction}"),
                ));
            }
            for (verdict, field, views) in rules {
                for (i, view) in views.into_iter().enumerate() {
                    let path = self.path.field(field).index(i);
                    let translated = self.rule(view, verdict, &path, diags);
                    if let Some(m) = diags.check(translated) {
                        let name = format!("{field}[{i}]");
                        entries.push(entry(verdict, m.peers, m.ports, m.auth, name));
                    }
                }
            }
        }
        entries
    }

    /// The peers, ports and authentication of one rule.
    fn rule(
        &self,
        view: RuleView,
        verdict: Verdict,
        path: &FieldPath,
        diags: &mut Diagnostics,
    ) -> Result<RuleMatch, FieldError> {
        for (field, set, why) in &view.unsupported {
            if *set {
                return Err(path.field(field).unsupported(why));
            }
        }
        let auth = match (view.authentication, verdict) {
            (None, _) => None,
            (Some(_), Verdict::Deny) => {
                return Err(path
                    .field("authentication")
                    .error("authentication is not valid in deny rules"))
            }
            (Some(a), _) => Some(auth::authentication(a, &path.field("authentication"))?),
        };
        let ports = ports::to_ports(view.to_ports, &path.field("toPorts"))?;
        let has_ports = view.to_ports.is_some_and(|p| !p.is_empty());
        let peers = if view.has_peer_field() {
            peers::rule_peers(&view, self.policy.namespace, path, diags)?
        } else if has_ports {
            // Ports without a peer: those ports from or to everyone.
            vec![Peer::Entity(Entity::All)]
        } else {
            // An empty rule selects nothing; it only isolates.
            Vec::new()
        };
        Ok(RuleMatch { peers, ports, auth })
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use crate::translate::testing::*;
    use netpol_engine::Protocol::*;

    #[test]
    fn deny_wins_over_allow_and_entities_select_outside() {
        let e = entries(&cnp(
            "y",
            r#"
spec:
  endpointSelector: {}
  ingressDeny:
  - fromEndpoints: [{matchLabels: {"k8s:io.kubernetes.pod.namespace": x}}]
    toPorts: [{ports: [{port: "80", protocol: TCP}]}]
  ingress:
  - fromEntities: [world]
  - fromEndpoints: [{matchLabels: {"k8s:io.kubernetes.pod.namespace": x}}]
"#,
        ));
        assert!(e.iter().all(|e| e.tier == Tier::Normal
            && e.priority == Priority::unordered()
            && e.default_deny));
        let rules: Vec<&str> = e.iter().map(|e| e.provenance.rule.as_str()).collect();
        assert_eq!(rules, ["ingress[0]", "ingress[1]", "ingressDeny[0]"]);
        assert_eq!(e[2].verdict, Verdict::Deny);
        let y = ya();
        assert!(!ingress_allowed(&e, &y, &xa(), Tcp, 80));
        assert!(ingress_allowed(&e, &y, &xa(), Tcp, 81));
        assert!(ingress_allowed(&e, &y, &world("203.0.113.0/24"), Tcp, 80));
        // Isolated: z is neither allowed nor denied explicitly.
        assert!(!ingress_allowed(&e, &y, &za(), Tcp, 81));
        // The subject is pinned to the policy's namespace.
        assert!(ingress_allowed(&e, &xb(), &xa(), Tcp, 80));
    }

    #[test]
    fn empty_rule_only_isolates_and_ports_without_peers_allow_everyone() {
        let empty = entries(&cnp("x", "spec:\n  endpointSelector: {}\n  ingress: [{}]"));
        assert_eq!(empty.len(), 1);
        assert!(empty[0].peers.is_empty());
        assert!(!ingress_allowed(&empty, &xa(), &xb(), Tcp, 80));

        let ports_only = entries(&cnp(
            "x",
            "spec:\n  endpointSelector: {}\n  ingress: [{toPorts: [{ports: [{port: '80', protocol: TCP}]}]}]",
        ));
        assert_eq!(ports_only[0].peers, vec![Peer::Entity(Entity::All)]);
        assert!(ingress_allowed(
            &ports_only,
            &xa(),
            &world("192.0.2.0/24"),
            Tcp,
            80
        ));
        assert!(ingress_allowed(&ports_only, &xa(), &za(), Tcp, 80));
        assert!(!ingress_allowed(&ports_only, &xa(), &za(), Tcp, 81));

        // An explicitly empty peer list selects nothing, even with ports.
        let none = entries(&cnp(
            "x",
            "spec:\n  endpointSelector: {}\n  ingress: [{fromEndpoints: [], toPorts: [{ports: [{port: '80'}]}]}]",
        ));
        assert!(none[0].peers.is_empty());
    }

    #[test]
    fn isolation_follows_rules_and_enable_default_deny() {
        // A deny-only policy isolates its direction.
        let deny_only = entries(&cnp(
            "x",
            "spec:\n  endpointSelector: {}\n  ingressDeny: [{fromEndpoints: [{matchLabels: {pod: b}}]}]",
        ));
        assert!(deny_only.iter().all(|e| e.default_deny));
        assert!(!ingress_allowed(
            &deny_only,
            &xa(),
            &pod("x", "c", "10.1.0.13"),
            Tcp,
            80
        ));
        assert!(egress_allowed(&deny_only, &xa(), &ya(), Tcp, 80));

        // enableDefaultDeny.ingress: false keeps it from isolating.
        let open = entries(&cnp(
            "x",
            "spec:\n  endpointSelector: {}\n  enableDefaultDeny: {ingress: false}\n  ingressDeny: [{fromEndpoints: [{matchLabels: {pod: b}}]}]",
        ));
        assert!(open.iter().all(|e| !e.default_deny));
        assert!(ingress_allowed(
            &open,
            &xa(),
            &pod("x", "c", "10.1.0.13"),
            Tcp,
            80
        ));
        assert!(!ingress_allowed(&open, &xa(), &xb(), Tcp, 80));

        // enableDefaultDeny.egress: true isolates without any egress rule.
        let closed = entries(&cnp(
            "x",
            "spec:\n  endpointSelector: {}\n  enableDefaultDeny: {egress: true}",
        ));
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].provenance.rule, "enableDefaultDeny.egress");
        assert!(closed[0].peers.is_empty() && closed[0].default_deny);
        assert!(!egress_allowed(&closed, &xa(), &ya(), Tcp, 80));
        assert!(ingress_allowed(&closed, &xa(), &ya(), Tcp, 80));
    }

    #[test]
    fn specs_lists_name_their_rules() {
        let e = entries(&cnp(
            "x",
            r#"
spec:
  endpointSelector: {matchLabels: {pod: a}}
  ingress: [{fromEntities: [world]}]
specs:
- endpointSelector: {matchLabels: {pod: b}}
  egress: [{toEntities: [world]}]
- endpointSelector: {matchLabels: {pod: c}}
  ingressDeny: [{fromEntities: [world]}]
"#,
        ));
        let rules: Vec<&str> = e.iter().map(|e| e.provenance.rule.as_str()).collect();
        assert_eq!(
            rules,
            [
                "ingress[0]",
                "specs[0].egress[0]",
                "specs[1].ingressDeny[0]"
            ]
        );
        // Each rule isolates only its own subject.
        assert!(ingress_allowed(&e, &xb(), &za(), Tcp, 80));
        assert!(!ingress_allowed(&e, &xa(), &za(), Tcp, 80));
    }

    #[test]
    fn unsupported_and_invalid_fields_are_named() {
        let cases = [
            (
                "spec:\n  endpointSelector: {}\n  egress: [{toFQDNs: [{matchName: example.com}]}]",
                "spec.egress[0].toFQDNs",
                "unsupported: toFQDNs (FQDN",
            ),
            (
                "spec:\n  endpointSelector: {}\n  ingress: [{toPorts: [{ports: [{port: '80'}], rules: {http: [{method: GET}]}}]}]",
                "spec.ingress[0].toPorts[0].rules",
                "unsupported: rules (L7",
            ),
            (
                "spec:\n  endpointSelector: {}\n  egress: [{toPorts: [{ports: [{port: '443'}], serverNames: [a.example]}]}]",
                "spec.egress[0].toPorts[0].serverNames",
                "unsupported: serverNames",
            ),
            (
                "spec:\n  endpointSelector: {}\n  egress: [{toServices: [{k8sService: {serviceName: a}}]}]",
                "spec.egress[0].toServices",
                "unsupported: toServices",
            ),
            (
                "spec:\n  endpointSelector: {}\n  ingress: [{icmps: [{fields: [{type: 8}]}]}]",
                "spec.ingress[0].icmps",
                "unsupported: icmps",
            ),
            (
                "spec:\n  endpointSelector: {}\n  ingress: [{fromRequires: [{}]}]",
                "spec.ingress[0].fromRequires",
                "unsupported: fromRequires",
            ),
            (
                "spec:\n  endpointSelector: {}\n  ingress: [{fromCIDRSet: [{cidrGroupRef: grp}]}]",
                "spec.ingress[0].fromCIDRSet[0].cidrGroupRef",
                "unsupported: cidrGroupRef",
            ),
            (
                "spec:\n  nodeSelector: {}\n  ingress: [{}]",
                "spec.nodeSelector",
                "unsupported: nodeSelector (host policies",
            ),
            (
                "spec:\n  ingress: [{}]",
                "spec.endpointSelector",
                "required",
            ),
            (
                "metadata2: {}",
                "spec",
                "needs spec or specs",
            ),
            (
                "spec:\n  endpointSelector: {matchLabels: {\"reserved:host\": \"\"}}",
                "spec.endpointSelector.matchLabels[\"reserved:host\"]",
                "reserved label",
            ),
            (
                "spec:\n  endpointSelector: {}\n  ingress: [{fromEndpoints: [{matchExpressions: [{key: app, operator: Foo}]}]}]",
                "spec.ingress[0].fromEndpoints[0].matchExpressions[0].operator",
                "unknown operator",
            ),
            (
                "spec:\n  endpointSelector: {}\n  ingress: [{fromEntities: [kube-apiserver]}]",
                "spec.ingress[0].fromEntities[0]",
                "unsupported entity \"kube-apiserver\"",
            ),
            (
                "spec:\n  endpointSelector: {}\n  ingress: [{fromCIDR: [10.0.0.0/33]}]",
                "spec.ingress[0].fromCIDR[0]",
                "invalid CIDR",
            ),
            (
                "spec:\n  endpointSelector: {}\n  ingress: [{fromCIDRSet: [{cidr: 10.0.0.0/8, except: [11.0.0.0/16]}]}]",
                "spec.ingress[0].fromCIDRSet[0].except[0]",
                "not strictly inside",
            ),
            (
                "spec:\n  endpointSelector: {}\n  ingress: [{toPorts: [{ports: [{port: '70000'}]}]}]",
                "spec.ingress[0].toPorts[0].ports[0].port",
                "outside 1-65535",
            ),
            (
                "spec:\n  endpointSelector: {}\n  ingress: [{toPorts: [{ports: [{port: '80', endPort: 70}]}]}]",
                "spec.ingress[0].toPorts[0].ports[0].endPort",
                "endPort 70 is below port 80",
            ),
            (
                "spec:\n  endpointSelector: {}\n  ingress: [{toPorts: [{ports: [{port: http, endPort: 90}]}]}]",
                "spec.ingress[0].toPorts[0].ports[0].endPort",
                "named port",
            ),
            (
                "spec:\n  endpointSelector: {}\n  ingress: [{toPorts: [{ports: [{port: '0', endPort: 90}]}]}]",
                "spec.ingress[0].toPorts[0].ports[0].endPort",
                "non-zero port",
            ),
            (
                "spec:\n  endpointSelector: {}\n  ingress: [{toPorts: [{ports: [{port: '80', protocol: XYZ}]}]}]",
                "spec.ingress[0].toPorts[0].ports[0].protocol",
                "unknown protocol \"XYZ\"",
            ),
            (
                "spec:\n  endpointSelector: {}\n  ingress: [{toPorts: [{ports: [{protocol: ICMP}]}]}]",
                "spec.ingress[0].toPorts[0].ports[0].protocol",
                "unsupported: protocol ICMP",
            ),
        ];
        for (body, field, message) in cases {
            let err = error(&cnp("x", body));
            assert_eq!(err.field, field, "{body}");
            assert!(err.message.contains(message), "{body}: {err}");
            assert!(err.to_string().starts_with("CiliumNetworkPolicy x/c: "));
        }
    }
}
