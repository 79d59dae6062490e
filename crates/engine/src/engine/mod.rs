//! The incremental engine: policies, pods and nodes in; per-endpoint MapStates and their exact
//! changes out.
//!
//! Updates are staged and applied by [`Engine::commit`]. Identity changes reach every selector
//! before any MapState is touched (transactional delivery, CFP-23380), and then recompute only
//! the identity classes they affect. Policy changes re-resolve the local endpoints, because a
//! new priority can shift every precedence; they are rare next to pod churn.
//!
//! This module holds the engine's state and its public face. The commit lives in `commit`, as
//! the phases whose order makes delivery transactional; `identities` is the identity store's
//! side of it (addresses arriving, departing and re-keyed; cluster CIDRs), `world_classes` the
//! world identities' (prefixes pooled into classes), and `endpoints` the MapStates' side (full
//! and per-class recomputes, twins).

mod budget;
mod claims;
mod commit;
mod endpoints;
mod identities;
mod labels_in_use;
mod live;
mod partition;
mod what_if;
mod world_classes;
mod world_delta;
mod would_be;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use crate::audit::PolicyView;
use crate::entry::{Direction, PolicyEntry};
use crate::flow::AddressOracle;
use crate::identity::{Identity, IdentityId, IdentityStore, PodInfo};
use crate::labels::LabelInterner;
use crate::mapstate::{ClassChange, MapState, WildcardClass};
use crate::ports::Protocol;
use crate::precedence::Levels;
use crate::reference::Decision;
use crate::resolve::{EndpointPolicy, SubjectIndex};
use crate::selector::PeerGroup;
use crate::selector_cache::{SelectorCache, SelectorId};
use crate::shared::Shared;
use labels_in_use::LabelsInUse;
use live::LiveEntries;

pub use budget::{OverBudget, DEFAULT_MAX_ENTRIES};
pub use partition::{Partition, PodKey};

#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Pods on this node are the local endpoints. None makes every pod local (the scenario
    /// checker's cluster-wide view).
    pub local_node: Option<String>,
    /// Always admit ingress from a pod's own node, ahead of every policy, so kubelet health
    /// probes keep working.
    pub allow_node_probes: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            local_node: None,
            allow_node_probes: true,
        }
    }
}

/// The changes one commit made to one endpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointChanges {
    pub endpoint: String,
    pub changes: Vec<ClassChange>,
    /// The endpoint is gone (its pod was deleted or moved away).
    pub removed: bool,
    /// A pod or node identity came into being or went away inside a world prefix this
    /// endpoint's MapState names. The MapState may be unchanged, but a datapath that matches
    /// addresses must compile it again: the prefix's rules would also catch the new identity's
    /// addresses, which may need rules of their own ahead of them. (An address joining or leaving
    /// an existing identity changes no compiled rule, only the address sets rules name: see
    /// [`Engine::changed_identities`].)
    pub readdressed: bool,
    /// Its entries changed, and `changes` does not list them ([`Engine::commit_endpoints`]).
    pub unlisted: bool,
}

impl EndpointChanges {
    /// Whether the endpoint's datapath rules may differ.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && !self.unlisted && !self.removed && !self.readdressed
    }
}

#[derive(Debug)]
struct EndpointState {
    pod: PodInfo,
    addresses: Vec<IpAddr>,
    /// Shared between twins, as `wildcard` and `map` are: a twin following another after each
    /// change copied every rule and wildcard entry of the endpoint.
    policy: Arc<EndpointPolicy>,
    wildcard: Arc<HashMap<Direction, WildcardClass>>,
    /// Shared between twins (replicas on this node with one identity), copied on the first
    /// change of one of them: at 150,000 pods each replica's copy of its twin's map was a tenth
    /// of the agent's peak memory.
    map: Shared<MapState>,
    /// Set while the endpoint is isolated for exceeding the entry budget (`budget`).
    over_budget: Option<std::sync::Arc<OverBudget>>,
    /// The budget `map` was last held to (0: never): an unchanged map needs no new count.
    budget_checked: usize,
    /// An upper bound of the map's footprint as the budget counts it: counted when the map was
    /// last held to the budget, plus what every class change since added. Within the budget,
    /// a class change needs no count of every class (thousands at 150,000 pods).
    budget_used: usize,
}

#[derive(Debug, Default)]
struct Staged {
    policies: BTreeMap<String, Option<Vec<PolicyEntry>>>,
    pods: BTreeMap<String, identities::StagedClaim>,
    nodes: BTreeMap<String, identities::StagedClaim>,
}

impl Staged {
    fn is_empty(&self) -> bool {
        self.policies.is_empty() && self.pods.is_empty() && self.nodes.is_empty()
    }
}

