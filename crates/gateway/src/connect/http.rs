//! Servers over MCP's Streamable HTTP transport (protocol 2025-03-26 and later), with the
//! legacy HTTP+SSE transport (2024-11-05) as a fallback: the client side, towards remote
//! servers.
//!
//! Everything the gateway sends to the server comes as a JSON line on the connection's queue;
//! a writer task turns each into an HTTP request:
//! - Streamable HTTP: every line is POSTed to the URL with `Content-Type: application/json`,
//!   `Accept: application/json, text/event-stream`, the spec's headers, `Mcp-Session-Id` once
//!   the server gave one (in its answer to `initialize`) and `MCP-Protocol-Version` once the
//!   server answered `initialize` (the version it answered). `initialize` and
//!   `notifications/initialized` are sent one after the other, each waited for (within the
//!   set-up timeout); after them POSTs run concurrently, so a slow call blocks nothing. An
//!   answer is 202 (nothing), `application/json` (one message or a batch) or
//!   `text/event-stream` (the request's progress and other messages, then its response).
//!   After `notifications/initialized` the GET stream is opened for what the server sends on
//!   its own (405: the server offers none); when it drops it is opened again, with
//!   `Last-Event-ID`, after the server's `retry` or a backoff, for as long as the connection
//!   lives. A POST stream that ends before its response is resumed the same way when its
//!   events had ids.
//! - Legacy HTTP+SSE: when the first POST (`initialize`) gets 400, 404 or 405, the URL is
//!   opened with GET as an event stream; its first `endpoint` event gives the URL (relative
//!   to the server's, same origin) to POST messages to, in order; every message from the
//!   server, responses included, comes on that stream. This holds for the connection's life.
//!
//! Messages from the server keep their bytes: results pass through moniker untouched. (Line
//! ends, which JSON allows only as whitespace between tokens, become spaces: the gateway
//! carries messages as lines.)
//!
//! When the connection is gone its `closed` fires and its pending calls fail at once (the
//! supervisor then connects again, with a new `initialize`): a 404 to a request that carried
//! the session id (the server forgot the session), a server that cannot be reached any more
//! (a request that cannot connect, or whose connection broke while the server's address no
//! longer takes connections), the end of the legacy event stream. A request whose connection
//! broke while the server is still there fails alone (-32041). A request the server answers
//! with an HTTP error, or whose answer ends without its response, gets a JSON-RPC error of
//! moniker's (-32603; for `initialize`, naming the URL: it is the reason the server did not
//! start). A request the gateway cancels (`notifications/cancelled`, also sent when a call
//! times out) stops being read. When the gateway drops the connection, the session is ended
//! with DELETE (best effort).
//!
//! Over https, TLS is rustls with the platform's trust store and the server's `tls` settings
//! (`connect/tls`). Every request carries the server's OAuth access token, and a challenge
//! is answered by its authorizer (`auth`) before the request is sent again.
//!
//! `connect` itself checks the URL (http or https) and the headers, and
//! that the server's address takes TCP connections within the set-up timeout (unless a proxy
//! is configured), so that a wrong or unreachable URL fails to start with a one-line reason.
//!
//! The spec's headers are sent with every request and never logged nor shown in errors.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indexmap::IndexMap;
use moniker_config::{Auth, Tls};
use moniker_surface::ServerId;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use crate::auth::exchange::Exchanger;
use crate::auth::personal::Personal;
use reqwest::{Method, StatusCode, Url};
use tokio::sync::{Notify, mpsc, oneshot, watch};

use super::legacy::{legacy_send, open_legacy};
#[cfg(test)]
use super::link::split;
use super::link::{
    Link, Pending, SendError, cause, content_type, is_event_stream, one_line, read_stream,
};
use super::sse::Parser;
use super::{Connection, Sink, Started};
use crate::auth::{Authorizer, Store};
use crate::headers::{
    EVENT_STREAM, JSON, LAST_EVENT_ID, MCP_METHOD, MCP_NAME, MCP_PARAM_PREFIX, SESSION_ID,
    encode_value,
};
use crate::message::{self, Message};
use crate::modern::{MODERN_VERSION, UNSUPPORTED_PROTOCOL_VERSION};
use crate::sync::lock;

const BOTH: &str = "application/json, text/event-stream";

