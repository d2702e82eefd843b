//! The Lua scripting host: EVAL's script cache, FUNCTION's libraries, and the run of a
//! script against the executor.
//!
//! The engine lives in the executor (`Executor::scripting`) and is taken out of it for
//! the length of a script, so the script's `redis.call` can borrow the executor
//! mutably: each VM's `redis.call` is created once and reaches the run's `&mut
//! Executor` through the VM's `CallSlot`, filled only while a script runs. Commands called from a script run as the engine's
//! pseudo-client (Redis's "lua client": its database follows the caller's at script
//! start, its protocol follows `redis.setresp`) through `Executor::call`, the same
//! dispatch every client command takes, so statistics, the slow log and the
//! after-command hooks (notifications, expired-key events) run for each of them;
//! blocked clients and keyspace notifications are then delivered after the script
//! as after any command.
//!
//! SCRIPT FLUSH starts a fresh VM, as Redis does.

pub mod busy;
pub mod convert;
pub mod functions;
pub mod ldb;
pub mod libs;
pub mod patched;
pub mod raw;
pub mod vm;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ptr::NonNull;
use std::rc::Rc;

use mlua::Lua;

use crate::commands::{self, flags, Command};
use crate::exec::Executor;
use crate::protocol::Reply;

pub use vm::Vm;

/// Script flags (shebang `flags=` and `redis.register_function` flags).
pub mod sflags {
    pub const NO_WRITES: u32 = 1 << 0;
    pub const ALLOW_OOM: u32 = 1 << 1;
    pub const ALLOW_STALE: u32 = 1 << 2;
    pub const NO_CLUSTER: u32 = 1 << 3;
    pub const ALLOW_CROSS_SLOT: u32 = 1 << 4;
    /// A script without shebang: Redis's compatibility mode.
    pub const EVAL_COMPAT: u32 = 1 << 5;

    pub const NAMES: &[(&str, u32)] = &[
        ("no-writes", NO_WRITES),
        ("allow-oom", ALLOW_OOM),
        ("allow-stale", ALLOW_STALE),
        ("no-cluster", NO_CLUSTER),
        ("allow-cross-slot-keys", ALLOW_CROSS_SLOT),
    ];
}

/// EVALSHA's SHA argument lowercased into `buf`; `None` when it cannot name a script
/// (wrong length or not ASCII).
pub fn lowercase_sha<'b>(arg: &[u8], buf: &'b mut [u8; 40]) -> Option<&'b str> {
    if arg.len() != 40 {
        return None;
    }
    for (d, s) in buf.iter_mut().zip(arg) {
        *d = s.to_ascii_lowercase();
    }
    std::str::from_utf8(buf).ok()
}

/// A cached EVAL script.
pub struct Script {
    pub body: Vec<u8>,
    /// The compiled function in the VM's registry, where the raw run path finds it
    /// (raw.rs). Only the registry key is kept: an mlua `Function` handle would hold a
    /// slot of mlua's reference stack for as long as the script is cached, and a few
    /// thousand cached scripts would exhaust it (every later compile failing).
    pub key: mlua::RegistryKey,
    pub flags: u32,
    /// Its place in the EVAL scripts' LRU order (`Engine::eval_lru`); `None` for a
    /// script first cached by SCRIPT LOAD, which is never evicted.
    lru: Option<u64>,
}

/// How many scripts cached by EVAL are kept (Redis 7.4's LRU_LIST_LENGTH): a client
/// that builds a new script per call cannot grow the cache without bound.
pub const EVAL_SCRIPTS_KEPT: usize = 500;

pub struct Engine {
    pub eval: Vm,
    pub scripts: HashMap<String, Script, foldhash::fast::RandomState>,
    /// Scripts cached by EVAL, least recently run first: tick → SHA.
    eval_lru: std::collections::BTreeMap<u64, [u8; 40]>,
    lru_clock: u64,
    /// EVAL scripts evicted to keep `EVAL_SCRIPTS_KEPT` (INFO `evicted_scripts`).
    pub evicted_scripts: u64,
    /// FUNCTION's libraries and their VM, created on first use.
    pub functions: Option<Box<functions::Functions>>,
    /// The pseudo-client slot commands called from scripts run as.
    lua_client: Option<usize>,
}

