//! The embedded mode's file source: YAML files in, watch events out.

use crate::agent_support;

use agent_support::{scratch_dir, settled_scan};
use netpol_agent::indexes::SourceEvent;
use netpol_agent::sources::files::{FileProblem, FileSource};
use netpol_agent::SourceKind;
use netpol_indexes::Event;

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

    let scan = settled_scan(&mut source);
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
        describe(&settled_scan(&mut source).events),
        Vec::<String>::new()
    );

    // A second policy in the same file: only the new one is sent, the unchanged one is not.
    let two = format!("{POLICY}---\n{}", POLICY.replace("name: p", "name: r"));
    std::fs::write(dir.join("nested/policy.yml"), two).unwrap();
    assert_eq!(
        describe(&settled_scan(&mut source).events),
        ["NetworkPolicy:Apply:r"]
    );

    std::fs::remove_file(dir.join("nested/policy.yml")).unwrap();
    assert_eq!(
        describe(&settled_scan(&mut source).events),
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
    settled_scan(&mut source);
    // Same length, written at once: size and (coarse) modification time may well be unchanged.
    std::fs::write(
        dir.join("policy.yaml"),
        POLICY.replace("name: p", "name: s"),
    )
    .unwrap();
    assert_eq!(
        describe(&settled_scan(&mut source).events),
        ["NetworkPolicy:Delete:p", "NetworkPolicy:Apply:s"]
    );
}

