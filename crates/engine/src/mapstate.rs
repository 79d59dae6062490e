//! The MapState: one endpoint's policy as the datapath looks it up (CFP-23380).
//!
//! Keys are (direction, remote identity or wildcard, protocol or wildcard, port prefix); values
//! carry one precedence number. A lookup mirrors a datapath: one longest-prefix lookup with the
//! exact identity and one with the wildcard identity; the higher precedence wins, and on a tie
//! the longer prefix.
//!
//! Entries are computed per *identity class* (all keys of one remote identity, or all wildcard
//! keys). A class depends only on the rules that select its identity and on the wildcard class,
//! so an identity change recomputes exactly one class per affected endpoint: the cost of an
//! update is what changed, not the size of the cluster.

use std::collections::HashMap;
use std::sync::Arc;

use crate::entry::{AuthMode, Direction, Verdict};
use crate::identity::{Identity, IdentityId};
use crate::portprefix::{mask, prefix_range, range_to_prefixes};
use crate::ports::Protocol;
use crate::precedence::Precedence;
use crate::reference::Reason;
use crate::resolve::{Band, EndpointPolicy, RulePort, SelectorRule};

/// The (protocol, port prefix) part of a key. `protocol: None` covers every protocol and then
/// `len` is 0; `len` 0 covers every port; `len` 16 is exactly `port`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortKey {
    pub protocol: Option<Protocol>,
    pub port: u16,
    pub len: u8,
}

impl PortKey {
    pub const ANY: PortKey = PortKey {
        protocol: None,
        port: 0,
        len: 0,
    };

    fn new(protocol: Protocol, port: u16, len: u8) -> Self {
        PortKey {
            protocol: Some(protocol),
            port: mask(port, len),
            len,
        }
    }

    /// How specific the key is, for the lookup tie-break: any protocol < all ports < prefixes.
    pub fn specificity(&self) -> i8 {
        match self.protocol {
            None => -1,
            Some(_) => self.len as i8,
        }
    }

    /// Strict ancestors, from the most to the least specific.
    pub fn ancestors(self) -> impl Iterator<Item = PortKey> {
        let proto = self.protocol;
        let proto_prefixes = (0..self.len)
            .rev()
            .map(move |len| PortKey::new(proto.expect("len > 0 has a protocol"), self.port, len));
        let any = proto.is_some().then_some(PortKey::ANY);
        proto_prefixes.chain(any)
    }

    /// Every key a lookup of `protocol/port` may hit, most specific first.
    fn lookup_chain(protocol: Protocol, port: u16) -> impl Iterator<Item = PortKey> {
        (0..=16u8)
            .rev()
            .map(move |len| PortKey::new(protocol, port, len))
            .chain(std::iter::once(PortKey::ANY))
    }

    /// The more specific of two keys if one covers the other.
    pub fn intersect(self, other: PortKey) -> Option<PortKey> {
        match (self.protocol, other.protocol) {
            (None, _) => Some(other),
            (_, None) => Some(self),
            (Some(a), Some(b)) if a != b => None,
            _ => {
                let (short, long) = if self.len <= other.len {
                    (self, other)
                } else {
                    (other, self)
                };
                (mask(long.port, short.len) == short.port).then_some(long)
            }
        }
    }

    pub fn range(&self) -> (u16, u16) {
        prefix_range(self.port, self.len)
    }
}

/// A full MapState key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MapKey {
    pub direction: Direction,
    /// None is the wildcard identity: any remote address.
    pub identity: Option<IdentityId>,
    pub protocol: Option<Protocol>,
    pub port: u16,
    pub port_prefix_len: u8,
}

impl MapKey {
    /// The key of `pk` in the class of `identity` (None: the wildcard) in `direction`.
    pub fn of(direction: Direction, identity: Option<IdentityId>, pk: PortKey) -> Self {
        MapKey::new((direction, identity), pk)
    }

