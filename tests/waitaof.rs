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
    let r = c.cmd(&["EVAL", "return redis.call('waitaof', 0, 0, 0)", "0"]);
    assert!(
        r.starts_with("-ERR This Redis command is not allowed from script"),
        "{r}"
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
