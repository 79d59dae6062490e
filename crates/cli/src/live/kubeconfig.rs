//! Which cluster `--cluster` reads, found as kubectl finds it:
//!
//! 1. `--kubeconfig FILE`: that file alone (it must exist);
//! 2. else `KUBECONFIG`: its files (`:`-separated, `;` on Windows), merged in order, the first
//!    to set a value winning; files that do not exist are skipped;
//! 3. else `~/.kube/config`, if it exists;
//! 4. else the in-cluster configuration (`KUBERNETES_SERVICE_HOST` and `_PORT`, the service
//!    account's token and CA), when run in a pod.
//!
//! `--context NAME` picks a context of the kubeconfig instead of its `current-context`.
//! The order is decided by [`resolve`] on an [`Environment`], so that it can be tested without
//! touching the process's environment.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};

/// What the resolution looks at.
#[derive(Clone, Debug, Default)]
pub struct Environment {
    /// `KUBECONFIG`, as set.
    pub kubeconfig: Option<OsString>,
    /// The home folder (`HOME`, or `USERPROFILE` on Windows).
    pub home: Option<PathBuf>,
    /// `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT` are both set (run in a pod).
    pub in_cluster: bool,
}

impl Environment {
    /// This process's environment.
    pub fn current() -> Environment {
        let home = std::env::var_os("HOME")
            .or_else(|| {
                if cfg!(windows) {
                    std::env::var_os("USERPROFILE")
                } else {
                    None
                }
            })
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
        Environment {
            kubeconfig: std::env::var_os("KUBECONFIG"),
            home,
            in_cluster: set("KUBERNETES_SERVICE_HOST") && set("KUBERNETES_SERVICE_PORT"),
        }
    }
}

/// Where the configuration comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `--kubeconfig FILE`.
    Flag(PathBuf),
    /// The existing files of `KUBECONFIG`, in order.
    Env(Vec<PathBuf>),
    /// `~/.kube/config`.
    Default(PathBuf),
    /// The pod's service account.
    InCluster,
}

/// Decides where the configuration comes from, in kubectl's order; `exists` says whether a file
/// is there.
pub fn resolve(
    flag: Option<&Path>,
    env: &Environment,
    exists: &dyn Fn(&Path) -> bool,
) -> Result<Source, String> {
    if let Some(file) = flag {
        return if exists(file) {
            Ok(Source::Flag(file.to_owned()))
        } else {
            Err(format!("--kubeconfig {}: no such file", file.display()))
        };
    }
    if let Some(list) = env.kubeconfig.as_ref().filter(|l| !l.is_empty()) {
        let files: Vec<PathBuf> = std::env::split_paths(list)
            .filter(|p| !p.as_os_str().is_empty() && exists(p))
            .collect();
        if !files.is_empty() {
            return Ok(Source::Env(files));
        }
        // As kubectl: KUBECONFIG naming no existing file leaves the in-cluster configuration;
        // the default file is not consulted when KUBECONFIG is set.
    } else if let Some(home) = &env.home {
        let file = home.join(".kube").join("config");
        if exists(&file) {
            return Ok(Source::Default(file));
        }
    }
    if env.in_cluster {
        return Ok(Source::InCluster);
    }
    Err(match &env.kubeconfig {
        Some(list) if !list.is_empty() => format!(
            "no cluster to read: KUBECONFIG ({}) names no existing file, and this is not a pod",
            list.to_string_lossy()
        ),
        _ => "no cluster to read: no --kubeconfig, no KUBECONFIG, no ~/.kube/config, and this \
              is not a pod"
            .to_owned(),
    })
}

/// The client configuration of `source`, with `context` (if given) instead of the current one,
/// and a name for messages (`context NAME` or `in-cluster`).
pub async fn config(
    source: &Source,
    context: Option<&str>,
) -> Result<(kube::Config, String), String> {
    let files: &[PathBuf] = match source {
        Source::Flag(file) | Source::Default(file) => std::slice::from_ref(file),
        Source::Env(files) => files,
        Source::InCluster => {
            if let Some(context) = context {
                return Err(format!(
                    "--context {context}: there is no kubeconfig to choose a context from (the \
                     in-cluster configuration is used)"
                ));
            }
            let config = kube::Config::incluster()
                .map_err(|e| format!("reading the in-cluster configuration: {e}"))?;
            return Ok((config, "in-cluster".to_owned()));
        }
    };
    let mut merged: Option<Kubeconfig> = None;
    for file in files {
        let read = Kubeconfig::read_from(file).map_err(|e| format!("{}: {e}", file.display()))?;
        merged = Some(match merged {
            None => read,
            Some(before) => before
                .merge(read)
                .map_err(|e| format!("{}: {e}", file.display()))?,
        });
    }
    let kubeconfig = merged.unwrap_or_default();
    let chosen = match context {
        Some(name) => {
            if !kubeconfig.contexts.iter().any(|c| c.name == name) {
                let known: Vec<&str> = kubeconfig
                    .contexts
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect();
                return Err(format!(
                    "--context {name}: no such context in {} (it has: {})",
                    describe(files),
                    known.join(", ")
                ));
            }
            name.to_owned()
        }
        None => kubeconfig.current_context.clone().ok_or_else(|| {
            format!(
                "{} has no current-context; choose one with --context",
                describe(files)
            )
        })?,
    };
    let options = KubeConfigOptions {
        context: Some(chosen.clone()),
        ..KubeConfigOptions::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| format!("{}: context {chosen}: {e}", describe(files)))?;
    Ok((config, format!("context {chosen}")))
}

