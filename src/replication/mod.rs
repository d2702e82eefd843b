//! Master–replica replication, wire-compatible with Redis 7 (PSYNC2).
//!
//! - `buffer.rs` — Redis 7's shared replication buffer: the stream kept once, in
//!   blocks the backlog and every replica's output refer to.
//! - `master.rs` — the master side: SYNC/PSYNC (full image or `+CONTINUE` from the
//!   backlog), the replicas' REPLCONF, feeding the write stream to online replicas,
//!   pings, WAIT.
//! - `replica/` — the replica side: the outgoing link to a master (a non-blocking
//!   socket in the mio loop), the handshake, loading the master's RDB, applying its
//!   command stream, ACKs and reconnection with PSYNC continuation; `replica/dual.rs`
//!   the dual-channel full sync (Valkey 8's protocol), whose master side is in
//!   `master.rs`.
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

pub mod buffer;
pub mod fack;
pub mod failover;
pub mod master;
pub mod replica;

use std::time::{Duration, Instant};

use crate::exec::Executor;
use buffer::{Piece, Pieces, ReplBuffer};

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
    pub state: PeerState,
    /// The stream produced while the replica is not online (its snapshot is being
    /// taken or its image sent): it follows the image. This is what the `replica`
    /// class of `client-output-buffer-limit` counts until the replica is online, as
    /// Redis counts the replication buffer a syncing replica references.
    pub held: Pieces,
    /// The image being sent (`SendBulk`), read in slices into the output buffer.
    pub image: Option<ImageFeed>,
    /// Asked for the image only (`REPLCONF rdb-only 1`): closed once it is sent.
    pub rdb_only: bool,
    /// A full resynchronization not started yet (`WaitStart`).
    pub pending: Option<PendingFull>,
    /// `SendStream`: since when its output has not drained, and how much it held
    /// then (`repl-timeout` disconnects a replica stuck that long, as Redis's
    /// `repl_last_partial_write`).
    pub stuck: Option<(Instant, usize)>,
    /// Online after a streamed image, its stream still held until its first
    /// REPLCONF ACK says the image is loaded: the replica finds the image's end
    /// marker only as the last bytes it has read (Redis's
    /// `repl_start_cmd_stream_on_ack`).
    pub await_ack: bool,
    /// The whole image is in its output buffer (`Some(marked)`: whether it ended
    /// with an EOF marker): it goes online once that is written, so neither the
    /// stream nor the output limit ever mixes with image bytes.
    pub image_queued: Option<bool>,
    /// The RDB channel of a dual-channel full sync (`REPLCONF rdb-channel 1`): it
    /// gets the image only; its replica's main channel gets the stream.
    pub rdb_channel: bool,
    /// An RDB channel's snapshot offset (`$ENDOFF`) while it holds the stream from
    /// there for its main channel's PSYNC; None once that has taken it.
    pub psync_wait: Option<u64>,
    /// An RDB channel's whole image is written while its main channel has not
    /// attached yet: it is closed once that attaches.
    pub image_done: bool,
}

/// A diskless full resynchronization in progress: the snapshot's pipe, and the
/// marker that frames the image on the wire.
pub struct ImageStream {
    pub pipe: std::sync::Arc<crate::persistence::cow::ImagePipe>,
    pub mark: [u8; 40],
    /// Bytes handed to the replicas so far: none yet, and a replica may still join.
    pub sent: u64,
}

/// A full resynchronization delayed by `repl-diskless-sync-delay`, so that replicas
/// arriving meanwhile share its snapshot.
pub struct PendingFull {
    pub conf: PeerConf,
    /// PSYNC (answered `+FULLRESYNC` when it starts) rather than SYNC.
    pub psync: bool,
    pub since: Instant,
}

/// A replica's synchronization state (INFO's `state=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    /// Its full resynchronization waits to start (`repl-diskless-sync-delay`, or a
    /// snapshot it cannot share to end): not answered yet, nothing held for it.
    WaitStart,
    /// Waiting for the snapshot of its full resynchronization.
    WaitBgsave,
    /// Receiving a diskless image as the snapshot produces it (`$EOF:<mark>`): INFO
    /// says `wait_bgsave`, as for Redis's socket-target replicas.
    SendStream,
    /// Receiving the image.
    SendBulk,
    /// The main channel of a dual-channel full sync: receiving the stream, which
    /// the replica buffers while it loads the image from the RDB channel; online at
    /// its first ACK.
    BgRdbLoad,
    /// Receiving the stream.
    Online,
}

