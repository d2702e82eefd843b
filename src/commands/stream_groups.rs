//! Stream consumer groups and introspection: XGROUP, XACK, XPENDING, XCLAIM,
//! XAUTOCLAIM and XINFO. The command rows and the shared helpers are in streams.rs.

use crate::commands::ctx::notify;
use crate::commands::{errors, is, Ctx};
use crate::keyspace::{Object, Value};
use crate::protocol::Reply;
use crate::types::stream::{Group, Stream, StreamId, ENTRIES_READ_INVALID};

use super::streams::*;

// ----- XGROUP -----------------------------------------------------------------------

/// Looks up the stream for XGROUP subcommands (WRONGTYPE / missing-key errors).
pub(super) fn xgroup_stream(
    ctx: &mut Ctx,
    args: &[&[u8]],
    create: bool,
    mkstream: bool,
) -> Result<bool, Reply> {
    let exists = read_stream(ctx, args[2])?.is_some();
    if !(exists || (create && mkstream)) {
        return Err(Reply::err("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."));
    }
    Ok(exists)
}

/// Parses CREATE/SETID's trailing options: (mkstream, entries_read).
pub(super) fn parse_group_opts(args: &[&[u8]], create: bool) -> Result<(bool, i64), Reply> {
    let mut mkstream = false;
    let mut entries_read = ENTRIES_READ_INVALID;
    let mut i = 5;
    while i < args.len() {
        if create && is(args[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if is(args[i], "entriesread") && i + 1 < args.len() {
            entries_read = arg_ll(args[i + 1])?;
            if entries_read < 0 && entries_read != ENTRIES_READ_INVALID {
                return Err(Reply::err(
                    "ERR value for ENTRIESREAD must be positive or -1",
                ));
            }
            i += 2;
        } else {
            return Err(super::subcommand_syntax_error(args));
        }
    }
    Ok((mkstream, entries_read))
}

pub(super) fn xgroup_create(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if args.len() > 8 {
        return super::subcommand_syntax_error(args);
    }
    let (mkstream, entries_read) = match parse_group_opts(args, true) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let (key, gname) = (args[2], args[3]);
    let exists = match xgroup_stream(ctx, args, true, mkstream) {
        Ok(e) => e,
        Err(e) => return e,
    };
    let id = if args[4] == b"$" {
        None
    } else {
        match parse_strict(args[4]) {
            Ok(id) => Some(id),
            Err(e) => return e,
        }
    };
    if !exists {
        ctx.set(
            key,
            Value::Obj(Object::Stream(Box::new(Stream::new()))),
            None,
            false,
        );
    }
    let r = with_stream(ctx, key, |s| {
        if s.groups.contains_key(gname) {
            return false;
        }
        let id = id.unwrap_or(s.last_id);
        s.groups
            .insert(gname.to_vec(), Group::new(id, entries_read));
        true
    });
    match r {
        Err(e) => e,
        Ok(Some(true)) => {
            ctx.ex.ks.dirty += 1;
            ctx.notify(notify::STREAM, "xgroup-create", key);
            Reply::ok()
        }
        _ => Reply::err("BUSYGROUP Consumer Group name already exists"),
    }
}

/// Runs `f` on an existing group, with XGROUP's errors.
pub(super) fn with_group<T>(
    ctx: &mut Ctx,
    args: &[&[u8]],
    f: impl FnOnce(&mut Stream) -> T,
) -> Result<T, Reply> {
    xgroup_stream(ctx, args, false, false)?;
    let (key, gname) = (args[2], args[3]);
    let r = with_stream(ctx, key, |s| {
        if s.groups.contains_key(gname) {
            Some(f(s))
        } else {
            None
        }
    })?;
    r.flatten().ok_or_else(|| nogroup_for_key(key, gname))
}

pub(super) fn xgroup_setid(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if args.len() != 5 && args.len() != 7 {
        return super::subcommand_syntax_error(args);
    }
    let (_, entries_read) = match parse_group_opts(args, false) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let gname = args[3];
    // The key and the group are checked before the ID is parsed, as in Redis.
    match with_group(ctx, args, |s| {
        let id = if args[4] == b"$" {
            s.last_id
        } else {
            match parse_bound(args[4], 0, true) {
                Ok(id) if args[4].first() != Some(&b'(') => id,
                Ok(_) => return Err(INVALID_ID),
                Err(e) => return Err(e),
            }
        };
        if let Some(g) = s.groups.get_mut(gname) {
            g.last_id = id;
            g.entries_read = entries_read;
        }
        Ok(())
    }) {
        Err(e) | Ok(Err(e)) => e,
        Ok(Ok(())) => {
            ctx.ex.ks.dirty += 1;
            ctx.notify(notify::STREAM, "xgroup-setid", args[2]);
            Reply::ok()
        }
    }
}

pub(super) fn xgroup_destroy(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let key = args[2];
    if let Err(e) = xgroup_stream(ctx, args, false, false) {
        return e;
    }
    match with_stream(ctx, key, |s| s.groups.remove(args[3]).is_some()) {
        Err(e) => e,
        Ok(Some(true)) => {
            ctx.ex.ks.dirty += 1;
            ctx.notify(notify::STREAM, "xgroup-destroy", key);
            // Wakes XREADGROUP clients blocked on this group (they answer NOGROUP).
            ctx.ex.blocking.signal(ctx.db, key);
            Reply::Int(1)
        }
        _ => Reply::Int(0),
    }
}

pub(super) fn xgroup_createconsumer(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (gname, cname, now) = (args[3], args[4], ctx.now_ms);
    match with_group(ctx, args, |s| {
        s.groups
            .get_mut(gname)
            .map(|g| g.consumer(cname, now).1)
            .unwrap_or(false)
    }) {
        Err(e) => e,
        Ok(created) => {
            if created {
                ctx.ex.ks.dirty += 1;
                ctx.notify(notify::STREAM, "xgroup-createconsumer", args[2]);
            }
            Reply::Int(created as i64)
        }
    }
}

pub(super) fn xgroup_delconsumer(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (gname, cname) = (args[3], args[4]);
    match with_group(ctx, args, |s| {
        s.groups
            .get_mut(gname)
            .and_then(|g| g.delete_consumer(cname))
    }) {
        Err(e) => e,
        Ok(None) => Reply::Int(0),
        Ok(Some(n)) => {
            ctx.ex.ks.dirty += 1;
            ctx.notify(notify::STREAM, "xgroup-delconsumer", args[2]);
            Reply::Int(n as i64)
        }
    }
}

pub(super) fn xgroup_help(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    crate::commands::keys::help_reply(
        "XGROUP",
        &[
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
        ],
    )
}

// ----- XACK / XPENDING --------------------------------------------------------------

pub(super) fn xack(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (key, gname) = (args[1], args[2]);
    // No key or no group: nothing to acknowledge, whatever the IDs (Redis's order).
    match read_stream(ctx, key) {
        Err(e) => return e,
        Ok(Some(s)) if s.groups.contains_key(gname) => {}
        Ok(_) => return Reply::Int(0),
    }
    // Every ID is validated before any is acknowledged, as Redis does; most XACKs
    // carry a few IDs, kept on the stack.
    let mut ids: smallvec::SmallVec<[StreamId; 8]> = smallvec::SmallVec::new();
    for a in &args[3..] {
        match parse_strict(a) {
            Ok(id) => ids.push(id),
            Err(e) => return e,
        }
    }
    let n = with_stream(ctx, key, |s| match s.groups.get_mut(gname) {
        None => 0,
        Some(g) => ids.iter().filter(|id| g.ack(**id)).count(),
    });
    match n {
        Err(e) => e,
        Ok(n) => {
            let n = n.unwrap_or(0);
            if n > 0 {
                ctx.ex.ks.dirty += 1;
            }
            Reply::Int(n as i64)
        }
    }
}

pub(super) fn xpending(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (key, gname) = (args[1], args[2]);
    let argc = args.len();
    if argc != 3 && !(6..=9).contains(&argc) {
        return errors::SYNTAX;
    }
    let mut range = None;
    if argc >= 6 {
        let mut at = 3;
        let mut minidle = 0i64;
        if is(args[3], "idle") {
            minidle = match arg_ll(args[4]) {
                Ok(n) => n,
                Err(e) => return e,
            };
            if argc < 8 {
                return errors::SYNTAX;
            }
            at += 2;
        }
        let count = match arg_ll(args[at + 2]) {
            Ok(n) => n.max(0) as usize,
            Err(e) => return e,
        };
        let start = match parse_bound(args[at], 0, true) {
            Ok(v) => v,
            Err(e) => return e,
        };
        let end = match parse_bound(args[at + 1], u64::MAX, false) {
            Ok(v) => v,
            Err(e) => return e,
        };
        let consumer = args.get(at + 3).copied();
        range = Some((minidle, start, end, count, consumer));
    }
    let now = ctx.now_ms;
    let s = match read_stream(ctx, key) {
        Err(e) => return e,
        Ok(s) => s,
    };
    let Some(g) = s.and_then(|s| s.groups.get(gname)) else {
        return nogroup_key_group(key, gname);
    };
    let Some((minidle, start, end, mut count, consumer)) = range else {
        if g.pel.is_empty() {
            return Reply::Array(vec![
                Reply::Int(0),
                Reply::Null,
                Reply::Null,
                Reply::NullArray,
            ]);
        }
        let first = *g.pel.keys().next().expect("pel");
        let last = *g.pel.keys().next_back().expect("pel");
        let consumers = g
            .consumers
            .iter()
            .filter(|(_, c)| !c.pel.is_empty())
            .map(|(n, c)| {
                Reply::Array(vec![
                    Reply::bulk(n),
                    Reply::Bulk(c.pel.len().to_string().into_bytes()),
                ])
            })
            .collect();
        return Reply::Array(vec![
            Reply::Int(g.pel.len() as i64),
            id_reply(first),
            id_reply(last),
            Reply::Array(consumers),
        ]);
    };
    let ids: Box<dyn Iterator<Item = &StreamId>> = match consumer {
        Some(c) => match g.consumers.get(c) {
            None => return Reply::Array(vec![]),
            Some(c) => Box::new(c.pel.range(start..)),
        },
        None => Box::new(g.pel.keys().filter(move |id| **id >= start)),
    };
    let mut out = Vec::new();
    if start <= end {
        for id in ids {
            if count == 0 || *id > end {
                break;
            }
            let Some(n) = g.pel.get(id) else { continue };
            if minidle != 0 && now - n.delivery_time < minidle {
                continue;
            }
            count -= 1;
            out.push(Reply::Array(vec![
                id_reply(*id),
                Reply::bulk(&n.consumer),
                Reply::Int((now - n.delivery_time).max(0)),
                Reply::Int(n.delivery_count as i64),
            ]));
        }
    }
    Reply::Array(out)
}

// ----- XCLAIM / XAUTOCLAIM ----------------------------------------------------------

pub(super) fn xclaim(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (key, gname, cname) = (args[1], args[2], args[3]);
    let has_group = match read_stream(ctx, key) {
        Err(e) => return e,
        Ok(s) => s.is_some_and(|s| s.groups.contains_key(gname)),
    };
    if !has_group {
        return nogroup_key_group(key, gname);
    }
    let minidle = match crate::util::numeric::parse_i64(args[4]) {
        Some(n) => n.max(0),
        None => return Reply::err("ERR Invalid min-idle-time argument for XCLAIM"),
    };
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match StreamId::parse(args[j], 0, false) {
            Some((id, _)) => ids.push(id),
            None => break,
        }
        j += 1;
    }
    let now = ctx.now_ms;
    let (mut force, mut justid) = (false, false);
    let mut retrycount: i64 = -1;
    let mut deliverytime: i64 = -1;
    let mut last_id = StreamId::MIN;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let a = args[j];
        let num = |v: &[u8], what: &str| {
            crate::util::numeric::parse_i64(v).ok_or_else(|| {
                Reply::error(format!("ERR Invalid {what} option argument for XCLAIM"))
            })
        };
        if is(a, "force") {
            force = true;
        } else if is(a, "justid") {
            justid = true;
        } else if is(a, "idle") && more > 0 {
            j += 1;
            match num(args[j], "IDLE") {
                Ok(n) => deliverytime = now.saturating_sub(n),
                Err(e) => return e,
            }
        } else if is(a, "time") && more > 0 {
            j += 1;
            match num(args[j], "TIME") {
                Ok(n) => deliverytime = n,
                Err(e) => return e,
            }
        } else if is(a, "retrycount") && more > 0 {
            j += 1;
            match num(args[j], "RETRYCOUNT") {
                Ok(n) => retrycount = n,
                Err(e) => return e,
            }
        } else if is(a, "lastid") && more > 0 {
            j += 1;
            match parse_strict(args[j]) {
                Ok(id) => last_id = id,
                Err(e) => return e,
            }
        } else {
            return Reply::error(format!(
                "ERR Unrecognized XCLAIM option '{}'",
                String::from_utf8_lossy(a)
            ));
        }
        j += 1;
    }
    if deliverytime < 0 || deliverytime > now {
        deliverytime = now;
    }
    let mut created = false;
    let mut prop = GroupProp::default();
    let r = with_stream(ctx, key, |s| {
        let g = s.groups.get_mut(gname).expect("group");
        let mut moved_last = false;
        if last_id > g.last_id {
            g.last_id = last_id;
            moved_last = true;
        }
        let (c, cr) = g.consumer(cname, now);
        created = cr;
        c.seen_time = now;
        if cr {
            prop.create_consumer(key, gname, cname);
        }
        let mut out = Vec::new();
        for id in ids {
            let exists = s.contains(id);
            let g = s.groups.get_mut(gname).expect("group");
            if !exists {
                // Replayed, the XCLAIM drops the entry from the PEL the same way.
                if let Some(n) = g.pel.get(&id) {
                    prop.xclaim(key, gname, id, n, g.last_id);
                    moved_last = false;
                }
                g.ack(id);
                continue;
            }
            let (prev_count, fresh) = match g.pel.get(&id) {
                Some(n) => {
                    if minidle != 0 && now - n.delivery_time < minidle {
                        continue;
                    }
                    (n.delivery_count, false)
                }
                None if force => (1, true),
                None => continue,
            };
            let _ = fresh;
            let count = if retrycount >= 0 {
                retrycount as u64
            } else if !justid {
                prev_count + 1
            } else {
                prev_count
            };
            g.assign(id, cname, deliverytime, count);
            if let Some(c) = g.consumers.get_mut(cname) {
                c.active_time = now;
            }
            if let Some(n) = g.pel.get(&id) {
                prop.xclaim(key, gname, id, n, g.last_id);
                moved_last = false;
            }
            if justid {
                out.push(id_reply(id));
            } else {
                out.push(s.get(id).map(entry_reply).unwrap_or(Reply::Null));
            }
        }
        // LASTID moved the group but no XCLAIM carries it.
        if moved_last {
            if let Some(g) = s.groups.get(gname) {
                prop.setid(key, gname, g);
            }
        }
        Reply::Array(out)
    });
    prop.finish(ctx);
    ctx.ex.ks.dirty += 1;
    if created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
    match r {
        Err(e) => e,
        Ok(r) => r.unwrap_or(Reply::Array(vec![])),
    }
}

