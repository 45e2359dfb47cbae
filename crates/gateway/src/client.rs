//! Client transports.

pub mod stdio;
