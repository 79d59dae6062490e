//! A netfilter netlink socket for the few reads netpol makes of the kernel without libnftables:
//! the ruleset generation ([`crate::generation`]) and a set's elements ([`crate::set_dump`]).
//! Requests are single messages; replies are read until the request's answer (or, for a dump,
//! its `NLMSG_DONE`).

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `NETLINK_NETFILTER`.
const NETLINK_NETFILTER: libc::c_int = 12;

/// A new netfilter netlink socket in the calling thread's network namespace.
pub fn open_netfilter() -> io::Result<OwnedFd> {
    // SAFETY: plain socket creation; the result is checked.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_NETFILTER,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}
/// `NFNL_SUBSYS_NFTABLES`, the high byte of every nf_tables message type.
pub const NFTABLES: u16 = 10 << 8;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_MULTI: u16 = 2;
/// The size of `struct nlmsghdr` and of `struct nfgenmsg`.
pub const HEADER: usize = 16;
pub const NFGENMSG: usize = 4;

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// One netlink message of a reply: its type and its payload after the `nfgenmsg`.
#[derive(Debug)]
pub struct Message<'a> {
    pub kind: u16,
    pub attributes: &'a [u8],
}

/// The attributes of a netlink attribute stream: (type without flags, payload).
pub fn attributes(mut bytes: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if bytes.len() < 4 {
            return None;
        }
        let size = u16::from_ne_bytes([bytes[0], bytes[1]]) as usize;
        let kind = u16::from_ne_bytes([bytes[2], bytes[3]]) & 0x3fff;
        if size < 4 || size > bytes.len() {
            return None;
        }
        let payload = &bytes[4..size];
        bytes = &bytes[((size + 3) & !3).min(bytes.len())..];
        Some((kind, payload))
    })
}

/// Appends an attribute (padded to four bytes).
pub fn put_attribute(out: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    out.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(payload);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// A netfilter netlink socket of the network namespace of the thread that opened it.
#[derive(Debug)]
pub struct NetfilterSocket {
    socket: OwnedFd,
    sequence: u32,
}

impl NetfilterSocket {
    pub fn open() -> io::Result<NetfilterSocket> {
        Ok(NetfilterSocket {
            socket: open_netfilter()?,
            sequence: 0,
        })
    }

    /// Sends a request of type `kind` (with `flags` besides `NLM_F_REQUEST`) for `family`, then
    /// hands each message of its answer to `each` until the answer ends: after one message, or
    /// at `NLMSG_DONE` for a multipart one. An error message is the request's error.
    pub fn request(
        &mut self,
        kind: u16,
        flags: u16,
        family: u8,
        attributes: &[u8],
        mut each: impl FnMut(Message<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        self.sequence = self.sequence.wrapping_add(1);
        let length = HEADER + NFGENMSG + attributes.len();
        let mut request = Vec::with_capacity(length);
        request.extend_from_slice(&(length as u32).to_ne_bytes());
        request.extend_from_slice(&kind.to_ne_bytes());
        request.extend_from_slice(&(libc::NLM_F_REQUEST as u16 | flags).to_ne_bytes());
        request.extend_from_slice(&self.sequence.to_ne_bytes());
        request.extend_from_slice(&0u32.to_ne_bytes());
        // nfgenmsg: the family, NFNETLINK_V0, res_id 0.
        request.extend_from_slice(&[family, 0, 0, 0]);
        request.extend_from_slice(attributes);
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
        let mut buffer = vec![0u8; 1 << 16];
        loop {
            // SAFETY: the buffer is valid for its length.
            let got = unsafe {
                libc::recv(
                    self.socket.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                    0,
                )
            };
            if got < 0 {
                return Err(io::Error::last_os_error());
            }
            let mut rest = &buffer[..got as usize];
            while rest.len() >= HEADER {
                let u32_at = |at: usize| u32::from_ne_bytes(rest[at..at + 4].try_into().unwrap());
                let size = (u32_at(0) as usize).min(rest.len());
                if size < HEADER {
                    return Err(invalid("a netlink message shorter than its header"));
                }
                let kind = u16::from_ne_bytes([rest[4], rest[5]]);
                let flags = u16::from_ne_bytes([rest[6], rest[7]]);
                let mine = u32_at(8) == self.sequence;
                let message = &rest[..size];
                rest = &rest[((size + 3) & !3).min(rest.len())..];
                if !mine {
                    // The answer to an earlier request that failed part way.
                    continue;
                }
                match kind {
                    NLMSG_ERROR => {
                        let code = message
                            .get(HEADER..HEADER + 4)
                            .map_or(0, |b| i32::from_ne_bytes(b.try_into().unwrap()));
                        if code == 0 {
                            return Ok(());
                        }
                        return Err(io::Error::from_raw_os_error(-code));
                    }
                    NLMSG_DONE => return Ok(()),
                    _ => {
                        let attributes = message.get(HEADER + NFGENMSG..).unwrap_or(&[]);
                        each(Message { kind, attributes })?;
                        if flags & NLM_F_MULTI == 0 {
                            return Ok(());
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_written_padded_and_read_back() {
        let mut out = Vec::new();
        put_attribute(&mut out, 1, b"netpol\0");
        put_attribute(&mut out, 2, &[1, 2, 3, 4]);
        assert_eq!(out.len(), 12 + 8);
        let read: Vec<(u16, &[u8])> = attributes(&out).collect();
        assert_eq!(read, vec![(1, &b"netpol\0"[..]), (2, &[1, 2, 3, 4][..])]);
        // A truncated stream ends the iteration rather than reading past it.
        assert_eq!(attributes(&out[..10]).count(), 0);
    }
}
