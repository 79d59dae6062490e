//! Scenario files: the cluster objects the API server would hold and the connectivity that must
//! result (see docs/scenarios.md). Manifests (see [`manifests`]) load into the same
//! [`Scenario`], without expectations. Loading one yields a [`ClusterModel`] in engine terms and
//! the flows it expects, each already resolved to identities, so that evaluating a scenario cannot
//! fail half-way.

mod api;
mod cluster_model;
mod discover;
mod document;
mod error;
mod expect;
mod inventory;
mod lookup;
mod manifests;
mod objects;
mod prepared;
mod sides;
mod stand_ins;
mod stream;

use std::io::Read;
use std::path::{Path, PathBuf};

use netpol_engine::IdentityId;

pub use api::ReadRules;
pub use cluster_model::{ClusterModel, PodFacts};
pub use discover::{manifest_files, scenario_files};
pub use error::{LoadError, LoadErrors};
pub use expect::{parse_port, parse_protocol, Endpoint, Expected, FlowExpectation, PodRef};
pub use inventory::Inventory;
pub use manifests::{is_scenario_file, load_objects, STDIN};
pub use netpol_api::workloads::{Owner, Placement};
pub use objects::SourcedObject;
pub use prepared::{Origin, ReadOne, LINT_IGNORE_ANNOTATION};
pub use sides::{differ_in_policies_only, SideObjects};
pub use stand_ins::add_stand_ins;

use document::{read_yaml, ScenarioDocument};

/// A loaded scenario.
#[derive(Debug)]
pub struct Scenario {
    pub file: PathBuf,
    pub name: String,
    pub description: String,
    pub cluster: ClusterModel,
    pub flows: Vec<ExpectedFlow>,
    /// Things the user should know that do not make the scenario invalid, each naming its file
    /// and object, or the input as a whole.
    pub warnings: Vec<String>,
    /// What the input held.
    pub inventory: Inventory,
}

/// How strictly the user asked objects to be read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadFlags {
    /// Unknown policy fields are warnings, not errors.
    pub lenient: bool,
    /// Objects of kinds netpol does not read fail a manifests input.
    pub strict_kinds: bool,
    /// Where workloads' pods go (`--pod-cidr`, `--assign-nodes`).
    pub placement: Placement,
    /// The ClusterNetworkPolicy CRD channel the cluster serves.
    pub channel: netpol_api::CrdChannel,
}

/// An expectation with both of its endpoints resolved in the scenario's cluster.
#[derive(Clone, Debug)]
pub struct ExpectedFlow {
    pub expectation: FlowExpectation,
    pub src: IdentityId,
    pub dst: IdentityId,
}

impl Scenario {
    /// Loads a scenario file with its topology, validating every object and expectation. All
    /// problems found are returned, each naming the file, the object or expectation and the field.
    pub fn load(file: &Path, flags: ReadFlags) -> Result<Scenario, LoadErrors> {
        let document: ScenarioDocument = read_yaml(file)?;
        let topology = match &document.topology {
            Some(name) => objects::load_topology(file, name)?,
            None => Vec::new(),
        };
        let own = objects::sourced(file, document.objects);
        let read = |objects: Vec<SourcedObject>| objects.into_iter().map(ReadOne::of).collect();
        let built = api::build_cluster(
            read(topology),
            read(own),
            ReadRules::scenario(flags.lenient, flags.placement).in_channel(flags.channel),
        );
        let expectations = expect::parse_expectations(file, document.expect);
        let (built, expectations) = match (built, expectations) {
            (Ok(built), Ok(expectations)) => (built, expectations),
            (built, expectations) => {
                let errors = [built.err(), expectations.err()]
                    .into_iter()
                    .flatten()
                    .flat_map(|e| e.0)
                    .collect();
                return Err(LoadErrors(errors));
            }
        };

        let flows = resolve(file, &built.cluster, expectations)?;
        Ok(Scenario {
            file: file.to_owned(),
            name: document.name,
            description: document.description,
            cluster: built.cluster,
            flows,
            warnings: built.warnings,
            inventory: built.inventory,
        })
    }
}

/// What a command reads its cluster from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A scenario file (with its topology).
    Scenario(PathBuf),
    /// Manifest files, folders and `-` for stdin.
    Manifests(Vec<PathBuf>),
    /// The live cluster (`--cluster`), with manifests applied on top.
    Live(crate::live::args::Live),
}

