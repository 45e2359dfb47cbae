//! The hub: a registry of the clients' session handles ([`Peer`]s) and of the progress tokens
//! in flight, through which the gateway reaches clients without knowing what a session is.
//!
//! A peer is the half of a session that messages from servers need: where its messages go,
//! whether it is ready, what it subscribed to, which of its requests are running on which
//! server, and the servers' requests that wait for its answer.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use moniker_surface::ServerId;

use crate::budget;
use crate::connect::Connection;
use crate::message::Message;
use crate::sync::lock;

/// A request of the client's being handled: registered as it is read, so that a cancellation
/// that comes right after it is never missed; `server` is set once it is sent to one.
#[derive(Default)]
pub(crate) struct InFlight {
    pub server: Option<ServerId>,
    pub conn: Weak<Connection>,
    /// moniker's id for it on that server (0 until it is sent: ids start at 1).
    pub id: u64,
    pub cancelled: bool,
}

/// A request of a server's that waits for the client.
struct Outgoing {
    conn: Weak<Connection>,
    /// The server's id for it (raw JSON).
    server_id: String,
}

/// The requests sent to a client that wait for its answer, under ids of moniker's.
#[derive(Default)]
struct Asked {
    /// Servers' requests (sampling, elicitation, roots), by our id.
    outgoing: Mutex<HashMap<u64, Outgoing>>,
    /// moniker's own requests to the client (a 2026-07-28 server's input requests, asked of a
    /// 2025 client), by our id: where the answer goes.
    asks: Mutex<HashMap<u64, tokio::sync::oneshot::Sender<Message>>>,
    next_id: AtomicU64,
}

impl Asked {
    fn next(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// The requests in progress of every session of a client's principal together (an HTTP
/// token's, or a person's), when it has one that counts them ([`Hub::calls_of`]), and how
/// many of them are this client's, given back when it goes.
#[derive(Default)]
struct Counted {
    all: OnceLock<Arc<AtomicUsize>>,
    held: AtomicUsize,
}

/// One client, as servers' messages reach it.
pub struct Peer {
    out: crate::framing::To,
    ready: AtomicBool,
    /// Bound to a toolset for good (by an HTTP token): no management tools, and only the
    /// server messages about its own calls.
    bound: bool,
    /// The session's equipped toolset, by name: what it sees of the surface.
    toolset: Arc<Mutex<Option<String>>>,
    /// Who the client is, for what outlives a request: the session itself, or the token of a
    /// stateless client. What it starts (a task) is its own.
    pub(crate) principal: String,
    /// Its 2026-07-28 state: the listen stream, the calls that take input or are parked.
    pub(crate) era: crate::modern::client::ClientEra,
    /// Resources subscribed to, with the server that serves each.
    subscriptions: Mutex<HashSet<(ServerId, String)>>,
    /// The client's requests being handled, by their id (raw JSON).
    pub(crate) in_flight: Mutex<HashMap<String, InFlight>>,
    /// The requests sent to the client that wait for its answer: servers' and moniker's own.
    asked: Asked,
    /// Its requests in progress, counted with its principal's.
    calls: Counted,
    /// The least severe server log message the client takes ([`log_rank`]): what it set with
    /// `logging/setLevel` (or a 2026-07-28 request's `logLevel`), else `warning`; [`LOG_OFF`]
    /// for none.
    log_level: std::sync::atomic::AtomicU8,
    /// Which kinds the client has listed or called ([`listed_bit`] of each): a change to a
    /// list it never had is not announced (its first listing is the news).
    listed: std::sync::atomic::AtomicU8,
}

/// The bit of [`Peer::listed`] that says `kind` was listed.
fn listed_bit(kind: moniker_surface::Kind) -> u8 {
    match kind {
        moniker_surface::Kind::Tool => 1,
        moniker_surface::Kind::Prompt => 2,
    }
}

/// The notification that the list of `kind` changed.
fn list_changed_method(kind: moniker_surface::Kind) -> &'static str {
    match kind {
        moniker_surface::Kind::Tool => "notifications/tools/list_changed",
        moniker_surface::Kind::Prompt => "notifications/prompts/list_changed",
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(calls) = self.calls.all.get() {
            calls.fetch_sub(*self.calls.held.get_mut(), Ordering::AcqRel);
        }
    }
}

/// The levels of `notifications/message` (RFC 5424's, as MCP names them), least severe first.
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];
/// No server log message at all.
const LOG_OFF: u8 = LOG_LEVELS.len() as u8;
/// What a client that never set a level takes: `warning` and above. A client that opens a
/// session per call closes it soon after its result; log lines sent after that break some
/// SDKs (python-sdk#1960), and most are not for it.
const LOG_DEFAULT: u8 = 3;

