//! Selectors over endpoints (policy subjects) and over peers (remote identities).

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::identity::{Identity, IdentityKind, PodInfo};
use crate::labels::{LabelSelector, NAMESPACE_NAME_LABEL};
use crate::prefixes::PrefixSet;

/// Selects pods by their namespace's labels and their own labels (both must match).
/// A namespace is pinned by selecting its `kubernetes.io/metadata.name` label.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PodSelector {
    pub namespaces: LabelSelector,
    pub pods: LabelSelector,
}

impl PodSelector {
    /// Every pod of every namespace.
    pub fn all() -> Self {
        Self::default()
    }

    /// Pods of one namespace matching `pods`.
    pub fn in_namespace(namespace: &str, pods: LabelSelector) -> Self {
        Self {
            namespaces: LabelSelector::from_labels([(NAMESPACE_NAME_LABEL, namespace)]),
            pods,
        }
    }

    pub fn matches(&self, pod: &PodInfo) -> bool {
        self.namespaces.matches(&pod.namespace_labels) && self.pods.matches(&pod.labels)
    }
}

impl std::fmt::Display for PodSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pods {} in namespaces {}", self.pods, self.namespaces)
    }
}

/// Which addresses a CIDR peer can match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AddressScope {
    /// Every address in the prefix, pods and nodes included (NetworkPolicy `ipBlock`,
    /// admin `networks`).
    Any,
    /// Only addresses outside the cluster (Cilium `toCIDR`/`toCIDRSet`).
    OutsideCluster,
}

/// A prefix minus exceptions. Exceptions lie inside the prefix (translators check it).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CidrSelector {
    pub net: IpNet,
    pub except: PrefixSet,
    pub scope: AddressScope,
}

impl CidrSelector {
    /// Whether the whole of `prefix` lies inside this selector. Identities are prefixes that never
    /// straddle an exception, because every exception is itself registered as a world identity.
    pub fn covers(&self, prefix: &IpNet) -> bool {
        self.net.contains(prefix) && !self.except.contains(prefix)
    }

    /// Whether this selector selects `identity` (see [`Peer::selects_ignoring_node`]).
    pub fn selects(&self, identity: &Identity) -> bool {
        (self.scope == AddressScope::Any || matches!(identity.kind, IdentityKind::World))
            && self.covers(&identity.prefix)
    }
}

/// What one selector of the selector cache stands for in an entry: one of its peers other than
/// a CIDR one, or all its CIDR peers together. A rule is made per group, so an entry of 50,000
/// `/32` peers is one selector and one rule per endpoint, not 50,000 of each (issue 33): its
/// prefixes cost their place in the shared prefix index, not a selector each. The peers of
/// one entry share the entry's ports, order and verdict, so the union decides as they did.
#[derive(Clone, Copy, Debug)]
pub enum PeerGroup<'a> {
    One(&'a Peer),
    /// The entry's peers, of which the CIDR ones are the group (at least one).
    Cidrs(&'a [Peer]),
}

impl<'a> PeerGroup<'a> {
    /// The groups of an entry's peers: each non-CIDR peer, then the CIDR peers if any.
    pub fn of_entry(peers: &'a [Peer]) -> impl Iterator<Item = PeerGroup<'a>> + 'a {
        let cidrs = peers
            .iter()
            .any(|p| matches!(p, Peer::Cidr(_)))
            .then_some(PeerGroup::Cidrs(peers));
        peers
            .iter()
            .filter(|p| !matches!(p, Peer::Cidr(_)))
            .map(PeerGroup::One)
            .chain(cidrs)
    }

    /// The CIDR selectors of a CIDR group, in the entry's order; none for one peer.
    pub fn cidrs(self) -> impl Iterator<Item = &'a CidrSelector> + 'a {
        let peers = match self {
            PeerGroup::Cidrs(peers) => peers,
            PeerGroup::One(_) => &[],
        };
        peers.iter().filter_map(|p| match p {
            Peer::Cidr(c) => Some(c),
            _ => None,
        })
    }

    /// What a rule for this group needs of its peers ([`PeerReach`]).
    pub fn reach(self) -> PeerReach {
        match self {
            PeerGroup::One(peer) => PeerReach::of(peer),
            PeerGroup::Cidrs(_) => PeerReach::Selected,
        }
    }
}

/// Cilium-style entities, relative to the selecting endpoint where it matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Entity {
    /// Every identity, inside and outside the cluster. This is the wildcard identity.
    All,
    /// Every address outside the cluster.
    World,
    /// Every pod and node.
    Cluster,
    /// The node the selecting endpoint runs on.
    Host,
    /// Every node except the one the selecting endpoint runs on.
    RemoteNode,
}

