//! The adapter between input objects and the API layer: the one module that reads Kubernetes
//! objects with netpol-api and turns them into the identities and policy entries of a
//! [`ClusterModel`], by the [`ReadRules`] of the input (scenario files are tests and refuse what they
//! cannot use; manifests are a real app's folder and skip what netpol does not read).

use std::collections::BTreeMap;
use std::ops::Range;

use netpol_api::cluster::{
    namespace_labels, namespace_name_labels, node_identities, pod_identities,
};
use netpol_api::{translate_for, CrdChannel, Diagnostic, Object, ObjectRef, Pod, ReadObject};
use netpol_engine::{Identity, IdentityKind, LabelInterner, SharedLabels};

use super::cluster_model::{ClusterModel, PodFacts};
use super::error::{LoadError, LoadErrors};
use super::expect::PodRef;
use super::inventory::Inventory;
use super::objects::overlay;
use super::prepared::{Content, Origin, ReadOne};
use netpol_api::workloads::{placed_pod, runs, Owner, Placement, TemplatePod};

/// How the objects of an input are read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadRules {
    /// A policy field its kind does not have is a warning, not an error (`--lenient`).
    pub lenient_fields: bool,
    /// An object of a kind netpol does not read is an error, not skipped and counted.
    pub strict_kinds: bool,
    /// A policy using a feature netpol does not implement (L7, FQDN) is skipped with a warning,
    /// as the agent skips it, rather than failing the input.
    pub skip_unsupported: bool,
    /// Workloads' pod templates give pods.
    pub workload_pods: bool,
    /// What the input is called in messages.
    pub input_name: &'static str,
    /// Where workloads' pods go (`--pod-cidr`, `--assign-nodes`).
    pub placement: Placement,
    /// The ClusterNetworkPolicy CRD channel objects are checked against (`--crd-channel`).
    pub channel: CrdChannel,
}

impl ReadRules {
    /// A scenario file is a test (docs/scenarios.md): anything it holds that cannot be used
    /// fails it; workloads give pods, as everywhere.
    pub fn scenario(lenient_fields: bool, placement: Placement) -> Self {
        ReadRules {
            lenient_fields,
            strict_kinds: true,
            skip_unsupported: false,
            workload_pods: true,
            input_name: "the scenario",
            placement,
            channel: CrdChannel::default(),
        }
    }

    /// Manifests are what a repository or `helm template` holds: other kinds are skipped and
    /// counted, workloads give pods, a policy netpol cannot enforce is skipped alone.
    pub fn manifests(lenient_fields: bool, strict_kinds: bool, placement: Placement) -> Self {
        ReadRules {
            lenient_fields,
            strict_kinds,
            skip_unsupported: true,
            workload_pods: true,
            input_name: "the manifests",
            placement,
            channel: CrdChannel::default(),
        }
    }

    /// The same rules, checking ClusterNetworkPolicies against `channel`'s CRD.
    pub fn in_channel(self, channel: CrdChannel) -> Self {
        ReadRules { channel, ..self }
    }
}

/// A cluster built from objects, the warnings reading raised (each naming its file and object,
/// or the input as a whole), and what the input held.
pub struct Built {
    pub cluster: ClusterModel,
    pub warnings: Vec<String>,
    pub inventory: Inventory,
}

/// A validated object, where it was written, its position among the objects read with it,
/// and (a pod) the workload it belongs to.
pub(super) struct Placed {
    pub origin: Origin,
    pub position: usize,
    pub object: Box<ReadObject>,
    pub owner: Option<Owner>,
}

impl Placed {
    /// The object's kind, namespace and name: an object replaces another with the same.
    pub fn key(&self) -> ObjectRef {
        self.object.object.object_ref()
    }

    /// Whether the object is a policy (not a pod, node or namespace).
    pub fn is_policy(&self) -> bool {
        is_policy(&self.object.object)
    }
}

