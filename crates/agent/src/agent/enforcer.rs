//! Where compiled rules are enforced: one trait, two datapaths.
//!
//! The pipeline compiles each local pod's MapState once into the datapath-neutral ordered rules
//! (`CompiledAcls::ordered`, with their HCN rendering beside them) and hands every pod's rules
//! to an [`Enforcer`]:
//!
//! - [`HcnEnforcer`] (Windows HCN, or its simulator): discovers the host's endpoints, matches them
//!   to pods by address and programs each endpoint's ACLs through the diff-based HCN programmer.
//! - [`NftEnforcer`] (Linux nftables): one table netpol owns, a chain pair per pod matched by the
//!   pod's addresses in the forward hook, brought up to date in one `nft` transaction per change
//!   by the content-named diff of `netpol_nft::programmer`.
//!
//! Both report per endpoint in the same [`ApplyReport`], so metrics, readiness and the `--once`
//! summary do not know which datapath ran.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use netpol_hcn::programmer::{ApplyReport, Backoff, Outcome, Programmer};
use netpol_hcn::schema::AclPolicySetting;
use netpol_hcn::{CompileOptions, CompiledAcls, Datapath, DatapathError, EndpointInfo};
use netpol_nft::programmer::{program, NftBackend};
use netpol_nft::{EndpointChains, Ruleset};

use super::endpoints::{match_pods, EndpointDiscovery, LocalPods};

/// Compiled rules of each local pod, by pod key.
pub type CompiledPods = BTreeMap<String, Arc<CompiledAcls>>;

/// A datapath that enforces compiled rules.
pub trait Enforcer: Send {
    /// Brings the datapath to `compiled` for the local `pods`. `refresh` re-reads everything the
    /// datapath holds instead of trusting what was last programmed. An error means nothing could
    /// be programmed this time (the endpoints could not be listed).
    fn enforce(
        &mut self,
        pods: &LocalPods,
        compiled: &CompiledPods,
        refresh: bool,
        now: Instant,
    ) -> Result<ApplyReport, DatapathError>;

    /// The datapath's endpoints as last seen, each with the pod it belongs to.
    fn endpoints(&self) -> &[(EndpointInfo, Option<String>)];

    /// When it wants to run again on its own: a retry after a failure, a look for missing
    /// endpoints.
    fn next_wakeup(&self) -> Option<Instant>;

    /// What the compiler may use on this datapath.
    fn compile_options(&self) -> CompileOptions;
}

/// HCN: per-endpoint ACL lists through the diff-based programmer.
pub struct HcnEnforcer {
    datapath: Arc<dyn Datapath>,
    discovery: Box<dyn EndpointDiscovery>,
    programmer: Programmer,
    backoff: Backoff,
    /// The host's endpoints, as last discovered, with the pod each belongs to.
    endpoints: Vec<(EndpointInfo, Option<String>)>,
    /// Consecutive failures to list the endpoints, and when to try again.
    discovery_failures: u32,
    discovery_retry: Option<Instant>,
}

impl HcnEnforcer {
    pub fn new(
        datapath: Arc<dyn Datapath>,
        discovery: Box<dyn EndpointDiscovery>,
        backoff: Backoff,
    ) -> Self {
        HcnEnforcer {
            datapath,
            discovery,
            programmer: Programmer::new(backoff),
            backoff,
            endpoints: Vec::new(),
            discovery_failures: 0,
            discovery_retry: None,
        }
    }

    /// Each endpoint's desired netpol rules: its pod's compiled rules, or none.
    fn desired(&self, compiled: &CompiledPods) -> BTreeMap<String, Vec<AclPolicySetting>> {
        self.endpoints
            .iter()
            .filter_map(|(endpoint, pod)| {
                let rules = match pod {
                    // A pod whose rules failed to compile for the first time: leave it alone.
                    Some(pod) => compiled.get(pod)?.rules.clone(),
                    None => Vec::new(),
                };
                Some((endpoint.id.clone(), rules))
            })
            .collect()
    }
}

impl Enforcer for HcnEnforcer {
    fn enforce(
        &mut self,
        pods: &LocalPods,
        compiled: &CompiledPods,
        refresh: bool,
        now: Instant,
    ) -> Result<ApplyReport, DatapathError> {
        if refresh {
            self.programmer.resync();
        }
        match self
            .discovery
            .endpoints(self.datapath.as_ref(), pods, refresh, now)
        {
            Ok(endpoints) => {
                self.discovery_failures = 0;
                self.discovery_retry = None;
                let owners = match_pods(&endpoints, pods);
                self.endpoints = endpoints
                    .into_iter()
                    .map(|e| {
                        let pod = owners.get(&e.id).cloned().flatten();
                        (e, pod)
                    })
                    .collect();
            }
            Err(error) => {
                self.discovery_failures += 1;
                let delay = self.backoff.delay(self.discovery_failures);
                self.discovery_retry = Some(now + delay);
                tracing::warn!(%error, retry_in_ms = delay.as_millis(), "listing the host's endpoints failed");
                return Err(error);
            }
        }
        let desired = self.desired(compiled);
        Ok(self.programmer.apply(self.datapath.as_ref(), &desired, now))
    }

