//! MULTI/EXEC/DISCARD/WATCH end to end, with several clients: exact replies for
//! queueing errors (EXECABORT) versus runtime errors, and WATCH invalidated by every
//! kind of write, by expiry, FLUSHDB/FLUSHALL, SWAPDB and RENAME.

mod common;
use common::*;

#[test]
fn queueing_errors_and_runtime_errors() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (
                &["EXEC"],
                "-ERR EXEC without MULTI\r\n",
                "-ERR EXEC without MULTI\r\n",
            ),
            (
                &["DISCARD"],
                "-ERR DISCARD without MULTI\r\n",
                "-ERR DISCARD without MULTI\r\n",
            ),
            (&["MULTI"], "+OK\r\n", "+OK\r\n"),
            (
                &["MULTI"],
                "-ERR MULTI calls can not be nested\r\n",
                "-ERR MULTI calls can not be nested\r\n",
            ),
            (
                &["WATCH", "a"],
                "-ERR WATCH inside MULTI is not allowed\r\n",
                "-ERR WATCH inside MULTI is not allowed\r\n",
            ),
            (&["SET", "a", "1"], "+QUEUED\r\n", "+QUEUED\r\n"),
            (
                &["SET", "a"],
                "-ERR wrong number of arguments for 'set' command\r\n",
                "-ERR wrong number of arguments for 'set' command\r\n",
            ),
            (
                &["NOPE"],
                "-ERR unknown command 'NOPE', with args beginning with: \r\n",
                "-ERR unknown command 'NOPE', with args beginning with: \r\n",
            ),
            (
                &["EXEC"],
                "-EXECABORT Transaction discarded because of previous errors.\r\n",
                "-EXECABORT Transaction discarded because of previous errors.\r\n",
            ),
            (&["GET", "a"], "$-1\r\n", "_\r\n"),
            // Runtime errors are returned in place; the rest still runs.
            (&["MULTI"], "+OK\r\n", "+OK\r\n"),
            (&["SET", "a", "x"], "+QUEUED\r\n", "+QUEUED\r\n"),
            (&["INCR", "a"], "+QUEUED\r\n", "+QUEUED\r\n"),
            (&["GET", "a"], "+QUEUED\r\n", "+QUEUED\r\n"),
            (
                &["EXEC"],
                "*3\r\n+OK\r\n-ERR value is not an integer or out of range\r\n$1\r\nx\r\n",
                "*3\r\n+OK\r\n-ERR value is not an integer or out of range\r\n$1\r\nx\r\n",
            ),
            (&["MULTI"], "+OK\r\n", "+OK\r\n"),
            (&["SET", "a", "y"], "+QUEUED\r\n", "+QUEUED\r\n"),
            (&["DISCARD"], "+OK\r\n", "+OK\r\n"),
            (&["GET", "a"], "$1\r\nx\r\n", "$1\r\nx\r\n"),
            (&["MULTI"], "+OK\r\n", "+OK\r\n"),
            (&["EXEC"], "*0\r\n", "*0\r\n"),
            (&["MULTI"], "+OK\r\n", "+OK\r\n"),
            (&["SELECT", "1"], "+QUEUED\r\n", "+QUEUED\r\n"),
            (&["SET", "in1", "v"], "+QUEUED\r\n", "+QUEUED\r\n"),
            (&["MONITOR"], "+QUEUED\r\n", "+QUEUED\r\n"),
            (
                &["EXEC"],
                "*3\r\n+OK\r\n+OK\r\n-ERR MONITOR isn't allowed for DENY BLOCKING client\r\n",
                "*3\r\n+OK\r\n+OK\r\n-ERR MONITOR isn't allowed for DENY BLOCKING client\r\n",
            ),
            (&["EXISTS", "in1"], ":1\r\n", ":1\r\n"),
        ],
    );
}

#[test]
fn client_list_shows_multi_and_watch() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["WATCH", "a", "b"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["PING"]);
    let mut o = s.raw(2);
    let list = o.cmd(&["CLIENT", "LIST"]);
    assert!(
        list.contains("flags=x db=0 sub=0 psub=0 ssub=0 multi=1 watch=2"),
        "{list}"
    );
    let info = o.cmd(&["INFO", "clients"]);
    assert!(info.contains("watching_clients:1\r\n"), "{info}");
    assert!(info.contains("total_watched_keys:2\r\n"), "{info}");
}

/// Runs WATCH key on `w`, then `write` from another client, then MULTI/PING/EXEC on
/// `w`, returning EXEC's reply.
fn watch_then(s: &TestServer, setup: &[&[&str]], key: &str, write: &[&[&str]]) -> String {
    let mut w = s.raw(2);
    let mut other = s.raw(2);
    other.cmd(&["FLUSHALL"]);
    for c in setup {
        other.cmd(c);
    }
    assert_eq!(w.cmd(&["WATCH", key]), "+OK\r\n");
    for c in write {
        other.cmd(c);
    }
    assert_eq!(w.cmd(&["MULTI"]), "+OK\r\n");
    assert_eq!(w.cmd(&["PING"]), "+QUEUED\r\n");
    w.cmd(&["EXEC"])
}

