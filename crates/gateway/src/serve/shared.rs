//! One gateway per person and config, shared by every stdio client: the running gateway
//! listens on a Unix socket in the user's runtime directory, named by the config's path, and
//! each `moniker serve` a client starts attaches to it ([`attach`]), starting it when there is
//! none. Each attached client is a session of its own, with its own toolset; the gateway
//! stops once the last has gone and `idle` has passed.
//!
//! Nothing crosses between users: the directory is the user's alone (`0700`, theirs, checked
//! before use), the socket `0600`, and a peer of another user id is turned away.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Notify;

use crate::gateway::Gateway;

/// The most a client's first line (its hello) may be.
const HELLO_MAX: usize = 4096;
/// How long a gateway started for a client waits for one to attach.
const FIRST_WAIT: Duration = Duration::from_secs(10);
/// How long a client has to say hello.
const HELLO_WAIT: Duration = Duration::from_secs(5);

/// The bytes of a socket's path at most (`sockaddr_un`'s `sun_path` is 108 on Linux, 104 on
/// macOS, with the closing NUL).
const MAX_SOCKET_PATH: usize = 103;
/// `/<24 hex digits>.sock`.
const SOCKET_NAME: usize = 30;

/// Where the shared gateway of one config lives: its socket, the lock its starting is taken
/// under, and its log.
#[derive(Debug, Clone)]
pub struct Place {
    pub socket: PathBuf,
    pub lock: PathBuf,
    pub log: PathBuf,
}

impl Place {
    /// The place of the gateway of the config at `config` (its canonical path) run with
    /// `flavour` (what else makes it another gateway: moniker's version, the command's
    /// flags), in the user's runtime directory (`$XDG_RUNTIME_DIR/moniker`, else
    /// `<temp>/moniker-<uid>`, else `/tmp/moniker-<uid>`: the first where a socket's path fits
    /// in a `sockaddr_un`), made `0700` when missing. A directory someone else owns, or that
    /// others may enter, is refused.
    pub fn of(config: &Path, flavour: &str) -> std::io::Result<Self> {
        let uid = nix::unistd::getuid().as_raw();
        let own = format!("moniker-{uid}");
        let candidates = [
            dirs::runtime_dir().map(|runtime| runtime.join("moniker")),
            Some(std::env::temp_dir().join(&own)),
            Some(Path::new("/tmp").join(&own)),
            // Where a shared place was taken by someone else (a planted directory or link).
            dirs::cache_dir().map(|cache| cache.join("moniker").join("run")),
        ];
        let mut refused = Vec::new();
        let dir = candidates
            .into_iter()
            .flatten()
            .filter(|d| short_enough([Some(d.clone())]).is_some())
            .find(|dir| match crate::files::create_private_dir(dir) {
                Ok(()) => true,
                Err(e) => {
                    refused.push(e.to_string());
                    false
                }
            });
        let Some(dir) = dir else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "no directory of this user's alone (0700) is short enough for the shared gateway's socket: {}",
                    refused.join("; ")
                ),
            ));
        };
        if !refused.is_empty() {
            tracing::warn!(dir = %dir.display(), refused = refused.join("; "), "the shared gateway's usual directory is not this user's: another is used");
        }
        let mut hash = Sha256::new();
        hash.update(config.as_os_str().as_encoded_bytes());
        hash.update(b"\0");
        hash.update(flavour);
        let key = crate::files::hex(&hash.finalize()[..12]);
        Ok(Self {
            socket: dir.join(format!("{key}.sock")),
            lock: dir.join(format!("{key}.lock")),
            log: dir.join(format!("{key}.log")),
        })
    }
}

/// The first of `candidates` in which a socket's path fits in a `sockaddr_un`.
fn short_enough(candidates: impl IntoIterator<Item = Option<PathBuf>>) -> Option<PathBuf> {
    let fits = |d: &PathBuf| d.as_os_str().len() + SOCKET_NAME <= MAX_SOCKET_PATH;
    candidates.into_iter().flatten().find(fits)
}

/// What an attaching client says first: the toolset its session starts with, and whether it
/// hands its stdin and stdout over (they are pipes): the gateway then reads and writes the
/// client's own pipes, and nothing passes through the attaching process. Otherwise (a file, a
/// terminal) the attaching process copies the bytes both ways.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Hello {
    toolset: Option<String>,
    #[serde(default)]
    handover: bool,
}

