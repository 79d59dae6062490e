//! The compiler's view of one direction of a MapState: entries grouped by identity class, each
//! with the effective action and the rank that orders it. Identities whose classes the MapState
//! shares (the same rules select them) form one [`ClassGroup`], converted and ordered once.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use netpol_engine::mapstate::{ClassEntries, MapKey, MapValue, PortKey};
use netpol_engine::portprefix::mask;
use netpol_engine::reference::Reason;
use netpol_engine::MapState;
use netpol_engine::{AuthMode, Direction, IdentityId, Verdict};

use super::CompileError;
use crate::ordered::RuleAction;

/// The order a MapState lookup implies between two matching entries: higher precedence, then
/// the more specific (protocol, port) key, then an exact identity over the wildcard. `block`
/// breaks the remaining ties so that evaluation order is total and the same everywhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Rank {
    pub precedence: u128,
    /// -1 for any protocol, else the port prefix length.
    pub specificity: i8,
    pub exact: bool,
    pub block: bool,
}

/// One MapState entry as the compiler places it.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub key: PortKey,
    pub precedence: u128,
    pub exact: bool,
    pub verdict: Verdict,
    pub auth: Option<AuthMode>,
    pub reason: Arc<Reason>,
}

impl Entry {
    /// No datapath netpol programs can authenticate peers, so an allow that requires authentication is compiled as a
    /// block: the flow fails closed instead of bypassing the requirement.
    pub fn action(&self) -> RuleAction {
        match (self.verdict, self.auth) {
            (Verdict::Allow, Some(AuthMode::Required)) => RuleAction::Block,
            (Verdict::Allow, _) => RuleAction::Allow,
            _ => RuleAction::Block,
        }
    }

    pub fn needs_auth(&self) -> bool {
        self.verdict == Verdict::Allow && self.auth == Some(AuthMode::Required)
    }

    pub fn rank(&self) -> Rank {
        Rank {
            precedence: self.precedence,
            specificity: self.key.specificity(),
            exact: self.exact,
            block: self.action() == RuleAction::Block,
        }
    }

    /// The sort key that puts the entry a lookup prefers first.
    pub fn order(&self) -> Reverse<Rank> {
        Reverse(self.rank())
    }
}

/// The remote identities whose classes hold equal entries, and those entries.
#[derive(Clone, Debug, Default)]
pub(crate) struct ClassGroup {
    /// Best first.
    pub entries: Vec<Entry>,
    /// Sorted.
    pub identities: Vec<IdentityId>,
    /// The MapState class the entries come from (none for entries given one by one).
    pub class: Option<ClassEntries>,
}

/// The entries of one direction: the wildcard class and the identity classes, grouped.
#[derive(Clone, Debug, Default)]
pub(crate) struct DirectionEntries {
    /// Best first.
    pub wildcard: Vec<Entry>,
    pub classes: Vec<ClassGroup>,
    /// Each identity's group in `classes`.
    pub class_of: HashMap<IdentityId, usize>,
}

impl DirectionEntries {
    /// The entries of an identity's own class (empty if it has none).
    pub fn own(&self, id: IdentityId) -> &[Entry] {
        self.class_of
            .get(&id)
            .map_or(&[], |c| self.classes[*c].entries.as_slice())
    }

    fn push_class(
        &mut self,
        entries: Vec<Entry>,
        identities: Vec<IdentityId>,
        class: Option<ClassEntries>,
    ) {
        let index = self.classes.len();
        for id in &identities {
            self.class_of.insert(*id, index);
        }
        self.classes.push(ClassGroup {
            entries,
            identities,
            class,
        });
    }

    fn finish(&mut self) {
        self.wildcard.sort_by_key(|e| (e.order(), e.key));
        for class in &mut self.classes {
            class.entries.sort_by_key(|e| (e.order(), e.key));
        }
        propagate_wildcard_auth(self);
    }
}

fn entry(key: &MapKey, value: &MapValue) -> Result<Entry, CompileError> {
    let port_key = validate_key(key)?;
    if value.verdict == Verdict::Pass {
        return Err(CompileError::PassEntry { key: *key });
    }
    Ok(Entry {
        key: port_key,
        precedence: value.precedence,
        exact: key.identity.is_some(),
        verdict: value.verdict,
        auth: value.auth,
        reason: value.reason.clone(),
    })
}

/// Splits a MapState by direction and class, checking the key shapes a datapath can express.
/// Classes the MapState shares are converted once, for all the identities that hold them.
pub(crate) fn gather(
    map: &MapState,
) -> Result<BTreeMap<Direction, DirectionEntries>, CompileError> {
    let mut out = BTreeMap::new();
    for direction in Direction::BOTH {
        let mut classes = DirectionEntries::default();
        if let Some(wildcard) = map.class((direction, None)) {
            for (pk, value) in wildcard.iter() {
                classes
                    .wildcard
                    .push(entry(&MapKey::of(direction, None, *pk), value)?);
            }
        }
        for (shared, identities) in map.shared_classes(direction) {
            let key_of = |pk: &PortKey| MapKey::of(direction, Some(identities[0]), *pk);
            let entries = shared
                .iter()
                .map(|(pk, value)| entry(&key_of(pk), value))
                .collect::<Result<Vec<_>, _>>()?;
            classes.push_class(entries, identities, Some(shared.clone()));
        }
        classes.finish();
        out.insert(direction, classes);
    }
    Ok(out)
}

