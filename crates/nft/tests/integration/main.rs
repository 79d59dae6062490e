//! netpol-nft's integration tests, one module per former test file, in one binary: each test
//! binary links every dependency again, so one binary per crate is what keeps the test build
//! short. Run one file's tests with `cargo test -p netpol-nft --test integration <module>::`.

mod audit_equivalence;
#[path = "../../../engine/tests/common/mod.rs"]
mod common;
mod enforcer;
mod equivalence;
mod sets;
mod staging;
