//! MODULE: Cinnabar loads no Redis modules (their C ABI is Redis's internals), so the
//! list is always empty and LOAD/LOADEX/UNLOAD fail with Redis's replies. LOAD, LOADEX
//! and UNLOAD are protected commands (`enable-module-command`), as in Redis.

use crate::command;
use crate::commands::flags::*;
use crate::commands::keys::help_reply;
use crate::commands::{Command, Ctx};
use crate::container;
use crate::protocol::Reply;

const ADMIN_ACL: &[&str] = &["admin", "slow", "dangerous"];

pub static COMMANDS: &[Command] = &[container!(
    "module",
    &["slow"],
    "server",
    "4.0.0",
    "A container for module commands.",
    MODULE_SUBCOMMANDS
)];

static MODULE_SUBCOMMANDS: &[Command] = &[
    command!(
        "module|help",
        2,
        LOADING | STALE,
        (0, 0, 0),
        &["slow"],
        "server",
        "5.0.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        module_help
    ),
    command!(
        "module|list",
        2,
        ADMIN | NOSCRIPT,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "4.0.0",
        "Returns all loaded modules.",
        "O(N) where N is the number of loaded modules.",
        module_list
    ),
    command!(
        "module|load",
        -3,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING | PROTECTED,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "4.0.0",
        "Loads a module.",
        "O(1)",
        module_load
    ),
    command!(
        "module|loadex",
        -3,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING | PROTECTED,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "7.0.0",
        "Loads a module using extended parameters.",
        "O(1)",
        module_load
    ),
    command!(
        "module|unload",
        3,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING | PROTECTED,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "4.0.0",
        "Unloads a module.",
        "O(1)",
        module_unload
    ),
];

fn module_help(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    help_reply(
        "MODULE",
        &[
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
        ],
    )
}

fn module_list(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    Reply::Array(Vec::new())
}

fn module_load(_ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    crate::log::warning(&format!(
        "Module {} failed to load: this server does not load Redis modules",
        String::from_utf8_lossy(args[2])
    ));
    Reply::err("ERR Error loading the extension. Please check the server logs.")
}

fn module_unload(_ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let why = "no such module with that name";
    crate::log::warning(&format!(
        "Error unloading module {}: {why}",
        String::from_utf8_lossy(args[2])
    ));
    Reply::error(format!("ERR Error unloading module: {why}"))
}
