//! HyperLogLog: PFADD, PFCOUNT, PFMERGE, PFDEBUG and PFSELFTEST.
//!
//! An HLL is a plain string in Redis's byte layout (`types::hll`), so GET/SET/DUMP move
//! it between servers unchanged. Commands check the header before touching a value
//! (`WRONGTYPE Key is not a valid HyperLogLog string value.`) and report corrupt sparse
//! opcodes as `INVALIDOBJ`. Updates happen in place on the heap string through
//! `with_hll`; PFCOUNT of one key writes too, because it refreshes the cached
//! cardinality in the header.

use crate::command;
use crate::commands::ctx::notify;
use crate::commands::flags::*;
use crate::commands::{errors, is, Command, Ctx};
use crate::keyspace::{Value, ValueRef};
use crate::protocol::Reply;
use crate::types::hll::{self, Corrupt, Union};

pub static COMMANDS: &[Command] = &[
    command!("pfadd", -2, WRITE | DENYOOM | FAST, (1, 1, 1), &["write", "hyperloglog", "fast"], "hyperloglog", "2.8.9", "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.", "O(1) to add every element.", pfadd),
    command!("pfcount", -2, READONLY | MAY_REPLICATE, (1, -1, 1), &["read", "hyperloglog", "slow"], "hyperloglog", "2.8.9", "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).", "O(1) with a very small average constant time when called with a single key. O(N) with N being the number of keys, and much bigger constant times, when called with multiple keys.", pfcount),
    command!("pfmerge", -2, WRITE | DENYOOM, (1, -1, 1), &["write", "hyperloglog", "slow"], "hyperloglog", "2.8.9", "Merges one or more HyperLogLog values into a single key.", "O(N) to merge N HyperLogLogs, but with high constant times.", pfmerge),
    command!("pfdebug", 3, WRITE | DENYOOM | ADMIN, (2, 2, 1), &["write", "hyperloglog", "admin", "slow", "dangerous"], "hyperloglog", "2.8.9", "Internal commands for debugging HyperLogLog values.", "N/A", pfdebug),
    command!("pfselftest", 1, ADMIN, (0, 0, 0), &["hyperloglog", "admin", "slow", "dangerous"], "hyperloglog", "2.8.9", "An internal command for testing HyperLogLog values.", "N/A", pfselftest),
];

const NOT_HLL: Reply = Reply::err("WRONGTYPE Key is not a valid HyperLogLog string value.");
const CORRUPT: Reply = Reply::err("INVALIDOBJ Corrupted HLL object detected");

/// The bytes of a stored value if it is a valid HLL string.
fn hll_bytes<'a>(v: ValueRef<'a>) -> Result<&'a [u8], Reply> {
    match v {
        ValueRef::Obj(_) => Err(errors::WRONGTYPE),
        // An integer-encoded string can't hold the header.
        ValueRef::Int(_) => Err(NOT_HLL),
        ValueRef::Emb(b) | ValueRef::Raw(b) if hll::is_valid(b) => Ok(b),
        _ => Err(NOT_HLL),
    }
}

/// Runs `edit` on the HLL at `key` as a mutable heap string; `edit` returns its result
/// and whether it changed the bytes. `Ok(None)` when the key is missing. The caller
/// signals the modification.
fn with_hll<R>(
    ctx: &mut Ctx,
    key: &[u8],
    edit: impl FnOnce(&mut Vec<u8>) -> (R, bool),
) -> Result<Option<R>, Reply> {
    let (db, now) = (ctx.db, ctx.now_ms);
    let mut copy = match ctx.lookup_write(key) {
        None => return Ok(None),
        Some(mut e) => {
            // Validate first; copy only an inline string (a heap string is edited in
            // place, so a dense 12 KB HLL is never copied on the hot path).
            hll_bytes(e.value())?;
            if let Some(raw) = e.raw_string_mut() {
                return Ok(Some(edit(raw).0));
            }
            hll_bytes(e.value())?.to_vec()
        }
    };
    // An inline string is rewritten as a heap string only if it changed.
    let (r, changed) = edit(&mut copy);
    if changed {
        ctx.ex.ks.set(db, key, Value::RawStr(copy), None, true, now);
    }
    Ok(Some(r))
}

fn max_bytes(ctx: &Ctx) -> usize {
    usize::try_from(ctx.ex.config.hll_sparse_max_bytes).unwrap_or(usize::MAX)
}

fn add_all(s: &mut Vec<u8>, elems: &[&[u8]], max: usize) -> Result<bool, Corrupt> {
    let mut updated = false;
    for e in elems {
        updated |= hll::add(s, e, max)?;
    }
    if updated {
        hll::invalidate_cache(s);
    }
    Ok(updated)
}

