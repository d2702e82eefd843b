//! Crash reports in the log: DEBUG SEGFAULT, a SIGABRT from outside, DEBUG ASSERT,
//! and SIGALRM's non-fatal stack trace.

mod common;

use common::{wait_until, TestServer};

fn start_logging(dir: &std::path::Path, extra: &[&str]) -> TestServer {
    let log = dir.join("server.log").display().to_string();
    let mut args = vec!["--logfile", log.as_str(), "--loglevel", "notice"];
    args.extend_from_slice(extra);
    TestServer::start_in(dir, &args)
}

fn log_text(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
}

fn assert_report(log: &str, headline: &str) {
    let start = log
        .find("=== CINNABAR BUG REPORT START")
        .expect("no report start");
    let report = &log[start..];
    assert!(report.contains(headline), "{report}");
    assert!(report.contains("\n------ STACK TRACE ------\n"), "{report}");
    assert!(
        report.contains("\n------ STACK TRACE DONE ------\n"),
        "{report}"
    );
    assert!(report.contains("=== CINNABAR BUG REPORT END."), "{report}");
    assert_eq!(log.matches("STACK TRACE -").count(), 1, "{log}");
}

#[test]
fn debug_segfault_writes_a_crash_report_and_dies_by_the_signal() {
    use std::os::unix::process::ExitStatusExt;
    let dir = common::temp_dir("crash-segv");
    let mut s = start_logging(&dir, &[]);
    let mut c = s.raw(2);
    c.send(&["DEBUG", "SEGFAULT"]);
    wait_until(|| !s.is_running());
    assert_eq!(s.exit_status().and_then(|st| st.signal()), Some(11));
    let log = log_text(&dir);
    assert_report(&log, "crashed by signal: 11");
    assert!(log.contains("Crashed running the instruction at: 0x"));
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigabrt_from_outside_writes_a_crash_report() {
    let dir = common::temp_dir("crash-abrt");
    let mut s = start_logging(&dir, &[]);
    // SAFETY: sending a signal to a child process this test started.
    unsafe { libc::kill(s.pid() as i32, libc::SIGABRT) };
    wait_until(|| !s.is_running());
    assert_report(&log_text(&dir), "crashed by signal: 6");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn crash_log_disabled_writes_no_report() {
    let dir = common::temp_dir("crash-off");
    let mut s = start_logging(&dir, &[]);
    let mut c = s.raw(2);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "crash-log-enabled", "no"]),
        "+OK\r\n"
    );
    c.send(&["DEBUG", "SEGFAULT"]);
    wait_until(|| !s.is_running());
    assert!(!log_text(&dir).contains("BUG REPORT"));
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn debug_assert_writes_an_assertion_report_and_exits() {
    let dir = common::temp_dir("crash-assert");
    let mut s = start_logging(&dir, &["--use-exit-on-panic", "yes"]);
    let mut c = s.raw(2);
    c.send(&["DEBUG", "ASSERT"]);
    wait_until(|| !s.is_running());
    assert_eq!(s.exit_code(), Some(1));
    let log = log_text(&dir);
    assert_report(&log, "=== ASSERTION FAILED ===");
    assert!(log.contains("'1 == 2' is not true"));
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigalrm_logs_a_stack_trace_and_the_server_goes_on() {
    let dir = common::temp_dir("crash-alrm");
    let mut s = start_logging(&dir, &[]);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    // SAFETY: sending a signal to a child process this test started.
    unsafe { libc::kill(s.pid() as i32, libc::SIGALRM) };
    wait_until(|| log_text(&dir).contains("------ STACK TRACE DONE ------"));
    let log = log_text(&dir);
    assert!(log.contains("# Received SIGALRM\n"));
    assert!(!log.contains("BUG REPORT"));
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    assert!(s.is_running());
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `watchdog-period`: a command that stalls the event loop longer than the period
/// gets a watchdog stack trace in the log; the server goes on.
#[test]
fn watchdog_logs_a_stalled_event_loop() {
    let dir = common::temp_dir("crash-watchdog");
    let mut s = start_logging(&dir, &[]);
    let mut c = s.raw(2);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "watchdog-period", "50"]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "1"]), "+OK\r\n");
    wait_until(|| log_text(&dir).contains("------ STACK TRACE DONE ------"));
    assert!(log_text(&dir).contains("# --- WATCHDOG TIMER EXPIRED ---\n"));
    assert_eq!(c.cmd(&["CONFIG", "SET", "watchdog-period", "0"]), "+OK\r\n");
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    assert!(s.is_running());
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
