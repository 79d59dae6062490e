//! Which pods `netpol acls` computes HCN rules for: the pods of Windows nodes (a pod on a node
//! labelled `kubernetes.io/os=linux` has no HCN endpoint; netpol programs nftables there), and
//! with `--node NAME` only that node's.

use std::collections::{BTreeSet, HashSet};

use netpol_engine::Engine;

/// The well-known label of a node's operating system.
pub const OS_LABEL: &str = "kubernetes.io/os";

/// The pods chosen, and how many were left out for running on Linux nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodSelection {
    pub pods: BTreeSet<String>,
    pub linux_pods_skipped: usize,
}

/// The endpoints of `engine` on Windows nodes (or nodes of unknown OS, and pods that name no
/// node, as scenario files may), of `node` only if given. An error names a node that is not
/// there or runs Linux.
pub fn select_pods(engine: &Engine, node: Option<&str>) -> Result<PodSelection, String> {
    let linux: HashSet<&str> = engine
        .nodes()
        .filter(|(_, identities)| {
            identities.iter().filter_map(|i| i.as_node()).any(|n| {
                n.labels
                    .get(OS_LABEL)
                    .is_some_and(|os| os.eq_ignore_ascii_case("linux"))
            })
        })
        .map(|(name, _)| name)
        .collect();
    if let Some(node) = node {
        if linux.contains(node) {
            return Err(format!(
                "node {node} is labelled {OS_LABEL}=linux: its pods have no HCN endpoints (netpol programs nftables there)"
            ));
        }
    }
    let mut selection = PodSelection::default();
    let mut node_seen = node.is_some_and(|n| engine.nodes().any(|(name, _)| name == n));
    for (key, _) in engine.endpoints() {
        let pod_node = engine
            .endpoint_pod(key)
            .and_then(|(pod, _)| pod.node.as_deref());
        if let Some(wanted) = node {
            if pod_node != Some(wanted) {
                continue;
            }
            node_seen = true;
        }
        if pod_node.is_some_and(|n| linux.contains(n)) {
            selection.linux_pods_skipped += 1;
            continue;
        }
        selection.pods.insert(key.to_string());
    }
    match node {
        Some(node) if !node_seen => Err(format!(
            "no node {node}: no Node object of that name and no pod scheduled on it"
        )),
        _ => Ok(selection),
    }
}
