//! Reads a list page or a watch event straight from the response bytes, keeping of each object
//! only the fields netpol reads of its kind: a pod's `managedFields`, annotations, container
//! spec (env, probes, resources, mounts) and most of its status are skipped by the parser as it
//! goes (serde's `IgnoredAny`: no allocation), never built as a JSON tree.
//!
//! The projection keeps any JSON shape: a field it keeps is copied as it stands, whatever its
//! type, so an object whose kept fields are wrong is reported by the one typed decode that
//! follows ([`super::decode`]), naming the object and the field, exactly as before; and one odd
//! object never fails its page. What is kept is a superset of what [`netpol_api::Object`]'s
//! types read of each kind (everything of a policy but its unread metadata), so an object reads
//! the same projected or whole (see the tests).

use std::fmt;
use std::marker::PhantomData;

use netpol_api::annotations::{ENFORCEMENT_ANNOTATION, READ_ANNOTATIONS};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Number, Value};

/// What to keep of a JSON value.
#[derive(Debug)]
pub enum Shape {
    /// All of it.
    Whole,
    /// Nothing (the field is left out).
    Skip,
    /// Of an object: the fields named, each in its shape, and every other field in `others`.
    /// Of an array: each element so. Anything else is kept whole.
    Fields {
        named: &'static [(&'static str, Shape)],
        others: &'static Shape,
    },
}

/// Metadata as netpol reads it: all of it but what `netpol_api`'s prune drops before reading
/// (`managedFields`, and annotations, where `last-applied-configuration` repeats the object),
/// except the annotations netpol reads (a policy's audit mode) and the one the authoring tools
/// read of a listed object (`lint --cluster`).
const METADATA: Shape = Shape::Fields {
    named: &[
        ("managedFields", Shape::Skip),
        (
            "annotations",
            Shape::Fields {
                named: &[
                    (ENFORCEMENT_ANNOTATION, Shape::Whole),
                    (LINT_IGNORE_ANNOTATION, Shape::Whole),
                ],
                others: &Shape::Skip,
            },
        ),
    ],
    others: &Shape::Whole,
};

// Every annotation `netpol_api` reads is kept above.
const _: () = assert!(READ_ANNOTATIONS.len() == 1);

/// The annotation with which an object acknowledges lint findings (the CLI's
/// `LINT_IGNORE_ANNOTATION`, which depends on this crate, not the other way round).
pub const LINT_IGNORE_ANNOTATION: &str = "netpol.io/lint-ignore";

/// A pod as `netpol_api::Pod` reads it.
pub const POD: Shape = Shape::Fields {
    named: &[
        ("apiVersion", Shape::Whole),
        ("kind", Shape::Whole),
        ("metadata", METADATA),
        (
            "spec",
            Shape::Fields {
                named: &[
                    ("nodeName", Shape::Whole),
                    ("hostNetwork", Shape::Whole),
                    (
                        "containers",
                        Shape::Fields {
                            named: &[("name", Shape::Whole), ("ports", Shape::Whole)],
                            others: &Shape::Skip,
                        },
                    ),
                ],
                others: &Shape::Skip,
            },
        ),
        (
            "status",
            Shape::Fields {
                named: &[
                    ("phase", Shape::Whole),
                    ("podIP", Shape::Whole),
                    ("podIPs", Shape::Whole),
                ],
                others: &Shape::Skip,
            },
        ),
    ],
    others: &Shape::Skip,
};

/// A node as `netpol_api::Node` reads it (a real node's status lists every image it holds).
pub const NODE: Shape = Shape::Fields {
    named: &[
        ("apiVersion", Shape::Whole),
        ("kind", Shape::Whole),
        ("metadata", METADATA),
        (
            "status",
            Shape::Fields {
                named: &[("addresses", Shape::Whole)],
                others: &Shape::Skip,
            },
        ),
    ],
    others: &Shape::Skip,
};

/// Any other kind (namespaces, policies): whole but for its unread metadata. A policy's unknown
/// fields are reported under strict field validation, so none of them is dropped.
pub const OTHER: Shape = Shape::Fields {
    named: &[("metadata", METADATA)],
    others: &Shape::Whole,
};

/// The shape read of objects of `kind` (as spelled in `kind:`).
pub fn shape_of(kind: &str) -> &'static Shape {
    match kind {
        "Pod" => &POD,
        "Node" => &NODE,
        _ => &OTHER,
    }
}

/// A shape known from a type, for a decode that takes a type (kube's watch events).
pub trait ShapeOf {
    const SHAPE: &'static Shape;
}

/// [`POD`] as a type.
#[derive(Clone, Debug)]
pub struct PodShape;
impl ShapeOf for PodShape {
    const SHAPE: &'static Shape = &POD;
}

/// [`NODE`] as a type.
#[derive(Clone, Debug)]
pub struct NodeShape;
impl ShapeOf for NodeShape {
    const SHAPE: &'static Shape = &NODE;
}

/// [`OTHER`] as a type.
#[derive(Clone, Debug)]
pub struct OtherShape;
impl ShapeOf for OtherShape {
    const SHAPE: &'static Shape = &OTHER;
}

/// An object read in the shape `S`.
#[derive(Clone, Debug)]
pub struct Projected<S>(pub Value, PhantomData<S>);

