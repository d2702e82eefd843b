//! Corrupt RESTORE payloads: every class of damage Redis's integrity checks catch
//! (ziplist prevlen/zltail/count, listpack sizes and back-lengths, listpackex TTL
//! order, duplicates, empty blobs, huge declared lengths, bad LZF, stream consumers)
//! is answered `-ERR Bad data format` and leaves the server serving;
//! `sanitize-dump-payload` decides only what Redis's deep checks add, and DEBUG
//! SET-SKIP-CHECKSUM-VALIDATION lets forged payloads in. The payloads are built here
//! from the formats' definitions.

mod common;

use common::*;

const BAD: &str = "-ERR Bad data format\r\n";
const OK: &str = "+OK\r\n";

static CRC64: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);

/// A DUMP payload: type, body, RDB version 11, CRC64.
fn payload(t: u8, body: &[u8]) -> Vec<u8> {
    let mut p = vec![t];
    p.extend_from_slice(body);
    p.extend_from_slice(&11u16.to_le_bytes());
    let c = CRC64.checksum(&p);
    p.extend_from_slice(&c.to_le_bytes());
    p
}

/// An RDB string (length-prefixed, plain).
fn rdb_string(out: &mut Vec<u8>, s: &[u8]) {
    rdb_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

fn rdb_len(out: &mut Vec<u8>, n: u64) {
    if n < 64 {
        out.push(n as u8);
    } else if n < 16384 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// A payload whose value is one blob (ziplist, listpack, intset, zipmap types).
fn blob_payload(t: u8, blob: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    rdb_string(&mut body, blob);
    payload(t, &body)
}

/// Listpack entries as strings (6-bit string encoding), with their back-lengths.
struct Listpack {
    entries: Vec<Vec<u8>>,
}

impl Listpack {
    fn of(items: &[&str]) -> Listpack {
        let entries = items
            .iter()
            .map(|s| {
                let mut e = vec![0x80 | s.len() as u8];
                e.extend_from_slice(s.as_bytes());
                let l = e.len() as u8;
                e.push(l);
                e
            })
            .collect();
        Listpack { entries }
    }

    fn bytes_with_count(&self, count: u16) -> Vec<u8> {
        let body: Vec<u8> = self.entries.concat();
        let mut out = ((body.len() + 7) as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&body);
        out.push(0xFF);
        out
    }

    fn bytes(&self) -> Vec<u8> {
        self.bytes_with_count(self.entries.len() as u16)
    }
}

/// A ziplist of short strings; `tail` None computes the right zltail.
fn ziplist(items: &[&str], tail: Option<u32>, prevlens: Option<&[u8]>) -> Vec<u8> {
    let mut body = Vec::new();
    let mut prev = 0usize;
    let mut last = 10usize;
    for (i, s) in items.iter().enumerate() {
        let start = body.len();
        last = 10 + start;
        body.push(prevlens.map_or(prev as u8, |p| p[i]));
        body.push(s.len() as u8);
        body.extend_from_slice(s.as_bytes());
        prev = body.len() - start;
    }
    let mut out = ((body.len() + 11) as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&tail.unwrap_or(last as u32).to_le_bytes());
    out.extend_from_slice(&(items.len() as u16).to_le_bytes());
    out.extend_from_slice(&body);
    out.push(0xFF);
    out
}

fn intset16(values: &[i16]) -> Vec<u8> {
    let mut out = 2u32.to_le_bytes().to_vec();
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

fn restore(c: &mut RawConn, key: &str, p: &[u8]) -> String {
    c.send_bytes(&[b"RESTORE", key.as_bytes(), b"0", p, b"REPLACE"]);
    c.read_reply()
}

fn sanitize(c: &mut RawConn, mode: &str) {
    assert_eq!(c.cmd(&["CONFIG", "SET", "sanitize-dump-payload", mode]), OK);
}

// RDB value types.
const T_LIST: u8 = 1;
const T_SET: u8 = 2;
const T_HASH: u8 = 4;
const T_ZIPMAP: u8 = 9;
const T_LIST_ZIPLIST: u8 = 10;
const T_INTSET: u8 = 11;
const T_ZSET_ZIPLIST: u8 = 12;
const T_HASH_ZIPLIST: u8 = 13;
const T_QUICKLIST: u8 = 14;
const T_HASH_LISTPACK: u8 = 16;
const T_QUICKLIST_2: u8 = 18;
const T_SET_LISTPACK: u8 = 20;
const T_HASH_LISTPACK_EX: u8 = 25;

#[test]
fn corrupt_ziplists_are_refused_whatever_the_setting() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    for mode in ["no", "yes"] {
        sanitize(&mut c, mode);
        // A sound ziplist restores (the builders are right).
        let good = ziplist(&["a", "1", "b", "2"], None, None);
        assert_eq!(
            restore(&mut c, "h", &blob_payload(T_HASH_ZIPLIST, &good)),
            OK
        );
        assert_eq!(c.cmd(&["HGET", "h", "b"]), "$1\r\n2\r\n");
        let mut q = Vec::new();
        rdb_len(&mut q, 1);
        rdb_string(&mut q, &good);
        assert_eq!(restore(&mut c, "l", &payload(T_QUICKLIST, &q)), OK);
        assert_eq!(c.cmd(&["LLEN", "l"]), ":4\r\n");

        let cases: Vec<(&str, Vec<u8>)> = vec![
            // An entry's length runs past the end.
            ("entry len", {
                let mut z = good.clone();
                z[11] = 0x14;
                z
            }),
            // zlbytes disagrees with the blob's size.
            ("zlbytes", {
                let mut z = good.clone();
                z[0] += 10;
                z
            }),
            // zltail does not point at the last entry.
            ("zltail", ziplist(&["a", "1", "b", "2"], Some(10), None)),
            // prevlen of the second entry is wrong (too small, then too big).
            ("small prevlen", ziplist(&["a", "1"], None, Some(&[0, 2]))),
            ("big prevlen", ziplist(&["a", "1"], None, Some(&[0, 14]))),
            // The header count disagrees with the entries.
            ("count", {
                let mut z = good.clone();
                z[8] = 3;
                z
            }),
        ];
        for (what, z) in &cases {
            for t in [T_HASH_ZIPLIST, T_LIST_ZIPLIST, T_ZSET_ZIPLIST] {
                assert_eq!(
                    restore(&mut c, "k", &blob_payload(t, z)),
                    BAD,
                    "{what} type {t}"
                );
            }
            let mut q = Vec::new();
            rdb_len(&mut q, 1);
            rdb_string(&mut q, z);
            assert_eq!(
                restore(&mut c, "k", &payload(T_QUICKLIST, &q)),
                BAD,
                "{what} quicklist"
            );
        }
        // Duplicate hash fields, an odd number of hash/zset records, a NaN-free but
        // non-numeric score.
        let dup = ziplist(&["a", "1", "a", "2"], None, None);
        assert_eq!(
            restore(&mut c, "k", &blob_payload(T_HASH_ZIPLIST, &dup)),
            BAD
        );
        assert_eq!(
            restore(&mut c, "k", &blob_payload(T_ZSET_ZIPLIST, &dup)),
            BAD
        );
        let odd = ziplist(&["a", "1", "b"], None, None);
        assert_eq!(
            restore(&mut c, "k", &blob_payload(T_HASH_ZIPLIST, &odd)),
            BAD
        );
        assert_eq!(
            restore(&mut c, "k", &blob_payload(T_ZSET_ZIPLIST, &odd)),
            BAD
        );
        let word = ziplist(&["a", "x"], None, None);
        assert_eq!(
            restore(&mut c, "k", &blob_payload(T_ZSET_ZIPLIST, &word)),
            BAD
        );
        // A quicklist whose only node is an empty ziplist is an empty key; a node of
        // zero bytes is corrupt.
        let mut q = Vec::new();
        rdb_len(&mut q, 1);
        rdb_string(&mut q, &ziplist(&[], None, None));
        assert_eq!(restore(&mut c, "k", &payload(T_QUICKLIST, &q)), BAD);
        let mut q = Vec::new();
        rdb_len(&mut q, 1);
        rdb_string(&mut q, b"");
        assert_eq!(restore(&mut c, "k", &payload(T_QUICKLIST, &q)), BAD);
        assert_eq!(c.cmd(&["EXISTS", "k"]), ":0\r\n");
        assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    }
}

#[test]
fn listpack_checks_follow_sanitize_dump_payload() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let lp = Listpack::of(&["f1", "v1", "f2", "v2"]);
    // A wrong back-length: only Redis's deep check looks at it. Unsanitized, the
    // value is rebuilt from the entries and is sound.
    let bad_back = lp.clone_with(|e| {
        let last = e[0].len() - 1;
        e[0][last] = 9;
    });
    for (mode, want) in [("yes", BAD), ("no", OK), ("clients", BAD)] {
        sanitize(&mut c, mode);
        assert_eq!(
            restore(
                &mut c,
                "h",
                &blob_payload(T_HASH_LISTPACK, &bad_back.bytes())
            ),
            want,
            "{mode}"
        );
    }
    assert_eq!(
        c.cmd(&["HGETALL", "h"]),
        "*4\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$2\r\nv2\r\n"
    );
    // A wrong header count: refused when sanitizing; unsanitized a count of 0 means
    // empty (as Redis reads it), another wrong count is ignored.
    sanitize(&mut c, "yes");
    assert_eq!(
        restore(
            &mut c,
            "k",
            &blob_payload(T_HASH_LISTPACK, &lp.bytes_with_count(2))
        ),
        BAD
    );
    sanitize(&mut c, "no");
    assert_eq!(
        restore(
            &mut c,
            "k",
            &blob_payload(T_SET_LISTPACK, &lp.bytes_with_count(0))
        ),
        BAD
    );
    assert_eq!(
        restore(
            &mut c,
            "k",
            &blob_payload(T_HASH_LISTPACK, &lp.bytes_with_count(2))
        ),
        OK
    );
    assert_eq!(c.cmd(&["HLEN", "k"]), ":2\r\n");
    for mode in ["no", "yes"] {
        sanitize(&mut c, mode);
        // Total-bytes header, missing terminator, an entry starting with EOF, an
        // entry running past the end.
        let mut size = lp.bytes();
        size[0] += 1;
        assert_eq!(
            restore(&mut c, "k", &blob_payload(T_HASH_LISTPACK, &size)),
            BAD
        );
        let mut noterm = lp.bytes();
        let n = noterm.len();
        noterm[n - 1] = 0;
        assert_eq!(
            restore(&mut c, "k", &blob_payload(T_HASH_LISTPACK, &noterm)),
            BAD
        );
        let mut long = lp.bytes();
        long[6] = 0x80 | 60;
        assert_eq!(
            restore(&mut c, "k", &blob_payload(T_HASH_LISTPACK, &long)),
            BAD
        );
        let eof_entry = {
            let mut b = Listpack::of(&["a"]).bytes();
            b.insert(6, 0xFF);
            b[0] += 1;
            b
        };
        let mut q = Vec::new();
        rdb_len(&mut q, 1);
        rdb_len(&mut q, 2);
        rdb_string(&mut q, &eof_entry);
        assert_eq!(restore(&mut c, "k", &payload(T_QUICKLIST_2, &q)), BAD);
        // Duplicates in a set or hash listpack; an odd hash listpack.
        let dup_set = Listpack::of(&["a", "b", "a"]).bytes();
        assert_eq!(
            restore(&mut c, "k", &blob_payload(T_SET_LISTPACK, &dup_set)),
            BAD
        );
        let dup_hash = Listpack::of(&["a", "1", "a", "2"]).bytes();
        assert_eq!(
            restore(&mut c, "k", &blob_payload(T_HASH_LISTPACK, &dup_hash)),
            BAD
        );
        let odd = Listpack::of(&["a", "1", "b"]).bytes();
        assert_eq!(
            restore(&mut c, "k", &blob_payload(T_HASH_LISTPACK, &odd)),
            BAD
        );
        // A quicklist container that is neither plain nor packed.
        let mut q = Vec::new();
        rdb_len(&mut q, 1);
        rdb_len(&mut q, 3);
        rdb_string(&mut q, &lp.bytes());
        assert_eq!(restore(&mut c, "k", &payload(T_QUICKLIST_2, &q)), BAD);
    }
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
}

impl Listpack {
    fn clone_with(&self, f: impl FnOnce(&mut Vec<Vec<u8>>)) -> Listpack {
        let mut entries = self.entries.clone();
        f(&mut entries);
        Listpack { entries }
    }
}

#[test]
fn listpackex_ttls_must_be_ordered_integers() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    sanitize(&mut c, "yes");
    let far = "99999999999999"; // within 2^48 ms
    let nearer = "99999999999000";
    let ex = |items: &[&str]| {
        let mut body = 0i64.to_le_bytes().to_vec();
        rdb_string(&mut body, &Listpack::of(items).bytes());
        payload(T_HASH_LISTPACK_EX, &body)
    };
    // Sound: TTL'd fields ascending, then the fields without one.
    assert_eq!(
        restore(
            &mut c,
            "h",
            &ex(&["a", "1", nearer, "b", "2", far, "c", "3", "0"])
        ),
        OK
    );
    assert_eq!(
        c.cmd(&["HPEXPIRETIME", "h", "FIELDS", "3", "a", "b", "c"]),
        format!("*3\r\n:{nearer}\r\n:{far}\r\n:-1\r\n")
    );
    for (what, items) in [
        ("unordered", vec!["a", "1", far, "b", "2", nearer]),
        ("ttl after none", vec!["a", "1", "0", "b", "2", far]),
        ("not a number", vec!["a", "1", "soon"]),
        ("past the maximum", vec!["a", "1", "281474976710656"]),
        ("negative", vec!["a", "1", "-5"]),
        ("duplicate", vec!["a", "1", "0", "a", "2", "0"]),
    ] {
        assert_eq!(restore(&mut c, "k", &ex(&items)), BAD, "{what}");
    }
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
}

