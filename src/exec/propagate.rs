//! The write stream: every change to the dataset, as commands whose replay reproduces
//! it exactly. The AOF (persistence/aof.rs) consumes it; replication will too.
//!
//! How it is fed:
//! - `Executor::call` notes `ks.dirty` before a handler runs; if the handler changed
//!   data, the command is appended — verbatim by default.
//! - A handler may replace that default with `Ctx::propagate_as` (one or more
//!   commands), e.g. RESTORE with a relative TTL propagates its ABSTTL form.
//! - Commands whose verbatim replay would differ are rewritten here, centrally, from
//!   the arguments, the reply and the keyspace after the call: relative expiries
//!   become PEXPIREAT (or DEL when the key is gone), SET/SETEX/GETEX get a trailing
//!   PEXPIREAT, INCRBYFLOAT becomes SET KEEPTTL,
//!   blocking pops their non-blocking form, the MPOP family single-key pops with a
//!   count, GETDEL a DEL, GETSET a SET, SET ... GET (without an expiry) a SET without
//!   its GET.
//! - Commands that run other commands (EXEC, scripts) are not appended themselves:
//!   the commands they ran are, wrapped in MULTI/EXEC when there is more than one.
//! - Keys deleted by expiry become DEL, before the command that noticed them.
//! - Hash fields deleted by expiry become one `HDEL key field` each: outside a
//!   command (active expiry) each goes out alone; inside one (lazy expiry, HEXPIRE
//!   with a past time) they precede the command's own writes, and the whole lot is
//!   one MULTI/EXEC when it is more than one command, as Redis 7.4's
//!   propagateHashFieldDeletion and call() do.
//! - SELECT is inserted whenever the database of the next command differs.
//! - PUBLISH goes to replicas only (Redis's PROPAGATE_REPL): its bytes are marked and
//!   the AOF skips them (`aof_bytes`).
//! - A script may narrow where its commands go with `redis.set_repl`: to the AOF only
//!   (marked; replicas skip them, `repl_bytes`), to replicas only, or nowhere.
//!
//! Nothing is recorded while the stream is disabled (no consumer) or while loading.

use crate::commands::Command;
use crate::protocol::reply::encode_bulk;
use crate::protocol::Reply;

use super::Executor;

/// Commands that run other commands: their effects are propagated, not themselves.
const RUNS_COMMANDS: &[&str] = &[
    "exec",
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
];

/// MULTI as the stream encodes it, for wrapping commands already appended.
const MULTI: &[u8] = b"*1\r\n$5\r\nMULTI\r\n";

#[derive(Default)]
pub struct WriteStream {
    /// Whether anything consumes the stream.
    pub enabled: bool,
    /// RESP-encoded commands not yet taken by the consumer.
    pub buf: Vec<u8>,
    /// Commands appended since the stream started (for MULTI/EXEC wrapping).
    count: u64,
    /// The database the stream's reader has selected.
    db: Option<usize>,
    /// Replacement commands set by the running handler (`Ctx::propagate_as`).
    pub(crate) override_cmds: Option<Vec<Vec<Vec<u8>>>>,
    /// The running handler changed data even if `ks.dirty` says otherwise (a
    /// synchronous save inside it reset the counter).
    pub(crate) force: bool,
    /// Entries of `ks.expired_events` already turned into DELs.
    pub(crate) expired_fed: usize,
    /// Hash fields deleted by expiry during the running command: (db, key, field).
    field_dels: Vec<(usize, Vec<u8>, Vec<u8>)>,
    /// Absolute byte ranges of `buf` meant for replicas only (PUBLISH, which Redis
    /// propagates with PROPAGATE_REPL): the AOF skips them (`aof_bytes`).
    repl_only: Vec<(u64, u64)>,
    /// Absolute byte ranges of `buf` meant for the AOF only (a script's
    /// `redis.set_repl(redis.REPL_AOF)`): replicas skip them (`repl_bytes`).
    aof_only: Vec<(u64, u64)>,
    /// Where the running script's commands must not go (`SKIP_AOF` | `SKIP_REPL`,
    /// from `redis.set_repl`); 0 outside scripts.
    pub(crate) script_skip: u8,
    /// Nesting of command calls (EXEC and scripts call commands).
    depth: u32,
    /// Bytes consumed from the front of `buf` since the start: positions (`position`,
    /// call marks) are absolute, so a prefix can be flushed while a busy script's
    /// call is still open (exec/busy.rs).
    base: u64,
}

