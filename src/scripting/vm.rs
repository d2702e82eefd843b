//! One sandboxed Lua 5.1 VM as Redis sets it up: only Redis's globals (`base` minus
//! the file and environment functions, `table`, `string`, `math`, `coroutine`, and the
//! `redis`, `cjson`, `bit`, `cmsgpack` and `struct` libraries), every library table
//! and the global table readonly, nonexistent globals an error, bytecode never loaded,
//! `os` reduced to `os.clock`, and Redis's own `math.random` generator.
//!
//! Stock Lua 5.1 has no readonly tables (Redis patches its Lua for them), so scripts see
//! proxies: `sandbox.lua` builds them and wraps the few raw functions (`rawset`,
//! `setmetatable`, `table.insert`, ...) that could write through a proxy.
//!
//! Everything is created once here, `redis.call` included: it finds the running
//! command's context through the VM's `calls` slot (`scripting::CallSlot`).

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use mlua::{chunk::ChunkMode, Function, Lua, LuaOptions, StdLib, Table, Value, Variadic};

use super::libs;

/// Lua heap limit: bounds `string.rep` and table bombs (Redis has none; we prefer an
/// error to exhausting the machine).
pub const MEMORY_LIMIT: usize = 256 * 1024 * 1024;

/// The version scripts see in `redis.REDIS_VERSION`.
pub const REDIS_VERSION: &str = "7.4.0";
pub const REDIS_VERSION_NUM: i64 = 0x07_04_00;

pub struct Vm {
    pub lua: Lua,
    /// The real global table (scripts see the readonly `globals` view of it).
    pub real_g: Table,
    pub globals: Table,
    /// The real `redis` table (scripts see a readonly proxy of it).
    pub redis: Table,
    /// `function(f, handler)`: xpcall without arguments (EVAL).
    pub run: Function,
    /// Makes a readonly view of a table.
    pub protect: Function,
    /// `set_globals_index(t)`: global lookups go to table `t` (which raises on a
    /// missing name itself), or back to the real globals with nil.
    pub set_globals_index: Function,
    /// The `__index` function that raises Redis's missing-global error.
    pub missing_global: Function,
    /// The error handler that turns any error into Redis's error table.
    pub handler: Function,
    /// The handler's registry reference (`handler_key.id()`), for raw.rs.
    pub handler_ref: std::ffi::c_int,
    pub handler_key: mlua::RegistryKey,
    /// The VM's main thread, for the raw C API path (raw.rs); valid while `lua` is.
    pub state: *mut mlua::ffi::lua_State,
    /// The RESP version scripts asked for with `redis.setresp`.
    pub resp: Rc<Cell<u8>>,
    /// Where the run's commands go, as `redis.set_repl` last said (REPL_* values).
    pub repl: Rc<Cell<u8>>,
    /// The busy-script watchdog behind the VM's instruction-count hook (busy.rs).
    pub watchdog: Rc<super::busy::Watchdog>,
    /// The run in progress, for `redis.call` / `redis.pcall`.
    pub calls: Rc<super::CallSlot>,
    /// Runs since the last garbage-collection step (`scripting::run`).
    pub runs_since_gc: Cell<u32>,
}

/// Redis's `rand.c`: the 48-bit linear congruential generator of `lrand48`, so
/// `math.random` gives the same sequence as Redis.
pub struct Rand48 {
    x: AtomicU64,
}

/// `rand.c`'s initial state (before any `math.randomseed`).
const RAND48_INITIAL: u64 = 0x1234_ABCD_330E;

/// The one generator behind every VM's `math.random`, as Redis's is process-wide:
/// never reseeded between scripts (replication carries effects, not scripts, so
/// scripts may be random), kept across SCRIPT FLUSH and shared with functions.
pub static SCRIPT_RNG: Rand48 = Rand48 {
    x: AtomicU64::new(RAND48_INITIAL),
};

impl Rand48 {
    pub fn new(seed: i32) -> Rand48 {
        let r = Rand48 {
            x: AtomicU64::new(RAND48_INITIAL),
        };
        r.seed(seed);
        r
    }