#[test]
fn intsets_zipmaps_and_plain_encodings() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    for mode in ["no", "yes"] {
        sanitize(&mut c, mode);
        assert_eq!(
            restore(&mut c, "s", &blob_payload(T_INTSET, &intset16(&[1, 5, 9]))),
            OK
        );
        assert_eq!(c.cmd(&["SCARD", "s"]), ":3\r\n");
        // Empty, bad width, size mismatch, duplicates.
        assert_eq!(
            restore(&mut c, "k", &blob_payload(T_INTSET, &intset16(&[]))),
            BAD
        );
        let mut w = intset16(&[1, 2]);
        w[0] = 3;
        assert_eq!(restore(&mut c, "k", &blob_payload(T_INTSET, &w)), BAD);
        let mut n = intset16(&[1, 2]);
        n[4] = 3;
        assert_eq!(restore(&mut c, "k", &blob_payload(T_INTSET, &n)), BAD);
        assert_eq!(
            restore(&mut c, "k", &blob_payload(T_INTSET, &intset16(&[4, 4]))),
            BAD
        );
        // Zipmaps: empty, a count that disagrees, duplicates.
        assert_eq!(
            restore(&mut c, "k", &blob_payload(T_ZIPMAP, &[0, 0xFF])),
            BAD
        );
        let zm = |count: u8, fields: &[&str]| {
            let mut z = vec![count];
            for f in fields {
                z.extend_from_slice(&[f.len() as u8]);
                z.extend_from_slice(f.as_bytes());
                z.extend_from_slice(&[1, 0, b'v']);
            }
            z.push(0xFF);
            z
        };
        assert_eq!(
            restore(&mut c, "z", &blob_payload(T_ZIPMAP, &zm(2, &["a", "b"]))),
            OK
        );
        assert_eq!(c.cmd(&["HGET", "z", "b"]), "$1\r\nv\r\n");
        assert_eq!(
            restore(&mut c, "k", &blob_payload(T_ZIPMAP, &zm(3, &["a", "b"]))),
            BAD
        );
        assert_eq!(
            restore(&mut c, "k", &blob_payload(T_ZIPMAP, &zm(2, &["a", "a"]))),
            BAD
        );
        // Plain encodings: duplicate set members and hash fields.
        let mut body = Vec::new();
        rdb_len(&mut body, 2);
        rdb_string(&mut body, b"x");
        rdb_string(&mut body, b"x");
        assert_eq!(restore(&mut c, "k", &payload(T_SET, &body)), BAD);
        let mut body = Vec::new();
        rdb_len(&mut body, 2);
        for f in ["a", "1", "a", "2"] {
            rdb_string(&mut body, f.as_bytes());
        }
        assert_eq!(restore(&mut c, "k", &payload(T_HASH, &body)), BAD);
    }
}

