//! Scripting: EVAL, EVALSHA, their read-only forms, and SCRIPT.
//!
//! The four EVAL forms share `eval_generic`; the host itself (VM, sandbox, conversion,
//! `redis.call`) is in `crate::scripting`. A script runs inside the command, so it is
//! atomic like any other command; past `busy-reply-threshold` other clients are
//! answered BUSY and SCRIPT KILL may stop it (`exec::busy`).

use crate::command;
use crate::commands::flags::*;
use crate::commands::{arg_i64, Command, Ctx, KeySpec};
use crate::keyspace::lazyfree::LAZYFREE_THRESHOLD;
use crate::protocol::Reply;
use crate::scripting::{self, ldb, sflags, Engine, RunSpec};

const SCRIPTING: &[&str] = &["slow", "scripting"];

macro_rules! eval_row {
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
                "2.6.0",
                $summary,
                "Depends on the script that is executed.",
                $handler
            )
        }
    };
}

pub static COMMANDS: &[Command] = &[
    eval_row!(
        "eval",
        NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | NO_MANDATORY_KEYS | STALE | MOVABLE_KEYS,
        "Executes a server-side Lua script.",
        eval
    ),
    eval_row!(
        "evalsha",
        NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | NO_MANDATORY_KEYS | STALE | MOVABLE_KEYS,
        "Executes a server-side Lua script by SHA1 digest.",
        evalsha
    ),
    eval_row!(
        "eval_ro",
        NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE | READONLY | MOVABLE_KEYS,
        "Executes a read-only server-side Lua script.",
        eval_ro
    ),
    eval_row!(
        "evalsha_ro",
        NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE | READONLY | MOVABLE_KEYS,
        "Executes a read-only server-side Lua script by SHA1 digest.",
        evalsha_ro
    ),
    crate::container!(
        "script",
        &["slow"],
        "scripting",
        "2.6.0",
        "A container for Lua scripts management commands.",
        SCRIPT_SUBS
    ),
];

static SCRIPT_SUBS: &[Command] = &[
    command!("script|debug", 3, NOSCRIPT, (0, 0, 0), SCRIPTING, "scripting", "3.2.0", "Sets the debug mode of server-side Lua scripts.", "O(1)", script_debug),
    command!("script|load", 3, NOSCRIPT | STALE, (0, 0, 0), SCRIPTING, "scripting", "2.6.0", "Loads a server-side Lua script to the script cache.", "O(N) with N being the length in bytes of the script body.", script_load),
    command!("script|exists", -3, NOSCRIPT, (0, 0, 0), SCRIPTING, "scripting", "2.6.0", "Determines whether server-side Lua scripts exist in the script cache.", "O(N) with N being the number of scripts to check (so checking a single script is an O(1) operation).", script_exists),
    command!("script|flush", -2, NOSCRIPT, (0, 0, 0), SCRIPTING, "scripting", "2.6.0", "Removes all server-side Lua scripts from the script cache.", "O(N) with N being the number of scripts in cache", script_flush),
    command!("script|kill", 2, NOSCRIPT | ALLOW_BUSY, (0, 0, 0), SCRIPTING, "scripting", "2.6.0", "Terminates a server-side Lua script during execution.", "O(1)", script_kill),
    command!("script|help", 2, LOADING | STALE, (0, 0, 0), SCRIPTING, "scripting", "5.0.0", "Returns helpful text about the different subcommands.", "O(1)", script_help),
];

fn eval(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    eval_generic(ctx, args, false, false)
}

fn evalsha(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    eval_generic(ctx, args, true, false)
}

fn eval_ro(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    eval_generic(ctx, args, false, true)
}

fn evalsha_ro(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    eval_generic(ctx, args, true, true)
}

