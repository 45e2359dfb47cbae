//! Clients over MCP's Streamable HTTP transport (protocol 2025-03-26, 2025-06-18, 2025-11-25)
//! at `/mcp`, each client session a [`Session`] of its own.
//!
//! Where each rule of the transport is enforced:
//! - `mcp`, every request to `/mcp`: `Host` must be a loopback name or address (any port) or
//!   in `http.allowed_hosts` (or the address the listener is bound to), else 403;
//!   an `Origin`, when present, must be a loopback origin or in
//!   `http.allowed_origins`, else 403 (DNS-rebinding protection); with tokens set,
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
//! - Sessions unused for `http.session_idle` (default 30 minutes) (no request running, no stream open)
//!   are dropped by a sweeper task; at most 10,000 live at once (503 for more), and at most
//!   `http.max_sessions_per_token` (default 1,000) of one token: at that number, the token's
//!   least recently used idle session ends to make room (503 when none is idle).
//! - Connections (`listen`): the request header within 10 s, the body within 30 s (408), at
//!   most `http.max_connections` (default 1,024) open at once.
//!
//! Where messages go: the progress of a request answered as an SSE stream goes on that stream,
//! before the response (the request's answers and its progress share one channel, in the
//! order they happened; see [`Answers`]). Everything else a session sends on its own —
//! list changes, logging, progress of requests answered as JSON, and the servers' requests to
//! the client (sampling, elicitation, roots) — goes to the GET stream; what comes while none is
//! open waits in the replay buffer, so a client that must answer sampling keeps a GET stream
//! open (the official SDKs do). Events on POST streams carry no ids: POST streams are not
//! resumable. A POST whose client goes away before its answer is not cancelled (disconnection
//! is not cancellation, says the spec): the request finishes and its answer is dropped.
//!
//! Secrets never reach the logs: tokens are named by their position (`token #1`), and
//! a token's `Debug` hides the secret.

mod outbox;

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use axum::routing::{any, get as route_get};
use futures_util::{Stream, StreamExt};
use reqwest::Url;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use self::outbox::{Activity, Busy, KEEP_ALIVE_COMMENT, Outbox};
use super::checks::{self, Accept, Auth};
use super::respond::{challenged, failure, json, set, unauthorized, with_status};
use crate::auth::resource::{Caller, Denied, Verifier};
use crate::gateway::Gateway;
use crate::headers::{LAST_EVENT_ID, PROTOCOL_VERSION, SESSION_ID};
use crate::message::{self, Incoming, Message};
use crate::modern;
use crate::session::{Answers, Session};
use crate::sync::lock;
use crate::telemetry::TraceContext;

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

struct Shared {
    gateway: Arc<Gateway>,
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

/// A client session over HTTP.
struct HttpSession {
    session: Arc<Session>,
    /// The token that created it; every later request must carry the same.
    auth: Auth,
    /// Whose it is ([`principal`] of `auth`): what the caps on sessions count by.
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

/// The endpoints: `/mcp` (and `/mcp/{toolset}`), the protected resource's metadata,
/// `/healthz` and `/metrics`.
fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route(MCP_PATH, any(mcp))
        .route("/mcp/{toolset}", any(mcp_in_toolset))
        .route(RESOURCE_METADATA_PATH, route_get(resource_metadata))
        .route(
            "/.well-known/oauth-protected-resource/{*path}",
            route_get(resource_metadata),
        )
        .route(
            HEALTH_PATH,
            route_get(|State(shared): State<Arc<Shared>>| async move { health(&shared.gateway) }),
        )
        .route(
            METRICS_PATH,
            route_get(
                |State(shared): State<Arc<Shared>>, headers: HeaderMap| async move {
                    let settings = shared.gateway.http();
                    // With only identity-provider users, the metrics (every tool's use) are
                    // no one's: they need a token of `http.tokens`.
                    if settings.tokens.is_empty() && settings.auth.is_some() {
                        return unauthorized(checks::Refused::Missing);
                    }
                    super::metrics::respond(
                        &shared.gateway,
                        &headers,
                        &shared.hosts(&settings),
                        &settings.tokens,
                    )
                },
            ),
        )
        .with_state(shared)
}

/// Serves MCP over Streamable HTTP on `listener` until `shutdown` completes; then requests
/// still running get a few seconds to finish, GET streams end, and every session is dropped.
/// The servers are the caller's to shut down.
pub async fn serve(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    settings: HttpSettings,
    shutdown: impl Future<Output = ()> + Send + 'static,
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
    gateway.set_http(settings);
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
    let sweeper = tokio::spawn(sweep(Arc::downgrade(&shared), idle));
    let revoker = tokio::spawn(revoke_on_reload(Arc::downgrade(&shared)));
    let app = router(shared.clone());
    tracing::info!(
        address = %local,
        tokens,
        "serving MCP over Streamable HTTP at http://{local}{MCP_PATH}"
    );
    let server = super::listen::serve(listener, app, max_connections, async move {
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
    /// The checker of `settings`: the one in use when they are the same, else a new one
    /// (a reload changed them; its keys are fetched anew).
    /// The counter of what `principal`'s sessions' replay buffers hold, shared by them.
    fn replay_of(&self, principal: &str) -> Arc<std::sync::atomic::AtomicUsize> {
        self.replay.of(principal)
    }

    /// The counter of what `principal`'s POST streams hold unread, shared by them.
    fn post_held_of(&self, principal: &str) -> Arc<std::sync::atomic::AtomicUsize> {
        self.post_held.of(principal)
    }

    fn verifier(&self, settings: &moniker_config::ResourceAuth) -> Arc<Verifier> {
        let mut held = lock(&self.verifier);
        if let Some(verifier) = held.as_ref().filter(|v| v.settings == *settings) {
            return verifier.clone();
        }
        let verifier = Verifier::new(settings.clone());
        *held = Some(verifier.clone());
        verifier
    }

    /// `allowed_hosts`, plus the address the listener is bound to.
    fn hosts(&self, settings: &HttpSettings) -> Vec<String> {
        let mut hosts = settings.allowed_hosts.clone();
        hosts.extend(self.bound.clone());
        hosts
    }
}

/// `/healthz` (no token): `ok`; where the last config reload failed, if it was refused (the
/// previous config still serves: file:line:column and the code, never the file's text); and
/// the servers whose new listing was refused (a name taken twice), by the codes of why.
fn health(gateway: &Gateway) -> String {
    let mut out = String::from("ok");
    if let Some(error) = gateway.config_error() {
        out.push_str("\nconfig reload refused (the previous config still serves):\n");
        out.push_str(&error);
    }
    for (server, why) in gateway.refused_listings() {
        let codes: std::collections::BTreeSet<&str> = why.iter().map(|d| d.code).collect();
        let codes: Vec<&str> = codes.into_iter().collect();
        out.push_str(&format!(
            "\nserver `{server}`: its new listing is refused ({}; the log says which names and how to fix it)",
            codes.join(", ")
        ));
    }
    if out.len() > 2 {
        out.push('\n');
    }
    out
}

/// Ends the sessions new HTTP settings no longer allow, each time the settings change.
async fn revoke_on_reload(shared: Weak<Shared>) {
    let Some(mut changes) = shared.upgrade().map(|s| s.gateway.http_changes()) else {
        return;
    };
    while changes.changed().await.is_ok() {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let settings = shared.gateway.http();
        revoke(&shared, &settings);
    }
}

/// Drops the sessions that went unused for `idle`.
async fn sweep(shared: Weak<Shared>, idle: Duration) {
    let period = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(60));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let ended: Vec<(String, Arc<HttpSession>)> = {
            let mut sessions = lock(&shared.sessions);
            let ids: Vec<String> = sessions
                .iter()
                .filter(|(_, s)| s.activity.idle_for(idle))
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| sessions.remove_entry(&id))
                .collect()
        };
        for (id, session) in ended {
            session.outbox.close();
            tracing::info!(
                session = short(&id),
                "HTTP session dropped after {idle:?} unused"
            );
        }
    }
}

