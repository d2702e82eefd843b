//! `struct`: Roberto Ierusalimschy's struct library (1.7) as Redis ships it, with
//! Redis's hardening: `pack`, `unpack`, `size`.
//!
//! Formats: `>` `<` endianness (native is little), `![n]` alignment (power of two,
//! default 8), `x` a zero byte, `b B h H l L T` signed/unsigned 1, 2, 8, 8 and 8 bytes,
//! `i[n] I[n]` integers of n bytes (default 4, at most 32), `f d` float and double,
//! `c[n]` n chars (pack: 0 means the whole string; unpack: 0 takes the length from the
//! previous result), `s` a zero-terminated string, ` ` ignored. The format stops at a
//! NUL byte, as a C string would.
//!
//! Every offset and length is checked against the data before it is read, with
//! arithmetic that cannot wrap (the C library's unchecked `pos + size` is where
//! CVE-2020-14147 came from): where C would read outside the string we report
//! "data string too short". Number conversions reproduce the C casts on x86-64
//! (`c_trunc_i64`, `c_f64_to_u64`), and the C function's Lua stack limit ("too many
//! results") is enforced at the same count.

use mlua::{Lua, MultiValue, Table, Value};

use super::raise;
use super::{arg_error, bad_arg, c_f64_to_u64, c_trunc_i64, num_value};
use crate::scripting::vm::to_bytes;

const MAX_INT_SIZE: i64 = 32;
/// Default alignment for `!` (the alignment of double on x86-64).
const MAX_ALIGN: i64 = 8;
/// Lua 5.1's LUAI_MAXCSTACK.
const MAX_C_STACK: usize = 8000;

pub fn open(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            let out = pack(&args).map_err(|m| raise(lua, &m))?;
            lua.create_string(&out)
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| {
            unpack(lua, &args).map_err(|e| match e {
                Fail::Msg(m) => raise(lua, &m),
                Fail::Lua(e) => e,
            })
        })?,
    )?;
    t.raw_set(
        "size",
        lua.create_function(|lua, args: MultiValue| size(&args).map_err(|m| raise(lua, &m)))?,
    )?;
    Ok(t)
}

enum Fail {
    Msg(String),
    Lua(mlua::Error),
}

impl From<String> for Fail {
    fn from(m: String) -> Self {
        Fail::Msg(m)
    }
}

impl From<mlua::Error> for Fail {
    fn from(e: mlua::Error) -> Self {
        Fail::Lua(e)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Endian {
    Big,
    Little,
}

struct Header {
    endian: Endian,
    align: i64,
}

impl Header {
    fn new() -> Header {
        Header {
            endian: Endian::Little,
            align: 1,
        }
    }
}

/// A format string being read, with the function name for argument errors.
struct Format<'a> {
    f: &'a [u8],
    i: usize,
    fname: &'static str,
}

impl Format<'_> {
    fn next(&mut self) -> Option<u8> {
        let c = *self.f.get(self.i)?;
        self.i += 1;
        Some(c)
    }

    /// `getnum`: an optional decimal count, refusing C `int` overflow.
    fn num(&mut self, default: i64) -> Result<i64, String> {
        if !self.f.get(self.i).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut a: i64 = 0;
        while let Some(&d) = self.f.get(self.i).filter(|d| d.is_ascii_digit()) {
            let d = (d - b'0') as i64;
            if a > i32::MAX as i64 / 10 || a * 10 > i32::MAX as i64 - d {
                return Err("integral size overflow".into());
            }
            a = a * 10 + d;
            self.i += 1;
        }
        Ok(a)
    }

    /// `optsize`: the size of option `opt` (reading its count).
    fn size(&mut self, opt: u8) -> Result<u64, String> {
        Ok(match opt {
            b'b' | b'B' => 1,
            b'h' | b'H' => 2,
            b'l' | b'L' | b'T' | b'd' => 8,
            b'f' => 4,
            b'x' => 1,
            b'c' => self.num(1)? as u64,
            b'i' | b'I' => {
                let sz = self.num(4)?;
                if sz > MAX_INT_SIZE {
                    return Err(format!(
                        "integral size {sz} is larger than limit of {MAX_INT_SIZE}"
                    ));
                }
                sz as u64
            }
            _ => 0,
        })
    }

    /// `controloptions`: endianness, alignment, spaces; anything else is invalid.
    fn control(&mut self, opt: u8, h: &mut Header) -> Result<(), String> {
        match opt {
            b' ' => {}
            b'>' => h.endian = Endian::Big,
            b'<' => h.endian = Endian::Little,
            b'!' => {
                let a = self.num(MAX_ALIGN)?;
                if a <= 0 || a & (a - 1) != 0 {
                    return Err(format!("alignment {a} is not a power of 2"));
                }
                h.align = a;
            }
            _ => {
                return Err(arg_error(
                    0,
                    self.fname,
                    &format!("invalid format option '{}'", opt as char),
                ))
            }
        }
        Ok(())
    }
}

