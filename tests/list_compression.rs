//! Lists under `list-compress-depth`: every list command answers as on an uncompressed
//! list (checked against a Vec model across depths, fills and plain-node thresholds),
//! interior nodes really are compressed (MEMORY USAGE, DEBUG OBJECT), and compressed
//! lists survive SAVE, DEBUG RELOAD and the trip to and from redis-server's RDB files.

mod common;
use common::*;

/// A small deterministic generator (xorshift), so that failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Integers (stored in binary), short strings and long compressible strings.
fn element(r: &mut Rng) -> String {
    match r.below(4) {
        0 => (r.below(20000) as i64 - 10000).to_string(),
        1 => format!("e{}", r.below(30)),
        2 => format!("{}-{}", "x".repeat(r.below(300) as usize), r.below(5)),
        _ => format!("v{}", r.below(1000)),
    }
}

fn norm(i: i64, len: usize) -> i64 {
    if i < 0 {
        len as i64 + i
    } else {
        i
    }
}

fn lrange(c: &mut redis::Connection, key: &str) -> Vec<String> {
    redis::cmd("LRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query(c)
        .unwrap()
}

/// Runs a random mix of every list command on `key`, checking each reply and the
/// whole list against a Vec.
fn exercise(c: &mut redis::Connection, key: &str, seed: u64, steps: usize) {
    let mut r = Rng(seed);
    let mut m: Vec<String> = Vec::new();
    for step in 0..steps {
        let ctx = format!("seed {seed} step {step}");
        match r.below(12) {
            0 | 1 => {
                let n = 1 + r.below(20) as usize;
                let items: Vec<String> = (0..n).map(|_| element(&mut r)).collect();
                let head = r.below(2) == 0;
                let len: usize = redis::cmd(if head { "LPUSH" } else { "RPUSH" })
                    .arg(key)
                    .arg(&items)
                    .query(c)
                    .unwrap();
                for it in items {
                    if head {
                        m.insert(0, it);
                    } else {
                        m.push(it);
                    }
                }
                assert_eq!(len, m.len(), "{ctx}");
            }
            2 => {
                let n = r.below(4) as usize;
                let head = r.below(2) == 0;
                let got: Option<Vec<String>> = redis::cmd(if head { "LPOP" } else { "RPOP" })
                    .arg(key)
                    .arg(n.max(1))
                    .query(c)
                    .unwrap();
                let k = n.max(1).min(m.len());
                let want: Vec<String> = if head {
                    m.drain(..k).collect()
                } else {
                    let mut t: Vec<String> = m.drain(m.len() - k..).collect();
                    t.reverse();
                    t
                };
                assert_eq!(got.unwrap_or_default(), want, "{ctx}");
            }
            3 => {
                let i = r.below(2 * m.len() as u64 + 2) as i64 - m.len() as i64 - 1;
                let got: Option<String> = redis::cmd("LINDEX").arg(key).arg(i).query(c).unwrap();
                let n = norm(i, m.len());
                let want = (n >= 0 && (n as usize) < m.len()).then(|| m[n as usize].clone());
                assert_eq!(got, want, "{ctx} LINDEX {i}");
            }
            4 => {
                if m.is_empty() {
                    continue;
                }
                let i = r.below(m.len() as u64) as i64
                    - if r.below(2) == 0 { 0 } else { m.len() as i64 };
                let v = element(&mut r);
                let ok: String = redis::cmd("LSET").arg(key).arg(i).arg(&v).query(c).unwrap();
                assert_eq!(ok, "OK", "{ctx}");
                let at = norm(i, m.len()) as usize;
                m[at] = v;
            }
            5 => {
                let pivot = if m.is_empty() || r.below(5) == 0 {
                    "missing".to_string()
                } else {
                    m[r.below(m.len() as u64) as usize].clone()
                };
                let after = r.below(2) == 0;
                let v = element(&mut r);
                let got: i64 = redis::cmd("LINSERT")
                    .arg(key)
                    .arg(if after { "AFTER" } else { "BEFORE" })
                    .arg(&pivot)
                    .arg(&v)
                    .query(c)
                    .unwrap();
                match m.iter().position(|x| *x == pivot) {
                    Some(at) => {
                        m.insert(if after { at + 1 } else { at }, v);
                        assert_eq!(got, m.len() as i64, "{ctx}");
                    }
                    None if m.is_empty() => assert_eq!(got, 0, "{ctx}"),
                    None => assert_eq!(got, -1, "{ctx}"),
                }
            }
            6 => {
                let count = r.below(5) as i64 - 2;
                let v = if m.is_empty() || r.below(3) == 0 {
                    element(&mut r)
                } else {
                    m[r.below(m.len() as u64) as usize].clone()
                };
                let got: usize = redis::cmd("LREM")
                    .arg(key)
                    .arg(count)
                    .arg(&v)
                    .query(c)
                    .unwrap();
                let limit = if count == 0 {
                    usize::MAX
                } else {
                    count.unsigned_abs() as usize
                };
                let mut k = 0;
                if count >= 0 {
                    let mut i = 0;
                    while i < m.len() && k < limit {
                        if m[i] == v {
                            m.remove(i);
                            k += 1;
                        } else {
                            i += 1;
                        }
                    }
                } else {
                    let mut i = m.len();
                    while i > 0 && k < limit {
                        i -= 1;
                        if m[i] == v {
                            m.remove(i);
                            k += 1;
                        }
                    }
                }
                assert_eq!(got, k, "{ctx}");
            }
            7 => {
                // Mostly gentle trims, so the list keeps growing.
                let len = m.len() as i64;
                let (a, b) = (r.below(3) as i64, -1 - r.below(3) as i64);
                let ok: String = redis::cmd("LTRIM").arg(key).arg(a).arg(b).query(c).unwrap();
                assert_eq!(ok, "OK", "{ctx}");
                let e = norm(b, m.len());
                if a > e || a >= len || e < 0 {
                    m.clear();
                } else {
                    m = m[a as usize..=(e.min(len - 1) as usize)].to_vec();
                }
            }
            8 => {
                let s = r.below(m.len() as u64 + 2) as i64;
                let e = s + r.below(50) as i64;
                let got: Vec<String> = redis::cmd("LRANGE")
                    .arg(key)
                    .arg(s)
                    .arg(e)
                    .query(c)
                    .unwrap();
                let want: Vec<String> = m
                    .iter()
                    .skip(s as usize)
                    .take((e - s + 1) as usize)
                    .cloned()
                    .collect();
                assert_eq!(got, want, "{ctx} LRANGE {s} {e}");
                // The same window from the tail.
                let (ns, ne) = (-e - 1, -s - 1);
                let got: Vec<String> = redis::cmd("LRANGE")
                    .arg(key)
                    .arg(ns)
                    .arg(ne)
                    .query(c)
                    .unwrap();
                let len = m.len() as i64;
                let (fs, fe) = ((len + ns).max(0), len + ne);
                let want: Vec<String> = if fe < fs {
                    vec![]
                } else {
                    m[fs as usize..=(fe as usize).min(m.len().saturating_sub(1))].to_vec()
                };
                assert_eq!(got, want, "{ctx} LRANGE {ns} {ne}");
            }
            9 => {
                let v = if m.is_empty() || r.below(4) == 0 {
                    element(&mut r)
                } else {
                    m[r.below(m.len() as u64) as usize].clone()
                };
                let rank: i64 = if r.below(2) == 0 { 1 } else { -1 };
                let got: Vec<i64> = redis::cmd("LPOS")
                    .arg(key)
                    .arg(&v)
                    .arg("RANK")
                    .arg(rank)
                    .arg("COUNT")
                    .arg(0)
                    .query(c)
                    .unwrap();
                let mut want: Vec<i64> = m
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| **x == v)
                    .map(|(i, _)| i as i64)
                    .collect();
                if rank < 0 {
                    want.reverse();
                }
                assert_eq!(got, want, "{ctx}");
            }
            10 => {
                // Rotation through LMOVE on the same key.
                let got: Option<String> = redis::cmd("LMOVE")
                    .arg(key)
                    .arg(key)
                    .arg("RIGHT")
                    .arg("LEFT")
                    .query(c)
                    .unwrap();
                if let Some(v) = m.pop() {
                    m.insert(0, v.clone());
                    assert_eq!(got, Some(v), "{ctx}");
                } else {
                    assert_eq!(got, None, "{ctx}");
                }
            }
            _ => {
                let len: usize = redis::cmd("LLEN").arg(key).query(c).unwrap();
                assert_eq!(len, m.len(), "{ctx}");
            }
        }
        if step % 50 == 49 {
            assert_eq!(lrange(c, key), m, "{ctx}: whole list");
        }
    }
    assert_eq!(lrange(c, key), m, "seed {seed}: final list");
}

