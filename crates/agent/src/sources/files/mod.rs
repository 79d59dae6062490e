//! The embedded mode's source: Kubernetes objects from the YAML and JSON files of a directory
//! tree, turned into the same watch events a cluster would send.
//!
//! The first complete scan lists every kind (`Init`, `InitApply`..., `InitDone`); later scans
//! send `Apply` for each object whose digest changed and `Delete` for each object that
//! disappeared. The source keeps no objects: per file it remembers a 64-bit digest per object
//! key (`objects.rs`), so a one-pod change in a file of 150,000 pods sends one `Apply`. Events go
//! to a sink as the files are parsed ([`FileSource::scan_into`]), so a first list of any size
//! never exists as a whole either.
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
//! A file that cannot be read, or whose YAML does not parse, keeps its previous objects in force
//! (a half-saved file must not drop the policies it held) and counts as unreadable until it reads
//! again; nothing of it is sent. Before the first list, an unreadable or still-changing file holds
//! the list back: the caller decides how long to wait ([`FileSource::accept_partial`]) before
//! listing what could be read. A list that meets a broken file part-way is abandoned (its
//! `InitDone` is never sent, so it changes nothing) and, if the caller stopped waiting, started
//! again without that file. A periodic relist while some file is unreadable sends changes only,
//! since a list without that file's objects would delete them. An object that fails validation
//! is left out, as if absent. Problems are reported once per change of the file.

mod objects;
pub mod report;
mod templates;
mod walk;

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use netpol_api::{Object, ObjectRef, ValidationError};
use netpol_indexes::Event;

use objects::{file_digest, parse_file, Digests, FileError, Key, Parsed};
pub use templates::TemplatePlacement;
use walk::yaml_files;

