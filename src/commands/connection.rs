//! Connection commands: AUTH, HELLO, PING, ECHO, SELECT, QUIT, RESET and CLIENT.

use std::time::{Duration, Instant};

use crate::commands::flags::*;
use crate::commands::keys::help_reply;
use crate::commands::{arg_i64, errors, is, Command, Ctx};
use crate::exec::{Client, Pause, PausePurpose, ReplyMode};
use crate::protocol::Reply;
use crate::{command, container};

const CONN: &[&str] = &["connection", "fast"];
const CONN_SLOW: &[&str] = &["connection", "slow"];
const CLIENT_ADMIN: &[&str] = &["admin", "slow", "dangerous", "connection"];

/// The Redis version Cinnabar is compatible with, reported where clients look for it.
pub const REDIS_VERSION: &str = "7.4.0";

pub static COMMANDS: &[Command] = &[
    command!(
        "auth",
        -2,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY,
        (0, 0, 0),
        CONN,
        "connection",
        "1.0.0",
        "Authenticates the connection.",
        "O(N) where N is the number of passwords defined for the user",
        auth
    ),
    command!(
        "hello",
        -1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY,
        (0, 0, 0),
        CONN,
        "connection",
        "6.0.0",
        "Handshakes with the Redis server.",
        "O(1)",
        hello
    ),
    command!(
        "ping",
        -1,
        FAST,
        (0, 0, 0),
        CONN,
        "connection",
        "1.0.0",
        "Returns the server's liveliness response.",
        "O(1)",
        ping
    ),
    command!(
        "echo",
        2,
        LOADING | STALE | FAST,
        (0, 0, 0),
        CONN,
        "connection",
        "1.0.0",
        "Returns the given string.",
        "O(1)",
        echo
    ),
    command!(
        "select",
        2,
        LOADING | STALE | FAST,
        (0, 0, 0),
        CONN,
        "connection",
        "1.0.0",
        "Changes the selected database.",
        "O(1)",
        select
    ),
    command!(
        "quit",
        -1,
        ALLOW_BUSY | NOSCRIPT | LOADING | STALE | FAST | NO_AUTH,
        (0, 0, 0),
        CONN,
        "connection",
        "1.0.0",
        "Closes the connection.",
        "O(1)",
        quit
    ),
    command!(
        "reset",
        1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY,
        (0, 0, 0),
        CONN,
        "connection",
        "6.2.0",
        "Resets the connection.",
        "O(1)",
        reset
    ),
    container!(
        "client",
        &["slow"],
        "connection",
        "2.4.0",
        "A container for client connection commands.",
        CLIENT_SUBCOMMANDS
    ),
];

