//! An in-memory stand-in for `nft` and the kernel behind it, for tests of what programs it (the
//! enforcer, the agent's metrics): it keeps the chain names of netpol's table as the scripts it
//! accepts add and delete them, counts calls, and refuses, as a whole transaction, every script
//! that contains one of its poison strings, as the kernel refuses a transaction holding one rule
//! it cannot load. Only the chain names are modelled, which is all the programmer reads back.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::programmer::{NftBackend, NftError};
use crate::script::TABLE;

#[derive(Debug, Default)]
struct State {
    /// None while the table does not exist.
    chains: Option<BTreeSet<String>>,
    poison: Vec<String>,
    applied: usize,
    checked: usize,
    refused: usize,
    unavailable: bool,
}

/// The fake; clones share one kernel.
#[derive(Clone, Debug, Default)]
pub struct FakeNft {
    state: Arc<Mutex<State>>,
}

impl FakeNft {
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// From now on, refuses every script that contains `marker`.
    pub fn poison(&self, marker: &str) {
        self.state().poison.push(marker.to_string());
    }

    /// Refuses nothing any more.
    pub fn heal(&self) {
        self.state().poison.clear();
    }

    /// Whether `nft` cannot run at all (every call fails as unavailable).
    pub fn set_unavailable(&self, unavailable: bool) {
        self.state().unavailable = unavailable;
    }

    /// The chain names of the table, if it exists.
    pub fn chain_names(&self) -> Option<BTreeSet<String>> {
        self.state().chains.clone()
    }

    /// (transactions applied, check-only transactions, scripts refused).
    pub fn counts(&self) -> (usize, usize, usize) {
        let s = self.state();
        (s.applied, s.checked, s.refused)
    }

    fn judge(&self, script: &str) -> Result<(), NftError> {
        let mut state = self.state();
        if state.unavailable {
            return Err(NftError::Unavailable(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "nft: not found",
            )));
        }
        if let Some(marker) = state.poison.iter().find(|m| script.contains(m.as_str())) {
            let message = format!("Error: Could not process rule: {marker} is poison");
            state.refused += 1;
            return Err(NftError::Refused(message));
        }
        Ok(())
    }
}

impl NftBackend for FakeNft {
    fn apply(&self, script: &str) -> Result<(), NftError> {
        self.judge(script)?;
        let mut state = self.state();
        state.applied += 1;
        let delete_table = format!("delete table {TABLE}");
        let delete_chain = format!("delete chain {TABLE} ");
        let mut chains = state.chains.take();
        for line in script.lines() {
            let line = line.trim();
            if line == format!("add table {TABLE}") || line == format!("table {TABLE} {{") {
                chains.get_or_insert_with(BTreeSet::new);
            } else if line == delete_table {
                chains = None;
            } else if let Some(name) = line.strip_prefix(&delete_chain) {
                if let Some(chains) = chains.as_mut() {
                    chains.remove(name);
                }
            } else if let Some(name) = line
                .strip_prefix("chain ")
                .and_then(|rest| rest.strip_suffix(" {"))
            {
                chains
                    .get_or_insert_with(BTreeSet::new)
                    .insert(name.to_string());
            }
        }
        state.chains = chains;
        Ok(())
    }

    fn check(&self, script: &str) -> Result<(), NftError> {
        self.state().checked += 1;
        self.judge(script)
    }

    fn chains(&self) -> Result<Option<Vec<String>>, NftError> {
        self.judge("")?;
        Ok(self.chain_names().map(|c| c.into_iter().collect()))
    }
}
