//! A client's config file read as it is: Claude Desktop's `claude_desktop_config.json` and
//! Cursor's `mcp.json` (`mcpServers`), VS Code's `.vscode/mcp.json` (`servers`, `inputs`).
//! Their servers are moniker's servers; their other top-level keys (`globalShortcut`,
//! `preferences`, `inputs`) belong to the client, and are left out and listed for the log
//! instead of refused.
//!
//! Which files are a client's: those with none of moniker's own sections
//! ([`moniker_sections`]) and either `mcpServers`, or a `servers` section in VS Code's shape
//! (the file has `inputs`, or every server has a `type` and none of moniker's own server keys
//! `tags`, `prefix`, `disabled`). Every other file is a moniker config, where an unknown key
//! is an error. `servers` alone cannot decide: it is moniker's section too. Even in a
//! client's file, a key very close to one of moniker's (`namng`) is refused as a misspelling:
//! a naming rule silently ignored would be worse than an error.

use moniker_surface::vocab::Seg;

use super::{Cx, Fields, Slot};
use crate::report::codes;
use crate::shape::keys;
use crate::tree::{Node, Value, shorten};

/// The top-level sections only a moniker config has: all but the servers' two names.
fn moniker_sections() -> impl Iterator<Item = &'static str> {
    keys::FILE
        .iter()
        .copied()
        .filter(|key| !matches!(*key, "servers" | "mcpServers"))
}
/// Server keys VS Code's `servers` entries never have.
pub(crate) const MONIKER_SERVER_KEYS: &[&str] = &["tags", "prefix", "disabled"];
/// How close (Jaro-Winkler) a client's key may come to one of moniker's before it is taken
/// for a misspelling: stricter than the did-you-mean's 0.8, so that a client's own keys
/// (`projects` in Claude Code's file, 0.85 from `prompts`) are not refused.
const MISSPELLING: f64 = 0.9;

/// Whether `root` is a client's config file (see the module's comment).
pub(super) fn is_client_file(root: &Node) -> bool {
    let Value::Map(entries) = &root.value else {
        return false;
    };
    let get = |name: &str| {
        entries
            .iter()
            .find(|e| e.key.as_deref() == Some(name))
            .map(|e| &e.value)
    };
    if moniker_sections().any(|s| get(s).is_some()) {
        return false;
    }
    if get("mcpServers").is_some() {
        return true;
    }
    get("servers").is_some_and(|servers| get("inputs").is_some() || vs_code_shape(servers))
}

/// A non-empty map of servers, each with a `type` and none of moniker's own keys.
fn vs_code_shape(servers: &Node) -> bool {
    let Value::Map(entries) = &servers.value else {
        return false;
    };
    !entries.is_empty() && entries.iter().all(|server| vs_code_server(&server.value))
}

/// A map with a `type` and none of moniker's own server keys.
fn vs_code_server(server: &Node) -> bool {
    let Value::Map(fields) = &server.value else {
        return false;
    };
    let has = |name: &str| fields.iter().any(|f| f.key.as_deref() == Some(name));
    has("type") && !MONIKER_SERVER_KEYS.iter().any(|k| has(k))
}

impl Cx<'_> {
    /// The top-level entries of a client's file that are moniker's (its servers). The
    /// client's own keys are left out and added to `ignored`, except misspellings of
    /// moniker's keys, which are refused.
    pub(super) fn client_fields<'n>(
        &mut self,
        slot: Slot<'n>,
        ignored: &mut Vec<String>,
    ) -> Fields<'n> {
        let mut fields = self.fields(slot, &[], None, "a map of sections");
        let mut ours = Vec::with_capacity(fields.entries.len());
        for (key, value) in fields.entries {
            if keys::FILE.contains(&key) {
                ours.push((key, value));
                continue;
            }
            match misspelt(key) {
                Some(close) => self.error(
                    codes::UNKNOWN_KEY,
                    format!("unknown key `{}`", shorten(key)),
                    &[Seg::Key(key)],
                    value.key.unwrap_or(value.node.span),
                    Some(format!("did you mean `{close}`?")),
                ),
                None => ignored.push(key.to_owned()),
            }
        }
        fields.entries = ours;
        fields
    }
}

/// The moniker key `key` is very probably a misspelling of.
fn misspelt(key: &str) -> Option<&'static str> {
    keys::FILE
        .iter()
        .map(|k| (strsim::jaro_winkler(key, k), *k))
        .filter(|(score, _)| *score > MISSPELLING)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests;