static CLIENT_SUBCOMMANDS: &[Command] = &[
    command!(
        "client|id",
        2,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "connection",
        "5.0.0",
        "Returns the unique client ID of the connection.",
        "O(1)",
        client_id
    ),
    command!(
        "client|setname",
        3,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "connection",
        "2.6.9",
        "Sets the connection name.",
        "O(1)",
        client_setname
    ),
    command!(
        "client|getname",
        2,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "connection",
        "2.6.9",
        "Returns the name of the connection.",
        "O(1)",
        client_getname
    ),
    command!(
        "client|list",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        CLIENT_ADMIN,
        "connection",
        "2.4.0",
        "Lists open connections.",
        "O(N) where N is the number of client connections",
        client_list
    ),
    command!(
        "client|info",
        2,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "connection",
        "6.2.0",
        "Returns information about the connection.",
        "O(1)",
        client_info
    ),
    command!(
        "client|kill",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        CLIENT_ADMIN,
        "connection",
        "2.4.0",
        "Terminates open connections.",
        "O(N) where N is the number of client connections",
        client_kill
    ),
    command!(
        "client|pause",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        CLIENT_ADMIN,
        "connection",
        "3.0.0",
        "Suspends commands processing.",
        "O(1)",
        client_pause
    ),
    command!(
        "client|unpause",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        CLIENT_ADMIN,
        "connection",
        "6.2.0",
        "Resumes processing commands from paused clients.",
        "O(N) Where N is the number of paused clients",
        client_unpause
    ),
    command!(
        "client|reply",
        3,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "connection",
        "3.2.0",
        "Instructs the server whether to reply to commands.",
        "O(1)",
        client_reply
    ),
    command!(
        "client|unblock",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        CLIENT_ADMIN,
        "connection",
        "5.0.0",
        "Unblocks a client blocked by a blocking command from a different connection.",
        "O(log N) where N is the number of client connections",
        client_unblock
    ),
    command!(
        "client|no-evict",
        3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        CLIENT_ADMIN,
        "connection",
        "7.0.0",
        "Sets the client eviction mode of the connection.",
        "O(1)",
        client_no_evict
    ),
    command!(
        "client|no-touch",
        3,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "connection",
        "7.2.0",
        "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.",
        "O(1)",
        client_no_touch
    ),
    command!(
        "client|setinfo",
        4,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "connection",
        "7.2.0",
        "Sets information specific to the client or connection.",
        "O(1)",
        client_setinfo
    ),
    command!(
        "client|tracking",
        -3,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "connection",
        "6.0.0",
        "Controls server-assisted client-side caching for the connection.",
        "O(1). Some options may introduce additional complexity.",
        crate::commands::tracking::client_tracking
    ),
    command!(
        "client|caching",
        3,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "connection",
        "6.0.0",
        "Instructs the server whether to track the keys in the next request.",
        "O(1)",
        crate::commands::tracking::client_caching
    ),
    command!(
        "client|getredir",
        2,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "connection",
        "6.0.0",
        "Returns the client ID to which the connection's tracking notifications are redirected.",
        "O(1)",
        crate::commands::tracking::client_getredir
    ),
    command!(
        "client|trackinginfo",
        2,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "connection",
        "6.2.0",
        "Returns information about server-assisted client-side caching for the connection.",
        "O(1)",
        crate::commands::tracking::client_trackinginfo
    ),
    command!(
        "client|help",
        2,
        LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "connection",
        "5.0.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        client_help
    ),
];

fn auth(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (user, pass): (&[u8], &[u8]) = match args.len() {
        2 => {
            if ctx.ex.acl.default_user().nopass {
                return Reply::err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
            }
            (b"default", args[1])
        }
        3 => (args[1], args[2]),
        _ => return errors::SYNTAX,
    };
    if ctx.ex.acl_authenticate(ctx.client, user, pass, args[0]) {
        Reply::ok()
    } else {
        errors::WRONGPASS
    }
}

/// Client names and library fields may not contain spaces or control characters.
fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

fn hello(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let mut proto = ctx.proto();
    if args.len() >= 2 {
        match crate::util::numeric::parse_i64(args[1]) {
            None => return Reply::err("ERR Protocol version is not an integer or out of range"),
            Some(v) if !(2..=3).contains(&v) => {
                return Reply::err("NOPROTO unsupported protocol version")
            }
            Some(v) => proto = v as u8,
        }
    }
    let mut auth: Option<(&[u8], &[u8])> = None;
    let mut name: Option<&[u8]> = None;
    let mut j = 2;
    while j < args.len() {
        let more = args.len() - j - 1;
        if is(args[j], "auth") && more >= 2 {
            auth = Some((args[j + 1], args[j + 2]));
            j += 3;
        } else if is(args[j], "setname") && more >= 1 {
            name = Some(args[j + 1]);
            j += 2;
        } else {
            return Reply::error(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(args[j])
            ));
        }
    }
    if let Some((user, pass)) = auth {
        if !ctx.ex.acl_authenticate(ctx.client, user, pass, args[0]) {
            return errors::WRONGPASS;
        }
    }
    if !ctx.client_ref().authenticated {
        return Reply::err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    if let Some(n) = name {
        if !valid_client_name(n) {
            return Reply::err(
                "ERR Client names cannot contain spaces, newlines or special characters.",
            );
        }
        ctx.client().name = if n.is_empty() { None } else { Some(n.to_vec()) };
    }
    let c = ctx.client();
    c.proto = proto;
    let id = c.id as i64;
    Reply::Map(vec![
        (Reply::bulk(b"server"), Reply::bulk(b"redis")),
        (
            Reply::bulk(b"version"),
            Reply::bulk(REDIS_VERSION.as_bytes()),
        ),
        (Reply::bulk(b"proto"), Reply::Int(proto as i64)),
        (Reply::bulk(b"id"), Reply::Int(id)),
        (Reply::bulk(b"mode"), Reply::bulk(b"standalone")),
        (Reply::bulk(b"role"), Reply::bulk(b"master")),
        (Reply::bulk(b"modules"), Reply::Array(vec![])),
    ])
}

