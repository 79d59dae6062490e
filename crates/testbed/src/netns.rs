//! Anonymous network namespaces, each held by a parked thread and a file descriptor: nothing is
//! mounted or named on the host, and a namespace disappears with its [`Netns`].
//!
//! Every command and socket netpol uses inside one enters it first (`setns` in the child before
//! `exec`, or in the calling thread): if entering fails, the command does not run at all, so
//! nothing ever runs in the host's own namespace by mistake.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::mpsc;
use std::thread::JoinHandle;

use netpol_nft::host::{run_nft, run_piped};
use netpol_nft::programmer::{chains_via, sets_via, NftBackend, NftError};

/// A private network namespace.
pub struct Netns {
    fd: OwnedFd,
    /// The id of the thread parked inside it, for `ip link set ... netns TID`.
    tid: i32,
    stop: Option<mpsc::Sender<()>>,
    holder: Option<JoinHandle<()>>,
}

impl Netns {
    /// A new, empty network namespace (only a loopback, down).
    pub fn new() -> io::Result<Netns> {
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<(OwnedFd, i32)>>();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let made = (|| {
                // SAFETY: unshare only changes this thread's namespace.
                if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                let file = File::open("/proc/thread-self/ns/net")?;
                // SAFETY: gettid has no preconditions.
                let tid = unsafe { libc::gettid() };
                Ok((OwnedFd::from(file), tid))
            })();
            let ok = made.is_ok();
            let _ = ready_tx.send(made);
            if ok {
                // Park until the Netns is dropped: the thread id stays valid meanwhile.
                let _ = stop_rx.recv();
            }
        });
        let (fd, tid) = ready_rx
            .recv()
            .map_err(|_| io::Error::other("the namespace thread died"))??;
        Ok(Netns {
            fd,
            tid,
            stop: Some(stop_tx),
            holder: Some(holder),
        })
    }

    pub fn tid(&self) -> i32 {
        self.tid
    }

    /// Moves the calling thread into this namespace.
    pub fn enter(&self) -> io::Result<()> {
        enter(self.fd.as_raw_fd())
    }

    /// `program` set to run inside this namespace.
    pub fn command(&self, program: &str) -> Command {
        let fd = self.fd.as_raw_fd();
        let mut command = Command::new(program);
        // SAFETY: the closure only calls setns, which is async-signal-safe.
        unsafe {
            command.pre_exec(move || enter(fd));
        }
        command
    }

    /// Runs `program args...` inside the namespace with `stdin`, failing with its stderr.
    pub fn run(&self, program: &str, args: &[&str], stdin: &str) -> io::Result<String> {
        run_piped(self.command(program), program, args, stdin)
    }

    /// Runs an `ip -batch` script inside the namespace.
    pub fn ip_batch(&self, script: &str) -> io::Result<()> {
        self.run("ip", &["-batch", "-"], script).map(drop)
    }

    /// Loads an `nft -f` script inside the namespace, as one transaction.
    pub fn nft(&self, script: &str) -> io::Result<()> {
        self.run("nft", &["-f", "-"], script).map(drop)
    }
}

impl NftBackend for Netns {
    fn apply(&self, script: &str) -> Result<(), NftError> {
        run_nft(self.command("nft"), &["-f", "-"], script).map(drop)
    }

    fn check(&self, script: &str) -> Result<(), NftError> {
        run_nft(self.command("nft"), &["-c", "-f", "-"], script).map(drop)
    }

    fn chains(&self) -> Result<Option<Vec<String>>, NftError> {
        chains_via(|args| run_nft(self.command("nft"), args, ""))
    }

    fn sets(&self) -> Result<Option<Vec<String>>, NftError> {
        sets_via(|args| run_nft(self.command("nft"), args, ""))
    }

    /// Read on a thread inside the namespace, as the agent reads its own.
    fn set_contents(
        &self,
        set: &netpol_nft::ruleset::AddressSet,
    ) -> Result<Option<Vec<ipnet::IpNet>>, NftError> {
        self.inside(|| netpol_nft::set_dump::read_netpol_set(set))
    }

    /// As the agent does: a new set's elements past its declaration go as the kernel's element
    /// messages, from a thread inside the namespace.
    fn adds_elements_directly(&self) -> bool {
        true
    }

    fn add_to_new_set(
        &self,
        set: &netpol_nft::ruleset::AddressSet,
        from: usize,
        count: usize,
    ) -> Result<(), NftError> {
        self.inside(|| netpol_nft::set_fill::add_to_netpol_set(set, from, count))
    }

    fn patch_sets(&self, patches: &[netpol_nft::script::SetPatch<'_>]) -> Result<(), NftError> {
        self.inside(|| netpol_nft::set_fill::patch_netpol_sets(patches))
    }
}

impl Netns {
    /// Runs `f` on a thread inside the namespace (a netfilter socket opened there reaches its
    /// kernel tables).
    fn inside<T: Send>(
        &self,
        f: impl FnOnce() -> Result<T, NftError> + Send,
    ) -> Result<T, NftError> {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    self.enter().map_err(NftError::Unavailable)?;
                    f()
                })
                .join()
                .expect("the thread inside the namespace does not panic")
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(holder) = self.holder.take() {
            let _ = holder.join();
        }
    }
}

fn enter(fd: i32) -> io::Result<()> {
    // SAFETY: setns with a namespace file descriptor we own.
    if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// For tests that send real packets: whether to skip `test` because namespaces cannot be made
/// here and `NETPOL_SKIP_KERNEL=1` says that is expected. Without that variable a machine that
/// cannot run the test fails it, with the reason, rather than letting it pass having checked
/// nothing.
pub fn skip_kernel_test(test: &str) -> bool {
    skip_without(test, unavailable())
}

/// For tests that need something beyond namespaces (a tool, a kernel feature): whether to skip
/// `test` because `missing` says why it cannot run and `NETPOL_SKIP_KERNEL=1` says that is
/// expected; without that variable it fails, with the reason.
pub fn skip_without(test: &str, missing: Option<String>) -> bool {
    let Some(why) = missing else {
        return false;
    };
    if std::env::var_os("NETPOL_SKIP_KERNEL").is_some_and(|v| v == "1") {
        eprintln!("SKIPPED {test}: {why} (NETPOL_SKIP_KERNEL=1)");
        return true;
    }
    panic!("{test}: {why}; run as root with nftables and iproute2 installed, or set NETPOL_SKIP_KERNEL=1 to skip");
}

/// Why namespaces cannot be made here (not root, no `unshare` permission), or None.
pub fn unavailable() -> Option<String> {
    match Netns::new().and_then(|ns| ns.run("nft", &["list", "tables"], "").map(drop)) {
        Ok(()) => None,
        Err(e) => Some(format!(
            "private network namespaces with nftables are not available here: {e}"
        )),
    }
}
