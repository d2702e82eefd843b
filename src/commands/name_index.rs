//! Finding a command by name, once per request.
//!
//! A command name is at most 16 bytes in all but a few cases, so it fits in two
//! machine words: the first eight and the last eight bytes (overlapping when shorter),
//! or two 4-byte windows, or the bytes themselves. Together with the length, those
//! words identify the name exactly. The pair is the key of a small open-addressing table
//! built once, which holds each name twice: lowercase, and uppercase as clients send
//! it. A name in either case is found as it came (two loads, a multiply and nearly
//! always one probe); any other mix of cases has its uppercase ASCII letters folded to
//! lowercase in the words themselves (a few word operations) and is looked up again.
//! A hash map over the lowercased text spent about 170 instructions per request.
//! Longer names go to that map.

use super::Command;

/// The packed form of a name of 1..=16 bytes: its two words and its length.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Packed {
    a: u64,
    b: u64,
    len: usize,
}

/// Longest name the packed form holds.
const MAX_PACKED: usize = 16;

/// Each ASCII uppercase letter of `w` made lowercase; every other byte unchanged.
#[inline(always)]
fn fold(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let low7 = w & (0x7F * ONES);
    // High bit of each byte set where the byte is at least 'A', then where it is above
    // 'Z' (bytes of low7 are below 0x80, so no sum carries into the next byte); bytes
    // with the high bit set are not ASCII and stay as they are.
    let at_least_a = low7 + (0x80 - b'A' as u64) * ONES;
    let above_z = low7 + (0x80 - b'Z' as u64 - 1) * ONES;
    let upper = at_least_a & !above_z & !w & (0x80 * ONES);
    w | (upper >> 2)
}

/// The packed form of the bytes as they are.
#[inline(always)]
fn pack_as_is(name: &[u8]) -> Option<Packed> {
    let len = name.len();
    let (a, b) = match len {
        8..=MAX_PACKED => (
            u64::from_le_bytes(name[..8].try_into().ok()?),
            u64::from_le_bytes(name[len - 8..].try_into().ok()?),
        ),
        4..=7 => (
            u32::from_le_bytes(name[..4].try_into().ok()?) as u64,
            u32::from_le_bytes(name[len - 4..].try_into().ok()?) as u64,
        ),
        1..=3 => (
            name[0] as u64 | (name[len / 2] as u64) << 8 | (name[len - 1] as u64) << 16,
            0,
        ),
        _ => return None,
    };
    Some(Packed { a, b, len })
}

impl Packed {
    #[inline(always)]
    fn hash(&self, bits: u32) -> usize {
        let mixed = self.a ^ self.b.rotate_left(29) ^ self.len as u64;
        (mixed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
    }
}

/// The command table keyed by packed name.
pub struct NameIndex {
    slots: Vec<Option<(Packed, &'static Command)>>,
    bits: u32,
}

impl NameIndex {
    /// Indexes `commands` by name, lowercase and uppercase (names are lowercase;
    /// longer ones are left out).
    pub fn new(commands: impl Iterator<Item = &'static Command>) -> NameIndex {
        let commands: Vec<&'static Command> = commands.collect();
        // At most a quarter full: probes stay short and misses end quickly.
        let bits = (commands.len() * 2 * 4)
            .max(16)
            .next_power_of_two()
            .trailing_zeros();
        let mut slots = vec![None; 1 << bits];
        let mask = (1usize << bits) - 1;
        for cmd in commands {
            let lower = cmd.name.as_bytes();
            let upper = cmd.name.to_ascii_uppercase();
            for p in [pack_as_is(lower), pack_as_is(upper.as_bytes())] {
                let Some(p) = p else {
                    continue;
                };
                let mut i = p.hash(bits);
                while let Some((q, _)) = slots[i] {
                    if q == p {
                        // A name without letters (none so far) is its own uppercase.
                        break;
                    }
                    i = (i + 1) & mask;
                }
                slots[i] = Some((p, cmd));
            }
        }
        NameIndex { slots, bits }
    }

    /// The command named `name` (any letter case); `Err(())` when the name is too long
    /// for this index (the caller asks the full table).
    #[inline]
    pub fn get(&self, name: &[u8]) -> Result<Option<&'static Command>, ()> {
        let Some(p) = pack_as_is(name) else {
            return if name.is_empty() { Ok(None) } else { Err(()) };
        };
        if let Some(cmd) = self.find(p) {
            return Ok(Some(cmd));
        }
        Ok(self.find_folded(p))
    }

    /// A name in mixed case, or none: looked up again with its letters folded.
    #[inline(never)]
    fn find_folded(&self, p: Packed) -> Option<&'static Command> {
        let folded = Packed {
            a: fold(p.a),
            b: fold(p.b),
            len: p.len,
        };
        if folded == p {
            return None;
        }
        self.find(folded)
    }

    #[inline(always)]
    fn find(&self, p: Packed) -> Option<&'static Command> {
        let mask = self.slots.len() - 1;
        let mut i = p.hash(self.bits);
        loop {
            match &self.slots[i] {
                Some((q, cmd)) if *q == p => return Some(cmd),
                Some(_) => i = (i + 1) & mask,
                None => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_lowercases_ascii_letters_only() {
        let all: Vec<u8> = (0..=255u8).collect();
        for chunk in all.chunks(8) {
            let w = u64::from_le_bytes(chunk.try_into().unwrap());
            let want: Vec<u8> = chunk.iter().map(|b| b.to_ascii_lowercase()).collect();
            assert_eq!(fold(w).to_le_bytes().to_vec(), want, "{chunk:?}");
        }
    }

    #[test]
    fn finds_every_command_in_any_case_and_nothing_else() {
        let index = NameIndex::new(super::super::families());
        let mut rng = fastrand::Rng::with_seed(5);
        for cmd in super::super::families() {
            let name = cmd.name.as_bytes();
            let mixed: Vec<u8> = name
                .iter()
                .map(|b| {
                    if rng.bool() {
                        b.to_ascii_uppercase()
                    } else {
                        *b
                    }
                })
                .collect();
            // Either whole case is found as it came, any mix after folding.
            for whole in [name.to_vec(), name.to_ascii_uppercase()] {
                if let Ok(found) = index.get(&whole) {
                    assert!(std::ptr::eq(found.unwrap(), cmd), "{}", cmd.name);
                }
            }
            match index.get(&mixed) {
                Ok(found) => {
                    assert!(name.len() <= MAX_PACKED);
                    assert!(std::ptr::eq(found.unwrap(), cmd), "{}", cmd.name);
                }
                Err(()) => assert!(name.len() > MAX_PACKED, "{}", cmd.name),
            }
            // One byte changed, removed or added: another name, or none.
            for i in 0..name.len() {
                let mut other = name.to_vec();
                other[i] ^= 0x01;
                let expect = super::super::table().get(other.as_slice()).copied();
                if let Ok(found) = index.get(&other) {
                    assert_eq!(found.map(|c| c.name), expect.map(|c| c.name));
                }
            }
            for other in [&name[..name.len() - 1], &[name, b"x"].concat()[..]] {
                let expect = super::super::table().get(other).copied();
                if let Ok(found) = index.get(other) {
                    assert_eq!(found.map(|c| c.name), expect.map(|c| c.name));
                }
            }
        }
        assert!(matches!(index.get(b""), Ok(None)));
        assert!(matches!(index.get(b"s\xc5t"), Ok(None)));
        assert!(matches!(index.get(b"SET"), Ok(Some(c)) if c.name == "set"));
    }
}
