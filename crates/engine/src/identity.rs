//! Identities: what a policy peer can select. Pod and node addresses, or prefixes outside the
//! cluster. An [`Identity`] value carries one prefix (a pod's IPv4 and IPv6 addresses are two
//! identities with the same labels), so that CIDR peers match per address family exactly; the
//! store groups them: replicas alike into one shared identity, world prefixes alike into one
//! class ([`WorldClass`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::labels::SharedLabels;
use crate::ports::NamedPort;
use crate::prefixes::is_single_address;

mod world;
mod world_map;

pub use world::{EntryRef, Leaves, WorldClass};

/// A small, stable handle for an identity. Allocated by [`IdentityStore`]; never reused while the
/// store lives, so a removed identity cannot be confused with a new one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct IdentityId(pub u32);

impl std::fmt::Display for IdentityId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// A pod as policies see it: its labels, its namespace's labels and its named ports.
///
/// Label sets are shared: the replicas of a workload carry equal labels and the pods of a
/// namespace its one label set, so holders intern them (see [`SharedLabels`]) and a large cluster
/// keeps each distinct set once rather than once per pod.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    pub labels: SharedLabels,
    /// The namespace's labels, including `kubernetes.io/metadata.name`.
    pub namespace_labels: SharedLabels,
    pub node: Option<String>,
    pub ports: Vec<NamedPort>,
}

