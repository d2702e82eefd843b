//! Redis 7.4's configuration parameters: CONFIG GET * lists every one, a config file
//! with every active directive of the stock redis.conf starts the server, values are
//! validated with Redis's errors, and the directives with an effect here do it
//! (rename-command, unixsocket, port at runtime, shutdown-on-sigterm, supervised
//! systemd, replica-announce-*). Also CLUSTER & co. without cluster mode, and the INFO
//! fields that came with 7.4.

mod common;
use common::*;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The names of a CONFIG GET reply (RESP2: name, value, name, value…).
fn config_names(reply: &str) -> Vec<String> {
    let lines: Vec<&str> = reply.split("\r\n").collect();
    // *N, then $len/value pairs: names are the values at even positions.
    let values: Vec<&str> = lines[1..]
        .chunks(2)
        .filter(|c| c.len() == 2)
        .map(|c| c[1])
        .collect();
    values.iter().step_by(2).map(|s| s.to_string()).collect()
}

fn get(c: &mut RawConn, name: &str) -> String {
    let r = c.cmd(&["CONFIG", "GET", name]);
    let lines: Vec<&str> = r.split("\r\n").collect();
    assert_eq!(lines[0], "*2", "{name}: {r}");
    lines[4].to_string()
}

fn set_error(name: &str, why: &str) -> String {
    format!("-ERR CONFIG SET failed (possibly related to argument '{name}') - {why}\r\n")
}

fn poll_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn config_get_lists_every_redis74_parameter() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let names = config_names(&c.cmd(&["CONFIG", "GET", "*"]));
    let list = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/redis74_params.txt"
    ))
    .unwrap();
    let wanted: Vec<&str> = list.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(wanted.len(), 202);
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|n| !names.iter().any(|m| m == n))
        .collect();
    assert!(missing.is_empty(), "missing from CONFIG GET *: {missing:?}");
    // Every listed parameter can be set back to the value it shows (Redis's "CONFIG
    // sanity"), except those that are startup-only or protected.
    for name in &names {
        let value = get(&mut c, name);
        let r = c.cmd(&["CONFIG", "SET", name, &value]);
        assert!(
            r == "+OK\r\n"
                || r.contains("can't set immutable config")
                || r.contains("can't set protected config"),
            "{name} {value:?}: {r}"
        );
        assert_eq!(get(&mut c, name), value, "{name}");
    }
    // Hidden parameters answer by exact name only.
    assert!(!names.iter().any(|n| n == "key-load-delay"));
    assert_eq!(get(&mut c, "key-load-delay"), "0");
}

