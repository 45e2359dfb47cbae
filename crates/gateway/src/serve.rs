//! What clients connect to: one client on stdin and stdout, many over Streamable HTTP; and
//! the Prometheus `/metrics` endpoint, beside either.

pub mod http;
pub mod metrics;
pub mod stdio;
