//! [`Engine::commit`] as a sequence of phases. The order is the point: policies first (the
//! identities and selectors that follow them depend on the new set), then the identity store,
//! then every selector, and only then any MapState.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use ipnet::IpNet;

use super::identities::{IdentityChanges, StagedClaim, Touched};
use super::{EndpointChanges, Engine};
use crate::entry::PolicyEntry;
use crate::identity::{Identity, IdentityId, PodInfo};
use crate::mapstate::ClassChange;
use crate::selector::{Peer, PeerGroup};
use crate::selector_cache::{SelectorDelta, SelectorId};
use crate::shared::SharedId;

/// The peers of the live policy entries a commit took away: each held a selector. (Those the
/// commit brings in acquire theirs once they are found live, `live`.)
#[derive(Debug, Default)]
struct PeerChanges {
    /// The peers of each entry gone that held selectors.
    removed: Vec<Vec<Peer>>,
}

/// What a commit returns of the endpoints it changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Report {
    /// Each endpoint with its exact changes.
    Changes,
    /// Each endpoint, its changes unlisted.
    Endpoints,
    /// Each endpoint, with its changes where it was updated class by class, unlisted where it
    /// was recomputed in full.
    Classes,
    Nothing,
}

impl Engine {
    /// Applies everything staged and returns the exact MapState changes per endpoint.
    pub fn commit(&mut self) -> Vec<EndpointChanges> {
        self.commit_reporting(Report::Changes)
    }

    /// Applies everything staged and returns the endpoints whose datapath rules may differ,
    /// without listing their changes (`unlisted`): what a datapath that compiles whole endpoints
    /// needs. At 150,000 pods the lists, every class of every new endpoint, were 68 MB of the
    /// agent's peak.
    pub fn commit_endpoints(&mut self) -> Vec<EndpointChanges> {
        self.commit_reporting(Report::Endpoints)
    }

    /// Applies everything staged and returns the endpoints whose datapath rules may differ: an
    /// endpoint updated class by class (a pod came or went elsewhere) with its class changes,
    /// which a datapath can patch its compiled rules by (`netpol_datapath::compile::patch`); one
    /// recomputed in full (a policy changed, its own pod changed, it is new) `unlisted`, since
    /// its changes are as large as its MapState and it is compiled anew anyway.
    pub fn commit_classes(&mut self) -> Vec<EndpointChanges> {
        self.commit_reporting(Report::Classes)
    }

    /// Applies everything staged without keeping the changes: a tool that loads a whole cluster
    /// once reads the MapStates, not the changes, which hold every class of every endpoint
    /// (130 MB of a 10,000-pod `matrix`'s 285 MB peak).
    pub fn commit_unreported(&mut self) {
        self.commit_reporting(Report::Nothing);
    }

    fn commit_reporting(&mut self, report: Report) -> Vec<EndpointChanges> {
        let staged = std::mem::take(&mut self.staged);
        let policies_changed = !staged.policies.is_empty();
        let staged_pods: Vec<String> = staged.pods.keys().cloned().collect();

        let peers = self.apply_policies(staged.policies);
        let (identities, changed_pods, live_changed) =
            self.apply_identities(staged.pods, staged.nodes, policies_changed, &staged_pods);
        let deltas = self.apply_to_selectors(&identities, &peers, policies_changed || live_changed);
        // Every peer of every changed policy, copied: freed before the MapStates are computed,
        // when memory peaks (at an initial sync, the peers of 36,000 policies).
        drop(peers);

        let mut out = self.remove_gone_endpoints();
        out.extend(self.update_endpoints(
            policies_changed,
            &changed_pods,
            &deltas,
            identities,
            report,
        ));
        out
    }

