//! The nftables model of netpol's table: one ingress and one egress chain per endpoint, built
//! from the compiler's ordered rules.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use netpol_datapath::sets::{ResolvedSets, SetAddresses};
use netpol_datapath::{Family, OrderedRule, RemoteSet, RuleAction};
use netpol_engine::reference::Reason;
use netpol_engine::{IdentityId, IdentityStore};

use crate::naming::hash;
use netpol_engine::{Direction, Protocol};

/// What a matching chain rule does. Allow is `return` (to the dispatch chain, which then consults the
/// other side of the flow), block is `drop`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChainVerdict {
    Return,
    Drop,
}

/// A named set of remote addresses: what one [`RemoteSet`] (identities, one family) holds now.
/// Its name is stable for the identities, not for their addresses: when a replica comes or goes
/// only the set's elements change, never the chains that reference it (`@name`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AddressSet {
    /// `a4_<hash>` or `a6_<hash>` (`i` after the family for an interval set).
    pub name: String,
    pub v6: bool,
    /// Whether the set holds prefixes (`flags interval`): a world identity names it.
    pub interval: bool,
    /// Disjoint prefixes, sorted (host prefixes for single addresses); may be empty.
    pub nets: Arc<Vec<IpNet>>,
}

impl AddressSet {
    /// The set of `set`, its addresses resolved through `store`.
    pub fn resolve(set: &RemoteSet, store: &IdentityStore) -> AddressSet {
        let digest = identities_digest(set, |id| identity_digest(id, store));
        Self::named(set, &SetAddresses::resolve(set, store), &digest)
    }

    /// The set of `set` holding `addresses`, given the digest of the set's identities.
    fn named(set: &RemoteSet, addresses: &SetAddresses, digest: &str) -> AddressSet {
        let v6 = set.family == Family::V6;
        let nets = addresses.shared();
        // Only a world identity's member is a prefix rather than a host.
        let interval = addresses.names_world();
        let name = format!(
            "a{}{}_{}",
            if v6 { 6 } else { 4 },
            if interval { "i" } else { "" },
            digest
        );
        AddressSet {
            name,
            v6,
            interval,
            nets,
        }
    }
}

/// The part of a set's name that stands for its identities: a hash of their contents, not of
/// their ids, since a restarted agent numbers identities in another order and must find the
/// same sets (and chains) in place. An identity's content never changes under its id (ids are
/// never reused), so the digest of a set of known identities never changes either. The
/// identities' parts are summed, not sorted and hashed in order: a set of thousands of
/// identities costs one addition each (sorting their digests was a sixth of a pod of a new
/// label set at 150,000 pods).
fn identities_digest(set: &RemoteSet, digest: impl FnMut(IdentityId) -> u128) -> String {
    let sum = set
        .identities
        .iter()
        .copied()
        .map(digest)
        .fold(0u128, u128::wrapping_add);
    hash([format!("{sum:032x}").as_str()])
}

/// One identity's part of a set's name: 128 bits of a SHA-256 of its content digest (of its id
/// while the store does not know it).
fn identity_digest(id: IdentityId, store: &IdentityStore) -> u128 {
    use sha2::{Digest, Sha256};
    let content = store
        .content_digest(id)
        .map_or_else(|| format!("#{}", id.0), |d| format!("{d:016x}"));
    let digest = Sha256::digest(content.as_bytes());
    u128::from_le_bytes(digest[..16].try_into().expect("SHA-256 has 32 bytes"))
}

/// Resolved address sets, kept across calls: a set changes only when one of its identities
/// changed addresses ([`SetCache::update`]), and then by the addresses that came and went
/// ([`ResolvedSets`]), so a replica costs one address in each set naming its identity, not
/// resolving every set of every endpoint again.
#[derive(Debug, Default)]
pub struct SetCache {
    /// The model of each set in use, built from `resolved`; the flag: used since the last sweep.
    sets: HashMap<RemoteSet, (Arc<AddressSet>, bool)>,
    resolved: ResolvedSets,
    /// The identities' digest of each set in use ([`identities_digest`]), kept when its
    /// addresses change: hashing every identity of a set of thousands again for each replica
    /// cost more than resolving its addresses.
    digests: HashMap<RemoteSet, (String, bool)>,
    /// Each known identity's part of those digests ([`identity_digest`]), which never changes
    /// under its id: a pod of a new label set makes new sets of thousands of identities, and
    /// hashing each identity's labels again for each was a sixth of its cost.
    identity_digests: HashMap<IdentityId, u128>,
}