fn pfadd(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let key = args[1];
    let elems = &args[2..];
    let max = max_bytes(ctx);
    let updated = match with_hll(ctx, key, |s| {
        let r = add_all(s, elems, max);
        let changed = r != Ok(false);
        (r, changed)
    }) {
        Err(e) => return e,
        Ok(Some(Err(Corrupt))) => return CORRUPT,
        Ok(Some(Ok(u))) => u,
        Ok(None) => {
            let mut s = hll::new_sparse();
            // A fresh sparse HLL is well formed, so adding can't fail.
            let _ = add_all(&mut s, elems, max);
            hll::invalidate_cache(&mut s);
            ctx.add(ctx.db, key, Value::RawStr(s), None);
            true
        }
    };
    if updated {
        ctx.modified(key);
        ctx.notify(notify::STRING, "pfadd", key);
    }
    Reply::Int(updated as i64)
}

fn pfcount(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if args.len() > 2 {
        // The cardinality of the union, in a scratch register array.
        let mut u = Union::default();
        for k in &args[1..] {
            let Some(e) = ctx.lookup_read(k) else {
                continue;
            };
            match hll_bytes(e.value()) {
                Err(r) => return r,
                Ok(b) => {
                    if u.merge(b).is_err() {
                        return CORRUPT;
                    }
                }
            }
        }
        return Reply::Int(u.count() as i64);
    }
    let key = args[1];
    let r = with_hll(ctx, key, |s| match hll::cached_count(s) {
        Some(c) => (Ok((c, false)), false),
        None => match hll::count(s) {
            Ok(c) => {
                hll::set_cached_count(s, c);
                (Ok((c, true)), true)
            }
            Err(e) => (Err(e), false),
        },
    });
    match r {
        Err(e) => e,
        Ok(None) => Reply::Int(0),
        Ok(Some(Err(Corrupt))) => CORRUPT,
        Ok(Some(Ok((card, refreshed)))) => {
            if refreshed {
                ctx.modified(key);
            }
            Reply::Int(card as i64)
        }
    }
}

fn pfmerge(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let mut u = Union::default();
    let mut use_dense = false;
    // The destination is also a source.
    for k in &args[1..] {
        let Some(e) = ctx.lookup_read(k) else {
            continue;
        };
        match hll_bytes(e.value()) {
            Err(r) => return r,
            Ok(b) => {
                use_dense |= !hll::is_sparse(b);
                if u.merge(b).is_err() {
                    return CORRUPT;
                }
            }
        }
    }
    let key = args[1];
    let max = max_bytes(ctx);
    let store = |s: &mut Vec<u8>| -> Result<(), Corrupt> {
        if use_dense {
            hll::to_dense(s)?;
        }
        u.store_into(s, max);
        Ok(())
    };
    match with_hll(ctx, key, |s| (store(s), true)) {
        Err(e) => return e,
        Ok(Some(Err(Corrupt))) => return CORRUPT,
        Ok(Some(Ok(()))) => {}
        Ok(None) => {
            let mut s = hll::new_sparse();
            if store(&mut s).is_err() {
                return CORRUPT;
            }
            ctx.add(ctx.db, key, Value::RawStr(s), None);
        }
    }
    ctx.modified(key);
    ctx.notify(notify::STRING, "pfadd", key);
    Reply::ok()
}

fn pfdebug(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (sub, key) = (args[1], args[2]);
    // The closure's result carries whether the encoding changed (GETREG and TODENSE
    // on a sparse value), which counts as a modification.
    let r = with_hll(ctx, key, |s| {
        let (reply, converted) = if is(sub, "getreg") {
            match hll::to_dense(s) {
                Err(Corrupt) => (CORRUPT, false),
                Ok(converted) => {
                    let regs = hll::registers(s);
                    let out = regs.into_iter().map(|r| Reply::Int(r as i64)).collect();
                    (Reply::Array(out), converted)
                }
            }
        } else if is(sub, "decode") {
            if hll::is_sparse(s) {
                (Reply::Bulk(hll::decode_sparse(s).into_bytes()), false)
            } else {
                (Reply::err("ERR HLL encoding is not sparse"), false)
            }
        } else if is(sub, "encoding") {
            let name = if hll::is_sparse(s) { "sparse" } else { "dense" };
            (Reply::status(name), false)
        } else if is(sub, "todense") {
            match hll::to_dense(s) {
                Err(Corrupt) => (CORRUPT, false),
                Ok(converted) => (Reply::Int(converted as i64), converted),
            }
        } else {
            let name = String::from_utf8_lossy(sub);
            let e = Reply::error(format!("ERR Unknown PFDEBUG subcommand '{name}'"));
            (e, false)
        };
        ((reply, converted), converted)
    });
    match r {
        Err(e) => e,
        Ok(None) => Reply::err("ERR The specified key does not exist"),
        Ok(Some((reply, converted))) => {
            if converted {
                ctx.modified(key);
            }
            reply
        }
    }
}

fn pfselftest(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    match hll::self_test() {
        Ok(()) => Reply::ok(),
        Err(msg) => Reply::error(format!("ERR {msg}")),
    }
}
