//! Reading a stream from a file in bounded pieces, never holding its whole text.
//!
//! A 150,000-pod cluster's pods file is 100 MB of YAML or 280 MB of JSON; read whole, the text
//! alone was the agent's reading peak. [`parse_reader_each`] reads a large file twice instead:
//!
//! 1. **A scan** line by line (YAML) or byte by byte (JSON) decides how the text can be cut, with
//!    the same rules as the cuts of a whole text (`split.rs`, `json.rs`), and takes its digest.
//! 2. **The parse** reads it again, cuts it into pieces of about a megabyte (before `---` lines,
//!    before the items of a `kind: List`, between the elements of a JSON list's `items`), parses
//!    a wave of one piece per core at a time and hands each wave's objects on before reading on.
//!
//! What is held at once is a wave of pieces and their objects, whatever the file's size. A text
//! the scan finds no cut for (small, one document, anchors, flow style...), and any text in which
//! a piece fails to parse, is read whole and parsed as [`crate::parse_yaml_each`] parses a text,
//! so results and errors equal the sequential parse (`parse_equivalence.rs` checks both ways on
//! the same streams). A text that changes between the two readings fails with
//! [`ReadError::Changed`]; the objects handed on before are then the caller's to discard, as
//! after a YAML error.

use std::hash::Hasher;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::ops::Range;

use serde_json::Value;

use crate::fields::FieldValidation;
use crate::json::parse_json;
use crate::json_scan::{ElementEnds, JsonShape, YamlHazards};
use crate::large_json::LARGE_ITEM_BYTES;
use crate::object::{Object, Read as ReadObject};
use crate::parse::{
    parse_each_with, parse_piece, parse_wave, read_whole, yaml_options_for, Cutting, YamlError,
    PIECES_PER_CORE,
};
use crate::split::{is_document_start, refuses_document_split, ListShape, PieceHazards};
use crate::stream::{is_list_kind, json_items};
use crate::ValidationError;

/// Bytes read from the file at a time.
const READ_BUFFER: usize = 256 << 10;

/// The longest line the scan follows; a text with a longer one is read whole.
const MAX_LINE: usize = 4 << 20;

/// The digest is taken over blocks of this size, so that it does not depend on how the text was
/// read.
const DIGEST_BLOCK: usize = 64 << 10;

/// Why a stream could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The reader failed, or the text is not UTF-8 (as `read_to_string` reports it).
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The text is not YAML (or JSON) that can be read at all; `digest` is its digest.
    #[error("{error}")]
    Yaml { error: YamlError, digest: u64 },
    /// The text changed between two readings of it (a writer still at work, or a file rewritten
    /// in place).
    #[error("the file changed while it was being read")]
    Changed,
}

/// A hasher for digests that tell a change: of a file's text here, of an object as read by the
/// file source. foldhash under a fixed seed, not SipHash: a 150,000-pod file is 100 MB of text
/// hashed twice and 150,000 objects hashed in thousands of small writes each, where SipHash
/// cost 4% of the sync. Nothing outside the process compares these digests.
pub fn digest_hasher() -> foldhash::quality::FoldHasher<'static> {
    use std::hash::BuildHasher;
    foldhash::quality::FixedState::with_seed(0x6e65_7470_6f6c_6469).build_hasher()
}

/// The digest of a text, as [`parse_reader_each`] and [`digest_of`] take it.
pub fn text_digest(text: &str) -> u64 {
    let mut hasher = digest_hasher();
    for block in text.as_bytes().chunks(DIGEST_BLOCK) {
        hasher.write(block);
    }
    hasher.finish()
}

/// The digest of everything `reader` holds, read in bounded pieces.
pub fn digest_of(reader: &mut impl Read) -> io::Result<u64> {
    let mut hashing = Hashing::new(reader);
    io::copy(&mut hashing, &mut io::sink())?;
    Ok(hashing.finish())
}

/// Reads a YAML or JSON stream from `reader` as [`crate::parse_yaml_each`] reads a text, without
/// holding the text of a large one (see the module's documentation), and returns its digest
/// ([`text_digest`] of the text). `prepare` runs on the threads that parse.
///
/// On an error, `sink` may already have received objects of the stream: the caller must
/// discard them.
pub fn parse_reader_each<R: Read + Seek, T: Send>(
    reader: &mut R,
    validation: FieldValidation,
    prepare: impl Fn(Result<Object, ValidationError>) -> T + Sync,
    sink: &mut dyn FnMut(T),
) -> Result<u64, ReadError> {
    let prepare = |read: ReadObject| prepare(validation.apply(read));
    read_each_with(
        reader,
        Cutting::for_this_machine(),
        READ_BUFFER,
        &prepare,
        sink,
    )
}

