//! The lint rules. Each works on the cluster in engine terms: the policy entries, the identity
//! store and its selectors, and MapStates computed by the same engine the agent runs (the
//! [`Lab`]). Pods are looked at one per [`super::representatives::Probe`] and identities through the
//! selectors' selections, so no rule scans every pod per policy.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use netpol_engine::{
    Direction, Identity, Peer, PodInfo, PolicyEntry, PortMatch, PortRule, Protocol, Tier, Verdict,
};

use super::lab::{Lab, PROTOCOLS};
use super::naming::{
    object_name, object_of, policy_key, rule_field, rule_label, subject_field, PolicyKey,
};
use super::{Finding, Severity};
use crate::loader::ClusterModel;

/// Runs every rule over `cluster`. Findings are sorted by object, field and rule.
pub fn lint(cluster: &ClusterModel) -> Vec<Finding> {
    let entries = cluster.policy_entries();
    let identities: Vec<&Identity> = cluster.store().iter().map(|(_, i)| i).collect();

    let mut policies: BTreeMap<PolicyKey, Vec<usize>> = BTreeMap::new();
    for (i, entry) in entries.iter().enumerate() {
        policies.entry(policy_key(entry)).or_default().push(i);
    }
    let lab = Lab::new(
        cluster,
        &policies.values().map(Vec::as_slice).collect::<Vec<_>>(),
    );

    let mut findings = Vec::new();
    let mut inert: BTreeSet<PolicyKey> = BTreeSet::new();
    for (key, indexes) in &policies {
        let selects = indexes.iter().any(|&i| lab.selects_a_pod(i));
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

    let mut covered = CoveredPods::new(&identities);
    for (j, entry) in entries.iter().enumerate() {
        if inert.contains(&policy_key(entry)) {
            continue;
        }
        peer_findings(entry, &lab, &mut covered, &mut findings);
        super::exposure::exposure_findings(entry, &mut findings);
        named_port_findings(j, entry, &lab, &mut findings);
    }
    unordered_overlaps(entries, &lab, &identities, &mut findings);
    removal_findings(cluster, &policies, &inert, &lab, &mut findings);

    findings.sort_by(|a, b| {
        (&a.object, &a.field, a.rule, &a.message).cmp(&(&b.object, &b.field, b.rule, &b.message))
    });
    findings.dedup();
    findings
}

/// The pods (`namespace/name`, sorted, distinct) each CIDR peer covers, found once per
/// distinct peer: synthetic and real clusters repeat one egress block in many namespaces.
struct CoveredPods<'a> {
    identities: &'a [&'a Identity],
    by_peer: HashMap<&'a Peer, Vec<String>>,
}

impl<'a> CoveredPods<'a> {
    fn new(identities: &'a [&'a Identity]) -> Self {
        CoveredPods {
            identities,
            by_peer: HashMap::new(),
        }
    }

    fn of(&mut self, peer: &'a Peer) -> &[String] {
        let identities = self.identities;
        self.by_peer.entry(peer).or_insert_with(|| {
            let mut names: Vec<String> = identities
                .iter()
                .filter(|i| peer.selects_ignoring_node(i))
                .filter_map(|i| i.as_pod())
                .map(|p| format!("{}/{}", p.namespace, p.name))
                .collect();
            names.sort();
            names.dedup();
            names
        })
    }
}

fn peer_field(entry: &PolicyEntry) -> String {
    rule_field(entry)
}

