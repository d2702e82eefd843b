//! MONITOR. The command stream itself is produced in `exec/monitor.rs`.

use crate::command;
use crate::commands::flags::*;
use crate::commands::{Command, Ctx};
use crate::protocol::Reply;

pub static COMMANDS: &[Command] = &[command!(
    "monitor",
    1,
    ADMIN | NOSCRIPT | LOADING | STALE,
    (0, 0, 0),
    &["admin", "slow", "dangerous"],
    "server",
    "1.0.0",
    "Listens for all requests received by the server in real-time.",
    "",
    monitor
)];

fn monitor(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    // A transaction expects one reply per command, which a monitor stream is not.
    if ctx.client_ref().in_exec {
        return Reply::err("ERR MONITOR isn't allowed for DENY BLOCKING client");
    }
    ctx.ex.monitor_start(ctx.client);
    Reply::ok()
}
