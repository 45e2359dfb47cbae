//! The table of HTTP sessions: opening one (`initialize`, within the caps on sessions), finding
//! the one a request names, ending them (DELETE, idleness, a reload that revokes their token).

use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::response::Response;
use tokio::sync::mpsc;

use super::answer::{Mode, answer_of};
use super::identity::{client_name, principal};
use super::outbox::{Activity, Outbox};
use super::stream::{sse, sse_once};
use super::{
    Client, DEFAULT_SESSIONS_PER_TOKEN, HttpSession, HttpSettings, KEEP_ALIVE, MAX_SESSIONS,
    Reject, Shared, header_str, short,
};
use crate::gateway::Gateway;
use crate::headers::{LAST_EVENT_ID, PROTOCOL_VERSION, SESSION_ID};
use crate::message::{Incoming, Message};
use crate::serve::checks::{self, Accept, Auth};
use crate::serve::respond::{failure, json, with_status};
use crate::session::Session;
use crate::sync::lock;

/// Starts the [`Session`] behind a new HTTP session: bound for good to the toolset of the
/// token that created it (its `toolset`), else an ordinary session (which starts with the
/// gateway's default toolset, if any). A client with a token or a person's identity is its
/// `principal`: what a session starts (a task) is the principal's, and counts in the
/// principal's budget with what its other sessions start. Without either (an open endpoint),
/// each session is a principal of its own: nothing tells two clients apart but their sessions.
pub(super) fn open_session(
    gateway: Arc<Gateway>,
    out: mpsc::UnboundedSender<Message>,
    toolset: Option<&str>,
    principal: Option<&str>,
) -> Arc<Session> {
    match (principal, toolset) {
        (Some(principal), toolset) => Session::of_principal(
            gateway,
            out,
            toolset.map(str::to_owned),
            principal.to_owned(),
        ),
        (None, Some(toolset)) => Session::bound(gateway, out, toolset.to_owned()),
        (None, None) => Session::new(gateway, out),
    }
}

/// `MCP-Protocol-Version`, when present, must be a version moniker speaks.
pub(super) fn version_ok(headers: &HeaderMap) -> Result<(), Reject> {
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
pub(super) fn session_of(
    shared: &Shared,
    headers: &HeaderMap,
    client: &Client,
) -> Result<(String, Arc<HttpSession>), Reject> {
    let Client { auth, toolset } = client;
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
    if session.auth != *auth {
        tracing::warn!(
            session = short(id),
            "HTTP request refused: the session belongs to another token"
        );
        return Err(Reject::new(
            StatusCode::FORBIDDEN,
            "Forbidden: the session was created with another token",
        ));
    }
    if session.toolset != *toolset {
        if let Auth::Token { token, .. } = auth {
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
pub(super) fn end(shared: &Shared, id: &str, why: &str) {
    if let Some(http) = lock(&shared.sessions).remove(id) {
        http.outbox.close();
        tracing::info!(session = short(id), "HTTP session ended: {why}");
    }
}

/// After new HTTP settings: the sessions whose token is gone, or bound now to another toolset
/// than when they began, end (a token's binding is a boundary, not a default for new sessions
/// only); so do the tokenless sessions once tokens are required.
pub(super) fn revoke(shared: &Shared, settings: &HttpSettings) {
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
                        if crate::identity::toolset_of(now, &identity.claims)
                            != identity.toolset =>
                    {
                        "its identity is now bound to another toolset"
                    }
                    Some(_) => return None,
                },
                Auth::Token { token, .. } => {
                    match checks::find_token(token.token.as_bytes(), &settings.tokens)
                        .map(|(_, now)| now)
                    {
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

/// Ends the sessions new HTTP settings no longer allow, each time the settings change.
pub(super) async fn revoke_on_reload(shared: Weak<Shared>) {
    let Some(mut changes) = shared.upgrade().map(|s| s.gateway.control.http_changes()) else {
        return;
    };
    while changes.changed().await.is_ok() {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let settings = shared.gateway.control.http();
        revoke(&shared, &settings);
    }
}

/// Drops the sessions that went unused for `idle`.
pub(super) async fn sweep(shared: Weak<Shared>, idle: Duration) {
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

/// `initialize` without a session: a new session, whose id goes back in `Mcp-Session-Id` when
/// the answer is a success.
pub(super) async fn initialize(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    incoming: Incoming,
    client: Client,
    mode: Mode,
) -> Response {
    if let Err(reject) = version_ok(headers) {
        return reject.response();
    }
    let Client { auth, toolset } = client;
    let who = principal(&auth);
    let _reserved = match room_for_session(shared, &who) {
        Ok(reserved) => reserved,
        Err(reject) => return reject.response(),
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
    let principal = (!matches!(auth, Auth::Open)).then_some(who.as_str());
    let session = open_session(shared.gateway.clone(), tx, toolset.as_deref(), principal);
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
    let id = new_session_id();
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
pub(super) fn room_for_session<'s>(shared: &'s Shared, who: &str) -> Result<Opening<'s>, Reject> {
    let per_token = shared
        .gateway
        .control
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
pub(super) struct Opening<'s> {
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

/// A new session id: 32 random bytes, in hex.
pub(super) fn new_session_id() -> String {
    crate::files::hex(&crate::random::bytes::<32>())
}

/// DELETE: ends the session.
pub(super) fn delete(shared: &Arc<Shared>, headers: &HeaderMap, client: &Client) -> Response {
    if !headers.contains_key(SESSION_ID) {
        return without_session();
    }
    let (id, _) = match session_of(shared, headers, client) {
        Ok(found) => found,
        Err(reject) => return reject.response(),
    };
    end(shared, &id, "by the client");
    with_status(StatusCode::NO_CONTENT, Body::empty())
}

/// GET: the session's stream of unsolicited messages.
pub(super) fn get(shared: &Arc<Shared>, headers: &HeaderMap, client: &Client) -> Response {
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
    let (id, http) = match session_of(shared, headers, client) {
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

/// GET or DELETE without a session: there is nothing to stream or end (405, as 2026-07-28
/// servers answer).
pub(super) fn without_session() -> Response {
    let mut response = failure(
        StatusCode::METHOD_NOT_ALLOWED,
        "Method Not Allowed: GET and DELETE need the Mcp-Session-Id of a 2025 session",
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    response
}
