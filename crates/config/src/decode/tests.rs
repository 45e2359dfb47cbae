#![allow(
    clippy::too_many_lines,
    reason = "a test is one scenario, read from top to bottom"
)]
use std::time::Duration;

use moniker_surface::names::TAG_RULE;
use moniker_surface::toolsets::{ALIAS_RULE, NAME_RULE, TagExpr, ToolsetRule, Toolsets};
use moniker_surface::{AliasRule, Legacy, Profile, ProfileKind, ServerRules};

use super::actions::{ACTION_RULE, valid_action};
use super::*;
use crate::gateway::DURATION_HELP;
use crate::server::Transport;
use crate::{Config, IdentityMatch, codes, parse};

fn ok(text: &str) -> Config {
    match parse("moniker.yaml", text) {
        Ok(config) => config,
        Err(report) => panic!("expected a valid config:\n{report}"),
    }
}

pub(super) fn errors(text: &str) -> Vec<ConfigError> {
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

pub(super) fn id(s: &str) -> ServerId {
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
        ..
    } = &github.transport
    else {
        panic!("stdio")
    };
    assert_eq!(command, "npx");
    assert_eq!(args, &["-y", "@modelcontextprotocol/server-github"]);
    assert_eq!(env["GITHUB_TOKEN"], "${GITHUB_TOKEN}");
    assert_eq!(cwd, &None);

    let Transport::Http { url, headers, .. } = &config.servers[&id("docs")].transport else {
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
                hidden: false,
                deprecated: None,
            },
            AliasRule {
                name: "dg".parse().expect("name"),
                hidden: true,
                deprecated: None,
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
            list_wait: Duration::from_secs(3),
            idle_stop: Duration::from_secs(60),
            restart_initial_delay: Duration::from_millis(500),
            restart_max_delay: Duration::from_secs(30),
            restart_max_attempts: Some(10),
            page_size: None,
            pass_env: crate::PassEnv::default(),
            sandbox: None,
        }
    );
    let paged = ok("gateway: { page_size: 50 }\n");
    assert_eq!(paged.gateway.page_size, Some(50));
    let passed = ok("gateway: { pass_env: [OPENAI_API_KEY] }\n");
    assert_eq!(
        passed.gateway.pass_env,
        crate::PassEnv::Names(vec!["OPENAI_API_KEY".to_owned()])
    );
    assert_eq!(
        ok("gateway: { pass_env: all }\n").gateway.pass_env,
        crate::PassEnv::All
    );
}

/// A list entry the key does not take is said at its own index and place, after an entry of
/// the wrong type (which its index still counts).
#[test]
fn a_bad_entry_of_a_list_is_said_where_it_is() {
    let found = errors("gateway:\n  pass_env:\n    - 1\n    - bad-name\n");
    let paths: Vec<&str> = found.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["gateway.pass_env[0]", "gateway.pass_env[1]"]);
    assert!(
        found[1]
            .message
            .contains("`bad-name` is not an environment variable name")
    );
    assert_eq!(at(&found[1]), (4, 7));
    let e = error(
        "http:\n  auth:\n    resource: https://gw/mcp\n    issuer: https://idp\n    algorithms: [RS256, HS256]\n",
    );
    assert_eq!(e.path, "http.auth.algorithms[1]");
    assert_eq!(at(&e), (5, 25));
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
            pass_env: crate::PassEnv::default(),
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
        Some(
            "expected one of `call_timeout`, `start_timeout`, `list_wait`, `idle_stop`, `restart`, `page_size`, `pass_env`, `sandbox`"
        )
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
        "expected an alias name or a map with `name`, `hidden` and `deprecated`, found a list"
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

/// The ctx-sys consolidation of seed 004, as DESIGN.md writes it.
const CTXSYS: &str = r#"servers: { ctxsys: { command: target/debug/moniker-fixture, args: [fixtures/ctxsys.json] } }
actions:
  project: { description: Manage projects., tools: { create: create_project, list: list_projects, set_active: set_active_project, delete: delete_project } }
"#;

fn name(s: &str) -> Name {
    s.parse().expect("name")
}

#[test]
fn the_ctxsys_action_tool_parses() {
    let config = ok(CTXSYS);
    assert_eq!(config.servers.len(), 1);
    let actions = &config.rules.actions;
    assert_eq!(actions.len(), 1);
    let project = &actions["project"];
    assert_eq!(project.description.as_deref(), Some("Manage projects."));
    let tools: Vec<(&str, &str)> = project
        .tools
        .iter()
        .map(|(a, m)| (a.as_str(), m.as_str()))
        .collect();
    // In config order, not sorted.
    assert_eq!(
        tools,
        [
            ("create", "create_project"),
            ("list", "list_projects"),
            ("set_active", "set_active_project"),
            ("delete", "delete_project"),
        ]
    );
    assert_eq!(project.legacy, Legacy::Hidden);
    assert!(project.aliases.is_empty());
    assert!(project.tags.is_empty());
    // Every entry has a place, for the naming core's diagnostics.
    let span = config
        .source
        .span("actions.project.tools.set_active")
        .expect("span");
    assert_eq!(span.line, 3);
    assert_eq!(
        &CTXSYS[span.offset..span.offset + span.len],
        "set_active_project"
    );
}

