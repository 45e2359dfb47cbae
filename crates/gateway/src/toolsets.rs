//! Toolsets in the gateway: the catalog (the config's static toolsets and the store's run-time
//! ones) and moniker's own management tools, which clients call to build, equip and delete
//! toolsets. What a toolset selects, and how names resolve in it, is the pure core's
//! (`moniker_surface::toolsets`).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Mutex;

use moniker_surface::toolsets::{self, Selection, ToolsetRule};
use moniker_surface::{Diagnostic, Discovery, Kind, Surface, listing};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::budget;
use crate::store::{Backend, StoredTool, StoredToolset};
use crate::sync::lock;

/// Every toolset a session may equip.
pub struct Catalog {
    /// The config's: replaced when the config is reloaded.
    static_sets: Mutex<BTreeMap<String, ToolsetRule>>,
    store: Option<Mutex<Backend>>,
}

impl Catalog {
    /// The config's toolsets, and the store's when one is given (opened here: what was found
    /// is logged, and a corrupt file is moved aside).
    pub fn new(
        static_sets: BTreeMap<String, ToolsetRule>,
        store: Option<std::path::PathBuf>,
    ) -> Self {
        let store = store.and_then(Backend::open).map(Mutex::new);
        Self {
            static_sets: Mutex::new(static_sets),
            store,
        }
    }

    /// The config's toolsets, after a reload.
    pub fn set_static(&self, sets: BTreeMap<String, ToolsetRule>) {
        *lock(&self.static_sets) = sets;
    }

    /// Static and stored toolsets by name; a static one hides a stored one of the same name.
    pub fn sets(&self) -> BTreeMap<String, ToolsetRule> {
        let mut sets: BTreeMap<String, ToolsetRule> = match &self.store {
            Some(store) => lock(store)
                .toolsets()
                .iter()
                .map(|(name, t)| (name.clone(), rule_of(t)))
                .collect(),
            None => BTreeMap::new(),
        };
        sets.extend(
            lock(&self.static_sets)
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        sets
    }

    /// Whether toolset `name` exists; when it is not known here, a store shared with other
    /// replicas is read again first (one of them may have just saved it).
    pub async fn knows(&self, name: &str) -> bool {
        if self.sets().contains_key(name) {
            return true;
        }
        // Read without the store's lock held, on a blocking thread: other requests go on with
        // what was last read, and the thread that serves them never waits for Redis.
        let Some(shared) = self.store.as_ref().and_then(|s| lock(s).shared()) else {
            return false;
        };
        let _ = tokio::task::spawn_blocking(move || shared.reread()).await;
        self.sets().contains_key(name)
    }

    pub fn is_static(&self, name: &str) -> bool {
        lock(&self.static_sets).contains_key(name)
    }
}

fn rule_of(stored: &StoredToolset) -> ToolsetRule {
    ToolsetRule {
        description: stored.description.clone(),
        tools: stored.tools.iter().map(|t| t.name.clone()).collect(),
        prompts: stored.prompts.clone(),
        aliases: stored_aliases(stored),
        ..ToolsetRule::default()
    }
}

/// The aliases of a stored toolset's tools: each tool that has one, to it.
fn stored_aliases(stored: &StoredToolset) -> BTreeMap<String, String> {
    stored
        .tools
        .iter()
        .filter_map(|t| Some((t.name.clone(), t.alias.clone()?)))
        .collect()
}

/// A tool result: the structured value, also as text for clients that read only text.
fn result(value: &Value, is_error: bool) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    json!({"content": [{"type": "text", "text": text}], "structuredContent": value, "isError": is_error}).to_string()
}

fn refused(message: impl Into<String>) -> String {
    let message: String = message.into();
    json!({"content": [{"type": "text", "text": message}], "isError": true}).to_string()
}

fn problems(diagnostics: &[Diagnostic]) -> String {
    let lines: Vec<String> = diagnostics.iter().map(problem_line).collect();
    lines.join("\n")
}

/// One problem as a line of a list: its message, and its help when it has one.
fn problem_line(d: &Diagnostic) -> String {
    let mut line = format!("- {}", d.message);
    if let Some(help) = &d.help {
        line.push_str(&format!(" ({help})"));
    }
    line
}