/// A peer of a rule: the set of remote identities it selects.
///
/// A policy may hold tens of thousands of CIDR peers, one a prefix, so the enum is kept as small
/// as a CIDR selector: the label-selector variants, rare and large, are boxed (the serde form is
/// the same). The size is pinned below.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Peer {
    Pods(Box<PodSelector>),
    Nodes(Box<LabelSelector>),
    Cidr(CidrSelector),
    Entity(Entity),
}

/// What one peer costs inline (a prefix, its exceptions' pointer and its scope). A larger `Peer`
/// multiplies the memory of every CIDR-heavy policy (issue 33).
const _: () = assert!(std::mem::size_of::<Peer>() <= 32);

impl Peer {
    pub fn pods(selector: PodSelector) -> Peer {
        Peer::Pods(Box::new(selector))
    }

    pub fn nodes(selector: LabelSelector) -> Peer {
        Peer::Nodes(Box::new(selector))
    }

    /// Whether the peer selects `identity` for an endpoint on `local_node`. Host-relative
    /// entities need the node; everything else ignores it.
    pub fn selects(&self, identity: &Identity, local_node: Option<&str>) -> bool {
        self.selects_ignoring_node(identity) && self.node_relation_holds(identity, local_node)
    }

    /// The part of selection that does not depend on the selecting endpoint. The selector cache
    /// stores this; [`Peer::node_relation_holds`] narrows it per endpoint.
    pub fn selects_ignoring_node(&self, identity: &Identity) -> bool {
        match (self, &identity.kind) {
            (Peer::Pods(sel), IdentityKind::Pod(pod)) => sel.matches(pod),
            (Peer::Nodes(sel), IdentityKind::Node(node)) => sel.matches(&node.labels),
            (Peer::Cidr(c), _) => c.selects(identity),
            (Peer::Entity(Entity::All), _) => true,
            (Peer::Entity(Entity::World), IdentityKind::World) => true,
            (Peer::Entity(Entity::Cluster), IdentityKind::Pod(_) | IdentityKind::Node(_)) => true,
            (Peer::Entity(Entity::Host | Entity::RemoteNode), IdentityKind::Node(_)) => true,
            _ => false,
        }
    }

    /// True unless the peer is host-relative and the identity is on the wrong side.
    pub fn node_relation_holds(&self, identity: &Identity, local_node: Option<&str>) -> bool {
        PeerReach::of(self).node_relation_holds(identity, local_node)
    }

    pub fn is_node_relative(&self) -> bool {
        matches!(self, Peer::Entity(Entity::Host | Entity::RemoteNode))
    }

    /// The wildcard peer: it selects every identity, so the MapState keys it as identity `*`.
    pub fn is_wildcard(&self) -> bool {
        matches!(self, Peer::Entity(Entity::All))
    }

    /// Prefixes this peer names, which must exist as world identities for exact matching.
    /// An iterator, not a list: a CIDR-heavy policy's 50,000 peers are walked at every change
    /// that touches them, and a list each was an allocation each.
    pub fn prefixes(&self) -> impl Iterator<Item = IpNet> + '_ {
        let cidr = match self {
            Peer::Cidr(c) => Some(c),
            _ => None,
        };
        cidr.into_iter()
            .flat_map(|c| std::iter::once(c.net).chain(c.except.iter().copied()))
            .map(|n| n.trunc())
    }
}

/// What a rule needs of its peer beyond the identities its selector selects: whether it is the
/// wildcard, and whether it is relative to the endpoint's node. One byte, not the peer: an
/// endpoint has a rule per peer, and a policy may have 50,000 CIDR peers (issue 33).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PeerReach {
    /// Every identity: the MapState keys it as identity `*`.
    Wildcard,
    /// The endpoint's own node ([`Entity::Host`]).
    Host,
    /// Every node but the endpoint's ([`Entity::RemoteNode`]).
    RemoteNode,
    /// What its selector selects.
    Selected,
}

impl PeerReach {
    pub fn of(peer: &Peer) -> PeerReach {
        match peer {
            Peer::Entity(Entity::All) => PeerReach::Wildcard,
            Peer::Entity(Entity::Host) => PeerReach::Host,
            Peer::Entity(Entity::RemoteNode) => PeerReach::RemoteNode,
            _ => PeerReach::Selected,
        }
    }

