//! Cilium's endpoint and node selectors as netpol label selectors.
//!
//! Cilium selects endpoints by labels it derives itself: the pod's labels under a source prefix
//! (`k8s:app`), the pod's namespace as `io.kubernetes.pod.namespace`, and the namespace's labels
//! as `io.cilium.k8s.namespace.labels.*`. netpol keeps pod and namespace labels apart, so each
//! key is mapped to the side it names. A namespaced policy's subject and endpoint peers are
//! confined to its own namespace, as Cilium confines them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use netpol_engine::{LabelSelector, Peer, PodSelector, Requirement, NAMESPACE_NAME_LABEL};

use crate::error::{Diagnostics, FieldError, FieldPath};
use crate::selector::requirement;

/// The pod label Cilium derives from a pod's namespace name.
const NAMESPACE_KEY: &str = "io.kubernetes.pod.namespace";
/// The prefix of the pod labels Cilium derives from the namespace's labels.
const NAMESPACE_LABELS_PREFIX: &str = "io.cilium.k8s.namespace.labels.";
/// The prefix of Cilium's other derived labels (service account, cluster name, ...).
const CILIUM_POLICY_PREFIX: &str = "io.cilium.k8s.policy.";

/// The endpoints a rule applies to. A namespaced policy (`namespace` is its namespace) only
/// ever applies in its own namespace.
pub(super) fn subject(
    selector: &metav1::LabelSelector,
    namespace: Option<&str>,
    path: &FieldPath,
    diags: &mut Diagnostics,
) -> Result<PodSelector, FieldError> {
    let mapped = endpoint_selector(selector, path)?;
    let mut subject = PodSelector {
        namespaces: mapped.namespaces,
        pods: mapped.pods,
    };
    if let Some(ns) = namespace {
        let named = subject.namespaces.match_labels.get(NAMESPACE_NAME_LABEL);
        if let Some(other) = named.filter(|n| *n != ns) {
            diags.warn(path.error(format!(
                "selects namespace {other:?}, but a CiliumNetworkPolicy applies only in its \
                 own namespace {ns:?}; using {ns:?}"
            )));
        }
        subject.namespaces = subject.namespaces.and_label(NAMESPACE_NAME_LABEL, ns);
    }
    Ok(subject)
}

/// `fromEndpoints`/`toEndpoints`: in a namespaced policy, confined to the policy's namespace
/// unless the selector names the namespace key itself.
pub(super) fn endpoint_peer(
    selector: &metav1::LabelSelector,
    namespace: Option<&str>,
    path: &FieldPath,
) -> Result<Peer, FieldError> {
    let mapped = endpoint_selector(selector, path)?;
    let namespaces = match namespace {
        Some(ns) if !mapped.names_namespace => {
            mapped.namespaces.and_label(NAMESPACE_NAME_LABEL, ns)
        }
        _ => mapped.namespaces,
    };
    Ok(Peer::pods(PodSelector {
        namespaces,
        pods: mapped.pods,
    }))
}

/// A Cilium endpoint selector split into its pod part and its namespace part.
struct MappedSelector {
    pods: LabelSelector,
    namespaces: LabelSelector,
    /// Whether the selector constrains the namespace name, which lifts the confinement of a
    /// namespaced policy's peers to its own namespace.
    names_namespace: bool,
}

/// Where a Cilium selector key points.
enum MappedKey {
    Pod(String),
    Namespace(String),
}

/// Maps an endpoint selector's keys: source prefixes (`k8s:`, `any:`) are dropped, the namespace
/// key and `io.cilium.k8s.namespace.labels.*` select namespace labels, everything else pod
/// labels.
fn endpoint_selector(
    selector: &metav1::LabelSelector,
    path: &FieldPath,
) -> Result<MappedSelector, FieldError> {
    let mut out = MappedSelector {
        pods: LabelSelector::everything(),
        namespaces: LabelSelector::everything(),
        names_namespace: false,
    };
    for (key, value) in selector.match_labels.iter().flatten() {
        let mapped = map_endpoint_key(key, &path.field("matchLabels").key(key))?;
        let (key, selector) = split_target(mapped, &mut out);
        add_label(selector, key, value);
    }
    for (i, expr) in selector.match_expressions.iter().flatten().enumerate() {
        let expr_path = path.field("matchExpressions").index(i);
        let mapped = map_endpoint_key(&expr.key, &expr_path.field("key"))?;
        let (key, selector) = split_target(mapped, &mut out);
        let req = requirement(key, &expr.operator, expr.values.as_deref(), &expr_path)?;
        selector.match_expressions.push(req);
    }
    Ok(out)
}

