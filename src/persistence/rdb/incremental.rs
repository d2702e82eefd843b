//! An RDB image decoded as its bytes arrive (a replica's full synchronization), so the
//! image itself is never held whole: only the record being received and the keys
//! decoded so far, which the caller installs once the image is complete and
//! verified.
//!
//! Each record is decoded from the bytes buffered so far; a record that is not all
//! there yet fails with `Error::Truncated`, which changes nothing, and is decoded
//! again once the unparsed bytes have doubled (so a big value received in many
//! pieces is not decoded over and over: the work stays linear). Consumed bytes are
//! dropped from the buffer and folded into the running CRC-64 the footer is checked
//! against.

use super::{
    crc64_digest, parse_header, parse_record, verify_checksum, Check, Crc64Digest, Error, FileInfo,
    FileState, Limits, LoadedKey, Reader, Record,
};

pub struct Incremental {
    buf: Vec<u8>,
    /// Bytes of `buf` already decoded.
    start: usize,
    /// Bytes dropped from the front of `buf` (decoded earlier).
    dropped: u64,
    /// Decoding waits until `buf` holds this much.
    retry_at: usize,
    crc: Crc64Digest,
    state: Option<FileState>,
    check: Check,
    keys: Vec<LoadedKey>,
    done: bool,
    /// Decoding stopped at its deadline with complete records still buffered.
    interrupted: bool,
}

impl Incremental {
    pub fn new(check: Check) -> Incremental {
        Incremental {
            buf: Vec::new(),
            start: 0,
            dropped: 0,
            retry_at: 0,
            crc: crc64_digest(),
            state: None,
            check,
            keys: Vec::new(),
            done: false,
            interrupted: false,
        }
    }

    /// Bytes of the image decoded so far.
    pub fn decoded(&self) -> u64 {
        self.dropped + self.start as u64
    }

    /// Whether the image's end (and checksum) has been decoded.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Whether the last `push` stopped at its deadline with work left: the caller
    /// should call again (with no new bytes) before giving it more.
    pub fn is_interrupted(&self) -> bool {
        self.interrupted
    }

    /// Adds bytes of the image and decodes what they complete, calling `progress`
    /// with the bytes decoded so far after each key. Bytes past the image's end are
    /// an error (the caller knows where the image ends).
    pub fn push(
        &mut self,
        data: &[u8],
        lim: &Limits,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), Error> {
        self.push_until(data, lim, progress, None)
    }

    /// `push`, decoding only until `deadline` (then `is_interrupted`).
    pub fn push_until(
        &mut self,
        data: &[u8],
        lim: &Limits,
        progress: &mut dyn FnMut(u64),
        deadline: Option<std::time::Instant>,
    ) -> Result<(), Error> {
        if self.done {
            return if data.is_empty() {
                Ok(())
            } else {
                Err(Error::Corrupt("data after the end of the RDB image".into()))
            };
        }
        self.buf.extend_from_slice(data);
        if self.buf.len() < self.retry_at && !self.interrupted {
            return Ok(());
        }
        self.decode(lim, progress, deadline)
    }