    pub fn seed(&self, seed: i32) {
        let s = seed as u32 as u64;
        self.x.store(0x330E | (s << 16), Ordering::Relaxed);
    }

    /// A value in `0..2^31`.
    pub fn next(&self) -> i32 {
        let x = self
            .x
            .load(Ordering::Relaxed)
            .wrapping_mul(0x5_DEEC_E66D)
            .wrapping_add(0xB)
            & ((1 << 48) - 1);
        self.x.store(x, Ordering::Relaxed);
        (x >> 17) as i32
    }
}

fn lua_err(msg: &str) -> mlua::Error {
    mlua::Error::RuntimeError(msg.to_string())
}

impl Vm {
    pub fn new() -> mlua::Result<Vm> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::OS,
            LuaOptions::default(),
        )?;
        let real_g = lua.globals();
        // Of `os`, scripts get `os.clock` only (Redis's sandboxed os library): the
        // others reach the environment, the file system or the process.
        let os: Table = real_g.raw_get("os")?;
        let sandboxed_os = lua.create_table()?;
        sandboxed_os.raw_set("clock", os.raw_get::<Function>("clock")?)?;
        real_g.raw_set("os", sandboxed_os)?;
        for name in [
            "print", "dofile", "loadfile", "getfenv", "setfenv", "module", "require", "newproxy",
            "debug", "package", "io",
        ] {
            real_g.raw_set(name, Value::Nil)?;
        }
        let resp = Rc::new(Cell::new(2u8));
        let repl = Rc::new(Cell::new(REPL_ALL));
        super::patched::install(&lua, &real_g)?;
        install_math_random(&lua, &real_g)?;
        real_g.raw_set("redis", redis_table(&lua)?)?;
        real_g.raw_set("cjson", libs::cjson::open(&lua)?)?;
        real_g.raw_set("bit", libs::bit::open(&lua)?)?;
        real_g.raw_set("cmsgpack", libs::cmsgpack::open(&lua)?)?;
        real_g.raw_set("struct", libs::structlib::open(&lua)?)?;

        let redis: Table = real_g.get("redis")?;
        install_static_hooks(&lua, &redis, resp.clone(), repl.clone())?;
        super::ldb::install(&lua, &redis)?;
        let calls = Rc::new(super::CallSlot::default());
        super::install_call_hooks(&lua, &redis, &calls)?;
        let (globals, run, protect, set_globals_index, missing_global): (
            Table,
            Function,
            Function,
            Function,
            Function,
        ) = lua
            .load(include_str!("sandbox.lua"))
            .set_name("=redis_init")
            .call(real_g.clone())?;
        let handler = error_handler(&lua, &real_g)?;
        let handler_key = lua.create_registry_value(&handler)?;
        let state = super::raw::main_state(&lua)?;
        // Start without the set-up's garbage (the unused `os` functions, the sandbox
        // chunk): a fresh VM's memory is what INFO reports after SCRIPT FLUSH.
        lua.gc_collect()?;
        lua.set_memory_limit(MEMORY_LIMIT)?;
        let watchdog = Rc::new(super::busy::Watchdog::default());
        super::busy::install(
            &lua,
            &watchdog,
            &redis,
            mlua::HookTriggers::new().every_nth_instruction(super::busy::CHECK_EVERY),
        )?;
        Ok(Vm {
            calls,
            runs_since_gc: Cell::new(0),
            watchdog,
            redis,
            lua,
            real_g,
            globals,
            run,
            protect,
            set_globals_index,
            missing_global,
            handler,
            handler_ref: handler_key.id(),
            handler_key,
            state,
            resp,
            repl,
        })
    }

    /// Compiles a script body (text only) with the sandboxed globals as environment.
    pub fn compile(&self, body: &[u8], name: &str) -> Result<Function, String> {
        self.lua
            .load(body)
            .set_name(name)
            .set_mode(ChunkMode::Text)
            .set_environment(self.globals.clone())
            .into_function()
            .map_err(|e| match e {
                mlua::Error::SyntaxError { message, .. } => message,
                mlua::Error::MemoryError(m) => m,
                other => other.to_string(),
            })
    }
}

