//! Endpoints and their HCN policy lists as JSON: the form `netpol acls --output json` writes and
//! the node script `config/windows/Get-NetpolEndpointAcls.ps1` writes ([`document`], with the
//! networks' IP sets in [`sets`]), what netpol computes for a node's pods ([`computed`], inline
//! or naming IP sets, one node's pods by [`nodes`]), and the comparison of a node's live
//! endpoints with it ([`compare`], `netpol acls --compare`).

pub mod computed;
pub mod document;
pub mod drift;
pub mod nodes;
pub mod sets;
