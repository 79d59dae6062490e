//! An in-memory stand-in for `nft` and the kernel behind it, for tests of what programs it (the
//! enforcer, the agent's metrics): it keeps the chains of netpol's table (names, and the sets
//! their rules reference) and its sets (names and elements) as the scripts it accepts change
//! them, refusing what the kernel refuses (a missing set or chain, a set still referenced, an
//! element deleted that is not there), counts calls, and refuses, as a whole transaction, every script
//! that contains one of its poison strings, as the kernel refuses a transaction holding one rule
//! it cannot load. A refused script changes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use std::net::IpAddr;

use ipnet::IpNet;

use crate::programmer::{NftBackend, NftError};
use crate::ruleset::AddressSet;
use crate::script::TABLE;

#[derive(Debug, Default)]
struct State {
    /// None while the table does not exist.
    table: Option<FakeTable>,
    last: Option<String>,
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
        let state = self.state();
        state
            .table
            .as_ref()
            .map(|t| t.chains.keys().cloned().collect())
    }

    /// The last script applied.
    pub fn last_script(&self) -> Option<String> {
        self.state().last.clone()
    }

    /// The table's chains and sets, if it exists.
    pub fn table(&self) -> Option<FakeTable> {
        self.state().table.clone()
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

/// What the fake kernel holds of the table: chains with the sets their rules reference, sets
/// with their elements (as written in scripts).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FakeTable {
    pub chains: BTreeMap<String, BTreeSet<String>>,
    pub sets: BTreeMap<String, BTreeSet<String>>,
    /// The sets declared with `flags interval`: only they take prefixes.
    pub interval: BTreeSet<String>,
}

impl FakeTable {
    /// Adds `listed` to set `name`, refusing a prefix in a set without `flags interval` as the
    /// kernel does (libnftables: "You must add 'flags interval' to your set declaration").
    fn add_elements(&mut self, name: &str, listed: Vec<String>) -> Result<(), String> {
        if !self.interval.contains(name) {
            if let Some(prefix) = listed.iter().find(|e| e.contains('/')) {
                return Err(format!("set {name} has no flags interval for {prefix}"));
            }
        }
        self.sets.get_mut(name).ok_or("no such set")?.extend(listed);
        Ok(())
    }
}

/// `{ a, b }` (the rest of a line after a set or element list's name) as its elements.
fn elements(text: &str) -> Vec<String> {
    let inner = text
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim();
    inner
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_string)
        .collect()
}

/// Applies `script` to `table` as the kernel would, or says why the kernel would refuse it.
fn run_script(table: &mut Option<FakeTable>, script: &str) -> Result<(), String> {
    let prefix = format!("{TABLE} ");
    let mut chain: Option<String> = None;
    for line in script.lines() {
        let line = line.trim();
        if let Some(name) = chain.as_ref() {
            if line == "}" {
                chain = None;
            } else {
                let refs: Vec<String> = line
                    .split_whitespace()
                    .filter_map(|w| w.strip_prefix('@'))
                    .map(str::to_string)
                    .collect();
                let t = table.as_mut().ok_or("no table")?;
                for r in refs {
                    if !t.sets.contains_key(&r) {
                        return Err(format!("set {r} does not exist"));
                    }
                    t.chains.entry(name.clone()).or_default().insert(r);
                }
            }
            continue;
        }
        if line == format!("add table {TABLE}") || line == format!("table {TABLE} {{") {
            table.get_or_insert_with(FakeTable::default);
        } else if line == format!("delete table {TABLE}") {
            *table = None;
        } else if let Some(name) = line
            .strip_prefix("chain ")
            .and_then(|r| r.strip_suffix(" {"))
        {
            let t = table.as_mut().ok_or("no table")?;
            t.chains.insert(name.to_string(), BTreeSet::new());
            chain = Some(name.to_string());
        } else if let Some(rest) = line.strip_prefix("set ") {
            let t = table.as_mut().ok_or("no table")?;
            let (name, body) = rest.split_once(' ').unwrap_or((rest, ""));
            let listed = body
                .split_once("elements = ")
                .map(|(_, e)| elements(e.trim_end_matches('}')))
                .unwrap_or_default();
            t.sets.entry(name.to_string()).or_default();
            if body.contains("flags interval;") {
                t.interval.insert(name.to_string());
            }
            t.add_elements(name, listed)?;
        } else if let Some(rest) = line.strip_prefix("delete chain ") {
            let name = rest.strip_prefix(&prefix).ok_or("other table")?;
            let t = table.as_mut().ok_or("no table")?;
            t.chains.remove(name).ok_or("no such chain")?;
        } else if let Some(rest) = line.strip_prefix("delete set ") {
            let name = rest.strip_prefix(&prefix).ok_or("other table")?;
            let t = table.as_mut().ok_or("no table")?;
            if t.chains.values().any(|refs| refs.contains(name)) {
                return Err(format!("set {name} is in use"));
            }
            t.sets.remove(name).ok_or("no such set")?;
            t.interval.remove(name);
        } else if let Some(rest) = line.strip_prefix("flush set ") {
            let name = rest.strip_prefix(&prefix).ok_or("other table")?;
            let t = table.as_mut().ok_or("no table")?;
            t.sets.get_mut(name).ok_or("no such set")?.clear();
        } else if let Some(rest) = line.strip_prefix("add element ") {
            let rest = rest.strip_prefix(&prefix).ok_or("other table")?;
            let (name, list) = rest.split_once(' ').ok_or("no elements")?;
            let t = table.as_mut().ok_or("no table")?;
            t.add_elements(name, elements(list))?;
        } else if let Some(rest) = line.strip_prefix("delete element ") {
            let rest = rest.strip_prefix(&prefix).ok_or("other table")?;
            let (name, list) = rest.split_once(' ').ok_or("no elements")?;
            let t = table.as_mut().ok_or("no table")?;
            let set = t.sets.get_mut(name).ok_or("no such set")?;
            for element in elements(list) {
                if !set.remove(&element) {
                    return Err(format!("element {element} of {name} does not exist"));
                }
            }
        }
    }
    Ok(())
}