impl SetCache {
    /// Brings the sets naming one of `changed` up to date with their members in `store`.
    pub fn update(&mut self, store: &IdentityStore, changed: &BTreeSet<IdentityId>) {
        if changed.is_empty() {
            return;
        }
        for (set, _) in self.resolved.update(store, changed) {
            // Built again from the patched addresses on its next use.
            self.sets.remove(&*set);
        }
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.sets.clear();
        self.resolved.clear();
        self.digests.clear();
        self.identity_digests.clear();
    }

    /// The address set of `set`, resolved if it is not known.
    pub fn resolve(&mut self, set: &RemoteSet, store: &IdentityStore) -> Arc<AddressSet> {
        if let Some((resolved, used)) = self.sets.get_mut(set) {
            *used = true;
            return resolved.clone();
        }
        // A digest is kept only when every identity was known, and an identity's content never
        // changes under its id, so a kept digest holds without looking at each identity again.
        let resolved = match self.digests.get_mut(set) {
            Some((digest, used)) => {
                *used = true;
                AddressSet::named(set, self.resolved.get(set, store), digest)
            }
            None => {
                // An identity unknown to the store is named by its id: not kept, so that the
                // name follows once the store knows it.
                let known = set.identities.iter().all(|id| store.get(*id).is_some());
                let cached = &mut self.identity_digests;
                let digest = identities_digest(set, |id| match cached.get(&id) {
                    Some(digest) => *digest,
                    None if store.get(id).is_some() => {
                        *cached.entry(id).or_insert(identity_digest(id, store))
                    }
                    None => identity_digest(id, store),
                });
                let resolved = AddressSet::named(set, self.resolved.get(set, store), &digest);
                if known {
                    self.digests.insert(set.clone(), (digest, true));
                }
                resolved
            }
        };
        let resolved = Arc::new(resolved);
        self.sets.insert(set.clone(), (resolved.clone(), true));
        resolved
    }

    /// Forgets the sets not resolved since the last sweep (and the digests of sets neither
    /// resolved nor held); identities gone from `store` are forgotten once they are as many as
    /// those it holds, so the sweep stays cheap.
    pub fn sweep(&mut self, store: &IdentityStore) {
        if self.identity_digests.len() > 2 * store.len() {
            self.identity_digests
                .retain(|id, _| store.get(*id).is_some());
        }
        self.sets.retain(|_, (_, used)| std::mem::take(used));
        let sets = &self.sets;
        self.resolved.retain(|set| sets.contains_key(set));
        self.digests
            .retain(|set, (_, used)| std::mem::take(used) || sets.contains_key(set));
    }
}

/// A remote-address match: the packet's source (ingress) or destination (egress) in a set.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RemoteMatch {
    /// True for `saddr` (the remote sends: ingress), false for `daddr` (egress).
    pub source: bool,
    pub set: Arc<AddressSet>,
}

impl RemoteMatch {
    pub fn is_v6(&self) -> bool {
        self.set.v6
    }
}

/// One rule of an endpoint chain; every present match must hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainRule {
    pub remote: Option<RemoteMatch>,
    pub protocol: Option<Protocol>,
    /// Destination port ranges; empty: every port.
    pub dports: Vec<(u16, u16)>,
    pub verdict: ChainVerdict,
    /// Why the rule exists (not rendered; explains a packet's fate).
    pub reason: Arc<Reason>,
}

/// One endpoint's chains.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointChains {
    pub addresses: Vec<IpAddr>,
    pub ingress: Vec<ChainRule>,
    pub egress: Vec<ChainRule>,
}

impl EndpointChains {
    /// The chains for `rules` (any order; they are sorted by priority, stable within one), their
    /// remote sets resolved through the ipcache `store`.
    pub fn new(addresses: Vec<IpAddr>, rules: &[OrderedRule], store: &IdentityStore) -> Self {
        Self::cached(addresses, rules, store, &mut SetCache::default())
    }

    /// [`EndpointChains::new`], with address sets resolved through `cache`.
    pub fn cached(
        addresses: Vec<IpAddr>,
        rules: &[OrderedRule],
        store: &IdentityStore,
        cache: &mut SetCache,
    ) -> Self {
        let mut sorted: Vec<&OrderedRule> = rules.iter().collect();
        sorted.sort_by_key(|r| r.priority);
        let mut chain = |direction: Direction| -> Vec<ChainRule> {
            sorted
                .iter()
                .filter(|r| r.direction == direction)
                .map(|r| chain_rule(r, store, cache))
                .collect()
        };
        EndpointChains {
            addresses,
            ingress: chain(Direction::Ingress),
            egress: chain(Direction::Egress),
        }
    }