/// The gateway's answer to a hello: `ok`, or why the client cannot attach.
#[derive(Debug, Serialize, Deserialize)]
struct Welcome {
    ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Binds the socket of `place` (a stale one, of a gateway that is gone, is replaced), `0600`.
pub fn bind(place: &Place) -> std::io::Result<UnixListener> {
    if std::os::unix::net::UnixStream::connect(&place.socket).is_ok() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            format!("a gateway listens on {} already", place.socket.display()),
        ));
    }
    let _ = std::fs::remove_file(&place.socket);
    let listener = UnixListener::bind(&place.socket)?;
    std::fs::set_permissions(&place.socket, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Serves every client that attaches on `listener`, each a session of its own, until `stop`
/// completes or no client has been attached for `idle`; then removes the socket.
pub async fn serve(
    gateway: Arc<Gateway>,
    listener: UnixListener,
    socket: PathBuf,
    idle: Duration,
    stop: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let attached = Arc::new(Attached::default());
    let uid = nix::unistd::getuid().as_raw();
    tokio::pin!(stop);
    // The client that started the gateway has a while to attach, whatever `idle` is.
    let mut wait = idle.max(FIRST_WAIT);
    let outcome = loop {
        let alone = attached.count.load(Ordering::Acquire) == 0;
        let idle_over = async {
            if alone {
                tokio::time::sleep(wait).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => break Err(e),
                };
                // Only this user's own processes attach, and none from a sandbox (a server
                // moniker confined, in a user namespace of its own, could else call every
                // other server as the user through this socket: Landlock does not keep it
                // from a socket's path).
                match stream.peer_cred() {
                    Ok(cred) if cred.uid() == uid && !confined(cred.pid()) => {}
                    _ => continue,
                }
                wait = idle;
                let place = Attachment::new(&attached);
                tokio::spawn(client(gateway.clone(), stream, place));
            }
            () = attached.changed.notified() => {}
            () = idle_over => {
                tracing::info!("the last client has gone: the shared gateway stops");
                break Ok(());
            }
            () = &mut stop => break Ok(()),
        }
    };
    let _ = std::fs::remove_file(&socket);
    outcome
}

/// Whether the process `pid` is in another user namespace than moniker's (a sandboxed server,
/// a container): on Linux, where namespaces are; a process whose namespace cannot be read is
/// taken as confined.
fn confined(pid: Option<i32>) -> bool {
    if !cfg!(target_os = "linux") {
        return false;
    }
    let namespace = |of: &str| std::fs::read_link(format!("/proc/{of}/ns/user")).ok();
    match (pid, namespace("self")) {
        (Some(pid), Some(own)) => namespace(&pid.to_string()) != Some(own),
        _ => true,
    }
}

/// How many clients are attached, and a tick when it changes.
#[derive(Default)]
struct Attached {
    count: AtomicUsize,
    changed: Notify,
}

/// One attached client: counted while it lasts.
struct Attachment(Arc<Attached>);

impl Attachment {
    fn new(attached: &Arc<Attached>) -> Self {
        attached.count.fetch_add(1, Ordering::AcqRel);
        attached.changed.notify_one();
        Self(attached.clone())
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::AcqRel);
        self.0.changed.notify_one();
    }
}

/// What the shared gateway says at `warn` and above (a reload refused, a server that failed, a
/// name claimed twice), each line as its log has it: relayed to every client attached with its
/// pipes, whose `moniker serve` writes it to the client's stderr (where a client shows its
/// server's log), as a gateway of the client's own would have.
pub fn notices() -> &'static tokio::sync::broadcast::Sender<Arc<str>> {
    static NOTICES: std::sync::OnceLock<tokio::sync::broadcast::Sender<Arc<str>>> =
        std::sync::OnceLock::new();
    // A client that does not keep up misses the oldest (its receiver lags), never holds more.
    NOTICES.get_or_init(|| tokio::sync::broadcast::channel(NOTICES_KEPT).0)
}

/// Notices a slow client's relay may be behind before it misses the oldest.
const NOTICES_KEPT: usize = 256;

/// Writes the gateway's notices to `write` (an attached client's socket) until it fails.
async fn relay_notices(mut write: tokio::net::unix::OwnedWriteHalf) {
    use tokio::sync::broadcast::error::RecvError;
    let mut notices = notices().subscribe();
    loop {
        match notices.recv().await {
            Ok(line) => {
                if write.write_all(line.as_bytes()).await.is_err() {
                    return;
                }
            }
            Err(RecvError::Lagged(missed)) => {
                let note = format!("({missed} of the shared gateway's notices were missed)\n");
                if write.write_all(note.as_bytes()).await.is_err() {
                    return;
                }
            }
            Err(RecvError::Closed) => return,
        }
    }
}

