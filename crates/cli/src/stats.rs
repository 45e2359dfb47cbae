//! `moniker stats`: what the listing costs a client, per server and in total.

use std::collections::{BTreeMap, BTreeSet};

use moniker_config::Config;
use moniker_gateway::{Gateway, View};
use moniker_surface::Kind;
use moniker_surface::discovery::Mode;
use serde_json::value::RawValue;

use crate::exit::{Exit, Failure};
use crate::list::format_table;
use crate::output;
use crate::start::start;

/// Per server (its name, `(several)` for a tool of more than one, and `TOTAL`): tools, bytes
/// and tokens of the listing.
type Costs = BTreeMap<String, (usize, usize, usize)>;

/// `moniker stats`: what the listing costs a client, per server and in total, without the
/// action tools and with them: tools, bytes of `tools/list`, and tokens (o200k, the tokenizer
/// of current OpenAI models; other tokenizers differ by a few percent).
pub async fn stats(mut config: Config, json: bool) -> Result<Exit, Failure> {
    let gateway = match start(&mut config).await? {
        Ok(gateway) => gateway,
        Err(not) => return Ok(not.exit),
    };
    let listings = gateway.naming.listings();
    let after = gateway.naming.view();
    gateway.shutdown().await;
    let mut plain = moniker_surface::Rules::clone(&gateway.naming.rules());
    plain.actions.clear();
    let before = moniker_surface::build(&plain, &listings)
        .surface
        .unwrap_or_default();
    let bpe = tiktoken_rs::o200k_base()?;
    let count = |text: &str| bpe.encode_ordinary(text).len();
    let (b, a) = (costs(&before, &count), costs(&after.surface, &count));
    // The listing a session without a toolset sees, tool by tool.
    let listed: Vec<&RawValue> = after
        .surface
        .listed(Kind::Tool)
        .map(|e| &*e.definition)
        .collect();
    let listing = moniker_surface::listing::render(
        Kind::Tool,
        listed.iter().copied(),
        &[],
        after.surface.server(Kind::Tool),
    );
    let listed: Vec<&str> = listed.iter().map(|d| d.get()).collect();
    let audit = crate::audit::audit(&listed, &listing, &count);
    // What the servers list themselves, side by side.
    let raw = count(&moniker_surface::listing::render(
        Kind::Tool,
        listings.iter().flat_map(|l| l.tools.iter().map(|t| &**t)),
        &[],
        None,
    ));
    let savings = serde_json::json!({
        "listing_tokens": audit.listing_tokens,
        "without_action_tools": b.get("TOTAL").map_or(0, |t| t.2),
        "repeated_text_said_once": audit.repeated.iter().map(|r| r.tokens_repeated).sum::<usize>(),
        "names_only_for_clients_that_defer_loading": count(&names_only(&audit)),
        "search_mode": listed_in(&after, Mode::Search, &count),
        "hints_mode": listed_in(&after, Mode::Hints, &count),
        "servers_own_listings": raw,
        "toolsets": toolset_tokens(&gateway, &after, &count),
    });
    if json {
        let report = serde_json::json!({
            "tokenizer": "o200k",
            "tools": audit.tools,
            "repeated": audit.repeated,
            "savings": savings,
        });
        output::line(&serde_json::to_string_pretty(&report)?)?;
        return Ok(Exit::Ok);
    }
    output::line("tools/list without action tools -> with them (tokens: o200k)")?;
    output::line(&format_table(&change_table(&b, &a)))?;
    print_tools(&audit)?;
    print_savings(&savings)?;
    Ok(Exit::Ok)
}

/// What `surface`'s listing costs, per server and in total, as a session lists it.
fn costs(surface: &moniker_surface::Surface, count: &impl Fn(&str) -> usize) -> Costs {
    let mut groups: BTreeMap<String, Vec<&RawValue>> = BTreeMap::new();
    for item in surface.listed(Kind::Tool) {
        let servers: BTreeSet<&str> = item.servers().map(|s| s.as_str()).collect();
        let key = match servers.len() {
            1 => servers.into_iter().next().unwrap_or_default().to_owned(),
            _ => "(several)".to_owned(),
        };
        groups.entry(key).or_default().push(&*item.definition);
    }
    // As a session lists them: the surface's one server, when it has one, said once.
    let size = |defs: &[&RawValue]| {
        let text = moniker_surface::listing::render(
            Kind::Tool,
            defs.iter().copied(),
            &[],
            surface.server(Kind::Tool),
        );
        (defs.len(), text.len(), count(&text))
    };
    let mut all = Vec::new();
    let mut out = Costs::new();
    for (server, defs) in groups {
        out.insert(server, size(&defs));
        all.extend(defs);
    }
    out.insert("TOTAL".to_owned(), size(&all));
    out
}