/// How long the DELETE that ends a session may take.
const DELETE_TIMEOUT: Duration = Duration::from_secs(2);
/// Attempts to resume a POST stream that ended before its response.
const RESUME_ATTEMPTS: u32 = 3;
/// Failed attempts in a row after which the GET stream is given up.
const LISTEN_ATTEMPTS: u32 = 10;
/// How long the check that a server is still there may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
const BACKOFF_INITIAL: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How much of an error answer's body is read, and shown.
const ERROR_BODY_MAX: usize = 64 * 1024;
const ERROR_BODY_SHOWN: usize = 200;

/// How to reach one remote server.
#[derive(Clone, Copy)]
pub struct Remote<'a> {
    pub url: &'a str,
    /// Sent with every request (`Authorization: Bearer ...`) and never logged.
    pub headers: &'a IndexMap<String, String>,
    pub tls: &'a Tls,
    pub auth: &'a Auth,
    /// Where OAuth tokens are kept (`None`: in memory only).
    pub store: Option<&'a Store>,
}

/// Connects to a remote server: checks the URL and the headers, and that the server's
/// address takes connections (within `timeout`). The handshake is the caller's; which
/// transport the server speaks is found with it.
pub async fn connect(
    server: ServerId,
    remote: Remote<'_>,
    sink: Arc<dyn Sink>,
    max_message: usize,
    timeout: Duration,
) -> Result<Started, String> {
    let shown = &moniker_config::shown_url(remote.url);
    let url = Url::parse(remote.url).map_err(|e| format!("`{shown}` is not a valid URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "cannot connect to `{shown}`: `{}` is not http nor https",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("`{shown}` is not a valid URL: it has no host"));
    }
    let mut headers = HeaderMap::new();
    for (name, value) in remote.headers {
        // The value is a secret: never shown.
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("`{name}` (a header for `{shown}`) is not a valid header name"))?;
        let mut value = HeaderValue::from_str(value).map_err(|_| {
            format!("the value of header `{name}` for `{shown}` is not a valid header value")
        })?;
        value.set_sensitive(true);
        headers.append(name, value);
    }
    let client = crate::tls::http_client(remote.tls, timeout)
        .map_err(|e| format!("cannot connect to `{shown}`: {e}"))?;
    // The user's own `Authorization` header wins over OAuth.
    let auth = (!headers.contains_key(AUTHORIZATION)).then(|| {
        Arc::new(Authorizer::new(
            server.clone(),
            url.clone(),
            remote.auth.clone(),
            client.clone(),
            remote.store.cloned(),
        ))
    });
    probe(&url, shown, timeout).await?;

    let (tx, rx) = mpsc::unbounded_channel::<Message>();
    let conn = Arc::new(Connection::new(server.clone(), tx, None));
    if let Some(exchanger) = Exchanger::of(&server, &url, remote.auth, &client) {
        let _ = conn.forwarding.exchange.set(exchanger);
    }
    match Personal::of(&server, &url, remote.auth, &client) {
        Ok(Some(personal)) => {
            let _ = conn.forwarding.personal.set(personal);
        }
        Ok(None) => {}
        Err(why) => {
            return Err(format!(
                "cannot keep people's sign-ins for `{shown}`: {why}"
            ));
        }
    }
    let (closed_tx, closed) = oneshot::channel();
    let (stop, _) = watch::channel(false);
    let link = Arc::new(Link {
        server,
        shown: shown.clone(),
        url,
        client,
        headers,
        auth,
        sink,
        conn: Arc::downgrade(&conn),
        max_message,
        session: Mutex::new(None),
        version: Mutex::new(None),
        closed: Mutex::new(Some(closed_tx)),
        calls: Mutex::new(HashMap::new()),
        stop,
    });
    tokio::spawn(run(link, rx, timeout));
    Ok(Started {
        conn,
        closed,
        pgid: None,
        child: None,
        stderr: None,
    })
}

/// Whether this process's environment names a proxy (which moniker uses itself and passes on
/// to every stdio server): connections then go to the proxy's address, not the server's.
pub fn proxy_set() -> bool {
    const PROXY_VARS: [&str; 6] = [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ];
    PROXY_VARS
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()))
}

