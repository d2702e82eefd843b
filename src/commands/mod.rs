//! The declarative command table and the context handlers run in.
//!
//! Every command is one `Command` row next to its handler in its family module: name,
//! arity, flags, key positions, ACL categories, documentation, handler, subcommands.
//! The executor dispatches from these rows and COMMAND INFO/DOCS/LIST/COUNT/GETKEYS are
//! generated from them, so adding a command is one row and one function.
//!
//! A handler parses its arguments, works on the keyspace through `Ctx`, and returns a
//! `Reply`. It never touches sockets.

pub mod acl;
pub mod bitmaps;
pub mod cluster;
pub mod connection;
pub mod ctx;
pub mod debug;
mod debug_htstats;
pub mod digest;
pub mod functions;
pub mod geo;
pub mod hashes;
pub mod hyperloglog;
pub mod info_extra;
pub mod introspection;
pub mod keyflags;
pub mod keys;
pub mod latency;
pub mod lists;
pub mod memory_report;
pub mod migrate;
pub mod migrate_conn;
pub mod module;
pub mod monitor;
mod name_index;
pub mod persistence;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod sort;
pub mod stream_groups;
pub mod streams;
pub mod strings;
pub mod tracking;
pub mod transactions;
pub mod waitaof;
pub mod zsets;

use crate::util::FastMap;
use name_index::NameIndex;
use std::sync::OnceLock;

pub use ctx::Ctx;

use crate::protocol::Reply;

pub type Handler = fn(&mut Ctx, &[&[u8]]) -> Reply;

/// Command flags, as COMMAND INFO names them.
pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const SKIP_MONITOR: u32 = 1 << 9;
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    pub const FAST: u32 = 1 << 11;
    pub const NO_AUTH: u32 = 1 << 12;
    pub const MAY_REPLICATE: u32 = 1 << 13;
    pub const NO_MULTI: u32 = 1 << 14;
    pub const MOVABLE_KEYS: u32 = 1 << 15;
    pub const ALLOW_BUSY: u32 = 1 << 16;
    pub const NO_MANDATORY_KEYS: u32 = 1 << 17;
    /// Refused unless `enable-debug-command` / `enable-module-command` allows the
    /// client; COMMAND INFO does not show it, as Redis hides it.
    pub const PROTECTED: u32 = 1 << 18;
    /// Accepted for an IMPORTING slot without ASKING (RESTORE-ASKING).
    pub const ASKING: u32 = 1 << 19;
    /// Refused by Redis while it loads a replication image asynchronously
    /// (`repl-diskless-load swapdb`); shown by COMMAND, as Redis does.
    pub const NO_ASYNC_LOADING: u32 = 1 << 20;

    /// In Redis's order (addReplyCommandFlags); MAY_REPLICATE and PROTECTED are
    /// hidden, as there.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (ASKING, "asking"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (MOVABLE_KEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// Where a command's keys are, beyond the first/last/step triple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySpec {
    /// Keys at first..=last (negative last counts from the end) every `step`.
    Range,
    /// A count at `first` precedes that many keys (ZUNION numkeys key…, LMPOP, EVAL).
    Counted,
    /// The first half of the arguments after the keyword STREAMS, searched from
    /// `first_key` on (XREAD, XREADGROUP: `STREAMS k1 k2 id1 id2`).
    AfterStreams,
    /// No keys, or keys found by a custom rule (SORT's STORE, MIGRATE).
    None,
}

/// One row of the command table.
pub struct Command {
    /// Lowercase name; subcommands are named `container|sub`.
    pub name: &'static str,
    pub arity: i32,
    pub flags: u32,
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    pub key_spec: KeySpec,
    /// ACL categories without the leading `@`.
    pub acl: &'static [&'static str],
    pub group: &'static str,
    pub since: &'static str,
    pub summary: &'static str,
    pub complexity: &'static str,
    pub handler: Handler,
    pub subcommands: &'static [Command],
}

