//! The libraries Redis adds to its Lua (`cjson` and `bit` so far),
//! written here in Rust with Redis's behaviour and bounds checks (the C originals are
//! where Redis's Lua CVEs came from).
//!
//! Library functions return `Result<values, message>`; `lib_fn` raises the message so
//! that the script's error reads `user_script:1: <message>` as in Redis.

pub mod bit;
pub mod cjson;

use mlua::{Function, IntoLuaMulti, Lua, MultiValue, Value};

/// Makes a library function from a Rust one that reports errors as messages; the
/// message is raised marked so the error handler prefixes the script's position.
pub fn lib_fn<F>(lua: &Lua, f: F) -> mlua::Result<Function>
where
    F: Fn(&Lua, MultiValue) -> Result<MultiValue, String> + 'static,
{
    lua.create_function(move |lua, args: MultiValue| {
        f(lua, args).map_err(|m| crate::scripting::vm::raise_positioned(&m))
    })
}

/// One return value.
pub fn ret(lua: &Lua, v: impl IntoLuaMulti) -> Result<MultiValue, String> {
    v.into_lua_multi(lua).map_err(|e| e.to_string())
}

/// `luaL_checknumber`: numbers and numeric strings.
pub fn check_number(args: &MultiValue, i: usize, fname: &str) -> Result<f64, String> {
    match args.get(i) {
        Some(Value::Number(n)) => Ok(*n),
        Some(Value::Integer(n)) => Ok(*n as f64),
        Some(Value::String(s)) => {
            let t = s.to_string_lossy();
            let t = t.trim();
            let parsed = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                i64::from_str_radix(h, 16).ok().map(|v| v as f64)
            } else {
                t.parse::<f64>().ok()
            };
            parsed.ok_or_else(|| bad_arg(i, fname, "number", "string"))
        }
        other => Err(bad_arg(
            i,
            fname,
            "number",
            other.map(|v| v.type_name()).unwrap_or("no value"),
        )),
    }
}

pub fn bad_arg(i: usize, fname: &str, expected: &str, got: &str) -> String {
    format!(
        "bad argument #{} to '{fname}' ({expected} expected, got {got})",
        i + 1
    )
}
