//! What the file source remembers of a file's objects: a 64-bit digest per object key, never the
//! objects.
//!
//! A changed file is parsed again, and each object's digest compared with the one remembered:
//! only objects whose digest changed are sent, and keys that disappeared are deleted. Digests are
//! computed on the parsing threads (see `netpol_api::parse_yaml_each`), over the object as read
//! (pruned of what netpol never reads), so a change to a field nothing reads sends nothing.

use std::collections::BTreeMap;
use std::hash::Hasher;
use std::io;
use std::path::Path;

use netpol_api::{
    parse_reader_each, FieldValidation, Object, ObjectRef, ReadError, ValidationError,
};

use super::FileProblem;

/// The objects of one file as last parsed: each key's digest.
pub(super) type Digests = BTreeMap<ObjectRef, u64>;

/// One object as parsed, with its key and digest (computed where it was parsed).
pub(super) struct Parsed {
    pub key: ObjectRef,
    pub digest: u64,
    pub object: Object,
}

/// The digest of an object: a hash of its JSON form (maps are ordered, so equal objects hash
/// equally).
pub(super) fn object_digest(object: &Object) -> u64 {
    let mut writer = HashWriter(std::hash::DefaultHasher::new());
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

struct HashWriter(std::hash::DefaultHasher);

impl io::Write for HashWriter {
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
    let mut digests = Digests::new();
    let mut file_problems = Vec::new();
    let prepare = |read: Result<Object, ValidationError>| {
        read.map(|object| Parsed {
            key: object.object_ref(),
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
                Ok(parsed) => {
                    if digests.contains_key(&parsed.key) {
                        file_problems.push(FileProblem::Duplicate {
                            object: parsed.key,
                            used: path.to_owned(),
                            ignored: path.to_owned(),
                        });
                    } else {
                        digests.insert(parsed.key.clone(), parsed.digest);
                        each(parsed);
                    }
                }
                Err(error) => file_problems.push(FileProblem::InvalidObject {
                    path: path.to_owned(),
                    error,
                }),
            },
        );
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