fn ping(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    // A RESP2 subscriber gets its PONG in the shape of a pub/sub message.
    let c = ctx.client_ref();
    if c.proto == 2 && c.is_pubsub() && args.len() <= 2 {
        return Reply::Array(vec![
            Reply::bulk(b"pong"),
            Reply::bulk(args.get(1).copied().unwrap_or(b"")),
        ]);
    }
    match args.len() {
        1 => Reply::status("PONG"),
        2 => Reply::bulk(args[1]),
        _ => crate::commands::wrong_arity(ctx.cmd.name),
    }
}

fn echo(_ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    Reply::bulk(args[1])
}

fn select(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    // The range is judged after the cluster check, so not arg_db_index.
    let n = match crate::commands::arg_i32(args[1], None) {
        Ok(n) => n,
        Err(e) => return e,
    };
    if ctx.ex.cluster.is_some() && n != 0 {
        return Reply::err("ERR SELECT is not allowed in cluster mode");
    }
    if n < 0 || n as usize >= ctx.ex.ks.dbs.len() {
        return errors::DB_INDEX;
    }
    ctx.client().db = n as usize;
    ctx.db = n as usize;
    Reply::ok()
}

fn quit(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    ctx.client().close_after_reply = true;
    Reply::ok()
}

fn reset(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    // Transaction, WATCH, subscriptions, tracking and MONITOR end (exec/signals.rs).
    ctx.ex.clear_client_state(ctx.client);
    ctx.ex.acl_set_default_auth(ctx.client);
    let c = ctx.client();
    c.db = 0;
    c.proto = 2;
    c.name = None;
    c.reply_mode = ReplyMode::On;
    c.no_evict = false;
    c.no_touch = false;
    ctx.db = 0;
    Reply::status("RESET")
}

// ----- CLIENT ---------------------------------------------------------------------

fn client_id(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    Reply::Int(ctx.client_ref().id as i64)
}

fn client_setname(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if !valid_client_name(args[2]) {
        return Reply::err(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        );
    }
    ctx.client().name = if args[2].is_empty() {
        None
    } else {
        Some(args[2].to_vec())
    };
    Reply::ok()
}

fn client_getname(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    match &ctx.client_ref().name {
        Some(n) => Reply::bulk(n),
        None => Reply::Null,
    }
}