#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    store: IdentityStore,
    /// How many entries each policy has, by key: its entries are in `entries`, one run per
    /// policy in key order (after the node probe allowance, if any). One copy, not two: a copy
    /// per policy as well as the flat list held every selector of 36,000 policies twice.
    policies: BTreeMap<String, usize>,
    entries: Vec<PolicyEntry>,
    /// The selector of each live entry's CIDR group, by position in `entries`, as of the last
    /// selector update that could change it. Every endpoint an entry selects resolves the
    /// entry's group, and looking a group up hashes every prefix of it: 50,000 for a CIDR-heavy
    /// entry, for each of its endpoints at each policy change (issue 33).
    cidr_groups: HashMap<usize, SelectorId>,
    subjects: SubjectIndex,
    levels: Levels,
    /// Each pod's identities as staged (one per address), by pod key. Shared with the caller
    /// that staged them ([`Engine::set_pod_shared`]): the agent's pod index holds the same copy.
    pods: BTreeMap<String, Arc<[Identity]>>,
    nodes: BTreeMap<String, Arc<[Identity]>>,
    /// Which pod or node owns each address, when several claim one (a reused pod address).
    claims: claims::ClaimBook,
    /// Whether a live entry's CIDR peer names the whole IPv4 (`[0]`) or IPv6 (`[1]`) address
    /// space: only then is it a cluster CIDR (see `Engine::cidrs_holding`), although the
    /// world identities always hold both.
    wholes_named: [bool; 2],
    /// What the policies staged last did that the world classes follow (taken by their sync).
    policy_delta: world_delta::PolicyDelta,
    /// The identities whose member addresses the last commit changed (new and removed ones
    /// included).
    changed_identities: BTreeSet<IdentityId>,
    /// The entries that select a local endpoint: only theirs hold selectors and name identities.
    live: LiveEntries,
    /// What live entries' peer selectors read of labels: identities keep only that.
    labels_in_use: LabelsInUse,
    /// What subject selectors read of labels: local pods that look alike through it are twins
    /// (one MapState between them).
    subject_labels: LabelsInUse,
    /// Trimmed label sets, one copy of each.
    trimmed_labels: LabelInterner,
    /// The local endpoint holding each address.
    endpoint_addresses: HashMap<IpAddr, String>,
    cache: SelectorCache,
    endpoints: BTreeMap<String, EndpointState>,
    /// Keys of the pods that are local endpoints, maintained as pods change.
    local: BTreeSet<String>,
    staged: Staged,
    /// MapState entries one endpoint may hold (`budget`).
    max_entries: usize,
    /// Where set, only these pods (by key) can be local endpoints ([`Engine::only_endpoints`]).
    only_endpoints: Option<BTreeSet<String>>,
    /// Which verdict the MapStates hold: enforced (audited entries left out) or would-be.
    view: PolicyView,
    /// Entries the view leaves out are kept (live, their peers selected, their prefixes
    /// identities) for [`Engine::would_be_map`], instead of being dropped as staged.
    keep_audited: bool,
}

impl Engine {
    pub fn new(config: EngineConfig) -> Self {
        let mut engine = Engine {
            config,
            store: IdentityStore::new(),
            policies: BTreeMap::new(),
            entries: Vec::new(),
            cidr_groups: HashMap::new(),
            subjects: SubjectIndex::default(),
            levels: Levels::default(),
            pods: BTreeMap::new(),
            nodes: BTreeMap::new(),
            claims: claims::ClaimBook::default(),
            wholes_named: [false; 2],
            policy_delta: Default::default(),
            changed_identities: BTreeSet::new(),
            labels_in_use: LabelsInUse::default(),
            live: LiveEntries::default(),
            subject_labels: LabelsInUse::default(),
            trimmed_labels: LabelInterner::default(),
            endpoint_addresses: HashMap::new(),
            cache: SelectorCache::new(),
            endpoints: BTreeMap::new(),
            local: BTreeSet::new(),
            staged: Staged::default(),
            max_entries: DEFAULT_MAX_ENTRIES,
            only_endpoints: None,
            view: PolicyView::default(),
            keep_audited: false,
        };
        engine.rebuild_entries(BTreeMap::new());
        engine.sync_world_identities(&mut identities::IdentityChanges::default());
        // The engine's own entries (the node-probe allowance) hold their selectors for life.
        for entry in &engine.entries {
            for group in PeerGroup::of_entry(&entry.peers) {
                engine.cache.acquire(group, &engine.store);
            }
        }
        engine.live.set_held(vec![true; engine.entries.len()]);
        engine
    }

