use crate::crd::{CiliumClusterwideNetworkPolicy, CiliumNetworkPolicy};
use crate::error::Diagnostics;
use netpol_engine::PolicyEntry;
pub(super) fn translate_namespaced(
    _: &CiliumNetworkPolicy,
    _: &mut Diagnostics,
) -> Vec<PolicyEntry> {
    Vec::new()
}
pub(super) fn translate_clusterwide(
    _: &CiliumClusterwideNetworkPolicy,
    _: &mut Diagnostics,
) -> Vec<PolicyEntry> {
    Vec::new()
}
