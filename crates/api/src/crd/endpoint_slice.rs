//! NetpolEndpointSlice (netpol.io/v1alpha1): netpol's own compact record of the cluster's pods,
//! written by `netpol controller` and read by agents in slice mode instead of every Pod.
//!
//! A slice holds up to [`MAX_ENDPOINTS`] endpoints, each what a remote agent needs of a pod to
//! build its identities (name, namespace, addresses, node, named ports, creation time) and a
//! reference to its label set. Label sets are published once per slice: the replicas of a
//! workload usually share a slice and one set.
//!
//! The kind is **cluster-scoped**: an endpoint claims an address for a namespace's pod, so writing
//! one must take cluster-level rights (a ClusterRole the controller alone holds). A namespaced
//! slice could be written by anyone allowed to write custom resources in their own namespace, and
//! could then claim another namespace's address. Cluster scope also lets pods of many small
//! namespaces share one slice, so a list stays a few large objects.

use std::collections::BTreeMap;
use std::net::IpAddr;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{FieldPath, ObjectRef, ValidationError};
use crate::fields::deserialize;
use crate::label_syntax;
use crate::translate::ports::k8s_protocol;

/// The most endpoints one slice holds: about 300 KB of JSON, well under etcd's 1.5 MiB.
pub const MAX_ENDPOINTS: usize = 1000;

/// The kind's name, as errors name it.
pub const KIND: &str = "NetpolEndpointSlice";

/// A batch of pod endpoints and the label sets they reference.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    derive = "PartialEq",
    derive = "Default",
    group = "netpol.io",
    version = "v1alpha1",
    kind = "NetpolEndpointSlice",
    plural = "netpolendpointslices",
    shortname = "neps"
)]
#[serde(rename_all = "camelCase")]
pub struct NetpolEndpointSliceSpec {
    /// Distinct pod label sets; an endpoint names one by its index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub label_sets: Vec<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<SliceEndpoint>,
}

/// One pod, as remote agents see it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SliceEndpoint {
    pub namespace: String,
    pub name: String,
    /// The pod's addresses (`status.podIPs`), each a bare IPv4 or IPv6 address.
    pub addresses: Vec<String>,
    /// The node the pod runs on (`spec.nodeName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Index into `labelSets`.
    pub labels: u32,
    /// The pod's named container ports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<SlicePort>,
    /// `metadata.creationTimestamp` in seconds since the epoch: which of two pods listing one
    /// address owns it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<i64>,
}

/// A named container port.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SlicePort {
    pub name: String,
    /// TCP, UDP or SCTP.
    pub protocol: String,
    pub port: u16,
}

impl SliceEndpoint {
    /// The endpoint's key, as the engine keys pods: `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl NetpolEndpointSlice {
    /// Reads one slice from the API server's JSON and checks every field the agent uses: an
    /// error names the slice and the field (`spec.endpoints[3].addresses[0]`).
    pub fn from_value(value: Value) -> Result<NetpolEndpointSlice, ValidationError> {
        let name = value["metadata"]["name"].as_str().unwrap_or_default();
        let object = ObjectRef::new(KIND, None, name);
        let slice: NetpolEndpointSlice = deserialize(value, &object, None)?;
        slice.validate().map_err(|e| e.in_object(&object))?;
        Ok(slice)
    }

    /// The slice's reference, for errors.
    pub fn object_ref(&self) -> ObjectRef {
        ObjectRef::new(
            KIND,
            None,
            self.metadata.name.as_deref().unwrap_or_default(),
        )
    }

