//! Functions: FCALL, FCALL_RO and FUNCTION (LOAD, LIST, DELETE, FLUSH, STATS, KILL,
//! DUMP, RESTORE, HELP).
//!
//! The libraries and their VM are `crate::scripting::functions`; a function runs through
//! the same `scripting::run` as EVAL, with KEYS and ARGV passed as its two arguments.
//! DUMP's payload is Redis's: `RDB_OPCODE_FUNCTION2` (245) and the library code as an
//! RDB string (LZF-compressed when that saves at least four bytes) per library, then
//! the RDB version (10, which redis-server 7.0 accepts) and a CRC64 footer, both
//! little-endian.

use crate::command;
use crate::commands::flags::*;
use crate::commands::scripting::{parse_numkeys, with_engine};
use crate::commands::{Command, Ctx, KeySpec};
use crate::keyspace::lazyfree::LAZYFREE_THRESHOLD;
use crate::protocol::Reply;
use crate::scripting::functions::Functions;
use crate::scripting::{self, sflags, Engine, RunSpec};

const SCRIPTING: &[&str] = &["slow", "scripting"];

macro_rules! fcall_row {
    ($name:literal, $flags:expr, $summary:literal, $handler:expr) => {
        Command {
            key_spec: KeySpec::Counted,
            ..command!(
                $name,
                -3,
                $flags,
                (2, -1, 1),
                SCRIPTING,
                "scripting",
                "7.0.0",
                $summary,
                "Depends on the function that is executed.",
                $handler
            )
        }
    };
}

pub static COMMANDS: &[Command] = &[
    fcall_row!(
        "fcall",
        NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | NO_MANDATORY_KEYS | STALE | MOVABLE_KEYS,
        "Invokes a function.",
        fcall
    ),
    fcall_row!(
        "fcall_ro",
        NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE | READONLY | MOVABLE_KEYS,
        "Invokes a read-only function.",
        fcall_ro
    ),
    crate::container!(
        "function",
        &["slow"],
        "scripting",
        "7.0.0",
        "A container for function commands.",
        FUNCTION_SUBS
    ),
];

static FUNCTION_SUBS: &[Command] = &[
    command!(
        "function|load",
        -3,
        NOSCRIPT | WRITE | DENYOOM,
        (0, 0, 0),
        &["write", "slow", "scripting"],
        "scripting",
        "7.0.0",
        "Creates a library.",
        "O(1) (considering compilation time is redundant)",
        function_load
    ),
    command!(
        "function|delete",
        3,
        NOSCRIPT | WRITE,
        (0, 0, 0),
        &["write", "slow", "scripting"],
        "scripting",
        "7.0.0",
        "Deletes a library and its functions.",
        "O(1)",
        function_delete
    ),
    command!(
        "function|flush",
        -2,
        NOSCRIPT | WRITE,
        (0, 0, 0),
        &["write", "slow", "scripting"],
        "scripting",
        "7.0.0",
        "Deletes all libraries and functions.",
        "O(N) where N is the number of functions deleted",
        function_flush
    ),
    command!(
        "function|list",
        -2,
        NOSCRIPT,
        (0, 0, 0),
        SCRIPTING,
        "scripting",
        "7.0.0",
        "Returns information about all libraries.",
        "O(N) where N is the number of functions",
        function_list
    ),
    command!(
        "function|stats",
        2,
        NOSCRIPT | ALLOW_BUSY,
        (0, 0, 0),
        SCRIPTING,
        "scripting",
        "7.0.0",
        "Returns information about a function during execution.",
        "O(1)",
        function_stats
    ),
    command!(
        "function|kill",
        2,
        NOSCRIPT | ALLOW_BUSY,
        (0, 0, 0),
        SCRIPTING,
        "scripting",
        "7.0.0",
        "Terminates a function during execution.",
        "O(1)",
        function_kill
    ),
    command!(
        "function|dump",
        2,
        NOSCRIPT,
        (0, 0, 0),
        SCRIPTING,
        "scripting",
        "7.0.0",
        "Dumps all libraries into a serialized binary payload.",
        "O(N) where N is the number of functions",
        function_dump
    ),
    command!(
        "function|restore",
        -3,
        NOSCRIPT | WRITE | DENYOOM,
        (0, 0, 0),
        &["write", "slow", "scripting"],
        "scripting",
        "7.0.0",
        "Restores all libraries from a payload.",
        "O(N) where N is the number of functions on the payload",
        function_restore
    ),
    command!(
        "function|help",
        2,
        LOADING | STALE,
        (0, 0, 0),
        SCRIPTING,
        "scripting",
        "7.0.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        function_help
    ),
];

