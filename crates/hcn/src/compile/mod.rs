//! The compiler: one endpoint's MapState to an ordered HCN ACL list.
//!
//! The output reproduces [`MapState::lookup`] under HCN's first-match semantics:
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
//!   rules, at most [`MAX_ADDRESSES_PER_RULE`] per rule.
//! - **Ports** are merged back from prefixes into single ports and `a-b` ranges. Protocols are
//!   numbers, `256` for any.
//! - **Final rules.** The wildcard root entry (allow where nothing isolates, deny where something
//!   does) becomes an explicit catch-all at the end of each direction.
//! - **Ids.** Every rule's `Id` is `netpol-` plus a hash of its content, so ownership and diffs
//!   are exact.
//!
//! **Authentication.** HCN cannot authenticate peers. An allow that requires mutual
//! authentication is compiled as `Block`: the flow fails closed rather than silently skipping the
//! requirement, and the compile reports [`CompileWarning::AuthenticationUnsupported`].
//!
//! [`MapState::lookup`]: netpol_engine::MapState::lookup

mod entries;
mod nesting;
pub mod ordered;
mod render;

use std::collections::BTreeMap;
use std::sync::Arc;

use netpol_engine::mapstate::{MapKey, MapValue};
use netpol_engine::reference::Reason;
use netpol_engine::{Direction, IdentityId, IdentityStore, MapState};

pub use ordered::{Family, OrderedRule, RuleAction};
pub use render::{rule_id, MAX_ADDRESSES_PER_RULE};

use crate::naive::naive_rule_count;
use crate::schema::{AclPolicySetting, EndpointPolicy, ModifyEndpointRequest};
use entries::Entry;
use render::{Placed, Section};

/// Knobs of the compiler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompileOptions {
    /// The priority of each direction's first rule. Rules of other owners placed below it run
    /// first, rules above it after netpol's final catch-all (that is, never).
    pub base_priority: u16,
    /// Whether HNS supports IPv6 rules (dual stack, HNS 11.10 and later). Without it IPv6 rules
    /// are left out: such a host has no IPv6 traffic to filter.
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
        "{direction} needs {levels} priority levels from base {base}, beyond HCN's 16-bit priority"
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
    /// `entries` allow entries require mutual authentication, which HCN cannot do; they were
    /// compiled as blocks.
    AuthenticationUnsupported {
        direction: Direction,
        entries: usize,
    },
    /// IPv6 rules were left out because HNS lacks dual stack.
    Ipv6Unsupported { direction: Direction, rules: usize },
}

impl std::fmt::Display for CompileWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompileWarning::AuthenticationUnsupported { direction, entries } => write!(
                f,
                "{direction}: {entries} allow entries require mutual authentication, which HCN \
                 cannot enforce; they are compiled as Block (fail closed)"
            ),
            CompileWarning::Ipv6Unsupported { direction, rules } => write!(
                f,
                "{direction}: {rules} IPv6 rules left out: this HNS lacks dual stack (needs 11.10)"
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

    fn add(&mut self, direction: Direction, n: usize) {
        match direction {
            Direction::Ingress => self.ingress += n,
            Direction::Egress => self.egress += n,
        }
    }
}

/// One endpoint's compiled ACLs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompiledAcls {
    /// Ingress rules, then egress rules, each by ascending priority.
    pub rules: Vec<AclPolicySetting>,
    /// The same rules in the datapath-neutral form (ingress, then egress, by ascending
    /// priority), before HCN's limit of addresses per rule splits them.
    pub ordered: Vec<OrderedRule>,
    pub count: RuleCount,
    /// What the plan's naive expansion would emit for the same MapState: one rule per remote
    /// identity and port, with every port of a range a rule of its own.
    pub naive: RuleCount,
    pub warnings: Vec<CompileWarning>,
    /// For each rule id, the MapState entry reason of the best-ranked entry the rule carries.
    pub reasons: BTreeMap<String, Arc<Reason>>,
}

impl CompiledAcls {
    /// The rules wrapped as endpoint policies.
    pub fn policies(&self) -> Vec<EndpointPolicy> {
        self.rules.iter().map(EndpointPolicy::acl).collect()
    }

    /// The `Update` request that would install exactly these rules, as `netpol acls` shows it.
    /// The real request also carries the endpoint's policies netpol does not own.
    pub fn update_request(&self) -> ModifyEndpointRequest {
        ModifyEndpointRequest::update(self.policies())
    }

