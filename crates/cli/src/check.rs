//! `moniker check`: every diagnostic to stderr, one summary line to stdout, and the exit code.

use moniker_config::{Config, ConfigReport, Transport};
use moniker_surface::{Diagnostic, Kind};

use crate::exit::{Exit, Failure};
use crate::render::Renderer;
use crate::start::{Toolsets, report_failed_servers, start_with};
use crate::{lockfile, output};

/// `moniker check --offline`: the config file is already parsed; these are the checks that
/// need only its rules.
pub fn offline(config: &Config) -> Result<Exit, Failure> {
    let mut diagnostics = moniker_surface::check_rules(&config.rules);
    diagnostics.extend(moniker_surface::deprecation::apply(&config.rules).1);
    diagnostics.extend(file_errors(config));
    report(config, &diagnostics)
}

/// An error for each file a remote server's `tls` or `auth` names that cannot be read: a
/// missing CA or key would only show when moniker connects. (A path from `${VAR}` is not
/// known offline, and is not checked.)
fn file_errors(config: &Config) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (id, server) in config.servers.iter().filter(|(_, s)| !s.disabled) {
        let Transport::Http { tls, auth, .. } = &server.transport else {
            continue;
        };
        let files = [
            ("tls.ca_file", &tls.ca_file),
            ("tls.client_cert", &tls.client_cert),
            ("tls.client_key", &tls.client_key),
            ("auth.private_key", &auth.private_key),
        ];
        for (key, path) in files {
            let Some(path) = path.as_deref().filter(|p| !p.contains("${")) else {
                continue;
            };
            if let Err(e) = std::fs::File::open(path) {
                out.push(
                    Diagnostic::error("server::file", format!("cannot read `{path}`: {e}"))
                        .at(format!("servers.{id}.{key}"))
                        .help(format!(
                            "`{key}` names a PEM file moniker reads when it connects"
                        )),
                );
            }
        }
    }
    out
}

/// Renders `diagnostics` (of any origin: rules alone, or the surface built from the servers'
/// listings) to stderr and prints the summary: 0 when none is an error, else 78.
pub fn report(config: &Config, diagnostics: &[Diagnostic]) -> Result<Exit, Failure> {
    if !diagnostics.is_empty() {
        output::report(&Renderer::for_stderr().diagnostics(&config.source, diagnostics));
    }
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let warnings = diagnostics.len() - errors;
    if errors > 0 {
        output::line(&format!(
            "{} in `{}`",
            counts(errors, warnings),
            config.source.file_name
        ))?;
        return Ok(Exit::InvalidConfig);
    }
    output::line(&ok_summary(config, warnings))?;
    if let Some(auth) = &config.http.auth {
        output::line(&auth_summary(auth, &config.rules.toolsets.sets))?;
    }
    Ok(Exit::Ok)
}

/// `http.auth` as moniker will apply it: the issuer, the resource and its metadata URL, the
/// scopes and which identity sees which toolset.
fn auth_summary(
    auth: &moniker_config::ResourceAuth,
    sets: &std::collections::BTreeMap<String, moniker_surface::ToolsetRule>,
) -> String {
    use moniker_config::IdentityMatch;
    let mut lines = vec![
        "http.auth: access tokens of an identity provider".to_owned(),
        format!(
            "  issuer:    {} (its keys fetched again every {}s)",
            auth.issuer,
            auth.keys_ttl.as_secs()
        ),
        format!(
            "  audience:  {} (a toolset's URL: {}/<toolset>)",
            auth.resource, auth.resource
        ),
        format!(
            "  metadata:  {}",
            moniker_gateway::identity::metadata_url(&auth.resource)
        ),
        format!(
            "  scopes:    {}",
            if auth.scopes.is_empty() {
                "none required".to_owned()
            } else {
                auth.scopes.join(" ")
            }
        ),
        format!(
            "  tokens:    JWT ({}; exp/nbf leeway {}s){}",
            auth.accepted_algorithms().join(", "),
            auth.leeway.as_secs(),
            if auth.introspection.is_some() {
                ", opaque ones introspected"
            } else {
                ""
            }
        ),
    ];
    let known = |name: &str| {
        if sets.contains_key(name) {
            ""
        } else {
            " (not a toolset of the config: a run-time one, or a mistake)"
        }
    };
    let describe = |when: &IdentityMatch| match when {
        IdentityMatch::Claim { claim, value } => format!("claim `{claim}` has `{value}`"),
        IdentityMatch::Scope(scope) => format!("scope `{scope}`"),
    };
    for rule in &auth.toolsets {
        lines.push(format!(
            "  {} -> toolset `{}`{}",
            describe(&rule.when),
            rule.toolset,
            known(&rule.toolset)
        ));
    }
    lines.push(match &auth.default_toolset {
        Some(name) => format!("  anyone else -> toolset `{name}`{}", known(name)),
        None => "  anyone else -> every tool".to_owned(),
    });
    for when in &auth.admins {
        lines.push(format!("  {} -> the console", describe(when)));
    }
    lines.join("\n")
}

