//! Reads one object of a watched kind from raw JSON through netpol-api's validation. An object
//! whose shape does not fit its kind is rejected alone, with an error naming it and the field.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::core::ApiResource;
use netpol_api::crd::{
    AdminNetworkPolicy, BaselineAdminNetworkPolicy, CiliumClusterwideNetworkPolicy,
    CiliumNetworkPolicy, ClusterNetworkPolicy,
};
use netpol_api::{Node, Object, ObjectRef, Pod, ValidationError};
use serde_json::Value;

use crate::SourceKind;

/// Every watched kind with its API resource.
pub fn resources() -> Vec<(SourceKind, ApiResource)> {
    vec![
        (SourceKind::Namespace, ApiResource::erase::<Namespace>(&())),
        (SourceKind::Pod, ApiResource::erase::<Pod>(&())),
        (SourceKind::Node, ApiResource::erase::<Node>(&())),
        (
            SourceKind::NetworkPolicy,
            ApiResource::erase::<NetworkPolicy>(&()),
        ),
        (
            SourceKind::AdminNetworkPolicy,
            ApiResource::erase::<AdminNetworkPolicy>(&()),
        ),
        (
            SourceKind::BaselineAdminNetworkPolicy,
            ApiResource::erase::<BaselineAdminNetworkPolicy>(&()),
        ),
        (
            SourceKind::ClusterNetworkPolicy,
            ApiResource::erase::<ClusterNetworkPolicy>(&()),
        ),
        (
            SourceKind::CiliumNetworkPolicy,
            ApiResource::erase::<CiliumNetworkPolicy>(&()),
        ),
        (
            SourceKind::CiliumClusterwideNetworkPolicy,
            ApiResource::erase::<CiliumClusterwideNetworkPolicy>(&()),
        ),
    ]
}

/// One object as read.
#[derive(Debug)]
pub enum Decoded {
    Valid(Box<Object>),
    /// The object could not be read as its kind.
    Invalid(ValidationError),
}

/// Reads `value`, an object of `kind` served at `resource`. List items of built-in kinds carry
/// no `apiVersion` and `kind`; they are filled in from the resource.
pub fn decode(kind: SourceKind, resource: &ApiResource, mut value: Value) -> Decoded {
    if let Some(map) = value.as_object_mut() {
        map.entry("apiVersion")
            .or_insert_with(|| Value::String(resource.api_version.clone()));
        map.entry("kind")
            .or_insert_with(|| Value::String(resource.kind.clone()));
    }
    let fallback = object_ref(kind, &value);
    match Object::from_value(value) {
        Ok(object) if SourceKind::of(&object) == kind => Decoded::Valid(Box::new(object)),
        Ok(object) => Decoded::Invalid(ValidationError {
            object: object.object_ref(),
            field: "kind".into(),
            message: format!("a {} arrived on the {kind} watch", object.kind()),
        }),
        Err(mut error) => {
            // An error found before the name was read names no object: name it for the log.
            if error.object.name.is_empty() {
                error.object = fallback;
            }
            Decoded::Invalid(error)
        }
    }
}

/// The object's reference as its metadata says, whatever the rest holds.
fn object_ref(kind: SourceKind, value: &Value) -> ObjectRef {
    let metadata = value.get("metadata");
    let text = |field: &str| metadata.and_then(|m| m.get(field)).and_then(Value::as_str);
    ObjectRef::new(
        kind.as_str(),
        text("namespace"),
        text("name").unwrap_or_default(),
    )
}

/// A stand-in holding only `invalid`'s kind, namespace and name, for removing what its key held
/// from an index that has no invalid state (namespaces, pods, nodes). None if even that fails.
pub fn skeleton(resource: &ApiResource, invalid: &ValidationError) -> Option<Object> {
    let mut metadata = serde_json::Map::new();
    metadata.insert("name".into(), Value::String(invalid.object.name.clone()));
    if let Some(namespace) = &invalid.object.namespace {
        metadata.insert("namespace".into(), Value::String(namespace.clone()));
    }
    let value = serde_json::json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": metadata,
    });
    Object::from_value(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    use netpol_api::crd::CiliumNetworkPolicy;

    #[test]
    fn a_misshapen_spec_rejects_only_its_object_and_names_the_field() {
        let resource = ApiResource::erase::<CiliumNetworkPolicy>(&());
        let bad = serde_json::json!({
            "metadata": {"name": "oops", "namespace": "shop", "resourceVersion": "7"},
            "spec": {"endpointSelector": {}, "ingress": "oops"},
        });
        match decode(SourceKind::CiliumNetworkPolicy, &resource, bad) {
            Decoded::Invalid(error) => {
                assert_eq!(error.object.to_string(), "CiliumNetworkPolicy shop/oops");
                assert!(error.field.contains("ingress"), "{error}");
            }
            other => panic!("{other:?}"),
        }
        let resource = ApiResource::erase::<NetworkPolicy>(&());
        let good = serde_json::json!({
            "metadata": {"name": "fine", "namespace": "shop"},
            "spec": {"podSelector": {}},
        });
        assert!(matches!(
            decode(SourceKind::NetworkPolicy, &resource, good),
            Decoded::Valid(o) if matches!(*o, Object::NetworkPolicy(_))
        ));
    }

    #[test]
    fn a_skeleton_keeps_the_key() {
        let resource = ApiResource::erase::<netpol_api::Pod>(&());
        let invalid = ValidationError {
            object: ObjectRef::new("Pod", Some("shop"), "web"),
            field: "spec".into(),
            message: "bad".into(),
        };
        let pod = skeleton(&resource, &invalid).unwrap();
        assert_eq!(pod.object_ref(), invalid.object);
    }
}
