//! Strings and numbers: GET/SET and their variants, counters, ranges, LCS.
//!
//! SET, SETNX, SETEX, PSETEX and GETSET share `set_generic`; GET, GETDEL and GETEX
//! share the lookup; the INCR family shares `incr_by`. Values that are the canonical
//! form of an integer are stored as integers (`int`), short strings inline in the key's
//! entry (`embstr`), others on the heap (`raw`).

use crate::command;
use crate::commands::ctx::notify;
use crate::commands::flags::*;
use crate::commands::{arg_i64, errors, is, Command, Ctx};
use crate::keyspace::{StrBytes, Value, ValueRef};
use crate::protocol::Reply;
use crate::util::numeric::{self, IncrFloatError};

const STR: &[&str] = &["write", "string", "slow"];

pub static COMMANDS: &[Command] = &[
    command!("get", 2, READONLY | FAST, (1, 1, 1), &["read", "string", "fast"], "string", "1.0.0", "Returns the string value of a key.", "O(1)", get),
    command!("set", -3, WRITE | DENYOOM, (1, 1, 1), STR, "string", "1.0.0", "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", "O(1)", set),
    command!("setnx", 3, WRITE | DENYOOM | FAST, (1, 1, 1), &["write", "string", "fast"], "string", "1.0.0", "Set the string value of a key only when the key doesn't exist.", "O(1)", setnx),
    command!("setex", 4, WRITE | DENYOOM, (1, 1, 1), STR, "string", "2.0.0", "Sets the string value and expiration time of a key. Creates the key if it doesn't exist.", "O(1)", setex),
    command!("psetex", 4, WRITE | DENYOOM, (1, 1, 1), STR, "string", "2.6.0", "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.", "O(1)", psetex),
    command!("getset", 3, WRITE | DENYOOM | FAST, (1, 1, 1), &["write", "string", "fast"], "string", "1.0.0", "Returns the previous string value of a key after setting it to a new value.", "O(1)", getset),
    command!("getdel", 2, WRITE | FAST, (1, 1, 1), &["write", "string", "fast"], "string", "6.2.0", "Returns the string value of a key after deleting the key.", "O(1)", getdel),
    command!("getex", -2, WRITE | FAST, (1, 1, 1), &["write", "string", "fast"], "string", "6.2.0", "Returns the string value of a key after setting its expiration time.", "O(1)", getex),
    command!("mget", -2, READONLY | FAST, (1, -1, 1), &["read", "string", "fast"], "string", "1.0.0", "Atomically returns the string values of one or more keys.", "O(N) where N is the number of keys to retrieve.", mget),
    command!("mset", -3, WRITE | DENYOOM, (1, -1, 2), STR, "string", "1.0.1", "Atomically creates or modifies the string values of one or more keys.", "O(N) where N is the number of keys to set.", mset),
    command!("msetnx", -3, WRITE | DENYOOM, (1, -1, 2), STR, "string", "1.0.1", "Atomically modifies the string values of one or more keys only when all keys don't exist.", "O(N) where N is the number of keys to set.", msetnx),
    command!("append", 3, WRITE | DENYOOM | FAST, (1, 1, 1), &["write", "string", "fast"], "string", "2.0.0", "Appends a string to the value of a key. Creates the key if it doesn't exist.", "O(1). The amortized time complexity is O(1) assuming the appended value is small and the already present value is of any size, since the dynamic string library used by Redis will double the free space available on every reallocation.", append),
    command!("strlen", 2, READONLY | FAST, (1, 1, 1), &["read", "string", "fast"], "string", "2.2.0", "Returns the length of a string value.", "O(1)", strlen),
    command!("getrange", 4, READONLY, (1, 1, 1), &["read", "string", "slow"], "string", "2.4.0", "Returns a substring of the string stored at a key.", "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.", getrange),
    command!("substr", 4, READONLY, (1, 1, 1), &["read", "string", "slow"], "string", "1.0.0", "Returns a substring from a string value.", "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.", getrange),
    command!("setrange", 4, WRITE | DENYOOM, (1, 1, 1), STR, "string", "2.2.0", "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.", "O(1), not counting the time taken to copy the new string in place. Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the value argument.", setrange),
    command!("incr", 2, WRITE | DENYOOM | FAST, (1, 1, 1), &["write", "string", "fast"], "string", "1.0.0", "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", "O(1)", incr),
    command!("decr", 2, WRITE | DENYOOM | FAST, (1, 1, 1), &["write", "string", "fast"], "string", "1.0.0", "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", "O(1)", decr),
    command!("incrby", 3, WRITE | DENYOOM | FAST, (1, 1, 1), &["write", "string", "fast"], "string", "1.0.0", "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.", "O(1)", incrby),
    command!("decrby", 3, WRITE | DENYOOM | FAST, (1, 1, 1), &["write", "string", "fast"], "string", "1.0.0", "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.", "O(1)", decrby),
    command!("incrbyfloat", 3, WRITE | DENYOOM | FAST, (1, 1, 1), &["write", "string", "fast"], "string", "2.6.0", "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.", "O(1)", incrbyfloat),
    command!("lcs", -3, READONLY, (1, 2, 1), &["read", "string", "slow"], "string", "7.0.0", "Finds the longest common substring.", "O(N*M) where N and M are the lengths of s1 and s2, respectively", lcs),
];

