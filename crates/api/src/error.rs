//! Diagnostics that name the object and the field they are about.
//!
//! Validation happens in two layers. Pure helpers (selectors, CIDRs, ports) know only the field
//! path they were handed and return a [`FieldError`]; the translator of one object gathers those
//! into a `Diagnostics` list and finally attaches its [`ObjectRef`], giving [`Diagnostic`]s that
//! read like `NetworkPolicy x/foo: spec.ingress[0].ports[1].endPort: endPort 70 is below port 80`.

use std::fmt;

/// Names one API object: `NetworkPolicy x/foo`, `AdminNetworkPolicy deny-y`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    pub kind: String,
    /// `None` for cluster-scoped kinds.
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectRef {
    pub fn new(kind: impl Into<String>, namespace: Option<&str>, name: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            namespace: namespace.map(str::to_owned),
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Objects too malformed to carry a kind or a name still need a readable reference.
        let kind = if self.kind.is_empty() {
            "object"
        } else {
            &self.kind
        };
        let name = if self.name.is_empty() {
            "<unnamed>"
        } else {
            &self.name
        };
        match &self.namespace {
            Some(ns) => write!(f, "{kind} {ns}/{name}"),
            None => write!(f, "{kind} {name}"),
        }
    }
}

/// A problem in one object, located by a JSON path such as
/// `spec.ingress[0].from[1].ipBlock.except[0]`. Used both for errors, which reject the whole
/// object, and for warnings, which do not.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub struct Diagnostic {
    pub object: ObjectRef,
    /// The JSON path of the offending field; empty when the problem is the object as a whole.
    pub field: String,
    pub message: String,
}

/// An error: the object it names is rejected as a whole and contributes no entries.
pub type ValidationError = Diagnostic;

/// A warning: the object is used, but part of it is probably not what its author meant.
pub type Warning = Diagnostic;

/// How every message about a feature netpol deliberately does not implement begins.
pub const UNSUPPORTED: &str = "unsupported";

impl Diagnostic {
    /// Whether the object uses a feature netpol does not implement (L7, FQDN, host policies,
    /// ...), rather than being malformed: the object is valid for the API server, and only
    /// netpol cannot enforce it.
    pub fn is_unsupported(&self) -> bool {
        self.message.starts_with(UNSUPPORTED)
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.object, self.message)
        } else {
            write!(f, "{}: {}: {}", self.object, self.field, self.message)
        }
    }
}

/// A problem located in a field, before the object it belongs to is attached.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn in_object(self, object: &ObjectRef) -> Diagnostic {
        Diagnostic {
            object: object.clone(),
            field: self.field,
            message: self.message,
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// A JSON path being built while walking an object: `spec`, `spec.ingress[0]`, ...
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FieldPath(String);

impl FieldPath {
    pub fn root(name: &str) -> Self {
        Self(name.to_owned())
    }

    /// The path of a field of this object.
    pub fn field(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Self(name.to_owned())
        } else {
            Self(format!("{}.{name}", self.0))
        }
    }

    /// The path of an element of this list.
    pub fn index(&self, index: usize) -> Self {
        Self(format!("{}[{index}]", self.0))
    }

    /// The path of a map entry whose key may contain dots or colons, e.g.
    /// `matchLabels["k8s:app"]`.
    pub fn key(&self, key: &str) -> Self {
        Self(format!("{}[{key:?}]", self.0))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// An error about this field.
    pub fn error(&self, message: impl Into<String>) -> FieldError {
        FieldError {
            field: self.0.clone(),
            message: message.into(),
        }
    }

    /// The standard error for a feature netpol deliberately does not implement.
    pub fn unsupported(&self, what: &str) -> FieldError {
        let field = self.0.rsplit('.').next().unwrap_or(&self.0);
        self.error(format!("{UNSUPPORTED}: {field} ({what})"))
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The errors and warnings found while translating one object.
#[derive(Debug, Default)]
pub(crate) struct Diagnostics {
    pub errors: Vec<FieldError>,
    pub warnings: Vec<FieldError>,
}

impl Diagnostics {
    pub fn error(&mut self, error: FieldError) {
        self.errors.push(error);
    }

    pub fn warn(&mut self, warning: FieldError) {
        self.warnings.push(warning);
    }

    /// Passes a value through, or records the error and returns `None`.
    pub fn check<T>(&mut self, result: Result<T, FieldError>) -> Option<T> {
        result.map_err(|e| self.error(e)).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_like_json_paths() {
        let path = FieldPath::root("spec")
            .field("ingress")
            .index(0)
            .field("from")
            .index(1)
            .field("ipBlock");
        assert_eq!(path.as_str(), "spec.ingress[0].from[1].ipBlock");
        assert_eq!(
            FieldPath::root("spec")
                .field("matchLabels")
                .key("k8s:app")
                .as_str(),
            "spec.matchLabels[\"k8s:app\"]"
        );
    }

    #[test]
    fn diagnostics_name_object_and_field() {
        let object = ObjectRef::new("NetworkPolicy", Some("x"), "foo");
        let error = FieldPath::root("spec")
            .field("ingress")
            .index(0)
            .field("ports")
            .index(1)
            .field("endPort")
            .error("endPort 70 is below port 80")
            .in_object(&object);
        assert_eq!(
            error.to_string(),
            "NetworkPolicy x/foo: spec.ingress[0].ports[1].endPort: endPort 70 is below port 80"
        );
        let cluster_scoped = ObjectRef::new("AdminNetworkPolicy", None, "deny-y");
        assert_eq!(cluster_scoped.to_string(), "AdminNetworkPolicy deny-y");
        assert_eq!(ObjectRef::default().to_string(), "object <unnamed>");
    }

    #[test]
    fn unsupported_names_the_last_field() {
        let e = FieldPath::root("spec")
            .field("egress")
            .index(0)
            .field("toFQDNs")
            .unsupported("FQDN rules are not supported");
        assert_eq!(e.field, "spec.egress[0].toFQDNs");
        assert_eq!(
            e.message,
            "unsupported: toFQDNs (FQDN rules are not supported)"
        );
    }
}