/// Parses `numkeys` of EVAL/FCALL: the number of key arguments after it.
pub fn parse_numkeys(args: &[&[u8]]) -> Result<usize, Reply> {
    let n = arg_i64(args[2])?;
    if n < 0 {
        return Err(Reply::err("ERR Number of keys can't be negative"));
    }
    if n as usize > args.len() - 3 {
        return Err(Reply::err(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    Ok(n as usize)
}

const NOSCRIPT_ERR: Reply = Reply::err("NOSCRIPT No matching script. Please use EVAL.");

fn eval_generic(ctx: &mut Ctx, args: &[&[u8]], by_sha: bool, ro: bool) -> Reply {
    // The script's own commands must follow it on MONITOR (the row is skip_monitor).
    ctx.ex.feed_monitors_always(ctx.client, ctx.cmd, args);
    if let Some(mode) = ctx.client_ref().lua_debug {
        if !by_sha {
            return debug_eval(ctx, args, ro, mode);
        }
        if args[1].len() == 40 {
            return Reply::err("ERR Please use EVAL instead of EVALSHA for debugging");
        }
    }
    let numkeys = match parse_numkeys(args) {
        Ok(n) => n,
        Err(e) => return e,
    };
    with_engine(ctx, |ctx, engine| {
        eval_with(ctx, engine, args, numkeys, by_sha, ro)
    })
}

/// Runs `f` with the scripting engine taken out of the executor (so `redis.call` can
/// borrow the executor), putting it back even if `f` panics: the executor turns the
/// panic into an error reply, and the engine's script cache and FUNCTION libraries
/// must outlive it.
pub(crate) fn with_engine<R>(ctx: &mut Ctx, f: impl FnOnce(&mut Ctx, &mut Engine) -> R) -> R {
    let mut engine = Engine::take(ctx.ex);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(ctx, &mut engine)));
    Engine::put_back(ctx.ex, engine);
    r.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

fn eval_with(
    ctx: &mut Ctx,
    engine: &mut Engine,
    args: &[&[u8]],
    numkeys: usize,
    by_sha: bool,
    ro: bool,
) -> Reply {
    let mut lowered = [0u8; 40];
    let sha = if by_sha {
        // Looked up from a lowercased copy on the stack: no allocation per call.
        let Some(sha) = scripting::lowercase_sha(args[1], &mut lowered) else {
            return NOSCRIPT_ERR;
        };
        if !engine.scripts.contains_key(sha) {
            return NOSCRIPT_ERR;
        }
        std::borrow::Cow::Borrowed(sha)
    } else {
        match engine.load_eval_script(args[1]) {
            Ok(s) => std::borrow::Cow::Owned(s),
            Err(e) => return e,
        }
    };
    let lua_slot = engine.lua_client(ctx.ex);
    let script = &engine.scripts[&*sha];
    if let Some(refused) = scripting::refused_before_run(ctx.ex, ctx.client, script.flags, ro) {
        return refused;
    }
    if ctx.ex.cluster.is_some()
        && script.flags & sflags::NO_CLUSTER != 0
        && script.flags & sflags::EVAL_COMPAT == 0
    {
        return Reply::err("ERR Can not run script on cluster, 'no-cluster' flag is set.");
    }
    let spec = RunSpec {
        name: &sha,
        read_only: ro || script.flags & sflags::NO_WRITES != 0,
        keys: &args[3..3 + numkeys],
        argv: &args[3 + numkeys..],
        as_args: false,
        command: args,
        functions: None,
        allow_oom: script.flags & sflags::ALLOW_OOM != 0,
        cross_slot: script.flags & (sflags::ALLOW_CROSS_SLOT | sflags::EVAL_COMPAT) != 0,
    };
    let reply = scripting::run(
        ctx.ex,
        ctx.client,
        lua_slot,
        &engine.eval,
        &script.key,
        &spec,
    );
    engine.touch_script(&sha);
    reply
}

/// An EVAL of a client that asked for SCRIPT DEBUG: a debugging session
/// (scripting/ldb.rs), forked for YES, in the server for SYNC. The client is closed
/// after the script's reply, which ends the session.
fn debug_eval(ctx: &mut Ctx, args: &[&[u8]], ro: bool, mode: ldb::Mode) -> Reply {
    let fd = ctx.client_ref().fd as std::os::fd::RawFd;
    let forked = mode == ldb::Mode::Forked;
    if forked {
        match ldb::fork_session(fd) {
            Err(e) => {
                ctx.client().lua_debug = None;
                return Reply::error(format!(
                    "ERR Fork() failed: can't run EVAL in debugging mode: {e}"
                ));
            }
            // The child has the connection now; ours goes without a word.
            Ok(ldb::Forked::Parent) => {
                // Closed before the loop reads from the socket again.
                let c = ctx.client();
                c.lua_debug = None;
                c.close_asap = true;
                ctx.ex.close_pending = true;
                return Reply::NoReply;
            }
            Ok(ldb::Forked::Child) => {}
        }
    } else {
        crate::log::notice("Redis synchronous debugging eval session started");
    }
    let threshold = ctx.ex.config.busy_reply_threshold;
    let reply = with_engine(ctx, |ctx, engine| {
        ldb::begin(&engine.eval, fd, args[1], threshold);
        // The session ends (its hook removed, `<endsession>` sent) even if the run
        // panics.
        let run =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match parse_numkeys(args) {
                Ok(numkeys) => eval_with(ctx, engine, args, numkeys, false, ro),
                Err(e) => e,
            }));
        ldb::end(&engine.eval);
        run.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    if forked {
        let mut wire = Vec::new();
        reply.encode(ctx.proto(), &mut wire);
        ldb::finish_child(fd, &wire);
    }
    crate::log::notice("Redis synchronous debugging eval session ended");
    ctx.client().close_after_reply = true;
    reply
}

fn script_debug(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let c = ctx.client_ref();
    if !c.sealed.is_empty() || c.out.len() > c.out_pos {
        return Reply::err("ERR SCRIPT DEBUG must be called outside a pipeline");
    }
    let mode = if args[2].eq_ignore_ascii_case(b"no") {
        None
    } else if args[2].eq_ignore_ascii_case(b"yes") {
        Some(ldb::Mode::Forked)
    } else if args[2].eq_ignore_ascii_case(b"sync") {
        Some(ldb::Mode::Sync)
    } else {
        return Reply::err("ERR Use SCRIPT DEBUG YES/SYNC/NO");
    };
    // The debugger talks to the socket itself, in plain bytes.
    if mode.is_some() && (c.tls || c.fd < 0) {
        return Reply::err("ERR SCRIPT DEBUG is not available on TLS connections");
    }
    ctx.client().lua_debug = mode;
    Reply::ok()
}

fn script_load(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let r = with_engine(ctx, |_, engine| engine.load_script(args[2]));
    match r {
        Ok(sha) => Reply::Bulk(sha.into_bytes()),
        Err(e) => e,
    }
}

fn script_exists(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let engine = ctx.ex.scripting.as_ref();
    Reply::Array(
        args[2..]
            .iter()
            .map(|a| {
                let sha = String::from_utf8_lossy(a).to_ascii_lowercase();
                Reply::Int(engine.is_some_and(|e| e.scripts.contains_key(&sha)) as i64)
            })
            .collect(),
    )
}

fn script_flush(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if args.len() > 3
        || (args.len() == 3
            && !args[2].eq_ignore_ascii_case(b"sync")
            && !args[2].eq_ignore_ascii_case(b"async"))
    {
        return Reply::err("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
    }
    let lazy = match args.get(2) {
        Some(a) => a.eq_ignore_ascii_case(b"async"),
        None => ctx.ex.config.lazyfree_lazy_user_flush,
    };
    if let Some(e) = ctx.ex.scripting.as_mut() {
        let (old, scripts) = e.flush_scripts();
        // As Redis: only a cache of more than LAZYFREE_THRESHOLD scripts goes to the
        // background, counted by its scripts.
        if lazy && scripts > LAZYFREE_THRESHOLD {
            ctx.ex.ks.lazyfree.free_other(Box::new(old), scripts as u64);
        }
    }
    Reply::ok()
}

fn script_kill(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    // Reachable while a script is busy (exec/busy.rs): the script stops at its next
    // watchdog check.
    ctx.ex.kill_script(true)
}

fn script_help(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    let lines = [
        "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DEBUG (YES|SYNC|NO)",
        "    Set the debug mode for subsequent scripts executed.",
        "EXISTS <sha1> [<sha1> ...]",
        "    Return information about the existence of the scripts in the script cache.",
        "FLUSH [ASYNC|SYNC]",
        "    Flush the Lua scripts cache. Very dangerous on replicas.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the scripts cache.",
        "    * SYNC: Synchronously flush the scripts cache.",
        "KILL",
        "    Kill the currently executing Lua script.",
        "LOAD <script>",
        "    Load a script into the scripts cache without executing it.",
        "HELP",
        "    Prints this help.",
    ];
    Reply::Array(lines.iter().map(|l| Reply::Status((*l).into())).collect())
}
