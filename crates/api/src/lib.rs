//! netpol-api: typed policy objects and their translation into engine entries.

pub mod cluster;
pub mod crd;
pub mod error;
pub mod object;
pub mod selector;
pub mod translate;

pub use error::{Diagnostic, FieldError, FieldPath, ObjectRef, ValidationError, Warning};
pub use object::{parse_values, parse_yaml, yaml_options, Object, YamlError, DEFAULT_NAMESPACE};
pub use translate::{translate, Translation};
