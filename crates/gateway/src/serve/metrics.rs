//! `GET /metrics`: the gateway's metrics in the Prometheus text format, on the HTTP listener
//! beside `/mcp` (its Host and token rules apply) or on a listener of its own beside stdio
//! (loopback Host names only).

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::StatusCode;
use axum::http::header::{self, HeaderMap};
use axum::response::Response;
use axum::routing::get;
use tokio::net::TcpListener;

use moniker_config::TokenConfig as Token;

use super::checks::{Auth, authenticate, host_allowed};
use super::respond::{failure, set, unauthorized, with_status};
use crate::gateway::Gateway;

/// Prometheus metrics: the Host and token rules of the MCP endpoint apply, and a token bound
/// to a toolset is refused (403).
pub const METRICS_PATH: &str = "/metrics";

/// The metrics, for a request whose `Host` is allowed and that carries one of `tokens` (when
/// there are any).
pub(crate) fn respond<'a>(
    gateway: &Gateway,
    headers: &HeaderMap,
    hosts: impl IntoIterator<Item = &'a String>,
    tokens: &[Token],
) -> Response {
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    if host.and_then(|h| host_allowed(h, hosts)) != Some(true) {
        return failure(
            StatusCode::FORBIDDEN,
            "Forbidden: Host header is not allowed",
        );
    }
    let authorization = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
    match authenticate(authorization, tokens) {
        Err(why) => return unauthorized(why),
        // The metrics count the use of every tool: a token that sees one toolset sees no more
        // of the surface through them.
        Ok(Auth::Token { token, .. }) if token.toolset.is_some() => {
            return failure(
                StatusCode::FORBIDDEN,
                "Forbidden: the metrics need a token that is not bound to a toolset",
            );
        }
        Ok(_) => {}
    }
    let mut response = with_status(
        StatusCode::OK,
        Body::from(gateway.services.metrics.render()),
    );
    set(
        &mut response,
        header::CONTENT_TYPE,
        "text/plain; version=0.0.4; charset=utf-8",
    );
    response
}

/// Serves only `GET /metrics` (for `moniker serve --metrics ADDR` beside stdio), loopback
/// Host names only, until `shutdown` completes.
pub async fn serve_metrics(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let local = listener.local_addr()?;
    let app = Router::new().route(
        METRICS_PATH,
        get(move |headers: HeaderMap| {
            let gateway = gateway.clone();
            async move { respond(&gateway, &headers, &[], &[]) }
        }),
    );
    tracing::info!(address = %local, "serving metrics at http://{local}{METRICS_PATH}");
    super::listen::serve(
        listener,
        move |_| app.clone(),
        super::listen::DEFAULT_MAX_CONNECTIONS,
        shutdown,
    )
    .await
}
