//! CLUSTER, READONLY, READWRITE and ASKING. Cinnabar has no cluster mode, so each
//! answers Redis's reply for a server with `cluster-enabled no`; the subcommands are
//! listed (COMMAND, ACL, unknown-subcommand errors behave as Redis's).

use crate::command;
use crate::commands::flags::*;
use crate::commands::{Command, Ctx};
use crate::container;
use crate::protocol::Reply;

const ADMIN_ACL: &[&str] = &["admin", "slow", "dangerous"];
const CONN: &[&str] = &["connection", "fast"];

pub static COMMANDS: &[Command] = &[
    container!(
        "cluster",
        &["slow"],
        "cluster",
        "3.0.0",
        "A container for Redis Cluster commands.",
        CLUSTER_SUBCOMMANDS
    ),
    command!(
        "readonly",
        1,
        FAST | LOADING | STALE,
        (0, 0, 0),
        CONN,
        "cluster",
        "3.0.0",
        "Enables read-only queries for a connection to a Redis Cluster replica node.",
        "O(1)",
        cluster_disabled
    ),
    command!(
        "readwrite",
        1,
        FAST | LOADING | STALE,
        (0, 0, 0),
        CONN,
        "cluster",
        "3.0.0",
        "Enables read-write queries for a connection to a Reids Cluster replica node.",
        "O(1)",
        cluster_disabled
    ),
    command!(
        "asking",
        1,
        FAST,
        (0, 0, 0),
        CONN,
        "cluster",
        "3.0.0",
        "Signals that a cluster client is following an -ASK redirect.",
        "O(1)",
        cluster_disabled
    ),
];

static CLUSTER_SUBCOMMANDS: &[Command] = &[
    command!("cluster|addslots", -3, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Assigns new hash slots to a node.", "O(N) where N is the total number of hash slot arguments", cluster_disabled),
    command!("cluster|addslotsrange", -4, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "7.0.0", "Assigns new hash slot ranges to a node.", "O(N) where N is the total number of the slots between the start slot and end slot arguments.", cluster_disabled),
    command!("cluster|bumpepoch", 2, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Advances the cluster config epoch.", "O(1)", cluster_disabled),
    command!("cluster|count-failure-reports", 3, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Returns the number of active failure reports active for a node.", "O(N) where N is the number of failure reports", cluster_disabled),
    command!("cluster|countkeysinslot", 3, STALE, (0, 0, 0), &["slow"], "cluster", "3.0.0", "Returns the number of keys in a hash slot.", "O(1)", cluster_disabled),
    command!("cluster|delslots", -3, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Sets hash slots as unbound for a node.", "O(N) where N is the total number of hash slot arguments", cluster_disabled),
    command!("cluster|delslotsrange", -4, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "7.0.0", "Sets hash slot ranges as unbound for a node.", "O(N) where N is the total number of the slots between the start slot and end slot arguments.", cluster_disabled),
    command!("cluster|failover", -2, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Forces a replica to perform a manual failover of its master.", "O(1)", cluster_disabled),
    command!("cluster|flushslots", 2, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Deletes all slots information from a node.", "O(1)", cluster_disabled),
    command!("cluster|forget", 3, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Removes a node from the nodes table.", "O(1)", cluster_disabled),
    command!("cluster|getkeysinslot", 4, STALE, (0, 0, 0), &["slow"], "cluster", "3.0.0", "Returns the key names in a hash slot.", "O(N) where N is the number of requested keys", cluster_disabled),
    command!("cluster|help", 2, LOADING | STALE, (0, 0, 0), &["slow"], "cluster", "5.0.0", "Returns helpful text about the different subcommands.", "O(1)", cluster_disabled),
    command!("cluster|info", 2, STALE, (0, 0, 0), &["slow"], "cluster", "3.0.0", "Returns information about the state of a node.", "O(1)", cluster_disabled),
    command!("cluster|keyslot", 3, STALE, (0, 0, 0), &["slow"], "cluster", "3.0.0", "Returns the hash slot for a key.", "O(N) where N is the number of bytes in the key", cluster_disabled),
    command!("cluster|links", 2, STALE, (0, 0, 0), &["slow"], "cluster", "7.0.0", "Returns a list of all TCP links to and from peer nodes.", "O(N) where N is the total number of Cluster nodes", cluster_disabled),
    command!("cluster|meet", -4, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Forces a node to handshake with another node.", "O(1)", cluster_disabled),
    command!("cluster|myid", 2, STALE, (0, 0, 0), &["slow"], "cluster", "3.0.0", "Returns the ID of a node.", "O(1)", cluster_disabled),
    command!("cluster|myshardid", 2, STALE, (0, 0, 0), &["slow"], "cluster", "7.2.0", "Returns the shard ID of a node.", "O(1)", cluster_disabled),
    command!("cluster|nodes", 2, STALE, (0, 0, 0), &["slow"], "cluster", "3.0.0", "Returns the cluster configuration for a node.", "O(N) where N is the total number of Cluster nodes", cluster_disabled),
    command!("cluster|replicas", 3, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "5.0.0", "Lists the replica nodes of a master node.", "O(N) where N is the number of replicas.", cluster_disabled),
    command!("cluster|replicate", 3, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Configure a node as replica of a master node.", "O(1)", cluster_disabled),
    command!("cluster|reset", -2, ADMIN | STALE | NOSCRIPT, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Resets a node.", "O(N) where N is the number of known nodes. The command may execute a FLUSHALL as a side effect.", cluster_disabled),
    command!("cluster|saveconfig", 2, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Forces a node to save the cluster configuration to disk.", "O(1)", cluster_disabled),
    command!("cluster|set-config-epoch", 3, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Sets the configuration epoch for a new node.", "O(1)", cluster_disabled),
    command!("cluster|setslot", -4, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Binds a hash slot to a node.", "O(1)", cluster_disabled),
    command!("cluster|shards", 2, LOADING | STALE, (0, 0, 0), &["slow"], "cluster", "7.0.0", "Returns the mapping of cluster slots to shards.", "O(N) where N is the total number of cluster nodes", cluster_disabled),
    command!("cluster|slaves", 3, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Lists the replica nodes of a master node.", "O(N) where N is the number of replicas.", cluster_disabled),
    command!("cluster|slots", 2, LOADING | STALE, (0, 0, 0), &["slow"], "cluster", "3.0.0", "Returns the mapping of cluster slots to nodes.", "O(N) where N is the total number of Cluster nodes", cluster_disabled),
];

fn cluster_disabled(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    Reply::err("ERR This instance has cluster support disabled")
}
