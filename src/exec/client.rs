//! Per-client state owned by the executor: selected database, protocol version, name,
//! authentication, reply mode and the output buffer that replies and pushes are
//! encoded into. The network layer owns only the socket and the read buffer.

use std::time::Instant;

use crate::protocol::{PickStream, Reply};

/// An output buffer holding this much after a reply is sealed into a block of the
/// reply list (`Client::seal`).
pub const SEAL_AT: usize = 64 * 1024;
/// Output blocks and query buffers from this size on are freed off the loop (on the
/// lazy-free thread): unmapping megabytes takes long enough to show in every client's
/// latency.
pub const BIG_BLOCK: usize = 1024 * 1024;

/// Unwritten bytes a streamed reply keeps in the output buffer: it is topped up to
/// this as the socket drains.
pub const STREAM_CHUNK: usize = 64 * 1024;

/// A block of the reply list: replies encoded for this client, or a piece of the
/// shared replication buffer (a replica's share of the stream, replication/buffer.rs),
/// which this client refers to without owning.
pub enum OutBlock {
    Owned(Vec<u8>),
    Shared(crate::replication::buffer::Piece),
}

impl OutBlock {
    pub fn bytes(&self) -> &[u8] {
        match self {
            OutBlock::Owned(v) => v,
            OutBlock::Shared(p) => p.bytes(),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            OutBlock::Owned(v) => v.len(),
            OutBlock::Shared(p) => p.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The memory this client owns: a shared piece is the replication buffer's.
    pub fn capacity(&self) -> usize {
        match self {
            OutBlock::Owned(v) => v.capacity(),
            OutBlock::Shared(_) => 0,
        }
    }
}

impl std::fmt::Debug for OutBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OutBlock::Owned(v) => write!(f, "Owned({} bytes)", v.len()),
            OutBlock::Shared(p) => write!(f, "Shared({} bytes)", p.len()),
        }
    }
}

/// CLIENT REPLY modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// Skip the reply to the next command only.
    SkipNext,
    /// Skipping the reply of the current command.
    Skipping,
}

