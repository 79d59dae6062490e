//! API objects of every supported kind, each read from one JSON value.
//!
//! An object is read on its own: its `apiVersion` and `kind` pick the type, and any error names
//! the object and the field. Reading whole YAML streams and lists of objects is `parse.rs`'s
//! job; it hands each object's value to [`Object::from_value`].

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::crd::cilium::CiliumPolicyWire;
use crate::crd::{
    AdminNetworkPolicy, BaselineAdminNetworkPolicy, CiliumClusterwideNetworkPolicy,
    CiliumNetworkPolicy, ClusterNetworkPolicy,
};
use crate::error::{ObjectRef, ValidationError, Warning};
use crate::fields::{deserialize, deserialize_from, unknown_field, FieldValidation};
use crate::node::Node;
use crate::pod::Pod;
use crate::prune::drop_unread_metadata;
use crate::validate;

/// The namespace `kubectl apply` puts a namespaced object in when it names none.
pub const DEFAULT_NAMESPACE: &str = "default";

/// One supported API object.
// Objects are built once per load and moved rarely, so boxing the large variants buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Object {
    Namespace(Namespace),
    Pod(Pod),
    Node(Node),
    NetworkPolicy(NetworkPolicy),
    AdminNetworkPolicy(AdminNetworkPolicy),
    BaselineAdminNetworkPolicy(BaselineAdminNetworkPolicy),
    ClusterNetworkPolicy(ClusterNetworkPolicy),
    CiliumNetworkPolicy(CiliumNetworkPolicy),
    CiliumClusterwideNetworkPolicy(CiliumClusterwideNetworkPolicy),
}

/// An object as read, with every field its kind does not have (see [`crate::fields`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ReadObject {
    pub object: Object,
    /// One diagnostic per unknown field of a policy kind, naming its path; empty for pods,
    /// nodes and namespaces, whose unread fields are skipped on purpose.
    pub unknown_fields: Vec<Warning>,
}

/// One object as read, or why it could not be: what every reader of streams produces, before a
/// [`FieldValidation`] decides what becomes of its unknown fields.
pub(crate) type Read = Result<ReadObject, ValidationError>;

/// Kept beside [`Read`] rather than in `fields`, so that `fields` (which `object` uses to
/// deserialize) does not depend on `object`.
impl FieldValidation {
    /// What becomes of an object as read: under [`FieldValidation::Strict`] an object with an
    /// unknown field is refused, the error naming the first such field (and counting the others).
    pub(crate) fn apply(self, read: Read) -> Result<Object, ValidationError> {
        let ReadObject {
            object,
            unknown_fields,
        } = read?;
        let mut unknown = unknown_fields.into_iter();
        match (self, unknown.next()) {
            (FieldValidation::Strict, Some(mut first)) => {
                let more: Vec<String> = unknown.map(|d| d.field).collect();
                if !more.is_empty() {
                    first.message = format!(
                        "{}; {} more unknown: {}",
                        first.message,
                        more.len(),
                        more.join(", ")
                    );
                }
                Err(first)
            }
            _ => Ok(object),
        }
    }
}

/// Where a reader records the paths of unknown fields; `None` where they are not tracked.
type Unknown<'a> = Option<&'a mut Vec<String>>;

/// How a kind is spelled on the wire, whether it lives in a namespace, and how it is read.
struct KindInfo {
    kind: &'static str,
    api_version: &'static str,
    namespaced: bool,
    read: fn(Value, &ObjectRef, Unknown) -> Result<Object, ValidationError>,
    /// A policy kind's reader straight from JSON text (see [`crate::large_json`]); `None` for
    /// the kinds always read through a tree.
    read_text: Option<TextReader>,
}

