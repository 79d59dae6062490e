//! Nodes: each node's identities (one per InternalIP and ExternalIP address).
//!
//! This node's own Node object is what the node-probe allowance hangs on: the engine admits
//! ingress from the identities of the local node (`Entity::Host`). Should it go missing
//! (deleted, not yet created, not readable), its last known identities stay with the engine, so
//! that kubelet's probes keep passing, and [`Nodes::own_node`] says it is missing, for a warning,
//! a metric and `/readyz`. If it was never seen, no address is known to admit.

use crate::event::Event;
use netpol_api::cluster::node_identities;
use netpol_api::Node;
use netpol_engine::Identity;

use super::keyed::{Change, Keyed};
use super::pods::created_seconds;
use super::EngineUpdate;

/// Where this node's own Node object stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnNode {
    /// Listed or watched: the probe allowance follows its addresses.
    Present,
    /// Gone since it was seen: its last known addresses keep the probe allowance.
    MissingKept,
    /// Never seen since the agent started: no address is known to admit probes from.
    MissingNeverSeen,
}

#[derive(Debug, Default)]
pub struct Nodes {
    /// Each node's identities and creation time (see [`super::pods::PodClaim`]).
    identities: Keyed<(Vec<Identity>, Option<i64>)>,
    /// This node's name, for an agent running on one.
    own: Option<String>,
    /// The own node's last known identities, once seen.
    own_seen: bool,
    /// The own node's object is gone (or not listed); its last identities stay with the engine.
    own_missing: bool,
}

impl Nodes {
    /// The nodes of an agent running on `own`: its Node object is followed as above.
    pub fn for_node(own: &str) -> Nodes {
        Nodes {
            own: Some(own.to_owned()),
            ..Nodes::default()
        }
    }

    pub fn apply(&mut self, event: Event<Node>) -> Vec<EngineUpdate> {
        let name = |node: &Node| node.metadata.name.clone().unwrap_or_default();
        let derive = |node: &Node| (node_identities(node), created_seconds(&node.metadata));
        let listed = matches!(event, Event::InitDone);
        let changes = match event {
            Event::Apply(node) => self
                .identities
                .set(name(&node), derive(&node))
                .into_iter()
                .collect(),
            Event::Delete(node) => self.identities.remove(&name(&node)).into_iter().collect(),
            Event::Init => {
                self.identities.begin_relist();
                Vec::new()
            }
            Event::InitApply(node) => {
                self.identities.relisted(name(&node), derive(&node));
                Vec::new()
            }
            Event::InitDone => self.identities.end_relist(),
        };
        let mut updates = Vec::new();
        for change in changes {
            match change {
                Change::Set { key, new, .. } => {
                    if self.is_own(&key) {
                        self.own_seen = true;
                        self.own_missing = false;
                    }
                    updates.push(EngineUpdate::Node {
                        name: key,
                        identities: new.0,
                        created: new.1,
                    });
                }
                // The engine keeps the own node's last identities: the probe allowance.
                Change::Removed { key, .. } if self.is_own(&key) => self.own_missing = true,
                Change::Removed { key, .. } => updates.push(EngineUpdate::Node {
                    name: key,
                    identities: Vec::new(),
                    created: None,
                }),
            }
        }
        if listed {
            if let Some(own) = &self.own {
                // Listed without it: missing, whether or not it was ever seen.
                self.own_missing = self.identities.get(own).is_none();
            }
        }
        updates
    }

    fn is_own(&self, key: &str) -> bool {
        self.own.as_deref() == Some(key)
    }

    /// Where the own Node object stands; None for an index with no own node, or before the
    /// nodes are listed.
    pub fn own_node(&self) -> Option<OwnNode> {
        self.own.as_ref()?;
        if !self.identities.is_synced() {
            return None;
        }
        Some(match (self.own_missing, self.own_seen) {
            (false, _) => OwnNode::Present,
            (true, true) => OwnNode::MissingKept,
            (true, false) => OwnNode::MissingNeverSeen,
        })
    }

    pub fn is_synced(&self) -> bool {
        self.identities.is_synced()
    }
}
