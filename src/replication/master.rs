//! The master side: SYNC/PSYNC, REPLCONF from replicas, WAIT.
//!
//! A full resynchronization answers `+FULLRESYNC <replid> <offset>` at once and starts
//! the forkless copy-on-write snapshot (`persistence/cow.rs`, purpose `Replication`)
//! of that instant, so the executor never stops to serialize the dataset. Until the
//! image is on disk the replica is `wait_bgsave`: the stream produced meanwhile is
//! held for it (`Peer::held`, pieces of the shared replication buffer, `buffer.rs`). Then it is `send_bulk`: `$<len>\r\n` goes out and
//! `pump_images` reads the file a slice at a time into its output buffer whenever
//! that runs low (as Redis's `sendBulkToSlave`), the stream still held; after the
//! last slice the held bytes follow and it is online. A replica arriving while such
//! a snapshot runs joins it (same offset, the same held pieces). When a BGSAVE, an
//! AOF rewrite or a snapshot it cannot share holds the snapshot machinery, the replica
//! waits unanswered (`WaitStart`, fed keepalive newlines) and its snapshot starts once
//! the machinery is free, as Redis's waits for the next BGSAVE; only if the snapshot
//! cannot be started at all is the image serialized synchronously and fed the same way
//! from memory.
//!
//! Diskless (`repl-diskless-sync yes`, replicas with `capa eof`): the snapshot streams
//! its image into a pipe (`cow::Target::Stream`) and `pump_stream` hands it to the
//! replicas as `$EOF:<mark>`, the image, the mark, whenever all of them have drained
//! their output (the slowest paces the snapshot). The stream held for a replica
//! follows its first REPLCONF ACK. Replicas that arrive once the image has begun
//! going out wait for the next snapshot. A partial
//! resynchronization sends `+CONTINUE <replid>` and the buffer's bytes from the
//! requested offset (pieces of it, not a copy).
//!
//! `REPLCONF rdb-filter-only functions` (redis-cli --functions-rdb) gets an image of
//! its own with the libraries and no keys, sent with the EOF marker as Redis sends
//! filtered images; `REPLCONF rdb-only 1` replicas get no stream and are closed once
//! their image is out.
//!
//! `client-output-buffer-limit replica` counts the held stream while a replica syncs
//! and its unwritten output once online, never the image (`output_usage`): a slow
//! replica that falls behind on the stream is disconnected, a large image is not. Its
//! hard limit is at least `repl-backlog-size`, as Redis's: a partial resync may hand
//! it that much.

use std::time::Instant;

use super::{ensure_backlog, feed, ImageFeed, Peer, PeerConf, PeerState, PendingFull, Waiter};
use crate::commands::Ctx;
use crate::exec::Executor;
use crate::persistence::snapshot::ImageParts;
use crate::protocol::Reply;

/// PSYNC replid offset, or SYNC (`psync` is None).
/// `failover`: PSYNC's FAILOVER argument, our master handing its role to us.
pub fn sync(ctx: &mut Ctx, psync: Option<(&[u8], &[u8])>, failover: bool) -> Reply {
    let slot = ctx.client;
    let ex = &mut *ctx.ex;
    if ex.repl.peers.iter().any(|p| p.slot == slot) {
        // Already a replica: ignored, as Redis.
        return Reply::NoReply;
    }
    if let (Some((replid, _)), true) = (psync, failover) {
        if let Some(err) = super::failover::psync_request(ex, slot, replid) {
            return err;
        }
    }
    if ex.repl.failover.state != super::failover::State::None {
        return Reply::err("NOMASTERLINK Can't SYNC while failing over");
    }
    if let Some(l) = &ex.repl.link {
        if !l.is_up() {
            return Reply::err("NOMASTERLINK Can't SYNC while not connected with my master");
        }
    }
    if ex.client(slot).pending_output() > 0 {
        return Reply::err("ERR SYNC and PSYNC are invalid with pending output");
    }
    let id = ex.client(slot).id;
    let filtered = ex
        .repl
        .confs
        .get(&id)
        .is_some_and(|c| c.rdb_filter.is_some_and(|p| p != ImageParts::ALL));
    if filtered && !ex.repl.confs.get(&id).is_some_and(|c| c.capa_eof) {
        // Redis sends filtered images over the socket only, with the EOF marker.
        return Reply::err("ERR Filtered replica requires EOF capability");
    }
    let conf = ex.repl.confs.remove(&id).unwrap_or_default();
    let addr = ex.client(slot).addr.clone();
    let ip = conf.ip.clone().unwrap_or_else(|| {
        addr.rsplit_once(':')
            .map(|(h, _)| h.trim_start_matches('[').trim_end_matches(']').to_string())
            .unwrap_or(addr.clone())
    });
    feed(ex);
    if let Some(parts) = conf.rdb_filter.filter(|_| filtered) {
        crate::log::notice(&format!(
            "Replica {ip}:{} asks for synchronization",
            conf.port
        ));
        ensure_backlog(ex);
        ex.repl.sync_full += 1;
        return send_filtered_image(ex, slot, id, ip, &conf, psync.is_some(), parts);
    }
    if let Some((_, off)) = psync {
        if crate::util::numeric::parse_i64(off).is_none() {
            crate::log::notice(&format!(
                "Replica {ip}:{} asks for synchronization",
                conf.port
            ));
            crate::log::warning(&format!(
                "Replica {ip}:{} asks for synchronization but with a wrong offset",
                conf.port
            ));
            return Reply::err("ERR value is not an integer or out of range");
        }
    }
    if let (Some((replid, off)), Some(rdb_id)) = (psync, conf.rdb_client_id) {
        if continue_after_rdb_channel(ex, slot, id, &ip, &conf, replid, off, rdb_id) {
            return Reply::NoReply;
        }
    }
    if let Some((replid, off)) = psync {
        if let Some(pieces) = try_partial(ex, replid, off) {
            let sent = send_continue(ex, slot, &conf, pieces);
            ex.repl.sync_partial_ok += 1;
            add_peer(ex, slot, id, ip, &conf, false, PeerState::Online);
            crate::log::notice(&format!(
                "Partial resynchronization request from {addr} accepted. Sending {sent} bytes of backlog starting from offset {}.",
                String::from_utf8_lossy(off)
            ));
            return Reply::NoReply;
        }
        if replid != b"?" {
            ex.repl.sync_partial_err += 1;
        }
        if conf.capa_dual_channel {
            // Valkey's dual-channel replication: the replica opens an RDB channel for
            // the image, and this connection PSYNCs from the image's offset, so the
            // stream meanwhile is buffered by the replica, not held here.
            crate::log::notice(&format!(
                "Replica {ip}:{} is capable of dual channel synchronization, and partial sync isn't possible. Full sync will continue with dedicated RDB channel.",
                conf.port
            ));
            ex.client_mut(slot)
                .out
                .extend_from_slice(b"+DUALCHANNELSYNC\r\n");
            ex.mark_pending_write(slot);
            // Its settings stay for that PSYNC.
            ex.repl.confs.insert(id, conf);
            return Reply::NoReply;
        }
    }
    crate::log::notice(&format!(
        "Replica {ip}:{} asks for synchronization",
        conf.port
    ));
    ensure_backlog(ex);
    ex.repl.sync_full += 1;
    let behind_stream = stream_unjoinable(ex, &conf);
    let behind_other = !behind_stream && snapshot_unshareable(ex, &conf);
    if behind_stream || behind_other || delays_full_sync(ex, &conf) {
        crate::log::notice(if behind_stream {
            "Current BGSAVE has socket target. Waiting for next BGSAVE for SYNC"
        } else if behind_other {
            "Can't attach the replica to the current BGSAVE. Waiting for next BGSAVE for SYNC"
        } else {
            "Delay next BGSAVE for diskless SYNC"
        });
        add_peer(
            ex,
            slot,
            id,
            ip,
            &conf,
            psync.is_none(),
            PeerState::WaitStart,
        );
        if let Some(p) = ex.repl.peers.last_mut() {
            p.pending = Some(PendingFull {
                conf,
                psync: psync.is_some(),
                since: Instant::now(),
            });
        }
        return Reply::NoReply;
    }
    let diskless = ex.config.stored_bool("repl-diskless-sync") && conf.capa_eof;
    start_full(ex, slot, id, ip, &conf, psync.is_some(), diskless)
}

