//! The shutdown sequence: SHUTDOWN's flags and errors, SHUTDOWN ABORT, signals taken
//! up by the cron, a failed final save, waiting for lagging replicas, and a second
//! SIGINT that exits at once.

mod common;

use common::{wait_blocked, wait_until, TestServer};

fn log_path(dir: &std::path::Path) -> String {
    dir.join("server.log").display().to_string()
}

fn log_text(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: sending a signal to a child process this test started.
    unsafe { libc::kill(pid as i32, sig) };
}

fn info_field(s: &TestServer, section: &str, field: &str) -> Option<String> {
    let info = s.raw(2).cmd(&["INFO", section]);
    info.split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
}

#[test]
fn shutdown_flags_and_abort_errors() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.check(&[
        (&["SHUTDOWN", "ABORT"], "-ERR No shutdown in progress.\r\n"),
        (&["SHUTDOWN", "ABORT", "NOW"], "-ERR syntax error\r\n"),
        (&["SHUTDOWN", "NOW", "ABORT"], "-ERR syntax error\r\n"),
        (&["SHUTDOWN", "SAVE", "NOSAVE"], "-ERR syntax error\r\n"),
        (&["SHUTDOWN", "LATER"], "-ERR syntax error\r\n"),
        (&["PING"], "+PONG\r\n"),
    ]);
}

/// A signal is only noted until the cron takes it up: with the cron paused,
/// SHUTDOWN ABORT cancels it and the server keeps running.
#[test]
fn shutdown_abort_cancels_a_signal_not_yet_taken_up() {
    let dir = common::temp_dir("shutdown-abort");
    let mut s = TestServer::start_in(
        &dir,
        &[
            "--logfile",
            &log_path(&dir),
            "--loglevel",
            "notice",
            "--save",
            "900 1",
        ],
    );
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["DEBUG", "PAUSE-CRON", "1"]), "+OK\r\n");
    signal(s.pid(), libc::SIGTERM);
    wait_until(|| log_text(&dir).contains("Received SIGTERM scheduling shutdown..."));
    assert_eq!(c.cmd(&["SHUTDOWN", "ABORT"]), "+OK\r\n");
    assert!(log_text(&dir).contains("Shutdown manually aborted."));
    assert_eq!(c.cmd(&["DEBUG", "PAUSE-CRON", "0"]), "+OK\r\n");
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    assert_eq!(
        c.cmd(&["SHUTDOWN", "ABORT"]),
        "-ERR No shutdown in progress.\r\n"
    );
    assert!(s.is_running());
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The final save fails (a directory where the RDB file goes): SHUTDOWN answers
/// Redis's error and the server keeps running, a signal is logged and ignored, and
/// SHUTDOWN NOSAVE still exits.
#[test]
fn failed_final_save_keeps_the_server_running() {
    let dir = common::temp_dir("shutdown-fail");
    let mut s = TestServer::start_in(
        &dir,
        &[
            "--logfile",
            &log_path(&dir),
            "--loglevel",
            "notice",
            "--save",
            "900 1",
        ],
    );
    std::fs::create_dir(dir.join("dump.rdb")).unwrap();
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(
        c.cmd(&["SHUTDOWN"]),
        "-ERR Errors trying to SHUTDOWN. Check logs.\r\n"
    );
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    signal(s.pid(), libc::SIGTERM);
    wait_until(|| {
        log_text(&dir)
            .matches("Errors trying to shut down the server. Check the logs for more information.")
            .count()
            == 2
    });
    assert!(log_text(&dir).contains("Error trying to save the DB, can't exit."));
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    assert!(s.is_running());
    c.send(&["SHUTDOWN", "NOSAVE"]);
    wait_until(|| !s.is_running());
    assert!(log_text(&dir).contains("is now ready to exit, bye bye..."));
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

fn wait_replica_online(master: &TestServer, replica: &TestServer) {
    wait_until(|| {
        info_field(replica, "replication", "master_link_status").as_deref() == Some("up")
            && info_field(master, "replication", "slave0")
                .is_some_and(|l| l.contains("state=online"))
    });
}

/// A master whose replica has not acknowledged its stream waits before exiting:
/// SHUTDOWN blocks, writes are paused, INFO shows the time left; SHUTDOWN ABORT
/// answers the blocked SHUTDOWNs with Redis's error and lets the writes through.
#[test]
fn shutdown_waits_for_a_lagging_replica_until_aborted() {
    let master_dir = common::temp_dir("shutdown-master");
    let master = TestServer::start_in(
        &master_dir,
        &[
            "--logfile",
            &log_path(&master_dir),
            "--loglevel",
            "notice",
            "--save",
            "",
        ],
    );
    let replica = TestServer::start_with(&["--save", ""]);
    let mut r = replica.raw(2);
    assert_eq!(
        r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]),
        "+OK\r\n"
    );
    wait_replica_online(&master, &replica);
    signal(replica.pid(), libc::SIGSTOP);
    let mut m = master.raw(2);
    assert_eq!(m.cmd(&["INCR", "k"]), ":1\r\n");
    let mut sd1 = master.raw(2);
    let mut sd2 = master.raw(2);
    sd1.send(&["SHUTDOWN"]);
    sd2.send(&["SHUTDOWN"]);
    wait_blocked(&master, 2);
    assert!(info_field(&master, "server", "shutdown_in_milliseconds")
        .is_some_and(|ms| ms.parse::<u64>().is_ok()));
    // Writes wait while the shutdown does; reads do not.
    let mut w = master.raw(2);
    w.send(&["SET", "x", "1"]);
    wait_blocked(&master, 3);
    assert_eq!(m.cmd(&["GET", "k"]), "$1\r\n1\r\n");
    assert_eq!(m.cmd(&["SHUTDOWN", "ABORT"]), "+OK\r\n");
    assert_eq!(
        sd1.read_reply(),
        "-ERR Errors trying to SHUTDOWN. Check logs.\r\n"
    );
    assert_eq!(
        sd2.read_reply(),
        "-ERR Errors trying to SHUTDOWN. Check logs.\r\n"
    );
    assert_eq!(w.read_reply(), "+OK\r\n");
    assert_eq!(
        info_field(&master, "server", "shutdown_in_milliseconds"),
        None
    );
    assert!(log_text(&master_dir).contains("Shutdown manually aborted."));
    signal(replica.pid(), libc::SIGCONT);
    drop(master);
    let _ = std::fs::remove_dir_all(&master_dir);
}

