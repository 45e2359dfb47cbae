//! What a client's session holds of the 2026-07-28 era: its listen stream, and its calls that
//! take their server's requests for input (as `input_required` results) or are parked while
//! the client answers them.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use moniker_surface::ServerId;
use tokio::sync::mpsc;

use crate::message::Message;
use crate::sync::lock;

/// A server's request for input (under moniker's id for it) on its way to the call it is for:
/// boxed, so that the channel made for each call that may ask (most never do) is small; a
/// channel of the messages themselves makes its first block of 32 (2.8 KB) at once.
pub(crate) type Input = Box<(u64, Message)>;

/// A 2026-07-28 client's `subscriptions/listen` stream: which list changes it opted in to,
/// where they go (stamped with the request's id), and what ends it.
pub(crate) struct Listen {
    /// The `subscriptions/listen` request's id (raw JSON).
    pub id: String,
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    /// The listen request's answers: its notes count in its stream's budget.
    pub to: crate::answers::Answers,
    pub ended: Arc<tokio::sync::Notify>,
}

impl Listen {
    pub(crate) fn wants(&self, method: &str) -> bool {
        match method {
            "notifications/tools/list_changed" => self.tools,
            "notifications/prompts/list_changed" => self.prompts,
            "notifications/resources/list_changed" => self.resources,
            _ => false,
        }
    }

    /// Sends list change `method` on the stream, when it opted in to it: stamped with the
    /// stream's id.
    pub(crate) fn notify(&self, method: &str) {
        if self.wants(method) {
            let params = format!(
                r#"{{"_meta":{{"io.modelcontextprotocol/subscriptionId":{}}}}}"#,
                self.id
            );
            self.to.send(Message::notification(method, Some(&params)));
        }
    }
}

/// A client's 2026-07-28 state.
#[derive(Default)]
pub(crate) struct ClientEra {
    /// The client speaks 2026-07-28: it takes no requests from servers, only input-required
    /// results of its own calls.
    modern: AtomicBool,
    /// Its listen stream: its list changes go there, not to the session's messages.
    pub(crate) listen: Mutex<Option<Listen>>,
    /// A `subscriptions/listen` of this client is open (or opening).
    listening: AtomicBool,
    /// Its calls in progress, by the client's request id: the requests for input of each
    /// call's server go to its channel (to become an `input_required` result).
    inputs: Mutex<HashMap<String, mpsc::UnboundedSender<Input>>>,
    /// The servers of the calls parked while their client answers, by call: still this
    /// client's to hear.
    parked: Mutex<HashMap<String, Vec<ServerId>>>,
    /// The parked calls its client resumed with its answers: running again at their server
    /// until they end or park once more.
    resumed: Mutex<HashSet<String>>,
}

impl ClientEra {
    /// The client sent a 2026-07-28 request.
    pub(crate) fn speaks_modern(&self) {
        self.modern.store(true, Ordering::Relaxed);
    }

    /// Whether the client sent a 2026-07-28 request.
    pub(crate) fn is_modern(&self) -> bool {
        self.modern.load(Ordering::Relaxed)
    }

    /// Whether it has a listen stream open.
    pub(crate) fn listens(&self) -> bool {
        lock(&self.listen).is_some()
    }

    /// Takes the one listen a session may have open; false when it has one already.
    pub(crate) fn claim_listen(&self) -> bool {
        self.listening
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    pub(crate) fn release_listen(&self) {
        self.listening.store(false, Ordering::Release);
    }

    /// A call (by the client's request id) takes its server's requests for input.
    pub(crate) fn take_inputs(&self, call: &str, to: mpsc::UnboundedSender<Input>) {
        lock(&self.inputs).insert(call.to_owned(), to);
    }

    /// Where the requests for input of the first of `calls` that takes them go.
    pub(crate) fn inputs_of(&self, calls: &[String]) -> Option<mpsc::UnboundedSender<Input>> {
        let inputs = lock(&self.inputs);
        calls.iter().find_map(|call| inputs.get(call).cloned())
    }

    /// The call is parked, its server (`None`: not sent to one) still its own (a call parked
    /// again keeps the server it had).
    pub(crate) fn park(&self, call: &str, server: Option<ServerId>) {
        lock(&self.resumed).remove(call);
        let mut parked = lock(&self.parked);
        let servers = parked.entry(call.to_owned()).or_default();
        if let Some(server) = server
            && !servers.contains(&server)
        {
            servers.push(server);
        }
    }

    /// The parked call goes on: its client answered, and its server works on it again.
    pub(crate) fn resume(&self, call: &str) {
        lock(&self.resumed).insert(call.to_owned());
    }

    /// The call's request to `server` is over: a parked call no longer counts as one in
    /// progress there.
    pub(crate) fn forwarded(&self, call: &str, server: &ServerId) {
        if let Some(servers) = lock(&self.parked).get_mut(call) {
            servers.retain(|s| s != server);
        }
    }

    /// The call is over (or given up).
    pub(crate) fn unpark(&self, call: &str) {
        lock(&self.parked).remove(call);
        lock(&self.resumed).remove(call);
        lock(&self.inputs).remove(call);
    }

    /// Whether a parked call of the client's is still `server`'s.
    pub(crate) fn parked_on(&self, server: &ServerId) -> bool {
        lock(&self.parked).values().flatten().any(|s| s == server)
    }

    /// The client's parked calls on `server`.
    pub(crate) fn calls_parked_on(&self, server: &ServerId) -> Vec<String> {
        lock(&self.parked)
            .iter()
            .filter(|(_, servers)| servers.contains(server))
            .map(|(call, _)| call.clone())
            .collect()
    }

    /// Whether a call of the client's runs on `server`, of `in_flight` (calls in flight there)
    /// and its parked calls: one in flight and not parked, or parked and resumed.
    pub(crate) fn runs_on<'c>(
        &self,
        server: &ServerId,
        mut in_flight: impl Iterator<Item = &'c String>,
    ) -> bool {
        let parked = lock(&self.parked);
        let resumed = lock(&self.resumed);
        let running = |call: &String| !parked.contains_key(call) || resumed.contains(call);
        in_flight.any(running)
            || parked
                .iter()
                .any(|(call, servers)| resumed.contains(call) && servers.contains(server))
    }
}
