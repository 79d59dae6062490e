//! A large JSON policy read straight into its typed form, without its JSON tree.
//!
//! Every other object is read as a `serde_json::Value` tree first ([`crate::stream`]), which is
//! what lets one reader serve YAML and JSON alike. For a CIDR-heavy policy the tree is the whole
//! cost: a NetworkPolicy `ipBlock` peer is two one-entry maps, about 1.5 KB as a tree against
//! 40 bytes once read, so one 1.9 MB policy of 50,000 peers was 80 MB while it was read, and
//! five policies read by two threads added 155 MB to an agent whose goal is 50 (issue 33).
//!
//! Here a policy of at least [`LARGE_ITEM_BYTES`] is read twice from its JSON text, neither time
//! building a tree. The text is an item of a JSON list (`reader.rs` cuts it into a run of its
//! own), a YAML document or list item the block reader wrote as JSON (`parse.rs`), or an item of
//! an API server's list page (the agent's projection). It is read once to check what the tree
//! reader would refuse (duplicate keys, numbers that are not integers, nesting deeper than YAML
//! allows: see `json.rs`) and to read its `kind` and `apiVersion`; then straight into the kind's
//! type, with its unknown fields recorded as the tree reader records them. What the tree reader does to an
//! object before its typed read (the namespace default, dropping the metadata nobody reads) is
//! done to the typed object after. Anything this path would not read exactly as the tree reader
//! does (another kind, a wrong `apiVersion`, an error of any sort) is left to the tree reader,
//! so errors keep their words, and the tests check both readers agree wherever this one reads.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::annotations::READ_ANNOTATIONS;
use crate::json_depth::{LIST_ITEM_DEPTH, MAX_JSON_DEPTH};
use crate::object::{Object, ReadObject};

/// List items at least this large are read here (when they are policies). Smaller ones gain
/// little, and the tree reader is the one every other input takes.
pub const LARGE_ITEM_BYTES: usize = 64 << 10;

/// `text`, one JSON object that is an item of a list at nesting `depth` (the depth the tree
/// reader gives it), read as the tree reader would read it; `None` where this reader might read
/// it otherwise, or not at all: the caller then reads it through its tree.
pub(crate) fn read_policy(text: &str, depth: usize) -> Option<ReadObject> {
    read_with_defaults(text, depth, None)
}

/// An item of a list page from the API server (`text`, at least [`LARGE_ITEM_BYTES`] to be
/// worth it) read as the tree reader reads it once the kind and version of the list are filled
/// in where the item has none (the API server leaves them out of a built-in kind's items), with
/// its unknown fields dropped; `None` where the tree reader is to read it.
pub fn read_listed_policy(text: &str, kind: &str, api_version: &str) -> Option<Object> {
    read_with_defaults(text, LIST_ITEM_DEPTH, Some((kind, api_version))).map(|read| read.object)
}

fn read_with_defaults(
    text: &str,
    depth: usize,
    defaults: Option<(&str, &str)>,
) -> Option<ReadObject> {
    let head = strict_head(text, depth)?;
    // A top-level `items` is read as nested objects by the tree reader, never reported.
    if head.items {
        return None;
    }
    let (kind, api_version) = match defaults {
        Some((kind, api_version)) => (
            head.kind.unwrap_or_else(|| kind.to_owned()),
            head.api_version.unwrap_or_else(|| api_version.to_owned()),
        ),
        None => (head.kind?, head.api_version?),
    };
    let read = crate::object::text_reader(&kind, &api_version)?;
    let mut unknown = Vec::new();
    let mut object = {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let object = read(&mut deserializer, &mut unknown)?;
        deserializer.end().ok()?;
        object
    };
    as_tree_reader_leaves(&mut object);
    if object.metadata().name.as_deref().is_none_or(str::is_empty) {
        return None;
    }
    object.validate().ok()?;
    let object_ref = object.object_ref();
    unknown.retain(|path| !is_dropped_metadata(path));
    Some(ReadObject {
        unknown_fields: unknown
            .into_iter()
            .map(|path| crate::fields::unknown_field(&object_ref, path))
            .collect(),
        object,
    })
}