/// `script_skip`: the script's commands stay out of the AOF.
pub const SKIP_AOF: u8 = 1;
/// `script_skip`: the script's commands stay out of the replicas' stream.
pub const SKIP_REPL: u8 = 2;

/// `bytes` without the parts in `ranges` (absolute positions, `base` at index 0),
/// from index `from` on.
fn without_ranges<'a>(
    bytes: &'a [u8],
    base: u64,
    ranges: &[(u64, u64)],
    from: usize,
) -> std::borrow::Cow<'a, [u8]> {
    let inside = |&(_, e): &(u64, u64)| e > base + from as u64;
    if !ranges.iter().any(inside) {
        return std::borrow::Cow::Borrowed(&bytes[from..]);
    }
    let mut out = Vec::with_capacity(bytes.len() - from);
    let mut at = from;
    for &(s, e) in ranges {
        let s = (s.saturating_sub(base) as usize).min(bytes.len());
        let e = (e.saturating_sub(base) as usize).min(bytes.len());
        if s > at {
            out.extend_from_slice(&bytes[at..s]);
        }
        at = at.max(e);
    }
    if at < bytes.len() {
        out.extend_from_slice(&bytes[at..]);
    }
    std::borrow::Cow::Owned(out)
}

/// What `begin` remembers for `end`.
pub struct CallMark {
    dirty: u64,
    offset: u64,
    count: u64,
    field_dels: usize,
}

impl WriteStream {
    /// Appends one command.
    pub fn append(&mut self, db: usize, args: &[&[u8]]) {
        self.select(db);
        self.encode(args);
    }

    /// Emits a SELECT if the next command for `db` needs one.
    fn select(&mut self, db: usize) {
        if self.db != Some(db) {
            self.db = Some(db);
            let d = db.to_string();
            self.encode(&[b"SELECT", d.as_bytes()]);
            // A SELECT is not one of the commands a transaction or script ran: a
            // single write after it is not wrapped in MULTI/EXEC (Redis 7).
            self.count -= 1;
        }
    }

    /// Appends one command for replicas only.
    pub fn append_repl_only(&mut self, db: usize, args: &[&[u8]]) {
        self.select(db);
        let start = self.position();
        self.encode(args);
        self.repl_only.push((start, self.position()));
    }

