//! `cjson`: lua-cjson 2.1 as Redis ships it. Numbers are written with `%.14g`, NaN and
//! infinities refused, sparse arrays refused past lua-cjson's ratio (more than twice as
//! many slots as items, beyond 10), nesting limited to 1000 levels both ways, and parse
//! errors reported with lua-cjson's token names and 1-based character positions.
//! `cjson.null` is a NULL light userdata.

use std::cell::Cell;
use std::rc::Rc;

use mlua::{LightUserData, Lua, Table, Value};

use super::{lib_fn, ret};
use crate::scripting::format_g;

const DEFAULT_DEPTH: i64 = 1000;
const SPARSE_RATIO: usize = 2;
const SPARSE_SAFE: usize = 10;

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

pub fn open(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let enc_depth = Rc::new(Cell::new(DEFAULT_DEPTH));
    let dec_depth = Rc::new(Cell::new(DEFAULT_DEPTH));
    let d = enc_depth.clone();
    t.raw_set(
        "encode",
        lib_fn(lua, move |lua, a| {
            if a.len() != 1 {
                return Err("expected 1 argument".into());
            }
            let mut out = Vec::new();
            encode(&a[0], 0, d.get() as usize, &mut out)?;
            ret(lua, lua.create_string(&out).map_err(|e| e.to_string())?)
        })?,
    )?;
    let d = dec_depth.clone();
    t.raw_set(
        "decode",
        lib_fn(lua, move |lua, a| {
            if a.len() != 1 {
                return Err("expected 1 argument".into());
            }
            let s = match &a[0] {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Number(n) => format_g(*n, 14).into_bytes(),
                Value::Integer(n) => n.to_string().into_bytes(),
                other => {
                    return Err(format!(
                        "bad argument #1 to 'decode' (string expected, got {})",
                        other.type_name()
                    ))
                }
            };
            let mut p = Parser {
                s: &s,
                pos: 0,
                depth: 0,
                max_depth: d.get() as usize,
                lua,
            };
            let v = p.parse_top()?;
            ret(lua, v)
        })?,
    )?;
    for (name, cell) in [
        ("encode_max_depth", enc_depth),
        ("decode_max_depth", dec_depth),
    ] {
        t.raw_set(
            name,
            lib_fn(lua, move |lua, a| {
                if let Some(v) = a.front().filter(|v| !v.is_nil()) {
                    let n = match v {
                        Value::Number(n) => *n as i64,
                        Value::Integer(n) => *n,
                        _ => return Err(format!("bad argument #1 to '{name}' (number expected)")),
                    };
                    if !(1..=i32::MAX as i64).contains(&n) {
                        return Err(format!("bad argument #1 to '{name}' (expected integer between 1 and 2147483647)"));
                    }
                    cell.set(n);
                }
                ret(lua, cell.get())
            })?,
        )?;
    }
    t.raw_set(
        "encode_number_precision",
        lib_fn(lua, |lua, _| ret(lua, 14))?,
    )?;
    t.raw_set(
        "encode_sparse_array",
        lib_fn(lua, |lua, _| ret(lua, (false, 2, 10)))?,
    )?;
    t.raw_set(
        "encode_invalid_numbers",
        lib_fn(lua, |lua, _| ret(lua, false))?,
    )?;
    t.raw_set(
        "decode_invalid_numbers",
        lib_fn(lua, |lua, _| ret(lua, true))?,
    )?;
    t.raw_set("null", null())?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

fn encode_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{:04x}", c).as_bytes()),
            _ => out.push(c),
        }
    }
    out.push(b'"');
}

fn encode_number(n: f64, out: &mut Vec<u8>) -> Result<(), String> {
    if !n.is_finite() {
        return Err("Cannot serialise number: must not be NaN or Inf".into());
    }
    out.extend_from_slice(format_g(n, 14).as_bytes());
    Ok(())
}

/// lua-cjson's `lua_array_length`: `Some(max index)` if every key is a positive
/// integer, `None` for an object; an error for an excessively sparse array.
fn array_length(t: &Table) -> Result<Option<usize>, String> {
    let mut max = 0usize;
    let mut items = 0usize;
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair.map_err(|e| e.to_string())?;
        let n = match k {
            Value::Number(n) => n,
            Value::Integer(n) => n as f64,
            _ => return Ok(None),
        };
        if n < 1.0 || n.floor() != n {
            return Ok(None);
        }
        max = max.max(n as usize);
        items += 1;
    }
    if max > SPARSE_SAFE && max > items * SPARSE_RATIO {
        return Err("Cannot serialise table: excessively sparse array".into());
    }
    Ok(Some(max))
}

