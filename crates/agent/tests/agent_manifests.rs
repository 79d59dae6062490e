//! The deployment manifests under `config/` are what `kubectl apply -k config/` sends to the API
//! server. Each one must parse into its typed k8s-openapi object *without losing a field*: k8s-openapi
//! ignores unknown fields, so a misspelled key would otherwise pass silently and be dropped by the
//! API server too. The checks below then pin the properties the agent depends on.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

fn config_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config")
}

#[derive(Deserialize)]
struct Kustomization {
    namespace: String,
    resources: Vec<String>,
}

fn kustomization() -> Kustomization {
    let text = std::fs::read_to_string(config_dir().join("kustomization.yaml")).unwrap();
    serde_saphyr::from_str(&text).expect("kustomization.yaml parses")
}

/// Parses `file` as `T` and checks that nothing was dropped on the way: the typed object,
/// serialized back, equals the YAML document read as plain data.
fn typed<T: DeserializeOwned + Serialize>(file: &str) -> T {
    let text = std::fs::read_to_string(config_dir().join(file))
        .unwrap_or_else(|e| panic!("reading config/{file}: {e}"));
    let object: T = serde_saphyr::from_str(&text)
        .unwrap_or_else(|e| panic!("config/{file} does not parse as its kind: {e}"));
    let plain: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    let round_trip = serde_json::to_value(&object).unwrap();
    assert_eq!(
        round_trip, plain,
        "config/{file}: some field is unknown to the typed object (misspelled or misplaced)"
    );
    object
}

#[derive(Deserialize)]
struct Head {
    kind: String,
}

#[test]
fn every_kustomization_resource_parses_into_its_typed_object() {
    let kustomization = kustomization();
    let mut kinds = BTreeSet::new();
    for file in &kustomization.resources {
        let text = std::fs::read_to_string(config_dir().join(file)).unwrap();
        let head: Head = serde_saphyr::from_str(&text).unwrap();
        match head.kind.as_str() {
            "Namespace" => drop(typed::<Namespace>(file)),
            "ServiceAccount" => drop(typed::<ServiceAccount>(file)),
            "ClusterRole" => drop(typed::<ClusterRole>(file)),
            "ClusterRoleBinding" => drop(typed::<ClusterRoleBinding>(file)),
            "DaemonSet" => drop(typed::<DaemonSet>(file)),
            other => panic!("config/{file}: unexpected kind {other}"),
        }
        kinds.insert(head.kind);
    }
    let expected: BTreeSet<String> = [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "DaemonSet",
    ]
    .map(String::from)
    .into();
    assert_eq!(kinds, expected);
}

#[test]
fn every_yaml_file_in_config_is_listed_in_the_kustomization() {
    let listed: BTreeSet<String> = kustomization().resources.into_iter().collect();
    for entry in std::fs::read_dir(config_dir()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".yaml") && name != "kustomization.yaml" {
            assert!(
                listed.contains(&name),
                "config/{name} is not in kustomization.yaml"
            );
        }
    }
}

#[test]
fn cluster_role_grants_read_only_access_to_exactly_the_watched_kinds() {
    let role: ClusterRole = typed("clusterrole.yaml");
    let mut granted = BTreeSet::new();
    for rule in role.rules.unwrap() {
        let verbs: BTreeSet<&str> = rule.verbs.iter().map(String::as_str).collect();
        assert_eq!(verbs, BTreeSet::from(["get", "list", "watch"]));
        assert!(rule.resource_names.is_none() && rule.non_resource_urls.is_none());
        for group in rule.api_groups.unwrap() {
            for resource in rule.resources.clone().unwrap() {
                granted.insert(format!("{resource}.{group}"));
            }
        }
    }
    let expected: BTreeSet<String> = [
        "pods.",
        "namespaces.",
        "nodes.",
        "networkpolicies.networking.k8s.io",
        "adminnetworkpolicies.policy.networking.k8s.io",
        "baselineadminnetworkpolicies.policy.networking.k8s.io",
        "clusternetworkpolicies.policy.networking.k8s.io",
        "ciliumnetworkpolicies.cilium.io",
        "ciliumclusterwidenetworkpolicies.cilium.io",
    ]
    .map(String::from)
    .into();
    assert_eq!(granted, expected);
}

#[test]
fn binding_ties_the_service_account_to_the_role() {
    let namespace = kustomization().namespace;
    let binding: ClusterRoleBinding = typed("clusterrolebinding.yaml");
    let account: ServiceAccount = typed("serviceaccount.yaml");
    let role: ClusterRole = typed("clusterrole.yaml");
    assert_eq!(binding.role_ref.kind, "ClusterRole");
    assert_eq!(Some(binding.role_ref.name), role.metadata.name);
    let subjects = binding.subjects.unwrap();
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0].kind, "ServiceAccount");
    assert_eq!(Some(&subjects[0].name), account.metadata.name.as_ref());
    assert_eq!(subjects[0].namespace.as_ref(), Some(&namespace));
}

#[test]
fn daemon_set_runs_a_host_process_agent_on_windows_nodes() {
    let account: ServiceAccount = typed("serviceaccount.yaml");
    let daemon_set: DaemonSet = typed("daemonset.yaml");
    let pod = daemon_set.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.service_account_name, account.metadata.name);
    assert_eq!(
        pod.node_selector
            .unwrap()
            .get("kubernetes.io/os")
            .map(String::as_str),
        Some("windows")
    );
    assert_eq!(pod.host_network, Some(true));
    let windows = pod.security_context.unwrap().windows_options.unwrap();
    assert_eq!(windows.host_process, Some(true));
    assert_eq!(
        windows.run_as_user_name.as_deref(),
        Some(r"NT AUTHORITY\SYSTEM")
    );

    assert_eq!(pod.containers.len(), 1);
    let container = &pod.containers[0];
    let node_name = container
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "NODE_NAME")
        .expect("NODE_NAME is set");
    let field = node_name
        .value_from
        .as_ref()
        .unwrap()
        .field_ref
        .as_ref()
        .unwrap();
    assert_eq!(field.field_path, "spec.nodeName");

    let args = container.args.clone().unwrap_or_default();
    let listen = args
        .iter()
        .find_map(|a| a.strip_prefix("--listen="))
        .expect("the listen address is explicit");
    let port: i32 = listen.rsplit(':').next().unwrap().parse().unwrap();
    for (probe, path) in [
        (container.liveness_probe.as_ref(), "/healthz"),
        (container.readiness_probe.as_ref(), "/readyz"),
    ] {
        let get = probe
            .and_then(|p| p.http_get.as_ref())
            .expect("an HTTP probe");
        assert_eq!(get.path.as_deref(), Some(path));
        assert_eq!(
            get.port,
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(port),
            "{path} probes the port the agent listens on"
        );
    }
    let requests = container
        .resources
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap();
    assert!(requests.contains_key("cpu") && requests.contains_key("memory"));
}

#[test]
fn namespace_admits_privileged_pods() {
    let namespace: Namespace = typed("namespace.yaml");
    assert_eq!(namespace.metadata.name, Some(kustomization().namespace));
    let labels = namespace.metadata.labels.unwrap();
    assert_eq!(
        labels
            .get("pod-security.kubernetes.io/enforce")
            .map(String::as_str),
        Some("privileged")
    );
}