// ----- GET family ---------------------------------------------------------------

/// Reply with a string value, or WRONGTYPE.
fn string_reply(v: Option<ValueRef<'_>>) -> Reply {
    match v {
        None => Reply::Null,
        // A short string or an integer travels inside the reply (no allocation).
        Some(ValueRef::Int(n)) => Reply::bulk_int(n),
        Some(ValueRef::Emb(b) | ValueRef::Raw(b)) => Reply::bulk(b),
        Some(ValueRef::Obj(_)) => errors::WRONGTYPE,
    }
}

fn get(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    string_reply(ctx.lookup_read(args[1]).map(|e| e.value()))
}

fn getdel(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let reply = string_reply(ctx.lookup_read(args[1]).map(|e| e.value()));
    if reply.bulk_bytes().is_some() {
        ctx.delete(args[1]);
        ctx.notify(notify::GENERIC, "del", args[1]);
    }
    reply
}

/// Expiry options shared by SET and GETEX.
#[derive(Default, Clone, Copy, PartialEq, Eq, Debug)]
enum ExpireOpt {
    #[default]
    None,
    /// Relative or absolute, already converted to absolute unix ms.
    At(i64),
    KeepTtl,
    Persist,
}

struct SetOptions {
    nx: bool,
    xx: bool,
    get: bool,
    expire: ExpireOpt,
}

/// Converts an EX/PX/EXAT/PXAT argument to absolute ms, with Redis's checks.
fn expire_at(ctx: &Ctx, arg: &[u8], unit_secs: bool, relative: bool) -> Result<i64, Reply> {
    let n = arg_i64(arg)?;
    let invalid = || errors::invalid_expire(ctx.cmd.name);
    if n <= 0 || (unit_secs && n > i64::MAX / 1000) {
        return Err(invalid());
    }
    let ms = if unit_secs { n * 1000 } else { n };
    if relative {
        ms.checked_add(ctx.now_ms).ok_or_else(invalid)
    } else {
        Ok(ms)
    }
}

/// Parses SET's (`for_set`) or GETEX's options starting at `args[from]`, the
/// expiry's value included.
fn parse_set_options(
    ctx: &Ctx,
    args: &[&[u8]],
    from: usize,
    for_set: bool,
) -> Result<SetOptions, Reply> {
    let (mut o, expiry) = parse_set_syntax(args, from, for_set)?;
    if let Some(e) = expiry {
        o.expire = e.resolve(ctx)?;
    }
    Ok(o)
}

/// An EX/PX/EXAT/PXAT value not yet checked: GETEX checks it only once the key was
/// found to hold a string, as Redis does.
struct ExpiryArg<'a> {
    arg: &'a [u8],
    unit_secs: bool,
    relative: bool,
}

impl ExpiryArg<'_> {
    fn resolve(&self, ctx: &Ctx) -> Result<ExpireOpt, Reply> {
        expire_at(ctx, self.arg, self.unit_secs, self.relative).map(ExpireOpt::At)
    }
}

