//! The calls moniker keeps for a 2026-07-28 client while it answers their servers' requests
//! (multi-round-trip requests): each under the `requestState` moniker gave the client, until
//! the client's retry resumes it.
//!
//! Parked calls are bounded: at most [`MAX_PARKED_EACH`] of one principal and [`MAX_PARKED`]
//! in all, each for at most the call timeout; a retry resumes a call only for the principal
//! that started it and the same tool, prompt or resource. One principal's load never pushes
//! out another's call while it has fewer than the others.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::FutureExt as _;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::hub::Peer;
use crate::message::Message;
use crate::modern::Answerable;
use crate::sync::lock;

/// What begins the `requestState` of a call moniker parked (a modern server's own states pass
/// through).
pub(crate) const STATE_PREFIX: &str = "moniker.";

/// Calls waiting for their client's input, at most.
pub(crate) const MAX_PARKED: usize = 1024;
/// Parked calls of one principal at most: its own oldest is given up for a new one, never
/// another's.
pub(crate) const MAX_PARKED_EACH: usize = 64;

/// A call in progress for a 2026-07-28 client: running, or parked while its client answers.
pub(crate) struct Parked {
    /// The client's id of the call's first request: what the peer knows the call by.
    pub call: String,
    /// The call, running: its reply is the call's answer.
    pub task: Running,
    /// The server's requests for input that came with the call.
    pub inputs: mpsc::UnboundedReceiver<crate::modern::client::Input>,
    pub peer: Arc<Peer>,
    /// What the client can be asked, from its request's envelope.
    pub can: Answerable,
    /// When it was parked.
    pub at: Instant,
    /// Who started it: only the same principal may resume it.
    pub principal: String,
    /// What it calls (the method, and the tool's or prompt's name or the resource's URI):
    /// only a retry of the same may resume it.
    pub target: String,
}

impl Parked {
    /// Gives up the call (expired, or pushed out).
    fn abandon(self) {
        if let Running::Detached(task) = &self.task {
            task.abort();
        }
        self.peer.era.unpark(&self.call);
    }
}

/// A call's work: polled in place by the request that started it, and moved to a task of its
/// own only when it is parked (it then outlives that request). Most calls are never parked:
/// they cost no task and no hop between tasks.
pub(crate) enum Running {
    /// Polled by the request that started it; dropped with it (the call cancelled).
    Here(Pin<Box<dyn Future<Output = Option<Message>> + Send>>),
    /// A task of its own: a parked call, and a resumed one.
    Detached(JoinHandle<Option<Message>>),
}

impl Running {
    /// `call`, to be polled in place. A panic in it ends the call without a reply, as it
    /// would in a task of its own.
    pub(crate) fn here(call: impl Future<Output = Option<Message>> + Send + 'static) -> Self {
        let call = AssertUnwindSafe(call)
            .catch_unwind()
            .map(|result| result.ok().flatten());
        Self::Here(Box::pin(call))
    }

    /// The call moved to a task of its own (it is being parked), where it runs on.
    pub(crate) fn detach(self) -> Self {
        match self {
            Self::Here(call) => Self::Detached(tokio::spawn(call)),
            detached => detached,
        }
    }
}

impl Future for Running {
    /// The call's reply; none when it panicked or was aborted.
    type Output = Option<Message>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Message>> {
        match self.get_mut() {
            Self::Here(call) => call.as_mut().poll(cx),
            Self::Detached(task) => Pin::new(task).poll(cx).map(|done| done.ok().flatten()),
        }
    }
}

/// The parked calls, by their `requestState`.
pub(crate) struct Parking {
    calls: Mutex<HashMap<String, Parked>>,
    /// How long a call stays parked: the call timeout.
    limit: Duration,
}

impl Parking {
    pub(crate) fn new(limit: Duration) -> Self {
        Self {
            calls: Mutex::new(HashMap::new()),
            limit,
        }
    }

    /// Keeps `call` under `state`; calls parked longer than the limit are given up, and the
    /// oldest of its principal (or of the principal with the most) when there are too many.
    pub(crate) fn park(&self, state: String, call: Parked) {
        let mut parked = lock(&self.calls);
        self.expire(&mut parked);
        let oldest_of = |parked: &HashMap<String, Parked>, principal: &str| {
            parked
                .iter()
                .filter(|(_, p)| p.principal == principal)
                .min_by_key(|(_, p)| p.at)
                .map(|(k, _)| k.clone())
        };
        let own = parked
            .values()
            .filter(|p| p.principal == call.principal)
            .count();
        let pushed_out = if own >= MAX_PARKED_EACH {
            oldest_of(&parked, &call.principal)
        } else if parked.len() >= MAX_PARKED {
            let mut counts: HashMap<&str, usize> = HashMap::new();
            for p in parked.values() {
                *counts.entry(p.principal.as_str()).or_default() += 1;
            }
            let largest = counts
                .into_iter()
                .max_by_key(|(_, n)| *n)
                .map(|(p, _)| p.to_owned());
            largest.and_then(|p| oldest_of(&parked, &p))
        } else {
            None
        };
        if let Some(p) = pushed_out.and_then(|k| parked.remove(&k)) {
            p.abandon();
        }
        parked.insert(state, call);
    }

    /// The call parked under `state`, taken out when its principal and target are
    /// `principal`'s and `target`; calls parked too long are given up first.
    pub(crate) fn take(&self, state: &str, principal: &str, target: &str) -> Option<Parked> {
        let mut parked = lock(&self.calls);
        self.expire(&mut parked);
        let mine = |p: &Parked| p.principal == principal && p.target == target;
        if !parked.get(state).is_some_and(mine) {
            return None;
        }
        parked.remove(state)
    }

    fn expire(&self, parked: &mut HashMap<String, Parked>) {
        let expired: Vec<String> = parked
            .iter()
            .filter(|(_, p)| p.at.elapsed() > self.limit)
            .map(|(k, _)| k.clone())
            .collect();
        for key in expired {
            if let Some(p) = parked.remove(&key) {
                p.abandon();
            }
        }
    }
}
