//! The dataset as RESP commands: the base file of an AOF rewrite under
//! `aof-use-rdb-preamble no`, in the shapes Redis writes so that either server loads
//! the other's files. Each key becomes the commands that rebuild it (SET; RPUSH, SADD,
//! ZADD, HMSET with at most `ITEMS_PER_COMMAND` elements each; a stream's XADDs,
//! XSETID, XGROUP CREATE, CREATECONSUMER and XCLAIMs), then PEXPIREAT for a TTL and
//! HPEXPIREAT for each hash field TTL. Libraries are FUNCTION LOADs, each run of a
//! database starts with SELECT, and `aof-timestamp-enabled` adds `#TS:<unix time>`
//! annotations (which every loader skips).

use crate::keyspace::value::{ObjRef, ValueRef};
use crate::types::stream::{Stream, StreamId};
use crate::util::numeric::{format_f64, format_i64};

/// Elements per variadic command, as Redis's AOF_REWRITE_ITEMS_PER_CMD.
pub const ITEMS_PER_COMMAND: usize = 64;

/// Appends a RESP command made of `args`.
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    header(out, b'*', args.len());
    for a in args {
        bulk(out, a);
    }
}

fn header(out: &mut Vec<u8>, kind: u8, n: usize) {
    out.push(kind);
    format_i64(n as i64, out);
    out.extend_from_slice(b"\r\n");
}

fn bulk(out: &mut Vec<u8>, s: &[u8]) {
    header(out, b'$', s.len());
    out.extend_from_slice(s);
    out.extend_from_slice(b"\r\n");
}

fn bulk_int(out: &mut Vec<u8>, n: i64) {
    let mut b = Vec::with_capacity(20);
    format_i64(n, &mut b);
    bulk(out, &b);
}

fn bulk_id(out: &mut Vec<u8>, id: StreamId) {
    bulk(out, format!("{}-{}", id.ms, id.seq).as_bytes());
}

/// The annotation `aof-timestamp-enabled` writes: `#TS:<unix seconds>`.
pub fn timestamp(out: &mut Vec<u8>, unix_secs: i64) {
    out.extend_from_slice(b"#TS:");
    format_i64(unix_secs, out);
    out.extend_from_slice(b"\r\n");
}

pub fn select(out: &mut Vec<u8>, db: usize) {
    out.extend_from_slice(b"*2\r\n$6\r\nSELECT\r\n");
    bulk_int(out, db as i64);
}

pub fn function_load(out: &mut Vec<u8>, code: &[u8]) {
    command(out, &[b"FUNCTION", b"LOAD", code]);
}

/// Writes elements with `each` in variadic commands `name key e1 e2 …` of at most
/// `ITEMS_PER_COMMAND` elements, each element taking `width` arguments.
struct Batches<'o> {
    out: &'o mut Vec<u8>,
    name: &'static [u8],
    key: &'o [u8],
    left: usize,
    in_command: usize,
    width: usize,
}

impl<'o> Batches<'o> {
    fn new(
        out: &'o mut Vec<u8>,
        name: &'static [u8],
        key: &'o [u8],
        len: usize,
        width: usize,
    ) -> Batches<'o> {
        Batches {
            out,
            name,
            key,
            left: len,
            in_command: 0,
            width,
        }
    }

    /// Opens a command when the previous one is full; the caller then writes one
    /// element's `width` arguments.
    fn element(&mut self) -> &mut Vec<u8> {
        if self.in_command == 0 {
            let n = self.left.clamp(1, ITEMS_PER_COMMAND);
            header(self.out, b'*', 2 + n * self.width);
            bulk(self.out, self.name);
            bulk(self.out, self.key);
        }
        self.in_command += 1;
        if self.in_command == ITEMS_PER_COMMAND {
            self.in_command = 0;
        }
        self.left = self.left.saturating_sub(1);
        self.out
    }
}

