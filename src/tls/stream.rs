//! A TLS session over a non-blocking TCP socket, with the `Read`/`Write` shape of a
//! plain socket so the event loop, the replica link and the cluster bus use it as
//! they use TCP.
//!
//! Readiness differs from TCP in two ways, which callers handle:
//! - rustls may hold decrypted bytes that no socket event will announce, so a short
//!   read does not mean the socket is drained: read until `WouldBlock`.
//! - records (handshake messages, alerts, replies) may wait in rustls when the socket
//!   is full: while `wants_write()` is true the caller keeps WRITABLE interest and
//!   calls `write` (with an empty buffer if need be) when the socket has room.

use std::io::{self, Read, Write};
use std::sync::Arc;

use mio::event::Source;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use rustls::pki_types::ServerName;

pub struct TlsStream {
    tcp: TcpStream,
    tls: rustls::Connection,
}

impl TlsStream {
    /// The server side of an accepted connection.
    pub fn accept(tcp: TcpStream, config: Arc<rustls::ServerConfig>) -> io::Result<TlsStream> {
        let tls = rustls::ServerConnection::new(config).map_err(io::Error::other)?;
        Ok(TlsStream {
            tcp,
            tls: tls.into(),
        })
    }

    /// The client side of a connection to `host` (the replica link, the cluster bus).
    pub fn connect(
        tcp: TcpStream,
        config: Arc<rustls::ClientConfig>,
        host: &str,
    ) -> io::Result<TlsStream> {
        let name = ServerName::try_from(host.to_string())
            .unwrap_or_else(|_| ServerName::try_from("localhost").expect("valid name"));
        let tls = rustls::ClientConnection::new(config, name).map_err(io::Error::other)?;
        Ok(TlsStream {
            tcp,
            tls: tls.into(),
        })
    }

    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// Records are waiting for room in the socket.
    pub fn wants_write(&self) -> bool {
        self.tls.wants_write()
    }

    pub fn is_handshaking(&self) -> bool {
        self.tls.is_handshaking()
    }

    /// The Common Name of the certificate the peer presented, once verified.
    pub fn peer_common_name(&self) -> Option<String> {
        let certs = self.tls.peer_certificates()?;
        super::common_name(certs.first()?.as_ref())
    }

    /// Sends what rustls holds until it is all sent or the socket is full.
    fn send_records(&mut self) -> io::Result<()> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.tcp) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Read for TlsStream {
    /// Decrypted bytes: those rustls holds first, then as many records as the socket
    /// has until some plaintext comes out. `Ok(0)` is the end of the stream;
    /// `WouldBlock` means the socket is drained and rustls holds nothing.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.tls.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // A peer that closed without close_notify: the end, as for TCP.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            match self.tls.read_tls(&mut self.tcp) {
                Ok(0) => return Ok(0),
                Ok(_) => {}
                Err(e) => return Err(e),
            }
            if let Err(e) = self.tls.process_new_packets() {
                // The alert rustls queued tells a TLS peer why, as OpenSSL's does; bytes
                // that are no TLS at all (a plain client on the TLS port) get the
                // connection closed without a reply, as from OpenSSL.
                if !matches!(e, rustls::Error::InvalidMessage(_)) {
                    let _ = self.send_records();
                }
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
            // Handshake replies (and key updates) go out at once.
            self.send_records()?;
        }
    }
}

impl Write for TlsStream {
    /// Encrypts as much of `buf` as rustls takes (its buffer is bounded) and sends
    /// the records, until all is sent or the socket is full. An empty `buf` sends
    /// what is waiting.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut taken = 0;
        loop {
            let n = if taken < buf.len() {
                self.tls.writer().write(&buf[taken..])?
            } else {
                0
            };
            taken += n;
            self.send_records()?;
            // Done, the socket is full, or rustls takes no more (mid-handshake).
            if taken == buf.len() || self.tls.wants_write() || n == 0 {
                break;
            }
        }
        if taken == 0 && !buf.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(taken)
    }

    /// Every slice in turn, until one is not taken whole or the socket is full: the
    /// caller waits for an edge-triggered writable event, which comes only after the
    /// socket was full, so stopping earlier with output left would stall it.
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let mut total = 0;
        for b in bufs.iter().filter(|b| !b.is_empty()) {
            match self.write(b) {
                Ok(n) => {
                    total += n;
                    if n < b.len() || self.tls.wants_write() {
                        break;
                    }
                }
                Err(e) if total > 0 && e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        Ok(total)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send_records()
    }
}

impl Source for TlsStream {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        self.tcp.register(r, t, i)
    }
    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        self.tcp.reregister(r, t, i)
    }
    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        self.tcp.deregister(r)
    }
}

/// An outgoing link (the replica's link to its master, the cluster bus): plain TCP or
/// TLS (`tls-replication`, `tls-cluster`).
pub enum LinkStream {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl LinkStream {
    pub fn tcp(&self) -> &TcpStream {
        match self {
            LinkStream::Plain(s) => s,
            LinkStream::Tls(s) => s.tcp(),
        }
    }

    pub fn wants_write(&self) -> bool {
        match self {
            LinkStream::Plain(_) => false,
            LinkStream::Tls(s) => s.wants_write(),
        }
    }
}

impl Read for LinkStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            LinkStream::Plain(s) => s.read(buf),
            LinkStream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for LinkStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            LinkStream::Plain(s) => s.write(buf),
            LinkStream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            LinkStream::Plain(_) => Ok(()),
            LinkStream::Tls(s) => s.flush(),
        }
    }
}

impl Source for LinkStream {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            LinkStream::Plain(s) => s.register(r, t, i),
            LinkStream::Tls(s) => s.register(r, t, i),
        }
    }
    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            LinkStream::Plain(s) => s.reregister(r, t, i),
            LinkStream::Tls(s) => s.reregister(r, t, i),
        }
    }
    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            LinkStream::Plain(s) => s.deregister(r),
            LinkStream::Tls(s) => s.deregister(r),
        }
    }
}
