//! Hashes: HSET and friends, HRANDFIELD, HSCAN, and Redis 7.4's field expiry
//! (HEXPIRE family, HTTL family, HPERSIST) with lazy and active expiry of fields.
//!
//! Lazy field expiry follows Redis 7.4: a command that names a field (HGET, HMGET,
//! HEXISTS, HSTRLEN, HSETNX, HINCRBY*) deletes it if it is due (`peek_hash`); HRANDFIELD
//! and the HEXPIRE/HTTL family delete every due field first (`read_hash`); listings
//! (HGETALL, HKEYS, HVALS, HSCAN) skip due fields without deleting them; HSET and
//! HDEL take the hash as it is (`write_hash`), so HSET overwrites a due field and HDEL
//! counts it, and HLEN counts due fields until they are reclaimed.
//! The HEXPIRE variants share `hexpire_generic`, the TTL readers `httl_generic`.
//! Active expiry is `active_expire_fields`, called from the executor's cron.

use crate::command;
use crate::commands::ctx::{encode_repeated_picks, notify, stream_picks};
use crate::commands::flags::*;
use crate::commands::keys::parse_cursor;
use crate::commands::{arg_i64, errors, is, wrong_arity, Command, Ctx};
use crate::exec::Executor;
use crate::keyspace::{ObjMut, ObjRef, Object, Value, ValueRef};
use crate::protocol::reply::encode_bulk;
use crate::protocol::{PickStream, Reply};
use crate::types::hash::{Hash, HashLimits};
use crate::util::glob::glob_match;
use crate::util::numeric::{self, format_i64};

const W: &[&str] = &["write", "hash", "fast"];
const R: &[&str] = &["read", "hash", "fast"];
const RS: &[&str] = &["read", "hash", "slow"];

