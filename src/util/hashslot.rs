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
