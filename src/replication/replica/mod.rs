//! The replica side: the link to our master.
//!
//! The link is one non-blocking socket registered with the event loop (token
//! `LINK_TOKEN`), driven by a small state machine, as Redis's `syncWithMaster`:
//!
//! 1. `Connect` — waiting for the next attempt (at once after REPLICAOF, then every
//!    second after a failure); `Connecting` — the non-blocking connect is in flight.
//! 2. `Handshake` — `PING`; then `AUTH [masteruser] masterauth` (when set),
//!    `REPLCONF listening-port <port>` and `REPLCONF capa eof capa psync2`, sent
//!    together and answered in order; then `PSYNC <replid> <offset+1>` (our cached
//!    history) or `PSYNC ? -1`.
//! 3. `Transfer` — after `+FULLRESYNC <replid> <offset>`, the RDB payload as
//!    `$<len>\r\n` or the diskless `$EOF:<40-byte mark>\r\n` form, decoded as it
//!    arrives (`rdb::incremental`: the image is never held whole, and a slow decode
//!    slows the reading, as Redis's diskless load); once it is complete and its
//!    checksum verified, the dataset is flushed and the decoded keys installed.
//!    `+CONTINUE [<replid>]` skips it.
//! 4. `Connected` — the master's stream is parsed like a client's input and executed
//!    by the master's pseudo-client, replies dropped; `REPLCONF GETACK` is answered
//!    with `REPLCONF ACK <offset>`, and an ACK goes out every second anyway. The
//!    offset advances at command boundaries outside MULTI, and the processed bytes
//!    are forwarded verbatim to our own backlog and replicas.
//!
//! A failure at any step (or `repl-timeout` seconds without data) drops the link and
//! retries a second later with the history kept, so a short outage resumes with
//! `+CONTINUE`. Keys do not expire here by themselves: the keyspace is in
//! `ExpireMode::Hide` (expired keys read as missing but stay), and in `Keep` while
//! the master's commands run, so the master's DELs decide.

use std::io::{Read, Write};
use std::net::ToSocketAddrs;
use std::time::{Duration, Instant};

use crate::tls::LinkStream;
use mio::{Interest, Token};

use crate::exec::Executor;
use crate::keyspace::ExpireMode;
use crate::persistence::rdb::incremental::Incremental;
use crate::persistence::rdb::{FileInfo, LoadedKey};
use crate::protocol::{Limits, Request, RequestParser};

mod dual;
pub use dual::{on_token, owns_token, MAIN_TOKEN};

/// The event-loop token of the master link's socket.
pub const LINK_TOKEN: usize = usize::MAX - 65;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Pong,
    /// Replies to AUTH / REPLCONF still expected (AUTH first when `auth`).
    Conf {
        left: usize,
        auth: bool,
    },
    Psync,
    /// The RDB channel of a dual-channel sync (`dual.rs`): replies to AUTH /
    /// REPLCONF still expected, then `SYNC`'s `$ENDOFF`.
    RdbConf {
        left: usize,
        auth: bool,
    },
    EndOff,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Connect,
    Connecting,
    Handshake(Step),
    Transfer,
    /// Dual-channel sync: the image is loaded, the main channel's `+CONTINUE` not
    /// in yet.
    DualWait,
    Connected,
}

/// The longest a turn decodes a streaming image before serving others.
const DECODE_SLICE: Duration = Duration::from_millis(10);

struct Transfer {
    replid: String,
    offset: u64,
    /// Payload size, or None for the EOF-marker format.
    size: Option<usize>,
    mark: Vec<u8>,
    header_done: bool,
    /// Payload bytes received.
    received: usize,
    /// The image, decoded as it arrives (out of the link while it decodes).
    parser: Option<Incremental>,
    /// EOF-marker format: the last bytes received, held back until it is known
    /// whether they are the marker.
    tail: Vec<u8>,
    /// The replica shows itself loading while this image streams in (`begin_loading`).
    shown_loading: bool,
}

impl Transfer {
    /// The image of history `replid` at `offset`, its header not read yet.
    fn new(replid: String, offset: u64) -> Transfer {
        Transfer {
            replid,
            offset,
            size: None,
            mark: Vec::new(),
            header_done: false,
            received: 0,
            parser: None,
            tail: Vec::new(),
            shown_loading: false,
        }
    }
}

pub struct Link {
    pub host: String,
    pub port: u16,
    state: State,
    /// Plain TCP, or TLS with `tls-replication yes`.
    sock: Option<LinkStream>,
    rbuf: Vec<u8>,
    rpos: usize,
    wbuf: Vec<u8>,
    parser: RequestParser,
    /// The master's pseudo-client while connected.
    pub client: Option<usize>,
    /// Offset of the stream processed / read so far.
    pub reploff: u64,
    pub read_reploff: u64,
    pub last_io: Instant,
    pub down_since: Option<Instant>,
    retry_at: Instant,
    last_ack: Instant,
    /// Whether our replid/offset are a history the master may continue (PSYNC).
    cached: bool,
    transfer: Option<Transfer>,
    /// Processed bytes not yet forwarded (a MULTI block in progress).
    forward: Vec<u8>,
    /// A CLIENT PAUSE holds back the master's next command: the stream is read on
    /// (`read_reploff` grows) but not applied until the pause ends (`resume_held`).
    held: bool,
    /// The database the master's stream had selected when the link went down (or
    /// as an RDB recorded it): a `+CONTINUE`d stream goes on in it, as Redis's
    /// cached master keeps its db.
    pub stream_db: usize,
    /// What of the applied stream is fsynced in our AOF (the ACK's FACK).
    pub fack: super::fack::Tracker,
    /// A dual-channel sync: the socket above is its RDB channel, and this the main
    /// channel, parked until the image is loaded (`dual.rs`).
    main: Option<dual::MainChannel>,
    /// Counts the sockets the link has had: a read that ends in an error or EOF
    /// fails the link only if it is still on that socket.
    sock_gen: u64,
}

