//! The surface lock: every exposed name and alias as clients have come to rely on it, in a
//! stable text (`moniker.lock`), and the comparison of a lock with a newly built surface that
//! says which of those names a change breaks.
//!
//! Names drift: a server renames `discover_goals` to `discover_sub_goals` and every client
//! using the old name breaks. The lock remembers what was exposed; [`compare`] finds what is
//! gone or changed, and, for a name that is gone, the likely rename on the same server with
//! the override that keeps the old name working.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::diagnostic::yaml_scalar;
use crate::listing::Listing;
use crate::surface::{Exposed, Origin, Route, Surface};
use crate::vocab::Kind;

mod seal;
pub use seal::{Drift, FIELDS, Integrity, Seal, drift, withhold};

/// Where each server's tools and prompts are: (kind, server, origin name) to the definition
/// and the server's version.
type Definitions<'l> =
    std::collections::HashMap<(Kind, &'l str, String), (&'l RawValue, Option<&'l str>)>;

/// The first line of a rendered lock.
const HEADER: &str = "# moniker.lock: the exposed names clients rely on; written by `moniker lock`, checked by `moniker check`";

/// Every exposed tool and prompt of a surface, sorted by kind and name; and each stdio server's
/// sandbox as the config says it (one line each: `sandbox <server> <its settings>`, as the
/// writer of the lock renders them; a server without one says `none`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lock {
    pub entries: Vec<Entry>,
    pub sandboxes: BTreeMap<String, String>,
}

/// One exposed tool or prompt: one line of the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    pub name: String,
    /// The server id (for an action tool, its server name).
    pub server: String,
    /// The name the server lists it by (`-` for an action tool).
    pub origin: String,
    /// FNV-1a 64 of the canonical input schema (a prompt's `arguments`).
    pub schema: u64,
    /// The top-level parameters, sorted by name.
    pub params: Vec<Param>,
    pub aliases: Vec<String>,
    pub hidden: Vec<String>,
    /// What its server said of it (an item with an origin, locked with its listing).
    pub seal: Option<Seal>,
    /// An action tool's members, each sealed (whether or not it is exposed on its own).
    pub members: Vec<MemberSeal>,
}

/// A member of an action tool as its server said it, kept in the action tool's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSeal {
    /// The member's exposed name (`lock --accept` takes it).
    pub name: String,
    pub server: String,
    /// The name its server lists it by.
    pub origin: String,
    pub seal: Seal,
}

/// A top-level parameter: its name, its JSON Schema type and whether it is required.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Param {
    pub name: String,
    /// `string`, `integer|null` (a list of types), or `any` when the schema names none.
    pub ty: String,
    pub required: bool,
}

impl Entry {
    /// The name and every alias, listed and hidden.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.name.as_str())
            .chain(self.aliases.iter().map(String::as_str))
            .chain(self.hidden.iter().map(String::as_str))
    }

    fn from_exposed(kind: Kind, item: &Exposed, definitions: Option<&Definitions<'_>>) -> Self {
        let (server, origin) = match &item.route {
            Route::Origin(origin) => (origin.server.as_str().to_owned(), origin.name.clone()),
            Route::Action(_) => (item.server_name.clone(), "-".to_owned()),
        };
        let fields: std::collections::HashMap<String, &RawValue> =
            serde_json::from_str(item.definition.get()).unwrap_or_default();
        let key = match kind {
            Kind::Tool => "inputSchema",
            Kind::Prompt => "arguments",
        };
        let raw = fields.get(key).map_or("null", |raw| raw.get());
        let schema: Value = serde_json::from_str(raw).unwrap_or_default();
        let params = match kind {
            Kind::Tool => tool_params(&schema),
            Kind::Prompt => prompt_params(&schema),
        };
        // Hashed as written, numbers past f64 included; what cannot be read at all hashes as
        // such, never as an empty schema.
        let canonical = canonical_text(raw).unwrap_or_else(|| format!("unreadable {raw}"));
        let sealed = |origin: &Origin| {
            definitions?
                .get(&(kind, origin.server.as_str(), origin.name.clone()))
                .map(|(definition, version)| Seal::of(definition, *version))
        };
        let (seal, members) = match &item.route {
            Route::Origin(o) => (sealed(o), Vec::new()),
            Route::Action(action) => {
                let members = action
                    .members
                    .iter()
                    .filter_map(|m| {
                        Some(MemberSeal {
                            name: m.name.clone(),
                            server: m.origin.server.as_str().to_owned(),
                            origin: m.origin.name.clone(),
                            seal: sealed(&m.origin)?,
                        })
                    })
                    .collect();
                (None, members)
            }
        };
        Self {
            kind,
            name: item.name.clone(),
            server,
            origin,
            schema: fnv1a(canonical.as_bytes()),
            params,
            aliases: item.aliases.clone(),
            hidden: item.hidden_aliases.clone(),
            seal,
            members,
        }
    }

    /// The same parameter names and types, required or not: a near rename.
    fn same_shape(&self, other: &Self) -> bool {
        let shape = |e: &Self| -> Vec<(String, String)> {
            e.params
                .iter()
                .map(|p| (p.name.clone(), p.ty.clone()))
                .collect()
        };
        shape(self) == shape(other)
    }
}

