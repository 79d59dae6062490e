//! Compiled rules patched by the change instead of compiled again.
//!
//! When a pod of a new label set arrives, every local endpoint whose rules select it gains a
//! class for the new identity; compiling each such endpoint again costs its whole MapState
//! (every identity placed, every level merged), the size of the cluster rather than of the
//! change. But an identity whose class has the same content as a class the endpoint already
//! has, placed in the main list (outside every world prefix whose rules could catch it), lands
//! in exactly the rules that class's identities are in: the compiler merges identities of equal
//! entries into the same rule shapes, levels and priorities. So the compiled rules change by
//! that identity joining the remote sets of those rules, and nothing else. An identity leaving
//! is the reverse, as long as identities of its class remain (else rules or whole levels may go,
//! and a rule's reason may come from another class).
//!
//! An identity inside a world prefix whose rules could catch it (an `ipBlock` of `0.0.0.0/0`
//! selecting every pod, say) is placed by comparing its own decision with what the enclosing
//! prefixes' rules decide: the same for every identity with the same class content and the same
//! enclosing prefixes. So it joins the main list like the identities of its class that lie in
//! exactly the prefixes it lies in, and where there is none, or an exception list encloses it,
//! the endpoint is compiled in full.
//!
//! [`CompileIndex`] records, per direction, which rules each main-list class (by content and
//! family) is in, how many identities it has and which enclosing prefixes they lie in, which
//! identities were placed apart (exception lists) and which world prefixes could catch an
//! address. [`patch`] applies class changes where the rules above hold and answers None where
//! they do not; the caller then compiles in full.
//! The result equals a full compile of the new MapState (property-tested in
//! `compile/patch/tests.rs`).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};

use ipnet::IpNet;
use netpol_engine::mapstate::{ClassChange, ClassEntries};
use netpol_engine::{Direction, IdentityId, IdentityStore, PrefixSet};

use super::entries::DirectionEntries;
use super::levels::{Group, Section};
use super::nesting::{Node, Placement};
use super::CompiledRules;
use crate::ordered::{Family, RemoteSet};
use netpol_engine::{Shared, SharedId};

/// What [`patch`] needs to know of how an endpoint's rules were compiled.
#[derive(Clone, Debug, Default)]
pub struct CompileIndex {
    ingress: DirectionIndex,
    egress: DirectionIndex,
}

#[derive(Clone, Debug, Default)]
struct DirectionIndex {
    /// Main-list classes by a hash of their content.
    classes: HashMap<u64, Vec<IndexedClass>>,
    /// Identities with an exception list of their own or inside another's.
    placed_apart: HashSet<IdentityId>,
    /// The world identities with entries in this direction: rules for them would also catch an
    /// address inside them, which may then need an exception list. By identity, their prefixes
    /// found through the ipcache: one class may hold 50,000 prefixes (issue 33), and a copy of
    /// them per compiled endpoint was most of what such a policy cost. A class's prefixes are
    /// those of the compile: a commit that moves one reports the endpoints naming the classes
    /// around it as readdressed, compiled anew rather than patched.
    leaking: HashSet<IdentityId>,
    /// The world prefixes with exception lists: an identity inside one is decided by it.
    exception_worlds: PrefixSet,
    /// Some entry placed in this direction requires authentication: the compile's warning
    /// counts such entries per group placed, which a patch would not keep exact (and such
    /// policies are rare), so the endpoint is compiled in full.
    authenticates: bool,
}

/// One class of the main list in one family: its identities are in exactly `rules`.
#[derive(Clone, Debug)]
struct IndexedClass {
    content: ClassEntries,
    family: Family,
    identities: usize,
    /// The enclosing leaking identities (sorted) its identities lie in, each with how many lie
    /// there (an upper bound: leaves are not told where they lay): the places an identity of
    /// this content is known to go to the main list from.
    enclosures: HashMap<Vec<IdentityId>, usize>,
    /// Indexes into the compiled rules, ascending.
    rules: Vec<u32>,
}

impl CompileIndex {
    fn direction_mut(&mut self, direction: Direction) -> &mut DirectionIndex {
        match direction {
            Direction::Ingress => &mut self.ingress,
            Direction::Egress => &mut self.egress,
        }
    }

