//! The datapath-neutral form of a compiled endpoint: ordered rules with an action and a priority,
//! before any datapath's syntax. The HCN renderer (`netpol_hcn::render`) turns each into ACL
//! settings; the nftables datapath (`netpol_nft::ruleset`) turns the same list into chain rules.
//!
//! Semantics, shared by every backend: rules of one direction are evaluated by ascending
//! priority and the first rule that matches decides. Rules of one priority never overlap with
//! different actions, so their order inside a priority does not matter.

use std::sync::Arc;

use ipnet::IpNet;
use netpol_engine::reference::Reason;
use netpol_engine::Shared;
use netpol_engine::{Direction, IdentityId, Protocol};

/// What a matching rule does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RuleAction {
    Allow,
    Block,
}

/// The address family a rule is limited to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// Both families (the rule names no remote addresses).
    Any,
    V4,
    V6,
}

impl Family {
    pub fn of(address: &IpNet) -> Family {
        match address {
            IpNet::V4(_) => Family::V4,
            IpNet::V6(_) => Family::V6,
        }
    }
}

/// The remote addresses a rule matches, named by identity: every member address of these
/// identities in one family (a pod identity's replicas, a node, a world prefix). The set is
/// symbolic: a replica joining an identity changes the addresses behind it, not the rule, so a
/// datapath updates the set's contents and leaves its rules alone (`crate::sets` resolves a set
/// to its addresses).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RemoteSet {
    /// [`Family::V4`] or [`Family::V6`].
    pub family: Family,
    /// Sorted, without duplicates, never empty.
    pub identities: Vec<IdentityId>,
}

/// Hashes the family, the length and a few identities, not all: datapaths look sets up by
/// content for every rule of every endpoint on each change, and hashing sets of thousands of
/// identities whole was a third of an nftables replica at 150,000 pods. Equality still compares
/// every identity (one `memcmp`), so a collision costs a comparison, never a wrong answer.
impl std::hash::Hash for RemoteSet {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.family.hash(state);
        let ids = &self.identities;
        ids.len().hash(state);
        for index in [0, ids.len() / 4, ids.len() / 2, 3 * ids.len() / 4] {
            ids.get(index).hash(state);
        }
        ids.last().hash(state);
    }
}

impl RemoteSet {
    pub fn contains(&self, id: IdentityId) -> bool {
        self.identities.binary_search(&id).is_ok()
    }
}

/// One rule of an endpoint's ordered list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderedRule {
    pub direction: Direction,
    pub action: RuleAction,
    /// Ascending: lower runs first.
    pub priority: u16,
    /// None: every protocol.
    pub protocol: Option<Protocol>,
    /// Merged, sorted inclusive ranges of the endpoint's port (ingress) or the remote's port
    /// (egress): the packet's destination port either way. `[(0, 65535)]` is every port.
    pub ports: Vec<(u16, u16)>,
    /// The remote addresses the rule matches; None: every remote.
    pub remotes: Option<Shared<RemoteSet>>,
    /// The MapState entry reason of the best-ranked entry the rule carries.
    pub reason: Arc<Reason>,
}

/// Every port, as [`OrderedRule::ports`] writes it.
pub const ALL_PORTS: (u16, u16) = (0, u16::MAX);

impl OrderedRule {
    /// Whether the rule names ports (rather than every port of its protocol).
    pub fn names_ports(&self) -> bool {
        self.ports != [ALL_PORTS]
    }

    /// The address family the rule is limited to: [`Family::Any`] exactly when it matches
    /// every remote.
    pub fn family(&self) -> Family {
        self.remotes.as_ref().map_or(Family::Any, |r| r.family)
    }
}
