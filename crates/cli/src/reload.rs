//! Live reload for `serve`: the config file is watched (and SIGHUP asks for a reload too); a
//! new config is parsed, expanded and checked completely first. An invalid one changes
//! nothing: the previous config keeps serving, and the diagnostics (with file:line:column)
//! go to the log and to `/healthz`. A valid one is applied as a difference
//! ([`Gateway::reload`]): only the servers added, removed or changed start, stop or restart;
//! naming, actions, toolsets, HTTP tokens and allow-lists apply at once. Settings that only
//! a restart applies are named in the log.

use moniker_surface::lock::Integrity;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use moniker_config::{Config, LoadError};
use moniker_gateway::Gateway;
use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use moniker_gateway::serve::http::check_bind;

use crate::render::Renderer;
use crate::settings::{entries, http_settings};

/// Changes closer together than this are one reload (an editor writes a file in steps).
const DEBOUNCE: Duration = Duration::from_millis(250);

/// Watches the config of `serve` (`http`: the address the HTTP transport listens on, when it
/// runs). `None` when the file cannot be watched (said in the log; SIGHUP still works then).
pub fn watch(
    gateway: Arc<Gateway>,
    config: &Config,
    http: Option<SocketAddr>,
) -> Option<JoinHandle<()>> {
    let path = PathBuf::from(&config.source.file_name);
    let current = config.clone();
    let (tx, rx) = mpsc::unbounded_channel::<()>();
    let watcher = file_watcher(&path, tx.clone());
    if let Ok(mut hangup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        let tx = tx.clone();
        tokio::spawn(async move {
            while hangup.recv().await.is_some() {
                tracing::info!("SIGHUP: reloading the config");
                if tx.send(()).is_err() {
                    return;
                }
            }
        });
    }
    Some(tokio::spawn(async move {
        // The watcher lives as long as the task.
        let _watcher = watcher;
        run(gateway, path, current, http, rx).await;
    }))
}

/// A watcher of the file's directory (editors replace files by renaming), whose events about
/// the file are sent on `tx`.
fn file_watcher(path: &Path, tx: mpsc::UnboundedSender<()>) -> Option<notify::RecommendedWatcher> {
    let name = path.file_name()?.to_owned();
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let handler = move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event {
            let ours = event.paths.iter().any(|p| p.file_name() == Some(&name));
            let changes = !matches!(event.kind, notify::EventKind::Access(_));
            if ours && changes {
                let _ = tx.send(());
            }
        }
    };
    let watched = notify::recommended_watcher(handler)
        .and_then(|mut w| w.watch(&dir, RecursiveMode::NonRecursive).map(|()| w));
    match watched {
        Ok(watcher) => {
            tracing::info!(path = %path.display(), "watching the config file: changes apply without a restart");
            Some(watcher)
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot watch the config file: reload with SIGHUP");
            None
        }
    }
}

async fn run(
    gateway: Arc<Gateway>,
    path: PathBuf,
    mut current: Config,
    http: Option<SocketAddr>,
    mut rx: mpsc::UnboundedReceiver<()>,
) {
    while rx.recv().await.is_some() {
        // Whatever else comes within the debounce is the same change.
        tokio::time::sleep(DEBOUNCE).await;
        while rx.try_recv().is_ok() {}
        if let Some(applied) = apply(&gateway, &path, &current, http) {
            current = applied;
        }
    }
}

/// Why a new config was refused: the whole report, for the log, and where it failed, for
/// `/healthz`.
struct Refusal {
    why: String,
    places: String,
}

/// Reads, checks and applies the config at `path`; the config now serving, when it changed.
fn apply(
    gateway: &Arc<Gateway>,
    path: &Path,
    current: &Config,
    http: Option<SocketAddr>,
) -> Option<Config> {
    let refused = |r: Refusal| refuse(gateway, &r.why, &r.places);
    let config = read(path).map_err(refused).ok()?;
    if says_the_same(&config, current) {
        tracing::debug!("the config file changed, but not what it says");
        gateway.control.set_config_error(None);
        return None;
    }
    let settings = http_settings(&config);
    if let Some(addr) = http {
        check_listener(gateway, &config, &settings, addr)
            .map_err(refused)
            .ok()?;
    }
    let reloaded = reload(gateway, &config).map_err(refused).ok()?;
    if http.is_some() {
        gateway.control.set_http(settings);
    }
    gateway.control.set_config_error(None);
    gateway.services.set_limits(&config.limits);
    watch_lock(gateway, &config);
    restart_only(current, &config);
    tracing::info!(
        added = ?names(&reloaded.added),
        removed = ?names(&reloaded.removed),
        restarted = ?names(&reloaded.restarted),
        "config reloaded"
    );
    Some(config)
}

