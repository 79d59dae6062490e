//! Programs endpoints: diff the desired netpol rules against the rules read back, and update only
//! the endpoints whose netpol rules differ. Re-applying unchanged rules resets live TCP
//! connections on Windows, so an unchanged endpoint must cost no modify call, and an endpoint
//! whose rules this programmer installed and has not been told to doubt costs no call at all.
//!
//! - **Ownership.** Only ACLs whose `Id` starts with `netpol-` are netpol's. Every other policy is
//!   left alone: netpol never sends `Update` (which replaces the whole list, and so loses a policy
//!   another owner adds between netpol's read and its write), only `Add` of its own rules and
//!   `Remove` of its own rules exactly as read back.
//! - **Diffs** ([`crate::diff`]) match rules by id, which hashes the whole rule content, and then
//!   compare meanings, so HCN normalising fields on read-back is no difference but a rule edited
//!   in place is.
//! - **Make before break.** The rules a change brings are added before the stale ones are
//!   removed, so that while the endpoint holds both, every packet gets either its old or its new
//!   verdict (the first matching rule is an old or a new one), never one neither list gives.
//! - **Read back.** After writing, the endpoint is read again. If its netpol rules are not the
//!   wanted ones, another writer replaced the list meanwhile: the repair is computed and written
//!   again, up to [`ATTEMPTS`] times, and then reported as a failure (retried with backoff).
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

use crate::api::HcnApi;
use crate::diff::diff;
use crate::schema::{AclPolicySetting, EndpointPolicy, RequestType};

/// How many times one apply writes an endpoint and reads it back before it gives up on a
/// conflict with another writer (and retries after backoff).
pub const ATTEMPTS: u32 = 3;

/// A list of netpol's rules for one endpoint, however the caller holds it.
pub trait RuleList {
    fn rules(&self) -> &[AclPolicySetting];
}

impl RuleList for Vec<AclPolicySetting> {
    fn rules(&self) -> &[AclPolicySetting] {
        self
    }
}

impl RuleList for std::sync::Arc<crate::render::HcnAcls> {
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
}

impl Programmer {
    pub fn new(backoff: Backoff) -> Self {
        Programmer {
            backoff,
            ..Programmer::default()
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
        let digest = IdsDigest::of(rules);
        match self.known.get(endpoint) {
            Some(Known::Gone) => return Outcome::Gone,
            Some(Known::Programmed(known)) if *known == digest => return Outcome::Unchanged,
            _ => {}
        }
        if let Some(rule) = rules.iter().find(|r| !r.is_netpol_owned()) {
            return Outcome::Refused {
                rule: rule.id.clone(),
            };
        }
        let mut wanted: Vec<String> = rules.iter().map(|r| r.id.clone()).collect();
        wanted.sort();

        let result = self.sync(datapath, endpoint, rules);
        match result {
            Ok(outcome) => {
                self.failures.remove(endpoint);
                self.known
                    .insert(endpoint.to_string(), Known::Programmed(digest));
                outcome
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

    /// Reads the endpoint back and repairs its netpol rules if they differ, reading back after
    /// every write.
    fn sync(
        &self,
        datapath: &dyn HcnApi,
        endpoint: &str,
        rules: &[AclPolicySetting],
    ) -> Result<Outcome, DatapathError> {
        let mut current = diff(&datapath.read_policies(endpoint)?, rules);
        if current.is_clean() {
            return Ok(Outcome::Unchanged);
        }
        let (mut added, mut removed) = (0, 0);
        for attempt in 1..=ATTEMPTS {
            let add: Vec<EndpointPolicy> =
                current.to_add().iter().map(EndpointPolicy::acl).collect();
            let remove = current.to_remove();
            if !add.is_empty() {
                added += add.len();
                datapath.modify_policies(endpoint, RequestType::Add, add)?;
            }
            if !remove.is_empty() {
                removed += remove.len();
                datapath.modify_policies(endpoint, RequestType::Remove, remove)?;
            }
            current = diff(&datapath.read_policies(endpoint)?, rules);
            if current.is_clean() {
                return Ok(Outcome::Updated { added, removed });
            }
            tracing::warn!(
                %endpoint,
                attempt,
                missing = current.missing.len(),
                altered = current.altered.len(),
                extra = current.extra.len(),
                "the endpoint's netpol rules are not as just written: another writer changed its policy list meanwhile"
            );
        }
        Err(DatapathError::Call {
            call: "HcnModifyEndpoint",
            endpoint: Some(endpoint.to_string()),
            message: format!(
                "after {ATTEMPTS} writes the endpoint still lacks {} netpol rules, holds {} \
                 altered and {} it should not: another writer keeps replacing its policy list, \
                 or HNS does not apply netpol's Add and Remove requests",
                current.missing.len(),
                current.altered.len(),
                current.extra.len()
            ),
        })
    }
}
