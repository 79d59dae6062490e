//! Checks, when a Pod or Node is read, of the fields its identities are built from.
//!
//! [`crate::Object::from_value`] runs these checks, so a pod or node with an invalid address or
//! container port is reported once, naming the field, and never becomes an object. The identity
//! functions of `cluster.rs` can then skip what they cannot use without reporting it again.

use std::net::IpAddr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::error::{FieldError, FieldPath};
use crate::label_syntax;
use crate::node::{Node, NODE_ADDRESS_TYPES};
use crate::pod::Pod;
use crate::translate::ports::{k8s_protocol, named_port, port_number};

/// Checks a pod's labels, addresses and container ports.
pub(crate) fn check_pod(pod: &Pod) -> Result<(), FieldError> {
    check_metadata_labels(&pod.metadata)?;
    if let Some(spec) = &pod.spec {
        let containers = FieldPath::root("spec").field("containers");
        for (i, container) in spec.containers.iter().enumerate() {
            let ports = containers.index(i).field("ports");
            for (j, port) in container.ports.iter().flatten().enumerate() {
                let path = ports.index(j);
                port_number(port.container_port.into(), &path.field("containerPort"))?;
                k8s_protocol(port.protocol.as_deref(), &path.field("protocol"))?;
                if let Some(name) = &port.name {
                    named_port(name, &path.field("name"))?;
                }
            }
        }
    }
    if let Some(status) = &pod.status {
        let path = FieldPath::root("status");
        if let Some(ip) = &status.pod_ip {
            check_ip(ip, &path.field("podIP"))?;
        }
        for (i, ip) in status.pod_ips.iter().flatten().enumerate() {
            check_ip(&ip.ip, &path.field("podIPs").index(i).field("ip"))?;
        }
    }
    Ok(())
}

/// Checks the labels and addresses of a node that its identities are built from.
pub(crate) fn check_node(node: &Node) -> Result<(), FieldError> {
    check_metadata_labels(&node.metadata)?;
    let addresses = node.status.as_ref().and_then(|s| s.addresses.as_ref());
    let path = FieldPath::root("status").field("addresses");
    for (i, address) in addresses.into_iter().flatten().enumerate() {
        if NODE_ADDRESS_TYPES.contains(&address.type_.as_str()) {
            check_ip(&address.address, &path.index(i).field("address"))?;
        }
    }
    Ok(())
}

/// Checks an object's labels (a namespace's too: pods' identities carry them) as the API
/// server does.
pub(crate) fn check_metadata_labels(metadata: &ObjectMeta) -> Result<(), FieldError> {
    let path = FieldPath::root("metadata").field("labels");
    label_syntax::check_labels(metadata.labels.as_ref(), &path)
}

fn check_ip(text: &str, path: &FieldPath) -> Result<(), FieldError> {
    text.parse::<IpAddr>()
        .map(drop)
        .map_err(|_| path.error(format!("invalid IP address {text:?}")))
}

#[cfg(test)]
mod tests {
    use crate::object::Object;
    use serde_json::json;

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
    fn bad_addresses_and_ports_are_reported_with_their_field() {
        let err = Object::from_value(web_pod(json!({"podIP": "10.1.0.999"}))).unwrap_err();
        assert_eq!(err.field, "status.podIP");
        let err = Object::from_value(web_pod(json!({"podIPs": [{"ip": "x"}]}))).unwrap_err();
        assert_eq!(err.field, "status.podIPs[0].ip");
        let mut bad_port = web_pod(json!({}));
        bad_port["spec"]["containers"][0]["ports"][1]["containerPort"] = json!(0);
        let err = Object::from_value(bad_port).unwrap_err();
        assert_eq!(err.field, "spec.containers[0].ports[1].containerPort");
        let mut bad_protocol = web_pod(json!({}));
        bad_protocol["spec"]["containers"][0]["ports"][0]["protocol"] = json!("XYZ");
        let err = Object::from_value(bad_protocol).unwrap_err();
        assert_eq!(err.field, "spec.containers[0].ports[0].protocol");
        let err = Object::from_value(json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
            "status": {"addresses": [{"type": "InternalIP", "address": "nope"}]}
        }))
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Node n: status.addresses[0].address: invalid IP address \"nope\""
        );
    }
}