    /// The buffered bytes the AOF takes: all but the replica-only ranges.
    pub fn aof_bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        without_ranges(&self.buf, self.base, &self.repl_only, 0)
    }

    /// The buffered bytes from absolute position `from` on that replicas take: all
    /// but the AOF-only ranges.
    pub fn repl_bytes(&self, from: u64) -> std::borrow::Cow<'_, [u8]> {
        let from = (from.saturating_sub(self.base) as usize).min(self.buf.len());
        without_ranges(&self.buf, self.base, &self.aof_only, from)
    }

    /// Marks the bytes from absolute position `start` to the end as one target's
    /// only (`skip` names the other).
    fn mark_since(&mut self, start: u64, skip: u8) {
        let end = self.position();
        if end > start {
            match skip {
                SKIP_AOF => self.repl_only.push((start, end)),
                SKIP_REPL => self.aof_only.push((start, end)),
                _ => {}
            }
        }
    }

    /// How many buffered bytes the first `n` bytes of `aof_bytes` stand for.
    pub fn raw_len_of_aof(&self, n: usize) -> usize {
        let (mut raw, mut left) = (0usize, n);
        for &(s, e) in &self.repl_only {
            let s = (s.saturating_sub(self.base) as usize).min(self.buf.len());
            let e = (e.saturating_sub(self.base) as usize).min(self.buf.len());
            if s.saturating_sub(raw) >= left {
                break;
            }
            left -= s.saturating_sub(raw);
            raw = raw.max(e);
        }
        (raw + left).min(self.buf.len())
    }

    /// Drops the replica-only ranges that ended before the buffer's start.
    fn forget_consumed_ranges(&mut self) {
        let base = self.base;
        self.repl_only.retain(|&(_, e)| e > base);
        self.aof_only.retain(|&(_, e)| e > base);
    }

    /// Inserts `bytes` at buffer index `at`, keeping the ranges after it in place.
    fn insert_at(&mut self, at: usize, bytes: &[u8]) {
        let abs = self.base + at as u64;
        let n = bytes.len() as u64;
        for r in self.repl_only.iter_mut().chain(self.aof_only.iter_mut()) {
            if r.0 >= abs {
                r.0 += n;
                r.1 += n;
            }
        }
        self.buf.splice(at..at, bytes.iter().copied());
    }

    fn encode(&mut self, args: &[&[u8]]) {
        self.buf.push(b'*');
        self.buf
            .extend_from_slice(args.len().to_string().as_bytes());
        self.buf.extend_from_slice(b"\r\n");
        for a in args {
            encode_bulk(a, &mut self.buf);
        }
        self.count += 1;
    }

    /// The absolute position of the end of the stream.
    pub fn position(&self) -> u64 {
        self.base + self.buf.len() as u64
    }

    /// Forgets the buffered bytes (the consumer took them).
    pub fn clear(&mut self) {
        self.base += self.buf.len() as u64;
        self.release_buf();
        self.forget_consumed_ranges();
    }

    /// Forgets the first `n` buffered bytes (the consumer took only those).
    pub fn consume_front(&mut self, n: usize) {
        let n = n.min(self.buf.len());
        self.buf.drain(..n);
        self.base += n as u64;
        if self.buf.is_empty() {
            self.release_buf();
        }
        self.forget_consumed_ranges();
    }

    /// Empties the buffer; one grown past `KEPT_CAPACITY` (a huge command passed) is
    /// freed rather than kept, as Redis frees an AOF buffer of 4000 bytes or more.
    fn release_buf(&mut self) {
        const KEPT_CAPACITY: usize = 4000;
        if self.buf.capacity() >= KEPT_CAPACITY {
            self.buf = Vec::new();
        } else {
            self.buf.clear();
        }
    }

    /// Drops the bytes from absolute position `pos` on (a busy script's partial
    /// effects at SHUTDOWN NOSAVE).
    pub fn truncate_to(&mut self, pos: u64) {
        let keep = (pos.saturating_sub(self.base) as usize).min(self.buf.len());
        self.buf.truncate(keep);
        let end = self.position();
        self.repl_only.retain(|&(s, _)| s < end);
        self.aof_only.retain(|&(s, _)| s < end);
    }

    /// The database the stream's reader has selected, if it was said.
    pub fn db(&self) -> Option<usize> {
        self.db
    }

    /// Forgets the selected database (a new file starts).
    pub fn reset_db(&mut self) {
        self.db = None;
    }

    /// Records that expiry deleted `field` of the hash at `key`: as its own HDEL at
    /// once outside a command, or with the running command's writes.
    pub fn hash_field_expired(&mut self, db: usize, key: &[u8], field: &[u8]) {
        if !self.enabled {
            return;
        }
        if self.depth == 0 {
            self.append(db, &[b"HDEL", key, field]);
        } else {
            self.field_dels.push((db, key.to_vec(), field.to_vec()));
        }
    }
}

impl Executor {
    /// Called before a handler runs.
    pub(crate) fn stream_begin(&mut self) -> Option<CallMark> {
        if !self.stream.enabled {
            return None;
        }
        self.stream.depth += 1;
        self.stream_feed_expired();
        Some(CallMark {
            dirty: self.ks.dirty,
            offset: self.stream.position(),
            count: self.stream.count,
            field_dels: self.stream.field_dels.len(),
        })
    }

