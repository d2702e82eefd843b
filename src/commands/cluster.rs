//! CLUSTER, READONLY, READWRITE and ASKING, as Redis 7.4 replies them. With
//! `cluster-enabled no` each answers Redis's "cluster support disabled" error; in
//! cluster mode they read and change the cluster state (src/cluster).

use crate::cluster::node::NodeId;
use crate::cluster::slot::{self, key_slot, SLOTS};
use crate::cluster::{gossip, wire, Cluster, Endpoint, TODO_SAVE_CONFIG, TODO_UPDATE_STATE};
use crate::command;
use crate::commands::flags::*;
use crate::commands::{errors, is, Command, Ctx};
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
        readonly
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
        readwrite
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
        asking
    ),
];

static CLUSTER_SUBCOMMANDS: &[Command] = &[
    command!("cluster|addslots", -3, ADMIN | STALE | NO_ASYNC_LOADING, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Assigns new hash slots to a node.", "O(N) where N is the total number of hash slot arguments", cluster_addslots),
    command!("cluster|addslotsrange", -4, ADMIN | STALE | NO_ASYNC_LOADING, (0, 0, 0), ADMIN_ACL, "cluster", "7.0.0", "Assigns new hash slot ranges to a node.", "O(N) where N is the total number of the slots between the start slot and end slot arguments.", cluster_addslotsrange),
    command!("cluster|bumpepoch", 2, ADMIN | STALE | NO_ASYNC_LOADING, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Advances the cluster config epoch.", "O(1)", cluster_bumpepoch),
    command!("cluster|count-failure-reports", 3, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Returns the number of active failure reports active for a node.", "O(N) where N is the number of failure reports", cluster_count_failure_reports),
    command!("cluster|countkeysinslot", 3, STALE, (0, 0, 0), &["slow"], "cluster", "3.0.0", "Returns the number of keys in a hash slot.", "O(1)", cluster_countkeysinslot),
    command!("cluster|delslots", -3, ADMIN | STALE | NO_ASYNC_LOADING, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Sets hash slots as unbound for a node.", "O(N) where N is the total number of hash slot arguments", cluster_delslots),
    command!("cluster|delslotsrange", -4, ADMIN | STALE | NO_ASYNC_LOADING, (0, 0, 0), ADMIN_ACL, "cluster", "7.0.0", "Sets hash slot ranges as unbound for a node.", "O(N) where N is the total number of the slots between the start slot and end slot arguments.", cluster_delslotsrange),
    command!("cluster|failover", -2, ADMIN | STALE | NO_ASYNC_LOADING, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Forces a replica to perform a manual failover of its master.", "O(1)", cluster_failover),
    command!("cluster|flushslots", 2, ADMIN | STALE | NO_ASYNC_LOADING, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Deletes all slots information from a node.", "O(1)", cluster_flushslots),
    command!("cluster|forget", 3, ADMIN | STALE | NO_ASYNC_LOADING, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Removes a node from the nodes table.", "O(1)", cluster_forget),
    command!("cluster|getkeysinslot", 4, STALE, (0, 0, 0), &["slow"], "cluster", "3.0.0", "Returns the key names in a hash slot.", "O(N) where N is the number of requested keys", cluster_getkeysinslot),
    command!("cluster|help", 2, LOADING | STALE, (0, 0, 0), &["slow"], "cluster", "5.0.0", "Returns helpful text about the different subcommands.", "O(1)", cluster_help),
    command!("cluster|info", 2, STALE, (0, 0, 0), &["slow"], "cluster", "3.0.0", "Returns information about the state of a node.", "O(1)", cluster_info),
    command!("cluster|keyslot", 3, STALE, (0, 0, 0), &["slow"], "cluster", "3.0.0", "Returns the hash slot for a key.", "O(N) where N is the number of bytes in the key", cluster_keyslot),
    command!("cluster|links", 2, STALE, (0, 0, 0), &["slow"], "cluster", "7.0.0", "Returns a list of all TCP links to and from peer nodes.", "O(N) where N is the total number of Cluster nodes", cluster_links),
    command!("cluster|meet", -4, ADMIN | STALE | NO_ASYNC_LOADING, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Forces a node to handshake with another node.", "O(1)", cluster_meet),
    command!("cluster|myid", 2, STALE, (0, 0, 0), &["slow"], "cluster", "3.0.0", "Returns the ID of a node.", "O(1)", cluster_myid),
    command!("cluster|myshardid", 2, STALE, (0, 0, 0), &["slow"], "cluster", "7.2.0", "Returns the shard ID of a node.", "O(1)", cluster_myshardid),
    command!("cluster|nodes", 2, STALE, (0, 0, 0), &["slow"], "cluster", "3.0.0", "Returns the cluster configuration for a node.", "O(N) where N is the total number of Cluster nodes", cluster_nodes),
    command!("cluster|replicas", 3, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "5.0.0", "Lists the replica nodes of a master node.", "O(N) where N is the number of replicas.", cluster_replicas),
    command!("cluster|replicate", 3, ADMIN | STALE | NO_ASYNC_LOADING, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Configure a node as replica of a master node.", "O(1)", cluster_replicate),
    command!("cluster|reset", -2, ADMIN | STALE | NOSCRIPT, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Resets a node.", "O(N) where N is the number of known nodes. The command may execute a FLUSHALL as a side effect.", cluster_reset),
    command!("cluster|saveconfig", 2, ADMIN | STALE | NO_ASYNC_LOADING, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Forces a node to save the cluster configuration to disk.", "O(1)", cluster_saveconfig),
    command!("cluster|set-config-epoch", 3, ADMIN | STALE | NO_ASYNC_LOADING, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Sets the configuration epoch for a new node.", "O(1)", cluster_set_config_epoch),
    command!("cluster|setslot", -4, ADMIN | STALE | NO_ASYNC_LOADING, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Binds a hash slot to a node.", "O(1)", cluster_setslot),
    command!("cluster|shards", 2, LOADING | STALE, (0, 0, 0), &["slow"], "cluster", "7.0.0", "Returns the mapping of cluster slots to shards.", "O(N) where N is the total number of cluster nodes", cluster_shards),
    command!("cluster|slaves", 3, ADMIN | STALE, (0, 0, 0), ADMIN_ACL, "cluster", "3.0.0", "Lists the replica nodes of a master node.", "O(N) where N is the number of replicas.", cluster_replicas),
    command!("cluster|slots", 2, LOADING | STALE, (0, 0, 0), &["slow"], "cluster", "3.0.0", "Returns the mapping of cluster slots to nodes.", "O(N) where N is the total number of Cluster nodes", cluster_slots),
];

const DISABLED: Reply = Reply::err("ERR This instance has cluster support disabled");
const INVALID_SLOT: Reply = Reply::err("ERR Invalid or out of range slot");

/// Runs `f` with the cluster state taken out of the executor (so it may use both),
/// or answers the disabled error.
fn with_cluster(ctx: &mut Ctx, f: impl FnOnce(&mut Cluster, &mut Ctx) -> Reply) -> Reply {
    let Some(mut cl) = ctx.ex.cluster.take() else {
        return DISABLED;
    };
    // Announced ports and names changed by CONFIG SET show at once.
    crate::cluster::apply_settings(&mut cl, ctx.ex);
    let reply = f(&mut cl, ctx);
    ctx.ex.cluster = Some(cl);
    reply
}

fn readonly(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    if ctx.ex.cluster.is_none() {
        return DISABLED;
    }
    ctx.client().cluster_readonly = true;
    Reply::ok()
}

fn readwrite(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    if ctx.ex.cluster.is_none() {
        return DISABLED;
    }
    ctx.client().cluster_readonly = false;
    Reply::ok()
}

fn asking(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    if ctx.ex.cluster.is_none() {
        return DISABLED;
    }
    ctx.client().cluster_asking = true;
    Reply::ok()
}

fn parse_slot(a: &[u8]) -> Result<usize, Reply> {
    match crate::util::numeric::parse_i64(a) {
        Some(n) if (0..SLOTS as i64).contains(&n) => Ok(n as usize),
        _ => Err(INVALID_SLOT),
    }
}

fn unknown_node(a: &[u8]) -> Reply {
    Reply::error(format!("ERR Unknown node {}", String::from_utf8_lossy(a)))
}

fn cluster_help(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    if ctx.ex.cluster.is_none() {
        return DISABLED;
    }
    crate::commands::keys::help_reply("CLUSTER", HELP)
}

const HELP: &[&str] = &[
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MYID",
    "    Return the node id.",
    "MYSHARDID",
    "    Return the node's shard id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port@bus-port[,hostname]> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "REPLICAS <node-id>",
    "    Return <node-id> replicas.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "ADDSLOTS <slot> [<slot> ...]",
    "    Assign slots to current node.",
    "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Assign slots which are between <start-slot> and <end-slot> to current node.",
    "BUMPEPOCH",
    "    Advance the cluster config epoch.",
    "COUNT-FAILURE-REPORTS <node-id>",
    "    Return number of failure reports for <node-id>.",
    "DELSLOTS <slot> [<slot> ...]",
    "    Delete slots information from current node.",
    "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
    "FAILOVER [FORCE|TAKEOVER]",
    "    Promote current replica node to being a master.",
    "FORGET <node-id>",
    "    Remove a node from the cluster.",
    "FLUSHSLOTS",
    "    Delete current node own slots information.",
    "MEET <ip> <port> [<bus-port>]",
    "    Connect nodes into a working cluster.",
    "REPLICATE <node-id>",
    "    Configure current node as replica to <node-id>.",
    "RESET [HARD|SOFT]",
    "    Reset current node (default: soft).",
    "SET-CONFIG-EPOCH <epoch>",
    "    Set config epoch of current node.",
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "    Set slot state.",
    "SAVECONFIG",
    "    Force saving cluster configuration on disk.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes of a link",
];

fn cluster_keyslot(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if ctx.ex.cluster.is_none() {
        return DISABLED;
    }
    Reply::Int(key_slot(args[2]) as i64)
}

fn cluster_myid(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    with_cluster(ctx, |cl, _| Reply::bulk(&cl.me().name))
}

fn cluster_myshardid(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    with_cluster(ctx, |cl, _| Reply::bulk(&cl.me().shard_id))
}

fn cluster_info(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    with_cluster(ctx, |cl, _| {
        let (mut assigned, mut ok, mut pfail, mut fail) = (0, 0, 0, 0);
        for s in cl.slots.iter().flatten() {
            assigned += 1;
            let n = cl.node(*s);
            if n.failed() {
                fail += 1;
            } else if n.timed_out() {
                pfail += 1;
            } else {
                ok += 1;
            }
        }
        let me = cl.me();
        let my_epoch = match (me.is_replica(), me.replica_of) {
            (true, Some(m)) => cl.node(m).config_epoch,
            _ => me.config_epoch,
        };
        let mut s = format!(
            "cluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{ok}\r\ncluster_slots_pfail:{pfail}\r\ncluster_slots_fail:{fail}\r\ncluster_known_nodes:{}\r\ncluster_size:{}\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{my_epoch}\r\n",
            if cl.state_ok { "ok" } else { "fail" },
            cl.node_count(),
            cl.size,
            cl.current_epoch,
        );
        let mut total = 0;
        for (i, &n) in cl.stats_sent.iter().enumerate() {
            if n > 0 {
                total += n;
                s.push_str(&format!(
                    "cluster_stats_messages_{}_sent:{n}\r\n",
                    wire::TYPE_NAMES[i]
                ));
            }
        }
        s.push_str(&format!("cluster_stats_messages_sent:{total}\r\n"));
        let mut total = 0;
        for (i, &n) in cl.stats_received.iter().enumerate() {
            if n > 0 {
                total += n;
                s.push_str(&format!(
                    "cluster_stats_messages_{}_received:{n}\r\n",
                    wire::TYPE_NAMES[i]
                ));
            }
        }
        s.push_str(&format!("cluster_stats_messages_received:{total}\r\n"));
        s.push_str(&format!(
            "total_cluster_links_buffer_limit_exceeded:{}\r\n",
            cl.links_buffer_limit_exceeded
        ));
        Reply::Verbatim("txt", s.into_bytes())
    })
}

fn cluster_nodes(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    let tls = ctx.client_ref().tls;
    with_cluster(ctx, |cl, _| {
        Reply::Verbatim("txt", cl.describe_all(false, tls).into_bytes())
    })
}

fn cluster_replicas(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let tls = ctx.client_ref().tls;
    with_cluster(ctx, |cl, _| {
        let Some(n) = cl.lookup(args[2]) else {
            return unknown_node(args[2]);
        };
        if cl.node(n).is_replica() {
            return Reply::err("ERR The specified node is not a master");
        }
        Reply::Array(
            cl.node(n)
                .replicas
                .iter()
                .map(|&r| Reply::Bulk(cl.describe(r, false, tls).into_bytes()))
                .collect(),
        )
    })
}

/// One node of CLUSTER SLOTS: endpoint, port, id, and the other address forms.
fn slots_node(cl: &Cluster, id: NodeId, tls: bool) -> Reply {
    let n = cl.node(id);
    let endpoint = match cl.settings.preferred_endpoint {
        Endpoint::Ip => Reply::bulk(n.ip.as_bytes()),
        Endpoint::Hostname if !n.hostname.is_empty() => Reply::bulk(n.hostname.as_bytes()),
        Endpoint::Hostname => Reply::bulk(b"?"),
        Endpoint::Unknown => Reply::Null,
    };
    let mut extra = Vec::new();
    if cl.settings.preferred_endpoint != Endpoint::Ip {
        extra.push((Reply::bulk(b"ip"), Reply::bulk(n.ip.as_bytes())));
    }
    if cl.settings.preferred_endpoint != Endpoint::Hostname && !n.hostname.is_empty() {
        extra.push((Reply::bulk(b"hostname"), Reply::bulk(n.hostname.as_bytes())));
    }
    Reply::Array(vec![
        endpoint,
        Reply::Int(n.client_port(tls) as i64),
        Reply::bulk(&n.name),
        Reply::Map(extra),
    ])
}

fn replica_available(cl: &Cluster, ex: &crate::exec::Executor, id: NodeId) -> bool {
    let n = cl.node(id);
    if n.failed() {
        return false;
    }
    let offset = if id == cl.myself {
        crate::cluster::failover::my_offset(ex)
    } else {
        n.repl_offset
    };
    offset != 0
}

fn cluster_slots(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    let tls = ctx.client_ref().tls;
    with_cluster(ctx, |cl, ctx| {
        let mut out = Vec::new();
        let mut s = 0;
        while s < SLOTS {
            let Some(owner) = cl.slots[s] else {
                s += 1;
                continue;
            };
            let mut e = s;
            while e + 1 < SLOTS && cl.slots[e + 1] == Some(owner) {
                e += 1;
            }
            let mut entry = vec![
                Reply::Int(s as i64),
                Reply::Int(e as i64),
                slots_node(cl, owner, tls),
            ];
            for &r in &cl.node(owner).replicas {
                if replica_available(cl, ctx.ex, r) {
                    entry.push(slots_node(cl, r, tls));
                }
            }
            out.push(Reply::Array(entry));
            s = e + 1;
        }
        Reply::Array(out)
    })
}

fn shard_node(cl: &Cluster, ex: &crate::exec::Executor, id: NodeId) -> Reply {
    let n = cl.node(id);
    let b = |s: &str| Reply::bulk(s.as_bytes());
    let mut m = vec![(b("id"), Reply::bulk(&n.name))];
    if n.tcp_port != 0 {
        m.push((b("port"), Reply::Int(n.tcp_port as i64)));
    }
    if n.tls_port != 0 {
        m.push((b("tls-port"), Reply::Int(n.tls_port as i64)));
    }
    m.push((b("ip"), b(&n.ip)));
    m.push((b("endpoint"), b(&cl.endpoint(id))));
    if !n.hostname.is_empty() {
        m.push((b("hostname"), b(&n.hostname)));
    }
    let offset = if id == cl.myself {
        crate::cluster::failover::my_offset(ex)
    } else {
        n.repl_offset
    };
    m.push((
        b("role"),
        b(if n.is_replica() { "replica" } else { "master" }),
    ));
    m.push((b("replication-offset"), Reply::Int(offset as i64)));
    let health = if n.failed() {
        "fail"
    } else if n.is_replica() && offset == 0 {
        "loading"
    } else {
        "online"
    };
    m.push((b("health"), b(health)));
    Reply::Map(m)
}

fn cluster_shards(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    with_cluster(ctx, |cl, ctx| {
        // Shards in order of first appearance of their id among the nodes.
        let mut shards: Vec<(crate::cluster::node::NodeName, Vec<NodeId>)> = Vec::new();
        for id in cl.node_ids() {
            let sid = cl.node(id).shard_id;
            match shards.iter_mut().find(|(s, _)| *s == sid) {
                Some((_, v)) => v.push(id),
                None => shards.push((sid, vec![id])),
            }
        }
        let mut out = Vec::new();
        for (_, nodes) in shards {
            let master = cl.master_of(nodes[0]).unwrap_or(nodes[0]);
            let mut slots = Vec::new();
            for (a, b) in slot::ranges(|x| cl.slots[x] == Some(master)) {
                slots.push(Reply::Int(a as i64));
                slots.push(Reply::Int(b as i64));
            }
            out.push(Reply::Map(vec![
                (Reply::bulk(b"slots"), Reply::Array(slots)),
                (
                    Reply::bulk(b"nodes"),
                    Reply::Array(nodes.iter().map(|&n| shard_node(cl, ctx.ex, n)).collect()),
                ),
            ]));
        }
        Reply::Array(out)
    })
}

fn cluster_countkeysinslot(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if ctx.ex.cluster.is_none() {
        return DISABLED;
    }
    let Some(s) = crate::util::numeric::parse_i64(args[2]) else {
        return errors::NOT_INTEGER;
    };
    if !(0..SLOTS as i64).contains(&s) {
        return Reply::err("ERR Invalid slot");
    }
    Reply::Int(gossip::count_keys_in_slot(ctx.ex, s as usize) as i64)
}

fn cluster_getkeysinslot(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if ctx.ex.cluster.is_none() {
        return DISABLED;
    }
    let (Some(s), Some(max)) = (
        crate::util::numeric::parse_i64(args[2]),
        crate::util::numeric::parse_i64(args[3]),
    ) else {
        return errors::NOT_INTEGER;
    };
    if !(0..SLOTS as i64).contains(&s) || max < 0 {
        return Reply::err("ERR Invalid slot or number of keys");
    }
    let keys = gossip::keys_in_slot(ctx.ex, s as usize, max as usize);
    Reply::Array(keys.into_iter().map(Reply::Bulk).collect())
}

fn cluster_meet(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if args.len() > 5 {
        return if ctx.ex.cluster.is_none() {
            DISABLED
        } else {
            crate::commands::unknown_subcommand(args)
        };
    }
    with_cluster(ctx, |cl, _| {
        let text = |a: &[u8]| String::from_utf8_lossy(a).into_owned();
        let Some(port) = crate::util::numeric::parse_i64(args[3]) else {
            return Reply::error(format!(
                "ERR Invalid base port specified: {}",
                text(args[3])
            ));
        };
        let cport = if args.len() == 5 {
            match crate::util::numeric::parse_i64(args[4]) {
                Some(c) => c,
                None => {
                    return Reply::error(format!(
                        "ERR Invalid bus port specified: {}",
                        text(args[4])
                    ))
                }
            }
        } else {
            port + 10000
        };
        let valid = (1..=65535).contains(&port) && (1..=65535).contains(&cport);
        let ip = text(args[2]);
        if !valid || !gossip::start_handshake(cl, &ip, port as u16, cport as u16) {
            return Reply::error(format!(
                "ERR Invalid node address specified: {}:{}",
                ip,
                text(args[3])
            ));
        }
        Reply::ok()
    })
}

fn cluster_flushslots(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    with_cluster(ctx, |cl, ctx| {
        if !ctx.ex.ks.dbs[0].table.is_empty() {
            return Reply::err("ERR DB must be empty to perform CLUSTER FLUSHSLOTS.");
        }
        let me = cl.myself;
        cl.del_node_slots(me);
        cl.todo |= TODO_UPDATE_STATE | TODO_SAVE_CONFIG;
        Reply::ok()
    })
}

/// ADDSLOTS/DELSLOTS(RANGE): checks every slot first, then applies them all.
fn update_slots(cl: &mut Cluster, ranges: &[(usize, usize)], del: bool) -> Reply {
    let mut seen = vec![false; SLOTS];
    for &(a, b) in ranges {
        #[allow(clippy::needless_range_loop)] // `s` also names the slot in the errors.
        for s in a..=b {
            if del && cl.slots[s].is_none() {
                return Reply::error(format!("ERR Slot {s} is already unassigned"));
            } else if !del && cl.slots[s].is_some() {
                return Reply::error(format!("ERR Slot {s} is already busy"));
            }
            if std::mem::replace(&mut seen[s], true) {
                return Reply::error(format!("ERR Slot {s} specified multiple times"));
            }
        }
    }
    let me = cl.myself;
    for (s, _) in seen.iter().enumerate().filter(|(_, &x)| x) {
        cl.importing.remove(&s);
        if del {
            cl.del_slot(s);
        } else {
            cl.add_slot(me, s);
        }
    }
    cl.todo |= TODO_UPDATE_STATE | TODO_SAVE_CONFIG;
    Reply::ok()
}

fn slots_args(args: &[&[u8]]) -> Result<Vec<usize>, Reply> {
    args.iter().map(|a| parse_slot(a)).collect()
}

fn cluster_addslots(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    with_cluster(ctx, |cl, _| match slots_args(&args[2..]) {
        Ok(v) => update_slots(cl, &v.iter().map(|&s| (s, s)).collect::<Vec<_>>(), false),
        Err(e) => e,
    })
}

fn cluster_delslots(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    with_cluster(ctx, |cl, _| match slots_args(&args[2..]) {
        Ok(v) => update_slots(cl, &v.iter().map(|&s| (s, s)).collect::<Vec<_>>(), true),
        Err(e) => e,
    })
}

fn slot_ranges(args: &[&[u8]], name: &str) -> Result<Vec<(usize, usize)>, Reply> {
    if args.len() % 2 == 1 {
        return Err(crate::commands::wrong_arity(name));
    }
    let mut out = Vec::new();
    for pair in args[2..].chunks(2) {
        let a = parse_slot(pair[0])?;
        let b = parse_slot(pair[1])?;
        if a > b {
            return Err(Reply::error(format!(
                "ERR start slot number {a} is greater than end slot number {b}"
            )));
        }
        out.push((a, b));
    }
    Ok(out)
}

fn cluster_addslotsrange(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    with_cluster(ctx, |cl, _| {
        match slot_ranges(args, "cluster|addslotsrange") {
            Ok(r) => update_slots(cl, &r, false),
            Err(e) => e,
        }
    })
}

fn cluster_delslotsrange(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    with_cluster(ctx, |cl, _| {
        match slot_ranges(args, "cluster|delslotsrange") {
            Ok(r) => update_slots(cl, &r, true),
            Err(e) => e,
        }
    })
}

fn cluster_setslot(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    with_cluster(ctx, |cl, ctx| {
        let me = cl.myself;
        if cl.node(me).is_replica() {
            return Reply::err("ERR Please use SETSLOT only with masters.");
        }
        let s = match parse_slot(args[2]) {
            Ok(s) => s,
            Err(e) => return e,
        };
        let action = args[3];
        let target = |cl: &Cluster, unknown: &str| -> Result<NodeId, Reply> {
            let n = cl.lookup(args[4]).ok_or_else(|| {
                Reply::error(format!(
                    "ERR {unknown} {}",
                    String::from_utf8_lossy(args[4])
                ))
            })?;
            if cl.node(n).is_replica() {
                return Err(Reply::err("ERR Target node is not a master"));
            }
            Ok(n)
        };
        if is(action, "migrating") && args.len() == 5 {
            if cl.slots[s] != Some(me) {
                return Reply::error(format!("ERR I'm not the owner of hash slot {s}"));
            }
            match target(cl, "I don't know about node") {
                Ok(n) => {
                    cl.migrating.insert(s, n);
                }
                Err(e) => return e,
            }
        } else if is(action, "importing") && args.len() == 5 {
            if cl.slots[s] == Some(me) {
                return Reply::error(format!("ERR I'm already the owner of hash slot {s}"));
            }
            match target(cl, "I don't know about node") {
                Ok(n) => {
                    cl.importing.insert(s, n);
                }
                Err(e) => return e,
            }
        } else if is(action, "stable") && args.len() == 4 {
            cl.importing.remove(&s);
            cl.migrating.remove(&s);
        } else if is(action, "node") && args.len() == 5 {
            let n = match target(cl, "Unknown node") {
                Ok(n) => n,
                Err(e) => return e,
            };
            let keys = gossip::count_keys_in_slot(ctx.ex, s);
            if cl.slots[s] == Some(me) && n != me && keys != 0 {
                return Reply::error(format!("ERR Can't assign hashslot {s} to a different node while I still hold keys for this hash slot."));
            }
            if keys == 0 {
                cl.migrating.remove(&s);
            }
            let was_mine = cl.slots[s] == Some(me);
            cl.del_slot(s);
            cl.add_slot(n, s);
            if was_mine
                && n != me
                && cl.node(me).numslots == 0
                && cl.settings.allow_replica_migration
            {
                crate::log::notice(&format!(
                    "Configuration change detected. Reconfiguring myself as a replica of {}",
                    cl.node(n).name_str()
                ));
                gossip::set_my_master(cl, ctx.ex, n);
                cl.todo |= TODO_SAVE_CONFIG | TODO_UPDATE_STATE | crate::cluster::TODO_FSYNC_CONFIG;
            }
            if n == me && cl.importing.contains_key(&s) {
                if cl.bump_epoch_without_consensus() {
                    crate::log::notice(&format!("configEpoch updated after importing slot {s}"));
                }
                cl.importing.remove(&s);
                gossip::broadcast_pong(cl, ctx.ex, false);
            }
        } else {
            return Reply::err(
                "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP",
            );
        }
        cl.todo |= TODO_SAVE_CONFIG | TODO_UPDATE_STATE;
        Reply::ok()
    })
}

fn cluster_bumpepoch(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    with_cluster(ctx, |cl, _| {
        let bumped = cl.bump_epoch_without_consensus();
        Reply::Status(
            format!(
                "{} {}",
                if bumped { "BUMPED" } else { "STILL" },
                cl.me().config_epoch
            )
            .into(),
        )
    })
}

fn cluster_saveconfig(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    with_cluster(ctx, |cl, _| {
        match crate::cluster::nodes_conf::save(cl, true) {
            Ok(()) => Reply::ok(),
            Err(e) => Reply::error(format!("ERR error saving the cluster node config: {e}")),
        }
    })
}

fn cluster_forget(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    with_cluster(ctx, |cl, _| {
        let Some(n) = cl.lookup(args[2]) else {
            let known = crate::cluster::node::parse_name(args[2])
                .is_some_and(|name| cl.blacklist_contains(&name));
            return if known {
                Reply::ok()
            } else {
                unknown_node(args[2])
            };
        };
        let me = cl.myself;
        if n == me {
            return Reply::err("ERR I tried hard but I can't forget myself...");
        }
        if cl.node(me).is_replica() && cl.node(me).replica_of == Some(n) {
            return Reply::err("ERR Can't forget my master!");
        }
        let name = cl.node(n).name;
        cl.blacklist_add(name);
        cl.del_node(n);
        cl.todo |= TODO_UPDATE_STATE | TODO_SAVE_CONFIG;
        Reply::ok()
    })
}

fn cluster_replicate(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    with_cluster(ctx, |cl, ctx| {
        let Some(n) = cl.lookup(args[2]) else {
            return unknown_node(args[2]);
        };
        let me = cl.myself;
        if n == me {
            return Reply::err("ERR Can't replicate myself");
        }
        if cl.node(n).is_replica() {
            return Reply::err("ERR I can only replicate a master, not a replica.");
        }
        if cl.node(me).is_master()
            && (cl.node(me).numslots != 0 || !ctx.ex.ks.dbs[0].table.is_empty())
        {
            return Reply::err(
                "ERR To set a master the node must be empty and without assigned slots.",
            );
        }
        gossip::set_my_master(cl, ctx.ex, n);
        cl.todo |= TODO_UPDATE_STATE | TODO_SAVE_CONFIG;
        Reply::ok()
    })
}

fn cluster_count_failure_reports(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    with_cluster(ctx, |cl, _| match cl.lookup(args[2]) {
        Some(n) => Reply::Int(gossip::failure_reports_count(cl, n) as i64),
        None => unknown_node(args[2]),
    })
}

fn cluster_failover(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if args.len() > 3 {
        return if ctx.ex.cluster.is_none() {
            DISABLED
        } else {
            crate::commands::unknown_subcommand(args)
        };
    }
    with_cluster(ctx, |cl, ctx| {
        let (mut force, mut takeover) = (false, false);
        if args.len() == 3 {
            if is(args[2], "force") {
                force = true;
            } else if is(args[2], "takeover") {
                force = true;
                takeover = true;
            } else {
                return errors::SYNTAX;
            }
        }
        match crate::cluster::failover::start_manual(cl, ctx.ex, force, takeover) {
            Ok(()) => Reply::ok(),
            Err(e) => Reply::err(e),
        }
    })
}

fn cluster_set_config_epoch(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    with_cluster(ctx, |cl, _| {
        let Some(epoch) = crate::util::numeric::parse_i64(args[2]) else {
            return errors::NOT_INTEGER;
        };
        if epoch < 0 {
            return Reply::error(format!("ERR Invalid config epoch specified: {epoch}"));
        }
        if cl.node_count() > 1 {
            return Reply::err(
                "ERR The user can assign a config epoch only when the node does not know any other node.",
            );
        }
        if cl.me().config_epoch != 0 {
            return Reply::err("ERR Node config epoch is already non-zero");
        }
        cl.me_mut().config_epoch = epoch as u64;
        crate::log::notice(&format!(
            "configEpoch set to {epoch} via CLUSTER SET-CONFIG-EPOCH"
        ));
        if cl.current_epoch < epoch as u64 {
            cl.current_epoch = epoch as u64;
        }
        cl.todo |= TODO_UPDATE_STATE | TODO_SAVE_CONFIG;
        Reply::ok()
    })
}

fn cluster_reset(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if args.len() > 3 {
        return if ctx.ex.cluster.is_none() {
            DISABLED
        } else {
            crate::commands::unknown_subcommand(args)
        };
    }
    with_cluster(ctx, |cl, ctx| {
        let hard = match args.get(2) {
            None => false,
            Some(a) if is(a, "hard") => true,
            Some(a) if is(a, "soft") => false,
            Some(_) => return errors::SYNTAX,
        };
        if cl.me().is_master() && !ctx.ex.ks.dbs[0].table.is_empty() {
            return Reply::err(
                "ERR CLUSTER RESET can't be called with master nodes containing keys",
            );
        }
        if cl.me().is_replica() {
            crate::replication::replica::stop(ctx.ex);
            ctx.ex.ks.flush_all(false);
        }
        cl.reset(hard);
        Reply::ok()
    })
}

fn cluster_links(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    with_cluster(ctx, |cl, _| {
        let mut out = Vec::new();
        for id in cl.node_ids() {
            let n = cl.node(id);
            for l in [n.link, n.inbound_link].into_iter().flatten() {
                let Some(link) = cl.bus.link(l) else { continue };
                let b = |s: &str| Reply::bulk(s.as_bytes());
                let queued = link.send_buffer_used() as i64;
                let allocated = link.send_buffer_allocated() as i64;
                out.push(Reply::Map(vec![
                    (b("direction"), b(if link.inbound { "from" } else { "to" })),
                    (b("node"), Reply::bulk(&n.name)),
                    (b("create-time"), Reply::Int(link.ctime)),
                    (b("events"), b(if queued > 0 { "rw" } else { "r" })),
                    (b("send-buffer-allocated"), Reply::Int(allocated)),
                    (b("send-buffer-used"), Reply::Int(queued)),
                ]));
            }
        }
        Reply::Array(out)
    })
}