#[derive(Debug)]
pub struct Client {
    pub id: u64,
    /// Cluster mode: ASKING (next command may use an importing slot) and READONLY
    /// (reads served by a replica).
    pub cluster_asking: bool,
    pub cluster_readonly: bool,
    /// Connected over TLS: cluster replies show nodes' TLS ports (as Redis's
    /// shouldReturnTlsInfo).
    pub tls: bool,
    /// The I/O thread its socket reads and writes go to (`io-threads`; 0 is the
    /// event loop's own), CLIENT LIST `io-thread`.
    pub io_thread: u8,
    pub db: usize,
    pub proto: u8,
    pub name: Option<Vec<u8>>,
    pub lib_name: Option<Vec<u8>>,
    pub lib_ver: Option<Vec<u8>>,
    pub authenticated: bool,
    pub user: String,
    /// The user needs no permission check (ACL fast path; `acl::Acl` keeps it current).
    pub acl_free: bool,
    pub addr: String,
    pub laddr: String,
    pub fd: i64,
    pub created: Instant,
    /// Write-stream position after this client's last write (WAITAOF waits for it).
    pub aof_woff: u64,
    pub last_interaction: Instant,
    pub reply_mode: ReplyMode,
    pub no_evict: bool,
    pub no_touch: bool,
    /// Close once pending output is written (QUIT, protocol errors, CLIENT KILL of self).
    pub close_after_reply: bool,
    /// Close as soon as possible without writing more (CLIENT KILL, buffer limits).
    pub close_asap: bool,
    /// Encoded replies not yet written to the socket; `out_pos` bytes already written.
    /// Replies are encoded here; once it holds `SEAL_AT` bytes it is moved to `sealed`
    /// whole (`seal`), so a big backlog is a list of blocks, never one vector that
    /// doubles and copies itself as it grows.
    pub out: Vec<u8>,
    pub out_pos: usize,
    /// Output older than `out`, written first, each block freed once written (Redis's
    /// reply list); `sealed_pos` bytes of the first are written (`out_pos` is then 0).
    pub sealed: std::collections::VecDeque<OutBlock>,
    pub sealed_pos: usize,
    /// Unwritten bytes and allocated capacity of `sealed`.
    pub sealed_bytes: usize,
    pub sealed_cap: usize,
    /// A reply still being produced as the socket drains (`fill_stream`): the
    /// connection runs nothing else until it is complete, and pushes wait in
    /// `deferred` behind it.
    pub stream: Option<Box<PickStream>>,
    /// When the output buffer first went over the soft limit (unix seconds).
    pub soft_limit_since: Option<i64>,
    /// Name of the last command run (CLIENT LIST `cmd=`).
    pub last_cmd: &'static str,
    /// Query buffer size as last reported by the network layer (CLIENT LIST `qbuf=`).
    pub qbuf: usize,
    /// Allocated but unused query-buffer bytes (CLIENT LIST `qbuf-free=`).
    pub qbuf_free: usize,
    /// Whether this client has unwritten output registered with the executor.
    pub pending_write: bool,
    /// Embedded clients (no socket) collect pushes here instead of `out`.
    pub embedded: bool,
    /// The scripts' pseudo-client (Redis's CLIENT_SCRIPT): commands it runs were
    /// called by a script.
    pub script: bool,
    /// True while this client's EXEC runs its queued commands (exec/multi.rs). Blocking
    /// commands must read it and behave as their non-blocking forms (reply at once with
    /// the timeout reply) instead of blocking, as Redis's CLIENT_DENY_BLOCKING.
    pub in_exec: bool,
    /// MULTI queue and WATCHed keys (exec/multi.rs).
    pub tx: super::multi::ClientTx,
    /// Pub/Sub subscriptions (exec/pubsub.rs).
    pub subs: super::pubsub::ClientSubs,
    /// CLIENT TRACKING state (exec/tracking.rs).
    pub tracking: super::tracking::ClientTracking,
    /// In MONITOR mode (exec/monitor.rs).
    pub monitor: bool,
    /// True while this client's own command runs: pushes addressed to it (keyspace
    /// events, invalidations) wait in `deferred` and follow the command's reply.
    pub executing: bool,
    pub deferred: Vec<u8>,
    /// Replication offset of this client's last write (WAIT, src/replication).
    pub woff: u64,
    /// `S` for a replica attached to us, `M` for our master's link (CLIENT LIST).
    pub repl_role: Option<char>,
    /// The adaptive reply buffer's size and its peak use since `reply_peak_reset_at`
    /// (unix ms): CLIENT LIST `rbs` and `rbp` (exec/client_mem.rs).
    pub reply_buf_size: usize,
    pub reply_buf_peak: usize,
    pub reply_peak_reset_at: i64,
    /// The running command's argument bytes (CLIENT LIST `argv-mem`).
    pub argv_mem: usize,
    /// Memory as last computed (`Executor::update_client_mem`), and whether it is in
    /// the server-wide sum that maxmemory-clients limits.
    pub mem_usage: usize,
    pub mem_in_total: bool,
    /// Evicted for maxmemory-clients while its own command ran: closed before the
    /// next one.
    pub evicted: bool,
    /// SCRIPT DEBUG YES|SYNC: its next EVAL runs as a debugging session
    /// (scripting/ldb.rs).
    pub lua_debug: Option<crate::scripting::ldb::Mode>,
}

