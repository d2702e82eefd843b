//! COMMAND and its subcommands, generated from the command table.

use crate::command;
use crate::commands::flags::{self, *};
use crate::commands::keys::help_reply;
use crate::commands::{families, is, lookup, lookup_subcommand, Command, Ctx, KeySpec};
use crate::protocol::Reply;
use crate::util::glob::glob_match;

const CONN_SLOW: &[&str] = &["connection", "slow"];

pub static COMMANDS: &[Command] = &[Command {
    name: "command",
    arity: -1,
    flags: LOADING | STALE,
    first_key: 0,
    last_key: 0,
    step: 0,
    key_spec: KeySpec::None,
    acl: CONN_SLOW,
    group: "server",
    since: "2.8.13",
    summary: "Returns detailed information about all commands.",
    complexity: "O(N) where N is the total number of Redis commands",
    handler: command_all,
    subcommands: COMMAND_SUBCOMMANDS,
}];

static COMMAND_SUBCOMMANDS: &[Command] = &[
    command!(
        "command|count",
        2,
        LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "server",
        "2.8.13",
        "Returns a count of commands.",
        "O(1)",
        command_count
    ),
    command!(
        "command|info",
        -2,
        LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "server",
        "2.8.13",
        "Returns information about one, multiple or all commands.",
        "O(N) where N is the number of commands to look up",
        command_info
    ),
    command!(
        "command|list",
        -2,
        LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "server",
        "7.0.0",
        "Returns a list of command names.",
        "O(N) where N is the total number of Redis commands",
        command_list
    ),
    command!(
        "command|docs",
        -2,
        LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "server",
        "7.0.0",
        "Returns documentary information about one, multiple or all commands.",
        "O(N) where N is the number of commands to look up",
        command_docs
    ),
    command!(
        "command|getkeys",
        -3,
        LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "server",
        "2.8.13",
        "Extracts the key names from an arbitrary command.",
        "O(N) where N is the number of arguments to the command",
        command_getkeys
    ),
    command!(
        "command|getkeysandflags",
        -3,
        LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "server",
        "7.0.0",
        "Extracts the key names and access flags for an arbitrary command.",
        "O(N) where N is the number of arguments to the command",
        command_getkeysandflags
    ),
    command!(
        "command|help",
        2,
        LOADING | STALE,
        (0, 0, 0),
        CONN_SLOW,
        "server",
        "5.0.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        command_help
    ),
];

fn status(s: &str) -> Reply {
    Reply::Status(s.to_string().into())
}

/// The flags of each of a command's key specs (see `keyflags`).
fn spec_flag_sets(c: &Command) -> Vec<&'static [&'static str]> {
    match super::keyflags::spec_flags(c.name) {
        Some(sets) => sets.to_vec(),
        None if c.flags & WRITE != 0 => vec![&["RW", "update"]],
        None => vec![&["RO", "access"]],
    }
}

/// The flags of the key at argument position `pos` (GETKEYSANDFLAGS): with several
/// fixed-position specs (LMOVE, RENAME, SINTERSTORE…), spec `i` holds the key at
/// `first + i` and the last one the rest.
fn key_flags_at(c: &Command, pos: usize) -> &'static [&'static str] {
    let sets = spec_flag_sets(c);
    if sets.len() > 1 && keyword_specs(c) {
        // The key at 1 is the first spec's; the others are destinations (STORE) or
        // sources after a destination (Z*STORE), which take the last spec's flags.
        return if pos == 1 {
            sets[0]
        } else {
            sets[sets.len() - 1]
        };
    }
    if matches!(c.key_spec, KeySpec::Range) && sets.len() > 1 {
        let i = pos.saturating_sub(c.first_key as usize).min(sets.len() - 1);
        return sets[i];
    }
    sets[0]
}

/// Commands whose later key specs are found by keyword or are unknown (GEORADIUS …
/// STORE, SORT … BY/GET/STORE), or follow a destination with a key count
/// (ZUNIONSTORE and friends): see `extra_specs`.
fn keyword_specs(c: &Command) -> bool {
    matches!(
        c.name,
        "georadius"
            | "georadiusbymember"
            | "sort"
            | "sort_ro"
            | "zunionstore"
            | "zinterstore"
            | "zdiffstore"
            | "migrate"
    )
}

