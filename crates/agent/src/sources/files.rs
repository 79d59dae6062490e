//! The embedded mode's source: Kubernetes objects from the YAML files of a directory tree, turned
//! into the same watch events a cluster would send.
//!
//! The first complete scan lists every kind (`Init`, `InitApply`..., `InitDone`); later scans send
//! `Apply` for every object of a file that changed and `Delete` for objects that disappeared.
//!
//! Files are polled. A poll costs one `stat` per file: a file is read again only when its size,
//! modification time or inode changes, or while its modification time is too recent to trust (a
//! second write within the filesystem's timestamp granularity leaves both unchanged, so such
//! "racy" files are re-read, as git does, until they are older than the granularity). A content
//! digest then decides whether anything changed, and a poll that changed nothing builds nothing:
//! the idle cost depends on the number of files, not on the number of objects they hold.
//!
//! A file being written is not read half-way: a changed file is read only once two looks in a row
//! (two polls) saw the same size, modification time and inode, or once it has not been modified
//! for [`SETTLE_AGE`]. A writer that pauses longer than one poll interval can still be caught
//! half-way; writing a temporary file and renaming it over the old one (atomic on every local
//! filesystem, and what `kubectl`-style tools and ConfigMap volumes do) is the safe way to update
//! a file, and is what the documentation recommends.
//!
//! A file that cannot be read, or whose YAML does not parse, keeps its previous objects (a
//! half-saved file must not drop the policies it held) and counts as unreadable until it reads
//! again. Before the first list, an unreadable or still-changing file holds the list back: the
//! caller decides how long to wait ([`FileSource::accept_partial`]) before listing what could be
//! read. An object that fails validation is left out, as if absent. Problems are reported once
//! per change of the file.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use kube::runtime::watcher::Event;
use netpol_api::{parse_yaml, Object, ObjectRef, ValidationError};

use crate::health::Health;
use crate::indexes::SourceEvent;
use crate::kind::SourceKind;
use crate::metrics::{gauge_value, Metrics};

/// File timestamps closer than this to the scan that read them are not trusted.
const TIMESTAMP_GRANULARITY: Duration = Duration::from_secs(2);

/// A file not modified for this long is taken as completely written at first sight.
pub const SETTLE_AGE: Duration = Duration::from_secs(2);

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
                    "{}: {message}; its previous objects (if any) stay in force",
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
    /// Files that changed since the last look and are left for the next one (possibly being
    /// written).
    pub settling: usize,
    /// Files read (and digested) by this scan.
    pub files_read: usize,
    /// Objects this scan looked up to build its events: zero when nothing changed, so that an
    /// idle poll costs nothing per object.
    pub objects_mapped: usize,
}

/// What a `stat` says of a file: a change of any part means the file may have changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Signature {
    modified: SystemTime,
    len: u64,
    /// Renaming a new file over the old one changes the inode even when size and time agree.
    inode: u64,
}

impl Signature {
    fn of(metadata: &std::fs::Metadata) -> io::Result<Signature> {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(metadata);
        #[cfg(not(unix))]
        let inode = 0;
        Ok(Signature {
            modified: metadata.modified()?,
            len: metadata.len(),
            inode,
        })
    }
}

#[derive(Debug)]
struct FileState {
    signature: Signature,
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
    /// Changed files seen once, with what the look saw; read when the next look sees the same.
    settling: BTreeMap<PathBuf, Signature>,
    /// Files whose last read failed, with why.
    unreadable: BTreeMap<PathBuf, String>,
    listed: bool,
    /// List even while some file is unreadable or still changing (the caller stopped waiting).
    partial_ok: bool,
}

impl FileSource {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FileSource {
            root: root.into(),
            files: BTreeMap::new(),
            settling: BTreeMap::new(),
            unreadable: BTreeMap::new(),
            listed: false,
            partial_ok: false,
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether every kind has been listed (the first complete scan happened).
    pub fn is_listed(&self) -> bool {
        self.listed
    }

    /// The files that could not be read or parsed at their last read, with why.
    pub fn unreadable(&self) -> &BTreeMap<PathBuf, String> {
        &self.unreadable
    }

    /// Stops holding the first list back for unreadable or still-changing files: the next scan
    /// lists what could be read.
    pub fn accept_partial(&mut self) {
        self.partial_ok = true;
    }

    /// Reads what changed since the last scan. The first complete scan lists every kind.
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
        let mut scan = Scan::default();
        // The objects of files that changed or went, as they were, and the keys they hold now.
        let mut old: BTreeMap<ObjectRef, Object> = BTreeMap::new();
        let mut touched: BTreeSet<ObjectRef> = BTreeSet::new();

