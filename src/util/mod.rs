//! Small pure helpers shared across layers: Redis's number rules, glob matching and
//! quoting.

pub mod fdlimit;
pub mod glob;
pub mod hashslot;
pub mod lzf;
pub mod numeric;

/// A hash map with foldhash instead of SipHash: the server's internal maps (command
/// table, statistics, wait queues, registries) sit on the per-command path, and their
/// keys are not attacker-chosen in bulk the way key-table keys are (those use the key
/// table's own seeded hash).
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// The set counterpart of [`FastMap`].
pub type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// Hints the CPU to bring `p`'s cache line in, ahead of a read (the batch prefetch of
/// pipelines and of I/O-thread turns); nothing on targets without the hint.
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Appends `a` quoted as Redis's `sdscatrepr` does (MONITOR lines, CONFIG REWRITE values).
pub fn repr(out: &mut String, a: &[u8]) {
    use std::fmt::Write;
    out.push('"');
    for &b in a {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    #[test]
    fn repr_escapes_like_sdscatrepr() {
        let mut s = String::new();
        super::repr(&mut s, b"a\"b\\c\n\x01\xff \x07\x08\t\r");
        assert_eq!(s, r#""a\"b\\c\n\x01\xff \a\b\t\r""#);
    }
}