/// Hex SHA1 of a byte string (script cache keys, `redis.sha1hex`).
pub fn sha1hex(b: &[u8]) -> String {
    sha1_smol::Sha1::from(b).digest().to_string()
}

/// C's `%.{prec}g`: shortest of fixed and exponent notation, trailing zeros removed.
pub fn format_g(v: f64, prec: usize) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let prec = prec.max(1);
    let sci = format!("{:.*e}", prec - 1, v);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= prec as i32 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip(mant), exp.abs())
    } else {
        let decimals = (prec as i32 - 1 - exp).max(0) as usize;
        strip(&format!("{:.*}", decimals, v))
    }
}

/// Parses EVAL's `#!lua flags=...` shebang: the flags and the body offset where the
/// code starts (the shebang's newline is kept so line numbers stay right).
pub fn parse_shebang(body: &[u8]) -> Result<(u32, usize), Reply> {
    if !body.starts_with(b"#!") {
        return Ok((sflags::EVAL_COMPAT, 0));
    }
    let Some(nl) = memchr::memchr(b'\n', body) else {
        return Err(Reply::err("ERR Invalid script shebang"));
    };
    let line = String::from_utf8_lossy(&body[..nl]).into_owned();
    let mut parts = line[2..].split(' ').filter(|p| !p.is_empty());
    if parts.next() != Some("lua") {
        return Err(Reply::error(format!(
            "ERR Unexpected engine in script shebang: {line}"
        )));
    }
    let mut fl = 0;
    for p in parts {
        let Some(list) = p.strip_prefix("flags=") else {
            return Err(Reply::error(format!("ERR Unknown lua shebang option: {p}")));
        };
        for f in list.split(',').filter(|f| !f.is_empty()) {
            match sflags::NAMES.iter().find(|(n, _)| *n == f) {
                Some((_, v)) => fl |= v,
                None => {
                    return Err(Reply::error(format!(
                        "ERR Unexpected flag in script shebang: {f}"
                    )))
                }
            }
        }
    }
    Ok((fl, nl))
}

impl Engine {
    pub fn new() -> Engine {
        Engine {
            eval: Vm::new().expect("Lua VM initialisation"),
            scripts: HashMap::default(),
            eval_lru: Default::default(),
            lru_clock: 0,
            evicted_scripts: 0,
            functions: None,
            lua_client: None,
        }
    }

    /// Takes the engine out of the executor (creating it on first use).
    pub fn take(ex: &mut Executor) -> Box<Engine> {
        ex.scripting
            .take()
            .unwrap_or_else(|| Box::new(Engine::new()))
    }

    pub fn put_back(ex: &mut Executor, e: Box<Engine>) {
        ex.scripting = Some(e);
    }

    /// The pseudo-client slot, created on first use.
    pub fn lua_client(&mut self, ex: &mut Executor) -> usize {
        if let Some(s) = self.lua_client {
            return s;
        }
        let slot = ex.connect_internal("lua");
        ex.client_mut(slot).script = true;
        self.lua_client = Some(slot);
        slot
    }

    /// Compiles and caches an EVAL script, returning its SHA.
    pub fn load_script(&mut self, body: &[u8]) -> Result<String, Reply> {
        self.cache_script(body, false)
    }

    /// EVAL's caching: as `load_script`, but a new script joins the LRU order, the
    /// least recently run one evicted when `EVAL_SCRIPTS_KEPT` are there.
    pub fn load_eval_script(&mut self, body: &[u8]) -> Result<String, Reply> {
        self.cache_script(body, true)
    }

    /// A script just run moves to the end of the LRU order (if it is in it).
    pub fn touch_script(&mut self, sha: &str) {
        let Some(script) = self.scripts.get_mut(sha) else {
            return;
        };
        let Some(tick) = script.lru else { return };
        if let Some(hex) = self.eval_lru.remove(&tick) {
            self.lru_clock += 1;
            script.lru = Some(self.lru_clock);
            self.eval_lru.insert(self.lru_clock, hex);
        }
    }

