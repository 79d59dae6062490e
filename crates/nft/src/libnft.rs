//! nftables through libnftables in the agent's own process, where the library is installed (it
//! comes with the `nft` command): a transaction is one call, not a process.
//!
//! *Why:* running `nft -f` costs about 2.6 ms of CPU and 10 ms of wall time per transaction
//! however small (starting the process and the library), which was most of what a replica cost
//! the agent on nftables; through the library the same transaction costs well under a tenth of
//! a millisecond. The library is loaded at run time (`dlopen`), so a host without it still runs
//! the agent, through the `nft` command ([`crate::host::HostNft`]).
//!
//! A context is bound to the network namespace of the thread that created it (its netlink
//! socket is opened then) and is not thread-safe, so it is created once and used under a lock.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::Mutex;

use ipnet::IpNet;
use libloading::{Library, Symbol};

use crate::generation::{self, STEP_SCRIPT};
use crate::netlink::NetfilterSocket;
use crate::programmer::{chains_via, sets_via, NftBackend, NftError};
use crate::ruleset::AddressSet;

/// The library's soname, as distributions install it.
pub const LIBRARY: &str = "libnftables.so.1";

/// `NFT_CTX_OUTPUT_TERSE`: listings without set elements (`nft -t`).
const OUTPUT_TERSE: c_uint = 1 << 11;

/// `NFT_CTX_OUTPUT_JSON`: listings as JSON (`nft -j`).
const OUTPUT_JSON: c_uint = 1 << 4;

/// A script at least this long (a start or a resync, sets with all their elements) leaves the
/// library's C heap holding what it parsed: given back to the system after it runs.
const LARGE_SCRIPT: usize = 1 << 20;

type CtxNew = unsafe extern "C" fn(c_uint) -> *mut c_void;
type CtxFree = unsafe extern "C" fn(*mut c_void);
type CtxInt = unsafe extern "C" fn(*mut c_void) -> c_int;
type CtxGetBuffer = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type CtxSetDryRun = unsafe extern "C" fn(*mut c_void, bool);
type CtxGetFlags = unsafe extern "C" fn(*mut c_void) -> c_uint;
type CtxSetFlags = unsafe extern "C" fn(*mut c_void, c_uint);
type RunCmd = unsafe extern "C" fn(*mut c_void, *const c_char) -> c_int;

/// The library's functions netpol calls.
struct Api {
    ctx_free: CtxFree,
    get_output: CtxGetBuffer,
    get_error: CtxGetBuffer,
    set_dry_run: CtxSetDryRun,
    get_flags: CtxGetFlags,
    set_flags: CtxSetFlags,
    run: RunCmd,
}

/// A libnftables context and the library that made it.
struct Context {
    ctx: *mut c_void,
    api: Api,
    /// A netlink socket of the context's namespace: its generation is read before each command
    /// ([`generation`]), and large sets are read back through it ([`crate::set_dump`]). None
    /// where it could not be opened (no step is taken, no set is read back).
    kernel: Option<NetfilterSocket>,
    /// A second context, made beside the first, that only ever runs the generation step (null
    /// if it could not be made). The step runs at a generation libnftables misreads, and a
    /// context that fills its cache then never releases that cache: the next fill is added to
    /// it, and every chain is listed twice. Run in the main context, the step itself did that
    /// (the `render` fuzz target found it); this one's cache never matters.
    step_ctx: *mut c_void,
    /// Held for as long as the context exists: its functions live in the library.
    _library: Library,
}

// SAFETY: the context is used by one thread at a time (behind the `Mutex` of `LibNft`), which
// is what libnftables requires; nothing else holds its pointer.
unsafe impl Send for Context {}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: both contexts came from `nft_ctx_new` of this library and are freed once.
        unsafe {
            (self.api.ctx_free)(self.ctx);
            if !self.step_ctx.is_null() {
                (self.api.ctx_free)(self.step_ctx);
            }
        }
    }
}

/// nftables through libnftables, in this process and the network namespace this was made in.
pub struct LibNft {
    context: Mutex<Context>,
}

impl std::fmt::Debug for LibNft {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LibNft")
    }
}