/// How a large text can be cut.
#[derive(Debug)]
enum Shape {
    /// No cut: read it whole.
    Whole,
    /// Before document-start lines.
    Documents,
    /// Before the items of the `kind: List` whose items block spans this range.
    List(Range<u64>),
    /// Between the elements of the JSON list's `items`, which span this range.
    Json(Range<u64>),
}

/// What the scan found.
struct Scanned {
    shape: Shape,
    /// The text's digest, if the scan read all of it.
    digest: Option<u64>,
}

/// How the parse went.
enum Streamed {
    /// Every piece parsed; the text's digest.
    Complete(u64),
    /// A piece did not parse (or was not UTF-8): the text is read whole.
    Incomplete,
}

pub(crate) fn read_each_with<R: Read + Seek, T: Send>(
    reader: &mut R,
    cutting: Cutting,
    buffer: usize,
    prepare: &(impl Fn(ReadObject) -> T + Sync),
    sink: &mut dyn FnMut(T),
) -> Result<u64, ReadError> {
    let len = reader.seek(SeekFrom::End(0))?;
    reader.seek(SeekFrom::Start(0))?;
    if len < cutting.min_bytes as u64 {
        return whole(reader, cutting, 0, None, prepare, sink);
    }
    let scanned = scan(reader, buffer)?;
    reader.seek(SeekFrom::Start(0))?;
    let pieces = (cutting.workers * PIECES_PER_CORE).max(1) as u64;
    let target = (cutting.max_piece_bytes as u64).min(len.div_ceil(pieces).max(1)) as usize;
    let stream = Stream {
        buffer,
        target,
        workers: cutting.workers.max(1),
    };
    let mut delivered = 0;
    let mut counted = |object: T| {
        delivered += 1;
        sink(object);
    };
    let streamed = match scanned.shape {
        Shape::Whole => Streamed::Incomplete,
        Shape::Documents => stream.yaml(reader, None, prepare, &mut counted)?,
        Shape::List(items) => stream.yaml(reader, Some(items), prepare, &mut counted)?,
        Shape::Json(items) => stream.json(reader, items, prepare, &mut counted)?,
    };
    match streamed {
        Streamed::Complete(digest) if Some(digest) == scanned.digest => Ok(digest),
        Streamed::Complete(_) => Err(ReadError::Changed),
        Streamed::Incomplete => whole(reader, cutting, delivered, scanned.digest, prepare, sink),
    }
}

/// Reads the text whole and parses it as a text is parsed, handing on its objects after the
/// first `skip` (those were handed on from pieces of the same text, whose digest was `expected`).
fn whole<R: Read + Seek, T: Send>(
    reader: &mut R,
    cutting: Cutting,
    skip: usize,
    expected: Option<u64>,
    prepare: &(impl Fn(ReadObject) -> T + Sync),
    sink: &mut dyn FnMut(T),
) -> Result<u64, ReadError> {
    reader.seek(SeekFrom::Start(0))?;
    let mut text = String::new();
    reader.read_to_string(&mut text)?;
    let digest = text_digest(&text);
    let yaml = |error| ReadError::Yaml { error, digest };
    if skip == 0 {
        parse_each_with(&text, cutting, prepare, sink).map_err(yaml)?;
        return Ok(digest);
    }
    if expected != Some(digest) {
        return Err(ReadError::Changed);
    }
    // The pieces handed on were cut where the stream parses the same in parts: they are the
    // first objects the sequential parse gives.
    for object in read_whole(&text).map_err(yaml)?.into_iter().skip(skip) {
        sink(prepare(object));
    }
    Ok(digest)
}

/// Reads the whole text once: how it can be cut, and its digest.
fn scan<R: Read>(reader: &mut R, buffer: usize) -> io::Result<Scanned> {
    let mut input = BufReader::with_capacity(buffer, Hashing::new(reader));
    let start = input.fill_buf()?;
    let bom = if start.starts_with("\u{feff}".as_bytes()) {
        3
    } else {
        0
    };
    let first = start[bom..]
        .iter()
        .copied()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'));
    let shape = match first {
        Some(b'{') => scan_json(&mut input, bom)?,
        Some(b'[') | None => Shape::Whole,
        Some(_) => scan_yaml(&mut input)?,
    };
    let digest = match shape {
        Shape::Whole => None,
        _ => Some(input.into_inner().finish()),
    };
    Ok(Scanned { shape, digest })
}

