//! Reading the drop log: a netlink socket bound to the drop log's NFLOG group
//! ([`crate::droplog::LOG_GROUP`]) in the network namespace of the thread that opens it (the
//! node's), decoding each logged packet's prefix and the addresses and ports of its headers.
//!
//! The socket exists on Linux only; the decoding is plain bytes.
//!
//! Hand-written over `libc`: the NFLOG protocol netpol needs is two configuration messages and
//! one message kind with a few attributes (`linux/netfilter/nfnetlink_log.h`), and the crates
//! that wrap it link `libnetfilter_log`, which a node image need not hold.

#[cfg(target_os = "linux")]
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
#[cfg(target_os = "linux")]
use std::os::fd::{AsRawFd, OwnedFd};
#[cfg(target_os = "linux")]
use std::time::Duration;

const NFNL_SUBSYS_ULOG: u16 = 4;
const NFULNL_MSG_PACKET: u16 = 0;
#[cfg(target_os = "linux")]
const NFULNL_MSG_CONFIG: u16 = 1;
#[cfg(target_os = "linux")]
const NFULA_CFG_CMD: u16 = 1;
#[cfg(target_os = "linux")]
const NFULA_CFG_MODE: u16 = 2;
#[cfg(target_os = "linux")]
const NFULNL_CFG_CMD_BIND: u8 = 1;
#[cfg(target_os = "linux")]
const NFULNL_COPY_PACKET: u8 = 2;
const NFULA_PAYLOAD: u16 = 9;
const NFULA_PREFIX: u16 = 10;
#[cfg(target_os = "linux")]
const NLMSG_ERROR: u16 = 2;
#[cfg(target_os = "linux")]
const NLM_F_REQUEST: u16 = 1;
#[cfg(target_os = "linux")]
const NLM_F_ACK: u16 = 4;
/// An attribute's type without its nested and byte-order flags.
const NLA_TYPE_MASK: u16 = 0x3fff;
const NLMSG_HEADER: usize = 16;
const NFGEN_HEADER: usize = 4;

#[cfg(target_os = "linux")]
/// Bytes of each packet the kernel copies: the IPv6 header (40) and the transport ports.
const COPY_RANGE: u32 = 96;

/// One packet the kernel logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedPacket {
    /// The log statement's prefix.
    pub prefix: String,
    /// What the packet's headers say, where they could be read.
    pub headers: Option<PacketHeaders>,
}

/// The addresses, protocol and ports of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketHeaders {
    pub source: IpAddr,
    pub destination: IpAddr,
    /// The IP protocol number (6 TCP, 17 UDP, 132 SCTP, 1 ICMP, 58 ICMPv6).
    pub protocol: u8,
    /// Transport ports (TCP, UDP, SCTP).
    pub ports: Option<(u16, u16)>,
}

/// A netlink socket bound to one NFLOG group.
#[cfg(target_os = "linux")]
#[derive(Debug)]
pub struct NflogSocket {
    fd: OwnedFd,
    buffer: Vec<u8>,
}

#[cfg(target_os = "linux")]
impl NflogSocket {
    /// Binds log group `group` in the calling thread's network namespace; a receive waits at
    /// most `wait`. Fails if another process holds the group (`EBUSY`) or the kernel has no
    /// NFLOG (`nfnetlink_log` not loaded and not loadable).
    pub fn bind(group: u16, wait: Duration) -> io::Result<NflogSocket> {
        let fd = crate::netlink::open_netfilter()?;
        // SAFETY: a zeroed sockaddr_nl is valid; family set, port 0 (the kernel assigns one).
        let mut address: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        address.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: `address` is a sockaddr_nl of the size given.
        let bound = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&address as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if bound < 0 {
            return Err(io::Error::last_os_error());
        }
        let timeout = libc::timeval {
            tv_sec: wait.as_secs() as libc::time_t,
            tv_usec: wait.subsec_micros() as libc::suseconds_t,
        };
        crate::netlink::set_option(&fd, libc::SO_RCVTIMEO, &timeout)?;
        let mut socket = NflogSocket {
            fd,
            buffer: vec![0; 1 << 16],
        };
        socket.configure(group, NFULA_CFG_CMD, &[NFULNL_CFG_CMD_BIND], 1)?;
        let mut mode = COPY_RANGE.to_be_bytes().to_vec();
        mode.extend([NFULNL_COPY_PACKET, 0]);
        socket.configure(group, NFULA_CFG_MODE, &mode, 2)?;
        Ok(socket)
    }