    /// Phase 1: replaces the staged policies and rebuilds the entries, which the world prefixes,
    /// cluster CIDRs and endpoint rules of the later phases are derived from. The peers of the
    /// old entries that held selectors are only returned: they are released once the new ones
    /// (acquired when the entries are found live) have been acquired.
    fn apply_policies(
        &mut self,
        staged: BTreeMap<String, Option<Vec<PolicyEntry>>>,
    ) -> PeerChanges {
        if staged.is_empty() {
            return PeerChanges::default();
        }
        let mut peers = PeerChanges::default();
        let own = usize::from(self.config.allow_node_probes);
        let mut held = self.live.take_held(own, &self.policies);
        let mut policies = self.take_policy_entries();
        let staged_keys: HashSet<String> = staged.keys().cloned().collect();
        let kept_groups = self.take_kept_cidr_groups(own, &staged_keys);
        for (key, entries) in staged {
            self.policy_delta.staged.insert(Arc::from(key.as_str()));
            if let Some(old) = policies.remove(&key) {
                let old_held = held.remove(&key).unwrap_or_default();
                let lost = old.iter().zip(&old_held).filter(|(_, held)| **held);
                self.policy_delta
                    .lost
                    .extend(lost.flat_map(|(e, _)| e.peers.iter().flat_map(Peer::prefixes)));
                peers.removed.extend(
                    old.into_iter()
                        .zip(old_held)
                        .filter(|(_, held)| *held)
                        .map(|(e, _)| e.peers),
                );
            }
            if let Some(entries) = entries {
                held.insert(key.clone(), vec![false; entries.len()]);
                policies.insert(key, entries);
            }
        }
        // The engine's own entries hold their selectors for life; then each policy's, in the
        // entries' order (by key).
        let mut flags = vec![true; own];
        for key in policies.keys() {
            flags.extend(held.remove(key).unwrap_or_default());
        }
        self.rebuild_entries(policies);
        self.place_kept_cidr_groups(kept_groups);
        self.live.set_held(flags);
        peers
    }

    /// The CIDR groups noted for the entries of the policies a change keeps as they were, by
    /// policy key (none: the engine's own entries) and position in it: the entries of the other
    /// policies shift in the entry list, but keep their order and their selectors.
    fn take_kept_cidr_groups(
        &mut self,
        own: usize,
        staged: &HashSet<String>,
    ) -> Vec<(Option<String>, usize, SelectorId)> {
        let groups = std::mem::take(&mut self.cidr_groups);
        let mut kept: Vec<(Option<String>, usize, SelectorId)> = (0..own)
            .filter_map(|at| Some((None, at, *groups.get(&at)?)))
            .collect();
        let mut start = own;
        for (key, count) in &self.policies {
            if !staged.contains(key) {
                kept.extend(
                    (0..*count)
                        .filter_map(|j| Some((Some(key.clone()), j, *groups.get(&(start + j))?))),
                );
            }
            start += count;
        }
        kept
    }

    /// The groups of [`Engine::take_kept_cidr_groups`] at their positions in the rebuilt entry
    /// list.
    fn place_kept_cidr_groups(&mut self, kept: Vec<(Option<String>, usize, SelectorId)>) {
        let own = self.entries.len() - self.policies.values().sum::<usize>();
        let mut starts: HashMap<&str, usize> = HashMap::new();
        let mut start = own;
        for (key, count) in &self.policies {
            starts.insert(key, start);
            start += count;
        }
        self.cidr_groups = kept
            .into_iter()
            .filter_map(|(key, j, id)| match key {
                None => Some((j, id)),
                Some(key) => Some((starts.get(key.as_str())? + j, id)),
            })
            .collect();
    }

    /// Phase 2: applies every addition and removal to the identity store, and says which.
    /// Removals go first, so that an address passing from one pod or node to another in this
    /// commit lands on the new one. The identities that follow the policies are synced between
    /// the two: re-keying looks only at addresses already in the store, and the arrivals get the
    /// new cluster CIDRs when they arrive. The local pods, and so the live entries whose peers
    /// those identities follow, are brought up to date before the sync. Also returns the pods
    /// whose identities changed, and whether an entry became live or stopped being live.
    fn apply_identities(
        &mut self,
        pods: BTreeMap<String, StagedClaim>,
        nodes: BTreeMap<String, StagedClaim>,
        policies_changed: bool,
        staged_pods: &[String],
    ) -> (IdentityChanges, HashSet<String>, bool) {
        let mut changes = IdentityChanges::default();
        let mut arrivals: Vec<Identity> = Vec::new();
        let mut touched = Touched::default();
        let mut changed_pods = self.replace_pods(pods, &mut touched);
        self.replace_nodes(nodes, &mut touched);
        changed_pods.extend(self.settle_addresses(touched, &mut changes, &mut arrivals));
        // Pods that gained or lost an address to another claimant can start or stop being
        // endpoints too (`changed_pods` holds them).
        let mut moved: Vec<String> = staged_pods.to_vec();
        moved.extend(changed_pods.iter().cloned());
        moved.sort_unstable();
        moved.dedup();
        self.update_local(&moved);
        let live_changed = self.update_live(policies_changed, &moved);
        if policies_changed || live_changed {
            self.sync_policy_identities(&mut changes, &mut arrivals);
        }
        for identity in arrivals {
            self.arrive(identity, &mut changes);
        }
        (changes, changed_pods, live_changed)
    }

