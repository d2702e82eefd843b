//! The per-call hot path of scripting, written against the Lua 5.1 C API (`mlua::ffi`)
//! rather than mlua's safe handles: building KEYS/ARGV, running the script under its
//! error handler, converting its result, and `redis.call` / `redis.pcall` as plain C
//! functions that read their arguments off the Lua stack and push the reply back.
//!
//! mlua's safe API pays, per value, for a registry/ref-thread handle and (while the
//! memory limit is set) a protected call; for an EVALSHA that work cost more than the
//! script itself. Here values go straight between the stack and Rust.
//!
//! # Why the unsafe code is sound
//!
//! Two hazards come with the raw API: a Lua error is a `longjmp`, which must never
//! cross a Rust frame holding a value with a destructor, and pushes need stack space.
//!
//! * No call made here can raise, except `lua_pcall` (which catches) and the explicit
//!   `lua_error` in `call_entry`. The calls used (`lua_createtable`,
//!   `lua_pushlstring`, `lua_pushnumber`, `lua_rawseti`, `lua_rawset` with a key that
//!   is never nil or NaN, `lua_rawgeti`, `lua_next` on a key it returned,
//!   `lua_checkstack`, `lua_type`, `lua_tolstring` on strings only, `lua_tonumber`,
//!   `lua_toboolean`, `lua_touserdata`) raise only when an allocation fails. Every
//!   one of them runs with the VM's memory limit lifted (`vm::Unlimited`), and without
//!   a limit mlua's allocator never returns NULL to Lua (a failed system allocation
//!   aborts the process, as everywhere in Rust). A GC step may run a userdata `__gc`
//!   finalizer, and scripts cannot create userdata with one; mlua's own finalizers do
//!   not raise. The script itself runs with the limit set, inside `lua_pcall`.
//! * `redis.call` raises (`lua_error`) only from the thin `extern "C-unwind"` entry,
//!   after the Rust function that did the work has returned and dropped everything
//!   it owned. A panic in that work is caught there too, carried in the `CallSlot`
//!   across the Lua frames (unwinding through C is not allowed) and resumed by the
//!   run once `lua_pcall` has returned.
//! * Stack space: each function checks (`lua_checkstack`) for what it pushes.
//! * Lifetimes: the C functions reach the run through a light userdata upvalue
//!   pointing at the VM's `CallSlot`, which the Lua state itself keeps alive (app
//!   data), so it outlives every call. The registry references (scripts, the error
//!   handler) are `RegistryKey`s owned next to the VM.

use std::any::Any;
use std::ffi::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

use mlua::ffi::{self, lua_State};
use mlua::{Function, Lua};
use smallvec::SmallVec;

use super::convert::lua_number_to_i64;
use super::{busy, ldb, vm, CallCtx, CallSlot, RunSpec};
use crate::protocol::Reply;
use crate::util::numeric::{
    f64_as_exact_i64, format_f64, format_human_f64, format_i64, write_f64, write_shortest_f64,
};

/// Deepest nesting converted (Redis is bounded by the Lua C stack).
const MAX_DEPTH: usize = 1000;

/// The VM's main thread, captured once (mlua keeps it for the VM's life).
pub fn main_state(lua: &Lua) -> mlua::Result<*mut lua_State> {
    let mut state = std::ptr::null_mut();
    // SAFETY: the closure only copies the pointer out; it calls no Lua API.
    unsafe { lua.exec_raw::<()>((), |l| state = l)? };
    Ok(state)
}

/// One incremental collection step of `size` (Lua's `LUA_GCSTEP` with a size, which
/// mlua does not expose): Redis's periodic `luaGC`.
pub fn gc_step(lua: &Lua, size: c_int) -> mlua::Result<()> {
    // SAFETY: `exec_raw` runs the closure in a protected call, so an error raised by a
    // finalizer during the step is caught; the closure pushes nothing and holds
    // nothing with a destructor.
    unsafe {
        lua.exec_raw::<()>((), |l| {
            ffi::lua_gc(l, ffi::LUA_GCSTEP, size);
        })
    }
}

/// Creates the C function `f` with the VM's `CallSlot` as its upvalue.
pub fn call_function(
    lua: &Lua,
    slot: *const CallSlot,
    f: ffi::lua_CFunction,
) -> mlua::Result<Function> {
    // SAFETY: `exec_raw` runs the closure in a protected call (an allocation failure
    // here is caught) and it holds nothing with a destructor; it leaves exactly the
    // new function on the stack, which `exec_raw` returns.
    unsafe {
        lua.exec_raw((), |l| {
            ffi::lua_pushlightuserdata(l, slot as *mut c_void);
            ffi::lua_pushcclosure(l, f, 1);
        })
    }
}

