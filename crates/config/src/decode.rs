//! The spanned YAML tree -> typed config, by hand, so that every error is found (not only the
//! first), each with its path, its place and a hint, and so that the place of every entry is
//! recorded for diagnostics found later.

use std::collections::{BTreeMap, HashMap};

use indexmap::IndexMap;
use moniker_surface::diagnostic::did_you_mean;
use moniker_surface::rules::{Seg, path};
use moniker_surface::toolsets::{
    ALIAS_RULE, NAME_RULE, RESERVED, TagExpr, ToolsetRule, Toolsets, alias_fix, valid_alias,
    valid_name,
};
use moniker_surface::{
    ActionRule, AliasRule, Legacy, Name, Naming, Override, Profile, ProfileKind, Rules, ServerId,
    ServerRules, Tag,
};

use crate::gateway::{DURATION_HELP, GatewaySettings, parse_duration, seconds};
use crate::report::{ConfigError, codes};
use crate::server::{ServerConfig, Transport};
use crate::source::{Span, Spans};
use crate::tree::{Node, ScalarKind, Value, shorten};

const TOP_KEYS: &[&str] = &[
    "servers",
    "mcpServers",
    "naming",
    "server_tags",
    "tools",
    "prompts",
    "actions",
    "toolsets",
    "gateway",
    "http",
];
const HTTP_KEYS: &[&str] = &["tokens", "allowed_origins", "allowed_hosts", "max_body"];
const TOKEN_KEYS: &[&str] = &["token", "toolset"];
const SERVER_KEYS: &[&str] = &[
    "command", "args", "env", "cwd", "url", "headers", "tags", "prefix", "type", "disabled",
];
const NAMING_KEYS: &[&str] = &["strip_prefixes", "split", "separator", "profile"];
const PROFILE_KEYS: &[&str] = &["base", "prefix_budget"];
const OVERRIDE_KEYS: &[&str] = &["name", "tags", "aliases", "description", "hidden"];
const ALIAS_KEYS: &[&str] = &["name", "hidden"];
const ACTION_KEYS: &[&str] = &["description", "tools", "legacy", "aliases", "tags"];
const TOOLSET_KEYS: &[&str] = &[
    "description",
    "tools",
    "prompts",
    "tags",
    "include",
    "aliases",
];
const TAGS_HELP: &str = "write a list of tags (any of them), or an expression of tags with `and`, `or`, `not` and parentheses: `git and (github or gitlab) and not deprecated`";
const LEGACY_MODES: &[&str] = &["hidden", "listed", "off"];
/// What an action (a key of `actions.<tool>.tools`) must look like.
pub(crate) const ACTION_RULE: &str =
    "must match `^[a-z][a-z0-9_]*$` (lowercase letters, digits and `_`, starting with a letter)";
const GATEWAY_KEYS: &[&str] = &["call_timeout", "start_timeout", "restart", "page_size"];
const RESTART_KEYS: &[&str] = &["initial_delay", "max_delay", "max_attempts"];
const TRANSPORT_TYPES: &[&str] = &["stdio", "http", "streamable-http", "sse"];
/// Server fields that only mean something for one transport.
const STDIO_ONLY: &[&str] = &["args", "env", "cwd"];
const HTTP_ONLY: &[&str] = &["headers"];

/// What the decoder made of the tree; complete only when no error was found.
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    pub servers: IndexMap<ServerId, ServerConfig>,
    pub gateway: GatewaySettings,
    pub http: crate::http::HttpConfig,
    pub rules: Rules,
    pub spans: HashMap<String, Spans>,
    pub servers_key: String,
}

/// `text` is what `root` was parsed from: errors inside a string (a tag expression) point
/// into it when the string is written as is.
pub(crate) fn decode(root: Option<&Node>, text: &str) -> (Decoded, Vec<ConfigError>) {
    let mut cx = Cx {
        text,
        ..Cx::default()
    };
    let mut out = Decoded {
        servers_key: "servers".to_owned(),
        ..Decoded::default()
    };
    if let Some(root) = root {
        cx.top(root, &mut out);
    }
    out.spans = cx.spans;
    (out, cx.errors)
}

/// A value and the key it is under (none for list items and the document).
#[derive(Clone, Copy)]
struct Slot<'n> {
    node: &'n Node,
    key: Option<Span>,
}

impl Slot<'_> {
    /// Where an error about this value points: the value when it starts where it is written,
    /// else (a block collection, or nothing at all) its key.
    fn point(&self) -> Span {
        let empty = self.node.is_null() && self.node.span.len == 0;
        match self.key {
            Some(key) if !self.node.inline || empty => key,
            _ => self.node.span,
        }
    }

    fn scalar(&self) -> Option<(&str, ScalarKind)> {
        match &self.node.value {
            Value::Scalar(s) => Some((s.text.as_str(), s.kind)),
            _ => None,
        }
    }
}

fn join<'a>(p: &[Seg<'a>], seg: Seg<'a>) -> Vec<Seg<'a>> {
    let mut out = Vec::with_capacity(p.len() + 1);
    out.extend_from_slice(p);
    out.push(seg);
    out
}

fn list(keys: &[&str]) -> String {
    keys.iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[derive(Default)]
struct Cx<'t> {
    text: &'t str,
    errors: Vec<ConfigError>,
    spans: HashMap<String, Spans>,
}

/// The fields of one map, looked up by name.
struct Fields<'n> {
    entries: Vec<(&'n str, Slot<'n>)>,
    /// Known keys offered as a did-you-mean for unknown ones: the user meant to write them.
    meant: Vec<String>,
}

impl<'n> Fields<'n> {
    fn new() -> Self {
        Self {
            entries: Vec::new(),
            meant: Vec::new(),
        }
    }

    fn get(&self, name: &str) -> Option<Slot<'n>> {
        self.entries
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, s)| *s)
    }

    fn meant(&self, name: &str) -> bool {
        self.meant.iter().any(|m| m == name)
    }

    fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }
}

