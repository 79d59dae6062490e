//! Real TCP and UDP probes between the hosts of a [`Topology`]: a listener in the destination's
//! namespace, a connection attempt from the source's, many at once. A TCP handshake that
//! completes, or a UDP datagram echoed back, means the packet passed the filter (the reply passes
//! as conntrack `established`); silence until the time-out means it was dropped.

use std::collections::BTreeSet;
use std::io::{self, ErrorKind};
use std::net::{IpAddr, SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::topology::Topology;

pub use crate::transport::Transport;

/// One flow to try.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    pub from: IpAddr,
    pub to: IpAddr,
    pub transport: Transport,
    pub port: u16,
}

/// What a probe saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeResult {
    Passed,
    Dropped,
    /// The probe could not tell (no route, refused, a socket error): never counted as either.
    Failed(String),
}

/// How probes run.
#[derive(Clone, Copy, Debug)]
pub struct ProbeOptions {
    /// How long silence must last to count as a drop.
    pub timeout: Duration,
    /// How many probes run at once.
    pub parallel: usize,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            timeout: Duration::from_millis(1000),
            parallel: 64,
        }
    }
}

const PAYLOAD: &[u8] = b"netpol probe";

/// Runs every probe, in parallel; results in the order of `probes`.
pub fn run(topology: &Topology, probes: &[Probe], options: ProbeOptions) -> Vec<ProbeResult> {
    let mut results = vec![ProbeResult::Dropped; probes.len()];
    let servers = match Servers::open(topology, probes) {
        Ok(s) => s,
        Err(e) => {
            let message = format!("listener: {e}");
            return vec![ProbeResult::Failed(message); probes.len()];
        }
    };
    let stop = AtomicBool::new(false);
    let next = AtomicUsize::new(0);
    let done: Vec<std::sync::Mutex<Option<ProbeResult>>> =
        probes.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        scope.spawn(|| servers.serve(&stop));
        let workers: Vec<_> = (0..options.parallel.max(1))
            .map(|_| {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(probe) = probes.get(i) else { break };
                    let result = probe_one(topology, probe, options.timeout);
                    *done[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
                })
            })
            .collect();
        for worker in workers {
            let _ = worker.join();
        }
        stop.store(true, Ordering::SeqCst);
    });
    for (slot, result) in results.iter_mut().zip(done) {
        *slot = result
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .unwrap_or_else(|| ProbeResult::Failed("the probe did not run".into()));
    }
    results
}

/// TCP probes of `(from, to, port)`, 16 at a time, each silent for `timeout` before it counts as
/// dropped; results in order.
pub fn tcp(
    topology: &Topology,
    flows: &[(IpAddr, IpAddr, u16)],
    timeout: Duration,
) -> Vec<ProbeResult> {
    let probes: Vec<Probe> = flows
        .iter()
        .map(|&(from, to, port)| Probe {
            from,
            to,
            transport: Transport::Tcp,
            port,
        })
        .collect();
    let options = ProbeOptions {
        timeout,
        parallel: 16,
    };
    run(topology, &probes, options)
}

/// One probe, from a worker thread that enters the source's namespace.
fn probe_one(topology: &Topology, probe: &Probe, timeout: Duration) -> ProbeResult {
    let Some(source) = topology.host_at(probe.from) else {
        return ProbeResult::Failed(format!("no host holds {}", probe.from));
    };
    if let Err(e) = source.enter() {
        return ProbeResult::Failed(format!("entering the namespace of {}: {e}", probe.from));
    }
    let target = SocketAddr::new(probe.to, probe.port);
    let outcome = match probe.transport {
        Transport::Tcp => tcp_connect(probe.from, target, timeout),
        Transport::Udp => udp_echo(probe.from, target, timeout),
    };
    match outcome {
        Ok(()) => ProbeResult::Passed,
        Err(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) => {
            ProbeResult::Dropped
        }
        Err(e) => ProbeResult::Failed(format!(
            "{:?} {} -> {target}: {e}",
            probe.transport, probe.from
        )),
    }
}

