//! Data-type internals, apart from command parsing: each module is pure and
//! unit-tested, and knows nothing of the keyspace or the protocol.

pub mod bitmap;
pub mod hll;
pub mod strings;
