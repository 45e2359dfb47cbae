//! Servers as child processes speaking newline-delimited JSON-RPC on stdin and stdout.

use std::ffi::OsString;
use std::process::Stdio;
use std::sync::Arc;

use moniker_config::PassEnv;
use moniker_surface::ServerId;
use tokio::io::BufReader;
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

use super::{Connection, ServerSpec, Sink, dispatch_line};
use crate::budget;
use crate::framing::{Backlog, Frame, lines, read_frame};

/// A started server process and its connection.
pub struct Process {
    pub conn: Arc<Connection>,
    /// The process group to signal to end the server and whatever it started.
    pub pgid: Option<u32>,
    pub child: Child,
    /// Fires when the server's stdout is closed: the connection is gone.
    pub closed: oneshot::Receiver<()>,
    /// Logs the server's stderr; ends with its last lines when the server closes it.
    pub stderr: tokio::task::JoinHandle<Vec<String>>,
}

/// How many of a server's last stderr lines are kept, to say why it failed.
const STDERR_TAIL: usize = 5;

/// Why `command` could not be started, as a user would say it.
pub(crate) fn cannot_run(command: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            format!("cannot run `{command}`: command not found (is it installed and on PATH?)")
        }
        std::io::ErrorKind::PermissionDenied => {
            format!("cannot run `{command}`: permission denied (is it executable?)")
        }
        _ => format!("cannot run `{command}`: {e}"),
    }
}

/// What every stdio server is given of moniker's environment: the official SDKs' list
/// (`get_default_environment` in the Python SDK, `getDefaultEnvironment` in the TypeScript
/// one), enough to find programs and a home directory.
pub const INHERITED_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// What every stdio server is given besides: where the certificates this machine trusts are
/// and which proxy to use. Behind a TLS-intercepting proxy, a server without them fails
/// (`uvx` cannot fetch its package); they name places, not secrets (a proxy URL with a
/// password in it is the one exception, and the server needs it to reach the network).
pub const TRUST_ENV: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
];

/// The variables of `vars` (moniker's environment) a server is given: [`INHERITED_ENV`],
/// [`TRUST_ENV`] and those its `pass_env` (with the gateway's) names (or all). Values that start with `()` are shell functions, which
/// the SDKs leave out too.
pub fn inherited(
    pass_env: &PassEnv,
    vars: impl Iterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    vars.filter(|(name, value)| {
        let Some(name) = name.to_str() else {
            return false;
        };
        let named = INHERITED_ENV.contains(&name)
            || TRUST_ENV.contains(&name)
            || match pass_env {
                PassEnv::All => true,
                PassEnv::Names(names) => names.iter().any(|n| n == name),
            };
        named && !value.as_encoded_bytes().starts_with(b"()")
    })
    .collect()
}

/// Reads the server's stdout line by line, each line dispatched (a response to its waiter, a
/// request or a note to the gateway), until it closes; then the connection is closed and
/// `closed` fires.
async fn read_lines(
    conn: Arc<Connection>,
    stdout: tokio::process::ChildStdout,
    sink: Arc<dyn Sink>,
    max_message: usize,
    closed: oneshot::Sender<()>,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut buf = Vec::with_capacity(8 * 1024);
    loop {
        match read_frame(&mut reader, &mut buf, max_message).await {
            Ok(Frame::Line) => match std::str::from_utf8(&buf) {
                Ok(line) if line.trim().is_empty() => {}
                Ok(line) => {
                    crate::awake::heard();
                    dispatch_line(&conn, sink.as_ref(), line.to_owned());
                }
                Err(_) => {
                    tracing::warn!(server = %conn.server, "server wrote a line that is not UTF-8; ignored")
                }
            },
            Ok(Frame::TooLong(n)) => {
                tracing::warn!(server = %conn.server, bytes = n, limit = max_message, "server wrote a message over the size limit; dropped")
            }
            Ok(Frame::Eof) | Err(_) => break,
        }
    }
    conn.close();
    let _ = closed.send(());
}

