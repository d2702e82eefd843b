//! Extreme count, size, index and offset arguments for every command that takes one:
//! each must answer (a reply or an error, as Redis) or, for a reply that would pass the
//! client's output-buffer limit, close that client. Never a panic, never a hang, and
//! the server keeps serving everyone else.

mod common;

use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const NUMBERS: &[&str] = &[
    "9223372036854775807",
    "-9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "4611686018427387904",
    "-4611686018427387903",
    "4294967296",
    "-4294967296",
    "2147483648",
    "-2147483649",
    "18446744073709551615",
    "-1",
    "0",
];

/// Command templates; `{n}` is replaced by each number in turn.
const TEMPLATES: &[&str] = &[
    "SRANDMEMBER s {n}",
    "HRANDFIELD h {n}",
    "HRANDFIELD h {n} WITHVALUES",
    "ZRANDMEMBER z {n}",
    "ZRANDMEMBER z {n} WITHSCORES",
    "SPOP scopy {n}",
    "LPOP lcopy {n}",
    "RPOP lcopy {n}",
    "LMPOP 1 lcopy LEFT COUNT {n}",
    "LMPOP {n} lcopy LEFT",
    "ZMPOP 1 zcopy MIN COUNT {n}",
    "ZMPOP {n} zcopy MIN",
    "ZPOPMIN zcopy {n}",
    "ZPOPMAX zcopy {n}",
    "SINTERCARD {n} s",
    "SINTERCARD 1 s LIMIT {n}",
    "ZINTERCARD {n} z",
    "ZUNIONSTORE dst {n} z",
    "ZINTER {n} z",
    "ZDIFF {n} z",
    "XRANGE x - + COUNT {n}",
    "XREVRANGE x + - COUNT {n}",
    "XREAD COUNT {n} STREAMS x 0",
    "XREADGROUP GROUP g c COUNT {n} STREAMS x >",
    "XPENDING x g - + {n}",
    "XAUTOCLAIM x g c 0 0 COUNT {n}",
    "XINFO STREAM x FULL COUNT {n}",
    "XTRIM xcopy MAXLEN {n}",
    "XADD xcopy MAXLEN {n} * f v",
    "XADD xcopy MINID {n} * f v",
    "SCAN 0 COUNT {n}",
    "SSCAN s 0 COUNT {n}",
    "HSCAN h 0 COUNT {n}",
    "ZSCAN z 0 COUNT {n}",
    "LRANGE l {n} {n}",
    "LRANGE l 0 {n}",
    "LRANGE l {n} -1",
    "LINDEX l {n}",
    "LSET lcopy {n} v",
    "LTRIM lcopy {n} {n}",
    "LPOS l a RANK {n}",
    "LPOS l a COUNT {n}",
    "LPOS l a MAXLEN {n}",
    "LINSERT lcopy BEFORE a {n}",
    "ZRANGE z {n} {n}",
    "ZRANGE z 0 {n}",
    "ZRANGE z -inf +inf BYSCORE LIMIT {n} {n}",
    "ZRANGEBYSCORE z -inf +inf LIMIT 0 {n}",
    "ZRANGEBYLEX z - + LIMIT {n} 1",
    "ZREVRANGE z {n} 0",
    "ZREMRANGEBYRANK zcopy {n} {n}",
    "SORT l LIMIT {n} {n}",
    "SORT l LIMIT 0 {n}",
    "GETRANGE str {n} {n}",
    "GETRANGE str 0 {n}",
    "SUBSTR str {n} {n}",
    "SETRANGE strcopy {n} x",
    "GETBIT str {n}",
    "SETBIT strcopy {n} 1",
    "BITCOUNT str {n} {n}",
    "BITCOUNT str 0 {n} BIT",
    "BITPOS str 1 {n} {n}",
    "BITPOS str 0 0 {n} BIT",
    "BITFIELD strcopy GET u8 {n}",
    "BITFIELD strcopy SET i64 {n} 1",
    "BITFIELD strcopy INCRBY u8 #{n} 1",
    "BITFIELD_RO str GET u8 {n}",
    "INCRBY counter {n}",
    "DECRBY counter {n}",
    "HINCRBY h f0 {n}",
    "ZINCRBY zcopy {n} m",
    "EXPIRE tmp {n}",
    "PEXPIRE tmp {n}",
    "EXPIREAT tmp {n}",
    "SET tmp v EX {n}",
    "SET tmp v PX {n}",
    "GETEX str PX {n}",
    "HEXPIRE h {n} FIELDS 1 f0",
    "HEXPIRE h 10 FIELDS {n} f0",
    "OBJECT FREQ str",
    "MEMORY USAGE h SAMPLES {n}",
    "SLOWLOG GET {n}",
    "ACL LOG {n}",
    "LATENCY HISTORY command",
    "COMMAND GETKEYS EVAL x {n}",
    "EVAL x {n}",
    "FCALL f {n}",
    "CLIENT NO-EVICT on",
    "RESTORE rcopy {n} junk",
    "SRANDMEMBER nosuchkey {n}",
    "HRANDFIELD nosuchkey {n} WITHVALUES",
    "ZRANDMEMBER nosuchkey {n} WITHSCORES",
    "GEOSEARCH geo FROMLONLAT 0 0 BYRADIUS 1000 km COUNT {n}",
    "GEORADIUS geo 0 0 1000 km COUNT {n}",
    "LCS str str MINMATCHLEN {n}",
    "SELECT {n}",
    "SWAPDB 0 {n}",
    "MOVE tmp {n}",
    "COPY str strcopy2 DB {n}",
    "CLIENT KILL ID {n}",
    "CLIENT TRACKING on REDIRECT {n}",
    "PFCOUNT str",
];

