//! Client memory: what each connection costs, counted as Redis counts it, client
//! eviction (`maxmemory-clients`), the adaptive reply buffer and the per-client cron.
//!
//! Each client's cost (`Client::memory_usage`) is its state, its output buffer, its
//! query buffer (as the network layer last reported it), the running command's
//! arguments, its MULTI queue, WATCHed keys, subscriptions and tracking prefixes. It is
//! recomputed after each command, after each read, after each write and once per cron
//! tick (`update_client_mem`), and the sum over normal and Pub/Sub clients is kept
//! current (`ClientMemory::normal`), so checking the limit costs one comparison.
//!
//! Client eviction, as Redis's evictClients: while that sum is at or over the limit, the
//! biggest evictable client (not `CLIENT NO-EVICT on`, not a replica or master link, not
//! already closing) is closed at once, logged with its CLIENT LIST line and counted in
//! INFO `evicted_clients`. The check runs before each command read from a socket, after
//! each read, after the turn's writes and after the cron (`evict_if_over`). Redis groups
//! clients in power-of-two buckets and evicts the first of the biggest bucket; here the
//! biggest client goes first, which the bucket order approximates.
//!
//! The reply buffer: `Client::out` is one vector, whose first `reply_buf_size` bytes
//! play the part of Redis's fixed reply buffer (CLIENT LIST `rbs`, `obl`) and the rest
//! that of its reply list (`oll`, `omem`). As Redis's clientsCronResizeOutputBuffer,
//! the size adapts between 1 KB and 16 KB: it halves (to the peak + 1) when the peak
//! use since the last reset is under half of it, doubles when the peak filled it; the
//! peak restarts every `reply_peak_reset_ms` (5 s; DEBUG REPLYBUFFER PEAK-RESET-TIME).
//! Unlike Redis's buffer the vector is not kept allocated at that size: an empty one is
//! cut to the size at each tick, and an idle client's (at the 1 KB floor) is freed,
//! so idle clients hold no output memory at all.

use super::{Client, Executor};

/// Redis's PROTO_REPLY_CHUNK_BYTES: the largest (and initial) reply buffer.
pub const REPLY_CHUNK_BYTES: usize = 16 * 1024;
/// Redis's PROTO_REPLY_MIN_BYTES: the smallest reply buffer.
pub const REPLY_MIN_BYTES: usize = 1024;
/// What Redis's output-buffer limits count per 16 KB reply-list block: the block's
/// usable size as its allocator rounds it (jemalloc's 20 KB class, less the 16-byte
/// header), then a list node (24) and the header (16).
const REPLY_BLOCK_COUNTED: usize = 20_480 - 16 + 24 + 16;
/// Redis's REPLY_BUFFER_DEFAULT_PEAK_RESET_TIME.
pub const DEFAULT_PEAK_RESET_MS: i64 = 5000;
/// Seconds of history for INFO `client_recent_max_input/output_buffer`.
const PEAK_SLOTS: usize = 8;
/// maxmemory-clients below this is raised to it, so a bad setting cannot lock
/// everybody out (Redis's floor).
const EVICTION_FLOOR: usize = 128 * 1024;

/// Server-wide client-memory bookkeeping.
pub struct ClientMemory {
    /// Sum of `mem_usage` over counted clients (normal and Pub/Sub, as Redis's
    /// CLIENT_TYPE_NORMAL + CLIENT_TYPE_PUBSUB memory): what maxmemory-clients
    /// limits. Kept only while a limit is set.
    pub normal: usize,
    /// The effective maxmemory-clients in bytes; `usize::MAX` when off.
    pub limit: usize,
    /// INFO `evicted_clients`.
    pub evicted: u64,
    /// DEBUG REPLYBUFFER RESIZING.
    pub resizing: bool,
    /// DEBUG REPLYBUFFER PEAK-RESET-TIME: milliseconds, or negative for never.
    pub peak_reset_ms: i64,
    /// Reply buffers shrunk and expanded by the cron (INFO debug).
    pub shrinks: u64,
    pub expands: u64,
    /// Largest query and output buffers seen per second, for the last 8 seconds.
    peak_in: [usize; PEAK_SLOTS],
    peak_out: [usize; PEAK_SLOTS],
    peak_second: u64,
}

