//! Unit and property tests of the RDB codec: Redis's own DUMP payloads decode to the
//! expected contents, every value round-trips, and arbitrary bytes never panic.

use proptest::prelude::*;

use super::*;
use crate::types::stream::{Group, Stream, StreamId};
use crate::types::zset::AddFlags;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A value's contents in a canonical, comparable form.
#[derive(Debug, PartialEq)]
enum Flat {
    Str(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    ZSet(Vec<(Vec<u8>, u64)>),
    Hash(Vec<(Vec<u8>, Vec<u8>, Option<i64>)>),
    Stream(String),
}

fn flat(v: ValueRef<'_>) -> Flat {
    match v {
        ValueRef::Obj(ObjRef::List(l)) => Flat::List(l.to_vecs()),
        ValueRef::Obj(ObjRef::Set(s)) => {
            let mut m = s.members();
            m.sort();
            Flat::Set(m)
        }
        ValueRef::Obj(ObjRef::ZSet(z)) => {
            let mut v = Vec::new();
            // A listpack stores -0 as 0 (as Redis does), so an encoding change on the
            // way back may turn one into the other: compare them as equal.
            z.for_each(|m, s| v.push((m.to_vec(), if s == 0.0 { 0 } else { s.to_bits() })));
            Flat::ZSet(v)
        }
        ValueRef::Obj(ObjRef::Hash(h)) => {
            let mut v = Vec::new();
            h.for_each(|f, x| v.push((f.to_vec(), x.to_vec(), h.expire_of(f))));
            v.sort();
            Flat::Hash(v)
        }
        ValueRef::Obj(ObjRef::Stream(s)) => Flat::Stream(stream_flat(s)),
        other => Flat::Str(other.string_bytes().unwrap().into_owned()),
    }
}

fn value_ref(v: &Value) -> ValueRef<'_> {
    match v {
        Value::Int(n) => ValueRef::Int(*n),
        Value::Str(s) => ValueRef::Emb(s),
        Value::RawStr(s) => ValueRef::Raw(s),
        Value::Obj(o) => ValueRef::Obj(o.as_ref()),
    }
}

