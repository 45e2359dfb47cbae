use serde_json::{Value, json};

use super::*;
use crate::names::{Name, Profile, ProfileKind};
use crate::rules::{AliasRule, ServerRules};
use crate::surface::Via;

fn raw(v: Value) -> Box<RawValue> {
    RawValue::from_string(v.to_string()).unwrap()
}

fn sid(s: &str) -> ServerId {
    s.parse().unwrap()
}

fn tool(name: &str) -> Value {
    json!({"name": name, "description": format!("{name} does things."), "inputSchema": {"type": "object"}})
}

fn listing(server: &str, tools: &[Value]) -> Listing {
    Listing {
        server: sid(server),
        tools: tools.iter().cloned().map(raw).collect(),
        prompts: Vec::new(),
        version: None,
    }
}

fn fixture(file: &str, server: &str) -> Listing {
    let path = format!("{}/../../fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let items = |key: &str| -> Vec<Box<RawValue>> {
        v.get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .cloned()
            .map(raw)
            .collect()
    };
    Listing {
        server: sid(server),
        tools: items("tools"),
        prompts: items("prompts"),
        version: None,
    }
}

fn aliases(names: &[&str]) -> Vec<AliasRule> {
    names
        .iter()
        .map(|n| AliasRule {
            name: n.parse().unwrap(),
            hidden: false,
            deprecated: None,
        })
        .collect()
}

fn rules_with(servers: &[&str]) -> Rules {
    let mut rules = Rules::default();
    for s in servers {
        rules.servers.insert(sid(s), ServerRules::default());
    }
    rules
}

fn set(rules: &mut Rules, key: &str, o: Override) {
    rules.tools.insert(key.to_owned(), o);
}

fn contextgraph_rules() -> Rules {
    let mut rules = rules_with(&["contextgraph"]);
    set(
        &mut rules,
        "discover_sub_goals",
        Override {
            aliases: aliases(&["discover_goals"]),
            ..Default::default()
        },
    );
    set(
        &mut rules,
        "trigger_consolidation",
        Override {
            aliases: aliases(&["consolidate_memories"]),
            ..Default::default()
        },
    );
    rules
}

fn ok(built: Built) -> Surface {
    let errors: Vec<String> = built.errors().map(ToString::to_string).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    built.surface.expect("a surface without errors")
}

fn def(surface: &Surface, name: &str) -> Value {
    let exposed = surface.resolve_tool(name).expect(name).exposed;
    serde_json::from_str(exposed.definition.get()).unwrap()
}

fn codes(built: &Built) -> Vec<&'static str> {
    built.diagnostics.iter().map(|d| d.code).collect()
}

#[test]
fn seed_aliases_resolve_to_their_canonical_tools() {
    let surface = ok(build(
        &contextgraph_rules(),
        &[fixture("contextgraph.json", "contextgraph")],
    ));
    assert_eq!(surface.tools().len(), 35);
    for (alias, canonical) in [
        ("discover_goals", "discover_sub_goals"),
        ("consolidate_memories", "trigger_consolidation"),
    ] {
        let by_alias = surface.resolve_tool(alias).unwrap();
        assert_eq!(by_alias.via, Via::Alias);
        assert_eq!(by_alias.exposed.name, canonical);
        assert_eq!(by_alias.exposed.origin().unwrap().name, canonical);
        let by_name = surface.resolve_tool(canonical).unwrap();
        assert_eq!(by_name.via, Via::Name);
        let listed = def(&surface, canonical);
        assert_eq!(listed["aliases"], json!([alias]));
        assert!(
            listed["description"]
                .as_str()
                .unwrap()
                .ends_with(&format!("\n\nAliases: {alias}"))
        );
    }
    for wrong in [
        "Discover_Goals",
        "DISCOVER_GOALS",
        "discover_goals ",
        "nonexistent_tool",
    ] {
        assert!(surface.resolve_tool(wrong).is_none(), "{wrong}");
    }
    // Tools without aliases list no `aliases` field and keep their description.
    let plain = def(&surface, "abort_dream");
    assert!(plain.get("aliases").is_none());
    assert_eq!(
        plain["description"],
        "Abort the currently running dream (offline consolidation) cycle."
    );
    // One server: the listing says it once, no entry does.
    assert_eq!(surface.server(Kind::Tool), Some("contextgraph"));
    assert!(plain.get("_meta").is_none(), "{plain}");
    assert!(plain.get("tags").is_none(), "no tags configured: no field");
}

#[test]
fn an_alias_equal_to_a_canonical_name_is_rejected() {
    let mut rules = contextgraph_rules();
    set(
        &mut rules,
        "trigger_consolidation",
        Override {
            aliases: aliases(&["discover_sub_goals"]),
            ..Default::default()
        },
    );
    let built = build(&rules, &[fixture("contextgraph.json", "contextgraph")]);
    assert!(built.surface.is_none());
    let d = built.errors().next().unwrap();
    assert_eq!(d.code, "naming::duplicate");
    assert!(
        d.message.contains("`discover_sub_goals` is exposed twice"),
        "{d}"
    );
    assert_eq!(
        d.config_path.as_deref(),
        Some("tools.trigger_consolidation.aliases[0]")
    );
    assert!(
        d.help
            .as_deref()
            .unwrap()
            .contains("remove or rename the alias"),
        "{d}"
    );
}

