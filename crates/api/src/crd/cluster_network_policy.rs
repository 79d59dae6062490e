//! ClusterNetworkPolicy (policy.networking.k8s.io/v1alpha2): the admin and baseline tiers in one
//! kind. Subjects and peers are shaped as in v1alpha1.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::admin::{EgressPeer, IngressPeer, Subject};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    derive = "PartialEq",
    group = "policy.networking.k8s.io",
    version = "v1alpha2",
    kind = "ClusterNetworkPolicy",
    plural = "clusternetworkpolicies",
    shortname = "cnp"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetworkPolicySpec {
    /// Admin or Baseline.
    pub tier: String,
    /// 0-1000; lower is evaluated first within the tier.
    pub priority: i64,
    pub subject: Subject,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ingress: Vec<ClusterIngressRule>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<ClusterEgressRule>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterIngressRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Accept, Deny or Pass.
    pub action: String,
    #[serde(default)]
    pub from: Vec<IngressPeer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocols: Option<Vec<ClusterProtocol>>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterEgressRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Accept, Deny or Pass.
    pub action: String,
    #[serde(default)]
    pub to: Vec<EgressPeer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocols: Option<Vec<ClusterProtocol>>,
}

/// One protocol clause. Exactly one field must be set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProtocol {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<ProtocolPorts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<ProtocolPorts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sctp: Option<ProtocolPorts>,
    /// A container port name of the destination pod, any protocol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_named_port: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProtocolPorts {
    /// Absent: every port of the protocol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_port: Option<DestinationPort>,
}

/// Exactly one of `number` and `range`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DestinationPort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<DestinationPortRange>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DestinationPortRange {
    pub start: i64,
    pub end: i64,
}
