//! How the simulated HNS reads and applies endpoint policy requests: ACLs parsed (and cached by
//! their text), priorities checked, sets resolved, and each request type applied as the
//! simulator's [`SimQuirks`] say.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use netpol_datapath::Refusal;

use super::quirks::{MissingSetQuirk, RemoveQuirk, SimQuirks};
use crate::addresses::AddressRanges;
use crate::client::RawError;
use crate::matcher::{AclMatcher, AclParseError};
use crate::schema::{
    EndpointPolicy, ModifyEndpointRequest, RequestType, ResourceType, SetPolicySetting,
};

/// A network IP set as the simulator holds it: the setting and its parsed values.
pub(super) type SimSet = (SetPolicySetting, Arc<AddressRanges>);

/// Why the simulator refused a policy list.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error(transparent)]
    Unreadable(#[from] AclParseError),
    #[error("ACL settings do not parse: {0}")]
    Malformed(String),
    #[error(
        "ACLs {first:?} and {second:?} overlap with different actions at the same priority \
         {priority}: HCN's order between them is undefined"
    )]
    PriorityConflict {
        priority: u16,
        first: String,
        second: String,
    },
}

fn invalid(message: String) -> RawError {
    RawError::Refused {
        refusal: Refusal::InvalidPolicy,
        message: format!("HCN_E_INVALID_POLICY: {message}"),
    }
}

/// Parsed ACLs by their settings text, dropped wholesale once it holds [`MatcherCache::LIMIT`].
#[derive(Debug, Default)]
pub(super) struct MatcherCache {
    by_text: HashMap<String, AclMatcher>,
}

impl MatcherCache {
    const LIMIT: usize = 20_000;

    pub(super) fn parse(
        &mut self,
        policy: &EndpointPolicy,
    ) -> Result<Option<AclMatcher>, PolicyError> {
        if policy.policy_type != crate::schema::ACL_POLICY_TYPE {
            return Ok(None);
        }
        let text = policy.settings_text();
        if let Some(matcher) = self.by_text.get(text) {
            return Ok(Some(matcher.clone()));
        }
        let Some(acl) = policy.as_acl() else {
            return Ok(None);
        };
        let acl = acl.map_err(|e| PolicyError::Malformed(e.to_string()))?;
        let matcher = AclMatcher::parse(&acl)?;
        if self.by_text.len() >= Self::LIMIT {
            self.by_text.clear();
        }
        self.by_text.insert(text.to_owned(), matcher.clone());
        Ok(Some(matcher))
    }

    pub(super) fn parse_acls(
        &mut self,
        policies: &[EndpointPolicy],
    ) -> Result<Vec<AclMatcher>, PolicyError> {
        let mut rules = Vec::new();
        for policy in policies {
            rules.extend(self.parse(policy)?);
        }
        rules.sort_by_key(|r| r.priority);
        Ok(rules)
    }
}

/// Refuses lists where HCN's evaluation order would be undefined.
pub fn check_priorities(policies: &[EndpointPolicy]) -> Result<(), PolicyError> {
    check_parsed_priorities(&MatcherCache::default().parse_acls(policies)?)
}

pub(super) fn check_parsed_priorities(rules: &[AclMatcher]) -> Result<(), PolicyError> {
    for group in rules.chunk_by(|a, b| a.priority == b.priority) {
        for (i, a) in group.iter().enumerate() {
            if let Some(b) = group[i + 1..]
                .iter()
                .find(|b| b.action != a.action && a.overlaps(b))
            {
                return Err(PolicyError::PriorityConflict {
                    priority: a.priority,
                    first: a.id.clone(),
                    second: b.id.clone(),
                });
            }
        }
    }
    Ok(())
}

/// The rules with the sets they name resolved to the network's values, as an HNS with `quirks`
/// reads them; an error names a missing set (where a missing set is refused).
pub(super) fn resolve_sets(
    rules: &[AclMatcher],
    sets: &BTreeMap<String, SimSet>,
    quirks: &SimQuirks,
) -> Result<Vec<AclMatcher>, String> {
    let nothing = Arc::new(AddressRanges::default());
    rules
        .iter()
        .map(|r| {
            r.resolve(
                |id| match (sets.get(id), quirks.missing_set) {
                    (Some((_, values)), _) => Some(values),
                    (None, MissingSetQuirk::MatchesNothing) => Some(&nothing),
                    (None, MissingSetQuirk::Refused) => None,
                },
                quirks.ingress_set_field,
            )
        })
        .collect()
}

