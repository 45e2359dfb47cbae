//! The spanned YAML tree -> typed config, by hand, so that every error is found (not only the
//! first), each with its path, its place and a hint, and so that the place of every entry is
//! recorded for diagnostics found later.
//!
//! This file holds the entry, the walk of the top-level sections and the helpers every
//! section uses (`fields`, `items`, `string`, `tags`, ...); each section is decoded in its
//! own module below.

mod actions;
mod client;
mod discovery;
mod gateway;
mod http;
mod naming;
mod params;
mod remote;
mod sandbox;
mod servers;
mod toolsets;

use std::collections::HashMap;

use indexmap::IndexMap;
use moniker_surface::diagnostic::did_you_mean;
use moniker_surface::vocab::{Seg, path};
use moniker_surface::{Name, Rules, ServerId, Tag};

use crate::gateway::GatewaySettings;
use crate::report::{ConfigError, codes};
use crate::server::ServerConfig;
use crate::shape::keys;
use crate::source::{Span, Spans};
use crate::tree::{Node, ScalarKind, Value, shorten};

/// What the decoder made of the tree; complete only when no error was found.
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    pub servers: IndexMap<ServerId, ServerConfig>,
    pub gateway: GatewaySettings,
    pub limits: crate::gateway::CallLimits,
    pub audit: Option<crate::gateway::AuditSettings>,
    pub telemetry: Option<crate::gateway::TelemetrySettings>,
    pub http: crate::http::HttpConfig,
    pub toolsets: crate::ToolsetSettings,
    pub rules: Rules,
    /// `discovery.model` (top level only): another static embedding table for search.
    pub search_model: Option<String>,
    /// `discovery.learn` (top level only): whether search learns from the calls after it.
    pub search_learns: bool,
    pub integrity: moniker_surface::lock::Integrity,
    pub spans: HashMap<String, Spans>,
    pub servers_key: String,
    /// The top-level keys of a client's config file that are the client's, not moniker's.
    pub ignored_keys: Vec<String>,
}

