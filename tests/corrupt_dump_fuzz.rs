//! Property test: valid DUMP payloads of every type and encoding, damaged (bit
//! flips, random bytes, truncation, length fields set huge), are RESTOREd with the
//! checksum check off under each `sanitize-dump-payload` mode. Whatever RESTORE
//! answers, the server stays up and every command run on the key afterwards gets a
//! well-formed reply. The seed is fixed, so a failure reproduces.

mod common;

use common::*;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn populate(c: &mut RawConn) -> Vec<String> {
    let mut cmds: Vec<Vec<String>> = Vec::new();
    let mut add = |v: &[&str]| cmds.push(v.iter().map(|s| s.to_string()).collect());
    add(&["SET", "str", "hello"]);
    add(&["SET", "int", "12345"]);
    add(&["SET", "long", &"abcdefgh".repeat(20)]);
    for i in 0..5 {
        let v = if i % 2 == 0 {
            i.to_string()
        } else {
            format!("_{i}")
        };
        add(&["RPUSH", "list", &v]);
        add(&["HSET", "hash", &i.to_string(), &v]);
        add(&["HSET", "hashttl", &i.to_string(), &v]);
        add(&["ZADD", "zset", &i.to_string(), &v]);
        add(&["SADD", "set", &v]);
        add(&["SADD", "intset", &i.to_string()]);
        add(&["XADD", "stream", "*", "item", "1", "value", &v]);
    }
    add(&["HPEXPIRE", "hashttl", "100000000", "FIELDS", "2", "1", "3"]);
    for i in 0..300 {
        let v = format!("element-{i}-{}", "x".repeat(i % 40));
        add(&["RPUSH", "biglist", &v]);
        add(&["HSET", "bighash", &i.to_string(), &v]);
        add(&["ZADD", "bigzset", &i.to_string(), &v]);
        add(&["SADD", "bigset", &v]);
        add(&["SADD", "bigintset", &(i * 7).to_string()]);
        add(&[
            "XADD",
            "bigstream",
            "*",
            "item",
            &i.to_string(),
            "value",
            &v,
        ]);
    }
    add(&["XGROUP", "CREATE", "stream", "g", "0"]);
    add(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "alice",
        "COUNT",
        "2",
        "STREAMS",
        "stream",
        ">",
    ]);
    add(&["XGROUP", "CREATE", "bigstream", "g", "0"]);
    add(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "bob",
        "COUNT",
        "20",
        "STREAMS",
        "bigstream",
        ">",
    ]);
    add(&["PFADD", "hll", "a", "b", "c"]);
    add(&["CONFIG", "SET", "list-compress-depth", "1"]);
    add(&["RPUSH", "packedlist", &"y".repeat(9000), "a", "b"]);
    for i in 0..200 {
        add(&[
            "RPUSH",
            "compressed",
            &format!("compressible-{}", "z".repeat(60)),
            &i.to_string(),
        ]);
    }
    for cmd in &cmds {
        let args: Vec<&str> = cmd.iter().map(|s| s.as_str()).collect();
        let r = c.cmd(&args);
        assert!(!r.starts_with('-'), "{args:?}: {r}");
    }
    [
        "str",
        "int",
        "long",
        "list",
        "hash",
        "hashttl",
        "zset",
        "set",
        "intset",
        "stream",
        "biglist",
        "bighash",
        "bigzset",
        "bigset",
        "bigintset",
        "bigstream",
        "hll",
        "packedlist",
        "compressed",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn mutate(rng: &mut Rng, p: &[u8]) -> Vec<u8> {
    let mut p = p.to_vec();
    match rng.below(5) {
        0 => {
            let i = rng.below(p.len());
            p[i] ^= 1 << rng.below(8);
        }
        1 => {
            for _ in 0..1 + rng.below(2) {
                let i = rng.below(p.len());
                p[i] = rng.next() as u8;
            }
        }
        2 => {
            // Truncate the value, keeping a footer.
            let cut = rng.below(p.len() - 10);
            let mut q = p[..cut].to_vec();
            q.extend_from_slice(&p[p.len() - 10..]);
            p = q;
        }
        3 => {
            // A byte that looks like a length prefix becomes a huge 32/64-bit length.
            let i = rng.below(p.len() - 10);
            let huge: &[u8] = if rng.below(2) == 0 {
                &[0x80, 0x7F, 0xFF, 0xFF, 0xFF]
            } else {
                &[0x81, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
            };
            p.splice(i..i + 1, huge.iter().copied());
        }
        _ => {
            // A 16- or 32-bit little-endian field (blob headers) set huge.
            let i = rng.below(p.len() - 10);
            for b in p.iter_mut().skip(i).take(2 + 2 * rng.below(2)) {
                *b = 0xFF;
            }
        }
    }
    p
}

/// Commands that read or change every part of a value of the key's type.
fn traffic(c: &mut RawConn, dumper: &mut redis::Connection, key: &str) {
    let kind = c.cmd(&["TYPE", key]);
    let cmds: Vec<Vec<&str>> = match kind.as_str() {
        "+string\r\n" => vec![
            vec!["GET", key],
            vec!["STRLEN", key],
            vec!["APPEND", key, "x"],
            vec!["GETRANGE", key, "0", "-1"],
        ],
        "+list\r\n" => vec![
            vec!["LRANGE", key, "0", "-1"],
            vec!["LRANGE", key, "-3", "-1"],
            vec!["LINDEX", key, "-1"],
            vec!["LPOS", key, "a"],
            vec!["LINSERT", key, "BEFORE", "a", "b"],
            vec!["LREM", key, "0", "a"],
            vec!["RPOP", key],
            vec!["LPUSH", key, "n"],
            vec!["LSET", key, "0", "m"],
            vec!["LTRIM", key, "1", "-2"],
        ],
        "+hash\r\n" => vec![
            vec!["HGETALL", key],
            vec!["HLEN", key],
            vec!["HGET", key, "1"],
            vec!["HSET", key, "new", "v"],
            vec!["HDEL", key, "2"],
            vec!["HRANDFIELD", key, "-5", "WITHVALUES"],
            vec!["HSCAN", key, "0"],
            vec!["HTTL", key, "FIELDS", "2", "1", "3"],
            vec!["HPERSIST", key, "FIELDS", "1", "1"],
        ],
        "+set\r\n" => vec![
            vec!["SMEMBERS", key],
            vec!["SCARD", key],
            vec!["SISMEMBER", key, "1"],
            vec!["SADD", key, "new"],
            vec!["SREM", key, "2"],
            vec!["SRANDMEMBER", key, "-5"],
            vec!["SPOP", key],
            vec!["SDIFF", key, "set"],
            vec!["SINTERCARD", "2", key, "set"],
        ],
        "+zset\r\n" => vec![
            vec!["ZRANGE", key, "0", "-1", "WITHSCORES"],
            vec!["ZREVRANGE", key, "0", "3"],
            vec!["ZCARD", key],
            vec!["ZRANGEBYSCORE", key, "-inf", "+inf"],
            vec!["ZRANK", key, "_1"],
            vec!["ZADD", key, "7", "new"],
            vec!["ZREM", key, "2"],
            vec!["ZPOPMIN", key],
            vec!["ZRANDMEMBER", key, "-5"],
        ],
        "+stream\r\n" => vec![
            vec!["XRANGE", key, "-", "+"],
            vec!["XREVRANGE", key, "+", "-"],
            vec!["XLEN", key],
            vec!["XINFO", "STREAM", key, "FULL"],
            vec!["XINFO", "GROUPS", key],
            vec!["XPENDING", key, "g"],
            vec!["XPENDING", key, "g", "-", "+", "10"],
            vec!["XADD", key, "*", "a", "b"],
            vec!["XAUTOCLAIM", key, "g", "carol", "0", "0"],
            vec!["XTRIM", key, "MAXLEN", "3"],
            vec!["XREADGROUP", "GROUP", "g", "dave", "STREAMS", key, "0"],
        ],
        other => panic!("unexpected type reply {other:?}"),
    };
    for cmd in cmds {
        // A complete reply frame of any kind (the server answered and is alive).
        let _ = c.cmd(&cmd);
    }
    let _ = c.cmd(&["DEBUG", "DIGEST-VALUE", key]);
    let _ = c.cmd(&["OBJECT", "ENCODING", key]);
    let _ = c.cmd(&["MEMORY", "USAGE", key]);
    // Whatever survived must serialize and restore again.
    let d: Option<Vec<u8>> = redis::cmd("DUMP").arg(key).query(dumper).unwrap();
    if let Some(p) = d {
        c.send_bytes(&[b"RESTORE", b"again", b"0", &p, b"REPLACE"]);
        assert_eq!(
            c.read_reply(),
            "+OK\r\n",
            "a value that was accepted dumps and restores"
        );
    }
}

#[test]
fn damaged_payloads_never_hurt_the_server() {
    let s = TestServer::start_with(&[
        "--hash-max-listpack-entries",
        "64",
        "--list-max-listpack-size",
        "5",
    ]);
    let mut c = s.raw(2);
    let keys = populate(&mut c);
    let mut dumper = s.client();
    let mut dumps: Vec<Vec<u8>> = Vec::new();
    for k in &keys {
        dumps.push(redis::cmd("DUMP").arg(k).query(&mut dumper).unwrap());
    }
    assert_eq!(
        c.cmd(&["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1"]),
        "+OK\r\n"
    );
    let mut rng = Rng(0x5EED_C1AB_BA12_0001);
    let (mut accepted, mut refused) = (0, 0);
    for round in 0..1500 {
        let mode = ["no", "yes", "clients"][round % 3];
        if round % 50 == 0 {
            c.cmd(&["CONFIG", "SET", "sanitize-dump-payload", mode]);
        }
        let i = rng.below(dumps.len());
        let p = mutate(&mut rng, &dumps[i]);
        c.send_bytes(&[b"RESTORE", b"_fuzz", b"0", &p, b"REPLACE"]);
        let r = c.read_reply();
        match r.as_str() {
            "+OK\r\n" => {
                accepted += 1;
                traffic(&mut c, &mut dumper, "_fuzz");
            }
            "-ERR Bad data format\r\n" | "-ERR DUMP payload version or checksum are wrong\r\n" => {
                refused += 1;
            }
            other => panic!(
                "RESTORE of a damaged {} payload answered {other:?}",
                keys[i]
            ),
        }
        assert_eq!(c.cmd(&["PING"]), "+PONG\r\n", "round {round}");
    }
    assert!(
        accepted > 0 && refused > 0,
        "accepted {accepted}, refused {refused}"
    );
}
