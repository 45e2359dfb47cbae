//! `moniker doctor`: what a person needs to know when something does not work, each problem
//! with what to do about it: the config used and why, each server's state, the names that
//! collide, and the clients that run moniker. Exit 0 when nothing is wrong, else 1.

use std::path::{Path, PathBuf};

use moniker_config::{Config, LoadError, Transport};
use moniker_surface::{Kind, ServerId};

use crate::clients::{Client, runs_moniker};
use crate::exit::{Exit, Failure};
use crate::output;
use crate::render::Renderer;

/// What doctor found: lines to print and how many of them are problems.
#[derive(Default)]
struct Findings {
    lines: Vec<String>,
    problems: usize,
}

impl Findings {
    fn ok(&mut self, text: String) {
        self.lines.push(format!("  ok      {text}"));
    }

    fn note(&mut self, text: String) {
        self.lines.push(format!("  -       {text}"));
    }

    fn problem(&mut self, label: &str, text: String, fix: String) {
        self.problems += 1;
        // A server's stderr lines stay under the problem they explain.
        let text = text.replace('\n', "\n          ");
        self.lines.push(format!("  {label:<7} {text}"));
        self.lines.push(format!("          fix: {fix}"));
    }

    fn section(&mut self, title: &str) {
        self.lines.push(String::new());
        self.lines.push(format!("{title}:"));
    }
}

pub(crate) fn doctor(explicit: Option<&Path>) -> Result<Exit, Failure> {
    let mut found = Findings::default();
    found.lines.push("config:".to_owned());
    let config = config(explicit, &mut found);
    if let Some(config) = &config {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(servers(config, &mut found))?;
    }
    let used = config
        .as_ref()
        .and_then(|c| std::fs::canonicalize(&c.source.file_name).ok());
    clients(used.as_deref(), &mut found);
    found.lines.push(String::new());
    found.lines.push(match found.problems {
        0 => "no problem found".to_owned(),
        1 => "1 problem found".to_owned(),
        n => format!("{n} problems found"),
    });
    output::line(&found.lines.join("\n"))?;
    Ok(if found.problems == 0 {
        Exit::Ok
    } else {
        Exit::Failure
    })
}

/// The config file, why it is the one, and whether it is valid (its `${VAR}`s expanded).
fn config(explicit: Option<&Path>, found: &mut Findings) -> Option<Config> {
    let located = moniker_config::find_why(explicit)
        .map(|(path, why)| (path, why.to_string()))
        .or_else(run_by_a_client);
    let Some((path, why)) = located else {
        found.problem(
            "MISSING",
            "no config file: no `-c`, no `$MONIKER_CONFIG`, no `moniker.yaml` here or in the \
             user config dir"
                .to_owned(),
            "write one (see the README's first example), or `moniker install CLIENT --import` \
             to make one from a client's servers"
                .to_owned(),
        );
        return None;
    };
    let shown = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
    let mut config = match moniker_config::load(&path) {
        Ok(config) => config,
        Err(LoadError::Io { source, .. }) => {
            found.problem(
                "MISSING",
                format!("`{}` ({why}) cannot be read: {source}", shown.display()),
                "create it, or point `-c` at the config you mean".to_owned(),
            );
            return None;
        }
        Err(LoadError::Invalid(report)) => {
            found.problem(
                "INVALID",
                format!(
                    "`{}` ({why}): {}",
                    shown.display(),
                    crate::check::invalid_summary(&report)
                ),
                "each error below says where and what to write".to_owned(),
            );
            found
                .lines
                .push(indent(&Renderer::plain().config_report(&report)));
            return None;
        }
    };
    found.ok(format!("`{}` ({why})", shown.display()));
    if let Ok(today) = crate::settings::today() {
        config.rules.today = Some(today);
    }
    if let Err(report) = config.expand_env(|name| std::env::var(name).ok()) {
        found.problem(
            "INVALID",
            format!(
                "{} in its `${{VAR}}`s",
                crate::check::invalid_summary(&report)
            ),
            "set the variables (or give defaults: `${NAME:-default}`)".to_owned(),
        );
        found
            .lines
            .push(indent(&Renderer::plain().config_report(&report)));
        return None;
    }
    Some(config)
}