/// One CLIENT LIST line, with Redis 7.4's fields. The output buffer's first
/// `rbs` bytes play the part of Redis's reply buffer (`obl`), the rest its reply
/// list (`oll` in 16 KB blocks; `omem` counts them as Redis's output-buffer limits
/// do, `Client::output_limit_usage`); `tot-mem` is `Client::memory_usage`.
pub fn client_line(c: &Client, blocked: bool, qbuf_free: usize) -> String {
    let s = |b: &Option<Vec<u8>>| {
        b.as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default()
            .into_owned()
    };
    let events = if c.pending_output() > 0 { "rw" } else { "r" };
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} watch={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl={} oll={} omem={} tot-mem={} events={} cmd={} user={} redir={} resp={} lib-name={} lib-ver={} io-thread={}",
        c.id,
        c.addr,
        c.laddr,
        c.fd,
        s(&c.name),
        c.created.elapsed().as_secs(),
        c.last_interaction.elapsed().as_secs(),
        c.flags_string(blocked),
        c.db,
        c.subs.channels.len(),
        c.subs.patterns.len(),
        c.subs.shard.len(),
        c.tx.multi.as_ref().map_or(-1, |m| m.queue.len() as i64),
        c.tx.watched.len(),
        c.qbuf,
        qbuf_free,
        c.argv_mem,
        c.multi_mem(),
        c.reply_buf_size,
        c.reply_buf_peak,
        c.reply_buf_used(),
        c.reply_list_blocks(),
        c.output_limit_usage(),
        c.memory_usage(),
        events,
        c.last_cmd,
        c.user,
        c.tracking.redirect_id(),
        c.proto,
        s(&c.lib_name),
        s(&c.lib_ver),
        c.io_thread,
    )
}

fn client_list(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let mut ids: Option<Vec<u64>> = None;
    // normal, pubsub, replica, master (`replication::client_kind`).
    let mut client_type: Option<u8> = None;
    let mut j = 2;
    while j < args.len() {
        if is(args[j], "type") && j + 1 < args.len() {
            let t = args[j + 1];
            if !["normal", "master", "replica", "slave", "pubsub"]
                .iter()
                .any(|n| is(t, n))
            {
                return Reply::error(format!(
                    "ERR Unknown client type '{}'",
                    String::from_utf8_lossy(t)
                ));
            }
            client_type = Some(if is(t, "normal") {
                0
            } else if is(t, "pubsub") {
                1
            } else if is(t, "master") {
                3
            } else {
                2
            });
            j += 2;
        } else if is(args[j], "id") && j + 1 < args.len() {
            let mut v = Vec::new();
            for a in &args[j + 1..] {
                match crate::util::numeric::parse_i64(a) {
                    Some(n) if n > 0 => v.push(n as u64),
                    _ => return Reply::err("ERR Invalid client ID"),
                }
            }
            ids = Some(v);
            j = args.len();
        } else {
            return errors::SYNTAX;
        }
    }
    let mut text = String::new();
    for (slot, c) in ctx.ex.clients() {
        // In-process clients are not listed, except our master's link (flags=M).
        if (c.embedded && c.repl_role != Some('M'))
            || ids.as_ref().is_some_and(|ids| !ids.contains(&c.id))
            || client_type.is_some_and(|t| t != crate::replication::client_kind(ctx.ex, slot, c))
        {
            continue;
        }
        text.push_str(&client_line(c, ctx.ex.is_blocked(slot), c.qbuf_free));
        text.push('\n');
    }
    Reply::Verbatim("txt", text.into_bytes())
}

fn client_info(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    let mut line = client_line(ctx.client_ref(), false, ctx.client_ref().qbuf_free);
    line.push('\n');
    Reply::Verbatim("txt", line.into_bytes())
}

