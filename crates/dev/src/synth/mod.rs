//! `netpol-dev synth`: writes a synthetic cluster as YAML or JSON files, for scale benchmarks and for
//! trying the agent on a cluster of any size and shape.
//!
//! The shape follows what platform teams run: namespaces of one to four apps (web, api, db,
//! cache tiers), about a hundred pods per node, and the policies of `policies.rs`. Which
//! controllers make the pods (`--workloads`, see `workloads.rs`) decides how many distinct label
//! sets, and so security identities, there are; `--format` writes the files as one `kind: List`
//! for the pods (`kubectl get pods -A -o yaml`), as `---`-separated documents, or as kubectl's
//! JSON lists. Output is deterministic for given arguments.

mod emit;
pub mod engine_terms;
mod policies;
mod workloads;

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

pub use emit::Format;
pub use workloads::Workloads;

use emit::ObjectStream;

#[derive(Clone, Debug, clap::Args)]
pub struct Args {
    /// Pods, spread round-robin over namespaces and nodes.
    #[arg(long, default_value_t = 10_000)]
    pub pods: usize,
    /// Namespaces (default: one per 20 pods).
    #[arg(long)]
    pub namespaces: Option<usize>,
    /// Nodes (default: one per 100 pods).
    #[arg(long)]
    pub nodes: Option<usize>,
    /// Which controllers make the pods, which decides how many distinct label sets there are.
    #[arg(long, value_enum, default_value_t = Workloads::Deployments)]
    pub workloads: Workloads,
    /// How the files are written: pods as one `kind: List` and the rest as YAML documents, every
    /// file as `---`-separated YAML documents, or every file as a JSON `kind: List`.
    #[arg(long, value_enum, default_value_t = Format::List)]
    pub format: Format,
    /// The folder to write; created if missing, its cluster files replaced.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// The labels of namespace `ns-{ns}`: its name, its team (twenty teams) and its environment
/// (every third namespace `prod`). The files and the engine-terms cluster share them.
pub fn namespace_labels(ns: usize) -> [(&'static str, String); 3] {
    let env = if ns.is_multiple_of(3) { "prod" } else { "dev" };
    [
        ("kubernetes.io/metadata.name", format!("ns-{ns}")),
        ("team", format!("team-{}", ns % 20)),
        ("env", env.to_string()),
    ]
}

/// The sizes of a synthetic cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    pub pods: usize,
    pub namespaces: usize,
    pub nodes: usize,
}

impl Sizes {
    /// The usual proportions: 20 pods per namespace, 100 per node.
    pub fn for_pods(pods: usize) -> Sizes {
        Sizes {
            pods,
            namespaces: pods.div_ceil(20).max(1),
            nodes: pods.div_ceil(100).max(1),
        }
    }
}

/// A synthetic cluster: its sizes, its controllers and the form of its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cluster {
    pub sizes: Sizes,
    pub workloads: Workloads,
    pub format: Format,
}

/// What was written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub pods: usize,
    pub namespaces: usize,
    pub nodes: usize,
    pub policies: usize,
}

pub fn run(args: &Args, out: &mut dyn Write) -> anyhow::Result<()> {
    let default = Sizes::for_pods(args.pods);
    let cluster = Cluster {
        sizes: Sizes {
            pods: args.pods,
            namespaces: args.namespaces.unwrap_or(default.namespaces).max(1),
            nodes: args.nodes.unwrap_or(default.nodes).max(1),
        },
        workloads: args.workloads,
        format: args.format,
    };
    let written = write_cluster(&cluster, &args.out)?;
    writeln!(
        out,
        "wrote {} pods, {} namespaces, {} nodes, {} policies to {}",
        written.pods,
        written.namespaces,
        written.nodes,
        written.policies,
        args.out.display()
    )?;
    Ok(())
}

/// The files of a cluster, by their name without extension.
const FILES: [&str; 5] = ["namespaces", "nodes", "pods", "networkpolicies", "admin"];