/// Whether a diskless image is being streamed that this replica cannot share: it
/// has begun going out, or the replica cannot read the EOF format. Such a replica
/// waits for the next snapshot, as Redis's do for a socket-target child.
fn stream_unjoinable(ex: &Executor, conf: &PeerConf) -> bool {
    use crate::persistence::cow::Purpose;
    let streaming =
        ex.persist.snap.as_ref().is_some_and(|s| {
            s.purpose == Purpose::Replication && s.is_stream() && !s.is_cancelled()
        });
    streaming
        && (ex.repl.image_stream.as_ref().is_none_or(|s| s.sent > 0)
            || !conf.capa_eof
            || !ex.config.stored_bool("repl-diskless-sync"))
}

/// Whether the snapshot machinery is held by a snapshot this replica cannot share (a
/// BGSAVE, an AOF rewrite, a cancelled snapshot finishing, or a replication snapshot
/// no replica waits for any more, whose writes since its instant nobody kept): its
/// full resynchronization waits for the next snapshot, as Redis's waits for the next
/// BGSAVE, rather than have the loop serialize the whole dataset on the spot.
fn snapshot_unshareable(ex: &Executor, conf: &PeerConf) -> bool {
    use crate::persistence::cow::Purpose;
    if !ex.persist.busy() {
        return false;
    }
    let Some(snap) = ex.persist.snap.as_ref() else {
        return true;
    };
    if snap.purpose != Purpose::Replication || snap.is_cancelled() {
        return true;
    }
    let sharing = if snap.is_stream() {
        let diskless = ex.config.stored_bool("repl-diskless-sync") && conf.capa_eof;
        if !diskless || ex.repl.image_stream.as_ref().is_none_or(|i| i.sent > 0) {
            return true;
        }
        PeerState::SendStream
    } else {
        PeerState::WaitBgsave
    };
    !ex.repl.peers.iter().any(|p| p.state == sharing)
}

/// Whether a full resynchronization waits before starting, as Redis's with
/// `repl-diskless-sync` and a `repl-diskless-sync-delay` (for replicas that read the
/// EOF format): unless a replication snapshot already runs, which it joins.
fn delays_full_sync(ex: &Executor, conf: &PeerConf) -> bool {
    use crate::persistence::cow::Purpose;
    let joinable = ex.persist.snap.as_ref().is_some_and(|s| {
        s.purpose == Purpose::Replication
            && !s.is_cancelled()
            && (!s.is_stream() || ex.repl.image_stream.as_ref().is_some_and(|i| i.sent == 0))
    });
    ex.config.stored_bool("repl-diskless-sync")
        && conf.capa_eof
        && ex.config.stored_i64("repl-diskless-sync-delay") > 0
        && !joinable
}

