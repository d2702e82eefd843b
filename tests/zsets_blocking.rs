//! Blocking sorted-set pops (BZPOPMIN, BZPOPMAX, BZMPOP): replies and errors in both
//! protocols, and several clients: order of service, wake-up after the writing command
//! or EXEC, waiters that find the key emptied again, type filtering, timeouts, CLIENT
//! UNBLOCK, disconnects, MULTI/scripts, and a priority queue fed by another client.

mod common;
use common::*;

const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

fn client_id(c: &mut RawConn) -> String {
    let id = c.cmd(&["CLIENT", "ID"]);
    id[1..id.len() - 2].to_string()
}

#[test]
fn served_at_once_when_a_key_has_members() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"], ":4\r\n", ":4\r\n"),
            (
                &["BZPOPMIN", "z", "0"],
                "*3\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\n1\r\n",
                "*3\r\n$1\r\nz\r\n$1\r\na\r\n,1\r\n",
            ),
            // The first key that holds members wins; missing keys are skipped.
            (
                &["BZPOPMAX", "nokey", "z", "0"],
                "*3\r\n$1\r\nz\r\n$1\r\nd\r\n$1\r\n4\r\n",
                "*3\r\n$1\r\nz\r\n$1\r\nd\r\n,4\r\n",
            ),
            (
                &["BZMPOP", "0", "2", "nokey", "z", "MAX"],
                "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n",
                "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nc\r\n,3\r\n",
            ),
            (&["ZADD", "z", "1.5", "x", "-inf", "y"], ":2\r\n", ":2\r\n"),
            (
                &["BZMPOP", "1", "1", "z", "min", "count", "10"],
                "*2\r\n$1\r\nz\r\n*3\r\n*2\r\n$1\r\ny\r\n$4\r\n-inf\r\n*2\r\n$1\r\nx\r\n$3\r\n1.5\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n",
                "*2\r\n$1\r\nz\r\n*3\r\n*2\r\n$1\r\ny\r\n,-inf\r\n*2\r\n$1\r\nx\r\n,1.5\r\n*2\r\n$1\r\nb\r\n,2\r\n",
            ),
            // The last member popped deletes the key.
            (&["EXISTS", "z"], ":0\r\n", ":0\r\n"),
            (&["ZADD", "z", "0.1", "m"], ":1\r\n", ":1\r\n"),
            (
                &["BZPOPMAX", "z", "z", "1.5"],
                "*3\r\n$1\r\nz\r\n$1\r\nm\r\n$3\r\n0.1\r\n",
                "*3\r\n$1\r\nz\r\n$1\r\nm\r\n,0.1\r\n",
            ),
            (&["EXISTS", "z"], ":0\r\n", ":0\r\n"),
        ],
    );
}

