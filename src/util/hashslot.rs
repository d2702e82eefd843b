//! Redis Cluster's hash slot of a key: CRC16/XMODEM of the key, or of its first
//! non-empty `{hash tag}`, modulo 16384. Here (below both) so that the keyspace's
//! per-slot index and the cluster module share it.

pub const SLOTS: usize = 16384;

static CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);

/// The slot of a key: only the part between the first `{` and the next `}` is hashed
/// when that part is not empty.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match memchr::memchr(b'{', key) {
        Some(open) => match memchr::memchr(b'}', &key[open + 1..]) {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    CRC16.checksum(hashed) & (SLOTS as u16 - 1)
}

/// The one slot every key a glob pattern can match lies in, or `None` when they may
/// lie in several: a wildcard or escape before a complete hash tag. A pattern without
/// wildcards is one key; `{}` hashes the whole pattern, as for keys.
pub fn pattern_slot(pattern: &[u8]) -> Option<u16> {
    let mut open = None;
    let mut empty_tag = false;
    for (i, &c) in pattern.iter().enumerate() {
        match c {
            b'*' | b'?' | b'[' | b'\\' => return None,
            b'{' if open.is_none() && !empty_tag => open = Some(i),
            b'}' if open.is_some() => {
                let o = open.take().unwrap_or_default();
                if i == o + 1 {
                    empty_tag = true;
                } else {
                    return Some(CRC16.checksum(&pattern[o + 1..i]) & (SLOTS as u16 - 1));
                }
            }
            _ => {}
        }
    }
    Some(CRC16.checksum(pattern) & (SLOTS as u16 - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_has_a_slot_only_when_its_keys_share_one() {
        assert_eq!(pattern_slot(b"foo"), Some(key_slot(b"foo")));
        assert_eq!(pattern_slot(b"{user}:*"), Some(key_slot(b"user")));
        assert_eq!(pattern_slot(b"a{b}c?"), Some(key_slot(b"b")));
        assert_eq!(pattern_slot(b"weight_*"), None);
        assert_eq!(pattern_slot(b"*{tag}"), None);
        assert_eq!(pattern_slot(b"x\\*y"), None);
        assert_eq!(pattern_slot(b"[ab]{tag}"), None);
        // An empty tag hashes the whole pattern, and no later tag counts.
        assert_eq!(pattern_slot(b"{}{x}"), Some(key_slot(b"{}{x}")));
        assert_eq!(pattern_slot(b"{}x*"), None);
    }
}