impl Client {
    pub fn new(id: u64, addr: String, laddr: String, fd: i64, authenticated: bool) -> Client {
        let now = Instant::now();
        Client {
            id,
            db: 0,
            proto: 2,
            name: None,
            lib_name: None,
            lib_ver: None,
            authenticated,
            user: "default".into(),
            acl_free: true,
            cluster_asking: false,
            cluster_readonly: false,
            tls: false,
            io_thread: 0,
            addr,
            laddr,
            fd,
            created: now,
            aof_woff: 0,
            last_interaction: now,
            reply_mode: ReplyMode::On,
            no_evict: false,
            no_touch: false,
            close_after_reply: false,
            close_asap: false,
            out: Vec::new(),
            out_pos: 0,
            sealed: Default::default(),
            sealed_pos: 0,
            sealed_bytes: 0,
            sealed_cap: 0,
            stream: None,
            soft_limit_since: None,
            last_cmd: "NULL",
            qbuf: 0,
            qbuf_free: 0,
            pending_write: false,
            embedded: false,
            script: false,
            in_exec: false,
            tx: Default::default(),
            subs: Default::default(),
            tracking: Default::default(),
            monitor: false,
            executing: false,
            deferred: Vec::new(),
            woff: 0,
            repl_role: None,
            reply_buf_size: super::client_mem::REPLY_CHUNK_BYTES,
            reply_buf_peak: 0,
            reply_peak_reset_at: crate::keyspace::unix_ms(),
            argv_mem: 0,
            mem_usage: 0,
            mem_in_total: false,
            evicted: false,
            lua_debug: None,
        }
    }

    /// Whether the client is local for the `local` value of `enable-debug-command`,
    /// `enable-module-command` and `enable-protected-configs`: a loopback peer
    /// (127.0.0.0/8 or ::1), a unix-socket peer, or one that never crossed the network.
    pub fn is_local(&self) -> bool {
        let a = &self.addr;
        a.starts_with("127.") || a.starts_with("[::1]:") || a.starts_with('/') || self.embedded
    }

    /// Bytes of output not yet written.
    pub fn pending_output(&self) -> usize {
        self.sealed_bytes + self.out.len() - self.out_pos
    }

    /// Output held, the written part of the first block included (what one vector
    /// holding it all would have as its length).
    pub fn buffered_len(&self) -> usize {
        self.sealed_pos + self.sealed_bytes + self.out.len()
    }

    /// Written bytes still held at the front of the output.
    pub fn written_len(&self) -> usize {
        if self.sealed.is_empty() {
            self.out_pos
        } else {
            self.sealed_pos
        }
    }

    /// Capacity of the output buffer and its sealed blocks.
    pub fn out_capacity(&self) -> usize {
        self.out.capacity() + self.sealed_cap
    }

    /// Encodes `r` into the output buffer in the client's protocol.
    pub fn push_reply(&mut self, r: &Reply) {
        r.encode(self.proto, &mut self.out);
        self.note_reply_peak();
        if self.out.len() >= SEAL_AT {
            self.seal();
        }
    }

    /// Notes the reply buffer's peak use (CLIENT LIST `rbp`, the buffer's resizing in
    /// `client_mem.rs`) after output was added.
    #[inline]
    pub fn note_reply_peak(&mut self) {
        let used = self.buffered_len().min(self.reply_buf_size);
        if used > self.reply_buf_peak {
            self.reply_buf_peak = used;
        }
    }

    /// Writes an array of `n` elements whose encoding is `body`: the header, then
    /// `body` itself as a block of the reply list.
    pub fn push_encoded_array(&mut self, n: usize, body: Vec<u8>) {
        crate::protocol::reply::encode_header(b'*', n, &mut self.out);
        self.push_block(body);
        self.note_reply_peak();
    }

    /// Appends raw output (a replica's share of the write stream): a big backlog
    /// becomes blocks of the reply list, never one vector that doubles as it grows.
    pub fn append_output(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
        if self.out.len() >= SEAL_AT {
            self.seal();
        }
    }

    /// `append_output` of an owned buffer: a big one joins the reply list as it is.
    pub fn append_output_owned(&mut self, bytes: Vec<u8>) {
        if bytes.len() < SEAL_AT {
            self.append_output(&bytes);
            return;
        }
        self.push_block(bytes);
    }

    /// Writes a bulk string whose contents are `value`: the header, `value` itself as
    /// a block of the reply list, then the line end.
    pub fn push_big_bulk(&mut self, value: Vec<u8>) {
        crate::protocol::reply::encode_header(b'$', value.len(), &mut self.out);
        self.push_block(value);
        self.out.extend_from_slice(b"\r\n");
        self.note_reply_peak();
    }

