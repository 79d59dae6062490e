//! What the file source remembers of a file's objects: a 64-bit digest per object key, never the
//! objects.
//!
//! A changed file is parsed again, and each object's digest compared with the one remembered:
//! only objects whose digest changed are sent, and keys that disappeared are deleted. Digests are
//! computed on the parsing threads (see `netpol_api::parse_yaml_each`), over the object as read
//! (pruned of what netpol never reads), so a change to a field nothing reads sends nothing.

use std::collections::hash_map::Entry;
use std::hash::Hasher;
use std::io;
use std::path::Path;

use netpol_api::{
    parse_reader_each, FieldValidation, Object, ObjectRef, ReadError, ValidationError,
};

use super::FileProblem;
use crate::kind::SourceKind;

/// The objects of one file as last parsed: each key's digest. Hashed, not ordered: a list of
/// 150,000 pods looked each key up in a B-tree of long, alike strings (4% of the sync's CPU);
/// where order shows (events, reported duplicates), the callers sort.
pub(super) type Digests = foldhash::HashMap<Key, u64>;

/// An object's key as the source remembers it: its kind (one of the kinds the agent reads) and
/// its namespace and name in one allocation. As `ObjectRef`s (three strings each), the keys of
/// 150,000 pods were tens of megabytes of the long-running agent's memory. Ordered as
/// `ObjectRef`s are (kind, namespace, name).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Key {
    kind: SourceKind,
    /// The namespace's length in `text`; [`Key::CLUSTER`] for a cluster-scoped object.
    namespace_len: u32,
    /// The namespace followed by the name.
    text: Box<str>,
}

impl Key {
    const CLUSTER: u32 = u32::MAX;

    pub fn of(object: &Object) -> Key {
        let ObjectRef {
            namespace, name, ..
        } = object.object_ref();
        let (namespace_len, text) = match namespace {
            Some(namespace) => (namespace.len() as u32, namespace + &name),
            None => (Key::CLUSTER, name),
        };
        Key {
            kind: SourceKind::of(object),
            namespace_len,
            text: text.into_boxed_str(),
        }
    }

    fn parts(&self) -> (&'static str, Option<&str>, &str) {
        let kind = self.kind.as_str();
        if self.namespace_len == Key::CLUSTER {
            return (kind, None, &self.text);
        }
        let (namespace, name) = self.text.split_at(self.namespace_len as usize);
        (kind, Some(namespace), name)
    }

