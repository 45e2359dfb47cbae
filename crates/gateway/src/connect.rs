//! How moniker reaches servers: a request/response multiplexer over one transport (a child's
//! pipes, Streamable HTTP, or the legacy HTTP+SSE transport), the MCP handshake, and listing.

pub mod http;
mod legacy;
mod link;
mod login;
mod sse;
pub mod stdio;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use moniker_surface::{Listing, ServerId};
use reqwest::header::{AUTHORIZATION, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::oneshot;

pub use self::login::{LOGIN_LIMIT, LoggedIn, login};
use crate::auth::Store;
use crate::budget;
use crate::message::{self, Edit, Field, Message, Params};
use crate::modern::MODERN_VERSION;
use crate::modern::server::HeaderParam;
use crate::sync::lock;

/// How to reach one server: the config's own type.
pub use moniker_config::Transport as ServerSpec;

/// A started connection, what fires when it is gone, and what to end with it.
pub struct Started {
    pub conn: Arc<Connection>,
    pub closed: tokio::sync::oneshot::Receiver<()>,
    /// The process group of a child server.
    pub pgid: Option<u32>,
    pub child: Option<tokio::process::Child>,
    /// The last lines a child server wrote to its stderr, complete once the task ends.
    pub stderr: Option<tokio::task::JoinHandle<Vec<String>>>,
}

impl From<stdio::Process> for Started {
    fn from(process: stdio::Process) -> Self {
        Self {
            conn: process.conn,
            closed: process.closed,
            pgid: process.pgid,
            child: Some(process.child),
            stderr: Some(process.stderr),
        }
    }
}

/// How a stdio server is started: through the guard (the moniker binary that runs
/// `__guard`), within its sandbox.
#[derive(Clone, Copy, Default)]
pub struct Launch<'a> {
    pub guard: Option<&'a std::path::Path>,
    pub sandbox: Option<&'a moniker_config::Sandbox>,
    /// A person's secrets for their own instance (`per_person`): in its environment, but not
    /// among what its sandbox reads as paths it may use (a person chooses their values).
    pub secrets: Option<&'a std::collections::BTreeMap<String, String>>,
}

/// Starts (or connects to) a server. The handshake is the caller's.
pub async fn start(
    server: &ServerId,
    spec: &ServerSpec,
    launch: Launch<'_>,
    sink: Arc<dyn Sink>,
    max_message: usize,
    timeout: Duration,
) -> Result<Started, String> {
    match spec {
        ServerSpec::Stdio { command, .. } => {
            match stdio::spawn(server.clone(), spec, launch, sink, max_message) {
                Ok(process) => Ok(Started::from(process)),
                Err(e) => Err(stdio::cannot_run(command, &e)),
            }
        }
        ServerSpec::Http {
            url,
            headers,
            tls,
            auth,
            forward,
        } => {
            let store = Store::default_dir().map(Store::new);
            let remote = http::Remote {
                url,
                headers,
                tls,
                auth,
                store: store.as_ref(),
            };
            let started = http::connect(server.clone(), remote, sink, max_message, timeout).await?;
            if !forward.is_empty() {
                let _ = started.conn.forwarding.rules.set(forward.clone());
            }
            Ok(started)
        }
    }
}

/// How long moniker waits after the resources it follows on a modern server change before it
/// listens again, so that changes that come together cost one new stream.
const REFOLLOW_PAUSE: Duration = Duration::from_millis(100);
/// Distinct resources moniker follows on one modern server, at most.
const MAX_FOLLOWS: usize = 4096;

/// What a server that acts as each caller needs of `caller`: what its verified access token
/// for moniker said.
pub(crate) fn on_behalf(caller: Option<&crate::identity::Caller>) -> crate::auth::OnBehalf<'_> {
    let identity = caller.and_then(|c| c.identity.as_deref());
    crate::auth::OnBehalf {
        access_token: caller.and_then(|c| c.access_token.as_deref()),
        person: identity.map(|i| (i.issuer.as_str(), i.subject.as_str())),
        expires: identity
            .and_then(|i| i.claims.get("exp"))
            .and_then(serde_json::Value::as_u64),
    }
}

/// The protocol version moniker asks servers for. Servers may answer another; moniker accepts
/// what they answer.
pub const PINNED_PROTOCOL_VERSION: &str = "2025-06-18";

/// Receives what a server sends on its own: requests to the client and notifications.
pub trait Sink: Send + Sync + 'static {
    /// `related`: moniker's id of the request on `conn` the message came with (an HTTP
    /// server's answer stream), when the transport tells.
    fn server_message(&self, conn: &Arc<Connection>, message: Message, related: Option<u64>);

    /// A line a sandboxed server wrote to its stderr that holds a refusal's words
    /// ([`crate::sandbox::mentions_a_refusal`]): noted where its server's state is kept.
    fn server_said(&self, _server: &ServerId, _line: &str) {}
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("server is not connected")]
    Gone,
    #[error("server did not answer in time")]
    Timeout,
    /// The server has not read this many bytes sent to it.
    #[error("server has not read {0} bytes sent to it")]
    Behind(usize),
    /// A `forward` rule's value cannot be sent as a header (the header's name): the call is
    /// not sent without it.
    #[error("the header `{0}` that `forward` makes cannot be sent")]
    Unforwardable(String),
}

/// What the server said of itself in `initialize`.
#[derive(Debug, Clone, Default)]
pub struct InitInfo {
    pub protocol_version: String,
    /// The server's capabilities object, raw.
    pub capabilities: Option<Box<RawValue>>,
    pub has_tools: bool,
    pub has_prompts: bool,
    pub has_resources: bool,
    pub has_logging: bool,
    pub has_completions: bool,
    pub resources_subscribe: bool,
    /// It runs tools as tasks (`tasks`: `tasks/get`, `tasks/result`, ...).
    pub has_tasks: bool,
    /// `serverInfo.version`, when it is a string (at most [`MAX_VERSION`] bytes of it).
    pub server_version: Option<String>,
}

