use super::*;

fn endpoint(namespace: &str, name: &str, n: u32, app: &str) -> (String, Endpoint) {
    let endpoint = SliceEndpoint {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        addresses: vec![format!("10.{}.{}.{}", n >> 16, (n >> 8) & 255, n & 255)],
        node: Some(format!("node-{}", n % 7)),
        labels: 0,
        ports: Vec::new(),
        created: Some(i64::from(n)),
    };
    let labels = BTreeMap::from([("app".to_owned(), app.to_owned())]);
    (endpoint.key(), Endpoint { endpoint, labels })
}

/// `pods` pods over a few namespaces and workloads.
fn world(pods: u32) -> BTreeMap<String, Endpoint> {
    (0..pods)
        .map(|n| {
            endpoint(
                &format!("ns-{}", n % 5),
                &format!("pod-{n}"),
                n,
                &format!("app-{}", n % 13),
            )
        })
        .collect()
}

/// The slices as the API server holds them after `writes`, each write a new resourceVersion.
fn apply(current: &mut Vec<NetpolEndpointSlice>, writes: &[Write], version: &mut u64) {
    for write in writes {
        let name = write.name().to_owned();
        current.retain(|s| s.metadata.name.as_deref() != Some(&name));
        if let Write::Create(slice) | Write::Update(slice) = write {
            *version += 1;
            let mut slice = slice.clone();
            slice.metadata.resource_version = Some(version.to_string());
            current.push(slice);
        }
    }
}

/// Plans against `current` and applies the writes; returns them.
fn publish(
    wanted: &BTreeMap<String, Endpoint>,
    current: &mut Vec<NetpolEndpointSlice>,
    version: &mut u64,
) -> Vec<Write> {
    let writes = writes(&desired(wanted, &*current, 1000), &*current);
    // The controller's way, comparing unchanged slices in place, plans the very same writes.
    assert_eq!(changes(wanted, &*current, 1000), writes);
    apply(current, &writes, version);
    writes
}

fn members(current: &[NetpolEndpointSlice]) -> Vec<String> {
    let mut keys: Vec<String> = current
        .iter()
        .flat_map(|s| s.spec.endpoints.iter().map(SliceEndpoint::key))
        .collect();
    keys.sort();
    keys
}

#[test]
fn every_endpoint_is_published_once_in_full_slices() {
    let wanted = world(2500);
    let (mut current, mut version) = (Vec::new(), 0);
    let writes = publish(&wanted, &mut current, &mut version);
    assert_eq!(writes.len(), 3);
    assert!(writes.iter().all(|w| matches!(w, Write::Create(_))));
    let sizes: Vec<usize> = current.iter().map(|s| s.spec.endpoints.len()).collect();
    assert_eq!(sizes, [1000, 1000, 500]);
    assert_eq!(
        members(&current),
        wanted.keys().cloned().collect::<Vec<_>>()
    );
    // Each label set once per slice, and every endpoint's reference names its own labels.
    for slice in &current {
        assert!(slice.spec.label_sets.len() <= 13);
        for e in &slice.spec.endpoints {
            assert_eq!(
                slice.spec.label_sets[e.labels as usize],
                wanted[&e.key()].labels
            );
        }
    }
    // The same world planned again (a restart reading what it wrote) writes nothing.
    assert_eq!(publish(&wanted, &mut current, &mut version), []);
}

#[test]
fn one_pod_change_rewrites_its_slice_alone() {
    let mut wanted = world(2500);
    let (mut current, mut version) = (Vec::new(), 0);
    publish(&wanted, &mut current, &mut version);
    let holder = |current: &[NetpolEndpointSlice], key: &str| {
        current
            .iter()
            .find(|s| s.spec.endpoints.iter().any(|e| e.key() == key))
            .and_then(|s| s.metadata.name.clone())
    };
    let key = "ns-3/pod-1803".to_owned();
    let before = holder(&current, &key);
    wanted
        .get_mut(&key)
        .unwrap()
        .labels
        .insert("app".into(), "relabelled".into());
    let writes = publish(&wanted, &mut current, &mut version);
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert!(matches!(&writes[0], Write::Update(s) if s.metadata.name == before));
    // The update is conditional on the version it was planned from.
    let Write::Update(update) = &writes[0] else {
        unreachable!()
    };
    assert!(update.metadata.resource_version.is_some());

    wanted.remove(&key);
    let writes = publish(&wanted, &mut current, &mut version);
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].name(), before.unwrap());
    assert_eq!(holder(&current, &key), None);
}

#[test]
fn a_rolling_update_of_100_replicas_is_a_few_writes() {
    let mut wanted = world(2500);
    for n in 0..100 {
        let (key, e) = endpoint("shop", &format!("web-old-{n}"), 100_000 + n, "web");
        wanted.insert(key, e);
    }
    let (mut current, mut version) = (Vec::new(), 0);
    publish(&wanted, &mut current, &mut version);
    // 25 replicas at a time (maxSurge 25%), each step one coalesced write window.
    let mut total = 0;
    for step in 0..4 {
        for n in step * 25..(step + 1) * 25 {
            wanted.remove(&format!("shop/web-old-{n}"));
            let (key, e) = endpoint("shop", &format!("web-new-{n}"), 200_000 + n, "web");
            wanted.insert(key, e);
        }
        let writes = publish(&wanted, &mut current, &mut version);
        assert!(writes.len() <= 2, "step {step}: {writes:?}");
        total += writes.len();
    }
    assert!(total <= 5, "{total} writes");
    assert_eq!(
        members(&current),
        wanted.keys().cloned().collect::<Vec<_>>()
    );
}

#[test]
fn duplicates_and_empty_slices_are_cleaned_up() {
    let wanted = world(30);
    let (mut current, mut version) = (Vec::new(), 0);
    publish(&wanted, &mut current, &mut version);
    // A second slice (an old leader's write) lists a pod the first holds, and one gone pod.
    let mut stray = NetpolEndpointSlice::new(
        "neps-00009",
        spec_of([&wanted["ns-1/pod-1"], &endpoint("gone", "x", 9, "x").1].into_iter()),
    );
    stray.metadata.resource_version = Some("77".into());
    current.push(stray);
    let writes = publish(&wanted, &mut current, &mut version);
    assert_eq!(
        writes,
        [Write::Delete {
            name: "neps-00009".into(),
            resource_version: Some("77".into())
        }]
    );
    assert_eq!(
        members(&current),
        wanted.keys().cloned().collect::<Vec<_>>()
    );
}

#[test]
fn new_pods_join_their_namespace_then_any_room() {
    let wanted: BTreeMap<String, Endpoint> = (0..4)
        .map(|n| endpoint(if n < 2 { "a" } else { "b" }, &format!("p{n}"), n, "x"))
        .collect();
    let mut current = Vec::new();
    let spec = desired(&wanted, &current, 3);
    let names: Vec<Vec<String>> = spec
        .values()
        .map(|s| s.endpoints.iter().map(SliceEndpoint::key).collect())
        .collect();
    assert_eq!(names, [vec!["a/p0", "a/p1", "b/p2"], vec!["b/p3"]]);
    apply(&mut current, &writes(&spec, &[]), &mut 0);
    // Room freed in the first slice is taken by the next pod of namespace b.
    let mut wanted = wanted;
    wanted.remove("a/p0");
    wanted.extend([endpoint("b", "p4", 4, "x")]);
    let spec = desired(&wanted, &current, 3);
    assert_eq!(spec["neps-00001"].endpoints.len(), 3);
    assert!(spec["neps-00001"]
        .endpoints
        .iter()
        .any(|e| e.key() == "b/p4"));
}
