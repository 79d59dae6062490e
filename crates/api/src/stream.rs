//! Reading a document's objects as the parser produces them.
//!
//! `kubectl get pods -A -o yaml` prints one `kind: List` document holding every pod. Parsed into a
//! `serde_json::Value` first, 150,000 pods would exist three times over (the value tree, the typed
//! objects, and the lists between), several gigabytes at once. [`Document`] instead converts each
//! object the moment its last byte has been parsed, so only one object's value tree is alive at a
//! time, whatever the size of the list.

use std::fmt;

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::json_depth::{LIST_ITEM_DEPTH, MAX_JSON_DEPTH};
use crate::object::{Object, Read};

/// The objects of one document: a single object, a sequence of objects, or a list kind
/// (`kind: List`, `PodList`, ...) whose `items` are objects. Sequences and lists nest.
pub(crate) struct Document(pub Vec<Read>);

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        DocumentVisitor::yaml().deserialize(deserializer)
    }
}

/// A [`Document`] read from a JSON parser, which refuses what YAML could read differently (see
/// `json.rs`): duplicate keys, numbers that are not integers, and nesting deeper than the YAML
/// parser allows.
pub(crate) struct JsonDocument(pub Vec<Read>);

impl<'de> Deserialize<'de> for JsonDocument {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let visitor = DocumentVisitor {
            json: true,
            depth: 0,
        };
        visitor.deserialize(deserializer).map(|d| JsonDocument(d.0))
    }
}

/// The objects of a run of a JSON list's items, given as one JSON array: read as the items of
/// the list they were cut from are read (at the depth they have there, refusing what
/// [`JsonDocument`] refuses); `None` if refused or not JSON.
///
/// A run that is one object, not an array, is a single large element of the list
/// (`reader.rs` cuts one so): a policy is then read without its tree (`large_json.rs`), anything
/// else as the element it is.
pub(crate) fn json_items(text: &str) -> Option<Vec<Read>> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let single = text.trim_start().starts_with('{');
    if single {
        if let Some(read) = crate::large_json::read_policy(text, LIST_ITEM_DEPTH) {
            return Some(vec![Ok(read)]);
        }
    }
    let visitor = DocumentVisitor {
        json: true,
        depth: if single { LIST_ITEM_DEPTH } else { 1 },
    };
    let document = visitor.deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    Some(document.0)
}

/// The objects of a document already read into a value, as [`Document`] reads them from the
/// parser: nulls hold nothing, sequences and list kinds' `items` are unpacked, anything else is
/// one object (or an error naming what was found).
pub(crate) fn value_objects(value: Value, out: &mut Vec<Read>) {
    match value {
        Value::Null => {}
        Value::Array(items) => {
            for item in items {
                value_objects(item, out);
            }
        }
        Value::Object(mut fields) => {
            let items = fields.remove("items");
            let kind = fields.get("kind").and_then(Value::as_str).unwrap_or("");
            match items {
                Some(items) if is_list_kind(kind) => value_objects(items, out),
                _ => out.push(Object::read(Value::Object(fields))),
            }
        }
        scalar => out.push(Object::read(scalar)),
    }
}

/// Whether `kind` names a list of objects, as kubectl's resource builder decides: `List` or a
/// typed list such as `PodList` from the API server.
pub(crate) fn is_list_kind(kind: &str) -> bool {
    kind.ends_with("List")
}

#[derive(Clone, Copy)]
struct DocumentVisitor {
    /// Read through [`StrictValue`] rather than [`Value`].
    json: bool,
    depth: usize,
}

impl DocumentVisitor {
    fn yaml() -> Self {
        DocumentVisitor {
            json: false,
            depth: 0,
        }
    }

    fn nested(self) -> Self {
        DocumentVisitor {
            depth: self.depth + 1,
            ..self
        }
    }

    /// A scalar where an object was expected: [`Object::read`] names what was found.
    fn scalar(value: Value) -> Document {
        Document(vec![Object::read(value)])
    }

    fn value<'de, A: MapAccess<'de>>(self, map: &mut A) -> Result<Value, A::Error> {
        if self.json {
            map.next_value_seed(StrictValue {
                depth: self.depth + 1,
            })
        } else {
            map.next_value()
        }
    }
}