impl Lock {
    /// The lock of a built surface: every tool and prompt, listed or only callable, each tool
    /// sealed with what its server said of it in `listings`.
    pub fn of(surface: &Surface, listings: &[&Listing]) -> Self {
        Self::made(surface, Some(&seal::definitions(listings)))
    }

    fn made(surface: &Surface, definitions: Option<&Definitions<'_>>) -> Self {
        let entries: Vec<Entry> = [Kind::Tool, Kind::Prompt]
            .into_iter()
            .flat_map(|kind| {
                surface
                    .items(kind)
                    .iter()
                    .map(move |item| Entry::from_exposed(kind, item, definitions))
            })
            .collect();
        let mut lock = Self {
            entries,
            sandboxes: BTreeMap::new(),
        };
        lock.sort();
        lock
    }

    /// Its entries sorted by kind and name, as it is written.
    pub fn sort(&mut self) {
        self.entries
            .sort_by(|a, b| (kind_str(a.kind), &a.name).cmp(&(kind_str(b.kind), &b.name)));
    }

    /// The text of `moniker.lock`: a header, then one line per exposed name, sorted.
    pub fn render(&self) -> String {
        let mut out = String::from(HEADER);
        out.push('\n');
        for entry in &self.entries {
            out.push_str(&render_entry(entry));
            out.push('\n');
            if let Some(seal) = &entry.seal {
                seal.render(&mut out);
            }
            for member in &entry.members {
                out.push_str(&format!(
                    "  member {} {} {}\n",
                    escape(&member.name),
                    escape(&member.server),
                    escape(&member.origin)
                ));
                member.seal.render(&mut out);
            }
        }
        for (server, sandbox) in &self.sandboxes {
            out.push_str(&format!("sandbox {} {sandbox}\n", escape(server)));
        }
        out
    }

    /// Reads the text of `moniker.lock`; blank lines and `#` comments are skipped. An indented
    /// line is a field of the seal of the entry above it.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let mut entries: Vec<Entry> = Vec::new();
        let mut sandboxes = BTreeMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let error = |message| ParseError {
                line: i + 1,
                message,
            };
            if raw.starts_with(' ') {
                let entry = entries
                    .last_mut()
                    .ok_or_else(|| error("an indented line before any entry".to_owned()))?;
                if let Some(member) = line.strip_prefix("member ") {
                    let words: Vec<&str> = member.split(' ').collect();
                    let [name, server, origin] = words[..] else {
                        return Err(error(
                            "`member` takes a name, a server and the server's name".to_owned(),
                        ));
                    };
                    entry.members.push(MemberSeal {
                        name: unescape(name).map_err(error)?,
                        server: unescape(server).map_err(error)?,
                        origin: unescape(origin).map_err(error)?,
                        seal: Seal::default(),
                    });
                    continue;
                }
                let seal = match entry.members.last_mut() {
                    Some(member) => &mut member.seal,
                    None => entry.seal.get_or_insert_with(Seal::default),
                };
                seal.read(line).map_err(error)?;
                continue;
            }
            if let Some(rest) = line.strip_prefix("sandbox ") {
                let (server, sandbox) = rest
                    .split_once(' ')
                    .ok_or_else(|| error("`sandbox` takes a server and its settings".to_owned()))?;
                sandboxes.insert(unescape(server).map_err(error)?, sandbox.to_owned());
                continue;
            }
            entries.push(parse_entry(line).map_err(error)?);
        }
        entries.sort_by(|a, b| (kind_str(a.kind), &a.name).cmp(&(kind_str(b.kind), &b.name)));
        Ok(Self { entries, sandboxes })
    }
}

