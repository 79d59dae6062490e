//! The identity store's side of a commit: pods' and nodes' addresses departing and arriving,
//! cluster CIDRs following the policies (world prefixes too, in `world_classes`), and addresses
//! re-keyed when the cluster CIDRs holding them change.
//!
//! Nothing here touches a selector or a MapState: it only records, in [`IdentityChanges`], what
//! the selectors and endpoints must hear about afterwards.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use super::claims::Claimant;
use super::labels_in_use::{ChangedKeys, LabelsInUse};
use super::Engine;
use crate::identity::{Identity, IdentityId};

/// What one commit did to the identity store.
#[derive(Debug, Default)]
pub(super) struct IdentityChanges {
    /// Identities that came into being.
    pub(super) added: Vec<IdentityId>,
    /// Identities whose last address went.
    pub(super) removed: Vec<(IdentityId, Identity)>,
    /// Identities that live on with other addresses.
    pub(super) readdressed: HashSet<IdentityId>,
    /// Every pod or node address that arrived or departed.
    pub(super) moved: Vec<IpAddr>,
    /// World prefixes that came, went or moved to another class: the CIDR selectors holding
    /// them select classes anew ([`crate::selector_cache::SelectorCache::refresh_worlds`]).
    pub(super) worlds_moved: Vec<IpNet>,
    /// World identities that live on with other prefixes.
    pub(super) worlds_readdressed: Vec<IdentityId>,
}

/// A staged pod's or node's identities (one per address; none: the object is gone) and its
/// creation time in seconds, which orders its claims on addresses (see [`super::claims`]).
pub(super) type StagedClaim = (Arc<[Identity]>, Option<i64>);

/// The addresses a commit's claims touched, each with its owner and the owner's identity before
/// the commit (`None`: no one held it), in the order they were first touched: identities are
/// numbered in the order their addresses arrive, which must not depend on a hash.
#[derive(Debug, Default)]
pub(super) struct Touched {
    order: Vec<IpAddr>,
    /// Boxed: an owner and its identity are about 180 bytes, and a table slot of each address
    /// an initial sync touches (150,000 at 150,000 pods, almost all with no owner before) held
    /// that much inline, 50 MB of the sync's peak.
    before: HashMap<IpAddr, Option<Box<(Claimant, Identity)>>>,
}

impl Engine {
    /// Replaces the identities of the staged pods and records their claims on addresses; the
    /// store follows in [`Engine::settle_addresses`]. Returns the keys of the pods whose
    /// identities changed: if local, they need a full recompute, since their own labels, node or
    /// ports may be what changed.
    pub(super) fn replace_pods(
        &mut self,
        staged: BTreeMap<String, StagedClaim>,
        touched: &mut Touched,
    ) -> HashSet<String> {
        let mut changed_pods = HashSet::new();
        for (key, (identities, created)) in staged {
            let claimant = Claimant::Pod(key.as_str().into());
            let old = self.pods.get(&key).cloned().unwrap_or_default();
            if old != identities {
                changed_pods.insert(key.clone());
            }
            self.reclaim(&claimant, &old, &identities, created, touched);
            self.pods.remove(&key);
            if !identities.is_empty() {
                self.pods.insert(key, identities);
            }
        }
        changed_pods
    }

    /// Replaces the identities of the staged nodes, like [`Engine::replace_pods`]. Nodes are not
    /// endpoints, so no node needs a full recompute.
    pub(super) fn replace_nodes(
        &mut self,
        staged: BTreeMap<String, StagedClaim>,
        touched: &mut Touched,
    ) {
        for (name, (identities, created)) in staged {
            let claimant = Claimant::Node(name.as_str().into());
            let old = self.nodes.get(&name).cloned().unwrap_or_default();
            self.reclaim(&claimant, &old, &identities, created, touched);
            self.nodes.remove(&name);
            if !identities.is_empty() {
                self.nodes.insert(name, identities);
            }
        }
    }

