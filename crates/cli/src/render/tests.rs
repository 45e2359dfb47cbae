use moniker_config::Config;
use moniker_surface::{Built, Listing, ServerId};
use serde_json::value::RawValue;

use super::*;

/// `examples/bridge.yaml` without the two overrides that resolve the `search` clash; `tools:`
/// is the last section, so that a suggested fix can be appended to it.
const BRIDGE: &str = "\
servers:
  bridge:
    command: target/debug/moniker-fixture
    args: [fixtures/bridge.json]
naming:
  strip_prefixes: [local_bridge_]
server_tags:
  github-custom: [git, github, version-control]
  filesystem: [files, storage]
prompts:
  local_bridge_meta__generate_playbook: { name: generate_playbook, tags: [playbook] }
  local_bridge_thinking__analyze: { name: think, tags: [deep-analysis] }
tools:
  local_bridge_github_custom__get_pr_info: { name: get_pr_info, tags: [pull-request] }
";

fn parse(text: &str) -> Config {
    match moniker_config::parse("moniker.yaml", text) {
        Ok(config) => config,
        Err(report) => panic!("{report}"),
    }
}

/// The listing of `fixtures/bridge.json`, as server `bridge` would send it.
fn bridge_listing() -> Listing {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/bridge.json");
    let text = std::fs::read_to_string(path).expect("fixture");
    let inventory: std::collections::HashMap<String, Box<RawValue>> =
        serde_json::from_str(&text).expect("inventory");
    let items = |key: &str| -> Vec<Box<RawValue>> {
        serde_json::from_str(inventory[key].get()).expect("a list")
    };
    Listing {
        tools: items("tools"),
        prompts: items("prompts"),
        ..Listing::new("bridge".parse::<ServerId>().expect("server id"))
    }
}

fn build(config: &Config) -> Built {
    moniker_surface::build(&config.rules, &[bridge_listing()])
}

fn codes(built: &Built) -> Vec<&'static str> {
    built.errors().map(|d| d.code).collect()
}