pub(super) fn xautoclaim(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (key, gname, cname) = (args[1], args[2], args[3]);
    let minidle = match crate::util::numeric::parse_i64(args[4]) {
        Some(n) => n.max(0),
        None => return Reply::err("ERR Invalid min-idle-time argument for XAUTOCLAIM"),
    };
    let start = match parse_bound(args[5], 0, true) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if is(args[j], "count") && more > 0 {
            let max = i64::MAX / 16;
            match crate::util::numeric::parse_i64(args[j + 1]) {
                Some(n) if (1..=max).contains(&n) => count = n,
                _ => return Reply::err("ERR COUNT must be > 0"),
            }
            j += 1;
        } else if is(args[j], "justid") {
            justid = true;
        } else {
            return errors::SYNTAX;
        }
        j += 1;
    }
    let has_group = match read_stream(ctx, key) {
        Err(e) => return e,
        Ok(s) => s.is_some_and(|s| s.groups.contains_key(gname)),
    };
    if !has_group {
        return nogroup_key_group(key, gname);
    }
    let now = ctx.now_ms;
    let mut created = false;
    let mut prop = GroupProp::default();
    let r = with_stream(ctx, key, |s| {
        let g = s.groups.get_mut(gname).expect("group");
        let (c, cr) = g.consumer(cname, now);
        created = cr;
        c.seen_time = now;
        if cr {
            prop.create_consumer(key, gname, cname);
        }
        let mut attempts = count.saturating_mul(10);
        let mut claimed = Vec::new();
        let mut deleted = Vec::new();
        let mut cursor = start;
        let mut next = StreamId::MIN;
        loop {
            let g = s.groups.get(gname).expect("group");
            let Some((&id, n)) = g.pel.range(cursor..).next() else {
                break;
            };
            if attempts == 0 || count == 0 {
                next = id;
                break;
            }
            attempts -= 1;
            let idle_ok = minidle == 0 || now - n.delivery_time >= minidle;
            let prev = n.delivery_count;
            cursor = match id.incr() {
                Some(c) => c,
                None => StreamId::MAX,
            };
            if !s.contains(id) {
                let g = s.groups.get_mut(gname).expect("group");
                if let Some(n) = g.pel.get(&id) {
                    prop.xclaim(key, gname, id, n, g.last_id);
                }
                g.ack(id);
                deleted.push(id_reply(id));
                count -= 1;
            } else if idle_ok {
                let g = s.groups.get_mut(gname).expect("group");
                g.assign(id, cname, now, if justid { prev } else { prev + 1 });
                if let Some(c) = g.consumers.get_mut(cname) {
                    c.active_time = now;
                }
                if let Some(n) = g.pel.get(&id) {
                    prop.xclaim(key, gname, id, n, g.last_id);
                }
                claimed.push(if justid {
                    id_reply(id)
                } else {
                    s.get(id).map(entry_reply).unwrap_or(Reply::Null)
                });
                count -= 1;
            }
            if id == StreamId::MAX {
                break;
            }
        }
        Reply::Array(vec![
            id_reply(next),
            Reply::Array(claimed),
            Reply::Array(deleted),
        ])
    });
    prop.finish(ctx);
    ctx.ex.ks.dirty += 1;
    if created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
    match r {
        Err(e) => e,
        Ok(r) => r.unwrap_or(Reply::Array(vec![])),
    }
}

