//! Address nesting: where a rule for a CIDR identity would also catch addresses of identities
//! inside it.
//!
//! A MapState is looked up by the remote's *identity*: the pod or node owning the address, else
//! the longest world prefix holding it. An HCN rule matches by address containment instead, so a
//! rule for the world identity `10.0.0.0/8` also matches a pod at `10.1.0.11` and the
//! `10.1.0.0/16` identity an `except` clause created. Wherever that changes a verdict, the inner
//! identity gets an *exception list*: its complete decision (its own entries and the wildcard
//! entries) under its own addresses, placed ahead of every rule of its ancestors. Exception lists
//! of deeper identities go first, so each address meets the list of the deepest identity that has
//! one. An identity whose decision the enclosing rules already produce needs nothing.
//!
//! Decisions are compared as functions over every (protocol, port) interval the entries
//! distinguish, so the check is exact, not a heuristic.
//!
//! Placement is per identity and address family, not per address: every member of a pod or node
//! identity lies inside the same policy prefixes (the engine groups addresses that way), so one
//! member stands for all, and a replica joining an identity never changes the placement. The
//! datapath then names the identity's address set and updates its contents.

use std::collections::{BTreeSet, HashMap};

use ipnet::IpNet;
use netpol_engine::prefixes::truncations;
use netpol_engine::{IdentityId, IdentityStore, Protocol};

use super::entries::{DirectionEntries, Entry};
use super::CompileError;
use crate::ordered::{Family, RuleAction};

/// Where each identity's entries go.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Placement {
    /// Identities (in one family) that get a complete decision list under their addresses.
    pub exceptions: Vec<Node>,
    /// Identities (in one family) whose own entries go into the main list.
    pub main: Vec<Node>,
    /// Identities (in one family) inside an exception list, which decides for them.
    pub shadowed: BTreeSet<(IdentityId, Family)>,
    /// The world identities with entries, by prefix: their rules also catch the addresses
    /// inside them.
    pub leaking: Vec<(IpNet, IdentityId)>,
    /// The world prefixes with exception lists: inside one, its list decides.
    pub exception_worlds: Vec<IpNet>,
    /// For each pod or node identity (in one family) inside a leaking prefix and placed in the
    /// main list, the leaking identities enclosing it, sorted: with its own entries, what
    /// decided its place.
    pub enclosure: HashMap<(IdentityId, Family), Vec<IdentityId>>,
}

/// One identity's addresses of one family, at their place in the address hierarchy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Node {
    pub id: IdentityId,
    pub family: Family,
    /// The world prefix, or one member address standing for every member.
    pub prefix: IpNet,
    pub host: bool,
}

impl Node {
    /// One node per family of an identity's addresses: a world prefix, or the members of a pod
    /// or node identity in each family it has members in.
    pub fn all_of(store: &IdentityStore, id: IdentityId) -> Result<Vec<Node>, CompileError> {
        let identity = store.get(id).ok_or(CompileError::UnknownIdentity(id))?;
        if identity.is_world() {
            return Ok(vec![Node {
                id,
                family: Family::of(&identity.prefix),
                prefix: identity.prefix,
                host: false,
            }]);
        }
        Ok([false, true]
            .into_iter()
            .filter_map(|ipv6| store.member_of_family(id, ipv6))
            .map(|prefix| Node {
                id,
                family: Family::of(&prefix),
                prefix,
                host: true,
            })
            .collect())
    }

    /// Deeper identities own their addresses ahead of shallower ones; a pod or node owns its
    /// address ahead of a world /32 naming the same address.
    pub fn depth(&self) -> (u8, bool) {
        (self.prefix.prefix_len(), self.host)
    }

    /// Whether every address of `self` would also match a rule for `outer`.
    fn nested_in(&self, outer: &Node) -> bool {
        outer.prefix.contains(&self.prefix) && self.depth() > outer.depth()
    }

    fn key(&self) -> (IdentityId, Family) {
        (self.id, self.family)
    }
}

/// World nodes by prefix, so that the nodes enclosing another are found among its own
/// truncations (one lookup per distinct length) rather than by testing every node: a policy
/// may carry tens of thousands of prefixes (70,000 `except`s fit in one object), and testing
/// each against each is quadratic. Each node keeps its position of insertion, so callers can
/// keep the order a scan would have given.
#[derive(Default)]
struct Enclosers {
    by_prefix: HashMap<IpNet, Vec<(usize, Node)>>,
    lengths: BTreeSet<u8>,
    count: usize,
}

