//! Blocking list operations with several clients: order of service, timeouts, wake-up
//! after the pushing command, chained BLMOVE, CLIENT UNBLOCK, disconnects, pipelined
//! input held while blocked, and the deny-blocking hook used by MULTI/EXEC and scripts.

mod common;
use common::*;

#[test]
fn served_in_the_order_they_blocked() {
    let s = TestServer::start();
    let mut a = s.raw(2);
    let mut b = s.raw(2);
    let mut c = s.raw(3);
    a.send(&["BLPOP", "q", "0"]);
    wait_blocked(&s, 1);
    b.send(&["BRPOP", "other", "q", "0"]);
    wait_blocked(&s, 2);
    c.send(&["BLMPOP", "0", "1", "q", "LEFT", "COUNT", "5"]);
    wait_blocked(&s, 3);
    assert_eq!(clients_info_field(&s, "total_blocking_keys"), "2");
    let mut w = s.raw(2);
    // One command pushing several elements: waiters are served after it, in order.
    assert_eq!(w.cmd(&["RPUSH", "q", "x", "y"]), ":2\r\n");
    assert_eq!(a.read_reply(), "*2\r\n$1\r\nq\r\n$1\r\nx\r\n");
    assert_eq!(b.read_reply(), "*2\r\n$1\r\nq\r\n$1\r\ny\r\n");
    // The third waiter found the list emptied again: it keeps waiting.
    wait_blocked(&s, 1);
    assert_eq!(w.cmd(&["EXISTS", "q"]), ":0\r\n");
    assert_eq!(w.cmd(&["LPUSH", "q", "1", "2", "3"]), ":3\r\n");
    assert_eq!(
        c.read_reply(),
        "*2\r\n$1\r\nq\r\n*3\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n1\r\n"
    );
    wait_blocked(&s, 0);
    assert_eq!(clients_info_field(&s, "total_blocking_keys"), "0");
}

/// Every list, zset and stream blocking command that times out answers a null array,
/// BLMOVE and BRPOPLPUSH too (Redis's replyToBlockedClientTimedOut), though they
/// answer a null bulk when they cannot block (MULTI, scripts).
#[test]
fn timeouts_reply_null_forms() {
    let s = TestServer::start();
    for (proto, arr, bulk) in [(2u8, "*-1\r\n", "$-1\r\n"), (3, "_\r\n", "_\r\n")] {
        let mut c = s.raw(proto);
        assert_eq!(c.cmd(&["BLPOP", "a", "b", "0.01"]), arr);
        assert_eq!(c.cmd(&["BRPOP", "a", "0.01"]), arr);
        assert_eq!(c.cmd(&["BLMPOP", "0.01", "2", "a", "b", "RIGHT"]), arr);
        assert_eq!(c.cmd(&["BLMOVE", "a", "b", "LEFT", "RIGHT", "0.01"]), arr);
        assert_eq!(c.cmd(&["BRPOPLPUSH", "a", "b", "0.01"]), arr);
        assert_eq!(c.cmd(&["BZPOPMIN", "a", "0.01"]), arr);
        assert_eq!(c.cmd(&["XREAD", "BLOCK", "10", "STREAMS", "a", "$"]), arr);
        assert_eq!(c.cmd(&["MULTI"]), "+OK\r\n");
        assert_eq!(
            c.cmd(&["BLMOVE", "a", "b", "LEFT", "RIGHT", "0"]),
            "+QUEUED\r\n"
        );
        assert_eq!(c.cmd(&["BLPOP", "a", "0"]), "+QUEUED\r\n");
        assert_eq!(c.cmd(&["EXEC"]), format!("*2\r\n{bulk}{arr}"));
        // After the timeout the connection works normally.
        assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    }
    wait_blocked(&s, 0);
}