const KINDS: [KindInfo; 9] = [
    KindInfo {
        kind: "Namespace",
        api_version: "v1",
        namespaced: false,
        read: |v, o, _| deserialize(v, o, None).map(Object::Namespace),
        read_text: None,
    },
    KindInfo {
        kind: "Pod",
        api_version: "v1",
        namespaced: true,
        read: |v, o, _| deserialize(v, o, None).map(Object::Pod),
        read_text: None,
    },
    KindInfo {
        kind: "Node",
        api_version: "v1",
        namespaced: false,
        read: |v, o, _| deserialize(v, o, None).map(Object::Node),
        read_text: None,
    },
    KindInfo {
        kind: "NetworkPolicy",
        api_version: "networking.k8s.io/v1",
        namespaced: true,
        read: |v, o, u| deserialize(v, o, u).map(Object::NetworkPolicy),
        read_text: Some(|d, u| deserialize_from(d, u).ok().map(Object::NetworkPolicy)),
    },
    KindInfo {
        kind: "AdminNetworkPolicy",
        api_version: "policy.networking.k8s.io/v1alpha1",
        namespaced: false,
        read: |v, o, u| deserialize(v, o, u).map(Object::AdminNetworkPolicy),
        read_text: Some(|d, u| deserialize_from(d, u).ok().map(Object::AdminNetworkPolicy)),
    },
    KindInfo {
        kind: "BaselineAdminNetworkPolicy",
        api_version: "policy.networking.k8s.io/v1alpha1",
        namespaced: false,
        read: |v, o, u| deserialize(v, o, u).map(Object::BaselineAdminNetworkPolicy),
        read_text: Some(|d, u| {
            deserialize_from(d, u)
                .ok()
                .map(Object::BaselineAdminNetworkPolicy)
        }),
    },
    KindInfo {
        kind: "ClusterNetworkPolicy",
        api_version: "policy.networking.k8s.io/v1alpha2",
        namespaced: false,
        read: |v, o, u| deserialize(v, o, u).map(Object::ClusterNetworkPolicy),
        read_text: Some(|d, u| {
            deserialize_from(d, u)
                .ok()
                .map(Object::ClusterNetworkPolicy)
        }),
    },
    KindInfo {
        kind: "CiliumNetworkPolicy",
        api_version: "cilium.io/v2",
        namespaced: true,
        read: |v, o, u| {
            deserialize::<CiliumPolicyWire>(v, o, u).map(|w| Object::CiliumNetworkPolicy(w.into()))
        },
        read_text: Some(|d, u| {
            deserialize_from::<CiliumPolicyWire, _>(d, u)
                .ok()
                .map(|w| Object::CiliumNetworkPolicy(w.into()))
        }),
    },
    KindInfo {
        kind: "CiliumClusterwideNetworkPolicy",
        api_version: "cilium.io/v2",
        namespaced: false,
        read: |v, o, u| {
            deserialize::<CiliumPolicyWire>(v, o, u)
                .map(|w| Object::CiliumClusterwideNetworkPolicy(w.into()))
        },
        read_text: Some(|d, u| {
            deserialize_from::<CiliumPolicyWire, _>(d, u)
                .ok()
                .map(|w| Object::CiliumClusterwideNetworkPolicy(w.into()))
        }),
    },
];

/// A policy object's typed reader from JSON text, with the unknown fields recorded (see
/// [`crate::large_json`]).
pub(crate) type TextReader = fn(
    &mut serde_json::Deserializer<serde_json::de::StrRead<'_>>,
    &mut Vec<String>,
) -> Option<Object>;

/// The typed reader from JSON text of a policy kind spelled `kind` and `api_version` as the
/// kinds table spells it; `None` for other kinds (their objects are read through a tree).
pub(crate) fn text_reader(kind: &str, api_version: &str) -> Option<TextReader> {
    KINDS
        .iter()
        .find(|k| k.kind == kind && k.api_version == api_version)?
        .read_text
}