#[test]
fn huge_declared_lengths_and_bad_lzf_are_refused_at_once() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    for t in [T_LIST, T_SET, T_HASH, T_QUICKLIST_2] {
        for n in [u32::MAX as u64, u64::MAX / 2] {
            let mut body = Vec::new();
            rdb_len(&mut body, n);
            rdb_string(&mut body, b"a");
            assert_eq!(
                restore(&mut c, "k", &payload(t, &body)),
                BAD,
                "type {t} len {n}"
            );
        }
    }
    // A string claiming 2^63 bytes.
    let mut body = Vec::new();
    rdb_len(&mut body, 1 << 63);
    assert_eq!(restore(&mut c, "k", &payload(0, &body)), BAD);
    // LZF: a claimed length far beyond what the compressed bytes can give, and
    // compressed bytes that do not decode.
    for (clen_data, len) in [(vec![0u8, b'a'], 1u64 << 30), (vec![0xE0, 0xFF, 0xFF], 10)] {
        let mut body = vec![0xC3];
        rdb_len(&mut body, clen_data.len() as u64);
        rdb_len(&mut body, len);
        body.extend_from_slice(&clen_data);
        assert_eq!(restore(&mut c, "k", &payload(0, &body)), BAD);
    }
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
}

#[test]
fn stream_with_duplicate_consumers_is_refused() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["XADD", "st", "1-1", "f", "v"]);
    c.cmd(&["XGROUP", "CREATE", "st", "g", "0"]);
    c.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "ca",
        "COUNT",
        "1",
        "STREAMS",
        "st",
        ">",
    ]);
    c.cmd(&["XGROUP", "CREATECONSUMER", "st", "g", "cb"]);
    let dump: Vec<u8> = redis::cmd("DUMP").arg("st").query(&mut s.client()).unwrap();
    // Renaming consumer "cb" to "ca" gives two consumers of one name.
    let at = dump
        .windows(3)
        .rposition(|w| w == b"\x02cb")
        .expect("consumer name");
    let mut body = dump[1..dump.len() - 10].to_vec();
    body[at + 1] = b'a';
    let forged = payload(dump[0], &body);
    sanitize(&mut c, "yes");
    assert_eq!(restore(&mut c, "k", &forged), BAD);
    // The original restores.
    assert_eq!(restore(&mut c, "k", &dump), OK);
    assert_eq!(c.cmd(&["XLEN", "k"]), ":1\r\n");
}

