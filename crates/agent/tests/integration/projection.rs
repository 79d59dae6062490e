//! Objects read in their kind's projection (straight from the response bytes, the unread
//! fields skipped) decode exactly as the whole objects did: the same object, or the same error
//! naming the same object and field. Randomized: prints its seed, and
//! `NETPOL_PROJECTION_SEED=N` replays one.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ApiResource, WatchEvent};
use netpol_agent::sources::decode::{decode, Decoded};
use netpol_agent::sources::projection::{self, PodShape, Projected};
use netpol_agent::SourceKind;
use netpol_api::{Node, Pod};
use netpol_testkit::realistic;
use serde_json::{json, Value};

/// What a decode came to, comparable.
fn outcome(decoded: Decoded) -> Result<netpol_api::Object, netpol_api::ValidationError> {
    match decoded {
        Decoded::Valid(object) => Ok(*object),
        Decoded::Invalid(error) => Err(error),
    }
}

/// `objects` as one list page, read the old way (whole values) and the new way (projected).
fn both_ways(kind: SourceKind, resource: &ApiResource, objects: &[Value]) {
    let page = json!({
        "kind": format!("{}List", resource.kind), "apiVersion": resource.api_version,
        "metadata": {"resourceVersion": "42", "continue": "abc"},
        "items": objects,
    })
    .to_string();
    #[derive(Default, serde::Deserialize)]
    struct Meta {
        #[serde(rename = "resourceVersion")]
        resource_version: String,
    }
    let (meta, projected) =
        projection::list_page::<Meta>(&page, projection::shape_of(&resource.kind)).unwrap();
    assert_eq!(meta.resource_version, "42");
    assert_eq!(projected.len(), objects.len());
    for (whole, projected) in objects.iter().zip(projected) {
        let old = outcome(decode(kind, resource, whole.clone()));
        let new = outcome(decode(kind, resource, projected));
        assert_eq!(old, new, "for {whole}");
    }
}

/// A small seeded generator (xorshift64*), so that a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

/// Paths a realistic pod is damaged at: fields netpol reads and fields it skips.
const PATHS: [&str; 16] = [
    "/metadata/name",
    "/metadata/namespace",
    "/metadata/labels",
    "/metadata/labels/app",
    "/metadata/annotations",
    "/metadata/managedFields",
    "/metadata/ownerReferences",
    "/spec",
    "/spec/nodeName",
    "/spec/hostNetwork",
    "/spec/containers",
    "/spec/containers/0/ports/0/containerPort",
    "/spec/containers/0/env",
    "/status",
    "/status/podIPs/0/ip",
    "/status/conditions",
];

fn odd_value(rng: &mut Rng) -> Value {
    match rng.below(7) {
        0 => Value::Null,
        1 => json!("not-an-ip"),
        2 => json!(-3),
        3 => json!(true),
        4 => json!([1, "two"]),
        5 => json!({"x": {"y": 1.5}}),
        _ => json!(""),
    }
}

