//! Master–replica replication, wire-compatible with Redis 7 (PSYNC2).
//!
//! - `backlog.rs` — the ring of the last `repl-backlog-size` stream bytes.
//! - `master.rs` — the master side: SYNC/PSYNC (full image or `+CONTINUE` from the
//!   backlog), the replicas' REPLCONF, feeding the write stream to online replicas,
//!   pings, WAIT.
//! - `replica.rs` — the replica side: the outgoing link to a master (a non-blocking
//!   socket in the mio loop), the handshake, loading the master's RDB, applying its
//!   command stream, ACKs and reconnection with PSYNC continuation.
//!
//! The bytes sent to replicas are the executor's write stream (`exec/propagate.rs`,
//! the same commands the AOF gets): `feed` takes what the stream holds beyond what it
//! already took, once per loop turn from `aof::flush` (before replies are written)
//! and whenever exact offsets are needed (PSYNC, WAIT). A replica does not re-encode
//! what it applies: it proxies the master's bytes verbatim into its own backlog, so
//! its replid and offsets are the master's and its own replicas (chained replication)
//! can continue with PSYNC against either.
//!
//! Hooks outside this module are few: `Executor::repl` holds the state, `call` notes
//! each client's last write offset (`Client::woff`), `disconnect` calls
//! `disconnected`, `execute` asks `readonly_error`, the net loop calls `tick` and
//! routes the master link's socket events to `replica::on_event`.

pub mod backlog;
pub mod fack;
pub mod master;
pub mod replica;

use std::time::{Duration, Instant};

use crate::exec::Executor;
use crate::protocol::Reply;
use backlog::Backlog;

/// A replica attached to this server.
pub struct Peer {
    pub slot: usize,
    pub id: u64,
    pub ip: String,
    /// The port it listens on (REPLCONF listening-port).
    pub port: u16,
    /// Offset it acknowledged last (REPLCONF ACK), and when.
    pub ack_off: u64,
    /// Offset it reported fsynced in its AOF (`REPLCONF ACK … FACK`, WAITAOF).
    pub aof_off: u64,
    pub ack_time: Instant,
    /// Pre-PSYNC replicas (SYNC) never ACK.
    pub old_protocol: bool,
    /// Waiting for the snapshot of its full resynchronization: the stream produced
    /// since the snapshot's instant is held here and follows the image.
    pub waiting: Option<Vec<u8>>,
}

/// What a client told us with REPLCONF before its PSYNC.
#[derive(Default, Clone)]
pub struct PeerConf {
    pub port: u16,
    pub ip: Option<String>,
    pub capa_psync2: bool,
    pub capa_eof: bool,
}

/// A client blocked in WAIT.
pub struct Waiter {
    pub slot: usize,
    pub id: u64,
    pub target: u64,
    pub numreplicas: i64,
    pub deadline: Option<Instant>,
}

pub struct Repl {
    pub replid: String,
    pub replid2: String,
    pub second_offset: i64,
    /// `master_repl_offset`: the number of the last byte of the replication stream.
    pub offset: u64,
    pub backlog: Option<Backlog>,
    /// Absolute write-stream position already taken by `feed`.
    pub(crate) fed_upto: u64,
    pub peers: Vec<Peer>,
    /// REPLCONF settings by client id, until the client's PSYNC.
    pub confs: crate::util::FastMap<u64, PeerConf>,
    pub waiters: Vec<Waiter>,
    /// A WAIT asked for ACKs: GETACK goes out at the end of the turn.
    pub getack_pending: bool,
    last_ping: Instant,
    /// The link to our master when we are a replica.
    pub link: Option<replica::Link>,
    pub sync_full: u64,
    pub sync_partial_ok: u64,
    pub sync_partial_err: u64,
    /// The event loop's registry, for the master link's socket.
    pub registry: Option<mio::Registry>,
    /// Offset at the instant of the replication snapshot in progress.
    pub snapshot_offset: u64,
}

impl Default for Repl {
    fn default() -> Self {
        Repl {
            replid: random_id(),
            replid2: "0".repeat(40),
            second_offset: -1,
            offset: 0,
            backlog: None,
            fed_upto: 0,
            peers: Vec::new(),
            confs: Default::default(),
            waiters: Vec::new(),
            getack_pending: false,
            last_ping: Instant::now(),
            link: None,
            sync_full: 0,
            sync_partial_ok: 0,
            sync_partial_err: 0,
            registry: None,
            snapshot_offset: 0,
        }
    }
}

pub fn random_id() -> String {
    (0..40)
        .map(|_| char::from_digit(fastrand::u32(..16), 16).unwrap_or('0'))
        .collect()
}

