//! Redis-exact number parsing and formatting.
//!
//! Clients see these bytes directly (INCR errors, ZSCORE replies, the value
//! INCRBYFLOAT stores), so every rule here copies what redis-server 7.0
//! answers, checked against a live server, not what would be "nicer":
//!
//! * integers: `string2ll` strictness (no `+`, no spaces, no leading zeros,
//!   no `-0`), plus a non-allocating formatter for the hot reply path;
//! * `f64`: glibc `strtod` grammar on the whole string (hex floats and
//!   `inf`/`infinity` included, NaN and out-of-range rejected) and `%.17g`
//!   output, which is what Redis 7.0 uses for every double reply;
//! * INCRBYFLOAT / HINCRBYFLOAT: Redis does this arithmetic in x87 80-bit
//!   `long double`, so [`LongDouble`] emulates that format in software
//!   (64-bit mantissa, 15-bit exponent, subnormals) with exact big-integer
//!   arithmetic. That path is cold, so clarity wins over speed there.

use num_bigint::BigUint;
use num_traits::{ToPrimitive, Zero};
use std::fmt::Write as _;

// ---------------------------------------------------------------------------
// Integers
// ---------------------------------------------------------------------------

/// Parses an integer the way Redis's `string2ll` does: an optional `-`,
/// then digits with no leading zero (except `"0"` itself), no `+`, no
/// whitespace, no `"-0"`, and the value must fit in an `i64`.
///
/// This is also Redis's test for storing a string as an integer: a string
/// is integer-encoded only if it round-trips, and with this strictness every
/// accepted string *is* the canonical form of its value, so no separate
/// "is canonical" check is needed.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, s),
    };
    match digits {
        [b'0'] => return if neg { None } else { Some(0) },
        // Most strings that are no number fail here, at their first byte.
        [b'1'..=b'9', ..] => {}
        _ => return None,
    }
    // Accumulate the magnitude unsigned so that i64::MIN's magnitude fits; up to 19
    // digits it cannot overflow a u64, so only a 20th needs checked arithmetic.
    let mag = if digits.len() <= MAX_SAFE_DIGITS {
        digits_value(digits)?
    } else {
        let mut mag: u64 = 0;
        for &b in digits {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            mag = mag.checked_mul(10)?.checked_add(u64::from(d))?;
        }
        mag
    };
    if neg {
        if mag > 1 << 63 {
            return None;
        }
        Some(0u64.wrapping_sub(mag) as i64)
    } else {
        i64::try_from(mag).ok()
    }
}

/// The most decimal digits whose value always fits in a u64.
const MAX_SAFE_DIGITS: usize = 19;

/// The value of 1 to 19 ASCII decimal digits (more would overflow); None if a byte
/// is not a digit. Eight digits at a time are checked and combined in a few word
/// operations (a 13-digit millisecond timestamp, a common score, is one loop of five
/// digits and one word instead of thirteen steps).
#[inline(always)]
fn digits_value(d: &[u8]) -> Option<u64> {
    debug_assert!(!d.is_empty() && d.len() <= MAX_SAFE_DIGITS);
    let n = d.len();
    if n < 8 {
        return small_digits_value(d);
    }
    let low = eight_digits_value(&d[n - 8..])?;
    if n < 16 {
        return Some(small_digits_value(&d[..n - 8])? * 100_000_000 + low);
    }
    let mid = eight_digits_value(&d[n - 16..n - 8])?;
    let high = small_digits_value(&d[..n - 16])?;
    Some((high * 100_000_000 + mid) * 100_000_000 + low)
}

/// The value of up to 7 digits (0 for none), a digit at a time.
#[inline(always)]
fn small_digits_value(d: &[u8]) -> Option<u64> {
    let mut v: u64 = 0;
    for &b in d {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        v = v * 10 + u64::from(digit);
    }
    Some(v)
}

/// The value of exactly eight ASCII digits, as one little-endian word: the first
/// digit is the lowest byte.
#[inline(always)]
fn eight_digits_value(d: &[u8]) -> Option<u64> {
    const HIGH_NIBBLES: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    let w = u64::from_le_bytes(d.try_into().ok()?);
    // A byte is a digit when its high nibble is 3 and adding 6 leaves it 3 (0x30 to
    // 0x39); a byte that carries into its neighbour fails its own test first.
    if (w & HIGH_NIBBLES) | ((w.wrapping_add(0x0606_0606_0606_0606) & HIGH_NIBBLES) >> 4)
        != 0x3333_3333_3333_3333
    {
        return None;
    }
    let v = w - 0x3030_3030_3030_3030;
    // Pairs: each even byte becomes 10 × its digit + the next one (at most 99).
    let v = v * 10 + (v >> 8);
    // Then the four pairs, weighted 10^6, 10^4, 10^2 and 1, summed in the high word.
    let v = ((v & 0x0000_00FF_0000_00FF).wrapping_mul(100 + (1_000_000 << 32))
        + ((v >> 16) & 0x0000_00FF_0000_00FF).wrapping_mul(1 + (10_000 << 32)))
        >> 32;
    Some(v)
}

const DIGIT_PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Appends the decimal form of `v` to `out`. Used for integer replies and
/// integer-encoded strings, so it formats on the stack two digits at a time
/// and touches the `Vec` once.
pub fn format_i64(v: i64, out: &mut Vec<u8>) {
    let mut buf = [0u8; 24];
    out.extend_from_slice(i64_digits(v, &mut buf));
}

/// The decimal form of `v`, written at the end of `buf`.
pub fn i64_digits(v: i64, buf: &mut [u8; 24]) -> &[u8] {
    let mut pos = write_digits(v.unsigned_abs(), buf, 24);
    if v < 0 {
        pos -= 1;
        buf[pos] = b'-';
    }
    &buf[pos..]
}

/// Appends a RESP line holding a number: `prefix`, the decimal form of `v`, then
/// `\r\n` (`:1\r\n`, `*3\r\n`, `$16\r\n`), with one copy into `out`.
#[inline]
pub fn format_i64_line(prefix: u8, v: i64, out: &mut Vec<u8>) {
    if (0..10).contains(&v) {
        out.extend_from_slice(&[prefix, b'0' + v as u8, b'\r', b'\n']);
        return;
    }
    // Prefix, sign, up to 20 digits, CRLF.
    let mut buf = [0u8; 24];
    buf[22] = b'\r';
    buf[23] = b'\n';
    let mut pos = write_digits(v.unsigned_abs(), &mut buf, 22);
    if v < 0 {
        pos -= 1;
        buf[pos] = b'-';
    }
    pos -= 1;
    buf[pos] = prefix;
    out.extend_from_slice(&buf[pos..]);
}

/// Writes the digits of `n` so that they end at `buf[end]`, two at a time; returns
/// where they start. `end` leaves room for 20 digits and a sign.
#[inline(always)]
fn write_digits(mut n: u64, buf: &mut [u8; 24], end: usize) -> usize {
    let mut pos = end;
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        pos -= 2;
        buf[pos..pos + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        pos -= 2;
        buf[pos..pos + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        pos -= 1;
        buf[pos] = b'0' + n as u8;
    }
    pos
}

// ---------------------------------------------------------------------------
// The strtod grammar, shared by the f64 and long double parsers
// ---------------------------------------------------------------------------

/// Exponents beyond this are clamped: they are far outside either format's
/// range even after subtracting the longest possible fraction, and clamping
/// keeps the arithmetic in `i64`.
const EXP_CLAMP: i64 = 1 << 40;

/// A string that glibc's `strtod`/`strtold` would consume completely.
enum Literal<'a> {
    Infinity {
        neg: bool,
    },
    /// Value is `digits * base^scale` where `digits` concatenates the integer
    /// and fraction digits; base is 10 for decimal, 2 for hex (with `scale`
    /// already in bits).
    Number {
        neg: bool,
        hex: bool,
        int: &'a [u8],
        frac: &'a [u8],
        exp: i64,
    },
}

/// Recognises one complete strtod literal. Redis rejects any string that
/// strtod does not consume entirely (and any leading whitespace), so a
/// partial parse is simply `None` here. NaN is `None` too: every Redis
/// caller rejects a NaN result, whatever its spelling.
fn scan_literal(s: &[u8]) -> Option<Literal<'_>> {
    let (neg, body) = match s.first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
        return Some(Literal::Infinity { neg });
    }
    let (hex, body) = match body {
        [b'0', b'x' | b'X', rest @ ..] => (true, rest),
        _ => (false, body),
    };
    let is_digit = |b: &u8| {
        if hex {
            b.is_ascii_hexdigit()
        } else {
            b.is_ascii_digit()
        }
    };
    let int_len = body.iter().take_while(|b| is_digit(b)).count();
    let (int, rest) = body.split_at(int_len);
    let (frac, rest) = match rest.split_first() {
        Some((b'.', after)) => {
            let n = after.iter().take_while(|b| is_digit(b)).count();
            after.split_at(n)
        }
        _ => (&rest[..0], rest),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let exp = match rest.split_first() {
        None => 0,
        Some((&marker, after)) => {
            let wanted = if hex { b'p' } else { b'e' };
            if marker.to_ascii_lowercase() != wanted {
                return None;
            }
            parse_exponent(after)?
        }
    };
    Some(Literal::Number {
        neg,
        hex,
        int,
        frac,
        exp,
    })
}

