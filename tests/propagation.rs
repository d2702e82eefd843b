//! What commands send to replicas (and the AOF) when their verbatim replay would not be
//! Redis's stream: SPOP with a count, the MPOP family, GETDEL, approximate stream trims,
//! XREADGROUP (new entries, history re-reads, NOACK). A raw replica attaches with SYNC,
//! as Redis's test suite's attach_to_replication_stream does, and the commands it
//! receives are compared exactly, up to a sentinel write.

mod common;
use common::*;

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::time::Duration;

/// A replica's view of the write stream: SYNC, the image skipped, then commands.
struct ReplStream {
    r: BufReader<TcpStream>,
}

impl ReplStream {
    fn attach(s: &TestServer) -> ReplStream {
        use std::io::Write;
        // No PINGs in the stream while a test reads it.
        let mut c = s.raw(2);
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "repl-ping-replica-period", "3600"]),
            "+OK\r\n"
        );
        let mut sock = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        sock.write_all(b"SYNC\r\n").unwrap();
        let mut r = ReplStream {
            r: BufReader::new(sock),
        };
        let mut l = r.line();
        while l.is_empty() {
            l = r.line();
        }
        let len: usize = l.strip_prefix('$').expect("bulk image").parse().unwrap();
        let mut image = vec![0; len];
        r.r.read_exact(&mut image).unwrap();
        r
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.r.read_line(&mut l).unwrap();
        l.trim_end().to_string()
    }

    /// The next command, arguments joined by spaces (the name lowercased).
    fn next(&mut self) -> String {
        let mut l = self.line();
        while l.is_empty() {
            l = self.line();
        }
        let n: usize = l.strip_prefix('*').expect("multibulk").parse().unwrap();
        let mut args = Vec::with_capacity(n);
        for i in 0..n {
            let len: usize = self.line().strip_prefix('$').unwrap().parse().unwrap();
            let mut buf = vec![0; len + 2];
            self.r.read_exact(&mut buf).unwrap();
            let a = String::from_utf8_lossy(&buf[..len]).into_owned();
            args.push(if i == 0 { a.to_lowercase() } else { a });
        }
        args.join(" ")
    }

    /// Every command up to the sentinel write `SET propagation-sentinel <tag>`.
    fn until_sentinel(&mut self, c: &mut RawConn, tag: &str) -> Vec<String> {
        assert_eq!(c.cmd(&["SET", "propagation-sentinel", tag]), "+OK\r\n");
        let end = format!("set propagation-sentinel {tag}");
        let mut out = Vec::new();
        loop {
            let cmd = self.next();
            if cmd == end {
                return out;
            }
            out.push(cmd);
        }
    }
}

