//! Clients over MCP's Streamable HTTP transport (protocol 2025-03-26, 2025-06-18, 2025-11-25)
//! at `/mcp`, each client session a [`Session`] of its own.
//!
//! Where each rule of the transport is enforced:
//! - the checks every request to `/mcp` passes, in one call (`layers::mcp`, then
//!   `identity`): `Host` must be a loopback name or address (any port) or in
//!   `http.allowed_hosts` (or the address the listener is bound to), else 403; an `Origin`,
//!   when present, must be a loopback origin or in `http.allowed_origins`, else 403
//!   (DNS-rebinding protection); with tokens set,
//!   `Authorization: Bearer <secret>` must match one (constant-time), else 401 with
//!   `WWW-Authenticate: Bearer`. `OPTIONS` answers CORS preflights for allowed origins.
//! - `post`: `Content-Type: application/json` (415); the body's size (413, also while it
//!   streams); JSON (400 with a `-32700` error) and JSON-RPC shape (400, `-32600`); `Accept`
//!   (406 when a body with requests can be answered neither as JSON nor as SSE). `initialize`
//!   without `Mcp-Session-Id` creates a session and returns its id in that header; every other
//!   POST needs a known id (400 when missing, 404 when unknown or ended) and the token that
//!   created the session (403). A request that carries `_meta.progressToken` from a client
//!   that accepts `text/event-stream` is answered as an SSE stream: its progress, then its
//!   response; other requests are answered with `application/json` when the client accepts
//!   it, else with an SSE stream whose one event is the response. A body of notifications and
//!   responses only gets 202 with no body.
//! - `MCP-Protocol-Version` (`version_ok`): on every request of an existing session (and on
//!   `initialize`), a version moniker negotiates, or absent (meaning 2025-03-26); else 400.
//! - `get`: `Accept: text/event-stream` (406), a known session (400/404/403): the session's
//!   stream of unsolicited messages, see `outbox`: event ids, a bounded replay buffer,
//!   `Last-Event-ID` resumption, one stream per session (a new GET replaces the old stream,
//!   which ends), keep-alive comments every 15 s, messages buffered while no stream is open.
//! - `delete`: ends the session (204); its id then gets 404.
//! - Sessions (`sessions`) unused for `http.session_idle` (default 30 minutes) (no request running, no stream open)
//!   are dropped by a sweeper task; at most 10,000 live at once (503 for more), and at most
//!   `http.max_sessions_per_token` (default 1,000) of one token: at that number, the token's
//!   least recently used idle session ends to make room (503 when none is idle).
//! - Connections (`listen`): the request header within 10 s, the body within 30 s (408), at
//!   most `http.max_connections` (default 1,024) open at once.
//!
//! Where messages go: the progress of a request answered as an SSE stream goes on that stream,
//! before the response (the request's answers and its progress share one channel, in the order
//! they happened; see [`Answers`](crate::session::Answers)). Everything else a session sends on
//! its own — list changes, logging, progress of requests answered as JSON, and the servers'
//! requests to the client (sampling, elicitation, roots) — goes to the GET stream; what comes
//! while none is open waits in the replay buffer, so a client that must answer sampling keeps a
//! GET stream open (the official SDKs do). Events on POST streams carry no ids: POST streams
//! are not resumable. A POST whose client goes away before its answer is not cancelled
//! (disconnection is not cancellation, says the spec): the request finishes and its answer is
//! dropped.
//!
//! Secrets never reach the logs: tokens are named by their position (`token #1`), and
//! a token's `Debug` hides the secret.

mod answer;
mod identity;

pub(super) use self::identity::token_name;
pub(super) mod layers;
mod outbox;
mod post;
mod sessions;
mod stateless;
mod stream;

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{self, HeaderMap};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use axum::routing::get as route_get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use self::outbox::{Activity, Outbox};
use super::checks::{self, Auth};
use super::respond::{failure, set, unauthorized, with_status};
use crate::gateway::Gateway;
use crate::identity::Verifier;
use crate::session::Session;
use crate::sync::lock;

/// The MCP endpoint's path.
pub const MCP_PATH: &str = "/mcp";

/// Where the Protected Resource Metadata of `/mcp` is with `http.auth` (RFC 9728; the path of
/// the resource follows it, as the RFC inserts it).
pub const RESOURCE_METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// A health check: `200 ok`, no authentication.
pub const HEALTH_PATH: &str = "/healthz";

pub use super::metrics::METRICS_PATH;

const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// At most this many sessions at once (each keeps a replay buffer): 503 for more.
const MAX_SESSIONS: usize = 10_000;

/// At most this many sessions of one token unless `http.max_sessions_per_token` says
/// otherwise (the tokenless loopback endpoint counts as one token).
pub const DEFAULT_SESSIONS_PER_TOKEN: usize = 1_000;

