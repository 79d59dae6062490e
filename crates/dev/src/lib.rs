//! `netpol-dev`: the development tools, kept out of `netpol`, the binary the DaemonSet runs and
//! operators use.
//!
//! | module | job |
//! |---|---|
//! | [`synth`] | the synthetic cluster generator: files for scale runs (`netpol-dev synth`), engine terms for benchmarks ([`synth::engine_terms`]) |
//! | [`cidr`] | CIDR-heavy policies of every kind that holds addresses (`netpol-dev cidr`) |
//! | [`cli`] | the `netpol-dev` command line, also callable from tests and benchmarks ([`run`]) |

pub mod cidr;
pub mod cli;
pub mod cpu;
pub mod synth;

pub use cli::run;
