//! Sorted sets: ZADD and friends, ranges in all their spellings, pops, random members,
//! set algebra, ZSCAN.
//!
//! Shapes shared by variants, as in Redis's t_zset.c:
//! - `zrange_generic` serves ZRANGE, ZRANGESTORE and the six older range commands: it
//!   parses into a `RangeSpec` (rank, score or lex; direction; LIMIT; WITHSCORES), turns
//!   the range into an interval of ranks on the type, and either replies or stores.
//! - `pop_generic` serves ZPOPMIN, ZPOPMAX and ZMPOP: it takes the keys, the side and the
//!   count and pops from the first non-empty key. The blocking BZPOPMIN/BZPOPMAX/BZMPOP
//!   call it too, and when every key is missing hand the client to `exec::blocking`,
//!   which re-runs the same handler once a sorted set is written to one of the keys.
//! - `setop_generic` serves ZUNION/ZINTER/ZDIFF, their STORE forms and ZINTERCARD. Input
//!   values are read by `read_setop_input`, one match arm per accepted type, so the set
//!   type becomes an input (every member with score 1) by adding one arm there.
//!
//! The sorted-set internals (encodings, rank index) live in `types::zset`.

use crate::command;
use crate::commands::ctx::{encode_repeated_picks, notify, stream_picks};
use crate::commands::flags::*;
use crate::commands::{arg_i64, errors, is, Command, Ctx, KeySpec};
use crate::exec::blocking::{self, parse_timeout};
use crate::keyspace::{ObjMut, ObjRef, Object, Value, ValueRef};
use crate::protocol::reply::encode_bulk;
use crate::protocol::{PickStream, Reply};
use crate::types::zset::{AddFlags, AddOutcome, LexBound, LexRange, Limits, ScoreRange, ZSet};
use crate::util::numeric::parse_f64;

const RD: &[&str] = &["read", "sortedset", "slow"];
const RDF: &[&str] = &["read", "sortedset", "fast"];
const WR: &[&str] = &["write", "sortedset", "slow"];
const WRF: &[&str] = &["write", "sortedset", "fast"];
const WBF: &[&str] = &["write", "sortedset", "fast", "blocking"];
const WB: &[&str] = &["write", "sortedset", "slow", "blocking"];

/// A row whose keys follow a count argument at `numkeys_at`.
const fn counted(mut c: Command, numkeys_at: i32) -> Command {
    c.first_key = numkeys_at;
    c.last_key = numkeys_at;
    c.step = 1;
    c.key_spec = KeySpec::Counted;
    c.flags |= MOVABLE_KEYS;
    c
}