    /// Called after a handler ran: appends what it changed.
    pub(crate) fn stream_end(
        &mut self,
        mark: Option<CallMark>,
        cmd: &'static Command,
        args: &[&[u8]],
        reply: &Reply,
        db: usize,
    ) {
        let Some(mark) = mark else { return };
        self.stream.depth -= 1;
        if !self.stream.enabled {
            // CONFIG SET appendonly no ran inside this call: nothing more to record.
            return;
        }
        // Expiry noticed during the command precedes it.
        self.stream_feed_expired();
        if self.stream.field_dels.len() > mark.field_dels {
            // Field deletions and the command's own writes form one unit.
            let dels = self.stream.field_dels.split_off(mark.field_dels);
            self.stream.select(dels[0].0);
            let (offset, count) = (self.stream.position(), self.stream.count);
            for (d, key, field) in &dels {
                self.stream.append(*d, &[b"HDEL", key, field]);
            }
            self.stream_command(mark, cmd, args, reply, db);
            if self.stream.depth == 0 && self.stream.count - count > 1 {
                let at = offset.saturating_sub(self.stream.base) as usize;
                self.stream.insert_at(at, MULTI);
                self.stream.encode(&[b"EXEC"]);
            }
            return;
        }
        self.stream_command(mark, cmd, args, reply, db);
    }

    /// Appends the command's own writes (the part of `stream_end` after expiry).
    fn stream_command(
        &mut self,
        mark: CallMark,
        cmd: &'static Command,
        args: &[&[u8]],
        reply: &Reply,
        db: usize,
    ) {
        let over = self.stream.override_cmds.take();
        let forced = std::mem::take(&mut self.stream.force);
        let skip = self.script_skip();
        // PUBLISH reaches subscribers of the replicas too (outside cluster mode,
        // where the bus carries it), but not the AOF.
        if matches!(cmd.name, "publish" | "spublish")
            && self.cluster.is_none()
            && self.repl.backlog.is_some()
        {
            if skip & SKIP_REPL == 0 {
                self.stream.append_repl_only(db, args);
            }
            return;
        }
        if RUNS_COMMANDS.contains(&cmd.name) {
            let n = self.stream.count - mark.count;
            if n > 1 {
                let at = mark.offset.saturating_sub(self.stream.base) as usize;
                self.stream.insert_at(at, MULTI);
                self.stream.encode(&[b"EXEC"]);
            }
            return;
        }
        // Only a rise counts: SAVE, SHUTDOWN SAVE and DEBUG RELOAD reset `dirty` to 0
        // and must not be replayed (Redis's call() clamps the difference at 0).
        if self.ks.dirty <= mark.dirty && !forced {
            return;
        }
        // A read command that deleted expired keys on its way moved `dirty`: those
        // deletions went out as DELs above, the read itself is never sent.
        if !cmd.is_write() && !forced && over.is_none() {
            return;
        }
        if skip == SKIP_AOF | SKIP_REPL {
            return;
        }
        // The SELECT goes to both targets, so that each keeps its database.
        self.stream.select(db);
        let start = self.stream.position();
        self.stream_own_writes(over, cmd, args, reply, db);
        self.stream.mark_since(start, skip);
    }

    /// Where the running script's commands must not go (`redis.set_repl`), a target
    /// with no consumer counted as skipped (Redis's shouldPropagate), so that what
    /// only it would get does not count towards a MULTI/EXEC wrapping.
    fn script_skip(&self) -> u8 {
        let skip = self.stream.script_skip;
        if skip == 0 {
            return 0;
        }
        let no_aof = if self.aof.is_none() { SKIP_AOF } else { 0 };
        let no_repl = if self.repl.backlog.is_none() || self.repl.link.is_some() {
            SKIP_REPL
        } else {
            0
        };
        skip | no_aof | no_repl
    }

    /// The command's own writes: the handler's replacement commands, or the command
    /// as `propagate_rewritten` words it.
    fn stream_own_writes(
        &mut self,
        over: Option<Vec<Vec<Vec<u8>>>>,
        cmd: &'static Command,
        args: &[&[u8]],
        reply: &Reply,
        db: usize,
    ) {
        if let Some(cmds) = over {
            // Several commands from one top-level command go out as one transaction,
            // as Redis 7's propagatePendingCommands wraps them (inside EXEC or a
            // script, the caller's own MULTI/EXEC covers them).
            let wrap = cmds.len() > 1 && self.stream.depth == 0;
            if wrap {
                self.stream.append(db, &[b"MULTI"]);
            }
            for c in cmds {
                let refs: Vec<&[u8]> = c.iter().map(|a| a.as_slice()).collect();
                self.stream.append(db, &refs);
            }
            if wrap {
                self.stream.append(db, &[b"EXEC"]);
            }
            return;
        }
        self.propagate_rewritten(cmd, args, reply, db);
    }

