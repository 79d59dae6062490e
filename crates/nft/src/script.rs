//! The ruleset as `nft -f` scripts: one that deletes and re-creates netpol's table, and one that
//! applies a diff. Either is one transaction: the kernel applies all of it or, on any error, none.
//! Nothing outside table `inet netpol` is named.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use netpol_engine::Direction;

use crate::droplog::{is_log_chain, limit_declaration, log_chain, DropLog};
use crate::labels::RuleLabels;
use crate::naming::{audit_chain_name, chain_name, comment_line, hash, AUDIT_PREFIX};
use crate::rule_text::{render_audit_rule, render_enforced_rule};
pub use crate::rule_text::{render_rule, render_rule_logged};
use crate::ruleset::{AddressSet, ChainRule, ChainVerdict, EndpointChains, Ruleset};

/// The family and name of the one table netpol owns.
pub const TABLE: &str = "inet netpol";

/// A netfilter hook netpol's table attaches a base chain to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hook {
    pub name: &'static str,
    pub priority: &'static str,
}

/// Every path a packet to or from a local pod takes through the node: `forward` (routed between
/// pods, and between pods and anything off the node), `input` (a pod to its node: kubelet's
/// address, host services, hostNetwork pods) and `output` (the node and hostNetwork pods to a
/// pod). kube-proxy's DNAT (iptables and nftables modes, `dstnat`, -100) has already run when
/// these see a packet, so Services are judged by their backends. `input` runs after IPVS (which
/// takes a Service's packets at 98-99 of `input` and sends them on through `output`, where the
/// backend is visible) and after input SNAT (100): a pod's packet to a Service VIP bound on
/// `kube-ipvs0` is judged once, by its backend, on `output`.
pub const HOOKS: [Hook; 3] = [
    Hook {
        name: "forward",
        priority: "filter",
    },
    Hook {
        name: "input",
        priority: "101",
    },
    Hook {
        name: "output",
        priority: "filter",
    },
];

/// The prefix of the dispatch chain's name (`pods_<hash>`), which every base chain jumps to.
pub const DISPATCH_PREFIX: &str = "pods_";

/// Why a ruleset cannot be written as a script.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScriptError {
    #[error("endpoint {endpoint} names set {set}, which the ruleset does not hold")]
    UnknownSet { set: String, endpoint: String },
    #[error("address {address} belongs to endpoints {first} and {second}; a packet could not tell them apart")]
    SharedAddress {
        address: IpAddr,
        first: String,
        second: String,
    },
}

/// netpol's table as chains named by their content: a chain's name ends in a hash of its lines,
/// so a changed chain is a new chain, an unchanged one keeps its name, and comparing the chain
/// names in the kernel with these is a complete diff (see [`crate::programmer`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    /// Endpoint chains by name: their lines (a comment, then the rules).
    pub chains: BTreeMap<String, Vec<String>>,
    /// The dispatch chain: replies first, neighbor discovery, then a jump by address to each
    /// endpoint's chains.
    pub dispatch: (String, Vec<String>),
    /// One base chain per hook, in [`HOOKS`] order: its name and lines.
    pub bases: Vec<(String, Vec<String>)>,
    /// The names of each endpoint's two chains, by endpoint key.
    pub by_endpoint: BTreeMap<String, Vec<String>>,
    /// Every named address set the endpoint chains reference, by name.
    pub sets: BTreeMap<Arc<str>, Arc<AddressSet>>,
    /// The drop log the log chains write to (its limit is declared with them).
    pub drop_log: DropLog,
}

/// Which kind of chain a name is, by its prefix: base chains (0) jump to the dispatch chain (1),
/// which jumps to endpoint chains (2), which go to audit chains (3) and jump to log chains (4),
/// as audit chains go to log chains. A chain must be added after what it jumps to and deleted
/// before it.
pub fn stage(name: &str) -> u8 {
    let base = HOOKS.iter().any(|h| {
        name.strip_prefix(h.name)
            .is_some_and(|rest| rest.starts_with('_'))
    });
    if base {
        0
    } else if name.starts_with(DISPATCH_PREFIX) {
        1
    } else if is_log_chain(name) {
        4
    } else if name.starts_with(AUDIT_PREFIX) {
        3
    } else {
        2
    }
}

