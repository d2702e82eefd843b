//! Replays the committed fuzz seeds (`fuzz/corpus/TARGET/`) and every input a fuzzer
//! found crashing (`fuzz/regressions/TARGET/`) through the fuzz targets' own entry
//! points, so that `cargo test` keeps them passing without a fuzzing toolchain.

#[path = "../fuzz/src/lib.rs"]
mod harness;

use std::path::Path;

/// Feeds each file under `fuzz/<dir>/<target>` to `run`; returns how many ran.
fn replay(dir: &str, target: &str, run: fn(&[u8])) -> usize {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join(dir)
        .join(target);
    let Ok(entries) = std::fs::read_dir(&path) else {
        return 0;
    };
    let mut files: Vec<_> = entries.map(|e| e.expect("corpus entry").path()).collect();
    files.sort();
    for f in &files {
        let data = std::fs::read(f).expect("corpus file");
        let name = f.display().to_string();
        let r = std::panic::catch_unwind(|| run(&data));
        assert!(r.is_ok(), "{name} panics");
    }
    files.len()
}

fn replay_all(target: &str, run: fn(&[u8])) {
    let seeds = replay("corpus", target, run);
    assert!(seeds > 0, "no seeds for {target}");
    replay("regressions", target, run);
}

#[test]
fn resp_request_corpus() {
    replay_all("resp_request", harness::resp_request);
}

#[test]
fn rdb_file_corpus() {
    replay_all("rdb_file", harness::rdb_file);
}

#[test]
fn restore_dump_corpus() {
    replay_all("restore_dump", harness::restore_dump);
}

#[test]
fn restore_value_corpus() {
    replay_all("restore_value", harness::restore_value);
}

#[test]
fn aof_file_corpus() {
    replay_all("aof_file", harness::aof_file);
}

#[test]
fn aof_manifest_corpus() {
    replay_all("aof_manifest", harness::aof_manifest);
}

#[test]
fn lua_libs_corpus() {
    replay_all("lua_libs", harness::lua_libs);
}

#[test]
fn cluster_message_corpus() {
    replay_all("cluster_message", harness::cluster_message);
}

/// A target's corpus directory and its entry point.
type Target = (&'static str, fn(&[u8]));

/// Each seed under every flag byte, so that the options the fuzzers mutate (checksum,
/// sanitization, thresholds, piece sizes) all run on real data too.
#[test]
fn seeds_under_every_flag() {
    let targets: [Target; 5] = [
        ("resp_request", harness::resp_request),
        ("rdb_file", harness::rdb_file),
        ("restore_dump", harness::restore_dump),
        ("restore_value", harness::restore_value),
        ("cluster_message", harness::cluster_message),
    ];
    for (target, run) in targets {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/corpus")
            .join(target);
        for e in std::fs::read_dir(dir).expect("corpus dir") {
            let mut data = std::fs::read(e.expect("entry").path()).expect("seed");
            for flags in 0..8u8 {
                data[0] = flags;
                run(&data);
            }
        }
    }
}