    /// Turns keys deleted by expiry into DELs.
    fn stream_feed_expired(&mut self) {
        let events = &self.ks.expired_events;
        for (db, key) in events.iter().skip(self.stream.expired_fed) {
            self.stream.append(*db, &[b"DEL", key]);
        }
        self.stream.expired_fed = events.len();
    }

    /// Called when `ks.expired_events` is drained.
    pub(crate) fn stream_expired_drained(&mut self) {
        if self.stream.enabled {
            self.stream_feed_expired();
        }
        self.stream.expired_fed = 0;
    }

    fn propagate_rewritten(
        &mut self,
        cmd: &'static Command,
        args: &[&[u8]],
        reply: &Reply,
        db: usize,
    ) {
        let key = args.get(1).copied().unwrap_or_default();
        let expire_of = |ex: &Executor, k: &[u8]| -> Option<Option<i64>> {
            ex.ks.dbs[db].table.get(k).map(|e| e.expire())
        };
        match cmd.name {
            "expire" | "pexpire" | "expireat" | "pexpireat" => match expire_of(self, key) {
                Some(Some(at)) => {
                    let at = at.to_string();
                    self.stream.append(db, &[b"PEXPIREAT", key, at.as_bytes()]);
                }
                Some(None) => self.stream.append(db, &[b"PERSIST", key]),
                None => self.stream.append(db, &[b"DEL", key]),
            },
            // Redis 7: a relative or second-based expiry is sent as `SET key value PXAT
            // ms`, so replicas and a replayed AOF expire at the same instant. A time
            // already past is sent as it is: the key is stored with it, and replicas
            // drop it with the DEL of its expiry here.
            "set" | "setex" | "psetex" => {
                let value = if cmd.name == "set" { args[2] } else { args[3] };
                let relative = cmd.name != "set"
                    || args[3..].iter().any(|a| {
                        a.eq_ignore_ascii_case(b"ex")
                            || a.eq_ignore_ascii_case(b"px")
                            || a.eq_ignore_ascii_case(b"exat")
                    });
                match expire_of(self, key) {
                    Some(Some(at)) if relative => {
                        let at = at.to_string();
                        self.stream
                            .append(db, &[b"SET", key, value, b"PXAT", at.as_bytes()]);
                    }
                    // As Redis's setGenericCommand: GET is dropped when no expiry
                    // rewrote the command (a PXAT one keeps it).
                    _ if cmd.name == "set" && !args[3..].iter().any(|a| is_expiry_option(a)) => {
                        let kept: Vec<&[u8]> = args
                            .iter()
                            .enumerate()
                            .filter(|(i, a)| *i < 3 || !a.eq_ignore_ascii_case(b"get"))
                            .map(|(_, a)| *a)
                            .collect();
                        self.stream.append(db, &kept);
                    }
                    _ => self.stream.append(db, args),
                }
            }
            // Redis 6.2+ replicates GETSET as the SET it amounts to.
            "getset" => self.stream.append(db, &[b"SET", key, args[2]]),
            "getex" => match expire_of(self, key) {
                Some(Some(at)) => {
                    let at = at.to_string();
                    self.stream.append(db, &[b"PEXPIREAT", key, at.as_bytes()]);
                }
                Some(None) => self.stream.append(db, &[b"PERSIST", key]),
                None => self.stream.append(db, &[b"DEL", key]),
            },
            "incrbyfloat" => match reply.bulk_bytes() {
                Some(v) => self.stream.append(db, &[b"SET", key, v, b"KEEPTTL"]),
                None => self.stream.append(db, args),
            },
            "blpop" | "brpop" | "bzpopmin" | "bzpopmax" => {
                if let Reply::Array(items) = reply {
                    if let Some(k) = items.first().and_then(Reply::bulk_bytes) {
                        let name: &[u8] = match cmd.name {
                            "blpop" => b"LPOP",
                            "brpop" => b"RPOP",
                            "bzpopmin" => b"ZPOPMIN",
                            _ => b"ZPOPMAX",
                        };
                        self.stream.append(db, &[name, k]);
                    }
                }
            }
            "blmove" if args.len() == 6 => {
                self.stream
                    .append(db, &[b"LMOVE", args[1], args[2], args[3], args[4]]);
            }
            "brpoplpush" if args.len() == 4 => {
                self.stream.append(db, &[b"RPOPLPUSH", args[1], args[2]]);
            }
            // ZMPOP/BZMPOP go out as the single-key pop with the count actually popped,
            // as Redis 7 rewrites them (LMPOP/BLMPOP declare theirs, commands/lists.rs):
            // the reply is [key, [elements]], the direction the argument after the keys.
            "zmpop" | "bzmpop" => {
                if let Reply::Array(items) = reply {
                    if let (Some(k), Some(Reply::Array(elems))) =
                        (items.first().and_then(Reply::bulk_bytes), items.get(1))
                    {
                        let numkeys_at = if cmd.name.starts_with('b') { 2 } else { 1 };
                        let nk = args
                            .get(numkeys_at)
                            .and_then(|a| crate::util::numeric::parse_i64(a))
                            .unwrap_or(0) as usize;
                        let dir = args.get(numkeys_at + 1 + nk).copied().unwrap_or_default();
                        let name: &[u8] = if dir.eq_ignore_ascii_case(b"max") {
                            b"ZPOPMAX"
                        } else {
                            b"ZPOPMIN"
                        };
                        let count = elems.len().to_string();
                        self.stream.append(db, &[name, k, count.as_bytes()]);
                    }
                }
            }
            // GETDEL is a DEL for replicas and the AOF.
            "getdel" => self.stream.append(db, &[b"DEL", key]),
            _ => self.stream.append(db, args),
        }
    }
}

