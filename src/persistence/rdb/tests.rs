//! Unit and property tests of the RDB codec: Redis's own DUMP payloads decode to the
//! expected contents, every value round-trips, and arbitrary bytes never panic.

use proptest::prelude::*;

use super::*;
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
}

fn flat(v: ValueRef<'_>) -> Flat {
    match v {
        ValueRef::Obj(Object::List(l)) => Flat::List(l.to_vecs()),
        ValueRef::Obj(Object::Set(s)) => {
            let mut m = s.members();
            m.sort();
            Flat::Set(m)
        }
        ValueRef::Obj(Object::ZSet(z)) => {
            let mut v = Vec::new();
            // A listpack stores -0 as 0 (as Redis does), so an encoding change on the
            // way back may turn one into the other: compare them as equal.
            z.for_each(|m, s| v.push((m.to_vec(), if s == 0.0 { 0 } else { s.to_bits() })));
            Flat::ZSet(v)
        }
        ValueRef::Obj(Object::Hash(h)) => {
            let mut v = Vec::new();
            h.for_each(|f, x| v.push((f.to_vec(), x.to_vec(), h.expire_of(f))));
            v.sort();
            Flat::Hash(v)
        }
        other => Flat::Str(other.string_bytes().unwrap().into_owned()),
    }
}

fn value_ref(v: &Value) -> ValueRef<'_> {
    match v {
        Value::Int(n) => ValueRef::Int(*n),
        Value::Str(s) => ValueRef::Emb(s),
        Value::RawStr(s) => ValueRef::Raw(s),
        Value::Obj(o) => ValueRef::Obj(o),
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

#[test]
fn streams_are_refused_clearly() {
    let mut p = vec![TYPE_STREAM_LISTPACKS_3, 0];
    p.extend_from_slice(&10u16.to_le_bytes());
    let c = crc64(&p);
    p.extend_from_slice(&c.to_le_bytes());
    match restore_payload(&p, &Limits::default()) {
        Err(Error::Unsupported(m)) => assert!(m.contains("stream")),
        other => panic!("{other:?}"),
    }
}

// ----- hand-built ziplist / zipmap / intset blobs ------------------------------------

fn ziplist(entries: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut prev = 0usize;
    for e in entries {
        let start = body.len();
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
    out.extend_from_slice(&0u32.to_le_bytes());
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
    let o = Object::Hash(h);
    let p = dump_payload(ValueRef::Obj(&o));
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
    ]
}

fn build(g: &Gen, lim: &Limits) -> Value {
    match g {
        Gen::Str(s) => Value::from_string(s.clone()),
        Gen::List(items) => {
            let mut l = List::new();
            for i in items {
                l.push(End::Tail, &[i], lim.list_fill);
            }
            Value::Obj(Box::new(Object::List(l)))
        }
        Gen::Set(items) => {
            let mut s = Set::create(&items[0], items.len(), lim.set);
            for i in items {
                s.add(i, lim.set);
            }
            Value::Obj(Box::new(Object::Set(s)))
        }
        Gen::ZSet(items) => {
            let mut z = ZSet::with_hint(items.len(), 0, lim.zset);
            for (m, s) in items {
                z.add(m, *s, AddFlags::default(), lim.zset);
            }
            Value::Obj(Box::new(Object::ZSet(z)))
        }
        Gen::Hash(items) => {
            let mut h = Hash::new();
            for (f, v) in items {
                h.set(f, v, lim.hash);
            }
            Value::Obj(Box::new(Object::Hash(h)))
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
        list_fill: 3,
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
        w.key(&mut out, &KeyRecord { key: b"k", value: value_ref(&v), expire_ms: Some(1234) });
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
        },
    );
    w.key(
        &mut out,
        &KeyRecord {
            key: b"b",
            value: ValueRef::Emb(b"hello"),
            expire_ms: None,
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
