//! The lint rules. Each works on the cluster in engine terms: the policy entries, the identity
//! store, and MapStates computed by the same engine the agent runs.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use netpol_engine::{
    Direction, Engine, EngineConfig, Identity, IdentityId, IdentityKind, LabelSelector, MapState,
    Peer, PodInfo, PodSelector, PolicyEntry, PortMatch, PortRule, Protocol, Tier, Verdict,
};

use super::{Finding, Severity};
use crate::decide::matrix::{pod_classes, pod_parties, pod_per_class_and_node};
use crate::scenario::Cluster;

/// A label no namespace carries: the lint's anchor policy selects nothing with it.
const ANCHOR_LABEL: &str = "lint.netpol.io/anchor";

const PROTOCOLS: [Protocol; 5] = [
    Protocol::Tcp,
    Protocol::Udp,
    Protocol::Sctp,
    Protocol::Icmp,
    Protocol::IcmpV6,
];

/// (kind, namespace, name) of a policy.
type PolicyKey = (String, Option<String>, String);

fn policy_key(entry: &PolicyEntry) -> PolicyKey {
    let p = &entry.provenance;
    (p.kind.clone(), p.namespace.clone(), p.name.clone())
}

fn object_name(key: &PolicyKey) -> String {
    match &key.1 {
        Some(ns) => format!("{} {ns}/{}", key.0, key.2),
        None => format!("{} {}", key.0, key.2),
    }
}

/// The field of a policy's subject.
fn subject_field(kind: &str) -> &'static str {
    match kind {
        "NetworkPolicy" => "spec.podSelector",
        "CiliumNetworkPolicy" | "CiliumClusterwideNetworkPolicy" => "spec.endpointSelector",
        _ => "spec.subject",
    }
}

/// The field of an entry's rule: `spec.ingress[2]`, from the provenance where it names an index,
/// else from the rule's index within the policy.
fn rule_field(entry: &PolicyEntry) -> String {
    let rule = &entry.provenance.rule;
    let indexed = rule
        .split_once('[')
        .is_some_and(|(head, tail)| !head.is_empty() && tail.ends_with(']'));
    if indexed && !rule.contains(' ') {
        format!("spec.{rule}")
    } else {
        format!("spec.{}[{}]", entry.direction, entry.priority.rule)
    }
}

fn rule_label(entry: &PolicyEntry) -> String {
    format!("{} rule {}", object_of(entry), entry.provenance.rule)
}

fn object_of(entry: &PolicyEntry) -> String {
    object_name(&policy_key(entry))
}

/// Runs every rule over `cluster`. Findings are sorted by object, field and rule.
pub fn lint(cluster: &Cluster) -> Vec<Finding> {
    let entries = cluster.policy_entries();
    let pods: Vec<&PodInfo> = cluster
        .pods()
        .filter_map(|(_, ids)| ids.first().and_then(|i| i.as_pod()))
        .collect();
    let identities: Vec<&Identity> = cluster.store().iter().map(|(_, i)| i).collect();

    let mut policies: BTreeMap<PolicyKey, Vec<usize>> = BTreeMap::new();
    for (i, entry) in entries.iter().enumerate() {
        policies.entry(policy_key(entry)).or_default().push(i);
    }

    let mut findings = Vec::new();
    let mut inert: BTreeSet<PolicyKey> = BTreeSet::new();
    for (key, indexes) in &policies {
        let selects = indexes
            .iter()
            .any(|&i| pods.iter().any(|pod| entries[i].subject.matches(pod)));
        if !selects {
            inert.insert(key.clone());
            findings.push(Finding {
                rule: "selects-nothing",
                severity: Severity::Warning,
                object: object_name(key),
                field: subject_field(&key.0).to_owned(),
                message: format!(
                    "selects no pod ({}), so it has no effect",
                    entries[indexes[0]].subject
                ),
                hint: "check the selector's labels and namespace against the pods it should \
                       select"
                    .into(),
            });
        }
    }

    for entry in entries {
        if inert.contains(&policy_key(entry)) {
            continue;
        }
        peer_findings(entry, &identities, &mut findings);
        named_port_findings(entry, &pods, &identities, &mut findings);
    }
    unordered_overlaps(entries, &pods, &identities, &mut findings);
    removal_findings(cluster, &policies, &inert, &identities, &mut findings);

    findings.sort_by(|a, b| {
        (&a.object, &a.field, a.rule, &a.message).cmp(&(&b.object, &b.field, b.rule, &b.message))
    });
    findings.dedup();
    findings
}

