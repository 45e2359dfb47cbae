//! A session's outbox: everything the session sends on its own (notifications, progress,
//! server-to-client requests), numbered, kept in a bounded replay buffer and written to the
//! session's one GET stream as server-sent events.
//!
//! Event ids are the message numbers, 1, 2, 3…. A stream opened with `Last-Event-ID: n`
//! starts after message `n` (replaying what the buffer still holds); one opened without it
//! starts after the last message handed to any stream, so messages sent while no stream was
//! open are delivered when one opens. A new stream replaces the one before it, which ends:
//! the newest GET is the one the client is listening on (an old connection may be half-open
//! and would swallow messages).
//!
//! A stream starts with a comment, or, for sessions of protocol 2025-11-25 and later, with a
//! priming event (an id and empty data, as the spec asks) so that a client can resume even a
//! stream that has carried no message yet.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::budget;
use crate::sync::lock;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use futures_util::Stream;
use tokio::sync::watch;

/// At most this many messages are kept for replay…
const MAX_MESSAGES: usize = 1024;
/// …and at most this many bytes of them: what a session that never reads its stream can make
/// moniker hold. A message larger than [`budget::REPLAY_MESSAGE`] is kept only while it is
/// the newest and no stream has taken it; the next push drops it.
const MAX_BYTES: usize = 2 * 1024 * 1024;

#[derive(Default)]
struct State {
    /// `(id, message)`, ids contiguous and increasing.
    log: VecDeque<(u64, Arc<str>)>,
    bytes: usize,
    /// The id of the last message pushed (0: none yet).
    last: u64,
    /// The highest id handed to a stream.
    delivered: u64,
    /// The generation of the current stream; streams of older generations end.
    generation: u64,
    /// Whether the current generation's stream is still open.
    open: bool,
    /// Set when the session ended: every stream ends.
    closed: bool,
    /// Whether undelivered messages were dropped since the last warning.
    warned: bool,
}

pub(super) struct Outbox {
    state: Mutex<State>,
    changed: watch::Sender<()>,
    /// The bytes every outbox of the session's principal holds: a principal with many
    /// sessions holds at most [`budget::REPLAY_BYTES_EACH`] in all.
    principal: Arc<AtomicUsize>,
}

impl Drop for Outbox {
    fn drop(&mut self) {
        let held = lock(&self.state).bytes;
        self.principal.fetch_sub(held, Ordering::AcqRel);
    }
}

/// What a stream finds when it looks.
enum Take {
    /// The stream was replaced, or the session ended.
    Ended,
    Nothing,
    /// SSE text for messages up to this id.
    Events(String, u64),
}

