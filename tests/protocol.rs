//! The wire protocol under stress: protocol errors close only the offending
//! connection, hostile clients (huge announced bulks, endless inline lines, closing
//! mid-command) never crash the server or hold up other clients, and RESP3 types.

mod common;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;

fn read_all(mut s: TcpStream) -> String {
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

#[test]
fn protocol_errors_reply_then_close() {
    let s = TestServer::start();
    let rows: &[(&[u8], &str)] = &[
        (
            b"*x\r\n",
            "-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\nfoo\r\n",
            "-ERR Protocol error: expected '$', got 'f'\r\n",
        ),
        (
            b"*1\r\n$-5\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"set a \"b\r\n",
            "-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
        (
            b"PING\r\n*1\r\n$x\r\n",
            "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n",
        ),
    ];
    for (input, want) in rows {
        let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        c.write_all(input).unwrap();
        assert_eq!(read_all(c), *want);
    }
    assert_eq!(s.raw(2).cmd(&["PING"]), "+PONG\r\n");
}

#[test]
fn hostile_clients_do_not_affect_others() {
    let mut s = TestServer::start();
    let mut good = s.raw(2);
    good.cmd(&["SET", "k", "v"]);

    // Announces 500 MB and stalls: costs nothing and blocks no one.
    let mut huge = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    huge.write_all(b"*2\r\n$3\r\nSET\r\n$500000000\r\nabc")
        .unwrap();
    // An endless inline line is cut off at 64 KB.
    let mut endless = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    let chunk = vec![b'a'; 70 * 1024];
    let _ = endless.write_all(&chunk);
    // Closes in the middle of a command.
    let mut quitter = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    quitter
        .write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nq\r\n$10\r\nabc")
        .unwrap();
    drop(quitter);

    for _ in 0..100 {
        assert_eq!(good.cmd(&["GET", "k"]), "$1\r\nv\r\n");
    }
    assert_eq!(
        read_all(endless),
        "-ERR Protocol error: too big inline request\r\n"
    );
    let info = good.cmd(&["INFO", "memory"]);
    let used: usize = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        used < 64 << 20,
        "a stalled 500 MB announcement must not be allocated: used_memory={used}"
    );
    assert_eq!(good.cmd(&["EXISTS", "q"]), ":0\r\n");
    drop(huge);
    assert!(s.is_running());

    // Random garbage from many connections never brings the server down.
    let mut seed: u64 = 0x9E3779B97F4A7C15;
    for _ in 0..50 {
        let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        let mut junk = Vec::new();
        for _ in 0..256 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            junk.push(b"*$\r\n0123456789-abc \"'\\"[(seed % 22) as usize]);
        }
        let _ = c.write_all(&junk);
    }
    assert_eq!(good.cmd(&["PING"]), "+PONG\r\n");
    assert!(s.is_running());
}

#[test]
fn big_values_round_trip() {
    let s = TestServer::start();
    let mut c = s.client();
    let big = vec![b'x'; 8 << 20];
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query(&mut c)
        .unwrap();
    let back: Vec<u8> = redis::cmd("GET").arg("big").query(&mut c).unwrap();
    assert_eq!(back.len(), big.len());
    let n: i64 = redis::cmd("STRLEN").arg("big").query(&mut c).unwrap();
    assert_eq!(n, 8 << 20);
}

/// Output far beyond the socket buffers: the server writes what fits, waits for the
/// socket to drain (writability is watched only then) and finishes every reply, while
/// other clients are served meanwhile.
#[test]
fn slow_reader_gets_every_reply() {
    let s = TestServer::start();
    let mut c = s.client();
    let value = vec![b'v'; 1 << 20];
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&value)
        .query(&mut c)
        .unwrap();
    let mut slow = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    slow.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let get = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n".repeat(48);
    slow.write_all(&get).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    // The server is stuck on nothing: another client is answered at once.
    let mut other = s.raw(2);
    assert_eq!(other.cmd(&["PING"]), "+PONG\r\n");
    let header = format!("${}\r\n", value.len());
    let one = header.len() + value.len() + 2;
    let mut got = vec![0u8; one * 48];
    let mut at = 0;
    while at < got.len() {
        // Small reads, with pauses, so the server sees a full socket many times.
        let end = (at + 256 * 1024).min(got.len());
        slow.read_exact(&mut got[at..end]).unwrap();
        at = end;
        if at % (4 << 20) < 256 * 1024 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    for i in 0..48 {
        let r = &got[i * one..(i + 1) * one];
        assert!(r.starts_with(header.as_bytes()), "reply {i}");
        assert!(
            r[header.len()..one - 2].iter().all(|&b| b == b'v'),
            "reply {i}"
        );
        assert_eq!(&r[one - 2..], b"\r\n");
    }
}

