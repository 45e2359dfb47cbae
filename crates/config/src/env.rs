//! `${VAR}` and `${VAR:-default}` in server fields, expanded after parsing so that `parse`
//! stays pure and a config can be checked without its secrets.

use std::borrow::Cow;

use moniker_surface::vocab::{Seg, path};

use crate::report::{ConfigError, ConfigReport, codes};
use crate::server::{Auth, Tls, Transport};
use crate::source::Source;
use crate::tree::shorten;
use crate::{Config, PassEnv, ResourceAuth};

/// What went wrong in one field. Never holds a variable's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    /// `${NAME}` with `NAME` unset and no default.
    Unset(String),
    /// `${` with no `}` after it.
    Unclosed,
    /// `${...}` whose inside is not `NAME` or `NAME:-default`.
    BadReference(String),
}

/// Expands every `${...}` in `text`. Text without `${` is returned as is; `$` alone and `$$`
/// mean themselves. An empty variable counts as unset for `:-`, as in the shell.
pub(crate) fn expand<'t>(
    text: &'t str,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<Cow<'t, str>, Vec<Problem>> {
    if !text.contains("${") {
        return Ok(Cow::Borrowed(text));
    }
    let mut out = String::with_capacity(text.len());
    let mut problems = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            problems.push(Problem::Unclosed);
            rest = "";
            break;
        };
        let inside = &after[..end];
        rest = &after[end + 1..];
        let (name, default) = match inside.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inside, None),
        };
        if !is_name(name) {
            problems.push(Problem::BadReference(inside.to_owned()));
            continue;
        }
        match (
            lookup(name).filter(|v| default.is_none() || !v.is_empty()),
            default,
        ) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => problems.push(Problem::Unset(name.to_owned())),
        }
    }
    out.push_str(rest);
    if problems.is_empty() {
        Ok(Cow::Owned(out))
    } else {
        Err(problems)
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`
fn is_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl Config {
    /// Expands `${VAR}` and `${VAR:-default}` in the fields that reach a server: `command`,
    /// `args`, `env` values, `cwd`, `sandbox` paths, `url`, `headers` values, `tls` and `auth`
    /// values; and in `toolsets.store`. `lookup` is the environment
    /// (`|name| std::env::var(name).ok()`). Every unset variable is reported, at its field;
    /// no message holds a value. On error nothing is changed.
    pub fn expand_env(
        &mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigReport> {
        let mut errors = Vec::new();
        let section = self.source.servers_key().to_owned();
        let mut expanded = Vec::with_capacity(self.servers.len());
        for (id, server) in &self.servers {
            let base = [Seg::Key(&section), Seg::Key(id.as_str())];
            let mut field = |segs: &[Seg<'_>], text: &str| {
                let p = path(&[&base[..], segs].concat());
                expand_field(text, &p, &self.source, &lookup, &mut errors)
            };
            let transport = expand_transport(&server.transport, &self.gateway.pass_env, &mut field);
            let sandbox = server
                .sandbox
                .as_ref()
                .map(|sandbox| expand_sandbox(sandbox, &mut field));
            expanded.push((transport, sandbox));
        }
        let store = self.toolsets.store.as_ref().map(|store| {
            let p = path(&[Seg::Key("toolsets"), Seg::Key("store")]);
            expand_field(store, &p, &self.source, &lookup, &mut errors)
        });
        let tokens: Vec<String> = self
            .http
            .tokens
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let p = path(&[Seg::Key("http"), Seg::Key("tokens"), Seg::Index(i)]);
                expand_field(&t.token, &p, &self.source, &lookup, &mut errors)
            })
            .collect();
        // `http.auth`'s URLs (a public address from the environment) and its client secret.
        let auth = self.http.auth.as_ref().map(|auth| {
            let mut at = |key: &[Seg<'_>], text: &str| {
                let mut full = vec![Seg::Key("http"), Seg::Key("auth")];
                full.extend_from_slice(key);
                expand_field(text, &path(&full), &self.source, &lookup, &mut errors)
            };
            expand_auth(auth, &mut at)
        });
        let fixed = fixed_values(&self.rules.tools, &self.source, &lookup, &mut errors);
        if !errors.is_empty() {
            return Err(ConfigReport::new(
                &self.source.file_name,
                &self.source.text,
                errors,
            ));
        }
        for (server, (transport, sandbox)) in self.servers.values_mut().zip(expanded) {
            server.transport = transport;
            server.sandbox = sandbox;
        }
        self.toolsets.store = store;
        for (key, param, value) in fixed {
            let rule = self
                .rules
                .tools
                .get_mut(&key)
                .and_then(|r| r.params.get_mut(&param));
            if let Some(rule) = rule {
                rule.fixed = Some(moniker_surface::params::Fixed(value));
            }
        }
        for (token, value) in self.http.tokens.iter_mut().zip(tokens) {
            token.token = value;
        }
        if let (Some(auth), Some(expanded)) = (&mut self.http.auth, auth) {
            auth.resource = expanded.resource.trim_end_matches('/').to_owned();
            auth.issuer = expanded.issuer;
            if let (Some(i), Some(secret)) = (&mut auth.introspection, expanded.introspection) {
                i.client_secret = secret;
            }
            if let Some(client) = &mut auth.console_client {
                client.client_secret = expanded.console_secret;
            }
        }
        self.anchor_paths();
        Ok(())
    }

    /// Makes each relative path the config names (a server's `cwd` and TLS files, the toolset
    /// store, `discovery.model`, the audit file) relative to the config file's folder, not to
    /// the directory moniker was started in: two clients started in two directories read the
    /// same config the same way. `~` is the caller's to expand.
    fn anchor_paths(&mut self) {
        let Some(dir) = std::path::Path::new(&self.source.file_name)
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map(std::path::Path::to_path_buf)
        else {
            return;
        };
        let anchor = |path: &mut String| {
            if !path.starts_with('~') && std::path::Path::new(path.as_str()).is_relative() {
                *path = dir.join(path.as_str()).to_string_lossy().into_owned();
            }
        };
        for server in self.servers.values_mut() {
            match &mut server.transport {
                crate::Transport::Stdio { cwd, .. } => cwd.iter_mut().for_each(anchor),
                crate::Transport::Http { tls, .. } => {
                    for path in [&mut tls.ca_file, &mut tls.client_cert, &mut tls.client_key] {
                        path.iter_mut().for_each(anchor);
                    }
                }
            }
        }
        self.toolsets.store.iter_mut().for_each(anchor);
        self.search_model.iter_mut().for_each(anchor);
        if let Some(crate::AuditSettings {
            to: crate::AuditTo::File(file),
            ..
        }) = &mut self.audit
        {
            anchor(file);
        }
    }
}

/// Every `fixed` parameter value of the tool overrides, its strings expanded: (override key,
/// parameter, value).
fn fixed_values(
    tools: &std::collections::BTreeMap<String, moniker_surface::Override>,
    source: &Source,
    lookup: &impl Fn(&str) -> Option<String>,
    errors: &mut Vec<ConfigError>,
) -> Vec<(String, String, serde_json::Value)> {
    fn walk(
        value: &serde_json::Value,
        p: &str,
        source: &Source,
        lookup: &impl Fn(&str) -> Option<String>,
        errors: &mut Vec<ConfigError>,
    ) -> serde_json::Value {
        use serde_json::Value as J;
        match value {
            J::String(text) => J::String(expand_field(text, p, source, lookup, errors)),
            J::Array(items) => J::Array(
                items
                    .iter()
                    .map(|v| walk(v, p, source, lookup, errors))
                    .collect(),
            ),
            J::Object(fields) => J::Object(
                fields
                    .iter()
                    .map(|(k, v)| (k.clone(), walk(v, p, source, lookup, errors)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    let mut out = Vec::new();
    for (key, rule) in tools {
        for (param, r) in &rule.params {
            let Some(moniker_surface::params::Fixed(value)) = &r.fixed else {
                continue;
            };
            let p = path(&[
                Seg::Key("tools"),
                Seg::Key(key),
                Seg::Key("params"),
                Seg::Key(param),
                Seg::Key("fixed"),
            ]);
            let value = walk(value, &p, source, lookup, errors);
            out.push((key.clone(), param.clone(), value));
        }
    }
    out
}

/// What of `http.auth` may name a variable, expanded.
struct AuthValues {
    resource: String,
    issuer: String,
    /// The introspection client's secret.
    introspection: Option<String>,
    /// The console client's secret.
    console_secret: Option<String>,
}

/// `http.auth`'s fields that may name a variable, each expanded by `at` (at its path below
/// `http.auth`).
fn expand_auth(auth: &ResourceAuth, at: &mut dyn FnMut(&[Seg<'_>], &str) -> String) -> AuthValues {
    AuthValues {
        resource: at(&[Seg::Key("resource")], &auth.resource),
        issuer: at(&[Seg::Key("issuer")], &auth.issuer),
        introspection: auth.introspection.as_ref().map(|i| {
            at(
                &[Seg::Key("introspection"), Seg::Key("client_secret")],
                &i.client_secret,
            )
        }),
        console_secret: auth
            .console_client
            .as_ref()
            .and_then(|c| c.client_secret.as_ref())
            .map(|secret| {
                at(
                    &[Seg::Key("console_client"), Seg::Key("client_secret")],
                    secret,
                )
            }),
    }
}

/// A stdio server's sandbox, its paths expanded by `field` (at their paths below the server).
fn expand_sandbox(
    sandbox: &crate::Sandbox,
    field: &mut dyn FnMut(&[Seg<'_>], &str) -> String,
) -> crate::Sandbox {
    let mut paths = |key: &'static str, list: &[String]| -> Vec<String> {
        list.iter()
            .enumerate()
            .map(|(i, p)| field(&[Seg::Key("sandbox"), Seg::Key(key), Seg::Index(i)], p))
            .collect()
    };
    crate::Sandbox {
        read: paths("read", &sandbox.read),
        write: paths("write", &sandbox.write),
        ..sandbox.clone()
    }
}

/// A server's transport, each field that may hold a variable expanded by `field` (at its path
/// below the server); a stdio server's `pass_env` with the gateway's (`passed`) too.
fn expand_transport(
    transport: &Transport,
    passed: &PassEnv,
    field: &mut dyn FnMut(&[Seg<'_>], &str) -> String,
) -> Transport {
    let (url, headers, tls, auth, forward) = match transport {
        Transport::Stdio {
            command,
            args,
            env,
            pass_env,
            cwd,
        } => {
            return Transport::Stdio {
                // The gateway's `pass_env` goes to every stdio server.
                pass_env: passed.with(pass_env),
                command: field(&[Seg::Key("command")], command),
                args: args
                    .iter()
                    .enumerate()
                    .map(|(i, a)| field(&[Seg::Key("args"), Seg::Index(i)], a))
                    .collect(),
                env: env
                    .iter()
                    .map(|(k, v)| (k.clone(), field(&[Seg::Key("env"), Seg::Key(k)], v)))
                    .collect(),
                cwd: cwd.as_ref().map(|c| field(&[Seg::Key("cwd")], c)),
            };
        }
        Transport::Http {
            url,
            headers,
            tls,
            auth,
            forward,
        } => (url, headers, tls, auth, forward),
    };
    let mut optional =
        |segs: &[Seg<'_>], text: &Option<String>| text.as_ref().map(|t| field(segs, t));
    let tls = Tls {
        ca_file: optional(&[Seg::Key("tls"), Seg::Key("ca_file")], &tls.ca_file),
        client_cert: optional(
            &[Seg::Key("tls"), Seg::Key("client_cert")],
            &tls.client_cert,
        ),
        client_key: optional(&[Seg::Key("tls"), Seg::Key("client_key")], &tls.client_key),
    };
    let auth = Auth {
        client_id: optional(&[Seg::Key("auth"), Seg::Key("client_id")], &auth.client_id),
        client_secret: optional(
            &[Seg::Key("auth"), Seg::Key("client_secret")],
            &auth.client_secret,
        ),
        client_metadata_url: optional(
            &[Seg::Key("auth"), Seg::Key("client_metadata_url")],
            &auth.client_metadata_url,
        ),
        grant: auth.grant,
        issuer: optional(&[Seg::Key("auth"), Seg::Key("issuer")], &auth.issuer),
        private_key: optional(
            &[Seg::Key("auth"), Seg::Key("private_key")],
            &auth.private_key,
        ),
        scope: optional(&[Seg::Key("auth"), Seg::Key("scope")], &auth.scope),
        exchange: auth
            .exchange
            .as_ref()
            .map(|exchange| expand_exchange(exchange, &mut optional)),
        per_person: auth.per_person,
    };
    Transport::Http {
        url: field(&[Seg::Key("url")], url),
        headers: headers
            .iter()
            .map(|(k, v)| (k.clone(), field(&[Seg::Key("headers"), Seg::Key(k)], v)))
            .collect(),
        tls,
        auth,
        forward: forward.clone(),
    }
}

/// `auth.exchange` with its texts expanded.
fn expand_exchange(
    exchange: &crate::Exchange,
    optional: &mut impl FnMut(&[Seg<'_>], &Option<String>) -> Option<String>,
) -> crate::Exchange {
    let at = |name| [Seg::Key("auth"), Seg::Key("exchange"), Seg::Key(name)];
    crate::Exchange {
        resource: optional(&at("resource"), &exchange.resource),
        audience: optional(&at("audience"), &exchange.audience),
        ..exchange.clone()
    }
}

fn expand_field(
    text: &str,
    p: &str,
    source: &Source,
    lookup: &impl Fn(&str) -> Option<String>,
    errors: &mut Vec<ConfigError>,
) -> String {
    let problems = match expand(text, lookup) {
        Ok(value) => return value.into_owned(),
        Err(problems) => problems,
    };
    for problem in problems {
        let (message, help) = match problem {
            Problem::Unset(name) => (
                format!("environment variable `{name}` is not set"),
                format!("set `{name}`, or give a default: `${{{name}:-default}}`"),
            ),
            Problem::Unclosed => (
                "`${` has no closing `}`".to_owned(),
                "write `${NAME}` or `${NAME:-default}`".to_owned(),
            ),
            Problem::BadReference(inside) => (
                format!("`${{{}}}` is not a variable reference", shorten(&inside)),
                "write `${NAME}` or `${NAME:-default}`, where NAME is letters, digits and `_` and does not start with a digit".to_owned(),
            ),
        };
        let mut error = ConfigError::new(codes::ENV, message, p).with_help(help);
        error.span = source.span(p);
        errors.push(error);
    }
    text.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cret".to_owned()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_references() {
        assert_eq!(
            expand("Bearer ${TOKEN}", &env).as_deref(),
            Ok("Bearer s3cret")
        );
        assert_eq!(
            expand("${TOKEN}${TOKEN}", &env).as_deref(),
            Ok("s3crets3cret")
        );
        assert_eq!(expand("${NOPE:-dflt}", &env).as_deref(), Ok("dflt"));
        assert_eq!(expand("${NOPE:-}", &env).as_deref(), Ok(""));
        assert_eq!(expand("${TOKEN:-dflt}", &env).as_deref(), Ok("s3cret"));
        assert_eq!(expand("${EMPTY:-dflt}", &env).as_deref(), Ok("dflt"));
        assert_eq!(expand("${EMPTY}", &env).as_deref(), Ok(""));
        assert_eq!(expand("${NOPE:-a:-b}", &env).as_deref(), Ok("a:-b"));
    }

    #[test]
    fn leaves_other_text_alone() {
        for text in [
            "plain",
            "$HOME",
            "$$",
            "cost: $5",
            "a$$b",
            "{x}",
            "$ {TOKEN}",
        ] {
            assert!(
                matches!(expand(text, &env), Ok(Cow::Borrowed(t)) if t == text),
                "{text}"
            );
        }
        assert_eq!(expand("$$${TOKEN}", &env).as_deref(), Ok("$$s3cret"));
    }

    #[test]
    fn reports_every_problem() {
        assert_eq!(
            expand("${A} ${TOKEN} ${B}", &env),
            Err(vec![
                Problem::Unset("A".to_owned()),
                Problem::Unset("B".to_owned())
            ])
        );
        assert_eq!(expand("x ${TOKEN", &env), Err(vec![Problem::Unclosed]));
        assert_eq!(
            expand("${1X} ${} ${a b}", &env),
            Err(vec![
                Problem::BadReference("1X".to_owned()),
                Problem::BadReference(String::new()),
                Problem::BadReference("a b".to_owned()),
            ])
        );
    }

    const CONFIG: &str = r#"servers:
  github:
    command: "${HOME}/bin/gh"
    args: [--token, "${GITHUB_TOKEN}", "$$literal", "${MODE:-fast}"]
    env: { GITHUB_TOKEN: "${GITHUB_TOKEN}", PLAIN: "x$y" }
    cwd: "${WORK:-/tmp}"
  docs:
    url: "http://127.0.0.1:${PORT:-9000}/mcp"
    headers: { Authorization: "Bearer ${DOCS_TOKEN}" }
"#;

    fn vars(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/u".to_owned()),
            "GITHUB_TOKEN" => Some("ghp_s3cret".to_owned()),
            "DOCS_TOKEN" => Some("docs_s3cret".to_owned()),
            _ => None,
        }
    }

    /// Finding 5 of round three: relative paths resolved in the directory of whichever client
    /// started moniker. They are the config file's folder's now; absolute ones and `~` stay.
    #[test]
    fn relative_paths_are_the_config_folders() {
        let text = "servers:\n  a: { command: a, cwd: work }\n  b: { command: b, cwd: /abs }\n  r:\n    url: https://r.example/mcp\n    tls: { ca_file: certs/ca.pem, client_cert: ~/c.pem, client_key: /k.pem }\ntoolsets: { store: store.json }\ndiscovery: { model: models/m }\naudit: { to: logs/audit.jsonl }\n";
        let mut config = crate::parse("/etc/moniker/moniker.yaml", text).expect("valid");
        config.expand_env(vars).expect("all set");
        let cwd = |id: &str| match &config.servers[id].transport {
            Transport::Stdio { cwd, .. } => cwd.clone(),
            _ => panic!("stdio"),
        };
        assert_eq!(cwd("a").as_deref(), Some("/etc/moniker/work"));
        assert_eq!(cwd("b").as_deref(), Some("/abs"));
        let Transport::Http { tls, .. } = &config.servers["r"].transport else {
            panic!("http")
        };
        assert_eq!(tls.ca_file.as_deref(), Some("/etc/moniker/certs/ca.pem"));
        assert_eq!(tls.client_cert.as_deref(), Some("~/c.pem"));
        assert_eq!(tls.client_key.as_deref(), Some("/k.pem"));
        assert_eq!(
            config.toolsets.store.as_deref(),
            Some("/etc/moniker/store.json")
        );
        assert_eq!(
            config.search_model.as_deref(),
            Some("/etc/moniker/models/m")
        );
        assert_eq!(
            config.audit.map(|a| a.to),
            Some(crate::AuditTo::File("/etc/moniker/logs/audit.jsonl".into()))
        );
        // A config named without a folder keeps them as they are (the working directory's).
        let mut here = crate::parse("moniker.yaml", text).expect("valid");
        here.expand_env(vars).expect("all set");
        assert_eq!(here.toolsets.store.as_deref(), Some("store.json"));
    }

    /// `gateway.pass_env` reaches every stdio server, with what each names itself.
    #[test]
    fn the_gateway_pass_env_goes_to_every_stdio_server() {
        let text = "gateway: { pass_env: [OPENAI_API_KEY] }\nservers:\n  a: { command: a, pass_env: [GITHUB_TOKEN] }\n  b: { command: b }\n";
        let mut config = crate::parse("moniker.yaml", text).expect("valid");
        config.expand_env(vars).expect("all set");
        let passed = |id: &str| match &config.servers[id].transport {
            Transport::Stdio { pass_env, .. } => pass_env.clone(),
            _ => panic!("stdio"),
        };
        assert_eq!(
            passed("a"),
            crate::PassEnv::Names(vec!["OPENAI_API_KEY".into(), "GITHUB_TOKEN".into()])
        );
        assert_eq!(
            passed("b"),
            crate::PassEnv::Names(vec!["OPENAI_API_KEY".into()])
        );
    }

    #[test]
    fn config_fields_are_expanded() {
        let mut config = crate::parse("moniker.yaml", CONFIG).expect("valid");
        config.expand_env(vars).expect("all set");
        let github = &config.servers["github"];
        let Transport::Stdio {
            command,
            args,
            env,
            cwd,
            ..
        } = &github.transport
        else {
            panic!("stdio")
        };
        assert_eq!(command, "/home/u/bin/gh");
        assert_eq!(args, &["--token", "ghp_s3cret", "$$literal", "fast"]);
        assert_eq!(env["GITHUB_TOKEN"], "ghp_s3cret");
        assert_eq!(env["PLAIN"], "x$y");
        assert_eq!(cwd.as_deref(), Some("/tmp"));
        let Transport::Http { url, headers, .. } = &config.servers["docs"].transport else {
            panic!("http")
        };
        assert_eq!(url, "http://127.0.0.1:9000/mcp");
        assert_eq!(headers["Authorization"], "Bearer docs_s3cret");
        // Secrets are in the config now, and still not in the Debug output of `env` and
        // `headers` (`args` and `url` are shown as they are).
        let shown = format!("{:?}", config.servers["docs"]);
        assert!(!shown.contains("s3cret"), "{shown}");
        let Transport::Stdio { env, .. } = &config.servers["github"].transport else {
            panic!("stdio")
        };
        let shown = format!("{env:?}");
        assert!(shown.contains("s3cret"), "the map itself is plain: {shown}");
        let shown = format!("{:?}", config.servers["github"]);
        assert_eq!(shown.matches("s3cret").count(), 1, "only in args: {shown}");
    }

    #[test]
    fn unset_variables_are_errors_at_their_field() {
        let mut config = crate::parse("moniker.yaml", CONFIG).expect("valid");
        let before = config.servers.clone();
        let only_home = |name: &str| (name == "HOME").then(|| "/home/u".to_owned());
        let report = config.expand_env(only_home).expect_err("unset");
        assert_eq!(config.servers, before, "nothing changes on error");
        let found: Vec<_> = report
            .errors
            .iter()
            .map(|e| {
                let span = e.span.expect("span");
                (
                    e.code,
                    e.path.as_str(),
                    e.message.as_str(),
                    span.line,
                    span.column,
                )
            })
            .collect();
        assert_eq!(
            found,
            [
                (
                    codes::ENV,
                    "servers.github.args[1]",
                    "environment variable `GITHUB_TOKEN` is not set",
                    4,
                    21
                ),
                (
                    codes::ENV,
                    "servers.github.env.GITHUB_TOKEN",
                    "environment variable `GITHUB_TOKEN` is not set",
                    5,
                    26
                ),
                (
                    codes::ENV,
                    "servers.docs.headers.Authorization",
                    "environment variable `DOCS_TOKEN` is not set",
                    9,
                    31
                ),
            ]
        );
        assert_eq!(
            report.errors[0].help.as_deref(),
            Some("set `GITHUB_TOKEN`, or give a default: `${GITHUB_TOKEN:-default}`")
        );
        let shown = report.to_string();
        assert!(!shown.contains("/home/u"), "{shown}");
    }

    #[test]
    fn expanded_values_never_reach_messages() {
        let text = "mcpServers:\n  a: { command: x, args: ['${SET} ${UNSET} ${1BAD} ${OPEN'] }\n";
        let mut config = crate::parse("moniker.json", text).expect("valid");
        let report = config
            .expand_env(|name| (name == "SET").then(|| "hunter2".to_owned()))
            .expect_err("problems");
        let messages: Vec<_> = report.errors.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "environment variable `UNSET` is not set",
                "`${1BAD}` is not a variable reference",
                "`${` has no closing `}`",
            ]
        );
        assert!(
            report
                .errors
                .iter()
                .all(|e| e.path == "mcpServers.a.args[0]")
        );
        assert!(!report.to_string().contains("hunter2"));
    }

    #[test]
    fn a_config_without_references_is_unchanged() {
        let text = "servers:\n  a: { command: x, args: ['$$', '$HOME'], env: { K: v } }\n";
        let mut config = crate::parse("moniker.yaml", text).expect("valid");
        let before = config.servers.clone();
        config.expand_env(|_| None).expect("nothing to expand");
        assert_eq!(config.servers, before);
    }
}