use crate::indexes::SourceEvent;
use crate::kind::SourceKind;

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
    /// An object of a kind netpol does not read (a Service, a ConfigMap): skipped, as every
    /// netpol command skips it; no error.
    OtherKind { path: PathBuf, object: ObjectRef },
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
            FileProblem::OtherKind { path, object } => {
                write!(
                    f,
                    "{}: {object}: a kind netpol does not read; skipped",
                    path.display()
                )
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
    /// The events, when the scan collected them ([`FileSource::scan`]); empty when they went to a
    /// sink ([`FileSource::scan_into`]).
    pub events: Vec<SourceEvent>,
    pub problems: Vec<FileProblem>,
    /// Files that changed since the last look and are left for the next one (possibly being
    /// written).
    pub settling: usize,
    /// Files read (and digested) by this scan.
    pub files_read: usize,
    /// Objects this scan sent: zero when nothing changed, so that an idle poll costs nothing
    /// per object.
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

/// What the source remembers of one file.
#[derive(Debug)]
struct FileState {
    signature: Signature,
    /// When the scan that read the file started.
    read_at: SystemTime,
    /// The digest of the text last read, whether it parsed or not (an unchanged unreadable file is
    /// not parsed again).
    digest: u64,
    /// The objects of the last text that parsed: a digest per key.
    objects: Digests,
}

/// Follows the YAML and JSON files under one directory.
#[derive(Debug)]
pub struct FileSource {
    root: PathBuf,
    files: BTreeMap<PathBuf, FileState>,
    /// The files found by the last look.
    present: BTreeSet<PathBuf>,
    /// Changed files seen once, with what the look saw; read when the next look sees the same.
    settling: BTreeMap<PathBuf, Signature>,
    /// Every file's signature at the last look. A file that looks the same twice has settled,
    /// even when a list that read it was abandoned (its state then is not kept in `files`).
    last_look: BTreeMap<PathBuf, Signature>,
    /// Files whose last read failed, with why.
    unreadable: BTreeMap<PathBuf, String>,
    listed: bool,
    /// List even while some file is unreadable or still changing (the caller stopped waiting).
    partial_ok: bool,
    /// Gives workloads' pods their address and node.
    templates: TemplatePlacement,
    /// The objects each file's last parse refused as invalid: left out, but counted and named
    /// until the file no longer holds them.
    refused: BTreeMap<PathBuf, Vec<ValidationError>>,
}

/// How a list went.
enum Listed {
    Complete,
    /// A file turned out unreadable part-way (it now counts as unreadable); nothing was completed.
    Abandoned,
}

impl FileSource {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FileSource {
            root: root.into(),
            files: BTreeMap::new(),
            present: BTreeSet::new(),
            settling: BTreeMap::new(),
            last_look: BTreeMap::new(),
            unreadable: BTreeMap::new(),
            listed: false,
            partial_ok: false,
            templates: TemplatePlacement::default(),
            refused: BTreeMap::new(),
        }
    }

    /// The objects the files hold that were refused as invalid, with their file.
    pub fn refused(&self) -> impl Iterator<Item = (&Path, &ValidationError)> {
        self.refused
            .iter()
            .flat_map(|(path, errors)| errors.iter().map(move |e| (path.as_path(), e)))
    }

    /// Notes what the parse of `path` refused, from the problems it added.
    fn note_refused(&mut self, path: &Path, added: &[FileProblem]) {
        let refused: Vec<ValidationError> = added
            .iter()
            .filter_map(|p| match p {
                FileProblem::InvalidObject { error, .. } => Some(error.clone()),
                _ => None,
            })
            .collect();
        if refused.is_empty() {
            self.refused.remove(path);
        } else {
            self.refused.insert(path.to_owned(), refused);
        }
    }

    /// Places workloads' pods by `templates` (by default in the default pod network, on no node).
    pub fn with_templates(mut self, templates: TemplatePlacement) -> Self {
        self.templates = templates;
        self
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

    /// Reads what changed since the last scan and returns its events. The first complete scan
    /// lists every kind.
    pub fn scan(&mut self) -> io::Result<Scan> {
        let mut events = Vec::new();
        let mut scan = self.scan_into(&mut |event| events.push(event))?;
        scan.events = events;
        Ok(scan)
    }

    /// [`FileSource::scan`], handing each event to `sink` as soon as it is known rather than
    /// collecting them.
    pub fn scan_into(&mut self, sink: &mut dyn FnMut(SourceEvent)) -> io::Result<Scan> {
        let mut templates = std::mem::take(&mut self.templates);
        let mut placed = |event| sink(templates.place(event));
        let scan = if self.listed {
            self.changes(false, &mut placed)
        } else {
            self.list(&mut placed)
        };
        self.templates = templates;
        scan
    }

    /// Reads every file again and relists every kind: the periodic full resync. Unchanged
    /// objects cost nothing downstream.
    pub fn relist(&mut self) -> io::Result<Scan> {
        let mut events = Vec::new();
        let mut scan = self.relist_into(&mut |event| events.push(event))?;
        scan.events = events;
        Ok(scan)
    }

    /// [`FileSource::relist`] into a sink. While some file is unreadable or still changing, a list
    /// would delete its objects: every file is read again and only changes are sent.
    pub fn relist_into(&mut self, sink: &mut dyn FnMut(SourceEvent)) -> io::Result<Scan> {
        let mut templates = std::mem::take(&mut self.templates);
        let mut placed = |event| sink(templates.place(event));
        let scan = if self.listed && !(self.unreadable.is_empty() && self.settling.is_empty()) {
            self.changes(true, &mut placed)
        } else {
            self.list(&mut placed)
        };
        self.templates = templates;
        scan
    }

    /// Lists every kind from every file. Before the first list, waits (returns having sent
    /// nothing) while files are unreadable or changing, unless the caller stopped waiting; a list
    /// that meets a newly broken file is abandoned and, if it may go on without it, started again.
    fn list(&mut self, sink: &mut dyn FnMut(SourceEvent)) -> io::Result<Scan> {
        let started = SystemTime::now();
        let mut scan = Scan::default();
        let ready = self.look(true, started, &mut scan)?;
        // A file gone is simply not listed: the list's end deletes its objects.
        for path in self.removed_files() {
            self.unreadable.remove(&path);
            self.refused.remove(&path);
            self.files.remove(&path);
        }
        // Every file can turn out broken once; after that the list goes on without it.
        for _ in 0..=ready.len() {
            let waiting = scan.settling > 0 || !self.unreadable.is_empty();
            if waiting && (self.listed || !self.partial_ok) {
                return Ok(scan);
            }
            if let Listed::Complete = self.list_once(&ready, started, &mut scan, sink) {
                if !self.listed {
                    for path in self.settling.keys() {
                        scan.problems.push(unreadable(path, &"still being written"));
                    }
                }
                scan.problems.extend(self.duplicates());
                self.listed = true;
                return Ok(scan);
            }
        }
        Ok(scan)
    }

    /// One attempt at a list: `Init` for every kind, `InitApply` for each object as its file is
    /// parsed (the first file's, in path order, for a key in several), `InitDone` for every kind.
    /// The files' new digests are kept only if the list completes.
    fn list_once(
        &mut self,
        ready: &[(PathBuf, Signature)],
        started: SystemTime,
        scan: &mut Scan,
        sink: &mut dyn FnMut(SourceEvent),
    ) -> Listed {
        for kind in SourceKind::ALL {
            sink(SourceEvent::new(kind, Event::Init));
        }
        let mut listed: BTreeMap<PathBuf, FileState> = BTreeMap::new();
        let mut sent = 0;
        for (path, signature) in ready {
            // A file known broken is parsed again only if its text changed.
            if self.unreadable.contains_key(path) {
                match file_digest(path) {
                    Ok(digest) if self.is_known_broken(path, digest) => {
                        scan.files_read += 1;
                        continue;
                    }
                    Ok(_) => {}
                    Err(error) => {
                        if self.not_read(path, error, &mut scan.problems) {
                            scan.objects_mapped += sent;
                            return Listed::Abandoned;
                        }
                        continue;
                    }
                }
            }
            let sent_before = sent;
            let mut each = |parsed: Parsed| {
                if !listed.values().any(|s| s.objects.contains_key(&parsed.key)) {
                    let kind = SourceKind::of(&parsed.object);
                    sink(SourceEvent::new(kind, Event::InitApply(parsed.object)));
                    sent += 1;
                }
            };
            let problems_before = scan.problems.len();
            match parse_file(path, &mut scan.problems, &mut each) {
                Ok((objects, digest)) => {
                    scan.files_read += 1;
                    self.note_refused(path, &scan.problems[problems_before..]);
                    self.unreadable.remove(path);
                    let state = FileState {
                        signature: *signature,
                        read_at: started,
                        digest,
                        objects,
                    };
                    listed.insert(path.clone(), state);
                }
                Err(FileError::Broken { message, digest }) => {
                    scan.files_read += 1;
                    self.note_broken(path, *signature, started, digest, message);
                    scan.objects_mapped += sent;
                    return Listed::Abandoned;
                }
                Err(error) => {
                    // Objects of a text that changed while it was read (or whose reading
                    // failed part-way) were sent: the list cannot complete with them.
                    let sent_some = sent > sent_before;
                    if self.not_read(path, error, &mut scan.problems) || sent_some {
                        scan.objects_mapped += sent;
                        return Listed::Abandoned;
                    }
                }
            }
        }
        for kind in SourceKind::ALL {
            sink(SourceEvent::new(kind, Event::InitDone));
        }
        scan.objects_mapped += sent;
        // Files not listed (gone, unreadable, still settling before the first list) keep only
        // what they are remembered by as broken; gone files are forgotten.
        self.files
            .retain(|path, _| self.unreadable.contains_key(path));
        self.files.extend(listed);
        Listed::Complete
    }

    /// Sends what changed: files whose signature moved (or every file, when `all`) are read, and
    /// those whose text changed are parsed; objects whose digest changed are applied and keys
    /// that disappeared deleted. A file that does not parse changes nothing.
    fn changes(&mut self, all: bool, sink: &mut dyn FnMut(SourceEvent)) -> io::Result<Scan> {
        let started = SystemTime::now();
        let mut scan = Scan::default();
        let ready = self.look(all, started, &mut scan)?;
        // Objects changed in a file, and keys gone from one, in the files' order.
        let mut changed: Vec<(PathBuf, Object)> = Vec::new();
        let mut gone: Vec<(PathBuf, Key)> = Vec::new();
        // Files whose objects were parsed again: only their keys can be newly duplicated.
        let mut parsed: Vec<PathBuf> = Vec::new();
        for path in self.removed_files() {
            self.unreadable.remove(&path);
            self.refused.remove(&path);
            if let Some(state) = self.files.remove(&path) {
                gone.extend(state.objects.into_keys().map(|key| (path.clone(), key)));
            }
        }
        for (path, signature) in ready {
            let digest = match file_digest(&path) {
                Ok(digest) => digest,
                Err(error) => {
                    self.not_read(&path, error, &mut scan.problems);
                    continue;
                }
            };
            scan.files_read += 1;
            if let Some(state) = self.files.get_mut(&path) {
                if state.digest == digest {
                    state.signature = signature;
                    state.read_at = started;
                    continue;
                }
            }
            let before = self.files.get(&path).map(|s| &s.objects);
            let mut in_file = Vec::new();
            let mut each = |parsed: Parsed| {
                if before.and_then(|b| b.get(&parsed.key)) != Some(&parsed.digest) {
                    in_file.push(parsed.object);
                }
            };
            let problems_before = scan.problems.len();
            let (objects, digest) = match parse_file(&path, &mut scan.problems, &mut each) {
                Ok((objects, digest)) => {
                    self.note_refused(&path, &scan.problems[problems_before..]);
                    self.unreadable.remove(&path);
                    parsed.push(path.clone());
                    let previous = self.files.remove(&path).map(|s| s.objects);
                    let lost = previous.into_iter().flatten().map(|(key, _)| key);
                    gone.extend(
                        lost.filter(|key| !objects.contains_key(key))
                            .map(|key| (path.clone(), key)),
                    );
                    changed.extend(in_file.into_iter().map(|o| (path.clone(), o)));
                    (objects, digest)
                }
                Err(FileError::Broken { message, digest }) => {
                    self.unreadable.insert(path.clone(), message);
                    let previous = self.files.remove(&path).map(|s| s.objects);
                    (previous.unwrap_or_default(), digest)
                }
                Err(error) => {
                    // Unreadable now, or changed while read: its objects stay as they were,
                    // and it is read again once its signature moves.
                    self.not_read(&path, error, &mut scan.problems);
                    continue;
                }
            };
            let state = FileState {
                signature,
                read_at: started,
                digest,
                objects,
            };
            self.files.insert(path, state);
        }
        if changed.is_empty() && gone.is_empty() {
            // Nothing changed: nothing to look up.
            return Ok(scan);
        }
        let events = self.effective_changes(changed, gone);
        scan.problems.extend(self.duplicates_in(&parsed));
        scan.objects_mapped = events.len();
        for event in events {
            sink(event);
        }
        Ok(scan)
    }

    /// The events for objects changed and keys gone: a changed object is applied if its file is
    /// the first (in path order) to hold its key; a key gone is deleted if no file holds it any
    /// more, and otherwise the version of the file that now comes first is applied (read again
    /// from that file: the source keeps no objects). In key order.
    fn effective_changes(
        &self,
        changed: Vec<(PathBuf, Object)>,
        gone: Vec<(PathBuf, Key)>,
    ) -> Vec<SourceEvent> {
        let mut events: BTreeMap<Key, SourceEvent> = BTreeMap::new();
        for (path, object) in changed {
            let key = Key::of(&object);
            if self.first_holder(&key) == Some(&path) {
                let kind = SourceKind::of(&object);
                events.insert(key, SourceEvent::new(kind, Event::Apply(object)));
            }
        }
        let mut wanted: BTreeMap<PathBuf, BTreeSet<Key>> = BTreeMap::new();
        for (path, key) in gone {
            if events.contains_key(&key) {
                continue;
            }
            match self.first_holder(&key) {
                None => {
                    if let Some(skeleton) = Object::skeleton(&key.object_ref()) {
                        let kind = SourceKind::of(&skeleton);
                        events.insert(key, SourceEvent::new(kind, Event::Delete(skeleton)));
                    }
                }
                // A later file's version comes into force; an earlier file's was in force already.
                Some(holder) if *holder > path => {
                    wanted.entry(holder.clone()).or_default().insert(key);
                }
                Some(_) => {}
            }
        }
        for (path, keys) in wanted {
            let mut each = |parsed: Parsed| {
                if keys.contains(&parsed.key) {
                    let kind = SourceKind::of(&parsed.object);
                    events.insert(
                        parsed.key,
                        SourceEvent::new(kind, Event::Apply(parsed.object)),
                    );
                }
            };
            // Problems of that file were reported when it was read.
            let _ = parse_file(&path, &mut Vec::new(), &mut each);
        }
        events.into_values().collect()
    }

    /// The first file (in path order) that holds `key`.
    fn first_holder(&self, key: &Key) -> Option<&PathBuf> {
        self.files
            .iter()
            .find(|(_, state)| state.objects.contains_key(key))
            .map(|(path, _)| path)
    }

    /// Files remembered but no longer found by the last look.
    fn removed_files(&self) -> Vec<PathBuf> {
        self.files
            .keys()
            .chain(self.unreadable.keys())
            .filter(|p| !self.present.contains(*p))
            .cloned()
            .collect()
    }

    /// Looks at every file: returns those to read now (changed, or every one when `all`), in path
    /// order, counting those still settling.
    fn look(
        &mut self,
        all: bool,
        started: SystemTime,
        scan: &mut Scan,
    ) -> io::Result<Vec<(PathBuf, Signature)>> {
        let paths = yaml_files(&self.root)?;
        self.settling.retain(|path, _| paths.contains(path));
        self.last_look.retain(|path, _| paths.contains(path));
        let mut ready = Vec::new();
        for path in &paths {
            let signature = match std::fs::metadata(path).and_then(|m| Signature::of(&m)) {
                Ok(signature) => signature,
                // Deleted between the listing and now: the next scan sees it gone.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    self.note_unreadable(path, e.to_string(), &mut scan.problems);
                    continue;
                }
            };
            if let Some(state) = self.files.get(path) {
                let racy = signature.modified + TIMESTAMP_GRANULARITY >= state.read_at;
                if state.signature == signature && !(racy || all) {
                    continue;
                }
            }
            if !self.settled(path, signature, started) {
                scan.settling += 1;
                continue;
            }
            ready.push((path.clone(), signature));
        }
        self.present = paths;
        Ok(ready)
    }

    /// Notes why `path` gave nothing (gone files are not noted); returns whether it now counts as
    /// unreadable and the first list must wait for it.
    fn not_read(&mut self, path: &Path, error: FileError, problems: &mut Vec<FileProblem>) -> bool {
        match error {
            FileError::Gone => {}
            FileError::Unreadable(message) => self.note_unreadable(path, message, problems),
            FileError::Broken { message, .. } => {
                self.note_unreadable(path, message, problems);
            }
        }
        self.unreadable.contains_key(path) && (self.listed || !self.partial_ok)
    }

    /// Whether `path` is unreadable and its text is still the one that did not parse.
    fn is_known_broken(&self, path: &Path, digest: u64) -> bool {
        self.unreadable.contains_key(path)
            && self.files.get(path).is_some_and(|s| s.digest == digest)
    }

    /// Remembers that `path`, with this text, does not parse; its objects (if any) stay.
    fn note_broken(
        &mut self,
        path: &Path,
        signature: Signature,
        started: SystemTime,
        digest: u64,
        message: String,
    ) {
        let state = self
            .files
            .entry(path.to_owned())
            .or_insert_with(|| FileState {
                signature,
                read_at: started,
                digest,
                objects: Digests::default(),
            });
        state.signature = signature;
        state.read_at = started;
        state.digest = digest;
        self.unreadable.insert(path.to_owned(), message);
    }

    /// Whether `path`, found at `signature`, may be read now: it was already read before (a
    /// rewrite is then caught by the next change of its signature), or this look saw what the
    /// previous look saw, or it has not been modified for [`SETTLE_AGE`].
    fn settled(&mut self, path: &Path, signature: Signature, now: SystemTime) -> bool {
        let known = self
            .files
            .get(path)
            .is_some_and(|state| state.signature == signature);
        let seen = self.last_look.insert(path.to_owned(), signature) == Some(signature);
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
    fn note_unreadable(&mut self, path: &Path, message: String, problems: &mut Vec<FileProblem>) {
        if self.unreadable.get(path) != Some(&message) {
            problems.push(unreadable(path, &message));
            self.unreadable.insert(path.to_owned(), message);
        }
    }

    /// The duplicates of the objects of `paths`: each key of theirs that another file also
    /// defines, reported as `duplicates` reports it (the first file in path order
    /// used, every other ignored). Costs the keys of these files times the number of files, not
    /// every object of every file: one pod changed in a file of its own checks one key.
    fn duplicates_in(&self, paths: &[PathBuf]) -> Vec<FileProblem> {
        let mut seen: foldhash::HashSet<&Key> = Default::default();
        // (the file's place in `paths`, the key, its holders in path order)
        let mut found: Vec<(usize, &Key, Vec<&PathBuf>)> = Vec::new();
        for (place, path) in paths.iter().enumerate() {
            let Some(state) = self.files.get(path) else {
                continue;
            };
            for key in state.objects.keys() {
                if !seen.insert(key) {
                    continue;
                }
                let holders: Vec<&PathBuf> = self
                    .files
                    .iter()
                    .filter(|(_, s)| s.objects.contains_key(key))
                    .map(|(p, _)| p)
                    .collect();
                if holders.len() > 1 {
                    found.push((place, key, holders));
                }
            }
        }
        found.sort_unstable_by_key(|(place, key, _)| (*place, *key));
        let mut problems = Vec::new();
        for (_, key, holders) in found {
            let (used, ignored) = holders.split_first().expect("two holders or more");
            problems.extend(ignored.iter().map(|ignored| FileProblem::Duplicate {
                object: key.object_ref(),
                used: (*used).clone(),
                ignored: (*ignored).clone(),
            }));
        }
        problems
    }

    /// Every object defined in more than one file.
    fn duplicates(&self) -> Vec<FileProblem> {
        let mut first: foldhash::HashMap<&Key, &PathBuf> = Default::default();
        let mut problems = Vec::new();
        for (path, state) in &self.files {
            let mut repeated: Vec<(&Key, &PathBuf)> = Vec::new();
            for key in state.objects.keys() {
                match first.entry(key) {
                    Entry::Occupied(used) => repeated.push((key, used.get())),
                    Entry::Vacant(vacant) => {
                        vacant.insert(path);
                    }
                }
            }
            repeated.sort_unstable_by_key(|(key, _)| *key);
            problems.extend(
                repeated
                    .into_iter()
                    .map(|(key, used)| FileProblem::Duplicate {
                        object: key.object_ref(),
                        used: used.clone(),
                        ignored: path.clone(),
                    }),
            );
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
