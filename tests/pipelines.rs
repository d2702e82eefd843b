//! Pipelines: the commands a client sends in one go are parsed ahead in batches whose
//! keys are prefetched together; each command must still run as if parsed alone, in
//! order, under the limits and state its predecessors left. The servers here prefetch
//! into every table (`prefetch-min-keys 0`), however small, so that the prefetch runs.

mod common;
use common::*;
use std::io::{Read, Write};

fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A server that prefetches into tables of any size, with `args` besides.
fn server(args: &[&str]) -> TestServer {
    let mut all = vec!["--prefetch-min-keys", "0"];
    all.extend_from_slice(args);
    TestServer::start_with(&all)
}

fn read_replies(c: &mut RawConn, n: usize) -> String {
    (0..n).map(|_| c.read_reply()).collect()
}

/// A long pipeline of mixed commands (several batches, a SELECT, an inline command, an
/// empty multibulk and a command without a key in the middle) gets the same replies
/// whether sent at once or trickled a few bytes at a time.
#[test]
fn a_pipeline_runs_in_order_however_it_arrives() {
    let s = server(&[]);
    let mut pipeline = Vec::new();
    for i in 0..60 {
        let key = format!("k{}", i % 7);
        pipeline.extend(command(&[b"INCR", key.as_bytes()]));
        if i == 20 {
            pipeline.extend(command(&[b"SELECT", b"1"]));
            pipeline.extend(b"PING\r\n");
            pipeline.extend(b"*0\r\n");
        }
        if i == 30 {
            // A command without a key inside a batch: the keys after it are
            // prefetched in their places all the same.
            pipeline.extend(command(&[b"PING"]));
        }
        if i == 40 {
            pipeline.extend(command(&[b"SELECT", b"0"]));
        }
    }
    pipeline.extend(command(&[b"MGET", b"k0", b"k1"]));
    let replies = 60 + 5;
    for chunk in [pipeline.len(), 7] {
        let mut c = s.raw(2);
        assert_eq!(c.cmd(&["FLUSHALL"]), "+OK\r\n");
        for piece in pipeline.chunks(chunk) {
            c.stream.write_all(piece).unwrap();
        }
        // Keys k0 and k1 were incremented in db 0 before the first SELECT, in db 1
        // after it, and in db 0 again after the second.
        let (k0, k1) = (
            (0..=20).filter(|i| i % 7 == 0).count() + (41..60).filter(|i| i % 7 == 0).count(),
            (0..=20).filter(|i| i % 7 == 1).count() + (41..60).filter(|i| i % 7 == 1).count(),
        );
        let mut expect = String::new();
        // Replies of INCR count per database.
        let mut counts = [[0usize; 7]; 2];
        let mut db = 0;
        for i in 0..60 {
            counts[db][i % 7] += 1;
            expect += &format!(":{}\r\n", counts[db][i % 7]);
            if i == 20 {
                db = 1;
                expect += "+OK\r\n+PONG\r\n";
            }
            if i == 30 {
                expect += "+PONG\r\n";
            }
            if i == 40 {
                db = 0;
                expect += "+OK\r\n";
            }
        }
        expect += &format!(
            "*2\r\n${}\r\n{k0}\r\n${}\r\n{k1}\r\n",
            k0.to_string().len(),
            k1.to_string().len()
        );
        assert_eq!(read_replies(&mut c, replies), expect, "chunks of {chunk}");
    }
}

/// RESET in the middle of a batch makes the client unauthenticated again: the
/// command after it is parsed under the unauthenticated limits (more than 10
/// arguments is a protocol error), as if nothing had been parsed ahead.
#[test]
fn reset_mid_pipeline_brings_back_the_unauthenticated_limits() {
    let s = server(&["--requirepass", "pw"]);
    let eleven: Vec<&[u8]> = std::iter::once(b"MSET".as_slice())
        .chain([b"a".as_slice(), b"1"].into_iter().cycle().take(10))
        .collect();
    let mut c = s.raw(2);
    let mut pipeline = command(&[b"AUTH", b"pw"]);
    pipeline.extend(command(&eleven));
    pipeline.extend(command(&[b"PING"]));
    pipeline.extend(command(&[b"RESET"]));
    pipeline.extend(command(&eleven));
    pipeline.extend(command(&[b"PING"]));
    c.stream.write_all(&pipeline).unwrap();
    // The protocol error closes the connection.
    let mut got = String::new();
    c.stream.read_to_string(&mut got).unwrap();
    assert_eq!(
        got,
        "+OK\r\n+OK\r\n+PONG\r\n+RESET\r\n-ERR Protocol error: unauthenticated multibulk length\r\n"
    );
}

/// A command that blocks in the middle of a batch holds the rest of the pipeline
/// until it is served; QUIT in the middle of one ends it there.
#[test]
fn blocking_and_quit_stop_a_batch_where_they_are() {
    let s = server(&[]);
    let mut c = s.raw(2);
    let mut pipeline = command(&[b"SET", b"a", b"1"]);
    pipeline.extend(command(&[b"BLPOP", b"q", b"0"]));
    pipeline.extend(command(&[b"GET", b"a"]));
    pipeline.extend(command(&[b"INCR", b"a"]));
    c.stream.write_all(&pipeline).unwrap();
    assert_eq!(c.read_reply(), "+OK\r\n");
    let mut other = s.raw(2);
    // The pipeline waits: the key is still 1 for everyone else.
    assert_eq!(other.cmd(&["GET", "a"]), "$1\r\n1\r\n");
    assert_eq!(other.cmd(&["RPUSH", "q", "x"]), ":1\r\n");
    assert_eq!(
        read_replies(&mut c, 3),
        "*2\r\n$1\r\nq\r\n$1\r\nx\r\n$1\r\n1\r\n:2\r\n"
    );

    let mut q = s.raw(2);
    let mut pipeline = command(&[b"INCR", b"n"]);
    pipeline.extend(command(&[b"QUIT"]));
    pipeline.extend(command(&[b"INCR", b"n"]));
    q.stream.write_all(&pipeline).unwrap();
    let mut all = String::new();
    q.stream.read_to_string(&mut all).unwrap();
    assert_eq!(all, ":1\r\n+OK\r\n");
    assert_eq!(other.cmd(&["GET", "n"]), "$1\r\n1\r\n");
}

