//! HyperLogLog end to end: PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST with exact replies
//! in RESP2 and RESP3; byte-for-byte agreement with redis-server on the stored values
//! (sparse, dense, after PFMERGE, across `hll-sparse-max-bytes`); values moved from
//! Redis by GET/SET; and random bytes never crashing the server.

mod common;
use common::*;

const NOT_HLL: &str = "-WRONGTYPE Key is not a valid HyperLogLog string value.\r\n";
const CORRUPT: &str = "-INVALIDOBJ Corrupted HLL object detected\r\n";

#[test]
fn commands_and_errors() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["PFADD", "h", "a", "b", "c"], ":1\r\n", ":1\r\n"),
            (&["PFADD", "h", "a"], ":0\r\n", ":0\r\n"),
            (&["PFCOUNT", "h"], ":3\r\n", ":3\r\n"),
            (&["PFADD", "e"], ":1\r\n", ":1\r\n"),
            (&["PFADD", "e"], ":0\r\n", ":0\r\n"),
            (&["PFCOUNT", "e"], ":0\r\n", ":0\r\n"),
            (&["PFCOUNT", "missing"], ":0\r\n", ":0\r\n"),
            (&["PFCOUNT", "h", "missing"], ":3\r\n", ":3\r\n"),
            (&["PFADD", "h2", "c", "d"], ":1\r\n", ":1\r\n"),
            (&["PFCOUNT", "h", "h2"], ":4\r\n", ":4\r\n"),
            (
                &["PFMERGE", "m", "h", "h2", "missing"],
                "+OK\r\n",
                "+OK\r\n",
            ),
            (&["PFCOUNT", "m"], ":4\r\n", ":4\r\n"),
            (&["PFMERGE", "m2"], "+OK\r\n", "+OK\r\n"),
            (&["PFCOUNT", "m2"], ":0\r\n", ":0\r\n"),
            (&["PFDEBUG", "ENCODING", "h"], "+sparse\r\n", "+sparse\r\n"),
            (
                &["PFDEBUG", "DECODE", "h"],
                "$44\r\nZ:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603\r\n",
                "$44\r\nZ:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603\r\n",
            ),
            (&["PFDEBUG", "TODENSE", "h"], ":1\r\n", ":1\r\n"),
            (&["PFDEBUG", "TODENSE", "h"], ":0\r\n", ":0\r\n"),
            (&["PFDEBUG", "ENCODING", "h"], "+dense\r\n", "+dense\r\n"),
            (&["STRLEN", "h"], ":12304\r\n", ":12304\r\n"),
            (
                &["PFDEBUG", "DECODE", "h"],
                "-ERR HLL encoding is not sparse\r\n",
                "-ERR HLL encoding is not sparse\r\n",
            ),
            (&["PFCOUNT", "h"], ":3\r\n", ":3\r\n"),
            (&["PFMERGE", "m3", "h", "h2"], "+OK\r\n", "+OK\r\n"),
            (&["PFDEBUG", "ENCODING", "m3"], "+dense\r\n", "+dense\r\n"),
            (&["PFCOUNT", "m3"], ":4\r\n", ":4\r\n"),
            (
                &["PFDEBUG", "GETREG", "missing"],
                "-ERR The specified key does not exist\r\n",
                "-ERR The specified key does not exist\r\n",
            ),
            (
                &["PFDEBUG", "foo", "h"],
                "-ERR Unknown PFDEBUG subcommand 'foo'\r\n",
                "-ERR Unknown PFDEBUG subcommand 'foo'\r\n",
            ),
            (
                &["PFDEBUG", "ENCODING"],
                "-ERR wrong number of arguments for 'pfdebug' command\r\n",
                "-ERR wrong number of arguments for 'pfdebug' command\r\n",
            ),
            (&["SET", "n", "123"], "+OK\r\n", "+OK\r\n"),
            (&["PFADD", "n", "a"], NOT_HLL, NOT_HLL),
            (&["PFCOUNT", "n"], NOT_HLL, NOT_HLL),
            (&["PFCOUNT", "h", "n"], NOT_HLL, NOT_HLL),
            (&["PFMERGE", "n", "h"], NOT_HLL, NOT_HLL),
            (&["PFMERGE", "h", "n"], NOT_HLL, NOT_HLL),
            (&["PFDEBUG", "ENCODING", "n"], NOT_HLL, NOT_HLL),
            (&["SET", "s", "HYLL"], "+OK\r\n", "+OK\r\n"),
            (&["PFCOUNT", "s"], NOT_HLL, NOT_HLL),
            (&["PFSELFTEST"], "+OK\r\n", "+OK\r\n"),
            (
                &["PFSELFTEST", "x"],
                "-ERR wrong number of arguments for 'pfselftest' command\r\n",
                "-ERR wrong number of arguments for 'pfselftest' command\r\n",
            ),
        ],
    );
}

