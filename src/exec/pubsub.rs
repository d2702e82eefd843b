//! Pub/Sub: the channel, pattern and shard-channel registries, message delivery, and
//! keyspace notifications (which are pub/sub messages on `__keyspace@N__:key` and
//! `__keyevent@N__:event`).
//!
//! Delivery encodes each message straight into the receiver's output buffer in the
//! receiver's protocol (`>` push frames in RESP3, arrays in RESP2) and schedules the
//! write; nothing is kept per message. A subscriber that does not read grows only its
//! own buffer, and the `pubsub` class of `client-output-buffer-limit` closes it.
//! Pushes addressed to the client whose command is running wait in its `deferred`
//! buffer and follow the command's reply, as in Redis 7.2+.
//!
//! Registries map a channel (or pattern) to subscriber slots in subscription order;
//! each client keeps its own subscriptions with a sequence number, so "unsubscribe
//! from everything" answers in subscription order.

use crate::util::FastMap;

use crate::commands::ctx::notify;
use crate::protocol::Reply;
use crate::util::glob::glob_match;

use super::Executor;

/// The three kinds of subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    pub fn sub_name(self) -> &'static str {
        match self {
            Kind::Channel => "subscribe",
            Kind::Pattern => "psubscribe",
            Kind::Shard => "ssubscribe",
        }
    }

    pub fn unsub_name(self) -> &'static str {
        match self {
            Kind::Channel => "unsubscribe",
            Kind::Pattern => "punsubscribe",
            Kind::Shard => "sunsubscribe",
        }
    }
}

/// A client's subscriptions, each with the order it was made in.
#[derive(Debug, Default)]
pub struct ClientSubs {
    pub channels: FastMap<Vec<u8>, u64>,
    pub patterns: FastMap<Vec<u8>, u64>,
    pub shard: FastMap<Vec<u8>, u64>,
    seq: u64,
}

impl ClientSubs {
    /// All subscriptions (the pubsub client class).
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shard.len()
    }

    fn set(&self, kind: Kind) -> &FastMap<Vec<u8>, u64> {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shard,
        }
    }

    fn set_mut(&mut self, kind: Kind) -> &mut FastMap<Vec<u8>, u64> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// The count Redis reports in (un)subscribe replies: channels + patterns for the
    /// classic kinds, shard channels alone for the shard kind.
    fn reported(&self, kind: Kind) -> i64 {
        match kind {
            Kind::Shard => self.shard.len() as i64,
            _ => (self.channels.len() + self.patterns.len()) as i64,
        }
    }

    /// The subscriptions of one kind in the order they were made.
    fn ordered(&self, kind: Kind) -> Vec<Vec<u8>> {
        let mut v: Vec<(&Vec<u8>, &u64)> = self.set(kind).iter().collect();
        v.sort_by_key(|(_, &n)| n);
        v.into_iter().map(|(k, _)| k.clone()).collect()
    }
}

/// Server-wide registries.
#[derive(Default)]
pub struct PubSub {
    channels: FastMap<Vec<u8>, Vec<usize>>,
    /// Patterns in the order first subscribed, with their subscribers.
    patterns: Vec<(Vec<u8>, Vec<usize>)>,
    shard: FastMap<Vec<u8>, Vec<usize>>,
}

impl PubSub {
    pub fn channel_count(&self) -> usize {
        self.channels.len()
    }

    pub fn pattern_count(&self) -> usize {
        self.patterns.len()
    }

    pub fn shard_channel_count(&self) -> usize {
        self.shard.len()
    }

    /// Channels (or shard channels) with subscribers, optionally matching a glob.
    pub fn active(&self, shard: bool, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let map = if shard { &self.shard } else { &self.channels };
        map.keys()
            .filter(|c| pattern.is_none_or(|p| glob_match(p, c, false)))
            .cloned()
            .collect()
    }

    /// Subscriber count of a channel (or shard channel).
    pub fn numsub(&self, shard: bool, channel: &[u8]) -> usize {
        let map = if shard { &self.shard } else { &self.channels };
        map.get(channel).map_or(0, |v| v.len())
    }

    fn add(&mut self, kind: Kind, name: &[u8], slot: usize) {
        match kind {
            Kind::Channel => self.channels.entry(name.to_vec()).or_default().push(slot),
            Kind::Shard => self.shard.entry(name.to_vec()).or_default().push(slot),
            Kind::Pattern => match self.patterns.iter_mut().find(|(p, _)| p == name) {
                Some((_, v)) => v.push(slot),
                None => self.patterns.push((name.to_vec(), vec![slot])),
            },
        }
    }