    /// Moves `claimant`'s claims from the addresses of `old` to those of `new`, noting in
    /// `touched` what held each address before the commit touched it. The claimant keeps the
    /// rank it first claimed with, so an update of an older pod does not make it the newest;
    /// unless its creation time changed: then it is another object under the same name (a
    /// StatefulSet pod made again), claiming anew.
    fn reclaim(
        &mut self,
        claimant: &Claimant,
        old: &[Identity],
        new: &[Identity],
        created: Option<i64>,
        touched: &mut Touched,
    ) {
        let addresses = old.iter().chain(new).map(|i| i.prefix.addr());
        for address in addresses {
            if let std::collections::hash_map::Entry::Vacant(entry) = touched.before.entry(address)
            {
                entry.insert(self.owner(address).map(Box::new));
                touched.order.push(address);
            }
        }
        let kept = old
            .iter()
            .find_map(|i| self.claims.rank_of(i.prefix.addr(), claimant))
            .filter(|rank| rank.created() == created);
        for identity in old {
            self.claims.release(identity.prefix.addr(), claimant);
        }
        if new.is_empty() {
            return;
        }
        let rank = kept.unwrap_or_else(|| self.claims.new_rank(created));
        for identity in new {
            self.claims
                .claim(identity.prefix.addr(), claimant.clone(), rank);
        }
    }

    /// The object that owns `address`, with its identity as staged.
    pub(super) fn owner(&self, address: IpAddr) -> Option<(Claimant, Identity)> {
        let owner = self.claims.owner(address)?;
        let identity = self.claimed_identity(owner, address)?;
        Some((owner.clone(), identity.clone()))
    }

    /// The identity at each address of its owner, pods' then nodes', by key: identities are
    /// numbered in the order addresses arrive, which must not depend on a hash.
    pub(super) fn owned_identities(&self) -> impl Iterator<Item = &Identity> {
        let pods = self
            .pods
            .iter()
            .map(|(k, i)| (Claimant::Pod(k.as_str().into()), i));
        let nodes = self
            .nodes
            .iter()
            .map(|(k, i)| (Claimant::Node(k.as_str().into()), i));
        pods.chain(nodes).flat_map(move |(claimant, identities)| {
            identities
                .iter()
                .filter(move |i| self.claims.owner(i.prefix.addr()) == Some(&claimant))
        })
    }

    /// `claimant`'s identity at `address`, as staged.
    pub(super) fn claimed_identity(
        &self,
        claimant: &Claimant,
        address: IpAddr,
    ) -> Option<&Identity> {
        let identities = match claimant {
            Claimant::Pod(key) => self.pods.get(&**key)?,
            Claimant::Node(name) => self.nodes.get(&**name)?,
        };
        identities.iter().find(|i| i.prefix.addr() == address)
    }

    /// Whether the pod `key` owns `address`.
    pub(super) fn pod_owns(&self, key: &str, address: IpAddr) -> bool {
        self.claims
            .owner(address)
            .and_then(Claimant::pod_key)
            .is_some_and(|owner| owner == key)
    }

    /// Brings the store up to date with the touched addresses' owners: an address whose owning
    /// identity changed leaves the store now and its new owner's identity joins `arrivals`, to
    /// enter only after every departure of the commit. Returns the pods that gained or lost an
    /// address to another claimant: their endpoints change although their own objects did not.
    pub(super) fn settle_addresses(
        &mut self,
        touched: Touched,
        changes: &mut IdentityChanges,
        arrivals: &mut Vec<Identity>,
    ) -> HashSet<String> {
        let mut owners_changed = HashSet::new();
        let Touched { order, mut before } = touched;
        for address in order {
            let before = before.remove(&address).flatten().map(|owner| *owner);
            let after = self.owner(address);
            let identity =
                |owner: &Option<(Claimant, Identity)>| owner.as_ref().map(|o| o.1.clone());
            if identity(&before) == identity(&after) {
                continue;
            }
            let claimant =
                |owner: &Option<(Claimant, Identity)>| owner.as_ref().map(|o| o.0.clone());
            if claimant(&before) != claimant(&after) {
                let pods = [&before, &after].into_iter().flatten();
                owners_changed.extend(pods.filter_map(|(c, _)| c.pod_key().map(str::to_owned)));
            }
            if before.is_some() {
                self.depart(address, changes);
            }
            if let Some((_, identity)) = after {
                arrivals.push(identity);
            }
        }
        owners_changed
    }

    /// Brings the identities that follow the policies' peers up to date: world prefixes, and the
    /// cluster CIDRs that split addresses between identities. Only a policy change, or an entry
    /// becoming live or dead as local pods come and go, can move them.
    /// Re-keyed addresses depart now and join `arrivals`, so they arrive with their new CIDRs.
    pub(super) fn sync_policy_identities(
        &mut self,
        changes: &mut IdentityChanges,
        arrivals: &mut Vec<Identity>,
    ) {
        let cidrs_changed = self.sync_world_identities(changes);
        let used = LabelsInUse::of(self.live_entries());
        let changed_keys = used.changed_keys(&self.labels_in_use);
        self.labels_in_use = used;
        if cidrs_changed || !changed_keys.is_empty() {
            self.rekey_addresses(changes, arrivals, cidrs_changed, &changed_keys);
        }
    }