pub static COMMANDS: &[Command] = &[
    command!("hset", -4, WRITE | DENYOOM | FAST, (1, 1, 1), W, "hash", "2.0.0", "Creates or modifies the value of a field in a hash.", "O(1) for each field/value pair added, so O(N) to add N field/value pairs when the command is called with multiple field/value pairs.", hset),
    command!("hmset", -4, WRITE | DENYOOM | FAST, (1, 1, 1), W, "hash", "2.0.0", "Sets the values of multiple fields.", "O(N) where N is the number of fields being set.", hmset),
    command!("hsetnx", 4, WRITE | DENYOOM | FAST, (1, 1, 1), W, "hash", "2.0.0", "Sets the value of a field in a hash only when the field doesn't exist.", "O(1)", hsetnx),
    command!("hget", 3, READONLY | FAST, (1, 1, 1), R, "hash", "2.0.0", "Returns the value of a field in a hash.", "O(1)", hget),
    command!("hmget", -3, READONLY | FAST, (1, 1, 1), R, "hash", "2.0.0", "Returns the values of all fields in a hash.", "O(N) where N is the number of fields being requested.", hmget),
    command!("hgetall", 2, READONLY, (1, 1, 1), RS, "hash", "2.0.0", "Returns all fields and values in a hash.", "O(N) where N is the size of the hash.", hgetall),
    command!("hkeys", 2, READONLY, (1, 1, 1), RS, "hash", "2.0.0", "Returns all fields in a hash.", "O(N) where N is the size of the hash.", hkeys),
    command!("hvals", 2, READONLY, (1, 1, 1), RS, "hash", "2.0.0", "Returns all values in a hash.", "O(N) where N is the size of the hash.", hvals),
    command!("hdel", -3, WRITE | FAST, (1, 1, 1), W, "hash", "2.0.0", "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.", "O(N) where N is the number of fields to be removed.", hdel),
    command!("hlen", 2, READONLY | FAST, (1, 1, 1), R, "hash", "2.0.0", "Returns the number of fields in a hash.", "O(1)", hlen),
    command!("hexists", 3, READONLY | FAST, (1, 1, 1), R, "hash", "2.0.0", "Determines whether a field exists in a hash.", "O(1)", hexists),
    command!("hstrlen", 3, READONLY | FAST, (1, 1, 1), R, "hash", "3.2.0", "Returns the length of the value of a field.", "O(1)", hstrlen),
    command!("hincrby", 4, WRITE | DENYOOM | FAST, (1, 1, 1), W, "hash", "2.0.0", "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist.", "O(1)", hincrby),
    command!("hincrbyfloat", 4, WRITE | DENYOOM | FAST, (1, 1, 1), W, "hash", "2.6.0", "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist.", "O(1)", hincrbyfloat),
    command!("hrandfield", -2, READONLY, (1, 1, 1), RS, "hash", "6.2.0", "Returns one or more random fields from a hash.", "O(N) where N is the number of fields returned", hrandfield),
    command!("hscan", -3, READONLY, (1, 1, 1), RS, "hash", "2.8.0", "Iterates over fields and values of a hash.", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.", hscan),
    command!("hexpire", -6, WRITE | DENYOOM | FAST, (1, 1, 1), W, "hash", "7.4.0", "Set expiry for hash field using relative time to expire (seconds)", "O(N) where N is the number of specified fields", hexpire),
    command!("hpexpire", -6, WRITE | DENYOOM | FAST, (1, 1, 1), W, "hash", "7.4.0", "Set expiry for hash field using relative time to expire (milliseconds)", "O(N) where N is the number of specified fields", hpexpire),
    command!("hexpireat", -6, WRITE | DENYOOM | FAST, (1, 1, 1), W, "hash", "7.4.0", "Set expiry for hash field using an absolute Unix timestamp (seconds)", "O(N) where N is the number of specified fields", hexpireat),
    command!("hpexpireat", -6, WRITE | DENYOOM | FAST, (1, 1, 1), W, "hash", "7.4.0", "Set expiry for hash field using an absolute Unix timestamp (milliseconds)", "O(N) where N is the number of specified fields", hpexpireat),
    command!("httl", -5, READONLY | FAST, (1, 1, 1), R, "hash", "7.4.0", "Returns the TTL in seconds of a hash field.", "O(N) where N is the number of specified fields", httl),
    command!("hpttl", -5, READONLY | FAST, (1, 1, 1), R, "hash", "7.4.0", "Returns the TTL in milliseconds of a hash field.", "O(N) where N is the number of specified fields", hpttl),
    command!("hexpiretime", -5, READONLY | FAST, (1, 1, 1), R, "hash", "7.4.0", "Returns the expiration time of a hash field as a Unix timestamp, in seconds.", "O(N) where N is the number of specified fields", hexpiretime),
    command!("hpexpiretime", -5, READONLY | FAST, (1, 1, 1), R, "hash", "7.4.0", "Returns the expiration time of a hash field as a Unix timestamp, in msec.", "O(N) where N is the number of specified fields", hpexpiretime),
    command!("hpersist", -5, WRITE | FAST, (1, 1, 1), W, "hash", "7.4.0", "Removes the expiration time for each specified field", "O(N) where N is the number of specified fields", hpersist),
];

// ----- access -----------------------------------------------------------------------

pub fn limits(ctx: &Ctx) -> HashLimits {
    let c = &ctx.ex.config;
    HashLimits {
        listpack_entries: c.hash_max_listpack_entries.max(0) as usize,
        listpack_value: c.hash_max_listpack_value.max(0) as usize,
    }
}

/// Deletes the due fields of the hash at `key` in `db` (if it is one), raising
/// `hexpired` and deleting the key if it is left empty. Returns fields removed.
fn expire_fields_of(ex: &mut Executor, db: usize, key: &[u8], now: i64) -> usize {
    expire_fields_where(ex, db, key, now, None)
}

/// `expire_fields_of`, limited to `only` when given: Redis 7.4 deletes an expired
/// field lazily when a command reads it by name (HGET, HMGET, HEXISTS, HSTRLEN), and
/// leaves the others for active expiry, so HLEN still counts them meanwhile.
fn expire_fields_where(
    ex: &mut Executor,
    db: usize,
    key: &[u8],
    now: i64,
    only: Option<&[&[u8]]>,
) -> usize {
    let Some(mut e) = ex.ks.dbs[db].table.get_mut(key) else {
        return 0;
    };
    // A key that expired as a whole is the key expiry's business.
    if matches!(e.expire(), Some(t) if t <= now) {
        return 0;
    }
    let Some(ObjMut::Hash(h)) = e.object_mut() else {
        return 0;
    };
    let expired = match only {
        None => h.expire_due(now),
        Some(fields) => h.expire_named(fields, now),
    };
    if expired.is_empty() {
        // A popped hint whose field was overwritten or persisted since: the hash
        // stays registered at its next expiry.
        if only.is_none() {
            if let Some(at) = h.next_expire() {
                ex.ks.field_expiry.register(db, at, key);
            }
        }
        return 0;
    }
    let empty = h.is_empty();
    let next = h.next_expire();
    for f in &expired {
        ex.stream.hash_field_expired(db, key, f);
    }
    ex.ks.dirty += expired.len() as u64;
    ex.ks.stats.expired_subkeys += expired.len() as u64;
    ex.notify(notify::HASH, "hexpired", db, key.to_vec());
    if empty {
        ex.ks.delete(db, key);
        ex.notify(notify::GENERIC, "del", db, key.to_vec());
    } else if let Some(at) = next {
        ex.ks.field_expiry.register(db, at, key);
    }
    expired.len()
}

/// Active expiry of hash fields: pops hashes whose earliest field is due, within
/// `budget`, across databases. Called from the executor's cron.
pub fn active_expire_fields(ex: &mut Executor, now: i64, budget: std::time::Duration) {
    if ex.ks.field_expiry.is_empty() {
        return;
    }
    let start = std::time::Instant::now();
    for db in 0..ex.ks.field_expiry.dbs().min(ex.ks.dbs.len()) {
        let mut n = 0u32;
        while let Some(key) = ex.ks.field_expiry.pop_due(db, now) {
            expire_fields_of(ex, db, &key, now);
            n += 1;
            if n.is_multiple_of(16) && start.elapsed() >= budget {
                return;
            }
        }
    }
}

/// Registers the hash at `key` for active field expiry if its earliest expiry moved
/// earlier than `before` (the earliest before the command).
fn register_if_earlier(ctx: &mut Ctx, key: &[u8], before: Option<i64>) {
    let db = ctx.db;
    let after = match ctx.ex.ks.dbs[db].table.get(key).map(|e| e.value()) {
        Some(ValueRef::Obj(ObjRef::Hash(h))) => h.next_expire(),
        _ => None,
    };
    if let Some(at) = after {
        if before.is_none_or(|b| at < b) {
            ctx.ex.ks.field_expiry.register(db, at, key);
        }
    }
}

/// The hash at `key` for reading, after lazy field expiry: `Ok(None)` when missing.
pub(crate) fn read_hash<'c>(ctx: &'c mut Ctx, key: &[u8]) -> Result<Option<&'c Hash>, Reply> {
    let (db, now) = (ctx.db, ctx.now_ms);
    expire_fields_of(ctx.ex, db, key, now);
    match ctx.lookup_read(key).map(|e| e.value()) {
        None => Ok(None),
        Some(ValueRef::Obj(ObjRef::Hash(h))) => Ok(Some(h)),
        Some(_) => Err(errors::WRONGTYPE),
    }
}

