//! Generic key commands: existence, deletion, renaming and copying, expiry, iteration
//! (KEYS, SCAN, RANDOMKEY) and OBJECT introspection.

use crate::commands::ctx::notify;
use crate::commands::flags::*;
use crate::commands::{arg_i64, errors, is, Command, Ctx};
use crate::keyspace::{lru_idle_ms, Value, ValueRef};
use crate::protocol::Reply;
use crate::util::glob::glob_match;
use crate::{command, container};

const KW: &[&str] = &["keyspace", "write", "slow"];
const KWF: &[&str] = &["keyspace", "write", "fast"];
const KRF: &[&str] = &["keyspace", "read", "fast"];

pub static COMMANDS: &[Command] = &[
    command!("del", -2, WRITE, (1, -1, 1), KW, "generic", "1.0.0", "Deletes one or more keys.", "O(N) where N is the number of keys that will be removed.", del),
    command!("unlink", -2, WRITE | FAST, (1, -1, 1), KWF, "generic", "4.0.0", "Asynchronously deletes one or more keys.", "O(1) for each key removed regardless of its size.", del),
    command!("exists", -2, READONLY | FAST, (1, -1, 1), KRF, "generic", "1.0.0", "Determines whether one or more keys exist.", "O(N) where N is the number of keys to check.", exists),
    command!("type", 2, READONLY | FAST, (1, 1, 1), KRF, "generic", "1.0.0", "Determines the type of value stored at a key.", "O(1)", type_),
    command!("rename", 3, WRITE, (1, 2, 1), KW, "generic", "1.0.0", "Renames a key and overwrites the destination.", "O(1)", rename),
    command!("renamenx", 3, WRITE | FAST, (1, 2, 1), KWF, "generic", "1.0.0", "Renames a key only when the target key name doesn't exist.", "O(1)", renamenx),
    command!("copy", -3, WRITE | DENYOOM, (1, 2, 1), KW, "generic", "6.2.0", "Copies the value of a key to a new key.", "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.", copy),
    command!("move", 3, WRITE | FAST, (1, 1, 1), KWF, "generic", "1.0.0", "Moves a key to another database.", "O(1)", move_),
    command!("keys", 2, READONLY, (0, 0, 0), &["keyspace", "read", "slow", "dangerous"], "generic", "1.0.0", "Returns all key names that match a pattern.", "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.", keys),
    command!("scan", -2, READONLY, (0, 0, 0), &["keyspace", "read", "slow"], "generic", "2.8.0", "Iterates over the key names in the database.", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.", scan),
    command!("randomkey", 1, READONLY, (0, 0, 0), &["keyspace", "read", "slow"], "generic", "1.0.0", "Returns a random key name from the database.", "O(1)", randomkey),
    command!("expire", -3, WRITE | FAST, (1, 1, 1), KWF, "generic", "1.0.0", "Sets the expiration time of a key in seconds.", "O(1)", expire),
    command!("pexpire", -3, WRITE | FAST, (1, 1, 1), KWF, "generic", "2.6.0", "Sets the expiration time of a key in milliseconds.", "O(1)", pexpire),
    command!("expireat", -3, WRITE | FAST, (1, 1, 1), KWF, "generic", "1.2.0", "Sets the expiration time of a key to a Unix timestamp.", "O(1)", expireat),
    command!("pexpireat", -3, WRITE | FAST, (1, 1, 1), KWF, "generic", "2.6.0", "Sets the expiration time of a key to a Unix milliseconds timestamp.", "O(1)", pexpireat),
    command!("ttl", 2, READONLY | FAST, (1, 1, 1), KRF, "generic", "1.0.0", "Returns the expiration time in seconds of a key.", "O(1)", ttl),
    command!("pttl", 2, READONLY | FAST, (1, 1, 1), KRF, "generic", "2.6.0", "Returns the expiration time in milliseconds of a key.", "O(1)", pttl),
    command!("expiretime", 2, READONLY | FAST, (1, 1, 1), KRF, "generic", "7.0.0", "Returns the expiration time of a key as a Unix timestamp.", "O(1)", expiretime),
    command!("pexpiretime", 2, READONLY | FAST, (1, 1, 1), KRF, "generic", "7.0.0", "Returns the expiration time of a key as a Unix milliseconds timestamp.", "O(1)", pexpiretime),
    command!("persist", 2, WRITE | FAST, (1, 1, 1), KWF, "generic", "2.2.0", "Removes the expiration time of a key.", "O(1)", persist),
    command!("touch", -2, READONLY | FAST, (1, -1, 1), KRF, "generic", "3.2.1", "Returns the number of existing keys out of those specified after updating the time they were last accessed.", "O(N) where N is the number of keys that will be touched.", touch),
    container!("object", &["slow"], "generic", "2.2.3", "A container for object introspection commands.", OBJECT_SUBCOMMANDS),
];

static OBJECT_SUBCOMMANDS: &[Command] = &[
    command!(
        "object|encoding",
        3,
        READONLY,
        (2, 2, 1),
        &["keyspace", "read", "slow"],
        "generic",
        "2.2.3",
        "Returns the internal encoding of a Redis object.",
        "O(1)",
        object_encoding
    ),
    command!(
        "object|freq",
        3,
        READONLY,
        (2, 2, 1),
        &["keyspace", "read", "slow"],
        "generic",
        "4.0.0",
        "Returns the logarithmic access frequency counter of a Redis object.",
        "O(1)",
        object_freq
    ),
    command!(
        "object|idletime",
        3,
        READONLY,
        (2, 2, 1),
        &["keyspace", "read", "slow"],
        "generic",
        "2.2.3",
        "Returns the time since the last access to a Redis object.",
        "O(1)",
        object_idletime
    ),
    command!(
        "object|refcount",
        3,
        READONLY,
        (2, 2, 1),
        &["keyspace", "read", "slow"],
        "generic",
        "2.2.3",
        "Returns the reference count of a value of a key.",
        "O(1)",
        object_refcount
    ),
    command!(
        "object|help",
        2,
        LOADING | STALE,
        (0, 0, 0),
        &["keyspace", "slow"],
        "generic",
        "6.2.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        object_help
    ),
];

/// DEL and UNLINK: UNLINK always frees asynchronously, DEL under
/// `lazyfree-lazy-user-del` (as Redis's delGenericCommand).
fn del(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let lazy = ctx.cmd.name == "unlink" || ctx.ex.config.lazyfree_lazy_user_del;
    let mut n = 0;
    for k in &args[1..] {
        if ctx.delete_user(k, lazy) {
            ctx.notify(notify::GENERIC, "del", k);
            n += 1;
        }
    }
    Reply::Int(n)
}

fn exists(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    // A read lookup (without touching), so that a miss raises `keymiss` as in Redis.
    let no_touch = std::mem::replace(&mut ctx.ex.ks.no_touch, true);
    let n = args[1..]
        .iter()
        .filter(|k| ctx.lookup_read(k).is_some())
        .count();
    ctx.ex.ks.no_touch = no_touch;
    Reply::Int(n as i64)
}

fn touch(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    Reply::Int(
        args[1..]
            .iter()
            .filter(|k| ctx.lookup_read(k).is_some())
            .count() as i64,
    )
}

fn type_(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (db, now) = (ctx.db, ctx.now_ms);
    match ctx.ex.ks.lookup(db, args[1], now, false) {
        Some(e) => Reply::status(e.value().type_name()),
        None => Reply::status("none"),
    }
}

/// Takes a key's value and expiry out of the current database, if present.
fn take(ctx: &mut Ctx, db: usize, key: &[u8]) -> Option<(Value, Option<i64>)> {
    ctx.ex.ks.expire_if_needed(db, key, ctx.now_ms);
    let d = &mut ctx.ex.ks.dbs[db];
    let taken = d.table.remove(key)?;
    if taken.1.is_some() {
        d.volatile -= 1;
    }
    Some(taken)
}

fn rename_generic(ctx: &mut Ctx, args: &[&[u8]], nx: bool) -> Reply {
    let (src, dst) = (args[1], args[2]);
    if !ctx.exists(src) {
        return errors::NO_SUCH_KEY;
    }
    if src == dst {
        return if nx { Reply::Int(0) } else { Reply::ok() };
    }
    if nx && ctx.exists(dst) {
        return Reply::Int(0);
    }
    let (value, expire) = take(ctx, ctx.db, src).expect("source checked above");
    ctx.modified(src);
    let db = ctx.db;
    crate::persistence::register_field_ttls(&mut ctx.ex.ks, db, dst, &value);
    ctx.set(dst, value, expire, false);
    ctx.notify(notify::GENERIC, "rename_from", src);
    ctx.notify(notify::GENERIC, "rename_to", dst);
    if nx {
        Reply::Int(1)
    } else {
        Reply::ok()
    }
}

fn rename(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    rename_generic(ctx, args, false)
}

fn renamenx(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    rename_generic(ctx, args, true)
}

/// Parses a database index argument.
fn db_index(ctx: &Ctx, a: &[u8]) -> Result<usize, Reply> {
    crate::commands::arg_db_index(a, ctx.ex.ks.dbs.len())
}

/// A deep copy of a stored value.
// Object has no variants until the collection types land; the arm is then reachable.
#[allow(unreachable_code)]
fn duplicate(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Int(n) => Value::Int(n),
        ValueRef::Emb(b) => Value::Str(b.to_vec()),
        ValueRef::Raw(b) => Value::RawStr(b.to_vec()),
        ValueRef::Obj(o) => Value::Obj(o.duplicate()),
    }
}

