//! INFO: every field redis-server 7.0 reports in the server, clients, memory,
//! persistence, stats and cpu sections is reported here too (same names).

mod common;
use common::*;
use std::collections::BTreeSet;

fn fields(info: &str, section: &str) -> BTreeSet<String> {
    let mut cur = String::new();
    let mut out = BTreeSet::new();
    for line in info.lines() {
        if let Some(h) = line.strip_prefix("# ") {
            cur = h.to_ascii_lowercase();
        } else if cur == section {
            if let Some((k, _)) = line.split_once(':') {
                out.insert(k.to_string());
            }
        }
    }
    out
}

/// The body of a RESP2 bulk reply.
fn body(reply: &str) -> &str {
    reply.split_once("\r\n").map_or("", |(_, b)| b)
}

#[test]
fn field_sets_cover_redis() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start_with(&["--appendonly", "no"]);
    let r = RedisServer::start();
    let ours = s.raw(2).cmd(&["INFO", "everything"]);
    let theirs = r.raw(2).cmd(&["INFO", "everything"]);
    for section in ["server", "clients", "memory", "persistence", "stats", "cpu"] {
        let a = fields(body(&ours), section);
        let b = fields(body(&theirs), section);
        let missing: Vec<_> = b.difference(&a).collect();
        assert!(missing.is_empty(), "{section}: missing {missing:?}");
    }
}

#[test]
fn kbps_and_main_thread_cpu_have_values() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let info = c.cmd(&["INFO", "everything"]);
    for f in [
        "instantaneous_input_kbps:",
        "instantaneous_output_kbps:",
        "used_cpu_user_main_thread:",
        "mem_aof_buffer:",
        "sync_full:0\r\n",
        "io_threaded_reads_processed:",
    ] {
        assert!(info.contains(f), "{f}");
    }
}

/// Each field appears once in INFO everything, and the socket read/write counters
/// move with traffic.
#[test]
fn fields_are_unique_and_io_counters_count() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let info = c.cmd(&["INFO", "everything"]);
    let mut seen = BTreeSet::new();
    for line in body(&info).lines() {
        if let Some((k, _)) = line.split_once(':') {
            assert!(seen.insert(k.to_string()), "duplicate field {k}");
        }
    }
    let count = |info: &str, f: &str| -> u64 {
        let line = info.lines().find(|l| l.starts_with(f)).expect(f);
        line[f.len() + 1..].parse().unwrap()
    };
    let (r0, w0) = (
        count(&info, "total_reads_processed"),
        count(&info, "total_writes_processed"),
    );
    for _ in 0..5 {
        c.cmd(&["PING"]);
    }
    let info = c.cmd(&["INFO", "stats"]);
    assert!(count(&info, "total_reads_processed") >= r0 + 6);
    assert!(count(&info, "total_writes_processed") >= w0 + 5);
}

fn field(info: &str, name: &str) -> String {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name}"))
        .to_string()
}

fn num(info: &str, name: &str) -> i64 {
    field(info, name)
        .trim_end_matches('%')
        .parse::<f64>()
        .unwrap_or_else(|_| panic!("{name}")) as i64
}

/// The overhead/dataset split is computed, not constant: startup memory is below
/// used memory, overhead + dataset = used memory, and the key table's overhead
/// grows with keys.
#[test]
fn memory_overhead_and_dataset_are_real() {
    let s = TestServer::start_with(&["--appendonly", "no"]);
    let mut c = s.raw(2);
    let before = c.cmd(&["INFO", "memory"]);
    assert!(num(&before, "used_memory_startup") > 0);
    assert!(num(&before, "used_memory_startup") <= num(&before, "used_memory"));
    assert_eq!(c.cmd(&["DEBUG", "POPULATE", "20000"]), "+OK\r\n");
    let after = c.cmd(&["INFO", "memory"]);
    let used = num(&after, "used_memory");
    let overhead = num(&after, "used_memory_overhead");
    let dataset = num(&after, "used_memory_dataset");
    // Read at slightly different instants within one INFO: allow a little drift.
    assert!((overhead + dataset - used).abs() < 64 << 10, "{after}");
    // 20000 keys: at least their bucket slots and entry headers are overhead.
    assert!(overhead - num(&before, "used_memory_overhead") >= 20000 * 13);
    assert!(dataset > num(&before, "used_memory_dataset"));
    let perc = field(&after, "used_memory_dataset_perc");
    assert!(perc.ends_with('%') && perc != "100.00%", "{perc}");
    assert!(num(&after, "mem_clients_normal") > 0);
    assert!(num(&after, "allocator_active") > 0);
    let rss = num(&after, "used_memory_rss");
    let ratio: f64 = field(&after, "mem_fragmentation_ratio").parse().unwrap();
    assert!((ratio - rss as f64 / used as f64).abs() < 0.1, "{ratio}");
}

