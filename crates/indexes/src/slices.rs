//! Slice mode's remote pods: NetpolEndpointSlice events turned into the pod events of the pods
//! they list, for a [`super::Pods`] index of their own.
//!
//! Each endpoint is read back into a pod ([`netpol_api::slices::pod_of`]) holding exactly the
//! fields identities are built from, so the engine sees what direct mode gives it. Endpoints on
//! the agent's own node are skipped: the agent watches its own node's pods in full
//! (`fieldSelector=spec.nodeName=NODE`), and one pod must come from one source.
//!
//! A pod listed by two slices at once (the controller moved it, or two leaders wrote) stays
//! until neither lists it. Slices arrive decoded and checked
//! ([`NetpolEndpointSlice::from_value`]); the caller refuses an invalid one with an error naming
//! the slice and the field, and a refused update changes nothing here (the slice's last valid
//! endpoints stay).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::event::Event;
use netpol_api::crd::{NetpolEndpointSlice, SliceEndpoint};
use netpol_api::slices::pod_of;
use netpol_api::Pod;

#[derive(Debug, Default)]
pub struct Slices {
    /// The agent's node: its endpoints come from the node's own pod watch.
    own_node: String,
    /// The pod keys each slice lists, by slice name.
    listed: BTreeMap<String, BTreeSet<String>>,
    /// How many slices list each pod key.
    holders: HashMap<String, u32>,
    /// The slices of a relist under way.
    relisting: Option<BTreeMap<String, BTreeSet<String>>>,
}

impl Slices {
    pub fn for_node(own_node: &str) -> Self {
        Slices {
            own_node: own_node.to_owned(),
            ..Slices::default()
        }
    }

    /// The pod events one slice event means.
    pub fn apply(&mut self, event: Event<NetpolEndpointSlice>) -> Vec<Event<Pod>> {
        match event {
            Event::Apply(slice) => {
                let (keys, pods) = self.remote_pods(&slice);
                let mut events: Vec<Event<Pod>> = pods.into_iter().map(Event::Apply).collect();
                let before = self.listed.insert(name(&slice), keys.clone());
                for key in before.iter().flatten().filter(|k| !keys.contains(*k)) {
                    events.extend(self.release(key));
                }
                for key in keys
                    .iter()
                    .filter(|k| before.as_ref().is_none_or(|b| !b.contains(*k)))
                {
                    *self.holders.entry(key.clone()).or_default() += 1;
                }
                events
            }
            Event::Delete(slice) => {
                let before = self.listed.remove(&name(&slice)).unwrap_or_default();
                before.iter().flat_map(|key| self.release(key)).collect()
            }
            Event::Init => {
                self.relisting = Some(BTreeMap::new());
                vec![Event::Init]
            }
            Event::InitApply(slice) => {
                let (keys, pods) = self.remote_pods(&slice);
                self.relisting
                    .get_or_insert_with(BTreeMap::new)
                    .insert(name(&slice), keys);
                pods.into_iter().map(Event::InitApply).collect()
            }
            Event::InitDone => {
                // The pod index's own relist removes the pods no slice lists any more.
                self.listed = self.relisting.take().unwrap_or_default();
                self.holders.clear();
                for key in self.listed.values().flatten() {
                    *self.holders.entry(key.clone()).or_default() += 1;
                }
                vec![Event::InitDone]
            }
        }
    }

    /// The keys and pods of a slice's remote endpoints.
    fn remote_pods(&self, slice: &NetpolEndpointSlice) -> (BTreeSet<String>, Vec<Pod>) {
        let remote = slice
            .spec
            .endpoints
            .iter()
            .filter(|e| e.node.as_deref() != Some(self.own_node.as_str()));
        let mut keys = BTreeSet::new();
        let mut pods = Vec::new();
        for endpoint in remote {
            keys.insert(endpoint.key());
            let labels = slice.spec.label_sets.get(endpoint.labels as usize);
            pods.push(pod_of(endpoint, labels.unwrap_or(&BTreeMap::new())));
        }
        (keys, pods)
    }

    /// One slice no longer lists `key`: the pod's delete when no slice does.
    fn release(&mut self, key: &str) -> Option<Event<Pod>> {
        let count = self.holders.get_mut(key)?;
        *count = count.saturating_sub(1);
        if *count > 0 {
            return None;
        }
        self.holders.remove(key);
        let (namespace, name) = key.split_once('/')?;
        let gone = SliceEndpoint {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            ..SliceEndpoint::default()
        };
        Some(Event::Delete(pod_of(&gone, &BTreeMap::new())))
    }
}

fn name(slice: &NetpolEndpointSlice) -> String {
    slice.metadata.name.clone().unwrap_or_default()
}
