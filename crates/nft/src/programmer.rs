//! Diff-based programming of netpol's table. Chains are named by their content
//! ([`crate::script::Table`]), address sets by their identities; [`Known`] is what the kernel
//! holds, so a change is computed without reading the table back:
//!
//! - a new or changed endpoint chain is added under its new name;
//! - the dispatch chain and the three base chains are swapped (new ones added, old ones deleted)
//!   whenever any jump target or address changed; both happen in the same transaction, so no
//!   packet sees neither;
//! - a set whose addresses changed gets exactly the elements that differ (`delete element`, and
//!   the set declared again with the new ones), or, if it lost elements and is small, is flushed
//!   and declared again whole ([`script::REFILL_ON_DELETE`]): a replica changes no chain; a
//!   large change of set contents alone goes as element messages ([`NftBackend::patch_sets`]);
//! - a new set too large for one transaction is filled in parts before it ([`staging`]);
//! - chains no longer wanted (changed, removed endpoints, leftovers of an earlier run) are
//!   deleted after the chains that jumped to them, then the sets no chain references;
//! - a restart with nothing changed reads the same names back, changes no chain and no set, and
//!   refills the sets (their elements are not read back).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::Arc;

use ipnet::IpNet;

use crate::ruleset::{AddressSet, Ruleset};
use crate::script::{self, RenderMemo, ScriptError, SetChanges, SetPatch, Table};
use crate::staging;
use netpol_datapath::sets::{sorted_differences, SortedNets};

/// Why `nft` did not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum NftError {
    /// `nft` could not be run, or its output could not be read: nothing answered.
    #[error("nft could not run: {0}")]
    Unavailable(#[source] io::Error),
    /// `nft` ran and refused the script (its parser, or the kernel), with its message. The
    /// kernel applied none of the transaction.
    #[error("nft refused the script: {0}")]
    Refused(String),
}

impl NftError {
    /// The longest refusal message kept: nft echoes the offending line, which may be long.
    pub const MESSAGE_MAX: usize = 1024;

    /// A refusal, its message cut to [`Self::MESSAGE_MAX`] bytes.
    pub fn refused(message: &str) -> NftError {
        let mut end = message.len().min(Self::MESSAGE_MAX);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        NftError::Refused(message[..end].trim().to_string())
    }
}

/// Where the table lives: runs scripts and lists netpol's chains and sets.
pub trait NftBackend {
    /// Applies an `nft -f` script as one transaction.
    fn apply(&self, script: &str) -> Result<(), NftError>;
    /// Checks an `nft -f` script without committing anything (`nft -c`: the kernel validates
    /// the transaction and aborts it).
    fn check(&self, script: &str) -> Result<(), NftError>;
    /// The chain names of table `inet netpol`, or None if the table does not exist.
    fn chains(&self) -> Result<Option<Vec<String>>, NftError>;
    /// The set names of table `inet netpol`, or None if the table does not exist.
    fn sets(&self) -> Result<Option<Vec<String>>, NftError>;
    /// The ruleset as JSON without set elements ([`LIST_RULES_JSON`]): netpol's rules with
    /// their counters ([`crate::counters`]). A backend that cannot list them says so.
    fn rules_json(&self) -> Result<String, NftError> {
        Err(NftError::Unavailable(io::Error::new(
            io::ErrorKind::Unsupported,
            "this backend does not list rules",
        )))
    }
    /// The prefixes `set` (by its name, family and kind) holds in the kernel, sorted; None
    /// where the backend cannot read them or they do not read as whole prefixes (the set is
    /// then refilled). Required, not defaulted: a wrapper that forgot to pass it on would make
    /// every restart refill its large sets whole, silently.
    fn set_contents(&self, set: &AddressSet) -> Result<Option<Vec<IpNet>>, NftError>;
    // A wrapper of another backend passes the three below on: their defaults are correct but
    // slow (libnftables parses every element of a new large set, and of a large patch).
    /// Whether [`NftBackend::add_to_new_set`] and [`NftBackend::patch_sets`] write elements to
    /// the kernel directly (netlink), not through libnftables: staging then declares a new set
    /// with a few elements only and adds the rest in one call ([`crate::staging`]), and a large
    /// change of set contents alone goes as one batch of element messages.
    fn adds_elements_directly(&self) -> bool {
        false
    }
    /// Adds `count` of `set`'s elements, from the `from`th, to the set, which the kernel holds
    /// and no chain references yet, in one transaction or several. The default declares the set
    /// again with them (one libnftables transaction).
    fn add_to_new_set(&self, set: &AddressSet, from: usize, count: usize) -> Result<(), NftError> {
        self.apply(&crate::script::render_set_fill(set, from, count))
    }
    /// Applies `patches` to sets the kernel holds, which chains may reference, as one
    /// transaction that changes nothing else. The default sends them as a script.
    fn patch_sets(&self, patches: &[SetPatch<'_>]) -> Result<(), NftError> {
        self.apply(&crate::script::render_patches(patches))
    }
}

impl<T: NftBackend + ?Sized> NftBackend for &T {
    fn apply(&self, script: &str) -> Result<(), NftError> {
        (**self).apply(script)
    }