/// The config a client's moniker entry runs, when no `-c`, `$MONIKER_CONFIG` or usual place
/// names one (right after `moniker install CLIENT --import`, the config is beside the
/// client's file): with why it is that one.
fn run_by_a_client() -> Option<(PathBuf, String)> {
    Client::ALL.iter().find_map(|client| {
        let text = std::fs::read_to_string(client.file()?).ok()?;
        let doc: serde_json::Value = serde_json::from_str(&text).ok()?;
        let entries = doc.get(client.servers_key())?.as_object()?;
        entries.iter().find_map(|(name, entry)| {
            let config = runs_moniker(entry)?;
            config.is_file().then(|| {
                (
                    config,
                    format!(
                        "the one {}'s server `{name}` runs (no `-c`, no `$MONIKER_CONFIG`, none in the usual places)",
                        client.title()
                    ),
                )
            })
        })
    })
}

/// Each server's state, then the surface's problems (names that collide).
async fn servers(config: &Config, found: &mut Findings) -> Result<(), Failure> {
    found.section("servers");
    let missing = missing_commands(config, found);
    let gateway = crate::start::launch(config).await?;
    server_states(config, &gateway, &missing, found);
    names(config, &gateway, found);
    integrity(config, &gateway, found)?;
    gateway.shutdown().await;
    Ok(())
}

/// The servers whose command is not found (each a problem), and the disabled ones noted.
fn missing_commands(config: &Config, found: &mut Findings) -> Vec<ServerId> {
    let mut missing = Vec::new();
    for (id, server) in &config.servers {
        if server.disabled {
            found.note(format!("{id}: disabled in the config"));
            continue;
        }
        if let Transport::Stdio { command, cwd, .. } = &server.transport {
            if find_command(command, cwd.as_deref()).is_none() {
                missing.push(id.clone());
                found.problem(
                    "MISSING",
                    format!("{id}: its command `{command}` is not found on PATH"),
                    format!(
                        "install it, or give its full path in `servers.{id}.command` (PATH is {})",
                        std::env::var("PATH").unwrap_or_default()
                    ),
                );
            }
        }
    }
    missing
}

/// Each enabled server that has its command: waiting for a login, failed (with the fix), or
/// answering with its tools and prompts.
fn server_states(
    config: &Config,
    gateway: &moniker_gateway::Gateway,
    missing: &[ServerId],
    found: &mut Findings,
) {
    let waiting: Vec<_> = crate::login::waiting(config)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let status = gateway.servers.server_status();
    let listings = gateway.naming.listings();
    for (id, server) in config.servers.iter().filter(|(_, s)| !s.disabled) {
        if missing.contains(id) {
            continue;
        }
        let state = status.get(id).cloned().unwrap_or_default();
        let how = match &server.transport {
            // The command alone: its arguments may hold secrets (`${VAR}`s are expanded).
            Transport::Stdio { command, args, .. } => match args.len() {
                0 => format!("`{command}`"),
                1 => format!("`{command}` and 1 argument"),
                n => format!("`{command}` and {n} arguments"),
            },
            Transport::Http { url, .. } => moniker_config::shown_url(url),
        };
        if waiting.contains(id) {
            found.problem(
                "LOGIN",
                format!("{id} ({how}): waits for you to log in"),
                format!("moniker login {id}"),
            );
            continue;
        }
        if let Some(refused) = &state.sandbox_refused {
            found.problem(
                "SANDBOX",
                format!("{id} ({how}): its sandbox refused it: {refused}"),
                format!("if it should reach that, widen `servers.{id}.sandbox` as said"),
            );
        }
        if !state.up {
            let error = state
                .last_error
                .unwrap_or_else(|| "it did not answer".to_owned());
            let fix = failure_fix(id.as_str(), server, &error, config.gateway.start_timeout);
            found.problem("FAIL", format!("{id} ({how}): {error}"), fix);
            continue;
        }
        let (tools, prompts) = listings
            .iter()
            .find(|l| &l.server == id)
            .map_or((0, 0), |l| (l.tools.len(), l.prompts.len()));
        found.ok(format!(
            "{id} ({how}): answers, {tools} tool{}, {prompts} prompt{}",
            if tools == 1 { "" } else { "s" },
            if prompts == 1 { "" } else { "s" }
        ));
    }
}