    /// Makes only the pods named by `keys` local endpoints (those of them on the local node, if
    /// one is configured); every other pod is still an identity that policies select. A tool
    /// that decides per class of alike pods resolves one MapState per class this way instead of
    /// one per pod. Takes effect for the pods staged after it: call it before staging pods.
    pub fn only_endpoints(&mut self, keys: impl IntoIterator<Item = String>) {
        self.only_endpoints = Some(keys.into_iter().collect());
    }

    /// Makes the MapStates hold `view`'s verdict ([`crate::audit`]): the enforced one (the
    /// default: audited entries are left out) or the would-be one (every entry enforced). Takes
    /// effect for the policies staged after it: call it before staging policies.
    pub fn set_view(&mut self, view: PolicyView) {
        self.view = view;
    }

    pub fn view(&self) -> PolicyView {
        self.view
    }

    /// Keeps the entries the view leaves out (audited ones, in the enforced view) instead of
    /// dropping them as staged: MapStates still hold the view's verdict, and
    /// [`Engine::would_be_map`] computes an endpoint's would-be map on the same identities, so
    /// that a datapath can compile both onto one ipcache. Their selectors and prefixes are live
    /// like any entry's (a prefix only an audited entry names splits identities, which changes
    /// no enforced decision). Takes effect for the policies staged after it.
    pub fn keep_audited(&mut self) {
        self.keep_audited = true;
    }

    /// Stages a policy's entries under `key` (e.g. `NetworkPolicy/ns/name`), replacing any
    /// previous ones. Entries the engine's view leaves out (audited ones, in the enforced view)
    /// are dropped here: nothing later tells them apart.
    pub fn set_policy(&mut self, key: impl Into<String>, mut entries: Vec<PolicyEntry>) {
        let view = self.view;
        if !self.keep_audited {
            entries.retain(|e| view.admits(e));
        }
        self.staged.policies.insert(key.into(), Some(entries));
    }

    pub fn remove_policy(&mut self, key: &str) {
        self.staged.policies.insert(key.to_owned(), None);
    }

    /// Stages a pod's identities (one per address, all with the same pod); an empty list removes
    /// the pod. Addresses join the shared identity of their label set (see [`IdentityStore`]).
    pub fn set_pod(&mut self, key: impl Into<String>, identities: Vec<Identity>) {
        self.set_pod_shared(key, identities.into());
    }

    /// [`Engine::set_pod`] with identities the caller keeps too: the engine holds the same
    /// allocation rather than a copy of its own.
    pub fn set_pod_shared(&mut self, key: impl Into<String>, identities: Arc<[Identity]>) {
        self.set_pod_created(key, identities, None);
    }

    /// [`Engine::set_pod_shared`] for a pod created at `created` (seconds since the epoch, from
    /// its `creationTimestamp`): when pods claim the same address (a CNI reuses a freed address
    /// before the old pod's delete arrives), the newest owns it, whatever order their events
    /// arrive in; among equal or unknown creation times, the claim that arrived last.
    pub fn set_pod_created(
        &mut self,
        key: impl Into<String>,
        identities: Arc<[Identity]>,
        created: Option<i64>,
    ) {
        self.staged.pods.insert(key.into(), (identities, created));
    }

    /// Stages a node's identities; an empty list removes the node.
    pub fn set_node(&mut self, name: impl Into<String>, identities: Vec<Identity>) {
        self.set_node_created(name, identities, None);
    }

    /// [`Engine::set_node`] for a node created at `created` (see [`Engine::set_pod_created`]).
    pub fn set_node_created(
        &mut self,
        name: impl Into<String>,
        identities: Vec<Identity>,
        created: Option<i64>,
    ) {
        self.staged
            .nodes
            .insert(name.into(), (identities.into(), created));
    }

    /// The identities whose member addresses the last [`Engine::commit`] changed: new and
    /// removed identities, and those an address joined or left. Datapaths that keep address
    /// sets per identity update exactly these.
    pub fn changed_identities(&self) -> &BTreeSet<IdentityId> {
        &self.changed_identities
    }

    pub fn identities(&self) -> &IdentityStore {
        &self.store
    }

    pub fn entries(&self) -> &[PolicyEntry] {
        &self.entries
    }

    pub fn selector_count(&self) -> usize {
        self.cache.len()
    }

    pub fn endpoints(&self) -> impl Iterator<Item = (&str, &MapState)> {
        self.endpoints.iter().map(|(k, e)| (k.as_str(), &*e.map))
    }

    /// The endpoint's MapState as shared: twins (replicas on this node with one identity) hold
    /// the same value, so equal ids mean equal maps without comparing them.
    pub fn endpoint_shared(&self, key: &str) -> Option<&Shared<MapState>> {
        self.endpoints.get(key).map(|e| &e.map)
    }

