//! Redis Functions: libraries loaded with FUNCTION LOAD, their registered functions,
//! and the Lua VM they live in (a VM of their own, as in Redis, separate from EVAL's).
//!
//! Library code runs once at load time in a restricted environment: its `redis` table
//! has only `register_function`, `log`, the `LOG_*` constants and the version fields
//! (anything else is "Script attempted to access nonexistent global variable").
//! Redis switches the `__index` of the function VM's globals between that loading API
//! and the full runtime API; `functions.lua` does the same with a mode flag, so a
//! helper defined at library top level sees the full `redis` table when it runs
//! inside FCALL.
//!
//! Libraries and functions are kept in sorted maps: FUNCTION LIST then lists them by
//! name (Redis lists them in hash order, which no client can rely on).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use mlua::{Function, MultiValue, Value};

use super::{sflags, vm, Vm};
use crate::exec::Executor;
use crate::protocol::Reply;

/// One registered function.
pub struct FunctionDef {
    pub name: String,
    /// The callback in the VM's registry, where the raw run path finds it (raw.rs).
    pub key: mlua::RegistryKey,
    pub flags: u32,
    pub description: Option<Vec<u8>>,
}

pub struct Library {
    pub name: String,
    pub code: Vec<u8>,
    pub functions: BTreeMap<String, FunctionDef>,
}

/// The functions VM and its libraries.
pub struct Functions {
    pub vm: Vm,
    pub libraries: BTreeMap<String, Library>,
    /// Function name, ASCII-lowercased → (library name, the name as registered).
    /// Function names are global and, as in Redis, case-insensitive (FCALL, clashes);
    /// within a library they keep their case.
    pub index: BTreeMap<String, (String, String)>,
    /// `set_mode(true)` switches globals to the loading API, `false` back.
    set_mode: Function,
    /// The functions registered by the library being loaded.
    pending: Rc<RefCell<Vec<FunctionDef>>>,
    /// True while library code runs (`redis.register_function` works only then).
    loading: Rc<Cell<bool>>,
    /// Libraries loaded since the last GC step (see `gc_after_load`).
    loads: u32,
}

/// Every this many loads, the VM's collector takes a step (Redis's luaGC): a load
/// leaves its compiled chunk behind as garbage, and without allocation pressure from
/// scripts the incremental collector would fall behind a stream of loads.
pub const GC_CYCLE_PERIOD: u32 = 50;

/// The size of that step. Redis steps by the period itself (50); a load here leaves
/// more garbage (mlua's call machinery), and at 50 a stream of 50,000 loads ended with
/// 2.6 MB of garbage over 12.8 MB live; at 200 it ends with 0.7 MB.
const LOAD_GC_STEP: i32 = 200;

/// Redis's `functionsVerifyName`: letters, digits and underscores, not empty.
fn valid_name(n: &str) -> bool {
    !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// How long library code may run at load time.
const LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

const BAD_LIB_NAME: &str = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// Parses the `#!lua name=<lib>` first line: the library name. The line is split as
/// Redis splits it (sdssplitargs: quotes allowed, `name="foo"` is `name=foo`).
pub fn parse_metadata(code: &[u8]) -> Result<String, Reply> {
    if !code.starts_with(b"#!") {
        return Err(Reply::err("ERR Missing library metadata"));
    }
    let Some(nl) = memchr::memchr(b'\n', code) else {
        return Err(Reply::err("ERR Invalid library metadata"));
    };
    let parts = match crate::protocol::parser::split_args(&code[..nl]) {
        Some(p) if !p.is_empty() => p,
        _ => return Err(Reply::err("ERR Invalid library metadata")),
    };
    let engine = String::from_utf8_lossy(&parts[0][2.min(parts[0].len())..]).into_owned();
    let mut name: Option<String> = None;
    for p in &parts[1..] {
        if p.len() >= 5 && p[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(Reply::err(
                    "ERR Invalid metadata value, name argument was given multiple times",
                ));
            }
            name = Some(String::from_utf8_lossy(&p[5..]).into_owned());
            continue;
        }
        return Err(Reply::error(format!(
            "ERR Invalid metadata value given: {}",
            String::from_utf8_lossy(p)
        )));
    }
    let Some(name) = name else {
        return Err(Reply::err("ERR Library name was not given"));
    };
    if !valid_name(&name) {
        return Err(Reply::error(format!("ERR {BAD_LIB_NAME}")));
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(Reply::error(format!("ERR Engine '{engine}' not found")));
    }
    Ok(name)
}