/// Endpoint chains as last rendered, kept between tables: an endpoint whose chains are the same
/// as last time (the same rules, naming sets by the same names; set contents aside) is not
/// rendered and hashed again. Rendering every chain of every endpoint for each replica was a
/// third of an nftables change at 150,000 pods.
#[derive(Clone, Default)]
pub struct RenderMemo {
    by_endpoint: HashMap<String, (EndpointChains, Rendered)>,
}

/// A chain's name and lines.
type RenderedChain = Arc<(String, Vec<String>)>;

/// One endpoint's two chains, its audit chains, and the log chains their drop and would-deny
/// rules go to.
#[derive(Clone)]
struct Rendered {
    drop_log: DropLog,
    chains: [RenderedChain; 2],
    audits: [Option<RenderedChain>; 2],
    logs: Arc<[(String, Vec<String>)]>,
}

/// A cache says nothing about the kernel: two [`crate::programmer::Known`]s that differ only in
/// their memos describe the same table.
impl PartialEq for RenderMemo {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for RenderMemo {}

impl std::fmt::Debug for RenderMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RenderMemo({} endpoints)", self.by_endpoint.len())
    }
}

impl RenderMemo {
    /// The name and lines of the ingress and egress chains of endpoint `key`, and of the log
    /// chains they jump to.
    fn render(&mut self, key: &str, chains: &EndpointChains, drop_log: DropLog) -> Rendered {
        if let Some((known, rendered)) = self.by_endpoint.get(key) {
            if known.same_chains(chains) && rendered.drop_log == drop_log {
                return rendered.clone();
            }
        }
        let mut logs = BTreeMap::new();
        let mut log_of = |rule: &ChainRule, direction: Direction| {
            matches!(rule.verdict, ChainVerdict::Drop | ChainVerdict::WouldDeny).then(|| {
                let labels = RuleLabels::of(&rule.reason, direction, rule.verdict);
                let (name, lines) = log_chain(&labels, &drop_log);
                logs.insert(name.clone(), lines);
                name
            })
        };
        let audits = Direction::BOTH.map(|direction| {
            let rules = chains.audit(direction);
            (!rules.is_empty()).then(|| {
                let mut lines = vec![comment_line(key, direction)];
                for rule in rules {
                    let log = log_of(rule, direction);
                    lines.push(render_audit_rule(rule, log.as_deref()));
                }
                Arc::new((audit_chain_name(key, direction, &lines), lines))
            })
        });
        let rendered = Direction::BOTH.map(|direction| {
            let audit = &audits[usize::from(direction == Direction::Egress)];
            let audit = audit.as_ref().map(|chain| chain.0.as_str());
            let mut lines = vec![comment_line(key, direction)];
            for rule in chains.chain(direction).iter() {
                let log = log_of(rule, direction);
                lines.push(render_enforced_rule(rule, log.as_deref(), audit));
            }
            Arc::new((chain_name(key, direction, &lines), lines))
        });
        let rendered = Rendered {
            drop_log,
            chains: rendered,
            audits,
            logs: logs.into_iter().collect(),
        };
        self.by_endpoint
            .insert(key.to_owned(), (chains.clone(), rendered.clone()));
        rendered
    }

    /// Every endpoint chain and audit chain as last rendered: (endpoint key, direction, chain
    /// name, its rules).
    pub fn chains(&self) -> impl Iterator<Item = (&str, Direction, &str, &[ChainRule])> {
        self.by_endpoint
            .iter()
            .flat_map(|(key, (chains, rendered))| {
                let enforced = Direction::BOTH.into_iter().zip(&rendered.chains).map(
                    move |(direction, chain)| {
                        (
                            key.as_str(),
                            direction,
                            chain.0.as_str(),
                            chains.chain(direction),
                        )
                    },
                );
                let audits = Direction::BOTH
                    .into_iter()
                    .zip(&rendered.audits)
                    .filter_map(move |(direction, chain)| {
                        let chain = chain.as_ref()?;
                        Some((
                            key.as_str(),
                            direction,
                            chain.0.as_str(),
                            chains.audit(direction),
                        ))
                    });
                enforced.chain(audits)
            })
    }
}

impl Table {
    pub fn new(ruleset: &Ruleset) -> Result<Table, ScriptError> {
        Self::with_memo(ruleset, &mut RenderMemo::default())
    }