pub static COMMANDS: &[Command] = &[
    command!("zadd", -4, WRITE | DENYOOM | FAST, (1, 1, 1), WRF, "sorted-set", "1.2.0", "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.", "O(log(N)) for each item added, where N is the number of elements in the sorted set.", zadd),
    command!("zincrby", 4, WRITE | DENYOOM | FAST, (1, 1, 1), WRF, "sorted-set", "1.2.0", "Increments the score of a member in a sorted set.", "O(log(N)) where N is the number of elements in the sorted set.", zincrby),
    command!("zrem", -3, WRITE | FAST, (1, 1, 1), WRF, "sorted-set", "1.2.0", "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.", "O(M*log(N)) with N being the number of elements in the sorted set and M the number of elements to be removed.", zrem),
    command!("zcard", 2, READONLY | FAST, (1, 1, 1), RDF, "sorted-set", "1.2.0", "Returns the number of members in a sorted set.", "O(1)", zcard),
    command!("zscore", 3, READONLY | FAST, (1, 1, 1), RDF, "sorted-set", "1.2.0", "Returns the score of a member in a sorted set.", "O(1)", zscore),
    command!("zmscore", -3, READONLY | FAST, (1, 1, 1), RDF, "sorted-set", "6.2.0", "Returns the score of one or more members in a sorted set.", "O(N) where N is the number of members being requested.", zmscore),
    command!("zrank", -3, READONLY | FAST, (1, 1, 1), RDF, "sorted-set", "2.0.0", "Returns the index of a member in a sorted set ordered by ascending scores.", "O(log(N))", zrank),
    command!("zrevrank", -3, READONLY | FAST, (1, 1, 1), RDF, "sorted-set", "2.0.0", "Returns the index of a member in a sorted set ordered by descending scores.", "O(log(N))", zrevrank),
    command!("zcount", 4, READONLY | FAST, (1, 1, 1), RDF, "sorted-set", "2.0.0", "Returns the count of members in a sorted set that have scores within a range.", "O(log(N)) with N being the number of elements in the sorted set.", zcount),
    command!("zlexcount", 4, READONLY | FAST, (1, 1, 1), RDF, "sorted-set", "2.8.9", "Returns the number of members in a sorted set within a lexicographical range.", "O(log(N)) with N being the number of elements in the sorted set.", zlexcount),
    command!("zrange", -4, READONLY, (1, 1, 1), RD, "sorted-set", "1.2.0", "Returns members in a sorted set within a range of indexes.", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.", zrange),
    command!("zrangestore", -5, WRITE | DENYOOM, (1, 2, 1), WR, "sorted-set", "6.2.0", "Stores a range of members from sorted set in a key.", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements stored into the destination key.", zrangestore),
    command!("zrangebyscore", -4, READONLY, (1, 1, 1), RD, "sorted-set", "1.0.5", "Returns members in a sorted set within a range of scores.", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).", zrangebyscore),
    command!("zrevrangebyscore", -4, READONLY, (1, 1, 1), RD, "sorted-set", "2.2.0", "Returns members in a sorted set within a range of scores in reverse order.", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).", zrevrangebyscore),
    command!("zrangebylex", -4, READONLY, (1, 1, 1), RD, "sorted-set", "2.8.9", "Returns members in a sorted set within a lexicographical range.", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).", zrangebylex),
    command!("zrevrangebylex", -4, READONLY, (1, 1, 1), RD, "sorted-set", "2.8.9", "Returns members in a sorted set within a lexicographical range in reverse order.", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).", zrevrangebylex),
    command!("zrevrange", -4, READONLY, (1, 1, 1), RD, "sorted-set", "1.2.0", "Returns members in a sorted set within a range of indexes in reverse order.", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.", zrevrange),
    command!("zremrangebyrank", 4, WRITE, (1, 1, 1), WR, "sorted-set", "2.0.0", "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.", zremrangebyrank),
    command!("zremrangebyscore", 4, WRITE, (1, 1, 1), WR, "sorted-set", "1.2.0", "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.", zremrangebyscore),
    command!("zremrangebylex", 4, WRITE, (1, 1, 1), WR, "sorted-set", "2.8.9", "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.", zremrangebylex),
    command!("zpopmin", -2, WRITE | FAST, (1, 1, 1), WRF, "sorted-set", "5.0.0", "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.", zpopmin),
    command!("zpopmax", -2, WRITE | FAST, (1, 1, 1), WRF, "sorted-set", "5.0.0", "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.", zpopmax),
    counted(command!("zmpop", -4, WRITE, (1, 1, 1), WR, "sorted-set", "7.0.0", "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.", "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.", zmpop), 1),
    command!("bzpopmin", -3, WRITE | FAST | BLOCKING, (1, -2, 1), WBF, "sorted-set", "5.0.0", "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", "O(log(N)) with N being the number of elements in the sorted set.", bzpopmin),
    command!("bzpopmax", -3, WRITE | FAST | BLOCKING, (1, -2, 1), WBF, "sorted-set", "5.0.0", "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise. Deletes the sorted set if the last element was popped.", "O(log(N)) with N being the number of elements in the sorted set.", bzpopmax),
    counted(command!("bzmpop", -5, WRITE | BLOCKING, (1, 1, 1), WB, "sorted-set", "7.0.0", "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.", bzmpop), 2),
    command!("zrandmember", -2, READONLY, (1, 1, 1), RD, "sorted-set", "6.2.0", "Returns one or more random members from a sorted set.", "O(N) where N is the number of members returned", zrandmember),
    counted(command!("zunion", -3, READONLY, (1, 1, 1), RD, "sorted-set", "6.2.0", "Returns the union of multiple sorted sets.", "O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.", zunion), 1),
    counted(command!("zinter", -3, READONLY, (1, 1, 1), RD, "sorted-set", "6.2.0", "Returns the intersect of multiple sorted sets.", "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.", zinter), 1),
    counted(command!("zdiff", -3, READONLY, (1, 1, 1), RD, "sorted-set", "6.2.0", "Returns the difference between multiple sorted sets.", "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.", zdiff), 1),
    counted(command!("zunionstore", -4, WRITE | DENYOOM, (1, 1, 1), WR, "sorted-set", "2.0.0", "Stores the union of multiple sorted sets in a key.", "O(N)+O(M log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.", zunionstore), 2),
    counted(command!("zinterstore", -4, WRITE | DENYOOM, (1, 1, 1), WR, "sorted-set", "2.0.0", "Stores the intersect of multiple sorted sets in a key.", "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.", zinterstore), 2),
    counted(command!("zdiffstore", -4, WRITE | DENYOOM, (1, 1, 1), WR, "sorted-set", "6.2.0", "Stores the difference of multiple sorted sets in a key.", "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.", zdiffstore), 2),
    counted(command!("zintercard", -3, READONLY, (1, 1, 1), RD, "sorted-set", "7.0.0", "Returns the number of members of the intersect of multiple sorted sets.", "O(N*K) worst case with N being the smallest input sorted set, K being the number of input sorted sets.", zintercard), 1),
    command!("zscan", -3, READONLY, (1, 1, 1), RD, "sorted-set", "2.8.0", "Iterates over members and scores of a sorted set.", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.", zscan),
];

// ----- access helpers -------------------------------------------------------------

pub(crate) fn limits(ctx: &Ctx) -> Limits {
    let c = &ctx.ex.config;
    Limits {
        max_entries: c.zset_max_listpack_entries.max(0) as usize,
        max_value: c.zset_max_listpack_value.max(0) as usize,
    }
}

/// The sorted set at `key` for reading: `Ok(None)` when missing, WRONGTYPE otherwise.
pub(crate) fn read_zset<'c>(ctx: &'c mut Ctx, key: &[u8]) -> Result<Option<&'c ZSet>, Reply> {
    match ctx.lookup_read(key).map(|e| e.value()) {
        None => Ok(None),
        Some(ValueRef::Obj(ObjRef::ZSet(z))) => Ok(Some(z)),
        Some(_) => Err(errors::WRONGTYPE),
    }
}

/// Runs `f` on the sorted set at `key` in place. `Ok(None)` when the key is missing.
/// Returns whether the set is now empty alongside `f`'s result.
fn modify_zset<R>(
    ctx: &mut Ctx,
    key: &[u8],
    f: impl FnOnce(&mut ZSet) -> R,
) -> Result<Option<(R, bool)>, Reply> {
    let Some(mut e) = ctx.lookup_write(key) else {
        return Ok(None);
    };
    match e.object_mut() {
        Some(ObjMut::ZSet(z)) => {
            let r = f(z);
            Ok(Some((r, z.is_empty())))
        }
        _ => Err(errors::WRONGTYPE),
    }
}

/// Bookkeeping after an in-place change: modification hook, the command's event, and
/// deletion of an emptied key.
fn changed(ctx: &mut Ctx, key: &[u8], event: &'static str, emptied: bool) {
    ctx.modified(key);
    ctx.notify(notify::ZSET, event, key);
    if emptied {
        ctx.delete(key);
        ctx.notify(notify::GENERIC, "del", key);
    }
}

fn store(ctx: &mut Ctx, key: &[u8], z: ZSet) {
    ctx.set(key, Value::Obj(Object::ZSet(Box::new(z))), None, false);
}

/// Member/score pairs as Redis replies them: flat in RESP2 (and without scores), as
/// two-element arrays in RESP3 when `nested_in_resp3`.
fn pairs_reply(
    proto: u8,
    items: Vec<(Vec<u8>, f64)>,
    withscores: bool,
    nested_in_resp3: bool,
) -> Reply {
    let mut out = Vec::with_capacity(items.len() * if withscores { 2 } else { 1 });
    for (m, s) in items {
        push_pair(&mut out, proto, m, s, withscores, nested_in_resp3);
    }
    Reply::Array(out)
}

/// Appends one member (and its score) to a reply array as `pairs_reply` lays it out.
fn push_pair(
    out: &mut Vec<Reply>,
    proto: u8,
    m: Vec<u8>,
    s: f64,
    withscores: bool,
    nested_in_resp3: bool,
) {
    if !withscores {
        out.push(Reply::Bulk(m));
    } else if proto >= 3 && nested_in_resp3 {
        out.push(Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)]));
    } else {
        out.push(Reply::Bulk(m));
        out.push(Reply::Double(s));
    }
}

