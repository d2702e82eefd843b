//! Redis's persistence test hooks: `rdb-key-save-delay` slows the snapshot writer
//! per key without making it unkillable (FLUSHALL, SHUTDOWN and SIGTERM stop a
//! delayed BGSAVE at once), and `key-load-delay` slows loading while the server
//! answers clients, `-LOADING` to commands that need the dataset.

mod common;

use common::*;

const LOADING: &str = "-LOADING Redis is loading the dataset in memory\r\n";

#[test]
fn delayed_bgsave_is_cancelled_by_flushall_and_shutdown() {
    let mut s = TestServer::start();
    let mut c = s.raw(2);
    let mut info = s.client();
    assert_eq!(c.cmd(&["SET", "k", "v"]), "+OK\r\n");
    // 100 seconds per key.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "100000000"]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd(&["BGSAVE"]), "+Background saving started\r\n");
    assert_eq!(info_field(&mut info, "rdb_bgsave_in_progress"), "1");
    assert_eq!(
        c.cmd(&["BGSAVE"]),
        "-ERR Background save already in progress\r\n"
    );
    // FLUSHALL kills the save, as Redis kills its child.
    assert_eq!(c.cmd(&["FLUSHALL"]), "+OK\r\n");
    wait_until(|| info_field(&mut info, "rdb_bgsave_in_progress") == "0");
    // A save still sleeping in its writer does not hold up SIGTERM's shutdown.
    assert_eq!(c.cmd(&["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(c.cmd(&["BGSAVE"]), "+Background saving started\r\n");
    assert_eq!(c.cmd(&["CONFIG", "SET", "save", ""]), "+OK\r\n");
    assert_eq!(s.terminate(), Some(0));
}

#[test]
fn small_save_delay_still_completes() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let mut info = s.client();
    assert_eq!(c.cmd(&["DEBUG", "POPULATE", "50"]), "+OK\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "1000"]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd(&["BGSAVE"]), "+Background saving started\r\n");
    wait_until(|| info_field(&mut info, "rdb_bgsave_in_progress") == "0");
    assert_eq!(info_field(&mut info, "rdb_last_bgsave_status"), "ok");
    assert_eq!(c.cmd(&["DEBUG", "RELOAD", "NOSAVE"]), "+OK\r\n");
    assert_eq!(c.cmd(&["DBSIZE"]), ":50\r\n");
}

#[test]
fn loading_serves_clients_with_loading_errors() {
    let dir = temp_dir("key-load-delay");
    {
        let s = TestServer::start_in(&dir, &["--appendonly", "no"]);
        let mut c = s.raw(2);
        assert_eq!(
            c.cmd(&["DEBUG", "POPULATE", "4000", "key", "100"]),
            "+OK\r\n"
        );
        assert_eq!(c.cmd(&["SAVE"]), "+OK\r\n");
    }
    // 4000 keys at 1 ms each: the load lasts about four seconds, and clients are
    // served every KB of the file.
    let s = TestServer::start_in(
        &dir,
        &[
            "--appendonly",
            "no",
            "--key-load-delay",
            "1000",
            "--loading-process-events-interval-bytes",
            "1024",
        ],
    );
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["PING"]), LOADING);
    assert_eq!(c.cmd(&["GET", "key:1"]), LOADING);
    assert!(c
        .cmd(&["INFO", "persistence"])
        .contains("\r\nloading:1\r\n"));
    assert_eq!(c.cmd(&["CONFIG", "SET", "dir", "/"]), LOADING);
    assert_eq!(c.cmd(&["CONFIG", "SET", "loglevel", "notice"]), "+OK\r\n");
    // MULTI is allowed; a queued command that needs the dataset aborts the EXEC.
    assert_eq!(c.cmd(&["MULTI"]), "+OK\r\n");
    assert_eq!(c.cmd(&["GET", "key:1"]), LOADING);
    assert_eq!(
        c.cmd(&["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    wait_until(|| c.cmd(&["PING"]) == "+PONG\r\n");
    assert_eq!(c.cmd(&["DBSIZE"]), ":4000\r\n");
    assert!(c
        .cmd(&["INFO", "persistence"])
        .contains("\r\nloading:0\r\n"));
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shutdown_while_loading_keeps_the_file() {
    let dir = temp_dir("shutdown-loading");
    {
        let s = TestServer::start_in(&dir, &["--appendonly", "no"]);
        let mut c = s.raw(2);
        assert_eq!(
            c.cmd(&["DEBUG", "POPULATE", "3000", "key", "100"]),
            "+OK\r\n"
        );
        assert_eq!(c.cmd(&["SAVE"]), "+OK\r\n");
    }
    let args = [
        "--appendonly",
        "no",
        "--key-load-delay",
        "1000",
        "--loading-process-events-interval-bytes",
        "1024",
    ];
    let mut s = TestServer::start_in(&dir, &args);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["PING"]), LOADING);
    // SIGTERM while loading exits without saving the partial dataset.
    assert_eq!(s.terminate(), Some(0));
    let s = TestServer::start_in(&dir, &["--appendonly", "no"]);
    assert_eq!(s.raw(2).cmd(&["DBSIZE"]), ":3000\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
