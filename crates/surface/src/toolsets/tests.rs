#![allow(
    clippy::too_many_lines,
    reason = "a test is one scenario, read from top to bottom"
)]
use serde_json::{Value, json};

use super::*;
use crate::listing::Listing;
use crate::names::{ServerId, Tag};
use crate::rules::{ActionRule, AliasRule, Override, Rules, ServerRules};
use crate::{Name, build};

// ---------------------------------------------------------------------------------------------
// A small surface

fn raw(v: &Value) -> Box<RawValue> {
    RawValue::from_string(v.to_string()).unwrap()
}

fn sid(s: &str) -> ServerId {
    s.parse().unwrap()
}

fn tag(s: &str) -> Tag {
    s.parse().unwrap()
}

fn tags(list: &[&str]) -> Vec<Tag> {
    list.iter().map(|t| tag(t)).collect()
}

fn tool(name: &str) -> Value {
    json!({"name": name, "description": format!("{name} does things."), "inputSchema": {"type": "object"}})
}

fn origin(server: &str, tools: &[&str], prompts: &[&str]) -> Listing {
    Listing {
        server: sid(server),
        tools: tools.iter().map(|t| raw(&tool(t))).collect(),
        prompts: prompts
            .iter()
            .map(|p| raw(&json!({"name": p, "description": format!("{p} prompt.")})))
            .collect(),
        version: None,
    }
}

/// - `gh` (tags git, github): `get_pr_info` (aliases `pr_info`, hidden `gpi`), `list_prs`,
///   `old_tool` (+ deprecated); prompt `review`
/// - `gl` (tags git, gitlab): `merge_request`
/// - `web`: `web_search` (alias `search`), `docs_search`; prompt `think`
/// - `ctx`: `create_project`, `list_projects`, folded into the action tool `project` (legacy
///   names hidden)
fn surface() -> Surface {
    let mut rules = Rules::default();
    for (id, t) in [
        ("gh", &["git", "github"][..]),
        ("gl", &["git", "gitlab"][..]),
        ("web", &[][..]),
        ("ctx", &["projects"][..]),
    ] {
        rules.servers.insert(
            sid(id),
            ServerRules {
                tags: tags(t),
                prefix: None,
            },
        );
    }
    rules.tools.insert(
        "get_pr_info".into(),
        Override {
            aliases: vec![
                AliasRule {
                    name: "pr_info".parse().unwrap(),
                    hidden: false,
                    deprecated: None,
                },
                AliasRule {
                    name: "gpi".parse().unwrap(),
                    hidden: true,
                    deprecated: None,
                },
            ],
            ..Default::default()
        },
    );
    rules.tools.insert(
        "old_tool".into(),
        Override {
            tags: tags(&["deprecated"]),
            ..Default::default()
        },
    );
    rules.tools.insert(
        "web_search".into(),
        Override {
            aliases: vec![AliasRule {
                name: "search".parse().unwrap(),
                hidden: false,
                deprecated: None,
            }],
            ..Default::default()
        },
    );
    let mut members = indexmap::IndexMap::new();
    members.insert(
        "create".to_owned(),
        "create_project".parse::<Name>().unwrap(),
    );
    members.insert("list".to_owned(), "list_projects".parse::<Name>().unwrap());
    rules.actions.insert(
        "project".into(),
        ActionRule {
            tools: members,
            ..Default::default()
        },
    );
    let built = build(
        &rules,
        &[
            origin("gh", &["get_pr_info", "list_prs", "old_tool"], &["review"]),
            origin("gl", &["merge_request"], &[]),
            origin("web", &["web_search", "docs_search"], &["think"]),
            origin("ctx", &["create_project", "list_projects"], &[]),
        ],
    );
    let errors: Vec<String> = built.errors().map(ToString::to_string).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    built.surface.unwrap()
}

