//! `authentication.mode`: the mutual authentication an allow rule requires.
//!
//! Deny rules cannot carry a mode (the rule translation rejects it there). `test-always-fail`,
//! Cilium's mode for testing its authentication path, has no counterpart in netpol and is
//! rejected by name rather than read as another mode.

use netpol_engine::AuthMode;

use crate::crd::cilium::Authentication;
use crate::error::{FieldError, FieldPath};

pub(super) fn authentication(
    auth: &Authentication,
    path: &FieldPath,
) -> Result<AuthMode, FieldError> {
    match auth.mode.as_str() {
        "required" => Ok(AuthMode::Required),
        "disabled" => Ok(AuthMode::Disabled),
        "test-always-fail" => Err(path
            .field("mode")
            .unsupported("the test-always-fail mode is not supported")),
        other => Err(path.field("mode").error(format!(
            "unknown authentication mode {other:?} (expected required or disabled)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::translate::testing::*;

    #[test]
    fn authentication_modes() {
        let yaml = |mode: &str| {
            cnp(
                "x",
                &format!("spec:\n  endpointSelector: {{}}\n  ingress: [{{fromEntities: [cluster], authentication: {{mode: {mode}}}}}]"),
            )
        };
        assert_eq!(entries(&yaml("required"))[0].auth, Some(AuthMode::Required));
        assert_eq!(entries(&yaml("disabled"))[0].auth, Some(AuthMode::Disabled));
        let err = error(&yaml("test-always-fail"));
        assert_eq!(err.field, "spec.ingress[0].authentication.mode");
        assert!(err.message.starts_with("unsupported: mode"), "{err}");
        let err = error(&yaml("sometimes"));
        assert!(err.message.contains("unknown authentication mode"), "{err}");
        let err = error(&cnp(
            "x",
            "spec:\n  endpointSelector: {}\n  egressDeny: [{toEntities: [world], authentication: {mode: required}}]",
        ));
        assert_eq!(err.field, "spec.egressDeny[0].authentication");
    }
}
