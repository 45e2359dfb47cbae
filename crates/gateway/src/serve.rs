//! What clients connect to: one client on stdin and stdout, many over Streamable HTTP; and
//! the Prometheus `/metrics` endpoint, beside either.

mod again;
mod checks;
mod connect;
mod console;
pub mod http;
pub mod listen;
pub mod metrics;
mod respond;
pub mod shared;
pub mod stdio;

use std::future::Future;
use std::sync::Arc;

use crate::gateway::Gateway;

/// Serves MCP over Streamable HTTP on `listener`, and the console and the people's sign-ins
/// to servers beside it ([`http`]'s endpoints), until `shutdown` completes; then requests
/// still running get a few seconds to finish, GET streams end, and every session is dropped.
/// The servers are the caller's to shut down.
pub async fn over_http(
    gateway: Arc<Gateway>,
    listener: tokio::net::TcpListener,
    settings: http::HttpSettings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    http::serve(gateway, listener, settings, shutdown, pages).await
}

/// The routes beside `/mcp`: the console's and the sign-ins'.
fn pages(shared: &Arc<http::Shared>) -> axum::Router {
    console::router(shared).merge(connect::router(shared))
}