impl Input {
    /// A path given alone: manifests when it is a folder, `-` or a file of Kubernetes objects,
    /// otherwise a scenario file.
    pub fn detect(path: &Path) -> Input {
        if is_scenario_file(path) {
            Input::Scenario(path.to_owned())
        } else {
            Input::Manifests(vec![path.to_owned()])
        }
    }
}

impl Scenario {
    /// A cluster of the objects in manifests, without expectations. As with `kubectl apply`, an
    /// object given twice (same kind, namespace and name) is the last one given. Its `file` and
    /// `name` are the paths, joined, so that messages name them.
    pub fn from_manifests(
        paths: &[PathBuf],
        stdin: &mut dyn Read,
        flags: ReadFlags,
    ) -> Result<Scenario, LoadErrors> {
        let objects = manifests::load_objects(paths, stdin)?;
        let rules = ReadRules::manifests(flags.lenient, flags.strict_kinds, flags.placement)
            .in_channel(flags.channel);
        let built = api::build_cluster(Vec::new(), objects, rules)?;
        let label = paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        Ok(Scenario {
            file: PathBuf::from(&label),
            name: label,
            description: String::new(),
            cluster: built.cluster,
            flows: Vec::new(),
            warnings: built.warnings,
            inventory: built.inventory,
        })
    }
}

impl Scenario {
    /// A cluster of `base` (the live cluster's objects) with `own` applied on top (same kind,
    /// namespace and name replaces), read as manifests are, named `name` in messages.
    pub fn from_objects(
        name: &str,
        base: Vec<ReadOne>,
        own: Vec<ReadOne>,
        flags: ReadFlags,
    ) -> Result<Scenario, LoadErrors> {
        let rules = ReadRules::manifests(flags.lenient, flags.strict_kinds, flags.placement)
            .in_channel(flags.channel);
        let built = api::build_cluster(base, own, rules)?;
        Ok(Scenario {
            file: PathBuf::from(name),
            name: name.to_owned(),
            description: String::new(),
            cluster: built.cluster,
            flows: Vec::new(),
            warnings: built.warnings,
            inventory: built.inventory,
        })
    }
}

impl Scenario {
    /// The two scenarios of `base` with each side's deletions and own objects applied, named
    /// `names` in messages, read as manifests are: when the sides [`differ_in_policies_only`],
    /// the base is read once and both clusters share its pods, namespaces and nodes (see
    /// `sides.rs`); each is what [`Scenario::from_objects`] would build.
    pub fn from_sides(
        base: Vec<ReadOne>,
        sides: [SideObjects; 2],
        names: [String; 2],
        flags: ReadFlags,
    ) -> [Result<Scenario, LoadErrors>; 2] {
        let rules = ReadRules::manifests(flags.lenient, flags.strict_kinds, flags.placement)
            .in_channel(flags.channel);
        let [before, after] = sides::build_sides(base, sides, rules);
        let [before_name, after_name] = names;
        let scenario = |built: Result<api::Built, LoadErrors>, name: String| {
            let built = built?;
            Ok(Scenario {
                file: PathBuf::from(&name),
                name,
                description: String::new(),
                cluster: built.cluster,
                flows: Vec::new(),
                warnings: built.warnings,
                inventory: built.inventory,
            })
        };
        [scenario(before, before_name), scenario(after, after_name)]
    }
}

/// Resolves the endpoints of every expectation in `cluster`, reporting each unknown endpoint once
/// per expectation item (a pod missing from a matrix header would otherwise be reported once per
/// cell).
fn resolve(
    file: &Path,
    cluster: &ClusterModel,
    expectations: Vec<FlowExpectation>,
) -> Result<Vec<ExpectedFlow>, LoadErrors> {
    let mut flows = Vec::with_capacity(expectations.len());
    let mut problems: Vec<(String, String)> = Vec::new();
    for expectation in expectations {
        match cluster.flow_identities(&expectation.from, &expectation.to) {
            Ok((src, dst)) => flows.push(ExpectedFlow {
                expectation,
                src,
                dst,
            }),
            Err(message) => {
                let problem = (expectation.field, message);
                if !problems.contains(&problem) {
                    problems.push(problem);
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(flows)
    } else {
        Err(LoadErrors(
            problems
                .into_iter()
                .map(|(field, message)| LoadError::expectation(file, field, message))
                .collect(),
        ))
    }
}