#[inline]
unsafe fn push_bytes(l: *mut lua_State, b: &[u8]) {
    ffi::lua_pushlstring_(l, b.as_ptr() as *const c_char, b.len());
}

/// Pushes a string field `key = value` into the table on top of the stack.
unsafe fn set_field(l: *mut lua_State, key: &[u8], value: &[u8]) {
    push_bytes(l, key);
    push_bytes(l, value);
    ffi::lua_rawset(l, -3);
}

/// Pushes `{err = msg}`.
unsafe fn push_error_table(l: *mut lua_State, msg: &[u8]) {
    ffi::lua_createtable(l, 0, 1);
    set_field(l, b"err", msg);
}

/// The field Redis adds to the error table of a failed `redis.call`/`redis.pcall`:
/// that error is already in the error statistics, so a script that raises or
/// returns the table must not count it again.
const IGNORE_STATS_FIELD: &[u8] = b"ignore_error_stats_update";

/// Sets a boolean field `key` of the table on top of the stack.
unsafe fn set_bool_field(l: *mut lua_State, key: &[u8], value: bool) {
    push_bytes(l, key);
    ffi::lua_pushboolean(l, value as c_int);
    ffi::lua_rawset(l, -3);
}

/// Whether the table at absolute index `t` carries a true `ignore_error_stats_update`.
unsafe fn stats_already_counted(l: *mut lua_State, t: c_int) -> bool {
    let _ = raw_field(l, t, IGNORE_STATS_FIELD);
    let counted = ffi::lua_toboolean(l, -1) != 0;
    ffi::lua_pop(l, 1);
    counted
}

/// Pushes a list of strings as a Lua array. The caller lifted the memory limit and
/// checked one free slot.
unsafe fn push_list(l: *mut lua_State, items: &[&[u8]]) {
    let n = c_int::try_from(items.len()).unwrap_or(c_int::MAX);
    ffi::lua_createtable(l, n, 0);
    for (i, a) in items.iter().take(n as usize).enumerate() {
        push_bytes(l, a);
        ffi::lua_rawseti_(l, -2, i as c_int + 1);
    }
}

/// What `run_script` produced.
pub struct Outcome {
    /// The script's return value or, if it raised, the error reply in Redis's format.
    pub reply: Reply,
    /// The reply is an error that came from a command the script called and was
    /// counted in the error statistics then (Redis's `ignore_error_stats_update`).
    pub error_counted: bool,
}

impl Outcome {
    fn plain(reply: Reply) -> Outcome {
        Outcome {
            reply,
            error_counted: false,
        }
    }
}

/// Runs the function at registry reference `func` under the VM's error handler, with
/// KEYS and ARGV as globals (EVAL) or as its two arguments (FCALL), and converts the
/// result for a caller speaking `proto`. `publish` runs right before the script
/// starts and returns a guard kept for exactly the script's length (the `CallSlot`).
pub fn run_script<G>(
    vm: &vm::Vm,
    func: c_int,
    spec: &RunSpec,
    proto: u8,
    publish: impl FnOnce() -> G,
) -> Outcome {
    let l = vm.state;
    // SAFETY: see the module comment: with the limit lifted none of these calls
    // raises; the script runs inside `lua_pcall`; the stack is restored to `base`
    // before returning (the main thread's stack is not in use by mlua meanwhile: mlua
    // keeps it balanced between its own operations).
    unsafe {
        let base = ffi::lua_gettop(l);
        let nargs;
        {
            let _unlimited = vm::Unlimited::new(&vm.lua);
            if ffi::lua_checkstack(l, 6) == 0 {
                return Outcome::plain(Reply::err("ERR not enough memory"));
            }
            ffi::lua_rawgeti_(l, ffi::LUA_REGISTRYINDEX, vm.handler_ref);
            ffi::lua_rawgeti_(l, ffi::LUA_REGISTRYINDEX, func);
            if spec.as_args {
                push_list(l, spec.keys);
                push_list(l, spec.argv);
                nargs = 2;
            } else {
                // Raw sets: the real globals' metatable forbids writes by scripts.
                push_bytes(l, b"KEYS");
                push_list(l, spec.keys);
                ffi::lua_rawset(l, ffi::LUA_GLOBALSINDEX);
                push_bytes(l, b"ARGV");
                push_list(l, spec.argv);
                ffi::lua_rawset(l, ffi::LUA_GLOBALSINDEX);
                nargs = 0;
            }
        }
        let status = {
            let _published = publish();
            ffi::lua_pcall(l, nargs, 1, base + 1)
        };
        if let Some(p) = vm.calls.panic.take() {
            ffi::lua_settop(l, base);
            std::panic::resume_unwind(p);
        }
        let _unlimited = vm::Unlimited::new(&vm.lua);
        // An error table from a failed command call, raised or returned, was counted
        // when the command failed.
        let error_counted =
            ffi::lua_type(l, -1) == ffi::LUA_TTABLE && stats_already_counted(l, abs(l, -1));
        let reply = if status == 0 {
            to_reply(l, -1, proto, vm.resp.get(), 0)
        } else {
            error_reply(l, -1, spec.name)
        };
        let out = Outcome {
            error_counted: error_counted && matches!(reply, Reply::Error(_)),
            reply,
        };
        ffi::lua_settop(l, base);
        drop(_unlimited);
        // Lua 5.1 has no emergency collection: after a script near the limit (a
        // `string.rep` bomb), its garbage would make every later allocation fail,
        // compiling included, until the incremental GC caught up. Collect now.
        if vm.lua.used_memory() > vm::MEMORY_LIMIT / 2 {
            let _ = vm.lua.gc_collect();
        }
        out
    }
}