impl Command {
    /// The name without the container prefix (`list` for `client|list`).
    pub fn short_name(&self) -> &'static str {
        self.name.rsplit('|').next().unwrap_or(self.name)
    }

    pub fn is_write(&self) -> bool {
        self.flags & flags::WRITE != 0
    }

    /// Positions of key arguments in `args` (args[0] is the command name).
    pub fn key_positions(&self, args: &[&[u8]]) -> Vec<usize> {
        if self.name == "migrate" {
            return migrate::key_positions(args);
        }
        let mut keys = self.spec_key_positions(args);
        if self.name == "sort" && !keys.is_empty() {
            keys.extend(sort_store_position(args));
        }
        if matches!(self.name, "georadius" | "georadiusbymember") && !keys.is_empty() {
            // Key specs found by keyword: the argument after the first STORE, and
            // after the first STOREDIST, from the first optional argument on.
            let from = if self.name == "georadius" { 6 } else { 5 };
            for word in ["store", "storedist"] {
                let found = args.iter().skip(from).position(|a| is(a, word));
                if let Some(at) = found.map(|i| i + from + 1).filter(|&at| at < args.len()) {
                    keys.push(at);
                }
            }
        }
        keys
    }

    fn spec_key_positions(&self, args: &[&[u8]]) -> Vec<usize> {
        let argc = args.len() as i32;
        match self.key_spec {
            KeySpec::None => Vec::new(),
            KeySpec::Range => {
                if self.first_key <= 0 {
                    return Vec::new();
                }
                let last = if self.last_key < 0 {
                    argc + self.last_key
                } else {
                    self.last_key
                };
                let step = self.step.max(1);
                (self.first_key..=last.min(argc - 1))
                    .step_by(step as usize)
                    .map(|i| i as usize)
                    .collect()
            }
            KeySpec::AfterStreams => {
                let from = self.first_key.max(1) as usize;
                let Some(at) = args
                    .iter()
                    .skip(from)
                    .position(|a| is(a, "streams"))
                    .map(|i| i + from)
                else {
                    return Vec::new();
                };
                let rest = args.len() - at - 1;
                (at + 1..at + 1 + rest / 2).collect()
            }
            KeySpec::Counted => {
                let at = self.first_key as usize;
                let Some(n) = args
                    .get(at)
                    .and_then(|a| crate::util::numeric::parse_i64(a))
                else {
                    return Vec::new();
                };
                // A count past the arguments there are gives no keys (Redis's key
                // specs refuse it too); the command itself answers the error.
                match usize::try_from(n) {
                    Ok(n) if n < args.len() - at => (at + 1..at + 1 + n).collect(),
                    _ => Vec::new(),
                }
            }
        }
    }
}

/// SORT's destination: the argument after the last STORE, found as Redis's
/// sortGetKeys scans (LIMIT skips two arguments, GET and BY one, anything else none).
fn sort_store_position(args: &[&[u8]]) -> Option<usize> {
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let a = args[i];
        if is(a, "limit") {
            i += 2;
        } else if is(a, "get") || is(a, "by") {
            i += 1;
        } else if is(a, "store") && i + 1 < args.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    store
}

/// Builds a command row with the documentation fields defaulted; family modules use
/// this through the `command!` macro.
#[macro_export]
macro_rules! command {
    ($name:literal, $arity:expr, $flags:expr, ($first:expr, $last:expr, $step:expr), $acl:expr,
     $group:literal, $since:literal, $summary:literal, $complexity:literal, $handler:expr) => {
        $crate::commands::Command {
            name: $name,
            arity: $arity,
            flags: $flags,
            first_key: $first,
            last_key: $last,
            step: $step,
            key_spec: if $first > 0 {
                $crate::commands::KeySpec::Range
            } else {
                $crate::commands::KeySpec::None
            },
            acl: $acl,
            group: $group,
            since: $since,
            summary: $summary,
            complexity: $complexity,
            handler: $handler,
            subcommands: &[],
        }
    };
}

/// A container command (CLIENT, CONFIG, …) whose rows are its subcommands.
#[macro_export]
macro_rules! container {
    ($name:literal, $acl:expr, $group:literal, $since:literal, $summary:literal, $subs:expr) => {
        $crate::commands::Command {
            name: $name,
            arity: -2,
            flags: 0,
            first_key: 0,
            last_key: 0,
            step: 0,
            key_spec: $crate::commands::KeySpec::None,
            acl: $acl,
            group: $group,
            since: $since,
            summary: $summary,
            complexity: "Depends on subcommand.",
            handler: $crate::commands::container_without_subcommand,
            subcommands: $subs,
        }
    };
}

/// Handler of a container called with a subcommand it doesn't have; never reached
/// through dispatch, which resolves subcommands first.
pub fn container_without_subcommand(_ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    unknown_subcommand(args)
}

pub fn unknown_subcommand(args: &[&[u8]]) -> Reply {
    let sub = String::from_utf8_lossy(args.get(1).copied().unwrap_or(b""));
    let cmd = String::from_utf8_lossy(args[0]).to_ascii_uppercase();
    Reply::error(format!(
        "ERR unknown subcommand '{:.128}'. Try {cmd} HELP.",
        sub
    ))
}