/// What is kept of a server's version: it is the server's text, recorded in the lock.
pub const MAX_VERSION: usize = 128;

/// One live connection to a server: writes go to the transport (a stdio server's stdin, in
/// place when nothing waits; an HTTP server's writer), and responses find their waiter by id.
pub struct Connection {
    pub server: ServerId,
    out: crate::framing::To,
    /// What a stdio server has not read of what was written to it (an HTTP server's requests
    /// each go on their own).
    backlog: Option<crate::framing::Backlog>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Message>>>,
    next_id: AtomicU64,
    closed: AtomicBool,
    init: OnceLock<InitInfo>,
    /// Its 2026-07-28 state: the envelope, header parameters, cache hint, listen.
    pub(crate) era: crate::modern::server::ServerEra,
    /// The headers made from each caller (an HTTP server's `forward`).
    pub(crate) forwarding: Forwarding,
    /// Relists after the server's `list_changed` notes: 0 none running, 1 one running, 2 one
    /// running and a note came meanwhile (one more follows it). A storm of notes costs one
    /// relist per [`budget::RELIST_GAP`], not one per note.
    pub(crate) relisting: std::sync::atomic::AtomicU8,
    /// What the log says of the server less often when it repeats.
    pub(crate) said: Said,
}

/// The headers an HTTP server's `forward` makes from each caller, and the caller's own token
/// for it (`auth.exchange`).
#[derive(Default)]
pub(crate) struct Forwarding {
    /// Its rules, set once when it connects; unset for the servers without any (every request
    /// then skips the rest).
    pub(crate) rules: OnceLock<indexmap::IndexMap<String, moniker_config::Forward>>,
    /// Its token exchange, set once when it connects: each caller's request goes with the
    /// caller's own token for it.
    pub(crate) exchange: OnceLock<crate::auth::exchange::Exchanger>,
    /// Its people's own sign-ins (`auth.per_person`), set once when it connects.
    pub(crate) personal: OnceLock<crate::auth::personal::Personal>,
    /// It is one person's instance (`per_person`): what it sends reaches only the client
    /// whose call runs on it, never another by a guess.
    pub(crate) one_persons: std::sync::atomic::AtomicBool,
    /// The headers of the requests not sent yet, by moniker's id.
    pending: Mutex<HashMap<u64, Vec<(HeaderName, HeaderValue)>>>,
}

impl Forwarding {
    /// Whether requests take headers of their callers.
    fn active(&self) -> bool {
        self.rules.get().is_some() || self.exchange.get().is_some() || self.personal.get().is_some()
    }
}