impl Link {
    fn new(host: String, port: u16, cached: bool, stream_db: usize) -> Link {
        let now = Instant::now();
        Link {
            host,
            port,
            state: State::Connect,
            sock: None,
            rbuf: Vec::new(),
            rpos: 0,
            wbuf: Vec::new(),
            parser: RequestParser::new(),
            client: None,
            reploff: 0,
            read_reploff: 0,
            held: false,
            last_io: now,
            down_since: Some(now),
            retry_at: now,
            last_ack: now,
            cached,
            transfer: None,
            forward: Vec::new(),
            stream_db,
            fack: Default::default(),
            main: None,
            sock_gen: 0,
        }
    }

    /// Whether we hold a history of this master's stream (connected, or cached for
    /// a PSYNC continuation).
    pub fn has_history(&self) -> bool {
        self.cached || self.client.is_some()
    }

    pub fn is_up(&self) -> bool {
        self.state == State::Connected
    }

    pub fn sync_in_progress(&self) -> bool {
        matches!(self.state, State::Transfer | State::DualWait)
    }

    /// (total, read) bytes of an RDB transfer with a known size.
    pub fn transfer_progress(&self) -> Option<(u64, u64)> {
        let t = self.transfer.as_ref()?;
        Some((t.size.unwrap_or(0) as u64, t.received as u64))
    }

    /// ROLE's state name.
    pub fn state_name(&self) -> &'static str {
        match self.state {
            State::Connect => "connect",
            State::Connecting => "connecting",
            State::Handshake(_) => "handshake",
            State::Transfer | State::DualWait => "sync",
            State::Connected => "connected",
        }
    }

    fn send(&mut self, args: &[&[u8]]) {
        crate::protocol::reply::encode_command(args, &mut self.wbuf);
    }

    /// Queues `REPLCONF ACK <offset> [FACK <fsynced offset>]` (written at the end of
    /// the event); `d` is the local AOF's state (`fack.rs`).
    pub fn send_ack(&mut self, d: super::fack::Durability) {
        let off = self.reploff.to_string();
        match self.fack.fack(d, self.reploff) {
            Some(f) => {
                let fs = f.to_string();
                self.send(&[b"REPLCONF", b"ACK", off.as_bytes(), b"FACK", fs.as_bytes()]);
                self.fack.last_sent = Some(f);
                self.fack.wanted = f < self.reploff;
            }
            None => {
                self.send(&[b"REPLCONF", b"ACK", off.as_bytes()]);
                self.fack.last_sent = None;
                self.fack.wanted = false;
            }
        }
        self.last_ack = Instant::now();
    }

    /// Takes a `\r\n`-terminated line from the read buffer.
    fn line(&mut self) -> Option<Vec<u8>> {
        let buf = &self.rbuf[self.rpos..];
        let nl = memchr::memchr(b'\n', buf)?;
        let mut l = buf[..nl].to_vec();
        if l.last() == Some(&b'\r') {
            l.pop();
        }
        self.rpos += nl + 1;
        Some(l)
    }
}

/// REPLICAOF host port: follow a new master.
pub fn start(ex: &mut Executor, host: String, port: u16) {
    // The stream's database where our history ends: the old master's, one an RDB
    // recorded, or our own stream's as a master.
    let stream_db = match ex.repl.link.take() {
        Some(old) => {
            let db = old.client.map_or(old.stream_db, |slot| ex.client(slot).db);
            drop_link(ex, old);
            db
        }
        None => ex.repl.restored_db.take().or(ex.stream.db()).unwrap_or(0),
    };
    // Our history is what the new master may continue from (Redis's
    // replicationCacheMasterUsingMyself).
    let cached = ex.repl.backlog.is_some();
    // Clients blocked on a master are answered now: the keys they wait for will
    // change by our new master's stream only.
    crate::exec::blocking::disconnect_all_blocked(ex);
    crate::log::set_role(true);
    crate::log::notice(&format!("Connecting to MASTER {host}:{port}"));
    // CONFIG REWRITE records the master we follow now (Redis writes masterhost).
    ex.config.replicaof = Some((host.clone(), port));
    ex.repl.link = Some(Link::new(host, port, cached, stream_db));
    ex.ks.expire_mode = ExpireMode::Hide;
    apply_role_oom_score(ex);
    // Our replicas stay, as Redis 7's: if the new master continues our history they
    // go on with it; a new history (a `+CONTINUE` with another ID, or a full sync's
    // image about to be loaded) disconnects them then.
}

/// REPLICAOF NO ONE: become a master, keeping the data and the history (the old
/// replid becomes replid2, so our replicas can continue with PSYNC).
pub fn stop(ex: &mut Executor) {
    if unset_master(ex) {
        crate::log::notice("MASTER MODE enabled (user request from 'id=0')");
    }
}

