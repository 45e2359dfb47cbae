//! Newline-delimited framing, both ways: lines are read with a size limit (a line longer than
//! the limit is skipped to its newline and reported, never buffered whole), and messages are
//! written one a line: by their sender when nothing waits, else by the writer's task, a burst
//! in one system call.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite};
use tokio::sync::{mpsc, oneshot};

use crate::message::Message;
use crate::sync::lock;

/// Messages larger than this are refused unless configured otherwise.
pub const DEFAULT_MAX_MESSAGE: usize = 16 * 1024 * 1024;

#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A line, without its newline (nor a `\r` before it).
    Line,
    /// A line over the limit, skipped; its length so far.
    TooLong(usize),
    Eof,
}

/// The room a line buffer keeps between lines ([`read_frame`]).
const KEPT_ROOM: usize = 64 * 1024;

/// Reads the next line into `buf` (cleared first; past [`KEPT_ROOM`] of room, which a long
/// line grew it to, shrunk back to that: one long message is not held for the stream's life).
pub async fn read_frame<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Frame> {
    buf.clear();
    buf.shrink_to(KEPT_ROOM);
    let mut skipped = 0usize;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (skipped, buf.is_empty()) {
                (0, true) => Frame::Eof,
                (0, false) => Frame::Line,
                (n, _) => Frame::TooLong(n),
            });
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        if skipped > 0 || buf.len() + chunk.len() > max {
            skipped += buf.len() + chunk.len();
            buf.clear();
        } else {
            buf.extend_from_slice(chunk);
        }
        let used = done.unwrap_or(available.len());
        reader.consume(used);
        if done.is_some() {
            if skipped > 0 {
                return Ok(Frame::TooLong(skipped));
            }
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(Frame::Line);
        }
    }
}

/// The bytes of the messages a writer ([`lines`]) holds and has not written yet: what its
/// reader has not read. Shared, so that a sender can see how far behind the reader is.
#[derive(Debug, Clone)]
pub struct Backlog {
    held: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Past this many bytes, the writer gives up ([`lines`]).
    most: usize,
}

impl Backlog {
    /// A backlog the writer gives up past `most` bytes.
    pub fn at_most(most: usize) -> Self {
        Self {
            held: std::sync::Arc::default(),
            most,
        }
    }

    /// The bytes taken and not written yet.
    pub fn held(&self) -> usize {
        self.held.load(Relaxed)
    }

    /// `bytes` more held; `Err` past the most.
    fn hold(&self, bytes: usize) -> std::io::Result<()> {
        let (held, most) = (self.held.fetch_add(bytes, Relaxed) + bytes, self.most);
        if held <= most {
            return Ok(());
        }
        let why = format!("the reader has not read {held} bytes of messages (at most {most})");
        Err(std::io::Error::new(std::io::ErrorKind::StorageFull, why))
    }

    fn written(&self, bytes: usize) {
        self.held.fetch_sub(bytes, Relaxed);
    }
}

/// Where the messages to one peer go: a channel its reader takes them from (an HTTP stream, a
/// server over HTTP), or a byte stream they are written to, one a line ([`lines`]).
#[derive(Clone)]
pub enum To {
    Channel(mpsc::UnboundedSender<Message>),
    /// The first message only, to its one reader (the answer of a POST answered as JSON);
    /// what follows it comes back ([`To::once`]).
    Once(Arc<Mutex<Option<oneshot::Sender<Message>>>>),
    Lines(Arc<Lines>),
    /// Nowhere: taken and dropped (a stateless client's session's own messages, which no
    /// stream of its carries).
    Nowhere,
}

impl To {
    /// Where one message goes (the first sent), and where it is read: a one-shot channel, made
    /// for one message (a stream's channel is made for many, and costs more to make than one
    /// answer takes to send).
    pub fn once() -> (Self, oneshot::Receiver<Message>) {
        let (tx, rx) = oneshot::channel();
        (Self::Once(Arc::new(Mutex::new(Some(tx)))), rx)
    }