    /// Records one direction of a compile: its entries, placement and groups, and the groups
    /// each of its rules (numbered from `first_rule`) holds.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record(
        &mut self,
        direction: Direction,
        entries: &DirectionEntries,
        placement: &Placement,
        groups: &[Group],
        authenticates: bool,
        first_rule: usize,
        rule_groups: &[Vec<usize>],
    ) {
        let index = self.direction_mut(direction);
        index.authenticates = authenticates;
        index.placed_apart = placement
            .exceptions
            .iter()
            .map(|n| n.id)
            .chain(placement.shadowed.iter().map(|(id, _)| *id))
            .collect();
        index.leaking = placement.leaking.iter().copied().collect();
        index.exception_worlds = PrefixSet::new(placement.exception_worlds.iter().copied());
        let mut rules_of: Vec<Vec<u32>> = vec![Vec::new(); groups.len()];
        for (offset, held) in rule_groups.iter().enumerate() {
            for group in held {
                rules_of[*group].push((first_rule + offset) as u32);
            }
        }
        for (group, rules) in groups.iter().zip(rules_of) {
            let (Section::Main, Some(class)) = (group.section, group.class) else {
                continue;
            };
            let class = &entries.classes[class];
            let Some(content) = &class.class else {
                continue;
            };
            let bucket = index.classes.entry(content_hash(content)).or_default();
            let at = match bucket
                .iter()
                .position(|c| c.family == group.family && c.content == *content)
            {
                // Classes of equal content (computed apart) are in the same rules.
                Some(at) => at,
                None => {
                    bucket.push(IndexedClass {
                        content: content.clone(),
                        family: group.family,
                        identities: 0,
                        enclosures: HashMap::new(),
                        rules,
                    });
                    bucket.len() - 1
                }
            };
            let class = &mut bucket[at];
            class.identities += group.identities.len();
            for id in &group.identities {
                let enclosure = placement
                    .enclosure
                    .get(&(*id, group.family))
                    .cloned()
                    .unwrap_or_default();
                *class.enclosures.entry(enclosure).or_default() += 1;
            }
        }
    }
}

impl DirectionIndex {
    /// Whether a world prefix with entries here holds one of `members`.
    fn catches(&self, members: &[IpNet], store: &IdentityStore) -> bool {
        !self.leaking.is_empty()
            && members
                .iter()
                .any(|member| !self.enclosing(member, store).is_empty())
    }

    /// The leaking identities with a prefix holding `net`, sorted.
    fn enclosing(&self, net: &IpNet, store: &IdentityStore) -> Vec<IdentityId> {
        let mut ids: Vec<IdentityId> = store
            .worlds_holding(net)
            .into_iter()
            .filter(|id| self.leaking.contains(id))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    fn class_mut(&mut self, content: &ClassEntries, family: Family) -> Option<&mut IndexedClass> {
        self.classes
            .get_mut(&content_hash(content))?
            .iter_mut()
            .find(|c| c.family == family && c.content == *content)
    }
}

/// A hash of what decides in a class (its keys, precedences, verdicts and authentication).
fn content_hash(content: &ClassEntries) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for (key, value) in content.iter() {
        (key, value.precedence, value.verdict, value.auth).hash(&mut hasher);
    }
    hasher.finish()
}

/// Remote sets already patched in this commit, shared by every endpoint whose rules held the
/// same set: each distinct set is copied once per identity joining or leaving it.
#[derive(Debug, Default)]
pub struct PatchMemo {
    patched: HashMap<(SharedId, IdentityId, bool), Shared<RemoteSet>>,
}

impl PatchMemo {
    fn patch(&mut self, set: &Shared<RemoteSet>, id: IdentityId, join: bool) -> Shared<RemoteSet> {
        let key = (set.id(), id, join);
        if let Some(done) = self.patched.get(&key) {
            return done.clone();
        }
        let mut identities = set.identities.clone();
        match (identities.binary_search(&id), join) {
            (Err(at), true) => identities.insert(at, id),
            (Ok(at), false) => {
                identities.remove(at);
            }
            _ => {}
        }
        let patched = Shared::new(RemoteSet {
            family: set.family,
            identities,
        });
        self.patched.insert(key, patched.clone());
        patched
    }
}