/// `math.random` / `math.randomseed` on Redis's generator.
fn install_math_random(lua: &Lua, g: &Table) -> mlua::Result<()> {
    let math: Table = g.get("math")?;
    let r = &SCRIPT_RNG;
    math.raw_set(
        "random",
        lua.create_function(move |_, args: Variadic<Value>| {
            let v = r.next();
            let max = i32::MAX;
            let x = (v % max) as f64 / max as f64;
            let num = |v: &Value, i: usize| -> mlua::Result<f64> {
                match v {
                    Value::Integer(n) => Ok(*n as f64),
                    Value::Number(n) => Ok(*n),
                    Value::String(s) => s
                        .to_str()
                        .ok()
                        .and_then(|s| s.trim().parse::<f64>().ok())
                        .ok_or_else(|| {
                            lua_err(&format!("bad argument #{i} to 'random' (number expected)"))
                        }),
                    _ => Err(lua_err(&format!(
                        "bad argument #{i} to 'random' (number expected, got {})",
                        v.type_name()
                    ))),
                }
            };
            match args.len() {
                0 => Ok(x),
                1 => {
                    let u = num(&args[0], 1)?.trunc();
                    if u < 1.0 {
                        return Err(lua_err("bad argument #1 to 'random' (interval is empty)"));
                    }
                    Ok((x * u).floor() + 1.0)
                }
                2 => {
                    let l = num(&args[0], 1)?.trunc();
                    let u = num(&args[1], 2)?.trunc();
                    if l > u {
                        return Err(lua_err("bad argument #2 to 'random' (interval is empty)"));
                    }
                    Ok((x * (u - l + 1.0)).floor() + l)
                }
                _ => Err(lua_err("wrong number of arguments")),
            }
        })?,
    )?;
    math.raw_set(
        "randomseed",
        lua.create_function(move |_, seed: f64| {
            SCRIPT_RNG.seed(seed as i64 as i32);
            Ok(())
        })?,
    )?;
    Ok(())
}

/// The static part of the `redis` table (constants); functions are added by
/// `install_static_hooks`, `sandbox.lua` and each run.
fn redis_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("REDIS_VERSION", REDIS_VERSION)?;
    t.raw_set("REDIS_VERSION_NUM", REDIS_VERSION_NUM)?;
    for (k, v) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", REPL_ALL as i64),
    ] {
        t.raw_set(k, v)?;
    }
    Ok(t)
}

/// Lifts the VM's memory limit until dropped. While a limit is set, mlua wraps every
/// table and string operation made from Rust in a protected call (which allocates and
/// drives the GC); without one it calls Lua directly. Values built from Rust whose size
/// the server already bounds (KEYS and ARGV, command replies) are built unlimited: the
/// limit is for what scripts allocate.
pub struct Unlimited<'a>(&'a Lua);

impl Unlimited<'_> {
    pub fn new(lua: &Lua) -> Unlimited<'_> {
        let _ = lua.set_memory_limit(0);
        Unlimited(lua)
    }
}

impl Drop for Unlimited<'_> {
    fn drop(&mut self) {
        let _ = self.0.set_memory_limit(MEMORY_LIMIT);
    }
}

/// An error table `{err = msg}` as `redis.pcall`'s failure value.
pub fn err_table(lua: &Lua, msg: &str) -> mlua::Result<(bool, Value)> {
    let t = lua.create_table()?;
    t.raw_set("err", msg)?;
    Ok((false, Value::Table(t)))
}

/// Marks a Rust error as carrying a Redis error reply (the handler turns it into
/// `{err = msg}` rather than `ERR <message>`).
const REPLY_MARK: char = '\u{1}';

