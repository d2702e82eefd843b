//! Server commands and process behaviour: INFO, CONFIG, COMMAND, DEBUG, MEMORY,
//! SLOWLOG, FLUSH*, SHUTDOWN, signals and configuration errors at startup.

mod common;
use common::*;
use std::process::Command;

#[test]
fn info_sections_use_redis_field_names() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["SET", "a", "1"]);
    c.cmd(&["SET", "b", "1", "EX", "100"]);
    c.cmd(&["GET", "a"]);
    c.cmd(&["GET", "nope"]);
    c.cmd(&["BADCMD"]);
    let info = c.cmd(&["INFO"]);
    for field in [
        "# Server\r\n",
        "redis_version:7.4.0\r\n",
        "redis_mode:standalone\r\n",
        "tcp_port:",
        "uptime_in_seconds:",
        "# Clients\r\n",
        "connected_clients:1\r\n",
        "blocked_clients:0\r\n",
        "maxclients:10000\r\n",
        "# Memory\r\n",
        "used_memory:",
        "used_memory_rss:",
        "maxmemory_policy:noeviction\r\n",
        "# Persistence\r\n",
        "# Stats\r\n",
        "keyspace_hits:1\r\n",
        "keyspace_misses:1\r\n",
        "total_error_replies:1\r\n",
        "# Replication\r\n",
        "role:master\r\n",
        "# CPU\r\n",
        "used_cpu_user:",
        "# Errorstats\r\n",
        "errorstat_ERR:count=1\r\n",
        "# Keyspace\r\n",
        "db0:keys=2,expires=1,avg_ttl=",
    ] {
        assert!(info.contains(field), "INFO lacks {field:?}:\n{info}");
    }
    assert!(!info.contains("# Commandstats"));
    let all = c.cmd(&["INFO", "commandstats"]);
    assert!(all.contains("cmdstat_set:calls=2,usec="), "{all}");
    assert!(
        all.contains(",rejected_calls=0,failed_calls=0\r\n"),
        "{all}"
    );
    assert!(
        s.raw(3).cmd(&["INFO", "server"]).starts_with('='),
        "INFO is a verbatim string in RESP3"
    );
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), "+OK\r\n");
    assert!(c.cmd(&["INFO", "stats"]).contains("keyspace_hits:0\r\n"));
}

#[test]
fn config_get_set() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["CONFIG", "GET", "maxmemory"], "*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n", "%1\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n"),
            (&["CONFIG", "SET", "maxmemory", "1mb", "hz", "20"], "+OK\r\n", "+OK\r\n"),
            (&["CONFIG", "GET", "maxmemory", "hz"], "*4\r\n$2\r\nhz\r\n$2\r\n20\r\n$9\r\nmaxmemory\r\n$7\r\n1048576\r\n", "%2\r\n$2\r\nhz\r\n$2\r\n20\r\n$9\r\nmaxmemory\r\n$7\r\n1048576\r\n"),
            (&["CONFIG", "SET", "maxmemory", "0"], "+OK\r\n", "+OK\r\n"),
            (&["CONFIG", "SET", "maxmemory-policy", "foo"], "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction\r\n", "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction\r\n"),
            (&["CONFIG", "SET", "hz", "x"], "-ERR CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer\r\n", "-ERR CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer\r\n"),
            (&["CONFIG", "SET", "maxmemory", "1", "maxmemory", "2"], "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - duplicate parameter\r\n", "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - duplicate parameter\r\n"),
            (&["CONFIG", "SET", "databases", "5"], "-ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config\r\n", "-ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config\r\n"),
            (&["CONFIG", "SET", "nope", "1"], "-ERR Unknown option or number of arguments for CONFIG SET - 'nope'\r\n", "-ERR Unknown option or number of arguments for CONFIG SET - 'nope'\r\n"),
            (&["CONFIG", "GET"], "-ERR wrong number of arguments for 'config|get' command\r\n", "-ERR wrong number of arguments for 'config|get' command\r\n"),
        ],
    );
    let mut c = s.raw(2);
    let many = c.cmd(&["CONFIG", "GET", "*max-*-entries*"]);
    assert!(
        many.contains("hash-max-listpack-entries") && many.contains("hash-max-ziplist-entries"),
        "{many}"
    );
}