impl PodInfo {
    /// Whether `other` describes the same pod (namespace and name), as two addresses of one pod
    /// do. Shared identities, which drop the name, are no pod in particular.
    pub fn is_same_pod(&self, other: &PodInfo) -> bool {
        !self.name.is_empty() && self.name == other.name && self.namespace == other.namespace
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeInfo {
    pub name: String,
    pub labels: SharedLabels,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IdentityKind {
    Pod(PodInfo),
    Node(NodeInfo),
    /// Addresses outside the cluster, at the granularity of a prefix some policy names.
    World,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Identity {
    pub kind: IdentityKind,
    /// A host prefix (/32, /128) for pods and nodes; the CIDR for world identities (for a
    /// stored class of prefixes, its lowest: see [`IdentityStore::members`] for all).
    pub prefix: IpNet,
}

impl Identity {
    pub fn pod(info: PodInfo, ip: IpAddr) -> Self {
        Identity {
            kind: IdentityKind::Pod(info),
            prefix: IpNet::from(ip),
        }
    }
    pub fn node(info: NodeInfo, ip: IpAddr) -> Self {
        Identity {
            kind: IdentityKind::Node(info),
            prefix: IpNet::from(ip),
        }
    }
    pub fn world(prefix: IpNet) -> Self {
        Identity {
            kind: IdentityKind::World,
            prefix: prefix.trunc(),
        }
    }
    pub fn as_pod(&self) -> Option<&PodInfo> {
        match &self.kind {
            IdentityKind::Pod(p) => Some(p),
            _ => None,
        }
    }
    pub fn as_node(&self) -> Option<&NodeInfo> {
        match &self.kind {
            IdentityKind::Node(n) => Some(n),
            _ => None,
        }
    }
    pub fn is_world(&self) -> bool {
        matches!(self.kind, IdentityKind::World)
    }
    /// Named ports a flow towards this identity can match: only pods declare any.
    pub fn named_ports(&self) -> Option<&[NamedPort]> {
        self.as_pod().map(|p| p.ports.as_slice())
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            IdentityKind::Pod(p) => {
                write!(f, "pod {}/{} ({})", p.namespace, p.name, self.prefix.addr())
            }
            IdentityKind::Node(n) => write!(f, "node {} ({})", n.name, self.prefix.addr()),
            IdentityKind::World => write!(f, "world {}", self.prefix),
        }
    }
}

/// What groups addresses into one identity.
///
/// Scenario stores and the reference evaluator use one identity per address ([`IdentityStore::insert`]).
/// The engine uses Cilium's model ([`IdentityStore::insert_shared`]): an identity is everything
/// policies can see of an address — a pod's namespace, labels, namespace labels and named ports, or a
/// node — plus the set of policy CIDRs that contain the address. Replicas of one workload share an
/// identity, so selector work and MapState size follow distinct label sets, not pods, and a new
/// replica changes an address set only. The CIDR set keeps the grouping exact: a NetworkPolicy
/// `ipBlock` may select some replicas and not others, and two addresses with the same CIDR set are
/// selected alike by every CIDR peer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum IdentityKey {
    Exact(Identity),
    Shared {
        /// The identity's kind with everything no selector reads (pod name and node) cleared.
        kind: IdentityKind,
        cidrs: Vec<IpNet>,
    },
    /// A class of prefixes outside the cluster that every selector treats alike (see
    /// [`WorldClass`]).
    World(WorldClass),
}

#[derive(Clone, Debug)]
struct Stored {
    /// An identity standing for every member: its kind, and the prefix of one member. Selection
    /// evaluated on it holds for every member, because members differ in nothing a selector reads.
    representative: Identity,
    /// Member addresses (host prefixes), or the world prefixes (one, or a class of them: see
    /// [`WorldClass`]).
    members: Vec<IpNet>,
    key: IdentityKey,
}

/// Pod and node addresses with their identities, ordered: each family's addresses as integers (a
/// map keyed by `IpAddr` costs 17 bytes a key, and at 150,000 pods its nodes were 16 MB).
#[derive(Clone, Debug, Default)]
struct HostIndex {
    v4: BTreeMap<u32, IdentityId>,
    v6: BTreeMap<u128, IdentityId>,
}

impl HostIndex {
    fn get(&self, address: &IpAddr) -> Option<&IdentityId> {
        match address {
            IpAddr::V4(a) => self.v4.get(&u32::from(*a)),
            IpAddr::V6(a) => self.v6.get(&u128::from(*a)),
        }
    }

    fn insert(&mut self, address: IpAddr, id: IdentityId) -> Option<IdentityId> {
        match address {
            IpAddr::V4(a) => self.v4.insert(u32::from(a), id),
            IpAddr::V6(a) => self.v6.insert(u128::from(a), id),
        }
    }

    fn remove(&mut self, address: &IpAddr) -> Option<IdentityId> {
        match address {
            IpAddr::V4(a) => self.v4.remove(&u32::from(*a)),
            IpAddr::V6(a) => self.v6.remove(&u128::from(*a)),
        }
    }

    fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    /// The addresses from `first` to `last` (of one family), in order.
    fn range(
        &self,
        first: IpAddr,
        last: IpAddr,
    ) -> Box<dyn Iterator<Item = (IpAddr, IdentityId)> + '_> {
        match (first, last) {
            (IpAddr::V4(first), IpAddr::V4(last)) => Box::new(
                self.v4
                    .range(u32::from(first)..=u32::from(last))
                    .map(|(a, id)| (IpAddr::from(std::net::Ipv4Addr::from(*a)), *id)),
            ),
            (IpAddr::V6(first), IpAddr::V6(last)) => Box::new(
                self.v6
                    .range(u128::from(first)..=u128::from(last))
                    .map(|(a, id)| (IpAddr::from(std::net::Ipv6Addr::from(*a)), *id)),
            ),
            _ => Box::new(std::iter::empty()),
        }
    }
}

/// All identities known to the engine, with an address index (the ipcache) that resolves an IP the
/// way the datapath would: an exact pod or node address first, else the longest world prefix.
#[derive(Clone, Debug, Default)]
pub struct IdentityStore {
    next: u32,
    by_id: BTreeMap<IdentityId, Stored>,
    by_key: HashMap<IdentityKey, IdentityId>,
    /// Ordered, so that the addresses inside a prefix are a range.
    hosts: HostIndex,
    world: world_map::WorldMap,
    /// Shared pod and node identities by each policy CIDR holding their members.
    by_cidr: HashMap<IpNet, BTreeSet<IdentityId>>,
    /// Pod and node identities of their own (one address each), which the CIDR index does not
    /// cover.
    exact_hosts: usize,
}

impl IdentityStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Inserts an identity of its own (one address, or one world prefix), returning its id and
    /// whether it is new. Inserting an equal identity twice returns the first id.
    pub fn insert(&mut self, identity: Identity) -> (IdentityId, bool) {
        let key = IdentityKey::Exact(identity.clone());
        self.insert_keyed(key, identity)
    }