pub(super) fn apply_request(
    current: &[EndpointPolicy],
    request: &ModifyEndpointRequest,
    matchers: &mut MatcherCache,
    sets: &BTreeMap<String, SimSet>,
    quirks: &SimQuirks,
) -> Result<Vec<EndpointPolicy>, RawError> {
    let ResourceType::Policy = request.resource_type;
    let given = &request.settings.policies;
    // What one request sends must have a defined order (judged with the sets it names as they
    // are now), and may name only sets the network holds; rules of other owners already on the
    // endpoint are theirs to order.
    let check_given = |matchers: &mut MatcherCache| -> Result<(), RawError> {
        let rules = matchers
            .parse_acls(given)
            .map_err(|e| invalid(e.to_string()))?;
        let rules = resolve_sets(&rules, sets, quirks).map_err(invalid)?;
        check_parsed_priorities(&rules).map_err(|e| RawError::Failed {
            message: e.to_string(),
        })?;
        check_new_acls(current, given, quirks)
    };
    let next = match request.request_type {
        RequestType::Update => {
            check_given(matchers)?;
            given.clone()
        }
        RequestType::Add => {
            check_given(matchers)?;
            if quirks.duplicate_ids_refused {
                refuse_duplicate_ids(current, given, matchers)?;
            }
            current.iter().chain(given).cloned().collect()
        }
        RequestType::Remove => remove(current, given, matchers, quirks.remove)?,
        RequestType::Refresh => current.to_vec(),
    };
    Ok(next)
}

/// Refuses a request bringing more ACLs the endpoint does not hold than the HNS takes at once.
fn check_new_acls(
    current: &[EndpointPolicy],
    given: &[EndpointPolicy],
    quirks: &SimQuirks,
) -> Result<(), RawError> {
    let Some(limit) = quirks.max_new_acls_per_request else {
        return Ok(());
    };
    let new = given
        .iter()
        .filter(|p| p.policy_type == crate::schema::ACL_POLICY_TYPE && !current.contains(p))
        .count();
    if new > limit {
        return Err(RawError::Failed {
            message: format!(
                "the request brings {new} new ACLs; this HNS takes at most {limit} per request"
            ),
        });
    }
    Ok(())
}

fn refuse_duplicate_ids(
    current: &[EndpointPolicy],
    given: &[EndpointPolicy],
    matchers: &mut MatcherCache,
) -> Result<(), RawError> {
    let held: HashSet<String> = matchers
        .parse_acls(current)
        .map_err(|e| invalid(e.to_string()))?
        .into_iter()
        .map(|r| r.id)
        .collect();
    let given = matchers
        .parse_acls(given)
        .map_err(|e| invalid(e.to_string()))?;
    match given
        .iter()
        .find(|r| !r.id.is_empty() && held.contains(&r.id))
    {
        Some(rule) => Err(RawError::Refused {
            refusal: Refusal::AlreadyExists,
            message: format!(
                "HCN_E_POLICY_ALREADY_EXISTS: the endpoint holds an ACL with Id {:?}",
                rule.id
            ),
        }),
        None => Ok(()),
    }
}

/// A `Remove` as the quirk says.
fn remove(
    current: &[EndpointPolicy],
    given: &[EndpointPolicy],
    matchers: &mut MatcherCache,
    quirk: RemoveQuirk,
) -> Result<Vec<EndpointPolicy>, RawError> {
    match quirk {
        RemoveQuirk::Ignored => Ok(current.to_vec()),
        RemoveQuirk::Exact => Ok(current
            .iter()
            .filter(|p| !given.contains(p))
            .cloned()
            .collect()),
        RemoveQuirk::Loose => {
            let slots: HashSet<_> = matchers
                .parse_acls(given)
                .map_err(|e| invalid(e.to_string()))?
                .into_iter()
                .map(|r| (r.direction, r.action))
                .collect();
            let mut out = Vec::new();
            for policy in current {
                let loosely = match matchers.parse(policy) {
                    Ok(Some(rule)) => slots.contains(&(rule.direction, rule.action)),
                    _ => false,
                };
                if !loosely && !given.contains(policy) {
                    out.push(policy.clone());
                }
            }
            Ok(out)
        }
    }
}