    fn new(class: ClassKey, pk: PortKey) -> Self {
        MapKey {
            direction: class.0,
            identity: class.1,
            protocol: pk.protocol,
            port: pk.port,
            port_prefix_len: pk.len,
        }
    }
    pub fn port_key(&self) -> PortKey {
        PortKey {
            protocol: self.protocol,
            port: self.port,
            len: self.port_prefix_len,
        }
    }
    /// The inclusive port range the key covers.
    pub fn port_range(&self) -> (u16, u16) {
        self.port_key().range()
    }
}

/// What the datapath does for a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapValue {
    pub precedence: u128,
    /// Allow or Deny; Pass never reaches the map.
    pub verdict: Verdict,
    pub auth: Option<AuthMode>,
    /// The rule that decided, for `explain`.
    pub reason: Arc<Reason>,
}

/// (direction, identity or wildcard): the unit of incremental recomputation.
pub type ClassKey = (Direction, Option<IdentityId>);

/// One endpoint's map: visible entries grouped by identity class.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapState {
    classes: HashMap<ClassKey, ClassEntries>,
    /// The entries of every class, counted as classes are replaced (a function of `classes`):
    /// the agent's gauge sums it over endpoints after every change.
    len: usize,
}

/// The entries of one class, sorted by port key. Most classes hold one to three entries: a
/// sorted slice of exactly that size costs a quarter of a hash map's smallest table, which
/// matters when an endpoint has an entry for each of tens of thousands of remote identities.
///
/// The slice is shared: remote identities that the same rules select get equal classes, and the
/// engine computes such a class once and hands every one of them the same allocation. A policy
/// naming 3,000 CIDRs with 100 port ranges each is then one class of a few hundred entries and
/// 3,000 references to it, not 1.3 million entries, and a datapath compiles it once
/// ([`MapState::shared_classes`]). Storage follows distinct decisions, not identities × ports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassEntries(Arc<[(PortKey, MapValue)]>);

impl ClassEntries {
    /// The class of these entries, sorted by key.
    pub fn from_map(map: HashMap<PortKey, MapValue>) -> Self {
        let mut entries: Vec<(PortKey, MapValue)> = map.into_iter().collect();
        entries.sort_unstable_by_key(|(key, _)| *key);
        ClassEntries(entries.into())
    }

    /// Whether two classes share one allocation (and so are equal).
    pub fn shares_with(&self, other: &ClassEntries) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The address of the shared allocation: equal for classes that share one. Only for
    /// grouping the classes of one borrowed map (every class is alive while the key is used);
    /// never a key that outlives the borrow, which is what [`crate::Shared`] ids are for.
    pub fn allocation(&self) -> usize {
        self.0.as_ptr() as usize
    }

    pub fn get(&self, key: &PortKey) -> Option<&MapValue> {
        self.0
            .binary_search_by_key(key, |(k, _)| *k)
            .ok()
            .map(|i| &self.0[i].1)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&PortKey, &MapValue)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// One identity class of a MapState replaced, with its entries before and after. The entries are
/// shared, so a commit that changes a class thousands of identities hold costs a reference per
/// identity, not a copy of every entry; [`ClassChange::entries`] lists the entry-level changes
/// when someone wants them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassChange {
    pub class: ClassKey,
    pub old: ClassEntries,
    pub new: ClassEntries,
}

impl ClassChange {
    /// The entry-level changes this class change makes.
    pub fn entries(&self) -> Vec<MapChange> {
        let mut out = Vec::new();
        class_changes(self.class, &self.old, &self.new, &mut out);
        out
    }
}

/// One change to a MapState entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapChange {
    Added(MapKey, MapValue),
    Removed(MapKey, MapValue),
    Updated {
        key: MapKey,
        old: MapValue,
        new: MapValue,
    },
}