/// A TCP handshake from `from` exactly: a host with several addresses (a node listing two
/// InternalIPs) would otherwise send from the first of its family, and the probe would test
/// another flow than the one asked for.
fn tcp_connect(from: IpAddr, target: SocketAddr, timeout: Duration) -> io::Result<()> {
    let domain = socket2::Domain::for_address(target);
    let socket = socket2::Socket::new(domain, socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
    socket.bind(&SocketAddr::new(from, 0).into())?;
    socket.connect_timeout(&target.into(), timeout)?;
    Ok(())
}

fn udp_echo(from: IpAddr, target: SocketAddr, timeout: Duration) -> io::Result<()> {
    let socket = UdpSocket::bind(SocketAddr::new(from, 0))?;
    socket.connect(target)?;
    socket.set_read_timeout(Some(timeout))?;
    socket.send(PAYLOAD)?;
    let mut buffer = [0u8; 64];
    let n = socket.recv(&mut buffer)?;
    if &buffer[..n] == PAYLOAD {
        Ok(())
    } else {
        Err(io::Error::other("a reply that is not the probe's echo"))
    }
}

/// The listeners every probe needs, each opened inside its destination's namespace.
struct Servers {
    tcp: Vec<TcpListener>,
    udp: Vec<UdpSocket>,
}

/// A listener on `at`, waiting a little while the kernel still holds a connection of the last
/// probe's listener on the same port (its close can lag behind the probe on a loaded machine,
/// and a bind in that moment is refused).
fn bind_listener(at: SocketAddr) -> io::Result<TcpListener> {
    let mut tries = 0;
    loop {
        match TcpListener::bind(at) {
            Err(e) if e.kind() == ErrorKind::AddrInUse && tries < 40 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            result => return result,
        }
    }
}

impl Servers {
    fn open(topology: &Topology, probes: &[Probe]) -> io::Result<Servers> {
        // A probe to a Service lands on its backend: the listener goes there.
        let wanted: BTreeSet<(IpAddr, Transport, u16)> = probes
            .iter()
            .map(|p| {
                let at = topology.backend_of(SocketAddr::new(p.to, p.port));
                (at.ip(), p.transport, at.port())
            })
            .collect();
        // Sockets keep the namespace they were made in, so one thread makes them all.
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let mut servers = Servers {
                        tcp: Vec::new(),
                        udp: Vec::new(),
                    };
                    for (address, transport, port) in wanted {
                        let ns = topology
                            .host_at(address)
                            .ok_or_else(|| io::Error::other(format!("no host holds {address}")))?;
                        ns.enter()?;
                        let at = SocketAddr::new(address, port);
                        let named = |e: io::Error| io::Error::new(e.kind(), format!("{at}: {e}"));
                        match transport {
                            Transport::Tcp => {
                                let l = bind_listener(at).map_err(named)?;
                                l.set_nonblocking(true)?;
                                servers.tcp.push(l);
                            }
                            Transport::Udp => {
                                let s = UdpSocket::bind(at).map_err(named)?;
                                s.set_nonblocking(true)?;
                                servers.udp.push(s);
                            }
                        }
                    }
                    Ok(servers)
                })
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("the listener thread panicked")))
        })
    }

    /// Accepts connections and echoes datagrams until `stop`.
    fn serve(&self, stop: &AtomicBool) {
        let mut buffer = [0u8; 64];
        while !stop.load(Ordering::SeqCst) {
            let mut busy = false;
            for l in &self.tcp {
                while let Ok((stream, _)) = l.accept() {
                    busy = true;
                    drop(stream);
                }
            }
            for s in &self.udp {
                while let Ok((n, peer)) = s.recv_from(&mut buffer) {
                    busy = true;
                    let _ = s.send_to(&buffer[..n], peer);
                }
            }
            if !busy {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }
}