/// Whether the server's address takes TCP connections. Skipped when a proxy is configured:
/// then only the proxy knows.
async fn probe(url: &Url, shown: &str, timeout: Duration) -> Result<(), String> {
    if proxy_set() {
        return Ok(());
    }
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return Err(format!("`{shown}` is not a valid URL: it has no host"));
    };
    // An IPv6 host comes bracketed, as `host:port` wants it.
    let address = format!("{host}:{port}");
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(&address)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("cannot reach `{shown}`: {e}")),
        Err(_) => Err(format!(
            "cannot reach `{shown}`: no connection within {} ms",
            timeout.as_millis()
        )),
    }
}

/// How messages reach the server.
enum Mode {
    /// Streamable HTTP; `ready` once `notifications/initialized` was sent.
    Streamable { ready: bool },
    /// Legacy HTTP+SSE: POSTs to the endpoint the event stream gave.
    Legacy { endpoint: Url },
}

/// What a POST came to.
enum Posted {
    Done,
    /// The first POST was refused the way servers of the legacy transport refuse it (how).
    Fallback(String),
}

/// The request a `notifications/cancelled` of moniker's cancels (its id as JSON text).
fn cancelled_request(sent: &Message) -> Option<&str> {
    (sent.method() == Some("notifications/cancelled"))
        .then(|| sent.request_id())
        .flatten()
}

/// The writer: takes the gateway's lines in order and sends them.
async fn run(link: Arc<Link>, mut rx: mpsc::UnboundedReceiver<Message>, setup: Duration) {
    let mut mode = Mode::Streamable { ready: false };
    let mut first = true;
    loop {
        let sent = tokio::select! {
            sent = rx.recv() => sent,
            () = link.stopped() => None,
        };
        let Some(line) = sent else { break };
        let handshaking = matches!(mode, Mode::Streamable { ready: false });
        if handshaking && link.conn.upgrade().is_some_and(|c| c.is_modern()) {
            // 2026-07-28 (configured, or found when the handshake was refused): no session;
            // every message is a POST of its own.
            *lock(&link.version) = Some(HeaderValue::from_static(MODERN_VERSION));
            mode = Mode::Streamable { ready: true };
            first = false;
        }
        match &mut mode {
            Mode::Legacy { endpoint } => {
                let endpoint = endpoint.clone();
                legacy_send(&link, &endpoint, &line, setup).await;
            }
            Mode::Streamable { ready: true } => post_apart(&link, line),
            Mode::Streamable { ready } => {
                // `initialize` and `notifications/initialized` go one after the other.
                let posted = tokio::select! {
                    r = tokio::time::timeout(setup, post(&link, &line, first)) => r,
                    () = link.stopped() => break,
                };
                let is_first = std::mem::replace(&mut first, false);
                match posted {
                    Err(_) => {
                        link.close("the server did not answer in time while connecting");
                        break;
                    }
                    Ok(Posted::Fallback(refusal)) => {
                        let opened = tokio::select! {
                            r = tokio::time::timeout(setup, open_legacy(&link)) => r,
                            () = link.stopped() => break,
                        };
                        match opened {
                            Ok(Ok(endpoint)) => {
                                tracing::info!(server = %link.server, url = %link.shown, "the server speaks the legacy HTTP+SSE transport");
                                legacy_send(&link, &endpoint, &line, setup).await;
                                mode = Mode::Legacy { endpoint };
                            }
                            failed => {
                                let why = match failed {
                                    Ok(Err(why)) => why,
                                    _ => format!(
                                        "no `endpoint` event within {} ms",
                                        setup.as_millis()
                                    ),
                                };
                                let why = format!(
                                    "`{}` speaks neither Streamable HTTP (POST: {refusal}) nor HTTP+SSE ({why})",
                                    link.shown
                                );
                                link.fail(&mut Pending::of(&line), &why);
                            }
                        }
                    }
                    Ok(Posted::Done) => {
                        let initialized = line.method() == Some("notifications/initialized");
                        if initialized && !is_first {
                            *ready = true;
                            listen_apart(&link);
                        }
                    }
                }
            }
        }
    }
    // The gateway dropped the connection (or it was lost): every task ends, and a session
    // the server still holds is ended.
    let lost = link.stop.send_replace(true);
    if !lost && matches!(mode, Mode::Streamable { .. }) && link.has_session() {
        end_session(&link).await;
    }
}

/// The server's own messages (its GET stream), listened to in a task of its own until the
/// connection stops.
fn listen_apart(link: &Arc<Link>) {
    let listener = link.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = listen(&listener) => {}
            () = listener.stopped() => {}
        }
    });
}