    /// Sends `message`; it comes back when nothing takes messages here any more (the channel's
    /// reader, or the stream's writer, is gone; a one-shot channel's message sent).
    pub fn send(&self, message: Message) -> Result<(), Message> {
        match self {
            Self::Channel(tx) => tx.send(message).map_err(|e| e.0),
            Self::Once(tx) => match lock(tx).take() {
                Some(tx) => tx.send(message),
                None => Err(message),
            },
            Self::Lines(lines) => lines.send(message),
            Self::Nowhere => Ok(()),
        }
    }

    /// Completes when nothing takes messages here any more.
    pub async fn closed(&self) {
        match self {
            Self::Channel(tx) => tx.closed().await,
            Self::Once(tx) => {
                std::future::poll_fn(|cx| match lock(tx).as_mut() {
                    Some(tx) => tx.poll_closed(cx),
                    None => Poll::Ready(()),
                })
                .await
            }
            Self::Lines(lines) => lines.writer.closed().await,
            Self::Nowhere => std::future::pending().await,
        }
    }
}

impl From<mpsc::UnboundedSender<Message>> for To {
    fn from(tx: mpsc::UnboundedSender<Message>) -> Self {
        Self::Channel(tx)
    }
}

/// The sending side of a byte stream written one message a line ([`lines`]). A message sent
/// while nothing waits to be written is written by its sender at once, in place: it does not
/// wait for the writer's task to be woken and run (a hop of microseconds a message). What the
/// stream does not take at once is queued, in order, for that task. When every clone of it
/// is gone, the writer ends once what is queued is written.
pub struct Lines {
    writer: Arc<LineWriter>,
}

impl Drop for Lines {
    fn drop(&mut self) {
        let mut state = lock(&self.writer.state);
        state.senders_gone = true;
        state.wake();
    }
}

/// A stream and what is queued for it, behind one lock: a sender and the writer's task each
/// write only under it, so lines never interleave and keep their order.
struct LineWriter {
    state: Mutex<LineState>,
    backlog: Backlog,
    /// Told when the writer ends.
    ended: tokio::sync::Notify,
}

struct LineState {
    output: Pin<Box<dyn AsyncWrite + Send>>,
    /// Messages not yet written (the first may be in part: [`Self::sent`] of its bytes).
    queue: VecDeque<Queued>,
    /// The bytes of the first queued message's line (with its newline) written already.
    sent: usize,
    /// Why the writer ends, once it is known and before its task has said so.
    failed: Option<std::io::Error>,
    /// The writer ended: nothing more is taken.
    ended: bool,
    senders_gone: bool,
    /// The writer's task, woken when there is work for it.
    task: Option<Waker>,
}

/// A message queued for the writer's task, its line made once ([`one_line`]).
struct Queued {
    message: Message,
    /// Its text with raw line ends replaced, when it had any (else its own is the line).
    flattened: Option<String>,
}

impl Queued {
    fn new(message: Message) -> Self {
        let flattened = match one_line(message.text()) {
            std::borrow::Cow::Owned(line) => Some(line),
            std::borrow::Cow::Borrowed(_) => None,
        };
        Self { message, flattened }
    }

    fn line(&self) -> &str {
        self.flattened.as_deref().unwrap_or(self.message.text())
    }
}

impl LineState {
    fn wake(&mut self) {
        if let Some(task) = self.task.take() {
            task.wake();
        }
    }

    /// The task polling now is the one to wake.
    fn wake_me(&mut self, cx: &Context<'_>) {
        if !self.task.as_ref().is_some_and(|t| t.will_wake(cx.waker())) {
            self.task = Some(cx.waker().clone());
        }
    }

    /// Writes `line` and its newline now, as far as the stream takes them without waiting:
    /// the bytes written (0 when it would wait). Only with nothing queued: its wait, which
    /// wakes no one, then never replaces the task's own.
    fn write_now(&mut self, line: &str) -> std::io::Result<usize> {
        let slices = [IoSlice::new(line.as_bytes()), IoSlice::new(b"\n")];
        let mut cx = Context::from_waker(Waker::noop());
        match self.output.as_mut().poll_write_vectored(&mut cx, &slices) {
            Poll::Ready(Ok(0)) => Err(std::io::ErrorKind::WriteZero.into()),
            Poll::Ready(result) => result,
            Poll::Pending => Ok(0),
        }
    }

