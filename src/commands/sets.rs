//! Sets: membership commands, random picks (SPOP, SRANDMEMBER), SMOVE, the algebra
//! (SINTER/SUNION/SDIFF, their STORE forms and SINTERCARD) and SSCAN.
//!
//! The algebra shares `gather`, which checks every key's type first (as Redis does,
//! WRONGTYPE wins over an empty result) and then borrows all sets at once from the
//! key table; intersections iterate the smallest set. STORE results are built from an
//! empty intset member by member, so they end in the encoding Redis would pick.

use crate::command;
use crate::commands::ctx::{encode_repeated_picks, notify, stream_picks};
use crate::commands::flags::*;
use crate::commands::hashes::{parse_rand_count, parse_scan_opts, scan_reply};
use crate::commands::keys::parse_cursor;
use crate::commands::{errors, Command, Ctx, KeySpec};
use crate::keyspace::{ObjMut, ObjRef, Object, Value, ValueRef};
use crate::protocol::reply::encode_bulk;
use crate::protocol::{PickStream, Reply};
use crate::types::set::{Set, SetLimits};
use crate::util::glob::glob_match;

const W: &[&str] = &["write", "set", "fast"];
const WS: &[&str] = &["write", "set", "slow"];
const R: &[&str] = &["read", "set", "fast"];
const RS: &[&str] = &["read", "set", "slow"];

pub static COMMANDS: &[Command] = &[
    command!("sadd", -3, WRITE | DENYOOM | FAST, (1, 1, 1), W, "set", "1.0.0", "Adds one or more members to a set. Creates the key if it doesn't exist.", "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.", sadd),
    command!("srem", -3, WRITE | FAST, (1, 1, 1), W, "set", "1.0.0", "Removes one or more members from a set. Deletes the set if the last member was removed.", "O(N) where N is the number of members to be removed.", srem),
    command!("scard", 2, READONLY | FAST, (1, 1, 1), R, "set", "1.0.0", "Returns the number of members in a set.", "O(1)", scard),
    command!("sismember", 3, READONLY | FAST, (1, 1, 1), R, "set", "1.0.0", "Determines whether a member belongs to a set.", "O(1)", sismember),
    command!("smismember", -3, READONLY | FAST, (1, 1, 1), R, "set", "6.2.0", "Determines whether multiple members belong to a set.", "O(N) where N is the number of elements being checked for membership", smismember),
    command!("smembers", 2, READONLY, (1, 1, 1), RS, "set", "1.0.0", "Returns all members of a set.", "O(N) where N is the set cardinality.", smembers),
    command!("spop", -2, WRITE | FAST, (1, 1, 1), W, "set", "1.0.0", "Returns one or more random members from a set after removing them. Deletes the set if the last member was popped.", "Without the count argument O(1), otherwise O(N) where N is the value of the passed count.", spop),
    command!("srandmember", -2, READONLY, (1, 1, 1), RS, "set", "1.0.0", "Get one or multiple random members from a set", "Without the count argument O(1), otherwise O(N) where N is the absolute value of the passed count.", srandmember),
    command!("smove", 4, WRITE | FAST, (1, 2, 1), W, "set", "1.0.0", "Moves a member from one set to another.", "O(1)", smove),
    command!("sinter", -2, READONLY, (1, -1, 1), RS, "set", "1.0.0", "Returns the intersect of multiple sets.", "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.", sinter),
    Command {
        key_spec: KeySpec::Counted,
        flags: READONLY | MOVABLE_KEYS,
        ..command!("sintercard", -3, READONLY, (1, 1, 1), RS, "set", "7.0.0", "Returns the number of members of the intersect of multiple sets.", "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.", sintercard)
    },
    command!("sinterstore", -3, WRITE | DENYOOM, (1, -1, 1), WS, "set", "1.0.0", "Stores the intersect of multiple sets in a key.", "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.", sinterstore),
    command!("sunion", -2, READONLY, (1, -1, 1), RS, "set", "1.0.0", "Returns the union of multiple sets.", "O(N) where N is the total number of elements in all given sets.", sunion),
    command!("sunionstore", -3, WRITE | DENYOOM, (1, -1, 1), WS, "set", "1.0.0", "Stores the union of multiple sets in a key.", "O(N) where N is the total number of elements in all given sets.", sunionstore),
    command!("sdiff", -2, READONLY, (1, -1, 1), RS, "set", "1.0.0", "Returns the difference of multiple sets.", "O(N) where N is the total number of elements in all given sets.", sdiff),
    command!("sdiffstore", -3, WRITE | DENYOOM, (1, -1, 1), WS, "set", "1.0.0", "Stores the difference of multiple sets in a key.", "O(N) where N is the total number of elements in all given sets.", sdiffstore),
    command!("sscan", -3, READONLY, (1, 1, 1), RS, "set", "2.0.0", "Iterates over members of a set.", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.", sscan),
];

// ----- access -------------------------------------------------------------------------

pub fn limits(ctx: &Ctx) -> SetLimits {
    let c = &ctx.ex.config;
    SetLimits {
        intset_entries: c.set_max_intset_entries.clamp(0, 1 << 30) as usize,
        listpack_entries: c.set_max_listpack_entries.max(0) as usize,
        listpack_value: c.set_max_listpack_value.max(0) as usize,
    }
}

/// The set at `key` for reading: `Ok(None)` when missing.
pub fn read_set<'c>(ctx: &'c mut Ctx, key: &[u8]) -> Result<Option<&'c Set>, Reply> {
    match ctx.lookup_read(key).map(|e| e.value()) {
        None => Ok(None),
        Some(ValueRef::Obj(ObjRef::Set(s))) => Ok(Some(s)),
        Some(_) => Err(errors::WRONGTYPE),
    }
}

