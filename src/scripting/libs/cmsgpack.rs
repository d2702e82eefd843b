//! `cmsgpack`: lua-cmsgpack 0.4.0 as Redis ships it (`pack`, `unpack`, `unpack_one`,
//! `unpack_limit`).
//!
//! Encoding follows the C library's choices, which clients decode against: a number is an
//! integer when it converts to int64 exactly (smallest of fixint/u8/u16/u32/u64 or
//! negative fixint/i8/i16/i32/i64), otherwise a float32 when that round-trips, else a
//! float64; strings are str (fix/8/16/32, never bin); a table is an array when its keys
//! are exactly 1..n (an empty table is an empty array), otherwise a map in `next`
//! order; tables nested 16 deep become nil (so cycles terminate).
//!
//! Decoding is bounds-checked everywhere (the C original's overflows are where Redis's
//! Lua CVEs came from): every length is checked against the remaining input before use,
//! nothing is preallocated from a declared count, and the Lua stack usage of the C
//! library is counted so that runaway results or nesting fail with its "stack overflow"
//! error at the same point (and our recursion stays bounded).

use mlua::{Lua, MultiValue, Table, Value};

use super::{c_trunc_i32, c_trunc_i64, num_value};
use crate::scripting::vm::{raise_positioned, MEMORY_LIMIT};

/// Tables nested this deep are encoded as nil.
const MAX_NESTING: usize = 16;
/// Values one `pack` call may encode (see `encode`).
const MAX_VALUES: usize = 1 << 22;
/// Lua 5.1's LUAI_MAXCSTACK: the stack slots a C function may use.
const MAX_C_STACK: usize = 8000;

pub fn open(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return Err(super::raise(
                    lua,
                    "bad argument #0 to 'pack' (MessagePack pack needs input.)",
                ));
            }
            let mut out = Vec::new();
            let mut budget = MAX_VALUES;
            for a in args.iter() {
                encode(a, 0, &mut out, &mut budget)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| {
            let s = check_string(lua, &args, "unpack")?;
            unpack_full(lua, &s, 0, 0)
        })?,
    )?;
    t.raw_set(
        "unpack_one",
        lua.create_function(|lua, args: MultiValue| {
            let offset = opt_integer(lua, &args, 1, "unpack_one")?.unwrap_or(0);
            let s = check_string(lua, &args, "unpack_one")?;
            unpack_full(lua, &s, 1, offset)
        })?,
    )?;
    t.raw_set(
        "unpack_limit",
        lua.create_function(|lua, args: MultiValue| {
            let limit = opt_integer(lua, &args, 1, "unpack_limit")?.ok_or_else(|| {
                super::raise(
                    lua,
                    &super::bad_arg(1, "unpack_limit", "number", "no value"),
                )
            })?;
            let offset = opt_integer(lua, &args, 2, "unpack_limit")?.unwrap_or(0);
            let s = check_string(lua, &args, "unpack_limit")?;
            unpack_full(lua, &s, limit, offset)
        })?,
    )?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

/// `luaL_checklstring(L, 1)`: strings and numbers (as Lua formats them).
fn check_string(lua: &Lua, args: &MultiValue, fname: &str) -> mlua::Result<Vec<u8>> {
    let v = args.front().unwrap_or(&Value::Nil);
    crate::scripting::vm::to_bytes(v).ok_or_else(|| {
        let got = if args.is_empty() {
            "no value"
        } else {
            v.type_name()
        };
        super::raise(lua, &super::bad_arg(0, fname, "string", got))
    })
}

/// `luaL_optinteger(L, i + 1, ...)`: None when absent or nil; numbers truncated.
fn opt_integer(lua: &Lua, args: &MultiValue, i: usize, fname: &str) -> mlua::Result<Option<i64>> {
    match args.get(i) {
        None | Some(Value::Nil) => Ok(None),
        Some(v) => match num_value(v) {
            Some(n) => Ok(Some(c_trunc_i64(n))),
            None => Err(super::raise(
                lua,
                &super::bad_arg(i, fname, "number", v.type_name()),
            )),
        },
    }
}

// ------------------------------------------------------------------ encoding

