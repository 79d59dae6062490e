//! netpol-hcn's integration tests, one module per former test file, in one binary: each test
//! binary links every dependency again, so one binary per crate is what keeps the test build
//! short. Run one file's tests with `cargo test -p netpol-hcn --test integration <module>::`.

mod cleanup;
#[path = "../common/mod.rs"]
mod common;
mod compile;
#[path = "../../../engine/tests/common/mod.rs"]
#[allow(clippy::all)]
mod engine_common;
mod equivalence;
mod ipsets;
mod networks;
mod programmer;
mod quirks;
mod render_cache;
mod resilience;
mod sim;