/// Runs `f` on the set at `key` for writing: `Ok(None)` when missing.
fn write_set<R>(
    ctx: &mut Ctx,
    key: &[u8],
    f: impl FnOnce(&mut Set) -> R,
) -> Result<Option<R>, Reply> {
    let Some(mut e) = ctx.lookup_write(key) else {
        return Ok(None);
    };
    match e.object_mut() {
        Some(ObjMut::Set(s)) => Ok(Some(f(s))),
        _ => Err(errors::WRONGTYPE),
    }
}

/// Deletes `key` if its set became empty, with the `del` event.
fn delete_if_empty(ctx: &mut Ctx, key: &[u8]) {
    let empty = matches!(
        ctx.ex.ks.dbs[ctx.db].table.get(key).map(|e| e.value()),
        Some(ValueRef::Obj(ObjRef::Set(s))) if s.is_empty()
    );
    if empty {
        ctx.ex.ks.delete(ctx.db, key);
        ctx.notify(notify::GENERIC, "del", key);
    }
}

fn members_reply(members: Vec<Vec<u8>>) -> Reply {
    Reply::Set(members.into_iter().map(Reply::Bulk).collect())
}

// ----- membership ---------------------------------------------------------------------

fn sadd(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let key = args[1];
    let members = &args[2..];
    let lim = limits(ctx);
    let added = match write_set(ctx, key, |s| {
        s.maybe_convert(members.len(), lim);
        members.iter().filter(|m| s.add(m, lim)).count()
    }) {
        Err(e) => return e,
        Ok(Some(n)) => n,
        Ok(None) => {
            let mut s = Set::create(members[0], members.len(), lim);
            let n = members.iter().filter(|m| s.add(m, lim)).count();
            ctx.add(ctx.db, key, Value::Obj(Object::Set(Box::new(s))), None);
            n
        }
    };
    if added > 0 {
        ctx.modified(key);
        ctx.notify(notify::SET, "sadd", key);
    }
    Reply::Int(added as i64)
}

fn srem(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let key = args[1];
    let removed = match write_set(ctx, key, |s| {
        args[2..].iter().filter(|m| s.remove(m)).count()
    }) {
        Err(e) => return e,
        Ok(n) => n.unwrap_or(0),
    };
    if removed > 0 {
        ctx.modified(key);
        ctx.notify(notify::SET, "srem", key);
        delete_if_empty(ctx, key);
    }
    Reply::Int(removed as i64)
}

fn scard(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match read_set(ctx, args[1]) {
        Err(e) => e,
        Ok(s) => Reply::Int(s.map_or(0, |s| s.len() as i64)),
    }
}

fn sismember(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match read_set(ctx, args[1]) {
        Err(e) => e,
        Ok(s) => Reply::Int(s.is_some_and(|s| s.contains(args[2])) as i64),
    }
}

fn smismember(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match read_set(ctx, args[1]) {
        Err(e) => e,
        Ok(s) => Reply::Array(
            args[2..]
                .iter()
                .map(|m| Reply::Int(s.is_some_and(|s| s.contains(m)) as i64))
                .collect(),
        ),
    }
}

fn smembers(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match read_set(ctx, args[1]) {
        Err(e) => e,
        Ok(s) => members_reply(s.map_or_else(Vec::new, |s| s.members())),
    }
}

// ----- random -------------------------------------------------------------------------

/// Members per SREM when SPOP with a count is propagated (Redis's batch size).
const SPOP_PROPAGATE_BATCH: usize = 1024;

