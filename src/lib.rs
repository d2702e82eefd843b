//! Cinnabar: a Redis-compatible data-structure server.
//!
//! Layers, each depending only on those above it in this list:
//! `util` and `protocol` (wire format), `types` (data-type internals), `keyspace`
//! (databases, key table, expiry), `commands` (the command table and families),
//! `exec` (the single-threaded executor), `net` (the event loop) and `embedded`
//! (the in-process API). `config`, `log` and `process` serve the process.

pub mod acl;
pub mod affinity;
pub mod alloc;
pub mod cluster;
pub mod commands;
pub mod config;
pub mod config_rewrite;
pub mod crash;
pub mod embedded;
pub mod exec;
pub mod keyspace;
pub mod log;
pub mod net;
pub mod persistence;
pub mod process;
pub mod protocol;
pub mod replication;
pub mod scripting;
pub mod tls;
pub mod types;
pub mod util;

/// Cinnabar's own version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
