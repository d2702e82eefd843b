//! `io-threads N`: reads and writes spread over threads, every reply exactly as with
//! one thread. Many clients pipelining at once (the threads engage with two or more
//! jobs per thread), big replies written in many slices, a reader too slow to take a
//! reply in one write, Pub/Sub fan-out, blocking commands woken from another client,
//! and the figures INFO and CLIENT LIST give.

mod common;

use common::*;
use std::io::{Read, Write};

/// Commands of client `i`, round `r`, and the exact replies they get.
fn pipeline(i: usize, r: usize) -> (Vec<u8>, Vec<u8>) {
    let key = format!("k:{i}");
    let val = format!("v{i}-{r}-{}", "x".repeat((i * 37 + r * 11) % 300));
    let mut cmds = Vec::new();
    let mut want = Vec::new();
    for args in [
        vec!["SET", key.as_str(), val.as_str()],
        vec!["GET", key.as_str()],
        vec!["INCR", &format!("n:{i}")],
        vec!["APPEND", &format!("log:{i}"), "."],
    ] {
        cmds.extend(format!("*{}\r\n", args.len()).into_bytes());
        for a in &args {
            cmds.extend(format!("${}\r\n{a}\r\n", a.len()).into_bytes());
        }
    }
    want.extend(b"+OK\r\n");
    want.extend(format!("${}\r\n{val}\r\n", val.len()).into_bytes());
    want.extend(format!(":{}\r\n", r + 1).into_bytes());
    want.extend(format!(":{}\r\n", r + 1).into_bytes());
    (cmds, want)
}

fn set(c: &mut redis::Connection, key: &str, value: &[u8]) {
    let _: () = redis::cmd("SET").arg(key).arg(value).query(c).unwrap();
}

/// A field of INFO's server or stats section.
fn stat(c: &mut redis::Connection, field: &str) -> String {
    let info: String = redis::cmd("INFO").arg("everything").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.to_string()))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
}

fn read_exact_reply(s: &mut std::net::TcpStream, len: usize) -> Vec<u8> {
    let mut got = vec![0u8; len];
    s.read_exact(&mut got).unwrap();
    got
}