    pub fn endpoint(&self, key: &str) -> Option<&MapState> {
        self.endpoints.get(key).map(|e| &*e.map)
    }

    /// The local endpoint's pod and addresses.
    pub fn endpoint_pod(&self, key: &str) -> Option<(&PodInfo, &[IpAddr])> {
        self.endpoints
            .get(key)
            .map(|e| (&e.pod, e.addresses.as_slice()))
    }

    /// The local endpoint holding an address.
    pub fn endpoint_at(&self, address: IpAddr) -> Option<&str> {
        self.endpoint_addresses.get(&address).map(String::as_str)
    }

    /// A store of one identity per address (every pod and node address, every world prefix), the
    /// numbering the reference evaluator and scenarios use.
    pub fn per_address_store(&self) -> IdentityStore {
        let mut store = IdentityStore::new();
        for (prefix, _) in self.store.world_prefixes() {
            store.insert(Identity::world(prefix));
        }
        // Only an address's owner: a pod still listing an address a newer one was given holds
        // it no longer.
        for identity in self.owned_identities() {
            store.insert(identity.clone());
        }
        store
    }

    /// Every pod as staged: its key and one identity per address.
    pub fn pods(&self) -> impl Iterator<Item = (&str, &[Identity])> {
        self.pods.iter().map(|(k, v)| (k.as_str(), &v[..]))
    }

    /// Every node as staged: its name and one identity per address.
    pub fn nodes(&self) -> impl Iterator<Item = (&str, &[Identity])> {
        self.nodes.iter().map(|(k, v)| (k.as_str(), &v[..]))
    }

    pub fn has_staged_changes(&self) -> bool {
        !self.staged.is_empty()
    }

    /// Recomputes every local endpoint from scratch, returning what differs. The incremental
    /// path must always agree with it.
    pub fn recompute_all(&mut self) -> Vec<EndpointChanges> {
        let keys: Vec<String> = self.endpoints.keys().cloned().collect();
        keys.into_iter()
            .filter_map(|key| {
                let changes = self.recompute_endpoint(&key);
                (!changes.is_empty()).then_some(EndpointChanges {
                    endpoint: key,
                    changes,
                    removed: false,
                    readdressed: false,
                    unlisted: false,
                })
            })
            .collect()
    }

    /// The entries of each policy, moved out of the flat list (which is left empty).
    fn take_policy_entries(&mut self) -> BTreeMap<String, Vec<PolicyEntry>> {
        let mut entries = std::mem::take(&mut self.entries).into_iter();
        if self.config.allow_node_probes {
            entries.next();
        }
        self.policies
            .iter()
            .map(|(key, count)| (key.clone(), entries.by_ref().take(*count).collect()))
            .collect()
    }

    /// Rebuilds the entry list from each policy's entries, and what is derived from it
    /// (precedence levels, subject index) at once, since a new policy can shift every
    /// precedence.
    fn rebuild_entries(&mut self, policies: BTreeMap<String, Vec<PolicyEntry>>) {
        let mut entries: Vec<PolicyEntry> = Vec::new();
        if self.config.allow_node_probes {
            entries.push(PolicyEntry::node_probe_allowance());
        }
        self.policies = policies
            .into_iter()
            .map(|(key, policy)| {
                let count = policy.len();
                entries.extend(policy);
                (key, count)
            })
            .collect();
        self.levels = Levels::new(entries.iter().map(PolicyEntry::order_key));
        self.subjects = SubjectIndex::new(&entries);
        self.subject_labels = LabelsInUse::of_subjects(&entries);
        self.entries = entries;
    }
}

impl AddressOracle for Engine {
    fn decide_address(
        &self,
        endpoint: IpAddr,
        direction: Direction,
        remote: IpAddr,
        protocol: Protocol,
        port: u16,
    ) -> Decision {
        // A pod reaching its own address: no policy applies (see `reference`). The MapState
        // cannot say so, its keys being identities twin pods share.
        let own = self.endpoint_at(endpoint);
        if own.is_some() && own == self.endpoint_at(remote) {
            return Decision::own_address();
        }
        let map = self
            .endpoint_at(endpoint)
            .and_then(|key| self.endpoints.get(key))
            .map(|state| &*state.map);
        let value = match (map, self.store.resolve(remote)) {
            (Some(map), Some(remote)) => map.lookup(direction, remote, protocol, port),
            // No rules for the endpoint (not a local pod): nothing isolates it.
            _ => MapState::default().lookup(direction, IdentityId(u32::MAX), protocol, port),
        };
        Decision {
            verdict: value.verdict,
            auth: value.auth,
            reason: (*value.reason).clone(),
        }
    }
}