impl Default for ClientMemory {
    fn default() -> Self {
        ClientMemory {
            normal: 0,
            limit: usize::MAX,
            evicted: 0,
            resizing: true,
            peak_reset_ms: DEFAULT_PEAK_RESET_MS,
            shrinks: 0,
            expands: 0,
            peak_in: [0; PEAK_SLOTS],
            peak_out: [0; PEAK_SLOTS],
            peak_second: 0,
        }
    }
}

impl ClientMemory {
    /// INFO `client_recent_max_input_buffer` and `client_recent_max_output_buffer`.
    pub fn recent_max(&self) -> (usize, usize) {
        (
            self.peak_in.iter().copied().max().unwrap_or(0),
            self.peak_out.iter().copied().max().unwrap_or(0),
        )
    }
}

impl Client {
    /// Bytes in the reply buffer (CLIENT LIST `obl`).
    pub fn reply_buf_used(&self) -> usize {
        if self.pending_output() == 0 {
            0
        } else {
            self.buffered_len().min(self.reply_buf_size)
        }
    }

    /// Unwritten bytes past the reply buffer: Redis's reply list (`omem`).
    pub fn reply_list_bytes(&self) -> usize {
        self.buffered_len()
            .saturating_sub(self.reply_buf_size.max(self.written_len()))
    }

    /// What `client-output-buffer-limit` measures for a normal or Pub/Sub client, as
    /// Redis's getClientOutputBufferMemoryUsage: the reply list's blocks as allocated
    /// (`REPLY_BLOCK_COUNTED` each), never the reply buffer, so a reply that fits the
    /// buffer never trips a tiny limit.
    pub fn output_limit_usage(&self) -> usize {
        self.reply_list_blocks() * REPLY_BLOCK_COUNTED
    }

    /// The reply list's length in Redis's 16 KB blocks (`oll`).
    pub fn reply_list_blocks(&self) -> usize {
        self.reply_list_bytes().div_ceil(REPLY_CHUNK_BYTES)
    }

    /// Memory of the queued MULTI commands (CLIENT LIST `multi-mem`).
    pub fn multi_mem(&self) -> usize {
        self.tx.multi.as_ref().map_or(0, |m| m.argv_len_sums)
    }

    /// The client's memory as Redis's getClientMemoryUsage counts it (CLIENT LIST
    /// `tot-mem`): its state, output and query buffers, the running command's
    /// arguments, MULTI queue, WATCHed keys, subscriptions and tracking prefixes.
    /// Shared strings (channel names, watched keys) are counted by their slots only.
    pub fn memory_usage(&self) -> usize {
        let multi = self.tx.multi.as_ref().map_or(0, |m| {
            m.argv_len_sums + m.queue.capacity() * std::mem::size_of::<super::multi::Queued>()
        });
        let subs = self.subs.slots() * (std::mem::size_of::<(Vec<u8>, u64)>() + 1);
        std::mem::size_of::<Client>()
            + self.out_capacity()
            + self.stream.as_ref().map_or(0, |s| s.memory())
            + self.deferred.capacity()
            + self.qbuf
            + self.qbuf_free
            + self.argv_mem
            + multi
            + self.tx.watched.capacity() * std::mem::size_of::<super::multi::WatchedKey>()
            + subs
            + self.tracking.prefixes.capacity() * std::mem::size_of::<Vec<u8>>()
    }

    /// Counted against maxmemory-clients: normal and Pub/Sub clients with a socket
    /// (MONITOR included), not replicas nor the master link, not already closing.
    fn mem_counted(&self) -> bool {
        !self.embedded && self.repl_role.is_none() && !self.close_asap
    }
}