#[test]
fn stock_redis_conf_directives_start_the_server() {
    let dir = temp_dir("stockconf");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    // Every active (uncommented) line of Redis 7.4's stock redis.conf, with its stock
    // value; only port, dir, pidfile and logfile are adapted to the test.
    let lines = [
        "bind 127.0.0.1 -::1".to_string(),
        "protected-mode yes".into(),
        format!("port {port}"),
        "tcp-backlog 511".into(),
        "timeout 0".into(),
        "tcp-keepalive 300".into(),
        "daemonize no".into(),
        format!("pidfile {}/redis.pid", dir.display()),
        "loglevel notice".into(),
        format!("logfile {}/redis.log", dir.display()),
        "databases 16".into(),
        "always-show-logo no".into(),
        "set-proc-title yes".into(),
        "proc-title-template \"{title} {listen-addr} {server-mode}\"".into(),
        "locale-collate \"\"".into(),
        "stop-writes-on-bgsave-error yes".into(),
        "rdbcompression yes".into(),
        "rdbchecksum yes".into(),
        "dbfilename dump.rdb".into(),
        "rdb-del-sync-files no".into(),
        format!("dir {}", dir.display()),
        "replica-serve-stale-data yes".into(),
        "replica-read-only yes".into(),
        "repl-diskless-sync yes".into(),
        "repl-diskless-sync-delay 5".into(),
        "repl-diskless-sync-max-replicas 0".into(),
        "repl-diskless-load disabled".into(),
        "repl-disable-tcp-nodelay no".into(),
        "replica-priority 100".into(),
        "acllog-max-len 128".into(),
        "lazyfree-lazy-eviction no".into(),
        "lazyfree-lazy-expire no".into(),
        "lazyfree-lazy-server-del no".into(),
        "replica-lazy-flush no".into(),
        "lazyfree-lazy-user-del no".into(),
        "lazyfree-lazy-user-flush no".into(),
        "oom-score-adj no".into(),
        "oom-score-adj-values 0 200 800".into(),
        "disable-thp yes".into(),
        "appendonly no".into(),
        "appendfilename \"appendonly.aof\"".into(),
        "appenddirname \"appendonlydir\"".into(),
        "appendfsync everysec".into(),
        "no-appendfsync-on-rewrite no".into(),
        "auto-aof-rewrite-percentage 100".into(),
        "auto-aof-rewrite-min-size 64mb".into(),
        "aof-load-truncated yes".into(),
        "aof-use-rdb-preamble yes".into(),
        "aof-timestamp-enabled no".into(),
        "slowlog-log-slower-than 10000".into(),
        "slowlog-max-len 128".into(),
        "latency-monitor-threshold 0".into(),
        "notify-keyspace-events \"\"".into(),
        "hash-max-listpack-entries 512".into(),
        "hash-max-listpack-value 64".into(),
        "list-max-listpack-size -2".into(),
        "list-compress-depth 0".into(),
        "set-max-intset-entries 512".into(),
        "set-max-listpack-entries 128".into(),
        "set-max-listpack-value 64".into(),
        "zset-max-listpack-entries 128".into(),
        "zset-max-listpack-value 64".into(),
        "hll-sparse-max-bytes 3000".into(),
        "stream-node-max-bytes 4096".into(),
        "stream-node-max-entries 100".into(),
        "activerehashing yes".into(),
        "client-output-buffer-limit normal 0 0 0".into(),
        "client-output-buffer-limit replica 256mb 64mb 60".into(),
        "client-output-buffer-limit pubsub 32mb 8mb 60".into(),
        "hz 10".into(),
        "dynamic-hz yes".into(),
        "aof-rewrite-incremental-fsync yes".into(),
        "rdb-save-incremental-fsync yes".into(),
        "jemalloc-bg-thread yes".into(),
    ];
    let conf = dir.join("redis.conf");
    std::fs::write(&conf, lines.join("\n") + "\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cinnabar"))
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut up = false;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err);
            panic!("exited with {status}: {err}");
        }
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(up, "the server did not listen");
    let mut c = RawConn::connect(port, 2);
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    for (name, value) in [
        ("proc-title-template", "{title} {listen-addr} {server-mode}"),
        ("oom-score-adj-values", "0 200 800"),
        ("repl-diskless-load", "disabled"),
        ("jemalloc-bg-thread", "yes"),
        ("hash-max-listpack-entries", "512"),
        (
            "client-output-buffer-limit",
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
        ),
        ("appendonly", "no"),
    ] {
        assert_eq!(get(&mut c, name), value, "{name}");
    }
    assert!(dir.join("redis.pid").is_file());
    c.send(&["SHUTDOWN", "NOSAVE"]);
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn values_are_validated_with_redis_errors() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let rows: &[(&[&str], String)] = &[
        (
            &["list-compress-depth", "-1"],
            set_error(
                "list-compress-depth",
                "argument must be between 0 and 2147483647 inclusive",
            ),
        ),
        (
            &["list-compress-depth", "x"],
            set_error(
                "list-compress-depth",
                "argument couldn't be parsed into an integer",
            ),
        ),
        (
            &["maxmemory-clients", "200%"],
            set_error(
                "maxmemory-clients",
                "percentage argument must be less or equal to 100",
            ),
        ),
        (
            &["maxmemory-clients", "-1"],
            set_error(
                "maxmemory-clients",
                "argument must be a memory or percent value",
            ),
        ),
        (
            &["active-defrag-ignore-bytes", "1x"],
            set_error(
                "active-defrag-ignore-bytes",
                "argument must be a memory value",
            ),
        ),
        (
            &["oom-score-adj", "sometimes"],
            set_error(
                "oom-score-adj",
                "argument(s) must be one of the following: no, yes, relative, absolute",
            ),
        ),
        (
            &["oom-score-adj-values", "0 200"],
            set_error("oom-score-adj-values", "wrong number of arguments"),
        ),
        (
            &["oom-score-adj-values", "0 200 3000"],
            set_error(
                "oom-score-adj-values",
                "Invalid oom-score-adj-values, elements must be between -2000 and 2000.",
            ),
        ),
        (
            &["shutdown-on-sigterm", "save nosave"],
            set_error(
                "shutdown-on-sigterm",
                "shutdown options SAVE and NOSAVE can't be used simultaneously",
            ),
        ),
        (
            &["shutdown-on-sigterm", "later"],
            set_error(
                "shutdown-on-sigterm",
                "argument(s) must be one of the following: default, save, nosave, now, force",
            ),
        ),
        (
            &["replica-serve-stale-data", "maybe"],
            set_error("replica-serve-stale-data", "argument must be 'yes' or 'no'"),
        ),
        (
            &["io-threads", "4"],
            set_error("io-threads", "can't set immutable config"),
        ),
        (
            &["unixsocket", "/tmp/x.sock"],
            set_error("unixsocket", "can't set immutable config"),
        ),
        (
            &["cluster-enabled", "yes"],
            set_error("cluster-enabled", "can't set immutable config"),
        ),
        (
            &["tls-port", "6380"],
            set_error(
                "tls-port",
                "Unable to update TLS configuration. Check server logs.",
            ),
        ),
    ];
    for (args, want) in rows {
        let mut full = vec!["CONFIG", "SET"];
        full.extend_from_slice(args);
        assert_eq!(&c.cmd(&full), want, "{args:?}");
    }
    // Values are shown as Redis shows them.
    for (name, value, shown) in [
        ("maxmemory-clients", "10%", "10%"),
        ("maxmemory-clients", "1mb", "1048576"),
        ("shutdown-on-sigint", "NOW nosave", "nosave now"),
        ("shutdown-on-sigint", "default", "default"),
        ("oom-score-adj-values", "0 -100 1000", "0 -100 1000"),
        ("replica-serve-stale-data", "NO", "no"),
        ("repl-backlog-ttl", "7200", "7200"),
        ("slave-announce-ip", "10.0.0.1", "10.0.0.1"),
        ("hz", "1000", "500"),
    ] {
        assert_eq!(c.cmd(&["CONFIG", "SET", name, value]), "+OK\r\n", "{name}");
        assert_eq!(get(&mut c, name), shown, "{name}");
    }
    assert_eq!(get(&mut c, "replica-announce-ip"), "10.0.0.1");
    // hz is capped to 1..=500 where it is set, as Redis's updateHZ caps config_hz.
    let info = c.cmd(&["INFO", "server"]);
    assert!(
        info.contains("\r\nhz:500\r\n") && info.contains("\r\nconfigured_hz:500\r\n"),
        "{info}"
    );
}

