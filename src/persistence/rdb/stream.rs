//! Streams in Redis's RDB layout (types 15, 19 and 21), shared by RDB files, the AOF
//! preamble and DUMP/RESTORE.
//!
//! Each of our blocks is written as one Redis stream node: its key is the master ID as
//! 16 big-endian bytes, its value a real listpack holding the master entry
//! (`count | deleted | n | field… | 0`) and then every entry, tombstones included,
//! as `flags | ms-diff | seq-diff | [n field value…] or [value…] | lp-count` (the
//! SAMEFIELDS flag marks entries whose names are the master fields). The node list
//! is followed by the stream metadata (length, last ID, first ID, max deleted ID,
//! entries added), then the groups: name, last ID, entries read, the global PEL
//! (raw ID, delivery time, delivery count) and the consumers (name, seen time, and in
//! type 21 the active time, then their PEL as raw IDs pointing into the group's).
//!
//! We write type 19, which is what Redis 7.0 writes in RDB version 10, so files stay
//! loadable by Redis 7.0; consumer active times are therefore not saved, and loading a
//! type 15/19 value sets them to the seen time, as Redis 7.2+ does.
//!
//! Loading validates everything our in-memory form relies on: listpack structure,
//! master entry counts, lp-counts, IDs strictly ascending across nodes and never below
//! their node's master ID, the stored length against the live entries, the last ID
//! against the entries, duplicate groups/consumers/PEL IDs, consumer PEL IDs that
//! are missing from the group PEL or owned twice, and PEL entries with no owner.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use super::{
    corrupt, for_each_listpack, Error, Out, Reader, TYPE_STREAM_LISTPACKS, TYPE_STREAM_LISTPACKS_3,
};
use crate::types::stream::{Consumer, Group, Nack, Stream, StreamId, ENTRIES_READ_INVALID};
use crate::util::numeric::{format_i64, parse_i64};

const FLAG_DELETED: i64 = 1;
const FLAG_SAMEFIELDS: i64 = 2;

// ===================================================================================
// Listpack encoding (Redis's listpack.c format)
// ===================================================================================

/// Builds a listpack: 6-byte header (total bytes u32 LE, element count u16 LE), the
/// entries (encoding, data, back-length), and the 0xFF terminator.
pub(super) struct LpWriter {
    buf: Vec<u8>,
    count: usize,
}

impl LpWriter {
    pub(super) fn new() -> LpWriter {
        let mut buf = Vec::with_capacity(256);
        buf.extend_from_slice(&[0; 6]);
        LpWriter { buf, count: 0 }
    }

    fn backlen(&mut self, l: usize) {
        let l = l as u64;
        let groups: u32 = if l <= 127 {
            1
        } else if l < 16383 {
            2
        } else if l < 2097151 {
            3
        } else if l < 268435455 {
            4
        } else {
            5
        };
        // Most significant group first; every byte but the first has the high bit set.
        for i in (0..groups).rev() {
            let b = ((l >> (7 * i)) & 127) as u8;
            self.buf.push(if i == groups - 1 { b } else { b | 128 });
        }
        self.count += 1;
    }