#[test]
fn realistic_pods_read_projected_as_they_read_whole() {
    let seed = std::env::var("NETPOL_PROJECTION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    println!("seed {seed} (NETPOL_PROJECTION_SEED={seed} replays it)");
    let mut rng = Rng(seed);
    let resource = ApiResource::erase::<Pod>(&());
    let mut pods = Vec::new();
    let mut invalid = 0;
    for i in 0..2_000 {
        let mut pod = realistic::pod(i * 37 + rng.below(1_000), 1 + rng.below(50));
        // One pod in three has host networking, one in two is damaged somewhere.
        if rng.below(3) == 0 {
            pod["spec"]["hostNetwork"] = json!(true);
        }
        if rng.below(2) == 0 {
            let path = PATHS[rng.below(PATHS.len())];
            if let Some(slot) = pod.pointer_mut(path) {
                *slot = odd_value(&mut rng);
            }
        }
        if rng.below(20) == 0 {
            // List items of built-in kinds usually come without these.
            let map = pod.as_object_mut().unwrap();
            map.remove("apiVersion");
            map.remove("kind");
        }
        invalid += usize::from(matches!(
            decode(SourceKind::Pod, &resource, pod.clone()),
            Decoded::Invalid(_)
        ));
        pods.push(pod);
    }
    // Both outcomes occur, so both are compared.
    assert!(invalid > 50 && invalid < 1_500, "{invalid} invalid");
    both_ways(SourceKind::Pod, &resource, &pods);
}

#[test]
fn nodes_and_namespaces_read_projected_as_they_read_whole() {
    let nodes: Vec<Value> = (0..20)
        .map(|i| {
            json!({
                "metadata": {"name": format!("node-{i}"), "labels": {"zone": "a"},
                    "managedFields": [{"manager": "kubelet"}], "annotations": {"a": "b"}},
                "spec": {"podCIDR": "10.0.0.0/24", "taints": []},
                "status": {
                    "addresses": if i == 7 { json!("oops") } else {
                        json!([{"type": "InternalIP", "address": format!("192.168.0.{i}")},
                               {"type": "Hostname", "address": format!("node-{i}")}])
                    },
                    "images": [{"names": ["registry.example.com/a:1"], "sizeBytes": 123}],
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            })
        })
        .collect();
    both_ways(SourceKind::Node, &ApiResource::erase::<Node>(&()), &nodes);
    let namespaces: Vec<Value> = (0..20)
        .map(|i| {
            json!({
                "metadata": {"name": format!("ns-{i}"),
                    "labels": if i == 3 { json!(["bad"]) } else { json!({"team": "a"}) },
                    "managedFields": [{"manager": "kubectl"}]},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            })
        })
        .collect();
    both_ways(
        SourceKind::Namespace,
        &ApiResource::erase::<Namespace>(&()),
        &namespaces,
    );
}

/// A policy's audit mode is an annotation: read through a list page as from a file. (The
/// projection once dropped every annotation but the lint one, so a policy listed from the API
/// server was enforced where its annotation asked for audit.)
#[test]
fn a_projected_policy_keeps_its_audit_annotation() {
    let policy = json!({
        "metadata": {"name": "p", "namespace": "n", "annotations": {
            "netpol.io/enforcement": "audit",
            "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    });
    let page = json!({"metadata": {}, "items": [policy]}).to_string();
    let (_, items) = projection::list_page::<serde_json::Map<String, Value>>(
        &page,
        projection::shape_of("NetworkPolicy"),
    )
    .unwrap();
    assert_eq!(
        items[0]["metadata"]["annotations"],
        json!({"netpol.io/enforcement": "audit"})
    );
    let resource = ApiResource::erase::<k8s_openapi::api::networking::v1::NetworkPolicy>(&());
    let Decoded::Valid(object) = decode(SourceKind::NetworkPolicy, &resource, items[0].clone())
    else {
        panic!("not decoded");
    };
    let translated = netpol_api::translate::translate(&object);
    assert!(!translated.entries.is_empty());
    assert!(translated
        .entries
        .iter()
        .all(|e| e.enforcement == netpol_engine::Enforcement::Audit));
}

#[test]
fn a_projected_pod_keeps_only_what_is_read() {
    let mut whole = realistic::pod(5, 3);
    whole["metadata"]["annotations"][projection::LINT_IGNORE_ANNOTATION] = json!("wide-open");
    let page = json!({"metadata": {}, "items": [whole]}).to_string();
    let (_, items) =
        projection::list_page::<serde_json::Map<String, Value>>(&page, projection::shape_of("Pod"))
            .unwrap();
    let pod = &items[0];
    assert!(pod["metadata"].get("managedFields").is_none());
    // `lint --cluster` reads this one annotation; no other is kept.
    assert_eq!(
        pod["metadata"]["annotations"],
        json!({projection::LINT_IGNORE_ANNOTATION: "wide-open"})
    );
    assert!(pod["spec"].get("tolerations").is_none());
    assert!(pod["spec"]["containers"][0].get("env").is_none());
    assert!(pod["status"].get("containerStatuses").is_none());
    assert_eq!(pod["spec"]["containers"][0]["ports"][1]["name"], "metrics");
    assert_eq!(pod["metadata"]["labels"]["pod-template-hash"], "7d9c5b8f6d");
    let whole = realistic::pod(5, 3).to_string().len();
    let kept = pod.to_string().len();
    assert!(kept * 5 < whole, "{kept} of {whole} bytes kept");
}

#[test]
fn watch_events_are_projected_whichever_field_comes_first() {
    let pod = realistic::pod(9, 2);
    for line in [
        json!({"type": "ADDED", "object": pod}).to_string(),
        format!(r#"{{"object": {pod}, "type": "MODIFIED"}}"#),
    ] {
        let event: WatchEvent<Projected<PodShape>> = serde_json::from_str(&line).unwrap();
        let (WatchEvent::Added(object) | WatchEvent::Modified(object)) = event else {
            panic!("{event:?}")
        };
        assert!(object.0["metadata"].get("managedFields").is_none());
        assert_eq!(object.0["status"]["podIP"], pod["status"]["podIP"]);
    }
}

/// A large policy on a list page, read from its text without a tree, decodes as the projected
/// tree does: with the list's kind filled in, managed fields and unread annotations dropped, the
/// audit annotation kept. A small one on the same page is projected as before.
#[test]
fn a_large_listed_policy_reads_from_its_text_as_its_projection_decodes() {
    use netpol_api::large_json::{read_listed_policy, LARGE_ITEM_BYTES};
    let peers: Vec<Value> = (0..3000)
        .map(|i| json!({"ipBlock": {"cidr": format!("10.{}.{}.1/32", i / 256, i % 256)}}))
        .collect();
    let policy = |name: &str| {
        json!({
            "metadata": {"name": name, "namespace": "n", "uid": "u-1",
                "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}],
                "annotations": {"netpol.io/enforcement": "audit",
                    "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Egress"],
                "egress": [{"to": peers, "ports": [{"port": 443}]}]},
        })
    };
    let small =
        json!({"metadata": {"name": "small", "namespace": "n"}, "spec": {"podSelector": {}}});
    let page = json!({"metadata": {}, "items": [policy("large"), small]}).to_string();
    assert!(policy("large").to_string().len() >= LARGE_ITEM_BYTES);
    let resource = ApiResource::erase::<k8s_openapi::api::networking::v1::NetworkPolicy>(&());
    let shape = projection::shape_of("NetworkPolicy");
    let tree = |value: Value| match decode(SourceKind::NetworkPolicy, &resource, value) {
        Decoded::Valid(object) => *object,
        Decoded::Invalid(error) => panic!("{error}"),
    };
    let (_, projected) =
        projection::list_page::<serde_json::Map<String, Value>>(&page, shape).unwrap();
    let expected: Vec<netpol_api::Object> = projected.into_iter().map(tree).collect();
    // The page as a streamed page reads it: cut into its items as its bytes arrive (in pieces
    // that end anywhere), each item read from its text.
    let mut items = netpol_api::list_items::ListItems::default();
    let mut texts = Vec::new();
    for bytes in page.as_bytes().chunks(4093) {
        items
            .feed(bytes, &mut |text| {
                texts.push(text);
                Ok::<(), ()>(())
            })
            .unwrap();
    }
    let head = items.finish().unwrap();
    let head: Value = serde_json::from_str(&head).unwrap();
    assert_eq!(head, json!({"metadata": {}, "items": []}));
    let mut large_reads = 0;
    let read: Vec<netpol_api::Object> = texts
        .iter()
        .map(|text| {
            let large = |text: &str| {
                large_reads += 1;
                read_listed_policy(text, &resource.kind, &resource.api_version)
            };
            projection::read_item(text, shape, tree, large).unwrap()
        })
        .collect();
    assert_eq!(large_reads, 1, "only the large item is read from its text");
    assert_eq!(read, expected);
    // ... and read there, not handed back to the projection.
    let text = policy("large").to_string();
    assert!(read_listed_policy(&text, &resource.kind, &resource.api_version).is_some());
}
