//! Programs endpoints: diff the desired netpol rules against the rules read back, and update only
//! the endpoints whose netpol rules differ. Re-applying unchanged rules resets live TCP
//! connections on Windows, so an unchanged endpoint must cost no modify call, and an endpoint
//! whose rules this programmer installed and has not been told to doubt costs no call at all.
//!
//! - **Ownership.** Only ACLs whose `Id` starts with `netpol-` are netpol's. Every other policy is
//!   passed back in the `Update` exactly as read, in its original order.
//! - **Diffs** compare rule ids, which hash the whole rule content, so they are exact and immune
//!   to HCN normalizing fields on read-back.
//! - **Failures** are per endpoint: a failed endpoint is retried with exponential backoff on
//!   later [`Programmer::apply`] calls and never holds others back. An endpoint that no longer
//!   exists is reported as gone and not retried (HCN endpoint ids are never reused).
//! - **Resync.** When the datapath's [`ResyncSignal`](crate::datapath::ResyncSignal) is raised
//!   (HNS restarted), everything cached is forgotten and every endpoint is read back again.
//!
//! Time is passed in (`now`), so callers decide when to retry and tests need no clocks.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use crate::datapath::{Datapath, DatapathError};
use crate::schema::{AclPolicySetting, EndpointPolicy};

/// Retry delays: `initial`, doubling per consecutive failure, at most `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// The delay after `failures` consecutive failures (1 for the first).
    pub fn delay(&self, failures: u32) -> Duration {
        let factor = 1u32
            .checked_shl(failures.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }
}

/// What happened to one endpoint in one apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Its netpol rules already were the desired ones.
    Unchanged,
    /// Its netpol rules were replaced.
    Updated { added: usize, removed: usize },
    /// The call failed; retried after `retry_at`.
    Failed {
        error: DatapathError,
        failures: u32,
        retry_at: Instant,
    },
    /// Skipped: still backing off from an earlier failure.
    Deferred { retry_at: Instant },
    /// The endpoint no longer exists.
    Gone,
    /// The desired rules include one netpol does not own (no `netpol-` id); nothing was sent.
    Refused { rule: String },
}

/// Per-endpoint outcomes of one apply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApplyReport {
    pub outcomes: BTreeMap<String, Outcome>,
}

impl ApplyReport {
    pub fn updated(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Updated { .. }))
    }

    pub fn failed(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Failed { .. } | Outcome::Deferred { .. }))
    }

    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.outcomes.values().filter(|o| f(o)).count()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Known {
    /// The endpoint holds exactly these netpol rule ids (sorted).
    Programmed(Vec<String>),
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
    pub fn apply(
        &mut self,
        datapath: &dyn Datapath,
        desired: &BTreeMap<String, Vec<AclPolicySetting>>,
        now: Instant,
    ) -> ApplyReport {
        let generation = datapath.resync_signal().generation();
        if self.generation != Some(generation) {
            if self.generation.is_some() {
                tracing::info!("HNS state may have been lost; re-reading every endpoint");
            }
            self.resync();
            self.generation = Some(generation);
        }
        self.known.retain(|id, _| desired.contains_key(id));
        self.failures.retain(|id, _| desired.contains_key(id));

        let mut report = ApplyReport::default();
        for (endpoint, rules) in desired {
            let outcome = self.apply_one(datapath, endpoint, rules, now);
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
        datapath: &dyn Datapath,
        endpoint: &str,
        rules: &[AclPolicySetting],
        now: Instant,
    ) -> Outcome {
        if let Some(rule) = rules.iter().find(|r| !r.is_netpol_owned()) {
            return Outcome::Refused {
                rule: rule.id.clone(),
            };
        }
        if let Some(f) = self.failures.get(endpoint) {
            if f.retry_at > now {
                return Outcome::Deferred {
                    retry_at: f.retry_at,
                };
            }
        }
        let mut wanted: Vec<String> = rules.iter().map(|r| r.id.clone()).collect();
        wanted.sort();
        match self.known.get(endpoint) {
            Some(Known::Gone) => return Outcome::Gone,
            Some(Known::Programmed(ids)) if *ids == wanted => return Outcome::Unchanged,
            _ => {}
        }

        let result = self.sync(datapath, endpoint, rules, &wanted);
        match result {
            Ok(outcome) => {
                self.failures.remove(endpoint);
                self.known
                    .insert(endpoint.to_string(), Known::Programmed(wanted));
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

    /// Reads the endpoint back and updates it if its netpol rules differ.
    fn sync(
        &self,
        datapath: &dyn Datapath,
        endpoint: &str,
        rules: &[AclPolicySetting],
        wanted: &[String],
    ) -> Result<Outcome, DatapathError> {
        let current = datapath.read_policies(endpoint)?;
        let (owned, foreign): (Vec<EndpointPolicy>, Vec<EndpointPolicy>) =
            current.into_iter().partition(|p| p.netpol_id().is_some());
        let mut have: Vec<String> = owned.iter().filter_map(EndpointPolicy::netpol_id).collect();
        have.sort();
        if have == wanted {
            return Ok(Outcome::Unchanged);
        }
        let added = wanted.iter().filter(|id| !have.contains(id)).count();
        let removed = have.iter().filter(|id| !wanted.contains(id)).count();
        let mut policies = foreign;
        policies.extend(rules.iter().map(EndpointPolicy::acl));
        datapath.update_policies(endpoint, policies)?;
        Ok(Outcome::Updated { added, removed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let b = Backoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(10),
        };
        assert_eq!(b.delay(1), Duration::from_secs(1));
        assert_eq!(b.delay(2), Duration::from_secs(2));
        assert_eq!(b.delay(4), Duration::from_secs(8));
        assert_eq!(b.delay(5), Duration::from_secs(10));
        assert_eq!(b.delay(100), Duration::from_secs(10));
    }
}
