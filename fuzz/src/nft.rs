//! nftables through libnftables (the library behind the `nft` command) in a private network
//! namespace: in-process, so a target checks thousands of scripts a second, with the kernel's
//! own validation. A dry run is exactly `nft -c -f`.

use std::ffi::{c_char, c_int, CStr, CString};
use std::io;
use std::sync::Once;

use netpol_nft::generation::{self, Generation, STEP_SCRIPT};
use netpol_nft::programmer::{chains_via, sets_via, NftBackend, NftError};

#[repr(C)]
struct NftCtx {
    _private: [u8; 0],
}

#[link(name = "libnftables.so.1", kind = "dylib", modifiers = "+verbatim")]
extern "C" {
    fn nft_ctx_new(flags: u32) -> *mut NftCtx;
    fn nft_ctx_set_dry_run(ctx: *mut NftCtx, dry: bool);
    fn nft_ctx_buffer_output(ctx: *mut NftCtx) -> c_int;
    fn nft_ctx_get_output_buffer(ctx: *mut NftCtx) -> *const c_char;
    fn nft_ctx_buffer_error(ctx: *mut NftCtx) -> c_int;
    fn nft_ctx_get_error_buffer(ctx: *mut NftCtx) -> *const c_char;
    fn nft_run_cmd_from_buffer(ctx: *mut NftCtx, buf: *const c_char) -> c_int;
}

/// One libnftables context, used by the thread that made it (the fuzzer's main thread).
pub struct Nft {
    ctx: *mut NftCtx,
    /// Read before each command: at the generations libnftables misreads (multiples of 65,536)
    /// the context would work from a stale cache, as the agent's would
    /// ([`netpol_nft::generation`]); without the step every process stopped after about 60,000
    /// executions.
    generation: std::cell::RefCell<Generation>,
    /// The context the step runs in, apart from `ctx`, as the agent's ([`netpol_nft::libnft`]):
    /// a context that fills its cache at a misread generation never releases it.
    step_ctx: *mut NftCtx,
}

static UNSHARE: Once = Once::new();

impl Nft {
    /// A context in a network namespace of the calling thread's own, made on first use: nothing
    /// the target programs touches the host. Panics if that is impossible (not root).
    pub fn new() -> Nft {
        UNSHARE.call_once(|| {
            // SAFETY: unshare only changes the calling thread's namespace.
            let made = unsafe { libc::unshare(libc::CLONE_NEWNET) };
            assert_eq!(
                made,
                0,
                "unshare(CLONE_NEWNET): {} (the render target needs root)",
                io::Error::last_os_error()
            );
        });
        // SAFETY: plain constructor calls; the context is checked for null.
        let ctx = unsafe { nft_ctx_new(0) };
        assert!(!ctx.is_null(), "nft_ctx_new failed");
        unsafe {
            nft_ctx_buffer_output(ctx);
            nft_ctx_buffer_error(ctx);
        }
        let generation = Generation::open().expect("a netlink socket in the namespace");
        // SAFETY: as above.
        let step_ctx = unsafe { nft_ctx_new(0) };
        assert!(!step_ctx.is_null(), "nft_ctx_new failed");
        Nft {
            ctx,
            generation: std::cell::RefCell::new(generation),
            step_ctx,
        }
    }

    /// Moves the generation past one libnftables would misread.
    fn step_past_blind_generation(&self) {
        let now = self
            .generation
            .borrow_mut()
            .read()
            .expect("the nftables generation");
        if generation::is_blind(now) {
            let step = CString::new(STEP_SCRIPT).unwrap();
            // SAFETY: step_ctx is valid for self's life.
            let status = unsafe { nft_run_cmd_from_buffer(self.step_ctx, step.as_ptr()) };
            assert_eq!(status, 0, "the generation step was refused");
        }
    }

    /// Runs `script` as one transaction; a dry run only checks it (`nft -c`). Returns the
    /// output, or the error text.
    pub fn run(&self, script: &str, dry_run: bool) -> Result<String, String> {
        let text = CString::new(script).map_err(|_| "a NUL byte in the script".to_string())?;
        self.step_past_blind_generation();
        // SAFETY: ctx is valid for self's life; the buffers are read before the next call.
        unsafe {
            nft_ctx_set_dry_run(self.ctx, dry_run);
            let status = nft_run_cmd_from_buffer(self.ctx, text.as_ptr());
            let output = read(nft_ctx_get_output_buffer(self.ctx));
            let error = read(nft_ctx_get_error_buffer(self.ctx));
            if status == 0 {
                Ok(output)
            } else {
                Err(error)
            }
        }
    }
}

impl Default for Nft {
    fn default() -> Self {
        Self::new()
    }
}

unsafe fn read(buffer: *const c_char) -> String {
    if buffer.is_null() {
        String::new()
    } else {
        CStr::from_ptr(buffer).to_string_lossy().into_owned()
    }
}

impl Nft {
    /// Runs an `nft` command given as arguments. libnftables takes commands, not the command
    /// line's options: `-t` (terse, no set elements) is dropped, which only lengthens the
    /// listing. A listing that overlaps the kernel's cleanup of the previous transaction can be
    /// interrupted (EINTR); nft's answer then is to ask again.
    fn command(&self, args: &[&str]) -> Result<String, NftError> {
        let command: Vec<&str> = args.iter().copied().filter(|a| *a != "-t").collect();
        let command = command.join(" ");
        let mut result = self.run(&command, false);
        for _ in 0..5 {
            match &result {
                Err(error) if error.contains("Interrupted system call") => {
                    result = self.run(&command, false);
                }
                _ => break,
            }
        }
        result.map_err(|e| NftError::refused(&e))
    }
}

impl NftBackend for Nft {
    fn apply(&self, script: &str) -> Result<(), NftError> {
        self.run(script, false)
            .map(drop)
            .map_err(|e| NftError::refused(&e))
    }

    fn check(&self, script: &str) -> Result<(), NftError> {
        self.run(script, true)
            .map(drop)
            .map_err(|e| NftError::refused(&e))
    }

    fn chains(&self) -> Result<Option<Vec<String>>, NftError> {
        chains_via(|args| self.command(args))
    }

    fn sets(&self) -> Result<Option<Vec<String>>, NftError> {
        sets_via(|args| self.command(args))
    }

    /// Read through the kernel's netlink dump, as the agent reads.
    fn set_contents(
        &self,
        set: &netpol_nft::ruleset::AddressSet,
    ) -> Result<Option<Vec<ipnet::IpNet>>, NftError> {
        netpol_nft::set_dump::read_netpol_set(set)
    }
}
