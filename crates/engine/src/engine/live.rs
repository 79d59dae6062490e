//! Which entries are *live*: those whose subject selects at least one local endpoint. Only
//! their peers hold selectors, name world prefixes and cluster CIDRs, and decide which label
//! keys identities keep (issue 33, "memory follows what can match").
//!
//! A node agent sees every policy of the cluster, but an entry that selects no pod of its node
//! decides nothing there. Before, every `/32` any policy named became a world identity (about
//! 2 KB each, with its selector) on every node: five 1 MB policies selecting no pod at all took
//! an agent from 50 MB to 600 MB. Now such an entry costs its parsed form. The set follows the
//! local pods: it is counted per local endpoint (the entries selecting it), so a local pod that
//! comes, goes or is relabelled changes the counts of its own entries only; a policy change
//! counts again from the local endpoints.
//!
//! Without a local node (the authoring tools' cluster-wide view, where any pod may be asked
//! about through a what-if map) every entry is live, as before.

use std::collections::HashMap;

use super::Engine;
use crate::identity::Identity;

#[derive(Debug, Default)]
pub(super) struct LiveEntries {
    /// Per entry (aligned with [`Engine::entries`]): how many local endpoints it selects.
    counts: Vec<u32>,
    /// The entries each local endpoint was counted for.
    by_endpoint: HashMap<String, Vec<u32>>,
    /// Per entry: whether it is live now.
    live: Vec<bool>,
    /// Per entry: whether its peers hold selectors (live as of the selectors' last update).
    held: Vec<bool>,
}

impl LiveEntries {
    pub(super) fn is_live(&self, entry: usize) -> bool {
        self.live.get(entry).copied().unwrap_or(false)
    }

    /// Whether the entry's peers hold selectors: whether it was live at the last commit that
    /// moved them (false for an entry of a policy staged since).
    pub(super) fn was_held(&self, entry: usize) -> bool {
        self.held.get(entry).copied().unwrap_or(false)
    }

    /// Whether some entry became live or stopped being live since the selectors were updated.
    pub(super) fn changed(&self) -> bool {
        self.live != self.held
    }

    /// The held flags of the entries, by policy, in the engine's entry order (`counts` per policy
    /// key, after `skip` entries of the engine's own): taken out while the entries are rebuilt.
    pub(super) fn take_held<'a>(
        &mut self,
        skip: usize,
        policies: impl IntoIterator<Item = (&'a String, &'a usize)>,
    ) -> HashMap<String, Vec<bool>> {
        let mut held = std::mem::take(&mut self.held).into_iter().skip(skip);
        policies
            .into_iter()
            .map(|(key, count)| (key.clone(), held.by_ref().take(*count).collect()))
            .collect()
    }

    /// The held flags of the rebuilt entries; the counts are taken anew by the next
    /// [`Engine::update_live`].
    pub(super) fn set_held(&mut self, held: Vec<bool>) {
        self.held = held;
    }

    /// Takes the transition of the selectors' side: the entries that became live (their peers
    /// must acquire selectors) and those that stopped (release), in entry order.
    pub(super) fn transition(&mut self) -> (Vec<usize>, Vec<usize>) {
        let mut gained = Vec::new();
        let mut lost = Vec::new();
        for (i, (&live, &held)) in self.live.iter().zip(&self.held).enumerate() {
            match (live, held) {
                (true, false) => gained.push(i),
                (false, true) => lost.push(i),
                _ => {}
            }
        }
        self.held = self.live.clone();
        (gained, lost)
    }

    fn add(&mut self, key: String, entries: Vec<u32>, touched: &mut Vec<u32>) {
        for &i in &entries {
            self.counts[i as usize] += 1;
        }
        touched.extend(&entries);
        self.by_endpoint.insert(key, entries);
    }

    fn remove(&mut self, key: &str, touched: &mut Vec<u32>) {
        for i in self.by_endpoint.remove(key).unwrap_or_default() {
            self.counts[i as usize] -= 1;
            touched.push(i);
        }
    }
}

impl Engine {
    /// Brings the live entries up to date after the local pods changed: counted anew from every
    /// local endpoint after a policy change, else for the staged pods only. Returns whether an
    /// entry's liveness changed.
    pub(super) fn update_live(&mut self, policies_changed: bool, staged_pods: &[String]) -> bool {
        let total = self.entries.len();
        if self.config.local_node.is_none() {
            self.live.live = vec![true; total];
            return self.live.changed();
        }
        // The engine's own entries (the node-probe allowance) are live for life.
        let own = usize::from(self.config.allow_node_probes);
        let mut touched = Vec::new();
        if policies_changed || self.live.counts.len() != total {
            self.live.counts = vec![0; total];
            self.live.by_endpoint.clear();
            for key in self.local.clone() {
                self.count_endpoint(key, &mut touched);
            }
            self.live.live = (0..total)
                .map(|i| i < own || self.live.counts[i] > 0)
                .collect();
        } else {
            for key in staged_pods {
                self.live.remove(key, &mut touched);
                if self.local.contains(key) {
                    self.count_endpoint(key.clone(), &mut touched);
                }
            }
            // Only the touched entries can differ from what the selectors hold: the transition of
            // the last commit made the rest equal.
            let mut changed = false;
            for i in touched.into_iter().map(|i| i as usize) {
                self.live.live[i] = i < own || self.live.counts[i] > 0;
                changed |= self.live.live[i] != self.live.held[i];
            }
            return changed;
        }
        self.live.changed()
    }

    fn count_endpoint(&mut self, key: String, touched: &mut Vec<u32>) {
        let Some(pod) = self
            .pods
            .get(&key)
            .and_then(|identities| identities.first())
            .and_then(Identity::as_pod)
        else {
            return;
        };
        let selecting = self.selecting(pod).into_iter().map(|i| i as u32).collect();
        self.live.add(key, selecting, touched);
    }

    /// The entries whose peers hold selectors and name identities.
    pub(super) fn live_entries(&self) -> impl Iterator<Item = &crate::entry::PolicyEntry> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(i, _)| self.live.is_live(*i))
            .map(|(_, e)| e)
    }
}