    fn check(&self, script: &str) -> Result<(), NftError> {
        (**self).check(script)
    }

    fn chains(&self) -> Result<Option<Vec<String>>, NftError> {
        (**self).chains()
    }

    fn sets(&self) -> Result<Option<Vec<String>>, NftError> {
        (**self).sets()
    }

    fn rules_json(&self) -> Result<String, NftError> {
        (**self).rules_json()
    }

    fn set_contents(&self, set: &AddressSet) -> Result<Option<Vec<IpNet>>, NftError> {
        (**self).set_contents(set)
    }

    fn adds_elements_directly(&self) -> bool {
        (**self).adds_elements_directly()
    }

    fn add_to_new_set(&self, set: &AddressSet, from: usize, count: usize) -> Result<(), NftError> {
        (**self).add_to_new_set(set, from, count)
    }

    fn patch_sets(&self, patches: &[SetPatch<'_>]) -> Result<(), NftError> {
        (**self).patch_sets(patches)
    }
}

/// The arguments of `nft` that list the rules with their counters, as JSON, without set
/// elements: the whole ruleset ([`crate::counters::parse_counters`] keeps netpol's table).
/// *Why not `list table inet netpol`:* libnftables (1.0.6) reads every set element into its
/// cache for that command whatever `-t` says (3 s and 267 MB beside 200,000 CIDR prefixes, a
/// metrics scrape); for `list ruleset` it honours `-t`.
pub const LIST_RULES_JSON: [&str; 4] = ["-j", "-t", "list", "ruleset"];

/// What the kernel holds, as the programmer knows it: every chain name, and every set with what
/// is known of its contents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Known {
    pub chains: BTreeSet<String>,
    pub sets: BTreeMap<String, KnownSet>,
    /// The endpoint chains as rendered for the table programmed last (a cache).
    pub renders: RenderMemo,
}

/// What the programmer knows of a set the kernel holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KnownSet {
    /// Read back (after a start, a failure or a resync): names only, so it is flushed and
    /// filled the next time.
    Unread,
    /// The revision of a set book's contents netpol wrote: a later revision is sent as the
    /// patch from this one where the set carries it.
    Revision(u64),
    /// Contents netpol wrote of a set built without a book (revision 0): compared to find the
    /// elements that differ.
    Contents(Arc<AddressSet>),
}

impl KnownSet {
    fn of(set: &Arc<AddressSet>) -> KnownSet {
        match set.revision {
            0 => KnownSet::Contents(set.clone()),
            revision => KnownSet::Revision(revision),
        }
    }
}