impl<'de, S: ShapeOf> Deserialize<'de> for Projected<S> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        S::SHAPE
            .deserialize(deserializer)
            .map(|value| Projected(value, PhantomData))
    }
}

/// A list page's items, each read in `shape` straight from `json`, and the list's metadata.
pub fn list_page<M: for<'de> Deserialize<'de> + Default>(
    json: &(impl AsRef<[u8]> + ?Sized),
    shape: &'static Shape,
) -> serde_json::Result<(M, Vec<Value>)> {
    list_page_each(json, shape, &mut |value| value)
}

/// A list page's items, each read in `shape` straight from `json` and handed to `each` before
/// the next is read, and the list's metadata. A caller that keeps less of an object than its
/// JSON tree (a decoded pod) holds one tree at a time, not a page of them.
pub fn list_page_each<M: for<'de> Deserialize<'de> + Default, T>(
    json: &(impl AsRef<[u8]> + ?Sized),
    shape: &'static Shape,
    each: &mut dyn FnMut(Value) -> T,
) -> serde_json::Result<(M, Vec<T>)> {
    let mut deserializer = serde_json::Deserializer::from_slice(json.as_ref());
    let page = ListSeed {
        shape,
        each,
        metadata: PhantomData,
    }
    .deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(page)
}

/// A list (`{"metadata": .., "items": [..]}`, other fields skipped).
struct ListSeed<'f, M, T> {
    shape: &'static Shape,
    each: &'f mut dyn FnMut(Value) -> T,
    metadata: PhantomData<M>,
}

impl<'de, M: Deserialize<'de> + Default, T> DeserializeSeed<'de> for ListSeed<'_, M, T> {
    type Value = (M, Vec<T>);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, M: Deserialize<'de> + Default, T> Visitor<'de> for ListSeed<'_, M, T> {
    type Value = (M, Vec<T>);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list with metadata and items")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut metadata = None;
        let mut items = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "metadata" => metadata = Some(map.next_value::<Option<M>>()?),
                "items" => {
                    items = map.next_value_seed(Items {
                        shape: self.shape,
                        each: &mut *self.each,
                    })?
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((metadata.flatten().unwrap_or_default(), items))
    }
}

/// A list's items (null reads as none), each handed to `each` as soon as it is read.
struct Items<'f, T> {
    shape: &'static Shape,
    each: &'f mut dyn FnMut(Value) -> T,
}

impl<'de, T> DeserializeSeed<'de> for Items<'_, T> {
    type Value = Vec<T>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, T> Visitor<'de> for Items<'_, T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list's items")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(self.shape)? {
            items.push((self.each)(item));
        }
        Ok(items)
    }
}

/// One list item read from its JSON text (see [`super::kube_api::PageStream`]): one of at least
/// [`netpol_api::large_json::LARGE_ITEM_BYTES`] handed to `large` first, which reads a policy
/// that large without its JSON tree (a 1.5 MB NetworkPolicy of `ipBlock` peers is about 60 MB
/// as a tree, 40 bytes a peer decoded) or answers `None` to have it read as any other: in
/// `shape`, and handed to `each`.
pub fn read_item<T>(
    text: &[u8],
    shape: &'static Shape,
    each: impl FnOnce(Value) -> T,
    large: impl FnOnce(&str) -> Option<T>,
) -> serde_json::Result<T> {
    if text.len() >= netpol_api::large_json::LARGE_ITEM_BYTES {
        if let Some(item) = std::str::from_utf8(text).ok().and_then(large) {
            return Ok(item);
        }
    }
    let mut item = serde_json::Deserializer::from_slice(text);
    let value = shape.deserialize(&mut item)?;
    item.end()?;
    Ok(each(value))
}

impl<'de> DeserializeSeed<'de> for &'static Shape {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        match self {
            Shape::Whole | Shape::Skip => Value::deserialize(deserializer),
            Shape::Fields { .. } => deserializer.deserialize_any(ShapeVisitor(self)),
        }
    }
}

/// Builds the kept part of a value as `serde_json::Value`'s own visitor would build all of it.
struct ShapeVisitor(&'static Shape);

impl<'de> Visitor<'de> for ShapeVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.0.deserialize(deserializer)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut elements = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(element) = seq.next_element_seed(self.0)? {
            elements.push(element);
        }
        Ok(Value::Array(elements))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let Shape::Fields { named, others } = self.0 else {
            unreachable!("only a Fields shape visits")
        };
        let mut object = Map::new();
        while let Some((key, shape)) = map.next_key_seed(Key { named, others })? {
            match key {
                Some(key) => {
                    let value = map.next_value_seed(shape)?;
                    object.insert(key, value);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(object))
    }
}

/// A field's name and its shape; the name is not copied for a field that is skipped.
struct Key {
    named: &'static [(&'static str, Shape)],
    others: &'static Shape,
}

impl Key {
    fn read(&self, name: &str) -> (Option<String>, &'static Shape) {
        let shape = self
            .named
            .iter()
            .find(|(known, _)| *known == name)
            .map_or(self.others, |(_, shape)| shape);
        match shape {
            Shape::Skip => (None, shape),
            _ => (Some(name.to_owned()), shape),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Key {
    type Value = (Option<String>, &'static Shape);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = (Option<String>, &'static Shape);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E>(self, name: &str) -> Result<Self::Value, E> {
        Ok(self.read(name))
    }
}