#[test]
fn an_action_tool_with_every_field_parses() {
    let config = ok(r"
actions:
  project:
    description: Manage projects.
    tools: { create: create_project, list: list_projects, set_active: set_active_project, delete: delete_project }
    legacy: listed
    aliases: [proj, { name: p, hidden: true }]
    tags: [projects]
  checkpoint:
    tools:
      save: checkpoint_save
      load: checkpoint_load
    legacy: off
  memory:
    tools: { spill: memory_spill }
    legacy: hidden
");
    let actions = &config.rules.actions;
    let project = &actions["project"];
    assert_eq!(project.legacy, Legacy::Listed);
    assert_eq!(
        project.aliases,
        [
            AliasRule {
                name: name("proj"),
                hidden: false,
                deprecated: None,
            },
            AliasRule {
                name: name("p"),
                hidden: true,
                deprecated: None,
            },
        ]
    );
    assert_eq!(project.tags, tags(&["projects"]));
    assert_eq!(project.tools["set_active"], name("set_active_project"));
    let checkpoint = &actions["checkpoint"];
    assert_eq!(checkpoint.legacy, Legacy::Off);
    assert_eq!(checkpoint.description, None);
    assert_eq!(
        checkpoint.tools.keys().collect::<Vec<_>>(),
        ["save", "load"]
    );
    assert_eq!(actions["memory"].legacy, Legacy::Hidden);
    // Nothing is no action tools.
    assert!(ok("actions:\n").rules.actions.is_empty());
    assert!(ok("actions: {}\n").rules.actions.is_empty());
}

#[test]
fn action_tool_names_are_names() {
    let e = error("actions:\n  'my project': { tools: { create: create_project } }\n");
    assert_eq!(e.code, codes::INVALID_NAME);
    assert_eq!(e.path, r#"actions."my project""#);
    assert!(
        e.message.starts_with("action tool `my project` contains"),
        "{}",
        e.message
    );
    assert_eq!(at(&e), (2, 3));
    // Names that only the wide `spec` profile allows are names here too.
    ok("actions:\n  project.v2: { tools: { create: create_project } }\n");
}

#[test]
fn actions_must_match_the_rule() {
    let errors = errors(
        "actions:\n  project:\n    tools:\n      Create: create_project\n      set-active: set_active_project\n      2nd: list_projects\n      _x: delete_project\n      ok_1: get_project\n",
    );
    let found: Vec<_> = errors
        .iter()
        .map(|e| (e.code, e.path.as_str(), at(e), e.help.as_deref()))
        .collect();
    assert_eq!(
        found,
        [
            (
                codes::INVALID_ACTION,
                "actions.project.tools.Create",
                (4, 7),
                Some("did you mean `create`?")
            ),
            (
                codes::INVALID_ACTION,
                "actions.project.tools.set-active",
                (5, 7),
                Some("did you mean `set_active`?")
            ),
            (
                codes::INVALID_ACTION,
                "actions.project.tools.2nd",
                (6, 7),
                None
            ),
            (
                codes::INVALID_ACTION,
                "actions.project.tools._x",
                (7, 7),
                None
            ),
        ]
    );
    assert_eq!(errors[0].message, format!("action `Create` {ACTION_RULE}"));
    assert!(ACTION_RULE.contains("`^[a-z][a-z0-9_]*$`"));
    for good in ["a", "set_active", "v2", "a_", "impact_report"] {
        assert!(valid_action(good), "{good}");
    }
    for bad in ["", "A", "1a", "_a", "a-b", "a b", "é", "aé"] {
        assert!(!valid_action(bad), "{bad}");
    }
}

#[test]
fn members_are_names() {
    let errors = errors(
        "actions:\n  project:\n    tools: { create: 'create project', list: [list_projects], delete: 12 }\n",
    );
    let found: Vec<_> = errors
        .iter()
        .map(|e| (e.code, e.path.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(found[0].0, codes::INVALID_NAME);
    assert_eq!(found[0].1, "actions.project.tools.create");
    assert!(
        found[0].2.starts_with("tool `create project` contains"),
        "{}",
        found[0].2
    );
    assert_eq!(
        found[1..],
        [
            (
                codes::INVALID_TYPE,
                "actions.project.tools.list",
                "expected a string, found a list"
            ),
            (
                codes::INVALID_TYPE,
                "actions.project.tools.delete",
                "expected a string, found a number `12`"
            ),
        ]
    );
    assert_eq!(at(&errors[0]), (3, 22));
}

#[test]
fn tools_is_a_non_empty_map() {
    for (text, code, pos) in [
        (
            "actions:\n  project: { tools: {} }\n",
            codes::INVALID_VALUE,
            (2, 21),
        ),
        (
            "actions:\n  project:\n    tools:\n",
            codes::INVALID_VALUE,
            (3, 5),
        ),
        (
            "actions:\n  project: { tools: [create_project] }\n",
            codes::INVALID_TYPE,
            (2, 21),
        ),
        (
            "actions:\n  project: { description: x }\n",
            codes::MISSING_KEY,
            (2, 3),
        ),
        ("actions:\n  project:\n", codes::MISSING_KEY, (2, 3)),
    ] {
        let e = error(text);
        assert_eq!((e.code, at(&e)), (code, pos), "{text}");
    }
    let e = error("actions:\n  project: { tools: {} }\n");
    assert_eq!(e.path, "actions.project.tools");
    assert_eq!(
        e.message,
        "`tools` is empty: an action tool needs at least one action"
    );
    assert!(e.help.is_some());
    let e = error("actions:\n  project: { description: x }\n");
    assert_eq!(e.path, "actions.project");
    assert_eq!(e.message, "action tool `project` has no `tools`");
    let e = error("actions:\n  project: { tools: [create_project] }\n");
    assert_eq!(
        e.message,
        "expected a map of actions to tool names, found a list"
    );
    let e = error("actions: [project]\n");
    assert_eq!(e.code, codes::INVALID_TYPE);
    assert_eq!(
        e.message,
        "expected a map of tool names to action tools, found a list"
    );
    let e = error("actions:\n  project: create_project\n");
    assert_eq!(e.code, codes::INVALID_TYPE);
    assert_eq!(
        e.message,
        "expected a map of action tool settings, found a string `create_project`"
    );
}

#[test]
fn a_tool_is_the_member_of_one_action_only() {
    // Twice in one action tool.
    let e = error(
        "actions:\n  project:\n    tools:\n      create: create_project\n      new: create_project\n",
    );
    assert_eq!(e.code, codes::DUPLICATE_MEMBER);
    assert_eq!(e.path, "actions.project.tools.new");
    assert_eq!(at(&e), (5, 12));
    assert_eq!(
        e.message,
        "tool `create_project` is already the member of `actions.project.tools.create`"
    );
    assert_eq!(
        e.help.as_deref(),
        Some("the first is on line 4: a tool can be the member of one action only")
    );

    // In two action tools: the second place, in file order, is the error.
    let errors = errors(
        "actions:\n  project: { tools: { create: create_project, list: list_projects } }\n  admin: { tools: { list: list_projects, add: create_project, stats: get_graph_stats } }\n",
    );
    let found: Vec<_> = errors
        .iter()
        .map(|e| (e.code, e.path.as_str(), at(e), e.message.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (
                codes::DUPLICATE_MEMBER,
                "actions.admin.tools.list",
                (3, 27),
                "tool `list_projects` is already the member of `actions.project.tools.list`"
            ),
            (
                codes::DUPLICATE_MEMBER,
                "actions.admin.tools.add",
                (3, 47),
                "tool `create_project` is already the member of `actions.project.tools.create`"
            ),
        ]
    );
    assert_eq!(
        errors[1].help.as_deref(),
        Some("the first is on line 2: a tool can be the member of one action only")
    );
}

#[test]
fn legacy_is_hidden_listed_or_off() {
    let legacy = |text: &str| {
        ok(&format!(
            "actions:\n  p: {{ tools: {{ a: x }}, legacy: {text} }}\n"
        ))
        .rules
        .actions["p"]
            .legacy
    };
    assert_eq!(legacy("hidden"), Legacy::Hidden);
    assert_eq!(legacy("listed"), Legacy::Listed);
    assert_eq!(legacy("off"), Legacy::Off);

    let e = error("actions:\n  p: { tools: { a: x }, legacy: hide }\n");
    assert_eq!(e.code, codes::INVALID_VALUE);
    assert_eq!(e.path, "actions.p.legacy");
    assert_eq!(
        e.message,
        "legacy `hide` is not a legacy mode: use `hidden`, `listed` or `off`"
    );
    assert_eq!(e.help.as_deref(), Some("did you mean `hidden`?"));
    assert_eq!(at(&e), (2, 33));
    let e = error("actions:\n  p: { tools: { a: x }, legacy: zzz }\n");
    assert_eq!(e.help, None);
    // YAML 1.1 habits: `off` unquoted is the string `off` here, and `false` is no mode.
    let e = error("actions:\n  p: { tools: { a: x }, legacy: false }\n");
    assert_eq!(e.code, codes::INVALID_TYPE);
}

#[test]
fn action_tool_keys_aliases_and_tags_are_checked() {
    // `tool:` is reported with a did-you-mean, and not as a missing `tools` too.
    let e = error("actions:\n  p: { tool: { a: x } }\n");
    assert_eq!(e.code, codes::UNKNOWN_KEY);
    assert_eq!(e.path, "actions.p.tool");
    assert_eq!(e.help.as_deref(), Some("did you mean `tools`?"));

    let e = error("actions:\n  p: { tools: { a: x }, hidden: true }\n");
    assert_eq!(e.code, codes::UNKNOWN_KEY);
    assert_eq!(
        e.help.as_deref(),
        Some("expected one of `description`, `tools`, `legacy`, `aliases`, `tags`")
    );

    let errors = errors(
        "actions:\n  p:\n    tools: { a: x }\n    aliases: ['a b', { hidden: true }]\n    tags: [Projects]\n    description: [x]\n",
    );
    let found: Vec<_> = errors.iter().map(|e| (e.code, e.path.as_str())).collect();
    assert_eq!(
        found,
        [
            (codes::INVALID_NAME, "actions.p.aliases[0]"),
            (codes::MISSING_KEY, "actions.p.aliases[1]"),
            (codes::INVALID_TAG, "actions.p.tags[0]"),
            (codes::INVALID_TYPE, "actions.p.description"),
        ]
    );
}

#[test]
fn unknown_top_keys_offer_actions() {
    let e = error("action: {}\n");
    assert_eq!(e.help.as_deref(), Some("did you mean `actions`?"));
}

// ---------------------------------------------------------------------------------------------
// toolsets

fn expr(text: &str) -> TagExpr {
    text.parse().expect("tag expression")
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

const TOOLSETS: &str = r"toolsets:
  manage: true                       # reserved key: show the management tools
  store: ~/moniker-toolsets.json     # reserved key: the store file
  review:
    description: Code review.
    tools: [get_pr_info, list_prs]
    prompts: [think]
    tags: [git, github]
    include: [base]
    aliases: { get_pr_info: pr }
  base:
    tools: [web_search]
    tags: git and not deprecated
  empty:
  quoted: { tags: 'gitlab or (github and not archived)', include: [base, review] }
";

#[test]
fn the_brief_toolsets_example_parses() {
    let config = ok(TOOLSETS);
    let toolsets = &config.rules.toolsets;
    assert!(config.toolsets.manage);
    assert_eq!(
        config.toolsets.store.as_deref(),
        Some("~/moniker-toolsets.json")
    );
    let names: Vec<&str> = toolsets.sets.keys().map(String::as_str).collect();
    assert_eq!(names, ["base", "empty", "quoted", "review"]);
    let review = &toolsets.sets["review"];
    assert_eq!(
        review,
        &ToolsetRule {
            description: Some("Code review.".to_owned()),
            tools: strings(&["get_pr_info", "list_prs"]),
            prompts: strings(&["think"]),
            tags: Some(expr("git or github")),
            include: strings(&["base"]),
            aliases: [("get_pr_info".to_owned(), "pr".to_owned())].into(),
            resources: Vec::new(),
            discovery: None,
            params: Default::default(),
        }
    );
    assert_eq!(
        toolsets.sets["base"].tags,
        Some(expr("git and not deprecated"))
    );
    assert_eq!(toolsets.sets["empty"], ToolsetRule::default());
    assert_eq!(
        toolsets.sets["quoted"].tags,
        Some(expr("gitlab or (github and not archived)"))
    );
    assert_eq!(toolsets.sets["quoted"].include, ["base", "review"]);
    // Every entry has its place, for diagnostics found later (`check`).
    let span = config
        .source
        .span("toolsets.review.aliases.get_pr_info")
        .expect("span");
    assert_eq!((span.line, span.column), (10, 29));
    let span = config
        .source
        .span("toolsets.review.tools[1]")
        .expect("span");
    assert_eq!((span.line, span.column), (6, 26));
    assert!(config.source.span("toolsets.base.include").is_none());
}

#[test]
fn the_design_toolsets_line_parses() {
    let config = ok(
        "toolsets: { review: { tools: [get_pr_info], tags: [git], aliases: { get_pr_info: pr } } }\n",
    );
    let toolsets = &config.rules.toolsets;
    assert!(!config.toolsets.manage);
    assert_eq!(config.toolsets.store, None);
    assert_eq!(toolsets.sets["review"].tags, Some(expr("git")));
}

#[test]
fn toolsets_may_be_empty() {
    for text in [
        "toolsets: {}\n",
        "toolsets:\n",
        "toolsets: { store: ~, manage: false }\n",
    ] {
        let config = ok(text);
        assert_eq!(config.rules.toolsets, Toolsets::default(), "{text}");
    }
}

#[test]
fn tag_expression_errors_point_into_the_string() {
    // Plain: the offending word.
    let e = error("toolsets:\n  r:\n    tags: git and Github\n");
    assert_eq!(e.code, codes::INVALID_TAGS);
    assert_eq!(e.path, "toolsets.r.tags");
    assert_eq!(at(&e), (3, 19));
    assert_eq!(e.span.map(|s| s.len), Some(6));
    assert!(
        e.message
            .starts_with("tag expression `git and Github` is invalid: `Github` is not a tag"),
        "{}",
        e.message
    );
    assert!(
        e.help
            .as_deref()
            .unwrap_or("")
            .contains("`and`, `or`, `not`")
    );

    // Quoted: past the quote; the end of the text when it ends too early.
    let e = error("toolsets:\n  r: { tags: \"git and (github\" }\n");
    assert_eq!(at(&e), (2, 30));
    assert_eq!(e.span.map(|s| s.len), Some(0));
    assert!(
        e.message
            .contains("expected `)` to close the `(` at character 9"),
        "{}",
        e.message
    );
    let e = error("toolsets:\n  r: { tags: 'git github' }\n");
    assert_eq!(at(&e), (2, 19));
    assert!(e.message.ends_with("found `github`"), "{}", e.message);

    // Non-ASCII before the error: columns count characters.
    let e = error("toolsets:\n  r: { description: é, tags: git or or }\n");
    assert_eq!(at(&e), (2, 37));

    // Escapes or several lines: the string itself, with the place in the message.
    let e = error("toolsets:\n  r: { tags: \"git \\x41ND\" }\n");
    assert_eq!(at(&e), (2, 14));
    assert!(
        e.message.ends_with("(at character 5 of the expression)"),
        "{}",
        e.message
    );
    // A block scalar whose text is on one line is found where it is.
    let e = error("toolsets:\n  r:\n    tags: >-\n      git and\n");
    assert_eq!(e.code, codes::INVALID_TAGS);
    assert_eq!(at(&e), (4, 14), "{}", e.message);
    let e = error("toolsets:\n  r:\n    tags: >-\n      git\n      and\n");
    assert!(
        e.message.contains("(at character 8 of the expression)"),
        "{}",
        e.message
    );
    assert_eq!(at(&e), (4, 7));
}

#[test]
fn toolset_tags_are_checked() {
    let errors = errors(
        "toolsets:\n  a: { tags: [Git, pull request, ok] }\n  b: { tags: 3 }\n  c: { tags: { git: 1 } }\n  d: { tags: '' }\n",
    );
    let found: Vec<_> = errors.iter().map(|e| (e.code, e.path.as_str())).collect();
    assert_eq!(
        found,
        [
            (codes::INVALID_TAG, "toolsets.a.tags[0]"),
            (codes::INVALID_TAG, "toolsets.a.tags[1]"),
            (codes::INVALID_TYPE, "toolsets.b.tags"),
            (codes::INVALID_TYPE, "toolsets.c.tags"),
            (codes::INVALID_TAGS, "toolsets.d.tags"),
        ]
    );
    assert!(errors[0].message.contains(TAG_RULE));
    assert_eq!(errors[0].help.as_deref(), Some("did you mean `git`?"));
    assert_eq!(
        errors[2].message,
        "expected a list of tags or a tag expression, found a number `3`"
    );
    assert!(errors[4].message.contains("empty"), "{}", errors[4].message);
    // An empty list selects nothing by tag.
    assert_eq!(
        ok("toolsets: { a: { tags: [] } }\n").rules.toolsets.sets["a"].tags,
        None
    );
}

#[test]
fn toolset_aliases_follow_the_alias_rule() {
    let errors = errors(
        "toolsets:\n  r:\n    aliases: { get_pr_info: PR, list_prs: p, web_search: ok_alias, 'bad key': fine, x: [1] }\n",
    );
    let found: Vec<_> = errors
        .iter()
        .map(|e| (e.code, e.path.as_str(), at(e)))
        .collect();
    assert_eq!(
        found,
        [
            (
                codes::INVALID_NAME,
                "toolsets.r.aliases.get_pr_info",
                (3, 29)
            ),
            (codes::INVALID_NAME, "toolsets.r.aliases.list_prs", (3, 43)),
            (
                codes::INVALID_NAME,
                r#"toolsets.r.aliases."bad key""#,
                (3, 68)
            ),
            (codes::INVALID_TYPE, "toolsets.r.aliases.x", (3, 88)),
        ]
    );
    assert_eq!(errors[0].message, format!("alias `PR` {ALIAS_RULE}"));
    assert_eq!(errors[0].help.as_deref(), Some("did you mean `pr`?"));
    assert_eq!(errors[1].message, format!("alias `p` {ALIAS_RULE}"));
    assert!(
        errors[2].message.starts_with("tool `bad key` contains"),
        "{}",
        errors[2].message
    );
}

#[test]
fn toolset_references_are_names() {
    let errors = errors(
        "toolsets:\n  r: { tools: [ok, 'get pr'], prompts: think, include: [{ a: 1 }], description: [x] }\n",
    );
    let found: Vec<_> = errors.iter().map(|e| (e.code, e.path.as_str())).collect();
    assert_eq!(
        found,
        [
            (codes::INVALID_NAME, "toolsets.r.tools[1]"),
            (codes::INVALID_TYPE, "toolsets.r.prompts"),
            (codes::INVALID_TYPE, "toolsets.r.include[0]"),
            (codes::INVALID_TYPE, "toolsets.r.description"),
        ]
    );
    assert!(
        errors[0].message.starts_with("tool `get pr` contains"),
        "{}",
        errors[0].message
    );
    assert_eq!(
        errors[1].message,
        "expected a list of prompt names or globs, found a string `think`"
    );
}

#[test]
fn includes_name_toolsets_of_the_config() {
    let errors = errors(
        "toolsets:\n  base: { tools: [a] }\n  review: { include: [bse, base, zzz] }\n  other: { include: [review] }\n",
    );
    let found: Vec<_> = errors
        .iter()
        .map(|e| (e.code, e.path.as_str(), at(e), e.help.as_deref()))
        .collect();
    assert_eq!(
        found,
        [
            (
                codes::UNKNOWN_TOOLSET,
                "toolsets.review.include[0]",
                (3, 23),
                Some("did you mean `base`?")
            ),
            (
                codes::UNKNOWN_TOOLSET,
                "toolsets.review.include[2]",
                (3, 34),
                Some("toolsets: `base`, `review`, `other`")
            ),
        ]
    );
    assert_eq!(
        errors[0].message,
        "toolset `review` includes `bse`, which is not a toolset"
    );
    let e = error("toolsets:\n  manage: true\n  r: { include: [manage] }\n");
    assert_eq!(e.code, codes::UNKNOWN_TOOLSET);
    assert_eq!(e.help.as_deref(), Some("toolsets: `r`"));
}

#[test]
fn include_cycles_are_errors() {
    let errors = errors(
        "toolsets:\n  a: { include: [b] }\n  b: { include: [c, d] }\n  c: { include: [a] }\n  d: { include: [d] }\n  e: { include: [a] }\n",
    );
    let found: Vec<_> = errors
        .iter()
        .map(|e| (e.code, e.path.as_str(), e.message.as_str(), at(e)))
        .collect();
    assert_eq!(
        found,
        [
            (
                codes::INCLUDE_CYCLE,
                "toolsets.c.include[0]",
                "toolset `a` includes itself through `c`: a -> b -> c -> a",
                (4, 18)
            ),
            (
                codes::INCLUDE_CYCLE,
                "toolsets.d.include[0]",
                "toolset `d` includes itself",
                (5, 18)
            ),
        ]
    );
    assert_eq!(
        errors[0].help.as_deref(),
        Some("remove one `include` of the cycle")
    );
    // Diamonds are not cycles.
    ok(
        "toolsets:\n  a: { include: [b, c] }\n  b: { include: [d] }\n  c: { include: [d] }\n  d: {}\n",
    );
}

#[test]
fn toolset_names_follow_the_name_rule() {
    let errors = errors(
        "toolsets:\n  Review: { tools: [a] }\n  other: { include: [Review] }\n  code.review: {}\n",
    );
    let found: Vec<_> = errors
        .iter()
        .map(|e| (e.code, e.path.as_str(), at(e), e.help.as_deref()))
        .collect();
    assert_eq!(
        found,
        [
            (
                codes::INVALID_TOOLSET,
                "toolsets.Review",
                (2, 3),
                Some("did you mean `review`?")
            ),
            (
                codes::INVALID_TOOLSET,
                r#"toolsets."code.review""#,
                (4, 3),
                Some("did you mean `code_review`?")
            ),
        ]
    );
    assert_eq!(
        errors[0].message,
        format!("toolset name `Review` {NAME_RULE}")
    );
}

#[test]
fn unknown_toolset_keys_have_a_did_you_mean() {
    let errors = errors(
        "toolsets:\n  manag: true\n  stor: /tmp/x.json\n  review: { tols: [a], alias: { a: bb } }\n",
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
                "toolsets.manag",
                Some("did you mean `manage`?")
            ),
            (
                codes::UNKNOWN_KEY,
                "toolsets.stor",
                Some("did you mean `store`?")
            ),
            (
                codes::UNKNOWN_KEY,
                "toolsets.review.tols",
                Some("did you mean `tools`?")
            ),
            (
                codes::UNKNOWN_KEY,
                "toolsets.review.alias",
                Some("did you mean `aliases`?")
            ),
        ]
    );
    // Any other key is a toolset, which must be a map.
    let e = error("toolsets:\n  review: [a, b]\n");
    assert_eq!(e.code, codes::INVALID_TYPE);
    assert_eq!(
        e.message,
        "expected a map of toolset settings, found a list"
    );
    // A toolset may be named like a setting, when it is one.
    assert!(
        ok("toolsets: { stores: { tools: [a] } }\n")
            .rules
            .toolsets
            .sets
            .contains_key("stores")
    );
    // Misspelt `toolsets` at the top.
    let e = error("toolset: {}\n");
    assert_eq!(e.help.as_deref(), Some("did you mean `toolsets`?"));
}

#[test]
fn manage_and_store_are_checked() {
    let errors = errors("toolsets: { manage: yes, store: 3 }\n");
    let found: Vec<_> = errors.iter().map(|e| (e.code, e.path.as_str())).collect();
    assert_eq!(
        found,
        [
            (codes::INVALID_TYPE, "toolsets.manage"),
            (codes::INVALID_TYPE, "toolsets.store"),
        ]
    );
    let e = error("toolsets: { store: '  ' }\n");
    assert_eq!(
        (e.code, e.path.as_str()),
        (codes::INVALID_VALUE, "toolsets.store")
    );
    let e = error("toolsets: [a]\n");
    assert_eq!(e.message, "expected a map of toolsets, found a list");
}

#[test]
fn the_store_is_expanded_with_the_environment() {
    let mut config = ok("toolsets:\n  store: ${DATA:-/var/lib}/moniker/${NAME}.json\n");
    config
        .expand_env(|name| (name == "NAME").then(|| "toolsets".to_owned()))
        .expect("set");
    assert_eq!(
        config.toolsets.store.as_deref(),
        Some("/var/lib/moniker/toolsets.json")
    );
    let mut config = ok("toolsets:\n  store: ${NOPE}/t.json\n");
    let report = config.expand_env(|_| None).expect_err("unset");
    let e = &report.errors[0];
    assert_eq!(
        (e.code, e.path.as_str(), at(e)),
        (codes::ENV, "toolsets.store", (2, 10))
    );
    assert_eq!(config.toolsets.store.as_deref(), Some("${NOPE}/t.json"));
}

#[test]
fn the_http_section() {
    let config = ok(concat!(
        "http:\n",
        "  tokens: [\"${A_TOKEN}\", { token: \"${B_TOKEN:-b-default}\", toolset: review }]\n",
        "  allowed_origins: [https://app.example.com]\n",
        "  allowed_hosts: [gw.internal:8080]\n",
        "  max_body: 1048576\n",
    ));
    assert_eq!(config.http.tokens.len(), 2);
    assert_eq!(config.http.tokens[1].toolset.as_deref(), Some("review"));
    assert_eq!(config.http.allowed_origins, ["https://app.example.com"]);
    assert_eq!(config.http.allowed_hosts, ["gw.internal:8080"]);
    assert_eq!(config.http.max_body, Some(1_048_576));
    let mut expanded = config.clone();
    expanded
        .expand_env(|name| (name == "A_TOKEN").then(|| "secret-a".to_owned()))
        .expect("expands");
    assert_eq!(expanded.http.tokens[0].token, "secret-a");
    assert_eq!(expanded.http.tokens[1].token, "b-default");
    let shown = format!("{expanded:?}");
    assert!(
        !shown.contains("secret-a") && !shown.contains("b-default"),
        "{shown}"
    );

    let e = error("http:\n  tokns: [x]\n");
    assert_eq!(e.code, codes::UNKNOWN_KEY);
    assert!(e.help.as_deref().unwrap_or("").contains("tokens"), "{e:?}");
    let e = error("http:\n  tokens: [{ toolset: x }]\n");
    assert_eq!(e.code, codes::MISSING_KEY);
    let report = config
        .clone()
        .expand_env(|_| None)
        .expect_err("A_TOKEN unset");
    assert_eq!(report.errors[0].path, "http.tokens[0]");
}

#[test]
fn the_http_auth_section() {
    let config = ok(concat!(
        "http:\n",
        "  auth:\n",
        "    resource: ${PUBLIC_URL:-https://gw.example.com}/mcp/\n",
        "    issuer: https://idp.example.com/realms/team\n",
        "    scopes: [mcp:tools]\n",
        "    leeway: 0s\n",
        "    keys_ttl: 2m\n",
        "    introspection: { client_id: moniker, client_secret: \"${INTRO_SECRET}\" }\n",
        "    toolsets:\n",
        "      - { claim: groups, value: admins, toolset: admin }\n",
        "      - { scope: \"mcp:read\", toolset: readonly }\n",
        "    default_toolset: staff\n",
    ));
    let auth = config.http.auth.clone().expect("http.auth");
    assert_eq!(auth.scopes, ["mcp:tools"]);
    assert_eq!(auth.leeway, std::time::Duration::ZERO);
    assert_eq!(auth.keys_ttl, std::time::Duration::from_secs(120));
    assert_eq!(auth.toolsets.len(), 2);
    assert_eq!(auth.default_toolset.as_deref(), Some("staff"));
    let mut expanded = config.clone();
    expanded
        .expand_env(|name| (name == "INTRO_SECRET").then(|| "s3cret".to_owned()))
        .expect("expands");
    let auth = expanded.http.auth.clone().expect("http.auth");
    assert_eq!(
        auth.resource, "https://gw.example.com/mcp",
        "the trailing / goes"
    );
    assert_eq!(
        auth.introspection
            .as_ref()
            .map(|i| i.client_secret.as_str()),
        Some("s3cret")
    );
    assert!(!format!("{expanded:?}").contains("s3cret"));

    let e = error("http:\n  auth: { issuer: https://idp }\n");
    assert_eq!(e.code, codes::MISSING_KEY);
    assert!(e.message.contains("resource"), "{e:?}");
    let e = error(
        "http:\n  auth: { resource: https://gw/mcp, issuer: https://idp, algorithms: [HS256] }\n",
    );
    assert_eq!(e.code, codes::INVALID_VALUE);
    let e = error(
        "http:\n  auth: { resource: https://gw/mcp, issuer: https://idp, toolsets: [{ claim: groups, toolset: a }] }\n",
    );
    assert_eq!(e.path, "http.auth.toolsets[0]");
    let e = error("http:\n  auth: { resource: gw/mcp, issuer: https://idp }\n");
    assert_eq!(e.path, "http.auth.resource");
}

#[test]
fn the_console_admins_and_client_of_http_auth() {
    let config = ok(concat!(
        "http:\n",
        "  console: true\n",
        "  auth:\n",
        "    resource: https://gw.example.com/mcp\n",
        "    issuer: https://idp.example.com\n",
        "    admins:\n",
        "      - { claim: groups, value: ops }\n",
        "      - { scope: \"moniker:admin\" }\n",
        "    console_client: { client_id: moniker-console, client_secret: \"${CONSOLE_SECRET}\" }\n",
    ));
    let auth = config.http.auth.clone().expect("http.auth");
    assert_eq!(
        auth.admins,
        [
            IdentityMatch::Claim {
                claim: "groups".to_owned(),
                value: "ops".to_owned()
            },
            IdentityMatch::Scope("moniker:admin".to_owned()),
        ]
    );
    let mut expanded = config.clone();
    expanded
        .expand_env(|name| (name == "CONSOLE_SECRET").then(|| "c0ns0le".to_owned()))
        .expect("expands");
    let client = expanded
        .http
        .auth
        .as_ref()
        .and_then(|a| a.console_client.clone())
        .expect("console_client");
    assert_eq!(client.client_id, "moniker-console");
    assert_eq!(client.client_secret.as_deref(), Some("c0ns0le"));
    assert!(!format!("{expanded:?}").contains("c0ns0le"));

    let base = "http:\n  auth: { resource: https://gw/mcp, issuer: https://idp, ";
    let e = error(&format!("{base}admins: [{{ claim: groups }}] }}\n"));
    assert_eq!(e.path, "http.auth.admins[0]");
    let e = error(&format!("{base}admins: [{{ scope: a, toolset: b }}] }}\n"));
    assert_eq!(
        e.path, "http.auth.admins[0].toolset",
        "an admin has no toolset"
    );
    let e = error(&format!(
        "{base}console_client: {{ client_secret: x }} }}\n"
    ));
    assert_eq!(e.code, codes::MISSING_KEY);
}

#[test]
fn a_remote_server_forwards_what_its_config_names() {
    let config = ok(concat!(
        "servers:\n",
        "  crm:\n",
        "    url: https://crm.internal/mcp\n",
        "    headers: { X-Static: a }\n",
        "    forward:\n",
        "      X-User-Id: { claim: sub }\n",
        "      X-Tenant: { header: X-Tenant }\n",
        "      Authorization: { access_token: true }\n",
    ));
    let Transport::Http { forward, .. } = &config.servers[&id("crm")].transport else {
        panic!("http");
    };
    assert_eq!(forward["X-User-Id"], moniker_config_forward("claim", "sub"));
    assert_eq!(
        forward["X-Tenant"],
        moniker_config_forward("header", "X-Tenant")
    );
    assert_eq!(forward["Authorization"], crate::Forward::AccessToken);
    for (bad, path) in [
        ("Host: { claim: sub }", "servers.crm.forward.Host"),
        (
            "Mcp-Session-Id: { claim: sub }",
            "servers.crm.forward.Mcp-Session-Id",
        ),
        ("X-Static: { claim: sub }", "servers.crm.forward.X-Static"),
        ("X-A: { claim: sub, header: b }", "servers.crm.forward.X-A"),
        ("X-A: { token: x }", "servers.crm.forward.X-A.token"),
    ] {
        let e = error(&format!(
            "servers:\n  crm:\n    url: https://crm.internal/mcp\n    headers: {{ X-Static: a }}\n    forward:\n      {bad}\n"
        ));
        assert_eq!(e.path, path, "{bad}: {e:?}");
    }
    let e = error(
        "servers:\n  s:\n    url: https://x/mcp\n    auth: { grant: client_credentials, client_id: a, client_secret: b }\n    forward: { Authorization: { access_token: true } }\n",
    );
    assert_eq!(e.path, "servers.s.forward.Authorization", "{e:?}");
    let e = error("servers:\n  s:\n    command: x\n    forward: { X-A: { claim: sub } }\n");
    assert!(e.message.contains("forward"), "{e:?}");
}

#[test]
fn token_exchange_is_read_and_checked() {
    let http_auth = "http:\n  auth: { resource: https://gw/mcp, issuer: https://idp.example }\n";
    let config = ok(&format!(
        "servers:\n  s:\n    url: https://x/mcp\n    auth:\n      client_id: m\n      client_secret: k\n      exchange: {{ audience: github, actor: true, cache: 30s }}\n{http_auth}"
    ));
    let crate::Transport::Http { auth, .. } = &config.servers["s"].transport else {
        panic!("an HTTP server");
    };
    let exchange = auth.exchange.as_ref().expect("an exchange");
    assert_eq!(exchange.audience.as_deref(), Some("github"));
    assert!(exchange.actor && exchange.resource.is_none());
    assert_eq!(exchange.cache, std::time::Duration::from_secs(30));
    assert_eq!(
        auth.issuer.as_deref(),
        Some("https://idp.example"),
        "the callers' issuer, by default"
    );
    let config = ok(&format!(
        "servers:\n  s:\n    url: https://x/mcp\n    auth: {{ client_id: m, private_key: k.pem, issuer: https://other, exchange: {{}} }}\n{http_auth}"
    ));
    let crate::Transport::Http { auth, .. } = &config.servers["s"].transport else {
        panic!("an HTTP server");
    };
    assert_eq!(auth.issuer.as_deref(), Some("https://other"));
    assert_eq!(
        auth.exchange.as_ref().unwrap().cache,
        crate::Exchange::CACHE
    );

    for (bad, path, said) in [
        (
            "auth: { client_id: m, client_secret: k, exchange: {} }",
            "servers.s.auth.exchange",
            "needs the identity provider",
        ),
        (
            "auth: { issuer: https://i, exchange: {} }",
            "servers.s.auth",
            "needs `client_id`",
        ),
        (
            "headers: { authorization: x }\n    auth: { client_id: m, client_secret: k, issuer: https://i, exchange: {} }",
            "servers.s.headers",
            "each caller's",
        ),
        (
            "auth: { client_id: m, client_secret: k, issuer: https://i, exchange: { actors: true } }",
            "servers.s.auth.exchange.actors",
            "actors",
        ),
    ] {
        let e = error(&format!(
            "servers:\n  s:\n    url: https://x/mcp\n    {bad}\n"
        ));
        assert_eq!(e.path, path, "{bad}: {e:?}");
        assert!(e.message.contains(said), "{bad}: {e:?}");
    }
}

#[test]
fn a_sign_in_per_person_needs_the_callers_identity() {
    let config = ok(
        "servers:\n  s:\n    url: https://x/mcp\n    auth: { per_person: true }\nhttp:\n  auth: { resource: https://gw/mcp, issuer: https://idp }\n",
    );
    let crate::Transport::Http { auth, .. } = &config.servers["s"].transport else {
        panic!("an HTTP server");
    };
    assert!(auth.per_person && auth.exchange.is_none());
    let e = error("servers:\n  s:\n    url: https://x/mcp\n    auth: { per_person: true }\n");
    assert_eq!(e.path, "servers.s.auth.per_person", "{e:?}");
    let e = error(
        "servers:\n  s:\n    url: https://x/mcp\n    auth: { per_person: true, client_id: a, client_secret: b, exchange: {} }\nhttp:\n  auth: { resource: https://gw/mcp, issuer: https://idp }\n",
    );
    assert!(e.message.contains("choose one"), "{e:?}");
}

#[test]
fn a_stdio_server_runs_once_for_each_person() {
    let http = "http:\n  auth: { resource: https://gw/mcp, issuer: https://idp }\n";
    let config = ok(&format!(
        "servers:\n  s:\n    command: x\n    per_person: {{ secrets: [GITHUB_TOKEN], instances: 4, idle: 30s }}\n{http}"
    ));
    let each = config.servers["s"].per_person.as_ref().expect("per person");
    assert_eq!(each.secrets, ["GITHUB_TOKEN"]);
    assert_eq!(
        (each.instances, each.idle),
        (4, std::time::Duration::from_secs(30))
    );
    let config = ok(&format!(
        "servers:\n  s:\n    command: x\n    per_person: true\n{http}"
    ));
    assert_eq!(
        config.servers["s"].per_person,
        Some(crate::PerPerson::default())
    );
    for (bad, path, said) in [
        (
            "command: x\n    per_person: true",
            "servers.s.per_person",
            "needs `http.auth`",
        ),
        (
            "command: x\n    env: { TOKEN: t }\n    per_person: { secrets: [TOKEN] }",
            "servers.s.per_person.secrets",
            "in `env` too",
        ),
        (
            "command: x\n    per_person: { secrets: [\"A-B\"] }",
            "servers.s.per_person.secrets",
            "not a variable name",
        ),
        (
            "url: https://x/mcp\n    per_person: true",
            "servers.s.per_person",
            "per_person",
        ),
        (
            "command: x\n    per_person: { secrets: [LD_PRELOAD] }",
            "servers.s.per_person.secrets",
            "choose what the server runs",
        ),
        (
            "command: x\n    per_person: { secrets: [NODE_OPTIONS] }",
            "servers.s.per_person.secrets",
            "choose what the server runs",
        ),
    ] {
        let with_http = if said.contains("http.auth") { "" } else { http };
        let e = error(&format!("servers:\n  s:\n    {bad}\n{with_http}"));
        assert_eq!(e.path, path, "{bad}: {e:?}");
        assert!(e.message.contains(said), "{bad}: {e:?}");
    }
}

fn moniker_config_forward(kind: &str, name: &str) -> crate::Forward {
    match kind {
        "claim" => crate::Forward::Claim(name.to_owned()),
        _ => crate::Forward::Header(name.to_owned()),
    }
}

#[test]
fn deprecation_schedules_are_read_and_checked() {
    let config = ok(
        "tools:\n  t:\n    aliases:\n      - { name: old, deprecated: { since: 2026-11-01, remove_after: \"2027-05-01\", use: t } }\nactions:\n  project:\n    tools: { create: a, list: b }\n    legacy: { keep: listed, deprecated: { since: 2026-11-01, remove_after: 2027-05-01 } }\n",
    );
    let alias = &config.rules.tools["t"].aliases[0];
    let d = alias.deprecated.as_ref().expect("a schedule");
    assert_eq!(d.since.to_string(), "2026-11-01");
    assert_eq!(d.remove_after.to_string(), "2027-05-01");
    assert_eq!(d.use_instead.as_deref(), Some("t"));
    let action = &config.rules.actions["project"];
    assert_eq!(action.legacy, moniker_surface::Legacy::Listed);
    assert!(action.legacy_deprecated.is_some());
    assert_eq!(
        ok("actions:\n  p:\n    tools: { create: a }\n    legacy: off\n")
            .rules
            .actions["p"]
            .legacy,
        moniker_surface::Legacy::Off
    );

    let e = error(
        "tools:\n  t:\n    aliases: [{ name: old, deprecated: { since: 2026-13-01, remove_after: 2027-05-01 } }]\n",
    );
    assert_eq!(e.path, "tools.t.aliases[0].deprecated.since");
    assert!(e.message.contains("is not a date"), "{}", e.message);
    let e = error(
        "tools:\n  t:\n    aliases: [{ name: old, deprecated: { since: 2027-06-01, remove_after: 2027-05-01 } }]\n",
    );
    assert!(e.message.contains("is before `since`"), "{}", e.message);
    let e =
        error("tools:\n  t:\n    aliases: [{ name: old, deprecated: { since: 2026-11-01 } }]\n");
    assert!(e.message.contains("has no `remove_after`"), "{}", e.message);
    // A date that is no scalar is said, not dropped with the schedule.
    let e = error(
        "tools:\n  t:\n    aliases: [{ name: old, deprecated: { since: { a: 1 }, remove_after: 2027-05-01 } }]\n",
    );
    assert_eq!(e.path, "tools.t.aliases[0].deprecated.since");
    let e = error("actions:\n  p:\n    tools: { create: a }\n    legacy: { keep: gone }\n");
    assert!(e.message.contains("is not a legacy mode"), "{}", e.message);
}

#[test]
fn discovery_is_a_mode_or_a_map_at_the_top_and_in_a_toolset() {
    use moniker_surface::discovery::Mode;
    let config = ok("discovery: search\n");
    assert_eq!(config.rules.discovery.mode, Mode::Search);
    let config = ok(
        "discovery:\n  mode: hints\n  pin: [read_file]\n  pin_tags: core or git\ntoolsets:\n  dev:\n    tags: [git]\n    discovery: { mode: search, pin: [git_status] }\n",
    );
    assert_eq!(config.rules.discovery.mode, Mode::Hints);
    assert_eq!(config.rules.discovery.pin, strings(&["read_file"]));
    assert_eq!(config.rules.discovery.pin_tags, Some(expr("core or git")));
    let dev = config.rules.toolsets.sets["dev"].discovery.clone().unwrap();
    assert_eq!(dev.mode, Mode::Search);
    assert_eq!(dev.pin, strings(&["git_status"]));
    assert_eq!(ok("").rules.discovery.mode, Mode::List);

    let e = error("discovery: serch\n");
    assert_eq!(e.code, codes::INVALID_VALUE);
    assert_eq!(e.path, "discovery");
    assert!(e.help.as_deref().unwrap().contains("`search`"));
    let e = error("discovery: { mode: search, pinned: [a] }\n");
    assert_eq!(e.code, codes::UNKNOWN_KEY);
    assert!(e.help.as_deref().unwrap().contains("pin"), "{e:?}");
    let e = error("discovery: { pin: [\"not a name!\"] }\n");
    assert_eq!(e.path, "discovery.pin[0]");
}

#[test]
fn a_server_may_speak_2026_07_28() {
    let config = ok(
        "servers:\n  new: { url: \"http://127.0.0.1:9/mcp\", protocol: 2026-07-28 }\n  old: { command: x, protocol: \"2025-06-18\" }\n  plain: { command: x }\n",
    );
    assert!(config.servers[&id("new")].modern);
    assert!(!config.servers[&id("old")].modern);
    assert!(!config.servers[&id("plain")].modern);
    let e = error("servers:\n  s: { command: x, protocol: \"2027-01-01\" }\n");
    assert_eq!(e.code, codes::INVALID_VALUE);
    assert_eq!(e.path, "servers.s.protocol");
}

/// `discovery.model` is the gateway's: read at the top, refused in a toolset.
#[test]
fn a_search_model_is_set_at_the_top_only() {
    let config = crate::parse(
        "moniker.yaml",
        "discovery:\n  mode: search\n  model: tables/big.bin\n",
    )
    .expect("valid");
    assert_eq!(config.search_model.as_deref(), Some("tables/big.bin"));
    assert!(
        crate::parse("moniker.yaml", "discovery: search\n")
            .expect("valid")
            .search_model
            .is_none()
    );
    let report = crate::parse(
        "moniker.yaml",
        "toolsets:\n  dev:\n    tools: [a]\n    discovery: { mode: search, model: x.bin }\n",
    )
    .expect_err("a toolset's model");
    assert!(
        format!("{report:?}").contains("search model of its own"),
        "{report:?}"
    );
    // `learn` likewise: on unless the top says otherwise.
    assert!(
        crate::parse("moniker.yaml", "discovery: search\n")
            .expect("valid")
            .search_learns
    );
    let off = crate::parse(
        "moniker.yaml",
        "discovery: { mode: search, learn: false }\n",
    );
    assert!(!off.expect("valid").search_learns);
    let report = crate::parse(
        "moniker.yaml",
        "toolsets:\n  dev:\n    tools: [a]\n    discovery: { mode: search, learn: false }\n",
    )
    .expect_err("a toolset's learning");
    assert!(
        format!("{report:?}").contains("learn apart from the gateway"),
        "{report:?}"
    );
}

#[test]
fn parameter_rules_of_a_tool() {
    let mut config = ok(concat!(
        "tools:\n",
        "  search_repositories:\n",
        "    params:\n",
        "      repository: { rename: repo, aliases: [repository_name], description: owner/name }\n",
        "      max_results: { default: 10 }\n",
        "      tenant: { fixed: \"${TENANT}\" }\n",
        "      scope: { fixed: { org: \"${ORG:-acme}\", ids: [1, 2.5, true, null] } }\n",
        "      debug: { hidden: true }\n",
    ));
    config
        .expand_env(|name| (name == "TENANT").then(|| "t-41".to_owned()))
        .expect("set");
    let params = &config.rules.tools["search_repositories"].params;
    let repo = &params["repository"];
    assert_eq!(repo.rename.as_deref(), Some("repo"));
    assert_eq!(repo.aliases, ["repository_name"]);
    assert_eq!(repo.description.as_deref(), Some("owner/name"));
    assert_eq!(params["max_results"].default, Some(serde_json::json!(10)));
    let fixed = |name: &str| params[name].fixed.as_ref().map(|f| f.0.clone());
    assert_eq!(fixed("tenant"), Some(serde_json::json!("t-41")));
    assert_eq!(
        fixed("scope"),
        Some(serde_json::json!({"org": "acme", "ids": [1, 2.5, true, null]}))
    );
    assert!(params["debug"].hidden);
    assert!(
        !format!("{:?}", config.rules).contains("t-41"),
        "Debug hides fixed values"
    );

    let report = ok("tools:\n  t:\n    params:\n      p: { fixed: \"${NOPE}\" }\n")
        .expand_env(|_| None)
        .expect_err("unset");
    assert_eq!(report.errors[0].path, "tools.t.params.p.fixed");
}

#[test]
fn a_fixed_parameter_stands_alone_and_prompts_have_no_parameter_rules() {
    let e = error("tools:\n  t:\n    params:\n      p: { fixed: 1, rename: q }\n");
    assert_eq!(e.path, "tools.t.params.p");
    assert!(
        e.message.contains("`rename` means nothing beside `fixed`"),
        "{}",
        e.message
    );
    let e = error("prompts:\n  t:\n    params:\n      p: { hidden: true }\n");
    assert_eq!(e.path, "prompts.t.params");
    let e = error("tools:\n  t:\n    params:\n      p: { renam: q }\n");
    assert!(e.message.contains("renam"), "{}", e.message);
}

#[test]
fn globs_in_override_keys_and_toolsets() {
    let config = ok(concat!(
        "servers:\n  github: { command: gh }\n",
        "tools:\n  \"write_*\": { hidden: true }\n  \"github/*_pr\": { tags: [review] }\n",
        "toolsets:\n  review: { tools: [\"*_pr\", get_file] }\n",
    ));
    assert!(config.rules.tools["write_*"].hidden);
    assert_eq!(config.rules.tools["github/*_pr"].tags.len(), 1);
    assert_eq!(
        config.rules.toolsets.sets["review"].tools,
        ["*_pr", "get_file"]
    );
    let e = error("toolsets:\n  r: { tools: [\"bad name*\"] }\n");
    assert_eq!(e.path, "toolsets.r.tools[0]");
    assert!(e.message.contains("glob `bad name*`"), "{}", e.message);
}

#[test]
fn a_toolset_has_parameter_rules_of_its_own() {
    let config = ok(concat!(
        "toolsets:\n  team:\n    tools: [search]\n",
        "    params:\n      search: { project: { fixed: acme }, limit: { default: 5 } }\n",
    ));
    let params = &config.rules.toolsets.sets["team"].params["search"];
    assert_eq!(params["limit"].default, Some(serde_json::json!(5)));
    assert!(params["project"].fixed.is_some());
    let e = error("toolsets:\n  team:\n    params:\n      search: { limit: { defalt: 5 } }\n");
    assert_eq!(e.path, "toolsets.team.params.search.limit.defalt");
}

/// `sandbox`: a stdio server's, `true`, `best-effort` or a map; a wrong value is said where it is.
#[test]
fn a_sandbox_is_read_in_each_of_its_shapes() {
    use crate::server::{Network, Sandbox};
    let config = ok(
        "servers:\n  a:\n    command: x\n    sandbox: true\n  b:\n    command: x\n    sandbox: best-effort\n  c:\n    command: x\n    sandbox: { read: [~/docs], write: [/srv/out], network: [443], processes: 8, open_files: 64, memory: 512 }\n  d:\n    command: x\n    sandbox: false\n",
    );
    let sandbox = |name: &str| config.servers[&id(name)].sandbox.clone();
    assert_eq!(sandbox("a"), Some(Sandbox::default()));
    assert!(sandbox("b").is_some_and(|s| s.best_effort));
    assert_eq!(
        sandbox("c"),
        Some(Sandbox {
            read: vec!["~/docs".to_owned()],
            write: vec!["/srv/out".to_owned()],
            network: Network::Ports(vec![443]),
            processes: Some(8),
            open_files: Some(64),
            memory_mb: Some(512),
            best_effort: false,
        })
    );
    assert_eq!(sandbox("d"), None);
    // `gateway.sandbox` is every stdio server's that says nothing; `false` is none.
    let defaulted = ok(
        "gateway: { sandbox: { processes: 9 } }\nservers:\n  a:\n    command: x\n  b:\n    command: x\n    sandbox: false\n  c:\n    command: x\n    sandbox: { network: on }\n  r:\n    url: https://r.example/mcp\n",
    );
    let sandbox = |name: &str| defaulted.servers[&id(name)].sandbox.clone();
    assert_eq!(sandbox("a").and_then(|s| s.processes), Some(9));
    assert_eq!(sandbox("b"), None);
    assert_eq!(
        sandbox("c").map(|s| (s.network, s.processes)),
        Some((Network::On, None))
    );
    assert_eq!(sandbox("r"), None);
    for (bad, path) in [
        ("sandbox: maybe", "servers.a.sandbox"),
        ("sandbox: { network: [0] }", "servers.a.sandbox.network[0]"),
        ("sandbox: { netwrk: off }", "servers.a.sandbox.netwrk"),
    ] {
        let report = crate::parse(
            "moniker.yaml",
            &format!("servers:\n  a:\n    command: x\n    {bad}\n"),
        )
        .expect_err(bad);
        assert!(format!("{report:?}").contains(path), "{bad}: {report:?}");
    }
    let remote = crate::parse(
        "moniker.yaml",
        "servers:\n  a:\n    url: https://x.example/mcp\n    sandbox: true\n",
    );
    assert!(remote.is_err(), "a remote server has no sandbox");
}

#[test]
fn a_field_is_read_at_its_own_path_only_when_it_is_there() {
    let root = crate::tree::parse("n: 3\nw: three\n")
        .expect("parses")
        .expect("a document");
    let mut cx = Cx::default();
    let p = [Seg::Key("top")];
    let slot = Slot {
        node: &root,
        key: None,
    };
    let fields = cx.fields(slot, &p, None, "a map");
    assert_eq!(cx.field(&p, &fields, "n", Cx::count), Some(Some(3)));
    let at = cx.field(&p, &fields, "n", |_, at, _| path(at));
    assert_eq!(at.as_deref(), Some("top.n"));
    let absent = cx.field(&p, &fields, "gone", |_, _, _| panic!("read"));
    assert_eq!(absent, None::<()>);
    assert!(cx.errors.is_empty(), "{:?}", cx.errors);
    // A value that does not read is the reader's `None`, reported by the reader at its path.
    assert_eq!(cx.field(&p, &fields, "w", Cx::count), Some(None));
    let paths: Vec<(&str, &str)> = cx
        .errors
        .iter()
        .map(|e| (e.code, e.path.as_str()))
        .collect();
    assert_eq!(paths, [(codes::INVALID_TYPE, "top.w")]);
}