impl Known {
    /// Reads the table's chain and set names back; None if the table does not exist.
    pub fn read(backend: &dyn NftBackend) -> Result<Option<Known>, NftError> {
        let Some(chains) = backend.chains()? else {
            return Ok(None);
        };
        let sets = backend.sets()?.unwrap_or_default();
        Ok(Some(Known {
            chains: chains.into_iter().collect(),
            sets: sets.into_iter().map(|n| (n, KnownSet::Unread)).collect(),
            renders: RenderMemo::default(),
        }))
    }
}

/// What one [`program`] call did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgramReport {
    pub added: Vec<String>,
    pub deleted: Vec<String>,
    pub unchanged: usize,
    /// Sets created and deleted.
    pub sets_added: usize,
    pub sets_deleted: usize,
    /// Elements added to and deleted from sets that existed (flushed sets count as added).
    pub elements_added: usize,
    pub elements_deleted: usize,
    /// The script sent, if anything was sent.
    pub script: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    #[error(transparent)]
    Script(#[from] ScriptError),
    #[error(transparent)]
    Nft(#[from] NftError),
}

/// Brings the table to `ruleset` with the fewest changes, in one transaction: chains by name,
/// sets element by element. `known` is what the kernel holds as last programmed (None: read
/// the names back first); it is updated when the transaction commits, kept when the kernel
/// refuses it (the kernel is then as before), and forgotten when `nft` could not be run (nothing
/// says what happened). New sets larger than [`staging::STAGE_ELEMENTS`] are created and filled
/// first, in transactions of their own that no packet sees ([`staging`]); `known` holds them from
/// then on, whatever becomes of the main transaction.
pub fn program(
    backend: &dyn NftBackend,
    known: &mut Option<Known>,
    ruleset: &Ruleset,
) -> Result<ProgramReport, ProgramError> {
    let mut memo = known
        .as_mut()
        .map(|k| std::mem::take(&mut k.renders))
        .unwrap_or_default();
    let table = Table::with_memo(ruleset, &mut memo)?;
    if known.is_none() {
        // None from here on: the table does not exist.
        *known = Known::read(backend)?;
        if let Some(read) = known.as_mut() {
            read_back_large_sets(backend, read, &table);
        }
    }
    let staged = stage(backend, known, &table)?;
    let result = apply_changes(backend, &table, known.as_ref());
    match &result {
        Ok(_) => *known = Some(known_after(&table, memo)),
        Err(ProgramError::Nft(NftError::Unavailable(_))) => *known = None,
        Err(_) => {}
    }
    result.map(|mut report| {
        report.sets_added += staged;
        report
    })
}

/// Reads back the contents of the sets the kernel holds that `table` wants large (more than
/// [`staging::STAGE_ELEMENTS`]): known, they are patched by their difference (usually none)
/// rather than flushed and filled whole in the main transaction ([`crate::set_dump`]). A set
/// that cannot be read stays unread, and is refilled.
fn read_back_large_sets(backend: &dyn NftBackend, known: &mut Known, table: &Table) {
    for (name, held) in known.sets.iter_mut() {
        let Some(want) = table.sets.get(name.as_str()) else {
            continue;
        };
        if !matches!(held, KnownSet::Unread) || want.nets.len() <= staging::STAGE_ELEMENTS {
            continue;
        }
        match backend.set_contents(want) {
            Ok(Some(nets)) => {
                *held = KnownSet::Contents(Arc::new(AddressSet {
                    name: want.name.clone(),
                    v6: want.v6,
                    interval: want.interval,
                    nets: SortedNets::from_sorted(nets),
                    revision: 0,
                    patch: None,
                }));
            }
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(set = %name, %error, "a set could not be read back: it is refilled");
            }
        }
    }
}