/// Raises Redis error `msg` from a Rust library function. Raising from Rust (not from a
/// Lua wrapper) keeps the calling script's frame on the stack even for
/// `return redis.call(...)`, so the error's line is the script's.
pub fn raise(msg: &str) -> mlua::Error {
    mlua::Error::RuntimeError(format!("{REPLY_MARK}{msg}"))
}

/// Marks a library error whose message gets the script's `source:line: ` prefix.
const POSITION_MARK: char = '\u{2}';

/// Raises a library error (`luaL_error` style: prefixed with the caller's position).
pub fn raise_positioned(msg: &str) -> mlua::Error {
    mlua::Error::RuntimeError(format!("{POSITION_MARK}{msg}"))
}

/// `(ok, value)` of a hook turned into a value or a raised error.
pub fn raising(r: mlua::Result<(bool, Value)>) -> mlua::Result<Value> {
    match r? {
        (true, v) => Ok(v),
        (false, Value::Table(t)) => {
            let m: mlua::LuaString = t.raw_get("err")?;
            Err(raise(&m.to_string_lossy()))
        }
        (false, _) => Err(raise("ERR unknown error")),
    }
}

/// The innermost message of an error raised by Rust code.
fn root_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => root_message(cause),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::MemoryError(m) => m.clone(),
        other => other.to_string(),
    }
}

/// Lua's `lua_tolstring` on a value: strings as they are, numbers formatted, others None.
pub fn to_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(n) => Some(n.to_string().into_bytes()),
        Value::Number(n) => Some(lua_number_string(*n).into_bytes()),
        _ => None,
    }
}

/// Lua 5.1's `%.14g` number formatting (`tostring(1/3)` = `0.33333333333333`).
pub fn lua_number_string(n: f64) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf" } else { "-inf" }.into();
    }
    super::format_g(n, 14)
}

fn raising_fn<F>(lua: &Lua, f: F) -> mlua::Result<Function>
where
    F: Fn(&Lua, Variadic<Value>) -> mlua::Result<(bool, Value)> + 'static,
{
    lua.create_function(move |lua, a: Variadic<Value>| raising(f(lua, a)))
}

/// `redis.REPL_ALL`: a run's commands go to the AOF and to replicas.
pub const REPL_ALL: u8 = 3;

