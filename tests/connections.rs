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
    // With I/O threads their batches shrink back at the next cron tick.
    let mut left = i64::MAX;
    wait_until(|| {
        left = (used_memory(&mut admin) - before) / n as i64;
        left < 64
    });
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
    let dir = temp_dir("fdlimit");
    let log = dir.join("server.log");
    let s = TestServer::start_in(
        &dir,
        &[
            "--maxclients",
            &asked.to_string(),
            "--logfile",
            log.to_str().unwrap(),
        ],
    );
    let limit = max_open_files(s.pid());
    // The reason is strerror's text, as Redis logs it (no " (os error N)").
    let text = std::fs::read_to_string(&log).unwrap();
    let wanted = asked + 32;
    assert!(
        text.contains(&format!("Server can't set maximum open files to {wanted} because of OS error: Operation not permitted.\n")),
        "{text}"
    );
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
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
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

/// Reads exactly `len` bytes and returns them as text.
fn read_n(c: &mut TcpStream, len: usize) -> String {
    let mut buf = vec![0u8; len];
    c.read_exact(&mut buf).unwrap();
    String::from_utf8(buf).unwrap()
}

fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

#[test]
fn ten_thousand_clients_are_served_at_once_and_the_next_is_refused() {
    const WANTED: usize = 10_000;
    // This process holds every client socket; the server inherits the raised limit
    // and raises its own to maxclients + 32 within it.
    let own = raise_own_nofile() as usize;
    let n = if own >= WANTED + 100 {
        WANTED
    } else {
        let n = own.saturating_sub(100).max(100);
        eprintln!("open-files hard limit is {own}: running with {n} clients instead of {WANTED}");
        n
    };
    let s = TestServer::start_with(&[
        "--appendonly",
        "no",
        "--save",
        "",
        "--maxclients",
        &n.to_string(),
    ]);
    let mut admin = s.raw(2);
    let mut clients: Vec<TcpStream> = (1..n)
        .map(|_| TcpStream::connect(("127.0.0.1", s.port)).unwrap())
        .collect();
    let connected = |admin: &mut RawConn| {
        let info = admin.cmd(&["INFO", "clients"]);
        info.split("\r\n")
            .find_map(|l| l.strip_prefix("connected_clients:").map(str::to_string))
            .unwrap()
    };
    wait_until(|| connected(&mut admin) == n.to_string());
    // Every client at once: its own keys, plus one counter shared by all.
    for round in 1..=2 {
        for (i, c) in clients.iter_mut().enumerate() {
            let (key, ctr, val) = (format!("k:{i}"), format!("c:{i}"), format!("v{round}.{i}"));
            let mut req = resp(&["SET", &key, &val]);
            req.extend(resp(&["INCR", &ctr]));
            req.extend(resp(&["GET", &key]));
            req.extend(resp(&["INCR", "shared"]));
            c.write_all(&req).unwrap();
        }
        let mut shared = Vec::with_capacity(n);
        for (i, c) in clients.iter_mut().enumerate() {
            let val = format!("v{round}.{i}");
            let want = format!("+OK\r\n:{round}\r\n${}\r\n{val}\r\n", val.len());
            assert_eq!(read_n(c, want.len()), want, "client {i}, round {round}");
            let mut line = Vec::new();
            let mut byte = [0u8; 1];
            while !line.ends_with(b"\r\n") {
                c.read_exact(&mut byte).unwrap();
                line.push(byte[0]);
            }
            let text = String::from_utf8(line).unwrap();
            let v: usize = text.trim_start_matches(':').trim_end().parse().unwrap();
            shared.push(v);
        }
        // Each INCR of the shared counter saw a distinct value.
        shared.sort_unstable();
        let first = (round - 1) * (n - 1) + 1;
        assert!(
            shared.iter().copied().eq(first..first + n - 1),
            "round {round}"
        );
    }
    // The client past maxclients reads Redis's error, then the end of the stream.
    let mut refused = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    let mut text = String::new();
    let _ = refused.read_to_string(&mut text);
    assert_eq!(text, "-ERR max number of clients reached\r\n");
    assert_eq!(admin.cmd(&["DBSIZE"]), format!(":{}\r\n", 2 * (n - 1) + 1));
    assert_eq!(
        admin.cmd(&["GET", "shared"]),
        format!(
            "${}\r\n{}\r\n",
            (2 * (n - 1)).to_string().len(),
            2 * (n - 1)
        )
    );
    // A closed client frees its place for the next one.
    drop(clients.pop());
    wait_until(|| connected(&mut admin) == (n - 1).to_string());
    let mut next = RawConn::connect(s.port, 2);
    assert_eq!(next.cmd(&["PING"]), "+PONG\r\n");
}
