//! A cluster mixing Cinnabar and redis-server 7.0 nodes (the bus is the same version
//! 1 in Redis 7.0 and 7.4): they join through `redis-cli --cluster create`, agree on
//! slots, replicate across kinds (a redis-server replica of a Cinnabar master and the
//! reverse), a redis-server replica wins the election when its Cinnabar master dies
//! and a Cinnabar replica when its redis-server master dies, with votes from both
//! kinds of masters.

mod common;
use common::cluster::{
    cluster_create, myid, redis_cli, redis_cli_available, start_node, wait_for, wait_ok,
};
use common::{free_port, redis_server_available, RawConn, RedisServer, TestServer};
use std::process::Command;
use std::time::{Duration, Instant};

/// A redis-server cluster node (`RedisServer` with cluster directives; its bus port is
/// drawn for each start attempt).
fn redis_node() -> RedisServer {
    RedisServer::start_with(|| {
        [
            "--cluster-enabled",
            "yes",
            "--cluster-node-timeout",
            "2000",
            "--repl-diskless-sync-delay",
            "0",
            "--cluster-port",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([free_port().to_string()])
        .collect()
    })
}

fn line_of(port: u16, id: &str) -> String {
    let mut c = RawConn::connect(port, 2);
    c.cmd(&["CLUSTER", "NODES"])
        .lines()
        .find(|l| l.starts_with(id))
        .unwrap_or("")
        .to_string()
}

#[test]
fn cinnabar_and_redis_server_in_one_cluster() {
    if !redis_cli_available() || !redis_server_available() {
        return;
    }
    let mut cin: Vec<TestServer> = (0..2).map(|_| start_node(&[])).collect();
    let red: Vec<RedisServer> = (0..2).map(|_| redis_node()).collect();
    // Masters alternate kinds.
    let masters = [cin[0].port, red[0].port, cin[1].port, red[1].port];
    cluster_create(&masters, 0);
    wait_ok(&masters);
    let (ok, out) = redis_cli(&["--cluster", "check", &format!("127.0.0.1:{}", red[0].port)]);
    assert!(
        ok && out.contains("[OK] All nodes agree about slots configuration."),
        "{out}"
    );

    // A redis-server replica of a Cinnabar master, a Cinnabar replica of a
    // redis-server master.
    let red_replica = redis_node();
    let cin_replica = start_node(&[]);
    let cin_master_id = myid(cin[0].port);
    let red_master_id = myid(red[0].port);
    for (port, master) in [
        (red_replica.port, &cin_master_id),
        (cin_replica.port, &red_master_id),
    ] {
        let (ok, out) = redis_cli(&[
            "--cluster",
            "add-node",
            &format!("127.0.0.1:{port}"),
            &format!("127.0.0.1:{}", masters[0]),
            "--cluster-slave",
            "--cluster-master-id",
            master,
        ]);
        assert!(ok, "{out}");
    }
    let all: Vec<u16> = masters
        .iter()
        .copied()
        .chain([red_replica.port, cin_replica.port])
        .collect();
    wait_for("replicas known everywhere", 60, || {
        all.iter().all(|&p| {
            let mut c = RawConn::connect(p, 2);
            c.cmd(&["CLUSTER", "NODES"]).matches("slave ").count() == 2
        })
    });
    // Keys written through redis-cli -c reach both kinds of replicas.
    let cin_slots_key = (0..1000)
        .map(|i| format!("k{i}"))
        .find(|k| {
            let mut c = cin[0].raw(2);
            c.cmd(&["SET", k, "cin"]) == "+OK\r\n"
        })
        .unwrap();
    let red_slots_key = (0..1000)
        .map(|i| format!("k{i}"))
        .find(|k| {
            let mut c = RawConn::connect(red[0].port, 2);
            c.cmd(&["SET", k, "red"]) == "+OK\r\n"
        })
        .unwrap();
    wait_for("replicated to redis-server", 30, || {
        let mut c = RawConn::connect(red_replica.port, 2);
        c.cmd(&["READONLY"]);
        c.cmd(&["GET", &cin_slots_key]) == "$3\r\ncin\r\n"
    });
    wait_for("replicated to cinnabar", 30, || {
        let mut c = cin_replica.raw(2);
        c.cmd(&["READONLY"]);
        c.cmd(&["GET", &red_slots_key]) == "$3\r\nred\r\n"
    });

    // The Cinnabar master dies: its redis-server replica is elected.
    let red_replica_id = myid(red_replica.port);
    cin[0].kill9();
    let alive: Vec<u16> = all.iter().copied().filter(|&p| p != cin[0].port).collect();
    wait_for("redis-server replica promoted", 60, || {
        alive.iter().all(|&p| {
            let l = line_of(p, &red_replica_id);
            l.contains("master") && l.split(' ').count() > 8
        })
    });
    wait_ok(&alive);
    let mut c = RawConn::connect(red_replica.port, 2);
    assert_eq!(c.cmd(&["GET", &cin_slots_key]), "$3\r\ncin\r\n");

    // The other way round: a redis-server master dies and its Cinnabar replica is
    // elected, with votes from both kinds of masters.
    let cin_replica_id = myid(cin_replica.port);
    let mut red = red;
    let red0_port = red[0].port;
    red[0].kill9();
    let alive: Vec<u16> = alive.iter().copied().filter(|&p| p != red0_port).collect();
    wait_for("cinnabar replica promoted", 60, || {
        alive.iter().all(|&p| {
            let l = line_of(p, &cin_replica_id);
            l.contains("master") && l.split(' ').count() > 8
        })
    });
    wait_ok(&alive);
    let mut c = cin_replica.raw(2);
    assert_eq!(c.cmd(&["GET", &red_slots_key]), "$3\r\nred\r\n");
    assert_eq!(c.cmd(&["SET", &red_slots_key, "cin"]), "+OK\r\n");
}

/// redis-cli with a longer bound than `redis_cli` (moving thousands of slots).
fn redis_cli_long(args: &[&str]) -> (bool, String) {
    let out = Command::new("timeout")
        .arg("500")
        .arg("redis-cli")
        .args(args)
        .output()
        .expect("run redis-cli");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Runs a `redis-cli --cluster` command that checks the cluster before it changes
/// anything (add-node, reshard), once every node reports the same slot owners.
///
/// The check compares every node's CLUSTER NODES, and gossip settles them one node at
/// a time: a ping the old owner sent before its SETSLOT can still reach a node that
/// has not yet heard the new owner's bumped epoch, and that node believes the old
/// claim until the epoch arrives (Redis's rule too). So agreement seen by one check
/// may be gone for the command's own check a moment later. A refusal by that check
/// left the cluster untouched and is tried again; agreement that never comes still
/// fails the test after a minute.
fn after_agreement(mut command: impl FnMut() -> (bool, String)) -> (bool, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (ok, out) = command();
        let refused_by_its_check = !ok && out.contains("Nodes don't agree about configuration");
        if !refused_by_its_check || Instant::now() > deadline {
            return (ok, out);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn slots_of(port: u16) -> usize {
    let nodes = RawConn::connect(port, 2).cmd(&["CLUSTER", "NODES"]);
    let line = nodes
        .lines()
        .find(|l| l.contains("myself"))
        .unwrap_or_else(|| panic!("CLUSTER NODES on {port}: {nodes:?}"));
    line.split(' ')
        .skip(8)
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

/// A redis-server cluster taking a Cinnabar node in with redis-cli's cluster manager:
/// `add-node`, `rebalance --cluster-use-empty-masters` (redis-server MIGRATEs into
/// Cinnabar, RESTORE-ASKING), a reshard of one redis-server node's slots to the
/// Cinnabar node, and `del-node` of the emptied node; every key stays readable.
#[test]
fn redis_server_cluster_moves_to_cinnabar_nodes() {
    if !redis_cli_available() || !redis_server_available() {
        return;
    }
    let red: Vec<RedisServer> = (0..3).map(|_| redis_node()).collect();
    let rports: Vec<u16> = red.iter().map(|n| n.port).collect();
    cluster_create(&rports, 0);
    wait_ok(&rports);
    let urls = |ports: &[u16]| -> Vec<String> {
        ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}/"))
            .collect()
    };
    let mut conn = redis::cluster::ClusterClient::new(urls(&rports))
        .unwrap()
        .get_connection()
        .unwrap();
    for i in 0..3000 {
        let _: () = redis::cmd("SET")
            .arg(format!("k:{i}"))
            .arg(i)
            .query(&mut conn)
            .unwrap();
    }
    for i in 0..10 {
        let _: () = redis::cmd("ZADD")
            .arg(format!("z:{i}"))
            .arg(1)
            .arg("a")
            .arg(2)
            .arg("b")
            .query(&mut conn)
            .unwrap();
    }
    let cin = start_node(&[]);
    let entry = format!("127.0.0.1:{}", rports[0]);
    let (ok, out) = redis_cli(&[
        "--cluster",
        "add-node",
        &format!("127.0.0.1:{}", cin.port),
        &entry,
    ]);
    assert!(ok, "add-node: {out}");
    let all: Vec<u16> = rports.iter().copied().chain([cin.port]).collect();
    wait_for("four nodes known everywhere", 60, || {
        all.iter()
            .all(|&p| common::cluster::cluster_info_field(p, "cluster_known_nodes") == "4")
    });
    wait_ok(&all);
    let (ok, out) = after_agreement(|| {
        redis_cli_long(&[
            "--cluster",
            "rebalance",
            &entry,
            "--cluster-use-empty-masters",
            "--cluster-yes",
        ])
    });
    assert!(ok, "rebalance: {out}");
    assert!(slots_of(cin.port) > 4000, "{}", slots_of(cin.port));
    // The last redis-server node hands everything to Cinnabar and leaves.
    let leaving = rports[2];
    let n = slots_of(leaving).to_string();
    let (ok, out) = after_agreement(|| {
        redis_cli_long(&[
            "--cluster",
            "reshard",
            &entry,
            "--cluster-from",
            &myid(leaving),
            "--cluster-to",
            &myid(cin.port),
            "--cluster-slots",
            &n,
            "--cluster-yes",
        ])
    });
    assert!(ok, "reshard: {out}");
    let (ok, out) = redis_cli(&["--cluster", "del-node", &entry, &myid(leaving)]);
    assert!(ok, "del-node: {out}");
    let rest: Vec<u16> = vec![rports[0], rports[1], cin.port];
    wait_for("the three remaining nodes agree", 60, || {
        let (ok, out) = redis_cli(&["--cluster", "check", &entry]);
        ok && out.contains("[OK] All 16384 slots covered.")
            && out.contains("[OK] All nodes agree about slots configuration.")
            && !out.contains("[WARNING]")
    });
    let mut conn = redis::cluster::ClusterClient::new(urls(&rest))
        .unwrap()
        .get_connection()
        .unwrap();
    for i in 0..3000 {
        let v: Option<i64> = redis::cmd("GET")
            .arg(format!("k:{i}"))
            .query(&mut conn)
            .unwrap();
        assert_eq!(v, Some(i));
    }
    for i in 0..10 {
        let n: i64 = redis::cmd("ZCARD")
            .arg(format!("z:{i}"))
            .query(&mut conn)
            .unwrap();
        assert_eq!(n, 2);
    }
    let total: usize = rest
        .iter()
        .map(|&p| {
            let r = RawConn::connect(p, 2).cmd(&["DBSIZE"]);
            r.trim_start_matches(':').trim().parse::<usize>().unwrap()
        })
        .sum();
    assert_eq!(total, 3010);
}

/// A whole redis-server cluster moves onto Cinnabar one node at a time, as a
/// deployment would: three Cinnabar nodes join, each redis-server master hands all its
/// slots to one of them (redis-cli reshard: redis-server MIGRATEs into Cinnabar) while
/// a cluster client keeps writing, then every redis-server node leaves with `del-node`.
/// The cluster that remains is Cinnabar only, and no acknowledged write is lost.
#[test]
fn whole_redis_server_cluster_moves_onto_cinnabar() {
    if !redis_cli_available() || !redis_server_available() {
        return;
    }
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let red: Vec<RedisServer> = (0..3).map(|_| redis_node()).collect();
    let rports: Vec<u16> = red.iter().map(|n| n.port).collect();
    cluster_create(&rports, 0);
    wait_ok(&rports);
    let urls = |ports: &[u16]| -> Vec<String> {
        ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}/"))
            .collect()
    };
    let mut conn = redis::cluster::ClusterClient::new(urls(&rports))
        .unwrap()
        .get_connection()
        .unwrap();
    for i in 0..2000 {
        let _: () = redis::cmd("SET")
            .arg(format!("k:{i}"))
            .arg(i)
            .query(&mut conn)
            .unwrap();
    }
    let cin: Vec<_> = (0..3).map(|_| start_node(&[])).collect();
    let entry = format!("127.0.0.1:{}", rports[0]);
    for c in &cin {
        let (ok, out) = after_agreement(|| {
            redis_cli(&[
                "--cluster",
                "add-node",
                &format!("127.0.0.1:{}", c.port),
                &entry,
            ])
        });
        assert!(ok, "add-node: {out}");
    }
    let all: Vec<u16> = rports
        .iter()
        .copied()
        .chain(cin.iter().map(|c| c.port))
        .collect();
    wait_for("six nodes known everywhere", 60, || {
        all.iter()
            .all(|&p| common::cluster::cluster_info_field(p, "cluster_known_nodes") == "6")
    });
    wait_ok(&all);

    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let seeds = urls(&all);
        std::thread::spawn(move || {
            let mut conn = redis::cluster::ClusterClient::new(seeds)
                .unwrap()
                .get_connection()
                .unwrap();
            let mut acked = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let r: redis::RedisResult<()> = redis::cmd("SET")
                    .arg(format!("live:{acked}"))
                    .arg(acked)
                    .query(&mut conn);
                if r.is_ok() {
                    acked += 1;
                }
            }
            acked
        })
    };
    for (r, c) in rports.iter().zip(&cin) {
        let n = slots_of(*r).to_string();
        let (ok, out) = after_agreement(|| {
            redis_cli_long(&[
                "--cluster",
                "reshard",
                &entry,
                "--cluster-from",
                &myid(*r),
                "--cluster-to",
                &myid(c.port),
                "--cluster-slots",
                &n,
                "--cluster-yes",
                "--cluster-pipeline",
                "50",
            ])
        });
        assert!(ok, "reshard: {out}");
    }
    stop.store(true, Ordering::Relaxed);
    let acked = writer.join().unwrap();
    assert!(acked > 0);

    let cports: Vec<u16> = cin.iter().map(|c| c.port).collect();
    let centry = format!("127.0.0.1:{}", cports[0]);
    for (i, r) in rports.iter().enumerate() {
        // A redis-server master that gave its last slot away becomes a replica of the
        // node that took it (cluster-allow-replica-migration) and loads its data.
        // del-node sends CLUSTER FORGET to every node: none may be loading (the others
        // become replicas too). Not loading at one instant is not enough, since a node
        // may turn replica and start its full sync after it: each must be a replica
        // whose link is up, its sync done.
        wait_for(
            "the emptied redis-server nodes synced as replicas",
            60,
            || {
                rports[i..].iter().all(|p| {
                    let info = RawConn::connect(*p, 2).cmd(&["INFO", "replication"]);
                    info.contains("role:slave\r\n")
                        && info.contains("master_link_status:up\r\n")
                        && info.contains("master_sync_in_progress:0\r\n")
                })
            },
        );
        assert_eq!(slots_of(*r), 0);
        let (ok, out) = redis_cli(&["--cluster", "del-node", &centry, &myid(*r)]);
        assert!(ok, "del-node: {out}");
    }
    wait_for("a cluster of the three Cinnabar nodes", 60, || {
        let (ok, out) = redis_cli(&["--cluster", "check", &centry]);
        ok && out.contains("[OK] All 16384 slots covered.")
            && out.contains("[OK] All nodes agree about slots configuration.")
            && !out.contains("[WARNING]")
            && cports
                .iter()
                .all(|&p| common::cluster::cluster_info_field(p, "cluster_known_nodes") == "3")
    });
    let mut conn = redis::cluster::ClusterClient::new(urls(&cports))
        .unwrap()
        .get_connection()
        .unwrap();
    for i in 0..2000 {
        let v: Option<i64> = redis::cmd("GET")
            .arg(format!("k:{i}"))
            .query(&mut conn)
            .unwrap();
        assert_eq!(v, Some(i), "k:{i}");
    }
    for i in 0..acked {
        let v: Option<u64> = redis::cmd("GET")
            .arg(format!("live:{i}"))
            .query(&mut conn)
            .unwrap();
        assert_eq!(v, Some(i), "live:{i}");
    }
    let total: u64 = cports
        .iter()
        .map(|&p| {
            let r = RawConn::connect(p, 2).cmd(&["DBSIZE"]);
            r.trim_start_matches(':').trim().parse::<u64>().unwrap()
        })
        .sum();
    assert!(total >= 2000 + acked, "{total} < 2000 + {acked}");
}
