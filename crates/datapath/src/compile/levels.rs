//! From placed entries to ordered rules: first-match order, priorities and merging.
//!
//! Placed entries are sorted the way a lookup prefers them. Consecutive entries with the same
//! action form one *level*: inside a level the order cannot matter (every match gives the same
//! action), so a level gets one priority and its entries merge freely, first ports per
//! identity group, then identities per port set. Levels alternate actions, so two overlapping rules of
//! different actions never share a priority (HCN leaves such ties undefined).

use std::cmp::Reverse;
use std::collections::BTreeMap;

use netpol_engine::{Direction, IdentityId, Protocol};

use super::entries::{Entry, Rank};
use crate::ordered::{Family, OrderedRule, RemoteSet, ALL_PORTS};
use netpol_engine::Shared;

/// Where a placed entry sorts: exception lists by depth, deepest first, then the main list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Section {
    Exception(Reverse<(u8, bool)>),
    Main,
}

/// Identities of one family that an entry applies to together: one class group's identities
/// in one section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Group {
    pub family: Family,
    /// Sorted.
    pub identities: Vec<IdentityId>,
    pub section: Section,
    /// The class group (in [`super::entries::DirectionEntries::classes`]) whose entries the
    /// identities have; None for identities with no entries of their own.
    pub class: Option<usize>,
}

/// An entry at its place in one endpoint's list, with the identities it applies to (an index
/// into the groups; None: any remote).
#[derive(Clone, Debug)]
pub(crate) struct Placed<'a> {
    pub section: Section,
    pub entry: &'a Entry,
    pub group: Option<usize>,
}

impl Placed<'_> {
    fn sort_key(
        &self,
    ) -> (
        Section,
        Reverse<Rank>,
        Option<usize>,
        netpol_engine::PortKey,
    ) {
        (self.section, self.entry.order(), self.group, self.entry.key)
    }

    fn is_catch_all(&self) -> bool {
        self.group.is_none() && self.entry.key.protocol.is_none()
    }
}

/// One level's rule before it gets its priority and id.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct RuleShape {
    family: Family,
    protocol: Option<Protocol>,
    /// Merged inclusive ranges; `[(0, 65535)]` is every port.
    ports: Vec<(u16, u16)>,
    /// Indexes into the groups; empty: any remote.
    groups: Vec<usize>,
}

/// What ordering one direction produced.
#[derive(Debug, Default)]
pub(crate) struct Levels {
    pub rules: Vec<OrderedRule>,
    /// For each rule, the groups (indexes) its remote set holds.
    pub groups: Vec<Vec<usize>>,
    pub dropped_ipv6: usize,
    pub levels: usize,
}

/// Orders the placed entries of one direction into rules, one priority per level.
pub(crate) fn order(
    direction: Direction,
    mut placed: Vec<Placed<'_>>,
    groups: &[Group],
    base_priority: u16,
    dual_stack: bool,
) -> Result<Levels, usize> {
    placed.sort_by_key(Placed::sort_key);
    let mut out = Levels::default();
    let mut rest = placed.as_slice();
    while let Some(first) = rest.first() {
        let action = first.entry.action();
        let len = rest
            .iter()
            .position(|p| p.entry.action() != action)
            .unwrap_or(rest.len());
        let (level, tail) = rest.split_at(len);
        rest = tail;
        let priority =
            u16::try_from(usize::from(base_priority) + out.levels).map_err(|_| out.levels + 1)?;
        out.levels += 1;
        let catch_all = level.iter().find(|p| p.is_catch_all());
        let shapes = match catch_all {
            Some(_) => vec![RuleShape {
                family: Family::Any,
                protocol: None,
                ports: vec![ALL_PORTS],
                groups: Vec::new(),
            }],
            None => merge_level(level, groups),
        };
        for shape in shapes {
            if shape.family == Family::V6 && !dual_stack {
                out.dropped_ipv6 += 1;
                continue;
            }
            let explained_by =
                catch_all.map_or_else(|| explaining_entry(level, &shape), |p| p.entry);
            let rule = OrderedRule {
                direction,
                action,
                priority,
                remotes: remote_set(&shape, groups),
                protocol: shape.protocol,
                ports: shape.ports,
                reason: explained_by.reason.clone(),
            };
            out.rules.push(rule);
            out.groups.push(shape.groups);
        }
        if catch_all.is_some() {
            // Everything after a catch-all is unreachable.
            break;
        }
    }
    Ok(out)
}

