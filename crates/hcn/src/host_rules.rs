//! Host-scope rules: the `RuleType: Host` allows an endpoint needs on network types whose host
//! layer blocks what no Host rule allows once the endpoint holds any ACL. Calico appends one per
//! direction to every endpoint's list ("Required by l2bridge network", felix
//! `dataplane/windows/endpoint_mgr.go`; `policysets.NewHostRule`: Allow, protocol 256, priority
//! 100 on HNS builds that need a priority for them), Azure NPM adds them for Calico CNI endpoints
//! (`policymanager_windows.go`). They allow traffic through the host layer only: the switch-port
//! rules, netpol's policy, still decide every packet. Per network type (docs/windows.md):
//!
//! - `L2Bridge` (win-bridge, Calico's and Antrea's bridge mode, Azure CNI in bridge mode): needed.
//! - `Overlay` (win-overlay, Calico VXLAN, Azure CNI overlay), `NAT`, `Transparent`, `L2Tunnel`
//!   (Azure CNI's default on AKS): not needed; none is added (`--hcn-host-rules on` adds them).

use crate::render::rule_id;
use crate::schema::{AclAction, AclDirection, AclPolicySetting, RuleType, PROTOCOL_ANY};

/// Calico's priority for Host rules where HNS needs one (below netpol's rules, which start at
/// 1000; Host rules are evaluated in their own layer, so the number orders nothing of netpol's).
pub const HOST_RULE_PRIORITY: u16 = 100;

/// Whether endpoints get host-scope rules (`--hcn-host-rules`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HostRules {
    /// Where the network's type needs them ([`needs_host_rules`]).
    #[default]
    Auto,
    On,
    Off,
}

/// Whether a network of `network_type` (HNS's `Type`) needs host-scope allows.
pub fn needs_host_rules(network_type: &str) -> bool {
    network_type.eq_ignore_ascii_case("L2Bridge")
}

impl HostRules {
    /// The rules every endpoint holding netpol rules gets on a network of `network_type` (None:
    /// not known).
    pub fn rules_for(self, network_type: Option<&str>) -> Vec<AclPolicySetting> {
        let wanted = match self {
            HostRules::On => true,
            HostRules::Off => false,
            HostRules::Auto => network_type.is_some_and(needs_host_rules),
        };
        if wanted {
            host_rules()
        } else {
            Vec::new()
        }
    }
}

/// An Allow of everything at the host layer, per direction.
pub fn host_rules() -> Vec<AclPolicySetting> {
    [AclDirection::In, AclDirection::Out]
        .into_iter()
        .map(|direction| {
            let mut rule = AclPolicySetting {
                id: String::new(),
                protocols: PROTOCOL_ANY.to_string(),
                action: AclAction::Allow,
                direction,
                local_addresses: String::new(),
                remote_addresses: String::new(),
                local_ports: String::new(),
                remote_ports: String::new(),
                rule_type: Some(RuleType::Host),
                priority: HOST_RULE_PRIORITY,
            };
            rule.id = rule_id(&rule);
            rule
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_l2bridge_needs_host_rules_unless_told() {
        assert_eq!(HostRules::Auto.rules_for(Some("l2bridge")).len(), 2);
        assert!(HostRules::Auto.rules_for(Some("Overlay")).is_empty());
        assert!(HostRules::Auto.rules_for(None).is_empty());
        assert_eq!(HostRules::On.rules_for(None).len(), 2);
        assert!(HostRules::Off.rules_for(Some("L2Bridge")).is_empty());
        let rules = host_rules();
        assert!(rules
            .iter()
            .all(|r| r.is_netpol_owned() && r.rule_type == Some(RuleType::Host)));
        assert_ne!(rules[0].id, rules[1].id);
    }
}
