//! A manifest file's objects read as the parser produces them: each object is read
//! ([`content_of`]) the moment its last byte is parsed and its value tree dropped, so that the
//! items of a 150,000-pod `kind: List` never all exist as values (about 9 KB a pod). Positions
//! are those of reading the file into values and unpacking them (`documents[0].items[3]`,
//! `documents[1][2]`), and so is everything else, with one exception below.
//!
//! `kubectl get -o yaml` writes a list's `items` before its `kind`, so whether a sequence under
//! `items` holds a list's objects is known only at the end of the mapping. Its items are read as
//! objects straight away; if the mapping turns out not to be a list, it is read with an empty
//! `items` sequence instead: no kind netpol reads has that field, so only its presence can
//! matter (strict field validation refuses it by name, whatever it holds).

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::prepared::{content_of, lint_ignore_of, Content, Origin, ReadOne};

/// The objects of a YAML (or JSON) text, each named by its document and position, or why the
/// text is not YAML.
pub fn read_objects(file: &Path, text: &str) -> Result<Vec<ReadOne>, String> {
    let documents: Vec<Document> =
        serde_saphyr::from_multiple_with_options(text, netpol_api::yaml_options_for(text.len()))
            .map_err(|e| format!("invalid YAML: {e}"))?;
    let file: Arc<Path> = Arc::from(file);
    let mut objects = Vec::new();
    for (i, Document(read)) in documents.into_iter().enumerate() {
        objects.extend(read.into_iter().map(|unplaced| ReadOne {
            origin: Origin {
                file: file.clone(),
                at: format!("documents[{i}]{}", unplaced.at),
                what: unplaced.what,
                lint_ignore: unplaced.lint_ignore,
            },
            content: unplaced.content,
        }));
    }
    Ok(objects)
}

/// An object read, its position below its document (`.items[3]`, empty for the document).
struct Unplaced {
    at: String,
    what: String,
    lint_ignore: Option<Arc<str>>,
    content: Content,
}

fn unplaced(at: String, value: Value) -> Unplaced {
    let lint_ignore = lint_ignore_of(&value);
    let (what, content) = content_of(value);
    Unplaced {
        at,
        what,
        lint_ignore,
        content,
    }
}

/// The objects of one document.
struct Document(Vec<Unplaced>);

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Objects { at: String::new() }
            .deserialize(deserializer)
            .map(Document)
    }
}

/// The objects of a value at `at`: nothing for a null, the objects of each item of a sequence
/// (`at[i]`) or of a list kind's `items` (`at.items[i]`), else the value as one object.
struct Objects {
    at: String,
}

impl Objects {
    fn one(self, value: Value) -> Vec<Unplaced> {
        vec![unplaced(self.at, value)]
    }
}

impl<'de> DeserializeSeed<'de> for Objects {
    type Value = Vec<Unplaced>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Objects {
    type Value = Vec<Unplaced>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object, a list of objects, or a `kind: List` with items")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(self.one(v.into()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(self.one(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(self.one(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(self.one(v.into()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.one(v.into()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut objects = Vec::new();
        let mut i = 0;
        while let Some(more) = seq.next_element_seed(Objects {
            at: format!("{}[{i}]", self.at),
        })? {
            objects.extend(more);
            i += 1;
        }
        Ok(objects)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = Map::new();
        let mut items: Option<Items> = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" {
                items = Some(map.next_value_seed(ItemsSeed { at: &self.at })?);
            } else {
                let value: Value = map.next_value()?;
                fields.insert(key, value);
            }
        }
        let is_list = fields
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(is_list_kind);
        match items {
            Some(Items::Objects(objects)) if is_list => Ok(objects),
            Some(Items::Objects(_)) => {
                fields.insert("items".into(), Value::Array(Vec::new()));
                Ok(self.one(Value::Object(fields)))
            }
            Some(Items::Value(value)) => {
                fields.insert("items".into(), value);
                Ok(self.one(Value::Object(fields)))
            }
            None => Ok(self.one(Value::Object(fields))),
        }
    }
}

/// Whether `kind` names a list of objects, as kubectl's resource builder (and netpol-api)
/// decide: `List` or a typed list such as `PodList`.
fn is_list_kind(kind: &str) -> bool {
    kind.ends_with("List")
}

/// What a mapping holds under `items`: a sequence, read as objects, or any other value.
enum Items {
    Objects(Vec<Unplaced>),
    Value(Value),
}

struct ItemsSeed<'a> {
    /// The position of the mapping.
    at: &'a str,
}

