//! API objects of every supported kind, read from JSON values or YAML text.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::crd::cilium::CiliumPolicyWire;
use crate::crd::{
    AdminNetworkPolicy, BaselineAdminNetworkPolicy, CiliumClusterwideNetworkPolicy,
    CiliumNetworkPolicy, ClusterNetworkPolicy,
};
use crate::error::{ObjectRef, ValidationError};
use crate::node::Node;
use crate::pod::Pod;
use crate::prune::drop_unread_metadata;
use crate::split::{split_list, MIN_SPLIT_BYTES};
use crate::stream::{is_list_kind, Document};
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

/// How a kind is spelled on the wire, whether it lives in a namespace, and how it is read.
struct KindInfo {
    kind: &'static str,
    api_version: &'static str,
    namespaced: bool,
    read: fn(Value, &ObjectRef) -> Result<Object, ValidationError>,
}

const KINDS: [KindInfo; 9] = [
    KindInfo {
        kind: "Namespace",
        api_version: "v1",
        namespaced: false,
        read: |v, o| deserialize(v, o).map(Object::Namespace),
    },
    KindInfo {
        kind: "Pod",
        api_version: "v1",
        namespaced: true,
        read: |v, o| deserialize(v, o).map(Object::Pod),
    },
    KindInfo {
        kind: "Node",
        api_version: "v1",
        namespaced: false,
        read: |v, o| deserialize(v, o).map(Object::Node),
    },
    KindInfo {
        kind: "NetworkPolicy",
        api_version: "networking.k8s.io/v1",
        namespaced: true,
        read: |v, o| deserialize(v, o).map(Object::NetworkPolicy),
    },
    KindInfo {
        kind: "AdminNetworkPolicy",
        api_version: "policy.networking.k8s.io/v1alpha1",
        namespaced: false,
        read: |v, o| deserialize(v, o).map(Object::AdminNetworkPolicy),
    },
    KindInfo {
        kind: "BaselineAdminNetworkPolicy",
        api_version: "policy.networking.k8s.io/v1alpha1",
        namespaced: false,
        read: |v, o| deserialize(v, o).map(Object::BaselineAdminNetworkPolicy),
    },
    KindInfo {
        kind: "ClusterNetworkPolicy",
        api_version: "policy.networking.k8s.io/v1alpha2",
        namespaced: false,
        read: |v, o| deserialize(v, o).map(Object::ClusterNetworkPolicy),
    },
    KindInfo {
        kind: "CiliumNetworkPolicy",
        api_version: "cilium.io/v2",
        namespaced: true,
        read: |v, o| read_cilium(v, o).map(|w| Object::CiliumNetworkPolicy(w.into())),
    },
    KindInfo {
        kind: "CiliumClusterwideNetworkPolicy",
        api_version: "cilium.io/v2",
        namespaced: false,
        read: |v, o| read_cilium(v, o).map(|w| Object::CiliumClusterwideNetworkPolicy(w.into())),
    },
];

impl Object {
    /// Reads one object. The `apiVersion` and `kind` pick the type; an unknown kind, a wrong
    /// field type or an invalid address is an error naming the object and the field. A
    /// namespaced object without a namespace is put in `default`, as `kubectl apply` does.
    pub fn from_value(mut value: Value) -> Result<Object, ValidationError> {
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
            let supported: Vec<&str> = KINDS.iter().map(|k| k.kind).collect();
            return Err(fail(
                "kind",
                format!(
                    "unsupported kind {kind:?} (supported: {})",
                    supported.join(", ")
                ),
            ));
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

        let object = (info.read)(value, &object)?;
        object.validate()?;
        Ok(object)
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

    /// Checks the fields of cluster objects that identities are built from, so that
    /// [`crate::cluster`] can rely on them.
    fn validate(&self) -> Result<(), ValidationError> {
        let checked = match self {
            Object::Pod(pod) => validate::check_pod(pod),
            Object::Node(node) => validate::check_node(node),
            _ => Ok(()),
        };
        checked.map_err(|e| e.in_object(&self.object_ref()))
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

/// Deserializes into `T`, naming the offending field on failure.
fn deserialize<T: DeserializeOwned>(
    value: Value,
    object: &ObjectRef,
) -> Result<T, ValidationError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        ValidationError {
            object: object.clone(),
            field: if path == "." { String::new() } else { path },
            message: e.into_inner().to_string(),
        }
    })
}

