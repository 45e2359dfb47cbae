//! The commands that need the gateway: they start the configured servers. Each takes the
//! loaded config (`${VAR}` not expanded yet) and its flags, and returns the exit code, or a
//! runtime failure that `main` prints and exits 1 with.

use std::path::PathBuf;
use std::sync::Arc;

use moniker_config::Config;
use moniker_gateway::message::{self, Message, Params};
use moniker_gateway::serve::http::check_bind;
use moniker_gateway::session::Session;
use moniker_gateway::store::Store;
use moniker_gateway::{Gateway, Settings, StartError};
use moniker_surface::{Exposed, Kind, Route};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::args::{CallArgs, ListArgs, LockArgs, ServeArgs};
use crate::render::Renderer;
use crate::settings::{entries, http_settings};
use crate::{Exit, Failure, check, lockfile, output};

/// How a command uses toolsets.
#[derive(Default)]
struct Toolsets {
    manage: bool,
    store: Option<PathBuf>,
    toolset: Option<String>,
    /// The caller shows the surface's warnings itself (`check`).
    quiet: bool,
    /// `serve`: the search index is built ahead and kept in the user's cache (a one-shot
    /// command builds it only if it searches, and keeps nothing).
    serving: bool,
    /// `install --import`'s check: the caller says what an invalid surface means itself (it
    /// fixes it), and a `${VAR}` that is unset stands empty (the client sets it, later).
    silent: bool,
}

impl Toolsets {
    /// The flags over the config: `--manage` or `toolsets.manage`; `--store`, else
    /// `toolsets.store`, else the default place. The store is opened when toolsets are
    /// managed or one is named (it may be a saved one).
    fn new(config: &Config, manage: bool, store: Option<PathBuf>, toolset: Option<String>) -> Self {
        let manage = manage || config.toolsets.manage;
        let store = (manage || toolset.is_some())
            .then(|| {
                store
                    .or_else(|| config.toolsets.store.as_deref().map(expand_home))
                    .or_else(Store::default_path)
            })
            .flatten();
        Self {
            manage,
            store,
            toolset,
            quiet: false,
            serving: false,
            silent: false,
        }
    }
}

/// `~/x` is under the home directory.
fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), dirs_home()) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(path),
    }
}

fn dirs_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// Expands `${VAR}`s and starts every server. `Err(exit)` when the config or the surface is
/// invalid; the diagnostics have been rendered to stderr.
/// Why the gateway did not start: the exit, and for a surface of errors its diagnostics (they
/// are reported already).
pub(crate) struct NotStarted {
    pub exit: Exit,
    pub diagnostics: Vec<moniker_surface::Diagnostic>,
}

impl From<Exit> for NotStarted {
    fn from(exit: Exit) -> Self {
        Self {
            exit,
            diagnostics: Vec::new(),
        }
    }
}

async fn start(config: &mut Config) -> Result<Result<Arc<Gateway>, NotStarted>, Failure> {
    start_with(config, Toolsets::default()).await
}

async fn start_with(
    config: &mut Config,
    toolsets: Toolsets,
) -> Result<Result<Arc<Gateway>, NotStarted>, Failure> {
    // An import's check starts the servers before the client that will run them: a variable
    // the client sets is unset here, and stands empty.
    let lenient = toolsets.silent;
    let lookup = |name: &str| {
        std::env::var(name)
            .ok()
            .or_else(|| lenient.then(String::new))
    };
    if let Err(report) = config.expand_env(lookup) {
        output::report(&Renderer::for_stderr().config_report(&report));
        return Ok(Err(Exit::InvalidConfig.into()));
    }
    let servers = entries(config);
    let quiet = toolsets.quiet;
    let silent = toolsets.silent;
    let settings = match settings(config, toolsets) {
        Ok(settings) => settings,
        Err(why) => {
            output::report(&format!("error: {why}"));
            return Ok(Err(Exit::InvalidConfig.into()));
        }
    };
    let serving = settings.search_ahead;
    let started = if serving {
        Gateway::open(config.rules.clone(), servers, settings).await
    } else {
        Gateway::start(config.rules.clone(), servers, settings).await
    };
    match started {
        Ok(gateway) => {
            // Servers that need a person never hold the others up: the command is said.
            crate::login::report_needed_logins(config);
            // `check` shows them itself; every other command says them once, here.
            if !quiet {
                for d in gateway.diagnostics() {
                    tracing::warn!("{d}");
                }
            }
            Ok(Ok(gateway))
        }
        Err(StartError::Invalid(diagnostics)) => {
            if !silent {
                output::report(&Renderer::for_stderr().diagnostics(&config.source, &diagnostics));
            }
            Ok(Err(NotStarted {
                exit: Exit::InvalidConfig,
                diagnostics,
            }))
        }
        Err(StartError::Setup(why)) => Err(why.into()),
    }
}