fn peer_field(entry: &PolicyEntry) -> String {
    rule_field(entry)
}

/// `peer-selects-nothing` and `ipblock-covers-pods`.
fn peer_findings(entry: &PolicyEntry, identities: &[&Identity], findings: &mut Vec<Finding>) {
    for peer in &entry.peers {
        match peer {
            Peer::Pods(_) | Peer::Nodes(_) => {
                if !identities.iter().any(|i| peer.selects_ignoring_node(i)) {
                    let what = match peer {
                        Peer::Pods(sel) => format!("{sel}"),
                        Peer::Nodes(sel) => format!("nodes {sel}"),
                        _ => unreachable!(),
                    };
                    findings.push(Finding {
                        rule: "peer-selects-nothing",
                        severity: Severity::Warning,
                        object: object_of(entry),
                        field: peer_field(entry),
                        message: format!(
                            "the {} peer {what} selects nothing in this cluster",
                            entry.direction
                        ),
                        hint: "check the peer's labels and namespace selector for a typo".into(),
                    });
                }
            }
            Peer::Cidr(cidr) => {
                let covered: Vec<&PodInfo> = identities
                    .iter()
                    .filter(|i| peer.selects_ignoring_node(i))
                    .filter_map(|i| i.as_pod())
                    .collect();
                if let Some(first) = covered.first() {
                    let mut names: Vec<String> = covered
                        .iter()
                        .map(|p| format!("{}/{}", p.namespace, p.name))
                        .collect();
                    names.sort();
                    names.dedup();
                    let count = names.len();
                    let _ = first;
                    findings.push(Finding {
                        rule: "ipblock-covers-pods",
                        severity: Severity::Note,
                        object: object_of(entry),
                        field: peer_field(entry),
                        message: format!(
                            "{} covers the addresses of {count} pod{} ({}{}), so it matches \
                             them too",
                            cidr.net,
                            if count == 1 { "" } else { "s" },
                            names.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
                            if count > 3 { ", ..." } else { "" }
                        ),
                        hint: "select pods with a pod or namespace selector, and add the pod \
                               CIDR to `except` if the block is meant for outside addresses"
                            .into(),
                    });
                }
            }
            Peer::Entity(_) => {}
        }
    }
}

/// The numbers pods declare under `name` (for `protocol` if given).
fn declared(
    pods: impl Iterator<Item = impl AsRef<PodInfo>>,
    protocol: Option<Protocol>,
    name: &str,
) -> bool {
    let mut found = false;
    for pod in pods {
        found |= pod
            .as_ref()
            .ports
            .iter()
            .any(|p| p.name == name && protocol.is_none_or(|w| w == p.protocol));
    }
    found
}

struct Ref<'a>(&'a PodInfo);
impl AsRef<PodInfo> for Ref<'_> {
    fn as_ref(&self) -> &PodInfo {
        self.0
    }
}

/// `named-port-unresolved`: ingress names resolve against the pods the policy selects, egress
/// names against the pods the rule's peers select.
fn named_port_findings(
    entry: &PolicyEntry,
    pods: &[&PodInfo],
    identities: &[&Identity],
    findings: &mut Vec<Finding>,
) {
    for (index, rule) in entry.ports.iter().enumerate() {
        let PortMatch::Named(name) = &rule.port else {
            continue;
        };
        let (resolved, whose) = match entry.direction {
            Direction::Ingress => (
                declared(
                    pods.iter()
                        .filter(|p| entry.subject.matches(p))
                        .map(|p| Ref(p)),
                    rule.protocol,
                    name,
                ),
                "pod the policy selects",
            ),
            Direction::Egress => (
                declared(
                    identities
                        .iter()
                        .filter(|i| entry.peers.iter().any(|p| p.selects_ignoring_node(i)))
                        .filter_map(|i| i.as_pod())
                        .map(Ref),
                    rule.protocol,
                    name,
                ),
                "pod the rule's peers select",
            ),
        };
        if !resolved {
            findings.push(Finding {
                rule: "named-port-unresolved",
                severity: Severity::Warning,
                object: object_of(entry),
                field: format!("{}.ports[{index}]", rule_field(entry)),
                message: format!(
                    "no {whose} declares a container port named `{name}`{}, so this port \
                     matches nothing",
                    rule.protocol
                        .map(|p| format!(" for {}", format!("{p:?}").to_uppercase()))
                        .unwrap_or_default()
                ),
                hint: "name the port as the pods' containers do (ports[].name), or give its \
                       number"
                    .into(),
            });
        }
    }
}

