//! AdminNetworkPolicy and BaselineAdminNetworkPolicy (policy.networking.k8s.io/v1alpha1), and
//! the subject and peer types ClusterNetworkPolicy (v1alpha2) shares with them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Cluster-scoped admin policy, evaluated before NetworkPolicy.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    derive = "PartialEq",
    group = "policy.networking.k8s.io",
    version = "v1alpha1",
    kind = "AdminNetworkPolicy",
    plural = "adminnetworkpolicies",
    shortname = "anp"
)]
#[serde(rename_all = "camelCase")]
pub struct AdminNetworkPolicySpec {
    /// 0-1000; lower is evaluated first.
    pub priority: i64,
    pub subject: Subject,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ingress: Vec<AdminIngressRule>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<AdminEgressRule>,
}

/// The cluster-wide default policy, evaluated after NetworkPolicy. A singleton named `default`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    derive = "PartialEq",
    group = "policy.networking.k8s.io",
    version = "v1alpha1",
    kind = "BaselineAdminNetworkPolicy",
    plural = "baselineadminnetworkpolicies",
    shortname = "banp"
)]
#[serde(rename_all = "camelCase")]
pub struct BaselineAdminNetworkPolicySpec {
    pub subject: Subject,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ingress: Vec<AdminIngressRule>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<AdminEgressRule>,
}

/// The pods a policy applies to. Exactly one field must be set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    /// Every pod of the selected namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<NamespacedPod>,
}

/// Pods matching `podSelector` in namespaces matching `namespaceSelector`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespacedPod {
    #[serde(default)]
    pub namespace_selector: LabelSelector,
    #[serde(default)]
    pub pod_selector: LabelSelector,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminIngressRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Allow, Deny or Pass (Allow or Deny in a BaselineAdminNetworkPolicy).
    pub action: String,
    #[serde(default)]
    pub from: Vec<IngressPeer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<AdminPort>>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminEgressRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Allow, Deny or Pass (Allow or Deny in a BaselineAdminNetworkPolicy).
    pub action: String,
    #[serde(default)]
    pub to: Vec<EgressPeer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<AdminPort>>,
}

/// A source of ingress traffic. Exactly one field must be set; a peer with none set comes from a
/// newer API version and fails closed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IngressPeer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<NamespacedPod>,
}

/// A destination of egress traffic. Exactly one field must be set, as for [`IngressPeer`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EgressPeer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<NamespacedPod>,
    /// Nodes by label; their `status.addresses`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<LabelSelector>,
    /// CIDRs. They match pod and node addresses too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networks: Option<Vec<String>>,
    /// FQDN peers: not supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_names: Option<Vec<String>>,
}

/// One port clause. Exactly one field must be set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminPort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_number: Option<PortNumber>,
    /// A container port name of the destination pod; its protocol is the container port's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub named_port: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_range: Option<PortRange>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PortNumber {
    /// TCP (the default), UDP or SCTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    pub port: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PortRange {
    /// TCP (the default), UDP or SCTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    pub start: i64,
    pub end: i64,
}