/// One line POSTed in a task of its own (the session is set up: lines need not wait for each
/// other), until its answers are in, it is cancelled, or the connection stops. A cancelled
/// request's answer is not waited for any more: its stream ends.
fn post_apart(link: &Arc<Link>, line: Message) {
    if let Some(id) = cancelled_request(&line) {
        if let Some(cancel) = lock(&link.calls).remove(id) {
            cancel.notify_one();
        }
    }
    let ids = Pending::of(&line).ids;
    let cancel = Arc::new(Notify::new());
    {
        let mut calls = lock(&link.calls);
        for id in &ids {
            calls.insert(id.clone(), cancel.clone());
        }
    }
    let link = link.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = post(&link, &line, false) => {}
            () = cancel.notified() => {}
            () = link.stopped() => {}
        }
        let mut calls = lock(&link.calls);
        for id in &ids {
            if calls.get(id).is_some_and(|c| Arc::ptr_eq(c, &cancel)) {
                calls.remove(id);
            }
        }
    });
}

/// DELETEs the session the server holds (within [`DELETE_TIMEOUT`]; a failure is only logged).
async fn end_session(link: &Link) {
    let delete = link.send(Method::DELETE, &link.url, &[], None);
    match tokio::time::timeout(DELETE_TIMEOUT, delete).await {
        Ok(Ok(response)) => {
            tracing::debug!(server = %link.server, status = %response.status(), "session ended")
        }
        Ok(Err(e)) => {
            tracing::debug!(server = %link.server, error = %e.cause(), "cannot end the session")
        }
        Err(_) => tracing::debug!(server = %link.server, "cannot end the session in time"),
    }
}

/// The headers of a line's POST: its types, a 2026-07-28 server's routing headers (`Err`:
/// the line cannot be routed), the trace context, and the caller's headers the server's
/// `forward` takes (taken first: whatever becomes of the request, they are not kept).
/// `None`: a request no one waits for any more, not to be sent.
fn post_headers(
    link: &Link,
    line: &Message,
) -> Result<Option<Vec<(HeaderName, HeaderValue)>>, String> {
    let Some(forwarded) = link
        .conn
        .upgrade()
        .map_or(Some(Vec::new()), |conn| conn.forwarded(line))
    else {
        return Ok(None);
    };
    let mut headers = vec![
        (CONTENT_TYPE, HeaderValue::from_static(JSON)),
        (ACCEPT, HeaderValue::from_static(BOTH)),
    ];
    if let Some(conn) = link.conn.upgrade().filter(|c| c.is_modern()) {
        headers.extend(routing_headers(&conn, line)?);
    }
    headers.extend(trace_headers(line));
    headers.extend(forwarded);
    Ok(Some(headers))
}

/// A POST that got no answer: the requests it carried fail. While connecting, the handshake
/// reports it; later, the connection is gone when the server is.
async fn send_failed(link: &Arc<Link>, pending: &mut Pending, error: SendError, first: bool) {
    match error {
        SendError::Unauthorized(why) => link.fail_unauthorized(pending, &why),
        SendError::Http(e) if first => {
            link.fail(pending, &format!("cannot reach the server: {}", cause(&e)));
        }
        SendError::Http(e) if e.is_connect() => {
            link.close(&format!("cannot reach the server: {}", cause(&e)));
        }
        SendError::Http(e) => broke(link, pending, &e).await,
    }
}

