//! MONITOR: every command a client runs is echoed to monitoring clients as one status
//! line, `+<unix secs>.<usecs> [<db> <addr>] "arg" ...`, after it ran (so commands
//! inside EXEC appear one by one, followed by EXEC). Admin commands and commands
//! flagged skip_monitor are not shown; AUTH and HELLO credentials are redacted.
//! EVAL, EVALSHA, FCALL and their read-only forms are skip_monitor because their
//! handlers feed themselves before running, as Redis 7 does: the calling command
//! comes first, then the `[<db> lua]` lines of the commands the script runs.

use crate::commands::{flags, Command};
use crate::protocol::Reply;

use super::Executor;

/// Which arguments are replaced by `(redacted)` (in MONITOR and the slow log), as
/// Redis's commands redact their argv: credentials of AUTH and HELLO, every user
/// name and rule of ACL SETUSER / DELUSER / GETUSER, and the values of sensitive
/// configs in CONFIG SET.
pub(crate) fn redacted(cmd: &Command, args: &[&[u8]], i: usize) -> bool {
    match cmd.name {
        "auth" => args.len() <= 3 && i >= 1,
        "hello" => (3..args.len())
            .any(|j| crate::commands::is(args[j - 1], "auth") && (i == j || i == j + 1)),
        "acl|setuser" | "acl|deluser" => i >= 2,
        "acl|getuser" => args.len() == 3 && i == 2,
        "config|set" => i >= 3 && i % 2 == 1 && is_sensitive_config(args[i - 1]),
        "migrate" => crate::commands::migrate::redacted(args, i),
        _ => false,
    }
}

/// Configs whose values are secrets (Redis's SENSITIVE_CONFIG).
fn is_sensitive_config(name: &[u8]) -> bool {
    [
        "masteruser",
        "masterauth",
        "requirepass",
        "tls-key-file-pass",
        "tls-client-key-file-pass",
    ]
    .iter()
    .any(|s| crate::commands::is(name, s))
}

impl Executor {
    /// MONITOR: the client starts receiving the command stream.
    pub fn monitor_start(&mut self, slot: usize) {
        let c = self.client_mut(slot);
        if !c.monitor {
            c.monitor = true;
            self.monitors.push(slot);
        }
    }

    pub(crate) fn monitor_stop(&mut self, slot: usize) {
        self.client_mut(slot).monitor = false;
        self.monitors.retain(|&s| s != slot);
    }

    /// Sends one executed command to the monitors.
    pub(crate) fn feed_monitors(&mut self, slot: usize, cmd: &'static Command, args: &[&[u8]]) {
        if cmd.flags & (flags::ADMIN | flags::SKIP_MONITOR) != 0 {
            return;
        }
        self.feed_monitors_always(slot, cmd, args);
    }

    /// Sends a command to the monitors whatever its flags: scripting commands call
    /// this before their script runs (Redis's evalCommand / fcallCommandGeneric).
    pub fn feed_monitors_always(&mut self, slot: usize, cmd: &'static Command, args: &[&[u8]]) {
        if self.monitors.is_empty() {
            return;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let c = self.client(slot);
        let mut line = format!(
            "{}.{:06} [{} {}]",
            now.as_secs(),
            now.subsec_micros(),
            c.db,
            c.addr
        );
        for (i, a) in args.iter().enumerate() {
            line.push(' ');
            if redacted(cmd, args, i) {
                line.push_str("\"(redacted)\"");
            } else {
                crate::util::repr(&mut line, a);
            }
        }
        let msg = Reply::Status(line.into());
        for m in self.monitors.clone() {
            self.push_to(m, &msg);
        }
    }
}
