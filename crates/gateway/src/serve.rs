//! What clients connect to: one client on stdin and stdout, many over Streamable HTTP; and
//! the Prometheus `/metrics` endpoint, beside either.

mod checks;
pub mod http;
pub mod listen;
pub mod metrics;
mod respond;
pub mod shared;
pub mod stdio;