/// One reply frame, or None when the server closed the connection or sent nothing
/// within the read timeout.
fn read_frame(r: &mut BufReader<TcpStream>, out: &mut Vec<u8>) -> Option<()> {
    let mut line = Vec::new();
    if r.read_until(b'\n', &mut line).ok()? == 0 {
        return None;
    }
    out.extend_from_slice(&line);
    let body = std::str::from_utf8(&line[1..line.len().saturating_sub(2)]).unwrap_or("0");
    let n: i64 = body.parse().unwrap_or(0);
    match line[0] {
        b'$' | b'=' | b'!' if n >= 0 => {
            let mut buf = vec![0; n as usize + 2];
            r.read_exact(&mut buf).ok()?;
            out.extend_from_slice(&buf);
        }
        b'*' | b'~' | b'>' => {
            for _ in 0..n.max(0) {
                read_frame(r, out)?;
            }
        }
        b'%' => {
            for _ in 0..n * 2 {
                read_frame(r, out)?;
            }
        }
        _ => {}
    }
    Some(())
}

fn connect(port: u16) -> (TcpStream, BufReader<TcpStream>) {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let r = BufReader::new(s.try_clone().unwrap());
    (s, r)
}

fn send(s: &mut TcpStream, args: &[&str]) {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let _ = s.write_all(&out);
}

