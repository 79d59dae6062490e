//! `config/windows` and `config/linux` render: each kustomization is resolved as kustomize does
//! it for the features they use (resources, files or folders; `namespace`; `labels` without
//! selectors; `images`), refusing any other key, and every rendered document is checked: kind
//! and name, the namespace, the DaemonSet's image (the overlay's one image tag: the release
//! version), its ServiceAccount rendered beside it, and its arguments parsed with the binary's
//! parser. Where `kubectl` is installed, `kubectl kustomize` must render the very same
//! documents; where it is not, the test says so and checks the renderer's output alone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use netpol_cli::cli::Cli;
use serde_json::{json, Value};

fn config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config")
}

/// The documents of a YAML stream.
fn documents(text: &str) -> Vec<Value> {
    text.split("\n---")
        .map(|d| d.trim_start_matches("---"))
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .map(|d| serde_saphyr::from_str::<Value>(d).unwrap_or_else(|e| panic!("{e}:\n{d}")))
        .collect()
}

/// Kinds without a namespace.
const CLUSTER_SCOPED: [&str; 3] = ["Namespace", "ClusterRole", "ClusterRoleBinding"];

/// Renders the kustomization in `dir`.
fn render(dir: &Path) -> Vec<Value> {
    let path = dir.join("kustomization.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let k: Value = serde_saphyr::from_str(&text).unwrap();
    for key in k.as_object().unwrap().keys() {
        assert!(
            [
                "apiVersion",
                "kind",
                "namespace",
                "labels",
                "resources",
                "images"
            ]
            .contains(&key.as_str()),
            "{}: `{key}` is not rendered by this test: teach it or use what it knows",
            path.display()
        );
    }
    let mut out = Vec::new();
    for resource in k["resources"].as_array().unwrap() {
        let at = dir.join(resource.as_str().unwrap());
        if at.is_dir() {
            out.extend(render(&at));
        } else {
            out.extend(documents(&std::fs::read_to_string(&at).unwrap()));
        }
    }
    for doc in &mut out {
        let kind = doc["kind"].as_str().unwrap().to_string();
        if let Some(namespace) = k["namespace"].as_str() {
            if !CLUSTER_SCOPED.contains(&kind.as_str()) {
                doc["metadata"]["namespace"] = json!(namespace);
            }
            if kind.ends_with("RoleBinding") {
                for subject in doc["subjects"].as_array_mut().unwrap() {
                    if subject["kind"] == "ServiceAccount" {
                        subject["namespace"] = json!(namespace);
                    }
                }
            }
        }
        for label in k["labels"].as_array().into_iter().flatten() {
            assert_eq!(
                label["includeSelectors"],
                json!(false),
                "{}",
                path.display()
            );
            let labels = doc["metadata"]
                .as_object_mut()
                .unwrap()
                .entry("labels")
                .or_insert(json!({}));
            for (key, value) in label["pairs"].as_object().unwrap() {
                labels[key] = value.clone();
            }
        }
        for image in k["images"].as_array().into_iter().flatten() {
            // Through a pointer: indexing a `Value` mutably would insert the path into every
            // object that has no containers.
            let containers = doc
                .pointer_mut("/spec/template/spec/containers")
                .and_then(Value::as_array_mut);
            for container in containers.into_iter().flatten() {
                if container["image"] == image["name"] {
                    container["image"] = json!(format!(
                        "{}:{}",
                        image["newName"].as_str().unwrap(),
                        image["newTag"].as_str().unwrap()
                    ));
                }
            }
        }
    }
    out
}

fn by_kind_and_name(docs: Vec<Value>) -> BTreeMap<(String, String), Value> {
    docs.into_iter()
        .map(|d| {
            let key = (
                d["kind"].as_str().unwrap().to_string(),
                d["metadata"]["name"].as_str().unwrap().to_string(),
            );
            (key, d)
        })
        .collect()
}

/// The container's arguments, with `from_env` (what the pod's environment gives), parse with
/// the binary's parser.
fn assert_args_parse(container: &Value, from_env: &str) {
    let mut args = vec!["netpol".to_string()];
    args.extend(
        container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string()),
    );
    args.push(from_env.into());
    Cli::try_parse_from(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
}

fn check_overlay(overlay: &str, os: &str, image: &str) {
    let rendered = by_kind_and_name(render(&config().join(overlay)));
    let version = env!("CARGO_PKG_VERSION");
    let (daemon_sets, _): (Vec<_>, Vec<_>) =
        rendered.iter().partition(|((k, _), _)| k == "DaemonSet");
    assert_eq!(daemon_sets.len(), 1, "{overlay}");
    let ds = daemon_sets[0].1;
    assert_eq!(ds["metadata"]["namespace"], "netpol-system");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"]["kubernetes.io/os"], os);
    let container = &pod["containers"][0];
    assert_eq!(
        container["image"],
        format!("{image}:{version}"),
        "{overlay}"
    );
    let account = pod["serviceAccountName"].as_str().unwrap();
    assert!(
        rendered.contains_key(&("ServiceAccount".to_string(), account.to_string())),
        "{overlay}: ServiceAccount {account} is rendered beside the DaemonSet"
    );
    // The node name comes from NODE_NAME in the pod.
    assert_args_parse(container, "--node=node-1");
    for ((kind, name), doc) in &rendered {
        let namespaced = !CLUSTER_SCOPED.contains(&kind.as_str());
        assert_eq!(
            doc["metadata"]["namespace"].is_string(),
            namespaced,
            "{overlay}: {kind} {name}"
        );
    }

    match Command::new("kubectl")
        .args(["kustomize"])
        .arg(config().join(overlay))
        .output()
    {
        Ok(output) if output.status.success() => {
            let kubectl = by_kind_and_name(documents(&String::from_utf8(output.stdout).unwrap()));
            assert_eq!(
                kubectl, rendered,
                "{overlay}: kubectl kustomize renders otherwise"
            );
        }
        Ok(output) => panic!(
            "kubectl kustomize {overlay} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(_) => {
            eprintln!("kubectl is not installed: {overlay} checked with this test's renderer only")
        }
    }
}

#[test]
fn the_windows_overlay_renders() {
    check_overlay("windows", "windows", "ghcr.io/netpol/netpol-agent");
}

#[test]
fn the_linux_overlay_renders() {
    check_overlay("linux", "linux", "ghcr.io/netpol/netpol-agent-linux");
}

/// `config/controller`: two replicas of `netpol controller` with a PodDisruptionBudget, the
/// only writer of NetpolEndpointSlices; agents only read them.
#[test]
fn the_controller_overlay_renders() {
    let rendered = by_kind_and_name(render(&config().join("controller")));
    let get = |kind: &str, name: &str| -> &Value {
        rendered
            .get(&(kind.to_string(), name.to_string()))
            .unwrap_or_else(|| panic!("{kind} {name} is not rendered"))
    };
    let deployment = get("Deployment", "netpol-controller");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(
        container["image"],
        format!(
            "ghcr.io/netpol/netpol-agent-linux:{}",
            env!("CARGO_PKG_VERSION")
        )
    );
    get(
        "ServiceAccount",
        pod["serviceAccountName"].as_str().unwrap(),
    );
    // The identity comes from POD_NAME in the pod.
    assert_args_parse(container, "--identity=netpol-controller-0");
    let budget = get("PodDisruptionBudget", "netpol-controller");
    assert_eq!(budget["spec"]["minAvailable"], 1);
    assert_eq!(
        budget["spec"]["selector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    let slice_verbs = |role: &str| -> Vec<String> {
        get("ClusterRole", role)["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| {
                r["resources"]
                    .as_array()
                    .unwrap()
                    .contains(&json!("netpolendpointslices"))
            })
            .flat_map(|r| r["verbs"].as_array().unwrap().iter())
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    assert!(slice_verbs("netpol-controller").contains(&"update".to_string()));
    assert_eq!(slice_verbs("netpol-agent"), ["get", "list", "watch"]);
    let lease = get("Role", "netpol-controller-lease");
    assert!(
        lease.to_string().contains("\"netpol-controller\""),
        "{lease}"
    );
}