/// Values parse as Redis 7.4's config.c reads them (found comparing every parameter's
/// CONFIG SET with redis-server's): integers as string2ll (no `+`, no leading zeros),
/// memory values as memtoull (digits, none being 0, then a unit; too big is out of
/// range), the 7.4 memory parameters taking units, an alias named as given, enum
/// lists in Redis's order, and the values Redis caps shown capped.
#[test]
fn values_parse_as_redis_74_reads_them() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let not_int = "argument couldn't be parsed into an integer";
    let rows: &[(&[&str], String)] = &[
        (&["hz", "+5"], set_error("hz", not_int)),
        (&["hz", "007"], set_error("hz", not_int)),
        (
            &["slowlog-max-len", "-0"],
            set_error("slowlog-max-len", not_int),
        ),
        (&["slowlog-max-len", "4294967296"], "+OK\r\n".into()),
        (&["hash-max-listpack-value", "1kb"], "+OK\r\n".into()),
        (&["zset-max-ziplist-value", "2k"], "+OK\r\n".into()),
        (&["stream-node-max-bytes", "1mb"], "+OK\r\n".into()),
        (&["hll-sparse-max-bytes", ""], "+OK\r\n".into()),
        (
            &["hash-max-ziplist-value", "1.5"],
            set_error("hash-max-ziplist-value", "argument must be a memory value"),
        ),
        (
            &["ZSET-MAX-ZIPLIST-VALUE", "-1"],
            set_error("zset-max-ziplist-value", "argument must be a memory value"),
        ),
        (
            &["slave-priority", "x"],
            set_error("slave-priority", not_int),
        ),
        (
            &["auto-aof-rewrite-min-size", "9223372036854775808"],
            set_error(
                "auto-aof-rewrite-min-size",
                "argument must be between 0 and 9223372036854775807 inclusive",
            ),
        ),
        (
            &["client-query-buffer-limit", "99999999999999999999"],
            set_error(
                "client-query-buffer-limit",
                "argument must be between 1048576 and 9223372036854775807 inclusive",
            ),
        ),
        (
            &["hash-max-listpack-value", "10000000000gb"],
            set_error(
                "hash-max-listpack-value",
                "argument must be between 0 and 9223372036854775807 inclusive",
            ),
        ),
        (
            &["maxclients", "0"],
            set_error(
                "maxclients",
                "argument must be between 1 and 4294967295 inclusive",
            ),
        ),
        (
            &["maxmemory-clients", "+5%"],
            set_error(
                "maxmemory-clients",
                "argument must be a memory or percent value",
            ),
        ),
        (
            &["appendfsync", "sometimes"],
            set_error(
                "appendfsync",
                "argument(s) must be one of the following: everysec, always, no",
            ),
        ),
        (
            &["latency-tracking-info-percentiles", "50 99 "],
            set_error(
                "latency-tracking-info-percentiles",
                "Invalid latency-tracking-info-percentiles parameters",
            ),
        ),
        (
            &["rdbchecksum", "no"],
            set_error("rdbchecksum", "can't set immutable config"),
        ),
        // An alias and its parameter are two names (Redis registers them apart).
        (
            &["slave-priority", "5", "replica-priority", "6"],
            "+OK\r\n".into(),
        ),
        (
            &["hz", "1", "HZ", "2"],
            set_error("HZ", "duplicate parameter"),
        ),
    ];
    for (args, want) in rows {
        let mut cmd = vec!["CONFIG", "SET"];
        cmd.extend_from_slice(args);
        assert_eq!(c.cmd(&cmd), *want, "{args:?}");
    }
    for (name, want) in [
        ("hash-max-listpack-value", "1024"),
        ("zset-max-listpack-value", "2000"),
        ("stream-node-max-bytes", "1048576"),
        ("hll-sparse-max-bytes", "0"),
        ("slowlog-max-len", "4294967296"),
        ("replica-priority", "6"),
    ] {
        assert_eq!(get(&mut c, name), want, "{name}");
    }
    // Capped values read back capped; `relative` reads back as its first name.
    for (name, value, shown) in [
        ("hz", "0", "1"),
        ("hz", "100000", "500"),
        ("repl-backlog-size", "1", "16384"),
        ("oom-score-adj", "relative", "yes"),
        ("latency-tracking-info-percentiles", "", ""),
    ] {
        assert_eq!(c.cmd(&["CONFIG", "SET", name, value]), "+OK\r\n", "{name}");
        assert_eq!(get(&mut c, name), shown, "{name} {value}");
    }
}