    fn endpoints(&self) -> &[(EndpointInfo, Option<String>)] {
        &self.endpoints
    }

    fn next_wakeup(&self) -> Option<Instant> {
        [
            self.programmer.next_retry(),
            self.discovery.next_look(),
            self.discovery_retry,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn compile_options(&self) -> CompileOptions {
        self.datapath.capabilities().compile_options()
    }
}

/// nftables: the whole ruleset in one table, one transaction per change.
///
/// A local pod's endpoint is the pod itself (matched by its addresses, as kube-network-policies
/// does, whatever CNI made its interface), so endpoints are keyed by pod key.
pub struct NftEnforcer {
    backend: Box<dyn NftBackend + Send>,
    backoff: Backoff,
    endpoints: Vec<(EndpointInfo, Option<String>)>,
    /// What the kernel holds, as last programmed; None when it must be read back (at start,
    /// after a failure, on a resync).
    programmed: Option<Ruleset>,
    failures: u32,
    retry_at: Option<Instant>,
}

impl NftEnforcer {
    pub fn new(backend: Box<dyn NftBackend + Send>, backoff: Backoff) -> Self {
        NftEnforcer {
            backend,
            backoff,
            endpoints: Vec::new(),
            programmed: None,
            failures: 0,
            retry_at: None,
        }
    }

    /// The table the pods' compiled rules make. A pod whose rules never compiled is left out;
    /// an address two pods claim (a dying pod and its successor, briefly) goes to the first, as
    /// on HCN, since one packet cannot be matched to two chains.
    fn ruleset(pods: &LocalPods, compiled: &CompiledPods) -> Ruleset {
        let mut ruleset = Ruleset::default();
        let mut claimed = HashSet::new();
        for (key, addresses) in pods {
            let Some(acls) = compiled.get(key) else {
                continue;
            };
            let own: Vec<_> = addresses
                .iter()
                .copied()
                .filter(|a| claimed.insert(*a))
                .collect();
            if !own.is_empty() {
                ruleset.insert(key.clone(), EndpointChains::new(own, &acls.ordered));
            }
        }
        ruleset
    }
}

impl Enforcer for NftEnforcer {
    fn enforce(
        &mut self,
        pods: &LocalPods,
        compiled: &CompiledPods,
        refresh: bool,
        now: Instant,
    ) -> Result<ApplyReport, DatapathError> {
        self.endpoints = pods
            .iter()
            .map(|(key, addresses)| {
                let info = EndpointInfo {
                    id: key.clone(),
                    name: key.clone(),
                    addresses: addresses.clone(),
                };
                (info, Some(key.clone()))
            })
            .collect();
        let ruleset = Self::ruleset(pods, compiled);
        let every = |outcome: &dyn Fn(&str) -> Outcome| ApplyReport {
            outcomes: ruleset
                .endpoints
                .keys()
                .map(|k| (k.clone(), outcome(k)))
                .collect(),
        };
        if refresh {
            self.programmed = None;
            self.retry_at = None;
        }
        if let Some(retry_at) = self.retry_at.filter(|at| now < *at) {
            return Ok(every(&|_| Outcome::Deferred { retry_at }));
        }
        if self.programmed.as_ref() == Some(&ruleset) {
            return Ok(every(&|_| Outcome::Unchanged));
        }
        match program(self.backend.as_ref(), &ruleset) {
            Ok(report) => {
                let before = self.programmed.take();
                self.failures = 0;
                self.retry_at = None;
                let sent = report.script.is_some();
                let outcomes = every(&|key| {
                    let old = before.as_ref().and_then(|r| r.endpoints.get(key));
                    let new = &ruleset.endpoints[key];
                    // After a read-back only the chain names are known: a pod counts as updated
                    // whenever anything was sent.
                    let changed = match &before {
                        Some(_) => old != Some(new),
                        None => sent,
                    };
                    if changed {
                        Outcome::Updated {
                            added: new.rules(),
                            removed: old.map_or(0, EndpointChains::rules),
                        }
                    } else {
                        Outcome::Unchanged
                    }
                });
                tracing::debug!(
                    added = report.added.len(),
                    deleted = report.deleted.len(),
                    unchanged = report.unchanged,
                    "nftables table programmed"
                );
                self.programmed = Some(ruleset);
                Ok(outcomes)
            }
            Err(error) => {
                // The transaction failed as a whole: the kernel still holds the previous table.
                self.failures += 1;
                let retry_at = now + self.backoff.delay(self.failures);
                self.retry_at = Some(retry_at);
                self.programmed = None;
                let error = DatapathError::Call {
                    call: "nft -f",
                    endpoint: None,
                    message: error.to_string(),
                };
                tracing::warn!(%error, failures = self.failures, "programming nftables failed");
                let failures = self.failures;
                Ok(every(&|_| Outcome::Failed {
                    error: error.clone(),
                    failures,
                    retry_at,
                }))
            }
        }
    }

    fn endpoints(&self) -> &[(EndpointInfo, Option<String>)] {
        &self.endpoints
    }

    fn next_wakeup(&self) -> Option<Instant> {
        self.retry_at
    }

    fn compile_options(&self) -> CompileOptions {
        CompileOptions::default()
    }
}
