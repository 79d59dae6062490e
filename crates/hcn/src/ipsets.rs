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

use ipnet::IpNet;
use netpol_datapath::sets::{BookedSet, IdentityDigests, SetBook, SetDelta, SetStep, SlotId};
use netpol_datapath::{DatapathError, Family, RemoteSet};
use netpol_engine::{IdentityId, IdentityStore};
use sha2::{Digest, Sha256};

use crate::aggregate::Aggregated;
use crate::api::HcnApi;
pub use crate::conventions::SetConventions;
use crate::schema::{RequestType, SetPolicySetting, IPSET, NETPOL_SET_PREFIX};
use netpol_engine::Shared;

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
    let sum = set
        .identities
        .iter()
        .map(|id| identity_digest(*id, store))
        .fold(0u128, u128::wrapping_add);
    id_of_sum(set.family, sum, 0)
}

/// [`set_id`] from the sum of the identities' digests (see [`IdentityDigests`]), salted for a
/// set whose canonical id another set holds (`salt` > 0; see `netpol_datapath::sets::book`).
fn id_of_sum(family: Family, sum: u128, salt: u32) -> String {
    let mut hasher = Sha256::new();
    hasher.update(match family {
        Family::V4 => b"4",
        Family::V6 => b"6",
        Family::Any => b"*",
    });
    hasher.update(sum.to_le_bytes());
    if salt > 0 {
        hasher.update(salt.to_le_bytes());
    }
    let digest = hasher.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{NETPOL_SET_PREFIX}{hex}")
}

/// One remote set's HNS set, with the shortest form of its addresses its `Values` render.
#[derive(Debug)]
struct HnsSet {
    setting: SetPolicySetting,
    aggregated: Aggregated,
    /// The book's revision of the addresses the values render.
    revision: u64,
}

impl HnsSet {
    fn new(booked: &BookedSet) -> HnsSet {
        let aggregated = Aggregated::of_disjoint(booked.addresses.nets());
        HnsSet {
            setting: SetPolicySetting {
                name: booked.name.to_string(),
                id: booked.name.to_string(),
                policy_type: IPSET.to_string(),
                values: render_values(aggregated.iter()),
            },
            aggregated,
            revision: booked.revision,
        }
    }

    /// Patched by `delta` to the book's revision of the set.
    fn patch(&mut self, delta: &SetDelta, booked: &BookedSet) {
        for net in &delta.removed {
            self.aggregated.remove(*net);
        }
        for net in &delta.added {
            self.aggregated.insert(*net);
        }
        self.setting.values = render_values(self.aggregated.iter());
        self.revision = booked.revision;
    }
}

/// A wanted set: its setting and the revision of the addresses its values render.
#[derive(Clone, Copy, Debug)]
pub struct WantedSet<'a> {
    pub setting: &'a SetPolicySetting,
    pub revision: u64,
}

/// Every remote set's HNS set, named and resolved by the book ([`SetBook`]: a set replacing
/// another by the identities a change brought keeps its id) and brought up to date as
/// addresses change, by the members that came and went.
#[derive(Debug, Default)]
pub struct SetTable {
    book: SetBook,
    hns: HashMap<SlotId, HnsSet>,
    /// Each known identity's part of the sets' ids ([`identity_digest`]).
    digests: IdentityDigests,
    /// The values of sets dropped from the book and not yet removed from the network, by id.
    retired: HashMap<String, String>,
    /// How this HNS reads sets: which field names an ingress peer's set, and whether it takes
    /// IPv6 members (rules of IPv6 sets are inlined where it does not).
    conventions: SetConventions,
}

impl SetTable {
    /// An empty table for an HNS reading sets as `conventions` say.
    pub fn with_conventions(conventions: SetConventions) -> SetTable {
        SetTable {
            conventions,
            ..SetTable::default()
        }
    }

    pub fn conventions(&self) -> SetConventions {
        self.conventions
    }

    /// Whether rules of `set` name a network set (rather than inlining its addresses): every
    /// set but an IPv6 one on an HNS not known to take IPv6 members.
    pub fn names(&self, set: &RemoteSet) -> bool {
        set.family != Family::V6 || self.conventions.ipv6_sets
    }

    /// Whether the set in `slot` is inlined in the rules naming it.
    pub fn inlines_slot(&self, slot: SlotId) -> bool {
        !self.names(&self.book.get(slot).set)
    }