#[test]
fn two_tools_may_not_share_an_alias() {
    let mut rules = contextgraph_rules();
    set(
        &mut rules,
        "trigger_consolidation",
        Override {
            aliases: aliases(&["discover_goals"]),
            ..Default::default()
        },
    );
    let built = build(&rules, &[fixture("contextgraph.json", "contextgraph")]);
    assert_eq!(codes(&built), ["naming::duplicate"]);
    let d = &built.diagnostics[0];
    assert!(
        d.message
            .contains("`discover_goals` is written 2 times in `tools`"),
        "{d}"
    );
    // Found without any listing too: `check --offline` reports it.
    assert_eq!(check_rules(&rules).len(), 1);
}

#[test]
fn an_alias_may_not_repeat_its_own_name() {
    let mut rules = rules_with(&["a"]);
    set(
        &mut rules,
        "x",
        Override {
            name: Some("y".parse().unwrap()),
            aliases: aliases(&["y"]),
            ..Default::default()
        },
    );
    let diags = check_rules(&rules);
    assert_eq!(diags.len(), 1);
    assert!(diags[0].message.contains("own name"), "{}", diags[0]);
}

#[test]
fn an_override_keyed_by_an_alias_is_a_chain() {
    let mut rules = contextgraph_rules();
    set(
        &mut rules,
        "discover_goals",
        Override {
            aliases: aliases(&["find_goals"]),
            ..Default::default()
        },
    );
    let built = build(&rules, &[fixture("contextgraph.json", "contextgraph")]);
    assert_eq!(codes(&built), ["naming::alias_chain"]);
    assert!(
        built.diagnostics[0]
            .help
            .as_deref()
            .unwrap()
            .contains("contextgraph/discover_sub_goals")
    );
}

fn bridge_rules() -> Rules {
    let mut rules = rules_with(&["bridge"]);
    rules.naming.strip_prefixes = vec!["local_bridge_".into()];
    rules.server_tags.insert(
        "github-custom".into(),
        ["git", "github", "version-control"]
            .iter()
            .map(|t| t.parse().unwrap())
            .collect(),
    );
    set(
        &mut rules,
        "local_bridge_github_custom__get_pr_info",
        Override {
            name: Some("get_pr_info".parse().unwrap()),
            tags: vec!["pull-request".parse().unwrap()],
            ..Default::default()
        },
    );
    rules
}

#[test]
fn seed_003_two_search_tools_fail_with_a_fix_that_works() {
    let rules = bridge_rules();
    let built = build(&rules, &[fixture("bridge.json", "bridge")]);
    assert!(built.surface.is_none());
    assert_eq!(codes(&built), ["naming::duplicate"]);
    let d = &built.diagnostics[0];
    assert_eq!(d.message, "tool name `search` is exposed twice");
    assert_eq!(
        d.notes,
        [
            "`search` from server `bridge` (origin `local_bridge_brave_search__search`)",
            "`search` from server `bridge` (origin `local_bridge_filesystem__search`)"
        ]
    );
    assert_eq!(
        d.help.as_deref().unwrap(),
        "add to moniker.yaml:\n  tools:\n    bridge/local_bridge_brave_search__search: { name: brave_search_search }\n    bridge/local_bridge_filesystem__search: { name: filesystem_search }"
    );

    // Applying the suggested overrides gives a valid surface.
    let mut fixed = rules.clone();
    set(
        &mut fixed,
        "bridge/local_bridge_brave_search__search",
        Override {
            name: Some("brave_search_search".parse().unwrap()),
            ..Default::default()
        },
    );
    set(
        &mut fixed,
        "bridge/local_bridge_filesystem__search",
        Override {
            name: Some("filesystem_search".parse().unwrap()),
            ..Default::default()
        },
    );
    let surface = ok(build(&fixed, &[fixture("bridge.json", "bridge")]));
    let names: Vec<&str> = surface.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "brave_search_search",
            "filesystem_search",
            "get_pr_info",
            "list_prs",
            "read_file"
        ]
    );
}

#[test]
fn seed_003_before_and_after() {
    let mut rules = bridge_rules();
    set(
        &mut rules,
        "local_bridge_brave_search__search",
        Override {
            name: Some("web_search".parse().unwrap()),
            ..Default::default()
        },
    );
    let surface = ok(build(&rules, &[fixture("bridge.json", "bridge")]));
    let pr = def(&surface, "get_pr_info");
    assert_eq!(pr["name"], "get_pr_info");
    assert_eq!(pr["_meta"]["io.moniker/server"], "github-custom");
    // DESIGN: tags are merged, deduplicated and sorted.
    assert_eq!(
        pr["_meta"]["io.moniker/tags"],
        json!(["git", "github", "pull-request", "version-control"])
    );
    assert!(
        !pr.to_string().contains("local_bridge"),
        "the origin name is never exposed: {pr}"
    );
    let read = def(&surface, "read_file");
    assert_eq!(read["_meta"]["io.moniker/server"], "filesystem");
    assert_eq!(
        surface
            .resolve_tool("read_file")
            .unwrap()
            .exposed
            .origin()
            .unwrap()
            .name,
        "local_bridge_filesystem__read_file"
    );
    // The second search is still `search`, from server `filesystem`.
    assert_eq!(
        def(&surface, "search")["_meta"]["io.moniker/server"],
        "filesystem"
    );
    // Prompts go through the same pipeline.
    let prompts: Vec<(&str, &str)> = surface
        .prompts()
        .iter()
        .map(|p| (p.name.as_str(), p.server_name.as_str()))
        .collect();
    assert_eq!(
        prompts,
        [("analyze", "thinking"), ("generate_playbook", "meta")]
    );
    assert_eq!(
        surface
            .resolve_prompt("analyze")
            .unwrap()
            .exposed
            .origin()
            .unwrap()
            .name,
        "local_bridge_thinking__analyze"
    );
    assert!(surface.resolve_tool("analyze").is_none());
}