/// A line of `moniker.lock` that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

fn kind_str(kind: Kind) -> &'static str {
    match kind {
        Kind::Tool => "tool",
        Kind::Prompt => "prompt",
    }
}

fn render_entry(entry: &Entry) -> String {
    let params: Vec<String> = entry
        .params
        .iter()
        .map(|p| {
            format!(
                "{}{}:{}",
                escape(&p.name),
                if p.required { "!" } else { "" },
                escape(&p.ty)
            )
        })
        .collect();
    let mut line = format!(
        "{} {} server={} origin={} schema={:016x} params={}",
        kind_str(entry.kind),
        escape(&entry.name),
        escape(&entry.server),
        escape(&entry.origin),
        entry.schema,
        params.join(",")
    );
    for (key, names) in [("aliases", &entry.aliases), ("hidden", &entry.hidden)] {
        if !names.is_empty() {
            let names: Vec<String> = names.iter().map(|n| escape(n)).collect();
            line.push_str(&format!(" {key}={}", names.join(",")));
        }
    }
    line
}

fn parse_entry(line: &str) -> Result<Entry, String> {
    let mut words = line.split(' ').filter(|w| !w.is_empty());
    let kind = match words.next() {
        Some("tool") => Kind::Tool,
        Some("prompt") => Kind::Prompt,
        Some(other) => return Err(format!("`{other}` is not `tool` or `prompt`")),
        None => return Err("an empty line".to_owned()),
    };
    let name = unescape(words.next().ok_or("no name after the kind")?)?;
    let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
    for word in words {
        let (key, value) = word
            .split_once('=')
            .ok_or_else(|| format!("`{word}` is not `key=value`"))?;
        if !matches!(
            key,
            "server" | "origin" | "schema" | "params" | "aliases" | "hidden"
        ) {
            return Err(format!(
                "unknown key `{key}`: expected server, origin, schema, params, aliases or hidden"
            ));
        }
        if fields.insert(key, value).is_some() {
            return Err(format!("`{key}` is given twice"));
        }
    }
    let field = |key: &str| {
        fields
            .get(key)
            .copied()
            .ok_or_else(|| format!("`{name}` has no `{key}=`"))
    };
    let schema = field("schema")?;
    let schema = u64::from_str_radix(schema, 16)
        .map_err(|_| format!("schema `{schema}` is not a hexadecimal hash"))?;
    let list = |key: &str| -> Result<Vec<String>, String> {
        match fields.get(key) {
            None | Some(&"") => Ok(Vec::new()),
            Some(v) => v.split(',').map(unescape).collect(),
        }
    };
    let params = match fields.get("params") {
        None | Some(&"") => Vec::new(),
        Some(v) => v.split(',').map(parse_param).collect::<Result<_, _>>()?,
    };
    Ok(Entry {
        kind,
        server: unescape(field("server")?)?,
        origin: unescape(field("origin")?)?,
        schema,
        params,
        aliases: list("aliases")?,
        hidden: list("hidden")?,
        seal: None,
        members: Vec::new(),
        name,
    })
}

/// `name!:type`, its parts still escaped: the separators `!` and `:` are escaped in names.
fn parse_param(text: &str) -> Result<Param, String> {
    let (name, ty) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("parameter `{text}` is not `name:type`"))?;
    let (name, required) = split_required(name);
    Ok(Param {
        name: unescape(name)?,
        ty: unescape(ty)?,
        required,
    })
}

/// A parameter's name without its `!`, and whether it had one (it is required).
fn split_required(name: &str) -> (&str, bool) {
    match name.strip_suffix('!') {
        Some(name) => (name, true),
        None => (name, false),
    }
}

