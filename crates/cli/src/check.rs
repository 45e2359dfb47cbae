//! `moniker check`: every diagnostic to stderr, one summary line to stdout, and the exit code.

use moniker_config::{Config, ConfigReport, Transport};
use moniker_surface::Diagnostic;

use crate::render::Renderer;
use crate::{Exit, Failure, output};

/// `moniker check --offline`: the config file is already parsed; these are the checks that
/// need only its rules.
pub fn offline(config: &Config) -> Result<Exit, Failure> {
    let mut diagnostics = moniker_surface::check_rules(&config.rules);
    diagnostics.extend(https_warnings(config));
    report(config, &diagnostics)
}

/// A warning for each enabled server with an `https://` url: this build has no TLS, so it
/// cannot reach them. A warning, not an error: the config itself is right, and stays right
/// once TLS lands. (A url from `${VAR}` is not known offline, and is not warned about.)
fn https_warnings(config: &Config) -> Vec<Diagnostic> {
    config
        .servers
        .iter()
        .filter(|(_, server)| !server.disabled)
        .filter_map(|(id, server)| match &server.transport {
            Transport::Http { url, .. } if url.starts_with("https://") => Some(
                Diagnostic::warning(
                    "server::https",
                    format!(
                        "server `{id}` has an https url, and this version of moniker cannot reach https servers yet"
                    ),
                )
                .at(format!("servers.{id}.url"))
                .help(
                    "TLS support is coming; until then, reach the server over `http://` (for example through a local TLS proxy)",
                ),
            ),
            _ => None,
        })
        .collect()
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
    Ok(Exit::Ok)
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
    fn https_servers_are_warned_about() {
        let config = moniker_config::parse(
            "m.yaml",
            "servers:\n  docs: { url: https://docs.example.com/mcp }\n  local: { url: http://127.0.0.1:9000/mcp }\n  off: { url: https://off.example.com/mcp, disabled: true }\n  env: { url: \"${DOCS_URL}\" }\n  stdio: { command: x }\n",
        )
        .expect("valid");
        let warnings = https_warnings(&config);
        assert_eq!(warnings.len(), 1, "{warnings:#?}");
        let warning = &warnings[0];
        assert!(!warning.is_error());
        assert_eq!(warning.code, "server::https");
        assert_eq!(warning.config_path.as_deref(), Some("servers.docs.url"));
        assert!(
            warning
                .message
                .contains("this version of moniker cannot reach https servers yet"),
            "{}",
            warning.message
        );
        assert!(
            warning
                .help
                .as_deref()
                .is_some_and(|h| h.contains("TLS support is coming")),
            "{warning:?}"
        );
    }
}
