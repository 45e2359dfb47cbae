//! How tools are discovered (DESIGN "The model's view"): the whole listing, as ever; a search
//! mode, whose listing holds the pinned tools and moniker's [`SEARCH_TOOLS`] and
//! [`CALL_TOOL`] (the others are found by searching and called through `call_tool`); or the
//! whole listing with `_meta` hints for clients that defer loading on their own
//! (`anthropic/alwaysLoad` on pinned tools, `anthropic/searchHint` from aliases and tags).
//! Per gateway (`discovery:`) or per toolset (`toolsets.<name>.discovery`).

use std::borrow::Cow;
use std::sync::LazyLock;

use serde_json::json;
use serde_json::value::RawValue;

use crate::definition;
use crate::names::Tag;
pub use crate::rules::{Discovery, Mode};
use crate::surface::{Exposed, Surface};
use crate::vocab::Kind;

pub mod compact;

/// moniker's search tool, listed in search mode.
pub const SEARCH_TOOLS: &str = "search_tools";
/// moniker's tool that calls a found tool, listed in search mode.
pub const CALL_TOOL: &str = "call_tool";
/// The results of a search when the query gives no `limit`.
pub const DEFAULT_LIMIT: usize = 5;
/// The most results one search gives.
pub const MAX_LIMIT: usize = 50;
/// `_meta` key of a tool a deferring client loads at once.
pub const META_ALWAYS_LOAD: &str = "anthropic/alwaysLoad";
/// `_meta` key of the words a deferring client's search finds a tool by.
pub const META_SEARCH_HINT: &str = "anthropic/searchHint";

impl Discovery {
    /// Whether `tool` is pinned: named by its name or an alias, or by its tags.
    pub fn pins(&self, tool: &Exposed) -> bool {
        let named = |n: &String| self.pin.iter().any(|p| p == n);
        named(&tool.name)
            || tool.aliases.iter().chain(&tool.hidden_aliases).any(named)
            || self
                .pin_tags
                .as_ref()
                .is_some_and(|e| e.matches(&tool.tags))
    }

    /// The entries of a `tools/list` or `prompts/list`, from every item the listing could
    /// show (each with the entry it would show) in listing order: prompts, and tools in list
    /// mode, all of them; in search mode the pinned tools then moniker's search tools; in
    /// hints mode every tool with its hints.
    pub fn entries<'a>(
        &self,
        kind: Kind,
        tools: impl Iterator<Item = (&'a Exposed, Cow<'a, RawValue>)>,
    ) -> Vec<Cow<'a, RawValue>> {
        match (kind, self.mode) {
            (Kind::Prompt, _) | (_, Mode::List) => tools.map(|(_, entry)| entry).collect(),
            (Kind::Tool, Mode::Search) => {
                let mut listed = Vec::new();
                let mut behind = compact::Behind::default();
                for (tool, entry) in tools {
                    if self.pins(tool) {
                        listed.push(entry);
                    } else {
                        behind.add(tool);
                    }
                }
                listed.push(Cow::Owned(behind.search_tool(&definitions()[0])));
                listed.extend(definitions()[1..].iter().map(|d| Cow::Borrowed(&**d)));
                listed
            }
            (Kind::Tool, Mode::Hints) => tools
                .map(|(tool, entry)| Cow::Owned(self.hinted(tool, &entry)))
                .collect(),
        }
    }

    /// The server a listing says once ([`listing::render`](crate::listing::render)) when it
    /// holds the last `entries` of what [`Discovery::entries`] gave for `kind`: the surface's
    /// one server, if one of them is the surface's (moniker's own search tools come last, and
    /// are of no server of the surface).
    pub fn server<'s>(&self, surface: &'s Surface, kind: Kind, entries: usize) -> Option<&'s str> {
        let own = match (kind, self.mode) {
            (Kind::Tool, Mode::Search) => definitions().len(),
            _ => 0,
        };
        surface.server(kind).filter(|_| entries > own)
    }

    /// `entry` with the `_meta` hints of `tool`: `anthropic/alwaysLoad` when it is pinned,
    /// `anthropic/searchHint` from its listed aliases, its tags and its server.
    fn hinted(&self, tool: &Exposed, entry: &RawValue) -> Box<RawValue> {
        let mut words: Vec<&str> = tool.aliases.iter().map(String::as_str).collect();
        words.extend(tool.tags.iter().map(Tag::as_str));
        if !tool.server_name.is_empty() && !words.contains(&tool.server_name.as_str()) {
            words.push(&tool.server_name);
        }
        let hint = json!(words.join(" ")).to_string();
        let mut meta: Vec<(&str, &str)> = Vec::with_capacity(2);
        if self.pins(tool) {
            meta.push((META_ALWAYS_LOAD, "true"));
        }
        if !words.is_empty() {
            meta.push((META_SEARCH_HINT, &hint));
        }
        definition::with_meta_entries(entry, &meta)
    }
}

/// The definitions of [`SEARCH_TOOLS`] and [`CALL_TOOL`], in that order, each a listing
/// entry of the same shape as a server's tool.
pub fn definitions() -> &'static [Box<RawValue>] {
    static DEFINITIONS: LazyLock<Vec<Box<RawValue>>> = LazyLock::new(build);
    &DEFINITIONS
}

