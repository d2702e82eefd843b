//! The replication link's rules (Redis 7.2–7.4): a replica's link carries no replies
//! (a command that would answer drops it, one that reaches the keyspace is refused
//! first), PSYNC's offset must be a number, a snapshot to disk nobody waits for is
//! dropped unless `save` points want it, a replica switching masters keeps its own
//! replicas until its history changes (and drops them, to continue by PSYNC, when it
//! becomes a master), and a replica decodes the image as it arrives (a transfer cut
//! short leaves its data as it was).

mod common;

use common::*;

fn logged(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
}

fn start_logged(tag: &str, extra: &[&str]) -> (TestServer, std::path::PathBuf) {
    let dir = temp_dir(tag);
    let log = dir.join("server.log").display().to_string();
    let mut args = vec!["--logfile", &log, "--loglevel", "notice"];
    args.extend_from_slice(extra);
    (TestServer::start_in(&dir, &args), dir)
}

fn info(c: &mut RawConn, section: &str, field: &str) -> String {
    c.info_field(section, field)
}

fn link_up(port: u16) -> bool {
    RawConn::connect(port, 2).info_field("replication", "master_link_status") == "up"
}

#[test]
fn a_replica_link_that_would_get_a_reply_is_dropped() {
    let (master, dir) = start_logged("link-reply", &["--repl-diskless-sync", "no"]);
    // After SYNC the connection is a replica's link: PING would be answered.
    let mut rd = master.raw(2);
    rd.send(&["SYNC"]);
    rd.send(&["PING"]);
    wait_until(|| {
        logged(&dir).contains("Replica generated a reply to command 'ping', disconnecting it: id=")
    });
    // Keyspace commands are refused first, and that error is a reply too.
    let mut rd = master.raw(2);
    rd.send(&["PSYNC", "replicationid", "-1"]);
    assert!(rd.read_reply().starts_with("+FULLRESYNC "));
    rd.send(&["GET", "foo"]);
    wait_until(|| {
        logged(&dir).contains("Replica generated a reply to command 'get', disconnecting it: ")
    });
    let log = logged(&dir);
    assert!(log.contains(
        "== CRITICAL == This master is sending an error to its replica: 'ERR Replica can't interact with the keyspace' after processing the command 'get'"
    ));
    assert_eq!(master.raw(2).cmd(&["PING"]), "+PONG\r\n");
}

#[test]
fn psync_with_an_offset_that_is_no_number_is_an_error() {
    let (master, dir) = start_logged("psync-offset", &[]);
    let mut c = master.raw(2);
    assert_eq!(
        c.cmd(&["PSYNC", "replicationid", "offset_str"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert!(logged(&dir).contains("asks for synchronization but with a wrong offset"));
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
}

/// A raw replica waiting for a snapshot to disk (held back by `rdb-key-save-delay`).
fn waiting_replica(port: u16) -> RawConn {
    let mut c = RawConn::connect(port, 2);
    c.send(&["PSYNC", "?", "-1"]);
    c
}

#[test]
fn a_snapshot_nobody_waits_for_is_dropped_unless_save_points_want_it() {
    let master = TestServer::start_with(&["--repl-diskless-sync", "no", "--save", ""]);
    let mut m = master.raw(2);
    m.cmd(&["DEBUG", "POPULATE", "10"]);
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "1000000"]);
    let in_progress = |m: &mut RawConn| info(m, "persistence", "rdb_bgsave_in_progress");
    let a = waiting_replica(master.port);
    let b = waiting_replica(master.port);
    wait_until(|| in_progress(&mut m) == "1");
    // One of two leaves: the other still waits for it.
    drop(a);
    wait_until(|| info(&mut m, "replication", "connected_slaves") == "1");
    assert_eq!(in_progress(&mut m), "1");
    drop(b);
    wait_until(|| in_progress(&mut m) == "0");
    // With save points the snapshot is a backup too: it goes on.
    m.cmd(&["CONFIG", "SET", "save", "900 1"]);
    let c = waiting_replica(master.port);
    wait_until(|| in_progress(&mut m) == "1");
    drop(c);
    wait_until(|| info(&mut m, "replication", "connected_slaves") == "0");
    assert_eq!(in_progress(&mut m), "1");
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
}

#[test]
fn a_replica_switching_masters_keeps_its_replicas_until_its_history_changes() {
    let master1 = TestServer::start();
    let (master2, _) = start_logged("switch-master2", &["--repl-diskless-sync", "no"]);
    let mut m2 = master2.raw(2);
    m2.cmd(&["DEBUG", "POPULATE", "10"]);
    m2.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "1000000"]);
    master1.raw(2).cmd(&["SET", "a", "b"]);
    let middle = TestServer::start_with(&["--replicaof", "127.0.0.1", &master1.port.to_string()]);
    wait_until(|| link_up(middle.port));
    let (sub, sub_dir) = start_logged(
        "switch-sub",
        &["--replicaof", "127.0.0.1", &middle.port.to_string()],
    );
    wait_until(|| link_up(sub.port));
    // The full sync with master2 never completes: master2 goes away first.
    let mut mid = middle.raw(2);
    mid.cmd(&["REPLICAOF", "127.0.0.1", &master2.port.to_string()]);
    wait_until(|| info(&mut m2, "persistence", "rdb_bgsave_in_progress") == "1");
    drop(m2);
    drop(master2);
    // Back to master1, which continues the history the sub-replica shares.
    mid.cmd(&["REPLICAOF", "127.0.0.1", &master1.port.to_string()]);
    wait_until(|| link_up(middle.port));
    let mut m1 = master1.raw(2);
    assert_eq!(info(&mut m1, "stats", "sync_partial_ok"), "1");
    assert_eq!(info(&mut m1, "stats", "sync_full"), "1");
    assert!(!logged(&sub_dir).contains("Connection with master lost"));
    let id = info(&mut m1, "replication", "master_replid");
    assert_eq!(info(&mut mid, "replication", "master_replid"), id);
    m1.cmd(&["SET", "c", "d"]);
    wait_until(|| sub.raw(2).cmd(&["GET", "c"]) == "$1\r\nd\r\n");
    assert_eq!(info(&mut mid, "stats", "sync_full"), "1");
    assert_eq!(info(&mut mid, "stats", "sync_partial_ok"), "0");
}