/// Port ranges per protocol.
type PortsByProtocol = BTreeMap<Option<Protocol>, Vec<(u16, u16)>>;
/// Groups per rule shape (family, protocol, ports).
type GroupsByShape = BTreeMap<(Family, Option<Protocol>, Vec<(u16, u16)>), Vec<usize>>;

/// Merges one level: drops entries a wildcard entry of the level already covers, merges ports
/// per (group, protocol), then groups per (family, protocol, ports).
fn merge_level(level: &[Placed<'_>], groups: &[Group]) -> Vec<RuleShape> {
    let mut wildcard: PortsByProtocol = BTreeMap::new();
    for p in level.iter().filter(|p| p.group.is_none()) {
        wildcard
            .entry(p.entry.key.protocol)
            .or_default()
            .push(p.entry.key.range());
    }
    for ranges in wildcard.values_mut() {
        *ranges = merge_ranges(std::mem::take(ranges));
    }
    let covered = |protocol: Option<Protocol>, range: (u16, u16)| {
        wildcard
            .get(&protocol)
            .is_some_and(|rs| rs.iter().any(|r| r.0 <= range.0 && range.1 <= r.1))
    };

    let mut per_group: BTreeMap<usize, PortsByProtocol> = BTreeMap::new();
    for p in level {
        let Some(group) = p.group else { continue };
        let range = p.entry.key.range();
        if covered(p.entry.key.protocol, range) {
            continue;
        }
        per_group
            .entry(group)
            .or_default()
            .entry(p.entry.key.protocol)
            .or_default()
            .push(range);
    }

    let mut shapes: GroupsByShape = BTreeMap::new();
    for (protocol, ranges) in wildcard {
        shapes.entry((Family::Any, protocol, ranges)).or_default();
    }
    for (group, mut protocols) in per_group {
        // An any-protocol entry for the group covers its protocol-specific ones.
        if let Some(all) = protocols.remove(&None) {
            protocols = BTreeMap::from([(None, all)]);
        }
        for (protocol, ranges) in protocols {
            shapes
                .entry((groups[group].family, protocol, merge_ranges(ranges)))
                .or_default()
                .push(group);
        }
    }
    shapes
        .into_iter()
        .map(|((family, protocol, ports), groups)| RuleShape {
            family,
            protocol,
            ports,
            groups,
        })
        .collect()
}

/// The identities of a shape's groups as one set; None for a shape that names none.
fn remote_set(shape: &RuleShape, groups: &[Group]) -> Option<Shared<RemoteSet>> {
    if shape.groups.is_empty() {
        return None;
    }
    let mut identities: Vec<IdentityId> = shape
        .groups
        .iter()
        .flat_map(|g| groups[*g].identities.iter().copied())
        .collect();
    identities.sort_unstable();
    identities.dedup();
    Some(Shared::new(RemoteSet {
        family: shape.family,
        identities,
    }))
}

/// Sorts and merges overlapping or adjacent inclusive ranges.
pub fn merge_ranges(mut ranges: Vec<(u16, u16)>) -> Vec<(u16, u16)> {
    ranges.sort_unstable();
    let mut out: Vec<(u16, u16)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match out.last_mut() {
            Some(last) if u32::from(lo) <= u32::from(last.1) + 1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// The best-ranked entry of the level that the rule covers, for explanations.
fn explaining_entry<'a>(level: &[Placed<'a>], shape: &RuleShape) -> &'a Entry {
    level
        .iter()
        .find(|p| {
            p.entry.key.protocol == shape.protocol
                && match p.group {
                    None => shape.family == Family::Any,
                    Some(g) => shape.groups.contains(&g),
                }
        })
        .unwrap_or(&level[0])
        .entry
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_when_they_touch() {
        assert_eq!(
            merge_ranges(vec![(82, 83), (80, 81), (90, 90), (85, 88), (86, 86)]),
            vec![(80, 83), (85, 88), (90, 90)]
        );
        assert_eq!(merge_ranges(vec![(0, 65535), (5, 6)]), vec![(0, 65535)]);
    }
}
