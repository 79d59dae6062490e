//! Diff-based programming of netpol's table. Chains are named by their content
//! ([`crate::script::Table`]), so the chain names in the kernel are the whole state to compare:
//!
//! - a new or changed endpoint chain is added under its new name;
//! - the dispatch chain and the three base chains are swapped (new ones added, old ones deleted)
//!   whenever any jump target or address changed; both happen in the same transaction, so no
//!   packet sees neither;
//! - chains no longer wanted (changed, removed endpoints, leftovers of an earlier run) are
//!   deleted after the chains that jumped to them;
//! - a restart with nothing changed reads the same names back and sends nothing.

use std::collections::BTreeSet;
use std::io;

use crate::ruleset::Ruleset;
use crate::script::{self, ScriptError, Table};

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

/// Where the table lives: runs scripts and lists netpol's chains.
pub trait NftBackend {
    /// Applies an `nft -f` script as one transaction.
    fn apply(&self, script: &str) -> Result<(), NftError>;
    /// Checks an `nft -f` script without committing anything (`nft -c`: the kernel validates
    /// the transaction and aborts it).
    fn check(&self, script: &str) -> Result<(), NftError>;
    /// The chain names of table `inet netpol`, or None if the table does not exist.
    fn chains(&self) -> Result<Option<Vec<String>>, NftError>;
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
}

/// What one [`program`] call did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgramReport {
    pub added: Vec<String>,
    pub deleted: Vec<String>,
    pub unchanged: usize,
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

/// Brings the table to `ruleset` with the fewest changes, in one transaction.
pub fn program(backend: &dyn NftBackend, ruleset: &Ruleset) -> Result<ProgramReport, ProgramError> {
    let table = Table::new(ruleset)?;
    let existing = backend.chains()?;
    let have: BTreeSet<String> = existing.iter().flatten().cloned().collect();
    let want: BTreeSet<&str> = table.names().collect();
    let added: Vec<&str> = want
        .iter()
        .copied()
        .filter(|n| !have.contains(*n))
        .collect();
    let deleted: Vec<&str> = have
        .iter()
        .map(String::as_str)
        .filter(|n| !want.contains(n))
        .collect();
    let mut report = ProgramReport {
        added: added.iter().map(|n| n.to_string()).collect(),
        deleted: deleted.iter().map(|n| n.to_string()).collect(),
        unchanged: want.len() - added.len(),
        script: None,
    };
    if added.is_empty() && deleted.is_empty() && existing.is_some() {
        return Ok(report);
    }
    let text = script::render_changes(&table, existing.is_none(), &added, &deleted);
    backend.apply(&text)?;
    report.script = Some(text);
    Ok(report)
}

/// Parses `nft list table inet netpol` output: the name of every `chain NAME {` line.
pub fn parse_chain_names(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|l| l.trim().strip_prefix("chain "))
        .filter_map(|rest| rest.strip_suffix(" {"))
        .map(str::to_string)
        .collect()
}

/// The chain names of netpol's table, read through `nft` (run on the host or in a namespace).
pub fn chains_via(
    nft: impl Fn(&[&str]) -> Result<String, NftError>,
) -> Result<Option<Vec<String>>, NftError> {
    let tables = nft(&["list", "tables", "inet"])?;
    if !tables.lines().any(|l| l.trim() == "table inet netpol") {
        return Ok(None);
    }
    let listing = nft(&["list", "table", "inet", "netpol"])?;
    Ok(Some(parse_chain_names(&listing)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_names_are_read_from_a_listing() {
        let listing = "table inet netpol {\n\tchain ep_1_in_2 {\n\t}\n\tchain forward_3 {\n\t\ttype filter hook forward priority filter; policy accept;\n\t}\n}\n";
        assert_eq!(parse_chain_names(listing), vec!["ep_1_in_2", "forward_3"]);
    }
}