fn functions(engine: &mut Engine) -> &mut Functions {
    engine.functions_mut()
}

fn fcall(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    fcall_generic(ctx, args, false)
}

fn fcall_ro(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    fcall_generic(ctx, args, true)
}

fn fcall_generic(ctx: &mut Ctx, args: &[&[u8]], ro: bool) -> Reply {
    // The function's own commands must follow it on MONITOR (the row is skip_monitor).
    ctx.ex.feed_monitors_always(ctx.client, ctx.cmd, args);
    with_engine(ctx, |ctx, engine| fcall_with(ctx, engine, args, ro))
}

fn fcall_with(ctx: &mut Ctx, engine: &mut Engine, args: &[&[u8]], ro: bool) -> Reply {
    let name = String::from_utf8_lossy(args[1]).into_owned();
    let lua_slot = engine.lua_client(ctx.ex);
    let fns = functions(engine);
    let Some(def) = fns.function(&name) else {
        return Reply::err("ERR Function not found");
    };
    if crate::commands::arg_i64(args[2]).is_err() {
        return Reply::err("ERR Bad number of keys provided");
    }
    let numkeys = match parse_numkeys(args) {
        Ok(n) => n,
        Err(e) => return e,
    };
    if ctx.ex.cluster.is_some() && def.flags & sflags::NO_CLUSTER != 0 {
        return Reply::err("ERR Can not run script on cluster, 'no-cluster' flag is set.");
    }
    let no_writes = def.flags & sflags::NO_WRITES != 0;
    if let Some(refused) = scripting::refused_before_run(ctx.ex, ctx.client, def.flags, ro) {
        return refused;
    }
    let spec = RunSpec {
        name: &name,
        read_only: ro || no_writes,
        keys: &args[3..3 + numkeys],
        argv: &args[3 + numkeys..],
        as_args: true,
        command: args,
        functions: Some(fns),
        allow_oom: def.flags & sflags::ALLOW_OOM != 0,
        cross_slot: def.flags & sflags::ALLOW_CROSS_SLOT != 0,
    };
    scripting::run(ctx.ex, ctx.client, lua_slot, &fns.vm, &def.key, &spec)
}

fn with_functions<R>(ctx: &mut Ctx, f: impl FnOnce(&mut Functions) -> R) -> R {
    with_engine(ctx, |_, engine| f(functions(engine)))
}

fn function_load(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let (replace, code) = match args.len() {
        3 => (false, args[2]),
        4 if args[2].eq_ignore_ascii_case(b"replace") => (true, args[3]),
        4 => {
            return Reply::error(format!(
                "ERR Unknown option given: {}",
                String::from_utf8_lossy(args[2])
            ))
        }
        _ => return Reply::err("ERR Unknown option given: "),
    };
    match with_functions(ctx, |f| f.load(code, replace)) {
        Ok(name) => {
            ctx.ex.ks.dirty += 1;
            Reply::Bulk(name.into_bytes())
        }
        Err(e) => e,
    }
}

fn function_delete(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let name = String::from_utf8_lossy(args[2]).into_owned();
    if with_functions(ctx, |f| f.delete(&name)) {
        ctx.ex.ks.dirty += 1;
        Reply::ok()
    } else {
        Reply::err("ERR Library not found")
    }
}