/// The gateway's settings for `config` (its `${VAR}`s expanded); `Err` when the search model
/// it names cannot be read.
fn settings(config: &Config, toolsets: Toolsets) -> Result<Settings, String> {
    Ok(Settings {
        config: config.gateway.clone(),
        guard: std::env::current_exe().ok(),
        manage: toolsets.manage,
        store: toolsets.store,
        default_toolset: toolsets.toolset,
        limits: config.limits.clone(),
        audit: config.audit.clone().map(|mut audit| {
            if let moniker_config::AuditTo::File(path) = &mut audit.to {
                *path = expand_home(path).display().to_string();
            }
            audit
        }),
        telemetry: crate::settings::telemetry(config),
        search_model: crate::settings::search_model(config)?,
        search_cache: toolsets
            .serving
            .then(moniker_gateway::view::IndexFiles::default_dir)
            .flatten(),
        search_ahead: toolsets.serving,
        known: moniker_gateway::known::Known::default_dir().map(moniker_gateway::known::Known::new),
    })
}

/// Starts the servers of `config` (its `${VAR}`s expanded) and builds their surface, valid or
/// not: for `moniker doctor`.
pub(crate) async fn launch(config: &Config) -> Result<Arc<Gateway>, Failure> {
    let settings = settings(config, Toolsets::default())?;
    Gateway::launch(config.rules.clone(), entries(config), settings)
        .await
        .map_err(|e| e.to_string().into())
}

/// `moniker serve`: one client on stdin and stdout, until stdin closes or a signal comes.
pub async fn serve(mut config: Config, args: ServeArgs) -> Result<Exit, Failure> {
    if args.attaches() {
        return crate::shared::attach(&config, &args).await;
    }
    let toolsets = Toolsets {
        serving: true,
        ..Toolsets::new(
            &config,
            args.manage,
            args.store.clone(),
            args.toolset.clone(),
        )
    };
    let gateway = match start_with(&mut config, toolsets).await? {
        Ok(gateway) => gateway,
        Err(not) => return Ok(not.exit),
    };
    crate::reload::watch_lock(&gateway, &config);
    let watcher = crate::reload::watch(gateway.clone(), &config, args.http);
    let outcome = match args.http {
        Some(addr) => serve_http(&gateway, &config, addr).await,
        None if args.shared => crate::shared::serve(&gateway, &config, &args, stop_signal()).await,
        None => serve_stdio(&gateway, args.metrics).await,
    };
    if let Some(watcher) = watcher {
        watcher.abort();
    }
    gateway.shutdown().await;
    outcome
}

