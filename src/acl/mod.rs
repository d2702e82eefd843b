//! Access control lists: users, the permission check the executor runs before a
//! command, the ACL log, and the ACL file.
//!
//! `Acl` owns the users (sorted by name, as Redis's rax lists them) and the log.
//! Clients name their user; each client also caches whether its user is
//! unrestricted (`Client::acl_free`), so the executor's hot path for the default
//! all-permissive user is one flag test. Every change to users refreshes that flag
//! on the clients (`Executor::acl_refresh_clients`).
//!
//! `user.rs` parses rules and describes users; `table.rs` maps commands to ids and
//! categories; `commands/acl.rs` is the ACL command itself.

pub mod table;
pub mod user;

use std::collections::{BTreeMap, VecDeque};

use crate::commands::{flags, Command};
use crate::exec::Executor;
use crate::protocol::Reply;
use crate::util::glob::glob_match;

pub use user::{RuleError, Selector, User};

/// Why a command was refused (ordered as Redis ranks them when picking which
/// selector's refusal to report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    /// The command (or subcommand) is not allowed.
    Cmd,
    /// The key at this argument position is not allowed.
    Key(usize),
    /// The channel at this argument position is not allowed.
    Channel(usize),
}

/// Where a refusal happened (ACL LOG `context`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogContext {
    Toplevel,
    Multi,
    Lua,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogReason {
    Command,
    Key,
    Channel,
    Auth,
}

#[derive(Debug, Clone)]
pub struct LogEntry {
    pub count: u64,
    pub reason: LogReason,
    pub context: LogContext,
    pub object: Vec<u8>,
    pub username: String,
    /// Last update, unix ms.
    pub ctime: i64,
    pub cinfo: String,
    pub entry_id: u64,
    pub created: i64,
}

/// Entries within this many ms of each other with the same fields are grouped.
const LOG_GROUPING_MS: i64 = 60_000;

pub struct Acl {
    pub users: BTreeMap<String, User>,
    pub log: VecDeque<LogEntry>,
    pub log_next_id: u64,
    /// The `requirepass` last mirrored into the default user.
    pub synced_requirepass: Option<Option<Vec<u8>>>,
    /// INFO stats counters.
    pub denied_auth: u64,
    pub denied_cmd: u64,
    pub denied_key: u64,
    pub denied_channel: u64,
}

impl Default for Acl {
    fn default() -> Self {
        let mut users = BTreeMap::new();
        users.insert("default".to_string(), User::new_default());
        Acl {
            users,
            log: VecDeque::new(),
            log_next_id: 0,
            synced_requirepass: None,
            denied_auth: 0,
            denied_cmd: 0,
            denied_key: 0,
            denied_channel: 0,
        }
    }
}

impl Acl {
    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.get(name)
    }

    pub fn default_user(&self) -> &User {
        self.users
            .get("default")
            .expect("the default user always exists")
    }

    /// Whether new connections start authenticated (default user on and nopass).
    pub fn default_needs_no_auth(&self) -> bool {
        let d = self.default_user();
        d.enabled && d.nopass
    }

    /// Mirrors `requirepass` into the default user when it changed (Redis's
    /// ACLUpdateDefaultUserPassword): `resetpass` then `>pass` or `nopass`.
    /// Returns whether the default user changed.
    pub fn sync_requirepass(&mut self, requirepass: &Option<Vec<u8>>) -> bool {
        if self.synced_requirepass.as_ref() == Some(requirepass) {
            return false;
        }
        self.synced_requirepass = Some(requirepass.clone());
        let d = self.users.get_mut("default").expect("default user");
        let _ = d.apply(b"resetpass", false);
        match requirepass {
            Some(p) => {
                let mut op = b">".to_vec();
                op.extend_from_slice(p);
                let _ = d.apply(&op, false);
            }
            None => {
                let _ = d.apply(b"nopass", false);
            }
        }
        true
    }

    /// Checks credentials: the user exists, is on, and the password matches.
    pub fn authenticate(&self, user: &[u8], pass: &[u8]) -> bool {
        let name = String::from_utf8_lossy(user);
        self.users
            .get(name.as_ref())
            .is_some_and(|u| u.check_password(pass))
    }

    /// Adds an entry to the ACL log (grouping it with a recent identical one).
    #[allow(clippy::too_many_arguments)]
    pub fn log_event(
        &mut self,
        reason: LogReason,
        context: LogContext,
        object: Vec<u8>,
        username: String,
        cinfo: String,
        now_ms: i64,
        max_len: usize,
    ) {
        match reason {
            LogReason::Auth => self.denied_auth += 1,
            LogReason::Command => self.denied_cmd += 1,
            LogReason::Key => self.denied_key += 1,
            LogReason::Channel => self.denied_channel += 1,
        }
        let found = self.log.iter().take(10).position(|e| {
            e.reason == reason
                && e.context == context
                && (e.ctime - now_ms).abs() <= LOG_GROUPING_MS
                && e.object == object
                && e.username == username
        });
        if let Some(i) = found {
            let mut e = self.log.remove(i).expect("found entry");
            e.cinfo = cinfo;
            e.ctime = now_ms;
            e.count += 1;
            self.log.push_front(e);
            return;
        }
        let e = LogEntry {
            count: 1,
            reason,
            context,
            object,
            username,
            ctime: now_ms,
            cinfo,
            entry_id: self.log_next_id,
            created: now_ms,
        };
        self.log_next_id += 1;
        self.log.push_front(e);
        self.log.truncate(max_len);
    }
}

