//! `cjson`: lua-cjson 2.1 as Redis ships it, with its defaults: numbers written with
//! `%.14g`, NaN and infinities refused, sparse arrays refused past lua-cjson's ratio
//! (more than twice as many slots as items, beyond 10), nesting limited to 1000 levels
//! both ways; the `encode_*` / `decode_*` functions change these per VM as lua-cjson's
//! do. Parse errors are reported with lua-cjson's token names and 1-based character
//! positions. `cjson.null` is a NULL light userdata.

use std::cell::Cell;
use std::rc::Rc;

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

use super::{check_number, lib_fn, ret};
use crate::scripting::format_g;

const DEFAULT_DEPTH: i64 = 1000;

/// lua-cjson's per-VM configuration (`json_config_t`), changed by the `encode_*` /
/// `decode_*` functions and shared by `encode` and `decode`.
struct Config {
    sparse_convert: Cell<bool>,
    sparse_ratio: Cell<i64>,
    sparse_safe: Cell<i64>,
    encode_depth: Cell<i64>,
    decode_depth: Cell<i64>,
    /// 0: refuse NaN and infinities, 1: write them (`nan`, `inf`), 2: write `null`.
    encode_invalid: Cell<usize>,
    decode_invalid: Cell<bool>,
    /// Whether lua-cjson keeps its encode buffer between calls: only a memory
    /// trade-off there (it never changes a result), reported back as set.
    keep_buffer: Cell<bool>,
    precision: Cell<i64>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sparse_convert: Cell::new(false),
            sparse_ratio: Cell::new(2),
            sparse_safe: Cell::new(10),
            encode_depth: Cell::new(DEFAULT_DEPTH),
            decode_depth: Cell::new(DEFAULT_DEPTH),
            encode_invalid: Cell::new(0),
            decode_invalid: Cell::new(true),
            keep_buffer: Cell::new(true),
            precision: Cell::new(14),
        }
    }
}

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// lua-cjson's `json_arg_init`: at most `max` arguments.
fn check_arg_count(a: &MultiValue, max: usize) -> Result<(), String> {
    if a.len() > max {
        return Err(format!(
            "bad argument #{} to '?' (found too many arguments)",
            max + 1
        ));
    }
    Ok(())
}

/// `json_integer_option`: argument `i` (if not nil) sets `cell` within `min..=max`;
/// returns the setting.
fn integer_option(
    a: &MultiValue,
    i: usize,
    cell: &Cell<i64>,
    min: i64,
    max: i64,
    name: &str,
) -> Result<i64, String> {
    if let Some(v) = a.get(i).filter(|v| !v.is_nil()) {
        let n = match v {
            Value::Number(n) => *n as i64,
            Value::Integer(n) => *n,
            Value::String(_) => check_number(a, i, name)? as i64,
            other => {
                return Err(format!(
                    "bad argument #{} to '{name}' (number expected, got {})",
                    i + 1,
                    other.type_name()
                ))
            }
        };
        if !(min..=max).contains(&n) {
            return Err(format!(
                "bad argument #{} to '{name}' (expected integer between {min} and {max})",
                i + 1
            ));
        }
        cell.set(n);
    }
    Ok(cell.get())
}

/// `json_enum_option`: a boolean or one of `options` (by name) at argument `i`; the
/// setting's index. `options[0]`/`options[1]` are off/on.
fn enum_option(
    a: &MultiValue,
    i: usize,
    options: &[&str],
    name: &str,
) -> Result<Option<usize>, String> {
    match a.get(i) {
        None | Some(Value::Nil) => Ok(None),
        Some(Value::Boolean(b)) => Ok(Some(*b as usize)),
        Some(v) => {
            let s = match v {
                Value::String(s) => s.to_string_lossy(),
                Value::Integer(n) => n.to_string(),
                Value::Number(n) => format_g(*n, 14),
                other => {
                    return Err(format!(
                        "bad argument #{} to '{name}' (string expected, got {})",
                        i + 1,
                        other.type_name()
                    ))
                }
            };
            match options.iter().position(|o| *o == s) {
                Some(p) => Ok(Some(p)),
                None => Err(format!(
                    "bad argument #{} to '{name}' (invalid option '{s}')",
                    i + 1
                )),
            }
        }
    }
}

/// What an enum setting reads back as: a boolean for off/on, else the option name.
fn enum_value(lua: &Lua, setting: usize, options: &[&str]) -> Result<Value, String> {
    if setting <= 1 {
        Ok(Value::Boolean(setting == 1))
    } else {
        Ok(Value::String(
            lua.create_string(options[setting])
                .map_err(|e| e.to_string())?,
        ))
    }
}

const BOOL_OPTIONS: &[&str] = &["off", "on"];
const INVALID_NUMBER_OPTIONS: &[&str] = &["off", "on", "null"];

