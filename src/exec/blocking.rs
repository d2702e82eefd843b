//! Blocked clients: the wait queues of blocking commands (BLPOP, BLMOVE, BLMPOP, …),
//! the ready-key signals that wake them, timeouts, CLIENT UNBLOCK and disconnects.
//!
//! ## How it works
//! - A blocking command's handler first tries to serve itself like its non-blocking
//!   form. When it cannot, it returns [`block`]`(ctx, args, keys, btype, deadline,
//!   timeout_reply)`. That registers the client in the FIFO wait queue of each key
//!   (queues are keyed by database + key) and answers `Reply::NoReply`, so nothing
//!   is written yet.
//! - While a client is blocked, `Executor::can_run` is false for it: the network
//!   layer keeps its further input buffered. When it is unblocked its slot is queued
//!   in [`Blocking::take_resumed`] so the network layer resumes processing it.
//! - Every key modification goes through `Ctx::modified`, which calls
//!   [`Blocking::signal`]: a key with waiters is queued as ready (cheap when nobody
//!   waits). Nothing is served during the command that signalled.
//! - After a top-level command finishes (for a MULTI/EXEC block or a script, that is
//!   after the whole block, since their inner commands are not top level),
//!   `Executor::execute_and_reply` calls [`handle_ready`]. For each ready key, in the
//!   order signalled, waiters whose blocked type matches the key's type are re-run in
//!   the order they blocked: the stored command is executed again through
//!   `Executor::call`. If it produces a reply, the client is unblocked and the reply
//!   goes to its output buffer; if it calls [`block`] again (the key was emptied by an
//!   earlier waiter), it keeps its place and its original deadline. Commands run on
//!   wake-up may make other keys ready (BLMOVE pushing to a list another client waits
//!   on); those are handled in the same loop, so chains resolve before the next
//!   command is read.
//! - Deadlines are kept in an ordered set; [`tick`] (called every event-loop turn,
//!   and the loop's poll timeout includes [`Blocking::ms_until_deadline`]) answers
//!   expired waiters with their timeout reply (null array or null bulk).
//! - `deny_blocking` makes [`block`] answer the timeout reply at once, as Redis does
//!   for blocking commands inside MULTI/EXEC and scripts: EXEC and the scripting host
//!   set it while they run queued/script commands.
//!
//! ## Adding a blocking command (sorted sets, streams)
//! 1. Give the row the `flags::BLOCKING` flag. In the handler, parse arguments (use
//!    [`parse_timeout`] for seconds-as-decimal timeouts, or compute an `Instant`
//!    deadline yourself, e.g. XREAD BLOCK milliseconds), try to serve, and when there is
//!    nothing to serve `return block(ctx, args, &keys, "zset", deadline, Reply::NullArray)`
//!    with the key type name that should wake it (`Object::type_name`).
//! 2. Make the handler idempotent to re-running: on wake-up it is simply called again
//!    with the same arguments (so resolve things like XREAD's `$` to a concrete ID
//!    before blocking, by rewriting `args` you pass to `block`: the stored arguments
//!    are what gets re-run).
//! 3. Writers need nothing special: `ctx.modified(key)` already signals readiness.

use std::collections::{BTreeSet, VecDeque};

use crate::util::{FastMap, FastSet};
use std::time::{Duration, Instant};

use crate::commands::{Command, Ctx};
use crate::exec::{Executor, ReplyMode};
use crate::protocol::Reply;

/// A blocked client's state.
struct Blocked {
    db: usize,
    keys: Vec<Vec<u8>>,
    /// The key type that wakes this client ("list", "zset", "stream").
    btype: &'static str,
    /// The command and arguments re-run on wake-up.
    cmd: &'static Command,
    args: Vec<Vec<u8>>,
    deadline: Option<Instant>,
    timeout_reply: Reply,
    /// Also re-run when the key is deleted or changes type (XREADGROUP answers
    /// NOGROUP / WRONGTYPE then, as Redis's `unblock_on_nokey`).
    wake_on_any_change: bool,
}