/// Bytes outside `[A-Za-z0-9_.\-/|$@]` as `%XX`: the separators of the format (space, `=`,
/// `,`, `:`, `!`) never appear inside a value.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'/' | b'|' | b'$' | b'@')
        {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn unescape(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("a bad escape in `{text}`"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("`{text}` is not UTF-8 once unescaped"))
}

fn tool_params(schema: &Value) -> Vec<Param> {
    let required: BTreeSet<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut params: Vec<Param> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(name, prop)| Param {
                    name: name.clone(),
                    ty: type_of(prop),
                    required: required.contains(name.as_str()),
                })
                .collect()
        })
        .unwrap_or_default();
    params.sort();
    params
}

fn type_of(prop: &Value) -> String {
    match prop.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(types)) => joined_types(types),
        _ => "any".to_owned(),
    }
}

/// A list of types as one: sorted, joined with `|`.
fn joined_types(types: &[Value]) -> String {
    let mut types: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
    types.sort_unstable();
    types.join("|")
}

fn prompt_params(arguments: &Value) -> Vec<Param> {
    let mut params: Vec<Param> = arguments
        .as_array()
        .map(|args| {
            args.iter()
                .filter_map(|a| {
                    Some(Param {
                        name: a.get("name")?.as_str()?.to_owned(),
                        ty: "string".to_owned(),
                        required: a.get("required").and_then(Value::as_bool) == Some(true),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    params.sort();
    params
}

/// JSON with the keys of every object sorted: the same schema in any key order gives the
/// same text.
pub fn canonical(value: &Value) -> String {
    // A `Value` is always readable.
    canonical_text(&value.to_string()).unwrap_or_default()
}

/// The canonical text of JSON `text` (keys sorted at every level, strings as serde_json writes
/// them), read without serde_json's `Value`: every number keeps its bytes (`1e400`, or
/// `18446744073709551617`, which an f64 would hold as its neighbour's value), so two
/// definitions that differ there differ here. `None` when some part of it cannot be read at
/// all, or an object names a key twice (one reader takes the first, another the last).
pub fn canonical_text(text: &str) -> Option<String> {
    let mut out = String::new();
    write_canonical_text(text.trim(), &mut out).then_some(out)
}

fn write_canonical_text(text: &str, out: &mut String) -> bool {
    match text.as_bytes().first() {
        Some(b'{') => {
            let Ok(Entries(entries)) = serde_json::from_str::<Entries<'_>>(text) else {
                return false;
            };
            let count = entries.len();
            let map: BTreeMap<String, &RawValue> = entries.into_iter().collect();
            if map.len() != count {
                return false;
            }
            out.push('{');
            for (i, (key, value)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if !write_canonical_text(value.get(), out) {
                    return false;
                }
            }
            out.push('}');
            true
        }
        Some(b'[') => {
            let Ok(items) = serde_json::from_str::<Vec<&RawValue>>(text) else {
                return false;
            };
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if !write_canonical_text(item.get(), out) {
                    return false;
                }
            }
            out.push(']');
            true
        }
        // A number, as written (it is valid JSON: it came as a `RawValue`).
        Some(first) if *first == b'-' || first.is_ascii_digit() => {
            out.push_str(text);
            true
        }
        Some(_) => match serde_json::from_str::<Value>(text) {
            Ok(scalar) => {
                out.push_str(&scalar.to_string());
                true
            }
            Err(_) => false,
        },
        None => false,
    }
}

/// An object's entries as written, a key named twice included.
pub(super) struct Entries<'a>(pub(super) Vec<(String, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for Entries<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Entries<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Entries<'de>, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// FNV-1a, 64 bits: small, stable across versions and platforms, and enough to tell schemas
/// apart (it is not a defence against anyone).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// A change that breaks a client relying on the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Breaking {
    /// Names of a locked entry that resolve to nothing now.
    Gone {
        kind: Kind,
        /// The locked entry's name.
        entry: String,
        server: String,
        /// The names that are gone (the entry's name, its aliases).
        names: Vec<String>,
        /// Where the names likely went, and the override that keeps them working.
        fix: Option<Keep>,
    },
    /// A parameter that is required now and was not (or did not exist).
    NewRequired {
        kind: Kind,
        name: String,
        param: String,
    },
    /// A parameter whose type changed.
    TypeChanged {
        kind: Kind,
        name: String,
        param: String,
        was: String,
        now: String,
    },
}

/// Where gone names likely went: an exposed item of the same server, and the override that
/// gives it the gone names as aliases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keep {
    /// The exposed name the gone names now belong to.
    pub target: String,
    /// Renamed (`true`), or the entry's name is still there and only aliases went.
    pub renamed: bool,
    /// `tools` or `prompts`.
    pub section: &'static str,
    /// The override's line under its section: `discover_sub_goals: { aliases: [discover_goals] }`.
    pub entry: String,
    /// Ready to paste: `tools:\n  discover_sub_goals: { aliases: [discover_goals] }`.
    pub yaml: String,
}

/// The overrides of every gone name with a fix, in one block per section (pasting several
/// blocks one after the other would repeat a key); `None` when fewer than two need one.
pub fn merged_fix(breaking: &[Breaking]) -> Option<String> {
    let mut sections: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for b in breaking {
        if let Breaking::Gone { fix: Some(fix), .. } = b {
            let entries = sections.entry(fix.section).or_default();
            if !entries.contains(&fix.entry.as_str()) {
                entries.push(&fix.entry);
            }
        }
    }
    if sections.values().map(Vec::len).sum::<usize>() < 2 {
        return None;
    }
    let blocks: Vec<String> = sections
        .into_iter()
        .map(|(section, entries)| format!("{section}:\n  {}", entries.join("\n  ")))
        .collect();
    Some(blocks.join("\n"))
}

impl Breaking {
    /// A stable code for the diagnostic.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Gone { .. } => "lock::gone",
            Self::NewRequired { .. } => "lock::new_required",
            Self::TypeChanged { .. } => "lock::type_changed",
        }
    }
}

