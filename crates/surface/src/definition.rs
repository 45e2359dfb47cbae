//! A listing entry as moniker lists it: the one rewrite of a tool's or prompt's definition
//! (DESIGN "Listing format", as issue 23 settled it: one place per fact). The surface build, a
//! toolset's listing and moniker's own tools all go through [`rewrite`], so an entry looks the
//! same whoever listed it.
//!
//! Every field of the definition keeps its place and its bytes, except `name` and
//! `description`, replaced where they are, and `aliases` (the listed aliases, ContextGraph's
//! field), replaced where it is or added last. The aliases are also the description's last line, for the model,
//! which reads nothing else of an entry's metadata.
//!
//! The tags and the server are in `_meta` alone, under moniker's own keys ([`META_TAGS`],
//! [`META_SERVER`]): the one place every MCP SDK keeps (the TypeScript one drops a tool's
//! unknown fields). Where every entry of a surface's kind has one server, no entry says it:
//! the listing says it once, in the result's `_meta` ([`Server::ByTheListing`]). They are added to the server's `_meta` object, whose other keys keep their
//! bytes, or in a `_meta` of their own, last, when it sent none; what a server says under
//! moniker's keys is replaced, and a `_meta` that is not an object (MCP says it is one) is
//! replaced by moniker's. What a server sends at the top under `tags` or `server_name` (where
//! moniker said them before) is taken out: no server says another's name there.

use indexmap::IndexMap;
use serde_json::value::RawValue;

use crate::names::Tag;

/// The `server_name` of moniker's own tools (management and search).
pub const OWN_SERVER_NAME: &str = "moniker";

/// The field moniker writes: what a server sends under this name is replaced.
const ALIASES: &str = "aliases";
/// Fields moniker wrote at the top in earlier versions (where clients may still look for
/// them): what a server sends under these names is taken out, so that no server can say
/// another's name there.
const RETIRED: [&str; 2] = ["tags", "server_name"];

/// `_meta` key of the tags (absent when there are none).
pub const META_TAGS: &str = "io.moniker/tags";
/// `_meta` key of the server name.
pub const META_SERVER: &str = "io.moniker/server";
/// A `_meta` key moniker no longer writes (the aliases are in `aliases`): what a server sends
/// under it is taken out, as under the others.
const META_ALIASES: &str = "io.moniker/aliases";

/// What [`rewrite`] changes; `None` keeps what the definition has.
#[derive(Debug, Default)]
pub(crate) struct Rewrite<'a> {
    pub name: Option<&'a str>,
    /// Put where the description is, or right after `name` when there is none.
    pub description: Option<&'a str>,
    /// Replaces `inputSchema` where it is, or goes last when there is none.
    pub input_schema: Option<&'a str>,
    /// The listed aliases; none: no `aliases` field.
    pub aliases: Option<&'a [String]>,
    pub tags: Option<&'a [Tag]>,
    pub server: Server<'a>,
}

/// Where an entry's server name is said.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) enum Server<'a> {
    /// As the definition has it.
    #[default]
    AsItIs,
    /// In the entry's `_meta`.
    Named(&'a str),
    /// Once, by the listing ([`crate::listing::render`]): every entry of its kind has this
    /// server, and none says it (what a server sent under moniker's key is taken out).
    ByTheListing,
}

/// The definition with `change` applied: see the module's documentation.
pub(crate) fn rewrite(
    fields: &IndexMap<String, Box<RawValue>>,
    change: &Rewrite<'_>,
) -> Box<RawValue> {
    let mut aliases = match change.aliases {
        Some([]) => None,
        Some(list) => Some(array(list.iter().map(String::as_str))),
        None => fields.get(ALIASES).map(|raw| raw.get().to_owned()),
    };
    // Set what the change says; take out what it empties, and the retired key.
    let mut ours: Vec<(&str, String)> = Vec::new();
    let mut taken = vec![META_ALIASES];
    match change.tags {
        Some([]) => taken.push(META_TAGS),
        Some(list) => ours.push((META_TAGS, array(list.iter().map(Tag::as_str)))),
        None => {}
    }
    match change.server {
        Server::AsItIs => {}
        Server::Named(name) => ours.push((META_SERVER, string(name))),
        Server::ByTheListing => taken.push(META_SERVER),
    }
    let meta: Vec<(&str, &str)> = ours.iter().map(|(k, v)| (*k, v.as_str())).collect();

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
            "inputSchema" => match change.input_schema {
                Some(schema) => field(&mut out, key, schema),
                None => field(&mut out, key, value.get()),
            },
            "description" => match change.description {
                Some(d) => field(&mut out, key, &string(d)),
                None => field(&mut out, key, value.get()),
            },
            "_meta" => match with_meta(value, &meta, &taken) {
                Some(merged) => field(&mut out, key, &merged),
                None => field(&mut out, key, value.get()),
            },
            // Kept in its place when it is there already (a toolset adds aliases).
            ALIASES => {
                if let Some(aliases) = aliases.take() {
                    field(&mut out, key, &aliases);
                }
            }
            k if RETIRED.contains(&k) => {}
            _ => field(&mut out, key, value.get()),
        }
    }
    if let (false, Some(schema)) = (fields.contains_key("inputSchema"), change.input_schema) {
        field(&mut out, "inputSchema", schema);
    }
    if let Some(aliases) = aliases {
        field(&mut out, ALIASES, &aliases);
    }
    if !fields.contains_key("_meta") && !meta.is_empty() {
        field(&mut out, "_meta", &object(&meta));
    }
    out.push('}');
    // Built from valid JSON pieces, so it parses; `null` is the unreachable fallback.
    RawValue::from_string(out).unwrap_or_default()
}

