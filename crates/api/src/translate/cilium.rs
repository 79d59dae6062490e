//! CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy (cilium.io/v2), at L3/L4.
//!
//! Cilium rules share the NetworkPolicy tier: allow and deny rules are unordered, and a deny
//! that matches wins over every allow of the tier. Each rule (`spec`, or each of `specs`)
//! isolates its subject in every direction it has rules for, deny rules included, unless
//! `enableDefaultDeny` says otherwise. L7, FQDN and other identity-based features are rejected by
//! name.

use ipnet::IpNet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use netpol_engine::{
    AddressScope, AuthMode, CidrSelector, Direction, Entity, LabelSelector, Peer, PodSelector,
    PolicyEntry, PortRule, Priority, Protocol, Provenance, Requirement, Tier, Verdict,
    NAMESPACE_NAME_LABEL,
};

use super::cidr::{cidr_selector, parse_cidr, Notation};
use super::ports::{named_port, port_number, port_range};
use crate::crd::cilium::{
    Authentication, CidrRule, CiliumEgressRule, CiliumIngressRule, CiliumPort, CiliumPortProtocol,
    CiliumPortRule, CiliumRule,
};
use crate::crd::{CiliumClusterwideNetworkPolicy, CiliumNetworkPolicy};
use crate::error::{Diagnostics, FieldError, FieldPath};
use crate::object::DEFAULT_NAMESPACE;
use crate::selector::requirement;

/// The pod label Cilium derives from a pod's namespace name.
const NAMESPACE_KEY: &str = "io.kubernetes.pod.namespace";
/// The prefix of the pod labels Cilium derives from the namespace's labels.
const NAMESPACE_LABELS_PREFIX: &str = "io.cilium.k8s.namespace.labels.";
/// The prefix of Cilium's other derived labels (service account, cluster name, ...).
const CILIUM_POLICY_PREFIX: &str = "io.cilium.k8s.policy.";

/// The protocols a Cilium `ANY` port expands to.
const PORT_PROTOCOLS: [Protocol; 3] = [Protocol::Tcp, Protocol::Udp, Protocol::Sctp];

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

/// An ingress or egress rule, with its peer fields under their direction's names.
struct RuleView<'a> {
    endpoints: Field<'a, [metav1::LabelSelector]>,
    cidr: Field<'a, [String]>,
    cidr_set: Field<'a, [CidrRule]>,
    entities: Field<'a, [String]>,
    nodes: Field<'a, [metav1::LabelSelector]>,
    /// Fields netpol rejects: name, whether set, and why.
    unsupported: Vec<(&'static str, bool, &'static str)>,
    to_ports: Option<&'a [CiliumPortRule]>,
    authentication: Option<&'a Authentication>,
}

/// What one translated rule matches.
struct RuleMatch {
    peers: Vec<Peer>,
    ports: Vec<PortRule>,
    auth: Option<AuthMode>,
}

/// A field's name in this direction, and its value.
type Field<'a, T> = (&'static str, Option<&'a T>);

impl<'a> RuleView<'a> {
    fn ingress(rule: &'a CiliumIngressRule) -> Self {
        RuleView {
            endpoints: ("fromEndpoints", rule.from_endpoints.as_deref()),
            cidr: ("fromCIDR", rule.from_cidr.as_deref()),
            cidr_set: ("fromCIDRSet", rule.from_cidr_set.as_deref()),
            entities: ("fromEntities", rule.from_entities.as_deref()),
            nodes: ("fromNodes", rule.from_nodes.as_deref()),
            unsupported: vec![
                (
                    "fromRequires",
                    rule.from_requires.is_some(),
                    "requirements are not supported",
                ),
                (
                    "fromGroups",
                    rule.from_groups.is_some(),
                    "cloud provider groups are not supported",
                ),
                (
                    "icmps",
                    rule.icmps.is_some(),
                    "ICMP rules are not supported",
                ),
            ],
            to_ports: rule.to_ports.as_deref(),
            authentication: rule.authentication.as_ref(),
        }
    }