const ABORTED: &str = "*-1\r\n";
const RAN: &str = "*1\r\n+PONG\r\n";

#[test]
fn watch_is_invalidated_by_every_kind_of_write() {
    let s = TestServer::start();
    const K: &[&str] = &["SET", "k", "1"];
    // (setup commands, the write under test, the expected EXEC reply)
    type Case<'a> = (&'a [&'a [&'a str]], &'a [&'a [&'a str]], &'a str);
    let cases: Vec<Case> = vec![
        (&[K], &[&["SET", "k", "2"]], ABORTED),
        (&[K], &[&["SET", "other", "2"]], RAN),
        (&[K], &[&["GET", "k"]], RAN),
        (&[], &[&["SET", "k", "1"]], ABORTED),
        (&[K], &[&["DEL", "k"]], ABORTED),
        (&[], &[&["DEL", "k"]], RAN),
        (&[K], &[&["INCR", "k"]], ABORTED),
        (&[K], &[&["APPEND", "k", "x"]], ABORTED),
        (&[K], &[&["EXPIRE", "k", "100"]], ABORTED),
        (&[K], &[&["PERSIST", "k"]], RAN),
        (&[&["SET", "src", "1"]], &[&["RENAME", "src", "k"]], ABORTED),
        (&[K], &[&["RENAME", "k", "dst"]], ABORTED),
        (&[K], &[&["MOVE", "k", "1"]], ABORTED),
        (&[&["SET", "src", "1"]], &[&["COPY", "src", "k"]], ABORTED),
        (&[K], &[&["FLUSHDB"]], ABORTED),
        (&[K], &[&["FLUSHALL"]], ABORTED),
        // Flushing does not touch a watched key that does not exist.
        (&[], &[&["FLUSHALL"]], RAN),
        (&[K], &[&["SELECT", "1"], &["FLUSHDB"]], RAN),
        (&[K], &[&["SWAPDB", "0", "1"]], ABORTED),
        (
            &[&["SELECT", "1"], &["SET", "k", "1"]],
            &[&["SWAPDB", "0", "1"]],
            ABORTED,
        ),
        (&[], &[&["SWAPDB", "0", "1"]], RAN),
    ];
    for (setup, write, want) in cases {
        assert_eq!(
            watch_then(&s, setup, "k", write),
            want,
            "setup {setup:?} write {write:?}"
        );
    }
}