/// `config ok: 4 servers, 3 tool overrides, 1 prompt override`, and the warnings if any.
fn ok_summary(config: &Config, warnings: usize) -> String {
    let mut out = format!(
        "config ok: {}, {}, {}",
        plural(config.servers.len(), "server"),
        plural(config.rules.tools.len(), "tool override"),
        plural(config.rules.prompts.len(), "prompt override"),
    );
    if warnings > 0 {
        out.push_str(&format!(", {}", plural(warnings, "warning")));
    }
    out
}

/// The line that ends an invalid config's report: `2 errors in `moniker.yaml``.
pub fn invalid_summary(report: &ConfigReport) -> String {
    format!(
        "{} in `{}`",
        counts(report.errors.len(), 0),
        report.file_name
    )
}

fn counts(errors: usize, warnings: usize) -> String {
    let mut out = plural(errors, "error");
    if warnings > 0 {
        out.push_str(&format!(", {}", plural(warnings, "warning")));
    }
    out
}

fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// `moniker check`: the config, the servers and the surface they make together; with a
/// `moniker.lock` beside the config, what the surface breaks of it (warnings, or with
/// `locked` exit 1).
/// What each sandboxed stdio server of `config` was given (its plan, as its guard applied it;
/// the guard's own word on what the kernel enforced is in the log).
fn sandboxes(config: &Config) -> Vec<String> {
    use moniker_gateway::sandbox::{Net, Plan};
    let mut out = Vec::new();
    for (id, server) in &config.servers {
        let moniker_config::Transport::Stdio { pass_env, env, .. } = &server.transport else {
            continue;
        };
        let environment = moniker_gateway::connect::stdio::environment(pass_env, env);
        let Some(plan) = server
            .sandbox
            .as_ref()
            .and_then(|sandbox| Plan::of_stdio(sandbox, &server.transport, &environment))
        else {
            continue;
        };
        let shown = |paths: Vec<&std::path::PathBuf>| {
            let existing: Vec<String> = paths
                .into_iter()
                .filter(|p| p.exists())
                .map(|p| p.display().to_string())
                .collect();
            existing.join(", ")
        };
        let network = match &plan.network {
            Net::Off => "off".to_owned(),
            Net::On => "on".to_owned(),
            Net::Ports(ports) => format!("TCP to port {ports:?}"),
        };
        out.push(format!(
            "server `{id}` runs in a sandbox: writes {}; reads the system and {}; network {network}; at most {} processes, {} open files{}",
            shown(Plan::beyond_system(&plan.write)),
            shown(Plan::beyond_system(&plan.read)),
            plan.processes,
            plan.open_files,
            plan.memory.map(|m| format!(", {} MB of data", m >> 20)).unwrap_or_default(),
        ));
    }
    out
}

