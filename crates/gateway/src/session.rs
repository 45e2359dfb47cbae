//! A client session: what one client sent, answered from the surface or routed to the
//! servers; independent of the transport that carries it.
//!
//! [`Session::handle`] is the one entry: a transport hands it each message it parsed (or the
//! reason it could not), with where the answers go. Its rooms: this file dispatches by method
//! and answers `initialize`; `calls` resolves names (aliases, actions, toolsets) and lists;
//! `fanout` spreads resources and completions across servers; `relay` forwards to a server,
//! cancels, and carries progress.

mod calls;
mod fanout;
mod input;

mod relay;
mod search;
pub(crate) mod tasks;

use std::sync::{Arc, Mutex, OnceLock};

use moniker_surface::Kind;

use crate::errors::Refusal;
use crate::gateway::Gateway;
use crate::hub::{InFlight, Peer};
use crate::message::{self, Field, Incoming, Invalid, Message};
use crate::metrics::Searched;
use crate::modern;
use crate::sync::lock;
use crate::toolsets::Equipped;
use crate::view::View;

/// Protocol versions moniker speaks with clients, oldest first.
pub const PROTOCOL_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

pub use crate::answers::Answers;

pub struct Session {
    gateway: Arc<Gateway>,
    peer: Arc<Peer>,
    /// The equipped toolset, by name.
    toolset: Arc<Mutex<Option<String>>>,
    /// The deprecated names this session called (each warned about once).
    warned: Mutex<std::collections::BTreeSet<String>>,
    /// The equipped toolset resolved against the view it was resolved for. The view is kept
    /// (not its address): a rebuilt view is another view.
    equipped: Mutex<Option<(Arc<View>, Arc<Toolset>)>>,
    protocol_version: OnceLock<String>,
    /// A 2025 client's capabilities, as it said in `initialize` (raw JSON): a 2026-07-28
    /// server is told them with each call, since moniker asks the client for it.
    client_capabilities: OnceLock<String>,
    /// What the audit log calls the client ([`Session::identify`]); else its principal.
    who: OnceLock<Arc<str>>,
    /// `search_tools` is answered whatever the discovery mode ([`Session::answer_search`]).
    answers_search: std::sync::atomic::AtomicBool,
    /// The names the last search showed, until a call follows it (what the metrics count).
    last_search: Mutex<Option<Vec<String>>>,
    /// Whose lessons its searches use and teach: the principal it was opened for (an HTTP
    /// token, a person), else the client its name says ([`Session::identify`]: `stdio`, the
    /// open endpoint's `anyone`, the console's admin), one person on one machine.
    learns_as: Option<Arc<str>>,
}

type Reply = Option<Message>;

/// Requests one session may have in progress at once; more are refused until some finish.
pub const MAX_IN_FLIGHT: usize = 1024;
/// The requests of a batch that run at once.
const BATCH_CONCURRENCY: usize = 16;

impl Drop for Session {
    /// A client gone without unsubscribing: what it followed is released (a server is told
    /// when no other client follows the resource there).
    fn drop(&mut self) {
        if lock(&self.last_search).take().is_some() {
            self.gateway.services.metrics.search(Searched::NoCall);
        }
        let followed = self.peer.all_subscriptions();
        if !followed.is_empty() {
            self.unsubscribe_all(followed);
        }
    }
}

/// The equipped toolset resolved against one view, with its listings rendered once.
pub(crate) struct Toolset {
    equipped: Equipped,
    tools_result: String,
    prompts_result: String,
}

/// The id of a request, raw JSON.
fn id_of(request: &Message) -> &str {
    request.id().unwrap_or("null")
}

/// The answer to a request whose id is one this session has in progress already.
fn duplicate_id(id: &str) -> Message {
    Message::error(
        Some(id),
        message::INVALID_REQUEST,
        "Invalid Request: a request with this id is in progress (ids must be unique among the requests in progress)",
    )
}