    /// `queued` for the task, counted in `backlog`: `Err` (and the writer ends) past
    /// its most.
    fn queue(&mut self, queued: Queued, backlog: &Backlog) -> Result<(), Message> {
        self.wake();
        let Err(e) = backlog.hold(queued.message.text().len()) else {
            self.queue.push_back(queued);
            return Ok(());
        };
        backlog.written(queued.message.text().len());
        self.failed = Some(e);
        Err(queued.message)
    }

    /// Writes what is queued, as much as the stream takes now, up to [`BURST`] lines a system
    /// call; `Ready(Ok)` once the queue is empty.
    fn poll_queue(&mut self, cx: &mut Context<'_>, backlog: &Backlog) -> Poll<std::io::Result<()>> {
        while !self.queue.is_empty() {
            let n = match self.poll_burst(cx) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => n,
                other => return other.map_ok(|_| ()),
            };
            self.written(n, backlog);
        }
        Poll::Ready(Ok(()))
    }

    /// One write of the queue's first lines (the first from where it was left).
    fn poll_burst(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        let mut slices = Vec::with_capacity(BURST * 2);
        for (i, line) in self.queue.iter().take(BURST).map(Queued::line).enumerate() {
            let skip = if i == 0 { self.sent } else { 0 };
            if skip < line.len() {
                slices.push(IoSlice::new(&line.as_bytes()[skip..]));
            }
            slices.push(IoSlice::new(b"\n"));
        }
        self.output.as_mut().poll_write_vectored(cx, &slices)
    }

    /// `n` more bytes of the queue written: the lines they finish leave it.
    fn written(&mut self, n: usize, backlog: &Backlog) {
        let mut left = self.sent + n;
        while let Some(first) = self.queue.front() {
            let length = first.line().len() + 1;
            if left < length {
                break;
            }
            left -= length;
            backlog.written(first.message.text().len());
            self.queue.pop_front();
        }
        self.sent = left;
    }

    /// The writer's turn: `Ready` once it ends (every sender gone and all written: `Ok`;
    /// else why not).
    fn poll_run(&mut self, cx: &mut Context<'_>, backlog: &Backlog) -> Poll<std::io::Result<()>> {
        if let Some(e) = self.failed.take() {
            return Poll::Ready(Err(e));
        }
        std::task::ready!(self.poll_queue(cx, backlog))?;
        std::task::ready!(self.output.as_mut().poll_flush(cx))?;
        (self.senders_gone)
            .then_some(Ok(()))
            .map_or(Poll::Pending, Poll::Ready)
    }

    /// The writer ended: nothing more is taken, and nothing queued is held.
    fn end(&mut self, backlog: &Backlog) {
        self.ended = true;
        for queued in self.queue.drain(..) {
            backlog.written(queued.message.text().len());
        }
    }
}

/// The most lines written in one system call.
const BURST: usize = 64;

impl Lines {
    fn send(&self, message: Message) -> Result<(), Message> {
        let writer = &self.writer;
        let mut state = lock(&writer.state);
        if state.ended || state.failed.is_some() {
            return Err(message);
        }
        // Its line is made once, for the write here and for the task's.
        let queued = Queued::new(message);
        if state.queue.is_empty() {
            let line = queued.line();
            match state.write_now(line) {
                Ok(n) if n == line.len() + 1 => return Ok(()),
                // The rest is the task's, when the stream is ready for it.
                Ok(n) => state.sent = n,
                Err(e) => {
                    state.failed = Some(e);
                    state.wake();
                    return Err(queued.message);
                }
            }
        }
        state.queue(queued, &writer.backlog)
    }
}

impl LineWriter {
    /// [`LineState::poll_run`], under the lock; the task is woken for what comes next.
    fn poll_run(&self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let mut state = lock(&self.state);
        let run = state.poll_run(cx, &self.backlog);
        match run.is_ready() {
            true => self.end(&mut state),
            false => state.wake_me(cx),
        }
        run
    }