/// A session's equipped toolset, resolved against one view of the surface.
pub struct Equipped {
    pub name: String,
    pub selection: Selection,
    /// What of the selection is listed: what a server that is up serves.
    pub listed: Selection,
    /// How its clients discover its tools: its own `discovery`, else the gateway's.
    pub discovery: Discovery,
}

impl Equipped {
    /// Resolves `name` against the surface, leaving out what only down servers serve. A
    /// toolset that cannot be resolved (deleted, a broken include) selects nothing: a toolset
    /// is a permission boundary, and failing closed keeps it one.
    pub fn new(
        name: &str,
        surface: &Surface,
        up: &std::collections::BTreeSet<moniker_surface::ServerId>,
        sets: &BTreeMap<String, ToolsetRule>,
    ) -> Self {
        let mut selection = match toolsets::select(surface, name, sets) {
            Ok(selection) => selection,
            Err(diagnostics) => {
                for d in &diagnostics {
                    tracing::error!(toolset = name, "{d}");
                }
                Selection::default()
            }
        };
        if !selection.stale.is_empty() {
            tracing::warn!(toolset = name, stale = ?selection.stale, "toolset references that name nothing now are left out");
        }
        let live = |kind: Kind, n: &String| {
            surface
                .resolve(kind, n)
                .is_some_and(|r| r.exposed.servers().any(|s| up.contains(s)))
        };
        let mut listed = selection.clone();
        listed.tools.retain(|n| live(Kind::Tool, n));
        listed.prompts.retain(|n| live(Kind::Prompt, n));
        listed.aliases.retain(|_, n| listed.tools.contains(n));
        listed.narrowed.retain(|n, _| listed.tools.contains(n));
        selection.stale.sort();
        let discovery = sets
            .get(name)
            .and_then(|rule| rule.discovery.clone())
            .unwrap_or_else(|| surface.discovery().clone());
        Self {
            name: name.to_owned(),
            selection,
            listed,
            discovery,
        }
    }

    /// The listing entries of a session with this toolset, tools as its discovery mode shows
    /// them.
    pub fn entries<'a>(&'a self, surface: &'a Surface, kind: Kind) -> Vec<Cow<'a, RawValue>> {
        self.discovery
            .entries(kind, toolsets::entries(surface, &self.listed, kind))
    }

    /// The `tools/list` or `prompts/list` result of a session with this toolset, with `extra`
    /// (the management tools) at the end.
    pub fn render(&self, surface: &Surface, kind: Kind, extra: &[Box<RawValue>]) -> String {
        let entries = self.entries(surface, kind);
        let server = self.discovery.server(surface, kind, entries.len());
        listing::render(kind, entries, extra, server)
    }

    fn describe(&self, surface: &Surface) -> Value {
        let tools: Vec<Value> = self
            .selection
            .tools
            .iter()
            .map(|name| {
                let aliases: Vec<&String> = self
                    .selection
                    .aliases
                    .iter()
                    .filter(|(_, t)| *t == name)
                    .map(|(a, _)| a)
                    .collect();
                let server = surface
                    .resolve_tool(name)
                    .map(|r| r.exposed.server_name.clone())
                    .unwrap_or_default();
                json!({"name": name, "toolset_aliases": aliases, "server_name": server})
            })
            .collect();
        json!({"name": self.name, "tools": tools, "prompts": self.selection.prompts, "stale": self.selection.stale})
    }
}

/// What a management call asks of the session, besides its result.
pub enum Effect {
    None,
    Equip(String),
    Unequip,
}

/// What the management tools work on: the toolsets, the surface and the servers up now, and
/// the session's equipped toolset.
pub struct Management<'a> {
    pub catalog: &'a Catalog,
    pub surface: &'a Surface,
    pub up: &'a std::collections::BTreeSet<moniker_surface::ServerId>,
    pub active: Option<&'a Equipped>,
}

/// A management tool's `tools/call` result, and what the session must do.
type Answer = (String, Effect);

/// A management tool's refusal (a tool error): the session does nothing.
fn refusal(why: impl Into<String>) -> Answer {
    (refused(why), Effect::None)
}

