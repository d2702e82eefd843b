//! FUNCTION libraries through every RDB path, as in Redis (`RDB_OPCODE_FUNCTION2`,
//! after the aux fields): SAVE/BGSAVE and a restart, the AOF base and its replay,
//! DEBUG RELOAD and its options, full syncs in both directions with Cinnabar and
//! redis-server, RDB files exchanged with redis-server, and `REPLCONF rdb-filter-only`
//! (`redis-cli --functions-rdb`). Differential parts skip where redis-server or
//! redis-cli is not installed.

mod common;

use common::*;
use std::io::{BufRead, Read};
use std::process::Command;

/// Long enough that the RDB string is LZF-compressed.
const LIB1: &str = "#!lua name=lib1\n\
    redis.register_function('incr1', function(keys, args) return redis.call('incr', keys[1]) end)\n\
    redis.register_function{function_name='echo1', callback=function(keys, args) return 'echo:' .. args[1] end, flags={'no-writes'}, description='reads only'}";
const LIB2: &str = "#!lua name=lib2\nredis.register_function('f2', function() return 2 end)";
/// A library of the replica's own, which a full sync must remove.
const LOCAL: &str =
    "#!lua name=local\nredis.register_function('mine', function() return 'mine' end)";

fn info(c: &mut RawConn, section: &str, field: &str) -> String {
    let text = c.cmd(&["INFO", section]);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.to_string()))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
}

fn libraries(c: &mut RawConn) -> String {
    c.cmd(&["FUNCTION", "LIST", "WITHCODE"])
}

/// What FUNCTION LIST WITHCODE answers with LIB1 and LIB2 loaded.
fn expected_both() -> String {
    let lib = |name: &str, funcs: &str, code: &str| {
        format!(
            "*8\r\n$12\r\nlibrary_name\r\n${}\r\n{name}\r\n$6\r\nengine\r\n$3\r\nLUA\r\n$9\r\nfunctions\r\n{funcs}$12\r\nlibrary_code\r\n${}\r\n{code}\r\n",
            name.len(),
            code.len()
        )
    };
    let f = |name: &str, desc: Option<&str>, flags: &[&str]| {
        let d = match desc {
            Some(d) => format!("${}\r\n{d}\r\n", d.len()),
            None => "$-1\r\n".into(),
        };
        let mut fl = format!("*{}\r\n", flags.len());
        for x in flags {
            fl.push_str(&format!("+{x}\r\n"));
        }
        format!(
            "*6\r\n$4\r\nname\r\n${}\r\n{name}\r\n$11\r\ndescription\r\n{d}$5\r\nflags\r\n{fl}",
            name.len()
        )
    };
    format!(
        "*2\r\n{}{}",
        lib(
            "lib1",
            &format!(
                "*2\r\n{}{}",
                f("echo1", Some("reads only"), &["no-writes"]),
                f("incr1", None, &[])
            ),
            LIB1
        ),
        lib("lib2", &format!("*1\r\n{}", f("f2", None, &[])), LIB2)
    )
}

fn load_both(c: &mut RawConn) {
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", LIB1]), "$4\r\nlib1\r\n");
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", LIB2]), "$4\r\nlib2\r\n");
}

fn assert_callable(c: &mut RawConn) {
    assert_eq!(c.cmd(&["FCALL_RO", "echo1", "0", "x"]), "$6\r\necho:x\r\n");
    assert_eq!(c.cmd(&["FCALL", "f2", "0"]), ":2\r\n");
}

fn wait_bgsave_done(c: &mut RawConn) {
    wait_until(|| info(c, "persistence", "rdb_bgsave_in_progress") == "0");
    assert_eq!(info(c, "persistence", "rdb_last_bgsave_status"), "ok");
}