/// The hash at `key` for reading without deleting expired fields, after lazily
/// deleting those of `fields` that expired: `Ok(None)` when missing. Callers that
/// list fields skip expired ones themselves (`Hash::for_each_live`).
fn peek_hash<'c>(
    ctx: &'c mut Ctx,
    key: &[u8],
    fields: &[&[u8]],
) -> Result<Option<&'c Hash>, Reply> {
    let (db, now) = (ctx.db, ctx.now_ms);
    if !fields.is_empty() {
        expire_fields_where(ctx.ex, db, key, now, Some(fields));
    }
    match ctx.lookup_read(key).map(|e| e.value()) {
        None => Ok(None),
        Some(ValueRef::Obj(ObjRef::Hash(h))) => Ok(Some(h)),
        Some(_) => Err(errors::WRONGTYPE),
    }
}

/// Runs `f` on the hash at `key` for writing, due fields included (callers expire
/// what they must first): `Ok(None)` when missing.
fn write_hash<R>(
    ctx: &mut Ctx,
    key: &[u8],
    f: impl FnOnce(&mut Hash) -> R,
) -> Result<Option<R>, Reply> {
    let Some(mut e) = ctx.lookup_write(key) else {
        return Ok(None);
    };
    match e.object_mut() {
        Some(ObjMut::Hash(h)) => Ok(Some(f(h))),
        _ => Err(errors::WRONGTYPE),
    }
}