fn copy(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (src, dst) = (args[1], args[2]);
    let mut dst_db = ctx.db;
    let mut replace = false;
    let mut j = 3;
    while j < args.len() {
        if is(args[j], "replace") {
            replace = true;
        } else if is(args[j], "db") && j + 1 < args.len() {
            match db_index(ctx, args[j + 1]) {
                Ok(d) => dst_db = d,
                Err(e) => return e,
            }
            j += 1;
        } else {
            return errors::SYNTAX;
        }
        j += 1;
    }
    if ctx.ex.cluster.is_some() && (ctx.db != 0 || dst_db != 0) {
        return Reply::err("ERR Copying to another database is not allowed in cluster mode");
    }
    if src == dst && dst_db == ctx.db {
        return Reply::err("ERR source and destination objects are the same");
    }
    let (value, expire) = match ctx.lookup_read(src) {
        None => return Reply::Int(0),
        Some(e) => (duplicate(e.value()), e.expire()),
    };
    let now = ctx.now_ms;
    if ctx.ex.ks.exists(dst_db, dst, now) {
        if !replace {
            return Reply::Int(0);
        }
        ctx.ex.ks.delete(dst_db, dst);
    }
    crate::persistence::register_field_ttls(&mut ctx.ex.ks, dst_db, dst, &value);
    ctx.add(dst_db, dst, value, expire);
    ctx.modified_in(dst_db, dst);
    ctx.ex
        .notify(notify::GENERIC, "copy_to", dst_db, dst.to_vec());
    Reply::Int(1)
}