#[test]
fn timeout_errors() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (
                &["BLPOP", "k", "-1"],
                "-ERR timeout is negative\r\n",
                "-ERR timeout is negative\r\n",
            ),
            (
                &["BLPOP", "k", "-inf"],
                "-ERR timeout is negative\r\n",
                "-ERR timeout is negative\r\n",
            ),
            (
                &["BLPOP", "k", "abc"],
                "-ERR timeout is not a float or out of range\r\n",
                "-ERR timeout is not a float or out of range\r\n",
            ),
            (
                &["BLPOP", "k", "nan"],
                "-ERR timeout is not a float or out of range\r\n",
                "-ERR timeout is not a float or out of range\r\n",
            ),
            (
                &["BLPOP", "k", "inf"],
                "-ERR timeout is out of range\r\n",
                "-ERR timeout is out of range\r\n",
            ),
            (
                &["BLMOVE", "a", "b", "LEFT", "LEFT", "-0.5"],
                "-ERR timeout is negative\r\n",
                "-ERR timeout is negative\r\n",
            ),
            (
                &["BLMOVE", "a", "b", "UP", "LEFT", "-1"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["BRPOPLPUSH", "a", "b", "x"],
                "-ERR timeout is not a float or out of range\r\n",
                "-ERR timeout is not a float or out of range\r\n",
            ),
            (
                &["BLMPOP", "-1", "1", "k", "LEFT"],
                "-ERR timeout is negative\r\n",
                "-ERR timeout is negative\r\n",
            ),
            (
                &["BLMPOP", "0", "0", "k", "LEFT"],
                "-ERR numkeys should be greater than 0\r\n",
                "-ERR numkeys should be greater than 0\r\n",
            ),
            (&["SET", "s", "x"], "+OK\r\n", "+OK\r\n"),
            (
                &["BLPOP", "nokey", "s", "0"],
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            ),
            (
                &["BLMOVE", "s", "b", "LEFT", "LEFT", "0"],
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            ),
            (&["RPUSH", "q", "1", "2"], ":2\r\n", ":2\r\n"),
            (
                &["BLPOP", "nokey", "q", "0"],
                "*2\r\n$1\r\nq\r\n$1\r\n1\r\n",
                "*2\r\n$1\r\nq\r\n$1\r\n1\r\n",
            ),
            (
                &["BLMOVE", "q", "d", "LEFT", "LEFT", "0"],
                "$1\r\n2\r\n",
                "$1\r\n2\r\n",
            ),
            (&["BRPOPLPUSH", "d", "d", "0"], "$1\r\n2\r\n", "$1\r\n2\r\n"),
            (
                &["BLMPOP", "0", "1", "d", "LEFT", "COUNT", "9"],
                "*2\r\n$1\r\nd\r\n*1\r\n$1\r\n2\r\n",
                "*2\r\n$1\r\nd\r\n*1\r\n$1\r\n2\r\n",
            ),
        ],
    );
}

#[test]
fn chained_blmove() {
    let s = TestServer::start();
    let mut a = s.raw(2);
    let mut b = s.raw(2);
    let mut c = s.raw(2);
    a.send(&["BLMOVE", "src", "mid", "LEFT", "RIGHT", "0"]);
    wait_blocked(&s, 1);
    b.send(&["BRPOPLPUSH", "mid", "dst", "0"]);
    wait_blocked(&s, 2);
    c.send(&["BLPOP", "dst", "0"]);
    wait_blocked(&s, 3);
    let mut w = s.raw(2);
    assert_eq!(w.cmd(&["LPUSH", "src", "v"]), ":1\r\n");
    assert_eq!(a.read_reply(), "$1\r\nv\r\n");
    assert_eq!(b.read_reply(), "$1\r\nv\r\n");
    assert_eq!(c.read_reply(), "*2\r\n$3\r\ndst\r\n$1\r\nv\r\n");
    assert_eq!(w.cmd(&["EXISTS", "src", "mid", "dst"]), ":0\r\n");
    wait_blocked(&s, 0);
}

