//! The script watchdog: an instruction-count hook that notices a script running past
//! `busy-reply-threshold`, serves other clients while it runs on, and stops it when
//! SCRIPT KILL or FUNCTION KILL asks.
//!
//! The hook is installed once per VM (every 100k instructions, as Redis), so a script
//! that finishes in time pays one clock read at start and nothing per instruction
//! beyond Lua's own hook counter. It shares a `Watchdog` with the run: start time and
//! threshold are set by `scripting::run`; the hook only reads the clock. Once the
//! threshold is passed, each hook call invokes the run's `step` function — a scoped
//! function created by the run, the only thing allowed to borrow the executor during a
//! script — which publishes the busy state and lets the network layer serve one round
//! (exec/busy.rs). After a kill the hook fires on every line, so a script cannot keep
//! catching the kill error with `pcall` (Redis does the same).

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use mlua::{Function, HookTriggers, Lua, VmState};

/// Instructions between two clock checks.
pub const CHECK_EVERY: u32 = 100_000;

/// The registry slot of the running script's step function.
pub const STEP_KEY: &str = "__cinnabar_busy_step";

/// The error a killed script's caller gets (with Redis's `script: …, on …` suffix).
pub const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

/// State shared by a VM's hook and the script run in progress.
#[derive(Default)]
pub struct Watchdog {
    /// When the running script started; `None` between scripts.
    start: Cell<Option<Instant>>,
    /// `busy-reply-threshold` at script start (zero: never time out).
    threshold: Cell<Duration>,
    /// The script has passed its threshold: other clients are being served.
    timed_out: Cell<bool>,
    killed: Cell<bool>,
    /// The hook was switched to every line after a kill.
    line_mode: Cell<bool>,
    /// Whether the run is an EVAL (for the log line).
    is_eval: Cell<bool>,
}

impl Watchdog {
    /// A script starts.
    pub fn arm(&self, threshold_ms: i64, is_eval: bool) {
        self.start.set(Some(Instant::now()));
        self.threshold
            .set(Duration::from_millis(threshold_ms.max(0) as u64));
        self.is_eval.set(is_eval);
    }

    /// The script ended: back to the cheap counting hook if a kill changed it.
    pub fn disarm(self: &Rc<Self>, lua: &Lua) {
        self.start.set(None);
        self.timed_out.set(false);
        self.killed.set(false);
        if self.line_mode.replace(false) {
            let _ = install(
                lua,
                self,
                HookTriggers::new().every_nth_instruction(CHECK_EVERY),
            );
        }
    }

    pub fn timed_out(&self) -> bool {
        self.timed_out.get()
    }

    pub fn started(&self) -> Option<Instant> {
        self.start.get()
    }
}

/// Installs the watchdog hook on a VM.
pub fn install(lua: &Lua, wd: &Rc<Watchdog>, triggers: HookTriggers) -> mlua::Result<()> {
    let wd = wd.clone();
    lua.set_global_hook(triggers, move |lua, _| check(lua, &wd))
}

fn check(lua: &Lua, wd: &Rc<Watchdog>) -> mlua::Result<VmState> {
    let Some(start) = wd.start.get() else {
        return Ok(VmState::Continue);
    };
    if wd.killed.get() {
        return Err(super::vm::raise(KILLED));
    }
    if !wd.timed_out.get() {
        let threshold = wd.threshold.get();
        let elapsed = start.elapsed();
        if threshold.is_zero() || elapsed < threshold {
            return Ok(VmState::Continue);
        }
        wd.timed_out.set(true);
        crate::log::warning(&format!(
            "Slow script detected: still in execution after {} milliseconds. You can try killing the script using the {} command.",
            elapsed.as_millis(),
            if wd.is_eval.get() { "SCRIPT KILL" } else { "FUNCTION KILL" }
        ));
    }
    let step: Option<Function> = lua.named_registry_value(STEP_KEY)?;
    let killed = match step {
        Some(f) => f.call::<bool>(())?,
        None => false,
    };
    if !killed {
        return Ok(VmState::Continue);
    }
    crate::log::notice("Lua script killed by user with SCRIPT KILL.");
    wd.killed.set(true);
    wd.line_mode.set(true);
    install(lua, wd, HookTriggers::EVERY_LINE)?;
    Err(super::vm::raise(KILLED))
}