#[test]
fn prompt_overrides_rename_and_tag_prompts() {
    let mut rules = bridge_rules();
    set(
        &mut rules,
        "local_bridge_brave_search__search",
        Override {
            name: Some("web_search".parse().unwrap()),
            ..Default::default()
        },
    );
    rules
        .server_tags
        .insert("thinking".into(), vec!["reasoning".parse().unwrap()]);
    rules.prompts.insert(
        "local_bridge_thinking__analyze".into(),
        Override {
            name: Some("think".parse().unwrap()),
            tags: vec!["deep-analysis".parse().unwrap()],
            aliases: aliases(&["analyze"]),
            ..Default::default()
        },
    );
    let surface = ok(build(&rules, &[fixture("bridge.json", "bridge")]));
    let think = surface.resolve_prompt("analyze").unwrap();
    assert_eq!(
        (think.exposed.name.as_str(), think.via),
        ("think", Via::Alias)
    );
    let tags: Vec<&str> = think.exposed.tags.iter().map(|t| t.as_str()).collect();
    assert_eq!(tags, ["deep-analysis", "reasoning"]);
}

#[test]
fn server_prefixes_and_split() {
    let mut rules = rules_with(&["gh", "fs"]);
    rules.servers.get_mut(&sid("gh")).unwrap().prefix = Some("gh".into());
    rules.naming.separator = "-".into();
    let surface = ok(build(
        &rules,
        &[
            listing("gh", &[tool("get_pr")]),
            listing("fs", &[tool("files__read"), tool("__odd"), tool("odd__")]),
        ],
    ));
    let names: Vec<(&str, &str)> = surface
        .tools()
        .iter()
        .map(|t| (t.name.as_str(), t.server_name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("__odd", "fs"),
            ("gh-get_pr", "gh"),
            ("odd__", "fs"),
            ("read", "files")
        ]
    );
    // An override's name is final: no prefix.
    set(
        &mut rules,
        "gh/get_pr",
        Override {
            name: Some("pr".parse().unwrap()),
            ..Default::default()
        },
    );
    let surface = ok(build(&rules, &[listing("gh", &[tool("get_pr")])]));
    assert!(surface.resolve_tool("pr").is_some());
    // An empty split turns parsing off.
    rules.naming.split = String::new();
    let surface = ok(build(&rules, &[listing("fs", &[tool("files__read")])]));
    assert_eq!(surface.tools()[0].name, "files__read");
}

#[test]
fn qualified_overrides_win_and_unqualified_ones_must_not_be_ambiguous() {
    let mut rules = rules_with(&["a", "b"]);
    set(
        &mut rules,
        "search",
        Override {
            tags: vec!["web".parse().unwrap()],
            ..Default::default()
        },
    );
    let listings = [
        listing("a", &[tool("search")]),
        listing("b", &[tool("search")]),
    ];
    let built = build(&rules, &listings);
    assert!(
        codes(&built).contains(&"naming::ambiguous_override"),
        "{:?}",
        built.diagnostics
    );
    let d = built
        .diagnostics
        .iter()
        .find(|d| d.code == "naming::ambiguous_override")
        .unwrap();
    assert_eq!(
        d.help.as_deref(),
        Some("qualify the key with its server: `a/search` or `b/search`")
    );

    set(
        &mut rules,
        "a/search",
        Override {
            name: Some("a_search".parse().unwrap()),
            ..Default::default()
        },
    );
    let surface = ok(build(&rules, &listings));
    let b = def(&surface, "search");
    assert_eq!(b["_meta"]["io.moniker/tags"], json!(["web"]));
    assert!(def(&surface, "a_search").get("tags").is_none());
}

#[test]
fn hidden_tools_leave_the_surface_and_can_settle_a_duplicate() {
    let mut rules = rules_with(&["a", "b"]);
    set(
        &mut rules,
        "b/search",
        Override {
            hidden: true,
            ..Default::default()
        },
    );
    let surface = ok(build(
        &rules,
        &[
            listing("a", &[tool("search")]),
            listing("b", &[tool("search"), tool("other")]),
        ],
    ));
    assert_eq!(surface.tools().len(), 2);
    assert_eq!(
        surface
            .resolve_tool("search")
            .unwrap()
            .exposed
            .origin()
            .unwrap()
            .server,
        sid("a")
    );
}

#[test]
fn hidden_aliases_resolve_but_are_not_listed() {
    let mut rules = rules_with(&["a"]);
    set(
        &mut rules,
        "search",
        Override {
            aliases: vec![
                AliasRule {
                    name: "find".parse().unwrap(),
                    hidden: true,
                    deprecated: None,
                },
                AliasRule {
                    name: "lookup".parse().unwrap(),
                    hidden: false,
                    deprecated: None,
                },
            ],
            ..Default::default()
        },
    );
    let surface = ok(build(&rules, &[listing("a", &[tool("search")])]));
    assert_eq!(surface.resolve_tool("find").unwrap().via, Via::Alias);
    let listed = def(&surface, "search");
    assert_eq!(listed["aliases"], json!(["lookup"]));
    assert_eq!(
        listed["description"],
        "search does things.\n\nAliases: lookup"
    );
    assert!(!listed.to_string().contains("find"));
}