#[test]
fn spop_with_count_is_del_unlink_or_batched_srems() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let mut repl = ReplStream::attach(&s);
    c.cmd(&["SELECT", "0"]);
    c.cmd(&["SADD", "s1", "1", "2", "3"]);
    c.cmd(&["SADD", "s2", "a", "b"]);
    c.cmd(&["CONFIG", "SET", "lazyfree-lazy-server-del", "no"]);
    // The whole set: one DEL (UNLINK under lazyfree-lazy-server-del), not its members.
    c.cmd(&["SPOP", "s1", "3"]);
    c.cmd(&["CONFIG", "SET", "lazyfree-lazy-server-del", "yes"]);
    c.cmd(&["SPOP", "s2", "10"]);
    assert_eq!(
        repl.until_sentinel(&mut c, "1"),
        [
            "select 0",
            "sadd s1 1 2 3",
            "sadd s2 a b",
            "del s1",
            "unlink s2",
        ]
    );

    // Part of a set: SREMs of the members popped, 1024 per command, wrapped in
    // MULTI/EXEC when there are several.
    let members: Vec<String> = (0..2100).map(|i| format!("m{i}")).collect();
    let mut sadd = vec!["SADD", "big"];
    sadd.extend(members.iter().map(|m| m.as_str()));
    c.cmd(&sadd);
    assert_eq!(repl.next(), format!("sadd big {}", members.join(" ")));
    c.cmd(&["SPOP", "big", "2000"]);
    let mut popped = Vec::new();
    let cmds = repl.until_sentinel(&mut c, "2");
    assert_eq!(cmds.len(), 4, "{:?}", &cmds[..cmds.len().min(5)]);
    assert_eq!(cmds[0], "multi");
    assert_eq!(cmds[3], "exec");
    for (cmd, n) in cmds[1..3].iter().zip([1024, 976]) {
        let parts: Vec<&str> = cmd.split(' ').collect();
        assert_eq!(&parts[..2], ["srem", "big"]);
        assert_eq!(parts.len() - 2, n);
        popped.extend(parts[2..].iter().map(|m| m.to_string()));
    }
    assert_eq!(c.cmd(&["SCARD", "big"]), ":100\r\n");
    for m in &popped {
        assert_eq!(c.cmd(&["SISMEMBER", "big", m]), ":0\r\n");
    }

    // Without a count: one SREM.
    c.cmd(&["DEL", "one"]);
    c.cmd(&["SADD", "one", "x"]);
    assert_eq!(c.cmd(&["SPOP", "one"]), "$1\r\nx\r\n");
    assert_eq!(
        repl.until_sentinel(&mut c, "3"),
        ["sadd one x", "srem one x"]
    );
}

#[test]
fn mpop_family_and_getdel_propagate_as_redis() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let mut repl = ReplStream::attach(&s);
    c.cmd(&["SELECT", "0"]);
    c.cmd(&["ZADD", "z", "1", "one", "2", "two", "3", "three"]);
    c.cmd(&["ZMPOP", "2", "nokey", "z", "MIN"]);
    c.cmd(&["ZMPOP", "1", "z", "MAX", "COUNT", "10"]);
    c.cmd(&["RPUSH", "l", "a", "b", "c"]);
    c.cmd(&["LMPOP", "1", "l", "RIGHT", "COUNT", "2"]);
    c.cmd(&["BLMPOP", "0", "1", "l", "LEFT"]);
    c.cmd(&["ZADD", "z2", "1", "a", "2", "b"]);
    c.cmd(&["BZMPOP", "0", "1", "z2", "MAX", "COUNT", "5"]);
    c.cmd(&["SET", "foo", "bar"]);
    assert_eq!(c.cmd(&["GETDEL", "foo"]), "$3\r\nbar\r\n");
    // Nothing popped or deleted: nothing propagated.
    assert_eq!(c.cmd(&["GETDEL", "foo"]), "$-1\r\n");
    assert_eq!(c.cmd(&["ZMPOP", "1", "z", "MIN"]), "*-1\r\n");
    assert_eq!(
        repl.until_sentinel(&mut c, "1"),
        [
            "select 0",
            "zadd z 1 one 2 two 3 three",
            "zpopmin z 1",
            "zpopmax z 2",
            "rpush l a b c",
            "rpop l 2",
            "lpop l 1",
            "zadd z2 1 a 2 b",
            "zpopmax z2 2",
            "set foo bar",
            "del foo",
        ]
    );

    // A client blocked in BZMPOP is served later; the pop it ran is propagated.
    let mut blocked = s.raw(2);
    blocked.send(&["BZMPOP", "0", "2", "z3", "z4", "MIN", "COUNT", "3"]);
    wait_blocked(&s, 1);
    c.cmd(&["ZADD", "z4", "5", "e"]);
    assert_eq!(
        blocked.read_reply(),
        "*2\r\n$2\r\nz4\r\n*1\r\n*2\r\n$1\r\ne\r\n$1\r\n5\r\n"
    );
    assert_eq!(
        repl.until_sentinel(&mut c, "2"),
        ["zadd z4 5 e", "zpopmin z4 1"]
    );
}

