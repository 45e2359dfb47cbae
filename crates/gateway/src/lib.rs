//! moniker's async shell: JSON-RPC framing, server connections, client sessions and routing
//! around the pure naming core (`moniker-surface`). It forwards what it does not own
//! byte-faithfully: results, errors and notifications keep the bytes their server wrote.

pub mod client;
pub mod framing;
pub mod gateway;
pub mod guard;
pub mod jsonrpc;
pub mod metrics;
pub mod server;
pub mod session;
pub mod store;
pub mod toolsets;

pub use gateway::{Gateway, ServerEntry, Settings, StartError, View};