fn scan_json<R: Read>(input: &mut BufReader<Hashing<R>>, bom: usize) -> io::Result<Shape> {
    input.consume(bom);
    let mut shape = JsonShape::new();
    let mut hazards = YamlHazards::default();
    loop {
        let bytes = input.fill_buf()?;
        if bytes.is_empty() {
            break;
        }
        shape.feed(bytes);
        hazards.feed(bytes);
        let read = bytes.len();
        input.consume(read);
    }
    let Some((head, items)) = shape.finish() else {
        return Ok(Shape::Whole);
    };
    // The document without its items must be a list kind, read by the JSON reader as YAML
    // would read it: then its items are all it holds.
    let is_list = parse_json(&head).is_some_and(|objects| objects.is_empty());
    if hazards.found() || !is_list {
        return Ok(Shape::Whole);
    }
    let offset = bom as u64;
    Ok(Shape::Json(
        items.start as u64 + offset..items.end as u64 + offset,
    ))
}

fn scan_yaml<R: Read>(input: &mut BufReader<Hashing<R>>) -> io::Result<Shape> {
    let mut hazards = PieceHazards::default();
    let mut list = Some(ListShape::default());
    let mut starts = 0;
    let mut first_starts_text = false;
    let mut documents_refused = false;
    let mut line = Vec::new();
    let mut offset = 0;
    loop {
        line.clear();
        let read = input.read_until(b'\n', &mut line)?;
        if read == 0 {
            break;
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            return Ok(Shape::Whole);
        };
        if read > MAX_LINE || hazards.line(text) {
            return Ok(Shape::Whole);
        }
        let (start, end) = (offset, offset + read);
        offset = end;
        documents_refused |= refuses_document_split(text);
        if is_document_start(text) {
            starts += 1;
            first_starts_text |= start == 0;
        }
        if let Some(shape) = &mut list {
            if shape.line(text, start, end).is_none() {
                list = None;
            }
        }
        if documents_refused && list.is_none() {
            return Ok(Shape::Whole);
        }
    }
    // As a text is cut: what comes before the first document start is a document too.
    let documents = starts + usize::from(!first_starts_text);
    if !documents_refused && documents >= 2 {
        return Ok(Shape::Documents);
    }
    let Some((head, items)) = list.and_then(|shape| shape.finish(offset)) else {
        return Ok(Shape::Whole);
    };
    let head: Option<Value> =
        serde_saphyr::from_str_with_options(&head, yaml_options_for(head.len())).ok();
    let is_list = head
        .as_ref()
        .and_then(|h| h.get("kind"))
        .and_then(Value::as_str)
        .is_some_and(is_list_kind);
    Ok(if is_list {
        Shape::List(items.start as u64..items.end as u64)
    } else {
        Shape::Whole
    })
}

/// How the parse cuts and reads.
struct Stream {
    buffer: usize,
    /// Pieces are cut at the first cut point past this size.
    target: usize,
    workers: usize,
}