    fn remove(&mut self, kind: Kind, name: &[u8], slot: usize) {
        match kind {
            Kind::Channel | Kind::Shard => {
                let map = if kind == Kind::Shard {
                    &mut self.shard
                } else {
                    &mut self.channels
                };
                if let Some(v) = map.get_mut(name) {
                    v.retain(|&s| s != slot);
                    if v.is_empty() {
                        map.remove(name);
                    }
                }
            }
            Kind::Pattern => {
                if let Some(i) = self.patterns.iter().position(|(p, _)| p == name) {
                    self.patterns[i].1.retain(|&s| s != slot);
                    if self.patterns[i].1.is_empty() {
                        self.patterns.remove(i);
                    }
                }
            }
        }
    }
}

fn bulk(b: &[u8]) -> Reply {
    Reply::Bulk(b.to_vec())
}

impl Executor {
    /// Sends an out-of-band reply (push) to a client: into its output buffer, or, while
    /// that client's own command runs, after the command's reply. Applies the output
    /// buffer limits.
    /// `push_to` for a message already encoded in both protocols (fan-out).
    fn push_encoded_to(&mut self, slot: usize, m: &EncodedOnce) {
        let c = self.client_mut(slot);
        if c.close_asap {
            return;
        }
        let bytes = if c.proto >= 3 { &m.resp3 } else { &m.resp2 };
        if c.executing {
            c.deferred.extend_from_slice(bytes);
            return;
        }
        c.out.extend_from_slice(bytes);
        self.mark_pending_write(slot);
        self.check_output_limits(slot);
    }

    pub fn push_to(&mut self, slot: usize, r: &Reply) {
        let c = self.client_mut(slot);
        if c.close_asap {
            return;
        }
        if c.executing {
            r.encode(c.proto, &mut c.deferred);
            return;
        }
        c.push_reply(r);
        self.mark_pending_write(slot);
        self.check_output_limits(slot);
    }

    /// Appends pushes deferred during the client's own command after its reply.
    pub(crate) fn flush_deferred_pushes(&mut self, slot: usize) {
        let c = self.client_mut(slot);
        if c.deferred.is_empty() {
            return;
        }
        let d = std::mem::take(&mut c.deferred);
        c.out.extend_from_slice(&d);
        self.mark_pending_write(slot);
    }

    /// (P|S)SUBSCRIBE: one confirmation per name.
    pub fn subscribe(&mut self, slot: usize, kind: Kind, names: &[&[u8]]) -> Reply {
        let mut replies = Vec::with_capacity(names.len());
        for name in names {
            let subs = &mut self.client_mut(slot).subs;
            if !subs.set(kind).contains_key(*name) {
                subs.seq += 1;
                let seq = subs.seq;
                subs.set_mut(kind).insert(name.to_vec(), seq);
                self.pubsub.add(kind, name, slot);
            }
            let count = self.client(slot).subs.reported(kind);
            replies.push(Reply::Push(vec![
                bulk(kind.sub_name().as_bytes()),
                bulk(name),
                Reply::Int(count),
            ]));
        }
        Reply::Multi(replies)
    }

    /// (P|S)UNSUBSCRIBE: the named ones, or all of that kind when none is named.
    pub fn unsubscribe(&mut self, slot: usize, kind: Kind, names: &[&[u8]]) -> Reply {
        let names: Vec<Vec<u8>> = if names.is_empty() {
            self.client(slot).subs.ordered(kind)
        } else {
            names.iter().map(|n| n.to_vec()).collect()
        };
        if names.is_empty() {
            let count = self.client(slot).subs.reported(kind);
            return Reply::Push(vec![
                bulk(kind.unsub_name().as_bytes()),
                Reply::Null,
                Reply::Int(count),
            ]);
        }
        let mut replies = Vec::with_capacity(names.len());
        for name in names {
            if self
                .client_mut(slot)
                .subs
                .set_mut(kind)
                .remove(&name)
                .is_some()
            {
                self.pubsub.remove(kind, &name, slot);
            }
            let count = self.client(slot).subs.reported(kind);
            replies.push(Reply::Push(vec![
                bulk(kind.unsub_name().as_bytes()),
                bulk(&name),
                Reply::Int(count),
            ]));
        }
        Reply::Multi(replies)
    }

