//! The errors moniker itself returns to clients, in one place: each has its JSON-RPC code, its
//! message and the outcome it counts as in the metrics. Errors that servers return are not
//! here: they pass through unchanged.

use std::time::Duration;

use moniker_surface::{Kind, ServerId};

use crate::message::{self, Message};
use crate::metrics::Outcome;

/// Unknown tool or prompt, after alias resolution and within the session's toolset.
pub const UNKNOWN_NAME: i64 = -32004;
/// The route's server is not connected.
pub const SERVER_GONE: i64 = -32041;
/// The server did not answer within the call timeout, or was not called because a cap on
/// its calls at once was full.
pub const TIMEOUT: i64 = -32042;
pub use crate::message::LIMIT;
/// No server has the resource (the MCP specification's code).
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// An error of moniker's, answered to a client's request.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Refusal {
    #[error("Method not found: {0}")]
    MethodNotFound(String),
    /// The params are not what the method takes (the reason says how).
    #[error("{0}")]
    InvalidParams(String),
    #[error("Invalid Request: nested batch")]
    NestedBatch,
    #[error("Unknown {}: {name}", noun(*kind))]
    UnknownName { kind: Kind, name: String },
    #[error("Server `{0}` is not connected")]
    ServerGone(ServerId),
    /// A call on a server's kept listing while it started: it did not join within its start
    /// budget (why is in the log and `moniker doctor`, never the server's own text here).
    #[error("Server `{server}` did not finish starting within {} s: its tools are listed from its last run, but it has not joined (the log and `moniker doctor` say why)", budget.as_secs_f64())]
    NotJoined { server: ServerId, budget: Duration },
    #[error("Server `{0}` disconnected before answering")]
    Disconnected(ServerId),
    #[error("Server `{server}` did not answer within {} s{}", timeout.as_secs_f64(), at.as_ref().map(|at| format!(" (`{at}`)")).unwrap_or_default())]
    Timeout {
        server: ServerId,
        timeout: Duration,
        /// The config key of the timeout, when it is a server's, tool's or prompt's own.
        at: Option<String>,
    },
    /// A cap on calls at once was full: the call was not sent (the same shape as a time-out:
    /// the server could not take it in time).
    #[error("Server `{server}` was not called: {limit} call{} at once is the most `{at}` allows, and that many are in progress", if *limit == 1 { "" } else { "s" })]
    Busy {
        server: ServerId,
        limit: u32,
        at: String,
    },
    /// The server has not read what was sent to it ([`crate::budget::SERVER_BACKLOG`]): the
    /// call was not sent (the shape of a time-out, as [`Refusal::Busy`]).
    #[error("Server `{server}` was not called: it has not read {bytes} bytes sent to it")]
    Behind { server: ServerId, bytes: usize },
    #[error("the server's answer could not be read")]
    Unreadable,
    #[error("Resource not found: {0}")]
    ResourceNotFound(String),
    /// A per-client limit was reached: the text names it.
    #[error("{0}")]
    Limit(String),
    /// A `forward` rule of the server's makes a header the caller's value cannot fill.
    #[error(
        "Server `{server}` was not called: the header `{header}` its `forward` makes cannot hold the caller's value"
    )]
    Unforwardable { server: ServerId, header: String },
    /// The server is called with each caller's own token (`auth.exchange`, `auth.per_person`),
    /// and there is none for this call (the text says why): it is not sent with another.
    #[error("{0}")]
    Upstream(String),
    /// The server is called with each person's own sign-in (`auth.per_person`), and this
    /// person has not signed in: the link signs them in (a tool call answers it as a tool
    /// error, which the model and the person read).
    #[error(
        "Server `{server}` acts as each person, and you have not signed in to it yet (or your sign-in ended). Open this link to sign in, then call again: {link} (it works once, for 10 minutes)"
    )]
    SignIn { server: ServerId, link: String },
}

fn noun(kind: Kind) -> &'static str {
    match kind {
        Kind::Tool => "tool",
        Kind::Prompt => "prompt",
    }
}

impl Refusal {
    pub fn invalid_params(why: impl Into<String>) -> Self {
        Self::InvalidParams(why.into())
    }

    pub fn limit(why: impl Into<String>) -> Self {
        Self::Limit(why.into())
    }

    pub fn code(&self) -> i64 {
        match self {
            Self::MethodNotFound(_) => message::METHOD_NOT_FOUND,
            Self::InvalidParams(_) => message::INVALID_PARAMS,
            Self::NestedBatch => message::INVALID_REQUEST,
            Self::UnknownName { .. } => UNKNOWN_NAME,
            Self::ServerGone(_) | Self::Disconnected(_) | Self::NotJoined { .. } => SERVER_GONE,
            Self::Timeout { .. } | Self::Busy { .. } | Self::Behind { .. } => TIMEOUT,
            Self::Unreadable => message::INTERNAL_ERROR,
            Self::ResourceNotFound(_) => RESOURCE_NOT_FOUND,
            Self::Limit(_) => LIMIT,
            Self::Unforwardable { .. } | Self::Upstream(_) | Self::SignIn { .. } => {
                message::INVALID_REQUEST
            }
        }
    }

    /// How a call that ends with this counts in the metrics.
    pub fn outcome(&self) -> Outcome {
        match self {
            Self::UnknownName { .. } => Outcome::Unknown,
            Self::ServerGone(_) | Self::Disconnected(_) | Self::NotJoined { .. } => {
                Outcome::ServerGone
            }
            Self::Timeout { .. } => Outcome::Timeout,
            Self::Busy { .. } | Self::Behind { .. } => Outcome::Busy,
            Self::MethodNotFound(_)
            | Self::InvalidParams(_)
            | Self::NestedBatch
            | Self::Unreadable
            | Self::ResourceNotFound(_)
            | Self::Limit(_)
            | Self::Unforwardable { .. }
            | Self::Upstream(_)
            | Self::SignIn { .. } => Outcome::Error,
        }
    }

    /// The error response to the request `id` (raw JSON).
    pub fn answer(&self, id: &str) -> Message {
        Message::error(Some(id), self.code(), &self.to_string())
    }
}

/// MCP 2025-11-25's `URLElicitationRequiredError` (the code is the specification's, -32042,
/// which moniker's own time-outs also answer with: the `data` tells them apart): the request
/// can go on once the person has been to `url`, for a client that takes URL-mode elicitation.
pub const URL_ELICITATION_REQUIRED: i64 = -32042;

/// The error of [`URL_ELICITATION_REQUIRED`] for the request `id`, sending its person to `url`.
pub fn url_elicitation_required(id: &str, text: &str, url: &str) -> Message {
    let data = serde_json::json!({
        "elicitations": [{
            "mode": "url",
            "elicitationId": crate::random::text(16),
            "url": url,
            "message": text,
        }]
    });
    Message::error_with(
        Some(id),
        URL_ELICITATION_REQUIRED,
        text,
        Some(&data.to_string()),
    )
}

/// A tool result that reports a failure to the model (`isError: true`) with one text.
pub fn tool_error(text: &str) -> String {
    format!(
        r#"{{"content":[{{"type":"text","text":{}}}],"isError":true}}"#,
        message::string(text)
    )
}
