//! The ClusterNetworkPolicy CRDs of network-policy-api v0.2.0, as released
//! (`config/crd/{standard,experimental}/policy.networking.k8s.io_clusternetworkpolicies.yaml` at
//! tag v0.2.0, Apache-2.0, vendored unchanged).
//!
//! `netpol crds` prints them as they are, so that a cluster given netpol's CRD holds the
//! release's schema and validations (list limits, CEL rules) and nothing else; the tests below
//! hold netpol's own types to the same fields.

use crate::translate::CrdChannel;

const STANDARD: &str = include_str!("v0_2_0/standard.yaml");
const EXPERIMENTAL: &str = include_str!("v0_2_0/experimental.yaml");

/// The release the vendored CRDs come from.
pub const RELEASE: &str = "v0.2.0";

/// The released CRD of one channel, as YAML.
pub fn cluster_network_policy_crd(channel: CrdChannel) -> &'static str {
    match channel {
        CrdChannel::Standard => STANDARD,
        CrdChannel::Experimental => EXPERIMENTAL,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use kube::CustomResourceExt;
    use serde_json::Value;

    use super::*;
    use crate::crd::ClusterNetworkPolicy;
    use crate::translate::CHANNEL_ANNOTATION;

    fn parse(yaml: &str) -> Value {
        serde_saphyr::from_str(yaml).expect("vendored CRD parses")
    }

    /// `spec.ingress[].from[].pods.podSelector`-style paths of every field under `spec`.
    fn field_paths(schema: &Value, prefix: &str, out: &mut BTreeSet<String>) {
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (name, sub) in props {
                let path = format!("{prefix}.{name}");
                out.insert(path.clone());
                field_paths(sub, &path, out);
            }
        }
        if let Some(items) = schema.get("items") {
            field_paths(items, &format!("{prefix}[]"), out);
        }
    }

    fn spec_fields(crd: &Value) -> BTreeSet<String> {
        let version = &crd["spec"]["versions"][0];
        assert_eq!(version["name"], "v1alpha2");
        let mut out = BTreeSet::new();
        field_paths(
            &version["schema"]["openAPIV3Schema"]["properties"]["spec"],
            "spec",
            &mut out,
        );
        out
    }

    #[test]
    fn each_channel_is_what_its_annotation_says() {
        for channel in CrdChannel::ALL {
            let crd = parse(cluster_network_policy_crd(channel));
            let annotations = &crd["metadata"]["annotations"];
            assert_eq!(annotations[CHANNEL_ANNOTATION], channel.name());
            assert_eq!(
                annotations["policy.networking.k8s.io/bundle-version"],
                RELEASE
            );
            assert_eq!(
                crd["metadata"]["name"],
                "clusternetworkpolicies.policy.networking.k8s.io"
            );
        }
    }

    #[test]
    fn netpols_types_read_every_field_of_the_experimental_crd_and_no_other() {
        let upstream = spec_fields(&parse(cluster_network_policy_crd(CrdChannel::Experimental)));
        // The walk reaches the leaves (no `$ref` stops it).
        assert!(upstream.contains("spec.egress[].protocols[].udp.destinationPort.range.end"));
        assert!(
            upstream.contains("spec.ingress[].from[].pods.podSelector.matchExpressions[].values")
        );
        let generated = serde_json::to_value(ClusterNetworkPolicy::crd()).unwrap();
        let ours = spec_fields(&generated);
        let missing: Vec<&String> = upstream.difference(&ours).collect();
        let extra: Vec<&String> = ours.difference(&upstream).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "fields only upstream: {missing:?}\nfields only netpol's: {extra:?}"
        );
    }

    #[test]
    fn the_standard_crd_is_the_experimental_one_without_nodes_and_domain_names() {
        let standard = spec_fields(&parse(cluster_network_policy_crd(CrdChannel::Standard)));
        let experimental =
            spec_fields(&parse(cluster_network_policy_crd(CrdChannel::Experimental)));
        let only_experimental: BTreeSet<&str> = experimental
            .difference(&standard)
            .map(String::as_str)
            .filter(|p| !p.starts_with("spec.egress[].to[].nodes."))
            .collect();
        assert_eq!(
            only_experimental,
            BTreeSet::from(["spec.egress[].to[].domainNames", "spec.egress[].to[].nodes"])
        );
        assert!(standard.is_subset(&experimental));
        // destinationNamedPort is in both channels of the release.
        assert!(standard.contains("spec.ingress[].protocols[].destinationNamedPort"));
        assert!(standard.contains("spec.egress[].protocols[].destinationNamedPort"));
    }
}
