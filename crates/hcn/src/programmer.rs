//! Programs endpoints: diff the desired netpol rules against the rules read back, and update only
//! the endpoints whose netpol rules differ. Re-applying unchanged rules resets live TCP
//! connections on Windows, so an unchanged endpoint must cost no modify call, and an endpoint
//! whose rules this programmer installed and has not been told to doubt costs no call at all.
//!
//! - **Ownership.** Only ACLs whose `Id` starts with `netpol-` are netpol's. Every other policy is
//!   left as read, byte for byte and in its place, through every write ([`crate::writes`]).
//! - **Diffs** ([`crate::diff`]) match rules by id, which hashes the whole rule content, and then
//!   compare meanings, so HCN normalising fields on read-back is no difference but a rule edited
//!   in place is.
//! - **Writes** ([`crate::writes`]): the rules a change brings are added, in bounded batches,
//!   before the stale ones are taken away (by an `Update` of the list as read back, or `Remove`
//!   where configured), so that every packet meanwhile gets its old or its new verdict; the
//!   endpoint is read back after, and repaired again if another writer changed it.
//! - **Host-scope rules** ([`Programmer::set_host_rules`]): rules every endpoint gets after its
//!   own (the `RuleType: Host` allows an l2bridge network needs), part of what is wanted.
//! - **Refusals.** An endpoint with an Allow HNS refuses as invalid gets its other rules (the
//!   refused Allow alone left out, [`crate::writes`]); one with a refused Block keeps its previous
//!   rules. Either is reported refused and not retried until its rules change or everything is
//!   re-read.
//! - **Failures** are per endpoint: a failed endpoint is retried with exponential backoff on
//!   later [`Programmer::apply`] calls and never holds others back. An endpoint that no longer
//!   exists is reported as gone and not retried (HCN endpoint ids are never reused).
//! - **Resync.** When the datapath's [`ResyncSignal`](crate::resync::ResyncSignal) is raised
//!   (HNS restarted), everything cached is forgotten and every endpoint is read back again.
//!
//! Time is passed in (`now`), so callers decide when to retry and tests need no clocks.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use netpol_datapath::{ApplyReport, Backoff, DatapathError, Outcome};

use netpol_datapath::Refusal;

use crate::api::HcnApi;
use crate::conventions::WriteOptions;
use crate::schema::AclPolicySetting;
use crate::writes::EndpointWriter;
pub use crate::writes::ATTEMPTS;

/// A list of netpol's rules for one endpoint, however the caller holds it.
pub trait RuleList {
    fn rules(&self) -> &[AclPolicySetting];
}

impl RuleList for Vec<AclPolicySetting> {
    fn rules(&self) -> &[AclPolicySetting] {
        self
    }
}

impl RuleList for netpol_engine::Shared<crate::render::HcnAcls> {
    fn rules(&self) -> &[AclPolicySetting] {
        &self.rules
    }
}

/// The set of rule ids of a list, in any order, as two independent 64-bit sums of the ids'
/// hashes: equal lists give equal digests, and comparing them costs no sorting or allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct IdsDigest(u64, u64);