fn encode(v: &Value, level: usize, out: &mut Vec<u8>, budget: &mut usize) -> mlua::Result<()> {
    // A table holding many references to itself is encoded 16 levels deep: the work is
    // exponential, and Redis would run (unkillably, inside C) until out of memory. We
    // bound the values and bytes one call may encode instead.
    *budget = budget
        .checked_sub(1)
        .ok_or_else(|| raise_positioned("MessagePack pack: too many values to encode"))?;
    if out.len() > MEMORY_LIMIT {
        return Err(mlua::Error::MemoryError("not enough memory".into()));
    }
    match v {
        Value::String(s) => encode_bytes(&s.as_bytes(), out),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(_) | Value::Number(_) => {
            let n = num_value(v).unwrap_or(0.0);
            if !n.is_infinite() && c_trunc_i64(n) as f64 == n {
                encode_int(c_trunc_i64(n), out);
            } else {
                encode_double(n, out);
            }
        }
        Value::Table(t) if level < MAX_NESTING => {
            if is_array(t)? {
                let len = t.raw_len();
                encode_len(len as u64, 0x90, 0xdc, out);
                for j in 1..=len {
                    let item: Value = t.raw_get(j)?;
                    encode(&item, level + 1, out, budget)?;
                }
            } else {
                let mut len = 0u64;
                for pair in t.clone().pairs::<Value, Value>() {
                    pair?;
                    len += 1;
                }
                encode_len(len, 0x80, 0xde, out);
                for pair in t.clone().pairs::<Value, Value>() {
                    let (k, val) = pair?;
                    encode(&k, level + 1, out, budget)?;
                    encode(&val, level + 1, out, budget)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

/// lua-cmsgpack's `table_is_an_array`: all keys are numbers equal to a positive C `int`,
/// and the largest equals the count (so the keys are exactly 1..n).
fn is_array(t: &Table) -> mlua::Result<bool> {
    let (mut count, mut max) = (0i64, 0i64);
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Number(n) => n,
            Value::Integer(n) => n as f64,
            _ => return Ok(false),
        };
        if n <= 0.0 || c_trunc_i32(n) as f64 != n {
            return Ok(false);
        }
        max = max.max(n as i64);
        count += 1;
    }
    Ok(max == count)
}

fn encode_bytes(s: &[u8], out: &mut Vec<u8>) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

fn encode_double(d: f64, out: &mut Vec<u8>) {
    let f = d as f32;
    if f as f64 == d {
        out.push(0xca);
        out.extend_from_slice(&f.to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&d.to_be_bytes());
    }
}

fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Array or map header: fix form (`fix | n`) up to 15, then 16-bit, then 32-bit (the C
/// library truncates larger counts to 32 bits; a Lua table cannot get there).
fn encode_len(n: u64, fix: u8, tag16: u8, out: &mut Vec<u8>) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(tag16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(tag16 + 1);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

// ------------------------------------------------------------------ decoding

enum DecodeError {
    /// "Missing bytes in input."
    Eof,
    /// "Bad data format in input."
    BadFormat,
    /// A Lua error raised while building the value (stack overflow, table index is nil).
    Lua(mlua::Error),
}

impl From<mlua::Error> for DecodeError {
    fn from(e: mlua::Error) -> Self {
        DecodeError::Lua(e)
    }
}

struct Cursor<'a> {
    s: &'a [u8],
    pos: usize,
    /// Lua stack slots the C library would be using (for its `luaL_checkstack` limits).
    used: usize,
}

const TOO_MANY: &str = "too many return values at once; use unpack_one or unpack_limit instead.";

impl Cursor<'_> {
    fn left(&self) -> usize {
        self.s.len() - self.pos
    }

    /// The next `n` bytes, consumed; `Eof` if the input is shorter.
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        if self.left() < n {
            return Err(DecodeError::Eof);
        }
        let b = &self.s[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    fn be(&mut self, n: usize) -> Result<u64, DecodeError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | b as u64))
    }

    fn check_stack(&self, extra: usize, msg: &str) -> Result<(), DecodeError> {
        if self.used + extra > MAX_C_STACK {
            return Err(DecodeError::Lua(raise_positioned(&format!(
                "stack overflow ({msg})"
            ))));
        }
        Ok(())
    }

    fn decode(&mut self, lua: &Lua) -> Result<Value, DecodeError> {
        if self.left() < 1 {
            return Err(DecodeError::Eof);
        }
        self.check_stack(1, TOO_MANY)?;
        let tag = self.take(1)?[0];
        let num = |n: f64| Ok(Value::Number(n));
        match tag {
            0xcc => num(self.be(1)? as f64),
            0xd0 => num(self.be(1)? as u8 as i8 as f64),
            0xcd => num(self.be(2)? as f64),
            0xd1 => num(self.be(2)? as u16 as i16 as f64),
            0xce => num(self.be(4)? as f64),
            0xd2 => num(self.be(4)? as u32 as i32 as f64),
            // The C library pushes uint64 through lua_Integer: values past i64 wrap.
            0xcf | 0xd3 => num(self.be(8)? as i64 as f64),
            0xc0 => Ok(Value::Nil),
            0xc3 => Ok(Value::Boolean(true)),
            0xc2 => Ok(Value::Boolean(false)),
            0xca => num(f32::from_bits(self.be(4)? as u32) as f64),
            0xcb => num(f64::from_bits(self.be(8)?)),
            0xd9 => self.string(lua, 1),
            0xda => self.string(lua, 2),
            0xdb => self.string(lua, 4),
            0xdc => {
                let n = self.be(2)?;
                self.array(lua, n)
            }
            0xdd => {
                let n = self.be(4)?;
                self.array(lua, n)
            }
            0xde => {
                let n = self.be(2)?;
                self.map(lua, n)
            }
            0xdf => {
                let n = self.be(4)?;
                self.map(lua, n)
            }
            t if t & 0x80 == 0 => num(t as f64),
            t if t & 0xe0 == 0xe0 => num(t as i8 as f64),
            t if t & 0xe0 == 0xa0 => {
                let b = self.take((t & 0x1f) as usize)?;
                Ok(Value::String(lua.create_string(b)?))
            }
            t if t & 0xf0 == 0x90 => self.array(lua, (t & 0xf) as u64),
            t if t & 0xf0 == 0x80 => self.map(lua, (t & 0xf) as u64),
            _ => Err(DecodeError::BadFormat),
        }
    }

    /// A string whose length is the next `width` bytes.
    fn string(&mut self, lua: &Lua, width: usize) -> Result<Value, DecodeError> {
        let len = self.be(width)?;
        let len = usize::try_from(len).map_err(|_| DecodeError::Eof)?;
        let b = self.take(len)?;
        Ok(Value::String(lua.create_string(b)?))
    }

    /// `n` elements: the count is only trusted as far as the input goes.
    fn array(&mut self, lua: &Lua, n: u64) -> Result<Value, DecodeError> {
        let t = lua.create_table()?;
        self.used += 1;
        self.check_stack(1, "in function mp_decode_to_lua_array")?;
        for i in 1..=n {
            self.used += 1;
            let v = self.decode(lua)?;
            self.used -= 1;
            t.raw_set(i, v)?;
        }
        self.used -= 1;
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: u64) -> Result<Value, DecodeError> {
        let t = lua.create_table()?;
        self.used += 1;
        for _ in 0..n {
            let k = self.decode(lua)?;
            self.used += 1;
            let v = self.decode(lua)?;
            self.used -= 1;
            // lua_settable's own errors, raised without a position as Lua does.
            match &k {
                Value::Nil => return Err(DecodeError::Lua(lua_error("table index is nil"))),
                Value::Number(x) if x.is_nan() => {
                    return Err(DecodeError::Lua(lua_error("table index is NaN")))
                }
                _ => t.raw_set(k, v)?,
            }
        }
        self.used -= 1;
        Ok(Value::Table(t))
    }
}

fn lua_error(msg: &str) -> mlua::Error {
    mlua::Error::RuntimeError(msg.to_string())
}

/// lua-cmsgpack's `mp_unpack_full`: `limit` values from `offset` (both 0: every value,
/// without the next offset); with a limit or offset, the next offset (-1 at the end)
/// comes first.
fn unpack_full(lua: &Lua, s: &[u8], limit: i64, offset: i64) -> mlua::Result<MultiValue> {
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        return Err(raise_positioned(&format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32,
            s.len() as i32
        )));
    }
    if offset as u64 > s.len() as u64 {
        return Err(raise_positioned(&format!(
            "Start offset {} greater than input length {}.",
            offset as i32,
            s.len() as i32
        )));
    }
    let limit = if decode_all { i32::MAX as i64 } else { limit };
    // The string argument stays on the C function's stack.
    let mut c = Cursor {
        s,
        pos: offset as usize,
        used: 1,
    };
    // mlua keeps one more slot than a C function when returning values: results are
    // limited one earlier than in Redis (7998 at once rather than 7999), with Redis's
    // error.
    let fail = |e: DecodeError| match e {
        DecodeError::Lua(e) => e,
        _ => lua_error("stack overflow"),
    };
    let mut out = MultiValue::new();
    let mut count = 0i64;
    while c.left() > 0 && count < limit {
        c.check_stack(2, TOO_MANY).map_err(fail)?;
        match c.decode(lua) {
            Ok(v) => out.push_back(v),
            Err(DecodeError::Eof) => return Err(raise_positioned("Missing bytes in input.")),
            Err(DecodeError::BadFormat) => {
                return Err(raise_positioned("Bad data format in input."))
            }
            Err(DecodeError::Lua(e)) => return Err(e),
        }
        c.used += 1;
        count += 1;
    }
    if !decode_all {
        c.check_stack(2, "in function mp_unpack_full")
            .map_err(fail)?;
        let next = if c.left() == 0 { -1 } else { c.pos as i64 };
        out.push_front(Value::Number(next as f64));
    }
    Ok(out)
}