fn sets(list: &[(&str, ToolsetRule)]) -> BTreeMap<String, ToolsetRule> {
    list.iter()
        .map(|(n, r)| ((*n).to_owned(), r.clone()))
        .collect()
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn names(set: &BTreeSet<String>) -> Vec<&str> {
    set.iter().map(String::as_str).collect()
}

fn aliases(list: &[(&str, &str)]) -> BTreeMap<String, String> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn with_tools(list: &[&str]) -> ToolsetRule {
    ToolsetRule {
        tools: strings(list),
        ..Default::default()
    }
}

fn expr(text: &str) -> TagExpr {
    text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn codes_of(diagnostics: &[Diagnostic]) -> Vec<&'static str> {
    diagnostics.iter().map(|d| d.code).collect()
}

// ---------------------------------------------------------------------------------------------
// Names

#[test]
fn toolset_names_and_aliases_follow_their_rules() {
    for good in ["a", "review", "code-review_2", "0", &"a".repeat(64)] {
        assert!(valid_name(good), "{good}");
    }
    for bad in ["", "Review", "-a", "_a", "a b", "a.b", &"a".repeat(65)] {
        assert!(!valid_name(bad), "{bad}");
    }
    for good in ["pr", "git_status", "web-search", "0x", &"a".repeat(64)] {
        assert!(valid_alias(good), "{good}");
    }
    for bad in ["p", "", "PR", "-pr", "_pr", "pr!", "a:b", &"a".repeat(65)] {
        assert!(!valid_alias(bad), "{bad}");
    }
    assert_eq!(alias_fix("Web Search").as_deref(), Some("web_search"));
    assert_eq!(alias_fix("_pr").as_deref(), Some("pr"));
    assert_eq!(alias_fix("pr"), None);
    assert_eq!(alias_fix("!"), None);
}

// ---------------------------------------------------------------------------------------------
// select

#[test]
fn references_resolve_to_canonical_names() {
    let surface = surface();
    let rule = ToolsetRule {
        // A name, a listed alias, a hidden alias, an action tool, a legacy name.
        tools: strings(&["list_prs", "pr_info", "gpi", "project", "create_project"]),
        prompts: strings(&["think"]),
        ..Default::default()
    };
    let selection = select(&surface, "review", &sets(&[("review", rule)])).unwrap();
    assert_eq!(
        names(&selection.tools),
        ["create_project", "get_pr_info", "list_prs", "project"]
    );
    assert_eq!(names(&selection.prompts), ["think"]);
    assert!(selection.aliases.is_empty());
    assert!(selection.stale.is_empty());
}

#[test]
fn references_that_name_nothing_are_stale_not_errors() {
    let surface = surface();
    let rule = ToolsetRule {
        tools: strings(&["list_prs", "gone_tool", "Get_Pr_Info", "gone_tool"]),
        prompts: strings(&["gone_prompt", "list_prs"]),
        aliases: aliases(&[("gone_too", "gt")]),
        ..Default::default()
    };
    let selection = select(&surface, "r", &sets(&[("r", rule)])).unwrap();
    assert_eq!(names(&selection.tools), ["list_prs"]);
    assert!(selection.prompts.is_empty());
    assert_eq!(
        selection.stale,
        [
            "gone_tool",
            "Get_Pr_Info",
            "gone_prompt",
            "list_prs",
            "gone_too"
        ]
    );
}

#[test]
fn tags_select_every_listed_tool_and_prompt_that_matches() {
    let surface = surface();
    let rule = ToolsetRule {
        tags: Some(expr("git and not deprecated")),
        ..Default::default()
    };
    let selection = select(&surface, "git", &sets(&[("git", rule)])).unwrap();
    assert_eq!(
        names(&selection.tools),
        ["get_pr_info", "list_prs", "merge_request"]
    );
    assert_eq!(names(&selection.prompts), ["review"]);

    // The action tool carries its members' tags; its hidden members are not listed, so tags
    // do not select them.
    let rule = ToolsetRule {
        tags: Some(expr("projects")),
        ..Default::default()
    };
    let selection = select(&surface, "p", &sets(&[("p", rule)])).unwrap();
    assert_eq!(names(&selection.tools), ["project"]);

    let rule = ToolsetRule {
        tags: TagExpr::any_of(tags(&["gitlab", "deprecated"])),
        tools: strings(&["web_search"]),
        ..Default::default()
    };
    let selection = select(&surface, "x", &sets(&[("x", rule)])).unwrap();
    assert_eq!(
        names(&selection.tools),
        ["merge_request", "old_tool", "web_search"]
    );
}

#[test]
fn includes_merge_tools_prompts_and_aliases() {
    let surface = surface();
    let all = sets(&[
        (
            "base",
            ToolsetRule {
                tools: strings(&["web_search"]),
                prompts: strings(&["think"]),
                aliases: aliases(&[("web_search", "ws")]),
                include: strings(&["core"]),
                ..Default::default()
            },
        ),
        (
            "core",
            ToolsetRule {
                tools: strings(&["docs_search"]),
                ..Default::default()
            },
        ),
        (
            "review",
            ToolsetRule {
                tools: strings(&["get_pr_info"]),
                aliases: aliases(&[("get_pr_info", "pr")]),
                // `core` twice, once through `base`: no cycle, merged once.
                include: strings(&["base", "core"]),
                ..Default::default()
            },
        ),
    ]);
    let selection = select(&surface, "review", &all).unwrap();
    assert_eq!(
        names(&selection.tools),
        ["docs_search", "get_pr_info", "web_search"]
    );
    assert_eq!(names(&selection.prompts), ["think"]);
    assert_eq!(
        selection.aliases,
        aliases(&[("pr", "get_pr_info"), ("ws", "web_search")])
    );
    assert!(selection.stale.is_empty());
    let base = select(&surface, "base", &all).unwrap();
    assert_eq!(names(&base.tools), ["docs_search", "web_search"]);
}

#[test]
fn unknown_toolsets_and_includes_are_errors() {
    let surface = surface();
    let all = sets(&[
        ("review", with_tools(&["list_prs"])),
        (
            "broken",
            ToolsetRule {
                include: strings(&["reveiw", "nothing_like_it"]),
                ..Default::default()
            },
        ),
    ]);
    let errors = select(&surface, "reviw", &all).unwrap_err();
    assert_eq!(codes_of(&errors), [codes::UNKNOWN]);
    assert_eq!(errors[0].message, "there is no toolset `reviw`");
    assert_eq!(errors[0].help.as_deref(), Some("did you mean `review`?"));

    let errors = select(&surface, "broken", &all).unwrap_err();
    assert_eq!(codes_of(&errors), [codes::UNKNOWN, codes::UNKNOWN]);
    assert_eq!(
        errors[0].message,
        "toolset `broken` includes `reveiw`, which is not a toolset"
    );
    assert_eq!(errors[0].help.as_deref(), Some("did you mean `review`?"));
    assert_eq!(
        errors[0].config_path.as_deref(),
        Some("toolsets.broken.include[0]")
    );
    assert_eq!(
        errors[1].help.as_deref(),
        Some("toolsets: `broken`, `review`")
    );

    let errors = select(&surface, "x", &BTreeMap::new()).unwrap_err();
    assert_eq!(errors[0].help.as_deref(), Some("no toolsets are defined"));
}

#[test]
fn include_cycles_are_errors() {
    let surface = surface();
    let include = |list: &[&str]| ToolsetRule {
        include: strings(list),
        ..Default::default()
    };
    let all = sets(&[
        ("a", include(&["b"])),
        ("b", include(&["c"])),
        ("c", include(&["a"])),
        ("me", include(&["me"])),
        ("top", include(&["a"])),
    ]);
    let errors = select(&surface, "a", &all).unwrap_err();
    assert_eq!(codes_of(&errors), [codes::INCLUDE_CYCLE]);
    assert_eq!(
        errors[0].message,
        "toolset `a` includes itself through `c`: a -> b -> c -> a"
    );
    assert_eq!(
        errors[0].config_path.as_deref(),
        Some("toolsets.c.include[0]")
    );
    let errors = select(&surface, "me", &all).unwrap_err();
    assert_eq!(errors[0].message, "toolset `me` includes itself");
    // A toolset that includes a cycle cannot be selected either.
    let errors = select(&surface, "top", &all).unwrap_err();
    assert_eq!(codes_of(&errors), [codes::INCLUDE_CYCLE]);
}

#[test]
fn a_long_chain_of_includes_is_fine() {
    let surface = surface();
    let mut all = BTreeMap::new();
    for i in 0..20_000 {
        all.insert(
            format!("s{i}"),
            ToolsetRule {
                include: vec![format!("s{}", i + 1)],
                ..Default::default()
            },
        );
    }
    all.insert("s20000".to_owned(), with_tools(&["list_prs"]));
    let selection = select(&surface, "s0", &all).unwrap();
    assert_eq!(names(&selection.tools), ["list_prs"]);
}

#[test]
fn aliases_add_their_tool_and_resolve() {
    let surface = surface();
    let rule = ToolsetRule {
        // Keys may be names, aliases or legacy names.
        aliases: aliases(&[("pr_info", "pr"), ("list_projects", "lp")]),
        ..Default::default()
    };
    let selection = select(&surface, "r", &sets(&[("r", rule)])).unwrap();
    assert_eq!(names(&selection.tools), ["get_pr_info", "list_projects"]);
    assert_eq!(
        selection.aliases,
        aliases(&[("lp", "list_projects"), ("pr", "get_pr_info")])
    );
}

#[test]
fn an_alias_that_is_the_tools_own_name_or_alias_changes_nothing() {
    let surface = surface();
    let rule = ToolsetRule {
        aliases: aliases(&[
            ("get_pr_info", "get_pr_info"),
            ("pr_info", "gpi"),
            ("web_search", "search"),
        ]),
        ..Default::default()
    };
    let all = sets(&[("r", rule.clone())]);
    let selection = select(&surface, "r", &all).unwrap();
    assert_eq!(names(&selection.tools), ["get_pr_info", "web_search"]);
    assert!(selection.aliases.is_empty());
    assert!(selection.stale.is_empty());
    assert!(validate(&surface, "r", &rule, &all).is_empty());
}

#[test]
fn bad_aliases_are_left_out_by_select() {
    let surface = surface();
    let rule = ToolsetRule {
        aliases: aliases(&[
            ("get_pr_info", "PR"),
            ("list_prs", "search"),
            ("docs_search", "find"),
            ("web_search", "find"),
            ("merge_request", "mr"),
            ("old_tool", "build-toolset"),
        ]),
        ..Default::default()
    };
    let selection = select(&surface, "r", &sets(&[("r", rule)])).unwrap();
    // Every key names a tool, so every tool is in; only `mr` is usable.
    assert_eq!(
        names(&selection.tools),
        [
            "docs_search",
            "get_pr_info",
            "list_prs",
            "merge_request",
            "old_tool",
            "web_search"
        ]
    );
    assert_eq!(selection.aliases, aliases(&[("mr", "merge_request")]));
    assert_eq!(selection.stale.len(), 4, "{:#?}", selection.stale);
    let stale = selection.stale.join("\n");
    for part in [
        "alias `PR` for tool `get_pr_info` in toolset `r` must match `^[a-z0-9][a-z0-9_-]{1,63}$`",
        "alias `search` for tool `list_prs` in toolset `r` shadows `search`, an alias of tool `web_search`",
        "alias `build-toolset` for tool `old_tool` in toolset `r` shadows moniker's tool `build-toolset`",
        "alias `find` is given to 2 tools in toolset `r`: `docs_search`, `web_search`",
    ] {
        assert!(stale.contains(part), "{part}\n{stale}");
    }
}

// ---------------------------------------------------------------------------------------------
// validate

#[test]
fn a_valid_toolset_has_no_diagnostics() {
    let surface = surface();
    let rule = ToolsetRule {
        description: Some("Code review.".into()),
        tools: strings(&["get_pr_info", "list_prs"]),
        prompts: strings(&["review"]),
        tags: Some(expr("gitlab")),
        include: strings(&["base"]),
        aliases: aliases(&[("get_pr_info", "pr")]),
        resources: Vec::new(),
        discovery: None,
        params: Default::default(),
    };
    let all = sets(&[("base", with_tools(&["web_search"]))]);
    assert_eq!(validate(&surface, "review", &rule, &all), []);
}

#[test]
fn validate_refuses_unknown_references_with_a_did_you_mean() {
    let surface = surface();
    let rule = ToolsetRule {
        tools: strings(&["get_pr_inf", "zzz"]),
        prompts: strings(&["thnk"]),
        aliases: aliases(&[("list_pr", "lp")]),
        ..Default::default()
    };
    let found = validate(&surface, "review", &rule, &BTreeMap::new());
    assert_eq!(
        codes_of(&found),
        [
            codes::UNKNOWN_TOOL,
            codes::UNKNOWN_TOOL,
            codes::UNKNOWN_PROMPT,
            codes::UNKNOWN_TOOL
        ]
    );
    assert_eq!(
        found[0].message,
        "toolset `review` names tool `get_pr_inf`, which no server exposes"
    );
    assert_eq!(
        found[0].help.as_deref(),
        Some("did you mean `get_pr_info`?")
    );
    assert_eq!(
        found[0].config_path.as_deref(),
        Some("toolsets.review.tools[0]")
    );
    assert_eq!(found[1].help, None);
    assert_eq!(found[2].help.as_deref(), Some("did you mean `think`?"));
    assert_eq!(
        found[3].config_path.as_deref(),
        Some("toolsets.review.aliases.list_pr")
    );
    assert_eq!(found[3].help.as_deref(), Some("did you mean `list_prs`?"));
}

#[test]
fn validate_refuses_bad_aliases_with_the_reason() {
    let surface = surface();
    let rule = ToolsetRule {
        aliases: aliases(&[
            ("get_pr_info", "Pr Info"),
            ("list_prs", "merge_request"),
            ("docs_search", "find"),
            ("web_search", "find"),
            ("merge_request", "gpi"),
        ]),
        ..Default::default()
    };
    let found = validate(&surface, "review", &rule, &BTreeMap::new());
    let mut by_code: BTreeMap<&str, Vec<&Diagnostic>> = BTreeMap::new();
    for d in &found {
        by_code.entry(d.code).or_default().push(d);
    }
    let format = &by_code[codes::ALIAS];
    assert_eq!(format.len(), 1);
    assert!(format[0].message.contains(ALIAS_RULE));
    assert!(format[0].message.contains("`Pr Info`"));
    assert_eq!(format[0].help.as_deref(), Some("did you mean `pr_info`?"));
    assert_eq!(
        format[0].config_path.as_deref(),
        Some("toolsets.review.aliases.get_pr_info")
    );

    let shadows = &by_code[codes::ALIAS_SHADOWS];
    let messages: Vec<&str> = shadows.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "alias `merge_request` for tool `list_prs` in toolset `review` shadows tool `merge_request`",
            "alias `gpi` for tool `merge_request` in toolset `review` shadows `gpi`, an alias of tool `get_pr_info`",
        ]
    );

    let duplicate = &by_code[codes::DUPLICATE_ALIAS];
    assert_eq!(duplicate.len(), 1);
    assert_eq!(
        duplicate[0].message,
        "alias `find` is given to 2 tools in toolset `review`: `docs_search`, `web_search`"
    );
    assert_eq!(duplicate[0].notes.len(), 2);
    assert_eq!(found.len(), 4);
}