impl PeerState {
    pub fn name(self) -> &'static str {
        match self {
            PeerState::WaitStart | PeerState::WaitBgsave | PeerState::SendStream => "wait_bgsave",
            PeerState::SendBulk => "send_bulk",
            PeerState::BgRdbLoad => "bg_transfer",
            PeerState::Online => "online",
        }
    }
}

/// The RDB image of a full resynchronization, fed to the replica's output buffer a
/// slice at a time (as Redis streams the file), so a large image neither sits whole
/// in memory nor counts against the output-buffer limit.
pub struct ImageFeed {
    pub src: Box<dyn std::io::Read>,
    pub left: u64,
    /// The image ends with an EOF marker (`$EOF:<mark>`), not announced by size.
    pub marked: bool,
}

/// What a client told us with REPLCONF before its PSYNC.
#[derive(Default, Clone)]
pub struct PeerConf {
    pub port: u16,
    pub ip: Option<String>,
    pub capa_psync2: bool,
    pub capa_eof: bool,
    /// `REPLCONF rdb-only 1` (redis-cli --rdb): the image and no stream, then closed.
    pub rdb_only: bool,
    /// `REPLCONF rdb-filter-only <filters>`: the parts the image holds (None: all).
    pub rdb_filter: Option<crate::persistence::snapshot::ImageParts>,
    /// `REPLCONF capa dual-channel`, honoured with `dual-channel-replication-enabled`
    /// and `repl-diskless-sync`: a full sync is answered `+DUALCHANNELSYNC`.
    pub capa_dual_channel: bool,
    /// `REPLCONF rdb-channel 1`: the RDB channel of a dual-channel full sync.
    pub rdb_channel: bool,
    /// `REPLCONF set-rdb-client-id <id>`: the main channel of a dual-channel full
    /// sync, whose PSYNC continues from that RDB channel's snapshot offset.
    pub rdb_client_id: Option<u64>,
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
    /// The backlog: the shared replication buffer from its oldest block on.
    pub backlog: Option<ReplBuffer>,
    /// Absolute write-stream position already taken by `feed`.
    pub(crate) fed_upto: u64,
    pub peers: Vec<Peer>,
    /// REPLCONF settings by client id, until the client's PSYNC.
    pub confs: crate::util::FastMap<u64, PeerConf>,
    pub waiters: Vec<Waiter>,
    /// A WAIT asked for ACKs: GETACK goes out at the end of the turn.
    pub getack_pending: bool,
    last_ping: Instant,
    /// When the once-a-second work is next due.
    next_keepalive: Instant,
    /// The link to our master when we are a replica.
    pub link: Option<replica::Link>,
    pub sync_full: u64,
    pub sync_partial_ok: u64,
    pub sync_partial_err: u64,
    /// The event loop's registry, for the master link's socket.
    pub registry: Option<mio::Registry>,
    /// Offset at the instant of the replication snapshot in progress.
    pub snapshot_offset: u64,
    /// The diskless image being streamed, when the replication snapshot is one.
    pub image_stream: Option<ImageStream>,
    /// The master stream's database recorded in the RDB loaded at startup.
    pub restored_db: Option<usize>,
    /// Since when a master with a backlog has had no replica (`repl-backlog-ttl`).
    no_replicas_since: Option<Instant>,
    /// The master's commands are running (the link is out of `link` meanwhile).
    pub(crate) applying_master: bool,
    /// FAILOVER under way (failover.rs).
    pub failover: failover::Failover,
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
            next_keepalive: Instant::now() + Duration::from_secs(1),
            link: None,
            sync_full: 0,
            sync_partial_ok: 0,
            sync_partial_err: 0,
            registry: None,
            snapshot_offset: 0,
            image_stream: None,
            restored_db: None,
            no_replicas_since: None,
            applying_master: false,
            failover: Default::default(),
        }
    }
}