fn client_kill(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let me = ctx.client;
    // Old form: CLIENT KILL addr:port.
    if args.len() == 3 {
        let addr = args[2];
        let target = ctx
            .ex
            .clients()
            .find(|(_, c)| c.addr.as_bytes() == addr)
            .map(|(s, _)| s);
        return match target {
            Some(slot) => {
                kill_slot(ctx, slot, me);
                Reply::ok()
            }
            None => Reply::err("ERR No such client"),
        };
    }
    let mut id: Option<u64> = None;
    let mut addr: Option<&[u8]> = None;
    let mut laddr: Option<&[u8]> = None;
    let mut user: Option<&[u8]> = None;
    // normal, pubsub, replica, master (`replication::client_kind`).
    let mut client_type: Option<u8> = None;
    let mut skipme = true;
    let mut maxage: Option<u64> = None;
    let mut j = 2;
    while j + 1 < args.len() {
        let (opt, val) = (args[j], args[j + 1]);
        if is(opt, "id") {
            match crate::util::numeric::parse_i64(val) {
                Some(n) if n > 0 => id = Some(n as u64),
                _ => return Reply::err("ERR client-id should be greater than 0"),
            }
        } else if is(opt, "type") {
            if !["normal", "master", "replica", "slave", "pubsub"]
                .iter()
                .any(|n| is(val, n))
            {
                return Reply::error(format!(
                    "ERR Unknown client type '{}'",
                    String::from_utf8_lossy(val)
                ));
            }
            client_type = Some(if is(val, "normal") {
                0
            } else if is(val, "pubsub") {
                1
            } else if is(val, "master") {
                3
            } else {
                2
            });
        } else if is(opt, "addr") {
            addr = Some(val);
        } else if is(opt, "laddr") {
            laddr = Some(val);
        } else if is(opt, "user") {
            // An unknown user is an error at once, as Redis's clientKillCommand.
            if ctx.ex.acl.user(&String::from_utf8_lossy(val)).is_none() {
                return Reply::error(format!(
                    "ERR No such user '{}'",
                    String::from_utf8_lossy(val)
                ));
            }
            user = Some(val);
        } else if is(opt, "skipme") {
            if is(val, "yes") {
                skipme = true;
            } else if is(val, "no") {
                skipme = false;
            } else {
                return errors::SYNTAX;
            }
        } else if is(opt, "maxage") {
            match crate::util::numeric::parse_i64(val) {
                None => return Reply::err("ERR maxage is not an integer or out of range"),
                Some(n) if n <= 0 => return Reply::err("ERR maxage should be greater than 0"),
                Some(n) => maxage = Some(n as u64),
            }
        } else {
            return errors::SYNTAX;
        }
        j += 2;
    }
    if j != args.len() {
        return errors::SYNTAX;
    }
    let targets: Vec<usize> = ctx
        .ex
        .clients()
        .filter(|(slot, c)| {
            // In-process clients (the scripts' pseudo-client) are not clients to
            // kill, as they are not listed; our master's link is.
            !(c.embedded && c.repl_role != Some('M'))
                && id.is_none_or(|i| c.id == i)
                && addr.is_none_or(|a| c.addr.as_bytes() == a)
                && laddr.is_none_or(|a| c.laddr.as_bytes() == a)
                && user.is_none_or(|u| c.user.as_bytes() == u)
                && client_type
                    .is_none_or(|t| t == crate::replication::client_kind(ctx.ex, *slot, c))
                && maxage.is_none_or(|m| c.created.elapsed().as_secs() >= m)
                && !(skipme && *slot == me)
        })
        .map(|(s, _)| s)
        .collect();
    for &slot in &targets {
        kill_slot(ctx, slot, me);
    }
    Reply::Int(targets.len() as i64)
}

/// Closes a client: itself after this reply, others at once.
fn kill_slot(ctx: &mut Ctx, slot: usize, me: usize) {
    if crate::replication::replica::kill_master_client(ctx.ex, slot) {
        return;
    }
    let c = ctx.ex.client_mut(slot);
    if slot == me {
        c.close_after_reply = true;
    } else {
        c.close_asap = true;
        ctx.ex.close_pending = true;
    }
}

