//! A client session: what one client sent, answered from the surface or routed to the
//! servers; independent of the transport that carries it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use moniker_surface::{Kind, Route, ServerId, Via, actions};
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use crate::gateway::{Gateway, View};
use crate::jsonrpc::{self, Message, Outcome, Parsed};
use crate::metrics::Outcome as CallOutcome;
use crate::server::Connection;
use crate::toolsets::{Effect, Equipped};
use moniker_surface::toolsets::MANAGEMENT_TOOLS;
use tracing::Instrument as _;

/// Protocol versions moniker speaks with clients, oldest first.
pub const PROTOCOL_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// A request of the client's being handled: registered as it is read, so that a cancellation
/// that comes right after it is never missed; `server` is set once it is sent to one.
#[derive(Default)]
struct InFlight {
    server: Option<ServerId>,
    conn: Weak<Connection>,
    id: u64,
    cancelled: bool,
}

/// A request of a server's that waits for the client.
struct Outgoing {
    conn: Weak<Connection>,
    server_id: Box<RawValue>,
}

pub struct Session {
    gateway: Arc<Gateway>,
    out: mpsc::UnboundedSender<String>,
    /// The equipped toolset, by name.
    toolset: Mutex<Option<String>>,
    /// The equipped toolset resolved against the view it was resolved for (by address).
    equipped: Mutex<Option<(usize, Arc<Equipped>)>>,
    /// Bound to its toolset (by an HTTP token): no management tools, no unequipping.
    bound: bool,
    /// Resources this session subscribed to, with the server that serves each.
    subscriptions: Mutex<std::collections::HashSet<(ServerId, String)>>,
    ready: AtomicBool,
    protocol_version: OnceLock<String>,
    in_flight: Mutex<HashMap<String, InFlight>>,
    outgoing: Mutex<HashMap<u64, Outgoing>>,
    next_id: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means a panic elsewhere; the map is still consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

type Reply = Option<String>;

impl Session {
    /// A session whose messages to the client go to `out`, one JSON text each. It starts with
    /// the gateway's default toolset, if any.
    pub fn new(gateway: Arc<Gateway>, out: mpsc::UnboundedSender<String>) -> Arc<Self> {
        let toolset = gateway.settings.default_toolset.clone();
        Self::create(gateway, out, toolset, false)
    }

    /// A session that sees and can call only `toolset`, for good.
    pub fn bound(
        gateway: Arc<Gateway>,
        out: mpsc::UnboundedSender<String>,
        toolset: String,
    ) -> Arc<Self> {
        Self::create(gateway, out, Some(toolset), true)
    }

    fn create(
        gateway: Arc<Gateway>,
        out: mpsc::UnboundedSender<String>,
        toolset: Option<String>,
        bound: bool,
    ) -> Arc<Self> {
        let session = Arc::new(Self {
            gateway,
            out,
            toolset: Mutex::new(toolset),
            equipped: Mutex::new(None),
            bound,
            subscriptions: Mutex::new(std::collections::HashSet::new()),
            ready: AtomicBool::new(false),
            protocol_version: OnceLock::new(),
            in_flight: Mutex::new(HashMap::new()),
            outgoing: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        });
        session.gateway.add_session(&session);
        session
    }

    /// The session's toolset resolved against `view`; `None` when none is equipped.
    fn equipped(&self, view: &Arc<View>) -> Option<Arc<Equipped>> {
        let name = lock(&self.toolset).clone()?;
        let key = Arc::as_ptr(view) as usize;
        let mut cache = lock(&self.equipped);
        if let Some((at, equipped)) = cache.as_ref() {
            if *at == key && equipped.name == name {
                return Some(equipped.clone());
            }
        }
        let equipped = Arc::new(Equipped::new(
            &name,
            &view.surface,
            &view.up,
            &self.gateway.catalog.sets(),
        ));
        *cache = Some((key, equipped.clone()));
        Some(equipped)
    }

    /// Management tools are shown to this session.
    fn manages(&self) -> bool {
        self.gateway.settings.manage && !self.bound
    }

