//! `moniker list`: the exposed tools and prompts, as a table or JSON.

use moniker_config::Config;
use moniker_surface::toolsets::Selection;
use moniker_surface::{Exposed, Kind, Route};
use serde_json::Value;

use crate::args::ListArgs;
use crate::exit::{Exit, Failure};
use crate::output;
use crate::start::{Toolsets, report_failed_servers, start_with};

/// `moniker list`: the exposed tools and prompts.
pub async fn list(mut config: Config, args: ListArgs) -> Result<Exit, Failure> {
    let toolsets = Toolsets::new(&config, false, None, args.toolset.clone());
    let gateway = match start_with(&mut config, toolsets).await? {
        Ok(gateway) => gateway,
        Err(not) => return Ok(not.exit),
    };
    let view = gateway.naming.view();
    let selection = args
        .toolset
        .as_ref()
        .map(|name| gateway.naming.toolset(name, &view));
    let rows = chosen(&view.surface, selection.as_ref(), args.tag.as_ref());
    let printed = if args.json {
        let items: Vec<Value> = rows
            .iter()
            .map(|(kind, item)| {
                let mut row = describe(*kind, item);
                if let Some(selection) = &selection {
                    let aliases: Vec<&String> = toolset_aliases(selection, item).collect();
                    row["toolset_aliases"] = serde_json::json!(aliases);
                }
                row
            })
            .collect();
        output::line(&serde_json::to_string_pretty(&items)?)
    } else {
        let mut table = vec![
            ["KIND", "NAME", "ALIASES", "SERVER", "ORIGIN", "TAGS"]
                .map(String::from)
                .to_vec(),
        ];
        table.extend(
            rows.iter()
                .map(|(kind, item)| table_row(*kind, item, selection.as_ref())),
        );
        output::line(&format_table(&table))
    };
    // A list without a server's tools is not the list asked for.
    let failed = report_failed_servers(&gateway, "error");
    gateway.shutdown().await;
    printed?;
    Ok(if failed > 0 { Exit::Failure } else { Exit::Ok })
}

/// The tools and prompts of `surface` that the toolset (when one is named) has and that carry
/// `tag` (when one is asked for), tools first.
fn chosen<'s>(
    surface: &'s moniker_surface::Surface,
    selection: Option<&Selection>,
    tag: Option<&moniker_surface::Tag>,
) -> Vec<(Kind, &'s Exposed)> {
    let mut rows = Vec::new();
    for kind in [Kind::Tool, Kind::Prompt] {
        for item in surface.items(kind) {
            if let Some(selection) = selection {
                let chosen = match kind {
                    Kind::Tool => &selection.tools,
                    Kind::Prompt => &selection.prompts,
                };
                if !chosen.contains(&item.name) {
                    continue;
                }
            }
            if tag.is_some_and(|tag| !item.tags.contains(tag)) {
                continue;
            }
            rows.push((kind, item));
        }
    }
    rows
}

/// The aliases the toolset gives `item`.
fn toolset_aliases<'a>(
    selection: &'a Selection,
    item: &'a Exposed,
) -> impl Iterator<Item = &'a String> {
    selection
        .aliases
        .iter()
        .filter(|(_, t)| **t == item.name)
        .map(|(a, _)| a)
}

/// One row of the table: kind, name, aliases (the toolset's marked, hidden ones in
/// parentheses), server, origin (an action tool's members), tags.
fn table_row(kind: Kind, item: &Exposed, selection: Option<&Selection>) -> Vec<String> {
    let mut aliases: Vec<String> = item.aliases.clone();
    if let Some(selection) = selection {
        aliases.extend(toolset_aliases(selection, item).map(|a| format!("{a} [toolset]")));
    }
    aliases.extend(item.hidden_aliases.iter().map(|h| format!("({h})")));
    let (server, origin) = match &item.route {
        Route::Origin(origin) if item.server_name == origin.server.as_str() => {
            (item.server_name.clone(), origin.name.clone())
        }
        Route::Origin(origin) => (
            format!("{} ({})", item.server_name, origin.server),
            origin.name.clone(),
        ),
        Route::Action(route) => {
            let actions: Vec<String> = route
                .members
                .iter()
                .map(|m| format!("{}={}", m.action, m.name))
                .collect();
            (item.server_name.clone(), actions.join(" "))
        }
    };
    let tags: Vec<&str> = item.tags.iter().map(|t| t.as_str()).collect();
    vec![
        kind_label(kind, item).to_owned(),
        item.name.clone(),
        aliases.join(", "),
        server,
        origin,
        tags.join(", "),
    ]
}

/// `tool`, `prompt`, `action` (an action tool), `legacy` (a member of an action tool, callable
/// by its old name but not listed), or `withheld` (changed since the lock, under
/// `integrity: block`: neither listed nor callable).
fn kind_label(kind: Kind, item: &Exposed) -> &'static str {
    match (&item.route, item.listed) {
        _ if item.withheld.is_some() => "withheld",
        (Route::Action(_), _) => "action",
        (_, false) => "legacy",
        _ => kind.noun(),
    }
}

/// One row of `list --json`.
fn describe(kind: Kind, item: &Exposed) -> Value {
    let mut row = serde_json::json!({
        "kind": kind_label(kind, item),
        "name": item.name,
        "aliases": item.aliases,
        "hidden_aliases": item.hidden_aliases,
        "server_name": item.server_name,
        "tags": item.tags.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
        "listed": item.listed,
    });
    if let Some(why) = &item.withheld {
        row["withheld"] = why.as_ref().into();
    }
    match &item.route {
        Route::Origin(origin) => {
            row["server"] = origin.server.as_str().into();
            row["origin"] = origin.name.as_str().into();
        }
        Route::Action(route) => {
            let actions: serde_json::Map<String, Value> = route
                .members
                .iter()
                .map(|m| (m.action.clone(), serde_json::json!({"tool": m.name, "server": m.origin.server.as_str(), "origin": m.origin.name})))
                .collect();
            row["actions"] = Value::Object(actions);
        }
    }
    if let Some((tool, action)) = &item.member_of {
        row["member_of"] = serde_json::json!({"tool": tool, "action": action});
    }
    // What a script needs to call it: its input schema (a prompt's arguments), as listed.
    if let Ok(definition) = serde_json::from_str::<Value>(item.definition.get()) {
        for key in ["inputSchema", "arguments"] {
            if let Some(value) = definition.get(key) {
                row[key] = value.clone();
            }
        }
    }
    row
}

pub(crate) fn format_table(rows: &[Vec<String>]) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let lines: Vec<String> = rows
        .iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            cells.join("  ").trim_end().to_owned()
        })
        .collect();
    lines.join("\n")
}
