//! The bus's sockets: the listener on the bus port and one link per connection,
//! each with its receive buffer (whole messages are cut out by their `totlen`) and
//! its send queue. What the messages mean is gossip.rs's business.

use std::io::{self, Read, Write};
use std::net::SocketAddr;

use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};

use crate::tls::{ClientAuth, LinkStream, TlsContext, TlsStream};

use super::node::NodeId;
use super::wire;

/// Largest message accepted; anything claiming more closes the link.
const MAX_MESSAGE: usize = 1 << 30;

pub struct Link {
    /// Plain TCP, or TLS with `tls-cluster yes`.
    pub stream: LinkStream,
    pub inbound: bool,
    pub node: Option<NodeId>,
    pub ctime: i64,
    /// Still connecting (outbound): the first writable event says how it went.
    pub connecting: bool,
    pub rbuf: Vec<u8>,
    pub wbuf: Vec<u8>,
    pub wpos: usize,
    pub peer: Option<SocketAddr>,
}

/// Send buffers larger than this are released once emptied.
const SHRINK_WBUF_ABOVE: usize = 64 * 1024;

impl Link {
    /// Bytes queued and not yet written.
    pub fn send_buffer_used(&self) -> usize {
        self.wbuf.len() - self.wpos
    }
    /// Memory held by the send queue (CLUSTER LINKS `send-buffer-allocated`,
    /// compared with `cluster-link-sendbuf-limit`).
    pub fn send_buffer_allocated(&self) -> usize {
        self.wbuf.capacity()
    }
}

pub struct Bus {
    listeners: Vec<TcpListener>,
    pub links: Vec<Option<Link>>,
    registry: Registry,
    /// Links closed while handling events, for gossip.rs to detach from their nodes.
    pub closed: Vec<(usize, Option<NodeId>, bool)>,
    /// `tls-cluster yes`: the context links are made with (a node's bus connections
    /// always require a client certificate, as Redis's).
    pub tls: Option<std::sync::Arc<TlsContext>>,
}

fn token(link: usize) -> Token {
    Token(super::TOKEN_BASE + 1 + link)
}

impl Bus {
    /// Binds the bus port on the configured addresses.
    pub fn listen(bind: &[String], port: u16, registry: Registry) -> Result<Bus, String> {
        let addrs: Vec<String> = if bind.is_empty() {
            vec!["*".into()]
        } else {
            bind.to_vec()
        };
        let mut listeners = Vec::new();
        for a in addrs {
            let a = a.trim_start_matches('-');
            let host = if a == "*" { "0.0.0.0" } else { a };
            let addr: SocketAddr = match format!("{host}:{port}").parse() {
                Ok(x) => x,
                Err(_) => match format!("[{host}]:{port}").parse() {
                    Ok(x) => x,
                    Err(_) => continue,
                },
            };
            match TcpListener::bind(addr) {
                Ok(l) => listeners.push(l),
                Err(e) if a == "::*" || a.starts_with("::") => {
                    crate::log::verbose(&format!("Cluster bus on {addr}: {e}"));
                }
                Err(e) => {
                    return Err(format!(
                        "Failed listening on port {port} (cluster), aborting: {e}"
                    ))
                }
            }
        }
        if listeners.is_empty() {
            return Err(format!(
                "Failed listening on port {port} (cluster), aborting."
            ));
        }
        for l in &mut listeners {
            registry
                .register(l, Token(super::TOKEN_BASE), Interest::READABLE)
                .map_err(|e| e.to_string())?;
        }
        Ok(Bus {
            listeners,
            links: Vec::new(),
            registry,
            closed: Vec::new(),
            tls: None,
        })
    }

    pub fn link_count(&self) -> usize {
        self.links.iter().filter(|l| l.is_some()).count()
    }

    pub fn link(&self, id: usize) -> Option<&Link> {
        self.links.get(id).and_then(|l| l.as_ref())
    }

    pub fn link_mut(&mut self, id: usize) -> Option<&mut Link> {
        self.links.get_mut(id).and_then(|l| l.as_mut())
    }

    fn insert(&mut self, mut link: Link) -> Option<usize> {
        let id = match self.links.iter().position(|l| l.is_none()) {
            Some(i) => i,
            None => {
                self.links.push(None);
                self.links.len() - 1
            }
        };
        self.registry
            .register(
                &mut link.stream,
                token(id),
                Interest::READABLE | Interest::WRITABLE,
            )
            .ok()?;
        self.links[id] = Some(link);
        Some(id)
    }

    /// Accepts pending bus connections (their node is learnt from their first
    /// message).
    pub fn accept(&mut self) {
        for i in 0..self.listeners.len() {
            loop {
                match self.listeners[i].accept() {
                    Ok((stream, peer)) => {
                        let _ = stream.set_nodelay(true);
                        let Some(stream) = self.wrap(stream, None) else {
                            continue;
                        };
                        crate::log::verbose(&format!(
                            "Accepting cluster node connection from {}:{}",
                            peer.ip(),
                            peer.port()
                        ));
                        self.insert(Link {
                            stream,
                            inbound: true,
                            node: None,
                            ctime: super::now_ms(),
                            connecting: false,
                            rbuf: Vec::new(),
                            wbuf: Vec::new(),
                            wpos: 0,
                            peer: Some(peer),
                        });
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        crate::log::verbose(&format!("Error accepting cluster node: {e}"));
                        break;
                    }
                }
            }
        }
    }

