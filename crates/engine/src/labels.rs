//! Label sets and Kubernetes label selectors (matchLabels plus matchExpressions).

use serde::{Deserialize, Serialize};

/// A set of `key=value` labels. Ordered so that identities and selectors hash and print
/// deterministically; a sorted vector, not a map (see `labelset.rs`).
pub use crate::labelset::Labels;

/// A label set held by reference count: cheap to clone, compared by content.
pub type SharedLabels = std::sync::Arc<Labels>;

/// Hands out one shared copy of each distinct label set, so that the replicas of a workload hold
/// one set between them. Sets nobody else holds any more are forgotten once they could make up
/// half of what is kept, so the interner never grows beyond twice the live sets.
#[derive(Debug, Default)]
pub struct LabelInterner {
    /// foldhash: at 150,000 pods of their own labels (StatefulSets) SipHash over every set, on
    /// each insert and each rehash as the table grows, was 2% of an initial sync.
    sets: foldhash::HashSet<SharedLabels>,
    live_after_purge: usize,
}

impl LabelInterner {
    pub fn intern(&mut self, labels: SharedLabels) -> SharedLabels {
        if let Some(shared) = self.sets.get(&labels) {
            return shared.clone();
        }
        if self.sets.len() >= 2 * self.live_after_purge + 64 {
            self.sets.retain(|l| std::sync::Arc::strong_count(l) > 1);
            self.live_after_purge = self.sets.len();
        }
        self.sets.insert(labels.clone());
        labels
    }

    /// How many distinct sets are kept.
    pub fn len(&self) -> usize {
        self.sets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }
}

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

    #[test]
    fn equal_label_sets_are_shared_and_dropped_sets_forgotten() {
        let mut interner = LabelInterner::default();
        let set = |v: &str| SharedLabels::new(Labels::from([("app".to_string(), v.to_string())]));
        let a = interner.intern(set("a"));
        let a2 = interner.intern(set("a"));
        assert!(std::sync::Arc::ptr_eq(&a, &a2));
        for i in 0..1000 {
            // Held by nobody but the interner once this statement ends.
            interner.intern(set(&format!("tmp-{i}")));
        }
        assert!(interner.len() <= 2 * 2 + 64, "{} sets kept", interner.len());
        assert!(std::sync::Arc::ptr_eq(&a, &interner.intern(set("a"))));
    }

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