/// Checks one selector; `Err` names what it refuses.
fn check_selector(
    s: &Selector,
    id: usize,
    cmd: &'static Command,
    args: &[&[u8]],
    keys: &mut Option<Vec<(usize, u8)>>,
) -> Result<(), Denied> {
    if !s.allcommands && cmd.flags & flags::NO_AUTH == 0 && !s.bit(id) {
        // A denied command may still be allowed with a given first argument.
        let ok = args.len() >= 2
            && s.firstargs
                .iter()
                .find(|(i, _)| *i == id)
                .is_some_and(|(_, v)| v.iter().any(|a| a.eq_ignore_ascii_case(args[1])));
        if !ok {
            return Err(Denied::Cmd);
        }
    }
    if !s.allkeys {
        let keys = keys.get_or_insert_with(|| crate::commands::introspection::acl_keys(cmd, args));
        for &(pos, need) in keys.iter() {
            let key = args[pos];
            let ok = s
                .keys
                .iter()
                .any(|p| p.flags & need == need && glob_match(&p.pattern, key, false));
            if !ok {
                return Err(Denied::Key(pos));
            }
        }
    }
    if !s.allchannels && table::has_channels(cmd) {
        for (pos, is_pattern) in table::channel_args(cmd, args) {
            let ch = args[pos];
            let ok = s.channels.iter().any(|p| {
                if is_pattern {
                    p.as_slice() == ch
                } else {
                    glob_match(p, ch, false)
                }
            });
            if !ok {
                return Err(Denied::Channel(pos));
            }
        }
    }
    Ok(())
}

/// Whether any of `user`'s selectors lets it use `key` with `need` (READ/WRITE), the
/// key matched as a plain string against each pattern (Redis's ACLUserCheckKeyPerm):
/// SORT asks it for the key `*` to learn whether every key is readable.
pub fn may_access_key(user: &User, key: &[u8], need: u8) -> bool {
    user.selectors.iter().any(|s| {
        s.allkeys
            || s.keys
                .iter()
                .any(|p| p.flags & need == need && glob_match(&p.pattern, key, false))
    })
}

/// Whether `user` may run `cmd` with `args`. With several selectors, any one that
/// allows the command is enough; otherwise the refusal reported is the command one
/// if no selector got past it, else the key/channel at the highest position.
pub fn check(user: &User, cmd: &'static Command, args: &[&[u8]]) -> Result<(), Denied> {
    let Some(id) = table::table().id_of(cmd) else {
        return Err(Denied::Cmd);
    };
    let mut keys = None;
    let mut worst = Denied::Cmd;
    for s in &user.selectors {
        match check_selector(s, id, cmd, args, &mut keys) {
            Ok(()) => return Ok(()),
            Err(d) => {
                let rank = |d: Denied| match d {
                    Denied::Cmd => (0, 0),
                    Denied::Key(p) => (1, p),
                    Denied::Channel(p) => (2, p),
                };
                if rank(d) > rank(worst) {
                    worst = d;
                }
            }
        }
    }
    Err(worst)
}

