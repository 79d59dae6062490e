//! The compiler: one endpoint's MapState to an ordered rule list, the form every datapath renders.
//!
//! The output reproduces [`MapState::lookup`] under first-match semantics (HCN's ACL priorities,
//! an nftables chain):
//!
//! - **Order.** Entries sort by precedence, then by the specificity of their (protocol, port)
//!   key, then exact identity before wildcard: exactly the lookup's preference. Because a MapState
//!   never lets a covered entry have a lower precedence than the entry covering it within one
//!   identity class, the first entry in this order that matches a flow is the one the lookup
//!   returns.
//! - **Priorities.** Consecutive entries with the same action share one priority (ascending, from
//!   [`CompileOptions::base_priority`]); each change of action starts the next priority, so rules
//!   of different actions never share one.
//! - **Addresses.** Identities become their prefixes: pod and node addresses, world CIDRs. Where a
//!   CIDR's rule would also catch an identity nested inside it with a different decision (an
//!   `except` hole, a pod inside a Cilium `toCIDR`), the nested identity gets its own complete
//!   list ahead of the CIDR's rules (see the `nesting` module). IPv4 and IPv6 addresses go in separate
//!   rules.
//! - **Ports** are merged back from prefixes into single ports and inclusive ranges.
//! - **Final rules.** The wildcard root entry (allow where nothing isolates, deny where something
//!   does) becomes an explicit catch-all at the end of each direction.
//!
//! What a datapath adds is syntax only: HCN splits rules at its per-rule address limit and gives
//! each an id (`netpol_hcn::render`), nftables writes chains (`netpol_nft::ruleset`).
//!
//! **Authentication.** No datapath netpol programs can authenticate peers. An allow that requires
//! mutual authentication is compiled as `Block`: the flow fails closed rather than silently
//! skipping the requirement, and the compile reports [`CompileWarning::AuthenticationUnsupported`].
//!
//! [`MapState::lookup`]: netpol_engine::MapState::lookup

mod entries;
mod levels;
mod nesting;
mod patch;

use netpol_engine::mapstate::{MapKey, MapValue};
use netpol_engine::{Direction, IdentityId, IdentityStore, MapState};

pub use levels::merge_ranges;
pub use patch::{patch, CompileIndex, PatchMemo};

use std::collections::BTreeMap;

use crate::ordered::{Family, OrderedRule};
use entries::{DirectionEntries, Entry};
use levels::{Group, Placed, Section};

/// Knobs of the compiler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompileOptions {
    /// The priority of each direction's first rule. Rules of other owners placed below it run
    /// first, rules above it after netpol's final catch-all (that is, never).
    pub base_priority: u16,
    /// Whether the datapath filters IPv6 (HCN: dual stack, HNS 11.10 and later). Without it IPv6
    /// rules are left out: such a host has no IPv6 traffic to filter.
    pub dual_stack: bool,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            base_priority: 1000,
            dual_stack: true,
        }
    }
}

/// Why a MapState cannot be compiled.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CompileError {
    #[error("a MapState entry names identity {0}, which the identity store does not hold")]
    UnknownIdentity(IdentityId),
    #[error("MapState key {key:?}: field `{field}`: {problem}")]
    BadKey {
        key: MapKey,
        field: &'static str,
        problem: &'static str,
    },
    #[error(
        "MapState key {key:?} holds a Pass verdict; Pass must be resolved before the datapath"
    )]
    PassEntry { key: MapKey },
    #[error(
        "{direction} needs {levels} priority levels from base {base}, beyond a 16-bit priority"
    )]
    TooManyLevels {
        direction: Direction,
        levels: usize,
        base: u16,
    },
}

/// Something the compiled rules do differently from the MapState, on purpose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompileWarning {
    /// `entries` allow entries require mutual authentication, which no datapath of netpol's can
    /// do; they were compiled as blocks.
    AuthenticationUnsupported {
        direction: Direction,
        entries: usize,
    },
    /// IPv6 rules were left out because the datapath lacks IPv6 (HNS without dual stack).
    Ipv6Unsupported { direction: Direction, rules: usize },
}

impl std::fmt::Display for CompileWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompileWarning::AuthenticationUnsupported { direction, entries } => write!(
                f,
                "{direction}: {entries} allow entries require mutual authentication, which the \
                 datapath cannot enforce; they are compiled as Block (fail closed)"
            ),
            CompileWarning::Ipv6Unsupported { direction, rules } => write!(
                f,
                "{direction}: {rules} IPv6 rules left out: this datapath lacks IPv6 (HNS needs 11.10 for dual stack)"
            ),
        }
    }
}

/// Rule counts per direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleCount {
    pub ingress: usize,
    pub egress: usize,
}

impl RuleCount {
    pub fn total(&self) -> usize {
        self.ingress + self.egress
    }

    pub fn add(&mut self, direction: Direction, n: usize) {
        match direction {
            Direction::Ingress => self.ingress += n,
            Direction::Egress => self.egress += n,
        }
    }
}

/// One endpoint's compiled rules.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompiledRules {
    /// Ingress rules, then egress rules, each by ascending priority.
    pub rules: Vec<OrderedRule>,
    pub warnings: Vec<CompileWarning>,
}

impl CompiledRules {
    /// How many rules each direction holds.
    pub fn count(&self) -> RuleCount {
        let mut count = RuleCount::default();
        for rule in &self.rules {
            count.add(rule.direction, 1);
        }
        count
    }
}

