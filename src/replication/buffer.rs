//! Redis 7's shared replication buffer: the replication stream is kept once, in a list
//! of blocks that the backlog and every replica's output refer to, instead of a copy
//! per replica plus a ring for the backlog.
//!
//! * The backlog (`ReplBuffer`) is the list itself, from its oldest block on. It is
//!   trimmed from the front, a block at a time, once it holds more than
//!   `repl-backlog-size` without that block, and only when no replica still refers
//!   to the block. So a slow replica makes the backlog outgrow its setting, and a
//!   replica that reconnects may continue from anywhere the buffer still holds.
//! * A replica's share of the stream is a list of `Piece`s (a block and a range of
//!   it) in its output, or held for it while its full sync runs; writing it to the
//!   socket, or dropping the replica, releases the blocks.
//! * Blocks are appended to in place: the tail block fills up before a new one is
//!   made, so a quiet stream does not cost a block per write. Every live block is
//!   counted in `memory()` (INFO `mem_total_replication_buffers`), wherever its last
//!   reference is.
//!
//! # Why the unsafe code is sound
//!
//! A block is a buffer allocated once and never moved or reallocated. Only the event
//! loop appends, writing the bytes past the block's length and then publishing the
//! new length (Release). A `Piece` covers bytes below the length at the time it was
//! made, which are never written again; other threads (I/O threads writing a
//! replica's output) read only through pieces handed to them by the loop, after
//! the hand-over's own synchronization. So no byte is written while it may be read,
//! and the allocation outlives every piece (each piece holds its block's `Arc`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use smallvec::SmallVec;

/// The smallest size of a new block (Redis's PROTO_REPLY_CHUNK_BYTES).
pub const BLOCK_SIZE: usize = 16 << 10;

/// What a block costs besides its bytes: its header and the `Arc` around it.
pub const BLOCK_OVERHEAD: usize = std::mem::size_of::<Block>() + 16;

/// A block's slot in the backlog's list.
const SLOT: usize = std::mem::size_of::<Arc<Block>>();

/// Bytes held by live blocks, overhead included, and by the backlog's list.
static MEMORY: AtomicUsize = AtomicUsize::new(0);

/// The memory of the shared replication buffer (INFO `mem_total_replication_buffers`).
pub fn memory() -> usize {
    MEMORY.load(Ordering::Relaxed)
}

pub struct Block {
    ptr: *mut u8,
    cap: usize,
    len: AtomicUsize,
}

// SAFETY: see the module comment: bytes are written once, below-length bytes are only
// read, and only the event loop appends.
unsafe impl Send for Block {}
// SAFETY: as above.
unsafe impl Sync for Block {}

impl Block {
    fn new(cap: usize) -> Arc<Block> {
        let mut v = std::mem::ManuallyDrop::new(Vec::<u8>::with_capacity(cap));
        let (ptr, cap) = (v.as_mut_ptr(), v.capacity());
        MEMORY.fetch_add(cap + BLOCK_OVERHEAD, Ordering::Relaxed);
        Arc::new(Block {
            ptr,
            cap,
            len: AtomicUsize::new(0),
        })
    }

    fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    fn room(&self) -> usize {
        self.cap - self.len()
    }

    /// Appends what fits of `data`; returns the range written.
    fn append(&self, data: &[u8]) -> (usize, usize) {
        let start = self.len();
        let n = data.len().min(self.cap - start);
        // SAFETY: `start + n <= cap`, inside the allocation; bytes at or past the
        // length are not covered by any piece, so nobody reads them (module comment).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(start), n) };
        self.len.store(start + n, Ordering::Release);
        (start, start + n)
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        MEMORY.fetch_sub(self.cap + BLOCK_OVERHEAD, Ordering::Relaxed);
        // SAFETY: `ptr` and `cap` come from the Vec made in `new`, never freed since;
        // a length of 0 leaves nothing to drop (bytes need none).
        drop(unsafe { Vec::from_raw_parts(self.ptr, 0, self.cap) });
    }
}

