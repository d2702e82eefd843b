//! The shared replication buffer (Redis 7): the stream is kept once for the backlog
//! and every replica; a replica that holds on to it makes the backlog outgrow its
//! size, and a replica that reconnects continues from anywhere the buffer holds; the
//! buffer shrinks back once nobody holds it; a replica's output limit is at least the
//! backlog's size.

mod common;

use common::*;

fn info_num(c: &mut RawConn, section: &str, field: &str) -> u64 {
    c.info_field(section, field).parse().unwrap()
}

/// A raw connection that asks for a full sync and then never reads: with the
/// snapshot held back by `rdb-key-save-delay`, the master holds the stream for it.
fn syncing_replica(port: u16) -> RawConn {
    let mut c = RawConn::connect(port, 2);
    assert_eq!(c.cmd(&["REPLCONF", "capa", "psync2"]), "+OK\r\n");
    c.send(&["PSYNC", "?", "-1"]);
    c
}

fn wait_synced(master: u16, replica: u16) {
    let mut m = RawConn::connect(master, 2);
    let mut r = RawConn::connect(replica, 2);
    wait_until(|| {
        r.info_field("replication", "master_link_status") == "up"
            && m.info_field("replication", "master_repl_offset")
                == r.info_field("replication", "master_repl_offset")
    });
}

fn write_mb(m: &mut RawConn, prefix: &str, mbs: usize) {
    let value = "x".repeat(1024);
    for i in 0..mbs * 1024 {
        assert_eq!(m.cmd(&["SET", &format!("{prefix}{i}"), &value]), "+OK\r\n");
    }
}

fn stop(s: &TestServer) {
    let _ = std::process::Command::new("kill")
        .args(["-STOP", &s.pid().to_string()])
        .status();
}

fn resume(s: &TestServer) {
    let _ = std::process::Command::new("kill")
        .args(["-CONT", &s.pid().to_string()])
        .status();
}

#[test]
fn replicas_share_one_buffer_that_shrinks_once_nobody_holds_it() {
    let master = TestServer::start_with(&[
        "--repl-backlog-size",
        "16384",
        "--repl-diskless-sync",
        "no",
        "--client-output-buffer-limit",
        "replica 0 0 0",
    ]);
    let port = master.port.to_string();
    let online = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_synced(master.port, online.port);
    let mut m = master.raw(2);
    // A snapshot of 100 keys at a second each: the syncing replicas wait throughout.
    m.cmd(&["DEBUG", "POPULATE", "100"]);
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "1000000"]);
    let first = syncing_replica(master.port);
    let second = syncing_replica(master.port);
    wait_until(|| info_num(&mut m, "persistence", "rdb_bgsave_in_progress") == 1);
    let before_used = info_num(&mut m, "memory", "used_memory");
    write_mb(&mut m, "a", 2);
    // Two replicas hold 2 MB of stream, the backlog too: one copy of it.
    let shared = info_num(&mut m, "memory", "mem_total_replication_buffers");
    assert!((2 << 20..3 << 20).contains(&shared), "{shared}");
    let grown = info_num(&mut m, "memory", "used_memory") - before_used;
    // Beyond the 2 MB of values, less than two copies of the stream (Redis's own
    // bound): one is shared by the backlog and both replicas, not one each.
    assert!(grown - (2 << 20) < 2 * shared, "{grown} {shared}");
    // The backlog keeps what the syncing replicas hold, beyond its size.
    assert!(info_num(&mut m, "replication", "repl_backlog_histlen") > 2 << 20);
    // One of them goes: the other still holds everything.
    drop(first);
    wait_until(|| info_num(&mut m, "replication", "connected_slaves") == 2);
    assert_eq!(
        info_num(&mut m, "memory", "mem_total_replication_buffers"),
        shared
    );
    // The last one goes: the backlog shrinks back to its size.
    wait_synced(master.port, online.port);
    drop(second);
    wait_until(|| info_num(&mut m, "replication", "connected_slaves") == 1);
    wait_until(|| info_num(&mut m, "memory", "mem_total_replication_buffers") < 1 << 20);
    assert!(info_num(&mut m, "replication", "repl_backlog_histlen") < 100 << 10);
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
}

#[test]
fn a_replica_continues_from_the_buffer_another_replica_holds_beyond_the_backlog() {
    let master = TestServer::start_with(&[
        "--repl-backlog-size",
        "16384",
        "--repl-diskless-sync",
        "no",
        "--client-output-buffer-limit",
        "replica 0 0 0",
    ]);
    let port = master.port.to_string();
    let mut m = master.raw(2);
    // A snapshot of 100 keys at a second each: the syncing replica waits throughout.
    // (DEBUG POPULATE is not replicated: the replica gets the keys in its full sync.)
    m.cmd(&["DEBUG", "POPULATE", "100"]);
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_synced(master.port, replica.port);
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "1000000"]);
    let _holder = syncing_replica(master.port);
    wait_until(|| info_num(&mut m, "persistence", "rdb_bgsave_in_progress") == 1);
    // The replica misses a megabyte, 64 times the backlog's size.
    stop(&replica);
    let list = m.cmd(&["CLIENT", "LIST", "TYPE", "replica"]);
    let id = list
        .lines()
        .find(|l| l.contains("cmd=replconf"))
        .and_then(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")))
        .unwrap_or_else(|| panic!("no online replica in {list}"))
        .to_string();
    assert_eq!(m.cmd(&["CLIENT", "KILL", "ID", &id]), ":1\r\n");
    write_mb(&mut m, "b", 1);
    resume(&replica);
    wait_synced(master.port, replica.port);
    assert_eq!(info_num(&mut m, "stats", "sync_partial_ok"), 1);
    let mut r = replica.raw(2);
    assert_eq!(r.cmd(&["DBSIZE"]), m.cmd(&["DBSIZE"]));
    assert_eq!(r.cmd(&["DEBUG", "DIGEST"]), m.cmd(&["DEBUG", "DIGEST"]));
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
}

