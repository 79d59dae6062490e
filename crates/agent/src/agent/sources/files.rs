//! The embedded mode's source: Kubernetes objects from the YAML files of a directory tree, turned
//! into the same watch events a cluster would send.
//!
//! The first scan lists every kind (`Init`, `InitApply`..., `InitDone`); later scans send `Apply`
//! for every object of a file that changed and `Delete` for objects that disappeared. Files are
//! polled: a file is read again when its size or modification time changes, or while its
//! modification time is too recent to trust (a second write within the filesystem's timestamp
//! granularity leaves both unchanged, so such "racy" files are re-read, as git does, until they
//! are older than the granularity). A content digest then decides whether anything changed.
//!
//! A file whose YAML does not parse keeps its previous objects (a half-saved file must not drop
//! the policies it held); an object that fails validation is left out, as if absent. Both are
//! reported once per change of the file.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use kube::runtime::watcher::Event;
use netpol_api::{parse_yaml, Object, ObjectRef, ValidationError};

use crate::agent::indexes::SourceEvent;
use crate::agent::kind::SourceKind;

/// File timestamps closer than this to the scan that read them are not trusted.
const TIMESTAMP_GRANULARITY: Duration = Duration::from_secs(2);

/// A problem with one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileProblem {
    /// The file could not be read or its YAML does not parse; its previous objects are kept.
    Unreadable { path: PathBuf, message: String },
    /// One object in the file is invalid and left out.
    InvalidObject {
        path: PathBuf,
        error: ValidationError,
    },
    /// An object defined in several files: the first file (in path order) wins.
    Duplicate {
        object: ObjectRef,
        used: PathBuf,
        ignored: PathBuf,
    },
}

impl std::fmt::Display for FileProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileProblem::Unreadable { path, message } => {
                write!(
                    f,
                    "{}: {message}; keeping its previous objects",
                    path.display()
                )
            }
            FileProblem::InvalidObject { path, error } => {
                write!(f, "{}: {error}; object skipped", path.display())
            }
            FileProblem::Duplicate {
                object,
                used,
                ignored,
            } => write!(
                f,
                "{object} is defined in {} and {}; using the first",
                used.display(),
                ignored.display()
            ),
        }
    }
}

/// What one scan found.
#[derive(Debug, Default)]
pub struct Scan {
    pub events: Vec<SourceEvent>,
    pub problems: Vec<FileProblem>,
}

#[derive(Debug)]
struct FileState {
    modified: SystemTime,
    len: u64,
    /// When the scan that read the file started.
    read_at: SystemTime,
    digest: u64,
    objects: BTreeMap<ObjectRef, Object>,
}

/// Follows the YAML files under one directory.
#[derive(Debug)]
pub struct FileSource {
    root: PathBuf,
    files: BTreeMap<PathBuf, FileState>,
    listed: bool,
}

impl FileSource {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FileSource {
            root: root.into(),
            files: BTreeMap::new(),
            listed: false,
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Reads what changed since the last scan. The first scan lists every kind.
    pub fn scan(&mut self) -> io::Result<Scan> {
        let relist = !self.listed;
        self.read(relist)
    }

    /// Reads every file again and relists every kind: the periodic full resync. Unchanged
    /// objects cost nothing downstream.
    pub fn relist(&mut self) -> io::Result<Scan> {
        self.read(true)
    }

    fn read(&mut self, relist: bool) -> io::Result<Scan> {
        let started = SystemTime::now();
        let paths = yaml_files(&self.root)?;
        let mut problems = Vec::new();
        // The objects of files that changed or went, as they were, and the keys they hold now.
        let mut old: BTreeMap<ObjectRef, Object> = BTreeMap::new();
        let mut touched: BTreeSet<ObjectRef> = BTreeSet::new();

        let removed: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|p| !paths.contains(*p))
            .cloned()
            .collect();
        for path in removed {
            if let Some(state) = self.files.remove(&path) {
                old.extend(state.objects);
            }
        }
        for path in &paths {
            let metadata = match std::fs::metadata(path) {
                Ok(m) => m,
                // Deleted between the listing and now: the next scan sees it gone.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    problems.push(unreadable(path, &e));
                    continue;
                }
            };
            let modified = metadata.modified()?;
            let len = metadata.len();
            if !relist {
                if let Some(state) = self.files.get(path) {
                    let racy = modified + TIMESTAMP_GRANULARITY >= state.read_at;
                    if state.modified == modified && state.len == len && !racy {
                        continue;
                    }
                }
            }
            let text = match std::fs::read_to_string(path) {
                Ok(text) => text,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    problems.push(unreadable(path, &e));
                    continue;
                }
            };
            let digest = digest(&text);
            let previous = self.files.remove(path);
            let objects = match previous {
                Some(state) if state.digest == digest => state.objects,
                previous => {
                    let kept = previous.map(|s| s.objects).unwrap_or_default();
                    let objects = parse_file(path, &text, kept.clone(), &mut problems);
                    touched.extend(objects.keys().cloned());
                    old.extend(kept);
                    objects
                }
            };
            self.files.insert(
                path.clone(),
                FileState {
                    modified,
                    len,
                    read_at: started,
                    digest,
                    objects,
                },
            );
        }

        touched.extend(old.keys().cloned());
        if !touched.is_empty() {
            problems.extend(self.duplicates());
        }
        let after = self.effective();
        let events = if relist {
            relist_events(&after)
        } else {
            delta_events(&touched, &old, &after)
        };
        self.listed = true;
        Ok(Scan { events, problems })
    }

    /// The object each key stands for: the first file's, in path order.
    fn effective(&self) -> BTreeMap<ObjectRef, &Object> {
        let mut out = BTreeMap::new();
        for state in self.files.values() {
            for (key, object) in &state.objects {
                out.entry(key.clone()).or_insert(object);
            }
        }
        out
    }

    fn duplicates(&self) -> Vec<FileProblem> {
        let mut first: BTreeMap<&ObjectRef, &PathBuf> = BTreeMap::new();
        let mut problems = Vec::new();
        for (path, state) in &self.files {
            for key in state.objects.keys() {
                match first.get(key) {
                    Some(used) => problems.push(FileProblem::Duplicate {
                        object: key.clone(),
                        used: (*used).clone(),
                        ignored: path.clone(),
                    }),
                    None => {
                        first.insert(key, path);
                    }
                }
            }
        }
        problems
    }
}