/// Counts of what a server did again and again, for the log to say the first times, then few
/// ([`worth_saying`]).
#[derive(Default)]
pub(crate) struct Said {
    /// Notes and answers not sent because the server was too far behind.
    refused: AtomicU64,
    /// Lines the server wrote that are not JSON-RPC.
    garbage: AtomicU64,
    /// Relists that failed.
    pub(crate) failed_relists: AtomicU64,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl Connection {
    pub(crate) fn new(
        server: ServerId,
        out: impl Into<crate::framing::To>,
        backlog: Option<crate::framing::Backlog>,
    ) -> Self {
        Self {
            server,
            out: out.into(),
            backlog,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            init: OnceLock::new(),
            era: crate::modern::server::ServerEra::default(),
            forwarding: Forwarding::default(),
            relisting: std::sync::atomic::AtomicU8::new(0),
            said: Said::default(),
        }
    }

    /// How long its last listing may be cached, as the server said (`None`: it did not).
    pub fn list_ttl(&self) -> Option<u64> {
        *lock(&self.era.list_ttl)
    }

    /// Keeps a `subscriptions/listen` open on a modern server for as long as the connection
    /// lives: opened again when the server ends it or the stream breaks (with backoff), and
    /// when the resources moniker follows change. Its list changes and resource updates reach
    /// the sink as a 2025 server's notifications would. Nothing is replayed across streams, so
    /// `reopened` runs each time a stream other than the first opens (to list again). Only a
    /// server that does not know the method is given up on.
    pub async fn listen(self: Arc<Self>, reopened: impl Fn() + Send + 'static) {
        let mut first = true;
        let mut backoff = Duration::from_secs(1);
        while !self.is_closed() {
            let filter = format!(
                r#"{{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":[{}]}}"#,
                self.followed_uris()
            );
            let filter = Params::object(&[("notifications", &filter)]);
            let Ok((id, rx)) = self.start("subscriptions/listen", Some(&filter)) else {
                return;
            };
            *lock(&self.era.listening) = Some(id);
            if !std::mem::replace(&mut first, false) {
                reopened();
            }
            let ended = tokio::select! {
                ended = rx => ended,
                () = self.era.refollow.notified() => {
                    self.end_for_refollow(id).await;
                    continue;
                }
            };
            *lock(&self.era.listening) = None;
            match ended {
                Ok(response) if response.error_text().is_some() => {
                    let error = response.error_text().unwrap_or_default();
                    if method_not_found(error) {
                        tracing::info!(server = %self.server, error, "the server has no subscriptions/listen: its list changes are not heard");
                        return;
                    }
                    tracing::debug!(server = %self.server, error, "subscriptions/listen broke: listening again");
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                }
                Ok(_) => {
                    tracing::debug!(server = %self.server, "the server ended subscriptions/listen: listening again");
                    backoff = Duration::from_secs(1);
                }
                Err(_) => return,
            }
            tokio::time::sleep(backoff).await;
        }
    }

    /// The resources followed, as the items of a JSON list of strings.
    fn followed_uris(&self) -> String {
        let uris: Vec<String> = lock(&self.era.follows)
            .keys()
            .map(|u| message::string(u))
            .collect();
        uris.join(",")
    }

    /// Ends listen `id` because the followed resources changed: a new stream follows them.
    /// Changes that come together (many clients subscribing) make one new stream, not one
    /// each: each names every URI followed.
    async fn end_for_refollow(&self, id: u64) {
        *lock(&self.era.listening) = None;
        self.cancel(id, "the followed resources changed");
        tokio::time::sleep(REFOLLOW_PAUSE).await;
    }

    /// Follows (or stops following) resource `uri` on a modern server, for one more (or one
    /// fewer) of moniker's clients: the server's listen is opened again when the set changes.
    pub fn follow(&self, uri: &str, on: bool) -> bool {
        let changed = {
            let mut follows = lock(&self.era.follows);
            if on && follows.len() >= MAX_FOLLOWS && !follows.contains_key(uri) {
                tracing::warn!(server = %self.server, max = MAX_FOLLOWS, "moniker follows as many resources of this server as it may: a new one is not followed");
                return false;
            }
            let count = follows.entry(uri.to_owned()).or_insert(0);
            if on {
                *count += 1;
                *count == 1
            } else {
                *count = count.saturating_sub(1);
                let gone = *count == 0;
                if gone {
                    follows.remove(uri);
                }
                gone
            }
        };
        if changed {
            self.era.refollow.notify_one();
        }
        true
    }

    /// `resources/subscribe` (or `unsubscribe`) of `uri`, moniker's own request: the server's
    /// response.
    pub async fn subscribe(
        &self,
        uri: &str,
        on: bool,
        timeout: Duration,
    ) -> Result<Message, CallError> {
        let method = if on {
            "resources/subscribe"
        } else {
            "resources/unsubscribe"
        };
        let params = Params::object(&[("uri", &message::string(uri))]);
        self.call(method, Some(&params), timeout).await
    }

    /// From now on the server is spoken to in 2026-07-28: set before the handshake.
    pub fn speak_modern(&self) {
        self.era.speak_modern();
    }

    pub fn is_modern(&self) -> bool {
        self.era.is_modern()
    }

    /// The `x-mcp-header` parameters of a modern server's tool.
    pub(crate) fn header_params(&self, tool: &str) -> Vec<HeaderParam> {
        lock(&self.era.header_params)
            .get(tool)
            .cloned()
            .unwrap_or_default()
    }

    pub fn info(&self) -> InitInfo {
        self.init.get().cloned().unwrap_or_default()
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Sends a notification or a response; not when the server has not read
    /// [`budget::SERVER_BACKLOG`] of what was sent to it (a client's notes without end, to a
    /// server that reads slowly or not at all, are not held for it; nor are requests,
    /// [`Connection::start_for`]).
    pub fn send(&self, message: Message) -> Result<(), CallError> {
        if self.is_closed() {
            return Err(CallError::Gone);
        }
        self.not_behind(message.method().unwrap_or("(an answer)"))?;
        self.out.send(message).map_err(|_| CallError::Gone)
    }

    /// `Err` when the server has not read [`budget::SERVER_BACKLOG`] of what was sent to it:
    /// nothing more is queued for it (`what`, a method, is said at `warn`, the first times).
    fn not_behind(&self, what: &str) -> Result<(), CallError> {
        let Some(held) = self.behind() else {
            return Ok(());
        };
        if let Some(n) = worth_saying(&self.said.refused) {
            tracing::warn!(server = %self.server, bytes = held, refused = n, what, "the server has not read what was sent to it; nothing more is sent to it until it does (said for the first 10 times, then every 1,000th)");
        }
        Err(CallError::Behind(held))
    }

    /// What the server has not read of what was sent to it, when that is past
    /// [`budget::SERVER_BACKLOG`].
    fn behind(&self) -> Option<usize> {
        self.backlog
            .as_ref()
            .map(crate::framing::Backlog::held)
            .filter(|held| *held > budget::SERVER_BACKLOG)
    }

    /// Sends a request; the receiver gets the server's response.
    pub fn start(
        &self,
        method: &str,
        params: Option<&Params>,
    ) -> Result<(u64, oneshot::Receiver<Message>), CallError> {
        self.start_for(method, params, None, None)
    }

    /// The caller's own token for this server when it takes them (`auth.exchange`,
    /// `auth.per_person`): `Ok(None)` for a server that does not; `Err` when there is none (a
    /// sign-in for the caller to make, or why not).
    pub(crate) async fn upstream_for(
        &self,
        caller: Option<&crate::identity::Caller>,
    ) -> Result<Option<crate::auth::exchange::Upstream>, crate::auth::personal::Unsigned> {
        let caller = on_behalf(caller);
        // Boxed: their futures are kilobytes, and every call's task would carry their size
        // (copied as it is spawned) though most servers take neither.
        if let Some(exchanger) = self.forwarding.exchange.get() {
            return Box::pin(exchanger.upstream_for(caller))
                .await
                .map(Some)
                .map_err(crate::auth::personal::Unsigned::Refused);
        }
        match self.forwarding.personal.get() {
            Some(personal) => Box::pin(personal.upstream_for(caller)).await.map(Some),
            None => Ok(None),
        }
    }

    /// Who is called as themselves here now (`auth.exchange`: an exchanged token kept;
    /// `auth.per_person`: signed in): how, who, and the seconds their token has left.
    pub(crate) fn people(&self) -> Vec<(&'static str, String, Option<u64>)> {
        let mut out = Vec::new();
        if let Some(exchanger) = self.forwarding.exchange.get() {
            out.extend(
                exchanger
                    .people()
                    .into_iter()
                    .map(|(who, left)| ("token exchange", who, Some(left))),
            );
        }
        if let Some(personal) = self.forwarding.personal.get() {
            let now = crate::auth::now();
            out.extend(personal.signed_in().into_iter().map(|(who, expires)| {
                ("own sign-in", who, expires.map(|at| at.saturating_sub(now)))
            }));
        }
        out.sort_by(|a, b| a.1.cmp(&b.1));
        out
    }

    /// Stops calling `person` as themselves with what is kept for them (an admin's word):
    /// they sign in again, or their token is exchanged again. How many were dropped.
    pub(crate) fn forget_person(&self, person: &str) -> usize {
        let forwarding = &self.forwarding;
        let exchanged = forwarding.exchange.get().map_or(0, |e| e.forget(person));
        let signed_in = forwarding
            .personal
            .get()
            .map_or(0, |p| p.forget_named(person));
        exchanged + signed_in
    }

    /// [`Self::start`] of a client's request: an HTTP server's `forward` headers are made
    /// from `caller` and go with it, and the caller's own token for it (`upstream`).
    pub(crate) fn start_for(
        &self,
        method: &str,
        params: Option<&Params>,
        caller: Option<&crate::identity::Caller>,
        upstream: Option<&crate::auth::exchange::Upstream>,
    ) -> Result<(u64, oneshot::Receiver<Message>), CallError> {
        self.not_behind(method)?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut headers: Vec<(HeaderName, HeaderValue)> =
            match (self.forwarding.rules.get(), caller) {
                (Some(rules), Some(caller)) => caller
                    .headers_for(rules)
                    .map_err(CallError::Unforwardable)?
                    .into_iter()
                    .filter_map(|(name, value)| sendable(&name, &value))
                    .collect(),
                _ => Vec::new(),
            };
        if let Some(upstream) = upstream {
            headers.push((AUTHORIZATION, upstream.authorization.clone()));
        }
        if !headers.is_empty() {
            lock(&self.forwarding.pending).insert(id, headers);
        }
        let rewritten = self.for_era(params);
        let params = rewritten.as_ref().or(params);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        // Checked after registering, so that `close` either sees this waiter or we see it
        // closed: no waiter is left behind.
        if self.is_closed()
            || self
                .out
                .send(Message::outgoing(&id.to_string(), method, params))
                .is_err()
        {
            lock(&self.pending).remove(&id);
            lock(&self.forwarding.pending).remove(&id);
            return Err(CallError::Gone);
        }
        Ok((id, rx))
    }

    /// `params` as this server's era takes them, when that changes them: the envelope to a
    /// modern server, none to a 2025 one.
    fn for_era(&self, params: Option<&Params>) -> Option<Params> {
        match self.is_modern() {
            true => Some(modern_envelope(params)),
            false => params.and_then(crate::modern::without_envelope),
        }
    }

    /// The forwarded headers of the request `line` (moniker's), taken as it is sent; or
    /// `None` for a request no one waits for any more ([`Self::awaits`]): it is not to be sent.
    pub(crate) fn forwarded(&self, line: &Message) -> Option<Vec<(HeaderName, HeaderValue)>> {
        if let Some(id) = line.our_id().filter(|_| line.is_request()) {
            if !self.awaits(id) {
                lock(&self.forwarding.pending).remove(&id);
                return None;
            }
        }
        if !self.forwarding.active() {
            return Some(Vec::new());
        }
        let Some(id) = line.our_id().filter(|_| line.is_request()) else {
            return Some(Vec::new());
        };
        Some(
            lock(&self.forwarding.pending)
                .remove(&id)
                .unwrap_or_default(),
        )
    }

    /// Whether moniker still waits for the answer to its request `id`: one given up (timed
    /// out, cancelled) before it was sent is not sent at all; its caller's headers are gone
    /// with its waiter, and it must not go without them.
    pub(crate) fn awaits(&self, id: u64) -> bool {
        lock(&self.pending).contains_key(&id)
    }

    /// Stops waiting for a request (timed out or cancelled).
    pub fn forget(&self, id: u64) {
        lock(&self.pending).remove(&id);
        if self.forwarding.active() {
            lock(&self.forwarding.pending).remove(&id);
        }
    }

    /// Stops waiting for a request and tells the server so.
    pub fn cancel(&self, id: u64, reason: &str) {
        self.forget(id);
        let _ = self.send(Message::cancellation(id, reason));
    }

    /// A request and its response, within `timeout`.
    pub async fn call(
        &self,
        method: &str,
        params: Option<&Params>,
        timeout: Duration,
    ) -> Result<Message, CallError> {
        let (id, rx) = self.start(method, params)?;
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(_)) => Err(CallError::Gone),
            Err(_) => {
                self.cancel(id, "timeout");
                Err(CallError::Timeout)
            }
        }
    }

