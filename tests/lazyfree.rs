//! Lazy freeing as Redis 7.4 counts it: INFO's `lazyfree_pending_objects` and
//! `lazyfreed_objects` (reset by CONFIG RESETSTAT), values freed asynchronously only
//! when Redis would (UNLINK, DEL under lazyfree-lazy-user-del, a free effort above 64),
//! flushes counted per key, and FLUSHALL/FLUSHDB SYNC run as a blocking asynchronous
//! flush for ordinary clients (not inside MULTI/EXEC).

mod common;
use common::*;

fn info(c: &mut RawConn, field: &str) -> u64 {
    let info = c.cmd(&["INFO", "all"]);
    info.split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field}"))
        .parse()
        .unwrap()
}

/// Waits (bounded) until the lazy-free thread has nothing pending.
fn settle(s: &TestServer) {
    let mut c = s.raw(2);
    wait_until(|| info(&mut c, "lazyfree_pending_objects") == 0);
}

fn fill_set(c: &mut RawConn, key: &str, n: usize) {
    let members: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
    let mut args = vec!["SADD", key];
    args.extend(members.iter().map(|m| m.as_str()));
    assert_eq!(c.cmd(&args), format!(":{n}\r\n"));
}

#[test]
fn values_are_counted_when_redis_frees_them_asynchronously() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["CONFIG", "RESETSTAT"]);
    // UNLINK of a hashtable set of 1000 members: one object freed in the background.
    fill_set(&mut c, "big", 1000);
    assert_eq!(c.cmd(&["UNLINK", "big"]), ":1\r\n");
    settle(&s);
    assert_eq!(info(&mut c, "lazyfreed_objects"), 1);
    // DEL frees synchronously by default: not counted.
    fill_set(&mut c, "big", 1000);
    assert_eq!(c.cmd(&["DEL", "big"]), ":1\r\n");
    settle(&s);
    assert_eq!(info(&mut c, "lazyfreed_objects"), 1);
    // ... unless lazyfree-lazy-user-del.
    c.cmd(&["CONFIG", "SET", "lazyfree-lazy-user-del", "yes"]);
    fill_set(&mut c, "big", 1000);
    assert_eq!(c.cmd(&["DEL", "big"]), ":1\r\n");
    settle(&s);
    assert_eq!(info(&mut c, "lazyfreed_objects"), 2);
    c.cmd(&["CONFIG", "SET", "lazyfree-lazy-user-del", "no"]);
    // A listpack set is one allocation (free effort 1): freed in place even by UNLINK.
    fill_set(&mut c, "small", 100);
    assert_eq!(
        c.cmd(&["OBJECT", "ENCODING", "small"]),
        "$8\r\nlistpack\r\n"
    );
    assert_eq!(c.cmd(&["UNLINK", "small"]), ":1\r\n");
    settle(&s);
    assert_eq!(info(&mut c, "lazyfreed_objects"), 2);
    // A stream's effort is its nodes and its groups' PELs.
    c.cmd(&["CONFIG", "SET", "stream-node-max-entries", "5"]);
    for i in 1..=1000 {
        c.cmd(&["XADD", "st", &format!("{i}-0"), "f", "v"]);
    }
    c.cmd(&["XGROUP", "CREATE", "st", "g", "0"]);
    c.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "Alice",
        "COUNT",
        "2",
        "STREAMS",
        "st",
        ">",
    ]);
    assert_eq!(c.cmd(&["UNLINK", "st"]), ":1\r\n");
    c.cmd(&["XADD", "one", "1-0", "f", "v"]);
    c.cmd(&["XGROUP", "CREATE", "one", "g", "$"]);
    assert_eq!(c.cmd(&["UNLINK", "one"]), ":1\r\n");
    settle(&s);
    assert_eq!(info(&mut c, "lazyfreed_objects"), 3);
    // CONFIG RESETSTAT resets the freed count.
    c.cmd(&["CONFIG", "RESETSTAT"]);
    assert_eq!(info(&mut c, "lazyfreed_objects"), 0);
}