/// Each HTTP server called as each caller (`auth.exchange`): where their tokens are
/// exchanged, for what.
fn exchanges(config: &Config) -> Vec<String> {
    let mut out = Vec::new();
    for (id, server) in &config.servers {
        let moniker_config::Transport::Http { url, auth, .. } = &server.transport else {
            continue;
        };
        let Some(exchange) = &auth.exchange else {
            continue;
        };
        let resource = exchange.resource.as_deref().unwrap_or(url);
        out.push(format!(
            "server `{id}` is called as each caller: their access token exchanged at `{}` for `{}`{}{}, each kept at most {} s",
            auth.issuer.as_deref().unwrap_or("?"),
            moniker_config::shown_url(resource),
            exchange
                .audience
                .as_ref()
                .map(|a| format!(" (audience `{a}`)"))
                .unwrap_or_default(),
            if exchange.actor { ", moniker named as the actor" } else { "" },
            exchange.cache.as_secs(),
        ));
    }
    out
}

pub async fn online(config: Config, locked: bool, fix: bool) -> Result<Exit, Failure> {
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
        output::line(&invalid_summary(&report))?;
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
    let mut diagnostics = gateway.naming.diagnostics();
    let view = gateway.naming.view();
    let sets = &config.rules.toolsets.sets;
    for (name, rule) in sets {
        diagnostics.extend(moniker_surface::toolsets::validate(
            &view.surface,
            name,
            rule,
            sets,
        ));
    }
    if gateway.naming.searches(&view) {
        // In search mode a tool a search of its own description does not find is as good as
        // missing: named, with the fix.
        diagnostics.extend(moniker_surface::search::unfindable(
            &view.surface,
            view.index(),
        ));
    }
    let breaking = lock
        .as_ref()
        .map(|lock| moniker_surface::lock::compare(lock, &view.surface))
        .unwrap_or_default();
    diagnostics.extend(breaking.iter().map(lockfile::diagnostic));
    let exit = report(&config, &diagnostics)?;
    if let Some(fix) = moniker_surface::lock::merged_fix(&breaking) {
        output::report(&format!(
            "help: to keep every old name working, add to `{}`:\n{}",
            config.source.file_name,
            output::indent(&fix, 6)
        ));
    }
    let failed = report_failed_servers(&gateway, "error");
    for line in sandboxes(&config).into_iter().chain(exchanges(&config)) {
        output::line(&line)?;
    }
    output::line(&summary(&config, &view))?;
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

/// The line that says what the surface holds: tools (and old names), prompts, servers up.
fn summary(config: &Config, view: &moniker_gateway::view::View) -> String {
    let listed = view.surface.listed(Kind::Tool).count();
    format!(
        "{listed} tools{} and {} prompts from {} of {} servers",
        match view.surface.tools().len() - listed {
            0 => String::new(),
            n => format!(" (and {n} more callable by their old names)"),
        },
        view.surface.prompts().len(),
        view.serving.len(),
        config.servers.values().filter(|s| !s.disabled).count()
    )
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
                .servers
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_count_with_plurals() {
        let config = moniker_config::parse(
            "m.yaml",
            "servers: { a: { command: x } }\ntools: { t: { name: u }, v: { name: w } }\n",
        )
        .expect("valid");
        assert_eq!(
            ok_summary(&config, 0),
            "config ok: 1 server, 2 tool overrides, 0 prompt overrides"
        );
        assert_eq!(
            ok_summary(&config, 1),
            "config ok: 1 server, 2 tool overrides, 0 prompt overrides, 1 warning"
        );
        assert_eq!(counts(2, 1), "2 errors, 1 warning");
        assert_eq!(counts(1, 0), "1 error");
    }

    #[test]
    fn files_that_tls_and_auth_name_must_be_readable() {
        let config = moniker_config::parse(
            "m.yaml",
            "servers:\n  docs: { url: https://docs.example.com/mcp, tls: { ca_file: /nonexistent/ca.pem } }\n  off: { url: https://off.example.com/mcp, tls: { ca_file: /nonexistent/x.pem }, disabled: true }\n  env: { url: https://e.example.com/mcp, auth: { client_id: m, private_key: \"${KEY}\" } }\n  stdio: { command: x }\n",
        )
        .expect("valid");
        let errors = file_errors(&config);
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(errors[0].is_error());
        assert_eq!(
            errors[0].config_path.as_deref(),
            Some("servers.docs.tls.ca_file")
        );
        assert!(
            errors[0].message.contains("/nonexistent/ca.pem"),
            "{}",
            errors[0].message
        );
    }
}
