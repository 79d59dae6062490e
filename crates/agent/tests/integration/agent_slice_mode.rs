//! Slice mode gives the engine what direct mode gives it: the same world fed to an agent's
//! indexes directly (every Pod) and through NetpolEndpointSlices (the controller's plan, plus
//! the node's own Pods) yields the same MapState for every local endpoint, on every node.

use std::collections::BTreeMap;

use netpol_agent::indexes::{Applied, Indexes, SourceEvent};
use netpol_agent::SourceKind;
use netpol_api::crd::NetpolEndpointSlice;
use netpol_api::slices::{endpoint_of, plan, Endpoint};
use netpol_api::Object;
use netpol_engine::{Engine, EngineConfig, MapState};
use netpol_indexes::Event;
use serde_json::json;

/// Lists every kind of `objects`, `keep` choosing which pods the pod watch sees.
fn list_all(
    indexes: &mut Indexes,
    engine: &mut Engine,
    objects: &[Object],
    keep: impl Fn(&Object) -> bool,
) {
    for kind in SourceKind::ALL {
        stage(engine, indexes.apply(SourceEvent::new(kind, Event::Init)));
        for object in objects
            .iter()
            .filter(|o| SourceKind::of(o) == kind && keep(o))
        {
            let event = SourceEvent::new(kind, Event::InitApply(object.clone()));
            stage(engine, indexes.apply(event));
        }
        stage(
            engine,
            indexes.apply(SourceEvent::new(kind, Event::InitDone)),
        );
    }
}

fn stage(engine: &mut Engine, applied: Applied) {
    for update in applied.updates {
        update.stage(engine);
    }
}

fn node_of(object: &Object) -> Option<&str> {
    match object {
        Object::Pod(pod) => pod.spec.as_ref()?.node_name.as_deref(),
        _ => None,
    }
}

fn endpoints(engine: &mut Engine) -> BTreeMap<String, MapState> {
    let _ = engine.commit();
    engine
        .endpoints()
        .map(|(key, map)| (key.to_owned(), map.clone()))
        .collect()
}

fn direct(objects: &[Object], node: &str) -> BTreeMap<String, MapState> {
    let mut engine = Engine::new(config(node));
    let mut indexes = Indexes::for_node(node);
    list_all(&mut indexes, &mut engine, objects, |_| true);
    assert!(indexes.is_synced());
    endpoints(&mut engine)
}

/// The endpoints the controller publishes for `objects`' pods, by key.
fn wanted(objects: &[Object]) -> BTreeMap<String, Endpoint> {
    objects
        .iter()
        .filter_map(|o| match o {
            Object::Pod(pod) => endpoint_of(pod),
            _ => None,
        })
        .map(|e| (e.endpoint.key(), e))
        .collect()
}

/// The slices the controller would publish for `wanted`, `capacity` endpoints a slice.
fn publish(wanted: &BTreeMap<String, Endpoint>, capacity: usize) -> Vec<NetpolEndpointSlice> {
    plan::desired(wanted, &[], capacity)
        .into_iter()
        .map(|(name, spec)| NetpolEndpointSlice::new(&name, spec))
        .collect()
}

/// The slices the controller would publish for `objects`' pods, 40 endpoints a slice.
fn slices(objects: &[Object]) -> Vec<NetpolEndpointSlice> {
    publish(&wanted(objects), 40)
}

fn through_slices(objects: &[Object], node: &str) -> BTreeMap<String, MapState> {
    let mut engine = Engine::new(config(node));
    let mut indexes = Indexes::for_node_with_slices(node);
    list_all(&mut indexes, &mut engine, objects, |o| {
        !matches!(o, Object::Pod(_)) || node_of(o) == Some(node)
    });
    assert!(!indexes.is_synced(), "remote pods are not listed yet");
    stage(&mut engine, indexes.apply_slices(Event::Init));
    for slice in slices(objects) {
        // Through the API server's JSON and the checked decode, as an agent reads it.
        let read = NetpolEndpointSlice::from_value(serde_json::to_value(&slice).unwrap()).unwrap();
        stage(&mut engine, indexes.apply_slices(Event::InitApply(read)));
    }
    stage(&mut engine, indexes.apply_slices(Event::InitDone));
    assert!(indexes.is_synced());
    endpoints(&mut engine)
}

