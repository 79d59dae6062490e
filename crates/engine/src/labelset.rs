//! [`Labels`]: a set of `key=value` labels kept as one sorted vector.
//!
//! Label sets are small (a selector names one or two labels, a pod carries a handful) and there
//! are many of them: every policy entry's subject and peers, every distinct pod label set. A
//! `BTreeMap<String, String>` allocates a node for eleven pairs (544 bytes) however few it holds;
//! a sorted vector holds exactly its pairs. At 150,000 pods and 36,000 policies the maps' nodes
//! were the larger part of what the selectors and label sets cost.
//!
//! The type offers the map operations the code base uses, with a map's semantics: keys are
//! unique and iterate in order, a later insert of a key replaces its value, and equality,
//! ordering, hashing, `Debug` and serde's form are those of the ordered map.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A set of `key=value` labels, ordered by key.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Labels(Vec<(String, String)>);

/// The iterator of [`Labels::iter`].
pub type Iter<'a> = std::iter::Map<
    std::slice::Iter<'a, (String, String)>,
    fn(&'a (String, String)) -> (&'a String, &'a String),
>;

fn pair_refs(pair: &(String, String)) -> (&String, &String) {
    (&pair.0, &pair.1)
}

impl Labels {
    pub fn new() -> Self {
        Labels(Vec::new())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn position<Q>(&self, key: &Q) -> Result<usize, usize>
    where
        String: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.0.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }

    pub fn get<Q>(&self, key: &Q) -> Option<&String>
    where
        String: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.position(key).ok().map(|i| &self.0[i].1)
    }

    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        String: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.position(key).is_ok()
    }

    /// Sets `key` to `value`, returning the value it replaced.
    pub fn insert(&mut self, key: String, value: String) -> Option<String> {
        match self.position(key.as_str()) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.reserve_exact(1);
                self.0.insert(i, (key, value));
                None
            }
        }
    }

    pub fn remove<Q>(&mut self, key: &Q) -> Option<String>
    where
        String: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let i = self.position(key).ok()?;
        Some(self.0.remove(i).1)
    }

    /// Keeps only the pairs `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&String, &mut String) -> bool) {
        self.0.retain_mut(|(k, v)| keep(k, v));
        self.0.shrink_to_fit();
    }

    /// The pairs in key order.
    pub fn iter(&self) -> Iter<'_> {
        self.0
            .iter()
            .map(pair_refs as fn(&(String, String)) -> (&String, &String))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.0.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.0.iter().map(|(_, v)| v)
    }

    /// The first pair in key order.
    pub fn first_key_value(&self) -> Option<(&String, &String)> {
        self.0.first().map(pair_refs)
    }
}

impl FromIterator<(String, String)> for Labels {
    /// As collecting into an ordered map: a key given twice keeps its last value.
    fn from_iter<I: IntoIterator<Item = (String, String)>>(pairs: I) -> Self {
        let mut pairs: Vec<(String, String)> = pairs.into_iter().collect();
        // Stable: equal keys keep their order, and the last of each run is kept below.
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(String, String)> = Vec::with_capacity(pairs.len());
        for pair in pairs {
            match out.last_mut() {
                Some(last) if last.0 == pair.0 => *last = pair,
                _ => out.push(pair),
            }
        }
        out.shrink_to_fit();
        Labels(out)
    }
}

impl Extend<(String, String)> for Labels {
    fn extend<I: IntoIterator<Item = (String, String)>>(&mut self, pairs: I) {
        for (key, value) in pairs {
            self.insert(key, value);
        }
    }
}

impl<const N: usize> From<[(String, String); N]> for Labels {
    fn from(pairs: [(String, String); N]) -> Self {
        pairs.into_iter().collect()
    }
}

impl From<BTreeMap<String, String>> for Labels {
    fn from(map: BTreeMap<String, String>) -> Self {
        let mut pairs: Vec<(String, String)> = map.into_iter().collect();
        pairs.shrink_to_fit();
        Labels(pairs)
    }
}

impl From<Labels> for BTreeMap<String, String> {
    fn from(labels: Labels) -> Self {
        labels.0.into_iter().collect()
    }
}

impl IntoIterator for Labels {
    type Item = (String, String);
    type IntoIter = std::vec::IntoIter<(String, String)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Labels {
    type Item = (&'a String, &'a String);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<Q> std::ops::Index<&Q> for Labels
where
    String: Borrow<Q>,
    Q: Ord + ?Sized,
{
    type Output = String;

    fn index(&self, key: &Q) -> &String {
        self.get(key).expect("no label with this key")
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Labels {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        BTreeMap::<String, String>::deserialize(deserializer).map(Labels::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Every operation agrees with the ordered map it replaces.
    #[test]
    fn behaves_as_an_ordered_map() {
        let given = pairs(&[("tier", "web"), ("app", "a"), ("zone", "z"), ("app", "b")]);
        let labels: Labels = given.iter().cloned().collect();
        let map: BTreeMap<String, String> = given.iter().cloned().collect();
        assert_eq!(labels.len(), map.len());
        assert!(labels.iter().eq(map.iter()));
        assert_eq!(labels.get("app"), map.get("app"));
        assert_eq!(labels.get("missing"), None);
        assert_eq!(format!("{labels:?}"), format!("{map:?}"));
        assert_eq!(
            serde_json::to_string(&labels).unwrap(),
            serde_json::to_string(&map).unwrap()
        );
        let back: Labels = serde_json::from_str(r#"{"b":"2","a":"1"}"#).unwrap();
        assert_eq!(
            back,
            pairs(&[("a", "1"), ("b", "2")])
                .into_iter()
                .collect::<Labels>()
        );

        let (mut labels, mut map) = (labels, map);
        assert_eq!(
            labels.insert("b".into(), "x".into()),
            map.insert("b".into(), "x".into())
        );
        assert_eq!(
            labels.insert("app".into(), "c".into()),
            map.insert("app".into(), "c".into())
        );
        assert_eq!(labels.remove("tier"), map.remove("tier"));
        assert_eq!(labels.remove("tier"), None);
        assert!(labels.iter().eq(map.iter()));
        assert_eq!(labels["zone"], map["zone"]);
        assert_eq!(BTreeMap::from(labels.clone()), map);

        // Ordering and equality follow the pairs in key order, as the map's do.
        let a = pairs(&[("a", "1")]).into_iter().collect::<Labels>();
        let b = pairs(&[("a", "1"), ("b", "0")])
            .into_iter()
            .collect::<Labels>();
        let c = pairs(&[("a", "2")]).into_iter().collect::<Labels>();
        let as_map = |l: &Labels| BTreeMap::from(l.clone());
        assert_eq!(a.cmp(&b), as_map(&a).cmp(&as_map(&b)));
        assert_eq!(b.cmp(&c), as_map(&b).cmp(&as_map(&c)));
        assert!(Labels::new().is_empty());
    }
}