/// The syntax of SET's or GETEX's options; an expiry's value is returned unchecked.
fn parse_set_syntax<'a>(
    args: &[&'a [u8]],
    from: usize,
    for_set: bool,
) -> Result<(SetOptions, Option<ExpiryArg<'a>>), Reply> {
    let mut o = SetOptions {
        nx: false,
        xx: false,
        get: false,
        expire: ExpireOpt::None,
    };
    // Which expiry keyword was given, to reject conflicting ones as Redis does.
    let mut unit: Option<&str> = None;
    let mut pending: Option<ExpiryArg<'a>> = None;
    let mut j = from;
    while j < args.len() {
        let a = args[j];
        let has_next = j + 1 < args.len();
        let expiry_free = |u: Option<&str>, me: &str| u.is_none() || u == Some(me);
        if for_set && is(a, "nx") && !o.xx {
            o.nx = true;
        } else if for_set && is(a, "xx") && !o.nx {
            o.xx = true;
        } else if for_set && is(a, "get") {
            o.get = true;
        } else if for_set && is(a, "keepttl") && expiry_free(unit, "keepttl") {
            unit = Some("keepttl");
        } else if !for_set && is(a, "persist") && expiry_free(unit, "persist") {
            unit = Some("persist");
        } else if let Some((name, secs, rel)) = [
            ("ex", true, true),
            ("px", false, true),
            ("exat", true, false),
            ("pxat", false, false),
        ]
        .into_iter()
        .find(|(n, _, _)| is(a, n))
        {
            if !has_next || !expiry_free(unit, name) {
                return Err(errors::SYNTAX);
            }
            unit = Some(name);
            pending = Some(ExpiryArg {
                arg: args[j + 1],
                unit_secs: secs,
                relative: rel,
            });
            j += 1;
        } else {
            return Err(errors::SYNTAX);
        }
        j += 1;
    }
    o.expire = match unit {
        Some("keepttl") => ExpireOpt::KeepTtl,
        Some("persist") => ExpireOpt::Persist,
        _ => ExpireOpt::None,
    };
    Ok((o, pending))
}

/// The shared implementation of SET and its variants. `ok` is the reply on success,
/// `abort` when NX/XX prevented the write.
fn set_generic(
    ctx: &mut Ctx,
    key: &[u8],
    value: &[u8],
    o: &SetOptions,
    ok: fn() -> Reply,
    abort: fn() -> Reply,
) -> Reply {
    let old: Option<Reply> = if o.get {
        match ctx.read_string(key) {
            Err(e) => return e,
            Ok(v) => Some(string_reply(v)),
        }
    } else {
        None
    };
    let exists = match &old {
        Some(r) => !matches!(r, Reply::Null),
        None => (o.nx || o.xx) && ctx.exists(key),
    };
    if (o.nx && exists) || (o.xx && !exists) {
        return old.unwrap_or_else(abort);
    }
    let (expire, keep) = match o.expire {
        ExpireOpt::At(t) => (Some(t), false),
        ExpireOpt::KeepTtl => (None, true),
        _ => (None, false),
    };
    ctx.set(key, StrBytes(value), expire, keep);
    ctx.notify(notify::STRING, "set", key);
    if expire.is_some() {
        // A time already past is stored as given, as Redis does: the key is gone to
        // every read, and goes for good (the `expired` event) when a lookup or the
        // active cycle finds it.
        ctx.notify(notify::GENERIC, "expire", key);
    }
    old.unwrap_or_else(ok)
}

fn set(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match parse_set_options(ctx, args, 3, true) {
        Ok(o) => set_generic(ctx, args[1], args[2], &o, Reply::ok, || Reply::Null),
        Err(e) => e,
    }
}

fn setnx(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let o = SetOptions {
        nx: true,
        xx: false,
        get: false,
        expire: ExpireOpt::None,
    };
    set_generic(
        ctx,
        args[1],
        args[2],
        &o,
        || Reply::Int(1),
        || Reply::Int(0),
    )
}

