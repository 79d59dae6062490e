//! The `netpol` command: the scenario checker (`check`, `matrix`, `explain`) and, later, the
//! Windows node agent. The binary in `main.rs` only parses arguments and dispatches here.

pub mod agent;
pub mod cli;
pub mod scenario;
pub mod synth;
