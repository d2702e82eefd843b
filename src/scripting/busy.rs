//! The script watchdog: an instruction-count hook that notices a script running past
//! `busy-reply-threshold`, serves other clients while it runs on, and stops it when
//! SCRIPT KILL or FUNCTION KILL asks.
//!
//! The hook is installed once per VM (every 100k instructions, as Redis), so a script
//! that finishes in time pays one clock read at start and nothing per instruction
//! beyond Lua's own hook counter. It shares a `Watchdog` with the run: start time and
//! threshold are set by `scripting::run`; the hook only reads the clock. Once the
//! threshold is passed, each hook call performs the run's step through the VM's
//! `redis.pcall` (the only thing allowed to borrow the executor during a script), which
//! publishes the busy state and lets the network layer serve one round
//! (exec/busy.rs). After a kill the hook fires on every line, so a script cannot keep
//! catching the kill error with `pcall` (Redis does the same). Lua's pattern matching
//! (`string.find` and co., C code) counts its steps against the same hook, and calls it at
//! every step in line mode, so a pathological pattern is reached too (see build.rs).

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use std::ffi::c_void;

use mlua::{Function, HookTriggers, LightUserData, Lua, Table, Value, VmState};

/// Instructions between two clock checks.
pub const CHECK_EVERY: u32 = 100_000;

/// The argument that makes the run's `redis.pcall` perform the watchdog's step: a
/// light userdata with the address of this static. Scripts cannot forge it (the
/// sandbox creates no light userdata; `cjson.null` is the null pointer).
static STEP_MARK: u8 = 0;

fn step_mark() -> Value {
    Value::LightUserData(LightUserData(&STEP_MARK as *const u8 as *mut c_void))
}

#[cfg(test)]
pub fn step_mark_ptr() -> *const u8 {
    &STEP_MARK
}

/// Whether `redis.pcall`'s single light-userdata argument is the watchdog's step mark
/// rather than a script's call.
pub fn is_step_ptr(p: *mut c_void) -> bool {
    std::ptr::eq(p as *const u8, &STEP_MARK)
}

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
    pub fn disarm(self: &Rc<Self>, lua: &Lua, redis: &Table) {
        self.start.set(None);
        self.timed_out.set(false);
        self.killed.set(false);
        if self.line_mode.replace(false) {
            let _ = install(
                lua,
                self,
                redis,
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

/// Installs the watchdog hook on a VM whose real `redis` table is `redis` (scripts see
/// a readonly proxy of it; its `pcall` reaches the run in progress).
pub fn install(
    lua: &Lua,
    wd: &Rc<Watchdog>,
    redis: &Table,
    triggers: HookTriggers,
) -> mlua::Result<()> {
    let wd = wd.clone();
    let redis = redis.clone();
    lua.set_global_hook(triggers, move |lua, _| check(lua, &wd, &redis))
}

fn check(lua: &Lua, wd: &Rc<Watchdog>, redis: &Table) -> mlua::Result<VmState> {
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
    // The run's `redis.pcall`, called with the step mark (see `is_step_ptr`).
    let killed = match redis.raw_get::<Option<Function>>("pcall")? {
        Some(f) => f.call::<bool>(step_mark())?,
        None => false,
    };
    if !killed {
        return Ok(VmState::Continue);
    }
    crate::log::notice("Lua script killed by user with SCRIPT KILL.");
    wd.killed.set(true);
    wd.line_mode.set(true);
    install(lua, wd, redis, HookTriggers::EVERY_LINE)?;
    Err(super::vm::raise(KILLED))
}