/// Each loop turn: delayed full resynchronizations start once the longest waiting
/// replica has waited `repl-diskless-sync-delay` seconds, or `repl-diskless-sync-max-
/// replicas` of them wait (Redis's `shouldStartChildForReplication`); all of them
/// share the snapshot. Not while another snapshot runs.
pub fn start_pending(ex: &mut Executor) {
    let waiting: Vec<(usize, u64)> = ex
        .repl
        .peers
        .iter()
        .filter_map(|p| {
            p.pending
                .as_ref()
                .map(|w| (p.slot, w.since.elapsed().as_secs()))
        })
        .collect();
    if waiting.is_empty() || ex.persist.busy() {
        return;
    }
    let delay = ex.config.stored_i64("repl-diskless-sync-delay").max(0) as u64;
    // Streamed only if every one of them reads the EOF format (Redis's mincapa).
    let diskless = ex.config.stored_bool("repl-diskless-sync")
        && ex
            .repl
            .peers
            .iter()
            .filter_map(|p| p.pending.as_ref())
            .all(|w| w.conf.capa_eof);
    let max_replicas = ex.config.stored_i64("repl-diskless-sync-max-replicas");
    let longest = waiting.iter().map(|w| w.1).max().unwrap_or(0);
    let start = !ex.config.stored_bool("repl-diskless-sync")
        || (max_replicas > 0 && waiting.len() as i64 >= max_replicas)
        || longest >= delay;
    if !start {
        return;
    }
    // The stream so far goes out first: the snapshot's offset must cover exactly the
    // writes it holds (as sync() feeds before it starts one).
    feed(ex);
    for (slot, _) in waiting {
        let Some(i) = ex.repl.peers.iter().position(|p| p.slot == slot) else {
            continue;
        };
        let p = ex.repl.peers.remove(i);
        let Some(pending) = p.pending else { continue };
        let reply = start_full(ex, slot, p.id, p.ip, &pending.conf, pending.psync, diskless);
        if let Reply::Error(e) = reply {
            crate::log::warning(&format!("Full resynchronization failed to start: {e}"));
            ex.client_mut(slot).close_asap = true;
            ex.close_pending = true;
        }
    }
}

/// Starts a full resynchronization: the copy-on-write snapshot (or joins the one
/// running), streamed when `diskless`, else a synchronous image.
fn start_full(
    ex: &mut Executor,
    slot: usize,
    id: u64,
    ip: String,
    conf: &PeerConf,
    psync: bool,
    diskless: bool,
) -> Reply {
    if let Some(reply) = sync_with_snapshot(ex, slot, id, &ip, conf, psync, diskless) {
        return reply;
    }
    let image = match crate::persistence::snapshot::serialize(ex) {
        Ok(b) => b,
        Err(e) => return Reply::error(format!("ERR {e}")),
    };
    let offset = ex.repl.offset;
    start_full_sync(ex, slot, id, ip, conf, psync, offset, PeerState::SendBulk);
    let head = format!("${}\r\n", image.len());
    ex.client_mut(slot).out.extend_from_slice(head.as_bytes());
    if let Some(p) = ex.repl.peers.last_mut() {
        p.image = Some(ImageFeed {
            left: image.len() as u64,
            src: Box::new(std::io::Cursor::new(image)),
            marked: false,
        });
    }
    pump_images(ex);
    Reply::NoReply
}

/// A filtered image (`REPLCONF rdb-filter-only`, e.g. redis-cli --functions-rdb): its
/// own, serialized at once (it is small: the libraries), sent as Redis sends images to
/// replica sockets, `$EOF:<40 random chars>`, the image, the same 40 characters. The
/// replica never shares another's image, nor lends it its own.
fn send_filtered_image(
    ex: &mut Executor,
    slot: usize,
    id: u64,
    ip: String,
    conf: &PeerConf,
    psync: bool,
    parts: ImageParts,
) -> Reply {
    let mut image = match crate::persistence::snapshot::serialize_parts(ex, parts) {
        Ok(b) => b,
        Err(e) => return Reply::error(format!("ERR {e}")),
    };
    crate::log::notice("Starting BGSAVE for SYNC with target: replicas sockets");
    let offset = ex.repl.offset;
    start_full_sync(ex, slot, id, ip, conf, psync, offset, PeerState::SendBulk);
    let mark = new_mark();
    let c = ex.client_mut(slot);
    c.out.extend_from_slice(b"$EOF:");
    c.out.extend_from_slice(&mark);
    c.out.extend_from_slice(b"\r\n");
    image.extend_from_slice(&mark);
    if let Some(p) = ex.repl.peers.last_mut() {
        p.image = Some(ImageFeed {
            left: image.len() as u64,
            src: Box::new(std::io::Cursor::new(image)),
            marked: true,
        });
    }
    pump_images(ex);
    Reply::NoReply
}

/// `+CONTINUE [<replid>]` and the stream from the offset asked for, as pieces of the
/// shared buffer (not copied); the bytes sent.
fn send_continue(
    ex: &mut Executor,
    slot: usize,
    conf: &PeerConf,
    pieces: impl IntoIterator<Item = super::Piece>,
) -> usize {
    let line = if conf.capa_psync2 {
        format!("+CONTINUE {}\r\n", ex.repl.replid)
    } else {
        "+CONTINUE\r\n".to_string()
    };
    let c = ex.client_mut(slot);
    c.out.extend_from_slice(line.as_bytes());
    let mut sent = 0;
    for piece in pieces {
        c.append_piece(&piece);
        sent += piece.len();
    }
    sent
}

/// The backlog's bytes from `off` when `replid` is our history and the offset is in
/// the backlog.
fn try_partial(ex: &Executor, replid: &[u8], off: &[u8]) -> Option<Vec<super::Piece>> {
    let r = &ex.repl;
    let off = crate::util::numeric::parse_i64(off)?;
    let b = r.backlog.as_ref()?;
    let ours = replid == r.replid.as_bytes();
    let previous = replid == r.replid2.as_bytes() && off <= r.second_offset;
    if !(ours || previous) || off < 0 {
        return None;
    }
    b.read_from(off as u64, r.offset)
}

