//! The global allocator: mimalloc, wrapped to count live heap bytes so INFO can report
//! `used_memory` the way Redis does (bytes handed out by the allocator).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};

use mimalloc::MiMalloc;

pub struct CountingAlloc;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to mimalloc with the caller's arguments unchanged; the
// counters are side bookkeeping and never affect the returned memory.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        let p = unsafe { MiMalloc.alloc(layout) };
        if !p.is_null() {
            ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        let p = unsafe { MiMalloc.alloc_zeroed(layout) };
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
        // SAFETY: forwarded contract.
        let p = unsafe { MiMalloc.realloc(ptr, layout, new_size) };
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

/// Resident set size of the process, from /proc.
pub fn rss() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<usize>().ok())
        })
        .map(|pages| pages * 4096)
        .unwrap_or(0)
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
}