/// POSTs one line (Streamable HTTP) and hands what comes back to the connection.
async fn post(link: &Arc<Link>, line: &Message, first: bool) -> Posted {
    let mut pending = Pending::of(line);
    let had_session = link.has_session();
    let headers = match post_headers(link, line) {
        Ok(Some(headers)) => headers,
        // Given up before it was sent (cancelled, timed out): it is not sent.
        Ok(None) => return Posted::Done,
        Err(why) => {
            link.fail_with(&mut pending, message::INVALID_PARAMS, &why);
            return Posted::Done;
        }
    };
    let sent = link
        .send(Method::POST, &link.url, &headers, Some(line.text()))
        .await;
    let response = match sent {
        Ok(response) => response,
        Err(error) => {
            send_failed(link, &mut pending, error, first).await;
            return Posted::Done;
        }
    };
    let status = response.status();
    if first {
        if let Some(session) = response.headers().get(SESSION_ID) {
            *lock(&link.session) = Some(session.clone());
        }
    }
    if status == StatusCode::NOT_FOUND && had_session {
        link.close("the server forgot the session (HTTP 404)");
        return Posted::Done;
    }
    if first
        && matches!(
            status,
            StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED
        )
    {
        let body = read_body(response, ERROR_BODY_MAX)
            .await
            .unwrap_or_default();
        // A 2026-07-28-only server refuses the handshake with -32022 naming its versions, or
        // with -32020 for the version header the handshake does not send: the handshake reads
        // that, it is no reason to try the legacy transport.
        if body.contains(&UNSUPPORTED_PROTOCOL_VERSION.to_string())
            || body.contains(&crate::modern::HEADER_MISMATCH.to_string())
        {
            link.deliver(&body, Some(&mut pending));
            if pending.is_done() {
                return Posted::Done;
            }
        }
        return Posted::Fallback(refusal(status, &body));
    }
    if !status.is_success() {
        refused(link, response, &mut pending).await;
        return Posted::Done;
    }
    if pending.is_done() {
        // A notification or a response: 202, nothing to read.
        return Posted::Done;
    }
    if status == StatusCode::ACCEPTED {
        link.fail(
            &mut pending,
            "the server accepted the request (HTTP 202) but sent no response",
        );
        return Posted::Done;
    }
    take_answer(link, response, &mut pending).await;
    Posted::Done
}

/// What a successful POST's response holds, to the connection: an SSE stream (resumed when
/// it breaks after an event id) or one JSON body; the requests it did not answer fail.
async fn take_answer(link: &Arc<Link>, response: reqwest::Response, pending: &mut Pending) {
    let kind = content_type(&response);
    if kind.starts_with(EVENT_STREAM) {
        let mut parser = Parser::new(link.max_message);
        let read = read_stream(link, response, &mut parser, Some(pending)).await;
        if !pending.is_done() {
            match read {
                Err(e) if parser.last_id().is_none() => broke(link, pending, &e).await,
                _ => resume(link, &mut parser, pending).await,
            }
        }
    } else if kind.starts_with(JSON) {
        match read_body(response, link.max_message).await {
            Ok(body) => link.deliver(&body, Some(pending)),
            Err(BodyError::Broke(e)) => broke(link, pending, &e).await,
            Err(BodyError::Invalid(why)) => link.fail(pending, &why),
        }
        link.fail(pending, "the server's answer did not hold the response");
    } else {
        let why = format!("the server answered with content type `{kind}`");
        link.fail(pending, &why);
    }
}

/// The W3C trace context of a request, from its `_meta` (moniker's span when traces are on,
/// else the client's as it came), as HTTP headers too: a server's HTTP middleware reads them
/// there.
fn trace_headers(line: &Message) -> Vec<(HeaderName, HeaderValue)> {
    let Some(trace) = crate::telemetry::parent_of(line) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(2);
    if let Ok(value) = HeaderValue::from_str(&trace.traceparent) {
        out.push((HeaderName::from_static("traceparent"), value));
    }
    if let Some(Ok(value)) = trace.tracestate.as_deref().map(HeaderValue::from_str) {
        out.push((HeaderName::from_static("tracestate"), value));
    }
    out
}

/// The 2026-07-28 routing headers of a request to a modern server: `Mcp-Method`, `Mcp-Name`
/// (the origin name: the gateway has rewritten the body), and for a `tools/call` one
/// `Mcp-Param-<Header>` per `x-mcp-header` parameter of the tool that the call gives. A call
/// whose arguments cannot be read as values (a lone surrogate, a number past f64, nesting
/// past serde's limit) is refused: its headers would be missing while its body says them.
fn routing_headers(
    conn: &Connection,
    line: &Message,
) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
    let mut out = Vec::new();
    let Some(method) = line.method().filter(|_| line.is_request()) else {
        return Ok(out);
    };
    let value = |text: &str| HeaderValue::from_str(&encode_value(text)).ok();
    out.extend(value(method).map(|v| (MCP_METHOD, v)));
    let named = crate::modern::name_field(method).and_then(|f| line.str_of(f));
    if let Some(name) = named {
        out.extend(value(&name).map(|v| (MCP_NAME, v)));
        let wanted = if method == "tools/call" {
            conn.header_params(&name)
        } else {
            Vec::new()
        };
        if !wanted.is_empty() {
            // Parsed only for a tool with such parameters.
            let arguments: serde_json::Value = match line.arguments() {
                None => serde_json::Value::Null,
                Some(text) => message::read(text).ok_or_else(|| {
                    format!(
                        "the arguments of `{name}` cannot be read to fill its Mcp-Param headers"
                    )
                })?,
            };
            for param in wanted {
                let found = param
                    .path
                    .iter()
                    .try_fold(&arguments, |at, key| at.get(key));
                // An absent or null argument has no header.
                let text = match found {
                    None | Some(serde_json::Value::Null) => continue,
                    Some(serde_json::Value::String(text)) => text.clone(),
                    Some(other) => other.to_string(),
                };
                let name = HeaderName::from_bytes(
                    format!("{MCP_PARAM_PREFIX}{}", param.header).as_bytes(),
                );
                if let (Ok(name), Some(v)) = (name, value(&text)) {
                    out.push((name, v));
                }
            }
        }
    }
    Ok(out)
}