/// A workload object read as the pod of its template (see [`crate::workloads::TEMPLATE_ANNOTATION`]), errors
/// naming the workload and the field where the user wrote it; None for other kinds.
fn read_as_pod(value: &Value) -> Option<Result<ReadObject, ValidationError>> {
    let kind = value.get("kind")?.as_str()?;
    if !crate::workloads::is_workload_kind(kind) {
        return None;
    }
    let workload = || {
        let metadata = &value["metadata"];
        ObjectRef::new(
            kind,
            Some(
                metadata["namespace"]
                    .as_str()
                    .unwrap_or(crate::DEFAULT_NAMESPACE),
            ),
            metadata["name"].as_str().unwrap_or_default(),
        )
    };
    let template = match crate::workloads::template_pod(value) {
        Ok(template) => template,
        Err((field, message)) => {
            return Some(Err(ValidationError {
                object: workload(),
                field,
                message,
            }))
        }
    };
    let read = Object::read(template.pod).map_err(|e| ValidationError {
        object: workload(),
        field: format!("{}.{}", template.template_path, e.field),
        message: e.message,
    });
    Some(read.map(|mut read| {
        if let Object::Pod(pod) = &mut read.object {
            let annotations = pod
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            let owner = format!("{}/{}", template.owner.kind, template.owner.name);
            annotations.insert(crate::workloads::TEMPLATE_ANNOTATION.to_owned(), owner);
        }
        read
    }))
}

/// Why an object of a kind netpol does not read is refused.
pub fn unsupported_kind(object: ObjectRef) -> ValidationError {
    let supported: Vec<&str> = KINDS.iter().map(|k| k.kind).collect();
    ValidationError {
        message: format!(
            "unsupported kind {:?} (supported: {})",
            object.kind,
            supported.join(", ")
        ),
        object,
        field: "kind".into(),
    }
}

/// What every command says of the objects it skipped for their kind (`kind -> count`), or None
/// when it skipped none. Skipped objects are no error: a repository's folder holds Services and
/// ConfigMaps beside its policies.
pub fn skipped_kinds_summary(
    skipped: &std::collections::BTreeMap<String, usize>,
) -> Option<String> {
    if skipped.is_empty() {
        return None;
    }
    let kinds: Vec<String> = skipped
        .iter()
        .map(|(kind, n)| format!("{kind} ({n})"))
        .collect();
    Some(format!(
        "skipped {} objects of kinds netpol does not read: {}",
        skipped.values().sum::<usize>(),
        kinds.join(", ")
    ))
}

/// Whether netpol reads objects of `kind` (workloads are read as their template's pod by
/// [`Object::read`]; others are an error of it).
pub fn is_supported_kind(kind: &str) -> bool {
    KINDS.iter().any(|k| k.kind == kind)
}

impl Object {
    /// Reads one object, ignoring fields its kind does not have, as objects from the API server
    /// need (see [`FieldValidation::Ignore`]).
    pub fn from_value(value: Value) -> Result<Object, ValidationError> {
        Self::from_value_with(value, FieldValidation::Ignore)
    }

    /// Reads one object. Under [`FieldValidation::Strict`] a policy with a field its kind does
    /// not have is refused: the error names the first such field (and counts the others).
    pub fn from_value_with(
        value: Value,
        validation: FieldValidation,
    ) -> Result<Object, ValidationError> {
        validation.apply(Self::read(value))
    }

    /// Reads one object and lists the fields its kind does not have. The `apiVersion` and `kind`
    /// pick the type; an unknown kind, a wrong field type or an invalid address is an error
    /// naming the object and the field. A namespaced object without a namespace is put in
    /// `default`, as `kubectl apply` does.
    pub fn read(mut value: Value) -> Result<ReadObject, ValidationError> {
        // A workload is read as the pod its template describes, as every command reads it.
        if let Some(pod) = read_as_pod(&value) {
            return pod;
        }
        let Some(map) = value.as_object_mut() else {
            return Err(ValidationError {
                object: ObjectRef::default(),
                field: String::new(),
                message: format!(
                    "expected an object with apiVersion and kind, found {}",
                    json_type(&value)
                ),
            });
        };
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
        let kind = text(map.get("kind"));
        let api_version = text(map.get("apiVersion"));
        let metadata = map.get("metadata");
        let name = text(metadata.and_then(|m| m.get("name")));
        let given_namespace = metadata
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
            .map(str::to_owned);

        let info = KINDS.iter().find(|k| k.kind == kind);
        let namespace = match info {
            Some(info) if info.namespaced => {
                Some(given_namespace.unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned()))
            }
            Some(_) => None,
            None => given_namespace,
        };
        let object = ObjectRef {
            kind: kind.clone(),
            namespace,
            name: name.clone(),
        };
        let fail = |field: &str, message: String| ValidationError {
            object: object.clone(),
            field: field.to_owned(),
            message,
        };

