//! What connections cost and how many the process can hold: idle clients own no read
//! buffer (reads borrow one shared buffer), closed clients give their memory back, and
//! `maxclients` is lowered at startup to what the open-files limit allows, as Redis does.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;

fn used_memory(c: &mut RawConn) -> i64 {
    let info = c.cmd(&["INFO", "memory"]);
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Raises this test process's own open-files limit to its hard limit.
fn raise_own_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write one rlimit struct through valid pointers.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
    lim.rlim_cur
}

#[test]
fn idle_clients_cost_about_a_kilobyte_and_give_it_back() {
    let own = raise_own_nofile();
    let n = 2000.min(own.saturating_sub(100) as usize);
    let s = TestServer::start_with(&["--appendonly", "no", "--save", "", "--maxclients", "5000"]);
    let mut admin = s.raw(2);
    let before = used_memory(&mut admin);
    let mut clients = Vec::new();
    for _ in 0..n {
        let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        c.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        clients.push(c);
    }
    for c in &mut clients {
        let mut buf = [0u8; 7];
        c.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"+PONG\r\n");
    }
    // A client that just ran a command keeps a 16 KB query buffer, as Redis 7.4 does;
    // once idle for two seconds the cron frees it. Each used to keep a 64 KB read
    // buffer for good; Redis 7.4's idle clients cost about 7 KB.
    let mut per_client = i64::MAX;
    wait_until(|| {
        per_client = (used_memory(&mut admin) - before) / n as i64;
        per_client < 4096
    });
    assert!(per_client < 4096, "{per_client} bytes per idle client");
    drop(clients);
    wait_until(|| {
        let list = admin.cmd(&["CLIENT", "LIST"]);
        list.matches("id=").count() == 1
    });
    let left = (used_memory(&mut admin) - before) / n as i64;
    assert!(left < 64, "{left} bytes per closed client kept");
}

fn nr_open() -> u64 {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1 << 20)
}

fn max_open_files(pid: u32) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

#[test]
fn maxclients_is_lowered_to_what_the_open_files_limit_allows() {
    // No process can have more descriptors than nr_open, so this many clients cannot
    // fit: the server starts with maxclients lowered to its limit less 32 reserved.
    let asked = nr_open();
    let s = TestServer::start_with(&["--maxclients", &asked.to_string()]);
    let limit = max_open_files(s.pid());
    let mut c = s.raw(2);
    let got = c.cmd(&["CONFIG", "GET", "maxclients"]);
    let lowered = limit - 32;
    assert!(lowered < asked);
    assert_eq!(
        got,
        format!(
            "*2\r\n$10\r\nmaxclients\r\n${}\r\n{lowered}\r\n",
            lowered.to_string().len()
        )
    );
    let err = c.cmd(&["CONFIG", "SET", "maxclients", &(asked + 1).to_string()]);
    assert_eq!(
        err,
        format!("-ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able to handle the specified number of clients, try with {lowered}\r\n")
    );
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxclients", "100"]), "+OK\r\n");
}

#[test]
fn clients_past_maxclients_are_refused_with_an_error() {
    let s = TestServer::start_with(&["--maxclients", "3"]);
    let _held: Vec<RawConn> = (0..2).map(|_| s.raw(2)).collect();
    let mut third = s.raw(2);
    assert_eq!(third.cmd(&["PING"]), "+PONG\r\n");
    let mut refused = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    let mut text = String::new();
    let _ = refused.read_to_string(&mut text);
    assert_eq!(text, "-ERR max number of clients reached\r\n");
}