fn setex_generic(ctx: &mut Ctx, args: &[&[u8]], secs: bool) -> Reply {
    let t = match expire_at(ctx, args[2], secs, true) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let o = SetOptions {
        nx: false,
        xx: false,
        get: false,
        expire: ExpireOpt::At(t),
    };
    set_generic(ctx, args[1], args[3], &o, Reply::ok, || Reply::Null)
}

fn setex(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    setex_generic(ctx, args, true)
}

fn psetex(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    setex_generic(ctx, args, false)
}

fn getset(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let o = SetOptions {
        nx: false,
        xx: false,
        get: true,
        expire: ExpireOpt::None,
    };
    set_generic(ctx, args[1], args[2], &o, Reply::ok, || Reply::Null)
}

fn getex(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    // The options' syntax, then the key (nil, WRONGTYPE), then the expiry's value.
    let (mut o, expiry) = match parse_set_syntax(args, 2, false) {
        Ok(parsed) => parsed,
        Err(e) => return e,
    };
    let key = args[1];
    let reply = match ctx.read_string(key) {
        Err(e) => return e,
        Ok(None) => return Reply::Null,
        Ok(v) => string_reply(v),
    };
    if let Some(e) = expiry {
        match e.resolve(ctx) {
            Ok(at) => o.expire = at,
            Err(e) => return e,
        }
    }
    match o.expire {
        ExpireOpt::At(t) if t <= ctx.now_ms => {
            ctx.delete(key);
            ctx.notify(notify::GENERIC, "del", key);
        }
        ExpireOpt::At(t) => {
            ctx.ex.ks.set_expire(ctx.db, key, Some(t));
            ctx.modified(key);
            ctx.notify(notify::GENERIC, "expire", key);
        }
        ExpireOpt::Persist => {
            let had = ctx.ex.ks.dbs[ctx.db]
                .table
                .get(key)
                .and_then(|e| e.expire())
                .is_some();
            if had {
                ctx.ex.ks.set_expire(ctx.db, key, None);
                ctx.modified(key);
                ctx.notify(notify::GENERIC, "persist", key);
            }
        }
        _ => {}
    }
    reply
}

fn mget(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let mut out = Vec::with_capacity(args.len() - 1);
    for k in &args[1..] {
        let r = match ctx.lookup_read(k) {
            Some(e) => {
                let mut b = Vec::new();
                if e.value().append_string(&mut b) {
                    Reply::Bulk(b)
                } else {
                    Reply::Null
                }
            }
            None => Reply::Null,
        };
        out.push(r);
    }
    Reply::Array(out)
}

fn mset(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if args.len().is_multiple_of(2) {
        return crate::commands::wrong_arity(ctx.cmd.name);
    }
    for kv in args[1..].chunks(2) {
        ctx.set(kv[0], StrBytes(kv[1]), None, false);
        ctx.notify(notify::STRING, "set", kv[0]);
    }
    Reply::ok()
}

fn msetnx(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if args.len().is_multiple_of(2) {
        return crate::commands::wrong_arity(ctx.cmd.name);
    }
    if args[1..].chunks(2).any(|kv| ctx.exists(kv[0])) {
        return Reply::Int(0);
    }
    mset(ctx, args);
    Reply::Int(1)
}

fn strlen(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match ctx.read_string(args[1]) {
        Err(e) => e,
        Ok(None) => Reply::Int(0),
        Ok(Some(v)) => Reply::Int(v.string_len() as i64),
    }
}

fn getrange(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (Ok(start), Ok(end)) = (arg_i64(args[2]), arg_i64(args[3])) else {
        return errors::NOT_INTEGER;
    };
    let s = match ctx.read_string(args[1]) {
        Err(e) => return e,
        Ok(None) => return Reply::Bulk(Vec::new()),
        Ok(Some(v)) => v.string_bytes().unwrap_or_default(),
    };
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        return Reply::Bulk(Vec::new());
    }
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if len == 0 || start > end {
        return Reply::Bulk(Vec::new());
    }
    Reply::Bulk(s[start as usize..=end as usize].to_vec())
}

