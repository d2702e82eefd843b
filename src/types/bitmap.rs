//! Bit operations on byte strings: the internals of GETBIT/SETBIT, BITCOUNT, BITPOS,
//! BITOP and BITFIELD.
//!
//! Bits are numbered as Redis numbers them: bit 0 is the most significant bit of byte
//! 0. Counting and scanning work a 64-bit word at a time over whole bytes and fall back
//! to masks only at the partial bytes of a range, because bitmaps are often megabytes.
//! Bit fields are read through a 9-byte big-endian window (a field of up to 64 bits
//! starting anywhere in a byte spans at most 9 bytes), zero-padded past the string's
//! end, as Redis treats missing bytes as zeroes.

/// Value of bit `offset` (false past the end).
pub fn get_bit(s: &[u8], offset: u64) -> bool {
    let byte = offset >> 3;
    match usize::try_from(byte).ok().and_then(|b| s.get(b)) {
        Some(b) => b & (0x80 >> (offset & 7)) != 0,
        None => false,
    }
}

/// Sets bit `offset` (the byte must exist); returns the previous value.
pub fn set_bit(s: &mut [u8], offset: u64, on: bool) -> bool {
    let byte = (offset >> 3) as usize;
    let mask = 0x80u8 >> (offset & 7);
    let old = s[byte] & mask != 0;
    if on {
        s[byte] |= mask;
    } else {
        s[byte] &= !mask;
    }
    old
}

/// Number of set bits in `s`, a word at a time.
pub fn popcount(s: &[u8]) -> u64 {
    let mut chunks = s.chunks_exact(8);
    let mut n: u64 = 0;
    for c in &mut chunks {
        let w = u64::from_ne_bytes(c.try_into().expect("8-byte chunk"));
        n += w.count_ones() as u64;
    }
    n + chunks
        .remainder()
        .iter()
        .map(|b| b.count_ones() as u64)
        .sum::<u64>()
}

/// Mask of the bits of one byte from in-byte bit `from` to `to` inclusive (0 = MSB).
fn byte_mask(from: u32, to: u32) -> u8 {
    let hi = 0xffu8 >> from;
    let lo = 0xffu8 << (7 - to);
    hi & lo
}

/// Number of set bits between bit positions `start` and `end` inclusive; both must
/// lie inside `s`.
pub fn count_range(s: &[u8], start: u64, end: u64) -> u64 {
    debug_assert!(start <= end && end < s.len() as u64 * 8);
    let (sb, eb) = ((start >> 3) as usize, (end >> 3) as usize);
    let (sbit, ebit) = ((start & 7) as u32, (end & 7) as u32);
    if sb == eb {
        return (s[sb] & byte_mask(sbit, ebit)).count_ones() as u64;
    }
    (s[sb] & byte_mask(sbit, 7)).count_ones() as u64
        + popcount(&s[sb + 1..eb])
        + (s[eb] & byte_mask(0, ebit)).count_ones() as u64
}

/// Index of the first byte of `s` that is not `skip`, scanning 8 bytes at a time.
fn first_byte_not(s: &[u8], skip: u8) -> Option<usize> {
    let word = u64::from_ne_bytes([skip; 8]);
    let mut i = 0;
    let mut chunks = s.chunks_exact(8);
    for c in &mut chunks {
        if u64::from_ne_bytes(c.try_into().expect("8-byte chunk")) != word {
            break;
        }
        i += 8;
    }
    s[i..].iter().position(|&b| b != skip).map(|p| i + p)
}

/// Position of the first bit equal to `bit` between bit positions `start` and `end`
/// inclusive (both inside `s`), or `None`.
pub fn find_bit(s: &[u8], bit: bool, start: u64, end: u64) -> Option<u64> {
    debug_assert!(start <= end && end < s.len() as u64 * 8);
    // A byte to look into: flip it when looking for zeroes so the search is always
    // for a set bit, keeping only the bits in range.
    let probe = |byte: usize, from: u32, to: u32| -> Option<u64> {
        let b = if bit { s[byte] } else { !s[byte] } & byte_mask(from, to);
        (b != 0).then(|| byte as u64 * 8 + b.leading_zeros() as u64)
    };
    let (sb, eb) = ((start >> 3) as usize, (end >> 3) as usize);
    let (sbit, ebit) = ((start & 7) as u32, (end & 7) as u32);
    if sb == eb {
        return probe(sb, sbit, ebit);
    }
    if let Some(p) = probe(sb, sbit, 7) {
        return Some(p);
    }
    let skip = if bit { 0x00 } else { 0xff };
    if let Some(i) = first_byte_not(&s[sb + 1..eb], skip) {
        return probe(sb + 1 + i, 0, 7);
    }
    probe(eb, 0, ebit)
}

