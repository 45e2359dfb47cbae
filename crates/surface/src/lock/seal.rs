//! Integrity (DESIGN "moniker owns the whole interface"): the lock keeps, per tool and prompt
//! (an action tool's members included, whatever its `legacy`), the whole of what its server
//! said of it but its name (description, annotations, schemas, and every other field: title,
//! icons, `_meta`, execution, fields moniker does not know), as canonical bytes, and the
//! server's version; [`drift`] finds the items that changed since, or that are new. A
//! definition that cannot be read counts as changed, never as empty. Under `integrity: block` those are withheld until a person accepts them
//! (`moniker lock --accept TOOL`); under `warn` they are served and said.
//!
//! It is the server's text that is sealed, not moniker's rewrite of it: a change of the config
//! (a new alias, a parameter rule) is the user's own and changes no seal.

use std::collections::HashMap;
use std::fmt;

use indexmap::IndexMap;
use serde_json::Value;
use serde_json::value::RawValue;

use super::{Lock, canonical_text};
use crate::listing::Listing;
use crate::surface::{Origin, Route, Surface};
use crate::vocab::Kind;

/// The fields of a definition a seal does not cover: its name, which moniker writes.
const OWN: [&str; 6] = [
    "name",
    "description",
    "annotations",
    "inputSchema",
    "arguments",
    "outputSchema",
];

/// What `integrity` says of a tool that drifted from the lock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Integrity {
    /// Served, with a warning in the log, `/healthz` and `doctor`.
    #[default]
    Warn,
    /// Withheld: not listed, and its calls refused with the command that accepts it.
    Block,
}

/// The fields of a tool a seal covers, in the order they are written and said: `other` is
/// every field of the definition but its name and the four before it, as one object.
pub const FIELDS: [&str; 5] = ["description", "annotations", "input", "output", "other"];

/// What a seal says of a definition it could not read.
pub const UNREADABLE: &str = "definition (it cannot be read)";

/// What a server said of one tool or prompt, each field as canonical JSON (`None`: not said).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seal {
    /// The server's version when the seal was made; a new version alone is no drift.
    pub version: Option<String>,
    /// `description`, `annotations`, `inputSchema` (a prompt's `arguments`), `outputSchema`
    /// and the rest, as [`FIELDS`] names them.
    pub fields: [Option<String>; 5],
    /// The definition could not be read: it differs from every seal, its own included.
    pub unreadable: bool,
}

impl Seal {
    /// The seal of the definition a server listed.
    pub fn of(definition: &RawValue, version: Option<&str>) -> Self {
        let version = version.map(str::to_owned);
        match Self::fields_of(definition) {
            Some(fields) => Self {
                version,
                fields,
                unreadable: false,
            },
            None => Self {
                version,
                fields: Default::default(),
                unreadable: true,
            },
        }
    }

    /// Each field of `definition` in canonical form; `None` when any part cannot be read.
    fn fields_of(definition: &RawValue) -> Option<[Option<String>; 5]> {
        let super::Entries(entries) = serde_json::from_str(definition.get()).ok()?;
        let count = entries.len();
        let parsed: IndexMap<String, &RawValue> = entries.into_iter().collect();
        // A field named twice: one reader takes the first, another the last.
        if parsed.len() != count {
            return None;
        }
        let field = |keys: &[&str]| -> Option<Option<String>> {
            match keys.iter().find_map(|k| parsed.get(*k)) {
                Some(raw) => canonical_text(raw.get()).map(Some),
                None => Some(None),
            }
        };
        let mut other = String::new();
        let mut rest: Vec<(&String, &&RawValue)> = parsed
            .iter()
            .filter(|(k, _)| !OWN.contains(&k.as_str()))
            .collect();
        rest.sort_by(|a, b| a.0.cmp(b.0));
        for (key, value) in &rest {
            other.push(if other.is_empty() { '{' } else { ',' });
            other.push_str(&serde_json::to_string(key).ok()?);
            other.push(':');
            other.push_str(&canonical_text(value.get())?);
        }
        let other = (!rest.is_empty()).then(|| other + "}");
        Some([
            field(&["description"])?,
            field(&["annotations"])?,
            field(&["inputSchema", "arguments"])?,
            field(&["outputSchema"])?,
            other,
        ])
    }