    /// Equips or unequips, and tells the client its listing changed.
    fn set_toolset(&self, toolset: Option<String>) {
        *lock(&self.toolset) = toolset;
        *lock(&self.equipped) = None;
        self.notify("notifications/tools/list_changed");
        self.notify("notifications/prompts/list_changed");
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    pub(crate) fn send(&self, message: String) {
        let _ = self.out.send(message);
    }

    pub(crate) fn send_if_ready(&self, message: String) {
        if self.is_ready() {
            self.send(message);
        }
    }

    pub(crate) fn notify(&self, method: &str) {
        self.send_if_ready(jsonrpc::notification(method, None));
    }

    pub(crate) fn is_bound(&self) -> bool {
        self.bound
    }

    pub(crate) fn subscribed(&self, server: &ServerId, uri: &str) -> bool {
        lock(&self.subscriptions).contains(&(server.clone(), uri.to_owned()))
    }

    pub(crate) fn has_call_on(&self, server: &ServerId) -> bool {
        lock(&self.in_flight)
            .values()
            .any(|f| f.server.as_ref() == Some(server))
    }

    /// Handles one line from the client. Requests run concurrently; their answers go out
    /// as they come.
    pub fn handle(self: &Arc<Self>, line: String) {
        match jsonrpc::parse(&line) {
            Err(e) => self.send(jsonrpc::error(e.id, e.code, &e.message)),
            Ok(Parsed::One(Message::Request { id, .. })) => {
                // Registered now, before the task runs, so that a cancellation read right
                // after the request finds it.
                lock(&self.in_flight).insert(id.get().to_owned(), InFlight::default());
                self.spawn_reply(line);
            }
            Ok(Parsed::Batch(_)) => self.spawn_reply(line),
            Ok(Parsed::One(message)) => self.message(message),
        }
    }

    fn spawn_reply(self: &Arc<Self>, line: String) {
        let session = self.clone();
        tokio::spawn(async move {
            if let Some(reply) = session.reply(&line).await {
                session.send(reply);
            }
        });
    }

    /// Answers one line from the client: the reply to its request (or the array of replies to
    /// a batch), or `None` for notifications, responses and cancelled requests.
    pub async fn reply(self: &Arc<Self>, line: &str) -> Option<String> {
        match jsonrpc::parse(line) {
            Err(e) => Some(jsonrpc::error(e.id, e.code, &e.message)),
            Ok(Parsed::One(Message::Request { id, method, params })) => {
                let key = id.get().to_owned();
                lock(&self.in_flight).entry(key.clone()).or_default();
                let reply = self.request(id, method, params).await;
                let cancelled = lock(&self.in_flight)
                    .remove(&key)
                    .is_some_and(|f| f.cancelled);
                reply.filter(|_| !cancelled)
            }
            Ok(Parsed::One(message)) => {
                self.message(message);
                None
            }
            Ok(Parsed::Batch(_)) => self.batch(line).await,
        }
    }

    /// One message; the reply when it was a request.
    async fn one(self: &Arc<Self>, text: &str) -> Reply {
        match jsonrpc::parse(text) {
            Ok(Parsed::One(Message::Request { id, method, params })) => {
                self.request(id, method, params).await
            }
            Ok(Parsed::One(message)) => {
                self.message(message);
                None
            }
            Ok(Parsed::Batch(_)) => Some(jsonrpc::error(
                None,
                jsonrpc::INVALID_REQUEST,
                "Invalid Request: nested batch",
            )),
            Err(e) => Some(jsonrpc::error(e.id, e.code, &e.message)),
        }
    }

    /// A batch: its requests run concurrently, and their answers come back together, in
    /// order.
    async fn batch(self: &Arc<Self>, line: &str) -> Option<String> {
        let items = serde_json::from_str::<Vec<&RawValue>>(line).ok()?;
        let tasks: Vec<_> = items
            .into_iter()
            .map(|item| {
                let session = self.clone();
                let text = item.get().to_owned();
                tokio::spawn(async move { session.one(&text).await })
            })
            .collect();
        let mut replies = Vec::new();
        for task in tasks {
            if let Ok(Some(reply)) = task.await {
                replies.push(reply);
            }
        }
        (!replies.is_empty()).then(|| format!("[{}]", replies.join(",")))
    }

    /// Notifications and responses from the client.
    fn message(self: &Arc<Self>, message: Message<'_>) {
        match message {
            Message::Notification { method, params } => match method {
                "notifications/initialized" => self.ready.store(true, Ordering::Release),
                "notifications/cancelled" => self.cancel(params),
                "notifications/roots/list_changed" => {
                    for (conn, _) in self.gateway.connections() {
                        let _ = conn.send(jsonrpc::notification(method, params.map(RawValue::get)));
                    }
                }
                _ => tracing::debug!(method, "notification from the client ignored"),
            },
            Message::Response { id, outcome } => {
                let Ok(ours) = id.get().parse::<u64>() else {
                    return;
                };
                let Some(outgoing) = lock(&self.outgoing).remove(&ours) else {
                    return;
                };
                let Some(conn) = outgoing.conn.upgrade() else {
                    return;
                };
                let line = match outcome {
                    Outcome::Result(r) => jsonrpc::result(&outgoing.server_id, r.get()),
                    Outcome::Error(e) => jsonrpc::error_raw(&outgoing.server_id, e.get()),
                };
                let _ = conn.send(line);
            }
            Message::Request { .. } => {}
        }
    }

    async fn request(
        self: &Arc<Self>,
        id: &RawValue,
        method: &str,
        params: Option<&RawValue>,
    ) -> Reply {
        match method {
            "initialize" => Some(self.initialize(id, params)),
            "ping" => Some(jsonrpc::result(id, "{}")),
            "tools/list" => Some(self.list(id, Kind::Tool, params)),
            "prompts/list" => Some(self.list(id, Kind::Prompt, params)),
            "tools/call" => self.call(id, Kind::Tool, params).await,
            "prompts/get" => self.call(id, Kind::Prompt, params).await,
            "resources/list" => Some(self.gather(id, "resources/list", "resources").await),
            "resources/templates/list" => Some(
                self.gather(id, "resources/templates/list", "resourceTemplates")
                    .await,
            ),
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                self.by_uri(id, method, params).await
            }
            "completion/complete" => self.complete(id, params).await,
            "logging/setLevel" => Some(self.set_level(id, params)),
            _ => Some(jsonrpc::error(
                Some(id),
                jsonrpc::METHOD_NOT_FOUND,
                &format!("Method not found: {method}"),
            )),
        }
    }

