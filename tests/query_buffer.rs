//! Query buffers as Redis 7.4's: a client that ran a command keeps a 16 KB buffer of
//! its own until it has been idle for two seconds, when the cron frees it; an
//! announced big argument gets room for all of it; CLIENT LIST shows both.

mod common;
use common::*;
use std::io::Write;
use std::net::TcpStream;

/// `qbuf` and `qbuf-free` of the client named `name`, and its `idle`.
fn qbuf_of(admin: &mut RawConn, name: &str) -> (usize, usize, u64) {
    let list = admin.cmd(&["CLIENT", "LIST"]);
    let line = list
        .lines()
        .find(|l| l.contains(&format!(" name={name} ")))
        .expect("the client's line")
        .to_string();
    let field = |f: &str| -> u64 {
        line.split(' ')
            .find_map(|x| x.strip_prefix(f))
            .unwrap()
            .parse()
            .unwrap()
    };
    (
        field("qbuf=") as usize,
        field("qbuf-free=") as usize,
        field("idle="),
    )
}

#[test]
fn an_active_clients_buffer_is_freed_once_idle() {
    let s = TestServer::start_with(&["--hz", "100"]);
    let mut admin = s.raw(2);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "tc"]), "+OK\r\n");
    assert_eq!(qbuf_of(&mut admin, "tc").0, 0);
    assert_eq!(qbuf_of(&mut admin, "tc").1, 16 * 1024);
    // Later reads go into that buffer and leave it as it was (the usual read's and
    // settle's own path).
    for _ in 0..3 {
        assert_eq!(c.cmd(&["SET", "k", "v"]), "+OK\r\n");
    }
    let (qbuf, free, _) = qbuf_of(&mut admin, "tc");
    assert_eq!((qbuf, free), (0, 16 * 1024));
    wait_until(|| {
        let (qbuf, free, idle) = qbuf_of(&mut admin, "tc");
        idle >= 3 && qbuf + free == 0
    });
    // It reads again as before.
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
}

#[test]
fn an_announced_big_argument_gets_room_and_an_idle_client_gives_it_back() {
    let s = TestServer::start_with(&["--hz", "100"]);
    let mut admin = s.raw(2);
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.write_all(b"*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$2\r\nfa\r\n")
        .unwrap();
    let mut ok = [0u8; 5];
    std::io::Read::read_exact(&mut c, &mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    c.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1000000\r\n")
        .unwrap();
    wait_until(|| {
        let (qbuf, free, _) = qbuf_of(&mut admin, "fa");
        // As Redis, the buffer holds the big argument alone: what preceded its
        // data is no longer counted.
        qbuf == 0 && free >= 1_000_000
    });
    wait_until(|| {
        let (qbuf, free, idle) = qbuf_of(&mut admin, "fa");
        idle >= 3 && qbuf + free == 0
    });
    // The rest of the argument still completes the command.
    c.write_all(&vec![b'x'; 1_000_000]).unwrap();
    c.write_all(b"\r\n").unwrap();
    wait_until(|| admin.cmd(&["STRLEN", "a"]) == ":1000000\r\n");
}
