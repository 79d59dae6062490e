//! The neutral ordered rules as HCN ACL settings: HCN's syntax, its per-rule address limit and
//! netpol's rule ids.
//!
//! - Rules split at [`MAX_ADDRESSES_PER_RULE`] remote addresses; each part keeps the rule's
//!   priority and action, so first-match evaluation is unchanged.
//! - Protocols are numbers, `256` for any; ports `a-b` ranges; hosts without a prefix length.
//! - Every rule's `Id` is `netpol-` plus a hash of its content, so ownership and diffs are exact.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ipnet::IpNet;
use netpol_datapath::{
    compile_entries, sets, CompileError, CompileOptions, CompileWarning, CompiledRules,
    OrderedRule, RuleAction, RuleCount, ALL_PORTS,
};
use netpol_engine::mapstate::{MapKey, MapValue};
use netpol_engine::reference::Reason;
use netpol_engine::{Direction, IdentityId, IdentityStore, MapState};
use sha2::{Digest, Sha256};

use crate::conventions::IngressSetField;
use crate::ipsets::SetTable;
use crate::schema::{
    AclAction, AclDirection, AclPolicySetting, EndpointPolicy, ModifyEndpointRequest, RuleType,
    NETPOL_ID_PREFIX, NETPOL_SET_PREFIX, PROTOCOL_ANY,
};

/// Microsoft advises at most a few thousand addresses per rule; Calico splits at 4000.
pub const MAX_ADDRESSES_PER_RULE: usize = 4000;

/// One endpoint's rules as HCN ACLs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HcnAcls {
    /// Ingress rules, then egress rules, each by ascending priority.
    pub rules: Vec<AclPolicySetting>,
    pub count: RuleCount,
    /// For each rule id, the MapState entry reason of the best-ranked entry the rule carries.
    pub reasons: BTreeMap<String, Arc<Reason>>,
    /// What the compiled rules do differently from the MapState, on purpose.
    pub warnings: Vec<CompileWarning>,
    /// The network IP sets the rules name (set mode only), by id.
    pub sets: BTreeSet<String>,
    /// For each ordered rule, how many settings it rendered to (one per chunk of addresses; none
    /// when its remote set holds no address now).
    spans: Vec<usize>,
}

/// How a rule's remote addresses reach HCN.
pub enum Remotes<'a> {
    /// Every address inlined in `RemoteAddresses`, split at [`MAX_ADDRESSES_PER_RULE`].
    Inline,
    /// The rule names its network IP set ([`crate::ipsets`]) in the field the table's
    /// conventions give it; IPv6 sets are inlined where the HNS is not known to take them.
    Sets(&'a mut SetTable),
}

impl HcnAcls {
    /// Renders compiled rules as HCN ACL settings, their remote sets resolved through the
    /// ipcache. A rule whose remote set holds no address now is left out: HCN reads an empty
    /// address list as every address.
    pub fn render(compiled: &CompiledRules, store: &IdentityStore) -> HcnAcls {
        HcnAcls::render_with(compiled, store, &mut Remotes::Inline)
    }

    /// Renders compiled rules with their remote addresses inlined or named as IP sets. A rule
    /// whose remote set holds no address now is left out either way.
    pub fn render_with(
        compiled: &CompiledRules,
        store: &IdentityStore,
        remotes: &mut Remotes<'_>,
    ) -> HcnAcls {
        let mut out = HcnAcls {
            warnings: compiled.warnings.clone(),
            ..HcnAcls::default()
        };
        for rule in &compiled.rules {
            let settings = render_rule(rule, store, remotes, &mut out.sets);
            out.push_rule(rule, settings);
        }
        out
    }

    /// The same rules rendered again where their remote sets name an identity in `changed`
    /// (whose addresses changed); every other rule keeps its settings. None if no rule names one.
    pub fn rerender(
        &self,
        compiled: &CompiledRules,
        store: &IdentityStore,
        changed: &BTreeSet<IdentityId>,
    ) -> Option<HcnAcls> {
        self.rerender_with(compiled, store, changed, &mut Remotes::Inline)
    }

