//! `bit`: LuaBitOp 1.0 semantics. Arguments are normalised to signed 32-bit integers by
//! adding 2^52+2^51 and keeping the low word (round to nearest, wrap modulo 2^32), as
//! LuaBitOp does; results are signed 32-bit numbers.

use mlua::{Lua, MultiValue, Table};

use super::{check_number, lib_fn, ret};

type Unary = (&'static str, fn(i32) -> i32);
type Binary = (&'static str, fn(i32, i32) -> i32);
type Shift = (&'static str, fn(i32, u32) -> i32);

/// LuaBitOp's `barg`.
pub fn tobit(n: f64) -> i32 {
    (n + 6_755_399_441_055_744.0).to_bits() as u32 as i32
}

fn arg(a: &MultiValue, i: usize, name: &str) -> Result<i32, String> {
    check_number(a, i, name).map(tobit)
}

pub fn open(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let unary: [Unary; 3] = [
        ("tobit", |x| x),
        ("bnot", |x| !x),
        ("bswap", |x| x.swap_bytes()),
    ];
    for (name, f) in unary {
        t.raw_set(
            name,
            lib_fn(lua, move |lua, a| ret(lua, f(arg(&a, 0, name)?) as f64))?,
        )?;
    }
    let fold: [Binary; 3] = [
        ("band", |x, y| x & y),
        ("bor", |x, y| x | y),
        ("bxor", |x, y| x ^ y),
    ];
    for (name, f) in fold {
        t.raw_set(
            name,
            lib_fn(lua, move |lua, a| {
                let mut acc = arg(&a, 0, name)?;
                for i in 1..a.len() {
                    acc = f(acc, arg(&a, i, name)?);
                }
                ret(lua, acc as f64)
            })?,
        )?;
    }
    let shifts: [Shift; 5] = [
        ("lshift", |x, n| ((x as u32) << n) as i32),
        ("rshift", |x, n| ((x as u32) >> n) as i32),
        ("arshift", |x, n| x >> n),
        ("rol", |x, n| (x as u32).rotate_left(n) as i32),
        ("ror", |x, n| (x as u32).rotate_right(n) as i32),
    ];
    for (name, f) in shifts {
        t.raw_set(
            name,
            lib_fn(lua, move |lua, a| {
                let x = arg(&a, 0, name)?;
                let n = arg(&a, 1, name)? as u32 & 31;
                ret(lua, f(x, n) as f64)
            })?,
        )?;
    }
    t.raw_set(
        "tohex",
        lib_fn(lua, |lua, a| {
            let x = arg(&a, 0, "tohex")? as u32;
            let mut n = if a.len() > 1 && !a[1].is_nil() {
                arg(&a, 1, "tohex")?
            } else {
                8
            };
            let upper = n < 0;
            if upper {
                n = n.wrapping_neg();
            }
            let n = (n as u32).min(8) as usize;
            let s = if upper {
                format!("{x:08X}")
            } else {
                format!("{x:08x}")
            };
            ret(lua, s[8 - n..].to_string())
        })?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::tobit;

    #[test]
    fn tobit_wraps_and_rounds() {
        assert_eq!(tobit(0xffffffffu32 as f64), -1);
        assert_eq!(tobit(4294967296.0 + 5.0), 5);
        assert_eq!(tobit(-1.0), -1);
        assert_eq!(tobit(2.5), 2);
        assert_eq!(tobit(3.5), 4);
    }
}