impl Outbox {
    /// An outbox of a session whose principal's outboxes hold `principal` bytes in all (one
    /// counter shared by them).
    pub(super) fn new(principal: Arc<AtomicUsize>) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            changed: watch::Sender::new(()),
            principal,
        })
    }

    /// Adds a message from the session. The oldest go when the session's buffer, or its
    /// principal's, is over its budget; a large message does not stay past the next push.
    pub(super) fn push(&self, message: String) {
        {
            let mut s = lock(&self.state);
            if s.closed {
                return;
            }
            s.last += 1;
            let id = s.last;
            s.bytes += message.len();
            self.principal.fetch_add(message.len(), Ordering::AcqRel);
            // The message before this one, when it is over the size a replay keeps.
            let large_before = s
                .log
                .back()
                .is_some_and(|(_, t)| t.len() > budget::REPLAY_MESSAGE);
            if large_before {
                if let Some((_, text)) = s.log.pop_back() {
                    s.bytes -= text.len();
                    self.principal.fetch_sub(text.len(), Ordering::AcqRel);
                }
            }
            s.log.push_back((id, message.into()));
            // The session's own bounds keep its newest message; its principal's, when its
            // sessions together are over theirs, do not.
            let over = |s: &State, held: usize| {
                s.log.len() > MAX_MESSAGES
                    || (s.bytes > MAX_BYTES && s.log.len() > 1)
                    || (held > budget::REPLAY_BYTES_EACH && !s.log.is_empty())
            };
            while over(&s, self.principal.load(Ordering::Acquire)) {
                let Some((old, text)) = s.log.pop_front() else {
                    break;
                };
                s.bytes -= text.len();
                self.principal.fetch_sub(text.len(), Ordering::AcqRel);
                if old > s.delivered && !s.warned {
                    s.warned = true;
                    tracing::warn!(
                        "an HTTP session's replay buffer is full: messages no client has received are dropped (is its GET stream open?)"
                    );
                }
            }
        }
        self.changed.send_replace(());
    }

    /// Ends every stream, for good, and gives back what the buffer held (as dropping it does).
    pub(super) fn close(&self) {
        {
            let mut s = lock(&self.state);
            s.closed = true;
            self.principal.fetch_sub(s.bytes, Ordering::AcqRel);
            s.bytes = 0;
            s.log.clear();
        }
        self.changed.send_replace(());
    }

    /// Whether a GET stream is open now.
    pub(super) fn is_streaming(&self) -> bool {
        let s = lock(&self.state);
        s.open && !s.closed
    }

    /// Opens a stream: its generation and the id it starts after.
    fn open(&self, last_event_id: Option<&str>) -> (u64, u64) {
        let opened = {
            let mut s = lock(&self.state);
            s.generation += 1;
            s.open = true;
            let after = match last_event_id.map(|v| v.trim().parse::<u64>()) {
                Some(Ok(n)) if n <= s.last => {
                    let oldest = s.log.front().map_or(s.last + 1, |(id, _)| *id);
                    if n + 1 < oldest {
                        tracing::warn!(
                            last_event_id = n,
                            oldest,
                            "resuming an HTTP session's stream: some messages after Last-Event-ID are no longer in the replay buffer"
                        );
                    }
                    n
                }
                Some(_) => {
                    tracing::debug!(
                        "a Last-Event-ID that is not one of this session's: starting after what was delivered"
                    );
                    s.delivered
                }
                None => s.delivered,
            };
            (s.generation, after)
        };
        // Wakes the stream this one replaces, so that it ends.
        self.changed.send_replace(());
        opened
    }

    fn take(&self, generation: u64, after: u64) -> Take {
        let mut s = lock(&self.state);
        if s.closed || s.generation != generation {
            return Take::Ended;
        }
        if after >= s.last {
            return Take::Nothing;
        }
        let mut text = String::new();
        let mut upto = after;
        for (id, message) in s.log.iter().filter(|(id, _)| *id > after) {
            event(&mut text, Some(*id), message);
            upto = *id;
        }
        if upto == after {
            // Everything after `after` was dropped from the buffer.
            return Take::Nothing;
        }
        s.delivered = s.delivered.max(upto);
        Take::Events(text, upto)
    }

    fn stream_ended(&self, generation: u64) {
        let mut s = lock(&self.state);
        if s.generation == generation {
            s.open = false;
        }
    }

    /// The session's GET stream, from `Last-Event-ID` when given: SSE text chunks, with a
    /// comment every `keep_alive`, until it is replaced, the session ends or `stop` turns true.
    /// `prime`: start with a priming event rather than a comment.
    pub(super) fn stream(
        self: &Arc<Self>,
        last_event_id: Option<&str>,
        prime: bool,
        keep_alive: Duration,
        stop: watch::Receiver<bool>,
        busy: Busy,
    ) -> impl Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static {
        let (generation, after) = self.open(last_event_id);
        let state = GetStream {
            outbox: self.clone(),
            generation,
            after,
            changed: self.changed.subscribe(),
            tick: tokio::time::interval_at(tokio::time::Instant::now() + keep_alive, keep_alive),
            stop,
            started: false,
            prime,
            _busy: busy,
        };
        futures_util::stream::unfold(state, |mut st| async move {
            let chunk = st.next().await?;
            Some((Ok(Bytes::from(chunk)), st))
        })
    }
}

struct GetStream {
    outbox: Arc<Outbox>,
    generation: u64,
    after: u64,
    changed: watch::Receiver<()>,
    tick: tokio::time::Interval,
    stop: watch::Receiver<bool>,
    started: bool,
    prime: bool,
    _busy: Busy,
}

impl GetStream {
    async fn next(&mut self) -> Option<String> {
        if !self.started {
            // Something at once, so that the client sees the stream open.
            self.started = true;
            if self.prime {
                return Some(format!("id: {}\nretry: {RETRY_MS}\ndata:\n\n", self.after));
            }
            return Some(": stream open\n\n".to_owned());
        }
        loop {
            if *self.stop.borrow() {
                return None;
            }
            self.changed.borrow_and_update();
            match self.outbox.take(self.generation, self.after) {
                Take::Ended => return None,
                Take::Events(text, upto) => {
                    self.after = upto;
                    return Some(text);
                }
                Take::Nothing => {}
            }
            tokio::select! {
                changed = self.changed.changed() => if changed.is_err() { return None },
                _ = self.tick.tick() => return Some(KEEP_ALIVE_COMMENT.to_owned()),
                stop = self.stop.changed() => if stop.is_err() { return None },
            }
        }
    }
}

impl Drop for GetStream {
    fn drop(&mut self) {
        self.outbox.stream_ended(self.generation);
    }
}

pub(super) const KEEP_ALIVE_COMMENT: &str = ": keep-alive\n\n";
/// How long a client waits before it reconnects a stream that was cut (SSE `retry`).
const RETRY_MS: u64 = 3000;

/// Appends one SSE event carrying `message` (split into `data:` lines if it has line breaks).
pub(super) fn event(out: &mut String, id: Option<u64>, message: &str) {
    if let Some(id) = id {
        out.push_str("id: ");
        out.push_str(&id.to_string());
        out.push('\n');
    }
    out.push_str("event: message\ndata: ");
    // A CR or LF would end the `data:` line and let what follows be read as a field of the
    // event (an `id:`, another `data:`): one message, one line.
    out.push_str(&crate::framing::one_line(message));
    out.push_str("\n\n");
}

