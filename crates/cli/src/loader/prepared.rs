//! An object read on its own the moment its value is complete, so that the value tree can be
//! dropped at once: a 150,000-pod `kind: List` never exists as values (about 9 KB a pod) beside
//! the typed objects read from them. What reading an object needs later (its origin for
//! messages, its owner, a workload's template pod, what refusing it would say) is kept; the rules
//! of the input ([`super::ReadRules`]) decide afterwards which of it is used.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use netpol_api::{is_supported_kind, Object, ReadObject, ValidationError};
use serde_json::Value;

use super::objects::{what, SourcedObject};
use netpol_api::object::unsupported_kind;
use netpol_api::workloads::{is_workload_kind, owner_of, template_pod, Owner, TemplatePod};
use netpol_api::ObjectRef;

/// Where an object was written: its file and its position in it, with its kind and name, for
/// messages.
#[derive(Clone, Debug)]
pub struct Origin {
    pub file: Arc<Path>,
    /// `documents[1].items[3]`, `objects[2]`, or the resource listed (`networkpolicies`).
    pub at: String,
    /// `(Pod x/a)`: as much of the kind and name as the object had.
    pub what: String,
    /// The object's `netpol.io/lint-ignore` annotation, as written (`RULE[,RULE]`): read here,
    /// where the whole object still is (the API layer drops annotations unread).
    pub lint_ignore: Option<Arc<str>>,
}

/// The annotation with which an object acknowledges lint findings: `RULE[,RULE]`. Objects
/// listed from a cluster keep it (and no other annotation) as they are read.
pub use netpol_agent::sources::projection::LINT_IGNORE_ANNOTATION;

/// The [`LINT_IGNORE_ANNOTATION`] of an object, if it has one.
pub fn lint_ignore_of(value: &Value) -> Option<Arc<str>> {
    let annotation = value.get("metadata")?.get("annotations")?;
    annotation
        .get(LINT_IGNORE_ANNOTATION)?
        .as_str()
        .map(Arc::from)
}

impl Origin {
    /// Names the object for a message: `objects[3] (NetworkPolicy x/deny-all)`.
    pub fn describe(&self) -> String {
        format!("{} {}", self.at, self.what)
    }

    pub fn file(&self) -> PathBuf {
        self.file.to_path_buf()
    }
}

/// An object, read.
#[derive(Debug)]
pub struct ReadOne {
    pub origin: Origin,
    pub content: Content,
}

/// What an object turned out to be.
#[derive(Debug)]
pub enum Content {
    /// A kind netpol reads, or something that is no object of any kind: as [`Object::read`]
    /// read it, with the workload a pod belongs to (from its owner reference).
    /// Boxed: an object is as large as the largest kind (about 640 bytes), and 150,000 pods
    /// are held until the cluster is built.
    Object {
        read: Result<Box<ReadObject>, Box<ValidationError>>,
        owner: Option<Owner>,
    },
    /// A workload: the pod its template describes (or why there is none), and why it is
    /// refused where other kinds are.
    Workload {
        template: Result<TemplatePod, (String, String)>,
        refused: ValidationError,
    },
    /// Another kind netpol does not read, and why it is refused where other kinds are.
    Other {
        kind: String,
        refused: ValidationError,
    },
}

impl ReadOne {
    /// Reads the object of `source`, consuming its value.
    pub fn of(source: SourcedObject) -> ReadOne {
        let lint_ignore = lint_ignore_of(&source.value);
        let (what, content) = content_of(source.value);
        ReadOne {
            origin: Origin {
                file: Arc::from(source.file.as_path()),
                at: source.at,
                what,
                lint_ignore,
            },
            content,
        }
    }

    /// The kind, namespace and name of an object of a kind netpol reads, read without error.
    pub fn object_ref(&self) -> Option<netpol_api::ObjectRef> {
        match &self.content {
            Content::Object { read: Ok(read), .. } => Some(read.object.object_ref()),
            _ => None,
        }
    }
}

/// How an object is named after its position (`(NetworkPolicy x/deny-all)`) and what it is,
/// consuming its value.
pub fn content_of(value: Value) -> (String, Content) {
    let what = what(&value);
    let kind = value["kind"].as_str().unwrap_or_default().to_owned();
    let content = if !kind.is_empty() && !is_supported_kind(&kind) {
        if is_workload_kind(&kind) {
            // Read here rather than by `Object::read` (which reads it as its pod too): the
            // template's owner and labels decide whether the input already runs it.
            let metadata = &value["metadata"];
            let object = ObjectRef::new(
                &kind,
                metadata["namespace"].as_str(),
                metadata["name"].as_str().unwrap_or_default(),
            );
            Content::Workload {
                template: template_pod(&value),
                refused: unsupported_kind(object),
            }
        } else {
            let refused = match Object::read(value) {
                Err(e) => e,
                Ok(_) => unreachable!("a kind netpol does not read is refused"),
            };
            Content::Other { kind, refused }
        }
    } else {
        let owner = (kind == "Pod").then(|| owner_of(&value)).flatten();
        Content::Object {
            read: Object::read(value).map(Box::new).map_err(Box::new),
            owner,
        }
    };
    (what, content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(value: Value) -> ReadOne {
        ReadOne::of(SourcedObject {
            file: PathBuf::from("s.yaml"),
            at: "objects[0]".into(),
            value,
        })
    }

    #[test]
    fn objects_are_named_and_told_apart_by_kind() {
        let pod = one(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": "x", "name": "a-1", "labels": {"pod-template-hash": "7d"},
                "ownerReferences": [{"kind": "ReplicaSet", "name": "a-7d"}]}}));
        assert_eq!(pod.origin.describe(), "objects[0] (Pod x/a-1)");
        match pod.content {
            Content::Object { read, owner } => {
                assert!(matches!(read.unwrap().object, Object::Pod(_)));
                assert_eq!(owner.unwrap().name, "a");
            }
            _ => panic!("a pod is an object netpol reads"),
        }
        let deployment = one(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"}, "spec": {"template": {"spec": {"containers": []}}}}));
        match deployment.content {
            Content::Workload { template, refused } => {
                assert_eq!(template.unwrap().owner.name, "web");
                assert!(refused.message.contains("unsupported kind"), "{refused:?}");
            }
            _ => panic!("a Deployment is a workload"),
        }
        let service =
            one(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}));
        assert_eq!(service.origin.describe(), "objects[0] (Service s)");
        assert!(matches!(service.content, Content::Other { kind, .. } if kind == "Service"));
        let nameless = one(json!({"spec": {}}));
        assert_eq!(
            nameless.origin.describe(),
            "objects[0] (object without kind)"
        );
        match nameless.content {
            Content::Object { read, .. } => assert_eq!(read.err().unwrap().field, "kind"),
            _ => panic!("an object without kind is refused by Object::read"),
        }
    }
}