/// `gettoalign`: padding before an item of `size` at `len` (sizes need not be powers
/// of two; the C formula is kept, with wrapping arithmetic).
fn to_align(len: u64, h: &Header, opt: u8, size: u64) -> u64 {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align as u64);
    size.wrapping_sub(len & size.wrapping_sub(1)) & size.wrapping_sub(1)
}

/// The format string argument (a C string: it ends at the first NUL).
fn format_arg(args: &MultiValue, fname: &'static str) -> Result<Vec<u8>, String> {
    let v = args.front().unwrap_or(&Value::Nil);
    let mut f = to_bytes(v).ok_or_else(|| {
        let got = if args.is_empty() {
            "no value"
        } else {
            v.type_name()
        };
        bad_arg(0, fname, "string", got)
    })?;
    if let Some(z) = memchr::memchr(0, &f) {
        f.truncate(z);
    }
    Ok(f)
}

/// The type name `luaL_check*` reports for argument `i` (0-based) of pack, whose
/// C function pushes a nil right after its arguments.
fn pack_got(args: &MultiValue, i: usize) -> &'static str {
    match args.get(i) {
        Some(v) => v.type_name(),
        None if i == args.len() => "nil",
        None => "no value",
    }
}

fn pack(args: &MultiValue) -> Result<Vec<u8>, String> {
    let fmt = format_arg(args, "pack")?;
    let mut f = Format {
        f: &fmt,
        i: 0,
        fname: "pack",
    };
    let mut h = Header::new();
    let mut arg = 1usize;
    let mut out = Vec::new();
    let number = |arg: usize| -> Result<f64, String> {
        args.get(arg)
            .and_then(num_value)
            .ok_or_else(|| bad_arg(arg, "pack", "number", pack_got(args, arg)))
    };
    while let Some(opt) = f.next() {
        let mut size = f.size(opt)?;
        let pad = to_align(out.len() as u64, &h, opt, size);
        out.resize(out.len() + pad as usize, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = number(arg)?;
                arg += 1;
                let mut value = if n < 0.0 {
                    c_trunc_i64(n) as u64
                } else {
                    c_f64_to_u64(n)
                };
                let mut bytes = vec![0u8; size as usize];
                for k in 0..size as usize {
                    let at = if h.endian == Endian::Little {
                        k
                    } else {
                        size as usize - 1 - k
                    };
                    bytes[at] = value as u8;
                    value = value.checked_shr(8).unwrap_or(0);
                }
                out.extend_from_slice(&bytes);
            }
            b'x' => out.push(0),
            b'f' => {
                let v = number(arg)? as f32;
                arg += 1;
                match h.endian {
                    Endian::Little => out.extend_from_slice(&v.to_le_bytes()),
                    Endian::Big => out.extend_from_slice(&v.to_be_bytes()),
                }
            }
            b'd' => {
                let v = number(arg)?;
                arg += 1;
                match h.endian {
                    Endian::Little => out.extend_from_slice(&v.to_le_bytes()),
                    Endian::Big => out.extend_from_slice(&v.to_be_bytes()),
                }
            }
            b'c' | b's' => {
                let s = args
                    .get(arg)
                    .and_then(to_bytes)
                    .ok_or_else(|| bad_arg(arg, "pack", "string", pack_got(args, arg)))?;
                arg += 1;
                if size == 0 {
                    size = s.len() as u64;
                }
                if (s.len() as u64) < size {
                    // The C library reports the argument after the string.
                    return Err(arg_error(arg, "pack", "string too short"));
                }
                out.extend_from_slice(&s[..size as usize]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => f.control(opt, &mut h)?,
        }
    }
    Ok(out)
}

/// The unsigned value of `size` bytes at `b` (only the low 8 bytes survive, as in C).
fn get_integer(b: &[u8], endian: Endian, signed: bool, size: usize) -> f64 {
    let mut l: u64 = 0;
    let mut push = |byte: u8| l = (l << 8) | byte as u64;
    match endian {
        Endian::Big => b[..size].iter().for_each(|&x| push(x)),
        Endian::Little => b[..size].iter().rev().for_each(|&x| push(x)),
    }
    if !signed {
        return l as f64;
    }
    // C shifts by `size*8 - 1`; x86-64 takes the count modulo 64.
    let mask = u64::MAX << ((size as i64 * 8 - 1) & 63);
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

/// Whether `size` bytes fit at `pos` in data of `len` bytes, without wrapping.
fn fits(pos: u64, size: u64, len: u64) -> bool {
    size <= len && pos <= len - size
}

fn unpack(lua: &Lua, args: &MultiValue) -> Result<MultiValue, Fail> {
    let fmt = format_arg(args, "unpack")?;
    let data = args.get(1).and_then(to_bytes).ok_or_else(|| {
        let got = args.get(1).map(|v| v.type_name()).unwrap_or("no value");
        bad_arg(1, "unpack", "string", got)
    })?;
    let ld = data.len() as u64;
    let offset = match args.get(2) {
        None | Some(Value::Nil) => 1,
        Some(v) => match num_value(v) {
            Some(n) => c_trunc_i64(n) as u64,
            None => return Err(bad_arg(2, "unpack", "number", v.type_name()).into()),
        },
    };
    if offset == 0 {
        return Err(arg_error(2, "unpack", "offset must be 1 or greater").into());
    }
    let mut pos = offset - 1;
    let too_short = || Fail::Msg(arg_error(1, "unpack", "data string too short"));
    let mut f = Format {
        f: &fmt,
        i: 0,
        fname: "unpack",
    };
    let mut h = Header::new();
    let mut out = MultiValue::new();
    let nargs = args.len();
    while let Some(opt) = f.next() {
        let mut size = f.size(opt)?;
        pos = pos.wrapping_add(to_align(pos, &h, opt, size));
        if !fits(pos, size, ld) {
            return Err(too_short());
        }
        // The C check is `nargs + n + 2 > 8000`; mlua needs one more slot to return
        // the results, so the limit comes one result earlier than in Redis.
        if nargs + out.len() + 3 > MAX_C_STACK {
            return Err(Fail::Msg("stack overflow (too many results)".into()));
        }
        let at = pos as usize;
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let v = get_integer(
                    &data[at..],
                    h.endian,
                    opt.is_ascii_lowercase(),
                    size as usize,
                );
                out.push_back(Value::Number(v));
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[at..at + 4].try_into().unwrap_or_default();
                let v = match h.endian {
                    Endian::Little => f32::from_le_bytes(b),
                    Endian::Big => f32::from_be_bytes(b),
                };
                out.push_back(Value::Number(v as f64));
            }
            b'd' => {
                let b: [u8; 8] = data[at..at + 8].try_into().unwrap_or_default();
                let v = match h.endian {
                    Endian::Little => f64::from_le_bytes(b),
                    Endian::Big => f64::from_be_bytes(b),
                };
                out.push_back(Value::Number(v));
            }
            b'c' => {
                if size == 0 {
                    // The previous result, if it is a number or a numeric string.
                    let prev = out.back().and_then(|v| match v {
                        Value::String(s) => {
                            s.to_str().ok().and_then(|s| s.trim().parse::<f64>().ok())
                        }
                        other => num_value(other),
                    });
                    let Some(n) = prev else {
                        return Err(Fail::Msg("format 'c0' needs a previous size".into()));
                    };
                    size = c_f64_to_u64(n);
                    out.pop_back();
                    if !fits(pos, size, ld) {
                        return Err(too_short());
                    }
                }
                let s = lua.create_string(&data[at..at + size as usize])?;
                out.push_back(Value::String(s));
            }
            b's' => {
                let Some(z) = memchr::memchr(0, &data[at..]) else {
                    return Err(Fail::Msg("unfinished string in data".into()));
                };
                size = z as u64 + 1;
                out.push_back(Value::String(lua.create_string(&data[at..at + z])?));
            }
            _ => f.control(opt, &mut h)?,
        }
        pos = pos.wrapping_add(size);
    }
    out.push_back(Value::Number(pos.wrapping_add(1) as i64 as f64));
    Ok(out)
}

fn size(args: &MultiValue) -> Result<f64, String> {
    let fmt = format_arg(args, "size")?;
    let mut f = Format {
        f: &fmt,
        i: 0,
        fname: "size",
    };
    let mut h = Header::new();
    let mut pos: u64 = 0;
    let arg_err = |m: &str| arg_error(0, "size", m);
    while let Some(opt) = f.next() {
        let size = f.size(opt)?;
        pos = pos.wrapping_add(to_align(pos, &h, opt, size));
        if opt == b's' {
            return Err(arg_err("option 's' has no fixed size"));
        } else if opt == b'c' && size == 0 {
            return Err(arg_err("option 'c0' has no fixed size"));
        }
        // Unknown letters and digits are silently ignored here (as in C).
        if !opt.is_ascii_alphanumeric() {
            f.control(opt, &mut h)?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(pos as i64 as f64)
}