#[test]
fn validate_checks_the_name_and_the_includes() {
    let surface = surface();
    let rule = ToolsetRule {
        include: strings(&["bse", "Review Set"]),
        ..Default::default()
    };
    let all = sets(&[("base", with_tools(&["list_prs"]))]);
    let found = validate(&surface, "Review Set", &rule, &all);
    assert_eq!(
        codes_of(&found),
        [codes::INVALID_NAME, codes::UNKNOWN, codes::INCLUDE_CYCLE]
    );
    assert!(found[0].message.contains(NAME_RULE));
    assert_eq!(found[1].help.as_deref(), Some("did you mean `base`?"));
    assert_eq!(found[2].message, "toolset `Review Set` includes itself");

    let found = validate(&surface, "manage", &ToolsetRule::default(), &all);
    assert_eq!(codes_of(&found), [codes::INVALID_NAME]);
    assert!(found[0].message.contains("reserved"));

    // A rule that replaces a saved one is checked as written, not as saved.
    let all = sets(&[
        ("a", ToolsetRule::default()),
        (
            "b",
            ToolsetRule {
                include: strings(&["a"]),
                ..Default::default()
            },
        ),
    ]);
    let cyclic = ToolsetRule {
        include: strings(&["b"]),
        ..Default::default()
    };
    let found = validate(&surface, "a", &cyclic, &all);
    assert_eq!(codes_of(&found), [codes::INCLUDE_CYCLE]);
    assert_eq!(
        found[0].message,
        "toolset `a` includes itself through `b`: a -> b -> a"
    );
}

