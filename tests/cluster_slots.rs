//! Cluster mode's per-slot key index seen through CLUSTER COUNTKEYSINSLOT and
//! GETKEYSINSLOT after every way keys come and go; clients blocked on a key whose slot
//! moves away, whose cluster goes down or whose slot is deleted get Redis's
//! redirection; a master turned replica answers its blocked clients -UNBLOCKED; the
//! cluster DEBUG subcommands' replies.

mod common;
use std::collections::{BTreeMap, BTreeSet};

use common::cluster::{cluster_create, myid, redis_cli_available, start_node, wait_for, wait_ok};
use common::{wait_blocked, RawConn, TestServer};

fn keyslot(c: &mut RawConn, key: &str) -> u16 {
    let r = c.cmd(&["CLUSTER", "KEYSLOT", key]);
    r.trim_start_matches(':').trim().parse().unwrap()
}

/// The bulk strings of a RESP2 array reply.
fn bulk_items(reply: &str) -> BTreeSet<String> {
    let lines: Vec<&str> = reply.split("\r\n").collect();
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with('$'))
        .map(|(i, _)| lines[i + 1].to_string())
        .collect()
}

/// COUNTKEYSINSLOT and GETKEYSINSLOT of every slot in `model` agree with it.
fn check_slots(c: &mut RawConn, model: &BTreeMap<u16, BTreeSet<String>>) {
    for (slot, keys) in model {
        let s = slot.to_string();
        assert_eq!(
            c.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &s]),
            format!(":{}\r\n", keys.len()),
            "slot {slot}"
        );
        let got = bulk_items(&c.cmd(&["CLUSTER", "GETKEYSINSLOT", &s, "1000"]));
        assert_eq!(&got, keys, "slot {slot}");
        if keys.len() > 2 {
            let two = c.cmd(&["CLUSTER", "GETKEYSINSLOT", &s, "2"]);
            assert!(two.starts_with("*2\r\n"), "{two}");
        }
    }
}

#[test]
fn slot_counts_follow_every_way_keys_change() {
    let s = start_node(&["--cluster-require-full-coverage", "no"]);
    let mut c = s.raw(2);
    assert_eq!(
        c.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    wait_ok(&[s.port]);
    let mut model: BTreeMap<u16, BTreeSet<String>> = BTreeMap::new();
    let mut keys = Vec::new();
    for i in 0..60 {
        keys.push(format!("k{i}"));
        keys.push(format!("{{tag{}}}:{i}", i % 3));
    }
    for k in &keys {
        assert_eq!(c.cmd(&["SET", k, "v"]), "+OK\r\n");
        model
            .entry(keyslot(&mut c, k))
            .or_default()
            .insert(k.clone());
    }
    // Overwrites and other types change nothing; lists and hashes are keys too.
    assert_eq!(c.cmd(&["SET", "k1", "w"]), "+OK\r\n");
    assert_eq!(c.cmd(&["RPUSH", "{tag0}:list", "a"]), ":1\r\n");
    model
        .entry(keyslot(&mut c, "{tag0}:list"))
        .or_default()
        .insert("{tag0}:list".into());
    check_slots(&mut c, &model);

    // DEL, UNLINK, RENAME within a slot, a popped-empty list.
    let forget = |m: &mut BTreeMap<u16, BTreeSet<String>>, c: &mut RawConn, k: &str| {
        m.get_mut(&keyslot(c, k)).unwrap().remove(k);
    };
    assert_eq!(c.cmd(&["DEL", "k2"]), ":1\r\n");
    assert_eq!(c.cmd(&["DEL", "k3"]), ":1\r\n");
    forget(&mut model, &mut c, "k2");
    forget(&mut model, &mut c, "k3");
    assert_eq!(c.cmd(&["UNLINK", "{tag1}:1"]), ":1\r\n");
    forget(&mut model, &mut c, "{tag1}:1");
    assert_eq!(c.cmd(&["RENAME", "{tag2}:2", "{tag2}:renamed"]), "+OK\r\n");
    forget(&mut model, &mut c, "{tag2}:2");
    model
        .entry(keyslot(&mut c, "{tag2}:renamed"))
        .or_default()
        .insert("{tag2}:renamed".into());
    assert_eq!(c.cmd(&["LPOP", "{tag0}:list"]), "$1\r\na\r\n");
    forget(&mut model, &mut c, "{tag0}:list");
    check_slots(&mut c, &model);

    // Expiry, lazy (a read) and active (the cycle).
    assert_eq!(c.cmd(&["PEXPIRE", "k4", "1"]), ":1\r\n");
    assert_eq!(c.cmd(&["PEXPIRE", "{tag0}:0", "1"]), ":1\r\n");
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(c.cmd(&["GET", "k4"]), "$-1\r\n");
    forget(&mut model, &mut c, "k4");
    forget(&mut model, &mut c, "{tag0}:0");
    wait_for("active expiry", 10, || {
        c.cmd(&["DBSIZE"]) == format!(":{}\r\n", model.values().map(|k| k.len()).sum::<usize>())
    });
    check_slots(&mut c, &model);

    // RDB reload, then the flushes (a reload after each must find the index empty).
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), "+OK\r\n");
    check_slots(&mut c, &model);
    assert_eq!(c.cmd(&["FLUSHALL", "ASYNC"]), "+OK\r\n");
    for keys in model.values_mut() {
        keys.clear();
    }
    check_slots(&mut c, &model);
    assert_eq!(c.cmd(&["SET", "{tag0}:again", "v"]), "+OK\r\n");
    model
        .entry(keyslot(&mut c, "{tag0}:again"))
        .or_default()
        .insert("{tag0}:again".into());
    check_slots(&mut c, &model);
    assert_eq!(c.cmd(&["FLUSHALL"]), "+OK\r\n");
    for keys in model.values_mut() {
        keys.clear();
    }
    check_slots(&mut c, &model);
    // DEBUG POPULATE writes keys straight into the table.
    assert_eq!(c.cmd(&["DEBUG", "POPULATE", "50"]), "+OK\r\n");
    for i in 0..50 {
        let k = format!("key:{i}");
        model.entry(keyslot(&mut c, &k)).or_default().insert(k);
    }
    check_slots(&mut c, &model);
}