    /// Hands a response to its waiter; false when nobody waits for that id.
    pub(crate) fn deliver(&self, id: u64, response: Message) -> bool {
        match lock(&self.pending).remove(&id) {
            Some(tx) => tx.send(response).is_ok(),
            None => false,
        }
    }

    /// Marks the connection closed and fails every waiting request at once.
    /// Requests of moniker's waiting for the server's answer.
    pub fn in_flight(&self) -> usize {
        let listening = self.era.listens();
        lock(&self.pending)
            .len()
            .saturating_sub(usize::from(listening))
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        lock(&self.pending).clear();
    }
}

/// A forwarded header as it is sent: `None` when its name or value cannot be sent.
fn sendable(name: &str, value: &str) -> Option<(HeaderName, HeaderValue)> {
    Some((
        HeaderName::from_bytes(name.as_bytes()).ok()?,
        HeaderValue::from_str(value).ok()?,
    ))
}

/// Whether a JSON-RPC error object is "method not found".
fn method_not_found(error: &str) -> bool {
    message::fields(error)
        .and_then(|f| {
            f.get("code")
                .map(|c| c.get() == message::METHOD_NOT_FOUND.to_string())
        })
        .unwrap_or(false)
}

/// Routes one message from a server: responses to their waiters, the rest to the sink.
/// `related`: the request of moniker's whose answer stream the message came on, if any.
pub(crate) fn dispatch(
    conn: &Arc<Connection>,
    sink: &dyn Sink,
    message: Message,
    related: Option<u64>,
) {
    if message.is_response() {
        let id = message.our_id();
        if !id.is_some_and(|id| conn.deliver(id, message)) {
            tracing::debug!(server = %conn.server, ?id, "response to no pending request");
        }
    } else {
        sink.server_message(conn, message, related);
    }
}

