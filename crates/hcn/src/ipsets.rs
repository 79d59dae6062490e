//! HNS IP sets: a compiled rule's remote set ([`RemoteSet`]: identities of one family) as one
//! network `SetPolicy` of type `IPSET`, which the rule's ACL names by id in `RemoteAddresses`
//! (as Azure NPM's Windows dataplane does), instead of the set's addresses inlined in every ACL
//! of every endpoint.
//!
//! - **Content-keyed, stable names.** A set's id is [`NETPOL_SET_PREFIX`] plus a hash of its
//!   family and of what policies can see of each identity (a pod identity's namespace, labels,
//!   namespace labels, named ports and policy CIDRs; a node; a world prefix), never of its
//!   addresses or of the agent's identity numbers. So the id, and the ACL naming it, stay the
//!   same when a replica comes or goes and across agent restarts: a replica changes the set's
//!   `Values` only, and an agent restart rewrites no ACL. Sets without the prefix are never
//!   touched.
//! - **Empty sets are never named.** A rule whose set holds no address now renders to no ACL,
//!   as in inline mode (HCN reads an empty address list as every address; what it does with an
//!   empty set is not documented, so netpol never asks).
//! - **Order** ([`SetSync`]): sets are added and updated first, then endpoints' ACLs are
//!   programmed, then netpol's sets no ACL names any more are removed, and only once every
//!   endpoint is programmed (an endpoint that failed may still name an old set).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use ipnet::IpNet;
use netpol_datapath::{sets, DatapathError, Family, RemoteSet};
use netpol_engine::{IdentityId, IdentityStore};
use sha2::{Digest, Sha256};

use crate::api::HcnApi;
use crate::schema::{RequestType, SetPolicySetting, IPSET, NETPOL_SET_PREFIX};

/// The comma-separated `Values` of addresses, hosts without a prefix length.
pub fn render_values(addresses: &[IpNet]) -> String {
    use std::fmt::Write;
    // Written into one buffer: a set of 150,000 addresses is one allocation, not 150,000.
    let mut out = String::with_capacity(addresses.len() * 12);
    for (i, net) in addresses.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = if net.prefix_len() == net.max_prefix_len() {
            write!(out, "{}", net.addr())
        } else {
            write!(out, "{net}")
        };
    }
    out
}

/// An address as HCN lists it: a host without its prefix length, a network as a CIDR (as
/// [`render_values`] writes each).
#[cfg(test)]
pub(crate) fn render_address(net: &IpNet) -> String {
    if net.prefix_len() == net.max_prefix_len() {
        net.addr().to_string()
    } else {
        net.to_string()
    }
}

/// What policies can see of an identity: stable across agent restarts and replicas.
fn identity_key(id: IdentityId, store: &IdentityStore) -> Vec<u8> {
    let Some(identity) = store.get(id) else {
        return format!("unknown {id}").into_bytes();
    };
    let mut identity = identity.clone();
    // A shared pod identity (the engine's replicas of one label set) has its name cleared and
    // one member's address as its prefix: the address is not part of what it is.
    let shared_pod = identity.as_pod().is_some_and(|p| p.name.is_empty());
    if shared_pod {
        identity.prefix = IpNet::from(std::net::IpAddr::from([0u8, 0, 0, 0]));
    }
    let mut key = serde_json::to_vec(&identity).expect("identities serialize");
    key.extend(serde_json::to_vec(store.cidrs_of(id)).expect("prefixes serialize"));
    key
}

/// The set's id: [`NETPOL_SET_PREFIX`] and the first 64 bits of a SHA-256 of its family and its
/// identities' keys.
pub fn set_id(set: &RemoteSet, store: &IdentityStore) -> String {
    let keys: Vec<Vec<u8>> = set
        .identities
        .iter()
        .map(|id| identity_key(*id, store))
        .collect();
    id_of_keys(set.family, keys.iter().map(Vec::as_slice))
}

/// [`set_id`] from the identities' keys, in any order.
fn id_of_keys<'a>(family: Family, keys: impl Iterator<Item = &'a [u8]>) -> String {
    let mut keys: Vec<&[u8]> = keys.collect();
    keys.sort();
    let mut hasher = Sha256::new();
    hasher.update(match family {
        Family::V4 => b"4",
        Family::V6 => b"6",
        Family::Any => b"*",
    });
    for key in keys {
        hasher.update((key.len() as u64).to_le_bytes());
        hasher.update(key);
    }
    let digest = hasher.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{NETPOL_SET_PREFIX}{hex}")
}