impl fmt::Display for Breaking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Gone {
                kind,
                server,
                names,
                fix,
                ..
            } => {
                let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
                write!(
                    f,
                    "{} {} of server `{server}` {} gone",
                    kind_str(*kind),
                    names.join(", "),
                    if names.len() == 1 { "is" } else { "are" }
                )?;
                match fix {
                    Some(Keep {
                        target,
                        renamed: true,
                        ..
                    }) => write!(f, ": likely renamed to `{target}`"),
                    _ => Ok(()),
                }
            }
            Self::NewRequired { kind, name, param } => write!(
                f,
                "{} `{name}` now requires parameter `{param}`",
                kind_str(*kind)
            ),
            Self::TypeChanged {
                kind,
                name,
                param,
                was,
                now,
            } => write!(
                f,
                "parameter `{param}` of {} `{name}` changed type: `{was}` -> `{now}`",
                kind_str(*kind)
            ),
        }
    }
}

/// What in `surface` breaks a client relying on `lock`: names that are gone, parameters now
/// required, parameters whose type changed. Empty for a surface compared with its own lock.
pub fn compare(lock: &Lock, surface: &Surface) -> Vec<Breaking> {
    let now = Lock::made(surface, None);
    let locked_names: BTreeSet<(&'static str, &str)> = lock
        .entries
        .iter()
        .flat_map(|e| e.names().map(move |n| (kind_str(e.kind), n)))
        .collect();
    let mut out = Vec::new();
    for entry in &lock.entries {
        let gone: Vec<String> = entry
            .names()
            .filter(|n| surface.resolve(entry.kind, n).is_none())
            .map(str::to_owned)
            .collect();
        // What the entry is now: the item its name (or a remaining alias) resolves to.
        let current = entry
            .names()
            .find_map(|n| surface.resolve(entry.kind, n))
            .map(|r| Entry::from_exposed(entry.kind, r.exposed, None));
        if !gone.is_empty() {
            let target = match &current {
                Some(current) => Some((current, false)),
                None => likely_rename(entry, &now, &locked_names).map(|t| (t, true)),
            };
            let fix = target.and_then(|(target, renamed)| {
                keep(entry, &gone, target, surface).map(|line| Keep {
                    target: target.name.clone(),
                    renamed,
                    section: entry.kind.section(),
                    yaml: format!("{}:\n  {line}", entry.kind.section()),
                    entry: line,
                })
            });
            out.push(Breaking::Gone {
                kind: entry.kind,
                entry: entry.name.clone(),
                server: entry.server.clone(),
                names: gone,
                fix,
            });
        }
        if let Some(current) = current {
            out.extend(param_changes(entry, &current));
        }
    }
    out
}

/// An item of the same server and kind, named by nothing in the lock, with the same schema
/// or, failing that, the same parameter names and types. Only an unambiguous one.
fn likely_rename<'a>(
    entry: &Entry,
    now: &'a Lock,
    locked_names: &BTreeSet<(&'static str, &str)>,
) -> Option<&'a Entry> {
    let candidates: Vec<&Entry> = now
        .entries
        .iter()
        .filter(|e| e.kind == entry.kind && e.server == entry.server)
        .filter(|e| {
            !e.names()
                .any(|n| locked_names.contains(&(kind_str(e.kind), n)))
        })
        .collect();
    let exact: Vec<&Entry> = candidates
        .iter()
        .copied()
        .filter(|e| e.schema == entry.schema)
        .collect();
    let pick = |found: Vec<&'a Entry>| (found.len() == 1).then(|| found[0]);
    pick(exact).or_else(|| {
        pick(
            candidates
                .into_iter()
                .filter(|e| e.same_shape(entry))
                .collect(),
        )
    })
}