/// Script and function caches, and the Lua VMs behind them.
#[test]
fn script_memory_fields() {
    let s = TestServer::start_with(&["--appendonly", "no"]);
    let mut c = s.raw(2);
    let info = c.cmd(&["INFO", "memory"]);
    assert_eq!(field(&info, "number_of_cached_scripts"), "0");
    c.cmd(&["EVAL", "return 1", "0"]);
    c.cmd(&["SCRIPT", "LOAD", "return 2"]);
    let lib = "#!lua name=mylib\nredis.register_function('f1', function() return 1 end)\nredis.register_function('f2', function() return 2 end)";
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", lib]), "$5\r\nmylib\r\n");
    let info = c.cmd(&["INFO", "memory"]);
    assert_eq!(field(&info, "number_of_cached_scripts"), "2");
    assert_eq!(field(&info, "number_of_functions"), "2");
    assert_eq!(field(&info, "number_of_libraries"), "1");
    let eval_vm = num(&info, "used_memory_vm_eval");
    let fn_vm = num(&info, "used_memory_vm_functions");
    assert!(eval_vm > 0 && fn_vm > 0);
    assert_eq!(num(&info, "used_memory_lua"), eval_vm);
    assert_eq!(num(&info, "used_memory_vm_total"), eval_vm + fn_vm);
    let scripts_eval = num(&info, "used_memory_scripts_eval");
    let functions = num(&info, "used_memory_functions");
    assert!(scripts_eval > 0 && functions as usize > lib.len());
    assert_eq!(num(&info, "used_memory_scripts"), scripts_eval + functions);
    c.cmd(&["SCRIPT", "FLUSH"]);
    let info = c.cmd(&["INFO", "memory"]);
    assert_eq!(field(&info, "number_of_cached_scripts"), "0");
}

/// Blocking keys as Redis counts them: WAITAOF blocks on no key; XREADGROUP's keys
/// also count as "on nokey" (woken when the key is deleted).
#[test]
fn blocking_key_counts() {
    let s = TestServer::start_with(&["--appendonly", "yes", "--appendfsync", "no"]);
    let mut admin = s.raw(2);
    admin.cmd(&["XADD", "st", "1-1", "f", "v"]);
    admin.cmd(&["XGROUP", "CREATE", "st", "g", "$"]);
    let mut a = s.raw(2);
    a.send(&["BLPOP", "l1", "l2", "0"]);
    let mut b = s.raw(2);
    b.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "st",
        ">",
    ]);
    let mut w = s.raw(2);
    w.cmd(&["SET", "x", "1"]);
    w.send(&["WAITAOF", "1", "0", "0"]);
    wait_blocked(&s, 3);
    let info = admin.cmd(&["INFO", "clients"]);
    assert_eq!(field(&info, "blocked_clients"), "3");
    assert_eq!(field(&info, "total_blocking_keys"), "3");
    assert_eq!(field(&info, "total_blocking_keys_on_nokey"), "1");
}