/// A replica whose decoding lags stops reading its socket; when the decode catches up
/// while handling a readiness event, it must read what waited there at once (that
/// event is spent and no other comes while the master is blocked on a full socket).
/// Before the fix, the slow replica stalled with its master writing into a full socket
/// (the suite's "diskless no replicas drop during rdb pipe" and "diskless loading short
/// read" hung on it, intermittently, as did replication-psync).
#[test]
fn a_lagging_diskless_load_resumes_reading_once_it_catches_up() {
    let master = TestServer::start_with(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "1",
        "--repl-diskless-sync-max-replicas",
        "2",
        "--rdbcompression",
        "no",
    ]);
    let mut m = master.raw(2);
    assert_eq!(
        m.cmd(&["DEBUG", "POPULATE", "8000", "test", "10000"]),
        "+OK\r\n"
    );
    for _round in 0..2 {
        let slow =
            TestServer::start_with(&["--repl-diskless-load", "swapdb", "--key-load-delay", "100"]);
        let fast = TestServer::start();
        for r in [&slow, &fast] {
            r.raw(2)
                .cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
        }
        wait_until(|| link_up(slow.port) && link_up(fast.port));
        assert_eq!(slow.raw(2).cmd(&["DBSIZE"]), ":8000\r\n");
        assert_eq!(fast.raw(2).cmd(&["DBSIZE"]), ":8000\r\n");
    }
}

/// REPLICAOF NO ONE on the middle of a chain: its replica is disconnected, comes
/// back with the old ID and continues by PSYNC under the new one.
#[test]
fn a_replica_turned_master_sends_its_replicas_the_new_id() {
    let master = TestServer::start();
    master.raw(2).cmd(&["SET", "a", "b"]);
    let middle = TestServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    wait_until(|| link_up(middle.port));
    let sub = TestServer::start_with(&["--replicaof", "127.0.0.1", &middle.port.to_string()]);
    wait_until(|| link_up(sub.port));
    let mut mid = middle.raw(2);
    assert_eq!(info(&mut mid, "stats", "sync_full"), "1");
    assert_eq!(mid.cmd(&["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    let id = info(&mut mid, "replication", "master_replid");
    let mut s = sub.raw(2);
    wait_until(|| info(&mut s, "replication", "master_replid") == id && link_up(sub.port));
    assert_eq!(info(&mut mid, "stats", "sync_partial_ok"), "1");
    assert_eq!(info(&mut mid, "stats", "sync_full"), "1");
    mid.cmd(&["SET", "c", "d"]);
    wait_until(|| s.cmd(&["GET", "c"]) == "$1\r\nd\r\n");
}

#[test]
fn an_image_cut_short_while_it_is_decoded_leaves_the_replica_as_it_was() {
    let master = TestServer::start();
    let mut m = master.raw(2);
    m.cmd(&["DEBUG", "POPULATE", "1000"]);
    // Ten milliseconds per key: the image arrives over ten seconds.
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "10000"]);
    let (replica, dir) = start_logged("cut-image", &["--repl-diskless-load", "on-empty-db"]);
    let mut r = replica.raw(2);
    r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    // Decoding starts with the image's first bytes, not at its end.
    wait_until(|| logged(&dir).contains("MASTER <-> REPLICA sync: Loading DB in memory"));
    assert_eq!(info(&mut r, "persistence", "loading"), "1");
    assert_eq!(m.cmd(&["CLIENT", "KILL", "TYPE", "replica"]), ":1\r\n");
    wait_until(|| {
        logged(&dir).contains(
            "Failed trying to load the MASTER synchronization DB from socket, check server logs.",
        )
    });
    assert!(logged(&dir).contains(
        "Internal error in RDB reading offset 0, function at rdb.c:0 -> Unexpected EOF reading RDB file"
    ));
    // Nothing of the partial image was installed.
    assert_eq!(info(&mut r, "persistence", "loading"), "0");
    assert_eq!(r.cmd(&["DBSIZE"]), ":0\r\n");
    // The next attempt, at full speed, loads everything.
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    wait_until(|| link_up(replica.port));
    assert_eq!(r.cmd(&["DBSIZE"]), ":1000\r\n");
    assert_eq!(r.cmd(&["DEBUG", "DIGEST"]), m.cmd(&["DEBUG", "DIGEST"]));
}
