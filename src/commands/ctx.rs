//! The context a handler runs in: the executor, the calling client, its database and
//! the command's clock. Key access goes through here so that every command gets the
//! same expiry, access-clock, hit/miss and modification bookkeeping.

use crate::exec::{Client, Executor};
use crate::keyspace::{EntryMut, EntryRef, IntoEntry, Keyspace, Value, ValueRef};
use crate::protocol::Reply;

use super::{errors, Command};

/// Keyspace notification classes (notify-keyspace-events letters).
pub mod notify {
    pub const KEYSPACE: u32 = 1 << 0; // K
    pub const KEYEVENT: u32 = 1 << 1; // E
    pub const GENERIC: u32 = 1 << 2; // g
    pub const STRING: u32 = 1 << 3; // $
    pub const LIST: u32 = 1 << 4; // l
    pub const SET: u32 = 1 << 5; // s
    pub const HASH: u32 = 1 << 6; // h
    pub const ZSET: u32 = 1 << 7; // z
    pub const EXPIRED: u32 = 1 << 8; // x
    pub const EVICTED: u32 = 1 << 9; // e
    pub const STREAM: u32 = 1 << 10; // t
    pub const KEY_MISS: u32 = 1 << 11; // m
    pub const MODULE: u32 = 1 << 12; // d
    pub const NEW: u32 = 1 << 13; // n
}

pub struct Ctx<'a> {
    pub ex: &'a mut Executor,
    /// The calling client's slot.
    pub client: usize,
    /// The selected database.
    pub db: usize,
    /// Unix time in ms, fixed for the whole command (as Redis's cached `mstime`), so
    /// a command sees one consistent instant for expiry decisions.
    pub now_ms: i64,
    pub cmd: &'static Command,
}

impl<'a> Ctx<'a> {
    pub fn client(&mut self) -> &mut Client {
        self.ex.client_mut(self.client)
    }

    pub fn client_ref(&self) -> &Client {
        self.ex.client(self.client)
    }

    pub fn ks(&mut self) -> &mut Keyspace {
        &mut self.ex.ks
    }

    /// Bytes a reply may still take before the client's output-buffer hard limit.
    pub fn reply_room(&self) -> usize {
        self.ex.reply_room(self.client)
    }

    /// Whether this command's reply may be streamed as the socket drains
    /// (`Executor::reply_streamable`).
    pub fn may_stream_reply(&self) -> bool {
        self.ex.reply_streamable(self.client)
    }

    /// Closes the client as its output-buffer limit does (a reply could not fit).
    pub fn output_limit_reached(&mut self) -> Reply {
        self.ex.close_for_output_limit(self.client);
        Reply::NoReply
    }

    pub fn proto(&self) -> u8 {
        self.ex.client(self.client).proto
    }