fn function_flush(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if args.len() > 3 {
        return super::subcommand_syntax_error(args);
    }
    if args.len() == 3
        && !args[2].eq_ignore_ascii_case(b"sync")
        && !args[2].eq_ignore_ascii_case(b"async")
    {
        return Reply::err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
    }
    let lazy = match args.get(2) {
        Some(a) => a.eq_ignore_ascii_case(b"async"),
        None => ctx.ex.config.lazyfree_lazy_user_flush,
    };
    if let Some((old, functions)) = ctx.ex.scripting.as_mut().and_then(|e| e.take_functions()) {
        // As Redis: libraries with more than LAZYFREE_THRESHOLD functions go to the
        // background, counted by their functions plus one for the engine.
        if lazy && functions > LAZYFREE_THRESHOLD {
            ctx.ex
                .ks
                .lazyfree
                .free_other(Box::new(old), functions as u64 + 1);
        }
    }
    ctx.ex.ks.dirty += 1;
    Reply::ok()
}

fn function_list(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 2;
    while i < args.len() {
        if args[i].eq_ignore_ascii_case(b"withcode") && !with_code {
            with_code = true;
        } else if args[i].eq_ignore_ascii_case(b"libraryname") && pattern.is_none() {
            let Some(p) = args.get(i + 1) else {
                return Reply::err("ERR library name argument was not given");
            };
            pattern = Some(p);
            i += 1;
        } else {
            return Reply::error(format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(args[i])
            ));
        }
        i += 1;
    }
    let bulk = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    with_functions(ctx, |f| {
        let libs = f
            .libraries
            .values()
            .filter(|l| {
                pattern.is_none_or(|p| crate::util::glob::glob_match(p, l.name.as_bytes(), false))
            })
            .map(|l| {
                let fns = l
                    .functions
                    .values()
                    .map(|d| {
                        let flags = sflags::NAMES
                            .iter()
                            .filter(|(_, b)| d.flags & b != 0)
                            .map(|(n, _)| Reply::Status((*n).into()))
                            .collect();
                        Reply::Map(vec![
                            (bulk("name"), bulk(&d.name)),
                            (
                                bulk("description"),
                                d.description.clone().map_or(Reply::Null, Reply::Bulk),
                            ),
                            (bulk("flags"), Reply::Set(flags)),
                        ])
                    })
                    .collect();
                let mut m = vec![
                    (bulk("library_name"), bulk(&l.name)),
                    (bulk("engine"), bulk("LUA")),
                    (bulk("functions"), Reply::Array(fns)),
                ];
                if with_code {
                    m.push((bulk("library_code"), Reply::Bulk(l.code.clone())));
                }
                Reply::Map(m)
            })
            .collect();
        Reply::Array(libs)
    })
}

fn function_stats(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    let bulk = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    let running = match &ctx.ex.busy {
        None => Reply::Null,
        // An EVAL script is not FUNCTION's business: BUSY, as Redis.
        Some(b) if b.is_eval => return b.busy_error(),
        Some(b) => Reply::Map(vec![
            (bulk("name"), Reply::Bulk(b.name.as_bytes().to_vec())),
            (
                bulk("command"),
                Reply::Array(b.command.iter().map(|a| Reply::Bulk(a.clone())).collect()),
            ),
            (
                bulk("duration_ms"),
                Reply::Int(b.start.elapsed().as_millis() as i64),
            ),
        ]),
    };
    let (libs, fns) = match &ctx.ex.busy {
        Some(b) => b.library_counts,
        None => ctx
            .ex
            .scripting
            .as_ref()
            .and_then(|e| e.functions.as_ref())
            .map_or((0, 0), |f| (f.libraries.len(), f.function_count())),
    };
    Reply::Map(vec![
        (bulk("running_script"), running),
        (
            bulk("engines"),
            Reply::Map(vec![(
                bulk("LUA"),
                Reply::Map(vec![
                    (bulk("libraries_count"), Reply::Int(libs as i64)),
                    (bulk("functions_count"), Reply::Int(fns as i64)),
                ]),
            )]),
        ),
    ])
}