// ----- XINFO ------------------------------------------------------------------------

pub(super) fn opt_int(v: Option<i64>) -> Reply {
    v.map(Reply::Int).unwrap_or(Reply::Null)
}

pub(super) fn entries_read_reply(n: i64) -> Reply {
    opt_int((n != ENTRIES_READ_INVALID).then_some(n))
}

pub(super) fn kv(k: &'static str, v: Reply) -> (Reply, Reply) {
    (Reply::bulk(k.as_bytes()), v)
}

pub(super) fn xinfo_stream(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let now = ctx.now_ms;
    // The key is looked up before the options are read, as Redis's xinfoCommand.
    let s = match read_stream(ctx, args[2]) {
        Err(e) => return e,
        Ok(None) => return errors::NO_SUCH_KEY,
        Ok(Some(s)) => s,
    };
    let mut full = false;
    let mut count: usize = 10;
    if args.len() > 3 {
        if !is(args[3], "full") {
            return super::subcommand_syntax_error(args);
        }
        full = true;
        if args.len() > 4 {
            if args.len() != 6 || !is(args[4], "count") {
                return super::subcommand_syntax_error(args);
            }
            // A negative COUNT is the default, 10 (0 is every entry).
            count = match arg_ll(args[5]) {
                Ok(n) if n < 0 => 10,
                Ok(n) => n as usize,
                Err(e) => return e,
            };
        }
    }
    let mut m = vec![
        kv("length", Reply::Int(s.len() as i64)),
        kv("radix-tree-keys", Reply::Int(s.block_count() as i64)),
        kv("radix-tree-nodes", Reply::Int(radix_nodes(s.block_count()))),
        kv("last-generated-id", id_reply(s.last_id)),
        kv("max-deleted-entry-id", id_reply(s.max_deleted)),
        kv("entries-added", Reply::Int(s.entries_added as i64)),
        kv("recorded-first-entry-id", id_reply(s.first_id)),
    ];
    if !full {
        m.push(kv("groups", Reply::Int(s.groups.len() as i64)));
        m.push(kv(
            "first-entry",
            s.edge(false).map(entry_reply).unwrap_or(Reply::Null),
        ));
        m.push(kv(
            "last-entry",
            s.edge(true).map(entry_reply).unwrap_or(Reply::Null),
        ));
        return Reply::Map(m);
    }
    m.push(kv(
        "entries",
        entries_reply(s.range(StreamId::MIN, StreamId::MAX, count, false)),
    ));
    let take = |n: usize| if count == 0 { n } else { count.min(n) };
    let groups = s
        .groups
        .iter()
        .map(|(name, g)| {
            let pending = g
                .pel
                .iter()
                .take(take(g.pel.len()))
                .map(|(id, n)| {
                    Reply::Array(vec![
                        id_reply(*id),
                        Reply::bulk(&n.consumer),
                        Reply::Int(n.delivery_time),
                        Reply::Int(n.delivery_count as i64),
                    ])
                })
                .collect();
            let consumers = g
                .consumers
                .iter()
                .map(|(cn, c)| {
                    let pel = c
                        .pel
                        .iter()
                        .take(take(c.pel.len()))
                        .filter_map(|id| {
                            g.pel.get(id).map(|n| {
                                Reply::Array(vec![
                                    id_reply(*id),
                                    Reply::Int(n.delivery_time),
                                    Reply::Int(n.delivery_count as i64),
                                ])
                            })
                        })
                        .collect();
                    Reply::Map(vec![
                        kv("name", Reply::bulk(cn)),
                        kv("seen-time", Reply::Int(c.seen_time)),
                        kv("active-time", Reply::Int(c.active_time)),
                        kv("pel-count", Reply::Int(c.pel.len() as i64)),
                        kv("pending", Reply::Array(pel)),
                    ])
                })
                .collect();
            Reply::Map(vec![
                kv("name", Reply::bulk(name)),
                kv("last-delivered-id", id_reply(g.last_id)),
                kv("entries-read", entries_read_reply(g.entries_read)),
                kv("lag", opt_int(s.group_lag(g))),
                kv("pel-count", Reply::Int(g.pel.len() as i64)),
                kv("pending", Reply::Array(pending)),
                kv("consumers", Reply::Array(consumers)),
            ])
        })
        .collect();
    let _ = now;
    m.push(kv("groups", Reply::Array(groups)));
    Reply::Map(m)
}