/// The command that starts the stdio server `spec`: through the guard (within its sandbox)
/// when there is one.
fn command_of(
    spec: &ServerSpec,
    launch: super::Launch<'_>,
    environment: &[(std::ffi::OsString, std::ffi::OsString)],
) -> std::io::Result<Command> {
    let ServerSpec::Stdio { command, args, .. } = spec else {
        return Err(std::io::Error::other("not a stdio server"));
    };
    Ok(match (launch.guard, launch.sandbox) {
        (Some(guard), sandbox) => {
            let mut cmd = Command::new(guard);
            cmd.arg("__guard");
            if let Some(sandbox) = sandbox {
                let plan = crate::sandbox::Plan::of_stdio(sandbox, spec, environment)
                    .ok_or_else(|| std::io::Error::other("a sandbox is a stdio server's"))?;
                cmd.arg("--sandbox")
                    .arg(serde_json::to_string(&plan).map_err(std::io::Error::other)?);
            }
            cmd.arg("--").arg(command).args(args);
            cmd
        }
        (None, Some(_)) => {
            return Err(std::io::Error::other(
                "its sandbox is applied by moniker's guard, which this command does not run",
            ));
        }
        (None, None) => {
            let mut cmd = Command::new(command);
            cmd.args(args);
            cmd
        }
    })
}

/// The environment a stdio server is given: what of moniker's its `pass_env` lets through (and
/// the short list every server gets), then its own `env`.
pub fn environment(
    pass_env: &PassEnv,
    env: &indexmap::IndexMap<String, String>,
) -> Vec<(OsString, OsString)> {
    inherited(pass_env, std::env::vars_os())
        .into_iter()
        // The key that opens every person's sealed sign-ins and secrets is moniker's alone,
        // whatever `pass_env` says.
        .filter(|(name, _)| name != crate::auth::personal::KEY_VAR)
        .chain(env.iter().map(|(k, v)| (k.into(), v.into())))
        .collect()
}

