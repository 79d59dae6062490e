//! Every fast way of reading (pieces in parallel, the block reader, the JSON reader) gives exactly
//! what the sequential parse gives, objects and error messages alike, on streams built from
//! tricky parts: `---` inside block scalars and quotes, `...` ends, comments, CRLF, a byte order
//! mark, tabs, flow style, anchors, spellings that resolve to other types, and broken syntax.

use proptest::prelude::*;

use super::*;

/// Cut at every opportunity: pieces of a few dozen bytes, on two workers whatever the machine.
const FINE: Cutting = Cutting {
    min_bytes: 0,
    max_piece_bytes: 48,
    workers: 2,
};

type Parsed = Result<Vec<Result<Object, ValidationError>>, YamlError>;

fn fast(text: &str) -> Parsed {
    let mut objects = Vec::new();
    let ignore = |read| FieldValidation::Ignore.apply(read);
    parse_each_with(text, FINE, ignore, &mut |o| objects.push(o))?;
    Ok(objects)
}

/// The stream read from a reader in pieces (`reader.rs`), `buffer` bytes at a time; checks the
/// digest it returns.
fn streamed(text: &str, buffer: usize) -> Parsed {
    let mut objects = Vec::new();
    let ignore = |read| FieldValidation::Ignore.apply(read);
    let mut reader = std::io::Cursor::new(text.as_bytes());
    match crate::reader::read_each_with(&mut reader, FINE, buffer, &ignore, &mut |o| {
        objects.push(o)
    }) {
        Ok(digest) => {
            assert_eq!(digest, crate::reader::text_digest(text));
            Ok(objects)
        }
        Err(crate::reader::ReadError::Yaml { error, digest }) => {
            assert_eq!(digest, crate::reader::text_digest(text));
            Err(error)
        }
        Err(other) => panic!("{other}"),
    }
}

fn assert_same(text: &str) {
    let sequential = parse_whole(text);
    assert_eq!(fast(text), sequential, "cut finely: {text:?}");
    assert_eq!(parse_yaml(text), sequential, "as shipped: {text:?}");
    for buffer in [5, 64] {
        assert_eq!(
            streamed(text, buffer),
            sequential,
            "read in pieces of {buffer} bytes: {text:?}"
        );
    }
}

/// Label values and keys whose YAML reading is easy to get wrong.
const SCALARS: &[&str] = &[
    "web",
    "a b",
    "true",
    "True",
    "false",
    "null",
    "Null",
    "~",
    "yes",
    "no",
    "on",
    "y",
    "1",
    "01",
    "1.5",
    "-1",
    "1_000",
    "0x1f",
    "10.0.0.1",
    "1.2.3",
    ".inf",
    "nan",
    "12:30",
    "a:b",
    "a: b",
    "a #b",
    "a#b",
    "---",
    "...",
    "- x",
    "'q'",
    "\"d\"",
    "\"\"",
    "''",
    "\"a\\tb\"",
    "\"\\u00e9\"",
    "\"\\ud83d\\ude00\"",
    "'it''s'",
    "é",
    "x\ty",
    "[a]",
    "{}",
    "[]",
    "&x a",
    "*x",
    "!!str 5",
    "|",
    ">",
    "# c",
    "a # c",
    "18446744073709551616",
    "9223372036854775807",
    "4c86-ab",
    "100m",
    "1e5x",
    "1e5",
    "2024-01-01",
    "0b12",
    "1.",
];

fn scalar() -> impl Strategy<Value = String> {
    prop::sample::select(SCALARS).prop_map(str::to_owned)
}

/// One document: a namespace with labels (some of them tricky), a pod, a list of namespaces, a
/// block scalar holding a `---` line, a flow mapping, or a bare scalar.
fn document() -> impl Strategy<Value = String> {
    let labels = prop::collection::vec((scalar(), scalar()), 0..4);
    prop_oneof![
        (0..1000u32, labels).prop_map(|(n, labels)| {
            let mut text = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns-{n}\n  labels:\n");
            for (i, (key, value)) in labels.iter().enumerate() {
                let key = if i % 2 == 0 { format!("k{i}") } else { key.clone() };
                text.push_str(&format!("    {key}: {value}\n"));
            }
            text
        }),
        (0..1000u32, scalar()).prop_map(|(n, ip)| format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p-{n}\n  namespace: x\n  # a comment\nspec:\n  containers:\n  - name: c\n    ports:\n    - containerPort: 80\n      name: http\n  nodeName: n1\nstatus:\n  podIP: {ip}\n"
        )),
        prop::collection::vec(0..1000u32, 0..3).prop_map(|ns| {
            let mut text = String::from("apiVersion: v1\nitems:\n");
            for n in ns {
                text.push_str(&format!("- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: l-{n}\n"));
            }
            text + "kind: List\n"
        }),
        (0..1000u32).prop_map(|n| format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: b-{n}\n  annotations:\n    note: |\n      line\n      ---\n      more\n"
        )),
        (0..1000u32).prop_map(|n| format!(
            "{{apiVersion: v1, kind: Namespace, metadata: {{name: f-{n}, labels: {{a: \"---\"}}}}}}\n"
        )),
        scalar().prop_map(|s| format!("{s}\n")),
    ]
}

