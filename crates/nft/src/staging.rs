//! Large new sets are created and filled ahead of the transaction that references them, in
//! transactions of at most [`STAGE_ELEMENTS`] elements.
//!
//! libnftables parses a whole transaction before it sends any of it, and holds every element it
//! parsed (about 1 KB each, with the netlink messages) until the call returns: ten policies of
//! 50,000 prefixes each, allowed alike, are one set of 500,000 elements, and the transaction
//! that created it took the agent from 150 MB to 500 MB. A set that no chain references yet
//! judges no packet, so it can be filled over several transactions: the transaction that adds
//! the chains naming it, the one that changes what packets see, finds it whole. What the kernel
//! holds is the same as with one transaction; the agent's peak is bounded by one part.
//!
//! Each part declares the set with some of its elements (`table inet netpol { set NAME { ...
//! elements = { ... } } }`), which adds them to the set the first part created. Not `add element`:
//! libnftables answers an `add element` in a table that holds interval sets by first reading
//! every element of every interval set of the table into its cache, so filling a set with `add
//! element` parts costs more, not less (measured: 218 s and 828 MB instead of 23 s and 584 MB
//! for ten sets of 50,000). A declaration reads no elements.
//!
//! Only sets that are new are staged. A set the kernel already holds is referenced by chains in
//! force, so its changes stay in the one transaction with the chains.

use crate::ruleset::AddressSet;
use crate::script::{render_set_fill, TABLE};

/// The most elements one staging transaction carries (about 20 MB for libnftables to parse). A
/// new set of more is staged; smaller ones go into the main transaction as before.
pub const STAGE_ELEMENTS: usize = 16_384;

/// The elements a new set is declared with where the backend adds the rest directly
/// ([`NftBackend::adds_elements_directly`]): libnftables parses these few, the kernel's element
/// messages carry the others.
pub const DECLARED_ELEMENTS: usize = 256;

/// A staging that stopped part way, with the error of the transaction that failed.
#[derive(Debug)]
pub struct StageFailed<E> {
    pub error: E,
    /// Whether the sets staged before the failure were deleted again (one transaction): the
    /// kernel is then as before. If not, what it holds is not known.
    pub cleaned: bool,
}

/// How staging writes: `apply` runs a script as one transaction; `add` adds `count` of a set's
/// elements from the `from`th to it (the backend's `add_to_new_set`); `direct` says whether `add`
/// writes them to the kernel directly (`adds_elements_directly`).
pub struct Writers<A, D> {
    pub apply: A,
    pub add: D,
    pub direct: bool,
}

/// Creates and fills each of `sets` (none of which the kernel holds or any chain references):
/// each declared with its first elements (one transaction), then the rest added, in
/// transactions of at most [`STAGE_ELEMENTS`] elements through libnftables, or in one call to a
/// backend that writes elements directly.
pub fn stage_new_sets<E, A, D>(
    writers: &Writers<A, D>,
    sets: &[&AddressSet],
) -> Result<(), StageFailed<E>>
where
    A: Fn(&str) -> Result<(), E>,
    D: Fn(&AddressSet, usize, usize) -> Result<(), E>,
{
    for (index, set) in sets.iter().enumerate() {
        if let Err((error, exists)) = stage_one(writers, set) {
            // The set being filled exists if its declaration committed.
            let touched = if exists { index + 1 } else { index };
            let cleaned = delete_sets(&writers.apply, &sets[..touched]).is_ok();
            return Err(StageFailed { error, cleaned });
        }
    }
    Ok(())
}

/// Declares `set` with its first elements and adds the rest; on an error, whether the set
/// exists (its declaration committed).
fn stage_one<E, A, D>(writers: &Writers<A, D>, set: &AddressSet) -> Result<(), (E, bool)>
where
    A: Fn(&str) -> Result<(), E>,
    D: Fn(&AddressSet, usize, usize) -> Result<(), E>,
{
    let declared = if writers.direct {
        DECLARED_ELEMENTS
    } else {
        STAGE_ELEMENTS
    };
    let len = set.nets.len();
    let mut from = declared.min(len);
    (writers.apply)(&render_set_fill(set, 0, from)).map_err(|error| (error, false))?;
    while from < len {
        let count = if writers.direct {
            len - from
        } else {
            STAGE_ELEMENTS.min(len - from)
        };
        (writers.add)(set, from, count).map_err(|error| (error, true))?;
        from += count;
    }
    Ok(())
}

/// Deletes `sets` in one transaction (nothing references them).
fn delete_sets<E>(apply: &impl Fn(&str) -> Result<(), E>, sets: &[&AddressSet]) -> Result<(), E> {
    if sets.is_empty() {
        return Ok(());
    }
    let script: String = sets
        .iter()
        .map(|set| format!("delete set {TABLE} {}\n", set.name))
        .collect();
    apply(&script)
}