/// Turns this replica into a master (Redis's `replicationUnsetMaster`): the link goes,
/// the history stays as replid2. False when we were a master already.
pub fn unset_master(ex: &mut Executor) -> bool {
    let Some(link) = ex.repl.link.take() else {
        return false;
    };
    drop_link(ex, link);
    crate::log::set_role(false);
    let r = &mut ex.repl;
    r.replid2 = std::mem::replace(&mut r.replid, super::random_id());
    r.second_offset = r.offset as i64 + 1;
    r.fed_upto = ex.stream.position();
    ex.ks.expire_mode = ExpireMode::Delete;
    ex.config.replicaof = None;
    // A master's own expiry covers every key now.
    ex.ks.replica_local_expires.clear();
    apply_role_oom_score(ex);
    // Our replicas must hear of the new ID: they reconnect and continue by PSYNC
    // through replid2 (Redis's replicationUnsetMaster disconnects them too).
    disconnect_peers(ex);
    true
}

/// `oom-score-adj` follows the role (Redis's setOOMScoreAdj on replicaof): a failure
/// is logged and the role changes anyway, as in Redis.
fn apply_role_oom_score(ex: &Executor) {
    let _ = crate::process::apply_oom_score_adj(&ex.config, ex.repl.link.is_some());
}

fn disconnect_peers(ex: &mut Executor) {
    let slots: Vec<usize> = ex.repl.peers.iter().map(|p| p.slot).collect();
    for s in slots {
        ex.client_mut(s).close_asap = true;
        ex.close_pending = true;
    }
}

/// Closes the link's socket and the master's pseudo-client.
fn drop_link(ex: &mut Executor, mut link: Link) {
    if link.transfer.take().is_some_and(|t| t.shown_loading) {
        end_loading(ex);
    }
    dual::close_main(ex, &mut link);
    if let Some(mut s) = link.sock.take() {
        if let Some(reg) = ex.repl.registry.as_ref() {
            let _ = reg.deregister(&mut s);
        }
    }
    if let Some(slot) = link.client.take() {
        ex.disconnect(slot);
    }
}

/// CLIENT KILL of the master's pseudo-client drops the link (it reconnects and
/// continues with PSYNC). False when `slot` is not the master's client.
pub fn kill_master_client(ex: &mut Executor, slot: usize) -> bool {
    if ex
        .repl
        .link
        .as_ref()
        .is_some_and(|l| l.client == Some(slot))
    {
        fail(ex, "Connection with master lost (CLIENT KILL).");
        true
    } else {
        false
    }
}

/// Drops the connection and schedules a new attempt; the history is kept.
fn fail(ex: &mut Executor, why: &str) {
    let Some(mut link) = ex.repl.link.take() else {
        return;
    };
    // A diskless load cut short, in Redis's words.
    if link
        .transfer
        .as_ref()
        .is_some_and(|t| t.shown_loading && t.parser.is_some())
    {
        crate::log::warning(
            "Internal error in RDB reading offset 0, function at rdb.c:0 -> Unexpected EOF reading RDB file",
        );
        crate::log::warning(
            "Failed trying to load the MASTER synchronization DB from socket, check server logs.",
        );
    }
    crate::log::warning(why);
    let was_up = link.is_up();
    if let Some(mut s) = link.sock.take() {
        if let Some(reg) = ex.repl.registry.as_ref() {
            let _ = reg.deregister(&mut s);
        }
    }
    if let Some(slot) = link.client.take() {
        link.stream_db = ex.client(slot).db;
        ex.disconnect(slot);
    }
    dual::close_main(ex, &mut link);
    link.state = State::Connect;
    link.retry_at = Instant::now() + Duration::from_secs(1);
    link.rbuf.clear();
    link.rpos = 0;
    link.wbuf.clear();
    link.parser = RequestParser::new();
    if link.transfer.take().is_some_and(|t| t.shown_loading) {
        end_loading(ex);
    }
    link.forward.clear();
    if was_up {
        link.down_since = Some(Instant::now());
        link.cached = ex.repl.backlog.is_some();
    }
    ex.repl.link = Some(link);
}

/// Whether a streaming image's decoding stopped at its time slice with work left.
pub fn decode_lagging(ex: &Executor) -> bool {
    ex.repl
        .link
        .as_ref()
        .and_then(|l| l.transfer.as_ref())
        .and_then(|t| t.parser.as_ref())
        .is_some_and(|p| p.is_interrupted())
}

/// Timers: connection attempts, the ACK every second, the link timeout.
pub fn tick(ex: &mut Executor) {
    // An image's decoding goes on a slice per turn; once it has caught up, what
    // waited in the socket is read (no readiness event would announce it again).
    if decode_lagging(ex) {
        process(ex);
        if !decode_lagging(ex) {
            on_event(ex);
        }
    }
    let timeout = Duration::from_secs(ex.config.repl_timeout.max(1));
    let Some(link) = ex.repl.link.as_mut() else {
        return;
    };
    match link.state {
        State::Connect if Instant::now() >= link.retry_at => connect(ex),
        State::Connected => {
            let d = super::fack::Durability::of(ex);
            let link = ex.repl.link.as_mut().expect("link");
            // Every second, and as soon as the fsync covers more of what a GETACK
            // asked for (WAITAOF answers promptly).
            let fack_moved =
                link.fack.wanted && link.fack.fack(d, link.reploff) > link.fack.last_sent;
            if fack_moved || link.last_ack.elapsed() >= Duration::from_secs(1) {
                link.send_ack(d);
                flush(ex);
            }
            if ex
                .repl
                .link
                .as_ref()
                .is_some_and(|l| l.last_io.elapsed() > timeout)
            {
                fail(ex, "MASTER timeout: no data nor PING received...");
            }
        }
        State::Connecting | State::Handshake(_) | State::Transfer | State::DualWait
            if link.last_io.elapsed() > timeout =>
        {
            fail(ex, "Timeout connecting to the MASTER...");
        }
        _ => {}
    }
}

