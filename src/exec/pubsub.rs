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
use crate::protocol::reply::{encode_bulk, encode_header};
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

    /// Allocated subscription slots (client memory, `exec/client_mem.rs`).
    pub fn slots(&self) -> usize {
        self.channels.capacity() + self.patterns.capacity() + self.shard.capacity()
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
    /// The message being fanned out, encoded in RESP2 and RESP3 (each on first need);
    /// the buffers are reused from message to message, so delivery allocates nothing.
    scratch: [Vec<u8>; 2],
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
    /// Delivers one push message, given as its bulk-string parts, to every client in
    /// `slots`: encoded at most once per protocol, then copied into each receiver's
    /// output buffer (or its `deferred` buffer while its own command runs).
    fn fan_out(&mut self, slots: &[usize], parts: &[&[u8]]) {
        let mut enc = std::mem::take(&mut self.pubsub.scratch);
        let mut ready = [false; 2];
        for &slot in slots {
            let c = self.client_mut(slot);
            if c.close_asap {
                continue;
            }
            let i = usize::from(c.proto >= 3);
            if !ready[i] {
                encode_push(c.proto, parts, &mut enc[i]);
                ready[i] = true;
            }
            if c.defers_pushes() {
                c.deferred.extend_from_slice(&enc[i]);
                continue;
            }
            c.out.extend_from_slice(&enc[i]);
            c.note_reply_peak();
            if c.out.len() >= super::client::SEAL_AT {
                c.seal();
            }
            self.mark_pending_write(slot);
            self.check_output_limits(slot);
        }
        for b in &mut enc {
            if b.capacity() > SCRATCH_KEEP {
                *b = Vec::new();
            }
        }
        self.pubsub.scratch = enc;
    }

    /// Sends an out-of-band reply (push) to a client: into its output buffer, or, while
    /// that client's own command runs, after the command's reply. Applies the output
    /// buffer limits.
    pub fn push_to(&mut self, slot: usize, r: &Reply) {
        let c = self.client_mut(slot);
        if c.close_asap {
            return;
        }
        if c.defers_pushes() {
            r.encode(c.proto, &mut c.deferred);
            return;
        }
        c.push_reply(r);
        self.mark_pending_write(slot);
        self.check_output_limits(slot);
    }

    /// Appends pushes deferred during the client's own command after its reply.
    #[inline(always)]
    pub(crate) fn flush_deferred_pushes(&mut self, slot: usize) {
        let c = self.client(slot);
        if c.deferred.is_empty() || c.stream.is_some() {
            return;
        }
        self.append_deferred_pushes(slot);
    }

    #[inline(never)]
    fn append_deferred_pushes(&mut self, slot: usize) {
        let c = self.client_mut(slot);
        let d = std::mem::take(&mut c.deferred);
        c.out.extend_from_slice(&d);
        c.note_reply_peak();
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

    /// Unsubscribes every subscriber of these shard channels, each told with a
    /// `sunsubscribe` push (cluster: their slot moved away).
    pub fn drop_shard_channels(&mut self, channels: &[Vec<u8>]) {
        for name in channels {
            let Some(subscribers) = self.pubsub.shard.get(name).cloned() else {
                continue;
            };
            for slot in subscribers {
                let removed = self
                    .client_mut(slot)
                    .subs
                    .set_mut(Kind::Shard)
                    .remove(name)
                    .is_some();
                if !removed {
                    continue;
                }
                self.pubsub.remove(Kind::Shard, name, slot);
                let count = self.client(slot).subs.reported(Kind::Shard);
                let msg = Reply::Push(vec![
                    bulk(Kind::Shard.unsub_name().as_bytes()),
                    bulk(name),
                    Reply::Int(count),
                ]);
                self.push_to(slot, &msg);
            }
        }
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
        // Subscriber lists are taken out for the delivery loop (delivery never changes
        // the registries) and put back after: no clone per message.
        if let Some(slots) = self.pubsub.channels.get_mut(channel).map(std::mem::take) {
            self.fan_out(&slots, &[b"message", channel, message]);
            receivers += slots.len();
            if let Some(entry) = self.pubsub.channels.get_mut(channel) {
                *entry = slots;
            }
        }
        for i in 0..self.pubsub.patterns.len() {
            if !glob_match(&self.pubsub.patterns[i].0, channel, false) {
                continue;
            }
            let (pattern, slots) = std::mem::take(&mut self.pubsub.patterns[i]);
            self.fan_out(&slots, &[b"pmessage", &pattern, channel, message]);
            receivers += slots.len();
            self.pubsub.patterns[i] = (pattern, slots);
        }
        receivers
    }

    /// SPUBLISH: delivers to shard-channel subscribers.
    pub fn spublish(&mut self, channel: &[u8], message: &[u8]) -> usize {
        let Some(slots) = self.pubsub.shard.get_mut(channel).map(std::mem::take) else {
            return 0;
        };
        self.fan_out(&slots, &[b"smessage", channel, message]);
        let receivers = slots.len();
        if let Some(entry) = self.pubsub.shard.get_mut(channel) {
            *entry = slots;
        }
        receivers
    }

    /// Publishes the keyspace notifications raised by the last command.
    #[inline]
    pub(crate) fn deliver_notifications(&mut self) {
        if !self.pending_notifications.is_empty() {
            self.publish_notifications();
        }
    }

    #[inline(never)]
    fn publish_notifications(&mut self) {
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

/// Scratch buffers above this size are released after a delivery.
const SCRATCH_KEEP: usize = 64 * 1024;

/// Encodes a push of bulk strings (`>N` in RESP3, `*N` in RESP2) into `out`, replacing
/// its contents, with one reservation of the exact size.
fn encode_push(proto: u8, parts: &[&[u8]], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(8 + parts.iter().map(|p| p.len() + 16).sum::<usize>());
    encode_header(if proto >= 3 { b'>' } else { b'*' }, parts.len(), out);
    for p in parts {
        encode_bulk(p, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fan_out_encoding_matches_reply_encoding() {
        let mut out = b"stale".to_vec();
        for proto in [2, 3] {
            let parts: [&[u8]; 4] = [b"pmessage", b"p*", b"", b"m\r\n"];
            encode_push(proto, &parts, &mut out);
            let mut want = Vec::new();
            Reply::Push(parts.iter().map(|p| bulk(p)).collect()).encode(proto, &mut want);
            assert_eq!(out, want);
        }
    }

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