/// The bytes of the string at `idx` (which must be a string), borrowed from Lua.
unsafe fn str_at<'a>(l: *mut lua_State, idx: c_int) -> &'a [u8] {
    let mut len = 0usize;
    let p = ffi::lua_tolstring(l, idx, &mut len);
    if p.is_null() {
        return &[];
    }
    std::slice::from_raw_parts(p as *const u8, len)
}

/// `t[key]` of the table at absolute index `t`, pushed; returns its type.
unsafe fn raw_field(l: *mut lua_State, t: c_int, key: &[u8]) -> c_int {
    push_bytes(l, key);
    ffi::lua_rawget_(l, t);
    ffi::lua_type(l, -1)
}

/// Formats a script's error as Redis does: `<err> script: <name>, on <source>:<line>.`
/// The error value is at `idx`: a table from the error handler, or a message (out of
/// memory, error in the error handler) the handler never saw.
unsafe fn error_reply(l: *mut lua_State, idx: c_int, name: &str) -> Reply {
    let t = abs(l, idx);
    match ffi::lua_type(l, t) {
        ffi::LUA_TTABLE => {
            if raw_field(l, t, b"err") != ffi::LUA_TSTRING {
                return Reply::err("ERR unknown error");
            }
            let msg = String::from_utf8_lossy(str_at(l, -1)).into_owned();
            let source = match raw_field(l, t, b"source") {
                ffi::LUA_TSTRING => std::str::from_utf8(str_at(l, -1)).ok().map(str::to_string),
                _ => None,
            };
            let line = match raw_field(l, t, b"line") {
                ffi::LUA_TNUMBER => Some(ffi::lua_tonumber(l, -1) as i64),
                _ => None,
            };
            ffi::lua_pop(l, 3);
            match (source, line) {
                (Some(s), Some(n)) => Reply::error(format!("{msg} script: {name}, on {s}:{n}.")),
                _ => Reply::error(msg),
            }
        }
        ffi::LUA_TSTRING => {
            let m = String::from_utf8_lossy(str_at(l, t)).into_owned();
            if m.starts_with("ERR ") {
                Reply::error(m)
            } else {
                Reply::error(format!("ERR {m}"))
            }
        }
        _ => Reply::err("ERR unknown error"),
    }
}

unsafe fn abs(l: *mut lua_State, idx: c_int) -> c_int {
    if idx < 0 && idx > ffi::LUA_REGISTRYINDEX {
        ffi::lua_gettop(l) + idx + 1
    } else {
        idx
    }
}

/// Converts the Lua value at `idx` to a reply (convert.rs's rules, Lua → reply).
unsafe fn to_reply(l: *mut lua_State, idx: c_int, proto: u8, resp: u8, depth: usize) -> Reply {
    if depth > MAX_DEPTH {
        return Reply::err("ERR reached lua stack limit");
    }
    match ffi::lua_type(l, idx) {
        ffi::LUA_TNIL => Reply::Null,
        ffi::LUA_TBOOLEAN => {
            let b = ffi::lua_toboolean(l, idx) != 0;
            if resp == 3 {
                Reply::Bool(b)
            } else if b {
                Reply::Int(1)
            } else {
                Reply::Null
            }
        }
        ffi::LUA_TNUMBER => Reply::Int(lua_number_to_i64(ffi::lua_tonumber(l, idx))),
        ffi::LUA_TSTRING => Reply::Bulk(str_at(l, idx).to_vec()),
        ffi::LUA_TTABLE => {
            if ffi::lua_checkstack(l, 4) == 0 {
                return Reply::err("ERR reached lua stack limit");
            }
            let t = abs(l, idx);
            let top = ffi::lua_gettop(l);
            let r = table_to_reply(l, t, proto, resp, depth);
            ffi::lua_settop(l, top);
            r
        }
        _ => Reply::Null,
    }
}

