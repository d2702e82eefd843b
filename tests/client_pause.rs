//! CLIENT PAUSE as Redis: which commands wait (WRITE: writes, may-replicate commands,
//! scripts by their declared flags, EXEC of such a queue), that waiting clients count
//! as blocked, that errors found before the pause check answer at once, and that
//! expiry waits for the pause to end.

mod common;
use common::*;

#[test]
fn write_pause_holds_may_replicate_commands_and_counts_them_blocked() {
    let s = TestServer::start();
    let mut r = s.raw(2);
    r.cmd(&["PFADD", "hll", "a"]);
    assert_eq!(r.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]), "+OK\r\n");
    // Reads and read-only scripts run.
    assert_eq!(r.cmd(&["GET", "x"]), "$-1\r\n");
    assert_eq!(
        r.cmd(&["EVAL", "#!lua flags=no-writes\nreturn 1", "0"]),
        ":1\r\n"
    );
    assert_eq!(clients_info_field(&s, "blocked_clients"), "0");
    // Errors found before the pause check are answered at once.
    assert_eq!(
        r.cmd(&["SET", "x"]),
        "-ERR wrong number of arguments for 'set' command\r\n"
    );
    let mut held = Vec::new();
    for cmd in [
        &["SET", "x", "1"][..],
        &["PFCOUNT", "hll"],
        &["PUBLISH", "ch", "m"],
        &["EVAL", "return 1", "0"],
        &["EVAL", "#!lua\nreturn 2", "0"],
    ] {
        let mut c = s.raw(2);
        c.send(cmd);
        held.push(c);
    }
    wait_blocked(&s, held.len());
    let list = r.cmd(&["CLIENT", "LIST"]);
    assert_eq!(list.matches("flags=b ").count(), held.len(), "{list}");
    assert_eq!(r.cmd(&["CLIENT", "UNPAUSE"]), "+OK\r\n");
    let replies: Vec<String> = held.iter_mut().map(|c| c.read_reply()).collect();
    assert_eq!(replies, ["+OK\r\n", ":1\r\n", ":0\r\n", ":1\r\n", ":2\r\n"]);
}

#[test]
fn exec_waits_only_when_its_queue_may_replicate() {
    let s = TestServer::start();
    let mut r = s.raw(2);
    let mut reader = s.raw(2);
    let mut writer = s.raw(2);
    reader.cmd(&["MULTI"]);
    reader.cmd(&["GET", "foo"]);
    writer.cmd(&["MULTI"]);
    writer.cmd(&["SET", "foo", "bar"]);
    r.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]);
    assert_eq!(reader.cmd(&["EXEC"]), "*1\r\n$-1\r\n");
    writer.send(&["EXEC"]);
    wait_blocked(&s, 1);
    r.cmd(&["CLIENT", "UNPAUSE"]);
    assert_eq!(writer.read_reply(), "*1\r\n+OK\r\n");
}

#[test]
fn read_only_scripts_refuse_may_replicate_commands() {
    let s = TestServer::start();
    let mut r = s.raw(2);
    let reply = r.cmd(&["EVAL_RO", "return redis.call('publish','ch','msg')", "0"]);
    assert!(
        reply.starts_with("-ERR Write commands are not allowed from read-only scripts."),
        "{reply}"
    );
    assert_eq!(
        r.cmd(&["EVAL", "return redis.call('publish','ch','msg')", "0"]),
        ":0\r\n"
    );
}

#[test]
fn expired_keys_stay_until_the_pause_ends() {
    let s = TestServer::start();
    let mut r = s.raw(2);
    r.cmd(&["MULTI"]);
    r.cmd(&["SET", "foo", "bar", "PX", "10"]);
    r.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]);
    r.cmd(&["EXEC"]);
    wait_until(|| r.cmd(&["GET", "foo"]) == "$-1\r\n");
    assert_eq!(clients_info_field_stats(&mut r, "expired_keys"), "0");
    r.cmd(&["CLIENT", "UNPAUSE"]);
    assert_eq!(r.cmd(&["GET", "foo"]), "$-1\r\n");
    assert_eq!(clients_info_field_stats(&mut r, "expired_keys"), "1");
}

fn clients_info_field_stats(r: &mut RawConn, field: &str) -> String {
    r.cmd(&["INFO", "stats"])
        .split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
        .unwrap()
}

fn info_u64(c: &mut RawConn, field: &str) -> u64 {
    c.info_field("replication", field).parse().unwrap()
}

/// A paused replica reads its master's stream on but applies none of the commands
/// the pause holds back, as Redis postpones its master client (unit/pause "Test when
/// replica paused, offset would not grow"); they run once it ends.
#[test]
fn a_paused_replica_holds_back_its_masters_writes() {
    let master = TestServer::start();
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let mut m = master.raw(2);
    let mut r = replica.raw(2);
    wait_until(|| {
        r.cmd(&["INFO", "replication"])
            .contains("master_link_status:up")
    });
    m.cmd(&["SET", "foo", "bar"]);
    let before = info_u64(&mut m, "master_repl_offset");
    wait_until(|| info_u64(&mut r, "slave_repl_offset") == before);
    assert_eq!(r.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]), "+OK\r\n");
    m.cmd(&["SET", "foo2", "bar2"]);
    let after = info_u64(&mut m, "master_repl_offset");
    wait_until(|| info_u64(&mut r, "slave_read_repl_offset") == after);
    assert_eq!(info_u64(&mut r, "slave_repl_offset"), before);
    assert_eq!(r.cmd(&["GET", "foo2"]), "$-1\r\n");
    assert_eq!(r.cmd(&["CLIENT", "UNPAUSE"]), "+OK\r\n");
    wait_until(|| info_u64(&mut r, "slave_repl_offset") == after);
    assert_eq!(r.cmd(&["GET", "foo2"]), "$4\r\nbar2\r\n");
}
