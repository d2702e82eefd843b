//! CPU affinity of the server's threads, from Redis's cpulist directives:
//! `server-cpulist` (the event loop and the I/O threads), `bio-cpulist` (the
//! background threads: lazy freeing and AOF fsync), `bgsave-cpulist` (the thread that
//! writes a BGSAVE's or a full resynchronization's image) and `aof-rewrite-cpulist`
//! (the one that writes an AOF rewrite's base).
//!
//! As in Redis, a thread without a list of its own keeps what it inherits: the
//! snapshot writer is started by the event loop and so runs on `server-cpulist`
//! unless its own list is set, as Redis's fork children do. Background threads are
//! the exception: Redis starts them before it pins the main thread, so they keep the
//! process's original CPUs; here some are started later, so they are put back there
//! explicitly.
//!
//! The lists are read once at startup (the directives are immutable) and kept in a
//! process-wide cell, since the threads that use them are started from places that
//! hold no configuration (the key space's lazy-free thread, an fsync).

use std::sync::OnceLock;

/// Which list a thread follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadRole {
    Server,
    Bio,
    AofRewrite,
    Bgsave,
}

/// The highest CPU number a list may name plus one (glibc's `CPU_SETSIZE`).
const MAX_CPUS: usize = 1024;

#[derive(Default)]
struct Lists {
    /// The process's CPUs before any pinning, for background threads to go back to.
    original: Option<Vec<usize>>,
    server: Option<Vec<usize>>,
    bio: Option<Vec<usize>>,
    aof_rewrite: Option<Vec<usize>>,
    bgsave: Option<Vec<usize>>,
}

static LISTS: OnceLock<Lists> = OnceLock::new();

/// Reads a cpulist as Redis does: comma-separated items, each a CPU number, a range
/// `A-B`, or a range with a stride `A-B:S`. `None` for anything else (an empty list,
/// a descending range, a zero stride, stray characters), which leaves the thread's
/// affinity alone, as in Redis. CPUs beyond `CPU_SETSIZE` are dropped.
pub fn parse(list: &str) -> Option<Vec<usize>> {
    fn number(s: &str) -> Option<usize> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        // Saturates: a huge number is still a number, just not a CPU there is.
        Some(s.parse::<usize>().unwrap_or(usize::MAX))
    }
    let mut cpus = Vec::new();
    for item in list.split(',') {
        let (range, stride) = match item.split_once(':') {
            Some((r, s)) => (r, number(s)?),
            None => (item, 1),
        };
        let (first, last) = match range.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            // A stride needs a range, as in Redis.
            None if stride != 1 || item.contains(':') => return None,
            None => (number(range)?, number(range)?),
        };
        if first > last || stride == 0 {
            return None;
        }
        let mut cpu = first;
        while cpu <= last.min(MAX_CPUS - 1) {
            cpus.push(cpu);
            cpu = cpu.saturating_add(stride);
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// Takes the lists from the configuration; the first call wins. An unparsable list
/// is logged and ignored.
pub fn configure(server: &str, bio: &str, aof_rewrite: &str, bgsave: &str) {
    let read = |name: &str, list: &str| {
        if list.is_empty() {
            return None;
        }
        let parsed = parse(list);
        if parsed.is_none() {
            crate::log::warning(&format!("Invalid {name} '{list}': CPU affinity left as is"));
        }
        parsed
    };
    let _ = LISTS.set(Lists {
        original: current(),
        server: read("server-cpulist", server),
        bio: read("bio-cpulist", bio),
        aof_rewrite: read("aof-rewrite-cpulist", aof_rewrite),
        bgsave: read("bgsave-cpulist", bgsave),
    });
}

/// Pins the calling thread to its role's CPUs (see the module comment for roles
/// without a list). Failures (no such CPU online) are logged once per call and leave
/// the thread as it was.
pub fn pin_current(role: ThreadRole) {
    let Some(lists) = LISTS.get() else {
        return;
    };
    let target = match role {
        ThreadRole::Server => lists.server.as_ref(),
        ThreadRole::AofRewrite => lists.aof_rewrite.as_ref(),
        ThreadRole::Bgsave => lists.bgsave.as_ref(),
        ThreadRole::Bio => lists
            .bio
            .as_ref()
            .or(lists.server.as_ref().and(lists.original.as_ref())),
    };
    if let Some(cpus) = target {
        if let Err(e) = set_current(cpus) {
            crate::log::warning(&format!(
                "Can't set the CPU affinity of a {role:?} thread: {e}"
            ));
        }
    }
}

/// The calling thread's CPUs.
pub fn current() -> Option<Vec<usize>> {
    // SAFETY: `set` is a plain bit set that sched_getaffinity fills; its size is
    // passed with it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        Some(
            (0..MAX_CPUS)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect(),
        )
    }
}

fn set_current(cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: as in `current`; every CPU number is below MAX_CPUS (`parse`), which is
    // the set's capacity, so CPU_SET stays inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus.iter().filter(|&&c| c < MAX_CPUS) {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_read_as_redis_reads_them() {
        assert_eq!(parse("0"), Some(vec![0]));
        assert_eq!(parse("3,1,1"), Some(vec![1, 3]));
        assert_eq!(parse("0-3"), Some(vec![0, 1, 2, 3]));
        assert_eq!(parse("0-7:2"), Some(vec![0, 2, 4, 6]));
        assert_eq!(parse("1,8-12:3,5"), Some(vec![1, 5, 8, 11]));
        assert_eq!(parse("2-2"), Some(vec![2]));
        // Beyond CPU_SETSIZE: kept as a list, without those CPUs.
        assert_eq!(parse("1023-5000"), Some(vec![1023]));
        assert_eq!(parse("99999999999999999999999"), Some(vec![]));
        for bad in [
            "", "a", "-1", "1-", "3-1", "0-4:0", "0-4:", "1:2", "1,,2", "1 ", " 1", "0-3x",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_thread_is_pinned_and_reads_its_cpus_back() {
        // On a scratch thread, so the test runner's threads keep theirs.
        std::thread::spawn(|| {
            let all = current().expect("sched_getaffinity");
            let one = vec![all[0]];
            set_current(&one).expect("sched_setaffinity");
            assert_eq!(current(), Some(one.clone()));
            // A CPU that is not there: refused, and nothing changes.
            if !all.contains(&(MAX_CPUS - 1)) {
                assert!(set_current(&[MAX_CPUS - 1]).is_err());
                assert_eq!(current(), Some(one));
            }
        })
        .join()
        .unwrap();
    }
}