#[test]
fn client_unblock_and_pipelined_input() {
    let s = TestServer::start();
    let mut a = s.raw(2);
    let id = a.cmd(&["CLIENT", "ID"]);
    let id = id[1..id.len() - 2].to_string();
    let mut w = s.raw(2);
    assert_eq!(w.cmd(&["CLIENT", "UNBLOCK", &id]), ":0\r\n");
    // BLPOP and a PING in one write: the PING waits until the client is unblocked.
    a.send(&["BLPOP", "q", "0"]);
    a.send(&["PING"]);
    wait_blocked(&s, 1);
    assert_eq!(
        w.cmd(&["CLIENT", "UNBLOCK", &id, "FOO"]),
        "-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n"
    );
    assert_eq!(w.cmd(&["CLIENT", "UNBLOCK", &id]), ":1\r\n");
    assert_eq!(a.read_reply(), "*-1\r\n");
    assert_eq!(a.read_reply(), "+PONG\r\n");
    a.send(&["BLMOVE", "q", "r", "LEFT", "LEFT", "0"]);
    wait_blocked(&s, 1);
    assert_eq!(w.cmd(&["CLIENT", "UNBLOCK", &id, "ERROR"]), ":1\r\n");
    assert_eq!(
        a.read_reply(),
        "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    );
    a.send(&["BLPOP", "q", "0"]);
    wait_blocked(&s, 1);
    assert_eq!(w.cmd(&["CLIENT", "UNBLOCK", &id, "timeout"]), ":1\r\n");
    assert_eq!(a.read_reply(), "*-1\r\n");
    wait_blocked(&s, 0);
}

#[test]
fn disconnect_while_blocked_cleans_up() {
    let s = TestServer::start();
    {
        let mut a = s.raw(2);
        a.send(&["BLPOP", "q", "0"]);
        wait_blocked(&s, 1);
    }
    wait_blocked(&s, 0);
    assert_eq!(clients_info_field(&s, "total_blocking_keys"), "0");
    let mut w = s.raw(2);
    assert_eq!(w.cmd(&["RPUSH", "q", "x"]), ":1\r\n");
    assert_eq!(w.cmd(&["LLEN", "q"]), ":1\r\n");
}

#[test]
fn wrong_type_does_not_wake_list_waiters() {
    let s = TestServer::start();
    let mut a = s.raw(2);
    a.send(&["BLPOP", "k", "0"]);
    wait_blocked(&s, 1);
    let mut w = s.raw(2);
    assert_eq!(w.cmd(&["SET", "k", "string"]), "+OK\r\n");
    assert_eq!(w.cmd(&["DEL", "k"]), ":1\r\n");
    wait_blocked(&s, 1);
    assert_eq!(w.cmd(&["RPUSH", "k", "v"]), ":1\r\n");
    assert_eq!(a.read_reply(), "*2\r\n$1\r\nk\r\n$1\r\nv\r\n");
}

/// In-process: a key pushed and emptied again by commands that run inside one
/// top-level command (as in MULTI/EXEC or a script) wakes nobody; blocking is denied
/// through the `deny_blocking` hook.
#[test]
fn ready_keys_are_handled_after_the_top_level_command() {
    use cinnabar::exec::Executor;
    let mut ex = Executor::new(cinnabar::config::Config::default());
    let a = ex.connect("a".into(), "l".into(), -1);
    let b = ex.connect("b".into(), "l".into(), -1);
    ex.execute_and_reply(a, &[b"BLPOP", b"q", b"0"]);
    assert!(ex.blocking.is_blocked(a));
    assert!(!ex.can_run(a, &[b"PING"]));
    // Nested commands (as EXEC would run them): push, then empty the key again.
    let rpush = cinnabar::commands::lookup(b"rpush").unwrap();
    let del = cinnabar::commands::lookup(b"del").unwrap();
    ex.call(b, rpush, &[b"RPUSH", b"q", b"x"]);
    ex.call(b, del, &[b"DEL", b"q"]);
    ex.execute_and_reply(b, &[b"PING"]);
    assert!(ex.blocking.is_blocked(a));
    ex.execute_and_reply(b, &[b"RPUSH", b"q", b"y"]);
    assert!(!ex.blocking.is_blocked(a));
    assert_eq!(ex.client(a).out, b"*2\r\n$1\r\nq\r\n$1\r\ny\r\n");

    ex.blocking.deny_blocking = true;
    use cinnabar::protocol::Reply;
    assert_eq!(ex.execute(a, &[b"BLPOP", b"q", b"0"]), Reply::NullArray);
    assert_eq!(
        ex.execute(a, &[b"BLMPOP", b"0", b"1", b"q", b"LEFT"]),
        Reply::NullArray
    );
    assert_eq!(
        ex.execute(a, &[b"BLMOVE", b"q", b"r", b"LEFT", b"LEFT", b"0"]),
        Reply::Null
    );
    assert_eq!(
        ex.execute(a, &[b"BRPOPLPUSH", b"q", b"r", b"0"]),
        Reply::Null
    );
    assert!(!ex.blocking.is_blocked(a));
}

/// SWAPDB wakes clients blocked on a key that the swap brings into their database,
/// and CLIENT LIST shows blocked clients with the `b` flag.
#[test]
fn swapdb_wakes_waiters_and_client_list_flags() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["SELECT", "1"]);
    c.cmd(&["RPUSH", "q", "from-db1"]);
    let mut waiter = s.raw(2);
    waiter.send(&["BLPOP", "q", "0"]);
    for _ in 0..200 {
        if c.cmd(&["INFO", "clients"])
            .contains("blocked_clients:1\r\n")
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let list = c.cmd(&["CLIENT", "LIST"]);
    assert!(
        list.contains(" flags=b ") && list.contains(" cmd=blpop "),
        "{list}"
    );
    assert_eq!(c.cmd(&["SWAPDB", "0", "1"]), "+OK\r\n");
    assert_eq!(waiter.read_reply(), "*2\r\n$1\r\nq\r\n$8\r\nfrom-db1\r\n");
}