/// The error text after `NOPERM ` (Redis's getAclErrorMessage, not verbose).
pub fn denied_message(d: Denied, user: &str, cmd: &Command) -> String {
    match d {
        Denied::Cmd => format!(
            "User {user} has no permissions to run the '{}' command",
            cmd.name
        ),
        Denied::Key(_) => "No permissions to access a key".to_string(),
        Denied::Channel(_) => "No permissions to access a channel".to_string(),
    }
}

/// ACL DRYRUN's verbose text.
pub fn denied_message_verbose(d: Denied, user: &str, cmd: &Command, args: &[&[u8]]) -> String {
    match d {
        Denied::Cmd => denied_message(d, user, cmd),
        Denied::Key(p) => format!(
            "User {user} has no permissions to access the '{}' key",
            String::from_utf8_lossy(args[p])
        ),
        Denied::Channel(p) => format!(
            "User {user} has no permissions to access the '{}' channel",
            String::from_utf8_lossy(args[p])
        ),
    }
}

fn reason_of(d: Denied) -> LogReason {
    match d {
        Denied::Cmd => LogReason::Command,
        Denied::Key(_) => LogReason::Key,
        Denied::Channel(_) => LogReason::Channel,
    }
}

impl Executor {
    /// The permission check before a command runs for `slot` (its user is not
    /// unrestricted). `Err` carries what to log and the error reply's text.
    pub fn acl_check(
        &mut self,
        slot: usize,
        cmd: &'static Command,
        args: &[&[u8]],
    ) -> Result<(), Denied> {
        let name = &self.client(slot).user;
        match self.acl.user(name) {
            Some(u) => check(u, cmd, args),
            None => Err(Denied::Cmd),
        }
    }

    /// Logs a refusal for `slot` (the client whose command was refused; its CLIENT
    /// INFO line goes into the entry).
    pub fn acl_log_denied(
        &mut self,
        slot: usize,
        d: Denied,
        context: LogContext,
        cmd: &Command,
        args: &[&[u8]],
    ) {
        let object = match d {
            Denied::Cmd => cmd.name.as_bytes().to_vec(),
            Denied::Key(p) | Denied::Channel(p) => args[p].to_vec(),
        };
        let username = self.client(slot).user.clone();
        self.acl_log(slot, reason_of(d), context, object, username);
    }

    pub fn acl_log(
        &mut self,
        slot: usize,
        reason: LogReason,
        context: LogContext,
        object: Vec<u8>,
        username: String,
    ) {
        let blocked = self.blocking.is_blocked(slot);
        let c = self.client(slot);
        let cinfo = crate::commands::connection::client_line(c, blocked, c.qbuf_free);
        let now = crate::keyspace::unix_ms();
        let max = self.config.acllog_max_len.max(0) as usize;
        self.acl
            .log_event(reason, context, object, username, cinfo, now, max);
    }

    /// The full refusal at the top level or while queueing: log, then the error.
    pub fn acl_deny(
        &mut self,
        slot: usize,
        d: Denied,
        cmd: &'static Command,
        args: &[&[u8]],
    ) -> Reply {
        let ctx = if self.client(slot).in_multi() {
            LogContext::Multi
        } else {
            LogContext::Toplevel
        };
        self.acl_log_denied(slot, d, ctx, cmd, args);
        let user = self.client(slot).user.clone();
        Reply::error(format!("NOPERM {}", denied_message(d, &user, cmd)))
    }

    /// A script's `redis.call` as the calling client's user: `Err` is the error
    /// text the script sees.
    pub fn acl_check_script(
        &mut self,
        caller: usize,
        cmd: &'static Command,
        args: &[&[u8]],
    ) -> Result<(), String> {
        self.acl_check(caller, cmd, args).map_err(|d| {
            self.acl_log_denied(caller, d, LogContext::Lua, cmd, args);
            let user = self.client(caller).user.clone();
            format!(
                "ERR ACL failure in script: {}",
                denied_message(d, &user, cmd)
            )
        })
    }

    /// A queued command refused at EXEC time (rules changed after it was queued).
    pub fn acl_deny_in_exec(
        &mut self,
        slot: usize,
        d: Denied,
        cmd: &'static Command,
        args: &[&[u8]],
    ) -> Reply {
        self.acl_log_denied(slot, d, LogContext::Multi, cmd, args);
        let reason = match d {
            Denied::Cmd => "no permission to execute the command or subcommand",
            Denied::Key(_) => "no permission to touch the specified keys",
            Denied::Channel(_) => "no permission to access one of the channels used as arguments",
        };
        let reply = Reply::error(format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}"));
        if let Reply::Error(e) = &reply {
            self.count_error_pub(e);
        }
        reply
    }

