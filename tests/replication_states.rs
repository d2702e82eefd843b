//! Replication states and rules seen by clients: a full resync held back by
//! `repl-diskless-sync-delay` (the replica in `handshake`, the master listing it
//! `wait_bgsave`), `repl-diskless-sync-max-replicas` starting it early, GETSET and
//! SET ... GET reaching replicas as SET, keys a writable replica's own clients give a
//! TTL expiring there (and a write over an expired key starting afresh) while the
//! master's keys wait for its DEL, and blocked clients answered when a master turns
//! replica.

mod common;

use common::*;

fn info(c: &mut RawConn, section: &str, field: &str) -> String {
    let text = c.cmd(&["INFO", section]);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.to_string()))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
}

fn link_up(port: u16) -> bool {
    RawConn::connect(port, 2)
        .cmd(&["INFO", "replication"])
        .contains("master_link_status:up")
}

fn role_state(port: u16) -> String {
    // ROLE of a replica: slave, host, port, state, offset.
    let role = RawConn::connect(port, 2).cmd(&["ROLE"]);
    role.split("\r\n").nth(7).unwrap_or_default().to_string()
}

#[test]
fn diskless_sync_delay_holds_the_replica_in_handshake() {
    let master = TestServer::start_with(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "1000",
    ]);
    let mut m = master.raw(2);
    assert_eq!(m.cmd(&["SET", "k", "v"]), "+OK\r\n");
    let replica = TestServer::start();
    let mut r = replica.raw(2);
    let port = master.port.to_string();
    assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
    wait_until(|| {
        RawConn::connect(master.port, 2)
            .cmd(&["INFO", "replication"])
            .contains(",state=wait_bgsave,")
    });
    // No +FULLRESYNC yet: the replica still waits for PSYNC's answer.
    assert_eq!(role_state(replica.port), "handshake");
    assert_eq!(info(&mut r, "replication", "master_link_status"), "down");
    // A second replica reaching repl-diskless-sync-max-replicas starts both.
    assert_eq!(
        m.cmd(&["CONFIG", "SET", "repl-diskless-sync-max-replicas", "2"]),
        "+OK\r\n"
    );
    let second = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_until(|| link_up(replica.port) && link_up(second.port));
    assert_eq!(r.cmd(&["GET", "k"]), "$1\r\nv\r\n");
    assert_eq!(info(&mut m, "stats", "sync_full"), "2");
}

#[test]
fn diskless_sync_delay_elapses() {
    let master = TestServer::start_with(&["--repl-diskless-sync-delay", "1"]);
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_until(|| link_up(replica.port));
    // Without the delay the next one starts at once.
    let mut m = master.raw(2);
    assert_eq!(
        m.cmd(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]),
        "+OK\r\n"
    );
    let second = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_until(|| link_up(second.port));
}

#[test]
fn getset_and_set_get_replicate_as_set() {
    let master = TestServer::start();
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_until(|| link_up(replica.port));
    let mut m = master.raw(2);
    let mut r = replica.raw(2);
    assert_eq!(r.cmd(&["CONFIG", "RESETSTAT"]), "+OK\r\n");
    m.check(&[
        (&["SET", "test", "foo"], "+OK\r\n"),
        (&["GETSET", "test", "bar"], "$3\r\nfoo\r\n"),
        (&["SET", "test", "vaz", "GET"], "$3\r\nbar\r\n"),
    ]);
    wait_until(|| r.cmd(&["GET", "test"]) == "$3\r\nvaz\r\n");
    let stats = r.cmd(&["INFO", "commandstats"]);
    assert!(stats.contains("cmdstat_set:calls=3,"), "{stats}");
    assert!(!stats.contains("cmdstat_getset"), "{stats}");
}

#[test]
fn writable_replica_expires_its_own_keys_not_the_masters() {
    let master = TestServer::start();
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_until(|| link_up(replica.port));
    let mut m = master.raw(2);
    let mut r = replica.raw(2);
    assert_eq!(m.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "+OK\r\n");
    assert_eq!(m.cmd(&["SET", "from_master", "v", "PX", "1"]), "+OK\r\n");
    wait_until(|| r.cmd(&["DBSIZE"]) == ":1\r\n");
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "replica-read-only", "no"]),
        "+OK\r\n"
    );
    m.check(&[(&["SELECT", "5"], "+OK\r\n")]);
    r.check(&[
        (&["SELECT", "5"], "+OK\r\n"),
        (&["SET", "own1", "1", "PX", "1"], "+OK\r\n"),
        (&["SET", "own2", "2"], "+OK\r\n"),
        (&["PEXPIRE", "own2", "1"], ":1\r\n"),
        (&["SET", "own3", "3", "EX", "1000"], "+OK\r\n"),
    ]);
    // The replica's own expired keys go by themselves; the one with time left stays.
    wait_until(|| r.cmd(&["DBSIZE"]) == ":1\r\n");
    assert_eq!(r.cmd(&["EXISTS", "own3"]), ":1\r\n");
    // The master's expired key reads as missing but waits for its DEL.
    r.check(&[
        (&["SELECT", "0"], "+OK\r\n"),
        (&["EXISTS", "from_master"], ":0\r\n"),
        (&["DBSIZE"], ":1\r\n"),
        // A write over it starts afresh: no stale TTL kept.
        (&["INCR", "from_master"], ":1\r\n"),
        (&["TTL", "from_master"], ":-1\r\n"),
    ]);
}