/// Like `write_hash`, creating an empty hash when the key is missing (with its `new`
/// event). Callers validate their arguments first, so a created hash always receives
/// a field.
fn write_or_create<R>(
    ctx: &mut Ctx,
    key: &[u8],
    f: impl FnOnce(&mut Hash) -> R,
) -> Result<R, Reply> {
    let (db, now) = (ctx.db, ctx.now_ms);
    let (mut e, made) = ctx
        .ex
        .ks
        .lookup_mut_or_add(db, key, now, || Value::Obj(Object::Hash(Box::default())));
    let r = match e.object_mut() {
        Some(ObjMut::Hash(h)) => f(h),
        _ => return Err(errors::WRONGTYPE),
    };
    if made {
        ctx.notify(notify::NEW, "new", key);
    }
    Ok(r)
}

/// Deletes `key` if its hash became empty; returns whether it did.
fn delete_if_empty(ctx: &mut Ctx, key: &[u8]) -> bool {
    let empty = matches!(
        ctx.ex.ks.dbs[ctx.db].table.get(key).map(|e| e.value()),
        Some(ValueRef::Obj(ObjRef::Hash(h))) if h.is_empty()
    );
    if empty {
        ctx.ex.ks.delete(ctx.db, key);
        ctx.notify(notify::GENERIC, "del", key);
    }
    empty
}

// ----- HSET family --------------------------------------------------------------------

fn hset_generic(ctx: &mut Ctx, args: &[&[u8]]) -> Result<i64, Reply> {
    if !args.len().is_multiple_of(2) {
        return Err(wrong_arity(ctx.cmd.name));
    }
    let lim = limits(ctx);
    let key = args[1];
    let added = write_or_create(ctx, key, |h| {
        h.prepare_for((args.len() - 2) / 2, lim);
        args[2..]
            .chunks(2)
            .filter(|p| h.set(p[0], p[1], lim))
            .count() as i64
    })?;
    ctx.modified(key);
    ctx.notify(notify::HASH, "hset", key);
    Ok(added)
}

fn hset(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    hset_generic(ctx, args).map_or_else(|e| e, Reply::Int)
}

fn hmset(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    hset_generic(ctx, args).map_or_else(|e| e, |_| Reply::ok())
}

fn hsetnx(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (key, field, value) = (args[1], args[2], args[3]);
    let lim = limits(ctx);
    match peek_hash(ctx, key, &[field]) {
        Err(e) => return e,
        Ok(Some(h)) if h.contains(field) => return Reply::Int(0),
        Ok(_) => {}
    }
    if let Err(e) = write_or_create(ctx, key, |h| h.set(field, value, lim)) {
        return e;
    }
    ctx.modified(key);
    ctx.notify(notify::HASH, "hset", key);
    Reply::Int(1)
}

fn hget(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match peek_hash(ctx, args[1], &args[2..3]) {
        Err(e) => e,
        Ok(h) => match h.and_then(|h| h.get(args[2])) {
            Some(v) => Reply::bulk(v),
            None => Reply::Null,
        },
    }
}

fn hmget(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match peek_hash(ctx, args[1], &args[2..]) {
        Err(e) => e,
        Ok(h) => Reply::Array(
            args[2..]
                .iter()
                .map(|f| match h.and_then(|h| h.get(f)) {
                    Some(v) => Reply::bulk(v),
                    None => Reply::Null,
                })
                .collect(),
        ),
    }
}

fn hgetall(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let now = ctx.now_ms;
    match peek_hash(ctx, args[1], &[]) {
        Err(e) => e,
        Ok(None) => Reply::Map(Vec::new()),
        Ok(Some(h)) => {
            let mut out = Vec::with_capacity(h.len());
            h.for_each_live(now, |k, v| out.push((Reply::bulk(k), Reply::bulk(v))));
            Reply::Map(out)
        }
    }
}

fn hkeys_or_vals(ctx: &mut Ctx, key: &[u8], keys: bool) -> Reply {
    let now = ctx.now_ms;
    match peek_hash(ctx, key, &[]) {
        Err(e) => e,
        Ok(None) => Reply::Array(Vec::new()),
        Ok(Some(h)) => {
            let mut out = Vec::with_capacity(h.len());
            h.for_each_live(now, |k, v| out.push(Reply::bulk(if keys { k } else { v })));
            Reply::Array(out)
        }
    }
}

