//! Streams: XADD, XLEN, XRANGE/XREVRANGE, XDEL, XTRIM, XREAD, XSETID, consumer groups
//! (XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM) and XINFO.
//!
//! Shaped as Redis's `t_stream.c`: argument parsing into small option structs with
//! Redis's exact errors, one generic helper per family of variants (`range_generic`
//! for XRANGE/XREVRANGE, `read_generic` for XREAD/XREADGROUP, `parse_trim` for
//! XADD/XTRIM). The entry storage and the group/PEL bookkeeping live in
//! `types::stream`; this module only parses, calls it, and replies. XREAD and
//! XREADGROUP block through `exec::blocking`: `$` is rewritten to the concrete last
//! ID before blocking, and XREADGROUP asks to be woken when its key is deleted or
//! changes type so that it answers NOGROUP / WRONGTYPE as Redis 7.2+ does.

use std::time::{Duration, Instant};

use super::stream_groups::*;
use crate::command;
use crate::commands::ctx::notify;
use crate::commands::flags::*;
use crate::commands::{errors, is, Command, Ctx, KeySpec};
use crate::container;
use crate::exec::blocking;
use crate::keyspace::{ObjMut, ObjRef, Object, Value, ValueRef};
use crate::protocol::reply::{encode_bulk, encode_header};
use crate::protocol::Reply;
use crate::types::stream::{Entry, Group, Nack, Stream, StreamId, Trim};

const WF: &[&str] = &["write", "stream", "fast"];
const RF: &[&str] = &["read", "stream", "fast"];
const RS: &[&str] = &["read", "stream", "slow"];

pub static COMMANDS: &[Command] = &[
    command!("xadd", -5, WRITE | DENYOOM | FAST, (1, 1, 1), WF, "stream", "5.0.0", "Appends a new message to a stream. Creates the key if it doesn't exist.", "O(1) when adding a new entry, O(N) when trimming where N being the number of entries evicted.", xadd),
    command!("xlen", 2, READONLY | FAST, (1, 1, 1), RF, "stream", "5.0.0", "Return the number of messages in a stream.", "O(1)", xlen),
    command!("xrange", -4, READONLY, (1, 1, 1), RS, "stream", "5.0.0", "Returns the messages from a stream within a range of IDs.", "O(N) with N being the number of elements being returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).", xrange),
    command!("xrevrange", -4, READONLY, (1, 1, 1), RS, "stream", "5.0.0", "Returns the messages from a stream within a range of IDs in reverse order.", "O(N) with N being the number of elements returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).", xrevrange),
    command!("xdel", -3, WRITE | FAST, (1, 1, 1), WF, "stream", "5.0.0", "Returns the number of messages after removing them from a stream.", "O(1) for each single item to delete in the stream, regardless of the stream size.", xdel),
    command!("xtrim", -4, WRITE, (1, 1, 1), &["write", "stream", "slow"], "stream", "5.0.0", "Deletes messages from the beginning of a stream.", "O(N), with N being the number of evicted entries. Constant times are very small however, since entries are organized in macro nodes containing multiple entries that can be released with a single deallocation.", xtrim),
    Command {
        key_spec: KeySpec::AfterStreams,
        ..command!("xread", -4, READONLY | BLOCKING | MOVABLE_KEYS, (1, 0, 0), &["read", "stream", "slow", "blocking"], "stream", "5.0.0", "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.", "For each stream mentioned: O(N) with N being the number of elements being returned, it means that XREAD-ing with a fixed COUNT is O(1). Note that when the BLOCK option is used, XADD will pay O(M) time in order to serve the M clients blocked on the stream getting new data.", xread)
    },
    Command {
        key_spec: KeySpec::AfterStreams,
        ..command!("xreadgroup", -7, WRITE | BLOCKING | MOVABLE_KEYS, (4, 0, 0), &["write", "stream", "slow", "blocking"], "stream", "5.0.0", "Returns new or historical messages from a stream for a consumer in a group. Blocks until a message is available otherwise.", "For each stream mentioned: O(M) with M being the number of elements returned. If M is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1). On the other side when XREADGROUP blocks, XADD will pay the O(N) time in order to serve the N clients blocked on the stream getting new data.", xreadgroup)
    },
    command!("xsetid", -3, WRITE | DENYOOM | FAST, (1, 1, 1), WF, "stream", "5.0.0", "An internal command for replicating stream values.", "O(1)", xsetid),
    command!("xack", -4, WRITE | FAST, (1, 1, 1), WF, "stream", "5.0.0", "Returns the number of messages that were successfully acknowledged by the consumer group member of a stream.", "O(1) for each message ID processed.", xack),
    command!("xpending", -3, READONLY, (1, 1, 1), RS, "stream", "5.0.0", "Returns the information and entries from a stream consumer group's pending entries list.", "O(N) with N being the number of elements returned, so asking for a small fixed number of entries per call is O(1). O(M), where M is the total number of entries scanned when used with the IDLE filter. When the command returns just the summary and the list of consumers is small, it runs in O(1) time; otherwise, an additional O(N) time for iterating every consumer.", xpending),
    command!("xclaim", -6, WRITE | FAST, (1, 1, 1), WF, "stream", "5.0.0", "Changes, or acquires, ownership of a message in a consumer group, as if the message was delivered a consumer group member.", "O(log N) with N being the number of messages in the PEL of the consumer group.", xclaim),
    command!("xautoclaim", -6, WRITE | FAST, (1, 1, 1), WF, "stream", "6.2.0", "Changes, or acquires, ownership of messages in a consumer group, as if the messages were delivered to as consumer group member.", "O(1) if COUNT is small.", xautoclaim),
    container!("xgroup", &["slow"], "stream", "5.0.0", "A container for consumer groups commands.", XGROUP_SUBCOMMANDS),
    container!("xinfo", &["slow"], "stream", "5.0.0", "A container for stream introspection commands.", XINFO_SUBCOMMANDS),
];

