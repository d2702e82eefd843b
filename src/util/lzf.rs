//! LZF compression, the format of Redis's RDB strings and compressed quicklist nodes.
//!
//! The `lzf` crate compresses correctly but zero-fills a fresh 512 KB hash table on every
//! call: for the 100-byte values of a snapshot that memset was 87% of the writer thread's
//! time (1.8M keys took 23 s to save, Redis 1.9 s). Here the table is per thread and never
//! cleared: each entry holds a position tagged with the call it was made in, so entries of
//! earlier calls are simply not matches. Decompression stays with the crate.
//!
//! The format: a control byte below 32 starts a run of `ctrl + 1` literal bytes; otherwise
//! its top three bits are the match length minus 2 (7 meaning "add the next byte") and its
//! low five bits the high bits of the distance minus 1, whose low eight bits follow. Matches
//! are 3 to 264 bytes long and reach back at most 8,192 bytes.

use std::cell::RefCell;

const HASH_BITS: u32 = 14;
const MAX_LITERALS: usize = 32;
const MAX_DISTANCE: usize = 8192;
const MIN_MATCH: usize = 3;
const MAX_MATCH: usize = 264;

/// Positions by hash of the three bytes there, as `base + position + 1` for the call
/// whose `base` it was; anything not above the current `base` is from an earlier call.
struct Table {
    slots: Box<[u32]>,
    base: u32,
}

thread_local! {
    static TABLE: RefCell<Table> = RefCell::new(Table {
        slots: vec![0; 1 << HASH_BITS].into_boxed_slice(),
        base: 0,
    });
}

#[inline]
fn hash(b: &[u8]) -> usize {
    let v = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
    (v.wrapping_mul(2_654_435_761) >> (32 - HASH_BITS)) as usize
}

fn push_literals(out: &mut Vec<u8>, mut lit: &[u8]) {
    while !lit.is_empty() {
        let n = lit.len().min(MAX_LITERALS);
        out.push((n - 1) as u8);
        out.extend_from_slice(&lit[..n]);
        lit = &lit[n..];
    }
}

fn push_match(out: &mut Vec<u8>, len: usize, distance: usize) {
    let l = len - 2;
    let off = distance - 1;
    let high = (off >> 8) as u8;
    if l < 7 {
        out.push(((l as u8) << 5) | high);
    } else {
        out.push((7 << 5) | high);
        out.push((l - 7) as u8);
    }
    out.push(off as u8);
}

/// Compresses `input`; None when the result would be longer than `max_out` bytes (the
/// caller then stores the input as it is, as Redis does when compression saves too little).
pub fn compress(input: &[u8], max_out: usize) -> Option<Vec<u8>> {
    let n = input.len();
    if n < MIN_MATCH || n >= (u32::MAX / 2) as usize {
        return None;
    }
    TABLE.with(|t| {
        let mut t = t.borrow_mut();
        if u64::from(t.base) + n as u64 + 1 >= u64::from(u32::MAX) {
            t.slots.iter_mut().for_each(|s| *s = 0);
            t.base = 0;
        }
        let base = t.base;
        t.base += n as u32 + 1;
        let slots = &mut t.slots;
        let mut out = Vec::with_capacity(max_out.min(n + n / 32 + 1));
        let mut lit_start = 0;
        let mut ip = 0;
        while ip + MIN_MATCH <= n {
            let h = hash(&input[ip..]);
            let seen = slots[h];
            slots[h] = base + ip as u32 + 1;
            if seen > base {
                let at = (seen - base - 1) as usize;
                let distance = ip - at;
                if distance <= MAX_DISTANCE
                    && input[at..at + MIN_MATCH] == input[ip..ip + MIN_MATCH]
                {
                    let limit = MAX_MATCH.min(n - ip);
                    let mut len = MIN_MATCH;
                    while len < limit && input[at + len] == input[ip + len] {
                        len += 1;
                    }
                    push_literals(&mut out, &input[lit_start..ip]);
                    push_match(&mut out, len, distance);
                    if out.len() > max_out {
                        return None;
                    }
                    // The positions inside the match are hashed too, so that a run
                    // repeating further on finds its nearest copy.
                    let end = ip + len;
                    let mut p = ip + 1;
                    while p < end && p + MIN_MATCH <= n {
                        slots[hash(&input[p..])] = base + p as u32 + 1;
                        p += 1;
                    }
                    ip = end;
                    lit_start = ip;
                    continue;
                }
            }
            ip += 1;
        }
        push_literals(&mut out, &input[lit_start..]);
        (out.len() <= max_out).then_some(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn roundtrip(input: &[u8]) {
        if let Some(c) = compress(input, usize::MAX) {
            assert_eq!(lzf::decompress(&c, input.len()).unwrap(), input);
        }
    }

    #[test]
    fn repetitive_inputs_shrink_and_read_back() {
        let value = b"value:"
            .iter()
            .chain([0u8; 94].iter())
            .copied()
            .collect::<Vec<u8>>();
        let c = compress(&value, value.len() - 4).expect("compressible");
        assert!(c.len() < 20, "{}", c.len());
        assert_eq!(lzf::decompress(&c, value.len()).unwrap(), value);
        let long = "abcdefgh".repeat(100_000);
        let c = compress(long.as_bytes(), long.len()).unwrap();
        assert!(c.len() < long.len() / 50);
        assert_eq!(lzf::decompress(&c, long.len()).unwrap(), long.as_bytes());
    }

    #[test]
    fn incompressible_inputs_are_refused_within_the_limit() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect();
        assert!(compress(&noise, noise.len() - 4).is_none());
        assert!(compress(b"ab", 100).is_none());
        roundtrip(&noise);
    }

    #[test]
    fn matches_from_earlier_calls_are_not_used() {
        // The same table serves every call: a second input must not refer into the first.
        let first = b"the quick brown fox jumps over the lazy dog".repeat(20);
        let second = b"THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG!";
        roundtrip(&first);
        roundtrip(second);
        roundtrip(&first);
    }

    #[test]
    fn the_longest_match_and_the_farthest_distance_encode() {
        let mut input = vec![7u8; 300];
        input.extend((0..8200u32).map(|i| (i % 251) as u8));
        input.extend_from_within(300..600);
        roundtrip(&input);
    }

    proptest! {
        #[test]
        fn any_input_reads_back(input in proptest::collection::vec(0u8..4, 0..3000)) {
            roundtrip(&input);
        }

        #[test]
        fn any_bytes_read_back(input in proptest::collection::vec(any::<u8>(), 0..600)) {
            roundtrip(&input);
        }
    }
}