/// Completes on Ctrl-C or SIGTERM.
pub(crate) async fn stop_signal() {
    let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

async fn serve_stdio(
    gateway: &Arc<Gateway>,
    metrics: Option<std::net::SocketAddr>,
) -> Result<Exit, Failure> {
    let (stop_metrics, stopped) = tokio::sync::oneshot::channel::<()>();
    if let Some(addr) = metrics {
        if !addr.ip().is_loopback() {
            // This listener has no tokens: beyond loopback, anyone could read which tools are
            // used, how often and by which names.
            output::report(&format!(
                "error: refusing to serve metrics on {addr}: `--metrics` has no token, so it listens on loopback only (127.0.0.1 or [::1]); for metrics beyond this host use `serve --http` with `http.tokens`"
            ));
            return Ok(Exit::InvalidConfig);
        }
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let gateway = gateway.clone();
        tokio::spawn(async move {
            let stopped = async move {
                let _ = stopped.await;
            };
            if let Err(e) =
                moniker_gateway::serve::metrics::serve_metrics(gateway, listener, stopped).await
            {
                tracing::error!(error = %e, "the metrics endpoint failed");
            }
        });
    }
    let outcome = tokio::select! {
        r = moniker_gateway::serve::stdio::serve(gateway.clone()) => r,
        () = stop_signal() => Ok(()),
    };
    let _ = stop_metrics.send(());
    outcome?;
    Ok(Exit::Ok)
}

async fn serve_http(
    gateway: &Arc<Gateway>,
    config: &Config,
    addr: std::net::SocketAddr,
) -> Result<Exit, Failure> {
    let settings = http_settings(config);
    if let Err(why) = check_bind(addr, &settings) {
        output::report(&format!("error: {why}"));
        return Ok(Exit::InvalidConfig);
    }
    let sets = gateway.toolset_names();
    for token in &settings.tokens {
        if let Some(toolset) = token.toolset.as_deref().filter(|t| !sets.contains(*t)) {
            output::report(&format!(
                "error: a token of `http.tokens` is bound to toolset `{toolset}`, which does not exist"
            ));
            return Ok(Exit::InvalidConfig);
        }
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    output::report(&http_banner(local, &settings));
    moniker_gateway::serve::http::serve(gateway.clone(), listener, settings, stop_signal()).await?;
    Ok(Exit::Ok)
}

/// What `serve --http` says when it starts listening (on stderr: it is for the person who
/// started it).
fn http_banner(local: std::net::SocketAddr, http: &moniker_config::HttpConfig) -> String {
    use moniker_gateway::serve::http::{HEALTH_PATH, MCP_PATH, METRICS_PATH};
    let mut auth = match (http.tokens.len(), &http.auth) {
        (0, None) => "no token required (loopback only)".to_owned(),
        (0, Some(_)) => "an access token of the identity provider is required".to_owned(),
        (1, _) => "a bearer token is required (1 token configured)".to_owned(),
        (n, _) => format!("a bearer token is required ({n} tokens configured)"),
    };
    if let Some(resource) = &http.auth {
        if !http.tokens.is_empty() {
            auth.push_str(", or an access token of the identity provider");
        }
        auth.push_str(&format!(
            "\n  protected resource metadata at {} (issuer {}, audience {}{})",
            moniker_gateway::auth::resource::metadata_url(&resource.resource),
            resource.issuer,
            resource.resource,
            match resource.scopes.len() {
                0 => String::new(),
                _ => format!(", scopes {}", resource.scopes.join(" ")),
            }
        ));
    }
    let mut lines = vec![
        format!("moniker is listening on http://{local}"),
        format!("  MCP (Streamable HTTP): http://{local}{MCP_PATH}"),
        format!("  health:                http://{local}{HEALTH_PATH}"),
        format!("  metrics:               http://{local}{METRICS_PATH}"),
        format!("  authentication:        {auth}"),
    ];
    if local.ip().is_unspecified() && http.allowed_hosts.is_empty() {
        lines.push(
            "  note: clients must use a loopback host name; list the host names they will use \
             in `http.allowed_hosts` (a request with another Host gets 403)"
                .to_owned(),
        );
    }
    lines.join("\n")
}

/// `moniker check`: the config, the servers and the surface they make together; with a
/// `moniker.lock` beside the config, what the surface breaks of it (warnings, or with
/// `locked` exit 1).
pub async fn check_online(config: Config, locked: bool, fix: bool) -> Result<Exit, Failure> {
    if !fix {
        return check_once(config, locked).await.map(|(exit, _)| exit);
    }
    let path = std::path::PathBuf::from(&config.source.file_name);
    let text = config.source.text.to_string();
    let (exit, diagnostics) = check_once(config, locked).await?;
    let renames = crate::fix::renames(&diagnostics);
    if renames.is_empty() {
        return Ok(exit);
    }
    let fixed = crate::fix::apply(&text, &renames)?;
    let backup = crate::fix::backup_path(&path);
    std::fs::write(&backup, &text)
        .map_err(|e| format!("cannot write the backup `{}`: {e}", backup.display()))?;
    std::fs::write(&path, &fixed).map_err(|e| format!("cannot write `{}`: {e}", path.display()))?;
    output::line(&format!(
        "--fix: {} rename{} written to `{}` (the file before: `{}`); checking again",
        renames.len(),
        if renames.len() == 1 { "" } else { "s" },
        path.display(),
        backup.display()
    ))?;
    let again = crate::load_config(Some(&path)).map_err(|_| {
        format!(
            "`{}` no longer parses after --fix: the file before is `{}`",
            path.display(),
            backup.display()
        )
    })?;
    check_once(again, locked).await.map(|(exit, _)| exit)
}

/// One `check`: its exit, and the diagnostics of a surface that could not be built (for
/// `--fix`).
async fn check_once(
    mut config: Config,
    locked: bool,
) -> Result<(Exit, Vec<moniker_surface::Diagnostic>), Failure> {
    let lock_path = lockfile::path(&config);
    let lock = lockfile::read(&lock_path)?;
    if locked && lock.is_none() {
        return Err(format!(
            "`--locked` needs `{}`: write it with `moniker lock`",
            lock_path.display()
        )
        .into());
    }
    if let Err(report) = config.expand_env(|name| std::env::var(name).ok()) {
        output::report(&Renderer::for_stderr().config_report(&report));
        output::line(&check::invalid_summary(&report))?;
        return Ok((Exit::InvalidConfig, Vec::new()));
    }
    let quiet = Toolsets {
        quiet: true,
        ..Toolsets::default()
    };
    let gateway = match start_with(&mut config, quiet).await? {
        Ok(gateway) => gateway,
        Err(not) => {
            // The reason (the surface's errors, or a search model that cannot be read) is
            // on stderr already.
            output::line(&format!(
                "`{}` is invalid: see above",
                config.source.file_name
            ))?;
            return Ok((not.exit, not.diagnostics));
        }
    };
    let mut diagnostics = gateway.diagnostics();
    let view = gateway.view();
    let sets = &config.rules.toolsets.sets;
    for (name, rule) in sets {
        diagnostics.extend(moniker_surface::toolsets::validate(
            &view.surface,
            name,
            rule,
            sets,
        ));
    }
    let breaking = lock
        .as_ref()
        .map(|lock| moniker_surface::lock::compare(lock, &view.surface))
        .unwrap_or_default();
    diagnostics.extend(breaking.iter().map(lockfile::diagnostic));
    let exit = check::report(&config, &diagnostics)?;
    if let Some(fix) = moniker_surface::lock::merged_fix(&breaking) {
        output::report(&format!(
            "help: to keep every old name working, add to `{}`:\n{}",
            config.source.file_name,
            output::indent(&fix, 6)
        ));
    }
    let failed = report_failed_servers(&gateway, "error");
    output::line(&format!(
        "{} tools{} and {} prompts from {} of {} servers",
        view.surface.listed(Kind::Tool).count(),
        match view.surface.tools().len() - view.surface.listed(Kind::Tool).count() {
            0 => String::new(),
            n => format!(" (and {n} more callable by their old names)"),
        },
        view.surface.prompts().len(),
        view.up.len(),
        config.servers.values().filter(|s| !s.disabled).count()
    ))?;
    if lock.is_some() {
        output::line(&match breaking.len() {
            0 => format!("no breaking change against `{}`", lock_path.display()),
            1 => format!("1 breaking change against `{}`", lock_path.display()),
            n => format!("{n} breaking changes against `{}`", lock_path.display()),
        })?;
    }
    gateway.shutdown().await;
    let broken = locked && !breaking.is_empty();
    let exit = if (failed > 0 || broken) && exit == Exit::Ok {
        Exit::Failure
    } else {
        exit
    };
    Ok((exit, diagnostics))
}

/// Whether `config` serves: its servers started, their listings made into one surface. `Ok`
/// with the servers that did not start (what could not be checked); `Err` with the surface's
/// diagnostics when it is invalid (empty when the config itself is: reported already).
pub(crate) async fn serves(
    mut config: Config,
) -> Result<Result<Vec<String>, Vec<moniker_surface::Diagnostic>>, Failure> {
    let quiet = Toolsets {
        quiet: true,
        silent: true,
        ..Toolsets::default()
    };
    match start_with(&mut config, quiet).await? {
        Ok(gateway) => {
            let down: Vec<String> = gateway
                .server_status()
                .into_iter()
                .filter(|(_, status)| !status.up)
                .map(|(id, _)| id.to_string())
                .collect();
            gateway.shutdown().await;
            Ok(Ok(down))
        }
        Err(not) => Ok(Err(not.diagnostics)),
    }
}

/// `moniker lock`: starts the servers and writes `moniker.lock` beside the config (with
/// `--diff`, prints what would change instead). Refuses when a server did not start: its names
/// would be missing from the lock, and reported as gone by every later check.
pub async fn lock(mut config: Config, args: LockArgs) -> Result<Exit, Failure> {
    let path = lockfile::path(&config);
    let old = lockfile::read(&path)?;
    let gateway = match start(&mut config).await? {
        Ok(gateway) => gateway,
        Err(not) => return Ok(not.exit),
    };
    let failed = report_failed_servers(&gateway, "error");
    let lock = moniker_surface::Lock::of(&gateway.view().surface);
    gateway.shutdown().await;
    if failed > 0 {
        output::report(&format!(
            "error: `{}` not written: every server must be up to lock the surface",
            path.display()
        ));
        return Ok(Exit::Failure);
    }
    let (lines, [added, removed, changed]) =
        lockfile::diff(&old.clone().unwrap_or_default(), &lock);
    if args.diff {
        for line in &lines {
            output::line(line)?;
        }
        output::line(&if lines.is_empty() && old.is_some() {
            format!("`{}` is up to date", path.display())
        } else {
            format!(
                "{added} added, {removed} removed, {changed} changed in `{}` (not written)",
                path.display()
            )
        })?;
        return Ok(Exit::Ok);
    }
    lockfile::write(&path, &lock.render())?;
    let tools = lock.entries.iter().filter(|e| e.kind == Kind::Tool).count();
    output::line(&format!(
        "wrote `{}`: {} tools, {} prompts ({added} added, {removed} removed, {changed} changed)",
        path.display(),
        tools,
        lock.entries.len() - tools,
    ))?;
    Ok(Exit::Ok)
}

/// Says why each server that is not up failed (as `level: server ... failed to start: why`);
/// how many.
fn report_failed_servers(gateway: &Gateway, level: &str) -> usize {
    let mut failed = 0;
    for (id, status) in gateway.server_status() {
        if let (false, Some(error)) = (status.up, &status.last_error) {
            output::report(&format!("{level}: server `{id}` failed to start: {error}"));
            failed += 1;
        }
    }
    failed
}

/// `moniker list`: the exposed tools and prompts.
pub async fn list(mut config: Config, args: ListArgs) -> Result<Exit, Failure> {
    let toolsets = Toolsets::new(&config, false, None, args.toolset.clone());
    let gateway = match start_with(&mut config, toolsets).await? {
        Ok(gateway) => gateway,
        Err(not) => return Ok(not.exit),
    };
    let view = gateway.view();
    let selection = args
        .toolset
        .as_ref()
        .map(|name| gateway.toolset(name, &view));
    let mut rows = Vec::new();
    for kind in [Kind::Tool, Kind::Prompt] {
        for item in view.surface.items(kind) {
            if let Some(selection) = &selection {
                let chosen = match kind {
                    Kind::Tool => &selection.tools,
                    Kind::Prompt => &selection.prompts,
                };
                if !chosen.contains(&item.name) {
                    continue;
                }
            }
            if args
                .tag
                .as_ref()
                .is_some_and(|tag| !item.tags.contains(tag))
            {
                continue;
            }
            rows.push((kind, item));
        }
    }
    let printed = if args.json {
        let items: Vec<Value> = rows
            .iter()
            .map(|(kind, item)| {
                let mut row = describe(*kind, item);
                if let Some(selection) = &selection {
                    let aliases: Vec<&String> = selection
                        .aliases
                        .iter()
                        .filter(|(_, t)| **t == item.name)
                        .map(|(a, _)| a)
                        .collect();
                    row["toolset_aliases"] = serde_json::json!(aliases);
                }
                row
            })
            .collect();
        output::line(&serde_json::to_string_pretty(&items)?)
    } else {
        let mut table = vec![
            ["KIND", "NAME", "ALIASES", "SERVER", "ORIGIN", "TAGS"]
                .map(String::from)
                .to_vec(),
        ];
        for (kind, item) in &rows {
            let mut aliases = item.aliases.join(", ");
            if let Some(selection) = &selection {
                for (alias, _) in selection.aliases.iter().filter(|(_, t)| **t == item.name) {
                    if !aliases.is_empty() {
                        aliases.push_str(", ");
                    }
                    aliases.push_str(&format!("{alias} [toolset]"));
                }
            }
            for hidden in &item.hidden_aliases {
                if !aliases.is_empty() {
                    aliases.push_str(", ");
                }
                aliases.push_str(&format!("({hidden})"));
            }
            let (server, origin) = match &item.route {
                Route::Origin(origin) if item.server_name == origin.server.as_str() => {
                    (item.server_name.clone(), origin.name.clone())
                }
                Route::Origin(origin) => (
                    format!("{} ({})", item.server_name, origin.server),
                    origin.name.clone(),
                ),
                Route::Action(route) => {
                    let actions: Vec<String> = route
                        .members
                        .iter()
                        .map(|m| format!("{}={}", m.action, m.name))
                        .collect();
                    (item.server_name.clone(), actions.join(" "))
                }
            };
            let tags: Vec<&str> = item.tags.iter().map(|t| t.as_str()).collect();
            table.push(vec![
                kind_label(*kind, item).to_owned(),
                item.name.clone(),
                aliases,
                server,
                origin,
                tags.join(", "),
            ]);
        }
        output::line(&format_table(&table))
    };
    // A list without a server's tools is not the list asked for.
    let failed = report_failed_servers(&gateway, "error");
    gateway.shutdown().await;
    printed?;
    Ok(if failed > 0 { Exit::Failure } else { Exit::Ok })
}

/// `tool`, `prompt`, `action` (an action tool), or `legacy` (a member of an action tool, callable
/// by its old name but not listed).
fn kind_label(kind: Kind, item: &Exposed) -> &'static str {
    match (&item.route, item.listed) {
        (Route::Action(_), _) => "action",
        (_, false) => "legacy",
        _ => kind.noun(),
    }
}

/// One row of `list --json`.
fn describe(kind: Kind, item: &Exposed) -> Value {
    let mut row = serde_json::json!({
        "kind": kind_label(kind, item),
        "name": item.name,
        "aliases": item.aliases,
        "hidden_aliases": item.hidden_aliases,
        "server_name": item.server_name,
        "tags": item.tags.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
        "listed": item.listed,
    });
    match &item.route {
        Route::Origin(origin) => {
            row["server"] = origin.server.as_str().into();
            row["origin"] = origin.name.as_str().into();
        }
        Route::Action(route) => {
            let actions: serde_json::Map<String, Value> = route
                .members
                .iter()
                .map(|m| (m.action.clone(), serde_json::json!({"tool": m.name, "server": m.origin.server.as_str(), "origin": m.origin.name})))
                .collect();
            row["actions"] = Value::Object(actions);
        }
    }
    if let Some((tool, action)) = &item.member_of {
        row["member_of"] = serde_json::json!({"tool": tool, "action": action});
    }
    // What a script needs to call it: its input schema (a prompt's arguments), as listed.
    if let Ok(definition) = serde_json::from_str::<Value>(item.definition.get()) {
        for key in ["inputSchema", "arguments"] {
            if let Some(value) = definition.get(key) {
                row[key] = value.clone();
            }
        }
    }
    row
}

pub(crate) fn format_table(rows: &[Vec<String>]) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let lines: Vec<String> = rows
        .iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            cells.join("  ").trim_end().to_owned()
        })
        .collect();
    lines.join("\n")
}