    fn validate(&self) -> Result<(), crate::error::FieldError> {
        let spec = FieldPath::root("spec");
        let endpoints = spec.field("endpoints");
        if self.spec.endpoints.len() > MAX_ENDPOINTS {
            return Err(endpoints.error(format!(
                "{} endpoints, more than the {MAX_ENDPOINTS} a slice holds",
                self.spec.endpoints.len()
            )));
        }
        for (i, set) in self.spec.label_sets.iter().enumerate() {
            label_syntax::check_labels(Some(set), &spec.field("labelSets").index(i))?;
        }
        for (i, endpoint) in self.spec.endpoints.iter().enumerate() {
            let path = endpoints.index(i);
            if endpoint.name.is_empty() {
                return Err(path.field("name").error("required".to_owned()));
            }
            if endpoint.namespace.is_empty() {
                return Err(path.field("namespace").error("required"));
            }
            for (j, address) in endpoint.addresses.iter().enumerate() {
                if address.parse::<IpAddr>().is_err() {
                    return Err(path
                        .field("addresses")
                        .index(j)
                        .error(format!("{address:?} is not an IP address")));
                }
            }
            if endpoint.labels as usize >= self.spec.label_sets.len() {
                return Err(path.field("labels").error(format!(
                    "label set {} does not exist ({} published)",
                    endpoint.labels,
                    self.spec.label_sets.len()
                )));
            }
            for (j, port) in endpoint.ports.iter().enumerate() {
                let port_path = path.field("ports").index(j);
                k8s_protocol(Some(&port.protocol), &port_path.field("protocol"))?;
                if port.port == 0 {
                    return Err(port_path.field("port").error("must be 1-65535"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;
    use serde_json::json;

    fn slice(endpoint: Value) -> Value {
        json!({
            "apiVersion": "netpol.io/v1alpha1", "kind": "NetpolEndpointSlice",
            "metadata": {"name": "eps-00001"},
            "spec": {"labelSets": [{"app": "web"}], "endpoints": [endpoint]}
        })
    }

    fn web() -> Value {
        json!({"namespace": "shop", "name": "web-1", "addresses": ["10.0.0.5", "fd00::5"],
               "node": "node-1", "labels": 0,
               "ports": [{"name": "http", "protocol": "TCP", "port": 8080}], "created": 1700000000})
    }

    #[test]
    fn reads_a_slice() {
        let read = NetpolEndpointSlice::from_value(slice(web())).unwrap();
        let endpoint = &read.spec.endpoints[0];
        assert_eq!(endpoint.key(), "shop/web-1");
        assert_eq!(endpoint.addresses, ["10.0.0.5", "fd00::5"]);
        assert_eq!(read.spec.label_sets[endpoint.labels as usize]["app"], "web");
    }

    #[test]
    fn errors_name_the_slice_and_the_field() {
        let cases = [
            (
                "addresses",
                json!(["10.0.0.300"]),
                "spec.endpoints[0].addresses[0]",
            ),
            ("labels", json!(1), "spec.endpoints[0].labels"),
            (
                "ports",
                json!([{"name": "h", "protocol": "ICMP", "port": 1}]),
                "spec.endpoints[0].ports[0].protocol",
            ),
            (
                "ports",
                json!([{"name": "h", "protocol": "TCP", "port": 70000}]),
                "spec.endpoints[0].ports[0].port",
            ),
            ("name", json!(""), "spec.endpoints[0].name"),
        ];
        for (field, value, path) in cases {
            let mut endpoint = web();
            endpoint[field] = value;
            let error = NetpolEndpointSlice::from_value(slice(endpoint)).unwrap_err();
            assert_eq!(error.object.to_string(), "NetpolEndpointSlice eps-00001");
            assert_eq!(error.field, path, "{error}");
        }
        let mut bad_label = slice(web());
        bad_label["spec"]["labelSets"][0] = json!({"app": "not valid!"});
        let error = NetpolEndpointSlice::from_value(bad_label).unwrap_err();
        assert!(error.field.starts_with("spec.labelSets[0]"), "{error}");
    }

    #[test]
    fn the_crd_is_cluster_scoped() {
        let crd = NetpolEndpointSlice::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("netpolendpointslices.netpol.io")
        );
        assert_eq!(crd.spec.scope, "Cluster");
        let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
        let endpoint = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["endpoints"]
            ["items"]["properties"];
        assert!(endpoint.get("addresses").is_some(), "{endpoint}");
    }
}