pub fn random_id() -> String {
    (0..40)
        .map(|_| char::from_digit(fastrand::u32(..16), 16).unwrap_or('0'))
        .collect()
}

impl Repl {
    /// Appends bytes to the replication stream (the shared buffer) and moves the
    /// offset; the pieces that hold them.
    fn push(&mut self, data: &[u8]) -> smallvec::SmallVec<[Piece; 2]> {
        match self.backlog.as_mut() {
            Some(b) => {
                self.offset += data.len() as u64;
                b.append(data)
            }
            None => Default::default(),
        }
    }

    /// Milliseconds until the nearest WAIT deadline (`u64::MAX` when none).
    pub fn ms_until_deadline(&self, now: Instant) -> u64 {
        self.waiters
            .iter()
            .filter_map(|w| w.deadline)
            .map(|d| (d.saturating_duration_since(now).as_micros() as u64).div_ceil(1000))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Whether this server follows a master.
    pub fn is_replica(&self) -> bool {
        self.link.is_some() || self.applying_master
    }

    /// Replicas whose acknowledged offset reached `target`.
    pub fn acked(&self, target: u64) -> i64 {
        self.peers
            .iter()
            .filter(|p| p.state == PeerState::Online && p.ack_off >= target)
            .count() as i64
    }

    /// Replicas whose AOF fsynced offset (FACK) reached `target` (WAITAOF).
    pub fn aof_acked(&self, target: u64) -> i64 {
        self.peers
            .iter()
            .filter(|p| p.state == PeerState::Online && p.aof_off >= target)
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
    r.backlog = Some(ReplBuffer::new(size));
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
    let from = r.fed_upto;
    r.fed_upto = pos;
    // Copied once, into the shared buffer (what a script sent to the AOF only left
    // out); replicas get pieces of it.
    let data = ex.stream.repl_bytes(from);
    if data.is_empty() {
        return;
    }
    let pieces = ex.repl.push(&data);
    drop(data);
    send_to_peers(ex, &pieces);
}

/// Appends bytes that are not in the write stream (PING, REPLCONF GETACK, the master's
/// bytes proxied by a replica) after whatever the stream holds.
pub fn feed_raw(ex: &mut Executor, data: &[u8]) {
    feed(ex);
    if ex.repl.backlog.is_some() {
        let pieces = ex.repl.push(data);
        send_to_peers(ex, &pieces);
    }
}

/// Gives the stream's new pieces to the replicas: online ones get them as output,
/// syncing ones hold them until their image is out. Then the backlog lets go of what
/// nobody needs any more.
fn send_to_peers(ex: &mut Executor, pieces: &[Piece]) {
    let mut online = smallvec::SmallVec::<[usize; 8]>::new();
    let mut syncing = smallvec::SmallVec::<[usize; 8]>::new();
    for p in ex.repl.peers.iter_mut() {
        match p.state {
            PeerState::Online | PeerState::BgRdbLoad if !p.await_ack => online.push(p.slot),
            // Its image, when it starts, will be of a later instant.
            PeerState::WaitStart => {}
            // An RDB channel whose main channel took the stream.
            _ if p.rdb_channel && p.psync_wait.is_none() => {}
            _ => {
                for piece in pieces {
                    p.held.push(piece.clone());
                }
                syncing.push(p.slot);
            }
        }
    }
    for &slot in &online {
        let c = ex.client_mut(slot);
        for piece in pieces {
            c.append_piece(piece);
        }
        ex.mark_pending_write(slot);
    }
    for slot in online.into_iter().chain(syncing) {
        ex.check_output_limits(slot);
    }
    if let Some(b) = ex.repl.backlog.as_mut() {
        b.trim();
    }
}

/// The bytes a replica's output buffer holds for the `replica` class of
/// `client-output-buffer-limit`: the held stream, plus the unwritten output once it
/// is online. The image is never counted (Redis sends it from the file). None when
/// `slot` is not a replica.
#[inline]
pub fn output_usage(ex: &Executor, slot: usize) -> Option<u64> {
    if ex.repl.peers.is_empty() {
        return None;
    }
    let p = ex.repl.peers.iter().find(|p| p.slot == slot)?;
    let out = match p.state {
        PeerState::Online | PeerState::BgRdbLoad => ex.client(slot).pending_output(),
        _ => 0,
    };
    Some((p.held.len() + out) as u64)
}

/// Milliseconds until replication work is due: WAIT deadlines, or at once when a
/// replica receiving its image has drained its output buffer (the next slice is
/// read at the start of the next loop turn).
pub fn ms_until_due(ex: &Executor, now: Instant) -> u64 {
    let streamed = ex
        .repl
        .image_stream
        .as_ref()
        .is_some_and(|s| s.pipe.queued() > 0);
    let starved = ex.repl.peers.iter().any(|p| {
        // (A SendBulk RDB channel without an image has sent it and waits for its
        // main channel: nothing to pump.)
        ((p.state == PeerState::SendBulk && p.image.is_some())
            || p.image_queued.is_some()
            || (streamed && p.state == PeerState::SendStream))
            && ex.client(p.slot).pending_output() == 0
    });
    if starved || replica::decode_lagging(ex) {
        0
    } else {
        ex.repl.ms_until_deadline(now)
    }
}

/// The replication offset the stream's end will have: a client's last write is at
/// this offset (`Client::woff`, used by WAIT).
pub fn write_offset(ex: &Executor) -> u64 {
    ex.repl.offset + ex.stream.position().saturating_sub(ex.repl.fed_upto)
}

/// The replication history an RDB file records (`repl-stream-db`, `repl-id`,
/// `repl-offset` aux fields).
pub struct RdbAux {
    pub db: usize,
    pub replid: String,
    pub offset: u64,
}

/// What to record in an RDB written now, as Redis's `rdbPopulateSaveInfo`: a master
/// with a backlog records its ID and the offset of the dataset's instant (the stream
/// not yet fed included) with the stream's database; a replica records its master's
/// ID, its processed offset and the database its master's stream has selected
/// (connected or cached). None without a history.
pub fn rdb_aux(ex: &Executor) -> Option<RdbAux> {
    let r = &ex.repl;
    let db = match &r.link {
        None => {
            r.backlog.as_ref()?;
            ex.stream.db().unwrap_or(0)
        }
        Some(l) => {
            if r.backlog.is_none() || !l.has_history() {
                return None;
            }
            l.client.map_or(l.stream_db, |slot| ex.client(slot).db)
        }
    };
    Some(RdbAux {
        db,
        replid: r.replid.clone(),
        offset: write_offset(ex),
    })
}

/// After loading the RDB at startup (AOF off), as Redis 7.0's `loadDataFromDisk`: a
/// replica takes the file's ID and offset as its own, so it asks its master for
/// `PSYNC <id> <offset+1>` and continues; a master keeps them as its previous
/// history (`replid2`, `second_repl_offset`) with its offset rebased on them, so
/// its former replicas continue too; the keys the load dropped as expired go to
/// its stream as DELs (UNLINKs with lazyfree-lazy-expire), so those replicas drop
/// them too. Files without the fields (or with a `repl-stream-db` of -1, as old
/// servers wrote) change nothing.
pub fn restore_from_rdb(
    ex: &mut Executor,
    aux: &[(Vec<u8>, Vec<u8>)],
    expired_keys: &[(usize, Vec<u8>)],
) {
    let get = |k: &str| {
        aux.iter()
            .find(|(key, _)| key == k.as_bytes())
            .map(|(_, v)| v.as_slice())
    };
    let num = |k: &str| get(k).and_then(crate::util::numeric::parse_i64);
    let (Some(id), Some(off), Some(db)) =
        (get("repl-id"), num("repl-offset"), num("repl-stream-db"))
    else {
        return;
    };
    if id.len() != 40 || off < 0 || db < 0 {
        return;
    }
    let id = String::from_utf8_lossy(id).into_owned();
    let size = ex.config.repl_backlog_size as usize;
    let r = &mut ex.repl;
    if ex.config.replicaof.is_some() {
        r.replid = id;
        r.offset = off as u64;
        r.restored_db = Some(db as usize);
    } else {
        r.replid2 = id;
        r.second_offset = off + 1;
        r.offset = off as u64;
    }
    r.backlog = Some(ReplBuffer::new(size));
    ex.stream.enabled = true;
    r.fed_upto = ex.stream.position();
    if ex.config.replicaof.is_none() {
        let del: &[u8] = if ex.config.lazyfree_lazy_expire {
            b"UNLINK"
        } else {
            b"DEL"
        };
        for (db, key) in expired_keys {
            ex.stream.append(*db, &[del, key]);
        }
    }
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
        // The last replica waiting for a snapshot to disk has gone: nobody needs
        // it, unless `save` points make it a backup too (Redis kills its child then).
        let waits = |p: &Peer| p.state == PeerState::WaitBgsave;
        if waits(&p) && !r.peers.iter().any(waits) && ex.config.save_params.is_empty() {
            if let Some(s) = ex.persist.snap.as_mut() {
                if s.purpose == crate::persistence::cow::Purpose::Replication
                    && !s.is_stream()
                    && !s.is_cancelled()
                {
                    crate::log::warning(
                        "Background RDB transfer terminated: no replica waits for it any more",
                    );
                    s.cancel(None);
                }
            }
        }
    }
    let r = &mut ex.repl;
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

/// Why a replica (READONLY, MASTERDOWN) or a master short of good replicas
/// (NOREPLICAS) refuses a command, in Redis's order of checks.
pub fn refusal(
    ex: &Executor,
    slot: usize,
    cmd: &'static crate::commands::Command,
    args: &[&[u8]],
) -> Option<&'static str> {
    readonly_error(ex, slot, cmd, args)
        .or_else(|| stale_data_error(ex, slot, cmd, args))
        .or_else(|| noreplicas_error(ex, slot, cmd, args))
}

/// `READONLY` for writes by ordinary clients of a read-only replica.
pub fn readonly_error(
    ex: &Executor,
    slot: usize,
    cmd: &'static crate::commands::Command,
    args: &[&[u8]],
) -> Option<&'static str> {
    let link = ex.repl.link.as_ref()?;
    if !ex.config.replica_read_only || link.client == Some(slot) {
        return None;
    }
    if ex.client(slot).embedded && ex.persist.loading {
        return None;
    }
    if ex.effective_flags(slot, cmd, args) & crate::commands::flags::WRITE == 0 {
        return None;
    }
    Some("READONLY You can't write against a read only replica.")
}