/// LMPOP and BLMPOP (served at once or after blocking) are written as the LPOP/RPOP
/// with a count that has their effect, as Redis writes them; a timed-out one is not
/// written at all.
#[test]
fn lmpop_and_blmpop_are_written_as_pops_with_a_count() {
    let dir = temp_dir("lmpop-aof");
    let s = TestServer::start_in(&dir, &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.raw(2);
    let mut w = s.raw(2);
    c.cmd(&["RPUSH", "a", "1", "2", "3"]);
    c.cmd(&["LMPOP", "2", "none", "a", "RIGHT", "COUNT", "10"]);
    c.cmd(&["RPUSH", "a", "x", "y"]);
    c.cmd(&["BLMPOP", "0", "1", "a", "LEFT"]);
    c.send(&["BLMPOP", "0", "2", "none", "b", "LEFT", "COUNT", "5"]);
    wait_blocked(&s, 1);
    w.cmd(&["RPUSH", "b", "p", "q"]);
    assert_eq!(
        c.read_reply(),
        "*2\r\n$1\r\nb\r\n*2\r\n$1\r\np\r\n$1\r\nq\r\n"
    );
    assert_eq!(c.cmd(&["BLMPOP", "0.01", "1", "none", "LEFT"]), "*-1\r\n");
    c.cmd(&["SET", "end", "1"]);
    let incr = std::fs::read(dir.join("appendonlydir/appendonly.aof.1.incr.aof")).unwrap();
    let text = String::from_utf8_lossy(&incr);
    let cmds: Vec<&str> = text
        .split("\r\n")
        .filter(|l| !l.starts_with('*') && !l.starts_with('$') && !l.is_empty())
        .collect();
    assert_eq!(
        cmds.join(" "),
        "SELECT 0 RPUSH a 1 2 3 RPOP a 3 RPUSH a x y LPOP a 1 RPUSH b p q LPOP b 2 SET end 1"
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A command that blocks counts one call in INFO commandstats, when it is answered:
/// served by a push, timed out, or unblocked with an error (a failed call then).
#[test]
fn blocked_commands_count_one_call_when_answered() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let mut w = s.raw(2);
    let stat = |w: &mut RawConn, cmd: &str| -> String {
        let info = w.cmd(&["INFO", "commandstats"]);
        info.lines()
            .find(|l| l.starts_with(&format!("cmdstat_{cmd}:")))
            .map(|l| {
                l.split(',')
                    .filter(|kv| !kv.starts_with("usec"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default()
    };
    c.send(&["BLPOP", "q", "0"]);
    wait_blocked(&s, 1);
    assert_eq!(stat(&mut w, "blpop"), "");
    w.cmd(&["LPUSH", "q", "1"]);
    assert_eq!(c.read_reply(), "*2\r\n$1\r\nq\r\n$1\r\n1\r\n");
    assert_eq!(
        stat(&mut w, "blpop"),
        "cmdstat_blpop:calls=1,rejected_calls=0,failed_calls=0"
    );
    assert_eq!(c.cmd(&["BRPOP", "q", "0.01"]), "*-1\r\n");
    assert_eq!(
        stat(&mut w, "brpop"),
        "cmdstat_brpop:calls=1,rejected_calls=0,failed_calls=0"
    );
    c.send(&["BLMOVE", "q", "d", "LEFT", "LEFT", "0"]);
    wait_blocked(&s, 1);
    let list = w.cmd(&["CLIENT", "LIST"]);
    let blocked_id = list
        .lines()
        .find(|l| l.contains("cmd=blmove"))
        .and_then(|l| l.split(' ').find_map(|kv| kv.strip_prefix("id=")))
        .unwrap()
        .to_string();
    assert_eq!(
        w.cmd(&["CLIENT", "UNBLOCK", &blocked_id, "ERROR"]),
        ":1\r\n"
    );
    assert_eq!(
        c.read_reply(),
        "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    );
    assert_eq!(
        stat(&mut w, "blmove"),
        "cmdstat_blmove:calls=1,rejected_calls=0,failed_calls=1"
    );
}

/// LMOVE and a served BLMOVE count one change for persistence, as in Redis.
#[test]
fn lmove_counts_one_change() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let mut w = s.raw(2);
    let dirty = |w: &mut RawConn| -> i64 {
        let info = w.cmd(&["INFO", "persistence"]);
        info.lines()
            .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    w.cmd(&["RPUSH", "src", "a", "b"]);
    let d0 = dirty(&mut w);
    assert_eq!(
        w.cmd(&["LMOVE", "src", "dst", "LEFT", "RIGHT"]),
        "$1\r\na\r\n"
    );
    assert_eq!(dirty(&mut w), d0 + 1);
    // Emptying the source and rotating a list on itself count one change as well.
    assert_eq!(w.cmd(&["RPOPLPUSH", "dst", "dst"]), "$1\r\na\r\n");
    assert_eq!(
        w.cmd(&["LMOVE", "src", "dst", "LEFT", "LEFT"]),
        "$1\r\nb\r\n"
    );
    assert_eq!(dirty(&mut w), d0 + 3);
    c.send(&["BLMOVE", "empty", "dst", "LEFT", "LEFT", "0"]);
    wait_blocked(&s, 1);
    w.cmd(&["LPUSH", "empty", "z"]);
    assert_eq!(c.read_reply(), "$1\r\nz\r\n");
    assert_eq!(dirty(&mut w), d0 + 5);
}