impl Stream {
    /// Parses a YAML text cut before document starts, or (`items`) before the items of the
    /// items block spanning that range.
    fn yaml<R: Read, T: Send>(
        &self,
        reader: &mut R,
        items: Option<Range<u64>>,
        prepare: &(impl Fn(ReadObject) -> T + Sync),
        sink: &mut dyn FnMut(T),
    ) -> io::Result<Streamed> {
        let documents = items.is_none();
        let parse = |run: &str| parse_piece(run, documents);
        let mut waves = Waves::new(self.workers, &parse, prepare, sink);
        let mut input = BufReader::with_capacity(self.buffer, Hashing::new(reader));
        let mut line = Vec::new();
        let mut piece = String::new();
        // Where the document or item being read starts in `piece`.
        let mut element = 0;
        let mut offset = 0;
        loop {
            line.clear();
            let read = input.read_until(b'\n', &mut line)?;
            if read == 0 {
                break;
            }
            let start = offset;
            offset += read as u64;
            if items.as_ref().is_some_and(|items| !items.contains(&start)) {
                continue;
            }
            let Ok(text) = std::str::from_utf8(&line) else {
                return Ok(Streamed::Incomplete);
            };
            let cut = if documents {
                is_document_start(text)
            } else {
                text.starts_with("- ")
            };
            if cut {
                // A large document or item goes in a run of its own, which reads a policy
                // without its tree (`parse_block`).
                if piece.len() - element >= LARGE_ITEM_BYTES
                    && !push_apart(&mut waves, &mut piece, element)
                {
                    return Ok(Streamed::Incomplete);
                }
                if piece.len() >= self.target && !waves.push(std::mem::take(&mut piece)) {
                    return Ok(Streamed::Incomplete);
                }
                element = piece.len();
            }
            piece.push_str(text);
        }
        if piece.len() - element >= LARGE_ITEM_BYTES && !push_apart(&mut waves, &mut piece, element)
        {
            return Ok(Streamed::Incomplete);
        }
        let last = piece.is_empty() || waves.push(piece);
        if !(last && waves.flush()) {
            return Ok(Streamed::Incomplete);
        }
        Ok(Streamed::Complete(input.into_inner().finish()))
    }

    /// Parses a JSON list, cut between the elements of its `items`, which span `items`.
    fn json<R: Read, T: Send>(
        &self,
        reader: &mut R,
        items: Range<u64>,
        prepare: &(impl Fn(ReadObject) -> T + Sync),
        sink: &mut dyn FnMut(T),
    ) -> io::Result<Streamed> {
        let mut waves = Waves::new(self.workers, &json_items, prepare, sink);
        let mut input = BufReader::with_capacity(self.buffer, Hashing::new(reader));
        let mut ends = ElementEnds::default();
        let mut piece: Vec<u8> = Vec::new();
        // Where the element being read starts in `piece`.
        let mut element = 0;
        let mut pieces = 0;
        let mut offset = 0u64;
        loop {
            let bytes = input.fill_buf()?;
            if bytes.is_empty() {
                break;
            }
            let read = bytes.len();
            let from = items.start.clamp(offset, offset + read as u64) - offset;
            let to = items.end.clamp(offset, offset + read as u64) - offset;
            let mut part = &bytes[from as usize..to as usize];
            while !part.is_empty() {
                let Some(comma) = ends.next_separator(part) else {
                    piece.extend_from_slice(part);
                    break;
                };
                piece.extend_from_slice(&part[..comma]);
                part = &part[comma + 1..];
                if is_large_object(&piece[element..]) {
                    if !push_large(&mut waves, &mut piece, element, &mut pieces) {
                        return Ok(Streamed::Incomplete);
                    }
                    element = 0;
                    continue;
                }
                if piece.len() < self.target {
                    piece.push(b',');
                    element = piece.len();
                    continue;
                }
                pieces += 1;
                element = 0;
                let pushed = json_run(std::mem::take(&mut piece)).is_some_and(|r| waves.push(r));
                if !pushed {
                    return Ok(Streamed::Incomplete);
                }
            }
            offset += read as u64;
            input.consume(read);
        }
        // The last run; an empty one is an empty list, unless runs were cut before it (a comma
        // with nothing after it, which JSON refuses).
        if is_large_object(&piece[element..]) {
            if !push_large(&mut waves, &mut piece, element, &mut pieces) {
                return Ok(Streamed::Incomplete);
            }
        } else {
            let last = !piece.iter().all(u8::is_ascii_whitespace) || pieces > 0;
            if last && !json_run(piece).is_some_and(|r| waves.push(r)) {
                return Ok(Streamed::Incomplete);
            }
        }
        if !waves.flush() {
            return Ok(Streamed::Incomplete);
        }
        Ok(Streamed::Complete(input.into_inner().finish()))
    }
}

/// Pushes the YAML of `piece` before `element` as a run (if there is any), then the large
/// document or item from `element` on as a run of its own, leaving `piece` empty: `parse_block`
/// reads a policy that large without its tree. False if either does not parse.
fn push_apart<P, Q, T>(waves: &mut Waves<'_, P, Q, T>, piece: &mut String, element: usize) -> bool
where
    P: Fn(&str) -> Option<Vec<ReadObject>> + Sync,
    Q: Fn(ReadObject) -> T + Sync,
    T: Send,
{
    let large = piece.split_off(element);
    (piece.is_empty() || waves.push(std::mem::take(piece))) && waves.push(large)
}

/// Whether a list element is an object of at least [`LARGE_ITEM_BYTES`]: the element that goes
/// in a run of its own (an array stays in a run: alone, it would be read as the run itself).
fn is_large_object(element: &[u8]) -> bool {
    element.len() >= LARGE_ITEM_BYTES
        && element
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|&b| b == b'{')
}