impl Cx<'_> {
    fn error(
        &mut self,
        code: &'static str,
        message: impl Into<String>,
        p: &[Seg<'_>],
        span: Span,
        help: Option<String>,
    ) {
        let mut error = ConfigError::new(code, message, path(p)).with_span(span);
        error.help = help;
        self.errors.push(error);
    }

    fn type_error(&mut self, expected: &str, p: &[Seg<'_>], slot: Slot<'_>) {
        let found = slot.node.describe();
        self.error(
            codes::INVALID_TYPE,
            format!("expected {expected}, found {found}"),
            p,
            slot.point(),
            None,
        );
    }

    fn record(&mut self, p: &[Seg<'_>], slot: Slot<'_>) {
        let spans = Spans {
            key: slot.key,
            value: slot.node.span,
            point: slot.point(),
        };
        // Diagnostics from the naming core say `servers.<id>`, whichever key the file used.
        if let Some(Seg::Key("mcpServers")) = p.first() {
            let mut alias = p.to_vec();
            alias[0] = Seg::Key("servers");
            self.spans.entry(path(&alias)).or_insert(spans);
        }
        self.spans.insert(path(p), spans);
    }

    /// The entries of a map in file order, each recorded; reports non-string keys, duplicate
    /// keys and (when `known` is given) unknown keys, and leaves them out. Nothing (`key:`)
    /// is an empty map.
    fn fields<'n>(
        &mut self,
        slot: Slot<'n>,
        p: &[Seg<'n>],
        known: Option<&[&str]>,
        expected: &str,
    ) -> Fields<'n> {
        let mut out = Fields::new();
        let entries = match &slot.node.value {
            Value::Map(entries) => entries,
            _ if slot.node.is_null() => return out,
            _ => {
                self.type_error(expected, p, slot);
                return out;
            }
        };
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for entry in entries {
            let Some(key) = entry.key.as_deref() else {
                self.error(
                    codes::INVALID_TYPE,
                    format!("expected a string key, found {}", entry.key_kind),
                    p,
                    entry.key_span,
                    None,
                );
                continue;
            };
            let child = join(p, Seg::Key(key));
            if let Some(line) = seen.get(key) {
                self.error(
                    codes::DUPLICATE_KEY,
                    format!("duplicate key `{}`", shorten(key)),
                    &child,
                    entry.key_span,
                    Some(format!(
                        "the first `{}` is on line {line}: keep one",
                        shorten(key)
                    )),
                );
                continue;
            }
            seen.insert(key, entry.key_span.line);
            if let Some(known) = known {
                if !known.contains(&key) {
                    let help = match did_you_mean(key, known.iter().copied()) {
                        Some(close) => {
                            out.meant.push(close.to_owned());
                            format!("did you mean `{close}`?")
                        }
                        None => format!("expected one of {}", list(known)),
                    };
                    self.error(
                        codes::UNKNOWN_KEY,
                        format!("unknown key `{}`", shorten(key)),
                        &child,
                        entry.key_span,
                        Some(help),
                    );
                    continue;
                }
            }
            let value = Slot {
                node: &entry.value,
                key: Some(entry.key_span),
            };
            self.record(&child, value);
            out.entries.push((key, value));
        }
        out
    }

    /// The items of a list, each recorded. Nothing is an empty list.
    fn items<'n>(&mut self, slot: Slot<'n>, p: &[Seg<'n>], expected: &str) -> Vec<Slot<'n>> {
        match &slot.node.value {
            Value::Seq(items) => items
                .iter()
                .enumerate()
                .map(|(i, node)| {
                    let item = Slot { node, key: None };
                    self.record(&join(p, Seg::Index(i)), item);
                    item
                })
                .collect(),
            _ if slot.node.is_null() => Vec::new(),
            _ => {
                self.type_error(expected, p, slot);
                Vec::new()
            }
        }
    }

    fn string(&mut self, p: &[Seg<'_>], slot: Slot<'_>) -> Option<String> {
        match slot.scalar() {
            Some((text, ScalarKind::Str)) => Some(text.to_owned()),
            _ => {
                self.type_error("a string", p, slot);
                None
            }
        }
    }

    /// A string, or a number or boolean taken as written: `args: [--port, 8080]` and
    /// `env: { DEBUG: true }` mean the text.
    fn text(&mut self, p: &[Seg<'_>], slot: Slot<'_>) -> Option<String> {
        match slot.scalar() {
            Some((_, ScalarKind::Null)) | None => {
                self.type_error("a string", p, slot);
                None
            }
            Some((text, _)) => Some(text.to_owned()),
        }
    }

    fn boolean(&mut self, p: &[Seg<'_>], slot: Slot<'_>) -> Option<bool> {
        match slot.scalar() {
            Some((_, ScalarKind::Bool(b))) => Some(b),
            _ => {
                self.type_error("`true` or `false`", p, slot);
                None
            }
        }
    }

    fn strings<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>, coerce: bool) -> Vec<String> {
        let items = self.items(slot, p, "a list of strings");
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            let ip = join(p, Seg::Index(i));
            let value = if coerce {
                self.text(&ip, item)
            } else {
                self.string(&ip, item)
            };
            out.extend(value);
        }
        out
    }

    /// A map of names to text: `env`, `headers`.
    fn text_map<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> IndexMap<String, String> {
        let fields = self.fields(slot, p, None, "a map of names to strings");
        let mut out = IndexMap::new();
        for (key, value) in fields.entries {
            if let Some(text) = self.text(&join(p, Seg::Key(key)), value) {
                out.insert(key.to_owned(), text);
            }
        }
        out
    }

    fn tags<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> Vec<Tag> {
        let items = self.items(slot, p, "a list of tags");
        let mut out = Vec::new();
        for (i, item) in items.into_iter().enumerate() {
            let ip = join(p, Seg::Index(i));
            let Some(text) = self.string(&ip, item) else {
                continue;
            };
            match text.parse::<Tag>() {
                Ok(tag) => out.push(tag),
                Err(e) => {
                    let help = tag_fix(&text).map(|t| format!("did you mean `{t}`?"));
                    self.error(codes::INVALID_TAG, e.to_string(), &ip, item.point(), help);
                }
            }
        }
        out
    }

    fn top(&mut self, root: &Node, out: &mut Decoded) {
        let slot = Slot {
            node: root,
            key: None,
        };
        let fields = self.fields(slot, &[], Some(TOP_KEYS), "a map of sections");
        let mut servers_section: Option<&str> = None;
        let mut server_rules = BTreeMap::new();
        for (key, slot) in &fields.entries {
            if !matches!(*key, "servers" | "mcpServers") {
                continue;
            }
            match servers_section {
                None => {
                    servers_section = Some(*key);
                    out.servers_key = (*key).to_owned();
                }
                Some(first) => self.error(
                    codes::CONFLICT,
                    format!("`{key}` and `{first}` are the same section"),
                    &[Seg::Key(key)],
                    slot.key.unwrap_or(slot.node.span),
                    Some(format!("move these servers into `{first}`")),
                ),
            }
            self.servers(key, *slot, &mut out.servers, &mut server_rules);
        }
        // Every syntactically valid server key, whether or not the server itself is valid: an
        // override naming a server with a mistake in its body is not an unknown server too.
        let ids: Vec<&str> = fields
            .entries
            .iter()
            .filter(|(k, _)| matches!(*k, "servers" | "mcpServers"))
            .filter_map(|(_, s)| match &s.node.value {
                Value::Map(entries) => Some(entries),
                _ => None,
            })
            .flatten()
            .filter_map(|e| e.key.as_deref())
            .filter(|k| k.parse::<ServerId>().is_ok())
            .collect();

        out.rules.servers = server_rules;
        for (key, slot) in &fields.entries {
            let p = [Seg::Key(key)];
            match *key {
                "naming" => out.rules.naming = self.naming(&p, *slot),
                "server_tags" => out.rules.server_tags = self.server_tags(&p, *slot),
                "tools" => out.rules.tools = self.overrides(&p, *slot, &ids),
                "prompts" => out.rules.prompts = self.overrides(&p, *slot, &ids),
                "actions" => out.rules.actions = self.actions(&p, *slot),
                "toolsets" => out.rules.toolsets = self.toolsets(&p, *slot),
                "gateway" => out.gateway = self.gateway(&p, *slot),
                "http" => out.http = self.http(&p, *slot),
                _ => {}
            }
        }
    }

    fn servers<'n>(
        &mut self,
        section: &'n str,
        slot: Slot<'n>,
        servers: &mut IndexMap<ServerId, ServerConfig>,
        rules: &mut BTreeMap<ServerId, ServerRules>,
    ) {
        let p = [Seg::Key(section)];
        let fields = self.fields(slot, &p, None, "a map of server ids to servers");
        for (key, server) in fields.entries {
            let sp = join(&p, Seg::Key(key));
            let id = match key.parse::<ServerId>() {
                Ok(id) => Some(id),
                Err(e) => {
                    let span = server.key.unwrap_or(server.node.span);
                    self.error(codes::INVALID_SERVER_ID, e.to_string(), &sp, span, None);
                    None
                }
            };
            let decoded = self.server(&sp, server, key);
            if let (Some(id), Some((config, server_rules))) = (id, decoded) {
                if !servers.contains_key(&id) {
                    rules.insert(id.clone(), server_rules);
                    servers.insert(id, config);
                }
            }
        }
    }

    fn server<'n>(
        &mut self,
        sp: &[Seg<'n>],
        slot: Slot<'n>,
        id: &str,
    ) -> Option<(ServerConfig, ServerRules)> {
        let fields = self.fields(slot, sp, Some(SERVER_KEYS), "a map of server settings");
        let field = |name: &'static str| join(sp, Seg::Key(name));
        let mut ok = true;

        let command = fields.get("command").and_then(|s| {
            let command = self.string(&field("command"), s)?;
            if command.trim().is_empty() {
                self.error(
                    codes::INVALID_VALUE,
                    "`command` is empty",
                    &field("command"),
                    s.point(),
                    Some("name the program to run: `command: npx`".to_owned()),
                );
                return None;
            }
            Some(command)
        });
        let args = fields
            .get("args")
            .map(|s| self.strings(&field("args"), s, true))
            .unwrap_or_default();
        let env = fields
            .get("env")
            .map(|s| self.text_map(&field("env"), s))
            .unwrap_or_default();
        let cwd = fields
            .get("cwd")
            .filter(|s| !s.node.is_null())
            .and_then(|s| self.string(&field("cwd"), s));
        let url = fields.get("url").and_then(|s| {
            let url = self.string(&field("url"), s)?;
            let http = url.starts_with("http://") || url.starts_with("https://");
            if !http && !url.contains("${") {
                self.error(
                    codes::INVALID_VALUE,
                    format!("`{}` is not an http or https url", shorten(&url)),
                    &field("url"),
                    s.point(),
                    Some("write the full address: `url: http://127.0.0.1:9000/mcp`".to_owned()),
                );
                return None;
            }
            Some(url)
        });
        let headers = fields
            .get("headers")
            .map(|s| self.text_map(&field("headers"), s))
            .unwrap_or_default();
        let tags = fields
            .get("tags")
            .map(|s| self.tags(&field("tags"), s))
            .unwrap_or_default();
        let prefix = fields.get("prefix").and_then(|s| match s.scalar() {
            Some((_, ScalarKind::Bool(true))) => Some(id.to_owned()),
            Some((_, ScalarKind::Bool(false) | ScalarKind::Null)) => None,
            Some((text, ScalarKind::Str)) => match text.parse::<Name>() {
                Ok(_) => Some(text.to_owned()),
                Err(e) => {
                    self.error(
                        codes::INVALID_NAME,
                        format!("prefix `{}` {}", shorten(text), e.rule),
                        &field("prefix"),
                        s.point(),
                        None,
                    );
                    None
                }
            },
            _ => {
                self.type_error("`true`, `false` or a prefix text", &field("prefix"), s);
                None
            }
        });
        let kind = fields.get("type").and_then(|s| {
            let kind = self.string(&field("type"), s)?;
            if TRANSPORT_TYPES.contains(&kind.as_str()) {
                return Some(kind);
            }
            let help = match did_you_mean(&kind, TRANSPORT_TYPES.iter().copied()) {
                Some(close) => format!("did you mean `{close}`?"),
                None => format!("use one of {}", list(TRANSPORT_TYPES)),
            };
            self.error(
                codes::INVALID_VALUE,
                format!("unknown server type `{}`", shorten(&kind)),
                &field("type"),
                s.point(),
                Some(help),
            );
            None
        });
        let disabled = fields
            .get("disabled")
            .and_then(|s| self.boolean(&field("disabled"), s))
            .unwrap_or(false);

        // Which transport: the presence of `command` or `url` decides; `type`, when given,
        // must agree. Fields of the other transport are mistakes, not noise.
        let at = slot.key.unwrap_or(slot.node.span);
        let (has_command, has_url) = (fields.has("command"), fields.has("url"));
        let stdio = match (has_command, has_url) {
            (true, true) => {
                self.error(
                    codes::TRANSPORT,
                    format!("server `{id}` has both `command` and `url`"),
                    sp,
                    at,
                    Some(
                        "keep `command` to spawn a stdio server, or `url` to connect to an HTTP server"
                            .to_owned(),
                    ),
                );
                return None;
            }
            // `comand: npx` was reported as unknown with a did-you-mean: that is the error.
            (false, false) if fields.meant("command") || fields.meant("url") => return None,
            (false, false) => {
                let message = match kind.as_deref() {
                    Some("stdio") => format!("server `{id}` has `type: stdio` but no `command`"),
                    Some(k) => format!("server `{id}` has `type: {k}` but no `url`"),
                    None => format!("server `{id}` has neither `command` nor `url`"),
                };
                self.error(
                    codes::TRANSPORT,
                    message,
                    sp,
                    at,
                    Some(
                        "add `command: <program>` to spawn a stdio server, or `url: <address>` to connect to a Streamable HTTP server"
                            .to_owned(),
                    ),
                );
                return None;
            }
            (stdio, _) => stdio,
        };
        if let (Some(kind), Some(type_slot)) = (kind.as_deref(), fields.get("type")) {
            if (kind == "stdio") != stdio {
                let (has, needs) = if stdio {
                    ("`command`", "`url`")
                } else {
                    ("`url`", "`command`")
                };
                self.error(
                    codes::TRANSPORT,
                    format!("server `{id}` has `type: {kind}` and a {has}"),
                    &field("type"),
                    type_slot.point(),
                    Some(format!(
                        "`type: {kind}` needs {needs}; remove `type` or fix it"
                    )),
                );
                ok = false;
            }
        }
        let (foreign, owner, other) = if stdio {
            (HTTP_ONLY, "HTTP servers (with `url`)", "`command`")
        } else {
            (STDIO_ONLY, "stdio servers (with `command`)", "`url`")
        };
        for name in foreign {
            if let Some(s) = fields.get(name) {
                self.error(
                    codes::TRANSPORT,
                    format!("`{name}` applies only to {owner}, and server `{id}` has {other}"),
                    &join(sp, Seg::Key(name)),
                    s.key.unwrap_or(s.node.span),
                    Some(format!("remove `{name}`")),
                );
                ok = false;
            }
        }

        let transport = if stdio {
            Transport::Stdio {
                command: command?,
                args,
                env,
                cwd,
            }
        } else {
            Transport::Http { url: url?, headers }
        };
        ok.then_some((
            ServerConfig {
                transport,
                disabled,
            },
            ServerRules { tags, prefix },
        ))
    }

    fn naming<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> Naming {
        let fields = self.fields(slot, p, Some(NAMING_KEYS), "a map of naming settings");
        let mut naming = Naming::default();
        let field = |name: &'static str| join(p, Seg::Key(name));
        if let Some(s) = fields.get("strip_prefixes") {
            naming.strip_prefixes = self.strings(&field("strip_prefixes"), s, false);
        }
        if let Some(split) = fields
            .get("split")
            .and_then(|s| self.string(&field("split"), s))
        {
            naming.split = split;
        }
        if let Some(sep) = fields
            .get("separator")
            .and_then(|s| self.string(&field("separator"), s))
        {
            naming.separator = sep;
        }
        if let Some(profile) = fields
            .get("profile")
            .and_then(|s| self.profile(&field("profile"), s))
        {
            naming.profile = profile;
        }
        naming
    }

    fn profile_kind(&mut self, p: &[Seg<'_>], slot: Slot<'_>) -> Option<ProfileKind> {
        let text = self.string(p, slot)?;
        match text.parse::<ProfileKind>() {
            Ok(kind) => Some(kind),
            Err(e) => {
                let kinds = [ProfileKind::Portable.as_str(), ProfileKind::Spec.as_str()];
                let help = did_you_mean(&text, kinds).map(|k| format!("did you mean `{k}`?"));
                self.error(codes::INVALID_VALUE, e.to_string(), p, slot.point(), help);
                None
            }
        }
    }

    fn profile<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> Option<Profile> {
        match &slot.node.value {
            Value::Scalar(s) if s.kind == ScalarKind::Null => None,
            Value::Scalar(_) => self.profile_kind(p, slot).map(|kind| Profile {
                kind,
                prefix_budget: 0,
            }),
            Value::Map(_) => {
                let fields = self.fields(slot, p, Some(PROFILE_KEYS), "a map");
                let field = |name: &'static str| join(p, Seg::Key(name));
                let kind = match fields.get("base") {
                    Some(s) => self.profile_kind(&field("base"), s)?,
                    None => ProfileKind::default(),
                };
                let budget = match fields.get("prefix_budget") {
                    None => 0,
                    Some(s) => {
                        let budget = self.count(&field("prefix_budget"), s)?;
                        let budget = usize::try_from(budget).unwrap_or(usize::MAX);
                        if budget >= kind.max_len() {
                            self.error(
                                codes::INVALID_VALUE,
                                format!(
                                    "prefix budget `{budget}` leaves no room for names: the `{}` profile allows at most {} characters",
                                    kind.as_str(),
                                    kind.max_len()
                                ),
                                &field("prefix_budget"),
                                s.point(),
                                Some(format!("use a number below {}", kind.max_len())),
                            );
                            return None;
                        }
                        budget
                    }
                };
                Some(Profile {
                    kind,
                    prefix_budget: budget,
                })
            }
            Value::Seq(_) => {
                self.type_error(
                    "`portable`, `spec` or a map with `base` and `prefix_budget`",
                    p,
                    slot,
                );
                None
            }
        }
    }

    /// A whole number from 0 to `u32::MAX`.
    fn count(&mut self, p: &[Seg<'_>], slot: Slot<'_>) -> Option<u32> {
        match slot.scalar() {
            Some((text, ScalarKind::Int(i))) => match u32::try_from(i) {
                Ok(n) => Some(n),
                Err(_) => {
                    self.error(
                        codes::INVALID_VALUE,
                        format!("`{}` is out of range", shorten(text)),
                        p,
                        slot.point(),
                        Some(format!("use a whole number from 0 to {}", u32::MAX)),
                    );
                    None
                }
            },
            _ => {
                self.type_error("a whole number", p, slot);
                None
            }
        }
    }

    fn server_tags<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> BTreeMap<String, Vec<Tag>> {
        let fields = self.fields(slot, p, None, "a map of server names to tags");
        fields
            .entries
            .into_iter()
            .map(|(key, s)| (key.to_owned(), self.tags(&join(p, Seg::Key(key)), s)))
            .collect()
    }

    fn overrides<'n>(
        &mut self,
        p: &[Seg<'n>],
        slot: Slot<'n>,
        server_ids: &[&str],
    ) -> BTreeMap<String, Override> {
        let fields = self.fields(slot, p, None, "a map of names to overrides");
        let mut out = BTreeMap::new();
        for (key, s) in fields.entries {
            let op = join(p, Seg::Key(key));
            let key_ok = self.override_key(&op, s, key, server_ids);
            let rule = self.override_(&op, s);
            if key_ok {
                out.insert(key.to_owned(), rule);
            }
        }
        out
    }

    /// `<origin name>` or `<server id>/<origin name>`, split on the first `/`.
    fn override_key(&mut self, op: &[Seg<'_>], slot: Slot<'_>, key: &str, ids: &[&str]) -> bool {
        let at = slot.key.unwrap_or(slot.node.span);
        let Some((server, name)) = key.split_once('/') else {
            if key.is_empty() {
                self.error(
                    codes::INVALID_VALUE,
                    "override key is empty",
                    op,
                    at,
                    Some("use the origin name, or `<server id>/<origin name>`".to_owned()),
                );
                return false;
            }
            return true;
        };
        if !ids.contains(&server) {
            let help = match did_you_mean(server, ids.iter().copied()) {
                Some(close) => format!("did you mean `{close}/{}`?", shorten(name)),
                None if ids.is_empty() => "no servers are configured".to_owned(),
                None => format!("configured servers: {}", list(ids)),
            };
            self.error(
                codes::UNKNOWN_SERVER,
                format!(
                    "override `{}` names server `{}`, which is not configured",
                    shorten(key),
                    shorten(server)
                ),
                op,
                at,
                Some(help),
            );
            return false;
        }
        if name.is_empty() {
            self.error(
                codes::INVALID_VALUE,
                format!("override `{}` has no origin name after `/`", shorten(key)),
                op,
                at,
                Some(format!("write `{server}/<origin name>`")),
            );
            return false;
        }
        true
    }

    fn override_<'n>(&mut self, op: &[Seg<'n>], slot: Slot<'n>) -> Override {
        let fields = self.fields(slot, op, Some(OVERRIDE_KEYS), "a map of override settings");
        let field = |name: &'static str| join(op, Seg::Key(name));
        let mut rule = Override::default();
        if let Some(s) = fields.get("name") {
            rule.name = self.name(&field("name"), s, "name");
        }
        if let Some(s) = fields.get("tags") {
            rule.tags = self.tags(&field("tags"), s);
        }
        if let Some(s) = fields.get("aliases") {
            rule.aliases = self.aliases(&field("aliases"), s);
        }
        if let Some(s) = fields.get("description") {
            rule.description = self.string(&field("description"), s);
        }
        if let Some(s) = fields.get("hidden") {
            rule.hidden = self.boolean(&field("hidden"), s).unwrap_or(false);
        }
        rule
    }

    fn name(&mut self, p: &[Seg<'_>], slot: Slot<'_>, what: &str) -> Option<Name> {
        let text = self.string(p, slot)?;
        match text.parse::<Name>() {
            Ok(name) => Some(name),
            Err(e) => {
                self.error(
                    codes::INVALID_NAME,
                    format!("{what} `{}` {}", shorten(&text), e.rule),
                    p,
                    slot.point(),
                    None,
                );
                None
            }
        }
    }

    fn aliases<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> Vec<AliasRule> {
        let items = self.items(slot, p, "a list of aliases");
        let mut out = Vec::new();
        for (i, item) in items.into_iter().enumerate() {
            let ip = join(p, Seg::Index(i));
            match &item.node.value {
                Value::Scalar(s) if s.kind == ScalarKind::Str => {
                    if let Some(name) = self.name(&ip, item, "alias") {
                        out.push(AliasRule {
                            name,
                            hidden: false,
                        });
                    }
                }
                Value::Map(_) => {
                    let fields = self.fields(item, &ip, Some(ALIAS_KEYS), "a map");
                    let field = |name: &'static str| join(&ip, Seg::Key(name));
                    let hidden = fields
                        .get("hidden")
                        .and_then(|s| self.boolean(&field("hidden"), s))
                        .unwrap_or(false);
                    match fields.get("name") {
                        Some(s) => {
                            if let Some(name) = self.name(&field("name"), s, "alias") {
                                out.push(AliasRule { name, hidden });
                            }
                        }
                        None => self.error(
                            codes::MISSING_KEY,
                            "alias has no `name`",
                            &ip,
                            item.point(),
                            Some("write `{ name: <alias>, hidden: true }`".to_owned()),
                        ),
                    }
                }
                _ => self.type_error("an alias name or a map with `name` and `hidden`", &ip, item),
            }
        }
        out
    }

    /// Whether a map key is a valid [`Name`]; reported when not (`what` names the key's role).
    fn name_key(&mut self, what: &str, key: &str, p: &[Seg<'_>], slot: Slot<'_>) -> bool {
        match key.parse::<Name>() {
            Ok(_) => true,
            Err(e) => {
                self.error(
                    codes::INVALID_NAME,
                    format!("{what} `{}` {}", shorten(key), e.rule),
                    p,
                    slot.key.unwrap_or(slot.node.span),
                    None,
                );
                false
            }
        }
    }

    /// `actions`: action tools by their exposed name. A tool may be the member of one action
    /// only, across all action tools.
    fn actions<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> BTreeMap<String, ActionRule> {
        let fields = self.fields(slot, p, None, "a map of tool names to action tools");
        let mut out = BTreeMap::new();
        // Member -> where it is first listed: the dotted path and the line.
        let mut members: HashMap<String, (String, usize)> = HashMap::new();
        for (key, s) in fields.entries {
            let ap = join(p, Seg::Key(key));
            let key_ok = self.name_key("action tool", key, &ap, s);
            let rule = self.action(&ap, s, key, &mut members);
            if key_ok {
                out.insert(key.to_owned(), rule);
            }
        }
        out
    }

    fn action<'n>(
        &mut self,
        ap: &[Seg<'n>],
        slot: Slot<'n>,
        tool: &str,
        members: &mut HashMap<String, (String, usize)>,
    ) -> ActionRule {
        let fields = self.fields(slot, ap, Some(ACTION_KEYS), "a map of action tool settings");
        let field = |name: &'static str| join(ap, Seg::Key(name));
        let mut rule = ActionRule::default();
        if let Some(s) = fields.get("description") {
            rule.description = self.string(&field("description"), s);
        }
        match fields.get("tools") {
            Some(s) => rule.tools = self.action_tools(&field("tools"), s, members),
            // `tool:` was reported as unknown with a did-you-mean, and a list or a string as
            // the wrong type: that is the error.
            None if fields.meant("tools") => {}
            None if !slot.node.is_null() && !matches!(slot.node.value, Value::Map(_)) => {}
            None => self.error(
                codes::MISSING_KEY,
                format!("action tool `{}` has no `tools`", shorten(tool)),
                ap,
                slot.key.unwrap_or(slot.node.span),
                Some(ACTION_TOOLS_HELP.to_owned()),
            ),
        }
        if let Some(s) = fields.get("legacy") {
            if let Some(legacy) = self.legacy(&field("legacy"), s) {
                rule.legacy = legacy;
            }
        }
        if let Some(s) = fields.get("aliases") {
            rule.aliases = self.aliases(&field("aliases"), s);
        }
        if let Some(s) = fields.get("tags") {
            rule.tags = self.tags(&field("tags"), s);
        }
        rule
    }

    /// `tools: { <action>: <member's exposed name>, ... }`, not empty.
    fn action_tools<'n>(
        &mut self,
        tp: &[Seg<'n>],
        slot: Slot<'n>,
        members: &mut HashMap<String, (String, usize)>,
    ) -> IndexMap<String, Name> {
        let fields = self.fields(slot, tp, None, "a map of actions to tool names");
        let mut out = IndexMap::new();
        // A map whose every entry was refused has been reported already.
        let empty = match &slot.node.value {
            Value::Map(entries) => entries.is_empty(),
            _ => slot.node.is_null(),
        };
        if empty {
            self.error(
                codes::INVALID_VALUE,
                "`tools` is empty: an action tool needs at least one action",
                tp,
                slot.point(),
                Some(ACTION_TOOLS_HELP.to_owned()),
            );
        }
        for (action, s) in fields.entries {
            let mp = join(tp, Seg::Key(action));
            let action_ok = valid_action(action);
            if !action_ok {
                let at = s.key.unwrap_or(s.node.span);
                let help = action_fix(action).map(|a| format!("did you mean `{a}`?"));
                self.error(
                    codes::INVALID_ACTION,
                    format!("action `{}` {ACTION_RULE}", shorten(action)),
                    &mp,
                    at,
                    help,
                );
            }
            let Some(member) = self.name(&mp, s, "tool") else {
                continue;
            };
            let line = s.point().line;
            if let Some((first, first_line)) = members.get(member.as_str()) {
                self.error(
                    codes::DUPLICATE_MEMBER,
                    format!(
                        "tool `{}` is already the member of `{first}`",
                        shorten(member.as_str())
                    ),
                    &mp,
                    s.point(),
                    Some(format!(
                        "the first is on line {first_line}: a tool can be the member of one action only"
                    )),
                );
                continue;
            }
            members.insert(member.as_str().to_owned(), (path(&mp), line));
            if action_ok {
                out.insert(action.to_owned(), member);
            }
        }
        out
    }

    fn legacy(&mut self, p: &[Seg<'_>], slot: Slot<'_>) -> Option<Legacy> {
        let text = self.string(p, slot)?;
        match text.as_str() {
            "hidden" => Some(Legacy::Hidden),
            "listed" => Some(Legacy::Listed),
            "off" => Some(Legacy::Off),
            _ => {
                let help = did_you_mean(&text, LEGACY_MODES.iter().copied())
                    .map(|m| format!("did you mean `{m}`?"));
                self.error(
                    codes::INVALID_VALUE,
                    format!(
                        "legacy `{}` is not a legacy mode: use `hidden`, `listed` or `off`",
                        shorten(&text)
                    ),
                    p,
                    slot.point(),
                    help,
                );
                None
            }
        }
    }

    /// `toolsets`: `manage` and `store`, and toolsets by name. Includes are checked once every
    /// toolset is known: unknown ones and cycles are errors.
    fn toolsets<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> Toolsets {
        let fields = self.fields(slot, p, None, "a map of toolsets");
        let mut out = Toolsets::default();
        // Every toolset written, valid name or not: an include of a toolset with a mistake
        // in its name is not an unknown toolset too.
        let names: Vec<&str> = fields
            .entries
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| !RESERVED.contains(k))
            .collect();
        let mut includes: Vec<(&str, Vec<Include<'n>>)> = Vec::new();
        for &(key, s) in &fields.entries {
            let kp = join(p, Seg::Key(key));
            match key {
                "manage" => {
                    if let Some(manage) = self.boolean(&kp, s) {
                        out.manage = manage;
                    }
                }
                "store" => {
                    if !s.node.is_null() {
                        out.store = self.store(&kp, s);
                    }
                }
                _ => {
                    let is_map = s.node.is_null() || matches!(s.node.value, Value::Map(_));
                    let setting = did_you_mean(key, RESERVED);
                    if let (false, Some(close)) = (is_map, setting) {
                        // `manag: true` is a misspelt setting, not a toolset.
                        self.error(
                            codes::UNKNOWN_KEY,
                            format!("unknown key `{}`", shorten(key)),
                            &kp,
                            s.key.unwrap_or(s.node.span),
                            Some(format!("did you mean `{close}`?")),
                        );
                        continue;
                    }
                    let name_ok = valid_name(key);
                    if !name_ok {
                        let help = toolset_name_fix(key).map(|n| format!("did you mean `{n}`?"));
                        self.error(
                            codes::INVALID_TOOLSET,
                            format!("toolset name `{}` {NAME_RULE}", shorten(key)),
                            &kp,
                            s.key.unwrap_or(s.node.span),
                            help,
                        );
                    }
                    let (rule, include) = self.toolset(&kp, s);
                    if name_ok {
                        out.sets.insert(key.to_owned(), rule);
                    }
                    includes.push((key, include));
                }
            }
        }
        self.includes(p, &names, &includes);
        out
    }

    fn store(&mut self, p: &[Seg<'_>], slot: Slot<'_>) -> Option<String> {
        let store = self.string(p, slot)?;
        if store.trim().is_empty() {
            self.error(
                codes::INVALID_VALUE,
                "`store` is empty",
                p,
                slot.point(),
                Some(
                    "name the file, `store: ~/moniker-toolsets.json`, or remove `store` for the default"
                        .to_owned(),
                ),
            );
            return None;
        }
        Some(store)
    }

    fn toolset<'n>(&mut self, tp: &[Seg<'n>], slot: Slot<'n>) -> (ToolsetRule, Vec<Include<'n>>) {
        let fields = self.fields(slot, tp, Some(TOOLSET_KEYS), "a map of toolset settings");
        let field = |name: &'static str| join(tp, Seg::Key(name));
        let mut rule = ToolsetRule::default();
        let mut includes = Vec::new();
        if let Some(s) = fields.get("description") {
            rule.description = self.string(&field("description"), s);
        }
        if let Some(s) = fields.get("tools") {
            rule.tools = self.references(&field("tools"), s, "tool");
        }
        if let Some(s) = fields.get("prompts") {
            rule.prompts = self.references(&field("prompts"), s, "prompt");
        }
        if let Some(s) = fields.get("tags") {
            rule.tags = self.tag_expr(&field("tags"), s);
        }
        if let Some(s) = fields.get("include") {
            let ip = field("include");
            for (i, item) in self
                .items(s, &ip, "a list of toolset names")
                .into_iter()
                .enumerate()
            {
                let item_path = join(&ip, Seg::Index(i));
                if let Some(name) = self.string(&item_path, item) {
                    rule.include.push(name.clone());
                    includes.push(Include {
                        index: i,
                        name,
                        slot: item,
                    });
                }
            }
        }
        if let Some(s) = fields.get("aliases") {
            rule.aliases = self.toolset_aliases(&field("aliases"), s);
        }
        (rule, includes)
    }

    /// Exposed names or aliases of tools or prompts.
    fn references<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>, what: &str) -> Vec<String> {
        let expected = format!("a list of {what} names");
        let items = self.items(slot, p, &expected);
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            if let Some(name) = self.name(&join(p, Seg::Index(i)), item, what) {
                out.push(name.as_str().to_owned());
            }
        }
        out
    }

    /// A list of tags (any of them), or a tag expression.
    fn tag_expr<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> Option<TagExpr> {
        match &slot.node.value {
            Value::Seq(_) => TagExpr::any_of(self.tags(p, slot)),
            Value::Scalar(s) if s.kind == ScalarKind::Null => None,
            Value::Scalar(s) if s.kind == ScalarKind::Str => match s.text.parse::<TagExpr>() {
                Ok(expr) => Some(expr),
                Err(e) => {
                    let inner = self.inner_span(slot.node.span, &s.text, e.offset, e.len);
                    let place = match inner {
                        Some(_) => String::new(),
                        None => format!(" (at character {} of the expression)", e.column),
                    };
                    self.error(
                        codes::INVALID_TAGS,
                        format!(
                            "tag expression `{}` is invalid: {}{place}",
                            shorten(&s.text),
                            e.message
                        ),
                        p,
                        inner.unwrap_or_else(|| slot.point()),
                        Some(TAGS_HELP.to_owned()),
                    );
                    None
                }
            },
            _ => {
                self.type_error("a list of tags or a tag expression", p, slot);
                None
            }
        }
    }

    /// The place of `text[offset..offset + len]` in the file, when the string is written as
    /// is on one line (plain, or quoted without escapes), so that its bytes are in the file.
    fn inner_span(&self, span: Span, text: &str, offset: usize, len: usize) -> Option<Span> {
        if text.contains('\n') {
            return None;
        }
        let quote = match self.text.get(span.offset..)?.chars().next()? {
            q @ ('"' | '\'') => Some(q),
            _ => None,
        };
        let start = span.offset + usize::from(quote.is_some());
        let end = start + text.len();
        if self.text.get(start..end)? != text {
            return None;
        }
        if let Some(q) = quote {
            if !self.text.get(end..)?.starts_with(q) {
                return None;
            }
        }
        let before = text.get(..offset)?;
        text.get(offset..offset + len)?;
        Some(Span {
            offset: start + offset,
            len,
            line: span.line,
            column: span.column + usize::from(quote.is_some()) + before.chars().count(),
        })
    }

    /// `aliases: { <tool>: <alias>, ... }`
    fn toolset_aliases<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> BTreeMap<String, String> {
        let fields = self.fields(slot, p, None, "a map of tool names to aliases");
        let mut out = BTreeMap::new();
        for (key, s) in fields.entries {
            let ap = join(p, Seg::Key(key));
            let key_ok = self.name_key("tool", key, &ap, s);
            let Some(alias) = self.string(&ap, s) else {
                continue;
            };
            if !valid_alias(&alias) {
                let help = alias_fix(&alias).map(|a| format!("did you mean `{a}`?"));
                self.error(
                    codes::INVALID_NAME,
                    format!("alias `{}` {ALIAS_RULE}", shorten(&alias)),
                    &ap,
                    s.point(),
                    help,
                );
                continue;
            }
            if key_ok {
                out.insert(key.to_owned(), alias);
            }
        }
        out
    }

    /// Every include names a toolset of the config, and no toolset includes itself.
    fn includes(&mut self, p: &[Seg<'_>], names: &[&str], includes: &[(&str, Vec<Include<'_>>)]) {
        let include_path = |toolset: &str, index: usize| -> String {
            let mut segs = p.to_vec();
            segs.extend([Seg::Key(toolset), Seg::Key("include"), Seg::Index(index)]);
            path(&segs)
        };
        let mut edges: HashMap<&str, Vec<&Include<'_>>> = HashMap::new();
        for (toolset, list) in includes {
            for include in list {
                if names.contains(&include.name.as_str()) {
                    edges.entry(toolset).or_default().push(include);
                    continue;
                }
                let help = match did_you_mean(&include.name, names.iter().copied()) {
                    Some(close) => format!("did you mean `{close}`?"),
                    None if names.is_empty() => "no toolsets are defined".to_owned(),
                    None => format!("toolsets: {}", list_names(names)),
                };
                let mut error = ConfigError::new(
                    codes::UNKNOWN_TOOLSET,
                    format!(
                        "toolset `{}` includes `{}`, which is not a toolset",
                        shorten(toolset),
                        shorten(&include.name)
                    ),
                    include_path(toolset, include.index),
                )
                .with_span(include.slot.point());
                error.help = Some(help);
                self.errors.push(error);
            }
        }
        // Depth-first, in file order, with an explicit stack: each edge back to a toolset on
        // the stack closes a cycle, reported at that include.
        let mut done: HashMap<&str, bool> = HashMap::new();
        for (root, _) in includes {
            if done.contains_key(root) {
                continue;
            }
            done.insert(root, false);
            let mut stack: Vec<(&str, usize)> = vec![(root, 0)];
            while let Some(&(current, i)) = stack.last() {
                let Some(include) = edges.get(current).and_then(|e| e.get(i)).copied() else {
                    done.insert(current, true);
                    stack.pop();
                    continue;
                };
                if let Some(top) = stack.last_mut() {
                    top.1 += 1;
                }
                let target = include.name.as_str();
                match done.get(target) {
                    Some(true) => {}
                    Some(false) => {
                        let from = stack.iter().position(|(n, _)| *n == target).unwrap_or(0);
                        let mut cycle: Vec<&str> = stack[from..].iter().map(|(n, _)| *n).collect();
                        cycle.push(target);
                        let message = if cycle.len() == 2 {
                            format!("toolset `{}` includes itself", shorten(current))
                        } else {
                            format!(
                                "toolset `{}` includes itself through `{}`: {}",
                                shorten(target),
                                shorten(current),
                                cycle.join(" -> ")
                            )
                        };
                        let mut error = ConfigError::new(
                            codes::INCLUDE_CYCLE,
                            message,
                            include_path(current, include.index),
                        )
                        .with_span(include.slot.point());
                        error.help = Some("remove one `include` of the cycle".to_owned());
                        self.errors.push(error);
                    }
                    None => {
                        done.insert(target, false);
                        stack.push((target, 0));
                    }
                }
            }
        }
    }

    /// `http:`: tokens (a string, or `{token, toolset}`), allow-lists, the body limit.
    fn http<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> crate::http::HttpConfig {
        let fields = self.fields(slot, p, Some(HTTP_KEYS), "a map of HTTP settings");
        let field = |name: &'static str| join(p, Seg::Key(name));
        let mut out = crate::http::HttpConfig::default();
        if let Some(tokens) = fields.get("tokens") {
            let tp = field("tokens");
            for (i, item) in self
                .items(tokens, &tp, "a list of tokens")
                .into_iter()
                .enumerate()
            {
                let ip = join(&tp, Seg::Index(i));
                if matches!(item.node.value, Value::Map(_)) {
                    let entry = self.fields(
                        item,
                        &ip,
                        Some(TOKEN_KEYS),
                        "a token: a string or {token, toolset}",
                    );
                    let token = match entry.get("token") {
                        Some(t) => self.string(&join(&ip, Seg::Key("token")), t),
                        None => {
                            self.error(
                                codes::MISSING_KEY,
                                "a token needs `token`".to_owned(),
                                &ip,
                                item.node.span,
                                Some(
                                    "write `{ token: \"${MONIKER_TOKEN}\", toolset: review }`"
                                        .to_owned(),
                                ),
                            );
                            None
                        }
                    };
                    let toolset = entry
                        .get("toolset")
                        .and_then(|t| self.string(&join(&ip, Seg::Key("toolset")), t));
                    if let Some(token) = token {
                        out.tokens.push(crate::http::TokenConfig { token, toolset });
                    }
                } else if let Some(token) = self.string(&ip, item) {
                    out.tokens.push(crate::http::TokenConfig {
                        token,
                        toolset: None,
                    });
                }
            }
        }
        if let Some(list) = fields.get("allowed_origins") {
            out.allowed_origins = self.strings(&field("allowed_origins"), list, false);
        }
        if let Some(list) = fields.get("allowed_hosts") {
            out.allowed_hosts = self.strings(&field("allowed_hosts"), list, false);
        }
        if let Some(max) = fields.get("max_body") {
            out.max_body = self.count(&field("max_body"), max);
        }
        out
    }

    fn gateway<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> GatewaySettings {
        let fields = self.fields(slot, p, Some(GATEWAY_KEYS), "a map of gateway settings");
        let field = |name: &'static str| join(p, Seg::Key(name));
        let mut out = GatewaySettings::default();
        if let Some(d) = fields
            .get("call_timeout")
            .and_then(|s| self.duration(&field("call_timeout"), s, false))
        {
            out.call_timeout = d;
        }
        if let Some(d) = fields
            .get("start_timeout")
            .and_then(|s| self.duration(&field("start_timeout"), s, false))
        {
            out.start_timeout = d;
        }
        if let Some(size) = fields.get("page_size") {
            out.page_size = self.count(&field("page_size"), size).filter(|n| *n > 0);
        }
        let Some(restart) = fields.get("restart") else {
            return out;
        };
        let rp = field("restart");
        let fields = self.fields(
            restart,
            &rp,
            Some(RESTART_KEYS),
            "a map of restart settings",
        );
        let field = |name: &'static str| join(&rp, Seg::Key(name));
        let initial = fields.get("initial_delay").and_then(|s| {
            let d = self.duration(&field("initial_delay"), s, true)?;
            Some((d, s))
        });
        if let Some(d) = fields
            .get("max_delay")
            .and_then(|s| self.duration(&field("max_delay"), s, false))
        {
            out.restart_max_delay = d;
        }
        if let Some((d, s)) = initial {
            if d > out.restart_max_delay {
                self.error(
                    codes::INVALID_VALUE,
                    format!(
                        "`initial_delay` ({d:?}) is longer than `max_delay` ({:?})",
                        out.restart_max_delay
                    ),
                    &field("initial_delay"),
                    s.point(),
                    Some("make `initial_delay` at most `max_delay`".to_owned()),
                );
            } else {
                out.restart_initial_delay = d;
            }
        }
        if let Some(s) = fields.get("max_attempts") {
            if !s.node.is_null() {
                out.restart_max_attempts = self.count(&field("max_attempts"), s);
            }
        }
        out
    }

    /// Seconds (a number), or a string with a unit. Nothing keeps the default.
    fn duration(
        &mut self,
        p: &[Seg<'_>],
        slot: Slot<'_>,
        zero_ok: bool,
    ) -> Option<std::time::Duration> {
        let Some((text, kind)) = slot.scalar() else {
            self.type_error("a duration", p, slot);
            return None;
        };
        let duration = match kind {
            ScalarKind::Null => return None,
            ScalarKind::Int(i) => seconds(i as f64),
            ScalarKind::Float(f) => seconds(f),
            ScalarKind::Str => parse_duration(text),
            ScalarKind::Bool(_) => {
                self.type_error("a duration", p, slot);
                return None;
            }
        };
        match duration {
            None => {
                self.error(
                    codes::INVALID_VALUE,
                    format!("`{}` is not a duration", shorten(text)),
                    p,
                    slot.point(),
                    Some(DURATION_HELP.to_owned()),
                );
                None
            }
            Some(d) if d.is_zero() && !zero_ok => {
                self.error(
                    codes::INVALID_VALUE,
                    format!("`{}` is zero; this duration must be longer", shorten(text)),
                    p,
                    slot.point(),
                    Some(DURATION_HELP.to_owned()),
                );
                None
            }
            Some(d) => Some(d),
        }
    }
}

const ACTION_TOOLS_HELP: &str = "map each action to the exposed name of its tool: `tools: { create: create_project, list: list_projects }`";

/// `^[a-z][a-z0-9_]*$`
fn valid_action(action: &str) -> bool {
    let mut bytes = action.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The action a user probably meant: lowercase, spaces and hyphens as underscores.
fn action_fix(action: &str) -> Option<String> {
    let fixed: String = action
        .trim()
        .chars()
        .map(|c| match c {
            ' ' | '-' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    (fixed != action && valid_action(&fixed)).then_some(fixed)
}

/// The tag a user probably meant: lowercase, spaces and underscores as hyphens, no hyphens at
/// the ends.
fn tag_fix(text: &str) -> Option<String> {
    let fixed: String = text
        .trim()
        .chars()
        .map(|c| match c {
            ' ' | '_' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    let fixed = fixed.trim_matches('-');
    (fixed != text && fixed.parse::<Tag>().is_ok()).then(|| fixed.to_owned())
}

/// One entry of a toolset's `include`.
struct Include<'n> {
    index: usize,
    name: String,
    slot: Slot<'n>,
}

fn list_names(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{}`", shorten(n)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The toolset name a user probably meant: lowercase, spaces and dots as `_`.
fn toolset_name_fix(name: &str) -> Option<String> {
    let fixed: String = name
        .trim()
        .chars()
        .map(|c| match c {
            ' ' | '.' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    (fixed != name && valid_name(&fixed)).then_some(fixed)
}

#[cfg(test)]
mod tests;