#[test]
fn validate_does_not_blame_a_toolset_for_its_includes_stale_references() {
    let surface = surface();
    let all = sets(&[(
        "base",
        ToolsetRule {
            tools: strings(&["gone_tool"]),
            aliases: aliases(&[("web_search", "find"), ("gone_too", "gt")]),
            ..Default::default()
        },
    )]);
    let rule = ToolsetRule {
        include: strings(&["base"]),
        tools: strings(&["list_prs"]),
        ..Default::default()
    };
    assert_eq!(validate(&surface, "review", &rule, &all), []);
    // An alias that clashes with an included toolset's is the new toolset's problem.
    let clash = ToolsetRule {
        aliases: aliases(&[("docs_search", "find")]),
        ..rule
    };
    let found = validate(&surface, "review", &clash, &all);
    assert_eq!(codes_of(&found), [codes::DUPLICATE_ALIAS]);
    assert!(found[0].message.contains("toolset `review`"));
    assert!(found[0].notes.iter().any(|n| n.contains("toolset `base`")));
}

// ---------------------------------------------------------------------------------------------
// resolve

#[test]
fn resolve_is_bounded_by_the_toolset() {
    let surface = surface();
    let rule = ToolsetRule {
        tools: strings(&["list_prs", "project"]),
        prompts: strings(&["think"]),
        aliases: aliases(&[("web_search", "ws"), ("list_prs", "lp")]),
        ..Default::default()
    };
    let selection = select(&surface, "r", &sets(&[("r", rule)])).unwrap();
    let tool = |name: &str| resolve(&surface, &selection, Kind::Tool, name);

    let r = tool("ws").unwrap();
    assert_eq!((r.exposed.name.as_str(), r.via), ("web_search", Via::Alias));
    let r = tool("lp").unwrap();
    assert_eq!((r.exposed.name.as_str(), r.via), ("list_prs", Via::Alias));
    let r = tool("list_prs").unwrap();
    assert_eq!((r.exposed.name.as_str(), r.via), ("list_prs", Via::Name));
    // The surface's own alias of a selected tool works too.
    let r = tool("search").unwrap();
    assert_eq!((r.exposed.name.as_str(), r.via), ("web_search", Via::Alias));
    let r = tool("project").unwrap();
    assert_eq!(r.via, Via::Action);

    // Outside the toolset: names, listed and hidden aliases, legacy names.
    for outside in [
        "get_pr_info",
        "pr_info",
        "gpi",
        "create_project",
        "docs_search",
    ] {
        assert!(tool(outside).is_none(), "{outside}");
    }
    // Unknown anyway.
    assert!(tool("nothing").is_none());
    // Toolset aliases name tools, not prompts.
    assert!(resolve(&surface, &selection, Kind::Prompt, "ws").is_none());
    let r = resolve(&surface, &selection, Kind::Prompt, "think").unwrap();
    assert_eq!(r.exposed.name, "think");
    assert!(resolve(&surface, &selection, Kind::Prompt, "review").is_none());
}