#[test]
fn save_bgsave_and_shutdown_keep_libraries_across_restarts() {
    let dir = temp_dir("fn-save");
    let mut s = TestServer::start_in(&dir, &["--save", "", "--appendonly", "no"]);
    let mut c = s.raw(2);
    load_both(&mut c);
    assert_eq!(c.cmd(&["SET", "k", "v"]), "+OK\r\n");
    // The libraries come right after the aux fields, before the first SELECTDB.
    assert_eq!(c.cmd(&["CONFIG", "SET", "rdbcompression", "no"]), "+OK\r\n");
    assert_eq!(c.cmd(&["SAVE"]), "+OK\r\n");
    let file = std::fs::read(dir.join("dump.rdb")).unwrap();
    let find = |needle: &[u8]| file.windows(needle.len()).position(|w| w == needle);
    let aof_base = find(b"aof-base").unwrap();
    let lib1 = find(LIB1.as_bytes()).unwrap();
    let lib2 = find(LIB2.as_bytes()).unwrap();
    let select = find(&[254, 0, 251]).unwrap();
    assert!(aof_base < lib1 && lib1 < lib2 && lib2 < select);
    assert_eq!(file[lib1 - 3], 245);
    // Written again compressed for the restart.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "rdbcompression", "yes"]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd(&["SAVE"]), "+OK\r\n");
    drop(c);
    s.kill9();
    let s = TestServer::start_in(&dir, &["--save", "", "--appendonly", "no"]);
    let mut c = s.raw(2);
    assert_eq!(libraries(&mut c), expected_both());
    assert_callable(&mut c);
    assert_eq!(c.cmd(&["FCALL", "incr1", "1", "n"]), ":1\r\n");
    assert_eq!(c.cmd(&["GET", "k"]), "$1\r\nv\r\n");

    // BGSAVE writes them too (the copy-on-write snapshot's header).
    assert_eq!(c.cmd(&["FUNCTION", "DELETE", "lib2"]), "+OK\r\n");
    assert_eq!(c.cmd(&["BGSAVE"]), "+Background saving started\r\n");
    wait_bgsave_done(&mut c);
    drop(c);
    let mut s = s;
    s.kill9();
    let mut s = TestServer::start_in(&dir, &["--save", "", "--appendonly", "no"]);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["FCALL", "f2", "0"]), "-ERR Function not found\r\n");
    assert_eq!(c.cmd(&["FCALL", "incr1", "1", "n"]), ":2\r\n");

    // And the final save of SHUTDOWN SAVE.
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", LIB2]), "$4\r\nlib2\r\n");
    c.send(&["SHUTDOWN", "SAVE"]);
    assert_eq!(s.terminate(), Some(0));
    drop(c);
    let s = TestServer::start_in(&dir, &["--save", "", "--appendonly", "no"]);
    let mut c = s.raw(2);
    assert_eq!(libraries(&mut c), expected_both());
    drop(c);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn aof_base_and_incremental_file_restore_libraries() {
    let dir = temp_dir("fn-aof");
    let args = ["--appendonly", "yes", "--save", ""];
    let mut s = TestServer::start_in(&dir, &args);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", LIB1]), "$4\r\nlib1\r\n");
    assert_eq!(c.cmd(&["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]),
        "+Background append only file rewriting started\r\n"
    );
    wait_until(|| info(&mut c, "persistence", "aof_rewrite_in_progress") == "0");
    assert_eq!(
        info(&mut c, "persistence", "aof_last_bgrewrite_status"),
        "ok"
    );
    // After the rewrite: one library only in the base, one only in the incremental
    // file, and a deletion replayed from it.
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", LIB2]), "$4\r\nlib2\r\n");
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", LOCAL]), "$5\r\nlocal\r\n");
    assert_eq!(c.cmd(&["FUNCTION", "DELETE", "local"]), "+OK\r\n");
    let base = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".base.rdb"))
        .expect("an RDB base");
    let bytes = std::fs::read(base).unwrap();
    assert!(bytes.windows(4).any(|w| w == b"lib1"));
    // SAVE resets the change counter: it is not a change to log.
    assert_eq!(c.cmd(&["SAVE"]), "+OK\r\n");
    let incr = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .expect("an incremental file");
    let text = String::from_utf8_lossy(&std::fs::read(incr).unwrap()).into_owned();
    assert!(text.contains("$8\r\nFUNCTION\r\n$4\r\nLOAD\r\n"), "{text}");
    assert!(!text.contains("SAVE"), "{text}");
    drop(c);
    s.kill9();
    let s = TestServer::start_in(&dir, &args);
    let mut c = s.raw(2);
    assert_eq!(libraries(&mut c), expected_both());
    assert_callable(&mut c);
    assert_eq!(c.cmd(&["GET", "k"]), "$1\r\nv\r\n");
    drop(c);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn debug_reload_keeps_libraries_and_honours_its_options() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    load_both(&mut c);
    c.cmd(&["SET", "x", "1"]);
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), "+OK\r\n");
    assert_eq!(libraries(&mut c), expected_both());
    assert_callable(&mut c);
    // The file's libraries exist already: an error, nothing changes.
    let e = c.cmd(&["DEBUG", "RELOAD", "NOFLUSH"]);
    assert!(
        e.starts_with("-ERR Error trying to load the RDB dump"),
        "{e}"
    );
    assert_eq!(libraries(&mut c), expected_both());
    assert_eq!(c.cmd(&["DEBUG", "RELOAD", "NOFLUSH", "MERGE"]), "+OK\r\n");
    assert_eq!(libraries(&mut c), expected_both());
    // NOSAVE loads the file as it is: a library loaded since is gone.
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", LOCAL]), "$5\r\nlocal\r\n");
    c.cmd(&["SET", "later", "1"]);
    assert_eq!(c.cmd(&["DEBUG", "RELOAD", "NOSAVE"]), "+OK\r\n");
    assert_eq!(libraries(&mut c), expected_both());
    assert_eq!(c.cmd(&["EXISTS", "later"]), ":0\r\n");
    assert_eq!(
        c.cmd(&["DEBUG", "RELOAD", "bogus"]),
        "-ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.\r\n"
    );
}

