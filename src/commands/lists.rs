//! Lists: pushes and pops at both ends, positional access, LPOS, LMOVE, LMPOP, and
//! the blocking forms BLPOP, BRPOP, BLMOVE, BRPOPLPUSH and BLMPOP.
//!
//! Variants share generic helpers as in Redis's `t_list.c`: `push_generic` serves
//! LPUSH/RPUSH/LPUSHX/RPUSHX, `pop_generic` LPOP/RPOP, `lmove_generic` LMOVE,
//! RPOPLPUSH and their blocking forms, `mpop_generic` LMPOP and BLMPOP. A blocking
//! command tries its non-blocking form first and otherwise hands the client to
//! `exec::blocking` (which re-runs the very same handler when a key is pushed to).
//! The list's encoding (`listpack` / `quicklist`) lives in `types::list`.

use crate::command;
use crate::commands::ctx::notify;
use crate::commands::flags::*;
use crate::commands::{arg_i64, arg_in_range, arg_positive, errors, is, Command, Ctx, KeySpec};
use crate::exec::blocking::{self, parse_timeout};
use crate::keyspace::{ObjMut, ObjRef, Object, Value, ValueRef};
use crate::protocol::Reply;
use crate::types::list::{Elem, End, List, Packing};

const W: &[&str] = &["write", "list", "slow"];
const WF: &[&str] = &["write", "list", "fast"];
const R: &[&str] = &["read", "list", "slow"];
const WB: &[&str] = &["write", "list", "slow", "blocking"];

pub static COMMANDS: &[Command] = &[
    command!("lpush", -3, WRITE | DENYOOM | FAST, (1, 1, 1), WF, "list", "1.0.0", "Prepends one or more elements to a list. Creates the key if it doesn't exist.", "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.", lpush),
    command!("rpush", -3, WRITE | DENYOOM | FAST, (1, 1, 1), WF, "list", "1.0.0", "Appends one or more elements to a list. Creates the key if it doesn't exist.", "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.", rpush),
    command!("lpushx", -3, WRITE | DENYOOM | FAST, (1, 1, 1), WF, "list", "2.2.0", "Prepends one or more elements to a list only when the list exists.", "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.", lpushx),
    command!("rpushx", -3, WRITE | DENYOOM | FAST, (1, 1, 1), WF, "list", "2.2.0", "Appends an element to a list only when the list exists.", "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.", rpushx),
    command!("lpop", -2, WRITE | FAST, (1, 1, 1), WF, "list", "1.0.0", "Returns the first elements in a list after removing it. Deletes the list if the last element was popped.", "O(N) where N is the number of elements returned", lpop),
    command!("rpop", -2, WRITE | FAST, (1, 1, 1), WF, "list", "1.0.0", "Returns and removes the last elements of the list. Deletes the list if the last element was popped.", "O(N) where N is the number of elements returned", rpop),
    command!("llen", 2, READONLY | FAST, (1, 1, 1), &["read", "list", "fast"], "list", "1.0.0", "Returns the length of a list.", "O(1)", llen),
    command!("lrange", 4, READONLY, (1, 1, 1), R, "list", "1.0.0", "Returns a range of elements from a list.", "O(S+N) where S is the distance of start offset from HEAD for small lists, from nearest end (HEAD or TAIL) for large lists; and N is the number of elements in the specified range.", lrange),
    command!("lindex", 3, READONLY, (1, 1, 1), R, "list", "1.0.0", "Returns an element from a list by its index.", "O(N) where N is the number of elements to traverse to get to the element at index. This makes asking for the first or the last element of the list O(1).", lindex),
    command!("lset", 4, WRITE | DENYOOM, (1, 1, 1), W, "list", "1.0.0", "Sets the value of an element in a list by its index.", "O(N) where N is the length of the list. Setting either the first or the last element of the list is O(1).", lset),
    command!("linsert", 5, WRITE | DENYOOM, (1, 1, 1), W, "list", "2.2.0", "Inserts an element before or after another element in a list.", "O(N) where N is the number of elements to traverse before seeing the value pivot. This means that inserting somewhere on the left end on the list (head) can be considered O(1) and inserting somewhere on the right end (tail) is O(N).", linsert),
    command!("lrem", 4, WRITE, (1, 1, 1), W, "list", "1.0.0", "Removes elements from a list. Deletes the list if the last element was removed.", "O(N+M) where N is the length of the list and M is the number of elements removed.", lrem),
    command!("ltrim", 4, WRITE, (1, 1, 1), W, "list", "1.0.0", "Removes elements from both ends a list. Deletes the list if all elements were trimmed.", "O(N) where N is the number of elements to be removed by the operation.", ltrim),
    command!("lpos", -3, READONLY, (1, 1, 1), R, "list", "6.0.6", "Returns the index of matching elements in a list.", "O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.", lpos),
    command!("lmove", 5, WRITE | DENYOOM, (1, 2, 1), W, "list", "6.2.0", "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.", "O(1)", lmove),
    command!("rpoplpush", 3, WRITE | DENYOOM, (1, 2, 1), W, "list", "1.2.0", "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.", "O(1)", rpoplpush),
    Command {
        key_spec: KeySpec::Counted,
        ..command!("lmpop", -4, WRITE | MOVABLE_KEYS, (1, 1, 1), W, "list", "7.0.0", "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.", "O(N+M) where N is the number of provided keys and M is the number of elements returned.", lmpop)
    },
    command!("blpop", -3, WRITE | BLOCKING, (1, -2, 1), WB, "list", "2.0.0", "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "O(N) where N is the number of provided keys.", blpop),
    command!("brpop", -3, WRITE | BLOCKING, (1, -2, 1), WB, "list", "2.0.0", "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "O(N) where N is the number of provided keys.", brpop),
    command!("blmove", 6, WRITE | DENYOOM | BLOCKING, (1, 2, 1), WB, "list", "6.2.0", "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved.", "O(1)", blmove),
    command!("brpoplpush", 4, WRITE | DENYOOM | BLOCKING, (1, 2, 1), WB, "list", "2.2.0", "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped.", "O(1)", brpoplpush),
    Command {
        key_spec: KeySpec::Counted,
        ..command!("blmpop", -5, WRITE | BLOCKING | MOVABLE_KEYS, (2, 2, 1), WB, "list", "7.0.0", "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "O(N+M) where N is the number of provided keys and M is the number of elements returned.", blmpop)
    },
];

// ----- shared helpers ---------------------------------------------------------------

/// The current `list-max-listpack-size` and `list-compress-depth`.
pub(crate) fn packing(ctx: &Ctx) -> Packing {
    Packing {
        fill: ctx.ex.config.list_max_listpack_size,
        depth: ctx.ex.config.list_compress_depth as usize,
    }
}

/// The list at `key` for reading: `Ok(None)` when missing, WRONGTYPE for other types.
fn read_list<'c>(ctx: &'c mut Ctx, key: &[u8]) -> Result<Option<&'c List>, Reply> {
    match ctx.lookup_read(key) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::Obj(ObjRef::List(l)) => Ok(Some(l)),
            #[allow(unreachable_patterns)]
            _ => Err(errors::WRONGTYPE),
        },
    }
}