/// The config at `path`, parsed, checked and its `${VAR}`s expanded.
fn read(path: &Path) -> Result<Config, Refusal> {
    let plain = Renderer::plain();
    let mut config = match moniker_config::load(path) {
        Ok(config) => config,
        Err(LoadError::Invalid(report)) => {
            return Err(Refusal {
                why: plain.config_report(&report),
                places: places(&report),
            });
        }
        Err(e @ LoadError::Io { .. }) => {
            return Err(Refusal {
                why: plain.failure(&e),
                places: format!("{}: cannot be read", path.display()),
            });
        }
    };
    if let Err(report) = config.expand_env(|name| std::env::var(name).ok()) {
        return Err(Refusal {
            why: plain.config_report(&report),
            places: places(&report),
        });
    }
    config.rules.today = crate::settings::today().ok();
    Ok(config)
}

/// Whether two configs say the same: only their text differs (comments, spacing, the order of
/// keys). Every field is compared, named one by one, so that a field added to [`Config`] must
/// be added here (a setting compared nowhere would be a change the reload never applied).
fn says_the_same(a: &Config, b: &Config) -> bool {
    let Config {
        servers,
        gateway,
        limits,
        audit,
        telemetry,
        http,
        toolsets,
        rules,
        search_model,
        search_learns,
        integrity,
        source: _,
        ignored_keys: _,
    } = a;
    *servers == b.servers
        && *gateway == b.gateway
        && *limits == b.limits
        && *audit == b.audit
        && *telemetry == b.telemetry
        && *http == b.http
        && *toolsets == b.toolsets
        && *rules == b.rules
        && *search_model == b.search_model
        && *search_learns == b.search_learns
        && *integrity == b.integrity
}

/// What start-up refuses of an HTTP listener, a reload refuses too: a listener beyond loopback
/// with no token, or a token bound to a toolset that does not exist.
fn check_listener(
    gateway: &Gateway,
    config: &Config,
    settings: &moniker_gateway::serve::http::HttpSettings,
    addr: SocketAddr,
) -> Result<(), Refusal> {
    let file = config.source.file_name.clone();
    if let Err(why) = check_bind(addr, settings) {
        let places = format!("{file}: `http.tokens`: {why}");
        return Err(Refusal { why, places });
    }
    let known = gateway.naming.toolset_names();
    let static_sets: Vec<&String> = config.rules.toolsets.sets.keys().collect();
    let unknown = settings.tokens.iter().find_map(|t| {
        t.toolset
            .as_ref()
            .filter(|name| !static_sets.contains(name) && !known.contains(*name))
    });
    match unknown {
        Some(name) => {
            let why = format!(
                "a token of `http.tokens` is bound to toolset `{name}`, which does not exist"
            );
            Err(Refusal {
                places: format!("{file}: {why}"),
                why,
            })
        }
        None => Ok(()),
    }
}

/// The gateway reloaded with `config`'s servers and rules, or why it refused them.
fn reload(
    gateway: &Arc<Gateway>,
    config: &Config,
) -> Result<moniker_gateway::gateway::Reloaded, Refusal> {
    let file = &config.source.file_name;
    gateway
        .reload(config.rules.clone(), entries(config))
        .map_err(|diagnostics| {
            let at: Vec<String> = diagnostics
                .iter()
                .map(|d| {
                    let span = d
                        .config_path
                        .as_deref()
                        .and_then(|p| crate::render::locate(&config.source, p));
                    match span {
                        Some(span) => format!("{file}:{}:{} {}", span.line, span.column, d.code),
                        None => format!("{file} {}", d.code),
                    }
                })
                .collect();
            Refusal {
                why: Renderer::plain().diagnostics(&config.source, &diagnostics),
                places: at.join("\n"),
            }
        })
}

