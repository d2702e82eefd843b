//! The ACL command: SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT, LOG,
//! GENPASS, DRYRUN, LOAD, SAVE, HELP.
//!
//! Users, rules and checks live in `src/acl`; these handlers parse arguments, call
//! it, and shape the replies as Redis 7.4 does (GETUSER is a map whose `flags` is a
//! set; LOG entries are maps with `age-seconds` as a double). Whenever users change,
//! clients' cached fast-path flags are refreshed and clients of deleted users are
//! disconnected.

use super::flags::*;
use super::keys::help_reply;
use super::{is, Command, Ctx};
use crate::acl::{self, table, User};
use crate::protocol::Reply;
use crate::{command, container};

const ADMIN_ACL: &[&str] = &["admin", "slow", "dangerous"];
const SLOW: &[&str] = &["slow"];
const A: u32 = ADMIN | NOSCRIPT | LOADING | STALE;
const N: u32 = NOSCRIPT | LOADING | STALE;

pub static COMMANDS: &[Command] = &[container!(
    "acl",
    SLOW,
    "server",
    "6.0.0",
    "A container for Access List Control commands",
    SUBCOMMANDS
)];

static SUBCOMMANDS: &[Command] = &[
    command!(
        "acl|cat",
        -2,
        N,
        (0, 0, 0),
        SLOW,
        "server",
        "6.0.0",
        "List the ACL categories or the commands inside a category",
        "O(1) since the categories and commands are a fixed set.",
        acl_cat
    ),
    command!(
        "acl|deluser",
        -3,
        A,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "6.0.0",
        "Remove the specified ACL users and the associated rules",
        "O(1) amortized time considering the typical user.",
        acl_deluser
    ),
    command!(
        "acl|dryrun",
        -4,
        A,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "7.0.0",
        "Returns whether the user can execute the given command without executing the command.",
        "O(1).",
        acl_dryrun
    ),
    command!(
        "acl|genpass",
        -2,
        N,
        (0, 0, 0),
        SLOW,
        "server",
        "6.0.0",
        "Generate a pseudorandom secure password to use for ACL users",
        "O(1)",
        acl_genpass
    ),
    command!(
        "acl|getuser",
        3,
        A,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "6.0.0",
        "Get the rules for a specific ACL user",
        "O(N). Where N is the number of password, command and pattern rules that the user has.",
        acl_getuser
    ),
    command!(
        "acl|help",
        2,
        LOADING | STALE,
        (0, 0, 0),
        SLOW,
        "server",
        "6.0.0",
        "Show helpful text about the different subcommands",
        "O(1)",
        acl_help
    ),
    command!(
        "acl|list",
        2,
        A,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "6.0.0",
        "List the current ACL rules in ACL config file format",
        "O(N). Where N is the number of configured users.",
        acl_list
    ),
    command!(
        "acl|load",
        2,
        A,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "6.0.0",
        "Reload the ACLs from the configured ACL file",
        "O(N). Where N is the number of configured users.",
        acl_load
    ),
    command!(
        "acl|log",
        -2,
        A,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "6.0.0",
        "List latest events denied because of ACLs in place",
        "O(N) with N being the number of entries shown.",
        acl_log
    ),
    command!(
        "acl|save",
        2,
        A,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "6.0.0",
        "Save the current ACL rules in the configured ACL file",
        "O(N). Where N is the number of configured users.",
        acl_save
    ),
    command!(
        "acl|setuser",
        -3,
        A,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "6.0.0",
        "Modify or create the rules for a specific ACL user",
        "O(N). Where N is the number of rules provided.",
        acl_setuser
    ),
    command!(
        "acl|users",
        2,
        A,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "6.0.0",
        "List the username of all the configured ACL rules",
        "O(N). Where N is the number of configured users.",
        acl_users
    ),
    command!(
        "acl|whoami",
        2,
        N,
        (0, 0, 0),
        SLOW,
        "server",
        "6.0.0",
        "Return the name of the user associated to the current connection",
        "O(1)",
        acl_whoami
    ),
];

fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&c| c.is_ascii_whitespace() || c == 0 || c == 0x0b)
}

fn acl_setuser(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let name_b = args[2];
    if has_spaces(name_b) {
        return Reply::err("ERR Usernames can't contain spaces or null characters");
    }
    let ops = match acl::user::merge_selector_args(&args[3..]) {
        Ok(o) => o,
        Err(j) => {
            return Reply::error(format!(
                "ERR Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(args[3 + j])
            ))
        }
    };
    let name = String::from_utf8_lossy(name_b).into_owned();
    let pubsub_all = ctx.ex.config.acl_pubsub_default_all;
    // Rules are staged on a copy: one bad rule changes nothing.
    let existed = ctx.ex.acl.users.contains_key(&name);
    let mut u = ctx
        .ex
        .acl
        .users
        .get(&name)
        .cloned()
        .unwrap_or_else(|| User::new(&name, pubsub_all));
    for op in &ops {
        if let Err(e) = u.apply(op, pubsub_all) {
            return Reply::error(format!(
                "ERR Error in ACL SETUSER modifier '{}': {}",
                String::from_utf8_lossy(op),
                e.message()
            ));
        }
    }
    ctx.ex.acl.users.insert(name.clone(), u);
    if existed {
        ctx.ex.acl_kill_pubsub_clients(&name, ctx.client);
    }
    ctx.ex.acl_refresh_clients();
    Reply::ok()
}

