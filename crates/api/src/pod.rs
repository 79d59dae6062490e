//! A Pod as netpol reads it.
//!
//! `k8s_openapi`'s `Pod` is 2 KB before any field is set and each container another 2 KB; a
//! node agent that keeps 150,000 of them spends gigabytes on fields it never reads. This type has
//! the same names and wire format for the fields identities are built from (name, labels, node,
//! host network, container ports, phase, addresses), so a watch or a file decodes straight into
//! it and every other field is skipped by the parser. It is a Kubernetes resource in its own
//! right, so `kube`'s `Api<Pod>` lists and watches it directly.

use k8s_openapi::api::core::v1::{ContainerPort, PodIP};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct Pod {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PodStatus>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    /// Required by the API server; scenario files may leave it out (see `object.rs`).
    pub containers: Vec<Container>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct Container {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<ContainerPort>>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, rename = "podIP", skip_serializing_if = "Option::is_none")]
    pub pod_ip: Option<String>,
    #[serde(default, rename = "podIPs", skip_serializing_if = "Option::is_none")]
    pub pod_ips: Option<Vec<PodIP>>,
}

impl k8s_openapi::Resource for Pod {
    const API_VERSION: &'static str = "v1";
    const GROUP: &'static str = "";
    const KIND: &'static str = "Pod";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "pods";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::ListableResource for Pod {
    const LIST_KIND: &'static str = "PodList";
}

impl k8s_openapi::Metadata for Pod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_api_servers_json_and_skips_the_rest() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "shop", "labels": {"app": "web"}},
            "spec": {
                "nodeName": "node-1", "hostNetwork": false, "restartPolicy": "Always",
                "containers": [{"name": "main", "image": "web:1",
                                "ports": [{"name": "http", "containerPort": 8080}]}]
            },
            "status": {"phase": "Running", "podIP": "10.0.0.5",
                       "podIPs": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}], "qosClass": "Burstable"}
        }))
        .unwrap();
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("node-1"));
        assert_eq!(
            spec.containers[0].ports.as_ref().unwrap()[0].container_port,
            8080
        );
        let status = pod.status.as_ref().unwrap();
        assert_eq!(status.pod_ip.as_deref(), Some("10.0.0.5"));
        assert_eq!(status.pod_ips.as_ref().unwrap()[1].ip, "fd00::5");
        assert!(std::mem::size_of::<Pod>() < 1024);
    }
}