/// Registers a replica starting a full sync of the image at `offset`: `+FULLRESYNC
/// <replid> <offset>` for PSYNC (plain SYNC gets none and never ACKs), `$ENDOFF:<offset>
/// <replid> <db> <client id>` for the RDB channel of a dual-channel sync (which then
/// holds the stream from `offset` until its main channel's PSYNC takes it), and the
/// next streamed command says its database, since the replica starts from the image.
#[allow(clippy::too_many_arguments)]
fn start_full_sync(
    ex: &mut Executor,
    slot: usize,
    id: u64,
    ip: String,
    conf: &PeerConf,
    psync: bool,
    offset: u64,
    state: PeerState,
) {
    if psync {
        let line = format!("+FULLRESYNC {} {offset}\r\n", ex.repl.replid);
        ex.client_mut(slot).out.extend_from_slice(line.as_bytes());
    } else if conf.rdb_channel {
        // The stream after `offset` starts with a SELECT (`reset_db` below), so the
        // database named here only stands until then.
        let line = format!("$ENDOFF:{offset} {} 0 {id}\r\n", ex.repl.replid);
        ex.client_mut(slot).out.extend_from_slice(line.as_bytes());
        crate::log::notice(&format!(
            "Sending to replica {ip}:{} RDB end offset {offset} and client-id {id}",
            conf.port
        ));
    }
    ex.stream.reset_db();
    add_peer(ex, slot, id, ip, conf, !psync, state);
    if conf.rdb_channel && !psync {
        if let Some(p) = ex.repl.peers.last_mut() {
            p.psync_wait = Some(offset);
        }
    }
}

/// The main channel of a dual-channel full sync (`REPLCONF set-rdb-client-id`)
/// PSYNCs from its RDB channel's snapshot offset: `+CONTINUE`, then the stream that
/// channel held since, then the live one; online once its first ACK says the image
/// is loaded. False (a full sync follows) when that RDB channel is gone or the
/// history asked for is not its image's.
#[allow(clippy::too_many_arguments)]
fn continue_after_rdb_channel(
    ex: &mut Executor,
    slot: usize,
    id: u64,
    ip: &str,
    conf: &PeerConf,
    replid: &[u8],
    off: &[u8],
    rdb_id: u64,
) -> bool {
    let Some(off) = crate::util::numeric::parse_i64(off) else {
        return false;
    };
    let Some(r) = ex
        .repl
        .peers
        .iter()
        .position(|p| p.id == rdb_id && p.rdb_channel && p.psync_wait.is_some())
    else {
        return false;
    };
    if replid != ex.repl.replid.as_bytes()
        || Some(off) != ex.repl.peers[r].psync_wait.map(|o| o as i64 + 1)
    {
        return false;
    }
    let rdb = &mut ex.repl.peers[r];
    rdb.psync_wait = None;
    let held = std::mem::take(&mut rdb.held);
    let (rdb_slot, rdb_done) = (rdb.slot, rdb.image_done);
    if rdb_done {
        // Its image is out and nothing is held for it any more.
        ex.client_mut(rdb_slot).close_after_reply = true;
        ex.close_pending = true;
    }
    let sent = send_continue(ex, slot, conf, held.into_pieces());
    let addr = ex.client(slot).addr.clone();
    ex.repl.sync_partial_ok += 1;
    add_peer(
        ex,
        slot,
        id,
        ip.to_string(),
        conf,
        false,
        PeerState::BgRdbLoad,
    );
    crate::log::notice(&format!(
        "Partial resynchronization request from {addr} accepted. Sending {sent} bytes of backlog starting from offset {off}."
    ));
    ex.check_output_limits(slot);
    true
}

fn add_peer(
    ex: &mut Executor,
    slot: usize,
    id: u64,
    ip: String,
    conf: &PeerConf,
    old: bool,
    state: PeerState,
) {
    ex.mark_pending_write(slot);
    ex.client_mut(slot).repl_role = Some('S');
    ex.repl.peers.push(Peer {
        slot,
        id,
        ip,
        port: conf.port,
        ack_off: 0,
        aof_off: 0,
        ack_time: Instant::now(),
        old_protocol: old,
        state,
        held: Default::default(),
        image: None,
        rdb_only: conf.rdb_only,
        pending: None,
        stuck: None,
        await_ack: false,
        image_queued: None,
        rdb_channel: conf.rdb_channel,
        psync_wait: None,
        image_done: false,
    });
}

/// Below this many unwritten bytes a replica receiving its image gets the next slice.
const IMAGE_LOW_WATER: usize = 256 * 1024;
/// The client slots of the replicas in `state`.
fn peers_in(ex: &Executor, state: PeerState) -> smallvec::SmallVec<[usize; 4]> {
    ex.repl
        .peers
        .iter()
        .filter(|p| p.state == state)
        .map(|p| p.slot)
        .collect()
}

/// Bytes of image read per slice.
const IMAGE_SLICE: usize = 1024 * 1024;

