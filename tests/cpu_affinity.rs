//! The cpulist directives: each thread of the server runs on the CPUs its list names
//! (`server-cpulist`, `bio-cpulist`, `bgsave-cpulist`, `aof-rewrite-cpulist`), as the
//! kernel reports them in /proc.

mod common;

use common::{temp_dir, wait_until, TestServer};

/// Reads the kernel's list format ("0-2,5") into CPU numbers.
fn cpus_of(list: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for item in list.trim().split(',').filter(|s| !s.is_empty()) {
        match item.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<usize>().unwrap()..=b.parse().unwrap()),
            None => out.push(item.parse().unwrap()),
        }
    }
    out
}

/// `Cpus_allowed_list` of /proc/<pid>/task/<tid>/status (or of the process).
fn allowed(status_path: &str) -> Option<Vec<usize>> {
    let status = std::fs::read_to_string(status_path).ok()?;
    let line = status
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list:"))?;
    Some(cpus_of(line.split_once(':')?.1))
}

/// Each of the server's threads named `comm` (the kernel's 15-character name) with
/// its CPUs.
fn threads_named(pid: u32, comm: &str) -> Vec<Vec<usize>> {
    let mut found = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = task.unwrap().path();
        let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if name.trim_end() == comm {
            if let Some(cpus) = allowed(&path.join("status").display().to_string()) {
                found.push(cpus);
            }
        }
    }
    found
}

/// Waits until the server has exactly one thread named `comm` and it runs on `cpus`. A
/// thread pins itself as it starts, so it may briefly show the CPUs it inherited.
fn wait_for_thread(pid: u32, comm: &str, cpus: &[usize]) {
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        seen = threads_named(pid, comm);
        if seen == [cpus.to_vec()] {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("{comm}: {seen:?}, expected [{cpus:?}]");
}

/// Two CPUs this test may use: the first and the last it is allowed (the same one on
/// a single-CPU machine).
fn two_cpus() -> (usize, usize) {
    let mine = allowed("/proc/self/status").unwrap();
    (mine[0], *mine.last().unwrap())
}

#[test]
fn each_thread_runs_on_its_list() {
    let (a, b) = two_cpus();
    let (sa, sb) = (a.to_string(), b.to_string());
    let both = format!("{a},{b}");
    let s = TestServer::start_with(&[
        "--server-cpulist",
        &sa,
        "--bio-cpulist",
        &sb,
        "--bgsave-cpulist",
        &sb,
        "--aof-rewrite-cpulist",
        &both,
        "--io-threads",
        "2",
        "--appendonly",
        "yes",
        "--save",
        "",
    ]);
    let pid = s.pid();
    let main = allowed(&format!("/proc/{pid}/task/{pid}/status")).unwrap();
    assert_eq!(main, vec![a]);
    wait_for_thread(pid, "io_thd_1", &[a]);
    wait_for_thread(pid, "lazyfree", &[b]);
    let mut c = s.raw(2);
    assert_eq!(
        c.cmd(&["DEBUG", "POPULATE", "50"]),
        "+OK\r\n",
        "keys for the snapshots to walk"
    );
    // A slow snapshot, so that its writer thread can be looked at.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "200000"]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd(&["BGSAVE"]), "+Background saving started\r\n");
    wait_for_thread(pid, "cinnabar-snapsh", &[b]);
    // Cancelled; the AOF rewrite's writer follows its own list.
    assert_eq!(c.cmd(&["FLUSHALL"]), "+OK\r\n");
    wait_until(|| threads_named(pid, "cinnabar-snapsh").is_empty());
    assert_eq!(c.cmd(&["DEBUG", "POPULATE", "50"]), "+OK\r\n");
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]),
        "+Background append only file rewriting started\r\n"
    );
    let mut expected = vec![a, b];
    expected.dedup();
    wait_for_thread(pid, "cinnabar-snapsh", &expected);
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "bgsave-cpulist"]),
        format!("*2\r\n$14\r\nbgsave-cpulist\r\n${}\r\n{sb}\r\n", sb.len())
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "bgsave-cpulist", "0"]),
        "-ERR CONFIG SET failed (possibly related to argument 'bgsave-cpulist') - can't set immutable config\r\n"
    );
}

#[test]
fn threads_without_a_list_inherit_and_background_threads_keep_the_process_cpus() {
    let (a, _) = two_cpus();
    let mine = allowed("/proc/self/status").unwrap();
    let sa = a.to_string();
    let s = TestServer::start_with(&["--server-cpulist", &sa, "--save", ""]);
    let pid = s.pid();
    assert_eq!(
        allowed(&format!("/proc/{pid}/task/{pid}/status")).unwrap(),
        vec![a]
    );
    // Started before the event loop was pinned, and put back if it were not.
    wait_for_thread(pid, "lazyfree", &mine);
    // The snapshot writer, started by the event loop, runs where it runs.
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["DEBUG", "POPULATE", "50"]), "+OK\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "200000"]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd(&["BGSAVE"]), "+Background saving started\r\n");
    wait_for_thread(pid, "cinnabar-snapsh", &[a]);
}

#[test]
fn a_list_that_does_not_parse_is_logged_and_changes_nothing() {
    let dir = temp_dir("cpulist-bad");
    let log = dir.join("server.log");
    let mine = allowed("/proc/self/status").unwrap();
    let s = TestServer::start_in(
        &dir,
        &[
            "--server-cpulist",
            "3-1",
            "--logfile",
            log.to_str().unwrap(),
        ],
    );
    let pid = s.pid();
    assert_eq!(
        allowed(&format!("/proc/{pid}/task/{pid}/status")).unwrap(),
        mine
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("Invalid server-cpulist '3-1': CPU affinity left as is"),
        "{text}"
    );
    assert_eq!(s.raw(2).cmd(&["PING"]), "+PONG\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