/// An HTTP error answer: the responses it holds, if any, else an error for each request.
async fn refused(link: &Link, response: reqwest::Response, pending: &mut Pending) {
    let status = response.status();
    let body = read_body(response, ERROR_BODY_MAX)
        .await
        .unwrap_or_default();
    if pending.is_done() {
        tracing::warn!(server = %link.server, url = %link.shown, %status, "the server refused a message");
        return;
    }
    if body.trim_start().starts_with(['{', '[']) {
        link.deliver(&body, Some(pending));
    }
    // The body goes to the log (and to the reason a server did not start, which only the
    // operator sees); a client is told the status alone: what a remote server writes in an
    // error page (stack traces, internal names) is not moniker's to pass on.
    let why = format!("the server answered {}", refusal(status, &body));
    if pending.initialize.is_some() {
        link.fail(pending, &why);
    } else {
        tracing::warn!(server = %link.server, url = %link.shown, reason = %why, "the server refused a request");
        link.fail(pending, &format!("the server answered HTTP {status}"));
    }
}

/// An HTTP error and the start of its body, on one line.
fn refusal(status: StatusCode, body: &str) -> String {
    let shown: String = one_line(body).chars().take(ERROR_BODY_SHOWN).collect();
    if shown.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {shown}")
    }
}

