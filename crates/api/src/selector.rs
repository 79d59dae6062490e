//! Kubernetes label selectors into engine selectors, with the API server's validation rules.

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use netpol_engine::{LabelSelector, Requirement};

use crate::error::{FieldError, FieldPath};
use crate::label_syntax::{check_key, check_value};

/// Converts a Kubernetes `LabelSelector` found at `path`.
pub fn label_selector(
    selector: &metav1::LabelSelector,
    path: &FieldPath,
) -> Result<LabelSelector, FieldError> {
    let mut out = LabelSelector::everything();
    for (key, value) in selector.match_labels.iter().flatten() {
        let at = path.field("matchLabels").key(key);
        check_key(key, &at)?;
        check_value(value, &at)?;
        out.match_labels.insert(key.clone(), value.clone());
    }
    for (i, expr) in selector.match_expressions.iter().flatten().enumerate() {
        let expr_path = path.field("matchExpressions").index(i);
        check_key(&expr.key, &expr_path.field("key"))?;
        for (j, value) in expr.values.iter().flatten().enumerate() {
            check_value(value, &expr_path.field("values").index(j))?;
        }
        out.match_expressions.push(requirement(
            expr.key.clone(),
            &expr.operator,
            expr.values.as_deref(),
            &expr_path,
        )?);
    }
    Ok(out)
}

/// An optional selector: absent means "everything", as for `podSelector` in a NetworkPolicy.
pub fn optional_label_selector(
    selector: Option<&metav1::LabelSelector>,
    path: &FieldPath,
) -> Result<LabelSelector, FieldError> {
    selector.map_or_else(
        || Ok(LabelSelector::everything()),
        |s| label_selector(s, path),
    )
}

/// Builds one `matchExpressions` requirement for `key` (which callers may have rewritten, as the
/// Cilium translator does). `path` is the expression's own path.
pub fn requirement(
    key: String,
    operator: &str,
    values: Option<&[String]>,
    path: &FieldPath,
) -> Result<Requirement, FieldError> {
    let values = values.unwrap_or_default();
    let need_values = || {
        if values.is_empty() {
            Err(path
                .field("values")
                .error(format!("operator {operator} needs at least one value")))
        } else {
            Ok(values.to_vec())
        }
    };
    let no_values = || {
        if values.is_empty() {
            Ok(())
        } else {
            Err(path
                .field("values")
                .error(format!("operator {operator} takes no values")))
        }
    };
    match operator {
        "In" => Ok(Requirement::In(key, need_values()?)),
        "NotIn" => Ok(Requirement::NotIn(key, need_values()?)),
        "Exists" => no_values().map(|()| Requirement::Exists(key)),
        "DoesNotExist" => no_values().map(|()| Requirement::DoesNotExist(key)),
        other => Err(path.field("operator").error(format!(
            "unknown operator {other:?} (expected In, NotIn, Exists or DoesNotExist)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metav1::LabelSelectorRequirement;

    fn expr(key: &str, operator: &str, values: Option<&[&str]>) -> metav1::LabelSelector {
        metav1::LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.into(),
                operator: operator.into(),
                values: values.map(|v| v.iter().map(|s| s.to_string()).collect()),
            }]),
        }
    }

    fn convert(sel: &metav1::LabelSelector) -> Result<LabelSelector, FieldError> {
        label_selector(sel, &FieldPath::root("spec").field("podSelector"))
    }

    #[test]
    fn all_operators_convert() {
        assert_eq!(
            convert(&expr("app", "In", Some(&["a", "b"]))).unwrap(),
            LabelSelector {
                match_labels: Default::default(),
                match_expressions: vec![Requirement::In(
                    "app".into(),
                    vec!["a".into(), "b".into()]
                )]
            }
        );
        assert_eq!(
            convert(&expr("app", "NotIn", Some(&["a"])))
                .unwrap()
                .match_expressions,
            vec![Requirement::NotIn("app".into(), vec!["a".into()])]
        );
        assert_eq!(
            convert(&expr("app", "Exists", None))
                .unwrap()
                .match_expressions,
            vec![Requirement::Exists("app".into())]
        );
        assert_eq!(
            convert(&expr("app", "DoesNotExist", Some(&[])))
                .unwrap()
                .match_expressions,
            vec![Requirement::DoesNotExist("app".into())]
        );
    }

    #[test]
    fn match_labels_are_kept() {
        let sel = metav1::LabelSelector {
            match_labels: Some([("app".to_string(), "web".to_string())].into()),
            match_expressions: None,
        };
        assert_eq!(
            convert(&sel).unwrap(),
            LabelSelector::from_labels([("app", "web")])
        );
        assert!(convert(&metav1::LabelSelector::default())
            .unwrap()
            .is_everything());
    }

    #[test]
    fn unknown_operator_names_the_field() {
        let err = convert(&expr("app", "Foo", Some(&["a"]))).unwrap_err();
        assert_eq!(err.field, "spec.podSelector.matchExpressions[0].operator");
        assert!(err.message.contains("unknown operator \"Foo\""), "{err}");
    }

    #[test]
    fn in_and_not_in_need_values() {
        for op in ["In", "NotIn"] {
            let err = convert(&expr("app", op, None)).unwrap_err();
            assert_eq!(err.field, "spec.podSelector.matchExpressions[0].values");
            let err = convert(&expr("app", op, Some(&[]))).unwrap_err();
            assert!(err.message.contains("at least one value"), "{err}");
        }
    }

    #[test]
    fn exists_and_does_not_exist_take_no_values() {
        for op in ["Exists", "DoesNotExist"] {
            let err = convert(&expr("app", op, Some(&["x"]))).unwrap_err();
            assert_eq!(err.field, "spec.podSelector.matchExpressions[0].values");
        }
    }

    #[test]
    fn empty_keys_are_rejected() {
        let err = convert(&expr("", "Exists", None)).unwrap_err();
        assert_eq!(err.field, "spec.podSelector.matchExpressions[0].key");
    }
}
