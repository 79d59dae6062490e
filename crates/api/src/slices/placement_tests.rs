use proptest::prelude::*;

use super::*;
use crate::crd::SliceEndpoint;

fn endpoint(namespace: u32, pod: u32, app: u32) -> (String, Endpoint) {
    let endpoint = SliceEndpoint {
        namespace: format!("ns-{namespace}"),
        name: format!("pod-{pod}"),
        addresses: vec![format!("10.0.{}.{}", pod >> 8, pod & 255)],
        node: Some(format!("node-{}", pod % 3)),
        labels: 0,
        ports: Vec::new(),
        created: Some(i64::from(pod)),
    };
    let labels = BTreeMap::from([("app".to_owned(), format!("app-{app}"))]);
    (endpoint.key(), Endpoint { endpoint, labels })
}

/// The slices as the API server holds them after `writes`, each write a new resourceVersion.
fn apply(current: &mut BTreeMap<String, NetpolEndpointSlice>, writes: &[Write], version: &mut u64) {
    for write in writes {
        match write {
            Write::Create(slice) | Write::Update(slice) => {
                *version += 1;
                let mut slice = slice.clone();
                slice.metadata.resource_version = Some(version.to_string());
                current.insert(write.name().to_owned(), slice);
            }
            Write::Delete { name, .. } => {
                current.remove(name);
            }
        }
    }
}

/// One change to the world: pod `pod` of namespace `namespace` appears or changes its app, or
/// (app None) goes away.
type Change = (u32, u32, Option<u32>);

fn rounds() -> impl Strategy<Value = Vec<Vec<Change>>> {
    let change = (0..4u32, 0..60u32, prop::option::weighted(0.7, 0..5u32));
    prop::collection::vec(prop::collection::vec(change, 0..40), 1..12)
}

proptest! {
    /// Round after round, the incremental plan makes exactly the writes a full plan makes
    /// from the same slices (small slices, so that rounds fill, empty and create them).
    #[test]
    fn plans_what_a_full_plan_plans(rounds in rounds(), capacity in 1..9usize) {
        let mut wanted = BTreeMap::new();
        let mut current = BTreeMap::new();
        let mut version = 0;
        let (mut placement, writes) = Placement::full(&wanted, current.values(), capacity);
        apply(&mut current, &writes, &mut version);
        for changes in rounds {
            let mut dirty = BTreeSet::new();
            for (namespace, pod, app) in changes {
                let (key, published) = endpoint(namespace, pod, app.unwrap_or_default());
                match app {
                    Some(_) => wanted.insert(key.clone(), published),
                    None => wanted.remove(&key),
                };
                dirty.insert(key);
            }
            let full = plan::changes(&wanted, current.values(), capacity);
            let incremental = placement.changes(&wanted, &dirty, &current);
            prop_assert_eq!(&incremental, &full);
            apply(&mut current, &incremental, &mut version);
        }
        // Every wanted endpoint is published once.
        let mut published: Vec<String> = current
            .values()
            .flat_map(|s| s.spec.endpoints.iter().map(SliceEndpoint::key))
            .collect();
        published.sort();
        prop_assert_eq!(published, wanted.keys().cloned().collect::<Vec<_>>());
    }
}

#[test]
fn a_change_plans_only_its_slice() {
    let wanted: BTreeMap<String, Endpoint> = (0..3000).map(|p| endpoint(p % 4, p, p % 5)).collect();
    let mut current = BTreeMap::new();
    let (mut placement, writes) = Placement::full(&wanted, current.values(), 1000);
    apply(&mut current, &writes, &mut 0);
    assert_eq!(current.len(), 3);
    let mut changed = wanted.clone();
    let (key, relabelled) = endpoint(1, 5, 4);
    changed.insert(key.clone(), relabelled);
    let writes = placement.changes(&changed, &BTreeSet::from([key.clone()]), &current);
    assert_eq!(writes.len(), 1);
    let Write::Update(slice) = &writes[0] else {
        panic!("not an update: {writes:?}");
    };
    assert!(slice.spec.endpoints.iter().any(|e| e.key() == key));
    // Nothing dirty: nothing planned.
    assert_eq!(placement.changes(&changed, &BTreeSet::new(), &current), []);
}