#[test]
fn zpop_with_count_zero_still_checks_the_type() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.check(&[
        (&["SET", "foo", "bar"], "+OK\r\n"),
        (
            &["ZPOPMIN", "foo", "0"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
        (
            &["ZPOPMAX", "foo", "0"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
        (&["ZPOPMIN", "nokey", "0"], "*0\r\n"),
        (&["ZADD", "z", "1", "a"], ":1\r\n"),
        (&["ZPOPMAX", "z", "0"], "*0\r\n"),
        (&["ZCARD", "z"], ":1\r\n"),
    ]);
}

#[test]
fn approximate_stream_trims_propagate_exact() {
    let s = TestServer::start_with(&["--stream-node-max-entries", "10"]);
    let mut c = s.raw(2);
    let mut repl = ReplStream::attach(&s);
    c.cmd(&["SELECT", "0"]);
    for i in 1..=100 {
        c.cmd(&["XADD", "st", &format!("{i}-0"), "f", "v"]);
    }
    // Whole nodes of 10 go: 101 entries trimmed towards 55 with LIMIT 30 leave 71.
    assert_eq!(
        c.cmd(&["XADD", "st", "MAXLEN", "~", "55", "LIMIT", "30", "101-0", "f", "v"]),
        "$5\r\n101-0\r\n"
    );
    assert_eq!(c.cmd(&["XLEN", "st"]), ":71\r\n");
    assert_eq!(c.cmd(&["XTRIM", "st", "MINID", "~", "45-0"]), ":10\r\n");
    assert_eq!(c.cmd(&["XTRIM", "st", "MAXLEN", "~", "55"]), ":0\r\n");
    // `*` and `ms-*` IDs go out as the IDs assigned.
    let id = c.cmd(&["XADD", "st", "MAXLEN", "~", "1000", "*", "f", "v"]);
    let id = id.split("\r\n").nth(1).unwrap().to_string();
    assert_eq!(
        c.cmd(&[
            "XADD",
            "st",
            "MINID",
            "=",
            "0",
            "99999999999999-*",
            "f",
            "v"
        ]),
        "$16\r\n99999999999999-0\r\n"
    );
    let cmds = repl.until_sentinel(&mut c, "1");
    assert_eq!(cmds.len(), 105);
    assert_eq!(cmds[0], "select 0");
    assert_eq!(cmds[100], "xadd st 100-0 f v");
    assert_eq!(
        cmds[101..],
        [
            "xadd st MAXLEN = 71 LIMIT 30 101-0 f v".to_string(),
            "xtrim st MINID = 41-0".to_string(),
            format!("xadd st MAXLEN = 62 {id} f v"),
            "xadd st MINID = 0 99999999999999-0 f v".to_string(),
        ]
    );
}

#[test]
fn xreadgroup_history_reads_neither_dirty_nor_propagate() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let mut repl = ReplStream::attach(&s);
    c.cmd(&["SELECT", "0"]);
    c.cmd(&["XADD", "x", "1-0", "data", "a"]);
    c.cmd(&["XADD", "x", "2-0", "data", "b"]);
    c.cmd(&["XGROUP", "CREATE", "x", "g1", "0"]);
    assert_eq!(repl.until_sentinel(&mut c, "1").len(), 4);
    let dirty = |c: &mut RawConn| {
        let info = c.cmd(&["INFO", "persistence"]);
        info.split("\r\n")
            .find_map(|l| {
                l.strip_prefix("rdb_changes_since_last_save:")
                    .map(str::to_string)
            })
            .unwrap()
    };
    let entries = "*2\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$4\r\ndata\r\n$1\r\na\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$4\r\ndata\r\n$1\r\nb\r\n";
    // New entries: a consumer created on the way is not propagated (the XCLAIMs create
    // it); the deliveries and the group's position are, as one transaction.
    assert_eq!(
        c.cmd(&["XREADGROUP", "GROUP", "g1", "Alice", "STREAMS", "x", ">"]),
        format!("*1\r\n*2\r\n$1\r\nx\r\n{entries}")
    );
    let cmds = repl.until_sentinel(&mut c, "2");
    assert_eq!(cmds.len(), 5, "{cmds:?}");
    assert_eq!(cmds[0], "multi");
    assert!(
        cmds[1].starts_with("xclaim x g1 Alice 0 1-0 TIME "),
        "{}",
        cmds[1]
    );
    assert!(
        cmds[1].ends_with(" RETRYCOUNT 1 FORCE JUSTID LASTID 1-0"),
        "{}",
        cmds[1]
    );
    assert!(
        cmds[2].starts_with("xclaim x g1 Alice 0 2-0 TIME "),
        "{}",
        cmds[2]
    );
    assert_eq!(cmds[3], "xgroup SETID x g1 2-0 ENTRIESREAD 2");
    assert_eq!(cmds[4], "exec");

    // History: the same entries again, no change to dirty, nothing propagated.
    let before = dirty(&mut c);
    assert_eq!(
        c.cmd(&["XREADGROUP", "GROUP", "g1", "Alice", "STREAMS", "x", "0"]),
        format!("*1\r\n*2\r\n$1\r\nx\r\n{entries}")
    );
    assert_eq!(
        c.cmd(&["XREADGROUP", "GROUP", "g1", "Alice", "STREAMS", "x", "9000"]),
        "*1\r\n*2\r\n$1\r\nx\r\n*0\r\n"
    );
    assert_eq!(dirty(&mut c), before);
    assert_eq!(repl.until_sentinel(&mut c, "3"), Vec::<String>::new());

    // Under NOACK the consumer's creation is propagated: no XCLAIM will create it.
    c.cmd(&["XADD", "x", "3-0", "data", "c"]);
    c.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g1",
        "Bob",
        "NOACK",
        "STREAMS",
        "x",
        ">",
    ]);
    assert_eq!(
        repl.until_sentinel(&mut c, "4"),
        [
            "xadd x 3-0 data c",
            "multi",
            "xgroup CREATECONSUMER x g1 Bob",
            "xgroup SETID x g1 3-0 ENTRIESREAD 3",
            "exec",
        ]
    );
}

