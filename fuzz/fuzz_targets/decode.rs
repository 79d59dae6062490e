//! Target (a): any bytes, read as YAML (the files of the embedded mode and `netpol check`) and
//! as JSON (what the API server sends, decoded per kind as the cluster mode does), then
//! translated through the agent's indexes. Nothing may panic, and the memory one input costs is
//! bounded by its size.
#![no_main]

use std::sync::OnceLock;

use kube::core::ApiResource;
use libfuzzer_sys::fuzz_target;
use netpol_api::{parse_values, parse_yaml, translate, Object};
use netpol_fuzz::meter::{self, Meter};
use netpol_indexes::decode::{decode, resources, Decoded};
use netpol_indexes::{Event, Indexes, SourceEvent, SourceKind};
use serde_json::Value;

#[global_allocator]
static ALLOCATOR: Meter = Meter;

/// Bytes one input may cost at most: a fixed allowance plus a multiple of its size (a YAML
/// scalar of 3 bytes becomes a JSON value, a typed field and an engine label of ~100 bytes).
fn budget(input: usize) -> usize {
    (8 << 20) + 1024 * input
}

fn kinds() -> &'static [(SourceKind, ApiResource)] {
    static KINDS: OnceLock<Vec<(SourceKind, ApiResource)>> = OnceLock::new();
    KINDS.get_or_init(resources)
}

/// What the agent does with an object: its policy entries or identities, through the indexes.
fn follow(indexes: &mut Indexes, object: Object) {
    let _ = translate(&object);
    let kind = SourceKind::of(&object);
    let _ = indexes.apply(SourceEvent::new(kind, Event::Apply(object)));
}

fn run(data: &[u8]) {
    let mut indexes = Indexes::new();
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(objects) = parse_yaml(text) {
            for object in objects.into_iter().flatten() {
                follow(&mut indexes, object);
            }
        }
    }
    if let Ok(value) = serde_json::from_slice::<Value>(data) {
        for (kind, resource) in kinds() {
            if let Decoded::Valid(object) = decode(*kind, resource, value.clone()) {
                follow(&mut indexes, *object);
            }
        }
        for object in parse_values([value]).into_iter().flatten() {
            follow(&mut indexes, object);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let base = meter::start();
    run(data);
    let peak = meter::peak_since(base);
    assert!(
        peak <= budget(data.len()),
        "{} input bytes cost {peak} bytes at the peak (budget {})",
        data.len(),
        budget(data.len())
    );
});