/// Stages the new sets of `table` that are too large for the main transaction, and notes them in
/// `known` (which then exists: staging creates the table). Returns how many were staged.
fn stage(
    backend: &dyn NftBackend,
    known: &mut Option<Known>,
    table: &Table,
) -> Result<usize, ProgramError> {
    let large: Vec<&Arc<AddressSet>> = table
        .sets
        .iter()
        .filter(|(name, set)| {
            set.nets.len() > staging::STAGE_ELEMENTS
                && !known
                    .as_ref()
                    .is_some_and(|k| k.sets.contains_key(&***name))
        })
        .map(|(_, set)| set)
        .collect();
    if large.is_empty() {
        return Ok(0);
    }
    let sets: Vec<&AddressSet> = large.iter().map(|set| &***set).collect();
    let writers = staging::Writers {
        apply: |script: &str| backend.apply(script),
        add: |set: &AddressSet, from, count| backend.add_to_new_set(set, from, count),
        direct: backend.adds_elements_directly(),
    };
    if let Err(failed) = staging::stage_new_sets(&writers, &sets) {
        if !failed.cleaned {
            *known = None;
        }
        return Err(failed.error.into());
    }
    let held = known.get_or_insert_with(Known::default);
    for set in &large {
        held.sets.insert(set.name.to_string(), KnownSet::of(set));
    }
    Ok(large.len())
}

/// What the kernel holds once `table` is programmed.
fn known_after(table: &Table, renders: RenderMemo) -> Known {
    Known {
        renders,
        chains: table.names().map(str::to_string).collect(),
        sets: table
            .sets
            .iter()
            .map(|(n, s)| (n.to_string(), KnownSet::of(s)))
            .collect(),
    }
}

/// Sends what brings the kernel from `have` (None: no table) to `table`, if anything.
fn apply_changes(
    backend: &dyn NftBackend,
    table: &Table,
    have: Option<&Known>,
) -> Result<ProgramReport, ProgramError> {
    let empty = Known::default();
    let old = have.unwrap_or(&empty);
    let want: BTreeSet<&str> = table.names().collect();
    let added: Vec<&str> = want
        .iter()
        .copied()
        .filter(|n| !old.chains.contains(*n))
        .collect();
    let deleted: Vec<&str> = old
        .chains
        .iter()
        .map(String::as_str)
        .filter(|n| !want.contains(n))
        .collect();
    let mut sets = SetChanges::default();
    for (name, set) in &table.sets {
        match old.sets.get(&**name) {
            None => sets.create.push(set),
            Some(KnownSet::Unread) => sets.refill.push(set),
            Some(KnownSet::Revision(held)) if *held == set.revision => {}
            Some(KnownSet::Revision(held)) => match set.patch.as_deref() {
                Some((from, delta)) if from == held => {
                    if !delta.is_empty() {
                        sets.patch_or_refill(
                            set,
                            Cow::Borrowed(&delta.removed),
                            Cow::Borrowed(&delta.added),
                        );
                    }
                }
                // Revisions apart (a transaction the kernel refused in between): filled anew.
                _ => sets.refill.push(set),
            },
            Some(KnownSet::Contents(known))
                if Arc::ptr_eq(known, set) || known.nets == set.nets => {}
            Some(KnownSet::Contents(known)) => {
                let (gone, new) =
                    sorted_differences(known.nets.iter().copied(), set.nets.iter().copied());
                sets.patch_or_refill(set, Cow::Owned(gone), Cow::Owned(new));
            }
        }
    }
    sets.delete = old
        .sets
        .keys()
        .map(String::as_str)
        .filter(|n| !table.sets.contains_key(*n))
        .collect();
    let (elements_added, elements_deleted) = sets.element_counts();
    let mut report = ProgramReport {
        added: added.iter().map(|n| n.to_string()).collect(),
        deleted: deleted.iter().map(|n| n.to_string()).collect(),
        unchanged: want.len() - added.len(),
        sets_added: sets.create.len(),
        sets_deleted: sets.delete.len(),
        elements_added,
        elements_deleted,
        script: None,
    };
    if added.is_empty() && deleted.is_empty() && sets.is_empty() && have.is_some() {
        return Ok(report);
    }
    // A large change of set contents alone (a CIDR-heavy policy joining or leaving a set that
    // another one made) is a transaction of element messages: libnftables parses each element
    // at 2-4 µs, the kernel takes it at about 1 µs. A small one stays a script, which the
    // report shows.
    let direct = backend.adds_elements_directly()
        && have.is_some()
        && added.is_empty()
        && deleted.is_empty()
        && sets.only_patches()
        && elements_added + elements_deleted > staging::STAGE_ELEMENTS;
    if direct {
        backend.patch_sets(&sets.patch)?;
        return Ok(report);
    }
    let text = script::render_changes(table, have.is_none(), &sets, &added, &deleted);
    backend.apply(&text)?;
    report.script = Some(text);
    Ok(report)
}

