//! Nodes: each node's identities (one per InternalIP and ExternalIP address).

use kube::runtime::watcher::Event;
use netpol_api::cluster::node_identities;
use netpol_api::Node;
use netpol_engine::Identity;

use super::keyed::{Change, Keyed};
use super::pods::created_seconds;
use super::EngineUpdate;

#[derive(Debug, Default)]
pub struct Nodes {
    /// Each node's identities and creation time (see [`super::pods::PodClaim`]).
    identities: Keyed<(Vec<Identity>, Option<i64>)>,
}

impl Nodes {
    pub fn apply(&mut self, event: Event<Node>) -> Vec<EngineUpdate> {
        let name = |node: &Node| node.metadata.name.clone().unwrap_or_default();
        let derive = |node: &Node| (node_identities(node), created_seconds(&node.metadata));
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
        changes
            .into_iter()
            .map(|change| match change {
                Change::Set { key, new, .. } => EngineUpdate::Node {
                    name: key,
                    identities: new.0,
                    created: new.1,
                },
                Change::Removed { key, .. } => EngineUpdate::Node {
                    name: key,
                    identities: Vec::new(),
                    created: None,
                },
            })
            .collect()
    }

    pub fn is_synced(&self) -> bool {
        self.identities.is_synced()
    }
}
