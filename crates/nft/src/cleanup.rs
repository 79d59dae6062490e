//! `netpol cleanup --datapath nftables`: deletes table `inet netpol`, the one table netpol
//! programs, and nothing else. Other tables (kube-proxy's, the CNI plugin's, firewalld's) hold
//! no netpol rule and are never read or written: everything netpol programs lives inside its own
//! table (chains, sets, base chains on the hooks), so deleting it takes all of netpol's rules
//! off every hook at once.

use crate::programmer::{NftBackend, NftError};
use crate::script::TABLE;

/// Deletes netpol's table; true if there was one. `add` before `delete` in the same transaction
/// makes the script succeed whether or not the table exists when it runs (another cleanup, or an
/// agent still stopping, may race with this one).
pub fn remove_table(backend: &dyn NftBackend) -> Result<bool, NftError> {
    let existed = backend.chains()?.is_some();
    backend.apply(&format!("add table {TABLE}\ndelete table {TABLE}\n"))?;
    Ok(existed)
}