    /// The image is complete: decodes what is left (it must end exactly with the
    /// image) and returns its information and keys.
    pub fn finish(
        mut self,
        lim: &Limits,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(FileInfo, Vec<LoadedKey>), Error> {
        if !self.done {
            self.decode(lim, progress, None)?;
        }
        if !self.done {
            return Err(Error::Truncated);
        }
        if self.start != self.buf.len() {
            return Err(Error::Corrupt("data after the end of the RDB image".into()));
        }
        let state = self.state.take().expect("a decoded header");
        Ok((state.info, self.keys))
    }

    /// `finish` for a file, whose bytes after the image (if any) are not its concern.
    pub fn finish_file(
        mut self,
        lim: &Limits,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(FileInfo, Vec<LoadedKey>), Error> {
        if !self.done {
            self.decode(lim, progress, None)?;
        }
        self.buf.truncate(self.start);
        self.finish(lim, progress)
    }

    fn decode(
        &mut self,
        lim: &Limits,
        progress: &mut dyn FnMut(u64),
        deadline: Option<std::time::Instant>,
    ) -> Result<(), Error> {
        self.interrupted = false;
        loop {
            let mut r = Reader::new(&self.buf[self.start..]);
            r.deep = self.check.deep;
            let step = match self.state.as_mut() {
                None => parse_header(&mut r).map(|v| {
                    self.state = Some(FileState::new(v));
                    Record::Meta
                }),
                Some(st) => parse_record(&mut r, st, lim, &mut self.keys),
            };
            let used = r.pos;
            match step {
                Ok(Record::End { checksum }) => {
                    let body = used - 8 * (checksum.is_some() as usize);
                    self.crc.update(&self.buf[self.start..self.start + body]);
                    let crc = std::mem::replace(&mut self.crc, crc64_digest());
                    let st = self.state.as_mut().expect("a decoded header");
                    verify_checksum(&mut st.info, checksum, self.check, || crc.finalize())?;
                    self.start += used;
                    self.done = true;
                    return Ok(());
                }
                Ok(record) => {
                    self.crc.update(&self.buf[self.start..self.start + used]);
                    self.start += used;
                    if matches!(record, Record::Key) {
                        progress(self.decoded());
                    }
                    // At least one record per call, so every call makes progress.
                    if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                        self.interrupted = true;
                        return Ok(());
                    }
                }
                Err(Error::Truncated) => {
                    let unparsed = self.buf.len() - self.start;
                    self.compact();
                    self.retry_at = self.start + unparsed * 2;
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Drops decoded bytes once they are most of the buffer.
    fn compact(&mut self) {
        if self.start > 0 && self.start >= self.buf.len() / 2 {
            self.buf.drain(..self.start);
            self.dropped += self.start as u64;
            self.start = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persistence::rdb;

    /// An image of keys of many sizes, compressed and not, over two databases.
    fn image() -> (Vec<u8>, usize) {
        let mut out = Vec::new();
        let mut w = rdb::FileWriter::start(
            &mut out,
            rdb::RDB_VERSION,
            true,
            true,
            &[("redis-ver", b"7.4.0".to_vec())],
        );
        let n = 300;
        for db in [0, 5] {
            w.select_db(&mut out, db, n, 0);
            for i in 0..n / 2 {
                let v: Vec<u8> = (0..(i * 37) % 5000).map(|j| (j % 251) as u8).collect();
                let key = format!("key:{i}");
                let rec = rdb::KeyRecord {
                    key: key.as_bytes(),
                    value: crate::keyspace::ValueRef::Raw(&v),
                    expire_ms: (i % 3 == 0).then_some(1_000_000 + i as i64),
                    access: 0,
                };
                w.key(&mut out, &rec);
            }
        }
        w.finish(&mut out);
        (out, n)
    }

    #[test]
    fn any_split_of_an_image_decodes_to_the_same_keys() {
        let (img, n) = image();
        let lim = Limits::default();
        let mut whole_keys = Vec::new();
        let whole =
            rdb::read_file(&img, &lim, |k| whole_keys.push((k.db, k.key, k.expire_ms))).unwrap();
        for chunk in [1usize, 7, 100, 4096, 70_000, img.len()] {
            let mut inc = Incremental::new(Check::default());
            let mut keys_seen = 0;
            for piece in img.chunks(chunk) {
                inc.push(piece, &lim, &mut |_| keys_seen += 1).unwrap();
            }
            let (info, keys) = inc.finish(&lim, &mut |_| keys_seen += 1).unwrap();
            assert_eq!(keys.len(), n, "chunk {chunk}");
            let got: Vec<_> = keys
                .into_iter()
                .map(|k| (k.db, k.key, k.expire_ms))
                .collect();
            assert_eq!(got, whole_keys);
            assert_eq!(keys_seen, n);
            assert_eq!(info.version, whole.0.version);
            assert_eq!(info.aux, whole.0.aux);
        }
    }

    #[test]
    fn decoding_stops_at_its_deadline_and_goes_on_later() {
        let (img, n) = image();
        let lim = Limits::default();
        let mut inc = Incremental::new(Check::default());
        let mut keys_seen = 0;
        let past = std::time::Instant::now();
        inc.push_until(&img, &lim, &mut |_| keys_seen += 1, Some(past))
            .unwrap();
        assert!(inc.is_interrupted());
        assert_eq!(keys_seen, 0);
        while inc.is_interrupted() {
            let soon = std::time::Instant::now() + std::time::Duration::from_micros(50);
            inc.push_until(&[], &lim, &mut |_| keys_seen += 1, Some(soon))
                .unwrap();
        }
        assert!(inc.is_done());
        assert_eq!(keys_seen, n);
        assert_eq!(inc.finish(&lim, &mut |_| {}).unwrap().1.len(), n);
    }

    #[test]
    fn a_cut_or_damaged_image_is_refused() {
        let (img, _) = image();
        let lim = Limits::default();
        let mut inc = Incremental::new(Check::default());
        inc.push(&img[..img.len() - 3], &lim, &mut |_| {}).unwrap();
        assert!(matches!(
            inc.finish(&lim, &mut |_| {}),
            Err(Error::Truncated)
        ));
        let mut bad = img.clone();
        let at = bad.len() / 2;
        bad[at] ^= 0xff;
        let mut inc = Incremental::new(Check::default());
        let r = inc
            .push(&bad, &lim, &mut |_| {})
            .and_then(|_| inc.finish(&lim, &mut |_| {}).map(|_| ()));
        assert!(r.is_err());
        let mut inc = Incremental::new(Check::default());
        let mut extra = img.clone();
        extra.push(0);
        assert!(
            inc.push(&extra, &lim, &mut |_| {}).is_err() || inc.finish(&lim, &mut |_| {}).is_err()
        );
    }
}
