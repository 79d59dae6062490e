//! A netfilter netlink socket for what netpol asks of the kernel without libnftables: the
//! ruleset generation ([`crate::generation`]), a set's elements ([`crate::set_dump`]), and
//! elements added to a new set before any chain names it ([`crate::set_fill`]). Requests are
//! single messages, their replies read until the request's answer (or, for a dump, its
//! `NLMSG_DONE`); writes are batches, one transaction each, every message acknowledged.

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
/// How long a read waits for the kernel's answer (a dump's next part, a batch's next answer).
const RECEIVE_TIMEOUT_SECONDS: libc::time_t = 30;
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
    /// The send buffer asked for (0: the default, about 208 KB).
    send_buffer: usize,
}

impl NetfilterSocket {
    pub fn open() -> io::Result<NetfilterSocket> {
        let socket = open_netfilter()?;
        // A kernel that stops answering fails the call instead of holding the agent forever.
        let timeout = libc::timeval {
            tv_sec: RECEIVE_TIMEOUT_SECONDS,
            tv_usec: 0,
        };
        set_option(&socket, libc::SO_RCVTIMEO, &timeout)?;
        Ok(NetfilterSocket {
            socket,
            sequence: 0,
            send_buffer: 0,
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
        let mut request = Vec::with_capacity(HEADER + NFGENMSG + attributes.len());
        // nfgenmsg: the family, NFNETLINK_V0, res_id 0.
        put_message(
            &mut request,
            (kind, flags, self.sequence),
            (family, 0),
            attributes,
        );
        self.send(&request)?;
        let mut buffer = vec![0u8; 1 << 16];
        loop {
            let got = self.receive(&mut buffer)?;
            for raw in split_messages(&buffer[..got]) {
                let Raw {
                    kind,
                    flags,
                    sequence,
                    bytes: message,
                } = raw?;
                if sequence != self.sequence {
                    // The answer to an earlier request that failed part way.
                    continue;
                }
                match kind {
                    NLMSG_ERROR => return answer_of(message),
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

/// Sets the socket-level option `option` of `socket` to `value`.
pub(crate) fn set_option<T>(socket: &OwnedFd, option: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is valid for its size, which is given.
    let set = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if set != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// What an `NLMSG_ERROR` message says: an acknowledgement (code 0) or the request's error.
fn answer_of(message: &[u8]) -> io::Result<()> {
    let code = message
        .get(HEADER..HEADER + 4)
        .map_or(0, |b| i32::from_ne_bytes(b.try_into().unwrap()));
    match code {
        0 => Ok(()),
        code => Err(io::Error::from_raw_os_error(-code)),
    }
}

/// One netlink message of a buffer received: its header's fields and its bytes.
struct Raw<'a> {
    kind: u16,
    flags: u16,
    sequence: u32,
    bytes: &'a [u8],
}

/// The messages of a buffer received, in order.
fn split_messages(mut rest: &[u8]) -> impl Iterator<Item = io::Result<Raw<'_>>> {
    std::iter::from_fn(move || {
        if rest.len() < HEADER {
            return None;
        }
        let u32_at = |at: usize| u32::from_ne_bytes(rest[at..at + 4].try_into().unwrap());
        let size = (u32_at(0) as usize).min(rest.len());
        if size < HEADER {
            rest = &[];
            return Some(Err(invalid("a netlink message shorter than its header")));
        }
        let raw = Raw {
            kind: u16::from_ne_bytes([rest[4], rest[5]]),
            flags: u16::from_ne_bytes([rest[6], rest[7]]),
            sequence: u32_at(8),
            bytes: &rest[..size],
        };
        rest = &rest[((size + 3) & !3).min(rest.len())..];
        Some(Ok(raw))
    })
}

/// `NFNL_MSG_BATCH_BEGIN`, `NFNL_MSG_BATCH_END`.
const BATCH_BEGIN: u16 = 0x10;
const BATCH_END: u16 = 0x11;
/// `NLM_F_ACK`.
const NLM_F_ACK: u16 = 4;

/// One message of a batch: its type, flags besides `NLM_F_REQUEST | NLM_F_ACK`, family and
/// attributes.
pub struct BatchMessage {
    pub kind: u16,
    pub flags: u16,
    pub family: u8,
    pub attributes: Vec<u8>,
}

/// Appends a netlink message with an `nfgenmsg` (`res_id` in network order) to `out`.
fn put_message(
    out: &mut Vec<u8>,
    (kind, flags, sequence): (u16, u16, u32),
    (family, res_id): (u8, u16),
    attributes: &[u8],
) {
    let length = HEADER + NFGENMSG + attributes.len();
    out.extend_from_slice(&(length as u32).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(&(libc::NLM_F_REQUEST as u16 | flags).to_ne_bytes());
    out.extend_from_slice(&sequence.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.push(family);
    out.push(0);
    out.extend_from_slice(&res_id.to_be_bytes());
    out.extend_from_slice(attributes);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

impl NetfilterSocket {
    /// Sends `messages` as one nf_tables transaction (a batch: all of them commit, or none) and
    /// waits for the kernel's answer to each. The kernel handles a batch while it is sent, so
    /// every answer is queued when `sendto` returns. Returns the first error the kernel gave.
    pub fn batch(&mut self, messages: &[BatchMessage]) -> io::Result<()> {
        let first = self.sequence.wrapping_add(1);
        let mut out = Vec::new();
        let mut next = first;
        put_message(&mut out, (BATCH_BEGIN, 0, next), (0, NFTABLES >> 8), &[]);
        for message in messages {
            next = next.wrapping_add(1);
            let header = (message.kind, message.flags | NLM_F_ACK, next);
            put_message(&mut out, header, (message.family, 0), &message.attributes);
        }
        next = next.wrapping_add(1);
        put_message(&mut out, (BATCH_END, 0, next), (0, NFTABLES >> 8), &[]);
        self.sequence = next;
        self.make_room(out.len())?;
        self.send(&out)?;
        // One answer per message. Offsets from `first`: 0 is the batch's begin, 1 to `len` its
        // messages, `len + 1` its end (sequence numbers may wrap).
        let len = messages.len();
        let mut awaited = len;
        let mut buffer = vec![0u8; 1 << 16];
        while awaited > 0 {
            let got = self.receive(&mut buffer)?;
            for raw in split_messages(&buffer[..got]) {
                let Raw {
                    kind,
                    sequence,
                    bytes: message,
                    ..
                } = raw?;
                let offset = sequence.wrapping_sub(first) as usize;
                if kind != NLMSG_ERROR || offset > len + 1 {
                    continue;
                }
                // The first error is the batch's: the kernel committed none of it. Answers
                // still queued carry this batch's numbers, which later requests pass over.
                answer_of(message)?;
                if (1..=len).contains(&offset) {
                    awaited -= 1;
                }
            }
        }
        Ok(())
    }

    /// Grows the socket's send buffer to hold a batch of `bytes` (a batch is one `sendto`), as
    /// nft does: forced past `wmem_max` where the caller may (`CAP_NET_ADMIN`, which
    /// programming nftables needs anyway), else as far as `wmem_max` allows.
    fn make_room(&mut self, bytes: usize) -> io::Result<()> {
        // Headroom for the kernel's own accounting of the buffer.
        let wanted = bytes.saturating_add(64 << 10);
        if wanted <= self.send_buffer {
            return Ok(());
        }
        let size = libc::c_int::try_from(wanted).unwrap_or(libc::c_int::MAX);
        set_option(&self.socket, libc::SO_SNDBUFFORCE, &size)
            .or_else(|_| set_option(&self.socket, libc::SO_SNDBUF, &size))?;
        self.send_buffer = wanted;
        Ok(())
    }

    fn send(&self, bytes: &[u8]) -> io::Result<()> {
        // SAFETY: an all-zero sockaddr_nl is the kernel's address once the family is set.
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: the buffer and address are valid for the lengths given.
        let sent = unsafe {
            libc::sendto(
                self.socket.as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                0,
                (&kernel as *const libc::sockaddr_nl).cast(),
                size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn receive(&self, buffer: &mut [u8]) -> io::Result<usize> {
        receive(&self.socket, buffer)
    }
}

/// Receives one datagram of `socket` into `buffer`; returns its length.
pub(crate) fn receive(socket: &OwnedFd, buffer: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the buffer is valid for its length.
    let got = unsafe {
        libc::recv(
            socket.as_raw_fd(),
            buffer.as_mut_ptr().cast(),
            buffer.len(),
            0,
        )
    };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(got as usize)
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