/// `calls=N,...,failed_calls=M` of a command's INFO commandstats line.
fn calls(c: &mut RawConn, cmd: &str) -> (String, String) {
    let info = c.cmd(&["INFO", "commandstats"]);
    let line = info
        .split("\r\n")
        .find(|l| l.starts_with(&format!("cmdstat_{cmd}:")))
        .unwrap_or_else(|| panic!("no {cmd} in {info}"))
        .to_string();
    let field = |name: &str| {
        line.split([':', ','])
            .find_map(|f| f.strip_prefix(&format!("{name}=")).map(str::to_string))
            .unwrap()
    };
    (field("calls"), field("failed_calls"))
}

#[test]
fn blocked_commands_are_counted_once_in_commandstats() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let mut b = s.raw(2);
    let id = b.cmd(&["CLIENT", "ID"]);
    let id = id.trim_start_matches(':').trim_end().to_string();

    // Served when a key is ready (blocking again in between does not count).
    c.cmd(&["CONFIG", "RESETSTAT"]);
    b.send(&["BLPOP", "l", "0"]);
    wait_blocked(&s, 1);
    c.cmd(&["MULTI"]);
    c.cmd(&["RPUSH", "l", "x"]);
    c.cmd(&["LPOP", "l"]);
    c.cmd(&["EXEC"]);
    c.cmd(&["RPUSH", "l", "y"]);
    assert_eq!(b.read_reply(), "*2\r\n$1\r\nl\r\n$1\r\ny\r\n");
    assert_eq!(calls(&mut c, "blpop"), ("1".into(), "0".into()));

    // Unblocked as by a timeout, and with an error.
    c.cmd(&["CONFIG", "RESETSTAT"]);
    b.send(&["BLPOP", "l", "0"]);
    wait_blocked(&s, 1);
    assert_eq!(c.cmd(&["CLIENT", "UNBLOCK", &id, "TIMEOUT"]), ":1\r\n");
    assert_eq!(b.read_reply(), "*-1\r\n");
    assert_eq!(calls(&mut c, "blpop"), ("1".into(), "0".into()));
    b.send(&["BLPOP", "l", "0"]);
    wait_blocked(&s, 1);
    assert_eq!(c.cmd(&["CLIENT", "UNBLOCK", &id, "ERROR"]), ":1\r\n");
    assert_eq!(
        b.read_reply(),
        "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    );
    assert_eq!(calls(&mut c, "blpop"), ("2".into(), "1".into()));
    let info = c.cmd(&["INFO", "errorstats"]);
    assert!(info.contains("errorstat_UNBLOCKED:count=1\r\n"), "{info}");

    // Re-run into an error (the group destroyed): one failed call.
    c.cmd(&["CONFIG", "RESETSTAT"]);
    c.cmd(&["XGROUP", "CREATE", "st", "g", "$", "MKSTREAM"]);
    b.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "Alice",
        "BLOCK",
        "0",
        "STREAMS",
        "st",
        ">",
    ]);
    wait_blocked(&s, 1);
    c.cmd(&["XGROUP", "DESTROY", "st", "g"]);
    assert!(b.read_reply().starts_with("-NOGROUP "));
    assert_eq!(calls(&mut c, "xreadgroup"), ("1".into(), "1".into()));
    let stats = c.cmd(&["INFO", "stats"]);
    assert!(stats.contains("total_error_replies:1\r\n"), "{stats}");
}