static XGROUP_SUBCOMMANDS: &[Command] = &[
    command!(
        "xgroup|create",
        -5,
        WRITE | DENYOOM,
        (2, 2, 1),
        &["write", "stream", "slow"],
        "stream",
        "5.0.0",
        "Creates a consumer group.",
        "O(1)",
        xgroup_create
    ),
    command!(
        "xgroup|setid",
        -5,
        WRITE,
        (2, 2, 1),
        &["write", "stream", "slow"],
        "stream",
        "5.0.0",
        "Sets the last-delivered ID of a consumer group.",
        "O(1)",
        xgroup_setid
    ),
    command!(
        "xgroup|destroy",
        4,
        WRITE,
        (2, 2, 1),
        &["write", "stream", "slow"],
        "stream",
        "5.0.0",
        "Destroys a consumer group.",
        "O(N) where N is the number of entries in the group's pending entries list (PEL).",
        xgroup_destroy
    ),
    command!(
        "xgroup|createconsumer",
        5,
        WRITE | DENYOOM,
        (2, 2, 1),
        &["write", "stream", "slow"],
        "stream",
        "6.2.0",
        "Creates a consumer in a consumer group.",
        "O(1)",
        xgroup_createconsumer
    ),
    command!(
        "xgroup|delconsumer",
        5,
        WRITE,
        (2, 2, 1),
        &["write", "stream", "slow"],
        "stream",
        "5.0.0",
        "Deletes a consumer from a consumer group.",
        "O(1)",
        xgroup_delconsumer
    ),
    command!(
        "xgroup|help",
        2,
        LOADING | STALE,
        (0, 0, 0),
        &["stream", "slow"],
        "stream",
        "5.0.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        xgroup_help
    ),
];

static XINFO_SUBCOMMANDS: &[Command] = &[
    command!(
        "xinfo|stream",
        -3,
        READONLY,
        (2, 2, 1),
        &["read", "stream", "slow"],
        "stream",
        "5.0.0",
        "Returns information about a stream.",
        "O(1)",
        xinfo_stream
    ),
    command!(
        "xinfo|groups",
        3,
        READONLY,
        (2, 2, 1),
        &["read", "stream", "slow"],
        "stream",
        "5.0.0",
        "Returns a list of the consumer groups of a stream.",
        "O(1)",
        xinfo_groups
    ),
    command!(
        "xinfo|consumers",
        4,
        READONLY,
        (2, 2, 1),
        &["read", "stream", "slow"],
        "stream",
        "5.0.0",
        "Returns a list of the consumers in a consumer group.",
        "O(1)",
        xinfo_consumers
    ),
    command!(
        "xinfo|help",
        2,
        LOADING | STALE,
        (0, 0, 0),
        &["stream", "slow"],
        "stream",
        "5.0.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        xinfo_help
    ),
];

// ----- shared helpers ---------------------------------------------------------------

pub(super) const INVALID_ID: Reply =
    Reply::err("ERR Invalid stream ID specified as stream command argument");

pub(super) fn id_reply(id: StreamId) -> Reply {
    Reply::Bulk(id.to_bytes())
}

pub(super) fn entry_reply(e: Entry) -> Reply {
    Reply::Array(vec![
        id_reply(e.id),
        Reply::Array(e.fields.into_iter().map(Reply::Bulk).collect()),
    ])
}

