//! The master side: SYNC/PSYNC, REPLCONF from replicas, WAIT.
//!
//! A full resynchronization answers `+FULLRESYNC <replid> <offset>` at once and starts
//! the forkless copy-on-write snapshot (`persistence/cow.rs`, purpose `Replication`)
//! of that instant, so the executor never stops to serialize the dataset. Until the
//! image is on disk the replica is `wait_bgsave`: the stream produced meanwhile is
//! held for it (`Peer::waiting`); then `$<len>\r\n<payload>` and the held bytes go
//! into its output buffer and it is online. A replica arriving while such a snapshot
//! runs joins it (same offset, a copy of the held bytes). When a BGSAVE or AOF
//! rewrite holds the snapshot machinery, the image is serialized synchronously
//! instead. A partial resynchronization sends `+CONTINUE <replid>` and the backlog's
//! bytes from the requested offset.

use std::time::Instant;

use super::{ensure_backlog, feed, Peer, PeerConf, Waiter};
use crate::commands::Ctx;
use crate::exec::Executor;
use crate::protocol::Reply;

/// PSYNC replid offset, or SYNC (`psync` is None).
pub fn sync(ctx: &mut Ctx, psync: Option<(&[u8], &[u8])>) -> Reply {
    let slot = ctx.client;
    let ex = &mut *ctx.ex;
    if ex.repl.peers.iter().any(|p| p.slot == slot) {
        // Already a replica: ignored, as Redis.
        return Reply::NoReply;
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
    let conf = ex.repl.confs.remove(&id).unwrap_or_default();
    let addr = ex.client(slot).addr.clone();
    let ip = conf.ip.clone().unwrap_or_else(|| {
        addr.rsplit_once(':')
            .map(|(h, _)| h.trim_start_matches('[').trim_end_matches(']').to_string())
            .unwrap_or(addr.clone())
    });
    feed(ex);
    if let Some((replid, off)) = psync {
        if let Some(bytes) = try_partial(ex, replid, off) {
            let line = if conf.capa_psync2 {
                format!("+CONTINUE {}\r\n", ex.repl.replid)
            } else {
                "+CONTINUE\r\n".to_string()
            };
            let c = ex.client_mut(slot);
            c.out.extend_from_slice(line.as_bytes());
            c.out.extend_from_slice(&bytes);
            ex.repl.sync_partial_ok += 1;
            add_peer(ex, slot, id, ip, &conf, false);
            crate::log::notice(&format!(
                "Partial resynchronization request from {addr} accepted. Sending {} bytes of backlog starting from offset {}.",
                bytes.len(),
                String::from_utf8_lossy(off)
            ));
            return Reply::NoReply;
        }
        if replid != b"?" {
            ex.repl.sync_partial_err += 1;
        }
    }
    crate::log::notice(&format!(
        "Replica {ip}:{} asks for synchronization",
        conf.port
    ));
    ensure_backlog(ex);
    ex.repl.sync_full += 1;
    if let Some(reply) = sync_with_snapshot(ex, slot, id, &ip, &conf, psync.is_some()) {
        return reply;
    }
    let image = match crate::persistence::snapshot::serialize(ex) {
        Ok(b) => b,
        Err(e) => return Reply::error(format!("ERR {e}")),
    };
    let mut head = String::new();
    if psync.is_some() {
        head.push_str(&format!(
            "+FULLRESYNC {} {}\r\n",
            ex.repl.replid, ex.repl.offset
        ));
    }
    head.push_str(&format!("${}\r\n", image.len()));
    let c = ex.client_mut(slot);
    c.out.extend_from_slice(head.as_bytes());
    c.out.extend_from_slice(&image);
    // The replica starts from the image: the next command must say its database.
    ex.stream.reset_db();
    add_peer(ex, slot, id, ip, &conf, psync.is_none());
    crate::log::notice(&format!("Synchronization with replica {addr} succeeded"));
    Reply::NoReply
}

/// The backlog's bytes from `off` when `replid` is our history and the offset is in
/// the backlog.
fn try_partial(ex: &Executor, replid: &[u8], off: &[u8]) -> Option<Vec<u8>> {
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

fn add_peer(ex: &mut Executor, slot: usize, id: u64, ip: String, conf: &PeerConf, old: bool) {
    ex.mark_pending_write(slot);
    ex.repl.peers.push(Peer {
        slot,
        id,
        ip,
        port: conf.port,
        ack_off: 0,
        aof_off: 0,
        ack_time: Instant::now(),
        old_protocol: old,
        waiting: None,
    });
}

fn snapshot_path() -> std::path::PathBuf {
    std::path::PathBuf::from(format!("temp-repl-{}.rdb", std::process::id()))
}

/// The full resynchronization through the copy-on-write snapshot: None when it cannot
/// be used (another snapshot runs), so the caller sends a synchronous image.
fn sync_with_snapshot(
    ex: &mut Executor,
    slot: usize,
    id: u64,
    ip: &str,
    conf: &PeerConf,
    psync: bool,
) -> Option<Reply> {
    use crate::persistence::cow::Purpose;
    let joining = ex
        .persist
        .snap
        .as_ref()
        .is_some_and(|s| s.purpose == Purpose::Replication && !s.is_cancelled());
    let held = if joining {
        // Another replica waits for the same image: same offset, same held stream.
        ex.repl
            .peers
            .iter()
            .find_map(|p| p.waiting.clone())
            .unwrap_or_default()
    } else {
        if ex.persist.busy() {
            return None;
        }
        let path = snapshot_path();
        if crate::persistence::snapshot::begin_snapshot(ex, Purpose::Replication, &path).is_err() {
            return None;
        }
        ex.repl.snapshot_offset = ex.repl.offset;
        Vec::new()
    };
    if psync {
        let line = format!(
            "+FULLRESYNC {} {}\r\n",
            ex.repl.replid, ex.repl.snapshot_offset
        );
        ex.client_mut(slot).out.extend_from_slice(line.as_bytes());
    }
    ex.stream.reset_db();
    add_peer(ex, slot, id, ip.to_string(), conf, !psync);
    if let Some(p) = ex.repl.peers.last_mut() {
        p.waiting = Some(held);
    }
    crate::log::notice("Starting BGSAVE for SYNC with target: disk");
    Some(Reply::NoReply)
}

/// The replication snapshot ended: waiting replicas get the image and the stream
/// held for them, or are disconnected (they retry) when it failed.
pub fn snapshot_finished(ex: &mut Executor, result: Result<(), String>) {
    let path = snapshot_path();
    let image = result.and_then(|()| std::fs::read(&path).map_err(|e| e.to_string()));
    let _ = std::fs::remove_file(&path);
    let waiting: Vec<usize> = ex
        .repl
        .peers
        .iter()
        .filter(|p| p.waiting.is_some())
        .map(|p| p.slot)
        .collect();
    for slot in waiting {
        let held = ex
            .repl
            .peers
            .iter_mut()
            .find(|p| p.slot == slot)
            .and_then(|p| p.waiting.take())
            .unwrap_or_default();
        match &image {
            Ok(bytes) => {
                let c = ex.client_mut(slot);
                c.out
                    .extend_from_slice(format!("${}\r\n", bytes.len()).as_bytes());
                c.out.extend_from_slice(bytes);
                c.out.extend_from_slice(&held);
                ex.mark_pending_write(slot);
                crate::log::notice(&format!(
                    "Synchronization with replica {} succeeded",
                    ex.client(slot).addr
                ));
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
        } else if is(opt, "rdb-only") || is(opt, "rdb-filter-only") {
            // Accepted for compatibility (redis-cli --rdb); the stream is still sent.
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
    let Some(ms) = crate::util::numeric::parse_i64(args[2]) else {
        return Reply::err("ERR timeout is not an integer or out of range");
    };
    if ms < 0 {
        return Reply::err("ERR timeout is negative");
    }
    let slot = ctx.client;
    feed(ctx.ex);
    let target = ctx.ex.client(slot).woff;
    let acked = ctx.ex.repl.acked(target);
    if acked >= num || ctx.ex.blocking.deny_blocking || ctx.ex.client(slot).in_exec {
        return Reply::Int(acked);
    }
    let deadline = (ms > 0).then(|| Instant::now() + std::time::Duration::from_millis(ms as u64));
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
