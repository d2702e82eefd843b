//! Pub/Sub commands: (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PUBLISH, SPUBLISH and PUBSUB.
//! Registries and delivery live in `exec/pubsub.rs`. Without cluster mode a shard
//! channel is an ordinary channel kept in its own namespace, as in Redis.

use crate::commands::flags::*;
use crate::commands::keys::help_reply;
use crate::commands::{Command, Ctx};
use crate::exec::pubsub::Kind;
use crate::protocol::Reply;
use crate::{command, container};

const PS: &[&str] = &["pubsub", "slow"];
const PS_FAST: &[&str] = &["pubsub", "fast"];

pub static COMMANDS: &[Command] = &[
    command!("subscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, (0, 0, 0), PS, "pubsub", "2.0.0", "Listens for messages published to channels.", "O(N) where N is the number of channels to subscribe to.", subscribe),
    command!("unsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, (0, 0, 0), PS, "pubsub", "2.0.0", "Stops listening to messages posted to channels.", "O(N) where N is the number of channels to unsubscribe.", unsubscribe),
    command!("psubscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, (0, 0, 0), PS, "pubsub", "2.0.0", "Listens for messages published to channels that match one or more patterns.", "O(N) where N is the number of patterns to subscribe to.", psubscribe),
    command!("punsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, (0, 0, 0), PS, "pubsub", "2.0.0", "Stops listening to messages published to channels that match one or more patterns.", "O(N) where N is the number of patterns to unsubscribe.", punsubscribe),
    command!("publish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, (0, 0, 0), PS_FAST, "pubsub", "2.0.0", "Posts a message to a channel.", "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).", publish),
    command!("spublish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, (1, 1, 1), PS_FAST, "pubsub", "7.0.0", "Post a message to a shard channel", "O(N) where N is the number of clients subscribed to the receiving shard channel.", spublish),
    command!("ssubscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, (1, -1, 1), PS, "pubsub", "7.0.0", "Listens for messages published to shard channels.", "O(N) where N is the number of shard channels to subscribe to.", ssubscribe),
    command!("sunsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, (1, -1, 1), PS, "pubsub", "7.0.0", "Stops listening to messages posted to shard channels.", "O(N) where N is the number of shard channels to unsubscribe.", sunsubscribe),
    container!("pubsub", &["slow"], "pubsub", "2.8.0", "A container for Pub/Sub commands.", PUBSUB_SUBCOMMANDS),
];

static PUBSUB_SUBCOMMANDS: &[Command] = &[
    command!("pubsub|channels", -2, PUBSUB | LOADING | STALE, (0, 0, 0), PS, "pubsub", "2.8.0", "Returns the active channels.", "O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)", pubsub_channels),
    command!("pubsub|numpat", 2, PUBSUB | LOADING | STALE, (0, 0, 0), PS, "pubsub", "2.8.0", "Returns a count of unique pattern subscriptions.", "O(1)", pubsub_numpat),
    command!("pubsub|numsub", -2, PUBSUB | LOADING | STALE, (0, 0, 0), PS, "pubsub", "2.8.0", "Returns a count of subscribers to channels.", "O(N) for the NUMSUB subcommand, where N is the number of requested channels", pubsub_numsub),
    command!("pubsub|shardchannels", -2, PUBSUB | LOADING | STALE, (0, 0, 0), PS, "pubsub", "7.0.0", "Returns the active shard channels.", "O(N) where N is the number of active shard channels, and assuming constant time pattern matching (relatively short shard channels).", pubsub_shardchannels),
    command!("pubsub|shardnumsub", -2, PUBSUB | LOADING | STALE, (0, 0, 0), PS, "pubsub", "7.0.0", "Returns the count of subscribers of shard channels.", "O(N) for the SHARDNUMSUB subcommand, where N is the number of requested shard channels", pubsub_shardnumsub),
    command!("pubsub|help", 2, LOADING | STALE, (0, 0, 0), &["slow"], "pubsub", "6.2.0", "Returns helpful text about the different subcommands.", "O(1)", pubsub_help),
];

fn subscribe(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    ctx.ex.subscribe(ctx.client, Kind::Channel, &args[1..])
}

fn psubscribe(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    ctx.ex.subscribe(ctx.client, Kind::Pattern, &args[1..])
}

fn ssubscribe(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    // Shard subscriptions are refused where replies must be one per command.
    if ctx.client_ref().in_exec {
        return Reply::err("ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client");
    }
    ctx.ex.subscribe(ctx.client, Kind::Shard, &args[1..])
}

fn unsubscribe(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    ctx.ex.unsubscribe(ctx.client, Kind::Channel, &args[1..])
}

fn punsubscribe(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    ctx.ex.unsubscribe(ctx.client, Kind::Pattern, &args[1..])
}

fn sunsubscribe(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    ctx.ex.unsubscribe(ctx.client, Kind::Shard, &args[1..])
}

fn publish(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let n = ctx.ex.publish(args[1], args[2]);
    // Cluster mode: every other node delivers it too (the cluster bus).
    if ctx.ex.cluster.is_some() {
        crate::cluster::gossip::propagate_publish(ctx.ex, args[1], args[2], false);
    }
    Reply::Int(n as i64)
}

fn spublish(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let n = ctx.ex.spublish(args[1], args[2]);
    if ctx.ex.cluster.is_some() {
        crate::cluster::gossip::propagate_publish(ctx.ex, args[1], args[2], true);
    }
    Reply::Int(n as i64)
}

fn wrong_args(args: &[&[u8]]) -> Reply {
    Reply::error(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
        String::from_utf8_lossy(args[1])
    ))
}

fn channels_generic(ctx: &mut Ctx, args: &[&[u8]], shard: bool) -> Reply {
    if args.len() > 3 {
        return wrong_args(args);
    }
    let list = ctx.ex.pubsub.active(shard, args.get(2).copied());
    Reply::Array(list.into_iter().map(Reply::Bulk).collect())
}

fn numsub_generic(ctx: &mut Ctx, args: &[&[u8]], shard: bool) -> Reply {
    let mut out = Vec::with_capacity((args.len() - 2) * 2);
    for ch in &args[2..] {
        out.push(Reply::bulk(ch));
        out.push(Reply::Int(ctx.ex.pubsub.numsub(shard, ch) as i64));
    }
    Reply::Array(out)
}

fn pubsub_channels(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    channels_generic(ctx, args, false)
}

fn pubsub_shardchannels(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    channels_generic(ctx, args, true)
}

fn pubsub_numsub(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    numsub_generic(ctx, args, false)
}

fn pubsub_shardnumsub(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    numsub_generic(ctx, args, true)
}

fn pubsub_numpat(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    Reply::Int(ctx.ex.pubsub.pattern_count() as i64)
}

fn pubsub_help(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    help_reply(
        "PUBSUB",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    )
}
