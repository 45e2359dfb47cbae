//! One gateway per person and config: `moniker serve` over stdio attaches to the running
//! gateway of its config (starting it in the background when there is none), and
//! `serve --shared` is that gateway. See `moniker_gateway::serve::shared`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use moniker_config::Config;
use moniker_gateway::Gateway;
use moniker_gateway::serve::shared::{self, AttachError, Place};

use crate::args::ServeArgs;
use crate::exit::{Exit, Failure};
use crate::output;

/// How much of the shared gateway's log is kept across its starts.
const LOG_KEPT: u64 = 8 << 20;
/// How much the shared gateway writes to its log before the file starts anew, while it runs.
pub const LOG_MOST: u64 = 4 * LOG_KEPT;

/// How long a started gateway has to listen (it answers at once: servers start behind it).
const LISTEN_WAIT: Duration = Duration::from_secs(30);

/// The config's path as the shared gateway is known by (the same file by any path).
fn config_path(config: &Config) -> PathBuf {
    let path = PathBuf::from(&config.source.file_name);
    std::fs::canonicalize(&path).unwrap_or(path)
}

/// What else makes another gateway of the same config: moniker's version and the flags that
/// set up the gateway (not those of one session).
fn flavour(args: &ServeArgs) -> String {
    format!(
        "{}\0{}\0{}",
        env!("CARGO_PKG_VERSION"),
        args.manage,
        args.store
            .as_deref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    )
}

/// `moniker serve` over stdio: this client's session runs in the shared gateway.
pub async fn attach(config: &Config, args: &ServeArgs) -> Result<Exit, Failure> {
    // The config's own errors are this client's to show, before anything starts.
    let mut checked = config.clone();
    if let Err(report) = checked.expand_env(|name| std::env::var(name).ok()) {
        output::report(&crate::render::Renderer::for_stderr().config_report(&report));
        return Ok(Exit::InvalidConfig);
    }
    let path = config_path(config);
    let place = Place::of(&path, &flavour(args)).map_err(|e| e.to_string())?;
    let start = || start_gateway(&path, args, &place);
    match shared::attach(&place, args.toolset.clone(), start, LISTEN_WAIT).await {
        Ok(()) => Ok(Exit::Ok),
        Err(AttachError::Refused(why)) => {
            output::report(&format!("error: {why}"));
            Ok(Exit::InvalidConfig)
        }
        Err(AttachError::Unreachable(why)) => Err(why.into()),
    }
}

/// Starts `moniker serve --shared` for the config, in the background: a process group of its
/// own (a client's signals are not its), no stdin or stdout, its log in the place's log file.
fn start_gateway(
    config: &std::path::Path,
    args: &ServeArgs,
    place: &Place,
) -> std::io::Result<std::process::Child> {
    use std::os::unix::fs::OpenOptionsExt as _;
    use std::os::unix::process::CommandExt as _;
    // The log of each start is kept after the last ones, up to LOG_KEPT; then it starts anew.
    let long = std::fs::metadata(&place.log).is_ok_and(|m| m.len() > LOG_KEPT);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(!long)
        .write(true)
        .truncate(long)
        .mode(0o600)
        .open(&place.log)?;
    let mut command = std::process::Command::new(std::env::current_exe()?);
    command.args(["serve", "--shared", "-c"]).arg(config);
    if args.manage {
        command.arg("--manage");
    }
    if let Some(store) = &args.store {
        command.arg("--store").arg(store);
    }
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .process_group(0);
    command.spawn()
}

/// `moniker serve --shared`: serves the clients that attach on the config's socket until the
/// last has gone and `gateway.idle_stop` has passed, or `stop` completes.
pub async fn serve(
    gateway: &Arc<Gateway>,
    config: &Config,
    args: &ServeArgs,
    stop: impl std::future::Future<Output = ()>,
) -> Result<Exit, Failure> {
    let place = Place::of(&config_path(config), &flavour(args)).map_err(|e| e.to_string())?;
    let listener = shared::bind(&place).map_err(|e| e.to_string())?;
    tracing::info!(socket = %place.socket.display(), "the shared gateway listens");
    shared::serve(
        gateway.clone(),
        listener,
        place.socket.clone(),
        config.gateway.idle_stop,
        stop,
    )
    .await?;
    Ok(Exit::Ok)
}