/// The start of a session id, enough to follow it in logs.
fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

/// Starts the [`Session`] behind a new HTTP session: bound for good to the toolset of the
/// token that created it (its `toolset`), else an ordinary session (which starts with the
/// gateway's default toolset, if any).
fn open_session(
    gateway: Arc<Gateway>,
    out: mpsc::UnboundedSender<Message>,
    toolset: Option<&str>,
) -> Arc<Session> {
    match toolset {
        Some(toolset) => Session::bound(gateway, out, toolset.to_owned()),
        None => Session::new(gateway, out),
    }
}

/// Who a stateless client is: its token (a digest of its secret, which names it across
/// reloads and replicas and shows nothing of it), or anyone on a tokenless loopback endpoint.
fn principal(auth: &Auth) -> String {
    use sha2::{Digest, Sha256};
    match auth {
        Auth::Open => "anyone".to_owned(),
        // Issuer and `sub`: one person whatever OAuth client they come through (dynamic
        // registration makes client ids free), and never two issuers' users as one.
        Auth::User(identity) => format!("user {} {}", identity.issuer, identity.subject),
        Auth::Token { token, .. } => {
            let digest = Sha256::digest(token.token.as_bytes());
            format!("token {}", crate::files::hex(&digest[..8]))
        }
    }
}

/// What the audit log and spans call a client: its token's `name`, else the token's place in
/// the list (`token #2`, as the logs say: nothing derived from the secret leaves moniker, where
/// a short token could be guessed from it), else `anyone` (a tokenless loopback endpoint).
fn client_name(auth: &Auth) -> String {
    match auth {
        Auth::Token { index, token } => token
            .name
            .clone()
            .unwrap_or_else(|| format!("token #{}", index + 1)),
        Auth::User(identity) => identity.subject.clone(),
        Auth::Open => "anyone".to_owned(),
    }
}

/// Who makes a request, for the headers servers' `forward` makes: the identity
/// and its access token (never a static token's secret), and the request's headers but its
/// credentials; `None` when no server forwards anything (nothing is copied then).
fn caller(shared: &Shared, auth: &Auth, headers: &HeaderMap) -> Option<Caller> {
    if !shared.gateway.forwards() {
        return None;
    }
    let (identity, access_token) = match auth {
        Auth::User(identity) => (
            Some(identity.clone()),
            headers
                .get(header::AUTHORIZATION)
                .and_then(|v| checks::bearer(v.as_bytes()))
                .and_then(|t| std::str::from_utf8(t).ok())
                .map(str::to_owned),
        ),
        Auth::Token { .. } | Auth::Open => (None, None),
    };
    let headers = headers
        .iter()
        .filter(|(name, _)| *name != header::AUTHORIZATION && *name != header::COOKIE)
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect();
    Some(Caller {
        identity,
        access_token,
        headers,
    })
}

/// A new session id: 32 random bytes from the OS, in hex.
fn new_session_id() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(crate::files::hex(&bytes))
}

// ---------------------------------------------------------------------------------------------
// Responses

fn accepted() -> Response {
    with_status(StatusCode::ACCEPTED, Body::empty())
}

/// An SSE response from a stream of text chunks.
fn sse<S>(stream: S) -> Response
where
    S: Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static,
{
    let mut response = with_status(StatusCode::OK, Body::from_stream(stream));
    set(&mut response, header::CONTENT_TYPE, "text/event-stream");
    set(&mut response, header::CACHE_CONTROL, "no-cache");
    set(
        &mut response,
        HeaderName::from_static("x-accel-buffering"),
        "no",
    );
    response
}

