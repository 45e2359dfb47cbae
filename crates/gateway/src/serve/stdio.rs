//! One client on stdin and stdout.

use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::FileTypeExt as _;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::net::unix::pipe;

use crate::budget;
use crate::framing::{Backlog, Frame, lines, read_frame};
use crate::gateway::Gateway;
use crate::message::{self, Message};
use crate::session::Session;

/// Serves one client on this process's stdin and stdout until stdin closes, then until every
/// request read before that is answered.
pub async fn serve(gateway: Arc<Gateway>) -> std::io::Result<()> {
    let (input, output) = streams()?;
    serve_on(gateway, input, output).await
}

/// This process's stdin and stdout as async streams.
///
/// A pipe (as MCP clients start servers) is read and written through the reactor: tokio's own
/// stdin and stdout go through a blocking thread, a hop that costs tens of microseconds per
/// message. Anything else (a file, a terminal, /dev/null) keeps blocking I/O on that thread.
/// Each side is chosen on its own: a pipe made non-blocking must never be read or written by
/// blocking I/O.
pub fn streams() -> std::io::Result<(
    Box<dyn AsyncRead + Unpin + Send>,
    Box<dyn AsyncWrite + Unpin + Send>,
)> {
    let input: Box<dyn AsyncRead + Unpin + Send> = match pipe_fd(&std::io::stdin()) {
        Some(fd) => Box::new(pipe::Receiver::from_owned_fd(fd)?),
        None => Box::new(tokio::io::stdin()),
    };
    let output: Box<dyn AsyncWrite + Unpin + Send> = match pipe_fd(&std::io::stdout()) {
        Some(fd) => Box::new(pipe::Sender::from_owned_fd(fd)?),
        None => Box::new(tokio::io::stdout()),
    };
    Ok((input, output))
}

/// Copies of this process's stdin and stdout when both are pipes (as MCP clients start
/// servers): what a client's `moniker serve` hands to the shared gateway.
pub(crate) fn pipes() -> Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    Some((pipe_fd(&std::io::stdin())?, pipe_fd(&std::io::stdout())?))
}

/// A copy of the descriptor when it is a pipe.
fn pipe_fd(stream: &impl AsFd) -> Option<std::os::fd::OwnedFd> {
    let fd = stream.as_fd().try_clone_to_owned().ok()?;
    let file = File::from(fd);
    let fifo = file.metadata().ok()?.file_type().is_fifo();
    fifo.then(|| file.into())
}

/// Serves one client on any byte streams, with the gateway's default toolset.
pub async fn serve_on<R, W>(gateway: Arc<Gateway>, input: R, output: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let toolset = gateway.settings.default_toolset.clone();
    serve_session(gateway, toolset, input, output).await
}

/// Serves one client on any byte streams, its session starting with `toolset` equipped.
pub async fn serve_session<R, W>(
    gateway: Arc<Gateway>,
    toolset: Option<String>,
    input: R,
    output: W,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let max = crate::framing::DEFAULT_MAX_MESSAGE;
    // Every answer in flight is bounded by the call timeout; a little more for the last write.
    let drain = gateway.settings.config.call_timeout + Duration::from_secs(2);
    let (to, writer) = lines(output, Backlog::at_most(budget::CLIENT_BACKLOG));
    let mut writer = tokio::spawn(writer);
    let session = Session::starting_with(gateway, to, toolset);
    session.identify("stdio");
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut buf = Vec::with_capacity(8 * 1024);
    loop {
        let frame = tokio::select! {
            frame = read_frame(&mut reader, &mut buf, max) => frame?,
            // The client reads none of its answers (or closed its end): nothing more it asks
            // could be answered, so nothing more is read.
            ended = &mut writer => {
                if let Ok(Err(e)) = ended
                    && e.kind() == std::io::ErrorKind::StorageFull
                {
                    tracing::warn!(error = %e, "the stdio client does not read its answers; its session ends");
                }
                return Ok(());
            }
        };
        match frame {
            Frame::Eof => break,
            Frame::TooLong(n) => session.send(Message::error(
                None,
                message::INVALID_REQUEST,
                &format!("Invalid Request: message of {n} bytes is over the limit of {max} bytes"),
            )),
            // The line is copied out at its length: `buf` keeps its capacity for the next.
            Frame::Line => match std::str::from_utf8(&buf) {
                Ok(line) if line.trim().is_empty() => {}
                Ok(line) => {
                    crate::awake::heard();
                    session.handle(message::parse(line.to_owned()), None);
                }
                Err(_) => session.send(Message::error(
                    None,
                    message::PARSE_ERROR,
                    "Parse error: not UTF-8",
                )),
            },
        }
    }
    // The writer ends once every answer still in flight has been written: the requests'
    // tasks hold the session until they answer.
    drop(session);
    match tokio::time::timeout(drain, writer).await {
        Ok(Ok(Err(e))) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e),
        _ => Ok(()),
    }
}
