//! Hash slots: CRC16/XMODEM of the key, or of its `{hash tag}`, modulo 16384.

pub use crate::util::hashslot::{key_slot, SLOTS};
/// Bytes of a slot bitmap (one bit per slot, as the bus carries it).
pub const BITMAP_BYTES: usize = SLOTS / 8;

pub fn bit_test(map: &[u8], slot: usize) -> bool {
    map[slot / 8] & (1 << (slot & 7)) != 0
}

pub fn bit_set(map: &mut [u8], slot: usize) {
    map[slot / 8] |= 1 << (slot & 7);
}

pub fn bit_clear(map: &mut [u8], slot: usize) {
    map[slot / 8] &= !(1 << (slot & 7));
}

/// Consecutive runs of slots for which `owned` holds, as (start, end) pairs.
pub fn ranges(mut owned: impl FnMut(usize) -> bool) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for s in 0..SLOTS {
        match (owned(s), start) {
            (true, None) => start = Some(s),
            (false, Some(b)) => {
                out.push((b, s - 1));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(b) = start {
        out.push((b, SLOTS - 1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b""), 0);
    }

    #[test]
    fn ranges_group_runs() {
        let r = ranges(|s| s < 3 || s == 10 || s == SLOTS - 1);
        assert_eq!(r, vec![(0, 2), (10, 10), (SLOTS - 1, SLOTS - 1)]);
    }
}
