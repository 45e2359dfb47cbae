//! moniker's config: one YAML file (JSON is YAML too, so a Claude Desktop, Cursor or VS Code
//! file works as is, its own keys listed in [`Config::ignored_keys`]) parsed into the naming
//! [`Rules`] of `moniker-surface`, the servers to connect to and the gateway's settings.
//!
//! [`parse`] is pure: text in, a [`Config`] or a [`ConfigReport`] of *every* error out, each
//! with a code, the dotted path, its line and column, and a hint. `${VAR}` expansion is a
//! separate step ([`Config::expand_env`]) so that a config can be checked without its secrets.
//! The only I/O is at the edge: [`find`] and [`load()`].
//!
//! This crate does not build the surface (that is `moniker-surface`) nor start servers (that
//! is `moniker-gateway`).

mod decode;
mod env;
mod gateway;
mod http;
mod load;
mod redact;
mod report;
mod server;
mod shape;
mod source;
mod tree;

use indexmap::IndexMap;
use moniker_surface::{Rules, ServerId};

pub use gateway::{AuditSettings, AuditTo, CallLimits, GatewaySettings, Limits, TelemetrySettings};
pub use http::{
    ConsoleClient, HttpConfig, IdentityMatch, IdentityToolset, Introspection, ResourceAuth,
    TokenConfig,
};
pub use load::{Found, LoadError, find, find_why, load};
pub use redact::shown_url;
pub use report::{ConfigError, ConfigReport, codes};
pub use server::{
    Auth, Exchange, Forward, Grant, Network, PassEnv, PerPerson, Sandbox, ServerConfig, Tls,
    Transport,
};

/// The run-time settings of the `toolsets` section (the toolsets themselves are naming rules).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolsetSettings {
    /// Show moniker's toolset management tools to clients (`toolsets.manage`).
    pub manage: bool,
    /// The store file of run-time toolsets, as written (`${VAR}` expanded by
    /// [`Config::expand_env`]; `~` is left as it is). `None`: the default place.
    pub store: Option<String>,
}
pub use source::{Source, Span};

/// The JSON Schema of `moniker.yaml`, generated from the types that describe the file
/// (`moniker schema` prints it; `crates/config/moniker.schema.json` is it, committed for
/// editors, and the guide's config reference is made from that by `docs/reference.py`). The
/// decoder is the judge: it reads the keys these types name, and `tests/e2e/test_schema.py`
/// holds every example to both.
pub use shape::schema;

/// Where an editor finds the [`schema`] (the `yaml-language-server` line of a config
/// `install --import` writes).
pub use shape::URL as SCHEMA_URL;

/// A parsed config.
#[derive(Debug, Clone)]
pub struct Config {
    /// In file order. Disabled servers are here too, with `disabled: true`.
    pub servers: IndexMap<ServerId, ServerConfig>,
    pub gateway: GatewaySettings,
    /// `call_timeout` and `max_in_flight` of servers, tools and prompts.
    pub limits: CallLimits,
    /// The audit log (`audit:`); `None`: off.
    pub audit: Option<AuditSettings>,
    /// OpenTelemetry traces (`telemetry:`); `None`: as the `OTEL_*` variables say (off when
    /// they say nothing).
    pub telemetry: Option<TelemetrySettings>,
    /// Who may use the Streamable HTTP endpoint.
    pub http: HttpConfig,
    /// How toolsets run: `toolsets.manage` and `toolsets.store`.
    pub toolsets: ToolsetSettings,
    /// What naming needs: `naming`, per-server tags and prefixes, `server_tags`, `tools`,
    /// `prompts`, `actions`; and the `toolsets` section.
    pub rules: Rules,
    /// `discovery.model`: the path (relative to the config file's folder) of a static
    /// embedding table for `search_tools` in place of the one moniker ships.
    pub search_model: Option<String>,
    /// `discovery.learn`: whether search learns from the calls that follow it (true unless the
    /// top-level `discovery` says `learn: false`).
    pub search_learns: bool,
    /// `integrity`: what a tool that changed since `moniker.lock` (or is not in it) gets.
    pub integrity: moniker_surface::lock::Integrity,
    /// The text, and the span of every path, to show later diagnostics in.
    pub source: Source,
    /// When the file is a client's config (Claude Desktop, Cursor, VS Code) rather than
    /// moniker's: the client's own top-level keys (`globalShortcut`, `preferences`, `inputs`),
    /// read past, in file order. Empty for a moniker config, where such keys are errors.
    pub ignored_keys: Vec<String>,
}

/// Parses a config. Empty text is an empty config. Never panics, whatever the text.
/// Whether `name` is an HTTP header name (RFC 9110 `token`: one or more of letters, digits and
/// ``!#$%&'*+-.^_`|~``).
pub fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

pub fn parse(file_name: &str, text: &str) -> Result<Config, ConfigReport> {
    let root = tree::parse(text).map_err(|e| ConfigReport::new(file_name, text, vec![*e]))?;
    let (decoded, errors) = decode::decode(root.as_ref(), text);
    if !errors.is_empty() {
        return Err(ConfigReport::new(file_name, text, errors));
    }
    Ok(Config {
        servers: decoded.servers,
        gateway: decoded.gateway,
        limits: decoded.limits,
        audit: decoded.audit,
        telemetry: decoded.telemetry,
        http: decoded.http,
        toolsets: decoded.toolsets,
        rules: decoded.rules,
        search_model: decoded.search_model,
        search_learns: decoded.search_learns,
        integrity: decoded.integrity,
        source: Source::with_spans(file_name, text, decoded.spans, &decoded.servers_key),
        ignored_keys: decoded.ignored_keys,
    })
}
