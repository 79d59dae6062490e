//! The IP sets a node dump records (each network's `SetPolicy` policies of type `IPSET`), and
//! netpol ACLs with the set ids they name replaced by the sets' members, so that a rule naming
//! a set compares by what it matches: a set whose members drifted is a rule that differs.

use std::collections::BTreeMap;

use ipnet::IpNet;
use netpol_hcn::schema::{AclPolicySetting, EndpointPolicy, SetPolicySetting, NETPOL_SET_PREFIX};

/// The sets of every recorded network, by network id (lower case) and set id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveSets {
    networks: BTreeMap<String, BTreeMap<String, SetPolicySetting>>,
}

impl LiveSets {
    /// The sets among recorded networks' policies: `(id, label, policies)` each, the label naming
    /// the network in errors.
    pub fn read(
        networks: Vec<(Option<String>, String, Vec<EndpointPolicy>)>,
    ) -> Result<LiveSets, String> {
        let mut out = LiveSets::default();
        for (id, label, policies) in networks {
            let sets = out
                .networks
                .entry(id.unwrap_or_default().to_lowercase())
                .or_default();
            for (i, policy) in policies.iter().enumerate() {
                let Some(set) = policy.as_set() else {
                    continue;
                };
                let set = set.map_err(|e| format!("network {label}: policies[{i}]: {e}"))?;
                netpol_hcn::schema::set_members(&set.values)
                    .map_err(|e| format!("network {label}: IP set {}: Values: {e}", set.id))?;
                sets.insert(set.id.clone(), set);
            }
        }
        Ok(out)
    }

    /// The sets the computed rules name, as one network (computed documents and tests).
    pub fn of(sets: impl IntoIterator<Item = SetPolicySetting>) -> LiveSets {
        let mut out = LiveSets::default();
        out.networks.insert(
            String::new(),
            sets.into_iter().map(|s| (s.id.clone(), s)).collect(),
        );
        out
    }

    pub fn holds_netpol_sets(&self) -> bool {
        self.networks
            .values()
            .flat_map(BTreeMap::keys)
            .any(|id| id.starts_with(NETPOL_SET_PREFIX))
    }

    /// A set's `Values` on `network` (the endpoint's), else on any recorded network.
    pub fn values(&self, network: Option<&str>, id: &str) -> Option<&str> {
        network
            .and_then(|n| self.networks.get(n))
            .and_then(|sets| sets.get(id))
            .or_else(|| self.networks.values().find_map(|sets| sets.get(id)))
            .map(|set| set.values.as_str())
    }

    /// A set's members on `network`, else on any recorded network.
    pub fn members(&self, network: Option<&str>, id: &str) -> Option<Vec<IpNet>> {
        netpol_hcn::schema::set_members(self.values(network, id)?).ok()
    }

    /// netpol's sets on the recorded networks that none of `named` is.
    pub fn unnamed_netpol_sets<'a>(
        &'a self,
        named: &'a std::collections::BTreeSet<String>,
    ) -> impl Iterator<Item = &'a SetPolicySetting> + 'a {
        self.networks
            .values()
            .flat_map(BTreeMap::values)
            .filter(move |s| s.is_netpol_owned() && !named.contains(&s.id))
    }
}

/// A netpol ACL with each netpol set id in its `RemoteAddresses` or `LocalAddresses` replaced
/// by the set's values (`values` by id) in the same field, and the ids it names that `values`
/// does not know. netpol names ingress peer sets in the field of the default
/// [`netpol_hcn::IngressSetField`] convention (`LocalAddresses`), egress ones in
/// `RemoteAddresses`. Other owners' policies and rules naming no set come back unchanged.
pub fn resolve_rule<'v>(
    rule: &AclPolicySetting,
    values: impl Fn(&str) -> Option<&'v str>,
) -> (AclPolicySetting, Vec<String>) {
    if !rule.is_netpol_owned()
        || !(rule.remote_addresses.contains(NETPOL_SET_PREFIX)
            || rule.local_addresses.contains(NETPOL_SET_PREFIX))
    {
        return (rule.clone(), Vec::new());
    }
    let mut unknown = Vec::new();
    let mut resolve_field = |field: &str| -> String {
        if !field.contains(NETPOL_SET_PREFIX) {
            return field.to_string();
        }
        let items: Vec<String> = field
            .split(',')
            .map(str::trim)
            .map(|item| {
                if !item.starts_with(NETPOL_SET_PREFIX) {
                    return item.to_string();
                }
                match values(item) {
                    Some(values) => values.to_string(),
                    None => {
                        unknown.push(item.to_string());
                        item.to_string()
                    }
                }
            })
            .collect();
        items.join(",")
    };
    let resolved = AclPolicySetting {
        remote_addresses: resolve_field(&rule.remote_addresses),
        local_addresses: resolve_field(&rule.local_addresses),
        ..rule.clone()
    };
    (resolved, unknown)
}