impl Repl {
    /// Appends bytes to the replication stream: backlog and offset.
    fn push(&mut self, data: &[u8]) {
        if let Some(b) = self.backlog.as_mut() {
            b.append(data);
            self.offset += data.len() as u64;
        }
    }

    /// Milliseconds until the nearest WAIT deadline (`u64::MAX` when none).
    pub fn ms_until_deadline(&self) -> u64 {
        let now = Instant::now();
        self.waiters
            .iter()
            .filter_map(|w| w.deadline)
            .map(|d| (d.saturating_duration_since(now).as_micros() as u64).div_ceil(1000))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Whether this server follows a master.
    pub fn is_replica(&self) -> bool {
        self.link.is_some()
    }

    /// Replicas whose acknowledged offset reached `target`.
    pub fn acked(&self, target: u64) -> i64 {
        self.peers
            .iter()
            .filter(|p| p.waiting.is_none() && p.ack_off >= target)
            .count() as i64
    }

    /// Replicas whose AOF fsynced offset (FACK) reached `target` (WAITAOF).
    pub fn aof_acked(&self, target: u64) -> i64 {
        self.peers
            .iter()
            .filter(|p| p.waiting.is_none() && p.aof_off >= target)
            .count() as i64
    }
}

/// Creates the backlog (first replica), as Redis: a new replication ID, no history.
pub fn ensure_backlog(ex: &mut Executor) {
    if ex.repl.backlog.is_some() {
        return;
    }
    let size = ex.config.repl_backlog_size as usize;
    let r = &mut ex.repl;
    if r.link.is_none() {
        r.replid = random_id();
        r.replid2 = "0".repeat(40);
        r.second_offset = -1;
    }
    r.backlog = Some(Backlog::new(size));
    ex.stream.enabled = true;
    r.fed_upto = ex.stream.position();
}

/// Sends the write stream's new bytes to the backlog and the online replicas. On a
/// replica the stream is not forwarded: the master's bytes are (`forward`).
pub fn feed(ex: &mut Executor) {
    let pos = ex.stream.position();
    let r = &mut ex.repl;
    if r.fed_upto >= pos {
        r.fed_upto = pos;
        return;
    }
    if r.backlog.is_none() || r.link.is_some() {
        r.fed_upto = pos;
        return;
    }
    let base = pos - ex.stream.buf.len() as u64;
    let from = r.fed_upto.max(base);
    r.fed_upto = pos;
    let start = (from - base) as usize;
    // The stream buffer is only borrowed: copy the slice once for the sends.
    let data = ex.stream.buf[start..].to_vec();
    send_to_peers(ex, &data);
}

/// Appends bytes that are not in the write stream (PING, REPLCONF GETACK, the master's
/// bytes proxied by a replica) after whatever the stream holds.
pub fn feed_raw(ex: &mut Executor, data: &[u8]) {
    feed(ex);
    if ex.repl.backlog.is_some() {
        send_to_peers(ex, data);
    }
}

fn send_to_peers(ex: &mut Executor, data: &[u8]) {
    ex.repl.push(data);
    let mut online = Vec::new();
    for p in ex.repl.peers.iter_mut() {
        match p.waiting.as_mut() {
            Some(held) => held.extend_from_slice(data),
            None => online.push(p.slot),
        }
    }
    for slot in online {
        ex.client_mut(slot).out.extend_from_slice(data);
        ex.mark_pending_write(slot);
    }
}

/// The replication offset the stream's end will have: a client's last write is at
/// this offset (`Client::woff`, used by WAIT).
pub fn write_offset(ex: &Executor) -> u64 {
    ex.repl.offset + ex.stream.position().saturating_sub(ex.repl.fed_upto)
}

/// A client went away: forget it as a replica, a WAITer or a REPLCONF sender.
pub fn disconnected(ex: &mut Executor, slot: usize) {
    let id = ex.client(slot).id;
    let r = &mut ex.repl;
    if let Some(i) = r.peers.iter().position(|p| p.slot == slot) {
        let p = r.peers.remove(i);
        crate::log::notice(&format!(
            "Connection with replica {}:{} lost.",
            p.ip, p.port
        ));
    }
    r.waiters.retain(|w| w.slot != slot);
    r.confs.remove(&id);
    if let Some(l) = r.link.as_mut() {
        if l.client == Some(slot) {
            l.client = None;
        }
    }
}

/// A client's kind for CLIENT KILL TYPE: 0 normal, 1 pubsub, 2 replica, 3 master.
pub fn client_kind(ex: &Executor, slot: usize, c: &crate::exec::Client) -> u8 {
    if ex.repl.peers.iter().any(|p| p.slot == slot) {
        2
    } else if ex
        .repl
        .link
        .as_ref()
        .is_some_and(|l| l.client == Some(slot))
    {
        3
    } else {
        c.is_pubsub() as u8
    }
}

/// `READONLY` for writes by ordinary clients of a read-only replica.
pub fn readonly_error(ex: &Executor, slot: usize, cmd: &crate::commands::Command) -> Option<Reply> {
    let link = ex.repl.link.as_ref()?;
    if !ex.config.replica_read_only || link.client == Some(slot) || !cmd.is_write() {
        return None;
    }
    if ex.client(slot).embedded && ex.persist.loading {
        return None;
    }
    Some(Reply::err(
        "READONLY You can't write against a read only replica.",
    ))
}

/// Once per event-loop turn: WAIT deadlines and wake-ups, GETACK, pings to replicas,
/// and the replica side's timers.
pub fn tick(ex: &mut Executor) {
    replica::tick(ex);
    if ex.repl.getack_pending {
        ex.repl.getack_pending = false;
        if !ex.repl.peers.is_empty() {
            feed_raw(ex, b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n");
        }
    }
    let period = Duration::from_secs(ex.config.repl_ping_replica_period.max(1));
    if ex.repl.last_ping.elapsed() >= period {
        ex.repl.last_ping = Instant::now();
        if !ex.repl.peers.is_empty() && !ex.repl.is_replica() {
            feed_raw(ex, b"*1\r\n$4\r\nPING\r\n");
        }
    }
    if let Some(b) = ex.repl.backlog.as_mut() {
        b.resize(ex.config.repl_backlog_size as usize, ex.repl.offset);
    }
    master::serve_waiters(ex);
}

/// The INFO replication section's fields.
pub fn info(ex: &Executor, s: &mut String) {
    let r = &ex.repl;
    let mut field = |line: String| {
        s.push_str(&line);
        s.push_str("\r\n");
    };
    match &r.link {
        None => field("role:master".into()),
        Some(l) => {
            field("role:slave".into());
            field(format!("master_host:{}", l.host));
            field(format!("master_port:{}", l.port));
            let up = l.is_up();
            field(format!(
                "master_link_status:{}",
                if up { "up" } else { "down" }
            ));
            field(format!(
                "master_last_io_seconds_ago:{}",
                if up {
                    l.last_io.elapsed().as_secs() as i64
                } else {
                    -1
                }
            ));
            field(format!(
                "master_sync_in_progress:{}",
                l.sync_in_progress() as u8
            ));
            field(format!("slave_read_repl_offset:{}", l.read_reploff));
            field(format!("slave_repl_offset:{}", l.reploff));
            if let Some((total, read)) = l.transfer_progress() {
                field(format!("master_sync_total_bytes:{total}"));
                field(format!("master_sync_read_bytes:{read}"));
                field(format!(
                    "master_sync_left_bytes:{}",
                    total.saturating_sub(read)
                ));
                let perc = if total > 0 {
                    read as f64 * 100.0 / total as f64
                } else {
                    0.0
                };
                field(format!("master_sync_perc:{perc:.2}"));
                field(format!(
                    "master_sync_last_io_seconds_ago:{}",
                    l.last_io.elapsed().as_secs()
                ));
            }
            if !up {
                field(format!(
                    "master_link_down_since_seconds:{}",
                    l.down_since.map_or(-1, |t| t.elapsed().as_secs() as i64)
                ));
            }
            field(format!("slave_priority:{}", ex.config.replica_priority));
            field(format!(
                "slave_read_only:{}",
                ex.config.replica_read_only as u8
            ));
            field(format!(
                "replica_announced:{}",
                ex.config.replica_announced as u8
            ));
        }
    }
    field(format!("connected_slaves:{}", r.peers.len()));
    for (i, p) in r.peers.iter().enumerate() {
        field(format!(
            "slave{i}:ip={},port={},state={},offset={},lag={}",
            p.ip,
            p.port,
            if p.waiting.is_some() {
                "wait_bgsave"
            } else {
                "online"
            },
            p.ack_off,
            p.ack_time.elapsed().as_secs()
        ));
    }
    field("master_failover_state:no-failover".into());
    field(format!("master_replid:{}", r.replid));
    field(format!("master_replid2:{}", r.replid2));
    field(format!("master_repl_offset:{}", r.offset));
    field(format!("second_repl_offset:{}", r.second_offset));
    match &r.backlog {
        Some(b) => {
            field("repl_backlog_active:1".into());
            field(format!("repl_backlog_size:{}", b.size()));
            field(format!(
                "repl_backlog_first_byte_offset:{}",
                b.first_byte_offset(r.offset)
            ));
            field(format!("repl_backlog_histlen:{}", b.histlen()));
        }
        None => {
            field("repl_backlog_active:0".into());
            field(format!("repl_backlog_size:{}", ex.config.repl_backlog_size));
            field("repl_backlog_first_byte_offset:0".into());
            field("repl_backlog_histlen:0".into());
        }
    }
}