/// The later specs of the `keyword_specs` commands, after the spec of the key at 1.
fn extra_specs(c: &Command, sets: &[&'static [&'static str]]) -> Vec<Reply> {
    let kv = |k: &str, v: Reply| (Reply::bulk(k.as_bytes()), v);
    let map = |t: &[u8], spec: Vec<(Reply, Reply)>| {
        Reply::Map(vec![
            kv("type", Reply::bulk(t)),
            kv("spec", Reply::Map(spec)),
        ])
    };
    sets.iter()
        .enumerate()
        .skip(1)
        .map(|(i, flags)| {
            let (begin, find) = match c.name {
                "georadius" | "georadiusbymember" => {
                    let keyword: &[u8] = if i == 1 { b"STORE" } else { b"STOREDIST" };
                    let start = if c.name == "georadius" { 6 } else { 5 };
                    (
                        map(
                            b"keyword",
                            vec![
                                kv("keyword", Reply::bulk(keyword)),
                                kv("startfrom", Reply::Int(start)),
                            ],
                        ),
                        map(
                            b"range",
                            vec![
                                kv("lastkey", Reply::Int(0)),
                                kv("keystep", Reply::Int(1)),
                                kv("limit", Reply::Int(0)),
                            ],
                        ),
                    )
                }
                "sort" | "sort_ro" => (map(b"unknown", vec![]), map(b"unknown", vec![])),
                "migrate" => (
                    map(
                        b"keyword",
                        vec![
                            kv("keyword", Reply::bulk(b"KEYS")),
                            kv("startfrom", Reply::Int(-2)),
                        ],
                    ),
                    map(
                        b"range",
                        vec![
                            kv("lastkey", Reply::Int(-1)),
                            kv("keystep", Reply::Int(1)),
                            kv("limit", Reply::Int(0)),
                        ],
                    ),
                ),
                _ => (
                    map(b"index", vec![kv("index", Reply::Int(2))]),
                    map(
                        b"keynum",
                        vec![
                            kv("keynumidx", Reply::Int(0)),
                            kv("firstkey", Reply::Int(1)),
                            kv("keystep", Reply::Int(1)),
                        ],
                    ),
                ),
            };
            let note = super::keyflags::spec_note(c.name, i)
                .map(|t| kv("notes", Reply::bulk(t.as_bytes())));
            Reply::Map(
                note.into_iter()
                    .chain([
                        kv("flags", flag_set(flags)),
                        kv("begin_search", begin),
                        kv("find_keys", find),
                    ])
                    .collect(),
            )
        })
        .collect()
}

fn flag_set(flags: &[&str]) -> Reply {
    Reply::Set(flags.iter().copied().map(status).collect())
}

