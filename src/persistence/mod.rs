//! Persistence: Redis's RDB format (`rdb.rs`, pure encoding/decoding), snapshots to
//! disk and their loading at startup (`snapshot.rs`).
//!
//! The format code knows nothing of the executor; the snapshot code walks the
//! keyspace and writes files off the executor thread.

pub mod rdb;
