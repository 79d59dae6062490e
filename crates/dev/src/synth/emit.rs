//! Writing a stream of objects in the forms clusters are dumped in: one `kind: List` (what
//! `kubectl get -A -o yaml` prints), `---`-separated YAML documents (what `kubectl apply -f`
//! takes), or kubectl's `-o json` list.
//!
//! The YAML is block style as kubectl prints it (keys sorted, sequence dashes at their key's
//! indentation, two spaces per level), so the reader's fast paths meet the form real dumps have.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::Value;

/// How the objects of one file are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One `kind: List` document, as `kubectl get -A -o yaml` prints it.
    #[default]
    List,
    /// One YAML document per object, `---` before each.
    Multidoc,
    /// One JSON `kind: List`, as `kubectl get -A -o json` prints it.
    Json,
}

impl Format {
    /// The file name extension of this form.
    pub fn extension(self) -> &'static str {
        match self {
            Format::List | Format::Multidoc => "yaml",
            Format::Json => "json",
        }
    }
}

/// Writes objects one at a time in one [`Format`]; [`ObjectStream::finish`] closes the list.
pub struct ObjectStream<'w> {
    out: &'w mut dyn Write,
    format: Format,
    count: usize,
    text: String,
}

impl<'w> ObjectStream<'w> {
    pub fn new(out: &'w mut dyn Write, format: Format) -> io::Result<Self> {
        match format {
            Format::List => out.write_all(b"apiVersion: v1\nitems:\n")?,
            Format::Multidoc => {}
            Format::Json => out.write_all(b"{\n    \"apiVersion\": \"v1\",\n    \"items\": [")?,
        }
        Ok(ObjectStream {
            out,
            format,
            count: 0,
            text: String::new(),
        })
    }

    /// Writes one object.
    pub fn push(&mut self, object: &Value) -> io::Result<()> {
        self.text.clear();
        match self.format {
            Format::List => yaml_sequence_item(object, 0, &mut self.text),
            Format::Multidoc => {
                self.text.push_str("---\n");
                yaml_value_block(object, 0, &mut self.text);
            }
            Format::Json => {
                self.text.push_str(if self.count == 0 {
                    "\n        "
                } else {
                    ",\n        "
                });
                self.text.push_str(&json_pretty(object, 2));
            }
        }
        self.count += 1;
        self.out.write_all(self.text.as_bytes())
    }

    /// Closes the list; returns how many objects were written.
    pub fn finish(self) -> io::Result<usize> {
        match self.format {
            Format::List => {
                if self.count == 0 {
                    // `items:` with nothing after it is null, not an empty list.
                    self.out.write_all(b"  []\n")?;
                }
                self.out
                    .write_all(b"kind: List\nmetadata:\n  resourceVersion: \"\"\n")?
            }
            Format::Multidoc => {}
            Format::Json => self.out.write_all(
                b"\n    ],\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n",
            )?,
        }
        Ok(self.count)
    }
}

/// `value` as kubectl's JSON (four spaces an indentation level), indented `levels` levels
/// deeper after its first line.
fn json_pretty(value: &Value, levels: usize) -> String {
    let mut bytes = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut bytes, formatter);
    value
        .serialize(&mut serializer)
        .expect("a JSON value serializes");
    let text = String::from_utf8(bytes).expect("serde_json writes UTF-8");
    let pad = format!("\n{}", "    ".repeat(levels));
    text.replace('\n', &pad)
}

/// A mapping or other value written as a block at `indent`, starting on a fresh line.
fn yaml_value_block(value: &Value, indent: usize, out: &mut String) {
    match value {
        Value::Object(map) if !map.is_empty() => yaml_mapping(map, indent, false, out),
        other => {
            pad(indent, out);
            yaml_inline(other, out);
            out.push('\n');
        }
    }
}

/// `- item` at `indent`; a mapping's first key goes on the dash's line.
fn yaml_sequence_item(value: &Value, indent: usize, out: &mut String) {
    pad(indent, out);
    out.push_str("- ");
    match value {
        Value::Object(map) if !map.is_empty() => yaml_mapping(map, indent + 2, true, out),
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            for item in items {
                yaml_sequence_item(item, indent + 2, out);
            }
        }
        other => {
            yaml_inline(other, out);
            out.push('\n');
        }
    }
}

