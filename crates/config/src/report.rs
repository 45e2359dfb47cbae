//! Config errors: each with a code, the dotted path, its place in the file and a hint; all of
//! a file's errors are reported together.

use std::fmt;

use crate::source::{Span, excerpt};

/// The stable codes of config errors.
pub mod codes {
    /// The text is not YAML (or JSON).
    pub const SYNTAX: &str = "config::syntax";
    /// A key appears twice in one map.
    pub const DUPLICATE_KEY: &str = "config::duplicate_key";
    /// A key moniker does not know.
    pub const UNKNOWN_KEY: &str = "config::unknown_key";
    /// A required key is absent.
    pub const MISSING_KEY: &str = "config::missing_key";
    /// Two keys that mean the same thing (`servers` and `mcpServers`).
    pub const CONFLICT: &str = "config::conflict";
    /// A value of the wrong type: a map where a list was expected.
    pub const INVALID_TYPE: &str = "config::invalid_type";
    /// A value of the right type that is not allowed (a bad duration, an unknown profile).
    pub const INVALID_VALUE: &str = "config::invalid_value";
    /// A tag that breaks [`moniker_surface::names::TAG_RULE`].
    pub const INVALID_TAG: &str = "config::invalid_tag";
    /// An override name, an alias or a prefix that is not a valid name.
    pub const INVALID_NAME: &str = "config::invalid_name";
    /// A server key that is not a valid server id.
    pub const INVALID_SERVER_ID: &str = "config::invalid_server_id";
    /// An override key `<server>/<name>` whose server is not configured.
    pub const UNKNOWN_SERVER: &str = "config::unknown_server";
    /// A server that is neither clearly stdio (`command`) nor HTTP (`url`).
    pub const TRANSPORT: &str = "config::transport";
    /// An action of an action tool (a key of `actions.<tool>.tools`) that does not match
    /// `^[a-z][a-z0-9_]*$`.
    pub const INVALID_ACTION: &str = "config::invalid_action";
    /// A tool that is the member of two actions (in one action tool or in two).
    pub const DUPLICATE_MEMBER: &str = "config::duplicate_member";
    /// A key of `toolsets` that is not a valid toolset name
    /// ([`moniker_surface::toolsets::NAME_RULE`]).
    pub const INVALID_TOOLSET: &str = "config::invalid_toolset";
    /// A toolset's `tags` expression that does not parse.
    pub const INVALID_TAGS: &str = "config::invalid_tags";
    /// A toolset `include` that names no toolset of the config.
    pub const UNKNOWN_TOOLSET: &str = "config::unknown_toolset";
    /// A toolset that includes itself, directly or through others.
    pub const INCLUDE_CYCLE: &str = "config::include_cycle";
    /// `${VAR}` expansion failed.
    pub const ENV: &str = "config::env";
}

/// One problem in the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// A stable code from [`codes`].
    pub code: &'static str,
    /// Lowercase, no trailing period, the user's value in backticks.
    pub message: String,
    /// The dotted path of the entry ([`moniker_surface::vocab::path`]); empty for the whole file.
    pub path: String,
    /// The offending key or value.
    pub span: Option<Span>,
    /// What to do, when known: a did-you-mean or the accepted values.
    pub help: Option<String>,
}

impl ConfigError {
    pub fn new(code: &'static str, message: impl Into<String>, path: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            path: path.into(),
            span: None,
            help: None,
        }
    }

    pub fn with_span(mut self, span: Span) -> Self {
        self.span = Some(span);
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

/// One line, for logs and tests; [`ConfigReport`] shows the source too.
impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error[{}]: {}", self.code, self.message)?;
        if !self.path.is_empty() {
            write!(f, " (at `{}`)", self.path)?;
        }
        if let Some(span) = self.span {
            write!(f, " line {} column {}", span.line, span.column)?;
        }
        if let Some(help) = &self.help {
            write!(f, "; help: {help}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// Every error found in one config file, with the text to show them in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigReport {
    pub file_name: String,
    pub text: String,
    pub errors: Vec<ConfigError>,
}

impl ConfigReport {
    pub(crate) fn new(file_name: &str, text: &str, mut errors: Vec<ConfigError>) -> Self {
        // In file order, whatever order the sections were checked in.
        errors.sort_by_key(|e| e.span.map_or(usize::MAX, |s| s.offset));
        Self {
            file_name: file_name.to_owned(),
            text: text.to_owned(),
            errors,
        }
    }
}

/// rustc-style: each error with the line it is on, then a count.
impl fmt::Display for ConfigReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for error in &self.errors {
            writeln!(f, "error[{}]: {}", error.code, error.message)?;
            let pad = match error.span {
                Some(span) => {
                    writeln!(
                        f,
                        "{}",
                        excerpt(&self.file_name, &self.text, span, &error.path)
                    )?;
                    " ".repeat(span.line.to_string().len())
                }
                None => {
                    writeln!(f, " --> {}", self.file_name)?;
                    if !error.path.is_empty() {
                        writeln!(f, "  = at: {}", error.path)?;
                    }
                    String::new()
                }
            };
            if let Some(help) = &error.help {
                let indent = format!("\n{pad}   ");
                writeln!(f, "{pad} = help: {}", help.replace('\n', &indent))?;
            }
            writeln!(f)?;
        }
        let n = self.errors.len();
        let s = if n == 1 { "" } else { "s" };
        write!(f, "{n} error{s} in `{}`", self.file_name)
    }
}

impl std::error::Error for ConfigReport {}
