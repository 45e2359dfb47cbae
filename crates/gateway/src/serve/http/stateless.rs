//! 2026-07-28: a request that carries its own protocol version, answered by a session of its
//! own that ends with the answer.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::http::header::HeaderMap;
use axum::response::Response;
use tokio::sync::mpsc;

use super::answer::{Mode, trace_of};
use super::identity::{caller, client_name, principal};
use super::outbox::Activity;
use super::stream::{OneAnswer, PostStream, sse_once};
use super::{Client, Shared, accepted};
use crate::framing::To;
use crate::message::{self, Incoming, Message};
use crate::modern;
use crate::serve::checks::{self};
use crate::serve::respond::{failure, json};
use crate::session::{Answers, Session};

/// A 2026-07-28 request: its routing headers checked against its body, then answered by a
/// session of its own (the token's toolset), which ends with the answer. Nothing of it
/// stays: any replica can answer the next request.
pub(super) async fn stateless(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    incoming: Incoming,
    client: Client,
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
    // Who the client is, made once (a token's digest) for everything that counts by it. Its
    // session's own messages (not answers) have no stream to go to: they go nowhere.
    let Client { ref auth, toolset } = client;
    let who = principal(auth);
    let nowhere = crate::framing::To::Nowhere;
    let session = Session::of_principal(shared.gateway.clone(), nowhere, toolset, who.clone());
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
        return stream.into_sse(());
    }
    // The answer; with an event stream, what comes before it (progress) too, on the stream.
    // A stateless client that goes away before its answer (its connection closed: this
    // future, or the stream, dropped) takes its call with it: cancelled at the server.
    let gone = ClientGone {
        session: session.clone(),
        id: request.id().unwrap_or("null").to_owned(),
    };
    let held = shared.post_held_of(&who);
    let answers = |to: To| {
        Answers::new(to, mode == Mode::Sse)
            .with_trace(trace_of(&session, headers))
            .with_caller(caller(shared, auth, headers))
            .with_held(Arc::clone(&held))
    };
    if mode == Mode::Json {
        let (to, mut one) = OneAnswer::new(Arc::clone(&held), Activity::new().busy());
        session.handle(Ok(incoming), Some(answers(to)));
        return match one.recv().await {
            Some(first) => json(modern_status(&first), first),
            None => accepted(),
        };
    }
    let (tx, rx) = mpsc::unbounded_channel();
    session.handle(Ok(incoming), Some(answers(tx.into())));
    let mut stream = PostStream::new(rx, held, None, Activity::new().busy());
    let Some(first) = stream.recv().await else {
        return accepted();
    };
    if first.is_response() {
        return sse_once(&first);
    }
    stream.first = Some(first);
    stream.into_sse(gone)
}

/// A stateless request whose client may go away before its answer: when this is dropped, the
/// request is cancelled (nothing happens to one already answered).
pub(super) struct ClientGone {
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
pub(super) fn modern_status(reply: &Message) -> StatusCode {
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
