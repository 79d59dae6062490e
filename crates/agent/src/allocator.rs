//! The allocator of the `netpol` binary, as a macro so that the agent's benchmarks (which
//! run the agent and the controller in processes of their own) measure with it too.
//!
//! mimalloc rather than glibc's allocator on Linux: the engine makes millions of small
//! allocations (label maps, class entries, identities), and at 150,000 pods glibc's malloc and
//! free were nearly half of an initial sync's CPU (`agent --once`: 7.8 s with glibc, 4.7 s with
//! mimalloc, with a lower peak; see docs/performance.md). Windows keeps the system allocator
//! until mimalloc is measured there.
//!
//! mimalloc's arenas are not committed up front. Linux overcommits, so by default mimalloc
//! commits each arena (1 GiB of address space) as it reserves it, and memory it later purges
//! stays counted in the RSS: at an initial sync of 150,000 pods the agent's peak RSS was about
//! 40 MB higher (449 against 408 MB, the same CPU). The option is set by a constructor, before
//! the first allocation reserves the first arena (the Rust runtime allocates before `main`).

#[cfg(target_os = "linux")]
pub use mimalloc::MiMalloc;

/// `mi_option_arena_eager_commit` set to 0; see the module's documentation.
#[cfg(target_os = "linux")]
pub extern "C" fn lazy_arena_commit() {
    /// `mi_option_arena_eager_commit` in mimalloc's `mi_option_t`.
    const ARENA_EAGER_COMMIT: std::ffi::c_int = 4;
    extern "C" {
        /// mimalloc's, linked with its allocator.
        fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
    }
    // SAFETY: setting an option is valid at any time; it only takes effect for arenas reserved
    // later, and none is reserved before this runs.
    unsafe { mi_option_set(ARENA_EAGER_COMMIT, 0) };
}

/// Hands the memory the allocator holds freed back to the system now. For after work whose
/// transient blocks are large (reading a file of large policies frees several times their text),
/// which mimalloc otherwise keeps until its purge delay has passed at a later allocation, while
/// a sync's allocations pile on top of them. A no-op where mimalloc is not linked.
pub fn release_freed_memory() {
    #[cfg(target_os = "linux")]
    {
        extern "C" {
            /// mimalloc's, linked with its allocator.
            fn mi_collect(force: bool);
        }
        // SAFETY: collecting is valid at any time, from any thread; it frees nothing in use.
        unsafe { mi_collect(true) };
    }
}

/// Makes mimalloc the global allocator of the binary that expands it (Linux only), with its
/// arenas committed lazily.
#[macro_export]
macro_rules! use_mimalloc {
    () => {
        #[cfg(target_os = "linux")]
        #[global_allocator]
        static ALLOCATOR: $crate::allocator::MiMalloc = $crate::allocator::MiMalloc;

        #[cfg(target_os = "linux")]
        #[used]
        #[link_section = ".init_array"]
        static ALLOCATOR_OPTIONS: extern "C" fn() = $crate::allocator::lazy_arena_commit;
    };
}