#[derive(Default)]
pub struct Blocking {
    /// (db, key) → client slots in the order they blocked.
    waiters: FastMap<(usize, Vec<u8>), VecDeque<usize>>,
    clients: FastMap<usize, Blocked>,
    deadlines: BTreeSet<(Instant, usize)>,
    /// Keys signalled since the last `handle_ready`, in order, without repeats.
    ready: Vec<(usize, Vec<u8>)>,
    ready_set: FastSet<(usize, Vec<u8>)>,
    /// Clients just unblocked whose buffered input should be processed again.
    resumed: Vec<usize>,
    /// The client whose command is being re-run on wake-up, and whether it blocked again.
    pub(crate) reprocessing: Option<usize>,
    reblocked: bool,
    /// Blocking commands behave as their non-blocking forms (MULTI/EXEC, scripts).
    pub deny_blocking: bool,
    /// Clients blocked by FLUSHALL/FLUSHDB SYNC run as a blocking asynchronous flush:
    /// slot → the lazy-free ticket whose processing answers them (keyspace/lazyfree.rs).
    lazyfree_tickets: FastMap<usize, u64>,
}

impl Blocking {
    #[inline]
    pub fn is_blocked(&self, slot: usize) -> bool {
        // No hashing while nobody is blocked.
        !self.clients.is_empty() && self.clients.contains_key(&slot)
    }

    /// The kind of wait the client in `slot` is blocked in ("list", "shutdown", …).
    pub fn blocked_type(&self, slot: usize) -> Option<&'static str> {
        self.clients.get(&slot).map(|b| b.btype)
    }

    /// INFO `blocked_clients`.
    pub fn blocked_clients(&self) -> usize {
        self.clients.len()
    }

    /// INFO `total_blocking_keys`.
    pub fn blocking_keys(&self) -> usize {
        self.waiters.len()
    }

    /// INFO `total_blocking_keys` and `total_blocking_keys_on_nokey` (keys with a
    /// waiter also woken when the key is deleted, XREADGROUP), not counting the
    /// keys `internal` names (pseudo keys such as WAITAOF's).
    pub fn key_counts(&self, internal: impl Fn(&[u8]) -> bool) -> (usize, usize) {
        let mut total = 0;
        let mut nokey = 0;
        for ((_, key), queue) in &self.waiters {
            if internal(key) {
                continue;
            }
            total += 1;
            if queue
                .iter()
                .any(|s| self.clients.get(s).is_some_and(|b| b.wake_on_any_change))
            {
                nokey += 1;
            }
        }
        (total, nokey)
    }

    /// Called for every modified key: queues it if someone waits on it.
    #[inline]
    pub fn signal(&mut self, db: usize, key: &[u8]) {
        if !self.waiters.is_empty() {
            self.signal_waited(db, key);
        }
    }

    #[inline(never)]
    fn signal_waited(&mut self, db: usize, key: &[u8]) {
        let k = (db, key.to_vec());
        if self.waiters.contains_key(&k) && self.ready_set.insert(k.clone()) {
            self.ready.push(k);
        }
    }

    /// After SWAPDB: every key waited on in these databases may now hold a value.
    pub fn signal_dbs(&mut self, dbs: &[usize]) {
        let keys: Vec<(usize, Vec<u8>)> = self
            .waiters
            .keys()
            .filter(|(d, _)| dbs.contains(d))
            .cloned()
            .collect();
        for (db, key) in keys {
            self.signal(db, &key);
        }
    }

    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Clients unblocked since the last call, for the network layer to resume.
    pub fn take_resumed(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.resumed)
    }

    /// Milliseconds until the nearest deadline (`u64::MAX` when none). A client
    /// waiting for the lazy-free thread is checked every millisecond.
    pub fn ms_until_deadline(&self, now: Instant) -> u64 {
        if !self.lazyfree_tickets.is_empty() {
            return 1;
        }
        match self.deadlines.first() {
            None => u64::MAX,
            Some((t, _)) => {
                let d = t.saturating_duration_since(now);
                // Round up so the loop does not wake just before the deadline.
                (d.as_micros() as u64).div_ceil(1000)
            }
        }
    }

    /// Removes a client from every queue; returns its state.
    fn remove(&mut self, slot: usize) -> Option<Blocked> {
        let b = self.clients.remove(&slot)?;
        self.lazyfree_tickets.remove(&slot);
        for key in &b.keys {
            let k = (b.db, key.clone());
            if let Some(q) = self.waiters.get_mut(&k) {
                q.retain(|&s| s != slot);
                if q.is_empty() {
                    self.waiters.remove(&k);
                }
            }
        }
        if let Some(t) = b.deadline {
            self.deadlines.remove(&(t, slot));
        }
        Some(b)
    }

    /// Marks a just-blocked client to be re-run also when its key is deleted or
    /// changes type (see [`Blocked::wake_on_any_change`]).
    pub fn wake_on_any_change(&mut self, slot: usize) {
        if let Some(b) = self.clients.get_mut(&slot) {
            b.wake_on_any_change = true;
        }
    }

    /// Replaces a blocked client's timeout reply (WAITAOF answers with the state at
    /// the time of the timeout).
    pub fn set_timeout_reply(&mut self, slot: usize, reply: Reply) {
        if let Some(b) = self.clients.get_mut(&slot) {
            b.timeout_reply = reply;
        }
    }

    /// A client disconnected: forget it.
    pub fn disconnect(&mut self, slot: usize) {
        self.remove(slot);
        self.resumed.retain(|&s| s != slot);
    }
}

