//! A listing entry as moniker lists it: the one rewrite of a tool's or prompt's definition
//! (DESIGN "Listing format"). The surface build, a toolset's listing and moniker's own tools
//! all go through [`rewrite`], so an entry looks the same whoever listed it.
//!
//! Every field of the definition keeps its place and its bytes, except `name` and
//! `description`, replaced where they are, and the fields moniker owns (`aliases`, `tags`,
//! `server_name`), which go last in that order.

use indexmap::IndexMap;
use serde_json::value::RawValue;

use crate::names::Tag;

/// The fields moniker owns: what a server sends under these names is replaced.
const OWNED: [&str; 3] = ["aliases", "tags", "server_name"];

/// What [`rewrite`] changes; `None` keeps what the definition has.
#[derive(Debug, Default)]
pub(crate) struct Rewrite<'a> {
    pub name: Option<&'a str>,
    /// Put where the description is, or right after `name` when there is none.
    pub description: Option<&'a str>,
    /// The listed aliases; none: no `aliases` field.
    pub aliases: Option<&'a [String]>,
    pub tags: Option<&'a [Tag]>,
    pub server_name: Option<&'a str>,
}

/// The definition with `change` applied: see the module's documentation.
pub(crate) fn rewrite(
    fields: &IndexMap<String, Box<RawValue>>,
    change: &Rewrite<'_>,
) -> Box<RawValue> {
    let kept = |key: &str| fields.get(key).map(|raw| raw.get().to_owned());
    let aliases = match change.aliases {
        Some([]) => None,
        Some(list) => Some(array(list.iter().map(String::as_str))),
        None => kept("aliases"),
    };
    let tags = match change.tags {
        Some(list) => Some(array(list.iter().map(Tag::as_str))),
        None => kept("tags"),
    };
    let server_name = match change.server_name {
        Some(name) => Some(string(name)),
        None => kept("server_name"),
    };
    let owned = [aliases, tags, server_name];

    let mut out =
        String::with_capacity(fields.values().map(|v| v.get().len() + 16).sum::<usize>() + 64);
    out.push('{');
    let mut first = true;
    let mut field = |out: &mut String, key: &str, value: &str| {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(&string(key));
        out.push(':');
        out.push_str(value);
    };
    let has_description = fields.contains_key("description");
    for (key, value) in fields {
        match key.as_str() {
            "name" => {
                match change.name {
                    Some(name) => field(&mut out, key, &string(name)),
                    None => field(&mut out, key, value.get()),
                }
                if let (false, Some(d)) = (has_description, change.description) {
                    field(&mut out, "description", &string(d));
                }
            }
            "description" => match change.description {
                Some(d) => field(&mut out, key, &string(d)),
                None => field(&mut out, key, value.get()),
            },
            k if OWNED.contains(&k) => {}
            _ => field(&mut out, key, value.get()),
        }
    }
    for (key, value) in OWNED.iter().zip(&owned) {
        if let Some(value) = value {
            field(&mut out, key, value);
        }
    }
    out.push('}');
    // Built from valid JSON pieces, so it parses; `null` is the unreachable fallback.
    RawValue::from_string(out).unwrap_or_default()
}

/// A listing entry with more aliases: appended to its `aliases` array and to the
/// `Aliases: a, b` line that ends its description (extended when there is one, added when
/// not). Every other field keeps its bytes; the fields moniker owns go last. A definition
/// that is not an object, or that has all of `extra` already, is returned as is.
pub fn with_extra_aliases(definition: &RawValue, extra: &[String]) -> Box<RawValue> {
    let unchanged = || definition.to_owned();
    let Ok(fields) = serde_json::from_str::<IndexMap<String, Box<RawValue>>>(definition.get())
    else {
        return unchanged();
    };
    let mut aliases: Vec<String> = fields
        .get("aliases")
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .unwrap_or_default();
    let before = aliases.len();
    for alias in extra {
        if !aliases.contains(alias) {
            aliases.push(alias.clone());
        }
    }
    if aliases.len() == before {
        return unchanged();
    }
    let added = &aliases[before..];
    // A description that is not a string is the server's business: leave it.
    let description = match fields.get("description") {
        Some(raw) => serde_json::from_str::<String>(raw.get())
            .ok()
            .map(|text| extend_aliases_line(text, added)),
        None => Some(extend_aliases_line(String::new(), added)),
    };
    rewrite(
        &fields,
        &Rewrite {
            description: description.as_deref(),
            aliases: Some(&aliases),
            ..Rewrite::default()
        },
    )
}

/// The description with a line `Aliases: a, b` appended when there are listed aliases.
pub(crate) fn with_aliases_line(text: String, aliases: &[String]) -> String {
    if aliases.is_empty() {
        return text;
    }
    let line = format!("Aliases: {}", aliases.join(", "));
    if text.is_empty() {
        line
    } else {
        format!("{text}\n\n{line}")
    }
}

/// `text` with `added` at the end of its `Aliases: ` line, or with such a line appended.
fn extend_aliases_line(mut text: String, added: &[String]) -> String {
    let last_line = text.rfind('\n').map_or(0, |i| i + 1);
    if text[last_line..].starts_with("Aliases: ") {
        text.push_str(", ");
        text.push_str(&added.join(", "));
        text
    } else {
        with_aliases_line(text, added)
    }
}

fn string(s: &str) -> String {
    // Serializing a str cannot fail.
    serde_json::to_string(s).unwrap_or_default()
}

fn array<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let items: Vec<String> = items.map(string).collect();
    format!("[{}]", items.join(","))
}