impl Executor {
    /// Recomputes a client's memory and the server-wide sum; notes the reply buffer's
    /// peak use.
    pub fn update_client_mem(&mut self, slot: usize) {
        let Some(c) = self.clients.get_mut(slot).and_then(|c| c.as_deref_mut()) else {
            return;
        };
        let used = c.buffered_len().min(c.reply_buf_size);
        if used > c.reply_buf_peak {
            c.reply_buf_peak = used;
        }
        // Without a limit nothing reads the sum (INFO and CLIENT LIST compute their
        // figures), so requests pay nothing for it.
        if self.client_mem.limit == usize::MAX {
            return;
        }
        if c.mem_in_total {
            self.client_mem.normal -= c.mem_usage;
        }
        c.mem_usage = c.memory_usage();
        c.mem_in_total = c.mem_counted();
        if c.mem_in_total {
            self.client_mem.normal += c.mem_usage;
        }
    }

    /// Recomputes a client's share of the maxmemory-clients sum after its buffers
    /// changed outside a command (reads, writes); nothing to do without that limit.
    #[inline]
    pub fn update_client_mem_if_limited(&mut self, slot: usize) {
        if self.client_mem.limit != usize::MAX {
            self.update_client_mem(slot);
        }
    }

    /// Takes a leaving client out of the sum.
    pub(crate) fn forget_client_mem(&mut self, slot: usize) {
        if let Some(c) = self.clients.get_mut(slot).and_then(|c| c.as_deref_mut()) {
            if c.mem_in_total {
                self.client_mem.normal -= c.mem_usage;
                c.mem_in_total = false;
            }
        }
    }

    /// Whether the clients' memory is at or over maxmemory-clients.
    #[inline]
    pub fn client_mem_over_limit(&self) -> bool {
        self.client_mem.normal >= self.client_mem.limit
    }

    /// Evicts clients while their memory is over maxmemory-clients.
    #[inline]
    pub fn evict_if_over(&mut self) {
        if self.client_mem_over_limit() {
            self.evict_clients();
        }
    }

    /// maxmemory-clients in bytes (a percentage is of maxmemory), at least 128 KB, or
    /// `usize::MAX` when off. Kept in `client_mem.limit` by `apply_config`.
    pub(crate) fn sync_client_eviction_limit(&mut self) {
        let v = self.config.stored_str("maxmemory-clients");
        let bytes = match v.strip_suffix('%') {
            Some(p) if self.config.maxmemory > 0 => {
                let pct: f64 = p.parse().unwrap_or(0.0);
                (self.config.maxmemory as f64 * pct / 100.0) as usize
            }
            Some(_) => 0,
            None => v.parse().unwrap_or(0),
        };
        let was_off = self.client_mem.limit == usize::MAX;
        self.client_mem.limit = if bytes == 0 {
            usize::MAX
        } else {
            bytes.max(EVICTION_FLOOR)
        };
        // The sum is kept only while a limit is set: it starts from a full count.
        if was_off && self.client_mem.limit != usize::MAX {
            let slots: Vec<usize> = self.clients().map(|(slot, _)| slot).collect();
            for slot in slots {
                self.update_client_mem(slot);
            }
        } else if self.client_mem.limit == usize::MAX {
            self.client_mem.normal = 0;
            for (_, c) in self.clients_mut() {
                c.mem_in_total = false;
            }
        }
    }

    /// Redis's evictClients: closes the biggest evictable clients until the clients'
    /// memory is under the limit.
    pub fn evict_clients(&mut self) {
        while self.client_mem_over_limit() {
            let victim = self
                .clients()
                .filter(|(_, c)| c.mem_in_total && !c.no_evict)
                .max_by_key(|(_, c)| c.mem_usage)
                .map(|(slot, _)| slot);
            let Some(slot) = victim else {
                crate::log::warning("Over client maxmemory after evicting all evictable clients");
                return;
            };
            let line = crate::commands::connection::client_line(
                self.client(slot),
                self.is_blocked(slot),
                self.client(slot).qbuf_free,
            );
            crate::log::notice(&format!("Evicting client: {line}"));
            self.client_mem.evicted += 1;
            self.forget_client_mem(slot);
            self.close_client_now(slot);
        }
    }

