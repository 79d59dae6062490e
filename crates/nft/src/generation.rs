//! The kernel's nftables ruleset generation, and the step past the generations at which
//! libnftables trusts a stale cache.
//!
//! libnftables (1.0.6 here, Debian 12's) keeps the ruleset it last read in its context and reuses
//! it while the kernel's generation is the one it read it at. It takes that generation from the
//! 16-bit `res_id` of the kernel's replies, where 0 means "this kernel tells no generation". So
//! whenever the namespace's generation is a multiple of 65,536, a context that lives across
//! transactions (the agent's, the fuzz target's) works from a cache that may be stale. Measured:
//! a loop of transactions in a fresh namespace (generation 1) was refused at exactly its
//! 65,536th commit ("conflicting intervals" against a set deleted long before); the `render`
//! fuzz target stopped at 56,000-63,000 executions with chains listed twice and `flush set`
//! failing with ENOENT. Every process that commits in the namespace moves the generation
//! (kube-proxy in nftables mode, firewalld), so a long-lived agent meets it.
//!
//! The step: before a command, the generation is read (one netlink request, `NFT_MSG_GETGEN`,
//! through a socket of the context's namespace); at such a generation a transaction that changes
//! nothing lasting (a scratch table added and deleted) moves the generation on. Another process
//! committing between the read and the command can still land on one: a window of one
//! generation in 65,536, which [`crate::isolate`]'s retries then cover.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `NETLINK_NETFILTER`.
const NETLINK_NETFILTER: libc::c_int = 12;
/// `(NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETGEN`.
const GETGEN: u16 = (10 << 8) | 16;
/// `NFTA_GEN_ID`.
const GEN_ID: u16 = 1;
/// `NLMSG_ERROR`.
const NLMSG_ERROR: u16 = 2;
/// The size of `struct nlmsghdr` and of `struct nfgenmsg`.
const HEADER: usize = 16;
const NFGENMSG: usize = 4;

/// The transaction that moves the generation on: commits, and leaves nothing behind.
pub const STEP_SCRIPT: &str =
    "add table inet netpol_generation_step\ndelete table inet netpol_generation_step\n";

/// Whether libnftables would take `generation` for "no generation told" (its low 16 bits are 0).
pub fn is_blind(generation: u32) -> bool {
    generation & 0xffff == 0
}

/// A netlink socket that asks the kernel of one network namespace (the calling thread's when it
/// was opened) for its nftables generation.
#[derive(Debug)]
pub struct Generation {
    socket: OwnedFd,
    sequence: u32,
}

impl Generation {
    /// Opens the socket in the calling thread's network namespace.
    pub fn open() -> io::Result<Generation> {
        // SAFETY: plain socket creation; the descriptor is owned at once.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_NETFILTER,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a new descriptor nothing else owns.
        let socket = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Generation {
            socket,
            sequence: 0,
        })
    }

    /// The namespace's nftables generation now.
    pub fn read(&mut self) -> io::Result<u32> {
        self.sequence = self.sequence.wrapping_add(1);
        let mut request = [0u8; HEADER + NFGENMSG];
        request[0..4].copy_from_slice(&((HEADER + NFGENMSG) as u32).to_ne_bytes());
        request[4..6].copy_from_slice(&GETGEN.to_ne_bytes());
        request[6..8].copy_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
        request[8..12].copy_from_slice(&self.sequence.to_ne_bytes());
        // nfgenmsg: AF_UNSPEC, NFNETLINK_V0, res_id 0.
        // SAFETY: an all-zero sockaddr_nl is the kernel's address once the family is set.
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: the buffer and address are valid for the lengths given.
        let sent = unsafe {
            libc::sendto(
                self.socket.as_raw_fd(),
                request.as_ptr().cast(),
                request.len(),
                0,
                (&kernel as *const libc::sockaddr_nl).cast(),
                size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut reply = [0u8; 512];
        loop {
            // SAFETY: the buffer is valid for its length.
            let got = unsafe {
                libc::recv(
                    self.socket.as_raw_fd(),
                    reply.as_mut_ptr().cast(),
                    reply.len(),
                    0,
                )
            };
            if got < 0 {
                return Err(io::Error::last_os_error());
            }
            let reply = &reply[..got as usize];
            match parse_reply(reply, self.sequence)? {
                Some(generation) => return Ok(generation),
                // A reply to an earlier request (one that failed part way): read on.
                None => continue,
            }
        }
    }
}

/// The generation in a reply to request `sequence`; None for a reply to another request.
fn parse_reply(reply: &[u8], sequence: u32) -> io::Result<Option<u32>> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
    if reply.len() < HEADER {
        return Err(invalid("a netlink reply shorter than its header"));
    }
    let u16_at = |at: usize| u16::from_ne_bytes([reply[at], reply[at + 1]]);
    let u32_at = |at: usize| u32::from_ne_bytes(reply[at..at + 4].try_into().unwrap());
    let length = (u32_at(0) as usize).min(reply.len());
    if u32_at(8) != sequence {
        return Ok(None);
    }
    if u16_at(4) == NLMSG_ERROR {
        let code = if length >= HEADER + 4 {
            i32::from_ne_bytes(reply[HEADER..HEADER + 4].try_into().unwrap())
        } else {
            0
        };
        return Err(io::Error::from_raw_os_error(-code));
    }
    let mut at = HEADER + NFGENMSG;
    while at + 4 <= length {
        let size = u16_at(at) as usize;
        let kind = u16_at(at + 2) & 0x3fff;
        if size < 4 {
            break;
        }
        if kind == GEN_ID && size >= 8 && at + 8 <= length {
            let value: [u8; 4] = reply[at + 4..at + 8].try_into().unwrap();
            return Ok(Some(u32::from_be_bytes(value)));
        }
        at += (size + 3) & !3;
    }
    Err(invalid("a generation reply without NFTA_GEN_ID"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_blind_generations_are_the_multiples_of_65536() {
        assert!(is_blind(0));
        assert!(is_blind(65_536));
        assert!(is_blind(131_072));
        assert!(!is_blind(1));
        assert!(!is_blind(65_535));
        assert!(!is_blind(65_537));
    }

    fn reply(sequence: u32, generation: u32) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&28u32.to_ne_bytes());
        out.extend_from_slice(&GETGEN.to_ne_bytes());
        out.extend_from_slice(&0u16.to_ne_bytes());
        out.extend_from_slice(&sequence.to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes());
        out.extend_from_slice(&[0, 0, (generation >> 8) as u8, generation as u8]);
        out.extend_from_slice(&8u16.to_ne_bytes());
        out.extend_from_slice(&GEN_ID.to_ne_bytes());
        out.extend_from_slice(&generation.to_be_bytes());
        out
    }

    #[test]
    fn a_reply_gives_its_generation_and_other_requests_replies_are_passed_over() {
        assert_eq!(parse_reply(&reply(7, 70_000), 7).unwrap(), Some(70_000));
        assert_eq!(parse_reply(&reply(6, 70_000), 7).unwrap(), None);
        let mut error = reply(7, 0);
        error[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        error[16..20].copy_from_slice(&(-libc::EPERM).to_ne_bytes());
        let refused = parse_reply(&error, 7).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(libc::EPERM));
        assert!(parse_reply(&reply(7, 1)[..10], 7).is_err());
    }
}