fn move_(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if ctx.ex.cluster.is_some() {
        return Reply::err("ERR MOVE is not allowed in cluster mode");
    }
    let key = args[1];
    let dst_db = match db_index(ctx, args[2]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    if dst_db == ctx.db {
        return Reply::err("ERR source and destination objects are the same");
    }
    if !ctx.exists(key) {
        return Reply::Int(0);
    }
    let now = ctx.now_ms;
    if ctx.ex.ks.exists(dst_db, key, now) {
        return Reply::Int(0);
    }
    let (value, expire) = take(ctx, ctx.db, key).expect("checked above");
    crate::persistence::register_field_ttls(&mut ctx.ex.ks, dst_db, key, &value);
    ctx.add(dst_db, key, value, expire);
    ctx.modified(key);
    ctx.ex.signal_modified_key(Some(ctx.client), dst_db, key);
    ctx.notify(notify::GENERIC, "move_from", key);
    ctx.ex
        .notify(notify::GENERIC, "move_to", dst_db, key.to_vec());
    Reply::Int(1)
}

fn keys(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let pattern = args[1];
    let all = pattern == b"*";
    let now = ctx.now_ms;
    let mut out = Vec::new();
    let table = &ctx.ex.ks.dbs[ctx.db].table;
    let mut cursor = 0;
    loop {
        cursor = table.scan(cursor, |e| {
            if matches!(e.expire(), Some(t) if t <= now) {
                return;
            }
            if all || glob_match(pattern, e.key(), false) {
                out.push(Reply::bulk(e.key()));
            }
        });
        if cursor == 0 {
            break;
        }
    }
    Reply::Array(out)
}

/// Parses a SCAN-family cursor.
pub fn parse_cursor(a: &[u8]) -> Result<u64, Reply> {
    if a.is_empty() || a.len() > 20 || !a.iter().all(u8::is_ascii_digit) {
        return Err(Reply::err("ERR invalid cursor"));
    }
    std::str::from_utf8(a)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Reply::err("ERR invalid cursor"))
}

