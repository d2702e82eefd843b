//! Data-type internals, apart from command parsing: each module is pure and
//! unit-tested, and knows nothing of the keyspace or the protocol.

pub mod bitmap;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod intset;
pub mod list;
pub mod listpack;
pub mod scantable;
pub mod set;
pub mod stream;
pub mod strings;
pub mod zindex;
pub mod zset;