    fn cache_script(&mut self, body: &[u8], by_eval: bool) -> Result<String, Reply> {
        let sha = sha1hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        let (fl, start) = parse_shebang(body)?;
        let func = self
            .eval
            .compile(&body[start..], "@user_script")
            .map_err(|m| Reply::error(format!("ERR Error compiling script (new function): {m}")))?;
        let key = self
            .eval
            .lua
            .create_registry_value(&func)
            .map_err(|_| Reply::err("ERR not enough memory"))?;
        let lru = if by_eval {
            while self.eval_lru.len() >= EVAL_SCRIPTS_KEPT {
                let Some((_, oldest)) = self.eval_lru.pop_first() else {
                    break;
                };
                let oldest = std::str::from_utf8(&oldest).unwrap_or_default();
                if let Some(old) = self.scripts.remove(oldest) {
                    // Its compiled function leaves the VM's registry too.
                    let _ = self.eval.lua.remove_registry_value(old.key);
                }
                self.evicted_scripts += 1;
            }
            self.lru_clock += 1;
            let mut hex = [0u8; 40];
            hex.copy_from_slice(sha.as_bytes());
            self.eval_lru.insert(self.lru_clock, hex);
            Some(self.lru_clock)
        } else {
            None
        };
        self.scripts.insert(
            sha.clone(),
            Script {
                body: body.to_vec(),
                key,
                flags: fl,
                lru,
            },
        );
        Ok(sha)
    }

    /// SCRIPT FLUSH: forgets every script and starts a fresh VM.
    /// SCRIPT FLUSH: a fresh VM with no scripts. The old VM and its scripts come back
    /// with how many scripts there were, for the caller to free here or in the
    /// background.
    pub fn flush_scripts(&mut self) -> (Detached<ScriptCache>, usize) {
        let fresh = Vm::new().expect("Lua VM initialisation");
        let scripts = std::mem::take(&mut self.scripts);
        self.eval_lru.clear();
        let n = scripts.len();
        // Scripts first: their registry keys are dropped before the VM they point into.
        (
            Detached((scripts, std::mem::replace(&mut self.eval, fresh))),
            n,
        )
    }

    /// FUNCTION FLUSH: every library and the functions VM, with how many functions
    /// there were, for the caller to free here or in the background.
    pub fn take_functions(&mut self) -> Option<(Detached<Box<functions::Functions>>, usize)> {
        let f = self.functions.take()?;
        let n = f.index.len();
        Some((Detached(f), n))
    }
}

/// The EVAL VM with its script cache.
pub type ScriptCache = (HashMap<String, Script, foldhash::fast::RandomState>, Vm);

/// A Lua VM, or what owns one, detached from the engine to be dropped, possibly on the
/// lazy-free thread. Only this module makes one, from a VM it has just let go of.
pub struct Detached<T>(T);

// SAFETY: a VM is not `Send` because its handles (tables, functions, the `Rc`s its
// callbacks capture) share non-atomic counters. A `Detached` value owns the VM and
// every handle into it: the engine keeps none once it has swapped the VM out (the
// only outside references, a running script's `CallCtx`, exist only during a run,
// and FLUSH does not run inside one). So the thread that receives it is the only one
// to touch any of it, and all it does is drop it.
unsafe impl<T> Send for Detached<T> {}

impl Engine {}

impl Default for Engine {
    fn default() -> Self {
        Engine::new()
    }
}

/// What a script run needs to know.
pub struct RunSpec<'a> {
    /// The SHA (EVAL) or function name (FCALL), for error messages.
    pub name: &'a str,
    pub read_only: bool,
    /// Arguments: KEYS and ARGV.
    pub keys: &'a [&'a [u8]],
    pub argv: &'a [&'a [u8]],
    /// FCALL passes KEYS and ARGV as arguments; EVAL sets them as globals.
    pub as_args: bool,
    /// The caller's whole command (FUNCTION STATS shows it while the script is busy).
    pub command: &'a [&'a [u8]],
    /// FCALL's libraries (out of the executor while the function runs), for FUNCTION
    /// STATS's counts while the function is busy.
    pub functions: Option<&'a functions::Functions>,
    /// The `allow-oom` flag: writes are allowed even over `maxmemory`.
    pub allow_oom: bool,
    /// Cluster mode: the script may touch keys of several slots (`allow-cross-slot-keys`,
    /// or a script without shebang).
    pub cross_slot: bool,
}

