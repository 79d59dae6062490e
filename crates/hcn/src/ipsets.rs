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
use netpol_datapath::sets::ResolvedSets;
use netpol_datapath::{DatapathError, Family, RemoteSet};
use netpol_engine::{IdentityId, IdentityStore};
use sha2::{Digest, Sha256};

use crate::aggregate::Aggregated;
use crate::api::HcnApi;
use crate::schema::{RequestType, SetPolicySetting, IPSET, NETPOL_SET_PREFIX};

/// The comma-separated `Values` of addresses, hosts without a prefix length.
pub fn render_values<'a>(addresses: impl ExactSizeIterator<Item = &'a IpNet>) -> String {
    use std::fmt::Write;
    // Written into one buffer: a set of 150,000 addresses is one allocation, not 150,000.
    let mut out = String::with_capacity(addresses.len() * 12);
    for (i, net) in addresses.enumerate() {
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

/// One identity's part of a set id: the first 128 bits of a SHA-256 of its key.
fn identity_digest(id: IdentityId, store: &IdentityStore) -> u128 {
    let digest = Sha256::digest(identity_key(id, store));
    u128::from_le_bytes(digest[..16].try_into().expect("SHA-256 has 32 bytes"))
}

/// The set's id: [`NETPOL_SET_PREFIX`] and the first 64 bits of a SHA-256 of its family and the
/// sum of its identities' digests.
pub fn set_id(set: &RemoteSet, store: &IdentityStore) -> String {
    id_of_digests(
        set.family,
        set.identities.iter().map(|id| identity_digest(*id, store)),
    )
}

/// [`set_id`] from the identities' digests, in any order. Summed rather than hashed in order:
/// a set of thousands of identities needs no sort of their keys (sorting and hashing them was
/// a tenth of what a pod of a new label set cost at 150,000 pods), and a key is kept as 16
/// bytes rather than whole. A sum of 128-bit digests, hashed again, is as unlikely to collide
/// as the 64-bit id itself.
fn id_of_digests(family: Family, digests: impl Iterator<Item = u128>) -> String {
    let sum = digests.fold(0u128, u128::wrapping_add);
    let mut hasher = Sha256::new();
    hasher.update(match family {
        Family::V4 => b"4",
        Family::V6 => b"6",
        Family::Any => b"*",
    });
    hasher.update(sum.to_le_bytes());
    let digest = hasher.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{NETPOL_SET_PREFIX}{hex}")
}

/// One remote set's HNS set, with the shortest form of its addresses its `Values` render.
#[derive(Debug)]
struct HnsSet {
    setting: SetPolicySetting,
    aggregated: Aggregated,
}

/// Every remote set's HNS set, computed once and brought up to date as addresses change.
#[derive(Debug, Default)]
pub struct SetTable {
    /// The sets' addresses, patched by the members that come and go ([`ResolvedSets`]).
    resolved: ResolvedSets,
    settings: HashMap<Arc<RemoteSet>, HnsSet>,
    /// The remote set of each set id, for the ids the rendered ACLs name.
    by_id: HashMap<String, Arc<RemoteSet>>,
    /// The digest ([`identity_digest`]) of each identity of a known set: an identity's content
    /// never changes under its id, and serialising thousands of identities again for every new
    /// set that names them was most of what a pod of a new label set cost.
    digests: HashMap<IdentityId, u128>,
}

impl SetTable {
    /// The HNS set of `set`, computed on first use.
    pub fn get(&mut self, set: &RemoteSet, store: &IdentityStore) -> &SetPolicySetting {
        if self.settings.contains_key(set) {
            // Back in use if the last sweep retired it.
            self.resolved.entry(set, store);
        } else {
            // Unknown identities are keyed by their id: not kept, so the digest follows once
            // the store knows them.
            let digests = &mut self.digests;
            let id = id_of_digests(
                set.family,
                set.identities.iter().map(|id| match digests.get(id) {
                    Some(digest) => *digest,
                    None if store.get(*id).is_some() => {
                        *digests.entry(*id).or_insert(identity_digest(*id, store))
                    }
                    None => identity_digest(*id, store),
                }),
            );
            let (addresses, derivation) = self.resolved.entry(set, store);
            // A set made from a known one takes that one's shortest form, patched the same way.
            let derived = derivation.and_then(|derivation| {
                let mut aggregated = self.settings.get(&*derivation.from)?.aggregated.clone();
                for net in &derivation.delta.removed {
                    aggregated.remove(*net);
                }
                for net in &derivation.delta.added {
                    aggregated.insert(*net);
                }
                Some(aggregated)
            });
            let aggregated = derived.unwrap_or_else(|| Aggregated::of_disjoint(addresses.nets()));
            let setting = SetPolicySetting {
                name: id.clone(),
                id: id.clone(),
                policy_type: IPSET.to_string(),
                values: render_values(aggregated.iter()),
            };
            let shared = Arc::new(set.clone());
            self.by_id.insert(id, shared.clone());
            self.settings.insert(
                shared,
                HnsSet {
                    setting,
                    aggregated,
                },
            );
        }
        &self.settings[set].setting
    }

    /// Patches the sets holding a changed identity by the members that came and went, and
    /// renders the `Values` of those that changed (HNS takes a set's values whole, so that is
    /// the size of the set's shortest form); returns how many changed.
    pub fn update(&mut self, store: &IdentityStore, changed: &BTreeSet<IdentityId>) -> usize {
        // Keys outlive their sets (when a pod of a new label set replaces sets naming thousands
        // of identities by sets naming them and one more, the old sets go before the new ones
        // are made, and serialising those identities again was a tenth of the change); they
        // are forgotten once their identities have left the store and outnumber those it holds.
        if self.digests.len() > 2 * store.len() {
            self.digests.retain(|id, _| store.get(*id).is_some());
        }
        let deltas = self.resolved.update(store, changed);
        for (set, delta) in &deltas {
            if let Some(hns) = self.settings.get_mut(set) {
                for net in &delta.removed {
                    hns.aggregated.remove(*net);
                }
                for net in &delta.added {
                    hns.aggregated.insert(*net);
                }
                hns.setting.values = render_values(hns.aggregated.iter());
            }
        }
        deltas.len()
    }

    /// Takes the sets `keep` refuses out of use: kept, patched, until the next sweep, as what
    /// new sets are derived from ([`ResolvedSets::retain`]).
    pub fn retain(&mut self, keep: impl FnMut(&RemoteSet) -> bool) {
        for set in self.resolved.retain(keep) {
            if let Some(hns) = self.settings.remove(&*set) {
                self.by_id.remove(&hns.setting.id);
            }
        }
    }

    pub fn clear(&mut self) {
        self.resolved.clear();
        self.settings.clear();
        self.by_id.clear();
        self.digests.clear();
    }

    /// The set with this id, if known.
    pub fn by_id(&self, id: &str) -> Option<&SetPolicySetting> {
        self.by_id
            .get(id)
            .and_then(|set| self.settings.get(set))
            .map(|hns| &hns.setting)
    }

    /// Every known set, by id.
    pub fn all(&self) -> BTreeMap<&str, &SetPolicySetting> {
        self.settings
            .values()
            .map(|hns| (hns.setting.id.as_str(), &hns.setting))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.settings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.settings.is_empty()
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