    fn egress(rule: &'a CiliumEgressRule) -> Self {
        RuleView {
            endpoints: ("toEndpoints", rule.to_endpoints.as_deref()),
            cidr: ("toCIDR", rule.to_cidr.as_deref()),
            cidr_set: ("toCIDRSet", rule.to_cidr_set.as_deref()),
            entities: ("toEntities", rule.to_entities.as_deref()),
            nodes: ("toNodes", rule.to_nodes.as_deref()),
            unsupported: vec![
                (
                    "toFQDNs",
                    rule.to_fqdns.is_some(),
                    "FQDN rules are not supported",
                ),
                (
                    "toServices",
                    rule.to_services.is_some(),
                    "service selectors are not supported",
                ),
                (
                    "toGroups",
                    rule.to_groups.is_some(),
                    "cloud provider groups are not supported",
                ),
                (
                    "toRequires",
                    rule.to_requires.is_some(),
                    "requirements are not supported",
                ),
                (
                    "icmps",
                    rule.icmps.is_some(),
                    "ICMP rules are not supported",
                ),
            ],
            to_ports: rule.to_ports.as_deref(),
            authentication: rule.authentication.as_ref(),
        }
    }

    fn has_peer_field(&self) -> bool {
        self.endpoints.1.is_some()
            || self.cidr.1.is_some()
            || self.cidr_set.1.is_some()
            || self.entities.1.is_some()
            || self.nodes.1.is_some()
    }
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
        let subject = self.subject(selector, &selector_path, diags);
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

    /// The endpoints the rule applies to. A namespaced policy only ever applies in its own
    /// namespace.
    fn subject(
        &self,
        selector: &metav1::LabelSelector,
        path: &FieldPath,
        diags: &mut Diagnostics,
    ) -> Result<PodSelector, FieldError> {
        let mapped = endpoint_selector(selector, path)?;
        let mut subject = PodSelector {
            namespaces: mapped.namespaces,
            pods: mapped.pods,
        };
        if let Some(ns) = self.policy.namespace {
            let named = subject.namespaces.match_labels.get(NAMESPACE_NAME_LABEL);
            if let Some(other) = named.filter(|n| *n != ns) {
                diags.warn(path.error(format!(
                    "selects namespace {other:?}, but a CiliumNetworkPolicy applies only in its \
                     own namespace {ns:?}; using {ns:?}"
                )));
            }
            subject.namespaces = subject.namespaces.and_label(NAMESPACE_NAME_LABEL, ns);
        }
        Ok(subject)
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
            (Some(a), _) => Some(authentication(a, &path.field("authentication"))?),
        };
        let ports = to_ports(view.to_ports, &path.field("toPorts"))?;
        let has_ports = view.to_ports.is_some_and(|p| !p.is_empty());
        let peers = if view.has_peer_field() {
            self.peers(&view, path, diags)?
        } else if has_ports {
            // Ports without a peer: those ports from or to everyone.
            vec![Peer::Entity(Entity::All)]
        } else {
            // An empty rule selects nothing; it only isolates.
            Vec::new()
        };
        Ok(RuleMatch { peers, ports, auth })
    }

    /// The union of the rule's peer fields.
    fn peers(
        &self,
        view: &RuleView,
        path: &FieldPath,
        diags: &mut Diagnostics,
    ) -> Result<Vec<Peer>, FieldError> {
        let mut peers = Vec::new();
        let (name, endpoints) = view.endpoints;
        for (i, selector) in endpoints.into_iter().flatten().enumerate() {
            peers.push(self.endpoint_peer(selector, &path.field(name).index(i))?);
        }
        let (name, cidrs) = view.cidr;
        for (i, text) in cidrs.into_iter().flatten().enumerate() {
            let net = parse_cidr(
                text,
                Notation::CidrOrAddress,
                &path.field(name).index(i),
                diags,
            )?;
            peers.push(outside_cluster(net));
        }
        let (name, sets) = view.cidr_set;
        for (i, set) in sets.into_iter().flatten().enumerate() {
            peers.push(cidr_set(set, &path.field(name).index(i), diags)?);
        }
        let (name, entities) = view.entities;
        for (i, entity_name) in entities.into_iter().flatten().enumerate() {
            peers.push(entity(entity_name, &path.field(name).index(i))?);
        }
        let (name, nodes) = view.nodes;
        for (i, selector) in nodes.into_iter().flatten().enumerate() {
            peers.push(Peer::Nodes(node_selector(
                selector,
                &path.field(name).index(i),
            )?));
        }
        Ok(peers)
    }

    /// `fromEndpoints`/`toEndpoints`: in a namespaced policy, confined to the policy's namespace
    /// unless the selector names the namespace key itself.
    fn endpoint_peer(
        &self,
        selector: &metav1::LabelSelector,
        path: &FieldPath,
    ) -> Result<Peer, FieldError> {
        let mapped = endpoint_selector(selector, path)?;
        let namespaces = match self.policy.namespace {
            Some(ns) if !mapped.names_namespace => {
                mapped.namespaces.and_label(NAMESPACE_NAME_LABEL, ns)
            }
            _ => mapped.namespaces,
        };
        Ok(Peer::Pods(PodSelector {
            namespaces,
            pods: mapped.pods,
        }))
    }
}