/// Pushes the elements of `piece` before `element` as a run (if there are any), then the large
/// element that follows them as a run of its own, unwrapped: [`json_items`] reads a policy that
/// large without its JSON tree (`large_json.rs`). False if either does not parse.
fn push_large<P, Q, T>(
    waves: &mut Waves<'_, P, Q, T>,
    piece: &mut Vec<u8>,
    element: usize,
    pieces: &mut usize,
) -> bool
where
    P: Fn(&str) -> Option<Vec<ReadObject>> + Sync,
    Q: Fn(ReadObject) -> T + Sync,
    T: Send,
{
    let large = piece.split_off(element);
    // The elements before it, without the separator that followed them.
    if piece.pop().is_some() {
        *pieces += 1;
        if !json_run(std::mem::take(piece)).is_some_and(|r| waves.push(r)) {
            return false;
        }
    }
    *pieces += 1;
    String::from_utf8(large).is_ok_and(|run| waves.push(run))
}

/// A run of a JSON list's elements as an array of its own; `None` if it is blank (a cut next to
/// an empty element) or not UTF-8.
fn json_run(elements: Vec<u8>) -> Option<String> {
    if elements.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let mut run = Vec::with_capacity(elements.len() + 2);
    run.push(b'[');
    run.extend_from_slice(&elements);
    run.push(b']');
    String::from_utf8(run).ok()
}

/// Pieces gathered into waves of one per worker, each wave parsed in parallel and its objects
/// handed on before the next is gathered.
struct Waves<'a, P, Q, T> {
    workers: usize,
    wave: Vec<String>,
    parse: &'a P,
    prepare: &'a Q,
    sink: &'a mut dyn FnMut(T),
}

impl<'a, P, Q, T> Waves<'a, P, Q, T>
where
    P: Fn(&str) -> Option<Vec<ReadObject>> + Sync,
    Q: Fn(ReadObject) -> T + Sync,
    T: Send,
{
    fn new(workers: usize, parse: &'a P, prepare: &'a Q, sink: &'a mut dyn FnMut(T)) -> Self {
        Waves {
            workers,
            wave: Vec::with_capacity(workers),
            parse,
            prepare,
            sink,
        }
    }

    /// Adds a piece; a full wave is parsed. A large piece (a policy in a run of its own) is
    /// parsed alone, after the wave gathered before it: its typed form holds several times its
    /// text while it is read, so two at once would double the peak a large policy costs, and the
    /// calling thread's heap reuses what the one before it freed. False if a piece did not
    /// parse.
    fn push(&mut self, piece: String) -> bool {
        if piece.len() >= LARGE_ITEM_BYTES {
            let before = self.flush();
            self.wave.push(piece);
            return before && self.flush();
        }
        self.wave.push(piece);
        self.wave.len() < self.workers || self.flush()
    }

    /// Parses the pieces gathered. False if one did not parse.
    fn flush(&mut self) -> bool {
        let wave = std::mem::take(&mut self.wave);
        parse_wave(&wave, self.parse, self.prepare, &mut *self.sink)
    }
}

/// A reader that takes the digest of what is read through it.
struct Hashing<R> {
    inner: R,
    hasher: foldhash::quality::FoldHasher<'static>,
    block: Vec<u8>,
}

impl<R> Hashing<R> {
    fn new(inner: R) -> Self {
        Hashing {
            inner,
            hasher: digest_hasher(),
            block: Vec::with_capacity(DIGEST_BLOCK),
        }
    }

    /// The digest of everything read: [`text_digest`] of the text.
    fn finish(mut self) -> u64 {
        if !self.block.is_empty() {
            self.hasher.write(&self.block);
        }
        self.hasher.finish()
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(buf)?;
        let mut bytes = &buf[..read];
        while !bytes.is_empty() {
            let take = (DIGEST_BLOCK - self.block.len()).min(bytes.len());
            self.block.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.block.len() == DIGEST_BLOCK {
                self.hasher.write(&self.block);
                self.block.clear();
            }
        }
        Ok(read)
    }
}

#[cfg(test)]
mod tests;
