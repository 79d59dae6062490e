//! `--cluster`: the live cluster as input. Every kind the agent reads is listed once, read-only,
//! in pages (`--chunk-size`, as `kubectl get` pages), all kinds at once; a policy kind whose CRD
//! is not installed counts as empty, as the agent counts it. Manifests given with it are applied
//! on top as `kubectl apply` would (same kind, namespace and name replaces), after the
//! `--delete`d objects are taken out: the cluster as it would be.

pub mod args;
pub mod kubeconfig;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use netpol_agent::sources::cluster::resources;
use netpol_agent::sources::kube_api::{CallError, KindApi};
use serde_json::{json, Value};

use crate::loader::{
    differ_in_policies_only, LoadError, LoadErrors, ReadFlags, ReadOne, Scenario, SideObjects,
    SourcedObject,
};
pub use args::{ClusterArgs, Live};

/// Every object the live cluster holds, as read once.
#[derive(Debug)]
pub struct Snapshot {
    /// How messages name the cluster: `<cluster context NAME>`.
    pub label: String,
    pub objects: Vec<SourcedObject>,
    /// List requests made (pages of every kind).
    pub pages: usize,
    /// Policy kinds the cluster does not serve (their CRD is not installed).
    pub not_installed: Vec<String>,
}

/// How long one list page may take.
const PAGE_TIMEOUT: Duration = Duration::from_secs(60);

/// Reads every object of the live cluster `args` names.
pub fn read(args: &ClusterArgs) -> Result<Snapshot, String> {
    let env = kubeconfig::Environment::current();
    let source = kubeconfig::resolve(args.kubeconfig.as_deref(), &env, &|p| p.is_file())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the Kubernetes client: {e}"))?;
    runtime.block_on(async {
        let (config, name) = kubeconfig::config(&source, args.context.as_deref()).await?;
        let label = format!("<cluster {name}>");
        let client = kube::Client::try_from(config)
            .map_err(|e| format!("{label}: building the Kubernetes client: {e}"))?;
        let page_size = args.chunk_size.max(1);
        let lists = resources().into_iter().map(|(_, resource)| {
            let api = KindApi::new(client.clone(), resource.clone());
            async move { (resource, api.list(page_size, PAGE_TIMEOUT).await) }
        });
        let mut snapshot = Snapshot {
            label: label.clone(),
            objects: Vec::new(),
            pages: 0,
            not_installed: Vec::new(),
        };
        let mut failures = Vec::new();
        for (resource, listed) in futures::future::join_all(lists).await {
            match listed {
                Ok(listing) => {
                    snapshot.pages += listing.pages;
                    let at = resource.plural.clone();
                    snapshot
                        .objects
                        .extend(listing.items.into_iter().map(|mut value| {
                            // List items of built-in kinds come without apiVersion and kind.
                            if let Some(map) = value.as_object_mut() {
                                map.insert("apiVersion".into(), json!(resource.api_version));
                                map.insert("kind".into(), json!(resource.kind));
                            }
                            SourcedObject {
                                file: PathBuf::from(&label),
                                at: at.clone(),
                                value,
                            }
                        }));
                }
                Err(CallError::NotInstalled) => snapshot.not_installed.push(resource.kind),
                Err(error) => failures.push(format!(
                    "{label}: listing {} ({}): {error}",
                    resource.plural, resource.api_version
                )),
            }
        }
        if failures.is_empty() {
            Ok(snapshot)
        } else {
            // Fail closed: a cluster missing a kind would print wrong verdicts.
            Err(failures.join("\n"))
        }
    })
}

/// Loads the live cluster of `live` (read now) as a scenario.
pub fn load(live: &Live, stdin: &mut dyn Read, flags: ReadFlags) -> Result<Scenario, LoadErrors> {
    let snapshot = read(&live.cluster)
        .map_err(|e| LoadErrors(vec![LoadError::syntax(Path::new("--cluster"), e)]))?;
    build(&snapshot, &live.apply, &live.cluster.delete, stdin, flags)
}

/// The scenario of `snapshot` with the objects of `deletes` taken out, then the manifests at
/// `apply` applied.
pub fn build(
    snapshot: &Snapshot,
    apply: &[PathBuf],
    deletes: &[String],
    stdin: &mut dyn Read,
    flags: ReadFlags,
) -> Result<Scenario, LoadErrors> {
    let (deleted, applied) = plan(snapshot, apply, deletes, stdin)?;
    // Each live object is copied and read on its own, its copy dropped at once.
    let base = snapshot
        .objects
        .iter()
        .zip(deleted)
        .filter(|(_, deleted)| !deleted)
        .map(|(object, _)| ReadOne::of(object.clone()))
        .collect();
    Scenario::from_objects(&after_name(snapshot, apply, deletes), base, applied, flags)
}