#[test]
fn broken_yaml_keeps_the_files_objects_and_invalid_objects_are_left_out() {
    let dir = scratch_dir("files-problems");
    let mut source = FileSource::new(&dir);
    std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
    settled_scan(&mut source);

    // A half-saved file: reported, and its policy stays.
    std::fs::write(dir.join("policy.yaml"), "apiVersion: [unclosed\n").unwrap();
    let scan = settled_scan(&mut source);
    assert!(matches!(
        scan.problems.as_slice(),
        [FileProblem::Unreadable { .. }]
    ));
    assert!(describe(&scan.events).iter().all(|e| !e.contains("Delete")));
    // Not reported again while the file stays as it is: an unchanged digest is not re-parsed.
    assert!(settled_scan(&mut source).problems.is_empty());

    // An invalid object is left out, as if absent, and named with its field.
    let bad = POLICY.replace("podSelector: {}", "podSelector: {matchLabels: 3}");
    std::fs::write(dir.join("policy.yaml"), bad).unwrap();
    let scan = settled_scan(&mut source);
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
    let scan = settled_scan(&mut source);
    assert!(matches!(
        scan.problems.as_slice(),
        [FileProblem::Duplicate { used, .. }] if used.ends_with("a.yaml")
    ));
    // Deleting the first file makes the second one's version current.
    std::fs::remove_file(dir.join("a.yaml")).unwrap();
    let scan = settled_scan(&mut source);
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

#[test]
fn a_changed_file_that_duplicates_an_object_is_reported_and_the_first_file_still_wins() {
    let dir = scratch_dir("files-duplicates-later");
    std::fs::write(dir.join("b.yaml"), POLICY).unwrap();
    let mut source = FileSource::new(&dir);
    let scan = settled_scan(&mut source);
    assert!(scan.problems.is_empty(), "{:?}", scan.problems);
    // A later file defining the same object: reported, the first file (in path order) used.
    std::fs::write(
        dir.join("a.yaml"),
        POLICY.replace("podSelector: {}", "podSelector: {matchLabels: {app: x}}"),
    )
    .unwrap();
    let scan = settled_scan(&mut source);
    assert!(
        matches!(
            scan.problems.as_slice(),
            [FileProblem::Duplicate { used, ignored, .. }]
                if used.ends_with("a.yaml") && ignored.ends_with("b.yaml")
        ),
        "{:?}",
        scan.problems
    );
    // An unrelated file changing reports no duplicate it does not take part in.
    std::fs::write(dir.join("c.yaml"), POLICY.replace("name: p", "name: q")).unwrap();
    let scan = settled_scan(&mut source);
    assert!(scan.problems.is_empty(), "{:?}", scan.problems);
}

/// `count` NetworkPolicies in namespace x, one YAML document each.
fn policies(count: usize) -> String {
    (0..count)
        .map(|i| POLICY.replace("name: p", &format!("name: p{i}")))
        .collect::<Vec<_>>()
        .join("---\n")
}

#[test]
fn a_file_still_being_written_is_read_only_once_it_stops_changing() {
    let dir = scratch_dir("files-half-written");
    let mut source = FileSource::new(&dir);
    let full = policies(20);
    std::fs::write(dir.join("ns.yaml"), NAMESPACE_X).unwrap();
    std::fs::write(dir.join("policies.yaml"), &full).unwrap();
    let first = settled_scan(&mut source);
    assert_eq!(
        describe(&first.events)
            .iter()
            .filter(|e| e.starts_with("NetworkPolicy:InitApply"))
            .count(),
        20
    );

    // A writer rewrites the file and has written 45% of it (still valid YAML) at the next poll.
    let cut = full.len() * 45 / 100;
    let cut = full[..cut].rfind("---\n").unwrap();
    std::fs::write(dir.join("policies.yaml"), &full[..cut]).unwrap();
    let scan = source.scan().unwrap();
    assert_eq!(scan.settling, 1, "a changed file waits for a second look");
    assert!(scan.events.is_empty(), "{:?}", describe(&scan.events));

    // Before the next poll the writer writes the rest: the signature moved again, so still nothing.
    std::fs::write(dir.join("policies.yaml"), &full).unwrap();
    let scan = source.scan().unwrap();
    assert!(scan.events.is_empty(), "{:?}", describe(&scan.events));
    assert!(scan.settling <= 1);

    // Unchanged since the last look: read, and no policy ever went away.
    let scan = settled_scan(&mut source);
    assert!(
        describe(&scan.events).iter().all(|e| !e.contains("Delete")),
        "{:?}",
        describe(&scan.events)
    );
    assert!(scan.problems.is_empty(), "{:?}", scan.problems);
}

#[test]
fn an_unreadable_file_holds_the_first_list_until_the_caller_stops_waiting() {
    let dir = scratch_dir("files-unreadable-at-start");
    std::fs::write(dir.join("ns.yaml"), NAMESPACE_X).unwrap();
    std::fs::write(dir.join("policy.yaml"), "kind: [unclosed\n").unwrap();
    let mut source = FileSource::new(&dir);
    let scan = settled_scan(&mut source);
    // The list met the broken file part-way and was abandoned: no kind's list completed.
    assert!(
        !describe(&scan.events)
            .iter()
            .any(|e| e.ends_with(":InitDone")),
        "nothing listed while a file is unreadable: {:?}",
        describe(&scan.events)
    );
    assert!(matches!(
        scan.problems.as_slice(),
        [FileProblem::Unreadable { path, .. }] if path.ends_with("policy.yaml")
    ));
    assert!(!source.is_listed());
    assert_eq!(source.unreadable().len(), 1);
    // Waiting longer changes nothing and reports nothing new.
    let scan = source.scan().unwrap();
    assert!(scan.events.is_empty() && scan.problems.is_empty());

    // The caller stops waiting: what could be read is listed, the file still counts as unreadable.
    source.accept_partial();
    let events = describe(&source.scan().unwrap().events);
    assert!(events.contains(&"Namespace:InitApply:x".to_owned()));
    assert!(events.contains(&"NetworkPolicy:InitDone".to_owned()));
    assert!(source.is_listed());
    assert_eq!(source.unreadable().len(), 1);

    // Repaired: its objects arrive and it no longer counts.
    std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
    let scan = settled_scan(&mut source);
    assert_eq!(describe(&scan.events), ["NetworkPolicy:Apply:p"]);
    assert!(source.unreadable().is_empty());
}

#[test]
fn an_idle_poll_builds_nothing_whatever_the_number_of_objects() {
    let dir = scratch_dir("files-idle");
    std::fs::write(dir.join("ns.yaml"), NAMESPACE_X).unwrap();
    std::fs::write(dir.join("policies.yaml"), policies(2000)).unwrap();
    let mut source = FileSource::new(&dir);
    let first = settled_scan(&mut source);
    assert!(first.events.len() > 2000);
    for _ in 0..3 {
        let idle = source.scan().unwrap();
        assert!(idle.events.is_empty());
        assert_eq!(idle.objects_mapped, 0, "an idle poll maps no object");
    }
    // A rename over the file (same size, possibly the same time) is seen through its inode.
    let replacement = dir.join(".policies.yaml.tmp");
    std::fs::write(
        &replacement,
        policies(2000).replace("name: p1,", "name: q1,"),
    )
    .unwrap();
    std::fs::rename(&replacement, dir.join("policies.yaml")).unwrap();
    let scan = settled_scan(&mut source);
    assert_eq!(
        describe(&scan.events)
            .iter()
            .filter(|e| e.ends_with(":p1") || e.ends_with(":q1"))
            .collect::<Vec<_>>(),
        ["NetworkPolicy:Delete:p1", "NetworkPolicy:Apply:q1"]
    );
}

/// `count` pods in one `kind: List`, as `kubectl get pods -A -o yaml` prints them.
fn pod_list(count: usize, relabelled: Option<usize>) -> String {
    let mut text = String::from("apiVersion: v1\nitems:\n");
    for i in 0..count {
        let version = if relabelled == Some(i) { "v2" } else { "v1" };
        text.push_str(&format!(
            "- apiVersion: v1\n  kind: Pod\n  metadata:\n    labels:\n      app: web\n      version: {version}\n    \
             name: web-{i}\n    namespace: x\n  spec:\n    nodeName: node-{}\n  status:\n    podIP: 10.{}.{}.{}\n",
            i % 100,
            i / 65_536,
            i / 256 % 256,
            i % 256
        ));
    }
    text + "kind: List\nmetadata:\n  resourceVersion: \"\"\n"
}

#[test]
fn a_one_pod_change_in_a_file_of_10000_pods_sends_exactly_that_pod() {
    let dir = scratch_dir("files-one-pod");
    std::fs::write(dir.join("ns.yaml"), NAMESPACE_X).unwrap();
    std::fs::write(dir.join("pods.yaml"), pod_list(10_000, None)).unwrap();
    let mut source = FileSource::new(&dir);
    let first = settled_scan(&mut source);
    let applies = describe(&first.events)
        .iter()
        .filter(|e| e.starts_with("Pod:InitApply"))
        .count();
    assert_eq!(applies, 10_000);

    // One pod relabelled, one gone: one Apply and one Delete, nothing else.
    let mut text = pod_list(10_000, Some(4_321));
    let gone = "- apiVersion: v1\n  kind: Pod\n  metadata:\n    labels:\n      app: web\n      version: v1\n    name: web-9999\n";
    let at = text.find(gone).unwrap();
    let end = text[at + 1..]
        .find("- apiVersion")
        .map_or(text.find("kind: List").unwrap(), |e| at + 1 + e);
    text.replace_range(at..end, "");
    std::fs::write(dir.join("pods.yaml"), text).unwrap();
    let scan = settled_scan(&mut source);
    assert_eq!(
        describe(&scan.events),
        ["Pod:Apply:web-4321", "Pod:Delete:web-9999"]
    );
    assert_eq!(scan.objects_mapped, 2);
    match &scan.events[0].event {
        Event::Apply(netpol_api::Object::Pod(pod)) => {
            let labels = pod.metadata.labels.as_ref().unwrap();
            assert_eq!(labels["version"], "v2");
        }
        other => panic!("{other:?}"),
    }
    // The pod comes back: one Apply.
    std::fs::write(dir.join("pods.yaml"), pod_list(10_000, Some(4_321))).unwrap();
    let again = settled_scan(&mut source);
    assert_eq!(describe(&again.events), ["Pod:Apply:web-9999"]);
}

#[test]
fn a_relist_while_a_file_is_broken_sends_changes_only_and_keeps_its_objects() {
    let dir = scratch_dir("files-relist-broken");
    std::fs::write(dir.join("ns.yaml"), NAMESPACE_X).unwrap();
    std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
    let mut source = FileSource::new(&dir);
    settled_scan(&mut source);
    std::fs::write(dir.join("policy.yaml"), "kind: [unclosed\n").unwrap();
    settled_scan(&mut source);
    assert_eq!(source.unreadable().len(), 1);
    // A list now would leave the policy out and so delete it: the relist sends changes only.
    std::fs::write(
        dir.join("ns.yaml"),
        NAMESPACE_X.replace("{name: x}", "{name: x, labels: {a: b}}"),
    )
    .unwrap();
    std::thread::sleep(netpol_agent::sources::files::SETTLE_AGE);
    let relist = describe(&source.relist().unwrap().events);
    assert_eq!(relist, ["Namespace:Apply:x"]);
}

#[test]
fn a_list_that_meets_a_broken_file_starts_again_without_it() {
    let dir = scratch_dir("files-list-restart");
    std::fs::write(dir.join("a.yaml"), NAMESPACE_X).unwrap();
    std::fs::write(dir.join("b.yaml"), "kind: [unclosed\n").unwrap();
    std::fs::write(dir.join("c.yaml"), POLICY).unwrap();
    // Old enough to be read at first sight.
    std::thread::sleep(netpol_agent::sources::files::SETTLE_AGE);
    let mut source = FileSource::new(&dir);
    source.accept_partial();
    let events = describe(&settled_scan(&mut source).events);
    // The first attempt met b.yaml after listing a.yaml; the second listed a.yaml and c.yaml.
    let inits = events.iter().filter(|e| *e == "Namespace:Init").count();
    let dones = events.iter().filter(|e| *e == "Namespace:InitDone").count();
    assert_eq!((inits, dones), (2, 1), "{events:?}");
    let after_restart = &events[events.iter().rposition(|e| e == "Namespace:Init").unwrap()..];
    assert!(after_restart.contains(&"Namespace:InitApply:x".to_owned()));
    assert!(after_restart.contains(&"NetworkPolicy:InitApply:p".to_owned()));
    assert!(source.is_listed());
    assert_eq!(source.unreadable().len(), 1);
}

/// A policy with `ports:` at `spec` (one level too far left): read without the field, the rule
/// would admit every port.
const DEDENTED_PORTS: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: only-80, namespace: x}
spec:
  podSelector: {}
  ingress:
  - from:
    - podSelector: {matchLabels: {pod: b}}
  ports:
  - {protocol: TCP, port: 80}