fn describe(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(kubeconfig: Option<&str>, home: Option<&str>, in_cluster: bool) -> Environment {
        Environment {
            kubeconfig: kubeconfig.map(OsString::from),
            home: home.map(PathBuf::from),
            in_cluster,
        }
    }

    fn only(files: &'static [&'static str]) -> impl Fn(&Path) -> bool {
        move |p: &Path| files.iter().any(|f| Path::new(f) == p)
    }

    #[test]
    fn the_flag_comes_first_and_must_exist() {
        let exists = only(&["/flag", "/env", "/home/u/.kube/config"]);
        let all = env(Some("/env"), Some("/home/u"), true);
        assert_eq!(
            resolve(Some(Path::new("/flag")), &all, &exists),
            Ok(Source::Flag("/flag".into()))
        );
        let err = resolve(Some(Path::new("/missing")), &all, &exists).unwrap_err();
        assert!(err.contains("--kubeconfig /missing: no such file"), "{err}");
    }

    #[test]
    fn kubeconfig_env_comes_before_the_default_file_and_skips_missing_files() {
        let exists = only(&["/a", "/c", "/home/u/.kube/config"]);
        let list = std::env::join_paths(["/a", "/b", "/c"]).unwrap();
        let e = Environment {
            kubeconfig: Some(list),
            home: Some("/home/u".into()),
            in_cluster: true,
        };
        assert_eq!(
            resolve(None, &e, &exists),
            Ok(Source::Env(vec!["/a".into(), "/c".into()]))
        );
        // Set but naming nothing that exists: not the default file, the pod's configuration.
        assert_eq!(
            resolve(None, &env(Some("/b"), Some("/home/u"), true), &exists),
            Ok(Source::InCluster)
        );
        assert!(resolve(None, &env(Some("/b"), Some("/home/u"), false), &exists).is_err());
    }

    #[test]
    fn the_default_file_then_in_cluster() {
        let exists = only(&["/home/u/.kube/config"]);
        assert_eq!(
            resolve(None, &env(None, Some("/home/u"), true), &exists),
            Ok(Source::Default("/home/u/.kube/config".into()))
        );
        // An empty KUBECONFIG counts as unset.
        assert_eq!(
            resolve(None, &env(Some(""), Some("/home/u"), true), &exists),
            Ok(Source::Default("/home/u/.kube/config".into()))
        );
        assert_eq!(
            resolve(None, &env(None, Some("/home/v"), true), &exists),
            Ok(Source::InCluster)
        );
        let err = resolve(None, &env(None, Some("/home/v"), false), &exists).unwrap_err();
        assert!(err.starts_with("no cluster to read"), "{err}");
    }

    const TWO_CONTEXTS: &str = "apiVersion: v1\nkind: Config\n\
        clusters:\n- name: one\n  cluster: {server: \"http://127.0.0.1:1111\"}\n\
        - name: two\n  cluster: {server: \"http://127.0.0.1:2222\"}\n\
        users:\n- name: u\n  user: {}\n\
        contexts:\n- name: first\n  context: {cluster: one, user: u}\n\
        - name: second\n  context: {cluster: two, user: u}\n\
        current-context: first\n";

    fn run<T>(future: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(future)
    }

    #[test]
    fn context_selects_the_cluster_and_an_unknown_one_is_named() {
        let dir = std::env::temp_dir().join(format!("netpol-kubeconfig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("config");
        std::fs::write(&file, TWO_CONTEXTS).unwrap();
        let source = Source::Flag(file.clone());
        let (current, name) = run(config(&source, None)).unwrap();
        assert_eq!(current.cluster_url.to_string(), "http://127.0.0.1:1111/");
        assert_eq!(name, "context first");
        let (chosen, name) = run(config(&source, Some("second"))).unwrap();
        assert_eq!(chosen.cluster_url.to_string(), "http://127.0.0.1:2222/");
        assert_eq!(name, "context second");
        let err = run(config(&source, Some("third"))).unwrap_err();
        assert!(err.contains("--context third: no such context"), "{err}");
        assert!(err.contains("first, second"), "{err}");
        let err = run(config(&Source::InCluster, Some("second"))).unwrap_err();
        assert!(
            err.contains("no kubeconfig to choose a context from"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn kubeconfig_files_merge_with_the_first_value_winning() {
        let dir = std::env::temp_dir().join(format!("netpol-kubeconfig-m-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("a");
        let b = dir.join("b");
        std::fs::write(
            &a,
            "apiVersion: v1\nkind: Config\ncurrent-context: second\n",
        )
        .unwrap();
        std::fs::write(&b, TWO_CONTEXTS).unwrap();
        let (config, name) = run(config(&Source::Env(vec![a, b]), None)).unwrap();
        assert_eq!(name, "context second");
        assert_eq!(config.cluster_url.to_string(), "http://127.0.0.1:2222/");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