/// `[sign] digits+` to the end of the input, saturating at [`EXP_CLAMP`].
fn parse_exponent(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mag = digits.iter().fold(0i64, |acc, &d| {
        (acc * 10 + i64::from(d - b'0')).min(EXP_CLAMP)
    });
    Some(if neg { -mag } else { mag })
}

// ---------------------------------------------------------------------------
// Correct rounding of exact values into a binary format
// ---------------------------------------------------------------------------

/// Shape of a binary floating-point format, as the range of its mantissa's
/// least significant bit. Subnormals fall out of clamping the LSB exponent.
#[derive(Clone, Copy)]
struct BinFormat {
    mant_bits: u32,
    min_lsb: i64,
    max_lsb: i64,
}

const F64_FORMAT: BinFormat = BinFormat {
    mant_bits: 53,
    min_lsb: -1074,
    max_lsb: 1023 - 52,
};

/// x87 extended precision: explicit 64-bit mantissa, exponent bias 16383,
/// subnormal LSB at 2^-16445.
const LD_FORMAT: BinFormat = BinFormat {
    mant_bits: 64,
    min_lsb: -16445,
    max_lsb: 16383 - 63,
};

enum Rounded {
    Zero,
    Finite { mant: u64, lsb: i64 },
    Overflow,
}

/// Rounds the positive exact value `num / den * 2^e2` to the nearest value of
/// `fmt`, ties to even: what glibc's strtod/strtold and the FPU do in the
/// default rounding mode.
fn round_exact(num: &BigUint, den: &BigUint, e2: i64, fmt: BinFormat) -> Rounded {
    debug_assert!(!num.is_zero() && !den.is_zero());
    // floor(log2(num/den)): the bit lengths give it to within one.
    let mut lb = num.bits() as i64 - den.bits() as i64;
    let at_least = if lb >= 0 {
        *num >= den << (lb as u64)
    } else {
        num << ((-lb) as u64) >= *den
    };
    if !at_least {
        lb -= 1;
    }
    let log2 = lb + e2;
    if log2 > fmt.max_lsb + i64::from(fmt.mant_bits) - 1 {
        return Rounded::Overflow;
    }
    if log2 < fmt.min_lsb - 1 {
        // Below half the smallest subnormal: rounds to zero.
        return Rounded::Zero;
    }
    let mut lsb = (log2 - (i64::from(fmt.mant_bits) - 1)).max(fmt.min_lsb);
    let shift = e2 - lsb;
    let (n, d) = if shift >= 0 {
        (num << (shift as u64), den.clone())
    } else {
        (num.clone(), den << ((-shift) as u64))
    };
    let q = &n / &d;
    let r = n - &q * &d;
    // u128 because rounding a 64-bit mantissa up can carry into bit 64.
    let mut mant = u128::from(q.to_u64().expect("quotient fits the mantissa"));
    let twice_r = r << 1u32;
    if twice_r > d || (twice_r == d && mant & 1 == 1) {
        mant += 1;
    }
    if mant >> fmt.mant_bits != 0 {
        mant >>= 1;
        lsb += 1;
    }
    if lsb > fmt.max_lsb {
        Rounded::Overflow
    } else if mant == 0 {
        Rounded::Zero
    } else {
        let mant = u64::try_from(mant).expect("renormalised mantissa fits");
        Rounded::Finite { mant, lsb }
    }
}

/// A literal's exact value, `num / den * 2^e2`, or a verdict reached
/// without building it.
enum Exact {
    Zero,
    Value(BigUint, BigUint, i64),
    /// Certainly beyond the format's largest finite value.
    Overflow,
    /// Certainly below half the format's smallest subnormal.
    Underflow,
}

/// Turns a scanned literal's digits into an [`Exact`] value. Decimal
/// exponents far outside `fmt` are decided from the digit count alone, so
/// `1e999999999` never builds a gigantic power of ten.
fn exact_value(hex: bool, int: &[u8], frac: &[u8], exp: i64, fmt: BinFormat) -> Exact {
    let all: Vec<u8> = int.iter().chain(frac).copied().collect();
    let Some(first) = all.iter().position(|&b| b != b'0') else {
        return Exact::Zero;
    };
    let last = all.iter().rposition(|&b| b != b'0').expect("has nonzero");
    let digits = &all[first..=last];
    // Dropped trailing zeros scale the remaining digits up.
    let trailing = (all.len() - 1 - last) as i64;
    let frac_len = frac.len() as i64;
    let one = || BigUint::from(1u32);
    if hex {
        let mant = BigUint::parse_bytes(digits, 16).expect("hex digits");
        // round_exact's own range check copes with any exponent here.
        return Exact::Value(mant, one(), exp + 4 * (trailing - frac_len));
    }
    let e10 = exp + trailing - frac_len;
    let n = digits.len() as i64;
    // The value lies in [10^(n-1+e10), 10^(n+e10)). Bounds in decimal
    // digits, rounded outward (log10(2) ~ 0.30103) so only sure cases stop.
    let max_dec = (fmt.max_lsb + i64::from(fmt.mant_bits)) * 30103 / 100_000 + 2;
    let min_dec = (fmt.min_lsb - 1) * 30103 / 100_000 - 2;
    if n - 1 + e10 > max_dec {
        return Exact::Overflow;
    }
    if n + e10 < min_dec {
        return Exact::Underflow;
    }
    let mant = BigUint::parse_bytes(digits, 10).expect("decimal digits");
    let pow = BigUint::from(10u32).pow(e10.unsigned_abs() as u32);
    if e10 >= 0 {
        Exact::Value(mant * pow, one(), 0)
    } else {
        Exact::Value(mant, pow, 0)
    }
}

/// Rounds a literal into `fmt`; `None` where strtod/strtold would report
/// ERANGE (overflow, or a nonzero literal rounding to zero), which every
/// Redis caller treats as invalid. The sign is applied by the caller.
fn round_literal(hex: bool, int: &[u8], frac: &[u8], exp: i64, fmt: BinFormat) -> Option<Rounded> {
    match exact_value(hex, int, frac, exp, fmt) {
        Exact::Zero => Some(Rounded::Zero),
        Exact::Overflow | Exact::Underflow => None,
        Exact::Value(num, den, e2) => match round_exact(&num, &den, e2, fmt) {
            Rounded::Zero | Rounded::Overflow => None,
            r => Some(r),
        },
    }
}

// ---------------------------------------------------------------------------
// f64
// ---------------------------------------------------------------------------

/// Parses a double the way Redis's `getDoubleFromObject` / `string2d` does
/// (ZADD scores, INCRBYFLOAT is *not* this: see [`LongDouble`]).
///
/// Verified against redis-server 7.0 via `ZADD`: the whole string must be
/// one strtod literal (no leading or trailing spaces, no trailing garbage,
/// no embedded NUL); `+`/`-` signs, `.5`, `5.`, exponents and C99 hex floats
/// (`0x10`, `0x1.8p1`) are accepted; `inf`/`infinity` in any case are
/// accepted; NaN in any spelling is rejected; a result that overflows
/// (`1e400`) or underflows to zero (`1e-400`, `2e-324`) is rejected, while
/// subnormal results (`1e-310`, `4e-324`) are kept.
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    // Scores and increments are mostly short integers: up to 15 digits (below 2^53,
    // so exactly a double) with an optional sign are that number, as strtod reads it
    // (`-0` included: a negative zero).
    if let Some(v) = short_int_f64(s) {
        return Some(v);
    }
    parse_f64_literal(s)
}

/// `parse_f64` of `[+-]?[0-9]{1,15}`; None for anything else.
#[inline(always)]
fn short_int_f64(s: &[u8]) -> Option<f64> {
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 15 {
        return None;
    }
    let n = digits_value(digits)?;
    let v = n as f64;
    Some(if neg { -v } else { v })
}

fn parse_f64_literal(s: &[u8]) -> Option<f64> {
    let (neg, hex, int, frac, exp) = match scan_literal(s)? {
        Literal::Infinity { neg } => {
            return Some(if neg {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            })
        }
        Literal::Number {
            neg,
            hex,
            int,
            frac,
            exp,
        } => (neg, hex, int, frac, exp),
    };
    if !hex {
        // The scanner accepted it, so it is ASCII in the grammar that Rust's
        // correctly rounded parser also accepts.
        let v: f64 = std::str::from_utf8(s).ok()?.parse().ok()?;
        // strtod's ERANGE cases that Redis rejects: overflow, or a nonzero
        // literal that rounded to zero.
        let underflow = || v == 0.0 && int.iter().chain(frac).any(|&b| b != b'0');
        return (v.is_finite() && !underflow()).then_some(v);
    }
    let mag = match round_literal(true, int, frac, exp, F64_FORMAT)? {
        Rounded::Finite { mant, lsb } => f64_from_parts(mant, lsb),
        _ => 0.0,
    };
    Some(if neg { -mag } else { mag })
}

