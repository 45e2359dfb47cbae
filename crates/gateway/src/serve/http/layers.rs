//! The checks every request to `/mcp` passes before its method: one call there ([`mcp`]),
//! each a layer of its own for the console's and the sign-in pages' routes (see `router` for
//! their order). Who the caller is comes after them, in `identity`.

use std::net::IpAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{self, HeaderValue};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use super::Shared;
use crate::serve::checks;
use crate::serve::respond::{failure, set, with_status};

/// Whether a request says it has a body.
fn has_body(headers: &HeaderMap) -> bool {
    match headers.get(header::CONTENT_LENGTH) {
        Some(length) => length.as_bytes() != b"0",
        None => headers.contains_key(header::TRANSFER_ENCODING),
    }
}

/// Every check of a request to `/mcp` (or `/mcp/<toolset>`, `toolset` as its URL names it),
/// in the order the console's separate layers run them (`Connection: close` on a refusal,
/// `Host`, `Origin` and CORS, the caller's identity), then its method ([`super::mcp`]): called
/// by the connection's service itself, not through the router (see [`super::Front`]).
pub(super) async fn mcp(
    shared: Arc<Shared>,
    request: Request,
    address: IpAddr,
    toolset: Option<&str>,
) -> Response {
    let has_body = has_body(request.headers());
    closing(has_body, checked(&shared, request, address, toolset).await)
}

/// `/mcp`'s checks after the first: `Host`, `Origin` (a preflight answered here, the CORS
/// headers on whatever answer follows), the caller's identity; then its method.
async fn checked(
    shared: &Arc<Shared>,
    request: Request,
    address: IpAddr,
    toolset: Option<&str>,
) -> Response {
    if let Some(refusal) = host_refusal(shared, &request) {
        return refusal;
    }
    let origin = match allowed_origin(shared, &request) {
        Ok(origin) => origin,
        Err(refused) => return refused.response(),
    };
    let response = if request.method() == Method::OPTIONS {
        preflight()
    } else {
        match super::identity::caller_of(shared, request.headers(), address, toolset).await {
            Err(refusal) => refusal,
            Ok((auth, toolset)) => super::mcp(shared, auth, toolset, request).await,
        }
    };
    with_cors(response, origin)
}

/// A refusal is often made before the body is read (a missing token, a bad Host), and hyper
/// then closes the connection: said (`Connection: close`), so that the client does not send
/// its next request (the same one with a token) on a connection about to close.
pub(in crate::serve) async fn close_on_refusal(request: Request, next: Next) -> Response {
    let has_body = has_body(request.headers());
    closing(has_body, next.run(request).await)
}

/// `response`, saying `Connection: close` when it refuses a request that has a body.
fn closing(has_body: bool, mut response: Response) -> Response {
    if has_body && (response.status().is_client_error() || response.status().is_server_error()) {
        set(&mut response, header::CONNECTION, "close");
    }
    response
}

/// `Host` must be a loopback name or address (any port), in `http.allowed_hosts`, or the
/// address the listener is bound to: 400 without one, 403 for another (DNS rebinding).
pub(in crate::serve) async fn host(
    State(shared): State<Arc<Shared>>,
    request: Request,
    next: Next,
) -> Response {
    match host_refusal(&shared, &request) {
        Some(refusal) => refusal,
        None => next.run(request).await,
    }
}

/// The refusal of a request whose `Host` is missing or not allowed (see [`host`]).
fn host_refusal(shared: &Shared, request: &Request) -> Option<Response> {
    let host = match request.headers().get(header::HOST) {
        Some(value) => value.to_str().ok(),
        None => request.uri().authority().map(|a| a.as_str()),
    };
    let settings = shared.gateway.control.http();
    match host.and_then(|h| checks::host_allowed(h, shared.hosts(&settings))) {
        None => Some(failure(
            StatusCode::BAD_REQUEST,
            "Bad Request: missing or invalid Host header",
        )),
        Some(false) => {
            tracing::warn!(
                host = host.unwrap_or_default(),
                "HTTP request refused: Host is not allowed (possible DNS rebinding)"
            );
            Some(failure(
                StatusCode::FORBIDDEN,
                "Forbidden: Host header is not allowed",
            ))
        }
        Some(true) => None,
    }
}

/// An `Origin`, when present, must be a loopback origin or in `http.allowed_origins` (403
/// else: DNS rebinding); its answer then carries the CORS headers that let a browser read
/// it. `OPTIONS` (a CORS preflight) is answered here.
pub(in crate::serve) async fn origin(
    State(shared): State<Arc<Shared>>,
    request: Request,
    next: Next,
) -> Response {
    match allowed_origin(&shared, &request) {
        Err(refused) => refused.response(),
        Ok(origin) => {
            let response = if request.method() == Method::OPTIONS {
                preflight()
            } else {
                next.run(request).await
            };
            with_cors(response, origin)
        }
    }
}

/// The request's `Origin` when it has one that is allowed, none when it has none, refused
/// when it has another (see [`origin`]).
fn allowed_origin(
    shared: &Shared,
    request: &Request,
) -> Result<Option<HeaderValue>, OriginRefused> {
    let Some(value) = request.headers().get(header::ORIGIN) else {
        return Ok(None);
    };
    let settings = shared.gateway.control.http();
    match value.to_str() {
        Ok(origin) if checks::origin_allowed(origin, &settings.allowed_origins) => {
            Ok(Some(value.clone()))
        }
        _ => {
            tracing::warn!(
                origin = ?value,
                "HTTP request refused: Origin is not allowed (possible DNS rebinding)"
            );
            Err(OriginRefused)
        }
    }
}

/// A request whose `Origin` is not allowed.
struct OriginRefused;

impl OriginRefused {
    fn response(self) -> Response {
        failure(
            StatusCode::FORBIDDEN,
            "Forbidden: Origin header is not allowed",
        )
    }
}

/// `response` with the CORS headers that let a browser of `origin` read it.
fn with_cors(mut response: Response, origin: Option<HeaderValue>) -> Response {
    if let Some(origin) = origin {
        let h = response.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.insert(header::VARY, HeaderValue::from_static("Origin"));
        h.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("mcp-session-id, www-authenticate"),
        );
    }
    response
}

/// The answer to a CORS preflight.
fn preflight() -> Response {
    let mut response = with_status(StatusCode::NO_CONTENT, Body::empty());
    set(
        &mut response,
        header::ACCESS_CONTROL_ALLOW_METHODS,
        "GET, POST, DELETE, OPTIONS",
    );
    set(
        &mut response,
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        "authorization, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id",
    );
    set(&mut response, header::ACCESS_CONTROL_MAX_AGE, "600");
    response
}