/// The rank of a level in [`LOG_LEVELS`] (an unknown one ranks as the most severe: it goes).
pub fn log_rank(level: &str) -> u8 {
    LOG_LEVELS
        .iter()
        .position(|l| *l == level)
        .map_or(LOG_OFF - 1, |i| i as u8)
}

impl Peer {
    pub(crate) fn new(
        out: crate::framing::To,
        bound: bool,
        toolset: Arc<Mutex<Option<String>>>,
        principal: String,
    ) -> Self {
        Self {
            out,
            ready: AtomicBool::new(false),
            bound,
            toolset,
            principal,
            era: crate::modern::client::ClientEra::default(),
            subscriptions: Mutex::new(HashSet::new()),
            in_flight: Mutex::new(HashMap::new()),
            asked: Asked::default(),
            log_level: std::sync::atomic::AtomicU8::new(LOG_DEFAULT),
            listed: std::sync::atomic::AtomicU8::new(0),
            calls: Counted::default(),
        }
    }

    /// The toolset the session has equipped, if any.
    pub(crate) fn toolset(&self) -> Option<String> {
        lock(&self.toolset).clone()
    }

    /// Where the session's own messages go.
    pub(crate) fn out(&self) -> &crate::framing::To {
        &self.out
    }

    pub fn send(&self, message: Message) {
        let _ = self.out.send(message);
    }

    /// The client's requests count with every other of `calls`' (its principal's): set once,
    /// before its first request.
    pub(crate) fn count_calls_in(&self, calls: Arc<AtomicUsize>) {
        let _ = self.calls.all.set(calls);
    }