/// Every remote set's HNS set, computed once and brought up to date as addresses change.
#[derive(Debug, Default)]
pub struct SetTable {
    by_set: HashMap<Arc<RemoteSet>, SetPolicySetting>,
    /// The remote sets holding each identity, so a change finds its sets without a scan. Shared,
    /// not copied: a set of k identities is listed under each of them, and k copies of it cost
    /// k² identity ids (a namespace-wide set of thousands took most of a new label set's time).
    by_identity: HashMap<IdentityId, Vec<Arc<RemoteSet>>>,
    /// The key ([`identity_key`]) of each identity of a known set: an identity's content never
    /// changes under its id, and serialising thousands of identities again for every new set
    /// that names them was most of what a pod of a new label set cost.
    keys: HashMap<IdentityId, Vec<u8>>,
}

impl SetTable {
    /// The HNS set of `set`, computed on first use.
    pub fn get(&mut self, set: &RemoteSet, store: &IdentityStore) -> &SetPolicySetting {
        if !self.by_set.contains_key(set) {
            // Unknown identities are keyed by their id: not kept, so the key follows once the
            // store knows them.
            for identity in &set.identities {
                if !self.keys.contains_key(identity) && store.get(*identity).is_some() {
                    self.keys.insert(*identity, identity_key(*identity, store));
                }
            }
            let keys = &self.keys;
            let unknown: Vec<Vec<u8>> = set
                .identities
                .iter()
                .filter(|id| !keys.contains_key(id))
                .map(|id| identity_key(*id, store))
                .collect();
            let known = set.identities.iter().filter_map(|id| keys.get(id));
            let id = id_of_keys(
                set.family,
                known
                    .map(Vec::as_slice)
                    .chain(unknown.iter().map(Vec::as_slice)),
            );
            let setting = SetPolicySetting {
                name: id.clone(),
                id,
                policy_type: IPSET.to_string(),
                values: render_values(&IpNet::aggregate(&sets::members(set, store))),
            };
            let shared = Arc::new(set.clone());
            for identity in &set.identities {
                self.by_identity
                    .entry(*identity)
                    .or_default()
                    .push(shared.clone());
            }
            self.by_set.insert(shared, setting);
        }
        &self.by_set[set]
    }

    /// Recomputes the values of the sets holding a changed identity; returns how many changed.
    pub fn update(&mut self, store: &IdentityStore, changed: &BTreeSet<IdentityId>) -> usize {
        let mut touched: BTreeSet<&RemoteSet> = BTreeSet::new();
        for id in changed {
            if let Some(sets) = self.by_identity.get(id) {
                touched.extend(sets.iter().map(|s| &**s));
            }
        }
        let mut count = 0;
        for set in touched {
            let values = render_values(&IpNet::aggregate(&sets::members(set, store)));
            if let Some(setting) = self.by_set.get_mut(set) {
                if setting.values != values {
                    setting.values = values;
                    count += 1;
                }
            }
        }
        count
    }

    /// Forgets the sets `keep` refuses.
    pub fn retain(&mut self, keep: impl Fn(&RemoteSet) -> bool) {
        self.by_set.retain(|set, _| keep(set));
        let by_set = &self.by_set;
        self.by_identity.retain(|_, sets| {
            sets.retain(|s| by_set.contains_key(s));
            !sets.is_empty()
        });
        let by_identity = &self.by_identity;
        self.keys.retain(|id, _| by_identity.contains_key(id));
    }

    pub fn clear(&mut self) {
        self.by_set.clear();
        self.by_identity.clear();
        self.keys.clear();
    }

    /// The set with this id, if known.
    pub fn by_id(&self, id: &str) -> Option<&SetPolicySetting> {
        self.by_set.values().find(|s| s.id == id)
    }

    /// Every known set, by id.
    pub fn all(&self) -> BTreeMap<&str, &SetPolicySetting> {
        self.by_set.values().map(|s| (s.id.as_str(), s)).collect()
    }

