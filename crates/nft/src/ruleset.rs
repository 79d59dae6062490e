//! The nftables model of netpol's table: one ingress and one egress chain per endpoint, built
//! from the compiler's ordered rules.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use netpol_datapath::{OrderedRule, RemoteSet, RuleAction};
use netpol_engine::reference::Reason;
use netpol_engine::IdentityStore;

use crate::log_settings::DropLog;

pub use crate::sets::{AddressSet, SetCache, SetRef};
use netpol_engine::{Direction, Protocol};

/// What a matching chain rule does. Allow is `return` (to the dispatch chain, which then consults the
/// other side of the flow), block is `drop`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChainVerdict {
    Return,
    Drop,
    /// A deny rule of an audit chain ([`EndpointChains::audit`]): what it matches passes, and
    /// is counted and logged as `would-deny`.
    WouldDeny,
}

/// A remote-address match: the packet's source (ingress) or destination (egress) in a set.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RemoteMatch {
    /// True for `saddr` (the remote sends: ingress), false for `daddr` (egress).
    pub source: bool,
    pub set: SetRef,
}

impl RemoteMatch {
    pub fn is_v6(&self) -> bool {
        self.set.v6
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

/// One endpoint's chains. The rule lists are shared: replicas on one node have one compiled
/// list, whose chains are built once and held by each.
///
/// **Audit mode.** Where an audited policy could deny a direction, that direction also has an
/// *audit chain*: the endpoint's would-be rules (`netpol_engine::audit`: every policy enforced),
/// their denies made [`ChainVerdict::WouldDeny`]. Every allow of the enforced chain goes to it
/// (`goto`), so it sees exactly what the enforced verdict allows, and its first match is the
/// would-be verdict: a would-deny (counted, logged, passed) where that denies, a plain return
/// where it allows. Its own allows shadow its denies as in any first-match list, so an audited
/// allow ahead of an audited deny is no would-deny. A deny of the enforced chain never reaches
/// it: what the enforced verdict denies is an ordinary deny.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointChains {
    pub addresses: Vec<IpAddr>,
    pub ingress: Arc<[ChainRule]>,
    pub egress: Arc<[ChainRule]>,
    /// The audit chains, ingress then egress; empty where nothing could be a would-deny.
    pub audit: [Arc<[ChainRule]>; 2],
}

impl EndpointChains {
    /// The chains for `rules` (any order; they are sorted by priority, stable within one), each
    /// remote set named as `name_set` says.
    pub fn build(
        addresses: Vec<IpAddr>,
        rules: &[OrderedRule],
        mut name_set: impl FnMut(&RemoteSet) -> SetRef,
    ) -> Self {
        let mut sorted: Vec<&OrderedRule> = rules.iter().collect();
        sorted.sort_by_key(|r| r.priority);
        let mut chain = |direction: Direction| -> Arc<[ChainRule]> {
            sorted
                .iter()
                .filter(|r| r.direction == direction)
                .map(|r| chain_rule(r, &mut name_set))
                .collect()
        };
        EndpointChains {
            addresses,
            ingress: chain(Direction::Ingress),
            egress: chain(Direction::Egress),
            audit: Default::default(),
        }
    }

    /// These chains as would-be rules for [`EndpointChains::with_audit`]: denies become
    /// would-denies.
    pub fn as_would_be(&self) -> Self {
        let would_be = |chain: &Arc<[ChainRule]>| -> Arc<[ChainRule]> {
            chain
                .iter()
                .map(|rule| ChainRule {
                    verdict: match rule.verdict {
                        ChainVerdict::Drop => ChainVerdict::WouldDeny,
                        other => other,
                    },
                    ..rule.clone()
                })
                .collect()
        };
        EndpointChains {
            addresses: self.addresses.clone(),
            ingress: would_be(&self.ingress),
            egress: would_be(&self.egress),
            audit: Default::default(),
        }
    }

    /// These chains with the audit chains of `would_be` (made by
    /// [`EndpointChains::as_would_be`]), in each direction where a would-deny can happen: the
    /// would-be chain has a would-deny and differs from the enforced chain otherwise than by
    /// its denies being would-denies (where it does not, it denies exactly what is denied now).
    pub fn with_audit(mut self, would_be: &EndpointChains) -> Self {
        self.audit = Direction::BOTH.map(|direction| {
            let audit = would_be.chain_arc(direction);
            let enforced = self.chain(direction);
            let can_would_deny = audit.iter().any(|r| r.verdict == ChainVerdict::WouldDeny);
            let same = audit.len() == enforced.len()
                && audit.iter().zip(enforced).all(|(a, e)| {
                    let verdict = match a.verdict {
                        ChainVerdict::WouldDeny => ChainVerdict::Drop,
                        other => other,
                    };
                    verdict == e.verdict
                        && (&a.remote, a.protocol, &a.dports) == (&e.remote, e.protocol, &e.dports)
                });
            if can_would_deny && !same {
                Arc::clone(audit)
            } else {
                Arc::default()
            }
        });
        self
    }

    /// The same chains for other addresses (a twin's).
    pub fn for_addresses(&self, addresses: Vec<IpAddr>) -> Self {
        EndpointChains {
            addresses,
            ingress: self.ingress.clone(),
            egress: self.egress.clone(),
            audit: self.audit.clone(),
        }
    }

