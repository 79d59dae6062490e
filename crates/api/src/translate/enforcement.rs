//! The `netpol.io/enforcement` annotation, read the same way for every policy kind: `enforce`
//! (the default) or `audit` ([`netpol_engine::audit`]). The mode is set on every entry of the
//! object here, at translation: nothing after it asks which kind a policy is.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use netpol_engine::Enforcement;

pub use crate::annotations::ENFORCEMENT_ANNOTATION;
use crate::error::{FieldError, FieldPath};

/// The object's enforcement mode; an unknown value is an error naming the annotation (the
/// object is then refused like any invalid object: guessing could enforce what its author
/// wanted audited, or the reverse).
pub(crate) fn enforcement_of(metadata: &ObjectMeta) -> Result<Enforcement, FieldError> {
    let value = metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ENFORCEMENT_ANNOTATION));
    match value.map(String::as_str) {
        None | Some("enforce") => Ok(Enforcement::Enforce),
        Some("audit") => Ok(Enforcement::Audit),
        Some(other) => Err(FieldPath::root("metadata")
            .field("annotations")
            .key(ENFORCEMENT_ANNOTATION)
            .error(format!(
                "unknown enforcement mode {other:?}: must be \"enforce\" or \"audit\""
            ))),
    }
}

#[cfg(test)]
mod tests {
    use netpol_engine::Enforcement;

    use crate::translate::testing::{entries, error};

    /// One policy of each family (NetworkPolicy, admin, Cilium) with `annotations`.
    fn policies(annotations: &str) -> [String; 3] {
        [
            format!(
                "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: web\n  namespace: shop\n  annotations: {annotations}\nspec:\n  podSelector: {{}}\n  policyTypes: [Ingress]\n"
            ),
            format!(
                "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata:\n  name: a\n  annotations: {annotations}\nspec:\n  priority: 5\n  subject: {{namespaces: {{}}}}\n  ingress:\n  - action: Deny\n    from: [{{namespaces: {{}}}}]\n"
            ),
            format!(
                "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata:\n  name: c\n  namespace: shop\n  annotations: {annotations}\nspec:\n  endpointSelector: {{}}\n  ingressDeny:\n  - fromEntities: [world]\n"
            ),
        ]
    }

    #[test]
    fn every_kind_reads_the_annotation_onto_every_entry() {
        // The last-applied annotation (dropped unread) sits beside it, as kubectl writes it.
        let audited = "{netpol.io/enforcement: audit, kubectl.kubernetes.io/last-applied-configuration: '{}'}";
        for yaml in policies(audited) {
            let entries = entries(&yaml);
            assert!(!entries.is_empty(), "{yaml}");
            assert!(
                entries.iter().all(|e| e.enforcement == Enforcement::Audit),
                "{yaml}"
            );
        }
        for annotations in ["{netpol.io/enforcement: enforce}", "{}"] {
            for yaml in policies(annotations) {
                let entries = entries(&yaml);
                assert!(entries
                    .iter()
                    .all(|e| e.enforcement == Enforcement::Enforce));
            }
        }
    }

    #[test]
    fn an_unknown_mode_refuses_the_object_naming_the_annotation() {
        for yaml in policies("{netpol.io/enforcement: Audit}") {
            let error = error(&yaml);
            assert_eq!(
                error.field,
                "metadata.annotations[\"netpol.io/enforcement\"]"
            );
            assert!(error.message.contains("\"Audit\""), "{}", error.message);
        }
    }
}