#[test]
fn restore_of_an_expired_payload_over_a_key_propagates_its_deletion() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["SET", "src", "value"]);
    // DUMP's payload as bytes (it is not UTF-8: read the frame raw).
    c.send(&["DUMP", "src"]);
    let mut header = Vec::new();
    c.reader.read_until(b'\n', &mut header).unwrap();
    let len: usize = std::str::from_utf8(&header[1..header.len() - 2])
        .unwrap()
        .parse()
        .unwrap();
    let mut payload = vec![0; len + 2];
    c.reader.read_exact(&mut payload).unwrap();
    payload.truncate(len);
    c.cmd(&["SET", "k1", "old"]);
    c.cmd(&["SET", "k2", "old"]);
    let mut repl = ReplStream::attach(&s);
    c.cmd(&["SELECT", "0"]);
    c.cmd(&["CONFIG", "SET", "lazyfree-lazy-server-del", "no"]);
    let past = b"1000".to_vec();
    let restore = |c: &mut RawConn, key: &[u8]| {
        c.send_bytes(&[b"RESTORE", key, &past, &payload, b"REPLACE", b"ABSTTL"]);
        assert_eq!(c.read_reply(), "+OK\r\n");
    };
    restore(&mut c, b"k1");
    c.cmd(&["CONFIG", "SET", "lazyfree-lazy-server-del", "yes"]);
    restore(&mut c, b"k2");
    // Nothing replaced: nothing changed, nothing propagated.
    restore(&mut c, b"k3");
    assert_eq!(c.cmd(&["EXISTS", "k1", "k2", "k3"]), ":0\r\n");
    assert_eq!(
        repl.until_sentinel(&mut c, "1"),
        ["select 0", "del k1", "unlink k2"]
    );
}

