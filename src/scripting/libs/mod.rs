//! The libraries Redis adds to its Lua (`cjson`, `bit`, `cmsgpack`, `struct`),
//! written here in Rust with Redis's behaviour and bounds checks (the C originals are
//! where Redis's Lua CVEs came from).
//!
//! Library functions return `Result<values, message>`; `lib_fn` raises the message so
//! that the script's error reads `user_script:1: <message>` as in Redis.

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod structlib;

use mlua::{Function, IntoLuaMulti, Lua, MultiValue, Value};

/// Makes a library function from a Rust one that reports errors as messages; the
/// message is raised marked so the error handler prefixes the script's position.
pub fn lib_fn<F>(lua: &Lua, f: F) -> mlua::Result<Function>
where
    F: Fn(&Lua, MultiValue) -> Result<MultiValue, String> + 'static,
{
    lua.create_function(move |lua, args: MultiValue| f(lua, args).map_err(|m| raise(lua, &m)))
}

/// Raises a library error message, positioned (`luaL_error`). A `bad argument` message
/// gets the name the function was called by, as `luaL_argerror` finds it from the call
/// site (`local f = cmsgpack.pack; f()` reports `'f'`, a method call shifts the index).
pub fn raise(lua: &Lua, msg: &str) -> mlua::Error {
    crate::scripting::vm::raise_positioned(&called_name(lua, msg))
}

fn called_name(lua: &Lua, msg: &str) -> String {
    let Some(rest) = msg.strip_prefix("bad argument #") else {
        return msg.to_string();
    };
    let Some((num, rest)) = rest.split_once(" to '") else {
        return msg.to_string();
    };
    let Some((_, extra)) = rest.split_once("' (") else {
        return msg.to_string();
    };
    let Ok(mut narg) = num.parse::<i64>() else {
        return msg.to_string();
    };
    let names = lua.inspect_stack(0, |d| {
        let n = d.names();
        (n.name.map(|s| s.into_owned()), n.name_what)
    });
    let (name, what) = names.unwrap_or((None, None));
    let name = name.unwrap_or_else(|| "?".into());
    if what == Some("method") {
        narg -= 1;
        if narg == 0 {
            return format!("calling '{name}' on bad self ({extra}");
        }
    }
    format!("bad argument #{narg} to '{name}' ({extra}")
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

/// `luaL_argerror`'s message: `bad argument #i to 'fname' (msg)` (`i` 0-based).
pub fn arg_error(i: usize, fname: &str, msg: &str) -> String {
    format!("bad argument #{} to '{fname}' ({msg})", i + 1)
}

/// A Lua number as f64 (`None` for other types; strings are not coerced).
pub fn num_value(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => Some(*n),
        Value::Integer(n) => Some(*n as f64),
        Value::String(s) => {
            let t = s.to_str().ok()?;
            let t = t.trim();
            if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                return u64::from_str_radix(h, 16).ok().map(|v| v as f64);
            }
            t.parse::<f64>().ok().filter(|_| !t.is_empty())
        }
        _ => None,
    }
}

/// C's `(int64_t)d` as x86-64 computes it (cvttsd2si): truncation, and
/// `INT64_MIN` for NaN and out-of-range values.
pub fn c_trunc_i64(d: f64) -> i64 {
    if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

/// C's `(int)d` on x86-64: truncation, `INT_MIN` for NaN and out-of-range values.
pub fn c_trunc_i32(d: f64) -> i32 {
    if !(-2_147_483_648.0..2_147_483_648.0).contains(&d) {
        i32::MIN
    } else {
        d as i32
    }
}

/// C's `(uint64_t)d` as gcc compiles it on x86-64: values from 2^63 are converted
/// after subtracting 2^63 (and the top bit set back), others through the signed
/// conversion, so NaN and out-of-range values give the same bits as Redis.
pub fn c_f64_to_u64(d: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    if d >= TWO63 {
        (c_trunc_i64(d - TWO63) as u64) ^ (1 << 63)
    } else {
        c_trunc_i64(d) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_casts_match_x86_64() {
        assert_eq!(c_trunc_i64(-3.7), -3);
        assert_eq!(c_trunc_i64(f64::NAN), i64::MIN);
        assert_eq!(c_trunc_i64(1e300), i64::MIN);
        assert_eq!(c_trunc_i32(2147483648.0), i32::MIN);
        // Observed in redis-server: struct.pack('<l', x).
        assert_eq!(c_f64_to_u64(1e300), 0);
        assert_eq!(c_f64_to_u64(f64::NAN), 1 << 63);
        assert_eq!(c_f64_to_u64(9223372036854775808.0), 1 << 63);
        assert_eq!(c_f64_to_u64(5.9), 5);
    }
}