impl Session {
    /// A session whose messages to the client go to `out`. It starts with the gateway's
    /// default toolset, if any.
    pub fn new(gateway: Arc<Gateway>, out: impl Into<crate::framing::To>) -> Arc<Self> {
        let toolset = gateway.settings.default_toolset.clone();
        Self::starting_with(gateway, out, toolset)
    }

    /// A session that starts with `toolset` equipped (it may equip another).
    pub fn starting_with(
        gateway: Arc<Gateway>,
        out: impl Into<crate::framing::To>,
        toolset: Option<String>,
    ) -> Arc<Self> {
        Self::create(gateway, out, toolset, false)
    }

    /// A session that sees and can call only `toolset`, for good.
    pub fn bound(
        gateway: Arc<Gateway>,
        out: impl Into<crate::framing::To>,
        toolset: String,
    ) -> Arc<Self> {
        Self::create(gateway, out, Some(toolset), true)
    }

    /// A session of a client known by `principal` rather than by the session itself, bound to
    /// `toolset` when given (else as [`Session::new`]): the
    /// requests of a stateless (2026-07-28) client, each a session of its own, are one
    /// principal's (its token's), so that what one starts (a task) the next may reach.
    pub fn of_principal(
        gateway: Arc<Gateway>,
        out: impl Into<crate::framing::To>,
        toolset: Option<String>,
        principal: String,
    ) -> Arc<Self> {
        let (toolset, bound) = match toolset {
            Some(toolset) => (Some(toolset), true),
            None => (gateway.settings.default_toolset.clone(), false),
        };
        let learns_as = Some(Arc::from(principal.as_str()));
        Self::with(gateway, out, (toolset, bound), principal, learns_as)
    }