/// Once per loop turn: replicas receiving their image whose output ran low get the
/// next slice; after the last one the stream held for them follows and they are
/// online.
pub fn pump_images(ex: &mut Executor) {
    // Once per turn: nothing to do without replicas (and their image stream).
    if ex.repl.peers.is_empty() && ex.repl.image_stream.is_none() {
        return;
    }
    let written: smallvec::SmallVec<[usize; 4]> = ex
        .repl
        .peers
        .iter()
        .filter(|p| p.image_queued.is_some() && ex.client(p.slot).pending_output() == 0)
        .map(|p| p.slot)
        .collect();
    for slot in written {
        if let Some(i) = ex.repl.peers.iter().position(|p| p.slot == slot) {
            let marked = ex.repl.peers[i].image_queued.take().unwrap_or(false);
            image_sent(ex, i, marked);
        }
    }
    pump_stream(ex);
    let sending = peers_in(ex, PeerState::SendBulk);
    for slot in sending {
        if ex.client(slot).pending_output() >= IMAGE_LOW_WATER {
            continue;
        }
        let Some(i) = ex.repl.peers.iter().position(|p| p.slot == slot) else {
            continue;
        };
        let Some(mut feed) = ex.repl.peers[i].image.take() else {
            continue;
        };
        let want = (feed.left as usize).min(IMAGE_SLICE);
        let c = ex.client_mut(slot);
        let start = c.out.len();
        c.out.resize(start + want, 0);
        let mut got = 0;
        let mut failed = None;
        while got < want {
            match feed.src.read(&mut c.out[start + got..]) {
                Ok(0) => {
                    failed = Some("the image file is shorter than announced".to_string());
                    break;
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failed = Some(e.to_string());
                    break;
                }
            }
        }
        c.out.truncate(start + got);
        feed.left -= got as u64;
        if let Some(why) = failed {
            crate::log::warning(&format!(
                "Read error sending DB to replica: {why}; closing the replica"
            ));
            c.close_asap = true;
            ex.close_pending = true;
            continue;
        }
        ex.mark_pending_write(slot);
        if feed.left > 0 {
            ex.repl.peers[i].image = Some(feed);
            continue;
        }
        ex.repl.peers[i].image_queued = Some(feed.marked);
    }
}

/// The `i`th replica has its whole image: closed if it wanted only that, else it is
/// online and the stream held for it follows, at once or (`streamed`: the image
/// ended with its marker) on its first ACK.
fn image_sent(ex: &mut Executor, i: usize, streamed: bool) {
    let p = &mut ex.repl.peers[i];
    let slot = p.slot;
    if p.rdb_only {
        if p.psync_wait.is_some() {
            // An RDB channel still holding the stream for its main channel's PSYNC:
            // closed when that comes (`continue_after_rdb_channel`).
            p.image_done = true;
            p.state = PeerState::SendBulk;
            return;
        }
        // It asked for the image only: no stream, and closed once it has it.
        let c = ex.client_mut(slot);
        c.close_after_reply = true;
        crate::log::notice(&format!(
            "RDB transfer completed, rdb only replica ({}) should be disconnected asap",
            c.addr
        ));
        ex.close_pending = true;
        return;
    }
    p.state = PeerState::Online;
    p.stuck = None;
    // Pre-PSYNC replicas never ACK.
    p.await_ack = streamed && !p.old_protocol;
    let name = format!("{}:{}", p.ip, p.port);
    if p.await_ack {
        crate::log::notice(&format!(
            "Streamed RDB transfer with replica {name} succeeded (socket). Waiting for REPLCONF ACK from replica to enable streaming"
        ));
    }
    crate::log::notice(&format!("Synchronization with replica {name} succeeded"));
    if !ex.repl.peers[i].await_ack {
        start_stream(ex, i);
    }
}

/// The `i`th replica, online, gets the stream held for it and then the live one.
fn start_stream(ex: &mut Executor, i: usize) {
    let p = &mut ex.repl.peers[i];
    p.await_ack = false;
    let slot = p.slot;
    let held = std::mem::take(&mut p.held);
    let c = ex.client_mut(slot);
    for piece in held.into_pieces() {
        c.append_piece(&piece);
    }
    ex.mark_pending_write(slot);
    ex.check_output_limits(slot);
}

/// 40 random hexadecimal characters: the marker that ends an image sent with
/// `$EOF:<mark>`, whose size is not known when it starts.
fn new_mark() -> [u8; 40] {
    const MARK_CHARS: &[u8] = b"0123456789abcdef";
    std::array::from_fn(|_| MARK_CHARS[fastrand::usize(..MARK_CHARS.len())])
}

/// Whether the replication snapshot in progress streams its image.
fn streaming(ex: &Executor) -> bool {
    use crate::persistence::cow::Purpose;
    ex.persist
        .snap
        .as_ref()
        .is_some_and(|s| s.purpose == Purpose::Replication && s.is_stream() && !s.is_cancelled())
}

/// Once per loop turn while a diskless image streams: once every replica receiving
/// it has drained its output below the low-water mark, the next slice the snapshot
/// produced goes to all of them, so the slowest paces the snapshot (Redis reads its
/// child's pipe only when every replica's socket took the last buffer). A replica
/// stuck longer than `repl-timeout` is disconnected; with none left the snapshot is
/// cancelled.
fn pump_stream(ex: &mut Executor) {
    if ex.repl.image_stream.is_none() || !streaming(ex) {
        return;
    }
    let timeout = std::time::Duration::from_secs(ex.config.repl_timeout);
    for slot in receiving_stream(ex) {
        let pending = ex.client(slot).pending_output();
        let Some(p) = ex.repl.peers.iter_mut().find(|p| p.slot == slot) else {
            continue;
        };
        p.stuck = match p.stuck {
            _ if pending == 0 => None,
            Some((since, was)) if pending >= was => Some((since, pending)),
            _ => Some((Instant::now(), pending)),
        };
        if p.stuck.is_some_and(|(since, _)| since.elapsed() > timeout) {
            crate::log::warning(&format!(
                "Disconnecting timedout replica (full sync): {}:{}",
                p.ip, p.port
            ));
            ex.client_mut(slot).close_asap = true;
            ex.close_pending = true;
        }
    }
    let slots = receiving_stream(ex);
    if slots.is_empty() {
        crate::log::warning(
            "Diskless rdb transfer, last replica dropped, killing fork child (here a snapshot thread).",
        );
        if let Some(s) = ex.persist.snap.as_mut() {
            s.cancel(None);
        }
        return;
    }
    if slots
        .iter()
        .any(|&s| ex.client(s).pending_output() >= IMAGE_LOW_WATER)
    {
        return;
    }
    let Some(stream) = ex.repl.image_stream.as_ref() else {
        return;
    };
    let chunks = stream.pipe.take(IMAGE_SLICE);
    send_chunks(ex, &slots, chunks);
}