    /// Adds a pod or node address to the shared identity of everything policies can see of it
    /// (`cidrs`: the policy prefixes holding the address). Returns the identity and whether it is new.
    pub fn insert_shared(&mut self, identity: Identity, cidrs: Vec<IpNet>) -> (IdentityId, bool) {
        let kind = match identity.kind.clone() {
            IdentityKind::Pod(pod) => IdentityKind::Pod(PodInfo {
                name: String::new(),
                node: None,
                ..pod
            }),
            other => other,
        };
        let key = if matches!(kind, IdentityKind::World) {
            IdentityKey::Exact(identity.clone())
        } else {
            IdentityKey::Shared { kind, cidrs }
        };
        self.insert_keyed(key, identity)
    }

    fn insert_keyed(&mut self, key: IdentityKey, identity: Identity) -> (IdentityId, bool) {
        if let Some(&id) = self.by_key.get(&key) {
            if !identity.is_world() && self.hosts.insert(identity.prefix.addr(), id) != Some(id) {
                let stored = self.by_id.get_mut(&id).expect("indexed identity exists");
                stored.members.push(identity.prefix);
            }
            return (id, false);
        }
        let id = IdentityId(self.next);
        self.next += 1;
        let representative = match &key {
            IdentityKey::Shared { kind, .. } => Identity {
                kind: kind.clone(),
                prefix: identity.prefix,
            },
            IdentityKey::Exact(_) | IdentityKey::World(_) => identity.clone(),
        };
        if identity.is_world() {
            self.world.insert(identity.prefix, id);
        } else {
            self.hosts.insert(identity.prefix.addr(), id);
            match &key {
                IdentityKey::Shared { cidrs, .. } => {
                    for cidr in cidrs {
                        self.by_cidr.entry(*cidr).or_default().insert(id);
                    }
                }
                IdentityKey::Exact(_) => self.exact_hosts += 1,
                IdentityKey::World(_) => {}
            }
        }
        self.by_key.insert(key.clone(), id);
        self.by_id.insert(
            id,
            Stored {
                representative,
                members: vec![identity.prefix],
                key,
            },
        );
        (id, true)
    }

    /// Removes a whole identity with every member address.
    pub fn remove(&mut self, id: IdentityId) -> Option<Identity> {
        let stored = self.by_id.remove(&id)?;
        self.by_key.remove(&stored.key);
        if stored.representative.is_world() {
            for member in &stored.members {
                if self.world.get(member) == Some(id) {
                    self.world.remove(member);
                }
            }
        } else {
            match &stored.key {
                IdentityKey::Shared { cidrs, .. } => {
                    for cidr in cidrs {
                        if let Some(ids) = self.by_cidr.get_mut(cidr) {
                            ids.remove(&id);
                            if ids.is_empty() {
                                self.by_cidr.remove(cidr);
                            }
                        }
                    }
                }
                IdentityKey::Exact(_) => self.exact_hosts -= 1,
                IdentityKey::World(_) => {}
            }
        }
        for member in &stored.members {
            if self.hosts.get(&member.addr()) == Some(&id) {
                self.hosts.remove(&member.addr());
            }
        }
        Some(stored.representative)
    }

    /// Removes one pod or node address. Returns the identity it belonged to, and the identity itself
    /// when that was its last address (the identity is then gone).
    pub fn remove_address(&mut self, address: IpAddr) -> Option<(IdentityId, Option<Identity>)> {
        let id = self.hosts.remove(&address)?;
        let stored = self.by_id.get_mut(&id).expect("indexed identity exists");
        stored.members.retain(|m| m.addr() != address);
        if stored.members.is_empty() {
            return Some((id, self.remove(id)));
        }
        if stored.representative.prefix.addr() == address {
            stored.representative.prefix = stored.members[0];
        }
        Some((id, None))
    }

