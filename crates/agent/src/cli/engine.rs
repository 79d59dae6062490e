//! The one place that chooses which engine decides flows. Every command that decides flows takes
//! `--engine` and asks [`oracle`] for a [`DirectionOracle`] over a scenario's cluster, so a new
//! engine or datapath simulator is a new variant here and nothing else.

use netpol_engine::flow::{DirectionOracle, ReferenceOracle};

use crate::scenario::Cluster;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineKind {
    /// The incremental MapState engine, as the agent runs it.
    Mapstate,
    /// The reference evaluator: a direct first-match reading of the policy entries.
    #[default]
    Reference,
}

#[derive(Clone, Copy, Debug, clap::Args)]
pub struct EngineArgs {
    /// Which engine decides the flows.
    #[arg(long, value_enum, default_value_t)]
    pub engine: EngineKind,
}

/// The requested engine is not available in this build.
#[derive(Debug, thiserror::Error)]
#[error("the {0} engine is not available yet; use --engine reference")]
pub struct EngineUnavailable(&'static str);

/// A decider for flows of `cluster`, by the engine the user chose.
pub fn oracle(
    kind: EngineKind,
    cluster: &Cluster,
) -> Result<Box<dyn DirectionOracle + '_>, EngineUnavailable> {
    match kind {
        EngineKind::Reference => Ok(Box::new(ReferenceOracle {
            entries: cluster.entries(),
            store: cluster.store(),
        })),
        EngineKind::Mapstate => Err(EngineUnavailable("mapstate")),
    }
}
