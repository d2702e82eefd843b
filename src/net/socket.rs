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

    /// The socket's descriptor, for plain reads and writes on an I/O thread; None for
    /// TLS, whose records only its session can read and write.
    #[inline]
    pub fn plain_fd(&self) -> Option<std::os::fd::RawFd> {
        match self {
            Stream::Tcp(s) => Some(s.as_raw_fd()),
            Stream::Unix(s) => Some(s.as_raw_fd()),
            Stream::Tls(_) => None,
        }
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
            Stream::Tcp(s) => raw::recv(s.as_raw_fd(), buf),
            Stream::Unix(s) => raw::recv(s.as_raw_fd(), buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => raw::send(s.as_raw_fd(), buf),
            Stream::Unix(s) => raw::send(s.as_raw_fd(), buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => raw::writev(s.as_raw_fd(), bufs),
            Stream::Unix(s) => raw::writev(s.as_raw_fd(), bufs),
            Stream::Tls(s) => s.write_vectored(bufs),
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

/// Starts a non-blocking TCP connection to `addr`, from `source` (`bind-source-addr`)
/// when one is set: the socket is bound to that address (any port) first. As Redis's
/// best-effort binding, a source that cannot be used (not an address of this host, or
/// of the other family) is skipped and the connection goes out from any address.
/// Used by a replica's link to its master and by the cluster bus.
pub fn connect_from(addr: SocketAddr, source: &str) -> io::Result<mio::net::TcpStream> {
    if let Some(src) = source.parse::<std::net::IpAddr>().ok().filter(|s| {
        // The source must be of the destination's family.
        s.is_ipv4() == addr.is_ipv4()
    }) {
        if let Ok(s) = connect_bound(addr, SocketAddr::new(src, 0)) {
            return Ok(s);
        }
    }
    mio::net::TcpStream::connect(addr)
}

fn connect_bound(addr: SocketAddr, source: SocketAddr) -> io::Result<mio::net::TcpStream> {
    use std::os::fd::FromRawFd;
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: socket(2) with constant arguments; the descriptor it returns is owned by
    // the TcpStream built from it right away (closed on every error path by its drop).
    let fd = unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a freshly created socket nobody else owns.
    let stream = unsafe { std::net::TcpStream::from_raw_fd(fd) };
    let (src, src_len) = sockaddr_of(source);
    // SAFETY: `src` is a sockaddr_storage holding a sockaddr of `src_len` bytes.
    if unsafe { libc::bind(fd, (&src as *const libc::sockaddr_storage).cast(), src_len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let (dst, dst_len) = sockaddr_of(addr);
    // SAFETY: as above, for the destination; the socket is non-blocking, so connect
    // returns EINPROGRESS and completes later (the caller waits for writability).
    let rc = unsafe { libc::connect(fd, (&dst as *const libc::sockaddr_storage).cast(), dst_len) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e);
        }
    }
    Ok(mio::net::TcpStream::from_std(stream))
}

/// `addr` as a C socket address and its length.
fn sockaddr_of(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data for which all zeroes is valid.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// A plain socket's reads and writes as direct system calls. libc's `recv`, `send`
/// and `writev` are thread cancellation points: each marks the thread cancellable
/// around the call and unmarks it after, two atomic operations per call, for a
/// feature this server never uses. Errors are the same `io::Error`s std returns
/// (`WouldBlock`, `Interrupted` and the rest), from errno. (Linux's calls, as the
/// rest of the server's: epoll, /proc, sched_setaffinity.)
mod raw {
    use std::io;
    use std::os::fd::RawFd;

    fn result(n: libc::c_long) -> io::Result<usize> {
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: recvfrom writes at most `buf.len()` bytes into `buf`, which is valid
        // for writes of that length; no address is asked for (both pointers null).
        result(unsafe {
            libc::syscall(
                libc::SYS_recvfrom,
                fd as libc::c_long,
                buf.as_mut_ptr(),
                buf.len(),
                0 as libc::c_long,
                std::ptr::null_mut::<libc::sockaddr>(),
                std::ptr::null_mut::<libc::socklen_t>(),
            )
        })
    }

    pub fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: sendto reads at most `buf.len()` bytes from `buf`; no address
        // (null, length 0). MSG_NOSIGNAL as std's send: a closed peer is EPIPE, not
        // SIGPIPE.
        result(unsafe {
            libc::syscall(
                libc::SYS_sendto,
                fd as libc::c_long,
                buf.as_ptr(),
                buf.len(),
                libc::MSG_NOSIGNAL as libc::c_long,
                std::ptr::null::<libc::sockaddr>(),
                0 as libc::c_long,
            )
        })
    }

    pub fn writev(fd: RawFd, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        // At most IOV_MAX (Linux's 1024) slices in one call, as std's writev.
        const IOV_MAX: usize = 1024;
        let count = bufs.len().min(IOV_MAX);
        // SAFETY: `IoSlice` is ABI-compatible with `iovec` on Unix (std's guarantee),
        // and each slice is valid for reads of its length; writev only reads them.
        result(unsafe {
            libc::syscall(
                libc::SYS_writev,
                fd as libc::c_long,
                bufs.as_ptr() as *const libc::iovec,
                count as libc::c_long,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::raw;
    use std::io::{self, IoSlice};
    use std::os::fd::AsRawFd;

    /// The direct calls move bytes both ways, report an empty non-blocking socket as
    /// WouldBlock, an orderly close as 0, and a write to a closed peer as EPIPE
    /// (without SIGPIPE, which would end the test process).
    #[test]
    fn direct_socket_calls_behave_as_std() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        b.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 16];
        let e = raw::recv(b.as_raw_fd(), &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(raw::send(a.as_raw_fd(), b"hello").unwrap(), 5);
        let parts = [
            IoSlice::new(b", "),
            IoSlice::new(b""),
            IoSlice::new(b"world"),
        ];
        assert_eq!(raw::writev(a.as_raw_fd(), &parts).unwrap(), 7);
        let mut got = Vec::new();
        while got.len() < 12 {
            let n = raw::recv(b.as_raw_fd(), &mut buf).unwrap();
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, b"hello, world");
        drop(a);
        assert_eq!(raw::recv(b.as_raw_fd(), &mut buf).unwrap(), 0);
        let e = raw::send(b.as_raw_fd(), b"x").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPIPE));
        let e = raw::writev(b.as_raw_fd(), &[IoSlice::new(b"x")]).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPIPE));
    }
}
