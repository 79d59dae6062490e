//! One shape for ingress and egress rules.
//!
//! Cilium spells the same peer fields differently per direction (`fromEndpoints` and
//! `toEndpoints`, ...) and each direction has fields of its own that netpol rejects. A
//! [`RuleView`] names each field as the policy spells it, so that translation and error paths
//! are written once for both directions.

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;

use crate::crd::cilium::{
    Authentication, CidrRule, CiliumEgressRule, CiliumIngressRule, CiliumPortRule,
};

/// An ingress or egress rule, with its peer fields under their direction's names.
pub(super) struct RuleView<'a> {
    pub(super) endpoints: Field<'a, [metav1::LabelSelector]>,
    pub(super) cidr: Field<'a, [String]>,
    pub(super) cidr_set: Field<'a, [CidrRule]>,
    pub(super) entities: Field<'a, [String]>,
    pub(super) nodes: Field<'a, [metav1::LabelSelector]>,
    /// Fields netpol rejects: name, whether set, and why.
    pub(super) unsupported: Vec<(&'static str, bool, &'static str)>,
    pub(super) to_ports: Option<&'a [CiliumPortRule]>,
    pub(super) authentication: Option<&'a Authentication>,
}

/// A field's name in this direction, and its value.
pub(super) type Field<'a, T> = (&'static str, Option<&'a T>);

impl<'a> RuleView<'a> {
    pub(super) fn ingress(rule: &'a CiliumIngressRule) -> Self {
        RuleView {
            endpoints: ("fromEndpoints", rule.from_endpoints.as_deref()),
            cidr: ("fromCIDR", rule.from_cidr.as_deref()),
            cidr_set: ("fromCIDRSet", rule.from_cidr_set.as_deref()),
            entities: ("fromEntities", rule.from_entities.as_deref()),
            nodes: ("fromNodes", rule.from_nodes.as_deref()),
            unsupported: vec![
                (
                    "fromRequires",
                    rule.from_requires.is_some(),
                    "requirements are not supported",
                ),
                (
                    "fromGroups",
                    rule.from_groups.is_some(),
                    "cloud provider groups are not supported",
                ),
                (
                    "icmps",
                    rule.icmps.is_some(),
                    "ICMP rules are not supported",
                ),
            ],
            to_ports: rule.to_ports.as_deref(),
            authentication: rule.authentication.as_ref(),
        }
    }

    pub(super) fn egress(rule: &'a CiliumEgressRule) -> Self {
        RuleView {
            endpoints: ("toEndpoints", rule.to_endpoints.as_deref()),
            cidr: ("toCIDR", rule.to_cidr.as_deref()),
            cidr_set: ("toCIDRSet", rule.to_cidr_set.as_deref()),
            entities: ("toEntities", rule.to_entities.as_deref()),
            nodes: ("toNodes", rule.to_nodes.as_deref()),
            unsupported: vec![
                (
                    "toFQDNs",
                    rule.to_fqdns.is_some(),
                    "FQDN rules are not supported",
                ),
                (
                    "toServices",
                    rule.to_services.is_some(),
                    "service selectors are not supported",
                ),
                (
                    "toGroups",
                    rule.to_groups.is_some(),
                    "cloud provider groups are not supported",
                ),
                (
                    "toRequires",
                    rule.to_requires.is_some(),
                    "requirements are not supported",
                ),
                (
                    "icmps",
                    rule.icmps.is_some(),
                    "ICMP rules are not supported",
                ),
            ],
            to_ports: rule.to_ports.as_deref(),
            authentication: rule.authentication.as_ref(),
        }
    }

    pub(super) fn has_peer_field(&self) -> bool {
        self.endpoints.1.is_some()
            || self.cidr.1.is_some()
            || self.cidr_set.1.is_some()
            || self.entities.1.is_some()
            || self.nodes.1.is_some()
    }
}

/// The views of one rule list.
pub(super) fn views<'a, R>(
    rules: Option<&'a [R]>,
    view: fn(&'a R) -> RuleView<'a>,
) -> Vec<RuleView<'a>> {
    rules.into_iter().flatten().map(view).collect()
}