/// Redis's addReplySubcommandSyntaxError: a known subcommand given the wrong
/// number of arguments within its arity.
pub fn subcommand_syntax_error(args: &[&[u8]]) -> Reply {
    Reply::error(format!(
        "ERR unknown subcommand or wrong number of arguments for '{:.128}'. Try {} HELP.",
        String::from_utf8_lossy(args[1]),
        String::from_utf8_lossy(args[0]).to_ascii_uppercase()
    ))
}

/// Every family's rows.
pub fn families() -> impl Iterator<Item = &'static Command> {
    [
        connection::COMMANDS,
        keys::COMMANDS,
        strings::COMMANDS,
        lists::COMMANDS,
        bitmaps::COMMANDS,
        hyperloglog::COMMANDS,
        hashes::COMMANDS,
        sets::COMMANDS,
        sort::COMMANDS,
        server::COMMANDS,
        introspection::COMMANDS,
        zsets::COMMANDS,
        geo::COMMANDS,
        transactions::COMMANDS,
        pubsub::COMMANDS,
        monitor::COMMANDS,
        scripting::COMMANDS,
        streams::COMMANDS,
        functions::COMMANDS,
        persistence::COMMANDS,
        migrate::COMMANDS,
        replication::COMMANDS,
        acl::COMMANDS,
        latency::COMMANDS,
        waitaof::COMMANDS,
        module::COMMANDS,
        cluster::COMMANDS,
    ]
    .into_iter()
    .flat_map(|f| f.iter())
}

/// Name → row, built once.
pub fn table() -> &'static FastMap<&'static [u8], &'static Command> {
    static TABLE: OnceLock<FastMap<&'static [u8], &'static Command>> = OnceLock::new();
    TABLE.get_or_init(|| families().map(|c| (c.name.as_bytes(), c)).collect())
}

/// The table again, indexed for the lookup of each request (`name_index.rs`).
fn name_index() -> &'static NameIndex {
    static INDEX: OnceLock<NameIndex> = OnceLock::new();
    INDEX.get_or_init(|| NameIndex::new(families()))
}

/// Names changed by `rename-command`: a new name maps to its command, an old name to
/// None. Set once at startup; the command table itself never changes.
static RENAMES: OnceLock<FastMap<Vec<u8>, Option<&'static Command>>> = OnceLock::new();

/// Resolves `rename-command old new` lines in order, as Redis applies them to its
/// command table: `old` must name a command at that point (an earlier line may have
/// renamed or removed it) and `new`, unless empty, must not.
pub fn resolve_renames(
    pairs: &[(String, String)],
) -> Result<FastMap<Vec<u8>, Option<&'static Command>>, &'static str> {
    let mut map: FastMap<Vec<u8>, Option<&'static Command>> = FastMap::default();
    let current =
        |map: &FastMap<Vec<u8>, Option<&'static Command>>, name: &[u8]| match map.get(name) {
            Some(hit) => *hit,
            None => table().get(name).copied(),
        };
    for (old, new) in pairs {
        let old = old.to_ascii_lowercase().into_bytes();
        let cmd = current(&map, &old).ok_or("No such command in rename-command")?;
        map.insert(old, None);
        if !new.is_empty() {
            let new = new.to_ascii_lowercase().into_bytes();
            if current(&map, &new).is_some() {
                return Err("Target command name already exists");
            }
            map.insert(new, Some(cmd));
        }
    }
    Ok(map)
}

/// Installs the startup configuration's renames (once per process).
pub fn install_renames(pairs: &[(String, String)]) -> Result<(), &'static str> {
    if pairs.is_empty() {
        return Ok(());
    }
    let map = resolve_renames(pairs)?;
    let _ = RENAMES.set(map);
    Ok(())
}

/// Finds a command by name, case-insensitively (without allocating unless commands
/// were renamed).
#[inline]
pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    // Once per request: the packed-name index, unless commands were renamed or the
    // name is too long for it.
    if RENAMES.get().is_none() {
        if let Ok(found) = name_index().get(name) {
            return found;
        }
    }
    lookup_renamed_or_long(name)
}

#[inline(never)]
fn lookup_renamed_or_long(name: &[u8]) -> Option<&'static Command> {
    if let Some(renames) = RENAMES.get() {
        let lower = name.to_ascii_lowercase();
        if let Some(hit) = renames.get(&lower) {
            return *hit;
        }
    }
    if let Ok(found) = name_index().get(name) {
        return found;
    }
    let mut buf = [0u8; 32];
    if name.len() > buf.len() {
        return None;
    }
    for (d, s) in buf.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    table().get(&buf[..name.len()]).copied()
}