fn client_pause(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if args.len() > 4 {
        return crate::commands::subcommand_syntax_error(args);
    }
    // The mode is judged before the timeout, as Redis's clientCommand.
    let write_only = match args.get(3) {
        None => false,
        Some(m) if is(m, "write") => true,
        Some(m) if is(m, "all") => false,
        Some(_) => return Reply::err("ERR CLIENT PAUSE mode must be WRITE or ALL"),
    };
    let ms = match crate::exec::blocking::parse_timeout_ms(args[2], ctx.now_ms) {
        Ok(ms) => ms as u64,
        Err(e) => return e,
    };
    let until = Instant::now() + Duration::from_millis(ms);
    // As Redis's pauseClientsByClient: a pending pause of everything stays one (the
    // more restrictive wins); set_pause keeps the later end time.
    ctx.ex.current_pause();
    let all_pending = ctx
        .ex
        .pause_of(PausePurpose::Client)
        .is_some_and(|p| !p.write_only);
    let pause = Pause {
        until,
        write_only: write_only && !all_pending,
    };
    ctx.ex.set_pause(PausePurpose::Client, pause);
    Reply::ok()
}

fn client_unpause(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    ctx.ex.unpause(PausePurpose::Client);
    Reply::ok()
}

fn client_reply(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let c = ctx.client();
    if is(args[2], "on") {
        c.reply_mode = ReplyMode::On;
        Reply::ok()
    } else if is(args[2], "off") {
        c.reply_mode = ReplyMode::Off;
        Reply::NoReply
    } else if is(args[2], "skip") {
        if c.reply_mode != ReplyMode::Off {
            c.reply_mode = ReplyMode::SkipNext;
        }
        Reply::NoReply
    } else {
        errors::SYNTAX
    }
}

fn client_unblock(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if args.len() > 4 {
        return crate::commands::subcommand_syntax_error(args);
    }
    // The reason is judged before the ID, as Redis's clientCommand.
    let error = match args.get(3) {
        None => false,
        Some(m) if is(m, "timeout") => false,
        Some(m) if is(m, "error") => true,
        Some(_) => return Reply::err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
    };
    let Ok(id) = arg_i64(args[2]) else {
        return errors::NOT_INTEGER;
    };
    let found = crate::exec::blocking::unblock_by_id(ctx.ex, id as u64, error);
    Reply::Int(found as i64)
}

fn on_off(a: &[u8]) -> Option<bool> {
    if is(a, "on") {
        Some(true)
    } else if is(a, "off") {
        Some(false)
    } else {
        None
    }
}

fn client_no_evict(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match on_off(args[2]) {
        Some(v) => {
            ctx.client().no_evict = v;
            Reply::ok()
        }
        None => errors::SYNTAX,
    }
}

fn client_no_touch(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match on_off(args[2]) {
        Some(v) => {
            ctx.client().no_touch = v;
            Reply::ok()
        }
        None => errors::SYNTAX,
    }
}

fn client_setinfo(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (attr, val) = (args[2], args[3]);
    let field = if is(attr, "lib-name") {
        "lib-name"
    } else if is(attr, "lib-ver") {
        "lib-ver"
    } else {
        return Reply::error(format!(
            "ERR Unrecognized option '{}'",
            String::from_utf8_lossy(attr)
        ));
    };
    if !valid_client_name(val) {
        return Reply::error(format!(
            "ERR {field} cannot contain spaces, newlines or special characters."
        ));
    }
    let v = if val.is_empty() {
        None
    } else {
        Some(val.to_vec())
    };
    let c = ctx.client();
    if field == "lib-name" {
        c.lib_name = v;
    } else {
        c.lib_ver = v;
    }
    Reply::ok()
}

fn client_help(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    help_reply(
        "CLIENT",
        &[
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "    * ID <client-id>",
            "      Kill connections by client id.",
            "    * MAXAGE <maxage>",
            "      Kill connections older than the specified age.",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "SETINFO <option> <value>",
            "    Set client meta attr. Options are:",
            "    * LIB-NAME: the client lib name.",
            "    * LIB-VER: the client lib version.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
            "NO-TOUCH (ON|OFF)",
            "    Will not touch LRU/LFU stats when this mode is on.",
        ],
    )
}