    /// Takes `n` places of the principal's requests in progress, unless that makes more than
    /// [`crate::budget::CALLS_EACH`]: then `Err` with how many it has.
    pub(crate) fn take_calls(&self, n: usize) -> Result<(), usize> {
        let Some(calls) = self.calls.all.get() else {
            return Ok(());
        };
        calls.fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
            (held + n <= crate::budget::CALLS_EACH).then_some(held + n)
        })?;
        self.calls.held.fetch_add(n, Ordering::AcqRel);
        Ok(())
    }

    /// One request taken with [`Peer::take_calls`] is over.
    pub(crate) fn give_call(&self) {
        let Some(calls) = self.calls.all.get() else {
            return;
        };
        let had = self
            .calls
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        if had.is_ok() {
            calls.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// The client takes server log messages of `level` and above (`None`: none at all).
    pub(crate) fn set_log_level(&self, level: Option<&str>) {
        let rank = level.map_or(LOG_OFF, log_rank);
        self.log_level.store(rank, Ordering::Relaxed);
    }

    /// A server's notification that concerns this client: a resource update to a 2026-07-28
    /// client's listen stream (stamped with its id), a log message when it is at the client's
    /// level or above, anything else as [`Peer::send_if_ready`].
    pub fn deliver(&self, message: Message) {
        if message.method() == Some("notifications/message") {
            let rank = message
                .str_of(crate::message::Field::Level)
                .map_or(LOG_OFF - 1, |l| log_rank(&l));
            if rank < self.log_level.load(Ordering::Relaxed) {
                return;
            }
        }
        if message.method() == Some("notifications/resources/updated") {
            if let Some(listen) = lock(&self.era.listen).as_ref() {
                let stamp = format!(
                    r#"{{"io.modelcontextprotocol/subscriptionId":{}}}"#,
                    listen.id
                );
                let params = message.params_with(&[crate::message::Edit::Set(
                    crate::message::Field::Meta,
                    &stamp,
                )]);
                listen.to.send(Message::notification_of(
                    "notifications/resources/updated",
                    params.as_ref(),
                ));
                return;
            }
        }
        self.send_if_ready(message);
    }

    /// Sends once the client said it is initialized.
    pub fn send_if_ready(&self, message: Message) {
        if self.is_ready() {
            self.send(message);
        }
    }

    /// A list change: to the listen stream of a 2026-07-28 client (when it opted in; stamped
    /// with the stream's id), else to a 2025 session once it is initialized.
    pub fn notify(&self, method: &str) {
        if let Some(listen) = lock(&self.era.listen).as_ref() {
            listen.notify(method);
            return;
        }
        self.send_if_ready(Message::notification(method, None));
    }

    /// The client lists or calls `kind` (said before the list is read, so that a change after
    /// it is announced).
    pub(crate) fn lists(&self, kind: moniker_surface::Kind) {
        self.listed.fetch_or(listed_bit(kind), Ordering::AcqRel);
    }

    /// Tells the client its list of `kind` changed, when it has one (it listed or called it,
    /// or listens).
    pub fn list_changed(&self, kind: moniker_surface::Kind) {
        let listed = self.listed.load(Ordering::Acquire) & listed_bit(kind) != 0;
        if !listed && !self.era.listens() {
            return;
        }
        self.notify(list_changed_method(kind));
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    pub(crate) fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    pub fn is_bound(&self) -> bool {
        self.bound
    }

    pub(crate) fn subscribe(&self, server: &ServerId, uri: &str, on: bool) {
        let key = (server.clone(), uri.to_owned());
        let mut subscriptions = lock(&self.subscriptions);
        if on {
            subscriptions.insert(key);
        } else {
            subscriptions.remove(&key);
        }
    }

    /// How many (server, resource) pairs this client follows.
    pub(crate) fn subscription_count(&self) -> usize {
        lock(&self.subscriptions).len()
    }

    /// Every resource this client follows, with its server.
    pub(crate) fn all_subscriptions(&self) -> Vec<(ServerId, String)> {
        lock(&self.subscriptions).iter().cloned().collect()
    }

    /// The resources this client follows at `server`.
    pub(crate) fn subscriptions_on(&self, server: &ServerId) -> Vec<String> {
        lock(&self.subscriptions)
            .iter()
            .filter(|(s, _)| s == server)
            .map(|(_, uri)| uri.clone())
            .collect()
    }

    pub fn subscribed(&self, server: &ServerId, uri: &str) -> bool {
        lock(&self.subscriptions).contains(&(server.clone(), uri.to_owned()))
    }

    /// Whether moniker's request `id` on `conn` is one of this client's calls in flight.
    pub(crate) fn runs(&self, conn: &Connection, id: u64) -> bool {
        lock(&self.in_flight)
            .values()
            .any(|f| f.id == id && std::ptr::eq(f.conn.as_ptr(), conn))
    }

    /// A call of this client's is in flight on `conn` itself.
    fn calls_on(&self, conn: &Connection) -> bool {
        lock(&self.in_flight)
            .values()
            .any(|f| std::ptr::eq(f.conn.as_ptr(), conn))
    }

    pub fn has_call_on(&self, server: &ServerId) -> bool {
        lock(&self.in_flight)
            .values()
            .any(|f| f.server.as_ref() == Some(server))
            || self.era.parked_on(server)
    }

    /// A call of this client's is running on `server`: in flight, and not parked while the
    /// client answers.
    fn runs_call_on(&self, server: &ServerId) -> bool {
        // In flight, then parked, then resumed: the order the others take them in.
        let in_flight = lock(&self.in_flight);
        let there = in_flight
            .iter()
            .filter(|(_, f)| f.server.as_ref() == Some(server))
            .map(|(call, _)| call);
        self.era.runs_on(server, there)
    }

    /// The call is parked: its server stays this peer's (a call parked again keeps the
    /// server it had: its client's request was answered, it is no longer in flight).
    pub(crate) fn park(&self, call: &str) {
        let server = lock(&self.in_flight)
            .get(call)
            .and_then(|f| f.server.clone());
        self.era.park(call, server);
    }

    /// A server's request to the client (sampling, elicitation, roots), under an id of ours.
    /// At most [`budget::SERVER_REQUESTS`] of a server unanswered, each id at most
    /// [`budget::SERVER_REQUEST_ID`] bytes: past them the server is answered at once.
    pub(crate) fn forward_server_request(&self, conn: &Arc<Connection>, request: &Message) {
        let server_id = request.id().unwrap_or("null");
        let kept = {
            let mut outgoing = lock(&self.asked.outgoing);
            match over_budget(&outgoing, conn, server_id) {
                Some(why) => Err(why),
                None => {
                    let ours = self.asked.next();
                    let conn = Arc::downgrade(conn);
                    let server_id = server_id.to_owned();
                    outgoing.insert(ours, Outgoing { conn, server_id });
                    Ok(ours)
                }
            }
        };
        let ours = match kept {
            Ok(ours) => ours,
            Err(why) => {
                let id = Some(server_id).filter(|id| id.len() <= budget::SERVER_REQUEST_ID);
                let _ = conn.send(Message::error(id, crate::message::LIMIT, &why));
                return;
            }
        };
        // The call on that server, when it is a 2026-07-28 call, asks its client itself: a
        // call in flight, or one parked while its client answers an earlier round.
        let mut calls: Vec<String> = lock(&self.in_flight)
            .iter()
            .filter(|(_, f)| f.server.as_ref() == Some(&conn.server))
            .map(|(call, _)| call.clone())
            .collect();
        calls.extend(self.era.calls_parked_on(&conn.server));
        if let Some(inputs) = self.era.inputs_of(&calls) {
            if inputs.send(Box::new((ours, request.clone()))).is_ok() {
                return;
            }
        }
        if self.era.is_modern() {
            // No call of a 2026-07-28 client takes it, and the client takes no requests.
            self.answer_server(&Message::error(
                Some(&ours.to_string()),
                crate::message::METHOD_NOT_FOUND,
                "the client takes no requests outside its calls",
            ));
            return;
        }
        self.send(request.with_id(&ours.to_string()));
    }

    /// Asks the client (a 2025 session) a request of moniker's own: its answer, or `None` when
    /// it does not answer within `timeout` or goes away.
    pub(crate) async fn ask(
        &self,
        method: &str,
        params: Option<&str>,
        timeout: std::time::Duration,
    ) -> Option<Message> {
        let ours = self.asked.next();
        let (tx, rx) = tokio::sync::oneshot::channel();
        lock(&self.asked.asks).insert(ours, tx);
        self.send(Message::request(&ours.to_string(), method, params));
        let answer = tokio::time::timeout(timeout, rx)
            .await
            .ok()
            .and_then(Result::ok);
        lock(&self.asked.asks).remove(&ours);
        answer
    }

    /// The client's answer to a server's request: back to the server under its own id (or to
    /// moniker, for one of its own).
    pub(crate) fn answer_server(&self, response: &Message) {
        let Some(ours) = response.our_id() else {
            return;
        };
        if let Some(waiter) = lock(&self.asked.asks).remove(&ours) {
            let _ = waiter.send(response.clone());
            return;
        }
        let Some(outgoing) = lock(&self.asked.outgoing).remove(&ours) else {
            return;
        };
        if let Some(conn) = outgoing.conn.upgrade() {
            let _ = conn.send(response.with_id(&outgoing.server_id));
        }
    }

    /// A server cancelled one of its requests to the client.
    pub(crate) fn server_cancelled(&self, conn: &Arc<Connection>, cancel: &Message) {
        let Some(request_id) = cancel.request_id() else {
            return;
        };
        let ours = {
            let mut outgoing = lock(&self.asked.outgoing);
            let found = outgoing.iter().find_map(|(ours, o)| {
                (o.server_id == request_id && o.conn.as_ptr() == Arc::as_ptr(conn)).then_some(*ours)
            });
            found.inspect(|ours| {
                outgoing.remove(ours);
            })
        };
        let Some(ours) = ours else { return };
        if let Some(message) = cancel.with_request_id(&ours.to_string()) {
            self.send(message);
        }
    }
}

/// Where a server's progress goes: the client's own token, and the stream of the request.
struct ProgressRoute {
    /// The server the call went to: the only one whose progress under the token is taken.
    server: moniker_surface::ServerId,
    peer: Weak<Peer>,
    token: String,
    to: crate::answers::Answers,
}

/// `subscriptions/listen` streams one principal may have open at once.
pub const MAX_STREAMS_EACH: usize = 16;

/// An open listen stream of a principal's, counted until it is dropped.
pub(crate) struct Stream<'a> {
    hub: &'a Hub,
    principal: String,
}

impl Drop for Stream<'_> {
    fn drop(&mut self) {
        let mut streams = lock(&self.hub.streams);
        if let Some(n) = streams.get_mut(&self.principal) {
            *n -= 1;
            if *n == 0 {
                streams.remove(&self.principal);
            }
        }
    }
}