    /// The pod and node identities with addresses inside `prefix`. Addresses of one shared
    /// identity lie inside the same policy CIDRs, so such an identity is inside a policy CIDR
    /// with all of its members or with none; the CIDR index answers without visiting addresses.
    pub fn hosts_within(&self, prefix: IpNet) -> Vec<IdentityId> {
        if prefix.prefix_len() == 0 {
            return self
                .by_id
                .iter()
                .filter(|(_, s)| !s.representative.is_world())
                .filter(|(_, s)| {
                    s.members
                        .iter()
                        .any(|m| m.addr().is_ipv4() == prefix.addr().is_ipv4())
                })
                .map(|(id, _)| *id)
                .collect();
        }
        if is_single_address(&prefix) {
            return self.host(prefix.addr()).into_iter().collect();
        }
        match self.by_cidr.get(&prefix) {
            Some(ids) if self.exact_hosts == 0 => ids.iter().copied().collect(),
            _ => {
                let ids: BTreeSet<IdentityId> = self.hosts_in(prefix).map(|(_, id)| id).collect();
                ids.into_iter().collect()
            }
        }
    }

    /// Every identity with addresses inside `prefix`: the world identities of the world
    /// prefixes it holds ([`IdentityStore::worlds_within`]) and the pod and node identities
    /// ([`IdentityStore::hosts_within`]), each once.
    pub fn identities_within(&self, prefix: IpNet) -> Vec<IdentityId> {
        let worlds: BTreeSet<IdentityId> = self.worlds_within(prefix).map(|(_, id)| id).collect();
        let mut ids: Vec<IdentityId> = worlds.into_iter().collect();
        ids.extend(self.hosts_within(prefix));
        ids
    }