    pub fn len(&self) -> usize {
        self.by_set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_set.is_empty()
    }
}

/// What one [`SetSync`] step sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetChanges {
    pub added: usize,
    pub updated: usize,
    pub removed: usize,
    /// `HcnModifyNetwork` calls made.
    pub calls: usize,
}

/// Keeps the network's netpol sets equal to the wanted ones, remembering what it wrote.
#[derive(Debug, Default)]
pub struct SetSync {
    /// netpol's sets on the network by id, with their values; None: read them back first.
    known: Option<BTreeMap<String, String>>,
    generation: Option<u64>,
}

impl SetSync {
    /// Forgets what is known, so the next step reads the network's sets back.
    pub fn resync(&mut self) {
        self.known = None;
    }

    fn known(
        &mut self,
        datapath: &dyn HcnApi,
    ) -> Result<&mut BTreeMap<String, String>, DatapathError> {
        let generation = datapath.resync_signal().generation();
        if self.generation != Some(generation) {
            self.known = None;
            self.generation = Some(generation);
        }
        if self.known.is_none() {
            let sets = datapath.list_sets()?;
            self.known = Some(
                sets.into_iter()
                    .filter(SetPolicySetting::is_netpol_owned)
                    .map(|s| (s.id, s.values))
                    .collect(),
            );
        }
        Ok(self.known.as_mut().expect("just read"))
    }

    /// Adds the wanted sets the network lacks and updates those whose values differ: one
    /// `Add` and one `Update` request at most. Before any ACL names them.
    pub fn add_and_update(
        &mut self,
        datapath: &dyn HcnApi,
        wanted: &BTreeMap<&str, &SetPolicySetting>,
    ) -> Result<SetChanges, DatapathError> {
        let result = self.try_add_and_update(datapath, wanted);
        if result.is_err() {
            self.known = None;
        }
        result
    }

    fn try_add_and_update(
        &mut self,
        datapath: &dyn HcnApi,
        wanted: &BTreeMap<&str, &SetPolicySetting>,
    ) -> Result<SetChanges, DatapathError> {
        let known = self.known(datapath)?;
        let (mut add, mut update) = (Vec::new(), Vec::new());
        for (id, set) in wanted {
            match known.get(*id) {
                None => add.push((*set).clone()),
                Some(values) if *values != set.values => update.push((*set).clone()),
                Some(_) => {}
            }
        }
        let mut changes = SetChanges::default();
        for (request, sets) in [(RequestType::Add, add), (RequestType::Update, update)] {
            if sets.is_empty() {
                continue;
            }
            let count = sets.len();
            datapath.modify_sets(request, sets.clone())?;
            changes.calls += 1;
            match request {
                RequestType::Add => changes.added += count,
                _ => changes.updated += count,
            }
            let known = self.known.as_mut().expect("read above");
            for set in sets {
                known.insert(set.id, set.values);
            }
        }
        Ok(changes)
    }

    /// Removes netpol's sets not in `wanted`: one `Remove` request at most. Only after every
    /// endpoint's ACLs stopped naming them.
    pub fn remove_unwanted(
        &mut self,
        datapath: &dyn HcnApi,
        wanted: &BTreeMap<&str, &SetPolicySetting>,
    ) -> Result<SetChanges, DatapathError> {
        let known = self.known(datapath)?;
        let stale: Vec<SetPolicySetting> = known
            .iter()
            .filter(|(id, _)| !wanted.contains_key(id.as_str()))
            .map(|(id, values)| SetPolicySetting {
                id: id.clone(),
                name: id.clone(),
                policy_type: IPSET.to_string(),
                values: values.clone(),
            })
            .collect();
        if stale.is_empty() {
            return Ok(SetChanges::default());
        }
        let count = stale.len();
        let ids: Vec<String> = stale.iter().map(|s| s.id.clone()).collect();
        if let Err(e) = datapath.modify_sets(RequestType::Remove, stale) {
            self.known = None;
            return Err(e);
        }
        let known = self.known.as_mut().expect("read above");
        for id in ids {
            known.remove(&id);
        }
        Ok(SetChanges {
            removed: count,
            calls: 1,
            ..SetChanges::default()
        })
    }
}
