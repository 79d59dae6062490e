//! Pods as NetpolEndpointSlice endpoints and back.
//!
//! The controller turns each pod into an [`Endpoint`] ([`endpoint_of`]); an agent in slice mode
//! turns each endpoint back into a [`Pod`] ([`pod_of`]) holding exactly the fields identities
//! are built from, and hands it to the same index as a watched pod. Both directions go through
//! [`crate::cluster::pod_identities`], so a pod and the pod read back from its endpoint give the
//! same identities (tested here), and the engine sees the same input in either mode.
//!
//! Pods without an identity (no address yet, host network, finished) are not published: a
//! remote agent has nothing to match them by, as in direct mode where they give no identity.

pub mod placement;
pub mod plan;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerPort, PodIP};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use netpol_engine::SharedLabels;

use crate::cluster::pod_identities;
use crate::crd::{SliceEndpoint, SlicePort};
use crate::pod::{Container, Pod, PodSpec, PodStatus};

/// One pod as published, its labels in full (a slice stores them once per distinct set).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub endpoint: SliceEndpoint,
    pub labels: BTreeMap<String, String>,
}

/// The name of the one container of a pod read back from a slice: named ports are the pod's,
/// whichever container declared them.
const SLICE_CONTAINER: &str = "endpoint";

/// What remote agents need of `pod`, or `None` when it has no identity.
pub fn endpoint_of(pod: &Pod) -> Option<Endpoint> {
    let identities = pod_identities(pod, &SharedLabels::default());
    let info = identities.first()?.as_pod()?;
    let endpoint = SliceEndpoint {
        namespace: info.namespace.clone(),
        name: info.name.clone(),
        addresses: identities
            .iter()
            .map(|identity| identity.prefix.addr().to_string())
            .collect(),
        node: info.node.clone(),
        labels: 0,
        ports: info
            .ports
            .iter()
            .map(|p| SlicePort {
                name: p.name.clone(),
                protocol: p.protocol.to_string(),
                port: p.port,
            })
            .collect(),
        created: pod
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second()),
    };
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    Some(Endpoint { endpoint, labels })
}

/// The pod an endpoint describes, with `labels` (its label set), holding the fields identities
/// are built from. A creation time out of range is dropped (it only orders address claims).
pub fn pod_of(endpoint: &SliceEndpoint, labels: &BTreeMap<String, String>) -> Pod {
    let ports = endpoint
        .ports
        .iter()
        .map(|p| ContainerPort {
            name: Some(p.name.clone()),
            protocol: Some(p.protocol.clone()),
            container_port: i32::from(p.port),
            ..ContainerPort::default()
        })
        .collect::<Vec<_>>();
    let created = endpoint
        .created
        .and_then(|s| k8s_openapi::jiff::Timestamp::from_second(s).ok())
        .map(Time);
    Pod {
        metadata: ObjectMeta {
            namespace: Some(endpoint.namespace.clone()),
            name: Some(endpoint.name.clone()),
            labels: Some(labels.clone()),
            creation_timestamp: created,
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: endpoint.node.clone(),
            host_network: None,
            containers: vec![Container {
                name: SLICE_CONTAINER.to_owned(),
                ports: (!ports.is_empty()).then_some(ports),
            }],
        }),
        status: Some(PodStatus {
            phase: None,
            pod_ip: None,
            pod_ips: Some(
                endpoint
                    .addresses
                    .iter()
                    .map(|ip| PodIP { ip: ip.clone() })
                    .collect(),
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::pod_identities;
    use netpol_engine::Labels;
    use serde_json::json;

    fn pod(value: serde_json::Value) -> Pod {
        match crate::Object::from_value(value).unwrap() {
            crate::Object::Pod(p) => p,
            other => panic!("not a pod: {other:?}"),
        }
    }

    fn web(status: serde_json::Value) -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "shop", "labels": {"app": "web"},
                         "creationTimestamp": "2026-01-02T03:04:05Z"},
            "spec": {"nodeName": "node-2", "containers": [
                {"name": "a", "ports": [{"name": "http", "containerPort": 8080}, {"containerPort": 9}]},
                {"name": "b", "ports": [{"name": "dns", "containerPort": 53, "protocol": "UDP"}]}
            ]},
            "status": status
        })
    }

    #[test]
    fn a_pod_read_back_from_its_endpoint_has_the_same_identities() {
        let original = pod(web(json!({
            "phase": "Running", "podIP": "10.1.0.5",
            "podIPs": [{"ip": "10.1.0.5"}, {"ip": "fd00::5"}, {"ip": "10.1.0.5"}]
        })));
        let published = endpoint_of(&original).unwrap();
        assert_eq!(published.endpoint.addresses, ["10.1.0.5", "fd00::5"]);
        assert_eq!(
            published.endpoint.ports.len(),
            2,
            "unnamed ports are not published"
        );
        let read_back = pod_of(&published.endpoint, &published.labels);
        let namespace: SharedLabels = Labels::from([("team".to_owned(), "a".to_owned())]).into();
        assert_eq!(
            pod_identities(&read_back, &namespace),
            pod_identities(&original, &namespace)
        );
        assert_eq!(
            read_back.metadata.creation_timestamp,
            original.metadata.creation_timestamp
        );
    }

    #[test]
    fn pods_without_identity_are_not_published() {
        assert_eq!(endpoint_of(&pod(web(json!({})))), None);
        let finished = json!({"phase": "Failed", "podIP": "10.1.0.6"});
        assert_eq!(endpoint_of(&pod(web(finished))), None);
        let mut host = web(json!({"podIP": "10.0.0.2"}));
        host["spec"]["hostNetwork"] = json!(true);
        assert_eq!(endpoint_of(&pod(host)), None);
    }
}
