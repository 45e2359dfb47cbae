//! One client on stdin and stdout.

use std::sync::Arc;

use tokio::io::{AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::mpsc;

use crate::framing::{Frame, read_frame};
use crate::gateway::Gateway;
use crate::jsonrpc;
use crate::session::Session;

/// Serves one client on this process's stdin and stdout until stdin closes.
pub async fn serve(gateway: Arc<Gateway>) -> std::io::Result<()> {
    // When stdin and stdout are pipes (as MCP clients start servers), read and write them
    // through the reactor: tokio's own stdin and stdout go through a blocking thread, a hop
    // that costs tens of microseconds per message.
    use std::os::fd::AsFd as _;
    use tokio::net::unix::pipe;
    let input = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Receiver::from_owned_fd);
    let output = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Sender::from_owned_fd);
    match (input, output) {
        (Ok(input), Ok(output)) => serve_on(gateway, input, output).await,
        _ => serve_on(gateway, tokio::io::stdin(), tokio::io::stdout()).await,
    }
}

/// Serves one client on any byte streams.
pub async fn serve_on<R, W>(gateway: Arc<Gateway>, input: R, output: W) -> std::io::Result<()>
where
    R: tokio::io::AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let max = gateway.settings.max_message;
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        let mut out = BufWriter::new(output);
        while let Some(message) = rx.recv().await {
            if write_line(&mut out, &message).await.is_err() {
                return;
            }
            while let Ok(message) = rx.try_recv() {
                if write_line(&mut out, &message).await.is_err() {
                    return;
                }
            }
            if out.flush().await.is_err() {
                return;
            }
        }
    });
    let session = Session::new(gateway, tx);
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut buf = Vec::with_capacity(8 * 1024);
    loop {
        match read_frame(&mut reader, &mut buf, max).await? {
            Frame::Eof => break,
            Frame::TooLong(n) => session.send(jsonrpc::error(
                None,
                jsonrpc::INVALID_REQUEST,
                &format!("Invalid Request: message of {n} bytes is over the limit of {max} bytes"),
            )),
            Frame::Line => match String::from_utf8(std::mem::take(&mut buf)) {
                Ok(line) if line.trim().is_empty() => {}
                Ok(line) => session.handle(line),
                Err(_) => session.send(jsonrpc::error(
                    None,
                    jsonrpc::PARSE_ERROR,
                    "Parse error: not UTF-8",
                )),
            },
        }
    }
    // Answers to requests still in flight go out if they come soon; the client may be gone.
    drop(session);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), writer).await;
    Ok(())
}

async fn write_line<W: AsyncWrite + Unpin>(w: &mut W, line: &str) -> std::io::Result<()> {
    w.write_all(line.as_bytes()).await?;
    w.write_all(b"\n").await
}