/// MEMORY STATS carries Redis 7.4's keys in its order (db.N for non-empty
/// databases), with numbers that add up; DOCTOR, MALLOC-STATS and PURGE answer as
/// Redis built without jemalloc does.
#[test]
fn memory_subcommands() {
    let s = TestServer::start_with(&["--appendonly", "no"]);
    let mut c = s.raw(2);
    c.cmd(&["SET", "a", "1"]);
    c.cmd(&["SET", "b", "2", "EX", "100"]);
    c.cmd(&["SELECT", "3"]);
    c.cmd(&["SET", "c", "3"]);
    let mut r3 = s.client3();
    let stats: Vec<(String, redis::Value)> = redis::cmd("MEMORY")
        .arg("STATS")
        .query::<redis::Value>(&mut r3)
        .map(|v| match v {
            redis::Value::Map(m) => m
                .into_iter()
                .map(|(k, v)| (redis::from_redis_value::<String>(k).unwrap(), v))
                .collect(),
            other => panic!("{other:?}"),
        })
        .unwrap();
    let keys: Vec<&str> = stats.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "peak.allocated",
            "total.allocated",
            "startup.allocated",
            "replication.backlog",
            "clients.slaves",
            "clients.normal",
            "cluster.links",
            "aof.buffer",
            "lua.caches",
            "functions.caches",
            "db.0",
            "db.3",
            "overhead.db.hashtable.lut",
            "overhead.db.hashtable.rehashing",
            "overhead.total",
            "db.dict.rehashing.count",
            "keys.count",
            "keys.bytes-per-key",
            "dataset.bytes",
            "dataset.percentage",
            "peak.percentage",
            "allocator.allocated",
            "allocator.active",
            "allocator.resident",
            "allocator.muzzy",
            "allocator-fragmentation.ratio",
            "allocator-fragmentation.bytes",
            "allocator-rss.ratio",
            "allocator-rss.bytes",
            "rss-overhead.ratio",
            "rss-overhead.bytes",
            "fragmentation",
            "fragmentation.bytes",
        ]
    );
    let get = |k: &str| stats.iter().find(|(n, _)| n == k).unwrap().1.clone();
    let int = |k: &str| match get(k) {
        redis::Value::Int(n) => n,
        other => panic!("{k}: {other:?}"),
    };
    assert_eq!(int("keys.count"), 3);
    assert_eq!(
        int("overhead.total") + int("dataset.bytes"),
        int("total.allocated")
    );
    assert!(int("startup.allocated") > 0);
    assert!(matches!(get("dataset.percentage"), redis::Value::Double(_)));
    assert!(matches!(get("fragmentation"), redis::Value::Double(_)));
    match get("db.0") {
        redis::Value::Map(m) => {
            let f: Vec<(String, i64)> = m
                .into_iter()
                .map(|(k, v)| {
                    (
                        redis::from_redis_value::<String>(k).unwrap(),
                        redis::from_redis_value::<i64>(v).unwrap(),
                    )
                })
                .collect();
            assert_eq!(f[0].0, "overhead.hashtable.main");
            assert!(f[0].1 > 0);
            // One key with an expiry: its 8-byte deadline.
            assert_eq!(f[1], ("overhead.hashtable.expires".to_string(), 8));
        }
        other => panic!("{other:?}"),
    }
    // RESP2: doubles are bulk strings.
    let r2 = c.cmd(&["MEMORY", "STATS"]);
    assert!(r2.starts_with("*66\r\n$14\r\npeak.allocated\r\n:"), "{r2}");
    // A small instance: Redis's "empty" report, verbatim text in RESP3.
    assert_eq!(
        c.cmd(&["MEMORY", "DOCTOR"]),
        "$268\r\nHi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n\r\n"
    );
    let mut c3 = s.raw(3);
    assert!(c3
        .cmd(&["MEMORY", "DOCTOR"])
        .starts_with("=272\r\ntxt:Hi Sam"));
    assert_eq!(
        c.cmd(&["MEMORY", "MALLOC-STATS"]),
        "$45\r\nStats not supported for the current allocator\r\n"
    );
    assert_eq!(c.cmd(&["MEMORY", "PURGE"]), "+OK\r\n");
}

/// BGREWRITEAOF records how long it took; none in progress reads -1.
#[test]
fn aof_rewrite_times() {
    let s = TestServer::start_with(&["--appendonly", "yes"]);
    let mut c = s.raw(2);
    let info = c.cmd(&["INFO", "persistence"]);
    assert_eq!(field(&info, "aof_current_rewrite_time_sec"), "-1");
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&["BGREWRITEAOF"]);
    wait_until(|| {
        let info = c.cmd(&["INFO", "persistence"]);
        field(&info, "aof_rewrite_in_progress") == "0" && field(&info, "aof_rewrites") != "0"
    });
    let info = c.cmd(&["INFO", "persistence"]);
    assert_eq!(field(&info, "aof_last_rewrite_time_sec"), "0");
    assert_eq!(field(&info, "aof_current_rewrite_time_sec"), "-1");
}

/// INFO ERRORSTATS tracks at most 128 distinct codes: the 129th drops the table for
/// one ERRORSTATS_DISABLED line (logged once) until CONFIG RESETSTAT.
#[test]
fn errorstats_stop_after_128_codes() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let script = "return redis.error_reply(ARGV[1] .. ' my error')";
    for i in 1..=129 {
        assert_eq!(
            c.cmd(&["EVAL", script, "0", &format!("E{i}")]),
            format!("-E{i} my error\r\n")
        );
    }
    c.cmd(&["EVAL", script, "0", "E1"]);
    let stats = c.cmd(&["INFO", "errorstats"]);
    assert!(
        stats.contains("errorstat_ERRORSTATS_DISABLED:count=1\r\n"),
        "{stats}"
    );
    assert!(!stats.contains("errorstat_E1:"), "{stats}");
    assert!(c
        .cmd(&["INFO", "stats"])
        .contains("total_error_replies:130\r\n"));
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), "+OK\r\n");
    c.cmd(&["EVAL", script, "0", "E1"]);
    let stats = c.cmd(&["INFO", "errorstats"]);
    assert!(stats.contains("errorstat_E1:count=1\r\n"), "{stats}");
    assert!(!stats.contains("ERRORSTATS_DISABLED"), "{stats}");
}

