//! What the tasks of one remote connection share (its URL, client, headers, session and
//! protocol version, the calls whose POSTs are running), how what the server sends reaches the
//! connection (each message parsed once), and reading an event stream: used alike by
//! Streamable HTTP (`connect/http`) and the legacy HTTP+SSE transport (`connect/legacy`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use moniker_surface::ServerId;
use reqwest::header::{
    AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, WWW_AUTHENTICATE,
};
use reqwest::{Method, Url};
use serde_json::value::RawValue;
use tokio::sync::{Notify, oneshot, watch};

use super::sse::{Event, Parser};
use super::{Connection, Sink, dispatch};
use crate::auth::{self, Authorizer};
use crate::headers::{EVENT_STREAM, PROTOCOL_VERSION, SESSION_ID};
use crate::message::{self, Message};
use crate::sync::lock;
pub(super) use crate::tls::cause;

/// Challenges answered for one request before its refusal is taken as the answer.
const CHALLENGE_LIMIT: u32 = 3;

/// Why a request was not sent, or not answered.
#[derive(Debug)]
pub(super) enum SendError {
    Http(reqwest::Error),
    /// The server wants an authorization moniker cannot get by itself: what to do.
    Unauthorized(String),
}

impl SendError {
    pub(super) fn is_connect(&self) -> bool {
        matches!(self, Self::Http(e) if e.is_connect())
    }

    /// What happened, in words.
    pub(super) fn cause(&self) -> String {
        match self {
            Self::Http(e) => cause(e),
            Self::Unauthorized(why) => why.clone(),
        }
    }
}

/// What the tasks of one connection share.
pub(super) struct Link {
    pub(super) server: ServerId,
    /// The URL as configured, for messages.
    pub(super) shown: String,
    pub(super) url: Url,
    pub(super) client: reqwest::Client,
    /// The spec's headers (sensitive: never logged).
    pub(super) headers: HeaderMap,
    /// The server's OAuth authorization (none when the user set `Authorization` themselves).
    pub(super) auth: Option<Arc<Authorizer>>,
    pub(super) sink: Arc<dyn Sink>,
    /// Weak: the gateway's dropping the connection is what ends these tasks.
    pub(super) conn: Weak<Connection>,
    pub(super) max_message: usize,
    pub(super) session: Mutex<Option<HeaderValue>>,
    pub(super) version: Mutex<Option<HeaderValue>>,
    pub(super) closed: Mutex<Option<oneshot::Sender<()>>>,
    /// The requests whose POSTs are running (ids as JSON text): notified to end them.
    pub(super) calls: Mutex<HashMap<String, Arc<Notify>>>,
    /// Set when the connection is over: every task ends.
    pub(super) stop: watch::Sender<bool>,
}

impl Link {
    /// A request to `url` with the spec's headers, the session's, and `set` (which, like the
    /// session's, replace any of the spec's of the same name).
    pub(super) fn request(
        &self,
        method: Method,
        url: &Url,
        set: &[(HeaderName, HeaderValue)],
    ) -> reqwest::RequestBuilder {
        let mut headers = self.headers.clone();
        if let Some(session) = lock(&self.session).clone() {
            headers.insert(SESSION_ID, session);
        }
        if let Some(version) = lock(&self.version).clone() {
            headers.insert(PROTOCOL_VERSION, version);
        }
        for (name, value) in set {
            headers.insert(name.clone(), value.clone());
        }
        self.client.request(method, url.clone()).headers(headers)
    }