/// A table: error, status, double, big number, map, set or verbatim string by its
/// single field, otherwise an array up to the first nil. Leaves values on the stack
/// (the caller resets it).
unsafe fn table_to_reply(l: *mut lua_State, t: c_int, proto: u8, resp: u8, depth: usize) -> Reply {
    if raw_field(l, t, b"err") == ffi::LUA_TSTRING {
        return Reply::error(String::from_utf8_lossy(str_at(l, -1)).into_owned());
    }
    if raw_field(l, t, b"ok") == ffi::LUA_TSTRING {
        // A status line cannot carry CR or LF.
        let s: String = String::from_utf8_lossy(str_at(l, -1))
            .chars()
            .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
            .collect();
        return Reply::Status(s.into());
    }
    if raw_field(l, t, b"double") == ffi::LUA_TNUMBER {
        return Reply::Double(ffi::lua_tonumber(l, -1));
    }
    if raw_field(l, t, b"big_number") == ffi::LUA_TSTRING {
        // Like a status line, a big number cannot carry CR or LF.
        let b: Vec<u8> = str_at(l, -1)
            .iter()
            .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
            .collect();
        return if proto >= 3 {
            Reply::BigNumber(b)
        } else {
            Reply::Bulk(b)
        };
    }
    if raw_field(l, t, b"map") == ffi::LUA_TTABLE {
        let m = ffi::lua_gettop(l);
        let mut pairs = Vec::new();
        ffi::lua_pushnil(l);
        while ffi::lua_next(l, m) != 0 {
            let k = to_reply(l, -2, proto, resp, depth + 1);
            let v = to_reply(l, -1, proto, resp, depth + 1);
            pairs.push((k, v));
            ffi::lua_pop(l, 1);
        }
        return Reply::Map(pairs);
    }
    if raw_field(l, t, b"set") == ffi::LUA_TTABLE {
        let m = ffi::lua_gettop(l);
        let mut items = Vec::new();
        ffi::lua_pushnil(l);
        while ffi::lua_next(l, m) != 0 {
            items.push(to_reply(l, -2, proto, resp, depth + 1));
            ffi::lua_pop(l, 1);
        }
        return Reply::Set(items);
    }
    if raw_field(l, t, b"verbatim_string") == ffi::LUA_TTABLE {
        let v = ffi::lua_gettop(l);
        if raw_field(l, v, b"format") == ffi::LUA_TSTRING
            && raw_field(l, v, b"string") == ffi::LUA_TSTRING
        {
            let fmt = match str_at(l, -2) {
                b"mkd" => "mkd",
                _ => "txt",
            };
            return Reply::Verbatim(fmt, str_at(l, -1).to_vec());
        }
    }
    let mut items = Vec::new();
    let mut i: c_int = 1;
    loop {
        ffi::lua_rawgeti_(l, t, i);
        if ffi::lua_type(l, -1) == ffi::LUA_TNIL {
            break;
        }
        items.push(to_reply(l, -1, proto, resp, depth + 1));
        ffi::lua_pop(l, 1);
        if i == c_int::MAX {
            break;
        }
        i += 1;
    }
    Reply::Array(items)
}

