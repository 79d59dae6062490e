//! The deployment manifests under `config/` are what `kubectl apply -k config/windows` and
//! `kubectl apply -k config/linux` send to the API server: each overlay is its OS's DaemonSet over
//! `config/base` (namespace, ServiceAccount, ClusterRole and binding, shared); `config/controller`
//! is `netpol controller`'s Deployment over the same base. Each manifest must
//! parse into its typed k8s-openapi object *without losing a field*: k8s-openapi ignores unknown
//! fields, so a misspelled key would otherwise pass silently and be dropped by the API server too.
//! The checks below then pin the properties the agent depends on.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Namespace, PodSpec, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

fn config_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config")
}

/// The kustomizations: the shared base and one overlay per node OS.
const KUSTOMIZATIONS: [&str; 4] = ["base", "windows", "linux", "controller"];

#[derive(Deserialize)]
struct Kustomization {
    namespace: String,
    resources: Vec<String>,
    #[serde(default)]
    images: Vec<Image>,
}

#[derive(Deserialize)]
struct Image {
    name: String,
    #[serde(rename = "newName")]
    new_name: String,
}

fn kustomization_of(dir: &str) -> Kustomization {
    let path = config_dir().join(dir).join("kustomization.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn kustomization() -> Kustomization {
    kustomization_of("base")
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

/// Every manifest file the overlays apply, by its path under `config/`: the base's, then each
/// overlay's own.
fn resources() -> Vec<String> {
    let mut files = Vec::new();
    for dir in KUSTOMIZATIONS {
        for resource in kustomization_of(dir).resources {
            if resource == "../base" {
                assert_ne!(dir, "base");
                continue;
            }
            files.push(format!("{dir}/{resource}"));
        }
    }
    files
}

#[test]
fn both_overlays_apply_the_shared_base_into_one_namespace() {
    let base = kustomization();
    for overlay in ["windows", "linux"] {
        let k = kustomization_of(overlay);
        assert_eq!(k.namespace, base.namespace, "{overlay}");
        assert_eq!(k.resources, ["../base", "daemonset.yaml"], "{overlay}");
        let daemon_set: DaemonSet = typed(&format!("{overlay}/daemonset.yaml"));
        let container = &daemon_set.spec.unwrap().template.spec.unwrap().containers[0];
        assert!(
            k.images
                .iter()
                .any(|i| i.name == container.image.clone().unwrap()
                    && i.new_name.starts_with("ghcr.io/netpol/")),
            "{overlay}: the DaemonSet's image is the one the kustomization sets"
        );
    }
}

#[test]
fn every_kustomization_resource_parses_into_its_typed_object() {
    let mut kinds = BTreeSet::new();
    for file in &resources() {
        let text = std::fs::read_to_string(config_dir().join(file)).unwrap();
        let head: Head = serde_saphyr::from_str(&text).unwrap();
        match head.kind.as_str() {
            "Namespace" => drop(typed::<Namespace>(file)),
            "ServiceAccount" => drop(typed::<ServiceAccount>(file)),
            "ClusterRole" => drop(typed::<ClusterRole>(file)),
            "ClusterRoleBinding" => drop(typed::<ClusterRoleBinding>(file)),
            "Role" => drop(typed::<Role>(file)),
            "RoleBinding" => drop(typed::<RoleBinding>(file)),
            "DaemonSet" => drop(typed::<DaemonSet>(file)),
            "Deployment" => drop(typed::<Deployment>(file)),
            "PodDisruptionBudget" => drop(typed::<PodDisruptionBudget>(file)),
            other => panic!("config/{file}: unexpected kind {other}"),
        }
        kinds.insert(head.kind);
    }
    let expected: BTreeSet<String> = [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "DaemonSet",
        "Deployment",
        "PodDisruptionBudget",
    ]
    .map(String::from)
    .into();
    assert_eq!(kinds, expected);
}

#[test]
fn every_yaml_file_in_config_is_listed_in_its_kustomization() {
    let listed: BTreeSet<String> = resources().into_iter().collect();
    for dir in KUSTOMIZATIONS {
        for entry in std::fs::read_dir(config_dir().join(dir)).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if name.ends_with(".yaml") && name != "kustomization.yaml" {
                let path = format!("{dir}/{name}");
                assert!(
                    listed.contains(&path),
                    "config/{path} is not in its kustomization.yaml"
                );
            }
        }
    }
    let top: Vec<String> = std::fs::read_dir(config_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !KUSTOMIZATIONS.contains(&n.as_str()))
        .collect();
    assert!(
        top.is_empty(),
        "config/ holds only the kustomizations: {top:?}"
    );
}

#[test]
fn cluster_role_grants_read_only_access_to_exactly_the_watched_kinds_and_creating_events() {
    let role: ClusterRole = typed("base/clusterrole.yaml");
    let mut granted = BTreeSet::new();
    let (events, rules): (Vec<_>, Vec<_>) = role
        .rules
        .unwrap()
        .into_iter()
        .partition(|r| r.resources.as_deref() == Some(&["events".to_owned()][..]));
    // The refusal reporter creates Events (core group), nothing more.
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].api_groups.as_deref(), Some(&[String::new()][..]));
    assert_eq!(events[0].verbs, ["create"]);
    for rule in rules {
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
        // Read in slice mode (`--source slices`): what `netpol controller` publishes.
        "netpolendpointslices.netpol.io",
    ]
    .into_iter()
    .chain(POLICY_RESOURCES)
    .map(String::from)
    .collect();
    assert_eq!(granted, expected);
}