/// A key table's sizes follow Redis's dict: four slots for the first key, a resize to
/// eight at the fifth, visible in INFO memory and MEMORY STATS while the old array
/// still holds keys (read inside the transaction that started it).
#[test]
fn a_resize_in_progress_shows_in_memory_reports() {
    let s = TestServer::start_with(&["--appendonly", "no"]);
    let mut r = s.client();
    let stat = |r: &mut redis::Connection, name: &str| -> i64 {
        let v: Vec<redis::Value> = redis::cmd("MEMORY").arg("STATS").query(r).unwrap();
        let i = v
            .iter()
            .position(|x| {
                redis::from_redis_value::<String>(x.clone()).ok().as_deref() == Some(name)
            })
            .unwrap_or_else(|| panic!("no {name}"));
        redis::from_redis_value(v[i + 1].clone()).unwrap()
    };
    let _: () = redis::cmd("SET").arg("a").arg("b").query(&mut r).unwrap();
    let info: String = redis::cmd("INFO").arg("memory").query(&mut r).unwrap();
    assert_eq!(num(&info, "mem_overhead_db_hashtable_rehashing"), 0);
    assert_eq!(stat(&mut r, "overhead.db.hashtable.lut"), 4 * 8);
    assert_eq!(stat(&mut r, "db.dict.rehashing.count"), 0);
    let (info, stats): (String, Vec<redis::Value>) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("b")
        .arg("c")
        .ignore()
        .cmd("SET")
        .arg("c")
        .arg("d")
        .ignore()
        .cmd("SET")
        .arg("d")
        .arg("e")
        .ignore()
        .cmd("SET")
        .arg("e")
        .arg("f")
        .ignore()
        .cmd("INFO")
        .arg("memory")
        .cmd("MEMORY")
        .arg("STATS")
        .query(&mut r)
        .unwrap();
    assert_eq!(num(&info, "mem_overhead_db_hashtable_rehashing"), 4 * 8);
    let get = |name: &str| -> i64 {
        let i = stats
            .iter()
            .position(|x| {
                redis::from_redis_value::<String>(x.clone()).ok().as_deref() == Some(name)
            })
            .unwrap();
        redis::from_redis_value(stats[i + 1].clone()).unwrap()
    };
    assert_eq!(get("overhead.db.hashtable.lut"), (4 + 8) * 8);
    assert_eq!(get("overhead.db.hashtable.rehashing"), 4 * 8);
    assert_eq!(get("db.dict.rehashing.count"), 1);
}

/// Every read and every reply written counts once (total_reads_processed,
/// total_writes_processed) and byte for byte (total_net_input_bytes,
/// total_net_output_bytes), on the usual one-read and one-write paths and when a
/// reply goes out in pieces as a slow reader makes room: INFO's own reply is counted
/// before the next INFO is answered.
#[test]
fn output_counters_count_every_write_and_byte() {
    let s = TestServer::start_with(&["--appendonly", "no"]);
    let mut c = s.raw(2);
    let stat = |info: &str, name: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .unwrap_or_else(|| panic!("{name}"))
            .trim()
            .parse()
            .unwrap()
    };
    let first = c.cmd(&["INFO", "stats"]);
    for _ in 0..10 {
        assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    }
    let second = c.cmd(&["INFO", "stats"]);
    assert_eq!(
        stat(&second, "total_writes_processed") - stat(&first, "total_writes_processed"),
        11
    );
    assert_eq!(
        stat(&second, "total_net_output_bytes") - stat(&first, "total_net_output_bytes"),
        first.len() as u64 + 10 * 7
    );
    // And each request was one read, counted with its bytes (the second INFO's too).
    let ping = "*1\r\n$4\r\nPING\r\n".len() as u64;
    let info = "*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n".len() as u64;
    assert_eq!(
        stat(&second, "total_reads_processed") - stat(&first, "total_reads_processed"),
        11
    );
    assert_eq!(
        stat(&second, "total_net_input_bytes") - stat(&first, "total_net_input_bytes"),
        10 * ping + info
    );

    // A reply bigger than a socket usually takes at once, read only after a pause
    // (written in pieces as the reader makes room): every byte counted once, and the
    // small reply behind it follows it in order.
    let big = "x".repeat(8 << 20);
    assert_eq!(c.cmd(&["SET", "big", &big]), "+OK\r\n");
    let before = c.cmd(&["INFO", "stats"]);
    c.send(&["GET", "big"]);
    c.send(&["PING"]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(c.read_reply(), format!("${}\r\n{big}\r\n", big.len()));
    assert_eq!(c.read_reply(), "+PONG\r\n");
    let after = c.cmd(&["INFO", "stats"]);
    assert_eq!(
        stat(&after, "total_net_output_bytes") - stat(&before, "total_net_output_bytes"),
        before.len() as u64 + (big.len() + 12) as u64 + 7
    );
    assert!(stat(&after, "total_writes_processed") > stat(&before, "total_writes_processed"));
}