/// The table of each server's costs without action tools -> with them, `TOTAL` last.
fn change_table(before: &Costs, after: &Costs) -> Vec<Vec<String>> {
    let mut keys: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| *k != "TOTAL")
        .collect();
    keys.sort();
    keys.dedup();
    let total = "TOTAL".to_owned();
    let change = |x: usize, y: usize| {
        if x == y || x == 0 {
            format!("{y}")
        } else {
            format!(
                "{x} -> {y} ({:+.0}%)",
                (y as f64 - x as f64) * 100.0 / x as f64
            )
        }
    };
    let mut table = vec![
        ["SERVER", "TOOLS", "BYTES", "TOKENS"]
            .map(String::from)
            .to_vec(),
    ];
    for key in keys.into_iter().chain(std::iter::once(&total)) {
        let (tb, bb, kb) = before.get(key).copied().unwrap_or_default();
        let (ta, ba, ka) = after.get(key).copied().unwrap_or_default();
        table.push(vec![
            key.clone(),
            change(tb, ta),
            change(bb, ba),
            change(kb, ka),
        ]);
    }
    table
}

/// The listing of the tools' names alone (what a client that defers loading shows first).
fn names_only(audit: &crate::audit::Audit) -> String {
    let names: Vec<String> = audit.tools.iter().map(|t| name_entry(&t.name)).collect();
    format!(r#"{{"tools":[{}]}}"#, names.join(","))
}

/// A tool's listing entry of its name alone.
fn name_entry(name: &str) -> String {
    let name = serde_json::to_string(name).unwrap_or_default();
    format!(r#"{{"name":{name}}}"#)
}

/// Each toolset's listing, in tokens.
fn toolset_tokens(
    gateway: &Gateway,
    after: &View,
    count: &impl Fn(&str) -> usize,
) -> BTreeMap<String, usize> {
    let mut toolsets = BTreeMap::new();
    for name in &gateway.naming.toolset_names() {
        let selection = gateway.naming.toolset(name, after);
        let defs: Vec<&str> = after
            .surface
            .listed(Kind::Tool)
            .filter(|e| selection.tools.iter().any(|t| *t == e.name))
            .map(|e| e.definition.get())
            .collect();
        toolsets.insert(
            name.clone(),
            count(&format!(r#"{{"tools":[{}]}}"#, defs.join(","))),
        );
    }
    toolsets
}

/// What a session lists first in discovery `mode`, with the config's pins, in tokens.
fn listed_in(after: &View, mode: Mode, count: &impl Fn(&str) -> usize) -> usize {
    let discovery = moniker_surface::Discovery {
        mode,
        ..after.surface.discovery().clone()
    };
    let entries = discovery.entries(
        Kind::Tool,
        after
            .surface
            .listed(Kind::Tool)
            .map(|e| (e, std::borrow::Cow::Borrowed(&*e.definition))),
    );
    let server = discovery.server(&after.surface, Kind::Tool, entries.len());
    count(&moniker_surface::listing::render(
        Kind::Tool,
        entries,
        &[],
        server,
    ))
}

/// Each tool's cost, the dearest first, and the text repeated across tools.
fn print_tools(audit: &crate::audit::Audit) -> Result<(), Failure> {
    let mut tools = vec![
        ["TOOL", "NAME", "DESCRIPTION", "SCHEMA", "TOTAL"]
            .map(String::from)
            .to_vec(),
    ];
    let mut by_cost: Vec<&crate::audit::ToolCost> = audit.tools.iter().collect();
    by_cost.sort_by(|x, y| {
        y.total_tokens
            .cmp(&x.total_tokens)
            .then(x.name.cmp(&y.name))
    });
    for t in by_cost {
        tools.push(vec![
            t.name.clone(),
            t.name_tokens.to_string(),
            t.description_tokens.to_string(),
            t.schema_tokens.to_string(),
            t.total_tokens.to_string(),
        ]);
    }
    output::line("\ntokens per tool, as listed")?;
    output::line(&format_table(&tools))?;
    if !audit.repeated.is_empty() {
        let mut rows = vec![
            ["REPEATED", "TOOLS", "TOKENS", "TEXT"]
                .map(String::from)
                .to_vec(),
        ];
        for r in audit.repeated.iter().take(10) {
            let text: String = r.text.chars().take(60).collect();
            rows.push(vec![
                r.kind.to_owned(),
                r.tools.to_string(),
                r.tokens_repeated.to_string(),
                text,
            ]);
        }
        output::line("\ntext repeated across tools (TOKENS: what saying it once would save)")?;
        output::line(&format_table(&rows))?;
    }
    Ok(())
}

/// The savings line, and each toolset's listing.
fn print_savings(savings: &serde_json::Value) -> Result<(), Failure> {
    output::line(&format!(
        "\nthe servers' own listings: {} tokens; moniker's listing: {} (hints mode: {}; search mode, pinned tools and search_tools and call_tool: {}); without action tools: {}; repeated text said once would save {}; names only (for clients that defer loading): {}",
        savings["servers_own_listings"],
        savings["listing_tokens"],
        savings["hints_mode"],
        savings["search_mode"],
        savings["without_action_tools"],
        savings["repeated_text_said_once"],
        savings["names_only_for_clients_that_defer_loading"],
    ))?;
    for (name, tokens) in savings["toolsets"].as_object().into_iter().flatten() {
        output::line(&format!("toolset `{name}`: {tokens} tokens"))?;
    }
    Ok(())
}