impl<'de> DeserializeSeed<'de> for DocumentVisitor {
    type Value = Document;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Document, D::Error> {
        if self.json && self.depth > MAX_JSON_DEPTH {
            return Err(de::Error::custom("nested too deeply to read as JSON"));
        }
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DocumentVisitor {
    type Value = Document;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object, a list of objects, or a `kind: List` with items")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Document, E> {
        Ok(Document(Vec::new()))
    }

    fn visit_none<E: de::Error>(self) -> Result<Document, E> {
        Ok(Document(Vec::new()))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Document, E> {
        Ok(Self::scalar(v.into()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Document, E> {
        Ok(Self::scalar(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Document, E> {
        Ok(Self::scalar(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Document, E> {
        if self.json {
            return Err(E::custom("not an integer"));
        }
        Ok(Self::scalar(v.into()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Document, E> {
        Ok(Self::scalar(v.into()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Document, A::Error> {
        let mut objects = Vec::new();
        while let Some(Document(more)) = seq.next_element_seed(self.nested())? {
            objects.extend(more);
        }
        Ok(Document(objects))
    }

    /// An object's fields are kept as values, except a sequence under `items`, which is read as
    /// objects straight away. Whether those were the items of a list is known only once `kind`
    /// has been read, which may come later; if it was not a list, the object is read from its
    /// other fields (no supported kind has `items`) and the items are dropped.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Document, A::Error> {
        let mut fields = Map::new();
        let mut items: Option<Vec<Read>> = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" {
                if items.is_some() && self.json {
                    return Err(de::Error::custom("duplicate key `items`"));
                }
                items = Some(map.next_value_seed(self.nested())?.0);
            } else {
                let value = self.value(&mut map)?;
                if fields.insert(key, value).is_some() && self.json {
                    return Err(de::Error::custom("duplicate key"));
                }
            }
        }
        let kind = fields.get("kind").and_then(Value::as_str).unwrap_or("");
        match items {
            Some(items) if is_list_kind(kind) => Ok(Document(items)),
            _ => Ok(Document(vec![Object::read(Value::Object(fields))])),
        }
    }
}

/// A JSON value read the way the YAML parser would read it, or an error where it might not: a
/// duplicate key (YAML refuses it, JSON parsers keep the last), a number that is not an integer
/// (float spellings and range differ), or nesting deeper than YAML allows.
struct StrictValue {
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        if self.depth > MAX_JSON_DEPTH {
            return Err(de::Error::custom("nested too deeply to read as JSON"));
        }
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Value, E> {
        Err(E::custom("not an integer"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictValue {
            depth: self.depth + 1,
        })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(StrictValue {
                depth: self.depth + 1,
            })?;
            if fields.insert(key, value).is_some() {
                return Err(de::Error::custom("duplicate key"));
            }
        }
        Ok(Value::Object(fields))
    }
}

#[cfg(test)]
mod tests {
    use crate::parse::parse_yaml;
    use crate::ObjectRef;

    fn refs(text: &str) -> Vec<Result<ObjectRef, String>> {
        parse_yaml(text)
            .unwrap()
            .into_iter()
            .map(|o| o.map(|o| o.object_ref()).map_err(|e| e.to_string()))
            .collect()
    }

    #[test]
    fn list_items_are_objects_whatever_the_field_order() {
        let items_first = "items:\n- {apiVersion: v1, kind: Namespace, metadata: {name: a}}\n\
                           apiVersion: v1\nkind: List\n";
        assert_eq!(
            refs(items_first),
            vec![Ok(ObjectRef::new("Namespace", None, "a"))]
        );
        let typed_list = "apiVersion: v1\nkind: NamespaceList\nitems:\n\
                          - {apiVersion: v1, kind: Namespace, metadata: {name: b}}\n";
        assert_eq!(
            refs(typed_list),
            vec![Ok(ObjectRef::new("Namespace", None, "b"))]
        );
    }

    #[test]
    fn lists_nest_and_one_bad_item_stands_alone() {
        let text = "apiVersion: v1\nkind: List\nitems:\n\
                    - {apiVersion: v1, kind: List, items: [{apiVersion: v1, kind: Namespace, metadata: {name: a}}]}\n\
                    - {apiVersion: v1, kind: Namespace}\n\
                    - [{apiVersion: v1, kind: Namespace, metadata: {name: c}}]\n\
                    - just text\n";
        let got = refs(text);
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[0], Ok(ObjectRef::new("Namespace", None, "a")));
        assert!(got[1].as_ref().unwrap_err().contains("metadata.name"));
        assert_eq!(got[2], Ok(ObjectRef::new("Namespace", None, "c")));
        assert!(got[3].as_ref().unwrap_err().contains("found a string"));
    }

    #[test]
    fn items_of_an_object_that_is_not_a_list_are_not_objects() {
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: n}\n\
                    items: [{apiVersion: v1, kind: Namespace, metadata: {name: hidden}}]\n";
        assert_eq!(refs(text), vec![Ok(ObjectRef::new("Namespace", None, "n"))]);
    }

    #[test]
    fn empty_documents_have_no_objects() {
        assert!(refs("---\n---\n").is_empty());
        assert!(refs("").is_empty());
    }
}