/// A `_meta` object with `ours` set and any other key of `owned` taken out (the keys of
/// `ours` are replaced too), or `None` to keep it as it is: nothing to change. A `_meta` that
/// is not an object (MCP says it is one, and the TypeScript SDK refuses a listing with a
/// `null` one) is replaced by `ours`, an empty object when moniker has nothing to say there.
fn with_meta(meta: &RawValue, ours: &[(&str, &str)], owned: &[&str]) -> Option<String> {
    let Ok(entries) = serde_json::from_str::<IndexMap<String, Box<RawValue>>>(meta.get()) else {
        return Some(object(ours));
    };
    let is_owned = |k: &str| owned.contains(&k) || ours.iter().any(|(key, _)| *key == k);
    if entries.keys().any(|k| is_owned(k)) {
        let theirs = entries
            .iter()
            .filter(|(k, _)| !is_owned(k))
            .map(|(k, v)| (k.as_str(), v.get()));
        let all: Vec<(&str, &str)> = theirs.chain(ours.iter().copied()).collect();
        return Some(object(&all));
    }
    if ours.is_empty() {
        return None;
    }
    // Appended before the closing brace: the server's keys keep their bytes, spaces included.
    let mut out = meta.get().trim_end().strip_suffix('}')?.to_owned();
    for (i, (key, value)) in ours.iter().enumerate() {
        if i > 0 || !entries.is_empty() {
            out.push(',');
        }
        out.push_str(&string(key));
        out.push(':');
        out.push_str(value);
    }
    out.push('}');
    Some(out)
}

/// A listing entry with more aliases: appended to its `aliases` array and to the
/// `Aliases: a, b` line that ends its description (extended when there is one, added when
/// not). Every other field keeps its bytes; `aliases` goes last. A definition
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

/// `definition` with `entries` set in its `_meta` (replacing keys of the same names; the
/// other keys keep their bytes), or in a `_meta` of its own, last. A definition that is not
/// an object, or whose `_meta` is not one, is returned as is.
pub fn with_meta_entries(definition: &RawValue, entries: &[(&str, &str)]) -> Box<RawValue> {
    let unchanged = || definition.to_owned();
    let Ok(fields) = serde_json::from_str::<IndexMap<String, Box<RawValue>>>(definition.get())
    else {
        return unchanged();
    };
    let meta = match fields.get("_meta") {
        Some(meta) => with_meta(meta, entries, &[]),
        None if !entries.is_empty() => Some(object(entries)),
        None => None,
    };
    let Some(meta) = meta else {
        return unchanged();
    };
    let mut all: Vec<(&str, &str)> = fields
        .iter()
        .filter(|(k, _)| *k != "_meta")
        .map(|(k, v)| (k.as_str(), v.get()))
        .collect();
    // `_meta` keeps its place, or goes last.
    let at = fields.get_index_of("_meta").unwrap_or(all.len());
    all.insert(at, ("_meta", &meta));
    RawValue::from_string(object(&all)).unwrap_or_else(|_| unchanged())
}

/// moniker's own tools, (name, description, input schema) each, as listing entries.
pub(crate) fn own_tools<const N: usize>(
    tools: [(&str, &str, serde_json::Value); N],
) -> Vec<Box<RawValue>> {
    tools
        .iter()
        .map(|(name, description, schema)| own_tool(name, description, schema))
        .collect()
}

/// One of moniker's own tools as a listing entry of the same shape as a server's tool: tagged
/// `moniker`, from server `moniker`.
fn own_tool(name: &str, description: &str, input_schema: &serde_json::Value) -> Box<RawValue> {
    let fields: IndexMap<String, Box<RawValue>> = [
        ("name", serde_json::Value::from(name)),
        ("description", serde_json::Value::from(description)),
        ("inputSchema", input_schema.clone()),
    ]
    .into_iter()
    .filter_map(|(key, value)| {
        Some((
            key.to_owned(),
            serde_json::value::to_raw_value(&value).ok()?,
        ))
    })
    .collect();
    // "moniker" is a valid tag: the fallback is unreachable.
    let tags: Vec<Tag> = OWN_SERVER_NAME.parse().into_iter().collect();
    rewrite(
        &fields,
        &Rewrite {
            tags: Some(&tags),
            server: Server::Named(OWN_SERVER_NAME),
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

/// `s` as a JSON string.
pub(crate) fn string(s: &str) -> String {
    // Serializing a str cannot fail.
    serde_json::to_string(s).unwrap_or_default()
}

fn object(entries: &[(&str, &str)]) -> String {
    let entries: Vec<String> = entries
        .iter()
        .map(|(key, value)| format!("{}:{value}", string(key)))
        .collect();
    format!("{{{}}}", entries.join(","))
}

fn array<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let items: Vec<String> = items.map(string).collect();
    format!("[{}]", items.join(","))
}

#[cfg(test)]
mod tests;