/// A replica whose link to its master is down, set not to serve stale data.
pub fn refusing_stale(ex: &Executor) -> bool {
    ex.repl.link.as_ref().is_some_and(|l| !l.is_up())
        && !ex.config.stored_bool("replica-serve-stale-data")
}

/// `replica-serve-stale-data no`: while the link to the master is down, a replica
/// answers only the commands flagged STALE (a script's own flags decide for EVAL and
/// FCALL: `allow-stale`).
fn stale_data_error(
    ex: &Executor,
    slot: usize,
    cmd: &crate::commands::Command,
    args: &[&[u8]],
) -> Option<&'static str> {
    if !refusing_stale(ex) || ex.repl.link.as_ref()?.client == Some(slot) {
        return None;
    }
    // EXEC counts as its queued commands: all of them must be allowed.
    let flags = if cmd.name == "exec" {
        ex.queued_flags(slot).1
    } else {
        crate::scripting::command_flags(ex, cmd, args)
    };
    let allowed = flags & crate::commands::flags::STALE != 0;
    if allowed {
        return None;
    }
    Some("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.")
}

pub const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

/// Replicas online that acknowledged within `min-replicas-max-lag` seconds.
pub fn good_replicas(ex: &Executor) -> usize {
    let lag = ex.config.min_replicas_max_lag;
    ex.repl
        .peers
        .iter()
        .filter(|p| p.state == PeerState::Online && p.ack_time.elapsed().as_secs() <= lag)
        .count()
}

