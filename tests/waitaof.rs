//! WAITAOF numlocal numreplicas timeout: argument errors, the AOF-off error, and
//! waiting for the local fsync under each appendfsync policy.

mod common;
use common::*;
use std::time::{Duration, Instant};

const BOTH_ACKED_LOCAL: &str = "*2\r\n:1\r\n:0\r\n";
const NONE_ACKED: &str = "*2\r\n:0\r\n:0\r\n";

#[test]
fn argument_errors_and_aof_disabled() {
    let s = TestServer::start_with(&["--appendonly", "no"]);
    check_both(
        &s,
        &[
            (
                &["WAITAOF", "0", "0"],
                "-ERR wrong number of arguments for 'waitaof' command\r\n",
                "-ERR wrong number of arguments for 'waitaof' command\r\n",
            ),
            (
                &["WAITAOF", "x", "0", "0"],
                "-ERR value is not an integer or out of range\r\n",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (
                &["WAITAOF", "2", "0", "0"],
                "-ERR value is out of range, value must between 0 and 1\r\n",
                "-ERR value is out of range, value must between 0 and 1\r\n",
            ),
            (
                &["WAITAOF", "-1", "0", "0"],
                "-ERR value is out of range, value must between 0 and 1\r\n",
                "-ERR value is out of range, value must between 0 and 1\r\n",
            ),
            (
                &["WAITAOF", "0", "-1", "0"],
                "-ERR value is out of range, must be positive\r\n",
                "-ERR value is out of range, must be positive\r\n",
            ),
            (
                &["WAITAOF", "0", "0", "1.5"],
                "-ERR timeout is not an integer or out of range\r\n",
                "-ERR timeout is not an integer or out of range\r\n",
            ),
            (
                &["WAITAOF", "1", "0", "-5"],
                "-ERR timeout is negative\r\n",
                "-ERR timeout is negative\r\n",
            ),
            (
                &["WAITAOF", "1", "0", "0"],
                "-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n",
                "-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n",
            ),
            // Nothing asked: the counts at once (no AOF: local 0; no replicas).
            (
                &["WAITAOF", "0", "0", "0"],
                NONE_ACKED,
                "*2\r\n:0\r\n:0\r\n",
            ),
        ],
    );
    let mut c = s.raw(2);
    // Scripts may call WAITAOF (Redis 7.4): it answers at once, never blocking.
    assert_eq!(
        c.cmd(&["EVAL", "return redis.call('waitaof', 0, 0, 0)", "0"]),
        "*2\r\n:0\r\n:0\r\n"
    );
}

#[test]
fn always_is_immediate() {
    let s = TestServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.raw(2);
    c.cmd(&["INCR", "foo"]);
    assert_eq!(c.cmd(&["WAITAOF", "1", "0", "0"]), BOTH_ACKED_LOCAL);
    // Pipelined with the write: answered after the turn's fsync.
    c.send(&["SET", "a", "b"]);
    c.send(&["WAITAOF", "1", "0", "0"]);
    assert_eq!(c.read_reply(), "+OK\r\n");
    assert_eq!(c.read_reply(), BOTH_ACKED_LOCAL);
}

#[test]
fn everysec_waits_for_the_next_fsync() {
    let s = TestServer::start_with(&["--appendonly", "yes", "--appendfsync", "everysec"]);
    let mut c = s.raw(2);
    // A client that never wrote has nothing to wait for.
    assert_eq!(c.cmd(&["WAITAOF", "1", "0", "0"]), BOTH_ACKED_LOCAL);
    c.cmd(&["INCR", "foo"]);
    assert_eq!(c.cmd(&["WAITAOF", "1", "0", "0"]), BOTH_ACKED_LOCAL);
    // Waiting for a replica that does not exist: the timeout answers with the local
    // state at that time (fsynced within the second).
    c.cmd(&["INCR", "foo"]);
    let start = Instant::now();
    assert_eq!(c.cmd(&["WAITAOF", "0", "1", "2500"]), BOTH_ACKED_LOCAL);
    assert!(start.elapsed() >= Duration::from_millis(2000));
    // Inside MULTI it never blocks.
    c.cmd(&["CONFIG", "SET", "appendfsync", "no"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["INCR", "foo"]);
    c.cmd(&["WAITAOF", "1", "0", "0"]);
    assert_eq!(c.cmd(&["EXEC"]), "*2\r\n:3\r\n*2\r\n:0\r\n:0\r\n");
}

#[test]
fn no_fsync_times_out_and_aof_off_releases_with_error() {
    let s = TestServer::start_with(&["--appendonly", "yes", "--appendfsync", "no"]);
    let mut c = s.raw(2);
    c.cmd(&["INCR", "foo"]);
    assert_eq!(c.cmd(&["WAITAOF", "1", "0", "50"]), NONE_ACKED);
    // A client blocked forever is released with the error when AOF is turned off.
    c.send(&["WAITAOF", "1", "0", "0"]);
    wait_blocked(&s, 1);
    let mut admin = s.raw(2);
    assert_eq!(admin.cmd(&["CONFIG", "SET", "appendonly", "no"]), "+OK\r\n");
    assert_eq!(
        c.read_reply(),
        "-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n"
    );
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
}

fn info_field(c: &mut RawConn, section: &str, field: &str) -> String {
    let text = c.cmd(&["INFO", section]);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.to_string()))
        .unwrap_or_default()
}