fn function_kill(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    ctx.ex.kill_script(false)
}

/// The RDB version written in DUMP payloads (Redis 7.0's, so it loads them).
const DUMP_RDB_VERSION: u16 = 10;
/// The newest RDB version whose payloads RESTORE accepts (Redis 7.4's).
const MAX_RDB_VERSION: u16 = 12;
const OPCODE_FUNCTION_PRE_GA: u8 = 246;
const OPCODE_FUNCTION2: u8 = 245;

fn crc64(b: &[u8]) -> u64 {
    static CRC: crc::Crc<u64, crc::Table<16>> =
        crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_REDIS);
    CRC.checksum(b)
}

/// RDB length encoding.
fn put_len(out: &mut Vec<u8>, n: usize) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.extend_from_slice(&[0x40 | (n >> 8) as u8, n as u8]);
    } else if n <= u32::MAX as usize {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&(n as u64).to_be_bytes());
    }
}

/// An RDB string as Redis writes it: LZF when longer than 20 bytes and the compressed
/// form saves at least four bytes, raw otherwise. (Library code starts with `#!`, so
/// the integer encodings never apply.)
fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() > 20 {
        if let Some(c) = crate::util::lzf::compress(s, s.len() - 4) {
            out.push(0xc3);
            put_len(out, c.len());
            put_len(out, s.len());
            out.extend_from_slice(&c);
            return;
        }
    }
    put_len(out, s.len());
    out.extend_from_slice(s);
}

fn function_dump(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    let mut out = Vec::new();
    for code in scripting::functions::library_codes(ctx.ex) {
        out.push(OPCODE_FUNCTION2);
        put_string(&mut out, &code);
    }
    out.extend_from_slice(&DUMP_RDB_VERSION.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Reply::Bulk(out)
}

/// A cursor over a payload's RDB body.
struct Rdb<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Rdb<'_> {
    fn byte(&mut self) -> Option<u8> {
        let c = *self.b.get(self.pos)?;
        self.pos += 1;
        Some(c)
    }

    fn bytes(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.b.len())?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Some(s)
    }

    /// A length, or `Err(encoding)` for the special string encodings.
    fn len(&mut self) -> Option<Result<usize, u8>> {
        let c = self.byte()?;
        Some(match c >> 6 {
            0 => Ok((c & 0x3f) as usize),
            1 => Ok((((c & 0x3f) as usize) << 8) | self.byte()? as usize),
            2 if c == 0x80 => Ok(u32::from_be_bytes(self.bytes(4)?.try_into().ok()?) as usize),
            2 if c == 0x81 => {
                Ok(usize::try_from(u64::from_be_bytes(self.bytes(8)?.try_into().ok()?)).ok()?)
            }
            3 => Err(c & 0x3f),
            _ => return None,
        })
    }

    fn string(&mut self) -> Option<Vec<u8>> {
        match self.len()? {
            Ok(n) => Some(self.bytes(n)?.to_vec()),
            Err(0) => Some((self.byte()? as i8).to_string().into_bytes()),
            Err(1) => Some(
                i16::from_le_bytes(self.bytes(2)?.try_into().ok()?)
                    .to_string()
                    .into_bytes(),
            ),
            Err(2) => Some(
                i32::from_le_bytes(self.bytes(4)?.try_into().ok()?)
                    .to_string()
                    .into_bytes(),
            ),
            Err(3) => {
                let clen = self.len()?.ok()?;
                let len = self.len()?.ok()?;
                // Bounded by the payload: LZF expands at most ~256x per input byte.
                if len > clen.saturating_mul(256) + 64 {
                    return None;
                }
                let c = self.bytes(clen)?;
                crate::util::lzf::decompress(c, len)
            }
            Err(_) => None,
        }
    }
}