/// The policy kinds' resources, as RBAC names them (`resource.group`).
const POLICY_RESOURCES: [&str; 6] = [
    "networkpolicies.networking.k8s.io",
    "adminnetworkpolicies.policy.networking.k8s.io",
    "baselineadminnetworkpolicies.policy.networking.k8s.io",
    "clusternetworkpolicies.policy.networking.k8s.io",
    "ciliumnetworkpolicies.cilium.io",
    "ciliumclusterwidenetworkpolicies.cilium.io",
];

#[test]
fn the_controller_reads_pods_and_policies_and_writes_only_slices_and_events() {
    let role: ClusterRole = typed("controller/clusterrole.yaml");
    let mut granted = BTreeSet::new();
    for rule in role.rules.unwrap() {
        assert!(rule.resource_names.is_none() && rule.non_resource_urls.is_none());
        for group in rule.api_groups.unwrap() {
            for resource in rule.resources.clone().unwrap() {
                for verb in &rule.verbs {
                    granted.insert(format!("{resource}.{group} {verb}"));
                }
            }
        }
    }
    let expected: BTreeSet<String> = [
        "pods. get",
        "pods. list",
        "pods. watch",
        "netpolendpointslices.netpol.io get",
        "netpolendpointslices.netpol.io list",
        "netpolendpointslices.netpol.io watch",
        "netpolendpointslices.netpol.io create",
        "netpolendpointslices.netpol.io update",
        "netpolendpointslices.netpol.io delete",
        // The refusal Events of slice mode: every policy kind read, Events only created.
        "events. create",
    ]
    .into_iter()
    .map(String::from)
    .chain(
        POLICY_RESOURCES
            .into_iter()
            .flat_map(|kind| ["get", "list", "watch"].map(|verb| format!("{kind} {verb}"))),
    )
    .collect();
    assert_eq!(granted, expected);
}

#[test]
fn the_refusal_lease_role_grants_only_its_lease() {
    let role: Role = typed("base/role.yaml");
    // (resources, resource names, verbs) of each rule.
    type Grant = (Vec<String>, Option<Vec<String>>, Vec<String>);
    let rules: Vec<Grant> = role
        .rules
        .unwrap()
        .into_iter()
        .map(|r| {
            assert_eq!(r.api_groups.unwrap(), ["coordination.k8s.io"]);
            (r.resources.unwrap(), r.resource_names, r.verbs)
        })
        .collect();
    let leases = || vec!["leases".to_owned()];
    assert_eq!(
        rules,
        [
            (leases(), None, vec!["create".to_owned()]),
            (
                leases(),
                Some(vec!["netpol-refusals".to_owned()]),
                vec!["get".to_owned(), "update".to_owned()]
            ),
        ]
    );
    let binding: RoleBinding = typed("base/rolebinding.yaml");
    assert_eq!(binding.role_ref.kind, "Role");
    assert_eq!(binding.role_ref.name, role.metadata.name.unwrap());
    let subjects = binding.subjects.unwrap();
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0].name, "netpol-agent");
}

#[test]
fn binding_ties_the_service_account_to_the_role() {
    let namespace = kustomization().namespace;
    let binding: ClusterRoleBinding = typed("base/clusterrolebinding.yaml");
    let account: ServiceAccount = typed("base/serviceaccount.yaml");
    let role: ClusterRole = typed("base/clusterrole.yaml");
    assert_eq!(binding.role_ref.kind, "ClusterRole");
    assert_eq!(Some(binding.role_ref.name), role.metadata.name);
    let subjects = binding.subjects.unwrap();
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0].kind, "ServiceAccount");
    assert_eq!(Some(&subjects[0].name), account.metadata.name.as_ref());
    assert_eq!(subjects[0].namespace.as_ref(), Some(&namespace));
}