fn restore(p: &[u8]) -> Flat {
    let v = restore_payload(p, &Limits::default()).unwrap().unwrap();
    flat(value_ref(&v))
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

#[test]
fn crc64_matches_redis_test_vector() {
    // Redis's crc64.c self-test: crc64(0, "123456789") == 0xe9c6d914c4b8d9ca.
    assert_eq!(crc64(b"123456789"), 0xe9c6d914c4b8d9ca);
    let mut d = crc64_digest();
    d.update(b"1234");
    d.update(b"56789");
    assert_eq!(d.finalize(), 0xe9c6d914c4b8d9ca);
}

#[test]
fn lengths_round_trip() {
    for n in [
        0u64,
        1,
        63,
        64,
        16383,
        16384,
        u32::MAX as u64,
        u32::MAX as u64 + 1,
        u64::MAX,
    ] {
        let mut out = Vec::new();
        write_len(&mut out, n);
        let mut r = Reader::new(&out);
        assert_eq!(r.read_len().unwrap(), n);
        assert_eq!(r.remaining(), 0);
    }
}

#[test]
fn strings_encode_as_redis() {
    let mut out = Vec::new();
    write_string(&mut out, b"12345", true);
    assert_eq!(out, hex("c13930"));
    out.clear();
    write_string(&mut out, b"-1", true);
    assert_eq!(out, hex("c0ff"));
    out.clear();
    // Not canonical: stays a raw string.
    write_string(&mut out, b"012", true);
    assert_eq!(out, b"\x03012");
    out.clear();
    let x = vec![b'x'; 100];
    write_string(&mut out, &x, true);
    assert_eq!(out[0], 0xC3);
    assert_eq!(Reader::new(&out).string().unwrap().as_ref(), &x[..]);
}

// Payloads produced by redis-server 7.0 DUMP.
#[test]
fn decodes_redis_dump_payloads() {
    let l = "120102303000000009008161028162020c01dffb02c12c02f270110104f290eefe04f400f2052a01000000098568656c6c6f06ff0a00307d5de88247454b";
    assert_eq!(
        restore(&hex(l)),
        Flat::List(
            [
                "a",
                "b",
                "12",
                "-5",
                "300",
                "70000",
                "-70000",
                "5000000000",
                "hello"
            ]
            .iter()
            .map(|s| b(s))
            .collect()
        )
    );
    let si = "0b1c04000000050000009cffffff010000000200000003000000701101000a009f4dd5a629d01743";
    let mut m: Vec<Vec<u8>> = ["1", "2", "3", "-100", "70000"]
        .iter()
        .map(|s| b(s))
        .collect();
    m.sort();
    assert_eq!(restore(&hex(si)), Flat::Set(m));
    let ss = "0204c0010162016301610a00908bc74a292a7e1a";
    assert_eq!(
        restore(&hex(ss)),
        Flat::Set(vec![b("1"), b("a"), b("b"), b("c")])
    );
    let z = "11c331391f390000000800816302842d696e6605816102010181620283322e35048164029702312e30e005000731652b33303018ff0a00b1d584616b3f9d5b";
    assert_eq!(
        restore(&hex(z)),
        Flat::ZSet(vec![
            (b("c"), f64::NEG_INFINITY.to_bits()),
            (b("a"), 1f64.to_bits()),
            (b("b"), 2.5f64.to_bits()),
            (b("d"), 1e300f64.to_bits()),
        ])
    );
    let h = "101b1b00000006008266310382763103826632037b01826633038001ff0a006309563c3bf11137";
    assert_eq!(
        restore(&hex(h)),
        Flat::Hash(vec![
            (b("f1"), b("v1"), None),
            (b("f2"), b("123"), None),
            (b("f3"), b(""), None)
        ])
    );
    let s = "00c3094064017878e057000178780a005db7f663bb08625f";
    assert_eq!(restore(&hex(s)), Flat::Str(vec![b'x'; 100]));
    let n = "00c139300a009d94ea2793fc08b9";
    assert_eq!(restore(&hex(n)), Flat::Str(b("12345")));
}

#[test]
fn bad_checksum_and_version_are_refused() {
    let mut p = hex("00c139300a009d94ea2793fc08b9");
    let last = p.len() - 1;
    p[last] ^= 1;
    assert!(matches!(
        restore_payload(&p, &Limits::default()),
        Err(Error::Checksum { .. })
    ));
    let mut p = hex("00c13930");
    p.extend_from_slice(&13u16.to_le_bytes());
    let c = crc64(&p);
    p.extend_from_slice(&c.to_le_bytes());
    assert_eq!(
        restore_payload(&p, &Limits::default()).err(),
        Some(Error::Version(13))
    );
}

/// A stream's whole observable state, including tombstone-free entries, metadata,
/// groups, PELs and consumers (active times excluded: type 19 does not carry them).
fn stream_flat(s: &Stream) -> String {
    let mut out = format!(
        "len={} last={} first={} maxdel={} added={}\n",
        s.len(),
        s.last_id,
        s.first_id,
        s.max_deleted,
        s.entries_added
    );
    for e in s.range(StreamId::MIN, StreamId::MAX, 0, false) {
        out += &format!("{} {:?}\n", e.id, e.fields);
    }
    for (name, g) in &s.groups {
        out += &format!(
            "group {:?} last={} read={}\n",
            name, g.last_id, g.entries_read
        );
        for (id, n) in &g.pel {
            out += &format!(
                "  pel {id} {} {} {:?}\n",
                n.delivery_time, n.delivery_count, n.consumer
            );
        }
        for (c, cons) in &g.consumers {
            let pel: Vec<String> = cons.pel.iter().map(|i| i.to_string()).collect();
            out += &format!(
                "  consumer {c:?} seen={} pel={{{}}}\n",
                cons.seen_time,
                pel.join(", ")
            );
        }
    }
    out
}

#[test]
fn decodes_redis_stream_payload() {
    // Redis 7.0.15: XADD s 1-1 a 1 b 2; XADD s 1-2 a 3 b 4; XADD s 2-0 c hello;
    // XADD s 3-0 a 5 b 6; XDEL s 1-2; XGROUP CREATE s g 0; XREADGROUP GROUP g alice
    // COUNT 2 ...; XREADGROUP GROUP g bob COUNT 1 ...; XGROUP CREATE s g2 $;
    // XGROUP CREATECONSUMER s g2 carol; DUMP s
    let p = hex("13011000000000000000010000000000000001c34049404f124f0000001f0003010101020181610281620200200900002001401102050103600902030104200b40130fdfff0201018163028568656c6c6f0606202c0002401402050106202100ff03030001010102040201670300040300000000000000010000000000000001b7949f03a20100000100000000000000020000000000000000b7949f03a20100000100000000000000030000000000000000cc949f03a2010000010205616c696365b7949f03a201000002000000000000000100000000000000010000000000000002000000000000000003626f62cc949f03a20100000100000000000000030000000000000000026732030081ffffffffffffffff0001056361726f6ce8949f03a2010000000a00dd751ffb77a92475");
    let v = restore_payload(&p, &Limits::default()).unwrap().unwrap();
    let Value::Obj(o) = &v else { panic!() };
    let Object::Stream(st) = o else { panic!() };
    let t1 = 1795357119671i64;
    let t2 = 1795357119692i64;
    let t3 = 1795357119720i64;
    let want = format!(
        "len=3 last=3-0 first=1-1 maxdel=1-2 added=4\n\
         1-1 [[97], [49], [98], [50]]\n\
         2-0 [[99], [104, 101, 108, 108, 111]]\n\
         3-0 [[97], [53], [98], [54]]\n\
         group [103] last=3-0 read=4\n  pel 1-1 {t1} 1 [97, 108, 105, 99, 101]\n  pel 2-0 {t1} 1 [97, 108, 105, 99, 101]\n  pel 3-0 {t2} 1 [98, 111, 98]\n\
         \x20 consumer [97, 108, 105, 99, 101] seen={t1} pel={{1-1, 2-0}}\n\
         \x20 consumer [98, 111, 98] seen={t2} pel={{3-0}}\n\
         group [103, 50] last=3-0 read=-1\n\
         \x20 consumer [99, 97, 114, 111, 108] seen={t3} pel={{}}\n"
    );
    assert_eq!(stream_flat(st), want);
    // Active times default to the seen time for a type 19 value (Redis 7.2+).
    assert_eq!(
        st.groups[b"g".as_slice()].consumers[b"bob".as_slice()].active_time,
        t2
    );
    // Written back, the node's listpack is byte-identical with Redis's (the LZF
    // compressor may pick other matches, so compare the decompressed blobs) and the
    // rest of the payload too.
    let ours = dump_payload(value_ref(&v));
    let node_blob = |p: &[u8]| {
        let mut r = Reader::new(&p[1..]);
        assert_eq!(r.read_len().unwrap(), 1);
        r.string().unwrap();
        let lp = r.string().unwrap().into_owned();
        (lp, p[1 + r.pos..p.len() - 8].to_vec())
    };
    assert_eq!(node_blob(&ours), node_blob(&p));
    let again = restore_payload(&ours, &Limits::default()).unwrap().unwrap();
    assert_eq!(flat(value_ref(&again)), flat(value_ref(&v)));
}

/// A stream payload edited by `f` after a valid prefix is refused, never a panic.
fn stream_body(s: &Stream) -> Vec<u8> {
    let mut body = Vec::new();
    stream::write_stream(
        &mut Plain {
            out: &mut body,
            compress: false,
        },
        s,
    );
    body
}

fn sample_stream() -> Stream {
    let mut s = Stream::new();
    for i in 1..=5u64 {
        let v = i.to_string();
        s.append(StreamId::new(i, 0), &[b"f", v.as_bytes()], 4096, 3);
    }
    s.delete(StreamId::new(2, 0));
    let mut g = Group::new(StreamId::new(4, 0), 4);
    g.consumer(b"c1", 100);
    g.assign(StreamId::new(3, 0), b"c1", 50, 2);
    s.groups.insert(b"g".to_vec(), g);
    s
}

#[test]
fn corrupt_stream_payloads_are_refused() {
    let s = sample_stream();
    let good = stream_body(&s);
    assert!(restore_payload(&payload(TYPE_STREAM_LISTPACKS_2, &good), &Limits::default()).is_ok());
    let refused = |body: &[u8], what: &str| {
        let r = restore_payload(&payload(TYPE_STREAM_LISTPACKS_2, body), &Limits::default());
        assert!(
            matches!(r, Err(Error::Corrupt(_)) | Err(Error::Truncated)),
            "{what}: {r:?}"
        );
    };
    // A length that lies.
    let mut bad = s.clone();
    bad.groups.clear();
    let mut body = stream_body(&bad);
    // len, then 3 ids of 2 one-byte lengths each, entries-added, group count.
    let at = body.len() - (1 + 6 + 1 + 1);
    body[at] += 1;
    refused(&body, "length");
    // A PEL entry owned by nobody, and a consumer PEL id missing from the group PEL.
    let mut orphan = s.clone();
    orphan
        .groups
        .get_mut(b"g".as_slice())
        .unwrap()
        .consumers
        .clear();
    refused(&stream_body(&orphan), "orphan PEL entry");
    let mut missing = s.clone();
    {
        let g = missing.groups.get_mut(b"g".as_slice()).unwrap();
        g.consumers
            .get_mut(b"c1".as_slice())
            .unwrap()
            .pel
            .insert(StreamId::new(9, 9));
    }
    refused(&stream_body(&missing), "consumer PEL id not in group PEL");
    // Two consumers owning the same entry.
    let mut twice = s.clone();
    {
        let g = twice.groups.get_mut(b"g".as_slice()).unwrap();
        g.consumer(b"c2", 1);
        g.consumers
            .get_mut(b"c2".as_slice())
            .unwrap()
            .pel
            .insert(StreamId::new(3, 0));
    }
    refused(&stream_body(&twice), "PEL entry owned twice");
    // A last ID below the entries.
    let mut low = s.clone();
    low.last_id = StreamId::new(1, 0);
    refused(&stream_body(&low), "last id");
    // Every truncation.
    for cut in 0..good.len() {
        refused(&good[..cut], "truncated");
    }
    // A bad listpack inside a node: flip each byte of the first node's blob.
    for i in 20..60.min(good.len()) {
        let mut b = good.clone();
        b[i] ^= 0x55;
        let _ = restore_payload(&payload(TYPE_STREAM_LISTPACKS_2, &b), &Limits::default());
    }
}

#[test]
fn empty_stream_round_trips() {
    let mut s = Stream::new();
    s.append(StreamId::new(5, 5), &[b"a", b"b"], 4096, 100);
    s.delete(StreamId::new(5, 5));
    s.groups
        .insert(b"g".to_vec(), Group::new(StreamId::new(5, 5), 1));
    let v = Value::Obj(Object::Stream(Box::new(s.clone())));
    let back = restore_payload(&dump_payload(value_ref(&v)), &Limits::default())
        .unwrap()
        .expect("an empty stream is kept");
    assert_eq!(flat(value_ref(&back)), Flat::Stream(stream_flat(&s)));
}

// ----- hand-built ziplist / zipmap / intset blobs ------------------------------------

fn ziplist(entries: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut prev = 0usize;
    let mut tail = 0usize;
    for e in entries {
        let start = body.len();
        tail = 10 + start;
        if prev < 254 {
            body.push(prev as u8);
        } else {
            body.push(0xFE);
            body.extend_from_slice(&(prev as u32).to_le_bytes());
        }
        match std::str::from_utf8(e)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
        {
            Some(n @ 0..=12) => body.push(0xF1 + n as u8),
            Some(n) if (-128..128).contains(&n) => {
                body.push(0xFE);
                body.push(n as i8 as u8);
            }
            Some(n) if (i16::MIN as i64..=i16::MAX as i64).contains(&n) => {
                body.push(0xC0);
                body.extend_from_slice(&(n as i16).to_le_bytes());
            }
            Some(n) if (-(1 << 23)..1 << 23).contains(&n) => {
                body.push(0xF0);
                body.extend_from_slice(&(n as i32).to_le_bytes()[..3]);
            }
            Some(n) if (i32::MIN as i64..=i32::MAX as i64).contains(&n) => {
                body.push(0xD0);
                body.extend_from_slice(&(n as i32).to_le_bytes());
            }
            Some(n) => {
                body.push(0xE0);
                body.extend_from_slice(&n.to_le_bytes());
            }
            None if e.len() < 64 => {
                body.push(e.len() as u8);
                body.extend_from_slice(e);
            }
            None if e.len() < 16384 => {
                body.push(0x40 | (e.len() >> 8) as u8);
                body.push(e.len() as u8);
                body.extend_from_slice(e);
            }
            None => {
                body.push(0x80);
                body.extend_from_slice(&(e.len() as u32).to_be_bytes());
                body.extend_from_slice(e);
            }
        }
        prev = body.len() - start;
    }
    let mut out = Vec::new();
    out.extend_from_slice(&((body.len() + 11) as u32).to_le_bytes());
    out.extend_from_slice(&(tail as u32).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&body);
    out.push(0xFF);
    out
}

fn payload(t: u8, body: &[u8]) -> Vec<u8> {
    let mut p = vec![t];
    p.extend_from_slice(body);
    p.extend_from_slice(&9u16.to_le_bytes());
    let c = crc64(&p);
    p.extend_from_slice(&c.to_le_bytes());
    p
}

fn blob_payload(t: u8, blob: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    write_string(&mut body, blob, false);
    payload(t, &body)
}

#[test]
fn decodes_old_encodings() {
    let big = vec![b'q'; 300];
    let items: Vec<&[u8]> = vec![
        b"a",
        b"7",
        b"-100",
        b"1000",
        b"-5000000",
        b"2000000000",
        b"9000000000",
        &big,
    ];
    let want: Vec<Vec<u8>> = items.iter().map(|s| s.to_vec()).collect();
    assert_eq!(
        restore(&blob_payload(TYPE_LIST_ZIPLIST, &ziplist(&items))),
        Flat::List(want.clone())
    );
    // Quicklist (v1) of two ziplist nodes.
    let mut body = Vec::new();
    write_len(&mut body, 2);
    write_string(&mut body, &ziplist(&items[..3]), false);
    write_string(&mut body, &ziplist(&items[3..]), false);
    assert_eq!(
        restore(&payload(TYPE_LIST_QUICKLIST, &body)),
        Flat::List(want)
    );
    let zs = ziplist(&[b"m1", b"1.5", b"m2", b"3"]);
    assert_eq!(
        restore(&blob_payload(TYPE_ZSET_ZIPLIST, &zs)),
        Flat::ZSet(vec![(b("m1"), 1.5f64.to_bits()), (b("m2"), 3f64.to_bits())])
    );
    let hz = ziplist(&[b"f", b"v", b"n", b"5"]);
    assert_eq!(
        restore(&blob_payload(TYPE_HASH_ZIPLIST, &hz)),
        Flat::Hash(vec![(b("f"), b("v"), None), (b("n"), b("5"), None)])
    );
    // zipmap: count, (len field len free value free-bytes)*, end.
    let zm = b"\x02\x01f\x02\x01vv\x00\x02gg\x01\x00x\xff";
    assert_eq!(
        restore(&blob_payload(TYPE_HASH_ZIPMAP, zm)),
        Flat::Hash(vec![(b("f"), b("vv"), None), (b("gg"), b("x"), None)])
    );
    // intset with 8-byte members.
    let mut is = Vec::new();
    is.extend_from_slice(&8u32.to_le_bytes());
    is.extend_from_slice(&2u32.to_le_bytes());
    is.extend_from_slice(&(-5_000_000_000i64).to_le_bytes());
    is.extend_from_slice(&7i64.to_le_bytes());
    assert_eq!(
        restore(&blob_payload(TYPE_SET_INTSET, &is)),
        Flat::Set(vec![b("-5000000000"), b("7")])
    );
    // Old ZSET type with string scores.
    let mut body = Vec::new();
    write_len(&mut body, 2);
    write_string(&mut body, b"a", false);
    body.extend_from_slice(b"\x032.5");
    write_string(&mut body, b"b", false);
    body.push(255);
    assert_eq!(
        restore(&payload(TYPE_ZSET, &body)),
        Flat::ZSet(vec![
            (b("b"), f64::NEG_INFINITY.to_bits()),
            (b("a"), 2.5f64.to_bits())
        ])
    );
}

#[test]
fn duplicates_are_corrupt() {
    let mut body = Vec::new();
    write_len(&mut body, 2);
    write_string(&mut body, b"a", false);
    write_string(&mut body, b"a", false);
    assert!(matches!(
        restore_payload(&payload(TYPE_SET, &body), &Limits::default()),
        Err(Error::Corrupt(_))
    ));
}

#[test]
fn hash_field_ttls_round_trip_at_version_12() {
    let mut h = Hash::new();
    h.set(b"a", b"1", HashLimits::default());
    h.set(b"b", b"2", HashLimits::default());
    h.set_expire(b"a", 1_900_000_000_000);
    let p = dump_payload(ValueRef::Obj(ObjRef::Hash(&h)));
    assert_eq!(p[0], TYPE_HASH_METADATA);
    assert_eq!(u16::from_le_bytes([p[p.len() - 10], p[p.len() - 9]]), 12);
    assert_eq!(
        restore(&p),
        Flat::Hash(vec![
            (b("a"), b("1"), Some(1_900_000_000_000)),
            (b("b"), b("2"), None)
        ])
    );
}

// ----- round trips of arbitrary values ------------------------------------------------

#[derive(Debug, Clone)]
enum Gen {
    Str(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    ZSet(Vec<(Vec<u8>, f64)>),
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    /// Entries as (ms gap, field shape, deleted), then groups as (last-id entry index,
    /// entries read, PEL as (entry index, consumer, delivery count)).
    Stream(Vec<(u8, u8, bool)>, Vec<GenGroup>),
}

type GenGroup = (usize, i64, Vec<(usize, u8, u8)>);

fn gen_stream() -> impl Strategy<Value = Gen> {
    (
        proptest::collection::vec((0u8..3, 0u8..4, proptest::bool::weighted(0.2)), 0..60),
        proptest::collection::vec(
            (
                any::<usize>(),
                -1i64..50,
                proptest::collection::vec((any::<usize>(), 0u8..4, 0u8..5), 0..10),
            ),
            0..3,
        ),
    )
        .prop_map(|(e, g)| Gen::Stream(e, g))
}

fn elem() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string().into_bytes()),
        (0i64..100).prop_map(|n| n.to_string().into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..8),
        proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b')], 0..200),
    ]
}

