//! The HCN datapath behind the neutral [`Enforcer`]: discovers the host's endpoints, matches
//! them to pods by address and programs each endpoint's ACLs through the diff-based
//! [`Programmer`]. Compiled rules are rendered as ACL settings here, once per distinct compiled
//! list (replicas share one). An endpoint whose properties cannot be read is left as it is and
//! reported as failed (with backoff, after which the endpoints are listed again); the others
//! are programmed.
//!
//! Where the datapath has IP sets ([`Capabilities::ip_sets`](crate::Capabilities)), ACLs name
//! network sets ([`crate::ipsets`]) and a change of addresses updates the sets holding them:
//! sets are added and updated first, then endpoints programmed, then netpol's sets no ACL names
//! removed once every endpoint is programmed. A set HNS refuses as invalid holds back only the
//! endpoints whose rules name it (reported refused, keeping their rules). Host-scope rules
//! ([`crate::host_rules`]) go to every endpoint with rules where the network's type needs them.
//! Any other failed set add or update fails the whole step
//! before any endpoint is touched (retried with backoff): endpoints keep their previous rules,
//! which name sets still on the network, so nothing opens that was closed; a new address is
//! not admitted (nor a removed one dropped) until the retry succeeds, as with a failed
//! endpoint update in inline mode.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use netpol_datapath::{
    ApplyReport, Backoff, CompileOptions, CompiledPods, CompiledRules, DatapathError, Desired,
    EndpointInfo, Enforcer, Outcome,
};
use netpol_engine::{IdentityId, IdentityStore};

use crate::api::HcnApi;
use crate::conventions::WriteOptions;
use crate::discovery::{match_pods, EndpointDiscovery};
use crate::host_rules::HostRules;
use crate::ipsets::{SetChanges, SetSync, SetTable, WantedSet};
use crate::programmer::Programmer;
use crate::render::{HcnAcls, Remotes};
use netpol_engine::{Shared, SharedId};

/// HCN: per-endpoint ACL lists through the diff-based programmer.
pub struct HcnEnforcer {
    datapath: Arc<dyn HcnApi>,
    discovery: Box<dyn EndpointDiscovery>,
    programmer: Programmer,
    rendered: RenderCache,
    backoff: Backoff,
    /// The host's endpoints, as last discovered, with the pod each belongs to.
    endpoints: Vec<(EndpointInfo, Option<String>)>,
    /// Consecutive failures to list the endpoints, and when to try again.
    discovery_failures: u32,
    discovery_retry: Option<Instant>,
    /// Endpoints that could not be read: consecutive failures and when to list again.
    unreadable: BTreeMap<String, (u32, Instant)>,
    /// The network's IP sets, when the datapath has them.
    sets: Option<SetSync>,
    /// Consecutive failures of set requests, and when to try again.
    set_failures: u32,
    set_retry: Option<Instant>,
    /// What the last step sent to the network's sets.
    last_sets: SetChanges,
    /// Whether endpoints get host-scope rules.
    host_rules: HostRules,
}

impl HcnEnforcer {
    pub fn new(
        datapath: Arc<dyn HcnApi>,
        discovery: Box<dyn EndpointDiscovery>,
        backoff: Backoff,
    ) -> Self {
        let capabilities = datapath.capabilities();
        let ip_sets = capabilities.ip_sets;
        HcnEnforcer {
            datapath,
            discovery,
            programmer: Programmer::new(backoff),
            rendered: RenderCache {
                sets: ip_sets.then(|| SetTable::with_conventions(capabilities.set_conventions())),
                ..RenderCache::default()
            },
            sets: ip_sets.then(SetSync::default),
            set_failures: 0,
            set_retry: None,
            last_sets: SetChanges::default(),
            backoff,
            endpoints: Vec::new(),
            discovery_failures: 0,
            discovery_retry: None,
            unreadable: BTreeMap::new(),
            host_rules: HostRules::default(),
        }
    }

    /// The enforcer writing endpoints as `writes` says, with host-scope rules as `host_rules`
    /// says.
    pub fn with_writes(mut self, writes: WriteOptions, host_rules: HostRules) -> Self {
        self.programmer = Programmer::with_writes(self.backoff, writes);
        self.host_rules = host_rules;
        self
    }

    /// Gives the programmer the host-scope rules the network needs; on a failure to read its
    /// type the rules stay as they were.
    fn update_host_rules(&mut self) {
        let network_type = match self.host_rules {
            HostRules::Auto => match self.datapath.network_type() {
                Ok(kind) => kind,
                Err(error) => {
                    tracing::warn!(%error, "reading the HNS network's type failed; host-scope rules stay as they were");
                    return;
                }
            },
            HostRules::On | HostRules::Off => None,
        };
        self.programmer
            .set_host_rules(self.host_rules.rules_for(network_type.as_deref()));
    }