/// What every agent DaemonSet needs, whichever OS: the ServiceAccount, the node's OS, the host
/// network, NODE_NAME, probes on the port it listens on, resource requests. Returns its pod spec.
fn agent_pod(file: &str, os: &str) -> PodSpec {
    let account: ServiceAccount = typed("base/serviceaccount.yaml");
    let daemon_set: DaemonSet = typed(file);
    let spec = daemon_set.spec.unwrap();
    let selector = spec.selector.match_labels.clone().unwrap();
    let labels = spec.template.metadata.clone().unwrap().labels.unwrap();
    assert!(
        selector.iter().all(|(k, v)| labels.get(k) == Some(v)),
        "{file}: the template carries the selector's labels"
    );
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.service_account_name, account.metadata.name);
    assert_eq!(
        pod.node_selector
            .clone()
            .unwrap()
            .get("kubernetes.io/os")
            .map(String::as_str),
        Some(os)
    );
    assert_eq!(pod.host_network, Some(true));

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
    pod
}

#[test]
fn daemon_set_runs_a_host_process_agent_on_windows_nodes() {
    let pod = agent_pod("windows/daemonset.yaml", "windows");
    let windows = pod.security_context.unwrap().windows_options.unwrap();
    assert_eq!(windows.host_process, Some(true));
    assert_eq!(
        windows.run_as_user_name.as_deref(),
        Some(r"NT AUTHORITY\SYSTEM")
    );
    let args = pod.containers[0].args.clone().unwrap();
    assert!(args.contains(&"--datapath=hcn".to_string()), "{args:?}");
}

#[test]
fn daemon_set_runs_an_nftables_agent_with_net_admin_alone_on_linux_nodes() {
    let pod = agent_pod("linux/daemonset.yaml", "linux");
    let container = &pod.containers[0];
    let args = container.args.clone().unwrap();
    assert!(
        args.contains(&"--datapath=nftables".to_string()),
        "{args:?}"
    );
    assert!(!args.iter().any(|a| a.contains("ignore-netfilter-bypass")));

    let security = container.security_context.clone().unwrap();
    let capabilities = security.capabilities.unwrap();
    assert_eq!(capabilities.add, Some(vec!["NET_ADMIN".to_string()]));
    assert_eq!(capabilities.drop, Some(vec!["ALL".to_string()]));
    assert_ne!(security.privileged, Some(true));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(security.read_only_root_filesystem, Some(true));

    // The image holds the binary where the DaemonSet runs it, and the tools it runs.
    let command = container.command.clone().unwrap();
    let dockerfile = std::fs::read_to_string(config_dir().join("linux/Dockerfile")).unwrap();
    assert!(
        dockerfile.contains(&format!(
            "COPY --from=build /src/target/dist/netpol {}",
            command[0]
        )),
        "{dockerfile}"
    );
    let install = dockerfile
        .lines()
        .find(|l| l.contains("apt-get install"))
        .expect("the image installs its tools");
    assert!(
        install.contains("nftables") && install.contains("iproute2"),
        "{install}"
    );

    // Cilium's node configuration, read by the start-up dataplane check, is mounted read-only.
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == "cilium-state")
        .expect("Cilium's state is mounted");
    assert_eq!(mount.read_only, Some(true));
    #[cfg(target_os = "linux")]
    assert!(netpol_nft::host::CILIUM_NODE_CONFIG.starts_with(&mount.mount_path));
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .unwrap();
    assert_eq!(
        volume.host_path.as_ref().map(|h| h.path.as_str()),
        Some(mount.mount_path.as_str())
    );
}

#[test]
fn the_two_daemon_sets_never_select_each_others_pods() {
    let windows: DaemonSet = typed("windows/daemonset.yaml");
    let linux: DaemonSet = typed("linux/daemonset.yaml");
    assert_ne!(windows.metadata.name, linux.metadata.name);
    let labels = |d: &DaemonSet| {
        d.spec
            .clone()
            .unwrap()
            .template
            .metadata
            .unwrap()
            .labels
            .unwrap()
    };
    let selects = |d: &DaemonSet, other: &DaemonSet| {
        let selector = d.spec.clone().unwrap().selector.match_labels.unwrap();
        let labels = labels(other);
        selector.iter().all(|(k, v)| labels.get(k) == Some(v))
    };
    assert!(!selects(&windows, &linux) && !selects(&linux, &windows));
}

#[test]
fn namespace_admits_privileged_pods() {
    let namespace: Namespace = typed("base/namespace.yaml");
    assert_eq!(namespace.metadata.name, Some(kustomization().namespace));
    let labels = namespace.metadata.labels.unwrap();
    assert_eq!(
        labels
            .get("pod-security.kubernetes.io/enforce")
            .map(String::as_str),
        Some("privileged")
    );
}
