//! CLIENT PAUSE: which commands wait, and what the server holds back meanwhile.
//!
//! As Redis's `processCommand`, a command is postponed after the checks that reject it
//! outright (unknown command, arity, protected command, authentication): with `ALL`
//! every command waits, with `WRITE` those that may reach the replication stream —
//! write and may-replicate commands (PUBLISH, PFCOUNT, ...), scripts by their
//! declared flags, and EXEC of a queue holding one. A postponed client counts in
//! INFO `blocked_clients` and shows `b` in CLIENT LIST. While a pause lasts, expired
//! keys read as missing but are not deleted (lazily or actively) and eviction waits,
//! so the dataset and the replication stream stay still.

use std::time::Instant;

use crate::commands::{self, flags, Command};

use super::{Executor, Pause};

impl Executor {
    /// The pause in force, lifting one whose time has passed.
    pub fn current_pause(&mut self) -> Option<Pause> {
        let p = self.pause?;
        if Instant::now() < p.until {
            return Some(p);
        }
        self.unpause();
        None
    }

    /// Starts (or extends) a pause.
    pub fn set_pause(&mut self, p: Pause) {
        self.pause = Some(p);
        self.ks.expire_paused = true;
    }

    /// Ends the pause: postponed clients run again, expiry and eviction resume.
    pub fn unpause(&mut self) {
        self.pause = None;
        self.ks.expire_paused = false;
        self.postponed.clear();
    }

    /// Whether the client in `slot` waits for a pause to end before running `args`.
    pub(crate) fn postponed_by_pause(&mut self, slot: usize, args: &[&[u8]]) -> bool {
        let paused = match self.current_pause() {
            None => false,
            Some(p) => self.pause_applies(slot, args, p.write_only),
        };
        if paused {
            self.postponed.insert(slot);
        } else {
            self.postponed.remove(&slot);
        }
        paused
    }

    /// Whether a pause (of writes only, or of everything) holds `args` back.
    fn pause_applies(&self, slot: usize, args: &[&[u8]], write_only: bool) -> bool {
        let c = self.client(slot);
        // Replicas are never paused (the master link and its pseudo-client neither).
        if c.repl_role.is_some() || c.embedded {
            return false;
        }
        // Commands rejected before the pause check get their error at once.
        let Some(cmd) = resolve(args) else {
            return false;
        };
        if !c.authenticated && cmd.flags & flags::NO_AUTH == 0 {
            return false;
        }
        if cmd.flags & flags::PROTECTED != 0 && self.protected_command_refusal(slot, cmd).is_some()
        {
            return false;
        }
        if !write_only {
            return true;
        }
        let may_replicate = |cmd: &Command, args: &[&[u8]]| {
            crate::scripting::command_flags(self, cmd, args) & (flags::WRITE | flags::MAY_REPLICATE)
                != 0
        };
        if may_replicate(cmd, args) {
            return true;
        }
        cmd.name == "exec"
            && c.tx.multi.as_ref().is_some_and(|m| {
                m.queue.iter().any(|q| {
                    let qargs: Vec<&[u8]> = q.args.iter().map(|a| a.as_slice()).collect();
                    may_replicate(q.cmd, &qargs)
                })
            })
    }
}

/// The command (or subcommand) `args` would run, if it exists and the arity fits.
fn resolve(args: &[&[u8]]) -> Option<&'static Command> {
    let mut cmd = commands::lookup(args.first()?)?;
    if !cmd.subcommands.is_empty() && (args.len() >= 2 || cmd.arity != -1) {
        cmd = commands::lookup_subcommand(cmd, args.get(1)?)?;
    }
    commands::arity_ok(cmd.arity, args.len()).then_some(cmd)
}