    /// The fields that differ from `now`'s, by their [`FIELDS`] names ([`UNREADABLE`] when
    /// either could not be read).
    pub fn changes(&self, now: &Seal) -> Vec<&'static str> {
        if self.unreadable || now.unreadable {
            return vec![UNREADABLE];
        }
        FIELDS
            .iter()
            .zip(self.fields.iter().zip(&now.fields))
            .filter(|(_, (was, is))| was != is)
            .map(|(name, _)| *name)
            .collect()
    }

    /// The lines the lock keeps it in, after its entry's line: two spaces, the field, its JSON.
    pub(super) fn render(&self, out: &mut String) {
        if let Some(version) = &self.version {
            out.push_str(&format!("  version {}\n", Value::String(version.clone())));
        }
        if self.unreadable {
            out.push_str("  unreadable true\n");
        }
        for (name, value) in FIELDS.iter().zip(&self.fields) {
            if let Some(value) = value {
                out.push_str(&format!("  {name} {value}\n"));
            }
        }
    }

    /// Reads one of those lines (trimmed) into the seal.
    pub(super) fn read(&mut self, line: &str) -> Result<(), String> {
        let (key, json) = line
            .split_once(' ')
            .ok_or_else(|| format!("`{line}` is not `<field> <JSON>`"))?;
        match key {
            "version" => {
                let version = serde_json::from_str(json)
                    .map_err(|_| "`version` is not a JSON string".to_owned())?;
                self.version = Some(version);
            }
            "unreadable" => self.unreadable = json == "true",
            _ => {
                let at = FIELDS.iter().position(|f| *f == key).ok_or_else(|| {
                    format!(
                        "unknown field `{key}`: expected version, unreadable, {}",
                        FIELDS.join(", ")
                    )
                })?;
                let canonical =
                    canonical_text(json).ok_or_else(|| format!("`{key}` is not JSON"))?;
                self.fields[at] = Some(canonical);
            }
        }
        Ok(())
    }
}

/// A tool or prompt that is not as the lock has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    pub kind: Kind,
    /// Its exposed name now (a member's, for a member of an action tool).
    pub tool: String,
    /// Its server, and the name the server lists it by.
    pub origin: Origin,
    /// What changed (by [`FIELDS`] names); empty: the lock has no seal of it (a new tool).
    pub changed: Vec<&'static str>,
}

impl Drift {
    pub fn is_new(&self) -> bool {
        self.changed.is_empty()
    }

    /// A stable code for the diagnostic.
    pub fn code(&self) -> &'static str {
        if self.is_new() {
            "lock::new_tool"
        } else {
            "lock::changed"
        }
    }

    /// The message a call of a withheld tool is refused with.
    pub fn refusal(&self) -> String {
        format!(
            "{self}: it is withheld (`integrity: block`); `moniker lock --diff` shows what changed, `moniker lock --accept {}` serves it",
            self.tool
        )
    }
}

impl fmt::Display for Drift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let noun = match self.kind {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
        };
        if self.is_new() {
            write!(
                f,
                "{noun} `{}` of server `{}` is not in moniker.lock",
                self.tool, self.origin.server
            )
        } else {
            write!(
                f,
                "{noun} `{}` of server `{}` changed since moniker.lock: {}",
                self.tool,
                self.origin.server,
                self.changed.join(", ")
            )
        }
    }
}

/// Where each server's tools and prompts are in `listings`: (kind, server, origin name) to the
/// definition and the server's version.
pub(super) fn definitions<'l>(
    listings: &[&'l Listing],
) -> HashMap<(Kind, &'l str, String), (&'l RawValue, Option<&'l str>)> {
    #[derive(serde::Deserialize)]
    struct Named {
        name: String,
    }
    let mut out = HashMap::new();
    for listing in listings {
        let items = [
            (Kind::Tool, &listing.tools),
            (Kind::Prompt, &listing.prompts),
        ];
        for (kind, definitions) in items {
            for definition in definitions {
                if let Ok(Named { name }) = serde_json::from_str(definition.get()) {
                    out.insert(
                        (kind, listing.server.as_str(), name),
                        (&**definition, listing.version.as_deref()),
                    );
                }
            }
        }
    }
    out
}