/// Compiles one endpoint's MapState with the default options.
pub fn compile_endpoint(
    map: &MapState,
    store: &IdentityStore,
) -> Result<CompiledRules, CompileError> {
    compile_endpoint_with(map, store, &CompileOptions::default())
}

/// Compiles one endpoint's MapState. Classes the MapState shares are compiled once for all
/// the identities holding them.
pub fn compile_endpoint_with(
    map: &MapState,
    store: &IdentityStore,
    options: &CompileOptions,
) -> Result<CompiledRules, CompileError> {
    compile_endpoint_indexed(map, store, options).map(|(rules, _)| rules)
}

/// [`compile_endpoint_with`], with the index that lets [`patch`] bring the rules up to date
/// with later class changes instead of compiling them again.
pub fn compile_endpoint_indexed(
    map: &MapState,
    store: &IdentityStore,
    options: &CompileOptions,
) -> Result<(CompiledRules, CompileIndex), CompileError> {
    compile_classes(&entries::gather(map)?, store, options)
}

/// One endpoint of an engine, compiled: its key, its pod's addresses and its rules.
#[derive(Debug)]
pub struct CompiledEndpoint<'a> {
    pub key: &'a str,
    pub addresses: Vec<std::net::IpAddr>,
    pub rules: CompiledRules,
}

/// Compiles every endpoint of `engine` in key order, stopping at the first that cannot be
/// compiled (returned with its key).
pub fn compile_engine<'a>(
    engine: &'a netpol_engine::Engine,
    options: &CompileOptions,
) -> Result<Vec<CompiledEndpoint<'a>>, (String, CompileError)> {
    engine
        .endpoints()
        .map(|(key, map)| {
            let rules = compile_endpoint_with(map, engine.identities(), options)
                .map_err(|error| (key.to_string(), error))?;
            let addresses = engine
                .endpoint_pod(key)
                .map(|(_, addresses)| addresses.to_vec())
                .unwrap_or_default();
            Ok(CompiledEndpoint {
                key,
                addresses,
                rules,
            })
        })
        .collect()
}

/// Compiles MapState entries (the form [`MapState::iter`] yields).
pub fn compile_entries<'a>(
    entries: impl IntoIterator<Item = (MapKey, &'a MapValue)>,
    store: &IdentityStore,
    options: &CompileOptions,
) -> Result<CompiledRules, CompileError> {
    compile_classes(&entries::gather_entries(entries)?, store, options).map(|(rules, _)| rules)
}

fn compile_classes(
    classes: &BTreeMap<Direction, DirectionEntries>,
    store: &IdentityStore,
    options: &CompileOptions,
) -> Result<(CompiledRules, CompileIndex), CompileError> {
    let mut out = CompiledRules::default();
    let mut index = CompileIndex::default();
    for (direction, class) in classes {
        let placement = nesting::place(class, store)?;
        let (placed, groups) = place_entries(class, &placement);
        let auth_entries = placed.iter().filter(|p| p.entry.needs_auth()).count();
        if auth_entries > 0 {
            out.warnings
                .push(CompileWarning::AuthenticationUnsupported {
                    direction: *direction,
                    entries: auth_entries,
                });
        }
        let ordered = levels::order(
            *direction,
            placed,
            &groups,
            options.base_priority,
            options.dual_stack,
        )
        .map_err(|levels| CompileError::TooManyLevels {
            direction: *direction,
            levels,
            base: options.base_priority,
        })?;
        if ordered.dropped_ipv6 > 0 {
            out.warnings.push(CompileWarning::Ipv6Unsupported {
                direction: *direction,
                rules: ordered.dropped_ipv6,
            });
        }
        index.record(
            *direction,
            class,
            &placement,
            &groups,
            auth_entries > 0,
            out.rules.len(),
            &ordered.groups,
        );
        out.rules.extend(ordered.rules);
    }
    Ok((out, index))
}

/// Puts every entry that reaches the datapath at its place: exception lists (the identity's own
/// entries and the wildcard entries, under its addresses), then the main list. Identities of
/// one class, family and section share one group, so each entry is placed once per group, not
/// once per identity.
fn place_entries<'a>(
    class: &'a entries::DirectionEntries,
    placement: &nesting::Placement,
) -> (Vec<Placed<'a>>, Vec<Group>) {
    let mut keyed: BTreeMap<(Section, Option<usize>, Family), Vec<IdentityId>> = BTreeMap::new();
    for node in &placement.exceptions {
        let section = Section::Exception(std::cmp::Reverse(node.depth()));
        let group = class.class_of.get(&node.id).copied();
        keyed
            .entry((section, group, node.family))
            .or_default()
            .push(node.id);
    }
    for node in &placement.main {
        let group = class.class_of.get(&node.id).copied();
        keyed
            .entry((Section::Main, group, node.family))
            .or_default()
            .push(node.id);
    }
    let mut placed = Vec::new();
    let mut groups = Vec::with_capacity(keyed.len());
    for ((section, own, family), mut identities) in keyed {
        identities.sort_unstable();
        identities.dedup();
        let index = groups.len();
        groups.push(Group {
            family,
            identities,
            section,
            class: own,
        });
        let own: &[Entry] = own.map_or(&[], |c| class.classes[c].entries.as_slice());
        let wildcard: &[Entry] = match section {
            Section::Exception(_) => &class.wildcard,
            Section::Main => &[],
        };
        placed.extend(own.iter().chain(wildcard).map(|entry| Placed {
            section,
            entry,
            group: Some(index),
        }));
    }
    placed.extend(class.wildcard.iter().map(|entry| Placed {
        section: Section::Main,
        entry,
        group: None,
    }));
    (placed, groups)
}