fn encode(v: &Value, depth: usize, max_depth: usize, out: &mut Vec<u8>) -> Result<(), String> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => encode_number(*n, out)?,
        Value::Integer(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::String(s) => encode_string(&s.as_bytes(), out),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Table(t) => {
            let depth = depth + 1;
            if depth > max_depth {
                return Err(format!("Cannot serialise, excessive nesting ({depth})"));
            }
            match array_length(t)? {
                Some(len) if len > 0 => {
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        let item: Value = t.raw_get(i).map_err(|e| e.to_string())?;
                        encode(&item, depth, max_depth, out)?;
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in t.clone().pairs::<Value, Value>() {
                        let (k, val) = pair.map_err(|e| e.to_string())?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match &k {
                            Value::String(s) => encode_string(&s.as_bytes(), out),
                            Value::Number(n) => {
                                out.push(b'"');
                                encode_number(*n, out)?;
                                out.push(b'"');
                            }
                            Value::Integer(n) => {
                                out.extend_from_slice(format!("\"{n}\"").as_bytes())
                            }
                            _ => {
                                return Err(
                                    "Cannot serialise table: table key must be a number or string"
                                        .into(),
                                )
                            }
                        }
                        out.push(b':');
                        encode(&val, depth, max_depth, out)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => {
            return Err(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            ))
        }
    }
    Ok(())
}

/// Token kinds with lua-cjson's names.
#[derive(Clone, Copy, PartialEq)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Num,
    Bool,
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Tok {
    fn name(self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str => "T_STRING",
            Tok::Num => "T_NUMBER",
            Tok::Bool => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(s) => s,
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    depth: usize,
    max_depth: usize,
    lua: &'a Lua,
}

/// A token with its start index and value.
struct Token {
    kind: Tok,
    at: usize,
    value: Value,
}

impl Parser<'_> {
    fn err(&self, expected: &str, t: &Token) -> String {
        format!(
            "Expected {expected} but found {} at character {}",
            t.kind.name(),
            t.at + 1
        )
    }

    fn next_token(&mut self) -> Result<Token, String> {
        while self.pos < self.s.len() && matches!(self.s[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let at = self.pos;
        let mk = |kind, value| Token { kind, at, value };
        let Some(&c) = self.s.get(self.pos) else {
            return Ok(mk(Tok::End, Value::Nil));
        };
        let simple = match c {
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b':' => Some(Tok::Colon),
            b',' => Some(Tok::Comma),
            _ => None,
        };
        if let Some(k) = simple {
            self.pos += 1;
            return Ok(mk(k, Value::Nil));
        }
        if c == b'"' {
            return Ok(match self.string() {
                Ok(v) => mk(Tok::Str, v),
                // lua-cjson reports a string error where the scan stopped.
                Err((e, at)) => Token {
                    kind: Tok::Error(e),
                    at,
                    value: Value::Nil,
                },
            });
        }
        if c == b'-' || c.is_ascii_digit() || matches!(c, b'i' | b'I' | b'n' | b'N') {
            if let Some(n) = self.number() {
                return Ok(mk(Tok::Num, Value::Number(n)));
            }
            if !matches!(c, b'n' | b'N') || !self.s[self.pos..].starts_with(b"null") {
                return Ok(mk(Tok::Error("invalid number"), Value::Nil));
            }
        }
        for (word, kind, val) in [
            (&b"true"[..], Tok::Bool, Value::Boolean(true)),
            (b"false", Tok::Bool, Value::Boolean(false)),
            (b"null", Tok::Null, null()),
        ] {
            if self.s[self.pos..].starts_with(word) {
                self.pos += word.len();
                return Ok(mk(kind, val));
            }
        }
        Ok(mk(Tok::Error("invalid token"), Value::Nil))
    }

    /// strtod-like number scan (decimal, hex, inf, nan), as lua-cjson's fpconv_strtod.
    fn number(&mut self) -> Option<f64> {
        let rest = &self.s[self.pos..];
        let mut end = 0;
        while end < rest.len()
            && (rest[end].is_ascii_alphanumeric() || matches!(rest[end], b'-' | b'+' | b'.'))
        {
            end += 1;
        }
        // Find the longest prefix that parses.
        while end > 0 {
            let t = std::str::from_utf8(&rest[..end]).ok()?;
            let (neg, body) = match t.strip_prefix('-') {
                Some(b) => (true, b),
                None => (false, t.strip_prefix('+').unwrap_or(t)),
            };
            let lower = body.to_ascii_lowercase();
            let v = if let Some(h) = lower.strip_prefix("0x") {
                if h.is_empty() || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                    None
                } else {
                    u64::from_str_radix(h, 16).ok().map(|v| v as f64)
                }
            } else if lower == "inf" || lower == "infinity" {
                Some(f64::INFINITY)
            } else if lower == "nan" {
                Some(f64::NAN)
            } else if body
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_digit() || b == b'.')
            {
                body.parse::<f64>().ok()
            } else {
                None
            };
            if let Some(v) = v {
                self.pos += end;
                return Some(if neg { -v } else { v });
            }
            end -= 1;
        }
        None
    }

    fn string(&mut self) -> Result<Value, (&'static str, usize)> {
        let mut out = Vec::new();
        self.pos += 1;
        loop {
            let Some(&c) = self.s.get(self.pos) else {
                return Err(("unexpected end of string", self.pos));
            };
            let esc_at = self.pos;
            self.pos += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let Some(&e) = self.s.get(self.pos) else {
                        return Err(("unexpected end of string", self.pos));
                    };
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            const BAD: &str = "invalid unicode escape code";
                            let cp = self.unicode_escape().ok_or((BAD, esc_at))?;
                            let ch = char::from_u32(cp).ok_or((BAD, esc_at))?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return Err(("invalid escape code", esc_at)),
                    }
                }
                _ => out.push(c),
            }
        }
        self.lua
            .create_string(&out)
            .map(Value::String)
            .map_err(|_| ("not enough memory", self.pos))
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.pos..self.pos + 4)?;
        let v = u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?;
        self.pos += 4;
        Some(v)
    }

    fn unicode_escape(&mut self) -> Option<u32> {
        let hi = self.hex4()?;
        if (0xDC00..0xE000).contains(&hi) {
            return None;
        }
        if (0xD800..0xDC00).contains(&hi) {
            if self.s.get(self.pos..self.pos + 2) != Some(b"\\u") {
                return None;
            }
            self.pos += 2;
            let lo = self.hex4()?;
            if !(0xDC00..0xE000).contains(&lo) {
                return None;
            }
            return Some(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00));
        }
        Some(hi)
    }

    fn parse_top(&mut self) -> Result<Value, String> {
        let t = self.next_token()?;
        let v = self.value(t)?;
        let end = self.next_token()?;
        if end.kind != Tok::End {
            return Err(self.err("the end", &end));
        }
        Ok(v)
    }

    fn enter(&mut self, t: &Token) -> Result<(), String> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return Err(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth,
                t.at + 1
            ));
        }
        Ok(())
    }

    fn value(&mut self, t: Token) -> Result<Value, String> {
        match t.kind {
            Tok::Str | Tok::Num | Tok::Bool | Tok::Null => Ok(t.value),
            Tok::ObjBegin => {
                self.enter(&t)?;
                let obj = self.lua.create_table().map_err(|e| e.to_string())?;
                let mut k = self.next_token()?;
                if k.kind != Tok::ObjEnd {
                    loop {
                        if k.kind != Tok::Str {
                            return Err(self.err("object key string", &k));
                        }
                        let colon = self.next_token()?;
                        if colon.kind != Tok::Colon {
                            return Err(self.err("colon", &colon));
                        }
                        let vt = self.next_token()?;
                        let v = self.value(vt)?;
                        obj.raw_set(k.value, v).map_err(|e| e.to_string())?;
                        let sep = self.next_token()?;
                        match sep.kind {
                            Tok::ObjEnd => break,
                            Tok::Comma => k = self.next_token()?,
                            _ => return Err(self.err("comma or object end", &sep)),
                        }
                    }
                }
                self.depth -= 1;
                Ok(Value::Table(obj))
            }
            Tok::ArrBegin => {
                self.enter(&t)?;
                let arr = self.lua.create_table().map_err(|e| e.to_string())?;
                let mut vt = self.next_token()?;
                if vt.kind != Tok::ArrEnd {
                    let mut i = 1;
                    loop {
                        let v = self.value(vt)?;
                        arr.raw_set(i, v).map_err(|e| e.to_string())?;
                        i += 1;
                        let sep = self.next_token()?;
                        match sep.kind {
                            Tok::ArrEnd => break,
                            Tok::Comma => vt = self.next_token()?,
                            _ => return Err(self.err("comma or array end", &sep)),
                        }
                    }
                }
                self.depth -= 1;
                Ok(Value::Table(arr))
            }
            _ => Err(self.err("value", &t)),
        }
    }
}