/// Builds `mant * 2^lsb` from an already rounded mantissa (so exactly
/// representable) by assembling the IEEE bits directly.
fn f64_from_parts(mant: u64, lsb: i64) -> f64 {
    if mant >> 52 == 0 {
        // Subnormal: the LSB is pinned at 2^-1074.
        debug_assert_eq!(lsb, F64_FORMAT.min_lsb);
        f64::from_bits(mant)
    } else {
        let biased = (lsb + 52 + 1023) as u64;
        f64::from_bits((biased << 52) | (mant & ((1 << 52) - 1)))
    }
}

/// Formats a double as Redis 7.4's double replies do (`d2string`, used by
/// `addReplyDouble` for ZSCORE, ZINCRBY, ZRANGE WITHSCORES and RESP3 `,` frames):
/// `nan`, `inf` / `-inf`, `0` / `-0`; integral values within ±2^62 as integers; any
/// other value as the shortest decimal that reads back to the same double, laid out
/// as Redis's fpconv does (see [`write_shortest_f64`]). So `0.1` replies `0.1`, where
/// Redis 7.0's `%.17g` (still [`format_f64_17g`]) replied `0.10000000000000001`.
pub fn format_f64(v: f64) -> String {
    let mut out = Vec::with_capacity(24);
    write_f64(v, &mut out);
    String::from_utf8(out).expect("ASCII")
}

/// Non-allocating form of [`format_f64`]: appends to `out`.
pub fn write_f64(v: f64, out: &mut Vec<u8>) {
    if v.is_nan() {
        out.extend_from_slice(b"nan");
    } else if v.is_infinite() {
        out.extend_from_slice(if v > 0.0 { b"inf" } else { b"-inf" });
    } else if v == 0.0 {
        out.extend_from_slice(if v.is_sign_negative() { b"-0" } else { b"0" });
    } else if let Some(n) = f64_as_exact_i64(v) {
        format_i64(n, out);
    } else {
        write_shortest_f64(v, out);
    }
}

/// The integer a double holds exactly, when it lies within ±(2^63-1)/2 (Redis's
/// `double2ll`: the range where the cast is safe; integral doubles outside it are
/// printed as decimals).
pub fn f64_as_exact_i64(v: f64) -> Option<i64> {
    const HALF: f64 = (i64::MAX / 2) as f64;
    if !(-HALF..=HALF).contains(&v) {
        return None;
    }
    let n = v as i64;
    (n as f64 == v).then_some(n)
}

/// A finite double as Redis 7.4's `fpconv_dtoa` lays it out, from the shortest digit
/// string that reads back to the same double (Rust's formatter computes it):
/// - `digits` × 10^`k`, with n digits and decimal exponent x = k + n - 1;
/// - k ≥ 0 and x < n + 7: the digits followed by k zeros (`123456789012345680000`);
/// - k < 0 and (k > -7 or x < 4): a plain decimal (`3.14`, `0.000001`, `0.0012345`);
/// - otherwise scientific, the exponent signed and without leading zeros: `1e+300`,
///   `1.5e-7`, `1.2345e-4`.
///
/// fpconv's digits come from Grisu2, which is shortest for all but rare inputs; for
/// those it may print one more digit than here (both read back exactly).
/// Zero and non-finite values are the callers' business (`write_f64`).
pub fn write_shortest_f64(v: f64, out: &mut Vec<u8>) {
    let mut sci = StackBuf::default();
    // `{:e}` is the shortest round-trip significand in the form `d.ddde-x`.
    write!(sci, "{v:e}").expect("fits in the stack buffer");
    let text = sci.as_bytes();
    let (neg, text) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let e_at = text.iter().position(|&b| b == b'e').expect("has exponent");
    let mut digits = [0u8; 20];
    let mut n = 0;
    for &b in &text[..e_at] {
        if b != b'.' {
            digits[n] = b;
            n += 1;
        }
    }
    let digits = &digits[..n];
    let x: i32 = std::str::from_utf8(&text[e_at + 1..])
        .expect("ASCII")
        .parse()
        .expect("integer exponent");
    let n = n as i32;
    let k = x - n + 1;
    if neg {
        out.push(b'-');
    }
    if k >= 0 && x < n + 7 {
        out.extend_from_slice(digits);
        out.resize(out.len() + k as usize, b'0');
    } else if k < 0 && (k > -7 || x.abs() < 4) {
        let int_len = n + k;
        if int_len <= 0 {
            out.extend_from_slice(b"0.");
            out.resize(out.len() + (-int_len) as usize, b'0');
            out.extend_from_slice(digits);
        } else {
            out.extend_from_slice(&digits[..int_len as usize]);
            out.push(b'.');
            out.extend_from_slice(&digits[int_len as usize..]);
        }
    } else {
        out.push(digits[0]);
        if n > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        out.push(if x < 0 { b'-' } else { b'+' });
        format_i64(i64::from(x.unsigned_abs()), out);
    }
}

/// Formats a double as C's `%.17g` (Redis 7.0's double replies; in 7.4 still what
/// `ld2string`'s auto mode prints for a double, e.g. ZSCAN of a skiplist zset), with
/// `inf` / `-inf` spelled out (and `nan` for completeness).
pub fn format_f64_17g(v: f64) -> String {
    let mut out = Vec::with_capacity(24);
    write_f64_17g(v, &mut out);
    String::from_utf8(out).expect("ASCII")
}

/// A double as Redis's `addReplyHumanLongDouble` prints it (GEOPOS, WITHCOORD):
/// `%.17Lf` of the exact value (a double converts to long double exactly, and Rust's
/// fixed-precision formatting is exact and rounds half to even like glibc), then
/// trailing zeros and a trailing `.` removed, and `-0` as `0`.
pub fn format_human_f64(v: f64) -> String {
    if !v.is_finite() {
        return format_f64(v);
    }
    let mut s = format!("{v:.17}");
    let t = s.trim_end_matches('0').trim_end_matches('.').len();
    s.truncate(t);
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// Non-allocating form of [`format_f64_17g`]: appends to `out`.
pub fn write_f64_17g(v: f64, out: &mut Vec<u8>) {
    if v.is_nan() {
        out.extend_from_slice(b"nan");
        return;
    }
    if v.is_infinite() {
        out.extend_from_slice(if v > 0.0 { b"inf" } else { b"-inf" });
        return;
    }
    // Rust's `{:.16e}` gives the 17 significant digits correctly rounded,
    // ties to even, like glibc; only the layout of %g is left to do.
    let mut sci = StackBuf::default();
    write!(sci, "{v:.16e}").expect("fits in the stack buffer");
    let text = sci.as_bytes();
    let (neg, text) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let e_at = text.iter().position(|&b| b == b'e').expect("has exponent");
    let mut digits = [0u8; 17];
    digits[0] = text[0];
    digits[1..].copy_from_slice(&text[2..e_at]);
    let exp: i32 = std::str::from_utf8(&text[e_at + 1..])
        .expect("ASCII")
        .parse()
        .expect("integer exponent");
    // %g drops trailing zeros of the significand (no '#' flag).
    let sig = digits.iter().rposition(|&d| d != b'0').map_or(1, |i| i + 1);
    let digits = &digits[..sig];

    if neg {
        out.push(b'-');
    }
    if !(-4..17).contains(&exp) {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        let mag = exp.unsigned_abs();
        if mag < 10 {
            out.push(b'0');
        }
        format_i64(i64::from(mag), out);
    } else if exp >= 0 {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            out.extend_from_slice(digits);
            out.resize(out.len() + int_len - digits.len(), b'0');
        } else {
            out.extend_from_slice(&digits[..int_len]);
            out.push(b'.');
            out.extend_from_slice(&digits[int_len..]);
        }
    } else {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + (-exp - 1) as usize, b'0');
        out.extend_from_slice(digits);
    }
}

/// Fixed-size `fmt::Write` target so formatting a double does not allocate.
/// 32 bytes covers the longest `{:.16e}` output, `-1.2345678901234567e-308`.
#[derive(Default)]
struct StackBuf {
    buf: [u8; 32],
    len: usize,
}

