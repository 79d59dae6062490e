//! netpol-engine's integration tests, one module per former test file, in one binary: each test
//! binary links every dependency again, so one binary per crate is what keeps the test build
//! short. Run one file's tests with `cargo test -p netpol-engine --test integration <module>::`.

mod address_reuse;
mod budget;
mod cfp_examples;
#[path = "../common/mod.rs"]
mod common;
mod exhaustive_table;
mod fuzz_regressions;
mod live_entries;
mod own_address;
mod partition;
mod per_pod_labels;
mod reference_equivalence;
mod twins;
mod world_classes;
