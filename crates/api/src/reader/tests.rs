use super::*;
use crate::parse::parse_yaml;
use std::io::Cursor;

/// Pieces of at most 2 KB, on two workers.
const SMALL: Cutting = Cutting {
    min_bytes: 0,
    max_piece_bytes: 2048,
    workers: 2,
};

fn namespaces(count: usize) -> Vec<String> {
    (0..count)
        .map(|i| format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns-{i}\n"))
        .collect()
}

fn multidoc(count: usize) -> String {
    namespaces(count)
        .iter()
        .map(|n| format!("---\n{n}"))
        .collect()
}

fn yaml_list(count: usize) -> String {
    let items: String = namespaces(count)
        .iter()
        .map(|n| format!("- {}", n.replace('\n', "\n  ").trim_end()) + "\n")
        .collect();
    format!("apiVersion: v1\nitems:\n{items}kind: List\nmetadata:\n  resourceVersion: \"\"\n")
}

fn json_list(count: usize) -> String {
    let items: Vec<String> = (0..count)
        .map(|i| {
            format!(
                "        {{\n            \"apiVersion\": \"v1\",\n            \"kind\": \"Namespace\",\n            \"metadata\": {{\"name\": \"ns-{i}\"}}\n        }}"
            )
        })
        .collect();
    format!(
        "{{\n    \"apiVersion\": \"v1\",\n    \"items\": [\n{}\n    ],\n    \"kind\": \"List\"\n}}\n",
        items.join(",\n")
    )
}

/// Reads `text` from a reader with [`SMALL`] pieces: its objects' names, checked against the
/// sequential parse.
fn read(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let prepare = |read: ReadObject| FieldValidation::Ignore.apply(read);
    let mut reader = Cursor::new(text.as_bytes());
    let digest = read_each_with(&mut reader, SMALL, 512, &prepare, &mut |object| {
        names.push(object.unwrap().metadata().name.clone().unwrap())
    })
    .unwrap();
    assert_eq!(digest, text_digest(text));
    let expected: Vec<String> = parse_yaml(text)
        .unwrap()
        .into_iter()
        .map(|o| o.unwrap().metadata().name.clone().unwrap())
        .collect();
    assert_eq!(names, expected);
    names
}

#[test]
fn large_streams_of_every_form_are_cut_and_read_in_pieces() {
    for (text, form) in [
        (multidoc(500), "documents"),
        (yaml_list(500), "list"),
        (json_list(500), "json"),
    ] {
        let shape = scan(&mut Cursor::new(text.as_bytes()), 512).unwrap().shape;
        match (form, &shape) {
            ("documents", Shape::Documents)
            | ("list", Shape::List(_))
            | ("json", Shape::Json(_)) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(read(&text).len(), 500, "{form}");
    }
    // Flow style, and a list with an anchor: read whole, with the same result.
    let flow = "{apiVersion: v1, kind: List, items: [{apiVersion: v1, kind: Namespace, metadata: {name: a}}]}\n";
    let anchored = yaml_list(100).replacen("name: ns-1\n", "name: &n ns-1\n", 1);
    for text in [flow, &anchored] {
        assert!(matches!(
            scan(&mut Cursor::new(text.as_bytes()), 512).unwrap().shape,
            Shape::Whole
        ));
    }
    assert_eq!(read(flow), ["a"]);
    assert_eq!(read(&anchored).len(), 100);
}

/// A JSON list of large policies among small objects: each large one is read in a run of
/// its own without its tree (`large_json.rs`), and the whole list reads exactly as the
/// sequential parse reads it, unknown fields included; a large one the tree reader refuses
/// (a duplicate key) makes the list read whole, as before.
#[test]
fn large_policies_in_a_json_list_read_as_the_sequential_parse() {
    let peers = |n: usize| crate::large_json::ip_block_peers(n, "1/32");
    let policy = |name: &str, extra: &str| {
        format!(
            r#"{{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{{"name":"{name}"}},"spec":{{"podSelector":{{}},"egress":[{{"to":[{}]}}]{extra}}}}}"#,
            peers(3000)
        )
    };
    let small = |name: &str| {
        format!(r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"{name}"}}}}"#)
    };
    let items = [
        small("a"),
        policy("p1", ""),
        policy("p2", r#","unknownField":1"#),
        small("b"),
        small("c"),
        policy("p3", ""),
    ];
    assert!(items[1].len() >= LARGE_ITEM_BYTES);
    // Each of them is one this reader reads without a tree.
    for large in [&items[1], &items[2], &items[5]] {
        assert!(
            crate::large_json::read_policy(large, crate::json_depth::LIST_ITEM_DEPTH).is_some()
        );
    }
    let list = |items: &[String]| {
        format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[\n{}\n]}}\n",
            items.join(",\n")
        )
    };
    let read_all = |text: &str| {
        let mut objects = Vec::new();
        let prepare = |read: ReadObject| read;
        let result = read_each_with(
            &mut Cursor::new(text.as_bytes()),
            SMALL,
            512,
            &prepare,
            &mut |object| objects.push(object),
        );
        result.map(|_| objects)
    };
    let text = list(&items);
    let read = read_all(&text).unwrap();
    let expected = read_whole(&text).unwrap();
    assert_eq!(read.len(), 6);
    assert_eq!(read, expected);
    let unknown = &read[2].as_ref().unwrap().unknown_fields;
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    // A duplicate key in a large policy: the reader refuses the list as the parse does.
    let mut refused = items.to_vec();
    refused[3] = policy("p4", "").replacen(r#""cidr":"#, r#""cidr":"1.1.1.1/32","cidr":"#, 1);
    let text = list(&refused);
    assert!(read_all(&text).is_err());
    assert!(read_whole(&text).is_err());
}