fn spop(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let key = args[1];
    if args.len() > 3 {
        return errors::SYNTAX;
    }
    if args.len() == 2 {
        let m = match write_set(ctx, key, |s| s.pop_random()) {
            Err(e) => return e,
            Ok(m) => m.flatten(),
        };
        return match m {
            None => Reply::Null,
            Some(m) => {
                ctx.modified(key);
                ctx.notify(notify::SET, "spop", key);
                delete_if_empty(ctx, key);
                ctx.propagate_as(vec![vec![b"SREM".to_vec(), key.to_vec(), m.clone()]]);
                Reply::Bulk(m)
            }
        };
    }
    let count = match crate::commands::arg_positive(args[2], None) {
        Ok(n) => n as usize,
        Err(e) => return e,
    };
    let popped = match write_set(ctx, key, |s| {
        if count >= s.len() {
            let all = s.members();
            *s = Set::new_intset();
            (all, true)
        } else {
            ((0..count).filter_map(|_| s.pop_random()).collect(), false)
        }
    }) {
        Err(e) => return e,
        Ok(p) => p.unwrap_or_default(),
    };
    let (popped, whole) = popped;
    if !popped.is_empty() {
        ctx.modified(key);
        ctx.notify(notify::SET, "spop", key);
        delete_if_empty(ctx, key);
        ctx.propagate_as(spop_propagation(ctx, key, &popped, whole));
    }
    members_reply(popped)
}

/// What SPOP with a count sends to replicas and the AOF, as Redis 7.4's
/// spopWithCountCommand: popping the whole set is a DEL (UNLINK under
/// `lazyfree-lazy-server-del`); otherwise SREMs of the popped members, 1024 per command.
fn spop_propagation(ctx: &Ctx, key: &[u8], popped: &[Vec<u8>], whole: bool) -> Vec<Vec<Vec<u8>>> {
    if whole {
        let name: &[u8] = if ctx.ex.config.lazyfree_lazy_server_del {
            b"UNLINK"
        } else {
            b"DEL"
        };
        return vec![vec![name.to_vec(), key.to_vec()]];
    }
    popped
        .chunks(SPOP_PROPAGATE_BATCH)
        .map(|batch| {
            let mut cmd = Vec::with_capacity(batch.len() + 2);
            cmd.push(b"SREM".to_vec());
            cmd.push(key.to_vec());
            cmd.extend(batch.iter().cloned());
            cmd
        })
        .collect()
}