    /// See [`Peer::is_wildcard`].
    pub fn is_wildcard(self) -> bool {
        self == PeerReach::Wildcard
    }

    /// See [`Peer::node_relation_holds`].
    pub fn node_relation_holds(self, identity: &Identity, local_node: Option<&str>) -> bool {
        let node_name = identity.as_node().map(|n| n.name.as_str());
        match self {
            PeerReach::Host => node_name.is_some() && node_name == local_node,
            PeerReach::RemoteNode => node_name.is_some() && node_name != local_node,
            PeerReach::Wildcard | PeerReach::Selected => true,
        }
    }
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Pods(p) => write!(f, "{p}"),
            Peer::Nodes(n) => write!(f, "nodes {n}"),
            Peer::Cidr(c) => {
                write!(f, "cidr {}", c.net)?;
                if !c.except.is_empty() {
                    let ex: Vec<String> = c.except.iter().map(|e| e.to_string()).collect();
                    write!(f, " except {}", ex.join(","))?;
                }
                if c.scope == AddressScope::OutsideCluster {
                    write!(f, " (outside cluster)")?;
                }
                Ok(())
            }
            Peer::Entity(e) => write!(f, "entity {e:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::NodeInfo;
    use crate::labels::Labels;

    fn pod(ns: &str, labels: &[(&str, &str)]) -> Identity {
        let mut ns_labels = Labels::new();
        ns_labels.insert(NAMESPACE_NAME_LABEL.into(), ns.into());
        Identity::pod(
            PodInfo {
                namespace: ns.into(),
                name: "p".into(),
                labels: labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<Labels>()
                    .into(),
                namespace_labels: ns_labels.into(),
                node: Some("n1".into()),
                ports: vec![],
            },
            "10.1.1.1".parse().unwrap(),
        )
    }

    fn node(name: &str) -> Identity {
        Identity::node(
            NodeInfo {
                name: name.into(),
                labels: Default::default(),
            },
            "10.0.0.1".parse().unwrap(),
        )
    }

    #[test]
    fn cidr_scope_any_matches_pods_but_outside_cluster_does_not() {
        let any = Peer::Cidr(CidrSelector {
            net: "10.0.0.0/8".parse().unwrap(),
            except: PrefixSet::default(),
            scope: AddressScope::Any,
        });
        let outside = Peer::Cidr(CidrSelector {
            net: "10.0.0.0/8".parse().unwrap(),
            except: PrefixSet::default(),
            scope: AddressScope::OutsideCluster,
        });
        let p = pod("x", &[]);
        assert!(any.selects(&p, None));
        assert!(!outside.selects(&p, None));
        let w = Identity::world("10.9.0.0/16".parse().unwrap());
        assert!(any.selects(&w, None));
        assert!(outside.selects(&w, None));
    }

    #[test]
    fn except_removes_covered_prefixes_only() {
        let c = CidrSelector {
            net: "10.1.0.0/16".parse().unwrap(),
            except: vec!["10.1.1.0/24".parse().unwrap()].into(),
            scope: AddressScope::Any,
        };
        assert!(c.covers(&"10.1.2.0/24".parse().unwrap()));
        assert!(!c.covers(&"10.1.1.5/32".parse().unwrap()));
        assert!(c.covers(&"10.1.0.0/16".parse().unwrap()));
        assert!(!c.covers(&"10.0.0.0/8".parse().unwrap()));
    }

    #[test]
    fn host_entities_are_relative_to_the_local_node() {
        let n1 = node("n1");
        assert!(Peer::Entity(Entity::Host).selects(&n1, Some("n1")));
        assert!(!Peer::Entity(Entity::Host).selects(&n1, Some("n2")));
        assert!(Peer::Entity(Entity::RemoteNode).selects(&n1, Some("n2")));
        assert!(!Peer::Entity(Entity::RemoteNode).selects(&n1, Some("n1")));
        assert!(!Peer::Entity(Entity::Host).selects(&pod("x", &[]), Some("n1")));
    }

    #[test]
    fn pod_selector_ands_namespace_and_pod_labels() {
        let sel = Peer::pods(PodSelector::in_namespace(
            "x",
            LabelSelector::from_labels([("app", "web")]),
        ));
        assert!(sel.selects(&pod("x", &[("app", "web")]), None));
        assert!(!sel.selects(&pod("y", &[("app", "web")]), None));
        assert!(!sel.selects(&pod("x", &[("app", "db")]), None));
        assert!(!sel.selects(&node("n1"), None));
    }
}