/// One SSE event, and the end of the stream.
fn sse_once(message: &Message) -> Response {
    let mut text = String::new();
    outbox::event(&mut text, None, message.text());
    sse(futures_util::stream::once(
        async move { Ok(Bytes::from(text)) },
    ))
}

fn header_str(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

// ---------------------------------------------------------------------------------------------
// Requests

/// Every request to `/mcp`: DNS-rebinding checks, CORS, authentication, then the method.
async fn mcp(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    serve_mcp(&shared, None, request).await
}

/// Who the caller is: a token of `http.tokens`, else (with `http.auth`) an access token of
/// the identity provider for the resource this URL is; the refusal otherwise (401 with the
/// challenge that sends a client to the metadata, 403 `insufficient_scope`).
async fn identify(
    shared: &Shared,
    settings: &HttpSettings,
    authorization: Option<&[u8]>,
    toolset: Option<&str>,
) -> Result<Auth, Response> {
    let Some(resource_auth) = &settings.auth else {
        return checks::authenticate(authorization, &settings.tokens).map_err(unauthorized);
    };
    if let Ok(auth @ Auth::Token { .. }) = checks::authenticate(authorization, &settings.tokens) {
        return Ok(auth);
    }
    let verifier = shared.verifier(resource_auth);
    let resource = verifier.resource(toolset);
    let challenge = |error: Option<&str>, scopes: &[String]| {
        let mut value = format!(
            "Bearer resource_metadata=\"{}\"",
            crate::auth::resource::metadata_url(&resource)
        );
        if !scopes.is_empty() {
            value.push_str(&format!(", scope=\"{}\"", scopes.join(" ")));
        }
        if let Some(error) = error {
            value.push_str(&format!(", error=\"{error}\""));
        }
        value
    };
    let refuse = |status: StatusCode, message: &str, challenge: String| {
        challenged(status, message, &challenge)
    };
    let scopes = &verifier.settings.scopes;
    let Some(token) = authorization
        .and_then(checks::bearer)
        .and_then(|t| std::str::from_utf8(t).ok())
    else {
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: an access token is required",
            challenge(None, scopes),
        ));
    };
    match verifier.verify(token, &resource).await {
        Ok(identity) => Ok(Auth::User(Arc::new(identity))),
        Err(Denied::Invalid(why)) => {
            tracing::warn!(resource = %resource, reason = %why, "HTTP request refused: the access token is not valid");
            Err(refuse(
                StatusCode::UNAUTHORIZED,
                "Unauthorized: the access token is not valid",
                challenge(Some("invalid_token"), scopes),
            ))
        }
        Err(Denied::Scope(missing)) => {
            tracing::warn!(resource = %resource, missing = %missing.join(" "), "HTTP request refused: the access token lacks a scope");
            Err(refuse(
                StatusCode::FORBIDDEN,
                "Forbidden: the access token lacks a scope this resource requires",
                challenge(Some("insufficient_scope"), scopes),
            ))
        }
    }
}

/// The Protected Resource Metadata (RFC 9728) of `/mcp` (at the well-known path alone too,
/// where older clients look) and of each toolset URL, when `http.auth` is set; 404 else.
async fn resource_metadata(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let settings = shared.gateway.http();
    let Some(resource_auth) = &settings.auth else {
        return failure(StatusCode::NOT_FOUND, "Not Found");
    };
    let verifier = shared.verifier(resource_auth);
    let asked = request
        .uri()
        .path()
        .strip_prefix(RESOURCE_METADATA_PATH)
        .unwrap_or_default()
        .trim_end_matches('/');
    let base = Url::parse(&verifier.settings.resource)
        .map(|u| u.path().trim_end_matches('/').to_owned())
        .unwrap_or_default();
    let toolset = if asked.is_empty() || asked == base {
        None
    } else {
        match asked.strip_prefix(&base).and_then(|r| r.strip_prefix('/')) {
            // Any name a toolset could have, known or not: the metadata is public, and an
            // answer that differed would tell anyone which toolsets exist.
            Some(name) if moniker_surface::toolsets::valid_name(name) => Some(name),
            _ => return failure(StatusCode::NOT_FOUND, "Not Found: no such resource"),
        }
    };
    let document = verifier.metadata(&verifier.resource(toolset));
    let mut response = with_status(StatusCode::OK, Body::from(document.to_string()));
    set(&mut response, header::CONTENT_TYPE, "application/json");
    // Public metadata, read by browser-based clients of any origin.
    set(&mut response, header::ACCESS_CONTROL_ALLOW_ORIGIN, "*");
    response
}

/// `/mcp/<toolset>`: the same, for a client that sees and calls only that toolset.
async fn mcp_in_toolset(
    State(shared): State<Arc<Shared>>,
    Path(toolset): Path<String>,
    request: Request,
) -> Response {
    serve_mcp(&shared, Some(toolset), request).await
}

/// The toolset a request's sessions are bound to: the URL's, which a token bound to another
/// cannot reach (403), or the token's. An unknown toolset is 404.
fn toolset_of(
    shared: &Shared,
    auth: &Auth,
    url: Option<String>,
) -> Result<Option<String>, (StatusCode, &'static str)> {
    let bound = match auth {
        Auth::Token { token, .. } => token.toolset.clone(),
        Auth::User(identity) => identity.toolset.clone(),
        Auth::Open => None,
    };
    let Some(name) = url else {
        return Ok(bound);
    };
    if bound.as_ref().is_some_and(|b| *b != name) {
        return Err((
            StatusCode::FORBIDDEN,
            "Forbidden: this token is bound to another toolset",
        ));
    }
    if !shared.gateway.catalog.knows(&name) {
        return Err((StatusCode::NOT_FOUND, "Not Found: no such toolset"));
    }
    Ok(Some(name))
}