fn config(node: &str) -> EngineConfig {
    EngineConfig {
        local_node: Some(node.to_owned()),
        ..EngineConfig::default()
    }
}

fn assert_same_on_every_node(objects: &[Object]) {
    let mut nodes: Vec<&str> = objects.iter().filter_map(node_of).collect();
    nodes.sort();
    nodes.dedup();
    assert!(nodes.len() > 1);
    for node in nodes {
        let direct = direct(objects, node);
        assert!(!direct.is_empty(), "{node} has local endpoints");
        assert_eq!(direct, through_slices(objects, node), "node {node}");
    }
}

fn read_dir(dir: &str) -> Vec<Object> {
    let mut objects = Vec::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(dir);
    for sub in ["", "pods", "policies"] {
        let Ok(entries) = std::fs::read_dir(root.join(sub)) else {
            continue;
        };
        let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        {
            let text = std::fs::read_to_string(&path).unwrap();
            objects.extend(netpol_api::parse_yaml(&text).unwrap().into_iter().flatten());
        }
    }
    objects
}

#[test]
fn the_example_cluster_is_enforced_alike_in_both_modes() {
    let objects = read_dir("examples/cluster");
    assert!(
        objects
            .iter()
            .filter(|o| matches!(o, Object::Pod(_)))
            .count()
            >= 8
    );
    assert_same_on_every_node(&objects);
}

/// A synthetic cluster: namespaces with labels, pods over nodes with named ports, dual-stack
/// and host-network pods, a finished pod, and policies of every tier that read pod labels,
/// namespace labels and named ports, allow and deny.
fn synthetic(pods: usize, nodes: usize) -> Vec<Object> {
    let mut values = Vec::new();
    for ns in 0..4 {
        values.push(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": format!("ns-{ns}"), "labels": {"tier": if ns % 2 == 0 { "front" } else { "back" }}}}));
    }
    for n in 0..nodes {
        values.push(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("node-{n}"), "labels": {"zone": format!("z{}", n % 2)}},
            "status": {"addresses": [{"type": "InternalIP", "address": format!("192.168.0.{}", n + 1)}]}}));
    }
    for i in 0..pods {
        let mut ips = vec![json!({"ip": format!("10.{}.{}.{}", i % nodes, i / 250, i % 250 + 1)})];
        if i % 5 == 0 {
            ips.push(json!({"ip": format!("fd00::{:x}", i + 1)}));
        }
        let phase = if i % 17 == 3 { "Succeeded" } else { "Running" };
        values.push(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("pod-{i}"), "namespace": format!("ns-{}", i % 4),
                         "labels": {"app": format!("app-{}", i % 6), "pod-template-hash": format!("h{}", i % 3)},
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": format!("node-{}", i % nodes), "hostNetwork": i % 23 == 7,
                     "containers": [{"name": "c", "ports": [
                         {"name": "http", "containerPort": 8000 + (i % 3) as i64},
                         {"name": "dns", "containerPort": 53, "protocol": "UDP"}]}]},
            "status": {"phase": phase, "podIPs": ips}}));
    }
    values.push(json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "app-1-from-front", "namespace": "ns-1"},
        "spec": {"podSelector": {"matchLabels": {"app": "app-1"}},
                 "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"tier": "front"}},
                                        "podSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["app-2", "app-4"]}]}}],
                              "ports": [{"port": "http"}]}],
                 "egress": [{"to": [{"podSelector": {}}], "ports": [{"port": "dns", "protocol": "UDP"}]}]}}));
    values.push(json!({"apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
        "metadata": {"name": "deny-app-5"},
        "spec": {"priority": 5, "subject": {"namespaces": {}},
                 "ingress": [{"name": "deny", "action": "Deny", "from": [{"pods": {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "app-5"}}}}]}]}}));
    values.push(json!({"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "app-3", "namespace": "ns-3"},
        "spec": {"endpointSelector": {"matchLabels": {"app": "app-3"}},
                 "ingressDeny": [{"fromEndpoints": [{"matchLabels": {"pod-template-hash": "h1"}}]}],
                 "ingress": [{"fromEndpoints": [{}], "toPorts": [{"ports": [{"port": "http"}]}]}]}}));
    values
        .into_iter()
        .map(|v| Object::from_value(v).unwrap())
        .collect()
}

