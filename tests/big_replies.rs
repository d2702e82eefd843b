//! Replies too big to build at once: random picks with a huge negative count stream
//! as the socket drains (a snapshot of the collection taken when the command ran,
//! the connection's pipeline held behind it, other clients served meanwhile), and
//! under an output-buffer limit the client is closed without the server ballooning.

mod common;

use common::*;
use std::io::Read;

fn vm_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("{field} in {status}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn fill(c: &mut RawConn) {
    c.cmd(&["SADD", "s", "a", "b", "c"]);
    c.cmd(&["ZADD", "z", "1", "a", "2.5", "b"]);
    c.cmd(&["HSET", "h", "f", "v", "g", "w"]);
}

/// Reads at least `n` bytes of what the connection has.
fn read_some(c: &mut RawConn, n: usize) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = vec![0; 64 * 1024];
    while got.len() < n {
        let k = c.reader.read(&mut buf).unwrap();
        assert!(k > 0, "connection closed");
        got.extend_from_slice(&buf[..k]);
    }
    got
}

/// Reads until the peer closes (or the read times out, which fails).
fn read_to_close(c: &mut RawConn) {
    let mut buf = vec![0; 1 << 20];
    loop {
        match c.reader.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return,
            Err(e) => panic!("connection not closed: {e}"),
        }
    }
}

#[test]
fn huge_negative_counts_stream_while_other_clients_are_served() {
    let s = TestServer::start_with(&["--appendonly", "no", "--save", ""]);
    let mut c = s.raw(2);
    fill(&mut c);
    let cases: [(&[&str], u8, &str); 5] = [
        (
            &["SRANDMEMBER", "s", "-4294967296"],
            2,
            "*4294967296\r\n$1\r\n",
        ),
        (
            &["ZRANDMEMBER", "z", "-9223372036854775807"],
            2,
            "*9223372036854775807\r\n$1\r\n",
        ),
        (
            &["ZRANDMEMBER", "z", "-4611686018427387903", "WITHSCORES"],
            3,
            "*4611686018427387903\r\n*2\r\n$1\r\n",
        ),
        (
            &["HRANDFIELD", "h", "-4611686018427387903", "WITHVALUES"],
            2,
            "*9223372036854775806\r\n$1\r\n",
        ),
        (
            &["HRANDFIELD", "h", "-9223372036854775807"],
            3,
            "*9223372036854775807\r\n$1\r\n",
        ),
    ];
    for (cmd, proto, prefix) in cases {
        let mut big = s.raw(proto);
        big.send(cmd);
        let head = read_some(&mut big, 1 << 20);
        assert!(
            head.starts_with(prefix.as_bytes()),
            "{cmd:?}: {:?}",
            String::from_utf8_lossy(&head[..64])
        );
        // Served while the reply is pending, with the server's memory bounded.
        assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
        assert_eq!(c.cmd(&["SADD", "s", "x"]), ":1\r\n");
        assert_eq!(c.cmd(&["SREM", "s", "x"]), ":1\r\n");
        assert!(
            vm_kb(s.pid(), "VmRSS:") < 512 * 1024,
            "{cmd:?} grew the server"
        );
        let list = c.cmd(&["CLIENT", "LIST"]);
        let line = list
            .lines()
            .find(|l| l.contains("cmd=") && !l.contains("cmd=client|list"))
            .unwrap_or_else(|| panic!("{list}"));
        let omem: usize = line
            .split(' ')
            .find_map(|f| f.strip_prefix("omem="))
            .unwrap()
            .parse()
            .unwrap();
        assert!(omem < 1 << 20, "{line}");
        let id = line
            .split(' ')
            .find_map(|f| f.strip_prefix("id="))
            .unwrap()
            .to_string();
        assert_eq!(c.cmd(&["CLIENT", "KILL", "ID", &id]), ":1\r\n");
        read_to_close(&mut big);
    }
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
}

/// Parses a RESP2/RESP3 array of bulk strings and doubles, flattening pairs.
fn elements(reply: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = reply.split("\r\n");
    lines.next();
    while let Some(l) = lines.next() {
        if l.starts_with('$') {
            out.push(lines.next().unwrap().to_string());
        } else if let Some(d) = l.strip_prefix(',') {
            out.push(d.to_string());
        }
    }
    out
}

