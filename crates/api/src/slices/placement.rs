//! The controller's memory between rounds: which slice holds which endpoint. With it a round
//! plans only the slices its changed pods touch; without it every round reads every endpoint of
//! every slice (at 150,000 pods, most of the controller's CPU).
//!
//! A full plan ([`Placement::full`], exactly [`plan::changes`]) makes a placement; each later
//! round moves it on with the keys that changed ([`Placement::changes`]), planning the very
//! writes a full plan would make from the slices the last round published (tested against
//! it). That holds only while those slices are what the last round planned: a caller whose
//! writes failed or were refused as stale drops the placement and plans in full again.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::crd::NetpolEndpointSlice;

use super::plan::{self, Write};
use super::Endpoint;

#[derive(Clone, Debug)]
pub struct Placement {
    /// Endpoints a slice holds at most.
    capacity: usize,
    /// The keys (`namespace/name`) each slice holds, by slice name; no slice is empty.
    members: BTreeMap<String, BTreeSet<String>>,
    /// Which slice holds each key.
    slice_of: HashMap<String, String>,
}

impl Placement {
    /// The writes from `current` to `wanted` (as [`plan::changes`]) and the placement they make.
    pub fn full<'a>(
        wanted: &BTreeMap<String, Endpoint>,
        current: impl IntoIterator<Item = &'a NetpolEndpointSlice>,
        capacity: usize,
    ) -> (Placement, Vec<Write>) {
        let (members, writes) = plan::planned(wanted, current, capacity);
        let mut placement = Placement {
            capacity: capacity.max(1),
            members: BTreeMap::new(),
            slice_of: HashMap::new(),
        };
        for (name, held) in members {
            for key in &held {
                placement.slice_of.insert((*key).to_owned(), name.clone());
            }
            let held = held.into_iter().map(str::to_owned).collect();
            placement.members.insert(name, held);
        }
        (placement, writes)
    }

    /// The writes that publish the changes of the `dirty` keys (added, changed or gone from
    /// `wanted`), given that `current` holds what the last plan wrote. Moves the placement on
    /// as if the writes will all be made.
    pub fn changes(
        &mut self,
        wanted: &BTreeMap<String, Endpoint>,
        dirty: &BTreeSet<String>,
        current: &BTreeMap<String, NetpolEndpointSlice>,
    ) -> Vec<Write> {
        let mut touched: BTreeSet<String> = BTreeSet::new();
        let mut new = Vec::new();
        // Leavers first, as the full plan places new endpoints after the sticky ones: the room
        // they leave is taken by the endpoints that arrive in the same round.
        for key in dirty {
            match (wanted.contains_key(key), self.slice_of.get(key)) {
                (true, Some(slice)) => {
                    touched.insert(slice.clone());
                }
                (true, None) => new.push(key),
                (false, Some(_)) => {
                    let slice = self.slice_of.remove(key).unwrap_or_default();
                    if let Some(held) = self.members.get_mut(&slice) {
                        held.remove(key);
                    }
                    touched.insert(slice);
                }
                (false, None) => {}
            }
        }
        // Arrivals in key order (`dirty` is sorted), as the full plan places them.
        for key in new {
            let target = plan::slice_for(
                &self.members,
                &wanted[key].endpoint.namespace,
                self.capacity,
            );
            self.slice_of.insert(key.clone(), target.clone());
            self.members
                .entry(target.clone())
                .or_default()
                .insert(key.clone());
            touched.insert(target);
        }
        let mut desired = BTreeMap::new();
        for name in &touched {
            match self.members.get(name) {
                Some(held) if !held.is_empty() => {
                    let spec = plan::spec_of(held.iter().map(|k| &wanted[k]));
                    desired.insert(name.clone(), spec);
                }
                _ => {
                    self.members.remove(name);
                }
            }
        }
        plan::writes(
            &desired,
            touched.iter().filter_map(|name| current.get(name)),
        )
    }
}

#[cfg(test)]
#[path = "placement_tests.rs"]
mod tests;