// ----- range parsing --------------------------------------------------------------

/// Parses a score bound as Redis's zslParseRange: `(` makes it exclusive and the rest
/// is read with C's strtod, which skips leading whitespace, stops at a NUL, reads the
/// empty string as 0 and saturates overflow to ±inf. NaN is refused.
fn parse_score_bound(a: &[u8]) -> Option<(f64, bool)> {
    let (ex, t) = match a.split_first() {
        Some((b'(', rest)) => (true, rest),
        _ => (false, a),
    };
    let t = &t[..memchr::memchr(0, t).unwrap_or(t.len())];
    if t.is_empty() {
        return Some((0.0, ex));
    }
    let start = t
        .iter()
        .position(|c| !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))?;
    let t = &t[start..];
    let v = parse_f64(t).or_else(|| {
        // Overflow and underflow, which strtod saturates rather than refuses.
        let v: f64 = std::str::from_utf8(t).ok()?.parse().ok()?;
        let numeric = t.iter().any(u8::is_ascii_digit);
        (numeric && (v.is_infinite() || v == 0.0)).then_some(v)
    })?;
    (!v.is_nan()).then_some((v, ex))
}

fn parse_score_range(min: &[u8], max: &[u8]) -> Result<ScoreRange, Reply> {
    match (parse_score_bound(min), parse_score_bound(max)) {
        (Some((min, min_ex)), Some((max, max_ex))) => Ok(ScoreRange {
            min,
            min_ex,
            max,
            max_ex,
        }),
        _ => Err(Reply::err("ERR min or max is not a float")),
    }
}

fn parse_lex_bound(a: &[u8]) -> Option<LexBound> {
    match a {
        b"-" => Some(LexBound::NegInf),
        b"+" => Some(LexBound::PosInf),
        [b'[', rest @ ..] => Some(LexBound::Incl(rest.to_vec())),
        [b'(', rest @ ..] => Some(LexBound::Excl(rest.to_vec())),
        _ => None,
    }
}

fn parse_lex_range(min: &[u8], max: &[u8]) -> Result<LexRange, Reply> {
    match (parse_lex_bound(min), parse_lex_bound(max)) {
        (Some(min), Some(max)) => Ok(LexRange { min, max }),
        _ => Err(Reply::err("ERR min or max not valid string range item")),
    }
}

/// Clamps a rank range given as inclusive `start`/`end` (negative from the end) to an
/// ascending half-open interval of `len` elements, or `None` when empty.
fn rank_interval(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let n = len as i64;
    let mut start = if start < 0 { n + start } else { start };
    let mut end = if end < 0 { n + end } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= n {
        return None;
    }
    if end >= n {
        end = n - 1;
    }
    Some((start as usize, end as usize + 1))
}

// ----- ZADD, ZINCRBY, ZREM, simple reads --------------------------------------------

fn zadd(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let mut f = AddFlags::default();
    let mut ch = false;
    let mut j = 2;
    while j < args.len() {
        let a = args[j];
        if is(a, "nx") {
            f.nx = true;
        } else if is(a, "xx") {
            f.xx = true;
        } else if is(a, "gt") {
            f.gt = true;
        } else if is(a, "lt") {
            f.lt = true;
        } else if is(a, "ch") {
            ch = true;
        } else if is(a, "incr") {
            f.incr = true;
        } else {
            break;
        }
        j += 1;
    }
    let rest = &args[j..];
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return errors::SYNTAX;
    }
    if f.nx && f.xx {
        return Reply::err("ERR XX and NX options at the same time are not compatible");
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return Reply::err("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if f.incr && rest.len() > 2 {
        return Reply::err("ERR INCR option supports a single increment-element pair");
    }
    let mut pairs = Vec::with_capacity(rest.len() / 2);
    for p in rest.chunks(2) {
        match parse_f64(p[0]) {
            Some(s) => pairs.push((s, p[1])),
            None => return errors::NOT_FLOAT,
        }
    }
    zadd_generic(ctx, args[1], &pairs, f, ch)
}

/// ZADD and ZINCRBY after parsing.
pub(crate) fn zadd_generic(
    ctx: &mut Ctx,
    key: &[u8],
    pairs: &[(f64, &[u8])],
    f: AddFlags,
    ch: bool,
) -> Reply {
    let lim = limits(ctx);
    let apply = |z: &mut ZSet| {
        z.prepare_for(pairs.len(), lim);
        let (mut added, mut updated, mut processed) = (0i64, 0i64, 0i64);
        let mut last = 0.0;
        for &(score, member) in pairs {
            match z.add(member, score, f, lim) {
                AddOutcome::NaN => return Err((added, updated)),
                AddOutcome::Added(s) => {
                    added += 1;
                    processed += 1;
                    last = s;
                }
                AddOutcome::Updated(s) => {
                    updated += 1;
                    processed += 1;
                    last = s;
                }
                AddOutcome::Same(s) => {
                    processed += 1;
                    last = s;
                }
                AddOutcome::Nop => {}
            }
        }
        Ok((added, updated, processed, last))
    };
    let result = match modify_zset(ctx, key, apply) {
        Err(e) => return e,
        Ok(Some((r, _))) => r,
        Ok(None) if f.xx => Ok((0, 0, 0, 0.0)),
        Ok(None) => {
            let max_len = pairs.iter().map(|p| p.1.len()).max().unwrap_or(0);
            let mut z = ZSet::with_hint(pairs.len(), max_len, lim);
            let r = apply(&mut z);
            if !z.is_empty() {
                store(ctx, key, z);
            }
            r
        }
    };
    let event = if f.incr { "zincr" } else { "zadd" };
    match result {
        Err((added, updated)) => {
            if added + updated > 0 {
                changed(ctx, key, event, false);
            }
            Reply::err("ERR resulting score is not a number (NaN)")
        }
        Ok((added, updated, processed, last)) => {
            if added + updated > 0 {
                changed(ctx, key, event, false);
            }
            if f.incr {
                if processed > 0 {
                    Reply::Double(last)
                } else {
                    Reply::Null
                }
            } else {
                Reply::Int(if ch { added + updated } else { added })
            }
        }
    }
}

