//! The nftables datapath behind the neutral [`Enforcer`]: the whole ruleset in one table, one
//! transaction per change.

use std::collections::HashSet;
use std::time::Instant;

use netpol_datapath::{
    ApplyReport, Backoff, CompileOptions, DatapathError, Desired, EndpointInfo, Enforcer, Outcome,
};

use crate::programmer::{program, NftBackend};
use crate::ruleset::{EndpointChains, Ruleset};

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
    fn ruleset(desired: &Desired<'_>) -> Ruleset {
        let mut ruleset = Ruleset::default();
        let mut claimed = HashSet::new();
        for (key, addresses) in desired.pods {
            let Some(rules) = desired.compiled.get(key) else {
                continue;
            };
            let own: Vec<_> = addresses
                .iter()
                .copied()
                .filter(|a| claimed.insert(*a))
                .collect();
            if !own.is_empty() {
                let chains = EndpointChains::new(own, &rules.rules, desired.identities);
                ruleset.insert(key.clone(), chains);
            }
        }
        ruleset
    }
}

impl Enforcer for NftEnforcer {
    fn enforce(
        &mut self,
        desired: &Desired<'_>,
        refresh: bool,
        now: Instant,
    ) -> Result<ApplyReport, DatapathError> {
        self.endpoints = desired
            .pods
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
        let ruleset = Self::ruleset(desired);
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
