//! How to reach a server: spawn it (stdio) or connect to it (Streamable HTTP).

use std::fmt;

use indexmap::IndexMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    pub transport: Transport,
    /// Configured but not started; its naming rules still apply.
    pub disabled: bool,
    /// The server speaks MCP 2026-07-28, statelessly (`protocol: 2026-07-28`): moniker sends
    /// `server/discover` instead of `initialize` and the envelope in every request. Else the
    /// 2025 handshake and a session.
    pub modern: bool,
    /// What a stdio server may reach (`sandbox`); `None`: everything its user may.
    pub sandbox: Option<Sandbox>,
    /// A stdio server run once for each person (`per_person`); `None`: one for everyone.
    pub per_person: Option<PerPerson>,
}

/// A stdio server run once for each person who calls it (`per_person`): their calls go to
/// their own instance, whose environment holds their own secrets, never another's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerPerson {
    /// The variables of the instance's environment each person sets for themselves (their
    /// tokens); a person who has not set them all is told how.
    pub secrets: Vec<String>,
    /// The most instances at once (the one that has waited longest for a call goes first).
    pub instances: u32,
    /// An instance no call has reached for this long stops.
    pub idle: std::time::Duration,
}

impl Default for PerPerson {
    fn default() -> Self {
        Self {
            secrets: Vec::new(),
            instances: 16,
            idle: std::time::Duration::from_secs(600),
        }
    }
}

/// A stdio server's sandbox: besides what every sandbox gives (the system and the server's
/// runtime read-only, a private temporary folder, the paths its arguments name), the paths it
/// names, the network, and limits.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sandbox {
    /// Paths it may read (`~` and `${VAR}` allowed).
    pub read: Vec<String>,
    /// Paths it may read and write.
    pub write: Vec<String>,
    pub network: Network,
    /// The most processes it may run at once (itself included).
    pub processes: Option<u64>,
    /// The most files it may hold open.
    pub open_files: Option<u64>,
    /// The most memory it may allocate, in megabytes (its data segment).
    pub memory_mb: Option<u64>,
    /// Run with what the kernel can enforce (said in the log), rather than refuse to start.
    pub best_effort: bool,
}

/// What of the network a sandboxed server reaches.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Network {
    /// Nothing: it cannot open a connection.
    #[default]
    Off,
    /// Everything.
    On,
    /// TCP connections to these ports only.
    Ports(Vec<u16>),
}

/// `Debug` prints the names of environment variables and headers but never their values:
/// they hold tokens, and `Debug` output ends up in logs.
// One per configured server, read at start and reload: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process that speaks MCP on its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: IndexMap<String, String>,
        /// Which of moniker's own environment variables it is given besides the short list
        /// every server gets (`pass_env`).
        pass_env: PassEnv,
        cwd: Option<String>,
    },
    /// A Streamable HTTP endpoint (`type: sse` configs land here too).
    Http {
        url: String,
        headers: IndexMap<String, String>,
        tls: Tls,
        auth: Auth,
        /// Headers made for each request from its caller (`forward`): header name to where
        /// the value comes from.
        forward: IndexMap<String, Forward>,
    },
}

/// Where a forwarded header's value comes from: the caller's verified identity, a header the
/// caller sent, or (only when named) the caller's access token itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forward {
    /// A claim of the caller's access token (`sub`, `groups`, `realm_access.roles`): a list is
    /// joined with `,`.
    Claim(String),
    /// A header of the client's request (of the one that created a 2025 session).
    Header(String),
    /// The caller's access token as it came (`Bearer <token>` when the header is
    /// `Authorization`): token passthrough, which the MCP specification warns against.
    AccessToken,
}

/// Which of moniker's environment a stdio server sees, besides what every server is given
/// (the official SDKs' short list: `HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`) and its
/// own `env:`. moniker's environment holds its tokens and every other server's secrets: none
/// of it reaches a server unless its config names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PassEnv {
    /// These variables, by name (`pass_env: [GITHUB_TOKEN]`); none by default.
    Names(Vec<String>),
    /// All of it (`pass_env: all`), as before moniker 0.2.
    All,
}

impl PassEnv {
    /// These and `other` together (the gateway's `pass_env` with a server's own).
    pub fn with(&self, other: &PassEnv) -> PassEnv {
        match (self, other) {
            (PassEnv::All, _) | (_, PassEnv::All) => PassEnv::All,
            (PassEnv::Names(a), PassEnv::Names(b)) => {
                let mut names = a.clone();
                names.extend(b.iter().filter(|n| !a.contains(n)).cloned());
                PassEnv::Names(names)
            }
        }
    }
}

impl Default for PassEnv {
    fn default() -> Self {
        Self::Names(Vec::new())
    }
}

/// TLS towards one remote server, besides the platform's trust store. Paths as written
/// (after `${VAR}` expansion); relative ones are relative to the config file's folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tls {
    /// PEM certificates of a private CA, trusted for this server.
    pub ca_file: Option<String>,
    /// PEM certificate chain and private key for mutual TLS: both or neither.
    pub client_cert: Option<String>,
    pub client_key: Option<String>,
}