    /// Pretty JSON of [`CompiledAcls::update_request`].
    pub fn update_request_json(&self) -> String {
        serde_json::to_string_pretty(&self.update_request())
            .expect("an HCN request serializes to JSON")
    }
}

/// Compiles one endpoint's MapState with the default options.
pub fn compile_endpoint(
    map: &MapState,
    store: &IdentityStore,
) -> Result<CompiledAcls, CompileError> {
    compile_endpoint_with(map, store, &CompileOptions::default())
}

/// Compiles one endpoint's MapState.
pub fn compile_endpoint_with(
    map: &MapState,
    store: &IdentityStore,
    options: &CompileOptions,
) -> Result<CompiledAcls, CompileError> {
    compile_entries(map.iter(), store, options)
}

/// One endpoint of an engine, compiled: its key, its pod's addresses and its rules.
#[derive(Debug)]
pub struct CompiledEndpoint<'a> {
    pub key: &'a str,
    pub addresses: Vec<std::net::IpAddr>,
    pub acls: CompiledAcls,
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
            let acls = compile_endpoint_with(map, engine.identities(), options)
                .map_err(|error| (key.to_string(), error))?;
            let addresses = engine
                .endpoint_pod(key)
                .map(|(_, addresses)| addresses.to_vec())
                .unwrap_or_default();
            Ok(CompiledEndpoint {
                key,
                addresses,
                acls,
            })
        })
        .collect()
}

/// Compiles MapState entries (the form [`MapState::iter`] yields).
pub fn compile_entries<'a>(
    entries: impl IntoIterator<Item = (MapKey, &'a MapValue)>,
    store: &IdentityStore,
    options: &CompileOptions,
) -> Result<CompiledAcls, CompileError> {
    let mut naive = RuleCount::default();
    let entries = entries.into_iter().inspect(|(key, _)| {
        naive.add(key.direction, naive_rule_count(key));
    });
    let classes = entries::gather(entries)?;
    let mut out = CompiledAcls {
        naive,
        ..CompiledAcls::default()
    };
    for (direction, class) in &classes {
        let placement = nesting::place(class, store)?;
        let placed = place_entries(class, &placement);
        let auth_entries = placed.iter().filter(|p| p.entry.needs_auth()).count();
        if auth_entries > 0 {
            out.warnings
                .push(CompileWarning::AuthenticationUnsupported {
                    direction: *direction,
                    entries: auth_entries,
                });
        }
        let rendered = render::render(
            *direction,
            placed,
            options.base_priority,
            options.dual_stack,
        )
        .map_err(|levels| CompileError::TooManyLevels {
            direction: *direction,
            levels,
            base: options.base_priority,
        })?;
        if rendered.dropped_ipv6 > 0 {
            out.warnings.push(CompileWarning::Ipv6Unsupported {
                direction: *direction,
                rules: rendered.dropped_ipv6,
            });
        }
        out.count.add(*direction, rendered.rules.len());
        out.ordered.extend(rendered.ordered);
        for rule in rendered.rules {
            out.reasons
                .insert(rule.setting.id.clone(), rule.explained_by.reason.clone());
            out.rules.push(rule.setting);
        }
    }
    Ok(out)
}

/// Puts every entry that reaches HCN at its place: exception lists (the identity's own entries
/// and the wildcard entries, under its addresses), then the main list.
fn place_entries<'a>(
    class: &'a entries::DirectionEntries,
    placement: &nesting::Placement,
) -> Vec<Placed<'a>> {
    let own = |id: &IdentityId| -> &'a [Entry] { class.exact.get(id).map_or(&[], Vec::as_slice) };
    let mut placed = Vec::new();
    for node in &placement.exceptions {
        let section = Section::Exception(std::cmp::Reverse(node.depth()));
        for entry in own(&node.id).iter().chain(&class.wildcard) {
            placed.push(Placed {
                section,
                entry,
                address: Some(node.prefix),
            });
        }
    }
    for node in &placement.main {
        for entry in own(&node.id) {
            placed.push(Placed {
                section: Section::Main,
                entry,
                address: Some(node.prefix),
            });
        }
    }
    placed.extend(class.wildcard.iter().map(|entry| Placed {
        section: Section::Main,
        entry,
        address: None,
    }));
    placed
}