#[test]
fn getreg_and_cache() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: i64 = redis::cmd("PFADD").arg("h").arg("a").query(&mut c).unwrap();
    let regs: Vec<i64> = redis::cmd("PFDEBUG")
        .arg("GETREG")
        .arg("h")
        .query(&mut c)
        .unwrap();
    assert_eq!(regs.len(), 16384);
    assert_eq!(regs.iter().filter(|&&r| r != 0).count(), 1);
    assert_eq!(regs[12711], 2);
    // GETREG converted the value to dense.
    let enc: String = redis::cmd("PFDEBUG")
        .arg("ENCODING")
        .arg("h")
        .query(&mut c)
        .unwrap();
    assert_eq!(enc, "dense");
    // PFCOUNT refreshes the cache bytes in the header; PFADD invalidates them.
    let v: Vec<u8> = redis::cmd("GET").arg("h").query(&mut c).unwrap();
    assert_eq!(v[15] & 0x80, 0x80);
    let n: i64 = redis::cmd("PFCOUNT").arg("h").query(&mut c).unwrap();
    assert_eq!(n, 1);
    let v: Vec<u8> = redis::cmd("GET").arg("h").query(&mut c).unwrap();
    assert_eq!(&v[8..16], &[1, 0, 0, 0, 0, 0, 0, 0]);
    // A (bogus) cached value is trusted while the cache is valid, as in Redis.
    let mut forged = v.clone();
    forged[8] = 42;
    let _: () = redis::cmd("SET")
        .arg("f")
        .arg(&forged)
        .query(&mut c)
        .unwrap();
    let n: i64 = redis::cmd("PFCOUNT").arg("f").query(&mut c).unwrap();
    assert_eq!(n, 42);
}

#[test]
fn corrupt_values() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut bad = b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80".to_vec();
    bad.push(0x7f); // A truncated XZERO: too few registers.
    let _: () = redis::cmd("SET")
        .arg("bad")
        .arg(&bad)
        .query(&mut c)
        .unwrap();
    let mut raw = s.raw(2);
    raw.check(&[
        (&["PFCOUNT", "bad"], CORRUPT),
        (&["PFCOUNT", "bad", "other"], CORRUPT),
        (&["PFMERGE", "dest", "bad"], CORRUPT),
        (&["EXISTS", "dest"], ":0\r\n"),
        (&["PFDEBUG", "TODENSE", "bad"], CORRUPT),
        (&["PFDEBUG", "DECODE", "bad"], "$7\r\nZ:16129\r\n"),
    ]);
    // A dense value must be exactly 12304 bytes.
    let mut short = vec![0u8; 100];
    short[..5].copy_from_slice(b"HYLL\x00");
    let _: () = redis::cmd("SET")
        .arg("short")
        .arg(&short)
        .query(&mut c)
        .unwrap();
    raw.check(&[(&["PFADD", "short", "x"], NOT_HLL)]);
}

#[test]
fn sparse_limit_is_configurable() {
    let s = TestServer::start_with(&["--hll-sparse-max-bytes", "100"]);
    let mut c = s.raw(2);
    c.check(&[(
        &["CONFIG", "GET", "hll-sparse-max-bytes"],
        "*2\r\n$20\r\nhll-sparse-max-bytes\r\n$3\r\n100\r\n",
    )]);
    let mut n = 0;
    loop {
        n += 1;
        c.cmd(&["PFADD", "h", &n.to_string()]);
        if c.cmd(&["PFDEBUG", "ENCODING", "h"]) == "+dense\r\n" {
            break;
        }
        assert!(n < 100, "never promoted");
    }
    let len: usize = c.cmd(&["STRLEN", "h"])[1..].trim().parse().unwrap();
    assert_eq!(len, 12304);
    c.check(&[(
        &["CONFIG", "SET", "hll-sparse-max-bytes", "3000"],
        "+OK\r\n",
    )]);
}

