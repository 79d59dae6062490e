//! The `netpol` command: the authoring tools (`check`, `matrix`, `explain`, `diff`, `acls`), the
//! node agent's command line (`agent`, over the `netpol-agent` library), `cleanup`, `crds`
//! and `version`. Development tools (the synthetic cluster generator) are in `netpol-dev`.
//! `main.rs` only parses arguments and dispatches to [`commands`].
//!
//! | module | job |
//! |---|---|
//! | [`cli`] | the command line as clap parses it (used by `main.rs` and by the tests of the docs) |
//! | [`commands`] | one module per subcommand: its arguments and its `run` |
//! | [`loader`], [`input`] | every command's input (scenario files, `-f` manifests, the live cluster) loaded into one `Scenario` |
//! | [`decide`] | the one place that picks what decides flows (engine, reference, HCN simulator, real packets) |
//! | [`endpoint_acls`] | endpoints' HCN policy lists as JSON, and a node's live ones compared with netpol's (`acls --compare`) |
//! | [`live`] | `--cluster` (its flags in `live::args`): the live cluster read once (kubectl's kubeconfig resolution), manifests applied, objects deleted |
//! | [`lint`] | `netpol lint`: policy smells found with the engine's precedence and MapStates |
//! | [`checked`] | what a check run found, read by every output form |
//! | [`output`] | text, JSON, JUnit and HTML forms, and how flows and rules are described |
//! | [`probe_ports`] | which ports a matrix or diff probes |
//! | [`summary`] | the agent's `--once` summary |

pub mod checked;
pub mod cli;
pub mod commands;
pub mod decide;
pub mod endpoint_acls;
pub mod input;
pub mod lint;
pub mod live;
pub mod loader;
pub mod outcome;
pub mod output;
pub mod probe_ports;
pub mod summary;

pub use outcome::Outcome;