/// The replicas receiving the streamed image, less those being closed.
fn receiving_stream(ex: &Executor) -> smallvec::SmallVec<[usize; 4]> {
    ex.repl
        .peers
        .iter()
        .filter(|p| {
            p.state == PeerState::SendStream
                && p.image_queued.is_none()
                && !ex.client(p.slot).close_asap
        })
        .map(|p| p.slot)
        .collect()
}

/// Appends a streamed image's chunks to each replica receiving it.
fn send_chunks(ex: &mut Executor, slots: &[usize], chunks: Vec<Vec<u8>>) {
    if chunks.is_empty() {
        return;
    }
    let mut n = 0;
    for chunk in chunks {
        n += chunk.len() as u64;
        for &slot in &slots[1..] {
            ex.client_mut(slot).append_output(&chunk);
        }
        ex.client_mut(slots[0]).append_output_owned(chunk);
    }
    if let Some(s) = ex.repl.image_stream.as_mut() {
        s.sent += n;
    }
    for &slot in slots {
        ex.mark_pending_write(slot);
        let pending = ex.client(slot).pending_output();
        if let Some(p) = ex.repl.peers.iter_mut().find(|p| p.slot == slot) {
            // Measured after the append, so the next turn sees any drain as progress.
            p.stuck = p.stuck.map(|(since, _)| (since, pending));
        }
    }
}

fn snapshot_path() -> std::path::PathBuf {
    std::path::PathBuf::from(format!("temp-repl-{}.rdb", std::process::id()))
}

/// The full resynchronization through the copy-on-write snapshot: None when it cannot
/// be used (another snapshot runs), so the caller sends a synchronous image. With
/// `diskless` a new snapshot streams its image to the replica as it is produced
/// (`$EOF:<mark>`, the image, the mark); otherwise it goes to a file first.
fn sync_with_snapshot(
    ex: &mut Executor,
    slot: usize,
    id: u64,
    ip: &str,
    conf: &PeerConf,
    psync: bool,
    diskless: bool,
) -> Option<Reply> {
    use crate::persistence::cow::{ImagePipe, Purpose, Target};
    let running = ex
        .persist
        .snap
        .as_ref()
        .is_some_and(|s| s.purpose == Purpose::Replication && !s.is_cancelled());
    let stream = running && streaming(ex);
    if stream && stream_unjoinable(ex, conf) {
        return None;
    }
    // Another replica waits for the running image: same offset, same held stream.
    // Only such a replica has the stream since the snapshot's instant; once every
    // replica it was for has gone, nobody kept that stream, and a replica joining
    // then would miss those writes for good. That snapshot is of no use any more.
    let sharing = if stream {
        PeerState::SendStream
    } else {
        PeerState::WaitBgsave
    };
    let joined = running
        .then(|| {
            ex.repl
                .peers
                .iter()
                .find(|p| p.state == sharing)
                .map(|p| p.held.clone())
        })
        .flatten();
    if running && joined.is_none() {
        if let Some(s) = ex.persist.snap.as_mut() {
            s.cancel(None);
        }
    }
    let (held, state) = if let Some(held) = joined {
        (held, sharing)
    } else {
        if ex.persist.busy() {
            return None;
        }
        let (target, state) = if diskless {
            let pipe = std::sync::Arc::new(ImagePipe::default());
            (Target::Stream(pipe), PeerState::SendStream)
        } else {
            (Target::File(snapshot_path()), PeerState::WaitBgsave)
        };
        let pipe = match &target {
            Target::Stream(p) => Some(p.clone()),
            Target::File(_) => None,
        };
        let begun =
            crate::persistence::snapshot::begin_snapshot_to(ex, Purpose::Replication, target);
        if begun.is_err() {
            return None;
        }
        ex.repl.image_stream = pipe.map(|pipe| super::ImageStream {
            pipe,
            mark: new_mark(),
            sent: 0,
        });
        ex.repl.snapshot_offset = ex.repl.offset;
        if diskless {
            crate::log::notice("Starting BGSAVE for SYNC with target: replicas sockets");
            crate::log::notice(&format!(
                "Background RDB transfer started by pid {} (its snapshot thread)",
                std::process::id()
            ));
        } else {
            crate::log::notice("Starting BGSAVE for SYNC with target: disk");
        }
        (Default::default(), state)
    };
    let offset = ex.repl.snapshot_offset;
    start_full_sync(ex, slot, id, ip.to_string(), conf, psync, offset, state);
    if let Some(p) = ex.repl.peers.last_mut() {
        p.held = held;
    }
    if state == PeerState::SendStream {
        let mark = ex
            .repl
            .image_stream
            .as_ref()
            .map(|s| s.mark)
            .unwrap_or([b'0'; 40]);
        let c = ex.client_mut(slot);
        c.out.extend_from_slice(b"$EOF:");
        c.out.extend_from_slice(&mark);
        c.out.extend_from_slice(b"\r\n");
    }
    Some(Reply::NoReply)
}