/// Starts the server (through the guard, when given) and the tasks that carry its messages.
/// `spec` is a [`ServerSpec::Stdio`].
pub fn spawn(
    server: ServerId,
    spec: &ServerSpec,
    launch: super::Launch<'_>,
    sink: Arc<dyn Sink>,
    max_message: usize,
) -> std::io::Result<Process> {
    let ServerSpec::Stdio {
        env, pass_env, cwd, ..
    } = spec
    else {
        return Err(std::io::Error::other("not a stdio server"));
    };
    let environment = environment(pass_env, env);
    let mut cmd = command_of(spec, launch, &environment)?;
    let secrets = launch.secrets.into_iter().flatten();
    cmd.env_clear()
        .envs(environment)
        .envs(secrets)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    let mut child = cmd.spawn()?;
    let pgid = child.id();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other("the child's pipes were not set up"));
    };

    // The writer never gives up on a server: the connection stops sending notes to one too far
    // behind ([`Connection::send`]).
    let backlog = Backlog::at_most(usize::MAX);
    let (to, writer) = lines(stdin, backlog.clone());
    let conn = Arc::new(Connection::new(server.clone(), to, Some(backlog)));
    // A write that fails means the server is gone: its reader sees that too.
    tokio::spawn(writer);

    let (closed_tx, closed) = oneshot::channel();
    // A sandboxed server's stderr is read for what its sandbox refused it as it runs too (an
    // `npm install` it tries into its own read-only package).
    let heard = launch.sandbox.is_some().then(|| sink.clone());
    tokio::spawn(read_lines(
        conn.clone(),
        stdout,
        sink,
        max_message,
        closed_tx,
    ));

    let stderr = tokio::spawn(async move {
        let mut reader = BufReader::new(stderr);
        let mut buf = Vec::new();
        let mut tail = std::collections::VecDeque::with_capacity(STDERR_TAIL);
        // Every line is read, whatever its bytes: a server whose stderr is not read blocks
        // (or dies of SIGPIPE) on its next log line.
        loop {
            let line = match read_frame(&mut reader, &mut buf, budget::STDERR_LINE).await {
                Ok(Frame::Line) => String::from_utf8_lossy(&buf).into_owned(),
                Ok(Frame::TooLong(n)) => format!(
                    "(a line of {n} bytes, over the {} logged: skipped)",
                    budget::STDERR_LINE
                ),
                Ok(Frame::Eof) | Err(_) => break,
            };
            tracing::info!(target: "moniker::server", server = %server, "{line}");
            if let Some(sink) = heard
                .as_ref()
                .filter(|_| crate::sandbox::mentions_a_refusal(&line))
            {
                sink.server_said(&server, &line);
            }
            if tail.len() == STDERR_TAIL {
                tail.pop_front();
            }
            tail.push_back(line);
        }
        tail.into()
    });

    Ok(Process {
        conn,
        pgid,
        child,
        closed,
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn a_server_gets_the_short_list_and_what_it_names() {
        let env = vars(&[
            ("PATH", "/bin"),
            ("HOME", "/root"),
            ("MONIKER_TOKENS", "secret"),
            ("GITHUB_TOKEN", "ghp"),
            ("SHELL", "() { evil; }"),
        ]);
        let names = |got: Vec<(OsString, OsString)>| -> Vec<String> {
            got.into_iter()
                .map(|(k, _)| k.into_string().unwrap())
                .collect()
        };
        assert_eq!(
            names(inherited(&PassEnv::default(), env.clone().into_iter())),
            ["PATH", "HOME"]
        );
        assert_eq!(
            names(inherited(
                &PassEnv::Names(vec!["GITHUB_TOKEN".into()]),
                env.clone().into_iter()
            )),
            ["PATH", "HOME", "GITHUB_TOKEN"]
        );
        assert_eq!(
            names(inherited(&PassEnv::All, env.into_iter())),
            ["PATH", "HOME", "MONIKER_TOKENS", "GITHUB_TOKEN"]
        );
    }

    /// "Works the first time", item 5: behind a TLS-intercepting proxy every `uvx` server
    /// failed until each entry named `SSL_CERT_FILE`. The trust and proxy variables go to
    /// every server; a secret still does not, unless named (here by the gateway's
    /// `pass_env`, merged with the server's own).
    #[test]
    fn trust_and_proxy_variables_go_to_every_server() {
        let env = vars(&[
            ("PATH", "/bin"),
            ("SSL_CERT_FILE", "/etc/corp-ca.pem"),
            ("NODE_EXTRA_CA_CERTS", "/etc/corp-ca.pem"),
            ("https_proxy", "http://proxy:3128"),
            ("GITHUB_TOKEN", "ghp"),
            ("OPENAI_API_KEY", "sk"),
        ]);
        let names = |got: Vec<(OsString, OsString)>| -> Vec<String> {
            got.into_iter()
                .map(|(k, _)| k.into_string().unwrap())
                .collect()
        };
        assert_eq!(
            names(inherited(&PassEnv::default(), env.clone().into_iter())),
            [
                "PATH",
                "SSL_CERT_FILE",
                "NODE_EXTRA_CA_CERTS",
                "https_proxy"
            ]
        );
        let gateway = PassEnv::Names(vec!["OPENAI_API_KEY".into()]);
        let server = PassEnv::Names(vec!["GITHUB_TOKEN".into()]);
        assert_eq!(
            names(inherited(&gateway.with(&server), env.into_iter())),
            [
                "PATH",
                "SSL_CERT_FILE",
                "NODE_EXTRA_CA_CERTS",
                "https_proxy",
                "GITHUB_TOKEN",
                "OPENAI_API_KEY"
            ]
        );
    }
}