#[test]
fn skip_checksum_validation_and_sanitization_counter() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let mut p = blob_payload(T_INTSET, &intset16(&[1, 2]));
    let n = p.len();
    p[n - 1] ^= 0xFF;
    assert_eq!(
        restore(&mut c, "k", &p),
        "-ERR DUMP payload version or checksum are wrong\r\n"
    );
    assert_eq!(c.cmd(&["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1"]), OK);
    assert_eq!(restore(&mut c, "k", &p), OK);
    assert_eq!(c.cmd(&["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "0"]), OK);
    assert_eq!(
        restore(&mut c, "k", &p),
        "-ERR DUMP payload version or checksum are wrong\r\n"
    );
    let count = |c: &mut RawConn| {
        let info = c.cmd(&["INFO", "stats"]);
        info.lines()
            .find_map(|l| l.strip_prefix("dump_payload_sanitizations:"))
            .unwrap()
            .to_string()
    };
    let good = blob_payload(T_INTSET, &intset16(&[1, 2]));
    sanitize(&mut c, "no");
    assert_eq!(restore(&mut c, "k", &good), OK);
    assert_eq!(count(&mut c), "0");
    sanitize(&mut c, "yes");
    assert_eq!(restore(&mut c, "k", &good), OK);
    assert_eq!(count(&mut c), "1");
    // `clients`: a user flagged skip-sanitize-payload is not sanitized.
    sanitize(&mut c, "clients");
    assert_eq!(
        c.cmd(&[
            "ACL",
            "SETUSER",
            "trusted",
            "on",
            "nopass",
            "+@all",
            "~*",
            "skip-sanitize-payload"
        ]),
        OK
    );
    assert_eq!(restore(&mut c, "k", &good), OK);
    assert_eq!(count(&mut c), "2");
    assert_eq!(c.cmd(&["AUTH", "trusted", "x"]), OK);
    assert_eq!(restore(&mut c, "k", &good), OK);
    assert_eq!(count(&mut c), "2");
}
