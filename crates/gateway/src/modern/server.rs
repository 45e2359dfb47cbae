//! What a connection to a server holds of the 2026-07-28 era: that it speaks it, its tools'
//! `x-mcp-header` parameters, the cache hint of its last listing, and moniker's open
//! `subscriptions/listen` on it with the resources followed there.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::sync::lock;

/// A server connection's 2026-07-28 state.
#[derive(Default)]
pub(crate) struct ServerEra {
    /// The server speaks 2026-07-28: every request carries the envelope.
    modern: AtomicBool,
    /// Its tools' `x-mcp-header` parameters: tool to (the parameter's path through
    /// `properties`, header name).
    pub(crate) header_params: Mutex<HashMap<String, Vec<HeaderParam>>>,
    /// The id of moniker's open `subscriptions/listen` on it: not a call.
    pub(crate) listening: Mutex<Option<u64>>,
    /// The resources moniker follows there (its listen's `resourceSubscriptions`), with how
    /// many of moniker's clients follow each.
    pub(crate) follows: Mutex<BTreeMap<String, usize>>,
    /// Fires when the followed resources changed.
    pub(crate) refollow: tokio::sync::Notify,
    /// The smallest `ttlMs` of its last tools and prompts listing (`None`: it gave none, as a
    /// 2025 server does).
    pub(crate) list_ttl: Mutex<Option<u64>>,
}

impl ServerEra {
    /// From now on the server is spoken to in 2026-07-28.
    pub(crate) fn speak_modern(&self) {
        self.modern.store(true, Ordering::Release);
    }

    pub(crate) fn is_modern(&self) -> bool {
        self.modern.load(Ordering::Acquire)
    }

    /// Whether moniker's listen is open there.
    pub(crate) fn listens(&self) -> bool {
        lock(&self.listening).is_some()
    }
}

/// A tool parameter a 2026-07-28 client mirrors into an `Mcp-Param-<header>` header.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HeaderParam {
    /// Its path through nested `properties` (one name for a top-level parameter).
    pub path: Vec<String>,
    pub header: String,
}
