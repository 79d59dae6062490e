//! The identity store's side of a commit: pods' and nodes' addresses departing and arriving,
//! world prefixes and cluster CIDRs following the policies, and addresses re-keyed when the
//! cluster CIDRs holding them change.
//!
//! Nothing here touches a selector or a MapState: it only records, in [`IdentityChanges`], what
//! the selectors and endpoints must hear about afterwards.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use super::keys_in_use::KeysInUse;
use super::Engine;
use crate::identity::{Identity, IdentityId};
use crate::selector::Peer;

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
}

impl Engine {
    /// Replaces the identities of the staged pods. Addresses they no longer have leave the store
    /// now; new ones are queued in `arrivals`, to enter only after every departure of the commit.
    /// Returns the keys of the pods whose identities changed: if local, they need a full
    /// recompute, since their own labels, node or ports may be what changed.
    pub(super) fn replace_pods(
        &mut self,
        staged: BTreeMap<String, Arc<[Identity]>>,
        changes: &mut IdentityChanges,
        arrivals: &mut Vec<Identity>,
    ) -> HashSet<String> {
        let mut changed_pods = HashSet::new();
        for (key, identities) in staged {
            let old = self.pods.remove(&key).unwrap_or_default();
            if old != identities {
                changed_pods.insert(key.clone());
            }
            self.leave(&old, &identities, changes);
            arrivals.extend(identities.iter().filter(|i| !old.contains(i)).cloned());
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
        staged: BTreeMap<String, Arc<[Identity]>>,
        changes: &mut IdentityChanges,
        arrivals: &mut Vec<Identity>,
    ) {
        for (name, identities) in staged {
            let old = self.nodes.remove(&name).unwrap_or_default();
            self.leave(&old, &identities, changes);
            arrivals.extend(identities.iter().filter(|i| !old.contains(i)).cloned());
            if !identities.is_empty() {
                self.nodes.insert(name, identities);
            }
        }
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
        let (added, removed) = self.sync_world_identities();
        changes.added.extend(added);
        changes.removed.extend(removed);
        let keys = KeysInUse::of(self.live_entries());
        let keys_changed = keys != self.keys_in_use;
        self.keys_in_use = keys;
        if self.sync_cluster_cidrs() || keys_changed {
            self.rekey_addresses(changes, arrivals, keys_changed);
        }
    }

    /// World identities: 0.0.0.0/0, ::/0 and every prefix a peer of a live entry names (see
    /// `live`: a prefix only entries selecting no local pod name decides nothing here).
    pub(super) fn sync_world_identities(
        &mut self,
    ) -> (Vec<IdentityId>, Vec<(IdentityId, Identity)>) {
        let mut wanted: BTreeSet<IpNet> = ["0.0.0.0/0", "::/0"]
            .iter()
            .map(|s| s.parse().expect("valid"))
            .collect();
        wanted.extend(
            self.live_entries()
                .flat_map(|e| &e.peers)
                .flat_map(Peer::prefixes),
        );
        let mut added = Vec::new();
        let mut removed = Vec::new();
        let stale: Vec<IpNet> = self
            .world
            .keys()
            .filter(|p| !wanted.contains(p))
            .copied()
            .collect();
        for prefix in stale {
            let id = self.world.remove(&prefix).expect("listed");
            if let Some(identity) = self.store.remove(id) {
                removed.push((id, identity));
            }
        }
        for prefix in wanted {
            if !self.world.contains_key(&prefix) {
                let (id, _) = self.store.insert(Identity::world(prefix));
                self.world.insert(prefix, id);
                added.push(id);
            }
        }
        (added, removed)
    }

    /// Every prefix a CIDR peer of a live entry names, of either scope; returns whether they
    /// changed.
    ///
    /// Addresses are grouped into one identity only when these prefixes hold them alike. For
    /// peers that select pods and nodes (`ipBlock`, `networks`) that keeps selection exact. For
    /// peers that only match outside addresses (Cilium's `toCIDR`) it keeps every datapath rule
    /// exact: a datapath matches addresses, not identities, so a rule for such a prefix also
    /// catches the pod addresses inside it, and the compiler decides per identity which need
    /// rules of their own ahead of it (`netpol_datapath`'s nesting). That decision holds for every
    /// member only if all of them lie inside the same prefixes.
    fn sync_cluster_cidrs(&mut self) -> bool {
        let wanted: BTreeSet<IpNet> = self
            .live_entries()
            .flat_map(|e| &e.peers)
            .filter(|p| matches!(p, Peer::Cidr(_)))
            .flat_map(Peer::prefixes)
            .filter(|net| net.prefix_len() > 0)
            .collect();
        let changed = wanted != self.cluster_cidrs;
        self.cluster_cidrs = wanted;
        changed
    }

    /// The cluster CIDRs holding an address, part of its identity.
    fn cidrs_holding(&self, address: IpAddr) -> Vec<IpNet> {
        self.cluster_cidrs
            .iter()
            .filter(|net| net.contains(&address))
            .copied()
            .collect()
    }

    /// Moves every pod and node address whose set of cluster CIDRs changed to its new identity;
    /// every address, when the label keys selectors read changed (`all`).
    fn rekey_addresses(
        &mut self,
        changes: &mut IdentityChanges,
        arrivals: &mut Vec<Identity>,
        all: bool,
    ) {
        // Arrivals are not in the store yet: they get their CIDRs when they arrive.
        let staying: Vec<(IdentityId, Identity)> = self
            .pods
            .values()
            .chain(self.nodes.values())
            .flat_map(|i| i.iter())
            .filter_map(|i| Some((self.store.host(i.prefix.addr())?, i.clone())))
            .collect();
        for (id, identity) in staying {
            let address = identity.prefix.addr();
            if all || self.store.cidrs_of(id) != self.cidrs_holding(address).as_slice() {
                self.depart(address, changes);
                arrivals.push(identity);
            }
        }
    }

    /// Takes the addresses of `old` identities that `new` does not keep out of the store.
    fn leave(&mut self, old: &[Identity], new: &[Identity], changes: &mut IdentityChanges) {
        for identity in old.iter().filter(|i| !new.contains(i)) {
            self.depart(identity.prefix.addr(), changes);
        }
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
        let identity = self.keys_in_use.trim(identity, &mut self.trimmed_labels);
        let (id, new) = self.store.insert_shared(identity, cidrs);
        if new {
            changes.added.push(id);
        } else {
            changes.readdressed.insert(id);
        }
        changes.moved.push(address);
    }
}