const SEPARATORS: &[&str] = &[
    "---\n",
    "--- \n",
    "--- # next\n",
    "...\n---\n",
    "---\n# c\n\n",
];

fn stream() -> impl Strategy<Value = String> {
    (
        prop::collection::vec((document(), prop::sample::select(SEPARATORS)), 1..6),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(documents, leading, crlf, bom)| {
            let mut text = String::new();
            if bom {
                text.push('\u{feff}');
            }
            for (i, (document, separator)) in documents.iter().enumerate() {
                if i > 0 || leading {
                    text.push_str(separator);
                }
                text.push_str(document);
            }
            if crlf {
                text = text.replace('\n', "\r\n");
            }
            text
        })
}

proptest! {
    #[test]
    fn every_way_of_reading_a_yaml_stream_equals_the_sequential_parse(text in stream()) {
        assert_same(&text);
    }

    #[test]
    fn json_read_by_the_json_parser_equals_the_yaml_parse(
        names in prop::collection::vec(0..100u32, 0..6),
        value in prop::sample::select(&[
            "\"a\"", "1", "-0", "1.5", "1e3", "18446744073709551616", "true", "null", "\"\\ud83d\\ude00\"",
            "\"\\u00e9\\/\\n\"", "\"\u{7f}\"", "{}", "[]", "\"x\", \"k\": \"dup\"", "[1,2]",
        ][..]),
        compact in any::<bool>(),
        kind in prop::sample::select(&["List", "NamespaceList", "Namespace"][..]),
        kind_first in any::<bool>(),
        bom in any::<bool>(),
        damage in prop::sample::select(&["", ",", "[", "]", "}", "x", "\"", "\\"][..]),
        at in any::<prop::sample::Index>(),
    ) {
        let items: Vec<String> = names
            .iter()
            .map(|n| {
                let item = format!(
                    "{{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {{\"name\": \"j-{n}\", \"labels\": {{\"k\": {value}}}}}}}"
                );
                // Some items are lists themselves, or strings holding the JSON punctuation cuts
                // are made at.
                match n % 5 {
                    0 => format!("{{\"kind\": \"List\", \"items\": [{item}, {item}]}}"),
                    1 => format!("{{\"kind\": \"Namespace\", \"metadata\": {{\"name\": \"s-{n}\", \"labels\": {{\"k\": \"],[}}{{,\\\"\"}}}}}}"),
                    _ => item,
                }
            })
            .collect();
        let kind_field = format!("    \"kind\": \"{kind}\"");
        let items_field = format!("    \"items\": [\n{}\n    ]", items.join(",\n"));
        let fields = if kind_first {
            [kind_field, items_field]
        } else {
            [items_field, kind_field]
        };
        let mut text = format!(
            "{{\n    \"apiVersion\": \"v1\",\n{},\n{}\n}}\n",
            fields[0], fields[1]
        );
        if compact {
            text = text.replace(['\n', ' '], "");
        }
        if bom {
            text.insert(0, '\u{feff}');
        }
        if !damage.is_empty() {
            // One character of broken JSON somewhere (at a char boundary).
            let mut i = at.index(text.len());
            while !text.is_char_boundary(i) {
                i -= 1;
            }
            text.insert_str(i, damage);
        }
        assert_same(&text);
    }
}

#[test]
fn the_fast_readers_are_used_where_they_apply() {
    let list = "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: a\nkind: List\n";
    assert!(parse_block(list).is_some());
    assert!(parse_json("{\"kind\": \"List\", \"items\": []}").is_some());
    // Flow style is the general parser's.
    assert!(parse_block("{kind: List, items: []}").is_none());
}