/// The surface's names: every one once, or the diagnostics that say what collides.
fn names(config: &Config, gateway: &moniker_gateway::Gateway, found: &mut Findings) {
    found.section("names");
    let diagnostics = gateway.naming.diagnostics();
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    if diagnostics.is_empty() {
        let view = gateway.naming.view();
        let enabled = config.servers.values().filter(|s| !s.disabled).count();
        let down = enabled.saturating_sub(view.serving.len());
        let of = match down {
            0 => String::new(),
            n => format!(
                " of the {} server{} up: the names of the {n} down are not checked",
                view.serving.len(),
                if view.serving.len() == 1 { "" } else { "s" }
            ),
        };
        found.ok(format!(
            "{} tools and {} prompts, every name once{of}",
            view.surface.listed(Kind::Tool).count(),
            view.surface.prompts().len()
        ));
    } else {
        if errors > 0 {
            found.problem(
                "INVALID",
                format!(
                    "{errors} error{} in the surface (names that collide, rules that name no tool)",
                    if errors == 1 { "" } else { "s" }
                ),
                format!(
                    "each error below says what to change in `{}` (names that collide end \
                     with one block to paste); then `moniker check`",
                    config.source.file_name
                ),
            );
        }
        found.lines.push(indent(
            &Renderer::plain().diagnostics(&config.source, &diagnostics),
        ));
    }
}

/// Whether every tool is as `moniker.lock` sealed it.
fn integrity(
    config: &Config,
    gateway: &moniker_gateway::Gateway,
    found: &mut Findings,
) -> Result<(), Failure> {
    found.section("integrity");
    let path = crate::lockfile::path(config);
    let Some(lock) = crate::lockfile::read(&path)? else {
        found.note(format!(
            "no `{}`: what the tools say is not sealed (`moniker lock` writes it)",
            path.display()
        ));
        return Ok(());
    };
    let listings = gateway.naming.listings();
    let listed: Vec<&moniker_surface::Listing> = listings.iter().collect();
    let drift = moniker_surface::lock::drift(&lock, &gateway.naming.view().surface, &listed);
    if drift.is_empty() {
        found.ok(format!("every tool is as `{}` sealed it", path.display()));
    }
    let what = match config.integrity {
        moniker_surface::lock::Integrity::Warn => "served (integrity: warn)",
        moniker_surface::lock::Integrity::Block => "withheld (integrity: block)",
    };
    for d in drift {
        found.problem(
            if d.is_new() { "NEW" } else { "CHANGED" },
            format!("{d}; {what}"),
            format!(
                "`moniker lock --diff` shows how; `moniker lock --accept {}` accepts it",
                d.tool
            ),
        );
    }
    Ok(())
}

/// What to do about a server that is not up, from what moniker saw of it (`error`: the
/// failure, with the last lines of a stdio server's stderr when it exited).
fn failure_fix(
    id: &str,
    server: &moniker_config::ServerConfig,
    error: &str,
    start_timeout: std::time::Duration,
) -> String {
    let lower = error.to_lowercase();
    let stdio = matches!(server.transport, Transport::Stdio { .. });
    let tls = ["certificate", "tls", "ssl"]
        .iter()
        .any(|w| lower.contains(w));
    if tls && stdio {
        // The server's own download or connection failed to verify a certificate: a
        // TLS-intercepting proxy, most often. `tls.ca_file` is for URL servers only.
        return "the server could not verify a TLS certificate (a proxy that intercepts TLS?): \
                moniker passes SSL_CERT_FILE, SSL_CERT_DIR, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and \
                NODE_EXTRA_CA_CERTS to every server when they are set: set the one its tools read \
                to your CA file (or name another in `pass_env`)"
            .to_owned();
    }
    if tls {
        return format!(
            "the server's certificate is not trusted: give its CA in `servers.{id}.tls.ca_file`, or check the URL's host name"
        );
    }
    if lower.contains("over moniker's budget") {
        return "the server lists more than moniker takes from one server (the Budgets table of \
                the guide, docs/src/security.md: pages, items, bytes): its tools are left out; a server that lists \
                without end has a paging bug"
            .to_owned();
    }
    if lower.contains("401") || lower.contains("unauthorized") {
        return format!(
            "its credentials were refused: check `servers.{id}.headers`, or `moniker login {id}`"
        );
    }
    if lower.contains("did not answer in time") || lower.contains("timed out") {
        return format!(
            "it did not finish starting within `gateway.start_timeout` ({} s): a first `npx -y` or \
             `uvx` run downloads its package first; raise `gateway.start_timeout`, or run it once \
             by hand so that it is cached",
            start_timeout.as_secs()
        );
    }
    if lower.contains("last lines of stderr") {
        return "its own words above (the last lines of its stderr) say why it stopped".to_owned();
    }
    if stdio {
        return format!(
            "run it yourself (`servers.{id}` in the config) to see why it stops; its stderr is in moniker's log: `moniker --log debug check`"
        );
    }
    "check that the URL is right and the server runs".to_owned()
}