/// Whether an object is a policy (not a pod, node or namespace).
pub(super) fn is_policy(object: &Object) -> bool {
    !matches!(
        object,
        Object::Pod(_) | Object::Node(_) | Object::Namespace(_)
    )
}

/// What reading turned up, before the cluster is built from it.
#[derive(Default)]
pub(super) struct Reading {
    pub errors: Vec<LoadError>,
    pub warnings: Vec<String>,
    pub inventory: Inventory,
    pub templates: Vec<(Origin, TemplatePod)>,
}

impl Reading {
    /// The same problems, warnings and counts (workloads set aside are not copied).
    pub fn copy(&self) -> Reading {
        Reading {
            errors: self.errors.clone(),
            warnings: self.warnings.clone(),
            inventory: self.inventory.clone(),
            templates: Vec::new(),
        }
    }
}

/// A policy's entries as translated, and whether translating it failed (its errors are in the
/// reading; the entries are added all the same, as the input fails anyway).
pub(super) struct Translated {
    pub entries: Vec<netpol_engine::PolicyEntry>,
    pub failed: bool,
}

/// The namespaces' labels by name, for the pods of a namespace given or not.
pub(super) struct NamespaceLabels(BTreeMap<String, SharedLabels>);

impl NamespaceLabels {
    pub fn of<'a>(objects: impl IntoIterator<Item = &'a Placed>) -> NamespaceLabels {
        NamespaceLabels(
            objects
                .into_iter()
                .filter_map(|p| match &p.object.object {
                    Object::Namespace(ns) => Some((p.key().name, namespace_labels(ns).into())),
                    _ => None,
                })
                .collect(),
        )
    }

    pub fn get(&self, namespace: &str) -> SharedLabels {
        self.0
            .get(namespace)
            .cloned()
            .unwrap_or_else(|| namespace_name_labels(namespace).into())
    }
}

/// Adds the pods and nodes of `objects` (namespaces need nothing more), then the pods of the
/// workloads `reading` set aside that no pod of `objects` runs.
pub(super) fn add_pods_and_nodes(
    cluster: &mut ClusterModel,
    objects: impl IntoIterator<Item = Placed>,
    namespaces: &NamespaceLabels,
    reading: &mut Reading,
    placement: &Placement,
) {
    // The labels of running pods, to tell which workloads already run: kept only where there
    // are workloads (at 150,000 pods a copy of every pod's labels is 80 MB).
    let mut running: Vec<(String, BTreeMap<String, String>)> = Vec::new();
    let workloads = !reading.templates.is_empty();
    // One copy of each distinct pod label set (the replicas of a workload share theirs).
    let mut labels = LabelInterner::default();
    for placed in objects {
        let object_ref = placed.key();
        match &placed.object.object {
            Object::Pod(pod) => {
                let pod_ref = pod_ref(&object_ref);
                let mut identities = pod_identities(pod, &namespaces.get(&pod_ref.namespace));
                share_labels(&mut identities, &mut labels);
                let facts = PodFacts {
                    owner: placed.owner,
                    derived: false,
                    unaddressed: identities.is_empty().then(|| unaddressed(pod)),
                    stand_in: false,
                };
                if workloads {
                    running.push((
                        pod_ref.namespace.clone(),
                        pod.metadata.labels.clone().unwrap_or_default(),
                    ));
                }
                cluster.set_facts(pod_ref.clone(), facts);
                cluster.add_pod(pod_ref, identities);
            }
            Object::Node(node) => cluster.add_node(object_ref.name, node_identities(node)),
            _ => {}
        }
    }
    add_template_pods(
        cluster,
        reading,
        &running,
        &|ns| namespaces.get(ns),
        placement,
    );
}

