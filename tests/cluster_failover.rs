//! Three masters with one replica each (`redis-cli --cluster create
//! --cluster-replicas 1`): replicas replicate, READONLY reads, a master killed with
//! SIGKILL is replaced by its replica exactly once, and CLUSTER FAILOVER promotes a
//! replica by hand (with MFSTART) and by TAKEOVER; the demoted master's blocked
//! clients are answered -UNBLOCKED.

mod common;
use common::cluster::{
    cluster_create, cluster_info_field, myid, redis_cli_available, start_node, start_node_on,
    wait_for, wait_ok,
};
use common::{RawConn, TestServer};

fn nodes_line(port: u16, id: &str) -> String {
    let mut c = RawConn::connect(port, 2);
    c.cmd(&["CLUSTER", "NODES"])
        .lines()
        .find(|l| l.starts_with(id))
        .unwrap_or("")
        .to_string()
}

fn is_master_of_slots(port: u16, id: &str) -> bool {
    let l = nodes_line(port, id);
    l.contains("master") && !l.contains("fail") && l.split(' ').count() > 8
}

fn six_nodes() -> Vec<TestServer> {
    let nodes: Vec<TestServer> = (0..6).map(|_| start_node(&[])).collect();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    cluster_create(&ports, 1);
    wait_ok(&ports);
    // Masters learn their replicas from the replicas' pings: wait until every node
    // knows every role (a master ignores MFSTART from a node it does not know as its
    // replica).
    wait_for("roles known everywhere", 30, || {
        ports.iter().all(|&p| {
            let mut c = RawConn::connect(p, 2);
            c.cmd(&["CLUSTER", "NODES"]).matches("slave ").count() == 3
        })
    });
    nodes
}

/// (master index, replica index) pairs.
fn pairs(nodes: &[TestServer]) -> Vec<(usize, usize)> {
    let ids: Vec<String> = nodes.iter().map(|n| myid(n.port)).collect();
    let mut out = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let line = nodes_line(n.port, &ids[i]);
        let fields: Vec<&str> = line.split(' ').collect();
        if fields[2].contains("slave") {
            let m = ids.iter().position(|x| x == fields[3]).unwrap();
            out.push((m, i));
        }
    }
    out
}

#[test]
fn replica_takes_over_a_killed_master_once() {
    if !redis_cli_available() {
        return;
    }
    let mut nodes = six_nodes();
    let pairs = pairs(&nodes);
    assert_eq!(pairs.len(), 3);
    let (m, r) = pairs[0];
    let (mport, rport) = (nodes[m].port, nodes[r].port);
    let rid = myid(rport);
    // Write through the master a key of its slots, read it on the replica.
    let key = {
        let mut c = nodes[m].raw(2);
        (0..1000)
            .map(|i| format!("k{i}"))
            .find(|k| c.cmd(&["SET", k, "v"]) == "+OK\r\n")
            .unwrap()
    };
    // A keyed workload through a cluster client, each write acknowledged by
    // `WAIT 1` (the client sends WAIT to every master and takes the minimum): every
    // acknowledged write must survive the failover (acknowledged writes lost: 0).
    let urls: Vec<String> = nodes
        .iter()
        .map(|n| format!("redis://127.0.0.1:{}/", n.port))
        .collect();
    let mut acked = Vec::new();
    {
        let client = redis::cluster::ClusterClient::new(urls.clone()).unwrap();
        let mut cc = client.get_connection().unwrap();
        for i in 0..600 {
            let k = format!("w{i}");
            let _: () = redis::cmd("SET").arg(&k).arg(i).query(&mut cc).unwrap();
            let n: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut cc).unwrap();
            if n >= 1 {
                acked.push((k, i));
            }
        }
    }
    assert!(acked.len() > 500, "{} writes acknowledged", acked.len());
    let mut rc = nodes[r].raw(2);
    assert!(rc.cmd(&["GET", &key]).starts_with("-MOVED"));
    assert_eq!(rc.cmd(&["READONLY"]), "+OK\r\n");
    wait_for("replicated key", 20, || {
        rc.cmd(&["GET", &key]) == "$1\r\nv\r\n"
    });
    assert!(rc.cmd(&["SET", &key, "w"]).starts_with("-MOVED"));

    nodes[m].kill9();
    let others: Vec<u16> = nodes
        .iter()
        .map(|n| n.port)
        .filter(|&p| p != mport)
        .collect();
    wait_for("replica promoted", 60, || {
        others.iter().all(|&p| is_master_of_slots(p, &rid))
    });
    wait_ok(&others);
    let mut c = RawConn::connect(rport, 2);
    assert_eq!(c.cmd(&["GET", &key]), "$1\r\nv\r\n");
    let survivors: Vec<String> = urls
        .iter()
        .filter(|u| !u.ends_with(&format!(":{mport}/")))
        .cloned()
        .collect();
    let client = redis::cluster::ClusterClient::new(survivors).unwrap();
    let mut cc = client.get_connection().unwrap();
    let lost: Vec<&String> = acked
        .iter()
        .filter(|(k, i)| {
            let v: Option<i64> = redis::cmd("GET").arg(k).query(&mut cc).unwrap();
            v != Some(*i)
        })
        .map(|(k, _)| k)
        .collect();
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    assert_eq!(c.cmd(&["SET", &key, "w"]), "+OK\r\n");
    let info = c.cmd(&["INFO", "replication"]);
    assert!(info.contains("role:master"), "{info}");
    // One election: every node sees the same, single new epoch for the replica.
    let epochs: Vec<String> = others
        .iter()
        .map(|&p| nodes_line(p, &rid).split(' ').nth(6).unwrap().to_string())
        .collect();
    assert!(epochs.windows(2).all(|w| w[0] == w[1]), "{epochs:?}");
    let dead_id = myid_of_dead(&nodes, m, &others);
    let dead = nodes_line(others[0], &dead_id);
    assert!(dead.contains("fail"), "{dead}");

    // The old master restarts on its directory and ports: it learns its slots moved
    // and comes back as a replica of the promoted node, with the data.
    let cport: u16 = dead
        .split(' ')
        .nth(1)
        .unwrap()
        .split('@')
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let dir = nodes[m].dir.clone();
    nodes[m] = start_node_on(&dir, Some(mport), Some(cport), &[]);
    wait_for("old master rejoins as a replica", 60, || {
        let own = nodes_line(mport, &dead_id);
        own.contains("slave") && own.split(' ').nth(3) == Some(rid.as_str())
    });
    let mut old = RawConn::connect(mport, 2);
    assert_eq!(old.cmd(&["READONLY"]), "+OK\r\n");
    wait_for("old master synced", 60, || {
        old.cmd(&["GET", &key]) == "$1\r\nw\r\n"
    });
    assert!(old.cmd(&["SET", &key, "x"]).starts_with("-MOVED"));
}

