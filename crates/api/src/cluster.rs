//! Pods, namespaces and nodes into engine identities.
//!
//! [`crate::Object::from_value`] checks the fields used here (addresses, container ports), so
//! these functions can skip what they cannot use without reporting it again.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Namespace;

use crate::node::{Node, NODE_ADDRESS_TYPES};
use crate::pod::Pod;
use netpol_engine::{
    Identity, Labels, NamedPort, NodeInfo, PodInfo, SharedLabels, NAMESPACE_NAME_LABEL,
};

use crate::error::FieldPath;
use crate::object::DEFAULT_NAMESPACE;
use crate::translate::ports::k8s_protocol;

/// Pod phases after which the pod's address may already belong to another pod.
const TERMINAL_PHASES: [&str; 2] = ["Succeeded", "Failed"];

/// A namespace's labels, always including `kubernetes.io/metadata.name: <name>`, which the API
/// server sets on every namespace.
pub fn namespace_labels(namespace: &Namespace) -> Labels {
    let name = namespace.metadata.name.as_deref().unwrap_or_default();
    let mut labels = Labels::from(namespace.metadata.labels.clone().unwrap_or_default());
    labels.insert(NAMESPACE_NAME_LABEL.to_owned(), name.to_owned());
    labels
}

/// The labels of a namespace known only by name (its Namespace object not seen yet).
pub fn namespace_name_labels(name: &str) -> Labels {
    Labels::from([(NAMESPACE_NAME_LABEL.to_owned(), name.to_owned())])
}

/// The pod as policies see it, with its namespace's labels. The namespace's set is shared
/// when it carries the pod's namespace name, as the caller's sets do.
pub fn pod_info(pod: &Pod, namespace_labels: &SharedLabels) -> PodInfo {
    let namespace = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
    // Whatever the caller knew about the namespace, its name label is the pod's namespace.
    let namespace_labels = if namespace_labels.get(NAMESPACE_NAME_LABEL) == Some(&namespace) {
        namespace_labels.clone()
    } else {
        let mut labels = Labels::clone(namespace_labels);
        labels.insert(NAMESPACE_NAME_LABEL.to_owned(), namespace.clone());
        labels.into()
    };
    let spec = pod.spec.as_ref();
    PodInfo {
        namespace,
        name: pod.metadata.name.clone().unwrap_or_default(),
        labels: Labels::from(pod.metadata.labels.clone().unwrap_or_default()).into(),
        namespace_labels,
        node: spec.and_then(|s| s.node_name.clone()),
        ports: named_ports(pod),
    }
}

/// One identity per address of the pod (`status.podIPs`, else `status.podIP`). Pods without an
/// address, host-network pods (their address is the node's) and finished pods have none.
pub fn pod_identities(pod: &Pod, namespace_labels: &SharedLabels) -> Vec<Identity> {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    if spec.and_then(|s| s.host_network).unwrap_or(false)
        || status
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| TERMINAL_PHASES.contains(&p))
    {
        return Vec::new();
    }
    let info = pod_info(pod, namespace_labels);
    pod_addresses(pod)
        .into_iter()
        .map(|ip| Identity::pod(info.clone(), ip))
        .collect()
}

/// One identity per `InternalIP` and `ExternalIP` address of the node.
pub fn node_identities(node: &Node) -> Vec<Identity> {
    let info = NodeInfo {
        name: node.metadata.name.clone().unwrap_or_default(),
        labels: Labels::from(node.metadata.labels.clone().unwrap_or_default()).into(),
    };
    let mut addresses: Vec<IpAddr> = Vec::new();
    let node_addresses = node.status.as_ref().and_then(|s| s.addresses.as_ref());
    for address in node_addresses.into_iter().flatten() {
        if NODE_ADDRESS_TYPES.contains(&address.type_.as_str()) {
            if let Ok(ip) = address.address.parse::<IpAddr>() {
                if !addresses.contains(&ip) {
                    addresses.push(ip);
                }
            }
        }
    }
    addresses
        .into_iter()
        .map(|ip| Identity::node(info.clone(), ip))
        .collect()
}

fn pod_addresses(pod: &Pod) -> Vec<IpAddr> {
    let Some(status) = pod.status.as_ref() else {
        return Vec::new();
    };
    let listed = status.pod_ips.iter().flatten().map(|p| p.ip.as_str());
    let texts: Vec<&str> = if status.pod_ips.as_ref().is_some_and(|l| !l.is_empty()) {
        listed.collect()
    } else {
        status.pod_ip.as_deref().into_iter().collect()
    };
    let mut addresses = Vec::new();
    for ip in texts.into_iter().filter_map(|t| t.parse::<IpAddr>().ok()) {
        if !addresses.contains(&ip) {
            addresses.push(ip);
        }
    }
    addresses
}

