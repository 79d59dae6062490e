//! The adapter between scenario objects and the API layer: the one module that reads Kubernetes
//! objects with netpol-api and turns them into the identities and policy entries of a [`Cluster`].

use std::collections::BTreeMap;

use netpol_api::cluster::{
    namespace_labels, namespace_name_labels, node_identities, pod_identities,
};
use netpol_api::{translate, Diagnostic, Object, ObjectRef};
use netpol_engine::SharedLabels;

use super::cluster::Cluster;
use super::error::{LoadError, LoadErrors};
use super::expect::PodRef;
use super::objects::{overlay, SourcedObject};

/// A cluster built from objects, and the warnings translation raised, each naming its file and
/// object.
pub struct Built {
    pub cluster: Cluster,
    pub warnings: Vec<String>,
}

/// A validated object and where it was written.
struct Placed<'a> {
    source: &'a SourcedObject,
    object: Object,
}

/// Reads the objects of a topology and of a scenario, lets the scenario's replace the topology's
/// with the same kind, namespace and name, and builds their cluster. Every object that fails
/// validation or translation is reported; one bad object fails the scenario, which then tests
/// nothing.
pub fn build_cluster(
    topology: &[SourcedObject],
    own: &[SourcedObject],
) -> Result<Built, LoadErrors> {
    let mut errors = Vec::new();
    let topology = read(topology, &mut errors);
    let own = read(own, &mut errors);
    let objects = overlay(topology, own, |p| p.object.object_ref());

    let namespaces: BTreeMap<String, SharedLabels> = objects
        .iter()
        .filter_map(|p| match &p.object {
            Object::Namespace(ns) => {
                Some((p.object.object_ref().name, namespace_labels(ns).into()))
            }
            _ => None,
        })
        .collect();

    let mut cluster = Cluster::new();
    let mut warnings = Vec::new();
    for placed in &objects {
        let object_ref = placed.object.object_ref();
        match &placed.object {
            Object::Pod(pod) => {
                let pod_ref = pod_ref(&object_ref);
                let labels = namespaces
                    .get(&pod_ref.namespace)
                    .cloned()
                    .unwrap_or_else(|| namespace_name_labels(&pod_ref.namespace).into());
                cluster.add_pod(pod_ref, pod_identities(pod, &labels));
            }
            Object::Node(node) => cluster.add_node(object_ref.name, node_identities(node)),
            Object::Namespace(_) => {}
            policy => {
                let translation = translate(policy);
                errors.extend(
                    translation
                        .errors
                        .into_iter()
                        .map(|e| object_error(placed.source, e)),
                );
                // A warning reads like an error (file, object, field) but fails nothing.
                warnings.extend(
                    translation
                        .warnings
                        .into_iter()
                        .map(|w| object_error(placed.source, w).to_string()),
                );
                cluster.add_entries(translation.entries);
            }
        }
    }
    if errors.is_empty() {
        Ok(Built { cluster, warnings })
    } else {
        Err(LoadErrors(errors))
    }
}

/// Reads each object, reporting those that fail validation.
fn read<'a>(sources: &'a [SourcedObject], errors: &mut Vec<LoadError>) -> Vec<Placed<'a>> {
    sources
        .iter()
        .filter_map(|source| match Object::from_value(source.value.clone()) {
            Ok(object) => Some(Placed { source, object }),
            Err(e) => {
                errors.push(object_error(source, e));
                None
            }
        })
        .collect()
}

fn pod_ref(object: &ObjectRef) -> PodRef {
    PodRef {
        namespace: object.namespace.clone().unwrap_or_default(),
        name: object.name.clone(),
    }
}

fn object_error(source: &SourcedObject, diagnostic: Diagnostic) -> LoadError {
    LoadError::Object {
        file: source.file.clone(),
        object: source.describe(),
        field: diagnostic.field,
        message: diagnostic.message,
    }
}
