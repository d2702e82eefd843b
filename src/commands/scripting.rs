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
use crate::scripting::{self, sflags, Engine, RunSpec};

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