/// The bitwise operations of BITOP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// BITOP over `srcs` (missing keys are empty strings): the result is as long as the
/// longest input, shorter inputs are zero-padded. NOT takes exactly one input.
pub fn bitop(op: BitOp, srcs: &[&[u8]]) -> Vec<u8> {
    let maxlen = srcs.iter().map(|s| s.len()).max().unwrap_or(0);
    let minlen = srcs.iter().map(|s| s.len()).min().unwrap_or(0);
    let mut res = vec![0u8; maxlen];
    if srcs.is_empty() || maxlen == 0 {
        return res;
    }
    // Fast path over the prefix every input covers, a word at a time.
    let words = minlen / 8;
    let word = |s: &[u8], i: usize| u64::from_ne_bytes(s[i * 8..i * 8 + 8].try_into().unwrap());
    for i in 0..words {
        let mut w = word(srcs[0], i);
        match op {
            BitOp::Not => w = !w,
            BitOp::And => srcs[1..].iter().for_each(|s| w &= word(s, i)),
            BitOp::Or => srcs[1..].iter().for_each(|s| w |= word(s, i)),
            BitOp::Xor => srcs[1..].iter().for_each(|s| w ^= word(s, i)),
        }
        res[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
    }
    let byte = |s: &[u8], j: usize| s.get(j).copied().unwrap_or(0);
    for (j, out) in res.iter_mut().enumerate().skip(words * 8) {
        let mut b = byte(srcs[0], j);
        match op {
            BitOp::Not => b = !b,
            BitOp::And => srcs[1..].iter().for_each(|s| b &= byte(s, j)),
            BitOp::Or => srcs[1..].iter().for_each(|s| b |= byte(s, j)),
            BitOp::Xor => srcs[1..].iter().for_each(|s| b ^= byte(s, j)),
        }
        *out = b;
    }
    res
}

// ----- bit fields -------------------------------------------------------------------

/// The 9 bytes starting at `byte`, big-endian, zero-padded past the end of `s`.
fn window(s: &[u8], byte: usize) -> u128 {
    let mut w: u128 = 0;
    for i in 0..9 {
        let b = byte
            .checked_add(i)
            .and_then(|k| s.get(k))
            .copied()
            .unwrap_or(0);
        w = (w << 8) | b as u128;
    }
    w
}

fn field_mask(bits: u32) -> u128 {
    (1u128 << bits) - 1
}

/// Reads an unsigned field of `bits` (1..=64) bits at bit `offset`.
pub fn get_unsigned(s: &[u8], offset: u64, bits: u32) -> u64 {
    let Ok(byte) = usize::try_from(offset >> 3) else {
        return 0;
    };
    let shift = 72 - (offset & 7) as u32 - bits;
    ((window(s, byte) >> shift) & field_mask(bits)) as u64
}

/// Reads a signed (two's complement) field of `bits` (1..=64) bits at bit `offset`.
pub fn get_signed(s: &[u8], offset: u64, bits: u32) -> i64 {
    let u = get_unsigned(s, offset, bits);
    // Sign-extend from bit `bits - 1`.
    ((u << (64 - bits)) as i64) >> (64 - bits)
}

/// Writes the low `bits` bits of `value` at bit `offset`; `s` must cover the field.
pub fn set_field(s: &mut [u8], offset: u64, bits: u32, value: u64) {
    let byte = (offset >> 3) as usize;
    let shift = 72 - (offset & 7) as u32 - bits;
    let mask = field_mask(bits) << shift;
    let w = (window(s, byte) & !mask) | (((value as u128) << shift) & mask);
    for i in 0..9 {
        if let Some(b) = s.get_mut(byte + i) {
            *b = (w >> (8 * (8 - i))) as u8;
        }
    }
}

/// BITFIELD's OVERFLOW behaviours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// Result of adding `incr` to an unsigned `bits`-bit field holding `value` (for SET,
/// `value` is the new value reinterpreted as unsigned and `incr` is 0). Returns the
/// value to store, or `None` when it overflows under FAIL.
pub fn unsigned_add(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<u64> {
    let max = field_mask(bits) as i128;
    let sum = value as i128 + incr as i128;
    if (0..=max).contains(&sum) {
        return Some(sum as u64);
    }
    match ow {
        Overflow::Fail => None,
        Overflow::Wrap => Some((sum & max) as u64),
        Overflow::Sat => Some(if sum > max { max as u64 } else { 0 }),
    }
}

/// Result of adding `incr` to a signed `bits`-bit field holding `value` (for SET,
/// `value` is the new value and `incr` 0). `None` when it overflows under FAIL.
pub fn signed_add(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<i64> {
    let max = (1i128 << (bits - 1)) - 1;
    let min = -max - 1;
    let sum = value as i128 + incr as i128;
    if (min..=max).contains(&sum) {
        return Some(sum as i64);
    }
    match ow {
        Overflow::Fail => None,
        Overflow::Sat => Some(if sum > max { max as i64 } else { min as i64 }),
        Overflow::Wrap => {
            let low = (sum as u128 as u64) << (64 - bits);
            Some((low as i64) >> (64 - bits))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive_bit(s: &[u8], i: u64) -> bool {
        s[(i / 8) as usize] & (0x80 >> (i % 8)) != 0
    }

    #[test]
    fn bits_and_counts() {
        let mut s = vec![0u8; 3];
        assert!(!set_bit(&mut s, 7, true));
        assert!(set_bit(&mut s, 7, true));
        assert_eq!(s, [1, 0, 0]);
        assert!(get_bit(&s, 7));
        assert!(!get_bit(&s, 1000));
        assert_eq!(popcount(b"foobar"), 26);
        assert_eq!(count_range(b"foobar", 5, 30), 17);
        assert_eq!(find_bit(&[0xff, 0xf0, 0], false, 0, 23), Some(12));
        assert_eq!(find_bit(&[0, 0, 1], true, 0, 23), Some(23));
        assert_eq!(find_bit(&[0, 0, 1], true, 0, 22), None);
    }

    #[test]
    fn fields() {
        let mut s = vec![0u8; 10];
        set_field(&mut s, 3, 64, u64::MAX);
        assert_eq!(get_unsigned(&s, 3, 64), u64::MAX);
        assert_eq!(get_unsigned(&s, 2, 1), 0);
        assert_eq!(get_unsigned(&s, 67, 1), 0);
        assert_eq!(get_signed(&s, 3, 8), -1);
        set_field(&mut s, 0, 8, 0xab);
        assert_eq!(s[0], 0xab);
        assert_eq!(get_unsigned(b"\xff", 4, 8), 0xf0);
        assert_eq!(unsigned_add(250, 10, 8, Overflow::Wrap), Some(4));
        assert_eq!(unsigned_add(250, 10, 8, Overflow::Sat), Some(255));
        assert_eq!(unsigned_add(5, -10, 8, Overflow::Sat), Some(0));
        assert_eq!(unsigned_add(250, 10, 8, Overflow::Fail), None);
        assert_eq!(unsigned_add(u64::MAX, 0, 8, Overflow::Wrap), Some(255));
        assert_eq!(signed_add(127, 1, 8, Overflow::Wrap), Some(-128));
        assert_eq!(signed_add(-128, -1, 8, Overflow::Sat), Some(-128));
        assert_eq!(signed_add(i64::MAX, 1, 64, Overflow::Wrap), Some(i64::MIN));
        assert_eq!(signed_add(i64::MAX, 1, 64, Overflow::Fail), None);
        assert_eq!(signed_add(300, 0, 8, Overflow::Wrap), Some(44));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn count_and_find_match_naive(s in proptest::collection::vec(any::<u8>(), 1..64),
                                      a in 0u64..512, b in 0u64..512, bit: bool) {
            let n = s.len() as u64 * 8;
            let (start, end) = ((a % n).min(b % n), (a % n).max(b % n));
            let want = (start..=end).filter(|&i| naive_bit(&s, i)).count() as u64;
            prop_assert_eq!(count_range(&s, start, end), want);
            let want = (start..=end).find(|&i| naive_bit(&s, i) == bit);
            prop_assert_eq!(find_bit(&s, bit, start, end), want);
        }

        #[test]
        fn fields_match_naive(s in proptest::collection::vec(any::<u8>(), 0..20),
                              offset in 0u64..200, bits in 1u32..=64, v: u64) {
            let mut want = 0u64;
            for i in 0..bits as u64 {
                let k = offset + i;
                let b = (k / 8) < s.len() as u64 && naive_bit(&s, k);
                want = (want << 1) | b as u64;
            }
            prop_assert_eq!(get_unsigned(&s, offset, bits), want);
            let mut t = s.clone();
            t.resize(((offset + bits as u64) / 8 + 1) as usize, 0);
            set_field(&mut t, offset, bits, v);
            let m = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
            prop_assert_eq!(get_unsigned(&t, offset, bits), v & m);
        }

        #[test]
        fn bitop_matches_bytewise(a in proptest::collection::vec(any::<u8>(), 0..70),
                                  b in proptest::collection::vec(any::<u8>(), 0..70)) {
            let n = a.len().max(b.len());
            let g = |s: &[u8], i: usize| s.get(i).copied().unwrap_or(0);
            let and: Vec<u8> = (0..n).map(|i| g(&a, i) & g(&b, i)).collect();
            let xor: Vec<u8> = (0..n).map(|i| g(&a, i) ^ g(&b, i)).collect();
            prop_assert_eq!(bitop(BitOp::And, &[&a, &b]), and);
            prop_assert_eq!(bitop(BitOp::Xor, &[&a, &b]), xor);
            let not: Vec<u8> = a.iter().map(|x| !x).collect();
            prop_assert_eq!(bitop(BitOp::Not, &[&a]), not);
        }
    }
}