fn scan(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let cursor = match parse_cursor(args[1]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let mut pattern: Option<&[u8]> = None;
    let mut count: i64 = 10;
    let mut type_filter: Option<&[u8]> = None;
    let mut j = 2;
    while j < args.len() {
        let has_next = j + 1 < args.len();
        if is(args[j], "count") && has_next {
            match arg_i64(args[j + 1]) {
                Ok(n) if n >= 1 => count = n,
                Ok(_) => return errors::SYNTAX,
                Err(e) => return e,
            }
        } else if is(args[j], "match") && has_next {
            pattern = Some(args[j + 1]).filter(|p| *p != b"*");
        } else if is(args[j], "type") && has_next {
            type_filter = Some(args[j + 1]);
        } else {
            return errors::SYNTAX;
        }
        j += 2;
    }
    let now = ctx.now_ms;
    let table = &ctx.ex.ks.dbs[ctx.db].table;
    let mut found: Vec<Vec<u8>> = Vec::new();
    let mut expired: Vec<Vec<u8>> = Vec::new();
    let mut cursor = cursor;
    let mut iterations = count.saturating_mul(10);
    loop {
        cursor = table.scan(cursor, |e| {
            if matches!(e.expire(), Some(t) if t <= now) {
                expired.push(e.key().to_vec());
                return;
            }
            if let Some(p) = pattern {
                if !glob_match(p, e.key(), false) {
                    return;
                }
            }
            if let Some(t) = type_filter {
                if !e.value().type_name().as_bytes().eq_ignore_ascii_case(t) {
                    return;
                }
            }
            found.push(e.key().to_vec());
        });
        iterations -= 1;
        if cursor == 0 || iterations <= 0 || found.len() as i64 >= count {
            break;
        }
    }
    // Expired keys met on the way are deleted, as a lookup would (Redis 7.4).
    for key in expired {
        ctx.ex.ks.expire_if_needed(ctx.db, &key, now);
    }
    Reply::Array(vec![
        Reply::Bulk(cursor.to_string().into_bytes()),
        Reply::Array(found.into_iter().map(Reply::Bulk).collect()),
    ])
}

fn randomkey(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    // A database of only expired keys could loop forever; give up after a while as
    // Redis does, returning a key that is logically expired but not yet reclaimed.
    for _ in 0..100 {
        let (key, expired) = match ctx.ex.ks.dbs[ctx.db].table.random_entry() {
            None => return Reply::Null,
            Some(e) => (
                e.key().to_vec(),
                matches!(e.expire(), Some(t) if t <= ctx.now_ms),
            ),
        };
        if !expired {
            return Reply::Bulk(key);
        }
        ctx.ex.ks.expire_if_needed(ctx.db, &key, ctx.now_ms);
    }
    match ctx.ex.ks.dbs[ctx.db].table.random_entry() {
        Some(e) => Reply::bulk(e.key()),
        None => Reply::Null,
    }
}

// ----- expiry ---------------------------------------------------------------------

/// The shared implementation of EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT.
fn expire_generic(ctx: &mut Ctx, args: &[&[u8]], unit_secs: bool, relative: bool) -> Reply {
    let key = args[1];
    // The options first, then the time (Redis's order of errors).
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for a in &args[3..] {
        if is(a, "nx") {
            nx = true;
        } else if is(a, "xx") {
            xx = true;
        } else if is(a, "gt") {
            gt = true;
        } else if is(a, "lt") {
            lt = true;
        } else {
            return Reply::error(format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(a)
            ));
        }
    }
    if nx && (xx || gt || lt) {
        return Reply::err("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return Reply::err("ERR GT and LT options at the same time are not compatible");
    }
    let Ok(n) = arg_i64(args[2]) else {
        return errors::NOT_INTEGER;
    };
    let invalid = || errors::invalid_expire(ctx.cmd.name);
    let ms = if unit_secs {
        match n.checked_mul(1000) {
            Some(ms) => ms,
            None => return invalid(),
        }
    } else {
        n
    };
    let when = if relative {
        match ms.checked_add(ctx.now_ms) {
            Some(t) => t,
            None => return invalid(),
        }
    } else {
        ms
    };
    let current = match ctx.lookup_write(key) {
        None => return Reply::Int(0),
        Some(e) => e.expire(),
    };
    let allowed = match current {
        None => !xx && !gt,
        Some(cur) => !nx && (!gt || when > cur) && (!lt || when < cur),
    };
    if !allowed {
        return Reply::Int(0);
    }
    if ctx.already_expired(when) {
        ctx.delete(key);
        ctx.notify(notify::GENERIC, "del", key);
    } else {
        ctx.ex.ks.set_expire(ctx.db, key, Some(when));
        ctx.modified(key);
        ctx.notify(notify::GENERIC, "expire", key);
    }
    Reply::Int(1)
}

fn expire(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    expire_generic(ctx, args, true, true)
}

fn pexpire(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    expire_generic(ctx, args, false, true)
}

fn expireat(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    expire_generic(ctx, args, true, false)
}

fn pexpireat(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    expire_generic(ctx, args, false, false)
}

/// The key's expiry without touching it: `Err(-2)` missing, `Ok(None)` persistent.
fn key_expire(ctx: &mut Ctx, key: &[u8]) -> Result<Option<i64>, Reply> {
    let (db, now) = (ctx.db, ctx.now_ms);
    match ctx.ex.ks.lookup(db, key, now, false) {
        None => Err(Reply::Int(-2)),
        Some(e) => Ok(e.expire()),
    }
}

fn ttl_generic(ctx: &mut Ctx, key: &[u8], f: impl Fn(i64, i64) -> i64) -> Reply {
    match key_expire(ctx, key) {
        Err(r) => r,
        Ok(None) => Reply::Int(-1),
        Ok(Some(t)) => Reply::Int(f(t, ctx.now_ms)),
    }
}

fn ttl(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    ttl_generic(ctx, args[1], |t, now| ((t - now).max(0) + 500) / 1000)
}

fn pttl(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    ttl_generic(ctx, args[1], |t, now| (t - now).max(0))
}

fn expiretime(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    // Rounded to the nearest second, as TTL is (without adding: the time may be as
    // late as i64::MAX ms).
    ttl_generic(ctx, args[1], |t, _| {
        let t = t.max(0);
        t / 1000 + i64::from(t % 1000 >= 500)
    })
}

fn pexpiretime(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    ttl_generic(ctx, args[1], |t, _| t)
}

fn persist(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let key = args[1];
    match ctx.lookup_write(key) {
        Some(e) if e.expire().is_some() => {}
        _ => return Reply::Int(0),
    }
    ctx.ex.ks.set_expire(ctx.db, key, None);
    ctx.modified(key);
    ctx.notify(notify::GENERIC, "persist", key);
    Reply::Int(1)
}

// ----- OBJECT ---------------------------------------------------------------------

fn object_encoding(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (db, now) = (ctx.db, ctx.now_ms);
    match ctx.ex.ks.lookup(db, args[2], now, false) {
        Some(e) => Reply::bulk(e.value().encoding().as_bytes()),
        None => Reply::Null,
    }
}

fn is_lfu(ctx: &Ctx) -> bool {
    ctx.ex.config.maxmemory_policy.ends_with("lfu")
}

// FREQ and IDLETIME answer nil for a missing key before they look at the policy.
fn object_freq(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let lfu = is_lfu(ctx);
    let (db, now, params) = (ctx.db, ctx.now_ms, ctx.ex.ks.lfu_params);
    match ctx.ex.ks.lookup(db, args[2], now, false) {
        None => Reply::Null,
        Some(_) if !lfu => Reply::err("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."),
        Some(e) => Reply::Int(crate::keyspace::lfu_counter(e.lru(), now, params) as i64),
    }
}

fn object_idletime(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let lfu = is_lfu(ctx);
    let (db, now) = (ctx.db, ctx.now_ms);
    match ctx.ex.ks.lookup(db, args[2], now, false) {
        None => Reply::Null,
        Some(_) if lfu => Reply::err("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."),
        Some(e) => Reply::Int(lru_idle_ms(e.lru(), now) / 1000),
    }
}

fn object_refcount(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    // Redis shares the integers 0..9999 between keys unless an LRU or LFU policy
    // under a maxmemory needs a clock per value.
    let policy = &ctx.ex.config.maxmemory_policy;
    let shared_ints =
        ctx.ex.config.maxmemory == 0 || !(policy.ends_with("-lru") || policy.ends_with("-lfu"));
    let (db, now) = (ctx.db, ctx.now_ms);
    match ctx.ex.ks.lookup(db, args[2], now, false) {
        Some(e) => match e.value() {
            ValueRef::Int(n) if shared_ints && (0..10000).contains(&n) => {
                Reply::Int(i32::MAX as i64)
            }
            _ => Reply::Int(1),
        },
        None => Reply::Null,
    }
}

fn object_help(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    help_reply(
        "OBJECT",
        &[
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
        ],
    )
}

/// A HELP reply in Redis's shape: a header line, the lines given, and HELP's own.
pub fn help_reply(cmd: &str, lines: &[&str]) -> Reply {
    let mut out = vec![Reply::Status(
        format!("{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:").into(),
    )];
    out.extend(lines.iter().map(|l| Reply::Status(l.to_string().into())));
    out.push(Reply::status("HELP"));
    out.push(Reply::status("    Prints this help."));
    Reply::Array(out)
}