/// Runs `f` on the list at `key` for writing: `Ok(None)` when missing, WRONGTYPE for
/// other types.
fn with_list<T>(
    ctx: &mut Ctx,
    key: &[u8],
    f: impl FnOnce(&mut List) -> T,
) -> Result<Option<T>, Reply> {
    let Some(mut e) = ctx.lookup_write(key) else {
        return Ok(None);
    };
    match e.object_mut() {
        Some(ObjMut::List(l)) => Ok(Some(f(l))),
        #[allow(unreachable_patterns)]
        _ => Err(errors::WRONGTYPE),
    }
}

/// Checks that `key` is missing or a list, without touching it.
fn check_list(ctx: &mut Ctx, key: &[u8]) -> Result<bool, Reply> {
    let (db, now) = (ctx.db, ctx.now_ms);
    ctx.ex.ks.expire_if_needed(db, key, now);
    match ctx.ex.ks.dbs[db].table.get(key) {
        None => Ok(false),
        Some(e) => match e.value() {
            ValueRef::Obj(ObjRef::List(_)) => Ok(true),
            #[allow(unreachable_patterns)]
            _ => Err(errors::WRONGTYPE),
        },
    }
}

/// Stores a new list under `key`.
fn store_new(ctx: &mut Ctx, key: &[u8], l: List) {
    ctx.set(key, Value::Obj(Object::List(Box::new(l))), None, false);
}

