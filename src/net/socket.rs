//! Listening sockets and client connections over TCP, a unix socket (`unixsocket`) or
//! TLS (`tls-port`, crate::tls), behind one type each so the event loop treats them
//! alike.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::path::Path;

use mio::event::Source;
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use mio::{Interest, Registry, Token};

use crate::tls::TlsStream;

pub(super) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// Boxed: a TLS session is large, and plain connections should not pay for it.
    Tls(Box<TlsStream>),
}

pub(super) enum Listener {
    Tcp(TcpListener),
    /// The listener and the address its clients show (`path:0`, as Redis).
    Unix(UnixListener, String),
    /// The `tls-port` listener: accepted sockets become TLS sessions.
    Tls(TcpListener),
}

/// A client just accepted: its stream, its address and the local one, and whether it
/// came over TCP from outside the loopback interface.
pub(super) struct Accepted {
    pub stream: Stream,
    pub addr: String,
    pub laddr: String,
    pub remote_tcp: bool,
}

impl Listener {
    pub fn accept(&self) -> io::Result<Accepted> {
        match self {
            Listener::Tcp(l) | Listener::Tls(l) => {
                let (s, peer) = l.accept()?;
                let laddr = s.local_addr().map(|a| a.to_string()).unwrap_or_default();
                Ok(Accepted {
                    stream: Stream::Tcp(s),
                    addr: peer.to_string(),
                    laddr,
                    remote_tcp: !peer.ip().is_loopback(),
                })
            }
            Listener::Unix(l, shown) => {
                let (s, _) = l.accept()?;
                Ok(Accepted {
                    stream: Stream::Unix(s),
                    addr: shown.clone(),
                    laddr: shown.clone(),
                    remote_tcp: false,
                })
            }
        }
    }

    pub fn is_tcp(&self) -> bool {
        matches!(self, Listener::Tcp(_))
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Listener::Tls(_))
    }

    /// The address of a plain TCP listener.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        match self {
            Listener::Tcp(l) => l.local_addr().ok(),
            Listener::Unix(..) | Listener::Tls(_) => None,
        }
    }

    /// The address of a TLS listener.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        match self {
            Listener::Tls(l) => l.local_addr().ok(),
            Listener::Tcp(_) | Listener::Unix(..) => None,
        }
    }
}

impl Stream {
    /// Whether a read shorter than asked means the socket is drained. Not for TLS:
    /// rustls may hold decrypted bytes no socket event announces, so TLS reads go on
    /// until `WouldBlock`.
    #[inline]
    pub fn drains_on_short_read(&self) -> bool {
        !matches!(self, Stream::Tls(_))
    }

    /// TLS records wait for room in the socket (never for TCP or unix sockets).
    #[inline]
    pub fn wants_write(&self) -> bool {
        match self {
            Stream::Tls(s) => s.wants_write(),
            _ => false,
        }
    }
}

/// Parses a `bind` entry (`127.0.0.1`, `-::1`, `*`, `::*`) into an address and whether
/// failing to bind it is tolerated.
fn bind_addr(entry: &str, port: u16) -> Option<(SocketAddr, bool)> {
    let (optional, addr) = match entry.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, entry),
    };
    let ip: IpAddr = match addr {
        "*" => IpAddr::from([0, 0, 0, 0]),
        "::*" => IpAddr::from([0u16; 8]),
        a => a.parse().ok()?,
    };
    Some((SocketAddr::new(ip, port), optional))
}

/// Binds every `bind` address on `port` (none when the port is 0) with `backlog`,
/// except those in `held` (already listened on: CONFIG SET port/bind keeps them).
/// Returns the new sockets and every address the result listens on.
pub fn bind_tcp(
    bind: &[String],
    port: u16,
    backlog: i32,
    held: &[SocketAddr],
) -> io::Result<(Vec<std::net::TcpListener>, Vec<SocketAddr>)> {
    let mut listeners = Vec::new();
    let mut addrs = Vec::new();
    if port == 0 {
        return Ok((listeners, addrs));
    }
    for entry in bind {
        let Some((addr, optional)) = bind_addr(entry, port) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("Invalid bind address '{entry}'"),
            ));
        };
        if held.contains(&addr) {
            addrs.push(addr);
            continue;
        }
        match std::net::TcpListener::bind(addr) {
            Ok(l) => {
                l.set_nonblocking(true)?;
                // SAFETY: listen() on a socket we own just updates its accept backlog.
                unsafe { libc::listen(l.as_raw_fd(), backlog) };
                addrs.push(l.local_addr()?);
                listeners.push(l);
            }
            Err(e) if optional => {
                crate::log::verbose(&format!("Skipping optional bind {addr}: {e}"))
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("Failed listening on port {port} (tcp), aborting: {e}"),
                ))
            }
        }
    }
    Ok((listeners, addrs))
}

/// Listens on the unix socket `path` (a stale file there is removed first, as Redis
/// does) and gives it mode `perm` when not 0.
pub(super) fn bind_unix(path: &str, perm: u32, backlog: i32) -> io::Result<Listener> {
    let _ = std::fs::remove_file(path);
    let l = UnixListener::bind(path)
        .map_err(|e| io::Error::new(e.kind(), format!("Failed opening Unix socket: {e}")))?;
    // SAFETY: listen() on a socket we own just updates its accept backlog.
    unsafe { libc::listen(l.as_raw_fd(), backlog) };
    if perm != 0 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm))?;
    }
    let shown = std::path::absolute(Path::new(path))
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.to_string());
    Ok(Listener::Unix(l, format!("{shown}:0")))
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tls(s) => s.flush(),
            _ => Ok(()),
        }
    }
}

macro_rules! delegate_source {
    ($ty:ty, $($variant:ident),+) => {
        impl Source for $ty {
            fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
                match self { $(Self::$variant(s, ..) => s.register(r, t, i)),+ }
            }
            fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
                match self { $(Self::$variant(s, ..) => s.reregister(r, t, i)),+ }
            }
            fn deregister(&mut self, r: &Registry) -> io::Result<()> {
                match self { $(Self::$variant(s, ..) => s.deregister(r)),+ }
            }
        }
    };
}

delegate_source!(Stream, Tcp, Unix, Tls);
delegate_source!(Listener, Tcp, Unix, Tls);
