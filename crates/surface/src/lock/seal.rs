//! Integrity (DESIGN "moniker owns the whole interface"): the lock keeps, per tool, what its
//! server said of it that a model reads (its description, annotations, input and output
//! schemas) and the server's version; [`drift`] finds the tools that changed since, or that
//! are new. Under `integrity: block` those are withheld until a person accepts them
//! (`moniker lock --accept TOOL`); under `warn` they are served and said.
//!
//! It is the server's text that is sealed, not moniker's rewrite of it: a change of the config
//! (a new alias, a parameter rule) is the user's own and changes no seal.

use std::collections::HashMap;
use std::fmt;

use indexmap::IndexMap;
use serde_json::Value;
use serde_json::value::RawValue;

use super::{Lock, canonical};
use crate::listing::Listing;
use crate::surface::{Origin, Route, Surface};
use crate::vocab::Kind;

/// What `integrity` says of a tool that drifted from the lock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Integrity {
    /// Served, with a warning in the log, `/healthz` and `doctor`.
    #[default]
    Warn,
    /// Withheld: not listed, and its calls refused with the command that accepts it.
    Block,
}

/// The fields of a tool a seal covers, in the order they are written and said.
pub const FIELDS: [&str; 4] = ["description", "annotations", "input", "output"];

/// What a server said of one tool, each field as canonical JSON (`None`: not said).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seal {
    /// The server's version when the seal was made; a new version alone is no drift.
    pub version: Option<String>,
    /// `description`, `annotations`, `inputSchema` and `outputSchema`, as [`FIELDS`] names them.
    pub fields: [Option<String>; 4],
}

impl Seal {
    /// The seal of the definition a server listed.
    pub fn of(definition: &RawValue, version: Option<&str>) -> Self {
        let parsed: IndexMap<String, Value> =
            serde_json::from_str(definition.get()).unwrap_or_default();
        let field = |key: &str| parsed.get(key).map(canonical);
        Self {
            version: version.map(str::to_owned),
            fields: [
                field("description"),
                field("annotations"),
                field("inputSchema"),
                field("outputSchema"),
            ],
        }
    }

    /// The fields that differ from `now`'s, by their [`FIELDS`] names.
    pub fn changes(&self, now: &Seal) -> Vec<&'static str> {
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
        let value: Value =
            serde_json::from_str(json).map_err(|e| format!("`{key}` is not JSON: {e}"))?;
        if key == "version" {
            let Value::String(version) = value else {
                return Err("`version` is not a string".to_owned());
            };
            self.version = Some(version);
            return Ok(());
        }
        let at = FIELDS.iter().position(|f| *f == key).ok_or_else(|| {
            format!(
                "unknown field `{key}`: expected version, {}",
                FIELDS.join(", ")
            )
        })?;
        self.fields[at] = Some(canonical(&value));
        Ok(())
    }
}

/// A tool that is not as the lock has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    /// Its exposed name now.
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
        if self.is_new() {
            write!(
                f,
                "tool `{}` of server `{}` is not in moniker.lock",
                self.tool, self.origin.server
            )
        } else {
            write!(
                f,
                "tool `{}` of server `{}` changed since moniker.lock: {}",
                self.tool,
                self.origin.server,
                self.changed.join(", ")
            )
        }
    }
}

/// Where each server's tools are in `listings`: (server, origin name) to the definition and
/// the server's version.
pub(super) fn definitions<'l>(
    listings: &[&'l Listing],
) -> HashMap<(&'l str, String), (&'l RawValue, Option<&'l str>)> {
    #[derive(serde::Deserialize)]
    struct Named {
        name: String,
    }
    let mut out = HashMap::new();
    for listing in listings {
        for tool in &listing.tools {
            if let Ok(Named { name }) = serde_json::from_str(tool.get()) {
                out.insert(
                    (listing.server.as_str(), name),
                    (&**tool, listing.version.as_deref()),
                );
            }
        }
    }
    out
}

/// Every tool of `surface` (listed or only callable) whose server's definition in `listings`
/// is not as `lock` sealed it, or that `lock` has no seal of. An entry is matched by its
/// server and origin name: renaming a tool in the config changes no seal.
pub fn drift(lock: &Lock, surface: &Surface, listings: &[&Listing]) -> Vec<Drift> {
    let sealed: HashMap<(&str, &str), Option<&Seal>> = lock
        .entries
        .iter()
        .filter(|e| e.kind == Kind::Tool && e.origin != "-")
        .map(|e| ((e.server.as_str(), e.origin.as_str()), e.seal.as_ref()))
        .collect();
    let definitions = definitions(listings);
    let mut out = Vec::new();
    for tool in surface.tools() {
        let Route::Origin(origin) = &tool.route else {
            continue;
        };
        let Some((definition, version)) =
            definitions.get(&(origin.server.as_str(), origin.name.clone()))
        else {
            continue;
        };
        let now = Seal::of(definition, *version);
        let changed = match sealed.get(&(origin.server.as_str(), origin.name.as_str())) {
            Some(Some(seal)) => match seal.changes(&now) {
                changes if changes.is_empty() => continue,
                changes => changes,
            },
            _ => Vec::new(),
        };
        out.push(Drift {
            tool: tool.name.clone(),
            origin: origin.clone(),
            changed,
        });
    }
    out
}