/// Parses `nft list table inet netpol` output: the name of every `KIND NAME {` line.
fn parse_names(listing: &str, kind: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|l| l.trim().strip_prefix(kind)?.strip_prefix(' '))
        .filter_map(|rest| rest.strip_suffix(" {"))
        .map(str::to_string)
        .collect()
}

/// Parses `nft list table inet netpol` output: the name of every `chain NAME {` line.
pub fn parse_chain_names(listing: &str) -> Vec<String> {
    parse_names(listing, "chain")
}

/// Parses `nft list sets table inet netpol` output: the name of every `set NAME {` line.
pub fn parse_set_names(listing: &str) -> Vec<String> {
    parse_names(listing, "set")
}

/// Whether a listing of the `inet` family shows netpol's table (an empty table is listed too,
/// as `table inet netpol {` and `}`).
///
/// *Why not `nft list tables`:* libnftables (1.0.6) fills its cache for that command with every
/// element of every set, to print nothing of them: 2.7 s and 267 MB beside 200,000 CIDR
/// prefixes, twice a restart. `list chains` and `-t list sets` read no element.
fn table_listed(listing: &str) -> bool {
    listing.lines().any(|l| l.trim() == "table inet netpol {")
}

/// The chain names of netpol's table, read through `nft` (run on the host or in a namespace),
/// or None if the table does not exist. `nft list chains` lists chains without their rules,
/// whatever the table holds.
pub fn chains_via(
    nft: impl Fn(&[&str]) -> Result<String, NftError>,
) -> Result<Option<Vec<String>>, NftError> {
    let listing = nft(&["list", "chains", "inet"])?;
    Ok(table_listed(&listing).then(|| names_in_table(&listing, "chain")))
}

/// The set names of netpol's table, read through `nft`, without their elements (`-t`), or None
/// if the table does not exist.
pub fn sets_via(
    nft: impl Fn(&[&str]) -> Result<String, NftError>,
) -> Result<Option<Vec<String>>, NftError> {
    let listing = nft(&["-t", "list", "sets", "inet"])?;
    Ok(table_listed(&listing).then(|| names_in_table(&listing, "set")))
}

/// The `KIND NAME {` names inside `table inet netpol { ... }` of a listing of several tables.
fn names_in_table(listing: &str, kind: &str) -> Vec<String> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in listing.lines() {
        let line = line.trim();
        if let Some(table) = line.strip_prefix("table ") {
            inside = table == "inet netpol {";
        } else if inside {
            out.extend(parse_names(line, kind));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_names_are_read_from_a_listing() {
        let listing = "table inet netpol {\n\tchain ep_1_in_2 {\n\t}\n\tchain forward_3 {\n\t\ttype filter hook forward priority filter; policy accept;\n\t}\n}\n";
        assert_eq!(parse_chain_names(listing), vec!["ep_1_in_2", "forward_3"]);
        let several = "table inet other {\n\tset a4_1 {\n\t}\n}\ntable inet netpol {\n\tset a4_2 {\n\t\ttype ipv4_addr\n\t}\n\tchain c {\n\t}\n}\n";
        assert_eq!(names_in_table(several, "set"), vec!["a4_2"]);
        assert_eq!(names_in_table(several, "chain"), vec!["c"]);
    }
}