/// A range of a block: part of the stream, shared.
#[derive(Clone)]
pub struct Piece {
    block: Arc<Block>,
    start: usize,
    end: usize,
}

impl Piece {
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the range was written before this piece was made and is never
        // written again; the block's allocation lives as long as this `Arc`.
        unsafe { std::slice::from_raw_parts(self.block.ptr.add(self.start), self.end - self.start) }
    }

    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// Extends this piece by `next` when `next` continues it in the same block.
    pub fn join(&mut self, next: &Piece) -> bool {
        if Arc::ptr_eq(&self.block, &next.block) && self.end == next.start {
            self.end = next.end;
            return true;
        }
        false
    }
}

/// A run of pieces: the stream held for a replica while its full sync runs.
#[derive(Clone, Default)]
pub struct Pieces {
    pieces: Vec<Piece>,
    len: usize,
}

impl Pieces {
    pub fn push(&mut self, p: Piece) {
        self.len += p.len();
        if let Some(last) = self.pieces.last_mut() {
            if last.join(&p) {
                return;
            }
        }
        self.pieces.push(p);
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn into_pieces(self) -> Vec<Piece> {
        self.pieces
    }

    #[cfg(test)]
    pub fn bytes(&self) -> Vec<u8> {
        self.pieces
            .iter()
            .flat_map(|p| p.bytes())
            .copied()
            .collect()
    }
}

/// The blocks of the stream from the backlog's oldest byte on.
pub struct ReplBuffer {
    blocks: VecDeque<Arc<Block>>,
    /// Bytes the blocks hold (INFO `repl_backlog_histlen`).
    histlen: usize,
    /// `repl-backlog-size`.
    size: usize,
}

/// Most bytes one trimming pass frees (Redis trims incrementally too): a backlog
/// released by a slow replica is freed over several turns, never in one long stall.
const TRIM_BYTES_PER_PASS: usize = 32 << 20;

impl Drop for ReplBuffer {
    fn drop(&mut self) {
        MEMORY.fetch_sub(self.blocks.capacity() * SLOT, Ordering::Relaxed);
    }
}

impl ReplBuffer {
    pub fn new(size: usize) -> ReplBuffer {
        ReplBuffer {
            blocks: VecDeque::new(),
            histlen: 0,
            size: size.max(1),
        }
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn histlen(&self) -> usize {
        self.histlen
    }

    /// The offset of the oldest byte held, given the stream's end offset.
    pub fn first_byte_offset(&self, end: u64) -> u64 {
        end + 1 - self.histlen as u64
    }

    /// Appends `data` to the stream; the pieces that hold it, in order.
    pub fn append(&mut self, mut data: &[u8]) -> SmallVec<[Piece; 2]> {
        let mut out = SmallVec::new();
        self.histlen += data.len();
        while !data.is_empty() {
            let tail = match self.blocks.back() {
                Some(b) if b.room() > 0 => b.clone(),
                _ => {
                    // At least a block's size, so later writes fill it; at most a
                    // sixteenth of the backlog, so no huge block outlives the few
                    // bytes of it still needed (a big write takes several).
                    let limit = (self.size / 16).max(BLOCK_SIZE);
                    let b = Block::new(data.len().clamp(BLOCK_SIZE, limit));
                    let slots = self.blocks.capacity();
                    self.blocks.push_back(b.clone());
                    // The list's own slots are the buffer's memory too.
                    let grown = self.blocks.capacity() - slots;
                    MEMORY.fetch_add(grown * SLOT, Ordering::Relaxed);
                    b
                }
            };
            let (start, end) = tail.append(data);
            data = &data[end - start..];
            out.push(Piece {
                block: tail,
                start,
                end,
            });
        }
        out
    }

    /// The pieces holding the bytes from offset `from` to the end (`end` is
    /// `master_repl_offset`), or None when `from` is not in the buffer (`end + 1`
    /// gives none).
    pub fn read_from(&self, from: u64, end: u64) -> Option<Vec<Piece>> {
        let first = self.first_byte_offset(end);
        if from < first || from > end + 1 {
            return None;
        }
        let mut skip = (from - first) as usize;
        let mut out = Vec::new();
        for b in &self.blocks {
            let len = b.len();
            if skip >= len {
                skip -= len;
                continue;
            }
            out.push(Piece {
                block: b.clone(),
                start: skip,
                end: len,
            });
            skip = 0;
        }
        Some(out)
    }

    /// A new `repl-backlog-size`; the history shrinks to it as `trim` allows.
    pub fn resize(&mut self, size: usize) {
        self.size = size.max(1);
        self.trim();
    }

    /// Frees the oldest blocks while the rest still holds more than the backlog's
    /// size and no replica refers to them (Redis's incrementalTrimReplicationBacklog).
    /// The newest block is always kept.
    pub fn trim(&mut self) {
        let mut freed = 0;
        while self.blocks.len() > 1 && freed < TRIM_BYTES_PER_PASS {
            let first = &self.blocks[0];
            let len = first.len();
            if Arc::strong_count(first) != 1 || self.histlen - len <= self.size {
                break;
            }
            self.histlen -= len;
            freed += len;
            self.blocks.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(pieces: &[Piece]) -> Vec<u8> {
        pieces.iter().flat_map(|p| p.bytes()).copied().collect()
    }

    #[test]
    fn the_buffer_keeps_at_least_its_size_and_reads_back_any_offset_it_holds() {
        let mut b = ReplBuffer::new(BLOCK_SIZE * 2);
        let mut all = Vec::new();
        let mut end = 0u64;
        for i in 0..2000u32 {
            let chunk: Vec<u8> = (0..(i % 97) * 5).map(|j| (i + j) as u8).collect();
            let pieces = b.append(&chunk);
            assert_eq!(joined(&pieces), chunk);
            drop(pieces);
            all.extend_from_slice(&chunk);
            end += chunk.len() as u64;
            b.trim();
            assert!(b.histlen() >= (b.size()).min(all.len()));
            assert!(b.histlen() <= b.size() + BLOCK_SIZE * 2);
            let first = b.first_byte_offset(end);
            for from in [first, first + 1, (first + end) / 2, end, end + 1] {
                if from < first || from > end + 1 {
                    continue;
                }
                let got = joined(&b.read_from(from, end).unwrap());
                assert_eq!(got, &all[(from - 1) as usize..]);
            }
            assert!(b.read_from(end + 2, end).is_none());
            if first > 1 {
                assert!(b.read_from(first - 1, end).is_none());
            }
        }
    }

    #[test]
    fn a_referenced_block_holds_the_history() {
        let mut b = ReplBuffer::new(1024);
        let held = b.append(&[1u8; 100]);
        for _ in 0..100 {
            drop(b.append(&[2u8; 1000]));
            b.trim();
        }
        // The held piece's block is the oldest: nothing can be trimmed.
        assert_eq!(b.histlen(), 100 + 100 * 1000);
        drop(held);
        b.trim();
        assert!(b.histlen() <= 1024 + BLOCK_SIZE);
        assert!(b.blocks.len() <= 2);
    }

    #[test]
    fn big_writes_take_blocks_of_a_sixteenth_of_the_backlog_and_pieces_join() {
        let mut b = ReplBuffer::new(1 << 20);
        let big = vec![7u8; 3 * BLOCK_SIZE];
        let pieces = b.append(&big);
        assert_eq!(pieces.len(), 1);
        assert_eq!(pieces[0].len(), big.len());
        let huge = vec![8u8; 200 << 10];
        let pieces = b.append(&huge);
        assert_eq!(pieces.len(), 4);
        assert!(pieces.iter().all(|p| p.len() <= 64 << 10));
        assert_eq!(joined(&pieces), huge);
        let mut held = Pieces::default();
        let a = b.append(b"abc");
        let c = b.append(b"def");
        held.push(a[0].clone());
        held.push(c[0].clone());
        assert_eq!(held.len(), 6);
        assert_eq!(held.clone().into_pieces().len(), 1);
        assert_eq!(held.bytes(), b"abcdef");
    }
}