/// Pushes a command's reply as the script sees it (convert.rs's rules, reply → Lua,
/// for the script's `redis.setresp` version). The caller lifted the memory limit.
unsafe fn push_reply(l: *mut lua_State, r: &Reply, resp: u8) {
    // Three slots per nesting level: the container, a key and a value.
    if ffi::lua_checkstack(l, 3) == 0 {
        // Deeper than Lua's C stack allows (8000 slots): no command replies like that.
        ffi::lua_pushnil(l);
        return;
    }
    match r {
        Reply::Status(s) => {
            ffi::lua_createtable(l, 0, 1);
            set_field(l, b"ok", s.as_bytes());
        }
        Reply::Error(e) => push_error_table(l, e.as_bytes()),
        Reply::Int(n) => ffi::lua_pushnumber(l, *n as f64),
        Reply::Bulk(b) => push_bytes(l, b),
        Reply::ShortBulk(b) => push_bytes(l, b.as_slice()),
        Reply::BigNumber(b) => {
            if resp == 3 {
                ffi::lua_createtable(l, 0, 1);
                set_field(l, b"big_number", b);
            } else {
                push_bytes(l, b);
            }
        }
        // Scripts read one reply: an attribute before it is parsed and dropped, as
        // Redis does (attributes are not exposed to scripts).
        Reply::Multi(items) => match items.iter().find(|i| !matches!(i, Reply::Attribute(_))) {
            Some(first) => push_reply(l, first, resp),
            None => push_reply(l, &Reply::Null, resp),
        },
        Reply::Null | Reply::NullArray | Reply::NoReply | Reply::Attribute(_) => {
            if resp == 3 {
                ffi::lua_pushnil(l);
            } else {
                ffi::lua_pushboolean(l, 0);
            }
        }
        Reply::Array(items) | Reply::Push(items) => push_array(l, items, resp),
        Reply::EncodedArray(..) | Reply::Picks(_) => push_reply(l, &r.decoded(), resp),
        Reply::Map(pairs) => {
            if resp == 3 {
                ffi::lua_createtable(l, 0, 1);
                push_bytes(l, b"map");
                ffi::lua_createtable(l, 0, c_len(pairs.len()));
                for (k, v) in pairs {
                    push_reply(l, k, resp);
                    push_reply(l, v, resp);
                    set_pair(l);
                }
                ffi::lua_rawset(l, -3);
            } else {
                ffi::lua_createtable(l, c_len(pairs.len().saturating_mul(2)), 0);
                let mut i: c_int = 0;
                for (k, v) in pairs {
                    push_reply(l, k, resp);
                    ffi::lua_rawseti_(l, -2, i.saturating_add(1));
                    push_reply(l, v, resp);
                    ffi::lua_rawseti_(l, -2, i.saturating_add(2));
                    i = i.saturating_add(2);
                }
            }
        }
        Reply::Set(items) => {
            if resp == 3 {
                ffi::lua_createtable(l, 0, 1);
                push_bytes(l, b"set");
                ffi::lua_createtable(l, 0, c_len(items.len()));
                for k in items {
                    push_reply(l, k, resp);
                    ffi::lua_pushboolean(l, 1);
                    set_pair(l);
                }
                ffi::lua_rawset(l, -3);
            } else {
                push_array(l, items, resp);
            }
        }
        Reply::Double(d) | Reply::HumanDouble(d) => {
            if resp == 3 {
                ffi::lua_createtable(l, 0, 1);
                push_bytes(l, b"double");
                ffi::lua_pushnumber(l, *d);
                ffi::lua_rawset(l, -3);
            } else if matches!(r, Reply::Double(_)) {
                push_bytes(l, format_f64(*d).as_bytes());
            } else {
                push_bytes(l, format_human_f64(*d).as_bytes());
            }
        }
        Reply::Bool(b) => {
            if resp == 3 {
                ffi::lua_pushboolean(l, *b as c_int);
            } else {
                ffi::lua_pushnumber(l, if *b { 1.0 } else { 0.0 });
            }
        }
        Reply::Verbatim(fmt, body) => {
            if resp == 3 {
                ffi::lua_createtable(l, 0, 1);
                push_bytes(l, b"verbatim_string");
                ffi::lua_createtable(l, 0, 2);
                set_field(l, b"format", fmt.as_bytes());
                set_field(l, b"string", body);
                ffi::lua_rawset(l, -3);
            } else {
                push_bytes(l, body);
            }
        }
    }
}

fn c_len(n: usize) -> c_int {
    c_int::try_from(n).unwrap_or(c_int::MAX)
}

unsafe fn push_array(l: *mut lua_State, items: &[Reply], resp: u8) {
    ffi::lua_createtable(l, c_len(items.len()), 0);
    for (i, r) in items.iter().enumerate() {
        push_reply(l, r, resp);
        ffi::lua_rawseti_(l, -2, c_len(i + 1));
    }
}

/// `t[k] = v` for key and value on top of the table; a nil or NaN key (which Lua
/// would reject with an error) is dropped.
unsafe fn set_pair(l: *mut lua_State) {
    let bad_key = match ffi::lua_type(l, -2) {
        ffi::LUA_TNIL => true,
        ffi::LUA_TNUMBER => ffi::lua_tonumber(l, -2).is_nan(),
        _ => false,
    };
    if bad_key {
        ffi::lua_pop(l, 2);
    } else {
        ffi::lua_rawset(l, -3);
    }
}

/// `redis.call`: the reply, or raises the command's error as `{err = ...}`.
pub(super) unsafe extern "C-unwind" fn redis_call(l: *mut lua_State) -> c_int {
    call_entry(l, true)
}

/// `redis.pcall`: the reply, or returns the command's error as `{err = ...}`.
pub(super) unsafe extern "C-unwind" fn redis_pcall(l: *mut lua_State) -> c_int {
    call_entry(l, false)
}

