//! Redis's conversion rules between command replies and Lua values, both ways.
//!
//! Reply → Lua (what `redis.call` returns), by the script's `redis.setresp` version:
//! integer → number, bulk → string, null → `false` (RESP2) or `nil` (RESP3), array →
//! table, status → `{ok=...}`, error → `{err=...}`; with RESP3 maps → `{map={...}}`,
//! sets → `{set={k=true}}`, doubles → `{double=n}`, booleans → booleans, verbatim →
//! `{verbatim_string={format=, string=}}` (in RESP2 those arrive flattened).
//!
//! Lua → reply (what a script returns): number → integer (truncated, C's cast), string →
//! bulk, `true` → 1 / `false` → null (RESP2 script) or booleans (RESP3 script), tables →
//! error / status / double / big number / map / set / verbatim by their single field,
//! otherwise an array truncated at the first nil.

use mlua::{Lua, Table, Value};

use crate::protocol::Reply;
use crate::util::numeric::{format_f64, format_human_f64};

/// Deepest nesting converted (Redis is bounded by the Lua C stack).
const MAX_DEPTH: usize = 1000;

pub fn reply_to_lua(lua: &Lua, r: &Reply, resp: u8) -> mlua::Result<Value> {
    Ok(match r {
        Reply::Status(s) => {
            let t = lua.create_table()?;
            t.raw_set("ok", s.as_ref())?;
            Value::Table(t)
        }
        Reply::Error(e) => {
            let t = lua.create_table()?;
            t.raw_set("err", e.as_ref())?;
            Value::Table(t)
        }
        Reply::Int(n) => Value::Number(*n as f64),
        Reply::Bulk(b) => Value::String(lua.create_string(b)?),
        Reply::BigNumber(b) => {
            if resp == 3 {
                wrap(lua, "big_number", Value::String(lua.create_string(b)?))?
            } else {
                Value::String(lua.create_string(b)?)
            }
        }
        Reply::Null | Reply::NullArray | Reply::NoReply => {
            if resp == 3 {
                Value::Nil
            } else {
                Value::Boolean(false)
            }
        }
        Reply::Array(items) | Reply::Push(items) | Reply::Multi(items) => {
            array(lua, items.iter(), items.len(), resp)?
        }
        Reply::EncodedArray(..) => reply_to_lua(lua, &r.decoded(), resp)?,
        Reply::Map(pairs) => {
            if resp == 3 {
                let m = lua.create_table()?;
                for (k, v) in pairs {
                    m.raw_set(reply_to_lua(lua, k, resp)?, reply_to_lua(lua, v, resp)?)?;
                }
                wrap(lua, "map", Value::Table(m))?
            } else {
                let t = lua.create_table_with_capacity(pairs.len() * 2, 0)?;
                for (i, (k, v)) in pairs.iter().enumerate() {
                    t.raw_set(2 * i + 1, reply_to_lua(lua, k, resp)?)?;
                    t.raw_set(2 * i + 2, reply_to_lua(lua, v, resp)?)?;
                }
                Value::Table(t)
            }
        }
        Reply::Set(items) => {
            if resp == 3 {
                let m = lua.create_table()?;
                for k in items {
                    m.raw_set(reply_to_lua(lua, k, resp)?, true)?;
                }
                wrap(lua, "set", Value::Table(m))?
            } else {
                array(lua, items.iter(), items.len(), resp)?
            }
        }
        Reply::Double(d) => {
            if resp == 3 {
                wrap(lua, "double", Value::Number(*d))?
            } else {
                Value::String(lua.create_string(format_f64(*d))?)
            }
        }
        Reply::HumanDouble(d) => {
            if resp == 3 {
                wrap(lua, "double", Value::Number(*d))?
            } else {
                Value::String(lua.create_string(format_human_f64(*d))?)
            }
        }
        Reply::Bool(b) => {
            if resp == 3 {
                Value::Boolean(*b)
            } else {
                Value::Number(if *b { 1.0 } else { 0.0 })
            }
        }
        Reply::Verbatim(fmt, body) => {
            if resp == 3 {
                let v = lua.create_table()?;
                v.raw_set("format", *fmt)?;
                v.raw_set("string", lua.create_string(body)?)?;
                wrap(lua, "verbatim_string", Value::Table(v))?
            } else {
                Value::String(lua.create_string(body)?)
            }
        }
    })
}