    /// Recomputes every client's cached "unrestricted" flag after users changed.
    /// In-process clients (the replication link's master client, the scripting
    /// client, embedded sessions) are never restricted, as Redis's master client.
    pub fn acl_refresh_clients(&mut self) {
        let acl = &self.acl;
        let frees: Vec<(usize, bool)> = self
            .clients()
            .map(|(slot, c)| {
                let free = c.embedded || acl.user(&c.user).is_some_and(|u| u.unrestricted());
                (slot, free)
            })
            .collect();
        for (slot, free) in frees {
            self.client_mut(slot).acl_free = free;
        }
    }

    /// Mirrors a changed `requirepass` into the default user (startup, CONFIG SET).
    pub fn acl_sync_requirepass(&mut self) {
        let rp = self.config.requirepass.clone();
        if self.acl.sync_requirepass(&rp) {
            self.acl_refresh_clients();
        }
    }

    /// Authenticates `slot` as `user` (AUTH, HELLO AUTH). On failure logs an `auth`
    /// entry and returns false.
    pub fn acl_authenticate(
        &mut self,
        slot: usize,
        user: &[u8],
        pass: &[u8],
        cmd_name: &[u8],
    ) -> bool {
        if self.acl.authenticate(user, pass) {
            let name = String::from_utf8_lossy(user).into_owned();
            let free = self.acl.user(&name).is_some_and(|u| u.unrestricted());
            let c = self.client_mut(slot);
            c.authenticated = true;
            c.user = name;
            c.acl_free = free;
            true
        } else {
            let ctx = if self.client(slot).in_multi() {
                LogContext::Multi
            } else {
                LogContext::Toplevel
            };
            let username = String::from_utf8_lossy(user).into_owned();
            self.acl_log(slot, LogReason::Auth, ctx, cmd_name.to_vec(), username);
            false
        }
    }

    /// Puts a client back on the default user (RESET, deleted user).
    pub fn acl_set_default_auth(&mut self, slot: usize) {
        let authed = self.acl.default_needs_no_auth();
        let free = self.acl.default_user().unrestricted();
        let c = self.client_mut(slot);
        c.user = "default".into();
        c.authenticated = authed;
        c.acl_free = free;
    }

    /// Disconnects the clients authenticated as one of `names` (ACL DELUSER, ACL
    /// LOAD): the caller after its reply, others at once.
    pub fn acl_kill_clients_of(&mut self, names: &[String], caller: usize) {
        let slots: Vec<usize> = self
            .clients()
            .filter(|(_, c)| !c.embedded && names.contains(&c.user))
            .map(|(s, _)| s)
            .collect();
        for slot in slots {
            self.acl_set_default_auth(slot);
            let c = self.client_mut(slot);
            c.authenticated = false;
            if slot == caller {
                c.close_after_reply = true;
            } else {
                c.close_asap = true;
                self.close_pending = true;
            }
        }
    }

    /// Disconnects subscribers of `user` whose subscriptions the new rules no
    /// longer allow (Redis's ACLKillPubsubClientsIfNeeded).
    pub fn acl_kill_pubsub_clients(&mut self, user: &str, caller: usize) {
        let Some(u) = self.acl.user(user) else { return };
        if u.selectors.iter().any(|s| s.allchannels) {
            return;
        }
        let allowed: Vec<Vec<u8>> = u
            .selectors
            .iter()
            .flat_map(|s| s.channels.iter().cloned())
            .collect();
        let ok = |ch: &[u8], pattern: bool| {
            allowed.iter().any(|p| {
                if pattern {
                    p.as_slice() == ch
                } else {
                    glob_match(p, ch, false)
                }
            })
        };
        let mut kill = Vec::new();
        for (slot, c) in self.clients() {
            if c.user != user || !c.is_pubsub() {
                continue;
            }
            let bad = c.subs.patterns.keys().any(|p| !ok(p, true))
                || c.subs.channels.keys().any(|p| !ok(p, false))
                || c.subs.shard.keys().any(|p| !ok(p, false));
            if bad {
                kill.push(slot);
            }
        }
        for slot in kill {
            let c = self.client_mut(slot);
            if slot == caller {
                c.close_after_reply = true;
            } else {
                c.close_asap = true;
                self.close_pending = true;
            }
        }
    }
}