impl<'de> DeserializeSeed<'de> for ItemsSeed<'_> {
    type Value = Items;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Items, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ItemsSeed<'_> {
    type Value = Items;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Items, A::Error> {
        let mut objects = Vec::new();
        let mut i = 0;
        while let Some(more) = seq.next_element_seed(Objects {
            at: format!("{}.items[{i}]", self.at),
        })? {
            objects.extend(more);
            i += 1;
        }
        Ok(Items::Objects(objects))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Items, A::Error> {
        Value::deserialize(de::value::MapAccessDeserializer::new(map)).map(Items::Value)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Items, E> {
        Ok(Items::Value(Value::Null))
    }

    fn visit_none<E: de::Error>(self) -> Result<Items, E> {
        Ok(Items::Value(Value::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Items, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Items, E> {
        Ok(Items::Value(v.into()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Items, E> {
        Ok(Items::Value(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Items, E> {
        Ok(Items::Value(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Items, E> {
        Ok(Items::Value(v.into()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Items, E> {
        Ok(Items::Value(v.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::objects::sourced_at;

    /// Positions and what is read, as reading the whole text into values and unpacking it gives.
    fn whole(text: &str) -> Vec<String> {
        let documents: Vec<Value> = serde_saphyr::from_multiple_with_options(
            text,
            netpol_api::yaml_options_for(text.len()),
        )
        .unwrap();
        sourced_at(Path::new("f.yaml"), Value::Array(documents), "documents")
            .into_iter()
            .map(|s| describe(ReadOne::of(s)))
            .collect()
    }

    fn streamed(text: &str) -> Vec<String> {
        read_objects(Path::new("f.yaml"), text)
            .unwrap()
            .into_iter()
            .map(describe)
            .collect()
    }

    fn describe(one: ReadOne) -> String {
        let content = match one.content {
            Content::Object { read, owner } => match read {
                Ok(read) => format!(
                    "{:?} unknown {:?} owner {:?}",
                    read.object.object_ref(),
                    read.unknown_fields,
                    owner
                ),
                Err(e) => format!("refused {e}"),
            },
            Content::Workload { template, refused } => {
                format!("workload {:?} {refused}", template.map(|t| t.pod))
            }
            Content::Other { kind, refused } => format!("other {kind} {refused}"),
        };
        format!(
            "{}: {} {content}",
            one.origin.file.display(),
            one.origin.describe()
        )
    }

    #[test]
    fn objects_are_read_as_whole_values_would_be_with_their_positions() {
        let text = "\
apiVersion: v1
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: a, namespace: x, labels: {pod-template-hash: h},
    ownerReferences: [{kind: ReplicaSet, name: web-h}]}
  status: {podIP: 10.0.0.1}
- apiVersion: v1
  kind: List
  items:
  - {apiVersion: v1, kind: Namespace, metadata: {name: y}}
  - null
  - [{apiVersion: v1, kind: Namespace, metadata: {name: z}}]
- {apiVersion: apps/v1, kind: Deployment, metadata: {name: d},
   spec: {template: {metadata: {labels: {app: d}}, spec: {containers: []}}}}
- {apiVersion: v1, kind: Service, metadata: {name: s}}
kind: List
metadata: {}
---
---
- {apiVersion: v1, kind: Namespace, metadata: {name: w}}
- 7
- just text
---
kind: PodList
items: {not: a sequence}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: p, namespace: x}
spec: {podSelector: {}, egres: []}
items: [{kind: Namespace, metadata: {name: not-an-item}}]
---
items: [{apiVersion: v1, kind: Namespace, metadata: {name: v}}]
kind: NamespaceList
";
        let streamed = streamed(text);
        assert_eq!(streamed, whole(text));
        let at: Vec<&str> = streamed
            .iter()
            .map(|s| s.split(' ').nth(1).unwrap())
            .collect();
        assert_eq!(
            at,
            [
                "documents[0].items[0]",
                "documents[0].items[1].items[0]",
                "documents[0].items[1].items[2][0]",
                "documents[0].items[2]",
                "documents[0].items[3]",
                "documents[1][0]",
                "documents[1][1]",
                "documents[1][2]",
                "documents[2]",
                "documents[3]",
                "documents[4].items[0]",
            ]
        );
        // A mapping that is not a list keeps `items`: strict validation names it.
        assert!(
            streamed[9].contains("\"items\"") || streamed[9].contains("items"),
            "{}",
            streamed[9]
        );
    }

    #[test]
    fn broken_yaml_is_an_error() {
        let e = read_objects(Path::new("f.yaml"), "kind: [Namespace\n")
            .err()
            .unwrap();
        assert!(e.starts_with("invalid YAML: "), "{e}");
    }
}
