//! Resharding a Cinnabar cluster with redis-cli's cluster manager, which moves keys
//! with MIGRATE … KEYS (RESTORE-ASKING on the importing node): all slots of one
//! master move to another while the `redis` crate's cluster client writes and reads
//! (no acknowledged key may be missing, and the client sees no error), and `--cluster
//! fix` finishes a migration left half done.

mod common;
use common::cluster::{
    cluster_create, cluster_info_field, myid, redis_cli, redis_cli_available, start_node, wait_for,
    wait_ok,
};
use common::{RawConn, TestServer};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn three_masters() -> Vec<TestServer> {
    let nodes: Vec<TestServer> = (0..3).map(|_| start_node(&[])).collect();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    cluster_create(&ports, 0);
    wait_ok(&ports);
    nodes
}

fn cluster_client(ports: &[u16]) -> redis::cluster::ClusterConnection {
    let urls: Vec<String> = ports
        .iter()
        .map(|p| format!("redis://127.0.0.1:{p}/"))
        .collect();
    redis::cluster::ClusterClient::builder(urls)
        .retries(64)
        .build()
        .unwrap()
        .get_connection()
        .unwrap()
}

/// redis-cli with a bound fit for moving thousands of slots on a loaded machine
/// (`redis_cli` stops it after 120 s).
fn redis_cli_long(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new("timeout")
        .arg("900")
        .arg("redis-cli")
        .args(args)
        .output()
        .expect("run redis-cli");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn is_master(port: u16) -> bool {
    let nodes = RawConn::connect(port, 2).cmd(&["CLUSTER", "NODES"]);
    nodes
        .lines()
        .find(|l| l.contains("myself"))
        .is_some_and(|l| l.contains("myself,master"))
}

fn dbsize(port: u16) -> usize {
    let r = RawConn::connect(port, 2).cmd(&["DBSIZE"]);
    r.trim_start_matches(':').trim().parse().unwrap()
}

/// A minimal cluster client that follows -MOVED and -ASK and retries -TRYAGAIN,
/// sending each command once per attempt and never re-sending one that got an answer:
/// the exact count of INCRs checks that no write is lost or applied twice (the
/// `redis` crate's client may re-send a command, so it only does idempotent writes).
struct Redirecting {
    conns: std::collections::HashMap<u16, RawConn>,
    owner: std::collections::HashMap<String, u16>,
    default: u16,
}

impl Redirecting {
    fn new(port: u16) -> Redirecting {
        Redirecting {
            conns: Default::default(),
            owner: Default::default(),
            default: port,
        }
    }

    fn conn(&mut self, port: u16) -> &mut RawConn {
        self.conns
            .entry(port)
            .or_insert_with(|| RawConn::connect(port, 2))
    }

    fn cmd(&mut self, args: &[&str]) -> String {
        let key = args[1].to_string();
        let mut port = *self.owner.get(&key).unwrap_or(&self.default);
        let mut asking = false;
        for _ in 0..100 {
            let c = self.conn(port);
            let r = if asking {
                c.send(&["ASKING"]);
                c.send(args);
                assert_eq!(c.read_reply(), "+OK\r\n");
                c.read_reply()
            } else {
                c.cmd(args)
            };
            let target = |r: &str| -> u16 { r.trim().rsplit(':').next().unwrap().parse().unwrap() };
            if r.starts_with("-MOVED") {
                port = target(&r);
                self.owner.insert(key.clone(), port);
                asking = false;
            } else if r.starts_with("-ASK") {
                port = target(&r);
                asking = true;
            } else if r.starts_with("-TRYAGAIN") {
                std::thread::sleep(std::time::Duration::from_millis(5));
            } else {
                return r;
            }
        }
        panic!("too many redirections for {args:?}");
    }
}

#[test]
fn reshard_all_slots_under_load() {
    if !redis_cli_available() {
        return;
    }
    let nodes = three_masters();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    let mut conn = cluster_client(&ports);
    for i in 0..2000 {
        let _: () = redis::cmd("SET")
            .arg(format!("pre:{i}"))
            .arg(i)
            .query(&mut conn)
            .unwrap();
    }
    // Some big values, so MIGRATE has something to carry.
    for i in 0..20 {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(format!("big:{i}"));
        for f in 0..2000 {
            cmd.arg(f).arg("v");
        }
        let _: () = cmd.query(&mut conn).unwrap();
    }
    let (from, to) = (ports[0], ports[1]);
    let from_slots = cluster_info_field(from, "cluster_slots_assigned");
    assert_eq!(from_slots, "16384");

    // The workload: single-key writes and reads through the cluster client.
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let stop = stop.clone();
        let ports = ports.clone();
        std::thread::spawn(move || {
            let mut conn = cluster_client(&ports);
            let mut raw = Redirecting::new(ports[0]);
            let mut acked = 0u64;
            let mut errors = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let key = format!("live:{acked}");
                let r: redis::RedisResult<()> =
                    redis::cmd("SET").arg(&key).arg(acked).query(&mut conn);
                match r {
                    Ok(()) => acked += 1,
                    Err(e) => errors.push(format!("SET {key}: {e}")),
                }
                let pre = format!("pre:{}", acked % 2000);
                let r = raw.cmd(&["INCR", &pre]);
                if !r.starts_with(':') {
                    errors.push(format!("INCR {pre}: {r}"));
                }
            }
            (acked, errors)
        })
    };
    let (from_id, to_id) = (myid(from), myid(to));
    let (ok, out) = redis_cli_long(&[
        "--cluster",
        "reshard",
        &format!("127.0.0.1:{from}"),
        "--cluster-from",
        &from_id,
        "--cluster-to",
        &to_id,
        "--cluster-slots",
        "16384",
        "--cluster-yes",
        "--cluster-pipeline",
        "50",
    ]);
    stop.store(true, Ordering::Relaxed);
    let (acked, errors) = worker.join().unwrap();
    assert!(ok, "reshard failed: {out}");
    assert!(errors.is_empty(), "client errors: {errors:?}");
    assert!(acked > 0);

    // The source serves nothing; every acknowledged key is there.
    wait_for("slots moved everywhere", 30, || {
        let mut c = RawConn::connect(from, 2);
        let nodes_txt = c.cmd(&["CLUSTER", "NODES"]);
        let line = nodes_txt.lines().find(|l| l.contains("myself")).unwrap();
        line.split(' ').count() == 8
    });
    let (ok, out) = redis_cli(&["--cluster", "check", &format!("127.0.0.1:{to}")]);
    assert!(ok && out.contains("[OK] All 16384 slots covered."), "{out}");
    let mut conn = cluster_client(&ports);
    for i in 0..acked {
        let v: Option<u64> = redis::cmd("GET")
            .arg(format!("live:{i}"))
            .query(&mut conn)
            .unwrap();
        assert_eq!(v, Some(i), "live:{i}");
    }
    // Each INCR was acknowledged once: the sum of the counters is exact.
    let mut sum = 0u64;
    for i in 0..2000u64 {
        let v: u64 = redis::cmd("GET")
            .arg(format!("pre:{i}"))
            .query(&mut conn)
            .unwrap();
        sum += v - i;
    }
    assert_eq!(sum, acked, "increments lost or doubled");
    for i in 0..20 {
        let n: usize = redis::cmd("HLEN")
            .arg(format!("big:{i}"))
            .query(&mut conn)
            .unwrap();
        assert_eq!(n, 2000);
    }
    // A master that lost its last slot becomes a replica of the node that took it
    // (Redis's rule), so only masters are counted: each key is on exactly one.
    let masters: Vec<u16> = ports.iter().copied().filter(|&p| is_master(p)).collect();
    assert!(!masters.contains(&from) || dbsize(from) == 0);
    assert_eq!(
        masters.iter().map(|&p| dbsize(p)).sum::<usize>(),
        2000 + 20 + acked as usize
    );
}

