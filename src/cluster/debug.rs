//! The cluster's DEBUG subcommands, for tests that break links or lose messages:
//! CLUSTERLINK KILL, DROP-CLUSTER-PACKET-FILTER and (Valkey's, for tests ported from
//! it) CLOSE-CLUSTER-LINK-ON-PACKET-DROP.

use super::Cluster;
use crate::commands::{arg_i64, is};
use crate::exec::Executor;
use crate::protocol::Reply;

/// What the receive path does with incoming bus messages (set by DEBUG).
#[derive(Clone, Copy, Debug)]
pub struct PacketFilter {
    /// Messages of this type are dropped on receipt (-1: none).
    pub drop_type: i64,
    /// A dropped message also closes the link it came on.
    pub close_link: bool,
}

impl Default for PacketFilter {
    fn default() -> Self {
        PacketFilter {
            drop_type: -1,
            close_link: false,
        }
    }
}

impl PacketFilter {
    #[inline]
    pub fn drops(&self, typ: u16) -> bool {
        self.drop_type == i64::from(typ)
    }
}

/// The DEBUG subcommands of cluster mode, or None for another subcommand.
pub fn debug(ex: &mut Executor, args: &[&[u8]]) -> Option<Reply> {
    let sub = args[1];
    if is(sub, "drop-cluster-packet-filter") && args.len() == 3 {
        let n = match arg_i64(args[2]) {
            Ok(n) => n,
            Err(e) => return Some(e),
        };
        // Without cluster mode there is no bus to filter: accepted, as Redis does.
        if let Some(cl) = ex.cluster.as_deref_mut() {
            cl.packet_filter.drop_type = n;
        }
        return Some(Reply::ok());
    }
    if is(sub, "close-cluster-link-on-packet-drop") && args.len() == 3 {
        let n = match arg_i64(args[2]) {
            Ok(n) => n,
            Err(e) => return Some(e),
        };
        if let Some(cl) = ex.cluster.as_deref_mut() {
            cl.packet_filter.close_link = n != 0;
        }
        return Some(Reply::ok());
    }
    if args.len() == 5 && is(sub, "clusterlink") && is(args[2], "kill") {
        let Some(cl) = ex.cluster.as_deref_mut() else {
            return Some(Reply::err(
                "ERR Debug option only available for cluster mode enabled setup!",
            ));
        };
        return Some(kill_link(cl, args[3], args[4]));
    }
    None
}

/// DEBUG CLUSTERLINK KILL to|from|all <node-id>: closes our outbound link to the
/// node, its inbound link to us, or both (the cron reconnects the outbound one).
fn kill_link(cl: &mut Cluster, direction: &[u8], name: &[u8]) -> Reply {
    let Some(id) = cl.lookup(name) else {
        return Reply::error(format!(
            "ERR Unknown node {}",
            String::from_utf8_lossy(name)
        ));
    };
    let (to, from) = (cl.node(id).link, cl.node(id).inbound_link);
    let links = if is(direction, "to") {
        [to, None]
    } else if is(direction, "from") {
        [None, from]
    } else if is(direction, "all") {
        [to, from]
    } else {
        return Reply::error(format!(
            "ERR Unknown direction {}",
            String::from_utf8_lossy(direction)
        ));
    };
    for l in links.into_iter().flatten() {
        super::gossip::free_link(cl, l);
    }
    Reply::ok()
}