/// The same for YAML, as `---` documents and as a `kind: List`: large policies are cut into
/// runs of their own and read without their tree (`parse_block`), and the text reads exactly
/// as the sequential parse reads it.
#[test]
fn large_policies_in_yaml_read_as_the_sequential_parse() {
    let policy = |name: &str, extra: &str| {
        let peers: String = (0..3000)
            .map(|i| {
                format!(
                    "    - ipBlock:\n        cidr: 10.{}.{}.1/32\n",
                    i / 256,
                    i % 256
                )
            })
            .collect();
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: {name}\n\
             spec:\n  podSelector: {{}}\n{extra}  egress:\n  - to:\n{peers}"
        )
    };
    let namespace =
        |name: &str| format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n");
    let objects = [
        namespace("a"),
        policy("p1", ""),
        policy("p2", "  unknownField: 1\n"),
        namespace("b"),
        policy("p3", ""),
    ];
    for large in [&objects[1], &objects[2]] {
        assert!(large.len() >= LARGE_ITEM_BYTES);
        let json = crate::block::single_mapping_as_json(large).expect("one mapping");
        assert!(crate::large_json::read_policy(&json, 0).is_some());
    }
    let documents: String = objects.iter().map(|o| format!("---\n{o}")).collect();
    let list: String = objects
        .iter()
        .map(|o| format!("- {}\n", o.trim_end().replace('\n', "\n  ")))
        .collect();
    let list = format!("apiVersion: v1\nkind: List\nitems:\n{list}");
    for text in [documents, list] {
        let mut read = Vec::new();
        read_each_with(
            &mut Cursor::new(text.as_bytes()),
            SMALL,
            512,
            &|object: ReadObject| object,
            &mut |object| read.push(object),
        )
        .unwrap();
        assert_eq!(read.len(), 5);
        assert_eq!(read, read_whole(&text).unwrap());
        let unknown = &read[2].as_ref().unwrap().unknown_fields;
        assert_eq!(unknown.len(), 1, "{unknown:?}");
    }
}

/// A reader whose text changes once it has been read through once, as a file rewritten in
/// place while the agent reads it.
struct Rewritten {
    first: Cursor<Vec<u8>>,
    second: Cursor<Vec<u8>>,
    passes: usize,
}

impl Read for Rewritten {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.passes < 2 {
            self.first.read(buf)
        } else {
            self.second.read(buf)
        }
    }
}

impl Seek for Rewritten {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        if to == SeekFrom::Start(0) {
            self.passes += 1;
        }
        self.first.seek(to)?;
        self.second.seek(to)
    }
}

#[test]
fn a_text_that_changes_between_the_scan_and_the_parse_is_refused() {
    let before = multidoc(200);
    let after = before.replace("ns-150", "ns-xyz");
    let mut reader = Rewritten {
        first: Cursor::new(before.into_bytes()),
        second: Cursor::new(after.into_bytes()),
        passes: 0,
    };
    let prepare = |read: ReadObject| read;
    let mut count = 0;
    let result = read_each_with(&mut reader, SMALL, 512, &prepare, &mut |_| count += 1);
    assert!(matches!(result, Err(ReadError::Changed)), "{result:?}");
    assert!(
        count > 0,
        "objects were handed on before the change was seen"
    );
}

#[test]
fn digests_do_not_depend_on_how_the_text_was_read() {
    let text = multidoc(5000);
    assert!(text.len() > 2 * DIGEST_BLOCK);
    let digest = text_digest(&text);
    assert_eq!(digest_of(&mut text.as_bytes()).unwrap(), digest);
    let mut slow = BufReader::with_capacity(7, text.as_bytes());
    assert_eq!(digest_of(&mut slow).unwrap(), digest);
    assert_ne!(text_digest(&text[1..]), digest);
}