    pub fn object_ref(&self) -> ObjectRef {
        let (kind, namespace, name) = self.parts();
        ObjectRef::new(kind, namespace, name)
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.parts().cmp(&other.parts())
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// One object as parsed, with its key and digest (computed where it was parsed).
pub(super) struct Parsed {
    pub key: Key,
    pub digest: u64,
    pub object: Object,
}

/// The digest of an object: a hash of its JSON form (maps are ordered, so equal objects hash
/// equally).
pub(super) fn object_digest(object: &Object) -> u64 {
    let mut writer = HashWriter(netpol_api::digest_hasher());
    // Writing into a hasher cannot fail, and every object serializes.
    let _ = serde_json::to_writer(&mut writer, object);
    writer.0.finish()
}

/// Why a file gave no objects.
#[derive(Debug)]
pub(super) enum FileError {
    /// It is gone (deleted since it was listed).
    Gone,
    /// It could not be read, or changed while it was read.
    Unreadable(String),
    /// Its text, with this digest, is not YAML or JSON that can be read.
    Broken { message: String, digest: u64 },
}

impl FileError {
    fn of_io(error: &io::Error) -> FileError {
        if error.kind() == io::ErrorKind::NotFound {
            FileError::Gone
        } else {
            FileError::Unreadable(error.to_string())
        }
    }
}

/// The digest of a file's text (`netpol_api::text_digest`), read in pieces.
pub(super) fn file_digest(path: &Path) -> Result<u64, FileError> {
    let mut file = std::fs::File::open(path).map_err(|e| FileError::of_io(&e))?;
    netpol_api::digest_of(&mut file).map_err(|e| FileError::of_io(&e))
}

struct HashWriter<H>(H);

impl<H: Hasher> io::Write for HashWriter<H> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.write(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Parses one file, read in pieces (`netpol_api::parse_reader_each`), handing each valid object
/// (the first of a key, if the file repeats one) to `each` with its key and digest, and returns
/// every key's digest and the text's. Invalid objects and repeated keys are reported; on an
/// error (a broken text is reported), `each` may have been given objects of the file, which the
/// caller must then discard.
pub(super) fn parse_file(
    path: &Path,
    problems: &mut Vec<FileProblem>,
    each: &mut dyn FnMut(Parsed),
) -> Result<(Digests, u64), FileError> {
    let mut digests = Digests::default();
    let mut file_problems = Vec::new();
    let prepare = |read: Result<Object, ValidationError>| {
        read.map(|object| Parsed {
            key: Key::of(&object),
            digest: object_digest(&object),
            object,
        })
    };
    let mut file = std::fs::File::open(path).map_err(|e| FileError::of_io(&e))?;
    // No API server validated these files: an object with a field its kind does not have (a
    // misspelt or misplaced field, which would silently widen a policy) is refused alone, as
    // `kubectl apply` refuses it.
    let parsed =
        parse_reader_each(
            &mut file,
            FieldValidation::Strict,
            prepare,
            &mut |read| match read {
                Ok(parsed) => match digests.entry(parsed.key.clone()) {
                    Entry::Occupied(_) => file_problems.push(FileProblem::Duplicate {
                        object: parsed.key.object_ref(),
                        used: path.to_owned(),
                        ignored: path.to_owned(),
                    }),
                    Entry::Vacant(vacant) => {
                        vacant.insert(parsed.digest);
                        each(parsed);
                    }
                },
                // A kind netpol does not read is skipped, not invalid (its kind was read).
                Err(error)
                    if error.field == "kind"
                        && !error.object.kind.is_empty()
                        && !netpol_api::is_supported_kind(&error.object.kind) =>
                {
                    file_problems.push(FileProblem::OtherKind {
                        path: path.to_owned(),
                        object: error.object,
                    })
                }
                Err(error) => file_problems.push(FileProblem::InvalidObject {
                    path: path.to_owned(),
                    error,
                }),
            },
        );
    crate::allocator::release_freed_memory();
    match parsed {
        Ok(digest) => {
            problems.extend(file_problems);
            Ok((digests, digest))
        }
        Err(ReadError::Io(error)) => Err(FileError::of_io(&error)),
        Err(ReadError::Changed) => Err(FileError::Unreadable(ReadError::Changed.to_string())),
        Err(ReadError::Yaml { error, digest }) => {
            problems.push(FileProblem::Unreadable {
                path: path.to_owned(),
                message: error.to_string(),
            });
            Err(FileError::Broken {
                message: error.to_string(),
                digest,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(kind: &str, namespace: Option<&str>, name: &str) -> Object {
        let mut metadata = serde_json::json!({"name": name});
        if let Some(namespace) = namespace {
            metadata["namespace"] = namespace.into();
        }
        let api_version = match kind {
            "NetworkPolicy" => "networking.k8s.io/v1",
            _ => "v1",
        };
        Object::from_value(
            serde_json::json!({"apiVersion": api_version, "kind": kind, "metadata": metadata}),
        )
        .unwrap()
    }

    /// Keys name what `ObjectRef`s name, and sort as they do, even where namespace and name
    /// packed together read alike (`a` + `bc`, `ab` + `c`).
    #[test]
    fn keys_stand_for_object_refs_in_their_order() {
        let objects = [
            object("Pod", Some("ab"), "c"),
            object("Pod", Some("a"), "bc"),
            object("Namespace", None, "abc"),
            object("NetworkPolicy", Some("a"), "bc"),
            object("Pod", None, "x"),
            object("Node", None, "n1"),
        ];
        let mut keys: Vec<(Key, ObjectRef)> = objects
            .iter()
            .map(|o| (Key::of(o), o.object_ref()))
            .collect();
        for (key, object_ref) in &keys {
            assert_eq!(key.object_ref(), *object_ref);
        }
        assert_ne!(keys[0].0, keys[1].0);
        keys.sort_by(|a, b| a.0.cmp(&b.0));
        let by_key: Vec<&ObjectRef> = keys.iter().map(|(_, r)| r).collect();
        let mut by_ref = by_key.clone();
        by_ref.sort();
        assert_eq!(by_key, by_ref);
    }
}
