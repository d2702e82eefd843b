//! Client memory as Redis counts it: CLIENT LIST's memory fields, client eviction
//! (`maxmemory-clients`, CLIENT NO-EVICT), the adaptive reply buffer (DEBUG
//! REPLYBUFFER, `rbs`/`rbp`), the soft output-buffer limit with no traffic, the
//! query-buffer limit and INFO's debug section.

mod common;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;

/// A field of the CLIENT LIST line of the client named `name`; `None` when that
/// client is not listed.
fn field_of(admin: &mut RawConn, name: &str, field: &str) -> Option<String> {
    let list = admin.cmd(&["CLIENT", "LIST"]);
    let line = list
        .lines()
        .find(|l| l.contains(&format!(" name={name} ")))?
        .to_string();
    let v = line
        .split(' ')
        .find_map(|x| x.strip_prefix(&format!("{field}=")))
        .unwrap_or_else(|| panic!("no {field} in {line}"));
    Some(v.to_string())
}

fn num(admin: &mut RawConn, name: &str, field: &str) -> usize {
    field_of(admin, name, field).unwrap().parse().unwrap()
}

fn info(admin: &mut RawConn, section: &str, field: &str) -> String {
    let text = admin.cmd(&["INFO", section]);
    text.split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
}

/// A named client that sends the start of a command whose argument of `size`
/// bytes never completes, so its query buffer holds the argument.
fn partial_big_arg(s: &TestServer, name: &str, size: usize) -> TcpStream {
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    let setname = format!(
        "*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n${}\r\n{name}\r\n",
        name.len()
    );
    c.write_all(setname.as_bytes()).unwrap();
    let mut ok = [0u8; 5];
    c.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    let mut cmd = format!("*2\r\n${size}\r\n").into_bytes();
    cmd.extend(std::iter::repeat_n(b'v', size));
    // A peer closed by eviction may refuse the tail: that is the point.
    let _ = c.write_all(&cmd);
    c
}

/// Whether the server closed `c` (EOF or reset on read).
fn closed_by_server(c: &mut TcpStream) -> bool {
    c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 64];
    !matches!(c.read(&mut buf), Ok(n) if n > 0)
}

#[test]
fn a_client_over_maxmemory_clients_is_evicted_and_counted() {
    let s = TestServer::start();
    let mut admin = s.raw(2);
    admin.check(&[
        (&["CLIENT", "NO-EVICT", "on"], "+OK\r\n"),
        (&["CONFIG", "SET", "maxmemory-clients", "200000"], "+OK\r\n"),
    ]);
    let mut small = partial_big_arg(&s, "small", 40_000);
    wait_until(|| num(&mut admin, "small", "qbuf") == 40_000);
    let mut big = partial_big_arg(&s, "big", 300_000);
    assert!(closed_by_server(&mut big));
    assert_eq!(field_of(&mut admin, "big", "tot-mem"), None);
    assert_eq!(info(&mut admin, "stats", "evicted_clients"), "1");
    // The smaller client stays, and its command completes.
    assert_eq!(num(&mut admin, "small", "qbuf"), 40_000);
    small.write_all(b"\r\n$1\r\nx\r\n").unwrap();
    let mut reply = [0u8; 4];
    small.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"-ERR");
    assert_eq!(admin.cmd(&["CONFIG", "RESETSTAT"]), "+OK\r\n");
    assert_eq!(info(&mut admin, "stats", "evicted_clients"), "0");
}