/// Whether the next time of something a server can repeat without end (counted in `count`)
/// is said at `warn`: the first 10 times, then every 1,000th; its number when it is.
pub(crate) fn worth_saying(count: &AtomicU64) -> Option<u64> {
    let n = count.fetch_add(1, Ordering::Relaxed) + 1;
    (n <= 10 || n % 1_000 == 0).then_some(n)
}

/// An answer of the server's that moniker cannot read (a lone surrogate in it) still answers
/// its request, with moniker's error (-32603): its caller does not wait for the time-out.
/// Whether it did.
pub(crate) fn answered_unreadable(conn: &Connection, invalid: &message::Invalid) -> bool {
    let Some(id) = invalid.id.as_deref().and_then(|id| id.parse::<u64>().ok()) else {
        return false;
    };
    let why = format!("the server's answer could not be read: {}", invalid.message);
    let refusal = Message::error(invalid.id.as_deref(), message::INTERNAL_ERROR, &why);
    let answered = conn.deliver(id, refusal);
    if answered {
        tracing::warn!(server = %conn.server, error = %invalid.message, "the server's answer was refused");
    }
    answered
}

/// Parses one line from a server, once, and routes it.
pub(crate) fn dispatch_line(conn: &Arc<Connection>, sink: &dyn Sink, line: String) {
    match message::parse(line) {
        Ok(message::Incoming::One(message)) => dispatch(conn, sink, message, None),
        Ok(message::Incoming::Batch(_)) => {
            tracing::warn!(server = %conn.server, "server sent a batch; moniker does not take batches from servers")
        }
        Err(e) if answered_unreadable(conn, &e) => {}
        Err(e) => {
            // Said at `warn` the first times, then once every thousand: a server that writes
            // garbage without end does not flood the log.
            if let Some(n) = worth_saying(&conn.said.garbage) {
                tracing::warn!(server = %conn.server, error = %e.message, lines = n, "server wrote something that is not JSON-RPC; ignored (said for the first 10 such lines, then every 1,000th)")
            }
        }
    }
}

/// The result of a response, or its error object as text.
pub fn outcome(response: &Message) -> Result<&str, String> {
    match (response.result_text(), response.error_text()) {
        (Some(result), _) => Ok(result),
        (None, Some(error)) => Err(error.to_owned()),
        (None, None) => Err("not a response".to_owned()),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("{0}")]
    Call(#[from] CallError),
    #[error("`{method}` failed: {error}")]
    Refused { method: &'static str, error: String },
    /// `initialize` was refused for 2026-07-28: the server is to be started again and spoken
    /// to in that (a stdio server keeps the era of its first message).
    #[error("the server speaks only 2026-07-28")]
    SpeaksModern,
    /// A listing past moniker's budget for one server ([`budget`]): refused page by page.
    #[error("`{method}`: the listing is over moniker's budget for one server: {what}")]
    OverBudget { method: &'static str, what: String },
}

#[derive(Deserialize)]
struct InitResult<'a> {
    #[serde(rename = "protocolVersion", default)]
    protocol_version: String,
    #[serde(borrow, default)]
    capabilities: Option<&'a RawValue>,
    #[serde(rename = "serverInfo", default)]
    server_info: Option<serde_json::Value>,
}

/// `serverInfo.version` when it is a string, cut to [`MAX_VERSION`] bytes.
fn version_of(server_info: Option<&serde_json::Value>) -> Option<String> {
    let text = server_info?.get("version")?.as_str()?;
    Some(message::at_most(text, MAX_VERSION).to_owned())
}

#[derive(Deserialize, Default)]
struct Caps {
    tools: Option<serde::de::IgnoredAny>,
    prompts: Option<serde::de::IgnoredAny>,
    resources: Option<ResourceCaps>,
    logging: Option<serde::de::IgnoredAny>,
    completions: Option<serde::de::IgnoredAny>,
    tasks: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize, Default)]
struct ResourceCaps {
    #[serde(default)]
    subscribe: bool,
}

/// The handshake, then the listing of tools and prompts: `initialize` and
/// `notifications/initialized`, or `server/discover` for a server that speaks 2026-07-28.
pub async fn handshake(
    conn: &Arc<Connection>,
    timeout: Duration,
) -> Result<Listing, HandshakeError> {
    if conn.is_modern() {
        return discover(conn, timeout).await;
    }
    let params = initialize_params();
    let response = conn.call("initialize", Some(&params), timeout).await?;
    if speaks_only_modern(&response) {
        return Err(HandshakeError::SpeaksModern);
    }
    let init: InitResult<'_> = read_result("initialize", &response)?;
    let mut info = info_of(init.protocol_version, init.capabilities);
    info.server_version = version_of(init.server_info.as_ref());
    let _ = conn.init.set(info.clone());
    conn.send(Message::notification("notifications/initialized", None))?;
    list(conn, &info, timeout).await
}

/// How moniker names itself to servers (`clientInfo`).
const CLIENT_INFO: &str = concat!(
    r#"{"name":"moniker","version":""#,
    env!("CARGO_PKG_VERSION"),
    r#""}"#
);

/// What moniker can do as a client of servers (the `capabilities` of its `initialize`).
const CLIENT_CAPABILITIES: &str =
    r#"{"roots":{"listChanged":true},"sampling":{},"elicitation":{}}"#;

/// The params of moniker's `initialize`, in the version it asks for.
fn initialize_params() -> Params {
    Params::object(&[
        ("protocolVersion", &message::string(PINNED_PROTOCOL_VERSION)),
        ("capabilities", CLIENT_CAPABILITIES),
        ("clientInfo", CLIENT_INFO),
    ])
}

/// The result of `method`'s `response`, read as a `T`: `Refused` when it is an error or not
/// a `T`.
fn read_result<'a, T: Deserialize<'a>>(
    method: &'static str,
    response: &'a Message,
) -> Result<T, HandshakeError> {
    let refused = |error| HandshakeError::Refused { method, error };
    let result = outcome(response).map_err(refused)?;
    serde_json::from_str(result).map_err(|e| refused(e.to_string()))
}

/// `initialize` refused by a server of the 2026-07-28 era only: -32022 with 2026-07-28 among its
/// supported versions, or -32020 (the header the 2025 handshake does not send is missing: a
/// code of 2026-07-28's own, which no 2025 server answers).
fn speaks_only_modern(response: &Message) -> bool {
    #[derive(Deserialize)]
    struct Refused {
        code: i64,
        #[serde(default)]
        data: Option<Supported>,
    }
    #[derive(Deserialize)]
    struct Supported {
        #[serde(default)]
        supported: Vec<String>,
    }
    response
        .error_text()
        .and_then(|e| serde_json::from_str::<Refused>(e).ok())
        .is_some_and(|r| {
            r.code == crate::modern::HEADER_MISMATCH
                || (r.code == crate::modern::UNSUPPORTED_PROTOCOL_VERSION
                    && r.data
                        .is_some_and(|d| d.supported.iter().any(|v| v == MODERN_VERSION)))
        })
}

/// `server/discover` (the envelope is the connection's), for a server that speaks 2026-07-28.
async fn discover(conn: &Arc<Connection>, timeout: Duration) -> Result<Listing, HandshakeError> {
    #[derive(Deserialize)]
    struct Discovered<'a> {
        #[serde(rename = "supportedVersions", default)]
        supported: Vec<String>,
        #[serde(borrow, default)]
        capabilities: Option<&'a RawValue>,
    }
    let method = "server/discover";
    let mut response = conn.call(method, None, timeout).await?;
    if speaks_only_modern(&response) {
        // Refused although 2026-07-28 is among what it speaks (a server may turn a client's
        // first choice down): asked once more, in that version.
        response = conn.call(method, None, timeout).await?;
    }
    let found: Discovered<'_> = read_result(method, &response)?;
    if !found.supported.iter().any(|v| v == MODERN_VERSION) {
        return Err(HandshakeError::Refused {
            method,
            error: format!(
                "the server does not speak {MODERN_VERSION} (it speaks {}): remove `protocol` from its config",
                found.supported.join(", ")
            ),
        });
    }
    let info = info_of(MODERN_VERSION.to_owned(), found.capabilities);
    let _ = conn.init.set(info.clone());
    list(conn, &info, timeout).await
}