/// Writes the cluster's files into `dir`, replacing those of an earlier run in any form.
pub fn write_cluster(cluster: &Cluster, dir: &Path) -> io::Result<Written> {
    fs::create_dir_all(dir)?;
    for name in FILES {
        for extension in ["yaml", "json"] {
            match fs::remove_file(dir.join(format!("{name}.{extension}"))) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
    }
    let sizes = &cluster.sizes;
    // Only the pods are one list in the default form, as `kubectl get pods -A -o yaml` gives them.
    let others = match cluster.format {
        Format::List => Format::Multidoc,
        format => format,
    };
    let mut written = Written {
        namespaces: sizes.namespaces + 1,
        nodes: sizes.nodes,
        ..Written::default()
    };
    write_file(dir, "namespaces", others, |out| {
        policies::namespaces(sizes, out)
    })?;
    write_file(dir, "nodes", others, |out| policies::nodes(sizes, out))?;
    write_file(dir, "pods", cluster.format, |out| {
        for i in 0..sizes.pods {
            out.push(&workloads::pod(cluster.workloads, sizes, i))?;
        }
        for m in 0..2 {
            out.push(&workloads::prometheus(sizes, m))?;
        }
        written.pods = sizes.pods + 2;
        Ok(())
    })?;
    write_file(dir, "networkpolicies", others, |out| {
        written.policies += policies::network_policies(sizes, out)?;
        Ok(())
    })?;
    write_file(dir, "admin", others, |out| {
        written.policies += policies::admin_policies(out)?;
        Ok(())
    })?;
    Ok(written)
}

/// Writes one file through a temporary file renamed into place, so a reader never sees half a
/// file.
fn write_file(
    dir: &Path,
    name: &str,
    format: Format,
    body: impl FnOnce(&mut ObjectStream) -> io::Result<()>,
) -> io::Result<()> {
    let path = dir.join(format!("{name}.{}", format.extension()));
    let partial = dir.join(format!("{name}.partial"));
    let mut w = BufWriter::new(fs::File::create(&partial)?);
    let mut stream = ObjectStream::new(&mut w, format)?;
    body(&mut stream)?;
    stream.finish()?;
    w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    fs::rename(partial, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netpol_api::{parse_yaml, Object};

    fn objects(dir: &Path) -> Vec<Object> {
        let mut out = Vec::new();
        for entry in fs::read_dir(dir).unwrap() {
            let text = fs::read_to_string(entry.unwrap().path()).unwrap();
            for object in parse_yaml(&text).unwrap() {
                out.push(object.unwrap());
            }
        }
        out.sort_by_key(Object::object_ref);
        out
    }

    /// An empty folder of the test's own. One left by an earlier run whose process had the same
    /// id (a CI container's ids repeat from run to run) would hold files this run did not write.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("netpol-synth-{name}-{}", std::process::id()));
        match fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => panic!("{}: {e}", dir.display()),
            _ => dir,
        }
    }

    #[test]
    fn every_object_written_is_valid_and_counted() {
        let dir = scratch("valid");
        for workloads in [Workloads::Deployments, Workloads::Mixed] {
            let cluster = Cluster {
                sizes: Sizes::for_pods(400),
                workloads,
                format: Format::List,
            };
            let written = write_cluster(&cluster, &dir).unwrap();
            let objects = objects(&dir);
            let count = |kind: &str| objects.iter().filter(|o| o.kind() == kind).count();
            assert_eq!(count("Pod"), written.pods);
            assert_eq!(count("Namespace"), written.namespaces);
            assert_eq!(count("Node"), written.nodes);
            let policies = count("NetworkPolicy")
                + count("AdminNetworkPolicy")
                + count("BaselineAdminNetworkPolicy");
            assert_eq!(policies, written.policies);
            assert_eq!(
                (written.pods, written.namespaces, written.nodes),
                (402, 21, 4)
            );
            let mut entries = 0;
            for object in &objects {
                let translation = netpol_api::translate(object);
                assert!(translation.errors.is_empty(), "{:?}", translation.errors);
                assert!(
                    translation.warnings.is_empty(),
                    "{:?}",
                    translation.warnings
                );
                entries += translation.entries.len();
            }
            assert!(entries >= written.policies, "every policy yields entries");
        }
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn every_format_holds_the_same_objects_and_replaces_the_others() {
        let dir = scratch("formats");
        let mut read = Vec::new();
        for format in [Format::List, Format::Multidoc, Format::Json] {
            let cluster = Cluster {
                sizes: Sizes::for_pods(300),
                workloads: Workloads::Mixed,
                format,
            };
            write_cluster(&cluster, &dir).unwrap();
            let mut files: Vec<_> = fs::read_dir(&dir)
                .unwrap()
                .map(|entry| entry.unwrap().file_name())
                .collect();
            files.sort();
            assert_eq!(
                files.len(),
                FILES.len(),
                "{format:?}: earlier forms are removed: {files:?}"
            );
            let pods =
                fs::read_to_string(dir.join(format!("pods.{}", format.extension()))).unwrap();
            let expected_start = match format {
                Format::List => "apiVersion: v1\nitems:\n- apiVersion: v1\n",
                Format::Multidoc => "---\napiVersion: v1\nkind: Pod\n",
                Format::Json => "{\n    \"apiVersion\": \"v1\",\n    \"items\": [\n",
            };
            assert!(
                pods.starts_with(expected_start),
                "{format:?}: {}",
                &pods[..80]
            );
            read.push(objects(&dir));
        }
        assert_eq!(read[0].iter().filter(|o| o.kind() == "Pod").count(), 302);
        assert_eq!(read[0], read[1]);
        assert_eq!(read[0], read[2]);
        fs::remove_dir_all(dir).unwrap();
    }
}
