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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

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
    /// The world identities with entries: their rules also catch the addresses inside them.
    pub leaking: Vec<IdentityId>,
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
    /// The nodes of an identity's addresses: one per world prefix (a world identity may be a
    /// class of several), or one per family a pod or node identity has members in.
    pub fn all_of(store: &IdentityStore, id: IdentityId) -> Result<Vec<Node>, CompileError> {
        let identity = store.get(id).ok_or(CompileError::UnknownIdentity(id))?;
        if identity.is_world() {
            return Ok(store
                .members(id)
                .iter()
                .map(|prefix| Node {
                    id,
                    family: Family::of(prefix),
                    prefix: *prefix,
                    host: false,
                })
                .collect());
        }
        Node::per_family(store, id)
    }

    /// One node per address family the identity has addresses in: what the main list needs,
    /// which places identities, not prefixes (a world class may hold 50,000 prefixes).
    fn per_family(store: &IdentityStore, id: IdentityId) -> Result<Vec<Node>, CompileError> {
        let identity = store.get(id).ok_or(CompileError::UnknownIdentity(id))?;
        Ok([false, true]
            .into_iter()
            .filter_map(|ipv6| store.member_of_family(id, ipv6))
            .map(|prefix| Node {
                id,
                family: Family::of(&prefix),
                prefix,
                host: !identity.is_world(),
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

/// The prefixes of the world identities with entries, found through the ipcache's world map
/// (one lookup per prefix length present) rather than copied: one endpoint's leaking identities
/// may hold 250,000 prefixes (five CIDR-heavy policies), and indexing them anew for every
/// endpoint compiled was most of what a policy change cost the agent (issue 33).
struct Leaking<'a> {
    store: &'a IdentityStore,
    ids: HashSet<IdentityId>,
}

impl<'a> Leaking<'a> {
    /// The leaking prefixes `node` is nested in, as nodes.
    fn of(&'a self, node: &'a Node) -> impl Iterator<Item = Node> + 'a {
        self.store
            .world_prefixes_holding(&node.prefix)
            .filter(|(_, id)| self.ids.contains(id))
            .map(|(prefix, id)| Node {
                id,
                family: node.family,
                prefix,
                host: false,
            })
            .filter(|outer| node.nested_in(outer))
    }

    /// The leaking identities `node` is nested in, sorted.
    fn enclosing(&self, node: &Node) -> Vec<IdentityId> {
        let mut ids: Vec<IdentityId> = self.of(node).map(|outer| outer.id).collect();
        ids.sort_unstable();
        ids
    }
}

/// The world prefixes with exception lists, so that the list enclosing a node is found among
/// its own truncations (one lookup per distinct length) rather than by testing every list: a
/// policy may carry tens of thousands of prefixes (70,000 `except`s fit in one object), and
/// testing each against each is quadratic. Each node keeps its position of insertion, the order
/// the lists are reported in.
#[derive(Default)]
struct Enclosers {
    by_prefix: HashMap<IpNet, Vec<(usize, Node)>>,
    lengths: BTreeSet<u8>,
    count: usize,
}

impl Enclosers {
    fn insert(&mut self, node: Node) {
        self.by_prefix
            .entry(node.prefix)
            .or_default()
            .push((self.count, node));
        self.lengths.insert(node.prefix.prefix_len());
        self.count += 1;
    }

    /// Every prefix inserted, in order of insertion.
    fn prefixes(&self) -> Vec<IpNet> {
        let mut nodes: Vec<&(usize, Node)> = self.by_prefix.values().flatten().collect();
        nodes.sort_unstable_by_key(|(at, _)| *at);
        nodes.into_iter().map(|(_, n)| n.prefix).collect()
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
    let mut leaking: Vec<IdentityId> = Vec::new();
    for class in &entries.classes {
        for id in &class.identities {
            let nodes = Node::per_family(store, *id)?;
            // Only world identities with entries can leak onto other identities' addresses.
            if nodes.iter().any(|n| !n.host) {
                leaking.push(*id);
            }
            with_entries.extend(nodes);
        }
    }
    if leaking.is_empty() {
        return Ok(Placement {
            main: with_entries,
            ..Placement::default()
        });
    }
    let leaking_index = Leaking {
        store,
        ids: leaking.iter().copied().collect(),
    };
    let mut nested = nested_worlds(store, &leaking);
    // Pod and node identities inside a leaking prefix: found from whichever side is smaller,
    // the leaking prefixes (through the ipcache's CIDR index, so the cost follows the
    // identities inside them, not their addresses) or the cluster's addresses.
    let leaking_prefixes: usize = leaking.iter().map(|id| store.members(*id).len()).sum();
    let mut hosts_seen: BTreeSet<(IdentityId, Family)> = BTreeSet::new();
    if leaking_prefixes <= store.address_count() {
        for id in &leaking {
            for prefix in store.members(*id) {
                push_hosts_within(store, *prefix, &mut hosts_seen, &mut nested)?;
            }
        }
    } else {
        let everywhere = ["0.0.0.0/0", "::/0"].map(|net| net.parse::<IpNet>().expect("a prefix"));
        for (address, id) in everywhere.into_iter().flat_map(|net| store.hosts_in(net)) {
            let host = Node {
                id,
                family: Family::of(&IpNet::from(address)),
                prefix: IpNet::from(address),
                host: true,
            };
            if leaking_index.of(&host).next().is_some() && hosts_seen.insert(host.key()) {
                nested.extend(
                    Node::all_of(store, id)?
                        .into_iter()
                        .filter(|n| n.family == host.family),
                );
            }
        }
    }
    // Enclosing identities first, so an identity's ancestors are decided before it. World
    // prefixes come before every pod or node address of their family.
    nested.sort_by_key(|n| (n.depth(), n.id, n.prefix));
    let (worlds, mut hosts): (Vec<Node>, Vec<Node>) = nested.into_iter().partition(|n| !n.host);

    let mut decider = Decider {
        analysis: Analysis::new(entries),
        leaking_index: &leaking_index,
        enclosing_exceptions: Enclosers::default(),
        exceptions: Vec::new(),
        shadowed: BTreeSet::new(),
        enclosure: HashMap::new(),
    };
    // A world identity of several prefixes holds no other world prefix (the engine pools only
    // those: `netpol_engine::identity::WorldClass`), so nothing of another world identity
    // waits on its decision: it is taken once all its prefixes are seen.
    let mut classes: BTreeMap<(IdentityId, Family), ClassOutcome> = BTreeMap::new();
    for node in &worlds {
        let pooled = store.members(node.id).len() > 1;
        let outcome = decider.decide(node);
        if !pooled {
            decider.settle(node, outcome, std::slice::from_ref(node));
            continue;
        }
        let class = classes.entry(node.key()).or_default();
        class.needs_list |= outcome.needs_list;
        class.shadowed += usize::from(outcome.shadowed);
    }
    for ((id, family), class) in classes {
        let members: Vec<Node> = Node::all_of(store, id)?
            .into_iter()
            .filter(|n| n.family == family)
            .collect();
        // Shadowed as a whole only when every prefix is; otherwise its rules decide for the
        // prefixes outside the lists, which decide as its own entries do for the others.
        let outcome = Outcome {
            needs_list: class.needs_list,
            shadowed: !class.needs_list && class.shadowed == members.len(),
        };
        // Its list goes ahead of those of every prefix enclosing one of its prefixes: at the
        // depth of its deepest prefix (none of its prefixes holds another world prefix).
        let deepest = *members.iter().max_by_key(|n| n.depth()).expect("a member");
        decider.settle(&deepest, outcome, &members);
        if outcome.needs_list {
            // Its list also covers prefixes outside every leaking one: the pods and nodes
            // there meet it first too.
            for member in &members {
                push_hosts_within(store, member.prefix, &mut hosts_seen, &mut hosts)?;
            }
        }
    }
    hosts.sort_by_key(|n| (n.depth(), n.id, n.prefix));
    for node in &hosts {
        let outcome = decider.decide(node);
        decider.settle(node, outcome, std::slice::from_ref(node));
    }
    let Decider {
        exceptions,
        shadowed,
        enclosure,
        enclosing_exceptions,
        ..
    } = decider;
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
        exception_worlds: enclosing_exceptions.prefixes(),
        exceptions,
        shadowed,
        leaking,
        enclosure,
    })
}

/// The world prefixes nested in a prefix of the `leaking` identities. A world identity of
/// several prefixes holds no other world prefix (the engine pools only leaves:
/// `netpol_engine::identity::WorldClass`), so only the prefixes of identities of their own are
/// searched, each a range of the ipcache's sorted world map: a class of 50,000 `/32`s costs
/// nothing here.
fn nested_worlds(store: &IdentityStore, leaking: &[IdentityId]) -> Vec<Node> {
    let mut found: BTreeSet<(IpNet, IdentityId)> = BTreeSet::new();
    for id in leaking {
        let [outer] = store.members(*id) else {
            continue;
        };
        found.extend(
            store
                .worlds_within(*outer)
                .filter(|(prefix, _)| prefix != outer),
        );
    }
    found
        .into_iter()
        .map(|(prefix, id)| Node {
            id,
            family: Family::of(&prefix),
            prefix,
            host: false,
        })
        .collect()
}

/// Adds the node of each pod or node identity with addresses inside `prefix` (in its family)
/// that `seen` does not hold yet.
fn push_hosts_within(
    store: &IdentityStore,
    prefix: IpNet,
    seen: &mut BTreeSet<(IdentityId, Family)>,
    out: &mut Vec<Node>,
) -> Result<(), CompileError> {
    let family = Family::of(&prefix);
    for id in store.hosts_within(prefix) {
        for node in Node::all_of(store, id)? {
            if node.family == family && seen.insert(node.key()) {
                out.push(node);
            }
        }
    }
    Ok(())
}

/// What the enclosing rules make of one node.
#[derive(Clone, Copy, Debug, Default)]
struct Outcome {
    /// Its decision differs from what reaches it: it needs an exception list.
    needs_list: bool,
    /// It lies inside an exception list, which decides for it.
    shadowed: bool,
}

/// The outcomes of the prefixes of one world class, gathered.
#[derive(Default)]
struct ClassOutcome {
    needs_list: bool,
    shadowed: usize,
}

/// The placement under construction, node by node in depth order.
struct Decider<'a> {
    analysis: Analysis<'a>,
    leaking_index: &'a Leaking<'a>,
    /// Only world identities can enclose others, so only their lists can catch other addresses.
    enclosing_exceptions: Enclosers,
    exceptions: Vec<Node>,
    shadowed: BTreeSet<(IdentityId, Family)>,
    enclosure: HashMap<(IdentityId, Family), Vec<IdentityId>>,
}

impl Decider<'_> {
    fn decide(&mut self, node: &Node) -> Outcome {
        let provider = self.enclosing_exceptions.of(node).next().map(|(_, k)| *k);
        let own = self.analysis.own_vector(node.id);
        match provider {
            // Inside an exception list, the enclosing list's complete decision applies.
            Some(k) => Outcome {
                needs_list: self.analysis.own_vector(k.id) != own,
                shadowed: true,
            },
            None => {
                let enclosing = self.leaking_index.enclosing(node);
                Outcome {
                    needs_list: self.analysis.main_vector(node.id, enclosing) != own,
                    shadowed: false,
                }
            }
        }
    }

    /// Places the identity of `node` (its addresses in `node`'s family: `members`) by `outcome`.
    fn settle(&mut self, node: &Node, outcome: Outcome, members: &[Node]) {
        if outcome.shadowed {
            self.shadowed.insert(node.key());
        }
        if outcome.needs_list {
            self.exceptions.push(*node);
            if !node.host {
                members
                    .iter()
                    .for_each(|m| self.enclosing_exceptions.insert(*m));
            }
        } else if !outcome.shadowed && node.host {
            self.enclosure
                .insert(node.key(), self.leaking_index.enclosing(node));
        }
    }
}
