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

/// Reads, checks and applies the config at `path`; the config now serving, when it changed.
#[expect(clippy::too_many_lines, reason = "not split yet: see CONTRIBUTING.md")]
fn apply(
    gateway: &Arc<Gateway>,
    path: &Path,
    current: &Config,
    http: Option<SocketAddr>,
) -> Option<Config> {
    let plain = Renderer::plain();
    let file = path.display().to_string();
    let mut config = match moniker_config::load(path) {
        Ok(config) => config,
        Err(LoadError::Invalid(report)) => {
            refuse(gateway, &plain.config_report(&report), &places(&report));
            return None;
        }
        Err(e @ LoadError::Io { .. }) => {
            refuse(
                gateway,
                &plain.failure(&e),
                &format!("{file}: cannot be read"),
            );
            return None;
        }
    };
    if let Err(report) = config.expand_env(|name| std::env::var(name).ok()) {
        refuse(gateway, &plain.config_report(&report), &places(&report));
        return None;
    }
    config.rules.today = crate::settings::today().ok();
    if config.servers == current.servers
        && config.rules == current.rules
        && config.http == current.http
        && config.gateway == current.gateway
        && config.toolsets == current.toolsets
    {
        tracing::debug!("the config file changed, but not what it says");
        gateway.set_config_error(None);
        return None;
    }
    let settings = http_settings(&config);
    if let Some(addr) = http {
        // What start-up refuses, a reload refuses too: a listener beyond loopback with no
        // token would serve every server to whoever reaches it.
        if let Err(why) = check_bind(addr, &settings) {
            refuse(gateway, &why, &format!("{file}: `http.tokens`: {why}"));
            return None;
        }
        let known = gateway.toolset_names();
        let static_sets: Vec<&String> = config.rules.toolsets.sets.keys().collect();
        if let Some(token) = settings.tokens.iter().find(|t| {
            t.toolset
                .as_ref()
                .is_some_and(|name| !static_sets.contains(&name) && !known.contains(name))
        }) {
            let name = token.toolset.as_deref().unwrap_or_default();
            let why = format!(
                "a token of `http.tokens` is bound to toolset `{name}`, which does not exist"
            );
            refuse(gateway, &why, &format!("{file}: {why}"));
            return None;
        }
    }
    match gateway.reload(config.rules.clone(), entries(&config)) {
        Err(diagnostics) => {
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
            refuse(
                gateway,
                &plain.diagnostics(&config.source, &diagnostics),
                &at.join("\n"),
            );
            None
        }
        Ok(reloaded) => {
            if http.is_some() {
                gateway.set_http(settings);
            }
            gateway.set_config_error(None);
            gateway.set_limits(&config.limits);
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
    }
}

/// Where each error of `report` is, and its code: what `/healthz` may say of a refused
/// reload. Never the file's text (a token written in it would be shown to anyone).
fn places(report: &moniker_config::ConfigReport) -> String {
    report
        .errors
        .iter()
        .map(|e| match e.span {
            Some(span) => format!(
                "{}:{}:{} {}",
                report.file_name, span.line, span.column, e.code
            ),
            None => format!("{} {}", report.file_name, e.code),
        })
        .collect::<Vec<_>>()
        .join("\n")
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
    gateway.set_config_error(Some(places.to_owned()));
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
    if crate::settings::model_named(before) != crate::settings::model_named(after) {
        waiting.push(
            "search's model (`discovery.model`, or `$MONIKER_MODEL` once the config searches)",
        );
    }
    waiting
}

#[cfg(test)]
mod tests {
    use super::waiting_for_restart;

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
}
