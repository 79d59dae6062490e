//! The requests that make one endpoint's netpol rules the wanted ones, as the dataplanes that ran
//! on real Windows nodes send them ([`crate::conventions`]):
//!
//! - **Add in bounded batches.** The rules an endpoint lacks go in `Add` requests of at most
//!   [`WriteOptions::max_acls_per_request`] ACLs (Azure NPM's 30 by default). `Add` touches no
//!   other policy, so other owners' policies survive it whatever happens meanwhile.
//! - **Then take the stale rules away**, once the new ones are in (make before break: while the
//!   endpoint holds both, every packet gets its old or its new verdict). By default
//!   ([`AclRemoval::Replace`]) with one `Update` carrying the endpoint's list as read back right
//!   after the adds, less the stale netpol rules: every other owner's policy byte for byte and in
//!   its place, no new ACL (so the batch bound holds for it too). An `Update` replaces the whole
//!   list, so a policy another owner adds between that read and the write is lost: the window is
//!   one read-write, as for Azure NPM and Calico, which replace lists the same way. With
//!   [`AclRemoval::Remove`], `Remove` requests of the stale rules exactly as read, in batches.
//! - **Read back** after writing; a difference left is repaired again, up to [`ATTEMPTS`] times.
//! - **Refusals** ([`Refusal`]): a rule already there (`HCN_E_POLICY_ALREADY_EXISTS`) or one to
//!   remove not there (`HCN_E_POLICY_NOT_FOUND`) means the list is not as read: it is read again
//!   and reconciled, as another attempt. A policy HNS cannot take (`HCN_E_INVALID_POLICY`) would be
//!   refused again: the rules this sync added are taken back (the endpoint keeps its previous
//!   rules, as after any failure) and the refusal is returned, naming the refused request's rules.

use std::collections::{BTreeSet, HashMap};

use netpol_datapath::{DatapathError, Outcome, Refusal};

use crate::api::HcnApi;
use crate::conventions::{AclRemoval, WriteOptions};
use crate::diff::{diff, RuleDiff};
use crate::schema::{AclPolicySetting, EndpointPolicy, RequestType};

/// How many times one apply writes an endpoint and reads it back before it gives up on a
/// conflict with another writer (and retries after backoff).
pub const ATTEMPTS: u32 = 3;

/// Writes one endpoint.
pub struct EndpointWriter<'a> {
    pub datapath: &'a dyn HcnApi,
    pub endpoint: &'a str,
    pub options: WriteOptions,
}