    /// Whether `other` has the same addresses and the same chain rules, set contents aside: what
    /// the kernel's chains hold (a set is referenced by name), so two such endpoints differ
    /// only in set elements.
    pub fn same_chains(&self, other: &EndpointChains) -> bool {
        let same_rule = |a: &ChainRule, b: &ChainRule| {
            let remote = match (&a.remote, &b.remote) {
                (None, None) => true,
                (Some(x), Some(y)) => x.source == y.source && x.set.name == y.set.name,
                _ => false,
            };
            remote
                && a.protocol == b.protocol
                && a.dports == b.dports
                && a.verdict == b.verdict
                && a.reason == b.reason
        };
        let same = |a: &[ChainRule], b: &[ChainRule]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_rule(x, y))
        };
        self.addresses == other.addresses
            && same(&self.ingress, &other.ingress)
            && same(&self.egress, &other.egress)
    }

    /// How many rules both chains hold.
    pub fn rules(&self) -> usize {
        self.ingress.len() + self.egress.len()
    }

    pub fn chain(&self, direction: Direction) -> &[ChainRule] {
        match direction {
            Direction::Ingress => &self.ingress,
            Direction::Egress => &self.egress,
        }
    }
}

/// The chain rule of one ordered rule. A rule whose remote set holds no address now is kept: it
/// references an empty set, which matches nothing, and needs no chain change when a first
/// replica appears.
fn chain_rule(rule: &OrderedRule, store: &IdentityStore, cache: &mut SetCache) -> ChainRule {
    let verdict = match rule.action {
        RuleAction::Allow => ChainVerdict::Return,
        RuleAction::Block => ChainVerdict::Drop,
    };
    let dports = if rule.names_ports() && rule.protocol.is_some_and(Protocol::has_ports) {
        rule.ports.clone()
    } else {
        Vec::new()
    };
    let make = |remote| ChainRule {
        remote,
        protocol: rule.protocol,
        dports: dports.clone(),
        verdict,
        reason: rule.reason.clone(),
    };
    let Some(set) = &rule.remotes else {
        return make(None);
    };
    let source = rule.direction == Direction::Ingress;
    make(Some(RemoteMatch {
        source,
        set: cache.resolve(set, store),
    }))
}

/// netpol's whole table: every endpoint's chains, by endpoint key, and the endpoints whose
/// chains the kernel refused, isolated until they load.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ruleset {
    pub endpoints: BTreeMap<String, EndpointChains>,
    /// Endpoints whose chains could not be loaded, by key, with their addresses: every new flow
    /// from or to them is dropped (see [`Ruleset::isolate`]).
    pub isolated: BTreeMap<String, Vec<IpAddr>>,
}

/// Where an address leads in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holder<'a> {
    /// A programmed endpoint and its chains.
    Chains(&'a str, &'a EndpointChains),
    /// An isolated endpoint: new flows are dropped.
    Isolated(&'a str),
}

impl Ruleset {
    pub fn insert(&mut self, key: impl Into<String>, chains: EndpointChains) {
        self.endpoints.insert(key.into(), chains);
    }

    /// Replaces the chains of endpoint `key` by isolation: new flows from and to its addresses
    /// are dropped, connections already established continue. For an endpoint whose chains the
    /// kernel refused: failing closed for it alone keeps every other endpoint programmed, and
    /// never lets through what its policies would have denied.
    pub fn isolate(&mut self, key: &str) {
        if let Some(chains) = self.endpoints.remove(key) {
            self.isolated.insert(key.to_string(), chains.addresses);
        }
    }

    /// The endpoint holding `address`, if any.
    pub fn holder_of(&self, address: IpAddr) -> Option<Holder<'_>> {
        if let Some((key, chains)) = self
            .endpoints
            .iter()
            .find(|(_, e)| e.addresses.contains(&address))
        {
            return Some(Holder::Chains(key, chains));
        }
        self.isolated
            .iter()
            .find(|(_, addresses)| addresses.contains(&address))
            .map(|(key, _)| Holder::Isolated(key))
    }

    /// Every (address, endpoint key) the table dispatches on, isolated endpoints included.
    pub fn addresses(&self) -> impl Iterator<Item = (IpAddr, &str)> {
        let programmed = self
            .endpoints
            .iter()
            .flat_map(|(k, e)| e.addresses.iter().map(move |a| (*a, k.as_str())));
        let isolated = self
            .isolated
            .iter()
            .flat_map(|(k, addresses)| addresses.iter().map(move |a| (*a, k.as_str())));
        programmed.chain(isolated)
    }
}