/// A management tool's result: the session does nothing more.
fn answer(value: &Value) -> Answer {
    (result(value, false), Effect::None)
}

impl Management<'_> {
    /// Runs one management tool: the `tools/call` result, and what the session must do.
    pub fn call(&self, tool: &str, arguments: &Value) -> Answer {
        let name = || {
            arguments
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| refusal("missing `name`"))
        };
        let named = |run: &dyn Fn(&str) -> Answer| name().map_or_else(|refused| refused, run);
        match tool {
            "list-available-tools" => self.available(),
            "list-saved-toolsets" => self.saved(),
            "get-active-toolset" => {
                answer(&json!({"active": self.active.map(|a| a.describe(self.surface))}))
            }
            "unequip-toolset" => (result(&json!({"active": null}), false), Effect::Unequip),
            "equip-toolset" => named(&|name| self.equip(name)),
            "delete-toolset" => named(&|name| self.delete(name)),
            "build-toolset" => named(&|name| self.build(name, arguments)),
            _ => refusal(format!("unknown management tool `{tool}`")),
        }
    }

    /// `list-available-tools`: every tool and prompt of the surface, with the first line of
    /// its description.
    fn available(&self) -> Answer {
        let items = |kind: Kind| -> Vec<Value> {
            self.surface
                .listed(kind)
                .map(|e| {
                    let description: String = serde_json::from_str::<Value>(e.definition.get())
                        .ok()
                        .and_then(|d| {
                            d.get("description")
                                .and_then(Value::as_str)
                                .map(|s| s.lines().next().unwrap_or("").to_owned())
                        })
                        .unwrap_or_default();
                    let tags: Vec<&str> = e.tags.iter().map(|t| t.as_str()).collect();
                    json!({"name": e.name, "aliases": e.aliases, "server_name": e.server_name, "tags": tags, "description": description})
                })
                .collect()
        };
        answer(&json!({"tools": items(Kind::Tool), "prompts": items(Kind::Prompt)}))
    }

    /// `list-saved-toolsets`: every toolset, the config's and the store's.
    fn saved(&self) -> Answer {
        let sets = self.catalog.sets();
        let list: Vec<Value> = sets
            .iter()
            .map(|(name, rule)| {
                let mut described =
                    Equipped::new(name, self.surface, self.up, &sets).describe(self.surface);
                described["source"] = json!(if self.catalog.is_static(name) {
                    "config"
                } else {
                    "store"
                });
                if let Some(d) = &rule.description {
                    described["description"] = json!(d);
                }
                described
            })
            .collect();
        answer(&json!({"toolsets": list}))
    }

    /// `equip-toolset`: the session equips `name`, when it selects what it says.
    fn equip(&self, name: &str) -> Answer {
        let sets = self.catalog.sets();
        if let Err(diagnostics) = toolsets::select(self.surface, name, &sets) {
            return refusal(format!(
                "cannot equip toolset `{name}`:\n{}",
                problems(&diagnostics)
            ));
        }
        let equipped = Equipped::new(name, self.surface, self.up, &sets);
        (
            result(&json!({"equipped": equipped.describe(self.surface)}), false),
            Effect::Equip(name.to_owned()),
        )
    }

    /// `delete-toolset`: a saved toolset (never the config's) is deleted, and unequipped when
    /// it was the session's.
    fn delete(&self, name: &str) -> Answer {
        if self.catalog.is_static(name) {
            return refusal(format!(
                "toolset `{name}` is defined in the config: remove it there"
            ));
        }
        let Some(store) = &self.catalog.store else {
            return refusal("no toolset store is open");
        };
        match lock(store).remove(name) {
            Ok(true) => {
                let effect = if self.active.is_some_and(|a| a.name == name) {
                    Effect::Unequip
                } else {
                    Effect::None
                };
                (result(&json!({"deleted": name}), false), effect)
            }
            Ok(false) => refusal(format!("there is no saved toolset `{name}`")),
            Err(e) => refusal(format!("cannot delete toolset `{name}`: {e}")),
        }
    }

    /// `build-toolset`: a toolset saved in the store (never over one of the config's) once it
    /// validates against the surface, and equipped when asked.
    fn build(&self, name: &str, arguments: &Value) -> Answer {
        if self.catalog.is_static(name) {
            return refusal(format!(
                "toolset `{name}` is defined in the config: choose another name"
            ));
        }
        let stored = match stored_of(arguments) {
            Ok(stored) => stored,
            Err(why) => return refusal(why),
        };
        if let Some(store) = &self.catalog.store {
            let saved = lock(store).toolsets();
            if !saved.contains_key(name) && saved.len() >= budget::STORED_TOOLSETS {
                return refusal(format!(
                    "toolset `{name}` was not saved: the store holds {} toolsets, the most it keeps; delete one first",
                    saved.len()
                ));
            }
        }
        let rule = rule_of(&stored);
        let diagnostics = toolsets::validate(self.surface, name, &rule, &self.catalog.sets());
        let errors: Vec<Diagnostic> = diagnostics
            .into_iter()
            .filter(Diagnostic::is_error)
            .collect();
        if !errors.is_empty() {
            return refusal(format!(
                "toolset `{name}` was not saved:\n{}",
                problems(&errors)
            ));
        }
        let Some(store) = &self.catalog.store else {
            return refusal("no toolset store is open: start moniker with --manage");
        };
        if let Err(e) = lock(store).put(name, stored) {
            return refusal(format!("toolset `{name}` was not saved: {e}"));
        }
        let equipped = Equipped::new(name, self.surface, self.up, &self.catalog.sets());
        let equip = arguments
            .get("equip")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let effect = if equip {
            Effect::Equip(name.to_owned())
        } else {
            Effect::None
        };
        // A stateless (2026-07-28) client has no session to equip: it uses the toolset by
        // connecting to its URL, on any replica.
        let saved = json!({
            "saved": equipped.describe(self.surface),
            "equipped": equip,
            "url_path": format!("/mcp/{name}"),
        });
        (result(&saved, false), effect)
    }
}