/// Hash fields deleted by expiry go out as one `HDEL key field` each, as Redis 7.4's
/// propagateHashFieldDeletion: alone from active expiry, together (one MULTI/EXEC
/// when more than one) from the command that deleted them. HEXPIRE goes out as
/// HPEXPIREAT naming only the fields whose TTL it set.
#[test]
fn expired_hash_fields_propagate_an_hdel_each() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let mut repl = ReplStream::attach(&s);
    c.cmd(&["SELECT", "0"]);
    assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "+OK\r\n");
    // A time in the past deletes the fields: HDELs only, in a transaction.
    c.cmd(&["HSET", "h0", "x1", "y1", "x2", "y2"]);
    assert_eq!(
        c.cmd(&["HEXPIREAT", "h0", "1", "FIELDS", "3", "x1", "x2", "nope"]),
        "*3\r\n:2\r\n:2\r\n:-2\r\n"
    );
    // Conditions not met and missing fields: nothing sent, or only what was set.
    c.cmd(&["HSET", "h1", "f1", "v1", "f2", "v2"]);
    c.cmd(&["HEXPIRE", "h1", "10", "XX", "FIELDS", "2", "f1", "nope"]);
    assert_eq!(
        c.cmd(&["HPEXPIRE", "h1", "100000", "NX", "FIELDS", "2", "f1", "nope"]),
        "*2\r\n:1\r\n:-2\r\n"
    );
    let cmds = repl.until_sentinel(&mut c, "1");
    assert_eq!(
        cmds[..7],
        [
            "select 0",
            "hset h0 x1 y1 x2 y2",
            "multi",
            "hdel h0 x1",
            "hdel h0 x2",
            "exec",
            "hset h1 f1 v1 f2 v2",
        ]
    );
    assert_eq!(cmds.len(), 8, "{cmds:?}");
    let at: Vec<&str> = cmds[7].split(' ').collect();
    assert_eq!([at[0], at[1]], ["hpexpireat", "h1"]);
    assert_eq!(at[3..], ["NX", "FIELDS", "1", "f1"]);
    assert!(at[2].parse::<i64>().unwrap() > 1_700_000_000_000);

    // Lazy expiry: a read deletes the field it names (one HDEL), HRANDFIELD every
    // due field (a transaction of HDELs); the reads themselves are not sent.
    c.cmd(&["HSET", "lz", "a", "1", "b", "2", "c", "3"]);
    c.cmd(&["HPEXPIRE", "lz", "1", "FIELDS", "3", "a", "b", "c"]);
    assert_eq!(repl.until_sentinel(&mut c, "2").len(), 2);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(c.cmd(&["HLEN", "lz"]), ":3\r\n");
    assert_eq!(c.cmd(&["HEXISTS", "lz", "a"]), ":0\r\n");
    assert_eq!(c.cmd(&["HLEN", "lz"]), ":2\r\n");
    assert_eq!(c.cmd(&["HRANDFIELD", "lz", "2"]), "*0\r\n");
    assert_eq!(c.cmd(&["EXISTS", "lz"]), ":0\r\n");
    assert_eq!(
        repl.until_sentinel(&mut c, "3"),
        ["hdel lz a", "multi", "hdel lz b", "hdel lz c", "exec"]
    );

    // Active expiry: one HDEL per field, earliest first, no transaction.
    c.cmd(&["HSET", "ac", "late", "v", "early", "v", "keep", "v"]);
    c.cmd(&["HPEXPIRE", "ac", "2", "FIELDS", "1", "early"]);
    c.cmd(&["HPEXPIRE", "ac", "5", "FIELDS", "1", "late"]);
    // INFO counts hashes with field TTLs (Redis's subexpiry): h1 and ac.
    assert!(c.cmd(&["INFO", "keyspace"]).contains(",subexpiry=2\r\n"));
    assert_eq!(repl.until_sentinel(&mut c, "4").len(), 3);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), "+OK\r\n");
    wait_until(|| c.cmd(&["HLEN", "ac"]) == ":1\r\n");
    assert_eq!(
        repl.until_sentinel(&mut c, "5"),
        ["hdel ac early", "hdel ac late"]
    );
    assert!(c.cmd(&["INFO", "keyspace"]).contains(",subexpiry=1\r\n"));
}