fn unreadable(path: &Path, error: &dyn std::fmt::Display) -> FileProblem {
    FileProblem::Unreadable {
        path: path.to_owned(),
        message: error.to_string(),
    }
}

fn digest(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// Parses one file's objects; on a YAML error the file keeps `kept`.
fn parse_file(
    path: &Path,
    text: &str,
    kept: BTreeMap<ObjectRef, Object>,
    problems: &mut Vec<FileProblem>,
) -> BTreeMap<ObjectRef, Object> {
    let parsed = match parse_yaml(text) {
        Ok(parsed) => parsed,
        Err(error) => {
            problems.push(unreadable(path, &error));
            return kept;
        }
    };
    let mut objects = BTreeMap::new();
    for result in parsed {
        match result {
            Ok(object) => {
                let key = object.object_ref();
                if objects.contains_key(&key) {
                    problems.push(FileProblem::Duplicate {
                        object: key.clone(),
                        used: path.to_owned(),
                        ignored: path.to_owned(),
                    });
                    continue;
                }
                objects.insert(key, object);
            }
            Err(error) => problems.push(FileProblem::InvalidObject {
                path: path.to_owned(),
                error,
            }),
        }
    }
    objects
}

/// Every `*.yaml`, `*.yml` and `*.json` file under `root`, in path order. Hidden files and
/// directories (editor swap files, a ConfigMap volume's `..data`) are skipped; symbolic links are
/// followed, so the files of a mounted ConfigMap are found through their visible links.
fn yaml_files(root: &Path) -> io::Result<BTreeSet<PathBuf>> {
    let mut out = BTreeSet::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') {
                continue;
            }
            let path = entry.path();
            let Ok(metadata) = std::fs::metadata(&path) else {
                continue; // a dangling link
            };
            if metadata.is_dir() {
                pending.push(path);
            } else if [".yaml", ".yml", ".json"]
                .iter()
                .any(|ext| name.ends_with(ext))
            {
                out.insert(path);
            }
        }
    }
    Ok(out)
}

/// A complete list of every kind, empty kinds included, so that each kind counts as listed.
fn relist_events(objects: &BTreeMap<ObjectRef, &Object>) -> Vec<SourceEvent> {
    let mut events = Vec::new();
    for kind in SourceKind::ALL {
        events.push(SourceEvent::new(kind, Event::Init));
        for object in objects.values().filter(|o| SourceKind::of(o) == kind) {
            events.push(SourceEvent::new(kind, Event::InitApply((*object).clone())));
        }
        events.push(SourceEvent::new(kind, Event::InitDone));
    }
    events
}

/// `Apply` for every touched object that exists, `Delete` for every touched object gone. An
/// object is re-sent when its file changed even if it did not: the indexes drop what changes
/// nothing.
fn delta_events(
    touched: &BTreeSet<ObjectRef>,
    old: &BTreeMap<ObjectRef, Object>,
    after: &BTreeMap<ObjectRef, &Object>,
) -> Vec<SourceEvent> {
    let mut events = Vec::new();
    for key in touched {
        let (object, event): (&Object, fn(Object) -> Event<Object>) =
            match (after.get(key), old.get(key)) {
                (Some(object), _) => (object, Event::Apply),
                (None, Some(object)) => (object, Event::Delete),
                (None, None) => continue,
            };
        events.push(SourceEvent::new(
            SourceKind::of(object),
            event(object.clone()),
        ));
    }
    events
}