/// `oom-score-adj` takes the class of the server's role, and follows REPLICAOF both
/// ways (the suite's unit/oom-score-adj).
#[test]
fn oom_score_adj_follows_the_role() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let path = format!("/proc/{}/oom_score_adj", s.pid());
    let score = || -> i32 {
        std::fs::read_to_string(&path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let base = score();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "oom-score-adj-values", "10 20 30"]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd(&["CONFIG", "SET", "oom-score-adj", "yes"]), "+OK\r\n");
    assert_eq!(score(), base + 10);
    assert_eq!(c.cmd(&["REPLICAOF", "localhost", "1"]), "+OK\r\n");
    assert_eq!(score(), base + 20);
    assert_eq!(c.cmd(&["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    assert_eq!(score(), base + 10);
    assert_eq!(c.cmd(&["CONFIG", "SET", "oom-score-adj", "no"]), "+OK\r\n");
    assert_eq!(score(), base);
}

#[test]
fn rename_command_renames_and_removes() {
    let s = TestServer::start_with(&[
        "--rename-command",
        "flushall",
        "",
        "--rename-command",
        "set",
        "put-a-value-under-a-long-secret-name-0123456789",
    ]);
    let mut c = s.raw(2);
    assert_eq!(
        c.cmd(&["PUT-A-VALUE-UNDER-A-LONG-SECRET-NAME-0123456789", "k", "v"]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd(&["GET", "k"]), "$1\r\nv\r\n");
    assert_eq!(
        c.cmd(&["SET", "k", "w"]),
        "-ERR unknown command 'SET', with args beginning with: 'k' 'w' \r\n"
    );
    assert_eq!(
        c.cmd(&["FLUSHALL"]),
        "-ERR unknown command 'FLUSHALL', with args beginning with: \r\n"
    );
    // Scripts see the same command table.
    assert!(c
        .cmd(&["EVAL", "return redis.call('set', 'k', 'x')", "0"])
        .starts_with("-ERR Unknown Redis command called from script"));

    let out = Command::new(env!("CARGO_BIN_EXE_cinnabar"))
        .args(["--port", "0", "--rename-command", "nosuchcommand", "x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("No such command in rename-command"), "{err}");
}

#[test]
fn unixsocket_serves_clients_as_local() {
    let dir = temp_dir("unixsock");
    let path = dir.join("cinnabar.sock");
    let mut s = TestServer::start_with(&[
        "--unixsocket",
        &path.display().to_string(),
        "--unixsocketperm",
        "700",
        "--enable-debug-command",
        "local",
    ]);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let stream = std::os::unix::net::UnixStream::connect(&path).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut w = stream;
    let mut line = String::new();
    w.write_all(b"PING\r\n").unwrap();
    reader.read_line(&mut line).unwrap();
    assert_eq!(line, "+PONG\r\n");
    line.clear();
    w.write_all(b"DEBUG SLEEP 0\r\n").unwrap();
    reader.read_line(&mut line).unwrap();
    assert_eq!(line, "+OK\r\n");
    line.clear();
    w.write_all(b"CLIENT INFO\r\n").unwrap();
    reader.read_line(&mut line).unwrap();
    line.clear();
    reader.read_line(&mut line).unwrap();
    assert!(
        line.contains(&format!("addr={}:0 ", path.display())),
        "{line}"
    );
    assert_eq!(get(&mut s.raw(2), "unixsocketperm"), "700");
    assert_eq!(s.terminate(), Some(0));
    assert!(!path.exists(), "the socket file is removed at shutdown");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn config_set_port_listens_on_the_new_port() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_port = busy.local_addr().unwrap().port().to_string();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory", "10000001", "port", &busy_port]),
        set_error("port", "Unable to listen on this port. Check server logs.")
    );
    assert_eq!(get(&mut c, "maxmemory"), "0");
    assert_eq!(get(&mut c, "port"), s.port.to_string());
    assert_eq!(s.raw(2).cmd(&["PING"]), "+PONG\r\n");
    drop(busy);

    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let new_port = free.local_addr().unwrap().port();
    drop(free);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "port", &new_port.to_string()]),
        "+OK\r\n"
    );
    let mut moved = RawConn::connect(new_port, 2);
    assert_eq!(moved.cmd(&["PING"]), "+PONG\r\n");
    assert_eq!(get(&mut moved, "port"), new_port.to_string());
    poll_until("the old port to close", || {
        std::net::TcpStream::connect(("127.0.0.1", s.port)).is_err()
    });
    // The connection made before the change is still served.
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
}

#[test]
fn shutdown_on_sigterm_decides_the_final_save() {
    for (mode, saved) in [("default", true), ("nosave", false)] {
        let dir = temp_dir("sigterm");
        let mut s = TestServer::start_in(
            &dir,
            &[
                "--appendonly",
                "no",
                "--save",
                "3600 1",
                "--shutdown-on-sigterm",
                mode,
            ],
        );
        s.raw(2).cmd(&["SET", "k", "v"]);
        assert_eq!(s.terminate(), Some(0), "{mode}");
        assert_eq!(dir.join("dump.rdb").exists(), saved, "{mode}");
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn supervised_systemd_notifies_readiness() {
    let dir = temp_dir("systemd");
    let notify = dir.join("notify.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&notify).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_cinnabar"))
        .args([
            "--port",
            &port.to_string(),
            "--dir",
            &dir.display().to_string(),
            "--supervised",
            "systemd",
            "--appendonly",
            "no",
        ])
        .env("NOTIFY_SOCKET", &notify)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    while !got.iter().any(|m: &String| m == "READY=1\n") {
        let n = sock.recv(&mut buf).expect("a notification");
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    assert_eq!(got[0], "STATUS=Ready to accept connections\n");
    assert_eq!(RawConn::connect(port, 2).cmd(&["PING"]), "+PONG\r\n");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn replica_announces_its_configured_address() {
    let master = TestServer::start();
    let port = master.port.to_string();
    let _replica = TestServer::start_with(&[
        "--replicaof",
        "127.0.0.1",
        &port,
        "--replica-announce-ip",
        "10.1.2.3",
        "--replica-announce-port",
        "4242",
    ]);
    let mut m = master.raw(2);
    poll_until("the replica to be listed", || {
        m.cmd(&["INFO", "replication"])
            .contains("slave0:ip=10.1.2.3,port=4242,")
    });
}

#[test]
fn cluster_commands_without_cluster_mode() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let disabled = "-ERR This instance has cluster support disabled\r\n";
    for cmd in [
        &["CLUSTER", "INFO"][..],
        &["CLUSTER", "SLOTS"],
        &["CLUSTER", "KEYSLOT", "k"],
        &["READONLY"],
        &["READWRITE"],
        &["ASKING"],
    ] {
        assert_eq!(c.cmd(cmd), disabled, "{cmd:?}");
    }
    assert_eq!(
        c.cmd(&["CLUSTER", "NOPE"]),
        "-ERR unknown subcommand 'NOPE'. Try CLUSTER HELP.\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "cluster-enabled"]),
        "*2\r\n$15\r\ncluster-enabled\r\n$2\r\nno\r\n"
    );
}

#[test]
fn info_has_the_74_stats_fields() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["HSET", "h", "f", "v", "g", "w"]);
    c.cmd(&["HPEXPIRE", "h", "1", "FIELDS", "1", "f"]);
    poll_until("the field to expire", || c.cmd(&["HLEN", "h"]) == ":1\r\n");
    let info = c.cmd(&["INFO", "stats"]);
    let field = |name: &str| -> i64 {
        info.split("\r\n")
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no {name} in {info}"))
            .parse()
            .unwrap()
    };
    assert_eq!(field("expired_subkeys"), 1);
    assert_eq!(field("evicted_scripts"), 0);
    assert!(field("eventloop_cycles") > 0);
    assert!(field("eventloop_duration_sum") > 0);
    for name in [
        "eventloop_duration_cmd_sum",
        "instantaneous_eventloop_cycles_per_sec",
        "instantaneous_eventloop_duration_usec",
    ] {
        assert!(field(name) >= 0);
    }
}

#[test]
fn replica_serve_stale_data_no_refuses_while_the_link_is_down() {
    // A master that is not there: the link stays down.
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = nobody.local_addr().unwrap().port().to_string();
    drop(nobody);
    let s = TestServer::start_with(&[
        "--replicaof",
        "127.0.0.1",
        &port,
        "--replica-serve-stale-data",
        "no",
    ]);
    let mut c = s.raw(2);
    assert_eq!(
        c.cmd(&["GET", "k"]),
        "-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n"
    );
    // Commands flagged STALE still run.
    assert!(c
        .cmd(&["INFO", "replication"])
        .contains("master_link_status:down"));
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "replica-serve-stale-data", "yes"]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd(&["GET", "k"]), "$-1\r\n");
}

