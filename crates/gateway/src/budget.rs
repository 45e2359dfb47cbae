//! What one peer may make moniker hold: the defaults, in one table (the guide's "Budgets"
//! table, `docs/src/security.md`, is this one). Every kind of peer has its share, so that one peer's load never takes
//! another's place:
//!
//! | peer | what | at most | where it is held |
//! |---|---|---|---|
//! | client address | open HTTP connections | any while there is room; when all `http.max_connections` (1,024) are taken, [`connections_per_address`] (a quarter): one below it takes the oldest place of an address over it, one at it waits (with at most that many waiting) | `serve::listen` |
//! | client address | time to send a request header | 10 s (`serve::listen::HEADER_TIMEOUT`) | `serve::listen` |
//! | principal (a token; a person: issuer and `sub`, whatever their OAuth client) | HTTP sessions | `http.max_sessions_per_token` (1,000); sessions being opened count | `serve::http` |
//! | every principal together | HTTP sessions | 10,000 | `serve::http` |
//! | principal | `subscriptions/listen` streams | 16 | `hub` |
//! | principal | parked 2026 calls | 64 (1,024 in all) | `parked` |
//! | principal | tasks | 1,000 (10,000 in all) | `tasks` |
//! | session | requests in flight | 1,024 | `session` |
//! | principal | requests in flight, all its sessions together | [`CALLS_EACH`] | `session`, `hub` |
//! | session | resource subscriptions | 1,024 | `session::fanout` |
//! | session | messages kept for a resumed stream | 1,024 messages, 2 MiB; one message larger than [`REPLAY_MESSAGE`] goes at the next | `serve::http::outbox` |
//! | principal | messages kept for resumed streams, all its sessions together | [`REPLAY_BYTES_EACH`] | `serve::http::outbox` |
//! | principal | notes on its POST event streams that their clients do not read, together | [`POST_STREAM_BYTES`]; an answer always goes | `session`, `serve::http` |
//! | client or server | one message | 16 MiB (`framing::DEFAULT_MAX_MESSAGE`) | `framing` |
//! | server connection | one listing (`tools/list`, `prompts/list`, ... with all its pages) | [`LISTING_PAGES`] pages, [`LISTING_ITEMS`] items, [`LISTING_BYTES`] bytes | `connect::list_all` |
//! | server connection | relists after `list_changed` | one at a time, [`RELIST_GAP`] apart; notes that come meanwhile make one more | `gateway` |
//! | every principal together | toolsets in the store (`build-toolset`) | [`STORED_TOOLSETS`], each described in at most [`TOOLSET_DESCRIPTION`] bytes; its tools are the surface's | `toolsets` |
//! | server connection (stdio) | what it has not read | [`SERVER_BACKLOG`]: past it nothing more is sent to it (notes and answers are dropped, calls refused) until it reads | `connect` |
//! | server connection | requests to a session's client that it has not answered | [`SERVER_REQUESTS`] each, ids of at most [`SERVER_REQUEST_ID`] bytes: past them, the server is answered `-32043` | `hub` |
//! | server | a line of stderr | [`STDERR_LINE`] (a longer one is skipped, to its newline); bytes that are not UTF-8 are replaced | `connect::stdio` |
//! | stdio client | answers it has not read | [`CLIENT_BACKLOG`]: past it, its session ends | `serve::stdio` |
//! | every peer together | the shared gateway's log file | 32 MiB written while it runs, then the file starts anew | the binary's `shared::LOG_MOST` |
//! | server connection | progress notes | only into calls sent to it, under 128-bit random tokens | `hub` |
//! | anyone with an opaque token | introspections under way | 4 at once, 64 waiting (then 503 at once); refusals never push out an active token's kept answer | `auth::resource` |
//! | anyone with a JWT | key fetches | one at a time, 10 s apart; a known key never waits for one | `auth::resource` |
//!
//! A refusal names the limit it met; a listing over its budget is refused and the server keeps
//! its last one, said at `warn`.

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::sync::lock;

/// Pages one listing may have.
pub const LISTING_PAGES: usize = 1_000;
/// Items (tools, prompts, resources, ...) one listing may have.
pub const LISTING_ITEMS: usize = 20_000;
/// Bytes of all the pages of one listing.
pub const LISTING_BYTES: usize = 32 << 20;
/// The least time between two relists of one server: a storm of `list_changed` notes costs
/// one relist per gap, not one per note.
pub const RELIST_GAP: Duration = Duration::from_millis(250);
/// The largest message a resumable stream keeps for a client that reconnects: a larger one
/// is sent live, and lost to a client that was not there.
pub const REPLAY_MESSAGE: usize = 256 * 1024;

/// Toolsets the store keeps (`build-toolset` of a new name past them is refused): every
/// replica reads them all.
pub const STORED_TOOLSETS: usize = 256;
/// The longest description of a stored toolset.
pub const TOOLSET_DESCRIPTION: usize = 1024;
/// The bytes a stdio server has not read past which nothing more is sent to it.
pub const SERVER_BACKLOG: usize = 16 << 20;
/// Requests of one server to one session's client, unanswered.
pub const SERVER_REQUESTS: usize = 64;
/// The longest id of a server's request to a client moniker keeps.
pub const SERVER_REQUEST_ID: usize = 1024;
/// The longest line of a server's stderr that is logged.
pub const STDERR_LINE: usize = 16 * 1024;
/// The bytes of answers a stdio client has not read past which its session ends: four of the
/// largest messages.
pub const CLIENT_BACKLOG: usize = 64 << 20;

/// Requests in progress of one principal (an HTTP token, a person), all its sessions
/// together: a token may hold 1,000 sessions of 1,024 each.
pub const CALLS_EACH: usize = 4_096;

/// The bytes all the replay buffers of one principal's sessions hold together.
pub const REPLAY_BYTES_EACH: usize = 16 << 20;
/// The bytes of progress and other notes the POST streams of one principal hold while their
/// clients do not read them, together: past this, notes are dropped (an answer never is).
pub const POST_STREAM_BYTES: usize = 4 << 20;

/// Connections one client address may hold of `max_connections`: a quarter (at least one).
pub fn connections_per_address(max_connections: usize) -> usize {
    (max_connections / 4).max(1)
}

/// One counter per key (a principal), shared by everything of that key that holds it (its
/// sessions, its streams): made when none does, gone with the last holder. What a budget
/// of a principal's is counted in.
#[derive(Default)]
pub(crate) struct Counters(Mutex<HashMap<String, Weak<AtomicUsize>>>);

impl Counters {
    /// The counter of `key`.
    pub(crate) fn of(&self, key: &str) -> Arc<AtomicUsize> {
        let mut table = lock(&self.0);
        if let Some(held) = table.get(key).and_then(Weak::upgrade) {
            return held;
        }
        table.retain(|_, held| held.strong_count() > 0);
        let held = Arc::default();
        table.insert(key.to_owned(), Arc::downgrade(&held));
        held
    }
}