/// MULTI/EXEC inside a pipeline, and a transaction spanning batches.
#[test]
fn transactions_inside_a_pipeline() {
    let s = server(&[]);
    let mut c = s.raw(2);
    let mut pipeline = command(&[b"MULTI"]);
    let mut want = String::from("+OK\r\n");
    for _ in 0..40 {
        pipeline.extend(command(&[b"INCR", b"t"]));
        want += "+QUEUED\r\n";
    }
    pipeline.extend(command(&[b"EXEC"]));
    want += "*40\r\n";
    for i in 1..=40 {
        want += &format!(":{i}\r\n");
    }
    pipeline.extend(command(&[b"GET", b"t"]));
    want += "$2\r\n40\r\n";
    c.stream.write_all(&pipeline).unwrap();
    assert_eq!(read_replies(&mut c, 43), want);
}

/// Set and hash member commands in a batch have their member's bucket prefetched in the
/// collection's hash table: big collections (as they grow through a resize), small
/// ones in listpack or intset form, a string key and an absent one, each command
/// still answers exactly.
#[test]
fn member_commands_in_a_batch_answer_exactly() {
    member_commands_answer_exactly_with(&[]);
    // A key table too small to prefetch into: a member command's collection is found
    // by a lookup, and prefetched into once it holds 100 members.
    member_commands_answer_exactly_with(&["--prefetch-min-keys", "100"]);
}

fn member_commands_answer_exactly_with(args: &[&str]) {
    let s = server(args);
    let mut c = s.raw(2);
    c.check(&[
        (&["SET", "str", "x"], "+OK\r\n"),
        (&["SADD", "ints", "1", "2"], ":2\r\n"),
    ]);
    let mut want = String::new();
    let mut pipeline = Vec::new();
    for i in 0..600 {
        let m = format!("member:{i}");
        let v = format!("value:{i}");
        for (args, reply) in [
            (vec!["SADD", "big", &m], ":1\r\n".to_string()),
            (vec!["SISMEMBER", "big", &m], ":1\r\n".into()),
            (
                vec!["SMISMEMBER", "big", &m, "nope"],
                "*2\r\n:1\r\n:0\r\n".into(),
            ),
            (vec!["HSET", "hbig", &m, &v], ":1\r\n".into()),
            (vec!["HGET", "hbig", &m], format!("${}\r\n{v}\r\n", v.len())),
            (vec!["HEXISTS", "hbig", "nope"], ":0\r\n".into()),
            (
                vec!["SADD", "ints", "3"],
                if i == 0 { ":1\r\n" } else { ":0\r\n" }.into(),
            ),
            (
                vec!["SADD", "str", &m],
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n".into(),
            ),
            (vec!["HGET", "absent", &m], "$-1\r\n".into()),
        ] {
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            pipeline.extend(command(&args));
            want.push_str(&reply);
        }
        if i % 50 == 49 {
            let half = format!("member:{}", i / 2);
            pipeline.extend(command(&[b"SREM", b"big", half.as_bytes()]));
            want.push_str(":1\r\n");
            pipeline.extend(command(&[b"HDEL", b"hbig", half.as_bytes()]));
            want.push_str(":1\r\n");
        }
    }
    c.stream.write_all(&pipeline).unwrap();
    let n = want.matches("\r\n").count();
    let mut got = String::new();
    while got.matches("\r\n").count() < n {
        got.push_str(&c.read_reply());
    }
    assert_eq!(got, want);
    c.check(&[
        (&["SCARD", "big"], ":588\r\n"),
        (&["HLEN", "hbig"], ":588\r\n"),
        (&["OBJECT", "ENCODING", "big"], "$9\r\nhashtable\r\n"),
        (&["OBJECT", "ENCODING", "hbig"], "$9\r\nhashtable\r\n"),
    ]);
}

/// `prefetch-min-keys`: -1 (the default) sizes the threshold from the L2 cache; any
/// count from 0 is taken as it is.
#[test]
fn prefetch_min_keys_is_a_directive() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.check(&[
        (
            &["CONFIG", "GET", "prefetch-min-keys"],
            "*2\r\n$17\r\nprefetch-min-keys\r\n$2\r\n-1\r\n",
        ),
        (&["CONFIG", "SET", "prefetch-min-keys", "5000"], "+OK\r\n"),
        (
            &["CONFIG", "GET", "prefetch-min-keys"],
            "*2\r\n$17\r\nprefetch-min-keys\r\n$4\r\n5000\r\n",
        ),
        (
            &["CONFIG", "SET", "prefetch-min-keys", "-2"],
            "-ERR CONFIG SET failed (possibly related to argument 'prefetch-min-keys') - argument must be between -1 and 9223372036854775807 inclusive\r\n",
        ),
    ]);
}
