//! Other owners' ACLs that HCN evaluates before netpol's. HCN evaluates every ACL of an endpoint
//! by ascending `Priority`, whoever wrote it: an ACL of the CNI plugin, of Azure NPM or of
//! Calico with a lower number than a netpol rule it overlaps decides those packets first, and
//! netpol's rule never sees them. netpol cannot change that (it never touches another owner's
//! policy), so it reports it: `netpol acls --compare` per endpoint, and the agent at start.
//!
//! An ACL is evaluated before a netpol rule when its priority number is lower, or equal (HCN's
//! order between equal priorities is undefined), and some packet could match both. IP sets are
//! resolved to their members where the caller knows them: in netpol's rules as netpol programs
//! them (the default [`IngressSetField`] convention: an ingress rule's peer sets in
//! `LocalAddresses`), in other owners' rules as written (a set in `RemoteAddresses` is the
//! peer's). A field naming a set nobody can resolve is taken to match any address (reported,
//! never hidden).

use std::sync::Arc;

use ipnet::IpNet;

use crate::addresses::AddressRanges;
use crate::conventions::IngressSetField;
use crate::matcher::AclMatcher;
use crate::schema::{AclDirection, AclPolicySetting, EndpointPolicy};

/// Another owner's ACL evaluated before some of netpol's rules.
#[derive(Clone, Debug, PartialEq)]
pub struct EvaluatedFirst {
    pub acl: AclPolicySetting,
    /// The ids of the netpol rules it comes before and overlaps, in the given order.
    pub netpol_rules: Vec<String>,
    /// It names IP sets whose members are unknown: taken as any remote address.
    pub unresolved_sets: bool,
}

/// The other owners' ACLs among `policies` that HCN evaluates before one of the `netpol` rules
/// they overlap; `sets` gives an IP set's members by id.
pub fn evaluated_first(
    policies: &[EndpointPolicy],
    netpol: &[AclPolicySetting],
    sets: &dyn Fn(&str) -> Option<Vec<IpNet>>,
) -> Vec<EvaluatedFirst> {
    let ours: Vec<(AclMatcher, &AclPolicySetting)> = netpol
        .iter()
        .filter_map(|rule| Some((resolved(rule, sets, IngressSetField::default())?.0, rule)))
        .collect();
    policies
        .iter()
        .filter(|p| p.netpol_id().is_none())
        .filter_map(|p| p.as_acl()?.ok())
        .filter_map(|acl| {
            let (matcher, unresolved_sets) = resolved(&acl, sets, IngressSetField::Remote)?;
            let netpol_rules: Vec<String> = ours
                .iter()
                .filter(|(rule, _)| matcher.priority <= rule.priority && matcher.overlaps(rule))
                .map(|(_, setting)| setting.id.clone())
                .collect();
            (!netpol_rules.is_empty()).then_some(EvaluatedFirst {
                acl,
                netpol_rules,
                unresolved_sets,
            })
        })
        .collect()
}

/// The rules netpol gives every endpoint it programs at the least: one rule per direction that
/// matches everything, at `priority`. Before the agent has programmed an endpoint (at start),
/// the other owners' ACLs evaluated before these are the ones that will come before netpol's
/// whole band.
pub fn catch_all(priority: u16) -> Vec<AclPolicySetting> {
    [AclDirection::In, AclDirection::Out]
        .into_iter()
        .map(|direction| AclPolicySetting {
            id: format!("netpol band {direction:?}"),
            protocols: String::new(),
            action: crate::schema::AclAction::Block,
            direction,
            local_addresses: String::new(),
            remote_addresses: String::new(),
            local_ports: String::new(),
            remote_ports: String::new(),
            rule_type: None,
            priority,
        })
        .collect()
}