/// How long a request's body may take to arrive, once its header has (408 after).
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long requests still running at shutdown may take to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A bearer token clients may present (its `toolset` limits the sessions it creates to that
/// toolset), and the HTTP settings: the config's own types.
pub use moniker_config::{HttpConfig as HttpSettings, TokenConfig as Token};

/// The largest POST body unless `http.max_body` says otherwise: 413 above it.
pub const DEFAULT_MAX_BODY: usize = 4 * 1024 * 1024;

/// How long a session may go unused unless `http.session_idle` says otherwise.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(30 * 60);

/// Whether moniker may listen on `addr` with these settings: an address other than a loopback
/// one requires at least one token, and every token must be visible ASCII (what fits in a
/// header).
pub fn check_bind(addr: SocketAddr, settings: &HttpSettings) -> Result<(), String> {
    for (i, token) in settings.tokens.iter().enumerate() {
        if token.token.is_empty() || !token.token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "token #{} is empty or has characters other than visible ASCII",
                i + 1
            ));
        }
    }
    if !addr.ip().is_loopback() && settings.tokens.is_empty() && settings.auth.is_none() {
        return Err(format!(
            "refusing to serve HTTP on {addr} without a bearer token: any host that reaches it could \
             use every server behind moniker. Listen on 127.0.0.1, or set a token in `http.tokens` \
             of the config (or in $MONIKER_TOKENS, comma-separated); then list the host names \
             clients will use in `http.allowed_hosts` (a request with another Host header gets 403)"
        ));
    }
    Ok(())
}

pub(super) struct Shared {
    pub(super) gateway: Arc<Gateway>,
    /// The address the listener is bound to, as a Host may name it (none when unspecified).
    bound: Option<String>,
    sessions: Mutex<HashMap<String, Arc<HttpSession>>>,
    /// Sessions being opened (their `initialize` not yet answered), by principal: counted
    /// with the open ones, so that requests sent at once cannot all pass the caps. Changed
    /// only with `sessions` locked.
    opening: Mutex<HashMap<String, usize>>,
    /// The bytes the replay buffers of each principal's sessions hold together.
    replay: crate::budget::Counters,
    /// The bytes each principal's POST streams hold unread, together.
    post_held: crate::budget::Counters,
    /// The access-token checker of `http.auth` (made again when a reload changes it).
    verifier: Mutex<Option<Arc<Verifier>>>,
    /// Turns true at shutdown: GET streams end.
    stop: watch::Receiver<bool>,
}

/// Who a request comes from, as the layers proved it, and the toolset its URL or its token
/// binds it to.
struct Client {
    auth: Auth,
    toolset: Option<String>,
}

/// A client session over HTTP.
struct HttpSession {
    session: Arc<Session>,
    /// The token that created it; every later request must carry the same.
    auth: Auth,
    /// Whose it is ([`principal`](identity::principal) of `auth`): what the caps on sessions
    /// count by.
    principal: String,
    /// What its principal's POST streams hold unread, together ([`Shared::post_held_of`]).
    post_held: Arc<std::sync::atomic::AtomicUsize>,
    /// The toolset it is bound to (its URL's or its token's): every later request must name
    /// the same, and a reload that binds its token otherwise ends it.
    toolset: Option<String>,
    /// The protocol version negotiated in `initialize`.
    protocol: String,
    outbox: Arc<Outbox>,
    activity: Arc<Activity>,
}

/// The endpoints beside `/mcp` (which [`Front`] answers itself): the protected resource's
/// metadata, `/healthz`, `/metrics`, and the console's pages.
fn router(shared: Arc<Shared>, pages: Pages) -> Router {
    Router::new()
        .route(
            RESOURCE_METADATA_PATH,
            route_get(identity::resource_metadata),
        )
        .route(
            "/.well-known/oauth-protected-resource/{*path}",
            route_get(identity::resource_metadata),
        )
        .route(
            HEALTH_PATH,
            route_get(|State(shared): State<Arc<Shared>>| async move { health(&shared.gateway) }),
        )
        .route(METRICS_PATH, route_get(metrics))
        .with_state(shared.clone())
        .merge(pages(&shared))
}

/// A connection's service: `/mcp` and `/mcp/<toolset>` answered here, behind their checks
/// (`layers::mcp`, which run in this order: `Connection: close` on a refusal, `Host`, `Origin`
/// and CORS, the caller's identity); every other path through the router. The MCP endpoint is
/// every call's path: a request to it pays for one boxed future, not the router's layers,
/// extensions and cloned routes.
#[derive(Clone)]
struct Front {
    shared: Arc<Shared>,
    router: Router,
    /// The address of the connection's client (a rate budget is shared by address).
    address: IpAddr,
}

