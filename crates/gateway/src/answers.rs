//! Where the answers to a client's messages go, within their budget: its own room, so that
//! what routes a server's progress (the hub) and what answers (the session) both use it
//! without reaching into each other.

use std::sync::Arc;

use crate::identity::Caller;
use crate::message::Message;

/// Where the answers to what a client sent go: the session's own stream (stdio), or a
/// request's own (an HTTP POST), which then carries the request's progress too when
/// `with_progress`.
#[derive(Clone)]
pub struct Answers {
    pub(crate) to: crate::framing::To,
    pub(crate) with_progress: bool,
    /// The W3C trace context of the HTTP request that carried the messages, when it had one.
    pub(crate) trace: Option<crate::telemetry::TraceContext>,
    /// Who sent them, for the headers servers' `forward` makes (over HTTP, when a server
    /// forwards): each request keeps its own, so concurrent requests of a session never
    /// forward each other's headers.
    caller: Option<Arc<Caller>>,
    /// The bytes sent and not yet taken by the reader of `to` (an HTTP event stream its
    /// client may not read): past [`crate::budget::POST_STREAM_BYTES`], notes are dropped;
    /// the answer always goes.
    held: Option<Arc<std::sync::atomic::AtomicUsize>>,
}

impl Answers {
    pub fn new(to: impl Into<crate::framing::To>, with_progress: bool) -> Self {
        Self {
            to: to.into(),
            with_progress,
            trace: None,
            caller: None,
            held: None,
        }
    }

    /// What is sent counts in `held` until its reader takes it (and subtracts it).
    pub fn with_held(mut self, held: Arc<std::sync::atomic::AtomicUsize>) -> Self {
        self.held = Some(held);
        self
    }

    /// The messages came in a request with this trace context (its `traceparent` header).
    pub fn with_trace(mut self, trace: Option<crate::telemetry::TraceContext>) -> Self {
        self.trace = trace;
        self
    }

    /// The messages came from this caller (its identity and the request's headers).
    pub fn with_caller(mut self, caller: Option<Caller>) -> Self {
        self.caller = caller.map(Arc::new);
        self
    }

    /// Who sent the messages, for the headers servers' `forward` makes.
    pub(crate) fn caller(&self) -> Option<&Caller> {
        self.caller.as_deref()
    }

    pub(crate) fn send(&self, message: Message) {
        use std::sync::atomic::Ordering;
        let Some(held) = &self.held else {
            let _ = self.to.send(message);
            return;
        };
        let size = message.text().len();
        if !message.is_response()
            && held.load(Ordering::Acquire).saturating_add(size) > crate::budget::POST_STREAM_BYTES
        {
            tracing::debug!(
                size,
                "a note for an event stream its client does not read is dropped"
            );
            return;
        }
        held.fetch_add(size, Ordering::AcqRel);
        if self.to.send(message).is_err() {
            // Nobody reads it any more: it is not held.
            give_back(held, size);
        }
    }
}

/// `size` bytes of `held` taken by their reader (never below nothing).
pub(crate) fn give_back(held: &std::sync::atomic::AtomicUsize, size: usize) {
    use std::sync::atomic::Ordering;
    let _ = held.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
        Some(n.saturating_sub(size))
    });
}
