//! The `http:` section: who may use `moniker serve --http`, and its limits.

use std::time::Duration;

/// Bearer tokens, allow-lists and limits of the Streamable HTTP endpoint.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct HttpConfig {
    pub tokens: Vec<TokenConfig>,
    /// `Origin` values allowed besides loopback ones (`https://app.example.com`).
    pub allowed_origins: Vec<String>,
    /// `Host` values allowed besides loopback ones (`gateway.internal:8080`).
    pub allowed_hosts: Vec<String>,
    /// Largest request body, in bytes; `None`: the gateway's default.
    pub max_body: Option<u32>,
    /// Sessions unused this long are dropped (`http.session_idle`); `None`: the gateway's
    /// default.
    pub session_idle: Option<Duration>,
    /// Sessions of one token at most (`http.max_sessions_per_token`); `None`: the gateway's
    /// default.
    pub max_sessions_per_token: Option<u32>,
    /// Open connections at most (`http.max_connections`); `None`: the gateway's default.
    pub max_connections: Option<u32>,
    /// `http.auth`: access tokens from an identity provider (beside `tokens`).
    pub auth: Option<ResourceAuth>,
    /// `http.console`: the read-only console at `/console`, for a token bound to no toolset.
    pub console: bool,
}

/// `http.auth`: moniker's endpoint as an OAuth 2.1 resource server. A client is sent to
/// the Protected Resource Metadata (RFC 9728), signs its user in at `issuer`, and presents an
/// access token whose audience is `resource` (RFC 8707).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceAuth {
    /// moniker's `/mcp` URL as clients reach it: the audience its tokens must name; a toolset's
    /// URL is this with `/<toolset>` after it, its own resource.
    pub resource: String,
    /// The authorization server: its metadata names the keys (and the introspection endpoint).
    pub issuer: String,
    /// Scopes every token must carry: advertised, and asked for in challenges.
    pub scopes: Vec<String>,
    /// JWS algorithms accepted; empty: the asymmetric ones (`RS*`, `PS*`, `ES256`, `ES384`,
    /// `EdDSA`).
    pub algorithms: Vec<String>,
    /// How far `exp` and `nbf` may be off.
    pub leeway: Duration,
    /// How long the issuer's keys are used before they are fetched again.
    pub keys_ttl: Duration,
    /// Opaque tokens are asked about at the issuer's introspection endpoint (RFC 7662) as this
    /// client; `None`: only JWTs are accepted.
    pub introspection: Option<Introspection>,
    /// Which toolset an identity sees: the first rule that matches.
    pub toolsets: Vec<IdentityToolset>,
    /// The toolset of an identity no rule matches; `None`: the whole surface.
    pub default_toolset: Option<String>,
    /// `admins`: the identities that may use the console (any rule matching).
    pub admins: Vec<IdentityMatch>,
    /// `console_client`: who the console is at the issuer when it signs an admin in; `None`:
    /// it registers itself (Dynamic Client Registration).
    pub console_client: Option<ConsoleClient>,
}

/// The OAuth client the console signs admins in as (authorization code with PKCE).
#[derive(Clone, PartialEq, Eq)]
pub struct ConsoleClient {
    pub client_id: String,
    /// Usually `${VAR}`; never logged. `None`: a public client.
    pub client_secret: Option<String>,
}

impl std::fmt::Debug for ConsoleClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleClient")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl ResourceAuth {
    /// The JWS algorithms moniker verifies, and accepts when `algorithms` is empty:
    /// asymmetric only (a shared secret would let anyone who can check a token mint one).
    pub const ALGORITHMS: &[&str] = &[
        "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
    ];
    pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(60);

    /// The algorithms accepted: `algorithms`, or [`Self::ALGORITHMS`] when it is empty.
    pub fn accepted_algorithms(&self) -> Vec<&str> {
        match self.algorithms.is_empty() {
            true => Self::ALGORITHMS.to_vec(),
            false => self.algorithms.iter().map(String::as_str).collect(),
        }
    }
    pub const DEFAULT_KEYS_TTL: Duration = Duration::from_secs(300);
}

/// The client moniker is at the issuer's introspection endpoint.
#[derive(Clone, PartialEq, Eq)]
pub struct Introspection {
    pub client_id: String,
    /// Usually `${VAR}`; never logged.
    pub client_secret: String,
}

impl std::fmt::Debug for Introspection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Introspection")
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .finish()
    }
}

/// One rule of `http.auth.toolsets`: identities with this claim value (or scope) see this
/// toolset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdentityToolset {
    pub when: IdentityMatch,
    pub toolset: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdentityMatch {
    /// The claim is this string, or a list holding it (`groups`, `roles`).
    Claim { claim: String, value: String },
    /// The token's scope holds this one.
    Scope(String),
}

/// One bearer token, and the toolset its sessions are bound to, if any.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenConfig {
    /// Usually `${SOME_VAR}`: expanded by `expand_env`, never logged.
    pub token: String,
    pub toolset: Option<String>,
    /// What the audit log and metrics call the client of this token (`name`); the secret is
    /// never shown, so without a name a digest of it is.
    pub name: Option<String>,
}

impl std::fmt::Debug for TokenConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenConfig")
            .field("token", &"<redacted>")
            .field("toolset", &self.toolset)
            .field("name", &self.name)
            .finish()
    }
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("tokens", &self.tokens)
            .field("allowed_origins", &self.allowed_origins)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("max_body", &self.max_body)
            .field("session_idle", &self.session_idle)
            .field("max_sessions_per_token", &self.max_sessions_per_token)
            .field("max_connections", &self.max_connections)
            .field("auth", &self.auth)
            .finish()
    }
}