async fn serve_mcp(
    shared: &Arc<Shared>,
    url_toolset: Option<String>,
    request: Request,
) -> Response {
    let has_body = match request.headers().get(header::CONTENT_LENGTH) {
        Some(length) => length.as_bytes() != b"0",
        None => request.headers().contains_key(header::TRANSFER_ENCODING),
    };
    let mut response = answer_mcp(shared, url_toolset, request).await;
    // A refusal is often made before the body is read (a missing token, a bad Host), and
    // hyper then closes the connection: said, so that the client does not send its next
    // request (the same one with a token) on a connection about to close.
    if has_body && (response.status().is_client_error() || response.status().is_server_error()) {
        set(&mut response, header::CONNECTION, "close");
    }
    response
}

async fn answer_mcp(
    shared: &Arc<Shared>,
    url_toolset: Option<String>,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let host = match headers.get(header::HOST) {
        Some(value) => value.to_str().ok(),
        None => parts.uri.authority().map(|a| a.as_str()),
    };
    let settings = shared.gateway.http();
    match host.and_then(|h| checks::host_allowed(h, &shared.hosts(&settings))) {
        None => {
            return failure(
                StatusCode::BAD_REQUEST,
                "Bad Request: missing or invalid Host header",
            );
        }
        Some(false) => {
            tracing::warn!(
                host = host.unwrap_or_default(),
                "HTTP request refused: Host is not allowed (possible DNS rebinding)"
            );
            return failure(
                StatusCode::FORBIDDEN,
                "Forbidden: Host header is not allowed",
            );
        }
        Some(true) => {}
    }
    let origin = match headers.get(header::ORIGIN) {
        None => None,
        Some(value) => match value.to_str() {
            Ok(origin) if checks::origin_allowed(origin, &settings.allowed_origins) => {
                Some(value.clone())
            }
            _ => {
                tracing::warn!(
                    origin = ?value,
                    "HTTP request refused: Origin is not allowed (possible DNS rebinding)"
                );
                return failure(
                    StatusCode::FORBIDDEN,
                    "Forbidden: Origin header is not allowed",
                );
            }
        },
    };
    let mut response = if parts.method == Method::OPTIONS {
        preflight()
    } else {
        let authorization = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
        match identify(shared, &settings, authorization, url_toolset.as_deref()).await {
            Err(refusal) => refusal,
            Ok(auth) => match toolset_of(shared, &auth, url_toolset) {
                Err((status, why)) => failure(status, why),
                Ok(toolset) => match parts.method {
                    Method::POST => post(shared, headers, body, auth, toolset).await,
                    Method::GET => get(shared, headers, auth, toolset.as_deref()),
                    Method::DELETE => delete(shared, headers, auth, toolset.as_deref()),
                    _ => {
                        let mut response =
                            failure(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
                        set(&mut response, header::ALLOW, "GET, POST, DELETE, OPTIONS");
                        response
                    }
                },
            },
        }
    };
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

/// A CORS preflight from an allowed origin.
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

/// `MCP-Protocol-Version`, when present, must be a version moniker speaks.
fn version_ok(headers: &HeaderMap) -> Result<(), Reject> {
    match headers.get(PROTOCOL_VERSION) {
        None => Ok(()),
        Some(value) => match value.to_str() {
            Ok(v) if checks::protocol_version_supported(v) => Ok(()),
            _ => Err(Reject(
                StatusCode::BAD_REQUEST,
                format!(
                    "Bad Request: unsupported MCP-Protocol-Version {:?} (supported: {})",
                    String::from_utf8_lossy(value.as_bytes()),
                    crate::session::PROTOCOL_VERSIONS.join(", ")
                ),
            )),
        },
    }
}

/// The request's session: 400 without an id, 404 for one that is unknown or ended, 403 when it
/// was created with another token; then the protocol version is checked.
fn session_of(
    shared: &Shared,
    headers: &HeaderMap,
    auth: Auth,
    toolset: Option<&str>,
) -> Result<(String, Arc<HttpSession>), Reject> {
    let Some(id) = header_str(headers, SESSION_ID).filter(|id| !id.is_empty()) else {
        return Err(Reject::new(
            StatusCode::BAD_REQUEST,
            "Bad Request: the Mcp-Session-Id header is required (send initialize first)",
        ));
    };
    let Some(session) = lock(&shared.sessions).get(id).cloned() else {
        return Err(Reject::new(
            StatusCode::NOT_FOUND,
            "Not Found: no such session (it may have ended): initialize a new one",
        ));
    };
    if session.auth != auth {
        tracing::warn!(
            session = short(id),
            "HTTP request refused: the session belongs to another token"
        );
        return Err(Reject::new(
            StatusCode::FORBIDDEN,
            "Forbidden: the session was created with another token",
        ));
    }
    if session.toolset.as_deref() != toolset {
        if let Auth::Token { token, .. } = &auth {
            if let Auth::Token { token: was, .. } = &session.auth {
                if token.toolset != was.toolset {
                    // Its token was bound to another toolset by a reload, and the sweep of
                    // that reload has not reached it yet.
                    end(shared, id, "its token is now bound to another toolset");
                    return Err(Reject::new(
                        StatusCode::NOT_FOUND,
                        "Not Found: the session ended (its token was bound to another toolset): initialize a new one",
                    ));
                }
            }
        }
        tracing::warn!(
            session = short(id),
            "HTTP request refused: the session belongs to another toolset URL"
        );
        return Err(Reject::new(
            StatusCode::FORBIDDEN,
            "Forbidden: the session belongs to another toolset URL",
        ));
    }
    version_ok(headers)?;
    Ok((id.to_owned(), session))
}

/// Ends a session: it is forgotten and its stream closes (its requests still running finish,
/// their answers are dropped).
fn end(shared: &Shared, id: &str, why: &str) {
    if let Some(http) = lock(&shared.sessions).remove(id) {
        http.outbox.close();
        tracing::info!(session = short(id), "HTTP session ended: {why}");
    }
}

/// After new HTTP settings: the sessions whose token is gone, or bound now to another toolset
/// than when they began, end (a token's binding is a boundary, not a default for new sessions
/// only); so do the tokenless sessions once tokens are required.
fn revoke(shared: &Shared, settings: &HttpSettings) {
    let stale: Vec<(String, &'static str)> = lock(&shared.sessions)
        .iter()
        .filter_map(|(id, http)| {
            let why = match &http.auth {
                Auth::Open if settings.tokens.is_empty() && settings.auth.is_none() => return None,
                Auth::Open => "tokens are required now",
                Auth::User(identity) => match &settings.auth {
                    None => "access tokens of the identity provider are not accepted now",
                    Some(now) if now.issuer != identity.issuer => "another issuer is trusted now",
                    Some(now)
                        if crate::auth::resource::toolset_of(now, &identity.claims)
                            != identity.toolset =>
                    {
                        "its identity is now bound to another toolset"
                    }
                    Some(_) => return None,
                },
                Auth::Token { token, .. } => {
                    match checks::find_token(&token.token, &settings.tokens) {
                        None => "its token was removed",
                        Some(now) if now.toolset != token.toolset => {
                            "its token is now bound to another toolset"
                        }
                        Some(_) => return None,
                    }
                }
            };
            Some((id.clone(), why))
        })
        .collect();
    for (id, why) in stale {
        end(shared, &id, why);
    }
}

/// What a POST body holds.
struct Shape {
    /// It has requests (or invalid batch elements), so it gets a response body.
    needs_answer: bool,
    /// It is one `initialize` request.
    initialize: bool,
    /// A batch with an `initialize` in it.
    batched_initialize: bool,
    /// Its one request asks for progress.
    progress: bool,
    /// It is one 2026-07-28 request (its `_meta` envelope, or `server/discover`): answered
    /// without a session.
    stateless: bool,
}

impl Shape {
    fn of(incoming: &Incoming) -> Self {
        let mut shape = Self {
            needs_answer: false,
            initialize: false,
            batched_initialize: false,
            progress: false,
            stateless: false,
        };
        match incoming {
            Incoming::One(m) if m.is_request() => {
                shape.needs_answer = true;
                shape.initialize = m.method() == Some("initialize");
                shape.progress = m.progress_token().is_some();
                shape.stateless = m.method() == Some("server/discover")
                    || m.field(crate::message::Field::Version).is_some();
            }
            Incoming::One(_) => {}
            Incoming::Batch(items) => {
                for item in items {
                    match item {
                        Ok(m) if m.is_request() => {
                            shape.needs_answer = true;
                            shape.batched_initialize |= m.method() == Some("initialize");
                        }
                        Err(_) => shape.needs_answer = true,
                        Ok(_) => {}
                    }
                }
            }
        }
        shape
    }
}

/// How a POST's response goes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Json,
    Sse,
}

enum BodyError {
    TooLarge,
    Broken,
}

/// The whole body, refused as soon as it passes `max` bytes.
async fn read_body(body: Body, max: usize) -> Result<Vec<u8>, BodyError> {
    let mut data = body.into_data_stream();
    let mut out = Vec::new();
    while let Some(chunk) = data.next().await {
        let chunk = chunk.map_err(|_| BodyError::Broken)?;
        if out.len() + chunk.len() > max {
            return Err(BodyError::TooLarge);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

fn too_large(max: usize) -> Response {
    failure(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("Payload Too Large: the body is over the limit of {max} bytes"),
    )
}

/// POST: one JSON-RPC message or a batch.
#[expect(clippy::too_many_lines, reason = "not split yet: see CONTRIBUTING.md")]
async fn post(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    body: Body,
    auth: Auth,
    toolset: Option<String>,
) -> Response {
    if !checks::is_json_content_type(header_str(headers, header::CONTENT_TYPE)) {
        return failure(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Unsupported Media Type: Content-Type must be application/json",
        );
    }
    let max = shared
        .gateway
        .http()
        .max_body
        .map_or(DEFAULT_MAX_BODY, |max| max as usize);
    let declared = header_str(headers, header::CONTENT_LENGTH).and_then(|l| l.parse::<u64>().ok());
    if declared.is_some_and(|l| l > max as u64) {
        return too_large(max);
    }
    let bytes = match tokio::time::timeout(BODY_TIMEOUT, read_body(body, max)).await {
        Err(_) => {
            return failure(
                StatusCode::REQUEST_TIMEOUT,
                "Request Timeout: the body did not arrive in time",
            );
        }
        Ok(Ok(bytes)) => bytes,
        Ok(Err(BodyError::TooLarge)) => return too_large(max),
        Ok(Err(BodyError::Broken)) => {
            return failure(
                StatusCode::BAD_REQUEST,
                "Bad Request: the body could not be read",
            );
        }
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return json(
            StatusCode::BAD_REQUEST,
            Message::error(None, message::PARSE_ERROR, "Parse error: not UTF-8"),
        );
    };
    // The body is parsed here, once; the session takes the parsed messages.
    let incoming = match message::parse(text) {
        Ok(incoming) => incoming,
        Err(invalid) => return json(StatusCode::BAD_REQUEST, invalid.answer()),
    };
    let shape = Shape::of(&incoming);
    let mode = if shape.needs_answer {
        let accept = Accept::parse(header_str(headers, header::ACCEPT));
        // A request that asks for progress is answered as a stream that carries it.
        if accept.sse && shape.progress {
            Some(Mode::Sse)
        } else if accept.json {
            Some(Mode::Json)
        } else if accept.sse {
            Some(Mode::Sse)
        } else {
            return failure(
                StatusCode::NOT_ACCEPTABLE,
                "Not Acceptable: the client must accept application/json or text/event-stream",
            );
        }
    } else {
        None
    };
    if !headers.contains_key(SESSION_ID) {
        return match mode {
            Some(mode) if shape.stateless => {
                stateless(shared, headers, incoming, &auth, toolset, mode).await
            }
            Some(mode) if shape.initialize => {
                initialize(shared, headers, incoming, auth, toolset, mode).await
            }
            _ if shape.batched_initialize => failure(
                StatusCode::BAD_REQUEST,
                "Bad Request: initialize must be sent alone, not in a batch",
            ),
            _ => failure(
                StatusCode::BAD_REQUEST,
                "Bad Request: the Mcp-Session-Id header is required (send initialize first)",
            ),
        };
    }
    // Its caller as this request says it (a refreshed token, the headers it sends now).
    let this_caller = mode.and_then(|_| caller(shared, &auth, headers));
    let (_, http) = match session_of(shared, headers, auth, toolset.as_deref()) {
        Ok(found) => found,
        Err(reject) => return reject.response(),
    };
    let busy = http.activity.busy();
    match mode {
        None => {
            // Notifications and responses are handled before `handle` returns.
            http.session.handle(Ok(incoming), None);
            accepted()
        }
        Some(mode) => {
            let trace = trace_of(&http.session, headers);
            answer(&http, incoming, mode, busy, trace, this_caller).await
        }
    }
}

/// A 2026-07-28 request: its routing headers checked against its body, then answered by a
/// session of its own (the token's toolset), which ends with the answer. Nothing of it
/// stays: any replica can answer the next request.
async fn stateless(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    incoming: Incoming,
    auth: &Auth,
    toolset: Option<String>,
    mode: Mode,
) -> Response {
    let Incoming::One(request) = &incoming else {
        return failure(StatusCode::BAD_REQUEST, "Bad Request: one request per POST");
    };
    if let Err(mismatch) = checks::routing_headers(headers, request) {
        let id = request.id().unwrap_or("null");
        return json(
            StatusCode::BAD_REQUEST,
            Message::error(Some(id), modern::HEADER_MISMATCH, &mismatch),
        );
    }
    let (tx, _rx) = mpsc::unbounded_channel::<Message>();
    // Who the client is, made once (a token's digest) for everything that counts by it.
    let who = principal(auth);
    let session = Session::of_principal(shared.gateway.clone(), tx, toolset, who.clone());
    session.identify(&client_name(auth));
    session.count_calls_under(&who);
    if request.method() == Some("subscriptions/listen") {
        // A long-lived stream: the acknowledgement, the list changes, at last the result. It
        // lasts as long as the client reads it.
        let (tx, rx) = mpsc::unbounded_channel();
        let held = shared.post_held_of(&who);
        session.handle(
            Ok(incoming),
            Some(
                Answers::new(tx, true)
                    .with_trace(trace_of(&session, headers))
                    .with_held(Arc::clone(&held)),
            ),
        );
        let stream = PostStream::new(rx, held, None, Activity::new().busy());
        return sse(futures_util::stream::unfold(stream, |mut st| async move {
            let chunk = st.next().await?;
            Some((Ok(Bytes::from(chunk)), st))
        }));
    }
    // The answer; with an event stream, what comes before it (progress) too, on the stream.
    // A stateless client that goes away before its answer (its connection closed: this
    // future, or the stream, dropped) takes its call with it: cancelled at the server.
    let gone = ClientGone {
        session: session.clone(),
        id: request.id().unwrap_or("null").to_owned(),
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let held = shared.post_held_of(&who);
    session.handle(
        Ok(incoming),
        Some(
            Answers::new(tx, mode == Mode::Sse)
                .with_trace(trace_of(&session, headers))
                .with_caller(caller(shared, auth, headers))
                .with_held(Arc::clone(&held)),
        ),
    );
    let mut stream = PostStream::new(rx, held, None, Activity::new().busy());
    let Some(first) = stream.recv().await else {
        return accepted();
    };
    match mode {
        Mode::Json => json(modern_status(&first), first),
        Mode::Sse if first.is_response() => sse_once(&first),
        Mode::Sse => {
            stream.first = Some(first);
            sse(futures_util::stream::unfold(
                (stream, gone),
                |(mut st, gone)| async move {
                    let chunk = st.next().await?;
                    Some((Ok(Bytes::from(chunk)), (st, gone)))
                },
            ))
        }
    }
}

/// A stateless request whose client may go away before its answer: when this is dropped, the
/// request is cancelled (nothing happens to one already answered).
struct ClientGone {
    session: Arc<Session>,
    id: String,
}

impl Drop for ClientGone {
    fn drop(&mut self) {
        self.session.client_gone(&self.id);
    }
}

/// The HTTP status of a 2026-07-28 answer: 400 for a request moniker cannot take as it is
/// (parse, params, headers, version), 404 for an unknown method, else 200.
fn modern_status(reply: &Message) -> StatusCode {
    let code = reply.error_code();
    match code {
        Some(
            message::PARSE_ERROR
            | message::INVALID_REQUEST
            | message::INVALID_PARAMS
            | modern::HEADER_MISMATCH
            | modern::MISSING_CAPABILITY
            | modern::UNSUPPORTED_PROTOCOL_VERSION,
        ) => StatusCode::BAD_REQUEST,
        Some(message::METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// GET or DELETE without a session: there is nothing to stream or end (405, as 2026-07-28
/// servers answer).
fn without_session() -> Response {
    let mut response = failure(
        StatusCode::METHOD_NOT_ALLOWED,
        "Method Not Allowed: GET and DELETE need the Mcp-Session-Id of a 2025 session",
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    response
}

/// `initialize` without a session: a new session, whose id goes back in `Mcp-Session-Id` when
/// the answer is a success.
async fn initialize(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    incoming: Incoming,
    auth: Auth,
    toolset: Option<String>,
    mode: Mode,
) -> Response {
    if let Err(reject) = version_ok(headers) {
        return reject.response();
    }
    let who = principal(&auth);
    let _reserved = match room_for_session(shared, &who) {
        Ok(reserved) => reserved,
        Err(reject) => return reject.response(),
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
    let session = open_session(shared.gateway.clone(), tx, toolset.as_deref());
    session.identify(&client_name(&auth));
    session.count_calls_under(&who);
    let outbox = Outbox::new(shared.replay_of(&who));
    let to_outbox = outbox.clone();
    // What the session sends on its own waits in the outbox for the GET stream.
    tokio::spawn(async move {
        while let Some(message) = rx.recv().await {
            to_outbox.push(message.into_text());
        }
    });
    let Some(reply) = answer_of(&session, incoming, None).await else {
        return failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal error: initialize was not answered",
        );
    };
    let protocol = session
        .protocol_version()
        .filter(|_| reply.result_text().is_some())
        .map(str::to_owned);
    let mut response = match mode {
        Mode::Json => json(StatusCode::OK, reply),
        Mode::Sse => sse_once(&reply),
    };
    let Some(protocol) = protocol else {
        return response;
    };
    let Some(id) = new_session_id() else {
        tracing::error!("no randomness for a session id");
        return failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal error: no session id",
        );
    };
    let Ok(value) = HeaderValue::from_str(&id) else {
        return failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal error: no session id",
        );
    };
    response.headers_mut().insert(SESSION_ID, value);
    let token = match auth {
        Auth::Token { index, .. } => format!("token #{}", index + 1),
        Auth::User(ref identity) => format!("user {}", identity.subject),
        Auth::Open => "none".to_owned(),
    };
    tracing::info!(session = short(&id), token, toolset = ?toolset, "HTTP session started");
    lock(&shared.sessions).insert(
        id,
        Arc::new(HttpSession {
            session,
            post_held: shared.post_held_of(&who),
            principal: who,
            auth,
            toolset,
            protocol,
            outbox,
            activity: Activity::new(),
        }),
    );
    response
}

/// Whether a new session of principal `who` may open: each principal (a token; a person, whatever
/// OAuth client they use) has at most its share of sessions (`http.max_sessions_per_token`);
/// at its share, its own least recently used idle session ends to make room (never another
/// principal's: one client's load never evicts another's state), and with none idle the new
/// one is refused (503), as it is when every session together reach [`MAX_SESSIONS`]. The
/// place is reserved until the returned guard is dropped (when the session is in the table,
/// or its `initialize` failed): sessions being opened count against both caps.
fn room_for_session<'s>(shared: &'s Shared, who: &str) -> Result<Opening<'s>, Reject> {
    let per_token = shared
        .gateway
        .http()
        .max_sessions_per_token
        .map_or(DEFAULT_SESSIONS_PER_TOKEN, |n| n as usize);
    let key = who.to_owned();
    let mut sessions = lock(&shared.sessions);
    let mut opening = lock(&shared.opening);
    let pending = opening.get(&key).copied().unwrap_or(0);
    let own: Vec<(&String, &Arc<HttpSession>)> = sessions
        .iter()
        .filter(|(_, s)| s.principal == key)
        .collect();
    if own.len() + pending >= per_token {
        let oldest = own
            .iter()
            .filter_map(|(id, s)| s.activity.idle_since().map(|at| (at, (*id).clone())))
            .min()
            .map(|(_, id)| id);
        let Some(id) = oldest else {
            tracing::warn!(
                max = per_token,
                "HTTP initialize refused: the token has as many sessions as it may, all in use"
            );
            return Err(Reject(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "Service Unavailable: this token has {per_token} sessions in use (http.max_sessions_per_token); end unused ones with DELETE"
                ),
            ));
        };
        if let Some(http) = sessions.remove(&id) {
            http.outbox.close();
            tracing::info!(
                session = short(&id),
                max = per_token,
                "HTTP session ended: its token opened a new one and had as many as it may (the least recently used idle one ends)"
            );
        }
    }
    let all_pending: usize = opening.values().sum();
    if sessions.len() + all_pending >= MAX_SESSIONS {
        tracing::warn!(
            max = MAX_SESSIONS,
            "HTTP initialize refused: too many sessions"
        );
        return Err(Reject::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "Service Unavailable: too many sessions; end unused ones with DELETE",
        ));
    }
    *opening.entry(key.clone()).or_default() += 1;
    Ok(Opening { shared, key })
}

/// A session's place reserved while its `initialize` is answered ([`room_for_session`]).
struct Opening<'s> {
    shared: &'s Shared,
    key: String,
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        let _sessions = lock(&self.shared.sessions);
        let mut opening = lock(&self.shared.opening);
        if let Some(n) = opening.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                opening.remove(&self.key);
            }
        }
    }
}