/// A Cinnabar replica of `master` with the given `appendonly`, synchronized and (when
/// its AOF is on) with the AOF rewrite after the full resync finished.
fn replica_of(master: &TestServer, appendonly: &str) -> TestServer {
    let port = master.port.to_string();
    let replica = TestServer::start_with(&[
        "--replicaof",
        "127.0.0.1",
        &port,
        "--appendonly",
        appendonly,
    ]);
    let mut r = replica.raw(2);
    let mut m = master.raw(2);
    wait_until(|| {
        info_field(&mut r, "replication", "master_link_status") == "up"
            && info_field(&mut m, "replication", "slave0").contains("state=online")
            && info_field(&mut r, "persistence", "aof_rewrite_in_progress") == "0"
            && info_field(&mut r, "persistence", "aof_rewrite_scheduled") == "0"
    });
    replica
}

/// The replica's AOF fsyncs what it applied and says so with `REPLCONF ACK … FACK`;
/// the master counts it. Local (the master's AOF) and replica together too.
#[test]
fn replica_with_aof_acknowledges_its_fsync() {
    let master = TestServer::start_with(&["--appendonly", "no"]);
    let _replica = replica_of(&master, "yes");
    let mut c = master.raw(2);
    c.cmd(&["SET", "k", "v"]);
    assert_eq!(c.cmd(&["WAITAOF", "0", "1", "3000"]), "*2\r\n:0\r\n:1\r\n");
    // Nothing written since: answered at once.
    assert_eq!(c.cmd(&["WAITAOF", "0", "1", "0"]), "*2\r\n:0\r\n:1\r\n");
    // More than there are replicas: the timeout answers with the count.
    assert_eq!(c.cmd(&["WAITAOF", "0", "2", "300"]), "*2\r\n:0\r\n:1\r\n");
    // RESP3 reply type: an array as well.
    let mut c3 = master.raw(3);
    c3.cmd(&["LPUSH", "l", "a"]);
    assert_eq!(c3.cmd(&["WAITAOF", "0", "1", "3000"]), "*2\r\n:0\r\n:1\r\n");

    // The master's own AOF and the replica's.
    let master2 = TestServer::start_with(&["--appendonly", "yes", "--appendfsync", "everysec"]);
    let replica2 = replica_of(&master2, "yes");
    let mut c = master2.raw(2);
    for i in 0..20 {
        c.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    assert_eq!(c.cmd(&["WAITAOF", "1", "1", "5000"]), "*2\r\n:1\r\n:1\r\n");
    // On the replica WAITAOF is refused, as in Redis.
    assert_eq!(
        replica2.raw(2).cmd(&["WAITAOF", "0", "0", "0"]),
        "-ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.\r\n"
    );
}

/// A replica without AOF sends no FACK: it never counts, the timeout answers.
#[test]
fn replica_without_aof_never_counts() {
    let master = TestServer::start_with(&["--appendonly", "no"]);
    let _replica = replica_of(&master, "no");
    let mut c = master.raw(2);
    c.cmd(&["SET", "k", "v"]);
    // WAIT (the replication ACK) counts it; WAITAOF does not.
    assert_eq!(c.cmd(&["WAIT", "1", "3000"]), ":1\r\n");
    let start = Instant::now();
    assert_eq!(c.cmd(&["WAITAOF", "0", "1", "500"]), NONE_ACKED);
    assert!(start.elapsed() >= Duration::from_millis(400));
    // A blocked WAITAOF is released by CLIENT UNBLOCK with the current counts.
    c.send(&["WAITAOF", "0", "1", "0"]);
    wait_blocked(&master, 1);
    let mut admin = master.raw(2);
    let id = c_id(&mut admin);
    assert_eq!(admin.cmd(&["CLIENT", "UNBLOCK", &id]), ":1\r\n");
    assert_eq!(c.read_reply(), NONE_ACKED);
}

/// The id of the client that is blocked (the one that is not `admin`).
fn c_id(admin: &mut RawConn) -> String {
    let me = admin.cmd(&["CLIENT", "ID"]);
    let me = me.trim_start_matches(':').trim_end();
    let list = admin.cmd(&["CLIENT", "LIST"]);
    list.lines()
        .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")))
        .find(|id| {
            *id != me
                && list
                    .lines()
                    .any(|l| l.contains(&format!("id={id} ")) && l.contains("cmd=waitaof"))
        })
        .expect("blocked client")
        .to_string()
}

/// Writes made under `appendfsync no` are synced as soon as the policy becomes
/// `always`, with nothing new written (unit/wait "WAITAOF replica copy
/// everysec->always with AOFRW").
#[test]
fn switching_to_always_syncs_what_was_written_before() {
    let s = TestServer::start_with(&["--appendonly", "yes", "--appendfsync", "no"]);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["INCR", "foo"]), ":1\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "appendfsync", "always"]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd(&["WAITAOF", "1", "0", "5000"]), "*2\r\n:1\r\n:0\r\n");
}