fn key_specs(c: &Command) -> Reply {
    let kv = |k: &str, v: Reply| (Reply::bulk(k.as_bytes()), v);
    let note = |i: usize| {
        super::keyflags::spec_note(c.name, i)
            .map(|t| kv("notes", Reply::bulk(t.as_bytes())))
            .into_iter()
    };
    let index_spec = |i: usize, flags: &[&str], index: i64, lastkey: i64, keystep: i64| {
        Reply::Map(
            note(i)
                .chain([
                    kv("flags", flag_set(flags)),
                    kv(
                        "begin_search",
                        Reply::Map(vec![
                            kv("type", Reply::bulk(b"index")),
                            kv("spec", Reply::Map(vec![kv("index", Reply::Int(index))])),
                        ]),
                    ),
                    kv(
                        "find_keys",
                        Reply::Map(vec![
                            kv("type", Reply::bulk(b"range")),
                            kv(
                                "spec",
                                Reply::Map(vec![
                                    kv("lastkey", Reply::Int(lastkey)),
                                    kv("keystep", Reply::Int(keystep)),
                                    kv("limit", Reply::Int(0)),
                                ]),
                            ),
                        ]),
                    ),
                ])
                .collect(),
        )
    };
    let sets = spec_flag_sets(c);
    if sets.len() > 1 && keyword_specs(c) {
        // The key at index 1 (Z*STORE's destination, GEORADIUS's and SORT's source;
        // MIGRATE's at 3), then the keyword, unknown or keynum specs.
        let at = if c.name == "migrate" { 3 } else { 1 };
        let mut specs = vec![index_spec(0, sets[0], at, 0, 1)];
        specs.extend(extra_specs(c, &sets));
        return Reply::Array(specs);
    }
    let spec = match c.key_spec {
        KeySpec::None => return Reply::Array(vec![]),
        KeySpec::Range if sets.len() > 1 => {
            // One spec per fixed key position, the last one covering the rest.
            let n = sets.len();
            let first = c.first_key as i64;
            let specs = sets
                .iter()
                .enumerate()
                .map(|(i, flags)| {
                    let begin = first + i as i64;
                    let lastkey = if i + 1 < n {
                        0
                    } else if c.last_key < 0 {
                        c.last_key as i64
                    } else {
                        c.last_key as i64 - begin
                    };
                    index_spec(i, flags, begin, lastkey, c.step as i64)
                })
                .collect();
            return Reply::Array(specs);
        }
        KeySpec::Range => {
            let lastkey = if c.last_key < 0 {
                c.last_key as i64
            } else {
                (c.last_key - c.first_key) as i64
            };
            return Reply::Array(vec![index_spec(
                0,
                sets[0],
                c.first_key as i64,
                lastkey,
                c.step as i64,
            )]);
        }
        KeySpec::AfterStreams => {
            // Redis describes these keys as a keyword search for STREAMS, then a range
            // covering half of what follows.
            return Reply::Array(vec![Reply::Map(vec![
                kv("flags", flag_set(sets[0])),
                kv(
                    "begin_search",
                    Reply::Map(vec![
                        kv("type", Reply::bulk(b"keyword")),
                        kv(
                            "spec",
                            Reply::Map(vec![
                                kv("keyword", Reply::bulk(b"STREAMS")),
                                kv("startfrom", Reply::Int(c.first_key as i64)),
                            ]),
                        ),
                    ]),
                ),
                kv(
                    "find_keys",
                    Reply::Map(vec![
                        kv("type", Reply::bulk(b"range")),
                        kv(
                            "spec",
                            Reply::Map(vec![
                                kv("lastkey", Reply::Int(-1)),
                                kv("keystep", Reply::Int(1)),
                                kv("limit", Reply::Int(2)),
                            ]),
                        ),
                    ]),
                ),
            ])]);
        }
        KeySpec::Counted => Reply::Map(vec![
            kv("type", Reply::bulk(b"keynum")),
            kv(
                "spec",
                Reply::Map(vec![
                    kv("keynumidx", Reply::Int(0)),
                    kv("firstkey", Reply::Int(1)),
                    kv("keystep", Reply::Int(1)),
                ]),
            ),
        ]),
    };
    Reply::Array(vec![Reply::Map(
        note(0)
            .chain([
                kv("flags", flag_set(sets[0])),
                kv(
                    "begin_search",
                    Reply::Map(vec![
                        kv("type", Reply::bulk(b"index")),
                        kv(
                            "spec",
                            Reply::Map(vec![kv("index", Reply::Int(c.first_key as i64))]),
                        ),
                    ]),
                ),
                kv("find_keys", spec),
            ])
            .collect(),
    )])
}

/// One command's COMMAND INFO entry.
pub fn command_entry(c: &Command) -> Reply {
    let flag_names: Vec<Reply> = flags::NAMES
        .iter()
        .filter(|(bit, _)| c.flags & bit != 0)
        .map(|(_, n)| status(n))
        .collect();
    let (first, last, step) = match c.key_spec {
        KeySpec::Range => (c.first_key, c.last_key, c.step),
        _ => (0, 0, 0),
    };
    Reply::Array(vec![
        Reply::bulk(c.name.as_bytes()),
        Reply::Int(c.arity as i64),
        Reply::Set(flag_names),
        Reply::Int(first as i64),
        Reply::Int(last as i64),
        Reply::Int(step as i64),
        Reply::Set(c.acl.iter().map(|a| status(&format!("@{a}"))).collect()),
        Reply::Set(vec![]),
        key_specs(c),
        Reply::Array(c.subcommands.iter().map(command_entry).collect()),
    ])
}

