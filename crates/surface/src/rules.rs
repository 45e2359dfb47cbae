//! The typed rules the naming pipeline applies. The config crate parses them from YAML; tests
//! and embedders may build them directly.

use std::collections::BTreeMap;

use crate::names::{Name, Profile, ServerId, Tag};
use crate::tag_expr::TagExpr;
use crate::vocab::Kind;

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
    pub toolsets: Toolsets,
    /// The day deprecation schedules are applied on (`None`: none is applied).
    pub today: Option<crate::schedule::Date>,
    /// How clients discover tools when no toolset says otherwise (`discovery`).
    pub discovery: Discovery,
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
    pub legacy_deprecated: Option<crate::schedule::Deprecation>,
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
    /// Rules for the tool's parameters, by the server's name of each.
    pub params: BTreeMap<String, crate::params::ParamRule>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasRule {
    pub name: Name,
    /// Callable but not listed.
    pub hidden: bool,
    /// Its schedule, when it is on its way out.
    pub deprecated: Option<crate::schedule::Deprecation>,
}

impl Rules {
    pub fn overrides(&self, kind: Kind) -> &BTreeMap<String, Override> {
        match kind {
            Kind::Tool => &self.tools,
            Kind::Prompt => &self.prompts,
        }
    }
}

/// Whether an override key or a toolset reference is a glob: `*` stands for any run of
/// characters, `?` for one.
pub fn is_glob(text: &str) -> bool {
    text.contains(['*', '?'])
}

/// Whether `text` matches the glob `pattern` (see [`is_glob`]).
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    wildmatch::WildMatch::new(pattern).matches(text)
}

/// The glob among `keys` that applies to the origin item `name` of `server`, when no exact
/// key does: a qualified glob (`github/*_pr`) is matched against `server/name`, a bare one
/// (`write_*`) against `name`; of several, the most specific (the longest; the first in key
/// order of equal length).
pub fn glob_key<'k>(
    keys: impl IntoIterator<Item = &'k str>,
    server: &str,
    name: &str,
) -> Option<&'k str> {
    let mut best: Option<&str> = None;
    for key in keys.into_iter().filter(|k| is_glob(k)) {
        let matches = match key.split_once('/') {
            Some((s, pattern)) => s == server && glob_matches(pattern, name),
            None => glob_matches(key, name),
        };
        if matches && best.is_none_or(|b| key.len() > b.len()) {
            best = Some(key);
        }
    }
    best
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Every tool is listed.
    #[default]
    List,
    /// The pinned tools, `search_tools` and `call_tool` are listed.
    Search,
    /// Every tool is listed, with `_meta` hints for clients that defer loading.
    Hints,
}

impl Mode {
    pub const NAMES: [&'static str; 3] = ["list", "search", "hints"];

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "list" => Some(Self::List),
            "search" => Some(Self::Search),
            "hints" => Some(Self::Hints),
            _ => None,
        }
    }
}

/// The `discovery` setting of the gateway or of a toolset.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Discovery {
    pub mode: Mode,
    /// Tools always listed, by exposed name or alias.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pin: Vec<String>,
    /// Tools always listed, by tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pin_tags: Option<TagExpr>,
}

/// The toolsets of the config's `toolsets` section (its run-time settings, `manage` and
/// `store`, are the config crate's).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Toolsets {
    /// The static toolsets, by name.
    pub sets: BTreeMap<String, ToolsetRule>,
}

/// One toolset, as written in the config or built by a client.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ToolsetRule {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Exposed names or aliases of tools.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Exposed names or aliases of prompts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prompts: Vec<String>,
    /// Every listed tool and prompt whose tags match is in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<TagExpr>,
    /// Other toolsets whose tools, prompts and aliases this one has too, recursively.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    /// A tool, by its name or an alias as written, to its alias in this toolset. A tool that
    /// is given an alias is in the toolset.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub aliases: BTreeMap<String, String>,
    /// The resources reachable through the toolset: by server id (all of its resources), or
    /// by URI prefix (an entry with a `:`, `file:///srv/docs/`). None: no resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// How clients of the toolset discover its tools; none: as the gateway says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discovery: Option<Discovery>,
    /// Parameter rules of this toolset's own, by tool (its name or an alias as written), on top
    /// of the tool's: keyed by the parameter names the tool is listed with. The config's only:
    /// a toolset a client builds has none, and none is stored.
    #[serde(skip)]
    pub params: BTreeMap<String, BTreeMap<String, crate::params::ParamRule>>,
}