fn function_restore(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if args.len() > 4 {
        return super::subcommand_syntax_error(args);
    }
    #[derive(PartialEq)]
    enum Policy {
        Append,
        Replace,
        Flush,
    }
    let policy =
        match args.get(3) {
            None => Policy::Append,
            Some(p) if p.eq_ignore_ascii_case(b"append") => Policy::Append,
            Some(p) if p.eq_ignore_ascii_case(b"replace") => Policy::Replace,
            Some(p) if p.eq_ignore_ascii_case(b"flush") => Policy::Flush,
            Some(_) => return Reply::err(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ),
        };
    let payload = args[2];
    let bad = Reply::err("ERR DUMP payload version or checksum are wrong");
    if payload.len() < 10 {
        return bad;
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes(footer[2..10].try_into().unwrap_or_default());
    if version > MAX_RDB_VERSION || crc64(&payload[..payload.len() - 8]) != crc {
        return bad;
    }
    // Parse every library first: a bad payload changes nothing.
    let mut codes = Vec::new();
    let mut r = Rdb { b: body, pos: 0 };
    while r.pos < body.len() {
        match r.byte() {
            Some(OPCODE_FUNCTION2) => match r.string() {
                Some(code) => codes.push(code),
                None => return Reply::err("ERR failed loading the given functions payload"),
            },
            Some(OPCODE_FUNCTION_PRE_GA) => {
                return Reply::err("ERR Pre-GA function format not supported")
            }
            _ => return Reply::err("ERR given type is not a function"),
        }
    }
    // Load into a fresh set of libraries, then join it to the current one by policy.
    let mut fresh = match Functions::new() {
        Ok(f) => f,
        Err(e) => return Reply::error(format!("ERR {e}")),
    };
    for code in &codes {
        if let Err(e) = fresh.load(code, false) {
            return e;
        }
    }
    let reply = with_engine(ctx, |_, engine| {
        restore_join(
            engine,
            fresh,
            codes,
            policy == Policy::Flush,
            policy == Policy::Replace,
        )
    });
    if matches!(reply, Reply::Status(_)) {
        ctx.ex.ks.dirty += 1;
    }
    reply
}

/// Joins restored libraries to the current ones: FLUSH replaces everything, REPLACE
/// replaces libraries of the same name, APPEND refuses them. Function names must stay
/// unique; on any error nothing changes.
fn restore_join(
    engine: &mut Engine,
    fresh: Functions,
    codes: Vec<Vec<u8>>,
    flush: bool,
    replace: bool,
) -> Reply {
    if flush || engine.functions.is_none() {
        engine.functions = Some(Box::new(fresh));
        return Reply::ok();
    }
    let cur = functions(engine);
    for name in fresh.libraries.keys() {
        if cur.libraries.contains_key(name) && !replace {
            return Reply::error(format!("ERR Library {name} already exists"));
        }
    }
    for (folded, (_, f)) in &fresh.index {
        if let Some((owner, _)) = cur.index.get(folded) {
            if !fresh.libraries.contains_key(owner) {
                return Reply::error(format!("ERR Function {f} already exists"));
            }
        }
    }
    // Compile into the live VM (functions belong to the VM they were created in).
    for code in &codes {
        if let Err(e) = cur.load(code, true) {
            return e;
        }
    }
    Reply::ok()
}

fn function_help(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    crate::commands::keys::help_reply(
        "FUNCTION",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "FCALL <FUNCTION NAME> nkeys <key1 .. keyn> <arg1 .. argn>",
            "    Call a function with the given name and arguments.",
            "FCALL_RO <FUNCTION NAME> nkeys <key1 .. keyn> <arg1 .. argn>",
            "    Call a function with the given name and arguments.",
            "    Read only function. Can be executed on replicas or using the FCALL_RO command.",
            "FLUSH [ASYNC|SYNC]",
            "    Deletes all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
        ],
    )
}
