//! The controller's computation: the pods of the cluster and the slices already published →
//! the slices that should be, and the writes that get there.
//!
//! Pure and deterministic. Batching is sticky, so that a change touches as few slices as it can:
//!
//! - an endpoint stays in the slice that holds it (a pod's change rewrites that slice alone);
//! - a new endpoint goes to the first slice (by name) with room that holds its namespace, else
//!   to the first slice with room, else to a new slice named with the lowest free number: the
//!   replicas of a workload gather in few slices, and a rolling update's new pods take the room
//!   its old pods leave in the same slices;
//! - a slice left empty is deleted; an endpoint listed by two slices (a write lost between two
//!   leaders) is kept in the first by name and dropped from the other.
//!
//! Within a slice, endpoints are sorted by key and label sets by content, so the same members
//! always give the same object and an unchanged slice is never written.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use crate::crd::{NetpolEndpointSlice, NetpolEndpointSliceSpec, SliceEndpoint};

use super::Endpoint;

/// How a slice's name begins; the rest is a number (`neps-00001`).
pub const NAME_PREFIX: &str = "neps-";

/// One write to the API server. Updates and deletes carry the resourceVersion the plan was made
/// from, so a slice someone else changed meanwhile is refused (409) rather than overwritten.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    Create(NetpolEndpointSlice),
    Update(NetpolEndpointSlice),
    Delete {
        name: String,
        resource_version: Option<String>,
    },
}

impl Write {
    /// The name of the slice written.
    pub fn name(&self) -> &str {
        match self {
            Write::Create(slice) | Write::Update(slice) => {
                slice.metadata.name.as_deref().unwrap_or_default()
            }
            Write::Delete { name, .. } => name,
        }
    }
}

/// The slices that should exist, by name, for the endpoints `wanted` (keyed `namespace/name`)
/// given the slices `current`ly published; at most `capacity` endpoints a slice.
pub fn desired<'a>(
    wanted: &BTreeMap<String, Endpoint>,
    current: impl IntoIterator<Item = &'a NetpolEndpointSlice>,
    capacity: usize,
) -> BTreeMap<String, NetpolEndpointSliceSpec> {
    placement(wanted, current, capacity)
        .into_iter()
        .map(|(name, held)| (name, spec_of(held.iter().map(|k| &wanted[*k]))))
        .collect()
}

/// The writes that publish `wanted`: exactly `writes(&desired(wanted, current, capacity),
/// current)`, but a slice whose members are unchanged is compared in place rather than built
/// again, so that a round at 150,000 pods allocates only for the slices it writes.
pub fn changes<'a>(
    wanted: &BTreeMap<String, Endpoint>,
    current: impl IntoIterator<Item = &'a NetpolEndpointSlice>,
    capacity: usize,
) -> Vec<Write> {
    planned(wanted, current, capacity).1
}

/// [`changes`], with the placement the writes make: which slice holds which endpoint keys.
pub(super) fn planned<'a, 'w>(
    wanted: &'w BTreeMap<String, Endpoint>,
    current: impl IntoIterator<Item = &'a NetpolEndpointSlice>,
    capacity: usize,
) -> (BTreeMap<String, BTreeSet<&'w str>>, Vec<Write>) {
    let current: BTreeMap<&str, &NetpolEndpointSlice> = current
        .into_iter()
        .map(|s| (s.metadata.name.as_deref().unwrap_or_default(), s))
        .collect();
    let members = placement(wanted, current.values().copied(), capacity);
    let mut unchanged: BTreeSet<&str> = BTreeSet::new();
    let mut desired = BTreeMap::new();
    for (name, held) in &members {
        match current.get_key_value(name.as_str()) {
            Some((key, existing)) if holds_exactly(existing, held, wanted) => {
                unchanged.insert(key);
            }
            _ => {
                desired.insert(name.clone(), spec_of(held.iter().map(|k| &wanted[*k])));
            }
        }
    }
    let rest = current
        .into_iter()
        .filter(|(name, _)| !unchanged.contains(name))
        .map(|(_, slice)| slice);
    (members, writes(&desired, rest))
}

/// Whether `slice` is already what [`spec_of`] makes of `held`: the same endpoints in key
/// order, each equal to its wanted one, and its label sets the distinct sets they use, sorted.
fn holds_exactly(
    slice: &NetpolEndpointSlice,
    held: &BTreeSet<&str>,
    wanted: &BTreeMap<String, Endpoint>,
) -> bool {
    let spec = &slice.spec;
    if spec.endpoints.len() != held.len()
        || !spec.label_sets.windows(2).all(|pair| pair[0] < pair[1])
    {
        return false;
    }
    let mut used = vec![false; spec.label_sets.len()];
    let same = spec.endpoints.iter().zip(held).all(|(have, key)| {
        let want = &wanted[*key];
        let Some(labels) = spec.label_sets.get(have.labels as usize) else {
            return false;
        };
        used[have.labels as usize] = true;
        let e = &want.endpoint;
        have.namespace == e.namespace
            && have.name == e.name
            && have.addresses == e.addresses
            && have.node == e.node
            && have.ports == e.ports
            && have.created == e.created
            && *labels == want.labels
    });
    same && used.iter().all(|u| *u)
}