/// One client: its hello, the welcome, then its session until it goes.
async fn client(gateway: Arc<Gateway>, stream: UnixStream, _attachment: Attachment) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let hello = match tokio::time::timeout(HELLO_WAIT, read_hello(&mut reader)).await {
        Ok(Some(hello)) => hello,
        _ => return,
    };
    let welcome = match &hello.toolset {
        Some(name) if !gateway.naming.toolset_names().contains(name) => Welcome {
            ok: false,
            error: Some(format!("toolset `{name}` does not exist")),
        },
        _ => Welcome {
            ok: true,
            error: None,
        },
    };
    let mut line = serde_json::to_vec(&welcome).unwrap_or_default();
    line.push(b'\n');
    if write.write_all(&line).await.is_err() || !welcome.ok {
        return;
    }
    let toolset = hello
        .toolset
        .or_else(|| gateway.settings.default_toolset.clone());
    let served = if hello.handover {
        let relay = tokio::spawn(relay_notices(write));
        let served = handed_over(gateway, toolset, reader).await;
        relay.abort();
        served
    } else {
        super::stdio::serve_session(gateway, toolset, reader, write).await
    };
    if let Err(e) = served {
        tracing::debug!(error = %e, "an attached client's session ended");
    }
}

/// Serves the client on the pipes its `moniker serve` handed over, until the client closes
/// them (or the attaching process goes, which ends the session too); then the socket closes,
/// and the attaching process exits.
async fn handed_over(
    gateway: Arc<Gateway>,
    toolset: Option<String>,
    mut socket: BufReader<tokio::net::unix::OwnedReadHalf>,
) -> std::io::Result<()> {
    let (input, output) = tokio::time::timeout(HELLO_WAIT, take_over(socket.get_ref().as_ref()))
        .await
        .map_err(|_| std::io::Error::other("no descriptors came"))??;
    let input = tokio::net::unix::pipe::Receiver::from_owned_fd(input)?;
    let output = tokio::net::unix::pipe::Sender::from_owned_fd(output)?;
    let mut probe = [0u8; 1];
    tokio::select! {
        served = super::stdio::serve_session(gateway, toolset, input, output) => served,
        _ = tokio::io::AsyncReadExt::read(&mut socket, &mut probe) => Ok(()),
    }
}