/// Bookkeeping after elements were popped or removed: the list event, then the
/// deletion of an emptied list (an emptied list never stays in the keyspace).
fn after_removal(ctx: &mut Ctx, key: &[u8], event: &'static str, emptied: bool) {
    ctx.notify(notify::LIST, event, key);
    if emptied {
        ctx.delete(key);
        ctx.notify(notify::GENERIC, "del", key);
    } else {
        ctx.modified(key);
    }
}

fn pop_event(end: End) -> &'static str {
    match end {
        End::Head => "lpop",
        End::Tail => "rpop",
    }
}

fn push_event(end: End) -> &'static str {
    match end {
        End::Head => "lpush",
        End::Tail => "rpush",
    }
}

/// LEFT / RIGHT.
fn parse_end(a: &[u8]) -> Result<End, Reply> {
    if is(a, "left") {
        Ok(End::Head)
    } else if is(a, "right") {
        Ok(End::Tail)
    } else {
        Err(errors::SYNTAX)
    }
}

/// DEBUG OBJECT's quicklist fields (Redis's layout; the fill and depth shown are the
/// current settings, which are what the list's nodes follow here).
pub(crate) fn debug_object_fields(pk: Packing, l: &List) -> String {
    let nodes = l.node_count();
    format!(
        " ql_nodes:{nodes} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:{} ql_uncompressed_size:{}",
        l.len() as f64 / nodes as f64,
        pk.fill,
        (pk.depth != 0) as u8,
        l.uncompressed_size()
    )
}

fn bulk(e: crate::types::list::Elem<'_>) -> Reply {
    Reply::Bulk(e.to_vec())
}

// ----- pushes -----------------------------------------------------------------------

fn push_generic(ctx: &mut Ctx, args: &[&[u8]], end: End, only_existing: bool) -> Reply {
    let key = args[1];
    let items = &args[2..];
    let fill = packing(ctx);
    let len = match with_list(ctx, key, |l| {
        l.push(end, items, fill);
        l.len()
    }) {
        Err(e) => return e,
        Ok(Some(n)) => {
            ctx.modified(key);
            n
        }
        Ok(None) if only_existing => return Reply::Int(0),
        Ok(None) => {
            let mut l = List::new();
            l.push(end, items, fill);
            let n = l.len();
            store_new(ctx, key, l);
            n
        }
    };
    ctx.notify(notify::LIST, push_event(end), key);
    Reply::Int(len as i64)
}

fn lpush(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    push_generic(ctx, args, End::Head, false)
}

fn rpush(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    push_generic(ctx, args, End::Tail, false)
}

fn lpushx(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    push_generic(ctx, args, End::Head, true)
}

fn rpushx(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    push_generic(ctx, args, End::Tail, true)
}

// ----- pops -------------------------------------------------------------------------

/// Pops up to `count` elements from `end`; `None` when the key is missing.
fn pop_many(
    ctx: &mut Ctx,
    key: &[u8],
    end: End,
    count: usize,
) -> Result<Option<Vec<Vec<u8>>>, Reply> {
    let fill = packing(ctx);
    let r = with_list(ctx, key, |l| {
        let n = count.min(l.len());
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.extend(l.pop(end, fill));
        }
        (out, l.is_empty())
    })?;
    Ok(r.map(|(out, emptied)| {
        if !out.is_empty() {
            after_removal(ctx, key, pop_event(end), emptied);
        }
        out
    }))
}

/// Pops one element from `end` (LPOP/RPOP without a count): as `pop_many` with a
/// count of one, without the vector around the element, its bulk reply made straight
/// from the list's bytes.
fn pop_one(ctx: &mut Ctx, key: &[u8], end: End) -> Result<Option<Reply>, Reply> {
    let fill = packing(ctx);
    let r = with_list(ctx, key, |l| {
        let v = l.pop_with(end, fill, |e| match e {
            Elem::Str(b) => Reply::bulk(b),
            Elem::Int(n) => Reply::bulk_int(n),
        });
        let emptied = l.is_empty();
        (v, emptied)
    })?;
    Ok(r.and_then(|(v, emptied)| {
        if v.is_some() {
            after_removal(ctx, key, pop_event(end), emptied);
        }
        v
    }))
}

