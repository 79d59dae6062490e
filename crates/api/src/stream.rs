//! Reading a document's objects as the parser produces them.
//!
//! `kubectl get pods -A -o yaml` prints one `kind: List` document holding every pod. Parsed into a
//! `serde_json::Value` first, 150,000 pods would exist three times over (the value tree, the typed
//! objects, and the lists between), several gigabytes at once. [`Document`] instead converts each
//! object the moment its last byte has been parsed, so only one object's value tree is alive at a
//! time, whatever the size of the list.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::error::ValidationError;
use crate::fields::FieldValidation;
use crate::object::Object;

/// The objects of one document: a single object, a sequence of objects, or a list kind
/// (`kind: List`, `PodList`, ...) whose `items` are objects. Sequences and lists nest. Objects
/// are read under `STRICT` field validation or not (a type parameter, since the YAML parser
/// takes a `Deserialize` type, not a seed).
pub(crate) struct Document<const STRICT: bool>(pub Vec<Result<Object, ValidationError>>);

impl<'de, const STRICT: bool> Deserialize<'de> for Document<STRICT> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DocumentVisitor::<STRICT>(PhantomData))
    }
}

/// Whether documents of this validation are read with `STRICT`.
pub(crate) fn is_strict(validation: FieldValidation) -> bool {
    validation == FieldValidation::Strict
}

/// Whether `kind` names a list of objects, as kubectl's resource builder decides: `List` or a
/// typed list such as `PodList` from the API server.
pub(crate) fn is_list_kind(kind: &str) -> bool {
    kind.ends_with("List")
}

struct DocumentVisitor<const STRICT: bool>(PhantomData<()>);

impl<const STRICT: bool> DocumentVisitor<STRICT> {
    /// Reads one object under this document's field validation.
    fn object(value: Value) -> Result<Object, ValidationError> {
        let validation = if STRICT {
            FieldValidation::Strict
        } else {
            FieldValidation::Ignore
        };
        Object::from_value_with(value, validation)
    }

    /// A scalar where an object was expected: [`Object::from_value`] names what was found.
    fn scalar(value: Value) -> Document<STRICT> {
        Document(vec![Self::object(value)])
    }
}

impl<'de, const STRICT: bool> Visitor<'de> for DocumentVisitor<STRICT> {
    type Value = Document<STRICT>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object, a list of objects, or a `kind: List` with items")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Document<STRICT>, E> {
        Ok(Document(Vec::new()))
    }

    fn visit_none<E: de::Error>(self) -> Result<Document<STRICT>, E> {
        Ok(Document(Vec::new()))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Document<STRICT>, E> {
        Ok(Self::scalar(v.into()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Document<STRICT>, E> {
        Ok(Self::scalar(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Document<STRICT>, E> {
        Ok(Self::scalar(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Document<STRICT>, E> {
        Ok(Self::scalar(v.into()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Document<STRICT>, E> {
        Ok(Self::scalar(v.into()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Document<STRICT>, A::Error> {
        let mut objects = Vec::new();
        while let Some(Document(more)) = seq.next_element::<Document<STRICT>>()? {
            objects.extend(more);
        }
        Ok(Document(objects))
    }

    /// An object's fields are kept as values, except a sequence under `items`, which is read as
    /// objects straight away. Whether those were the items of a list is known only once `kind`
    /// has been read, which may come later; if it was not a list, the object is read from its
    /// other fields (no supported kind has `items`) and the items are dropped.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Document<STRICT>, A::Error> {
        let mut fields = Map::new();
        let mut items: Option<Vec<Result<Object, ValidationError>>> = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" {
                items = Some(map.next_value::<Document<STRICT>>()?.0);
            } else {
                fields.insert(key, map.next_value()?);
            }
        }
        let kind = fields.get("kind").and_then(Value::as_str).unwrap_or("");
        match items {
            Some(items) if is_list_kind(kind) => Ok(Document(items)),
            _ => Ok(Document(vec![Self::object(Value::Object(fields))])),
        }
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