#[test]
fn errors_in_both_protocols() {
    let s = TestServer::start();
    let rows: &[(&[&str], &str)] = &[
        (&["SET", "s", "v"], "+OK\r\n"),
        (&["ZADD", "z", "1", "a"], ":1\r\n"),
        (
            &["BZPOPMIN", "z"],
            "-ERR wrong number of arguments for 'bzpopmin' command\r\n",
        ),
        (
            &["BZPOPMAX", "z"],
            "-ERR wrong number of arguments for 'bzpopmax' command\r\n",
        ),
        (
            &["BZMPOP", "0", "1", "z"],
            "-ERR wrong number of arguments for 'bzmpop' command\r\n",
        ),
        // The timeout is checked before the keys (even a key holding members).
        (&["BZPOPMIN", "z", "-1"], "-ERR timeout is negative\r\n"),
        (&["BZPOPMAX", "z", "-0.001"], "-ERR timeout is negative\r\n"),
        (&["BZPOPMIN", "z", "-inf"], "-ERR timeout is negative\r\n"),
        (
            &["BZPOPMIN", "z", "abc"],
            "-ERR timeout is not a float or out of range\r\n",
        ),
        (
            &["BZPOPMIN", "z", "nan"],
            "-ERR timeout is not a float or out of range\r\n",
        ),
        (
            &["BZPOPMIN", "z", ""],
            "-ERR timeout is not a float or out of range\r\n",
        ),
        (
            &["BZPOPMIN", "z", " 1"],
            "-ERR timeout is not a float or out of range\r\n",
        ),
        (
            &["BZPOPMAX", "s", "x"],
            "-ERR timeout is not a float or out of range\r\n",
        ),
        (
            &["BZMPOP", "-1", "1", "z", "MIN"],
            "-ERR timeout is negative\r\n",
        ),
        (
            &["BZMPOP", "x", "1", "z", "MIN"],
            "-ERR timeout is not a float or out of range\r\n",
        ),
        // BZMPOP checks numkeys, MIN|MAX and COUNT before the timeout.
        (
            &["BZMPOP", "-1", "0", "z", "MIN"],
            "-ERR numkeys should be greater than 0\r\n",
        ),
        (
            &["BZMPOP", "x", "x", "z", "MIN"],
            "-ERR numkeys should be greater than 0\r\n",
        ),
        (&["BZMPOP", "-1", "2", "z", "MIN"], "-ERR syntax error\r\n"),
        (&["BZMPOP", "-1", "1", "z", "UP"], "-ERR syntax error\r\n"),
        (
            &["BZMPOP", "-1", "1", "z", "MIN", "COUNT"],
            "-ERR syntax error\r\n",
        ),
        (
            &["BZMPOP", "-1", "1", "z", "MIN", "COUNT", "0"],
            "-ERR count should be greater than 0\r\n",
        ),
        (
            &["BZMPOP", "-1", "1", "z", "MIN", "COUNT", "x"],
            "-ERR count should be greater than 0\r\n",
        ),
        (
            &["BZMPOP", "-1", "1", "z", "MIN", "COUNT", "1", "COUNT", "1"],
            "-ERR syntax error\r\n",
        ),
        (
            &["BZMPOP", "-1", "1", "z", "MIN", "FOO"],
            "-ERR syntax error\r\n",
        ),
        // WRONGTYPE on the first non-missing key that is not a sorted set.
        (&["BZPOPMIN", "nokey", "s", "z", "0"], WRONGTYPE),
        (&["BZPOPMAX", "s", "0"], WRONGTYPE),
        (&["BZMPOP", "0", "3", "nokey", "s", "z", "MAX"], WRONGTYPE),
    ];
    // Errors are the same in both protocols.
    let mut both: Vec<(&[&str], &str, &str)> = rows.iter().map(|(c, r)| (*c, *r, *r)).collect();
    // ...but a sorted set before the wrong-type key is served first.
    both.push((
        &["BZMPOP", "0", "2", "z", "s", "MAX"],
        "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n",
        "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\na\r\n,1\r\n",
    ));
    check_both(&s, &both);
    wait_blocked(&s, 0);
}

#[test]
fn same_replies_as_redis() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    assert_same_as_redis(
        &s,
        &r,
        &[
            &["ZADD", "z", "1", "a", "2", "b", "3", "c", "2.5", "bb"],
            &["SET", "s", "v"],
            &["BZPOPMIN", "z", "0"],
            &["BZPOPMAX", "nokey", "z", "0.5"],
            &["BZMPOP", "0", "2", "nokey", "z", "MIN", "COUNT", "5"],
            &["EXISTS", "z"],
            &["BZPOPMIN", "nokey", "0.01"],
            &["BZPOPMAX", "nokey", "other", "0.01"],
            &["BZMPOP", "0.01", "1", "nokey", "MAX"],
            &["BZPOPMIN", "z", "-1"],
            &["BZPOPMIN", "z", "abc"],
            &["BZPOPMIN", "z", "nan"],
            &["BZMPOP", "-1", "0", "z", "MIN"],
            &["BZMPOP", "0", "x", "z", "MIN"],
            &["BZMPOP", "-1", "1", "z", "MIN", "COUNT", "0"],
            &["BZMPOP", "-1", "1", "z", "MAX", "COUNT"],
            &["BZMPOP", "-1", "1", "z", "SIDE"],
            &["BZPOPMIN", "s", "0"],
            &["BZMPOP", "0", "1", "s", "MIN"],
            &["ZMPOP", "x", "z", "MIN"],
            &["BZPOPMIN", "z"],
            &["BZMPOP", "0", "1", "z"],
            &["MULTI"],
            &["BZPOPMIN", "z", "0"],
            &["ZADD", "z", "7", "q"],
            &["BZPOPMAX", "z", "0"],
            &["BZMPOP", "0", "1", "z", "MIN"],
            &["EXEC"],
        ],
    );
}