    /// Looks a key up for reading, counting a keyspace hit or miss.
    pub fn lookup_read(&mut self, key: &[u8]) -> Option<EntryRef<'_>> {
        if self.ex.notify_classes & notify::KEY_MISS != 0
            && !self.ex.ks.exists(self.db, key, self.now_ms)
        {
            self.notify(notify::KEY_MISS, "keymiss", key);
        }
        self.ex.ks.lookup(self.db, key, self.now_ms, true)
    }

    /// Looks a key up for writing (no hit/miss accounting).
    pub fn lookup_write(&mut self, key: &[u8]) -> Option<EntryMut<'_>> {
        self.ex.ks.lookup_mut(self.db, key, self.now_ms)
    }

    /// Looks up a key that must hold a string, for reading: `Ok(None)` when missing,
    /// WRONGTYPE for other types.
    pub fn read_string(&mut self, key: &[u8]) -> Result<Option<ValueRef<'_>>, Reply> {
        match self.lookup_read(key) {
            None => Ok(None),
            Some(e) => {
                let v = e.value();
                if v.is_string() {
                    Ok(Some(v))
                } else {
                    Err(errors::WRONGTYPE)
                }
            }
        }
    }

    /// Whether a key exists (expired keys are deleted first), without touching it.
    pub fn exists(&mut self, key: &[u8]) -> bool {
        self.ex.ks.exists(self.db, key, self.now_ms)
    }

    /// Stores a value, replacing any previous one; counts as a modification.
    pub fn set(&mut self, key: &[u8], value: impl IntoEntry, expire: Option<i64>, keep_ttl: bool) {
        // The `new` event (class n) precedes the command's own event, as Redis's dbAdd.
        if self.ex.notify_classes & notify::NEW != 0 && !self.exists(key) {
            self.notify(notify::NEW, "new", key);
        }
        self.ex
            .ks
            .set(self.db, key, value, expire, keep_ttl, self.now_ms);
        self.modified(key);
    }

    /// Stores a value under a key the caller found missing, in database `db` (Redis's
    /// dbAdd): the `new` event (class n), then the store. Not counted as a
    /// modification: the caller signals it, after its own work.
    pub fn add(&mut self, db: usize, key: &[u8], value: Value, expire: Option<i64>) {
        if self.ex.notify_classes & notify::NEW != 0 {
            self.ex.notify(notify::NEW, "new", db, key.to_vec());
        }
        self.ex.ks.set(db, key, value, expire, false, self.now_ms);
    }

    /// Replaces the value of a key already looked up for writing, keeping its expiry
    /// and access field (see `Keyspace::replace`); counts as a modification.
    pub fn replace(&mut self, key: &[u8], value: Value) {
        if self.ex.notify_classes & notify::NEW != 0 && !self.exists(key) {
            self.notify(notify::NEW, "new", key);
        }
        self.ex.ks.replace(self.db, key, value, self.now_ms);
        self.modified(key);
    }

    /// Looks a key up for writing and returns its string value (copied), without
    /// counting a keyspace hit: `Ok(None)` when missing, WRONGTYPE for other types.
    pub fn write_string_copy(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
        match self.lookup_write(key) {
            None => Ok(None),
            Some(e) => match e.value().string_bytes() {
                Some(b) => Ok(Some(b.into_owned())),
                None => Err(errors::WRONGTYPE),
            },
        }
    }

    /// Deletes a key; counts as a modification if it existed.
    pub fn delete(&mut self, key: &[u8]) -> bool {
        self.ex.ks.expire_if_needed(self.db, key, self.now_ms);
        let existed = self.ex.ks.delete(self.db, key);
        if existed {
            self.modified(key);
        }
        existed
    }

    /// Deletes a key for DEL (freed per `lazyfree-lazy-user-del`) or UNLINK (`lazy`).
    pub fn delete_user(&mut self, key: &[u8], lazy: bool) -> bool {
        self.ex.ks.expire_if_needed(self.db, key, self.now_ms);
        let existed = self.ex.ks.delete_user(self.db, key, lazy);
        if existed {
            self.modified(key);
        }
        existed
    }

    /// Signals that `key` in the current database changed: counted for persistence.
    /// WATCH, client-side caching and replication observe this hook.
    pub fn modified(&mut self, key: &[u8]) {
        self.modified_in(self.db, key);
    }

    /// `modified` for a key of another database (MOVE, COPY … DB).
    pub fn modified_in(&mut self, db: usize, key: &[u8]) {
        self.ex.ks.dirty += 1;
        self.ex.blocking.signal(db, key);
        self.ex.signal_modified_key(Some(self.client), db, key);
    }

    /// Raises a keyspace notification for `key` in the current database.
    #[inline]
    pub fn notify(&mut self, class: u32, event: &'static str, key: &[u8]) {
        if self.ex.notify_classes & class != 0 {
            self.ex.notify(class, event, self.db, key.to_vec());
        }
    }

    /// Replaces what the write stream records for this command (by default the
    /// command verbatim) with `cmds`, for commands whose verbatim replay would not
    /// reproduce their effect (see exec/propagate.rs).
    pub fn propagate_as(&mut self, cmds: Vec<Vec<Vec<u8>>>) {
        if self.ex.stream.enabled {
            self.ex.stream.override_cmds = Some(cmds);
        }
    }

    /// Whether the command comes from our master's stream or the AOF being loaded
    /// (Redis's mustObeyClient): such commands were checked where they first ran.
    pub fn must_obey(&self) -> bool {
        self.ex.persist.loading || self.client_ref().repl_role == Some('M')
    }

    /// Whether an expiry time set now means deleting the key at once (Redis's
    /// checkAlreadyExpired): never on a replica, whose master's DEL decides (its
    /// stream's absolute times may have passed by the time it applies them), nor
    /// while loading.
    pub fn already_expired(&self, when_ms: i64) -> bool {
        when_ms <= self.now_ms && !self.ex.persist.loading && !self.ex.repl.is_replica()
    }

    /// The active `proto-max-bulk-len`.
    pub fn max_bulk_len(&self) -> usize {
        self.ex.config.proto_max_bulk_len as usize
    }
}

/// Fewest picks a random-pick reply must announce to be streamed (`PickStream`):
/// smaller ones are encoded at once.
pub const STREAM_MIN_PICKS: u64 = 8192;

/// Whether a reply of `picks` independent picks from a collection of `len` elements
/// is streamed (`Reply::Picks`): it must be big, at least as long as the collection
/// (the snapshot of the candidates then costs no more than the reply), and the client
/// must be one that may stream (`may_stream`, from `Ctx::may_stream_reply`).
pub fn stream_picks(may_stream: bool, picks: u64, len: usize) -> bool {
    may_stream && picks >= STREAM_MIN_PICKS && picks >= len as u64
}

/// Encodes up to `count` picks for a reply that may repeat elements (negative counts
/// of SRANDMEMBER, HRANDFIELD, ZRANDMEMBER) into an array of `elems_per_pick`
/// elements per pick. `pick` appends one pick's encoding (false when there is none).
/// Nothing is reserved from the count. Like Redis, which stops adding once the client
/// is marked to close, building stops (`None`) when the reply would need more than
/// `room` bytes (`Ctx::reply_room`); the caller then answers
/// `Ctx::output_limit_reached`.
pub fn encode_repeated_picks(
    count: u64,
    elems_per_pick: usize,
    room: usize,
    mut pick: impl FnMut(&mut Vec<u8>) -> bool,
) -> Option<Reply> {
    let mut body = Vec::new();
    let mut picked = 0usize;
    for _ in 0..count {
        if !pick(&mut body) {
            break;
        }
        if picked == 0 {
            // Room for the whole reply as the first pick's size foretells it (within
            // the limit): a big reply is not copied over and over as it grows.
            let foretold = (body.len() as u64).saturating_mul(count);
            // A reply bound for the limit gets a little more, so that the pick passing
            // the limit does not copy the body either.
            let slack = if foretold > room as u64 { 1 << 16 } else { 0 };
            let foretold = foretold.min(room as u64).min(1 << 30) as usize + slack;
            body.reserve(foretold.saturating_sub(body.len()));
        }
        if body.len() > room {
            return None;
        }
        picked += 1;
    }
    Some(Reply::EncodedArray(picked * elems_per_pick, body))
}
