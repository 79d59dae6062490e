//! What-if MapStates for authoring tools: the map a pod's endpoint would have if other entries
//! selected it, computed for a few remote identities against the committed identities,
//! selectors and precedence levels, without staging a change or resolving any endpoint.
//!
//! `netpol lint` asks, per policy and per rule, whether taking it out changes any decision.
//! Committing each removal re-resolves every local endpoint (a policy change can shift every
//! precedence), and an endpoint's map has a class per remote identity its rules select: at
//! 150,000 pods neither fits. Here the levels stay those of the whole policy set (what lint's
//! question keeps fixed anyway), and the caller names the remotes that tell its classes apart.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::ops::Range;

use super::{EndpointState, Engine};
use crate::entry::{Direction, PolicyEntry};
use crate::identity::{IdentityId, PodInfo};
use crate::mapstate::{ClassKey, MapState};
use crate::resolve::EndpointPolicy;
use crate::selector::{Peer, PeerGroup};
use crate::selector_cache::SelectorId;

impl Engine {
    /// The positions in [`Engine::entries`] of the entries whose subject selects `pod`, ascending.
    pub fn selecting(&self, pod: &PodInfo) -> Vec<usize> {
        self.subjects
            .candidates(pod)
            .into_iter()
            .filter(|&i| self.entries[i].subject.matches(pod))
            .collect()
    }

    /// Each committed policy's key and the positions of its entries in [`Engine::entries`], in
    /// the order of the entries.
    pub fn policy_ranges(&self) -> Vec<(&str, Range<usize>)> {
        let total: usize = self.policies.values().sum();
        // The engine's own entries come first.
        let mut start = self.entries.len() - total;
        self.policies
            .iter()
            .map(|(key, count)| {
                let range = start..start + count;
                start = range.end;
                (key.as_str(), range)
            })
            .collect()
    }

    /// The identities a peer of the committed entries selects, the node relation aside (see
    /// [`Peer::selects_ignoring_node`]); `None` for a peer no entry has.
    pub fn selected_by(&self, peer: &Peer) -> Option<Cow<'_, BTreeSet<IdentityId>>> {
        self.cache.selected_by(peer, &self.store)
    }

    /// The MapState an endpoint for `pod` would have if `entries` (in precedence-neutral order,
    /// as [`Engine::entries`] lists them) were the entries selecting it: its wildcard classes
    /// and the classes of `remotes` only. Every peer of `entries` must be a peer of a committed
    /// entry. The entry budget is not applied: this is the policies' meaning, not a datapath.
    pub fn map_with<'a>(
        &self,
        pod: &PodInfo,
        entries: impl IntoIterator<Item = &'a PolicyEntry>,
        remotes: impl IntoIterator<Item = IdentityId>,
    ) -> MapState {
        let mut state = EndpointState {
            pod: pod.clone(),
            addresses: Vec::new(),
            // Entries the engine's view leaves out (audited ones) decide nothing here either.
            policy: std::sync::Arc::new(
                self.resolve_entries(
                    entries
                        .into_iter()
                        .filter(|e| self.view.admits(e))
                        .map(|e| (None, e)),
                    pod,
                ),
            ),
            wildcard: Default::default(),
            map: Default::default(),
            over_budget: None,
            budget_checked: 0,
            budget_used: 0,
        };
        let mut classes: BTreeSet<ClassKey> = Direction::BOTH.iter().map(|d| (*d, None)).collect();
        for remote in remotes {
            classes.extend(Direction::BOTH.iter().map(|d| (*d, Some(remote))));
        }
        self.recompute_state_classes(&mut state, classes);
        // The map was made here and is shared with nothing: taken out without a copy.
        state.map.unwrap_or_clone()
    }

    /// The rules of `entries` (each with its position in [`Engine::entries`], if it has one)
    /// for an endpoint of `pod`.
    pub(super) fn resolve_entries<'a>(
        &self,
        entries: impl IntoIterator<Item = (Option<usize>, &'a PolicyEntry)>,
        pod: &PodInfo,
    ) -> EndpointPolicy {
        EndpointPolicy::resolve(entries, pod, &self.levels, |at, group| {
            self.selector_of(at, group)
        })
    }

    /// The selector of a group of the peers of an entry (at position `at` in the entry list, if
    /// it is one of them): for a live entry's CIDR group, the one noted at the last selector
    /// update ([`Engine::cidr_groups`]), else looked up.
    fn selector_of(&self, at: Option<usize>, group: PeerGroup<'_>) -> SelectorId {
        let noted = match group {
            PeerGroup::Cidrs(_) => at.and_then(|i| self.cidr_groups.get(&i).copied()),
            PeerGroup::One(_) => None,
        };
        if let Some(id) = noted {
            debug_assert_eq!(self.cache.id_of(group), Some(id), "noted CIDR group");
            return id;
        }
        self.cache
            .id_of(group)
            .expect("every peer of the policy set has a selector")
    }
}