fn server_pid(c: &mut RawConn) -> u32 {
    let info = c.cmd(&["INFO", "server"]);
    info.split("\r\n")
        .find_map(|l| l.strip_prefix("process_id:"))
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn oom_score_adj_is_written_for_the_process() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let path = format!("/proc/{}/oom_score_adj", server_pid(&mut c));
    let read = || std::fs::read_to_string(&path).unwrap().trim().to_string();
    let before = read();
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "oom-score-adj-values",
            "50 100 200",
            "oom-score-adj",
            "absolute"
        ]),
        "+OK\r\n"
    );
    assert_eq!(read(), "50");
    assert_eq!(c.cmd(&["CONFIG", "SET", "oom-score-adj", "no"]), "+OK\r\n");
    assert_eq!(read(), before);
}

#[test]
fn syslog_and_upstart_supervision() {
    // syslog-enabled sends each log line to syslog as well; the server keeps serving.
    let s = TestServer::start_with(&["--syslog-enabled", "yes", "--syslog-ident", "cinnabar-test"]);
    assert_eq!(s.raw(2).cmd(&["PING"]), "+PONG\r\n");
    assert_eq!(
        s.raw(2).cmd(&["CONFIG", "GET", "syslog-ident"]),
        "*2\r\n$12\r\nsyslog-ident\r\n$13\r\ncinnabar-test\r\n"
    );

    // `supervised upstart`: the server stops itself (SIGSTOP) once ready; upstart (here
    // the test) resumes it.
    let dir = temp_dir("upstart");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_cinnabar"))
        .args([
            "--port",
            &port.to_string(),
            "--dir",
            &dir.display().to_string(),
            "--supervised",
            "upstart",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stat = format!("/proc/{}/stat", child.id());
    poll_until("the server to stop itself", || {
        std::fs::read_to_string(&stat)
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('T')
            })
            .unwrap_or(false)
    });
    Command::new("kill")
        .args(["-CONT", &child.id().to_string()])
        .status()
        .unwrap();
    assert_eq!(RawConn::connect(port, 2).cmd(&["PING"]), "+PONG\r\n");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
