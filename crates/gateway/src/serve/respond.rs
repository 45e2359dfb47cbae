//! The HTTP responses both endpoints make: a status with a body, a JSON-RPC error of the
//! transport's own, a refusal of a request without a valid token.

use axum::body::Body;
use axum::http::StatusCode;
use axum::http::header::{self, HeaderName, HeaderValue};
use axum::response::Response;

use super::checks::Refused;
use crate::message::{self, Message};

pub(super) fn set(response: &mut Response, name: HeaderName, value: &'static str) {
    response
        .headers_mut()
        .insert(name, HeaderValue::from_static(value));
}

pub(super) fn with_status(status: StatusCode, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
}

/// A JSON body (a JSON-RPC message).
pub(super) fn json(status: StatusCode, message: Message) -> Response {
    let body = message.into_text();
    let mut response = with_status(status, Body::from(body));
    set(&mut response, header::CONTENT_TYPE, "application/json");
    response
}

/// An error of the transport, as a JSON-RPC error without an id.
pub(super) fn failure(status: StatusCode, text: &str) -> Response {
    let code = if status == StatusCode::BAD_REQUEST {
        message::INVALID_REQUEST
    } else {
        -32000
    };
    json(status, Message::error(None, code, text))
}

pub(super) fn unauthorized(why: Refused) -> Response {
    let (message, challenge) = match why {
        Refused::Missing => (
            "Unauthorized: a bearer token is required",
            r#"Bearer realm="moniker""#,
        ),
        Refused::Invalid => (
            "Unauthorized: the bearer token is not valid",
            r#"Bearer realm="moniker", error="invalid_token""#,
        ),
    };
    challenged(StatusCode::UNAUTHORIZED, message, challenge)
}

/// A refusal with its `WWW-Authenticate` challenge (left out if it is not a header value).
pub(super) fn challenged(status: StatusCode, message: &str, challenge: &str) -> Response {
    let mut response = failure(status, message);
    if let Ok(value) = HeaderValue::from_str(challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}
