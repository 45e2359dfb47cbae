//! A body's requests answered in their session: as JSON once the answer is there, or as an SSE
//! stream ([`Mode`]); the one answer a session's own request awaits ([`answer_of`]); the trace
//! context an HTTP request carries.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::http::header::{self, HeaderMap};
use axum::response::Response;
use tokio::sync::mpsc;

use super::stream::{OneAnswer, PostStream};
use super::{HttpSession, accepted, header_str};
use crate::framing::To;
use crate::identity::Caller;
use crate::message::{Incoming, Message};
use crate::serve::checks::Accept;
use crate::serve::respond::json;
use crate::session::{Answers, Session};
use crate::telemetry::TraceContext;

/// How a POST's response goes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Json,
    Sse,
}

impl Mode {
    /// How a body with requests is answered, by what the client accepts: a request that asks
    /// for progress as a stream that carries it; else JSON when it may be; `None`: neither.
    pub(super) fn accepted(headers: &HeaderMap, progress: bool) -> Option<Self> {
        let accept = Accept::parse(header_str(headers, header::ACCEPT));
        if accept.sse && progress {
            Some(Self::Sse)
        } else if accept.json {
            Some(Self::Json)
        } else if accept.sse {
            Some(Self::Sse)
        } else {
            None
        }
    }
}

/// The one answer to what was sent (its progress not wanted): `None` when there is none
/// (a cancelled request).
pub(super) async fn answer_of(
    session: &Arc<Session>,
    incoming: Incoming,
    trace: Option<TraceContext>,
) -> Option<Message> {
    let (to, rx) = To::once();
    session.handle(
        Ok(incoming),
        Some(Answers::new(to, false).with_trace(trace)),
    );
    rx.await.ok()
}

/// The W3C trace context of an HTTP request (`traceparent`, `tracestate`), read only when
/// traces are on.
pub(super) fn trace_of(session: &Session, headers: &HeaderMap) -> Option<TraceContext> {
    if !session.traces() {
        return None;
    }
    Some(TraceContext {
        traceparent: header_str(headers, "traceparent")?.to_owned(),
        tracestate: header_str(headers, "tracestate").map(str::to_owned),
    })
}

/// Runs a body with requests in the session and answers it: as JSON once the answer is there,
/// or as an SSE stream: the request's progress (when it asked for it), keep-alive comments
/// while the answer is awaited, then the answer.
///
/// The requests run in tasks of the session's: a client that goes away does not cancel them
/// (the spec: disconnection is not cancellation; a client cancels with
/// `notifications/cancelled`), they finish and their answers are dropped.
pub(super) async fn answer(
    http: &HttpSession,
    incoming: Incoming,
    mode: Mode,
    trace: Option<TraceContext>,
    caller: Option<Caller>,
) -> Response {
    let busy = http.activity.busy();
    let held = Arc::clone(&http.post_held);
    let answers = |to: To| {
        Answers::new(to, mode == Mode::Sse)
            .with_trace(trace)
            .with_caller(caller)
            .with_held(Arc::clone(&held))
    };
    match mode {
        Mode::Json => {
            let (to, mut one) = OneAnswer::new(Arc::clone(&held), busy);
            http.session.handle(Ok(incoming), Some(answers(to)));
            match one.recv().await {
                Some(reply) => json(StatusCode::OK, reply),
                // Cancelled by the client: nothing to answer.
                None => accepted(),
            }
        }
        Mode::Sse => {
            let (tx, rx) = mpsc::unbounded_channel();
            http.session.handle(Ok(incoming), Some(answers(tx.into())));
            PostStream::new(rx, held, None, busy).into_sse(())
        }
    }
}