/// Whether writes are allowed by `min-replicas-to-write` / `min-replicas-max-lag`
/// (either at 0 disables the rule; replicas never apply it), as Redis's
/// `checkGoodReplicasStatus`.
pub fn enough_good_replicas(ex: &Executor) -> bool {
    let need = ex.config.min_replicas_to_write;
    need == 0
        || ex.config.min_replicas_max_lag == 0
        || ex.repl.is_replica()
        || good_replicas(ex) as u64 >= need
}

/// `NOREPLICAS` for a write command (or an EXEC with writes queued) when there are
/// not enough good replicas.
fn noreplicas_error(
    ex: &Executor,
    slot: usize,
    cmd: &'static crate::commands::Command,
    args: &[&[u8]],
) -> Option<&'static str> {
    if ex.config.min_replicas_to_write == 0 {
        return None;
    }
    let write = ex.effective_flags(slot, cmd, args) & crate::commands::flags::WRITE != 0;
    (write && !enough_good_replicas(ex)).then_some(NOREPLICAS)
}

/// Once per event-loop turn: WAIT deadlines and wake-ups, GETACK, pings to replicas,
/// and the replica side's timers.
pub fn tick(ex: &mut Executor) {
    failover::tick(ex);
    replica::tick(ex);
    if ex.repl.getack_pending {
        ex.repl.getack_pending = false;
        if !ex.repl.peers.is_empty() {
            feed_raw(ex, b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n");
        }
    }
    master::start_pending(ex);
    master::pump_images(ex);
    // Second-long timers: the turn's start is time enough (no clock read per turn).
    let now = ex.turn_started;
    if now >= ex.repl.next_keepalive {
        ex.repl.next_keepalive = now + Duration::from_secs(1);
        master::keepalive_waiting(ex);
        // Once a second, as Redis's replicationCron: not a config lookup per turn.
        expire_backlog(ex);
    }
    let period = Duration::from_secs(ex.config.repl_ping_replica_period.max(1));
    if now >= ex.repl.last_ping + period {
        ex.repl.last_ping = now;
        // Not while a failover with a deadline (or a cluster manual failover) holds
        // writes: the PING would move the offset the replica must reach, as Redis.
        // Nor while a shutdown waits for its replicas.
        let failover_pause = (ex.pause_of(crate::exec::PausePurpose::Failover).is_some()
            && (ex.cluster.is_some() || ex.repl.failover.end.is_some()))
            || ex.pause_of(crate::exec::PausePurpose::Shutdown).is_some();
        if !ex.repl.peers.is_empty() && !ex.repl.is_replica() && !failover_pause {
            feed_raw(ex, b"*1\r\n$4\r\nPING\r\n");
        }
    }
    // The backlog follows CONFIG SET repl-backlog-size, and lets go of blocks that
    // replicas released by writing them (or by going away).
    if let Some(b) = ex.repl.backlog.as_mut() {
        if b.size() != ex.config.repl_backlog_size as usize {
            b.resize(ex.config.repl_backlog_size as usize);
        }
        b.trim();
    }
    master::serve_waiters(ex);
}

/// A master without replicas for `repl-backlog-ttl` seconds (0: never) frees its
/// backlog and starts a new history, as Redis's replicationCron: a replica that
/// comes back later needs a full sync. A replica keeps its backlog (its own
/// replicas' history is its master's).
fn expire_backlog(ex: &mut Executor) {
    let r = &mut ex.repl;
    if r.backlog.is_none() || r.link.is_some() || !r.peers.is_empty() {
        r.no_replicas_since = None;
        return;
    }
    let since = *r.no_replicas_since.get_or_insert_with(Instant::now);
    let ttl = ex.config.stored_i64("repl-backlog-ttl");
    if ttl > 0 && since.elapsed() >= Duration::from_secs(ttl as u64) {
        r.replid = random_id();
        r.replid2 = "0".repeat(40);
        r.second_offset = -1;
        r.backlog = None;
        r.no_replicas_since = None;
        crate::log::notice(&format!(
            "Replication backlog freed after {ttl} seconds without connected replicas."
        ));
    }
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
    if ex.config.min_replicas_to_write > 0 && ex.config.min_replicas_max_lag > 0 {
        field(format!("min_slaves_good_slaves:{}", good_replicas(ex)));
    }
    for (i, p) in r.peers.iter().enumerate() {
        field(format!(
            "slave{i}:ip={},port={},state={},offset={},lag={}",
            p.ip,
            p.port,
            p.state.name(),
            p.ack_off,
            p.ack_time.elapsed().as_secs()
        ));
    }
    field(format!("master_failover_state:{}", r.failover.state.name()));
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