    /// Closes a client at once when the network layer can (any connection but the
    /// one whose command is running); otherwise marks it to be closed before its
    /// next command (`Client::evicted`).
    fn close_client_now(&mut self, slot: usize) {
        let closed = match self.busy_server.clone() {
            Some(server) => server.close_now(self, slot),
            None => false,
        };
        if !closed {
            let c = self.client_mut(slot);
            c.close_asap = true;
            c.evicted = true;
            self.close_pending = true;
        }
    }

    /// Redis's clientsCron work for one client, once per cron tick: the soft
    /// output-buffer limit (it must fire with no traffic too), the reply buffer's
    /// resizing, the recent-peak statistics and the memory sum.
    pub fn client_cron(&mut self, slot: usize, now_ms: i64) {
        let second = (now_ms / 1000) as u64;
        if second != self.client_mem.peak_second {
            // Each second starts its slot afresh.
            self.client_mem.peak_second = second;
            let i = (second as usize) % PEAK_SLOTS;
            self.client_mem.peak_in[i] = 0;
            self.client_mem.peak_out[i] = 0;
        }
        let Some(c) = self.clients.get(slot).and_then(|c| c.as_deref()) else {
            return;
        };
        if c.embedded {
            return;
        }
        if c.pending_output() > 0 && !c.close_asap {
            self.check_output_limits(slot);
        }
        let resizing = self.client_mem.resizing;
        let reset_ms = self.client_mem.peak_reset_ms;
        let c = self.client_mut(slot);
        let size = c.reply_buf_size;
        let mut resized = 0i8;
        if resizing {
            if size / 2 >= REPLY_MIN_BYTES && c.reply_buf_peak < size / 2 {
                c.reply_buf_size = REPLY_MIN_BYTES.max(c.reply_buf_peak + 1);
                resized = -1;
            } else if size * 2 < REPLY_CHUNK_BYTES * 2 && c.reply_buf_peak == size {
                c.reply_buf_size = REPLY_CHUNK_BYTES.min(size * 2);
                resized = 1;
            }
        }
        if reset_ms >= 0 && now_ms - c.reply_peak_reset_at >= reset_ms {
            c.reply_buf_peak = c.reply_buf_used();
            c.reply_peak_reset_at = now_ms;
        }
        if c.pending_output() == 0 {
            // What an empty buffer holds past its size goes back; an idle client's
            // (at the floor, nothing in it) entirely.
            if c.reply_buf_size == REPLY_MIN_BYTES && c.reply_buf_peak == 0 {
                c.out = Vec::new();
            } else if c.out.capacity() > c.reply_buf_size {
                c.out.clear();
                c.out.shrink_to(c.reply_buf_size);
            }
            c.out_pos = 0;
        }
        let input = c.qbuf + c.qbuf_free;
        let output = c.reply_list_bytes();
        match resized {
            -1 => self.client_mem.shrinks += 1,
            1 => self.client_mem.expands += 1,
            _ => {}
        }
        let i = (second as usize) % PEAK_SLOTS;
        let m = &mut self.client_mem;
        m.peak_in[i] = m.peak_in[i].max(input);
        m.peak_out[i] = m.peak_out[i].max(output);
        self.update_client_mem(slot);
    }

    /// Whether a client is registered in `slot`.
    pub fn has_client(&self, slot: usize) -> bool {
        matches!(self.clients.get(slot), Some(Some(_)))
    }
}

/// CLIENT LIST's `argv-mem` while a command runs: its arguments' bytes (Redis's
/// argv_len_sum).
pub(crate) fn argv_len(args: &[&[u8]]) -> usize {
    args.iter().map(|a| a.len()).sum()
}