#[test]
fn timeouts_reply_null_array() {
    let s = TestServer::start();
    for (proto, null) in [(2u8, "*-1\r\n"), (3, "_\r\n")] {
        let mut c = s.raw(proto);
        assert_eq!(c.cmd(&["BZPOPMIN", "a", "b", "0.01"]), null);
        assert_eq!(c.cmd(&["BZPOPMAX", "a", "0.02"]), null);
        assert_eq!(
            c.cmd(&["BZMPOP", "0.01", "2", "a", "b", "MAX", "COUNT", "3"]),
            null
        );
        // After the timeout the connection works normally.
        assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    }
    // Several clients with different deadlines, each answered by its own.
    let mut a = s.raw(2);
    let mut b = s.raw(3);
    let mut forever = s.raw(2);
    forever.send(&["BZPOPMIN", "t", "0"]);
    a.send(&["BZPOPMIN", "t", "0.2"]);
    b.send(&["BZMPOP", "0.05", "1", "t", "MIN"]);
    assert_eq!(b.read_reply(), "_\r\n");
    assert_eq!(a.read_reply(), "*-1\r\n");
    wait_blocked(&s, 1);
    assert_eq!(s.raw(2).cmd(&["ZADD", "t", "1", "m"]), ":1\r\n");
    assert_eq!(
        forever.read_reply(),
        "*3\r\n$1\r\nt\r\n$1\r\nm\r\n$1\r\n1\r\n"
    );
    wait_blocked(&s, 0);
}

#[test]
fn served_in_the_order_they_blocked() {
    let s = TestServer::start();
    let mut a = s.raw(2);
    let mut b = s.raw(3);
    let mut c = s.raw(3);
    a.send(&["BZPOPMIN", "q", "0"]);
    wait_blocked(&s, 1);
    b.send(&["BZPOPMAX", "other", "q", "0"]);
    wait_blocked(&s, 2);
    c.send(&["BZMPOP", "0", "1", "q", "MIN", "COUNT", "5"]);
    wait_blocked(&s, 3);
    assert_eq!(clients_info_field(&s, "total_blocking_keys"), "2");
    let mut w = s.raw(2);
    // One ZADD of several members: waiters are served after it, in the order they
    // blocked, each as its own command would.
    assert_eq!(w.cmd(&["ZADD", "q", "2", "y", "1", "x"]), ":2\r\n");
    assert_eq!(a.read_reply(), "*3\r\n$1\r\nq\r\n$1\r\nx\r\n$1\r\n1\r\n");
    assert_eq!(b.read_reply(), "*3\r\n$1\r\nq\r\n$1\r\ny\r\n,2\r\n");
    // The third waiter found the key emptied again: it keeps waiting.
    wait_blocked(&s, 1);
    assert_eq!(w.cmd(&["EXISTS", "q"]), ":0\r\n");
    assert_eq!(
        w.cmd(&["ZADD", "q", "3", "c", "1", "a", "2", "b"]),
        ":3\r\n"
    );
    assert_eq!(
        c.read_reply(),
        "*2\r\n$1\r\nq\r\n*3\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2\r\n*2\r\n$1\r\nc\r\n,3\r\n"
    );
    wait_blocked(&s, 0);
    assert_eq!(clients_info_field(&s, "total_blocking_keys"), "0");
    assert_eq!(w.cmd(&["EXISTS", "q"]), ":0\r\n");
}

#[test]
fn emptied_again_waiter_keeps_its_place_and_deadline() {
    let s = TestServer::start();
    let mut a = s.raw(2);
    let mut b = s.raw(2);
    let mut w = s.raw(2);
    a.send(&["BZPOPMIN", "q", "0"]);
    wait_blocked(&s, 1);
    b.send(&["BZPOPMIN", "q", "0"]);
    wait_blocked(&s, 2);
    // One member for two waiters: the first takes it, the second finds the key
    // emptied again and keeps waiting.
    assert_eq!(w.cmd(&["ZADD", "q", "5", "only"]), ":1\r\n");
    assert_eq!(a.read_reply(), "*3\r\n$1\r\nq\r\n$4\r\nonly\r\n$1\r\n5\r\n");
    wait_blocked(&s, 1);
    // b is still first in line for the next member.
    let mut c = s.raw(2);
    let c_id = client_id(&mut c);
    c.send(&["BZPOPMAX", "q", "0"]);
    wait_blocked(&s, 2);
    assert_eq!(w.cmd(&["ZADD", "q", "1", "next"]), ":1\r\n");
    assert_eq!(b.read_reply(), "*3\r\n$1\r\nq\r\n$4\r\nnext\r\n$1\r\n1\r\n");
    wait_blocked(&s, 1);
    assert_eq!(w.cmd(&["CLIENT", "UNBLOCK", &c_id]), ":1\r\n");
    assert_eq!(c.read_reply(), "*-1\r\n");
}