fn command_all(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    Reply::Array(families().map(command_entry).collect())
}

fn command_count(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    Reply::Int(families().count() as i64)
}

/// Resolves `name` or `container|sub`.
fn find(name: &[u8]) -> Option<&'static Command> {
    match name.iter().position(|&c| c == b'|') {
        None => lookup(name),
        Some(i) => lookup(&name[..i]).and_then(|c| lookup_subcommand(c, &name[i + 1..])),
    }
}

fn command_info(_ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if args.len() == 2 {
        return command_all(_ctx, args);
    }
    Reply::Array(
        args[2..]
            .iter()
            .map(|n| find(n).map(command_entry).unwrap_or(Reply::Null))
            .collect(),
    )
}

fn command_list(_ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let mut names: Vec<&'static str> = families()
        .flat_map(|c| std::iter::once(c.name).chain(c.subcommands.iter().map(|s| s.name)))
        .collect();
    match args.len() {
        2 => {}
        5 if is(args[2], "filterby") => {
            let v = args[4];
            if is(args[3], "module") {
                names.clear();
            } else if is(args[3], "aclcat") {
                let cat = String::from_utf8_lossy(v).to_ascii_lowercase();
                names.retain(|n| find(n.as_bytes()).is_some_and(|c| c.acl.contains(&cat.as_str())));
            } else if is(args[3], "pattern") {
                names.retain(|n| glob_match(v, n.as_bytes(), true));
            } else {
                return crate::commands::errors::SYNTAX;
            }
        }
        _ => return crate::commands::errors::SYNTAX,
    }
    Reply::Array(
        names
            .into_iter()
            .map(|n| Reply::bulk(n.as_bytes()))
            .collect(),
    )
}

fn docs_entry(c: &Command) -> Reply {
    let kv = |k: &str, v: Reply| (Reply::bulk(k.as_bytes()), v);
    let mut fields = vec![
        kv("summary", Reply::bulk(c.summary.as_bytes())),
        kv("since", Reply::bulk(c.since.as_bytes())),
        kv("group", Reply::bulk(c.group.as_bytes())),
        kv("complexity", Reply::bulk(c.complexity.as_bytes())),
    ];
    if !c.subcommands.is_empty() {
        fields.push(kv(
            "subcommands",
            Reply::Map(
                c.subcommands
                    .iter()
                    .map(|s| (Reply::bulk(s.name.as_bytes()), docs_entry(s)))
                    .collect(),
            ),
        ));
    }
    Reply::Map(fields)
}

fn command_docs(_ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let cmds: Vec<&'static Command> = if args.len() == 2 {
        families().collect()
    } else {
        args[2..].iter().filter_map(|n| find(n)).collect()
    };
    Reply::Map(
        cmds.into_iter()
            .map(|c| (Reply::bulk(c.name.as_bytes()), docs_entry(c)))
            .collect(),
    )
}

/// The keys of a command about to run with the permission each needs (ACL): READ for
/// key specs with `access`, WRITE for `insert`/`delete`/`update` (Redis's
/// ACLSelectorCheckKey), found as COMMAND GETKEYSANDFLAGS finds them.
pub fn acl_keys(cmd: &Command, args: &[&[u8]]) -> Vec<(usize, u8)> {
    let mut keys = cmd.key_positions(args);
    if matches!(cmd.name, "zunionstore" | "zinterstore" | "zdiffstore") && !keys.is_empty() {
        keys.insert(0, 1);
    }
    // Key specs with variable flags are resolved from the arguments, as Redis's
    // setGetKeys / bitfieldGetKeys do: SET needs read access only with GET,
    // BITFIELD reads and writes unless it only GETs.
    let variable = |pos: usize| -> Option<u8> {
        use crate::acl::user::{READ, WRITE};
        match cmd.name {
            "set" => Some(if args[3..].iter().any(|a| super::is(a, "get")) {
                READ | WRITE
            } else {
                WRITE
            }),
            // Read-only when every operation is a GET (OVERFLOW aside); any SET,
            // INCRBY or unparsable argument makes it read-write (bitfieldGetKeys).
            "bitfield" if pos == 1 => {
                let mut i = 2;
                let mut readonly = true;
                while i < args.len() {
                    let rest = args.len() - i - 1;
                    if super::is(args[i], "get") && rest >= 2 {
                        i += 3;
                    } else if super::is(args[i], "overflow") && rest >= 1 {
                        i += 2;
                    } else {
                        readonly = false;
                        break;
                    }
                }
                Some(if readonly { READ } else { READ | WRITE })
            }
            _ => None,
        }
    };
    // Shard channels are declared as keys for routing (NOT_KEY): channel
    // permissions govern them, as Redis's ACL skips such key specs.
    keys.into_iter()
        .filter(|&pos| !key_flags_at(cmd, pos).contains(&"not_key"))
        .map(|pos| {
            if let Some(need) = variable(pos) {
                return (pos, need);
            }
            let mut need = 0;
            for f in key_flags_at(cmd, pos) {
                match *f {
                    "access" => need |= crate::acl::user::READ,
                    "insert" | "delete" | "update" => need |= crate::acl::user::WRITE,
                    _ => {}
                }
            }
            (pos, need)
        })
        .collect()
}

