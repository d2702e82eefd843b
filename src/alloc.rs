//! The global allocator: mimalloc, wrapped to count live heap bytes so INFO can report
//! `used_memory` the way Redis does (bytes handed out by the allocator).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};

use mimalloc::MiMalloc;

pub struct CountingAlloc;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static STARTUP: AtomicUsize = AtomicUsize::new(0);

// mimalloc's own API (the static library linked by `libmimalloc-sys`, whose Rust
// bindings for these need its `extended` feature and another crate).
extern "C" {
    fn mi_malloc(size: usize) -> *mut u8;
    fn mi_zalloc(size: usize) -> *mut u8;
    fn mi_realloc(p: *mut u8, new_size: usize) -> *mut u8;
    fn mi_collect(force: bool);
    fn mi_process_info(
        elapsed_msecs: *mut usize,
        user_msecs: *mut usize,
        system_msecs: *mut usize,
        current_rss: *mut usize,
        peak_rss: *mut usize,
        current_commit: *mut usize,
        peak_commit: *mut usize,
        page_faults: *mut usize,
    );
}

/// The alignment every mimalloc block has. `.cargo/config.toml` builds mimalloc with
/// `MI_MAX_ALIGN_SIZE=8`, so its small size classes step by 8 bytes (40, 48, 56…)
/// instead of the 16 that C's `max_align_t` would impose above 32 bytes: a 36-byte
/// key entry costs 40 bytes, not 48. Rust asks for the alignment it needs in every
/// layout, so requests for more than this go through mimalloc's aligned calls.
const MALLOC_ALIGN: usize = 8;

