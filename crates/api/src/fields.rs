//! Unknown fields of a policy object: what `kubectl apply` refuses under strict field validation
//! (its default), and what a typed deserialization would otherwise drop without a word.
//!
//! A field at the wrong indentation is an unknown field of the object it landed in: `ports:` one
//! level too far left is `spec.ports`, a dedented `podSelector` is `spec.ingress[0].podSelector`,
//! `podselector:` is not `podSelector`. Dropped silently, each of these widens the policy (the
//! rule admits every port, every pod of the namespace, the policy selects every pod). So every
//! field a policy kind's types do not read is recorded while the object is deserialized
//! (`serde_ignored`), and the caller decides by [`FieldValidation`] what becomes of it.
//!
//! Pods, nodes and namespaces are read into lean types that skip, on purpose, the many fields
//! netpol does not use; their unknown fields are not reported.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Diagnostic, ObjectRef, ValidationError};

/// What becomes of a policy object with a field its kind does not have, as kubectl's
/// `--validate` says it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// The object is refused, with an error naming the first unknown field (kubectl's default;
    /// the agent's files and the authoring tools).
    Strict,
    /// Unknown fields are dropped. Right for objects from the API server, which has already
    /// pruned every field its schema lacks, so that what is left is a newer API version's.
    #[default]
    Ignore,
}

/// Top-level fields every object may carry that the typed forms do not read: the type
/// (checked before deserialization) and the status the server reports.
const ROOT_FIELDS_NOT_READ: [&str; 3] = ["apiVersion", "kind", "status"];

/// Deserializes `value` into `T`, naming the offending field on failure, and, when `unknown` is
/// given, adding to it the path of every field `T` does not have.
pub(crate) fn deserialize<T: DeserializeOwned>(
    value: Value,
    object: &ObjectRef,
    unknown: Option<&mut Vec<String>>,
) -> Result<T, ValidationError> {
    let fail = |e: serde_path_to_error::Error<serde_json::Error>| {
        let path = e.path().to_string();
        ValidationError {
            object: object.clone(),
            field: if path == "." { String::new() } else { path },
            message: e.into_inner().to_string(),
        }
    };
    let Some(unknown) = unknown else {
        // Most objects read cleanly: read them without tracking the path (about a third of
        // reading a pod), and read again with it only to name the field at fault.
        return match T::deserialize(&value) {
            Ok(read) => Ok(read),
            Err(_) => serde_path_to_error::deserialize(value).map_err(fail),
        };
    };
    let mut record = |path: serde_ignored::Path| {
        if let Some(path) = field_path(&path) {
            unknown.push(path);
        }
    };
    let tracked = serde_ignored::Deserializer::new(value, &mut record);
    serde_path_to_error::deserialize(tracked).map_err(fail)
}

/// Deserializes `T` straight from `deserializer` (no tree), adding to `unknown` the path of
/// every field `T` does not have, as [`deserialize`] does; the error is the parser's.
pub(crate) fn deserialize_from<'de, T: serde::Deserialize<'de>, D: serde::Deserializer<'de>>(
    deserializer: D,
    unknown: &mut Vec<String>,
) -> Result<T, serde_path_to_error::Error<D::Error>> {
    let mut record = |path: serde_ignored::Path| {
        if let Some(path) = field_path(&path) {
            unknown.push(path);
        }
    };
    serde_path_to_error::deserialize(serde_ignored::Deserializer::new(deserializer, &mut record))
}

/// The error for an unknown field, as kubectl words it, with the likely cause.
pub(crate) fn unknown_field(object: &ObjectRef, path: String) -> Diagnostic {
    let name = path
        .rsplit(['.', '['])
        .next()
        .unwrap_or(&path)
        .trim_end_matches(']');
    Diagnostic {
        object: object.clone(),
        message: format!(
            "unknown field \"{name}\": {} has no such field here (misspelt, or at the wrong \
             indentation?); kubectl apply refuses it, and ignoring it could widen the policy",
            object.kind
        ),
        field: path,
    }
}