fn build() -> Vec<Box<RawValue>> {
    let tools = [
        (
            SEARCH_TOOLS,
            "Find tools for a task: describe it in a few words. Returns the best matching tools, best first, one line each: name(parameters; ? marks optional ones) [server]: what it does. Give a tool's exact name for its full definition. Call one with call_tool.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What the tool should do, or its name"},
                    "tags": {"type": "array", "items": {"type": "string"}, "description": "Only tools with one of these tags"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}
                },
                "required": ["query"]
            }),
        ),
        (
            CALL_TOOL,
            "Call a tool found with search_tools, by its name or an alias, with its arguments.",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The tool's name or alias"},
                    "arguments": {"type": "object", "description": "The tool's arguments, as its inputSchema says"}
                },
                "required": ["name"]
            }),
        ),
    ];
    definition::own_tools(tools)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::listing::Listing;
    use crate::rules::{AliasRule, Override, Rules, ServerRules};
    use crate::{Kind, Surface, build};

    fn surface() -> Surface {
        let mut rules = Rules::default();
        rules.servers.insert(
            "fs".parse().unwrap(),
            ServerRules {
                tags: vec!["files".parse().unwrap()],
                prefix: None,
            },
        );
        rules.tools.insert(
            "read_file".into(),
            Override {
                aliases: vec![
                    AliasRule {
                        name: "cat".parse().unwrap(),
                        hidden: false,
                        deprecated: None,
                    },
                    AliasRule {
                        name: "slurp".parse().unwrap(),
                        hidden: true,
                        deprecated: None,
                    },
                ],
                ..Override::default()
            },
        );
        let tool = |name: &str, meta: &str| {
            RawValue::from_string(format!(
                r#"{{"name":"{name}","description":"{name}.","inputSchema":{{"type":"object"}}{meta}}}"#
            ))
            .unwrap()
        };
        let listing = Listing {
            server: "fs".parse().unwrap(),
            tools: vec![
                tool(
                    "read_file",
                    r#","_meta":{"theirs":1,"anthropic/searchHint":"old"}"#,
                ),
                tool("write_file", ""),
            ],
            prompts: vec![],
            version: None,
        };
        build(&rules, &[listing]).surface.unwrap()
    }

    fn entries(discovery: &Discovery, surface: &Surface) -> Vec<Value> {
        let items = surface
            .listed(Kind::Tool)
            .map(|e| (e, Cow::Borrowed(&*e.definition)));
        discovery
            .entries(Kind::Tool, items)
            .iter()
            .map(|e| serde_json::from_str(e.get()).unwrap())
            .collect()
    }

    fn names(entries: &[Value]) -> Vec<&str> {
        entries
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect()
    }

    /// A listing says the surface's one server when it holds one of the surface's entries,
    /// not when it holds moniker's search tools alone.
    #[test]
    fn a_listing_says_the_server_when_it_lists_the_surface() {
        let s = surface();
        let search = |pin: &[&str]| Discovery {
            mode: Mode::Search,
            pin: pin.iter().map(|p| p.to_string()).collect(),
            pin_tags: None,
        };
        let said = |discovery: &Discovery| {
            let items = s
                .listed(Kind::Tool)
                .map(|e| (e, Cow::Borrowed(&*e.definition)));
            let entries = discovery.entries(Kind::Tool, items);
            discovery.server(&s, Kind::Tool, entries.len())
        };
        assert_eq!(said(&Discovery::default()), Some("fs"));
        assert_eq!(said(&search(&["cat"])), Some("fs"));
        assert_eq!(said(&search(&[])), None);
        // A page of the last two entries of a search listing: the search tools alone.
        assert_eq!(search(&["cat"]).server(&s, Kind::Tool, 2), None);
        assert_eq!(Discovery::default().server(&s, Kind::Prompt, 0), None);
    }

    #[test]
    fn each_mode_lists_its_own_way() {
        let s = surface();
        let list = entries(&Discovery::default(), &s);
        assert_eq!(names(&list), ["read_file", "write_file"]);

        let search = Discovery {
            mode: Mode::Search,
            pin: vec!["cat".into()],
            pin_tags: None,
        };
        let listed = entries(&search, &s);
        assert_eq!(names(&listed), ["read_file", SEARCH_TOOLS, CALL_TOOL]);
        assert_eq!(listed[1]["_meta"]["io.moniker/server"], "moniker");
        let by_tag = Discovery {
            mode: Mode::Search,
            pin: vec![],
            pin_tags: Some("files".parse().unwrap()),
        };
        assert_eq!(
            names(&entries(&by_tag, &s)),
            ["read_file", "write_file", SEARCH_TOOLS, CALL_TOOL]
        );

        let hints = Discovery {
            mode: Mode::Hints,
            pin: vec!["slurp".into()],
            pin_tags: None,
        };
        let hinted = entries(&hints, &s);
        assert_eq!(names(&hinted), ["read_file", "write_file"]);
        let meta = &hinted[0]["_meta"];
        assert_eq!(meta["theirs"], 1, "the server's keys stay");
        assert_eq!(meta[META_ALWAYS_LOAD], true, "pinned by its hidden alias");
        assert_eq!(
            meta[META_SEARCH_HINT], "cat files fs",
            "listed aliases, tags, server"
        );
        assert_eq!(hinted[1]["_meta"][META_ALWAYS_LOAD], Value::Null);
        assert_eq!(hinted[1]["_meta"][META_SEARCH_HINT], "files fs");
        assert_eq!(hinted[1]["inputSchema"], list[1]["inputSchema"]);
    }
}
