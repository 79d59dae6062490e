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
use netpol_engine::{Direction, Protocol};

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

/// One rule of an endpoint's ordered list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderedRule {
    pub direction: Direction,
    pub action: RuleAction,
    /// Ascending: lower runs first.
    pub priority: u16,
    /// [`Family::Any`] exactly when `remotes` is empty.
    pub family: Family,
    /// None: every protocol.
    pub protocol: Option<Protocol>,
    /// Merged, sorted inclusive ranges of the endpoint's port (ingress) or the remote's port
    /// (egress): the packet's destination port either way. `[(0, 65535)]` is every port.
    pub ports: Vec<(u16, u16)>,
    /// Aggregated remote prefixes, all of `family`; empty: every remote.
    pub remotes: Vec<IpNet>,
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
}