/// `compiled` (with its `index`) brought up to date with `changes`, the class changes a commit
/// made to the endpoint's MapState, in a commit where the identities `changed` came, went or
/// changed members; None where the change is not a join or leave of an identity a patch can
/// place (see the module documentation): compile the endpoint in full then. An identity that
/// came or went with no class of this endpoint changes its rules too if it was placed apart or
/// lies inside a world prefix with entries (an exception list may come or go), so those answer
/// None as well.
pub fn patch(
    compiled: &CompiledRules,
    index: &CompileIndex,
    changes: &[ClassChange],
    changed: &BTreeSet<IdentityId>,
    store: &IdentityStore,
    memo: &mut PatchMemo,
) -> Option<(CompiledRules, CompileIndex)> {
    // The warning for entries requiring authentication counts them per group placed, and equal
    // MapStates can be grouped apart (a class shared or copied): such an endpoint is compiled in
    // full, even for a change that moves no class (proptest found one whose count differed).
    if index.ingress.authenticates || index.egress.authenticates {
        return None;
    }
    // Identities that came or went without a class change here: one placed apart may take its
    // exception list with it, one inside a leaking prefix may need one.
    let classed: HashSet<(Direction, IdentityId)> = changes
        .iter()
        .filter_map(|c| Some((c.class.0, c.class.1?)))
        .collect();
    for (direction, side) in [
        (Direction::Ingress, &index.ingress),
        (Direction::Egress, &index.egress),
    ] {
        for id in changed
            .iter()
            .filter(|id| !classed.contains(&(direction, **id)))
        {
            if side.placed_apart.contains(id) {
                return None;
            }
            if side.catches(store.members(*id), store) {
                return None;
            }
        }
    }
    let mut rules = compiled.rules.clone();
    let mut index = index.clone();
    for change in changes {
        let (direction, Some(id)) = change.class else {
            // The wildcard class decides for every remote.
            return None;
        };
        let side = index.direction_mut(direction);
        if side.placed_apart.contains(&id) {
            return None;
        }
        if !change.old.is_empty() {
            // An identity that stays without a class here, inside a prefix whose rules catch
            // it, may now need an exception list.
            if change.new.is_empty() && side.catches(store.members(id), store) {
                return None;
            }
            leave(&mut rules, side, &change.old, id, memo)?;
        }
        if !change.new.is_empty() {
            join(&mut rules, side, &change.new, id, store, memo)?;
        }
    }
    let patched = CompiledRules {
        rules,
        warnings: compiled.warnings.clone(),
    };
    Some((patched, index))
}

/// `id` leaves the rules of its class `old` in every family it was placed in.
fn leave(
    rules: &mut [crate::OrderedRule],
    side: &mut DirectionIndex,
    old: &ClassEntries,
    id: IdentityId,
    memo: &mut PatchMemo,
) -> Option<()> {
    for family in [Family::V4, Family::V6] {
        let Some(class) = side.class_mut(old, family) else {
            continue;
        };
        // A class in no rule (its entries unreachable or covered) changes no rule either way.
        let Some(first) = class.rules.first() else {
            continue;
        };
        let placed = rules[*first as usize].remotes.as_ref()?.contains(id);
        if !placed {
            continue;
        }
        // The last identity of a class takes its rules (and perhaps levels) with it.
        if class.identities <= 1 {
            return None;
        }
        class.identities -= 1;
        for at in &class.rules {
            let rule = &mut rules[*at as usize];
            let set = rule.remotes.as_ref()?;
            rule.remotes = Some(memo.patch(set, id, false));
        }
    }
    Some(())
}

/// `id` joins the rules of the main-list class of content `new`, in each family it has members
/// in; None where no such class exists or a world prefix with entries holds one of its members.
fn join(
    rules: &mut [crate::OrderedRule],
    side: &mut DirectionIndex,
    new: &ClassEntries,
    id: IdentityId,
    store: &IdentityStore,
    memo: &mut PatchMemo,
) -> Option<()> {
    let identity = store.get(id)?;
    if identity.is_world() {
        return None;
    }
    for node in Node::all_of(store, id).ok()? {
        // Inside an exception list, that list decides: placed apart.
        if side.exception_worlds.contains(&node.prefix) {
            return None;
        }
        let enclosure = side.enclosing(&node.prefix, store);
        let class = side.class_mut(new, node.family)?;
        // Placed as the identities of its class in the same prefixes are, or unknown.
        *class.enclosures.get_mut(&enclosure)? += 1;
        class.identities += 1;
        for at in &class.rules {
            let rule = &mut rules[*at as usize];
            let set = rule.remotes.as_ref()?;
            rule.remotes = Some(memo.patch(set, id, true));
        }
    }
    Some(())
}

#[cfg(test)]
mod tests;