/// Every client's handle, and the progress tokens moniker gave servers.
#[derive(Default)]
pub struct Hub {
    peers: Mutex<Vec<Weak<Peer>>>,
    /// Open listen streams, by principal.
    streams: Mutex<HashMap<String, usize>>,
    progress: Mutex<HashMap<String, ProgressRoute>>,
    /// Requests in progress by owner ([`Hub::calls_of`]).
    calls: crate::budget::Counters,
}

impl Hub {
    /// The counter of `owner`'s requests in progress (an HTTP token's, a person's), shared by
    /// all its sessions.
    pub(crate) fn calls_of(&self, owner: &str) -> Arc<AtomicUsize> {
        self.calls.of(owner)
    }

    pub(crate) fn add(&self, peer: &Arc<Peer>) {
        let mut peers = lock(&self.peers);
        peers.retain(|p| p.strong_count() > 0);
        peers.push(Arc::downgrade(peer));
    }

    pub fn peers(&self) -> Vec<Arc<Peer>> {
        lock(&self.peers).iter().filter_map(Weak::upgrade).collect()
    }

    /// The one client a server's own request or notification concerns, when moniker can tell:
    /// the client of the request it came with (`related`, moniker's id on `conn`); else the
    /// only client with a call in progress on that server; else, with no call there, the only
    /// client there is (one not bound to a toolset, as a client on stdio is). Never a guess
    /// between two: with two callers, one would answer, or read, what is the other's.
    pub(crate) fn concerned(&self, conn: &Connection, related: Option<u64>) -> Option<Arc<Peer>> {
        let peers = self.peers();
        if let Some(id) = related {
            let of = peers.iter().find(|p| p.runs(conn, id));
            if of.is_some() {
                return of.cloned();
            }
        }
        if conn
            .forwarding
            .one_persons
            .load(std::sync::atomic::Ordering::Acquire)
        {
            // One person's instance: only a client with a call running on this very
            // connection is concerned (the server's id is every person's instance's).
            let mut on_it = peers.iter().filter(|p| p.calls_on(conn));
            return match (on_it.next(), on_it.next()) {
                (Some(one), None) => Some(one.clone()),
                _ => None,
            };
        }
        let busy: Vec<&Arc<Peer>> = peers
            .iter()
            .filter(|p| p.has_call_on(&conn.server))
            .collect();
        match busy.as_slice() {
            [one] => return Some((*one).clone()),
            [] => {}
            several => {
                // A call parked while its client answers an earlier request is waiting for that
                // answer, not asking anew: of several, the one client whose call there runs
                // is the one (a client that went away leaves a parked call, not a running one).
                let mut running = several.iter().filter(|p| p.runs_call_on(&conn.server));
                return match (running.next(), running.next()) {
                    (Some(one), None) => Some((*one).clone()),
                    _ => None,
                };
            }
        }
        let mut ready = peers.iter().filter(|p| p.is_ready());
        match (ready.next(), ready.next()) {
            (Some(only), None) if !only.is_bound() => Some(only.clone()),
            _ => None,
        }
    }