fn zincrby(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    // Redis parses ZINCRBY as a ZADD INCR, options included: an option word where the
    // increment goes leaves too few arguments for a pair.
    if ["nx", "xx", "ch", "incr", "gt", "lt"]
        .iter()
        .any(|o| is(args[2], o))
    {
        return errors::SYNTAX;
    }
    let Some(incr) = parse_f64(args[2]) else {
        return errors::NOT_FLOAT;
    };
    let f = AddFlags {
        incr: true,
        ..AddFlags::default()
    };
    zadd_generic(ctx, args[1], &[(incr, args[3])], f, false)
}

fn zrem(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let r = modify_zset(ctx, args[1], |z| {
        args[2..].iter().filter(|m| z.remove(m)).count() as i64
    });
    match r {
        Err(e) => e,
        Ok(None) => Reply::Int(0),
        Ok(Some((n, emptied))) => {
            if n > 0 {
                changed(ctx, args[1], "zrem", emptied);
            }
            Reply::Int(n)
        }
    }
}

fn zcard(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match read_zset(ctx, args[1]) {
        Err(e) => e,
        Ok(z) => Reply::Int(z.map_or(0, |z| z.len() as i64)),
    }
}

fn zscore(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match read_zset(ctx, args[1]) {
        Err(e) => e,
        Ok(z) => z
            .and_then(|z| z.score(args[2]))
            .map_or(Reply::Null, Reply::Double),
    }
}

fn zmscore(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match read_zset(ctx, args[1]) {
        Err(e) => e,
        Ok(z) => Reply::Array(
            args[2..]
                .iter()
                .map(|m| {
                    z.and_then(|z| z.score(m))
                        .map_or(Reply::Null, Reply::Double)
                })
                .collect(),
        ),
    }
}

fn zrank_generic(ctx: &mut Ctx, args: &[&[u8]], rev: bool) -> Reply {
    if args.len() > 4 {
        return crate::commands::wrong_arity(ctx.cmd.name);
    }
    let withscore = match args.get(3) {
        None => false,
        Some(a) if is(a, "withscore") => true,
        Some(_) => return errors::SYNTAX,
    };
    let missing = if withscore {
        Reply::NullArray
    } else {
        Reply::Null
    };
    match read_zset(ctx, args[1]) {
        Err(e) => e,
        Ok(z) => match z.and_then(|z| z.rank(args[2], rev)) {
            None => missing,
            Some((r, s)) if withscore => Reply::Array(vec![Reply::Int(r as i64), Reply::Double(s)]),
            Some((r, _)) => Reply::Int(r as i64),
        },
    }
}

fn zrank(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    zrank_generic(ctx, args, false)
}

fn zrevrank(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    zrank_generic(ctx, args, true)
}