/// Every (protocol, number) a port clause list can match, with named ports resolved against
/// what any pod declares; `None` stands for every port.
fn port_overlap(a: &[PortRule], b: &[PortRule], identities: &[&Identity]) -> bool {
    if a.is_empty() || b.is_empty() {
        return true;
    }
    let numbers = |rule: &PortRule, protocol: Protocol| -> Vec<(u16, u16)> {
        match &rule.port {
            PortMatch::Any => vec![(0, u16::MAX)],
            PortMatch::Range(lo, hi) => vec![(*lo, *hi)],
            PortMatch::Named(name) => identities
                .iter()
                .filter_map(|i| i.as_pod())
                .flat_map(|p| p.ports.iter())
                .filter(|p| &p.name == name && p.protocol == protocol)
                .map(|p| (p.port, p.port))
                .collect(),
        }
    };
    a.iter().any(|x| {
        b.iter().any(|y| {
            PROTOCOLS.iter().any(|&protocol| {
                let has = |r: &PortRule| r.protocol.is_none_or(|p| p == protocol);
                has(x)
                    && has(y)
                    && numbers(x, protocol).iter().any(|(lo, hi)| {
                        numbers(y, protocol)
                            .iter()
                            .any(|(lo2, hi2)| lo <= hi2 && lo2 <= hi)
                    })
            })
        })
    })
}

/// `unordered-overlap`: entries of two different policies of one ordered tier at equal
/// priority, with different actions, that can match one flow: a pod both subjects select, a
/// remote identity both peers select and a port both match.
fn unordered_overlaps(
    entries: &[PolicyEntry],
    pods: &[&PodInfo],
    identities: &[&Identity],
    findings: &mut Vec<Finding>,
) {
    let ordered: Vec<&PolicyEntry> = entries
        .iter()
        .filter(|e| e.tier != Tier::Normal && !e.peers.is_empty())
        .collect();
    let mut reported: BTreeSet<(PolicyKey, PolicyKey)> = BTreeSet::new();
    for (i, a) in ordered.iter().enumerate() {
        for b in &ordered[i + 1..] {
            let (ka, kb) = (policy_key(a), policy_key(b));
            if ka == kb
                || a.tier != b.tier
                || a.priority.value != b.priority.value
                || a.direction != b.direction
                || a.verdict == b.verdict
                || reported.contains(&(ka.clone(), kb.clone()))
            {
                continue;
            }
            let subject = pods
                .iter()
                .any(|p| a.subject.matches(p) && b.subject.matches(p));
            let peer = identities.iter().any(|id| {
                a.peers.iter().any(|p| p.selects_ignoring_node(id))
                    && b.peers.iter().any(|p| p.selects_ignoring_node(id))
            }) || (a.peers.iter().any(Peer::is_wildcard)
                && b.peers.iter().any(Peer::is_wildcard));
            if !(subject && peer && port_overlap(&a.ports, &b.ports, identities)) {
                continue;
            }
            reported.insert((ka, kb));
            let (first, second) = if a.priority.tiebreak <= b.priority.tiebreak {
                (a, b)
            } else {
                (b, a)
            };
            findings.push(Finding {
                rule: "unordered-overlap",
                severity: Severity::Warning,
                object: object_of(second),
                field: rule_field(second),
                message: format!(
                    "{} ({:?}) and {} ({:?}) share priority {} and match the same flows; \
                     upstream leaves their order undefined (netpol orders them by name, so \
                     {} wins)",
                    rule_label(second),
                    second.verdict,
                    rule_label(first),
                    first.verdict,
                    a.priority.value,
                    rule_label(first)
                ),
                hint: "give the two policies different priorities".into(),
            });
        }
    }
}