/// The port and node id of the node owning `key`'s slot, as node `port` sees it.
fn owner_of(port: u16, key: &str) -> u16 {
    let mut c = RawConn::connect(port, 2);
    let r = c.cmd(&["GET", key]);
    match r.strip_prefix("-MOVED ") {
        Some(rest) => rest.trim().rsplit(':').next().unwrap().parse().unwrap(),
        None => port,
    }
}

#[test]
fn blocked_clients_follow_their_slot() {
    if !redis_cli_available() {
        return;
    }
    let mut nodes: Vec<TestServer> = (0..3).map(|_| start_node(&[])).collect();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    cluster_create(&ports, 0);
    wait_ok(&ports);
    let key = "{blk}list";
    let a = owner_of(ports[0], key);
    let ai = ports.iter().position(|&p| p == a).unwrap();
    let (bi, ci) = ((ai + 1) % 3, (ai + 2) % 3);
    let b = ports[bi];
    let slot = keyslot(&mut RawConn::connect(a, 2), key).to_string();

    // BLPOP, BLMOVE, BZPOPMIN and XREAD BLOCK on the owner; WAIT is not key-blocked.
    let mut waiters: Vec<RawConn> = Vec::new();
    let cmds: [&[&str]; 4] = [
        &["BLPOP", key, "0"],
        &["BLMOVE", key, "{blk}dst", "LEFT", "RIGHT", "0"],
        &["BZPOPMIN", "{blk}zset", "0"],
        &["XREAD", "BLOCK", "0", "STREAMS", "{blk}stream", "$"],
    ];
    for cmd in cmds {
        let mut w = RawConn::connect(a, 2);
        w.send(cmd);
        waiters.push(w);
    }
    let mut wait = RawConn::connect(a, 2);
    wait.send(&["WAIT", "1", "0"]);
    wait_blocked(&nodes[ai], 5);

    // The slot moves to B (no keys in it): every key waiter gets -MOVED to B.
    let bid = myid(b);
    for &p in &ports {
        let mut c = RawConn::connect(p, 2);
        assert_eq!(
            c.cmd(&["CLUSTER", "SETSLOT", &slot, "NODE", &bid]),
            "+OK\r\n"
        );
    }
    let moved = format!("-MOVED {slot} 127.0.0.1:{b}\r\n");
    for w in &mut waiters {
        assert_eq!(w.read_reply(), moved);
    }
    wait_blocked(&nodes[ai], 1); // WAIT still waits
    let mut probe = RawConn::connect(a, 2);
    assert!(probe
        .cmd(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"])
        .starts_with(':'));

    // A client served after ASKING on a node importing the slot stays blocked (the
    // slot is not served here but is being imported), and is served once it is ours.
    let mut admin = RawConn::connect(a, 2);
    assert_eq!(
        admin.cmd(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &bid]),
        "+OK\r\n"
    );
    let mut w = RawConn::connect(a, 2);
    assert_eq!(w.cmd(&["ASKING"]), "+OK\r\n");
    w.send(&["BLPOP", key, "0"]);
    wait_blocked(&nodes[ai], 1);
    std::thread::sleep(std::time::Duration::from_millis(400));
    wait_blocked(&nodes[ai], 1);
    let aid = myid(a);
    for &p in &ports {
        let mut c = RawConn::connect(p, 2);
        assert_eq!(
            c.cmd(&["CLUSTER", "SETSLOT", &slot, "NODE", &aid]),
            "+OK\r\n"
        );
    }
    assert_eq!(admin.cmd(&["RPUSH", key, "x"]), ":1\r\n");
    assert_eq!(w.read_reply(), "*2\r\n$9\r\n{blk}list\r\n$1\r\nx\r\n");

    // The cluster goes down (a master is lost): waiters get -CLUSTERDOWN.
    let mut w = RawConn::connect(a, 2);
    w.send(&["BLPOP", key, "0"]);
    wait_blocked(&nodes[ai], 1);
    nodes[ci].kill9();
    wait_for("cluster down", 60, || {
        common::cluster::cluster_info_field(a, "cluster_state") == "fail"
    });
    assert_eq!(w.read_reply(), "-CLUSTERDOWN The cluster is down\r\n");
}