impl NftBackend for FakeNft {
    fn apply(&self, script: &str) -> Result<(), NftError> {
        self.judge(script)?;
        let mut state = self.state();
        let mut table = state.table.clone();
        if let Err(message) = run_script(&mut table, script) {
            state.refused += 1;
            return Err(NftError::refused(&format!("Error: {message}")));
        }
        state.applied += 1;
        state.table = table;
        state.last = Some(script.to_string());
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

    fn sets(&self) -> Result<Option<Vec<String>>, NftError> {
        self.judge("")?;
        Ok(self.table().map(|t| t.sets.into_keys().collect()))
    }

    fn set_contents(&self, set: &AddressSet) -> Result<Option<Vec<IpNet>>, NftError> {
        self.judge("")?;
        let Some(elements) = self.table().and_then(|t| t.sets.get(&*set.name).cloned()) else {
            return Ok(None);
        };
        let mut nets = Vec::with_capacity(elements.len());
        for element in elements {
            let net = element
                .parse::<IpNet>()
                .or_else(|_| element.parse::<IpAddr>().map(IpNet::from));
            match net {
                Ok(net) => nets.push(net),
                Err(_) => return Ok(None),
            }
        }
        nets.sort_unstable();
        Ok(Some(nets))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_goes_only_into_an_interval_set_as_the_kernel_has_it() {
        let nft = FakeNft::new();
        let declare = format!(
            "add table {TABLE}\ntable {TABLE} {{\n\
             \tset a4_1 {{ type ipv4_addr; elements = {{ 10.0.0.1 }} }}\n\
             \tset a4i_2 {{ type ipv4_addr; flags interval; elements = {{ 10.0.0.0/8 }} }}\n}}\n"
        );
        nft.apply(&declare).unwrap();
        nft.apply(&format!("add element {TABLE} a4i_2 {{ 192.168.0.0/16 }}\n"))
            .unwrap();
        let refused = nft.apply(&format!("add element {TABLE} a4_1 {{ 10.1.0.0/16 }}\n"));
        assert!(refused.is_err(), "{refused:?}");
        let declared = nft.apply(&format!(
            "table {TABLE} {{\n\tset a4_3 {{ type ipv4_addr; elements = {{ 10.2.0.0/16 }} }}\n}}\n"
        ));
        assert!(declared.is_err(), "{declared:?}");
        let table = nft.table().unwrap();
        assert_eq!(table.sets["a4_1"].len(), 1);
        assert_eq!(table.sets["a4i_2"].len(), 2);
    }
}
