//! What a watch says about one object, whether it came from the API server or from the files of
//! the embedded mode.
//!
//! The same five cases as `kube::runtime::watcher::Event`, owned here so that the indexes (and
//! the fuzz targets that drive them) build without a Kubernetes client: an HTTP stack, TLS and an
//! async runtime that nothing here uses.

/// One step of a list-then-watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event<K> {
    /// An object was added or changed.
    Apply(K),
    /// An object was deleted.
    Delete(K),
    /// A (re)list starts: what it does not list again is gone once it is done.
    Init,
    /// An object of the (re)list.
    InitApply(K),
    /// The (re)list is done.
    InitDone,
}