        if kind.is_empty() {
            return Err(fail("kind", "required".into()));
        }
        let Some(info) = info else {
            return Err(unsupported_kind(object));
        };
        if api_version != info.api_version {
            return Err(fail(
                "apiVersion",
                format!(
                    "{kind} is read as apiVersion {}, not {api_version:?}",
                    info.api_version
                ),
            ));
        }
        if name.is_empty() {
            let given = metadata
                .and_then(|m| m.get("name"))
                .filter(|v| !v.is_null());
            let message = match given {
                Some(v) => format!("must be a non-empty string, found {}", json_type(v)),
                None => "required".to_owned(),
            };
            return Err(fail("metadata.name", message));
        }
        if info.namespaced {
            apply_namespace_default(map);
        }
        if info.kind == "Pod" {
            default_pod_containers(map);
        }
        drop_unread_metadata(map);

        let mut unknown = Vec::new();
        let read = (info.read)(value, &object, Some(&mut unknown))?;
        read.validate()?;
        let object_ref = read.object_ref();
        Ok(ReadObject {
            object: read,
            unknown_fields: unknown
                .into_iter()
                .map(|path| unknown_field(&object_ref, path))
                .collect(),
        })
    }

    /// The kind, as spelled in `kind:`.
    pub fn kind(&self) -> &'static str {
        match self {
            Object::Namespace(_) => "Namespace",
            Object::Pod(_) => "Pod",
            Object::Node(_) => "Node",
            Object::NetworkPolicy(_) => "NetworkPolicy",
            Object::AdminNetworkPolicy(_) => "AdminNetworkPolicy",
            Object::BaselineAdminNetworkPolicy(_) => "BaselineAdminNetworkPolicy",
            Object::ClusterNetworkPolicy(_) => "ClusterNetworkPolicy",
            Object::CiliumNetworkPolicy(_) => "CiliumNetworkPolicy",
            Object::CiliumClusterwideNetworkPolicy(_) => "CiliumClusterwideNetworkPolicy",
        }
    }

    /// Whether the object is a policy (translates to entries) rather than a cluster object
    /// (gives identities).
    pub fn is_policy(&self) -> bool {
        !matches!(
            self,
            Object::Namespace(_) | Object::Pod(_) | Object::Node(_)
        )
    }

    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            Object::Namespace(o) => &o.metadata,
            Object::Pod(o) => &o.metadata,
            Object::Node(o) => &o.metadata,
            Object::NetworkPolicy(o) => &o.metadata,
            Object::AdminNetworkPolicy(o) => &o.metadata,
            Object::BaselineAdminNetworkPolicy(o) => &o.metadata,
            Object::ClusterNetworkPolicy(o) => &o.metadata,
            Object::CiliumNetworkPolicy(o) => &o.metadata,
            Object::CiliumClusterwideNetworkPolicy(o) => &o.metadata,
        }
    }

    pub(crate) fn metadata_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Object::Namespace(o) => &mut o.metadata,
            Object::Pod(o) => &mut o.metadata,
            Object::Node(o) => &mut o.metadata,
            Object::NetworkPolicy(o) => &mut o.metadata,
            Object::AdminNetworkPolicy(o) => &mut o.metadata,
            Object::BaselineAdminNetworkPolicy(o) => &mut o.metadata,
            Object::ClusterNetworkPolicy(o) => &mut o.metadata,
            Object::CiliumNetworkPolicy(o) => &mut o.metadata,
            Object::CiliumClusterwideNetworkPolicy(o) => &mut o.metadata,
        }
    }

    /// `Kind namespace/name`, the key under which objects replace each other.
    pub fn object_ref(&self) -> ObjectRef {
        let meta = self.metadata();
        let namespaced = KINDS.iter().any(|k| k.kind == self.kind() && k.namespaced);
        ObjectRef {
            kind: self.kind().to_owned(),
            namespace: namespaced.then(|| {
                meta.namespace
                    .clone()
                    .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned())
            }),
            name: meta.name.clone().unwrap_or_default(),
        }
    }

    /// An object of `object`'s kind with nothing but its name and namespace: what a source that
    /// keeps no objects sends to say that one was deleted. `None` for a kind netpol does not read.
    pub fn skeleton(object: &ObjectRef) -> Option<Object> {
        let metadata = ObjectMeta {
            name: Some(object.name.clone()),
            namespace: object.namespace.clone(),
            ..ObjectMeta::default()
        };
        Some(match object.kind.as_str() {
            "Namespace" => Object::Namespace(Namespace {
                metadata,
                ..Namespace::default()
            }),
            "Pod" => Object::Pod(Pod {
                metadata,
                ..Pod::default()
            }),
            "Node" => Object::Node(Node {
                metadata,
                ..Node::default()
            }),
            "NetworkPolicy" => Object::NetworkPolicy(NetworkPolicy {
                metadata,
                ..NetworkPolicy::default()
            }),
            "AdminNetworkPolicy" => Object::AdminNetworkPolicy(AdminNetworkPolicy {
                metadata,
                spec: Default::default(),
            }),
            "BaselineAdminNetworkPolicy" => {
                Object::BaselineAdminNetworkPolicy(BaselineAdminNetworkPolicy {
                    metadata,
                    spec: Default::default(),
                })
            }
            "ClusterNetworkPolicy" => Object::ClusterNetworkPolicy(ClusterNetworkPolicy {
                metadata,
                spec: Default::default(),
            }),
            "CiliumNetworkPolicy" => Object::CiliumNetworkPolicy(CiliumNetworkPolicy {
                metadata,
                spec: Default::default(),
            }),
            "CiliumClusterwideNetworkPolicy" => {
                Object::CiliumClusterwideNetworkPolicy(CiliumClusterwideNetworkPolicy {
                    metadata,
                    spec: Default::default(),
                })
            }
            _ => return None,
        })
    }

    /// Checks the fields of cluster objects that identities are built from, so that
    /// [`crate::cluster`] can rely on them.
    pub(crate) fn validate(&self) -> Result<(), ValidationError> {
        let checked = match self {
            Object::Pod(pod) => validate::check_pod(pod),
            Object::Node(node) => validate::check_node(node),
            // Labels as the API server checks them: a policy's own do not change what it
            // enforces, but an object the server would refuse is refused from a file too.
            other => validate::check_metadata_labels(other.metadata()),
        };
        checked.map_err(|e| e.in_object(&self.object_ref()))
    }
}