/// Scripts' global `pcall`, as Redis's: Lua's own, except that a failure whose error
/// is a table with a string `err` (what `redis.call` raises) hands back that message
/// instead of the table. A C function, so the watchdog's line hook never fires inside
/// it (a script keeps no way to run Lua code between a kill and its next line).
///
/// It runs with the script's memory limit set, so its two string pushes may raise
/// Lua's memory error, as Lua's own pcall may: nothing here holds a value with a
/// destructor.
pub(super) unsafe extern "C-unwind" fn script_pcall(l: *mut lua_State) -> c_int {
    let argc = ffi::lua_gettop(l);
    if argc == 0 {
        // Redis's pcall then calls its own `true` placeholder.
        ffi::lua_pushboolean(l, 0);
        push_bytes(l, b"attempt to call a boolean value");
        return 2;
    }
    ffi::lua_pushboolean(l, 1);
    ffi::lua_insert(l, 1);
    if ffi::lua_pcall(l, argc - 1, ffi::LUA_MULTRET, 0) != 0 {
        // The error object is alone on the stack now.
        ffi::lua_remove(l, 1);
        if ffi::lua_istable(l, -1) != 0 {
            // A raw read: unlike Redis's lua_getfield it cannot run a metamethod
            // (and so cannot raise here).
            push_bytes(l, b"err");
            ffi::lua_rawget_(l, -2);
            if ffi::lua_isstring(l, -1) != 0 {
                ffi::lua_replace(l, -2);
            }
            // Otherwise the table and the field both stay, as in Redis.
        }
        ffi::lua_pushboolean(l, 0);
        ffi::lua_insert(l, 1);
    }
    ffi::lua_gettop(l)
}

/// What the Rust side of a call decided, with nothing left to drop.
enum Exit {
    /// Return this many values.
    Return(c_int),
    /// Raise the error value on top of the stack.
    Raise,
    /// The work panicked: the payload is parked in the slot; raise to unwind Lua.
    Panicked,
    /// No script is running (the functions were reached outside a run).
    NoRun,
}

/// `redis.acl_check_cmd`: whether the script's user may run the command given.
pub(super) unsafe extern "C-unwind" fn redis_acl_check_cmd(l: *mut lua_State) -> c_int {
    entry(l, |l, slot| acl_check_work(l, slot))
}

/// The thin C entry: runs the work, then returns or raises with no Rust value alive.
unsafe fn call_entry(l: *mut lua_State, raise: bool) -> c_int {
    entry(l, |l, slot| call_work(l, slot, raise))
}

/// Runs `work` on the VM's `CallSlot` (the C closure's upvalue), then returns or
/// raises as it decided, with no Rust value alive.
unsafe fn entry(l: *mut lua_State, work: impl FnOnce(*mut lua_State, &CallSlot) -> Exit) -> c_int {
    let slot = ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const CallSlot;
    let exit = match catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the upvalue is the VM's `CallSlot`, alive as long as the Lua state
        // (module comment).
        work(l, &*slot)
    })) {
        Ok(e) => e,
        Err(payload) => park_panic(&*slot, payload),
    };
    match exit {
        Exit::Return(n) => n,
        Exit::Raise => ffi::lua_error(l),
        // These two push with the limit set: an allocation failure raises Lua's
        // memory error instead, which is as good (nothing is left to drop here).
        Exit::Panicked => {
            push_bytes(l, b"panic in redis.call");
            ffi::lua_error(l)
        }
        Exit::NoRun => {
            push_error_table(
                l,
                b"ERR redis.call and redis.pcall are only available while a script runs",
            );
            ffi::lua_error(l)
        }
    }
}

fn park_panic(slot: &CallSlot, payload: Box<dyn Any + Send>) -> Exit {
    slot.panic.set(Some(payload));
    Exit::Panicked
}

/// One argument of a call: a Lua string (borrowed from the stack) or a number
/// formatted into the scratch buffer.
enum Arg {
    Lua(*const u8, usize),
    Num(usize, usize),
}

/// The work of `redis.call` / `redis.pcall`: leaves one value on the stack, to return
/// or (`Exit::Raise`) to raise.
unsafe fn call_work(l: *mut lua_State, slot: &CallSlot, raise: bool) -> Exit {
    let n = ffi::lua_gettop(l);
    if !raise && n == 1 && ffi::lua_type(l, 1) == ffi::LUA_TLIGHTUSERDATA {
        // The watchdog hook's step reaches the run through `redis.pcall` (see
        // busy::is_step_ptr): a script that ends in time pays nothing for busy mode.
        if busy::is_step_ptr(ffi::lua_touserdata(l, 1)) {
            let killed = slot.with(|cc| match cc.try_borrow_mut() {
                Ok(mut cc) => cc.busy_step(),
                Err(_) => false,
            });
            ffi::lua_pushboolean(l, killed.unwrap_or(false) as c_int);
            return Exit::Return(1);
        }
    }
    let failed = slot.with(|cc| {
        let cc = &mut *cc.borrow_mut();
        cc.refused = false;
        let reply = if n == 0 {
            Err(Reply::err(
                "ERR Please specify at least one argument for this redis lib call",
            ))
        } else {
            run_call(l, n, cc)
        };
        // The arguments are no longer needed (run_call borrowed them): dropping them
        // leaves room on the stack for the reply even after 7999 arguments.
        ffi::lua_settop(l, 0);
        let _unlimited = vm::Unlimited::new(cc.lua);
        if ldb::enabled() {
            match &reply {
                Ok(r) => ldb::log_call_result(r, cc.refused, cc.resp.get()),
                Err(r) => ldb::log_call_result(r, true, cc.resp.get()),
            }
        }
        match &reply {
            // The command's error was counted in the error statistics when it was
            // replied (or refused); the table says so, for the script's final reply.
            Ok(Reply::Error(e)) => {
                push_error_table(l, e.as_bytes());
                set_bool_field(l, IGNORE_STATS_FIELD, true);
                true
            }
            Err(Reply::Error(e)) => {
                push_error_table(l, e.as_bytes());
                true
            }
            Ok(r) | Err(r) => {
                push_reply(l, r, cc.resp.get());
                false
            }
        }
    });
    match failed {
        None => Exit::NoRun,
        Some(true) if raise => Exit::Raise,
        Some(_) => Exit::Return(1),
    }
}

