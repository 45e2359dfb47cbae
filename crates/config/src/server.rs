//! How to reach a server: spawn it (stdio) or connect to it (Streamable HTTP).

use std::fmt;

use indexmap::IndexMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    pub transport: Transport,
    /// Configured but not started; its naming rules still apply.
    pub disabled: bool,
}

/// `Debug` prints the names of environment variables and headers but never their values:
/// they hold tokens, and `Debug` output ends up in logs.
#[derive(Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process that speaks MCP on its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: IndexMap<String, String>,
        cwd: Option<String>,
    },
    /// A Streamable HTTP endpoint (`type: sse` configs land here too).
    Http {
        url: String,
        headers: IndexMap<String, String>,
    },
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
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &Redacted(env))
                .field("cwd", cwd)
                .finish(),
            Self::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &Redacted(headers))
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
                cwd: None,
            },
            disabled: false,
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
        };
        let shown = format!("{http:?}");
        assert!(!shown.contains("tok_456"), "{shown}");
        assert!(shown.contains(r#""Authorization": <redacted>"#), "{shown}");
    }
}