pub(super) fn entries_reply(v: Vec<Entry>) -> Reply {
    Reply::Array(v.into_iter().map(entry_reply).collect())
}

/// Appends one entry as `entry_reply` encodes it: `[id, [field, value, ...]]`.
pub(super) fn encode_entry(out: &mut Vec<u8>, id: StreamId, pairs: &[&[u8]]) {
    out.extend_from_slice(b"*2\r\n");
    let mut buf = [0u8; 41];
    encode_bulk(id.format_into(&mut buf), out);
    encode_header(b'*', pairs.len(), out);
    for p in pairs {
        encode_bulk(p, out);
    }
}

/// The reply `entries_reply(s.range(..))` would give, encoded straight from the
/// stream's blocks: one buffer instead of an `Entry` and several `Reply`s per entry.
pub(super) fn range_reply(
    s: &Stream,
    start: StreamId,
    end: StreamId,
    count: usize,
    rev: bool,
) -> Reply {
    let mut body = Vec::with_capacity(if count == 0 {
        1024
    } else {
        count.min(1024) * 48
    });
    let n = s.range_each(start, end, count, rev, |id, pairs| {
        encode_entry(&mut body, id, pairs)
    });
    Reply::EncodedArray(n, body)
}

/// A strict ID (no `-`/`+`), missing sequence = 0.
pub(super) fn parse_strict(a: &[u8]) -> Result<StreamId, Reply> {
    StreamId::parse(a, 0, false)
        .map(|(id, _)| id)
        .ok_or(INVALID_ID)
}

/// An interval bound: `-`, `+`, `(id` (exclusive) or an ID whose missing sequence is
/// `missing_seq`. Returns the inclusive bound.
pub(super) fn parse_bound(a: &[u8], missing_seq: u64, start: bool) -> Result<StreamId, Reply> {
    if a == b"-" {
        return Ok(StreamId::MIN);
    }
    if a == b"+" {
        return Ok(StreamId::MAX);
    }
    if a.len() > 1 && a[0] == b'(' {
        let (id, _) = StreamId::parse(&a[1..], missing_seq, false).ok_or(INVALID_ID)?;
        return if start {
            id.incr()
                .ok_or(Reply::err("ERR invalid start ID for the interval"))
        } else {
            id.decr()
                .ok_or(Reply::err("ERR invalid end ID for the interval"))
        };
    }
    StreamId::parse(a, missing_seq, false)
        .map(|(id, _)| id)
        .ok_or(INVALID_ID)
}

pub(super) fn read_stream<'c>(ctx: &'c mut Ctx, key: &[u8]) -> Result<Option<&'c Stream>, Reply> {
    match ctx.lookup_read(key) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::Obj(ObjRef::Stream(s)) => Ok(Some(s)),
            _ => Err(errors::WRONGTYPE),
        },
    }
}

pub(super) fn with_stream<T>(
    ctx: &mut Ctx,
    key: &[u8],
    f: impl FnOnce(&mut Stream) -> T,
) -> Result<Option<T>, Reply> {
    let Some(mut e) = ctx.lookup_write(key) else {
        return Ok(None);
    };
    match e.object_mut() {
        Some(ObjMut::Stream(s)) => Ok(Some(f(s))),
        _ => Err(errors::WRONGTYPE),
    }
}

pub(super) fn nogroup_key_group(key: &[u8], group: &[u8]) -> Reply {
    Reply::error(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ))
}

pub(super) fn nogroup_for_key(key: &[u8], group: &[u8]) -> Reply {
    Reply::error(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        String::from_utf8_lossy(group),
        String::from_utf8_lossy(key)
    ))
}

pub(super) fn node_limits(ctx: &Ctx) -> (usize, usize) {
    let c = &ctx.ex.config;
    (
        c.stream_node_max_bytes.max(0) as usize,
        c.stream_node_max_entries.max(0) as usize,
    )
}

pub(super) fn arg_ll(a: &[u8]) -> Result<i64, Reply> {
    crate::util::numeric::parse_i64(a).ok_or(errors::NOT_INTEGER)
}

// ----- XADD / XTRIM -----------------------------------------------------------------

#[derive(Default)]
pub(super) struct AddTrim {
    trim: Option<Trim>,
    approx: bool,
    limit: u64,
    nomkstream: bool,
    /// The explicit ID and whether its sequence was `*`.
    id: Option<(StreamId, bool)>,
    /// Index of the first argument after the options (XADD: the first field).
    next: usize,
    /// Index of the MAXLEN/MINID value (its `~` is the argument before it).
    trim_at: usize,
}