impl Enclosers {
    fn new<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> Enclosers {
        let mut index = Enclosers::default();
        nodes.into_iter().for_each(|n| index.insert(*n));
        index
    }

    fn insert(&mut self, node: Node) {
        self.by_prefix
            .entry(node.prefix)
            .or_default()
            .push((self.count, node));
        self.lengths.insert(node.prefix.prefix_len());
        self.count += 1;
    }

    /// The nodes `node` is nested in, deepest first, each with its position of insertion.
    fn of<'a>(&'a self, node: &'a Node) -> impl Iterator<Item = &'a (usize, Node)> + 'a {
        truncations(&node.prefix, self.lengths.iter().rev())
            .flat_map(|prefix| self.by_prefix.get(&prefix).into_iter().flatten())
            .filter(|(_, outer)| node.nested_in(outer))
    }
}

/// A (protocol, port) sample point. `protocol: None` stands for protocols netpol cannot name,
/// which only any-protocol entries match.
#[derive(Clone, Copy, Debug)]
struct Point {
    protocol: Option<Protocol>,
    port: u16,
}

fn matches(entry: &Entry, point: &Point) -> bool {
    match entry.key.protocol {
        None => true,
        Some(p) => {
            let (lo, hi) = entry.key.range();
            point.protocol == Some(p) && (lo..=hi).contains(&point.port)
        }
    }
}

/// One point per interval on which no entry's match can change.
fn sample_points(entries: &DirectionEntries) -> Vec<Point> {
    let all = entries
        .wildcard
        .iter()
        .chain(entries.classes.iter().flat_map(|c| &c.entries));
    let mut starts: HashMap<Protocol, BTreeSet<u32>> = Protocol::ALL
        .iter()
        .map(|p| (*p, BTreeSet::from([0u32])))
        .collect();
    for e in all {
        if let Some(p) = e.key.protocol {
            let (lo, hi) = e.key.range();
            let set = starts.entry(p).or_default();
            set.insert(u32::from(lo));
            set.insert(u32::from(hi) + 1);
        }
    }
    let mut points = vec![Point {
        protocol: None,
        port: 0,
    }];
    for p in Protocol::ALL {
        points.extend(
            starts[&p]
                .iter()
                .filter(|s| **s <= u32::from(u16::MAX))
                .map(|s| Point {
                    protocol: Some(p),
                    port: *s as u16,
                }),
        );
    }
    points
}

/// The action first match over the union of `sets` takes at `point`. Each set is sorted best
/// first, so its first match is its best; the best of those wins. No match allows, as the
/// lookup's default does.
fn decide(point: &Point, sets: &[&[Entry]]) -> RuleAction {
    sets.iter()
        .filter_map(|set| set.iter().find(|e| matches(e, point)))
        .max_by_key(|e| e.rank())
        .map_or(RuleAction::Allow, Entry::action)
}

/// A decision over every sample point.
type DecisionVector = Vec<RuleAction>;

struct Analysis<'a> {
    entries: &'a DirectionEntries,
    points: Vec<Point>,
    own_decision: HashMap<Option<usize>, DecisionVector>,
    main_decision: HashMap<(Option<usize>, Vec<IdentityId>), DecisionVector>,
}

impl<'a> Analysis<'a> {
    fn new(entries: &'a DirectionEntries) -> Self {
        Analysis {
            entries,
            points: sample_points(entries),
            own_decision: HashMap::new(),
            main_decision: HashMap::new(),
        }
    }

    fn own(&self, id: IdentityId) -> &'a [Entry] {
        self.entries.own(id)
    }

    /// The class group an identity's entries come from: identities of one group decide alike.
    fn set_of(&self, id: IdentityId) -> Option<usize> {
        self.entries.class_of.get(&id).copied()
    }

    fn vector(&self, sets: &[&[Entry]]) -> DecisionVector {
        self.points.iter().map(|p| decide(p, sets)).collect()
    }

    /// What the MapState lookup decides for `id`: its own entries and the wildcard class.
    fn own_vector(&mut self, id: IdentityId) -> DecisionVector {
        let set = self.set_of(id);
        if let Some(v) = self.own_decision.get(&set) {
            return v.clone();
        }
        let v = self.vector(&[self.own(id), &self.entries.wildcard]);
        self.own_decision.insert(set, v.clone());
        v
    }

    /// What the main list decides for `id`'s addresses: its own entries, the wildcard class and
    /// the entries of every enclosing identity (whose rules match these addresses too).
    fn main_vector(&mut self, id: IdentityId, enclosing: Vec<IdentityId>) -> DecisionVector {
        let key = (self.set_of(id), enclosing);
        if let Some(v) = self.main_decision.get(&key) {
            return v.clone();
        }
        let mut sets: Vec<&[Entry]> = vec![self.own(id), &self.entries.wildcard];
        sets.extend(key.1.iter().map(|a| self.own(*a)));
        let v = self.vector(&sets);
        self.main_decision.insert(key, v.clone());
        v
    }
}