#[test]
fn command_introspection() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let count = c.cmd(&["COMMAND", "COUNT"]);
    let n: usize = count.trim().trim_start_matches(':').parse().unwrap();
    assert!(n >= 60, "{count}");
    assert_eq!(
        c.cmd(&["COMMAND", "INFO", "get"]),
        "*1\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n"
    );
    assert_eq!(c.cmd(&["COMMAND", "INFO", "nope"]), "*1\r\n$-1\r\n");
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"]),
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "PING", "x"]),
        "-ERR The command has no key arguments\r\n"
    );
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "NOPE", "x"]),
        "-ERR Invalid command specified\r\n"
    );
    let list = c.cmd(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "client*"]);
    assert!(
        list.contains("client|list") && !list.contains("$3\r\nget\r\n"),
        "{list}"
    );
    let docs = s.raw(3).cmd(&["COMMAND", "DOCS", "get"]);
    assert!(
        docs.starts_with("%1\r\n$3\r\nget\r\n%4\r\n$7\r\nsummary\r\n"),
        "{docs}"
    );
    let all = c.cmd(&["COMMAND"]);
    assert!(all.starts_with(&format!("*{n}\r\n")));
}

#[test]
fn debug_memory_slowlog_flush() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.check(&[
        (&["DEBUG", "POPULATE", "1000"], "+OK\r\n"),
        (&["DBSIZE"], ":1000\r\n"),
        (&["GET", "key:7"], "$7\r\nvalue:7\r\n"),
        (&["DEBUG", "POPULATE", "10", "p", "3"], "+OK\r\n"),
        (&["GET", "p:1"], "$3\r\nval\r\n"),
        (
            &["DEBUG", "POPULATE", "-1"],
            "-ERR value is out of range, must be positive\r\n",
        ),
        // The table is sized for the count first: one no allocator can give is
        // refused as Redis refuses it, with nothing added.
        (
            &["DEBUG", "POPULATE", "2305843009213693951"],
            "-ERR OOM in dictTryExpand\r\n",
        ),
        (&["DBSIZE"], ":1010\r\n"),
        (&["DEBUG", "SLEEP", "0"], "+OK\r\n"),
        (
            &["DEBUG", "FOO"],
            "-ERR unknown subcommand or wrong number of arguments for 'FOO'. Try DEBUG HELP.\r\n",
        ),
        (&["MEMORY", "USAGE", "nokey"], "$-1\r\n"),
        (
            &["SLOWLOG", "GET", "x"],
            "-ERR count should be greater than or equal to -1\r\n",
        ),
        (
            &["CONFIG", "SET", "slowlog-log-slower-than", "0"],
            "+OK\r\n",
        ),
        (&["SLOWLOG", "RESET"], "+OK\r\n"),
        (&["ECHO", "slow"], "$4\r\nslow\r\n"),
        (&["SLOWLOG", "LEN"], ":2\r\n"),
        (&["FLUSHDB", "BOGUS"], "-ERR syntax error\r\n"),
        (&["FLUSHDB"], "+OK\r\n"),
        (&["DBSIZE"], ":0\r\n"),
        (&["FLUSHALL", "ASYNC"], "+OK\r\n"),
    ]);
    let usage = c.cmd(&["SET", "k", "value"]);
    assert_eq!(usage, "+OK\r\n");
    let u = c.cmd(&["MEMORY", "USAGE", "k"]);
    let n: i64 = u.trim().trim_start_matches(':').parse().unwrap();
    assert!(n > 0 && n < 64, "small string costs {n} bytes");
    let t = c.cmd(&["TIME"]);
    assert!(t.starts_with("*2\r\n$10\r\n"), "{t}");
    let lol = s.raw(3).cmd(&["LOLWUT"]);
    assert!(
        lol.starts_with('=') && lol.contains("Cinnabar ver."),
        "{lol}"
    );

    let denied = TestServer::start_with(&["--enable-debug-command", "no"]);
    assert_eq!(
        denied.raw(2).cmd(&["DEBUG", "SLEEP", "0"]),
        "-ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n"
    );
}