impl MapState {
    pub fn iter(&self) -> impl Iterator<Item = (MapKey, &MapValue)> {
        self.classes.iter().flat_map(|(class, entries)| {
            entries
                .iter()
                .map(move |(pk, v)| (MapKey::new(*class, *pk), v))
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    pub fn get(&self, key: &MapKey) -> Option<&MapValue> {
        self.classes
            .get(&(key.direction, key.identity))?
            .get(&key.port_key())
    }

    /// The datapath lookup. Always finds a value: every direction has a wildcard root entry.
    pub fn lookup(
        &self,
        direction: Direction,
        remote: IdentityId,
        protocol: Protocol,
        port: u16,
    ) -> MapValue {
        let exact = self.longest_prefix((direction, Some(remote)), protocol, port);
        let wildcard = self.longest_prefix((direction, None), protocol, port);
        match (exact, wildcard) {
            (Some((ek, ev)), Some((wk, wv))) => {
                if ev.precedence != wv.precedence {
                    return if ev.precedence > wv.precedence {
                        ev.clone()
                    } else {
                        wv.clone()
                    };
                }
                // Equal precedence: the longer prefix decides, with the strongest authentication
                // of the two (both entries match at the deciding order).
                let mut winner = if ek.specificity() >= wk.specificity() {
                    ev.clone()
                } else {
                    wv.clone()
                };
                winner.auth = ev.auth.max(wv.auth);
                winner
            }
            (Some((_, v)), None) | (None, Some((_, v))) => v.clone(),
            (None, None) => MapValue {
                precedence: Precedence::ROOT.0,
                verdict: Verdict::Allow,
                auth: None,
                reason: Arc::new(Reason::Default),
            },
        }
    }

    fn longest_prefix(
        &self,
        class: ClassKey,
        protocol: Protocol,
        port: u16,
    ) -> Option<(PortKey, &MapValue)> {
        let entries = self.classes.get(&class)?;
        PortKey::lookup_chain(protocol, port).find_map(|k| entries.get(&k).map(|v| (k, v)))
    }

    pub fn class(&self, class: ClassKey) -> Option<&ClassEntries> {
        self.classes.get(&class)
    }

    /// Replaces one class, appending the resulting changes.
    pub fn replace_class(
        &mut self,
        class: ClassKey,
        new: HashMap<PortKey, MapValue>,
        changes: &mut Vec<ClassChange>,
    ) {
        self.replace_class_shared(class, ClassEntries::from_map(new), changes);
    }

    /// Replaces one class with entries that may be shared with other classes, appending the
    /// resulting changes. An empty class removes it.
    pub fn replace_class_shared(
        &mut self,
        class: ClassKey,
        new: ClassEntries,
        changes: &mut Vec<ClassChange>,
    ) {
        let old = if new.is_empty() {
            self.classes.remove(&class)
        } else {
            self.classes.insert(class, new)
        };
        let old = old.unwrap_or_default();
        let new = self.classes.get(&class).cloned().unwrap_or_default();
        self.len = self.len + new.len() - old.len();
        if !old.shares_with(&new) && old != new {
            changes.push(ClassChange { class, old, new });
        }
    }

    /// The identity classes of one direction grouped by shared entries: each distinct class
    /// once, with every remote identity that holds it (sorted). The wildcard class is not
    /// included ([`MapState::class`] with `None`).
    pub fn shared_classes(&self, direction: Direction) -> Vec<(&ClassEntries, Vec<IdentityId>)> {
        let mut groups: HashMap<usize, (&ClassEntries, Vec<IdentityId>)> = HashMap::new();
        for ((d, id), entries) in &self.classes {
            let (Some(id), true) = (id, *d == direction) else {
                continue;
            };
            groups
                .entry(entries.allocation())
                .or_insert_with(|| (entries, Vec::new()))
                .1
                .push(*id);
        }
        let mut out: Vec<(&ClassEntries, Vec<IdentityId>)> = groups.into_values().collect();
        for (_, ids) in &mut out {
            ids.sort_unstable();
        }
        out.sort_unstable_by_key(|(_, ids)| ids[0]);
        out
    }

    /// Entries actually stored: each shared class counted once.
    pub fn stored_len(&self) -> usize {
        let mut seen = std::collections::HashSet::new();
        self.classes
            .values()
            .filter(|c| seen.insert(c.allocation()))
            .map(ClassEntries::len)
            .sum()
    }

    /// Identity classes held (the wildcard ones included).
    pub fn class_count(&self) -> usize {
        self.classes.len()
    }

    /// What the map costs, as the entry budget counts it: the entries of each distinct class
    /// once, plus one per identity class (its table slot and reference). Distinct by content,
    /// not by allocation, so the figure is the same whichever recompute shared what (an
    /// incremental update computes a class on its own): the budget must decide alike on the
    /// incremental and the full path.
    pub fn footprint(&self) -> usize {
        // Allocations first (cheap); then equal content among the rest, bucketed by a hash of
        // what decides (the reason is left out of the hash, not out of the comparison).
        let mut allocations = std::collections::HashSet::new();
        let mut buckets: HashMap<u64, Vec<&ClassEntries>> = HashMap::new();
        let mut stored = 0;
        for class in self.classes.values() {
            if !allocations.insert(class.allocation()) {
                continue;
            }
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            for (key, value) in class.iter() {
                std::hash::Hash::hash(
                    &(key, value.precedence, value.verdict, value.auth),
                    &mut hasher,
                );
            }
            let bucket = buckets
                .entry(std::hash::Hasher::finish(&hasher))
                .or_default();
            if bucket.contains(&class) {
                continue;
            }
            bucket.push(class);
            stored += class.len();
        }
        stored + self.classes.len()
    }

    /// The class changes that turn this map into `new`.
    pub fn changes_to(&self, new: &MapState) -> Vec<ClassChange> {
        let mut changes = Vec::new();
        for (class, old) in &self.classes {
            let now = new.classes.get(class).cloned().unwrap_or_default();
            if !old.shares_with(&now) && *old != now {
                changes.push(ClassChange {
                    class: *class,
                    old: old.clone(),
                    new: now,
                });
            }
        }
        for (class, now) in &new.classes {
            if !self.classes.contains_key(class) {
                changes.push(ClassChange {
                    class: *class,
                    old: ClassEntries::default(),
                    new: now.clone(),
                });
            }
        }
        changes
    }

    /// Every class removed: the changes of dropping the whole map.
    pub fn removal(&self) -> Vec<ClassChange> {
        MapState::default()
            .changes_to(self)
            .into_iter()
            .map(|c| ClassChange {
                class: c.class,
                old: c.new,
                new: c.old,
            })
            .collect()
    }

    /// Identity classes present, for full recomputes.
    pub fn class_keys(&self) -> impl Iterator<Item = ClassKey> + '_ {
        self.classes.keys().copied()
    }
}

/// The changes that turn one class's entries `old` into `new`.
fn class_changes(
    class: ClassKey,
    old: &ClassEntries,
    new: &ClassEntries,
    changes: &mut Vec<MapChange>,
) {
    for (pk, old_value) in old.iter() {
        match new.get(pk) {
            None => changes.push(MapChange::Removed(
                MapKey::new(class, *pk),
                old_value.clone(),
            )),
            Some(v) if v != old_value => changes.push(MapChange::Updated {
                key: MapKey::new(class, *pk),
                old: old_value.clone(),
                new: v.clone(),
            }),
            Some(_) => {}
        }
    }
    for (pk, v) in new.iter() {
        if old.get(pk).is_none() {
            changes.push(MapChange::Added(MapKey::new(class, *pk), v.clone()));
        }
    }
}

/// A contribution to one port key of one class, before merging and visibility.
#[derive(Clone, Debug)]
struct Candidate {
    key: PortKey,
    band: Band,
    precedence: Precedence,
    verdict: Verdict,
    auth: Option<AuthMode>,
    reason: Arc<Reason>,
}

impl Candidate {
    fn lift_under(&self, pass: &Candidate, key: PortKey) -> Candidate {
        let pass_level = (pass.precedence.0 >> 96) as u32;
        Candidate {
            key,
            band: pass.band,
            precedence: Precedence::lifted(pass_level, self.precedence),
            verdict: self.verdict,
            auth: self.auth,
            reason: self.reason.clone(),
        }
    }
}

/// The wildcard class of one direction, kept so identity classes can be computed against it.
#[derive(Clone, Debug, Default)]
pub struct WildcardClass {
    /// Non-pass candidates, lifted ones and the root included.
    resolved: Vec<Candidate>,
    passes: Vec<Candidate>,
    best: HashMap<PortKey, Candidate>,
}

fn candidates_of(rule: &SelectorRule, remote: Option<&Identity>) -> Vec<Candidate> {
    let mut keys = Vec::new();
    for port in rule.ports.iter() {
        match port {
            RulePort::AnyProtocol => keys.push(PortKey::ANY),
            RulePort::AllPorts(p) => keys.push(PortKey::new(*p, 0, 0)),
            RulePort::Range(p, lo, hi) if p.has_ports() => keys.extend(
                range_to_prefixes(*lo, *hi)
                    .into_iter()
                    .map(|(port, len)| PortKey::new(*p, port, len)),
            ),
            RulePort::Range(p, ..) => keys.push(PortKey::new(*p, 0, 0)),
            RulePort::Named(proto, name) => {
                // Only an exact remote pod can resolve a named port.
                if let Some(named) = remote.and_then(Identity::named_ports) {
                    keys.extend(
                        named
                            .iter()
                            .filter(|np| np.name == *name && proto.is_none_or(|p| p == np.protocol))
                            .map(|np| PortKey::new(np.protocol, np.port, 16)),
                    );
                }
            }
        }
    }
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .map(|key| Candidate {
            key,
            band: rule.band,
            precedence: Precedence::plain(rule.level),
            verdict: rule.verdict,
            auth: if rule.verdict == Verdict::Allow {
                rule.auth
            } else {
                None
            },
            reason: rule.reason.clone(),
        })
        .collect()
}

fn is_named(port: &RulePort) -> bool {
    matches!(port, RulePort::Named(..))
}

/// Lifts lower-band candidates under each Pass, bottom band first so nested passes compose.
/// Pairs where both sides are wildcard-class are skipped when computing an identity class: the
/// wildcard class already holds them.
fn lift(own: &mut Vec<Candidate>, own_passes: &[Candidate], wildcard: Option<&WildcardClass>) {
    let wild_resolved: &[Candidate] = wildcard.map_or(&[], |w| &w.resolved);
    let wild_passes: &[Candidate] = wildcard.map_or(&[], |w| &w.passes);
    let mut bands: Vec<Band> = own_passes
        .iter()
        .chain(wild_passes)
        .map(|p| p.band)
        .collect();
    bands.sort_unstable();
    bands.dedup();
    for band in bands.into_iter().rev() {
        let mut lifted = Vec::new();
        let passes = own_passes
            .iter()
            .map(|p| (p, false))
            .chain(wild_passes.iter().map(|p| (p, true)));
        for (pass, pass_is_wild) in passes.filter(|(p, _)| p.band == band) {
            let lower = own
                .iter()
                .map(|c| (c, false))
                .chain(wild_resolved.iter().map(|c| (c, true)));
            for (low, low_is_wild) in lower.filter(|(c, _)| c.band > band) {
                if pass_is_wild && low_is_wild {
                    continue;
                }
                if let Some(key) = pass.key.intersect(low.key) {
                    lifted.push(low.lift_under(pass, key));
                }
            }
        }
        own.extend(lifted);
    }
}

/// Merges candidates per key: the highest precedence wins, equal precedence merges auth.
fn best_per_key(candidates: &[Candidate]) -> HashMap<PortKey, Candidate> {
    let mut best: HashMap<PortKey, Candidate> = HashMap::new();
    for c in candidates {
        match best.get_mut(&c.key) {
            None => {
                best.insert(c.key, c.clone());
            }
            Some(b) if c.precedence > b.precedence => *b = c.clone(),
            Some(b) if c.precedence == b.precedence => b.auth = b.auth.max(c.auth),
            Some(_) => {}
        }
    }
    best
}

/// Keeps the entries no covering entry overrides, with authentication inherited from covering
/// entries of equal precedence in the same class.
fn visible(
    best: &HashMap<PortKey, Candidate>,
    wildcard: Option<&HashMap<PortKey, Candidate>>,
) -> HashMap<PortKey, MapValue> {
    let mut out = HashMap::new();
    'keys: for (key, c) in best {
        let mut auth = c.auth;
        for anc in key.ancestors() {
            if let Some(a) = best.get(&anc) {
                if a.precedence > c.precedence {
                    continue 'keys;
                }
                if a.precedence == c.precedence && c.verdict == Verdict::Allow {
                    auth = auth.max(a.auth);
                }
            }
        }
        if let Some(w) = wildcard {
            // A wildcard entry covering this key with a higher precedence wins every lookup.
            if std::iter::once(*key)
                .chain(key.ancestors())
                .any(|anc| w.get(&anc).is_some_and(|a| a.precedence > c.precedence))
            {
                continue;
            }
        }
        out.insert(
            *key,
            MapValue {
                precedence: c.precedence.0,
                verdict: c.verdict,
                auth,
                reason: c.reason.clone(),
            },
        );
    }
    out
}

/// Computes the wildcard class of one direction.
pub fn compute_wildcard(
    policy: &EndpointPolicy,
    direction: Direction,
) -> (WildcardClass, HashMap<PortKey, MapValue>) {
    let mut own = vec![Candidate {
        key: PortKey::ANY,
        band: Band::Default,
        precedence: Precedence::ROOT,
        verdict: Verdict::Allow,
        auth: None,
        reason: Arc::new(Reason::Default),
    }];
    for iso in policy
        .isolations
        .iter()
        .filter(|i| i.direction == direction)
    {
        own.push(Candidate {
            key: PortKey::ANY,
            band: Band::Tier(iso.tier),
            precedence: Precedence::plain(iso.level),
            verdict: Verdict::Deny,
            auth: None,
            reason: iso.reason.clone(),
        });
    }
    let mut passes = Vec::new();
    for rule in policy
        .rules
        .iter()
        .filter(|r| r.direction == direction && r.peer.is_wildcard())
    {
        let mut rule = rule.clone();
        rule.ports = rule
            .ports
            .iter()
            .filter(|p| !is_named(p))
            .cloned()
            .collect();
        for c in candidates_of(&rule, None) {
            if c.verdict == Verdict::Pass {
                passes.push(c)
            } else {
                own.push(c)
            }
        }
    }
    lift(&mut own, &passes, None);
    let best = best_per_key(&own);
    let entries = visible(&best, None);
    (
        WildcardClass {
            resolved: own,
            passes,
            best,
        },
        entries,
    )
}

/// Computes the class of one remote identity, given the rules of the endpoint that select it.
pub fn compute_identity_class<'a>(
    rules: impl IntoIterator<Item = &'a SelectorRule>,
    remote: &Identity,
    wildcard: &WildcardClass,
) -> HashMap<PortKey, MapValue> {
    let mut own = Vec::new();
    let mut passes = Vec::new();
    for rule in rules {
        let candidates = if rule.peer.is_wildcard() {
            // Wildcard rules reach identity classes only through named ports.
            let mut named = rule.clone();
            named.ports = rule.ports.iter().filter(|p| is_named(p)).cloned().collect();
            candidates_of(&named, Some(remote))
        } else {
            candidates_of(rule, Some(remote))
        };
        for c in candidates {
            if c.verdict == Verdict::Pass {
                passes.push(c)
            } else {
                own.push(c)
            }
        }
    }
    if own.is_empty() && passes.is_empty() {
        return HashMap::new();
    }
    lift(&mut own, &passes, Some(wildcard));
    let best = best_per_key(&own);
    visible(&best, Some(&wildcard.best))
}
