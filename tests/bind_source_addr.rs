//! `bind-source-addr`: a replica's link to its master goes out from that address.

mod common;

use common::{wait_until, TestServer};

fn replication_line(s: &TestServer, field: &str) -> Option<String> {
    let info = s.raw(2).cmd(&["INFO", "replication"]);
    info.split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
}

fn follow(master: &TestServer, replica: &TestServer) {
    let mut r = replica.raw(2);
    assert_eq!(
        r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]),
        "+OK\r\n"
    );
    wait_until(|| replication_line(replica, "master_link_status").as_deref() == Some("up"));
}

#[test]
fn replica_link_binds_the_source_address() {
    let master = TestServer::start_with(&["--protected-mode", "no"]);
    let replica = TestServer::start();
    let mut r = replica.raw(2);
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "bind-source-addr", "127.0.0.2"]),
        "+OK\r\n"
    );
    follow(&master, &replica);
    let slave0 = replication_line(&master, "slave0").unwrap();
    assert!(slave0.starts_with("ip=127.0.0.2,"), "{slave0}");
    let list = master.raw(2).cmd(&["CLIENT", "LIST", "TYPE", "replica"]);
    assert!(list.contains(" addr=127.0.0.2:"), "{list}");
}

/// An address this host does not have is skipped (Redis's best-effort binding).
#[test]
fn unusable_source_address_is_skipped() {
    let master = TestServer::start_with(&["--protected-mode", "no"]);
    let replica = TestServer::start();
    let mut r = replica.raw(2);
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "bind-source-addr", "192.0.2.1"]),
        "+OK\r\n"
    );
    follow(&master, &replica);
    let slave0 = replication_line(&master, "slave0").unwrap();
    assert!(slave0.starts_with("ip=127.0.0.1,"), "{slave0}");
}
