//! Label keys and values as the API server validates them (apimachinery's
//! `IsQualifiedName` and `IsValidLabelValue`), so that an object or a selector the server would
//! refuse is refused the same way from a file, naming the field.
//!
//! - A key is `[prefix/]name`: the prefix a DNS subdomain (at most 253 characters, lowercase
//!   alphanumerics, `-` and `.`, each dot-separated part starting and ending alphanumeric), the
//!   name at most 63 characters of alphanumerics, `-`, `_` and `.`, starting and ending
//!   alphanumeric.
//! - A value is empty or follows the name's rules.

use std::collections::BTreeMap;

use crate::error::{FieldError, FieldPath};

const NAME_MAX: usize = 63;
const PREFIX_MAX: usize = 253;

/// Checks a label key at `path`.
pub fn check_key(key: &str, path: &FieldPath) -> Result<(), FieldError> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if let Some(problem) = subdomain_problem(prefix) {
            return Err(path.error(format!("label key {key:?}: its prefix {problem}")));
        }
    }
    if name.is_empty() {
        return Err(path.error(format!("label key {key:?}: its name must not be empty")));
    }
    match name_problem(name) {
        Some(problem) => Err(path.error(format!("label key {key:?}: its name {problem}"))),
        None => Ok(()),
    }
}

/// Checks a label value at `path` (empty is allowed).
pub fn check_value(value: &str, path: &FieldPath) -> Result<(), FieldError> {
    if value.is_empty() {
        return Ok(());
    }
    match name_problem(value) {
        Some(problem) => Err(path.error(format!("label value {value:?} {problem}"))),
        None => Ok(()),
    }
}

/// Checks an object's `metadata.labels`, each under its own key's path.
pub fn check_labels(
    labels: Option<&BTreeMap<String, String>>,
    path: &FieldPath,
) -> Result<(), FieldError> {
    for (key, value) in labels.into_iter().flatten() {
        let at = path.key(key);
        check_key(key, &at)?;
        check_value(value, &at)?;
    }
    Ok(())
}

/// What is wrong with a label name or value (non-empty), if anything.
fn name_problem(text: &str) -> Option<String> {
    if text.len() > NAME_MAX {
        return Some(format!(
            "is {} characters long (at most {NAME_MAX})",
            text.len()
        ));
    }
    let alphanumeric = |c: char| c.is_ascii_alphanumeric();
    if !text.starts_with(alphanumeric) || !text.ends_with(alphanumeric) {
        return Some("must start and end with a letter or digit".into());
    }
    if let Some(c) = text
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Some(format!(
            "holds {c:?} (only letters, digits, '-', '_' and '.' are allowed)"
        ));
    }
    None
}

/// What is wrong with a DNS subdomain (RFC 1123), if anything.
fn subdomain_problem(text: &str) -> Option<String> {
    if text.is_empty() {
        return Some("must not be empty".into());
    }
    if text.len() > PREFIX_MAX {
        return Some(format!(
            "is {} characters long (at most {PREFIX_MAX})",
            text.len()
        ));
    }
    let lower_alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    for part in text.split('.') {
        if !part.starts_with(lower_alphanumeric) || !part.ends_with(lower_alphanumeric) {
            return Some(format!(
                "{text:?} is not a DNS subdomain (lowercase letters, digits, '-' and '.', each \
                 part starting and ending with a letter or digit)"
            ));
        }
        if let Some(c) = part
            .chars()
            .find(|c| !(lower_alphanumeric(*c) || *c == '-'))
        {
            return Some(format!(
                "{text:?} holds {c:?}, which a DNS subdomain may not"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> Result<(), String> {
        check_key(k, &FieldPath::root("k")).map_err(|e| e.to_string())
    }

    fn value(v: &str) -> Result<(), String> {
        check_value(v, &FieldPath::root("v")).map_err(|e| e.to_string())
    }

    #[test]
    fn keys_the_api_server_accepts() {
        for k in [
            "app",
            "app.kubernetes.io/name",
            "statefulset.kubernetes.io/pod-name",
            "kubernetes.io/metadata.name",
            "a_b.c-d",
            "x",
            "9",
            &"n".repeat(63),
            &format!("{}/{}", "p".repeat(253), "n".repeat(63)),
        ] {
            assert_eq!(key(k), Ok(()), "{k}");
        }
    }

    #[test]
    fn keys_the_api_server_refuses_name_the_reason() {
        let cases = [
            ("", "name must not be empty"),
            ("app/", "name must not be empty"),
            ("-app", "start and end"),
            ("app-", "start and end"),
            ("a b", "' '"),
            ("Example.com/app", "DNS subdomain"),
            ("/app", "prefix must not be empty"),
            ("ex..com/app", "DNS subdomain"),
            ("ex_ample.com/app", "'_'"),
            ("a/b/c", "'/'"),
        ];
        for (k, reason) in cases {
            let error = key(k).expect_err(k);
            assert!(error.contains(reason), "{k:?}: {error}");
        }
        let long_name = "n".repeat(64);
        assert!(key(&long_name).unwrap_err().contains("64 characters"));
        let long_prefix = format!("{}/n", "p".repeat(254));
        assert!(key(&long_prefix).unwrap_err().contains("254 characters"));
    }

    #[test]
    fn values_follow_the_name_rules_and_may_be_empty() {
        assert_eq!(value(""), Ok(()));
        assert_eq!(value("v1.2_3-x"), Ok(()));
        assert_eq!(value(&"v".repeat(63)), Ok(()));
        assert!(value(&"v".repeat(64)).unwrap_err().contains("at most 63"));
        assert!(value("has space").unwrap_err().contains("' '"));
        assert!(value("a/b").unwrap_err().contains("'/'"));
        assert!(value("-x").unwrap_err().contains("start and end"));
    }
}
