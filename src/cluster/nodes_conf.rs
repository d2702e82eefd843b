//! nodes.conf: the cluster's view as CLUSTER NODES lines (with the aux fields of
//! Redis 7.2+) plus a `vars currentEpoch N lastVoteEpoch N` line. Written to a
//! temporary file, fsynced when asked, renamed over the old one; loaded at start.

use std::io::Write;

use super::node::{self, Node, NodeId};
use super::{now_ms, Cluster};

/// Writes the file atomically (temporary file, optional fsync, rename, directory
/// fsync).
pub fn save(cl: &mut Cluster, fsync: bool) -> std::io::Result<()> {
    cl.todo &= !super::TODO_SAVE_CONFIG;
    let mut content = cl.describe_all(true, cl.settings.tls_cluster);
    content.push_str(&format!(
        "vars currentEpoch {} lastVoteEpoch {}\n",
        cl.current_epoch, cl.last_vote_epoch
    ));
    let path = &cl.conf_path;
    let tmp = format!("{}.tmp-{}-{}", path.display(), std::process::id(), now_ms());
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(content.as_bytes())?;
        if fsync {
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        if fsync {
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."));
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    if fsync && result.is_ok() {
        cl.todo &= !super::TODO_FSYNC_CONFIG;
    }
    result
}

/// Loads the file: Ok(false) when it is missing or empty (a new node), an error
/// naming the bad line when it is corrupted.
pub fn load(cl: &mut Cluster) -> Result<bool, String> {
    let text = match std::fs::read(&cl.conf_path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            return Err(format!(
                "Loading the cluster node config from {}: {e}",
                cl.conf_path.display()
            ))
        }
    };
    if text.is_empty() {
        return Ok(false);
    }
    let text = String::from_utf8_lossy(&text).into_owned();
    let mut myself = None;
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        load_line(cl, line, &mut myself).map_err(|()| {
            format!("Unrecoverable error: corrupted cluster config file \"{line}\".")
        })?;
    }
    let Some(me) = myself else {
        return Err("Unrecoverable error: corrupted cluster config file \"\".".into());
    };
    cl.myself = me;
    crate::log::notice(&format!(
        "Node configuration loaded, I'm {}",
        cl.node(me).name_str()
    ));
    let max = cl.max_epoch();
    if max > cl.current_epoch {
        cl.current_epoch = max;
    }
    Ok(true)
}

fn get_or_create(cl: &mut Cluster, name: &str) -> Result<NodeId, ()> {
    let n = node::parse_name(name.as_bytes()).ok_or(())?;
    Ok(match cl.by_name.get(&n) {
        Some(&id) => id,
        None => cl.add_node(Node::new(n, 0, now_ms())),
    })
}