/// Where `command` is: a path as given (relative to `cwd`), else the first match on `PATH`.
fn find_command(command: &str, cwd: Option<&str>) -> Option<PathBuf> {
    let runnable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt as _;
                m.is_file() && m.permissions().mode() & 0o111 != 0
            }
            #[cfg(not(unix))]
            {
                m.is_file()
            }
        })
    };
    let path = Path::new(command);
    if path.components().count() > 1 {
        let full = match cwd {
            Some(dir) if path.is_relative() => Path::new(dir).join(path),
            _ => path.to_path_buf(),
        };
        return runnable(&full).then_some(full);
    }
    let exts: Vec<String> = if cfg!(windows) {
        std::env::var("PATHEXT")
            .unwrap_or_else(|_| ".EXE;.CMD;.BAT".to_owned())
            .split(';')
            .map(str::to_owned)
            .chain([String::new()])
            .collect()
    } else {
        vec![String::new()]
    };
    std::env::split_paths(&std::env::var_os("PATH")?)
        .flat_map(|dir| exts.iter().map(move |e| dir.join(format!("{command}{e}"))))
        .find(|p| runnable(p))
}

/// The clients that run moniker, and with which config.
fn clients(used: Option<&Path>, found: &mut Findings) {
    found.section("clients");
    for client in Client::ALL {
        let Some(path) = client.file() else { continue };
        let title = client.title();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                found.note(format!("{title}: no config file (`{}`)", path.display()));
                continue;
            }
            Err(e) => {
                found.problem(
                    "FAIL",
                    format!("{title}: cannot read `{}`: {e}", path.display()),
                    "check the file's permissions".to_owned(),
                );
                continue;
            }
        };
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) else {
            found.note(format!(
                "{title}: `{}` is not plain JSON (comments?): not read",
                path.display()
            ));
            continue;
        };
        let entries = doc
            .get(client.servers_key())
            .and_then(serde_json::Value::as_object);
        let runs: Vec<(String, PathBuf)> = entries
            .into_iter()
            .flatten()
            .filter_map(|(name, e)| runs_moniker(e).map(|c| (name.clone(), c)))
            .collect();
        if runs.is_empty() {
            found.note(format!(
                "{title}: moniker is not installed (`moniker install {}`)",
                client.id()
            ));
            continue;
        }
        for (name, config) in runs {
            let canonical = std::fs::canonicalize(&config).ok();
            if canonical.is_none() {
                found.problem(
                    "MISSING",
                    format!(
                        "{title}: its server `{name}` runs moniker with `{}`, which does not exist",
                        config.display()
                    ),
                    format!(
                        "`moniker uninstall {}` then `moniker install {} -c FILE`",
                        client.id(),
                        client.id()
                    ),
                );
            } else if canonical.as_deref() == used {
                found.ok(format!(
                    "{title}: its server `{name}` runs moniker with this config"
                ));
            } else {
                found.note(format!(
                    "{title}: its server `{name}` runs moniker with `{}` (another config: \
                     `moniker doctor -c {}` checks that one)",
                    config.display(),
                    config.display()
                ));
            }
        }
    }
}

/// Under a line of the report.
fn indent(text: &str) -> String {
    crate::output::indent(text, 10)
}