        let removed: Vec<PathBuf> = self
            .files
            .keys()
            .chain(self.unreadable.keys())
            .filter(|p| !paths.contains(*p))
            .cloned()
            .collect();
        for path in removed {
            self.unreadable.remove(&path);
            if let Some(state) = self.files.remove(&path) {
                old.extend(state.objects);
            }
        }
        self.settling.retain(|path, _| paths.contains(path));
        for path in &paths {
            let signature = match std::fs::metadata(path).and_then(|m| Signature::of(&m)) {
                Ok(signature) => signature,
                // Deleted between the listing and now: the next scan sees it gone.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    self.note_unreadable(path, &e, &mut scan.problems);
                    continue;
                }
            };
            if let Some(state) = self.files.get(path) {
                let racy = signature.modified + TIMESTAMP_GRANULARITY >= state.read_at;
                if state.signature == signature && !(racy || relist) {
                    continue;
                }
            }
            if !self.settled(path, signature, started) {
                scan.settling += 1;
                continue;
            }
            let text = match std::fs::read_to_string(path) {
                Ok(text) => text,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    self.note_unreadable(path, &e, &mut scan.problems);
                    continue;
                }
            };
            scan.files_read += 1;
            let digest = digest(&text);
            let previous = self.files.remove(path);
            let objects = match previous {
                Some(state) if state.digest == digest => state.objects,
                previous => {
                    let kept = previous.map(|s| s.objects).unwrap_or_default();
                    let objects = match parse_file(path, &text, &mut scan.problems) {
                        Ok(objects) => {
                            self.unreadable.remove(path);
                            objects
                        }
                        Err(message) => {
                            self.unreadable.insert(path.clone(), message);
                            kept.clone()
                        }
                    };
                    touched.extend(objects.keys().cloned());
                    old.extend(kept);
                    objects
                }
            };
            self.files.insert(
                path.clone(),
                FileState {
                    signature,
                    read_at: started,
                    digest,
                    objects,
                },
            );
        }

        let blocked = scan.settling > 0 || !self.unreadable.is_empty();
        if !self.listed && blocked && !self.partial_ok {
            // The first list waits for every file (or for the caller to stop waiting).
            return Ok(scan);
        }
        if !self.listed {
            for path in self.settling.keys() {
                scan.problems.push(unreadable(path, &"still being written"));
            }
        }
        touched.extend(old.keys().cloned());
        if touched.is_empty() && !relist {
            // Nothing changed: no object map to build.
            return Ok(scan);
        }
        scan.problems.extend(self.duplicates());
        scan.events = if relist {
            relist_events(&self.effective())
        } else {
            // Looking keys up file by file is cheaper than the whole map when few changed.
            let after = if touched.len() <= 1024 {
                self.effective_of(&touched)
            } else {
                self.effective()
            };
            delta_events(&touched, &old, &after)
        };
        scan.objects_mapped = scan.events.len();
        self.listed = true;
        Ok(scan)
    }

    /// Whether `path`, found at `signature`, may be read now: it was already read before (a
    /// rewrite is then caught by the next change of its signature), or this look saw what the
    /// previous look saw, or it has not been modified for [`SETTLE_AGE`].
    fn settled(&mut self, path: &Path, signature: Signature, now: SystemTime) -> bool {
        let known = self
            .files
            .get(path)
            .is_some_and(|state| state.signature == signature);
        let seen = self.settling.get(path) == Some(&signature);
        let old = now
            .duration_since(signature.modified)
            .is_ok_and(|age| age >= SETTLE_AGE);
        if known || seen || old {
            self.settling.remove(path);
            true
        } else {
            self.settling.insert(path.to_owned(), signature);
            false
        }
    }

    /// Records a read failure, reporting it only when it is new or different.
    fn note_unreadable(&mut self, path: &Path, error: &io::Error, problems: &mut Vec<FileProblem>) {
        let message = error.to_string();
        if self.unreadable.get(path) != Some(&message) {
            problems.push(unreadable(path, &message));
            self.unreadable.insert(path.to_owned(), message);
        }
    }

    /// The current object of each of `keys`: the first file's, in path order.
    fn effective_of(&self, keys: &BTreeSet<ObjectRef>) -> BTreeMap<ObjectRef, &Object> {
        keys.iter()
            .filter_map(|key| {
                let object = self.files.values().find_map(|s| s.objects.get(key))?;
                Some((key.clone(), object))
            })
            .collect()
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

/// Publishes the files' state: the unreadable-files gauge, and readiness held back while any
/// file is unreadable.
pub fn publish_state(source: &FileSource, metrics: &Metrics, health: &Health) {
    let unreadable = source.unreadable();
    metrics.unreadable_files.set(gauge_value(unreadable.len()));
    let problem = (!unreadable.is_empty()).then(|| {
        let names: Vec<String> = unreadable
            .keys()
            .take(3)
            .map(|p| p.display().to_string())
            .collect();
        let more = unreadable.len().saturating_sub(names.len());
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        format!(
            "{} unreadable file(s), previous objects kept: {}{more}",
            unreadable.len(),
            names.join(", ")
        )
    });
    health.set_source_problem("files", problem);
}

/// Logs each problem of a scan (bounded, never an object's body) and counts invalid policies.
pub fn report_file_problems(problems: &[FileProblem], metrics: &Metrics) {
    for problem in problems {
        if let FileProblem::InvalidObject { error, .. } = problem {
            if let Some(kind) = SourceKind::ALL
                .into_iter()
                .find(|k| k.as_str() == error.object.kind)
            {
                if kind.is_policy() {
                    metrics.count_rejection(kind);
                }
            }
        }
        tracing::warn!("{}", crate::logline::bounded(&problem.to_string()));
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

/// Parses one file's objects; a YAML error (reported) leaves the file unreadable.
fn parse_file(
    path: &Path,
    text: &str,
    problems: &mut Vec<FileProblem>,
) -> Result<BTreeMap<ObjectRef, Object>, String> {
    let parsed = match parse_yaml(text) {
        Ok(parsed) => parsed,
        Err(error) => {
            problems.push(unreadable(path, &error));
            return Err(error.to_string());
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
    Ok(objects)
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