/// `key: value` lines at `indent`; `continues_line` when the first key follows a dash.
fn yaml_mapping(
    map: &serde_json::Map<String, Value>,
    indent: usize,
    continues_line: bool,
    out: &mut String,
) {
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 || !continues_line {
            pad(indent, out);
        }
        yaml_string(key, out);
        out.push(':');
        match value {
            Value::Object(inner) if !inner.is_empty() => {
                out.push('\n');
                yaml_mapping(inner, indent + 2, false, out);
            }
            Value::Array(items) if !items.is_empty() => {
                out.push('\n');
                for item in items {
                    yaml_sequence_item(item, indent, out);
                }
            }
            other => {
                out.push(' ');
                yaml_inline(other, out);
                out.push('\n');
            }
        }
    }
}

/// Scalars and empty collections, on the current line.
fn yaml_inline(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => yaml_string(s, out),
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
    }
}

/// A string plain when it cannot be read as anything else, double-quoted otherwise (JSON's
/// escapes are YAML's).
fn yaml_string(s: &str, out: &mut String) {
    if is_plain_safe(s) {
        out.push_str(s);
    } else {
        out.push_str(&serde_json::to_string(s).expect("a string serializes"));
    }
}

/// Letters, digits and `./_-` only, not starting with a sign or dot, and not a number or a word
/// some YAML reader takes for a boolean or null.
fn is_plain_safe(s: &str) -> bool {
    const WORDS: [&str; 12] = [
        "true", "false", "null", "yes", "no", "on", "off", "y", "n", "~", "inf", "nan",
    ];
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '_' | '-'))
        && !s.starts_with(['-', '.', '_'])
        && s.parse::<f64>().is_err()
        && !(s.starts_with('0')
            && s.len() > 1
            && s[1..].starts_with(['x', 'o', 'b', 'X', 'O', 'B']))
        && !WORDS.iter().any(|w| w.eq_ignore_ascii_case(s))
}

fn pad(indent: usize, out: &mut String) {
    out.extend(std::iter::repeat_n(' ', indent));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn written(format: Format, objects: &[Value]) -> String {
        let mut bytes = Vec::new();
        let mut stream = ObjectStream::new(&mut bytes, format).unwrap();
        for object in objects {
            stream.push(object).unwrap();
        }
        assert_eq!(stream.finish().unwrap(), objects.len());
        String::from_utf8(bytes).unwrap()
    }

    fn sample() -> Vec<Value> {
        vec![
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "labels": {"num": "1", "b": "true", "ip": "10.0.0.1"}},
                   "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}], "tolerations": []},
                   "status": {"podIPs": [{"ip": "10.0.0.1"}], "conditions": {}}}),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": {"empty": "", "q": "a: b"}}}),
        ]
    }

    #[test]
    fn every_form_reads_back_as_the_same_objects() {
        let objects = sample();
        let list = written(Format::List, &objects);
        assert!(
            list.starts_with("apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Pod\n"),
            "{list}"
        );
        assert!(
            list.contains("\n      num: \"1\"\n"),
            "numbers-as-text are quoted: {list}"
        );
        assert!(
            list.contains("\n  status:\n    conditions: {}\n    podIPs:\n    - ip: 10.0.0.1\n"),
            "{list}"
        );
        let multidoc = written(Format::Multidoc, &objects);
        assert_eq!(multidoc.matches("---\n").count(), 2);
        let json_text = written(Format::Json, &objects);
        assert!(
            json_text
                .contains("\n    \"items\": [\n        {\n            \"apiVersion\": \"v1\",\n"),
            "{json_text}"
        );

        let parsed_json: Value = serde_json::from_str(&json_text).unwrap();
        assert_eq!(parsed_json["items"], Value::Array(objects.clone()));
        let parsed_list: Value = serde_saphyr::from_str(&list).unwrap();
        assert_eq!(parsed_list["items"], Value::Array(objects.clone()));
        let parsed_docs: Vec<Value> = serde_saphyr::from_multiple(&multidoc).unwrap();
        assert_eq!(parsed_docs, objects);
    }

    #[test]
    fn an_empty_list_is_a_list() {
        for format in [Format::List, Format::Json] {
            let text = written(format, &[]);
            let parsed: Value = serde_saphyr::from_str(&text).unwrap();
            assert_eq!(parsed["items"], json!([]), "{format:?}: {text}");
        }
    }
}