/// Sends stdin and stdout (`fds`) over `stream` as one byte with their rights.
async fn hand_over(
    stream: &UnixStream,
    fds: [std::os::fd::BorrowedFd<'_>; 2],
) -> std::io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    loop {
        stream.writable().await?;
        let sent = stream.try_io(tokio::io::Interest::WRITABLE, || {
            let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
            let mut control = SendAncillaryBuffer::new(&mut space);
            control.push(SendAncillaryMessage::ScmRights(&fds));
            rustix::net::sendmsg(
                stream,
                &[std::io::IoSlice::new(b"F")],
                &mut control,
                SendFlags::NOSIGNAL,
            )
            .map_err(std::io::Error::from)
        });
        match sent {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

/// Receives the two descriptors [`hand_over`] sent: the client's stdin and stdout.
async fn take_over(
    stream: &UnixStream,
) -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    loop {
        stream.readable().await?;
        let got = stream.try_io(tokio::io::Interest::READABLE, || {
            let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let mut byte = [0u8; 1];
            rustix::net::recvmsg(
                stream,
                &mut [std::io::IoSliceMut::new(&mut byte)],
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            )
            .map_err(std::io::Error::from)?;
            let mut fds = Vec::new();
            for message in control.drain() {
                if let RecvAncillaryMessage::ScmRights(received) = message {
                    fds.extend(received);
                }
            }
            Ok(fds)
        });
        match got {
            Ok(fds) => {
                let mut fds = fds.into_iter();
                return match (fds.next(), fds.next(), fds.next()) {
                    (Some(input), Some(output), None) => Ok((input, output)),
                    _ => Err(std::io::Error::other("not the two descriptors of a client")),
                };
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

/// The first line, parsed; `None` when it is too long, not UTF-8 JSON, or missing.
async fn read_hello(reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>) -> Option<Hello> {
    let mut line = Vec::new();
    let mut limited = tokio::io::AsyncReadExt::take(&mut *reader, HELLO_MAX as u64);
    limited.read_until(b'\n', &mut line).await.ok()?;
    if !line.ends_with(b"\n") {
        return None;
    }
    serde_json::from_slice(&line).ok()
}

/// Why a client could not attach.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// The gateway turned the client away (its toolset does not exist).
    #[error("{0}")]
    Refused(String),
    /// The gateway could not be reached or started.
    #[error("{0}")]
    Unreachable(String),
}

/// Attaches this process's stdin and stdout to the shared gateway at `place` as one client
/// whose session starts with `toolset`, until stdin closes and every answer has come (or the
/// gateway goes). When no gateway listens there, `start` starts one (under the place's lock,
/// so that clients starting together start one), and it has `wait` to listen.
pub async fn attach(
    place: &Place,
    toolset: Option<String>,
    start: impl FnOnce() -> std::io::Result<std::process::Child>,
    wait: Duration,
) -> Result<(), AttachError> {
    let stream = match UnixStream::connect(&place.socket).await {
        Ok(stream) => stream,
        Err(_) => start_and_connect(place, start, wait).await?,
    };
    let pipes = super::stdio::pipes();
    let hello = Hello {
        toolset,
        handover: pipes.is_some(),
    };
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = serde_json::to_vec(&hello).unwrap_or_default();
    line.push(b'\n');
    let unreachable = |e: std::io::Error| AttachError::Unreachable(e.to_string());
    write.write_all(&line).await.map_err(unreachable)?;
    let mut answer = Vec::new();
    let mut limited = tokio::io::AsyncReadExt::take(&mut reader, HELLO_MAX as u64);
    limited
        .read_until(b'\n', &mut answer)
        .await
        .map_err(unreachable)?;
    let welcome: Welcome = serde_json::from_slice(&answer).map_err(|_| {
        AttachError::Unreachable("the shared gateway did not welcome this client".to_owned())
    })?;
    if !welcome.ok {
        return Err(AttachError::Refused(welcome.error.unwrap_or_default()));
    }
    if let Some((input, output)) = pipes {
        use std::os::fd::AsFd as _;
        hand_over(write.as_ref(), [input.as_fd(), output.as_fd()])
            .await
            .map_err(unreachable)?;
        drop((input, output));
        // The gateway serves the client's pipes itself; what it says meanwhile comes on the
        // socket, to this client's stderr; its closing the socket is the end.
        tokio::io::copy_buf(&mut reader, &mut tokio::io::stderr())
            .await
            .map_err(unreachable)?;
        return Ok(());
    }
    let (mut input, mut output) = super::stdio::streams().map_err(unreachable)?;
    // The client's messages go up until it closes stdin; the gateway then answers what is in
    // flight and closes: the way down ends the attachment.
    let up = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut input, &mut write).await;
        let _ = write.shutdown().await;
    });
    let down = tokio::io::copy_buf(&mut reader, &mut output).await;
    let _ = output.flush().await;
    let stdin_closed = up.is_finished();
    up.abort();
    match down {
        Ok(_) if stdin_closed => Ok(()),
        Ok(_) => Err(AttachError::Unreachable(
            "the shared gateway stopped while this client was attached".to_owned(),
        )),
        Err(e) => Err(unreachable(e)),
    }
}

/// Starts the gateway (unless another client did, meanwhile) and connects to it.
async fn start_and_connect(
    place: &Place,
    start: impl FnOnce() -> std::io::Result<std::process::Child>,
    wait: Duration,
) -> Result<UnixStream, AttachError> {
    let unreachable = |e: std::io::Error| AttachError::Unreachable(e.to_string());
    let lock_path = place.lock.clone();
    // Clients starting together take turns: the first starts the gateway, the others find it.
    let _lock = tokio::task::spawn_blocking(move || {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, errno)| std::io::Error::from(errno))
    })
    .await
    .map_err(|e| AttachError::Unreachable(e.to_string()))?
    .map_err(unreachable)?;
    if let Ok(stream) = UnixStream::connect(&place.socket).await {
        return Ok(stream);
    }
    let mut child = start().map_err(unreachable)?;
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if let Ok(stream) = UnixStream::connect(&place.socket).await {
            return Ok(stream);
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(AttachError::Unreachable(format!(
                "the shared gateway exited ({status}) before it listened; its log: {}",
                place.log.display()
            )));
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(AttachError::Unreachable(format!(
                "the shared gateway did not listen within {} s; its log: {}",
                wait.as_secs(),
                place.log.display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process of moniker's user namespace attaches; one in a namespace of its own (a
    /// sandboxed server, made here with util-linux's `unshare`) does not.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_process_in_another_user_namespace_is_confined() {
        assert!(!confined(i32::try_from(std::process::id()).ok()));
        assert!(confined(None));
        let mut child = std::process::Command::new("unshare")
            .args(["--user", "sleep", "5"])
            .spawn()
            .expect("unshare (util-linux)");
        let pid = i32::try_from(child.id()).ok();
        // Until the child is in its namespace (unshare runs first, then sleep).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !confined(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(confined(pid));
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn a_runtime_directory_too_long_for_a_socket_gives_way_to_a_shorter_one() {
        let long = PathBuf::from(format!("/tmp/{}/xdg/run/moniker", "p".repeat(80)));
        let short = PathBuf::from("/tmp/moniker-0");
        assert_eq!(
            short_enough([Some(long.clone()), Some(short.clone())]),
            Some(short)
        );
        assert_eq!(short_enough([Some(long)]), None);
        let socket =
            PathBuf::from("/run/user/1000/moniker").join(format!("{}.sock", "a".repeat(24)));
        assert!(socket.as_os_str().len() <= MAX_SOCKET_PATH);
        assert_eq!(SOCKET_NAME, format!("/{}.sock", "a".repeat(24)).len());
    }
}
