//! Identities: what a policy peer can select. A pod or node address, or a prefix outside the
//! cluster. Each identity carries exactly one prefix (a pod's IPv4 and IPv6 addresses are two
//! identities with the same labels), so that CIDR peers match per address family exactly.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::labels::Labels;
use crate::ports::NamedPort;

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
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    pub labels: Labels,
    /// The namespace's labels, including `kubernetes.io/metadata.name`.
    pub namespace_labels: Labels,
    pub node: Option<String>,
    pub ports: Vec<NamedPort>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeInfo {
    pub name: String,
    pub labels: Labels,
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
    /// A host prefix (/32, /128) for pods and nodes; the CIDR for world identities.
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

/// All identities known to the engine, with an address index that resolves an IP the way the
/// datapath would: an exact pod or node address first, else the longest world prefix.
#[derive(Clone, Debug, Default)]
pub struct IdentityStore {
    next: u32,
    by_id: BTreeMap<IdentityId, Identity>,
    by_value: HashMap<Identity, IdentityId>,
    hosts: HashMap<IpAddr, IdentityId>,
    world: BTreeMap<IpNet, IdentityId>,
}

impl IdentityStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Inserts an identity, returning its id and whether it is new. Inserting an equal identity
    /// twice returns the first id.
    pub fn insert(&mut self, identity: Identity) -> (IdentityId, bool) {
        if let Some(id) = self.by_value.get(&identity) {
            return (*id, false);
        }
        let id = IdentityId(self.next);
        self.next += 1;
        match identity.kind {
            IdentityKind::World => {
                self.world.insert(identity.prefix, id);
            }
            _ => {
                self.hosts.insert(identity.prefix.addr(), id);
            }
        }
        self.by_value.insert(identity.clone(), id);
        self.by_id.insert(id, identity);
        (id, true)
    }

    pub fn remove(&mut self, id: IdentityId) -> Option<Identity> {
        let identity = self.by_id.remove(&id)?;
        self.by_value.remove(&identity);
        match identity.kind {
            IdentityKind::World => {
                self.world.remove(&identity.prefix);
            }
            _ => {
                if self.hosts.get(&identity.prefix.addr()) == Some(&id) {
                    self.hosts.remove(&identity.prefix.addr());
                }
            }
        }
        Some(identity)
    }

    pub fn get(&self, id: IdentityId) -> Option<&Identity> {
        self.by_id.get(&id)
    }

    pub fn id_of(&self, identity: &Identity) -> Option<IdentityId> {
        self.by_value.get(identity).copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = (IdentityId, &Identity)> {
        self.by_id.iter().map(|(id, i)| (*id, i))
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn world_prefixes(&self) -> impl Iterator<Item = (&IpNet, &IdentityId)> {
        self.world.iter()
    }

    /// The identity of an address: the pod or node that owns it, else the longest world prefix
    /// holding it. None only when no world identity covers the address family.
    pub fn resolve(&self, ip: IpAddr) -> Option<IdentityId> {
        if let Some(id) = self.hosts.get(&ip) {
            return Some(*id);
        }
        let max_len = if ip.is_ipv4() { 32 } else { 128 };
        (0..=max_len).rev().find_map(|len| {
            let net = IpNet::new(ip, len).ok()?.trunc();
            self.world.get(&net).copied()
        })
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
            labels: Labels::new(),
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

    #[test]
    fn equal_identities_share_an_id() {
        let mut store = IdentityStore::new();
        let a = store.insert(Identity::world("10.0.0.0/8".parse().unwrap()));
        let b = store.insert(Identity::world("10.1.0.0/8".parse().unwrap()));
        assert_eq!(a.0, b.0);
        assert!(a.1 && !b.1);
    }
}