#[test]
fn names_must_fit_the_profile() {
    let long = "x".repeat(70);
    let rules = rules_with(&["a"]);
    let built = build(
        &rules,
        &[listing("a", &[tool(&long), tool("with.dot"), tool("ok")])],
    );
    let profile: Vec<&Diagnostic> = built
        .diagnostics
        .iter()
        .filter(|d| d.code == "naming::profile")
        .collect();
    assert_eq!(profile.len(), 2, "{:?}", built.diagnostics);
    let d = profile
        .iter()
        .find(|d| d.message.contains("with.dot"))
        .unwrap();
    assert!(
        d.message
            .contains("the `portable` profile allows only letters, digits, `_` and `-`"),
        "{d}"
    );
    assert!(
        d.help
            .as_deref()
            .unwrap()
            .contains("a/with.dot: { name: with_dot }"),
        "{d}"
    );
    let d = profile
        .iter()
        .find(|d| d.message.contains("characters long"))
        .unwrap();
    assert!(
        d.help
            .as_deref()
            .unwrap()
            .contains(&format!("{{ name: {} }}", "x".repeat(64))),
        "{d}"
    );

    // The spec profile allows dots and 128 characters; a client prefix budget takes room.
    let mut spec = rules.clone();
    spec.naming.profile = Profile {
        kind: ProfileKind::Spec,
        prefix_budget: 0,
    };
    ok(build(
        &spec,
        &[listing("a", &[tool(&long), tool("with.dot")])],
    ));
    spec.naming.profile.prefix_budget = 60;
    assert!(
        build(&spec, &[listing("a", &[tool(&long)])])
            .surface
            .is_none()
    );

    // Names written in the config are checked too, without listings.
    let mut written = rules_with(&["a"]);
    set(
        &mut written,
        "t",
        Override {
            name: Some("a.b".parse().unwrap()),
            aliases: aliases(&["c.d"]),
            ..Default::default()
        },
    );
    let diags = check_rules(&written);
    let paths: Vec<_> = diags
        .iter()
        .map(|d| d.config_path.as_deref().unwrap())
        .collect();
    assert_eq!(paths, ["tools.t.name", "tools.t.aliases[0]"]);
}

#[test]
fn listing_fields_survive_and_owned_fields_are_replaced() {
    // `aliases` is moniker's, replaced in its place; a server's `tags` is taken out; moniker's
    // tags and server are in `_meta`.
    let origin = r#"{"name":"t","title":"T","description":"Does t.","inputSchema":{"type":"object","properties":{"n":{"type":"number","default":1.50}}},"annotations":{"readOnlyHint":true},"_meta":{"x":[1,2]},"aliases":["stale"],"tags":["OLD"],"zz_unknown":{"b":1,"a":2}}"#;
    let mut rules = rules_with(&["s"]);
    set(
        &mut rules,
        "t",
        Override {
            aliases: aliases(&["tt"]),
            tags: vec!["new".parse().unwrap()],
            ..Default::default()
        },
    );
    let l = Listing {
        server: sid("s"),
        tools: vec![RawValue::from_string(origin.into()).unwrap()],
        prompts: vec![],
        version: None,
    };
    let surface = ok(build(&rules, &[l]));
    assert_eq!(
        surface.tools()[0].definition.get(),
        r#"{"name":"t","title":"T","description":"Does t.\n\nAliases: tt","inputSchema":{"type":"object","properties":{"n":{"type":"number","default":1.50}}},"annotations":{"readOnlyHint":true},"_meta":{"x":[1,2],"io.moniker/tags":["new"]},"aliases":["tt"],"zz_unknown":{"b":1,"a":2}}"#
    );
}

/// Where every tool is of one server, the surface says it (a listing says it once) and no
/// entry does, whatever a server sent under moniker's key; with several, each entry says its
/// own and the surface none.
#[test]
fn one_server_is_said_once_several_by_each_entry() {
    let listing = |server: &str, tools: Vec<Value>| Listing {
        server: sid(server),
        tools: tools.into_iter().map(raw).collect(),
        prompts: vec![],
        version: None,
    };
    let forged = json!({"name": "a", "_meta": {"io.moniker/server": "other"}});
    let one = ok(build(
        &rules_with(&["s"]),
        &[listing("s", vec![forged.clone(), tool("b")])],
    ));
    assert_eq!(one.server(Kind::Tool), Some("s"));
    assert_eq!(one.server(Kind::Prompt), None, "no prompts");
    assert_eq!(def(&one, "a")["_meta"], json!({}));
    assert!(def(&one, "b").get("_meta").is_none());
    let two = ok(build(
        &rules_with(&["s", "t"]),
        &[listing("s", vec![forged]), listing("t", vec![tool("b")])],
    ));
    assert_eq!(two.server(Kind::Tool), None);
    assert_eq!(def(&two, "a")["_meta"]["io.moniker/server"], "s");
    assert_eq!(def(&two, "b")["_meta"]["io.moniker/server"], "t");
}

#[test]
fn a_description_override_replaces_and_a_missing_one_is_added() {
    let mut rules = rules_with(&["s"]);
    set(
        &mut rules,
        "a",
        Override {
            description: Some("New.".into()),
            ..Default::default()
        },
    );
    set(
        &mut rules,
        "b",
        Override {
            aliases: aliases(&["bb"]),
            ..Default::default()
        },
    );
    let l = Listing {
        server: sid("s"),
        tools: vec![raw(tool("a")), raw(json!({"name": "b"}))],
        prompts: vec![],
        version: None,
    };
    let surface = ok(build(&rules, &[l]));
    assert_eq!(def(&surface, "a")["description"], "New.");
    assert_eq!(
        surface.resolve_tool("b").unwrap().exposed.definition.get(),
        r#"{"name":"b","description":"Aliases: bb","aliases":["bb"]}"#
    );
}