/// Resolves the command named in GETKEYS' arguments and its key positions.
fn getkeys_positions(args: &[&[u8]]) -> Result<(&'static Command, Vec<usize>), Reply> {
    let target = &args[2..];
    let mut cmd = lookup(target[0]).ok_or(Reply::err("ERR Invalid command specified"))?;
    if !cmd.subcommands.is_empty() && target.len() >= 2 {
        if let Some(sub) = lookup_subcommand(cmd, target[1]) {
            cmd = sub;
        }
    }
    let has_keys = match cmd.key_spec {
        KeySpec::None => false,
        KeySpec::Range => cmd.first_key > 0,
        _ => true,
    };
    if !has_keys {
        return Err(Reply::err("ERR The command has no key arguments"));
    }
    if !crate::commands::arity_ok(cmd.arity, target.len()) {
        return Err(Reply::err(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    // SORT's STORE destination comes with the key positions (commands/mod.rs).
    let mut keys = cmd.key_positions(target);
    if matches!(cmd.name, "zunionstore" | "zinterstore" | "zdiffstore") && !keys.is_empty() {
        // The destination precedes the counted sources (its own key spec).
        keys.insert(0, 1);
    }
    if keys.is_empty() && cmd.flags & flags::NO_MANDATORY_KEYS == 0 {
        return Err(Reply::err("ERR Invalid arguments specified for command"));
    }
    Ok((cmd, keys))
}

fn command_getkeys(_ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match getkeys_positions(args) {
        Ok((_, keys)) => Reply::Array(keys.into_iter().map(|i| Reply::bulk(args[2 + i])).collect()),
        Err(e) => e,
    }
}

/// The key flags of SET and BITFIELD, whose key specs say `variable_flags`, resolved
/// from the arguments as Redis's setGetKeys and bitfieldGetKeys do.
fn resolved_key_flags(cmd: &Command, target: &[&[u8]]) -> Option<&'static [&'static str]> {
    match cmd.name {
        "set" => Some(if target[3..].iter().any(|a| super::is(a, "get")) {
            &["RW", "access", "update"]
        } else {
            &["OW", "update"]
        }),
        "bitfield" => {
            let mut readonly = true;
            let mut i = 2;
            while i < target.len() {
                let rest = target.len() - i - 1;
                if super::is(target[i], "get") && rest >= 2 {
                    i += 3;
                } else if super::is(target[i], "overflow") && rest >= 1 {
                    i += 2;
                } else {
                    // SET/INCRBY, or a syntax error: assumed to write.
                    readonly = false;
                    break;
                }
            }
            Some(if readonly {
                &["RO", "access"]
            } else {
                &["RW", "access", "update"]
            })
        }
        _ => None,
    }
}

fn command_getkeysandflags(_ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match getkeys_positions(args) {
        Ok((cmd, keys)) => Reply::Array(
            keys.into_iter()
                .map(|i| {
                    let flags = resolved_key_flags(cmd, &args[2..]).unwrap_or(key_flags_at(cmd, i));
                    Reply::Array(vec![Reply::bulk(args[2 + i]), flag_set(flags)])
                })
                .collect(),
        ),
        Err(e) => e,
    }
}

fn command_help(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    help_reply(
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    )
}