    /// The world prefixes inside `prefix` (itself included), each with its identity: a range of
    /// the sorted world map.
    ///
    /// A single address holds no prefix but itself: one lookup, not a range (a CIDR-heavy
    /// policy's 50,000 `/32`s are each asked at every change that touches them).
    pub fn worlds_within(&self, prefix: IpNet) -> impl Iterator<Item = (IpNet, IdentityId)> + '_ {
        let single = is_single_address(&prefix);
        let exact = single.then(|| self.world.get(&prefix)).flatten();
        let range = (!single).then(|| {
            self.world
                .starting_in(prefix.network()..=prefix.broadcast())
                .filter(move |(net, _)| prefix.contains(net))
        });
        exact
            .map(|id| (prefix, id))
            .into_iter()
            .chain(range.into_iter().flatten())
    }

    /// One member prefix of the identity in the given family (IPv6 or not), if it has one.
    pub fn member_of_family(&self, id: IdentityId, ipv6: bool) -> Option<IpNet> {
        self.members(id)
            .iter()
            .find(|m| m.addr().is_ipv6() == ipv6)
            .copied()
    }

    /// The identity (for shared identities, its representative: see [`IdentityStore::insert_shared`]).
    pub fn get(&self, id: IdentityId) -> Option<&Identity> {
        self.by_id.get(&id).map(|s| &s.representative)
    }

    /// A digest of what makes the identity itself (its key: the kind with what no selector reads
    /// cleared, and the policy CIDRs holding it), equal in every agent that sees the same
    /// cluster, whatever order its identities were numbered in. Datapaths name what must survive
    /// a restart after it (nftables sets), never after the id.
    pub fn content_digest(&self, id: IdentityId) -> Option<u64> {
        use std::hash::{Hash, Hasher};
        let stored = self.by_id.get(&id)?;
        // SipHash with fixed keys: the same in every process of this build.
        let mut hasher = std::hash::DefaultHasher::new();
        stored.key.hash(&mut hasher);
        Some(hasher.finish())
    }

    /// The addresses of an identity: its members' host prefixes, or its world prefixes.
    pub fn members(&self, id: IdentityId) -> &[IpNet] {
        self.by_id.get(&id).map_or(&[], |s| s.members.as_slice())
    }

    /// A description of an identity that does not depend on the order its members arrived in:
    /// its kind and every member address.
    pub fn describe(&self, id: IdentityId) -> String {
        let Some(stored) = self.by_id.get(&id) else {
            return format!("unknown identity {id}");
        };
        let mut members: Vec<String> = stored
            .members
            .iter()
            .map(|m| m.addr().to_string())
            .collect();
        members.sort();
        match &stored.representative.kind {
            IdentityKind::Pod(p) if p.name.is_empty() => {
                let labels: Vec<String> =
                    p.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!(
                    "pods {}/{{{}}} [{}]",
                    p.namespace,
                    labels.join(","),
                    members.join(",")
                )
            }
            IdentityKind::Node(n) if stored.members.len() > 1 => {
                format!("node {} [{}]", n.name, members.join(","))
            }
            IdentityKind::World if stored.members.len() > 1 => {
                let mut prefixes = stored.members.clone();
                prefixes.sort_unstable();
                let prefixes: Vec<String> = prefixes.iter().map(IpNet::to_string).collect();
                format!("world [{}]", prefixes.join(","))
            }
            _ if stored.members.len() > 1 => {
                format!("{} [{}]", stored.representative, members.join(","))
            }
            _ => stored.representative.to_string(),
        }
    }

    /// A short name for an identity, for people: its representative, and for a class of world
    /// prefixes how many more it has ("world 192.0.2.1/32 (+49,999 prefixes)").
    pub fn summary(&self, id: IdentityId) -> String {
        match self.by_id.get(&id) {
            None => format!("unknown identity {id}"),
            Some(stored) if stored.representative.is_world() && stored.members.len() > 1 => {
                world::describe_class(&stored.representative, stored.members.len())
            }
            Some(stored) => stored.representative.to_string(),
        }
    }

    /// The policy CIDRs holding the members of a shared identity (empty for others).
    pub fn cidrs_of(&self, id: IdentityId) -> &[IpNet] {
        match self.by_id.get(&id).map(|s| &s.key) {
            Some(IdentityKey::Shared { cidrs, .. }) => cidrs,
            _ => &[],
        }
    }

    /// The pod or node identity holding an address.
    pub fn host(&self, address: IpAddr) -> Option<IdentityId> {
        self.hosts.get(&address).copied()
    }

    /// Pod and node addresses inside a prefix, with their identities, in address order.
    pub fn hosts_in(&self, prefix: IpNet) -> impl Iterator<Item = (IpAddr, IdentityId)> + '_ {
        self.hosts.range(prefix.network(), prefix.broadcast())
    }

    /// The id of an identity of its own, or of the shared identity holding a pod or node address.
    pub fn id_of(&self, identity: &Identity) -> Option<IdentityId> {
        if let Some(id) = self.by_key.get(&IdentityKey::Exact(identity.clone())) {
            return Some(*id);
        }
        (!identity.is_world())
            .then(|| self.hosts.get(&identity.prefix.addr()).copied())
            .flatten()
    }

    pub fn iter(&self) -> impl Iterator<Item = (IdentityId, &Identity)> {
        self.by_id.iter().map(|(id, s)| (*id, &s.representative))
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Pod and node addresses held, over all identities.
    pub fn address_count(&self) -> usize {
        self.hosts.len()
    }

    /// Every world prefix with its identity, IPv4 first, each family in address order.
    pub fn world_prefixes(&self) -> impl Iterator<Item = (IpNet, IdentityId)> + '_ {
        self.world.iter()
    }

    /// The world identities whose prefix holds `net` (itself included), shortest first: one
    /// lookup per prefix length present, however many world prefixes there are.
    pub fn worlds_holding(&self, net: &IpNet) -> Vec<IdentityId> {
        self.world.holding(net).map(|(_, id)| id).collect()
    }

    /// The world prefixes holding `net` (itself included), each with its identity, shortest
    /// first.
    pub fn world_prefixes_holding<'a>(
        &'a self,
        net: &'a IpNet,
    ) -> impl Iterator<Item = (IpNet, IdentityId)> + 'a {
        self.world.holding(net)
    }

    /// The identity of an address: the pod or node that owns it, else the longest world prefix
    /// holding it. None only when no world identity covers the address family.
    pub fn resolve(&self, ip: IpAddr) -> Option<IdentityId> {
        if let Some(id) = self.hosts.get(&ip) {
            return Some(*id);
        }
        self.world.longest_holding(ip)
    }

    /// For every identity, one address that [`IdentityStore::resolve`] maps back to it: a member
    /// address, or for a world prefix its lowest address that no longer prefix or host claims.
    /// A prefix wholly covered by others has none and is left out.
    pub fn representative_addresses(&self) -> HashMap<IdentityId, IpAddr> {
        // Every member of every identity, sorted by family and first address, so the members
        // inside a prefix are one range of it: a policy's 60,000 `except`s are 60,000 world
        // identities, and scanning all members for each of them was quadratic.
        let mut members: Vec<MemberSpan> = self
            .by_id
            .iter()
            .flat_map(|(id, s)| {
                let world = s.representative.is_world();
                s.members.iter().map(move |m| {
                    let (lo, hi) = span(m);
                    (m.addr().is_ipv6(), lo, hi, *id, world, m.prefix_len())
                })
            })
            .collect();
        members.sort_unstable();
        let mut out = HashMap::new();
        for (id, stored) in &self.by_id {
            if !stored.representative.is_world() {
                out.insert(*id, stored.representative.prefix.addr());
                continue;
            }
            // A class of prefixes: the first of its prefixes, in order, with an address of its own.
            let mut prefixes = stored.members.clone();
            prefixes.sort_unstable();
            if let Some(address) = prefixes
                .iter()
                .find_map(|prefix| unclaimed_address(&members, *id, prefix))
            {
                out.insert(*id, address);
            }
        }
        out
    }
}

