//! Bitmaps: GETBIT, SETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and BITFIELD_RO.
//!
//! Bitmaps are plain strings. Reads work on the string's bytes whatever its encoding
//! (an `int` string is read as its decimal text, as Redis does); writes turn the value
//! into a heap string (`raw`) and change it in place through `with_bits`, which also
//! grows it with zero bytes so the highest addressed bit exists. The bit arithmetic
//! lives in `types::bitmap`; this module parses arguments with Redis's exact errors
//! and range rules (negative indexes, BYTE|BIT units, the clear-bit-past-the-end rule).

use std::borrow::Cow;

use crate::command;
use crate::commands::ctx::notify;
use crate::commands::flags::*;
use crate::commands::{arg_i64, errors, is, Command, Ctx};
use crate::keyspace::Value;
use crate::protocol::Reply;
use crate::types::bitmap::{self, BitOp, Overflow};

pub static COMMANDS: &[Command] = &[
    command!("getbit", 3, READONLY | FAST, (1, 1, 1), &["read", "bitmap", "fast"], "bitmap", "2.2.0", "Returns a bit value by offset.", "O(1)", getbit),
    command!("setbit", 4, WRITE | DENYOOM, (1, 1, 1), &["write", "bitmap", "slow"], "bitmap", "2.2.0", "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.", "O(1)", setbit),
    command!("bitcount", -2, READONLY, (1, 1, 1), &["read", "bitmap", "slow"], "bitmap", "2.6.0", "Counts the number of set bits (population counting) in a string.", "O(N)", bitcount),
    command!("bitpos", -3, READONLY, (1, 1, 1), &["read", "bitmap", "slow"], "bitmap", "2.8.7", "Finds the first set (1) or clear (0) bit in a string.", "O(N)", bitpos),
    command!("bitop", -4, WRITE | DENYOOM, (2, -1, 1), &["write", "bitmap", "slow"], "bitmap", "2.6.0", "Performs bitwise operations on multiple strings, and stores the result.", "O(N)", bitop),
    command!("bitfield", -2, WRITE | DENYOOM, (1, 1, 1), &["write", "bitmap", "slow"], "bitmap", "3.2.0", "Performs arbitrary bitfield integer operations on strings.", "O(1) for each subcommand specified", bitfield),
    command!("bitfield_ro", -2, READONLY | FAST, (1, 1, 1), &["read", "bitmap", "fast"], "bitmap", "6.0.0", "Performs arbitrary read-only bitfield integer operations on strings.", "O(1) for each subcommand specified", bitfield_ro),
];

const BAD_OFFSET: Reply = Reply::err("ERR bit offset is not an integer or out of range");
const BAD_BIT: Reply = Reply::err("ERR bit is not an integer or out of range");
const BAD_TYPE: Reply = Reply::err(
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
);

/// Parses a bit offset. With `hash_bits`, `#N` means N times the field width
/// (BITFIELD). Offsets whose byte lies past `proto-max-bulk-len` are rejected.
fn parse_offset(ctx: &Ctx, arg: &[u8], hash_bits: Option<u32>) -> Result<u64, Reply> {
    let (digits, mul) = match (arg.first(), hash_bits) {
        (Some(b'#'), Some(bits)) => (&arg[1..], bits as i64),
        _ => (arg, 1),
    };
    let n = crate::util::numeric::parse_i64(digits)
        .and_then(|n| n.checked_mul(mul))
        .ok_or(BAD_OFFSET)?;
    if n < 0 || (n >> 3) as u64 >= ctx.max_bulk_len() as u64 {
        return Err(BAD_OFFSET);
    }
    Ok(n as u64)
}

/// The string at `key` for reading: `Ok(None)` when missing, WRONGTYPE otherwise.
fn read_bytes<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<Cow<'a, [u8]>>, Reply> {
    Ok(ctx.read_string(key)?.and_then(|v| v.string_bytes()))
}