/// The flags a command runs with (Redis's getCommandFlags): EVAL, EVALSHA and FCALL
/// (and their `_RO` forms) take WRITE, DENYOOM and STALE from the flags their script
/// declares, and drop MAY_REPLICATE, since declared flags say whether it writes; a
/// script without a shebang, or one not found, keeps the command row's flags.
pub fn command_flags(ex: &Executor, cmd: &Command, args: &[&[u8]]) -> u32 {
    let engine = ex.scripting.as_deref();
    let declared = match (cmd.name, args.get(1)) {
        ("eval" | "eval_ro", Some(body)) => {
            match engine.and_then(|e| e.scripts.get(&sha1hex(body))) {
                Some(script) => Some(script.flags),
                None => parse_shebang(body).ok().map(|(f, _)| f),
            }
        }
        ("evalsha" | "evalsha_ro", Some(sha)) => {
            let mut lowered = [0u8; 40];
            lowercase_sha(sha, &mut lowered)
                .and_then(|sha| engine.and_then(|e| e.scripts.get(sha)))
                .map(|script| script.flags)
        }
        ("fcall" | "fcall_ro", Some(name)) => engine
            .and_then(|e| e.functions.as_deref())
            .and_then(|f| f.function(&String::from_utf8_lossy(name)))
            .map(|def| def.flags),
        _ => None,
    };
    match declared {
        Some(sf) if sf & sflags::EVAL_COMPAT == 0 => {
            let mut f = cmd.flags & !(flags::STALE | flags::DENYOOM | flags::WRITE);
            if sf & (sflags::ALLOW_OOM | sflags::NO_WRITES) == 0 {
                f |= flags::DENYOOM;
            }
            if sf & sflags::NO_WRITES == 0 {
                f |= flags::WRITE;
            }
            if sf & sflags::ALLOW_STALE != 0 {
                f |= flags::STALE;
            }
            f & !flags::MAY_REPLICATE
        }
        _ => cmd.flags,
    }
}

/// Redis's OOM error.
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// The refusal of a script with declared flags (a shebang, or a function) before it
/// runs. Redis derives the command's flags from the script's (a script that may write
/// is a write command, one neither `no-writes` nor `allow-oom` is `denyoom`), so its
/// processCommand refuses it as such a command: on a readonly replica, while data
/// cannot be persisted, without enough good replicas, over `maxmemory`; then
/// scriptPrepareForRun refuses a script that may write run by a `*_ro` command.
/// Scripts without a shebang are checked at each command they call instead.
pub fn refused_before_run(
    ex: &Executor,
    caller: usize,
    script_flags: u32,
    ro: bool,
) -> Option<Reply> {
    if script_flags & sflags::EVAL_COMPAT != 0 {
        // A script without a shebang never runs on a stale replica (EVAL itself is
        // allowed there: its row is STALE).
        return crate::replication::refusing_stale(ex).then(|| {
            Reply::err(
                "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
            )
        });
    }
    if script_flags & sflags::NO_WRITES == 0 {
        let obey = ex
            .repl
            .link
            .as_ref()
            .is_some_and(|l| l.client == Some(caller));
        if ex.repl.link.is_some() && ex.config.replica_read_only && !obey {
            return Some(Reply::err(
                "READONLY You can't write against a read only replica.",
            ));
        }
        if !obey {
            if let Some(e) = crate::persistence::disk_error(ex) {
                return Some(Reply::error(crate::persistence::disk_error_message(e)));
            }
        }
        if !crate::replication::enough_good_replicas(ex) {
            return Some(Reply::err(crate::replication::NOREPLICAS));
        }
    }
    if ex.pre_command_oom && script_flags & (sflags::ALLOW_OOM | sflags::NO_WRITES) == 0 {
        return Some(Reply::err(OOM));
    }
    if ro && script_flags & sflags::NO_WRITES == 0 {
        return Some(Reply::err(
            "ERR Can not execute a script with write flag using *_ro command.",
        ));
    }
    None
}