/// An estimate of the node count of Redis's radix tree over `keys` 128-bit IDs
/// (reported by XINFO STREAM; it has no meaning for our B-tree).
pub(super) fn radix_nodes(keys: usize) -> i64 {
    if keys == 0 {
        1
    } else {
        keys as i64 + 1
    }
}

pub(super) fn xinfo_groups(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let s = match read_stream(ctx, args[2]) {
        Err(e) => return e,
        Ok(None) => return errors::NO_SUCH_KEY,
        Ok(Some(s)) => s,
    };
    Reply::Array(
        s.groups
            .iter()
            .map(|(name, g)| {
                Reply::Map(vec![
                    kv("name", Reply::bulk(name)),
                    kv("consumers", Reply::Int(g.consumers.len() as i64)),
                    kv("pending", Reply::Int(g.pel.len() as i64)),
                    kv("last-delivered-id", id_reply(g.last_id)),
                    kv("entries-read", entries_read_reply(g.entries_read)),
                    kv("lag", opt_int(s.group_lag(g))),
                ])
            })
            .collect(),
    )
}

pub(super) fn xinfo_consumers(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (key, gname) = (args[2], args[3]);
    let now = ctx.now_ms;
    let s = match read_stream(ctx, key) {
        Err(e) => return e,
        Ok(None) => return errors::NO_SUCH_KEY,
        Ok(Some(s)) => s,
    };
    let Some(g) = s.groups.get(gname) else {
        return nogroup_for_key(key, gname);
    };
    Reply::Array(
        g.consumers
            .iter()
            .map(|(name, c)| {
                Reply::Map(vec![
                    kv("name", Reply::bulk(name)),
                    kv("pending", Reply::Int(c.pel.len() as i64)),
                    kv("idle", Reply::Int((now - c.seen_time).max(0))),
                    kv(
                        "inactive",
                        Reply::Int(if c.active_time == -1 {
                            -1
                        } else {
                            (now - c.active_time).max(0)
                        }),
                    ),
                ])
            })
            .collect(),
    )
}

pub(super) fn xinfo_help(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    crate::commands::keys::help_reply(
        "XINFO",
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    )
}