/// A timeout in milliseconds (WAIT, WAITAOF, XREAD BLOCK, CLIENT PAUSE), as Redis's
/// getTimeoutFromObjectOrReply reads one: an integer, not negative, whose deadline
/// (`now_ms` plus it) fits in 64 bits. 0 is returned as 0 (no deadline).
pub fn parse_timeout_ms(arg: &[u8], now_ms: i64) -> Result<i64, Reply> {
    let ms = crate::util::numeric::parse_i64(arg)
        .ok_or(Reply::err("ERR timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(Reply::err("ERR timeout is negative"));
    }
    if ms > 0 && ms > i64::MAX - now_ms {
        return Err(Reply::err("ERR timeout is out of range"));
    }
    Ok(ms)
}

/// Parses a blocking timeout in seconds (decimals allowed, ms precision, rounded up)
/// into a deadline: `None` waits forever (0). Errors are Redis's.
pub fn parse_timeout(arg: &[u8]) -> Result<Option<Instant>, Reply> {
    use crate::util::numeric::{parse_f64, LongDouble};
    let not_float = Reply::err("ERR timeout is not a float or out of range");
    let ld = LongDouble::parse(arg).ok_or(not_float.clone())?;
    if ld.is_nan() {
        return Err(not_float);
    }
    // Out-of-f64-range literals that a long double accepts: huge or tiny.
    let v = parse_f64(arg)
        .or_else(|| std::str::from_utf8(arg).ok()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    let ms = v * 1000.0;
    if ms > i64::MAX as f64 {
        return Err(Reply::err("ERR timeout is out of range"));
    }
    let ms = ms.ceil() as i64;
    if ms < 0 {
        return Err(Reply::err("ERR timeout is negative"));
    }
    if ms == 0 {
        return Ok(None);
    }
    Ok(Some(
        Instant::now()
            .checked_add(Duration::from_millis(ms as u64))
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(100 * 365 * 86400)),
    ))
}

/// Blocks the calling client on `keys` until one of them (of type `btype`) is
/// signalled, the deadline passes (answering `timeout_reply`), or it is unblocked.
/// Returns the handler's reply: `NoReply` when blocked, `timeout_reply` when blocking
/// is denied (MULTI/EXEC, scripts).
pub fn block(
    ctx: &mut Ctx,
    args: &[&[u8]],
    keys: &[&[u8]],
    btype: &'static str,
    deadline: Option<Instant>,
    timeout_reply: Reply,
) -> Reply {
    let denied_reply = timeout_reply.clone();
    block_or(
        ctx,
        args,
        keys,
        btype,
        deadline,
        timeout_reply,
        denied_reply,
    )
}

/// `block`, answering `denied_reply` instead when blocking is denied: BLMOVE and
/// BRPOPLPUSH answer a null bulk there but a null array when they time out, as Redis.
pub fn block_or(
    ctx: &mut Ctx,
    args: &[&[u8]],
    keys: &[&[u8]],
    btype: &'static str,
    deadline: Option<Instant>,
    timeout_reply: Reply,
    denied_reply: Reply,
) -> Reply {
    let b = &mut ctx.ex.blocking;
    if b.deny_blocking {
        return denied_reply;
    }
    if b.reprocessing == Some(ctx.client) {
        // Woken but nothing to serve: keep the place in the queues and the deadline.
        b.reblocked = true;
        return Reply::NoReply;
    }
    let slot = ctx.client;
    let mut uniq: Vec<Vec<u8>> = Vec::with_capacity(keys.len());
    for k in keys {
        if !uniq.iter().any(|u| u == k) {
            uniq.push(k.to_vec());
        }
    }
    for k in &uniq {
        b.waiters
            .entry((ctx.db, k.clone()))
            .or_default()
            .push_back(slot);
    }
    if let Some(t) = deadline {
        b.deadlines.insert((t, slot));
    }
    b.clients.insert(
        slot,
        Blocked {
            db: ctx.db,
            keys: uniq,
            btype,
            cmd: ctx.cmd,
            args: args.iter().map(|a| a.to_vec()).collect(),
            deadline,
            timeout_reply,
            wake_on_any_change: false,
        },
    );
    Reply::NoReply
}

/// Delivers a reply to a client that was blocked and schedules it to resume.
fn deliver(ex: &mut Executor, slot: usize, reply: &Reply) {
    let c = ex.client_mut(slot);
    if c.reply_mode == ReplyMode::On {
        c.push_reply(reply);
    }
    ex.mark_pending_write(slot);
    ex.blocking.resumed.push(slot);
}

/// Accounts a blocked command answered without running again (deadline, CLIENT
/// UNBLOCK, WAIT's acknowledgements): its one call in commandstats, as Redis's
/// updateStatsOnUnblock, since the call that blocked was not counted.
fn count_unblocked(ex: &mut Executor, cmd: &'static Command, reply: &Reply) {
    ex.stats.total_commands_processed += 1;
    let st = ex.cmd_stats.entry(cmd.name);
    st.calls += 1;
    if let Reply::Error(e) = reply {
        st.failed_calls += 1;
        ex.count_error(e);
    }
}

/// Serves waiters of the keys signalled ready, until no key is ready.
pub fn handle_ready(ex: &mut Executor) {
    while !ex.blocking.ready.is_empty() {
        let ready = std::mem::take(&mut ex.blocking.ready);
        ex.blocking.ready_set.clear();
        for (db, key) in ready {
            let Some(q) = ex.blocking.waiters.get(&(db, key.clone())) else {
                continue;
            };
            let slots: Vec<usize> = q.iter().copied().collect();
            for slot in slots {
                let ty = ex.ks.live_type(db, &key, crate::keyspace::unix_ms());
                let Some(b) = ex.blocking.clients.get(&slot) else {
                    continue;
                };
                if ty != Some(b.btype) && !b.wake_on_any_change {
                    continue;
                }
                let (cmd, args) = (b.cmd, b.args.clone());
                let argv: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
                // The command runs again as if just sent: permissions changed while
                // it waited refuse it now (Redis reprocesses it through
                // processCommand).
                if !ex.client(slot).acl_free {
                    if let Err(d) = ex.acl_check(slot, cmd, &argv) {
                        let reply = ex.acl_deny(slot, d, cmd, &argv);
                        let reply = ex.reject(Some(cmd), reply);
                        ex.blocking.remove(slot);
                        deliver(ex, slot, &reply);
                        continue;
                    }
                }
                ex.blocking.reprocessing = Some(slot);
                ex.blocking.reblocked = false;
                let reply = ex.call(slot, cmd, &argv);
                ex.blocking.reprocessing = None;
                if ex.blocking.reblocked {
                    ex.flush_deferred_pushes(slot);
                    continue;
                }
                ex.blocking.remove(slot);
                deliver(ex, slot, &reply);
                // Pushes its command raised (invalidations) follow its reply.
                ex.flush_deferred_pushes(slot);
            }
        }
    }
}

/// Blocks the client of a FLUSHALL/FLUSHDB that Redis runs as a blocking
/// asynchronous flush (flushCommandCommon): it is answered `+OK` once the lazy-free
/// thread has processed `ticket`, the flush's job, and everything queued before it.
/// Its pipelined commands wait meanwhile; other clients are served.
pub fn block_on_lazyfree(ctx: &mut Ctx, args: &[&[u8]], ticket: u64) -> Reply {
    let reply = block(ctx, args, &[], "lazyfree", None, Reply::ok());
    if matches!(reply, Reply::NoReply) {
        ctx.ex.blocking.lazyfree_tickets.insert(ctx.client, ticket);
    }
    reply
}

/// Answers the clients of blocking flushes whose lazy-free job is done.
fn serve_lazyfree(ex: &mut Executor) {
    if ex.blocking.lazyfree_tickets.is_empty() {
        return;
    }
    let done: Vec<usize> = ex
        .blocking
        .lazyfree_tickets
        .iter()
        .filter(|(_, &t)| ex.ks.lazyfree.is_done(t))
        .map(|(&slot, _)| slot)
        .collect();
    for slot in done {
        unblock_with(ex, slot, &Reply::ok());
    }
}

/// Answers waiters whose deadline has passed with their timeout reply, and clients
/// of blocking flushes whose flush is done.
pub fn tick(ex: &mut Executor) {
    serve_lazyfree(ex);
    if ex.blocking.deadlines.is_empty() {
        return;
    }
    let now = Instant::now();
    while let Some(&(t, slot)) = ex.blocking.deadlines.first() {
        if t > now {
            break;
        }
        match ex.blocking.remove(slot) {
            Some(b) => {
                count_unblocked(ex, b.cmd, &b.timeout_reply);
                deliver(ex, slot, &b.timeout_reply)
            }
            None => {
                ex.blocking.deadlines.pop_first();
            }
        }
    }
}

/// Unblocks a client blocked by [`block`] with `reply` (WAIT answers from
/// src/replication when enough replicas acknowledged or its timeout passed).
pub fn unblock_with(ex: &mut Executor, slot: usize, reply: &Reply) {
    if let Some(b) = ex.blocking.remove(slot) {
        count_unblocked(ex, b.cmd, reply);
        deliver(ex, slot, reply);
    }
}

/// CLIENT UNBLOCK: unblocks the client with `id` as by a timeout, or with an
/// `UNBLOCKED` error. Returns whether a blocked client was found.
pub fn unblock_by_id(ex: &mut Executor, id: u64, error: bool) -> bool {
    let Some(slot) = ex
        .clients()
        .find(|(_, c)| c.id == id)
        .map(|(s, _)| s)
        .filter(|s| {
            ex.blocking.is_blocked(*s) && !crate::commands::migrate::is_migrating_client(ex, *s)
        })
    else {
        return false;
    };
    let Some(b) = ex.blocking.remove(slot) else {
        return false;
    };
    let reply = if error {
        Reply::err("UNBLOCKED client unblocked via CLIENT UNBLOCK")
    } else {
        // WAIT answers the replicas acknowledged by now (src/replication).
        crate::replication::master::wait_unblock_reply(ex, slot).unwrap_or(b.timeout_reply)
    };
    count_unblocked(ex, b.cmd, &reply);
    deliver(ex, slot, &reply);
    true
}

/// A client blocked on keys of a data type (list, sorted set, stream): what cluster
/// mode checks against slot ownership (Redis's BLOCKED_LIST/ZSET/STREAM).
pub struct KeyBlocked {
    pub slot: usize,
    pub first_key: Vec<u8>,
    pub is_write: bool,
}

/// Clients blocked on keys of a data type, in no particular order. WAIT, WAITAOF
/// and blocking flushes are not among them.
pub fn key_blocked(ex: &Executor) -> Vec<KeyBlocked> {
    ex.blocking
        .clients
        .iter()
        .filter(|(_, b)| matches!(b.btype, "list" | "zset" | "stream"))
        .filter_map(|(&slot, b)| {
            Some(KeyBlocked {
                slot,
                first_key: b.keys.first()?.clone(),
                is_write: b.cmd.is_write(),
            })
        })
        .collect()
}

/// This server starts following a master: every blocked client is answered and
/// closed after the answer, as Redis's disconnectAllBlockedClients (a blocking
/// flush answers +OK, the others `-UNBLOCKED`).
pub fn disconnect_all_blocked(ex: &mut Executor) {
    let mut slots: Vec<usize> = ex.blocking.clients.keys().copied().collect();
    slots.sort_unstable();
    for slot in slots {
        // A MIGRATE in flight is not blocked in Redis's sense (it runs inline there).
        if crate::commands::migrate::is_migrating_client(ex, slot) {
            continue;
        }
        let reply = if ex.blocking.lazyfree_tickets.contains_key(&slot) {
            Reply::ok()
        } else {
            Reply::err(
                "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)",
            )
        };
        unblock_with(ex, slot, &reply);
        ex.client_mut(slot).close_after_reply = true;
    }
}
