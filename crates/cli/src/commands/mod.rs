//! One module per `netpol` subcommand: its arguments and its `run`.

pub mod acls;
pub mod agent;
pub mod check;
pub mod cleanup;
pub mod controller;
pub mod crds;
pub mod diff;
pub mod explain;
pub mod flows;
pub mod lint;
pub mod matrix;
pub mod version;