    /// [`Table::new`], reusing the chains `memo` rendered last time where they are the same, and
    /// keeping this table's in it.
    pub fn with_memo(ruleset: &Ruleset, memo: &mut RenderMemo) -> Result<Table, ScriptError> {
        memo.by_endpoint
            .retain(|key, _| ruleset.endpoints.contains_key(key));
        let mut table = Table {
            drop_log: ruleset.drop_log,
            ..Table::default()
        };
        let mut names: BTreeMap<(&str, Direction), String> = BTreeMap::new();
        for (key, chains) in &ruleset.endpoints {
            let rendered = memo.render(key, chains, ruleset.drop_log);
            for (name, lines) in rendered.logs.iter() {
                if !table.chains.contains_key(name) {
                    table.chains.insert(name.clone(), lines.clone());
                }
            }
            for (direction, audit) in Direction::BOTH.into_iter().zip(&rendered.audits) {
                let Some(audit) = audit else { continue };
                table.add_sets(ruleset, key, chains.audit(direction))?;
                // Before the endpoint chains that go to it: a check lists an endpoint's
                // chains in this order.
                table
                    .by_endpoint
                    .entry(key.clone())
                    .or_default()
                    .push(audit.0.clone());
                table.chains.insert(audit.0.clone(), audit.1.clone());
            }
            for (direction, rendered) in Direction::BOTH.into_iter().zip(rendered.chains) {
                table.add_sets(ruleset, key, chains.chain(direction))?;
                let (name, lines) = (rendered.0.clone(), rendered.1.clone());
                names.insert((key.as_str(), direction), name.clone());
                table
                    .by_endpoint
                    .entry(key.clone())
                    .or_default()
                    .push(name.clone());
                table.chains.insert(name, lines);
            }
        }
        let lines = dispatch_chain(ruleset, &names)?;
        let dispatch = format!(
            "{DISPATCH_PREFIX}{}",
            hash(lines.iter().map(String::as_str))
        );
        table.bases = HOOKS
            .iter()
            .map(|hook| {
                let lines = vec![
                    format!(
                        "type filter hook {} priority {}; policy accept;",
                        hook.name, hook.priority
                    ),
                    format!("jump {dispatch}"),
                ];
                let name = format!("{}_{}", hook.name, hash(lines.iter().map(String::as_str)));
                (name, lines)
            })
            .collect();
        table.dispatch = (dispatch, lines);
        Ok(table)
    }

    /// Takes into the table the sets `rules` (of endpoint `key`) name, from `ruleset`.
    fn add_sets(
        &mut self,
        ruleset: &Ruleset,
        key: &str,
        rules: &[ChainRule],
    ) -> Result<(), ScriptError> {
        for remote in rules.iter().filter_map(|r| r.remote.as_ref()) {
            if !self.sets.contains_key(&remote.set.name) {
                let set =
                    ruleset
                        .sets
                        .get(&remote.set.name)
                        .ok_or_else(|| ScriptError::UnknownSet {
                            set: remote.set.name.to_string(),
                            endpoint: key.to_string(),
                        })?;
                self.sets.insert(remote.set.name.clone(), set.clone());
            }
        }
        Ok(())
    }

    /// Every chain name, in the order they can be added: endpoint chains, the dispatch chain,
    /// the base chains.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.chains
            .keys()
            .map(String::as_str)
            .chain([self.dispatch.0.as_str()])
            .chain(self.bases.iter().map(|(n, _)| n.as_str()))
    }

    /// The chain names of endpoint `key` (none if the table does not program it).
    pub fn endpoint_chains(&self, key: &str) -> impl Iterator<Item = &str> {
        self.by_endpoint
            .get(key)
            .into_iter()
            .flatten()
            .map(String::as_str)
    }

    /// The lines of chain `name`, if the table has it.
    pub fn lines(&self, name: &str) -> Option<&[String]> {
        if let Some(lines) = self.chains.get(name) {
            return Some(lines);
        }
        [&self.dispatch]
            .into_iter()
            .chain(&self.bases)
            .find(|(n, _)| n == name)
            .map(|(_, lines)| lines.as_slice())
    }
}

/// `chain NAME { lines }`, indented for a table block.
fn chain_block(name: &str, lines: &[String]) -> String {
    let mut out = format!("\tchain {name} {{\n");
    for line in lines {
        let _ = writeln!(out, "\t\t{line}");
    }
    out.push_str("\t}\n");
    out
}