    pub(super) fn int(&mut self, v: i64) {
        let start = self.buf.len();
        if (0..=127).contains(&v) {
            self.buf.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = if v < 0 { (1 << 13) + v } else { v } as u16;
            self.buf.push(0xC0 | (u >> 8) as u8);
            self.buf.push(u as u8);
        } else if (-32768..=32767).contains(&v) {
            self.buf.push(0xF1);
            self.buf.extend_from_slice(&(v as i16).to_le_bytes());
        } else if (-8388608..=8388607).contains(&v) {
            self.buf.push(0xF2);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if (i32::MIN as i64..=i32::MAX as i64).contains(&v) {
            self.buf.push(0xF3);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes());
        } else {
            self.buf.push(0xF4);
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
        let n = self.buf.len() - start;
        self.backlen(n);
    }

    /// A string, stored as an integer when it is one's canonical form (as Redis's
    /// lpAppend does; the canonical check makes the round trip exact).
    pub(super) fn str(&mut self, s: &[u8]) {
        if s.len() <= 20 {
            if let Some(v) = parse_i64(s) {
                let mut canon = Vec::with_capacity(20);
                format_i64(v, &mut canon);
                if canon == s {
                    return self.int(v);
                }
            }
        }
        let start = self.buf.len();
        let n = s.len();
        if n < 64 {
            self.buf.push(0x80 | n as u8);
        } else if n < 4096 {
            self.buf.push(0xE0 | (n >> 8) as u8);
            self.buf.push(n as u8);
        } else {
            self.buf.push(0xF0);
            self.buf.extend_from_slice(&(n as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        let n = self.buf.len() - start;
        self.backlen(n);
    }

    pub(super) fn finish(mut self) -> Vec<u8> {
        self.buf.push(0xFF);
        let total = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&total.to_le_bytes());
        let count = self.count.min(0xFFFF) as u16;
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

// ===================================================================================
// Writing
// ===================================================================================

fn raw_id(id: StreamId) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&id.ms.to_be_bytes());
    k[8..].copy_from_slice(&id.seq.to_be_bytes());
    k
}

/// Serializes a stream as RDB type 19 (the type byte is the caller's).
pub fn write_stream<O: Out + ?Sized>(out: &mut O, s: &Stream) {
    out.length(s.nodes().count() as u64);
    for node in s.nodes() {
        out.string(&raw_id(node.master));
        let master_fields = node.master_fields();
        let mut lp = LpWriter::new();
        lp.int(node.live() as i64);
        lp.int(node.deleted() as i64);
        lp.int(master_fields.len() as i64);
        for f in &master_fields {
            lp.str(f);
        }
        lp.int(0);
        node.for_each_entry(|id, deleted, same, strings| {
            let mut flags = 0;
            if deleted {
                flags |= FLAG_DELETED;
            }
            if same {
                flags |= FLAG_SAMEFIELDS;
            }
            lp.int(flags);
            // Differences wrap as Redis's int64 arithmetic does; loading adds back.
            lp.int(id.ms.wrapping_sub(node.master.ms) as i64);
            lp.int(id.seq.wrapping_sub(node.master.seq) as i64);
            let lp_count = if same {
                strings.len() as i64 + 3
            } else {
                lp.int((strings.len() / 2) as i64);
                strings.len() as i64 + 4
            };
            for x in strings {
                lp.str(x);
            }
            lp.int(lp_count);
        });
        out.string(&lp.finish());
    }
    out.length(s.len());
    for id in [s.last_id, s.first_id, s.max_deleted] {
        out.length(id.ms);
        out.length(id.seq);
    }
    out.length(s.entries_added);
    out.length(s.groups.len() as u64);
    for (name, g) in &s.groups {
        out.string(name);
        out.length(g.last_id.ms);
        out.length(g.last_id.seq);
        // -1 ("unknown") is written as Redis writes it: the u64 of the same bits.
        out.length(g.entries_read as u64);
        out.length(g.pel.len() as u64);
        for (id, nack) in &g.pel {
            out.raw(&raw_id(*id));
            out.raw(&nack.delivery_time.to_le_bytes());
            out.length(nack.delivery_count);
        }
        out.length(g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            out.string(cname);
            out.raw(&c.seen_time.to_le_bytes());
            out.length(c.pel.len() as u64);
            for id in &c.pel {
                out.raw(&raw_id(*id));
            }
        }
    }
}

// ===================================================================================
// Reading
// ===================================================================================

fn read_raw_id(r: &mut Reader<'_>) -> Result<StreamId, Error> {
    let b = r.take(16)?;
    let ms = u64::from_be_bytes(b[..8].try_into().unwrap_or([0; 8]));
    let seq = u64::from_be_bytes(b[8..].try_into().unwrap_or([0; 8]));
    Ok(StreamId::new(ms, seq))
}

fn read_id(r: &mut Reader<'_>) -> Result<StreamId, Error> {
    let ms = r.read_len()?;
    let seq = r.read_len()?;
    Ok(StreamId::new(ms, seq))
}

fn lp_int(items: &[Cow<'_, [u8]>], i: usize) -> Result<i64, Error> {
    match items.get(i).and_then(|x| parse_i64(x)) {
        Some(v) => Ok(v),
        None => corrupt("Stream listpack integrity check failed."),
    }
}

/// An entry as loaded: ID, deleted flag, flattened field/value pairs.
type LoadedEntry<'b> = (StreamId, bool, Vec<&'b [u8]>);

/// One node's listpack decoded into its master fields and entries, validated.
fn decode_node<'b>(
    master: StreamId,
    items: &'b [Cow<'b, [u8]>],
) -> Result<(Vec<&'b [u8]>, Vec<LoadedEntry<'b>>), Error> {
    let bad = || corrupt("Stream listpack integrity check failed.");
    let live = lp_int(items, 0)?;
    let deleted = lp_int(items, 1)?;
    let nf = lp_int(items, 2)?;
    if live < 0 || deleted < 0 || nf < 0 || nf as usize > items.len() {
        return bad();
    }
    let nf = nf as usize;
    let mut i = 3;
    if items.len() < i + nf + 1 {
        return bad();
    }
    let master_fields: Vec<&[u8]> = items[i..i + nf].iter().map(|x| x.as_ref()).collect();
    i += nf;
    if lp_int(items, i)? != 0 {
        return bad();
    }
    i += 1;
    let mut entries = Vec::new();
    let (mut seen_live, mut seen_deleted) = (0i64, 0i64);
    while i < items.len() {
        let start = i;
        let flags = lp_int(items, i)?;
        if !(0..=3).contains(&flags) {
            return bad();
        }
        let dms = lp_int(items, i + 1)?;
        let dseq = lp_int(items, i + 2)?;
        i += 3;
        let id = StreamId::new(
            master.ms.wrapping_add(dms as u64),
            master.seq.wrapping_add(dseq as u64),
        );
        let mut pairs = Vec::new();
        if flags & FLAG_SAMEFIELDS != 0 {
            if items.len() < i + nf {
                return bad();
            }
            for (k, f) in master_fields.iter().enumerate() {
                pairs.push(*f);
                pairs.push(items[i + k].as_ref());
            }
            i += nf;
        } else {
            let n = lp_int(items, i)?;
            i += 1;
            if n < 0 || (n as usize).saturating_mul(2) > items.len() - i {
                return bad();
            }
            for k in 0..n as usize * 2 {
                pairs.push(items[i + k].as_ref());
            }
            i += n as usize * 2;
        }
        if pairs.is_empty() {
            return bad();
        }
        let lp_count = lp_int(items, i)?;
        i += 1;
        if lp_count != (i - start - 1) as i64 {
            return bad();
        }
        if id < master || entries.last().is_some_and(|e: &LoadedEntry<'_>| e.0 >= id) {
            return bad();
        }
        if flags & FLAG_DELETED != 0 {
            seen_deleted += 1;
        } else {
            seen_live += 1;
        }
        entries.push((id, flags & FLAG_DELETED != 0, pairs));
    }
    if entries.is_empty() {
        return corrupt("Empty listpack inside stream");
    }
    if seen_live != live || seen_deleted != deleted {
        return bad();
    }
    Ok((master_fields, entries))
}

/// Reads a stream value of type 15, 19 or 21 (the type byte already consumed).
pub fn read_stream(r: &mut Reader<'_>, t: u8) -> Result<Stream, Error> {
    let mut s = Stream::new();
    // Node key (16 bytes + 1 length byte) and listpack (at least 7 bytes).
    let nodes = r.count(24)?;
    let mut prev: Option<StreamId> = None;
    for _ in 0..nodes {
        let key = r.string()?;
        if key.len() != 16 {
            return corrupt("Stream node key entry is not the size of a stream ID");
        }
        let mut kr = Reader::new(&key);
        let master = read_raw_id(&mut kr)?;
        let lp = r.string()?;
        let mut items = Vec::new();
        for_each_listpack(&lp, r.deep, |e| {
            items.push(e);
            Ok(())
        })
        .map_err(|_| Error::Corrupt("Stream listpack integrity check failed.".into()))?;
        if items.is_empty() {
            return corrupt("Empty listpack inside stream");
        }
        if prev.is_some_and(|p| master <= p) {
            return corrupt("Stream node keys out of order or overlapping");
        }
        let (master_fields, entries) = decode_node(master, &items)?;
        prev = entries.last().map(|e| e.0);
        s.push_loaded_node(master, &master_fields, &entries);
    }
    let length = r.read_len()?;
    let last_id = read_id(r)?;
    if length != s.loaded_len() {
        return corrupt("Stream length does not match its entries");
    }
    if prev.is_some_and(|p| p > last_id) {
        return corrupt("Stream last ID is below one of its entries");
    }
    if t == TYPE_STREAM_LISTPACKS {
        // No metadata before 7.0: derive it as Redis does.
        let first = s.edge(false).map(|e| e.id).unwrap_or_default();
        s.set_loaded_meta(last_id, first, StreamId::MIN, length);
    } else {
        let first = read_id(r)?;
        let max_deleted = read_id(r)?;
        let added = r.read_len()?;
        if added < length {
            return corrupt("Stream entries-added is below its length");
        }
        s.set_loaded_meta(last_id, first, max_deleted, added);
    }
    let ngroups = r.count(4)?;
    for _ in 0..ngroups {
        let name = r.string()?.into_owned();
        let last = read_id(r)?;
        let entries_read = if t == TYPE_STREAM_LISTPACKS {
            s.estimate_distance(last)
        } else {
            let v = r.read_len()? as i64;
            if v < ENTRIES_READ_INVALID {
                return corrupt("Stream group entries-read is invalid");
            }
            v
        };
        let mut g = Group::new(last, entries_read);
        let npel = r.count(25)?;
        let mut owners: BTreeMap<StreamId, Option<std::sync::Arc<[u8]>>> = BTreeMap::new();
        let mut nacks: Vec<(StreamId, i64, u64)> = Vec::with_capacity(npel.min(1 << 16));
        for _ in 0..npel {
            let id = read_raw_id(r)?;
            let time = r.i64_le()?;
            let count = r.read_len()?;
            if owners.insert(id, None).is_some() {
                return corrupt("Duplicated global PEL entry loading stream consumer group");
            }
            nacks.push((id, time, count));
        }
        let nconsumers = r.count(10)?;
        for _ in 0..nconsumers {
            let cname: std::sync::Arc<[u8]> = r.string()?.as_ref().into();
            if g.consumers.contains_key(&cname) {
                return corrupt("Duplicate stream consumer detected.");
            }
            let seen = r.i64_le()?;
            let active = if t == TYPE_STREAM_LISTPACKS_3 {
                r.i64_le()?
            } else {
                seen
            };
            let n = r.count(16)?;
            let mut pel = BTreeSet::new();
            for _ in 0..n {
                let id = read_raw_id(r)?;
                match owners.get_mut(&id) {
                    None => return corrupt("Consumer entry not found in group global PEL"),
                    Some(Some(_)) => {
                        return corrupt(
                            "Duplicated consumer PEL entry loading a stream consumer group",
                        )
                    }
                    Some(o) => *o = Some(cname.clone()),
                }
                pel.insert(id);
            }
            g.consumers.insert(
                cname,
                Consumer {
                    seen_time: seen,
                    active_time: active,
                    pel,
                },
            );
        }
        for (id, time, count) in nacks {
            let Some(Some(owner)) = owners.remove(&id) else {
                return corrupt("Stream CG PEL entry without consumer");
            };
            g.pel.insert(
                id,
                Nack {
                    delivery_time: time,
                    delivery_count: count,
                    consumer: owner,
                },
            );
        }
        if s.groups.insert(name, g).is_some() {
            return corrupt("Duplicated consumer group name");
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpack_writer_matches_reader() {
        let mut lp = LpWriter::new();
        let ints = [
            0i64,
            127,
            128,
            -1,
            -4096,
            4095,
            4096,
            -32768,
            32767,
            40000,
            -8388608,
            8388607,
            8388608,
            i32::MIN as i64,
            i32::MAX as i64,
            i64::MIN,
            i64::MAX,
        ];
        for v in ints {
            lp.int(v);
        }
        let strs: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"abc".to_vec(),
            b"007".to_vec(),
            b"-0".to_vec(),
            vec![b'x'; 63],
            vec![b'x'; 64],
            vec![b'y'; 4095],
            vec![b'y'; 4096],
            vec![b'z'; 16377],
            vec![b'z'; 16378],
        ];
        for s in &strs {
            lp.str(s);
        }
        let blob = lp.finish();
        let mut got = Vec::new();
        for_each_listpack(&blob, true, |e| {
            got.push(e.into_owned());
            Ok(())
        })
        .unwrap();
        let mut want: Vec<Vec<u8>> = ints.iter().map(|v| v.to_string().into_bytes()).collect();
        want.extend(strs);
        assert_eq!(got, want);
    }

    #[test]
    fn redis_encodings_byte_for_byte() {
        // Bytes of `lpAppend` results in Redis 7.0 for 1, "a" and 1000.
        let mut lp = LpWriter::new();
        lp.int(1);
        lp.str(b"a");
        lp.int(1000);
        assert_eq!(
            lp.finish(),
            vec![15, 0, 0, 0, 3, 0, 1, 1, 0x81, b'a', 2, 0xC3, 0xE8, 2, 0xFF]
        );
    }
}