    /// Appends `block` to the reply list as it is, after whatever output is pending.
    fn push_block(&mut self, block: Vec<u8>) {
        self.seal();
        self.sealed_bytes += block.len();
        self.sealed_cap += block.capacity();
        self.sealed.push_back(OutBlock::Owned(block));
    }

    /// Appends a piece of the shared replication buffer after whatever output is
    /// pending, joining the previous piece when it continues it.
    pub fn append_piece(&mut self, piece: &crate::replication::buffer::Piece) {
        if piece.is_empty() {
            return;
        }
        self.seal();
        self.sealed_bytes += piece.len();
        if let Some(OutBlock::Shared(last)) = self.sealed.back_mut() {
            if last.join(piece) {
                return;
            }
        }
        if self.sealed.is_empty() {
            self.sealed_pos = 0;
        }
        self.sealed.push_back(OutBlock::Shared(piece.clone()));
    }

    /// Moves the output buffer to the end of the sealed blocks; the next reply starts
    /// a new one.
    pub fn seal(&mut self) {
        if self.out.len() == self.out_pos {
            return;
        }
        if self.sealed.is_empty() {
            self.sealed_pos = self.out_pos;
        }
        self.sealed_bytes += self.out.len() - self.out_pos;
        self.sealed_cap += self.out.capacity();
        self.out_pos = 0;
        self.sealed
            .push_back(OutBlock::Owned(std::mem::take(&mut self.out)));
    }