    /// [`HcnAcls::rerender`], inline or with IP sets (whose values must be up to date).
    pub fn rerender_with(
        &self,
        compiled: &CompiledRules,
        store: &IdentityStore,
        changed: &BTreeSet<IdentityId>,
        remotes: &mut Remotes<'_>,
    ) -> Option<HcnAcls> {
        let names_changed = |rule: &OrderedRule| {
            rule.remotes
                .as_ref()
                .is_some_and(|set| changed.iter().any(|id| set.contains(*id)))
        };
        if self.spans.len() != compiled.rules.len() {
            return Some(HcnAcls::render_with(compiled, store, remotes));
        }
        if !compiled.rules.iter().any(names_changed) {
            return None;
        }
        let mut out = HcnAcls {
            warnings: compiled.warnings.clone(),
            ..HcnAcls::default()
        };
        let mut start = 0;
        for (rule, span) in compiled.rules.iter().zip(&self.spans) {
            let settings = if names_changed(rule) {
                render_rule(rule, store, remotes, &mut out.sets)
            } else {
                let kept = self.rules[start..start + span].to_vec();
                if matches!(remotes, Remotes::Sets(_)) {
                    out.sets.extend(
                        kept.iter()
                            .flat_map(|s| [&s.remote_addresses, &s.local_addresses])
                            .filter(|field| field.starts_with(NETPOL_SET_PREFIX))
                            .cloned(),
                    );
                }
                kept
            };
            start += span;
            out.push_rule(rule, settings);
        }
        Some(out)
    }

    fn push_rule(&mut self, rule: &OrderedRule, settings: Vec<AclPolicySetting>) {
        self.spans.push(settings.len());
        for setting in settings {
            self.count.add(rule.direction, 1);
            self.reasons.insert(setting.id.clone(), rule.reason.clone());
            self.rules.push(setting);
        }
    }

    /// The rules wrapped as endpoint policies.
    pub fn policies(&self) -> Vec<EndpointPolicy> {
        self.rules.iter().map(EndpointPolicy::acl).collect()
    }

    /// The `Update` request that would install exactly these rules, as `netpol acls` shows it.
    /// The real request also carries the endpoint's policies netpol does not own.
    pub fn update_request(&self) -> ModifyEndpointRequest {
        ModifyEndpointRequest::update(self.policies())
    }

    /// Pretty JSON of [`HcnAcls::update_request`].
    pub fn update_request_json(&self) -> String {
        serde_json::to_string_pretty(&self.update_request())
            .expect("an HCN request serializes to JSON")
    }
}

/// Compiles one endpoint's MapState and renders it as HCN ACLs, with the default options.
pub fn compile_acls(map: &MapState, store: &IdentityStore) -> Result<HcnAcls, CompileError> {
    compile_acls_with(map, store, &CompileOptions::default())
}

/// Compiles one endpoint's MapState and renders it as HCN ACLs.
pub fn compile_acls_with(
    map: &MapState,
    store: &IdentityStore,
    options: &CompileOptions,
) -> Result<HcnAcls, CompileError> {
    let compiled = netpol_datapath::compile_endpoint_with(map, store, options)?;
    Ok(HcnAcls::render(&compiled, store))
}

/// Compiles MapState entries (the form [`MapState::iter`] yields) and renders them as HCN ACLs.
pub fn compile_entries_acls<'a>(
    entries: impl IntoIterator<Item = (MapKey, &'a MapValue)>,
    store: &IdentityStore,
    options: &CompileOptions,
) -> Result<HcnAcls, CompileError> {
    Ok(HcnAcls::render(
        &compile_entries(entries, store, options)?,
        store,
    ))
}

impl From<RuleAction> for AclAction {
    fn from(action: RuleAction) -> Self {
        match action {
            RuleAction::Allow => AclAction::Allow,
            RuleAction::Block => AclAction::Block,
        }
    }
}

