//! Servers as child processes speaking newline-delimited JSON-RPC on stdin and stdout.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

use indexmap::IndexMap;
use moniker_surface::ServerId;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};

use super::{Connection, Sink, dispatch_line};
use crate::framing::{Frame, read_frame, write_lines};
use crate::message::Message;

/// How to start one server.
#[derive(Clone)]
pub struct StdioSpec {
    pub command: String,
    pub args: Vec<String>,
    pub env: IndexMap<String, String>,
    pub cwd: Option<String>,
}

/// A started server process and its connection.
pub struct Process {
    pub conn: Arc<Connection>,
    /// The process group to signal to end the server and whatever it started.
    pub pgid: Option<u32>,
    pub child: Child,
    /// Fires when the server's stdout is closed: the connection is gone.
    pub closed: oneshot::Receiver<()>,
}

/// Starts the server (through the guard, when given) and the tasks that carry its messages.
pub fn spawn(
    server: ServerId,
    spec: &StdioSpec,
    guard: Option<&Path>,
    sink: Arc<dyn Sink>,
    max_message: usize,
) -> std::io::Result<Process> {
    let mut cmd = match guard {
        Some(guard) => {
            let mut cmd = Command::new(guard);
            cmd.arg("__guard")
                .arg("--")
                .arg(&spec.command)
                .args(&spec.args);
            cmd
        }
        None => {
            let mut cmd = Command::new(&spec.command);
            cmd.args(&spec.args);
            cmd
        }
    };
    cmd.envs(&spec.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    let mut child = cmd.spawn()?;
    let pgid = child.id();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other("the child's pipes were not set up"));
    };

    let (tx, rx) = mpsc::unbounded_channel::<Message>();
    let conn = Arc::new(Connection::new(server.clone(), tx));
    // A write that fails means the server is gone: its reader sees that too.
    tokio::spawn(write_lines(stdin, rx));

    let (closed_tx, closed) = oneshot::channel();
    let reader_conn = conn.clone();
    tokio::spawn(async move {
        let mut reader = BufReader::with_capacity(64 * 1024, stdout);
        let mut buf = Vec::with_capacity(8 * 1024);
        loop {
            match read_frame(&mut reader, &mut buf, max_message).await {
                Ok(Frame::Line) => match std::str::from_utf8(&buf) {
                    Ok(line) if line.trim().is_empty() => {}
                    Ok(line) => dispatch_line(&reader_conn, sink.as_ref(), line.to_owned()),
                    Err(_) => {
                        tracing::warn!(server = %reader_conn.server, "server wrote a line that is not UTF-8; ignored")
                    }
                },
                Ok(Frame::TooLong(n)) => {
                    tracing::warn!(server = %reader_conn.server, bytes = n, limit = max_message, "server wrote a message over the size limit; dropped")
                }
                Ok(Frame::Eof) | Err(_) => break,
            }
        }
        reader_conn.close();
        let _ = closed_tx.send(());
    });

    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::info!(target: "moniker::server", server = %server, "{line}");
        }
    });

    Ok(Process {
        conn,
        pgid,
        child,
        closed,
    })
}