// SAFETY: every method hands the caller's size and alignment to mimalloc: layouts whose
// alignment every block already has go to the plain calls (which, unlike the aligned
// ones, never round a block up to make room for realignment), the rest to the aligned
// calls. Blocks from either are freed by `mi_free`. The counters are side bookkeeping
// and never affect the returned memory.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = if layout.align() <= MALLOC_ALIGN {
            // SAFETY: any size is valid for mi_malloc; its blocks are 8-aligned.
            unsafe { mi_malloc(layout.size()) }
        } else {
            // SAFETY: forwarded contract.
            unsafe { MiMalloc.alloc(layout) }
        };
        if !p.is_null() {
            ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = if layout.align() <= MALLOC_ALIGN {
            // SAFETY: as in `alloc`.
            unsafe { mi_zalloc(layout.size()) }
        } else {
            // SAFETY: forwarded contract.
            unsafe { MiMalloc.alloc_zeroed(layout) }
        };
        if !p.is_null() {
            ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded contract.
        unsafe { MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = if layout.align() <= MALLOC_ALIGN {
            // SAFETY: `ptr` came from this allocator with this alignment; mi_realloc
            // keeps the block 8-aligned.
            unsafe { mi_realloc(ptr, new_size) }
        } else {
            // SAFETY: forwarded contract.
            unsafe { MiMalloc.realloc(ptr, layout, new_size) }
        };
        if !p.is_null() {
            ALLOCATED.fetch_add(new_size, Ordering::Relaxed);
            ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

/// Bytes currently allocated through the global allocator.
pub fn used_memory() -> usize {
    let used = ALLOCATED.load(Ordering::Relaxed);
    if used > PEAK.load(Ordering::Relaxed) {
        PEAK.store(used, Ordering::Relaxed);
    }
    used
}

/// The highest `used_memory` observed.
pub fn peak_memory() -> usize {
    used_memory();
    PEAK.load(Ordering::Relaxed)
}

/// Records `used_memory` once the server is initialised, before any data is loaded
/// or any client connects (INFO `used_memory_startup`).
pub fn mark_startup() {
    STARTUP.store(used_memory(), Ordering::Relaxed);
}

/// `used_memory` at `mark_startup`.
pub fn startup_memory() -> usize {
    STARTUP.load(Ordering::Relaxed)
}

/// Bytes mimalloc has committed from the OS (its pages and segments: what it holds,
/// allocated or free), the `allocator_active`/`allocator_resident` of INFO.
pub fn allocator_committed() -> usize {
    let mut commit = 0usize;
    // SAFETY: mi_process_info accepts null for every output it should not fill and
    // writes a size_t through the one valid pointer we pass.
    unsafe {
        mi_process_info(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut commit,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
    }
    commit
}

/// MEMORY PURGE: mimalloc returns the free memory it can to the OS.
pub fn purge() {
    // SAFETY: mi_collect takes no pointers; `force` collects every thread-free list
    // and abandoned segment reachable from this thread, which is always allowed.
    unsafe { mi_collect(true) }
}

/// Resident set size of the process, from /proc.
pub fn rss() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<usize>().ok())
        })
        .map(|pages| pages * page_size())
        .unwrap_or(0)
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// Total memory of the machine, from /proc.
pub fn total_system_memory() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| {
                    l.split_whitespace()
                        .nth(1)
                        .and_then(|v| v.parse::<usize>().ok())
                })
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// Redis's human-readable byte counts (`1.50M`).
pub fn human_bytes(n: usize) -> String {
    let n = n as f64;
    const UNITS: [(f64, &str); 5] = [
        (1024f64 * 1024.0 * 1024.0 * 1024.0 * 1024.0, "P"),
        (1024f64 * 1024.0 * 1024.0 * 1024.0, "T"),
        (1024f64 * 1024.0 * 1024.0, "G"),
        (1024f64 * 1024.0, "M"),
        (1024f64, "K"),
    ];
    for (size, unit) in UNITS {
        if n >= size {
            return format!("{:.2}{unit}", n / size);
        }
    }
    format!("{}B", n as u64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn human_units() {
        assert_eq!(super::human_bytes(100), "100B");
        assert_eq!(super::human_bytes(1536), "1.50K");
        assert_eq!(super::human_bytes(3 << 20), "3.00M");
    }

    /// The global allocator's two paths: 8-aligned layouts get blocks from size
    /// classes 8 bytes apart (the build's `MI_MAX_ALIGN_SIZE=8`: a 36-byte entry takes
    /// 40, not 48), more-aligned layouts are aligned, zeroed blocks are zero, and
    /// realloc keeps the contents on either path.
    #[test]
    fn small_blocks_step_by_eight_and_alignment_holds() {
        use super::CountingAlloc;
        use std::alloc::{GlobalAlloc, Layout};
        extern "C" {
            fn mi_usable_size(p: *const u8) -> usize;
        }
        // SAFETY: every block is non-zero in size, written within its size, and freed
        // once with the layout it was allocated (or reallocated) with.
        unsafe {
            for (size, class) in [(36, 40), (40, 40), (44, 48), (52, 56), (20, 24)] {
                let layout = Layout::from_size_align(size, 8).unwrap();
                let p = CountingAlloc.alloc(layout);
                assert!(!p.is_null() && (p as usize).is_multiple_of(8));
                assert_eq!(mi_usable_size(p), class, "a {size}-byte block");
                p.write_bytes(1, size);
                CountingAlloc.dealloc(p, layout);
            }
            for align in [16, 32, 64, 4096] {
                let layout = Layout::from_size_align(48, align).unwrap();
                let p = CountingAlloc.alloc(layout);
                assert!((p as usize).is_multiple_of(align));
                p.write_bytes(2, 48);
                let q = CountingAlloc.realloc(p, layout, 5000);
                assert!((q as usize).is_multiple_of(align));
                assert_eq!(*q.add(47), 2);
                CountingAlloc.dealloc(q, Layout::from_size_align(5000, align).unwrap());
            }
            let layout = Layout::from_size_align(100, 8).unwrap();
            let z = CountingAlloc.alloc_zeroed(layout);
            assert!((0..100).all(|i| *z.add(i) == 0));
            z.write_bytes(3, 100);
            let r = CountingAlloc.realloc(z, layout, 10);
            assert!((0..10).all(|i| *r.add(i) == 3));
            CountingAlloc.dealloc(r, Layout::from_size_align(10, 8).unwrap());
        }
    }

    /// The mimalloc calls: committed memory covers a live allocation, purging is safe
    /// while allocations are live, and RSS is read.
    #[test]
    fn allocator_queries() {
        use std::alloc::{GlobalAlloc, Layout};
        // Unit tests run on the system allocator: allocate from mimalloc directly.
        let layout = Layout::from_size_align(4 << 20, 8).unwrap();
        // SAFETY: a non-zero-size layout; the block is written within its size and
        // freed once with the same layout.
        unsafe {
            let p = mimalloc::MiMalloc.alloc(layout);
            assert!(!p.is_null());
            p.write_bytes(7, layout.size());
            assert!(super::allocator_committed() >= layout.size());
            super::purge();
            assert_eq!(*p.add(layout.size() - 1), 7);
            mimalloc::MiMalloc.dealloc(p, layout);
        }
        assert!(super::rss() > 0);
    }
}
