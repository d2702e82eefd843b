//! Layer 1: the RESP2/RESP3 wire protocol — request parsing and reply encoding.

pub mod parser;
pub mod picks;
pub mod reply;

pub use parser::{Limits, ProtocolError, Request, RequestParser};
pub use picks::PickStream;
pub use reply::Reply;