/// What the tree reader does before its typed read, done after this one's: a namespaced kind
/// without a namespace is in `default`; managed fields and the annotations netpol does not
/// read are dropped (`prune.rs`).
fn as_tree_reader_leaves(object: &mut Object) {
    let namespaced = object.object_ref().namespace.is_some();
    let metadata = object.metadata_mut();
    if namespaced && metadata.namespace.is_none() {
        metadata.namespace = Some(crate::object::DEFAULT_NAMESPACE.to_owned());
    }
    metadata.managed_fields = None;
    if let Some(annotations) = &mut metadata.annotations {
        annotations.retain(|key, _| READ_ANNOTATIONS.contains(&key.as_str()));
        if annotations.is_empty() {
            metadata.annotations = None;
        }
    }
}

/// Unknown-field paths under metadata the tree reader drops before reading.
fn is_dropped_metadata(path: &str) -> bool {
    ["metadata.managedFields", "metadata.annotations"]
        .iter()
        .any(|dropped| {
            path.strip_prefix(dropped)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
        })
}

/// What the check reads of the object's top level.
#[derive(Default)]
struct Head {
    kind: Option<String>,
    api_version: Option<String>,
    items: bool,
}

/// The head of `text`, or `None` if the tree reader would refuse it (the rules of
/// `StrictValue`) or its `kind` or `apiVersion` is not a string.
fn strict_head(text: &str, depth: usize) -> Option<Head> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let head = TopLevel { depth }.deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    head
}

/// The object itself, at `depth`.
struct TopLevel {
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for TopLevel {
    type Value = Option<Head>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        if self.depth > MAX_JSON_DEPTH {
            return Err(de::Error::custom("nested too deeply to read as JSON"));
        }
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for TopLevel {
    type Value = Option<Head>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut head = Head::default();
        // A `kind` or `apiVersion` that is not a string is for the tree reader to name.
        let mut readable = true;
        let mut keys = Keys::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            keys.insert(key.clone())?;
            let named = matches!(key.as_ref(), "kind" | "apiVersion");
            let string = map.next_value_seed(Strict {
                depth: self.depth + 1,
                keep_string: named,
            })?;
            readable &= !named || string.is_some();
            match key.as_ref() {
                "kind" => head.kind = string,
                "apiVersion" => head.api_version = string,
                "items" => head.items = true,
                _ => {}
            }
        }
        Ok(readable.then_some(head))
    }
}

/// A value checked by the rules of the tree reader's `StrictValue`, kept only if it is a string
/// and `keep_string` asks for it.
#[derive(Clone, Copy)]
struct Strict {
    depth: usize,
    keep_string: bool,
}

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        if self.depth > MAX_JSON_DEPTH {
            return Err(de::Error::custom("nested too deeply to read as JSON"));
        }
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Err(E::custom("not an integer"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.keep_string.then(|| v.to_owned()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let element = Strict {
            depth: self.depth + 1,
            keep_string: false,
        };
        while seq.next_element_seed(element)?.is_some() {}
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let value = Strict {
            depth: self.depth + 1,
            keep_string: false,
        };
        let mut keys = Keys::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            keys.insert(key)?;
            map.next_value_seed(value)?;
        }
        Ok(None)
    }
}

/// A map's keys so far, to refuse a duplicate as the tree reader does. Most maps of a large
/// policy have one or two keys: a list until there are more.
#[derive(Default)]
struct Keys<'de> {
    few: Vec<Cow<'de, str>>,
    many: HashSet<Cow<'de, str>>,
}

impl<'de> Keys<'de> {
    const FEW: usize = 8;

    fn insert<E: de::Error>(&mut self, key: Cow<'de, str>) -> Result<(), E> {
        let fresh = if self.few.len() < Self::FEW {
            let fresh = !self.few.contains(&key);
            self.few.push(key);
            fresh
        } else {
            if self.many.is_empty() {
                self.many.extend(self.few.iter().cloned());
            }
            self.many.insert(key)
        };
        if fresh {
            Ok(())
        } else {
            Err(E::custom("duplicate key"))
        }
    }
}

