//! Input-required results (MCP 2026-07-28, multi-round-trip requests) for servers of the 2025
//! era. A 2025 server asks for elicitation or sampling with a request of its own, in the middle
//! of a call; a 2026-07-28 client takes no requests from the server. So a modern client's call
//! is watched for its server's requests ([`Running`]: polled in place, moved to a task of its
//! own when it is parked), and when its server asks for input, the client gets an
//! `input_required` result instead: the server's requests (under moniker's ids), and a
//! `requestState` that names the parked call. The client retries the call with its answers
//! (`inputResponses`) and that state: the answers go to the server, and the call goes on, to
//! its result or to the next `input_required`. The server never knows.
//!
//! The parked calls are kept, and bounded, in [`crate::parked`].

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;

use moniker_surface::ServerId;

use super::{Answers, Reply, Session, id_of};
use crate::message::{self, Edit, Field, Message, Params};
use crate::modern::Answerable;
use crate::modern::input::{input_required, input_required_of};
use crate::parked::{Parked, Running, STATE_PREFIX};

impl Session {
    /// A 2026-07-28 `tools/call`, `prompts/get` or `resources/read`: answered with its result,
    /// or with `input_required` when its server asks for input; a retry carrying
    /// `requestState` resumes the parked call with the client's answers.
    pub(super) async fn interactive(
        self: &Arc<Self>,
        request: &Message,
        answers: &Answers,
        can: Answerable,
    ) -> Reply {
        let id = request.id().unwrap_or("null").to_owned();
        let state = request.str_of(Field::RequestState).map(|s| s.into_owned());
        let target = target_of(request);
        // moniker's own states name a parked call; any other is a modern server's, and goes to
        // it untouched with the retried call.
        if let Some(state) = state.filter(|s| s.starts_with(STATE_PREFIX)) {
            let parked = self
                .gateway
                .services
                .parked
                .take(&state, &self.peer.principal, &target);
            let Some(parked) = parked else {
                return Some(Message::error(
                    Some(&id),
                    message::INVALID_PARAMS,
                    "unknown or expired `requestState`: send the request again without it",
                ));
            };
            // The answers, read once here (the only reader of their keys).
            let responses = request
                .field(Field::InputResponses)
                .and_then(message::fields);
            // Running again before its server hears the answers: a request it makes next is
            // this call's, not one of a call whose client went away.
            parked.peer.era.resume(&parked.call);
            for (key, response) in responses.iter().flatten() {
                parked
                    .peer
                    .answer_server(&Message::result(key, response.get()));
            }
            return self.settle(parked, &id).await;
        }
        let (tx, inputs) = mpsc::unbounded_channel();
        self.peer.era.take_inputs(&id, tx);
        let session = self.clone();
        let call = request.clone();
        let to = answers.clone();
        let task = Running::here(async move { session.request(&call, &to).await });
        let running = Parked {
            call: id.clone(),
            task,
            inputs,
            peer: self.peer.clone(),
            can,
            at: Instant::now(),
            principal: self.peer.principal.clone(),
            target,
        };
        self.settle(running, &id).await
    }

    /// Waits for the call's result (answered under `id`), or for its server's first request
    /// for input the client can answer: then the call is parked and the client told what to
    /// answer. A request the client did not declare it answers is refused to the server at
    /// once; if the call then fails, the client is told what it lacked, as the 2026-07-28 era
    /// says (-32021 with `requiredCapabilities`), and if it succeeds anyway (the server did
    /// not need it), it gets the result.
    async fn settle(&self, mut call: Parked, id: &str) -> Reply {
        let mut lacking: Vec<String> = Vec::new();
        loop {
            tokio::select! {
                done = &mut call.task => {
                    call.peer.era.unpark(&call.call);
                    // A request that came for this call meanwhile (or was taken for it) is
                    // answered to its server, never left waiting.
                    while let Ok(input) = call.inputs.try_recv() {
                        let (ours, request) = *input;
                        let method = request.method().unwrap_or_default();
                        call.peer.answer_server(&Message::error(
                            Some(&ours.to_string()),
                            message::METHOD_NOT_FOUND,
                            &format!("the call that {method} was for is over"),
                        ));
                    }
                    let reply = done.map(|reply| reply.with_id(id));
                    let failed = reply.as_ref().is_some_and(|r| {
                        r.error_code().is_some() || r.field(Field::IsError) == Some("true")
                    });
                    if failed && !lacking.is_empty() {
                        let methods: Vec<&str> = lacking.iter().map(String::as_str).collect();
                        return Some(crate::modern::missing_capability(id, &methods));
                    }
                    return reply;
                }
                Some(first) = call.inputs.recv() => {
                    let asked = gather(*first, &mut call.inputs).await;
                    let (asked, refused): (Vec<_>, Vec<_>) = asked
                        .into_iter()
                        .partition(|(_, request)| call.can.answers(request.method().unwrap_or_default()));
                    for (ours, request) in &refused {
                        let method = request.method().unwrap_or_default();
                        tracing::debug!(method, "the client did not declare it answers this: refused to the server");
                        call.peer.answer_server(&Message::error(
                            Some(&ours.to_string()),
                            message::METHOD_NOT_FOUND,
                            &format!("the client does not support {method}"),
                        ));
                        lacking.push(method.to_owned());
                    }
                    if asked.is_empty() {
                        continue;
                    }
                    call.peer.park(&call.call);
                    tracing::debug!(requests = asked.len(), "the server asks for input: answered input_required");
                    let state = format!("{STATE_PREFIX}{}", crate::auth::random_state());
                    let result = input_required(id, &asked, &state);
                    call.at = Instant::now();
                    // It runs on while its client answers: in a task of its own from now.
                    call.task = call.task.detach();
                    self.gateway.services.parked.park(state, call);
                    return Some(result);
                }
            }
        }
    }
}