/// The views of one rule list.
fn views<'a, R>(rules: Option<&'a [R]>, view: fn(&'a R) -> RuleView<'a>) -> Vec<RuleView<'a>> {
    rules.into_iter().flatten().map(view).collect()
}

/// A Cilium endpoint selector split into its pod part and its namespace part.
struct MappedSelector {
    pods: LabelSelector,
    namespaces: LabelSelector,
    /// Whether the selector constrains the namespace name, which lifts the confinement of a
    /// namespaced policy's peers to its own namespace.
    names_namespace: bool,
}

/// Where a Cilium selector key points.
enum MappedKey {
    Pod(String),
    Namespace(String),
}

/// Maps an endpoint selector's keys: source prefixes (`k8s:`, `any:`) are dropped, the namespace
/// key and `io.cilium.k8s.namespace.labels.*` select namespace labels, everything else pod
/// labels.
fn endpoint_selector(
    selector: &metav1::LabelSelector,
    path: &FieldPath,
) -> Result<MappedSelector, FieldError> {
    let mut out = MappedSelector {
        pods: LabelSelector::everything(),
        namespaces: LabelSelector::everything(),
        names_namespace: false,
    };
    for (key, value) in selector.match_labels.iter().flatten() {
        let mapped = map_endpoint_key(key, &path.field("matchLabels").key(key))?;
        let (key, selector) = split_target(mapped, &mut out);
        add_label(selector, key, value);
    }
    for (i, expr) in selector.match_expressions.iter().flatten().enumerate() {
        let expr_path = path.field("matchExpressions").index(i);
        let mapped = map_endpoint_key(&expr.key, &expr_path.field("key"))?;
        let (key, selector) = split_target(mapped, &mut out);
        let req = requirement(key, &expr.operator, expr.values.as_deref(), &expr_path)?;
        selector.match_expressions.push(req);
    }
    Ok(out)
}

/// The selector a mapped key belongs to, and the key there.
fn split_target(key: MappedKey, out: &mut MappedSelector) -> (String, &mut LabelSelector) {
    match key {
        MappedKey::Pod(k) => (k, &mut out.pods),
        MappedKey::Namespace(k) => {
            if k == NAMESPACE_NAME_LABEL {
                out.names_namespace = true;
            }
            (k, &mut out.namespaces)
        }
    }
}

/// Adds `key=value`, keeping a conflicting earlier value (`k8s:app: a` and `any:app: b` both map
/// to `app`) as a requirement so that both still have to hold.
fn add_label(selector: &mut LabelSelector, key: String, value: &str) {
    match selector.match_labels.get(&key) {
        Some(existing) if existing != value => selector
            .match_expressions
            .push(Requirement::In(key, vec![value.to_owned()])),
        _ => {
            selector.match_labels.insert(key, value.to_owned());
        }
    }
}

fn map_endpoint_key(key: &str, path: &FieldPath) -> Result<MappedKey, FieldError> {
    let bare = strip_source(key, path)?;
    if bare == NAMESPACE_KEY {
        return Ok(MappedKey::Namespace(NAMESPACE_NAME_LABEL.to_owned()));
    }
    if let Some(label) = bare.strip_prefix(NAMESPACE_LABELS_PREFIX) {
        if label.is_empty() {
            return Err(path.error("namespace label key is empty"));
        }
        return Ok(MappedKey::Namespace(label.to_owned()));
    }
    if bare.starts_with(CILIUM_POLICY_PREFIX) {
        return Err(path.error(format!(
            "unsupported: label {bare:?} (Cilium-derived labels other than the namespace's are \
             not supported)"
        )));
    }
    if bare.is_empty() {
        return Err(path.error("label key must not be empty"));
    }
    Ok(MappedKey::Pod(bare.to_owned()))
}