impl EndpointWriter<'_> {
    /// Reads the endpoint back and repairs its netpol rules if they differ, reading back after
    /// every pass.
    pub fn sync(&self, wanted: &[AclPolicySetting]) -> Result<Outcome, DatapathError> {
        let live = self.read()?;
        let mut current = diff(&live, wanted);
        if current.is_clean() {
            return Ok(Outcome::Unchanged);
        }
        let before: BTreeSet<String> = live.iter().filter_map(EndpointPolicy::netpol_id).collect();
        let (mut added, mut removed) = (0, 0);
        for attempt in 1..=ATTEMPTS {
            match self.pass(wanted, &current, &mut added, &mut removed) {
                Ok(()) => {}
                Err(error) if error.refusal() == Some(Refusal::InvalidPolicy) => {
                    self.take_back(wanted, &before);
                    return Err(error);
                }
                Err(error) => return Err(error),
            }
            current = diff(&self.read()?, wanted);
            if current.is_clean() {
                return Ok(Outcome::Updated { added, removed });
            }
            tracing::warn!(
                endpoint = %self.endpoint,
                attempt,
                missing = current.missing.len(),
                altered = current.altered.len(),
                extra = current.extra.len(),
                "the endpoint's netpol rules are not as just written: another writer changed its policy list meanwhile"
            );
        }
        Err(DatapathError::Call {
            call: "HcnModifyEndpoint",
            endpoint: Some(self.endpoint.to_string()),
            message: format!(
                "after {ATTEMPTS} writes the endpoint still lacks {} netpol rules, holds {} \
                 altered and {} it should not: another writer keeps replacing its policy list, \
                 or HNS does not apply netpol's requests",
                current.missing.len(),
                current.altered.len(),
                current.extra.len()
            ),
        })
    }

    /// One pass: the adds in batches, then the stale rules away. Ends early, for the caller to
    /// read the list again, when HNS says the list is not as read.
    fn pass(
        &self,
        wanted: &[AclPolicySetting],
        current: &RuleDiff,
        added: &mut usize,
        removed: &mut usize,
    ) -> Result<(), DatapathError> {
        let batch = self.options.max_acls_per_request.max(1);
        let add = current.to_add();
        for chunk in add.chunks(batch) {
            let policies = chunk.iter().map(EndpointPolicy::acl).collect();
            if self.send(RequestType::Add, policies)? {
                return Ok(());
            }
            *added += chunk.len();
        }
        // What the adds made of the list, and whatever another owner did meanwhile.
        let (live, stale) = if add.is_empty() || current.to_remove().is_empty() {
            // Nothing was stale before the adds: what another writer does meanwhile is for the
            // read-back to find.
            (None, current.to_remove())
        } else {
            let live = self.read()?;
            let stale = diff(&live, wanted).to_remove();
            (Some(live), stale)
        };
        if stale.is_empty() {
            return Ok(());
        }
        match self.options.removal {
            AclRemoval::Replace => {
                let live = match live {
                    Some(live) => live,
                    None => self.read()?,
                };
                let kept = without(&live, &stale);
                let count = live.len() - kept.len();
                if self.send(RequestType::Update, kept)? {
                    return Ok(());
                }
                *removed += count;
            }
            AclRemoval::Remove => {
                for chunk in stale.chunks(batch) {
                    if self.send(RequestType::Remove, chunk.to_vec())? {
                        return Ok(());
                    }
                    *removed += chunk.len();
                }
            }
        }
        Ok(())
    }

    /// Sends one request: true when HNS said the list is not as read (read it again).
    fn send(
        &self,
        request: RequestType,
        policies: Vec<EndpointPolicy>,
    ) -> Result<bool, DatapathError> {
        let acls: Vec<String> = match request {
            RequestType::Add => policies
                .iter()
                .filter_map(EndpointPolicy::netpol_id)
                .collect(),
            _ => Vec::new(),
        };
        match self
            .datapath
            .modify_policies(self.endpoint, request, policies)
        {
            Ok(()) => Ok(false),
            Err(error) => match error.refusal() {
                Some(Refusal::AlreadyExists | Refusal::PolicyNotFound) => {
                    tracing::info!(endpoint = %self.endpoint, %error, "HNS holds another list than read; reading it again");
                    Ok(true)
                }
                Some(Refusal::InvalidPolicy) => Err(DatapathError::Refused {
                    call: "HcnModifyEndpoint",
                    endpoint: Some(self.endpoint.to_string()),
                    refusal: Refusal::InvalidPolicy,
                    message: refused_rules(request, &acls, &error),
                }),
                None => Err(error),
            },
        }
    }

    /// After a refusal: takes back the netpol rules this sync added that are not wanted-and-held
    /// before, so that the endpoint keeps the rules it had. Best effort: a failure is logged, and
    /// the next sync (on a change or a resync) reads the endpoint again.
    fn take_back(&self, wanted: &[AclPolicySetting], before: &BTreeSet<String>) {
        let result = (|| {
            let live = self.read()?;
            let new: Vec<EndpointPolicy> = live
                .iter()
                .filter(|p| {
                    p.netpol_id().is_some_and(|id| {
                        !before.contains(&id) && wanted.iter().any(|w| w.id == id)
                    })
                })
                .cloned()
                .collect();
            if new.is_empty() {
                return Ok(());
            }
            match self.options.removal {
                AclRemoval::Replace => self.datapath.modify_policies(
                    self.endpoint,
                    RequestType::Update,
                    without(&live, &new),
                ),
                AclRemoval::Remove => {
                    self.datapath
                        .modify_policies(self.endpoint, RequestType::Remove, new)
                }
            }
        })();
        if let Err(error) = result {
            tracing::warn!(endpoint = %self.endpoint, %error, "taking back the rules added before HNS refused one failed");
        }
    }

    fn read(&self) -> Result<Vec<EndpointPolicy>, DatapathError> {
        self.datapath.read_policies(self.endpoint)
    }
}

/// `live` without one occurrence of each of `stale` (equal copies are interchangeable), every
/// other policy as read and in its place.
fn without(live: &[EndpointPolicy], stale: &[EndpointPolicy]) -> Vec<EndpointPolicy> {
    let mut left: HashMap<(&str, &str), usize> = HashMap::new();
    for policy in stale {
        *left
            .entry((policy.policy_type.as_str(), policy.settings_text()))
            .or_default() += 1;
    }
    live.iter()
        .filter(|policy| {
            match left.get_mut(&(policy.policy_type.as_str(), policy.settings_text())) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    false
                }
                _ => true,
            }
        })
        .cloned()
        .collect()
}

/// Why an endpoint is refused, naming the rules of the refused request.
fn refused_rules(request: RequestType, acls: &[String], error: &DatapathError) -> String {
    const SHOWN: usize = 3;
    let named = match acls {
        [] => format!("the endpoint's list ({request:?})"),
        [one] => format!("rule {one}"),
        many => format!(
            "one of {} rules ({}{})",
            many.len(),
            many[..many.len().min(SHOWN)].join(", "),
            if many.len() > SHOWN { ", ..." } else { "" }
        ),
    };
    format!(
        "HNS refuses {named} as an invalid policy (not retried until the rules change): {error}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn without_takes_one_copy_per_stale_policy_and_keeps_the_rest_in_place() {
        let a = EndpointPolicy::other("ACL", &json!({"Id": "netpol-a"}));
        let b = EndpointPolicy::other("ACL", &json!({"Id": "netpol-b"}));
        let nat = EndpointPolicy::other("OutBoundNAT", &json!({"Exceptions": ["10.0.0.0/8"]}));
        let live = vec![a.clone(), nat.clone(), b.clone(), a.clone()];
        assert_eq!(
            without(&live, std::slice::from_ref(&a)),
            vec![nat.clone(), b.clone(), a.clone()]
        );
        assert_eq!(without(&live, &[a.clone(), a.clone(), b]), vec![nat]);
    }
}