#[test]
fn a_legacy_name_in_a_toolset_is_callable() {
    let surface = surface();
    let selection = select(
        &surface,
        "r",
        &sets(&[("r", with_tools(&["create_project"]))]),
    )
    .unwrap();
    let r = resolve(&surface, &selection, Kind::Tool, "create_project").unwrap();
    assert_eq!(r.via, Via::Legacy);
    assert!(resolve(&surface, &selection, Kind::Tool, "project").is_none());
}

#[test]
fn an_alias_whose_tool_left_the_surface_resolves_to_nothing() {
    let surface = surface();
    let selection = Selection {
        tools: ["gone".to_owned()].into(),
        aliases: aliases(&[("g", "gone"), ("also", "pr_info")]),
        ..Default::default()
    };
    assert!(resolve(&surface, &selection, Kind::Tool, "g").is_none());
    // Aliases map to canonical names only.
    assert!(resolve(&surface, &selection, Kind::Tool, "also").is_none());
}

// ---------------------------------------------------------------------------------------------
// listing

fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

#[test]
fn the_listing_is_the_toolset_with_its_aliases() {
    let surface = surface();
    let rule = ToolsetRule {
        tools: strings(&["list_prs", "create_project", "web_search", "docs_search"]),
        prompts: strings(&["think"]),
        aliases: aliases(&[
            ("web_search", "ws"),
            ("list_prs", "lp"),
            ("web_search", "ws"),
        ]),
        ..Default::default()
    };
    let mut rule2 = rule.clone();
    rule2.aliases.insert("docs_search".into(), "ds".into());
    let selection = select(&surface, "r", &sets(&[("r", rule2)])).unwrap();
    let tools = parsed(&listing(&surface, &selection, Kind::Tool));
    let list = tools["tools"].as_array().unwrap();
    let listed: Vec<&str> = list.iter().map(|t| t["name"].as_str().unwrap()).collect();
    // Surface order; the hidden legacy member is callable but not listed.
    assert_eq!(listed, ["docs_search", "list_prs", "web_search"]);
    assert_eq!(list[0]["aliases"], json!(["ds"]));
    assert_eq!(
        list[0]["description"],
        "docs_search does things.\n\nAliases: ds"
    );
    assert_eq!(list[1]["aliases"], json!(["lp"]));
    // The surface's own listed alias stays first, on the same line.
    assert_eq!(list[2]["aliases"], json!(["search", "ws"]));
    assert_eq!(
        list[2]["description"],
        "web_search does things.\n\nAliases: search, ws"
    );
    // The server is in `_meta`; the aliases are not said there again.
    assert_eq!(list[2]["_meta"]["io.moniker/server"], "web");
    assert_eq!(list[2]["_meta"].get("io.moniker/aliases"), None);

    let prompts = parsed(&listing(&surface, &selection, Kind::Prompt));
    assert_eq!(
        prompts,
        json!({"prompts": [parsed(surface.resolve_prompt("think").unwrap().exposed.definition.get())]})
    );

    let empty = listing(&surface, &Selection::default(), Kind::Tool);
    assert_eq!(empty, r#"{"tools":[]}"#);
    // Without toolset aliases, each definition is the surface's, byte for byte.
    let plain = select(&surface, "r", &sets(&[("r", with_tools(&["list_prs"]))])).unwrap();
    assert_eq!(
        listing(&surface, &plain, Kind::Tool),
        format!(
            r#"{{"tools":[{}]}}"#,
            surface
                .resolve_tool("list_prs")
                .unwrap()
                .exposed
                .definition
                .get()
        )
    );
}

fn extra(definition: &str, aliases: &[&str]) -> String {
    let raw = RawValue::from_string(definition.to_owned()).unwrap();
    with_extra_aliases(&raw, &strings(aliases)).get().to_owned()
}

#[test]
fn extra_aliases_keep_every_other_field_as_it_was() {
    let definition = r#"{"name":"a","title":"A","description":"Does a.\n\nAliases: x","inputSchema":{"type":"object","properties":{"n":{"type":"number","default":1.50}}},"_unknown":[1e3, 2],"aliases":["x"],"_meta":{"k": 1, "io.moniker/tags":["t1"],"io.moniker/server":"s"}}"#;
    assert_eq!(
        extra(definition, &["y", "z"]),
        r#"{"name":"a","title":"A","description":"Does a.\n\nAliases: x, y, z","inputSchema":{"type":"object","properties":{"n":{"type":"number","default":1.50}}},"_unknown":[1e3, 2],"aliases":["x","y","z"],"_meta":{"k": 1, "io.moniker/tags":["t1"],"io.moniker/server":"s"}}"#
    );
}

#[test]
fn extra_aliases_are_added_where_the_surface_would_put_them() {
    // No aliases yet: last, and a new `Aliases:` line.
    assert_eq!(
        extra(
            r#"{"name":"a","description":"Does a.","_meta":{"io.moniker/server":"s"}}"#,
            &["y"]
        ),
        r#"{"name":"a","description":"Does a.\n\nAliases: y","_meta":{"io.moniker/server":"s"},"aliases":["y"]}"#
    );
    // No description: one is added after the name.
    assert_eq!(
        extra(r#"{"name":"a","x":1}"#, &["y"]),
        r#"{"name":"a","description":"Aliases: y","x":1,"aliases":["y"]}"#
    );
    // A description that is not a string is left alone.
    assert_eq!(
        extra(r#"{"name":"a","description":{"k":1}}"#, &["y"]),
        r#"{"name":"a","description":{"k":1},"aliases":["y"]}"#
    );
    // A last line that starts with `Aliases: ` is extended, whatever came before.
    assert_eq!(
        extra(
            r#"{"name":"a","description":"Line one.\nAliases: x"}"#,
            &["y"]
        ),
        r#"{"name":"a","description":"Line one.\nAliases: x, y","aliases":["y"]}"#
    );
    // Only the new ones, once.
    assert_eq!(
        extra(
            r#"{"name":"a","description":"D\n\nAliases: x","aliases":["x"]}"#,
            &["x", "y", "y"]
        ),
        r#"{"name":"a","description":"D\n\nAliases: x, y","aliases":["x","y"]}"#
    );
}

#[test]
fn extra_aliases_change_nothing_when_there_is_nothing_to_add() {
    for definition in [
        r#"{"name":"a", "aliases": ["x"] }"#,
        r#"[1, 2]"#,
        r#""text""#,
    ] {
        assert_eq!(extra(definition, &["x"]), definition);
        assert_eq!(extra(definition, &[]), definition);
    }
}

// ---------------------------------------------------------------------------------------------
// Store form

#[test]
fn toolset_rules_serialize_with_tags_as_an_expression() {
    let rule = ToolsetRule {
        description: Some("Code review.".into()),
        tools: strings(&["get_pr_info"]),
        prompts: Vec::new(),
        tags: Some(expr("git and (github or gitlab)")),
        include: strings(&["base"]),
        aliases: aliases(&[("get_pr_info", "pr")]),
        resources: Vec::new(),
        discovery: None,
        params: Default::default(),
    };
    let text = serde_json::to_string(&rule).unwrap();
    assert_eq!(
        text,
        r#"{"description":"Code review.","tools":["get_pr_info"],"tags":"git and (github or gitlab)","include":["base"],"aliases":{"get_pr_info":"pr"}}"#
    );
    let back: ToolsetRule = serde_json::from_str(&text).unwrap();
    assert_eq!(back, rule);
    let empty: ToolsetRule = serde_json::from_str("{}").unwrap();
    assert_eq!(empty, ToolsetRule::default());
    let bad = serde_json::from_str::<ToolsetRule>(r#"{"tags":"git and"}"#).unwrap_err();
    assert!(bad.to_string().contains("found the end"), "{bad}");
}

#[test]
fn a_toolset_reaches_resources_by_server_or_uri_prefix() {
    let rule = ToolsetRule {
        resources: strings(&["docs", "file:///srv/shared/"]),
        ..ToolsetRule::default()
    };
    assert!(rule.reaches("docs", "anything://x"));
    assert!(rule.reaches("other", "file:///srv/shared/a.txt"));
    assert!(!rule.reaches("other", "file:///srv/private/a.txt"));
    assert!(!rule.reaches("doc", "doc://x"));
    assert!(!ToolsetRule::default().reaches("docs", "docs://x"));
}

#[test]
fn a_toolsets_resources_include_its_includes() {
    let mut base = with_tools(&["web_search"]);
    base.resources = vec!["web".into()];
    let mut docs = with_tools(&["get_pr_info"]);
    docs.resources = vec!["file:///srv/docs/".into()];
    docs.include = vec!["base".into()];
    let all = sets(&[("base", base), ("docs", docs)]);
    let bound = resource_bound("docs", &all);
    assert!(bound.reaches("web", "https://example.com/x"));
    assert!(bound.reaches("fs", "file:///srv/docs/a.md"));
    assert!(!bound.reaches("fs", "file:///etc/passwd"));
    assert!(resource_bound("base", &all).reaches("web", "x:y"));
    assert!(!resource_bound("base", &all).reaches("fs", "file:///srv/docs/a.md"));
    assert_eq!(resource_bound("nope", &all).resources, Vec::<String>::new());
}

/// "Hold the boundary, round two", finding 1: an action tool carries the union of its members'
/// tags, and a toolset chosen by tag listed it whole, so a `read` token reached `delete`. A
/// toolset selects routes: the action tool it offers is made of the members whose own tags
/// match, and the others are not in its schema, its description or its route.
#[test]
fn a_tag_selects_the_members_of_an_action_tool_not_the_tool() {
    let mut rules = Rules::default();
    for (id, t) in [("gh", &["git"][..]), ("fs", &["files"][..])] {
        rules.servers.insert(
            sid(id),
            ServerRules {
                tags: tags(t),
                prefix: None,
            },
        );
    }
    rules.tools.insert(
        "list_projects".into(),
        Override {
            tags: tags(&["read"]),
            ..Default::default()
        },
    );
    let mut project = indexmap::IndexMap::new();
    for (action, member) in [
        ("list", "list_projects"),
        ("delete", "delete_project"),
        ("prs", "list_prs"),
        ("write", "write_file"),
    ] {
        project.insert(action.to_owned(), member.parse::<Name>().unwrap());
    }
    rules.actions.insert(
        "project".into(),
        ActionRule {
            tools: project,
            ..Default::default()
        },
    );
    let built = build(
        &rules,
        &[
            origin("gh", &["list_projects", "delete_project", "list_prs"], &[]),
            origin("fs", &["write_file"], &[]),
        ],
    );
    let surface = built.surface.expect("a surface");
    let whole = surface.resolve(Kind::Tool, "project").unwrap().exposed;
    assert!(
        whole.tags.contains(&tag("read")),
        "the action tool carries its members' tags"
    );

    let readonly = ToolsetRule {
        tags: Some(expr("read")),
        ..Default::default()
    };
    let selection = select(&surface, "ro", &sets(&[("ro", readonly)])).unwrap();
    assert_eq!(names(&selection.tools), ["project"]);
    let narrowed = &selection.narrowed["project"];
    let Route::Action(route) = &narrowed.route else {
        panic!("an action route");
    };
    let actions: Vec<&str> = route.members.iter().map(|m| m.action.as_str()).collect();
    assert_eq!(actions, ["list"]);
    let listed: Value = serde_json::from_str(entry(&selection, Kind::Tool, whole).get()).unwrap();
    assert_eq!(
        listed["inputSchema"]["properties"]["action"]["enum"],
        json!(["list"]),
        "{listed}"
    );
    assert!(
        !listed.to_string().contains("delete"),
        "nothing of the other members is listed: {listed}"
    );
    assert_eq!(
        selection.servers(&surface).into_iter().collect::<Vec<_>>(),
        [&sid("gh")]
    );

    // Across servers: a `git` toolset reaches `gh`'s members, never `fs`'s `write_file`.
    let git = ToolsetRule {
        tags: Some(expr("git")),
        ..Default::default()
    };
    let selection = select(&surface, "git", &sets(&[("git", git)])).unwrap();
    let Route::Action(route) = &selection.narrowed["project"].route else {
        panic!("an action route");
    };
    let actions: Vec<&str> = route.members.iter().map(|m| m.action.as_str()).collect();
    assert_eq!(actions, ["list", "delete", "prs"]);
    assert_eq!(
        selection.servers(&surface).into_iter().collect::<Vec<_>>(),
        [&sid("gh")],
        "`fs` is not reached"
    );

    // Named whole, or every member matching: the tool as it is.
    let named = ToolsetRule {
        tools: strings(&["project"]),
        tags: Some(expr("read")),
        ..Default::default()
    };
    let selection = select(&surface, "n", &sets(&[("n", named)])).unwrap();
    assert!(selection.narrowed.is_empty());
    let every = ToolsetRule {
        tags: Some(expr("git or files")),
        ..Default::default()
    };
    let selection = select(&surface, "e", &sets(&[("e", every)])).unwrap();
    assert!(selection.narrowed.is_empty());
    assert_eq!(names(&selection.tools), ["project"]);
    let none = ToolsetRule {
        tags: Some(expr("nothing")),
        ..Default::default()
    };
    let selection = select(&surface, "z", &sets(&[("z", none)])).unwrap();
    assert!(selection.tools.is_empty());
}

#[test]
fn a_glob_selects_every_listed_tool_whose_name_it_matches() {
    let surface = surface();
    let rule = ToolsetRule {
        tools: strings(&["*_prs", "get_pr_?nfo", "nothing_*"]),
        ..Default::default()
    };
    let selection = select(&surface, "r", &sets(&[("r", rule.clone())])).unwrap();
    assert_eq!(names(&selection.tools), ["get_pr_info", "list_prs"]);
    assert_eq!(
        selection.stale,
        ["nothing_*"],
        "a glob that matches nothing is stale"
    );
    let strict = validate(&surface, "r", &rule, &sets(&[]));
    assert_eq!(codes_of(&strict), [codes::UNKNOWN_TOOL]);
}

#[test]
fn a_toolsets_parameter_rules_reshape_its_tools_on_top_of_their_own() {
    use crate::params::{Fixed, ParamRule};
    let mut rules = Rules::default();
    rules.tools.insert(
        "search".into(),
        Override {
            params: [(
                "q".to_owned(),
                ParamRule {
                    rename: Some("query".into()),
                    ..Default::default()
                },
            )]
            .into(),
            ..Default::default()
        },
    );
    let schema = json!({"type": "object", "properties": {"q": {"type": "string"}, "project": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["q", "project"]});
    let listing = Listing {
        server: sid("s"),
        tools: vec![raw(&json!({"name": "search", "inputSchema": schema}))],
        prompts: Vec::new(),
        version: None,
    };
    let surface = build(&rules, &[listing]).surface.unwrap();
    let rule = ToolsetRule {
        tools: strings(&["search"]),
        params: [(
            "search".to_owned(),
            [
                (
                    "project".to_owned(),
                    ParamRule {
                        fixed: Some(Fixed(json!("acme"))),
                        ..Default::default()
                    },
                ),
                (
                    "limit".to_owned(),
                    ParamRule {
                        default: Some(json!(5)),
                        ..Default::default()
                    },
                ),
                ("nope".to_owned(), ParamRule::default()),
            ]
            .into(),
        )]
        .into(),
        ..Default::default()
    };
    let sets = sets(&[("team", rule.clone())]);
    let selection = select(&surface, "team", &sets).unwrap();
    assert!(selection.stale.is_empty(), "{:?}", selection.stale);
    let listed: Value = serde_json::from_str(&listing_of(&surface, &selection)).unwrap();
    let input = &listed["tools"][0]["inputSchema"];
    assert_eq!(
        input["properties"],
        json!({"query": {"type": "string"}, "limit": {"type": "integer", "default": 5}})
    );
    assert_eq!(input["required"], json!(["query"]));
    let reshaped = &selection.reshaped["search"];
    let sent = reshaped
        .params
        .arguments(Some(r#"{"query":"x"}"#))
        .unwrap()
        .unwrap();
    assert_eq!(sent, r#"{"query":"x","limit":5,"project":"acme"}"#);
    // Keyed by the names the tool is listed with: `nope` is said, not left out.
    let said = validate(&surface, "team", &rule, &sets);
    assert_eq!(codes_of(&said), ["params::unknown"]);
    assert_eq!(
        said[0].config_path.as_deref(),
        Some("toolsets.team.params.search.nope")
    );
    // Without the toolset, the tool is as the surface has it.
    let plain = surface
        .resolve_tool("search")
        .unwrap()
        .exposed
        .definition
        .get();
    assert!(plain.contains("\"project\""), "{plain}");
}

fn listing_of(surface: &Surface, selection: &Selection) -> String {
    listing(surface, selection, Kind::Tool)
}
