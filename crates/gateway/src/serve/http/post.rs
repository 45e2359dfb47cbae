//! POST: a body of JSON-RPC messages read (its type, its size, in time) and parsed once, then
//! answered in its session as JSON or as an SSE stream.

use std::sync::Arc;

use axum::body::Body;
use axum::http::StatusCode;
use axum::http::header::{self, HeaderMap};
use axum::response::Response;
use futures_util::StreamExt;

use super::answer::{Mode, answer, trace_of};
use super::identity::caller;
use super::sessions::{initialize, session_of};
use super::stateless::stateless;
use super::{BODY_TIMEOUT, Client, DEFAULT_MAX_BODY, Shared, accepted, header_str};
use crate::headers::SESSION_ID;
use crate::message::{self, Incoming, Message};
use crate::serve::checks;
use crate::serve::respond::{failure, json};

/// What a POST body holds.
pub(super) struct Shape {
    /// It has requests (or invalid batch elements), so it gets a response body.
    needs_answer: bool,
    /// It is one `initialize` request.
    initialize: bool,
    /// A batch with an `initialize` in it.
    batched_initialize: bool,
    /// Its one request asks for progress.
    progress: bool,
    /// It is one 2026-07-28 request (its `_meta` envelope, or `server/discover`): answered
    /// without a session.
    stateless: bool,
}

impl Shape {
    fn of(incoming: &Incoming) -> Self {
        let mut shape = Self {
            needs_answer: false,
            initialize: false,
            batched_initialize: false,
            progress: false,
            stateless: false,
        };
        match incoming {
            Incoming::One(m) if m.is_request() => {
                shape.needs_answer = true;
                shape.initialize = m.method() == Some("initialize");
                shape.progress = m.progress_token().is_some();
                shape.stateless = m.method() == Some("server/discover")
                    || m.field(crate::message::Field::Version).is_some();
            }
            Incoming::One(_) => {}
            Incoming::Batch(items) => {
                for item in items {
                    match item {
                        Ok(m) if m.is_request() => {
                            shape.needs_answer = true;
                            shape.batched_initialize |= m.method() == Some("initialize");
                        }
                        Err(_) => shape.needs_answer = true,
                        Ok(_) => {}
                    }
                }
            }
        }
        shape
    }
}

pub(super) enum BodyError {
    TooLarge,
    Broken,
}

/// The whole body, refused as soon as it passes `max` bytes.
pub(super) async fn read_body(body: Body, max: usize) -> Result<Vec<u8>, BodyError> {
    let mut data = body.into_data_stream();
    let mut out = Vec::new();
    while let Some(chunk) = data.next().await {
        let chunk = chunk.map_err(|_| BodyError::Broken)?;
        if out.len() + chunk.len() > max {
            return Err(BodyError::TooLarge);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

pub(super) fn too_large(max: usize) -> Response {
    failure(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("Payload Too Large: the body is over the limit of {max} bytes"),
    )
}

/// POST: one JSON-RPC message or a batch.
pub(super) async fn post(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    body: Body,
    client: Client,
) -> Response {
    let incoming = match read_messages(shared, headers, body).await {
        Ok(incoming) => incoming,
        Err(refusal) => return refusal,
    };
    let shape = Shape::of(&incoming);
    let mode = if shape.needs_answer {
        let Some(mode) = Mode::accepted(headers, shape.progress) else {
            return failure(
                StatusCode::NOT_ACCEPTABLE,
                "Not Acceptable: the client must accept application/json or text/event-stream",
            );
        };
        Some(mode)
    } else {
        None
    };
    if !headers.contains_key(SESSION_ID) {
        return match mode {
            Some(mode) if shape.stateless => {
                stateless(shared, headers, incoming, client, mode).await
            }
            // Boxed: once a session, and its future would size every POST's.
            Some(mode) if shape.initialize => {
                Box::pin(initialize(shared, headers, incoming, client, mode)).await
            }
            _ if shape.batched_initialize => failure(
                StatusCode::BAD_REQUEST,
                "Bad Request: initialize must be sent alone, not in a batch",
            ),
            _ => failure(
                StatusCode::BAD_REQUEST,
                "Bad Request: the Mcp-Session-Id header is required (send initialize first)",
            ),
        };
    }
    // Its caller as this request says it (a refreshed token, the headers it sends now).
    let this_caller = mode.and_then(|_| caller(shared, &client.auth, headers));
    let (_, http) = match session_of(shared, headers, &client) {
        Ok(found) => found,
        Err(reject) => return reject.response(),
    };
    match mode {
        None => {
            let _busy = http.activity.busy();
            // Notifications and responses are handled before `handle` returns.
            http.session.handle(Ok(incoming), None);
            accepted()
        }
        Some(mode) => {
            let trace = trace_of(&http.session, headers);
            answer(&http, incoming, mode, trace, this_caller).await
        }
    }
}

/// The body's messages, parsed once (the session takes them as they are): refused unless it
/// is JSON (415), within `http.max_body` (413, also while it streams), in time (408), UTF-8
/// and JSON-RPC (400).
async fn read_messages(
    shared: &Shared,
    headers: &HeaderMap,
    body: Body,
) -> Result<Incoming, Response> {
    if !checks::is_json_content_type(header_str(headers, header::CONTENT_TYPE)) {
        return Err(failure(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Unsupported Media Type: Content-Type must be application/json",
        ));
    }
    let max = shared
        .gateway
        .control
        .http()
        .max_body
        .map_or(DEFAULT_MAX_BODY, |max| max as usize);
    let declared = header_str(headers, header::CONTENT_LENGTH).and_then(|l| l.parse::<u64>().ok());
    if declared.is_some_and(|l| l > max as u64) {
        return Err(too_large(max));
    }
    let bytes = match tokio::time::timeout(BODY_TIMEOUT, read_body(body, max)).await {
        Err(_) => {
            return Err(failure(
                StatusCode::REQUEST_TIMEOUT,
                "Request Timeout: the body did not arrive in time",
            ));
        }
        Ok(Ok(bytes)) => bytes,
        Ok(Err(BodyError::TooLarge)) => return Err(too_large(max)),
        Ok(Err(BodyError::Broken)) => {
            return Err(failure(
                StatusCode::BAD_REQUEST,
                "Bad Request: the body could not be read",
            ));
        }
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return Err(json(
            StatusCode::BAD_REQUEST,
            Message::error(None, message::PARSE_ERROR, "Parse error: not UTF-8"),
        ));
    };
    // The body is parsed here, once; the session takes the parsed messages.
    message::parse(text).map_err(|invalid| json(StatusCode::BAD_REQUEST, invalid.answer()))
}