/// `diff --cluster`'s two sides: `snapshot` as it is, and as [`build`] makes it. When what is
/// applied and deleted are policies only, the live objects are read once and both clusters
/// share their pods ([`Scenario::from_sides`]); otherwise each side is built on its own.
pub fn build_sides(
    snapshot: &Snapshot,
    apply: &[PathBuf],
    deletes: &[String],
    stdin: &mut dyn Read,
    flags: ReadFlags,
) -> [Result<Scenario, LoadErrors>; 2] {
    let before = || build(snapshot, &[], &[], &mut [].as_slice(), flags.clone());
    let (deleted, applied) = match plan(snapshot, apply, deletes, stdin) {
        Ok(plan) => plan,
        Err(errors) => return [before(), Err(errors)],
    };
    let base: Vec<ReadOne> = snapshot
        .objects
        .iter()
        .map(|object| ReadOne::of(object.clone()))
        .collect();
    let sides = [
        SideObjects::default(),
        SideObjects {
            deleted,
            own: applied,
        },
    ];
    if differ_in_policies_only(&base, &sides) {
        let names = [snapshot.label.clone(), after_name(snapshot, apply, deletes)];
        return Scenario::from_sides(base, sides, names, flags.clone());
    }
    drop(base);
    let [_, SideObjects { deleted, own }] = sides;
    let base = snapshot
        .objects
        .iter()
        .zip(deleted)
        .filter(|(_, deleted)| !deleted)
        .map(|(object, _)| ReadOne::of(object.clone()))
        .collect();
    let after = Scenario::from_objects(
        &after_name(snapshot, apply, deletes),
        base,
        own,
        flags.clone(),
    );
    [before(), after]
}

/// Which live objects `deletes` take out (every one named must exist), and the objects of
/// the manifests at `apply`.
fn plan(
    snapshot: &Snapshot,
    apply: &[PathBuf],
    deletes: &[String],
    stdin: &mut dyn Read,
) -> Result<(Vec<bool>, Vec<ReadOne>), LoadErrors> {
    let label = Path::new(&snapshot.label);
    let mut deleted = vec![false; snapshot.objects.len()];
    let mut errors = Vec::new();
    for delete in deletes {
        match parse_delete(delete) {
            Ok(target) => {
                let mut found = false;
                for (object, deleted) in snapshot.objects.iter().zip(&mut deleted) {
                    if !*deleted && target.matches(&object.value) {
                        *deleted = true;
                        found = true;
                    }
                }
                if !found {
                    errors.push(LoadError::syntax(
                        label,
                        format!("--delete {delete}: no such object in the cluster"),
                    ));
                }
            }
            Err(e) => errors.push(LoadError::syntax(label, format!("--delete {delete}: {e}"))),
        }
    }
    let applied = match crate::loader::load_objects(apply, stdin) {
        Ok(objects) => objects,
        Err(e) => {
            errors.extend(e.0);
            Vec::new()
        }
    };
    if errors.is_empty() {
        Ok((deleted, applied))
    } else {
        Err(LoadErrors(errors))
    }
}

/// How messages name the cluster as it would be: `<cluster NAME> + FILE - KIND/NS/NAME`.
fn after_name(snapshot: &Snapshot, apply: &[PathBuf], deletes: &[String]) -> String {
    let mut name = snapshot.label.clone();
    for path in apply {
        name.push_str(&format!(" + {}", path.display()));
    }
    for delete in deletes {
        name.push_str(&format!(" - {delete}"));
    }
    name
}

/// An object named by `--delete`.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    /// As given, lower case: a kind (`networkpolicy`) or its plural (`networkpolicies`).
    kind: String,
    namespace: Option<String>,
    name: String,
}

fn parse_delete(text: &str) -> Result<Target, String> {
    let parts: Vec<&str> = text.split('/').collect();
    let (kind, namespace, name) = match parts.as_slice() {
        [kind, name] => (kind, None, name),
        [kind, namespace, name] => (kind, Some(namespace.to_string()), name),
        _ => return Err("give KIND/NAMESPACE/NAME, or KIND/NAME for a cluster-scoped kind".into()),
    };
    if kind.is_empty() || name.is_empty() || namespace.as_ref().is_some_and(String::is_empty) {
        return Err("an empty kind, namespace or name".into());
    }
    Ok(Target {
        kind: kind.to_ascii_lowercase(),
        namespace,
        name: name.to_string(),
    })
}

impl Target {
    fn matches(&self, object: &Value) -> bool {
        let kind = object["kind"]
            .as_str()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let plural = match kind.strip_suffix('y') {
            Some(stem) => format!("{stem}ies"),
            None => format!("{kind}s"),
        };
        let metadata = &object["metadata"];
        (self.kind == kind || self.kind == plural)
            && metadata["name"].as_str() == Some(self.name.as_str())
            && metadata["namespace"].as_str() == self.namespace.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletes_name_kind_or_plural_namespace_and_name() {
        let np = json!({"kind": "NetworkPolicy", "metadata": {"namespace": "shop", "name": "a"}});
        let anp = json!({"kind": "AdminNetworkPolicy", "metadata": {"name": "a"}});
        let target = |t: &str| parse_delete(t).unwrap();
        assert!(target("networkpolicy/shop/a").matches(&np));
        assert!(target("NetworkPolicies/shop/a").matches(&np));
        assert!(!target("networkpolicy/ops/a").matches(&np));
        assert!(!target("networkpolicy/a").matches(&np));
        assert!(target("adminnetworkpolicy/a").matches(&anp));
        assert!(!target("adminnetworkpolicy/x/a").matches(&anp));
        assert!(parse_delete("networkpolicy").is_err());
        assert!(parse_delete("a/b/c/d").is_err());
        assert!(parse_delete("pod//a").is_err());
    }
}
