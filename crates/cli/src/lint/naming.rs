//! How lint names policies and their fields in findings: `Kind namespace/name` and
//! `spec.ingress[2]`, as every rule writes them.

use netpol_engine::PolicyEntry;

/// (kind, namespace, name) of a policy.
pub(super) type PolicyKey = (String, Option<String>, String);

pub(super) fn policy_key(entry: &PolicyEntry) -> PolicyKey {
    let p = &entry.provenance;
    (p.kind.clone(), p.namespace.clone(), p.name.clone())
}

pub(super) fn object_name(key: &PolicyKey) -> String {
    match &key.1 {
        Some(ns) => format!("{} {ns}/{}", key.0, key.2),
        None => format!("{} {}", key.0, key.2),
    }
}

/// The field of a policy's subject.
pub(super) fn subject_field(kind: &str) -> &'static str {
    match kind {
        "NetworkPolicy" => "spec.podSelector",
        "CiliumNetworkPolicy" | "CiliumClusterwideNetworkPolicy" => "spec.endpointSelector",
        _ => "spec.subject",
    }
}

/// The field of an entry's rule: `spec.ingress[2]`, from the provenance where it names an index,
/// else from the rule's index within the policy.
pub(super) fn rule_field(entry: &PolicyEntry) -> String {
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

pub(super) fn rule_label(entry: &PolicyEntry) -> String {
    format!("{} rule {}", object_of(entry), entry.provenance.rule)
}

pub(super) fn object_of(entry: &PolicyEntry) -> String {
    object_name(&policy_key(entry))
}