fn hkeys(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    hkeys_or_vals(ctx, args[1], true)
}

fn hvals(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    hkeys_or_vals(ctx, args[1], false)
}

fn hdel(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let key = args[1];
    let deleted = match write_hash(ctx, key, |h| {
        args[2..].iter().filter(|f| h.remove(f)).count() as i64
    }) {
        Err(e) => return e,
        Ok(None) => return Reply::Int(0),
        Ok(Some(n)) => n,
    };
    if deleted > 0 {
        ctx.modified(key);
        ctx.notify(notify::HASH, "hdel", key);
        delete_if_empty(ctx, key);
    }
    Reply::Int(deleted)
}

/// Counts expired fields not yet deleted, as Redis 7.4's HLEN (hashTypeLength with
/// subtractExpiredFields = 0).
fn hlen(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match peek_hash(ctx, args[1], &[]) {
        Err(e) => e,
        Ok(h) => Reply::Int(h.map_or(0, |h| h.len() as i64)),
    }
}

fn hexists(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match peek_hash(ctx, args[1], &args[2..3]) {
        Err(e) => e,
        Ok(h) => Reply::Int(h.is_some_and(|h| h.contains(args[2])) as i64),
    }
}

fn hstrlen(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match peek_hash(ctx, args[1], &args[2..3]) {
        Err(e) => e,
        Ok(h) => Reply::Int(h.and_then(|h| h.get(args[2])).map_or(0, |v| v.len() as i64)),
    }
}