/// `peer-selects-nothing` and `ipblock-covers-pods`.
fn peer_findings<'a>(
    entry: &'a PolicyEntry,
    lab: &Lab,
    covered: &mut CoveredPods<'a>,
    findings: &mut Vec<Finding>,
) {
    for peer in &entry.peers {
        match peer {
            Peer::Pods(_) | Peer::Nodes(_) => {
                if lab.selected_by(peer).next().is_none() {
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
                let names = covered.of(peer);
                if !names.is_empty() {
                    let count = names.len();
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

/// Whether one of `pods` declares a port named `name` (for `protocol` if given).
fn declared<'p>(
    mut pods: impl Iterator<Item = &'p PodInfo>,
    protocol: Option<Protocol>,
    name: &str,
) -> bool {
    pods.any(|pod| {
        pod.ports
            .iter()
            .any(|p| p.name == name && protocol.is_none_or(|w| w == p.protocol))
    })
}

/// `named-port-unresolved`: ingress names resolve against the pods the policy selects (entry
/// `j`'s probes: pods alike in named ports among them), egress names against the pods the rule's
/// peers select.
fn named_port_findings(j: usize, entry: &PolicyEntry, lab: &Lab, findings: &mut Vec<Finding>) {
    let store = lab.engine.identities();
    for (index, rule) in entry.ports.iter().enumerate() {
        let PortMatch::Named(name) = &rule.port else {
            continue;
        };
        let (resolved, whose) = match entry.direction {
            Direction::Ingress => (
                declared(lab.selected_pods(j), rule.protocol, name),
                "pod the policy selects",
            ),
            Direction::Egress => (
                declared(
                    entry
                        .peers
                        .iter()
                        .flat_map(|p| lab.selected_by(p))
                        .filter_map(|id| store.get(id)?.as_pod()),
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
    lab: &Lab,
    identities: &[&Identity],
    findings: &mut Vec<Finding>,
) {
    let ordered: Vec<(usize, &PolicyEntry)> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.tier != Tier::Normal && !e.peers.is_empty())
        .collect();
    let mut reported: BTreeSet<(PolicyKey, PolicyKey)> = BTreeSet::new();
    for (i, &(ja, a)) in ordered.iter().enumerate() {
        for &(jb, b) in &ordered[i + 1..] {
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
            // A pod both subjects select: a probe both entries select.
            let (pa, pb) = (
                &lab.probes.by_entry[lab.position(ja)],
                &lab.probes.by_entry[lab.position(jb)],
            );
            let subject = pa.iter().any(|p| pb.binary_search(p).is_ok());
            let by_a: HashSet<_> = a.peers.iter().flat_map(|p| lab.selected_by(p)).collect();
            let peer = b
                .peers
                .iter()
                .flat_map(|p| lab.selected_by(p))
                .any(|id| by_a.contains(&id))
                || (a.peers.iter().any(Peer::is_wildcard) && b.peers.iter().any(Peer::is_wildcard));
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

/// `redundant-policy` and `shadowed-rule`, by taking each policy, then each rule, out of the
/// engine and comparing every endpoint's decisions.
fn removal_findings(
    cluster: &ClusterModel,
    policies: &BTreeMap<PolicyKey, Vec<usize>>,
    inert: &BTreeSet<PolicyKey>,
    lab: &Lab,
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
    for (key, indexes) in policies {
        if inert.contains(key) {
            continue;
        }
        let removed: Vec<_> = indexes.iter().map(|&j| (lab.position(j), None)).collect();
        if lab.unchanged(&removed) {
            findings.push(redundancy(key, indexes.iter().map(|&j| &entries[j])));
        }
        // Each rule: the same policy with the rule matching nothing (its isolation kept).
        for &j in indexes {
            let entry = &entries[j];
            if entry.peers.is_empty()
                || unresolved.contains(&j)
                || !entry
                    .peers
                    .iter()
                    .any(|p| lab.selected_by(p).next().is_some())
            {
                continue;
            }
            let without = PolicyEntry {
                peers: Vec::new(),
                ..entry.clone()
            };
            let replaced = [(lab.position(j), Some(&without))];
            let shadowed = lab.unchanged(&replaced);
            let by = shadowed.then(|| lab.decider_of(lab.position(j), entry, &replaced));
            if let Some(by) = by {
                let by = by.unwrap_or_else(|| "the rules around it".into());
                findings.push(Finding {
                    rule: "shadowed-rule",
                    severity: Severity::Warning,
                    object: object_of(entry),
                    field: rule_field(entry),
                    // Not "never decides": where it comes first, `explain` names it as deciding;
                    // what holds is that the decisions are the same without it.
                    message: format!(
                        "rule {} ({:?}) changes no decision: without it, {by} decides every \
                         flow it matches the same way",
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

/// The finding for a policy whose removal changes no decision. A policy that only isolates (a
/// default deny: no rule admits anything) is information, not a smell: it is redundant only
/// while other policies happen to isolate every pod it selects, and it is what isolates the
/// next pod they do not.
fn redundancy<'a>(key: &PolicyKey, entries: impl IntoIterator<Item = &'a PolicyEntry>) -> Finding {
    let only_isolates = entries
        .into_iter()
        .all(|e| e.peers.is_empty() && e.default_deny);
    if only_isolates {
        return Finding {
            rule: "default-deny-covered",
            severity: Severity::Note,
            object: object_name(key),
            field: "spec".into(),
            message: "other policies isolate every pod this default deny selects today, so \
                      removing it would change no decision now"
                .into(),
            hint: "keep it: it isolates pods added later that no other policy selects".into(),
        };
    }
    Finding {
        rule: "redundant-policy",
        severity: Severity::Warning,
        object: object_name(key),
        field: "spec".into(),
        message: "removing this policy changes no decision: other policies already decide \
                  every flow it selects the same way"
            .into(),
        hint: "check whether another policy is broader than intended, or whether this one is \
               needed for pods to come"
            .into(),
    }
}