    /// Takes the endpoints whose rules name a set HNS refused out of `rules`, reporting each
    /// refused: they keep their rules, the others are programmed.
    fn hold_back_refused(
        sync: &SetSync,
        rules: &mut BTreeMap<String, Shared<HcnAcls>>,
        report: &mut ApplyReport,
    ) {
        let refused: BTreeMap<&str, &str> = sync.refused().collect();
        if refused.is_empty() {
            return;
        }
        rules.retain(|endpoint, acls| {
            let Some((set, why)) = acls
                .sets
                .iter()
                .find_map(|s| refused.get_key_value(s.as_str()))
            else {
                return true;
            };
            report.outcomes.insert(
                endpoint.clone(),
                Outcome::Refused {
                    rule: format!("its rules name IP set {set}, which HNS refuses: {why}"),
                },
            );
            false
        });
    }

    /// Records the endpoints that could not be read, and reports each as failed.
    fn note_unreadable(
        &mut self,
        unreadable: Vec<(String, DatapathError)>,
        report: &mut ApplyReport,
        now: Instant,
    ) {
        let mut still = BTreeMap::new();
        for (id, error) in unreadable {
            let (failures, retry_at) = match self.unreadable.get(&id) {
                // Reported again from the same listing: nothing new was tried.
                Some(&(failures, retry_at)) if retry_at > now => (failures, retry_at),
                Some(&(failures, _)) => (failures + 1, now + self.backoff.delay(failures + 1)),
                None => (1, now + self.backoff.delay(1)),
            };
            still.insert(id.clone(), (failures, retry_at));
            report.outcomes.insert(
                id,
                Outcome::Failed {
                    error,
                    failures,
                    retry_at,
                },
            );
        }
        self.unreadable = still;
    }

    /// Each endpoint's desired netpol rules: its pod's compiled rules, or none.
    fn desired(
        &mut self,
        desired: &Desired<'_>,
        refresh: bool,
    ) -> BTreeMap<String, Shared<HcnAcls>> {
        self.rendered.update(
            desired.compiled,
            desired.identities,
            desired.changed,
            refresh,
        );
        let mut out = BTreeMap::new();
        for (endpoint, pod) in &self.endpoints {
            let rules = match pod {
                // A pod whose rules failed to compile for the first time: leave it alone.
                Some(pod) => match desired.compiled.get(pod) {
                    Some(rules) => self.rendered.acls(rules, desired.identities),
                    None => continue,
                },
                None => self.rendered.none.clone(),
            };
            out.insert(endpoint.id.clone(), rules);
        }
        out
    }
}

impl HcnEnforcer {
    /// Whether ACLs name IP sets rather than inlining addresses.
    pub fn uses_ip_sets(&self) -> bool {
        self.sets.is_some()
    }

    /// What the last [`Enforcer::enforce`] sent to the network's IP sets.
    pub fn last_set_changes(&self) -> SetChanges {
        self.last_sets
    }

    /// The IP sets the rendered rules name, by id, with the revisions of their values.
    fn wanted_sets<'a>(
        table: &'a SetTable,
        rules: &BTreeMap<String, Shared<HcnAcls>>,
    ) -> BTreeMap<&'a str, WantedSet<'a>> {
        let mut named: BTreeSet<&str> = BTreeSet::new();
        let mut seen: HashSet<SharedId> = HashSet::new();
        for acls in rules.values() {
            if seen.insert(acls.id()) {
                named.extend(acls.sets.iter().map(String::as_str));
            }
        }
        // Looked up by id, not by listing every known set: the listing cost a tenth of a
        // replica at 150,000 pods.
        named
            .into_iter()
            .filter_map(|id| table.wanted(id).map(|s| (s.setting.id.as_str(), s)))
            .collect()
    }

    fn set_failed(&mut self, error: DatapathError, now: Instant) -> DatapathError {
        self.set_failures += 1;
        let delay = self.backoff.delay(self.set_failures);
        self.set_retry = Some(now + delay);
        tracing::warn!(%error, retry_in_ms = delay.as_millis(), "programming the network's IP sets failed");
        error
    }
}

