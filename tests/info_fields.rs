//! INFO: every field redis-server 7.0 reports in the server, clients, memory,
//! persistence, stats and cpu sections is reported here too (same names).

mod common;
use common::*;
use std::collections::BTreeSet;

fn fields(info: &str, section: &str) -> BTreeSet<String> {
    let mut cur = String::new();
    let mut out = BTreeSet::new();
    for line in info.lines() {
        if let Some(h) = line.strip_prefix("# ") {
            cur = h.to_ascii_lowercase();
        } else if cur == section {
            if let Some((k, _)) = line.split_once(':') {
                out.insert(k.to_string());
            }
        }
    }
    out
}

/// The body of a RESP2 bulk reply.
fn body(reply: &str) -> &str {
    reply.split_once("\r\n").map_or("", |(_, b)| b)
}

#[test]
fn field_sets_cover_redis() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start_with(&["--appendonly", "no"]);
    let r = RedisServer::start();
    let ours = s.raw(2).cmd(&["INFO", "everything"]);
    let theirs = r.raw(2).cmd(&["INFO", "everything"]);
    for section in ["server", "clients", "memory", "persistence", "stats", "cpu"] {
        let a = fields(body(&ours), section);
        let b = fields(body(&theirs), section);
        let missing: Vec<_> = b.difference(&a).collect();
        assert!(missing.is_empty(), "{section}: missing {missing:?}");
    }
}

#[test]
fn kbps_and_main_thread_cpu_have_values() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let info = c.cmd(&["INFO", "everything"]);
    for f in [
        "instantaneous_input_kbps:",
        "instantaneous_output_kbps:",
        "used_cpu_user_main_thread:",
        "mem_aof_buffer:",
        "sync_full:0\r\n",
        "io_threaded_reads_processed:0\r\n",
    ] {
        assert!(info.contains(f), "{f}");
    }
}

/// Each field appears once in INFO everything, and the socket read/write counters
/// move with traffic.
#[test]
fn fields_are_unique_and_io_counters_count() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let info = c.cmd(&["INFO", "everything"]);
    let mut seen = BTreeSet::new();
    for line in body(&info).lines() {
        if let Some((k, _)) = line.split_once(':') {
            assert!(seen.insert(k.to_string()), "duplicate field {k}");
        }
    }
    let count = |info: &str, f: &str| -> u64 {
        let line = info.lines().find(|l| l.starts_with(f)).expect(f);
        line[f.len() + 1..].parse().unwrap()
    };
    let (r0, w0) = (
        count(&info, "total_reads_processed"),
        count(&info, "total_writes_processed"),
    );
    for _ in 0..5 {
        c.cmd(&["PING"]);
    }
    let info = c.cmd(&["INFO", "stats"]);
    assert!(count(&info, "total_reads_processed") >= r0 + 6);
    assert!(count(&info, "total_writes_processed") >= w0 + 5);
}
