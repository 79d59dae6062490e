//! Where watch events come from: the YAML files of the embedded mode, or the API server.

pub mod cluster;
pub use netpol_indexes::decode;
pub mod files;
pub mod jitter;
pub mod kube_api;
pub mod projection;