/// Translates a policy, counting it and reporting its errors and warnings in `reading`; `None`
/// where it is skipped (it uses only features netpol does not implement, and `rules` skip
/// those, as the agent does).
pub(super) fn translate_policy(
    placed: &Placed,
    rules: &ReadRules,
    reading: &mut Reading,
) -> Option<Translated> {
    reading.inventory.policies += 1;
    let translation = translate_for(&placed.object.object, rules.channel);
    let source = &placed.origin;
    let unsupported_only =
        !translation.errors.is_empty() && translation.errors.iter().all(Diagnostic::is_unsupported);
    if rules.skip_unsupported && unsupported_only {
        // As the agent does: the object alone is refused, the others are enforced.
        reading.inventory.skipped_policies += 1;
        reading.warnings.extend(
            translation
                .errors
                .into_iter()
                .map(|e| format!("{}; the policy is skipped", object_error(source, e))),
        );
        return None;
    }
    let failed = !translation.errors.is_empty();
    reading.errors.extend(
        translation
            .errors
            .into_iter()
            .map(|e| object_error(source, e)),
    );
    // A warning reads like an error (file, object, field) but fails nothing.
    reading.warnings.extend(
        translation
            .warnings
            .into_iter()
            .map(|w| object_error(source, w).to_string()),
    );
    Some(Translated {
        entries: translation.entries,
        failed,
    })
}

/// Reads the objects of a topology and of a scenario (or of manifests), lets the latter replace
/// the former with the same kind, namespace and name, and builds their cluster. Every object
/// that fails validation or translation is reported; one bad object fails the input, which
/// would otherwise decide flows on a cluster missing it. Objects are consumed as the cluster is
/// built, so that each is held once at most.
pub fn build_cluster(
    topology: Vec<ReadOne>,
    own: Vec<ReadOne>,
    rules: ReadRules,
) -> Result<Built, LoadErrors> {
    let mut reading = Reading::default();
    let topology = read(topology, &rules, &mut reading);
    let own = read(own, &rules, &mut reading);
    let objects = overlay(topology, own, Placed::key);
    let namespaces = NamespaceLabels::of(&objects);
    let mut cluster = ClusterModel::new();
    cluster.set_input_name(rules.input_name);
    let mut policies: Vec<(Origin, ObjectRef, Range<usize>)> = Vec::new();
    let (policy_objects, others): (Vec<Placed>, Vec<Placed>) =
        objects.into_iter().partition(Placed::is_policy);
    // Pods first, then policies: the identities policies' prefixes add come after the pods',
    // whatever the order of the input (no decision depends on identity numbers).
    let mut templates = Reading {
        templates: std::mem::take(&mut reading.templates),
        ..Reading::default()
    };
    add_pods_and_nodes(
        &mut cluster,
        others,
        &namespaces,
        &mut templates,
        &rules.placement,
    );
    for placed in policy_objects {
        let Some(translated) = translate_policy(&placed, &rules, &mut reading) else {
            continue;
        };
        let start = cluster.entries().len();
        cluster.add_entries(translated.entries);
        if !translated.failed {
            let entries = start..cluster.entries().len();
            let object_ref = placed.key();
            policies.push((placed.origin, object_ref, entries));
        }
    }
    finish(cluster, reading, templates, &policies, &rules)
}

/// The built cluster, or every error reading it raised: the reading's warnings and errors, then
/// those of the workloads' pods (`templates`), then what the input lacks.
pub(super) fn finish(
    mut cluster: ClusterModel,
    mut reading: Reading,
    templates: Reading,
    policies: &[(Origin, ObjectRef, Range<usize>)],
    rules: &ReadRules,
) -> Result<Built, LoadErrors> {
    reading.errors.extend(templates.errors);
    reading.warnings.extend(templates.warnings);
    reading.inventory.derived_pods += templates.inventory.derived_pods;
    reading.inventory.running_workloads += templates.inventory.running_workloads;
    reading.inventory.count(&cluster);
    for (origin, object, _) in policies {
        let name = match &object.namespace {
            Some(ns) => format!("{} {ns}/{}", object.kind, object.name),
            None => format!("{} {}", object.kind, object.name),
        };
        cluster.set_policy_origin(name, origin.clone());
    }
    reading.warnings.extend(
        reading
            .inventory
            .warnings(&cluster, policies, rules.input_name),
    );
    if reading.errors.is_empty() {
        Ok(Built {
            cluster,
            warnings: reading.warnings,
            inventory: reading.inventory,
        })
    } else {
        Err(LoadErrors(reading.errors))
    }
}