/// An object serializes as its resource does (the digest of what a file source last sent is
/// taken over this).
impl Serialize for Object {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Object::Namespace(o) => o.serialize(serializer),
            Object::Pod(o) => o.serialize(serializer),
            Object::Node(o) => o.serialize(serializer),
            Object::NetworkPolicy(o) => o.serialize(serializer),
            Object::AdminNetworkPolicy(o) => o.serialize(serializer),
            Object::BaselineAdminNetworkPolicy(o) => o.serialize(serializer),
            Object::ClusterNetworkPolicy(o) => o.serialize(serializer),
            Object::CiliumNetworkPolicy(o) => o.serialize(serializer),
            Object::CiliumClusterwideNetworkPolicy(o) => o.serialize(serializer),
        }
    }
}

/// Puts a namespaced object without a namespace into `default`. A namespace of the wrong type is
/// left for deserialization to report.
fn apply_namespace_default(object: &mut serde_json::Map<String, Value>) {
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Value::Object(meta) = metadata {
        if meta.get("namespace").is_none_or(Value::is_null) {
            meta.insert("namespace".into(), DEFAULT_NAMESPACE.into());
        }
    }
}

/// Scenario authors often describe a pod by its labels, node and address only. The API server
/// would insist on `spec.containers`, but nothing netpol computes depends on it, so its absence
/// reads as no containers.
fn default_pod_containers(object: &mut serde_json::Map<String, Value>) {
    if let Some(Value::Object(spec)) = object.get_mut("spec") {
        spec.entry("containers")
            .or_insert_with(|| Value::Array(Vec::new()));
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn namespaced_objects_default_to_the_default_namespace() {
        let object = Object::from_value(json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "np"},
            "spec": {}
        }))
        .unwrap();
        assert_eq!(object.object_ref().namespace.as_deref(), Some("default"));
        assert_eq!(object.metadata().namespace.as_deref(), Some("default"));
        // Cluster-scoped kinds never carry a namespace.
        let anp = Object::from_value(json!({
            "apiVersion": "policy.networking.k8s.io/v1alpha1",
            "kind": "AdminNetworkPolicy",
            "metadata": {"name": "a", "namespace": "ignored"},
            "spec": {"priority": 3, "subject": {"namespaces": {}}}
        }))
        .unwrap();
        assert_eq!(
            anp.object_ref(),
            ObjectRef::new("AdminNetworkPolicy", None, "a")
        );
    }

    #[test]
    fn pods_may_omit_containers() {
        let object = Object::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "x", "labels": {"app": "web"}},
            "spec": {"nodeName": "node-1"},
            "status": {"podIP": "10.1.0.5"}
        }))
        .unwrap();
        let Object::Pod(pod) = object else {
            panic!("not a pod")
        };
        assert!(pod.spec.unwrap().containers.is_empty());
    }

    #[test]
    fn every_kind_has_a_skeleton_with_its_key() {
        for info in &KINDS {
            let namespace = info.namespaced.then_some("x");
            let key = ObjectRef::new(info.kind, namespace, "n");
            let skeleton = Object::skeleton(&key).unwrap_or_else(|| panic!("{}", info.kind));
            assert_eq!(skeleton.object_ref(), key);
        }
        assert_eq!(
            Object::skeleton(&ObjectRef::new("Service", Some("x"), "n")),
            None
        );
    }

    #[test]
    fn unknown_kind_names_kind_and_name() {
        let err = Object::from_value(json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "x"}
        }))
        .unwrap_err();
        assert_eq!(err.object, ObjectRef::new("Service", Some("x"), "web"));
        assert_eq!(err.field, "kind");
        assert!(err
            .to_string()
            .starts_with("Service x/web: kind: unsupported kind"));
    }

    #[test]
    fn wrong_api_version_missing_kind_and_missing_name() {
        let err = Object::from_value(json!({
            "apiVersion": "extensions/v1beta1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "np", "namespace": "x"}
        }))
        .unwrap_err();
        assert_eq!(err.field, "apiVersion");
        let err =
            Object::from_value(json!({"apiVersion": "v1", "metadata": {"name": "a"}})).unwrap_err();
        assert_eq!(err.field, "kind");
        let err = Object::from_value(json!({"apiVersion": "v1", "kind": "Namespace"})).unwrap_err();
        assert_eq!(err.field, "metadata.name");
        let err = Object::from_value(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": 7}}),
        )
        .unwrap_err();
        assert_eq!(err.field, "metadata.name");
        assert!(err.message.contains("found a number"), "{err}");
        let err = Object::from_value(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": 7}
        }))
        .unwrap_err();
        assert_eq!(err.field, "metadata.namespace");
        let err = Object::from_value(json!("just a string")).unwrap_err();
        assert!(err.message.contains("found a string"));
    }

    #[test]
    fn type_errors_name_the_field() {
        let err = Object::from_value(json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "np", "namespace": "x"},
            "spec": {"ingress": [{"ports": [{"port": [80]}]}]}
        }))
        .unwrap_err();
        assert_eq!(err.object, ObjectRef::new("NetworkPolicy", Some("x"), "np"));
        assert_eq!(err.field, "spec.ingress[0].ports[0].port");

        let err = Object::from_value(json!({
            "apiVersion": "policy.networking.k8s.io/v1alpha1",
            "kind": "AdminNetworkPolicy",
            "metadata": {"name": "a"},
            "spec": {"priority": "high", "subject": {}}
        }))
        .unwrap_err();
        assert_eq!(err.field, "spec.priority");
    }

    #[test]
    fn cilium_type_errors_name_the_field_through_the_flattened_root() {
        let err = Object::from_value(json!({
            "apiVersion": "cilium.io/v2",
            "kind": "CiliumNetworkPolicy",
            "metadata": {"name": "c", "namespace": "x"},
            "specs": [{"ingress": [{"fromEntities": "world"}]}]
        }))
        .unwrap_err();
        assert_eq!(err.field, "specs[0].ingress[0].fromEntities");
    }
}