/// `redis.register_function`'s arguments: positional `(name, callback)` or one table
/// of named arguments.
fn read_registration(lua: &mlua::Lua, args: MultiValue) -> Result<FunctionDef, &'static str> {
    let key = |f: &Function| {
        lua.create_registry_value(f)
            .map_err(|_| "ERR not enough memory")
    };
    let name_of = |v: &Value| vm::to_bytes(v).map(|b| String::from_utf8_lossy(&b).into_owned());
    match args.len() {
        2 => {
            let name = name_of(&args[0])
                .ok_or("ERR first argument to redis.register_function must be a string")?;
            let Value::Function(f) = &args[1] else {
                return Err("ERR second argument to redis.register_function must be a function");
            };
            Ok(FunctionDef {
                name,
                key: key(f)?,
                flags: 0,
                description: None,
            })
        }
        1 => {
            let Value::Table(t) = &args[0] else {
                return Err("ERR calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).");
            };
            let (mut name, mut func, mut flags, mut description) = (None, None, 0, None);
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, v) = pair.map_err(|_| {
                    "ERR named argument key given to redis.register_function is not a string"
                })?;
                let Value::String(k) = k else {
                    return Err(
                        "ERR named argument key given to redis.register_function is not a string",
                    );
                };
                match &*k.to_string_lossy() {
                    "function_name" => {
                        name = Some(name_of(&v).ok_or(
                            "ERR function_name argument given to redis.register_function must be a string",
                        )?)
                    }
                    "description" => {
                        description = Some(vm::to_bytes(&v).ok_or(
                            "ERR description argument given to redis.register_function must be a string",
                        )?);
                    }
                    "callback" => {
                        let Value::Function(f) = v else {
                            return Err("ERR callback argument given to redis.register_function must be a function");
                        };
                        func = Some(f);
                    }
                    "flags" => {
                        let Value::Table(ft) = v else {
                            return Err("ERR flags argument to redis.register_function must be a table representing function flags");
                        };
                        for f in ft.sequence_values::<Value>() {
                            let Ok(Value::String(f)) = f else {
                                return Err("ERR unknown flag given");
                            };
                            let f = f.to_string_lossy();
                            match sflags::NAMES.iter().find(|(n, _)| *n == f) {
                                Some((_, bit)) => flags |= bit,
                                None => return Err("ERR unknown flag given"),
                            }
                        }
                    }
                    _ => return Err("ERR unknown argument given to redis.register_function"),
                }
            }
            Ok(FunctionDef {
                name: name
                    .ok_or("ERR redis.register_function must get a function name argument")?,
                key: key(&func.ok_or("ERR redis.register_function must get a callback argument")?)?,
                flags,
                description,
            })
        }
        _ => Err("ERR wrong number of arguments to redis.register_function"),
    }
}

impl Functions {
    pub fn new() -> mlua::Result<Functions> {
        let vm = Vm::new()?;
        let pending: Rc<RefCell<Vec<FunctionDef>>> = Rc::new(RefCell::new(Vec::new()));
        let p = pending.clone();
        let loading = Rc::new(Cell::new(false));
        let during_load = loading.clone();
        let register = vm.lua.create_function(move |lua, args: MultiValue| {
            // A library can keep the loading API and call it from a function later.
            if !during_load.get() {
                return Err(vm::raise(
                    "ERR redis.register_function can only be called on FUNCTION LOAD command",
                ));
            }
            let def = match read_registration(lua, args) {
                Ok(d) => d,
                Err(e) => return Err(vm::raise(e)),
            };
            if !valid_name(&def.name) {
                // Redis reports invalid function names with the library-name message.
                return Err(vm::raise(&format!("ERR {BAD_LIB_NAME}")));
            }
            let mut p = p.borrow_mut();
            if p.iter().any(|d| d.name == def.name) {
                return Err(vm::raise("ERR Function already exists in the library"));
            }
            p.push(def);
            Ok(())
        })?;
        let set_mode: Function = vm
            .lua
            .load(include_str!("functions.lua"))
            .set_name("=redis_init")
            .call((
                register,
                vm.redis.clone(),
                vm.protect.clone(),
                vm.set_globals_index.clone(),
                vm.missing_global.clone(),
            ))?;
        Ok(Functions {
            vm,
            libraries: BTreeMap::new(),
            index: BTreeMap::new(),
            set_mode,
            pending,
            loading,
            loads: 0,
        })
    }