#[test]
fn compressed_lists_answer_every_command_like_a_vec() {
    let s = TestServer::start_with(&["--save", "", "--appendonly", "no"]);
    let mut c = s.client();
    let mut seed = 1;
    for threshold in ["0", "200b"] {
        run(&mut c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", threshold]);
        for fill in ["-1", "4", "16"] {
            for depth in ["0", "1", "2"] {
                run(&mut c, &["CONFIG", "SET", "list-max-listpack-size", fill]);
                run(&mut c, &["CONFIG", "SET", "list-compress-depth", depth]);
                run(&mut c, &["DEL", "l"]);
                seed += 1;
                exercise(&mut c, "l", seed * 7919, 400);
            }
        }
    }
    run(&mut c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0"]);
}

/// Builds a quicklist of many compressible elements, plus some plain nodes.
fn fill_list(c: &mut redis::Connection, key: &str) -> Vec<String> {
    let mut want = Vec::new();
    for i in 0..3000 {
        want.push(format!("element-{i}-{}", "abc".repeat(10)));
    }
    for chunk in want.chunks(500) {
        let _: usize = redis::cmd("RPUSH").arg(key).arg(chunk).query(c).unwrap();
    }
    // Plain nodes (elements over the 8 kB node limit), compressible too.
    for i in 0..3 {
        let big = format!("{i}{}", "p".repeat(10000));
        let _: usize = redis::cmd("LINSERT")
            .arg(key)
            .arg("BEFORE")
            .arg("element-1500-abcabcabcabcabcabcabcabcabcabc")
            .arg(&big)
            .query(c)
            .unwrap();
        let at = want
            .iter()
            .position(|x| x == "element-1500-abcabcabcabcabcabcabcabcabcabc")
            .unwrap();
        want.insert(at, big);
    }
    want
}

fn memory_usage(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query(c)
        .unwrap()
}

fn debug_object(c: &mut redis::Connection, key: &str) -> String {
    redis::cmd("DEBUG").arg("OBJECT").arg(key).query(c).unwrap()
}

fn field(text: &str, name: &str) -> String {
    text.split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .to_string()
}

#[test]
fn interior_nodes_are_compressed_and_memory_shows_it() {
    let s = TestServer::start_with(&["--save", "", "--appendonly", "no"]);
    let mut c = s.client();
    let want = fill_list(&mut c, "flat");
    let flat = memory_usage(&mut c, "flat");
    let info = debug_object(&mut c, "flat");
    assert_eq!(field(&info, "ql_compressed"), "0");
    assert_eq!(field(&info, "ql_listpack_max"), "-2");
    run(&mut c, &["CONFIG", "SET", "list-compress-depth", "1"]);
    fill_list(&mut c, "packed");
    let packed = memory_usage(&mut c, "packed");
    assert!(packed * 3 < flat, "compressed {packed} vs {flat}");
    let info = debug_object(&mut c, "packed");
    assert_eq!(field(&info, "ql_compressed"), "1");
    // The uncompressed size is the same whatever the depth.
    assert_eq!(
        field(&info, "ql_uncompressed_size"),
        field(&debug_object(&mut c, "flat"), "ql_uncompressed_size")
    );
    assert_eq!(
        field(&info, "ql_nodes"),
        field(&debug_object(&mut c, "flat"), "ql_nodes")
    );
    assert_eq!(lrange(&mut c, "packed"), want);
    // Exact replies from a compressed node, in both protocols.
    let rows: &[(&[&str], &str)] = &[
        (
            &["LINDEX", "packed", "1000"],
            "$43\r\nelement-1000-abcabcabcabcabcabcabcabcabcabc\r\n",
        ),
        (
            &[
                "LPOS",
                "packed",
                "element-2000-abcabcabcabcabcabcabcabcabcabc",
            ],
            ":2003\r\n",
        ),
        (&["LLEN", "packed"], ":3003\r\n"),
        (
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "5gb"],
            "-ERR argument must be a memory value bigger than 1 and smaller than 4gb\r\n",
        ),
        (
            &["DEBUG", "QUICKLIST", "packed"],
            "+Quicklist structure printed on stdout\r\n",
        ),
        (
            &["DEBUG", "LISTPACK", "packed"],
            "-ERR Not a listpack encoded object.\r\n",
        ),
        (&["DEBUG", "QUICKLIST", "nokey"], "-ERR no such key\r\n"),
    ];
    for proto in [2, 3] {
        s.raw(proto).check(rows);
    }
    // Changes deep inside compressed nodes.
    run(&mut c, &["LSET", "packed", "1200", "changed"]);
    run(
        &mut c,
        &[
            "LREM",
            "packed",
            "0",
            "element-1300-abcabcabcabcabcabcabcabcabcabc",
        ],
    );
    let mut want = want;
    want[1200] = "changed".into();
    want.retain(|x| x != "element-1300-abcabcabcabcabcabcabcabcabcabc");
    assert_eq!(lrange(&mut c, "packed"), want);
    assert!(memory_usage(&mut c, "packed") * 3 < flat);
}

#[test]
fn compressed_lists_survive_save_and_debug_reload() {
    let dir = temp_dir("list-compress");
    let args = [
        "--save",
        "",
        "--appendonly",
        "no",
        "--list-compress-depth",
        "2",
    ];
    let s = TestServer::start_in(&dir, &args);
    let mut c = s.client();
    let want = fill_list(&mut c, "l");
    let before = memory_usage(&mut c, "l");
    assert_eq!(run(&mut c, &["DEBUG", "RELOAD"]), redis::Value::Okay);
    assert_eq!(lrange(&mut c, "l"), want);
    // Loading compresses again.
    assert!(memory_usage(&mut c, "l") <= before + before / 10);
    run(&mut c, &["SAVE"]);
    drop(s);
    let s = TestServer::start_in(&dir, &["--save", "", "--appendonly", "no"]);
    let mut c = s.client();
    assert_eq!(lrange(&mut c, "l"), want);
    assert_eq!(field(&debug_object(&mut c, "l"), "ql_compressed"), "0");
    // And DUMP / RESTORE carry it too.
    let dump: Vec<u8> = redis::cmd("DUMP").arg("l").query(&mut c).unwrap();
    run(&mut c, &["CONFIG", "SET", "list-compress-depth", "1"]);
    let _: () = redis::cmd("RESTORE")
        .arg("copy")
        .arg(0)
        .arg(dump)
        .query(&mut c)
        .unwrap();
    assert_eq!(lrange(&mut c, "copy"), want);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// DEBUG QUICKLIST-PACKED-THRESHOLD makes small elements plain nodes; they compress,
/// save and reload like any node.
#[test]
fn plain_nodes_with_a_small_threshold_compress_and_reload() {
    let s = TestServer::start_with(&["--save", "", "--appendonly", "no"]);
    let mut c = s.client();
    run(&mut c, &["CONFIG", "SET", "list-compress-depth", "1"]);
    run(&mut c, &["CONFIG", "SET", "list-max-listpack-size", "4"]);
    run(&mut c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "60b"]);
    let mut want = Vec::new();
    for i in 0..40 {
        let v = if i % 3 == 0 {
            format!("{i}{}", "z".repeat(100))
        } else {
            format!("s{i}")
        };
        let _: usize = redis::cmd("RPUSH").arg("l").arg(&v).query(&mut c).unwrap();
        want.push(v);
    }
    assert_eq!(lrange(&mut c, "l"), want);
    let info = debug_object(&mut c, "l");
    assert_eq!(field(&info, "encoding"), "quicklist");
    // The 14 plain nodes and the packed nodes between them.
    assert!(field(&info, "ql_nodes").parse::<usize>().unwrap() >= 14 + 10);
    assert_eq!(run(&mut c, &["DEBUG", "RELOAD"]), redis::Value::Okay);
    assert_eq!(lrange(&mut c, "l"), want);
    // Redis 7.4's regression cases: LSET on compressed nodes next to plain ones.
    run(&mut c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "100b"]);
    run(&mut c, &["DEL", "l"]);
    let small = "x".repeat(32);
    let large = "x".repeat(100);
    run(&mut c, &["RPUSH", "l", &large]);
    run(&mut c, &["RPUSH", "l", &small]);
    run(&mut c, &["RPUSH", "l", &small]);
    run(&mut c, &["LSET", "l", "-1", &large]);
    assert_eq!(lrange(&mut c, "l"), [large.clone(), small, large]);
    run(&mut c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "10b"]);
    run(&mut c, &["DEL", "l"]);
    run(&mut c, &["LPUSH", "l", "aa"]);
    run(&mut c, &["LPUSH", "l", "bb"]);
    run(&mut c, &["LSET", "l", "-2", &"x".repeat(10)]);
    run(&mut c, &["RPOP", "l"]);
    assert_eq!(lrange(&mut c, "l"), ["x".repeat(10)]);
    run(&mut c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0"]);
}