/// [`resolve_rule`] on a policy as read: netpol ACLs resolved, everything else as it was.
pub fn resolve_policy<'v>(
    policy: &EndpointPolicy,
    values: impl Fn(&str) -> Option<&'v str>,
) -> (EndpointPolicy, Vec<String>) {
    match policy.as_acl() {
        Some(Ok(acl)) if policy.netpol_id().is_some() => {
            let (resolved, unknown) = resolve_rule(&acl, values);
            if unknown.is_empty() && resolved == acl {
                (policy.clone(), unknown)
            } else {
                (EndpointPolicy::acl(&resolved), unknown)
            }
        }
        _ => (policy.clone(), Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netpol_hcn::schema::{AclAction, AclDirection};

    fn rule(remote: &str) -> AclPolicySetting {
        AclPolicySetting {
            id: "netpol-1".into(),
            protocols: "6".into(),
            action: AclAction::Allow,
            direction: AclDirection::In,
            local_addresses: String::new(),
            remote_addresses: remote.into(),
            local_ports: "80".into(),
            remote_ports: String::new(),
            rule_type: None,
            priority: 1000,
        }
    }

    #[test]
    fn set_ids_become_their_values_and_unknown_ones_are_named() {
        let values = |id: &str| (id == "netpol-set-aa").then_some("10.0.0.1,10.0.1.0/24");
        let (resolved, unknown) = resolve_rule(&rule("netpol-set-aa"), values);
        assert_eq!(resolved.remote_addresses, "10.0.0.1,10.0.1.0/24");
        assert!(unknown.is_empty());
        let (kept, unknown) = resolve_rule(&rule("netpol-set-bb"), values);
        assert_eq!(kept.remote_addresses, "netpol-set-bb");
        assert_eq!(unknown, ["netpol-set-bb"]);
        // Another owner's rule naming a set is never rewritten.
        let mut foreign = rule("netpol-set-aa");
        foreign.id = "azure-npm-1".into();
        assert_eq!(resolve_rule(&foreign, values).0, foreign);
        // An ingress peer set in `LocalAddresses` (the default convention) resolves in place.
        let local = AclPolicySetting {
            local_addresses: "netpol-set-aa".into(),
            ..rule("")
        };
        let (resolved, unknown) = resolve_rule(&local, values);
        assert_eq!(resolved.local_addresses, "10.0.0.1,10.0.1.0/24");
        assert_eq!(resolved.remote_addresses, "");
        assert!(unknown.is_empty());
    }

    #[test]
    fn networks_are_read_and_bad_values_name_the_network_and_set() {
        let network = |values: &str| {
            let set = SetPolicySetting {
                id: "netpol-set-aa".into(),
                name: "netpol-set-aa".into(),
                policy_type: "IPSET".into(),
                values: values.into(),
            };
            vec![(
                Some("NET-1".to_string()),
                "NET-1".to_string(),
                vec![EndpointPolicy::set(&set)],
            )]
        };
        let sets = LiveSets::read(network("10.0.0.1,10.0.0.2")).unwrap();
        assert!(sets.holds_netpol_sets());
        assert_eq!(
            sets.values(Some("net-1"), "netpol-set-aa"),
            Some("10.0.0.1,10.0.0.2")
        );
        assert_eq!(
            sets.values(None, "netpol-set-aa"),
            Some("10.0.0.1,10.0.0.2")
        );
        assert_eq!(sets.members(None, "netpol-set-aa").unwrap().len(), 2);
        let error = LiveSets::read(network("10.0.0.1,ten")).unwrap_err();
        assert_eq!(
            error,
            "network NET-1: IP set netpol-set-aa: Values: \"ten\" is not an address or CIDR"
        );
    }
}