/// Random bytes stored under a key never crash any HLL command.
#[test]
fn random_bytes_never_crash() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut rng = fastrand::Rng::with_seed(42);
    for i in 0..400 {
        let len = match rng.u32(0..4) {
            0 => rng.usize(0..20),
            1 => 16 + rng.usize(0..40),
            2 => 16 + rng.usize(0..3000),
            _ => 12304,
        };
        let mut v: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
        if len >= 16 && rng.u32(0..8) != 0 {
            v[..4].copy_from_slice(b"HYLL");
            v[4] = rng.u8(0..2);
        }
        let _: () = redis::cmd("SET").arg("k").arg(&v).query(&mut c).unwrap();
        let cmds: [&[&str]; 6] = [
            &["PFCOUNT", "k"],
            &["PFCOUNT", "k", "k2"],
            &["PFMERGE", "k2", "k"],
            &["PFADD", "k", "a", "b", "c"],
            &["PFDEBUG", "DECODE", "k"],
            &["PFDEBUG", "GETREG", "k"],
        ];
        for cmd in cmds {
            let mut q = redis::cmd(cmd[0]);
            for a in &cmd[1..] {
                q.arg(*a);
            }
            let _ = q.query::<redis::Value>(&mut c);
        }
        if i % 50 == 0 {
            let _: () = redis::cmd("DEL").arg("k2").query(&mut c).unwrap();
        }
    }
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}

// ----- differential ---------------------------------------------------------------

fn redis_client(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap()
}

/// Sends one command and renders its reply (or error) for comparison.
fn run(c: &mut redis::Connection, args: &[Vec<u8>]) -> String {
    let mut q = redis::cmd(std::str::from_utf8(&args[0]).unwrap());
    for a in &args[1..] {
        q.arg(a.as_slice());
    }
    match q.query::<redis::Value>(c) {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("error: {e}"),
    }
}

fn both(ours: &mut redis::Connection, theirs: &mut redis::Connection, args: &[Vec<u8>]) {
    let a = run(ours, args);
    let b = run(theirs, args);
    assert_eq!(
        a,
        b,
        "reply differs for {:?}",
        args.iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect::<Vec<_>>()
    );
}

fn cmd(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

#[test]
fn differential_streams_match_redis_bytes() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    let mut ours = s.client();
    let mut theirs = redis_client(r.port);
    let mut rng = fastrand::Rng::with_seed(0x1157);
    for round in 0..3 {
        both(&mut ours, &mut theirs, &cmd(&["FLUSHALL"]));
        let limit = ["3000", "300", "1000"][round];
        both(
            &mut ours,
            &mut theirs,
            &cmd(&["CONFIG", "SET", "hll-sparse-max-bytes", limit]),
        );
        for step in 0..120 {
            let key = format!("h{}", rng.u32(0..3));
            let n = if rng.u32(0..10) == 0 {
                200
            } else {
                rng.usize(0..12)
            };
            let mut args = cmd(&["PFADD", &key]);
            for _ in 0..n {
                let len = rng.usize(0..12);
                args.push((0..len).map(|_| rng.u8(b'a'..=b'z')).collect());
            }
            both(&mut ours, &mut theirs, &args);
            match step % 6 {
                0 => both(&mut ours, &mut theirs, &cmd(&["PFCOUNT", &key])),
                1 => both(&mut ours, &mut theirs, &cmd(&["PFCOUNT", "h0", "h1", "h2"])),
                2 => both(
                    &mut ours,
                    &mut theirs,
                    &cmd(&["PFMERGE", &format!("m{}", rng.u32(0..2)), "h0", &key]),
                ),
                3 => both(&mut ours, &mut theirs, &cmd(&["PFDEBUG", "ENCODING", &key])),
                _ => {}
            }
            // The stored bytes, header and cache included, are Redis's.
            for k in [key.as_str(), "m0", "m1"] {
                both(&mut ours, &mut theirs, &cmd(&["GET", k]));
            }
        }
        for k in ["h0", "h1", "h2", "m0", "m1"] {
            both(&mut ours, &mut theirs, &cmd(&["PFCOUNT", k]));
            both(&mut ours, &mut theirs, &cmd(&["GET", k]));
        }
    }
    both(
        &mut ours,
        &mut theirs,
        &cmd(&["CONFIG", "SET", "hll-sparse-max-bytes", "3000"]),
    );
}