/// Whether `a` and `b` decide every key alike: every (direction, remote identity, protocol,
/// port) looks up the same verdict and authentication. Lookups are constant between the
/// boundaries of the keys that can match, so the boundaries are the only points to compare.
fn same_decisions(a: &MapState, b: &MapState) -> bool {
    let classes: BTreeSet<(Direction, Option<IdentityId>)> =
        a.class_keys().chain(b.class_keys()).collect();
    // An identity no class names: decided by the wildcard class alone.
    let phantom = IdentityId(u32::MAX);
    for direction in Direction::BOTH {
        let remotes: BTreeSet<IdentityId> = classes
            .iter()
            .filter(|(d, _)| *d == direction)
            .filter_map(|(_, id)| *id)
            .chain([phantom])
            .collect();
        for remote in remotes {
            let mut points: BTreeSet<(Protocol, u16)> =
                PROTOCOLS.iter().flat_map(|&p| [(p, 0), (p, 1)]).collect();
            for map in [a, b] {
                for class in [(direction, Some(remote)), (direction, None)] {
                    let Some(entries) = map.class(class) else {
                        continue;
                    };
                    for (key, _) in entries.iter() {
                        let Some(protocol) = key.protocol else {
                            continue;
                        };
                        let (lo, hi) = key.range();
                        points.insert((protocol, lo));
                        if hi < u16::MAX {
                            points.insert((protocol, hi + 1));
                        }
                    }
                }
            }
            for (protocol, port) in points {
                let x = a.lookup(direction, remote, protocol, port);
                let y = b.lookup(direction, remote, protocol, port);
                if (x.verdict, x.auth) != (y.verdict, y.auth) {
                    return false;
                }
            }
        }
    }
    true
}

/// The engine with every policy under its own key, and an anchor policy holding a copy of
/// every entry with a subject nothing matches: it keeps the world identities and precedence
/// levels the same whatever is taken out, so MapStates before and after compare key by key.
struct Lab {
    engine: Engine,
    before: HashMap<String, MapState>,
}

impl Lab {
    fn new(cluster: &Cluster, policies: &BTreeMap<PolicyKey, Vec<usize>>) -> Lab {
        let entries = cluster.policy_entries();
        let mut engine = Engine::new(EngineConfig {
            local_node: None,
            allow_node_probes: true,
        });
        let nowhere = PodSelector {
            namespaces: LabelSelector::from_labels([(ANCHOR_LABEL, "none")]),
            pods: LabelSelector::everything(),
        };
        engine.set_policy(
            "lint/anchor",
            entries
                .iter()
                .map(|e| PolicyEntry {
                    subject: nowhere.clone(),
                    ..e.clone()
                })
                .collect(),
        );
        for (i, indexes) in policies.values().enumerate() {
            engine.set_policy(
                format!("lint/{i}"),
                indexes.iter().map(|&j| entries[j].clone()).collect(),
            );
        }
        // One endpoint per class of alike pods and node: the others' MapStates are the same.
        let parties = pod_parties(cluster);
        let classes = pod_classes(cluster, &parties);
        engine.only_endpoints(pod_per_class_and_node(cluster, &parties, &classes));
        for (pod, identities) in cluster.pods() {
            engine.set_pod(pod.to_string(), identities.into_iter().cloned().collect());
        }
        for (node, identities) in cluster.nodes() {
            engine.set_node(node, identities.into_iter().cloned().collect());
        }
        engine.commit();
        let before = engine
            .endpoints()
            .map(|(k, m)| (k.to_owned(), m.clone()))
            .collect();
        Lab { engine, before }
    }

    /// Sets policy `key` to `entries`, and answers whether every endpoint still decides as
    /// before; `inspect` sees the engine in that state. The policy is put back afterwards.
    fn unchanged_with<T>(
        &mut self,
        key: &str,
        entries: Vec<PolicyEntry>,
        original: &[PolicyEntry],
        inspect: impl FnOnce(&Engine) -> T,
    ) -> (bool, T) {
        self.engine.set_policy(key, entries);
        let changes = self.engine.commit();
        let unchanged = changes.iter().all(|c| {
            match (
                self.before.get(&c.endpoint),
                self.engine.endpoint(&c.endpoint),
            ) {
                (Some(a), Some(b)) => same_decisions(a, b),
                (None, None) => true,
                _ => false,
            }
        });
        let seen = inspect(&self.engine);
        self.engine.set_policy(key, original.to_vec());
        self.engine.commit();
        (unchanged, seen)
    }
}