/// The script that replaces netpol's table with `ruleset` in one transaction.
pub fn render(ruleset: &Ruleset) -> Result<String, ScriptError> {
    let table = Table::new(ruleset)?;
    let all: Vec<&str> = table.names().collect();
    let sets = SetChanges {
        create: table.sets.values().map(Arc::as_ref).collect(),
        ..SetChanges::default()
    };
    let mut out = format!("add table {TABLE}\ndelete table {TABLE}\n");
    out.push_str(&render_changes(&table, true, &sets, &all, &[]));
    Ok(out)
}

/// Elements of one set to delete and to add: (set, deleted, added).
pub type SetPatch<'a> = (&'a AddressSet, Cow<'a, [IpNet]>, Cow<'a, [IpNet]>);

/// What one transaction does to the table's named sets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetChanges<'a> {
    /// Sets the kernel does not hold: declared with their elements.
    pub create: Vec<&'a AddressSet>,
    /// Sets the kernel holds with contents not known (read back after a start, a failure or a
    /// resync): flushed and filled in the same transaction.
    pub refill: Vec<&'a AddressSet>,
    /// Sets whose contents are known: (set, elements to delete, elements to add).
    pub patch: Vec<SetPatch<'a>>,
    /// Sets no chain references any more, deleted after the chains that referenced them.
    pub delete: Vec<&'a str>,
}

/// The most elements a set may hold for a deletion from it to be sent as the set flushed and
/// declared again whole. libnftables answers any `delete element` in a table that holds interval
/// sets by first reading every element of every interval set of the table (2.8 s and 267 MB
/// beside 200,000 prefixes), so a pod set losing a replica is cheaper refilled; a larger set
/// costs more to send whole than the table costs to read.
pub const REFILL_ON_DELETE: usize = 16_384;

impl<'a> SetChanges<'a> {
    /// Notes that `set` loses `deleted` and gains `added`: a patch, or, when the set loses
    /// elements and is small ([`REFILL_ON_DELETE`]), a refill in the same transaction.
    pub fn patch_or_refill(
        &mut self,
        set: &'a AddressSet,
        deleted: Cow<'a, [IpNet]>,
        added: Cow<'a, [IpNet]>,
    ) {
        if !deleted.is_empty() && set.nets.len() <= REFILL_ON_DELETE {
            self.refill.push(set);
        } else {
            self.patch.push((set, deleted, added));
        }
    }
}

impl SetChanges<'_> {
    /// Whether the sets change by patches alone: no set is created, refilled or deleted.
    pub fn only_patches(&self) -> bool {
        !self.patch.is_empty()
            && self.create.is_empty()
            && self.refill.is_empty()
            && self.delete.is_empty()
    }

    pub fn is_empty(&self) -> bool {
        self.create.is_empty()
            && self.refill.is_empty()
            && self.patch.is_empty()
            && self.delete.is_empty()
    }

    /// (elements added, elements deleted) by the patches and refills (created sets not counted).
    pub fn element_counts(&self) -> (usize, usize) {
        let added = self.patch.iter().map(|(_, _, a)| a.len()).sum::<usize>()
            + self.refill.iter().map(|s| s.nets.len()).sum::<usize>();
        let deleted = self.patch.iter().map(|(_, d, _)| d.len()).sum();
        (added, deleted)
    }
}

/// `{ a, b, c }`.
fn elements<'a>(nets: impl IntoIterator<Item = &'a IpNet>) -> String {
    let mut out = String::from("{ ");
    for (i, net) in nets.into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&render_net(net));
    }
    out.push_str(" }");
    out
}

/// A set's declaration inside a table block, with its elements.
fn set_block(set: &AddressSet) -> String {
    set_declaration(set, set.nets.iter())
}

/// A set's declaration inside a table block, holding `nets` (all or some of its elements).
/// Declaring a set the kernel holds adds `nets` to it.
fn set_declaration<'a>(set: &AddressSet, nets: impl Iterator<Item = &'a IpNet>) -> String {
    let kind = if set.v6 { "ipv6_addr" } else { "ipv4_addr" };
    let flags = if set.interval { " flags interval;" } else { "" };
    let mut nets = nets.peekable();
    let contents = if nets.peek().is_none() {
        String::new()
    } else {
        format!(" elements = {}", elements(nets))
    };
    format!("\tset {} {{ type {kind};{flags}{contents} }}\n", set.name)
}