/// Applies `edit` to the string at `key` as a heap string, creating it if missing.
/// Returns the new length, or an error reply.
fn modify_raw(ctx: &mut Ctx, key: &[u8], edit: impl FnOnce(&mut Vec<u8>)) -> Result<usize, Reply> {
    let mut e = match ctx.lookup_write(key) {
        None => {
            let mut v = Vec::new();
            edit(&mut v);
            let len = v.len();
            ctx.set(key, Value::RawStr(v), None, true);
            return Ok(len);
        }
        Some(e) => e,
    };
    if let Some(raw) = e.raw_string_mut() {
        edit(raw);
        let len = raw.len();
        ctx.modified(key);
        return Ok(len);
    }
    let mut current = Vec::new();
    if !e.value().append_string(&mut current) {
        return Err(errors::WRONGTYPE);
    }
    edit(&mut current);
    let len = current.len();
    ctx.replace(key, Value::RawStr(current));
    Ok(len)
}

/// The length of the string at `key` before a write changes it: looked up for writing
/// (expired keys go, no keyspace hit is counted) but not yet an access, which the
/// write's own lookup is.
fn peek_string_len(ctx: &mut Ctx, key: &[u8]) -> Result<Option<usize>, Reply> {
    if !ctx.exists(key) {
        return Ok(None);
    }
    match ctx.ex.ks.dbs[ctx.db].table.get(key).map(|e| e.value()) {
        Some(v) if v.is_string() => Ok(Some(v.string_len())),
        Some(_) => Err(errors::WRONGTYPE),
        None => Ok(None),
    }
}

fn append(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (key, tail) = (args[1], args[2]);
    let current = match peek_string_len(ctx, key) {
        Err(e) => return e,
        Ok(v) => v,
    };
    if current.unwrap_or(0) + tail.len() > ctx.max_bulk_len() {
        return errors::STRING_TOO_LONG;
    }
    if current.is_none() {
        // A new key is stored as SET stores it (int, embstr or raw), as Redis's
        // APPEND does; appending to an existing one makes it raw.
        ctx.set(key, StrBytes(tail), None, true);
        ctx.notify(notify::STRING, "append", key);
        return Reply::Int(tail.len() as i64);
    }
    match modify_raw(ctx, key, |s| s.extend_from_slice(tail)) {
        Ok(n) => {
            ctx.notify(notify::STRING, "append", key);
            Reply::Int(n as i64)
        }
        Err(e) => e,
    }
}

fn setrange(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (key, patch) = (args[1], args[3]);
    let Ok(offset) = arg_i64(args[2]) else {
        return errors::NOT_INTEGER;
    };
    if offset < 0 {
        return Reply::err("ERR offset is out of range");
    }
    let cur_len = match peek_string_len(ctx, key) {
        Err(e) => return e,
        Ok(v) => v,
    };
    if patch.is_empty() {
        return Reply::Int(cur_len.unwrap_or(0) as i64);
    }
    let offset = offset as usize;
    if offset.saturating_add(patch.len()) > ctx.max_bulk_len() {
        return errors::STRING_TOO_LONG;
    }
    match modify_raw(ctx, key, |s| {
        if s.len() < offset + patch.len() {
            s.resize(offset + patch.len(), 0);
        }
        s[offset..offset + patch.len()].copy_from_slice(patch);
    }) {
        Ok(n) => {
            ctx.notify(notify::STRING, "setrange", key);
            Reply::Int(n as i64)
        }
        Err(e) => e,
    }
}

// ----- counters -------------------------------------------------------------------

/// The shared implementation of INCR, DECR, INCRBY and DECRBY.
fn incr_by(ctx: &mut Ctx, key: &[u8], by: i64) -> Reply {
    let (db, now) = (ctx.db, ctx.now_ms);
    // One lookup: a missing key is made holding `by` (0 + by cannot overflow).
    let (mut e, made) = ctx.ex.ks.lookup_mut_or_add(db, key, now, || Value::Int(by));
    let (new, in_place) = if made {
        (by, true)
    } else {
        let cur = match e.value() {
            ValueRef::Int(n) => n,
            ValueRef::Emb(b) | ValueRef::Raw(b) => match numeric::parse_i64(b) {
                Some(n) => n,
                None => return errors::NOT_INTEGER,
            },
            ValueRef::Obj(_) => return errors::WRONGTYPE,
        };
        let Some(new) = cur.checked_add(by) else {
            return errors::OVERFLOW;
        };
        // Integers are rewritten in place: no reallocation on the hot path.
        (new, e.set_int_in_place(new))
    };
    if made {
        ctx.notify(notify::NEW, "new", key);
    }
    if in_place {
        ctx.modified(key);
    } else {
        ctx.replace(key, Value::Int(new));
    }
    ctx.notify(notify::STRING, "incrby", key);
    Reply::Int(new)
}

