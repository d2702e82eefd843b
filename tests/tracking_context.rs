//! Client tracking in the context of the command that runs: keys read by scripts are
//! tracked for the script's caller, NOLOOP spares the caller's own script writes,
//! invalidations raised before a command runs (eviction) precede its reply while
//! those raised by it or by a woken blocked command follow it, pushes reach clients
//! whose replies are off, and DEBUG PAUSE-CRON holds the tracking table's cron trim.

mod common;
use common::*;

fn inv(keys: &[&str]) -> String {
    let mut s = format!(">2\r\n$10\r\ninvalidate\r\n*{}\r\n", keys.len());
    for k in keys {
        s.push_str(&format!("${}\r\n{k}\r\n", k.len()));
    }
    s
}

#[test]
fn scripts_track_keys_their_commands_read_for_the_caller() {
    let s = TestServer::start();
    let mut t = s.raw(3);
    let mut w = s.raw(2);
    t.cmd(&["CLIENT", "TRACKING", "on"]);
    w.cmd(&["MSET", "k1", "1", "k2", "1"]);
    // A script that only writes tracks nothing, even with keys declared.
    t.cmd(&["EVAL", "redis.call('set', 'k3', 'bar')", "2", "k1", "k2"]);
    w.cmd(&["MSET", "k2", "2", "k1", "2"]);
    assert_eq!(t.cmd(&["PING"]), "+PONG\r\n");
    // One that reads tracks just what it read.
    t.cmd(&["EVAL", "redis.call('get', 'k2')", "2", "k1", "k2"]);
    w.cmd(&["MSET", "k2", "3", "k3", "3"]);
    assert_eq!(t.read_reply(), inv(&["k2"]));
    assert_eq!(t.cmd(&["PING"]), "+PONG\r\n");
    // EVAL_RO counts only through the commands it runs.
    t.cmd(&["EVAL_RO", "redis.call('ping')", "2", "k1", "k2"]);
    w.cmd(&["MSET", "k2", "4", "k1", "4"]);
    assert_eq!(t.cmd(&["PING"]), "+PONG\r\n");
    t.cmd(&["EVAL_RO", "redis.call('get', 'k1')", "1", "k1"]);
    w.cmd(&["SET", "k1", "5"]);
    assert_eq!(t.read_reply(), inv(&["k1"]));
}

#[test]
fn noloop_spares_writes_made_by_the_callers_own_script() {
    let s = TestServer::start();
    let mut t = s.raw(3);
    t.cmd(&["CLIENT", "TRACKING", "on", "NOLOOP"]);
    t.cmd(&["SET", "key1", "1"]);
    assert_eq!(t.cmd(&["GET", "key1"]), "$1\r\n1\r\n");
    assert_eq!(
        t.cmd(&["EVAL", "return redis.call('set', 'key1', '2')", "1", "key1"]),
        "+OK\r\n"
    );
    // No invalidation sits before the reply.
    assert_eq!(t.cmd(&["GET", "key1"]), "$1\r\n2\r\n");
}

#[test]
fn eviction_invalidation_comes_before_the_reply() {
    let s = TestServer::start();
    let mut t = s.raw(3);
    t.cmd(&["CLIENT", "TRACKING", "on"]);
    let used: i64 = t
        .cmd(&["INFO", "memory"])
        .split("\r\n")
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .parse()
        .unwrap();
    t.cmd(&[
        "CONFIG",
        "SET",
        "maxmemory",
        &(used + 100 * 1024).to_string(),
    ]);
    t.cmd(&["CONFIG", "SET", "maxmemory-policy", "volatile-random"]);
    t.cmd(&["SETEX", "volatile-key", "10000", "x"]);
    t.cmd(&["GET", "volatile-key"]);
    // 200 KB: the next command finds memory over the limit and evicts the tracked key
    // before it runs, so the invalidation precedes its reply.
    assert_eq!(t.cmd(&["SETBIT", "big-key", "1600000", "0"]), ":0\r\n");
    t.send(&["GETBIT", "big-key", "0"]);
    assert_eq!(t.read_reply(), inv(&["volatile-key"]));
    assert_eq!(t.read_reply(), ":0\r\n");
    t.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
}