    fn initialize(&self, id: &RawValue, params: Option<&RawValue>) -> String {
        let asked = params
            .and_then(jsonrpc::fields)
            .and_then(|f| jsonrpc::str_field(&f, "protocolVersion").map(|v| v.into_owned()));
        let version = match asked {
            Some(v) if PROTOCOL_VERSIONS.contains(&v.as_str()) => v,
            _ => PROTOCOL_VERSIONS[PROTOCOL_VERSIONS.len() - 1].to_owned(),
        };
        let _ = self.protocol_version.set(version.clone());
        let infos = self.gateway.server_infos();
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
        let result = format!(
            r#"{{"protocolVersion":{},"capabilities":{{{}}},"serverInfo":{{"name":"moniker","version":"{}"}}}}"#,
            jsonrpc::string(&version),
            caps.join(","),
            env!("CARGO_PKG_VERSION")
        );
        jsonrpc::result(id, &result)
    }

    /// `tools/list` and `prompts/list`: the session's view, in one page, or in pages of
    /// `page_size` items when one is configured (the cursor is the offset of the next page).
    fn list(&self, id: &RawValue, kind: Kind, params: Option<&RawValue>) -> String {
        let cursor = params
            .and_then(jsonrpc::fields)
            .and_then(|f| f.get("cursor").map(|c| c.get().to_owned()))
            .filter(|c| c != "null");
        let view = self.gateway.view();
        let equipped = self.equipped(&view);
        let result = match (kind, &equipped) {
            (Kind::Tool, Some(e)) => &e.tools_result,
            (Kind::Prompt, Some(e)) => &e.prompts_result,
            (Kind::Tool, None) => &view.tools_result,
            (Kind::Prompt, None) => &view.prompts_result,
        };
        let full;
        let result = if kind == Kind::Tool && self.manages() {
            // `{"tools":[...]}`: the management tools go at the end of the list.
            let body = &result[..result.len() - 2];
            let sep = if body.ends_with('[') { "" } else { "," };
            full = format!("{body}{sep}{}]}}", crate::toolsets::definitions());
            &full
        } else {
            result
        };
        match (self.gateway.settings.page_size, cursor) {
            (None, None) => jsonrpc::result(id, result),
            (None, Some(_)) => jsonrpc::error(
                Some(id),
                jsonrpc::INVALID_PARAMS,
                "Invalid cursor: moniker lists everything in one page",
            ),
            (Some(size), cursor) => match page(result, kind.section(), cursor.as_deref(), size) {
                Some(page) => jsonrpc::result(id, &page),
                None => jsonrpc::error(Some(id), jsonrpc::INVALID_PARAMS, "Invalid cursor"),
            },
        }
    }