    /// Sends one configuration attribute for `group` and waits for the kernel's answer.
    fn configure(&mut self, group: u16, attribute: u16, data: &[u8], seq: u32) -> io::Result<()> {
        let mut message = Vec::with_capacity(32);
        let attribute_len = 4 + data.len();
        let total = NLMSG_HEADER + NFGEN_HEADER + align(attribute_len);
        message.extend((total as u32).to_ne_bytes());
        message.extend(((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG).to_ne_bytes());
        message.extend((NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
        message.extend(seq.to_ne_bytes());
        message.extend(0u32.to_ne_bytes());
        // nfgenmsg: AF_UNSPEC, version 0, the group (big-endian).
        message.extend([0u8, 0u8]);
        message.extend(group.to_be_bytes());
        message.extend((attribute_len as u16).to_ne_bytes());
        message.extend(attribute.to_ne_bytes());
        message.extend(data);
        message.resize(total, 0);
        // SAFETY: sending a buffer of the length given on a socket this owns.
        let sent = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                message.as_ptr().cast(),
                message.len(),
                0,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        let received = self.receive_raw()?;
        let answer = &self.buffer[..received];
        if answer.len() >= NLMSG_HEADER + 4 && u16_at(answer, 4) == NLMSG_ERROR {
            let code = i32::from_ne_bytes([answer[16], answer[17], answer[18], answer[19]]);
            if code != 0 {
                return Err(io::Error::from_raw_os_error(-code));
            }
        }
        Ok(())
    }

    /// Receives into the buffer: the number of bytes (0 when the wait ran out).
    fn receive_raw(&mut self) -> io::Result<usize> {
        match crate::netlink::receive(&self.fd, &mut self.buffer) {
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Ok(0)
            }
            received => received,
        }
    }

    /// The packets of the next datagram (none when the wait ran out). `ENOBUFS` means the
    /// kernel dropped log messages the agent did not read in time: an error the caller counts
    /// and goes on from.
    pub fn receive(&mut self) -> io::Result<Vec<LoggedPacket>> {
        let received = self.receive_raw()?;
        Ok(parse_messages(&self.buffer[..received]))
    }
}

/// Whether `error` of [`NflogSocket::receive`] says the kernel dropped messages the reader did
/// not take in time (`ENOBUFS`): the socket still works.
#[cfg(target_os = "linux")]
pub fn is_overrun(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ENOBUFS)
}

fn align(len: usize) -> usize {
    (len + 3) & !3
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([bytes[at], bytes[at + 1]])
}

/// The packets of one datagram of netlink messages.
pub fn parse_messages(mut bytes: &[u8]) -> Vec<LoggedPacket> {
    let mut out = Vec::new();
    while bytes.len() >= NLMSG_HEADER {
        let len = u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        if len < NLMSG_HEADER || len > bytes.len() {
            break;
        }
        if u16_at(bytes, 4) == (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET
            && len >= NLMSG_HEADER + NFGEN_HEADER
        {
            out.push(parse_packet(&bytes[NLMSG_HEADER + NFGEN_HEADER..len]));
        }
        bytes = &bytes[align(len).min(bytes.len())..];
    }
    out
}

/// One packet message's attributes.
fn parse_packet(mut attributes: &[u8]) -> LoggedPacket {
    let mut packet = LoggedPacket {
        prefix: String::new(),
        headers: None,
    };
    while attributes.len() >= 4 {
        let len = u16_at(attributes, 0) as usize;
        if len < 4 || len > attributes.len() {
            break;
        }
        let data = &attributes[4..len];
        match u16_at(attributes, 2) & NLA_TYPE_MASK {
            NFULA_PREFIX => {
                packet.prefix = String::from_utf8_lossy(data)
                    .trim_end_matches('\0')
                    .to_string();
            }
            NFULA_PAYLOAD => packet.headers = parse_headers(data),
            _ => {}
        }
        attributes = &attributes[align(len).min(attributes.len())..];
    }
    packet
}

/// The addresses, protocol and ports of an IPv4 or IPv6 packet (its network header first).
/// IPv6 extension headers are not followed: such a packet shows its next header as protocol
/// and no ports.
pub fn parse_headers(packet: &[u8]) -> Option<PacketHeaders> {
    let version = packet.first()? >> 4;
    let (source, destination, protocol, transport): (IpAddr, IpAddr, u8, &[u8]) = match version {
        4 => {
            let header = usize::from(packet[0] & 0x0f) * 4;
            if packet.len() < 20 || header < 20 {
                return None;
            }
            let address = |at: usize| {
                IpAddr::V4(Ipv4Addr::new(
                    packet[at],
                    packet[at + 1],
                    packet[at + 2],
                    packet[at + 3],
                ))
            };
            (
                address(12),
                address(16),
                packet[9],
                packet.get(header..).unwrap_or_default(),
            )
        }
        6 => {
            if packet.len() < 40 {
                return None;
            }
            let address = |at: usize| {
                let octets: [u8; 16] = packet[at..at + 16].try_into().unwrap_or([0; 16]);
                IpAddr::V6(Ipv6Addr::from(octets))
            };
            (address(8), address(24), packet[6], &packet[40..])
        }
        _ => return None,
    };
    let ports = (matches!(protocol, 6 | 17 | 132) && transport.len() >= 4).then(|| {
        (
            u16::from_be_bytes([transport[0], transport[1]]),
            u16::from_be_bytes([transport[2], transport[3]]),
        )
    });
    Some(PacketHeaders {
        source,
        destination,
        protocol,
        ports,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A netlink message holding one logged packet with `prefix` and `payload`.
    fn message(prefix: &str, payload: &[u8]) -> Vec<u8> {
        let mut attributes = Vec::new();
        for (kind, data) in [
            (NFULA_PREFIX, [prefix.as_bytes(), b"\0"].concat()),
            (NFULA_PAYLOAD, payload.to_vec()),
        ] {
            attributes.extend(((4 + data.len()) as u16).to_ne_bytes());
            attributes.extend(kind.to_ne_bytes());
            attributes.extend(&data);
            attributes.resize(align(attributes.len()), 0);
        }
        let total = NLMSG_HEADER + NFGEN_HEADER + attributes.len();
        let mut out = Vec::new();
        out.extend((total as u32).to_ne_bytes());
        out.extend((NFNL_SUBSYS_ULOG << 8 | NFULNL_MSG_PACKET).to_ne_bytes());
        out.extend([0u8; 10]);
        out.extend([2u8, 0, 0x1e, 0x3d]);
        out.extend(attributes);
        out
    }

    #[test]
    fn a_logged_tcp_packet_reads_back_with_its_prefix_addresses_and_ports() {
        let mut ipv4 = vec![
            0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0, 10, 244, 2, 10, 10, 244, 1, 10,
        ];
        ipv4.extend([0xc3, 0x50, 0, 81, 0, 0, 0, 0]);
        let mut datagram = message("netpol deny 0123456789abcdef", &ipv4);
        let mut ipv6 = vec![0x60, 0, 0, 0, 0, 8, 17, 64];
        ipv6.extend([0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        ipv6.extend([0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        ipv6.extend([0, 53, 0, 54, 0, 8, 0, 0]);
        datagram.extend(message("netpol deny fedcba9876543210", &ipv6));
        let packets = parse_messages(&datagram);
        assert_eq!(packets.len(), 2);
        assert_eq!(packets[0].prefix, "netpol deny 0123456789abcdef");
        assert_eq!(
            packets[0].headers,
            Some(PacketHeaders {
                source: "10.244.2.10".parse().unwrap(),
                destination: "10.244.1.10".parse().unwrap(),
                protocol: 6,
                ports: Some((50000, 81)),
            })
        );
        let v6 = packets[1].headers.unwrap();
        assert_eq!(v6.destination, "fd00::2".parse::<IpAddr>().unwrap());
        assert_eq!((v6.protocol, v6.ports), (17, Some((53, 54))));
        assert_eq!(parse_headers(&[0x45, 0]), None);
    }
}