/// The one answer to what was sent (its progress not wanted): `None` when there is none
/// (a cancelled request).
async fn answer_of(
    session: &Arc<Session>,
    incoming: Incoming,
    trace: Option<TraceContext>,
) -> Option<Message> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    session.handle(
        Ok(incoming),
        Some(Answers::new(tx, false).with_trace(trace)),
    );
    rx.recv().await
}

/// The W3C trace context of an HTTP request (`traceparent`, `tracestate`), read only when
/// traces are on.
fn trace_of(session: &Session, headers: &HeaderMap) -> Option<TraceContext> {
    if !session.traces() {
        return None;
    }
    Some(TraceContext {
        traceparent: header_str(headers, "traceparent")?.to_owned(),
        tracestate: header_str(headers, "tracestate").map(str::to_owned),
    })
}

/// Runs a body with requests in the session and answers it: as JSON once the answer is there,
/// or as an SSE stream: the request's progress (when it asked for it), keep-alive comments
/// while the answer is awaited, then the answer.
///
/// The requests run in tasks of the session's: a client that goes away does not cancel them
/// (the spec: disconnection is not cancellation; a client cancels with
/// `notifications/cancelled`), they finish and their answers are dropped.
async fn answer(
    http: &HttpSession,
    incoming: Incoming,
    mode: Mode,
    busy: Busy,
    trace: Option<TraceContext>,
    caller: Option<Caller>,
) -> Response {
    let (tx, rx) = mpsc::unbounded_channel();
    let held = Arc::clone(&http.post_held);
    http.session.handle(
        Ok(incoming),
        Some(
            Answers::new(tx, mode == Mode::Sse)
                .with_trace(trace)
                .with_caller(caller)
                .with_held(Arc::clone(&held)),
        ),
    );
    let mut stream = PostStream::new(rx, held, None, busy);
    match mode {
        Mode::Json => match stream.recv().await {
            Some(reply) => json(StatusCode::OK, reply),
            // Cancelled by the client: nothing to answer.
            None => accepted(),
        },
        Mode::Sse => sse(futures_util::stream::unfold(stream, |mut st| async move {
            let chunk = st.next().await?;
            Some((Ok(Bytes::from(chunk)), st))
        })),
    }
}