/// SHUTDOWN waits for the replica, which catches up once resumed; then the master
/// logs that it is in sync and exits.
#[test]
fn shutdown_exits_once_the_replica_caught_up() {
    let master_dir = common::temp_dir("shutdown-sync");
    let mut master = TestServer::start_in(
        &master_dir,
        &[
            "--logfile",
            &log_path(&master_dir),
            "--loglevel",
            "notice",
            "--save",
            "",
        ],
    );
    let replica = TestServer::start_with(&["--save", ""]);
    let mut r = replica.raw(2);
    assert_eq!(
        r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]),
        "+OK\r\n"
    );
    wait_replica_online(&master, &replica);
    signal(replica.pid(), libc::SIGSTOP);
    let mut m = master.raw(2);
    assert_eq!(m.cmd(&["INCR", "k"]), ":1\r\n");
    m.send(&["SHUTDOWN"]);
    wait_blocked(&master, 1);
    signal(replica.pid(), libc::SIGCONT);
    wait_until(|| !master.is_running());
    let log = log_text(&master_dir);
    assert!(log.contains("1 of 1 replicas are in sync when shutting down."));
    assert!(!log.contains("Lagging replica"));
    assert_eq!(r.cmd(&["GET", "k"]), "$1\r\n1\r\n");
    drop(master);
    let _ = std::fs::remove_dir_all(&master_dir);
}

/// A second SIGINT during the final save exits at once (from the signal handler),
/// with status 1, deleting the save's temp file.
#[test]
fn second_sigint_exits_during_the_final_save() {
    let dir = common::temp_dir("shutdown-insist");
    let mut s = TestServer::start_in(
        &dir,
        &[
            "--logfile",
            &log_path(&dir),
            "--loglevel",
            "notice",
            "--save",
            "900 1",
        ],
    );
    let mut c = s.raw(2);
    for i in 0..20 {
        assert_eq!(c.cmd(&["SET", &i.to_string(), "v"]), "+OK\r\n");
    }
    // 20 keys at 1 s each: the save is still running when the second SIGINT comes.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "1000000"]),
        "+OK\r\n"
    );
    let temp = dir.join(format!("temp-{}.rdb", s.pid()));
    signal(s.pid(), libc::SIGINT);
    wait_until(|| temp.exists());
    signal(s.pid(), libc::SIGINT);
    wait_until(|| !s.is_running());
    assert_eq!(s.exit_code(), Some(1));
    assert!(!temp.exists());
    assert!(log_text(&dir).contains("You insist... exiting now."));
    assert!(!dir.join("dump.rdb").exists());
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// SHUTDOWN NOSAVE during a BGSAVE cancels it: neither the RDB file nor the
/// snapshot's temp file is left behind.
#[test]
fn shutdown_nosave_discards_a_background_save() {
    let dir = common::temp_dir("shutdown-bgsave");
    let mut s = TestServer::start_in(&dir, &["--save", ""]);
    let mut c = s.raw(2);
    for i in 0..20 {
        assert_eq!(c.cmd(&["SET", &i.to_string(), "v"]), "+OK\r\n");
    }
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "10000000"]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd(&["BGSAVE"]), "+Background saving started\r\n");
    let temp_exists = || {
        std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("temp-"))
    };
    wait_until(temp_exists);
    c.send(&["SHUTDOWN", "NOSAVE"]);
    wait_until(|| !s.is_running());
    assert!(!temp_exists());
    assert!(!dir.join("dump.rdb").exists());
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
