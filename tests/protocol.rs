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