";

/// The unknown-field problems of a scan, as `object field`.
fn unknown_fields(problems: &[FileProblem]) -> Vec<String> {
    problems
        .iter()
        .map(|p| match p {
            FileProblem::InvalidObject { error, .. } => {
                assert!(error.message.contains("unknown field"), "{error}");
                format!("{} {}", error.object, error.field)
            }
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn a_policy_with_a_field_its_kind_does_not_have_is_refused_alone() {
    let dir = scratch_dir("files-unknown-field");
    let mut source = FileSource::new(&dir);
    let both = format!("{POLICY}---\n{DEDENTED_PORTS}");
    std::fs::write(dir.join("policy.yaml"), &both).unwrap();
    let scan = settled_scan(&mut source);
    let events = describe(&scan.events);
    assert!(events.contains(&"NetworkPolicy:InitApply:p".to_owned()));
    assert!(
        !events.iter().any(|e| e.ends_with(":only-80")),
        "{events:?}"
    );
    assert_eq!(
        unknown_fields(&scan.problems),
        ["NetworkPolicy x/only-80 spec.ports"]
    );

    // Fixed: the policy arrives. Misplaced again: the version in force is withdrawn, as for any
    // invalid object, rather than left in force with a meaning its file no longer has.
    let fixed = DEDENTED_PORTS
        .replace("  ports:", "    ports:")
        .replace("  - {protocol", "    - {protocol");
    std::fs::write(dir.join("policy.yaml"), format!("{POLICY}---\n{fixed}")).unwrap();
    let scan = settled_scan(&mut source);
    assert!(scan.problems.is_empty(), "{:?}", scan.problems);
    assert_eq!(describe(&scan.events), ["NetworkPolicy:Apply:only-80"]);
    std::fs::write(dir.join("policy.yaml"), &both).unwrap();
    let scan = settled_scan(&mut source);
    assert_eq!(describe(&scan.events), ["NetworkPolicy:Delete:only-80"]);
    assert_eq!(unknown_fields(&scan.problems).len(), 1);
}

#[test]
fn unknown_fields_are_refused_by_every_reader_json_and_large_parallel_streams_too() {
    // JSON (read by the JSON parser), and a stream large enough to be parsed in pieces.
    let json = r#"{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "misspelt", "namespace": "x"},
        "spec": {"podselector": {"matchLabels": {"app": "db"}}}}"#;
    // Over 1 MiB, the size from which a stream is cut into pieces parsed in parallel.
    let mut large = String::new();
    for i in 0..12_000 {
        large.push_str(&POLICY.replace("name: p", &format!("name: p{i}")));
        large.push_str("---\n");
    }
    large.push_str(&DEDENTED_PORTS.replace("only-80", "late"));
    let dir = scratch_dir("files-unknown-field-readers");
    std::fs::write(dir.join("one.json"), json).unwrap();
    std::fs::write(dir.join("many.yaml"), &large).unwrap();
    let mut source = FileSource::new(&dir);
    let scan = settled_scan(&mut source);
    let mut refused = unknown_fields(&scan.problems);
    refused.sort();
    assert_eq!(
        refused,
        [
            "NetworkPolicy x/late spec.ports",
            "NetworkPolicy x/misspelt spec.podselector"
        ]
    );
    let applied = describe(&scan.events)
        .iter()
        .filter(|e| e.starts_with("NetworkPolicy:InitApply:"))
        .count();
    assert!(large.len() > 1 << 20);
    assert_eq!(applied, 12_000);
}