/// What decides, with `entry` taken out, a flow `entry` matches: the rule that shadows it.
fn decider_of(engine: &Engine, entry: &PolicyEntry) -> Option<String> {
    let (protocol, port) = entry
        .ports
        .iter()
        .find_map(|p| match p.port {
            PortMatch::Any => Some((p.protocol.unwrap_or(Protocol::Tcp), 80)),
            PortMatch::Range(lo, _) => Some((p.protocol.unwrap_or(Protocol::Tcp), lo)),
            PortMatch::Named(_) => None,
        })
        .unwrap_or((Protocol::Tcp, 80));
    let store = engine.identities();
    for (key, map) in engine.endpoints() {
        let Some((pod, _)) = engine.endpoint_pod(key) else {
            continue;
        };
        if !entry.subject.matches(pod) {
            continue;
        }
        for (id, identity) in store.iter() {
            if !entry
                .peers
                .iter()
                .any(|p| p.selects(identity, pod.node.as_deref()))
            {
                continue;
            }
            if matches!(identity.kind, IdentityKind::World)
                && entry.peers.iter().all(|p| matches!(p, Peer::Pods(_)))
            {
                continue;
            }
            let value = map.lookup(entry.direction, id, protocol, port);
            return Some(value.reason.to_string());
        }
    }
    None
}

/// `redundant-policy` and `shadowed-rule`, by taking each policy, then each rule, out of the
/// engine and comparing every endpoint's decisions.
fn removal_findings(
    cluster: &Cluster,
    policies: &BTreeMap<PolicyKey, Vec<usize>>,
    inert: &BTreeSet<PolicyKey>,
    identities: &[&Identity],
    findings: &mut Vec<Finding>,
) {
    let entries = cluster.policy_entries();
    // Entries with a port clause that matches nothing are reported as such, not as shadowed.
    let unresolved: BTreeSet<usize> = findings
        .iter()
        .filter(|f| f.rule == "named-port-unresolved")
        .flat_map(|f| {
            entries.iter().enumerate().filter(move |(_, e)| {
                object_of(e) == f.object && f.field.starts_with(&format!("{}.", rule_field(e)))
            })
        })
        .map(|(j, _)| j)
        .collect();
    let mut lab = Lab::new(cluster, policies);
    for (i, (key, indexes)) in policies.iter().enumerate() {
        if inert.contains(key) {
            continue;
        }
        let engine_key = format!("lint/{i}");
        let original: Vec<PolicyEntry> = indexes.iter().map(|&j| entries[j].clone()).collect();
        let (redundant, ()) = lab.unchanged_with(&engine_key, Vec::new(), &original, |_| ());
        if redundant {
            findings.push(Finding {
                rule: "redundant-policy",
                severity: Severity::Warning,
                object: object_name(key),
                field: "spec".into(),
                message: "removing this policy changes no decision: other policies already \
                          decide every flow it selects the same way"
                    .into(),
                hint: "delete it, or check whether another policy is broader than intended".into(),
            });
        }
        // Each rule: the same policy with the rule matching nothing (its isolation kept).
        for (r, &j) in indexes.iter().enumerate() {
            let entry = &entries[j];
            if entry.peers.is_empty()
                || unresolved.contains(&j)
                || !entry
                    .peers
                    .iter()
                    .any(|p| identities.iter().any(|i| p.selects_ignoring_node(i)))
            {
                continue;
            }
            let mut without = original.clone();
            without[r].peers.clear();
            let (shadowed, by) =
                lab.unchanged_with(&engine_key, without, &original, |e| decider_of(e, entry));
            if shadowed {
                let by = by.unwrap_or_else(|| "the rules around it".into());
                findings.push(Finding {
                    rule: "shadowed-rule",
                    severity: Severity::Warning,
                    object: object_of(entry),
                    field: rule_field(entry),
                    message: format!(
                        "rule {} ({:?}) never decides a flow: {by} decides every flow it matches",
                        entry.provenance.rule, entry.verdict
                    ),
                    hint: if entry.verdict == Verdict::Pass {
                        "remove the rule, or move it ahead of the rule that shadows it".into()
                    } else {
                        "remove the rule, or narrow or reorder the rule that shadows it".into()
                    },
                });
            }
        }
    }
}
