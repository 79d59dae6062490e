//! netpol-testbed's integration tests, one module per former test file, in one binary: each test
//! binary links every dependency again, so one binary per crate is what keeps the test build
//! short. Run one file's tests with `cargo test -p netpol-testbed --test integration <module>::`.

mod kernel;
mod kernel_elements;
mod limits;
mod paths;