fn zcount(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let r = match parse_score_range(args[2], args[3]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    match read_zset(ctx, args[1]) {
        Err(e) => e,
        Ok(z) => Reply::Int(z.map_or(0, |z| {
            let (a, b) = z.score_ranks(&r);
            (b - a) as i64
        })),
    }
}

fn zlexcount(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let r = match parse_lex_range(args[2], args[3]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    match read_zset(ctx, args[1]) {
        Err(e) => e,
        Ok(z) => Reply::Int(z.map_or(0, |z| {
            let (a, b) = z.lex_ranks(&r);
            (b - a) as i64
        })),
    }
}

// ----- ZRANGE and its variants ------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Rank,
    Score,
    Lex,
}

/// Finds the ascending rank interval a parsed range selects, after REV, LIMIT.
enum Bounds {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

/// Which command variant is parsing: preset range type and direction, or free (ZRANGE).
struct Variant {
    by: Option<By>,
    rev: Option<bool>,
    store: bool,
}

/// The shared implementation of ZRANGE, ZRANGESTORE and the older range commands.
/// `at` is the index of the source key in `args`.
fn zrange_generic(ctx: &mut Ctx, args: &[&[u8]], at: usize, v: Variant) -> Reply {
    let (mut by, mut rev) = (v.by, v.rev);
    let mut withscores = false;
    let (mut offset, mut limit): (i64, i64) = (0, -1);
    let mut j = at + 3;
    while j < args.len() {
        let a = args[j];
        let left = args.len() - j - 1;
        if !v.store && is(a, "withscores") {
            withscores = true;
        } else if is(a, "limit") && left >= 2 {
            match (arg_i64(args[j + 1]), arg_i64(args[j + 2])) {
                (Ok(o), Ok(l)) => {
                    offset = o;
                    limit = l;
                }
                (Err(e), _) | (_, Err(e)) => return e,
            }
            j += 2;
        } else if rev.is_none() && is(a, "rev") {
            rev = Some(true);
        } else if by.is_none() && is(a, "bylex") {
            by = Some(By::Lex);
        } else if by.is_none() && is(a, "byscore") {
            by = Some(By::Score);
        } else {
            return errors::SYNTAX;
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    let by = by.unwrap_or(By::Rank);
    // A LIMIT whose count is -1 (everything) is no limit at all, so a rank range
    // accepts it, as Redis's zrangeGenericCommand does.
    if limit != -1 && by == By::Rank {
        return Reply::err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    if withscores && by == By::Lex {
        return Reply::err("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    }
    // Score and lex ranges are given as max, min when reversed.
    let (lo, hi) = if rev && by != By::Rank {
        (args[at + 2], args[at + 1])
    } else {
        (args[at + 1], args[at + 2])
    };
    let bounds = match by {
        By::Rank => match (arg_i64(lo), arg_i64(hi)) {
            (Ok(a), Ok(b)) => Bounds::Rank(a, b),
            (Err(e), _) | (_, Err(e)) => return e,
        },
        By::Score => match parse_score_range(lo, hi) {
            Ok(r) => Bounds::Score(r),
            Err(e) => return e,
        },
        By::Lex => match parse_lex_range(lo, hi) {
            Ok(r) => Bounds::Lex(r),
            Err(e) => return e,
        },
    };
    if v.store {
        let mut items = Vec::new();
        match read_zset(ctx, args[at]) {
            Err(e) => return e,
            Ok(None) => {}
            Ok(Some(z)) => range_walk(z, &bounds, rev, offset, limit, |m, s| {
                items.push((m.to_vec(), s))
            }),
        }
        let dst = args[1];
        let n = items.len() as i64;
        store_result(ctx, dst, items, "zrangestore");
        Reply::Int(n)
    } else {
        // The reply is built straight from the walk: no intermediate pair list.
        let proto = ctx.proto();
        let mut out = Vec::new();
        match read_zset(ctx, args[at]) {
            Err(e) => return e,
            Ok(None) => {}
            Ok(Some(z)) => range_walk(z, &bounds, rev, offset, limit, |m, s| {
                push_pair(&mut out, proto, m.to_vec(), s, withscores, true)
            }),
        }
        Reply::Array(out)
    }
}

/// Calls `f` for the members a range selects, in reply order. Score and lex ranges
/// walk from their first member and stop at the range's end or the LIMIT.
fn range_walk(
    z: &ZSet,
    b: &Bounds,
    rev: bool,
    offset: i64,
    limit: i64,
    mut f: impl FnMut(&[u8], f64),
) {
    let len = z.len();
    match b {
        Bounds::Rank(a, e) => match rank_interval(*a, *e, len) {
            // Reverse ranks count from the top.
            Some((s, e)) if rev => z.for_each_rank(len - e, len - s, rev, &mut f),
            Some((s, e)) => z.for_each_rank(s, e, rev, &mut f),
            None => {}
        },
        _ => {
            // LIMIT: a negative offset selects nothing, a negative count everything.
            let Ok(off) = usize::try_from(offset) else {
                return;
            };
            let lim = usize::try_from(limit).ok();
            match b {
                Bounds::Score(r) => z.walk_score_range(r, rev, off, lim, f),
                Bounds::Lex(r) => z.walk_lex_range(r, rev, off, lim, f),
                Bounds::Rank(..) => unreachable!("handled above"),
            }
        }
    }
}

/// Stores a result set at `dst` (deleting it when the result is empty), choosing the
/// encoding from the result's size as Redis does, and raises `event`.
pub(crate) fn store_result(
    ctx: &mut Ctx,
    dst: &[u8],
    items: Vec<(Vec<u8>, f64)>,
    event: &'static str,
) {
    if items.is_empty() {
        if ctx.delete(dst) {
            ctx.notify(notify::GENERIC, "del", dst);
        }
        return;
    }
    let lim = limits(ctx);
    let max_len = items.iter().map(|i| i.0.len()).max().unwrap_or(0);
    let mut z = ZSet::with_hint(items.len(), max_len, lim);
    for (m, s) in &items {
        z.set(m, *s, lim);
    }
    store(ctx, dst, z);
    ctx.notify(notify::ZSET, event, dst);
}

fn zrange(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let v = Variant {
        by: None,
        rev: None,
        store: false,
    };
    zrange_generic(ctx, args, 1, v)
}

fn zrangestore(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let v = Variant {
        by: None,
        rev: None,
        store: true,
    };
    zrange_generic(ctx, args, 2, v)
}

fn old_range(ctx: &mut Ctx, args: &[&[u8]], by: By, rev: bool) -> Reply {
    let v = Variant {
        by: Some(by),
        rev: Some(rev),
        store: false,
    };
    zrange_generic(ctx, args, 1, v)
}

fn zrangebyscore(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    old_range(ctx, args, By::Score, false)
}

fn zrevrangebyscore(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    old_range(ctx, args, By::Score, true)
}

fn zrangebylex(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    old_range(ctx, args, By::Lex, false)
}

fn zrevrangebylex(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    old_range(ctx, args, By::Lex, true)
}

fn zrevrange(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    old_range(ctx, args, By::Rank, true)
}

// ----- ZREMRANGEBY* ---------------------------------------------------------------

fn zremrange_generic(ctx: &mut Ctx, args: &[&[u8]], by: By) -> Reply {
    let bounds = match by {
        By::Rank => match (arg_i64(args[2]), arg_i64(args[3])) {
            (Ok(a), Ok(b)) => Bounds::Rank(a, b),
            (Err(e), _) | (_, Err(e)) => return e,
        },
        By::Score => match parse_score_range(args[2], args[3]) {
            Ok(r) => Bounds::Score(r),
            Err(e) => return e,
        },
        By::Lex => match parse_lex_range(args[2], args[3]) {
            Ok(r) => Bounds::Lex(r),
            Err(e) => return e,
        },
    };
    let r = modify_zset(ctx, args[1], |z| {
        let (s, e) = match &bounds {
            Bounds::Rank(a, b) => rank_interval(*a, *b, z.len()).unwrap_or((0, 0)),
            Bounds::Score(r) => z.score_ranks(r),
            Bounds::Lex(r) => z.lex_ranks(r),
        };
        z.remove_ranks(s, e) as i64
    });
    let event = match by {
        By::Rank => "zremrangebyrank",
        By::Score => "zremrangebyscore",
        By::Lex => "zremrangebylex",
    };
    match r {
        Err(e) => e,
        Ok(None) => Reply::Int(0),
        Ok(Some((n, emptied))) => {
            if n > 0 {
                changed(ctx, args[1], event, emptied);
            }
            Reply::Int(n)
        }
    }
}

fn zremrangebyrank(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    zremrange_generic(ctx, args, By::Rank)
}

fn zremrangebyscore(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    zremrange_generic(ctx, args, By::Score)
}

fn zremrangebylex(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    zremrange_generic(ctx, args, By::Lex)
}

// ----- pops -----------------------------------------------------------------------

/// What a pop found.
pub enum Popped {
    /// No key held members.
    Empty,
    /// The key popped from and its members in pop order.
    From(Vec<u8>, Vec<(Vec<u8>, f64)>),
}

/// Pops up to `count` members from the low (`max` false) or high end of the first
/// non-empty sorted set among `keys`, deleting a key it empties, with notifications.
/// A WRONGTYPE key stops the search with an error, as in Redis. Shared by ZPOPMIN,
/// ZPOPMAX and ZMPOP; the blocking variants call it once a key is ready.
pub fn pop_generic(
    ctx: &mut Ctx,
    keys: &[&[u8]],
    max: bool,
    count: usize,
) -> Result<Popped, Reply> {
    for &key in keys {
        let r = modify_zset(ctx, key, |z| z.pop(count, max))?;
        if let Some((items, emptied)) = r {
            if items.is_empty() {
                continue;
            }
            changed(ctx, key, if max { "zpopmax" } else { "zpopmin" }, emptied);
            return Ok(Popped::From(key.to_vec(), items));
        }
    }
    Ok(Popped::Empty)
}

fn zpop_command(ctx: &mut Ctx, args: &[&[u8]], max: bool) -> Reply {
    if args.len() > 3 {
        return errors::SYNTAX;
    }
    let count = match args.get(2) {
        None => None,
        Some(a) => match crate::commands::arg_positive(a, None) {
            Ok(n) => Some(n as usize),
            Err(e) => return e,
        },
    };
    // A count of 0 still checks the key's type first (WRONGTYPE), as Redis does;
    // pop_generic then finds nothing to pop and the reply is the empty array.
    match pop_generic(ctx, &args[1..2], max, count.unwrap_or(1)) {
        Err(e) => e,
        Ok(Popped::Empty) => Reply::Array(Vec::new()),
        // Without a count the pair is flat even in RESP3.
        Ok(Popped::From(_, items)) => pairs_reply(ctx.proto(), items, true, count.is_some()),
    }
}

fn zpopmin(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    zpop_command(ctx, args, false)
}

fn zpopmax(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    zpop_command(ctx, args, true)
}

/// Parses `numkeys key... MIN|MAX [COUNT n]` from `args[at]` (ZMPOP; BZMPOP after
/// its timeout): the keys, the side and the count.
pub fn parse_mpop<'a>(args: &[&'a [u8]], at: usize) -> Result<(Vec<&'a [u8]>, bool, usize), Reply> {
    // Redis reports a non-integer numkeys with the range message too.
    let numkeys = match arg_i64(args[at]) {
        Ok(n) if n > 0 => n,
        _ => return Err(Reply::err("ERR numkeys should be greater than 0")),
    };
    let first = at + 1;
    let numkeys = numkeys as usize;
    if numkeys > args.len() - first {
        return Err(errors::SYNTAX);
    }
    let keys = args[first..first + numkeys].to_vec();
    let mut j = first + numkeys;
    let max = match args.get(j) {
        Some(a) if is(a, "min") => false,
        Some(a) if is(a, "max") => true,
        _ => return Err(errors::SYNTAX),
    };
    j += 1;
    let mut count = None;
    while j < args.len() {
        if count.is_none() && is(args[j], "count") && j + 1 < args.len() {
            match arg_i64(args[j + 1]) {
                Ok(n) if n > 0 => count = Some(n as usize),
                _ => return Err(Reply::err("ERR count should be greater than 0")),
            }
            j += 2;
        } else {
            return Err(errors::SYNTAX);
        }
    }
    Ok((keys, max, count.unwrap_or(1)))
}

/// The `[key, [[member, score], ...]]` reply of ZMPOP (and BZMPOP).
pub fn mpop_reply(proto: u8, popped: Popped) -> Reply {
    match popped {
        Popped::Empty => Reply::NullArray,
        Popped::From(key, items) => {
            let items = items
                .into_iter()
                .map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)]))
                .collect();
            let _ = proto;
            Reply::Array(vec![Reply::Bulk(key), Reply::Array(items)])
        }
    }
}

fn zmpop(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (keys, max, count) = match parse_mpop(args, 1) {
        Ok(p) => p,
        Err(e) => return e,
    };
    match pop_generic(ctx, &keys, max, count) {
        Err(e) => e,
        Ok(p) => mpop_reply(ctx.proto(), p),
    }
}

// ----- blocking pops --------------------------------------------------------------

/// BZPOPMIN/BZPOPMAX: `[key, member, score]` from the first non-empty key, or block.
/// The timeout is checked before any key, as in Redis.
fn bzpop_command(ctx: &mut Ctx, args: &[&[u8]], max: bool) -> Reply {
    let deadline = match parse_timeout(args[args.len() - 1]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    let keys = &args[1..args.len() - 1];
    match pop_generic(ctx, keys, max, 1) {
        Err(e) => e,
        Ok(Popped::From(key, mut items)) => {
            let (member, score) = items.swap_remove(0);
            Reply::Array(vec![
                Reply::Bulk(key),
                Reply::Bulk(member),
                Reply::Double(score),
            ])
        }
        Ok(Popped::Empty) => blocking::block(ctx, args, keys, "zset", deadline, Reply::NullArray),
    }
}

fn bzpopmin(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    bzpop_command(ctx, args, false)
}

fn bzpopmax(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    bzpop_command(ctx, args, true)
}

/// BZMPOP: the arguments after the timeout are checked first, then the timeout.
fn bzmpop(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (keys, max, count) = match parse_mpop(args, 2) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let deadline = match parse_timeout(args[1]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    match pop_generic(ctx, &keys, max, count) {
        Err(e) => e,
        Ok(Popped::Empty) => blocking::block(ctx, args, &keys, "zset", deadline, Reply::NullArray),
        Ok(p) => mpop_reply(ctx.proto(), p),
    }
}

// ----- ZRANDMEMBER ----------------------------------------------------------------

fn zrandmember(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let Some(count_arg) = args.get(2) else {
        return match read_zset(ctx, args[1]) {
            Err(e) => e,
            Ok(None) => Reply::Null,
            Ok(Some(z)) => {
                let r = fastrand::usize(..z.len());
                z.at_rank(r).map_or(Reply::Null, |(m, _)| Reply::Bulk(m))
            }
        };
    };
    // The count is judged before the rest of the syntax, as Redis's zrandmemberCommand.
    let l = match super::hashes::parse_rand_count(count_arg) {
        Ok(l) => l,
        Err(e) => return e,
    };
    let withscores = match args.get(3) {
        None => false,
        Some(a) if args.len() == 4 && is(a, "withscores") => true,
        Some(_) => return errors::SYNTAX,
    };
    if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
        return Reply::err("ERR value is out of range");
    }
    let proto = ctx.proto();
    let room = ctx.reply_room();
    let may_stream = ctx.may_stream_reply();
    let z = match read_zset(ctx, args[1]) {
        Err(e) => return e,
        Ok(None) => return Reply::Array(Vec::new()),
        Ok(Some(z)) => z,
    };
    let len = z.len();
    // One pick: the member, and its score (a pair of its own in RESP3).
    let encode_pick = |m: &[u8], s: f64, b: &mut Vec<u8>| {
        if withscores && proto >= 3 {
            b.extend_from_slice(b"*2\r\n");
        }
        encode_bulk(m, b);
        if withscores {
            Reply::Double(s).encode(proto, b);
        }
    };
    let items: Vec<(Vec<u8>, f64)> = if l < 0 {
        // Repetitions allowed: independent picks.
        let picks = l.unsigned_abs();
        let elems_per_pick = if withscores && proto < 3 { 2 } else { 1 };
        if stream_picks(may_stream, picks, len) {
            let mut stream = PickStream::new(picks * elems_per_pick as u64, picks);
            z.for_each(|m, s| stream.add_candidate(|b| encode_pick(m, s, b)));
            return Reply::Picks(Box::new(stream));
        }
        let reply = encode_repeated_picks(picks, elems_per_pick, room, |b| {
            match z.at_rank(fastrand::usize(..len)) {
                Some((m, s)) => {
                    encode_pick(&m, s, b);
                    true
                }
                None => false,
            }
        });
        return reply.unwrap_or_else(|| ctx.output_limit_reached());
    } else if l as u64 >= len as u64 {
        let mut all = Vec::with_capacity(len);
        z.for_each(|m, s| all.push((m.to_vec(), s)));
        all
    } else {
        // Distinct picks: a partial Fisher-Yates over ranks.
        let n = l as usize;
        let mut ranks: Vec<usize> = (0..len).collect();
        for i in 0..n {
            let j = fastrand::usize(i..len);
            ranks.swap(i, j);
        }
        ranks[..n].iter().filter_map(|&r| z.at_rank(r)).collect()
    };
    pairs_reply(proto, items, withscores, true)
}

// ----- ZUNION, ZINTER, ZDIFF, ZINTERCARD --------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// One input of a set operation, as (member, score) pairs in the input's order.
type Input = Vec<(Vec<u8>, f64)>;

/// Reads every input key of ZUNION/ZINTER/ZDIFF/ZINTERCARD, stopping at the first
/// of the wrong type.
fn read_setop_inputs(ctx: &mut Ctx, keys: &[&[u8]]) -> Result<Vec<Input>, Reply> {
    keys.iter().map(|k| read_setop_input(ctx, k)).collect()
}

/// Reads one input key of ZUNION/ZINTER/ZDIFF. Each accepted type is one arm: a sorted
/// set gives its members and scores; a plain set (once the set type exists) is added as
/// one more arm giving every member with score 1. Anything else is WRONGTYPE.
fn read_setop_input(ctx: &mut Ctx, key: &[u8]) -> Result<Input, Reply> {
    match ctx.lookup_read(key).map(|e| e.value()) {
        None => Ok(Vec::new()),
        Some(ValueRef::Obj(ObjRef::ZSet(z))) => {
            let mut v = Vec::with_capacity(z.len());
            z.for_each(|m, s| v.push((m.to_vec(), s)));
            Ok(v)
        }
        // Plain sets take part with every member scored 1, as in Redis.
        Some(ValueRef::Obj(ObjRef::Set(s))) => {
            let mut v = Vec::with_capacity(s.len());
            s.for_each(|m| v.push((m.to_vec(), 1.0)));
            Ok(v)
        }
        Some(_) => Err(errors::WRONGTYPE),
    }
}

fn aggregate(a: Aggregate, x: f64, y: f64) -> f64 {
    match a {
        // inf + -inf is NaN; Redis stores 0 instead.
        Aggregate::Sum => {
            let s = x + y;
            if s.is_nan() {
                0.0
            } else {
                s
            }
        }
        Aggregate::Min => x.min(y),
        Aggregate::Max => x.max(y),
    }
}

/// Weighted score, with Redis's rule that NaN (0 * inf) becomes 0.
fn weighted(s: f64, w: f64) -> f64 {
    let v = s * w;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

/// The shared implementation of ZUNION, ZINTER, ZDIFF and their STORE forms.
/// `dst` is the destination for the STORE forms; `at` is the numkeys index.
fn setop_generic(ctx: &mut Ctx, args: &[&[u8]], at: usize, dst: Option<&[u8]>, op: SetOp) -> Reply {
    let numkeys = match arg_i64(args[at]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    if numkeys < 1 {
        let name = ctx.cmd.name;
        return Reply::error(format!(
            "ERR at least 1 input key is needed for '{name}' command"
        ));
    }
    let numkeys = numkeys as usize;
    if numkeys > args.len() - at - 1 {
        return errors::SYNTAX;
    }
    // Every input is read (WRONGTYPE) before the options are parsed, as in Redis.
    let inputs = match read_setop_inputs(ctx, &args[at + 1..at + 1 + numkeys]) {
        Ok(inputs) => inputs,
        Err(e) => return e,
    };
    let mut weights = vec![1.0; numkeys];
    let mut agg = Aggregate::Sum;
    let mut withscores = false;
    let mut j = at + 1 + numkeys;
    while j < args.len() {
        let left = args.len() - j - 1;
        if op != SetOp::Diff && is(args[j], "weights") && left >= numkeys {
            for (k, w) in weights.iter_mut().enumerate() {
                match parse_f64(args[j + 1 + k]) {
                    Some(v) => *w = v,
                    None => return Reply::err("ERR weight value is not a float"),
                }
            }
            j += numkeys;
        } else if op != SetOp::Diff && is(args[j], "aggregate") && left >= 1 {
            let a = args[j + 1];
            agg = if is(a, "sum") {
                Aggregate::Sum
            } else if is(a, "min") {
                Aggregate::Min
            } else if is(a, "max") {
                Aggregate::Max
            } else {
                return errors::SYNTAX;
            };
            j += 1;
        } else if dst.is_none() && is(args[j], "withscores") {
            withscores = true;
        } else {
            return errors::SYNTAX;
        }
        j += 1;
    }
    let result = compute_setop(inputs, &weights, agg, op);
    match dst {
        Some(d) => {
            let n = result.len() as i64;
            let event = match op {
                SetOp::Union => "zunionstore",
                SetOp::Inter => "zinterstore",
                SetOp::Diff => "zdiffstore",
            };
            store_result(ctx, d, result, event);
            Reply::Int(n)
        }
        None => pairs_reply(ctx.proto(), result, withscores, true),
    }
}

/// Combines the inputs; the result is sorted by (score, member).
fn compute_setop(inputs: Vec<Input>, weights: &[f64], agg: Aggregate, op: SetOp) -> Input {
    use std::collections::hash_map::Entry;
    let mut acc: std::collections::HashMap<Vec<u8>, f64, foldhash::fast::RandomState> =
        Default::default();
    match op {
        SetOp::Union => {
            for (input, &w) in inputs.into_iter().zip(weights) {
                for (m, s) in input {
                    let v = weighted(s, w);
                    match acc.entry(m) {
                        Entry::Occupied(mut e) => {
                            let cur = *e.get();
                            *e.get_mut() = aggregate(agg, cur, v);
                        }
                        Entry::Vacant(e) => {
                            e.insert(v);
                        }
                    }
                }
            }
        }
        SetOp::Inter => {
            let mut it = inputs.into_iter().zip(weights);
            if let Some((first, &w)) = it.next() {
                for (m, s) in first {
                    acc.insert(m, weighted(s, w));
                }
            }
            for (input, &w) in it {
                let mut next: std::collections::HashMap<Vec<u8>, f64, foldhash::fast::RandomState> =
                    Default::default();
                for (m, s) in input {
                    if let Some(cur) = acc.remove(&m) {
                        next.insert(m, aggregate(agg, cur, weighted(s, w)));
                    }
                }
                acc = next;
                if acc.is_empty() {
                    break;
                }
            }
        }
        SetOp::Diff => {
            let mut it = inputs.into_iter();
            if let Some(first) = it.next() {
                acc.extend(first);
            }
            for input in it {
                for (m, _) in input {
                    acc.remove(&m);
                }
            }
        }
    }
    let mut out: Input = acc.into_iter().collect();
    out.sort_by(|a, b| crate::types::zindex::cmp_keys((a.1, &a.0), (b.1, &b.0)));
    out
}

fn zunion(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    setop_generic(ctx, args, 1, None, SetOp::Union)
}

fn zinter(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    setop_generic(ctx, args, 1, None, SetOp::Inter)
}

fn zdiff(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    setop_generic(ctx, args, 1, None, SetOp::Diff)
}

fn zunionstore(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    setop_generic(ctx, args, 2, Some(args[1]), SetOp::Union)
}

fn zinterstore(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    setop_generic(ctx, args, 2, Some(args[1]), SetOp::Inter)
}

fn zdiffstore(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    setop_generic(ctx, args, 2, Some(args[1]), SetOp::Diff)
}

fn zintercard(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let numkeys = match arg_i64(args[1]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    if numkeys < 1 {
        return Reply::err("ERR at least 1 input key is needed for 'zintercard' command");
    }
    let numkeys = numkeys as usize;
    if numkeys > args.len() - 2 {
        return errors::SYNTAX;
    }
    let inputs = match read_setop_inputs(ctx, &args[2..2 + numkeys]) {
        Ok(inputs) => inputs,
        Err(e) => return e,
    };
    let mut limit = 0usize;
    let mut j = 2 + numkeys;
    while j < args.len() {
        if is(args[j], "limit") && j + 1 < args.len() {
            match arg_i64(args[j + 1]) {
                Ok(n) if n >= 0 => limit = n as usize,
                _ => return Reply::err("ERR LIMIT can't be negative"),
            }
            j += 2;
        } else {
            return errors::SYNTAX;
        }
    }
    let weights = vec![1.0; numkeys];
    let n = compute_setop(inputs, &weights, Aggregate::Sum, SetOp::Inter).len();
    Reply::Int(if limit > 0 { n.min(limit) } else { n } as i64)
}

// ----- ZSCAN ----------------------------------------------------------------------

fn zscan(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let cursor = match super::keys::parse_cursor(args[2]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    // A missing key answers the empty scan, and a wrong type WRONGTYPE, before the
    // options are read (Redis's zscanCommand looks the key up first).
    let z = match read_zset(ctx, args[1]) {
        Err(e) => return e,
        Ok(None) => return super::hashes::scan_reply(0, Vec::new()),
        Ok(Some(z)) => z,
    };
    let o = match super::hashes::parse_scan_opts(&args[3..], false) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let (pattern, count) = (o.pattern, o.count);
    let mut items = Vec::new();
    // ZSCAN reports scores as bulk strings in both protocols: a listpack holds each
    // score as the text Redis 7.4 stored it with (`d2string`, as double replies
    // print), a skiplist's scores are printed with `%.17g` (`ld2string`'s auto mode).
    let format: fn(f64) -> String = if z.encoding() == "listpack" {
        crate::util::numeric::format_f64
    } else {
        crate::util::numeric::format_f64_17g
    };
    let next = z.scan(cursor, count.min(1 << 20), |m, s| {
        if pattern.is_none_or(|p| crate::util::glob::glob_match(p, m, false)) {
            items.push(Reply::Bulk(m.to_vec()));
            items.push(Reply::Bulk(format(s).into_bytes()));
        }
    });
    super::hashes::scan_reply(next, items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_bounds_follow_strtod() {
        assert_eq!(parse_score_bound(b"("), Some((0.0, true)));
        assert_eq!(parse_score_bound(b""), Some((0.0, false)));
        assert_eq!(parse_score_bound(b" 1"), Some((1.0, false)));
        assert_eq!(parse_score_bound(b"(1.5"), Some((1.5, true)));
        assert_eq!(parse_score_bound(b"0x10"), Some((16.0, false)));
        assert_eq!(parse_score_bound(b"1e400"), Some((f64::INFINITY, false)));
        assert_eq!(parse_score_bound(b"-inf"), Some((f64::NEG_INFINITY, false)));
        assert_eq!(parse_score_bound(b"1e"), None);
        assert_eq!(parse_score_bound(b"nan"), None);
        assert_eq!(parse_score_bound(b"  "), None);
        assert_eq!(parse_score_bound(b"1 "), None);
    }

    #[test]
    fn rank_intervals() {
        assert_eq!(rank_interval(0, -1, 3), Some((0, 3)));
        assert_eq!(rank_interval(-100, 100, 3), Some((0, 3)));
        assert_eq!(rank_interval(2, 1, 3), None);
        assert_eq!(rank_interval(3, 5, 3), None);
        assert_eq!(rank_interval(0, 0, 0), None);
    }
}