    /// Phase 3: every selector sees the whole identity change before any MapState does
    /// (transactional delivery), and the returned deltas say which classes it touched. The
    /// peers of entries that became live acquire their selectors only then, so they are computed
    /// against the updated store; and before the peers of entries gone or no longer live release
    /// theirs, so a selector both name is kept, not rebuilt.
    fn apply_to_selectors(
        &mut self,
        identities: &IdentityChanges,
        peers: &PeerChanges,
        live_moved: bool,
    ) -> HashMap<SelectorId, SelectorDelta> {
        let added: Vec<(IdentityId, &Identity)> = identities
            .added
            .iter()
            .filter_map(|id| self.store.get(*id).map(|i| (*id, i)))
            .collect();
        let removed: Vec<(IdentityId, &Identity)> =
            identities.removed.iter().map(|(id, i)| (*id, i)).collect();
        let mut deltas = self.cache.apply(&added, &removed);
        self.cache
            .refresh_worlds(&self.store, &identities.worlds_moved, &mut deltas);
        let (gained, lost) = if live_moved {
            self.live.transition()
        } else {
            Default::default()
        };
        let mut acquired_groups: Vec<(usize, SelectorId)> = Vec::new();
        for &i in &gained {
            for group in PeerGroup::of_entry(&self.entries[i].peers) {
                let id = self.cache.acquire(group, &self.store);
                if matches!(group, PeerGroup::Cidrs(_)) {
                    acquired_groups.push((i, id));
                }
            }
        }
        let lost_peers = lost.iter().map(|&i| &self.entries[i].peers[..]);
        let removed = peers.removed.iter().map(|p| &p[..]);
        for entry_peers in removed.chain(lost_peers) {
            for group in PeerGroup::of_entry(entry_peers) {
                if let Some(id) = self.cache.id_of(group) {
                    self.cache.release(id);
                }
            }
        }
        self.cache.trim();
        if live_moved {
            self.note_cidr_groups(acquired_groups);
        }
        deltas
    }

    /// Notes the selector of every live entry's CIDR group ([`Engine::cidr_groups`]): those
    /// noted before stay where their entries stay live (their positions were carried over the
    /// rebuilt entry list), and the groups just acquired join. Looking every live group up
    /// again hashed every live prefix at each policy change (issue 33).
    fn note_cidr_groups(&mut self, acquired: Vec<(usize, SelectorId)>) {
        let live = &self.live;
        self.cidr_groups.retain(|i, _| live.is_live(*i));
        self.cidr_groups.extend(acquired);
        #[cfg(debug_assertions)]
        {
            let looked_up: HashMap<usize, SelectorId> = (0..self.entries.len())
                .filter(|&i| self.live.is_live(i))
                .filter_map(|i| {
                    let group = PeerGroup::of_entry(&self.entries[i].peers)
                        .find(|g| matches!(g, PeerGroup::Cidrs(_)))?;
                    Some((i, self.cache.id_of(group)?))
                })
                .collect();
            assert_eq!(self.cidr_groups, looked_up, "noted CIDR groups");
        }
    }

    /// Part of phase 2: only the staged pods, and those whose addresses another claimant took
    /// or gave back, can have become local endpoints or stopped being ones.
    fn update_local(&mut self, pods: &[String]) {
        for key in pods {
            if self.is_local_pod(key) {
                self.local.insert(key.clone());
            } else {
                self.local.remove(key);
            }
        }
    }

    /// Phase 4: drops the endpoints that are no longer local, reporting every entry removed. This
    /// goes before the remaining endpoints are updated: an address a dropped endpoint held may
    /// now belong to one of them, whose claim must be the one that stays.
    fn remove_gone_endpoints(&mut self) -> Vec<EndpointChanges> {
        let gone: Vec<String> = self
            .endpoints
            .keys()
            .filter(|k| !self.local.contains(*k))
            .cloned()
            .collect();
        let mut out = Vec::new();
        for key in gone {
            let state = self.endpoints.remove(&key).expect("listed");
            let changes = state.map.removal();
            for address in &state.addresses {
                self.endpoint_addresses.remove(address);
            }
            out.push(EndpointChanges {
                endpoint: key,
                changes,
                removed: true,
                readdressed: false,
                unlisted: false,
            });
        }
        out
    }