    /// `tools/call` and `prompts/get`: resolve the name, rewrite it to the origin name, and
    /// forward.
    async fn call(self: &Arc<Self>, id: &RawValue, kind: Kind, params: Option<&RawValue>) -> Reply {
        let invalid = |why: &str| Some(jsonrpc::error(Some(id), jsonrpc::INVALID_PARAMS, why));
        let Some(params) = params else {
            return invalid("missing params");
        };
        let Some(fields) = jsonrpc::fields(params) else {
            return invalid("params must be an object");
        };
        let Some(name) = jsonrpc::str_field(&fields, "name") else {
            return invalid("missing `name`");
        };
        let noun = if kind == Kind::Tool { "tool" } else { "prompt" };
        let view = self.gateway.view();
        if kind == Kind::Tool && self.manages() && MANAGEMENT_TOOLS.contains(&name.as_ref()) {
            return Some(self.manage(id, &name, &fields, &view));
        }
        let equipped = self.equipped(&view);
        let resolved = match &equipped {
            Some(e) => moniker_surface::toolsets::resolve(&view.surface, &e.selection, kind, &name),
            None => view.surface.resolve(kind, &name),
        };
        let Some(resolved) = resolved else {
            tracing::debug!(name = %name, "{noun} not found");
            self.gateway
                .metrics
                .call(&name, None, CallOutcome::Unknown, None);
            return Some(jsonrpc::error(
                Some(id),
                jsonrpc::UNKNOWN_NAME,
                &format!("Unknown {noun}: {name}"),
            ));
        };
        let exposed = resolved.exposed;
        match resolved.via {
            Via::Alias => {
                tracing::debug!(alias = %name, canonical = %exposed.name, "Resolved {noun} alias to canonical name")
            }
            Via::Legacy => {
                let (tool, action) = exposed
                    .member_of
                    .as_ref()
                    .map_or(("", ""), |(t, a)| (t.as_str(), a.as_str()));
                tracing::debug!(legacy = %name, canonical = %exposed.name, action_tool = tool, action, "Resolved legacy name to action tool member");
            }
            Via::Name | Via::Action => {}
        }

        let (origin, arguments) = match &exposed.route {
            Route::Origin(origin) => (origin, None),
            Route::Action(route) => {
                match actions::dispatch(&route.specs, fields.get("arguments").copied()) {
                    Ok((i, arguments)) => {
                        let member = &route.members[i];
                        tracing::debug!(action_tool = %exposed.name, action = %member.action, member = %member.name, "action dispatched");
                        (&member.origin, Some(arguments))
                    }
                    Err(message) => {
                        tracing::debug!(action_tool = %exposed.name, %message, "action refused");
                        self.gateway.metrics.call(
                            &exposed.name,
                            Some(resolved.via),
                            CallOutcome::ToolError,
                            None,
                        );
                        let text = jsonrpc::string(&message);
                        let result = format!(
                            r#"{{"content":[{{"type":"text","text":{text}}}],"isError":true}}"#
                        );
                        return Some(jsonrpc::result(id, &result));
                    }
                }
            }
        };
        tracing::debug!(requested = %name, name = %exposed.name, via = resolved.via.as_str(), server = %origin.server, origin = %origin.name, "{noun} call");
        let origin_name = jsonrpc::string(&origin.name);
        let server = origin.server.clone();
        let mut set: Vec<(&str, &str)> = vec![("name", &origin_name)];
        if let Some(arguments) = &arguments {
            set.push(("arguments", arguments));
        }
        let (meta, token) = self.remap_progress(&fields);
        if let Some(meta) = &meta {
            set.push(("_meta", meta));
        }
        let rewritten = jsonrpc::with_fields(params, &set);
        let method = if kind == Kind::Tool {
            "tools/call"
        } else {
            "prompts/get"
        };
        let span = tracing::debug_span!("call", tool = %exposed.name, requested = %name, via = resolved.via.as_str(), server = %server, origin = %origin.name);
        let started = std::time::Instant::now();
        let (reply, outcome) = self
            .forward_call(id, &server, method, rewritten.as_deref())
            .instrument(span)
            .await;
        self.gateway.metrics.call(
            &exposed.name,
            Some(resolved.via),
            outcome,
            Some((&server, started.elapsed())),
        );
        if let Some(token) = token {
            self.gateway.forget_progress(&token);
        }
        reply
    }

