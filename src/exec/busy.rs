//! Busy-script mode: what the executor knows while a script has run past
//! `busy-reply-threshold`, and the hook through which the network layer serves other
//! clients meanwhile.
//!
//! A script runs inside its command, on the executor's only thread. Its Lua VM checks
//! the clock every 100k instructions (`scripting::busy`); once the threshold is passed
//! the script is "timed out": `Executor::busy` is set and, at each check, the VM calls
//! `serve_while_busy`, which lends the executor to the network layer for one
//! non-blocking round of accept/read/parse/answer/write (`net::Net::serve_busy`).
//! Commands without the `allow-busy` flag get BUSY (`Executor::intercept`), so nothing
//! but AUTH, HELLO, QUIT, RESET, MULTI/DISCARD/WATCH/UNWATCH, SCRIPT KILL, FUNCTION
//! KILL/STATS and SHUTDOWN NOSAVE runs while the script is in the middle of its work.
//! Eviction and the wake-up of blocked clients wait for the script's end too.
//!
//! The network layer registers itself once (`busy_server`); an executor without one
//! (the embedded API) simply runs scripts to completion.

use std::rc::Rc;
use std::time::Instant;

use crate::protocol::Reply;

use super::Executor;

/// BUSY while an EVAL script runs (Redis's `slowevalerr`).
pub const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// BUSY while a function runs (Redis's `slowscripterr`).
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
pub const NOTBUSY: Reply = Reply::err("NOTBUSY No scripts in execution right now.");
pub const UNKILLABLE: Reply = Reply::err("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.");

/// The script that is past its threshold.
pub struct BusyScript {
    /// The client whose EVAL/FCALL is running.
    pub caller: usize,
    /// EVAL-family (SCRIPT KILL) rather than a function (FUNCTION KILL).
    pub is_eval: bool,
    /// The function name (FCALL) or script SHA (EVAL).
    pub name: String,
    /// The caller's command, for FUNCTION STATS.
    pub command: Vec<Vec<u8>>,
    pub start: Instant,
    /// The script called a write command: it can no longer be killed.
    pub wrote: bool,
    /// SCRIPT KILL / FUNCTION KILL asked for the script to stop.
    pub killed: bool,
    /// Write-stream position where the script's effects begin: SHUTDOWN NOSAVE drops
    /// what follows, everything before it may be flushed while the script runs.
    pub stream_pos: u64,
    /// FUNCTION STATS's library and function counts (the engine is out of the
    /// executor while the script runs).
    pub library_counts: (usize, usize),
}

impl BusyScript {
    /// The BUSY error text other clients get.
    pub fn busy_text(&self) -> &'static str {
        if self.is_eval {
            BUSY_EVAL
        } else {
            BUSY_FUNCTION
        }
    }

    pub fn busy_error(&self) -> Reply {
        Reply::err(self.busy_text())
    }
}

/// A network layer able to serve other clients while a script is busy.
pub trait ServeWhileBusy {
    /// One non-blocking round of network work with only busy-allowed commands run.
    fn serve(&self, ex: &mut Executor);
    /// One non-blocking round while the dataset loads (commands without the
    /// `loading` flag get -LOADING).
    fn serve_loading(&self, ex: &mut Executor);
    /// Closes a client's connection at once (client eviction); false when that
    /// cannot be done now (the connection's command is running, or the loop is busy).
    fn close_now(&self, ex: &mut Executor, slot: usize) -> bool;
}

impl Executor {
    /// Called by a timed-out script at each check: serves other clients once.
    pub fn serve_while_busy(&mut self) {
        if let Some(server) = self.busy_server.clone() {
            server.serve(self);
        }
    }

    /// Called by the loader between keys: serves clients once, refusing what needs the
    /// dataset. Nothing happens without a network layer (the embedded API).
    pub fn serve_while_loading(&mut self) {
        if let Some(server) = self.loading_server.clone() {
            self.persist.serving_while_loading = true;
            server.serve_loading(self);
            self.persist.serving_while_loading = false;
        }
    }

    /// Registers the network layer's busy-mode server.
    pub fn set_busy_server(&mut self, server: Rc<dyn ServeWhileBusy>) {
        self.busy_server = Some(server);
    }

    /// SCRIPT KILL (`is_eval`) and FUNCTION KILL.
    pub fn kill_script(&mut self, is_eval: bool) -> Reply {
        let Some(b) = self.busy.as_mut() else {
            return NOTBUSY;
        };
        if b.wrote {
            return UNKILLABLE;
        }
        if b.is_eval != is_eval {
            return b.busy_error();
        }
        b.killed = true;
        Reply::ok()
    }
}