/// Runs `edit` on the string at `key` as a mutable heap string at least `min_len`
/// bytes long, creating it or padding it with zero bytes as needed. `edit` is told
/// whether the string was created or grown. The caller signals the modification.
pub(crate) fn with_bits<R>(
    ctx: &mut Ctx,
    key: &[u8],
    min_len: usize,
    edit: impl FnOnce(&mut Vec<u8>, bool) -> R,
) -> Result<R, Reply> {
    let (db, now) = (ctx.db, ctx.now_ms);
    let mut current = match ctx.lookup_write(key) {
        None => {
            let mut v = vec![0u8; min_len];
            let r = edit(&mut v, true);
            ctx.add(db, key, Value::RawStr(v), None);
            return Ok(r);
        }
        Some(mut e) => {
            if let Some(raw) = e.raw_string_mut() {
                let grew = raw.len() < min_len;
                if grew {
                    raw.resize(min_len, 0);
                }
                return Ok(edit(raw, grew));
            }
            let mut v = Vec::new();
            if !e.value().append_string(&mut v) {
                return Err(errors::WRONGTYPE);
            }
            v
        }
    };
    // An inline or integer string becomes a heap string, keeping its TTL.
    let grew = current.len() < min_len;
    if grew {
        current.resize(min_len, 0);
    }
    let r = edit(&mut current, grew);
    ctx.ex
        .ks
        .set(db, key, Value::RawStr(current), None, true, now);
    Ok(r)
}

fn getbit(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let offset = match parse_offset(ctx, args[2], None) {
        Ok(o) => o,
        Err(e) => return e,
    };
    match read_bytes(ctx, args[1]) {
        Err(e) => e,
        Ok(None) => Reply::Int(0),
        Ok(Some(s)) => Reply::Int(bitmap::get_bit(&s, offset) as i64),
    }
}

fn setbit(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let key = args[1];
    let offset = match parse_offset(ctx, args[2], None) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let on = match crate::util::numeric::parse_i64(args[3]) {
        Some(0) => false,
        Some(1) => true,
        _ => return BAD_BIT,
    };
    let byte = (offset >> 3) as usize;
    match with_bits(ctx, key, byte + 1, |s, grew| {
        (bitmap::set_bit(s, offset, on), grew)
    }) {
        Err(e) => e,
        Ok((old, grew)) => {
            if grew || old != on {
                ctx.modified(key);
                ctx.notify(notify::STRING, "setbit", key);
            }
            Reply::Int(old as i64)
        }
    }
}

/// BYTE|BIT unit argument.
fn parse_unit(a: &[u8]) -> Result<bool, Reply> {
    if is(a, "bit") {
        Ok(true)
    } else if is(a, "byte") {
        Ok(false)
    } else {
        Err(errors::SYNTAX)
    }
}

