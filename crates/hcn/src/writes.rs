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
//!   refused again, so the rules of a refused `Add` are sent again each alone, to find the ones
//!   HNS refuses: a refused **Allow** is left out alone (leaving an Allow out can only turn an
//!   allowed packet into a blocked one, never open anything), the endpoint gets its other rules
//!   and is reported [`Outcome::Refused`] naming it. A refused **Block** cannot be left out
//!   without opening what it closes: the rules this sync added are taken back (the endpoint keeps
//!   its previous rules, as after any failure) and the refusal is returned as an error.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

use netpol_datapath::{DatapathError, Outcome, Refusal};

use crate::api::HcnApi;
use crate::conventions::{AclRemoval, WriteOptions};
use crate::diff::{diff, RuleDiff};
use crate::schema::{AclAction, AclPolicySetting, EndpointPolicy, RequestType};

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
        // Allows HNS refused alone, left out of what is wanted from then on.
        let mut refused: Vec<(String, String)> = Vec::new();
        let mut wanted = Cow::Borrowed(wanted);
        for attempt in 1..=ATTEMPTS {
            let mut left_out = Vec::new();
            match self.pass(&wanted, &current, &mut added, &mut removed, &mut left_out) {
                Ok(()) => {}
                Err(error) if error.refusal() == Some(Refusal::InvalidPolicy) => {
                    self.take_back(&wanted, &before);
                    return Err(error);
                }
                Err(error) => return Err(error),
            }
            if !left_out.is_empty() {
                wanted = Cow::Owned(without_ids(&wanted, &left_out));
                refused.extend(left_out);
            }
            current = diff(&self.read()?, &wanted);
            if current.is_clean() {
                if !refused.is_empty() {
                    return Ok(Outcome::Refused {
                        rule: left_out_rules(self.endpoint, &refused),
                    });
                }
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
    /// read the list again, when HNS says the list is not as read. Allows HNS refuses go to
    /// `left_out` (id, why); their stale versions are not taken away in this pass.
    fn pass(
        &self,
        wanted: &[AclPolicySetting],
        current: &RuleDiff,
        added: &mut usize,
        removed: &mut usize,
        left_out: &mut Vec<(String, String)>,
    ) -> Result<(), DatapathError> {
        let batch = self.options.max_acls_per_request.max(1);
        let add = current.to_add();
        for chunk in add.chunks(batch) {
            let policies = chunk.iter().map(EndpointPolicy::acl).collect();
            match self.send(RequestType::Add, policies) {
                Ok(true) => return Ok(()),
                Ok(false) => *added += chunk.len(),
                Err(error) if error.refusal() == Some(Refusal::InvalidPolicy) => {
                    if self.add_each_alone(chunk, error, added, left_out)? {
                        return Ok(());
                    }
                }
                Err(error) => return Err(error),
            }
        }
        // A refused Allow is no longer wanted: what stood for it (a previous version) is stale.
        let reduced;
        let wanted = if left_out.is_empty() {
            wanted
        } else {
            reduced = without_ids(wanted, left_out);
            &reduced[..]
        };
        // What the adds made of the list, and whatever another owner did meanwhile.
        let (live, stale) =
            if left_out.is_empty() && (add.is_empty() || current.to_remove().is_empty()) {
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

    /// After HNS refused an `Add` of `chunk` as invalid: each rule alone, to find the ones it
    /// refuses. A refused Allow goes to `left_out`; a refused Block is the error returned (it
    /// cannot be left out without opening what it closes). True when HNS said the list is not
    /// as read (read it again).
    fn add_each_alone(
        &self,
        chunk: &[AclPolicySetting],
        refusal: DatapathError,
        added: &mut usize,
        left_out: &mut Vec<(String, String)>,
    ) -> Result<bool, DatapathError> {
        let mut refusal = Some(refusal);
        for rule in chunk {
            // A batch of one was refused already: no need to send it again.
            let result = match (chunk.len(), refusal.take()) {
                (1, Some(error)) => Err(error),
                _ => self.send(RequestType::Add, vec![EndpointPolicy::acl(rule)]),
            };
            match result {
                Ok(true) => return Ok(true),
                Ok(false) => *added += 1,
                Err(error)
                    if error.refusal() == Some(Refusal::InvalidPolicy)
                        && rule.action == AclAction::Allow =>
                {
                    tracing::warn!(endpoint = %self.endpoint, rule = %rule.id, %error, "HNS refuses an Allow; it is left out alone (what it allows stays blocked)");
                    left_out.push((rule.id.clone(), error.to_string()));
                }
                Err(error) => return Err(error),
            }
        }
        Ok(false)
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

/// `wanted` less the rules of `left_out` (id, why).
fn without_ids(
    wanted: &[AclPolicySetting],
    left_out: &[(String, String)],
) -> Vec<AclPolicySetting> {
    wanted
        .iter()
        .filter(|rule| !left_out.iter().any(|(id, _)| *id == rule.id))
        .cloned()
        .collect()
}

/// What an endpoint holding all but the Allows HNS refused is reported with.
fn left_out_rules(endpoint: &str, refused: &[(String, String)]) -> String {
    let ids: Vec<&str> = refused.iter().map(|(id, _)| id.as_str()).collect();
    format!(
        "HNS refuses {} as an invalid policy: left out, endpoint {endpoint} holds its other rules \
         (what {} allows stays blocked; not retried until the rules change): {}",
        match ids.as_slice() {
            [one] => format!("Allow rule {one}"),
            many => format!("{} Allow rules ({})", many.len(), many.join(", ")),
        },
        if ids.len() == 1 { "it" } else { "they" },
        refused[0].1
    )
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
