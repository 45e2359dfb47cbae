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
            .finish()
    }
}