/// PUBLISH reaches replicas (their subscribers hear it), alone or inside a
/// transaction, but never the AOF, as Redis's PROPAGATE_REPL.
#[test]
fn publish_goes_to_replicas_not_to_the_aof() {
    let dir = temp_dir("publish-repl-only");
    let s = TestServer::start_in(&dir, &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.raw(2);
    let mut repl = ReplStream::attach(&s);
    c.cmd(&["MULTI"]);
    c.cmd(&["PUBLISH", "bla", "bla"]);
    assert_eq!(c.cmd(&["EXEC"]), "*1\r\n:0\r\n");
    assert_eq!(c.cmd(&["PUBLISH", "solo", "m"]), ":0\r\n");
    c.cmd(&["MULTI"]);
    c.cmd(&["PUBLISH", "ch", "x"]);
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&["EXEC"]);
    assert_eq!(
        repl.until_sentinel(&mut c, "1"),
        [
            "select 0",
            "publish bla bla",
            "publish solo m",
            "multi",
            "publish ch x",
            "set k v",
            "exec",
        ]
    );
    let incr = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .unwrap();
    let aof = String::from_utf8_lossy(&std::fs::read(incr).unwrap()).into_owned();
    assert!(!aof.to_lowercase().contains("publish"), "{aof}");
    assert!(
        aof.contains(
            "*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*1\r\n$4\r\nEXEC\r\n"
        ),
        "{aof}"
    );
    // The file replays: the transaction's write is there.
    drop(repl);
    let mut s = s;
    s.terminate();
    let s = TestServer::start_in(&dir, &["--appendonly", "yes"]);
    assert_eq!(s.raw(2).cmd(&["GET", "k"]), "$1\r\nv\r\n");
}

