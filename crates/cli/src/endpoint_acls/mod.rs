//! Endpoints and their HCN policy lists as JSON: the form `netpol acls --output json` writes and
//! the node script `config/windows/Get-NetpolEndpointAcls.ps1` writes ([`document`]), and the comparison
//! of a node's live endpoints with what netpol computes ([`compare`], `netpol acls --compare`).

pub mod compare;
pub mod document;