fn setup(c: &mut RawConn) {
    c.cmd(&["FLUSHALL"]);
    for (k, v) in [("s", "set"), ("scopy", "set")] {
        let _ = v;
        c.cmd(&["SADD", k, "a", "b", "c", "1", "2"]);
    }
    c.cmd(&["HSET", "h", "f0", "1", "f1", "2", "f2", "3"]);
    c.cmd(&["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    c.cmd(&["ZADD", "zcopy", "1", "a", "2", "b", "3", "c"]);
    c.cmd(&["RPUSH", "l", "a", "b", "c", "a"]);
    c.cmd(&["RPUSH", "lcopy", "a", "b", "c", "a"]);
    c.cmd(&["SET", "str", "hello world"]);
    c.cmd(&["SET", "strcopy", "hello"]);
    c.cmd(&["SET", "counter", "0"]);
    c.cmd(&["XADD", "x", "1-1", "f", "v"]);
    c.cmd(&["XADD", "x", "2-1", "f", "v"]);
    c.cmd(&["XADD", "xcopy", "1-1", "f", "v"]);
    c.cmd(&["XGROUP", "CREATE", "x", "g", "0"]);
    c.cmd(&["GEOADD", "geo", "0", "0", "origin", "1", "1", "near"]);
}

#[test]
fn extreme_numeric_arguments_never_crash_or_hang() {
    let s = TestServer::start_with(&["--appendonly", "no", "--save", ""]);
    let mut admin = s.raw(2);
    // A reply bigger than 8 MB closes its client, as Redis's output-buffer limit does.
    admin.cmd(&[
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "normal 8mb 8mb 0",
    ]);
    let mut failures = Vec::new();
    for template in TEMPLATES {
        for n in NUMBERS {
            for proto in [2u8, 3] {
                setup(&mut admin);
                let line = template.replace("{n}", n);
                let args: Vec<&str> = line.split(' ').collect();
                let (mut w, mut r) = connect(s.port);
                if proto == 3 {
                    send(&mut w, &["HELLO", "3"]);
                    read_frame(&mut r, &mut Vec::new()).expect("HELLO");
                }
                eprintln!("RESP{proto} {line}");
                send(&mut w, &args);
                let mut reply = Vec::new();
                let answered = read_frame(&mut r, &mut reply).is_some();
                let text = String::from_utf8_lossy(&reply[..reply.len().min(200)]).into_owned();
                if text.contains("Internal error") {
                    failures.push(format!("RESP{proto} {line}: {text}"));
                }
                drop((w, r));
                // Whatever happened to that client, everyone else is served.
                assert_eq!(
                    admin.cmd(&["PING"]),
                    "+PONG\r\n",
                    "after {line} (answered: {answered})"
                );
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn huge_random_counts_answer_as_redis() {
    let s = TestServer::start_with(&["--appendonly", "no", "--save", ""]);
    let mut c = s.raw(2);
    c.cmd(&["SADD", "s", "a"]);
    c.cmd(&["HSET", "h", "a", "1"]);
    c.cmd(&["ZADD", "z", "1", "a"]);
    let out_of_range = "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n";
    c.check(&[
        (&["SRANDMEMBER", "s", "-9223372036854775808"], out_of_range),
        (&["HRANDFIELD", "h", "-9223372036854775808"], out_of_range),
        (
            &["HRANDFIELD", "h", "-9223372036854775807", "WITHVALUES"],
            "-ERR value is out of range\r\n",
        ),
        (
            &["HRANDFIELD", "h", "-4611686018427387904", "WITHVALUES"],
            "-ERR value is out of range\r\n",
        ),
        (
            &["ZRANDMEMBER", "z", "-9223372036854775807", "WITHSCORES"],
            "-ERR value is out of range\r\n",
        ),
        (
            &["SRANDMEMBER", "s", "9223372036854775807"],
            "*1\r\n$1\r\na\r\n",
        ),
        (
            &["HRANDFIELD", "h", "9223372036854775807", "WITHVALUES"],
            "*2\r\n$1\r\na\r\n$1\r\n1\r\n",
        ),
        (
            &["ZRANDMEMBER", "z", "9223372036854775807"],
            "*1\r\n$1\r\na\r\n",
        ),
    ]);
    // A count Redis accepts but whose reply cannot fit the output-buffer limit: the
    // client is closed (Redis's CLIENT_CLOSE_ASAP), the server lives.
    c.cmd(&[
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "normal 4mb 4mb 0",
    ]);
    for cmd in [
        &["SRANDMEMBER", "s", "-9223372036854775807"][..],
        &["HRANDFIELD", "h", "-9223372036854775807"],
        &["HRANDFIELD", "h", "-4611686018427387903", "WITHVALUES"],
        &["ZRANDMEMBER", "z", "-9223372036854775807"],
        &["SRANDMEMBER", "s", "-4294967296"],
    ] {
        let (mut w, mut r) = connect(s.port);
        send(&mut w, cmd);
        let mut reply = Vec::new();
        assert!(
            read_frame(&mut r, &mut reply).is_none(),
            "{cmd:?} should close the client"
        );
        assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    }
    let clients = c.cmd(&["INFO", "stats"]);
    assert!(
        clients.contains("client_output_buffer_limit_disconnections:5\r\n"),
        "{clients}"
    );
}

#[test]
fn a_panicking_command_costs_only_that_command() {
    let s = TestServer::start_with(&["--appendonly", "no", "--save", ""]);
    let mut c = s.raw(2);
    c.cmd(&["SET", "k", "v"]);
    let reply = c.cmd(&["DEBUG", "COMMAND-PANIC"]);
    assert_eq!(
        reply,
        "-ERR Internal error running command 'debug', the command was aborted (see the server log)\r\n"
    );
    assert_eq!(c.cmd(&["GET", "k"]), "$1\r\nv\r\n");
    let mut other = s.raw(3);
    assert_eq!(other.cmd(&["PING"]), "+PONG\r\n");
    let stats = c.cmd(&["INFO", "errorstats"]);
    assert!(stats.contains("errorstat_ERR:count=1"), "{stats}");
}