#[test]
fn shutdown_and_sigterm_exit_cleanly() {
    let mut s = TestServer::start();
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["SHUTDOWN", "BOGUS"]), "-ERR syntax error\r\n");
    c.send(&["SHUTDOWN", "NOSAVE"]);
    let mut buf = [0u8; 8];
    assert_eq!(std::io::Read::read(&mut c.stream, &mut buf).unwrap_or(0), 0);
    for _ in 0..100 {
        if !s.is_running() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(!s.is_running());

    let mut s2 = TestServer::start();
    assert_eq!(s2.terminate(), Some(0));
}

#[test]
fn bad_configuration_stops_startup_naming_the_directive() {
    let out = Command::new(env!("CARGO_BIN_EXE_cinnabar"))
        .args(["--port", "0", "--bogus-directive", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("at line 2")
            && err.contains(">>> 'bogus-directive \"1\"'")
            && err.contains("Bad directive"),
        "{err}"
    );

    let dir = std::env::temp_dir().join(format!("cinnabar-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("test.conf");
    std::fs::write(&conf, "# comment\nport 0\nmaxmemory lots\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cinnabar"))
        .arg(&conf)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("at line 3") && err.contains(">>> 'maxmemory lots'"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);

    let v = Command::new(env!("CARGO_BIN_EXE_cinnabar"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("Cinnabar server v="));
}

#[test]
fn maxmemory_noeviction_and_lru_eviction() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["DEBUG", "POPULATE", "20000", "key", "100"]);
    c.cmd(&["CONFIG", "SET", "maxmemory", "1"]);
    assert_eq!(
        c.cmd(&["SET", "x", "y"]),
        "-OOM command not allowed when used memory > 'maxmemory'.\r\n"
    );
    assert_eq!(
        c.cmd(&["GET", "key:1"]),
        format!("$100\r\nvalue:1{}\r\n", "\0".repeat(93))
    );
    assert_eq!(
        c.cmd(&["DEL", "key:1"]),
        ":1\r\n",
        "commands that free memory still run"
    );

    // Under allkeys-lru the server evicts until it fits.
    let info = c.cmd(&["INFO", "memory"]);
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let limit = used - 1_000_000;
    c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    c.cmd(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    assert_eq!(c.cmd(&["SET", "x", "y"]), "+OK\r\n");
    let stats = c.cmd(&["INFO", "stats"]);
    let evicted: u64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("evicted_keys:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(evicted > 1000, "evicted {evicted}");
    let dbsize = c.cmd(&["DBSIZE"]);
    let n: u64 = dbsize.trim().trim_start_matches(':').parse().unwrap();
    assert!(n < 20000, "{n}");
    c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
}

#[test]
fn output_buffer_limit_closes_the_client() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let big = "x".repeat(4 << 20);
    assert_eq!(c.cmd(&["SET", "big", &big]), "+OK\r\n");
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1mb 0 0"
        ]),
        "+OK\r\n"
    );
    let mut victim = s.raw(2);
    victim.send(&["GET", "big"]);
    let mut buf = Vec::new();
    let _ = std::io::Read::read_to_end(&mut victim.stream, &mut buf);
    assert!(
        buf.len() < big.len(),
        "a reply over the hard limit is not sent"
    );
    let stats = c.cmd(&["INFO", "stats"]);
    assert!(
        stats.contains("client_output_buffer_limit_disconnections:1\r\n"),
        "{stats}"
    );
    assert_eq!(c.cmd(&["STRLEN", "big"]), ":4194304\r\n");
}

/// unit/type/string's "trim on SET with big value", which the suite runs only under
/// jemalloc: a value written after a bigger one is charged for its own size, not for
/// the buffer the bigger one's request was read into.
#[test]
fn a_value_written_after_a_bigger_one_costs_its_own_size() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let big = "A".repeat(100_000);
    let smaller = "A".repeat(33_000);
    assert_eq!(c.cmd(&["SET", "key", &big]), "+OK\r\n");
    assert_eq!(c.cmd(&["SET", "key", &smaller]), "+OK\r\n");
    let u = c.cmd(&["MEMORY", "USAGE", "key"]);
    let n: i64 = u.trim().trim_start_matches(':').parse().unwrap();
    assert!((33_000..42_000).contains(&n), "MEMORY USAGE {n}");
}