fn hammer(server: &TestServer, clients: usize, rounds: usize) {
    let port = server.port;
    let workers: Vec<_> = (0..clients)
        .map(|i| {
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
                    .unwrap();
                for r in 0..rounds {
                    let (cmds, want) = pipeline(i, r);
                    s.write_all(&cmds).unwrap();
                    let got = read_exact_reply(&mut s, want.len());
                    assert_eq!(
                        String::from_utf8_lossy(&got),
                        String::from_utf8_lossy(&want),
                        "client {i} round {r}"
                    );
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
}

#[test]
fn many_clients_get_their_exact_replies_through_the_threads() {
    let server = TestServer::start_with(&["--io-threads", "4", "--io-threads-always-active", "no"]);
    let mut c = server.client();
    assert_eq!(stat(&mut c, "io_threaded_writes_processed"), "0");
    hammer(&server, 32, 200);
    for i in 0..32 {
        let n: i64 = redis::cmd("GET")
            .arg(format!("n:{i}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(n, 200);
        let log: String = redis::cmd("GET")
            .arg(format!("log:{i}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(log, ".".repeat(200));
    }
    // 32 clients at once pass Redis's bar (two jobs per thread): threads were used.
    let reads: u64 = stat(&mut c, "io_threaded_reads_processed").parse().unwrap();
    let writes: u64 = stat(&mut c, "io_threaded_writes_processed")
        .parse()
        .unwrap();
    assert!(reads > 0 && writes > 0, "reads {reads} writes {writes}");
    // A lone client's turn does not (INFO's own turn had one job).
    assert_eq!(stat(&mut c, "io_threads_active"), "0");
}

#[test]
fn one_thread_reports_none() {
    let server = TestServer::start_with(&["--io-threads", "1"]);
    let mut c = server.client();
    hammer(&server, 16, 20);
    assert_eq!(stat(&mut c, "io_threaded_reads_processed"), "0");
    assert_eq!(stat(&mut c, "io_threaded_writes_processed"), "0");
    assert_eq!(stat(&mut c, "io_threads_active"), "0");
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
    assert!(list.trim_end().ends_with(" io-thread=0"), "{list}");
}

#[test]
fn connections_are_spread_over_the_threads() {
    let server = TestServer::start_with(&["--io-threads", "4"]);
    let mut conns: Vec<redis::Connection> = (0..8).map(|_| server.client()).collect();
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut conns[0])
        .unwrap();
    let mut threads: Vec<&str> = list
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap())
        .collect();
    threads.sort_unstable();
    // Eight connections in a row, round robin over the three workers (thread 0, the
    // loop's own, does no socket I/O), after the harness's readiness probe took the
    // first.
    assert_eq!(
        threads,
        [
            "io-thread=1",
            "io-thread=1",
            "io-thread=2",
            "io-thread=2",
            "io-thread=2",
            "io-thread=3",
            "io-thread=3",
            "io-thread=3"
        ],
        "{list}"
    );
    let mut c = server.client();
    let conf: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("io-threads")
        .query(&mut c)
        .unwrap();
    assert_eq!(conf, ["io-threads", "4"]);
    drop(conns);
}

/// With the threads taking every job: replies of megabytes (many blocks, one
/// vectored write each turn), a client that reads them slowly, Pub/Sub to many
/// subscribers, a blocked client woken by another, MULTI/EXEC.
#[test]
fn every_kind_of_output_goes_through_always_active_threads() {
    let server =
        TestServer::start_with(&["--io-threads", "3", "--io-threads-always-active", "yes"]);
    let mut c = server.client();
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    set(&mut c, "big", &big);
    // A pipeline of big GETs, read slowly: the socket fills, writes are partial and
    // resume on writability.
    let mut s = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    for _ in 0..5 {
        s.write_all(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n").unwrap();
    }
    let header = format!("${}\r\n", big.len());
    let mut expected = Vec::new();
    for _ in 0..5 {
        expected.extend(header.as_bytes());
        expected.extend(&big);
        expected.extend(b"\r\n");
    }
    let mut got = Vec::new();
    let mut buf = vec![0u8; 7000];
    while got.len() < expected.len() {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
        if got.len() % 5 == 0 {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
    assert!(got == expected, "the big replies arrived intact");

    // Pub/Sub to many subscribers.
    let mut subs: Vec<RawConn> = (0..12).map(|_| server.raw(2)).collect();
    for sub in &mut subs {
        assert_eq!(
            sub.cmd(&["SUBSCRIBE", "ch"]),
            "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
        );
    }
    let mut publisher = server.raw(2);
    for m in 0..20 {
        let msg = format!("m{m}");
        assert_eq!(publisher.cmd(&["PUBLISH", "ch", &msg]), ":12\r\n");
    }
    for sub in &mut subs {
        for m in 0..20 {
            let msg = format!("m{m}");
            assert_eq!(
                sub.read_reply(),
                format!(
                    "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n${}\r\n{msg}\r\n",
                    msg.len()
                )
            );
        }
    }

    // A blocked client woken by another.
    let mut blocked = server.raw(2);
    blocked.send(&["BLPOP", "q", "0"]);
    wait_blocked(&server, 1);
    assert_eq!(publisher.cmd(&["RPUSH", "q", "job"]), ":1\r\n");
    assert_eq!(blocked.read_reply(), "*2\r\n$1\r\nq\r\n$3\r\njob\r\n");

    // MULTI/EXEC.
    let mut tx = server.raw(2);
    tx.check(&[
        (&["MULTI"], "+OK\r\n"),
        (&["INCR", "t"], "+QUEUED\r\n"),
        (&["INCR", "t"], "+QUEUED\r\n"),
        (&["EXEC"], "*2\r\n:1\r\n:2\r\n"),
    ]);
    let writes: u64 = stat(&mut c, "io_threaded_writes_processed")
        .parse()
        .unwrap();
    assert!(writes > 0);
}

/// A client closed by CLIENT KILL, one over its output-buffer limit, and one whose
/// peer went away mid-reply: the others go on.
#[test]
fn closes_under_threads_leave_the_others_alone() {
    let server =
        TestServer::start_with(&["--io-threads", "4", "--io-threads-always-active", "yes"]);
    let mut c = server.raw(2);
    c.check(&[(&["SET", "v", &"y".repeat(100_000)], "+OK\r\n")]);
    // Over the normal clients' hard limit: closed.
    c.check(&[(
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 200000 0 0",
        ],
        "+OK\r\n",
    )]);
    // Each pipeline goes in one write: the server may close the client as soon as
    // its first replies pass the limit, and a write after that would be reset.
    let get = b"*2\r\n$3\r\nGET\r\n$1\r\nv\r\n";
    let mut greedy = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    greedy.write_all(&get.repeat(50)).unwrap();
    // A client that goes away with replies pending.
    let mut gone = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    gone.write_all(&get.repeat(20)).unwrap();
    drop(gone);
    let mut victim = server.raw(2);
    victim.check(&[(&["CLIENT", "SETNAME", "victim"], "+OK\r\n")]);
    let id = victim.cmd(&["CLIENT", "ID"]);
    let id = id.trim_start_matches(':').trim_end();
    assert_eq!(c.cmd(&["CLIENT", "KILL", "ID", id]), ":1\r\n");
    wait_until(|| {
        let mut probe = server.raw(2);
        let list = probe.cmd(&["CLIENT", "LIST"]);
        !list.contains("name=victim")
    });
    hammer(&server, 8, 50);
    c.check(&[(&["PING"], "+PONG\r\n")]);
    let mut rest = Vec::new();
    greedy
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let _ = greedy.read_to_end(&mut rest);
    assert!(rest.len() < 50 * 100_010, "the greedy client was closed");
}

/// Replies of megabytes leave in blocks the lazy-free thread frees, and so do big query
/// buffers: after big GETs, a big SET and a client closed with a big reply unread,
/// used_memory comes back to where it was.
#[test]
fn big_output_blocks_and_query_buffers_are_freed() {
    let server = TestServer::start_with(&["--io-threads", "2"]);
    let mut c = server.client();
    let used = |c: &mut redis::Connection| -> i64 { stat(c, "used_memory").parse().unwrap() };
    let big: Vec<u8> = (0..4_000_000u32).map(|i| (i % 241) as u8).collect();
    set(&mut c, "big", &big);
    let _: () = redis::cmd("SET")
        .arg("small")
        .arg("x")
        .query(&mut c)
        .unwrap();
    let before = used(&mut c);
    for _ in 0..5 {
        let got: Vec<u8> = redis::cmd("GET").arg("big").query(&mut c).unwrap();
        assert!(got == big);
    }
    // A big argument, then the key goes: its query buffer was 4 MB.
    let mut setter = server.client();
    let _: () = redis::cmd("SET")
        .arg("other")
        .arg(&big)
        .query(&mut setter)
        .unwrap();
    let _: () = redis::cmd("DEL").arg("other").query(&mut c).unwrap();
    drop(setter);
    // A client that goes away with 8 MB of replies unread.
    let mut gone = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    gone.write_all(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n")
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    drop(gone);
    let mut now = i64::MAX;
    wait_until(|| {
        now = used(&mut c);
        now - before < 256 * 1024
    });
    let got: String = redis::cmd("GET").arg("small").query(&mut c).unwrap();
    assert_eq!(got, "x");
}

/// Clients whose commands arrive in the same turn are served in the order they sent
/// them, as with one thread, not in the order of their connections: the subscriber
/// (connected later) unsubscribes before the publisher (connected first) publishes.
#[test]
fn commands_run_in_the_order_their_clients_sent_them() {
    let server =
        TestServer::start_with(&["--io-threads", "4", "--io-threads-always-active", "yes"]);
    let mut publisher = server.raw(2);
    let mut subscriber = server.raw(2);
    assert_eq!(
        subscriber.cmd(&["SUBSCRIBE", "ch"]),
        "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
    );
    for _ in 0..5 {
        // The server sleeps, so both commands wait for the same turn.
        let mut sleeper = server.raw(2);
        sleeper.send(&["DEBUG", "SLEEP", "0.2"]);
        std::thread::sleep(std::time::Duration::from_millis(50));
        subscriber.send(&["UNSUBSCRIBE"]);
        std::thread::sleep(std::time::Duration::from_millis(20));
        publisher.send(&["PUBLISH", "ch", "hello"]);
        assert_eq!(publisher.read_reply(), ":0\r\n");
        assert_eq!(
            subscriber.read_reply(),
            "*3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n"
        );
        assert_eq!(sleeper.read_reply(), "+OK\r\n");
        assert_eq!(
            subscriber.cmd(&["SUBSCRIBE", "ch"]),
            "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
        );
    }
}

/// With I/O threads the first command of each connection read in a turn is parsed
/// ahead and its key prefetched with the others'. Every kind of first command (whole,
/// inline, half sent, a pipeline starting with SELECT, a protocol error) still runs
/// as sent, in its client's database.
#[test]
fn first_commands_parsed_ahead_run_as_sent() {
    let server = TestServer::start_with(&[
        "--io-threads",
        "4",
        "--io-threads-always-active",
        "yes",
        "--prefetch-min-keys",
        "0",
    ]);
    for round in 0..3 {
        let mut sleeper = server.raw(2);
        let mut clients: Vec<RawConn> = (0..12).map(|_| server.raw(2)).collect();
        let mut bad = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        // Every command below waits for the same turn, behind the sleep.
        sleeper.send(&["DEBUG", "SLEEP", "0.2"]);
        std::thread::sleep(std::time::Duration::from_millis(50));
        for (i, c) in clients.iter_mut().enumerate() {
            let key = format!("c:{round}:{i}");
            let whole = format!("*2\r\n$4\r\nINCR\r\n${}\r\n{key}\r\n", key.len());
            let bytes = match i % 4 {
                0 => whole,
                1 => format!("INCR {key}\r\n"),
                2 => whole[..whole.len() - 4].to_string(),
                _ => format!("*2\r\n$6\r\nSELECT\r\n$1\r\n1\r\n{whole}"),
            };
            c.stream.write_all(bytes.as_bytes()).unwrap();
        }
        bad.write_all(b"*1\r\n$x\r\n").unwrap();
        assert_eq!(sleeper.read_reply(), "+OK\r\n");
        for (i, c) in clients.iter_mut().enumerate() {
            if i % 4 == 2 {
                let key = format!("c:{round}:{i}");
                c.stream
                    .write_all(&key.as_bytes()[key.len() - 2..])
                    .unwrap();
                c.stream.write_all(b"\r\n").unwrap();
            }
            if i % 4 == 3 {
                assert_eq!(c.read_reply(), "+OK\r\n", "client {i}");
            }
            assert_eq!(c.read_reply(), ":1\r\n", "client {i}");
        }
        let mut all = String::new();
        bad.read_to_string(&mut all).unwrap();
        assert_eq!(all, "-ERR Protocol error: invalid bulk length\r\n");
        let mut check = server.raw(2);
        for i in 0..12 {
            let key = format!("c:{round}:{i}");
            let in_db0 = if i % 4 == 3 { "$-1\r\n" } else { "$1\r\n1\r\n" };
            assert_eq!(check.cmd(&["GET", &key]), in_db0, "client {i}");
        }
        assert_eq!(check.cmd(&["SELECT", "1"]), "+OK\r\n");
        for i in (3..12).step_by(4) {
            let key = format!("c:{round}:{i}");
            assert_eq!(check.cmd(&["GET", &key]), "$1\r\n1\r\n", "client {i}");
        }
    }
}

/// Replies far bigger than the socket buffers, through threads that take every write:
/// a worker's write stops short, the socket's writable event may come while the next
/// write is still queued, and the rest must still go out (that event is not repeated:
/// an 8 MB GET once stalled for good). Pipelined big GETs too, and a small command
/// after them.
#[test]
fn replies_bigger_than_the_socket_go_out_whole() {
    let server =
        TestServer::start_with(&["--io-threads", "3", "--io-threads-always-active", "yes"]);
    let mut c = server.client();
    // A stalled reply fails the test rather than hanging it.
    c.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let big: Vec<u8> = (0..8 << 20).map(|i| b'a' + (i % 26) as u8).collect();
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query(&mut c)
        .unwrap();
    for _ in 0..5 {
        let back: Vec<u8> = redis::cmd("GET").arg("big").query(&mut c).unwrap();
        assert!(back == big, "GET big came back different");
    }
    let mut p = redis::pipe();
    for _ in 0..4 {
        p.cmd("GET").arg("big");
    }
    p.cmd("STRLEN").arg("big");
    let (a, b, c2, d, n): (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>, i64) = p.query(&mut c).unwrap();
    assert!(a == big && b == big && c2 == big && d == big);
    assert_eq!(n, 8 << 20);
    // A raw reader taking the reply as fast as it comes: the socket turns writable
    // again and again, often while the server's next write is still queued.
    let mut slow = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    slow.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let header = format!("${}\r\n", big.len());
    for _ in 0..40 {
        slow.write_all(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n").unwrap();
        let mut got = Vec::with_capacity(big.len() + 32);
        let mut bite = vec![0u8; 256 * 1024];
        while got.len() < header.len() + big.len() + 2 {
            let n = slow.read(&mut bite).expect("the reply stalled");
            assert!(n > 0, "closed mid-reply");
            got.extend_from_slice(&bite[..n]);
        }
        assert!(got[..header.len()] == *header.as_bytes());
        assert!(got[header.len()..header.len() + big.len()] == big[..]);
    }
}

/// At `maxclients`, a client that closed (with its last reply unread, so the server
/// sees a reset: the harness's readiness probe reads one line of INFO and leaves) is
/// gone before the next one counts: its read, queued on a worker, is taken in before
/// the accept decides.
#[test]
fn a_closed_client_frees_its_place_before_the_next_accept() {
    let server = TestServer::start_with(&[
        "--maxclients",
        "3",
        "--io-threads",
        "4",
        "--io-threads-always-active",
        "yes",
    ]);
    let _held: Vec<RawConn> = (0..2).map(|_| server.raw(2)).collect();
    let mut third = server.raw(2);
    assert_eq!(third.cmd(&["PING"]), "+PONG\r\n");
    let mut refused = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let mut text = String::new();
    let _ = refused.read_to_string(&mut text);
    assert_eq!(text, "-ERR max number of clients reached\r\n");
}

/// One client's script for `random_cuts_answer_as_with_one_thread`: commands on keys
/// of its own (so concurrent clients cannot change its replies), multibulk and
/// inline, empty requests, transactions, authentication failing and succeeding, and
/// RESET in the middle, which takes the client back to unauthenticated limits.
fn mixed_script(seed: u64) -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let enc = |args: &[&str]| {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend(format!("${}\r\n{a}\r\n", a.len()).into_bytes());
        }
        out
    };
    let mut out = Vec::new();
    out.extend(enc(&["GET", "x"]));
    out.extend(enc(&["AUTH", "wrong"]));
    out.extend(enc(&["AUTH", "pw"]));
    for i in 0..300 {
        if i == 150 {
            out.extend(enc(&["RESET"]));
            out.extend(enc(&["GET", "x"]));
            out.extend(enc(&["AUTH", "pw"]));
        }
        let key = format!("k{seed}_{}", rng.usize(..20));
        let list = format!("l{seed}");
        match rng.usize(..9) {
            0 => out.extend(enc(&["SET", &key, &"v".repeat(rng.usize(..3000))])),
            1 => out.extend(enc(&["GET", &key])),
            2 => out.extend(format!("INCR cnt{seed}\r\n").into_bytes()),
            3 => out.extend(enc(&["RPUSH", &list, &rng.usize(..100).to_string()])),
            4 => out.extend(enc(&["LRANGE", &list, "0", "3"])),
            5 => out.extend(b"*0\r\n"),
            6 => {
                out.extend(enc(&["MULTI"]));
                out.extend(enc(&["INCR", &format!("m{seed}")]));
                out.extend(enc(&["EXEC"]));
            }
            7 => out.extend(enc(&[
                "SADD",
                &format!("s{seed}"),
                &rng.usize(..50).to_string(),
            ])),
            _ => out.extend(enc(&["STRLEN", &key])),
        }
    }
    out.extend(enc(&["PING", "end"]));
    out
}

/// Sends `script` cut at random places (1 byte to 20 KB, seeded) and returns every
/// byte of the replies up to the last one.
fn send_in_cuts(port: u16, script: &[u8], seed: u64) -> Vec<u8> {
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_nodelay(true).unwrap();
    let mut reader = stream.try_clone().unwrap();
    let replies = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 65536];
        while !got.ends_with(b"$3\r\nend\r\n") {
            let n = reader.read(&mut buf).unwrap();
            assert!(n > 0, "connection closed");
            got.extend_from_slice(&buf[..n]);
        }
        got
    });
    let mut rng = fastrand::Rng::with_seed(seed * 7 + 1);
    let mut writer = stream;
    let mut at = 0;
    while at < script.len() {
        let n = [1, 3, 7, 50, 500, 4000, 20000][rng.usize(..7)].min(script.len() - at);
        writer.write_all(&script[at..at + n]).unwrap();
        at += n;
    }
    replies.join().unwrap()
}

/// Whatever the cuts, the I/O threads' parsing (the first command and the batch behind
/// it, parsed by the worker that read them) gives every client exactly the replies one
/// thread gives: twelve clients at once, with and without always-active threads.
#[test]
fn random_cuts_answer_as_with_one_thread() {
    let configs: [&[&str]; 3] = [
        &["--io-threads", "1"],
        &["--io-threads", "4", "--io-threads-always-active", "yes"],
        &["--io-threads", "3", "--io-threads-always-active", "no"],
    ];
    let mut answers: Vec<Vec<Vec<u8>>> = Vec::new();
    for config in configs {
        let mut args = vec!["--requirepass", "pw"];
        args.extend_from_slice(config);
        let s = TestServer::start_with(&args);
        let port = s.port;
        let clients: Vec<_> = (0..12u64)
            .map(|seed| std::thread::spawn(move || send_in_cuts(port, &mixed_script(seed), seed)))
            .collect();
        answers.push(clients.into_iter().map(|c| c.join().unwrap()).collect());
    }
    for (seed, one) in answers[0].iter().enumerate() {
        assert!(
            one.starts_with(b"-NOAUTH Authentication required.\r\n-WRONGPASS"),
            "client {seed}"
        );
        assert!(one.ends_with(b"$3\r\nend\r\n"), "client {seed}");
        for (config, other) in answers[1..].iter().enumerate() {
            assert!(other[seed] == *one, "client {seed}, config {}", config + 1);
        }
    }
}
