//! The typed rules the naming pipeline applies. The config crate parses them from YAML; tests
//! and embedders may build them directly.

use std::collections::BTreeMap;

use crate::names::{Name, Profile, ServerId, Tag};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rules {
    pub naming: Naming,
    /// Per configured server: what naming needs to know about it.
    pub servers: BTreeMap<ServerId, ServerRules>,
    /// Tags for every tool and prompt of a server *name* (after `server__name` parsing, so
    /// `github-custom`, not `github_custom`).
    pub server_tags: BTreeMap<String, Vec<Tag>>,
    /// Tool overrides, keyed as written: `<origin name>` or `<server id>/<origin name>`.
    pub tools: BTreeMap<String, Override>,
    /// Prompt overrides, same shape as `tools`.
    pub prompts: BTreeMap<String, Override>,
    /// Action tools, by their exposed name: each folds several exposed tools into one.
    pub actions: BTreeMap<String, ActionRule>,
    /// The `toolsets` section: static toolsets, and the settings of run-time ones.
    pub toolsets: crate::toolsets::Toolsets,
    /// The day deprecation schedules are applied on (`None`: none is applied).
    pub today: Option<crate::deprecation::Date>,
    /// How clients discover tools when no toolset says otherwise (`discovery`).
    pub discovery: crate::discovery::Discovery,
}

/// An action tool: one tool with an `action` parameter that dispatches to member tools.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ActionRule {
    /// Replaces the generated summary line; the list of actions is always appended.
    pub description: Option<String>,
    /// Action (`^[a-z][a-z0-9_]*$`) to member, by the member's exposed name, in config order.
    pub tools: indexmap::IndexMap<String, Name>,
    pub legacy: Legacy,
    /// When the members' legacy names stop resolving.
    pub legacy_deprecated: Option<crate::deprecation::Deprecation>,
    pub aliases: Vec<AliasRule>,
    pub tags: Vec<Tag>,
}

/// What becomes of the members' own names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Legacy {
    /// Callable, not listed: no existing client breaks.
    #[default]
    Hidden,
    /// Listed too, marked deprecated.
    Listed,
    /// Gone: calls by the old names are unknown.
    Off,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Naming {
    /// Stripped from origin names, first match only.
    pub strip_prefixes: Vec<String>,
    /// Splits `server__name`; empty disables the split.
    pub split: String,
    /// Between a server prefix and the base name.
    pub separator: String,
    pub profile: Profile,
}

impl Default for Naming {
    fn default() -> Self {
        Self {
            strip_prefixes: Vec::new(),
            split: "__".to_owned(),
            separator: "_".to_owned(),
            profile: Profile::default(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerRules {
    pub tags: Vec<Tag>,
    /// The text put before every auto name of this server (`prefix: true` means the server id).
    pub prefix: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Override {
    /// Final: no stripping, splitting or prefixing applies to it.
    pub name: Option<Name>,
    pub tags: Vec<Tag>,
    pub aliases: Vec<AliasRule>,
    pub description: Option<String>,
    /// Takes the tool out of the surface: neither listed nor callable.
    pub hidden: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasRule {
    pub name: Name,
    /// Callable but not listed.
    pub hidden: bool,
    /// Its schedule, when it is on its way out.
    pub deprecated: Option<crate::deprecation::Deprecation>,
}

/// What the pipeline names: tools and prompts go through the same code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Tool,
    Prompt,
}

impl Kind {
    pub fn section(self) -> &'static str {
        match self {
            Self::Tool => "tools",
            Self::Prompt => "prompts",
        }
    }

    pub fn noun(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Prompt => "prompt",
        }
    }
}

impl Rules {
    pub fn overrides(&self, kind: Kind) -> &BTreeMap<String, Override> {
        match kind {
            Kind::Tool => &self.tools,
            Kind::Prompt => &self.prompts,
        }
    }
}

/// One step of a [`path`] into the config.
#[derive(Debug, Clone, Copy)]
pub enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

/// The dotted path of a config entry, as diagnostics print it and as the config crate keys its
/// spans: `tools."bridge/get.info".aliases[0]`. Keys that are not plain words are quoted.
pub fn path(segs: &[Seg<'_>]) -> String {
    let mut out = String::new();
    for seg in segs {
        match seg {
            Seg::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                let plain = !key.is_empty()
                    && key
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                if plain {
                    out.push_str(key);
                } else {
                    out.push('"');
                    for c in key.chars() {
                        if c == '"' || c == '\\' {
                            out.push('\\');
                        }
                        out.push(c);
                    }
                    out.push('"');
                }
            }
            Seg::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_quote_keys_that_are_not_words() {
        use Seg::*;
        assert_eq!(
            path(&[Key("servers"), Key("github"), Key("args")]),
            "servers.github.args"
        );
        assert_eq!(
            path(&[
                Key("tools"),
                Key("bridge/get.info"),
                Key("aliases"),
                Index(0)
            ]),
            "tools.\"bridge/get.info\".aliases[0]"
        );
        assert_eq!(path(&[Key("a\"b")]), "\"a\\\"b\"");
    }
}
