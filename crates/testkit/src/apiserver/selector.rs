//! Field selectors as the API server applies them to lists and watches: `spec.nodeName=NODE`
//! (what an agent in slice mode asks of pods), any dotted path to a string, `=`, `==` or `!=`,
//! terms joined by commas. An object without the field has the empty string there.

use serde_json::Value;

use super::query_param;

/// One query's field selector; empty selects everything.
#[derive(Clone, Debug, Default)]
pub(super) struct FieldSelector(Vec<Term>);

#[derive(Clone, Debug)]
struct Term {
    path: Vec<String>,
    value: String,
    equal: bool,
}

impl FieldSelector {
    /// The `fieldSelector` of `query` (percent-encoded, as clients send it).
    pub(super) fn of_query(query: &str) -> FieldSelector {
        let Some(raw) = query_param(query, "fieldSelector") else {
            return FieldSelector::default();
        };
        let text = percent_decode(raw);
        FieldSelector(
            text.split(',')
                .filter(|t| !t.is_empty())
                .filter_map(|term| {
                    let (path, value, equal) = if let Some((p, v)) = term.split_once("!=") {
                        (p, v, false)
                    } else if let Some((p, v)) = term.split_once("==") {
                        (p, v, true)
                    } else {
                        let (p, v) = term.split_once('=')?;
                        (p, v, true)
                    };
                    Some(Term {
                        path: path.split('.').map(str::to_owned).collect(),
                        value: value.to_owned(),
                        equal,
                    })
                })
                .collect(),
        )
    }

    pub(super) fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|term| {
            let found = term
                .path
                .iter()
                .try_fold(object, |at, key| at.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default();
            (found == term.value) == term.equal
        })
    }
}

/// `%3D` → `=`, `+` → space.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match u8::from_str_radix(&text[i + 1..i + 3], 16) {
                Ok(byte) => {
                    out.push(byte);
                    i += 3;
                    continue;
                }
                Err(_) => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selects_by_node_name() {
        let on = |node: &str| json!({"spec": {"nodeName": node}});
        let selector = FieldSelector::of_query("limit=5&fieldSelector=spec.nodeName%3Dnode-1");
        assert!(selector.matches(&on("node-1")));
        assert!(!selector.matches(&on("node-2")));
        assert!(!selector.matches(&json!({"spec": {}})));
        let not = FieldSelector::of_query("fieldSelector=spec.nodeName!%3Dnode-1");
        assert!(not.matches(&on("node-2")));
        assert!(FieldSelector::of_query("watch=true").matches(&on("x")));
    }
}
