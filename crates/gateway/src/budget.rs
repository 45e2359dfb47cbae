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
//! | sandboxed server | refusals of its sandbox logged (from its errors and its stderr) | one note kept; logged when it changes, [`SANDBOX_REFUSALS_LOGGED`] a second, bursts of twice that | `gateway::servers` |
//! | stdio client | answers it has not read | [`CLIENT_BACKLOG`]: past it, its session ends | `serve::stdio` |
//! | every peer together | the shared gateway's log file | 32 MiB written while it runs, then the file starts anew | the binary's `shared::LOG_MOST` |
//! | server connection | progress notes | only into calls sent to it, under 128-bit random tokens | `hub` |
//! | anyone with an opaque token | introspections under way | 4 at once, 64 waiting (then 503 at once); refusals never push out an active token's kept answer | `identity` |
//! | client address, and everyone together | introspections asked of the issuer (a token without a kept answer) | [`INTROSPECTIONS_PER_ADDRESS`] a second each, [`INTROSPECTIONS_PER_SECOND`] in all, bursts of twice that (then 503 with `Retry-After` at once) | `identity` |
//! | the gateway | search index builds | one at a time, of the newest view, after [`crate::view::SETTLE`]; a build a newer view supersedes is cancelled; only changed documents are embedded again; a search of a view not indexed yet indexes it after the last one (only changed documents) | `view` |
//! | anyone with a JWT | key fetches | one at a time, 10 s apart; a known key never waits for one | `identity` |
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
        if let Some(slot) = table.get_mut(key) {
            // Ended with the last that held it (a stateless request's): made again in its place.
            return slot.upgrade().unwrap_or_else(|| {
                let held = Arc::default();
                *slot = Arc::downgrade(&held);
                held
            });
        }
        table.retain(|_, held| held.strong_count() > 0);
        let held = Arc::default();
        table.insert(key.to_owned(), Arc::downgrade(&held));
        held
    }
}

/// Introspections the issuer is asked for, per second, for everyone together (a burst of twice
/// as many): a flood of made-up opaque tokens costs the issuer at most this many calls made
/// with moniker's secret, not one per request.
pub const INTROSPECTIONS_PER_SECOND: f64 = 20.0;
/// The same for one client address (its share of the rate above).
pub const INTROSPECTIONS_PER_ADDRESS: f64 = 5.0;
/// Addresses whose rate is remembered; past them the one that was full the longest ago goes.
pub const RATED_ADDRESSES: usize = 4_096;

/// Refusals of its sandbox one server may have logged a second (bursts of twice as many); the
/// rest are noted only (for `/healthz` and `doctor`).
pub const SANDBOX_REFUSALS_LOGGED: f64 = 5.0;

/// A token bucket: `per_second` on average, bursts of twice as many.
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    tokens: f64,
    at: std::time::Instant,
}

impl Rate {
    pub fn full(per_second: f64, now: std::time::Instant) -> Self {
        Self {
            tokens: 2.0 * per_second,
            at: now,
        }
    }

    /// Takes one, when there is one at `now`.
    pub fn take(&mut self, per_second: f64, now: std::time::Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * per_second).min(2.0 * per_second);
        self.at = now;
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }
}

/// The rate budget of something everyone and each address may ask for: the whole's, and each
/// address's share; the addresses remembered are bounded.
pub struct Rates {
    each: f64,
    all: f64,
    inner: Mutex<(Rate, HashMap<std::net::IpAddr, Rate>)>,
}

impl Rates {
    pub fn new(all: f64, each: f64) -> Self {
        let now = std::time::Instant::now();
        Self {
            each,
            all,
            inner: Mutex::new((Rate::full(all, now), HashMap::new())),
        }
    }

    /// Takes one for `address` (`None`: no address known, the whole's rate alone), when both
    /// its share and the whole have one.
    pub fn take(&self, address: Option<std::net::IpAddr>, now: std::time::Instant) -> bool {
        let mut inner = lock(&self.inner);
        let (whole, addresses) = &mut *inner;
        if let Some(address) = address {
            if !addresses.contains_key(&address) && addresses.len() >= RATED_ADDRESSES {
                // The one that asked the longest ago is full by now, or nearly.
                if let Some(oldest) = addresses.iter().min_by_key(|(_, r)| r.at).map(|(a, _)| *a) {
                    addresses.remove(&oldest);
                }
            }
            let share = addresses
                .entry(address)
                .or_insert_with(|| Rate::full(self.each, now));
            let mut tried = *share;
            if !tried.take(self.each, now) {
                *share = tried;
                return false;
            }
            if !whole.take(self.all, now) {
                return false;
            }
            *share = tried;
            return true;
        }
        whole.take(self.all, now)
    }
}

#[cfg(test)]
mod rate_tests {
    use super::*;

    #[test]
    fn an_address_gets_its_share_and_everyone_the_whole() {
        let rates = Rates::new(4.0, 1.0);
        let t0 = std::time::Instant::now();
        let a: std::net::IpAddr = "10.0.0.1".parse().expect("ip");
        let b: std::net::IpAddr = "10.0.0.2".parse().expect("ip");
        // A burst of twice the share, then nothing until it refills.
        assert!(rates.take(Some(a), t0) && rates.take(Some(a), t0));
        assert!(!rates.take(Some(a), t0), "a's share is spent");
        // Another address still has its share, until the whole (8) is spent.
        assert!(rates.take(Some(b), t0) && rates.take(Some(b), t0));
        for _ in 0..4 {
            assert!(rates.take(None, t0));
        }
        assert!(!rates.take(None, t0), "the whole is spent");
        let c: std::net::IpAddr = "10.0.0.3".parse().expect("ip");
        assert!(
            !rates.take(Some(c), t0),
            "a fresh share waits for the whole"
        );
        // One second later: a has one more, the whole four more.
        let t1 = t0 + std::time::Duration::from_secs(1);
        assert!(rates.take(Some(a), t1));
        assert!(!rates.take(Some(a), t1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    /// A key's counter is shared while anyone holds it, and starts from nothing again once
    /// no one does (in its old place in the table, which keeps only live keys beside it).
    #[test]
    fn a_counter_is_shared_while_held_and_made_again_after() {
        let counters = Counters::default();
        let held = counters.of("token a");
        held.fetch_add(5, Ordering::Relaxed);
        assert_eq!(counters.of("token a").load(Ordering::Relaxed), 5);
        drop(held);
        let again = counters.of("token a");
        assert_eq!(again.load(Ordering::Relaxed), 0);
        drop(again);
        let _b = counters.of("token b");
        assert_eq!(
            lock(&counters.0).len(),
            1,
            "the dead key goes when another is made"
        );
    }
}