#[test]
fn the_biggest_clients_go_first_and_no_evict_clients_stay() {
    let s = TestServer::start();
    let mut admin = s.raw(2);
    admin.check(&[(&["CLIENT", "NO-EVICT", "on"], "+OK\r\n")]);
    let mut k = s.raw(2);
    k.check(&[
        (&["CLIENT", "SETNAME", "k"], "+OK\r\n"),
        (&["CLIENT", "NO-EVICT", "on"], "+OK\r\n"),
    ]);
    let _a = partial_big_arg(&s, "a", 100_000);
    let _b = partial_big_arg(&s, "b", 100_000);
    let mut c = partial_big_arg(&s, "c", 400_000);
    let _big = partial_big_arg(&s, "big", 600_000);
    wait_until(|| {
        [
            ("a", 100_000),
            ("b", 100_000),
            ("c", 400_000),
            ("big", 600_000),
        ]
        .iter()
        .all(|(n, size)| field_of(&mut admin, n, "qbuf").is_some_and(|q| q == size.to_string()))
    });
    // Equal commands cost equal memory.
    assert_eq!(
        num(&mut admin, "a", "tot-mem"),
        num(&mut admin, "b", "tot-mem")
    );
    let total: usize = admin
        .cmd(&["CLIENT", "LIST"])
        .lines()
        .filter_map(|l| l.split(' ').find_map(|x| x.strip_prefix("tot-mem=")))
        .map(|v| v.parse::<usize>().unwrap())
        .sum();
    // Room for all but 300 KB: the biggest client alone goes.
    let limit = (total - 300_000).to_string();
    admin.check(&[(&["CONFIG", "SET", "maxmemory-clients", &limit], "+OK\r\n")]);
    assert_eq!(field_of(&mut admin, "big", "qbuf"), None);
    assert_eq!(num(&mut admin, "c", "qbuf"), 400_000);
    assert_eq!(num(&mut admin, "a", "qbuf"), 100_000);
    assert_eq!(info(&mut admin, "stats", "evicted_clients"), "1");
    // At the floor every evictable client goes; CLIENT NO-EVICT ones stay.
    admin.check(&[(&["CONFIG", "SET", "maxmemory-clients", "1"], "+OK\r\n")]);
    assert!(closed_by_server(&mut c));
    assert_eq!(field_of(&mut admin, "a", "qbuf"), None);
    assert_eq!(k.cmd(&["PING"]), "+PONG\r\n");
    assert_eq!(info(&mut admin, "stats", "evicted_clients"), "4");
}

#[test]
fn client_list_shows_argv_multi_and_reply_buffer_fields() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let line = c.cmd(&["CLIENT", "INFO"]);
    // "client" + "info": the running command's arguments.
    assert!(
        line.contains(" argv-mem=10 multi-mem=0 rbs=16384 "),
        "{line}"
    );
    assert!(line.contains(" obl=0 oll=0 omem=0 "), "{line}");
    c.check(&[
        (&["MULTI"], "+OK\r\n"),
        (&["SET", "key", "value"], "+QUEUED\r\n"),
    ]);
    let mut admin = s.raw(2);
    let list = admin.cmd(&["CLIENT", "LIST"]);
    // 3 + 3 + 5 bytes of arguments and a pointer each.
    assert!(list.contains(" multi=1 watch=0 "), "{list}");
    assert!(list.contains(" argv-mem=0 multi-mem=35 "), "{list}");
    c.check(&[(&["EXEC"], "*1\r\n+OK\r\n")]);
}