#[test]
fn bad_listing_items_are_left_out_with_a_warning() {
    let rules = rules_with(&["s"]);
    let l = Listing {
        server: sid("s"),
        tools: vec![
            raw(json!("text")),
            raw(json!({"name": 3})),
            raw(json!({"description": "no name"})),
            raw(json!(null)),
            raw(tool("fine")),
        ],
        prompts: vec![raw(json!([]))],
        version: None,
    };
    let built = build(&rules, &[l]);
    assert_eq!(
        built
            .diagnostics
            .iter()
            .filter(|d| d.code == "listing::invalid_item" && !d.is_error())
            .count(),
        5
    );
    let surface = built.surface.unwrap();
    assert_eq!(surface.tools().len(), 1);
}

#[test]
fn unmatched_overrides_warn_only_when_their_server_is_listed() {
    let mut rules = rules_with(&["a", "b"]);
    set(&mut rules, "serach", Override::default());
    set(&mut rules, "b/gone", Override::default());
    // Server b is down: nothing can be said of `b/gone`, nor of unqualified keys.
    let built = build(&rules, &[listing("a", &[tool("search")])]);
    assert!(built.diagnostics.is_empty(), "{:?}", built.diagnostics);
    let built = build(
        &rules,
        &[listing("a", &[tool("search")]), listing("b", &[tool("x")])],
    );
    let warnings: Vec<(&str, Option<&str>)> = built
        .diagnostics
        .iter()
        .map(|d| (d.message.as_str(), d.help.as_deref()))
        .collect();
    assert_eq!(
        warnings,
        [
            (
                "override `b/gone` matches no tool of the connected servers",
                None
            ),
            (
                "override `serach` matches no tool of the connected servers",
                Some("did you mean `search`?")
            )
        ]
    );
    assert!(built.surface.is_some(), "warnings do not invalidate");
}

#[test]
fn name_and_alias_collide_across_servers() {
    let mut rules = rules_with(&["a", "b"]);
    set(
        &mut rules,
        "a/x",
        Override {
            aliases: aliases(&["y"]),
            ..Default::default()
        },
    );
    let built = build(
        &rules,
        &[listing("a", &[tool("x")]), listing("b", &[tool("y")])],
    );
    assert_eq!(codes(&built), ["naming::duplicate"]);
    let d = &built.diagnostics[0];
    assert_eq!(
        d.notes,
        [
            "`y` as an alias of tool `x` from server `a`, at `tools.\"a/x\".aliases[0]`",
            "`y` from server `b` (origin `y`)"
        ]
    );
}

#[test]
fn same_name_twice_in_one_server_is_a_duplicate() {
    let built = build(
        &rules_with(&["a"]),
        &[listing("a", &[tool("x"), tool("x")])],
    );
    assert_eq!(codes(&built), ["naming::duplicate"]);
}

/// moniker's own tools' names are taken, in every mode: a server's tool exposed under one, by
/// its own name, an override or an alias, is a duplicate with a fix that keeps it reachable.
#[test]
fn moniker_s_own_tool_names_are_taken() {
    let built = build(
        &rules_with(&["a"]),
        &[listing(
            "a",
            &[tool("search_tools"), tool("equip-toolset"), tool("x")],
        )],
    );
    assert!(built.surface.is_none());
    assert_eq!(codes(&built), ["naming::duplicate", "naming::duplicate"]);
    let d = &built.diagnostics[0];
    assert_eq!(
        d.message,
        "tool name `equip-toolset` is moniker's own tool's: a tool of a server cannot have it"
    );
    assert_eq!(
        d.notes,
        [
            "`equip-toolset` from server `a` (origin `equip-toolset`)",
            "`equip-toolset` is moniker's own tool (toolset management's or search mode's): its name is taken"
        ]
    );
    assert!(
        d.help
            .as_deref()
            .unwrap()
            .contains("a/equip-toolset: { name: a_equip-toolset }")
    );

    // An override to one of them, or an alias, is refused the same way.
    let mut rules = rules_with(&["a"]);
    set(
        &mut rules,
        "a/x",
        Override {
            name: Some(Name::try_from("call_tool").unwrap()),
            aliases: vec![AliasRule {
                name: Name::try_from("list-available-tools").unwrap(),
                hidden: false,
                deprecated: None,
            }],
            ..Default::default()
        },
    );
    let built = build(&rules, &[listing("a", &[tool("x")])]);
    assert_eq!(codes(&built), ["naming::duplicate", "naming::duplicate"]);
    let messages: Vec<&str> = built
        .diagnostics
        .iter()
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(
        messages,
        [
            "tool name `call_tool` is moniker's own tool's: a tool of a server cannot have it",
            "tool name `list-available-tools` is moniker's own tool's: a tool of a server cannot have it"
        ]
    );

    // Renamed as the fix says, the tools are there.
    let mut fixed = rules_with(&["a"]);
    for own in ["search_tools", "equip-toolset"] {
        set(
            &mut fixed,
            &format!("a/{own}"),
            Override {
                name: Some(Name::try_from(format!("a_{own}").as_str()).unwrap()),
                ..Default::default()
            },
        );
    }
    let built = build(
        &fixed,
        &[listing("a", &[tool("search_tools"), tool("equip-toolset")])],
    );
    assert!(built.diagnostics.is_empty(), "{:?}", codes(&built));
    assert!(built.surface.is_some());
}

