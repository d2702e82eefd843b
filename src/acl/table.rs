//! The ACL view of the command table: a dense id per command and subcommand (the bit
//! a selector sets to allow it), its category bits, and lookups by full name.
//!
//! Built once from `commands::families()`, so ACL rules, ACL CAT and the permission
//! check read the same rows that dispatch and COMMAND INFO read; categories come from
//! each row's `acl` field (what COMMAND INFO shows), never from a second list.

use std::sync::OnceLock;

use crate::commands::{self, Command};
use crate::util::FastMap;

/// Redis's categories, in the order ACL CAT lists them.
pub const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// One command or subcommand as the ACL sees it.
pub struct AclCmd {
    pub cmd: &'static Command,
    /// Category bits (index into `CATEGORIES`).
    pub cats: u32,
    /// Ids of its subcommands (containers only).
    pub subs: Vec<usize>,
    pub is_sub: bool,
}

pub struct CmdTable {
    pub cmds: Vec<AclCmd>,
    by_ptr: FastMap<usize, usize>,
    by_name: FastMap<String, usize>,
}

/// The category bit of a name (`read`, not `@read`), case-insensitively.
pub fn category_bit(name: &[u8]) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
        .map(|i| 1u32 << i)
}

fn cats_of(c: &Command) -> u32 {
    c.acl
        .iter()
        .filter_map(|n| category_bit(n.as_bytes()))
        .fold(0, |a, b| a | b)
}

pub fn table() -> &'static CmdTable {
    static T: OnceLock<CmdTable> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = CmdTable {
            cmds: Vec::new(),
            by_ptr: FastMap::default(),
            by_name: FastMap::default(),
        };
        let push = |t: &mut CmdTable, c: &'static Command, is_sub: bool| -> usize {
            let id = t.cmds.len();
            t.cmds.push(AclCmd {
                cmd: c,
                cats: cats_of(c),
                subs: Vec::new(),
                is_sub,
            });
            t.by_ptr.insert(c as *const Command as usize, id);
            t.by_name.insert(c.name.to_string(), id);
            id
        };
        for c in commands::families() {
            let id = push(&mut t, c, false);
            for s in c.subcommands {
                let sid = push(&mut t, s, true);
                t.cmds[id].subs.push(sid);
            }
        }
        t
    })
}

impl CmdTable {
    /// Number of ids (a selector's bitmap width).
    pub fn len(&self) -> usize {
        self.cmds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cmds.is_empty()
    }

    pub fn id_of(&self, c: &'static Command) -> Option<usize> {
        self.by_ptr.get(&(c as *const Command as usize)).copied()
    }

    /// A command by full name (`get`, `config|get`), case-insensitively.
    pub fn lookup(&self, name: &[u8]) -> Option<usize> {
        let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
        self.by_name.get(&lower).copied()
    }

    /// Every id in a category, containers and subcommands alike (ACL CAT).
    pub fn in_category(&self, bit: u32) -> impl Iterator<Item = usize> + '_ {
        (0..self.cmds.len()).filter(move |&i| self.cmds[i].cats & bit != 0)
    }
}

/// Channel arguments of the pub/sub commands the ACL checks, as (position, is a
/// pattern). Unsubscribing is never checked, as in Redis.
pub fn channel_args(c: &Command, args: &[&[u8]]) -> Vec<(usize, bool)> {
    match c.name {
        "publish" | "spublish" => vec![(1, false)],
        "subscribe" | "ssubscribe" => (1..args.len()).map(|i| (i, false)).collect(),
        "psubscribe" => (1..args.len()).map(|i| (i, true)).collect(),
        _ => Vec::new(),
    }
}

/// Whether a command has channel arguments the ACL checks.
pub fn has_channels(c: &Command) -> bool {
    matches!(
        c.name,
        "publish" | "spublish" | "subscribe" | "ssubscribe" | "psubscribe"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names() {
        let t = table();
        let get = t.lookup(b"GET").unwrap();
        assert_eq!(t.cmds[get].cmd.name, "get");
        let cg = t.lookup(b"config|get").unwrap();
        assert!(t.cmds[cg].is_sub);
        let config = t.lookup(b"config").unwrap();
        assert!(t.cmds[config].subs.contains(&cg));
        assert!(t.cmds[get].cats & category_bit(b"read").unwrap() != 0);
        assert!(category_bit(b"nope").is_none());
    }
}