/// An expired value is freed as `lazyfree-lazy-expire` says, by the active expiry cycle
/// and by a lookup alike: counted only when lazy. (Big values leave the event loop
/// either way: expiring a million-member set stalled it for 15 ms before.)
#[test]
fn expired_values_are_counted_under_lazyfree_lazy_expire() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["CONFIG", "RESETSTAT"]);
    let expire_by_cycle = |c: &mut RawConn| {
        fill_set(c, "big", 1000);
        assert_eq!(c.cmd(&["PEXPIRE", "big", "1"]), ":1\r\n");
        wait_until(|| c.cmd(&["DBSIZE"]) == ":0\r\n");
        settle(&s);
    };
    expire_by_cycle(&mut c);
    assert_eq!(info(&mut c, "expired_keys"), 1);
    assert_eq!(info(&mut c, "lazyfreed_objects"), 0);
    c.cmd(&["CONFIG", "SET", "lazyfree-lazy-expire", "yes"]);
    expire_by_cycle(&mut c);
    assert_eq!(info(&mut c, "expired_keys"), 2);
    assert_eq!(info(&mut c, "lazyfreed_objects"), 1);
    // Expired on access, with the cycle off.
    assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "+OK\r\n");
    fill_set(&mut c, "big", 1000);
    assert_eq!(c.cmd(&["PEXPIRE", "big", "1"]), ":1\r\n");
    wait_until(|| c.cmd(&["PTTL", "big"]) == ":-2\r\n");
    assert_eq!(c.cmd(&["SCARD", "big"]), ":0\r\n");
    settle(&s);
    assert_eq!(info(&mut c, "expired_keys"), 3);
    assert_eq!(info(&mut c, "lazyfreed_objects"), 2);
}

#[test]
fn flushes_count_keys_and_sync_flushes_block_until_freed() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["CONFIG", "RESETSTAT"]);
    for i in 0..1000 {
        c.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    // FLUSHALL SYNC runs in the background, its client answered once that is done:
    // every key is counted by the time of the reply.
    assert_eq!(c.cmd(&["FLUSHALL"]), "+OK\r\n");
    assert_eq!(info(&mut c, "lazyfreed_objects"), 1000);
    assert_eq!(info(&mut c, "lazyfree_pending_objects"), 0);
    let stats = c.cmd(&["INFO", "commandstats"]);
    assert!(stats.contains("cmdstat_flushall:calls=1,"), "{stats}");

    // Pipelined commands after a blocking flush run after it, in order.
    c.cmd(&["CONFIG", "RESETSTAT"]);
    c.cmd(&["SET", "x", "1"]);
    c.cmd(&["SET", "y", "2"]);
    let mut p = s.raw(2);
    use std::io::Write;
    p.stream
        .write_all(b"FLUSHALL\r\nFLUSHALL\r\nFLUSHDB\r\nPING\r\n")
        .unwrap();
    for want in ["+OK\r\n", "+OK\r\n", "+OK\r\n", "+PONG\r\n"] {
        assert_eq!(p.read_reply(), want);
    }
    assert_eq!(info(&mut c, "lazyfreed_objects"), 2);

    // Inside MULTI/EXEC the flush is synchronous: nothing counted.
    c.cmd(&["CONFIG", "RESETSTAT"]);
    c.cmd(&["SET", "x", "11"]);
    c.cmd(&["SET", "y", "22"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["FLUSHALL"]);
    assert_eq!(c.cmd(&["EXEC"]), "*1\r\n+OK\r\n");
    assert_eq!(info(&mut c, "lazyfree_pending_objects"), 0);
    assert_eq!(info(&mut c, "lazyfreed_objects"), 0);

    // FLUSHDB ASYNC counts its keys once freed.
    c.cmd(&["SET", "a", "1"]);
    assert_eq!(c.cmd(&["FLUSHDB", "ASYNC"]), "+OK\r\n");
    settle(&s);
    assert_eq!(info(&mut c, "lazyfreed_objects"), 1);
}

#[test]
fn a_huge_command_leaves_no_memory_behind_once_its_value_is_unlinked() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let before = info(&mut c, "used_memory");
    fill_set(&mut c, "myset", 100_000);
    let peak = info(&mut c, "used_memory");
    assert!(peak > before + 1_000_000, "{before} {peak}");
    assert_eq!(c.cmd(&["UNLINK", "myset"]), ":1\r\n");
    // The set is freed in the background; the command's 100,000 argument slots were
    // released when it ran.
    wait_until(|| info(&mut c, "used_memory") < before + 500_000);
}