fn connect(ex: &mut Executor) {
    let Some(link) = ex.repl.link.as_mut() else {
        return;
    };
    link.retry_at = Instant::now() + Duration::from_secs(1);
    let addr = (link.host.as_str(), link.port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next());
    let Some(addr) = addr else {
        crate::log::warning(&format!(
            "Unable to connect to MASTER: can't resolve {}",
            link.host
        ));
        return;
    };
    let source = ex.config.stored_str("bind-source-addr");
    let tcp = match crate::net::socket::connect_from(addr, &source) {
        Ok(s) => s,
        Err(e) => {
            crate::log::warning(&format!("Unable to connect to MASTER: {e}"));
            return;
        }
    };
    let mut sock = if ex.config.stored_bool("tls-replication") {
        let Some(config) = ex.tls.as_ref().map(|t| t.client()) else {
            crate::log::warning("Unable to connect to MASTER: TLS is not configured");
            return;
        };
        match crate::tls::TlsStream::connect(tcp, config, &link.host) {
            Ok(s) => LinkStream::Tls(Box::new(s)),
            Err(e) => {
                crate::log::warning(&format!("Unable to connect to MASTER: {e}"));
                return;
            }
        }
    } else {
        LinkStream::Plain(tcp)
    };
    let Some(reg) = ex.repl.registry.as_ref() else {
        return;
    };
    if reg
        .register(
            &mut sock,
            Token(LINK_TOKEN),
            Interest::READABLE | Interest::WRITABLE,
        )
        .is_err()
    {
        return;
    }
    let link = ex.repl.link.as_mut().expect("link");
    if link.main.is_none() {
        crate::log::notice("MASTER <-> REPLICA sync started");
    }
    link.sock = Some(sock);
    link.sock_gen += 1;
    link.state = State::Connecting;
    link.last_io = Instant::now();
}

/// Socket events of the master link.
pub fn on_event(ex: &mut Executor) {
    let Some(link) = ex.repl.link.as_mut() else {
        return;
    };
    if link.state == State::Connecting {
        let Some(sock) = link.sock.as_ref().map(|s| s.tcp()) else {
            return;
        };
        match (sock.take_error(), sock.peer_addr()) {
            (Ok(None), Ok(_)) => {}
            (Ok(None), Err(e)) if e.kind() == std::io::ErrorKind::NotConnected => return,
            (Ok(Some(e)), _) | (Err(e), _) | (_, Err(e)) => {
                return fail(ex, &format!("Error condition on socket for SYNC: {e}"));
            }
        }
        let _ = sock.set_nodelay(true);
        if link.main.is_some() {
            dual::send_rdb_handshake(ex);
        } else {
            crate::log::notice("Non blocking connect for SYNC fired the event.");
            link.state = State::Handshake(Step::Pong);
            link.send(&[b"PING"]);
        }
    }
    // Read everything available (edge-triggered), unless an image's decoding lags:
    // then the bytes wait in the socket (`tick` comes back for them). A decode that
    // catches up here, after a read was skipped, reads at once: the readiness event
    // that announced those bytes is spent and no other would come.
    let mut closed = None;
    let gen = ex.repl.link.as_ref().map_or(0, |l| l.sock_gen);
    loop {
        let skipped_read = decode_lagging(ex);
        if !skipped_read {
            let link = ex.repl.link.as_mut().expect("link");
            let Some(sock) = link.sock.as_mut() else {
                return;
            };
            loop {
                if link.rbuf.len() - link.rpos < 16 * 1024 && link.rpos > 0 {
                    link.rbuf.drain(..link.rpos);
                    link.rpos = 0;
                }
                let eof = "Connection with master lost.";
                match read_link(sock, &mut link.rbuf, &mut link.last_io, &mut ex.stats, eof) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(why) => {
                        closed = Some(why);
                        break;
                    }
                }
            }
        }
        process(ex);
        if !skipped_read || closed.is_some() || decode_lagging(ex) || ex.repl.link.is_none() {
            break;
        }
    }
    flush(ex);
    // A dual-channel sync's RDB channel, closed by the master once its image is out,
    // is no longer the link's socket when that image completed the sync.
    let same_socket = ex.repl.link.as_ref().is_some_and(|l| l.sock_gen == gen);
    // Nor while an image's decoding lags behind what was read: the master may have
    // sent all of it before closing (a dual-channel sync's RDB channel does). `tick`
    // reads again once the decoding has caught up, finds the close again if the image
    // did not complete the sync, and fails the link then.
    if let Some(why) = closed.filter(|_| same_socket && !decode_lagging(ex)) {
        fail(ex, &why);
    }
}

/// One read of `sock` appended to `buf` (64 KB of room), counted and stamped:
/// `Ok(n)` bytes, `Ok(0)` when nothing more waits, `Err(why)` when the master closed
/// the connection (`eof` says it) or reading failed.
fn read_link(
    sock: &mut LinkStream,
    buf: &mut Vec<u8>,
    last_io: &mut Instant,
    stats: &mut crate::exec::Stats,
    eof: &str,
) -> Result<usize, String> {
    let len = buf.len();
    buf.resize(len + 64 * 1024, 0);
    loop {
        match sock.read(&mut buf[len..]) {
            Ok(0) => {
                buf.truncate(len);
                return Err(eof.to_string());
            }
            Ok(n) => {
                buf.truncate(len + n);
                *last_io = Instant::now();
                stats.total_net_input_bytes += n as u64;
                return Ok(n);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                buf.truncate(len);
                return if e.kind() == std::io::ErrorKind::WouldBlock {
                    Ok(0)
                } else {
                    Err(format!("Error reading from MASTER: {e}"))
                };
            }
        }
    }
}