/// The selector a mapped key belongs to, and the key there.
fn split_target(key: MappedKey, out: &mut MappedSelector) -> (String, &mut LabelSelector) {
    match key {
        MappedKey::Pod(k) => (k, &mut out.pods),
        MappedKey::Namespace(k) => {
            if k == NAMESPACE_NAME_LABEL {
                out.names_namespace = true;
            }
            (k, &mut out.namespaces)
        }
    }
}

/// Adds `key=value`, keeping a conflicting earlier value (`k8s:app: a` and `any:app: b` both map
/// to `app`) as a requirement so that both still have to hold.
fn add_label(selector: &mut LabelSelector, key: String, value: &str) {
    match selector.match_labels.get(&key) {
        Some(existing) if existing != value => selector
            .match_expressions
            .push(Requirement::In(key, vec![value.to_owned()])),
        _ => {
            selector.match_labels.insert(key, value.to_owned());
        }
    }
}

fn map_endpoint_key(key: &str, path: &FieldPath) -> Result<MappedKey, FieldError> {
    let bare = strip_source(key, path)?;
    if bare == NAMESPACE_KEY {
        return Ok(MappedKey::Namespace(NAMESPACE_NAME_LABEL.to_owned()));
    }
    if let Some(label) = bare.strip_prefix(NAMESPACE_LABELS_PREFIX) {
        if label.is_empty() {
            return Err(path.error("namespace label key is empty"));
        }
        return Ok(MappedKey::Namespace(label.to_owned()));
    }
    if bare.starts_with(CILIUM_POLICY_PREFIX) {
        return Err(path.error(format!(
            "unsupported: label {bare:?} (Cilium-derived labels other than the namespace's are \
             not supported)"
        )));
    }
    if bare.is_empty() {
        return Err(path.error("label key must not be empty"));
    }
    Ok(MappedKey::Pod(bare.to_owned()))
}

/// Drops a `k8s:` or `any:` source prefix. Reserved labels (`reserved:host`, ...) and other
/// sources have no equivalent here: entities cover the reserved identities.
fn strip_source<'k>(key: &'k str, path: &FieldPath) -> Result<&'k str, FieldError> {
    match key.split_once(':') {
        None => Ok(key),
        Some(("k8s" | "any", bare)) => Ok(bare),
        Some(("reserved", _)) => Err(path.error(format!(
            "unsupported: reserved label {key:?} in a selector (use fromEntities/toEntities)"
        ))),
        Some((source, _)) => Err(path.error(format!(
            "unsupported: label source {source:?} (only k8s and any are supported)"
        ))),
    }
}