    /// The HNS set of `set`, booked on first use: for callers that render lists one at a time
    /// (`netpol acls`, the simulator's oracle). The enforcer books sets by [`SetTable::step`].
    pub fn get(&mut self, set: &RemoteSet, store: &IdentityStore) -> &SetPolicySetting {
        let slot = match self.book.slot_of(set) {
            Some(slot) => slot,
            None => {
                let digests = &mut self.digests;
                let (slot, _) = self.book.adopt(set, store, &mut |set, store, salt| {
                    name_set(digests, set, store, salt)
                });
                self.hns.insert(slot, HnsSet::new(self.book.get(slot)));
                slot
            }
        };
        &self.hns[&slot].setting
    }

    /// How many addresses the set in `slot` holds.
    pub fn slot_len(&self, slot: SlotId) -> usize {
        self.book.get(slot).addresses.len()
    }

    /// The HNS set of a set in use, if booked.
    pub fn setting(&self, set: &RemoteSet) -> Option<&SetPolicySetting> {
        self.book.slot_of(set).map(|slot| &self.hns[&slot].setting)
    }

    /// One step of the book (see [`SetBook::step`]): the sets of the compiled lists that came
    /// into use (`gained`) and went out of use (`lost`), and the identities whose members
    /// changed. New sets get their values, changed ones are patched (HNS takes a set's values
    /// whole, so that is the size of the set's shortest form), dropped ones forgotten.
    pub fn step<'s>(
        &mut self,
        store: &IdentityStore,
        changed: &BTreeSet<IdentityId>,
        gained: impl IntoIterator<Item = &'s Shared<RemoteSet>>,
        lost: impl IntoIterator<Item = &'s Shared<RemoteSet>>,
    ) -> SetStep {
        self.digests.prune(store);
        let digests = &mut self.digests;
        let step = self
            .book
            .step(store, changed, gained, lost, &mut |set, store, salt| {
                name_set(digests, set, store, salt)
            });
        for (slot, _) in &step.dropped {
            if let Some(hns) = self.hns.remove(slot) {
                self.retired.insert(hns.setting.id, hns.setting.values);
            }
        }
        for slot in &step.created {
            let hns = HnsSet::new(self.book.get(*slot));
            self.retired.remove(&hns.setting.id);
            self.hns.insert(*slot, hns);
        }
        for (slot, delta) in &step.changed {
            let booked = self.book.get(*slot);
            match self.hns.get_mut(slot) {
                Some(hns) => hns.patch(delta, booked),
                None => {
                    self.hns.insert(*slot, HnsSet::new(booked));
                }
            }
        }
        step
    }

    /// Every set resolved anew (a resync): sets a patch got wrong are corrected, and their
    /// values rendered again. Returns how many differed.
    pub fn refresh(&mut self, store: &IdentityStore) -> usize {
        let corrected = self.book.refresh(store);
        for (slot, _) in &corrected {
            self.hns.insert(*slot, HnsSet::new(self.book.get(*slot)));
        }
        corrected.len()
    }

    pub fn clear(&mut self) {
        self.book.clear();
        self.hns.clear();
        self.digests.clear();
        self.retired.clear();
    }

    /// The values of a set dropped from the table and not yet removed from the network.
    pub fn retired_values(&self, id: &str) -> Option<&str> {
        self.retired.get(id).map(String::as_str)
    }

    /// Forgets the values of dropped sets: the network no longer holds them.
    pub fn clear_retired(&mut self) {
        self.retired.clear();
    }

    /// The set with this id, if known.
    pub fn by_id(&self, id: &str) -> Option<&SetPolicySetting> {
        self.wanted(id).map(|w| w.setting)
    }

    /// The set with this id and the revision of its values, if known.
    pub fn wanted(&self, id: &str) -> Option<WantedSet<'_>> {
        let hns = &self.hns[&self.book.by_name(id)?];
        Some(WantedSet {
            setting: &hns.setting,
            revision: hns.revision,
        })
    }

    /// Every known set, by id.
    pub fn all(&self) -> BTreeMap<&str, &SetPolicySetting> {
        self.hns
            .values()
            .map(|hns| (hns.setting.id.as_str(), &hns.setting))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.hns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hns.is_empty()
    }
}

/// The id of a new set, from the identities' kept digests.
fn name_set(
    digests: &mut IdentityDigests,
    set: &RemoteSet,
    store: &IdentityStore,
    salt: u32,
) -> String {
    id_of_sum(set.family, digests.sum(set, store, identity_digest), salt)
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
    /// netpol's sets on the network by id; None: read them back first.
    known: Option<BTreeMap<String, KnownSet>>,
    generation: Option<u64>,
    /// Sets HNS refused as invalid (`HCN_E_INVALID_POLICY`, an IPv6 member say), with the
    /// revision refused and why: not sent again until their values change or a resync.
    refused: BTreeMap<String, (u64, String)>,
}