/// Converts Redis-style inclusive `start..end` (negative from the end) over `total`
/// units into a clamped range; `None` when empty.
fn clamp_range(mut start: i64, mut end: i64, total: i64) -> Option<(i64, i64)> {
    if start < 0 {
        start += total;
    }
    if end < 0 {
        end += total;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    (start <= end).then_some((start, end))
}

fn bitcount(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let mut range = None;
    match args.len() {
        2 => {}
        4 | 5 => {
            let start = match arg_i64(args[2]) {
                Ok(n) => n,
                Err(e) => return e,
            };
            let end = match arg_i64(args[3]) {
                Ok(n) => n,
                Err(e) => return e,
            };
            let isbit = match args.get(4).map(|a| parse_unit(a)) {
                Some(Err(e)) => return e,
                Some(Ok(b)) => b,
                None => false,
            };
            range = Some((start, end, isbit));
        }
        _ => return errors::SYNTAX,
    }
    let s = match read_bytes(ctx, args[1]) {
        Err(e) => return e,
        Ok(None) => return Reply::Int(0),
        Ok(Some(s)) => s,
    };
    let len = s.len() as i64;
    let bits = match range {
        None => (len > 0).then(|| (0, len * 8 - 1)),
        Some((start, end, _)) if start < 0 && end < 0 && start > end => None,
        Some((start, end, true)) => clamp_range(start, end, len * 8),
        Some((start, end, false)) => clamp_range(start, end, len).map(|(a, b)| (a * 8, b * 8 + 7)),
    };
    match bits {
        None => Reply::Int(0),
        Some((a, b)) => Reply::Int(bitmap::count_range(&s, a as u64, b as u64) as i64),
    }
}

fn bitpos(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let bit = match arg_i64(args[2]) {
        Ok(0) => false,
        Ok(1) => true,
        Ok(_) => return Reply::err("ERR The bit argument must be 1 or 0."),
        Err(e) => return e,
    };
    if args.len() > 6 {
        return errors::SYNTAX;
    }
    let mut start = 0;
    let mut end = None;
    let mut isbit = false;
    if args.len() >= 4 {
        start = match arg_i64(args[3]) {
            Ok(n) => n,
            Err(e) => return e,
        };
        if args.len() == 6 {
            isbit = match parse_unit(args[5]) {
                Ok(b) => b,
                Err(e) => return e,
            };
        }
        if args.len() >= 5 {
            end = match arg_i64(args[4]) {
                Ok(n) => Some(n),
                Err(e) => return e,
            };
        }
    }
    let s = match read_bytes(ctx, args[1]) {
        Err(e) => return e,
        // A missing key is an infinite run of clear bits.
        Ok(None) => return Reply::Int(if bit { -1 } else { 0 }),
        Ok(Some(s)) => s,
    };
    let len = s.len() as i64;
    let range = if isbit {
        clamp_range(start, end.unwrap_or(len * 8 - 1), len * 8)
    } else {
        clamp_range(start, end.unwrap_or(len - 1), len).map(|(a, b)| (a * 8, b * 8 + 7))
    };
    let Some((a, b)) = range else {
        return Reply::Int(-1);
    };
    match bitmap::find_bit(&s, bit, a as u64, b as u64) {
        Some(p) => Reply::Int(p as i64),
        // Looking for a clear bit with no explicit end: the string is taken as padded
        // with zeroes on the right, so the answer is the first bit past the range.
        None if !bit && end.is_none() => Reply::Int((b / 8 + 1) * 8),
        None => Reply::Int(-1),
    }
}

fn bitop(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let op = match args[1] {
        a if is(a, "and") => BitOp::And,
        a if is(a, "or") => BitOp::Or,
        a if is(a, "xor") => BitOp::Xor,
        a if is(a, "not") => BitOp::Not,
        _ => return errors::SYNTAX,
    };
    if op == BitOp::Not && args.len() != 4 {
        return Reply::err("ERR BITOP NOT must be called with a single source key.");
    }
    let dest = args[2];
    let mut srcs: Vec<Vec<u8>> = Vec::with_capacity(args.len() - 3);
    for k in &args[3..] {
        match ctx.lookup_read(k).map(|e| e.value()) {
            None => srcs.push(Vec::new()),
            Some(v) => {
                let mut b = Vec::new();
                if !v.append_string(&mut b) {
                    return errors::WRONGTYPE;
                }
                srcs.push(b);
            }
        }
    }
    let refs: Vec<&[u8]> = srcs.iter().map(|s| s.as_slice()).collect();
    let res = bitmap::bitop(op, &refs);
    let n = res.len() as i64;
    if n > 0 {
        ctx.set(dest, Value::RawStr(res), None, false);
        ctx.notify(notify::STRING, "set", dest);
    } else if ctx.delete(dest) {
        ctx.notify(notify::GENERIC, "del", dest);
    }
    Reply::Int(n)
}

// ----- BITFIELD -------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

struct Field {
    op: FieldOp,
    offset: u64,
    bits: u32,
    signed: bool,
    overflow: Overflow,
}

/// `i1`..`i64` or `u1`..`u63`: (signed, bits).
fn parse_field_type(a: &[u8]) -> Result<(bool, u32), Reply> {
    let signed = match a.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(BAD_TYPE),
    };
    match crate::util::numeric::parse_i64(&a[1..]) {
        Some(n) if n >= 1 && n <= if signed { 64 } else { 63 } => Ok((signed, n as u32)),
        _ => Err(BAD_TYPE),
    }
}