fn read_cilium(value: Value, object: &ObjectRef) -> Result<CiliumPolicyWire, ValidationError> {
    deserialize(value, object)
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

/// YAML that could not be read at all: nothing in it is usable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid YAML: {0}")]
pub struct YamlError(pub String);

/// Reads a YAML stream of objects: several `---`-separated documents, each an object, a list of
/// objects or a `kind: List` with `items`. Empty documents are skipped. Each object is read on its
/// own, so one malformed object does not hide the others; only broken YAML syntax fails the
/// whole stream.
pub fn parse_yaml(text: &str) -> Result<Vec<Result<Object, ValidationError>>, YamlError> {
    match parse_list_in_parallel(text) {
        Some(objects) => Ok(objects),
        None => parse_whole(text),
    }
}

fn parse_whole(text: &str) -> Result<Vec<Result<Object, ValidationError>>, YamlError> {
    let documents: Vec<Document> =
        serde_saphyr::from_multiple_with_options(text, yaml_options_for(text.len()))
            .map_err(|e| YamlError(e.to_string()))?;
    Ok(documents.into_iter().flat_map(|d| d.0).collect())
}

/// A large `kind: List` parsed on every core (see [`crate::split`]); `None` when the text is
/// small, has another shape, or any piece fails, and is then parsed whole.
fn parse_list_in_parallel(text: &str) -> Option<Vec<Result<Object, ValidationError>>> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    if text.len() < MIN_SPLIT_BYTES || cores < 2 {
        return None;
    }
    let split = split_list(text, cores)?;
    let head: Value =
        serde_saphyr::from_str_with_options(&split.head, yaml_options_for(split.head.len()))
            .ok()?;
    if !head
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(is_list_kind)
    {
        return None;
    }
    let parsed: Vec<Option<Document>> = std::thread::scope(|scope| {
        let workers: Vec<_> = split
            .items
            .iter()
            .map(|run| {
                scope.spawn(move || {
                    serde_saphyr::from_str_with_options::<Document>(
                        run,
                        yaml_options_for(run.len()),
                    )
                    .ok()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().ok().flatten())
            .collect()
    });
    let mut objects = Vec::new();
    for document in parsed {
        objects.extend(document?.0);
    }
    Some(objects)
}

/// How netpol reads YAML. Booleans follow YAML 1.2 (`true`/`false` only): under YAML 1.1 rules
/// the label value `y` in `{ns: y}` would become `true`, while Kubernetes users mean the string.
pub fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
        // One-line messages: callers print one line per problem.
        with_snippet: false,
    }
}

/// [`yaml_options`] with limits that grow with the text. serde-saphyr's default budget refuses
/// more than 1,024 documents or 250,000 nodes in a stream, which ordinary files exceed (10,000 pods
/// in one `kubectl get pods -A -o yaml`). Documents, nodes and events cannot outnumber the bytes that
/// write them, so limits of the text's length refuse nothing that is really there, while the
/// alias and anchor limits that stop expansion bombs stay at their defaults.
pub fn yaml_options_for(text_len: usize) -> serde_saphyr::Options {
    let linear = text_len.saturating_add(1024);
    let mut options = yaml_options();
    options.budget = serde_saphyr::budget! {
        max_documents: linear,
        max_nodes: linear,
        max_events: linear,
        max_total_scalar_bytes: linear,
    };
    options
}

/// Reads objects from JSON values, unpacking lists and `kind: List` objects, skipping nulls.
pub fn parse_values(
    values: impl IntoIterator<Item = Value>,
) -> Vec<Result<Object, ValidationError>> {
    values
        .into_iter()
        .flat_map(|value| unpack_lists(value, String::new()))
        .map(|(_, value)| Object::from_value(value))
        .collect()
}

/// The objects a value holds, each with its path below `at` so that an error can point at it:
/// the value itself, or the items of a YAML sequence (`at[2]`) or of a `kind: List` or typed list
/// such as `PodList` (`at.items[2]`), recursively, as `kubectl apply` unpacks them. Nulls hold
/// nothing.
pub fn unpack_lists(value: Value, at: String) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    unpack_into(value, at, &mut out);
    out
}

fn unpack_into(value: Value, at: String, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Null => {}
        Value::Array(items) => {
            for (i, item) in items.into_iter().enumerate() {
                unpack_into(item, format!("{at}[{i}]"), out);
            }
        }
        Value::Object(mut map) if is_list_object(&map) => {
            if let Some(Value::Array(items)) = map.remove("items") {
                for (i, item) in items.into_iter().enumerate() {
                    unpack_into(item, format!("{at}.items[{i}]"), out);
                }
            }
        }
        other => out.push((at, other)),
    }
}