fn score() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("not nan", |f| !f.is_nan()),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        (-100i32..100).prop_map(|n| n as f64 / 4.0),
    ]
}

fn gen() -> impl Strategy<Value = Gen> {
    prop_oneof![
        elem().prop_map(Gen::Str),
        proptest::collection::vec(elem(), 1..300).prop_map(Gen::List),
        proptest::collection::vec(elem(), 1..300).prop_map(Gen::Set),
        proptest::collection::vec((elem(), score()), 1..300).prop_map(Gen::ZSet),
        proptest::collection::vec((elem(), elem()), 1..300).prop_map(Gen::Hash),
        gen_stream(),
    ]
}

fn build(g: &Gen, lim: &Limits) -> Value {
    match g {
        Gen::Str(s) => Value::from_string(s.clone()),
        Gen::List(items) => {
            let mut l = List::new();
            for i in items {
                l.push(End::Tail, &[i], lim.list);
            }
            Value::Obj(Object::List(Box::new(l)))
        }
        Gen::Set(items) => {
            let mut s = Set::create(&items[0], items.len(), lim.set);
            for i in items {
                s.add(i, lim.set);
            }
            Value::Obj(Object::Set(Box::new(s)))
        }
        Gen::ZSet(items) => {
            let mut z = ZSet::with_hint(items.len(), 0, lim.zset);
            for (m, s) in items {
                z.add(m, *s, AddFlags::default(), lim.zset);
            }
            Value::Obj(Object::ZSet(Box::new(z)))
        }
        Gen::Hash(items) => {
            let mut h = Hash::new();
            for (f, v) in items {
                h.set(f, v, lim.hash);
            }
            Value::Obj(Object::Hash(Box::new(h)))
        }
        Gen::Stream(entries, groups) => {
            let mut s = Stream::new();
            let mut ids = Vec::new();
            let mut ms = 1u64;
            for (i, (gap, shape, _)) in entries.iter().enumerate() {
                ms += *gap as u64;
                let id = StreamId::new(ms, i as u64);
                let v = (i * 37).to_string().into_bytes();
                let big = v.repeat(40);
                let pairs: Vec<&[u8]> = match shape {
                    0 => vec![b"f", &v],
                    1 => vec![b"f", &v, b"g", b"-12"],
                    2 => vec![b"other", &big],
                    _ => vec![b"123", b"", b"f", &v],
                };
                s.append(id, &pairs, 200, 5);
                ids.push(id);
            }
            for (i, (_, _, del)) in entries.iter().enumerate() {
                if *del {
                    s.delete(ids[i]);
                }
            }
            for (gi, (last, read, pel)) in groups.iter().enumerate() {
                let last = if ids.is_empty() {
                    StreamId::MIN
                } else {
                    ids[last % ids.len()]
                };
                let mut g = Group::new(last, *read);
                for (k, (e, c, count)) in pel.iter().enumerate() {
                    if ids.is_empty() {
                        break;
                    }
                    let name = vec![b'c', b'0' + c];
                    let now = 1000 + k as i64;
                    g.consumer(&name, now).0.active_time = now;
                    g.assign(ids[e % ids.len()], &name, now * 3, *count as u64);
                }
                s.groups.insert(format!("group{gi}").into_bytes(), g);
            }
            Value::Obj(Object::Stream(Box::new(s)))
        }
    }
}