/// A server that asks several things at once sends them one after the other: the client is
/// asked them together, those that come within [`GATHER`] of the one before (for
/// [`GATHER_MAX`] at the most).
async fn gather(
    first: (u64, Message),
    inputs: &mut mpsc::UnboundedReceiver<crate::modern::client::Input>,
) -> Vec<(u64, Message)> {
    let mut asked = vec![first];
    let until = tokio::time::Instant::now() + GATHER_MAX;
    while let Ok(Some(more)) = tokio::time::timeout_at(
        until.min(tokio::time::Instant::now() + GATHER),
        inputs.recv(),
    )
    .await
    {
        asked.push(*more);
    }
    asked
}

/// What a call calls, as a parked call remembers it: its method and the name or URI it names.
fn target_of(request: &Message) -> String {
    let named = request.name().or_else(|| request.uri()).unwrap_or_default();
    format!("{} {named}", request.method().unwrap_or_default())
}

/// How long a server's next request for input is waited for after one, to ask the client
/// them together.
const GATHER: std::time::Duration = std::time::Duration::from_millis(20);
/// The longest a client's input requests are gathered.
const GATHER_MAX: std::time::Duration = std::time::Duration::from_millis(100);

/// The most rounds of input one call of a 2025 client may take.
const MAX_ROUNDS: usize = 16;

impl Session {
    /// The params of a call of this session to `server`, as that server must have them: a
    /// 2026-07-28 server is told the capabilities of a 2025 client (moniker asks that client
    /// for what the server needs).
    pub(super) fn for_server(&self, server: &ServerId, params: Option<Params>) -> Option<Params> {
        let Some(capabilities) = self.client_capabilities.get() else {
            return params;
        };
        if !self.to_modern(server) {
            return params;
        }
        params.map(|p| p.edit(&[Edit::Set(Field::Capabilities, capabilities)]))
    }

    /// `server` speaks 2026-07-28.
    fn to_modern(&self, server: &ServerId) -> bool {
        self.gateway
            .servers
            .connection(server)
            .is_some_and(|c| c.is_modern())
    }

    /// A 2026-07-28 server's `input_required` result for a 2025 client: each of its input
    /// requests is asked of the client, as a server's own request would be, and the call is
    /// sent again with the answers and the server's `requestState`, until it has a result.
    /// Any other reply, or one for a 2026-07-28 client (which gets it as it is), passes.
    pub(super) async fn input_for_server(
        self: &Arc<Self>,
        out: super::relay::Outbound<'_>,
        reply: Reply,
    ) -> Reply {
        if self.client_capabilities.get().is_none() || !self.to_modern(out.server) {
            return reply;
        }
        // Boxed: rounds are rare, and their future would size every call's task.
        Box::pin(self.input_rounds(out, reply)).await
    }

    /// [`Self::input_for_server`]'s rounds, for a 2025 client of a 2026-07-28 server.
    async fn input_rounds(
        self: &Arc<Self>,
        out: super::relay::Outbound<'_>,
        mut reply: Reply,
    ) -> Reply {
        let (request, params) = (out.request, out.params);
        let timeout = self.gateway.settings.config.call_timeout;
        for _ in 0..MAX_ROUNDS {
            let Some(asked) = reply.as_ref().and_then(input_required_of) else {
                return reply;
            };
            let mut responses: Vec<String> = Vec::with_capacity(asked.requests.len());
            for (key, method, params) in &asked.requests {
                let answer = self.peer.ask(method, params.as_deref(), timeout).await;
                let Some(result) = answer.as_ref().and_then(|a| a.result_text()) else {
                    let why = answer
                        .as_ref()
                        .and_then(|a| a.error_text().map(str::to_owned))
                        .unwrap_or_else(|| "no answer".to_owned());
                    let text = format!("the client did not answer the server's {method}: {why}");
                    return Some(Message::result(
                        id_of(request),
                        &crate::errors::tool_error(&text),
                    ));
                };
                responses.push(format!("{}:{result}", message::string(key)));
            }
            let inputs = format!("{{{}}}", responses.join(","));
            let state = asked.state.as_deref().map(message::string);
            let mut set = vec![Edit::Set(Field::InputResponses, inputs.as_str())];
            if let Some(state) = &state {
                set.push(Edit::Set(Field::RequestState, state));
            }
            let retried = params.map(|p| p.edit(&set));
            let again = super::relay::Outbound {
                params: retried.as_ref(),
                ..out
            };
            reply = self.forward_call(again).await.0;
        }
        if reply.as_ref().and_then(input_required_of).is_some() {
            let text = format!("the server still asks for input after {MAX_ROUNDS} rounds");
            return Some(Message::result(
                id_of(request),
                &crate::errors::tool_error(&text),
            ));
        }
        reply
    }
}