fn acl_deluser(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if args[2..].iter().any(|a| *a == b"default") {
        return Reply::err("ERR The 'default' user cannot be removed");
    }
    let mut deleted = Vec::new();
    for a in &args[2..] {
        let name = String::from_utf8_lossy(a).into_owned();
        if ctx.ex.acl.users.remove(&name).is_some() {
            deleted.push(name);
        }
    }
    ctx.ex.acl_kill_clients_of(&deleted, ctx.client);
    Reply::Int(deleted.len() as i64)
}

/// The commands/keys/channels fields of one selector (GETUSER).
fn selector_fields(s: &acl::Selector) -> Vec<(Reply, Reply)> {
    vec![
        (
            Reply::bulk(b"commands"),
            Reply::bulk(s.describe_commands().as_bytes()),
        ),
        (Reply::bulk(b"keys"), Reply::bulk(&s.describe_keys())),
        (
            Reply::bulk(b"channels"),
            Reply::bulk(&s.describe_channels()),
        ),
    ]
}

fn acl_getuser(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let name = String::from_utf8_lossy(args[2]);
    let Some(u) = ctx.ex.acl.user(&name) else {
        return Reply::Null;
    };
    let mut fields = vec![
        (
            Reply::bulk(b"flags"),
            Reply::Set(
                u.flags()
                    .iter()
                    .map(|f| Reply::bulk(f.as_bytes()))
                    .collect(),
            ),
        ),
        (
            Reply::bulk(b"passwords"),
            Reply::Array(
                u.passwords
                    .iter()
                    .map(|p| Reply::bulk(p.as_bytes()))
                    .collect(),
            ),
        ),
    ];
    fields.extend(selector_fields(u.root()));
    fields.push((
        Reply::bulk(b"selectors"),
        Reply::Array(
            u.selectors[1..]
                .iter()
                .map(|s| Reply::Map(selector_fields(s)))
                .collect(),
        ),
    ));
    Reply::Map(fields)
}

fn acl_list(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    Reply::Array(
        ctx.ex
            .acl
            .users
            .iter()
            .map(|(name, u)| {
                let mut line = b"user ".to_vec();
                line.extend_from_slice(name.as_bytes());
                line.push(b' ');
                line.extend_from_slice(&u.describe());
                Reply::bulk(&line)
            })
            .collect(),
    )
}

fn acl_users(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    Reply::Array(
        ctx.ex
            .acl
            .users
            .keys()
            .map(|n| Reply::bulk(n.as_bytes()))
            .collect(),
    )
}

fn acl_whoami(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    Reply::bulk(ctx.client_ref().user.as_bytes())
}

fn acl_cat(_ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match args.len() {
        2 => Reply::Array(
            table::CATEGORIES
                .iter()
                .map(|c| Reply::bulk(c.as_bytes()))
                .collect(),
        ),
        3 => {
            let Some(bit) = table::category_bit(args[2]) else {
                return Reply::error(format!(
                    "ERR Unknown category '{:.128}'",
                    String::from_utf8_lossy(args[2])
                ));
            };
            let t = table::table();
            Reply::Array(
                t.in_category(bit)
                    .map(|id| Reply::bulk(t.cmds[id].cmd.name.as_bytes()))
                    .collect(),
            )
        }
        _ => super::subcommand_syntax_error(args),
    }
}

fn acl_genpass(_ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    const MAX_BITS: i64 = 4096;
    let bits = match args.len() {
        2 => 256,
        3 => match super::arg_i64(args[2]) {
            Ok(b) => b,
            Err(e) => return e,
        },
        _ => return super::subcommand_syntax_error(args),
    };
    if bits <= 0 || bits > MAX_BITS {
        return Reply::error(format!(
            "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to {MAX_BITS}"
        ));
    }
    let chars = ((bits + 3) / 4) as usize;
    let mut raw = vec![0u8; chars.div_ceil(2)];
    random_bytes(&mut raw);
    let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    Reply::bulk(&hex.as_bytes()[..chars])
}

/// Secure random bytes from the kernel (fastrand as a fallback only if
/// /dev/urandom cannot be read).
fn random_bytes(buf: &mut [u8]) {
    use std::io::Read;
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .is_ok();
    if !ok {
        buf.iter_mut().for_each(|b| *b = fastrand::u8(..));
    }
}