#[test]
fn streamed_replies_are_exact_and_the_pipeline_follows() {
    let s = TestServer::start_with(&["--appendonly", "no", "--save", ""]);
    for proto in [2u8, 3] {
        let mut c = s.raw(proto);
        c.cmd(&["FLUSHALL"]);
        fill(&mut c);
        c.send(&["SRANDMEMBER", "s", "-20000"]);
        c.send(&["ZRANDMEMBER", "z", "-20000", "WITHSCORES"]);
        c.send(&["HRANDFIELD", "h", "-20000", "WITHVALUES"]);
        c.send(&["PING"]);
        let members = c.read_reply();
        assert!(
            members.starts_with("*20000\r\n$1\r\n"),
            "{}",
            &members[..20]
        );
        let items = elements(&members);
        assert_eq!(items.len(), 20000);
        assert!(items.iter().all(|m| ["a", "b", "c"].contains(&m.as_str())));
        // All three members come up (a 1 in 3^20000 chance otherwise).
        for m in ["a", "b", "c"] {
            assert!(items.iter().any(|x| x == m));
        }
        let scored = c.read_reply();
        let pair_head = if proto == 3 {
            "*20000\r\n*2\r\n$1\r\n"
        } else {
            "*40000\r\n$1\r\n"
        };
        assert!(scored.starts_with(pair_head), "{}", &scored[..20]);
        let items = elements(&scored);
        assert_eq!(items.len(), 40000);
        for pair in items.chunks(2) {
            let ok = (pair[0] == "a" && pair[1] == "1") || (pair[0] == "b" && pair[1] == "2.5");
            assert!(ok, "{pair:?}");
        }
        let fields = c.read_reply();
        assert!(fields.starts_with(pair_head), "{}", &fields[..20]);
        for pair in elements(&fields).chunks(2) {
            let ok = (pair[0] == "f" && pair[1] == "v") || (pair[0] == "g" && pair[1] == "w");
            assert!(ok, "{pair:?}");
        }
        assert_eq!(c.read_reply(), "+PONG\r\n");
        // Inside EXEC and scripts the reply is built whole, the same.
        c.cmd(&["MULTI"]);
        c.cmd(&["SRANDMEMBER", "s", "-10000"]);
        let exec = c.cmd(&["EXEC"]);
        assert!(
            exec.starts_with("*1\r\n*10000\r\n$1\r\n"),
            "{}",
            &exec[..20]
        );
        assert_eq!(elements(&exec).len(), 10000);
        let script = "return #redis.call('zrandmember', KEYS[1], -10000, 'withscores')";
        let n = c.cmd(&["EVAL", script, "1", "z"]);
        // Scripts speak RESP2 unless they ask otherwise: member, score, member…
        assert_eq!(n, ":20000\r\n");
        // A small count answers at once, in the same form.
        let small = c.cmd(&["ZRANDMEMBER", "z", "-3", "WITHSCORES"]);
        assert_eq!(elements(&small).len(), 6);
        let head = if proto == 3 {
            "*3\r\n*2\r\n"
        } else {
            "*6\r\n$1\r\n"
        };
        assert!(small.starts_with(head), "{small}");
    }
}

#[test]
fn a_streamed_reply_is_the_snapshot_and_pushes_follow_it() {
    let s = TestServer::start_with(&["--appendonly", "no", "--save", ""]);
    let mut c = s.raw(2);
    fill(&mut c);
    c.cmd(&["SET", "k", "v"]);
    let mut big = s.raw(3);
    assert_eq!(big.cmd(&["CLIENT", "TRACKING", "ON"]), "+OK\r\n");
    assert_eq!(big.cmd(&["GET", "k"]), "$1\r\nv\r\n");
    big.send(&["SRANDMEMBER", "s", "-3000000"]);
    big.send(&["PING"]);
    let mut all = read_some(&mut big, 64 * 1024);
    // Changes made meanwhile are not in the reply; the invalidations wait behind it.
    assert_eq!(c.cmd(&["DEL", "s"]), ":1\r\n");
    assert_eq!(c.cmd(&["SADD", "s", "new"]), ":1\r\n");
    assert_eq!(c.cmd(&["SET", "k", "w"]), "+OK\r\n");
    let mut buf = vec![0; 1 << 20];
    while !all.ends_with(b"+PONG\r\n") {
        let k = big.reader.read(&mut buf).unwrap();
        assert!(k > 0, "closed");
        all.extend_from_slice(&buf[..k]);
    }
    let head = b"*3000000\r\n";
    assert!(all.starts_with(head));
    let reply_end = head.len() + 3_000_000 * 7;
    for pick in all[head.len()..reply_end].chunks(7) {
        assert!(
            [b"$1\r\na\r\n", b"$1\r\nb\r\n", b"$1\r\nc\r\n"].contains(&pick.try_into().unwrap()),
            "{:?}",
            String::from_utf8_lossy(pick)
        );
    }
    // The invalidations of `s` (read by the command) and `k`, then the PING's reply.
    assert_eq!(
        String::from_utf8_lossy(&all[reply_end..]),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\ns\r\n>2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n+PONG\r\n"
    );
}