/// Every item of `surface` whose server's definition in `listings` is not as `lock` sealed
/// it, or that `lock` has no seal of: tools and prompts listed or only callable, and each
/// member of an action tool (whether or not it is exposed on its own). An item is matched by
/// its kind, server and origin name: renaming it in the config changes no seal.
pub fn drift(lock: &Lock, surface: &Surface, listings: &[&Listing]) -> Vec<Drift> {
    let mut sealed: HashMap<(Kind, &str, &str), &Seal> = HashMap::new();
    for entry in &lock.entries {
        if let Some(seal) = &entry.seal {
            sealed.insert((entry.kind, &entry.server, &entry.origin), seal);
        }
        for member in &entry.members {
            sealed.insert((entry.kind, &member.server, &member.origin), &member.seal);
        }
    }
    let definitions = definitions(listings);
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for kind in [Kind::Tool, Kind::Prompt] {
        for item in surface.items(kind) {
            let origins: Vec<(&str, &Origin)> = match &item.route {
                Route::Origin(origin) => vec![(item.name.as_str(), origin)],
                Route::Action(action) => action
                    .members
                    .iter()
                    .map(|m| (m.name.as_str(), &m.origin))
                    .collect(),
            };
            for (name, origin) in origins {
                let key = (kind, origin.server.as_str(), origin.name.as_str());
                let Some((definition, version)) =
                    definitions.get(&(kind, key.1, origin.name.clone()))
                else {
                    continue;
                };
                if !seen.insert(key) {
                    continue;
                }
                let now = Seal::of(definition, *version);
                let changed = match sealed.get(&key) {
                    Some(seal) => match seal.changes(&now) {
                        changes if changes.is_empty() => continue,
                        changes => changes,
                    },
                    None => Vec::new(),
                };
                out.push(Drift {
                    kind,
                    tool: name.to_owned(),
                    origin: origin.clone(),
                    changed,
                });
            }
        }
    }
    out
}

/// Withholds the tools and prompts in `why` (by kind, server and origin name): no longer
/// listed (nor found by a search), their calls refused with the reason given. An action
/// tool some of whose members are withheld is listed as made of the others alone (their
/// text is not shown, their actions refused with the reason); with none left, it is
/// withheld whole.
pub fn withhold(surface: &mut Surface, why: &HashMap<(Kind, Origin), std::sync::Arc<str>>) {
    if why.is_empty() {
        return;
    }
    let shared_server = surface.server(Kind::Tool).is_some();
    for kind in [Kind::Tool, Kind::Prompt] {
        for item in surface.items_mut(kind).iter_mut() {
            let reason_of = |origin: &Origin| why.get(&(kind, origin.clone())).cloned();
            let kept: std::collections::BTreeSet<String> = match &mut item.route {
                Route::Origin(origin) => {
                    if let Some(reason) = reason_of(origin) {
                        item.listed = false;
                        item.withheld = Some(reason);
                    }
                    continue;
                }
                Route::Action(route) => {
                    for member in &mut route.members {
                        member.withheld = reason_of(&member.origin);
                    }
                    if route.members.iter().all(|m| m.withheld.is_none()) {
                        continue;
                    }
                    route
                        .members
                        .iter()
                        .filter(|m| m.withheld.is_none())
                        .map(|m| m.action.clone())
                        .collect()
                }
            };
            match crate::naming::narrowed(item, &kept, shared_server) {
                // Listed as the others make it; its route keeps every member, so a withheld
                // action is refused with its reason rather than unknown.
                Some(narrowed) => item.definition = narrowed.definition,
                None => {
                    let first = match &item.route {
                        Route::Action(route) => {
                            route.members.iter().find_map(|m| m.withheld.clone())
                        }
                        Route::Origin(_) => None,
                    };
                    item.listed = false;
                    item.withheld = first;
                }
            }
        }
    }
}