/// The context of `redis.call` during one run.
struct CallCtx<'a> {
    ex: &'a mut Executor,
    /// The script's VM (to lift its memory limit while replies are pushed).
    lua: &'a Lua,
    /// Numbers given to `redis.call`, formatted (raw.rs); kept in the VM's slot
    /// between runs.
    scratch: Vec<u8>,
    slot: usize,
    read_only: bool,
    resp: std::rc::Rc<std::cell::Cell<u8>>,
    /// `redis.set_repl`'s last word (vm.rs REPL_* values).
    repl: std::rc::Rc<std::cell::Cell<u8>>,
    /// A write command was called: SCRIPT KILL can no longer stop the script.
    wrote: bool,
    caller: usize,
    /// Cluster mode: the slot the script's keys hash to so far (declared keys first).
    cluster_slot: Option<usize>,
    /// Where the script's effects begin in the write stream.
    stream_pos: u64,
    spec: &'a RunSpec<'a>,
    started: std::time::Instant,
    /// The last command called was refused before it ran (for the debugger's log).
    refused: bool,
}

/// Where a VM's `redis.call` / `redis.pcall` find the run in progress.
///
/// The two functions are created once per VM (`install_call_hooks`) rather than as
/// scoped functions on every run: creating them was a fifth of an EVALSHA's cost. A
/// run publishes its context here for exactly its own length (`SlotGuard`); outside a
/// run the slot is empty and the functions raise an error.
#[derive(Default)]
pub struct CallSlot {
    ctx: Cell<Option<NonNull<RefCell<CallCtx<'static>>>>>,
    /// A panic caught inside `redis.call`, resumed once the script's `lua_pcall`
    /// has returned (a panic cannot unwind through Lua's C frames).
    panic: Cell<Option<Box<dyn std::any::Any + Send>>>,
    /// The number-formatting buffer of `redis.call`, reused across runs.
    scratch: Cell<Vec<u8>>,
}

impl CallSlot {
    /// Runs `f` on the run in progress; `None` outside a run.
    fn with<R>(&self, f: impl FnOnce(&RefCell<CallCtx<'_>>) -> R) -> Option<R> {
        // SAFETY: the pointer is set only by `run_body`, to its local `RefCell`,
        // through a `SlotGuard` declared after that `RefCell` and so dropped
        // before it (also on unwinding): while the pointer is in the slot the
        // `RefCell` is alive and not moved. `run_body` itself does not touch the
        // context while the script runs, and the `RefCell` checks every mutable
        // borrow at run time.
        self.ctx.get().map(|p| f(unsafe { p.as_ref() }))
    }
}

/// Publishes a run's context in its VM's slot and restores the previous one on drop.
struct SlotGuard<'s> {
    slot: &'s CallSlot,
    prev: Option<NonNull<RefCell<CallCtx<'static>>>>,
}

impl<'s> SlotGuard<'s> {
    fn set(slot: &'s CallSlot, cc: &RefCell<CallCtx<'_>>) -> SlotGuard<'s> {
        // The lifetime is erased here and bounded by the guard instead (see `with`).
        let p = NonNull::from(cc).cast::<RefCell<CallCtx<'static>>>();
        let prev = slot.ctx.replace(Some(p));
        SlotGuard { slot, prev }
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        self.slot.ctx.set(self.prev);
    }
}

/// Creates a VM's `redis.call` and `redis.pcall` in its real `redis` table: C
/// functions (raw.rs) whose upvalue points at the VM's `CallSlot`. The Lua state keeps
/// a reference to the slot (app data), so the pointer is valid for as long as the
/// functions can be called.
pub fn install_call_hooks(lua: &Lua, redis: &mlua::Table, slot: &Rc<CallSlot>) -> mlua::Result<()> {
    lua.set_app_data(slot.clone());
    let p = Rc::as_ptr(slot);
    redis.raw_set("call", raw::call_function(lua, p, raw::redis_call)?)?;
    redis.raw_set("pcall", raw::call_function(lua, p, raw::redis_pcall)?)?;
    redis.raw_set(
        "acl_check_cmd",
        raw::call_function(lua, p, raw::redis_acl_check_cmd)?,
    )?;
    // The global pcall too (before the sandbox takes the globals' snapshot).
    lua.globals()
        .raw_set("pcall", raw::call_function(lua, p, raw::script_pcall)?)?;
    Ok(())
}

