//! Dropping the fields of an object that netpol never reads, before it is deserialized.
//!
//! An object from `kubectl get -o yaml` or a watch carries managed fields and annotations (the
//! last-applied annotation repeats the whole object): kilobytes that no part of netpol reads,
//! kept for every object of a large cluster. Pods and nodes need no more than that:
//! [`crate::Pod`] and [`crate::Node`] have only the fields netpol reads.

use serde_json::{Map, Value};

use crate::annotations::READ_ANNOTATIONS;

/// Metadata that can be large (`kubectl.kubernetes.io/last-applied-configuration` repeats the
/// whole object) and that nothing in netpol reads.
const UNREAD_METADATA: [&str; 1] = ["managedFields"];

/// Removes from `object` the metadata that netpol does not read. A metadata field of the wrong
/// type is left for deserialization to report.
pub(crate) fn drop_unread_metadata(object: &mut Map<String, Value>) {
    if let Some(Value::Object(metadata)) = object.get_mut("metadata") {
        for field in UNREAD_METADATA {
            metadata.remove(field);
        }
        if let Some(Value::Object(annotations)) = metadata.get_mut("annotations") {
            annotations.retain(|key, _| READ_ANNOTATIONS.contains(&key.as_str()));
            if annotations.is_empty() {
                metadata.remove("annotations");
            }
        } else {
            metadata.remove("annotations");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::cluster::{pod_identities, pod_info};
    use crate::object::Object;

    #[test]
    fn a_full_pod_keeps_what_identities_are_built_from() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "web-1", "namespace": "shop", "labels": {"app": "web"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
                "managedFields": [{"manager": "kubectl"}], "uid": "u-1"
            },
            "spec": {
                "nodeName": "node-1", "serviceAccountName": "web",
                "volumes": [{"name": "data", "emptyDir": {}}],
                "containers": [{
                    "name": "main", "image": "web:1", "env": [{"name": "A", "value": "b"}],
                    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
                }]
            },
            "status": {
                "phase": "Running", "podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}],
                "conditions": [{"type": "Ready", "status": "True"}], "hostIP": "192.168.1.1"
            }
        });
        let Object::Pod(pod) = Object::from_value(pod).unwrap() else {
            panic!("not a pod")
        };
        assert_eq!(pod.metadata.annotations, None);
        assert_eq!(pod.metadata.managed_fields, None);
        assert_eq!(pod.metadata.uid.as_deref(), Some("u-1"));

        let namespace = crate::cluster::namespace_name_labels("shop").into();
        let info = pod_info(&pod, &namespace);
        assert_eq!(info.node.as_deref(), Some("node-1"));
        assert_eq!(info.labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(info.ports.len(), 1);
        assert_eq!(info.ports[0].port, 8080);
        assert_eq!(pod_identities(&pod, &namespace).len(), 1);
    }

    #[test]
    fn a_node_keeps_its_addresses_and_labels() {
        let node = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "spec": {"podCIDR": "10.0.0.0/24"},
            "status": {
                "addresses": [{"type": "InternalIP", "address": "192.168.1.1"}],
                "images": [{"names": ["big"], "sizeBytes": 1}]
            }
        });
        let Object::Node(node) = Object::from_value(node).unwrap() else {
            panic!("not a node")
        };
        let status = node.status.as_ref().unwrap();
        assert_eq!(status.addresses.as_ref().unwrap().len(), 1);
        assert_eq!(crate::cluster::node_identities(&node).len(), 1);
    }

    #[test]
    fn a_field_of_the_wrong_type_is_still_reported() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "x"},
            "spec": {"containers": [{"name": "c", "ports": [{"containerPort": "http"}]}]}
        });
        let err = Object::from_value(pod).unwrap_err();
        assert_eq!(err.field, "spec.containers[0].ports[0].containerPort");
    }
}