/// A BGSAVE slowed by `rdb-key-save-delay` follows a new value at once: setting 0
/// lets it finish, and a rewrite scheduled behind it then runs (unit/wait "WAITAOF
/// local if AOFRW was postponed").
#[test]
fn a_delayed_bgsave_follows_a_changed_delay() {
    let s = TestServer::start_with(&["--appendonly", "no", "--appendfsync", "everysec"]);
    let mut c = s.raw(2);
    c.cmd(&["SET", "x", "y"]);
    c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "100000000"]);
    assert_eq!(c.cmd(&["BGSAVE"]), "+Background saving started\r\n");
    assert_eq!(c.cmd(&["CONFIG", "SET", "appendonly", "yes"]), "+OK\r\n");
    assert!(c
        .cmd(&["INFO", "persistence"])
        .contains("aof_rewrite_scheduled:1\r\n"));
    c.cmd(&["SET", "x", "y"]);
    c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    assert_eq!(c.cmd(&["WAITAOF", "1", "0", "10000"]), "*2\r\n:1\r\n:0\r\n");
    let info = c.cmd(&["INFO", "persistence"]);
    assert!(info.contains("aof_rewrite_in_progress:0\r\n"), "{info}");
    assert!(info.contains("aof_rewrite_scheduled:0\r\n"), "{info}");
}
