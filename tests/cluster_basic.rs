//! Cluster mode on one node: CLUSTER subcommands' exact replies, slots, routing
//! errors without peers, SELECT/MOVE/SWAPDB refusals, nodes.conf format and reload.

mod common;
use common::cluster::{myid, start_node, start_node_in};
use common::{temp_dir, TestServer};

#[test]
fn disabled_mode_answers_as_before() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.check(&[
        (
            &["CLUSTER", "INFO"],
            "-ERR This instance has cluster support disabled\r\n",
        ),
        (
            &["READONLY"],
            "-ERR This instance has cluster support disabled\r\n",
        ),
        (
            &["ASKING"],
            "-ERR This instance has cluster support disabled\r\n",
        ),
        (&["SELECT", "1"], "+OK\r\n"),
    ]);
    let info = c.cmd(&["INFO", "cluster"]);
    assert!(info.contains("cluster_enabled:0"), "{info}");
}

#[test]
fn keyslot_and_identity() {
    let s = start_node(&[]);
    let mut c = s.raw(2);
    c.check(&[
        (&["CLUSTER", "KEYSLOT", "123456789"], ":12739\r\n"),
        (&["CLUSTER", "KEYSLOT", "foo"], ":12182\r\n"),
        (&["CLUSTER", "KEYSLOT", "{user1000}.following"], ":3443\r\n"),
        (&["CLUSTER", "KEYSLOT", "user1000"], ":3443\r\n"),
        (&["CLUSTER", "KEYSLOT", "foo{}{bar}"], ":8363\r\n"),
        (
            &["SELECT", "1"],
            "-ERR SELECT is not allowed in cluster mode\r\n",
        ),
        (&["SELECT", "0"], "+OK\r\n"),
        // Key commands are routed first: an unserved slot answers before the command.
        (&["MOVE", "k", "1"], "-CLUSTERDOWN Hash slot not served\r\n"),
        (&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"], "+OK\r\n"),
    ]);
    common::cluster::wait_ok(&[s.port]);
    c.check(&[
        (
            &["MOVE", "k", "1"],
            "-ERR MOVE is not allowed in cluster mode\r\n",
        ),
        (
            &["SWAPDB", "0", "1"],
            "-ERR SWAPDB is not allowed in cluster mode\r\n",
        ),
        (
            &["COPY", "{a}1", "{a}2", "DB", "1"],
            "-ERR Copying to another database is not allowed in cluster mode\r\n",
        ),
        (
            &["REPLICAOF", "127.0.0.1", "1"],
            "-ERR REPLICAOF not allowed in cluster mode.\r\n",
        ),
        (&["READONLY"], "+OK\r\n"),
        (&["READWRITE"], "+OK\r\n"),
        (&["ASKING"], "+OK\r\n"),
    ]);
    let id = myid(s.port);
    assert_eq!(id.len(), 40);
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
    let info = c.cmd(&["INFO", "cluster"]);
    assert!(info.contains("cluster_enabled:1"), "{info}");
    let nodes = c.cmd(&["CLUSTER", "NODES"]);
    let want = format!(":{}@", s.port);
    assert!(nodes.contains(&format!("{id} {want}")), "{nodes}");
    assert!(
        nodes.contains(" myself,master - 0 0 0 connected 0-16383\n"),
        "{nodes}"
    );
    // RESP3: CLUSTER INFO and NODES are verbatim strings.
    let mut c3 = s.raw(3);
    assert!(c3.cmd(&["CLUSTER", "INFO"]).starts_with("="));
}

#[test]
fn slot_assignment_commands() {
    let s = start_node(&[]);
    let mut c = s.raw(2);
    c.check(&[
        (
            &["SET", "foo", "bar"],
            "-CLUSTERDOWN Hash slot not served\r\n",
        ),
        (
            &["CLUSTER", "ADDSLOTS", "16384"],
            "-ERR Invalid or out of range slot\r\n",
        ),
        (
            &["CLUSTER", "ADDSLOTS", "x"],
            "-ERR Invalid or out of range slot\r\n",
        ),
        (
            &["CLUSTER", "ADDSLOTS", "1", "1"],
            "-ERR Slot 1 specified multiple times\r\n",
        ),
        (&["CLUSTER", "ADDSLOTS", "0", "1", "2"], "+OK\r\n"),
        (
            &["CLUSTER", "ADDSLOTS", "2"],
            "-ERR Slot 2 is already busy\r\n",
        ),
        (
            &["CLUSTER", "ADDSLOTSRANGE", "10", "5"],
            "-ERR start slot number 10 is greater than end slot number 5\r\n",
        ),
        (
            &["CLUSTER", "ADDSLOTSRANGE", "10"],
            "-ERR wrong number of arguments for 'cluster|addslotsrange' command\r\n",
        ),
        (&["CLUSTER", "ADDSLOTSRANGE", "3", "16383"], "+OK\r\n"),
        (&["CLUSTER", "DELSLOTS", "5"], "+OK\r\n"),
        (
            &["CLUSTER", "DELSLOTS", "5"],
            "-ERR Slot 5 is already unassigned\r\n",
        ),
        (&["CLUSTER", "DELSLOTSRANGE", "6", "7"], "+OK\r\n"),
        (&["CLUSTER", "ADDSLOTSRANGE", "5", "7"], "+OK\r\n"),
        (
            &["CLUSTER", "COUNTKEYSINSLOT", "16384"],
            "-ERR Invalid slot\r\n",
        ),
        (
            &["CLUSTER", "GETKEYSINSLOT", "0", "-1"],
            "-ERR Invalid slot or number of keys\r\n",
        ),
        (
            &["CLUSTER", "SET-CONFIG-EPOCH", "-1"],
            "-ERR Invalid config epoch specified: -1\r\n",
        ),
        (&["CLUSTER", "SET-CONFIG-EPOCH", "5"], "+OK\r\n"),
        (
            &["CLUSTER", "SET-CONFIG-EPOCH", "6"],
            "-ERR Node config epoch is already non-zero\r\n",
        ),
        (&["CLUSTER", "BUMPEPOCH"], "+STILL 5\r\n"),
        (&["CLUSTER", "FORGET", "x"], "-ERR Unknown node x\r\n"),
        (
            &["CLUSTER", "FAILOVER"],
            "-ERR You should send CLUSTER FAILOVER to a replica\r\n",
        ),
        (&["CLUSTER", "FAILOVER", "bogus"], "-ERR syntax error\r\n"),
        (&["CLUSTER", "REPLICATE", "x"], "-ERR Unknown node x\r\n"),
        (
            &["CLUSTER", "COUNT-FAILURE-REPORTS", "x"],
            "-ERR Unknown node x\r\n",
        ),
        (
            &["CLUSTER", "MEET", "nohost", "1"],
            "-ERR Invalid node address specified: nohost:1\r\n",
        ),
        (
            &["CLUSTER", "MEET", "127.0.0.1", "x"],
            "-ERR Invalid base port specified: x\r\n",
        ),
        (&["CLUSTER", "LINKS"], "*0\r\n"),
        (&["CLUSTER", "SAVECONFIG"], "+OK\r\n"),
    ]);
    let id = myid(s.port);
    c.check(&[
        (
            &["CLUSTER", "FORGET", &id],
            "-ERR I tried hard but I can't forget myself...\r\n",
        ),
        (
            &["CLUSTER", "REPLICATE", &id],
            "-ERR Can't replicate myself\r\n",
        ),
    ]);
    // The state turns ok once every slot is served (after Redis's 2 s writable delay).
    common::cluster::wait_ok(&[s.port]);
    c.check(&[
        (&["SET", "foo", "bar"], "+OK\r\n"),
        (&["SET", "{foo}x", "1"], "+OK\r\n"),
        (&["CLUSTER", "COUNTKEYSINSLOT", "12182"], ":2\r\n"),
        (&["CLUSTER", "GETKEYSINSLOT", "12182", "0"], "*0\r\n"),
    ]);
    let keys = c.cmd(&["CLUSTER", "GETKEYSINSLOT", "12182", "10"]);
    assert!(
        keys.starts_with("*2\r\n") && keys.contains("$3\r\nfoo\r\n"),
        "{keys}"
    );
    c.check(&[
        (
            &["MSET", "a", "1", "b", "2"],
            "-CROSSSLOT Keys in request don't hash to the same slot\r\n",
        ),
        (&["MSET", "{a}1", "1", "{a}2", "2"], "+OK\r\n"),
        (
            &["CLUSTER", "FLUSHSLOTS"],
            "-ERR DB must be empty to perform CLUSTER FLUSHSLOTS.\r\n",
        ),
        (
            &["CLUSTER", "RESET"],
            "-ERR CLUSTER RESET can't be called with master nodes containing keys\r\n",
        ),
        (
            &["EVAL", "return 1", "2", "a", "b"],
            "-CROSSSLOT Keys in request don't hash to the same slot\r\n",
        ),
        (&["EVAL", "return 1", "2", "{a}x", "{a}y"], ":1\r\n"),
        (&["MULTI"], "+OK\r\n"),
        (&["SET", "a", "1"], "+QUEUED\r\n"),
        (&["SET", "b", "1"], "+QUEUED\r\n"),
        (
            &["EXEC"],
            "-CROSSSLOT Keys in request don't hash to the same slot\r\n",
        ),
        (&["FLUSHALL"], "+OK\r\n"),
        (&["CLUSTER", "FLUSHSLOTS"], "+OK\r\n"),
        (
            &["SET", "foo", "bar"],
            "-CLUSTERDOWN Hash slot not served\r\n",
        ),
    ]);
}

#[test]
fn nodes_conf_is_written_and_reloaded() {
    let dir = temp_dir("nodesconf");
    let (id, port) =
        {
            let s = start_node_in(&dir, &[]);
            let mut c = s.raw(2);
            c.check(&[
                (
                    &["CLUSTER", "ADDSLOTSRANGE", "0", "99", "200", "200"],
                    "+OK\r\n",
                ),
                (&["CLUSTER", "SET-CONFIG-EPOCH", "7"], "+OK\r\n"),
                (&["CLUSTER", "SAVECONFIG"], "+OK\r\n"),
            ]);
            let id = myid(s.port);
            let conf = std::fs::read_to_string(dir.join("nodes.conf")).unwrap();
            let lines: Vec<&str> = conf.lines().collect();
            assert_eq!(lines.len(), 2, "{conf}");
            let shard = {
                let r = c.cmd(&["CLUSTER", "MYSHARDID"]);
                r.lines().nth(1).unwrap().to_string()
            };
            assert_eq!(
                lines[0],
                format!(
                "{id} :{}@{},,tls-port=0,shard-id={shard} myself,master - 0 0 7 connected 0-99 200",
                s.port,
                lines[0].split('@').nth(1).unwrap().split(',').next().unwrap()
            )
            );
            assert_eq!(lines[1], "vars currentEpoch 7 lastVoteEpoch 0");
            (id, s.port)
        };
    let _ = port;
    // A restart on the same directory keeps the id, the epochs and the slots.
    let s = start_node_in(&dir, &[]);
    assert_eq!(myid(s.port), id);
    let mut c = s.raw(2);
    let nodes = c.cmd(&["CLUSTER", "NODES"]);
    assert!(
        nodes.contains(" myself,master - 0 0 7 connected 0-99 200\n"),
        "{nodes}"
    );
    let info = c.cmd(&["CLUSTER", "INFO"]);
    assert!(info.contains("cluster_current_epoch:7\r\n"), "{info}");
    assert!(info.contains("cluster_slots_assigned:101\r\n"), "{info}");
    drop(s);
    // A corrupted file stops the server instead of starting with a new identity.
    std::fs::write(dir.join("nodes.conf"), "garbage line\n").unwrap();
    let cport = common::free_port().to_string();
    assert!(TestServer::try_start_in(
        &dir,
        &[
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            &cport,
            "--appendonly",
            "no",
            "--save",
            ""
        ]
    )
    .is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hard_reset_takes_a_new_identity() {
    let s = start_node(&[]);
    let mut c = s.raw(2);
    let id = myid(s.port);
    c.check(&[
        (&["CLUSTER", "ADDSLOTS", "1"], "+OK\r\n"),
        (&["CLUSTER", "SET-CONFIG-EPOCH", "3"], "+OK\r\n"),
        (&["CLUSTER", "RESET", "SOFT"], "+OK\r\n"),
    ]);
    assert_eq!(myid(s.port), id);
    c.check(&[(&["CLUSTER", "RESET", "HARD"], "+OK\r\n")]);
    assert_ne!(myid(s.port), id);
    let info = c.cmd(&["CLUSTER", "INFO"]);
    assert!(info.contains("cluster_slots_assigned:0\r\n"), "{info}");
    assert!(info.contains("cluster_current_epoch:0\r\n"), "{info}");
}

/// A script that may write (a shebang without `no-writes`, a function without it) is a
/// write for cluster routing, as Redis's getCommandFlags: a READONLY client of a
/// replica is sent to the master with MOVED (queued in MULTI too, which then aborts),
/// while read-only scripts and legacy scripts (no shebang) run on the replica.
#[test]
fn scripts_that_may_write_are_moved_from_a_replica() {
    let master = start_node(&[]);
    let replica = start_node(&[]);
    let replica_bus = common::cluster::bus_port(replica.port);
    let mut m = master.raw(2);
    assert_eq!(
        m.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    let (rport, rbus) = (replica.port.to_string(), replica_bus.to_string());
    assert_eq!(
        m.cmd(&["CLUSTER", "MEET", "127.0.0.1", &rport, &rbus]),
        "+OK\r\n"
    );
    let master_id = myid(master.port);
    let mut r = replica.raw(2);
    common::cluster::wait_for("the replica to know the master", 30, || {
        r.cmd(&["CLUSTER", "NODES"]).contains(&master_id)
    });
    assert_eq!(r.cmd(&["CLUSTER", "REPLICATE", &master_id]), "+OK\r\n");
    common::cluster::wait_ok(&[master.port, replica.port]);
    common::cluster::wait_for("the replication link", 30, || {
        r.cmd(&["INFO", "replication"])
            .contains("master_link_status:up")
    });
    assert_eq!(m.cmd(&["SET", "a", "1"]), "+OK\r\n");
    let lib = "#!lua name=lib\nredis.register_function('w', function(k) return redis.call('del', k[1]) end)\nredis.register_function{function_name='r', callback=function(k) return redis.call('get', k[1]) end, flags={'no-writes'}}";
    assert_eq!(m.cmd(&["FUNCTION", "LOAD", lib]), "$3\r\nlib\r\n");
    common::cluster::wait_for("the write and the library on the replica", 30, || {
        r.cmd(&["READONLY"]);
        r.cmd(&["GET", "a"]) == "$1\r\n1\r\n" && r.cmd(&["FUNCTION", "LIST"]).contains("lib")
    });
    let moved = format!("-MOVED 15495 127.0.0.1:{}\r\n", master.port);
    r.check(&[
        (&["READONLY"], "+OK\r\n"),
        (
            &["EVAL", "#!lua\nreturn redis.call('del', KEYS[1])", "1", "a"],
            &moved,
        ),
        (&["FCALL", "w", "1", "a"], &moved),
        (
            &[
                "EVAL",
                "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])",
                "1",
                "a",
            ],
            "$1\r\n1\r\n",
        ),
        (
            &["EVAL", "return redis.call('get', KEYS[1])", "1", "a"],
            "$1\r\n1\r\n",
        ),
        (&["FCALL_RO", "r", "1", "a"], "$1\r\n1\r\n"),
        (&["FCALL", "r", "1", "a"], "$1\r\n1\r\n"),
        // Queued, it is refused at once and the transaction aborts, as a queued write.
        (&["MULTI"], "+OK\r\n"),
        (&["GET", "a"], "+QUEUED\r\n"),
        (
            &["EVAL", "#!lua\nreturn redis.call('del', KEYS[1])", "1", "a"],
            &moved,
        ),
        (
            &["EXEC"],
            "-EXECABORT Transaction discarded because of previous errors.\r\n",
        ),
    ]);
}

/// A slot that loses its owner takes its shard channels with it: each subscriber gets
/// `sunsubscribe` for them (Redis's removeChannelsInSlot), and keeps its others.
#[test]
fn shard_channels_of_a_released_slot_are_unsubscribed() {
    let s = start_node(&[]);
    let mut c = s.raw(2);
    assert_eq!(
        c.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    common::cluster::wait_ok(&[s.port]);
    let mut sub = s.raw(2);
    sub.send(&["SSUBSCRIBE", "{a}1", "{a}2"]);
    assert_eq!(
        sub.read_reply(),
        "*3\r\n$10\r\nssubscribe\r\n$4\r\n{a}1\r\n:1\r\n"
    );
    assert_eq!(
        sub.read_reply(),
        "*3\r\n$10\r\nssubscribe\r\n$4\r\n{a}2\r\n:2\r\n"
    );
    assert_eq!(
        sub.cmd(&["SSUBSCRIBE", "b"]),
        "*3\r\n$10\r\nssubscribe\r\n$1\r\nb\r\n:3\r\n"
    );
    assert_eq!(c.cmd(&["CLUSTER", "DELSLOTS", "15495"]), "+OK\r\n");
    let (first, second) = (sub.read_reply(), sub.read_reply());
    // Either channel may go first; the counts say what is left.
    let name = |r: &str| r.split("\r\n").nth(4).unwrap().to_string();
    let mut names = vec![name(&first), name(&second)];
    names.sort();
    assert_eq!(names, ["{a}1", "{a}2"]);
    assert_eq!(
        first,
        format!(
            "*3\r\n$12\r\nsunsubscribe\r\n$4\r\n{}\r\n:2\r\n",
            name(&first)
        )
    );
    assert_eq!(
        second,
        format!(
            "*3\r\n$12\r\nsunsubscribe\r\n$4\r\n{}\r\n:1\r\n",
            name(&second)
        )
    );
    assert_eq!(
        c.cmd(&["PUBSUB", "SHARDNUMSUB", "{a}1", "b"]),
        "*4\r\n$4\r\n{a}1\r\n:0\r\n$1\r\nb\r\n:1\r\n"
    );
    assert_eq!(c.cmd(&["SPUBLISH", "b", "hi"]), ":1\r\n");
    assert_eq!(
        sub.read_reply(),
        "*3\r\n$8\r\nsmessage\r\n$1\r\nb\r\n$2\r\nhi\r\n"
    );
}

/// A replica that moves to another master drops the shard channels of the slots its
/// new master does not serve, each subscriber told with `sunsubscribe` (Redis's
/// clusterSetMaster).
#[test]
fn a_replica_moved_to_another_master_unsubscribes_its_old_shard_channels() {
    let (a, b, r) = (start_node(&[]), start_node(&[]), start_node(&[]));
    let mut ca = a.raw(2);
    assert_eq!(
        ca.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]),
        "+OK\r\n"
    );
    assert_eq!(
        b.raw(2).cmd(&["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]),
        "+OK\r\n"
    );
    for n in [&b, &r] {
        let (port, bus) = (n.port.to_string(), common::cluster::bus_port(n.port));
        assert_eq!(
            ca.cmd(&["CLUSTER", "MEET", "127.0.0.1", &port, &bus.to_string()]),
            "+OK\r\n"
        );
    }
    common::cluster::wait_for("three nodes known to the replica", 30, || {
        common::cluster::cluster_info_field(r.port, "cluster_known_nodes") == "3"
    });
    let (id_a, id_b) = (myid(a.port), myid(b.port));
    let mut cr = r.raw(2);
    assert_eq!(cr.cmd(&["CLUSTER", "REPLICATE", &id_a]), "+OK\r\n");
    common::cluster::wait_ok(&[a.port, b.port, r.port]);
    // Channel "b" hashes to slot 3300, served by the first master and its replica.
    let mut sub = r.raw(2);
    assert_eq!(
        sub.cmd(&["SSUBSCRIBE", "b"]),
        "*3\r\n$10\r\nssubscribe\r\n$1\r\nb\r\n:1\r\n"
    );
    assert_eq!(cr.cmd(&["CLUSTER", "REPLICATE", &id_b]), "+OK\r\n");
    assert_eq!(
        sub.read_reply(),
        "*3\r\n$12\r\nsunsubscribe\r\n$1\r\nb\r\n:0\r\n"
    );
    assert_eq!(
        cr.cmd(&["PUBSUB", "SHARDNUMSUB", "b"]),
        "*2\r\n$1\r\nb\r\n:0\r\n"
    );
}

/// In cluster mode SORT's BY and GET patterns must name keys of the sorted key's own
/// slot: a hash tag decides it, a wildcard before one does not (Redis's
/// patternHashSlot). `GET #` is the element itself.
#[test]
fn sort_patterns_stay_in_the_sorted_keys_slot() {
    let s = start_node(&[]);
    let mut c = s.raw(2);
    assert_eq!(
        c.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    common::wait_until(|| c.cmd(&["CLUSTER", "INFO"]).contains("cluster_state:ok"));
    c.cmd(&["RPUSH", "{t}list", "2", "1"]);
    c.cmd(&["SET", "{t}w_1", "20"]);
    c.cmd(&["SET", "{t}w_2", "10"]);
    let by = "-ERR BY option of SORT denied in Cluster mode when keys formed by the pattern may be in different slots.\r\n";
    let get = "-ERR GET option of SORT denied in Cluster mode when keys formed by the pattern may be in different slots.\r\n";
    c.check(&[
        (
            &["SORT", "{t}list", "BY", "{t}w_*"],
            "*2\r\n$1\r\n2\r\n$1\r\n1\r\n",
        ),
        (&["SORT", "{t}list", "BY", "w_*"], by),
        (&["SORT", "{t}list", "BY", "*{t}"], by),
        (
            &["SORT", "{t}list", "BY", "nosort"],
            "*2\r\n$1\r\n2\r\n$1\r\n1\r\n",
        ),
        (
            &["SORT", "{t}list", "GET", "#", "GET", "{t}w_*"],
            "*4\r\n$1\r\n1\r\n$2\r\n20\r\n$1\r\n2\r\n$2\r\n10\r\n",
        ),
        (&["SORT", "{t}list", "GET", "{u}w_*"], get),
    ]);
}
