//! Lua 5.1 standard functions with known memory-safety holes, replaced in the sandbox by
//! checked versions of our own (Redis patches its vendored Lua's C code instead).
//!
//! * `unpack(t, i, e)` computes the range's length `e - i + 1` in a C `int`: a range
//!   such as `unpack({}, -1, 2147483647)` overflows it and the stack check that follows
//!   is skipped, so the function writes far past the Lua stack and the process dies
//!   (CVE-2025-46817's shape). The range is measured first here, in Lua numbers, and
//!   refused with the original's own error when it could not fit the stack anyway.
//! * The pattern functions (`string.find`, `match`, `gmatch`, `gsub`) match by C
//!   recursion, one level per quantified item or capture of the pattern and without a
//!   bound, so `string.rep('a?', 150000)` as a pattern overflows the C stack and kills
//!   the process (Redis's too). The pattern is measured first and refused, with the
//!   error later Lua versions give for it, beyond a depth far past any real pattern and
//!   well inside the stack.

use std::ffi::c_int;

use mlua::ffi::{self, lua_State};
use mlua::{Function, Lua, Table};

/// LUAI_MAXCSTACK: no C function can push more values than this, so the original
/// `unpack` refuses any longer range itself (with the same error).
const MAX_UNPACK: f64 = 8000.0;

/// The most recursive pattern items (quantified single items and capture brackets) a
/// pattern may have. Each costs at most two C frames of ~100 bytes; the main thread's
/// 8 MB stack overflows near 50,000 such items.
const MAX_PATTERN_DEPTH: usize = 10_000;

/// Replaces `unpack` and the pattern functions of the string library in `g` with the
/// checked ones.
pub fn install(lua: &Lua, g: &Table) -> mlua::Result<()> {
    let original: Function = g.get("unpack")?;
    g.raw_set("unpack", wrap(lua, original, checked_unpack)?)?;
    let string: Table = g.get("string")?;
    for name in ["find", "match", "gmatch", "gsub"] {
        let original: Function = string.get(name)?;
        let checker = if name == "find" {
            checked_find
        } else {
            checked_pattern
        };
        string.raw_set(name, wrap(lua, original, checker)?)?;
    }
    Ok(())
}

/// A C closure of `checker` with `original` as its upvalue.
fn wrap(lua: &Lua, original: Function, checker: ffi::lua_CFunction) -> mlua::Result<Function> {
    // SAFETY: `exec_raw` runs the closure in a protected call (an allocation failure is
    // caught) holding nothing with a destructor; the original function is its one
    // argument on the stack and becomes the closure's upvalue, leaving exactly the new
    // function on the stack, which `exec_raw` returns.
    unsafe {
        lua.exec_raw(original, |l| {
            ffi::lua_pushcclosure(l, checker, 1);
        })
    }
}

/// Runs the original function (the closure's upvalue) in this same frame, so its
/// argument errors and positions read as they always did.
unsafe fn call_original(l: *mut lua_State) -> c_int {
    match ffi::lua_tocfunction(l, ffi::lua_upvalueindex(1)) {
        Some(original) => original(l),
        None => ffi::luaL_error(l, c"function unavailable".as_ptr()),
    }
}

/// `string.find`: with its `plain` flag (argument 4) set it does no pattern matching,
/// so only a pattern search is checked.
unsafe extern "C-unwind" fn checked_find(l: *mut lua_State) -> c_int {
    // SAFETY: `l` is the running state; reading an argument does not raise.
    if ffi::lua_toboolean(l, 4) != 0 {
        return call_original(l);
    }
    checked_pattern(l)
}

/// A pattern function with the pattern's recursion depth bounded first.
unsafe extern "C-unwind" fn checked_pattern(l: *mut lua_State) -> c_int {
    // SAFETY (for the calls below): `l` is the running state and this frame's stack
    // holds the call's arguments; `lua_tolstring` is only applied to a string, so it
    // neither converts nor allocates, and the bytes it points at stay alive on the
    // stack while they are read; `luaL_error` raises from this frame, which owns
    // nothing with a destructor.
    if ffi::lua_type(l, 2) == ffi::LUA_TSTRING {
        let mut len = 0usize;
        let ptr = ffi::lua_tolstring(l, 2, &mut len);
        let pattern = std::slice::from_raw_parts(ptr as *const u8, len);
        if pattern_depth(pattern) > MAX_PATTERN_DEPTH {
            return ffi::luaL_error(l, c"pattern too complex".as_ptr());
        }
    }
    call_original(l)
}

/// How deep Lua 5.1's matcher can recurse on `pattern`: one level per capture bracket
/// and per quantified single item. Malformed patterns are measured as far as they go;
/// the original reports them.
fn pattern_depth(pattern: &[u8]) -> usize {
    let p = pattern;
    let mut depth = 0;
    let mut i = usize::from(p.first() == Some(&b'^'));
    while i < p.len() {
        match p[i] {
            b'(' | b')' => {
                depth += 1;
                i += 1;
                continue;
            }
            b'%' if p.get(i + 1) == Some(&b'b') => {
                i += 4;
                continue;
            }
            b'%' if p.get(i + 1) == Some(&b'f') => {
                i += 2;
                match class_end(p, i) {
                    Some(end) => i = end,
                    None => break,
                }
                continue;
            }
            _ => {}
        }
        let Some(end) = class_end(p, i) else { break };
        if matches!(p.get(end), Some(b'?' | b'*' | b'+' | b'-')) {
            depth += 1;
            i = end + 1;
        } else {
            i = end;
        }
    }
    depth
}