/// `redis.set_repl` narrows where a script's next commands go: replicas get a and d
/// (and e), the AOF a, c and d; b goes nowhere (unit/scripting "Test selective
/// replication of certain Redis commands from Lua").
#[test]
fn set_repl_sends_a_scripts_commands_where_it_says() {
    let dir = temp_dir("set-repl");
    let s = TestServer::start_in(&dir, &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.raw(2);
    let mut repl = ReplStream::attach(&s);
    let script = "redis.call('set','a','1'); \
        redis.set_repl(redis.REPL_NONE); redis.call('set','b','2'); \
        redis.set_repl(redis.REPL_AOF); redis.call('set','c','3'); \
        redis.set_repl(redis.REPL_ALL); redis.call('set','d','4')";
    assert_eq!(c.cmd(&["EVAL", script, "4", "a", "b", "c", "d"]), "$-1\r\n");
    let only_replicas = "redis.set_repl(redis.REPL_REPLICA); redis.call('set','e','5')";
    assert_eq!(c.cmd(&["EVAL", only_replicas, "1", "e"]), "$-1\r\n");
    // The next script starts with everything propagated again.
    assert_eq!(
        c.cmd(&["EVAL", "redis.call('set','f','6')", "1", "f"]),
        "$-1\r\n"
    );
    assert_eq!(
        repl.until_sentinel(&mut c, "1"),
        ["multi", "select 0", "set a 1", "set d 4", "exec", "set e 5", "set f 6",]
    );
    assert_eq!(c.cmd(&["DEBUG", "LOADAOF"]), "+OK\r\n");
    assert_eq!(
        c.cmd(&["MGET", "a", "b", "c", "d", "e", "f"]),
        "*6\r\n$1\r\n1\r\n$-1\r\n$1\r\n3\r\n$1\r\n4\r\n$-1\r\n$1\r\n6\r\n"
    );
    drop(repl);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A key that expired before a blocked client could be served is not deleted by the
/// wake-up attempt: the client stays blocked, and the DEL goes out when a command
/// next touches the key, in its place in the stream (unit/type/list "MULTI + LPUSH +
/// EXPIRE + DEBUG SLEEP on blocked client, key already expired", "SWAPDB wants to
/// wake blocked client, but the key already expired").
#[test]
fn an_expired_key_does_not_wake_a_blocked_client_nor_go_out_early() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let mut repl = ReplStream::attach(&s);
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    let mut blocked = s.raw(2);
    let id = blocked.cmd(&["CLIENT", "ID"]);
    let id = id.trim_start_matches(':').trim_end().to_string();
    blocked.send(&["BRPOP", "k", "0"]);
    wait_blocked(&s, 1);
    c.cmd(&["MULTI"]);
    c.cmd(&["RPUSH", "k", "hello"]);
    c.cmd(&["PEXPIRE", "k", "100"]);
    c.cmd(&["DEBUG", "SLEEP", "0.2"]);
    assert_eq!(c.cmd(&["EXEC"]), "*3\r\n:1\r\n:1\r\n+OK\r\n");
    assert!(c.cmd(&["CLIENT", "LIST", "ID", &id]).contains("flags=b"));
    assert_eq!(c.cmd(&["CLIENT", "UNBLOCK", &id]), ":1\r\n");
    assert_eq!(blocked.read_reply(), "*-1\r\n");
    // SWAPDB brings an expired list to a client blocked in another database.
    c.cmd(&["SELECT", "1"]);
    c.cmd(&["RPUSH", "k", "hello"]);
    c.cmd(&["PEXPIRE", "k", "100"]);
    blocked.cmd(&["SELECT", "9"]);
    blocked.send(&["BRPOP", "k", "0"]);
    wait_blocked(&s, 1);
    std::thread::sleep(std::time::Duration::from_millis(150));
    assert_eq!(c.cmd(&["SWAPDB", "1", "9"]), "+OK\r\n");
    assert!(c.cmd(&["CLIENT", "LIST", "ID", &id]).contains("flags=b"));
    assert_eq!(c.cmd(&["CLIENT", "UNBLOCK", &id]), ":1\r\n");
    assert_eq!(blocked.read_reply(), "*-1\r\n");
    assert_eq!(blocked.cmd(&["SET", "somekey", "v"]), "+OK\r\n");
    assert_eq!(blocked.cmd(&["EXISTS", "k"]), ":0\r\n");
    c.cmd(&["SELECT", "0"]);
    let stream = repl.until_sentinel(&mut c, "1");
    let stream: Vec<String> = stream
        .into_iter()
        .map(|l| match l.strip_prefix("pexpireat k ") {
            Some(_) => "pexpireat k <ms>".to_string(),
            None => l,
        })
        .collect();
    assert_eq!(
        stream,
        [
            "multi",
            "select 0",
            "rpush k hello",
            "pexpireat k <ms>",
            "exec",
            "select 1",
            "rpush k hello",
            "pexpireat k <ms>",
            "swapdb 1 9",
            "select 9",
            "set somekey v",
            "del k",
            "select 0",
        ]
    );
}

/// SET with a time already past goes out as the SET with that PXAT (EXAT rewritten to
/// it), as Redis's setGenericCommand sends it; the key's removal follows as its DEL.
#[test]
fn set_with_a_past_time_propagates_the_set_then_its_expiry() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    // The lookups below remove the keys, in their order (not the active cycle's).
    assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "+OK\r\n");
    let mut repl = ReplStream::attach(&s);
    c.cmd(&["SELECT", "0"]);
    // One transaction: no lookup or active expiry between the SETs.
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", "a", "1", "PXAT", "5"]);
    c.cmd(&["SET", "b", "2", "EXAT", "1"]);
    assert_eq!(c.cmd(&["EXEC"]), "*2\r\n+OK\r\n+OK\r\n");
    assert_eq!(c.cmd(&["EXISTS", "a"]), ":0\r\n");
    assert_eq!(c.cmd(&["EXISTS", "b"]), ":0\r\n");
    assert_eq!(
        repl.until_sentinel(&mut c, "1"),
        [
            "multi",
            "select 0",
            "set a 1 PXAT 5",
            "set b 2 PXAT 1000",
            "exec",
            "del a",
            "del b"
        ]
    );
}
