//! Client tracking under load: BCAST invalidations collected over an event-loop turn
//! (pipelined writes give one message per prefix, keys sorted and each once; NOLOOP
//! drops a client's own writes; RESP3 pushes and RESP2 redirection), and the
//! `tracking-table-max-keys` limit (random keys evicted with invalidations, INFO
//! counters, CONFIG GET/SET). Each scenario runs against Cinnabar and, when it is
//! installed, against redis-server with the same expectations.

mod common;
use std::collections::BTreeSet;
use std::io::Write;

use common::*;

fn inv(keys: &[&str]) -> String {
    let mut s = format!(">2\r\n$10\r\ninvalidate\r\n*{}\r\n", keys.len());
    for k in keys {
        s.push_str(&format!("${}\r\n{k}\r\n", k.len()));
    }
    s
}

fn inv_message(keys: &[&str]) -> String {
    let mut s = format!(
        "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*{}\r\n",
        keys.len()
    );
    for k in keys {
        s.push_str(&format!("${}\r\n{k}\r\n", k.len()));
    }
    s
}

/// Sends several commands in one write, so the server reads them in one turn, and
/// returns their replies.
fn pipeline(c: &mut RawConn, cmds: &[&[&str]]) -> Vec<String> {
    let mut out = Vec::new();
    for args in cmds {
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in *args {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }
    c.stream.write_all(&out).unwrap();
    cmds.iter().map(|_| c.read_reply()).collect()
}

fn stat(c: &mut RawConn, field: &str) -> String {
    let info = c.cmd(&["INFO", "stats"]);
    info.split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .to_string()
}

/// Runs a scenario on Cinnabar, then on redis-server when available.
fn on_both(scenario: fn(&dyn Fn(u8) -> RawConn)) {
    let s = TestServer::start();
    scenario(&|proto| s.raw(proto));
    if redis_server_available() {
        let r = RedisServer::start();
        scenario(&|proto| r.raw(proto));
    }
}

#[test]
fn bcast_pipelined_writes_arrive_as_one_message_per_prefix() {
    on_both(|conn| {
        let mut b = conn(3);
        let mut w = conn(2);
        assert_eq!(
            b.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "user:"]),
            "+OK\r\n"
        );
        let replies = pipeline(
            &mut w,
            &[
                &["SET", "user:2", "a"],
                &["SET", "other", "x"],
                &["SET", "user:1", "b"],
                &["SET", "user:2", "c"],
                &["DEL", "user:3"],
                &["INCR", "user:0"],
            ],
        );
        assert_eq!(
            replies,
            ["+OK\r\n", "+OK\r\n", "+OK\r\n", "+OK\r\n", ":0\r\n", ":1\r\n"]
        );
        // Sorted, each key once, after the whole turn.
        assert_eq!(b.read_reply(), inv(&["user:0", "user:1", "user:2"]));
        assert_eq!(b.cmd(&["PING"]), "+PONG\r\n");
        // The client's own writes: the replies first, then one push.
        let replies = pipeline(&mut b, &[&["SET", "user:5", "x"], &["SET", "user:4", "y"]]);
        assert_eq!(replies, ["+OK\r\n", "+OK\r\n"]);
        assert_eq!(b.read_reply(), inv(&["user:4", "user:5"]));
        assert_eq!(b.cmd(&["PING"]), "+PONG\r\n");
    });
}