fn parse_bitfield(ctx: &Ctx, args: &[&[u8]]) -> Result<Vec<Field>, Reply> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < args.len() {
        let rem = args.len() - j - 1;
        let a = args[j];
        let op = if is(a, "get") && rem >= 2 {
            FieldOp::Get
        } else if is(a, "set") && rem >= 3 {
            FieldOp::Set(0)
        } else if is(a, "incrby") && rem >= 3 {
            FieldOp::IncrBy(0)
        } else if is(a, "overflow") && rem >= 1 {
            let t = args[j + 1];
            overflow = if is(t, "wrap") {
                Overflow::Wrap
            } else if is(t, "sat") {
                Overflow::Sat
            } else if is(t, "fail") {
                Overflow::Fail
            } else {
                return Err(Reply::err("ERR Invalid OVERFLOW type specified"));
            };
            j += 2;
            continue;
        } else {
            return Err(errors::SYNTAX);
        };
        let (signed, bits) = parse_field_type(args[j + 1])?;
        let offset = parse_offset(ctx, args[j + 2], Some(bits))?;
        let op = match op {
            FieldOp::Get => FieldOp::Get,
            FieldOp::Set(_) => FieldOp::Set(arg_i64(args[j + 3])?),
            FieldOp::IncrBy(_) => FieldOp::IncrBy(arg_i64(args[j + 3])?),
        };
        fields.push(Field {
            op,
            offset,
            bits,
            signed,
            overflow,
        });
        j += if op == FieldOp::Get { 3 } else { 4 };
    }
    Ok(fields)
}

fn field_get(s: &[u8], f: &Field) -> Reply {
    if f.signed {
        Reply::Int(bitmap::get_signed(s, f.offset, f.bits))
    } else {
        Reply::Int(bitmap::get_unsigned(s, f.offset, f.bits) as i64)
    }
}

/// Runs one SET/INCRBY on `s`; returns the reply and whether the field changed.
fn field_write(s: &mut [u8], f: &Field) -> (Reply, bool) {
    let (old, new, ret) = if f.signed {
        let old = bitmap::get_signed(s, f.offset, f.bits);
        let r = match f.op {
            FieldOp::IncrBy(by) => bitmap::signed_add(old, by, f.bits, f.overflow).map(|n| (n, n)),
            FieldOp::Set(v) => bitmap::signed_add(v, 0, f.bits, f.overflow).map(|n| (n, old)),
            FieldOp::Get => unreachable!("GET is not a write"),
        };
        let Some((new, ret)) = r else {
            return (Reply::Null, false);
        };
        (old as u64, new as u64, ret)
    } else {
        let old = bitmap::get_unsigned(s, f.offset, f.bits);
        let r = match f.op {
            FieldOp::IncrBy(by) => {
                bitmap::unsigned_add(old, by, f.bits, f.overflow).map(|n| (n, n))
            }
            FieldOp::Set(v) => {
                bitmap::unsigned_add(v as u64, 0, f.bits, f.overflow).map(|n| (n, old))
            }
            FieldOp::Get => unreachable!("GET is not a write"),
        };
        let Some((new, ret)) = r else {
            return (Reply::Null, false);
        };
        (old, new, ret as i64)
    };
    bitmap::set_field(s, f.offset, f.bits, new);
    (Reply::Int(ret), old != new)
}

fn bitfield_generic(ctx: &mut Ctx, args: &[&[u8]], read_only_cmd: bool) -> Reply {
    let key = args[1];
    let fields = match parse_bitfield(ctx, args) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let highest = fields
        .iter()
        .filter(|f| f.op != FieldOp::Get)
        .map(|f| f.offset + f.bits as u64 - 1)
        .max();
    let Some(highest) = highest else {
        let s = match read_bytes(ctx, key) {
            Err(e) => return e,
            Ok(s) => s.unwrap_or_default(),
        };
        return Reply::Array(fields.iter().map(|f| field_get(&s, f)).collect());
    };
    if read_only_cmd {
        return Reply::err("ERR BITFIELD_RO only supports the GET subcommand");
    }
    let result = with_bits(ctx, key, (highest >> 3) as usize + 1, |s, grew| {
        let mut changes = 0u64;
        let replies: Vec<Reply> = fields
            .iter()
            .map(|f| {
                if f.op == FieldOp::Get {
                    return field_get(s, f);
                }
                let (r, changed) = field_write(s, f);
                if grew && !matches!(r, Reply::Null) || changed {
                    changes += 1;
                }
                r
            })
            .collect();
        (replies, changes)
    });
    match result {
        Err(e) => e,
        Ok((replies, changes)) => {
            if changes > 0 {
                ctx.modified(key);
                ctx.ex.ks.dirty += changes - 1;
                ctx.notify(notify::STRING, "setbit", key);
            }
            Reply::Array(replies)
        }
    }
}

fn bitfield(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    bitfield_generic(ctx, args, false)
}

fn bitfield_ro(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    bitfield_generic(ctx, args, true)
}