/// The SSE stream of a POST: the request's progress and keep-alives, then the answer, then
/// the end. The answer is the last message on the channel: the channel closes after it.
struct PostStream {
    rx: mpsc::UnboundedReceiver<Message>,
    /// What the session sent and this stream has not taken (it subtracts what it takes).
    held: Arc<std::sync::atomic::AtomicUsize>,
    /// A message read (with [`PostStream::recv`]) before the stream began, sent first.
    first: Option<Message>,
    tick: tokio::time::Interval,
    done: bool,
    _busy: Busy,
}

impl PostStream {
    fn new(
        rx: mpsc::UnboundedReceiver<Message>,
        held: Arc<std::sync::atomic::AtomicUsize>,
        first: Option<Message>,
        busy: Busy,
    ) -> Self {
        Self {
            rx,
            held,
            first,
            tick: tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE),
            done: false,
            _busy: busy,
        }
    }

    async fn next(&mut self) -> Option<String> {
        if self.done {
            return None;
        }
        if let Some(first) = self.first.take() {
            let mut text = String::new();
            // Taken with `recv` already: no longer held.
            outbox::event(&mut text, None, first.text());
            while let Ok(message) = self.rx.try_recv() {
                self.took(&message);
                outbox::event(&mut text, None, message.text());
            }
            return Some(text);
        }
        tokio::select! {
            message = self.rx.recv() => {
                let mut text = String::new();
                match message {
                    Some(message) => {
                        self.took(&message);
                        outbox::event(&mut text, None, message.text());
                        // What else is queued goes in the same chunk.
                        while let Ok(message) = self.rx.try_recv() {
                            self.took(&message);
                            outbox::event(&mut text, None, message.text());
                        }
                    }
                    None => self.done = true,
                }
                (!text.is_empty()).then_some(text)
            }
            _ = self.tick.tick() => Some(KEEP_ALIVE_COMMENT.to_owned()),
        }
    }

    /// A message taken from the session: no longer held.
    fn took(&self, message: &Message) {
        crate::answers::give_back(&self.held, message.text().len());
    }

    /// The next message from the session, as it is (no longer held).
    async fn recv(&mut self) -> Option<Message> {
        let message = self.rx.recv().await?;
        self.took(&message);
        Some(message)
    }
}