/// A command trickling in a few bytes at a time: every read is short (the socket is
/// drained), and the next piece's arrival must still wake the server.
#[test]
fn trickled_commands_are_answered() {
    let s = TestServer::start();
    let mut t = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    t.set_nodelay(true).unwrap();
    t.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let cmds =
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n";
    for piece in cmds.chunks(3) {
        t.write_all(piece).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let want = b"+OK\r\n$5\r\nhello\r\n+PONG\r\n";
    let mut got = vec![0u8; want.len()];
    t.read_exact(&mut got).unwrap();
    assert_eq!(got, want);
}

/// A client streaming pipelined commands (each read ends mid-command) keeps a query
/// buffer of about one read, not one that grows with everything it sends.
#[test]
fn streamed_pipeline_keeps_the_query_buffer_small() {
    let s = TestServer::start();
    let mut w = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    let mut r = w.try_clone().unwrap();
    let n = 100_000;
    let reader = std::thread::spawn(move || {
        let mut got = 0usize;
        let mut buf = vec![0u8; 1 << 16];
        while got < n * 5 {
            got += r.read(&mut buf).unwrap();
        }
    });
    let mut batch = Vec::new();
    for i in 0..n {
        let key = format!("key:{i:08}");
        batch.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$10\r\nvalue-{:04}\r\n",
                key.len(),
                i % 10000
            )
            .as_bytes(),
        );
        if batch.len() > 50_000 {
            w.write_all(&batch).unwrap();
            batch.clear();
        }
    }
    w.write_all(&batch).unwrap();
    reader.join().unwrap();
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["DBSIZE"]), format!(":{n}\r\n"));
    let list = c.cmd(&["CLIENT", "LIST"]);
    // The other client's line: qbuf + qbuf-free is its read buffer's size.
    let line = list
        .lines()
        .find(|l| l.contains("cmd=set"))
        .expect("the writer's line");
    let field = |name: &str| -> usize {
        let v = line.split(' ').find_map(|f| f.strip_prefix(name)).unwrap();
        v.parse().unwrap()
    };
    let size = field("qbuf=") + field("qbuf-free=");
    assert!(size <= 256 * 1024, "query buffer grew to {size} bytes");
}

/// A client that sends part of a command and closes must be noticed even when its data
/// and its FIN arrive together (one readiness edge for both), or such clients pile up
/// until `maxclients` locks everyone out.
#[test]
fn half_commands_then_close_leave_no_client_behind() {
    let s = TestServer::start_with(&["--maxclients", "20"]);
    let mut admin = s.raw(2);
    for round in 0..3 {
        // While the server sleeps, each client's bytes and FIN queue up together.
        let mut sleeper = s.raw(2);
        sleeper.send(&["DEBUG", "SLEEP", "0.3"]);
        std::thread::sleep(std::time::Duration::from_millis(50));
        for i in 0..25 {
            let Ok(mut c) = TcpStream::connect(("127.0.0.1", s.port)) else {
                continue;
            };
            let partial: &[u8] = match i % 3 {
                0 => b"*2\r\n$3\r\nGET",
                1 => b"*2\r\n$3\r\nGET\r\n$5\r\nab",
                _ => b"PING\r\n*1\r\n",
            };
            let _ = c.write_all(partial);
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
        assert_eq!(sleeper.read_reply(), "+OK\r\n", "round {round}");
        drop(sleeper);
        wait_until(|| {
            let list = admin.cmd(&["CLIENT", "LIST"]);
            list.matches("id=").count() == 1
        });
    }
    let mut fresh = s.raw(2);
    assert_eq!(fresh.cmd(&["PING"]), "+PONG\r\n");
}
