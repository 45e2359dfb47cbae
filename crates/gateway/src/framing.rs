//! Newline-delimited framing, both ways: lines are read with a size limit (a line longer than
//! the limit is skipped to its newline and reported, never buffered whole), and messages are
//! written one a line, flushed once per burst.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;

use crate::message::Message;

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

/// Reads the next line into `buf` (cleared first).
pub async fn read_frame<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Frame> {
    buf.clear();
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

/// The bytes of the messages a writer ([`write_lines`]) has taken and not written yet: what its
/// reader has not read. Shared, so that a sender can see how far behind the reader is.
#[derive(Debug, Clone)]
pub struct Backlog {
    held: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Past this many bytes, the writer gives up ([`write_lines`]).
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
        self.held.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `message` taken into `queue`, counted.
    fn hold(&self, message: Message, queue: &mut Vec<Message>) -> std::io::Result<()> {
        let held = self
            .held
            .fetch_add(message.text().len(), std::sync::atomic::Ordering::Relaxed)
            + message.text().len();
        if held > self.most {
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                format!(
                    "the reader has not read {held} bytes of messages (at most {})",
                    self.most
                ),
            ));
        }
        queue.push(message);
        Ok(())
    }

    fn written(&self, bytes: usize) {
        self.held
            .fetch_sub(bytes, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Writes every message of `rx` to `output`, one a line, until `rx` closes (every sender is
/// gone): what came while a burst was written goes in the next burst, flushed once. Messages
/// are taken from `rx` while a write waits, and counted in `backlog`: a reader that stops
/// reading holds them there, not in the channel, and once they are over the backlog's most the
/// writer ends with [`std::io::ErrorKind::StorageFull`].
pub async fn write_lines<W: AsyncWrite + Unpin>(
    output: W,
    mut rx: mpsc::UnboundedReceiver<Message>,
    backlog: Backlog,
) -> std::io::Result<()> {
    let mut out = BufWriter::new(output);
    let mut queue: Vec<Message> = Vec::new();
    // The burst being written; its vector is kept from one burst to the next.
    let mut burst: Vec<Message> = Vec::new();
    let mut open = true;
    loop {
        if queue.is_empty() {
            let Some(message) = rx.recv().await else {
                return Ok(());
            };
            backlog.hold(message, &mut queue)?;
        }
        // What is queued already goes in the same burst.
        while let Ok(message) = rx.try_recv() {
            backlog.hold(message, &mut queue)?;
        }
        std::mem::swap(&mut burst, &mut queue);
        let bytes = burst.iter().map(|m| m.text().len()).sum();
        {
            let write = async {
                for message in &burst {
                    write_line(&mut out, message).await?;
                }
                out.flush().await
            };
            tokio::pin!(write);
            loop {
                tokio::select! {
                    done = &mut write => {
                        done?;
                        break;
                    }
                    got = rx.recv(), if open => match got {
                        Some(message) => backlog.hold(message, &mut queue)?,
                        None => open = false,
                    },
                }
            }
        }
        backlog.written(bytes);
        burst.clear();
        if !open && queue.is_empty() {
            return Ok(());
        }
    }
}

async fn write_line<W: AsyncWrite + Unpin>(w: &mut W, message: &Message) -> std::io::Result<()> {
    w.write_all(one_line(message.text()).as_bytes()).await?;
    w.write_all(b"\n").await
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
