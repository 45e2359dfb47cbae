//! Client transports.

pub mod http;
pub mod stdio;