impl CallCtx<'_> {
    /// The watchdog's step once the script is past its threshold (busy.rs): publish
    /// the busy state, let the network layer serve other clients once, and report
    /// whether SCRIPT KILL / FUNCTION KILL asked the script to stop.
    fn busy_step(&mut self) -> bool {
        let (spec, started) = (self.spec, self.started);
        let ex = &mut *self.ex;
        match ex.busy.as_mut() {
            Some(b) => b.wrote = self.wrote,
            None => {
                ex.busy = Some(crate::exec::busy::BusyScript {
                    caller: self.caller,
                    is_eval: !spec.as_args,
                    name: spec.name.to_string(),
                    command: spec.command.iter().map(|a| a.to_vec()).collect(),
                    start: started,
                    wrote: self.wrote,
                    killed: false,
                    stream_pos: self.stream_pos,
                    library_counts: spec
                        .functions
                        .map_or((0, 0), |f| (f.libraries.len(), f.function_count())),
                })
            }
        }
        ex.serve_while_busy();
        ex.busy.as_ref().is_some_and(|b| b.killed)
    }
}

/// Runs the function registered under `func` in `vm` for client `caller`, returning
/// the reply for the caller.
pub fn run(
    ex: &mut Executor,
    caller: usize,
    lua_slot: usize,
    vm: &Vm,
    func: &mlua::RegistryKey,
    spec: &RunSpec,
) -> Reply {
    vm.resp.set(2);
    vm.repl.set(vm::REPL_ALL);
    let db = ex.client(caller).db;
    let caller_proto = ex.client(caller).proto;
    ex.client_mut(lua_slot).db = db;
    // Blocking commands called from a script answer as if they timed out at once.
    let deny_before = std::mem::replace(&mut ex.blocking.deny_blocking, true);
    vm.watchdog
        .arm(ex.config.busy_reply_threshold, !spec.as_args);
    let reply = run_body(ex, caller, caller_proto, lua_slot, vm, func, spec);
    ex.stream.script_skip = 0;
    vm.watchdog.disarm(&vm.lua, &vm.redis);
    ex.busy = None;
    ex.blocking.deny_blocking = deny_before;
    // A collection step every `GC_CYCLE_PERIOD` runs, as Redis's luaCallFunction: the
    // garbage of many short scripts never waits for a full cycle (INFO
    // used_memory_lua stays near the VM's size), and no run pays for one.
    let runs = vm.runs_since_gc.get() + 1;
    if runs >= functions::GC_CYCLE_PERIOD {
        vm.runs_since_gc.set(0);
        let _ = raw::gc_step(&vm.lua, functions::GC_CYCLE_PERIOD as i32);
    } else {
        vm.runs_since_gc.set(runs);
    }
    reply
}

fn run_body(
    ex: &mut Executor,
    caller: usize,
    caller_proto: u8,
    lua_slot: usize,
    vm: &Vm,
    func: &mlua::RegistryKey,
    spec: &RunSpec,
) -> Reply {
    let stream_pos = ex.stream.position();
    let started = vm
        .watchdog
        .started()
        .unwrap_or_else(std::time::Instant::now);
    let cluster_slot = match ex.cluster {
        Some(_) => spec
            .keys
            .first()
            .map(|k| crate::cluster::slot::key_slot(k) as usize),
        None => None,
    };
    let cc = RefCell::new(CallCtx {
        ex,
        lua: &vm.lua,
        scratch: vm.calls.scratch.take(),
        slot: lua_slot,
        read_only: spec.read_only,
        resp: vm.resp.clone(),
        repl: vm.repl.clone(),
        wrote: false,
        caller,
        cluster_slot,
        stream_pos,
        spec,
        started,
        refused: false,
    });
    let outcome = raw::run_script(vm, func.id(), spec, caller_proto, || {
        SlotGuard::set(&vm.calls, &cc)
    });
    let ex = {
        let cc = cc.into_inner();
        vm.calls.scratch.set(cc.scratch);
        cc.ex
    };
    ex.error_reply_counted = outcome.error_counted;
    outcome.reply
}