/// A key, borrowed from the text when it has no escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
}

/// Test data for this module's tests and the reader's: `count` NetworkPolicy peers in JSON,
/// `{"ipBlock":{"cidr":"10.A.B.<host>"}}`.
#[cfg(test)]
pub(crate) fn ip_block_peers(count: usize, host: &str) -> String {
    (0..count)
        .map(|i| {
            format!(
                r#"{{"ipBlock":{{"cidr":"10.{}.{}.{host}"}}}}"#,
                i / 256,
                i % 256
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::json_items;

    /// The tree reader's reading of `text` as a list item.
    fn through_tree(text: &str) -> Option<Vec<crate::object::Read>> {
        let run = format!("[{text}]");
        json_items(&run)
    }

    fn network_policy(metadata: &str, extra: &str) -> String {
        format!(
            r#"{{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{metadata},
            "spec":{{"podSelector":{{"matchLabels":{{"app":"web"}}}},"policyTypes":["Egress"],
            "egress":[{{"to":[{}],"ports":[{{"port":443,"protocol":"TCP"}},{{"port":"dns"}}]}}]{extra}}}}}"#,
            ip_block_peers(50, "0/24")
        )
    }

    /// Every policy this path reads, it reads as the tree reader does: the object, its
    /// unknown fields, and the namespace and metadata the tree reader fills in or drops.
    #[test]
    fn policies_read_without_a_tree_equal_the_tree_readers() {
        let metadata = [
            r#"{"name":"a","namespace":"shop"}"#,
            r#"{"name":"a"}"#,
            r#"{"name":"a","namespace":null}"#,
            r#"{"name":"a","namespace":"shop","labels":{"x":"y"},"uid":"u-1",
               "annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}",
                              "netpol.io/enforcement":"audit"},
               "managedFields":[{"manager":"kubectl","operation":"Apply","fieldsV1":{"f:spec":{}}}]}"#,
            r#"{"name":"a","annotations":{"other":"x"}}"#,
        ];
        let mut texts: Vec<String> = metadata.iter().map(|m| network_policy(m, "")).collect();
        // Unknown fields, at the top, in the spec and in a peer, and the status the server adds.
        texts.push(network_policy(r#"{"name":"a"}"#, r#","podselector":{}"#));
        texts.push(network_policy(r#"{"name":"a"}"#, "").replacen(
            r#"{"ipBlock":"#,
            r#"{"ipblock":{"cidr":"1.2.3.4/32"},"ipBlock":"#,
            1,
        ));
        texts.push(network_policy(r#"{"name":"a"}"#, "").replacen(
            r#""metadata""#,
            r#""status":{"x":1},"extra":[1,2],"metadata""#,
            1,
        ));
        texts.push(format!(
            r#"{{"apiVersion":"cilium.io/v2","kind":"CiliumNetworkPolicy","metadata":{{"name":"c","namespace":"n"}},
            "spec":{{"endpointSelector":{{}},"egress":[{{"toCIDR":[{}]}}]}}}}"#,
            (0..50).map(|i| format!("\"10.0.0.{i}/32\"")).collect::<Vec<_>>().join(",")
        ));
        texts.push(
            r#"{"apiVersion":"cilium.io/v2","kind":"CiliumClusterwideNetworkPolicy","metadata":{"name":"c"},
            "spec":{"endpointSelector":{},"egress":[{"toCIDRSet":[{"cidr":"10.0.0.0/8","except":["10.1.0.0/16"]}]}]}}"#
                .to_owned(),
        );
        texts.push(
            r#"{"apiVersion":"policy.networking.k8s.io/v1alpha1","kind":"AdminNetworkPolicy",
            "metadata":{"name":"p","namespace":"ignored"},"spec":{"priority":5,"subject":{"namespaces":{}},
            "egress":[{"name":"e","action":"Deny","to":[{"networks":["10.0.0.0/8","fd00::/8"]}]}]}}"#
                .to_owned(),
        );
        texts.push(
            r#"{"apiVersion":"policy.networking.k8s.io/v1alpha1","kind":"BaselineAdminNetworkPolicy",
            "metadata":{"name":"default"},"spec":{"subject":{"namespaces":{}},
            "egress":[{"name":"e","action":"Deny","to":[{"networks":["10.0.0.0/8"]}]}]}}"#
                .to_owned(),
        );
        texts.push(
            r#"{"apiVersion":"policy.networking.k8s.io/v1alpha2","kind":"ClusterNetworkPolicy",
            "metadata":{"name":"c"},"spec":{"tier":"Admin","priority":3,"subject":{"namespaces":{}},
            "egress":[{"name":"e","action":"Deny","to":[{"networks":["10.0.0.0/8"]}]}]}}"#
                .to_owned(),
        );
        for text in &texts {
            let direct = read_policy(text, LIST_ITEM_DEPTH)
                .unwrap_or_else(|| panic!("not read without a tree: {text}"));
            let tree = through_tree(text).expect("the tree reader reads it");
            assert_eq!(tree.len(), 1);
            assert_eq!(Ok(&direct), tree[0].as_ref(), "{text}");
        }
    }

    /// What the tree reader refuses or reads its own way is left to it: duplicate keys, numbers
    /// that are not integers, nesting deeper than YAML allows, a top-level `items`, a kind or
    /// version this path does not read, and every object that does not read cleanly.
    #[test]
    fn what_might_read_otherwise_is_left_to_the_tree_reader() {
        let base = network_policy(r#"{"name":"a"}"#, "");
        let deep = format!(
            r#"{{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{{"name":"a"}},"x":{}1{}}}"#,
            "[".repeat(MAX_JSON_DEPTH),
            "]".repeat(MAX_JSON_DEPTH)
        );
        let cases = [
            base.replacen(r#""cidr":"#, r#""cidr":"1.1.1.1/32","cidr":"#, 1),
            base.replacen(r#""kind""#, r#""kind":"NetworkPolicy","kind""#, 1),
            base.replacen(r#""port":443"#, r#""port":443.0"#, 1),
            base.replacen(r#""metadata""#, r#""x":1.5,"metadata""#, 1),
            base.replacen(r#""metadata""#, r#""items":[],"metadata""#, 1),
            base.replacen(r#""kind":"NetworkPolicy""#, r#""kind":7"#, 1),
            base.replacen("networking.k8s.io/v1", "networking.k8s.io/v2", 1),
            base.replacen(r#""name":"a""#, r#""name":"""#, 1),
            base.replacen(r#""name":"a""#, r#""generateName":"a""#, 1),
            base.replacen(
                r#""podSelector":{"#,
                r#""podSelector":{"matchLabels":7,"x":{"#,
                1,
            ),
            base.replacen(r#""kind":"NetworkPolicy""#, r#""kind":"Pod""#, 1),
            deep,
        ];
        for text in &cases {
            assert_eq!(read_policy(text, LIST_ITEM_DEPTH), None, "{text}");
        }
        // What reads cleanly but is wrong later (a named port that is no name, an address that
        // is none) is read alike, for translation to name.
        for text in [
            base.replacen(r#""port":443"#, r#""port":"not a port!""#, 1),
            base.replacen(r#""cidr":"10.0.0.0/24""#, r#""cidr":"10.0.0.300/24""#, 1),
        ] {
            let direct = read_policy(&text, LIST_ITEM_DEPTH).expect("read");
            assert_eq!(Ok(&direct), through_tree(&text).unwrap()[0].as_ref());
        }
        // Each of them the tree reader refuses or reads with an error, naming the object or
        // the field: nothing of it is lost by leaving it there.
        assert!(through_tree(&cases[0]).is_none(), "a duplicate key");
        assert!(
            through_tree(&cases[2]).is_none(),
            "a number that is not an integer"
        );
    }
}