#[test]
fn watch_semantics_unwatch_and_own_writes() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let mut o = s.raw(2);
    // UNWATCH forgets; EXEC and DISCARD unwatch.
    c.cmd(&["WATCH", "k"]);
    c.cmd(&["UNWATCH"]);
    o.cmd(&["SET", "k", "1"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["PING"]);
    assert_eq!(c.cmd(&["EXEC"]), RAN);
    c.cmd(&["WATCH", "k"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["DISCARD"]);
    o.cmd(&["SET", "k", "2"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["PING"]);
    assert_eq!(c.cmd(&["EXEC"]), RAN);
    // The watching client's own write also counts.
    c.cmd(&["WATCH", "k"]);
    c.cmd(&["SET", "k", "3"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["GET", "k"]);
    assert_eq!(c.cmd(&["EXEC"]), ABORTED);
    // RESP3 null for an aborted EXEC.
    let mut c3 = s.raw(3);
    c3.cmd(&["WATCH", "k"]);
    o.cmd(&["SET", "k", "4"]);
    c3.cmd(&["MULTI"]);
    c3.cmd(&["PING"]);
    assert_eq!(c3.cmd(&["EXEC"]), "_\r\n");
}

#[test]
fn watch_is_invalidated_by_expiry() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let mut o = s.raw(2);
    // Lazy expiry (active expiry off): the key is still present but past its TTL.
    o.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    o.cmd(&["SET", "k", "1", "PX", "300"]);
    c.cmd(&["WATCH", "k"]);
    std::thread::sleep(std::time::Duration::from_millis(400));
    c.cmd(&["MULTI"]);
    c.cmd(&["PING"]);
    assert_eq!(c.cmd(&["EXEC"]), ABORTED);
    // Active expiry deletes it in the background.
    o.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    o.cmd(&["SET", "k", "1", "PX", "300"]);
    c.cmd(&["WATCH", "k"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while o.cmd(&["DBSIZE"]) != ":0\r\n" {
        assert!(std::time::Instant::now() < deadline, "key never expired");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    c.cmd(&["MULTI"]);
    c.cmd(&["PING"]);
    assert_eq!(c.cmd(&["EXEC"]), ABORTED);
    // A key already expired when WATCHed and then deleted by expiry is no change.
    o.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    o.cmd(&["SET", "k", "1", "PX", "10"]);
    std::thread::sleep(std::time::Duration::from_millis(50));
    c.cmd(&["WATCH", "k"]);
    assert_eq!(o.cmd(&["GET", "k"]), "$-1\r\n");
    c.cmd(&["MULTI"]);
    c.cmd(&["PING"]);
    assert_eq!(c.cmd(&["EXEC"]), RAN);
}

#[test]
fn subscribe_inside_multi_and_queued_replies() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["MULTI"]);
    c.cmd(&["SUBSCRIBE", "x"]);
    assert_eq!(
        c.cmd(&["EXEC"]),
        "*1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n"
    );
}

#[test]
fn same_as_redis() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    assert_same_as_redis(
        &s,
        &r,
        &[
            &["MULTI"],
            &["SET", "a", "1"],
            &["INCR", "a"],
            &["EXEC"],
            &["MULTI"],
            &["GET"],
            &["EXEC"],
            &["WATCH", "a"],
            &["SET", "a", "2"],
            &["MULTI"],
            &["GET", "a"],
            &["EXEC"],
            &["UNWATCH"],
            &["DISCARD"],
        ],
    );
}

/// Blocking commands inside MULTI do not block, and a waiter woken by a transaction
/// is served after EXEC, seeing the transaction's final state.
#[test]
fn blocking_commands_and_transactions() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.check(&[
        (&["MULTI"], "+OK\r\n"),
        (&["BLPOP", "empty", "0"], "+QUEUED\r\n"),
        (
            &["BLMOVE", "empty", "x", "LEFT", "RIGHT", "0"],
            "+QUEUED\r\n",
        ),
        (&["EXEC"], "*2\r\n*-1\r\n$-1\r\n"),
    ]);
    let mut waiter = s.raw(2);
    waiter.send(&["BLPOP", "q", "0"]);
    // Wait until the server reports the waiter as blocked.
    for _ in 0..200 {
        if c.cmd(&["INFO", "clients"])
            .contains("blocked_clients:1\r\n")
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    c.check(&[
        (&["MULTI"], "+OK\r\n"),
        (&["RPUSH", "q", "a", "b"], "+QUEUED\r\n"),
        (&["LPOP", "q"], "+QUEUED\r\n"),
        (&["EXEC"], "*2\r\n:2\r\n$1\r\na\r\n"),
    ]);
    assert_eq!(waiter.read_reply(), "*2\r\n$1\r\nq\r\n$1\r\nb\r\n");
    assert_eq!(c.cmd(&["EXISTS", "q"]), ":0\r\n");
}

/// EXEC's commands all see the time EXEC started (Redis 7's command time snapshot).
#[test]
fn exec_time_is_frozen_for_expiry() {
    let s = TestServer::start_with(&["--enable-debug-command", "yes"]);
    let mut c = s.raw(2);
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", "mk", "v", "PX", "2"]);
    c.cmd(&["DEBUG", "SLEEP", "0.02"]);
    c.cmd(&["GET", "mk"]);
    c.cmd(&["PTTL", "mk"]);
    assert_eq!(c.cmd(&["EXEC"]), "*4\r\n+OK\r\n+OK\r\n$1\r\nv\r\n:2\r\n");
    assert_eq!(c.cmd(&["EXISTS", "mk"]), ":0\r\n");
}

/// EXEC is refused with EXECABORT when memory is over `maxmemory` and the queue holds
/// a command that may grow memory; a read-only queue still runs (Redis 7).
#[test]
fn exec_of_a_denyoom_queue_aborts_on_oom() {
    let s = TestServer::start_with(&["--appendonly", "no", "--save", ""]);
    let mut c = s.raw(2);
    let mut admin = s.raw(2);
    c.cmd(&["SET", "x", "0"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", "x", "1"]);
    c.cmd(&["GET", "x"]);
    admin.cmd(&["CONFIG", "SET", "maxmemory", "1"]);
    assert_eq!(
        c.cmd(&["EXEC"]),
        "-EXECABORT Transaction discarded because of: OOM command not allowed when used memory > 'maxmemory'.\r\n"
    );
    assert_eq!(c.cmd(&["MULTI"]), "+OK\r\n");
    c.cmd(&["GET", "x"]);
    assert_eq!(c.cmd(&["EXEC"]), "*1\r\n$1\r\n0\r\n");
    admin.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
}

/// A refused EXEC aborts its transaction naming the reason: a replica whose master link
/// went down (with replica-serve-stale-data no) after the commands were queued.
#[test]
fn exec_on_a_stale_replica_aborts() {
    let s = TestServer::start_with(&[
        "--appendonly",
        "no",
        "--save",
        "",
        "--replica-serve-stale-data",
        "no",
    ]);
    let mut c = s.raw(2);
    let mut admin = s.raw(2);
    c.cmd(&["SET", "xx", "1"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["GET", "xx"]);
    let unused = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    assert_eq!(
        admin.cmd(&["REPLICAOF", "127.0.0.1", &unused.to_string()]),
        "+OK\r\n"
    );
    assert_eq!(
        c.cmd(&["EXEC"]),
        "-EXECABORT Transaction discarded because of: MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n"
    );
    assert_eq!(admin.cmd(&["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    assert_eq!(c.cmd(&["GET", "xx"]), "$1\r\n1\r\n");
}
