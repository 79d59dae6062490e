//! An endpoint's policy list as read from HCN against the netpol rules it should hold. The
//! programmer turns the difference into the requests that repair it; `netpol acls --compare`
//! reports it. Both see the same difference, so what the comparison calls missing is what the
//! agent would add.
//!
//! - **Ownership** is the `Id` prefix (`netpol-`), as everywhere: every other policy (another
//!   type, or an ACL without the prefix) is another owner's and only counted.
//! - **In place**: a live rule with a wanted rule's id and the same meaning (HCN may normalise
//!   fields on read-back; see [`AclMatcher::differences`]).
//! - **Altered**: a live netpol rule that stands for a wanted rule but means something else:
//!   the same id with other content (edited in place), or, among the rules left over, the same
//!   slot (direction, action, priority, protocols) with another id (a stale version of it). A
//!   live rule whose settings do not parse is altered too, if it has a wanted rule's id.
//! - **Missing**: wanted rules nothing on the endpoint stands for. **Extra**: live netpol rules
//!   no wanted rule accounts for (rules of deleted policies, duplicates).

use std::collections::HashMap;

use crate::conventions::IngressSetField;
use crate::matcher::AclMatcher;
use crate::schema::{AclAction, AclDirection, AclPolicySetting, EndpointPolicy};

/// A live netpol rule that differs from the wanted rule it stands for.
#[derive(Clone, Debug, PartialEq)]
pub struct Altered {
    /// The policy as read, exactly (a `Remove` must carry it as HCN holds it).
    pub live: EndpointPolicy,
    pub wanted: AclPolicySetting,
    /// The fields that differ (HCN names), or why the live settings cannot be read.
    pub differences: Vec<String>,
}

/// One endpoint's policies against its wanted netpol rules.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RuleDiff {
    /// Wanted rules present with their meaning.
    pub in_place: usize,
    pub missing: Vec<AclPolicySetting>,
    pub altered: Vec<Altered>,
    /// Live netpol policies no wanted rule accounts for, as read.
    pub extra: Vec<EndpointPolicy>,
    /// Every other owner's policy, as read and in order.
    pub foreign: Vec<EndpointPolicy>,
}

impl RuleDiff {
    /// Whether the endpoint holds exactly the wanted netpol rules.
    pub fn is_clean(&self) -> bool {
        self.missing.is_empty() && self.altered.is_empty() && self.extra.is_empty()
    }

    /// The rules an `Add` must bring: the missing ones and the wanted side of the altered ones.
    pub fn to_add(&self) -> Vec<AclPolicySetting> {
        self.missing
            .iter()
            .chain(self.altered.iter().map(|a| &a.wanted))
            .cloned()
            .collect()
    }

    /// The policies a `Remove` must take away, exactly as read: the extra ones and the live side
    /// of the altered ones.
    pub fn to_remove(&self) -> Vec<EndpointPolicy> {
        self.extra
            .iter()
            .chain(self.altered.iter().map(|a| &a.live))
            .cloned()
            .collect()
    }
}

/// A live netpol rule, parsed if it parses.
struct Live {
    policy: EndpointPolicy,
    id: String,
    settings: Result<AclPolicySetting, String>,
}

/// Where a rule sits in HCN's evaluation: rules that share it are versions of each other.
type Slot = (AclDirection, AclAction, u16, String);

fn slot(rule: &AclPolicySetting) -> Slot {
    (
        rule.direction,
        rule.action,
        rule.priority,
        rule.protocols.clone(),
    )
}

/// How `live` differs from `wanted` in meaning; empty if it does not.
fn differences(live: &Result<AclPolicySetting, String>, wanted: &AclPolicySetting) -> Vec<String> {
    let live = match live {
        Ok(live) => live,
        Err(e) => return vec![format!("unreadable settings: {e}")],
    };
    let parsed = AclMatcher::parse(live).map_err(|e| e.to_string());
    let wanted_parsed = AclMatcher::parse(wanted).map_err(|e| e.to_string());
    let mut out: Vec<String> = match (parsed, wanted_parsed) {
        (Ok(l), Ok(w)) => {
            let fields = l.differences(&w);
            let swapped = live.direction == AclDirection::In
                && fields == ["LocalAddresses", "RemoteAddresses"]
                && l.local_sets() == w.remote_sets()
                && l.remote_sets() == w.local_sets();
            if swapped {
                vec![format!(
                    "ingress set field: live names the peer set in {}, wanted in {} (the other HNS convention, see --hcn-ingress-set-field)",
                    if l.local_sets().is_empty() { "RemoteAddresses" } else { "LocalAddresses" },
                    if w.local_sets().is_empty() { "RemoteAddresses" } else { "LocalAddresses" },
                )]
            } else {
                fields.into_iter().map(String::from).collect()
            }
        }
        (Err(e), _) | (_, Err(e)) => vec![format!("unreadable settings: {e}")],
    };
    // An absent RuleType is HCN's default; only two different explicit ones differ.
    if let (Some(l), Some(w)) = (live.rule_type, wanted.rule_type) {
        if l != w {
            out.push("RuleType".into());
        }
    }
    out
}