    /// The cluster CIDRs holding an address, part of its identity, shortest first (which is
    /// their order).
    ///
    /// The cluster CIDRs are every prefix a CIDR peer of a live entry names, of either scope:
    /// the world prefixes, which the world sync keeps to exactly those, less a whole address
    /// space no live peer names (the world keeps both for the addresses nothing else holds).
    /// They are read from the world map, not kept beside it: a copy cost about 30 bytes a live
    /// prefix and a pass over every live prefix at each policy change (issue 33).
    ///
    /// Addresses are grouped into one identity only when these prefixes hold them alike. A `/0`
    /// counts like any other: `0.0.0.0/0` holds every IPv4 address and no IPv6 one, so leaving it
    /// out put a dual-stack pod's two addresses in one identity, and a peer `0.0.0.0/0` selected
    /// the pod's IPv6 address along with its IPv4 one (fuzz finding, tests/integration/fuzz_regressions.rs). For
    /// peers that select pods and nodes (`ipBlock`, `networks`) that keeps selection exact. For
    /// peers that only match outside addresses (Cilium's `toCIDR`) it keeps every datapath rule
    /// exact: a datapath matches addresses, not identities, so a rule for such a prefix also
    /// catches the pod addresses inside it, and the compiler decides per identity which need
    /// rules of their own ahead of it (`netpol_datapath`'s nesting). That decision holds for every
    /// member only if all of them lie inside the same prefixes.
    fn cidrs_holding(&self, address: IpAddr) -> Vec<IpNet> {
        let host = IpNet::from(address);
        let whole_named = self.wholes_named[usize::from(address.is_ipv6())];
        self.store
            .world_prefixes_holding(&host)
            .map(|(net, _)| net)
            .filter(|net| net.prefix_len() > 0 || whole_named)
            .collect()
    }

    /// Moves every pod and node address whose set of cluster CIDRs changed (`cidrs_changed`:
    /// they may have), or that carries a label key whose use changed (`changed_keys`), to its
    /// new identity. An address whose identity comes out the same stays: a selector naming two
    /// StatefulSet pods by `pod-name` re-keys those two, not every pod carrying the key.
    fn rekey_addresses(
        &mut self,
        changes: &mut IdentityChanges,
        arrivals: &mut Vec<Identity>,
        cidrs_changed: bool,
        changed_keys: &ChangedKeys,
    ) {
        // Arrivals are not in the store yet: they get their CIDRs when they arrive. Only an
        // address's owner is in the store.
        let candidates: Vec<(IdentityId, Identity, bool)> = self
            .owned_identities()
            .filter_map(|identity| {
                let address = identity.prefix.addr();
                let id = self.store.host(address)?;
                // Which prefixes hold an address is asked only when the prefixes changed: it
                // tests every one of them.
                let cidrs_moved = cidrs_changed
                    && self.store.cidrs_of(id) != self.cidrs_holding(address).as_slice();
                (cidrs_moved || changed_keys.touch(identity))
                    .then(|| (id, identity.clone(), cidrs_moved))
            })
            .collect();
        for (id, identity, cidrs_moved) in candidates {
            if cidrs_moved || self.seen_otherwise(id, &identity) {
                self.depart(identity.prefix.addr(), changes);
                arrivals.push(identity);
            }
        }
    }

    /// Whether the selectors in use now see `identity` otherwise than the stored identity `id`
    /// it entered the store as.
    fn seen_otherwise(&self, id: IdentityId, identity: &Identity) -> bool {
        self.store
            .get(id)
            .is_none_or(|stored| !self.labels_in_use.sees_alike(identity, stored))
    }

    fn depart(&mut self, address: IpAddr, changes: &mut IdentityChanges) {
        match self.store.remove_address(address) {
            Some((id, Some(identity))) => changes.removed.push((id, identity)),
            Some((id, None)) => {
                changes.readdressed.insert(id);
            }
            None => return,
        }
        changes.moved.push(address);
    }

    pub(super) fn arrive(&mut self, identity: Identity, changes: &mut IdentityChanges) {
        let address = identity.prefix.addr();
        let cidrs = self.cidrs_holding(address);
        let identity = self.labels_in_use.trim(identity, &mut self.trimmed_labels);
        let (id, new) = self.store.insert_shared(identity, cidrs);
        if new {
            changes.added.push(id);
        } else {
            changes.readdressed.insert(id);
        }
        changes.moved.push(address);
    }
}
