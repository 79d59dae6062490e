//! Hand-written custom resource types for the policy APIs netpol reads.
//!
//! Enumerations whose values netpol must check (actions, tiers, protocols, entities, modes) are
//! kept as strings, so that an unknown value reaches translation and is reported with the object
//! and the field it is in, rather than failing deserialization of the whole object. Fields netpol
//! deliberately does not implement are modelled as raw JSON so that their presence can be
//! rejected by name instead of being silently dropped.

pub mod admin;
pub mod cilium;
pub mod cluster_network_policy;
pub mod endpoint_slice;
pub mod release;

pub use admin::{
    AdminNetworkPolicy, AdminNetworkPolicySpec, BaselineAdminNetworkPolicy,
    BaselineAdminNetworkPolicySpec,
};
pub use cilium::{CiliumClusterwideNetworkPolicy, CiliumNetworkPolicy};
pub use cluster_network_policy::{ClusterNetworkPolicy, ClusterNetworkPolicySpec};
pub use endpoint_slice::{NetpolEndpointSlice, NetpolEndpointSliceSpec, SliceEndpoint, SlicePort};

/// Schema of a field kept as raw JSON (a feature netpol rejects by name): any value, as a
/// structural schema needs to say explicitly.
fn preserve_unknown_fields(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "nullable": true, "x-kubernetes-preserve-unknown-fields": true })
}

/// Schema of a field that is a number or a string.
fn int_or_string(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "nullable": true, "x-kubernetes-int-or-string": true })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn every_kind_has_a_crd() {
        let crds = [
            AdminNetworkPolicy::crd(),
            BaselineAdminNetworkPolicy::crd(),
            ClusterNetworkPolicy::crd(),
            CiliumNetworkPolicy::crd(),
            CiliumClusterwideNetworkPolicy::crd(),
        ];
        let names: Vec<String> = crds
            .iter()
            .map(|c| c.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(
            names,
            [
                "adminnetworkpolicies.policy.networking.k8s.io",
                "baselineadminnetworkpolicies.policy.networking.k8s.io",
                "clusternetworkpolicies.policy.networking.k8s.io",
                "ciliumnetworkpolicies.cilium.io",
                "ciliumclusterwidenetworkpolicies.cilium.io",
            ]
        );
        assert_eq!(crds[3].spec.scope, "Namespaced");
        assert_eq!(crds[4].spec.scope, "Cluster");
        // The Cilium kinds keep their rules at the root of the object.
        let schema = serde_json::to_value(&crds[3].spec.versions[0].schema).unwrap();
        let root = &schema["openAPIV3Schema"]["properties"];
        assert!(root.get("specs").is_some(), "{root}");
        let rule = &root["spec"]["properties"];
        assert!(rule.get("endpointSelector").is_some());
        // Raw JSON fields and the int-or-string port keep the schema structural.
        let egress = &rule["egress"]["items"]["properties"];
        assert_eq!(
            egress["toFQDNs"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
        let port =
            &egress["toPorts"]["items"]["properties"]["ports"]["items"]["properties"]["port"];
        assert_eq!(port["x-kubernetes-int-or-string"], true);
    }
}