/// The id of the killed node, read from a survivor's table (its process is gone).
fn myid_of_dead(nodes: &[TestServer], m: usize, others: &[u16]) -> String {
    let mut c = RawConn::connect(others[0], 2);
    let port = format!(":{}@", nodes[m].port);
    c.cmd(&["CLUSTER", "NODES"])
        .lines()
        .find(|l| l.contains(&port))
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn manual_failover_and_takeover() {
    if !redis_cli_available() {
        return;
    }
    let nodes = six_nodes();
    let pairs = pairs(&nodes);
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    let (m, r) = pairs[0];
    let (mid, rid) = (myid(nodes[m].port), myid(nodes[r].port));
    let mut rc = nodes[r].raw(2);
    wait_for("replica in sync", 20, || {
        rc.cmd(&["INFO", "replication"])
            .contains("master_link_status:up")
    });
    // A client blocked on the master, on a key of its slots.
    let key = {
        let mut c = nodes[m].raw(2);
        (0..1000)
            .map(|i| format!("list{i}"))
            .find(|k| c.cmd(&["LLEN", k]) == ":0\r\n")
            .unwrap()
    };
    let mut blocked = nodes[m].raw(2);
    blocked.send(&["BLPOP", &key, "0"]);
    common::wait_blocked(&nodes[m], 1);
    assert_eq!(rc.cmd(&["CLUSTER", "FAILOVER"]), "+OK\r\n");
    wait_for("manual failover", 30, || {
        ports.iter().all(|&p| is_master_of_slots(p, &rid))
    });
    // The master turned replica answers it as Redis's replicationSetMaster does.
    assert_eq!(
        blocked.read_reply(),
        "-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n"
    );
    // The old master follows the new one.
    wait_for("old master demoted", 30, || {
        nodes_line(nodes[m].port, &mid).contains(&format!("slave {rid}"))
    });
    wait_ok(&ports);
    // And takes its slots back without an election.
    let mut mc = nodes[m].raw(2);
    assert_eq!(mc.cmd(&["CLUSTER", "FAILOVER", "TAKEOVER"]), "+OK\r\n");
    wait_for("takeover", 30, || {
        ports.iter().all(|&p| is_master_of_slots(p, &mid))
    });
    wait_ok(&ports);
    assert_eq!(cluster_info_field(nodes[m].port, "cluster_state"), "ok");
}

/// Every node of a 3+3 cluster restarts from its nodes.conf (ports, ids, epochs and
/// slots kept): the cluster comes back `ok` with the same ids, roles and slots.
#[test]
fn whole_cluster_restarts_from_nodes_conf() {
    if !redis_cli_available() {
        return;
    }
    let mut nodes = six_nodes();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    // Each node's view: (id, address, master-or-replica, master id, slots), sorted.
    let view = |port: u16| -> Vec<String> {
        let mut c = RawConn::connect(port, 2);
        let text = c.cmd(&["CLUSTER", "NODES"]);
        let mut rows: Vec<String> = text
            .lines()
            .filter(|l| l.len() > 40)
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                let role = if f[2].contains("master") {
                    "master"
                } else {
                    "slave"
                };
                format!("{} {} {} {} {}", f[0], f[1], role, f[3], f[8..].join(" "))
            })
            .collect();
        rows.sort();
        rows
    };
    let before: Vec<Vec<String>> = ports.iter().map(|&p| view(p)).collect();
    let cports: Vec<u16> = ports
        .iter()
        .map(|&p| {
            let own = view(p);
            let me = myid(p);
            let row = own.iter().find(|r| r.starts_with(&me)).unwrap().clone();
            row.split(' ')
                .nth(1)
                .unwrap()
                .split('@')
                .nth(1)
                .unwrap()
                .split(',')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    // Every node stops (SIGTERM) and starts again on its directory and ports.
    for n in nodes.iter_mut() {
        n.terminate();
    }
    let dirs: Vec<std::path::PathBuf> = nodes.iter().map(|n| n.dir.clone()).collect();
    drop(nodes);
    let nodes: Vec<TestServer> = (0..6)
        .map(|i| start_node_on(&dirs[i], Some(ports[i]), Some(cports[i]), &[]))
        .collect();
    wait_ok(&ports);
    let after: Vec<Vec<String>> = ports.iter().map(|&p| view(p)).collect();
    assert_eq!(before, after);
    // The restarted cluster serves writes (nodes run without persistence here: the
    // topology is what nodes.conf brings back).
    let written = ports
        .iter()
        .any(|&p| RawConn::connect(p, 2).cmd(&["SET", "after-restart", "1"]) == "+OK\r\n");
    assert!(written);
    drop(nodes);
}