/// The work of `redis.acl_check_cmd`: a boolean, or raises when the arguments name no
/// command.
unsafe fn acl_check_work(l: *mut lua_State, slot: &CallSlot) -> Exit {
    let n = ffi::lua_gettop(l);
    let reply = slot.with(|cc| {
        let cc = &mut *cc.borrow_mut();
        let reply = if n == 0 {
            Err(Reply::err(
                "ERR Please specify at least one argument for this redis lib call",
            ))
        } else {
            with_args(l, n, cc, |cc, argv| cc.acl_check_cmd(argv))
        };
        ffi::lua_settop(l, 0);
        let _unlimited = vm::Unlimited::new(cc.lua);
        match reply {
            Ok(Reply::Bool(allowed)) => {
                ffi::lua_pushboolean(l, allowed as c_int);
                false
            }
            Ok(Reply::Error(e)) | Err(Reply::Error(e)) => {
                push_error_table(l, e.as_bytes());
                true
            }
            _ => {
                push_error_table(l, b"ERR unknown error");
                true
            }
        }
    });
    match reply {
        None => Exit::NoRun,
        Some(true) => Exit::Raise,
        Some(false) => Exit::Return(1),
    }
}

/// Reads the call's `n` arguments off the stack and runs the command: the command's
/// reply, or `Err` when the arguments themselves are wrong (no command ran).
unsafe fn run_call(l: *mut lua_State, n: c_int, cc: &mut CallCtx) -> Result<Reply, Reply> {
    with_args(l, n, cc, |cc, argv| {
        if ldb::enabled() {
            ldb::log_command(argv);
        }
        cc.call_command(argv)
    })
}

/// Reads the `n` arguments of a `redis` library call off the stack as Redis does
/// (strings, and numbers formatted) and runs `f` on them; `Err` when one is neither.
unsafe fn with_args(
    l: *mut lua_State,
    n: c_int,
    cc: &mut CallCtx,
    f: impl FnOnce(&mut CallCtx, &[&[u8]]) -> Reply,
) -> Result<Reply, Reply> {
    let mut scratch = std::mem::take(&mut cc.scratch);
    scratch.clear();
    let mut args: SmallVec<[Arg; 8]> = SmallVec::with_capacity(n as usize);
    for i in 1..=n {
        match ffi::lua_type(l, i) {
            ffi::LUA_TSTRING => {
                let s = str_at(l, i);
                args.push(Arg::Lua(s.as_ptr(), s.len()));
            }
            ffi::LUA_TNUMBER => {
                let start = scratch.len();
                format_number(ffi::lua_tonumber(l, i), &mut scratch);
                args.push(Arg::Num(start, scratch.len()));
            }
            _ => {
                cc.scratch = scratch;
                return Err(Reply::err(
                    "ERR Lua redis lib command arguments must be strings or integers",
                ));
            }
        }
    }
    let argv: SmallVec<[&[u8]; 8]> = args
        .iter()
        .map(|a| match *a {
            // SAFETY: the strings are the call's arguments, on the Lua stack (so not
            // collected) until this C function returns; no Lua code runs meanwhile.
            Arg::Lua(p, len) => std::slice::from_raw_parts(p, len),
            Arg::Num(s, e) => &scratch[s..e],
        })
        .collect();
    let reply = f(cc, &argv);
    drop(argv);
    cc.scratch = scratch;
    Ok(reply)
}

