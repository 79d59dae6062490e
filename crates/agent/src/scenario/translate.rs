//! The adapter between scenario objects and the API layer (netpol-api): the one module that turns
//! Kubernetes objects into identities and policy entries.
//!
//! netpol-api has not landed yet, so every object is reported as untranslatable; a scenario with
//! no objects still loads.

use super::cluster::Cluster;
use super::error::{LoadError, LoadErrors};
use super::objects::SourcedObject;

/// A cluster built from objects, and the warnings translation raised.
pub struct Built {
    pub cluster: Cluster,
    pub warnings: Vec<String>,
}

pub fn build_cluster(objects: &[SourcedObject]) -> Result<Built, LoadErrors> {
    let errors: Vec<LoadError> = objects
        .iter()
        .map(|o| LoadError::Object {
            file: o.file.clone(),
            object: o.describe(),
            message: "cannot translate objects: netpol-api is not available yet".into(),
        })
        .collect();
    if errors.is_empty() {
        Ok(Built {
            cluster: Cluster::new(),
            warnings: Vec::new(),
        })
    } else {
        Err(LoadErrors(errors))
    }
}
