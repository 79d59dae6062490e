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
//! nothing lasting (a scratch table added and deleted) moves the generation on. The step runs in
//! a context of its own: a context that fills its cache at such a generation records it as 0
//! and never releases that cache, so its next fill is added to the stale one (every chain
//! listed twice); run in the main context, the step caused exactly what it prevents. Another process
//! committing between the read and the command can still land on one: a window of one
//! generation in 65,536, which [`crate::isolate`]'s retries then cover.

use std::io;

use crate::netlink::{attributes, NetfilterSocket, NFTABLES};

/// `NFT_MSG_GETGEN`.
const GETGEN: u16 = NFTABLES | 16;
/// `NFTA_GEN_ID`.
const GEN_ID: u16 = 1;

/// The transaction that moves the generation on: commits, and leaves nothing behind.
pub const STEP_SCRIPT: &str =
    "add table inet netpol_generation_step\ndelete table inet netpol_generation_step\n";

/// Whether libnftables would take `generation` for "no generation told" (its low 16 bits are 0).
pub fn is_blind(generation: u32) -> bool {
    generation & 0xffff == 0
}

/// Asks the kernel of one network namespace (the calling thread's when it was opened) for its
/// nftables generation.
#[derive(Debug)]
pub struct Generation {
    socket: NetfilterSocket,
}

impl Generation {
    /// Opens the socket in the calling thread's network namespace.
    pub fn open() -> io::Result<Generation> {
        Ok(Generation {
            socket: NetfilterSocket::open()?,
        })
    }

    /// The namespace's nftables generation now.
    pub fn read(&mut self) -> io::Result<u32> {
        read(&mut self.socket)
    }
}

/// The nftables generation of `socket`'s namespace now.
pub fn read(socket: &mut NetfilterSocket) -> io::Result<u32> {
    let mut generation = None;
    socket.request(GETGEN, 0, libc::AF_UNSPEC as u8, &[], |message| {
        generation = generation_in(message.attributes);
        Ok(())
    })?;
    generation.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "a generation reply without NFTA_GEN_ID",
        )
    })
}

/// The `NFTA_GEN_ID` of a generation reply's attributes.
fn generation_in(reply: &[u8]) -> Option<u32> {
    attributes(reply)
        .find(|(kind, payload)| *kind == GEN_ID && payload.len() >= 4)
        .map(|(_, payload)| u32::from_be_bytes(payload[..4].try_into().unwrap()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::put_attribute;

    #[test]
    fn the_blind_generations_are_the_multiples_of_65536() {
        assert!(is_blind(0));
        assert!(is_blind(65_536));
        assert!(is_blind(131_072));
        assert!(!is_blind(1));
        assert!(!is_blind(65_535));
        assert!(!is_blind(65_537));
    }

    #[test]
    fn a_reply_gives_its_generation() {
        let mut reply = Vec::new();
        put_attribute(&mut reply, 2, &[0, 0, 0, 9]);
        put_attribute(&mut reply, GEN_ID, &70_000u32.to_be_bytes());
        assert_eq!(generation_in(&reply), Some(70_000));
        assert_eq!(generation_in(&reply[..8]), None);
    }
}
