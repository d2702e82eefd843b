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
//!
//! Pauses are kept per purpose, as Redis's `pauseActions`: CLIENT PAUSE (the
//! client's), a failover (the FAILOVER command's while it waits for a replica to
//! catch up, or a cluster manual failover's on the master), a shutdown waiting for
//! its replicas. Each ends on its own
//! (its time passes, CLIENT UNPAUSE lifts only the client's, the end of a failover
//! only the failover's), and what is held back is the strictest of those in force:
//! everything if one pauses everything, writes otherwise.

use std::time::Instant;

use crate::commands::{self, flags, Command};

use super::{Executor, Pause};

/// Who asked for a pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PausePurpose {
    /// CLIENT PAUSE.
    Client = 0,
    /// FAILOVER waiting for its target, or a cluster manual failover (MFSTART).
    Failover = 1,
    /// A shutdown waiting for its replicas to catch up (shutdown.rs).
    Shutdown = 2,
}

impl PausePurpose {
    pub const COUNT: usize = 3;
}

impl Executor {
    /// The pause in force, the strictest of the purposes' (the latest end, and
    /// everything paused if one pauses everything); purposes whose time has passed
    /// are lifted first.
    #[inline]
    pub fn current_pause(&mut self) -> Option<Pause> {
        // Every command asks: no call and no clock read while nothing is paused.
        if self.pauses.iter().all(Option::is_none) {
            return None;
        }
        self.lift_ended_pauses()
    }

    /// `current_pause` while something is paused.
    #[inline(never)]
    fn lift_ended_pauses(&mut self) -> Option<Pause> {
        let before = strictest(&self.pauses);
        let now = Instant::now();
        for p in self.pauses.iter_mut() {
            if p.is_some_and(|q| q.until <= now) {
                *p = None;
            }
        }
        let after = strictest(&self.pauses);
        self.pause_changed(before, after);
        after
    }

    /// The pause `purpose` holds, if any (its time may have passed).
    pub fn pause_of(&self, purpose: PausePurpose) -> Option<Pause> {
        self.pauses[purpose as usize]
    }

    /// Starts (or replaces) `purpose`'s pause. As Redis's `pauseActions`, the later of
    /// the old and new end times is kept; what is paused is the new pause's.
    pub fn set_pause(&mut self, purpose: PausePurpose, p: Pause) {
        let before = strictest(&self.pauses);
        let slot = &mut self.pauses[purpose as usize];
        let until = match *slot {
            Some(old) if old.until > p.until => old.until,
            _ => p.until,
        };
        *slot = Some(Pause { until, ..p });
        let after = strictest(&self.pauses);
        self.pause_changed(before, after);
    }

    /// Lifts `purpose`'s pause; the others stay.
    pub fn unpause(&mut self, purpose: PausePurpose) {
        let before = strictest(&self.pauses);
        self.pauses[purpose as usize] = None;
        let after = strictest(&self.pauses);
        self.pause_changed(before, after);
    }

    /// After the purposes changed: expiry and eviction wait while any pause lasts;
    /// when the pause became less strict, postponed clients are looked at again (as
    /// Redis's `updatePausedActions`: they run, or wait again).
    fn pause_changed(&mut self, before: Option<Pause>, after: Option<Pause>) {
        self.ks.expire_paused = after.is_some();
        let strictness = |p: Option<Pause>| p.map_or(0, |p| if p.write_only { 1 } else { 2 });
        if strictness(after) < strictness(before) {
            self.postponed.clear();
        }
    }

    /// Whether the client in `slot` waits for a pause to end before running `args`.
    #[inline]
    pub(crate) fn postponed_by_pause(&mut self, slot: usize, args: &[&[u8]]) -> bool {
        if self.postponed.is_empty() && self.pauses.iter().all(Option::is_none) {
            return false;
        }
        self.postpone_if_paused(slot, args)
    }

    /// `postponed_by_pause` while something is paused or postponed.
    #[inline(never)]
    fn postpone_if_paused(&mut self, slot: usize, args: &[&[u8]]) -> bool {
        let paused = match self.current_pause() {
            None => false,
            Some(p) => self.pause_applies(slot, args, p.write_only),
        };
        if paused {
            self.postponed.insert(slot);
        } else if !self.postponed.is_empty() {
            self.postponed.remove(&slot);
        }
        paused
    }

    /// Whether a pause holds back `args` from our master. As Redis, the master's
    /// commands wait as any client's would; the link reads on meanwhile.
    pub(crate) fn master_command_paused(&mut self, slot: usize, args: &[&[u8]]) -> bool {
        match self.current_pause() {
            None => false,
            Some(p) => self.command_paused(slot, args, p.write_only),
        }
    }

    /// Whether a pause (of writes only, or of everything) holds `args` back.
    fn pause_applies(&self, slot: usize, args: &[&[u8]], write_only: bool) -> bool {
        let c = self.client(slot);
        // Replicas are never paused, nor in-process clients (the master link's
        // commands are held before they reach its client: `master_command_paused`).
        if c.repl_role.is_some() || c.embedded {
            return false;
        }
        self.command_paused(slot, args, write_only)
    }

    /// The pause rules for `args`, whoever sends them.
    fn command_paused(&self, slot: usize, args: &[&[u8]], write_only: bool) -> bool {
        let c = self.client(slot);
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

/// The pause in force among `pauses` (their times not looked at): the latest end,
/// everything paused if one pauses everything.
fn strictest(pauses: &[Option<Pause>]) -> Option<Pause> {
    pauses.iter().flatten().fold(None, |acc: Option<Pause>, q| {
        Some(match acc {
            None => *q,
            Some(e) => Pause {
                until: e.until.max(q.until),
                write_only: e.write_only && q.write_only,
            },
        })
    })
}

/// The command (or subcommand) `args` would run, if it exists and the arity fits.
fn resolve(args: &[&[u8]]) -> Option<&'static Command> {
    let mut cmd = commands::lookup(args.first()?)?;
    if !cmd.subcommands.is_empty() && (args.len() >= 2 || cmd.arity != -1) {
        cmd = commands::lookup_subcommand(cmd, args.get(1)?)?;
    }
    commands::arity_ok(cmd.arity, args.len()).then_some(cmd)
}