pub fn open(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let cfg = Rc::new(Config::default());
    let c = cfg.clone();
    t.raw_set(
        "encode",
        lib_fn(lua, move |lua, a| {
            if a.len() != 1 {
                return Err("expected 1 argument".into());
            }
            let mut out = Vec::new();
            encode(&a[0], 0, &c, &mut out)?;
            ret(lua, lua.create_string(&out).map_err(|e| e.to_string())?)
        })?,
    )?;
    let c = cfg.clone();
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
                max_depth: c.decode_depth.get() as usize,
                invalid_numbers: c.decode_invalid.get(),
                lua,
            };
            let v = p.parse_top()?;
            ret(lua, v)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_max_depth",
        lib_fn(lua, move |lua, a| {
            check_arg_count(&a, 1)?;
            let n = integer_option(
                &a,
                0,
                &c.encode_depth,
                1,
                i32::MAX as i64,
                "encode_max_depth",
            )?;
            ret(lua, n)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode_max_depth",
        lib_fn(lua, move |lua, a| {
            check_arg_count(&a, 1)?;
            let n = integer_option(
                &a,
                0,
                &c.decode_depth,
                1,
                i32::MAX as i64,
                "decode_max_depth",
            )?;
            ret(lua, n)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_number_precision",
        lib_fn(lua, move |lua, a| {
            check_arg_count(&a, 1)?;
            let n = integer_option(&a, 0, &c.precision, 1, 14, "encode_number_precision")?;
            ret(lua, n)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_sparse_array",
        lib_fn(lua, move |lua, a| {
            check_arg_count(&a, 3)?;
            if let Some(v) = enum_option(&a, 0, BOOL_OPTIONS, "encode_sparse_array")? {
                c.sparse_convert.set(v == 1);
            }
            let ratio = integer_option(
                &a,
                1,
                &c.sparse_ratio,
                0,
                i32::MAX as i64,
                "encode_sparse_array",
            )?;
            let safe = integer_option(
                &a,
                2,
                &c.sparse_safe,
                0,
                i32::MAX as i64,
                "encode_sparse_array",
            )?;
            ret(lua, (c.sparse_convert.get(), ratio, safe))
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_invalid_numbers",
        lib_fn(lua, move |lua, a| {
            check_arg_count(&a, 1)?;
            if let Some(v) = enum_option(&a, 0, INVALID_NUMBER_OPTIONS, "encode_invalid_numbers")? {
                c.encode_invalid.set(v);
            }
            ret(
                lua,
                enum_value(lua, c.encode_invalid.get(), INVALID_NUMBER_OPTIONS)?,
            )
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode_invalid_numbers",
        lib_fn(lua, move |lua, a| {
            check_arg_count(&a, 1)?;
            if let Some(v) = enum_option(&a, 0, BOOL_OPTIONS, "decode_invalid_numbers")? {
                c.decode_invalid.set(v == 1);
            }
            ret(lua, c.decode_invalid.get())
        })?,
    )?;
    let c = cfg;
    t.raw_set(
        "encode_keep_buffer",
        lib_fn(lua, move |lua, a| {
            check_arg_count(&a, 1)?;
            if let Some(v) = enum_option(&a, 0, BOOL_OPTIONS, "encode_keep_buffer")? {
                c.keep_buffer.set(v == 1);
            }
            ret(lua, c.keep_buffer.get())
        })?,
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

fn encode_number(n: f64, cfg: &Config, out: &mut Vec<u8>) -> Result<(), String> {
    match cfg.encode_invalid.get() {
        0 if !n.is_finite() => return Err("Cannot serialise number: must not be NaN or Inf".into()),
        // lua-cjson writes NaN itself: some platforms would print "-nan".
        1 if n.is_nan() => {
            out.extend_from_slice(b"nan");
            return Ok(());
        }
        2 if !n.is_finite() => {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        _ => {}
    }
    out.extend_from_slice(format_g(n, cfg.precision.get() as usize).as_bytes());
    Ok(())
}

/// lua-cjson's `lua_array_length`: `Some(max index)` if every key is a positive
/// integer, `None` for an object; an error for an excessively sparse array.
fn array_length(t: &Table, cfg: &Config) -> Result<Option<usize>, String> {
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
    let ratio = cfg.sparse_ratio.get() as usize;
    if ratio > 0 && max > items.saturating_mul(ratio) && max > cfg.sparse_safe.get() as usize {
        if !cfg.sparse_convert.get() {
            return Err("Cannot serialise table: excessively sparse array".into());
        }
        return Ok(None);
    }
    Ok(Some(max))
}

fn encode(v: &Value, depth: usize, cfg: &Config, out: &mut Vec<u8>) -> Result<(), String> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => encode_number(*n, cfg, out)?,
        Value::Integer(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::String(s) => encode_string(&s.as_bytes(), out),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Table(t) => {
            let depth = depth + 1;
            if depth > cfg.encode_depth.get() as usize {
                return Err(format!("Cannot serialise, excessive nesting ({depth})"));
            }
            match array_length(t, cfg)? {
                Some(len) if len > 0 => {
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        let item: Value = t.raw_get(i).map_err(|e| e.to_string())?;
                        encode(&item, depth, cfg, out)?;
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
                                encode_number(*n, cfg, out)?;
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
                        encode(&val, depth, cfg, out)?;
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
    /// `decode_invalid_numbers`: whether NaN, infinities, hex and leading zeros parse.
    invalid_numbers: bool,
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
        if !self.invalid_numbers && (c == b'-' || c.is_ascii_digit()) && self.invalid_number_ahead()
        {
            return Ok(mk(Tok::Error("invalid number"), Value::Nil));
        }
        let invalid_start = matches!(c, b'i' | b'I' | b'n' | b'N');
        if c == b'-' || c.is_ascii_digit() || (invalid_start && self.invalid_numbers) {
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

    /// lua-cjson's `json_is_invalid_number` at the current position (which starts
    /// with `-` or a digit): hex, a leading zero, or a signed inf/nan.
    fn invalid_number_ahead(&self) -> bool {
        let mut p = &self.s[self.pos..];
        if p.first() == Some(&b'-') {
            p = &p[1..];
        }
        match p.first() {
            Some(b'0') => matches!(p.get(1), Some(c) if (c | 0x20) == b'x' || c.is_ascii_digit()),
            Some(c) if *c <= b'9' => false,
            _ => {
                let head: Vec<u8> = p.iter().take(3).map(|c| c.to_ascii_lowercase()).collect();
                head == b"inf" || head == b"nan"
            }
        }
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