/// Drops a `k8s:` or `any:` source prefix. Reserved labels (`reserved:host`, ...) and other
/// sources have no equivalent here: entities cover the reserved identities.
fn strip_source<'k>(key: &'k str, path: &FieldPath) -> Result<&'k str, FieldError> {
    match key.split_once(':') {
        None => Ok(key),
        Some(("k8s" | "any", bare)) => Ok(bare),
        Some(("reserved", _)) => Err(path.error(format!(
            "unsupported: reserved label {key:?} in a selector (use fromEntities/toEntities)"
        ))),
        Some((source, _)) => Err(path.error(format!(
            "unsupported: label source {source:?} (only k8s and any are supported)"
        ))),
    }
}

/// `fromNodes`/`toNodes`: node labels, with source prefixes dropped.
fn node_selector(
    selector: &metav1::LabelSelector,
    path: &FieldPath,
) -> Result<LabelSelector, FieldError> {
    let mut out = LabelSelector::everything();
    for (key, value) in selector.match_labels.iter().flatten() {
        let bare = strip_source(key, &path.field("matchLabels").key(key))?;
        add_label(&mut out, bare.to_owned(), value);
    }
    for (i, expr) in selector.match_expressions.iter().flatten().enumerate() {
        let expr_path = path.field("matchExpressions").index(i);
        let bare = strip_source(&expr.key, &expr_path.field("key"))?;
        out.match_expressions.push(requirement(
            bare.to_owned(),
            &expr.operator,
            expr.values.as_deref(),
            &expr_path,
        )?);
    }
    Ok(out)
}

/// Cilium CIDR peers select only addresses outside the cluster.
fn outside_cluster(net: IpNet) -> Peer {
    Peer::Cidr(CidrSelector {
        net,
        except: Vec::new(),
        scope: AddressScope::OutsideCluster,
    })
}

fn cidr_set(set: &CidrRule, path: &FieldPath, diags: &mut Diagnostics) -> Result<Peer, FieldError> {
    if set.cidr_group_ref.is_some() {
        return Err(path
            .field("cidrGroupRef")
            .unsupported("CIDR groups are not supported"));
    }
    if set.cidr_group_selector.is_some() {
        return Err(path
            .field("cidrGroupSelector")
            .unsupported("CIDR groups are not supported"));
    }
    let Some(cidr) = &set.cidr else {
        return Err(path.field("cidr").error("required"));
    };
    cidr_selector(
        (cidr, &path.field("cidr")),
        (
            set.except.as_deref().unwrap_or_default(),
            &path.field("except"),
        ),
        Notation::CidrOrAddress,
        AddressScope::OutsideCluster,
        diags,
    )
    .map(Peer::Cidr)
}

fn entity(name: &str, path: &FieldPath) -> Result<Peer, FieldError> {
    // The default prefixes are 0.0.0.0/0 and ::/0.
    let world_v4 = || outside_cluster(IpNet::V4(Default::default()));
    let world_v6 = || outside_cluster(IpNet::V6(Default::default()));
    Ok(match name {
        "all" => Peer::Entity(Entity::All),
        "world" => Peer::Entity(Entity::World),
        "world-ipv4" => world_v4(),
        "world-ipv6" => world_v6(),
        "cluster" => Peer::Entity(Entity::Cluster),
        "host" => Peer::Entity(Entity::Host),
        "remote-node" => Peer::Entity(Entity::RemoteNode),
        other => {
            return Err(path.error(format!(
                "unsupported entity {other:?} (supported: all, world, world-ipv4, world-ipv6, \
                 cluster, host, remote-node)"
            )))
        }
    })
}

fn authentication(auth: &Authentication, path: &FieldPath) -> Result<AuthMode, FieldError> {
    match auth.mode.as_str() {
        "required" => Ok(AuthMode::Required),
        "disabled" => Ok(AuthMode::Disabled),
        "test-always-fail" => Err(path
            .field("mode")
            .unsupported("the test-always-fail mode is not supported")),
        other => Err(path.field("mode").error(format!(
            "unknown authentication mode {other:?} (expected required or disabled)"
        ))),
    }
}