impl Enforcer for HcnEnforcer {
    fn enforce(
        &mut self,
        desired: &Desired<'_>,
        refresh: bool,
        now: Instant,
    ) -> Result<ApplyReport, DatapathError> {
        let generation = self.datapath.resync_signal().generation();
        let result = self.enforce_pass(desired, refresh, now);
        if self.datapath.resync_signal().generation() == generation {
            return result;
        }
        // HNS restarted during this step: a call found it gone and the client reconnected. What
        // the step knew of the network's sets and endpoints predates the restart (a set it took
        // as present is gone, so an ACL naming it is refused), so do the step again from what
        // the HNS holds now, rather than leave endpoints unprogrammed until the next resync.
        tracing::info!("HNS restarted during programming; programming again from a fresh read");
        let again = self.enforce_pass(desired, true, now);
        match (result, again) {
            // Report what the first pass updated, which the second then found in place.
            (Ok(first), Ok(mut again)) => {
                for (endpoint, outcome) in first.outcomes {
                    let found_in_place =
                        matches!(again.outcomes.get(&endpoint), Some(Outcome::Unchanged));
                    if found_in_place && matches!(outcome, Outcome::Updated { .. }) {
                        again.outcomes.insert(endpoint, outcome);
                    }
                }
                Ok(again)
            }
            (_, again) => again,
        }
    }

    fn endpoints(&self) -> &[(EndpointInfo, Option<String>)] {
        &self.endpoints
    }