impl AddTrim {
    /// The arguments replicas and the AOF get after an approximate trim, as Redis's
    /// streamRewriteApproxSpecifier/streamRewriteTrimArgument: `~ n` becomes `= len`
    /// (MAXLEN) or `= first-id` (MINID) of the stream as trimmed here, since `~`
    /// trims whole nodes and node sizes may differ where the command is replayed.
    fn exact_trim_args(&self, args: &[&[u8]], s: &Stream) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        out[self.trim_at - 1] = b"=".to_vec();
        out[self.trim_at] = match self.trim {
            Some(Trim::MaxLen(_)) => s.len().to_string().into_bytes(),
            _ => s.edge(false).map_or(StreamId::MAX, |e| e.id).to_bytes(),
        };
        out
    }
}

/// Redis's streamParseAddOrTrimArgsOrReply.
pub(super) fn parse_trim(ctx: &Ctx, args: &[&[u8]], xadd: bool) -> Result<AddTrim, Reply> {
    let mut o = AddTrim::default();
    let mut limit_given = false;
    let mut limit: i64 = 0;
    let mut i = 2;
    const BOTH: Reply = Reply::err(
        "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
    );
    while i < args.len() {
        let more = args.len() - 1 - i;
        let a = args[i];
        if xadd && a == b"*" {
            i += 1;
            break;
        } else if (is(a, "maxlen") || is(a, "minid")) && more > 0 {
            if o.trim.is_some() {
                return Err(BOTH);
            }
            o.approx = false;
            let next = args[i + 1];
            if more >= 2 && next == b"~" {
                o.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let v = args[i + 1];
            o.trim_at = i + 1;
            if is(a, "maxlen") {
                let n = arg_ll(v)?;
                if n < 0 {
                    return Err(Reply::err("ERR The MAXLEN argument must be >= 0."));
                }
                o.trim = Some(Trim::MaxLen(n as u64));
            } else {
                o.trim = Some(Trim::MinId(parse_strict(v)?));
            }
            i += 2;
        } else if is(a, "limit") && more > 0 {
            limit = arg_ll(args[i + 1])?;
            if limit < 0 {
                return Err(Reply::err("ERR The LIMIT argument must be >= 0."));
            }
            limit_given = true;
            i += 2;
        } else if xadd && is(a, "nomkstream") {
            o.nomkstream = true;
            i += 1;
        } else if xadd {
            o.id = Some(StreamId::parse(a, 0, true).ok_or(INVALID_ID)?);
            i += 1;
            break;
        } else {
            return Err(errors::SYNTAX);
        }
    }
    o.next = i;
    if limit != 0 && o.trim.is_none() {
        return Err(Reply::err(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && o.trim.is_none() {
        return Err(Reply::err(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if ctx.must_obey() {
        // What a master or the AOF sends was made exact where it first ran
        // (`AddTrim::exact_trim_args`): no node limit applies, LIMIT is ignored.
        o.limit = 0;
    } else if limit_given {
        if !o.approx {
            return Err(Reply::err(
                "ERR syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
        o.limit = limit as u64;
    } else if o.approx {
        let n = ctx.ex.config.stream_node_max_entries.saturating_mul(100);
        o.limit = if n <= 0 {
            10000
        } else {
            n.min(1_000_000) as u64
        };
    }
    Ok(o)
}

pub(super) fn xadd(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let key = args[1];
    let o = match parse_trim(ctx, args, true) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let fields = &args[o.next.min(args.len())..];
    if fields.len() < 2 || fields.len() % 2 == 1 {
        return crate::commands::wrong_arity("xadd");
    }
    if let Some((id, false)) = o.id {
        if id.is_zero() {
            return Reply::err("ERR The ID specified in XADD must be greater than 0-0");
        }
    }
    let (max_bytes, max_entries) = node_limits(ctx);
    let now = ctx.now_ms.max(0) as u64;
    let propagating = ctx.ex.stream.enabled;
    type Added = (StreamId, u64, Option<Vec<Vec<u8>>>);
    let add = |s: &mut Stream| -> Result<Added, Reply> {
        if s.last_id == StreamId::MAX {
            return Err(Reply::err(
                "ERR The stream has exhausted the last possible ID, unable to add more items",
            ));
        }
        const SMALLER: Reply = Reply::err(
            "ERR The ID specified in XADD is equal or smaller than the target stream top item",
        );
        let id = match o.id {
            None => s.next_id(now).ok_or(SMALLER)?,
            Some((id, false)) => id,
            Some((id, true)) => {
                if id.ms == s.last_id.ms {
                    if s.last_id.seq == u64::MAX {
                        return Err(SMALLER);
                    }
                    StreamId::new(id.ms, s.last_id.seq + 1)
                } else {
                    id
                }
            }
        };
        if id <= s.last_id {
            return Err(SMALLER);
        }
        s.append(id, fields, max_bytes, max_entries);
        let trimmed = match o.trim {
            Some(t) => s.trim(t, o.approx, o.limit),
            None => 0,
        };
        // Propagated with the ID assigned, and an approximate trim made exact.
        let prop = propagating.then(|| {
            let mut cmd = if o.approx {
                o.exact_trim_args(args, s)
            } else {
                args.iter().map(|a| a.to_vec()).collect()
            };
            cmd[o.next - 1] = id.to_bytes();
            cmd
        });
        Ok((id, trimmed, prop))
    };
    let res = match with_stream(ctx, key, add) {
        Err(e) => return e,
        Ok(Some(r)) => r,
        Ok(None) => {
            if o.nomkstream {
                return Reply::Null;
            }
            let mut s = Stream::new();
            let r = add(&mut s);
            if r.is_ok() {
                ctx.set(key, Value::Obj(Object::Stream(Box::new(s))), None, false);
            }
            r
        }
    };
    match res {
        Err(e) => e,
        Ok((id, trimmed, prop)) => {
            ctx.modified(key);
            ctx.notify(notify::STREAM, "xadd", key);
            if trimmed > 0 {
                ctx.notify(notify::STREAM, "xtrim", key);
            }
            if let Some(cmd) = prop {
                ctx.propagate_as(vec![cmd]);
            }
            id_reply(id)
        }
    }
}

pub(super) fn xtrim(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let key = args[1];
    // The arguments first, then the key's type, as in Redis.
    let o = match parse_trim(ctx, args, false) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let Some(t) = o.trim else {
        return errors::SYNTAX;
    };
    if let Err(e) = read_stream(ctx, key) {
        return e;
    }
    let trim = |s: &mut Stream| {
        let n = s.trim(t, o.approx, o.limit);
        (n, (n > 0 && o.approx).then(|| o.exact_trim_args(args, s)))
    };
    match with_stream(ctx, key, trim) {
        Err(e) => e,
        Ok(None) => Reply::Int(0),
        Ok(Some((n, exact))) => {
            if n > 0 {
                ctx.modified(key);
                ctx.notify(notify::STREAM, "xtrim", key);
            }
            if let Some(cmd) = exact {
                ctx.propagate_as(vec![cmd]);
            }
            Reply::Int(n as i64)
        }
    }
}

pub(super) fn xlen(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match read_stream(ctx, args[1]) {
        Err(e) => e,
        Ok(None) => Reply::Int(0),
        Ok(Some(s)) => Reply::Int(s.len() as i64),
    }
}

pub(super) fn xdel(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let key = args[1];
    // The key (0 when missing, WRONGTYPE) before the IDs; every ID is checked before
    // any entry is deleted, as in Redis.
    let delete = |s: &mut Stream| {
        let ids = args[2..]
            .iter()
            .map(|a| parse_strict(a))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ids.iter().filter(|id| s.delete(**id)).count())
    };
    match with_stream(ctx, key, delete) {
        Err(e) | Ok(Some(Err(e))) => e,
        Ok(None) => Reply::Int(0),
        Ok(Some(Ok(n))) => {
            if n > 0 {
                ctx.modified(key);
                ctx.notify(notify::STREAM, "xdel", key);
            }
            Reply::Int(n as i64)
        }
    }
}

// ----- XRANGE / XREVRANGE -----------------------------------------------------------

pub(super) fn range_generic(ctx: &mut Ctx, args: &[&[u8]], rev: bool) -> Reply {
    let (sa, ea) = if rev {
        (args[3], args[2])
    } else {
        (args[2], args[3])
    };
    let start = match parse_bound(sa, 0, true) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let end = match parse_bound(ea, u64::MAX, false) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        if is(args[j], "count") && j + 1 < args.len() {
            count = match arg_ll(args[j + 1]) {
                Ok(n) => n.max(0),
                Err(e) => return e,
            };
            j += 2;
        } else {
            return errors::SYNTAX;
        }
    }
    match read_stream(ctx, args[1]) {
        Err(e) => e,
        Ok(None) => Reply::Array(vec![]),
        Ok(Some(_)) if count == 0 => Reply::NullArray,
        Ok(Some(s)) => range_reply(s, start, end, count.max(0) as usize, rev),
    }
}

pub(super) fn xrange(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    range_generic(ctx, args, false)
}

pub(super) fn xrevrange(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    range_generic(ctx, args, true)
}

// ----- XREAD / XREADGROUP -----------------------------------------------------------

/// What to read from one stream.
#[derive(Clone, Copy)]
pub(super) enum ReadFrom {
    /// Entries after this ID.
    After(StreamId),
    /// XREADGROUP `>`: entries never delivered to the group.
    New,
}

pub(super) fn read_generic(ctx: &mut Ctx, args: &[&[u8]], group: bool) -> Reply {
    let mut count: usize = 0;
    let mut block_ms: Option<i64> = None;
    let mut streams_at = 0;
    let mut gname: &[u8] = b"";
    let mut cname: &[u8] = b"";
    let mut have_group = false;
    let mut noack = false;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let a = args[i];
        if is(a, "block") && more > 0 {
            block_ms = match crate::exec::blocking::parse_timeout_ms(args[i + 1], ctx.now_ms) {
                Ok(t) => Some(t),
                Err(e) => return e,
            };
            i += 2;
        } else if is(a, "count") && more > 0 {
            count = match arg_ll(args[i + 1]) {
                Ok(n) => n.max(0) as usize,
                Err(e) => return e,
            };
            i += 2;
        } else if is(a, "streams") && more > 0 {
            streams_at = i + 1;
            if !(args.len() - streams_at).is_multiple_of(2) {
                let (name, sym) = if group {
                    ("xreadgroup", '>')
                } else {
                    ("xread", '$')
                };
                return Reply::error(format!("ERR Unbalanced '{name}' list of streams: for each stream key an ID or '{sym}' must be specified."));
            }
            break;
        } else if is(a, "group") && more >= 2 {
            if !group {
                return Reply::err("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.");
            }
            gname = args[i + 1];
            cname = args[i + 2];
            have_group = true;
            i += 3;
        } else if is(a, "noack") {
            if !group {
                return Reply::err("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.");
            }
            noack = true;
            i += 1;
        } else {
            return errors::SYNTAX;
        }
    }
    if streams_at == 0 {
        return errors::SYNTAX;
    }
    if group && !have_group {
        return Reply::err("ERR Missing GROUP option for XREADGROUP");
    }
    let n = (args.len() - streams_at) / 2;
    let keys: Vec<&[u8]> = args[streams_at..streams_at + n].to_vec();
    let mut from = Vec::with_capacity(n);
    let mut rewritten: Vec<Option<StreamId>> = vec![None; n];
    for (k, key) in keys.iter().enumerate() {
        let a = args[streams_at + n + k];
        let s = match read_stream(ctx, key) {
            Err(e) => return e,
            Ok(s) => s,
        };
        if group && s.is_none_or(|s| !s.groups.contains_key(gname)) {
            return Reply::error(format!(
                "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(gname)
            ));
        }
        let last = s.map(|s| s.last_id).unwrap_or_default();
        if a == b"$" {
            if group {
                return Reply::err("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.");
            }
            from.push(ReadFrom::After(last));
            rewritten[k] = Some(last);
        } else if a == b"+" {
            if group {
                return Reply::err("ERR The + ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The + ID would just return an empty result set.");
            }
            from.push(ReadFrom::After(last.decr().unwrap_or_default()));
        } else if a == b">" {
            if !group {
                return Reply::err("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.");
            }
            from.push(ReadFrom::New);
        } else {
            match parse_strict(a) {
                Ok(id) => from.push(ReadFrom::After(id)),
                Err(e) => return e,
            }
        }
    }

    let now = ctx.now_ms;
    let mut served: Vec<(Reply, Reply)> = Vec::new();
    let mut prop = GroupProp::default();
    for (k, key) in keys.iter().enumerate() {
        let r = if group {
            serve_group(
                ctx, key, gname, cname, from[k], count, noack, now, &mut prop,
            )
        } else {
            match read_stream(ctx, key) {
                Err(e) => return e,
                Ok(None) => None,
                Ok(Some(s)) => match from[k] {
                    ReadFrom::After(id) => {
                        let last_valid = s.last_live_id();
                        if !s.is_empty() && last_valid.is_some_and(|m| m > id) {
                            id.incr()
                                .map(|st| range_reply(s, st, StreamId::MAX, count, false))
                        } else {
                            None
                        }
                    }
                    ReadFrom::New => None,
                },
            }
        };
        if let Some(r) = r {
            served.push((Reply::bulk(key), r));
        }
    }
    if group {
        prop.finish(ctx);
    }
    if !served.is_empty() {
        return if ctx.proto() >= 3 {
            Reply::Map(served)
        } else {
            Reply::Array(
                served
                    .into_iter()
                    .map(|(k, v)| Reply::Array(vec![k, v]))
                    .collect(),
            )
        };
    }
    let Some(ms) = block_ms else {
        return Reply::NullArray;
    };
    let deadline = if ms == 0 {
        None
    } else {
        Some(
            Instant::now()
                .checked_add(Duration::from_millis(ms as u64))
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(100 * 365 * 86400)),
        )
    };
    // `$` becomes the concrete last ID, so a wake-up re-run sees only newer entries.
    let ids_text: Vec<Vec<u8>> = rewritten
        .iter()
        .map(|r| r.map(|id| id.to_bytes()).unwrap_or_default())
        .collect();
    let mut stored: Vec<&[u8]> = args.to_vec();
    for (k, r) in rewritten.iter().enumerate() {
        if r.is_some() {
            stored[streams_at + n + k] = &ids_text[k];
        }
    }
    let reply = blocking::block(ctx, &stored, &keys, "stream", deadline, Reply::NullArray);
    if group && matches!(reply, Reply::NoReply) {
        ctx.ex.blocking.wake_on_any_change(ctx.client);
    }
    reply
}

/// The commands that reproduce a consumer-group command's effect on replay (AOF,
/// replicas), as Redis propagates them instead of the command itself: each entry
/// delivered or claimed becomes `XCLAIM key group consumer 0 id TIME ms RETRYCOUNT n
/// FORCE JUSTID LASTID last` (carrying the exact delivery time, count and owner), a
/// moved group position `XGROUP SETID key group id ENTRIESREAD n`, and a consumer
/// created on the way `XGROUP CREATECONSUMER key group consumer` (by XREADGROUP only
/// under NOACK, as Redis). History re-reads are not propagated, as in Redis.
#[derive(Default)]
pub(super) struct GroupProp(Vec<Vec<Vec<u8>>>);

impl GroupProp {
    pub(super) fn xclaim(
        &mut self,
        key: &[u8],
        group: &[u8],
        id: StreamId,
        n: &Nack,
        last: StreamId,
    ) {
        self.0.push(vec![
            b"XCLAIM".to_vec(),
            key.to_vec(),
            group.to_vec(),
            n.consumer.to_vec(),
            b"0".to_vec(),
            id.to_bytes(),
            b"TIME".to_vec(),
            n.delivery_time.to_string().into_bytes(),
            b"RETRYCOUNT".to_vec(),
            n.delivery_count.to_string().into_bytes(),
            b"FORCE".to_vec(),
            b"JUSTID".to_vec(),
            b"LASTID".to_vec(),
            last.to_bytes(),
        ]);
    }

    pub(super) fn setid(&mut self, key: &[u8], group: &[u8], g: &Group) {
        self.0.push(vec![
            b"XGROUP".to_vec(),
            b"SETID".to_vec(),
            key.to_vec(),
            group.to_vec(),
            g.last_id.to_bytes(),
            b"ENTRIESREAD".to_vec(),
            g.entries_read.to_string().into_bytes(),
        ]);
    }

    pub(super) fn create_consumer(&mut self, key: &[u8], group: &[u8], consumer: &[u8]) {
        self.0.push(vec![
            b"XGROUP".to_vec(),
            b"CREATECONSUMER".to_vec(),
            key.to_vec(),
            group.to_vec(),
            consumer.to_vec(),
        ]);
    }

    /// Hands the commands to the write stream (replacing the verbatim command).
    pub(super) fn finish(self, ctx: &mut Ctx) {
        ctx.propagate_as(self.0);
    }
}

/// Serves one stream of an XREADGROUP: `Some(reply)` when it is served now.
#[allow(clippy::too_many_arguments)]
pub(super) fn serve_group(
    ctx: &mut Ctx,
    key: &[u8],
    gname: &[u8],
    cname: &[u8],
    from: ReadFrom,
    count: usize,
    noack: bool,
    now: i64,
    prop: &mut GroupProp,
) -> Option<Reply> {
    let mut created = false;
    let mut delivered = false;
    let r = with_stream(ctx, key, |s| {
        let g = s.groups.get_mut(gname)?;
        let (c, cr) = g.consumer(cname, now);
        created = cr;
        c.seen_time = now;
        // Redis propagates a consumer created by XREADGROUP only under NOACK: otherwise
        // the XCLAIMs of what it is delivered create it on replay.
        if cr && noack {
            prop.create_consumer(key, gname, cname);
        }
        match from {
            ReadFrom::After(start) => {
                // History: this consumer's pending entries after `start`.
                let ids: Vec<StreamId> = match start.incr() {
                    None => vec![],
                    Some(st) => {
                        let it = c.pel.range(st..);
                        if count == 0 {
                            it.copied().collect()
                        } else {
                            it.take(count).copied().collect()
                        }
                    }
                };
                let mut out = Vec::with_capacity(ids.len());
                for id in ids {
                    match s.get(id) {
                        Some(e) => {
                            if let Some(n) =
                                s.groups.get_mut(gname).and_then(|g| g.pel.get_mut(&id))
                            {
                                n.delivery_time = now;
                                n.delivery_count += 1;
                            }
                            out.push(entry_reply(e));
                        }
                        None => out.push(Reply::Array(vec![id_reply(id), Reply::NullArray])),
                    }
                }
                // As in Redis, a history re-delivery's new delivery time and count are
                // too minor a change to dirty the dataset or be propagated.
                Some(Reply::Array(out))
            }
            ReadFrom::New => {
                let last = g.last_id;
                let max = s.last_live_id()?;
                if max <= last {
                    return None;
                }
                // Encoded as XRANGE is, then the IDs are delivered.
                let mut body = Vec::new();
                let mut ids: smallvec::SmallVec<[StreamId; 8]> = smallvec::SmallVec::new();
                let n = s.range_each(last.incr()?, StreamId::MAX, count, false, |id, pairs| {
                    encode_entry(&mut body, id, pairs);
                    ids.push(id);
                });
                for id in ids {
                    s.advance_group(gname, id);
                    if !noack {
                        let g = s.groups.get_mut(gname).expect("group");
                        g.assign(id, cname, now, 1);
                        if let Some(n) = g.pel.get(&id) {
                            prop.xclaim(key, gname, id, n, g.last_id);
                        }
                    }
                }
                if n > 0 {
                    delivered = true;
                    if let Some(g) = s.groups.get(gname) {
                        prop.setid(key, gname, g);
                    }
                }
                Some(Reply::EncodedArray(n, body))
            }
        }
    })
    .ok()
    .flatten()
    .flatten();
    if delivered {
        if let Ok(Some(())) = with_stream(ctx, key, |s| {
            if let Some(c) = s
                .groups
                .get_mut(gname)
                .and_then(|g| g.consumers.get_mut(cname))
            {
                c.active_time = now;
            }
        }) {}
    }
    if created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
        // Nothing delivered: no XCLAIM will create the consumer on replay, so its
        // creation is propagated (Redis drops it; replay stays exact here).
        if !noack && !delivered {
            prop.create_consumer(key, gname, cname);
        }
    }
    if created || delivered {
        ctx.ex.ks.dirty += 1;
    }
    r
}

pub(super) fn xread(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    read_generic(ctx, args, false)
}

pub(super) fn xreadgroup(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    read_generic(ctx, args, true)
}

// ----- XSETID -----------------------------------------------------------------------

pub(super) fn xsetid(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let key = args[1];
    let id = match parse_strict(args[2]) {
        Ok(id) => id,
        Err(e) => return e,
    };
    let mut entries_added: i64 = -1;
    let mut max_xdel = StreamId::MIN;
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if is(args[i], "entriesadded") && more > 0 {
            entries_added = match arg_ll(args[i + 1]) {
                Ok(n) => n,
                Err(e) => return e,
            };
            if entries_added < 0 {
                return Reply::err("ERR entries_added must be positive");
            }
            i += 2;
        } else if is(args[i], "maxdeletedid") && more > 0 {
            max_xdel = match parse_strict(args[i + 1]) {
                Ok(id) => id,
                Err(e) => return e,
            };
            if id < max_xdel {
                return Reply::err("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id");
            }
            i += 2;
        } else {
            return errors::SYNTAX;
        }
    }
    let r = with_stream(ctx, key, |s| {
        if id < s.max_deleted {
            return Err(Reply::err(
                "ERR The ID specified in XSETID is smaller than current max_deleted_entry_id",
            ));
        }
        if !s.is_empty() {
            let maxid = s.last_live_id().unwrap_or_default();
            if id < maxid {
                return Err(Reply::err(
                    "ERR The ID specified in XSETID is smaller than the target stream top item",
                ));
            }
            if entries_added != -1 && s.len() > entries_added as u64 {
                return Err(Reply::err("ERR The entries_added specified in XSETID is smaller than the target stream length"));
            }
        }
        s.last_id = id;
        if entries_added != -1 {
            s.entries_added = entries_added as u64;
        }
        if !max_xdel.is_zero() {
            s.max_deleted = max_xdel;
        }
        Ok(())
    });
    match r {
        Err(e) | Ok(Some(Err(e))) => e,
        Ok(None) => errors::NO_SUCH_KEY,
        Ok(Some(Ok(()))) => {
            ctx.modified(key);
            ctx.notify(notify::STREAM, "xsetid", key);
            Reply::ok()
        }
    }
}