fn hincrby(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (key, field) = (args[1], args[2]);
    let incr = match arg_i64(args[3]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let current = match peek_hash(ctx, key, &[field]) {
        Err(e) => return e,
        Ok(h) => match h.and_then(|h| h.get(field)) {
            None => 0,
            Some(v) => match numeric::parse_i64(v) {
                Some(n) => n,
                None => return Reply::err("ERR hash value is not an integer"),
            },
        },
    };
    let Some(new) = current.checked_add(incr) else {
        return errors::OVERFLOW;
    };
    let mut buf = Vec::with_capacity(20);
    format_i64(new, &mut buf);
    let lim = limits(ctx);
    if let Err(e) = write_or_create(ctx, key, |h| set_keep_ttl(h, field, &buf, lim)) {
        return e;
    }
    ctx.modified(key);
    ctx.notify(notify::HASH, "hincrby", key);
    Reply::Int(new)
}

fn hincrbyfloat(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (key, field) = (args[1], args[2]);
    let incr = match numeric::hincr_by_float_increment(args[3]) {
        Ok(i) => i,
        Err(e) => return Reply::err(e.message()),
    };
    let new = match peek_hash(ctx, key, &[field]) {
        Err(e) => return e,
        Ok(h) => {
            let current = h.and_then(|h| h.get(field)).unwrap_or(b"0");
            match numeric::hincr_by_float(current, incr) {
                Ok(v) => v,
                Err(e) => return Reply::err(e.message()),
            }
        }
    };
    let lim = limits(ctx);
    if let Err(e) = write_or_create(ctx, key, |h| set_keep_ttl(h, field, &new, lim)) {
        return e;
    }
    ctx.modified(key);
    ctx.notify(notify::HASH, "hincrbyfloat", key);
    Reply::Bulk(new)
}

/// Sets a field's value keeping its TTL, as HINCRBY/HINCRBYFLOAT do.
fn set_keep_ttl(h: &mut Hash, field: &[u8], value: &[u8], lim: HashLimits) {
    let ttl = h.expire_of(field);
    h.set(field, value, lim);
    if let Some(at) = ttl {
        h.set_expire(field, at);
    }
}

// ----- HRANDFIELD ---------------------------------------------------------------------

/// Parses a RANDFIELD/RANDMEMBER count: any i64 but i64::MIN, with Redis's message.
pub fn parse_rand_count(a: &[u8]) -> Result<i64, Reply> {
    crate::commands::arg_in_range(a, -i64::MAX, i64::MAX, None)
}

/// Like Redis 7.4.1, HRANDFIELD first deletes every due field of the hash (and the
/// hash, if none is left), so it never returns an expired field.
fn hrandfield(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if args.len() == 2 {
        return match read_hash(ctx, args[1]) {
            Err(e) => e,
            Ok(None) => Reply::Null,
            Ok(Some(h)) => h.random().map_or(Reply::Null, |(k, _)| Reply::Bulk(k)),
        };
    }
    let count = match parse_rand_count(args[2]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let with_values = match args.len() {
        3 => false,
        4 if is(args[3], "withvalues") => true,
        _ => return errors::SYNTAX,
    };
    if with_values && count < -(i64::MAX / 2) {
        return Reply::err("ERR value is out of range");
    }
    let proto = ctx.proto();
    let room = ctx.reply_room();
    let may_stream = ctx.may_stream_reply();
    let h = match read_hash(ctx, args[1]) {
        Err(e) => return e,
        Ok(None) => return Reply::Array(Vec::new()),
        Ok(Some(h)) => h,
    };
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = if count < 0 {
        // One pick: the field, and its value (a pair of its own in RESP3).
        let encode_pick = |k: &[u8], v: &[u8], b: &mut Vec<u8>| {
            if with_values && proto >= 3 {
                b.extend_from_slice(b"*2\r\n");
            }
            encode_bulk(k, b);
            if with_values {
                encode_bulk(v, b);
            }
        };
        let picks = count.unsigned_abs();
        let elems_per_pick = if with_values && proto < 3 { 2 } else { 1 };
        if stream_picks(may_stream, picks, h.len()) {
            let mut stream = PickStream::new(picks * elems_per_pick as u64, picks);
            h.for_each(|k, v| stream.add_candidate(|b| encode_pick(k, v, b)));
            return Reply::Picks(Box::new(stream));
        }
        let reply = encode_repeated_picks(picks, elems_per_pick, room, |b| match h.random() {
            Some((k, v)) => {
                encode_pick(&k, &v, b);
                true
            }
            None => false,
        });
        return reply.unwrap_or_else(|| ctx.output_limit_reached());
    } else {
        h.random_distinct(count as usize)
    };
    let mut out = Vec::with_capacity(pairs.len() * if with_values { 2 } else { 1 });
    for (k, v) in pairs {
        if !with_values {
            out.push(Reply::Bulk(k));
        } else if proto >= 3 {
            out.push(Reply::Array(vec![Reply::Bulk(k), Reply::Bulk(v)]));
        } else {
            out.push(Reply::Bulk(k));
            out.push(Reply::Bulk(v));
        }
    }
    Reply::Array(out)
}

// ----- HSCAN --------------------------------------------------------------------------

/// SCAN-family options after the cursor: MATCH, COUNT and (for HSCAN) NOVALUES.
pub struct ScanOpts<'a> {
    pub pattern: Option<&'a [u8]>,
    pub count: usize,
    pub novalues: bool,
}

pub fn parse_scan_opts<'a>(args: &[&'a [u8]], allow_novalues: bool) -> Result<ScanOpts<'a>, Reply> {
    let mut o = ScanOpts {
        pattern: None,
        count: 10,
        novalues: false,
    };
    let mut j = 0;
    while j < args.len() {
        let has_next = j + 1 < args.len();
        if is(args[j], "count") && has_next {
            let n = arg_i64(args[j + 1])?;
            if n < 1 {
                return Err(errors::SYNTAX);
            }
            o.count = n as usize;
            j += 2;
        } else if is(args[j], "match") && has_next {
            o.pattern = Some(args[j + 1]).filter(|p| *p != b"*");
            j += 2;
        } else if allow_novalues && is(args[j], "novalues") {
            o.novalues = true;
            j += 1;
        } else {
            return Err(errors::SYNTAX);
        }
    }
    Ok(o)
}

/// The reply of a SCAN-family command.
pub fn scan_reply(cursor: u64, items: Vec<Reply>) -> Reply {
    Reply::Array(vec![
        Reply::Bulk(cursor.to_string().into_bytes()),
        Reply::Array(items),
    ])
}