    /// The writer ended: said to whoever waits for it ([`To::closed`]).
    fn end(&self, state: &mut LineState) {
        state.end(&self.backlog);
        self.ended.notify_waiters();
    }

    /// Completes when the writer has ended.
    async fn closed(&self) {
        let ended = self.ended.notified();
        tokio::pin!(ended);
        ended.as_mut().enable();
        if !lock(&self.state).ended {
            ended.await;
        }
    }
}

/// A byte stream written one message a line: where to send them ([`To::Lines`]), and the writer
/// to run as a task until every sender is gone and what they sent is written (`Ok`), or the
/// stream fails (its error), or its reader leaves more than `backlog` allows unread
/// ([`std::io::ErrorKind::StorageFull`]). From then on, sends fail.
pub fn lines<W: AsyncWrite + Send + 'static>(
    output: W,
    backlog: Backlog,
) -> (
    To,
    impl Future<Output = std::io::Result<()>> + Send + 'static,
) {
    let writer = Arc::new(LineWriter {
        state: Mutex::new(LineState {
            output: Box::pin(output),
            queue: VecDeque::new(),
            sent: 0,
            failed: None,
            ended: false,
            senders_gone: false,
            task: None,
        }),
        backlog,
        ended: tokio::sync::Notify::new(),
    });
    let to = To::Lines(Arc::new(Lines {
        writer: writer.clone(),
    }));
    let ends = EndsWhenDropped(writer.clone());
    let run = async move {
        // Dropped before it ended (its task aborted, or panicked): ended all the same, so
        // that sends fail and nothing is held for a writer that is gone.
        let _ends = ends;
        std::future::poll_fn(|cx| writer.poll_run(cx)).await
    };
    (to, run)
}

/// Ends its writer when dropped, unless it ended already.
struct EndsWhenDropped(Arc<LineWriter>);

impl Drop for EndsWhenDropped {
    fn drop(&mut self) {
        let mut state = lock(&self.0.state);
        if !state.ended {
            self.0.end(&mut state);
        }
    }
}