/// SET's expiry options (KEEPTTL is not one: it sets none).
fn is_expiry_option(a: &[u8]) -> bool {
    [&b"ex"[..], b"px", b"exat", b"pxat"]
        .iter()
        .any(|o| a.eq_ignore_ascii_case(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> Vec<u8> {
        let mut w = WriteStream::default();
        w.encode(&args.iter().map(|a| a.as_bytes()).collect::<Vec<_>>());
        w.buf
    }

    /// Replica-only commands stay out of the AOF's bytes through wrapping,
    /// partial consumption and truncation.
    #[test]
    fn replica_only_ranges_are_skipped_by_the_aof() {
        let mut w = WriteStream::default();
        w.append(0, &[b"SET", b"a", b"1"]);
        let mark = w.position();
        w.append_repl_only(0, &[b"PUBLISH", b"ch", b"m"]);
        w.append(0, &[b"SET", b"b", b"2"]);
        let select = cmd(&["SELECT", "0"]);
        let (set_a, publish, set_b) = (
            cmd(&["SET", "a", "1"]),
            cmd(&["PUBLISH", "ch", "m"]),
            cmd(&["SET", "b", "2"]),
        );
        assert_eq!(w.buf, [&select[..], &set_a, &publish, &set_b].concat());
        assert_eq!(w.aof_bytes(), [&select[..], &set_a, &set_b].concat());
        // A MULTI inserted before the PUBLISH moves its range along.
        w.insert_at((mark - w.base) as usize, MULTI);
        w.encode(&[b"EXEC"]);
        let exec = cmd(&["EXEC"]);
        assert_eq!(
            w.aof_bytes(),
            [&select[..], &set_a, MULTI, &set_b, &exec].concat()
        );
        // A partial write of the AOF's bytes up to the end of the MULTI maps to the
        // same raw length; past it, the PUBLISH counts as taken.
        let head = select.len() + set_a.len() + MULTI.len();
        assert_eq!(w.raw_len_of_aof(head), head);
        assert_eq!(w.raw_len_of_aof(head + 1), head + publish.len() + 1);
        w.consume_front(head + publish.len() + 1);
        assert_eq!(w.aof_bytes(), [&set_b[1..], &exec].concat());
        assert!(w.repl_only.is_empty());
        // Truncation drops ranges past the new end.
        w.clear();
        let end = w.position();
        w.append_repl_only(0, &[b"PUBLISH", b"x", b"y"]);
        w.truncate_to(end);
        assert!(w.repl_only.is_empty() && w.buf.is_empty());
    }
}