#[test]
fn deleted_slot_unblocks_with_slot_not_served() {
    let s = start_node(&["--cluster-require-full-coverage", "no"]);
    let mut c = s.raw(2);
    assert_eq!(
        c.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    wait_ok(&[s.port]);
    let mut w = s.raw(2);
    w.send(&["BLPOP", "mylist", "0"]);
    wait_blocked(&s, 1);
    let slot = keyslot(&mut c, "mylist").to_string();
    assert_eq!(c.cmd(&["CLUSTER", "DELSLOTS", &slot]), "+OK\r\n");
    assert_eq!(w.read_reply(), "-CLUSTERDOWN Hash slot not served\r\n");
    let stats = c.cmd(&["INFO", "commandstats"]);
    assert!(stats.contains("cmdstat_blpop:calls=1,"), "{stats}");
    assert!(stats.contains("failed_calls=1"), "{stats}");
}

#[test]
fn master_turned_replica_unblocks_its_clients() {
    let master = TestServer::start();
    let s = TestServer::start();
    let mut w = s.raw(2);
    w.send(&["BLPOP", "l", "0"]);
    let mut w3 = s.raw(3);
    w3.send(&["XREAD", "BLOCK", "0", "STREAMS", "x", "$"]);
    wait_blocked(&s, 2);
    let mut c = s.raw(2);
    let port = master.port.to_string();
    assert_eq!(c.cmd(&["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
    let unblocked = "-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n";
    assert_eq!(w.read_reply(), unblocked);
    assert_eq!(w3.read_reply(), unblocked);
    // Closed after the reply, as Redis does: only `c` and the probe remain.
    wait_for("unblocked clients closed", 10, || {
        common::clients_info_field(&s, "connected_clients") == "2"
    });
}

#[test]
fn debug_cluster_subcommands() {
    let plain = TestServer::start();
    let mut c = plain.raw(2);
    c.check(&[
        (
            &["DEBUG", "CLUSTERLINK", "KILL", "all", "abc"],
            "-ERR Debug option only available for cluster mode enabled setup!\r\n",
        ),
        (&["DEBUG", "DROP-CLUSTER-PACKET-FILTER", "1"], "+OK\r\n"),
        (
            &["DEBUG", "DROP-CLUSTER-PACKET-FILTER", "x"],
            "-ERR value is not an integer or out of range\r\n",
        ),
    ]);
    let s = start_node(&[]);
    let id = myid(s.port);
    let mut c = s.raw(2);
    c.check(&[
        (
            &["DEBUG", "CLUSTERLINK", "KILL", "to", "nosuchnode"],
            "-ERR Unknown node nosuchnode\r\n",
        ),
        (
            &["DEBUG", "CLUSTERLINK", "KILL", "sideways", &id],
            "-ERR Unknown direction sideways\r\n",
        ),
        (&["DEBUG", "CLUSTERLINK", "KILL", "all", &id], "+OK\r\n"),
        (&["DEBUG", "DROP-CLUSTER-PACKET-FILTER", "-1"], "+OK\r\n"),
        (
            &["DEBUG", "CLOSE-CLUSTER-LINK-ON-PACKET-DROP", "1"],
            "+OK\r\n",
        ),
    ]);
}

#[test]
fn cluster_down_unblocks_even_when_reads_are_allowed() {
    let s = start_node(&["--cluster-allow-reads-when-down", "yes"]);
    let mut c = s.raw(2);
    assert_eq!(
        c.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    wait_ok(&[s.port]);
    let mut w = s.raw(2);
    w.send(&["BLPOP", "mylist", "0"]);
    wait_blocked(&s, 1);
    // Another slot goes: full coverage is lost and the cluster is down.
    let other = (keyslot(&mut c, "mylist") + 1) % 16384;
    assert_eq!(
        c.cmd(&["CLUSTER", "DELSLOTS", &other.to_string()]),
        "+OK\r\n"
    );
    assert_eq!(w.read_reply(), "-CLUSTERDOWN The cluster is down\r\n");
}

#[test]
fn send_buffer_limit_frees_links_and_hostnames_are_validated() {
    if !redis_cli_available() {
        return;
    }
    let nodes: Vec<TestServer> = (0..3).map(|_| start_node(&[])).collect();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    cluster_create(&ports, 0);
    wait_ok(&ports);
    let mut c = RawConn::connect(ports[0], 2);
    wait_for("four links", 20, || {
        c.cmd(&["CLUSTER", "LINKS"]).starts_with("*4\r\n")
    });
    let exceeded = |c: &mut RawConn| -> u64 {
        c.cmd(&["CLUSTER", "INFO"])
            .lines()
            .find_map(|l| l.strip_prefix("total_cluster_links_buffer_limit_exceeded:"))
            .map_or(0, |v| v.trim().parse().unwrap())
    };
    assert_eq!(exceeded(&mut c), 0);
    // A one-byte limit frees any link with a send buffer at the next cron run.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "cluster-link-sendbuf-limit", "1"]),
        "+OK\r\n"
    );
    wait_for("a link freed", 10, || exceeded(&mut c) > 0);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "cluster-link-sendbuf-limit", "0"]),
        "+OK\r\n"
    );
    wait_for("links back", 20, || {
        c.cmd(&["CLUSTER", "LINKS"]).starts_with("*4\r\n")
    });
    let info = c.cmd(&["INFO", "memory"]);
    let mem: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("mem_cluster_links:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(mem > 0, "{info}");
    c.check(&[
        (
            &["CONFIG", "SET", "cluster-announce-hostname", "?.com"],
            "-ERR CONFIG SET failed (possibly related to argument 'cluster-announce-hostname') - Hostnames may only contain alphanumeric characters, hyphens or dots\r\n",
        ),
        (
            &["CONFIG", "SET", "cluster-announce-hostname", "host-1.example"],
            "+OK\r\n",
        ),
        (
            &["CONFIG", "SET", "cluster-preferred-endpoint-type", "unknown-endpoint"],
            "+OK\r\n",
        ),
    ]);
    // The preference applies to the very next redirection.
    let foo_owner = owner_of(ports[0], "foo");
    if foo_owner != ports[0] {
        let slot = keyslot(&mut c, "foo");
        assert_eq!(
            c.cmd(&["GET", "foo"]),
            format!("-MOVED {slot} :{foo_owner}\r\n")
        );
    }
}