#[test]
fn a_synthetic_cluster_is_enforced_alike_in_both_modes() {
    // 40 endpoints a slice: the 300 pods span several slices.
    assert_same_on_every_node(&synthetic(300, 4));
}

#[test]
fn a_slice_change_reaches_the_engine_as_the_pod_change_would() {
    let objects = synthetic(60, 3);
    let node = "node-0";
    let mut engine = Engine::new(config(node));
    let mut indexes = Indexes::for_node_with_slices(node);
    list_all(&mut indexes, &mut engine, &objects, |o| {
        !matches!(o, Object::Pod(_)) || node_of(o) == Some(node)
    });
    stage(&mut engine, indexes.apply_slices(Event::Init));
    let published = slices(&objects);
    for slice in &published {
        stage(
            &mut engine,
            indexes.apply_slices(Event::InitApply(slice.clone())),
        );
    }
    stage(&mut engine, indexes.apply_slices(Event::InitDone));
    // pod-1 (node-1) is relabelled app-5, which the admin policy denies everywhere.
    let mut changed = objects.clone();
    for object in &mut changed {
        if let Object::Pod(pod) = object {
            if pod.metadata.name.as_deref() == Some("pod-1") {
                pod.metadata
                    .labels
                    .as_mut()
                    .unwrap()
                    .insert("app".into(), "app-5".into());
            }
        }
    }
    let republished = slices(&changed);
    let rewritten: Vec<&NetpolEndpointSlice> = republished
        .iter()
        .filter(|s| !published.contains(s))
        .collect();
    assert_eq!(rewritten.len(), 1);
    let applied = indexes.apply_slices(Event::Apply(rewritten[0].clone()));
    assert_eq!(
        applied.updates.len(),
        1,
        "only pod-1 changed: {:?}",
        applied.updates
    );
    stage(&mut engine, applied);
    assert_eq!(endpoints(&mut engine), direct(&changed, node));
    // The slice deleted: its remote pods go, the node's own pods stay.
    let applied = indexes.apply_slices(Event::Delete(rewritten[0].clone()));
    let remote = rewritten[0]
        .spec
        .endpoints
        .iter()
        .filter(|e| e.node.as_deref() != Some(node))
        .count();
    assert_eq!(applied.updates.len(), remote);
}

/// What an agent start reads of remote pods in each mode, in JSON bytes (before gzip): the
/// realistic pods the API server serves, against the slices that list them. Printed as a figure
/// (docs/performance.md); the bound asserted is far looser than the figure.
#[test]
fn slices_of_10000_realistic_pods_are_a_small_part_of_their_bytes() {
    let count: usize = std::env::var("NETPOL_SLICE_PODS").map_or(10_000, |v| v.parse().unwrap());
    let pods: Vec<serde_json::Value> = (0..count)
        .map(|i| netpol_testkit::realistic::pod(i, 100))
        .collect();
    let pod_bytes: usize = pods.iter().map(|p| p.to_string().len()).sum();
    let objects: Vec<Object> = pods
        .into_iter()
        .map(|p| Object::from_value(p).unwrap())
        .collect();
    let wanted = wanted(&objects);
    assert_eq!(wanted.len(), count);
    let published = publish(&wanted, 1000);
    let slice_bytes: usize = published
        .iter()
        .map(|s| serde_json::to_string(s).unwrap().len())
        .sum();
    let largest = published
        .iter()
        .map(|s| serde_json::to_string(s).unwrap().len())
        .max()
        .unwrap();
    println!(
        "{count} realistic pods: {pod_bytes} bytes of Pod JSON; {} slices, {slice_bytes} bytes ({} per pod, largest slice {largest} bytes)",
        published.len(),
        slice_bytes / count
    );
    assert_eq!(published.len(), count.div_ceil(1000));
    assert!(slice_bytes * 10 < pod_bytes, "{slice_bytes} vs {pod_bytes}");
    assert!(largest < 1 << 20, "a slice stays well under etcd's 1.5 MiB");
}