/// Reads each object, reporting those that fail validation, and sets aside workloads and the
/// kinds netpol does not read, as `rules` say.
pub(super) fn read(sources: Vec<ReadOne>, rules: &ReadRules, reading: &mut Reading) -> Vec<Placed> {
    let mut placed = Vec::new();
    for (position, ReadOne { origin, content }) in sources.into_iter().enumerate() {
        let (read, owner) = match content {
            Content::Workload { template, .. } if rules.workload_pods => {
                match template {
                    Ok(template) => reading.templates.push((origin, template)),
                    Err((field, message)) => reading.errors.push(LoadError::Object {
                        file: origin.file(),
                        object: origin.describe(),
                        field,
                        message,
                    }),
                }
                continue;
            }
            Content::Workload { refused, .. } | Content::Other { refused, .. }
                if rules.strict_kinds =>
            {
                (Err(Box::new(refused)), None)
            }
            Content::Workload { refused, .. } => {
                let kind = refused.object.kind;
                *reading.inventory.skipped_kinds.entry(kind).or_default() += 1;
                continue;
            }
            Content::Other { kind, .. } => {
                *reading.inventory.skipped_kinds.entry(kind).or_default() += 1;
                continue;
            }
            Content::Object { read, owner } => (read, owner),
        };
        match read {
            Ok(mut read) => {
                let unknown = std::mem::take(&mut read.unknown_fields)
                    .into_iter()
                    .map(|d| object_error(&origin, d));
                if rules.lenient_fields {
                    reading
                        .warnings
                        .extend(unknown.map(|e| format!("{e} (read anyway: --lenient)")));
                } else {
                    let before = reading.errors.len();
                    reading.errors.extend(unknown);
                    if reading.errors.len() > before {
                        continue;
                    }
                }
                placed.push(Placed {
                    origin,
                    position,
                    object: read,
                    owner,
                });
            }
            Err(e) => reading.errors.push(object_error(&origin, *e)),
        }
    }
    placed
}

/// Adds the pod of every workload that no running pod of the input belongs to, each placed by
/// `placement` (the same address and node the agent gives it) at an address no pod or node has,
/// on a node of `--assign-nodes`, else of the input, else on [`STAND_IN_NODE`].
fn add_template_pods(
    cluster: &mut ClusterModel,
    reading: &mut Reading,
    running: &[(String, BTreeMap<String, String>)],
    labels_of: &dyn Fn(&str) -> SharedLabels,
    placement: &Placement,
) {
    let templates: Vec<(Origin, TemplatePod)> = std::mem::take(&mut reading.templates)
        .into_iter()
        .filter(|(_, template)| {
            let runs = running
                .iter()
                .any(|(ns, labels)| runs(template, ns, labels));
            reading.inventory.running_workloads += usize::from(runs);
            !runs
        })
        .collect();
    if templates.is_empty() {
        return;
    }
    let mut placement = placement.clone();
    for identity in cluster.pods().flat_map(|(_, ids)| ids) {
        placement.reserve(identity.prefix.addr());
    }
    for identity in cluster.nodes().flat_map(|(_, ids)| ids) {
        placement.reserve(identity.prefix.addr());
    }
    let mut nodes = placement.nodes.clone();
    if nodes.is_empty() {
        nodes = cluster.nodes().map(|(name, _)| name.to_owned()).collect();
    }
    if nodes.is_empty() {
        if let Some(node) = stand_in_node(&placement) {
            cluster.add_node(STAND_IN_NODE, node);
            nodes.push(STAND_IN_NODE.to_owned());
        }
    }
    for (origin, template) in templates {
        let Some(address) = placement.address(&template.namespace, &template.owner.name) else {
            reading.warnings.push(format!(
                "{}: {}: no address left in {} (--pod-cidr) for its pod",
                origin.file.display(),
                origin.describe(),
                placement.pod_cidr
            ));
            continue;
        };
        let node = Placement::node_among(&nodes, &template.namespace, &template.owner.name);
        let value = placed_pod(template.pod.clone(), address, node);
        let pod = match Object::from_value(value) {
            Ok(Object::Pod(pod)) => pod,
            Ok(_) => continue,
            Err(e) => {
                // The pod's fields are the template's: name them where the user wrote them.
                let field = format!("{}.{}", template.template_path, e.field);
                reading.errors.push(LoadError::Object {
                    file: origin.file(),
                    object: origin.describe(),
                    field,
                    message: e.message,
                });
                continue;
            }
        };
        let mut pod_ref = PodRef {
            namespace: template.namespace.clone(),
            name: template.owner.name.clone(),
        };
        if cluster.has_pod(&pod_ref) {
            pod_ref.name = format!("{}-{}", pod_ref.name, template.owner.kind.to_lowercase());
        }
        let identities = pod_identities(&pod, &labels_of(&pod_ref.namespace));
        cluster.set_facts(
            pod_ref.clone(),
            PodFacts {
                owner: Some(template.owner.clone()),
                derived: true,
                unaddressed: identities.is_empty().then(|| unaddressed(&pod)),
                stand_in: false,
            },
        );
        cluster.add_pod(pod_ref, identities);
        reading.inventory.derived_pods += 1;
    }
}