fn load_line(cl: &mut Cluster, line: &str, myself: &mut Option<NodeId>) -> Result<(), ()> {
    let argv: Vec<&str> = line.split_ascii_whitespace().collect();
    if argv[0].eq_ignore_ascii_case("vars") {
        if argv.len().is_multiple_of(2) {
            return Err(());
        }
        for pair in argv[1..].chunks(2) {
            let v: u64 = pair[1].parse().unwrap_or(0);
            if pair[0].eq_ignore_ascii_case("currentEpoch") {
                cl.current_epoch = v;
            } else if pair[0].eq_ignore_ascii_case("lastVoteEpoch") {
                cl.last_vote_epoch = v;
            } else {
                crate::log::notice(&format!(
                    "Skipping unknown cluster config variable '{}'",
                    pair[0]
                ));
            }
        }
        return Ok(());
    }
    if argv.len() < 8 {
        return Err(());
    }
    let id = get_or_create(cl, argv[0])?;
    // ip:port@cport[,hostname[,aux=value...]]
    let aux: Vec<&str> = argv[1].split(',').collect();
    let hostname = aux.get(1).copied().unwrap_or("").to_string();
    let mut shard_id = None;
    let mut human = String::new();
    let mut tcp_aux = None;
    let mut tls_aux = None;
    for field in aux.iter().skip(2) {
        let (k, v) = field.split_once('=').ok_or(())?;
        match k {
            "shard-id" => shard_id = Some(node::parse_name(v.as_bytes()).ok_or(())?),
            "nodename" => human = v.to_string(),
            "tcp-port" => tcp_aux = Some(v.parse::<u16>().map_err(|_| ())?),
            "tls-port" => tls_aux = Some(v.parse::<u16>().map_err(|_| ())?),
            _ => return Err(()),
        }
    }
    let addr = aux[0];
    let colon = addr.rfind(':').ok_or(())?;
    let ip = addr[..colon].to_string();
    let rest = &addr[colon + 1..];
    let (port_s, bus_s) = match rest.split_once('@') {
        Some((p, b)) => (p, Some(b)),
        None => (rest, None),
    };
    let port: u16 = port_s.parse().unwrap_or(0);
    let (tcp_port, tls_port) = match (tcp_aux, tls_aux) {
        (Some(t), Some(l)) => (t, l),
        (Some(t), None) => (t, port),
        (None, Some(l)) => (port, l),
        // No aux port (a file before Redis 7.2): the port is the default client one.
        (None, None) if cl.settings.tls_cluster => (0, port),
        (None, None) => (port, 0),
    };
    let cport = bus_s
        .and_then(|b| b.parse().ok())
        .unwrap_or(tcp_port.wrapping_add(10000));
    let mut flags = 0u16;
    for f in argv[2].split(',') {
        let bit = node::flag_from_text(f).ok_or(())?;
        if bit == node::MYSELF {
            if myself.is_some() {
                return Err(());
            }
            *myself = Some(id);
        }
        flags |= bit;
    }
    let master = if argv[3] != "-" {
        Some(get_or_create(cl, argv[3])?)
    } else {
        None
    };
    let now = now_ms();
    {
        let n = cl.node_mut(id);
        n.ip = ip;
        n.hostname = hostname;
        n.human_nodename = human;
        n.tcp_port = tcp_port;
        n.tls_port = tls_port;
        n.cport = cport;
        n.flags = flags;
        if flags & node::FAIL != 0 {
            n.fail_time = now;
        }
        if let Some(s) = shard_id {
            n.shard_id = s;
        }
        if argv[4] != "0" {
            n.ping_sent = now;
        }
        if argv[5] != "0" {
            n.pong_received = now;
        }
        n.config_epoch = argv[6].parse().unwrap_or(0);
    }
    if let Some(m) = master {
        cl.node_mut(id).replica_of = Some(m);
        cl.add_replica(m, id);
        // A replica's epoch is its master's.
        cl.node_mut(id).config_epoch = 0;
        if shard_id.is_none() {
            let s = cl.node(m).shard_id;
            cl.node_mut(id).shard_id = s;
        }
    }
    for spec in &argv[8..] {
        if let Some(inner) = spec.strip_prefix('[') {
            let inner = inner.strip_suffix(']').ok_or(())?;
            let (slot_s, dir, other) = if let Some((s, o)) = inner.split_once("->-") {
                (s, '>', o)
            } else if let Some((s, o)) = inner.split_once("-<-") {
                (s, '<', o)
            } else {
                return Err(());
            };
            let s: usize = slot_s.parse().map_err(|_| ())?;
            if s >= super::SLOTS {
                return Err(());
            }
            let other = get_or_create(cl, other)?;
            if dir == '>' {
                cl.migrating.insert(s, other);
            } else {
                cl.importing.insert(s, other);
            }
            continue;
        }
        let (a, b) = match spec.split_once('-') {
            Some((a, b)) => (a, b),
            None => (*spec, *spec),
        };
        let a: usize = a.parse().map_err(|_| ())?;
        let b: usize = b.parse().map_err(|_| ())?;
        if a >= super::SLOTS || b >= super::SLOTS {
            return Err(());
        }
        for s in a..=b {
            cl.add_slot(id, s);
        }
    }
    Ok(())
}
