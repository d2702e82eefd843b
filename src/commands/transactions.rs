//! Transaction commands: MULTI, EXEC, DISCARD, WATCH, UNWATCH. The queue, EXEC's
//! execution and WATCH's bookkeeping live in `exec/multi.rs`; these handlers only
//! check their own errors.

use crate::command;
use crate::commands::flags::*;
use crate::commands::{Command, Ctx};
use crate::protocol::Reply;

const TX: &[&str] = &["fast", "transaction"];

pub static COMMANDS: &[Command] = &[
    command!(
        "multi",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
        (0, 0, 0),
        TX,
        "transactions",
        "1.2.0",
        "Starts a transaction.",
        "O(1)",
        multi
    ),
    command!(
        "exec",
        1,
        NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG,
        (0, 0, 0),
        &["slow", "transaction"],
        "transactions",
        "1.2.0",
        "Executes all commands in a transaction.",
        "Depends on commands in the transaction",
        exec
    ),
    command!(
        "discard",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
        (0, 0, 0),
        TX,
        "transactions",
        "2.0.0",
        "Discards a transaction.",
        "O(N), when N is the number of queued commands",
        discard
    ),
    command!(
        "watch",
        -2,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
        (1, -1, 1),
        TX,
        "transactions",
        "2.2.0",
        "Monitors changes to keys to determine the execution of a transaction.",
        "O(1) for every key.",
        watch
    ),
    command!(
        "unwatch",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
        (0, 0, 0),
        TX,
        "transactions",
        "2.2.0",
        "Forgets about watched keys of a transaction.",
        "O(1)",
        unwatch
    ),
];

fn multi(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    ctx.ex.multi(ctx.client)
}

fn exec(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    ctx.ex.exec(ctx.client)
}

fn discard(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    if !ctx.client_ref().in_multi() {
        return Reply::err("ERR DISCARD without MULTI");
    }
    ctx.ex.discard_transaction(ctx.client);
    Reply::ok()
}

fn watch(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if ctx.client_ref().in_multi() {
        return Reply::err("ERR WATCH inside MULTI is not allowed");
    }
    ctx.ex.watch(ctx.client, &args[1..]);
    Reply::ok()
}

fn unwatch(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    ctx.ex.unwatch_all(ctx.client);
    ctx.client().tx.dirty_cas = false;
    Reply::ok()
}