impl IdsDigest {
    fn of(rules: &[AclPolicySetting]) -> IdsDigest {
        use std::hash::Hasher;
        let hash = |salt: u8, id: &str| {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            hasher.write_u8(salt);
            hasher.write(id.as_bytes());
            hasher.finish()
        };
        rules
            .iter()
            .fold(IdsDigest(rules.len() as u64, 0), |d, rule| {
                IdsDigest(
                    d.0.wrapping_add(hash(1, &rule.id)),
                    d.1.wrapping_add(hash(2, &rule.id)),
                )
            })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Known {
    /// The endpoint holds exactly the netpol rules of this digest.
    Programmed(IdsDigest),
    /// HNS refused the rules of this digest as invalid: why, for the report.
    Refused(IdsDigest, String),
    Gone,
}

#[derive(Clone, Debug)]
struct Failure {
    failures: u32,
    retry_at: Instant,
}

/// Diffs and applies desired rules, remembering what it knows about each endpoint.
#[derive(Debug, Default)]
pub struct Programmer {
    backoff: Backoff,
    known: HashMap<String, Known>,
    failures: HashMap<String, Failure>,
    generation: Option<u64>,
    writes: WriteOptions,
    /// Rules every endpoint gets after its own (host-scope allows).
    host_rules: Vec<AclPolicySetting>,
}

impl Programmer {
    pub fn new(backoff: Backoff) -> Self {
        Programmer {
            backoff,
            ..Programmer::default()
        }
    }

    /// A programmer writing as `writes` says.
    pub fn with_writes(backoff: Backoff, writes: WriteOptions) -> Self {
        Programmer {
            backoff,
            writes,
            ..Programmer::default()
        }
    }

    pub fn writes(&self) -> WriteOptions {
        self.writes
    }

    /// Sets the rules every endpoint gets after its own; endpoints are read back when they
    /// change.
    pub fn set_host_rules(&mut self, rules: Vec<AclPolicySetting>) {
        if rules != self.host_rules {
            self.host_rules = rules;
            self.known.clear();
        }
    }

    /// Forgets everything known, so the next apply reads every endpoint back.
    pub fn resync(&mut self) {
        self.known.clear();
    }

    /// The earliest time a deferred endpoint may be retried.
    pub fn next_retry(&self) -> Option<Instant> {
        self.failures.values().map(|f| f.retry_at).min()
    }

    /// Makes each endpoint's netpol rules equal `desired[endpoint]` (an empty list removes them).
    /// Endpoints not in `desired` are not touched.
    pub fn apply<R: RuleList>(
        &mut self,
        datapath: &dyn HcnApi,
        desired: &BTreeMap<String, R>,
        now: Instant,
    ) -> ApplyReport {
        let generation = datapath.resync_signal().generation();
        if self.generation != Some(generation) {
            if self.generation.is_some() {
                tracing::info!("HNS state may have been lost; re-reading every endpoint");
            }
            self.resync();
            // A failure before the restart says nothing of the HNS now (an endpoint refused
            // for naming a set the old HNS lost takes its rules from the new one): try every
            // endpoint now. Counts stay, so one that keeps failing backs off further.
            for failure in self.failures.values_mut() {
                failure.retry_at = failure.retry_at.min(now);
            }
            self.generation = Some(generation);
        }
        self.known.retain(|id, _| desired.contains_key(id));
        self.failures.retain(|id, _| desired.contains_key(id));

        let mut report = ApplyReport::default();
        for (endpoint, rules) in desired {
            let outcome = self.apply_one(datapath, endpoint, rules.rules(), now);
            match &outcome {
                Outcome::Failed { error, .. } => {
                    tracing::warn!(%endpoint, %error, "programming endpoint failed")
                }
                Outcome::Updated { added, removed } => {
                    tracing::debug!(%endpoint, added, removed, "endpoint ACLs updated")
                }
                _ => {}
            }
            report.outcomes.insert(endpoint.clone(), outcome);
        }
        report
    }

    fn apply_one(
        &mut self,
        datapath: &dyn HcnApi,
        endpoint: &str,
        rules: &[AclPolicySetting],
        now: Instant,
    ) -> Outcome {
        if let Some(f) = self.failures.get(endpoint) {
            if f.retry_at > now {
                return Outcome::Deferred {
                    retry_at: f.retry_at,
                };
            }
        }
        let owned;
        let rules = if self.host_rules.is_empty() {
            rules
        } else {
            owned = [rules, &self.host_rules].concat();
            &owned
        };
        let digest = IdsDigest::of(rules);
        match self.known.get(endpoint) {
            Some(Known::Gone) => return Outcome::Gone,
            Some(Known::Programmed(known)) if *known == digest => return Outcome::Unchanged,
            Some(Known::Refused(known, why)) if *known == digest => {
                return Outcome::Refused { rule: why.clone() }
            }
            _ => {}
        }
        if let Some(rule) = rules.iter().find(|r| !r.is_netpol_owned()) {
            return Outcome::Refused {
                rule: rule.id.clone(),
            };
        }

        let writer = EndpointWriter {
            datapath,
            endpoint,
            options: self.writes,
        };
        match writer.sync(rules) {
            // Programmed without the Allows HNS refuses: not retried until the rules change.
            Ok(Outcome::Refused { rule: why }) => {
                self.failures.remove(endpoint);
                self.known
                    .insert(endpoint.to_string(), Known::Refused(digest, why.clone()));
                Outcome::Refused { rule: why }
            }
            Ok(outcome) => {
                self.failures.remove(endpoint);
                self.known
                    .insert(endpoint.to_string(), Known::Programmed(digest));
                outcome
            }
            Err(error) if error.refusal() == Some(Refusal::InvalidPolicy) => {
                // The same request would be refused again: not a failure to back off from.
                tracing::warn!(%endpoint, %error, "HNS refuses the endpoint's rules; it keeps its previous rules");
                self.failures.remove(endpoint);
                let why = error.to_string();
                self.known
                    .insert(endpoint.to_string(), Known::Refused(digest, why.clone()));
                Outcome::Refused { rule: why }
            }
            Err(DatapathError::NotFound { .. }) => {
                self.failures.remove(endpoint);
                self.known.insert(endpoint.to_string(), Known::Gone);
                Outcome::Gone
            }
            Err(error) => {
                // The endpoint's state is unknown now: read it back next time.
                self.known.remove(endpoint);
                let failures = self.failures.get(endpoint).map_or(0, |f| f.failures) + 1;
                let retry_at = now + self.backoff.delay(failures);
                self.failures
                    .insert(endpoint.to_string(), Failure { failures, retry_at });
                Outcome::Failed {
                    error,
                    failures,
                    retry_at,
                }
            }
        }
    }
}
