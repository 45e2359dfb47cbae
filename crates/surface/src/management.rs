//! moniker's own toolset management tools (DESIGN "Toolsets"): their names and their
//! definitions as clients are listed them, beside the servers' tools when management is on.
//! What they do is the gateway's business.

use std::sync::LazyLock;

use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::definition;

/// The management tools' names, in listing order. A toolset alias may not take one of these
/// names: the management tools are listed beside an equipped toolset.
pub const NAMES: [&str; 7] = [
    "list-available-tools",
    "build-toolset",
    "list-saved-toolsets",
    "equip-toolset",
    "unequip-toolset",
    "get-active-toolset",
    "delete-toolset",
];

/// The management tools' definitions, in the order of [`NAMES`], each a listing entry of
/// the same shape as a server's tool (`tags`, `server_name`).
pub fn definitions() -> &'static [Box<RawValue>] {
    static DEFINITIONS: LazyLock<Vec<Box<RawValue>>> = LazyLock::new(build);
    &DEFINITIONS
}

fn build() -> Vec<Box<RawValue>> {
    let object = |props: Value, required: &[&str]| json!({"type": "object", "properties": props, "required": required});
    let name = json!({"type": "string", "description": "The toolset's name: lowercase letters, digits, `_` and `-`"});
    let tools = [
        (
            "list-available-tools",
            "List every tool and prompt moniker exposes, with aliases, server and tags: what a toolset can be built from.",
            object(json!({}), &[]),
        ),
        (
            "build-toolset",
            "Build (or replace) a named toolset: a subset of the tools, each with an optional alias of its own, saved across restarts. Equip it with equip-toolset.",
            object(
                json!({
                    "name": name,
                    "tools": {"type": "array", "description": "Tools by name or alias; an item may be {\"name\": ..., \"alias\": ...} to give the tool another name in this toolset", "items": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"name": {"type": "string"}, "alias": {"type": "string"}}, "required": ["name"]}]}},
                    "prompts": {"type": "array", "items": {"type": "string"}, "description": "Prompts by name or alias"},
                    "description": {"type": "string"},
                    "equip": {"type": "boolean", "description": "Equip it for this session right away", "default": false}
                }),
                &["name", "tools"],
            ),
        ),
        (
            "list-saved-toolsets",
            "List the toolsets that can be equipped (from the config and built at run time), with their tools and aliases.",
            object(json!({}), &[]),
        ),
        (
            "equip-toolset",
            "Equip a toolset: this session then sees and can call only its tools, under their names and the toolset's aliases.",
            object(json!({"name": name}), &["name"]),
        ),
        (
            "unequip-toolset",
            "Unequip the toolset: this session sees every tool again.",
            object(json!({}), &[]),
        ),
        (
            "get-active-toolset",
            "The toolset equipped in this session, if any, with its tools and aliases.",
            object(json!({}), &[]),
        ),
        (
            "delete-toolset",
            "Delete a toolset built at run time.",
            object(json!({"name": name}), &["name"]),
        ),
    ];
    definition::own_tools(tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definitions_are_the_named_tools_in_order() {
        let names: Vec<String> = definitions()
            .iter()
            .map(|d| {
                let v: Value = serde_json::from_str(d.get()).unwrap();
                v["name"].as_str().unwrap().to_owned()
            })
            .collect();
        assert_eq!(names, NAMES);
    }

    #[test]
    fn a_definition_is_a_listing_entry() {
        assert_eq!(
            definitions()[6].get(),
            r#"{"name":"delete-toolset","description":"Delete a toolset built at run time.","inputSchema":{"type":"object","properties":{"name":{"type":"string","description":"The toolset's name: lowercase letters, digits, `_` and `-`"}},"required":["name"]},"_meta":{"io.moniker/tags":["moniker"],"io.moniker/server":"moniker"}}"#
        );
    }
}