fn hscan(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let cursor = match parse_cursor(args[2]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let now = ctx.now_ms;
    let h = match peek_hash(ctx, args[1], &[]) {
        Err(e) => return e,
        Ok(None) => return scan_reply(0, Vec::new()),
        Ok(Some(h)) => h,
    };
    let o = match parse_scan_opts(&args[3..], true) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let mut items = Vec::new();
    let next = h.scan(cursor, o.count, |k, v| {
        if h.is_expired(k, now) || o.pattern.is_some_and(|p| !glob_match(p, k, false)) {
            return;
        }
        items.push(Reply::bulk(k));
        if !o.novalues {
            items.push(Reply::bulk(v));
        }
    });
    scan_reply(next, items)
}

// ----- field expiry -------------------------------------------------------------------

/// Largest absolute field expiry Redis accepts (EB_EXPIRE_TIME_MAX >> 2), in ms.
const HFE_MAX_ABS_TIME_MS: i64 = ((1i64 << 48) - 1) >> 2;

const FIELDS_MISSING: Reply =
    Reply::err("ERR Mandatory argument FIELDS is missing or not at the right position");
const NUMFIELDS_BAD: Reply = Reply::err("ERR Parameter `numFields` should be greater than 0");
const NUMFIELDS_MISMATCH: Reply =
    Reply::err("ERR The `numfields` parameter must match the number of arguments");

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cond {
    None,
    Nx,
    Xx,
    Gt,
    Lt,
}

fn hexpire_generic(ctx: &mut Ctx, args: &[&[u8]], unit_secs: bool, relative: bool) -> Reply {
    let key = args[1];
    // Type first, as Redis looks the key up before parsing. Other due fields stay
    // (Redis's HEXPIRE expires none); a due field named here gets its new TTL.
    if let Err(e) = peek_hash(ctx, key, &[]) {
        return e;
    }
    let mut t = match arg_i64(args[2]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    if t < 0 {
        return Reply::err("ERR invalid expire time, must be >= 0");
    }
    let invalid = || errors::invalid_expire(ctx.cmd.name);
    if unit_secs {
        if t > HFE_MAX_ABS_TIME_MS / 1000 {
            return invalid();
        }
        t *= 1000;
    }
    let base = if relative { ctx.now_ms } else { 0 };
    if t > HFE_MAX_ABS_TIME_MS - base {
        return invalid();
    }
    let when = t + base;
    let (cond, fields_at) = match args[3] {
        a if is(a, "nx") => (Cond::Nx, 4),
        a if is(a, "xx") => (Cond::Xx, 4),
        a if is(a, "gt") => (Cond::Gt, 4),
        a if is(a, "lt") => (Cond::Lt, 4),
        _ => (Cond::None, 3),
    };
    let fields = match parse_fields_owned(args, fields_at) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let now = ctx.now_ms;
    let before = match peek_hash(ctx, key, &[]) {
        Ok(Some(h)) => h.next_expire(),
        _ => None,
    };
    let codes = match write_hash(ctx, key, |h| {
        fields
            .iter()
            .map(|f| {
                if !h.contains(f) {
                    return -2;
                }
                let cur = h.expire_of(f);
                let ok = match (cond, cur) {
                    (Cond::None, _) => true,
                    (Cond::Nx, c) => c.is_none(),
                    (Cond::Xx, c) => c.is_some(),
                    // No expiry counts as infinite: GT never, LT always.
                    (Cond::Gt, c) => c.is_some_and(|c| when > c),
                    (Cond::Lt, c) => c.is_none_or(|c| when < c),
                };
                if !ok {
                    0
                } else if when <= now {
                    h.remove(f);
                    2
                } else {
                    h.set_expire(f, when);
                    1
                }
            })
            .collect::<Vec<i64>>()
    }) {
        Err(e) => return e,
        Ok(None) => vec![-2; fields.len()],
        Ok(Some(c)) => c,
    };
    let updated = codes.contains(&1);
    let deleted = codes.contains(&2);
    ctx.ex.ks.stats.expired_subkeys += codes.iter().filter(|&&c| c == 2).count() as u64;
    // Replicas and the AOF get an HDEL per field a past time deleted, and the
    // command as HPEXPIREAT with an absolute time, naming only the fields whose TTL
    // it set (nothing at all when it set none), as Redis 7.4's hexpireGenericCommand.
    if ctx.ex.stream.enabled {
        let db = ctx.db;
        let mut set_fields: Vec<Vec<u8>> = vec![b"HPEXPIREAT".to_vec(), key.to_vec()];
        set_fields.push(when.to_string().into_bytes());
        set_fields.extend(args[3..fields_at].iter().map(|a| a.to_vec()));
        set_fields.push(b"FIELDS".to_vec());
        set_fields.push(
            codes
                .iter()
                .filter(|&&c| c == 1)
                .count()
                .to_string()
                .into_bytes(),
        );
        for (f, &c) in fields.iter().zip(&codes) {
            match c {
                1 => set_fields.push(f.clone()),
                2 => ctx.ex.stream.hash_field_expired(db, key, f),
                _ => {}
            }
        }
        ctx.propagate_as(if updated {
            vec![set_fields]
        } else {
            Vec::new()
        });
    }
    if updated || deleted {
        ctx.modified(key);
        // One event, as Redis's hashTypeSetExDone: a TTL in the past deletes the
        // field, which is an `hdel`.
        ctx.notify(notify::HASH, if deleted { "hdel" } else { "hexpire" }, key);
        if !delete_if_empty(ctx, key) {
            register_if_earlier(ctx, key, before);
        }
    }
    Reply::Array(codes.into_iter().map(Reply::Int).collect())
}

/// Parses `FIELDS numfields field…` with `FIELDS` at `args[at]`; returns the fields
/// (owned, as they are used while the hash is borrowed).
fn parse_fields_owned(args: &[&[u8]], at: usize) -> Result<Vec<Vec<u8>>, Reply> {
    if at >= args.len() || !is(args[at], "fields") {
        return Err(FIELDS_MISSING);
    }
    let n = args
        .get(at + 1)
        .and_then(|a| numeric::parse_i64(a))
        .filter(|&n| n >= 1)
        .ok_or(NUMFIELDS_BAD)?;
    if n as u64 != (args.len() - at - 2) as u64 {
        return Err(NUMFIELDS_MISMATCH);
    }
    Ok(args[at + 2..].iter().map(|f| f.to_vec()).collect())
}

fn hexpire(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    hexpire_generic(ctx, args, true, true)
}

fn hpexpire(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    hexpire_generic(ctx, args, false, true)
}

fn hexpireat(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    hexpire_generic(ctx, args, true, false)
}

fn hpexpireat(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    hexpire_generic(ctx, args, false, false)
}

/// HTTL, HPTTL, HEXPIRETIME, HPEXPIRETIME: `f(expire_at, now)` makes the reply.
fn httl_generic(ctx: &mut Ctx, args: &[&[u8]], f: fn(i64, i64) -> i64) -> Reply {
    let now = ctx.now_ms;
    let fields = match parse_fields_owned(args, 2) {
        Ok(f) => f,
        Err(e) => return e,
    };
    // A due field reads as missing, and stays (Redis's HTTL deletes nothing).
    match peek_hash(ctx, args[1], &[]) {
        Err(e) => e,
        Ok(None) => Reply::Array(vec![Reply::Int(-2); fields.len()]),
        Ok(Some(h)) => Reply::Array(
            fields
                .iter()
                .map(|fl| {
                    Reply::Int(match h.expire_of(fl) {
                        _ if !h.contains(fl) => -2,
                        Some(at) if at <= now => -2,
                        Some(at) => f(at, now),
                        None => -1,
                    })
                })
                .collect(),
        ),
    }
}

fn httl(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    httl_generic(ctx, args, |at, now| (at + 999 - now) / 1000)
}

fn hpttl(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    httl_generic(ctx, args, |at, now| at - now)
}

fn hexpiretime(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    httl_generic(ctx, args, |at, _| (at + 999) / 1000)
}

fn hpexpiretime(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    httl_generic(ctx, args, |at, _| at)
}

fn hpersist(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let key = args[1];
    if let Err(e) = peek_hash(ctx, key, &[]) {
        return e;
    }
    let fields = match parse_fields_owned(args, 2) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let now = ctx.now_ms;
    let codes = match write_hash(ctx, key, |h| {
        fields
            .iter()
            .map(|f| {
                if !h.contains(f) || h.is_expired(f, now) {
                    -2
                } else if h.persist(f) {
                    1
                } else {
                    -1
                }
            })
            .collect::<Vec<i64>>()
    }) {
        Err(e) => return e,
        Ok(None) => vec![-2; fields.len()],
        Ok(Some(c)) => c,
    };
    if codes.contains(&1) {
        ctx.modified(key);
        ctx.notify(notify::HASH, "hpersist", key);
    }
    Reply::Array(codes.into_iter().map(Reply::Int).collect())
}