#[test]
fn the_reply_buffer_shrinks_when_idle_and_grows_when_full() {
    let s = TestServer::start_with(&["--hz", "100"]);
    let mut admin = s.raw(2);
    admin.check(&[
        (&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "100"], "+OK\r\n"),
        (
            &["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "soon"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["DEBUG", "REPLYBUFFER", "SIZE", "1"],
            "-ERR unknown subcommand or wrong number of arguments for 'REPLYBUFFER'. Try DEBUG HELP.\r\n",
        ),
        (&["SET", "big", &"x".repeat(32768)], "+OK\r\n"),
    ]);
    let mut tc = s.raw(2);
    tc.check(&[(&["CLIENT", "SETNAME", "tc"], "+OK\r\n")]);
    wait_until(|| num(&mut admin, "tc", "rbs") == 1024);
    admin.check(&[(
        &["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "never"],
        "+OK\r\n",
    )]);
    wait_until(|| {
        tc.cmd(&["GET", "big"]);
        num(&mut admin, "tc", "rbs") == 16384
    });
    // The tick that doubled the size may have come after the last GET, which only
    // filled the old 8 KB: one more fills the new size.
    tc.cmd(&["GET", "big"]);
    assert_eq!(num(&mut admin, "tc", "rbp"), 16384);
    // With resizing off the size stays put.
    admin.check(&[
        (&["DEBUG", "REPLYBUFFER", "RESIZING", "0"], "+OK\r\n"),
        (
            &["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "reset"],
            "+OK\r\n",
        ),
    ]);
    assert_eq!(num(&mut admin, "tc", "rbs"), 16384);
}

#[test]
fn the_soft_output_limit_closes_a_client_once_traffic_stops() {
    let s = TestServer::start_with(&["--hz", "100"]);
    let mut admin = s.raw(2);
    admin.check(&[(
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 0 100000 1",
        ],
        "+OK\r\n",
    )]);
    let mut sub = s.raw(2);
    sub.check(&[(&["CLIENT", "SETNAME", "sub"], "+OK\r\n")]);
    sub.send(&["SUBSCRIBE", "ch"]);
    wait_until(|| num(&mut admin, "sub", "sub") == 1);
    let payload = "x".repeat(1000);
    // The subscriber reads nothing: publish until its output is well past the soft
    // limit (`omem` counts whole 16 KB blocks as Redis does, and the kernel may still
    // take a few KB of them).
    while field_of(&mut admin, "sub", "omem")
        .is_some_and(|v| v.parse::<usize>().unwrap() <= 150_000)
    {
        admin.cmd(&["PUBLISH", "ch", &payload]);
    }
    // No more traffic: the cron closes it once the limit has held long enough.
    wait_until(|| field_of(&mut admin, "sub", "omem").is_none());
    assert_eq!(
        info(
            &mut admin,
            "stats",
            "client_output_buffer_limit_disconnections"
        ),
        "1"
    );
}

#[test]
fn a_big_argument_at_the_query_limit_is_read_whole_before_the_close() {
    let s = TestServer::start();
    let mut admin = s.raw(2);
    admin.check(&[(
        &["CONFIG", "SET", "client-query-buffer-limit", "1048576"],
        "+OK\r\n",
    )]);
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    let mut cmd = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$1048576\r\n".to_vec();
    cmd.extend(std::iter::repeat_n(b'a', 1_048_576));
    cmd.extend_from_slice(b"\r\n");
    c.write_all(&cmd).unwrap();
    // Everything was read, so the close is an orderly end of stream.
    let mut buf = [0u8; 16];
    c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    assert_eq!(c.read(&mut buf).unwrap(), 0);
    assert_eq!(
        info(
            &mut admin,
            "stats",
            "client_query_buffer_limit_disconnections"
        ),
        "1"
    );
}

#[test]
fn info_debug_is_shown_only_when_asked_for() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    assert!(!c.cmd(&["INFO"]).contains("eventloop_duration_cron_sum"));
    assert!(!c
        .cmd(&["INFO", "all"])
        .contains("eventloop_duration_cron_sum"));
    let text = c.cmd(&["INFO", "debug"]);
    assert!(
        text.contains("# Debug\r\neventloop_duration_aof_sum:"),
        "{text}"
    );
    for f in [
        "eventloop_duration_cron_sum:",
        "eventloop_duration_max:",
        "eventloop_cmd_per_cycle_max:",
        "allocator_allocated_lua:",
        "allocator_frag_bytes_lua:",
    ] {
        assert!(text.contains(f), "{f} in {text}");
    }
}

/// The output-buffer limit counts the reply list only, as Redis's: a reply that fits
/// the 16 KB reply buffer passes even a 10-byte limit; a bigger one closes the client
/// without an answer.
#[test]
fn output_limit_ignores_replies_that_fit_the_reply_buffer() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.check(&[
        (
            &[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "normal 10 0 0",
            ],
            "+OK\r\n",
        ),
        (&["SET", "big", &"a".repeat(100_000)], "+OK\r\n"),
    ]);
    let info = c.cmd(&["INFO", "stats"]);
    assert!(info.contains("client_output_buffer_limit_disconnections:0\r\n"));
    c.send(&["GET", "big"]);
    let mut rest = Vec::new();
    let _ = std::io::Read::read_to_end(&mut c.reader, &mut rest);
    assert!(rest.is_empty(), "{} bytes answered", rest.len());
    let mut admin = s.raw(2);
    assert_eq!(
        info_stats_field(&mut admin, "client_output_buffer_limit_disconnections"),
        "1"
    );
}

fn info_stats_field(c: &mut RawConn, field: &str) -> String {
    info(c, "stats", field)
}