/// [`gather`] for MapState entries given one by one: each identity is a class of its own.
pub(crate) fn gather_entries<'a>(
    entries: impl IntoIterator<Item = (MapKey, &'a MapValue)>,
) -> Result<BTreeMap<Direction, DirectionEntries>, CompileError> {
    let mut wildcard: BTreeMap<Direction, Vec<Entry>> = BTreeMap::new();
    let mut exact: BTreeMap<(Direction, IdentityId), Vec<Entry>> = BTreeMap::new();
    for (key, value) in entries {
        let e = entry(&key, value)?;
        match key.identity {
            None => wildcard.entry(key.direction).or_default().push(e),
            Some(id) => exact.entry((key.direction, id)).or_default().push(e),
        }
    }
    let mut out = BTreeMap::new();
    for direction in Direction::BOTH {
        let mut classes = DirectionEntries {
            wildcard: wildcard.remove(&direction).unwrap_or_default(),
            ..DirectionEntries::default()
        };
        let own: Vec<_> = exact
            .range((direction, IdentityId(0))..=(direction, IdentityId(u32::MAX)))
            .map(|((_, id), entries)| (*id, entries.clone()))
            .collect();
        for (id, entries) in own {
            classes.push_class(entries, vec![id], None);
        }
        classes.finish();
        out.insert(direction, classes);
    }
    Ok(out)
}

fn validate_key(key: &MapKey) -> Result<PortKey, CompileError> {
    if key.port_prefix_len > 16 {
        return Err(CompileError::BadKey {
            key: *key,
            field: "port_prefix_len",
            problem: "longer than 16 bits",
        });
    }
    match key.protocol {
        None if key.port_prefix_len != 0 => Err(CompileError::BadKey {
            key: *key,
            field: "port_prefix_len",
            problem: "a key for any protocol cannot name ports",
        }),
        Some(p) if !p.has_ports() && key.port_prefix_len != 0 => Err(CompileError::BadKey {
            key: *key,
            field: "port_prefix_len",
            problem: "a datapath cannot match ports of a protocol without ports",
        }),
        _ => Ok(PortKey {
            protocol: key.protocol,
            port: mask(key.port, key.port_prefix_len),
            len: key.port_prefix_len,
        }),
    }
}

/// Reproduces one detail of the lookup first-match alone would miss: when the exact and the
/// wildcard lookups tie on precedence, the winner carries the stronger authentication of the
/// two. Where an exact allow and a wildcard allow of equal precedence overlap and only one of
/// them requires authentication, the overlap gets an exact entry that requires it; it sorts ahead
/// of both (it is exact and at least as specific), so first match sees the merged requirement.
fn propagate_wildcard_auth(class: &mut DirectionEntries) {
    let wildcard = &class.wildcard;
    let mut wildcard_allows: HashMap<u128, Vec<&Entry>> = HashMap::new();
    for w in wildcard.iter().filter(|w| w.verdict == Verdict::Allow) {
        wildcard_allows.entry(w.precedence).or_default().push(w);
    }
    if wildcard_allows.is_empty() {
        return;
    }
    for group in &mut class.classes {
        let entries = &mut group.entries;
        let mut derived: BTreeMap<PortKey, Entry> = BTreeMap::new();
        for e in entries.iter().filter(|e| e.verdict == Verdict::Allow) {
            for w in wildcard_allows.get(&e.precedence).into_iter().flatten() {
                if e.needs_auth() == w.needs_auth() {
                    continue;
                }
                let Some(key) = e.key.intersect(w.key) else {
                    continue;
                };
                // Each lookup takes the longest prefix of its side: where a more specific entry
                // of the same side (of any verdict or precedence) covers the whole overlap, `e`
                // or `w` decides none of it, and neither does their tie.
                let covers_more_specifically = |others: &[Entry], than: &Entry| {
                    others.iter().any(|other| {
                        other.key.specificity() > than.key.specificity()
                            && other.key.intersect(key) == Some(key)
                    })
                };
                if covers_more_specifically(wildcard, w) || covers_more_specifically(entries, e) {
                    continue;
                }
                let mut entry = if e.needs_auth() {
                    e.clone()
                } else {
                    (*w).clone()
                };
                entry.key = key;
                entry.exact = true;
                derived.insert(key, entry);
            }
        }
        for (key, new) in derived {
            match entries.iter_mut().find(|e| e.key == key) {
                Some(existing) if existing.precedence == new.precedence => {
                    existing.auth = Some(AuthMode::Required)
                }
                // A covered entry of higher precedence wins on its own.
                Some(_) => {}
                None => entries.push(new),
            }
        }
        entries.sort_by_key(|e| (e.order(), e.key));
    }
}