impl tower_service::Service<axum::http::Request<hyper::body::Incoming>> for Front {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures_util::future::BoxFuture<'static, Result<Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<hyper::body::Incoming>) -> Self::Future {
        let request = request.map(Body::new);
        if !is_mcp(request.uri().path()) {
            return Box::pin(self.router.call(request));
        }
        let (shared, address) = (self.shared.clone(), self.address);
        Box::pin(async move {
            let toolset = mcp_toolset(request.uri().path()).map(str::to_owned);
            Ok(layers::mcp(shared, request, address, toolset.as_deref()).await)
        })
    }
}

impl Front {
    /// The service of each connection, by its client's address.
    fn of_each(shared: Arc<Shared>, router: Router) -> impl Fn(IpAddr) -> Self {
        move |address| Self {
            shared: shared.clone(),
            router: router.clone(),
            address,
        }
    }
}

/// Whether `path` is the MCP endpoint's: `/mcp`, or `/mcp/<toolset>` (one segment, not empty).
fn is_mcp(path: &str) -> bool {
    path == MCP_PATH || mcp_toolset(path).is_some()
}

/// The toolset of `/mcp/<toolset>`, as the URL names it (percent-encoded).
fn mcp_toolset(path: &str) -> Option<&str> {
    path.strip_prefix(MCP_PATH)?
        .strip_prefix('/')
        .filter(|toolset| !toolset.is_empty() && !toolset.contains('/'))
}

/// Routes served beside `/mcp` from the transport's state (the console's pages).
pub(super) type Pages = fn(&Arc<Shared>) -> Router;

/// `/metrics`: with only identity-provider users, the metrics (every tool's use) are no
/// one's: they need a token of `http.tokens`.
async fn metrics(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let settings = shared.gateway.control.http();
    if settings.tokens.is_empty() && settings.auth.is_some() {
        return unauthorized(checks::Refused::Missing);
    }
    super::metrics::respond(
        &shared.gateway,
        &headers,
        shared.hosts(&settings),
        &settings.tokens,
    )
}