/// `text` as one line. Every message is flattened where it is parsed, and what moniker builds
/// has no raw line end; this is the last guard where lines are framed (a pipe, an SSE
/// event), so that no bug elsewhere can ever let a message be read as two.
pub fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    if crate::message::has_line_end(text) {
        tracing::warn!("a message with a raw line end was about to be framed; flattened");
        std::borrow::Cow::Owned(text.replace(['\r', '\n'], " "))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(n: usize, pad: usize) -> Message {
        crate::message::parse_one(format!(
            r#"{{"jsonrpc":"2.0","method":"n","params":{{"n":{n},"pad":"{}"}}}}"#,
            "x".repeat(pad)
        ))
        .expect("a message")
    }

    /// Through a stream that takes 64 bytes at a time (each write in part, most sends
    /// queued behind one in progress), from two tasks at once: every line arrives whole, once,
    /// in the order each sender sent them, and the writer ends when the senders are gone and
    /// all is written.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lines_arrive_whole_and_in_order_through_a_slow_reader() {
        let (writing, reading) = tokio::io::duplex(64);
        let (to, writer) = lines(writing, Backlog::at_most(usize::MAX));
        let writer = tokio::spawn(writer);
        let senders: Vec<_> = (0..2)
            .map(|s| {
                let to = to.clone();
                tokio::spawn(async move {
                    for i in 0..200 {
                        to.send(message(s * 1000 + i, i % 97)).expect("taken");
                        if i % 7 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                })
            })
            .collect();
        drop(to);
        let reader = tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(reading);
            let mut buf = Vec::new();
            let mut seen = Vec::new();
            while read_frame(&mut reader, &mut buf, 1 << 20).await.unwrap() == Frame::Line {
                let v: serde_json::Value = serde_json::from_slice(&buf).expect("a whole line");
                seen.push(v["params"]["n"].as_u64().unwrap() as usize);
            }
            seen
        });
        for sender in senders {
            sender.await.unwrap();
        }
        writer.await.unwrap().expect("ends well");
        let seen = reader.await.unwrap();
        assert_eq!(seen.len(), 400);
        for s in 0..2 {
            let theirs: Vec<usize> = seen.iter().copied().filter(|n| n / 1000 == s).collect();
            assert_eq!(theirs, (0..200).map(|i| s * 1000 + i).collect::<Vec<_>>());
        }
    }

    /// A reader that reads nothing: past the backlog the writer ends (StorageFull), sends
    /// fail from then on, and `closed` completes.
    #[tokio::test]
    async fn a_reader_that_reads_nothing_ends_the_writer_past_its_backlog() {
        let (writing, _reading) = tokio::io::duplex(64);
        let backlog = Backlog::at_most(4096);
        let (to, writer) = lines(writing, backlog.clone());
        let writer = tokio::spawn(writer);
        let mut refused = None;
        for i in 0..100 {
            if to.send(message(i, 100)).is_err() {
                refused = Some(i);
                break;
            }
        }
        assert!(refused.is_some_and(|i| i > 20), "{refused:?}");
        let ended = writer.await.unwrap().expect_err("gives up");
        assert_eq!(ended.kind(), std::io::ErrorKind::StorageFull);
        assert!(to.send(message(0, 0)).is_err());
        tokio::time::timeout(std::time::Duration::from_secs(5), to.closed())
            .await
            .expect("closed");
        assert_eq!(backlog.held(), 0, "nothing is held once it ended");
    }

    /// A stream that fails (its reader gone): the send that meets it comes back, and the
    /// writer ends with the error.
    #[tokio::test]
    async fn a_broken_stream_ends_the_writer() {
        let (writing, reading) = tokio::io::duplex(64);
        drop(reading);
        let (to, writer) = lines(writing, Backlog::at_most(usize::MAX));
        assert!(to.send(message(1, 0)).is_err());
        let ended = writer.await.expect_err("fails");
        assert_eq!(ended.kind(), std::io::ErrorKind::BrokenPipe);
    }

    /// A writer dropped before it ended (its task aborted): sends fail from then on, and
    /// `closed` completes.
    #[tokio::test]
    async fn a_writer_dropped_unfinished_ends() {
        let (writing, _reading) = tokio::io::duplex(64);
        let (to, writer) = lines(writing, Backlog::at_most(usize::MAX));
        drop(writer);
        assert!(to.send(message(1, 0)).is_err());
        tokio::time::timeout(std::time::Duration::from_secs(5), to.closed())
            .await
            .expect("closed");
    }

    /// A buffer a long line grew keeps at most [`KEPT_ROOM`] once the next line is read.
    #[tokio::test]
    async fn a_long_line_is_not_held_after_it() {
        let text = format!("{}\nshort\n", "x".repeat(1 << 20));
        let mut reader = tokio::io::BufReader::new(text.as_bytes());
        let mut buf = Vec::new();
        assert_eq!(
            read_frame(&mut reader, &mut buf, 2 << 20).await.unwrap(),
            Frame::Line
        );
        assert!(buf.capacity() >= 1 << 20);
        assert_eq!(
            read_frame(&mut reader, &mut buf, 2 << 20).await.unwrap(),
            Frame::Line
        );
        assert_eq!(buf, b"short");
        assert!(buf.capacity() <= KEPT_ROOM, "{}", buf.capacity());
    }

    #[tokio::test]
    async fn lines_and_limits() {
        let input: &[u8] = b"one\r\ntwo-is-long\nthree\nlast";
        let mut reader = tokio::io::BufReader::with_capacity(4, input);
        let mut buf = Vec::new();
        let mut seen = Vec::new();
        loop {
            match read_frame(&mut reader, &mut buf, 6).await.unwrap() {
                Frame::Eof => break,
                Frame::Line => seen.push(String::from_utf8(buf.clone()).unwrap()),
                Frame::TooLong(n) => seen.push(format!("<{n}>")),
            }
        }
        assert_eq!(seen, ["one", "<11>", "three", "last"]);
    }
}