fn pop_generic(ctx: &mut Ctx, args: &[&[u8]], end: End) -> Reply {
    if args.len() > 3 {
        return crate::commands::wrong_arity(ctx.cmd.name);
    }
    let count = match args.get(2) {
        None => None,
        Some(a) => match arg_positive(a, None) {
            Ok(n) => Some(n as usize),
            Err(e) => return e,
        },
    };
    if count == Some(0) {
        // Checked on the key first, as Redis: missing → null array, wrong type → error.
        return match check_list(ctx, args[1]) {
            Err(e) => e,
            Ok(false) => Reply::NullArray,
            Ok(true) => Reply::Array(vec![]),
        };
    }
    let Some(count) = count else {
        return match pop_one(ctx, args[1], end) {
            Err(e) => e,
            Ok(None) => Reply::Null,
            Ok(Some(v)) => v,
        };
    };
    match pop_many(ctx, args[1], end, count) {
        Err(e) => e,
        Ok(None) => Reply::NullArray,
        Ok(Some(v)) => Reply::Array(v.into_iter().map(Reply::Bulk).collect()),
    }
}

fn lpop(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    pop_generic(ctx, args, End::Head)
}

fn rpop(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    pop_generic(ctx, args, End::Tail)
}

// ----- reads ------------------------------------------------------------------------

fn llen(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match read_list(ctx, args[1]) {
        Err(e) => e,
        Ok(l) => Reply::Int(l.map_or(0, |l| l.len()) as i64),
    }
}

fn lrange(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (start, end) = match (arg_i64(args[2]), arg_i64(args[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let l = match read_list(ctx, args[1]) {
        Err(e) => return e,
        Ok(None) => return Reply::Array(vec![]),
        Ok(Some(l)) => l,
    };
    let len = l.len() as i64;
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return Reply::Array(vec![]);
    }
    if end >= len {
        end = len - 1;
    }
    let n = (end - start + 1) as usize;
    let mut out = Vec::with_capacity(n);
    l.range(start as usize, n, |e| out.push(bulk(e)));
    Reply::Array(out)
}

fn lindex(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let index = args[2];
    let l = match read_list(ctx, args[1]) {
        Err(e) => return e,
        Ok(None) => return Reply::Null,
        Ok(Some(l)) => l,
    };
    match arg_i64(index) {
        Err(e) => e,
        Ok(i) => l.get(i, bulk).unwrap_or(Reply::Null),
    }
}

fn lpos(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let ele = args[2];
    let (mut rank, mut count, mut maxlen) = (1i64, None::<i64>, 0i64);
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        if is(args[j], "rank") && more {
            j += 1;
            rank = match arg_in_range(args[j], -i64::MAX, i64::MAX, None) {
                Ok(n) => n,
                Err(e) => return e,
            };
            if rank == 0 {
                return Reply::err("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list");
            }
        } else if is(args[j], "count") && more {
            j += 1;
            match arg_positive(args[j], Some("COUNT can't be negative")) {
                Ok(n) => count = Some(n),
                Err(e) => return e,
            }
        } else if is(args[j], "maxlen") && more {
            j += 1;
            match arg_positive(args[j], Some("MAXLEN can't be negative")) {
                Ok(n) => maxlen = n,
                Err(e) => return e,
            }
        } else {
            return errors::SYNTAX;
        }
        j += 1;
    }
    let l = match read_list(ctx, args[1]) {
        Err(e) => return e,
        Ok(None) => {
            return if count.is_some() {
                Reply::Array(vec![])
            } else {
                Reply::Null
            }
        }
        Ok(Some(l)) => l,
    };
    let from_tail = rank < 0;
    let rank = rank.unsigned_abs();
    let len = l.len() as i64;
    let maxlen = if maxlen == 0 { i64::MAX } else { maxlen };
    let (mut index, mut matches) = (0i64, 0u64);
    let mut found = Vec::new();
    let mut visit = |e: crate::types::list::Elem<'_>| {
        if index >= maxlen {
            return false;
        }
        if e.eq_bytes(ele) {
            matches += 1;
            if matches >= rank {
                found.push(if from_tail { len - index - 1 } else { index });
                match count {
                    None => return false,
                    Some(c) if c > 0 && (matches - rank + 1) as i64 >= c => return false,
                    _ => {}
                }
            }
        }
        index += 1;
        true
    };
    if from_tail {
        l.for_each_rev(&mut visit);
    } else {
        l.for_each(&mut visit);
    }
    match count {
        Some(_) => Reply::Array(found.into_iter().map(Reply::Int).collect()),
        None => found.first().map_or(Reply::Null, |&i| Reply::Int(i)),
    }
}

// ----- in-place edits ---------------------------------------------------------------