fn srandmember(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if args.len() > 3 {
        return errors::SYNTAX;
    }
    if args.len() == 2 {
        return match read_set(ctx, args[1]) {
            Err(e) => e,
            Ok(s) => s.and_then(|s| s.random()).map_or(Reply::Null, Reply::Bulk),
        };
    }
    let count = match parse_rand_count(args[2]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let room = ctx.reply_room();
    let may_stream = ctx.may_stream_reply();
    let s = match read_set(ctx, args[1]) {
        Err(e) => return e,
        Ok(None) => return Reply::Array(Vec::new()),
        Ok(Some(s)) => s,
    };
    if count >= 0 {
        let picked = s.random_distinct(count as usize);
        return Reply::Array(picked.into_iter().map(Reply::Bulk).collect());
    }
    let picks = count.unsigned_abs();
    if stream_picks(may_stream, picks, s.len()) {
        let mut stream = PickStream::new(picks, picks);
        s.for_each(|m| stream.add_candidate(|b| encode_bulk(m, b)));
        return Reply::Picks(Box::new(stream));
    }
    let reply = encode_repeated_picks(picks, 1, room, |b| match s.random() {
        Some(m) => {
            encode_bulk(&m, b);
            true
        }
        None => false,
    });
    reply.unwrap_or_else(|| ctx.output_limit_reached())
}

fn smove(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (src, dst, m) = (args[1], args[2], args[3]);
    let src_has = match read_set(ctx, src) {
        Err(e) => return e,
        Ok(None) => return Reply::Int(0),
        Ok(Some(s)) => s.contains(m),
    };
    if let Err(e) = read_set(ctx, dst) {
        return e;
    }
    if src == dst || !src_has {
        return Reply::Int(src_has as i64);
    }
    let lim = limits(ctx);
    let _ = write_set(ctx, src, |s| s.remove(m));
    ctx.modified(src);
    ctx.notify(notify::SET, "srem", src);
    delete_if_empty(ctx, src);
    let added = match write_set(ctx, dst, |s| s.add(m, lim)) {
        Ok(Some(a)) => a,
        _ => {
            let mut s = Set::create(m, 1, lim);
            s.add(m, lim);
            ctx.add(ctx.db, dst, Value::Obj(Object::Set(Box::new(s))), None);
            true
        }
    };
    // A member the destination already had leaves it unchanged: no WATCH of it
    // is touched (Redis signals dstset only when the addition happened).
    if added {
        ctx.modified(dst);
        ctx.notify(notify::SET, "sadd", dst);
    }
    Reply::Int(1)
}

// ----- algebra ------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// Type-checks every key (counting hits and misses, expiring), then computes `op`
/// over the sets. `limit` stops an intersection early (SINTERCARD; 0 = none).
/// Returns the result members in Redis's order for a direct reply.
fn compute(ctx: &mut Ctx, keys: &[&[u8]], op: Op, limit: usize) -> Result<Vec<Vec<u8>>, Reply> {
    for k in keys {
        read_set(ctx, k)?;
    }
    let table = &ctx.ex.ks.dbs[ctx.db].table;
    let sets: Vec<Option<&Set>> = keys
        .iter()
        .map(|k| match table.get(k).map(|e| e.value()) {
            Some(ValueRef::Obj(ObjRef::Set(s))) => Some(s),
            _ => None,
        })
        .collect();
    let lim = limits(ctx);
    Ok(match op {
        Op::Inter => {
            if sets.iter().any(|s| s.is_none()) {
                return Ok(Vec::new());
            }
            let mut sets: Vec<&Set> = sets.into_iter().flatten().collect();
            sets.sort_by_key(|s| s.len());
            let mut out = Vec::new();
            sets[0].for_each(|m| {
                if (limit == 0 || out.len() < limit) && sets[1..].iter().all(|s| s.contains(m)) {
                    out.push(m.to_vec());
                }
            });
            out
        }
        Op::Union => {
            let mut acc = Set::new_intset();
            for s in sets.iter().flatten() {
                s.for_each(|m| {
                    acc.add(m, lim);
                });
            }
            acc.members()
        }
        Op::Diff => {
            let Some(first) = sets[0] else {
                return Ok(Vec::new());
            };
            let mut acc = Set::new_intset();
            first.for_each(|m| {
                if !sets[1..].iter().flatten().any(|s| s.contains(m)) {
                    acc.add(m, lim);
                }
            });
            acc.members()
        }
    })
}

fn setop(ctx: &mut Ctx, args: &[&[u8]], op: Op) -> Reply {
    match compute(ctx, &args[1..], op, 0) {
        Err(e) => e,
        Ok(m) => members_reply(m),
    }
}

fn setop_store(ctx: &mut Ctx, args: &[&[u8]], op: Op, event: &'static str) -> Reply {
    let dst = args[1];
    let members = match compute(ctx, &args[2..], op, 0) {
        Err(e) => return e,
        Ok(m) => m,
    };
    if members.is_empty() {
        if ctx.delete(dst) {
            ctx.notify(notify::GENERIC, "del", dst);
        }
        return Reply::Int(0);
    }
    let lim = limits(ctx);
    let mut s = Set::new_intset();
    for m in &members {
        s.add(m, lim);
    }
    let n = s.len() as i64;
    ctx.set(dst, Value::Obj(Object::Set(Box::new(s))), None, false);
    ctx.notify(notify::SET, event, dst);
    Reply::Int(n)
}

fn sinter(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    setop(ctx, args, Op::Inter)
}

fn sunion(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    setop(ctx, args, Op::Union)
}

fn sdiff(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    setop(ctx, args, Op::Diff)
}

fn sinterstore(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    setop_store(ctx, args, Op::Inter, "sinterstore")
}

fn sunionstore(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    setop_store(ctx, args, Op::Union, "sunionstore")
}

fn sdiffstore(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    setop_store(ctx, args, Op::Diff, "sdiffstore")
}

fn sintercard(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let numkeys = match crate::util::numeric::parse_i64(args[1]) {
        Some(n) if n > 0 => n as usize,
        _ => return Reply::err("ERR numkeys should be greater than 0"),
    };
    if numkeys > args.len() - 2 {
        return Reply::err("ERR Number of keys can't be greater than number of args");
    }
    let mut limit = 0usize;
    let mut j = 2 + numkeys;
    while j < args.len() {
        if crate::commands::is(args[j], "limit") && j + 1 < args.len() {
            match crate::util::numeric::parse_i64(args[j + 1]) {
                Some(n) if n >= 0 => limit = n as usize,
                _ => return Reply::err("ERR LIMIT can't be negative"),
            }
            j += 2;
        } else {
            return errors::SYNTAX;
        }
    }
    match compute(ctx, &args[2..2 + numkeys], Op::Inter, limit) {
        Err(e) => e,
        Ok(m) => Reply::Int(m.len() as i64),
    }
}

fn sscan(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let cursor = match parse_cursor(args[2]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let s = match read_set(ctx, args[1]) {
        Err(e) => return e,
        Ok(None) => return scan_reply(0, Vec::new()),
        Ok(Some(s)) => s,
    };
    let o = match parse_scan_opts(&args[3..], false) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let mut items = Vec::new();
    let next = s.scan(cursor, o.count, |m| {
        if o.pattern.is_none_or(|p| glob_match(p, m, false)) {
            items.push(Reply::bulk(m));
        }
    });
    scan_reply(next, items)
}