fn small_limits() -> Limits {
    Limits {
        hash: HashLimits {
            listpack_entries: 4,
            listpack_value: 4,
        },
        set: SetLimits {
            intset_entries: 4,
            listpack_entries: 4,
            listpack_value: 4,
        },
        zset: zset::Limits {
            max_entries: 4,
            max_value: 4,
        },
        list: Packing::fill(3),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn values_round_trip(g in gen(), small_out in any::<bool>(), small_in in any::<bool>()) {
        let out_lim = if small_out { small_limits() } else { Limits::default() };
        let in_lim = if small_in { small_limits() } else { Limits::default() };
        let v = build(&g, &out_lim);
        let p = dump_payload(value_ref(&v));
        let back = restore_payload(&p, &in_lim).unwrap().unwrap();
        prop_assert_eq!(flat(value_ref(&back)), flat(value_ref(&v)));
        // Also through a whole file.
        let mut out = Vec::new();
        let mut w = FileWriter::start(&mut out, RDB_VERSION, true, true, &[("redis-ver", b"7.0.0".to_vec())]);
        w.select_db(&mut out, 3, 1, 1);
        w.key(&mut out, &KeyRecord { key: b"k", value: value_ref(&v), expire_ms: Some(1234), access: 0 });
        w.finish(&mut out);
        let mut got = Vec::new();
        let (info, used) = read_file(&out, &in_lim, |k| got.push(k)).unwrap();
        prop_assert_eq!(used, out.len());
        prop_assert_eq!(info.aux.len(), 1);
        prop_assert_eq!(got.len(), 1);
        prop_assert_eq!(got[0].db, 3);
        prop_assert_eq!(got[0].expire_ms, Some(1234));
        prop_assert_eq!(flat(value_ref(&got[0].value)), flat(value_ref(&v)));
    }

    #[test]
    fn random_payloads_never_panic(body in proptest::collection::vec(any::<u8>(), 0..200), t in 0u8..30) {
        // With a valid footer, so the decoder itself is exercised.
        let _ = restore_payload(&payload(t, &body), &Limits::default());
        let _ = restore_payload(&body, &Limits::default());
        // An LZF string whose compressed data is arbitrary.
        let mut lz = vec![0xC3];
        write_len(&mut lz, body.len() as u64);
        write_len(&mut lz, (t as u64 + 1) * 37);
        lz.extend_from_slice(&body);
        let _ = restore_payload(&payload(TYPE_STRING, &lz), &Limits::default());
        let mut f = b"REDIS0011".to_vec();
        f.extend_from_slice(&body);
        let _ = read_file(&f, &Limits::default(), |_| {});
    }

    #[test]
    fn mutated_payloads_never_panic(g in gen(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4)) {
        let v = build(&g, &Limits::default());
        let full = dump_payload(value_ref(&v));
        let mut body = full[1..full.len() - 10].to_vec();
        if body.is_empty() { return Ok(()); }
        for (i, x) in flips {
            let n = body.len();
            body[i % n] ^= x;
        }
        let _ = restore_payload(&payload(full[0], &body), &Limits::default());
        let _ = restore_payload(&payload(full[0], &body[..body.len() / 2]), &Limits::default());
    }
}

#[test]
fn truncated_files_are_refused() {
    let mut out = Vec::new();
    let mut w = FileWriter::start(&mut out, RDB_VERSION, true, true, &[]);
    w.select_db(&mut out, 0, 2, 0);
    w.key(
        &mut out,
        &KeyRecord {
            key: b"a",
            value: ValueRef::Int(5),
            expire_ms: None,
            access: 0,
        },
    );
    w.key(
        &mut out,
        &KeyRecord {
            key: b"b",
            value: ValueRef::Emb(b"hello"),
            expire_ms: None,
            access: 0,
        },
    );
    w.finish(&mut out);
    for cut in 0..out.len() {
        let mut n = 0;
        assert!(read_file(&out[..cut], &Limits::default(), |_| n += 1).is_err());
        assert_eq!(n, 0, "no key handed over from a truncated file");
    }
    let mut bad = out.clone();
    bad[12] ^= 0x20;
    let mut n = 0;
    assert!(read_file(&bad, &Limits::default(), |_| n += 1).is_err());
    assert_eq!(n, 0);
}

#[test]
fn type_21_carries_consumer_active_time() {
    let mut s = Stream::new();
    s.append(StreamId::new(1, 1), &[b"a", b"b"], 4096, 100);
    let mut g = Group::new(StreamId::new(1, 1), 1);
    g.consumer(b"c", 1000);
    s.groups.insert(b"g".to_vec(), g);
    let mut body = stream_body(&s);
    // The consumer is last: `seen (8 bytes) | PEL count 0`; type 21 puts the active
    // time between them.
    let at = body.len() - 1;
    body.splice(at..at, 777i64.to_le_bytes());
    let v = restore_payload(&payload(TYPE_STREAM_LISTPACKS_3, &body), &Limits::default())
        .unwrap()
        .unwrap();
    let Value::Obj(o) = &v else { panic!() };
    let Object::Stream(st) = o else { panic!() };
    let c = &st.groups[b"g".as_slice()].consumers[b"c".as_slice()];
    assert_eq!((c.seen_time, c.active_time), (1000, 777));
    // Type 19 (what we write) sets the active time to the seen time.
    let v = restore_payload(
        &payload(TYPE_STREAM_LISTPACKS_2, &stream_body(&s)),
        &Limits::default(),
    )
    .unwrap()
    .unwrap();
    let Value::Obj(o) = &v else { panic!() };
    let Object::Stream(st) = o else { panic!() };
    assert_eq!(
        st.groups[b"g".as_slice()].consumers[b"c".as_slice()].active_time,
        1000
    );
}

// ----- payloads built a slice at a time (MIGRATE of big keys) ---------------------------

/// Runs a sliced encoding of `v` to its end in steps of `budget` elements.
fn sliced_payload(v: ValueRef<'_>, budget: usize) -> Option<Vec<u8>> {
    let mut d = sliced::SlicedDump::begin(v, 1)?;
    loop {
        match d.step(v, budget) {
            sliced::Step::More => {}
            sliced::Step::Done => return Some(d.finish().concat()),
            sliced::Step::Changed => panic!("the value did not change"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sliced_payloads_restore_to_the_value(g in gen(), small in any::<bool>(), budget in 1usize..40) {
        let lim = if small { small_limits() } else { Limits::default() };
        let v = build(&g, &lim);
        let Some(p) = sliced_payload(value_ref(&v), budget) else {
            // Not sliceable (strings, streams, compact encodings): encoded whole.
            return Ok(());
        };
        let back = restore_payload(&p, &Limits::default()).unwrap().unwrap();
        prop_assert_eq!(flat(value_ref(&back)), flat(value_ref(&v)));
        // Lists and sorted sets are walked in the whole encoding's order: same bytes.
        if matches!(g, Gen::List(_) | Gen::ZSet(_)) {
            prop_assert_eq!(p, dump_payload(value_ref(&v)));
        }
    }
}

#[test]
fn big_collections_are_sliced_and_small_ones_are_not() {
    let lim = Limits::default();
    let items: Vec<Vec<u8>> = (0..5000)
        .map(|i| format!("member:{i}").into_bytes())
        .collect();
    let big = [
        build(&Gen::Set(items.clone()), &lim),
        build(&Gen::List(items.clone()), &lim),
        build(
            &Gen::ZSet(items.iter().map(|m| (m.clone(), m.len() as f64)).collect()),
            &lim,
        ),
        build(
            &Gen::Hash(items.iter().map(|m| (m.clone(), m.clone())).collect()),
            &lim,
        ),
    ];
    for v in &big {
        let mut d = sliced::SlicedDump::begin(value_ref(v), sliced::MIN_ELEMENTS).unwrap();
        let mut steps = 0;
        while d.step(value_ref(v), 100) == sliced::Step::More {
            steps += 1;
        }
        assert!(steps >= 5, "{steps} steps");
        let back = restore_payload(&d.finish().concat(), &lim)
            .unwrap()
            .unwrap();
        assert_eq!(flat(value_ref(&back)), flat(value_ref(v)));
    }
    let small = build(&Gen::Hash(vec![(b"f".to_vec(), b"v".to_vec())]), &lim);
    assert!(sliced::SlicedDump::begin(value_ref(&small), sliced::MIN_ELEMENTS).is_none());
    assert!(sliced::SlicedDump::begin(ValueRef::Emb(b"x"), 1).is_none());
}

#[test]
fn a_sliced_encoding_notices_another_value() {
    let lim = Limits::default();
    let items: Vec<(Vec<u8>, Vec<u8>)> = (0..300)
        .map(|i| (format!("f{i}").into_bytes(), b"v".to_vec()))
        .collect();
    let mut v = build(&Gen::Hash(items.clone()), &lim);
    let mut d = sliced::SlicedDump::begin(value_ref(&v), 1).unwrap();
    assert_eq!(d.step(value_ref(&v), 10), sliced::Step::More);
    // A field goes (as a field TTL would take it): the length differs.
    if let Value::Obj(Object::Hash(h)) = &mut v {
        h.remove(b"f0");
    }
    assert_eq!(d.step(value_ref(&v), 10), sliced::Step::Changed);
    // Another object with the same contents.
    let w = build(&Gen::Hash(items), &lim);
    let mut d = sliced::SlicedDump::begin(value_ref(&w), 1).unwrap();
    let other = build(
        &Gen::Hash(
            (0..300)
                .map(|i| (format!("f{i}").into_bytes(), b"v".to_vec()))
                .collect(),
        ),
        &lim,
    );
    assert_eq!(d.step(value_ref(&other), 10), sliced::Step::Changed);
}
