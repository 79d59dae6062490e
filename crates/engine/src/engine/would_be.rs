//! The would-be MapState of a local endpoint ([`crate::audit`]): its map if every entry kept
//! for it were enforced, on the same identities as the endpoint's own map, so that a datapath
//! compiles both onto one ipcache and reports what the enforced map passes and the would-be map
//! denies (`netpol_nft`'s audit chains).
//!
//! Computed in full on request, not kept incrementally: only endpoints an audited entry selects
//! have one, and an agent asks after each commit. What that costs is an endpoint recompute per
//! such endpoint and commit (docs/semantics.md says so).

use std::sync::Arc;

use super::{EndpointState, Engine};
use crate::mapstate::MapState;

impl Engine {
    /// The would-be map of local endpoint `key`: every entry selecting it enforced, audited
    /// ones included ([`Engine::keep_audited`] must be set before policies are staged). None
    /// where `key` is no local endpoint, or where every entry selecting it is of the engine's
    /// view (the would-be map is then its map: nothing of it is audited). The entry budget is
    /// not applied: an endpoint over it is isolated, and what isolation denies is no would-deny.
    pub fn would_be_map(&self, key: &str) -> Option<MapState> {
        let endpoint = self.endpoints.get(key)?;
        let selecting = self.selecting(&endpoint.pod);
        if selecting
            .iter()
            .all(|&i| self.view.admits(&self.entries[i]))
        {
            return None;
        }
        let policy = self.resolve_entries(
            selecting.iter().map(|&i| (Some(i), &self.entries[i])),
            &endpoint.pod,
        );
        let mut state = EndpointState {
            pod: endpoint.pod.clone(),
            addresses: endpoint.addresses.clone(),
            policy: Arc::new(policy),
            wildcard: Default::default(),
            map: Default::default(),
            over_budget: None,
            budget_checked: 0,
            budget_used: 0,
        };
        let classes = self.every_class(&state);
        self.recompute_state_classes(&mut state, classes);
        Some(state.map.unwrap_or_clone())
    }
}