/// What the network holds of one set, as far as netpol knows.
#[derive(Debug, Default)]
struct KnownSet {
    /// The revision of the values netpol wrote (see `SetBook`): equal to the wanted one, the
    /// values are in place without comparing them.
    revision: Option<u64>,
    /// The values read back (before netpol wrote the set itself).
    values: Option<String>,
}

impl SetSync {
    /// Forgets what is known, so the next step reads the network's sets back.
    pub fn resync(&mut self) {
        self.known = None;
        self.refused.clear();
    }

    /// The wanted sets HNS refuses, by id, with why: the endpoints whose rules name one are not
    /// programmed (they keep their rules), the others are.
    pub fn refused(&self) -> impl Iterator<Item = (&str, &str)> {
        self.refused
            .iter()
            .map(|(id, (_, why))| (id.as_str(), why.as_str()))
    }

    fn known(
        &mut self,
        datapath: &dyn HcnApi,
    ) -> Result<&mut BTreeMap<String, KnownSet>, DatapathError> {
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
                    .map(|s| {
                        let known = KnownSet {
                            revision: None,
                            values: Some(s.values),
                        };
                        (s.id, known)
                    })
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
        wanted: &BTreeMap<&str, WantedSet<'_>>,
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
        wanted: &BTreeMap<&str, WantedSet<'_>>,
    ) -> Result<SetChanges, DatapathError> {
        self.refused.retain(|id, (revision, _)| {
            wanted
                .get(id.as_str())
                .is_some_and(|w| w.revision == *revision)
        });
        let refused = std::mem::take(&mut self.refused);
        let known = self.known(datapath)?;
        let (mut add, mut update) = (Vec::new(), Vec::new());
        for (id, set) in wanted {
            if refused.contains_key(*id) {
                continue;
            }
            match known.get_mut(*id) {
                None => add.push(*set),
                Some(k) if k.revision == Some(set.revision) => {}
                // Read back: the values are compared once, then known by revision.
                Some(k) if k.values.as_deref() == Some(set.setting.values.as_str()) => {
                    *k = KnownSet {
                        revision: Some(set.revision),
                        values: None,
                    };
                }
                Some(_) => update.push(*set),
            }
        }
        let mut changes = SetChanges::default();
        for (request, sets) in [(RequestType::Add, add), (RequestType::Update, update)] {
            if sets.is_empty() {
                continue;
            }
            let settings = sets.iter().map(|s| s.setting.clone()).collect();
            changes.calls += 1;
            let sets = match datapath.modify_sets(request, settings) {
                Ok(()) => sets,
                // One set HNS cannot take must not hold back the others: each alone.
                Err(e) if e.refusal() == Some(netpol_datapath::Refusal::InvalidPolicy) => {
                    let mut taken = Vec::new();
                    for set in sets {
                        changes.calls += 1;
                        match datapath.modify_sets(request, vec![set.setting.clone()]) {
                            Ok(()) => taken.push(set),
                            Err(e)
                                if e.refusal() == Some(netpol_datapath::Refusal::InvalidPolicy) =>
                            {
                                tracing::warn!(set = %set.setting.id, error = %e, "HNS refuses an IP set; only the endpoints naming it are held back");
                                self.refused
                                    .insert(set.setting.id.clone(), (set.revision, e.to_string()));
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    taken
                }
                Err(e) => return Err(e),
            };
            match request {
                RequestType::Add => changes.added += sets.len(),
                _ => changes.updated += sets.len(),
            }
            let known = self.known.as_mut().expect("read above");
            for set in sets {
                let written = KnownSet {
                    revision: Some(set.revision),
                    values: None,
                };
                known.insert(set.setting.id.clone(), written);
            }
        }
        self.refused.extend(refused);
        Ok(changes)
    }

    /// Removes netpol's sets not in `wanted`: one `Remove` request at most. Only after every
    /// endpoint's ACLs stopped naming them. A set's values go with its removal where known
    /// (read back, or what `values_of` still holds of a set the table dropped).
    pub fn remove_unwanted<'v>(
        &mut self,
        datapath: &dyn HcnApi,
        wanted: &BTreeMap<&str, WantedSet<'_>>,
        values_of: impl Fn(&str) -> Option<&'v str>,
    ) -> Result<SetChanges, DatapathError> {
        let known = self.known(datapath)?;
        let stale: Vec<SetPolicySetting> = known
            .iter()
            .filter(|(id, _)| !wanted.contains_key(id.as_str()))
            .map(|(id, set)| SetPolicySetting {
                id: id.clone(),
                name: id.clone(),
                policy_type: IPSET.to_string(),
                values: set
                    .values
                    .as_deref()
                    .or_else(|| values_of(id))
                    .unwrap_or_default()
                    .to_string(),
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