#[test]
fn differential_large_counts() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    let mut ours = s.client();
    let mut theirs = redis_client(r.port);
    both(&mut ours, &mut theirs, &cmd(&["FLUSHALL"]));
    let mut next = 0u64;
    for target in [10u64, 100, 1000, 5000, 20000, 100000] {
        while next < target {
            let mut args = cmd(&["PFADD", "big"]);
            for _ in 0..1000.min(target - next) {
                args.push(format!("element:{next}").into_bytes());
                next += 1;
            }
            both(&mut ours, &mut theirs, &args);
        }
        both(&mut ours, &mut theirs, &cmd(&["PFCOUNT", "big"]));
        both(&mut ours, &mut theirs, &cmd(&["GET", "big"]));
    }
}

/// HLL values written by Redis work here: SET Redis's GET bytes, then count, add and
/// merge on both and compare.
#[test]
fn values_from_redis_work_here() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    let mut ours = s.client();
    let mut theirs = redis_client(r.port);
    both(&mut ours, &mut theirs, &cmd(&["FLUSHALL"]));
    for (key, n) in [("small", 50usize), ("dense", 4000)] {
        let mut args = cmd(&["PFADD", key]);
        args.extend((0..n).map(|i| format!("{key}-{i}").into_bytes()));
        run(&mut theirs, &args);
        let bytes: Vec<u8> = redis::cmd("GET").arg(key).query(&mut theirs).unwrap();
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg(&bytes)
            .query(&mut ours)
            .unwrap();
        both(&mut ours, &mut theirs, &cmd(&["PFCOUNT", key]));
        both(&mut ours, &mut theirs, &cmd(&["GET", key]));
        both(&mut ours, &mut theirs, &cmd(&["PFADD", key, "x", "y", "z"]));
        both(&mut ours, &mut theirs, &cmd(&["GET", key]));
    }
    both(
        &mut ours,
        &mut theirs,
        &cmd(&["PFMERGE", "u", "small", "dense"]),
    );
    both(&mut ours, &mut theirs, &cmd(&["GET", "u"]));
    both(&mut ours, &mut theirs, &cmd(&["PFCOUNT", "small", "dense"]));
}

/// Corrupt sparse bodies behind a valid header: counting and merging give Redis's
/// replies (including INVALIDOBJ), and merged results have Redis's bytes.
#[test]
fn differential_corrupt_sparse() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    let mut ours = s.client();
    let mut theirs = redis_client(r.port);
    let mut rng = fastrand::Rng::with_seed(99);
    for _ in 0..150 {
        both(&mut ours, &mut theirs, &cmd(&["FLUSHALL"]));
        let mut v = b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80".to_vec();
        // Mostly well-formed opcodes covering about 16384 registers, with noise.
        let mut covered = 0usize;
        while covered < 16384 + rng.usize(0..3) {
            match rng.u32(0..4) {
                0 => {
                    let n = rng.usize(1..=64);
                    v.push((n - 1) as u8);
                    covered += n;
                }
                1 => {
                    let n = rng.usize(1..=4000);
                    v.push(0x40 | ((n - 1) >> 8) as u8);
                    v.push(((n - 1) & 0xff) as u8);
                    covered += n;
                }
                2 => {
                    let n = rng.usize(1..=4);
                    v.push(0x80 | (rng.u8(0..32) << 2) | (n - 1) as u8);
                    covered += n;
                }
                _ => {
                    v.push(rng.u8(..));
                    covered += 1;
                }
            }
            if v.len() > 400 {
                break;
            }
        }
        if rng.bool() {
            v.pop();
        }
        both(
            &mut ours,
            &mut theirs,
            &[b"SET".to_vec(), b"k".to_vec(), v.clone()],
        );
        both(&mut ours, &mut theirs, &cmd(&["PFDEBUG", "DECODE", "k"]));
        both(&mut ours, &mut theirs, &cmd(&["PFCOUNT", "k", "missing"]));
        both(&mut ours, &mut theirs, &cmd(&["PFMERGE", "m", "k"]));
        both(&mut ours, &mut theirs, &cmd(&["GET", "m"]));
        both(&mut ours, &mut theirs, &cmd(&["PFCOUNT", "k"]));
        both(&mut ours, &mut theirs, &cmd(&["GET", "k"]));
    }
}