/// Where each error of `report` is, and its code: what `/healthz` may say of a refused
/// reload. Never the file's text (a token written in it would be shown to anyone).
fn places(report: &moniker_config::ConfigReport) -> String {
    report
        .errors
        .iter()
        .map(|e| place(&report.file_name, e))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where one error of a config file is, and its code.
fn place(file_name: &str, e: &moniker_config::ConfigError) -> String {
    match e.span {
        Some(span) => format!("{file_name}:{}:{} {}", span.line, span.column, e.code),
        None => format!("{file_name} {}", e.code),
    }
}

/// Checks the surface against `moniker.lock` beside the config, if there is one, from now on
/// (at start, on every change of a server's list, after a reload).
pub fn watch_lock(gateway: &Gateway, config: &Config) {
    let path = crate::lockfile::path(config);
    let integrity = config.integrity;
    match crate::lockfile::read(&path) {
        Ok(None) if integrity == Integrity::Block => {
            tracing::warn!(path = %path.display(), "`integrity: block` and no lock: every tool is withheld until `moniker lock` seals them");
            gateway.set_lock(Some(moniker_surface::Lock::default()), integrity);
        }
        Ok(lock) => {
            if lock.is_some() {
                tracing::info!(path = %path.display(), "checking the surface against the lock");
            }
            gateway.set_lock(lock, integrity);
        }
        // Under `block`, a lock that cannot be read seals nothing: every tool is withheld.
        Err(e) if integrity == Integrity::Block => {
            tracing::error!("{e}: every tool is withheld (`integrity: block`)");
            gateway.set_lock(Some(moniker_surface::Lock::default()), integrity);
        }
        Err(e) => tracing::warn!("{e}: the surface is not checked against it"),
    }
}

fn names(ids: &[moniker_surface::ServerId]) -> Vec<&str> {
    ids.iter().map(|id| id.as_str()).collect()
}

/// Logs why a new config was refused (the whole report: the log is the operator's) and keeps
/// where it failed for `/healthz`.
fn refuse(gateway: &Gateway, why: &str, places: &str) {
    tracing::error!("config reload refused; the previous config still serves:\n{why}");
    gateway.control.set_config_error(Some(places.to_owned()));
}

/// Says which changed settings wait for a restart; and that `${VAR}`s are the environment
/// moniker started with.
fn restart_only(before: &Config, after: &Config) {
    let waiting = waiting_for_restart(before, after);
    if !waiting.is_empty() {
        tracing::warn!(
            "changed, applied on the next restart only: {}",
            waiting.join(", ")
        );
    }
    if after.source.text.contains("${") {
        tracing::info!(
            "`${{VAR}}` values are read from moniker's environment as it was at start: a changed variable applies on restart"
        );
    }
}

/// The settings that changed from `before` to `after` and apply on a restart only.
fn waiting_for_restart(before: &Config, after: &Config) -> Vec<&'static str> {
    let mut waiting = Vec::new();
    if before.gateway != after.gateway {
        waiting.push("`gateway` (timeouts, restarts, paging)");
    }
    if before.toolsets.manage != after.toolsets.manage
        || before.toolsets.store != after.toolsets.store
    {
        waiting.push("`toolsets.manage` and `toolsets.store`");
    }
    if before.http.session_idle != after.http.session_idle {
        waiting.push("`http.session_idle`");
    }
    if before.http.max_connections != after.http.max_connections {
        waiting.push("`http.max_connections`");
    }
    if before.audit != after.audit {
        waiting.push("`audit`");
    }
    if before.telemetry != after.telemetry {
        waiting.push("`telemetry`");
    }
    if before.search_learns != after.search_learns {
        waiting.push("`discovery.learn`");
    }
    if crate::settings::model_named(before) != crate::settings::model_named(after) {
        waiting.push(
            "search's model (`discovery.model`, or `$MONIKER_MODEL` once the config searches)",
        );
    }
    waiting
}

#[cfg(test)]
mod tests {
    use super::{says_the_same, waiting_for_restart};

    fn config(text: &str) -> moniker_config::Config {
        moniker_config::parse("moniker.yaml", text).expect("a valid config")
    }

    /// Each setting that applies on a restart only is named when it changes, and only then;
    /// what applies at once (a server, a toolset) names nothing.
    #[test]
    fn a_reload_names_what_waits_for_a_restart() {
        let base = "servers:\n  a: { command: echo }\n";
        let before = config(base);
        assert!(waiting_for_restart(&before, &config(base)).is_empty());
        let live = format!("{base}  b: {{ command: echo }}\ntoolsets:\n  t: {{ tools: [x] }}\n");
        assert!(waiting_for_restart(&before, &config(&live)).is_empty());
        for (added, named) in [
            ("gateway: { call_timeout: 5s }\n", "`gateway`"),
            ("toolsets: { manage: true }\n", "`toolsets.manage`"),
            ("http: { session_idle: 5m }\n", "`http.session_idle`"),
            ("http: { max_connections: 8 }\n", "`http.max_connections`"),
            ("audit: stderr\n", "`audit`"),
            ("telemetry: http://127.0.0.1:4318\n", "`telemetry`"),
            ("discovery: { model: /nowhere }\n", "`discovery.model`"),
        ] {
            let waiting = waiting_for_restart(&before, &config(&format!("{base}{added}")));
            assert_eq!(waiting.len(), 1, "{added}: {waiting:?}");
            assert!(waiting[0].contains(named), "{added}: {waiting:?}");
        }
    }

    /// A config whose text changed but not what it says changes nothing; a change to any one
    /// setting is a change (a reload that changed only `integrity`, `audit`, `telemetry` or
    /// the model was once taken for none: `integrity` never applied, the others were never
    /// said to wait for a restart).
    #[test]
    fn only_a_change_of_what_the_config_says_is_a_change() {
        let base = "servers:\n  a: { command: echo }\n";
        let before = config(base);
        let reworded = config(&format!("# a comment\n{base}\n"));
        assert!(says_the_same(&before, &reworded));
        for added in [
            "integrity: block\n",
            "audit: stderr\n",
            "telemetry: http://127.0.0.1:4318\n",
            "discovery: { model: /nowhere }\n",
            "gateway: { call_timeout: 5s }\n",
            "http: { max_body: 1000 }\n",
        ] {
            let changed = config(&format!("{base}{added}"));
            assert!(!says_the_same(&before, &changed), "{added}");
        }
    }
}