/// A transaction of [`crate::staging`]: declares `set` (creating it and the table where they do
/// not exist) with `count` of its elements from the `from`th.
pub fn render_set_fill(set: &AddressSet, from: usize, count: usize) -> String {
    let nets = set.nets.iter().skip(from).take(count);
    format!("table {TABLE} {{\n{}}}\n", set_declaration(set, nets))
}

/// A script that changes the sets as `sets` says, adds `add` (chain names of `table`) and
/// deletes `obsolete` chain names, in an order the kernel accepts in one transaction: set
/// contents first (deletions before additions, which an interval set needs when a prefix is
/// replaced by an overlapping one), new sets and chains before the chains that reference or jump
/// to them, then chain deletions, base chains first (which releases the dispatch chain, which
/// releases endpoint chains), then the sets they released.
pub fn render_changes(
    table: &Table,
    create_table: bool,
    sets: &SetChanges<'_>,
    add: &[&str],
    obsolete: &[&str],
) -> String {
    let mut out = String::new();
    if create_table {
        let _ = writeln!(out, "add table {TABLE}");
    }
    for set in &sets.refill {
        let _ = writeln!(out, "flush set {TABLE} {}", set.name);
    }
    out.push_str(&patch_deletions(&sets.patch));
    let mut add: Vec<&str> = add.to_vec();
    add.sort_by_key(|n| std::cmp::Reverse(stage(n)));
    let mut block = String::new();
    if add.iter().any(|n| is_log_chain(n)) {
        block.push_str(&limit_declaration(&table.drop_log));
    }
    block.push_str(&patch_additions(&sets.patch));
    for set in sets.refill.iter().chain(&sets.create) {
        block.push_str(&set_block(set));
    }
    for name in add {
        if let Some(lines) = table.lines(name) {
            block.push_str(&chain_block(name, lines));
        }
    }
    if !block.is_empty() {
        let _ = write!(out, "table {TABLE} {{\n{block}}}\n");
    }
    let mut obsolete: Vec<&str> = obsolete.to_vec();
    obsolete.sort_by_key(|n| stage(n));
    for name in obsolete {
        let _ = writeln!(out, "delete chain {TABLE} {name}");
    }
    for name in &sets.delete {
        let _ = writeln!(out, "delete set {TABLE} {name}");
    }
    out
}