    /// Sends a request built like [`Link::request`], with the server's access token; a
    /// challenge (401, or 403 `insufficient_scope`) is answered by the authorizer and the
    /// request sent again, when it can be without a person. A request that carries its
    /// caller's own `Authorization` (`auth.exchange`, `auth.per_person`) goes with that alone, and its challenge
    /// is the caller's answer: moniker's own token never stands in for it.
    pub(super) async fn send(
        &self,
        method: Method,
        url: &Url,
        set: &[(HeaderName, HeaderValue)],
        body: Option<&str>,
    ) -> Result<reqwest::Response, SendError> {
        let callers = set.iter().any(|(name, _)| name == AUTHORIZATION);
        let auth = self.auth.as_ref().filter(|_| !callers);
        let mut challenges = 0;
        loop {
            let token = match auth {
                Some(auth) => auth.bearer().await,
                None => None,
            };
            let mut request = self.request(method.clone(), url, set);
            if let Some(token) = &token {
                request = request.header(AUTHORIZATION, token.clone());
            }
            if let Some(body) = body {
                request = request.body(body.to_owned());
            }
            let response = request.send().await.map_err(SendError::Http)?;
            let Some(auth) = auth else {
                return Ok(response);
            };
            let status = response.status().as_u16();
            let header = response
                .headers()
                .get(WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok());
            if !auth::is_challenge(status, header) || challenges == CHALLENGE_LIMIT {
                return Ok(response);
            }
            challenges += 1;
            let header = header.map(str::to_owned);
            tracing::debug!(server = %self.server, status, "the server asks for authorization");
            auth.challenged(token.as_ref(), status, header.as_deref())
                .await
                .map_err(SendError::Unauthorized)?;
        }
    }

    pub(super) fn has_session(&self) -> bool {
        lock(&self.session).is_some()
    }

    /// Resolves when the connection is over.
    pub(super) async fn stopped(&self) {
        let mut rx = self.stop.subscribe();
        let _ = rx.wait_for(|stopped| *stopped).await;
    }

    /// The connection is gone: its pending calls fail now, and the supervisor hears of it.
    pub(super) fn close(&self, why: &str) {
        if self.stop.send_replace(true) {
            return;
        }
        tracing::warn!(server = %self.server, url = %self.shown, reason = why, "connection to the server lost");
        if let Some(conn) = self.conn.upgrade() {
            conn.close();
        }
        if let Some(closed) = lock(&self.closed).take() {
            let _ = closed.send(());
        }
    }

    /// Hands what the server sent (one message or a batch) to the connection, noting the
    /// responses `pending` waits for.
    pub(super) fn deliver(&self, text: &str, mut pending: Option<&mut Pending>) {
        let Some(conn) = self.conn.upgrade() else {
            return;
        };
        for part in split(text) {
            let line = one_line(part);
            if line.is_empty() {
                continue;
            }
            // Parsed here, once: the message then goes to its waiter or the gateway as it is.
            let message = match message::parse_one(line) {
                Ok(message) => message,
                Err(e) if super::answered_unreadable(&conn, &e) => continue,
                Err(e) => {
                    tracing::warn!(server = %self.server, error = %e.message, "server sent something that is not JSON-RPC; ignored");
                    continue;
                }
            };
            // What comes on the answer stream of a POST is about its request (the spec: a
            // server's requests and notifications there relate to it).
            let related = pending
                .as_deref()
                .and_then(|p| p.ids.first())
                .and_then(|id| id.parse().ok());
            if let Some(pending) = pending.as_deref_mut() {
                pending.note(self, &message);
            }
            dispatch(&conn, self.sink.as_ref(), message, related);
        }
    }

    /// Answers the requests `pending` still waits for with an error of moniker's (-32603).
    /// The failure of `initialize` (which the supervisor reports as the reason the server did
    /// not start) names the URL; errors that clients see do not.
    pub(super) fn fail(&self, pending: &mut Pending, why: &str) {
        self.fail_with(pending, message::INTERNAL_ERROR, why);
    }

    /// Like [`Link::fail`], for a request that waits for a person's login: expected, and
    /// said where it matters (the server's status, the command's hint), so only at info level.
    pub(super) fn fail_unauthorized(&self, pending: &mut Pending, why: &str) {
        self.fail_logged(pending, message::INTERNAL_ERROR, why, false);
    }

    pub(super) fn fail_with(&self, pending: &mut Pending, code: i64, why: &str) {
        self.fail_logged(pending, code, why, true);
    }

