//! Why a scenario cannot be used. Every error names the file; where one object or one field of the
//! file is at fault, it names that too, so that a user can go straight to the line to fix.

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem found while loading a scenario.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{}: cannot read: {source}", file.display())]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    /// The YAML does not parse or does not have the shape of a scenario. The message carries the
    /// field and the line.
    #[error("{}: {message}", file.display())]
    Syntax { file: PathBuf, message: String },
    /// A Kubernetes object of the file (or of its topology) fails validation or translation.
    /// `object` names it (position in the file, kind, namespace/name), `field` is the JSON path
    /// at fault (empty when the object as a whole is).
    #[error("{}: {object}: {}{message}", file.display(), field_prefix(field))]
    Object {
        file: PathBuf,
        object: String,
        field: String,
        message: String,
    },
    /// An expectation is malformed or names an endpoint the cluster lacks. `field` is its path
    /// inside the file, e.g. `expect[1].flows[0].to`.
    #[error("{}: {field}: {message}", file.display())]
    Expectation {
        file: PathBuf,
        field: String,
        message: String,
    },
    #[error(
        "{}: topology: no topologies/{name}.yaml in {} or any folder above it",
        file.display(),
        searched_from.display()
    )]
    TopologyNotFound {
        file: PathBuf,
        name: String,
        searched_from: PathBuf,
    },
}

/// A copy of the same problem (an I/O error is copied as its kind and message), for inputs that
/// share objects and so report the same problems.
impl Clone for LoadError {
    fn clone(&self) -> Self {
        match self {
            LoadError::Read { file, source } => LoadError::Read {
                file: file.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            LoadError::Syntax { file, message } => LoadError::Syntax {
                file: file.clone(),
                message: message.clone(),
            },
            LoadError::Object {
                file,
                object,
                field,
                message,
            } => LoadError::Object {
                file: file.clone(),
                object: object.clone(),
                field: field.clone(),
                message: message.clone(),
            },
            LoadError::Expectation {
                file,
                field,
                message,
            } => LoadError::Expectation {
                file: file.clone(),
                field: field.clone(),
                message: message.clone(),
            },
            LoadError::TopologyNotFound {
                file,
                name,
                searched_from,
            } => LoadError::TopologyNotFound {
                file: file.clone(),
                name: name.clone(),
                searched_from: searched_from.clone(),
            },
        }
    }
}

fn field_prefix(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!("{field}: ")
    }
}

impl LoadError {
    pub(crate) fn syntax(file: &Path, message: impl fmt::Display) -> Self {
        LoadError::Syntax {
            file: file.to_owned(),
            message: message.to_string(),
        }
    }

    pub(crate) fn expectation(
        file: &Path,
        field: impl Into<String>,
        message: impl fmt::Display,
    ) -> Self {
        LoadError::Expectation {
            file: file.to_owned(),
            field: field.into(),
            message: message.to_string(),
        }
    }
}

/// Every problem found in one scenario. Loading goes on after the first problem where it can, so
/// that one run reports all the objects to fix.
#[derive(Debug)]
pub struct LoadErrors(pub Vec<LoadError>);

impl From<LoadError> for LoadErrors {
    fn from(error: LoadError) -> Self {
        LoadErrors(vec![error])
    }
}

impl fmt::Display for LoadErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for LoadErrors {}