impl Drop for PostStream {
    /// What the session sent and nobody will take is held no more.
    fn drop(&mut self) {
        self.rx.close();
        while let Ok(message) = self.rx.try_recv() {
            self.took(&message);
        }
    }
}

/// GET: the session's stream of unsolicited messages.
fn get(shared: &Arc<Shared>, headers: &HeaderMap, auth: Auth, toolset: Option<&str>) -> Response {
    if !headers.contains_key(SESSION_ID) {
        // 2026-07-28 has no GET stream (`subscriptions/listen` replaces it); a 2025 client
        // has a session to name.
        return without_session();
    }
    if !Accept::parse(header_str(headers, header::ACCEPT)).sse {
        return failure(
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: the client must accept text/event-stream",
        );
    }
    let (id, http) = match session_of(shared, headers, auth, toolset) {
        Ok(found) => found,
        Err(reject) => return reject.response(),
    };
    let last_event_id = header_str(headers, LAST_EVENT_ID);
    if http.outbox.is_streaming() {
        tracing::debug!(
            session = short(&id),
            "a new GET stream replaces the session's open one"
        );
    }
    tracing::debug!(
        session = short(&id),
        last_event_id,
        "HTTP session stream opened"
    );
    // Priming events came with 2025-11-25; older clients may choke on their empty data.
    let prime = http.protocol.as_str() >= "2025-11-25";
    let busy = http.activity.busy();
    sse(http
        .outbox
        .stream(last_event_id, prime, KEEP_ALIVE, shared.stop.clone(), busy))
}

/// DELETE: ends the session.
fn delete(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    auth: Auth,
    toolset: Option<&str>,
) -> Response {
    if !headers.contains_key(SESSION_ID) {
        return without_session();
    }
    let (id, _) = match session_of(shared, headers, auth, toolset) {
        Ok(found) => found,
        Err(reject) => return reject.response(),
    };
    end(shared, &id, "by the client");
    with_status(StatusCode::NO_CONTENT, Body::empty())
}