/// Looks a function up by name.
///
/// # Safety
/// `T` must be the function's type.
unsafe fn symbol<T: Copy>(library: &Library, name: &str) -> Result<T, String> {
    let symbol: Symbol<T> = unsafe { library.get(name.as_bytes()) }
        .map_err(|e| format!("{LIBRARY} lacks {name}: {e}"))?;
    Ok(*symbol)
}

impl LibNft {
    /// Loads the library and makes a context in the calling thread's network namespace; the
    /// reason where the library is not installed or not usable.
    pub fn load() -> Result<LibNft, String> {
        // SAFETY: loading libnftables runs its initialisers, which only set up its own state.
        let library = unsafe { Library::new(LIBRARY) }.map_err(|e| format!("{LIBRARY}: {e}"))?;
        // SAFETY: each type is the function's C signature in libnftables' public header
        // (nftables/libnftables.h).
        let (ctx_new, buffer_output, buffer_error, api) = unsafe {
            (
                symbol::<CtxNew>(&library, "nft_ctx_new")?,
                symbol::<CtxInt>(&library, "nft_ctx_buffer_output")?,
                symbol::<CtxInt>(&library, "nft_ctx_buffer_error")?,
                Api {
                    ctx_free: symbol(&library, "nft_ctx_free")?,
                    get_output: symbol(&library, "nft_ctx_get_output_buffer")?,
                    get_error: symbol(&library, "nft_ctx_get_error_buffer")?,
                    set_dry_run: symbol(&library, "nft_ctx_set_dry_run")?,
                    get_flags: symbol(&library, "nft_ctx_output_get_flags")?,
                    set_flags: symbol(&library, "nft_ctx_output_set_flags")?,
                    run: symbol(&library, "nft_run_cmd_from_buffer")?,
                },
            )
        };
        // SAFETY: NFT_CTX_DEFAULT (0); a null result is checked.
        let ctx = unsafe { ctx_new(0) };
        if ctx.is_null() {
            return Err("nft_ctx_new failed".into());
        }
        let kernel = NetfilterSocket::open()
            .inspect_err(|error| {
                tracing::warn!(%error, "no netfilter netlink socket: no step past the generations libnftables misreads, no set read back")
            })
            .ok();
        // SAFETY: as above; made in the same namespace as `ctx`.
        let step_ctx = unsafe { ctx_new(0) };
        let context = Context {
            ctx,
            api,
            kernel,
            step_ctx,
            _library: library,
        };
        // SAFETY: a live context; output and errors go to buffers read after each command.
        let buffered = unsafe { buffer_output(context.ctx) == 0 && buffer_error(context.ctx) == 0 };
        if !buffered {
            return Err("libnftables could not buffer its output".into());
        }
        Ok(LibNft {
            context: Mutex::new(context),
        })
    }

    /// Runs `commands` (what `nft -f` reads) as one transaction, checked only (`nft -c`) when
    /// `dry_run`, listing without set elements when `terse`; returns what it printed.
    fn run(&self, commands: &str, dry_run: bool, terse: bool) -> Result<String, NftError> {
        let flags = if terse { OUTPUT_TERSE } else { 0 };
        self.run_with(commands, dry_run, flags)
    }

    /// [`LibNft::run`] with output `flags` added for this command.
    fn run_with(&self, commands: &str, dry_run: bool, extra: c_uint) -> Result<String, NftError> {
        let commands =
            CString::new(commands).map_err(|_| NftError::refused("the script holds a NUL byte"))?;
        let mut context = self
            .context
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        step_past_blind_generation(&mut context);
        let api = &context.api;
        // SAFETY: a live context used by this thread alone (the lock); the buffers are read
        // before the next command replaces them, and copied out.
        unsafe {
            let flags = (api.get_flags)(context.ctx);
            if extra != 0 {
                (api.set_flags)(context.ctx, flags | extra);
            }
            (api.set_dry_run)(context.ctx, dry_run);
            let status = (api.run)(context.ctx, commands.as_ptr());
            (api.set_dry_run)(context.ctx, false);
            (api.set_flags)(context.ctx, flags);
            let text = |buffer: *const c_char| {
                if buffer.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(buffer).to_string_lossy().into_owned()
                }
            };
            let output = text((api.get_output)(context.ctx));
            let error = text((api.get_error)(context.ctx));
            if commands.as_bytes().len() >= LARGE_SCRIPT {
                // The library allocates with the C allocator, which keeps freed memory for
                // reuse: without this a start at 150,000 pods left 75 MB more resident.
                libc::malloc_trim(0);
            }
            if status != 0 {
                return Err(NftError::refused(&error));
            }
            Ok(output)
        }
    }
}