#[test]
fn read_only_replica_keeps_expired_keys_its_reads_meet() {
    let master = TestServer::start();
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_until(|| link_up(replica.port));
    let mut m = master.raw(2);
    let mut r = replica.raw(2);
    m.check(&[
        (&["DEBUG", "SET-ACTIVE-EXPIRE", "0"], "+OK\r\n"),
        (&["PFADD", "hll", "a", "b", "c"], ":1\r\n"),
        (&["PEXPIRE", "hll", "1"], ":1\r\n"),
    ]);
    wait_until(|| r.cmd(&["DBSIZE"]) == ":1\r\n" && r.cmd(&["EXISTS", "hll"]) == ":0\r\n");
    // PFCOUNT looks its key up for writing (it may refresh the cache).
    r.check(&[(&["PFCOUNT", "hll"], ":0\r\n"), (&["DBSIZE"], ":1\r\n")]);
}

#[test]
fn blocked_clients_are_answered_when_a_master_turns_replica() {
    let a = TestServer::start();
    let b = TestServer::start();
    let mut blocked = b.raw(2);
    blocked.send(&["BLPOP", "foo", "0"]);
    wait_blocked(&b, 1);
    let port = a.port.to_string();
    assert_eq!(b.raw(2).cmd(&["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
    assert_eq!(
        blocked.read_reply(),
        "-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n"
    );
    wait_until(|| link_up(b.port));
    assert_eq!(a.raw(2).cmd(&["RPUSH", "foo", "a", "b", "c"]), ":3\r\n");
    let mut r = b.raw(2);
    wait_until(|| r.cmd(&["LLEN", "foo"]) == ":3\r\n");
    let stats = r.cmd(&["INFO", "commandstats"]);
    assert!(
        stats.contains("cmdstat_blpop:calls=1,") && stats.contains("failed_calls=1"),
        "{stats}"
    );
}

#[test]
fn replica_keeps_a_key_whose_replicated_expiry_passed_before_it_applied_it() {
    let master = TestServer::start();
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_until(|| link_up(replica.port));
    let mut m = master.raw(2);
    let mut sleeper = replica.raw(2);
    assert_eq!(m.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "+OK\r\n");
    // The replica applies `SET k v PXAT <t>` after t has passed: the key is set with
    // its expiry (hidden), not deleted — the master's DEL decides.
    sleeper.send(&["DEBUG", "SLEEP", "0.5"]);
    assert_eq!(m.cmd(&["SET", "k", "v", "PX", "1"]), "+OK\r\n");
    assert_eq!(sleeper.read_reply(), "+OK\r\n");
    let mut r = replica.raw(2);
    let target = m.cmd(&["INFO", "replication"]);
    let off = target
        .lines()
        .find_map(|l| l.strip_prefix("master_repl_offset:"))
        .unwrap()
        .to_string();
    wait_until(|| info(&mut r, "replication", "slave_repl_offset") == off);
    r.check(&[(&["DBSIZE"], ":1\r\n"), (&["EXISTS", "k"], ":0\r\n")]);
}

#[test]
fn master_commands_failing_on_the_replica_are_logged_and_counted() {
    let master = TestServer::start();
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_until(|| link_up(replica.port));
    let mut m = master.raw(2);
    let mut r = replica.raw(2);
    // DEBUG REPLICATE reaches the replicas only.
    assert_eq!(m.cmd(&["DEBUG", "REPLICATE", "fake-command-1"]), "+OK\r\n");
    assert_eq!(m.cmd(&["SET", "foo", "bar"]), "+OK\r\n");
    assert_eq!(m.cmd(&["WAIT", "1", "5000"]), ":1\r\n");
    assert_eq!(m.cmd(&["EXISTS", "fake-command-1"]), ":0\r\n");
    assert_eq!(info(&mut r, "stats", "unexpected_error_replies"), "1");
    // A writable replica's own key the master's command cannot apply to.
    r.check(&[
        (&["CONFIG", "SET", "replica-read-only", "no"], "+OK\r\n"),
        (&["SET", "number2", "foo"], "+OK\r\n"),
        (&["SET", "own", "v", "EX", "100"], "+OK\r\n"),
    ]);
    assert_eq!(m.cmd(&["INCRBY", "number2", "1"]), ":1\r\n");
    assert_eq!(m.cmd(&["WAIT", "1", "5000"]), ":1\r\n");
    assert_eq!(r.cmd(&["GET", "number2"]), "$3\r\nfoo\r\n");
    assert_eq!(info(&mut r, "stats", "unexpected_error_replies"), "2");
    assert_eq!(info(&mut r, "stats", "slave_expires_tracked_keys"), "1");
}

#[test]
fn wait_timeout_range() {
    let master = TestServer::start();
    master.raw(2).check(&[
        (
            &["WAIT", "2", "9223372036854775808"],
            "-ERR timeout is not an integer or out of range\r\n",
        ),
        (
            &["WAIT", "2", "9223372036854775807"],
            "-ERR timeout is out of range\r\n",
        ),
        (&["WAIT", "2", "-1"], "-ERR timeout is negative\r\n"),
    ]);
}

/// While a diskless image streams in from the master (redis-server streams it as
/// its child produces it), a `repl-diskless-load swapdb` replica from another
/// history is loading (-LOADING, old data kept until the end), and one of the same
/// history loads asynchronously: it serves its old data and refuses only what would
/// disturb the swap (REPLICAOF, SAVE, CONFIG SET appendonly), as Redis 7's
/// integration/replication "Diskless load swapdb" tests expect.
#[test]
fn a_swapdb_replica_shows_loading_or_async_loading_while_the_image_streams() {
    if !redis_server_available() {
        return;
    }
    let master = RedisServer::start_with(|| {
        [
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
            "--rdbcompression",
            "no",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    });
    let mut m = master.raw(2);
    m.cmd(&["DEBUG", "POPULATE", "300", "master", "100000"]);
    let replica = TestServer::start_with(&["--repl-diskless-load", "swapdb"]);
    let mut r = replica.raw(2);
    r.cmd(&["SET", "mykey", "myvalue"]);
    // About 3 seconds of image: 10 ms per key.
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "10000"]);
    let port = master.port.to_string();
    assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
    wait_until(|| info(&mut r, "persistence", "loading") == "1");
    assert_eq!(info(&mut r, "persistence", "async_loading"), "0");
    const LOADING: &str = "-LOADING Redis is loading the dataset in memory\r\n";
    assert_eq!(r.cmd(&["GET", "mykey"]), LOADING);
    wait_until(|| link_up(replica.port));
    assert_eq!(info(&mut r, "persistence", "loading"), "0");
    assert_eq!(r.cmd(&["DBSIZE"]), ":300\r\n");

    // Same history: a full sync forced by a backlog too small for what was missed.
    m.cmd(&["CONFIG", "SET", "repl-backlog-size", "16384"]);
    m.cmd(&["CONFIG", "SET", "repl-diskless-sync-delay", "1"]);
    // 600 keys now: about 3 seconds again.
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "5000"]);
    m.cmd(&["CLIENT", "KILL", "TYPE", "replica"]);
    let filler = "x".repeat(200);
    for i in 0..300 {
        m.cmd(&["SET", &format!("k{i}"), &filler]);
    }
    wait_until(|| info(&mut r, "persistence", "async_loading") == "1");
    assert_eq!(info(&mut r, "persistence", "loading"), "0");
    // The old data is served; what would disturb the swap waits.
    assert_eq!(r.cmd(&["DBSIZE"]), ":300\r\n");
    assert_eq!(r.cmd(&["GET", "k1"]), "$-1\r\n");
    assert_eq!(r.cmd(&["CONFIG", "SET", "appendonly", "no"]), LOADING);
    assert_eq!(r.cmd(&["REPLICAOF", "NO", "ONE"]), LOADING);
    assert_eq!(r.cmd(&["SAVE"]), LOADING);
    assert_eq!(r.cmd(&["PING"]), "+PONG\r\n");
    wait_until(|| link_up(replica.port));
    assert_eq!(info(&mut r, "persistence", "async_loading"), "0");
    assert_eq!(r.cmd(&["GET", "k1"]), format!("$200\r\n{filler}\r\n"));
}