impl StackBuf {
    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl std::fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        self.buf
            .get_mut(self.len..end)
            .ok_or(std::fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// x87 long double emulation (INCRBYFLOAT, HINCRBYFLOAT)
// ---------------------------------------------------------------------------

/// Redis's `MAX_LONG_DOUBLE_CHARS`: `string2ld` refuses inputs of this
/// length or more (verified: 5119 bytes parse, 5120 do not). Every finite
/// long double prints in fewer characters (at most 4934), so the output side
/// never hits Redis's matching buffer limit.
const MAX_LONG_DOUBLE_CHARS: usize = 5 * 1024;

#[derive(Clone, Copy, Debug)]
enum Class {
    Finite,
    Infinite,
    Nan,
}

/// A software x87 80-bit extended-precision value: what `long double` is in
/// the Redis builds clients talk to (x86-64 Linux), which INCRBYFLOAT and
/// HINCRBYFLOAT compute in. Finite values are `mant * 2^exp`, kept
/// normalised (top mantissa bit set, or the exponent pinned at the subnormal
/// minimum), so equal values have equal fields.
#[derive(Clone, Copy, Debug)]
pub struct LongDouble {
    neg: bool,
    class: Class,
    mant: u64,
    exp: i64,
}

impl LongDouble {
    const NAN: LongDouble = LongDouble {
        neg: false,
        class: Class::Nan,
        mant: 0,
        exp: 0,
    };

    fn zero(neg: bool) -> Self {
        LongDouble {
            neg,
            class: Class::Finite,
            mant: 0,
            exp: 0,
        }
    }

    fn infinity(neg: bool) -> Self {
        LongDouble {
            neg,
            class: Class::Infinite,
            mant: 0,
            exp: 0,
        }
    }

    fn from_rounded(neg: bool, r: Rounded) -> Self {
        match r {
            Rounded::Zero => Self::zero(neg),
            Rounded::Overflow => Self::infinity(neg),
            Rounded::Finite { mant, lsb } => LongDouble {
                neg,
                class: Class::Finite,
                mant,
                exp: lsb,
            },
        }
    }

    /// Exact conversion (every i64 fits a 64-bit mantissa); matches Redis
    /// reading an integer-encoded value as `(long double)` directly.
    pub fn from_i64(v: i64) -> Self {
        if v == 0 {
            return Self::zero(false);
        }
        let mag = v.unsigned_abs();
        let shift = mag.leading_zeros();
        LongDouble {
            neg: v < 0,
            class: Class::Finite,
            mant: mag << shift,
            exp: -i64::from(shift),
        }
    }

    /// Parses like Redis's `string2ld` (glibc `strtold` plus Redis's checks),
    /// verified against redis-server 7.0 via INCRBYFLOAT:
    /// the same complete-literal grammar as [`parse_f64`] (hex floats,
    /// `inf`/`infinity` accepted; NaN, spaces, trailing bytes and embedded
    /// NUL rejected), empty input or input of 5120+ bytes rejected, results
    /// that overflow the long double range (`1e4933`) or round to zero
    /// (`1e-4952`, `0x1p-16446`) rejected, correct rounding (ties to even)
    /// into the 64-bit mantissa including subnormals. Infinity literals are
    /// returned as infinities; callers decide what to do with them.
    pub fn parse(s: &[u8]) -> Option<Self> {
        if s.is_empty() || s.len() >= MAX_LONG_DOUBLE_CHARS {
            return None;
        }
        match scan_literal(s)? {
            Literal::Infinity { neg } => Some(Self::infinity(neg)),
            Literal::Number {
                neg,
                hex,
                int,
                frac,
                exp,
            } => {
                let r = round_literal(hex, int, frac, exp, LD_FORMAT)?;
                Some(Self::from_rounded(neg, r))
            }
        }
    }

    pub fn is_nan(&self) -> bool {
        matches!(self.class, Class::Nan)
    }

    pub fn is_infinite(&self) -> bool {
        matches!(self.class, Class::Infinite)
    }

    pub fn is_finite(&self) -> bool {
        matches!(self.class, Class::Finite)
    }

    /// Redis's `ld2string(..., LD_STR_HUMAN)`: glibc `%.17Lf` (exact binary
    /// value rounded half-to-even to 17 decimals), then trailing zeros and
    /// a trailing `.` removed, and `-0` turned into `0`.
    pub fn to_human_string(&self) -> String {
        let mut out = Vec::new();
        self.write_human(&mut out);
        String::from_utf8(out).expect("ASCII")
    }

    /// [`Self::to_human_string`] appending to a buffer.
    pub fn write_human(&self, out: &mut Vec<u8>) {
        match self.class {
            Class::Nan => {
                out.extend_from_slice(if self.neg { b"-nan" } else { b"nan" });
                return;
            }
            Class::Infinite => {
                out.extend_from_slice(if self.neg { b"-inf" } else { b"inf" });
                return;
            }
            Class::Finite => {}
        }
        const DECIMALS: usize = 17;
        let scaled = BigUint::from(self.mant) * BigUint::from(10u32).pow(DECIMALS as u32);
        let fixed = if self.exp >= 0 {
            scaled << (self.exp as u64)
        } else {
            let k = (-self.exp) as u64;
            let q = &scaled >> k;
            let r = scaled - (&q << k);
            let half = BigUint::from(1u32) << (k - 1);
            if r > half || (r == half && q.bit(0)) {
                q + 1u32
            } else {
                q
            }
        };
        let digits = fixed.to_string();
        // At least one integer digit before the 17 decimals.
        let padded = format!("{digits:0>width$}", width = DECIMALS + 1);
        let (int, frac) = padded.split_at(padded.len() - DECIMALS);
        let frac = frac.trim_end_matches('0');
        if int == "0" && frac.is_empty() {
            // "-0.000…" trims to "-0", which Redis rewrites as "0".
            out.push(b'0');
            return;
        }
        if self.neg {
            out.push(b'-');
        }
        out.extend_from_slice(int.as_bytes());
        if !frac.is_empty() {
            out.push(b'.');
            out.extend_from_slice(frac.as_bytes());
        }
    }
}

impl std::ops::Add for LongDouble {
    type Output = LongDouble;

    /// IEEE addition rounded to nearest, ties to even, as the x87 does it
    /// with 64-bit precision control (the Linux x86-64 default).
    fn add(self, other: LongDouble) -> LongDouble {
        match (self.class, other.class) {
            (Class::Nan, _) | (_, Class::Nan) => return Self::NAN,
            (Class::Infinite, Class::Infinite) if self.neg != other.neg => return Self::NAN,
            (Class::Infinite, _) => return self,
            (_, Class::Infinite) => return other,
            (Class::Finite, Class::Finite) => {}
        }
        match (self.mant == 0, other.mant == 0) {
            // -0 + -0 is the only sum of zeros that keeps the minus sign.
            (true, true) => return Self::zero(self.neg && other.neg),
            (true, false) => return other,
            (false, true) => return self,
            (false, false) => {}
        }
        // Exact sum on a common exponent, then a single rounding.
        let e = self.exp.min(other.exp);
        let a = BigUint::from(self.mant) << ((self.exp - e) as u64);
        let b = BigUint::from(other.mant) << ((other.exp - e) as u64);
        let (neg, mag) = if self.neg == other.neg {
            (self.neg, a + b)
        } else if a >= b {
            (self.neg, a - b)
        } else {
            (other.neg, b - a)
        };
        if mag.is_zero() {
            // x - x is +0 in round-to-nearest.
            return Self::zero(false);
        }
        let r = round_exact(&mag, &BigUint::from(1u32), e, LD_FORMAT);
        Self::from_rounded(neg, r)
    }
}

/// Why INCRBYFLOAT failed; [`IncrFloatError::message`] is Redis's error text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncrFloatError {
    /// The stored value or the increment is not a valid long double.
    NotAFloat,
    /// The sum is NaN or infinite (including an `inf` increment).
    NanOrInfinity,
}

impl IncrFloatError {
    pub fn message(self) -> &'static str {
        match self {
            IncrFloatError::NotAFloat => "ERR value is not a valid float",
            IncrFloatError::NanOrInfinity => "ERR increment would produce NaN or Infinity",
        }
    }
}

/// INCRBYFLOAT's arithmetic: returns the bytes to store and reply with.
/// `current` is the stored string value; pass `b"0"` for a missing key,
/// which is exactly the 0 Redis starts from. The WRONGTYPE check, which
/// Redis does first, is the caller's.
pub fn incr_by_float(current: &[u8], incr: &[u8]) -> Result<Vec<u8>, IncrFloatError> {
    let value = LongDouble::parse(current).ok_or(IncrFloatError::NotAFloat)?;
    let incr = LongDouble::parse(incr).ok_or(IncrFloatError::NotAFloat)?;
    let sum = value + incr;
    if !sum.is_finite() {
        return Err(IncrFloatError::NanOrInfinity);
    }
    let mut out = Vec::new();
    sum.write_human(&mut out);
    Ok(out)
}

/// Why HINCRBYFLOAT failed; its checks and messages differ from
/// INCRBYFLOAT's (verified against redis-server 7.0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HincrFloatError {
    /// The increment argument does not parse.
    NotAFloat,
    /// The increment parsed as an infinity (checked before WRONGTYPE).
    IncrementNanOrInfinity,
    /// The field's current value does not parse.
    HashValueNotAFloat,
    /// The sum is NaN or infinite.
    NanOrInfinity,
}