/// Parses an ACL file (or `user` lines): every line `user <name> rules...`. Returns
/// the users (the default one created if absent) or Redis's error text.
pub fn parse_acl_file(
    text: &str,
    filename: &str,
    pubsub_all: bool,
) -> Result<BTreeMap<String, User>, String> {
    let mut users: BTreeMap<String, User> = BTreeMap::new();
    let mut errors = String::new();
    for (i, line) in text.split('\n').enumerate() {
        let linenum = i + 1;
        let line = line.trim_matches(|c| c == ' ' || c == '\t' || c == '\r' || c == '\n');
        if line.is_empty() {
            continue;
        }
        let argv: Vec<&str> = line.split(' ').filter(|w| !w.is_empty()).collect();
        if argv.is_empty() {
            continue;
        }
        if argv[0] != "user" || argv.len() < 2 {
            errors.push_str(&format!(
                "{filename}:{linenum} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = argv[1];
        if users.contains_key(name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{name}' found on line {linenum}. "
            ));
            continue;
        }
        let mut u = User::new(name, pubsub_all);
        let raw: Vec<&[u8]> = argv[2..].iter().map(|w| w.as_bytes()).collect();
        let Ok(ops) = user::merge_selector_args(&raw) else {
            errors.push_str(&format!(
                "{filename}:{linenum}: Unmatched parenthesis in selector definition."
            ));
            continue;
        };
        let mut syntax_error = false;
        for op in ops {
            if let Err(e) = u.apply(&op, pubsub_all) {
                if e == RuleError::Unknown {
                    errors.push_str(&format!(
                        "{filename}:{linenum}: Error in applying operation '{}': {}. ",
                        String::from_utf8_lossy(&op),
                        e.message()
                    ));
                } else if !syntax_error {
                    errors.push_str(&format!("{filename}:{linenum}: {}. ", e.message()));
                    syntax_error = true;
                }
            }
        }
        users.insert(name.to_string(), u);
    }
    if !errors.is_empty() {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
        );
        return Err(errors);
    }
    users
        .entry("default".to_string())
        .or_insert_with(User::new_default);
    Ok(users)
}

/// The ACL file text for the current users.
pub fn acl_file_text(users: &BTreeMap<String, User>) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, u) in users {
        out.extend_from_slice(b"user ");
        out.extend_from_slice(name.as_bytes());
        out.push(b' ');
        out.extend_from_slice(&u.describe());
        out.push(b'\n');
    }
    out
}