#[test]
fn quit_and_reset_wait_for_a_streamed_reply() {
    let s = TestServer::start_with(&["--appendonly", "no", "--save", ""]);
    let mut c = s.raw(2);
    fill(&mut c);
    c.send(&["SRANDMEMBER", "s", "-100000"]);
    c.send(&["RESET"]);
    c.send(&["QUIT"]);
    assert_eq!(elements(&c.read_reply()).len(), 100000);
    assert_eq!(c.read_reply(), "+RESET\r\n");
    assert_eq!(c.read_reply(), "+OK\r\n");
    read_to_close(&mut c);
}

#[test]
fn output_limit_closes_a_huge_pick_reply_without_ballooning() {
    let s = TestServer::start_with(&[
        "--appendonly",
        "no",
        "--save",
        "",
        "--client-output-buffer-limit",
        "normal 64mb 32mb 10",
    ]);
    let mut c = s.raw(2);
    for i in 0..100 {
        c.cmd(&["SADD", "s", &format!("member:{i:04}")]);
    }
    let before = vm_kb(s.pid(), "VmRSS:");
    for cmd in [
        &["SRANDMEMBER", "s", "-20000000"][..],
        &["SRANDMEMBER", "s", "-4294967296"],
    ] {
        let mut big = s.raw(2);
        big.send(cmd);
        read_to_close(&mut big);
        assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    }
    let info = c.cmd(&["INFO", "stats"]);
    assert!(
        info.contains("client_output_buffer_limit_disconnections:2\r\n"),
        "{info}"
    );
    // About the limit, not a multiple of it: the picks are encoded as they are made.
    let grown = vm_kb(s.pid(), "VmHWM:").saturating_sub(before);
    assert!(grown < 200 * 1024, "peak grew by {grown} kB");
}

#[test]
fn a_slow_readers_backlog_is_a_list_of_blocks() {
    let s = TestServer::start_with(&["--appendonly", "no", "--save", ""]);
    let mut c = s.raw(2);
    let value = "v".repeat(1 << 20);
    c.cmd(&["SET", "big", &value]);
    let before = vm_kb(s.pid(), "VmRSS:");
    let mut slow = s.raw(2);
    let n = 200;
    for _ in 0..n {
        slow.send(&["GET", "big"]);
    }
    // The backlog builds while others are served.
    wait_until(|| {
        let list = c.cmd(&["CLIENT", "LIST"]);
        list.lines().any(|l| {
            l.split(' ')
                .find_map(|f| f.strip_prefix("omem="))
                .is_some_and(|m| m.parse::<usize>().unwrap() > 150 << 20)
        })
    });
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    // Blocks as big as the replies, not a vector twice the backlog.
    let grown = vm_kb(s.pid(), "VmHWM:").saturating_sub(before);
    assert!(grown < 260 * 1024, "peak grew by {grown} kB");
    let want = format!("${}\r\n{value}\r\n", value.len());
    for _ in 0..n {
        assert!(slow.read_reply() == want);
    }
    assert_eq!(slow.cmd(&["PING"]), "+PONG\r\n");
}

#[test]
fn a_slow_reader_past_the_output_limit_is_closed() {
    let s = TestServer::start_with(&[
        "--appendonly",
        "no",
        "--save",
        "",
        "--client-output-buffer-limit",
        "normal 64mb 32mb 10",
    ]);
    let mut c = s.raw(2);
    c.cmd(&["SET", "big", &"v".repeat(1 << 20)]);
    let mut slow = s.raw(2);
    for _ in 0..200 {
        slow.send(&["GET", "big"]);
    }
    // Nothing is read until the server gives up on the client: a pipeline of big
    // replies runs a slice per loop turn, so a client that reads keeps up.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let info = c.cmd(&["INFO", "stats"]);
        if info.contains("client_output_buffer_limit_disconnections:1\r\n") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{info}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    read_to_close(&mut slow);
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
}

/// A pipeline of big replies runs a megabyte of output per loop turn, the rest on the
/// following turns: every reply still comes in order and whole, with another client's
/// commands served between the slices.
#[test]
fn a_pipeline_of_big_replies_runs_in_slices_in_order() {
    let s = TestServer::start_with(&["--appendonly", "no", "--save", ""]);
    let mut c = s.raw(2);
    let value = "v".repeat(700 * 1024);
    assert_eq!(c.cmd(&["SET", "big", &value]), "+OK\r\n");
    let mut pipe = s.raw(2);
    for i in 0..48 {
        pipe.send(&["GET", "big"]);
        pipe.send(&["ECHO", &i.to_string()]);
    }
    for i in 0..20 {
        assert_eq!(c.cmd(&["INCR", "other"]), format!(":{}\r\n", i + 1));
    }
    let want = format!("${}\r\n{value}\r\n", value.len());
    for i in 0..48 {
        assert!(pipe.read_reply() == want, "reply {i}");
        let n = i.to_string();
        assert_eq!(pipe.read_reply(), format!("${}\r\n{n}\r\n", n.len()));
    }
    assert_eq!(pipe.cmd(&["PING"]), "+PONG\r\n");
}