#[test]
fn woken_after_multi_exec() {
    let s = TestServer::start();
    let mut a = s.raw(3);
    a.send(&["BZPOPMIN", "q", "0"]);
    wait_blocked(&s, 1);
    let mut w = s.raw(2);
    // Added and removed inside one EXEC: nothing to serve, the waiter keeps waiting.
    w.cmd(&["MULTI"]);
    w.cmd(&["ZADD", "q", "1", "gone"]);
    w.cmd(&["DEL", "q"]);
    assert_eq!(w.cmd(&["EXEC"]), "*2\r\n:1\r\n:1\r\n");
    wait_blocked(&s, 1);
    // The waiter sees the state after the whole transaction, not after its first ZADD.
    w.cmd(&["MULTI"]);
    w.cmd(&["ZADD", "q", "1", "a", "2", "b"]);
    w.cmd(&["ZREM", "q", "a"]);
    w.cmd(&["ZADD", "q", "3", "c"]);
    assert_eq!(w.cmd(&["EXEC"]), "*3\r\n:2\r\n:1\r\n:1\r\n");
    assert_eq!(a.read_reply(), "*3\r\n$1\r\nq\r\n$1\r\nb\r\n,2\r\n");
    wait_blocked(&s, 0);
    assert_eq!(w.cmd(&["ZRANGE", "q", "0", "-1"]), "*1\r\n$1\r\nc\r\n");
}

#[test]
fn only_sorted_sets_wake_zset_waiters() {
    let s = TestServer::start();
    let mut a = s.raw(2);
    a.send(&["BZMPOP", "0", "1", "k", "MAX"]);
    wait_blocked(&s, 1);
    let mut w = s.raw(2);
    assert_eq!(w.cmd(&["RPUSH", "k", "v"]), ":1\r\n");
    assert_eq!(w.cmd(&["DEL", "k"]), ":1\r\n");
    assert_eq!(w.cmd(&["SADD", "k", "v"]), ":1\r\n");
    assert_eq!(w.cmd(&["SET", "k", "str"]), "+OK\r\n");
    wait_blocked(&s, 1);
    // A list waiter on the same key is not woken by a sorted set either.
    assert_eq!(w.cmd(&["DEL", "k"]), ":1\r\n");
    let mut l = s.raw(2);
    l.send(&["BLPOP", "k", "0"]);
    wait_blocked(&s, 2);
    assert_eq!(w.cmd(&["ZADD", "k", "1", "m"]), ":1\r\n");
    assert_eq!(
        a.read_reply(),
        "*2\r\n$1\r\nk\r\n*1\r\n*2\r\n$1\r\nm\r\n$1\r\n1\r\n"
    );
    wait_blocked(&s, 1);
    assert_eq!(w.cmd(&["RPUSH", "k", "x"]), ":1\r\n");
    assert_eq!(l.read_reply(), "*2\r\n$1\r\nk\r\n$1\r\nx\r\n");
    wait_blocked(&s, 0);
}

#[test]
fn client_unblock_in_both_protocols() {
    let s = TestServer::start();
    let mut w = s.raw(2);
    for (proto, null) in [(2u8, "*-1\r\n"), (3, "_\r\n")] {
        let mut a = s.raw(proto);
        let id = client_id(&mut a);
        a.send(&["BZPOPMIN", "q", "0"]);
        a.send(&["PING"]);
        wait_blocked(&s, 1);
        assert_eq!(w.cmd(&["CLIENT", "UNBLOCK", &id]), ":1\r\n");
        assert_eq!(a.read_reply(), null);
        assert_eq!(a.read_reply(), "+PONG\r\n");
        a.send(&["BZMPOP", "0", "2", "q", "r", "MIN"]);
        wait_blocked(&s, 1);
        assert_eq!(w.cmd(&["CLIENT", "UNBLOCK", &id, "ERROR"]), ":1\r\n");
        assert_eq!(
            a.read_reply(),
            "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
        );
        a.send(&["BZPOPMAX", "q", "100"]);
        wait_blocked(&s, 1);
        assert_eq!(w.cmd(&["CLIENT", "UNBLOCK", &id, "TIMEOUT"]), ":1\r\n");
        assert_eq!(a.read_reply(), null);
        wait_blocked(&s, 0);
        assert_eq!(w.cmd(&["CLIENT", "UNBLOCK", &id]), ":0\r\n");
    }
    // Unblocked clients are out of the queues: a later ZADD stays in place.
    assert_eq!(w.cmd(&["ZADD", "q", "1", "m"]), ":1\r\n");
    assert_eq!(w.cmd(&["ZCARD", "q"]), ":1\r\n");
}