/// Writes what the link has queued.
fn flush(ex: &mut Executor) {
    let Some(link) = ex.repl.link.as_mut() else {
        return;
    };
    let Some(sock) = link.sock.as_mut() else {
        return;
    };
    if link.state == State::Connecting {
        return;
    }
    while !link.wbuf.is_empty() {
        match sock.write(&link.wbuf) {
            Ok(n) => {
                link.wbuf.drain(..n);
                ex.stats.total_net_output_bytes += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                let why = format!("Error writing to MASTER: {e}");
                return fail(ex, &why);
            }
        }
    }
    // TLS records the socket had no room for (WRITABLE brings us back).
    if link.wbuf.is_empty() && sock.wants_write() {
        if let Err(e) = sock.flush() {
            let why = format!("Error writing to MASTER: {e}");
            fail(ex, &why);
        }
    }
}

/// Handles what was read, according to the state.
fn process(ex: &mut Executor) {
    loop {
        let Some(link) = ex.repl.link.as_mut() else {
            return;
        };
        match link.state {
            State::Handshake(step) => {
                let Some(line) = link.line() else { return };
                if !handshake(ex, step, &line) {
                    return;
                }
            }
            State::Transfer => {
                if !transfer(ex) {
                    return;
                }
            }
            State::Connected => return apply(ex),
            _ => return,
        }
    }
}

/// The port the master is told we listen on: `replica-announce-port` replaces what
/// the master sees (behind NAT or port forwarding), as Redis sends it.
fn announced_port(ex: &Executor) -> String {
    let tls_port = crate::tls::port(&ex.config);
    match ex.config.stored_i64("replica-announce-port") {
        // Over TLS, the TLS port is the one to reach this replica at, as Redis sends.
        0 if ex.config.stored_bool("tls-replication") && tls_port != 0 => tls_port.to_string(),
        0 => ex.config.port.to_string(),
        p => p.to_string(),
    }
}

