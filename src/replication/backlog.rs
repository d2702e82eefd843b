//! The replication backlog: a ring of the last `repl-backlog-size` bytes of the
//! replication stream, so a replica that lost its link for a short while can resume
//! with `PSYNC <replid> <offset>` and receive only the bytes it missed.
//!
//! Offsets are Redis's: the stream's bytes are numbered from 1, `master_repl_offset`
//! is the number of the last byte produced, and the backlog holds the bytes
//! `first_byte_offset ..= master_repl_offset`. The ring never reallocates while
//! appending; a resize (CONFIG SET repl-backlog-size) keeps the newest bytes.

pub struct Backlog {
    ring: Vec<u8>,
    /// Where the next byte goes.
    idx: usize,
    /// Bytes held (at most `ring.len()`).
    histlen: usize,
}

impl Backlog {
    pub fn new(size: usize) -> Backlog {
        Backlog {
            ring: vec![0; size.max(1)],
            idx: 0,
            histlen: 0,
        }
    }

    pub fn size(&self) -> usize {
        self.ring.len()
    }

    pub fn histlen(&self) -> usize {
        self.histlen
    }

    /// The offset of the oldest byte held, given the stream's end offset.
    pub fn first_byte_offset(&self, end: u64) -> u64 {
        end + 1 - self.histlen as u64
    }

    pub fn append(&mut self, mut data: &[u8]) {
        let size = self.ring.len();
        if data.len() > size {
            data = &data[data.len() - size..];
        }
        let first = (size - self.idx).min(data.len());
        self.ring[self.idx..self.idx + first].copy_from_slice(&data[..first]);
        let rest = &data[first..];
        self.ring[..rest.len()].copy_from_slice(rest);
        self.idx = (self.idx + data.len()) % size;
        self.histlen = (self.histlen + data.len()).min(size);
    }

    /// The bytes from offset `from` to the end (`end` is `master_repl_offset`), or
    /// None when `from` is not inside the backlog (`end + 1` gives no bytes).
    pub fn read_from(&self, from: u64, end: u64) -> Option<Vec<u8>> {
        if from < self.first_byte_offset(end) || from > end + 1 {
            return None;
        }
        let n = (end + 1 - from) as usize;
        let size = self.ring.len();
        let start = (self.idx + size - n) % size;
        let mut out = Vec::with_capacity(n);
        let first = (size - start).min(n);
        out.extend_from_slice(&self.ring[start..start + first]);
        out.extend_from_slice(&self.ring[..n - first]);
        Some(out)
    }

    /// A new size keeping the newest bytes that fit.
    pub fn resize(&mut self, size: usize, end: u64) {
        if size.max(1) == self.ring.len() {
            return;
        }
        let keep = self.histlen.min(size.max(1));
        let tail = self
            .read_from(end + 1 - keep as u64, end)
            .unwrap_or_default();
        *self = Backlog::new(size);
        self.append(&tail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_the_newest_bytes() {
        let mut b = Backlog::new(8);
        let mut end = 0u64;
        let mut all = Vec::new();
        for chunk in [&b"abc"[..], b"defgh", b"ij", b"", b"klmnopqrstu", b"v"] {
            b.append(chunk);
            end += chunk.len() as u64;
            all.extend_from_slice(chunk);
            let first = b.first_byte_offset(end);
            assert_eq!(b.histlen(), all.len().min(8));
            for from in first..=end + 1 {
                let got = b.read_from(from, end).unwrap();
                assert_eq!(got, &all[(from - 1) as usize..]);
            }
            assert!(b.read_from(end + 2, end).is_none());
            if first > 1 {
                assert!(b.read_from(first - 1, end).is_none());
            }
        }
        b.resize(4, end);
        assert_eq!(b.read_from(end - 3, end).unwrap(), &all[all.len() - 4..]);
        b.resize(16, end);
        assert_eq!(b.histlen(), 4);
        assert_eq!(b.read_from(end - 3, end).unwrap(), &all[all.len() - 4..]);
    }
}