/// The override that gives `target` the `gone` names as aliases (hidden ones stay hidden),
/// keeping the aliases the target has: `<origin>: { aliases: [...] }`, the line under `tools:`.
/// `None` for an action tool, whose aliases live in `actions:`.
fn keep(entry: &Entry, gone: &[String], target: &Entry, surface: &Surface) -> Option<String> {
    if target.origin == "-" {
        return None;
    }
    let hidden_gone = |n: &String| entry.hidden.contains(n);
    let mut aliases: Vec<String> = target.aliases.clone();
    aliases.extend(gone.iter().filter(|n| !hidden_gone(n)).cloned());
    let mut hidden: Vec<String> = target.hidden.clone();
    hidden.extend(gone.iter().filter(|n| hidden_gone(n)).cloned());
    let mut items: Vec<String> = aliases.iter().map(|a| yaml_scalar(a)).collect();
    items.extend(
        hidden
            .iter()
            .map(|h| format!("{{ name: {}, hidden: true }}", yaml_scalar(h))),
    );
    // The bare origin name is the key when no other server lists a tool by that name.
    let shared = surface
        .items(entry.kind)
        .iter()
        .filter_map(Exposed::origin)
        .filter(|o| o.name == target.origin)
        .count()
        > 1;
    let key = if shared {
        format!("{}/{}", target.server, target.origin)
    } else {
        target.origin.clone()
    };
    let name = if target.name == target.origin {
        String::new()
    } else {
        format!("name: {}, ", yaml_scalar(&target.name))
    };
    Some(format!(
        "{}: {{ {name}aliases: [{}] }}",
        yaml_scalar(&key),
        items.join(", ")
    ))
}

fn param_changes(entry: &Entry, current: &Entry) -> Vec<Breaking> {
    let before: BTreeMap<&str, &Param> =
        entry.params.iter().map(|p| (p.name.as_str(), p)).collect();
    let mut out = Vec::new();
    for param in &current.params {
        match before.get(param.name.as_str()) {
            Some(old) if old.ty != param.ty => out.push(Breaking::TypeChanged {
                kind: entry.kind,
                name: entry.name.clone(),
                param: param.name.clone(),
                was: old.ty.clone(),
                now: param.ty.clone(),
            }),
            Some(old) if param.required && !old.required => out.push(Breaking::NewRequired {
                kind: entry.kind,
                name: entry.name.clone(),
                param: param.name.clone(),
            }),
            None if param.required => out.push(Breaking::NewRequired {
                kind: entry.kind,
                name: entry.name.clone(),
                param: param.name.clone(),
            }),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests;