/// The pod's named container ports; a port's protocol defaults to TCP.
fn named_ports(pod: &Pod) -> Vec<NamedPort> {
    let containers = pod.spec.iter().flat_map(|s| s.containers.iter());
    let ports = containers.flat_map(|c| c.ports.iter().flatten());
    ports
        .filter_map(|p| {
            let name = p.name.clone()?;
            let protocol = k8s_protocol(p.protocol.as_deref(), &FieldPath::default()).ok()?;
            let port = u16::try_from(p.container_port).ok()?;
            Some(NamedPort {
                name,
                protocol,
                port,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::Object;
    use netpol_engine::{IdentityKind, Protocol};
    use serde_json::json;

    fn pod(value: serde_json::Value) -> Pod {
        match Object::from_value(value).unwrap() {
            Object::Pod(p) => p,
            other => panic!("not a pod: {other:?}"),
        }
    }

    fn web_pod(status: serde_json::Value) -> serde_json::Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "a", "namespace": "x", "labels": {"pod": "a"}},
            "spec": {
                "nodeName": "node-1",
                "containers": [{
                    "name": "c",
                    "ports": [
                        {"name": "http", "containerPort": 8080},
                        {"name": "dns", "containerPort": 53, "protocol": "UDP"},
                        {"containerPort": 9000}
                    ]
                }]
            },
            "status": status
        })
    }

    #[test]
    fn pods_get_one_identity_per_address_with_named_ports() {
        let p = pod(web_pod(json!({
            "phase": "Running",
            "podIP": "10.1.0.11",
            "podIPs": [{"ip": "10.1.0.11"}, {"ip": "fd00::11"}]
        })));
        let ns_labels = Labels::from([("ns".to_string(), "x".to_string())]);
        let ids = pod_identities(&p, &ns_labels.into());
        assert_eq!(ids.len(), 2);
        assert_eq!(ids[0].prefix, "10.1.0.11/32".parse().unwrap());
        assert_eq!(ids[1].prefix, "fd00::11/128".parse().unwrap());
        let info = ids[0].as_pod().unwrap();
        assert_eq!(info.namespace, "x");
        assert_eq!(info.node.as_deref(), Some("node-1"));
        assert_eq!(info.namespace_labels.get("ns").unwrap(), "x");
        assert_eq!(
            info.namespace_labels.get(NAMESPACE_NAME_LABEL).unwrap(),
            "x"
        );
        assert_eq!(
            info.ports,
            vec![
                NamedPort {
                    name: "http".into(),
                    protocol: Protocol::Tcp,
                    port: 8080
                },
                NamedPort {
                    name: "dns".into(),
                    protocol: Protocol::Udp,
                    port: 53
                },
            ]
        );
    }

    #[test]
    fn pod_ip_is_used_when_pod_ips_is_absent() {
        let p = pod(web_pod(json!({"podIP": "10.1.0.12"})));
        let ids = pod_identities(&p, &Default::default());
        assert_eq!(ids.len(), 1);
        assert_eq!(ids[0].prefix, "10.1.0.12/32".parse().unwrap());
    }

    #[test]
    fn pods_without_address_host_network_or_finished_have_no_identity() {
        assert!(pod_identities(&pod(web_pod(json!({}))), &Default::default()).is_empty());
        let finished = pod(web_pod(json!({"phase": "Succeeded", "podIP": "10.1.0.13"})));
        assert!(pod_identities(&finished, &Default::default()).is_empty());
        let mut host = web_pod(json!({"podIP": "10.0.0.1"}));
        host["spec"]["hostNetwork"] = json!(true);
        assert!(pod_identities(&pod(host), &Default::default()).is_empty());
    }

    #[test]
    fn nodes_use_internal_and_external_addresses() {
        let node = match Object::from_value(json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "node-1", "labels": {"zone": "a"}},
            "status": {"addresses": [
                {"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "ExternalIP", "address": "203.0.113.1"},
                {"type": "Hostname", "address": "node-1"},
                {"type": "InternalIP", "address": "10.0.0.1"}
            ]}
        }))
        .unwrap()
        {
            Object::Node(n) => n,
            other => panic!("not a node: {other:?}"),
        };
        let ids = node_identities(&node);
        let prefixes: Vec<String> = ids.iter().map(|i| i.prefix.to_string()).collect();
        assert_eq!(prefixes, ["10.0.0.1/32", "203.0.113.1/32"]);
        assert!(
            matches!(&ids[0].kind, IdentityKind::Node(n) if n.name == "node-1"
            && n.labels.get("zone").map(String::as_str) == Some("a"))
        );
    }

    #[test]
    fn namespace_labels_include_the_name_label() {
        let ns: Namespace = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "x", "labels": {"ns": "x"}}
        }))
        .unwrap();
        let labels = namespace_labels(&ns);
        assert_eq!(labels.get("ns").unwrap(), "x");
        assert_eq!(labels.get(NAMESPACE_NAME_LABEL).unwrap(), "x");
        assert_eq!(
            namespace_name_labels("y")
                .get(NAMESPACE_NAME_LABEL)
                .unwrap(),
            "y"
        );
    }
}