/// When a session was last used, and how many requests and streams use it now.
#[derive(Debug)]
pub(super) struct Activity {
    users: AtomicUsize,
    last: Mutex<Instant>,
}

impl Activity {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self {
            users: AtomicUsize::new(0),
            last: Mutex::new(Instant::now()),
        })
    }

    /// Marks the session in use until the guard is dropped.
    pub(super) fn busy(self: &Arc<Self>) -> Busy {
        self.users.fetch_add(1, Ordering::AcqRel);
        *lock(&self.last) = Instant::now();
        Busy(self.clone())
    }

    /// When it was last used, if nothing uses it now.
    pub(super) fn idle_since(&self) -> Option<Instant> {
        (self.users.load(Ordering::Acquire) == 0).then(|| *lock(&self.last))
    }

    /// Unused (no request, no stream) for at least `idle`.
    pub(super) fn idle_for(&self, idle: Duration) -> bool {
        self.users.load(Ordering::Acquire) == 0 && lock(&self.last).elapsed() >= idle
    }
}

/// A request or stream using a session.
#[derive(Debug)]
pub(super) struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        *lock(&self.0.last) = Instant::now();
        self.0.users.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(take: Take) -> (Vec<String>, u64) {
        match take {
            Take::Events(text, upto) => (
                text.lines()
                    .filter_map(|l| l.strip_prefix("data: "))
                    .map(str::to_owned)
                    .collect(),
                upto,
            ),
            Take::Nothing => (vec![], 0),
            Take::Ended => panic!("ended"),
        }
    }

    #[test]
    fn buffered_until_a_stream_opens_then_resumable() {
        let outbox = Outbox::new(Arc::default());
        outbox.push("a".into());
        outbox.push("b".into());
        let (g1, after) = outbox.open(None);
        assert_eq!(after, 0);
        assert_eq!(
            events(outbox.take(g1, after)),
            (vec!["a".into(), "b".into()], 2)
        );
        outbox.push("c".into());
        // A new stream replaces the first one…
        let (g2, after) = outbox.open(Some("1"));
        assert!(matches!(outbox.take(g1, 2), Take::Ended));
        // …and resumes after event 1.
        assert_eq!(
            events(outbox.take(g2, after)),
            (vec!["b".into(), "c".into()], 3)
        );
        // Without Last-Event-ID, after what was delivered.
        let (g3, after) = outbox.open(None);
        assert_eq!(after, 3);
        assert!(matches!(outbox.take(g3, after), Take::Nothing));
        // An id that is not ours counts as none.
        let (_, after) = outbox.open(Some("99"));
        assert_eq!(after, 3);
        outbox.close();
        assert!(matches!(outbox.take(g3, 3), Take::Ended));
    }

    #[test]
    fn bounded() {
        let outbox = Outbox::new(Arc::default());
        for i in 0..(MAX_MESSAGES + 10) {
            outbox.push(i.to_string());
        }
        let (g, after) = outbox.open(Some("0"));
        let (got, upto) = events(outbox.take(g, after));
        assert_eq!(got.len(), MAX_MESSAGES);
        assert_eq!(got[0], "10");
        assert_eq!(upto, (MAX_MESSAGES + 10) as u64);
    }

    #[test]
    fn an_event_is_one_data_line_whatever_its_message_holds() {
        // A lone CR ends an SSE line too: split on LF alone, it would start a field of the
        // attacker's (`id:`, `event:`) inside the event.
        let mut out = String::new();
        event(&mut out, Some(7), "{\"a\":\r\n1,\"b\":\rid: 9\r}");
        assert_eq!(
            out,
            "id: 7\nevent: message\ndata: {\"a\":  1,\"b\": id: 9 }\n\n"
        );
    }
}

#[cfg(test)]
mod budget_tests {
    use super::*;

    /// "Hold the boundary, round two", finding 7: the replay buffer kept its newest message
    /// however large (a client's own 3 MB progress token: +232 MiB for 60 sessions), and its
    /// limits were per session while a token may hold 1,000. A large message now goes at the
    /// next push, and the sessions of one principal hold at most their share together.
    #[test]
    fn a_principal_holds_its_share_whatever_it_sends() {
        let principal: Arc<AtomicUsize> = Arc::default();
        let large = "x".repeat(3 << 20);
        let outboxes: Vec<Arc<Outbox>> = (0..60).map(|_| Outbox::new(principal.clone())).collect();
        for outbox in &outboxes {
            outbox.push(large.clone());
            outbox.push("small".to_owned());
        }
        assert!(
            principal.load(Ordering::Acquire) <= budget::REPLAY_BYTES_EACH,
            "{} bytes held",
            principal.load(Ordering::Acquire)
        );
        for outbox in &outboxes {
            for _ in 0..100 {
                outbox.push("y".repeat(100 << 10));
            }
        }
        assert!(principal.load(Ordering::Acquire) <= budget::REPLAY_BYTES_EACH);
        for outbox in &outboxes {
            outbox.close();
        }
        assert_eq!(
            principal.load(Ordering::Acquire),
            0,
            "closed sessions give back theirs"
        );
    }
}