/// `moniker call`: one call through the whole pipeline (resolution, routing, the server),
/// as a client session would make it.
pub async fn call(mut config: Config, args: CallArgs) -> Result<Exit, Failure> {
    let gateway = match start(&mut config).await? {
        Ok(gateway) => gateway,
        Err(not) => return Ok(not.exit),
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let session = Session::new(gateway.clone(), tx);
    session.identify("cli");
    let initialize = Params::object(&[
        ("protocolVersion", r#""2025-06-18""#),
        ("capabilities", r#"{"elicitation":{"form":{}}}"#),
        ("clientInfo", r#"{"name":"moniker call","version":"0"}"#),
    ]);
    let initialize = Message::outgoing("0", "initialize", Some(&initialize));
    session.handle(Ok(message::Incoming::One(initialize)), None);
    let initialized = Message::notification("notifications/initialized", None);
    session.handle(Ok(message::Incoming::One(initialized)), None);
    let arguments = args.arguments.as_ref().map_or("{}", |a| a.get());
    let name = serde_json::to_string(&args.name)?;
    let params = Params::object(&[("name", &name), ("arguments", arguments)]);
    let call = Message::outgoing("1", "tools/call", Some(&params));
    session.handle(Ok(message::Incoming::One(call)), None);
    let mut answer = None;
    let mut terminal = None;
    while let Some(message) = rx.recv().await {
        let value: Value = serde_json::from_str(message.text())?;
        if let (Some(method), Some(id)) = (message.method(), message.id()) {
            // A request of the server's, through the gateway: a person answers elicitations.
            let reply = if method == "elicitation/create" {
                let params = value.get("params").cloned().unwrap_or(Value::Null);
                let result = terminal
                    .get_or_insert_with(crate::elicit::Terminal::new)
                    .answer(&params)
                    .await;
                Message::result(id, &result.to_string())
            } else {
                Message::error(
                    Some(id),
                    message::METHOD_NOT_FOUND,
                    &format!("`moniker call` does not answer `{method}`"),
                )
            };
            session.handle(Ok(message::Incoming::One(reply)), None);
            continue;
        }
        if value.get("id") == Some(&Value::from(1)) && value.get("method").is_none() {
            answer = Some(value);
            break;
        }
    }
    drop(session);
    let failed = answer.as_ref().is_none_or(|a| a.get("error").is_some());
    // A failed call may be a server that did not start; a call that worked did not need it.
    report_failed_servers(&gateway, if failed { "error" } else { "warning" });
    gateway.shutdown().await;
    let Some(answer) = answer else {
        return Err("no answer to the call".into());
    };
    if let Some(error) = answer.get("error") {
        let code = error
            .get("code")
            .and_then(Value::as_i64)
            .unwrap_or_default();
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        output::report(&format!("error {code}: {message}"));
        return Ok(if crate::login::needs_login(&config) {
            Exit::NeedsLogin
        } else {
            Exit::Failure
        });
    }
    let result = &answer["result"];
    output::line(&serde_json::to_string_pretty(result)?)?;
    Ok(if result.get("isError") == Some(&Value::Bool(true)) {
        Exit::Failure
    } else {
        Exit::Ok
    })
}

/// `moniker stats`: what the listing costs a client, per server and in total, without the
/// action tools and with them: tools, bytes of `tools/list`, and tokens (o200k, the tokenizer
/// of current OpenAI models; other tokenizers differ by a few percent).
pub async fn stats(mut config: Config, json: bool) -> Result<Exit, Failure> {
    let gateway = match start(&mut config).await? {
        Ok(gateway) => gateway,
        Err(not) => return Ok(not.exit),
    };
    let listings = gateway.listings();
    let after = gateway.view();
    gateway.shutdown().await;
    let mut plain = moniker_surface::Rules::clone(&gateway.rules());
    plain.actions.clear();
    let before = moniker_surface::build(&plain, &listings)
        .surface
        .unwrap_or_default();
    let bpe = tiktoken_rs::o200k_base()?;
    let measure = |surface: &moniker_surface::Surface| -> std::collections::BTreeMap<String, (usize, usize, usize)> {
        let mut groups: std::collections::BTreeMap<String, Vec<&RawValue>> = std::collections::BTreeMap::new();
        for item in surface.listed(Kind::Tool) {
            let servers: std::collections::BTreeSet<&str> = item.servers().map(|s| s.as_str()).collect();
            let key = match servers.len() {
                1 => servers.into_iter().next().unwrap_or_default().to_owned(),
                _ => "(several)".to_owned(),
            };
            groups.entry(key).or_default().push(&*item.definition);
        }
        // As a session lists them: the surface's one server, when it has one, said once.
        let size = |defs: &[&RawValue]| {
            let text = moniker_surface::listing::render(Kind::Tool, defs.iter().copied(), &[], surface.server(Kind::Tool));
            (defs.len(), text.len(), bpe.encode_ordinary(&text).len())
        };
        let mut all = Vec::new();
        let mut out = std::collections::BTreeMap::new();
        for (server, defs) in groups {
            out.insert(server, size(&defs));
            all.extend(defs);
        }
        out.insert("TOTAL".to_owned(), size(&all));
        out
    };
    let (b, a) = (measure(&before), measure(&after.surface));
    let mut keys: Vec<&String> = b.keys().chain(a.keys()).filter(|k| *k != "TOTAL").collect();
    keys.sort();
    keys.dedup();
    let total = "TOTAL".to_owned();
    let mut table = vec![
        ["SERVER", "TOOLS", "BYTES", "TOKENS"]
            .map(String::from)
            .to_vec(),
    ];
    for key in keys.into_iter().chain(std::iter::once(&total)) {
        let (tb, bb, kb) = b.get(key).copied().unwrap_or_default();
        let (ta, ba, ka) = a.get(key).copied().unwrap_or_default();
        let change = |x: usize, y: usize| {
            if x == y || x == 0 {
                format!("{y}")
            } else {
                format!(
                    "{x} -> {y} ({:+.0}%)",
                    (y as f64 - x as f64) * 100.0 / x as f64
                )
            }
        };
        table.push(vec![
            key.clone(),
            change(tb, ta),
            change(bb, ba),
            change(kb, ka),
        ]);
    }
    // The listing a session without a toolset sees, tool by tool.
    let count = |text: &str| bpe.encode_ordinary(text).len();
    let listed: Vec<&RawValue> = after
        .surface
        .listed(Kind::Tool)
        .map(|e| &*e.definition)
        .collect();
    let listing = moniker_surface::listing::render(
        Kind::Tool,
        listed.iter().copied(),
        &[],
        after.surface.server(Kind::Tool),
    );
    let listed: Vec<&str> = listed.iter().map(|d| d.get()).collect();
    let audit = crate::audit::audit(&listed, &listing, &count);
    let names_only = format!(
        r#"{{"tools":[{}]}}"#,
        audit
            .tools
            .iter()
            .map(|t| format!(
                r#"{{"name":{}}}"#,
                serde_json::to_string(&t.name).unwrap_or_default()
            ))
            .collect::<Vec<_>>()
            .join(",")
    );
    let sets = gateway.toolset_names();
    let mut toolsets = std::collections::BTreeMap::new();
    for name in &sets {
        let selection = gateway.toolset(name, &after);
        let defs: Vec<&str> = after
            .surface
            .listed(Kind::Tool)
            .filter(|e| selection.tools.iter().any(|t| *t == e.name))
            .map(|e| e.definition.get())
            .collect();
        toolsets.insert(
            name.clone(),
            count(&format!(r#"{{"tools":[{}]}}"#, defs.join(","))),
        );
    }
    // The other discovery modes, with the config's pins: what a session lists first.
    let listed_in = |mode: moniker_surface::discovery::Mode| {
        let discovery = moniker_surface::Discovery {
            mode,
            ..after.surface.discovery().clone()
        };
        let entries = discovery.entries(
            Kind::Tool,
            after
                .surface
                .listed(Kind::Tool)
                .map(|e| (e, std::borrow::Cow::Borrowed(&*e.definition))),
        );
        let server = discovery.server(&after.surface, Kind::Tool, entries.len());
        count(&moniker_surface::listing::render(
            Kind::Tool,
            entries,
            &[],
            server,
        ))
    };
    let search_mode = listed_in(moniker_surface::discovery::Mode::Search);
    let hints_mode = listed_in(moniker_surface::discovery::Mode::Hints);
    // What the servers list themselves, side by side.
    let raw = count(&moniker_surface::listing::render(
        Kind::Tool,
        listings.iter().flat_map(|l| l.tools.iter().map(|t| &**t)),
        &[],
        None,
    ));
    let without_actions = b.get(&total).map_or(0, |t| t.2);
    let savings = serde_json::json!({
        "listing_tokens": audit.listing_tokens,
        "without_action_tools": without_actions,
        "repeated_text_said_once": audit.repeated.iter().map(|r| r.tokens_repeated).sum::<usize>(),
        "names_only_for_clients_that_defer_loading": count(&names_only),
        "search_mode": search_mode,
        "hints_mode": hints_mode,
        "servers_own_listings": raw,
        "toolsets": toolsets,
    });
    if json {
        let report = serde_json::json!({
            "tokenizer": "o200k",
            "tools": audit.tools,
            "repeated": audit.repeated,
            "savings": savings,
        });
        output::line(&serde_json::to_string_pretty(&report)?)?;
        return Ok(Exit::Ok);
    }
    output::line("tools/list without action tools -> with them (tokens: o200k)")?;
    output::line(&format_table(&table))?;
    let mut tools = vec![
        ["TOOL", "NAME", "DESCRIPTION", "SCHEMA", "TOTAL"]
            .map(String::from)
            .to_vec(),
    ];
    let mut by_cost: Vec<&crate::audit::ToolCost> = audit.tools.iter().collect();
    by_cost.sort_by(|x, y| {
        y.total_tokens
            .cmp(&x.total_tokens)
            .then(x.name.cmp(&y.name))
    });
    for t in by_cost {
        tools.push(vec![
            t.name.clone(),
            t.name_tokens.to_string(),
            t.description_tokens.to_string(),
            t.schema_tokens.to_string(),
            t.total_tokens.to_string(),
        ]);
    }
    output::line("\ntokens per tool, as listed")?;
    output::line(&format_table(&tools))?;
    if !audit.repeated.is_empty() {
        let mut rows = vec![
            ["REPEATED", "TOOLS", "TOKENS", "TEXT"]
                .map(String::from)
                .to_vec(),
        ];
        for r in audit.repeated.iter().take(10) {
            let text: String = r.text.chars().take(60).collect();
            rows.push(vec![
                r.kind.to_owned(),
                r.tools.to_string(),
                r.tokens_repeated.to_string(),
                text,
            ]);
        }
        output::line("\ntext repeated across tools (TOKENS: what saying it once would save)")?;
        output::line(&format_table(&rows))?;
    }
    output::line(&format!(
        "\nthe servers' own listings: {raw} tokens; moniker's listing: {} (hints mode: {hints_mode}; search mode, pinned tools and search_tools and call_tool: {search_mode}); without action tools: {}; repeated text said once would save {}; names only (for clients that defer loading): {}",
        audit.listing_tokens,
        without_actions,
        savings["repeated_text_said_once"],
        savings["names_only_for_clients_that_defer_loading"],
    ))?;
    for (name, tokens) in savings["toolsets"].as_object().into_iter().flatten() {
        output::line(&format!("toolset `{name}`: {tokens} tokens"))?;
    }
    Ok(Exit::Ok)
}