    /// A progress token unique across sessions (raw JSON), standing for the client's `token`
    /// on a call sent to `server`; that server's progress under it goes to `to` with the
    /// client's token back.
    pub(crate) fn register_progress(
        &self,
        peer: &Arc<Peer>,
        server: &moniker_surface::ServerId,
        token: &str,
        to: crate::answers::Answers,
    ) -> String {
        // 128 random bits: not to be guessed from another call's token, by a server that sees
        // one or by a client whose own token moniker passes on unchanged.
        let ours = format!("\"moniker-{}\"", crate::auth::random_token());
        lock(&self.progress).insert(
            ours.clone(),
            ProgressRoute {
                server: server.clone(),
                peer: Arc::downgrade(peer),
                token: token.to_owned(),
                to,
            },
        );
        ours
    }

    /// Counts a listen stream of `principal`'s, unless it has [`MAX_STREAMS_EACH`] open.
    pub(crate) fn open_stream(&self, principal: &str) -> Option<Stream<'_>> {
        let mut streams = lock(&self.streams);
        let n = streams.entry(principal.to_owned()).or_default();
        if *n >= MAX_STREAMS_EACH {
            return None;
        }
        *n += 1;
        Some(Stream {
            hub: self,
            principal: principal.to_owned(),
        })
    }

    pub(crate) fn forget_progress(&self, token: &str) {
        lock(&self.progress).remove(token);
    }

    /// Server `from`'s `notifications/progress`: to the request's stream, under the client's
    /// token, when the token is of a call sent to `from` (a server never writes into another
    /// server's calls).
    pub(crate) fn route_progress(&self, from: &moniker_surface::ServerId, progress: &Message) {
        let Some(token) = progress.progress_token() else {
            return;
        };
        let (peer, original, to) = match lock(&self.progress).get(token) {
            Some(route) if route.server == *from => {
                (route.peer.clone(), route.token.clone(), route.to.clone())
            }
            _ => return,
        };
        if peer.strong_count() == 0 {
            return;
        }
        if let Some(message) = progress.with_progress_token(&original) {
            to.send(message);
        }
    }
}

