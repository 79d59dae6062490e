//! `open-to-all-pods`, `open-to-world` and their egress twins: Allow rules whose peers are
//! every pod of the cluster (a `namespaceSelector: {}` standing alone) or every address (a rule
//! with only ports, no peers; `0.0.0.0/0`, `::/0`, `world`, `all`). Read from the entries as the
//! engine holds them, so every policy kind is covered the same way; each finding names the
//! object and the rule's field.

use netpol_engine::{Direction, Entity, Peer, PolicyEntry, Verdict};

use super::naming::{object_of, rule_field};
use super::{Finding, Severity};

/// What an Allow rule opens, if it opens everything of some kind.
enum Opening {
    AllPods,
    World,
}

fn opening(peer: &Peer) -> Option<Opening> {
    match peer {
        Peer::Pods(sel) if sel.namespaces.is_everything() && sel.pods.is_everything() => {
            Some(Opening::AllPods)
        }
        Peer::Entity(Entity::All | Entity::World) => Some(Opening::World),
        Peer::Cidr(cidr) if cidr.net.prefix_len() == 0 && cidr.except.is_empty() => {
            Some(Opening::World)
        }
        _ => None,
    }
}

/// The findings of one entry (nothing for entries that do not allow).
pub fn exposure_findings(entry: &PolicyEntry, findings: &mut Vec<Finding>) {
    if entry.verdict != Verdict::Allow {
        return;
    }
    let ingress = entry.direction == Direction::Ingress;
    // The strongest opening once: a world rule also admits every pod.
    let world = entry
        .peers
        .iter()
        .any(|p| matches!(opening(p), Some(Opening::World)));
    let all_pods = entry
        .peers
        .iter()
        .any(|p| matches!(opening(p), Some(Opening::AllPods)));
    let ports = match entry.ports.is_empty() {
        true => "every port".to_string(),
        false => entry
            .ports
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    };
    let (rule, message, hint) = match (world, all_pods, ingress) {
        (true, _, true) => (
            "open-to-world",
            format!("admits every address on {ports}, the internet included (no peer, or a peer of every address)"),
            "name the peers that should connect (from: podSelector, namespaceSelector or an ipBlock of the clients)",
        ),
        (true, _, false) => (
            "egress-open-to-world",
            format!("lets the pods reach every address on {ports}, the internet included (no peer, or a peer of every address)"),
            "name the destinations (to: podSelector, namespaceSelector or an ipBlock)",
        ),
        (false, true, true) => (
            "open-to-all-pods",
            format!("admits every pod of every namespace of the cluster on {ports} (a namespaceSelector: {{}} standing alone)"),
            "add a podSelector to the same peer, or name the namespaces by label",
        ),
        (false, true, false) => (
            "egress-open-to-all-pods",
            format!("lets the pods reach every pod of every namespace on {ports} (a namespaceSelector: {{}} standing alone)"),
            "add a podSelector to the same peer, or name the namespaces by label",
        ),
        (false, false, _) => return,
    };
    findings.push(Finding {
        rule,
        severity: Severity::Warning,
        object: object_of(entry),
        field: rule_field(entry),
        message,
        hint: hint.into(),
    });
}