#[test]
fn fix_finishes_an_interrupted_migration() {
    if !redis_cli_available() {
        return;
    }
    let nodes = three_masters();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    // The owner of slot 12182 ({foo}) and another master.
    let src_port = ports
        .iter()
        .copied()
        .find(|&p| {
            !RawConn::connect(p, 2)
                .cmd(&["GET", "{foo}"])
                .starts_with("-MOVED")
        })
        .unwrap();
    let dst_port = *ports.iter().find(|&&p| p != src_port).unwrap();
    let (src_id, dst_id) = (myid(src_port), myid(dst_port));
    let mut s = RawConn::connect(src_port, 2);
    let mut d = RawConn::connect(dst_port, 2);
    for i in 0..100 {
        assert_eq!(
            s.cmd(&["SET", &format!("{{foo}}{i}"), &i.to_string()]),
            "+OK\r\n"
        );
    }
    d.cmd(&["CLUSTER", "SETSLOT", "12182", "IMPORTING", &src_id]);
    s.cmd(&["CLUSTER", "SETSLOT", "12182", "MIGRATING", &dst_id]);
    // Half the keys moved, then the migration stops.
    let dp = dst_port.to_string();
    let mut args = vec!["MIGRATE", "127.0.0.1", &dp, "", "0", "5000", "KEYS"];
    let keys: Vec<String> = (0..50).map(|i| format!("{{foo}}{i}")).collect();
    args.extend(keys.iter().map(|k| k.as_str()));
    assert_eq!(s.cmd(&args), "+OK\r\n");
    assert_eq!(dbsize(src_port), 50);
    // RESTORE-ASKING put them in the importing slot without ASKING.
    assert_eq!(
        d.cmd(&["GET", "{foo}1"]),
        format!("-MOVED 12182 127.0.0.1:{src_port}\r\n")
    );
    d.cmd(&["ASKING"]);
    assert_eq!(d.cmd(&["GET", "{foo}1"]), "$1\r\n1\r\n");
    let (_, out) = redis_cli(&["--cluster", "check", &format!("127.0.0.1:{src_port}")]);
    assert!(
        out.contains("[WARNING] The following slots are open: 12182."),
        "{out}"
    );

    let (ok, out) = redis_cli(&[
        "--cluster",
        "fix",
        &format!("127.0.0.1:{src_port}"),
        "--cluster-yes",
    ]);
    assert!(ok, "fix failed: {out}");
    wait_for("agreement after fix", 30, || {
        let (ok, out) = redis_cli(&["--cluster", "check", &format!("127.0.0.1:{src_port}")]);
        ok && out.contains("[OK] All nodes agree about slots configuration.")
            && !out.contains("[WARNING]")
    });
    let mut conn = cluster_client(&ports);
    for i in 0..100 {
        let v: Option<u64> = redis::cmd("GET")
            .arg(format!("{{foo}}{i}"))
            .query(&mut conn)
            .unwrap();
        assert_eq!(v, Some(i));
    }
    assert_eq!(ports.iter().map(|&p| dbsize(p)).sum::<usize>(), 100);
}
