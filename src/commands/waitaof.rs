//! WAITAOF numlocal numreplicas timeout (Redis 7.2+): wait until the client's last
//! write is fsynced to the local AOF and acknowledged by replicas.
//!
//! A client's last write is its `aof_woff`, the write-stream position after its last
//! command that changed data (`Executor::call` records it). The AOF tracks the
//! position known to be on disk (`aof::fsynced_offset`): with `appendfsync always`
//! that is every flush; with `everysec` it moves when the background fsync finishes;
//! with `no` it never moves, so a local wait times out, as in Redis.
//!
//! A waiting client blocks through `exec::blocking` on a pseudo key no command writes
//! to in practice; every advance of the fsynced position signals that key
//! (`fsync_progress`), and the blocked WAITAOF is re-run: it answers once satisfied
//! (or with the error when AOF was turned off meanwhile), otherwise it keeps its
//! place and refreshes its timeout reply with the current counts.
//!
//! Replicas count as Redis 7.2+ counts them: each replica acknowledges with
//! `REPLCONF ACK <offset> FACK <aof offset>`, the FACK being the replication offset
//! its own AOF has fsynced (`replication/fack.rs`); the master keeps the highest per
//! replica (`Peer::aof_off`) and counts those that reached the client's `woff` (the
//! replication offset of its last write). A blocking WAITAOF asks the replicas for
//! an ACK (`REPLCONF GETACK *`, as WAIT does), and every ACK re-checks the waiters
//! (`replicas_progress`). WAITAOF on a replica is an error, as in Redis.

use crate::command;
use crate::commands::flags::*;
use crate::commands::{Command, Ctx};
use crate::exec::{blocking, Executor};
use crate::protocol::Reply;
use crate::util::numeric::parse_i64;

pub static COMMANDS: &[Command] = &[command!(
    "waitaof",
    4,
    BLOCKING,
    (0, 0, 0),
    &["slow", "connection"],
    "generic",
    "7.2.0",
    "Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the master and/or replicas.",
    "O(1)",
    waitaof
)];

/// The key blocked WAITAOF clients wait on (never a user key in practice: it starts
/// with NUL bytes, and a write to it would only re-check the waiters).
const WAIT_KEY: &[u8] = b"\0\0waitaof\0\0";

/// Whether `key` is the pseudo key WAITAOF clients block on (not counted in INFO's
/// blocking keys: Redis's WAITAOF blocks on no key).
pub fn is_wait_key(key: &[u8]) -> bool {
    key == WAIT_KEY
}

/// How many replicas fsynced the stream up to the replication offset `offset`.
pub fn replicas_acked(ex: &Executor, offset: u64) -> i64 {
    ex.repl.aof_acked(offset)
}

/// A replica's ACK arrived: blocked WAITAOF clients are re-checked.
pub fn replicas_progress(ex: &mut Executor) {
    fsync_progress(ex);
}

/// Called when the fsynced position advanced, or AOF was turned on or off: blocked
/// WAITAOF clients are re-checked after the current command (or, outside one, when
/// the network loop next serves ready keys).
pub fn fsync_progress(ex: &mut Executor) {
    if ex.blocking.blocked_clients() == 0 {
        return;
    }
    for db in 0..ex.ks.dbs.len() {
        ex.blocking.signal(db, WAIT_KEY);
    }
}

fn waitaof(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let not_int = || Reply::err("ERR value is not an integer or out of range");
    let Some(numlocal) = parse_i64(args[1]) else {
        return not_int();
    };
    if !(0..=1).contains(&numlocal) {
        return Reply::err("ERR value is out of range, value must between 0 and 1");
    }
    let Some(numreplicas) = parse_i64(args[2]) else {
        return not_int();
    };
    if numreplicas < 0 {
        return Reply::err("ERR value is out of range, must be positive");
    }
    let timeout = match crate::exec::blocking::parse_timeout_ms(args[3], ctx.now_ms) {
        Ok(t) => t,
        Err(e) => return e,
    };
    if ctx.ex.repl.is_replica() {
        return Reply::err("ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.");
    }
    if numlocal > 0 && ctx.ex.aof.is_none() {
        return Reply::err(
            "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.",
        );
    }
    let slot = ctx.client;
    let aof_woff = ctx.ex.client(slot).aof_woff;
    let acklocal = crate::persistence::aof::fsynced_offset(ctx.ex).is_some_and(|f| f >= aof_woff);
    let ackreplicas = if numreplicas > 0 || !ctx.ex.repl.peers.is_empty() {
        // Exact offsets: what the stream holds goes to the replicas first (as WAIT).
        crate::replication::feed(ctx.ex);
        replicas_acked(ctx.ex, ctx.ex.client(slot).woff)
    } else {
        0
    };
    let reply = Reply::Array(vec![Reply::Int(acklocal as i64), Reply::Int(ackreplicas)]);
    if (ackreplicas >= numreplicas && acklocal as i64 >= numlocal) || ctx.ex.blocking.deny_blocking
    {
        return reply;
    }
    if ctx.ex.blocking.is_blocked(slot) {
        // Re-checked and still waiting: keep the place, refresh the timeout reply.
        ctx.ex.blocking.set_timeout_reply(slot, reply.clone());
    } else if ackreplicas < numreplicas {
        // Replicas are asked for an ACK at the end of the turn (once: a re-check
        // after their ACK must not ask again, or the two would ping-pong).
        ctx.ex.repl.getack_pending = true;
    }
    // 0 waits forever (and so does a timeout past the clock's range).
    let deadline = (timeout > 0)
        .then(|| {
            std::time::Instant::now().checked_add(std::time::Duration::from_millis(timeout as u64))
        })
        .flatten();
    let r = blocking::block(ctx, args, &[WAIT_KEY], "waitaof", deadline, reply);
    ctx.ex.blocking.wake_on_any_change(slot);
    r
}
