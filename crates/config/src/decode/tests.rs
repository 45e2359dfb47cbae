use std::time::Duration;

use moniker_surface::names::TAG_RULE;

use super::*;
use crate::{Config, codes, parse};

fn ok(text: &str) -> Config {
    match parse("moniker.yaml", text) {
        Ok(config) => config,
        Err(report) => panic!("expected a valid config:\n{report}"),
    }
}

fn errors(text: &str) -> Vec<ConfigError> {
    match parse("moniker.yaml", text) {
        Ok(config) => panic!("expected errors, got {config:#?}"),
        Err(report) => report.errors,
    }
}

/// The only error of `text`.
fn error(text: &str) -> ConfigError {
    let mut errors = errors(text);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    errors.remove(0)
}

fn at(e: &ConfigError) -> (usize, usize) {
    let span = e.span.expect("a span");
    (span.line, span.column)
}

fn id(s: &str) -> ServerId {
    s.parse().expect("server id")
}

fn tags(tags: &[&str]) -> Vec<Tag> {
    tags.iter().map(|t| t.parse().expect("tag")).collect()
}

const DESIGN: &str = r#"servers:                       # `mcpServers` (Claude Desktop / Cursor JSON) is accepted too
  github:
    command: npx
    args: [-y, "@modelcontextprotocol/server-github"]
    env: { GITHUB_TOKEN: "${GITHUB_TOKEN}" }   # ${VAR} expanded per field, never logged
    tags: [git]
  docs:
    url: http://127.0.0.1:9000/mcp            # Streamable HTTP server
    headers: { Authorization: "Bearer ${DOCS_TOKEN}" }
naming: { strip_prefixes: [local_bridge_], split: "__", separator: "_", profile: portable }
server_tags: { github-custom: [git, github, version-control] }
tools:
  "bridge/local_bridge_github_custom__get_pr_info": { name: get_pr_info, tags: [pull-request], aliases: [pr_info] }
  discover_sub_goals: { aliases: [discover_goals] }
"#;

#[test]
fn the_design_example_needs_its_servers() {
    // As in DESIGN.md, `bridge/...` names a server the example does not configure.
    let e = error(DESIGN);
    assert_eq!(e.code, codes::UNKNOWN_SERVER);
    assert_eq!(
        e.path,
        r#"tools."bridge/local_bridge_github_custom__get_pr_info""#
    );
    assert_eq!(at(&e), (13, 3));
}

#[test]
fn the_design_example_parses() {
    let text = format!("{DESIGN}  \nprompts: {{}}\n").replace(
        "servers:                       #",
        "servers:\n  bridge: { command: bridge, prefix: true }\n  #",
    );
    let config = ok(&text);
    let ids: Vec<&str> = config.servers.keys().map(ServerId::as_str).collect();
    assert_eq!(ids, ["bridge", "github", "docs"]);

    let github = &config.servers[&id("github")];
    assert!(!github.disabled);
    let Transport::Stdio {
        command,
        args,
        env,
        cwd,
    } = &github.transport
    else {
        panic!("stdio")
    };
    assert_eq!(command, "npx");
    assert_eq!(args, &["-y", "@modelcontextprotocol/server-github"]);
    assert_eq!(env["GITHUB_TOKEN"], "${GITHUB_TOKEN}");
    assert_eq!(cwd, &None);

    let Transport::Http { url, headers } = &config.servers[&id("docs")].transport else {
        panic!("http")
    };
    assert_eq!(url, "http://127.0.0.1:9000/mcp");
    assert_eq!(headers["Authorization"], "Bearer ${DOCS_TOKEN}");

    let rules = &config.rules;
    assert_eq!(rules.servers.len(), 3);
    assert_eq!(rules.servers[&id("github")].tags, tags(&["git"]));
    assert_eq!(rules.servers[&id("github")].prefix, None);
    assert_eq!(
        rules.servers[&id("bridge")].prefix.as_deref(),
        Some("bridge")
    );
    assert_eq!(rules.naming.strip_prefixes, ["local_bridge_"]);
    assert_eq!(rules.naming.split, "__");
    assert_eq!(rules.naming.separator, "_");
    assert_eq!(rules.naming.profile, Profile::default());
    assert_eq!(
        rules.server_tags["github-custom"],
        tags(&["git", "github", "version-control"])
    );
    let pr = &rules.tools["bridge/local_bridge_github_custom__get_pr_info"];
    assert_eq!(pr.name.as_ref().map(Name::as_str), Some("get_pr_info"));
    assert_eq!(pr.tags, tags(&["pull-request"]));
    assert_eq!(pr.aliases.len(), 1);
    assert_eq!(pr.aliases[0].name.as_str(), "pr_info");
    assert!(!pr.aliases[0].hidden);
    let goals = &rules.tools["discover_sub_goals"];
    assert_eq!(goals.name, None);
    assert_eq!(goals.aliases[0].name.as_str(), "discover_goals");
    assert!(rules.prompts.is_empty());
    assert_eq!(config.gateway, GatewaySettings::default());
}