#[test]
fn names_written_twice_in_config_are_found_offline() {
    let mut rules = Rules::default();
    set(
        &mut rules,
        "p",
        Override {
            name: Some(Name::try_from("same").unwrap()),
            ..Default::default()
        },
    );
    set(
        &mut rules,
        "q",
        Override {
            name: Some(Name::try_from("same").unwrap()),
            ..Default::default()
        },
    );
    let diags = check_rules(&rules);
    assert_eq!(diags.len(), 1);
    assert_eq!(
        diags[0].notes,
        ["as a name at `tools.p.name`", "as a name at `tools.q.name`"]
    );
}

fn action(members: &[(&str, &str)], legacy: crate::rules::Legacy) -> crate::rules::ActionRule {
    crate::rules::ActionRule {
        description: Some("Do things.".into()),
        tools: members
            .iter()
            .map(|(a, m)| ((*a).to_owned(), m.parse().unwrap()))
            .collect(),
        legacy,
        legacy_deprecated: None,
        aliases: Vec::new(),
        tags: vec!["grouped".parse().unwrap()],
    }
}

fn object_tool(name: &str, props: Value, required: &[&str]) -> Value {
    json!({"name": name, "description": format!("{name} it.\nMore."), "inputSchema": {"type": "object", "properties": props, "required": required}})
}

#[test]
fn action_tools_replace_their_members_in_the_listing() {
    use crate::rules::Legacy;
    let mut rules = rules_with(&["s"]);
    rules.actions.insert(
        "thing".into(),
        action(
            &[("make", "make_thing"), ("drop", "drop_thing")],
            Legacy::Hidden,
        ),
    );
    let l = listing(
        "s",
        &[
            object_tool(
                "make_thing",
                json!({"name": {"type": "string"}, "size": {"type": "integer"}}),
                &["name"],
            ),
            object_tool(
                "drop_thing",
                json!({"name": {"type": "string"}, "force": {"type": "boolean"}}),
                &["name"],
            ),
            tool("other"),
        ],
    );
    let surface = ok(build(&rules, &[l]));
    let listed: Vec<&str> = surface
        .listed(Kind::Tool)
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(listed, ["other", "thing"]);
    let thing = surface.resolve_tool("thing").unwrap();
    assert_eq!(thing.via, Via::Action);
    let def: Value = serde_json::from_str(thing.exposed.definition.get()).unwrap();
    assert_eq!(
        def["inputSchema"]["properties"]["action"]["enum"],
        json!(["make", "drop"])
    );
    assert_eq!(def["inputSchema"]["properties"]["name"]["type"], "string");
    assert_eq!(def["_meta"], json!({"io.moniker/tags": ["grouped"]}));
    assert_eq!(surface.server(Kind::Tool), Some("s"));
    // "make_thing it." says nothing `make` and the tool's name do not: the enum says it.
    assert!(
        !def["description"].as_str().unwrap().contains("- make"),
        "{def}"
    );
    // Old names: callable as legacy, not listed.
    let old = surface.resolve_tool("make_thing").unwrap();
    assert_eq!(old.via, Via::Legacy);
    assert!(!old.exposed.listed);
    assert_eq!(old.exposed.member_of, Some(("thing".into(), "make".into())));
    let crate::surface::Route::Action(route) = &thing.exposed.route else {
        panic!("an action route")
    };
    assert_eq!(route.members[1].origin.name, "drop_thing");
}

#[test]
fn legacy_listed_and_off() {
    use crate::rules::Legacy;
    let mut rules = rules_with(&["s"]);
    rules.actions.insert(
        "thing".into(),
        action(&[("make", "make_thing")], Legacy::Listed),
    );
    let l = || listing("s", &[tool("make_thing")]);
    let surface = ok(build(&rules, &[l()]));
    assert_eq!(surface.listed(Kind::Tool).count(), 2);
    assert!(
        def(&surface, "make_thing")["description"]
            .as_str()
            .unwrap()
            .starts_with(
                "[Deprecated — use \"thing\" with action \"make\"] make_thing does things."
            )
    );
    assert_eq!(surface.resolve_tool("make_thing").unwrap().via, Via::Legacy);

    rules.actions.get_mut("thing").unwrap().legacy = Legacy::Off;
    let surface = ok(build(&rules, &[l()]));
    assert!(surface.resolve_tool("make_thing").is_none());
    assert_eq!(surface.tools().len(), 1);
    // With the old name gone, the action tool may even take it.
    rules
        .actions
        .insert("make_thing".into(), rules.actions["thing"].clone());
    rules.actions.remove("thing");
    let surface = ok(build(&rules, &[l()]));
    assert_eq!(surface.resolve_tool("make_thing").unwrap().via, Via::Action);
}

