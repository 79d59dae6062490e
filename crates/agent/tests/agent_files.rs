//! The embedded mode's file source: YAML files in, watch events out.

mod agent_support;

use agent_support::scratch_dir;
use kube::runtime::watcher::Event;
use netpol_agent::agent::indexes::SourceEvent;
use netpol_agent::agent::sources::files::{FileProblem, FileSource};
use netpol_agent::agent::SourceKind;

const NAMESPACE_X: &str = "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n";
const POLICY: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: p, namespace: x}
spec: {podSelector: {}}
";

/// Each event as `Kind:Event:name`.
fn describe(events: &[SourceEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let (what, object) = match &e.event {
                Event::Init => ("Init", None),
                Event::InitDone => ("InitDone", None),
                Event::InitApply(o) => ("InitApply", Some(o)),
                Event::Apply(o) => ("Apply", Some(o)),
                Event::Delete(o) => ("Delete", Some(o)),
            };
            let name = object.map_or(String::new(), |o| format!(":{}", o.object_ref().name));
            format!("{}:{what}{name}", e.kind)
        })
        .collect()
}

#[test]
fn the_first_scan_lists_every_kind_and_later_scans_send_changes() {
    let dir = scratch_dir("files-events");
    std::fs::create_dir_all(dir.join("nested/.hidden")).unwrap();
    std::fs::write(dir.join("ns.yaml"), NAMESPACE_X).unwrap();
    std::fs::write(dir.join("nested/policy.yml"), POLICY).unwrap();
    std::fs::write(
        dir.join("nested/.hidden/ignored.yaml"),
        POLICY.replace("name: p", "name: q"),
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "not yaml").unwrap();
    let mut source = FileSource::new(&dir);

    let scan = source.scan().unwrap();
    assert!(scan.problems.is_empty(), "{:?}", scan.problems);
    let events = describe(&scan.events);
    assert_eq!(events.len(), 2 * SourceKind::ALL.len() + 2);
    assert!(events.contains(&"Namespace:InitApply:x".to_owned()));
    assert!(events.contains(&"NetworkPolicy:InitApply:p".to_owned()));
    assert!(
        !events.iter().any(|e| e.ends_with(":q")),
        "hidden directories are skipped"
    );

    // Nothing changed: nothing sent.
    assert_eq!(
        describe(&source.scan().unwrap().events),
        Vec::<String>::new()
    );

    // A second policy in the same file: its objects are sent again, the new one with them.
    let two = format!("{POLICY}---\n{}", POLICY.replace("name: p", "name: r"));
    std::fs::write(dir.join("nested/policy.yml"), two).unwrap();
    assert_eq!(
        describe(&source.scan().unwrap().events),
        ["NetworkPolicy:Apply:p", "NetworkPolicy:Apply:r"]
    );

    std::fs::remove_file(dir.join("nested/policy.yml")).unwrap();
    assert_eq!(
        describe(&source.scan().unwrap().events),
        ["NetworkPolicy:Delete:p", "NetworkPolicy:Delete:r"]
    );

    // A relist sends everything again, as a complete list per kind.
    let relist = describe(&source.relist().unwrap().events);
    assert!(relist.contains(&"Namespace:InitApply:x".to_owned()));
    assert!(relist.contains(&"NetworkPolicy:InitDone".to_owned()));
}

#[test]
fn a_rewrite_within_the_timestamp_granularity_is_still_seen() {
    let dir = scratch_dir("files-racy");
    let mut source = FileSource::new(&dir);
    std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
    source.scan().unwrap();
    // Same length, written at once: size and (coarse) modification time may well be unchanged.
    std::fs::write(
        dir.join("policy.yaml"),
        POLICY.replace("name: p", "name: s"),
    )
    .unwrap();
    assert_eq!(
        describe(&source.scan().unwrap().events),
        ["NetworkPolicy:Delete:p", "NetworkPolicy:Apply:s"]
    );
}

#[test]
fn broken_yaml_keeps_the_files_objects_and_invalid_objects_are_left_out() {
    let dir = scratch_dir("files-problems");
    let mut source = FileSource::new(&dir);
    std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
    source.scan().unwrap();

    // A half-saved file: reported, and its policy stays.
    std::fs::write(dir.join("policy.yaml"), "apiVersion: [unclosed\n").unwrap();
    let scan = source.scan().unwrap();
    assert!(matches!(
        scan.problems.as_slice(),
        [FileProblem::Unreadable { .. }]
    ));
    assert!(describe(&scan.events).iter().all(|e| !e.contains("Delete")));
    // Not reported again while the file stays as it is: an unchanged digest is not re-parsed.
    assert!(source.scan().unwrap().problems.is_empty());

    // An invalid object is left out, as if absent, and named with its field.
    let bad = POLICY.replace("podSelector: {}", "podSelector: {matchLabels: 3}");
    std::fs::write(dir.join("policy.yaml"), bad).unwrap();
    let scan = source.scan().unwrap();
    assert_eq!(describe(&scan.events), ["NetworkPolicy:Delete:p"]);
    match scan.problems.as_slice() {
        [FileProblem::InvalidObject { error, .. }] => {
            assert_eq!(error.object.to_string(), "NetworkPolicy x/p");
            assert!(error.field.contains("matchLabels"), "{error}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_object_in_two_files_comes_from_the_first() {
    let dir = scratch_dir("files-duplicates");
    std::fs::write(dir.join("a.yaml"), POLICY).unwrap();
    std::fs::write(
        dir.join("b.yaml"),
        POLICY.replace("podSelector: {}", "podSelector: {matchLabels: {app: x}}"),
    )
    .unwrap();
    let mut source = FileSource::new(&dir);
    let scan = source.scan().unwrap();
    assert!(matches!(
        scan.problems.as_slice(),
        [FileProblem::Duplicate { used, .. }] if used.ends_with("a.yaml")
    ));
    // Deleting the first file makes the second one's version current.
    std::fs::remove_file(dir.join("a.yaml")).unwrap();
    let scan = source.scan().unwrap();
    match scan.events.as_slice() {
        [SourceEvent {
            event: Event::Apply(netpol_api::Object::NetworkPolicy(p)),
            ..
        }] => {
            let selector = p.spec.as_ref().unwrap().pod_selector.as_ref().unwrap();
            assert!(selector.match_labels.is_some());
        }
        other => panic!("{other:?}"),
    }
}
