//! The nftables model of netpol's table: one ingress and one egress chain per endpoint, built
//! from the compiler's ordered rules.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use netpol_datapath::{sets, OrderedRule, RuleAction};
use netpol_engine::reference::Reason;
use netpol_engine::IdentityStore;
use netpol_engine::{Direction, Protocol};

/// What a matching chain rule does. Allow is `return` (to the dispatch chain, which then consults the
/// other side of the flow), block is `drop`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChainVerdict {
    Return,
    Drop,
}

/// A remote-address match: the packet's source (ingress) or destination (egress) in a set.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RemoteMatch {
    /// True for `saddr` (the remote sends: ingress), false for `daddr` (egress).
    pub source: bool,
    /// Non-empty, all of one family.
    pub nets: Vec<IpNet>,
}

impl RemoteMatch {
    pub fn is_v6(&self) -> bool {
        matches!(self.nets[0], IpNet::V6(_))
    }
}

/// One rule of an endpoint chain; every present match must hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainRule {
    pub remote: Option<RemoteMatch>,
    pub protocol: Option<Protocol>,
    /// Destination port ranges; empty: every port.
    pub dports: Vec<(u16, u16)>,
    pub verdict: ChainVerdict,
    /// Why the rule exists (not rendered; explains a packet's fate).
    pub reason: Arc<Reason>,
}

/// One endpoint's chains.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointChains {
    pub addresses: Vec<IpAddr>,
    pub ingress: Vec<ChainRule>,
    pub egress: Vec<ChainRule>,
}

impl EndpointChains {
    /// The chains for `rules` (any order; they are sorted by priority, stable within one), their
    /// remote sets resolved through the ipcache `store`.
    pub fn new(addresses: Vec<IpAddr>, rules: &[OrderedRule], store: &IdentityStore) -> Self {
        let mut sorted: Vec<&OrderedRule> = rules.iter().collect();
        sorted.sort_by_key(|r| r.priority);
        let chain = |direction: Direction| -> Vec<ChainRule> {
            sorted
                .iter()
                .filter(|r| r.direction == direction)
                .flat_map(|r| chain_rules(r, store))
                .collect()
        };
        EndpointChains {
            addresses,
            ingress: chain(Direction::Ingress),
            egress: chain(Direction::Egress),
        }
    }

    /// How many rules both chains hold.
    pub fn rules(&self) -> usize {
        self.ingress.len() + self.egress.len()
    }

    pub fn chain(&self, direction: Direction) -> &[ChainRule] {
        match direction {
            Direction::Ingress => &self.ingress,
            Direction::Egress => &self.egress,
        }
    }
}

/// The chain rules of one ordered rule: one, or none if its remote set holds no address now.
fn chain_rules(rule: &OrderedRule, store: &IdentityStore) -> Vec<ChainRule> {
    let verdict = match rule.action {
        RuleAction::Allow => ChainVerdict::Return,
        RuleAction::Block => ChainVerdict::Drop,
    };
    let dports = if rule.names_ports() && rule.protocol.is_some_and(Protocol::has_ports) {
        rule.ports.clone()
    } else {
        Vec::new()
    };
    let make = |remote| ChainRule {
        remote,
        protocol: rule.protocol,
        dports: dports.clone(),
        verdict,
        reason: rule.reason.clone(),
    };
    let Some(set) = &rule.remotes else {
        return vec![make(None)];
    };
    let nets = sets::addresses(set, store);
    if nets.is_empty() {
        return Vec::new();
    }
    let source = rule.direction == Direction::Ingress;
    vec![make(Some(RemoteMatch { source, nets }))]
}

/// netpol's whole table: every endpoint's chains, by endpoint key, and the endpoints whose
/// chains the kernel refused, isolated until they load.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ruleset {
    pub endpoints: BTreeMap<String, EndpointChains>,
    /// Endpoints whose chains could not be loaded, by key, with their addresses: every new flow
    /// from or to them is dropped (see [`Ruleset::isolate`]).
    pub isolated: BTreeMap<String, Vec<IpAddr>>,
}

/// Where an address leads in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holder<'a> {
    /// A programmed endpoint and its chains.
    Chains(&'a str, &'a EndpointChains),
    /// An isolated endpoint: new flows are dropped.
    Isolated(&'a str),
}

impl Ruleset {
    pub fn insert(&mut self, key: impl Into<String>, chains: EndpointChains) {
        self.endpoints.insert(key.into(), chains);
    }

    /// Replaces the chains of endpoint `key` by isolation: new flows from and to its addresses
    /// are dropped, connections already established continue. For an endpoint whose chains the
    /// kernel refused: failing closed for it alone keeps every other endpoint programmed, and
    /// never lets through what its policies would have denied.
    pub fn isolate(&mut self, key: &str) {
        if let Some(chains) = self.endpoints.remove(key) {
            self.isolated.insert(key.to_string(), chains.addresses);
        }
    }

    /// The endpoint holding `address`, if any.
    pub fn holder_of(&self, address: IpAddr) -> Option<Holder<'_>> {
        if let Some((key, chains)) = self
            .endpoints
            .iter()
            .find(|(_, e)| e.addresses.contains(&address))
        {
            return Some(Holder::Chains(key, chains));
        }
        self.isolated
            .iter()
            .find(|(_, addresses)| addresses.contains(&address))
            .map(|(key, _)| Holder::Isolated(key))
    }

    /// Every (address, endpoint key) the table dispatches on, isolated endpoints included.
    pub fn addresses(&self) -> impl Iterator<Item = (IpAddr, &str)> {
        let programmed = self
            .endpoints
            .iter()
            .flat_map(|(k, e)| e.addresses.iter().map(move |a| (*a, k.as_str())));
        let isolated = self
            .isolated
            .iter()
            .flat_map(|(k, addresses)| addresses.iter().map(move |a| (*a, k.as_str())));
        programmed.chain(isolated)
    }
}