#[test]
fn an_action_tool_name_must_not_collide_and_members_must_exist() {
    use crate::rules::Legacy;
    let mut rules = rules_with(&["s"]);
    rules.actions.insert(
        "other".into(),
        action(
            &[("make", "make_thing"), ("gone", "no_such_tool")],
            Legacy::Hidden,
        ),
    );
    let built = build(
        &rules,
        &[listing("s", &[tool("make_thing"), tool("other")])],
    );
    let mut found = codes(&built);
    found.sort();
    assert_eq!(found, ["naming::duplicate", "naming::unknown_member"]);
    let dup = built
        .diagnostics
        .iter()
        .find(|d| d.code == "naming::duplicate")
        .unwrap();
    assert!(
        dup.notes
            .iter()
            .any(|n| n.contains("as the action tool, at `actions.other`")),
        "{dup}"
    );
    let missing = built
        .diagnostics
        .iter()
        .find(|d| d.code == "naming::unknown_member")
        .unwrap();
    assert_eq!(
        missing.config_path.as_deref(),
        Some("actions.other.tools.gone")
    );

    // With a server not connected, a missing member is only a warning, and the action tool
    // is built with the members there are.
    let mut rules = rules_with(&["s", "down"]);
    rules.actions.insert(
        "thing".into(),
        action(
            &[("make", "make_thing"), ("gone", "no_such_tool")],
            Legacy::Hidden,
        ),
    );
    let built = build(&rules, &[listing("s", &[tool("make_thing")])]);
    assert!(built.errors().next().is_none(), "{:?}", built.diagnostics);
    let surface = built.surface.unwrap();
    let crate::surface::Route::Action(route) =
        &surface.resolve_tool("thing").unwrap().exposed.route
    else {
        panic!()
    };
    assert_eq!(route.members.len(), 1);
}

#[test]
fn action_names_are_checked_offline() {
    use crate::rules::Legacy;
    let mut rules = rules_with(&["s"]);
    rules.actions.insert(
        "thing".into(),
        action(&[("make", "make_thing")], Legacy::Hidden),
    );
    set(
        &mut rules,
        "x",
        Override {
            aliases: aliases(&["thing"]),
            ..Default::default()
        },
    );
    let diags = check_rules(&rules);
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert!(
        diags[0]
            .message
            .contains("`thing` is written 2 times in the config"),
        "{}",
        diags[0]
    );
}

// ---------------------------------------------------------------------------------------------
// Fixes as data

fn renames_of(d: &Diagnostic) -> Vec<(&str, &str, &str)> {
    d.fix
        .renames
        .iter()
        .map(|r| (r.server.as_str(), r.origin.as_str(), r.name.as_str()))
        .collect()
}

#[test]
fn a_duplicate_carries_its_renames_as_data() {
    let built = build(
        &rules_with(&["a", "b"]),
        &[listing("a", &[tool("echo")]), listing("b", &[tool("echo")])],
    );
    let d = built.errors().next().unwrap();
    assert_eq!(
        renames_of(d),
        [("a", "echo", "a_echo"), ("b", "echo", "b_echo")]
    );
    assert_eq!(d.fix.renames[0].section, "tools");
    // The help says the same, ready to paste.
    assert_eq!(
        d.help.as_deref(),
        Some(
            "add to moniker.yaml:\n  tools:\n    a/echo: { name: a_echo }\n    b/echo: { name: b_echo }"
        )
    );
}

#[test]
fn a_prefix_is_offered_when_it_resolves_every_error() {
    let two = |rules: &Rules| {
        build(
            rules,
            &[
                listing("one", &[tool("echo"), tool("add"), tool("own")]),
                listing("two", &[tool("echo"), tool("add")]),
            ],
        )
    };
    let built = two(&rules_with(&["one", "two"]));
    assert_eq!(built.errors().count(), 2);
    // Either server will do.
    assert!(
        built.errors().all(|d| d.fix.prefix == ["one", "two"]),
        "{:#?}",
        built.diagnostics
    );
    // And it does resolve them.
    let mut prefixed = rules_with(&["one", "two"]);
    prefixed.servers.get_mut(&sid("two")).unwrap().prefix = Some("two".into());
    assert!(two(&prefixed).surface.is_some());

    // `two` has a prefix already, and its names are overridden: `one` then.
    let mut rules = rules_with(&["one", "two"]);
    rules.servers.get_mut(&sid("two")).unwrap().prefix = Some("x".into());
    set(
        &mut rules,
        "two/echo",
        Override {
            name: Some("echo".parse().unwrap()),
            ..Default::default()
        },
    );
    set(
        &mut rules,
        "two/add",
        Override {
            name: Some("add".parse().unwrap()),
            ..Default::default()
        },
    );
    let built = two(&rules);
    assert_eq!(built.errors().count(), 2, "{:#?}", built.diagnostics);
    // The overridden names are final: a prefix on `one` it is.
    assert!(
        built.errors().all(|d| d.fix.prefix == ["one"]),
        "{:#?}",
        built.diagnostics
    );
}

#[test]
fn no_prefix_is_offered_across_three_servers_or_for_other_errors() {
    let built = build(
        &rules_with(&["a", "b", "c"]),
        &[
            listing("a", &[tool("echo"), tool("add")]),
            listing("b", &[tool("echo")]),
            listing("c", &[tool("add")]),
        ],
    );
    assert_eq!(built.errors().count(), 2);
    assert!(built.errors().all(|d| d.fix.prefix.is_empty()));

    // An alias that is another tool's name: the alias is what to change, no rename.
    let mut rules = rules_with(&["a", "b"]);
    set(
        &mut rules,
        "a/echo",
        Override {
            aliases: aliases(&["add"]),
            ..Default::default()
        },
    );
    let built = build(
        &rules,
        &[
            listing("a", &[tool("echo")]),
            listing("b", &[tool("echo"), tool("add")]),
        ],
    );
    assert!(
        built.errors().any(|d| d.fix.renames.is_empty()),
        "{:#?}",
        built.diagnostics
    );
    assert!(built.errors().all(|d| d.fix.prefix.is_empty()));
}