fn wrap(lua: &Lua, field: &str, v: Value) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set(field, v)?;
    Ok(Value::Table(t))
}

fn array<'a>(
    lua: &Lua,
    items: impl Iterator<Item = &'a Reply>,
    n: usize,
    resp: u8,
) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(n, 0)?;
    for (i, r) in items.enumerate() {
        t.raw_set(i + 1, reply_to_lua(lua, r, resp)?)?;
    }
    Ok(Value::Table(t))
}

/// C's `(long long)` cast of a double as x86 does it: out of range and NaN give the
/// "integer indefinite" value, `i64::MIN`.
pub fn lua_number_to_i64(n: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if !(-LIMIT..LIMIT).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

/// Converts a script's return value. `proto` is the caller's protocol, `resp` the
/// script's `redis.setresp` version.
pub fn lua_to_reply(v: &Value, proto: u8, resp: u8) -> Reply {
    to_reply(v, proto, resp, 0)
}

fn bytes(s: &mlua::LuaString) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn to_reply(v: &Value, proto: u8, resp: u8, depth: usize) -> Reply {
    if depth > MAX_DEPTH {
        return Reply::err("ERR reached lua stack limit");
    }
    match v {
        Value::Nil => Reply::Null,
        Value::Boolean(b) => {
            if resp == 3 {
                Reply::Bool(*b)
            } else if *b {
                Reply::Int(1)
            } else {
                Reply::Null
            }
        }
        Value::Integer(n) => Reply::Int(*n),
        Value::Number(n) => Reply::Int(lua_number_to_i64(*n)),
        Value::String(s) => Reply::Bulk(bytes(s)),
        Value::Table(t) => table_to_reply(t, proto, resp, depth),
        _ => Reply::Null,
    }
}

fn table_to_reply(t: &Table, proto: u8, resp: u8, depth: usize) -> Reply {
    if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
        return Reply::error(String::from_utf8_lossy(&e.as_bytes()).into_owned());
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
        // A status line cannot carry CR or LF.
        let s: String = String::from_utf8_lossy(&s.as_bytes())
            .chars()
            .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
            .collect();
        return Reply::Status(s.into());
    }
    if let Ok(Value::Number(d)) = t.raw_get::<Value>("double") {
        return Reply::Double(d);
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("big_number") {
        let b = bytes(&s);
        return if proto >= 3 {
            Reply::BigNumber(b)
        } else {
            Reply::Bulk(b)
        };
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
        let mut pairs = Vec::new();
        for (k, v) in m.pairs::<Value, Value>().flatten() {
            pairs.push((
                to_reply(&k, proto, resp, depth + 1),
                to_reply(&v, proto, resp, depth + 1),
            ));
        }
        return Reply::Map(pairs);
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("set") {
        let mut items = Vec::new();
        for (k, _) in m.pairs::<Value, Value>().flatten() {
            items.push(to_reply(&k, proto, resp, depth + 1));
        }
        return Reply::Set(items);
    }
    if let Ok(Value::Table(vs)) = t.raw_get::<Value>("verbatim_string") {
        if let (Ok(Value::String(f)), Ok(Value::String(s))) =
            (vs.raw_get::<Value>("format"), vs.raw_get::<Value>("string"))
        {
            let fmt = match &*f.as_bytes() {
                b"mkd" => "mkd",
                _ => "txt",
            };
            return Reply::Verbatim(fmt, bytes(&s));
        }
    }
    let mut items = Vec::new();
    let mut i = 1;
    loop {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(to_reply(&v, proto, resp, depth + 1)),
        }
        i += 1;
    }
    Reply::Array(items)
}