/// The rule parsed with its sets resolved as HNS following `convention` evaluates it, and
/// whether some set could not be (then each field naming an unknown set is taken as any
/// address). None if it does not parse at all.
fn resolved(
    rule: &AclPolicySetting,
    sets: &dyn Fn(&str) -> Option<Vec<IpNet>>,
    convention: IngressSetField,
) -> Option<(AclMatcher, bool)> {
    let matcher = AclMatcher::parse(rule).ok()?;
    if matcher.named_sets().next().is_none() {
        return Some((matcher, false));
    }
    let members: Vec<(String, Arc<AddressRanges>)> = matcher
        .named_sets()
        .filter_map(|id| Some((id.clone(), Arc::new(AddressRanges::from_nets(&sets(id)?)))))
        .collect();
    let lookup = |id: &str| {
        members
            .iter()
            .find(|(set, _)| set == id)
            .map(|(_, nets)| nets)
    };
    if let Ok(resolved) = matcher.resolve(lookup, convention) {
        return Some((resolved, false));
    }
    let known = |names: &[String]| names.iter().all(|id| lookup(id).is_some());
    let any_where_unknown = AclPolicySetting {
        remote_addresses: if known(matcher.remote_sets()) {
            rule.remote_addresses.clone()
        } else {
            String::new()
        },
        local_addresses: if known(matcher.local_sets()) {
            rule.local_addresses.clone()
        } else {
            String::new()
        },
        ..rule.clone()
    };
    let matcher = AclMatcher::parse(&any_where_unknown).ok()?;
    Some((matcher.resolve(lookup, convention).ok()?, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{AclAction, RuleType};

    fn acl(
        id: &str,
        direction: AclDirection,
        priority: u16,
        remote: &str,
        ports: &str,
    ) -> AclPolicySetting {
        AclPolicySetting {
            id: id.into(),
            protocols: "6".into(),
            action: AclAction::Block,
            direction,
            local_addresses: String::new(),
            remote_addresses: remote.into(),
            local_ports: ports.into(),
            remote_ports: String::new(),
            rule_type: Some(RuleType::Switch),
            priority,
        }
    }

    #[test]
    fn only_lower_numbered_overlapping_acls_of_other_owners_count() {
        let netpol = vec![
            acl("netpol-a", AclDirection::In, 1000, "10.0.0.0/24", "80"),
            acl("netpol-b", AclDirection::In, 1001, "", ""),
        ];
        let policies: Vec<EndpointPolicy> = [
            // Before both, overlapping both.
            acl("cni-1", AclDirection::In, 100, "10.0.0.5", "80"),
            // Before both, but another port: overlaps only the catch-all.
            acl("cni-2", AclDirection::In, 200, "10.0.0.5", "443"),
            // After netpol's rules: evaluated later.
            acl("cni-3", AclDirection::In, 2000, "", ""),
            // Another direction: overlaps no ingress rule.
            acl("cni-4", AclDirection::Out, 10, "", ""),
            // netpol's own.
            acl("netpol-c", AclDirection::In, 1, "", ""),
        ]
        .iter()
        .map(EndpointPolicy::acl)
        .collect();
        let found = evaluated_first(&policies, &netpol, &|_| None);
        let ids: Vec<(&str, Vec<String>)> = found
            .iter()
            .map(|f| (f.acl.id.as_str(), f.netpol_rules.clone()))
            .collect();
        assert_eq!(
            ids,
            [
                (
                    "cni-1",
                    vec!["netpol-a".to_string(), "netpol-b".to_string()]
                ),
                ("cni-2", vec!["netpol-b".to_string()]),
            ]
        );
    }

    #[test]
    fn sets_are_resolved_and_an_unknown_set_is_taken_as_any_address() {
        let netpol = vec![acl("netpol-a", AclDirection::In, 1000, "10.0.0.0/24", "80")];
        // Another owner's ACL as written: a set in `RemoteAddresses` is the peer's.
        let named = |remote: &str| {
            vec![EndpointPolicy::acl(&acl(
                "npm",
                AclDirection::In,
                100,
                remote,
                "80",
            ))]
        };
        let members = |id: &str| match id {
            "azure-npm-1" => Some(vec!["192.168.0.0/16".parse().unwrap()]),
            "azure-npm-3" => Some(vec!["10.0.0.5/32".parse().unwrap()]),
            "netpol-set-1" => Some(vec!["10.0.0.0/24".parse().unwrap()]),
            _ => None,
        };
        // A known set outside netpol's peers: no overlap.
        assert!(evaluated_first(&named("azure-npm-1"), &netpol, &members).is_empty());
        // A known set among netpol's peers: evaluated first, resolved.
        let found = evaluated_first(&named("azure-npm-3"), &netpol, &members);
        assert_eq!(found.len(), 1);
        assert!(!found[0].unresolved_sets);
        // An unknown set: it may hold anything, so it is reported, flagged.
        let found = evaluated_first(&named("azure-npm-2"), &netpol, &members);
        assert_eq!(found.len(), 1);
        assert!(found[0].unresolved_sets);

        // netpol's own rule with its peers in a set, programmed in `LocalAddresses` as the
        // default convention has it: the set is the peer's, not the endpoint's own address.
        let set_rule = AclPolicySetting {
            local_addresses: "netpol-set-1".into(),
            ..acl("netpol-s", AclDirection::In, 1000, "", "80")
        };
        assert_eq!(IngressSetField::default(), IngressSetField::Local);
        let netpol = vec![set_rule];
        assert!(evaluated_first(&named("azure-npm-1"), &netpol, &members).is_empty());
        assert_eq!(
            evaluated_first(&named("azure-npm-3"), &netpol, &members)[0].netpol_rules,
            ["netpol-s".to_string()]
        );
        // Another owner's ACL naming an unknown set in `LocalAddresses`: that field is any
        // address, so it is reported, flagged.
        let local_unknown = vec![EndpointPolicy::acl(&AclPolicySetting {
            local_addresses: "azure-npm-2".into(),
            ..acl("npm", AclDirection::In, 100, "10.0.0.5", "80")
        })];
        let found = evaluated_first(&local_unknown, &netpol, &members);
        assert_eq!(found.len(), 1);
        assert!(found[0].unresolved_sets);
    }

    #[test]
    fn the_catch_all_band_is_overlapped_by_any_earlier_acl() {
        let policies = vec![EndpointPolicy::acl(&acl(
            "cni",
            AclDirection::Out,
            900,
            "168.63.129.16",
            "",
        ))];
        assert_eq!(
            evaluated_first(&policies, &catch_all(1000), &|_| None).len(),
            1
        );
        assert!(evaluated_first(&policies, &catch_all(900 - 1), &|_| None).is_empty());
    }
}