fn lset(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let key = args[1];
    match check_list(ctx, key) {
        Err(e) => return e,
        Ok(false) => return errors::NO_SUCH_KEY,
        Ok(true) => {}
    }
    let index = match arg_i64(args[2]) {
        Ok(i) => i,
        Err(e) => return e,
    };
    let fill = packing(ctx);
    match with_list(ctx, key, |l| l.set(index, args[3], fill)) {
        Err(e) => e,
        Ok(Some(true)) => {
            ctx.modified(key);
            ctx.notify(notify::LIST, "lset", key);
            Reply::ok()
        }
        Ok(_) => errors::OUT_OF_RANGE,
    }
}

fn linsert(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let after = if is(args[2], "after") {
        true
    } else if is(args[2], "before") {
        false
    } else {
        return errors::SYNTAX;
    };
    let (key, pivot, value) = (args[1], args[3], args[4]);
    let fill = packing(ctx);
    match with_list(ctx, key, |l| {
        l.insert(pivot, after, value, fill).then(|| l.len())
    }) {
        Err(e) => e,
        Ok(None) => Reply::Int(0),
        Ok(Some(None)) => Reply::Int(-1),
        Ok(Some(Some(n))) => {
            ctx.modified(key);
            ctx.notify(notify::LIST, "linsert", key);
            Reply::Int(n as i64)
        }
    }
}