fn load_library(c: &mut RawConn, name: &str) {
    let code =
        format!("#!lua name={name}\nredis.register_function('{name}', function() return 1 end)");
    assert_eq!(
        c.cmd(&["FUNCTION", "LOAD", &code]),
        format!("${}\r\n{name}\r\n", name.len())
    );
}

/// FUNCTION FLUSH ASYNC frees a big functions VM in the background, counted as Redis
/// counts it (its functions plus one for the engine); the new VM serves at once.
#[test]
fn function_flush_async_frees_the_vm_in_the_background() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    for i in 0..100 {
        load_library(&mut c, &format!("lib{i}"));
    }
    c.cmd(&["CONFIG", "RESETSTAT"]);
    assert_eq!(c.cmd(&["FUNCTION", "FLUSH", "ASYNC"]), "+OK\r\n");
    load_library(&mut c, "after");
    assert_eq!(c.cmd(&["FCALL", "after", "0"]), ":1\r\n");
    settle(&s);
    assert_eq!(info(&mut c, "lazyfreed_objects"), 101);
    // 64 functions or fewer are freed in place, uncounted; so is FLUSH SYNC.
    assert_eq!(c.cmd(&["FUNCTION", "FLUSH", "ASYNC"]), "+OK\r\n");
    for i in 0..100 {
        load_library(&mut c, &format!("lib{i}"));
    }
    assert_eq!(c.cmd(&["FUNCTION", "FLUSH", "SYNC"]), "+OK\r\n");
    // With no option, lazyfree-lazy-user-flush decides.
    c.cmd(&["CONFIG", "SET", "lazyfree-lazy-user-flush", "yes"]);
    for i in 0..65 {
        load_library(&mut c, &format!("lib{i}"));
    }
    assert_eq!(c.cmd(&["FUNCTION", "FLUSH"]), "+OK\r\n");
    settle(&s);
    assert_eq!(info(&mut c, "lazyfreed_objects"), 101 + 66);
    assert_eq!(c.cmd(&["FUNCTION", "LIST"]), "*0\r\n");
}

/// SCRIPT FLUSH ASYNC does the same for the EVAL VM, counted per cached script.
#[test]
fn script_flush_async_frees_the_vm_in_the_background() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    for i in 0..100 {
        let r = c.cmd(&["SCRIPT", "LOAD", &format!("return {i}")]);
        assert!(r.starts_with("$40\r\n"), "{r}");
    }
    c.cmd(&["CONFIG", "RESETSTAT"]);
    assert_eq!(c.cmd(&["SCRIPT", "FLUSH", "ASYNC"]), "+OK\r\n");
    assert_eq!(c.cmd(&["EVAL", "return 7", "0"]), ":7\r\n");
    settle(&s);
    assert_eq!(info(&mut c, "lazyfreed_objects"), 100);
    // A small cache is freed in place.
    assert_eq!(c.cmd(&["SCRIPT", "FLUSH", "ASYNC"]), "+OK\r\n");
    settle(&s);
    assert_eq!(info(&mut c, "lazyfreed_objects"), 100);
}

/// Errorstats stops at 128 distinct codes and frees its table in the background, as
/// Redis's resetErrorTableStats (the suite reads the count of freed codes).
#[test]
fn errorstats_table_is_freed_in_the_background_at_its_limit() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["CONFIG", "RESETSTAT"]);
    let script = "return redis.error_reply(string.format('%s my error message', ARGV[1]))";
    for j in 1..=200 {
        let r = c.cmd(&["EVAL", script, "0", &j.to_string()]);
        assert_eq!(r, format!("-{j} my error message\r\n"));
    }
    settle(&s);
    assert_eq!(info(&mut c, "lazyfreed_objects"), 128);
    let stats = c.cmd(&["INFO", "errorstats"]);
    assert!(
        stats.contains("errorstat_ERRORSTATS_DISABLED:count=1\r\n"),
        "{stats}"
    );
}