/// A request to `/mcp` or `/mcp/<toolset>` (a client that sees and calls only that toolset)
/// that passed the checks, from `auth`: its toolset, then its method.
async fn mcp(
    shared: &Arc<Shared>,
    auth: Auth,
    url_toolset: Option<String>,
    request: Request,
) -> Response {
    let toolset = match identity::toolset_of(shared, &auth, url_toolset).await {
        Ok(toolset) => toolset,
        Err((status, why)) => return failure(status, why),
    };
    // A request that passed the checks: the thread stays awake for what comes next.
    crate::awake::heard();
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    match parts.method {
        Method::POST => post::post(shared, headers, body, Client { auth, toolset }).await,
        Method::GET => sessions::get(shared, headers, &Client { auth, toolset }),
        Method::DELETE => sessions::delete(shared, headers, &Client { auth, toolset }),
        _ => {
            let mut response = failure(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
            set(&mut response, header::ALLOW, "GET, POST, DELETE, OPTIONS");
            response
        }
    }
}

/// Serves MCP over Streamable HTTP on `listener` until `shutdown` completes; then requests
/// still running get a few seconds to finish, GET streams end, and every session is dropped.
/// The servers are the caller's to shut down.
pub(super) async fn serve(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    settings: HttpSettings,
    shutdown: impl Future<Output = ()> + Send + 'static,
    pages: Pages,
) -> std::io::Result<()> {
    let local = listener.local_addr()?;
    let bound = match local.ip() {
        ip if ip.is_unspecified() => None,
        IpAddr::V4(ip) => Some(ip.to_string()),
        IpAddr::V6(ip) => Some(format!("[{ip}]")),
    };
    let idle = settings.session_idle.unwrap_or(DEFAULT_SESSION_IDLE);
    let max_connections = settings
        .max_connections
        .map_or(super::listen::DEFAULT_MAX_CONNECTIONS, |n| n as usize);
    let tokens = settings.tokens.len();
    gateway.control.set_http(settings);
    let (stop_tx, stop_rx) = watch::channel(false);
    let shared = Arc::new(Shared {
        gateway,
        bound,
        sessions: Mutex::new(HashMap::new()),
        opening: Mutex::new(HashMap::new()),
        replay: Default::default(),
        post_held: Default::default(),
        verifier: Mutex::new(None),
        stop: stop_rx.clone(),
    });
    let sweeper = tokio::spawn(sessions::sweep(Arc::downgrade(&shared), idle));
    let revoker = tokio::spawn(sessions::revoke_on_reload(Arc::downgrade(&shared)));
    let front = Front::of_each(shared.clone(), router(shared.clone(), pages));
    tracing::info!(
        address = %local,
        tokens,
        "serving MCP over Streamable HTTP at http://{local}{MCP_PATH}"
    );
    let server = super::listen::serve(listener, front, max_connections, async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let mut stopped = stop_rx;
    let grace = async move {
        let _ = stopped.wait_for(|stop| *stop).await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    let result = tokio::select! {
        result = server => result,
        () = grace => {
            tracing::warn!("HTTP requests still running at shutdown were dropped");
            Ok(())
        }
    };
    sweeper.abort();
    revoker.abort();
    let sessions = std::mem::take(&mut *lock(&shared.sessions));
    for session in sessions.values() {
        session.outbox.close();
    }
    tracing::info!(sessions = sessions.len(), "HTTP transport stopped");
    result
}

impl Shared {
    /// The counter of what `principal`'s sessions' replay buffers hold, shared by them.
    fn replay_of(&self, principal: &str) -> Arc<std::sync::atomic::AtomicUsize> {
        self.replay.of(principal)
    }

    /// The counter of what `principal`'s POST streams hold unread, shared by them.
    fn post_held_of(&self, principal: &str) -> Arc<std::sync::atomic::AtomicUsize> {
        self.post_held.of(principal)
    }

    /// The checker of `settings`: the one in use when they are the same, else a new one
    /// (a reload changed them; its keys are fetched anew).
    pub(super) fn verifier(&self, settings: &moniker_config::ResourceAuth) -> Arc<Verifier> {
        let mut held = lock(&self.verifier);
        if let Some(verifier) = held.as_ref().filter(|v| v.settings == *settings) {
            return verifier.clone();
        }
        let verifier = Verifier::new(settings.clone());
        *held = Some(verifier.clone());
        verifier
    }

    /// `allowed_hosts`, plus the address the listener is bound to (read where they are, each
    /// request: nothing is copied).
    fn hosts<'a>(&'a self, settings: &'a HttpSettings) -> impl Iterator<Item = &'a String> + 'a {
        settings.allowed_hosts.iter().chain(&self.bound)
    }
}

/// `/healthz` (no token): `ok`; where the last config reload failed, if it was refused (the
/// previous config still serves: file:line:column and the code, never the file's text); and
/// the servers whose new listing was refused (a name taken twice), by the codes of why.
fn health(gateway: &Gateway) -> String {
    let mut out = String::from("ok");
    if let Some(error) = gateway.control.config_error() {
        out.push_str("\nconfig reload refused (the previous config still serves):\n");
        out.push_str(&error);
    }
    for (server, why) in gateway.naming.refused_listings() {
        let codes: std::collections::BTreeSet<&str> = why.iter().map(|d| d.code).collect();
        let codes: Vec<&str> = codes.into_iter().collect();
        out.push_str(&format!(
            "\nserver `{server}`: its new listing is refused ({}; the log says which names and how to fix it)",
            codes.join(", ")
        ));
    }
    for (server, why) in gateway.naming.contested_names() {
        let names = why.len();
        out.push_str(&format!(
            "\nserver `{server}`: {names} name{} it claims with another {} served by none of them until the config decides (naming::duplicate; the log says which and how to fix it)",
            if names == 1 { "" } else { "s" },
            if names == 1 { "is" } else { "are" },
        ));
    }
    for (server, status) in gateway.servers.server_status() {
        if let Some(refused) = status.sandbox_refused {
            out.push_str(&format!("\nserver `{server}`: {refused}"));
        }
    }
    let (drift, integrity) = gateway.naming.drift().unwrap_or_default();
    for d in &drift {
        let what = match integrity {
            moniker_surface::lock::Integrity::Warn => "served (integrity: warn)",
            moniker_surface::lock::Integrity::Block => "withheld (integrity: block)",
        };
        out.push_str(&format!("\n{d}; {what}"));
    }
    if out.len() > 2 {
        out.push('\n');
    }
    out
}

/// The start of a session id, enough to follow it in logs.
fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

fn accepted() -> Response {
    with_status(StatusCode::ACCEPTED, Body::empty())
}

fn header_str(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A request refused before it reached a session.
struct Reject(StatusCode, String);

impl Reject {
    fn new(status: StatusCode, message: &str) -> Self {
        Self(status, message.to_owned())
    }

    fn response(&self) -> Response {
        failure(self.0, &self.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paths the endpoint answers itself are those the router's `/mcp` and
    /// `/mcp/{toolset}` matched: one segment, not empty; any other goes to the router (404).
    #[test]
    fn the_endpoint_s_paths_are_the_router_s() {
        assert!(is_mcp("/mcp") && mcp_toolset("/mcp").is_none());
        assert_eq!(mcp_toolset("/mcp/work%20tools"), Some("work%20tools"));
        for other in [
            "/mcp/", "/mcp/a/b", "/mcp/a/", "/mcpx", "/mcp//", "/", "/MCP",
        ] {
            assert!(!is_mcp(other), "{other}");
        }
    }
}