/// A Lua number as a command argument, as Redis 7.4 converts it: integral values
/// within ±2^62 as integers (`double2ll`), others as fpconv's shortest round-trip
/// decimal (so `1e9` is `1000000000` and `0.1` is `0.1`, never `%.17g`'s
/// `0.10000000000000001`).
fn format_number(n: f64, out: &mut Vec<u8>) {
    if let Some(i) = f64_as_exact_i64(n) {
        format_i64(i, out);
    } else if n.is_nan() {
        // fpconv spells NaN by its sign bit, as it does any double.
        out.extend_from_slice(if n.is_sign_negative() {
            b"-nan"
        } else {
            b"nan"
        });
    } else if n.is_infinite() {
        write_f64(n, out);
    } else {
        write_shortest_f64(n, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply pushed into a VM as `redis.call` does, then read back as a script's
    /// result (for a RESP3 caller).
    fn roundtrip(vm: &vm::Vm, r: &Reply, resp: u8) -> Reply {
        let l = vm.state;
        // SAFETY: the limit is lifted (nothing raises), the stack is checked and
        // restored; as in `run_script`.
        unsafe {
            let _unlimited = vm::Unlimited::new(&vm.lua);
            assert!(ffi::lua_checkstack(l, 4) != 0);
            let top = ffi::lua_gettop(l);
            push_reply(l, r, resp);
            assert_eq!(ffi::lua_gettop(l), top + 1);
            let out = to_reply(l, -1, 3, resp, 0);
            ffi::lua_settop(l, top);
            out
        }
    }

    #[test]
    fn replies_through_the_stack() {
        use Reply::*;
        let vm = vm::Vm::new().unwrap();
        let bulk = |s: &str| Bulk(s.as_bytes().to_vec());
        let nested = Array(vec![
            Int(1),
            Array(vec![bulk("a\0b"), Array(vec![Int(-2)])]),
        ]);
        let map = Map(vec![(bulk("k"), Int(1))]);
        let set = Set(vec![bulk("m")]);
        #[rustfmt::skip]
        let rows: Vec<(Reply, Reply, Reply)> = vec![
            // reply, as seen after a RESP2 script, after a RESP3 script
            (Reply::ok(), Reply::ok(), Reply::ok()),
            (Reply::err("ERR x"), Reply::err("ERR x"), Reply::err("ERR x")),
            (Int(i64::MIN), Int(i64::MIN), Int(i64::MIN)),
            (bulk("a\0b"), bulk("a\0b"), bulk("a\0b")),
            (bulk(""), bulk(""), bulk("")),
            (Null, Null, Null),
            (NullArray, Null, Null),
            (nested.clone(), nested.clone(), nested),
            (Array(vec![bulk("a"), Null, bulk("b")]), Array(vec![bulk("a"), Null, bulk("b")]), Array(vec![bulk("a")])),
            (map.clone(), Array(vec![bulk("k"), Int(1)]), map),
            (Map(vec![(Null, Int(1))]), Array(vec![Null, Int(1)]), Map(vec![])),
            (set.clone(), Array(vec![bulk("m")]), set),
            (Double(1.5), bulk("1.5"), Double(1.5)),
            (HumanDouble(1.5), Bulk(format_human_f64(1.5).into_bytes()), Double(1.5)),
            (Bool(true), Int(1), Bool(true)),
            (Bool(false), Int(0), Bool(false)),
            (BigNumber(b"123".to_vec()), bulk("123"), BigNumber(b"123".to_vec())),
            (Verbatim("mkd", b"# t".to_vec()), bulk("# t"), Verbatim("mkd", b"# t".to_vec())),
            (Push(vec![Int(1)]), Array(vec![Int(1)]), Array(vec![Int(1)])),
            // A script reads one reply: an attribute before it is not part of it.
            (Multi(vec![Attribute(vec![(Int(2), Int(3))]), Int(1)]), Int(1), Int(1)),
            (NoReply, Null, Null),
        ];
        for (r, two, three) in rows {
            assert_eq!(roundtrip(&vm, &r, 2), two, "{r:?} RESP2");
            assert_eq!(roundtrip(&vm, &r, 3), three, "{r:?} RESP3");
        }
    }

    #[test]
    fn numbers_as_arguments() {
        let f = |n: f64| {
            let mut v = Vec::new();
            format_number(n, &mut v);
            String::from_utf8(v).unwrap()
        };
        assert_eq!(f(1.0), "1");
        assert_eq!(f(-42.0), "-42");
        assert_eq!(f(1.5), "1.5");
        // double2ll's cast test takes -0 for the integer 0.
        assert_eq!(f(-0.0), "0");
        assert_eq!(f(1e17), "100000000000000000");
        assert_eq!(f(4_611_686_018_427_387_904.0), "4611686018427387904");
        assert_eq!(f(9_223_372_036_854_775_808.0), "9223372036854776000");
        assert_eq!(f(-9_223_372_036_854_775_808.0), "-9223372036854776000");
        assert_eq!(f(0.1), "0.1");
        assert_eq!(f(1e300), "1e+300");
        assert_eq!(f(f64::INFINITY), "inf");
        assert_eq!(f(f64::NEG_INFINITY), "-inf");
    }
}