/// The replication snapshot ended. A streamed image's replicas get its last bytes
/// and the mark, then their held stream. Replicas waiting for a file start
/// receiving it (each reads its own handle of the file, which is unlinked at once).
/// On failure they are disconnected (they retry).
pub fn snapshot_finished(ex: &mut Executor, result: Result<(), String>) {
    if let Some(stream) = ex.repl.image_stream.take() {
        stream_finished(ex, stream, result);
        pump_images(ex);
        return;
    }
    let path = snapshot_path();
    let waiting = peers_in(ex, PeerState::WaitBgsave);
    for slot in waiting {
        let opened = result.clone().and_then(|()| {
            let f = std::fs::File::open(&path).map_err(|e| e.to_string())?;
            let len = f.metadata().map_err(|e| e.to_string())?.len();
            Ok((f, len))
        });
        match opened {
            Ok((file, len)) => {
                let c = ex.client_mut(slot);
                c.out.extend_from_slice(format!("${len}\r\n").as_bytes());
                ex.mark_pending_write(slot);
                if let Some(p) = ex.repl.peers.iter_mut().find(|p| p.slot == slot) {
                    p.state = PeerState::SendBulk;
                    p.image = Some(ImageFeed {
                        src: Box::new(std::io::BufReader::with_capacity(64 * 1024, file)),
                        left: len,
                        marked: false,
                    });
                }
            }
            Err(e) => {
                crate::log::warning(&format!(
                    "Replication snapshot failed ({e}): closing the waiting replica"
                ));
                ex.client_mut(slot).close_asap = true;
                ex.close_pending = true;
            }
        }
    }
    let _ = std::fs::remove_file(&path);
    pump_images(ex);
}

/// A streamed image is complete (or failed): what the pipe still holds and the mark
/// go to every replica still receiving it, and they are online.
fn stream_finished(ex: &mut Executor, stream: super::ImageStream, result: Result<(), String>) {
    let slots = receiving_stream(ex);
    if let Err(e) = result {
        for slot in slots {
            crate::log::warning(&format!(
                "Diskless rdb transfer failed ({e}): closing the replica"
            ));
            ex.client_mut(slot).close_asap = true;
            ex.close_pending = true;
        }
        return;
    }
    crate::log::notice(&format!(
        "Diskless rdb transfer, done reading from pipe, {} replicas still up.",
        slots.len()
    ));
    if slots.is_empty() {
        return;
    }
    let rest = stream.pipe.take(usize::MAX);
    send_chunks(ex, &slots, rest);
    for slot in slots {
        ex.client_mut(slot).append_output(&stream.mark);
        // Also when the pipe was already empty (`send_chunks` then marks nothing):
        // the mark must go out now, or the replica waits for it until the next ping.
        ex.mark_pending_write(slot);
        if let Some(p) = ex.repl.peers.iter_mut().find(|p| p.slot == slot) {
            p.image_queued = Some(true);
        }
    }
}

/// Every second: a newline to replicas waiting for their snapshot, so their link
/// does not time out (Redis does the same; replicas skip empty lines there).
pub fn keepalive_waiting(ex: &mut Executor) {
    let mut waiting = peers_in(ex, PeerState::WaitBgsave);
    waiting.extend(peers_in(ex, PeerState::WaitStart));
    for slot in waiting {
        ex.client_mut(slot).out.push(b'\n');
        ex.mark_pending_write(slot);
    }
}

/// REPLCONF <option> <value> ...
pub fn replconf(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if args.len().is_multiple_of(2) {
        return crate::commands::errors::SYNTAX;
    }
    let slot = ctx.client;
    let ex = &mut *ctx.ex;
    let id = ex.client(slot).id;
    let is = |a: &[u8], w: &str| a.eq_ignore_ascii_case(w.as_bytes());
    let mut i = 1;
    while i < args.len() {
        let (opt, val) = (args[i], args[i + 1]);
        if is(opt, "listening-port") {
            let Some(p) = crate::util::numeric::parse_i64(val).filter(|p| (0..=65535).contains(p))
            else {
                return crate::commands::errors::NOT_INTEGER;
            };
            ex.repl.confs.entry(id).or_default().port = p as u16;
        } else if is(opt, "ip-address") {
            ex.repl.confs.entry(id).or_default().ip =
                Some(String::from_utf8_lossy(val).into_owned());
        } else if is(opt, "capa") {
            let c = ex.repl.confs.entry(id).or_default();
            if is(val, "psync2") {
                c.capa_psync2 = true;
            } else if is(val, "eof") {
                c.capa_eof = true;
            } else if is(val, "dual-channel")
                && ex.config.stored_bool("dual-channel-replication-enabled")
                && ex.config.stored_bool("repl-diskless-sync")
            {
                // Disabled here, it is a capability not understood (ignored).
                c.capa_dual_channel = true;
            }
        } else if is(opt, "ack") {
            // From an online replica: `ACK <offset> [FACK <aof offset>]` (7.2+),
            // recorded, never answered.
            record_ack(ex, slot, val, args.get(i + 2..i + 4));
            return Reply::NoReply;
        } else if is(opt, "getack") {
            // Only a replica's master asks this; it gets `REPLCONF ACK`.
            let d = super::fack::Durability::of(ex);
            if let Some(l) = ex.repl.link.as_mut() {
                if l.client == Some(slot) {
                    l.send_ack(d);
                }
            }
            return Reply::NoReply;
        } else if is(opt, "rdb-only") || is(opt, "rdb-channel") {
            let Some(v) = crate::util::numeric::parse_i64(val) else {
                return crate::commands::errors::NOT_INTEGER;
            };
            if !(0..=1).contains(&v) {
                return Reply::err("ERR value is out of range, value must between 0 and 1");
            }
            let c = ex.repl.confs.entry(id).or_default();
            if is(opt, "rdb-only") {
                c.rdb_only = v == 1;
            } else {
                c.rdb_channel = v == 1;
            }
        } else if is(opt, "set-rdb-client-id") {
            let Some(rdb_id) = crate::util::numeric::parse_i64(val) else {
                return crate::commands::errors::NOT_INTEGER;
            };
            let waiting = ex
                .repl
                .peers
                .iter()
                .any(|p| p.id as i64 == rdb_id && p.rdb_channel && p.psync_wait.is_some());
            if !waiting {
                return Reply::error(format!("ERR Unrecognized RDB client id {rdb_id}"));
            }
            ex.repl.confs.entry(id).or_default().rdb_client_id = Some(rdb_id as u64);
        } else if is(opt, "rdb-filter-only") {
            // "Include" filters: nothing but what is named (only "functions" exists).
            let Some(filters) = crate::protocol::parser::split_args(val) else {
                return Reply::err("ERR Missing rdb-filter-only values");
            };
            let mut parts = ImageParts {
                keys: false,
                functions: false,
            };
            for f in &filters {
                if f.eq_ignore_ascii_case(b"functions") {
                    parts.functions = true;
                } else {
                    return Reply::error(format!(
                        "ERR Unsupported rdb-filter-only option: {}",
                        String::from_utf8_lossy(f)
                    ));
                }
            }
            ex.repl.confs.entry(id).or_default().rdb_filter = Some(parts);
        } else {
            return Reply::error(format!(
                "ERR Unrecognized REPLCONF option: {}",
                String::from_utf8_lossy(opt)
            ));
        }
        i += 2;
    }
    Reply::ok()
}

