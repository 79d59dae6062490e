//! Pods as a real API server serves them: about 6 KB of JSON each, with `managedFields`, a full
//! container spec (env, resources, probes, mounts), tolerations and a status with conditions
//! and container statuses. What a policy reads of them (namespace, labels, node, addresses,
//! named ports, hostNetwork) is a small part: the rest is what a reader pays to skip.

use serde_json::{json, Value};

/// Pod `i` of a cluster of `nodes` nodes, in namespace `ns-(i % 50)`, labelled like a
/// Deployment's pod.
pub fn pod(i: usize, nodes: usize) -> Value {
    let namespace = format!("ns-{}", i % 50);
    let app = format!("app-{}", i % 200);
    let name = format!("{app}-7d9c5b8f6d-{i:05x}");
    let node = format!("node-{}", i % nodes.max(1));
    let ip = format!("10.{}.{}.{}", 64 + (i >> 16) % 64, (i >> 8) & 255, i & 255);
    let time = "2026-11-20T08:15:42Z";
    let fields = |manager: &str, subresource: Option<&str>| {
        let mut entry = json!({
            "manager": manager, "operation": "Update", "apiVersion": "v1", "time": time,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}, "f:tier": {}},
                    "f:ownerReferences": {".": {}, "k:{\"uid\":\"5f0c2a1e-3b7d-4c49-9a51-0d7e1b2c3f40\"}": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {".": {}, "f:env": {".": {}, "k:{\"name\":\"LOG_LEVEL\"}": {".": {}, "f:name": {}, "f:value": {}}},
                    "f:image": {}, "f:imagePullPolicy": {}, "f:livenessProbe": {".": {}, "f:httpGet": {".": {}, "f:path": {}, "f:port": {}, "f:scheme": {}}},
                    "f:name": {}, "f:ports": {".": {}, "k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:name": {}, "f:protocol": {}}},
                    "f:readinessProbe": {".": {}, "f:httpGet": {".": {}, "f:path": {}, "f:port": {}}}, "f:resources": {".": {}, "f:limits": {}, "f:requests": {}},
                    "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}}},
                    "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}},
            },
        });
        if let Some(subresource) = subresource {
            entry["subresource"] = json!(subresource);
        }
        entry
    };
    let probe = |path: &str| {
        json!({"httpGet": {"path": path, "port": "http", "scheme": "HTTP"}, "initialDelaySeconds": 5,
            "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
    };
    let condition = |kind: &str| json!({"type": kind, "status": "True", "lastProbeTime": null, "lastTransitionTime": time});
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "generateName": format!("{app}-7d9c5b8f6d-"), "namespace": namespace,
            "uid": format!("0b6f4c2e-{i:04x}-4d1a-8e2b-9c3d4e5f6a7b"), "creationTimestamp": time,
            "labels": {"app": app, "tier": if i.is_multiple_of(3) { "frontend" } else { "backend" }, "pod-template-hash": "7d9c5b8f6d"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": time, "prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-7d9c5b8f6d"),
                "uid": "5f0c2a1e-3b7d-4c49-9a51-0d7e1b2c3f40", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [fields("kube-controller-manager", None), fields("kubelet", Some("status"))],
        },
        "spec": {
            "volumes": [{"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
            "containers": [{
                "name": "main", "image": format!("registry.example.com/team/{app}:1.24.3"),
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}, {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
                "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}],
                "resources": {"limits": {"cpu": "500m", "memory": "512Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
                "volumeMounts": [{"name": "kube-api-access-x7k2p", "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "livenessProbe": probe("/healthz"), "readinessProbe": probe("/ready"),
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent",
                "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true, "capabilities": {"drop": ["ALL"]}},
            }],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default", "nodeName": node,
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}, "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {
            "phase": "Running",
            "conditions": [condition("PodReadyToStartContainers"), condition("Initialized"), condition("Ready"), condition("ContainersReady"), condition("PodScheduled")],
            "hostIP": "192.168.0.10", "hostIPs": [{"ip": "192.168.0.10"}], "podIP": ip, "podIPs": [{"ip": ip}], "startTime": time,
            "containerStatuses": [{"name": "main", "state": {"running": {"startedAt": time}}, "lastState": {}, "ready": true, "restartCount": 0,
                "image": format!("registry.example.com/team/{app}:1.24.3"),
                "imageID": "registry.example.com/team/app@sha256:3f1c9d2e8b7a6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d",
                "containerID": "containerd://9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b", "started": true,
                "volumeMounts": [{"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true, "recursiveReadOnly": "Disabled"}]}],
            "qosClass": "Burstable",
        },
    })
}

/// Fields a policy reads of a pod, which [`dress`] never adds: a pod without an address stays
/// without one, a container without named ports without them.
const READ_BY_POLICY: [&str; 9] = [
    "labels",
    "nodeName",
    "hostNetwork",
    "phase",
    "podIP",
    "podIPs",
    "hostIP",
    "hostIPs",
    "ports",
];

/// Dresses a lean pod (`netpol-dev synth`'s) as a real API server serves it: every field of
/// [`pod`] that it lacks is added (managedFields, annotations, the container spec for each of
/// its containers, tolerations, conditions, container statuses), and nothing a policy reads
/// ([`READ_BY_POLICY`]) is added or changed.
pub fn dress(lean: &mut Value) {
    let full = pod(0, 1);
    fill(lean, &full);
}

fn fill(target: &mut Value, source: &Value) {
    let (Value::Object(target), Value::Object(source)) = (target, source) else {
        return;
    };
    for (key, value) in source {
        if READ_BY_POLICY.contains(&key.as_str()) {
            continue;
        }
        match target.get_mut(key) {
            None => {
                target.insert(key.clone(), value.clone());
            }
            // Each of the pod's own containers gets the full container's other fields.
            Some(Value::Array(containers)) if key == "containers" => {
                for container in containers {
                    fill(container, &value[0]);
                }
            }
            Some(existing) => fill(existing, value),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_dressed_pod_is_about_six_kilobytes_and_reads_as_it_did() {
        let lean = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": "shop", "labels": {"app": "web"}},
            "spec": {"nodeName": "node-3", "containers": [
                {"name": "a", "ports": [{"name": "web", "containerPort": 80}]},
                {"name": "b"},
            ]},
            "status": {"phase": "Pending"},
        });
        let mut dressed = lean.clone();
        super::dress(&mut dressed);
        let size = dressed.to_string().len();
        assert!((4_500..9_000).contains(&size), "{size} bytes");
        assert!(dressed["metadata"]["managedFields"].is_array());
        assert_eq!(dressed["metadata"]["labels"], lean["metadata"]["labels"]);
        assert_eq!(dressed["spec"]["nodeName"], "node-3");
        assert_eq!(dressed["status"]["phase"], "Pending");
        assert!(dressed["status"].get("podIP").is_none(), "no address added");
        let containers = dressed["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers[0]["name"], "a");
        assert_eq!(
            containers[0]["ports"],
            lean["spec"]["containers"][0]["ports"]
        );
        assert!(containers[1].get("ports").is_none(), "no port added");
        assert!(containers[1]["livenessProbe"].is_object());
    }

    #[test]
    fn a_pod_is_about_six_kilobytes() {
        let size = super::pod(12345, 100).to_string().len();
        assert!((4_500..8_000).contains(&size), "{size} bytes");
    }
}
