//! The master side: SYNC/PSYNC, REPLCONF from replicas, WAIT.
//!
//! A full resynchronization sends `+FULLRESYNC <replid> <offset>` and a synchronous
//! RDB image of the dataset (`persistence::snapshot::serialize`) as
//! `$<len>\r\n<payload>` into the replica's output buffer; the replica is online at
//! once and gets every stream byte produced after the image. (A synchronous image
//! blocks the executor for the time it takes to serialize the dataset; the
//! forkless copy-on-write snapshot used by BGSAVE would avoid that, and is the next
//! step.) A partial resynchronization sends `+CONTINUE <replid>` and the backlog's
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
        ack_time: Instant::now(),
        old_protocol: old,
    });
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
        } else if is(opt, "ack") || is(opt, "fack") {
            // From an online replica: record, never reply.
            if is(opt, "ack") {
                if let Some(off) = crate::util::numeric::parse_i64(val) {
                    if let Some(p) = ex.repl.peers.iter_mut().find(|p| p.slot == slot) {
                        p.ack_off = p.ack_off.max(off.max(0) as u64);
                        p.ack_time = Instant::now();
                    }
                }
                serve_waiters(ex);
            }
            return Reply::NoReply;
        } else if is(opt, "getack") {
            // Only a replica's master asks this; it gets `REPLCONF ACK`.
            if let Some(l) = ex.repl.link.as_mut() {
                if l.client == Some(slot) {
                    l.send_ack();
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