/// `toPorts`: absent or empty means all traffic; an element without `ports` too.
fn to_ports(
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
    use super::*;
    use crate::translate::testing::*;
    use netpol_engine::{Identity, Protocol::*};

    fn cnp(namespace: &str, body: &str) -> String {
        format!(
            "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {{name: c, namespace: {namespace}}}\n{body}"
        )
    }

    fn ccnp(body: &str) -> String {
        format!(
            "apiVersion: cilium.io/v2\nkind: CiliumClusterwideNetworkPolicy\nmetadata: {{name: cc}}\n{body}"
        )
    }

    fn xa() -> Identity {
        pod("x", "a", "10.1.0.11")
    }
    fn xb() -> Identity {
        pod("x", "b", "10.1.0.12")
    }
    fn ya() -> Identity {
        pod("y", "a", "10.1.1.11")
    }
    fn za() -> Identity {
        pod("z", "a", "10.1.2.11")
    }

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
    fn namespaced_endpoint_selectors_are_confined_to_the_policy_namespace() {
        let e = entries(&cnp(
            "x",
            r#"
spec:
  endpointSelector: {matchLabels: {pod: a}}
  ingress:
  - fromEndpoints: [{matchLabels: {"k8s:pod": b}}]
  - fromEndpoints: [{matchLabels: {"io.cilium.k8s.namespace.labels.ns": z}}]
  - fromEndpoints:
    - matchExpressions: [{key: "k8s:io.kubernetes.pod.namespace", operator: In, values: [y]}]
"#,
        ));
        let a = xa();
        assert!(ingress_allowed(&e, &a, &xb(), Tcp, 80));
        assert!(!ingress_allowed(
            &e,
            &a,
            &pod("z", "b", "10.1.2.12"),
            Tcp,
            80
        ));
        // Namespace labels alone do not lift the confinement: x has ns=x, so nothing matches.
        assert!(!ingress_allowed(&e, &a, &za(), Tcp, 80));
        // Naming the namespace does.
        assert!(ingress_allowed(&e, &a, &ya(), Tcp, 80));
        // The subject is x/a only.
        assert!(ingress_allowed(&e, &xb(), &za(), Tcp, 80));
    }

    #[test]
    fn empty_endpoint_selector_is_the_namespace_or_every_pod() {
        let namespaced = entries(&cnp(
            "x",
            "spec:\n  endpointSelector: {}\n  ingress: [{fromEndpoints: [{}]}]",
        ));
        assert!(ingress_allowed(&namespaced, &xa(), &xb(), Tcp, 80));
        assert!(!ingress_allowed(&namespaced, &xa(), &ya(), Tcp, 80));
        assert!(!ingress_allowed(
            &namespaced,
            &xa(),
            &world("0.0.0.0/0"),
            Tcp,
            80
        ));

        let clusterwide = entries(&ccnp(
            "spec:\n  endpointSelector: {}\n  ingress: [{fromEndpoints: [{}]}]",
        ));
        assert_eq!(clusterwide[0].subject, PodSelector::all());
        assert!(ingress_allowed(&clusterwide, &xa(), &ya(), Tcp, 80));
        assert!(ingress_allowed(&clusterwide, &za(), &xb(), Tcp, 80));
        assert!(!ingress_allowed(
            &clusterwide,
            &xa(),
            &world("0.0.0.0/0"),
            Tcp,
            80
        ));
        assert_eq!(clusterwide[0].provenance.namespace, None);
        assert_eq!(
            clusterwide[0].provenance.to_string(),
            "CiliumClusterwideNetworkPolicy cc rule ingress[0]"
        );
    }

    #[test]
    fn clusterwide_namespace_labels_select_namespaces() {
        let e = entries(&ccnp(
            r#"
spec:
  endpointSelector: {matchLabels: {"k8s:io.cilium.k8s.namespace.labels.ns": x}}
  egress:
  - toEndpoints: [{matchLabels: {"any:io.cilium.k8s.namespace.labels.ns": z}}]
"#,
        ));
        assert!(egress_allowed(&e, &xa(), &za(), Tcp, 80));
        assert!(!egress_allowed(&e, &xa(), &ya(), Tcp, 80));
        // y is not a subject.
        assert!(egress_allowed(&e, &ya(), &xa(), Tcp, 80));
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
    fn cidr_peers_select_only_outside_addresses() {
        let e = entries(&cnp(
            "x",
            r#"
spec:
  endpointSelector: {}
  egress:
  - toCIDR: [10.0.0.0/8, 192.0.2.7]
  - toCIDRSet: [{cidr: 198.51.100.0/24, except: [198.51.100.128/25]}]
"#,
        ));
        let a = xa();
        assert!(!egress_allowed(&e, &a, &ya(), Tcp, 80));
        assert!(!egress_allowed(
            &e,
            &a,
            &node("node-1", "a", "10.0.0.1"),
            Tcp,
            80
        ));
        assert!(egress_allowed(&e, &a, &world("10.200.0.0/16"), Tcp, 80));
        assert!(egress_allowed(&e, &a, &world("192.0.2.7/32"), Tcp, 80));
        assert!(egress_allowed(&e, &a, &world("198.51.100.0/25"), Tcp, 80));
        assert!(!egress_allowed(
            &e,
            &a,
            &world("198.51.100.128/25"),
            Tcp,
            80
        ));
    }

    #[test]
    fn entities() {
        let e = |entity: &str| {
            entries(&cnp(
                "x",
                &format!("spec:\n  endpointSelector: {{}}\n  egress: [{{toEntities: [{entity}]}}]"),
            ))
        };
        let a = xa();
        let own_node = node("node-1", "a", "10.0.0.1");
        let other_node = node("node-2", "b", "10.0.0.2");
        let outside = world("0.0.0.0/0");
        let outside6 = world("::/0");
        let reach = |entries: &[PolicyEntry], remote: &Identity| {
            egress_allowed(entries, &a, remote, Tcp, 80)
        };
        let all = e("all");
        assert!([&ya(), &own_node, &outside].iter().all(|r| reach(&all, r)));
        let w = e("world");
        assert!(reach(&w, &outside) && !reach(&w, &ya()) && !reach(&w, &own_node));
        let c = e("cluster");
        assert!(reach(&c, &ya()) && reach(&c, &other_node) && !reach(&c, &outside));
        let h = e("host");
        assert!(reach(&h, &own_node) && !reach(&h, &other_node) && !reach(&h, &ya()));
        let r = e("remote-node");
        assert!(!reach(&r, &own_node) && reach(&r, &other_node));
        let w4 = e("world-ipv4");
        assert!(reach(&w4, &outside) && !reach(&w4, &outside6) && !reach(&w4, &ya()));
    }

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
    fn authentication_modes() {
        let yaml = |mode: &str| {
            cnp(
                "x",
                &format!("spec:\n  endpointSelector: {{}}\n  ingress: [{{fromEntities: [cluster], authentication: {{mode: {mode}}}}}]"),
            )
        };
        assert_eq!(entries(&yaml("required"))[0].auth, Some(AuthMode::Required));
        assert_eq!(entries(&yaml("disabled"))[0].auth, Some(AuthMode::Disabled));
        let err = error(&yaml("test-always-fail"));
        assert_eq!(err.field, "spec.ingress[0].authentication.mode");
        assert!(err.message.starts_with("unsupported: mode"), "{err}");
        let err = error(&yaml("sometimes"));
        assert!(err.message.contains("unknown authentication mode"), "{err}");
        let err = error(&cnp(
            "x",
            "spec:\n  endpointSelector: {}\n  egressDeny: [{toEntities: [world], authentication: {mode: required}}]",
        ));
        assert_eq!(err.field, "spec.egressDeny[0].authentication");
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
    fn subject_naming_another_namespace_is_pinned_with_a_warning() {
        let yaml = cnp(
            "x",
            "spec:\n  endpointSelector: {matchLabels: {\"k8s:io.kubernetes.pod.namespace\": y}}\n  ingress: [{}]",
        );
        let w = warnings(&yaml);
        assert_eq!(w[0].field, "spec.endpointSelector");
        let e = entries(&yaml);
        assert!(!ingress_allowed(&e, &xa(), &za(), Tcp, 80));
        assert!(ingress_allowed(&e, &ya(), &za(), Tcp, 80));
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
