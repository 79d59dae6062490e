//! Label sets and Kubernetes label selectors (matchLabels plus matchExpressions).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A set of `key=value` labels. Ordered so that identities and selectors hash and print
/// deterministically.
pub type Labels = BTreeMap<String, String>;

/// The label every namespace carries with its own name, as the API server sets it.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// One `matchExpressions` requirement. `In` and `NotIn` always carry at least one value;
/// translators reject empty lists before a requirement is built.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    pub fn matches(&self, labels: &Labels) -> bool {
        match self {
            Requirement::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            // As in Kubernetes, NotIn matches objects that lack the key entirely.
            Requirement::NotIn(key, values) => labels.get(key).is_none_or(|v| !values.contains(v)),
            Requirement::Exists(key) => labels.contains_key(key),
            Requirement::DoesNotExist(key) => !labels.contains_key(key),
        }
    }
}

/// A Kubernetes label selector. The empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LabelSelector {
    pub match_labels: Labels,
    pub match_expressions: Vec<Requirement>,
}

impl LabelSelector {
    /// The selector that matches every label set.
    pub fn everything() -> Self {
        Self::default()
    }

    pub fn from_labels<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self {
            match_labels: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            match_expressions: Vec::new(),
        }
    }

    pub fn is_everything(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }

    /// Adds `key=value` to the selector, narrowing it (used to pin a selector to one namespace).
    pub fn and_label(mut self, key: &str, value: &str) -> Self {
        self.match_labels.insert(key.to_owned(), value.to_owned());
        self
    }
}

impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_everything() {
            return f.write_str("{}");
        }
        let mut parts: Vec<String> = self
            .match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        for r in &self.match_expressions {
            parts.push(match r {
                Requirement::In(k, v) => format!("{k} in ({})", v.join(",")),
                Requirement::NotIn(k, v) => format!("{k} notin ({})", v.join(",")),
                Requirement::Exists(k) => k.clone(),
                Requirement::DoesNotExist(k) => format!("!{k}"),
            });
        }
        write!(f, "{{{}}}", parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn empty_selector_matches_everything() {
        assert!(LabelSelector::everything().matches(&labels(&[])));
        assert!(LabelSelector::everything().matches(&labels(&[("a", "b")])));
    }

    #[test]
    fn operators() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        assert!(Requirement::In("app".into(), vec!["web".into(), "db".into()]).matches(&l));
        assert!(!Requirement::In("app".into(), vec!["db".into()]).matches(&l));
        assert!(!Requirement::In("missing".into(), vec!["db".into()]).matches(&l));
        assert!(Requirement::NotIn("app".into(), vec!["db".into()]).matches(&l));
        assert!(Requirement::NotIn("missing".into(), vec!["db".into()]).matches(&l));
        assert!(!Requirement::NotIn("app".into(), vec!["web".into()]).matches(&l));
        assert!(Requirement::Exists("tier".into()).matches(&l));
        assert!(!Requirement::Exists("x".into()).matches(&l));
        assert!(Requirement::DoesNotExist("x".into()).matches(&l));
        assert!(!Requirement::DoesNotExist("app".into()).matches(&l));
    }

    #[test]
    fn match_labels_and_expressions_are_anded() {
        let sel = LabelSelector {
            match_labels: labels(&[("app", "web")]),
            match_expressions: vec![Requirement::DoesNotExist("canary".into())],
        };
        assert!(sel.matches(&labels(&[("app", "web")])));
        assert!(!sel.matches(&labels(&[("app", "web"), ("canary", "1")])));
        assert!(!sel.matches(&labels(&[("app", "db")])));
    }
}