/// The node template pods run on when neither `--assign-nodes` nor the input names one.
pub const STAND_IN_NODE: &str = "assigned-node";

/// The identities of [`STAND_IN_NODE`]: the pod network's first host (where a bridge CNI's
/// gateway, the source of the node's probes, is), which no pod is given.
fn stand_in_node(placement: &Placement) -> Option<Vec<Identity>> {
    let address = placement.pod_cidr.hosts().next()?;
    let node = serde_json::json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": STAND_IN_NODE},
        "status": {"addresses": [{"type": "InternalIP", "address": address.to_string()}]},
    });
    match Object::from_value(node) {
        Ok(Object::Node(node)) => Some(node_identities(&node)),
        _ => None,
    }
}

/// Makes the pod identities' label sets the interner's shared copies.
fn share_labels(identities: &mut [Identity], interner: &mut LabelInterner) {
    for identity in identities {
        if let IdentityKind::Pod(info) = &mut identity.kind {
            info.labels = interner.intern(info.labels.clone());
        }
    }
}

/// Why a pod that has been read has no address to take part in flows.
fn unaddressed(pod: &Pod) -> String {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let ip = status.and_then(|s| s.pod_ip.clone());
    let phase = status.and_then(|s| s.phase.clone()).unwrap_or_default();
    if spec.and_then(|s| s.host_network).unwrap_or(false) {
        let node = spec
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("its node");
        let address = ip.map(|ip| format!(" {ip}")).unwrap_or_default();
        format!(
            "uses the host network (spec.hostNetwork): its address{address} is {node}'s, and \
             no pod policy applies to it; name the node's address instead"
        )
    } else if matches!(phase.as_str(), "Succeeded" | "Failed") {
        let address = ip.map(|ip| format!(" {ip}")).unwrap_or_default();
        format!(
            "has finished (status.phase {phase}): its address{address} may already belong to \
             another pod, so it takes part in no flow"
        )
    } else {
        "has no address (status.podIP): it is not running yet".to_owned()
    }
}

fn pod_ref(object: &ObjectRef) -> PodRef {
    PodRef {
        namespace: object.namespace.clone().unwrap_or_default(),
        name: object.name.clone(),
    }
}

fn object_error(origin: &Origin, diagnostic: Diagnostic) -> LoadError {
    LoadError::Object {
        file: origin.file(),
        object: origin.describe(),
        field: diagnostic.field,
        message: diagnostic.message,
    }
}