    fn next_wakeup(&self) -> Option<Instant> {
        [
            self.programmer.next_retry(),
            self.discovery.next_look(),
            self.discovery_retry,
            self.set_retry,
            self.unreadable.values().map(|(_, at)| *at).min(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn compile_options(&self) -> CompileOptions {
        self.datapath.capabilities().compile_options()
    }
}

impl HcnEnforcer {
    /// One step of [`Enforcer::enforce`]: discover, render, sets, endpoints, stale sets.
    fn enforce_pass(
        &mut self,
        desired: &Desired<'_>,
        refresh: bool,
        now: Instant,
    ) -> Result<ApplyReport, DatapathError> {
        if refresh {
            self.programmer.resync();
            if let Some(sets) = &mut self.sets {
                sets.resync();
            }
        }
        self.last_sets = SetChanges::default();
        let pods = desired.pods;
        // Another try at endpoints that could not be read is another listing.
        let relist = refresh || self.unreadable.values().any(|(_, at)| *at <= now);
        let unreadable = match self
            .discovery
            .endpoints(self.datapath.as_ref(), pods, relist, now)
        {
            Ok(listing) => {
                self.discovery_failures = 0;
                self.discovery_retry = None;
                let owners = match_pods(&listing.endpoints, pods);
                self.endpoints = listing
                    .endpoints
                    .into_iter()
                    .map(|e| {
                        let pod = owners.get(&e.id).cloned().flatten();
                        (e, pod)
                    })
                    .collect();
                listing.unreadable
            }
            Err(error) => {
                self.discovery_failures += 1;
                let delay = self.backoff.delay(self.discovery_failures);
                self.discovery_retry = Some(now + delay);
                tracing::warn!(%error, retry_in_ms = delay.as_millis(), "listing the host's endpoints failed");
                return Err(error);
            }
        };
        let mut rules = self.desired(desired, refresh);
        self.update_host_rules();
        let mut held_back = ApplyReport::default();
        let wanted = match (&mut self.sets, &self.rendered.sets) {
            (Some(sync), Some(table)) => {
                let wanted = Self::wanted_sets(table, &rules);
                match sync.add_and_update(self.datapath.as_ref(), &wanted) {
                    Ok(changes) => {
                        self.last_sets = changes;
                        Self::hold_back_refused(sync, &mut rules, &mut held_back);
                        Some(
                            wanted
                                .into_keys()
                                .map(str::to_string)
                                .collect::<BTreeSet<_>>(),
                        )
                    }
                    Err(error) => return Err(self.set_failed(error, now)),
                }
            }
            _ => None,
        };
        let mut report = self.programmer.apply(self.datapath.as_ref(), &rules, now);
        report.outcomes.extend(held_back.outcomes);
        let mut retired_removed = false;
        if let (Some(wanted), Some(sync), Some(table)) =
            (wanted, &mut self.sets, &self.rendered.sets)
        {
            // An endpoint not programmed may still name a set about to go: keep them all.
            let clean = report.outcomes.values().all(|o| {
                matches!(
                    o,
                    Outcome::Updated { .. } | Outcome::Unchanged | Outcome::Gone
                )
            });
            if clean {
                let wanted: BTreeMap<&str, WantedSet<'_>> = wanted
                    .iter()
                    .filter_map(|id| table.wanted(id).map(|s| (s.setting.id.as_str(), s)))
                    .collect();
                let removed = sync.remove_unwanted(self.datapath.as_ref(), &wanted, |id| {
                    table.retired_values(id)
                });
                match removed {
                    Ok(changes) => {
                        self.last_sets.removed += changes.removed;
                        self.last_sets.calls += changes.calls;
                        retired_removed = true;
                    }
                    // Stale sets are harmless (no ACL names them): removed on a later step.
                    Err(error) => {
                        tracing::warn!(%error, "removing IP sets no ACL names failed; retried later")
                    }
                }
            }
        }
        if retired_removed {
            if let Some(table) = &mut self.rendered.sets {
                table.clear_retired();
            }
        }
        self.set_failures = 0;
        self.set_retry = None;
        self.note_unreadable(unreadable, &mut report, now);
        Ok(report)
    }
}

/// Rendered ACLs by compiled rule list: replicas share one `Shared<CompiledRules>`, so each
/// distinct list is rendered (and its rule ids hashed) once. With IP sets, the sets of the lists
/// that came into and went out of use are counted in the set table's book, whose names follow a
/// set replaced by one with the identities a change brought ([`SetTable::step`]), so a list
/// kept in use renders again only when one of its sets became empty or stopped being empty (an
/// empty set is never named). Inline, a list renders again the rules naming an identity whose
/// addresses changed.
#[derive(Default)]
struct RenderCache {
    /// Keyed by the compiled list's id: replicas share one list, and the id names that list
    /// alone whatever was dropped since.
    by_list: HashMap<SharedId, (Shared<CompiledRules>, Shared<HcnAcls>)>,
    /// No rules: what endpoints no pod claims get.
    none: Shared<HcnAcls>,
    /// The IP sets of the rules' remote sets, when ACLs name sets.
    sets: Option<SetTable>,
}

/// The remote sets of a list's rules, one per rule naming one.
fn remote_sets(list: &CompiledRules) -> impl Iterator<Item = &Shared<netpol_datapath::RemoteSet>> {
    list.rules.iter().filter_map(|r| r.remotes.as_ref())
}

impl RenderCache {
    fn acls(&mut self, compiled: &Shared<CompiledRules>, store: &IdentityStore) -> Shared<HcnAcls> {
        let sets = &mut self.sets;
        self.by_list
            .entry(compiled.id())
            .or_insert_with(|| {
                let mut remotes = match sets {
                    Some(table) => Remotes::Sets(table),
                    None => Remotes::Inline,
                };
                (
                    compiled.clone(),
                    Shared::new(HcnAcls::render_with(compiled, store, &mut remotes)),
                )
            })
            .1
            .clone()
    }

    /// Forgets lists no pod holds any more and books the sets of the lists that came and went;
    /// brings the rendered lists kept up to date with the addresses that changed. On a refresh
    /// every list is rendered again and every set resolved anew (names kept).
    fn update(
        &mut self,
        compiled: &CompiledPods,
        store: &IdentityStore,
        changed: &BTreeSet<IdentityId>,
        refresh: bool,
    ) {
        let live: HashMap<SharedId, &Shared<CompiledRules>> =
            compiled.values().map(|l| (l.id(), l)).collect();
        let lost: Vec<Shared<CompiledRules>> = if refresh {
            self.by_list.drain().map(|(_, (list, _))| list).collect()
        } else {
            let gone: Vec<SharedId> = self
                .by_list
                .keys()
                .filter(|list| !live.contains_key(list))
                .copied()
                .collect();
            gone.iter()
                .filter_map(|list| self.by_list.remove(list))
                .map(|(list, _)| list)
                .collect()
        };
        let Some(table) = &mut self.sets else {
            if !changed.is_empty() {
                for (list, acls) in self.by_list.values_mut() {
                    let rerendered = acls.rerender_with(list, store, changed, &mut Remotes::Inline);
                    if let Some(new) = rerendered {
                        *acls = Shared::new(new);
                    }
                }
            }
            return;
        };
        let gained = live
            .iter()
            .filter(|(list, _)| !self.by_list.contains_key(list))
            .flat_map(|(_, list)| remote_sets(list));
        let step = table.step(
            store,
            changed,
            gained,
            lost.iter().flat_map(|l| remote_sets(l)),
        );
        if refresh {
            let corrected = table.refresh(store);
            if corrected > 0 {
                tracing::warn!(
                    sets = corrected,
                    "IP sets patched by the change differ from the sets resolved anew; using those"
                );
            }
        }
        // A set that became empty, or stopped being empty, adds or takes out the ACLs naming it.
        let flipped = step.changed.iter().any(|(slot, delta)| {
            let now = table.slot_len(*slot);
            let before = now + delta.removed.len() - delta.added.len();
            (now == 0) != (before == 0)
        });
        if flipped {
            for (list, acls) in self.by_list.values_mut() {
                *acls = Shared::new(HcnAcls::render_with(list, store, &mut Remotes::Sets(table)));
            }
        } else if step
            .changed
            .iter()
            .any(|(slot, _)| table.inlines_slot(*slot))
        {
            // An inlined (IPv6) set changed: the rules naming it carry its addresses.
            for (list, acls) in self.by_list.values_mut() {
                let rerendered =
                    acls.rerender_with(list, store, changed, &mut Remotes::Sets(table));
                if let Some(new) = rerendered {
                    *acls = Shared::new(new);
                }
            }
        }
    }
}