    /// A call of one of moniker's management tools.
    fn manage(
        &self,
        id: &RawValue,
        tool: &str,
        fields: &jsonrpc::Fields<'_>,
        view: &Arc<View>,
    ) -> String {
        let arguments: serde_json::Value = fields
            .get("arguments")
            .and_then(|a| serde_json::from_str(a.get()).ok())
            .unwrap_or(serde_json::Value::Null);
        let active = self.equipped(view);
        let (result, effect) = crate::toolsets::call(
            &self.gateway.catalog,
            &view.surface,
            &view.up,
            active.as_deref(),
            tool,
            &arguments,
        );
        tracing::info!(tool, "management tool call");
        match effect {
            Effect::None => {}
            Effect::Equip(name) => {
                tracing::info!(toolset = %name, "toolset equipped");
                self.set_toolset(Some(name));
            }
            Effect::Unequip => {
                tracing::info!("toolset unequipped");
                self.set_toolset(None);
            }
        }
        jsonrpc::result(id, &result)
    }

    /// The client's progress token, swapped for one unique across sessions: (new `_meta`, token).
    fn remap_progress(
        self: &Arc<Self>,
        fields: &jsonrpc::Fields<'_>,
    ) -> (Option<String>, Option<String>) {
        let Some(meta) = fields.get("_meta") else {
            return (None, None);
        };
        let Some(meta_fields) = jsonrpc::fields(meta) else {
            return (None, None);
        };
        let Some(token) = meta_fields.get("progressToken") else {
            return (None, None);
        };
        let ours = self.gateway.register_progress(self, token);
        let meta = jsonrpc::with_fields(meta, &[("progressToken", &ours)]);
        (meta, Some(ours))
    }

    /// Sends a request to a server and relays its answer with the client's id.
    async fn forward(
        self: &Arc<Self>,
        id: &RawValue,
        server: &ServerId,
        method: &str,
        params: Option<&str>,
    ) -> Reply {
        self.forward_call(id, server, method, params).await.0
    }