    /// Drops every subscription of a client without replying (disconnect, RESET).
    pub(crate) fn unsubscribe_all_silently(&mut self, slot: usize) {
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            for name in self.client(slot).subs.ordered(kind) {
                self.pubsub.remove(kind, &name, slot);
            }
            self.client_mut(slot).subs.set_mut(kind).clear();
        }
    }

    /// PUBLISH: delivers to channel subscribers, then to matching patterns. Returns the
    /// number of clients that received it.
    pub fn publish(&mut self, channel: &[u8], message: &[u8]) -> usize {
        let mut receivers = 0;
        // The subscriber list is taken out for the loop (delivery never changes it) and
        // the message is encoded once per protocol, then copied to each subscriber.
        if let Some(slots) = self.pubsub.channels.get_mut(channel).map(std::mem::take) {
            let msg = Reply::Push(vec![bulk(b"message"), bulk(channel), bulk(message)]);
            let encoded = EncodedOnce::new(&msg);
            for &slot in &slots {
                self.push_encoded_to(slot, &encoded);
                receivers += 1;
            }
            if let Some(entry) = self.pubsub.channels.get_mut(channel) {
                *entry = slots;
            }
        }
        if !self.pubsub.patterns.is_empty() {
            let matching: Vec<(Vec<u8>, Vec<usize>)> = self
                .pubsub
                .patterns
                .iter()
                .filter(|(p, _)| glob_match(p, channel, false))
                .cloned()
                .collect();
            for (pattern, slots) in matching {
                let msg = Reply::Push(vec![
                    bulk(b"pmessage"),
                    bulk(&pattern),
                    bulk(channel),
                    bulk(message),
                ]);
                for slot in slots {
                    self.push_to(slot, &msg);
                    receivers += 1;
                }
            }
        }
        receivers
    }

    /// SPUBLISH: delivers to shard-channel subscribers.
    pub fn spublish(&mut self, channel: &[u8], message: &[u8]) -> usize {
        let Some(slots) = self.pubsub.shard.get(channel).cloned() else {
            return 0;
        };
        let msg = Reply::Push(vec![bulk(b"smessage"), bulk(channel), bulk(message)]);
        for &slot in &slots {
            self.push_to(slot, &msg);
        }
        slots.len()
    }

    /// Publishes the keyspace notifications raised by the last command.
    pub(crate) fn deliver_notifications(&mut self) {
        if self.pending_notifications.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending_notifications);
        for (_class, event, db, key) in pending {
            if self.notify_classes & notify::KEYSPACE != 0 {
                let mut ch = format!("__keyspace@{db}__:").into_bytes();
                ch.extend_from_slice(&key);
                self.publish(&ch, event.as_bytes());
            }
            if self.notify_classes & notify::KEYEVENT != 0 {
                let ch = format!("__keyevent@{db}__:{event}").into_bytes();
                self.publish(&ch, &key);
            }
        }
    }
}

/// Parses `notify-keyspace-events` letters into class bits, as Redis: `A` is every
/// type class (not `m` and `n`); an unknown letter is an error.
pub fn parse_notify_classes(s: &str) -> Option<u32> {
    use notify::*;
    let mut flags = 0;
    for ch in s.chars() {
        flags |= match ch {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// Every type class, the meaning of `A`.
const ALL: u32 = notify::GENERIC
    | notify::STRING
    | notify::LIST
    | notify::SET
    | notify::HASH
    | notify::ZSET
    | notify::EXPIRED
    | notify::EVICTED
    | notify::STREAM
    | notify::MODULE;

/// Formats class bits as CONFIG GET shows them. As in Redis, `n` is listed only when
/// the type classes are spelled out, not after `A`.
pub fn format_notify_classes(flags: u32) -> String {
    use notify::*;
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        for (bit, ch) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & bit != 0 {
                s.push(ch);
            }
        }
    }
    for (bit, ch) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            s.push(ch);
        }
    }
    s
}

/// A push message encoded once for each protocol, for delivery to many clients.
struct EncodedOnce {
    resp2: Vec<u8>,
    resp3: Vec<u8>,
}

impl EncodedOnce {
    fn new(r: &Reply) -> EncodedOnce {
        let mut resp2 = Vec::new();
        let mut resp3 = Vec::new();
        r.encode(2, &mut resp2);
        r.encode(3, &mut resp3);
        EncodedOnce { resp2, resp3 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_flags_round_trip_like_redis() {
        for (input, shown) in [
            ("KEA", "AKE"),
            ("Kgx$lshzetdmn", "AKm"),
            ("Em", "Em"),
            ("AKEnm", "AKEm"),
            ("E$n", "$nE"),
            ("g", "g"),
            ("", ""),
            ("E$x", "$xE"),
        ] {
            let f = parse_notify_classes(input).unwrap();
            assert_eq!(format_notify_classes(f), shown, "{input}");
        }
        assert!(parse_notify_classes("Q").is_none());
    }
}