/// Loads `user` directives and the `aclfile` at startup (Redis exits on errors).
pub fn load_at_startup(ex: &mut Executor) -> Result<(), String> {
    ex.acl_sync_requirepass();
    let pubsub_all = ex.config.acl_pubsub_default_all;
    if !ex.config.aclfile.is_empty() && !ex.config.acl_users.is_empty() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
    }
    // Each name appears once (the config parser refuses duplicates).
    for words in ex.config.acl_users.clone() {
        let Some(name) = words.first() else { continue };
        let mut u = match ex.acl.users.remove(name.as_str()) {
            // The built-in default user, redefined by the config.
            Some(mut u) => {
                let _ = u.apply(b"reset", pubsub_all);
                u
            }
            None => User::new(name, pubsub_all),
        };
        let raw: Vec<&[u8]> = words[1..].iter().map(|w| w.as_bytes()).collect();
        let ops = user::merge_selector_args(&raw)
            .map_err(|_| format!("Unmatched parenthesis in acl selector for user '{name}'"))?;
        for op in ops {
            u.apply(&op, pubsub_all).map_err(|e| {
                format!(
                    "Error loading ACL rule '{}' for the user named '{name}': {}",
                    String::from_utf8_lossy(&op),
                    e.message()
                )
            })?;
        }
        ex.acl.users.insert(name.clone(), u);
    }
    if !ex.config.aclfile.is_empty() {
        let file = ex.config.aclfile.clone();
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("Error loading ACLs, opening file '{file}': {e}"))?;
        ex.acl.users = parse_acl_file(&text, &file, pubsub_all)?;
    }
    ex.acl_refresh_clients();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::lookup;

    fn user(rules: &[&str]) -> User {
        let mut u = User::new("bob", false);
        for r in rules {
            u.apply(r.as_bytes(), false).unwrap();
        }
        u
    }

    #[test]
    fn command_key_channel_checks() {
        let u = user(&[
            "on",
            "~a*",
            "%R~r*",
            "&ch*",
            "+get",
            "+set",
            "+publish",
            "+psubscribe",
        ]);
        let get = lookup(b"get").unwrap();
        let set = lookup(b"set").unwrap();
        assert_eq!(check(&u, get, &[b"get", b"a1"]), Ok(()));
        assert_eq!(check(&u, get, &[b"get", b"r1"]), Ok(()));
        assert_eq!(check(&u, get, &[b"get", b"x"]), Err(Denied::Key(1)));
        assert_eq!(check(&u, set, &[b"set", b"r1", b"v"]), Err(Denied::Key(1)));
        let incr = lookup(b"incr").unwrap();
        assert_eq!(check(&u, incr, &[b"incr", b"a"]), Err(Denied::Cmd));
        let publish = lookup(b"publish").unwrap();
        assert_eq!(check(&u, publish, &[b"publish", b"chx", b"m"]), Ok(()));
        assert_eq!(
            check(&u, publish, &[b"publish", b"x", b"m"]),
            Err(Denied::Channel(1))
        );
        let psub = lookup(b"psubscribe").unwrap();
        assert_eq!(check(&u, psub, &[b"psubscribe", b"ch*"]), Ok(()));
        assert_eq!(
            check(&u, psub, &[b"psubscribe", b"chx*"]),
            Err(Denied::Channel(1))
        );
        // AUTH is always allowed.
        let auth = lookup(b"auth").unwrap();
        assert_eq!(check(&u, auth, &[b"auth", b"x"]), Ok(()));
    }

    #[test]
    fn first_args_and_selectors() {
        let u = user(&["+select|0"]);
        let select = lookup(b"select").unwrap();
        assert_eq!(check(&u, select, &[b"select", b"0"]), Ok(()));
        assert_eq!(check(&u, select, &[b"select", b"1"]), Err(Denied::Cmd));
        let u = user(&["~a", "+get", "(~b +set)"]);
        let get = lookup(b"get").unwrap();
        let set = lookup(b"set").unwrap();
        assert_eq!(check(&u, set, &[b"set", b"b", b"1"]), Ok(()));
        assert_eq!(check(&u, set, &[b"set", b"a", b"1"]), Err(Denied::Key(1)));
        assert_eq!(check(&u, get, &[b"get", b"b"]), Err(Denied::Key(1)));
    }

    #[test]
    fn acl_file_round_trip() {
        let text = "user alice on sanitize-payload #d74ff0ee8da3b9806b18c877dbf29bbde50b5bd8e4dad7a3a725000feb82e8f1 ~a* resetchannels -@all +get\n\nuser default on nopass sanitize-payload ~* &* +@all\n";
        let users = parse_acl_file(text, "f.acl", false).unwrap();
        assert_eq!(
            String::from_utf8(acl_file_text(&users)).unwrap(),
            text.replace("\n\n", "\n")
        );
        let err = parse_acl_file("user a +nope\nbogus\n", "f.acl", false).unwrap_err();
        assert_eq!(err, "f.acl:1: Error in applying operation '+nope': Unknown command or category name in ACL. f.acl:2 should start with user keyword followed by the username. WARNING: ACL errors detected, no change to the previously active ACL rules was performed");
    }

    #[test]
    fn log_groups_similar_entries() {
        let mut acl = Acl::default();
        for _ in 0..3 {
            acl.log_event(
                LogReason::Key,
                LogContext::Toplevel,
                b"k".to_vec(),
                "bob".into(),
                String::new(),
                1000,
                128,
            );
        }
        acl.log_event(
            LogReason::Command,
            LogContext::Toplevel,
            b"get".to_vec(),
            "bob".into(),
            String::new(),
            1000,
            128,
        );
        assert_eq!(acl.log.len(), 2);
        assert_eq!(acl.log[1].count, 3);
        assert_eq!(acl.log[0].entry_id, 1);
    }
}