fn link_up(port: u16) -> bool {
    let mut c = RawConn::connect(port, 2);
    c.cmd(&["INFO", "replication"])
        .contains("master_link_status:up")
}

fn offset(port: u16) -> String {
    let mut c = RawConn::connect(port, 2);
    info(&mut c, "replication", "master_repl_offset")
}

fn wait_synced(master: u16, replica: u16) {
    wait_until(|| link_up(replica) && offset(master) == offset(replica));
}

#[test]
fn cinnabar_replica_ends_with_exactly_the_masters_libraries() {
    let master = TestServer::start();
    let mut m = master.raw(2);
    load_both(&mut m);
    m.cmd(&["SET", "k", "v"]);
    let replica = TestServer::start();
    let mut r = replica.raw(2);
    assert_eq!(r.cmd(&["FUNCTION", "LOAD", LOCAL]), "$5\r\nlocal\r\n");
    assert_eq!(
        r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]),
        "+OK\r\n"
    );
    wait_synced(master.port, replica.port);
    assert_eq!(libraries(&mut r), expected_both());
    assert_eq!(r.cmd(&["FCALL_RO", "echo1", "0", "x"]), "$6\r\necho:x\r\n");
    assert_eq!(r.cmd(&["GET", "k"]), "$1\r\nv\r\n");
    // Later changes come through the stream.
    assert_eq!(m.cmd(&["FUNCTION", "DELETE", "lib2"]), "+OK\r\n");
    wait_synced(master.port, replica.port);
    assert_eq!(r.cmd(&["FCALL", "f2", "0"]), "-ERR Function not found\r\n");
}

#[test]
fn redis_server_replica_of_cinnabar_gets_the_libraries() {
    if !redis_server_available() {
        return;
    }
    let master = TestServer::start();
    let mut m = master.raw(2);
    load_both(&mut m);
    let replica = RedisServer::start();
    let mut r = replica.raw(2);
    r.cmd(&["FUNCTION", "LOAD", LOCAL]);
    assert_eq!(
        r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]),
        "+OK\r\n"
    );
    wait_synced(master.port, replica.port);
    // redis-server lists libraries in hash order: compare by calling them.
    assert_eq!(r.cmd(&["FCALL_RO", "echo1", "0", "x"]), "$6\r\necho:x\r\n");
    let lib2 = r.cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "lib2"]);
    assert!(lib2.contains("$2\r\nf2\r\n"), "{lib2}");
    assert_eq!(
        r.cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "local"]),
        "*0\r\n"
    );
}

#[test]
fn cinnabar_replica_of_redis_server_gets_the_libraries() {
    if !redis_server_available() {
        return;
    }
    let master = RedisServer::start();
    let mut m = master.raw(2);
    load_both(&mut m);
    m.cmd(&["SET", "k", "v"]);
    for diskless in ["yes", "no"] {
        m.cmd(&["CONFIG", "SET", "repl-diskless-sync", diskless]);
        m.cmd(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
        let replica = TestServer::start();
        let mut r = replica.raw(2);
        assert_eq!(r.cmd(&["FUNCTION", "LOAD", LOCAL]), "$5\r\nlocal\r\n");
        assert_eq!(
            r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]),
            "+OK\r\n"
        );
        wait_synced(master.port, replica.port);
        assert_eq!(libraries(&mut r), expected_both(), "diskless {diskless}");
        assert_callable_ro(&mut r);
    }
}