/// A member of an identity as [`IdentityStore::representative_addresses`] sorts them: family
/// (IPv6 or not), first and last address, identity, whether a world prefix, prefix length.
type MemberSpan = (bool, u128, u128, IdentityId, bool, u8);

/// The lowest address of the world prefix `prefix` (of identity `id`) that no longer prefix or
/// host claims first; `members`: every member of every identity, as
/// [`IdentityStore::representative_addresses`] sorts them.
fn unclaimed_address(members: &[MemberSpan], id: IdentityId, prefix: &IpNet) -> Option<IpAddr> {
    let (start, end) = span(prefix);
    let v6 = prefix.addr().is_ipv6();
    let first = members.partition_point(|m| (m.0, m.1) < (v6, start));
    // Holes: what lies inside the prefix and claims its addresses first (a longer prefix, or
    // a pod or node address), sorted by their first address.
    let holes = members[first..]
        .iter()
        .take_while(|m| m.0 == v6 && m.1 <= end)
        .filter(|m| m.3 != id && m.2 <= end)
        .filter(|m| m.5 > prefix.prefix_len() || !m.4)
        .map(|m| (m.1, m.2));
    // The first address after the holes; none when they reach the top of the address space (a
    // hole ending at `u128::MAX` leaves nothing after it, and saturating there would name an
    // address inside the hole).
    let mut candidate = Some(start);
    for (lo, hi) in holes {
        match candidate {
            Some(c) if c > hi => {}
            Some(c) if c >= lo => candidate = hi.checked_add(1),
            _ => break,
        }
    }
    let candidate = candidate.filter(|c| *c <= end)?;
    Some(match prefix {
        IpNet::V4(_) => IpAddr::from(std::net::Ipv4Addr::from(candidate as u32)),
        IpNet::V6(_) => IpAddr::from(std::net::Ipv6Addr::from(candidate)),
    })
}