/// `text` is what `root` was parsed from: errors inside a string (a tag expression) point
/// into it when the string is written as is.
pub(crate) fn decode(root: Option<&Node>, text: &str) -> (Decoded, Vec<ConfigError>) {
    let mut cx = Cx {
        text,
        search_learns: true,
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
    out.limits = cx.limits;
    out.search_model = cx.search_model;
    out.search_learns = cx.search_learns;
    for (id, server) in &mut out.servers {
        let stdio = matches!(server.transport, crate::Transport::Stdio { .. });
        if stdio && !cx.sandbox_named.iter().any(|named| named == id.as_str()) {
            server.sandbox.clone_from(&out.gateway.sandbox);
        }
    }
    exchanges_at_the_issuer(&mut out, &mut cx.errors);
    (out, cx.errors)
}

/// Each `auth.exchange` without an `auth.issuer` exchanges at the issuer of the callers'
/// tokens (`http.auth.issuer`); without either, where to exchange is unknown (reported). A
/// server that acts as each person (`per_person`, `auth.per_person`) needs `http.auth` too: the
/// person is who its token says.
fn exchanges_at_the_issuer(out: &mut Decoded, errors: &mut Vec<ConfigError>) {
    const PERSON: &str =
        "`per_person` needs `http.auth`: who each person is comes from their access token";
    const EXCHANGE: &str = "`exchange` needs the identity provider to exchange at: `auth.issuer`, or `http.auth`, whose callers' tokens are exchanged";
    let callers = out.http.auth.as_ref().map(|auth| auth.issuer.clone());
    let mut missing = Vec::new();
    for (id, server) in &mut out.servers {
        let http = match &mut server.transport {
            crate::Transport::Http { auth, .. } => Some(auth),
            crate::Transport::Stdio { .. } => None,
        };
        let per_person = server.per_person.is_some() || http.as_ref().is_some_and(|a| a.per_person);
        if per_person && callers.is_none() {
            let at = if server.per_person.is_some() {
                "per_person"
            } else {
                "auth.per_person"
            };
            missing.push((
                format!("servers.{id}.{at}"),
                PERSON,
                "add `http.auth` (your identity provider)",
            ));
        }
        let Some(auth) = http.filter(|a| a.exchange.is_some() && a.issuer.is_none()) else {
            continue;
        };
        match &callers {
            Some(issuer) => auth.issuer = Some(issuer.clone()),
            None => missing.push((
                format!("servers.{id}.auth.exchange"),
                EXCHANGE,
                "add `http.auth` (the callers' identity provider), or `issuer: https://...` here",
            )),
        }
    }
    for (at, message, help) in missing {
        let mut error = ConfigError::new(codes::MISSING_KEY, message, at.clone());
        if let Some(spans) = out.spans.get(&at) {
            error = error.with_span(spans.point);
        }
        error.help = Some(help.to_owned());
        errors.push(error);
    }
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

    /// Where this value is written: its key, all of it, and where an error points.
    fn spans(&self) -> Spans {
        Spans {
            key: self.key,
            value: self.node.span,
            point: self.point(),
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
    /// The limits on calls, as the servers and overrides that set them are read.
    limits: crate::gateway::CallLimits,
    /// `discovery.model`, as the top-level `discovery` is read.
    search_model: Option<String>,
    /// `discovery.learn`, likewise (true unless it says otherwise).
    search_learns: bool,
    /// The servers whose config says `sandbox` (else `gateway.sandbox` is theirs).
    sandbox_named: Vec<String>,
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
        let spans = slot.spans();
        if let Some(alias) = servers_alias(p) {
            self.spans.entry(alias).or_insert(spans);
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

    /// Reads the key `name` of the map at `p` (whose entries are `fields`) with `read`, at the
    /// key's own path: `None` when the map has no such key, else what `read` returned.
    fn field<'n, T>(
        &mut self,
        p: &[Seg<'n>],
        fields: &Fields<'n>,
        name: &'n str,
        read: impl FnOnce(&mut Self, &[Seg<'n>], Slot<'n>) -> T,
    ) -> Option<T> {
        let slot = fields.get(name)?;
        Some(read(self, &join(p, Seg::Key(name)), slot))
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

    /// A list of strings, each checked by `check` at its own path and place: the message and
    /// hint of an entry the key does not take (kept all the same: the config does not load).
    fn strings_where<'n>(
        &mut self,
        p: &[Seg<'n>],
        slot: Slot<'n>,
        check: impl Fn(&str) -> Option<(String, String)>,
    ) -> Vec<String> {
        let items = self.items(slot, p, "a list of strings");
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            let ip = join(p, Seg::Index(i));
            let Some(text) = self.string(&ip, item) else {
                continue;
            };
            if let Some((message, hint)) = check(&text) {
                self.error(codes::INVALID_VALUE, message, &ip, item.point(), Some(hint));
            }
            out.push(text);
        }
        out
    }

    /// A map of names (`expected` says what it is), each value read by `read` at its own path.
    fn named<'n, T>(
        &mut self,
        p: &[Seg<'n>],
        slot: Slot<'n>,
        expected: &str,
        read: impl Fn(&mut Self, &[Seg<'n>], Slot<'n>) -> T,
    ) -> std::collections::BTreeMap<String, T> {
        let fields = self.fields(slot, p, None, expected);
        let entries = fields.entries.into_iter();
        entries
            .map(|(key, s)| (key.to_owned(), read(self, &join(p, Seg::Key(key)), s)))
            .collect()
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
        let fields = if client::is_client_file(root) {
            self.client_fields(slot, &mut out.ignored_keys)
        } else {
            self.fields(slot, &[], Some(keys::FILE), "a map of sections")
        };
        let ids = self.server_sections(&fields, out);
        for (key, slot) in &fields.entries {
            let p = [Seg::Key(key)];
            match *key {
                "naming" => out.rules.naming = self.naming(&p, *slot),
                "server_tags" => out.rules.server_tags = self.server_tags(&p, *slot),
                "tools" => {
                    let (overrides, limits) = self.overrides(&p, *slot, &ids);
                    (out.rules.tools, self.limits.tools) = (overrides, limits);
                }
                "prompts" => {
                    let (overrides, limits) = self.overrides(&p, *slot, &ids);
                    (out.rules.prompts, self.limits.prompts) = (overrides, limits);
                }
                "audit" => out.audit = self.audit(&p, *slot),
                "telemetry" => out.telemetry = self.telemetry(&p, *slot),
                "actions" => out.rules.actions = self.actions(&p, *slot),
                "toolsets" => (out.rules.toolsets, out.toolsets) = self.toolsets(&p, *slot),
                "gateway" => out.gateway = self.gateway(&p, *slot),
                "http" => out.http = self.http(&p, *slot),
                "discovery" => out.rules.discovery = self.discovery(&p, *slot),
                "integrity" => out.integrity = self.integrity(&p, *slot),
                _ => {}
            }
        }
    }

    /// `warn` or `block`.
    fn integrity(&mut self, p: &[Seg<'_>], slot: Slot<'_>) -> moniker_surface::lock::Integrity {
        use moniker_surface::lock::Integrity;
        match self.string(p, slot).as_deref() {
            Some("block") => Integrity::Block,
            Some("warn") | None => Integrity::Warn,
            Some(other) => {
                self.error(
                    codes::INVALID_VALUE,
                    format!("`{}` is not an integrity mode", shorten(other)),
                    p,
                    slot.point(),
                    Some("use `warn` or `block`".to_owned()),
                );
                Integrity::Warn
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
}

/// The path `p` of an `mcpServers` entry as the naming core's diagnostics say it,
/// `servers.<id>`: they say that whichever key the file used.
fn servers_alias(p: &[Seg<'_>]) -> Option<String> {
    let Some(Seg::Key("mcpServers")) = p.first() else {
        return None;
    };
    let mut alias = p.to_vec();
    alias[0] = Seg::Key("servers");
    Some(path(&alias))
}

/// `c` as a tag may hold it: lowercase, and a space or an underscore as a hyphen.
fn tag_char(c: char) -> char {
    match c {
        ' ' | '_' => '-',
        c => c.to_ascii_lowercase(),
    }
}

/// The tag a user probably meant: lowercase, spaces and underscores as hyphens, no hyphens at
/// the ends.
fn tag_fix(text: &str) -> Option<String> {
    let fixed: String = text.trim().chars().map(tag_char).collect();
    let fixed = fixed.trim_matches('-');
    (fixed != text && fixed.parse::<Tag>().is_ok()).then(|| fixed.to_owned())
}

#[cfg(test)]
mod tests;