fn assert_callable_ro(c: &mut RawConn) {
    assert_eq!(c.cmd(&["FCALL_RO", "echo1", "0", "x"]), "$6\r\necho:x\r\n");
}

fn config_dir(c: &mut RawConn) -> std::path::PathBuf {
    let r = c.cmd(&["CONFIG", "GET", "dir"]);
    let dir = r.split("\r\n").nth(4).unwrap();
    std::path::PathBuf::from(dir)
}

#[test]
fn rdb_files_with_libraries_load_both_ways_with_redis_server() {
    if !redis_server_available() {
        return;
    }
    // redis-server's file → Cinnabar.
    let redis = RedisServer::start();
    let mut rc = redis.raw(2);
    load_both(&mut rc);
    rc.cmd(&["SET", "k", "v"]);
    assert_eq!(rc.cmd(&["SAVE"]), "+OK\r\n");
    let redis_dir = config_dir(&mut rc);
    let dir = temp_dir("fn-from-redis");
    std::fs::copy(redis_dir.join("dump.rdb"), dir.join("dump.rdb")).unwrap();
    let s = TestServer::start_in(&dir, &["--save", "", "--appendonly", "no"]);
    let mut c = s.raw(2);
    assert_eq!(libraries(&mut c), expected_both());
    assert_callable(&mut c);
    assert_eq!(c.cmd(&["GET", "k"]), "$1\r\nv\r\n");

    // Cinnabar's file → redis-server.
    assert_eq!(c.cmd(&["FUNCTION", "DELETE", "lib2"]), "+OK\r\n");
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", LOCAL]), "$5\r\nlocal\r\n");
    assert_eq!(c.cmd(&["SAVE"]), "+OK\r\n");
    std::fs::copy(dir.join("dump.rdb"), redis_dir.join("dump.rdb")).unwrap();
    assert_eq!(rc.cmd(&["DEBUG", "RELOAD", "NOSAVE"]), "+OK\r\n");
    assert_eq!(rc.cmd(&["FCALL", "mine", "0"]), "$4\r\nmine\r\n");
    assert_eq!(rc.cmd(&["FCALL", "f2", "0"]), "-ERR Function not found\r\n");
    assert_eq!(rc.cmd(&["FCALL_RO", "echo1", "0", "x"]), "$6\r\necho:x\r\n");
    assert_eq!(rc.cmd(&["GET", "k"]), "$1\r\nv\r\n");
    drop(c);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs the filtered-sync handshake by hand and returns the raw transfer.
fn filtered_sync(port: u16, capa_eof: bool) -> (String, Vec<u8>) {
    let mut c = RawConn::connect(port, 2);
    if capa_eof {
        assert_eq!(c.cmd(&["REPLCONF", "capa", "eof"]), "+OK\r\n");
    }
    assert_eq!(c.cmd(&["REPLCONF", "rdb-only", "1"]), "+OK\r\n");
    assert_eq!(
        c.cmd(&["REPLCONF", "rdb-filter-only", "functions"]),
        "+OK\r\n"
    );
    c.send(&["SYNC"]);
    let mut head = String::new();
    loop {
        head.clear();
        c.reader.read_line(&mut head).unwrap();
        if head != "\n" {
            break;
        }
    }
    let mut rest = Vec::new();
    if head.starts_with("$EOF:") {
        // Read to the close: rdb-only replicas are disconnected after the image.
        c.reader.read_to_end(&mut rest).unwrap();
    }
    (head, rest)
}

#[test]
fn rdb_filter_only_functions_sends_the_libraries_and_no_keys() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    load_both(&mut c);
    c.cmd(&["SET", "k", "v"]);
    c.check(&[
        (
            &["REPLCONF", "rdb-filter-only", "keys"],
            "-ERR Unsupported rdb-filter-only option: keys\r\n",
        ),
        (
            &["REPLCONF", "rdb-filter-only", "\"functions"],
            "-ERR Missing rdb-filter-only values\r\n",
        ),
        (
            &["REPLCONF", "rdb-only", "2"],
            "-ERR value is out of range, value must between 0 and 1\r\n",
        ),
    ]);
    let (head, _) = filtered_sync(s.port, false);
    assert_eq!(head, "-ERR Filtered replica requires EOF capability\r\n");
    let (head, body) = filtered_sync(s.port, true);
    let mark = head.trim_end().strip_prefix("$EOF:").unwrap().as_bytes();
    assert_eq!(mark.len(), 40);
    assert!(body.ends_with(mark));
    let image = &body[..body.len() - 40];
    // Load it: the libraries, no keys.
    let dir = temp_dir("fn-filtered");
    std::fs::write(dir.join("dump.rdb"), image).unwrap();
    let t = TestServer::start_in(&dir, &["--save", "", "--appendonly", "no"]);
    let mut tc = t.raw(2);
    assert_eq!(tc.cmd(&["DBSIZE"]), ":0\r\n");
    assert_eq!(libraries(&mut tc), expected_both());
    drop(tc);
    drop(t);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn redis_cli_functions_rdb_gets_the_libraries_only() {
    if Command::new("redis-cli").arg("--version").output().is_err() {
        eprintln!("redis-cli is not installed: skipping");
        return;
    }
    let s = TestServer::start();
    let mut c = s.raw(2);
    load_both(&mut c);
    c.cmd(&["SET", "k", "v"]);
    let dir = temp_dir("fn-cli");
    let out = Command::new("redis-cli")
        .args(["-p", &s.port.to_string(), "--functions-rdb"])
        .arg(dir.join("dump.rdb"))
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Transfer finished with success"), "{text}");
    let t = TestServer::start_in(&dir, &["--save", "", "--appendonly", "no"]);
    let mut tc = t.raw(2);
    assert_eq!(tc.cmd(&["DBSIZE"]), ":0\r\n");
    assert_eq!(libraries(&mut tc), expected_both());
    // The source keeps serving its own clients.
    assert_eq!(c.cmd(&["GET", "k"]), "$1\r\nv\r\n");
    drop(tc);
    drop(t);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_whose_library_cannot_be_created_is_refused_at_startup() {
    // Two libraries registering the same function name: Redis refuses the file.
    let s = TestServer::start_with(&["--rdbcompression", "no"]);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", LIB2]), "$4\r\nlib2\r\n");
    assert_eq!(c.cmd(&["SAVE"]), "+OK\r\n");
    let mut file = std::fs::read(s.dir.join("dump.rdb")).unwrap();
    drop(c);
    drop(s);
    // Rename the library inside the file (same length) and add it again: the
    // function name `f2` is then registered twice. The checksum is disabled (0).
    let at = file
        .windows(4)
        .position(|w| w == b"lib2")
        .expect("library name in the file");
    let start = file[..at].iter().rposition(|&b| b == 245).unwrap();
    let end = at + LIB2.len() - "#!lua name=".len();
    let mut copy = file[start..end].to_vec();
    let name_at = at - start;
    copy[name_at..name_at + 4].copy_from_slice(b"lib3");
    file.splice(end..end, copy);
    let n = file.len();
    file[n - 8..].copy_from_slice(&[0; 8]);
    let dir = temp_dir("fn-conflict");
    std::fs::write(dir.join("dump.rdb"), &file).unwrap();
    assert!(TestServer::try_start_in(&dir, &["--save", "", "--appendonly", "no"]).is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_version_12_file_with_libraries_loads_them() {
    // Redis 7.4 writes RDB version 12; its libraries are the same opcode 245 records.
    let s = TestServer::start_with(&["--save", "", "--appendonly", "no"]);
    let mut c = s.raw(2);
    load_both(&mut c);
    c.cmd(&["SET", "k", "v"]);
    assert_eq!(c.cmd(&["SAVE"]), "+OK\r\n");
    let mut file = std::fs::read(s.dir.join("dump.rdb")).unwrap();
    drop(c);
    drop(s);
    assert_eq!(&file[..9], b"REDIS0010");
    file[5..9].copy_from_slice(b"0012");
    let n = file.len();
    file[n - 8..].copy_from_slice(&[0; 8]);
    let dir = temp_dir("fn-v12");
    std::fs::write(dir.join("dump.rdb"), &file).unwrap();
    let t = TestServer::start_in(&dir, &["--save", "", "--appendonly", "no"]);
    let mut tc = t.raw(2);
    assert_eq!(libraries(&mut tc), expected_both());
    assert_eq!(tc.cmd(&["GET", "k"]), "$1\r\nv\r\n");
    drop(tc);
    drop(t);
    let _ = std::fs::remove_dir_all(&dir);
}