fn lrem(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let key = args[1];
    let count = match arg_i64(args[2]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let fill = packing(ctx);
    match with_list(ctx, key, |l| (l.remove(count, args[3], fill), l.is_empty())) {
        Err(e) => e,
        Ok(None) => Reply::Int(0),
        Ok(Some((removed, emptied))) => {
            if removed > 0 {
                after_removal(ctx, key, "lrem", emptied);
            }
            Reply::Int(removed as i64)
        }
    }
}

fn ltrim(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let key = args[1];
    let (start, end) = match (arg_i64(args[2]), arg_i64(args[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let fill = packing(ctx);
    let r = with_list(ctx, key, |l| {
        let len = l.len() as i64;
        let s = if start < 0 { len + start } else { start }.max(0);
        let e = if end < 0 { len + end } else { end };
        if s > e || s >= len {
            l.keep_range(0, None, fill);
        } else {
            l.keep_range(s as usize, Some(e.min(len - 1) as usize), fill);
        }
        l.is_empty()
    });
    match r {
        Err(e) => e,
        Ok(None) => Reply::ok(),
        Ok(Some(emptied)) => {
            after_removal(ctx, key, "ltrim", emptied);
            Reply::ok()
        }
    }
}

// ----- moves ------------------------------------------------------------------------

/// LMOVE's core: pops from `src` at `from`, pushes to `dst` at `to`. `None` when the
/// source is missing.
fn lmove_generic(ctx: &mut Ctx, src: &[u8], dst: &[u8], from: End, to: End) -> Reply {
    match check_list(ctx, src) {
        Err(e) => return e,
        Ok(false) => return Reply::Null,
        Ok(true) => {}
    }
    if let Err(e) = check_list(ctx, dst) {
        return e;
    }
    let fill = packing(ctx);
    let dirty = ctx.ex.ks.dirty;
    let Ok(Some(Some(value))) = with_list(ctx, src, |l| l.pop(from, fill)) else {
        return Reply::Null;
    };
    // Push (the source may be the destination: it still holds the list then).
    match with_list(ctx, dst, |l| l.push(to, &[&value], fill)) {
        Ok(Some(())) => ctx.modified(dst),
        _ => {
            let mut l = List::new();
            l.push(to, &[&value], fill);
            store_new(ctx, dst, l);
        }
    }
    ctx.notify(notify::LIST, push_event(to), dst);
    let emptied = matches!(with_list(ctx, src, |l| l.is_empty()), Ok(Some(true)));
    after_removal(ctx, src, pop_event(from), emptied);
    // Both keys were signalled, but Redis counts a move as one change.
    ctx.ex.ks.dirty = dirty + 1;
    Reply::Bulk(value)
}

fn lmove(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (from, to) = match (parse_end(args[3]), parse_end(args[4])) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    lmove_generic(ctx, args[1], args[2], from, to)
}

fn rpoplpush(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    lmove_generic(ctx, args[1], args[2], End::Tail, End::Head)
}

// ----- LMPOP ------------------------------------------------------------------------

/// Parsed `numkeys key [key ...] LEFT|RIGHT [COUNT count]` starting at `at`.
struct Mpop<'a> {
    keys: &'a [&'a [u8]],
    end: End,
    count: usize,
}

fn parse_mpop<'a>(args: &'a [&'a [u8]], at: usize) -> Result<Mpop<'a>, Reply> {
    let numkeys = arg_in_range(
        args[at],
        1,
        i64::MAX,
        Some("numkeys should be greater than 0"),
    )?;
    let where_idx = (at as u64 + 1).saturating_add(numkeys as u64);
    if where_idx >= args.len() as u64 {
        return Err(errors::SYNTAX);
    }
    let where_idx = where_idx as usize;
    let end = parse_end(args[where_idx])?;
    let mut count = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        if count.is_none() && is(args[j], "count") && j + 1 < args.len() {
            j += 1;
            count = Some(arg_in_range(
                args[j],
                1,
                i64::MAX,
                Some("count should be greater than 0"),
            )?);
        } else {
            return Err(errors::SYNTAX);
        }
        j += 1;
    }
    Ok(Mpop {
        keys: &args[at + 1..where_idx],
        end,
        count: count.unwrap_or(1) as usize,
    })
}

/// Pops from the first non-empty list: `[key, [elements]]`, or `None` when all are
/// missing.
fn mpop_serve(ctx: &mut Ctx, m: &Mpop) -> Result<Option<Reply>, Reply> {
    for key in m.keys {
        if let Some(v) = pop_many(ctx, key, m.end, m.count)? {
            // Replicated as the LPOP/RPOP with a count that has the same effect.
            let name: &[u8] = match m.end {
                End::Head => b"LPOP",
                End::Tail => b"RPOP",
            };
            ctx.propagate_as(vec![vec![
                name.to_vec(),
                key.to_vec(),
                v.len().to_string().into_bytes(),
            ]]);
            return Ok(Some(Reply::Array(vec![
                Reply::bulk(key),
                Reply::Array(v.into_iter().map(Reply::Bulk).collect()),
            ])));
        }
    }
    Ok(None)
}

fn lmpop(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let m = match parse_mpop(args, 1) {
        Ok(m) => m,
        Err(e) => return e,
    };
    match mpop_serve(ctx, &m) {
        Err(e) => e,
        Ok(Some(r)) => r,
        Ok(None) => Reply::NullArray,
    }
}

// ----- blocking forms ---------------------------------------------------------------

fn blocking_pop(ctx: &mut Ctx, args: &[&[u8]], end: End) -> Reply {
    let deadline = match parse_timeout(args[args.len() - 1]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    let keys = &args[1..args.len() - 1];
    for key in keys {
        match pop_many(ctx, key, end, 1) {
            Err(e) => return e,
            Ok(None) => {}
            Ok(Some(mut v)) => {
                return Reply::Array(vec![
                    Reply::bulk(key),
                    Reply::Bulk(v.pop().unwrap_or_default()),
                ])
            }
        }
    }
    blocking::block(ctx, args, keys, "list", deadline, Reply::NullArray)
}

fn blpop(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    blocking_pop(ctx, args, End::Head)
}

fn brpop(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    blocking_pop(ctx, args, End::Tail)
}

fn blmove_generic(ctx: &mut Ctx, args: &[&[u8]], from: End, to: End, timeout: &[u8]) -> Reply {
    let deadline = match parse_timeout(timeout) {
        Ok(d) => d,
        Err(e) => return e,
    };
    match check_list(ctx, args[1]) {
        Err(e) => e,
        Ok(true) => lmove_generic(ctx, args[1], args[2], from, to),
        // In MULTI or a script: a null bulk now; blocked: a null array on timeout.
        Ok(false) => blocking::block_or(
            ctx,
            args,
            &args[1..2],
            "list",
            deadline,
            Reply::NullArray,
            Reply::Null,
        ),
    }
}

fn blmove(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (from, to) = match (parse_end(args[3]), parse_end(args[4])) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    blmove_generic(ctx, args, from, to, args[5])
}

fn brpoplpush(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    blmove_generic(ctx, args, End::Tail, End::Head, args[3])
}

fn blmpop(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let m = match parse_mpop(args, 2) {
        Ok(m) => m,
        Err(e) => return e,
    };
    let deadline = match parse_timeout(args[1]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    match mpop_serve(ctx, &m) {
        Err(e) => e,
        Ok(Some(r)) => r,
        Ok(None) => blocking::block(ctx, args, m.keys, "list", deadline, Reply::NullArray),
    }
}