    /// Up to `max` slices of unwritten output, in order, for one vectored write.
    pub fn unwritten_slices<'a>(&'a self, slices: &mut Vec<std::io::IoSlice<'a>>, max: usize) {
        let room = max.saturating_sub(slices.len());
        slices.extend(self.unwritten().take(room).map(std::io::IoSlice::new));
    }

    /// The output still to write, in order: the sealed blocks, then the buffer.
    pub fn unwritten(&self) -> impl Iterator<Item = &[u8]> {
        let sealed = self.sealed.iter().enumerate().map(|(i, block)| {
            let from = if i == 0 { self.sealed_pos } else { 0 };
            &block.bytes()[from..]
        });
        let out = (self.out.len() > self.out_pos).then(|| &self.out[self.out_pos..]);
        sealed.chain(out)
    }

    /// Accounts `n` bytes written to the socket: sealed blocks written whole are freed,
    /// those of `BIG_BLOCK` bytes or more handed to `big` (the network layer frees them
    /// off the loop).
    pub fn consume_written(&mut self, mut n: usize, big: &mut Vec<Vec<u8>>) {
        while n > 0 {
            let Some(front) = self.sealed.front() else {
                break;
            };
            let left = front.len() - self.sealed_pos;
            if n < left {
                self.sealed_pos += n;
                self.sealed_bytes -= n;
                return;
            }
            n -= left;
            self.sealed_bytes -= left;
            self.sealed_cap -= front.capacity();
            self.sealed_pos = 0;
            if let Some(OutBlock::Owned(mut block)) = self.sealed.pop_front() {
                if block.capacity() >= BIG_BLOCK {
                    big.push(block);
                } else if self.out.capacity() == 0 {
                    // The output buffer sealed for an I/O thread's write
                    // (net/io_phases.rs) comes back as the next one.
                    block.clear();
                    self.out = block;
                }
            }
        }
        self.out_pos += n;
    }

    /// The output blocks (and output buffer) of `BIG_BLOCK` bytes or more, taken out of
    /// a client that is going away so they can be freed off the loop.
    pub fn take_big_output(&mut self) -> Vec<Vec<u8>> {
        let mut big: Vec<Vec<u8>> = self
            .sealed
            .iter_mut()
            .filter_map(|b| match b {
                OutBlock::Owned(v) if v.capacity() >= BIG_BLOCK => Some(std::mem::take(v)),
                _ => None,
            })
            .collect();
        if self.out.capacity() >= BIG_BLOCK {
            big.push(std::mem::take(&mut self.out));
        }
        big
    }

    /// Starts writing a streamed reply: its first piece now, the rest as the socket
    /// drains.
    pub fn start_stream(&mut self, stream: Box<PickStream>) {
        self.stream = Some(stream);
        self.fill_stream();
        self.note_reply_peak();
    }

    /// Tops the output buffer up from the streamed reply to `STREAM_CHUNK` unwritten
    /// bytes; once the reply is complete, the pushes that waited behind it follow.
    /// True while the reply is still being produced.
    pub fn fill_stream(&mut self) -> bool {
        let pending = self.pending_output();
        let Some(stream) = self.stream.as_mut() else {
            return false;
        };
        if pending >= STREAM_CHUNK {
            return true;
        }
        if !stream.fill(&mut self.out, STREAM_CHUNK - pending) {
            return true;
        }
        self.stream = None;
        if !self.deferred.is_empty() && !self.executing {
            let deferred = std::mem::take(&mut self.deferred);
            self.out.extend_from_slice(&deferred);
        }
        false
    }

    /// Whether pushes addressed to this client must wait in `deferred`: its own
    /// command runs, or a streamed reply is still being written.
    pub fn defers_pushes(&self) -> bool {
        self.executing || self.stream.is_some()
    }

    /// Encodes only the pushes of `r` (a `Push`, or those inside a `Multi`): what a
    /// silenced client (CLIENT REPLY OFF/SKIP) still receives.
    pub fn push_pushes_only(&mut self, r: &Reply) {
        match r {
            Reply::Push(_) => self.push_reply(r),
            Reply::Multi(parts) => parts.iter().for_each(|p| self.push_pushes_only(p)),
            _ => {}
        }
    }

    /// Whether the client is inside MULTI (queueing commands).
    pub fn in_multi(&self) -> bool {
        self.tx.multi.is_some()
    }

    /// Whether the client has any channel, pattern or shard-channel subscription (the
    /// `pubsub` class for CLIENT LIST TYPE and output buffer limits).
    #[inline]
    pub fn is_pubsub(&self) -> bool {
        self.subs.count() > 0
    }

    /// Flags for CLIENT LIST / CLIENT INFO, in Redis's order.
    /// `blocked`: whether the client waits in a blocking command (kept by the executor).
    pub fn flags_string(&self, blocked: bool) -> String {
        let mut f = String::new();
        if self.monitor {
            f.push('O');
        }
        if let Some(r) = self.repl_role {
            f.push(r);
        }
        if self.is_pubsub() {
            f.push('P');
        }
        if self.in_multi() {
            f.push('x');
        }
        if blocked {
            f.push('b');
        }
        f.push_str(self.tracking.flags_string());
        if self.tx.dirty_cas {
            f.push('d');
        }
        if self.close_after_reply {
            f.push('c');
        }
        if self.close_asap {
            f.push('A');
        }
        if self.no_evict {
            f.push('e');
        }
        if self.no_touch {
            f.push('T');
        }
        if f.is_empty() {
            f.push('N');
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written blocks are dropped as they are written, except big ones, handed back to
    /// be freed off the loop; the counts follow either way.
    #[test]
    fn written_big_blocks_are_handed_back() {
        let mut c = Client::new(1, "a".into(), "b".into(), 5, true);
        c.out.extend_from_slice(b"+OK\r\n");
        c.push_big_bulk(vec![7u8; BIG_BLOCK]);
        c.push_big_bulk(vec![8u8; 100_000]);
        let total = c.pending_output();
        let mut big = Vec::new();
        c.consume_written(5 + 10, &mut big);
        assert!(big.is_empty());
        c.consume_written(BIG_BLOCK, &mut big);
        assert_eq!(big.len(), 1);
        assert_eq!(big[0].len(), BIG_BLOCK);
        assert!(big[0].iter().all(|&b| b == 7));
        let left = total - 15 - BIG_BLOCK;
        assert_eq!(c.pending_output(), left);
        c.consume_written(left, &mut big);
        assert_eq!(big.len(), 1, "a 100 KB block is freed in place");
        assert_eq!(c.pending_output(), 0);
    }
}