/// The toolset `build-toolset`'s arguments describe, or why they do not.
fn stored_of(arguments: &Value) -> Result<StoredToolset, String> {
    let Some(items) = arguments.get("tools").and_then(Value::as_array) else {
        return Err(
            "`tools` must be a list of tool names or {\"name\", \"alias\"} objects".to_owned(),
        );
    };
    let tools = items
        .iter()
        .map(stored_tool)
        .collect::<Result<Vec<_>, _>>()?;
    let mut seen_tools = std::collections::BTreeSet::new();
    for tool in &tools {
        if !seen_tools.insert(tool.name.as_str()) {
            return Err(format!("tool `{}` is listed twice", tool.name));
        }
    }
    let prompts: Vec<String> = arguments
        .get("prompts")
        .and_then(Value::as_array)
        .map(|p| {
            p.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let description = arguments.get("description").and_then(Value::as_str);
    if description.is_some_and(|d| d.len() > budget::TOOLSET_DESCRIPTION) {
        return Err(format!(
            "a toolset's `description` is at most {} bytes",
            budget::TOOLSET_DESCRIPTION
        ));
    }
    Ok(StoredToolset {
        description: description.map(str::to_owned),
        tools,
        prompts,
    })
}

/// One item of `build-toolset`'s `tools`: a name, or `{"name", "alias"}`.
fn stored_tool(item: &Value) -> Result<StoredTool, String> {
    match item {
        Value::String(name) => Ok(StoredTool {
            name: name.clone(),
            alias: None,
        }),
        Value::Object(fields) => {
            let Some(tool) = fields.get("name").and_then(Value::as_str) else {
                return Err(format!("a tool item needs a `name`: {item}"));
            };
            let alias = match fields.get("alias") {
                None | Some(Value::Null) => None,
                Some(Value::String(a)) => Some(a.clone()),
                Some(other) => {
                    return Err(format!(
                        "the alias of `{tool}` must be a string, not {other}"
                    ));
                }
            };
            Ok(StoredTool {
                name: tool.to_owned(),
                alias,
            })
        }
        other => Err(format!(
            "a tool item must be a name or an object, not {other}"
        )),
    }
}