    fn fail_logged(&self, pending: &mut Pending, code: i64, why: &str, warn: bool) {
        if pending.ids.is_empty() {
            return;
        }
        let named;
        let why = if pending.initialize.is_some() && !why.contains(&self.shown) {
            named = format!("`{}`: {why}", self.shown);
            &named
        } else {
            why
        };
        if warn {
            tracing::warn!(server = %self.server, url = %self.shown, reason = why, "a request to the server failed");
        } else {
            tracing::info!(server = %self.server, url = %self.shown, reason = why, "a request to the server waits for a login");
        }
        let Some(conn) = self.conn.upgrade() else {
            return;
        };
        for id in pending.ids.drain(..) {
            dispatch(
                &conn,
                self.sink.as_ref(),
                Message::error(Some(&id), code, why),
                None,
            );
        }
    }
}

/// The requests of one POST still waiting for their responses (ids as JSON text).
pub(super) struct Pending {
    pub(super) ids: Vec<String>,
    /// The id of `initialize`, whose result tells the protocol version.
    pub(super) initialize: Option<String>,
}

impl Pending {
    pub(super) fn of(sent: &Message) -> Self {
        let id = sent.id().filter(|_| sent.is_request()).map(str::to_owned);
        Self {
            initialize: id.clone().filter(|_| sent.method() == Some("initialize")),
            ids: id.into_iter().collect(),
        }
    }

    pub(super) fn is_done(&self) -> bool {
        self.ids.is_empty()
    }

    /// Notes a message from the server: a response to one of ours is no longer pending.
    fn note(&mut self, link: &Link, message: &Message) {
        let Some(id) = message.id().filter(|_| message.is_response()) else {
            return;
        };
        self.ids.retain(|pending| pending != id);
        if self.initialize.as_deref() == Some(id) {
            self.initialize = None;
            // The server's answer (not moniker's own text) tells the version it speaks.
            let version = message
                .result_text()
                .and_then(message::fields)
                .and_then(|fields| message::str_field(&fields, "protocolVersion"))
                .and_then(|v| HeaderValue::from_str(&v).ok());
            if let Some(version) = version {
                *lock(&link.version) = Some(version);
            }
        }
    }
}

/// The messages of a body: the elements of a batch, or the one message.
pub(super) fn split(text: &str) -> Vec<&str> {
    if text.trim_start().starts_with('[') {
        if let Ok(items) = serde_json::from_str::<Vec<&RawValue>>(text) {
            return items.into_iter().map(RawValue::get).collect();
        }
    }
    vec![text]
}

/// A message as one line: line ends (whitespace between JSON tokens, never inside strings)
/// become spaces.
pub(super) fn one_line(message: &str) -> String {
    message::flatten(message.trim().to_owned())
}

pub(super) fn content_type(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

pub(super) fn is_event_stream(response: &reqwest::Response) -> bool {
    content_type(response).starts_with(EVENT_STREAM)
}

/// Reads an event stream, handing its messages to the connection, until it ends or (with
/// `pending`) every response came. True when it carried anything (keep-alive comments too).
pub(super) async fn read_stream(
    link: &Link,
    mut response: reqwest::Response,
    parser: &mut Parser,
    mut pending: Option<&mut Pending>,
) -> Result<bool, reqwest::Error> {
    parser.restart();
    let mut events = Vec::new();
    let mut any = false;
    loop {
        if pending.as_deref().is_some_and(Pending::is_done) {
            return Ok(any);
        }
        let Some(chunk) = response.chunk().await? else {
            return Ok(any);
        };
        any |= !chunk.is_empty();
        parser.feed(&chunk, &mut events);
        let dropped = parser.take_dropped();
        if dropped > 0 {
            tracing::warn!(server = %link.server, events = dropped, limit = link.max_message, "the server sent a message over the size limit; dropped");
        }
        for event in events.drain(..) {
            on_event(link, &event, pending.as_deref_mut());
        }
    }
}

pub(super) fn on_event(link: &Link, event: &Event, pending: Option<&mut Pending>) {
    if event.event != "message" {
        tracing::debug!(server = %link.server, event = %event.event, "event ignored");
        return;
    }
    if event.data.trim().is_empty() {
        // A priming event: an id to resume from, no message.
        return;
    }
    link.deliver(&event.data, pending);
}