    /// Phase 5: updates every local endpoint, returning the ones whose datapath rules may differ
    /// (where `report`). A policy change (which can shift every precedence), a changed pod or a
    /// new endpoint needs a full recompute; otherwise only the identity classes the selector
    /// deltas touch.
    fn update_endpoints(
        &mut self,
        policies_changed: bool,
        changed_pods: &HashSet<String>,
        deltas: &HashMap<SelectorId, SelectorDelta>,
        identities: IdentityChanges,
        report: Report,
    ) -> Vec<EndpointChanges> {
        let IdentityChanges {
            added,
            removed,
            readdressed,
            moved: _,
            worlds_moved,
            worlds_readdressed,
        } = identities;
        self.changed_identities = added
            .iter()
            .chain(removed.iter().map(|(id, _)| id))
            .chain(&readdressed)
            .copied()
            .collect();
        // Hosts whose identity came or went: a rule for a prefix holding them may now need, or no
        // longer need, rules of their own ahead of it.
        let hosts: Vec<IpNet> = added
            .iter()
            .filter_map(|id| self.store.get(*id))
            .chain(removed.iter().map(|(_, i)| i))
            .filter(|i| !i.is_world())
            .map(|i| i.prefix)
            .collect();
        let mut nested = self.store.worlds_holding_any(&hosts);
        // World prefixes that came, went or changed class: the prefixes holding them may now
        // catch other identities' addresses, and the classes they left or joined hold others.
        // A moved prefix's own identity now is a class that gained it: new (among `added`) or
        // readdressed. So only the prefixes strictly holding it are looked up, not 50,000
        // classes' members one by one.
        nested.extend(self.store.worlds_strictly_holding_any(&worlds_moved));
        nested.extend(worlds_readdressed);
        nested.extend(
            added
                .iter()
                .filter(|id| self.store.get(**id).is_some_and(Identity::is_world)),
        );
        nested.sort_unstable();
        nested.dedup();
        let removed: HashMap<IdentityId, Identity> = removed.into_iter().collect();
        let added_pods: Vec<IdentityId> = added
            .iter()
            .copied()
            .filter(|id| self.store.get(*id).is_some_and(|i| i.as_pod().is_some()))
            .collect();
        // Replicas on this node share a security identity and so a MapState: each distinct one
        // is computed once per commit and copied to its twins.
        let mut computed: HashMap<PodInfo, String> = HashMap::new();
        let local = self.local.clone();
        let full = |engine: &Engine, key: &String| {
            policies_changed || changed_pods.contains(key) || !engine.endpoints.contains_key(key)
        };
        // Twins updated class by class share one map before this commit: the first is brought
        // up to date and the others follow it (`leaders`: follower → first). The followers let
        // go of the map first, so that the first changes it in place instead of copying it
        // (a copy of thousands of classes per change, and then freeing the old one).
        let mut twins: HashMap<SharedId, Vec<&String>> = HashMap::new();
        for key in local.iter().filter(|key| !full(self, key)) {
            if let Some(id) = self.map_id(key) {
                twins.entry(id).or_default().push(key);
            }
        }
        let mut leaders: HashMap<String, String> = HashMap::new();
        for group in twins.values().filter(|group| group.len() > 1) {
            for follower in &group[1..] {
                leaders.insert((*follower).clone(), group[0].clone());
                self.let_go_of_map(follower);
            }
        }
        let mut led: HashMap<String, Vec<ClassChange>> = HashMap::new();
        let mut out = Vec::new();
        for key in local.iter().cloned() {
            let recomputed = full(self, &key);
            let changes = if recomputed {
                self.recompute_or_adopt(&key, &mut computed)
            } else if let Some(leader) = leaders.get(&key) {
                self.follow_twin(&key, leader);
                led.get(leader).cloned().unwrap_or_default()
            } else {
                let classes = self.affected_classes(&key, deltas, &added_pods, &removed);
                let changes = self.recompute_classes(&key, classes);
                led.insert(key.clone(), changes.clone());
                changes
            };
            let readdressed = self.names_any_world(&key, &nested);
            let mut change = EndpointChanges {
                endpoint: key,
                changes,
                removed: false,
                readdressed,
                unlisted: false,
            };
            if change.is_empty() {
                continue;
            }
            match report {
                Report::Changes => out.push(change),
                Report::Endpoints => {
                    change.unlisted = !change.changes.is_empty();
                    change.changes = Vec::new();
                    out.push(change);
                }
                Report::Classes => {
                    if recomputed {
                        change.unlisted = !change.changes.is_empty();
                        change.changes = Vec::new();
                    }
                    out.push(change);
                }
                Report::Nothing => {}
            }
        }
        out
    }
}