/// A full sync arriving while a script is busy on the replica completes once the
/// script ends. The busy rounds serve clients only; the link's readiness they poll
/// is kept for the main loop: edge-triggered polling reports it once, and with the
/// socket buffers full nothing new would arrive to report it again.
#[test]
fn full_sync_arriving_during_a_busy_script_completes_after_it() {
    let master = TestServer::start_with(&["--repl-diskless-sync-delay", "1"]);
    let mut m = master.raw(2);
    m.cmd(&["CONFIG", "SET", "rdbcompression", "no"]);
    m.cmd(&["DEBUG", "POPULATE", "300", "big", "100000"]);
    let replica = TestServer::start_with(&["--busy-reply-threshold", "10"]);
    let mut r = replica.raw(2);
    r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_until(|| info(&mut m, "replication", "connected_slaves") == "1");
    let mut busy = replica.raw(2);
    busy.send(&["EVAL", "while true do end", "0"]);
    wait_until(|| r.cmd(&["PING"]).starts_with("-BUSY"));
    // The image starts after the master's one-second delay and fills the sockets.
    wait_until(|| info(&mut m, "replication", "slave0").contains("state=wait_bgsave"));
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(r.cmd(&["SCRIPT", "KILL"]), "+OK\r\n");
    assert!(busy.read_reply().starts_with("-ERR Script killed by user"));
    wait_until(|| link_up(replica.port));
    assert_eq!(r.cmd(&["DBSIZE"]), ":300\r\n");
}