/// What the server said of itself: its version and capabilities.
pub(crate) fn info_of(protocol_version: String, capabilities: Option<&RawValue>) -> InitInfo {
    let caps: Caps = capabilities
        .and_then(|c| serde_json::from_str(c.get()).ok())
        .unwrap_or_default();
    InitInfo {
        protocol_version,
        capabilities: capabilities.map(ToOwned::to_owned),
        has_tools: caps.tools.is_some(),
        has_prompts: caps.prompts.is_some(),
        has_resources: caps.resources.is_some(),
        has_logging: caps.logging.is_some(),
        has_completions: caps.completions.is_some(),
        resources_subscribe: caps.resources.is_some_and(|r| r.subscribe),
        has_tasks: caps.tasks.is_some(),
        server_version: None,
    }
}

/// `params` with the 2026-07-28 envelope in its `_meta` (added to what `_meta` holds). A
/// modern client's request keeps its own capabilities: it is the one that answers the
/// server's input requests.
fn modern_envelope(params: Option<&Params>) -> Params {
    let version = message::string(MODERN_VERSION);
    let has = |field: Field| params.is_some_and(|p| p.has(field));
    let mut edits = vec![Edit::Set(Field::Version, &version)];
    if !has(Field::Capabilities) {
        edits.push(Edit::Set(Field::Capabilities, "{}"));
    }
    // A client's own clientInfo stays; moniker names itself in its own requests.
    if !has(Field::ClientInfo) {
        edits.push(Edit::Set(Field::ClientInfo, CLIENT_INFO));
    }
    match params {
        Some(params) => params.edit(&edits),
        None => Params::empty().edit(&edits),
    }
}

/// The header parameters of each tool, by the tool's name.
type HeaderParams = HashMap<String, Vec<HeaderParam>>;

/// The `x-mcp-header` parameters of each tool, top-level or nested through `properties`, and
/// the tools whose annotations break the rules of 2026-07-28 (with the rule): a header name is
/// a non-empty token (RFC 9110 `tchar`s), on a string, integer or boolean parameter, used once
/// in a tool (case-insensitively). A client must leave such a tool out.
fn header_params(tools: &[Box<RawValue>]) -> (HeaderParams, Vec<(String, String)>) {
    let mut out = HashMap::new();
    let mut invalid = Vec::new();
    for tool in tools.iter().filter_map(|raw| annotated_tool(raw)) {
        match tool_header_params(&tool.input_schema) {
            Err(why) => invalid.push((tool.name, why)),
            Ok(params) if !params.is_empty() => {
                out.insert(tool.name, params);
            }
            Ok(_) => {}
        }
    }
    (out, invalid)
}

/// A tool, as far as its header parameters go.
#[derive(Deserialize)]
struct AnnotatedTool {
    name: String,
    #[serde(rename = "inputSchema", default)]
    input_schema: serde_json::Value,
}