/// `discover_sub_goals` with the deprecated alias `discover_goals` (and the plain alias `dg`),
/// built on `today`.
fn deprecated_alias_on(today: &str) -> Built {
    let mut rules = rules_with(&["cg"]);
    let mut alias = aliases(&["discover_goals", "dg"]);
    alias[0].deprecated = Some(crate::Deprecation {
        since: "2026-11-01".parse().unwrap(),
        remove_after: "2027-05-01".parse().unwrap(),
        use_instead: None,
    });
    set(
        &mut rules,
        "discover_sub_goals",
        Override {
            aliases: alias,
            ..Override::default()
        },
    );
    rules.today = Some(today.parse().unwrap());
    build(&rules, &[listing("cg", &[tool("discover_sub_goals")])])
}

#[test]
fn a_deprecated_alias_resolves_until_its_day_with_a_notice_then_not_at_all() {
    let before = deprecated_alias_on("2026-11-23");
    assert!(codes(&before).contains(&"deprecation::scheduled"));
    let warning = before
        .diagnostics
        .iter()
        .find(|d| d.code == "deprecation::scheduled")
        .unwrap();
    assert!(
        warning.message.contains("159 days left"),
        "{}",
        warning.message
    );
    let surface = ok(before);
    let resolved = surface.resolve(Kind::Tool, "discover_goals").unwrap();
    assert_eq!(resolved.via, Via::Alias);
    assert!(resolved.exposed.deprecated.contains_key("discover_goals"));
    assert!(!resolved.exposed.deprecated.contains_key("dg"));
    let description = def(&surface, "discover_sub_goals")["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        description.contains("Deprecated name `discover_goals` (since 2026-11-01; stops working after 2027-05-01): use `discover_sub_goals`."),
        "{description}"
    );

    let last_day = ok(deprecated_alias_on("2027-05-01"));
    assert!(last_day.resolve(Kind::Tool, "discover_goals").is_some());

    let after = deprecated_alias_on("2027-05-02");
    assert!(codes(&after).contains(&"deprecation::expired"));
    let surface = ok(after);
    assert!(surface.resolve(Kind::Tool, "discover_goals").is_none());
    assert!(surface.resolve(Kind::Tool, "dg").is_some());
    let description = def(&surface, "discover_sub_goals")["description"].to_string();
    assert!(!description.contains("Deprecated"), "{description}");
}

/// The fix for a name several servers share names each tool after its server, without the
/// words that name no server in particular (`mcp`, `server`); where that is taken, the whole
/// server name.
#[test]
fn a_shared_name_is_fixed_with_each_servers_own_words() {
    let listings = [
        listing("hacker-news-mcp-server", &[tool("search")]),
        listing("yahoo-finance-mcp", &[tool("search")]),
        listing("mcp-server", &[tool("search")]),
        listing("web", &[tool("search"), tool("web_search")]),
    ];
    let built = build(&Rules::default(), &listings);
    assert_eq!(codes(&built), ["naming::duplicate"]);
    let help = built.diagnostics[0].help.as_deref().unwrap();
    for line in [
        "hacker-news-mcp-server/search: { name: hacker_news_search }",
        "yahoo-finance-mcp/search: { name: yahoo_finance_search }",
        // Nothing left of the server's name without those words: the whole of it.
        "mcp-server/search: { name: mcp_server_search }",
        // `web_search` is taken: numbered.
        "web/search: { name: web_search_2 }",
    ] {
        assert!(help.contains(line), "{line} not in {help}");
    }
}

#[test]
fn a_glob_override_key_applies_to_every_tool_it_matches() {
    let mut rules = rules_with(&["gh", "fs"]);
    let hide = Override {
        hidden: true,
        ..Default::default()
    };
    set(&mut rules, "write_*", hide.clone());
    set(
        &mut rules,
        "gh/*_pr",
        Override {
            tags: vec!["review".parse().unwrap()],
            ..Default::default()
        },
    );
    // The exact key wins over a glob; the longer glob over the shorter.
    set(
        &mut rules,
        "gh/merge_pr",
        Override {
            tags: vec!["merge".parse().unwrap()],
            ..Default::default()
        },
    );
    set(&mut rules, "gh/*", Override::default());
    set(&mut rules, "nothing_*", hide);
    let built = build(
        &rules,
        &[
            listing(
                "gh",
                &[tool("get_pr"), tool("merge_pr"), tool("write_file_gh")],
            ),
            listing("fs", &[tool("write_file"), tool("read_file")]),
        ],
    );
    let surface = built.surface.expect("a surface");
    let listed: Vec<(&str, Vec<&str>)> = surface
        .listed(Kind::Tool)
        .map(|e| (e.name.as_str(), e.tags.iter().map(Tag::as_str).collect()))
        .collect();
    assert_eq!(
        listed,
        [
            ("get_pr", vec!["review"]),
            ("merge_pr", vec!["merge"]),
            ("read_file", vec![])
        ]
    );
    assert!(
        surface.resolve_tool("write_file").is_none(),
        "hidden by the glob"
    );
    let unmatched: Vec<&str> = built
        .diagnostics
        .iter()
        .filter(|d| d.code.ends_with("ed_override"))
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(
        unmatched,
        [
            "override `gh/*` applies to no tool: a more specific key wins for every tool it matches",
            "override `nothing_*` matches no tool of the connected servers"
        ]
    );

    let mut named = rules_with(&["gh"]);
    set(
        &mut named,
        "get_*",
        Override {
            name: Some("one".parse().unwrap()),
            ..Default::default()
        },
    );
    let refused = build(&named, &[listing("gh", &[tool("get_pr")])]);
    assert!(refused.surface.is_none());
    assert!(
        refused
            .diagnostics
            .iter()
            .any(|d| d.code == "naming::glob_names")
    );
}
