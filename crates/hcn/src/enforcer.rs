//! The HCN datapath behind the neutral [`Enforcer`]: discovers the host's endpoints, matches
//! them to pods by address and programs each endpoint's ACLs through the diff-based
//! [`Programmer`]. Compiled rules are rendered as ACL settings here, once per distinct compiled
//! list (replicas share one). An endpoint whose properties cannot be read is left as it is and
//! reported as failed (with backoff, after which the endpoints are listed again); the others
//! are programmed.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use netpol_datapath::{
    ApplyReport, Backoff, CompileOptions, CompiledPods, CompiledRules, DatapathError, Desired,
    EndpointInfo, Enforcer, Outcome,
};
use netpol_engine::{IdentityId, IdentityStore};

use crate::api::HcnApi;
use crate::discovery::{match_pods, EndpointDiscovery};
use crate::programmer::Programmer;
use crate::render::HcnAcls;

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
}

impl HcnEnforcer {
    pub fn new(
        datapath: Arc<dyn HcnApi>,
        discovery: Box<dyn EndpointDiscovery>,
        backoff: Backoff,
    ) -> Self {
        HcnEnforcer {
            datapath,
            discovery,
            programmer: Programmer::new(backoff),
            rendered: RenderCache::default(),
            backoff,
            endpoints: Vec::new(),
            discovery_failures: 0,
            discovery_retry: None,
            unreadable: BTreeMap::new(),
        }
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
    fn desired(&mut self, desired: &Desired<'_>, refresh: bool) -> BTreeMap<String, Arc<HcnAcls>> {
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

impl Enforcer for HcnEnforcer {
    fn enforce(
        &mut self,
        desired: &Desired<'_>,
        refresh: bool,
        now: Instant,
    ) -> Result<ApplyReport, DatapathError> {
        if refresh {
            self.programmer.resync();
        }
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
        let rules = self.desired(desired, refresh);
        let mut report = self.programmer.apply(self.datapath.as_ref(), &rules, now);
        self.note_unreadable(unreadable, &mut report, now);
        Ok(report)
    }

    fn endpoints(&self) -> &[(EndpointInfo, Option<String>)] {
        &self.endpoints
    }

    fn next_wakeup(&self) -> Option<Instant> {
        [
            self.programmer.next_retry(),
            self.discovery.next_look(),
            self.discovery_retry,
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

/// Rendered ACLs by compiled rule list: replicas share one `Arc<CompiledRules>`, so each
/// distinct list is rendered (and its rule ids hashed) once; when addresses change, only the
/// rules whose remote sets name a changed identity are rendered again.
#[derive(Default)]
struct RenderCache {
    /// Keyed by the address of the compiled list; the entry keeps the list alive, so the
    /// address cannot be reused while the entry exists.
    by_list: HashMap<usize, (Arc<CompiledRules>, Arc<HcnAcls>)>,
    /// No rules: what endpoints no pod claims get.
    none: Arc<HcnAcls>,
}

fn list_address(compiled: &Arc<CompiledRules>) -> usize {
    Arc::as_ptr(compiled) as usize
}

impl RenderCache {
    fn acls(&mut self, compiled: &Arc<CompiledRules>, store: &IdentityStore) -> Arc<HcnAcls> {
        self.by_list
            .entry(list_address(compiled))
            .or_insert_with(|| (compiled.clone(), Arc::new(HcnAcls::render(compiled, store))))
            .1
            .clone()
    }

    /// Forgets lists no pod holds any more, and brings the others up to date with the addresses
    /// that changed (all of them on a refresh).
    fn update(
        &mut self,
        compiled: &CompiledPods,
        store: &IdentityStore,
        changed: &BTreeSet<IdentityId>,
        refresh: bool,
    ) {
        let live: HashSet<usize> = compiled.values().map(list_address).collect();
        self.by_list.retain(|list, _| live.contains(list));
        if refresh {
            self.by_list.clear();
            return;
        }
        if changed.is_empty() {
            return;
        }
        for (list, acls) in self.by_list.values_mut() {
            if let Some(new) = acls.rerender(list, store, changed) {
                *acls = Arc::new(new);
            }
        }
    }
}