    /// [`Self::forward`], with how the call ended (for metrics).
    async fn forward_call(
        self: &Arc<Self>,
        id: &RawValue,
        server: &ServerId,
        method: &str,
        params: Option<&str>,
    ) -> (Reply, CallOutcome) {
        let gone = || {
            let error = jsonrpc::error(
                Some(id),
                jsonrpc::SERVER_GONE,
                &format!("Server `{server}` is not connected"),
            );
            (Some(error), CallOutcome::ServerGone)
        };
        let Some(conn) = self.gateway.connection(server) else {
            return gone();
        };
        let Ok((ours, rx)) = conn.start(method, params) else {
            return gone();
        };
        let key = id.get().to_owned();
        {
            let mut in_flight = lock(&self.in_flight);
            let flight = in_flight.entry(key.clone()).or_default();
            if flight.cancelled {
                conn.forget(ours);
                return (None, CallOutcome::Cancelled);
            }
            *flight = InFlight {
                server: Some(server.clone()),
                conn: Arc::downgrade(&conn),
                id: ours,
                cancelled: false,
            };
        }
        let answer = tokio::time::timeout(self.gateway.settings.call_timeout, rx).await;
        let cancelled = {
            let mut in_flight = lock(&self.in_flight);
            let flight = in_flight.entry(key).or_default();
            flight.server = None;
            flight.cancelled
        };
        match answer {
            _ if cancelled => (None, CallOutcome::Cancelled),
            Ok(Ok(line)) => {
                let (reply, outcome) = relay(id, &line);
                (Some(reply), outcome)
            }
            Ok(Err(_)) => {
                let message = format!("Server `{server}` disconnected before answering");
                (
                    Some(jsonrpc::error(Some(id), jsonrpc::SERVER_GONE, &message)),
                    CallOutcome::ServerGone,
                )
            }
            Err(_) => {
                conn.forget(ours);
                let params = format!(r#"{{"requestId":{ours},"reason":"moniker: call timeout"}}"#);
                let _ = conn.send(jsonrpc::notification(
                    "notifications/cancelled",
                    Some(&params),
                ));
                let message = format!(
                    "Server `{server}` did not answer within {} s",
                    self.gateway.settings.call_timeout.as_secs_f64()
                );
                (
                    Some(jsonrpc::error(Some(id), jsonrpc::TIMEOUT, &message)),
                    CallOutcome::Timeout,
                )
            }
        }
    }

    /// A client's `notifications/cancelled`: passed to the server, and the answer dropped.
    fn cancel(&self, params: Option<&RawValue>) {
        let Some(fields) = params.and_then(jsonrpc::fields) else {
            return;
        };
        let Some(request_id) = fields.get("requestId") else {
            return;
        };
        let (conn, ours) = {
            let mut in_flight = lock(&self.in_flight);
            let Some(flight) = in_flight.get_mut(request_id.get()) else {
                return;
            };
            flight.cancelled = true;
            (flight.conn.upgrade(), flight.id)
        };
        let Some(conn) = conn else { return };
        conn.forget(ours);
        let our_id = ours.to_string();
        if let Some(params) =
            params.and_then(|p| jsonrpc::with_fields(p, &[("requestId", &our_id)]))
        {
            let _ = conn.send(jsonrpc::notification(
                "notifications/cancelled",
                Some(&params),
            ));
        }
    }

    /// A server's request to the client (sampling, elicitation, roots), under an id of ours.
    pub(crate) fn forward_server_request(
        &self,
        conn: &Arc<Connection>,
        id: &RawValue,
        method: &str,
        params: Option<&RawValue>,
    ) {
        let ours = self.next_id.fetch_add(1, Ordering::Relaxed);
        lock(&self.outgoing).insert(
            ours,
            Outgoing {
                conn: Arc::downgrade(conn),
                server_id: id.to_owned(),
            },
        );
        self.send(jsonrpc::request(
            &ours.to_string(),
            method,
            params.map(RawValue::get),
        ));
    }

    /// A server cancelled one of its requests to the client.
    pub(crate) fn server_cancelled(&self, conn: &Arc<Connection>, params: Option<&RawValue>) {
        let Some(fields) = params.and_then(jsonrpc::fields) else {
            return;
        };
        let Some(request_id) = fields.get("requestId") else {
            return;
        };
        let ours = {
            let mut outgoing = lock(&self.outgoing);
            let found = outgoing.iter().find_map(|(ours, o)| {
                (o.server_id.get() == request_id.get() && o.conn.as_ptr() == Arc::as_ptr(conn))
                    .then_some(*ours)
            });
            found.inspect(|ours| {
                outgoing.remove(ours);
            })
        };
        let Some(ours) = ours else { return };
        let ours = ours.to_string();
        if let Some(params) = params.and_then(|p| jsonrpc::with_fields(p, &[("requestId", &ours)]))
        {
            self.send(jsonrpc::notification(
                "notifications/cancelled",
                Some(&params),
            ));
        }
    }

    /// `resources/list` and `resources/templates/list`: every server's items, merged.
    async fn gather(&self, id: &RawValue, method: &'static str, key: &str) -> String {
        let mut items: Vec<Box<RawValue>> = Vec::new();
        for (conn, info) in self.gateway.connections() {
            if !info.has_resources {
                continue;
            }
            match crate::server::list_all(&conn, method, key, self.gateway.settings.call_timeout)
                .await
            {
                Ok(list) => items.extend(list),
                Err(e) => tracing::warn!(server = %conn.server, error = %e, "{method} failed"),
            }
        }
        let joined: Vec<&str> = items.iter().map(|r| r.get()).collect();
        jsonrpc::result(
            id,
            &format!(r#"{{{}:[{}]}}"#, jsonrpc::string(key), joined.join(",")),
        )
    }

    /// Resource requests go to the server that lists the URI, else to each server with
    /// resources until one answers without an error.
    async fn by_uri(
        self: &Arc<Self>,
        id: &RawValue,
        method: &str,
        params: Option<&RawValue>,
    ) -> Reply {
        let uri = params
            .and_then(jsonrpc::fields)
            .and_then(|f| jsonrpc::str_field(&f, "uri").map(|u| u.into_owned()));
        let Some(uri) = uri else {
            return Some(jsonrpc::error(
                Some(id),
                jsonrpc::INVALID_PARAMS,
                "missing `uri`",
            ));
        };
        let params = params.map(RawValue::get);
        let servers: Vec<ServerId> = self
            .gateway
            .connections()
            .into_iter()
            .filter(|(_, info)| info.has_resources)
            .map(|(conn, _)| conn.server.clone())
            .collect();
        let mut last = None;
        for server in &servers {
            let reply = self.forward(id, server, method, params).await;
            if reply.as_deref().is_some_and(|line| !is_error(line)) {
                let key = (server.clone(), uri.clone());
                match method {
                    "resources/subscribe" => {
                        lock(&self.subscriptions).insert(key);
                    }
                    "resources/unsubscribe" => {
                        lock(&self.subscriptions).remove(&key);
                    }
                    _ => {}
                }
            }
            match &reply {
                Some(line) if !is_error(line) || servers.len() == 1 => return reply,
                None => return None,
                _ => last = reply,
            }
        }
        last.or_else(|| {
            Some(jsonrpc::error(
                Some(id),
                -32002,
                &format!("Resource not found: {uri}"),
            ))
        })
    }

    /// `completion/complete`: by the prompt's name (resolved like a call) or the resource's URI.
    async fn complete(self: &Arc<Self>, id: &RawValue, params: Option<&RawValue>) -> Reply {
        let invalid = |why: &str| Some(jsonrpc::error(Some(id), jsonrpc::INVALID_PARAMS, why));
        let Some(params) = params else {
            return invalid("missing params");
        };
        let Some(fields) = jsonrpc::fields(params) else {
            return invalid("params must be an object");
        };
        let Some(reference) = fields.get("ref").copied() else {
            return invalid("missing `ref`");
        };
        let Some(ref_fields) = jsonrpc::fields(reference) else {
            return invalid("`ref` must be an object");
        };
        match jsonrpc::str_field(&ref_fields, "type").as_deref() {
            Some("ref/prompt") => {
                let Some(name) = jsonrpc::str_field(&ref_fields, "name") else {
                    return invalid("missing `ref.name`");
                };
                let view = self.gateway.view();
                let resolved = match self.equipped(&view) {
                    Some(e) => moniker_surface::toolsets::resolve(
                        &view.surface,
                        &e.selection,
                        Kind::Prompt,
                        &name,
                    ),
                    None => view.surface.resolve_prompt(&name),
                };
                let Some(resolved) = resolved else {
                    return Some(jsonrpc::error(
                        Some(id),
                        jsonrpc::UNKNOWN_NAME,
                        &format!("Unknown prompt: {name}"),
                    ));
                };
                let Some(origin) = resolved.exposed.origin() else {
                    return Some(jsonrpc::error(
                        Some(id),
                        jsonrpc::UNKNOWN_NAME,
                        &format!("Unknown prompt: {name}"),
                    ));
                };
                let origin_name = jsonrpc::string(&origin.name);
                let reference =
                    jsonrpc::with_fields(reference, &[("name", &origin_name)]).unwrap_or_default();
                let params = jsonrpc::with_fields(params, &[("ref", &reference)]);
                let server = origin.server.clone();
                self.forward(id, &server, "completion/complete", params.as_deref())
                    .await
            }
            Some("ref/resource") => {
                let servers: Vec<ServerId> = self
                    .gateway
                    .connections()
                    .into_iter()
                    .filter(|(_, info)| info.has_completions)
                    .map(|(conn, _)| conn.server.clone())
                    .collect();
                let mut last = None;
                for server in &servers {
                    let reply = self
                        .forward(id, server, "completion/complete", Some(params.get()))
                        .await;
                    match &reply {
                        Some(line) if !is_error(line) => return reply,
                        None => return None,
                        _ => last = reply,
                    }
                }
                last.or_else(|| {
                    Some(jsonrpc::result(
                        id,
                        r#"{"completion":{"values":[],"hasMore":false}}"#,
                    ))
                })
            }
            _ => invalid("`ref.type` must be `ref/prompt` or `ref/resource`"),
        }
    }

    fn set_level(&self, id: &RawValue, params: Option<&RawValue>) -> String {
        for (conn, info) in self.gateway.connections() {
            if info.has_logging {
                // Fire and forget: the level is advice, and a slow server must not hold the client.
                if let Ok((ours, _)) = conn.start("logging/setLevel", params.map(RawValue::get)) {
                    conn.forget(ours);
                }
            }
        }
        jsonrpc::result(id, "{}")
    }
}

/// One page of a rendered listing (`{"<key>":[...]}`): `size` items from the offset the cursor
/// (a JSON string of moniker's) names, with `nextCursor` when more follow. `None` for a cursor
/// moniker did not give.
fn page(listing: &str, key: &str, cursor: Option<&str>, size: usize) -> Option<String> {
    let start = match cursor {
        None => 0,
        Some(raw) => serde_json::from_str::<String>(raw)
            .ok()?
            .strip_prefix("page-")?
            .parse::<usize>()
            .ok()?,
    };
    let fields = jsonrpc::fields(serde_json::from_str::<&RawValue>(listing).ok()?)?;
    let items: Vec<&RawValue> = serde_json::from_str(fields.get(key)?.get()).ok()?;
    if start > items.len() {
        return None;
    }
    let end = items.len().min(start + size.max(1));
    let joined: Vec<&str> = items[start..end].iter().map(|i| i.get()).collect();
    let mut out = format!(r#"{{{}:[{}]"#, jsonrpc::string(key), joined.join(","));
    if end < items.len() {
        out.push_str(&format!(r#","nextCursor":"page-{end}""#));
    }
    out.push('}');
    Some(out)
}

fn is_error(line: &str) -> bool {
    matches!(
        jsonrpc::parse(line),
        Ok(Parsed::One(Message::Response {
            outcome: Outcome::Error(_),
            ..
        }))
    )
}

/// The server's answer under the client's id: result or error bytes unchanged.
fn relay(id: &RawValue, line: &str) -> (String, CallOutcome) {
    match jsonrpc::parse(line) {
        Ok(Parsed::One(Message::Response {
            outcome: Outcome::Result(r),
            ..
        })) => {
            let failed =
                jsonrpc::fields(r).and_then(|f| f.get("isError").map(|v| v.get() == "true"));
            let outcome = if failed == Some(true) {
                CallOutcome::ToolError
            } else {
                CallOutcome::Ok
            };
            (jsonrpc::result(id, r.get()), outcome)
        }
        Ok(Parsed::One(Message::Response {
            outcome: Outcome::Error(e),
            ..
        })) => (jsonrpc::error_raw(id, e.get()), CallOutcome::Error),
        _ => (
            jsonrpc::error(
                Some(id),
                jsonrpc::INTERNAL_ERROR,
                "the server's answer could not be read",
            ),
            CallOutcome::Error,
        ),
    }
}