#[test]
fn bcast_resp2_redirect_and_noloop() {
    on_both(|conn| {
        let mut r = conn(2);
        let id = r.cmd(&["CLIENT", "ID"]);
        let id = id.trim_start_matches(':').trim_end().to_string();
        r.cmd(&["SUBSCRIBE", "__redis__:invalidate"]);
        let mut t = conn(2);
        assert_eq!(
            t.cmd(&[
                "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "b", "PREFIX", "a", "REDIRECT", &id,
                "NOLOOP"
            ]),
            "+OK\r\n"
        );
        // Its own writes are not reported to it.
        let replies = pipeline(&mut t, &[&["SET", "a1", "1"], &["SET", "b1", "1"]]);
        assert_eq!(replies, ["+OK\r\n", "+OK\r\n"]);
        let mut w = conn(2);
        pipeline(
            &mut w,
            &[
                &["SET", "b2", "2"],
                &["SET", "a2", "1"],
                &["SET", "c", "1"],
                &["SET", "a1", "3"],
            ],
        );
        // One message per prefix, prefixes in order.
        assert_eq!(r.read_reply(), inv_message(&["a1", "a2"]));
        assert_eq!(r.read_reply(), inv_message(&["b2"]));
        assert_eq!(r.cmd(&["PING"]), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    });
}

#[test]
fn tracking_table_max_keys_evicts_random_keys() {
    on_both(|conn| {
        let mut w = conn(2);
        assert_eq!(
            w.cmd(&["CONFIG", "GET", "tracking-table-max-keys"]),
            "*2\r\n$23\r\ntracking-table-max-keys\r\n$7\r\n1000000\r\n"
        );
        assert_eq!(
            w.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "-1"]),
            "-ERR CONFIG SET failed (possibly related to argument 'tracking-table-max-keys') - argument must be between 0 and 9223372036854775807 inclusive\r\n"
        );
        assert_eq!(
            w.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "1k"]),
            "-ERR CONFIG SET failed (possibly related to argument 'tracking-table-max-keys') - argument couldn't be parsed into an integer\r\n"
        );
        let mut t = conn(3);
        t.cmd(&["CLIENT", "TRACKING", "on"]);
        t.cmd(&["MGET", "k1", "k2", "k3", "k4", "k5"]);
        let mut t2 = conn(3);
        t2.cmd(&["CLIENT", "TRACKING", "on"]);
        t2.cmd(&["GET", "k1"]);
        assert_eq!(stat(&mut w, "tracking_total_keys"), "5");
        assert_eq!(stat(&mut w, "tracking_total_items"), "6");
        assert_eq!(stat(&mut w, "tracking_total_prefixes"), "0");

        assert_eq!(
            w.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "2"]),
            "+OK\r\n"
        );
        // The next command (or the timer) evicts three random keys; their holders
        // are told as if the keys had changed.
        assert_eq!(w.cmd(&["PING"]), "+PONG\r\n");
        let all = ["k1", "k2", "k3", "k4", "k5"];
        let mut evicted = BTreeSet::new();
        for _ in 0..3 {
            let msg = t.read_reply();
            let key = all
                .iter()
                .find(|k| msg == inv(&[k]))
                .unwrap_or_else(|| panic!("unexpected {msg:?}"));
            evicted.insert(*key);
        }
        assert_eq!(evicted.len(), 3);
        assert_eq!(t.cmd(&["PING"]), "+PONG\r\n");
        assert_eq!(stat(&mut w, "tracking_total_keys"), "2");
        let items = if evicted.contains("k1") { "2" } else { "3" };
        assert_eq!(stat(&mut w, "tracking_total_items"), items);
        if evicted.contains("k1") {
            assert_eq!(t2.read_reply(), inv(&["k1"]));
        }
        assert_eq!(t2.cmd(&["PING"]), "+PONG\r\n");

        // 0: no limit.
        w.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "0"]);
        t.cmd(&["MGET", "k1", "k2", "k3", "k4", "k5"]);
        assert_eq!(stat(&mut w, "tracking_total_keys"), "5");
        w.cmd(&["SET", "k3", "x"]);
        assert_eq!(t.read_reply(), inv(&["k3"]));
        assert_eq!(stat(&mut w, "tracking_total_keys"), "4");
        w.cmd(&["FLUSHALL"]);
        assert_eq!(stat(&mut w, "tracking_total_keys"), "0");
        assert_eq!(stat(&mut w, "tracking_total_items"), "0");
    });
}