#[test]
fn the_brief_example_with_every_field_parses() {
    let config = ok(r#"
servers:
  github:
    command: npx
    args: [-y, "@modelcontextprotocol/server-github"]
    env: { GITHUB_TOKEN: "${GITHUB_TOKEN}" }
    cwd: /tmp
    tags: [git]
    prefix: true
    type: stdio
    disabled: false
  docs:
    url: http://127.0.0.1:9000/mcp
    headers: { Authorization: "Bearer ${DOCS_TOKEN}" }
    prefix: "gh"
    type: streamable-http
    disabled: true
naming: { strip_prefixes: [local_bridge_], split: "__", separator: "_", profile: { base: spec, prefix_budget: 14 } }
tools:
  discover_sub_goals:
    aliases: [discover_goals, { name: dg, hidden: true }]
    description: "text"
    hidden: true
prompts:
  github/review: { name: review_pr, tags: [code-review] }
gateway: { call_timeout: 60, start_timeout: 30s, restart: { initial_delay: 500ms, max_delay: 30s, max_attempts: 10 } }
"#);
    let github = &config.servers[&id("github")];
    assert!(matches!(&github.transport, Transport::Stdio { cwd: Some(c), .. } if c == "/tmp"));
    assert!(config.servers[&id("docs")].disabled);
    assert_eq!(
        config.rules.servers[&id("github")].prefix.as_deref(),
        Some("github")
    );
    assert_eq!(
        config.rules.servers[&id("docs")].prefix.as_deref(),
        Some("gh")
    );
    assert_eq!(
        config.rules.naming.profile,
        Profile {
            kind: ProfileKind::Spec,
            prefix_budget: 14
        }
    );
    let goals = &config.rules.tools["discover_sub_goals"];
    assert_eq!(goals.description.as_deref(), Some("text"));
    assert!(goals.hidden);
    assert_eq!(
        goals.aliases,
        [
            AliasRule {
                name: "discover_goals".parse().expect("name"),
                hidden: false
            },
            AliasRule {
                name: "dg".parse().expect("name"),
                hidden: true
            },
        ]
    );
    assert_eq!(
        config.rules.prompts["github/review"]
            .name
            .as_ref()
            .map(Name::as_str),
        Some("review_pr")
    );
    assert_eq!(
        config.gateway,
        GatewaySettings {
            call_timeout: Duration::from_secs(60),
            start_timeout: Duration::from_secs(30),
            restart_initial_delay: Duration::from_millis(500),
            restart_max_delay: Duration::from_secs(30),
            restart_max_attempts: Some(10),
        }
    );
}

#[test]
fn a_claude_desktop_file_parses() {
    let config = ok(
        r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y","@modelcontextprotocol/server-filesystem","/tmp"]}}}"#,
    );
    let fs = &config.servers[&id("fs")];
    assert_eq!(
        fs.transport,
        Transport::Stdio {
            command: "npx".to_owned(),
            args: vec![
                "-y".to_owned(),
                "@modelcontextprotocol/server-filesystem".to_owned(),
                "/tmp".to_owned()
            ],
            env: IndexMap::new(),
            cwd: None,
        }
    );
    assert_eq!(config.rules.servers[&id("fs")], ServerRules::default());
    assert_eq!(config.source.servers_key(), "mcpServers");
    // Spans are recorded under the file's key and under `servers`, which the naming core uses.
    let span = config.source.span("mcpServers.fs.command").expect("span");
    assert_eq!((span.line, span.column), (1, 35));
    assert_eq!(config.source.span("servers.fs.command"), Some(span));
}

#[test]
fn claude_code_and_vs_code_files_parse() {
    let config = ok(r#"{
  "mcpServers": {
    "remote": { "type": "http", "url": "https://example.com/mcp", "headers": { "X-Key": "k" } },
    "old": { "type": "sse", "url": "http://localhost:3000/sse" },
    "local": { "type": "stdio", "command": "node", "args": ["server.js"], "env": { "DEBUG": "1" } }
  }
}"#);
    assert_eq!(config.servers.len(), 3);
    assert!(matches!(
        config.servers[&id("old")].transport,
        Transport::Http { .. }
    ));
}

#[test]
fn empty_files_are_empty_configs() {
    for text in [
        "",
        "\n\n",
        "# nothing yet\n",
        "---\n",
        "{}",
        "servers:\ntools:\n",
    ] {
        let config = ok(text);
        assert!(config.servers.is_empty(), "{text:?}");
        assert_eq!(config.rules, Rules::default(), "{text:?}");
        assert_eq!(config.gateway, GatewaySettings::default(), "{text:?}");
    }
}

#[test]
fn unknown_keys_say_where_and_what_was_meant() {
    let e = error("servers:\n  github:\n    comand: npx\n");
    assert_eq!(e.code, codes::UNKNOWN_KEY);
    assert_eq!(e.message, "unknown key `comand`");
    assert_eq!(e.path, "servers.github.comand");
    assert_eq!(at(&e), (3, 5));
    assert_eq!(e.span.map(|s| s.len), Some(6));
    assert_eq!(e.help.as_deref(), Some("did you mean `command`?"));

    let e = error("naming: { profle: spec }\n");
    assert_eq!(e.path, "naming.profle");
    assert_eq!(at(&e), (1, 11));
    assert_eq!(e.help.as_deref(), Some("did you mean `profile`?"));

    // Without a close key, the help lists the known ones.
    let e = error("gateway: { zzz: 1 }\n");
    assert_eq!(
        e.help.as_deref(),
        Some("expected one of `call_timeout`, `start_timeout`, `restart`")
    );
}

#[test]
fn actions_and_toolsets_are_not_supported_yet() {
    let errors = errors("actions: {}\ntoolsets: {}\n");
    let paths: Vec<_> = errors.iter().map(|e| (e.code, e.path.as_str())).collect();
    assert_eq!(
        paths,
        [
            (codes::UNKNOWN_KEY, "actions"),
            (codes::UNKNOWN_KEY, "toolsets")
        ]
    );
}

#[test]
fn unknown_keys_everywhere() {
    let errors = errors(
        r"
servers:
  a: { command: x, tag: [git] }
naming: { split: _, profile: { base: spec, budget: 3 } }
tools:
  t: { alias: [x], aliases: [{ name: y, hiden: true }] }
gateway: { restart: { max_attempt: 3 } }
",
    );
    let found: Vec<_> = errors
        .iter()
        .map(|e| (e.code, e.path.as_str(), e.help.as_deref()))
        .collect();
    assert_eq!(
        found,
        [
            (
                codes::UNKNOWN_KEY,
                "servers.a.tag",
                Some("did you mean `tags`?")
            ),
            (
                codes::UNKNOWN_KEY,
                "naming.profile.budget",
                Some("expected one of `base`, `prefix_budget`")
            ),
            (
                codes::UNKNOWN_KEY,
                "tools.t.alias",
                Some("did you mean `aliases`?")
            ),
            (
                codes::UNKNOWN_KEY,
                "tools.t.aliases[0].hiden",
                Some("did you mean `hidden`?")
            ),
            (
                codes::UNKNOWN_KEY,
                "gateway.restart.max_attempt",
                Some("did you mean `max_attempts`?")
            ),
        ]
    );
}

#[test]
fn every_error_is_reported_in_file_order() {
    let errors = errors(
        r"
tools:
  t: { name: 'bad name', tags: [Bad] }
servers:
  a: { comand: x }
  b: { command: y, args: { x: 1 } }
gateway: { call_timeout: soon }
",
    );
    let found: Vec<_> = errors.iter().map(|e| (e.code, e.path.as_str())).collect();
    assert_eq!(
        found,
        [
            (codes::INVALID_NAME, "tools.t.name"),
            (codes::INVALID_TAG, "tools.t.tags[0]"),
            (codes::UNKNOWN_KEY, "servers.a.comand"),
            (codes::INVALID_TYPE, "servers.b.args"),
            (codes::INVALID_VALUE, "gateway.call_timeout"),
        ]
    );
    let lines: Vec<_> = errors.iter().map(|e| at(e).0).collect();
    assert_eq!(lines, [3, 3, 5, 6, 7]);
}

#[test]
fn wrong_types_say_what_was_expected_and_found() {
    let e = error("servers:\n  a:\n    command: x\n    args:\n      k: v\n");
    assert_eq!(e.code, codes::INVALID_TYPE);
    assert_eq!(e.message, "expected a list of strings, found a map");
    assert_eq!(e.path, "servers.a.args");
    // A block value points at its key.
    assert_eq!(at(&e), (4, 5));

    let e = error("servers:\n  a: { command: x, disabled: yes }\n");
    assert_eq!(
        e.message,
        "expected `true` or `false`, found a string `yes`"
    );
    assert_eq!(at(&e), (2, 30));

    let e = error("servers: [a, b]\n");
    assert_eq!(
        e.message,
        "expected a map of server ids to servers, found a list"
    );
    assert_eq!(at(&e), (1, 10));

    let e = error("tools:\n  t: { aliases: [[x]] }\n");
    assert_eq!(e.path, "tools.t.aliases[0]");
    assert_eq!(
        e.message,
        "expected an alias name or a map with `name` and `hidden`, found a list"
    );

    let e = error("servers:\n  a: { command: x, args: [-y, { a: 1 }] }\n");
    assert_eq!(e.path, "servers.a.args[1]");
    assert_eq!(e.message, "expected a string, found a map");

    let e = error("- a\n- b\n");
    assert_eq!(e.path, "");
    assert_eq!(e.message, "expected a map of sections, found a list");

    let e = error("just text\n");
    assert_eq!(
        e.message,
        "expected a map of sections, found a string `just text`"
    );

    let e = error("tools:\n  ? [a, b]\n  : { name: x }\n");
    assert_eq!(e.message, "expected a string key, found a list");
    assert_eq!(e.path, "tools");
}

#[test]
fn numbers_and_booleans_are_text_in_args_env_and_headers() {
    let config = ok(
        "servers:\n  a:\n    command: x\n    args: [--port, 8080, 1.50, true]\n    env: { DEBUG: 1 }\n",
    );
    let Transport::Stdio { args, env, .. } = &config.servers[&id("a")].transport else {
        panic!("stdio")
    };
    assert_eq!(args, &["--port", "8080", "1.50", "true"]);
    assert_eq!(env["DEBUG"], "1");
    // but not where a name is expected
    let e = error("servers:\n  a: { command: 12 }\n");
    assert_eq!(e.message, "expected a string, found a number `12`");
    let e = error("servers:\n  a: { command: x, env: { A: } }\n");
    assert_eq!(e.message, "expected a string, found nothing");
    assert_eq!(e.path, "servers.a.env.A");
}

#[test]
fn syntax_errors_have_a_line_and_column() {
    let e = error("servers:\n  a: { command: x\n  b: 1\n");
    assert_eq!(e.code, codes::SYNTAX);
    assert_eq!(e.path, "");
    assert!(e.span.is_some());

    let e = error("servers:\n  a:\n\tcommand: x\n");
    assert_eq!(e.code, codes::SYNTAX);
    assert_eq!(at(&e).0, 3);

    let e = error(r#"{"mcpServers": {"fs": {"command": "npx",}}"#);
    assert_eq!(e.code, codes::SYNTAX);
}

#[test]
fn duplicate_keys_are_errors() {
    let errors = errors(
        "servers:\n  a: { command: x }\n  a: { command: y }\ntools:\n  t: { name: x, name: y }\n",
    );
    let found: Vec<_> = errors
        .iter()
        .map(|e| (e.code, e.path.as_str(), at(e)))
        .collect();
    assert_eq!(
        found,
        [
            (codes::DUPLICATE_KEY, "servers.a", (3, 3)),
            (codes::DUPLICATE_KEY, "tools.t.name", (5, 17)),
        ]
    );
    assert_eq!(
        errors[0].help.as_deref(),
        Some("the first `a` is on line 2: keep one")
    );
}

#[test]
fn servers_and_mcp_servers_together_conflict() {
    let e = error("servers:\n  a: { command: x }\nmcpServers:\n  b: { command: y }\n");
    assert_eq!(e.code, codes::CONFLICT);
    assert_eq!(e.path, "mcpServers");
    assert_eq!(at(&e), (3, 1));
}

#[test]
fn invalid_tags_are_refused_with_the_rule() {
    for (tag, fix) in [
        ("Git", Some("git")),
        ("pull request", Some("pull-request")),
        ("-git", Some("git")),
        ("git_pull", Some("git-pull")),
        ("g", None),
    ] {
        let text = format!("servers:\n  a: {{ command: x, tags: [ok, '{tag}'] }}\n");
        let e = error(&text);
        assert_eq!(e.code, codes::INVALID_TAG, "{tag}");
        assert_eq!(e.path, "servers.a.tags[1]");
        assert!(e.message.contains(&format!("`{tag}`")), "{}", e.message);
        assert!(e.message.contains(TAG_RULE), "{}", e.message);
        assert_eq!(at(&e), (2, 31));
        assert_eq!(e.help, fix.map(|f| format!("did you mean `{f}`?")), "{tag}");
    }
    let errors = errors("server_tags: { x: [Git] }\ntools: { t: { tags: [a b] } }\n");
    let paths: Vec<_> = errors.iter().map(|e| (e.code, e.path.as_str())).collect();
    assert_eq!(
        paths,
        [
            (codes::INVALID_TAG, "server_tags.x[0]"),
            (codes::INVALID_TAG, "tools.t.tags[0]")
        ]
    );
}

#[test]
fn server_ids_are_validated() {
    let e = error("servers:\n  'a/b': { command: x }\n");
    assert_eq!(e.code, codes::INVALID_SERVER_ID);
    assert_eq!(e.path, r#"servers."a/b""#);
    assert!(e.message.contains("no `/`"), "{}", e.message);
    assert_eq!(at(&e), (2, 3));
}

#[test]
fn a_server_needs_one_transport() {
    let e = error("servers:\n  a: { tags: [git] }\n");
    assert_eq!(e.code, codes::TRANSPORT);
    assert_eq!(e.message, "server `a` has neither `command` nor `url`");
    assert_eq!(e.path, "servers.a");
    assert_eq!(at(&e), (2, 3));
    assert!(e.help.is_some());

    let e = error("servers:\n  a:\n");
    assert_eq!(e.code, codes::TRANSPORT);

    let e = error("servers:\n  a: { command: x, url: 'http://h/mcp' }\n");
    assert_eq!(e.message, "server `a` has both `command` and `url`");

    let e = error("servers:\n  a: { type: http }\n");
    assert_eq!(e.message, "server `a` has `type: http` but no `url`");

    let e = error("servers:\n  a: { type: stdio, url: 'http://h/mcp' }\n");
    assert_eq!(e.message, "server `a` has `type: stdio` and a `url`");
    assert_eq!(e.path, "servers.a.type");

    let e = error("servers:\n  a: { type: sse, command: x }\n");
    assert_eq!(e.message, "server `a` has `type: sse` and a `command`");

    let e = error("servers:\n  a: { type: websocket, command: x }\n");
    assert_eq!(e.code, codes::INVALID_VALUE);
    assert_eq!(e.message, "unknown server type `websocket`");

    let errors = errors(
        "servers:\n  a: { url: 'http://h/mcp', args: [x], env: {}, cwd: / }\n  b: { command: x, headers: {} }\n",
    );
    let found: Vec<_> = errors.iter().map(|e| (e.code, e.path.as_str())).collect();
    assert_eq!(
        found,
        [
            (codes::TRANSPORT, "servers.a.args"),
            (codes::TRANSPORT, "servers.a.env"),
            (codes::TRANSPORT, "servers.a.cwd"),
            (codes::TRANSPORT, "servers.b.headers"),
        ]
    );
    assert_eq!(
        errors[0].message,
        "`args` applies only to stdio servers (with `command`), and server `a` has `url`"
    );

    let e = error("servers:\n  a: { url: 'localhost:9000' }\n");
    assert_eq!(e.code, codes::INVALID_VALUE);
    assert_eq!(e.message, "`localhost:9000` is not an http or https url");
    let e = error("servers:\n  a: { command: '  ' }\n");
    assert_eq!(e.message, "`command` is empty");
    // A url from the environment is checked by whoever uses it.
    ok("servers:\n  a: { url: '${DOCS_URL}' }\n");
}

#[test]
fn disabled_servers_are_kept() {
    let config =
        ok("servers:\n  a: { command: x, disabled: true, tags: [t1] }\n  b: { command: y }\n");
    assert!(config.servers[&id("a")].disabled);
    assert!(!config.servers[&id("b")].disabled);
    assert_eq!(config.rules.servers[&id("a")].tags, tags(&["t1"]));
}

#[test]
fn prefixes() {
    let config = ok(
        "servers:\n  a: { command: x, prefix: true }\n  b: { command: x, prefix: false }\n  c: { command: x, prefix: cc }\n  d: { command: x }\n",
    );
    let prefix = |s: &str| config.rules.servers[&id(s)].prefix.clone();
    assert_eq!(prefix("a").as_deref(), Some("a"));
    assert_eq!(prefix("b"), None);
    assert_eq!(prefix("c").as_deref(), Some("cc"));
    assert_eq!(prefix("d"), None);

    let e = error("servers:\n  a: { command: x, prefix: 'g h' }\n");
    assert_eq!(e.code, codes::INVALID_NAME);
    assert!(
        e.message.starts_with("prefix `g h` contains"),
        "{}",
        e.message
    );
    let e = error("servers:\n  a: { command: x, prefix: [x] }\n");
    assert_eq!(e.code, codes::INVALID_TYPE);
}

#[test]
fn override_keys_are_qualified_only_by_configured_servers() {
    let config = ok("servers:\n  gh: { command: x }\ntools:\n  gh/a/b: {}\n  plain: {}\n");
    assert!(config.rules.tools.contains_key("gh/a/b"));
    assert!(config.rules.tools.contains_key("plain"));

    let e = error(
        "servers:\n  github: { command: x }\n  docs: { url: 'http://h' }\ntools:\n  githb/search: { name: s }\n",
    );
    assert_eq!(e.code, codes::UNKNOWN_SERVER);
    assert_eq!(
        e.message,
        "override `githb/search` names server `githb`, which is not configured"
    );
    assert_eq!(e.path, r#"tools."githb/search""#);
    assert_eq!(at(&e), (5, 3));
    assert_eq!(e.help.as_deref(), Some("did you mean `github/search`?"));

    let e = error("servers:\n  github: { command: x }\nprompts:\n  zzz/p: {}\n");
    assert_eq!(e.path, r#"prompts."zzz/p""#);
    assert_eq!(e.help.as_deref(), Some("configured servers: `github`"));

    let e = error("tools:\n  x/p: {}\n");
    assert_eq!(e.help.as_deref(), Some("no servers are configured"));

    // A server with a mistake in its body is still a configured server.
    let e = error("servers:\n  gh: { comand: x }\ntools:\n  gh/p: {}\n");
    assert_eq!(e.code, codes::UNKNOWN_KEY);

    let e = error("servers:\n  gh: { command: x }\ntools:\n  'gh/': {}\n");
    assert_eq!(e.code, codes::INVALID_VALUE);
}

#[test]
fn override_names_and_aliases_are_names() {
    let errors = errors(
        "tools:\n  t:\n    name: 'get pr'\n    aliases: [ok, 'a b', { name: 'c/d', hidden: true }, { hidden: true }]\n",
    );
    let found: Vec<_> = errors.iter().map(|e| (e.code, e.path.as_str())).collect();
    assert_eq!(
        found,
        [
            (codes::INVALID_NAME, "tools.t.name"),
            (codes::INVALID_NAME, "tools.t.aliases[1]"),
            (codes::INVALID_NAME, "tools.t.aliases[2].name"),
            (codes::MISSING_KEY, "tools.t.aliases[3]"),
        ]
    );
    assert!(
        errors[0].message.starts_with("name `get pr` contains"),
        "{}",
        errors[0].message
    );
    assert!(
        errors[1].message.starts_with("alias `a b` contains"),
        "{}",
        errors[1].message
    );
}

#[test]
fn profiles() {
    let profile = |text: &str| {
        ok(&format!("naming: {{ profile: {text} }}\n"))
            .rules
            .naming
            .profile
    };
    assert_eq!(profile("spec").kind, ProfileKind::Spec);
    assert_eq!(profile("portable"), Profile::default());
    assert_eq!(
        profile("{ prefix_budget: 20 }"),
        Profile {
            kind: ProfileKind::Portable,
            prefix_budget: 20
        }
    );
    let e = error("naming: { profile: portabel }\n");
    assert_eq!(e.code, codes::INVALID_VALUE);
    assert!(e.message.contains("`portabel`"), "{}", e.message);
    assert_eq!(e.help.as_deref(), Some("did you mean `portable`?"));
    let e = error("naming: { profile: { prefix_budget: 64 } }\n");
    assert_eq!(e.code, codes::INVALID_VALUE);
    assert_eq!(e.path, "naming.profile.prefix_budget");
    let e = error("naming: { profile: { prefix_budget: -1 } }\n");
    assert_eq!(e.code, codes::INVALID_VALUE);
    let e = error("naming: { profile: [spec] }\n");
    assert_eq!(e.code, codes::INVALID_TYPE);
}

#[test]
fn naming_defaults_and_settings() {
    let naming = ok("naming: { split: '', separator: '.' }\n").rules.naming;
    assert_eq!(naming.split, "");
    assert_eq!(naming.separator, ".");
    assert!(naming.strip_prefixes.is_empty());
    let e = error("naming: { strip_prefixes: local_ }\n");
    assert_eq!(
        e.message,
        "expected a list of strings, found a string `local_`"
    );
}

#[test]
fn gateway_durations() {
    let gateway = |text: &str| ok(&format!("gateway: {text}\n")).gateway;
    let g = gateway(
        "{ call_timeout: 1.5, start_timeout: 2m, restart: { initial_delay: 0, max_delay: 1h } }",
    );
    assert_eq!(g.call_timeout, Duration::from_millis(1500));
    assert_eq!(g.start_timeout, Duration::from_secs(120));
    assert_eq!(g.restart_initial_delay, Duration::ZERO);
    assert_eq!(g.restart_max_delay, Duration::from_secs(3600));
    assert_eq!(g.restart_max_attempts, None);
    assert_eq!(
        gateway("{ restart: { max_attempts: 0 } }").restart_max_attempts,
        Some(0)
    );
    assert_eq!(
        gateway("{ restart: { max_attempts: ~ } }").restart_max_attempts,
        None
    );
    assert_eq!(gateway("{ call_timeout: ~ }"), GatewaySettings::default());

    let errors = errors(
        "gateway:\n  call_timeout: 5 minutes\n  start_timeout: 0\n  restart:\n    initial_delay: -1\n    max_delay: [1]\n    max_attempts: 1.5\n",
    );
    let found: Vec<_> = errors
        .iter()
        .map(|e| (e.code, e.path.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (
                codes::INVALID_VALUE,
                "gateway.call_timeout",
                "`5 minutes` is not a duration"
            ),
            (
                codes::INVALID_VALUE,
                "gateway.start_timeout",
                "`0` is zero; this duration must be longer"
            ),
            (
                codes::INVALID_VALUE,
                "gateway.restart.initial_delay",
                "`-1` is not a duration"
            ),
            (
                codes::INVALID_TYPE,
                "gateway.restart.max_delay",
                "expected a duration, found a list"
            ),
            (
                codes::INVALID_TYPE,
                "gateway.restart.max_attempts",
                "expected a whole number, found a number `1.5`"
            ),
        ]
    );
    assert_eq!(errors[0].help.as_deref(), Some(DURATION_HELP));

    let e = error("gateway: { restart: { initial_delay: 1m, max_delay: 10s } }\n");
    assert_eq!(e.path, "gateway.restart.initial_delay");
    assert_eq!(
        e.message,
        "`initial_delay` (60s) is longer than `max_delay` (10s)"
    );
    let e = error("gateway: { restart: { max_attempts: 99999999999 } }\n");
    assert_eq!(e.message, "`99999999999` is out of range");
}

#[test]
fn spans_are_recorded_for_every_path() {
    let text = r#"servers:
  bridge:
    command: bridge
tools:
  "bridge/local_bridge_x__y":
    name: y
    aliases:
      - first
      - { name: second, hidden: true }
"#;
    let config = ok(text);
    let source = &config.source;
    let show = |p: &str| {
        let span = source.span(p).unwrap_or_else(|| panic!("no span for {p}"));
        (
            span.line,
            span.column,
            &text[span.offset..span.offset + span.len],
        )
    };
    assert_eq!(
        show(r#"tools."bridge/local_bridge_x__y".aliases[1]"#),
        (9, 9, "{ name: second, hidden: true }")
    );
    assert_eq!(
        show(r#"tools."bridge/local_bridge_x__y".aliases[1].name"#),
        (9, 17, "second")
    );
    assert_eq!(
        show(r#"tools."bridge/local_bridge_x__y".aliases[0]"#),
        (8, 9, "first")
    );
    // A block value is shown at its key; the key and the whole value are there too.
    assert_eq!(
        show(r#"tools."bridge/local_bridge_x__y".aliases"#),
        (7, 5, "aliases")
    );
    assert_eq!(
        show(r#"tools."bridge/local_bridge_x__y""#),
        (5, 3, r#""bridge/local_bridge_x__y""#)
    );
    let value = source.value_span("servers.bridge").expect("value span");
    assert_eq!((value.line, value.column), (3, 5));
    let key = source.key_span("servers.bridge.command").expect("key span");
    assert_eq!(&text[key.offset..key.offset + key.len], "command");
    assert_eq!(show("servers.bridge.command"), (3, 14, "bridge"));
    assert_eq!(show("servers"), (1, 1, "servers"));
    assert_eq!(source.span("servers.nope"), None);
}

#[test]
fn spans_in_non_ascii_text_are_bytes() {
    let text = "# café ☕\nservers:\n  a: { command: \"é\", comand: x }\n";
    let e = error(text);
    let span = e.span.expect("span");
    assert_eq!(&text[span.offset..span.offset + span.len], "comand");
    assert_eq!((span.line, span.column), (3, 22));
}

#[test]
fn aliases_and_anchors_work() {
    let config = ok("servers:\n  a: &common { command: x, env: { A: '1' } }\n  b: *common\n");
    assert_eq!(config.servers[&id("a")], config.servers[&id("b")]);
}