/// How moniker identifies itself to a remote server's authorization server (OAuth 2.1).
/// Everything is optional: a server that answers 401 gets the authorization flow anyway,
/// with Dynamic Client Registration. `Debug` never shows the secret.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Auth {
    /// A pre-registered client.
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// A Client ID Metadata Document (an https URL), used as the `client_id` when the
    /// authorization server supports them.
    pub client_metadata_url: Option<String>,
    pub grant: Grant,
    /// The authorization server moniker trusts for this server (`auth.issuer`): discovery
    /// that leads anywhere else is refused. Without it, the issuer of the last login or token
    /// is trusted, and only a `moniker login` (a person) may move to another.
    pub issuer: Option<String>,
    /// A PEM private key (PKCS#8) for `private_key_jwt` client authentication.
    pub private_key: Option<String>,
    /// The scope to ask for, instead of the one the server names.
    pub scope: Option<String>,
    /// Each caller's own access token exchanged for one of this server's (RFC 8693), instead
    /// of one credential for everyone.
    pub exchange: Option<Exchange>,
    /// Each person signs in to the server's own authorization server (`per_person: true`):
    /// their calls go with their own tokens, kept per person.
    pub per_person: bool,
}

/// Token exchange (RFC 8693, `auth.exchange`): moniker exchanges the caller's access token at
/// the identity provider (`auth.issuer`, else `http.auth.issuer`) for one meant for this
/// server, with moniker's own client (`auth.client_id` and its secret or key), and calls the
/// server with it. A call that has no token to exchange, or whose exchange fails, is refused:
/// it never goes with another credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// The `resource` asked for (RFC 8707); the server's URL when unset.
    pub resource: Option<String>,
    /// The `audience` asked for: a name the identity provider knows the server by.
    pub audience: Option<String>,
    /// Names moniker as the actor: its own token (client credentials) goes as `actor_token`.
    pub actor: bool,
    /// The longest an exchanged token is used before it is exchanged again (its own lifetime
    /// and the caller's token's, when shorter, bound it too).
    pub cache: std::time::Duration,
}

impl Exchange {
    /// How long an exchanged token is used at most unless the config says (`cache`).
    pub const CACHE: std::time::Duration = std::time::Duration::from_secs(300);
}

/// The OAuth grant moniker uses for a server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Grant {
    /// A person logs in with a browser (`moniker login SERVER`).
    #[default]
    AuthorizationCode,
    /// moniker's own credentials, with no person: for gateways that run unattended.
    ClientCredentials,
}

impl Grant {
    pub const NAMES: &[&str] = &["authorization_code", "client_credentials"];

    pub fn name(self) -> &'static str {
        match self {
            Self::AuthorizationCode => "authorization_code",
            Self::ClientCredentials => "client_credentials",
        }
    }
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Auth")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| RedactedValue),
            )
            .field("client_metadata_url", &self.client_metadata_url)
            .field("grant", &self.grant)
            .field("issuer", &self.issuer)
            .field("private_key", &self.private_key)
            .field("scope", &self.scope)
            .field("exchange", &self.exchange)
            .field("per_person", &self.per_person)
            .finish()
    }
}

impl Transport {
    /// `stdio` or `http`, for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Stdio { .. } => "stdio",
            Self::Http { .. } => "http",
        }
    }
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stdio {
                command,
                args,
                env,
                pass_env,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &Redacted(env))
                .field("pass_env", pass_env)
                .field("cwd", cwd)
                .finish(),
            Self::Http {
                url,
                headers,
                tls,
                auth,
                forward,
            } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &Redacted(headers))
                .field("tls", tls)
                .field("auth", auth)
                .field("forward", forward)
                .finish(),
        }
    }
}

/// A map shown with its keys and `<redacted>` for every value.
struct Redacted<'a>(&'a IndexMap<String, String>);

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.keys().map(|k| (k, RedactedValue)))
            .finish()
    }
}

struct RedactedValue;

impl fmt::Debug for RedactedValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_env_and_header_values() {
        let stdio = ServerConfig {
            transport: Transport::Stdio {
                command: "npx".to_owned(),
                args: vec!["-y".to_owned()],
                env: IndexMap::from([("GITHUB_TOKEN".to_owned(), "ghp_secret123".to_owned())]),
                pass_env: PassEnv::default(),
                cwd: None,
            },
            sandbox: None,
            per_person: None,
            disabled: false,
            modern: false,
        };
        let shown = format!("{stdio:?} {stdio:#?}");
        assert!(!shown.contains("ghp_secret123"), "{shown}");
        assert!(
            shown.contains("GITHUB_TOKEN") && shown.contains("<redacted>"),
            "{shown}"
        );
        assert!(shown.contains("npx"), "{shown}");

        let http = Transport::Http {
            url: "http://127.0.0.1:9000/mcp".to_owned(),
            headers: IndexMap::from([("Authorization".to_owned(), "Bearer tok_456".to_owned())]),
            tls: Tls::default(),
            auth: Auth {
                client_id: Some("moniker".to_owned()),
                client_secret: Some("sec_789".to_owned()),
                ..Auth::default()
            },
            forward: IndexMap::new(),
        };
        let shown = format!("{http:?}");
        assert!(
            !shown.contains("tok_456") && !shown.contains("sec_789"),
            "{shown}"
        );
        assert!(shown.contains(r#""Authorization": <redacted>"#), "{shown}");
    }
}