/// `fromNodes`/`toNodes`: node labels, with source prefixes dropped.
pub(super) fn node_selector(
    selector: &metav1::LabelSelector,
    path: &FieldPath,
) -> Result<LabelSelector, FieldError> {
    let mut out = LabelSelector::everything();
    for (key, value) in selector.match_labels.iter().flatten() {
        let bare = strip_source(key, &path.field("matchLabels").key(key))?;
        add_label(&mut out, bare.to_owned(), value);
    }
    for (i, expr) in selector.match_expressions.iter().flatten().enumerate() {
        let expr_path = path.field("matchExpressions").index(i);
        let bare = strip_source(&expr.key, &expr_path.field("key"))?;
        out.match_expressions.push(requirement(
            bare.to_owned(),
            &expr.operator,
            expr.values.as_deref(),
            &expr_path,
        )?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::translate::testing::*;
    use netpol_engine::Protocol::*;

    #[test]
    fn namespaced_endpoint_selectors_are_confined_to_the_policy_namespace() {
        let e = entries(&cnp(
            "x",
            r#"
spec:
  endpointSelector: {matchLabels: {pod: a}}
  ingress:
  - fromEndpoints: [{matchLabels: {"k8s:pod": b}}]
  - fromEndpoints: [{matchLabels: {"io.cilium.k8s.namespace.labels.ns": z}}]
  - fromEndpoints:
    - matchExpressions: [{key: "k8s:io.kubernetes.pod.namespace", operator: In, values: [y]}]
"#,
        ));
        let a = xa();
        assert!(ingress_allowed(&e, &a, &xb(), Tcp, 80));
        assert!(!ingress_allowed(
            &e,
            &a,
            &pod("z", "b", "10.1.2.12"),
            Tcp,
            80
        ));
        // Namespace labels alone do not lift the confinement: x has ns=x, so nothing matches.
        assert!(!ingress_allowed(&e, &a, &za(), Tcp, 80));
        // Naming the namespace does.
        assert!(ingress_allowed(&e, &a, &ya(), Tcp, 80));
        // The subject is x/a only.
        assert!(ingress_allowed(&e, &xb(), &za(), Tcp, 80));
    }

    #[test]
    fn empty_endpoint_selector_is_the_namespace_or_every_pod() {
        let namespaced = entries(&cnp(
            "x",
            "spec:\n  endpointSelector: {}\n  ingress: [{fromEndpoints: [{}]}]",
        ));
        assert!(ingress_allowed(&namespaced, &xa(), &xb(), Tcp, 80));
        assert!(!ingress_allowed(&namespaced, &xa(), &ya(), Tcp, 80));
        assert!(!ingress_allowed(
            &namespaced,
            &xa(),
            &world("0.0.0.0/0"),
            Tcp,
            80
        ));

        let clusterwide = entries(&ccnp(
            "spec:\n  endpointSelector: {}\n  ingress: [{fromEndpoints: [{}]}]",
        ));
        assert_eq!(clusterwide[0].subject, PodSelector::all());
        assert!(ingress_allowed(&clusterwide, &xa(), &ya(), Tcp, 80));
        assert!(ingress_allowed(&clusterwide, &za(), &xb(), Tcp, 80));
        assert!(!ingress_allowed(
            &clusterwide,
            &xa(),
            &world("0.0.0.0/0"),
            Tcp,
            80
        ));
        assert_eq!(clusterwide[0].provenance.namespace, None);
        assert_eq!(
            clusterwide[0].provenance.to_string(),
            "CiliumClusterwideNetworkPolicy cc rule ingress[0]"
        );
    }

    #[test]
    fn clusterwide_namespace_labels_select_namespaces() {
        let e = entries(&ccnp(
            r#"
spec:
  endpointSelector: {matchLabels: {"k8s:io.cilium.k8s.namespace.labels.ns": x}}
  egress:
  - toEndpoints: [{matchLabels: {"any:io.cilium.k8s.namespace.labels.ns": z}}]
"#,
        ));
        assert!(egress_allowed(&e, &xa(), &za(), Tcp, 80));
        assert!(!egress_allowed(&e, &xa(), &ya(), Tcp, 80));
        // y is not a subject.
        assert!(egress_allowed(&e, &ya(), &xa(), Tcp, 80));
    }

    #[test]
    fn subject_naming_another_namespace_is_pinned_with_a_warning() {
        let yaml = cnp(
            "x",
            "spec:\n  endpointSelector: {matchLabels: {\"k8s:io.kubernetes.pod.namespace\": y}}\n  ingress: [{}]",
        );
        let w = warnings(&yaml);
        assert_eq!(w[0].field, "spec.endpointSelector");
        let e = entries(&yaml);
        assert!(!ingress_allowed(&e, &xa(), &za(), Tcp, 80));
        assert!(ingress_allowed(&e, &ya(), &za(), Tcp, 80));
    }
}