/// Which slice holds which endpoint keys: the sticky placement described above.
fn placement<'a, 'w>(
    wanted: &'w BTreeMap<String, Endpoint>,
    current: impl IntoIterator<Item = &'a NetpolEndpointSlice>,
    capacity: usize,
) -> BTreeMap<String, BTreeSet<&'w str>> {
    let capacity = capacity.max(1);
    // Members by slice, the sticky part: every wanted endpoint a current slice holds, once.
    let mut members: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    let mut placed: BTreeSet<&str> = BTreeSet::new();
    let mut by_name: Vec<&NetpolEndpointSlice> = current.into_iter().collect();
    by_name.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for slice in by_name {
        let name = slice.metadata.name.clone().unwrap_or_default();
        let held = members.entry(name).or_default();
        for endpoint in &slice.spec.endpoints {
            let Some((key, _)) = wanted.get_key_value(&endpoint.key()) else {
                continue;
            };
            if held.len() < capacity && placed.insert(key) {
                held.insert(key);
            }
        }
    }
    // New endpoints, in key order.
    for key in wanted.keys() {
        if placed.contains(key.as_str()) {
            continue;
        }
        let target = slice_for(&members, &wanted[key].endpoint.namespace, capacity);
        members.entry(target).or_default().insert(key);
    }
    members.retain(|_, held| !held.is_empty());
    members
}

/// The slice a new endpoint of `namespace` joins: the first (by name) with room that holds
/// the namespace, else the first with room, else a new one with the lowest free number.
pub(super) fn slice_for<K: std::borrow::Borrow<str> + Ord>(
    members: &BTreeMap<String, BTreeSet<K>>,
    namespace: &str,
    capacity: usize,
) -> String {
    // Keys are `namespace/name` and no namespace holds a `/`: a slice holds the namespace when
    // its first key at or after `namespace/` begins so (one lookup, not a scan, which matters
    // at the first publication of 150,000 endpoints).
    let prefix = format!("{namespace}/");
    let has_room = |held: &BTreeSet<K>| held.len() < capacity;
    let same_namespace = members.iter().find(|(_, held)| {
        has_room(held)
            && held
                .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
                .next()
                .is_some_and(|k| k.borrow().starts_with(&prefix))
    });
    match same_namespace.or_else(|| members.iter().find(|(_, h)| has_room(h))) {
        Some((name, _)) => name.clone(),
        None => free_name(members),
    }
}

/// The writes that turn `current` into `desired`: creates and updates of the slices that differ,
/// deletes of the slices no longer wanted, in name order.
pub fn writes<'a>(
    desired: &BTreeMap<String, NetpolEndpointSliceSpec>,
    current: impl IntoIterator<Item = &'a NetpolEndpointSlice>,
) -> Vec<Write> {
    let current: BTreeMap<&str, &NetpolEndpointSlice> = current
        .into_iter()
        .map(|s| (s.metadata.name.as_deref().unwrap_or_default(), s))
        .collect();
    let mut writes = Vec::new();
    for (name, spec) in desired {
        match current.get(name.as_str()) {
            Some(existing) if existing.spec == *spec => {}
            Some(existing) => {
                let mut slice = NetpolEndpointSlice::new(name, spec.clone());
                slice.metadata.resource_version = existing.metadata.resource_version.clone();
                writes.push(Write::Update(slice));
            }
            None => writes.push(Write::Create(NetpolEndpointSlice::new(name, spec.clone()))),
        }
    }
    for (name, existing) in &current {
        if !desired.contains_key(*name) {
            writes.push(Write::Delete {
                name: (*name).to_owned(),
                resource_version: existing.metadata.resource_version.clone(),
            });
        }
    }
    writes.sort_by(|a, b| a.name().cmp(b.name()));
    writes
}

/// The lowest-numbered slice name not in use.
fn free_name<K>(members: &BTreeMap<String, BTreeSet<K>>) -> String {
    (1..)
        .map(|n| format!("{NAME_PREFIX}{n:05}"))
        .find(|name| !members.contains_key(name))
        .unwrap_or_default()
}

/// A slice holding `endpoints` (in key order), each distinct label set once, sorted.
pub(super) fn spec_of<'a>(
    endpoints: impl Iterator<Item = &'a Endpoint> + Clone,
) -> NetpolEndpointSliceSpec {
    let sets: BTreeSet<&BTreeMap<String, String>> = endpoints.clone().map(|e| &e.labels).collect();
    let label_sets: Vec<BTreeMap<String, String>> = sets.into_iter().cloned().collect();
    let endpoints = endpoints
        .map(|e| SliceEndpoint {
            labels: label_sets
                .binary_search(&e.labels)
                .map_or(0, |i| u32::try_from(i).unwrap_or(u32::MAX)),
            ..e.endpoint.clone()
        })
        .collect();
    NetpolEndpointSliceSpec {
        label_sets,
        endpoints,
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