/// Resolves a command (and subcommand) for a script call; an error names the command
/// when one was found (its arity was wrong).
fn resolve(argv: &[&[u8]]) -> Result<&'static Command, (Option<&'static Command>, &'static str)> {
    const UNKNOWN: &str = "ERR Unknown Redis command called from script";
    const ARITY: &str = "ERR Wrong number of args calling Redis command from script";
    let mut cmd = commands::lookup(argv[0]).ok_or((None, UNKNOWN))?;
    if !cmd.subcommands.is_empty() && (argv.len() >= 2 || cmd.arity != -1) {
        if argv.len() < 2 {
            return Err((Some(cmd), ARITY));
        }
        cmd = commands::lookup_subcommand(cmd, argv[1]).ok_or((None, UNKNOWN))?;
    }
    if !commands::arity_ok(cmd.arity, argv.len()) {
        return Err((Some(cmd), ARITY));
    }
    Ok(cmd)
}

impl CallCtx<'_> {
    /// The checks a command called from a script goes through (Redis's scriptCall),
    /// in Redis's order.
    fn check_command(&mut self, cmd: &'static Command, argv: &[&[u8]]) -> Result<(), Reply> {
        if cmd.flags & flags::NOSCRIPT != 0 && !self.ex.script_disable_deny {
            return Err(Reply::err(
                "ERR This Redis command is not allowed from script",
            ));
        }
        // Checked against the user of the client that runs the script (src/acl).
        if !self.ex.client(self.caller).acl_free {
            self.ex
                .acl_check_script(self.caller, cmd, argv)
                .map_err(Reply::error)?;
        }
        // May-replicate commands count as writes here (as in Redis), so that read-only
        // scripts are read-only indeed.
        if self.read_only && (cmd.is_write() || cmd.flags & flags::MAY_REPLICATE != 0) {
            return Err(Reply::err(
                "ERR Write commands are not allowed from read-only scripts.",
            ));
        }
        // Once the script has written, it cannot fail half-way on the server's state.
        if cmd.is_write() && !self.wrote {
            if let Some(e) = crate::replication::readonly_error(self.ex, self.slot, cmd, argv) {
                return Err(Reply::err(e));
            }
            if let Some(e) = crate::persistence::disk_error(self.ex) {
                return Err(Reply::error(crate::persistence::disk_error_message(e)));
            }
            if !crate::replication::enough_good_replicas(self.ex) {
                return Err(Reply::err(crate::replication::NOREPLICAS));
            }
        }
        // Over maxmemory when the script was admitted: its first command that may grow
        // memory is refused; once it has written, it cannot stop half-way.
        if cmd.flags & flags::DENYOOM != 0
            && !self.wrote
            && !self.spec.allow_oom
            && self.ex.pre_command_oom
        {
            return Err(Reply::err(OOM));
        }
        // A script let in on a stale replica (`allow-stale`, or EVAL without a
        // shebang) still runs only the commands allowed there.
        if cmd.flags & flags::STALE == 0 && crate::replication::refusing_stale(self.ex) {
            return Err(Reply::err(
                "ERR Can not execute the command on a stale replica",
            ));
        }
        Ok(())
    }
}