#[test]
fn disconnect_while_blocked_cleans_up() {
    let s = TestServer::start();
    let mut b = s.raw(2);
    {
        let mut a = s.raw(2);
        a.send(&["BZPOPMIN", "q", "0"]);
        wait_blocked(&s, 1);
        b.send(&["BZPOPMAX", "q", "0"]);
        wait_blocked(&s, 2);
    }
    wait_blocked(&s, 1);
    let mut w = s.raw(2);
    // The departed client is skipped: the one behind it is served.
    assert_eq!(w.cmd(&["ZADD", "q", "1", "a", "2", "b"]), ":2\r\n");
    assert_eq!(b.read_reply(), "*3\r\n$1\r\nq\r\n$1\r\nb\r\n$1\r\n2\r\n");
    wait_blocked(&s, 0);
    assert_eq!(clients_info_field(&s, "total_blocking_keys"), "0");
    assert_eq!(w.cmd(&["ZCARD", "q"]), ":1\r\n");
}

#[test]
fn multi_and_scripts_do_not_block() {
    let s = TestServer::start();
    for (proto, null) in [(2u8, "*-1\r\n"), (3, "_\r\n")] {
        let mut c = s.raw(proto);
        c.cmd(&["FLUSHALL"]);
        c.cmd(&["MULTI"]);
        c.cmd(&["BZPOPMIN", "q", "0"]);
        c.cmd(&["BZMPOP", "0", "1", "q", "MAX"]);
        c.cmd(&["ZADD", "q", "1", "a"]);
        c.cmd(&["BZPOPMAX", "q", "0"]);
        let pair = if proto == 2 {
            "*3\r\n$1\r\nq\r\n$1\r\na\r\n$1\r\n1\r\n"
        } else {
            "*3\r\n$1\r\nq\r\n$1\r\na\r\n,1\r\n"
        };
        assert_eq!(c.cmd(&["EXEC"]), format!("*4\r\n{null}{null}:1\r\n{pair}"));
        // In a script the null array becomes Lua false, returned as a null.
        let nil = if proto == 2 { "$-1\r\n" } else { "_\r\n" };
        assert_eq!(
            c.cmd(&[
                "EVAL",
                "return redis.call('bzpopmin', KEYS[1], 0)",
                "1",
                "q"
            ]),
            nil
        );
        assert_eq!(
            c.cmd(&[
                "EVAL",
                "return redis.call('bzmpop', 0, 1, KEYS[1], 'min')",
                "1",
                "q"
            ]),
            nil
        );
        c.cmd(&["ZADD", "q", "2", "b"]);
        assert_eq!(
            c.cmd(&[
                "EVAL",
                "return redis.call('bzpopmin', KEYS[1], 0)[2]",
                "1",
                "q"
            ]),
            "$1\r\nb\r\n"
        );
    }
    wait_blocked(&s, 0);
}

/// A priority queue: a worker blocked on BZPOPMIN takes jobs in priority order as a
/// producer on another connection adds them.
#[test]
fn priority_queue_worker() {
    let s = TestServer::start();
    let mut worker = s.client();
    let handle = std::thread::spawn(move || {
        let mut done: Vec<(String, f64)> = Vec::new();
        loop {
            let (_key, job, prio): (String, String, f64) = redis::cmd("BZPOPMIN")
                .arg("jobs")
                .arg(0)
                .query(&mut worker)
                .unwrap();
            if job == "stop" {
                return done;
            }
            done.push((job, prio));
        }
    });
    wait_blocked(&s, 1);
    let mut producer = s.client();
    // A batch in one ZADD: the worker drains it lowest score first.
    let _: i64 = redis::cmd("ZADD")
        .arg(&["jobs", "3", "low", "1", "urgent", "2", "normal"])
        .query(&mut producer)
        .unwrap();
    wait_blocked(&s, 1);
    let _: i64 = redis::cmd("ZADD")
        .arg(&["jobs", "0.5", "later"])
        .query(&mut producer)
        .unwrap();
    wait_blocked(&s, 1);
    let _: i64 = redis::cmd("ZADD")
        .arg(&["jobs", "1000", "stop"])
        .query(&mut producer)
        .unwrap();
    let done = handle.join().unwrap();
    assert_eq!(
        done,
        vec![
            ("urgent".to_string(), 1.0),
            ("normal".to_string(), 2.0),
            ("low".to_string(), 3.0),
            ("later".to_string(), 0.5),
        ]
    );
    let n: i64 = redis::cmd("EXISTS")
        .arg("jobs")
        .query(&mut producer)
        .unwrap();
    assert_eq!(n, 0);
    wait_blocked(&s, 0);
}