fn acl_log(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let mut count: i64 = 10;
    match args.len() {
        2 => {}
        3 => {
            if is(args[2], "reset") {
                ctx.ex.acl.log.clear();
                return Reply::ok();
            }
            match super::arg_i64(args[2]) {
                Ok(n) => count = n.max(0),
                Err(e) => return e,
            }
        }
        _ => return super::subcommand_syntax_error(args),
    }
    let now = ctx.now_ms;
    Reply::Array(
        ctx.ex
            .acl
            .log
            .iter()
            .take(count as usize)
            .map(|e| {
                let reason: &[u8] = match e.reason {
                    acl::LogReason::Command => b"command",
                    acl::LogReason::Key => b"key",
                    acl::LogReason::Channel => b"channel",
                    acl::LogReason::Auth => b"auth",
                };
                let context: &[u8] = match e.context {
                    acl::LogContext::Toplevel => b"toplevel",
                    acl::LogContext::Multi => b"multi",
                    acl::LogContext::Lua => b"lua",
                };
                Reply::Map(vec![
                    (Reply::bulk(b"count"), Reply::Int(e.count as i64)),
                    (Reply::bulk(b"reason"), Reply::bulk(reason)),
                    (Reply::bulk(b"context"), Reply::bulk(context)),
                    (Reply::bulk(b"object"), Reply::bulk(&e.object)),
                    (Reply::bulk(b"username"), Reply::bulk(e.username.as_bytes())),
                    (
                        Reply::bulk(b"age-seconds"),
                        Reply::Double((now - e.ctime) as f64 / 1000.0),
                    ),
                    (Reply::bulk(b"client-info"), Reply::bulk(e.cinfo.as_bytes())),
                    (Reply::bulk(b"entry-id"), Reply::Int(e.entry_id as i64)),
                    (Reply::bulk(b"timestamp-created"), Reply::Int(e.created)),
                    (Reply::bulk(b"timestamp-last-updated"), Reply::Int(e.ctime)),
                ])
            })
            .collect(),
    )
}

fn acl_dryrun(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let name = String::from_utf8_lossy(args[2]).into_owned();
    if ctx.ex.acl.user(&name).is_none() {
        return Reply::error(format!("ERR User '{name}' not found"));
    }
    let target = &args[3..];
    let not_found = || {
        Reply::error(format!(
            "ERR Command '{}' not found",
            String::from_utf8_lossy(target[0])
        ))
    };
    let Some(mut cmd) = super::lookup(target[0]) else {
        return not_found();
    };
    if !cmd.subcommands.is_empty() && target.len() >= 2 {
        match super::lookup_subcommand(cmd, target[1]) {
            Some(s) => cmd = s,
            None => return not_found(),
        }
    }
    if !super::arity_ok(cmd.arity, target.len()) {
        return Reply::error(format!(
            "ERR wrong number of arguments for '{}' command",
            cmd.name
        ));
    }
    let Some(u) = ctx.ex.acl.user(&name) else {
        return Reply::Null;
    };
    match acl::check(u, cmd, target) {
        Ok(()) => Reply::ok(),
        Err(d) => Reply::bulk(acl::denied_message_verbose(d, &name, cmd, target).as_bytes()),
    }
}

const NO_ACLFILE: Reply = Reply::err("ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.");

fn acl_load(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    let file = ctx.ex.config.aclfile.clone();
    if file.is_empty() {
        return NO_ACLFILE;
    }
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) => {
            return Reply::error(format!(
                "ERR Error loading ACLs, opening file '{file}': {}",
                io_error_text(&e)
            ))
        }
    };
    let users = match acl::parse_acl_file(&text, &file, ctx.ex.config.acl_pubsub_default_all) {
        Ok(u) => u,
        Err(e) => return Reply::error(format!("ERR {e}")),
    };
    // As Redis 7.4's ACLLoadFromFile: clients of users the file no longer has are
    // disconnected; those of users it keeps stay, unless subscribed to channels
    // their new permissions deny.
    let removed: Vec<String> = ctx
        .ex
        .acl
        .users
        .keys()
        .filter(|n| n.as_str() != "default" && !users.contains_key(n.as_str()))
        .cloned()
        .collect();
    let kept: Vec<String> = users.keys().cloned().collect();
    ctx.ex.acl.users = users;
    ctx.ex.acl_kill_clients_of(&removed, ctx.client);
    for name in &kept {
        ctx.ex.acl_kill_pubsub_clients(name, ctx.client);
    }
    ctx.ex.acl_refresh_clients();
    Reply::ok()
}

fn io_error_text(e: &std::io::Error) -> String {
    crate::config::strerror(e)
}

fn acl_save(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    let file = ctx.ex.config.aclfile.clone();
    if file.is_empty() {
        return NO_ACLFILE;
    }
    let text = acl::acl_file_text(&ctx.ex.acl.users);
    match write_atomically(&file, &text) {
        Ok(()) => Reply::ok(),
        Err(e) => {
            crate::log::warning(&format!("Writing ACL file for ACL SAVE: {e}"));
            Reply::err("ERR There was an error trying to save the ACLs. Please check the server logs for more information")
        }
    }
}

/// Temp file, fsync, rename over the target, fsync the directory.
fn write_atomically(path: &str, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = format!(
        "{path}.tmp-{}-{}",
        std::process::id(),
        crate::keyspace::unix_ms()
    );
    let res = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        let dir = std::path::Path::new(path)
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        std::fs::File::open(dir)?.sync_all()
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

fn acl_help(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    help_reply(
        "ACL",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    )
}