/// How many `In` ACLs of `policies` (any owner's: netpol's, Azure NPM's) name an IP set in
/// `field`. On a node, ACLs naming ingress peer sets in the field other than netpol's
/// convention are a sign the node's dataplane followed the other one (`acls --compare` says so).
pub fn ingress_sets_in(policies: &[EndpointPolicy], field: IngressSetField) -> usize {
    policies
        .iter()
        .filter_map(|p| p.as_acl()?.ok())
        .filter(|acl| acl.direction == AclDirection::In)
        .filter_map(|acl| AclMatcher::parse(&acl).ok())
        .filter(|m| match field {
            IngressSetField::Local => !m.local_sets().is_empty(),
            IngressSetField::Remote => !m.remote_sets().is_empty(),
        })
        .count()
}

/// Compares `policies` (an endpoint's whole list, as read) with the `wanted` netpol rules.
pub fn diff(policies: &[EndpointPolicy], wanted: &[AclPolicySetting]) -> RuleDiff {
    let mut out = RuleDiff::default();
    let mut live = Vec::new();
    for policy in policies {
        match policy.netpol_id() {
            Some(id) => live.push(Live {
                settings: policy
                    .as_acl()
                    .expect("a netpol id is only found on ACLs")
                    .map_err(|e| e.to_string()),
                policy: policy.clone(),
                id,
            }),
            None => out.foreign.push(policy.clone()),
        }
    }

    // Wanted rules by id (indices, first last so that `pop` takes the first), each taken at
    // most once: a second live copy is extra.
    let mut by_id: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, rule) in wanted.iter().enumerate().rev() {
        by_id.entry(rule.id.as_str()).or_default().push(i);
    }
    let mut taken = vec![false; wanted.len()];
    let mut leftover_live = Vec::new();
    for rule in live {
        match by_id.get_mut(rule.id.as_str()).and_then(Vec::pop) {
            Some(i) => {
                taken[i] = true;
                let differences = differences(&rule.settings, &wanted[i]);
                if differences.is_empty() {
                    out.in_place += 1;
                } else {
                    out.altered.push(Altered {
                        live: rule.policy,
                        wanted: wanted[i].clone(),
                        differences,
                    });
                }
            }
            None => leftover_live.push(rule),
        }
    }

    // What is left pairs up by slot, in order: a live rule in a wanted rule's slot is a stale
    // version of it.
    let mut leftover_wanted: Vec<&AclPolicySetting> = wanted
        .iter()
        .zip(&taken)
        .filter(|(_, taken)| !**taken)
        .map(|(rule, _)| rule)
        .collect();
    for rule in leftover_live {
        let position = rule.settings.as_ref().ok().and_then(|settings| {
            let live_slot = slot(settings);
            leftover_wanted.iter().position(|w| slot(w) == live_slot)
        });
        match position {
            Some(i) => {
                let wanted = leftover_wanted.remove(i);
                out.altered.push(Altered {
                    differences: differences(&rule.settings, wanted),
                    live: rule.policy,
                    wanted: wanted.clone(),
                });
            }
            None => out.extra.push(rule.policy),
        }
    }
    out.missing = leftover_wanted.into_iter().cloned().collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::rule_id;
    use crate::schema::RuleType;
    use serde_json::json;

    fn rule(action: AclAction, priority: u16, remote: &str, ports: &str) -> AclPolicySetting {
        let mut r = AclPolicySetting {
            id: String::new(),
            protocols: "6".into(),
            action,
            direction: AclDirection::In,
            local_addresses: String::new(),
            remote_addresses: remote.into(),
            local_ports: ports.into(),
            remote_ports: String::new(),
            rule_type: Some(RuleType::Switch),
            priority,
        };
        r.id = rule_id(&r);
        r
    }

    fn wanted() -> Vec<AclPolicySetting> {
        vec![
            rule(AclAction::Allow, 1000, "10.0.0.1", "80"),
            rule(AclAction::Allow, 1000, "10.0.0.2", "443"),
            rule(AclAction::Block, 1001, "", ""),
        ]
    }

    fn nat() -> EndpointPolicy {
        EndpointPolicy::other("OutBoundNAT", &json!({"Exceptions": ["10.0.0.0/8"]}))
    }

    #[test]
    fn exactly_the_wanted_rules_amid_foreign_policies_are_clean() {
        let mut foreign_acl = rule(AclAction::Block, 100, "168.63.129.16", "80");
        foreign_acl.id = "azure-wireserver".into();
        let mut live = vec![nat(), EndpointPolicy::acl(&foreign_acl)];
        live.extend(wanted().iter().rev().map(EndpointPolicy::acl));
        let d = diff(&live, &wanted());
        assert!(d.is_clean(), "{d:?}");
        assert_eq!(d.in_place, 3);
        assert_eq!(d.foreign, vec![nat(), EndpointPolicy::acl(&foreign_acl)]);
    }

    #[test]
    fn normalised_read_back_is_in_place() {
        let w = wanted();
        let mut normalised = w[0].clone();
        normalised.remote_addresses = "10.0.0.1/32".into();
        normalised.rule_type = None;
        let live = [
            EndpointPolicy::acl(&normalised),
            EndpointPolicy::acl(&w[1]),
            EndpointPolicy::acl(&w[2]),
        ];
        assert!(diff(&live, &w).is_clean());
    }

    #[test]
    fn missing_altered_and_extra_rules_are_told_apart() {
        let w = wanted();
        // w[0] edited in place, keeping its id.
        let mut edited = w[0].clone();
        edited.local_ports = "8080".into();
        // w[1]'s slot holds an older version of it (another id).
        let stale = rule(AclAction::Allow, 1000, "10.0.0.3", "443");
        // A rule of a deleted policy.
        let gone = rule(AclAction::Allow, 1002, "10.9.9.9", "22");
        let live = [
            nat(),
            EndpointPolicy::acl(&edited),
            EndpointPolicy::acl(&stale),
            EndpointPolicy::acl(&gone),
        ];
        let d = diff(&live, &w);
        assert_eq!(d.in_place, 0);
        assert_eq!(d.altered.len(), 2);
        assert_eq!(d.altered[0].wanted, w[0]);
        assert_eq!(d.altered[0].differences, ["LocalPorts"]);
        assert_eq!(d.altered[1].wanted, w[1]);
        assert_eq!(d.altered[1].live, EndpointPolicy::acl(&stale));
        assert_eq!(d.altered[1].differences, ["RemoteAddresses"]);
        assert_eq!(d.missing, vec![w[2].clone()]);
        assert_eq!(d.extra, vec![EndpointPolicy::acl(&gone)]);
        assert_eq!(d.foreign, vec![nat()]);
        assert_eq!(d.to_add(), vec![w[2].clone(), w[0].clone(), w[1].clone()]);
        assert_eq!(
            d.to_remove(),
            vec![
                EndpointPolicy::acl(&gone),
                EndpointPolicy::acl(&edited),
                EndpointPolicy::acl(&stale)
            ]
        );
    }

    #[test]
    fn a_set_in_the_other_ingress_field_is_named_as_the_other_convention() {
        let mut local = rule(AclAction::Allow, 1000, "", "80");
        local.local_addresses = "netpol-set-00ff".into();
        local.id = rule_id(&local);
        let mut remote = rule(AclAction::Allow, 1000, "netpol-set-00ff", "80");
        remote.id = rule_id(&remote);
        let live = [EndpointPolicy::acl(&remote)];
        let d = diff(&live, std::slice::from_ref(&local));
        assert_eq!(d.altered.len(), 1);
        assert!(
            d.altered[0].differences[0].starts_with("ingress set field: live names the peer set in RemoteAddresses, wanted in LocalAddresses"),
            "{:?}",
            d.altered[0].differences
        );
        assert_eq!(ingress_sets_in(&live, IngressSetField::Remote), 1);
        assert_eq!(ingress_sets_in(&live, IngressSetField::Local), 0);
    }

    #[test]
    fn a_second_copy_is_extra_and_unreadable_settings_are_altered() {
        let w = wanted();
        let copy = EndpointPolicy::acl(&w[2]);
        let broken = EndpointPolicy::other(
            "ACL",
            &json!({"Id": w[0].id, "Action": "Allow", "Direction": "Sideways"}),
        );
        let live = [
            broken.clone(),
            EndpointPolicy::acl(&w[1]),
            copy.clone(),
            copy.clone(),
        ];
        let d = diff(&live, &w);
        assert_eq!(d.in_place, 2);
        assert_eq!(d.extra, vec![copy]);
        assert_eq!(d.altered.len(), 1);
        assert_eq!(d.altered[0].live, broken);
        assert!(d.altered[0].differences[0].starts_with("unreadable settings"));
        assert!(d.missing.is_empty());
    }
}