/// A tool that may have `x-mcp-header` annotations, read; `None` for the others and for one
/// that is not `{name, inputSchema}`.
fn annotated_tool(raw: &RawValue) -> Option<AnnotatedTool> {
    if !raw.get().contains("x-mcp-header") {
        return None;
    }
    serde_json::from_str(raw.get()).ok()
}

/// The `x-mcp-header` parameters of a tool's input `schema`, or why they break the rules.
fn tool_header_params(schema: &serde_json::Value) -> Result<Vec<HeaderParam>, String> {
    let mut params = Vec::new();
    walk_header_params(schema, &mut Vec::new(), &mut params)?;
    each_header_once(&params)?;
    Ok(params)
}

/// Adds to `out` the header parameters of `schema`'s `properties` (at `path`), down to 8 levels;
/// `Err` at the first that breaks the rules.
fn walk_header_params(
    schema: &serde_json::Value,
    path: &mut Vec<String>,
    out: &mut Vec<HeaderParam>,
) -> Result<(), String> {
    // Nesting deeper than this is no schema a server writes for a header.
    if path.len() > 8 {
        return Ok(());
    }
    let Some(properties) = schema.get("properties").and_then(|p| p.as_object()) else {
        return Ok(());
    };
    for (name, property) in properties {
        path.push(name.clone());
        if let Some(header) = property.get("x-mcp-header") {
            let header = valid_header(property, header)
                .map_err(|why| format!("parameter `{}`: {why}", path.join(".")))?;
            out.push(HeaderParam {
                path: path.clone(),
                header,
            });
        }
        walk_header_params(property, path, out)?;
        path.pop();
    }
    Ok(())
}

/// `Err` when two of a tool's parameters name the same header (case-insensitively).
fn each_header_once(params: &[HeaderParam]) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for param in params {
        if !seen.insert(param.header.to_ascii_lowercase()) {
            return Err(format!("header `{}` is named twice", param.header));
        }
    }
    Ok(())
}

/// The header name of an `x-mcp-header` annotation on `property`, or why it is refused.
fn valid_header(
    property: &serde_json::Value,
    header: &serde_json::Value,
) -> Result<String, String> {
    let Some(header) = header.as_str() else {
        return Err("`x-mcp-header` is not a string".to_owned());
    };
    if header.is_empty() {
        return Err("`x-mcp-header` is empty".to_owned());
    }
    if !moniker_config::is_header_name(header) {
        return Err(format!(
            "`x-mcp-header` {header:?} holds a character a header name may not"
        ));
    }
    if !primitive_typed(property) {
        return Err("`x-mcp-header` is only for string, integer and boolean parameters".to_owned());
    }
    Ok(header.to_owned())
}

/// Whether `property` is typed as a string, an integer or a boolean (or a list of those).
fn primitive_typed(property: &serde_json::Value) -> bool {
    let primitive =
        |t: &serde_json::Value| matches!(t.as_str(), Some("string" | "integer" | "boolean"));
    match property.get("type") {
        Some(serde_json::Value::Array(types)) => !types.is_empty() && types.iter().all(primitive),
        Some(t) => primitive(t),
        None => false,
    }
}

#[derive(Deserialize)]
struct NameOnly<'a> {
    #[serde(borrow)]
    name: std::borrow::Cow<'a, str>,
}

/// Lists the server's tools and prompts, following `nextCursor`.
pub async fn list(
    conn: &Arc<Connection>,
    info: &InitInfo,
    timeout: Duration,
) -> Result<Listing, HandshakeError> {
    let mut listing = Listing::new(conn.server.clone());
    listing.version = info.server_version.clone();
    *lock(&conn.era.list_ttl) = None;
    if info.has_tools {
        listing.tools = list_all(conn, "tools/list", "tools", timeout).await?;
        if conn.is_modern() {
            keep_header_params(conn, &mut listing.tools);
        }
    }
    if info.has_prompts {
        listing.prompts = list_all(conn, "prompts/list", "prompts", timeout).await?;
    }
    Ok(listing)
}

/// Keeps the header parameters of a modern server's `tools`. A tool whose header annotations
/// break the rules is left out, said once per listing; the server's other tools stay.
fn keep_header_params(conn: &Connection, tools: &mut Vec<Box<RawValue>>) {
    let (params, invalid) = header_params(tools);
    for (tool, why) in &invalid {
        tracing::warn!(server = %conn.server, tool = ?tool, why = ?why, "a tool is left out: its x-mcp-header breaks the rules of 2026-07-28");
    }
    if !invalid.is_empty() {
        tools.retain(|raw| !named_in(raw, &invalid));
    }
    *lock(&conn.era.header_params) = params;
}

/// Whether the tool `raw` is one of `tools` (each with why).
fn named_in(raw: &RawValue, tools: &[(String, String)]) -> bool {
    let name = serde_json::from_str::<NameOnly<'_>>(raw.get()).map(|t| t.name);
    name.is_ok_and(|n| tools.iter().any(|(tool, _)| tool.as_str() == n.as_ref()))
}

