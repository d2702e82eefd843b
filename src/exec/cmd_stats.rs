//! Per-command counters (INFO commandstats, LATENCY HISTOGRAM), found on every call.
//!
//! Every command's name comes from its row in the static command table, so the name's
//! address identifies the command: the table here is keyed by that address alone, an
//! open-addressed array of addresses probed linearly, beside the counters in the order
//! commands were first seen. A call finds its counters in a multiply, a shift and
//! nearly always one comparison, where a general hash map spent about 40 instructions
//! (hashing, group matching, the entry API) on every command.

use super::latency;

/// Per-command counters (INFO commandstats).
#[derive(Default, Debug, Clone)]
pub struct CmdStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
    /// LATENCY HISTOGRAM / INFO latencystats (latency.rs), allocated on first call.
    pub latency: Option<Box<latency::Histogram>>,
}

/// The counters of every command called since the start or CONFIG RESETSTAT.
#[derive(Debug, Default)]
pub struct CommandStats {
    /// Name addresses (0: a free slot), a power of two long and at most half full.
    keys: Vec<usize>,
    /// For each used slot of `keys`, its command's index in `entries`.
    index: Vec<u32>,
    /// Each command seen, by name, with its counters.
    entries: Vec<(&'static str, CmdStat)>,
}

const INITIAL_SLOTS: usize = 512;

impl CommandStats {
    /// The counters of the command named `name` (a name from the command table), made
    /// on its first call.
    #[inline]
    pub fn entry(&mut self, name: &'static str) -> &mut CmdStat {
        let key = name.as_ptr() as usize;
        if !self.keys.is_empty() {
            let mask = self.keys.len() - 1;
            let mut i = slot_of(key, mask);
            loop {
                let k = self.keys[i];
                if k == key {
                    let e = self.index[i] as usize;
                    return &mut self.entries[e].1;
                }
                if k == 0 {
                    break;
                }
                i = (i + 1) & mask;
            }
        }
        self.insert(name)
    }

    #[cold]
    fn insert(&mut self, name: &'static str) -> &mut CmdStat {
        if (self.entries.len() + 1) * 2 > self.keys.len() {
            self.grow();
        }
        let e = self.entries.len();
        self.entries.push((name, CmdStat::default()));
        self.place(name.as_ptr() as usize, e as u32);
        &mut self.entries[e].1
    }

    fn grow(&mut self) {
        let slots = (self.keys.len() * 2).max(INITIAL_SLOTS);
        self.keys = vec![0; slots];
        self.index = vec![0; slots];
        for e in 0..self.entries.len() {
            self.place(self.entries[e].0.as_ptr() as usize, e as u32);
        }
    }

    /// Puts `key` in its first free slot (the key is known not to be there).
    fn place(&mut self, key: usize, e: u32) {
        let mask = self.keys.len() - 1;
        let mut i = slot_of(key, mask);
        while self.keys[i] != 0 {
            i = (i + 1) & mask;
        }
        self.keys[i] = key;
        self.index[i] = e;
    }

    /// The counters of the command named `name`, if it was called.
    pub fn get(&self, name: &'static str) -> Option<&CmdStat> {
        let key = name.as_ptr() as usize;
        if self.keys.is_empty() {
            return None;
        }
        let mask = self.keys.len() - 1;
        let mut i = slot_of(key, mask);
        loop {
            match self.keys[i] {
                0 => return None,
                k if k == key => return Some(&self.entries[self.index[i] as usize].1),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Every command seen, with its counters, in the order they were first seen.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &CmdStat)> {
        self.entries.iter().map(|(n, st)| (*n, st))
    }

    /// Forgets every command (CONFIG RESETSTAT).
    pub fn clear(&mut self) {
        *self = CommandStats::default();
    }
}

/// The slot an address starts probing at: the multiply spreads the low bits, which
/// rows of one table share, into the high ones kept.
#[inline(always)]
fn slot_of(key: usize, mask: usize) -> usize {
    ((key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize & mask
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command of the table gets its own counters, found again by its name's
    /// address (never by equal text), across growth and RESETSTAT.
    #[test]
    fn every_command_keeps_its_own_counters() {
        let names: Vec<&'static str> = crate::commands::families()
            .flat_map(|c| std::iter::once(c).chain(c.subcommands.iter()))
            .map(|c| c.name)
            .collect();
        // A name the linker merged with another row's is one key, as it is in use.
        let names: Vec<&'static str> = names
            .iter()
            .enumerate()
            .filter(|(i, n)| !names[..*i].iter().any(|m| m.as_ptr() == n.as_ptr()))
            .map(|(_, n)| *n)
            .collect();
        assert!(
            names.len() > INITIAL_SLOTS / 2,
            "the table grows at least once"
        );
        let mut stats = CommandStats::default();
        assert!(stats.get(names[0]).is_none());
        for (i, name) in names.iter().enumerate() {
            for _ in 0..=i % 3 {
                stats.entry(name).calls += 1;
            }
            stats.entry(name).usec += i as u64;
        }
        for (i, name) in names.iter().enumerate() {
            let st = stats.get(name).unwrap();
            assert_eq!(
                (st.calls, st.usec),
                ((i % 3 + 1) as u64, i as u64),
                "{name}"
            );
        }
        let seen: Vec<&str> = stats.iter().map(|(n, _)| n).collect();
        assert_eq!(seen, names);
        // Equal text at another address is another key (names are the table's own).
        let copy: &'static str = Box::leak(names[0].to_string().into_boxed_str());
        assert!(stats.get(copy).is_none());
        stats.clear();
        assert!(stats.get(names[1]).is_none());
        assert_eq!(stats.iter().count(), 0);
        stats.entry(names[1]).rejected_calls += 1;
        assert_eq!(stats.get(names[1]).unwrap().rejected_calls, 1);
    }
}