/// Why a server's request to the client is not taken: too many of its requests unanswered in
/// `outgoing` (the session's), or an id too long to keep.
fn over_budget(
    outgoing: &HashMap<u64, Outgoing>,
    conn: &Arc<Connection>,
    server_id: &str,
) -> Option<String> {
    if server_id.len() > budget::SERVER_REQUEST_ID {
        return Some(format!(
            "moniker keeps request ids of at most {} bytes",
            budget::SERVER_REQUEST_ID
        ));
    }
    let asked = outgoing
        .values()
        .filter(|o| std::ptr::eq(o.conn.as_ptr(), Arc::as_ptr(conn)))
        .count();
    (asked >= budget::SERVER_REQUESTS).then(|| {
        format!(
            "the client has not answered {asked} requests of this server (at most {})",
            budget::SERVER_REQUESTS
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "Hold the boundary, round two", finding 3: progress tokens were a per-process salt and a
    /// counter, routed by token alone, so a server that saw one call's token wrote notes into
    /// calls on other servers. Each is now 128 random bits, and taken only from the server the
    /// call went to.
    #[test]
    fn a_server_writes_progress_only_into_its_own_calls() {
        let hub = Hub::default();
        let (out, _kept) = tokio::sync::mpsc::unbounded_channel();
        let peer = Arc::new(Peer::new(out.into(), false, Arc::default(), "p".to_owned()));
        let (to, mut got) = tokio::sync::mpsc::unbounded_channel();
        let (a, b): (ServerId, ServerId) = ("a".parse().unwrap(), "b".parse().unwrap());
        let to = crate::answers::Answers::new(to, true);
        let on_b = hub.register_progress(&peer, &b, "\"mine\"", to.clone());
        let on_a = hub.register_progress(&peer, &a, "\"theirs\"", to);
        // Two tokens share nothing a server could count on: no common prefix past moniker's
        // word, and 128 bits of randomness each (22 base64url characters).
        let random = |t: &str| {
            t.trim_matches('"')
                .trim_start_matches("moniker-")
                .to_owned()
        };
        assert_eq!(random(&on_a).len(), 22, "{on_a}");
        assert_ne!(random(&on_a)[..8], random(&on_b)[..8]);
        let note = |token: &str| {
            crate::message::parse_one(format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{token},"progress":1,"message":"sprayed"}}}}"#
            ))
            .expect("a notification")
        };
        // `a` learns its own token and writes into `b`'s call: nothing arrives.
        hub.route_progress(&a, &note(&on_b));
        assert!(got.try_recv().is_err(), "a note crossed servers");
        // Its own call's note arrives, under the client's token.
        hub.route_progress(&a, &note(&on_a));
        let arrived = got.try_recv().expect("its own note");
        assert!(arrived.text().contains("\"theirs\""), "{}", arrived.text());
        hub.route_progress(&b, &note(&on_b));
        assert!(
            got.try_recv()
                .expect("b's note")
                .text()
                .contains("\"mine\"")
        );
    }
}