impl CallCtx<'_> {
    /// What `redis.call` / `redis.pcall` do once the arguments are bytes: the checks a
    /// script's command goes through, then the command. Refusals are error replies.
    /// `redis.acl_check_cmd`: whether the script's caller's user may run `argv`
    /// (`Reply::Bool`); an error when no command has that name.
    fn acl_check_cmd(&mut self, argv: &[&[u8]]) -> Reply {
        let found = commands::lookup(argv[0]).and_then(|c| {
            if c.subcommands.is_empty() || argv.len() < 2 {
                Some(c)
            } else {
                commands::lookup_subcommand(c, argv[1])
            }
        });
        match found {
            Some(cmd) => Reply::Bool(self.ex.acl_check(self.caller, cmd, argv).is_ok()),
            None => Reply::err("ERR Invalid command passed to redis.acl_check_cmd()"),
        }
    }

    fn call_command(&mut self, argv: &[&[u8]]) -> Reply {
        // Set back by the command running (the debugger shows refusals apart).
        self.refused = true;
        let cmd = match resolve(argv) {
            Ok(c) => c,
            Err((known, e)) => return self.ex.reject(known, Reply::err(e)),
        };
        if let Err(e) = self.check_command(cmd, argv) {
            // Refused before it ran: counted as Redis's scriptCall counts it.
            return self.ex.reject(Some(cmd), e);
        }
        // Cluster mode: only local keys, of one slot unless the script allows more.
        if self.ex.cluster.is_some() {
            match crate::cluster::routing::script_command_check(self.ex, self.caller, cmd, argv) {
                Err(e) => return Reply::error(e),
                Ok(Some(s)) if !self.spec.cross_slot => {
                    match self.cluster_slot {
                        None => self.cluster_slot = Some(s),
                        Some(first) if first != s => return Reply::err(
                            "ERR Script attempted to access keys that do not hash to the same slot",
                        ),
                        Some(_) => {}
                    }
                }
                Ok(_) => {}
            }
        }
        if cmd.is_write() {
            self.wrote = true;
        }
        self.ex.client_mut(self.slot).proto = self.resp.get();
        // REPL_AOF (1) and REPL_REPLICA (2) are the targets kept: skip the others.
        self.ex.stream.script_skip = !self.repl.get() & 3;
        self.refused = false;
        self.ex.call(self.slot, cmd, argv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The VM's `redis.call` outside a run: an error, not a dangling context (the
    /// scripts' pcall hands back its message); the watchdog's step reports "not
    /// killed". (Every EVAL test exercises the slot while set.)
    #[test]
    fn call_hooks_without_a_run() {
        let vm = Vm::new().unwrap();
        assert!(vm.calls.ctx.get().is_none());
        let f = vm
            .lua
            .load(
                "local r = ... \
                 local ok1, e1 = pcall(r.call, 'ping') \
                 local ok2, e2 = pcall(r.pcall, 'ping') \
                 return {ok1, e1, ok2, e2}",
            )
            .into_function()
            .unwrap();
        let (ok1, e1, ok2, e2): (bool, String, bool, String) = f
            .call::<mlua::Table>(vm.redis.clone())
            .and_then(|t| Ok((t.get(1)?, t.get(2)?, t.get(3)?, t.get(4)?)))
            .unwrap();
        assert!(!ok1 && !ok2);
        assert!(e1.contains("only available while a script runs"), "{e1}");
        assert_eq!(e1, e2);
        let pcall: mlua::Function = vm.redis.raw_get("pcall").unwrap();
        let step = mlua::Value::LightUserData(mlua::LightUserData(
            busy::step_mark_ptr() as *mut std::ffi::c_void
        ));
        assert!(!pcall.call::<bool>(step).unwrap());
    }

    #[test]
    fn format_g_matches_c() {
        assert_eq!(format_g(1.0 / 3.0, 14), "0.33333333333333");
        assert_eq!(format_g(1.0 / 7.0, 14), "0.14285714285714");
        assert_eq!(format_g(1e300, 14), "1e+300");
        assert_eq!(format_g(1e14, 14), "1e+14");
        assert_eq!(format_g(123.0, 14), "123");
        assert_eq!(format_g(0.0001, 14), "0.0001");
        assert_eq!(format_g(0.00001, 14), "1e-05");
        assert_eq!(format_g(-2.5, 14), "-2.5");
    }

    #[test]
    fn shebang_rules() {
        assert_eq!(parse_shebang(b"return 1").unwrap().0, sflags::EVAL_COMPAT);
        assert_eq!(
            parse_shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1").unwrap(),
            (sflags::NO_WRITES | sflags::ALLOW_OOM, 31)
        );
        assert_eq!(parse_shebang(b"#!lua\nx").unwrap(), (0, 5));
        assert!(parse_shebang(b"#!lua").is_err());
        assert!(parse_shebang(b"#!luax\n").is_err());
        assert!(parse_shebang(b"#!lua name=x\n").is_err());
    }

    #[test]
    fn rand48_matches_libc_lrand48() {
        // glibc: srand48(0); lrand48() x3.
        let r = vm::Rand48::new(0);
        assert_eq!(
            [r.next(), r.next(), r.next()],
            [366850414, 1610402240, 206956554]
        );
    }
}