/// Appends the commands that rebuild `key` with `value` and `expire` (unix ms).
pub fn key(out: &mut Vec<u8>, key: &[u8], value: ValueRef<'_>, expire: Option<i64>) {
    match value {
        ValueRef::Int(n) => {
            out.extend_from_slice(b"*3\r\n$3\r\nSET\r\n");
            bulk(out, key);
            bulk_int(out, n);
        }
        ValueRef::Emb(s) | ValueRef::Raw(s) => command(out, &[b"SET", key, s]),
        ValueRef::Obj(ObjRef::List(l)) => {
            let mut b = Batches::new(out, b"RPUSH", key, l.len(), 1);
            let mut item = Vec::new();
            l.for_each(|e| {
                item.clear();
                e.append_to(&mut item);
                bulk(b.element(), &item);
                true
            });
        }
        ValueRef::Obj(ObjRef::Set(s)) => {
            let mut b = Batches::new(out, b"SADD", key, s.len(), 1);
            s.for_each(|m| bulk(b.element(), m));
        }
        ValueRef::Obj(ObjRef::ZSet(z)) => {
            let mut b = Batches::new(out, b"ZADD", key, z.len(), 2);
            z.for_each(|m, score| {
                let o = b.element();
                bulk(o, format_f64(score).as_bytes());
                bulk(o, m);
            });
        }
        ValueRef::Obj(ObjRef::Hash(h)) if h.has_field_ttls() => {
            // One HMSET per field, each followed by its TTL, as Redis writes them.
            h.for_each(|f, v| {
                command(out, &[b"HMSET", key, f, v]);
                if let Some(at) = h.expire_of(f) {
                    out.extend_from_slice(b"*6\r\n$10\r\nHPEXPIREAT\r\n");
                    bulk(out, key);
                    bulk_int(out, at);
                    bulk(out, b"FIELDS");
                    bulk(out, b"1");
                    bulk(out, f);
                }
            });
        }
        ValueRef::Obj(ObjRef::Hash(h)) => {
            let mut b = Batches::new(out, b"HMSET", key, h.len(), 2);
            h.for_each(|f, v| {
                let o = b.element();
                bulk(o, f);
                bulk(o, v);
            });
        }
        ValueRef::Obj(ObjRef::Stream(s)) => stream(out, key, s),
    }
    if let Some(at) = expire {
        out.extend_from_slice(b"*3\r\n$9\r\nPEXPIREAT\r\n");
        bulk(out, key);
        bulk_int(out, at);
    }
}

fn stream(out: &mut Vec<u8>, key: &[u8], s: &Stream) {
    if s.is_empty() {
        // An empty stream (all entries deleted, or created by XGROUP MKSTREAM):
        // XADD with MAXLEN 0 creates it and leaves it empty.
        command(out, &[b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"]);
    } else {
        s.range_each(StreamId::MIN, StreamId::MAX, 0, false, |id, pairs| {
            header(out, b'*', 3 + pairs.len());
            bulk(out, b"XADD");
            bulk(out, key);
            bulk_id(out, id);
            for p in pairs {
                bulk(out, p);
            }
        });
    }
    // After the XADDs, which would leave last-id at the last live entry.
    out.extend_from_slice(b"*7\r\n$6\r\nXSETID\r\n");
    bulk(out, key);
    bulk_id(out, s.last_id);
    bulk(out, b"ENTRIESADDED");
    bulk_int(out, s.entries_added as i64);
    bulk(out, b"MAXDELETEDID");
    bulk_id(out, s.max_deleted);
    for (name, g) in &s.groups {
        out.extend_from_slice(b"*7\r\n$6\r\nXGROUP\r\n$6\r\nCREATE\r\n");
        bulk(out, key);
        bulk(out, name);
        bulk_id(out, g.last_id);
        bulk(out, b"ENTRIESREAD");
        bulk_int(out, g.entries_read);
        for (cname, c) in &g.consumers {
            if c.pel.is_empty() {
                command(out, &[b"XGROUP", b"CREATECONSUMER", key, name, cname]);
                continue;
            }
            for id in &c.pel {
                let Some(nack) = g.pel.get(id) else { continue };
                out.extend_from_slice(b"*12\r\n$6\r\nXCLAIM\r\n");
                bulk(out, key);
                bulk(out, name);
                bulk(out, cname);
                bulk(out, b"0");
                bulk_id(out, *id);
                bulk(out, b"TIME");
                bulk_int(out, nack.delivery_time);
                bulk(out, b"RETRYCOUNT");
                bulk_int(out, nack.delivery_count as i64);
                bulk(out, b"JUSTID");
                bulk(out, b"FORCE");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_split_at_the_item_limit_with_exact_counts() {
        let mut out = Vec::new();
        let mut b = Batches::new(&mut out, b"SADD", b"k", 65, 1);
        for i in 0..65 {
            bulk(b.element(), i.to_string().as_bytes());
        }
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("*66\r\n$4\r\nSADD\r\n$1\r\nk\r\n$1\r\n0\r\n"));
        assert!(text.ends_with("*3\r\n$4\r\nSADD\r\n$1\r\nk\r\n$2\r\n64\r\n"));
        assert_eq!(text.matches("SADD").count(), 2);
    }

    #[test]
    fn strings_and_ttls() {
        let mut out = Vec::new();
        key(&mut out, b"n", ValueRef::Int(-12), Some(1_700_000_000_000));
        assert_eq!(
            out,
            b"*3\r\n$3\r\nSET\r\n$1\r\nn\r\n$3\r\n-12\r\n*3\r\n$9\r\nPEXPIREAT\r\n$1\r\nn\r\n$13\r\n1700000000000\r\n"
        );
        let mut out = Vec::new();
        timestamp(&mut out, 1628217470);
        select(&mut out, 3);
        assert_eq!(out, b"#TS:1628217470\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n");
    }
}