/// redis-server's compressed lists load here, and ours (compressed nodes written as
/// LZF strings) load there, with the same content.
#[test]
fn compressed_list_rdb_files_interoperate_with_redis_server() {
    if !redis_server_available() {
        return;
    }
    let redis = RedisServer::start();
    let mut rc = redis.client();
    run(&mut rc, &["CONFIG", "SET", "list-compress-depth", "1"]);
    let want = fill_list(&mut rc, "l");
    run(&mut rc, &["SAVE"]);
    let rdir: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query(&mut rc)
        .unwrap();
    let rdir = std::path::PathBuf::from(&rdir[1]);
    let dir = temp_dir("list-compress-interop");
    std::fs::copy(rdir.join("dump.rdb"), dir.join("dump.rdb")).unwrap();
    let s = TestServer::start_in(
        &dir,
        &[
            "--appendonly",
            "no",
            "--save",
            "",
            "--list-compress-depth",
            "1",
        ],
    );
    let mut c = s.client();
    assert_eq!(lrange(&mut c, "l"), want);
    run(&mut c, &["RPUSH", "l", "written-here"]);
    run(&mut c, &["SAVE"]);
    let mut want = want;
    want.push("written-here".into());
    // The file passes redis-check-rdb and loads into redis-server.
    let check = std::process::Command::new("redis-check-rdb")
        .arg(dir.join("dump.rdb"))
        .output();
    if let Ok(out) = check {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    std::fs::copy(dir.join("dump.rdb"), rdir.join("dump.rdb")).unwrap();
    assert_eq!(
        run(&mut rc, &["DEBUG", "RELOAD", "NOSAVE"]),
        redis::Value::Okay
    );
    assert_eq!(lrange(&mut rc, "l"), want);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
