//! The input-required translation of MCP 2026-07-28 (multi-round-trip requests): reading a
//! server's `input_required` result, and writing one for a client from the requests a 2025
//! server sent in the middle of a call.

use crate::message::{self, Field, Message};

/// An `input_required` result: its requests (key, method, params) and its state (each may be
/// absent, not both).
pub(crate) struct Asked {
    pub requests: Vec<(String, String, Option<String>)>,
    pub state: Option<String>,
}

pub(crate) fn input_required_of(reply: &Message) -> Option<Asked> {
    if reply.str_of(Field::ResultType).as_deref() != Some("input_required") {
        return None;
    }
    let state = reply
        .str_of(Field::ResultRequestState)
        .map(|s| s.into_owned());
    // The server's requests, read here (the only reader of their parts).
    let requests: Vec<(String, String, Option<String>)> = reply
        .field(Field::InputRequests)
        .and_then(message::fields)
        .into_iter()
        .flatten()
        .filter_map(|(key, asked)| {
            let asked = message::fields(asked.get())?;
            Some((
                key.to_string(),
                message::str_field(&asked, "method")?.into_owned(),
                asked.get("params").map(|p| p.get().to_owned()),
            ))
        })
        .collect();
    if state.is_none() && requests.is_empty() {
        return None;
    }
    Some(Asked { requests, state })
}

/// The `input_required` result answering `id`: the server's requests by moniker's ids, and
/// the state.
pub(crate) fn input_required(id: &str, asked: &[(u64, Message)], state: &str) -> Message {
    let requests: Vec<String> = asked
        .iter()
        .map(|(ours, request)| {
            format!(
                r#""{ours}":{{"method":{},"params":{}}}"#,
                message::string(request.method().unwrap_or_default()),
                request.params().unwrap_or("{}")
            )
        })
        .collect();
    Message::result_object(
        id,
        &[
            ("resultType", r#""input_required""#),
            ("inputRequests", &format!("{{{}}}", requests.join(","))),
            ("requestState", &message::string(state)),
        ],
    )
}