/// A script of `patches` alone, as [`render_changes`] writes them.
pub fn render_patches(patches: &[SetPatch<'_>]) -> String {
    let additions = patch_additions(patches);
    let mut out = patch_deletions(patches);
    if !additions.is_empty() {
        let _ = write!(out, "table {TABLE} {{\n{additions}}}\n");
    }
    out
}

/// The `delete element` lines of `patches`.
fn patch_deletions(patches: &[SetPatch<'_>]) -> String {
    let mut out = String::new();
    for (set, deleted, _) in patches {
        if !deleted.is_empty() {
            let _ = writeln!(
                out,
                "delete element {TABLE} {} {}",
                set.name,
                elements(deleted.iter())
            );
        }
    }
    out
}

/// The additions of `patches`, as set declarations inside the table block. Elements are added
/// by declaring the set again with them, not by `add element`, which makes libnftables read
/// every element of every interval set of the table first (2.6 s and 267 MB for one element
/// beside 200,000 prefixes; the declaration: under 10 ms).
fn patch_additions(patches: &[SetPatch<'_>]) -> String {
    let mut block = String::new();
    for (set, _, added) in patches {
        if !added.is_empty() {
            block.push_str(&set_declaration(set, added.iter()));
        }
    }
    block
}

/// The chains of `names` alone, with the sets they reference, in a scratch table that is never
/// committed: what [`crate::isolate`] asks the kernel to check when it looks for the chains it
/// refuses.
pub fn render_check(table: &Table, names: &[&str]) -> String {
    let mut sets: BTreeMap<&str, &AddressSet> = BTreeMap::new();
    let mut logs: BTreeMap<&str, &[String]> = BTreeMap::new();
    let mut chains = String::new();
    for name in names {
        if let Some(lines) = table.lines(name) {
            for line in lines {
                for word in line.split_whitespace() {
                    if let Some(set) = word.strip_prefix('@').and_then(|n| table.sets.get(n)) {
                        sets.insert(&*set.name, set);
                    }
                    if let Some(log) = table.chains.get_key_value(word) {
                        if is_log_chain(word) {
                            logs.insert(log.0, log.1);
                        }
                    }
                }
            }
            chains.push_str(&chain_block(name, lines));
        }
    }
    let mut block: String = sets.values().map(|s| set_block(s)).collect();
    if !logs.is_empty() {
        block.push_str(&limit_declaration(&table.drop_log));
    }
    for (name, lines) in logs {
        block.push_str(&chain_block(name, lines));
    }
    block.push_str(&chains);
    format!("add table {CHECK_TABLE}\ntable {CHECK_TABLE} {{\n{block}}}\n")
}

/// The scratch table of [`render_check`]: checked, never committed.
pub const CHECK_TABLE: &str = "inet netpol_check";

/// The ICMPv6 types of neighbor and router discovery, which every IPv6 host needs on its link.
pub const NEIGHBOR_DISCOVERY: [&str; 4] = [
    "nd-router-solicit",
    "nd-router-advert",
    "nd-neighbor-solicit",
    "nd-neighbor-advert",
];

/// The dispatch chain: replies first, neighbor discovery, then the source's egress chain, then
/// the destination's ingress chain; an isolated endpoint's addresses lead to `drop` in both.
fn dispatch_chain(
    ruleset: &Ruleset,
    names: &BTreeMap<(&str, Direction), String>,
) -> Result<Vec<String>, ScriptError> {
    let mut owner: BTreeMap<IpAddr, &str> = BTreeMap::new();
    for (address, key) in ruleset.addresses() {
        if let Some(first) = owner.insert(address, key) {
            return Err(ScriptError::SharedAddress {
                address,
                first: first.to_string(),
                second: key.to_string(),
            });
        }
    }
    let mut lines = vec![
        "ct state established,related accept".to_string(),
        // IPv6 neighbor discovery between a pod and its node takes `input` and `output`, and
        // conntrack does not track it: without it a pod's IPv6 could not reach anything. It is
        // link-local plumbing no policy API can name (as ARP is for IPv4, which is not IP).
        format!("icmpv6 type {{ {} }} accept", NEIGHBOR_DISCOVERY.join(", ")),
    ];
    for (direction, field) in [(Direction::Egress, "saddr"), (Direction::Ingress, "daddr")] {
        for v6 in [false, true] {
            let elements: Vec<String> = owner
                .iter()
                .filter(|(a, _)| a.is_ipv6() == v6)
                .map(|(a, key)| match names.get(&(*key, direction)) {
                    Some(chain) => format!("{a} : jump {chain}"),
                    None => format!("{a} : drop"),
                })
                .collect();
            if !elements.is_empty() {
                let family = if v6 { "ip6" } else { "ip" };
                lines.push(format!(
                    "{family} {field} vmap {{ {} }}",
                    elements.join(", ")
                ));
            }
        }
    }
    Ok(lines)
}

fn render_net(net: &IpNet) -> String {
    if net.prefix_len() == net.max_prefix_len() {
        net.addr().to_string()
    } else {
        net.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule_text::tests::set;

    #[test]
    fn sets_are_declared_with_their_elements_and_patched_element_by_element() {
        let s = set("a4i_1", false, &["10.0.0.0/8", "192.168.1.1/32"]);
        assert_eq!(
            set_block(&s),
            "\tset a4i_1 { type ipv4_addr; flags interval; elements = { 10.0.0.0/8, 192.168.1.1 } }\n"
        );
        let empty = set("a6_2", true, &[]);
        assert_eq!(
            set_block(&empty),
            "\tset a6_2 { type ipv6_addr; flags interval; }\n"
        );
        let patched = set("a4_3", false, &["10.1.0.2/32"]);
        let changes = SetChanges {
            patch: vec![(
                &patched,
                vec!["10.1.0.1/32".parse().unwrap()].into(),
                vec!["10.1.0.2/32".parse().unwrap()].into(),
            )],
            delete: vec!["a4_4"],
            ..SetChanges::default()
        };
        // Additions declare the set again with the new elements (no `add element`: see
        // render_changes).
        assert_eq!(
            render_changes(&Table::default(), false, &changes, &[], &[]),
            "delete element inet netpol a4_3 { 10.1.0.1 }\n\
             table inet netpol {\n\
             \tset a4_3 { type ipv4_addr; flags interval; elements = { 10.1.0.2 } }\n\
             }\n\
             delete set inet netpol a4_4\n"
        );
    }
}