/// Whether an object is a list of objects: a list kind with an `items` sequence.
fn is_list_object(map: &serde_json::Map<String, Value>) -> bool {
    map.get("kind")
        .and_then(Value::as_str)
        .is_some_and(is_list_kind)
        && map.get("items").is_some_and(Value::is_array)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dispatches_on_api_version_and_kind() {
        let objects = parse_yaml(
            r#"
apiVersion: v1
kind: Namespace
metadata: {name: x, labels: {ns: x}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-all, namespace: x}
spec: {podSelector: {}}
---
- apiVersion: policy.networking.k8s.io/v1alpha1
  kind: AdminNetworkPolicy
  metadata: {name: anp}
  spec: {priority: 1, subject: {namespaces: {}}}
- apiVersion: cilium.io/v2
  kind: CiliumNetworkPolicy
  metadata: {name: cnp, namespace: y}
  spec: {endpointSelector: {}}
---
"#,
        )
        .unwrap();
        let kinds: Vec<ObjectRef> = objects
            .into_iter()
            .map(|o| o.unwrap().object_ref())
            .collect();
        assert_eq!(
            kinds,
            vec![
                ObjectRef::new("Namespace", None, "x"),
                ObjectRef::new("NetworkPolicy", Some("x"), "deny-all"),
                ObjectRef::new("AdminNetworkPolicy", None, "anp"),
                ObjectRef::new("CiliumNetworkPolicy", Some("y"), "cnp"),
            ]
        );
    }

    /// A `kind: List` over the split threshold, as kubectl prints it, with one invalid item.
    fn large_list() -> String {
        let mut text = String::from("apiVersion: v1\nitems:\n");
        for i in 0..12_000 {
            if i == 7_777 {
                text.push_str("- apiVersion: v1\n  kind: Namespace\n  metadata:\n    labels: {}\n");
                continue;
            }
            text.push_str(&format!(
                "- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: ns-{i}\n    labels:\n      team: t-{}\n",
                i % 7
            ));
        }
        text.push_str("kind: List\nmetadata:\n  resourceVersion: \"\"\n");
        assert!(text.len() > crate::split::MIN_SPLIT_BYTES);
        text
    }

    #[test]
    fn a_large_list_parsed_in_parallel_equals_the_whole_parse() {
        let text = large_list();
        if std::thread::available_parallelism().map_or(1, usize::from) > 1 {
            assert!(parse_list_in_parallel(&text).is_some(), "not split");
        }
        let parallel = parse_yaml(&text).unwrap();
        let whole = parse_whole(&text).unwrap();
        assert_eq!(parallel.len(), 12_000);
        assert_eq!(parallel, whole);
        assert_eq!(parallel.iter().filter(|o| o.is_err()).count(), 1);
    }

    #[test]
    fn a_list_whose_piece_fails_is_parsed_whole_and_reports_the_error() {
        // An alias to an anchor of another piece parses only whole; a syntax error fails both.
        let mut text = large_list().replacen("team: t-0", "team: &t0 t-0", 1);
        let last = text.rfind("team: t-3").unwrap();
        text.replace_range(last..last + "team: t-3".len(), "team: *t0");
        let objects = parse_yaml(&text).unwrap();
        assert_eq!(objects, parse_whole(&text).unwrap());
        // The last namespace of team t-3 is ns-11994; its team is now the alias.
        let aliased = objects
            .iter()
            .flatten()
            .find(|o| o.metadata().name.as_deref() == Some("ns-11994"))
            .unwrap();
        let labels = aliased.metadata().labels.as_ref().unwrap();
        assert_eq!(labels["team"], "t-0", "the alias resolved across pieces");
        let broken = large_list().replacen("  kind: Namespace\n", "  kind: [Namespace\n", 1);
        assert_eq!(parse_yaml(&broken), parse_whole(&broken));
        assert!(parse_yaml(&broken).is_err());
    }

    #[test]
    fn unpacked_lists_name_each_item_by_its_path() {
        let unpacked = unpack_lists(
            json!([
                {"kind": "List", "items": [{"kind": "Namespace"}, null,
                    {"kind": "NetworkPolicyList", "items": [{"kind": "NetworkPolicy"}]}]},
                {"kind": "Node"}
            ]),
            "objects".into(),
        );
        let paths: Vec<&str> = unpacked.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "objects[0].items[0]",
                "objects[0].items[2].items[0]",
                "objects[1]"
            ]
        );
        assert_eq!(unpacked[1].1["kind"], "NetworkPolicy");
        // A list kind without items is an object like any other.
        assert_eq!(
            unpack_lists(json!({"kind": "List"}), String::new()).len(),
            1
        );
    }

    #[test]
    fn kind_list_items_are_flattened() {
        let objects = parse_values([json!({
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}},
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "b"}},
            ]
        })]);
        assert_eq!(objects.len(), 2);
        assert!(objects.iter().all(Result::is_ok));
    }

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

    #[test]
    fn one_malformed_object_does_not_hide_the_others() {
        let objects = parse_yaml(
            r#"
apiVersion: v1
kind: Namespace
metadata: {name: a}
---
apiVersion: v1
kind: Namespace
metadata: {name: b, labels: [not, a, map]}
---
apiVersion: v1
kind: Namespace
metadata: {name: c}
"#,
        )
        .unwrap();
        assert_eq!(objects.len(), 3);
        assert!(objects[0].is_ok());
        let err = objects[1].as_ref().unwrap_err();
        assert_eq!(err.object, ObjectRef::new("Namespace", None, "b"));
        assert_eq!(err.field, "metadata.labels");
        assert!(objects[2].is_ok());
    }

    #[test]
    fn yaml_1_1_boolean_spellings_stay_strings() {
        let objects = parse_yaml(
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: y, labels: {ns: y, on: yes, env: no}}",
        )
        .unwrap();
        let Ok(Object::Namespace(ns)) = &objects[0] else {
            panic!("{objects:?}");
        };
        let labels = ns.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["ns"], "y");
        assert_eq!(labels["on"], "yes");
        assert_eq!(labels["env"], "no");
    }

    #[test]
    fn broken_yaml_syntax_fails_the_stream() {
        assert!(parse_yaml("kind: [unclosed").is_err());
    }
}