/// `REPLCONF ACK <off> [FACK <aof off>]` from a replica: offsets only move forward;
/// WAIT and WAITAOF waiters are re-checked.
fn record_ack(ex: &mut Executor, slot: usize, off: &[u8], fack: Option<&[&[u8]]>) {
    let parse = |v: &[u8]| crate::util::numeric::parse_i64(v).map(|o| o.max(0) as u64);
    let Some(off) = parse(off) else { return };
    let fack = match fack {
        Some([name, v]) if name.eq_ignore_ascii_case(b"fack") => match parse(v) {
            Some(f) => Some(f),
            None => return,
        },
        _ => None,
    };
    let Some(p) = ex.repl.peers.iter_mut().find(|p| p.slot == slot) else {
        return;
    };
    p.ack_off = p.ack_off.max(off);
    if let Some(f) = fack {
        p.aof_off = p.aof_off.max(f);
    }
    p.ack_time = Instant::now();
    if p.state == PeerState::BgRdbLoad {
        // The replica loaded its image and applied the stream it buffered meanwhile.
        p.state = PeerState::Online;
        crate::log::notice(&format!(
            "Synchronization with replica {}:{} succeeded",
            p.ip, p.port
        ));
    }
    if p.await_ack {
        if let Some(i) = ex.repl.peers.iter().position(|p| p.slot == slot) {
            start_stream(ex, i);
        }
    }
    serve_waiters(ex);
    crate::commands::waitaof::replicas_progress(ex);
}

/// WAIT numreplicas timeout
pub fn wait(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if ctx.ex.repl.is_replica() {
        return Reply::err("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.");
    }
    let Some(num) = crate::util::numeric::parse_i64(args[1]) else {
        return crate::commands::errors::NOT_INTEGER;
    };
    let ms = match crate::exec::blocking::parse_timeout_ms(args[2], ctx.now_ms) {
        Ok(ms) => ms,
        Err(e) => return e,
    };
    let slot = ctx.client;
    feed(ctx.ex);
    let target = ctx.ex.client(slot).woff;
    let acked = ctx.ex.repl.acked(target);
    if acked >= num || ctx.ex.blocking.deny_blocking || ctx.ex.client(slot).in_exec {
        return Reply::Int(acked);
    }
    // A deadline past what Instant holds is no deadline in practice.
    let deadline = (ms > 0)
        .then(|| Instant::now().checked_add(std::time::Duration::from_millis(ms as u64)))
        .flatten();
    let reply = crate::exec::blocking::block(ctx, args, &[], "none", None, Reply::Int(acked));
    let id = ctx.ex.client(slot).id;
    ctx.ex.repl.waiters.push(Waiter {
        slot,
        id,
        target,
        numreplicas: num,
        deadline,
    });
    ctx.ex.repl.getack_pending = true;
    reply
}

/// CLIENT UNBLOCK of a WAIT answers as its timeout would now: the number of
/// replicas that acknowledged its write so far (not the count when it blocked).
pub fn wait_unblock_reply(ex: &Executor, slot: usize) -> Option<Reply> {
    let w = ex.repl.waiters.iter().find(|w| w.slot == slot)?;
    Some(Reply::Int(ex.repl.acked(w.target)))
}

/// Answers WAITers whose replicas caught up or whose time is over.
pub fn serve_waiters(ex: &mut Executor) {
    if ex.repl.waiters.is_empty() {
        return;
    }
    let now = Instant::now();
    let mut i = 0;
    while i < ex.repl.waiters.len() {
        let w = &ex.repl.waiters[i];
        if !ex.blocking.is_blocked(w.slot) || ex.client(w.slot).id != w.id {
            // Unblocked otherwise (CLIENT UNBLOCK) or gone.
            ex.repl.waiters.swap_remove(i);
            continue;
        }
        let acked = ex.repl.acked(w.target);
        if acked >= w.numreplicas || w.deadline.is_some_and(|d| d <= now) {
            let w = ex.repl.waiters.swap_remove(i);
            crate::exec::blocking::unblock_with(ex, w.slot, &Reply::Int(acked));
            continue;
        }
        i += 1;
    }
}