/// Every item of a paged list method.
pub async fn list_all(
    conn: &Connection,
    method: &'static str,
    key: &str,
    timeout: Duration,
) -> Result<Vec<Box<RawValue>>, HandshakeError> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    let mut bytes = 0usize;
    let over = |what: String| HandshakeError::OverBudget { method, what };
    // A server that hands out cursors forever, or lists more than anyone could use, must not
    // hold moniker's memory: what it has sent is counted page by page, and the listing is
    // refused at the first page past the budget (the server keeps its last listing).
    for page in 0.. {
        if page >= budget::LISTING_PAGES {
            return Err(over(format!("more than {} pages", budget::LISTING_PAGES)));
        }
        let params = cursor.as_ref().map(|c| Params::object(&[("cursor", c)]));
        let response = conn.call(method, params.as_ref(), timeout).await?;
        bytes += response.text().len();
        if bytes > budget::LISTING_BYTES {
            return Err(over(format!(
                "more than {} MiB",
                budget::LISTING_BYTES >> 20
            )));
        }
        let result =
            outcome(&response).map_err(|error| HandshakeError::Refused { method, error })?;
        let fields = message::fields(result).ok_or_else(|| HandshakeError::Refused {
            method,
            error: "the result is not an object".to_owned(),
        })?;
        if let Some(list) = fields.get(key) {
            let page: Vec<Box<RawValue>> =
                serde_json::from_str(list.get()).map_err(|e| HandshakeError::Refused {
                    method,
                    error: format!("`{key}` is not a list: {e}"),
                })?;
            items.extend(page);
            if items.len() > budget::LISTING_ITEMS {
                return Err(over(format!("more than {} items", budget::LISTING_ITEMS)));
            }
        }
        if matches!(method, "tools/list" | "prompts/list") {
            keep_ttl(conn, &fields);
        }
        match fields.get("nextCursor") {
            Some(next) if next.get() != "null" => cursor = Some(next.get().to_owned()),
            _ => return Ok(items),
        }
    }
    Ok(items)
}

/// Keeps the `ttlMs` of a listing's page, the shortest of its pages'.
fn keep_ttl(conn: &Connection, fields: &message::Fields<'_>) {
    let ttl = fields
        .get("ttlMs")
        .and_then(|t| t.get().parse::<u64>().ok());
    if let Some(ttl) = ttl {
        let mut kept = lock(&conn.era.list_ttl);
        *kept = Some(kept.map_or(ttl, |k| k.min(ttl)));
    }
}

#[cfg(test)]
mod header_tests {
    use super::*;

    #[test]
    fn a_tool_whose_header_annotations_break_the_rules_is_named() {
        let tool = |name: &str, properties: &str| {
            RawValue::from_string(format!(
                r#"{{"name":"{name}","inputSchema":{{"type":"object","properties":{properties}}}}}"#
            ))
            .unwrap()
        };
        let tools = [
            tool(
                "ok",
                r#"{"a":{"type":"string","x-mcp-header":"Region"},"b":{"type":["integer"],"x-mcp-header":"N"}}"#,
            ),
            tool("empty", r#"{"a":{"type":"string","x-mcp-header":""}}"#),
            tool("object", r#"{"a":{"type":"object","x-mcp-header":"A"}}"#),
            tool("number", r#"{"a":{"type":"number","x-mcp-header":"A"}}"#),
            tool("untyped", r#"{"a":{"x-mcp-header":"A"}}"#),
            tool(
                "twice",
                r#"{"a":{"type":"string","x-mcp-header":"Zone"},"b":{"type":"string","x-mcp-header":"zone"}}"#,
            ),
            tool("space", r#"{"a":{"type":"string","x-mcp-header":"A B"}}"#),
            tool("colon", r#"{"a":{"type":"string","x-mcp-header":"A:B"}}"#),
            tool(
                "accent",
                r#"{"a":{"type":"string","x-mcp-header":"Régión"}}"#,
            ),
            tool(
                "control",
                r#"{"a":{"type":"string","x-mcp-header":"A\u0001"}}"#,
            ),
            tool("not_text", r#"{"a":{"type":"string","x-mcp-header":7}}"#),
        ];
        let (found, invalid) = header_params(&tools);
        assert_eq!(found.keys().collect::<Vec<_>>(), vec!["ok"]);
        let refused: Vec<&str> = invalid.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            refused,
            vec![
                "empty", "object", "number", "untyped", "twice", "space", "colon", "accent",
                "control", "not_text"
            ]
        );
        assert!(invalid[4].1.contains("named twice"), "{:?}", invalid[4]);
    }

    #[test]
    fn header_parameters_are_found_at_any_depth_of_properties() {
        let tool = RawValue::from_string(
            r#"{"name":"t","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"target":{"type":"object","properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}},"plain":{"type":"string"}}}}"#.to_owned(),
        )
        .unwrap();
        let other =
            RawValue::from_string(r#"{"name":"u","inputSchema":{"type":"object"}}"#.to_owned())
                .unwrap();
        let (found, _) = header_params(&[tool, other]);
        assert_eq!(found.len(), 1);
        let params = &found["t"];
        assert_eq!(
            params,
            &vec![
                HeaderParam {
                    path: vec!["region".into()],
                    header: "Region".into()
                },
                HeaderParam {
                    path: vec!["target".into(), "zone".into()],
                    header: "Zone".into()
                },
            ]
        );
    }
}

#[cfg(test)]
mod forwarding_tests {
    use super::*;

    /// "Attacker's review, per person": a call cancelled while its caller's token was being
    /// got was forgotten with its caller's headers and then sent all the same, without them,
    /// so the server's link put moniker's own token on it. A request no one waits for is not
    /// sent now.
    #[test]
    fn a_request_given_up_before_it_is_sent_is_not_sent() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let conn = Connection::new("s".parse().unwrap(), tx, None);
        let _ = conn.forwarding.rules.set(indexmap::IndexMap::new());
        let upstream = crate::auth::exchange::Upstream {
            authorization: HeaderValue::from_static("Bearer alices"),
            subject: "alice".to_owned(),
        };
        let (kept, _answer) = conn
            .start_for("tools/call", None, None, Some(&upstream))
            .unwrap();
        let (given_up, _gone) = conn
            .start_for("tools/call", None, None, Some(&upstream))
            .unwrap();
        conn.forget(given_up);
        let first = rx.try_recv().unwrap();
        let second = rx.try_recv().unwrap();
        assert_eq!(first.our_id(), Some(kept));
        let headers = conn.forwarded(&first).expect("still awaited: sent");
        assert_eq!(
            headers,
            vec![(AUTHORIZATION, upstream.authorization.clone())]
        );
        assert_eq!(second.our_id(), Some(given_up));
        assert!(
            conn.forwarded(&second).is_none(),
            "a given-up request was to be sent"
        );
    }
}