/// The settings of one ordered rule: one per chunk of at most [`MAX_ADDRESSES_PER_RULE`]
/// aggregated addresses; none if its remote set holds no address now.
/// With IP sets: one setting naming the rule's set, none if the set is empty now.
fn render_rule(
    rule: &OrderedRule,
    store: &IdentityStore,
    remotes: &mut Remotes<'_>,
    named: &mut BTreeSet<String>,
) -> Vec<AclPolicySetting> {
    let Some(set) = &rule.remotes else {
        return vec![to_setting(rule, Peers::Addresses(String::new()))];
    };
    match remotes {
        Remotes::Sets(table) if table.names(set) => {
            let ingress_field = table.conventions().ingress_field;
            let setting = table.get(set, store);
            if setting.values.is_empty() {
                return Vec::new();
            }
            let id = setting.id.clone();
            named.insert(id.clone());
            vec![to_setting(rule, Peers::Set { id, ingress_field })]
        }
        // Inline, or an IPv6 set on an HNS not known to take IPv6 members.
        _ => {
            let addresses = IpNet::aggregate(&sets::addresses(set, store));
            addresses
                .chunks(MAX_ADDRESSES_PER_RULE)
                .map(|chunk| {
                    to_setting(
                        rule,
                        Peers::Addresses(crate::ipsets::render_values(chunk.iter())),
                    )
                })
                .collect()
        }
    }
}

/// How one ACL names its peers.
enum Peers {
    /// Addresses and CIDRs, comma-separated, in `RemoteAddresses` (every HNS reads them so).
    Addresses(String),
    /// A network IP set, in the field the HNS's convention gives it.
    Set {
        id: String,
        ingress_field: IngressSetField,
    },
}

fn render_ports(ranges: &[(u16, u16)]) -> String {
    if ranges == [ALL_PORTS] {
        return String::new();
    }
    ranges
        .iter()
        .map(|(lo, hi)| {
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}-{hi}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The HCN setting of one neutral rule, naming `peers` (a chunk of its remotes, or its set).
fn to_setting(rule: &OrderedRule, peers: Peers) -> AclPolicySetting {
    let ports = render_ports(&rule.ports);
    let (acl_direction, local_ports, remote_ports) = match rule.direction {
        // Ingress: the remote is the source, the port is the endpoint's own.
        Direction::Ingress => (AclDirection::In, ports, String::new()),
        Direction::Egress => (AclDirection::Out, String::new(), ports),
    };
    let (local_addresses, remote_addresses) = match peers {
        Peers::Set {
            id,
            ingress_field: IngressSetField::Local,
        } if acl_direction == AclDirection::In => (id, String::new()),
        Peers::Set { id, .. } | Peers::Addresses(id) => (String::new(), id),
    };
    let mut setting = AclPolicySetting {
        id: String::new(),
        protocols: rule
            .protocol
            .map_or(PROTOCOL_ANY.to_string(), |p| p.number().to_string()),
        action: rule.action.into(),
        direction: acl_direction,
        local_addresses,
        remote_addresses,
        local_ports,
        remote_ports,
        rule_type: Some(RuleType::Switch),
        priority: rule.priority,
    };
    setting.id = rule_id(&setting);
    setting
}

/// `netpol-` and the first 64 bits of the SHA-256 of the rule's content (every field but the id),
/// so equal rules get equal ids across restarts and nodes, and a changed rule a new one.
pub fn rule_id(setting: &AclPolicySetting) -> String {
    let mut content = setting.clone();
    content.id.clear();
    let json = serde_json::to_vec(&content).expect("ACL settings serialize to JSON");
    let digest = Sha256::digest(&json);
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{NETPOL_ID_PREFIX}{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipsets::render_address;

    #[test]
    fn ports_render_as_singles_and_ranges() {
        assert_eq!(render_ports(&[(80, 80), (8000, 8080)]), "80,8000-8080");
        assert_eq!(render_ports(&[(0, 65535)]), "");
    }

    #[test]
    fn hosts_render_without_a_prefix_length() {
        assert_eq!(
            render_address(&"10.1.0.11/32".parse().unwrap()),
            "10.1.0.11"
        );
        assert_eq!(render_address(&"10.0.0.0/8".parse().unwrap()), "10.0.0.0/8");
        assert_eq!(render_address(&"fd00::1/128".parse().unwrap()), "fd00::1");
    }
}
