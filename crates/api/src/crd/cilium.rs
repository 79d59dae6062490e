//! CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy (cilium.io/v2).
//!
//! Both carry their rules at the root of the object, in `spec` and/or `specs`, rather than in a
//! single spec; `#[kube(no_spec)]` flattens [`CiliumNetworkPolicyRules`] and
//! [`CiliumClusterwideNetworkPolicyRules`] onto the root for that.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The root fields of a namespaced Cilium policy.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    derive = "PartialEq",
    group = "cilium.io",
    version = "v2",
    kind = "CiliumNetworkPolicy",
    plural = "ciliumnetworkpolicies",
    shortname = "cnp",
    namespaced,
    no_spec
)]
#[serde(rename_all = "camelCase")]
pub struct CiliumNetworkPolicyRules {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<CiliumRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specs: Option<Vec<CiliumRule>>,
}

/// The root fields of a cluster-wide Cilium policy.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    derive = "PartialEq",
    group = "cilium.io",
    version = "v2",
    kind = "CiliumClusterwideNetworkPolicy",
    plural = "ciliumclusterwidenetworkpolicies",
    shortname = "ccnp",
    no_spec
)]
#[serde(rename_all = "camelCase")]
pub struct CiliumClusterwideNetworkPolicyRules {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<CiliumRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specs: Option<Vec<CiliumRule>>,
}

/// The wire form of either Cilium kind, without serde's `flatten`, which would lose the path of
/// a deserialization error (`specs[0].ingress[0].fromEntities`). Objects read from files go
/// through this; the derived `Deserialize` of the kinds is for API clients.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CiliumPolicyWire {
    #[serde(default)]
    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    #[serde(default)]
    pub spec: Option<CiliumRule>,
    #[serde(default)]
    pub specs: Option<Vec<CiliumRule>>,
}

impl From<CiliumPolicyWire> for CiliumNetworkPolicy {
    fn from(wire: CiliumPolicyWire) -> Self {
        CiliumNetworkPolicy {
            metadata: wire.metadata,
            spec: CiliumNetworkPolicyRules {
                spec: wire.spec,
                specs: wire.specs,
            },
        }
    }
}

impl From<CiliumPolicyWire> for CiliumClusterwideNetworkPolicy {
    fn from(wire: CiliumPolicyWire) -> Self {
        CiliumClusterwideNetworkPolicy {
            metadata: wire.metadata,
            spec: CiliumClusterwideNetworkPolicyRules {
                spec: wire.spec,
                specs: wire.specs,
            },
        }
    }
}

/// One Cilium rule: a subject and its ingress/egress allow and deny rules.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CiliumRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_selector: Option<LabelSelector>,
    /// Host policies: not supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub node_selector: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Vec<CiliumIngressRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_deny: Option<Vec<CiliumIngressRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<CiliumEgressRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_deny: Option<Vec<CiliumEgressRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_default_deny: Option<DefaultDeny>,
    /// Informational; ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Informational; ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub labels: Option<Value>,
}

/// Overrides whether the rule isolates its subject in each direction.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DefaultDeny {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<bool>,
}

/// An `ingress` or `ingressDeny` rule. Deny rules have no `authentication` and no L7 rules; the
/// translator rejects those there.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CiliumIngressRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_endpoints: Option<Vec<LabelSelector>>,
    #[serde(default, rename = "fromCIDR", skip_serializing_if = "Option::is_none")]
    pub from_cidr: Option<Vec<String>>,
    #[serde(
        default,
        rename = "fromCIDRSet",
        skip_serializing_if = "Option::is_none"
    )]
    pub from_cidr_set: Option<Vec<CidrRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_entities: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_nodes: Option<Vec<LabelSelector>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub from_requires: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub from_groups: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_ports: Option<Vec<CiliumPortRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub icmps: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<Authentication>,
}

/// An `egress` or `egressDeny` rule.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CiliumEgressRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_endpoints: Option<Vec<LabelSelector>>,
    #[serde(default, rename = "toCIDR", skip_serializing_if = "Option::is_none")]
    pub to_cidr: Option<Vec<String>>,
    #[serde(default, rename = "toCIDRSet", skip_serializing_if = "Option::is_none")]
    pub to_cidr_set: Option<Vec<CidrRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_entities: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_nodes: Option<Vec<LabelSelector>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub to_requires: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub to_groups: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub to_services: Option<Value>,
    #[serde(default, rename = "toFQDNs", skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub to_fqdns: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_ports: Option<Vec<CiliumPortRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub icmps: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<Authentication>,
}

/// A `fromCIDRSet`/`toCIDRSet` element.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CidrRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub except: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub cidr_group_ref: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub cidr_group_selector: Option<Value>,
}

/// A `toPorts` element: L4 ports, plus L7 and TLS features netpol rejects.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CiliumPortRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<CiliumPortProtocol>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub rules: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub server_names: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub listener: Option<Value>,
    #[serde(
        default,
        rename = "originatingTLS",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub originating_tls: Option<Value>,
    #[serde(
        default,
        rename = "terminatingTLS",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub terminating_tls: Option<Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CiliumPortProtocol {
    /// A number (as a string, `"0"` meaning every port) or a container port name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::int_or_string")]
    pub port: Option<CiliumPort>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_port: Option<i64>,
    /// TCP, UDP, SCTP or ANY (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

/// Cilium spells ports as strings; a bare YAML number is accepted too.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum CiliumPort {
    Number(i64),
    Text(String),
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Authentication {
    /// `required` or `disabled`.
    pub mode: String,
}
