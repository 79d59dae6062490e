//! The controller's view of the cluster: the endpoint every pod publishes, kept from the pod
//! watch's events (see [`netpol_api::slices::endpoint_of`]: a pod without an identity publishes
//! none).

use std::collections::{BTreeMap, BTreeSet};

use netpol_api::slices::{endpoint_of, Endpoint};
use netpol_api::{Object, Pod};
use netpol_indexes::Event;

#[derive(Debug, Default)]
pub struct World {
    /// What should be published, by `namespace/name`.
    wanted: BTreeMap<String, Endpoint>,
    /// A relist under way: replaces `wanted` once complete.
    relisting: Option<BTreeMap<String, Endpoint>>,
    /// The pods have been listed completely at least once: until then nothing is published (a
    /// partial world would delete the endpoints not yet listed).
    synced: bool,
    /// What changed since the writer last took it.
    dirty: Dirty,
}

/// What changed in the world since the writer last looked: the keys of the endpoints added,
/// changed or removed, or everything (a relist, which the writer plans in full).
#[derive(Debug, PartialEq, Eq)]
pub enum Dirty {
    Keys(BTreeSet<String>),
    All,
}

impl Default for Dirty {
    fn default() -> Self {
        Dirty::Keys(BTreeSet::new())
    }
}

impl Dirty {
    fn mark(&mut self, key: String) {
        if let Dirty::Keys(keys) = self {
            keys.insert(key);
        }
    }
}

impl World {
    /// Applies one pod event; true when what should be published changed.
    pub fn apply(&mut self, event: Event<Object>) -> bool {
        match event {
            Event::Init => {
                self.relisting = Some(BTreeMap::new());
                false
            }
            Event::InitApply(Object::Pod(pod)) => {
                if let (Some(key), Some(endpoint)) = (key_of(&pod), endpoint_of(&pod)) {
                    self.relisting
                        .get_or_insert_with(BTreeMap::new)
                        .insert(key, endpoint);
                }
                false
            }
            Event::InitDone => {
                let listed = self.relisting.take().unwrap_or_default();
                let changed = !self.synced || listed != self.wanted;
                self.wanted = listed;
                self.synced = true;
                if changed {
                    self.dirty = Dirty::All;
                }
                changed
            }
            Event::Apply(Object::Pod(pod)) => {
                let Some(key) = key_of(&pod) else {
                    return false;
                };
                let changed = match endpoint_of(&pod) {
                    Some(endpoint) if self.wanted.get(&key) == Some(&endpoint) => false,
                    Some(endpoint) => {
                        self.wanted.insert(key.clone(), endpoint);
                        true
                    }
                    None => self.wanted.remove(&key).is_some(),
                };
                if changed {
                    self.dirty.mark(key);
                }
                changed
            }
            Event::Delete(Object::Pod(pod)) => {
                let Some(key) = key_of(&pod) else {
                    return false;
                };
                let changed = self.wanted.remove(&key).is_some();
                if changed {
                    self.dirty.mark(key);
                }
                changed
            }
            // Not a pod: not on this watch.
            Event::InitApply(_) | Event::Apply(_) | Event::Delete(_) => false,
        }
    }

    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// What changed since the last call.
    pub fn take_dirty(&mut self) -> Dirty {
        std::mem::take(&mut self.dirty)
    }

    /// The endpoints to publish, by `namespace/name`.
    pub fn wanted(&self) -> &BTreeMap<String, Endpoint> {
        &self.wanted
    }
}

fn key_of(pod: &Pod) -> Option<String> {
    let metadata = &pod.metadata;
    Some(format!(
        "{}/{}",
        metadata.namespace.as_deref()?,
        metadata.name.as_deref()?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, ip: Option<&str>, app: &str) -> Object {
        let mut value = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "shop", "labels": {"app": app}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running"}
        });
        if let Some(ip) = ip {
            value["status"]["podIP"] = json!(ip);
        }
        Object::from_value(value).unwrap()
    }

    #[test]
    fn follows_pods_and_reports_only_real_changes() {
        let mut world = World::default();
        assert!(!world.apply(Event::Init));
        assert!(!world.apply(Event::InitApply(pod("a", Some("10.0.0.1"), "web"))));
        assert!(!world.apply(Event::InitApply(pod("pending", None, "web"))));
        assert!(!world.is_synced());
        assert!(world.apply(Event::InitDone), "the first list is a change");
        assert_eq!(world.wanted().keys().collect::<Vec<_>>(), ["shop/a"]);
        assert!(!world.apply(Event::Apply(pod("a", Some("10.0.0.1"), "web"))));
        assert!(world.apply(Event::Apply(pod("a", Some("10.0.0.1"), "api"))));
        assert!(world.apply(Event::Apply(pod("pending", Some("10.0.0.2"), "web"))));
        assert!(world.apply(Event::Delete(pod("a", None, "api"))));
        assert!(!world.apply(Event::Delete(pod("a", None, "api"))));
        assert_eq!(
            world.take_dirty(),
            Dirty::All,
            "the first list is planned in full"
        );
        world.apply(Event::Apply(pod("b", Some("10.0.0.3"), "web")));
        world.apply(Event::Apply(pod("b", Some("10.0.0.3"), "web")));
        world.apply(Event::Delete(pod("pending", None, "web")));
        world.apply(Event::Delete(pod("gone", None, "web")));
        let keys = ["shop/b", "shop/pending"].map(str::to_owned);
        assert_eq!(world.take_dirty(), Dirty::Keys(BTreeSet::from(keys)));
        assert_eq!(world.take_dirty(), Dirty::Keys(BTreeSet::new()));
        world.apply(Event::Apply(pod("pending", Some("10.0.0.2"), "web")));
        world.apply(Event::Delete(pod("b", None, "web")));
        // A relist that finds the same pods changes nothing.
        world.apply(Event::Init);
        world.apply(Event::InitApply(pod("pending", Some("10.0.0.2"), "web")));
        assert!(!world.apply(Event::InitDone));
    }
}
