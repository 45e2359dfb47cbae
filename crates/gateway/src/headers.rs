//! The MCP transport's HTTP header names, for both directions (what clients send moniker, and
//! what moniker sends remote servers).

use axum::http::HeaderName;

pub const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
pub const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
pub const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
pub const EVENT_STREAM: &str = "text/event-stream";
pub const JSON: &str = "application/json";