/// One handshake reply; false when the link failed.
fn handshake(ex: &mut Executor, step: Step, line: &[u8]) -> bool {
    let text = String::from_utf8_lossy(line).into_owned();
    let port = announced_port(ex);
    let announce_ip = ex.config.stored_str("replica-announce-ip");
    let auth = ex.config.masterauth.clone();
    let user = ex.config.masteruser.clone();
    let (replid, offset) = (ex.repl.replid.clone(), ex.repl.offset);
    // A master failing over to this one asks it to take over (FAILOVER).
    let failover = super::failover::in_progress(ex);
    let link = ex.repl.link.as_mut().expect("link");
    match step {
        Step::RdbConf { .. } | Step::EndOff => return dual::rdb_handshake(ex, step, line, &text),
        Step::Pong => {
            // NOAUTH/NOPERM mean the AUTH that follows is needed.
            if line.first() == Some(&b'-')
                && !text.starts_with("-NOAUTH")
                && !text.starts_with("-NOPERM")
                && !text.starts_with("-ERR operation not permitted")
            {
                fail(ex, &format!("Error reply to PING from master: '{text}'"));
                return false;
            }
            crate::log::notice("Master replied to PING, replication can continue...");
            let mut left = 2;
            if let Some(pass) = &auth {
                match &user {
                    Some(u) => link.send(&[b"AUTH", u.as_bytes(), pass.as_bytes()]),
                    None => link.send(&[b"AUTH", pass.as_bytes()]),
                }
                left += 1;
            }
            link.send(&[b"REPLCONF", b"listening-port", port.as_bytes()]);
            if !announce_ip.is_empty() {
                link.send(&[b"REPLCONF", b"ip-address", announce_ip.as_bytes()]);
                left += 1;
            }
            if ex.config.stored_bool("dual-channel-replication-enabled") {
                link.send(&[
                    b"REPLCONF",
                    b"capa",
                    b"eof",
                    b"capa",
                    b"psync2",
                    b"capa",
                    b"dual-channel",
                ]);
            } else {
                link.send(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"]);
            }
            link.state = State::Handshake(Step::Conf {
                left,
                auth: auth.is_some(),
            });
        }
        Step::Conf { left, auth } => {
            if auth && line.first() == Some(&b'-') {
                fail(ex, &format!("Unable to AUTH to MASTER: {text}"));
                return false;
            }
            if line.first() == Some(&b'-') {
                crate::log::notice(&format!(
                    "(Non critical) Master does not understand REPLCONF: {text}"
                ));
            }
            if left > 1 {
                link.state = State::Handshake(Step::Conf {
                    left: left - 1,
                    auth: false,
                });
            } else {
                if link.cached {
                    let off = (offset + 1).to_string();
                    crate::log::notice(&format!(
                        "Trying a partial resynchronization (request {replid}:{off})."
                    ));
                    let mut psync: Vec<&[u8]> = vec![b"PSYNC", replid.as_bytes(), off.as_bytes()];
                    if failover {
                        psync.push(b"FAILOVER");
                    }
                    link.send(&psync);
                } else {
                    crate::log::notice("Partial resynchronization not possible (no cached master)");
                    let mut psync: Vec<&[u8]> = vec![b"PSYNC", b"?", b"-1"];
                    if failover {
                        psync.push(b"FAILOVER");
                    }
                    link.send(&psync);
                }
                link.state = State::Handshake(Step::Psync);
            }
        }
        Step::Psync => {
            if line.is_empty() {
                // A newline the master sends to keep the link alive.
                return true;
            }
            let mut words = text.split(' ');
            match words.next() {
                Some("+FULLRESYNC") => {
                    let id = words.next().unwrap_or_default().to_string();
                    let off = words.next().and_then(|o| o.parse().ok()).unwrap_or(0);
                    crate::log::notice(&format!("Full resync from master: {id}:{off}"));
                    link.transfer = Some(Transfer::new(id, off));
                    link.state = State::Transfer;
                    if failover {
                        super::failover::clear(ex);
                    }
                }
                Some("+DUALCHANNELSYNC") if !failover => {
                    crate::log::notice("PSYNC is not possible, initialize RDB channel.");
                    dual::open_rdb_channel(ex);
                }
                Some("+CONTINUE") => {
                    if failover {
                        super::failover::clear(ex);
                    }
                    crate::log::notice("Successful partial resynchronization with master.");
                    if let Some(id) = words.next().filter(|id| id.len() == 40) {
                        let r = &mut ex.repl;
                        if id != r.replid {
                            crate::log::notice(&format!("Master replication ID changed to {id}"));
                            r.replid2 = std::mem::replace(&mut r.replid, id.to_string());
                            r.second_offset = r.offset as i64 + 1;
                            // Our replicas follow the old ID: they must reconnect
                            // and continue under the new one.
                            disconnect_peers(ex);
                        }
                    }
                    connected(ex);
                }
                _ if failover => {
                    super::failover::abort(ex, "Failover target rejected psync request");
                    return false;
                }
                _ => {
                    fail(
                        ex,
                        &format!("Unexpected reply to PSYNC from master: {text}"),
                    );
                    return false;
                }
            }
        }
    }
    true
}

/// Receives the RDB payload; true when done (the state moved on).
fn transfer(ex: &mut Executor) -> bool {
    let header_read = ex
        .repl
        .link
        .as_ref()
        .and_then(|l| l.transfer.as_ref())
        .is_some_and(|t| t.header_done);
    // Where the image goes, in the log's words: Redis writes it to disk unless the
    // load is diskless; ours is decoded as it arrives either way, and installed once
    // complete and verified.
    let target = if header_read || !diskless_load(ex) {
        "to disk"
    } else {
        "to parser"
    };
    let check = crate::persistence::load_check(ex);
    let link = ex.repl.link.as_mut().expect("link");
    let Some(t) = link.transfer.as_mut() else {
        return false;
    };
    if !t.header_done {
        let buf = &link.rbuf[link.rpos..];
        let Some(nl) = memchr::memchr(b'\n', buf) else {
            return false;
        };
        let mut l = buf[..nl].to_vec();
        link.rpos += nl + 1;
        if l.last() == Some(&b'\r') {
            l.pop();
        }
        if l.is_empty() {
            return true; // keepalive newline
        }
        if l.first() == Some(&b'-') {
            let why = format!(
                "MASTER aborted replication with an error: {}",
                String::from_utf8_lossy(&l)
            );
            fail(ex, &why);
            return false;
        }
        if l.first() != Some(&b'$') {
            let why = format!(
                "Bad protocol from MASTER, the first byte is not '$' (we received '{}'), are you sure the host and port are right?",
                String::from_utf8_lossy(&l)
            );
            fail(ex, &why);
            return false;
        }
        if let Some(mark) = l.strip_prefix(b"$EOF:") {
            t.mark = mark.to_vec();
            crate::log::notice(&format!(
                "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF {target}"
            ));
        } else {
            let size = std::str::from_utf8(&l[1..])
                .ok()
                .and_then(|s| s.parse::<usize>().ok());
            let Some(size) = size else {
                fail(ex, "Bad RDB size from MASTER");
                return false;
            };
            t.size = Some(size);
            crate::log::notice(&format!(
                "MASTER <-> REPLICA sync: receiving {size} bytes from master {target}"
            ));
        }
        t.header_done = true;
        t.parser = Some(Incremental::new(check));
        let replid = t.replid.clone();
        let shown = begin_loading(ex, &replid);
        if shown {
            crate::log::notice("MASTER <-> REPLICA sync: Loading DB in memory");
        }
        if let Some(t) = ex.repl.link.as_mut().and_then(|l| l.transfer.as_mut()) {
            t.shown_loading = shown;
        }
        // The payload is read on the next round.
        return true;
    }
    // The payload's bytes are decoded as they arrive, a slice of time per turn; with
    // the EOF-marker format the last marker-length bytes wait until more follow them.
    // While decoding lags, nothing more is taken (nor read from the socket: `backlog`),
    // so a slow decode slows the master's sending, as Redis's diskless load does.
    let lagging = t.parser.as_ref().is_some_and(|p| p.is_interrupted());
    let avail: &[u8] = if lagging {
        &[]
    } else {
        &link.rbuf[link.rpos..]
    };
    let (chunk, done) = match t.size {
        Some(size) => {
            let n = (size - t.received).min(avail.len());
            t.received += n;
            link.rpos += n;
            (avail[..n].to_vec(), t.received == size)
        }
        None => {
            t.received += avail.len();
            t.tail.extend_from_slice(avail);
            link.rpos += avail.len();
            let keep = t.mark.len().min(t.tail.len());
            let chunk: Vec<u8> = t.tail.drain(..t.tail.len() - keep).collect();
            (chunk, t.tail == t.mark)
        }
    };
    let Some(mut parser) = t.parser.take() else {
        return false;
    };
    let lim = crate::persistence::rdb::Limits::from_config(&ex.config);
    let mut pacer = crate::persistence::snapshot::LoadPacer::new(ex);
    let deadline = Instant::now() + DECODE_SLICE;
    let decoded = parser.push_until(
        &chunk,
        &lim,
        &mut |pos| pacer.key_loaded(ex, pos),
        Some(deadline),
    );
    drop(chunk);
    // A round served meanwhile may have ended the transfer (REPLICAOF NO ONE).
    let Some(link) = ex.repl.link.as_mut() else {
        return false;
    };
    // Decoding is the link's activity too (Redis's load refreshes its transfer clock).
    link.last_io = Instant::now();
    let Some(t) = link.transfer.as_mut() else {
        return false;
    };
    if decoded.is_ok() && (!done || parser.is_interrupted()) {
        t.parser = Some(parser);
        return false;
    }
    let t = ex
        .repl
        .link
        .as_mut()
        .and_then(|l| l.transfer.take())
        .expect("transfer");
    if t.shown_loading {
        end_loading(ex);
    }
    let image = decoded.and_then(|_| parser.finish(&lim, &mut |pos| pacer.key_loaded(ex, pos)));
    match image {
        Ok(image) => load(ex, t, image),
        Err(e) => {
            crate::log::warning(&format!(
                "Internal error in RDB reading offset 0, function at rdb.c:0 -> {}",
                e.reason()
            ));
            fail(
                ex,
                "Failed trying to load the MASTER synchronization DB from socket, check server logs.",
            );
            false
        }
    }
}

/// How the replica shows itself while a full sync's image streams in, as Redis's
/// diskless load does (Cinnabar decodes the image as it arrives and installs it once
/// complete, whatever the setting): with `repl-diskless-load swapdb` over the same history it
/// serves the old data but refuses the commands and settings that would disturb the
/// swap (`async_loading`); with `swapdb` from another history, or `on-empty-db` on
/// an empty dataset, it is loading (`-LOADING` for commands not flagged `loading`);
/// with `disabled` it serves the old data, as Redis does while it writes the image
/// to disk. True when it shows itself loading either way.
fn begin_loading(ex: &mut Executor, replid: &str) -> bool {
    if !diskless_load(ex) {
        return false;
    }
    if ex.config.stored_str("repl-diskless-load") == "swapdb" && ex.repl.replid == replid {
        ex.persist.async_loading = true;
    } else {
        ex.persist.loading = true;
        ex.persist.serving_while_loading = true;
    }
    true
}

/// Whether a full sync's image is a diskless load (Redis's useDisklessLoad):
/// `swapdb`, or `on-empty-db` with no keys.
fn diskless_load(ex: &Executor) -> bool {
    match ex.config.stored_str("repl-diskless-load").as_str() {
        "swapdb" => true,
        "on-empty-db" => ex.ks.dbs.iter().all(|d| d.table.is_empty()),
        _ => false,
    }
}

/// The image is in (or the transfer failed): the replica stops showing itself loading.
fn end_loading(ex: &mut Executor) {
    ex.persist.async_loading = false;
    ex.persist.loading = false;
    ex.persist.serving_while_loading = false;
}

/// Replaces the dataset with the master's image, decoded and verified; true when
/// loaded.
fn load(ex: &mut Executor, t: Transfer, image: (FileInfo, Vec<LoadedKey>)) -> bool {
    crate::log::notice("MASTER <-> REPLICA sync: Flushing old data");
    crate::persistence::snapshot::kill_bgsave(ex);
    ex.signal_flushed_db(None);
    ex.ks.flush_all(true);
    // The replica ends with exactly the master's libraries (Redis's emptyData).
    crate::scripting::functions::flush_libraries(ex);
    if !t.shown_loading {
        crate::log::notice("MASTER <-> REPLICA sync: Loading DB in memory");
    }
    ex.persist.loading = true;
    // The master's keys: their TTLs are the master's to enforce (Keep, so none is
    // taken for a key of our own clients').
    ex.ks.replica_local_expires.clear();
    ex.ks.expire_mode = ExpireMode::Keep;
    let (info, keys) = image;
    // A dual-channel sync's main channel is read meanwhile (the master's stream
    // waits here rather than there).
    let r = crate::persistence::snapshot::install_image_with(
        ex,
        info,
        keys,
        false,
        &mut dual::read_main,
    );
    ex.ks.expire_mode = ExpireMode::Hide;
    ex.persist.loading = false;
    if let Err(e) = r {
        fail(
            ex,
            &format!("Failed trying to load the MASTER synchronization DB from socket: {e}"),
        );
        return false;
    }
    ex.ks.dirty += 1;
    // Our history is now the master's: its ID and offset, a fresh backlog.
    disconnect_peers(ex);
    let r = &mut ex.repl;
    r.replid = t.replid;
    r.replid2 = "0".repeat(40);
    r.second_offset = -1;
    r.offset = t.offset;
    if let Some(l) = r.link.as_mut() {
        // The master's stream after an image starts with its SELECT.
        l.stream_db = 0;
    }
    r.backlog = Some(super::buffer::ReplBuffer::new(
        ex.config.repl_backlog_size as usize,
    ));
    ex.stream.enabled = true;
    r.fed_upto = ex.stream.position();
    crate::log::notice("MASTER <-> REPLICA sync: Finished with success");
    if let Some(l) = ex.repl.link.as_mut() {
        l.fack.reset(t.offset);
    }
    // The AOF must start again from the new dataset.
    if ex.aof.is_some() && crate::persistence::aof::start_rewrite(ex).is_err() {
        if let Some(a) = ex.aof.as_mut() {
            a.rewrite_scheduled = true;
        }
    }
    if ex.repl.link.as_ref().is_some_and(|l| l.main.is_some()) {
        dual::image_loaded(ex);
    } else {
        connected(ex);
    }
    true
}

/// The link is up: the master's pseudo-client applies its stream from here.
fn connected(ex: &mut Executor) {
    let slot = ex.connect_internal("master");
    let db = ex.repl.link.as_ref().map_or(0, |l| l.stream_db);
    let ndbs = ex.ks.dbs.len();
    let (addr, laddr, fd) = ex.repl.link.as_ref().map_or_else(Default::default, |l| {
        let s = l.sock.as_ref().map(|s| s.tcp());
        (
            s.and_then(|s| s.peer_addr().ok())
                .map_or_else(|| format!("{}:{}", l.host, l.port), |a| a.to_string()),
            s.and_then(|s| s.local_addr().ok())
                .map(|a| a.to_string())
                .unwrap_or_default(),
            s.map_or(-1, |s| std::os::fd::AsRawFd::as_raw_fd(s) as i64),
        )
    });
    let c = ex.client_mut(slot);
    c.db = if db < ndbs { db } else { 0 };
    // Listed by CLIENT LIST as Redis lists its master client.
    c.repl_role = Some('M');
    // No user's client: Redis's master client has no user and lists as "(superuser)".
    c.user = "(superuser)".into();
    c.addr = addr;
    c.laddr = laddr;
    c.fd = fd;
    let d = super::fack::Durability::of(ex);
    let offset = ex.repl.offset;
    let link = ex.repl.link.as_mut().expect("link");
    link.client = Some(slot);
    link.reploff = offset;
    link.read_reploff = offset;
    link.cached = true;
    link.down_since = None;
    link.state = State::Connected;
    link.parser = RequestParser::new();
    link.send_ack(d);
}

/// Whether the master's stream waits for a CLIENT PAUSE to end.
pub fn held(ex: &Executor) -> bool {
    ex.repl.link.as_ref().is_some_and(|l| l.held)
}

/// Applies what a pause held back, once it no longer holds (the loop asks every turn
/// while `held`, as for held clients).
pub fn resume_held(ex: &mut Executor) {
    if held(ex) {
        apply(ex);
        flush(ex);
    }
}

/// Runs the master's commands in the read buffer.
fn apply(ex: &mut Executor) {
    let Some(slot) = ex.repl.link.as_ref().and_then(|l| l.client) else {
        return;
    };
    let limits = Limits {
        max_bulk_len: ex.config.proto_max_bulk_len,
        authenticated: true,
    };
    let mut link = ex.repl.link.take().expect("link");
    ex.repl.applying_master = true;
    ex.ks.expire_mode = ExpireMode::Keep;
    link.held = false;
    loop {
        let mut getack = false;
        let buf = &link.rbuf[link.rpos..];
        let consumed = match link.parser.parse(buf, &limits) {
            Ok(None) => break,
            Ok(Some(Request::Empty { consumed })) => consumed,
            Ok(Some(Request::Multibulk { consumed })) => {
                let args: smallvec::SmallVec<[&[u8]; 8]> = link
                    .parser
                    .ranges()
                    .iter()
                    .map(|&(s, e)| &buf[s..e])
                    .collect();
                if ex.master_command_paused(slot, &args) {
                    link.held = true;
                    break;
                }
                getack = run(ex, slot, &args);
                consumed
            }
            Ok(Some(Request::Inline { consumed, args })) => {
                let args: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
                if ex.master_command_paused(slot, &args) {
                    link.held = true;
                    break;
                }
                getack = run(ex, slot, &args);
                consumed
            }
            Err(e) => {
                ex.ks.expire_mode = ExpireMode::Hide;
                ex.repl.applying_master = false;
                ex.repl.link = Some(link);
                return fail(ex, &format!("Protocol error from MASTER: {}", e.0));
            }
        };
        if getack {
            // The ACK does not count the GETACK itself, as Redis.
            link.fack.checkpoint(ex.stream.position(), link.reploff);
            link.send_ack(super::fack::Durability::of(ex));
        }
        let bytes = &link.rbuf[link.rpos..link.rpos + consumed];
        link.forward.extend_from_slice(bytes);
        link.rpos += consumed;
        let in_multi = ex.client(slot).in_multi();
        if !in_multi {
            link.reploff += link.forward.len() as u64;
            let fwd = std::mem::take(&mut link.forward);
            ex.repl.link = Some(link);
            super::feed_raw(ex, &fwd);
            link = ex.repl.link.take().expect("link");
        }
    }
    link.read_reploff = link.reploff + (link.forward.len() + link.rbuf.len() - link.rpos) as u64;
    link.fack.checkpoint(ex.stream.position(), link.reploff);
    ex.ks.expire_mode = ExpireMode::Hide;
    ex.repl.applying_master = false;
    ex.repl.link = Some(link);
    if ex.blocking.has_ready() {
        crate::exec::blocking::handle_ready(ex);
    }
}

/// Runs one command from the master, its reply dropped; true for REPLCONF GETACK,
/// which the caller answers (the link is out of `ex.repl` while commands run).
fn run(ex: &mut Executor, slot: usize, args: &[&[u8]]) -> bool {
    if args.len() >= 2
        && args[0].eq_ignore_ascii_case(b"replconf")
        && args[1].eq_ignore_ascii_case(b"getack")
    {
        return true;
    }
    if let crate::protocol::Reply::Error(e) = ex.execute(slot, args) {
        // Our dataset may now differ from the master's: logged as Redis's
        // afterErrorReply does (`propagation-error-behavior` panics are not done).
        let name = crate::commands::lookup(args[0]).map_or("<unknown>", |c| c.name);
        let e: String = e.chars().take(4096).collect();
        crate::log::warning(&format!(
            "== CRITICAL == This replica is sending an error to its master: '{e}' after processing the command '{name}'"
        ));
        ex.stats.unexpected_error_replies += 1;
    }
    false
}
