//! Replies made of independent random picks (SRANDMEMBER, ZRANDMEMBER and HRANDFIELD
//! with a negative count), encoded a piece at a time.
//!
//! Such a reply may announce billions of elements drawn from a handful of candidates.
//! `PickStream` holds a copy of the candidates taken when the command ran (so the
//! reply is the snapshot Redis gives), each already encoded in the client's protocol,
//! and writes the announced number of random picks into the output buffer as the
//! socket drains (`fill`), so the reply never sits in memory whole.

/// A random-pick reply still being written: its array header, then `remaining`
/// picks among the encoded candidates.
#[derive(Debug, Clone, PartialEq)]
pub struct PickStream {
    /// The array header (`*<len>\r\n`), written by the first `fill`.
    header: Vec<u8>,
    /// The candidates' encodings, back to back.
    blob: Vec<u8>,
    /// Where each candidate starts in `blob`, and `blob.len()` last.
    bounds: Vec<usize>,
    /// Picks still to write.
    remaining: u64,
}

impl PickStream {
    /// A reply of `picks` random picks announced as an array of `array_len` elements
    /// (twice the picks where a RESP2 pair is two elements).
    pub fn new(array_len: u64, picks: u64) -> PickStream {
        let mut header = Vec::with_capacity(24);
        header.push(b'*');
        header.extend_from_slice(array_len.to_string().as_bytes());
        header.extend_from_slice(b"\r\n");
        PickStream {
            header,
            blob: Vec::new(),
            bounds: vec![0],
            remaining: picks,
        }
    }

    /// Adds a candidate, written by `encode` in the client's protocol.
    pub fn add_candidate(&mut self, encode: impl FnOnce(&mut Vec<u8>)) {
        encode(&mut self.blob);
        self.bounds.push(self.blob.len());
    }

    /// The number of candidates.
    pub fn candidates(&self) -> usize {
        self.bounds.len() - 1
    }

    /// Whether every pick has been written.
    pub fn is_done(&self) -> bool {
        self.remaining == 0 && self.header.is_empty()
    }

    /// Writes the header (the first time) and picks until `out` has grown by at least
    /// `budget` bytes or the reply is complete; true when it is complete.
    pub fn fill(&mut self, out: &mut Vec<u8>, budget: usize) -> bool {
        let start = out.len();
        if !self.header.is_empty() {
            out.extend_from_slice(&self.header);
            self.header = Vec::new();
        }
        let n = self.candidates();
        if n == 0 {
            self.remaining = 0;
        }
        while self.remaining > 0 && out.len() - start < budget {
            let i = fastrand::usize(..n);
            out.extend_from_slice(&self.blob[self.bounds[i]..self.bounds[i + 1]]);
            self.remaining -= 1;
        }
        self.remaining == 0
    }

    /// Bytes this stream holds (counted in the client's memory).
    pub fn memory(&self) -> usize {
        std::mem::size_of::<PickStream>()
            + self.header.capacity()
            + self.blob.capacity()
            + self.bounds.capacity() * std::mem::size_of::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_header_then_exactly_the_announced_picks() {
        let mut s = PickStream::new(5, 5);
        s.add_candidate(|b| b.extend_from_slice(b"$1\r\na\r\n"));
        s.add_candidate(|b| b.extend_from_slice(b"$1\r\nb\r\n"));
        let mut out = Vec::new();
        assert!(!s.fill(&mut out, 10));
        assert!(out.starts_with(b"*5\r\n"));
        while !s.fill(&mut out, 10) {}
        assert!(s.is_done());
        assert_eq!(out.len(), 4 + 5 * 7);
        for pick in out[4..].chunks(7) {
            assert!(pick == b"$1\r\na\r\n" || pick == b"$1\r\nb\r\n");
        }
    }

    #[test]
    fn no_candidates_gives_the_header_alone() {
        let mut s = PickStream::new(0, 3);
        let mut out = Vec::new();
        assert!(s.fill(&mut out, 100));
        assert_eq!(out, b"*0\r\n");
    }
}
