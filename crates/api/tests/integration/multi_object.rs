//! A file of several objects, one malformed and one invalid: the others still load, translate
//! and decide flows through the engine's reference evaluator.

use netpol_api::cluster::{namespace_labels, node_identities, pod_identities};
use netpol_api::{parse_yaml, translate, Object, ObjectRef};
use netpol_engine::reference::{decide, DirectedFlow};
use netpol_engine::{Direction, Identity, Labels, PolicyEntry, Protocol, Verdict};

const FILE: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: x, labels: {ns: x}}
---
apiVersion: v1
kind: Namespace
metadata: {name: y, labels: {ns: y}}
---
apiVersion: v1
kind: Node
metadata: {name: node-1}
status: {addresses: [{type: InternalIP, address: 10.0.0.1}]}
---
- apiVersion: v1
  kind: Pod
  metadata: {name: a, namespace: x, labels: {pod: a}}
  spec:
    nodeName: node-1
    containers: [{name: c, ports: [{name: http, containerPort: 8080}]}]
  status: {podIP: 10.1.0.11}
- apiVersion: v1
  kind: Pod
  metadata: {name: b, namespace: y, labels: {pod: b}}
  spec: {nodeName: node-1, containers: [{name: c}]}
  status: {podIP: 10.1.1.12}
---
# Malformed: the priority is not a number. Reported when read.
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: broken}
spec: {priority: high, subject: {namespaces: {}}}
---
# Invalid: port 0. Reported when translated, and contributes nothing.
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: bad-port, namespace: x}
spec:
  podSelector: {}
  ingress: [{ports: [{port: 0}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: http-from-y, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress:
  - from: [{namespaceSelector: {matchLabels: {ns: y}}}]
    ports: [{port: http}]
---
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: no-egress-to-x, namespace: y}
spec:
  endpointSelector: {}
  egressDeny: [{toEndpoints: [{matchLabels: {"k8s:io.kubernetes.pod.namespace": x}}], toPorts: [{ports: [{port: "9090"}]}]}]
  egress: [{toEntities: [all]}]
"#;

#[test]
fn one_bad_object_does_not_stop_the_others() {
    let results = parse_yaml(FILE).expect("the YAML syntax is fine");
    assert_eq!(results.len(), 9);

    let read_errors: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(read_errors.len(), 1);
    assert_eq!(
        read_errors[0].object,
        ObjectRef::new("AdminNetworkPolicy", None, "broken")
    );
    assert_eq!(read_errors[0].field, "spec.priority");

    let objects: Vec<Object> = results.into_iter().filter_map(Result::ok).collect();
    let mut entries: Vec<PolicyEntry> = Vec::new();
    let mut translate_errors = Vec::new();
    for object in &objects {
        let t = translate(object);
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
        translate_errors.extend(t.errors);
        entries.extend(t.entries);
    }
    assert_eq!(translate_errors.len(), 1);
    assert_eq!(
        translate_errors[0].to_string(),
        "NetworkPolicy x/bad-port: spec.ingress[0].ports[0].port: port 0 is outside 1-65535"
    );

    // Identities from the cluster objects of the same file.
    let ns_labels = |name: &str| -> Labels {
        objects
            .iter()
            .find_map(|o| match o {
                Object::Namespace(ns) if ns.metadata.name.as_deref() == Some(name) => {
                    Some(namespace_labels(ns))
                }
                _ => None,
            })
            .expect("namespace is in the file")
    };
    let pod = |name: &str| -> Identity {
        objects
            .iter()
            .find_map(|o| match o {
                Object::Pod(p) if p.metadata.name.as_deref() == Some(name) => {
                    let ns = p.metadata.namespace.clone().unwrap();
                    pod_identities(p, &ns_labels(&ns).into()).pop()
                }
                _ => None,
            })
            .expect("pod is in the file")
    };
    let node = objects
        .iter()
        .find_map(|o| match o {
            Object::Node(n) => node_identities(n).pop(),
            _ => None,
        })
        .unwrap();
    let (xa, yb) = (pod("a"), pod("b"));

    let verdict = |endpoint: &Identity, direction, remote: &Identity, port| {
        decide(
            &entries,
            &DirectedFlow {
                endpoint: endpoint.as_pod().unwrap(),
                direction,
                remote,
                protocol: Protocol::Tcp,
                port,
            },
        )
        .verdict
    };
    // x/a admits its named port http (8080) from y only; the invalid policy adds nothing.
    assert_eq!(verdict(&xa, Direction::Ingress, &yb, 8080), Verdict::Allow);
    assert_eq!(verdict(&xa, Direction::Ingress, &yb, 80), Verdict::Deny);
    assert_eq!(verdict(&xa, Direction::Ingress, &node, 8080), Verdict::Deny);
    // y/b may send anywhere except TCP 9090 into x.
    assert_eq!(verdict(&yb, Direction::Egress, &xa, 8080), Verdict::Allow);
    assert_eq!(verdict(&yb, Direction::Egress, &xa, 9090), Verdict::Deny);
    assert_eq!(verdict(&yb, Direction::Egress, &node, 9090), Verdict::Allow);
}