#[test]
fn a_replica_output_limit_below_the_backlog_size_is_raised_to_it() {
    let master = TestServer::start_with(&[
        "--repl-backlog-size",
        "8mb",
        "--client-output-buffer-limit",
        "replica 512kb 0 0",
    ]);
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let mut m = master.raw(2);
    wait_synced(master.port, replica.port);
    stop(&replica);
    assert_eq!(m.cmd(&["CLIENT", "KILL", "TYPE", "replica"]), ":1\r\n");
    write_mb(&mut m, "c", 2);
    resume(&replica);
    // The partial resync hands it 2 MB at once: over 512 KB, under the backlog's 8 MB.
    wait_synced(master.port, replica.port);
    write_mb(&mut m, "d", 2);
    wait_synced(master.port, replica.port);
    assert_eq!(info_num(&mut m, "stats", "sync_full"), 1);
    assert_eq!(info_num(&mut m, "stats", "sync_partial_ok"), 1);
    assert_eq!(
        info_num(&mut m, "stats", "client_output_buffer_limit_disconnections"),
        0
    );
}

#[test]
fn a_replica_dropped_for_a_big_write_resyncs_in_full_instead_of_looping() {
    let master = TestServer::start_with(&[
        "--repl-backlog-size",
        "16384",
        "--client-output-buffer-limit",
        "replica 32768 32768 60",
    ]);
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let mut m = master.raw(2);
    wait_synced(master.port, replica.port);
    // Over the output limit at once: the replica is dropped. The blocks holding the
    // write are a sixteenth of the backlog at most, so the backlog trims back past
    // the replica's offset and it cannot continue into the same overflow again.
    let big = "v".repeat(256 << 10);
    assert_eq!(m.cmd(&["SET", "big", &big]), "+OK\r\n");
    m.cmd(&["SET", "after", "1"]);
    wait_synced(master.port, replica.port);
    assert_eq!(info_num(&mut m, "stats", "sync_partial_ok"), 0);
    assert_eq!(info_num(&mut m, "stats", "sync_full"), 2);
    assert_eq!(
        info_num(&mut m, "stats", "client_output_buffer_limit_disconnections"),
        1
    );
    assert_eq!(replica.raw(2).cmd(&["STRLEN", "big"]), ":262144\r\n");
    // PSYNC from the backlog's first byte is served from a block's middle.
    let replid = m.info_field("replication", "master_replid");
    let first = m.info_field("replication", "repl_backlog_first_byte_offset");
    let mut raw = RawConn::connect(master.port, 2);
    raw.send(&["PSYNC", &replid, &first]);
    assert!(raw.read_reply().starts_with("+CONTINUE"));
    assert_eq!(m.cmd(&["PING"]), "+PONG\r\n");
}

#[test]
fn a_stalled_replicas_share_of_the_buffer_does_not_cause_eviction() {
    let master = TestServer::start_with(&[
        "--repl-backlog-size",
        "10240",
        "--client-output-buffer-limit",
        "replica 100000000 100000000 300",
        "--maxmemory-policy",
        "allkeys-random",
        // As the suite's test: what these keep per command would count.
        "--latency-tracking",
        "no",
        "--slowlog-log-slower-than",
        "-1",
    ]);
    let mut m = master.raw(2);
    for j in 0..100 {
        m.cmd(&["SETRANGE", &format!("key:{j}"), "100000", "asdf"]);
    }
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_synced(master.port, replica.port);
    // Both figures from one INFO, so that no block or reply allocated between two
    // readings skews the limit; the slack covers what a turn allocates and frees
    // (the replica's acknowledgements, a new block of the shared buffer), far below
    // the 20 MB the stalled replica holds.
    let memory = m.cmd(&["INFO", "memory"]);
    let field = |name: &str| -> u64 {
        memory
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .unwrap_or_else(|| panic!("{name} in INFO memory"))
            .trim()
            .parse()
            .unwrap()
    };
    let (used, not_counted) = (field("used_memory"), field("mem_not_counted_for_evict"));
    let limit = used - not_counted + 128 * 1024;
    m.cmd(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    stop(&replica);
    // 20 MB of writes that leave the dataset's size as it is, all held for the
    // stalled replica: its share is the replication buffer's, not the dataset's.
    // One command at a time: a pipeline's query buffer would count, as in Redis.
    let payload = "A".repeat(500);
    for _ in 0..40_000 {
        assert_eq!(m.cmd(&["SETRANGE", "key:0", "0", &payload]), ":100004\r\n");
    }
    assert!(info_num(&mut m, "memory", "mem_total_replication_buffers") > 8 << 20);
    assert_eq!(m.cmd(&["DBSIZE"]), ":100\r\n");
    assert_eq!(info_num(&mut m, "stats", "evicted_keys"), 0);
    resume(&replica);
    m.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
    wait_synced(master.port, replica.port);
}