/// Moves the namespace's generation on when libnftables would misread it ([`generation`]).
fn step_past_blind_generation(context: &mut Context) {
    let Some(socket) = context.kernel.as_mut() else {
        return;
    };
    match generation::read(socket) {
        Ok(now) if generation::is_blind(now) => {
            if context.step_ctx.is_null() {
                return;
            }
            let step = CString::new(STEP_SCRIPT).expect("no NUL byte");
            // SAFETY: a live context used under its lock; the step is a plain transaction.
            let status = unsafe { (context.api.run)(context.step_ctx, step.as_ptr()) };
            tracing::info!(
                generation = now,
                stepped = status == 0,
                "nftables generation at a multiple of 65536, which libnftables takes for none: \
                 stepped past it"
            );
        }
        Ok(_) => {}
        Err(error) => tracing::debug!(%error, "the nftables generation could not be read"),
    }
}

impl LibNft {
    /// Runs an `nft` command line (`-t` for terse listings) as the command would.
    fn command(&self, args: &[&str]) -> Result<String, NftError> {
        match args.split_first() {
            Some((&"-t", rest)) => self.run(&rest.join(" "), false, true),
            _ => self.run(&args.join(" "), false, false),
        }
    }
}

impl NftBackend for LibNft {
    fn apply(&self, script: &str) -> Result<(), NftError> {
        self.run(script, false, false).map(drop)
    }

    fn check(&self, script: &str) -> Result<(), NftError> {
        self.run(script, true, false).map(drop)
    }

    fn chains(&self) -> Result<Option<Vec<String>>, NftError> {
        chains_via(|args| self.command(args))
    }

    fn sets(&self) -> Result<Option<Vec<String>>, NftError> {
        sets_via(|args| self.command(args))
    }

    fn rules_json(&self) -> Result<String, NftError> {
        // As LIST_RULES_JSON, and for its reason.
        self.run_with("list ruleset", false, OUTPUT_TERSE | OUTPUT_JSON)
    }

    fn set_contents(&self, set: &AddressSet) -> Result<Option<Vec<IpNet>>, NftError> {
        let mut context = self
            .context
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(socket) = context.kernel.as_mut() else {
            return Ok(None);
        };
        crate::set_dump::read_netpol_set_through(socket, set)
    }

    fn adds_elements_directly(&self) -> bool {
        self.context
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .kernel
            .is_some()
    }

    fn add_to_new_set(&self, set: &AddressSet, from: usize, count: usize) -> Result<(), NftError> {
        self.through_kernel_or_script(
            |socket| crate::set_fill::add_to_netpol_set_through(socket, set, from, count),
            || crate::script::render_set_fill(set, from, count),
        )
    }

    fn patch_sets(&self, patches: &[crate::script::SetPatch<'_>]) -> Result<(), NftError> {
        self.through_kernel_or_script(
            |socket| crate::set_fill::patch_netpol_sets_through(socket, patches),
            || crate::script::render_patches(patches),
        )
    }
}

impl LibNft {
    /// `direct` through the context's netfilter socket, or, without one, the script `script`
    /// renders applied through libnftables (the lock released first: `apply` takes it).
    fn through_kernel_or_script(
        &self,
        direct: impl FnOnce(&mut crate::netlink::NetfilterSocket) -> Result<(), NftError>,
        script: impl FnOnce() -> String,
    ) -> Result<(), NftError> {
        let mut context = self
            .context
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match context.kernel.as_mut() {
            Some(socket) => direct(socket),
            None => {
                drop(context);
                self.apply(&script())
            }
        }
    }
}