#[test]
fn woken_blocked_command_gets_its_reply_before_the_invalidation() {
    let s = TestServer::start();
    let mut b = s.raw(3);
    let mut w = s.raw(2);
    w.cmd(&["RPUSH", "list2", "a"]);
    b.cmd(&["CLIENT", "TRACKING", "on"]);
    b.cmd(&["LRANGE", "list2", "0", "-1"]);
    b.send(&["BLMOVE", "list1", "list2", "left", "left", "0"]);
    wait_blocked(&s, 1);
    w.cmd(&["RPUSH", "list1", "foo"]);
    assert_eq!(b.read_reply(), "$3\r\nfoo\r\n");
    assert_eq!(b.read_reply(), inv(&["list2"]));
}

#[test]
fn invalidations_reach_a_client_whose_replies_are_off() {
    let s = TestServer::start();
    let mut t = s.raw(3);
    let mut w = s.raw(2);
    t.cmd(&["CLIENT", "TRACKING", "on"]);
    w.cmd(&["SET", "foo", "bar"]);
    t.cmd(&["GET", "foo"]);
    t.send(&["CLIENT", "REPLY", "OFF"]);
    w.cmd(&["SET", "foo", "bar2"]);
    assert_eq!(t.read_reply(), inv(&["foo"]));
    assert_eq!(t.cmd(&["CLIENT", "REPLY", "ON"]), "+OK\r\n");
}

#[test]
fn subscribe_confirmations_are_pushes_that_reply_off_does_not_silence() {
    let s = TestServer::start();
    for proto in [2u8, 3] {
        let mut c = s.raw(proto);
        let mut p = s.raw(2);
        c.send(&["CLIENT", "REPLY", "OFF"]);
        let head = if proto == 3 { ">" } else { "*" };
        assert_eq!(
            c.cmd(&["SUBSCRIBE", "ch"]),
            format!("{head}3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n")
        );
        assert_eq!(p.cmd(&["PUBLISH", "ch", "hi"]), ":1\r\n");
        assert_eq!(
            c.read_reply(),
            format!("{head}3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n")
        );
        // Ordinary replies stay silenced: PING in RESP3 would answer, here nothing
        // comes until the unsubscribe confirmation.
        c.send(&["SET", "x", "1"]);
        assert_eq!(
            c.cmd(&["UNSUBSCRIBE", "ch"]),
            format!("{head}3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n")
        );
    }
}

#[test]
fn pause_cron_holds_the_tracking_table_trim_for_queued_commands() {
    let s = TestServer::start();
    let mut r = s.raw(2);
    let mut t = s.raw(3);
    assert_eq!(r.cmd(&["DEBUG", "PAUSE-CRON", "1"]), "+OK\r\n");
    r.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "2"]);
    t.cmd(&["CLIENT", "TRACKING", "on"]);
    t.cmd(&["MGET", "1{tag}", "2{tag}"]);
    t.cmd(&["MULTI"]);
    r.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "1"]);
    // The cron would trim the table now; paused, the next command does, before it is
    // queued.
    t.send(&["PING"]);
    let first = t.read_reply();
    assert!(
        first.starts_with(">2\r\n$10\r\ninvalidate\r\n*1\r\n"),
        "{first}"
    );
    assert_eq!(t.read_reply(), "+QUEUED\r\n");
    assert_eq!(t.cmd(&["EXEC"]), "*1\r\n+PONG\r\n");
    assert_eq!(r.cmd(&["DEBUG", "PAUSE-CRON", "0"]), "+OK\r\n");
    assert_eq!(r.cmd(&["DEBUG", "PAUSE-CRON", "x"]), "+OK\r\n");
}
