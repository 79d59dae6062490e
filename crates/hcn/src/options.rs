//! What the agent is told about how to speak to HNS on its node, beyond IP sets: the flags
//! `--hcn-acl-removal`, `--hcn-max-acls-per-request`, `--hcn-host-rules`,
//! `--hcn-ingress-set-field`, `--hcn-network` and, on the simulator, `--hcn-sim-mode`.

use crate::conventions::{IngressSetField, WriteOptions};
use crate::host_rules::HostRules;
use crate::sim::SimMode;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HcnOptions {
    pub writes: WriteOptions,
    pub host_rules: HostRules,
    /// Overrides the HNS version's ingress set convention; None: the version's.
    pub ingress_set_field: Option<IngressSetField>,
    /// The HNS network (id or name) IP sets go on; None: the one most endpoints are on.
    pub network: Option<String>,
    /// The Windows Server build the simulator models (`--datapath hcn-sim` only).
    pub sim_mode: SimMode,
}