    fn create(
        gateway: Arc<Gateway>,
        out: impl Into<crate::framing::To>,
        toolset: Option<String>,
        bound: bool,
    ) -> Arc<Self> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self::with(gateway, out, (toolset, bound), format!("session {n}"), None)
    }

    fn with(
        gateway: Arc<Gateway>,
        out: impl Into<crate::framing::To>,
        (toolset, bound): (Option<String>, bool),
        principal: String,
        learns_as: Option<Arc<str>>,
    ) -> Arc<Self> {
        // Shared with the peer: the gateway tells the session of a change to what it sees.
        let toolset = Arc::new(Mutex::new(toolset));
        let peer = Arc::new(Peer::new(out.into(), bound, toolset.clone(), principal));
        gateway.services.hub.add(&peer);
        Arc::new(Self {
            gateway,
            peer,
            toolset,
            warned: Mutex::new(std::collections::BTreeSet::new()),
            equipped: Mutex::new(None),
            protocol_version: OnceLock::new(),
            client_capabilities: OnceLock::new(),
            who: OnceLock::new(),
            answers_search: std::sync::atomic::AtomicBool::new(false),
            last_search: Mutex::new(None),
            learns_as,
        })
    }

    /// The session's requests count with those of every other session of `owner` (an HTTP
    /// token, a person): together they may have [`crate::budget::CALLS_EACH`] in progress.
    pub fn count_calls_under(&self, owner: &str) {
        self.peer
            .count_calls_in(self.gateway.services.hub.calls_of(owner));
    }

    /// Traces are on: the calls of this session are traced.
    pub fn traces(&self) -> bool {
        self.gateway.services.telemetry.is_some()
    }

    /// `search_tools` and `call_tool` are answered whatever the discovery mode: the console's
    /// session that shows what a toolset's search would find.
    pub fn answer_search(&self) {
        self.answers_search
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Names the client for the audit log (a token's name or digest, `stdio`): never a
    /// secret. Once.
    pub fn identify(&self, who: &str) {
        let _ = self.who.set(who.into());
    }

    /// Whose lessons its searches use and teach ([`crate::learned`]).
    pub(crate) fn learner(&self) -> Arc<str> {
        match (&self.learns_as, self.who.get()) {
            (Some(principal), _) => principal.clone(),
            (None, Some(who)) => who.clone(),
            (None, None) => self.peer.principal.as_str().into(),
        }
    }

    /// A new call of this session's client, as one value; traced when traces are on (the
    /// client's span, from `_meta` or the HTTP request, its parent).
    fn record(
        &self,
        kind: Option<Kind>,
        name: &str,
        request: &Message,
        answers: &Answers,
    ) -> crate::call::Call {
        let who = match self.who.get() {
            Some(who) => who.clone(),
            None => self.peer.principal.as_str().into(),
        };
        let era = self.protocol_version().unwrap_or(modern::MODERN_VERSION);
        let asker = crate::call::Asker {
            who,
            toolset: lock(&self.toolset).clone(),
            era: era.into(),
        };
        let call = crate::call::Call::new(Some(self.gateway.clone()), asker, kind, name);
        match &self.gateway.services.telemetry {
            None => call,
            Some(telemetry) => {
                let parent = crate::telemetry::parent_of(request).or_else(|| answers.trace.clone());
                call.traced(telemetry, parent.as_ref(), id_of(request))
            }
        }
    }

    /// The protocol version agreed in `initialize`.
    pub fn protocol_version(&self) -> Option<&str> {
        self.protocol_version.get().map(String::as_str)
    }

    /// Sends a message of the session's own (not an answer) to the client.
    pub fn send(&self, message: Message) {
        self.peer.send(message);
    }

    /// Handles what the client sent: a message, a batch, or what could not be read. Requests
    /// run concurrently, each answered (to `answers`, else the session's stream) as soon as
    /// it is done; a batch is answered as one array. Notifications and responses are handled
    /// before this returns.
    pub fn handle(self: &Arc<Self>, incoming: Result<Incoming, Invalid>, answers: Option<Answers>) {
        let answers = answers.unwrap_or_else(|| Answers::new(self.peer.out().clone(), true));
        match incoming {
            Err(invalid) => answers.send(invalid.answer()),
            Ok(Incoming::One(message)) if message.is_request() => {
                if let Err(refusal) = self.register(&[id_of(&message)], None) {
                    answers.send(refusal);
                    return;
                }
                let session = self.clone();
                // Boxed: the task then holds a pointer, not the request's whole future, which
                // spawning and finishing the task would otherwise copy, kilobytes each time.
                tokio::spawn(Box::pin(async move {
                    if let Some(reply) = session.answer(&message, &answers).await {
                        answers.send(reply);
                    }
                }));
            }
            Ok(Incoming::One(message)) => self.message(&message),
            Ok(Incoming::Batch(items)) => {
                // The batch's length was bounded as it was read (message::MAX_BATCH).
                let ids: Vec<&str> = items
                    .iter()
                    .flatten()
                    .filter(|m| m.is_request())
                    .map(id_of)
                    .collect();
                if let Err(refusal) = self.register(&ids, Some(items.len())) {
                    answers.send(refusal);
                    return;
                }
                let session = self.clone();
                tokio::spawn(async move { session.batch(items, answers).await });
            }
        }
    }

    /// Registers requests (by id) as they are read, before their tasks run, so that a
    /// cancellation read right after one finds it: all of them, or none and the refusal to
    /// send (`batch`: the length of the batch they came in). The checks and the registration
    /// are one step under the lock, so two requests sent at once with one id are never both
    /// let in. Each request's id names it until it is answered: an id in progress (or twice
    /// in a batch) would make two requests one.
    fn register(&self, ids: &[&str], batch: Option<usize>) -> Result<(), Message> {
        let mut in_flight = lock(&self.peer.in_flight);
        if in_flight.len() + ids.len() > MAX_IN_FLIGHT {
            let refusal = match batch {
                None => Refusal::limit(format!(
                    "this session has {MAX_IN_FLIGHT} requests in progress, the most it may: wait for some to finish"
                ))
                .answer(ids.first().copied().unwrap_or("null")),
                Some(messages) => Refusal::limit(format!(
                    "a batch of {messages} messages ({} requests) is more than this session may have (at most {MAX_IN_FLIGHT} requests in progress)",
                    ids.len()
                ))
                .answer("null"),
            };
            return Err(refusal);
        }
        // A lone request cannot repeat an id of its own: only a batch's are counted.
        let mut seen = std::collections::HashSet::new();
        if let Some(id) = ids
            .iter()
            .find(|id| in_flight.contains_key(**id) || (ids.len() > 1 && !seen.insert(**id)))
        {
            return Err(duplicate_id(id));
        }
        if let Err(held) = self.peer.take_calls(ids.len()) {
            return Err(Refusal::limit(format!(
                "the sessions of this client's token have {held} requests in progress together, and {} more would pass the {} they may: wait for some to finish",
                ids.len(),
                crate::budget::CALLS_EACH
            ))
            .answer(if batch.is_some() { "null" } else { ids.first().copied().unwrap_or("null") }));
        }
        for id in ids {
            in_flight.insert((*id).to_owned(), InFlight::default());
        }
        Ok(())
    }

    /// Runs a request to its answer; `None` when the client cancelled it. A 2026-07-28
    /// request (its `_meta` envelope) is answered the 2026-07-28 way.
    async fn answer(self: &Arc<Self>, request: &Message, answers: &Answers) -> Reply {
        if let Some(method) = request.method().filter(|m| reaches_servers(m)) {
            // Servers a moment from joining are waited for (a short, bounded while, once).
            let names_only = matches!(
                method,
                "tools/list" | "tools/call" | "prompts/list" | "prompts/get"
            );
            self.gateway.joined(names_only).await;
            // A client that lists or calls tools (prompts) has names in hand: changes to them
            // are news to it from now on (what joined before is in its answer).
            match method {
                "tools/list" | "tools/call" => self.peer.lists(Kind::Tool),
                "prompts/list" | "prompts/get" => self.peer.lists(Kind::Prompt),
                _ => {}
            }
        }
        let reply = match modern::envelope(request) {
            // `server/discover` is the 2026-07-28 era's alone, envelope and all.
            modern::Envelope::None if request.method() == Some("server/discover") => {
                Some(modern::missing_envelope(request))
            }
            modern::Envelope::None => self.request(request, answers).await,
            modern::Envelope::Refused(answer) => Some(answer),
            modern::Envelope::Modern(can) => {
                // A 2026-07-28 request says what log messages it takes, or takes none.
                self.peer
                    .set_log_level(request.str_of(Field::LogLevel).as_deref());
                if self.protocol_version().is_none() {
                    // A 2025 session that sends one enveloped request still takes requests.
                    self.peer.era.speaks_modern();
                }
                let method = request.method().unwrap_or_default();
                let private = lock(&self.toolset).is_some();
                let reply = if modern::REMOVED.contains(&method) {
                    Some(Refusal::MethodNotFound(method.to_owned()).answer(id_of(request)))
                } else if matches!(method, "tools/call" | "prompts/get" | "resources/read") {
                    self.interactive(request, answers, can).await
                } else {
                    self.request(request, answers).await
                };
                let ttl = if matches!(method, "tools/list" | "prompts/list") {
                    self.gateway.servers.list_ttl()
                } else {
                    0
                };
                reply.map(|reply| modern::answer(reply, method, private, ttl))
            }
        };
        let ended = lock(&self.peer.in_flight).remove(id_of(request));
        if ended.is_some() {
            self.peer.give_call();
        }
        let cancelled = ended.is_some_and(|f| f.cancelled);
        reply.filter(|_| !cancelled)
    }

    /// A batch: its requests run concurrently ([`BATCH_CONCURRENCY`] at a time, in one task),
    /// and their answers come back together, in order.
    async fn batch(self: Arc<Self>, items: Vec<Result<Message, Invalid>>, answers: Answers) {
        use futures_util::StreamExt as _;
        let mut requests = Vec::new();
        for item in items {
            match item {
                Ok(message) if !message.is_request() => self.message(&message),
                item => requests.push(item),
            }
        }
        let replies: Vec<Message> = futures_util::stream::iter(requests)
            .map(|item| {
                let session = &self;
                let answers = &answers;
                async move {
                    match item {
                        Err(invalid) => Some(invalid.answer()),
                        Ok(message) => session.answer(&message, answers).await,
                    }
                }
            })
            .buffered(BATCH_CONCURRENCY)
            .filter_map(|reply| async move { reply })
            .collect()
            .await;
        if !replies.is_empty() {
            answers.send(Message::batch(&replies));
        }
    }

    /// Notifications and responses from the client.
    fn message(self: &Arc<Self>, message: &Message) {
        if message.is_response() {
            self.peer.answer_server(message);
            return;
        }
        match message.method().unwrap_or_default() {
            "notifications/initialized" => self.peer.set_ready(),
            "notifications/cancelled" => self.cancel(message),
            "notifications/roots/list_changed" => {
                for conn in self.reached() {
                    let _ = conn.send(message.clone());
                }
            }
            method => tracing::debug!(method, "notification from the client ignored"),
        }
    }

    async fn request(self: &Arc<Self>, request: &Message, answers: &Answers) -> Reply {
        let id = id_of(request);
        let method = request.method().unwrap_or_default();
        match method {
            "initialize" => Some(self.initialize(request)),
            "subscriptions/listen" => Some(self.listen(request, answers).await),
            "server/discover" => Some(Message::result(
                id,
                &modern::discover(&PROTOCOL_VERSIONS, &self.capabilities(false)),
            )),
            "ping" => Some(Message::result(id, "{}")),
            "tools/list" => Some(self.list(request, Kind::Tool)),
            "prompts/list" => Some(self.list(request, Kind::Prompt)),
            "tools/call" => self.call(request, Kind::Tool, answers).await,
            "prompts/get" => self.call(request, Kind::Prompt, answers).await,
            "resources/list" => Some(self.gather(id, "resources/list", "resources").await),
            "resources/templates/list" => Some(
                self.gather(id, "resources/templates/list", "resourceTemplates")
                    .await,
            ),
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                self.by_uri(request, answers).await
            }
            "completion/complete" => self.complete(request, answers.caller()).await,
            "tasks/get" | "tasks/result" | "tasks/cancel" => {
                self.task(request, answers.caller()).await
            }
            "tasks/list" => Some(self.list_tasks(id).await),
            "logging/setLevel" => Some(self.set_level(request)),
            _ => Some(Refusal::MethodNotFound(method.to_owned()).answer(id)),
        }
    }

    fn initialize(&self, request: &Message) -> Message {
        let asked = request
            .params()
            .and_then(message::fields)
            .and_then(|f| message::str_field(&f, "protocolVersion").map(|v| v.into_owned()));
        let version = match asked {
            Some(v) if PROTOCOL_VERSIONS.contains(&v.as_str()) => v,
            _ => PROTOCOL_VERSIONS[PROTOCOL_VERSIONS.len() - 1].to_owned(),
        };
        let _ = self.protocol_version.set(version.clone());
        let capabilities = request
            .params()
            .and_then(message::fields)
            .and_then(|f| f.get("capabilities").map(|c| c.get().to_owned()));
        if let Some(capabilities) = capabilities {
            let _ = self.client_capabilities.set(capabilities);
        }
        let result = format!(
            r#"{{"protocolVersion":{},"capabilities":{{{}}},"serverInfo":{{"name":"moniker","version":"{}"}}}}"#,
            message::string(&version),
            self.capabilities(true),
            env!("CARGO_PKG_VERSION")
        );
        Message::result(id_of(request), &result)
    }

    /// `subscriptions/listen`: acknowledged on the request's own stream, which then carries
    /// the list changes the client opted in to and the updates of the resources it named
    /// (subscribed to at the servers that serve them, for as long as the stream lasts), until
    /// the client cancels it or goes away (or moniker stops); then its result.
    async fn listen(self: &Arc<Self>, request: &Message, answers: &Answers) -> Message {
        let id = id_of(request);
        if !self.peer.era.claim_listen() {
            return Message::error(
                Some(id),
                message::INVALID_REQUEST,
                "this session listens already: one subscriptions/listen at a time (cancel it first)",
            );
        }
        // A stateless client's every listen is a session of its own: its principal has at
        // most so many open at once.
        let Some(_stream) = self.gateway.services.hub.open_stream(&self.peer.principal) else {
            self.peer.era.release_listen();
            return Refusal::limit(format!(
                "this client has {} subscriptions/listen streams open, the most it may: close one first",
                crate::hub::MAX_STREAMS_EACH
            ))
            .answer(id);
        };
        let mut filter = modern::listen_filter(request);
        let subscribed = self.subscribe_all(&filter.uris).await;
        filter
            .uris
            .retain(|uri| subscribed.iter().any(|(_, u)| u == uri));
        let ended = Arc::new(tokio::sync::Notify::new());
        *lock(&self.peer.era.listen) = Some(crate::modern::client::Listen {
            id: id.to_owned(),
            tools: filter.tools,
            prompts: filter.prompts,
            resources: filter.resources,
            to: answers.clone(),
            ended: ended.clone(),
        });
        answers.send(modern::acknowledged(id, &filter));
        tokio::select! {
            () = ended.notified() => {}
            () = answers.to.closed() => {}
            () = self.gateway.servers.stopped() => {}
        }
        *lock(&self.peer.era.listen) = None;
        self.unsubscribe_all(subscribed);
        self.peer.era.release_listen();
        let result = format!(
            r#"{{"_meta":{{"io.modelcontextprotocol/subscriptionId":{id}}},"resultType":"complete"}}"#
        );
        Message::result(id, &result)
    }

    /// The members of the capabilities object moniker serves: the union of its servers'
    /// (`tasks` only in the 2025 handshake: in 2026-07-28 tasks are an extension).
    fn capabilities(&self, handshake: bool) -> String {
        let infos = self.gateway.servers.server_infos();
        let mut caps = vec![r#""tools":{"listChanged":true}"#.to_owned()];
        if infos.iter().any(|i| i.has_prompts) {
            caps.push(r#""prompts":{"listChanged":true}"#.to_owned());
        }
        if infos.iter().any(|i| i.has_resources) {
            let subscribe = infos.iter().any(|i| i.resources_subscribe);
            caps.push(format!(
                r#""resources":{{"subscribe":{subscribe},"listChanged":true}}"#
            ));
        }
        if infos.iter().any(|i| i.has_logging) {
            caps.push(r#""logging":{}"#.to_owned());
        }
        if infos.iter().any(|i| i.has_completions) {
            caps.push(r#""completions":{}"#.to_owned());
        }
        if handshake && infos.iter().any(|i| i.has_tasks) {
            caps.push(
                r#""tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}"#.to_owned(),
            );
        }
        caps.join(",")
    }
}

/// Whether what `method` answers depends on the servers that have joined (a listing, a call,
/// a resource, a completion, a task, the resources a listen follows).
fn reaches_servers(method: &str) -> bool {
    method == "subscriptions/listen"
        || ["tools/", "prompts/", "resources/", "completion/", "tasks/"]
            .iter()
            .any(|prefix| method.starts_with(prefix))
}