/// `spec.ingress[0].podSelector` for a path of `serde_ignored`; `None` for the top-level fields
/// every object carries.
fn field_path(path: &serde_ignored::Path) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    let mut at = path;
    loop {
        match at {
            serde_ignored::Path::Root => break,
            serde_ignored::Path::Seq { parent, index } => {
                parts.push(format!("[{index}]"));
                at = parent;
            }
            serde_ignored::Path::Map { parent, key } => {
                parts.push(format!(".{key}"));
                at = parent;
            }
            serde_ignored::Path::Some { parent }
            | serde_ignored::Path::NewtypeStruct { parent }
            | serde_ignored::Path::NewtypeVariant { parent } => at = parent,
        }
    }
    parts.reverse();
    let joined = parts.concat();
    let joined = joined.strip_prefix('.').unwrap_or(&joined).to_owned();
    let at_root = !joined.contains(['.', '[']);
    (!(at_root && ROOT_FIELDS_NOT_READ.contains(&joined.as_str()))).then_some(joined)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::Object;
    use serde_json::json;

    fn network_policy(spec: Value) -> Value {
        json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "only-80-from-b", "namespace": "x"},
            "spec": spec,
        })
    }

    fn unknown(value: Value) -> Vec<String> {
        Object::read(value)
            .unwrap()
            .unknown_fields
            .into_iter()
            .map(|d| d.field)
            .collect()
    }

    #[test]
    fn misplaced_and_misspelt_fields_of_a_network_policy_are_named() {
        // `ports` one level too far left: beside `ingress` instead of inside its rule.
        let dedented_ports = network_policy(json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}]}],
            "ports": [{"port": 80}],
        }));
        assert_eq!(unknown(dedented_ports.clone()), ["spec.ports"]);
        let dedented_selector = network_policy(json!({
            "podSelector": {},
            "ingress": [{"from": [], "podSelector": {"matchLabels": {"pod": "b"}}}],
        }));
        assert_eq!(unknown(dedented_selector), ["spec.ingress[0].podSelector"]);
        let misspelt = network_policy(json!({"podselector": {"matchLabels": {"pod": "a"}}}));
        assert_eq!(unknown(misspelt.clone()), ["spec.podselector"]);

        let err = Object::from_value_with(dedented_ports, FieldValidation::Strict).unwrap_err();
        assert_eq!(err.field, "spec.ports");
        assert!(
            err.to_string()
                .starts_with("NetworkPolicy x/only-80-from-b: spec.ports: unknown field \"ports\""),
            "{err}"
        );
        assert!(Object::from_value_with(misspelt.clone(), FieldValidation::Ignore).is_ok());
        assert!(Object::from_value(misspelt).is_ok(), "lenient by default");
    }

    #[test]
    fn every_policy_kind_reports_unknown_fields_and_the_status_is_not_one() {
        let objects = [
            json!({"apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
                   "metadata": {"name": "a"}, "status": {"conditions": []},
                   "spec": {"priority": 1, "subject": {"namespaces": {}},
                            "ingress": [{"action": "Allow", "from": [{"namespaces": {}}], "port": []}]}}),
            json!({"apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "BaselineAdminNetworkPolicy",
                   "metadata": {"name": "default"},
                   "spec": {"subject": {"namespaces": {}, "pod": {}}}}),
            json!({"apiVersion": "policy.networking.k8s.io/v1alpha2", "kind": "ClusterNetworkPolicy",
                   "metadata": {"name": "c"},
                   "spec": {"tier": "Admin", "priority": 1, "subject": {"namespaces": {}}, "egres": []}}),
            json!({"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
                   "metadata": {"name": "c", "namespace": "x"}, "status": {"derivativePolicies": {}},
                   "spec": {"endpointSelector": {}, "ingress": [{"fromEndpoint": [{}]}]}}),
            json!({"apiVersion": "cilium.io/v2", "kind": "CiliumClusterwideNetworkPolicy",
                   "metadata": {"name": "c"},
                   "specs": [{"endpointSelector": {}, "egress": [{"toPorts": [{"ports": [{"port": "80", "proto": "TCP"}]}]}]}]}),
        ];
        let found: Vec<Vec<String>> = objects.into_iter().map(unknown).collect();
        assert_eq!(
            found,
            [
                vec!["spec.ingress[0].port"],
                vec!["spec.subject.pod"],
                vec!["spec.egres"],
                vec!["spec.ingress[0].fromEndpoint"],
                vec!["specs[0].egress[0].toPorts[0].ports[0].proto"],
            ]
        );
    }

    #[test]
    fn cluster_objects_are_read_into_lean_types_without_reports() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": "p", "namespace": "x", "uid": "u"},
                         "spec": {"containers": [{"name": "c", "image": "i"}], "volumes": []}});
        assert!(unknown(pod.clone()).is_empty());
        assert!(Object::from_value_with(pod, FieldValidation::Strict).is_ok());
    }
}
