//! SSE: the stream of one POST (its progress, keep-alives, its answer), and the response that
//! carries a session's GET stream.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::http::header::{self, HeaderName};
use axum::response::Response;
use futures_util::Stream;
use tokio::sync::{mpsc, oneshot};

use super::KEEP_ALIVE;
use super::outbox::{self, Busy, KEEP_ALIVE_COMMENT};
use crate::framing::To;
use crate::message::Message;
use crate::serve::respond::{set, with_status};

/// An SSE response from a stream of text chunks.
pub(super) fn sse<S>(stream: S) -> Response
where
    S: Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static,
{
    let mut response = with_status(StatusCode::OK, Body::from_stream(stream));
    set(&mut response, header::CONTENT_TYPE, "text/event-stream");
    set(&mut response, header::CACHE_CONTROL, "no-cache");
    set(
        &mut response,
        HeaderName::from_static("x-accel-buffering"),
        "no",
    );
    response
}

/// One SSE event, and the end of the stream.
pub(super) fn sse_once(message: &Message) -> Response {
    let mut text = String::new();
    outbox::event(&mut text, None, message.text());
    sse(futures_util::stream::once(
        async move { Ok(Bytes::from(text)) },
    ))
}

/// The SSE stream of a POST: the request's progress and keep-alives, then the answer, then
/// the end. The answer is the last message on the channel: the channel closes after it.
pub(super) struct PostStream {
    rx: mpsc::UnboundedReceiver<Message>,
    /// What the session sent and this stream has not taken (it subtracts what it takes).
    held: Arc<std::sync::atomic::AtomicUsize>,
    /// A message read (with [`PostStream::recv`]) before the stream began, sent first.
    pub(super) first: Option<Message>,
    /// The keep-alives' clock, made when the stream first waits (an answer sent as JSON,
    /// taken with [`PostStream::recv`], never waits here).
    tick: Option<tokio::time::Interval>,
    done: bool,
    _busy: Busy,
}

impl PostStream {
    /// The stream as an SSE response, `guard` dropped with it (when the client goes away, or
    /// the answer is sent).
    pub(super) fn into_sse<G: Send + 'static>(self, guard: G) -> Response {
        sse(futures_util::stream::unfold(
            (self, guard),
            |(mut stream, guard)| async move {
                let chunk = stream.next().await?;
                Some((Ok(Bytes::from(chunk)), (stream, guard)))
            },
        ))
    }

    pub(super) fn new(
        rx: mpsc::UnboundedReceiver<Message>,
        held: Arc<std::sync::atomic::AtomicUsize>,
        first: Option<Message>,
        busy: Busy,
    ) -> Self {
        Self {
            rx,
            held,
            first,
            tick: None,
            done: false,
            _busy: busy,
        }
    }

    async fn next(&mut self) -> Option<String> {
        if self.done {
            return None;
        }
        if let Some(first) = self.first.take() {
            let mut text = String::new();
            // Taken with `recv` already: no longer held.
            outbox::event(&mut text, None, first.text());
            while let Ok(message) = self.rx.try_recv() {
                self.took(&message);
                outbox::event(&mut text, None, message.text());
            }
            return Some(text);
        }
        let tick = self.tick.get_or_insert_with(|| {
            tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE)
        });
        tokio::select! {
            message = self.rx.recv() => {
                let mut text = String::new();
                match message {
                    Some(message) => {
                        self.took(&message);
                        outbox::event(&mut text, None, message.text());
                        // What else is queued goes in the same chunk.
                        while let Ok(message) = self.rx.try_recv() {
                            self.took(&message);
                            outbox::event(&mut text, None, message.text());
                        }
                    }
                    None => self.done = true,
                }
                (!text.is_empty()).then_some(text)
            }
            _ = tick.tick() => Some(KEEP_ALIVE_COMMENT.to_owned()),
        }
    }

    /// A message taken from the session: no longer held.
    fn took(&self, message: &Message) {
        crate::answers::give_back(&self.held, message.text().len());
    }

    /// The next message from the session, as it is (no longer held).
    pub(super) async fn recv(&mut self) -> Option<Message> {
        let message = self.rx.recv().await?;
        self.took(&message);
        Some(message)
    }
}

/// The one answer of a POST answered as JSON: the first message its session sends
/// ([`To::once`]), no longer held once taken, or when the POST is dropped before (its client
/// gone).
pub(super) struct OneAnswer {
    rx: oneshot::Receiver<Message>,
    held: Arc<std::sync::atomic::AtomicUsize>,
    _busy: Busy,
}

impl OneAnswer {
    /// Where the session sends the answer, and the answer awaited.
    pub(super) fn new(held: Arc<std::sync::atomic::AtomicUsize>, busy: Busy) -> (To, Self) {
        let (to, rx) = To::once();
        let answer = Self {
            rx,
            held,
            _busy: busy,
        };
        (to, answer)
    }

    /// The answer; `None` when there is none (a cancelled request).
    pub(super) async fn recv(&mut self) -> Option<Message> {
        let message = (&mut self.rx).await.ok()?;
        crate::answers::give_back(&self.held, message.text().len());
        Some(message)
    }
}

impl Drop for OneAnswer {
    /// An answer sent and not taken is held no more.
    fn drop(&mut self) {
        self.rx.close();
        if let Ok(message) = self.rx.try_recv() {
            crate::answers::give_back(&self.held, message.text().len());
        }
    }
}

impl Drop for PostStream {
    /// What the session sent and nobody will take is held no more.
    fn drop(&mut self) {
        self.rx.close();
        while let Ok(message) = self.rx.try_recv() {
            self.took(&message);
        }
    }
}