    /// FUNCTION LOAD [REPLACE]: compiles and runs the library code, then installs its
    /// functions. Returns the library name.
    pub fn load(&mut self, code: &[u8], replace: bool) -> Result<String, Reply> {
        let name = parse_metadata(code)?;
        if !replace && self.libraries.contains_key(&name) {
            return Err(Reply::error(format!("ERR Library '{name}' already exists")));
        }
        // The metadata line is not Lua; its newline is kept so line numbers stay right.
        let body = &code[memchr::memchr(b'\n', code).unwrap_or(0)..];
        let chunk = self
            .vm
            .compile(body, "@user_function")
            .map_err(|m| Reply::error(format!("ERR Error compiling function: {m}")))?;
        self.pending.borrow_mut().clear();
        let _ = self.set_mode.call::<()>(true);
        self.loading.set(true);
        // Library code gets 500 ms, as in Redis (a load that loops must not hang the server).
        let start = std::time::Instant::now();
        let _ = self.vm.lua.set_hook(
            mlua::HookTriggers::new().every_nth_instruction(100_000),
            move |_, _| {
                if start.elapsed() > LOAD_TIMEOUT {
                    return Err(vm::raise("ERR FUNCTION LOAD timeout"));
                }
                Ok(mlua::VmState::Continue)
            },
        );
        let run = vm::run_protected(&self.vm, &chunk);
        // Back to the busy-script watchdog the load hook replaced.
        self.vm.lua.remove_hook();
        let _ = super::busy::install(
            &self.vm.lua,
            &self.vm.watchdog,
            &self.vm.redis,
            mlua::HookTriggers::new().every_nth_instruction(super::busy::CHECK_EVERY),
        );
        self.loading.set(false);
        let _ = self.set_mode.call::<()>(false);
        drop(chunk);
        self.loads += 1;
        if self.loads >= GC_CYCLE_PERIOD {
            self.loads = 0;
            let _ = super::raw::gc_step(&self.vm.lua, LOAD_GC_STEP);
        }
        let defs = std::mem::take(&mut *self.pending.borrow_mut());
        if let Err(e) = run {
            let msg = match &e {
                Value::Table(t) => t
                    .raw_get::<mlua::LuaString>("err")
                    .map(|s| s.to_string_lossy())
                    .unwrap_or_else(|_| "ERR unknown error".into()),
                Value::String(s) => s.to_string_lossy(),
                _ => "ERR unknown error".into(),
            };
            return Err(Reply::error(format!(
                "ERR Error registering functions: {msg}"
            )));
        }
        if defs.is_empty() {
            return Err(Reply::err("ERR No functions registered"));
        }
        for d in &defs {
            if let Some((owner, _)) = self.index.get(&d.name.to_ascii_lowercase()) {
                if *owner != name {
                    return Err(Reply::error(format!(
                        "ERR Function {} already exists",
                        d.name
                    )));
                }
            }
        }
        self.delete(&name);
        let lib = Library {
            name: name.clone(),
            code: code.to_vec(),
            functions: defs.into_iter().map(|d| (d.name.clone(), d)).collect(),
        };
        for f in lib.functions.keys() {
            self.index
                .insert(f.to_ascii_lowercase(), (name.clone(), f.clone()));
        }
        self.libraries.insert(name.clone(), lib);
        Ok(name)
    }

    /// Removes a library and its functions; false if there was none.
    pub fn delete(&mut self, name: &str) -> bool {
        let Some(lib) = self.libraries.remove(name) else {
            return false;
        };
        for f in lib.functions.keys() {
            self.index.remove(&f.to_ascii_lowercase());
        }
        true
    }

    /// The function called `name`, in any case.
    pub fn function(&self, name: &str) -> Option<&FunctionDef> {
        let (lib, registered) = self.index.get(&name.to_ascii_lowercase())?;
        self.libraries.get(lib)?.functions.get(registered)
    }

    pub fn function_count(&self) -> usize {
        self.index.len()
    }
}

impl super::Engine {
    /// The functions part of the engine, created on first use.
    pub fn functions_mut(&mut self) -> &mut Functions {
        self.functions
            .get_or_insert_with(|| Box::new(Functions::new().expect("Lua VM initialisation")))
    }
}

/// The libraries' source code in name order: what RDB files hold (Redis's
/// `rdbSaveFunctions` writes each as opcode 245 and an RDB string).
pub fn library_codes(ex: &Executor) -> Vec<Vec<u8>> {
    ex.scripting
        .as_ref()
        .and_then(|e| e.functions.as_ref())
        .map(|f| f.libraries.values().map(|l| l.code.clone()).collect())
        .unwrap_or_default()
}

/// Deletes every library: FUNCTION FLUSH, and what emptying the whole dataset does
/// before a full sync or DEBUG RELOAD loads an image (Redis's `emptyData`).
pub fn flush_libraries(ex: &mut Executor) {
    if let Some(e) = ex.scripting.as_mut() {
        e.functions = None;
    }
}

/// Creates libraries read from an RDB file, in file order (Redis's
/// `rdbFunctionLoad`): one that exists already is an error unless `replace` (DEBUG
/// RELOAD MERGE). The error is Redis's text without its `ERR ` prefix.
pub fn load_libraries(ex: &mut Executor, codes: &[Vec<u8>], replace: bool) -> Result<(), String> {
    if codes.is_empty() {
        return Ok(());
    }
    let mut engine = super::Engine::take(ex);
    let mut result = Ok(());
    for code in codes {
        if let Err(e) = engine.functions_mut().load(code, replace) {
            let msg = match e {
                Reply::Error(m) => m.strip_prefix("ERR ").unwrap_or(&m).to_string(),
                _ => "Failed creating the library".to_string(),
            };
            result = Err(msg);
            break;
        }
    }
    super::Engine::put_back(ex, engine);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream of loads leaves its garbage to the collector's periodic steps; they
    /// must keep up (Redis's suite bounds the VM at 14.5 MB after these 50,000 loads).
    #[test]
    fn garbage_of_many_loads_is_collected() {
        let mut f = Functions::new().unwrap();
        for i in 0..50_000 {
            let code = format!(
                "#!lua name=test{i}\nredis.register_function('test{i}', function(KEYS, ARGV)\n --xxxxxxxxxx\nreturn {i:06} \nend)"
            );
            f.load(code.as_bytes(), false).unwrap();
        }
        let used = f.vm.lua.used_memory();
        assert!(used < 14_500_000, "{used}");
    }
}