/// Decides which identities need exception lists.
pub(crate) fn place(
    entries: &DirectionEntries,
    store: &IdentityStore,
) -> Result<Placement, CompileError> {
    let mut with_entries: Vec<Node> = Vec::new();
    for class in &entries.classes {
        for id in &class.identities {
            with_entries.extend(Node::all_of(store, *id)?);
        }
    }
    // Only world identities with entries can leak onto other identities' addresses.
    let leaking: Vec<Node> = with_entries.iter().filter(|n| !n.host).copied().collect();
    if leaking.is_empty() {
        return Ok(Placement {
            main: with_entries,
            ..Placement::default()
        });
    }

    let leaking_index = Enclosers::new(&leaking);
    // World prefixes and pod or node identities inside a leaking prefix. Identities are found
    // through the ipcache's CIDR index, so the cost follows the identities inside those
    // prefixes, not their addresses.
    let mut nested: Vec<Node> = store
        .world_prefixes()
        .map(|(prefix, id)| Node {
            id: *id,
            family: Family::of(prefix),
            prefix: *prefix,
            host: false,
        })
        .filter(|n| leaking_index.of(n).next().is_some())
        .collect();
    let mut hosts: BTreeSet<(IdentityId, Family)> = BTreeSet::new();
    for outer in &leaking {
        for id in store.hosts_within(outer.prefix) {
            for node in Node::all_of(store, id)? {
                if node.family == outer.family && hosts.insert(node.key()) {
                    nested.push(node);
                }
            }
        }
    }
    // Enclosing identities first, so an identity's ancestors are decided before it.
    nested.sort_by_key(|n| (n.depth(), n.id, n.prefix));

    let mut analysis = Analysis::new(entries);
    let mut exceptions: Vec<Node> = Vec::new();
    // Only world identities can enclose others, so only their lists can catch other addresses.
    let mut enclosing_exceptions = Enclosers::default();
    let mut shadowed: BTreeSet<(IdentityId, Family)> = BTreeSet::new();
    let mut enclosure = HashMap::new();
    for node in &nested {
        let provider = enclosing_exceptions.of(node).next().map(|(_, k)| *k);
        let own = analysis.own_vector(node.id);
        let needs_list = match provider {
            // Inside an exception list, the enclosing list's complete decision applies.
            Some(k) => {
                shadowed.insert(node.key());
                analysis.own_vector(k.id) != own
            }
            None => {
                // In the order of `leaking`, as the cache key and the decision expect.
                let mut enclosing: Vec<(usize, IdentityId)> =
                    leaking_index.of(node).map(|(at, a)| (*at, a.id)).collect();
                enclosing.sort_unstable();
                let enclosing: Vec<IdentityId> = enclosing.into_iter().map(|(_, id)| id).collect();
                analysis.main_vector(node.id, enclosing) != own
            }
        };
        if needs_list {
            exceptions.push(*node);
            if !node.host {
                enclosing_exceptions.insert(*node);
            }
        } else if provider.is_none() && node.host {
            let mut ids: Vec<IdentityId> = leaking_index.of(node).map(|(_, a)| a.id).collect();
            ids.sort_unstable();
            enclosure.insert(node.key(), ids);
        }
    }
    let placed_apart: BTreeSet<(IdentityId, Family)> = exceptions
        .iter()
        .map(Node::key)
        .chain(shadowed.iter().copied())
        .collect();
    Ok(Placement {
        main: with_entries
            .into_iter()
            .filter(|n| !placed_apart.contains(&n.key()))
            .collect(),
        exception_worlds: exceptions
            .iter()
            .filter(|n| !n.host)
            .map(|n| n.prefix)
            .collect(),
        exceptions,
        shadowed,
        leaking: leaking.iter().map(|n| (n.prefix, n.id)).collect(),
        enclosure,
    })
}