fn span(net: &IpNet) -> (u128, u128) {
    match net {
        IpNet::V4(n) => (
            u128::from(u32::from(n.network())),
            u128::from(u32::from(n.broadcast())),
        ),
        IpNet::V6(n) => (u128::from(n.network()), u128::from(n.broadcast())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_prefers_hosts_then_longest_world_prefix() {
        let mut store = IdentityStore::new();
        let (any4, _) = store.insert(Identity::world("0.0.0.0/0".parse().unwrap()));
        let (net24, _) = store.insert(Identity::world("192.0.2.0/24".parse().unwrap()));
        let (net28, _) = store.insert(Identity::world("192.0.2.0/28".parse().unwrap()));
        let node = NodeInfo {
            name: "n".into(),
            labels: Default::default(),
        };
        let (host, _) = store.insert(Identity::node(node, "192.0.2.1".parse().unwrap()));
        assert_eq!(store.resolve("192.0.2.1".parse().unwrap()), Some(host));
        assert_eq!(store.resolve("192.0.2.2".parse().unwrap()), Some(net28));
        assert_eq!(store.resolve("192.0.2.200".parse().unwrap()), Some(net24));
        assert_eq!(store.resolve("8.8.8.8".parse().unwrap()), Some(any4));
        assert_eq!(store.resolve("::1".parse().unwrap()), None);
        store.remove(net28);
        assert_eq!(store.resolve("192.0.2.2".parse().unwrap()), Some(net24));
    }

    fn pod(name: &str, app: &str) -> PodInfo {
        PodInfo {
            namespace: "ns".into(),
            name: name.into(),
            labels: crate::labels::Labels::from([("app".to_string(), app.to_string())]).into(),
            namespace_labels: Default::default(),
            node: Some(format!("node-{name}")),
            ports: Vec::new(),
        }
    }

    #[test]
    fn replicas_share_an_identity_until_their_last_address_goes() {
        let mut store = IdentityStore::new();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let c: IpAddr = "10.0.0.3".parse().unwrap();
        let (web1, new1) = store.insert_shared(Identity::pod(pod("w1", "web"), a), vec![]);
        let (web2, new2) = store.insert_shared(Identity::pod(pod("w2", "web"), b), vec![]);
        let (db, _) = store.insert_shared(Identity::pod(pod("d1", "db"), c), vec![]);
        assert!(new1 && !new2);
        assert_eq!(web1, web2);
        assert_ne!(web1, db);
        assert_eq!(store.members(web1).len(), 2);
        assert_eq!(store.resolve(b), Some(web1));
        // The representative names no single pod.
        let rep = store.get(web1).unwrap().as_pod().unwrap();
        assert_eq!((rep.name.as_str(), rep.node.as_deref()), ("", None));
        // Removing the representative's address keeps the identity, represented by the other.
        assert_eq!(store.remove_address(a), Some((web1, None)));
        assert_eq!(store.get(web1).unwrap().prefix.addr(), b);
        let (gone, last) = store.remove_address(b).unwrap();
        assert_eq!(gone, web1);
        assert!(last.is_some());
        assert!(store.get(web1).is_none());
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn different_policy_cidrs_split_replicas() {
        let mut store = IdentityStore::new();
        let net: IpNet = "10.0.0.0/31".parse().unwrap();
        let (inside, _) = store.insert_shared(
            Identity::pod(pod("w1", "web"), "10.0.0.1".parse().unwrap()),
            vec![net],
        );
        let (outside, _) = store.insert_shared(
            Identity::pod(pod("w2", "web"), "10.0.0.2".parse().unwrap()),
            vec![],
        );
        assert_ne!(inside, outside);
    }

    #[test]
    fn representative_addresses_resolve_back() {
        let mut store = IdentityStore::new();
        store.insert(Identity::world("10.0.0.0/30".parse().unwrap()));
        store.insert(Identity::world("10.0.0.0/31".parse().unwrap()));
        store.insert_shared(
            Identity::pod(pod("w1", "web"), "10.0.0.2".parse().unwrap()),
            vec![],
        );
        let reps = store.representative_addresses();
        assert_eq!(reps.len(), 3);
        for (id, ip) in reps {
            assert_eq!(store.resolve(ip), Some(id), "{ip}");
        }
    }

    /// Found by fuzzing: `::/0` wholly covered by `::/1` and `8000::/1` has no address of its
    /// own; the last hole ends at the top of the address space.
    #[test]
    fn a_world_prefix_covered_up_to_the_last_address_has_no_representative() {
        let mut store = IdentityStore::new();
        let (all, _) = store.insert(Identity::world("::/0".parse().unwrap()));
        store.insert(Identity::world("::/1".parse().unwrap()));
        store.insert(Identity::world("8000::/1".parse().unwrap()));
        let reps = store.representative_addresses();
        assert_eq!(reps.len(), 2);
        assert!(!reps.contains_key(&all), "{:?}", reps.get(&all));
        for (id, ip) in reps {
            assert_eq!(store.resolve(ip), Some(id), "{ip}");
        }
    }

    #[test]
    fn equal_identities_share_an_id() {
        let mut store = IdentityStore::new();
        let a = store.insert(Identity::world("10.0.0.0/8".parse().unwrap()));
        let b = store.insert(Identity::world("10.1.0.0/8".parse().unwrap()));
        assert_eq!(a.0, b.0);
        assert!(a.1 && !b.1);
    }
}