/// Where the single-character class starting at `i` ends: after `%x`, a `[set]` or one
/// character; `None` when a set is never closed.
fn class_end(p: &[u8], i: usize) -> Option<usize> {
    match p.get(i)? {
        b'%' => Some(i + 2),
        b'[' => {
            let mut j = i + 1;
            if p.get(j) == Some(&b'^') {
                j += 1;
            }
            // The first character of a set is never its end, even a `]`.
            loop {
                let c = *p.get(j)?;
                j += 1;
                if c == b'%' {
                    j += 1;
                }
                if p.get(j) == Some(&b']') {
                    return Some(j + 1);
                }
            }
        }
        _ => Some(i + 1),
    }
}

/// `unpack` with its range bounded before the original runs. The original is called in
/// this same frame, so its argument errors and positions read as they always did.
unsafe extern "C-unwind" fn checked_unpack(l: *mut lua_State) -> c_int {
    // SAFETY (for the calls below): `l` is the running state and this frame's stack
    // holds the call's arguments; the index API reads them without raising, and
    // `luaL_error` raises from this frame, which owns nothing with a destructor.
    if ffi::lua_type(l, 1) == ffi::LUA_TTABLE {
        let first = if ffi::lua_isnoneornil(l, 2) != 0 {
            Some(1.0)
        } else if ffi::lua_isnumber(l, 2) != 0 {
            Some(ffi::lua_tonumber(l, 2))
        } else {
            None
        };
        let last = if ffi::lua_isnoneornil(l, 3) != 0 {
            Some(ffi::lua_objlen(l, 1) as f64)
        } else if ffi::lua_isnumber(l, 3) != 0 {
            Some(ffi::lua_tonumber(l, 3))
        } else {
            None
        };
        // Non-numbers fall through: the original raises its own argument error.
        if let (Some(first), Some(last)) = (first, last) {
            if last - first >= MAX_UNPACK {
                return ffi::luaL_error(l, c"too many results to unpack".as_ptr());
            }
        }
    }
    call_original(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm() -> Lua {
        let lua = Lua::new();
        install(&lua, &lua.globals()).unwrap();
        lua
    }

    #[test]
    fn overflowing_ranges_are_refused_not_crashing() {
        let lua = vm();
        for range in [
            "-1, 2147483647",
            "1, 1e9",
            "1, 8001",
            "-2147483648, 2147483647",
            "1, 1/0",
        ] {
            let err = lua
                .load(format!("return unpack({{}}, {range})"))
                .exec()
                .unwrap_err();
            assert!(
                err.to_string().contains("too many results to unpack"),
                "{range}: {err}"
            );
        }
    }

    #[test]
    fn ordinary_ranges_behave_as_lua() {
        let lua = vm();
        let (a, b, c): (i64, i64, Option<i64>) =
            lua.load("return unpack({1, 2, 3}, '2')").eval().unwrap();
        assert_eq!((a, b, c), (2, 3, None));
        let n: i64 = lua
            .load("return select('#', unpack({}, 1, 7000))")
            .eval()
            .unwrap();
        assert_eq!(n, 7000);
        let n: i64 = lua
            .load("return select('#', unpack({}, 5, 1))")
            .eval()
            .unwrap();
        assert_eq!(n, 0);
        let err = lua.load("return unpack()").exec().unwrap_err().to_string();
        assert!(
            err.contains("bad argument #1 to 'unpack' (table expected, got no value)"),
            "{err}"
        );
        let err = lua
            .load("return unpack({}, 'x')")
            .exec()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("bad argument #2 to 'unpack' (number expected, got string)"),
            "{err}"
        );
    }

    #[test]
    fn pattern_depth_counts_recursive_items() {
        assert_eq!(pattern_depth(b"abc"), 0);
        assert_eq!(pattern_depth(b"^a*b?c+d-$"), 4);
        assert_eq!(pattern_depth(b"(%d+)()"), 5);
        assert_eq!(pattern_depth(b"%*%?%-"), 0);
        assert_eq!(pattern_depth(b"[*?]+"), 1);
        assert_eq!(pattern_depth(b"[]*]"), 0);
        assert_eq!(pattern_depth(b"[^]]*x"), 1);
        assert_eq!(pattern_depth(b"%b()*"), 0);
        assert_eq!(pattern_depth(b"%f[%w]%w+"), 1);
        assert_eq!(pattern_depth(b"[abc"), 0);
        assert_eq!(pattern_depth(b"%"), 0);
    }

    #[test]
    fn deep_patterns_are_refused_not_crashing() {
        let lua = vm();
        // gsub's fourth argument is a count, not find's plain flag.
        for (f, extra) in [("find", ""), ("match", ""), ("gmatch", ""), ("gsub", ", 1")] {
            let code = format!(
                "return string.{f}(string.rep('a', 200000), string.rep('a?', 200000), ''{extra})"
            );
            let err = lua.load(code).exec().unwrap_err().to_string();
            assert!(err.contains("pattern too complex"), "{f}: {err}");
        }
        let n: i64 = lua
            .load("return string.find(string.rep('a', 5000), string.rep('a?', 5000))")
            .eval()
            .unwrap();
        assert_eq!(n, 1);
        let plain: i64 = lua
            .load("return string.find(string.rep('a?', 20000), string.rep('a?', 20000), 1, true)")
            .eval()
            .unwrap();
        assert_eq!(plain, 1);
        let (a, b): (String, String) = lua
            .load("return ('k=v'):match('(%w+)=(%w+)')")
            .eval()
            .unwrap();
        assert_eq!((a.as_str(), b.as_str()), ("k", "v"));
    }
}