/// Resolves a container's subcommand.
pub fn lookup_subcommand(cmd: &'static Command, sub: &[u8]) -> Option<&'static Command> {
    cmd.subcommands
        .iter()
        .find(|s| s.short_name().as_bytes().eq_ignore_ascii_case(sub))
}

/// Whether `args` satisfy `arity` (negative: at least that many).
pub fn arity_ok(arity: i32, argc: usize) -> bool {
    if arity >= 0 {
        argc == arity as usize
    } else {
        argc >= (-arity) as usize
    }
}

pub fn wrong_arity(name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// Redis's shared error replies, byte for byte.
pub mod errors {
    use crate::protocol::Reply;

    pub const SYNTAX: Reply = Reply::err("ERR syntax error");
    pub const WRONGTYPE: Reply =
        Reply::err("WRONGTYPE Operation against a key holding the wrong kind of value");
    pub const NOT_INTEGER: Reply = Reply::err("ERR value is not an integer or out of range");
    pub const NOT_FLOAT: Reply = Reply::err("ERR value is not a valid float");
    pub const NO_SUCH_KEY: Reply = Reply::err("ERR no such key");
    pub const OVERFLOW: Reply = Reply::err("ERR increment or decrement would overflow");
    pub const DB_INDEX: Reply = Reply::err("ERR DB index is out of range");
    pub const STRING_TOO_LONG: Reply =
        Reply::err("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
    pub const NOAUTH: Reply = Reply::err("NOAUTH Authentication required.");
    pub const WRONGPASS: Reply =
        Reply::err("WRONGPASS invalid username-password pair or user is disabled.");
    pub const OUT_OF_RANGE: Reply = Reply::err("ERR index out of range");

    pub fn invalid_expire(cmd: &str) -> Reply {
        Reply::error(format!("ERR invalid expire time in '{cmd}' command"))
    }
}

/// Parses an integer argument with Redis's strictness.
pub fn arg_i64(a: &[u8]) -> Result<i64, Reply> {
    crate::util::numeric::parse_i64(a).ok_or(errors::NOT_INTEGER)
}

/// Redis's getRangeLongFromObjectOrReply: an integer in `min..=max`; `msg` (when
/// given) replaces both the not-an-integer and the out-of-range errors.
pub fn arg_in_range(a: &[u8], min: i64, max: i64, msg: Option<&'static str>) -> Result<i64, Reply> {
    let err = |m: &'static str| Reply::error(format!("ERR {m}"));
    let n = match crate::util::numeric::parse_i64(a) {
        Some(n) => n,
        None => return Err(msg.map_or(errors::NOT_INTEGER, err)),
    };
    if n < min || n > max {
        return Err(match msg {
            Some(m) => err(m),
            None => Reply::error(format!(
                "ERR value is out of range, value must between {min} and {max}"
            )),
        });
    }
    Ok(n)
}

/// Redis's getPositiveLongFromObjectOrReply: a count of 0 or more, whose one error
/// (not an integer or negative alike) is `msg`, by default "value is out of range,
/// must be positive".
pub fn arg_positive(a: &[u8], msg: Option<&'static str>) -> Result<i64, Reply> {
    arg_in_range(
        a,
        0,
        i64::MAX,
        Some(msg.unwrap_or("value is out of range, must be positive")),
    )
}

/// Redis's getIntFromObjectOrReply: a 32-bit integer, `msg` replacing both errors.
pub fn arg_i32(a: &[u8], msg: Option<&'static str>) -> Result<i64, Reply> {
    arg_in_range(a, i32::MIN as i64, i32::MAX as i64, msg)
}

/// A database index as MOVE and COPY read it (a 32-bit integer, then the range
/// check): an index past `databases` is "DB index is out of range".
pub fn arg_db_index(a: &[u8], databases: usize) -> Result<usize, Reply> {
    let n = arg_i32(a, None)?;
    usize::try_from(n)
        .ok()
        .filter(|&d| d < databases)
        .ok_or(errors::DB_INDEX)
}

/// Case-insensitive comparison of an argument with an option name.
#[inline]
pub fn is(a: &[u8], opt: &str) -> bool {
    a.eq_ignore_ascii_case(opt.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        let mut names = std::collections::HashSet::new();
        for c in families() {
            assert!(names.insert(c.name), "duplicate command {}", c.name);
            assert_eq!(c.name, c.name.to_ascii_lowercase());
            assert!(c.arity != 0, "{} has arity 0", c.name);
            for s in c.subcommands {
                assert!(s.name.starts_with(&format!("{}|", c.name)), "{}", s.name);
            }
        }
        assert!(lookup(b"GeT").is_some());
        assert!(lookup(b"nope").is_none());
    }
}