/// `config` with the YAML block of `help` (after its `add to moniker.yaml:` line) pasted at
/// the end, where `tools:` is the last section.
fn paste(config: &str, help: &str) -> String {
    let (_, block) = help
        .split_once("add to moniker.yaml:\n")
        .expect("a YAML fix");
    let lines: Vec<&str> = block.lines().collect();
    let indent = lines
        .iter()
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let mut out = config.to_owned();
    for line in lines {
        let line = &line[indent..];
        // The section header is in the config already.
        if line == "tools:" {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[test]
fn a_duplicate_shows_both_origins_and_a_fix() {
    let config = parse(BRIDGE);
    let built = build(&config);
    assert_eq!(
        codes(&built),
        ["naming::duplicate"],
        "{:#?}",
        built.diagnostics
    );
    insta::assert_snapshot!(Renderer::plain().diagnostics(&config.source, &built.diagnostics));
}

/// Seed 003: the suggested fix, pasted as printed, makes the config valid.
#[test]
fn the_suggested_fix_works_as_pasted() {
    let config = parse(BRIDGE);
    let built = build(&config);
    let help = built.errors().find_map(|d| d.help.clone()).expect("a help");
    let fixed_text = paste(BRIDGE, &help);
    insta::assert_snapshot!(&fixed_text[BRIDGE.len()..], @r"
    bridge/local_bridge_brave_search__search: { name: brave_search_search }
    bridge/local_bridge_filesystem__search: { name: filesystem_search }
    ");
    let fixed = parse(&fixed_text);
    let rebuilt = build(&fixed);
    assert_eq!(
        codes(&rebuilt),
        Vec::<&str>::new(),
        "{:#?}",
        rebuilt.diagnostics
    );
    let surface = rebuilt.surface.expect("a surface");
    for (name, origin) in [
        ("filesystem_search", "local_bridge_filesystem__search"),
        ("brave_search_search", "local_bridge_brave_search__search"),
        ("get_pr_info", "local_bridge_github_custom__get_pr_info"),
    ] {
        let resolved = surface.resolve_tool(name).expect(name);
        assert_eq!(resolved.exposed.origin().expect("an origin").name, origin);
    }
}

#[test]
fn a_config_report_shows_every_error_at_its_place() {
    let text = "servers:\n  github:\n    comand: npx\n    tags: [Git]\n";
    let Err(report) = moniker_config::parse("moniker.yaml", text) else {
        panic!("invalid")
    };
    insta::assert_snapshot!(Renderer::plain().config_report(&report));
}

#[test]
fn conflicting_entries_are_all_labelled() {
    let config = parse(
        "servers: { s: { command: x } }\ntools:\n  a: { aliases: [find] }\n  b: { aliases: [find] }\n",
    );
    let diagnostics = moniker_surface::check_rules(&config.rules);
    insta::assert_snapshot!(Renderer::plain().diagnostics(&config.source, &diagnostics));
}

#[test]
fn a_path_without_a_place_falls_back_to_its_entry() {
    let config =
        parse("servers: { a.b: { command: x } }\ntools:\n  \"a.b/c\": { name: x, aliases: [y] }\n");
    let entry = config.source.span("tools.\"a.b/c\"").expect("entry");
    let aliases = config
        .source
        .span("tools.\"a.b/c\".aliases")
        .expect("aliases");
    let alias = config
        .source
        .span("tools.\"a.b/c\".aliases[0]")
        .expect("alias");
    assert_eq!(
        locate(&config.source, "tools.\"a.b/c\".aliases[0]"),
        Some(alias)
    );
    assert_eq!(
        locate(&config.source, "tools.\"a.b/c\".aliases[7]"),
        Some(aliases)
    );
    assert_eq!(
        locate(&config.source, "tools.\"a.b/c\".nope.deeper"),
        Some(entry)
    );
    assert_eq!(locate(&config.source, "elsewhere"), None);

    let d = Diagnostic::error("naming::test", "a message").at("tools.\"a.b/c\".aliases[3]");
    let shown = Renderer::plain().diagnostics(&config.source, &[d]);
    assert!(shown.contains("moniker.yaml:3:32"), "{shown}");
    assert!(shown.contains("tools.\"a.b/c\".aliases[3]"), "{shown}");

    let d = Diagnostic::warning("naming::test", "nowhere").at("elsewhere.gone");
    let shown = Renderer::plain().diagnostics(&config.source, &[d]);
    assert_eq!(
        shown,
        "warning[naming::test]: nowhere\n  at: `elsewhere.gone` in moniker.yaml\n"
    );
}

#[test]
fn parents_respect_quoted_keys() {
    assert_eq!(
        parent("tools.\"a.b[1]\".aliases[0]"),
        Some("tools.\"a.b[1]\".aliases")
    );
    assert_eq!(parent("tools.\"a.b[1]\".aliases"), Some("tools.\"a.b[1]\""));
    assert_eq!(parent("tools.\"a.b[1]\""), Some("tools"));
    assert_eq!(parent("tools.\"a\\\".b\""), Some("tools"));
    assert_eq!(parent("tools"), None);
    assert_eq!(parent(""), None);
}

#[test]
fn help_keeps_its_indentation_and_plain_output_is_ascii() {
    let source = Source::new("m.yaml", "a: 1\n");
    let d = Diagnostic::error("naming::test", "message")
        .note("one fact")
        .help("add to moniker.yaml:\n  tools:\n    x: { name: y }");
    let shown = Renderer::plain().diagnostics(&source, &[d]);
    assert_eq!(
        shown,
        "error[naming::test]: message\n  note: one fact\n  help: add to moniker.yaml:\n          tools:\n            x: { name: y }\n"
    );
    let config = parse(BRIDGE);
    let shown = Renderer::plain().diagnostics(&config.source, &build(&config).diagnostics);
    assert!(shown.is_ascii(), "{shown}");
}

#[test]
fn failures_show_their_causes() {
    let io = std::io::Error::other("disk on fire");
    let shown = Renderer::plain().failure(&io);
    assert_eq!(shown, "error: disk on fire\n");
}

// ---------------------------------------------------------------------------------------------
// Several conflicts: each once, one fix for all

fn listing_of(server: &str, tools: &[&str], prompts: &[&str]) -> Listing {
    let items = |names: &[&str]| -> Vec<Box<RawValue>> {
        names
            .iter()
            .map(|n| {
                let item = serde_json::json!({"name": n, "inputSchema": {"type": "object"}});
                RawValue::from_string(item.to_string()).expect("json")
            })
            .collect()
    };
    Listing {
        tools: items(tools),
        prompts: items(prompts),
        ..Listing::new(server.parse::<ServerId>().expect("server id"))
    }
}

/// Two copies of one server, and a third with a tool of its own.
const COPIES: &str = "\
servers:
  main: { command: x }
  copy: { command: x }
  other: { command: x }
";

fn copies() -> Vec<Listing> {
    vec![
        listing_of("main", &["echo", "add", "get-env"], &["greet"]),
        listing_of("copy", &["echo", "add", "get-env"], &["greet"]),
        listing_of("other", &["unique"], &[]),
    ]
}

/// The config with the last fix block of `shown` appended byte for byte, as printed.
fn paste_merged(config: &str, shown: &str) -> String {
    let (_, block) = shown
        .rsplit_once("(or run `moniker check --fix`):\n")
        .expect("a merged fix");
    format!("{config}{block}")
}

#[test]
fn several_conflicts_between_two_servers_show_once_with_a_prefix_and_one_block() {
    let config = parse(COPIES);
    let built = moniker_surface::build(&config.rules, &copies());
    assert_eq!(built.errors().count(), 4, "{:#?}", built.diagnostics);
    let shown = Renderer::plain().diagnostics(&config.source, &built.diagnostics);
    insta::assert_snapshot!(shown);
    assert_eq!(shown.matches("tools:").count(), 1, "{shown}");

    // The block, pasted as printed, resolves every conflict.
    let fixed = parse(&paste_merged(COPIES, &shown));
    let rebuilt = moniker_surface::build(&fixed.rules, &copies());
    assert_eq!(rebuilt.errors().count(), 0, "{:#?}", rebuilt.diagnostics);
    // So does the one line.
    let prefixed =
        parse(&COPIES.replace("copy: { command: x }", "copy: { command: x, prefix: true }"));
    let rebuilt = moniker_surface::build(&prefixed.rules, &copies());
    assert_eq!(rebuilt.errors().count(), 0, "{:#?}", rebuilt.diagnostics);
    assert!(
        rebuilt
            .surface
            .expect("valid")
            .resolve_tool("copy_echo")
            .is_some()
    );
}

#[test]
fn conflicts_across_three_servers_get_one_block_under_the_existing_section() {
    let text = "\
servers:
  a: { command: x }
  b: { command: x }
  c: { command: x }
tools:
  unique: { tags: [own] }
";
    let config = parse(text);
    let listings = [
        listing_of("a", &["echo", "add", "unique"], &[]),
        listing_of("b", &["echo"], &[]),
        listing_of("c", &["add"], &[]),
    ];
    let built = moniker_surface::build(&config.rules, &listings);
    let shown = Renderer::plain().diagnostics(&config.source, &built.diagnostics);
    insta::assert_snapshot!(shown);
    assert!(!shown.contains("prefix"), "{shown}");
    // Under the `tools:` the config has already (at its end here): the lines, pasted as
    // printed; and what `--fix` writes (the same lines, first under it) resolves them too.
    let fixed = paste_merged(text, &shown);
    let renames = crate::fix::renames(&built.diagnostics);
    let written = crate::fix::apply(text, &renames).expect("block style");
    let rewritten = moniker_surface::build(&parse(&written).rules, &listings);
    assert_eq!(rewritten.errors().count(), 0, "{written}");
    let rebuilt = moniker_surface::build(&parse(&fixed).rules, &listings);
    assert_eq!(rebuilt.errors().count(), 0, "{:#?}", rebuilt.diagnostics);
}