/// A whole body, at most `max` bytes of UTF-8.
async fn read_body(mut response: reqwest::Response, max: usize) -> Result<String, BodyError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Broke)? {
        if body.len() + chunk.len() > max {
            return Err(BodyError::Invalid(format!(
                "the server's answer is over the size limit ({max} bytes)"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    String::from_utf8(body)
        .map_err(|_| BodyError::Invalid("the server's answer is not UTF-8".to_owned()))
}

enum BodyError {
    /// The connection broke while the body came.
    Broke(reqwest::Error),
    Invalid(String),
}

/// A request's connection broke: when the server cannot be reached any more, the
/// connection is gone; else only the request fails.
async fn broke(link: &Link, pending: &mut Pending, e: &reqwest::Error) {
    if probe(&link.url, &link.shown, PROBE_TIMEOUT).await.is_err() {
        link.close(&format!("cannot reach the server: {}", cause(e)));
    } else {
        let why = format!("the connection to the server broke: {}", cause(e));
        link.fail_with(pending, crate::errors::SERVER_GONE, &why);
    }
}

/// The delay before attempt `attempt` (from 0) to open a stream again.
fn backoff(parser: &Parser, attempt: u32) -> Duration {
    parser.retry().unwrap_or_else(|| {
        BACKOFF_INITIAL
            .saturating_mul(1u32 << attempt.min(16))
            .min(BACKOFF_MAX)
    })
}

/// Opens a GET event stream (from `last_id`, when given).
async fn open_stream(link: &Link, last_id: Option<&str>) -> Result<reqwest::Response, SendError> {
    let mut set = vec![(ACCEPT, HeaderValue::from_static(EVENT_STREAM))];
    if let Some(id) = last_id.and_then(|id| HeaderValue::from_str(id).ok()) {
        set.push((LAST_EVENT_ID, id));
    }
    link.send(Method::GET, &link.url, &set, None).await
}

/// Resumes a POST stream that ended before its responses, from its last event id.
async fn resume(link: &Link, parser: &mut Parser, pending: &mut Pending) {
    let mut attempt = 0;
    while !pending.is_done() && attempt < RESUME_ATTEMPTS {
        let Some(last_id) = parser.last_id().map(str::to_owned) else {
            break;
        };
        tokio::time::sleep(backoff(parser, attempt)).await;
        attempt += 1;
        match open_stream(link, Some(&last_id)).await {
            Ok(response) if response.status().is_success() && is_event_stream(&response) => {
                let _ = read_stream(link, response, parser, Some(pending)).await;
            }
            Ok(response) if response.status() == StatusCode::NOT_FOUND && link.has_session() => {
                link.close("the server forgot the session (HTTP 404)");
                return;
            }
            Ok(response) if response.status() == StatusCode::METHOD_NOT_ALLOWED => break,
            Ok(_) => {}
            Err(e) if e.is_connect() => {
                link.close(&format!("cannot reach the server: {}", e.cause()));
                return;
            }
            Err(SendError::Unauthorized(why)) => {
                link.fail_unauthorized(pending, &why);
                return;
            }
            Err(SendError::Http(_)) => {}
        }
    }
    link.fail(pending, "the server's answer ended before the response");
}

/// The GET stream: what the server sends on its own, for as long as the connection lives.
async fn listen(link: &Link) {
    let mut parser = Parser::new(link.max_message);
    let mut failures: u32 = 0;
    loop {
        match open_stream(link, parser.last_id()).await {
            Err(e) if e.is_connect() => {
                link.close(&format!("cannot reach the server: {}", e.cause()));
                return;
            }
            Err(SendError::Unauthorized(why)) => {
                tracing::warn!(server = %link.server, reason = %why, "the server refused the event stream; its own messages (list changes) will not arrive");
                return;
            }
            Err(e) => {
                failures += 1;
                tracing::debug!(server = %link.server, error = %e.cause(), "cannot open the event stream");
            }
            Ok(response) => {
                let status = response.status();
                if status == StatusCode::METHOD_NOT_ALLOWED {
                    tracing::debug!(server = %link.server, "the server offers no event stream");
                    return;
                }
                if status == StatusCode::NOT_FOUND && link.has_session() {
                    link.close("the server forgot the session (HTTP 404)");
                    return;
                }
                if status.is_success() && is_event_stream(&response) {
                    match read_stream(link, response, &mut parser, None).await {
                        Ok(true) => failures = 0,
                        Ok(false) => failures += 1,
                        Err(e) => {
                            failures = 0;
                            tracing::debug!(server = %link.server, error = %cause(&e), "the event stream broke");
                        }
                    }
                } else {
                    failures += 1;
                    if failures == 1 {
                        tracing::warn!(server = %link.server, url = %link.shown, %status, "the server refused the event stream; trying again");
                    }
                }
            }
        }
        if failures >= LISTEN_ATTEMPTS {
            tracing::warn!(server = %link.server, url = %link.shown, "giving up on the server's event stream; its own messages (list changes) will not arrive");
            return;
        }
        tokio::time::sleep(backoff(&parser, failures)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_become_lines_with_their_bytes() {
        assert_eq!(
            one_line("{\"a\": 1.0e0,\r\n \"b\":\"x\\ny\"}\n"),
            "{\"a\": 1.0e0,   \"b\":\"x\\ny\"}"
        );
        assert_eq!(
            split(r#" [{"id":1, "x":1.50},{"id":2}] "#),
            vec![r#"{"id":1, "x":1.50}"#, r#"{"id":2}"#]
        );
        assert_eq!(split(r#"{"id":1}"#), vec![r#"{"id":1}"#]);
        assert_eq!(split("[not json"), vec!["[not json"]);
    }

    fn sent(line: &str) -> Message {
        crate::message::parse_one(line.to_owned()).expect("a message")
    }

    #[test]
    fn pending_requests_are_read_from_what_is_sent() {
        let p = Pending::of(&sent(
            r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{}}"#,
        ));
        assert_eq!(p.ids, vec!["3"]);
        assert_eq!(p.initialize.as_deref(), Some("3"));
        let p = Pending::of(&sent(
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        ));
        assert!(p.is_done());
        let p = Pending::of(&sent(r#"{"jsonrpc":"2.0","id":"s1","result":{}}"#));
        assert!(p.is_done());
        assert_eq!(
            cancelled_request(&sent(
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12,"reason":"timeout"}}"#
            )),
            Some("12")
        );
        assert_eq!(
            cancelled_request(&sent(
                r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#
            )),
            None
        );
    }
}