fn install_static_hooks(
    lua: &Lua,
    redis: &Table,
    resp: Rc<Cell<u8>>,
    repl: Rc<Cell<u8>>,
) -> mlua::Result<()> {
    redis.raw_set(
        "setresp",
        raising_fn(lua, move |lua, args: Variadic<Value>| {
            if args.len() != 1 {
                return err_table(lua, "ERR redis.setresp() requires one argument.");
            }
            let v = match &args[0] {
                Value::Integer(n) => *n,
                Value::Number(n) => *n as i64,
                _ => 0,
            };
            if v != 2 && v != 3 {
                return err_table(lua, "ERR RESP version must be 2 or 3.");
            }
            resp.set(v as u8);
            Ok((true, Value::Nil))
        })?,
    )?;
    redis.raw_set(
        "log",
        raising_fn(lua, |lua, args: Variadic<Value>| {
            if args.len() < 2 {
                return err_table(lua, "ERR redis.log() requires two arguments or more.");
            }
            let level = match &args[0] {
                Value::Integer(n) => *n,
                Value::Number(n) => *n as i64,
                _ => return err_table(lua, "ERR First argument must be a number (log level)."),
            };
            if !(0..=3).contains(&level) {
                return err_table(lua, "ERR Invalid debug level.");
            }
            let parts: Vec<String> = args[1..]
                .iter()
                .filter_map(to_bytes)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .collect();
            let msg = parts.join(" ");
            match level {
                0 => crate::log::debug(&msg),
                1 => crate::log::verbose(&msg),
                2 => crate::log::notice(&msg),
                _ => crate::log::warning(&msg),
            }
            Ok((true, Value::Nil))
        })?,
    )?;
    redis.raw_set(
        "sha1hex",
        raising_fn(lua, |lua, args: Variadic<Value>| {
            if args.len() != 1 {
                return err_table(lua, "ERR wrong number of arguments");
            }
            let b = to_bytes(&args[0]).unwrap_or_default();
            let hex = super::sha1hex(&b);
            Ok((true, Value::String(lua.create_string(hex)?)))
        })?,
    )?;
    redis.raw_set(
        "set_repl",
        raising_fn(lua, move |lua, args: Variadic<Value>| {
            if args.len() != 1 {
                return err_table(lua, "ERR redis.set_repl() requires one argument.");
            }
            let v = match &args[0] {
                Value::Integer(n) => *n,
                Value::Number(n) => *n as i64,
                _ => -1,
            };
            if !(0..=3).contains(&v) {
                return err_table(
                    lua,
                    "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                );
            }
            repl.set(v as u8);
            Ok((true, Value::Nil))
        })?,
    )?;
    Ok(())
}

/// The error handler every script runs under (Redis's `__redis__err__handler`): any
/// error becomes a table `{err=..., source=..., line=...}`; a non-table error `e`
/// becomes `ERR <tostring(e)>`. Source and line are those of the innermost frame of user
/// code: C functions and the sandbox's own wrappers are skipped.
fn error_handler(lua: &Lua, real_g: &Table) -> mlua::Result<Function> {
    let tostring: Function = real_g.get("tostring")?;
    lua.create_function(move |lua, err: Value| {
        let mut positioned = None;
        let t = match err {
            Value::Table(t) => t,
            Value::Error(e) => {
                let m = root_message(&e);
                let t = lua.create_table()?;
                if let Some(reply) = m.strip_prefix(REPLY_MARK) {
                    t.raw_set("err", reply)?;
                } else if let Some(msg) = m.strip_prefix(POSITION_MARK) {
                    positioned = Some(msg.to_string());
                } else {
                    t.raw_set("err", format!("ERR {m}"))?;
                }
                t
            }
            other => {
                let s: mlua::LuaString = tostring.call(other)?;
                let t = lua.create_table()?;
                let mut msg = b"ERR ".to_vec();
                msg.extend_from_slice(&s.as_bytes());
                t.raw_set("err", lua.create_string(&msg)?)?;
                t
            }
        };
        for level in 1..64 {
            let Some(found) = lua.inspect_stack(level, |d| {
                let src = d.source();
                if src.what == "C" {
                    return None;
                }
                let name = src.source.as_deref().unwrap_or("").to_string();
                if name == "=redis_init" {
                    return None;
                }
                Some((name, d.current_line()))
            }) else {
                break;
            };
            if let Some((source, line)) = found {
                if let Some(msg) = positioned.take() {
                    let short = source.trim_start_matches(['@', '=']);
                    let at = line.map(|l| format!("{short}:{l}: ")).unwrap_or_default();
                    t.raw_set("err", format!("ERR {at}{msg}"))?;
                }
                t.raw_set("source", source)?;
                if let Some(l) = line {
                    t.raw_set("line", l as i64)?;
                }
                break;
            }
        }
        if let Some(msg) = positioned {
            t.raw_set("err", format!("ERR {msg}"))?;
        }
        Ok(t)
    })
}

/// Runs a compiled function under the error handler: `Ok(value)` or `Err(error table
/// or message)`. (Library loading; scripts run through raw.rs.)
pub fn run_protected(vm: &Vm, f: &Function) -> Result<Value, Value> {
    let res: mlua::Result<(Value, Value)> = vm.run.call((f, &vm.handler));
    match res {
        Ok((ok, v)) => {
            let ok = matches!(ok, Value::Boolean(true));
            if ok {
                Ok(v)
            } else {
                Err(v)
            }
        }
        Err(e) => {
            let msg = match e {
                mlua::Error::MemoryError(m) => m,
                other => other.to_string(),
            };
            Err(Value::String(
                vm.lua
                    .create_string(format!("ERR {msg}"))
                    .map_err(|_| Value::Nil)?,
            ))
        }
    }
}