    /// Starts a non-blocking connection to a node's bus port (from `bind-source-addr`
    /// when set).
    pub fn connect(&mut self, node: NodeId, ip: &str, cport: u16, source: &str) -> Option<usize> {
        let addr: SocketAddr = format!("{ip}:{cport}")
            .parse()
            .or_else(|_| format!("[{ip}]:{cport}").parse())
            .ok()?;
        let stream = crate::net::socket::connect_from(addr, source).ok()?;
        let _ = stream.set_nodelay(true);
        let stream = self.wrap(stream, Some(ip))?;
        self.insert(Link {
            stream,
            inbound: false,
            node: Some(node),
            ctime: super::now_ms(),
            connecting: true,
            rbuf: Vec::new(),
            wbuf: Vec::new(),
            wpos: 0,
            peer: Some(addr),
        })
    }

    /// A new link's stream: TLS when the bus has a context (`host`: the node connected
    /// to, None for an accepted connection).
    fn wrap(&self, tcp: TcpStream, host: Option<&str>) -> Option<LinkStream> {
        let Some(tls) = &self.tls else {
            return Some(LinkStream::Plain(tcp));
        };
        let stream = match host {
            Some(host) => TlsStream::connect(tcp, tls.client(), host),
            None => TlsStream::accept(tcp, tls.server(ClientAuth::Yes)?),
        };
        match stream {
            Ok(s) => Some(LinkStream::Tls(Box::new(s))),
            Err(e) => {
                crate::log::verbose(&format!("Cluster bus TLS: {e}"));
                None
            }
        }
    }

    pub fn free_link(&mut self, id: usize) {
        if let Some(mut l) = self.links.get_mut(id).and_then(|l| l.take()) {
            let _ = self.registry.deregister(&mut l.stream);
        }
    }

    /// Queues a message on a link; it is written at the end of the turn.
    pub fn send(&mut self, id: usize, msg: &[u8]) {
        if let Some(l) = self.link_mut(id) {
            l.wbuf.extend_from_slice(msg);
        }
    }

    /// Writes what each link has queued; a failed write closes the link.
    pub fn flush_all(&mut self) {
        for id in 0..self.links.len() {
            self.flush(id);
        }
    }

    pub fn flush(&mut self, id: usize) {
        let Some(l) = self.link_mut(id) else { return };
        if l.connecting {
            return;
        }
        while l.wpos < l.wbuf.len() {
            match l.stream.write(&l.wbuf[l.wpos..]) {
                Ok(0) => break,
                Ok(n) => l.wpos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.close(id);
                    return;
                }
            }
        }
        // TLS records the socket had no room for go on the next writable event.
        if l.stream.wants_write() && l.stream.flush().is_err() {
            self.close(id);
            return;
        }
        if l.wpos == l.wbuf.len() {
            l.wbuf.clear();
            l.wpos = 0;
            // A burst (big PUBLISH messages) does not keep its memory once sent.
            if l.wbuf.capacity() > SHRINK_WBUF_ABOVE {
                l.wbuf = Vec::new();
            }
        }
    }

    /// INFO's mem_cluster_links: each link and its buffers.
    pub fn links_memory(&self) -> usize {
        self.links
            .iter()
            .flatten()
            .map(|l| std::mem::size_of::<Link>() + l.wbuf.capacity() + l.rbuf.capacity())
            .sum()
    }

    /// Closes a link after an I/O error and records it for gossip.rs.
    pub fn close(&mut self, id: usize) {
        if let Some(l) = self.link(id) {
            let (node, inbound) = (l.node, l.inbound);
            self.closed.push((id, node, inbound));
        }
        self.free_link(id);
    }

    /// Reads what the link has and returns the complete messages; None when the link
    /// failed (closed, or a bad signature or length).
    pub fn read_messages(&mut self, id: usize) -> Option<Vec<Vec<u8>>> {
        let l = self.link_mut(id)?;
        let mut buf = [0u8; 16 * 1024];
        loop {
            match l.stream.read(&mut buf) {
                Ok(0) => return None,
                Ok(n) => l.rbuf.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            }
            if l.rbuf.len() > MAX_MESSAGE {
                return None;
            }
        }
        let Some((ranges, at)) = wire::split_messages(&l.rbuf, MAX_MESSAGE) else {
            log_bad(l.peer);
            return None;
        };
        let out = ranges.into_iter().map(|r| l.rbuf[r].to_vec()).collect();
        l.rbuf.drain(..at);
        Some(out)
    }

    /// The local address of a link's socket (our own IP as the peer reaches us).
    pub fn local_ip(&self, id: usize) -> Option<String> {
        self.link(id)
            .and_then(|l| l.stream.tcp().local_addr().ok())
            .map(|a| canonical_ip(a.ip()))
    }

    pub fn peer_ip(&self, id: usize) -> Option<String> {
        self.link(id)
            .and_then(|l| l.stream.tcp().peer_addr().ok().or(l.peer))
            .map(|a| canonical_ip(a.ip()))
    }

    /// For a connecting link: true once connected, None when the connection failed.
    pub fn check_connected(&mut self, id: usize) -> Option<bool> {
        let l = self.link_mut(id)?;
        if !l.connecting {
            return Some(true);
        }
        if let Ok(Some(_)) | Err(_) = l.stream.tcp().take_error() {
            return None;
        }
        match l.stream.tcp().peer_addr() {
            Ok(_) => {
                l.connecting = false;
                Some(true)
            }
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Some(false),
            Err(_) => None,
        }
    }
}

fn canonical_ip(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        },
        v4 => v4.to_string(),
    }
}

fn log_bad(peer: Option<SocketAddr>) {
    match peer {
        Some(p) => crate::log::warning(&format!(
            "Bad message length or signature received on the Cluster bus from {}:{}",
            p.ip(),
            p.port()
        )),
        None => crate::log::warning("Bad message length or signature received on the Cluster bus."),
    }
}