fn incr(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    incr_by(ctx, args[1], 1)
}

fn decr(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    incr_by(ctx, args[1], -1)
}

fn incrby(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match arg_i64(args[2]) {
        Ok(n) => incr_by(ctx, args[1], n),
        Err(e) => e,
    }
}

fn decrby(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match arg_i64(args[2]) {
        Ok(i64::MIN) => Reply::err("ERR decrement would overflow"),
        Ok(n) => incr_by(ctx, args[1], -n),
        Err(e) => e,
    }
}

fn incrbyfloat(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let key = args[1];
    let current = match ctx.write_string_copy(key) {
        Err(e) => return e,
        Ok(None) => b"0".to_vec(),
        Ok(Some(v)) => v,
    };
    match numeric::incr_by_float(&current, args[2]) {
        Ok(result) => {
            ctx.replace(key, Value::Str(result.clone()));
            ctx.notify(notify::STRING, "incrbyfloat", key);
            Reply::Bulk(result)
        }
        Err(IncrFloatError::NotAFloat) => errors::NOT_FLOAT,
        Err(IncrFloatError::NanOrInfinity) => {
            Reply::err("ERR increment would produce NaN or Infinity")
        }
    }
}

// ----- LCS ------------------------------------------------------------------------

fn lcs(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    // Both keys are read (and counted as hits or misses) before their types are
    // judged, and both before the options, as Redis's lcsCommand.
    let mut strings: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    let mut wrong_type = false;
    for (i, s) in strings.iter_mut().enumerate() {
        if let Some(v) = ctx.lookup_read(args[1 + i]).map(|e| e.value()) {
            wrong_type |= !v.append_string(s);
        }
    }
    if wrong_type {
        return Reply::err("ERR The specified keys must contain string values");
    }
    let (mut get_len, mut get_idx, mut with_match_len) = (false, false, false);
    let mut min_match_len: i64 = 0;
    let mut j = 3;
    while j < args.len() {
        let a = args[j];
        if is(a, "idx") {
            get_idx = true;
        } else if is(a, "len") {
            get_len = true;
        } else if is(a, "withmatchlen") {
            with_match_len = true;
        } else if is(a, "minmatchlen") && j + 1 < args.len() {
            match arg_i64(args[j + 1]) {
                Ok(n) => min_match_len = n.max(0),
                Err(e) => return e,
            }
            j += 1;
        } else {
            return errors::SYNTAX;
        }
        j += 1;
    }
    if get_len && get_idx {
        return Reply::err("ERR If you want both the length and indexes, please just use IDX.");
    }
    let (a, b) = (&strings[0], &strings[1]);
    let cells = (a.len() as u128 + 1) * (b.len() as u128 + 1) * 4;
    if cells > ctx.max_bulk_len() as u128 {
        return Reply::err(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        );
    }
    let result = crate::types::strings::lcs(a, b);
    if !get_idx {
        if get_len {
            return Reply::Int(result.len as i64);
        }
        return Reply::Bulk(result.sequence);
    }
    let mut matches = Vec::new();
    for m in &result.ranges {
        let len = m.a.1 - m.a.0 + 1;
        if (len as i64) < min_match_len {
            continue;
        }
        let mut item = vec![
            Reply::Array(vec![Reply::Int(m.a.0 as i64), Reply::Int(m.a.1 as i64)]),
            Reply::Array(vec![Reply::Int(m.b.0 as i64), Reply::Int(m.b.1 as i64)]),
        ];
        if with_match_len {
            item.push(Reply::Int(len as i64));
        }
        matches.push(Reply::Array(item));
    }
    Reply::Map(vec![
        (Reply::bulk(b"matches"), Reply::Array(matches)),
        (Reply::bulk(b"len"), Reply::Int(result.len as i64)),
    ])
}