    /// Whether `other` has the same addresses and the same chain rules: what the kernel's
    /// chains hold (a set is named, its elements are the set's), so two such endpoints differ
    /// at most in set elements.
    pub fn same_chains(&self, other: &EndpointChains) -> bool {
        self == other
    }

    /// How many rules the chains hold, audit chains included.
    pub fn rules(&self) -> usize {
        self.ingress.len() + self.egress.len() + self.audit.iter().map(|a| a.len()).sum::<usize>()
    }

    pub fn chain(&self, direction: Direction) -> &[ChainRule] {
        self.chain_arc(direction)
    }

    fn chain_arc(&self, direction: Direction) -> &Arc<[ChainRule]> {
        match direction {
            Direction::Ingress => &self.ingress,
            Direction::Egress => &self.egress,
        }
    }

    /// The audit chain of `direction`: empty where nothing could be a would-deny.
    pub fn audit(&self, direction: Direction) -> &[ChainRule] {
        match direction {
            Direction::Ingress => &self.audit[0],
            Direction::Egress => &self.audit[1],
        }
    }

    /// The sets the chains name, audit chains included.
    pub fn sets(&self) -> impl Iterator<Item = &SetRef> {
        self.ingress
            .iter()
            .chain(self.egress.iter())
            .chain(self.audit.iter().flat_map(|a| a.iter()))
            .filter_map(|r| r.remote.as_ref().map(|m| &m.set))
    }
}

/// The chain rule of one ordered rule. A rule whose remote set holds no address now is kept: it
/// references an empty set, which matches nothing, and needs no chain change when a first
/// replica appears.
fn chain_rule(rule: &OrderedRule, name_set: &mut impl FnMut(&RemoteSet) -> SetRef) -> ChainRule {
    let verdict = match rule.action {
        RuleAction::Allow => ChainVerdict::Return,
        RuleAction::Block => ChainVerdict::Drop,
    };
    let dports = if rule.names_ports() && rule.protocol.is_some_and(Protocol::has_ports) {
        rule.ports.clone()
    } else {
        Vec::new()
    };
    ChainRule {
        remote: rule.remotes.as_ref().map(|set| RemoteMatch {
            source: rule.direction == Direction::Ingress,
            set: name_set(set),
        }),
        protocol: rule.protocol,
        dports,
        verdict,
        reason: rule.reason.clone(),
    }
}

/// netpol's whole table: every endpoint's chains, by endpoint key, the endpoints whose chains
/// the kernel refused, isolated until they load, and the contents of the sets chains name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ruleset {
    pub endpoints: BTreeMap<String, EndpointChains>,
    /// Endpoints whose chains could not be loaded, by key, with their addresses: every new flow
    /// from or to them is dropped (see [`Ruleset::isolate`]).
    pub isolated: BTreeMap<String, Vec<IpAddr>>,
    /// The contents of the sets the chains name (and perhaps more), by name.
    pub sets: BTreeMap<Arc<str>, Arc<AddressSet>>,
    /// Where drop rules log, and how fast.
    pub drop_log: DropLog,
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
    /// Adds endpoint `key` with the chains of `rules`, and the sets they name, resolved through
    /// `store` under their canonical names.
    pub fn add(
        &mut self,
        key: impl Into<String>,
        addresses: Vec<IpAddr>,
        rules: &[OrderedRule],
        store: &IdentityStore,
    ) {
        self.add_cached(key, addresses, rules, store, &mut SetCache::default());
    }

    /// [`Ruleset::add`], with sets resolved through `cache` (kept across tables).
    pub fn add_cached(
        &mut self,
        key: impl Into<String>,
        addresses: Vec<IpAddr>,
        rules: &[OrderedRule],
        store: &IdentityStore,
        cache: &mut SetCache,
    ) {
        let sets = &mut self.sets;
        let chains = EndpointChains::build(addresses, rules, |set| {
            let model = cache.resolve(set, store);
            let reference = model.reference();
            sets.insert(model.name.clone(), model);
            reference
        });
        self.endpoints.insert(key.into(), chains);
    }

    /// [`Ruleset::add`] with audit chains from the endpoint's would-be rules `would_be`
    /// ([`EndpointChains::with_audit`]), on the same identities.
    pub fn add_audited(
        &mut self,
        key: impl Into<String>,
        addresses: Vec<IpAddr>,
        rules: &[OrderedRule],
        would_be: &[OrderedRule],
        store: &IdentityStore,
    ) {
        let mut cache = SetCache::default();
        let sets = &mut self.sets;
        let mut name_set = |set: &RemoteSet| {
            let model = cache.resolve(set, store);
            let reference = model.reference();
            sets.insert(model.name.clone(), model);
            reference
        };
        let audit = EndpointChains::build(Vec::new(), would_be, &mut name_set).as_would_be();
        let chains = EndpointChains::build(addresses, rules, &mut name_set).with_audit(&audit);
        self.endpoints.insert(key.into(), chains);
    }

    /// Adds endpoint `key` with `chains`, whose sets must be in [`Ruleset::sets`].
    pub fn insert(&mut self, key: impl Into<String>, chains: EndpointChains) {
        self.endpoints.insert(key.into(), chains);
    }

    /// Whether the set `set` names holds `address` (an unknown set holds nothing).
    pub fn set_holds(&self, set: &SetRef, address: IpAddr) -> bool {
        self.sets
            .get(&set.name)
            .is_some_and(|s| s.nets.iter().any(|n| n.contains(&address)))
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