impl HincrFloatError {
    pub fn message(self) -> &'static str {
        match self {
            HincrFloatError::NotAFloat => "ERR value is not a valid float",
            HincrFloatError::IncrementNanOrInfinity => "ERR value is NaN or Infinity",
            HincrFloatError::HashValueNotAFloat => "ERR hash value is not a float",
            HincrFloatError::NanOrInfinity => "ERR increment would produce NaN or Infinity",
        }
    }
}

/// HINCRBYFLOAT step 1, before the key's type is checked: Redis validates
/// the increment first, so `HINCRBYFLOAT <string key> f inf` answers
/// "value is NaN or Infinity", not WRONGTYPE.
pub fn hincr_by_float_increment(incr: &[u8]) -> Result<LongDouble, HincrFloatError> {
    let incr = LongDouble::parse(incr).ok_or(HincrFloatError::NotAFloat)?;
    if incr.is_finite() {
        Ok(incr)
    } else {
        Err(HincrFloatError::IncrementNanOrInfinity)
    }
}

/// HINCRBYFLOAT step 2: adds a validated increment to the field's current
/// value (pass `b"0"` for a missing field) and returns the bytes to store
/// and reply with.
pub fn hincr_by_float(current: &[u8], incr: LongDouble) -> Result<Vec<u8>, HincrFloatError> {
    let value = LongDouble::parse(current).ok_or(HincrFloatError::HashValueNotAFloat)?;
    let sum = value + incr;
    if !sum.is_finite() {
        return Err(HincrFloatError::NanOrInfinity);
    }
    let mut out = Vec::new();
    sum.write_human(&mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Digits read a word at a time give what a digit-at-a-time reading gives, for
    /// every length, and any non-digit byte in any position is refused.
    #[test]
    fn digit_words_read_every_length_and_refuse_every_non_digit() {
        for len in 1..=MAX_SAFE_DIGITS {
            for seed in 0..50u64 {
                let digits: Vec<u8> = (0..len)
                    .map(|i| b'0' + ((seed * 7 + i as u64 * 13 + seed * i as u64) % 10) as u8)
                    .collect();
                let text = std::str::from_utf8(&digits).unwrap();
                assert_eq!(digits_value(&digits), text.parse::<u64>().ok(), "{text}");
                let nines = vec![b'9'; len];
                assert_eq!(digits_value(&nines), Some(10u64.pow(len as u32) - 1));
                for pos in 0..len {
                    for bad in [b'/', b':', b'a', b' ', 0, 0x80, 0xFA, 0xFF, b'-', b'+'] {
                        let mut wrong = digits.clone();
                        wrong[pos] = bad;
                        assert_eq!(digits_value(&wrong), None, "{wrong:?}");
                    }
                }
            }
        }
    }

    /// (current value or `None` for a missing key, increment, expected).
    type IncrRow = (
        Option<&'static [u8]>,
        &'static [u8],
        Result<&'static str, IncrFloatError>,
    );
    type HincrRow = (
        Option<&'static [u8]>,
        &'static [u8],
        Result<&'static str, HincrFloatError>,
    );
    /// (current, increment, output length, output head, output tail).
    type HugeRow = (
        &'static [u8],
        &'static [u8],
        usize,
        &'static str,
        &'static str,
    );

    /// Rows: `SET k <input>; INCRBY k 0` on redis-server 7.0.15.
    #[test]
    fn parse_i64_matches_redis() {
        let rows: &[(&[u8], Option<i64>)] = &[
            (b"0", Some(0)),
            (b"1", Some(1)),
            (b"-1", Some(-1)),
            (b"123", Some(123)),
            (b"-123", Some(-123)),
            (b"0012", None),
            (b" 1", None),
            (b"1 ", None),
            (b"+1", None),
            (b"-0", None),
            (b"", None),
            (b"9223372036854775807", Some(9223372036854775807)),
            (b"9223372036854775808", None),
            (b"-9223372036854775808", Some(-9223372036854775808)),
            (b"-9223372036854775809", None),
            (b"00", None),
            (b"-", None),
            (b"1a", None),
            (b"01", None),
            (b"-01", None),
            (b"1\x00", None),
            (b"12345678901234567890", None),
            (b"99999999999999999999", None),
            (b"18446744073709551616", None),
            (b"1.0", None),
            (b"1e3", None),
            (b"\xff1", None),
        ];
        for &(input, want) in rows {
            assert_eq!(
                parse_i64(input),
                want,
                "input {:?}",
                input.escape_ascii().to_string()
            );
        }
    }

    #[test]
    fn short_integer_scores_keep_strtod_edges() {
        for text in [
            "-0",
            "+0",
            "0",
            "000",
            "-000000000000001",
            "999999999999999",
        ] {
            let (got, want) = (
                parse_f64(text.as_bytes()),
                parse_f64_literal(text.as_bytes()),
            );
            assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits), "{text}");
        }
        assert!(parse_f64(b"-0").unwrap().is_sign_negative());
        for text in ["", "-", "+", "1 ", " 1", "1e", "0x", "--1"] {
            assert_eq!(parse_f64(text.as_bytes()), None, "{text:?}");
        }
        // 16 digits and more take the literal parser (correct rounding past 2^53).
        assert_eq!(parse_f64(b"9007199254740993"), Some(9007199254740992.0));
    }

    #[test]
    fn format_i64_line_edges() {
        for v in [0, 9, 10, -1, -9, 99, 100, i64::MAX, i64::MIN] {
            let mut out = b"x".to_vec();
            format_i64_line(b'*', v, &mut out);
            assert_eq!(out, format!("x*{v}\r\n").into_bytes());
        }
    }

    #[test]
    fn format_i64_edges() {
        for v in [
            0,
            1,
            -1,
            9,
            10,
            99,
            100,
            -100,
            12345,
            i64::MAX,
            i64::MIN,
            i64::MIN + 1,
        ] {
            let mut out = b"x".to_vec();
            format_i64(v, &mut out);
            assert_eq!(out, format!("x{v}").into_bytes());
        }
    }

    /// Redis 7.4's double replies (`d2string`: integers within ±2^62, then
    /// fpconv's layout of the shortest digits). Rows worked out from fpconv_dtoa's
    /// layout rules: plain integers while the exponent is below digits + 7, plain
    /// decimals for exponents down to -7 (or |exponent| < 4), else `d.ddde±x`.
    #[test]
    #[allow(clippy::approx_constant)]
    fn format_f64_follows_redis_7_4() {
        let rows: &[(f64, &str)] = &[
            (3.14, "3.14"),
            (1e300, "1e+300"),
            (0.1, "0.1"),
            (1.5e-7, "1.5e-7"),
            (123456789012345680000.0, "123456789012345680000"),
            (-0.0, "-0"),
            (0.0, "0"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (1.0, "1"),
            (-2.5, "-2.5"),
            (1e-7, "1e-7"),
            (1e-6, "0.000001"),
            (1e-5, "0.00001"),
            (0.0001, "0.0001"),
            (0.0012345, "0.0012345"),
            (0.00012345, "1.2345e-4"),
            (1.234e-5, "1.234e-5"),
            (1e-10, "1e-10"),
            (-1e-100, "-1e-100"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (1e17, "100000000000000000"),
            (4611686018427387904.0, "4611686018427387904"),
            (-4611686018427387904.0, "-4611686018427387904"),
            (9223372036854775808.0, "9223372036854776000"),
            (1e21, "1e+21"),
            (1e22, "1e+22"),
            (1.5e300, "1.5e+300"),
            (1.2345678901234567e23, "123456789012345670000000"),
            (1.2345678901234566e25, "1.2345678901234566e+25"),
            (0.1 + 0.2, "0.30000000000000004"),
            (123456789.123, "123456789.123"),
            (9007199254740993.0, "9007199254740992"),
        ];
        for &(v, want) in rows {
            assert_eq!(format_f64(v), want, "{v:e}");
        }
    }

    /// Rows: `DEL z; ZADD z <input> m; ZSCORE z m` on redis-server 7.0.15
    /// with `zset-max-listpack-entries 0` (skiplist encoding; listpack
    /// encoding stores -0 as 0, a storage detail, not a formatting one).
    /// `None` means ZADD answered "value is not a valid float".
    #[test]
    fn parse_and_format_f64_match_redis_zscore() {
        let rows: &[(&[u8], Option<&str>)] = &[
            (b"1", Some("1")),
            (b"1.5", Some("1.5")),
            (b"0.1", Some("0.10000000000000001")),
            (b"-0", Some("-0")),
            (b"0", Some("0")),
            (b"1e21", Some("1e+21")),
            (b"1e-7", Some("9.9999999999999995e-08")),
            (b"123456789012345678", Some("1.2345678901234568e+17")),
            (b"1.7976931348623157e308", Some("1.7976931348623157e+308")),
            (b"5e-324", Some("4.9406564584124654e-324")),
            (b"inf", Some("inf")),
            (b"-inf", Some("-inf")),
            (b"3.0000000000000004", Some("3.0000000000000004")),
            (b"1e15", Some("1000000000000000")),
            (b"1e16", Some("10000000000000000")),
            (b"1e17", Some("1e+17")),
            (b"0.3", Some("0.29999999999999999")),
            (b"100", Some("100")),
            (b"-2.5", Some("-2.5")),
            (b"1e-5", Some("1.0000000000000001e-05")),
            (b"1e-4", Some("0.0001")),
            (b"0.0001234", Some("0.00012339999999999999")),
            (b"0.00001234", Some("1.234e-05")),
            (b"2.2250738585072014e-308", Some("2.2250738585072014e-308")),
            (b"12345678901234567", Some("12345678901234568")),
            (b"1e22", Some("1e+22")),
            (b"1e100", Some("1e+100")),
            (b"-1e-100", Some("-1e-100")),
            (b"0.30000000000000004", Some("0.30000000000000004")),
            (b"123.456", Some("123.456")),
            (b"2.98023223876953125e-8", Some("2.9802322387695312e-08")),
            (b"9007199254740993", Some("9007199254740992")),
            (b"99999999999999999", Some("1e+17")),
            (b"9.9999999999999999e16", Some("1e+17")),
            (b"0x10", Some("16")),
            (b"0X1p4", Some("16")),
            (b"0x1.8p1", Some("3")),
            (b"0x.8", Some("0.5")),
            (b"-0x1P-2", Some("-0.25")),
            (b"0x", None),
            (b"0x1p", None),
            (b"0x1p+", None),
            (b"0x-1", None),
            (b"0x1.00000000000008p0", Some("1")),
            (b"0x1.00000000000018p0", Some("1.0000000000000004")),
            (
                b"0x1.000000000000080000000001p0",
                Some("1.0000000000000002"),
            ),
            (b"0x1p-1074", Some("4.9406564584124654e-324")),
            (b"0x1p-1075", None),
            (b"0x1.8p-1075", Some("4.9406564584124654e-324")),
            (b"0x1p1024", None),
            (b"0x1.fffffffffffff8p1023", None),
            (b"0x1.fffffffffffff7p1023", Some("1.7976931348623157e+308")),
            (b"+inf", Some("inf")),
            (b"INF", Some("inf")),
            (b"Infinity", Some("inf")),
            (b"-INFINITY", Some("-inf")),
            (b"infinit", None),
            (b"infx", None),
            (b"nan", None),
            (b"NaN", None),
            (b"-nan", None),
            (b"nan(123)", None),
            (b"", None),
            (b" 1", None),
            (b"1 ", None),
            (b"\t1", None),
            (b"+1", Some("1")),
            (b"+.5", Some("0.5")),
            (b".5", Some("0.5")),
            (b"5.", Some("5")),
            (b".", None),
            (b"-.", None),
            (b"1e", None),
            (b"1e+", None),
            (b"1e5", Some("100000")),
            (b"1E-5", Some("1.0000000000000001e-05")),
            (b"1e400", None),
            (b"-1e400", None),
            (b"1e-400", None),
            (b"4e-324", Some("4.9406564584124654e-324")),
            (b"2e-324", None),
            (b"2.4703282292062328e-324", Some("4.9406564584124654e-324")),
            (b"3e-324", Some("4.9406564584124654e-324")),
            (b"1e-310", Some("9.9999999999999694e-311")),
            (b"0e-999999", Some("0")),
            (b"1.7976931348623158e308", Some("1.7976931348623157e+308")),
            (b"1.7976931348623159e308", None),
            (b"1\x00", None),
            (b"1_0", None),
            (b"- 1", None),
            (b"--1", None),
            (b"1e5.5", None),
            (b"1.5e+03", Some("1500")),
            (b"00012", Some("12")),
            (b"1.2.3", None),
            (b"1e0000000000000000000000001", Some("10")),
            (b"0,5", None),
            (b"1d5", None),
        ];
        for &(input, want) in rows {
            let got = parse_f64(input).map(format_f64_17g);
            assert_eq!(
                got.as_deref(),
                want,
                "input {:?}",
                input.escape_ascii().to_string()
            );
        }
        // Long literals, same server: 0.<400 zeros>1e400 and 1<400 zeros>e-400.
        let small = format!("0.{}1e400", "0".repeat(400));
        assert_eq!(
            parse_f64(small.as_bytes()).map(format_f64_17g).as_deref(),
            Some("0.10000000000000001")
        );
        let big = format!("1{}e-400", "0".repeat(400));
        assert_eq!(
            parse_f64(big.as_bytes()).map(format_f64_17g).as_deref(),
            Some("1")
        );
        let too_big = format!("1{}", "0".repeat(400));
        assert_eq!(parse_f64(too_big.as_bytes()), None);
    }

    /// %.17g reference built from the exact decimal expansion of the double,
    /// rounded half-to-even by hand: independent of Rust's `{:e}`.
    fn reference_17g(v: f64) -> String {
        if v.is_infinite() {
            return if v > 0.0 { "inf".into() } else { "-inf".into() };
        }
        let sign = if v.is_sign_negative() { "-" } else { "" };
        if v == 0.0 {
            return format!("{sign}0");
        }
        let bits = v.abs().to_bits();
        let (mant, exp) = if bits >> 52 == 0 {
            (bits, -1074i64)
        } else {
            (
                (bits & ((1 << 52) - 1)) | (1 << 52),
                (bits >> 52) as i64 - 1075,
            )
        };
        // v = digits * 10^-frac_places exactly.
        let (digits, frac_places) = if exp >= 0 {
            ((BigUint::from(mant) << exp as u64).to_string(), 0i64)
        } else {
            (
                (BigUint::from(mant) * BigUint::from(5u32).pow((-exp) as u32)).to_string(),
                -exp,
            )
        };
        let mut d: Vec<u8> = digits.bytes().map(|b| b - b'0').collect();
        let mut x = d.len() as i64 - 1 - frac_places; // decimal exponent
        if d.len() > 17 {
            let rest = &d[17..];
            let up = match rest[0].cmp(&5) {
                std::cmp::Ordering::Greater => true,
                std::cmp::Ordering::Less => false,
                std::cmp::Ordering::Equal => rest[1..].iter().any(|&r| r != 0) || d[16] % 2 == 1,
            };
            d.truncate(17);
            if up {
                let mut i = 16;
                loop {
                    if d[i] == 9 {
                        d[i] = 0;
                        if i == 0 {
                            d.insert(0, 1);
                            d.truncate(17);
                            x += 1;
                            break;
                        }
                        i -= 1;
                    } else {
                        d[i] += 1;
                        break;
                    }
                }
            }
        }
        while d.len() > 1 && d[d.len() - 1] == 0 {
            d.pop();
        }
        let s: String = d.iter().map(|&b| (b + b'0') as char).collect();
        if !(-4..17).contains(&x) {
            let mant = if s.len() > 1 {
                format!("{}.{}", &s[..1], &s[1..])
            } else {
                s
            };
            format!(
                "{sign}{mant}e{}{:02}",
                if x < 0 { '-' } else { '+' },
                x.abs()
            )
        } else if x >= 0 {
            let int_len = x as usize + 1;
            if s.len() <= int_len {
                format!("{sign}{s}{}", "0".repeat(int_len - s.len()))
            } else {
                format!("{sign}{}.{}", &s[..int_len], &s[int_len..])
            }
        } else {
            format!("{sign}0.{}{s}", "0".repeat((-x - 1) as usize))
        }
    }

    #[test]
    fn format_f64_ties_round_to_even() {
        // 2^-25 = 2.98023223876953125e-8 is an exact 17-digit tie; Redis
        // replies ...312 (checked with ZADD/ZSCORE above).
        assert_eq!(reference_17g(2f64.powi(-25)), "2.9802322387695312e-08");
        assert_eq!(format_f64_17g(2f64.powi(-25)), "2.9802322387695312e-08");
        let mut out = b"x".to_vec();
        write_f64_17g(-1.5, &mut out);
        assert_eq!(out, b"x-1.5");
    }

    /// Writes `v` as a C99 hex float literal, exactly.
    fn hex_literal(v: f64) -> String {
        let sign = if v.is_sign_negative() { "-" } else { "" };
        let bits = v.abs().to_bits();
        let (lead, exp) = if bits >> 52 == 0 {
            (0, -1022)
        } else {
            (1, (bits >> 52) as i64 - 1023)
        };
        format!("{sign}0x{lead}.{:013x}p{exp}", bits & ((1 << 52) - 1))
    }

    proptest! {
        #[test]
        fn format_i64_matches_std(v: i64) {
            let mut out = Vec::new();
            format_i64(v, &mut out);
            prop_assert_eq!(out, v.to_string().into_bytes());
        }

        #[test]
        fn short_integers_parse_as_the_literal_parser_reads_them(
            n in -999_999_999_999_999i64..=999_999_999_999_999,
            zeros in 0usize..3,
            plus: bool,
        ) {
            // Leading zeros and an explicit `+` included: strtod accepts both.
            let digits = format!("{}{}", "0".repeat(zeros), n.unsigned_abs());
            let sign = if n < 0 { "-" } else if plus { "+" } else { "" };
            let text = format!("{sign}{digits}");
            let want = parse_f64_literal(text.as_bytes());
            let got = parse_f64(text.as_bytes());
            prop_assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits), "{}", text);
        }

        #[test]
        fn format_i64_line_matches_std(v: i64, small in -12i64..12) {
            for n in [v, small] {
                let mut out = b"x".to_vec();
                format_i64_line(b':', n, &mut out);
                prop_assert_eq!(out, format!("x:{n}\r\n").into_bytes());
            }
        }

        #[test]
        fn parse_i64_round_trips(v: i64) {
            prop_assert_eq!(parse_i64(v.to_string().as_bytes()), Some(v));
        }

        /// Any run of up to 21 digits (so past both ends of the range), signed or
        /// not, with a stray byte or not: as Rust reads it, less the leading zeros
        /// and the `-0` Redis refuses.
        #[test]
        fn parse_i64_of_digit_runs_matches_std(
            text in "-?[0-9]{1,21}",
            stray in proptest::option::of((0usize..22, any::<u8>())),
        ) {
            let mut bytes = text.into_bytes();
            if let Some((at, b)) = stray {
                let at = at.min(bytes.len() - 1);
                bytes[at] = b;
            }
            let digits = bytes.strip_prefix(b"-").unwrap_or(&bytes);
            let want = match std::str::from_utf8(&bytes) {
                _ if digits.len() > 1 && digits[0] == b'0' => None,
                _ if bytes == b"-0" => None,
                _ if digits.first() == Some(&b'+') => None,
                Ok(t) => t.parse::<i64>().ok(),
                Err(_) => None,
            };
            prop_assert_eq!(parse_i64(&bytes), want, "{:?}", bytes);
        }

        #[test]
        fn format_f64_matches_exact_reference(bits: u64) {
            let v = f64::from_bits(bits);
            prop_assume!(!v.is_nan());
            prop_assert_eq!(format_f64_17g(v), reference_17g(v));
        }

        /// 7.4's form reads back to the same double with the fewest significant
        /// digits: rounded to one digit fewer, no decimal reads back.
        #[test]
        fn format_f64_is_shortest_round_trip(bits: u64) {
            let v = f64::from_bits(bits);
            prop_assume!(v.is_finite());
            let text = format_f64(v);
            prop_assert_eq!(parse_f64(text.as_bytes()).map(f64::to_bits), Some(bits), "{}", text);
            let mantissa = text.split('e').next().unwrap().trim_start_matches('-');
            let significant = mantissa.replace('.', "");
            let significant = significant.trim_start_matches('0').trim_end_matches('0');
            let n = significant.len().max(1);
            if n > 1 && f64_as_exact_i64(v).is_none() {
                let shorter: f64 = format!("{v:.*e}", n - 2).parse().unwrap();
                prop_assert_ne!(shorter.to_bits(), bits, "{} is not shortest", text);
            }
        }

        #[test]
        fn f64_text_round_trips(bits: u64) {
            let v = f64::from_bits(bits);
            prop_assume!(!v.is_nan());
            // %.17g always round-trips, and so do Rust's and hex spellings.
            prop_assert_eq!(parse_f64(format_f64_17g(v).as_bytes()).map(f64::to_bits), Some(bits));
            prop_assert_eq!(parse_f64(format!("{v:e}").as_bytes()).map(f64::to_bits), Some(bits));
            if v.is_finite() {
                prop_assert_eq!(parse_f64(hex_literal(v).as_bytes()).map(f64::to_bits), Some(bits));
            }
        }

        #[test]
        fn parsers_never_panic(s in proptest::collection::vec(
            proptest::sample::select(b"0123456789.eEpPxX+-infINFa \t".to_vec()), 0..12)) {
            let _ = parse_f64(&s);
            let _ = LongDouble::parse(&s);
        }

        /// Integers below 2^64 in magnitude are exact in a long double, so
        /// integer sums must print exactly.
        #[test]
        fn long_double_integer_sums_are_exact(a: i64, b: i64) {
            let want = (i128::from(a) + i128::from(b)).to_string();
            let got = incr_by_float(a.to_string().as_bytes(), b.to_string().as_bytes());
            prop_assert_eq!(got, Ok(want.into_bytes()));
        }

        #[test]
        fn long_double_parses_u64_exactly(n: u64) {
            let v = LongDouble::parse(n.to_string().as_bytes()).unwrap();
            prop_assert_eq!(v.to_human_string(), n.to_string());
            prop_assert_eq!(LongDouble::from_i64(n as i64).to_human_string(), (n as i64).to_string());
        }
    }

    /// Rows: `SET f <current>` (or no key for `None`); `INCRBYFLOAT f <incr>`
    /// on redis-server 7.0.15.
    #[test]
    fn incr_by_float_matches_redis() {
        use IncrFloatError::*;
        let big_sum = "1000000000000000000008997324079559193870523944273290747938260082321265646596180935755849152083750497190350372508614274835903592556184672983913096260520748646287327135641843653294084255107606016789726652932370030551382947620994540294772781889620606179267611627097410650567187386105690089424915104006144";
        let dbl_max_plus_17 = "179769313486231569995921046774104434048386446944329178485314420765176628523124396354701868608387085564428793419425520689308708363451136055357897278026477617073498977686288394835618163294045594434929537447290627480669417384648879122776218333598953852832103282504751611691208117720159985926376802466863339536384";
        let rows: &[IncrRow] = &[
            (Some(&b"0.1"[..]), b"0.2", Ok("0.3")),
            (Some(&b"1e20"[..]), b"0.1", Ok("100000000000000000000")),
            (Some(&b"3"[..]), b"1.0e3", Ok("1003")),
            (Some(&b"1003"[..]), b"-0.5", Ok("1002.5")),
            (Some(&b"5.0e3"[..]), b"0", Ok("5000")),
            (Some(&b"1"[..]), b"0x10", Ok("17")),
            (Some(&b"abc"[..]), b"1", Err(NotAFloat)),
            (Some(&b"1"[..]), b"abc", Err(NotAFloat)),
            (Some(&b" 1"[..]), b"1", Err(NotAFloat)),
            (Some(&b"1"[..]), b" 1", Err(NotAFloat)),
            (Some(&b"1"[..]), b"1 ", Err(NotAFloat)),
            (Some(&b"1"[..]), b"inf", Err(NanOrInfinity)),
            (Some(&b"1"[..]), b"-inf", Err(NanOrInfinity)),
            (Some(&b"1"[..]), b"nan", Err(NotAFloat)),
            (Some(&b"inf"[..]), b"1", Err(NanOrInfinity)),
            (Some(&b"inf"[..]), b"-inf", Err(NanOrInfinity)),
            (Some(&b"0"[..]), b"-0", Ok("0")),
            (None, b"-0", Ok("0")),
            (Some(&b"-0"[..]), b"0", Ok("0")),
            (Some(&b"-0"[..]), b"-0", Ok("0")),
            (
                Some(&b"1.18973149535723176508e4932"[..]),
                b"0",
                Err(NotAFloat),
            ),
            (Some(&b"1e-4950"[..]), b"0", Ok("0")),
            (Some(&b"1e-4952"[..]), b"0", Err(NotAFloat)),
            (
                Some(&b"0"[..]),
                b"0.000003814697265625",
                Ok("0.00000381469726562"),
            ),
            (
                Some(&b"0"[..]),
                b"0.000011444091796875",
                Ok("0.00001144409179688"),
            ),
            (Some(&b"0"[..]), b"-1e-20", Ok("0")),
            (Some(&b"0"[..]), b"1e-18", Ok("0")),
            (Some(&b"1\x00abc"[..]), b"1", Err(NotAFloat)),
            (Some(&b"\x00abc"[..]), b"1", Err(NotAFloat)),
            (Some(&b"1"[..]), b"1\x00abc", Err(NotAFloat)),
            (Some(&b""[..]), b"1", Err(NotAFloat)),
            (Some(&b"1"[..]), b"", Err(NotAFloat)),
            (None, b"1.5", Ok("1.5")),
            (Some(&b"0x1p-16445"[..]), b"0", Ok("0")),
            (Some(&b"0x1p-16446"[..]), b"0", Err(NotAFloat)),
            (Some(&b"0x1.8p-16446"[..]), b"0", Ok("0")),
            (Some(&b"10.5"[..]), b"-10.5", Ok("0")),
            (Some(&b"1.1"[..]), b"2.2", Ok("3.3")),
            (Some(&b"0.1"[..]), b"0.7", Ok("0.8")),
            (
                Some(&b"123456789012345678901234567890"[..]),
                b"1",
                Ok("123456789012345678899921813504"),
            ),
            (Some(&b"-1e20"[..]), b"0.1", Ok("-100000000000000000000")),
            (
                Some(&b"9223372036854775807"[..]),
                b"1",
                Ok("9223372036854775808"),
            ),
            (
                Some(&b"-9223372036854775808"[..]),
                b"-1",
                Ok("-9223372036854775809"),
            ),
            (
                Some(&b"18446744073709551615"[..]),
                b"1",
                Ok("18446744073709551616"),
            ),
            (
                Some(&b"18446744073709551616"[..]),
                b"1",
                Ok("18446744073709551616"),
            ),
            (
                Some(&b"18446744073709551616"[..]),
                b"2",
                Ok("18446744073709551618"),
            ),
            (
                Some(&b"18446744073709551616"[..]),
                b"3",
                Ok("18446744073709551620"),
            ),
            (Some(&b"1"[..]), b"1e-17", Ok("1.00000000000000001")),
            (Some(&b"1"[..]), b"5e-18", Ok("1")),
            (Some(&b"1"[..]), b"4.9999e-18", Ok("1")),
            (Some(&b"+1"[..]), b"1", Ok("2")),
            (Some(&b"1"[..]), b"+1", Ok("2")),
            (Some(&b"INFINITY"[..]), b"0", Err(NanOrInfinity)),
            (Some(&b"1"[..]), b"-1", Ok("0")),
            (Some(&b"-1"[..]), b"0.5", Ok("-0.5")),
            (Some(&b"0x1.8"[..]), b"0", Ok("1.5")),
            (Some(&b"1e"[..]), b"1", Err(NotAFloat)),
            (Some(&b"00012"[..]), b"1", Ok("13")),
            (Some(&b"1."[..]), b"1", Ok("2")),
            (Some(&b".5"[..]), b"1", Ok("1.5")),
            (Some(&b"1e4932"[..]), b"1e4932", Err(NanOrInfinity)),
            (Some(&b"-1e4932"[..]), b"-1e4932", Err(NanOrInfinity)),
            (
                Some(&b"0x1.fffffffffffffffep16383"[..]),
                b"0x1p16319",
                Err(NanOrInfinity),
            ),
            (
                Some(&b"3.14159265358979323846264338327950288"[..]),
                b"0",
                Ok("3.14159265358979324"),
            ),
            (Some(&b"1"[..]), b"0.1", Ok("1.1")),
            (Some(&b"-5"[..]), b"2.5", Ok("-2.5")),
            (Some(&b"2.5"[..]), b"-5", Ok("-2.5")),
            (Some(&b"0.1"[..]), b"-0.1", Ok("0")),
            (Some(&b"1e-17"[..]), b"0", Ok("0.00000000000000001")),
            (Some(&b"-1e-17"[..]), b"0", Ok("-0.00000000000000001")),
            (Some(&b"5e-18"[..]), b"0", Ok("0")),
            (Some(&b"1.5e-17"[..]), b"0", Ok("0.00000000000000002")),
            (Some(&b"0x1p-63"[..]), b"1", Ok("1")),
            (Some(&b"0x1p-64"[..]), b"1", Ok("1")),
            (Some(&b"0x3p-65"[..]), b"1", Ok("1")),
            (Some(&b"nan"[..]), b"1", Err(NotAFloat)),
            (Some(&b"0x10"[..]), b"0x1p-4", Ok("16.0625")),
            (Some(&b"1e300"[..]), b"1e20", Ok(big_sum)),
            (
                Some(&b"1.7976931348623157e308"[..]),
                b"17",
                Ok(dbl_max_plus_17),
            ),
        ];
        for &(current, incr, want) in rows {
            let got = incr_by_float(current.unwrap_or(b"0"), incr);
            let got = got
                .as_ref()
                .map(|v| std::str::from_utf8(v).unwrap())
                .map_err(|e| *e);
            assert_eq!(
                got,
                want,
                "current {:?} incr {:?}",
                current,
                incr.escape_ascii().to_string()
            );
        }
    }

    /// Outputs too long for a table row, checked by length and both ends
    /// against redis-server 7.0.15.
    #[test]
    fn incr_by_float_huge_values_match_redis() {
        let rows: &[HugeRow] = &[
            (
                b"1e4000",
                b"1",
                4000,
                "9999999999999999999965463873099623784932",
                "1956972190272729951206648276349901340672",
            ),
            (
                b"0x1.fffffffffffffffep16383",
                b"0x1p16318",
                4933,
                "1189731495357231765021263853030970205169",
                "8849149662444156604419552086811989770240",
            ),
            (
                b"-0x1.fffffffffffffffep16383",
                b"0",
                4934,
                "-118973149535723176502126385303097020516",
                "8849149662444156604419552086811989770240",
            ),
        ];
        for &(current, incr, len, head, tail) in rows {
            let got = String::from_utf8(incr_by_float(current, incr).unwrap()).unwrap();
            assert_eq!(got.len(), len);
            assert!(got.starts_with(head) && got.ends_with(tail), "{current:?}");
            // Redis can read back everything it stores (all under 5120 bytes).
            assert!(LongDouble::parse(got.as_bytes()).is_some());
        }
    }

    /// Redis's string2ld buffer: 5119 bytes parse, 5120 do not (verified
    /// with `1.000…` strings of each length on redis-server 7.0.15).
    #[test]
    fn long_double_input_length_limit() {
        for (len, ok) in [(5117, true), (5119, true), (5120, false), (5121, false)] {
            let s = format!("1.{}", "0".repeat(len - 2));
            assert_eq!(incr_by_float(s.as_bytes(), b"1").is_ok(), ok, "len {len}");
            assert_eq!(incr_by_float(b"1", s.as_bytes()).is_ok(), ok, "len {len}");
        }
        // A 5008-byte literal with a compensating exponent is fine.
        let s = format!("0.{}1e5002", "0".repeat(5000));
        assert_eq!(incr_by_float(s.as_bytes(), b"0"), Ok(b"10".to_vec()));
    }

    /// Rows: `HSET h f <current>` (or no field for `None`);
    /// `HINCRBYFLOAT h f <incr>` on redis-server 7.0.15.
    #[test]
    fn hincr_by_float_matches_redis() {
        use HincrFloatError::*;
        let rows: &[HincrRow] = &[
            (Some(&b"1"[..]), b"inf", Err(IncrementNanOrInfinity)),
            (Some(&b"abc"[..]), b"1", Err(HashValueNotAFloat)),
            (Some(&b"1"[..]), b"abc", Err(NotAFloat)),
            (Some(&b"abc"[..]), b"abc", Err(NotAFloat)),
            (Some(&b"abc"[..]), b"inf", Err(IncrementNanOrInfinity)),
            (Some(&b"1e4932"[..]), b"1e4932", Err(NanOrInfinity)),
            (None, b"0.1", Ok("0.1")),
            (None, b"-0", Ok("0")),
            (Some(&b"0.1"[..]), b"0.2", Ok("0.3")),
            (Some(&b"1"[..]), b"nan", Err(NotAFloat)),
            (Some(&b"1"[..]), b"-0", Ok("1")),
            (Some(&b"inf"[..]), b"1", Err(NanOrInfinity)),
            (Some(&b" 1"[..]), b"1", Err(HashValueNotAFloat)),
            (Some(&b"1"[..]), b"0x10", Ok("17")),
            (Some(&b"5.0e3"[..]), b"0", Ok("5000")),
            (Some(&b"10.5"[..]), b"-10.5", Ok("0")),
            (Some(&b"1"[..]), b"-INF", Err(IncrementNanOrInfinity)),
        ];
        for &(current, incr, want) in rows {
            let got = hincr_by_float_increment(incr)
                .and_then(|i| hincr_by_float(current.unwrap_or(b"0"), i));
            let got = got
                .as_ref()
                .map(|v| std::str::from_utf8(v).unwrap())
                .map_err(|e| *e);
            assert_eq!(got, want, "current {:?} incr {:?}", current, incr);
        }
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            IncrFloatError::NotAFloat.message(),
            "ERR value is not a valid float"
        );
        assert_eq!(
            IncrFloatError::NanOrInfinity.message(),
            "ERR increment would produce NaN or Infinity"
        );
        assert_eq!(
            HincrFloatError::NotAFloat.message(),
            "ERR value is not a valid float"
        );
        assert_eq!(
            HincrFloatError::IncrementNanOrInfinity.message(),
            "ERR value is NaN or Infinity"
        );
        assert_eq!(
            HincrFloatError::HashValueNotAFloat.message(),
            "ERR hash value is not a float"
        );
        assert_eq!(
            HincrFloatError::NanOrInfinity.message(),
            "ERR increment would produce NaN or Infinity"
        );
    }

    #[test]
    fn long_double_special_sums() {
        let p = |s: &str| LongDouble::parse(s.as_bytes()).unwrap();
        assert!((p("inf") + p("-inf")).is_nan());
        assert!((p("inf") + p("1")).is_infinite());
        assert!((p("-0") + p("-0")).is_finite());
        assert_eq!((p("-0") + p("-0")).to_human_string(), "0");
        assert_eq!((p("1e4932") + p("1e4932")).to_human_string(), "inf");
    }
}
