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

/// The variable the attaching client hands the gateway it starts: the key it looks for that
/// gateway by (see [`flavour`]), so both sides name the same place whatever the gateway's own
/// environment becomes.
const KEY_VAR: &str = "MONIKER_SHARED_KEY";

/// What else makes another gateway of the same config: moniker's version, the flags that set
/// up the gateway (not those of one session), and what changes its servers without changing
/// the file: the values of the variables the config expands (a digest: `GH_TOKEN` of another
/// client is another gateway) and the working directory (`args: ["."]`, relative paths). A
/// client started with other values never attaches to a gateway started with these.
fn flavour(config: &Config, args: &ServeArgs) -> String {
    use sha2::Digest as _;
    let expanded = std::cell::RefCell::new(std::collections::BTreeMap::new());
    let _ = config.clone().expand_env(|name| {
        let value = std::env::var(name).ok();
        expanded.borrow_mut().insert(name.to_owned(), value.clone());
        value
    });
    // What reaches stdio servers by name from moniker's environment (the short list, the
    // proxy and trust variables, `pass_env`) changes them too.
    let mut passed = moniker_config::PassEnv::Names(
        moniker_gateway::connect::stdio::INHERITED_ENV
            .iter()
            .chain(moniker_gateway::connect::stdio::TRUST_ENV)
            .map(|n| (*n).to_owned())
            .collect(),
    )
    .with(&config.gateway.pass_env);
    for server in config.servers.values() {
        if let moniker_config::Transport::Stdio { pass_env, .. } = &server.transport {
            passed = passed.with(pass_env);
        }
    }
    let names: Vec<String> = match passed {
        moniker_config::PassEnv::Names(names) => names,
        moniker_config::PassEnv::All => std::env::vars_os()
            .map(|(n, _)| n.to_string_lossy().into_owned())
            .collect(),
    };
    // And what moniker reads itself: its own settings, traces, the user's directories, the
    // browser of a sign-in.
    let own = std::env::vars_os()
        .map(|(n, _)| n.to_string_lossy().into_owned())
        .filter(|n| {
            n != KEY_VAR
                && (["MONIKER_", "OTEL_", "XDG_"]
                    .iter()
                    .any(|p| n.starts_with(p))
                    || ["BROWSER", "RUST_LOG", "TMPDIR"].contains(&n.as_str()))
        });
    for name in names.into_iter().chain(own) {
        let value = std::env::var(&name).ok();
        expanded.borrow_mut().insert(name, value);
    }
    let mut hash = sha2::Sha256::new();
    for (name, value) in expanded.borrow().iter() {
        hash.update(name.as_bytes());
        hash.update([0, u8::from(value.is_some())]);
        hash.update(value.as_deref().unwrap_or_default().as_bytes());
        hash.update([0]);
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    hash.update(cwd.as_os_str().as_encoded_bytes());
    hash.update([0]);
    hash.update(env!("CARGO_PKG_VERSION"));
    hash.update([0, u8::from(args.manage), 0]);
    if let Some(store) = &args.store {
        hash.update(store.as_os_str().as_encoded_bytes());
    }
    // Hex: it travels in an environment variable.
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
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
    let key = flavour(config, args);
    let place = Place::of(&path, &key).map_err(|e| e.to_string())?;
    let start = || start_gateway(&path, args, &place, &key);
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
    key: &str,
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
        .env(KEY_VAR, key)
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
    // The key of the client that started it (its config is expanded by now); a gateway started
    // by hand computes its own.
    let key = std::env::var(KEY_VAR).unwrap_or_else(|_| flavour(config, args));
    let place = Place::of(&config_path(config), &key).map_err(|e| e.to_string())?;
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
