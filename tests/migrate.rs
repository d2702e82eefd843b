//! MIGRATE between real servers on loopback: options, Redis's error texts, NOKEY,
//! COPY/REPLACE, AUTH/AUTH2, KEYS, SELECT of the target database, the cached
//! connection (one per target, reused, replaced when the target closed it), the
//! `del` notification, and — with a scripted fake target — that the server keeps
//! serving while a transfer is in flight, that writes to the keys being moved wait
//! for the outcome, and the read timeout. Interop with redis-server 7.0 both ways
//! when it is installed.

mod common;
use common::{redis_server_available, RawConn, RedisServer, TestServer};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

fn port_s(p: u16) -> String {
    p.to_string()
}

fn field(info: &str, name: &str) -> String {
    info.split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_string))
        .unwrap_or_else(|| panic!("no {name}"))
}

#[test]
fn errors_nokey_and_options() {
    let src = TestServer::start();
    let dst = TestServer::start();
    let dp = port_s(dst.port);
    let mut c = src.raw(2);
    let mut d = dst.raw(2);
    let syntax = "-ERR syntax error\r\n";
    c.check(&[
        (&["MIGRATE", "127.0.0.1", &dp, "k", "0", "1000", "FOO"], syntax),
        (&["MIGRATE", "127.0.0.1", &dp, "k", "0", "1000", "AUTH"], syntax),
        (&["MIGRATE", "127.0.0.1", &dp, "k", "0", "1000", "AUTH2", "u"], syntax),
        (
            &["MIGRATE", "127.0.0.1", &dp, "k", "0", "1000", "KEYS", "a"],
            "-ERR When using MIGRATE KEYS option, the key argument must be set to the empty string\r\n",
        ),
        (
            &["MIGRATE", "127.0.0.1", &dp, "k", "0", "x"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["MIGRATE", "127.0.0.1", &dp, "k", "x", "1000"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["MIGRATE", "127.0.0.1", &dp, "k", "0"],
            "-ERR wrong number of arguments for 'migrate' command\r\n",
        ),
        (&["MIGRATE", "127.0.0.1", &dp, "k", "0", "1000"], "+NOKEY\r\n"),
        (
            &["MIGRATE", "127.0.0.1", &dp, "", "0", "1000", "KEYS", "x", "y"],
            "+NOKEY\r\n",
        ),
    ]);
    // Nothing listens on a port just freed.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    c.cmd(&["SET", "k", "v"]);
    assert_eq!(
        c.cmd(&["MIGRATE", "127.0.0.1", &port_s(closed), "k", "0", "500"]),
        "-IOERR error or timeout connecting to the client\r\n"
    );
    assert_eq!(c.cmd(&["GET", "k"]), "$1\r\nv\r\n");

    // A move: the value and its TTL arrive, the key leaves.
    c.cmd(&["PEXPIRE", "k", "100000"]);
    assert_eq!(
        c.cmd(&["MIGRATE", "127.0.0.1", &dp, "k", "0", "1000"]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd(&["EXISTS", "k"]), ":0\r\n");
    assert_eq!(d.cmd(&["GET", "k"]), "$1\r\nv\r\n");
    let pttl: i64 = d.cmd(&["PTTL", "k"])[1..].trim().parse().unwrap();
    assert!(pttl > 90_000 && pttl <= 100_000, "{pttl}");

    // The target refuses an existing key unless REPLACE; the key stays here.
    c.cmd(&["SET", "k", "v2"]);
    assert_eq!(
        c.cmd(&["MIGRATE", "127.0.0.1", &dp, "k", "0", "1000"]),
        "-ERR Target instance replied with error: BUSYKEY Target key name already exists.\r\n"
    );
    assert_eq!(c.cmd(&["GET", "k"]), "$2\r\nv2\r\n");
    // COPY leaves the source key; REPLACE overwrites the target's.
    assert_eq!(
        c.cmd(&[
            "MIGRATE",
            "127.0.0.1",
            &dp,
            "k",
            "0",
            "1000",
            "COPY",
            "REPLACE"
        ]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd(&["GET", "k"]), "$2\r\nv2\r\n");
    assert_eq!(d.cmd(&["GET", "k"]), "$2\r\nv2\r\n");
    assert_eq!(d.cmd(&["TTL", "k"]), ":-1\r\n");

    // KEYS: several types at once, missing keys skipped, into another database.
    c.cmd(&["HSET", "h", "f", "1", "g", "2"]);
    c.cmd(&["ZADD", "z", "1", "a", "2", "b"]);
    c.cmd(&["RPUSH", "l", "x", "y"]);
    assert_eq!(
        c.cmd(&[
            "MIGRATE",
            "127.0.0.1",
            &dp,
            "",
            "5",
            "1000",
            "KEYS",
            "h",
            "nope",
            "z",
            "l"
        ]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd(&["EXISTS", "h", "z", "l"]), ":0\r\n");
    d.cmd(&["SELECT", "5"]);
    assert_eq!(d.cmd(&["HGET", "h", "g"]), "$1\r\n2\r\n");
    assert_eq!(d.cmd(&["ZSCORE", "z", "b"]), "$1\r\n2\r\n");
    assert_eq!(
        d.cmd(&["LRANGE", "l", "0", "-1"]),
        "*2\r\n$1\r\nx\r\n$1\r\ny\r\n"
    );
    assert_eq!(d.cmd(&["DBSIZE"]), ":3\r\n");

    // One connection, cached and reused: after the first transfer no other connection
    // reaches the target, whatever the database.
    let before = field(&d.cmd(&["INFO", "stats"]), "total_connections_received");
    for (i, db) in ["0", "5", "5", "0"].iter().enumerate() {
        let key = format!("r{i}");
        c.cmd(&["SET", &key, "1"]);
        assert_eq!(
            c.cmd(&["MIGRATE", "127.0.0.1", &dp, &key, db, "1000"]),
            "+OK\r\n"
        );
    }
    let after = field(&d.cmd(&["INFO", "stats"]), "total_connections_received");
    assert_eq!(before, after);
    assert_eq!(
        field(&c.cmd(&["INFO", "stats"]), "migrate_cached_sockets"),
        "1"
    );
    let list = d.cmd(&["CLIENT", "LIST"]);
    assert_eq!(list.matches("cmd=restore").count(), 1, "{list}");

    // A cached connection the target closed is replaced without an error.
    d.cmd(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
    c.cmd(&["SET", "after-kill", "1"]);
    assert_eq!(
        c.cmd(&["MIGRATE", "127.0.0.1", &dp, "after-kill", "0", "1000"]),
        "+OK\r\n"
    );
    d.cmd(&["SELECT", "0"]);
    assert_eq!(d.cmd(&["GET", "after-kill"]), "$1\r\n1\r\n");

    // COMMAND GETKEYS follows migrateGetKeys.
    assert_eq!(
        c.cmd(&[
            "COMMAND", "GETKEYS", "MIGRATE", "h", "1", "", "0", "1", "AUTH", "keys", "KEYS", "a",
            "b"
        ]),
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
}

#[test]
fn auth_auth2_and_notifications() {
    let src = TestServer::start_with(&["--notify-keyspace-events", "Eg"]);
    let dst = TestServer::start_with(&["--requirepass", "secret"]);
    let dp = port_s(dst.port);
    let mut c = src.raw(2);
    c.cmd(&["SET", "k", "v"]);
    assert_eq!(
        c.cmd(&["MIGRATE", "127.0.0.1", &dp, "k", "0", "1000"]),
        "-ERR Target instance replied with error: NOAUTH Authentication required.\r\n"
    );
    assert_eq!(
        c.cmd(&["MIGRATE", "127.0.0.1", &dp, "k", "0", "1000", "AUTH", "wrong"]),
        "-ERR Target instance replied with error: WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    let mut sub = src.raw(2);
    sub.cmd(&["SUBSCRIBE", "__keyevent@0__:del"]);
    assert_eq!(
        c.cmd(&[
            "MIGRATE",
            "127.0.0.1",
            &dp,
            "k",
            "0",
            "1000",
            "AUTH",
            "secret"
        ]),
        "+OK\r\n"
    );
    assert_eq!(
        sub.read_reply(),
        "*3\r\n$7\r\nmessage\r\n$18\r\n__keyevent@0__:del\r\n$1\r\nk\r\n"
    );
    let mut d = dst.raw(2);
    d.cmd(&["AUTH", "secret"]);
    d.cmd(&["ACL", "SETUSER", "mover", "on", ">pw", "+@all", "~*"]);
    assert_eq!(d.cmd(&["GET", "k"]), "$1\r\nv\r\n");
    c.cmd(&["SET", "k2", "v"]);
    assert_eq!(
        c.cmd(&[
            "MIGRATE",
            "127.0.0.1",
            &dp,
            "k2",
            "0",
            "1000",
            "AUTH2",
            "mover",
            "pw"
        ]),
        "+OK\r\n"
    );
    assert_eq!(d.cmd(&["GET", "k2"]), "$1\r\nv\r\n");
    // The credentials never reach the slow log.
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    c.cmd(&["SLOWLOG", "RESET"]);
    c.cmd(&[
        "MIGRATE",
        "127.0.0.1",
        &dp,
        "nokey",
        "0",
        "1000",
        "AUTH2",
        "mover",
        "pw",
    ]);
    let log = c.cmd(&["SLOWLOG", "GET", "1"]);
    assert!(
        log.contains("(redacted)") && !log.contains("mover"),
        "{log}"
    );
    // A transfer is logged once it is over, with its whole duration.
    c.cmd(&["SET", "k3", "v"]);
    c.cmd(&["SLOWLOG", "RESET"]);
    assert_eq!(
        c.cmd(&[
            "MIGRATE",
            "127.0.0.1",
            &dp,
            "k3",
            "0",
            "1000",
            "AUTH2",
            "mover",
            "pw"
        ]),
        "+OK\r\n"
    );
    let log = c.cmd(&["SLOWLOG", "GET"]);
    assert!(
        log.contains("$2\r\nk3\r\n") && log.contains("(redacted)") && !log.contains("mover"),
        "{log}"
    );
}

/// A fake target: accepts one connection, reads what arrives into a shared buffer,
/// and answers the lines the test hands it.
struct FakeTarget {
    port: u16,
    replies: std::sync::mpsc::Sender<Vec<u8>>,
    received: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

impl FakeTarget {
    fn start() -> FakeTarget {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let rec = received.clone();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut r = s.try_clone().unwrap();
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while let Ok(n) = r.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    rec.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            });
            for reply in rx {
                if s.write_all(&reply).is_err() {
                    break;
                }
            }
        });
        FakeTarget {
            port,
            replies: tx,
            received,
        }
    }

    fn received_contains(&self, what: &str) -> bool {
        let r = self.received.lock().unwrap();
        String::from_utf8_lossy(&r).contains(what)
    }
}

#[test]
fn transfer_in_flight_serves_others_and_holds_writes() {
    let src = TestServer::start();
    let target = FakeTarget::start();
    let tp = port_s(target.port);
    let mut c = src.raw(2);
    c.cmd(&["SET", "moving", "old"]);
    c.cmd(&["SET", "other", "1"]);
    let mut mover = src.raw(2);
    mover.send(&["MIGRATE", "127.0.0.1", &tp, "moving", "0", "10000"]);
    common::wait_until(|| target.received_contains("RESTORE"));
    assert!(target.received_contains("SELECT"));
    // The server keeps serving: reads of the key being moved too.
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    assert_eq!(c.cmd(&["GET", "moving"]), "$3\r\nold\r\n");
    assert_eq!(c.cmd(&["INCR", "other"]), ":2\r\n");
    // A write to it waits for the outcome.
    let mut writer = src.raw(2);
    writer.send(&["SET", "moving", "new"]);
    writer
        .stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut probe = [0u8; 1];
    assert!(
        writer.stream.peek(&mut probe).is_err(),
        "the write ran early"
    );
    writer
        .stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // SELECT's reply, then RESTORE's.
    target.replies.send(b"+OK\r\n+OK\r\n".to_vec()).unwrap();
    assert_eq!(mover.read_reply(), "+OK\r\n");
    // The held write ran after the key left: it created a new key.
    assert_eq!(writer.read_reply(), "+OK\r\n");
    assert_eq!(c.cmd(&["GET", "moving"]), "$3\r\nnew\r\n");

    // A target that does not answer in time: the key stays, Redis's text.
    c.cmd(&["SET", "slow", "1"]);
    assert_eq!(
        c.cmd(&["MIGRATE", "127.0.0.1", &tp, "slow", "0", "200"]),
        "-IOERR error or timeout reading to target instance\r\n"
    );
    assert_eq!(c.cmd(&["GET", "slow"]), "$1\r\n1\r\n");
    assert_eq!(c.cmd(&["SET", "slow", "2"]), "+OK\r\n");
}

/// Fills `key` with `n` members of `kind`, a thousand per command.
fn fill_big(c: &mut RawConn, kind: &str, key: &str, n: usize) {
    for base in (0..n).step_by(1000) {
        let mut args: Vec<String> = match kind {
            "hash" => vec!["HSET".into(), key.into()],
            "zset" => vec!["ZADD".into(), key.into()],
            "set" => vec!["SADD".into(), key.into()],
            _ => vec!["RPUSH".into(), key.into()],
        };
        for i in base..(base + 1000).min(n) {
            match kind {
                "hash" => args.extend([format!("field:{i}"), format!("value:{i}")]),
                "zset" => args.extend([format!("{}", i as f64 * 1.5), format!("member:{i}")]),
                _ => args.push(format!("member:{i}")),
            }
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = c.cmd(&refs);
        assert!(r.starts_with(':'), "{r}");
    }
}

/// Big keys are serialized a slice per loop turn: other clients are served
/// meanwhile, writes to the keys wait until they have left, and each arrives whole.
#[test]
fn big_keys_move_in_slices_with_their_writes_held() {
    let src = TestServer::start();
    let dst = TestServer::start();
    let dp = port_s(dst.port);
    let mut c = src.raw(2);
    let kinds = [("hash", "h"), ("zset", "z"), ("set", "s"), ("list", "l")];
    let mut digests = Vec::new();
    for (kind, key) in kinds {
        fill_big(&mut c, kind, key, 200_000);
        digests.push(c.cmd(&["DEBUG", "DIGEST-VALUE", key]));
    }
    c.cmd(&["SET", "small", "v"]);
    let mut mover = src.raw(2);
    mover.send(&[
        "MIGRATE",
        "127.0.0.1",
        &dp,
        "",
        "0",
        "60000",
        "KEYS",
        "h",
        "z",
        "s",
        "l",
        "small",
    ]);
    // Once the MIGRATE runs (or has ended), writes to its keys come after it.
    common::wait_until(|| {
        let mut probe = [0u8; 1];
        mover.stream.set_nonblocking(true).unwrap();
        let answered = mover.stream.peek(&mut probe).is_ok();
        mover.stream.set_nonblocking(false).unwrap();
        answered || c.cmd(&["CLIENT", "LIST"]).contains("cmd=migrate")
    });
    let mut writer = src.raw(2);
    writer.send(&["HSET", "h", "after", "1"]);
    writer.send(&["RPUSH", "l", "after"]);
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    assert_eq!(mover.read_reply(), "+OK\r\n");
    assert_eq!(writer.read_reply(), ":1\r\n");
    assert_eq!(writer.read_reply(), ":1\r\n");
    let mut d = dst.raw(2);
    for ((_, key), digest) in kinds.iter().zip(&digests) {
        assert_eq!(&d.cmd(&["DEBUG", "DIGEST-VALUE", key]), digest, "{key}");
    }
    assert_eq!(d.cmd(&["GET", "small"]), "$1\r\nv\r\n");
    // Here only what the held writes created.
    assert_eq!(c.cmd(&["HGETALL", "h"]), "*2\r\n$5\r\nafter\r\n$1\r\n1\r\n");
    assert_eq!(c.cmd(&["LRANGE", "l", "0", "-1"]), "*1\r\n$5\r\nafter\r\n");
    assert_eq!(c.cmd(&["EXISTS", "z", "s", "small"]), ":0\r\n");

    // With COPY the key stays, and a write waits only while it is being encoded.
    fill_big(&mut c, "zset", "z", 100_000);
    let before = c.cmd(&["DEBUG", "DIGEST-VALUE", "z"]);
    assert_eq!(
        c.cmd(&[
            "MIGRATE",
            "127.0.0.1",
            &dp,
            "z",
            "0",
            "60000",
            "COPY",
            "REPLACE"
        ]),
        "+OK\r\n"
    );
    assert_eq!(d.cmd(&["DEBUG", "DIGEST-VALUE", "z"]), before);
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "z"]), before);
}

#[test]
fn migrate_inside_multi_waits_in_place() {
    let src = TestServer::start();
    let dst = TestServer::start();
    let dp = port_s(dst.port);
    let mut c = src.raw(2);
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["MIGRATE", "127.0.0.1", &dp, "k", "0", "1000"]);
    c.cmd(&["EXISTS", "k"]);
    assert_eq!(c.cmd(&["EXEC"]), "*2\r\n+OK\r\n:0\r\n");
    assert_eq!(dst.raw(2).cmd(&["GET", "k"]), "$1\r\nv\r\n");
}

/// Redis's MIGRATE and ours understand each other both ways.
#[test]
fn interop_with_redis_server() {
    if !redis_server_available() {
        return;
    }
    let ours = TestServer::start();
    let theirs = RedisServer::start();
    let fill = |c: &mut RawConn| {
        c.cmd(&["SET", "s", "string"]);
        c.cmd(&["PEXPIRE", "s", "500000"]);
        c.cmd(&["HSET", "h", "a", "1", "b", "2"]);
        c.cmd(&["ZADD", "z", "1.5", "m", "2", "n"]);
        c.cmd(&["SADD", "set", "x", "y", "z"]);
        c.cmd(&["RPUSH", "l", "1", "2", "3"]);
        c.cmd(&["XADD", "st", "1-1", "f", "v"]);
        // Big enough to be encoded in slices.
        fill_big(c, "hash", "bigh", 20_000);
    };
    let keys = ["s", "h", "z", "set", "l", "st", "bigh"];
    for (from, to) in [(ours.port, theirs.port), (theirs.port, ours.port)] {
        let mut a = RawConn::connect(from, 2);
        let mut b = RawConn::connect(to, 2);
        a.cmd(&["FLUSHALL"]);
        b.cmd(&["FLUSHALL"]);
        fill(&mut a);
        let mut args = vec!["MIGRATE", "127.0.0.1"];
        let tp = port_s(to);
        args.push(&tp);
        args.extend(["", "0", "5000", "REPLACE", "KEYS"]);
        args.extend(keys);
        assert_eq!(a.cmd(&args), "+OK\r\n", "{from} -> {to}");
        assert_eq!(a.cmd(&["DBSIZE"]), ":0\r\n");
        let pttl: i64 = b.cmd(&["PTTL", "s"])[1..].trim().parse().unwrap();
        assert!(pttl > 400_000, "{pttl}");
        assert_eq!(b.cmd(&["HGET", "h", "b"]), "$1\r\n2\r\n");
        assert_eq!(b.cmd(&["ZSCORE", "z", "m"]), "$3\r\n1.5\r\n");
        assert_eq!(b.cmd(&["SCARD", "set"]), ":3\r\n");
        assert_eq!(b.cmd(&["LINDEX", "l", "2"]), "$1\r\n3\r\n");
        assert_eq!(b.cmd(&["XLEN", "st"]), ":1\r\n");
        assert_eq!(b.cmd(&["HLEN", "bigh"]), ":20000\r\n");
        assert_eq!(
            b.cmd(&["HGET", "bigh", "field:19999"]),
            "$11\r\nvalue:19999\r\n"
        );
    }
}
