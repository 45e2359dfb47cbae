//! The public API end to end: real config files in, a config or a report out, never a panic.

use moniker_config::{Config, ConfigReport, Transport, codes, parse};
use proptest::prelude::*;

/// A config using every section and most fields.
const FULL: &str = r#"servers:
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
  bridge:
    command: bridge
    prefix: br
naming: { strip_prefixes: [local_bridge_], split: "__", separator: "_", profile: portable }
server_tags: { github-custom: [git, github, version-control] }
tools:
  "bridge/local_bridge_github_custom__get_pr_info": { name: get_pr_info, tags: [pull-request], aliases: [pr_info] }
  discover_sub_goals:
    aliases: [discover_goals, { name: dg, hidden: true }]
    description: "text"
    hidden: true
prompts:
  github/review: { name: review_pr }
gateway: { call_timeout: 60, start_timeout: 30s, restart: { initial_delay: 500ms, max_delay: 30s, max_attempts: 10 } }
actions:
  project:
    description: Manage projects.
    tools: { create: create_project, list: list_projects, set_active: set_active_project, delete: delete_project }
    legacy: hidden
    aliases: [proj, { name: p, hidden: true }]
    tags: [projects]
  checkpoint: { tools: { save: checkpoint_save, load: checkpoint_load }, legacy: off }
toolsets:
  manage: true
  store: "${DATA:-~/.local/share}/moniker-toolsets.json"
  base: { tools: [web_search], tags: git and not deprecated }
  review:
    description: Code review.
    tools: [get_pr_info, list_prs]
    prompts: [review_pr]
    tags: [git, github]
    include: [base]
    aliases: { get_pr_info: pr }
"#;

fn report(text: &str) -> ConfigReport {
    match parse("moniker.yaml", text) {
        Ok(config) => panic!("expected errors, got {config:#?}"),
        Err(report) => report,
    }
}

#[test]
fn a_full_config_parses_and_expands() {
    let mut config = parse("moniker.yaml", FULL).expect("valid");
    assert_eq!(config.servers.len(), 3);
    assert_eq!(config.rules.tools.len(), 2);
    assert_eq!(config.rules.prompts.len(), 1);
    assert_eq!(config.rules.actions.len(), 2);
    assert_eq!(config.rules.actions["project"].tools.len(), 4);
    assert_eq!(config.rules.toolsets.sets.len(), 2);
    assert!(config.toolsets.manage);
    config
        .expand_env(|name| Some(format!("<{name}>")))
        .expect("all set");
    let Transport::Http { headers, .. } = &config.servers["docs"].transport else {
        panic!("http")
    };
    assert_eq!(headers["Authorization"], "Bearer <DOCS_TOKEN>");
    assert_eq!(
        config.toolsets.store.as_deref(),
        Some("<DATA>/moniker-toolsets.json")
    );
    // The override alias path the naming core would report, shown in the file.
    let span = config
        .source
        .span(r#"tools."bridge/local_bridge_github_custom__get_pr_info".aliases[0]"#)
        .expect("span");
    assert_eq!((span.line, span.column), (20, 106));
    assert_eq!(&FULL[span.offset..span.offset + span.len], "pr_info");
}

#[test]
fn a_claude_desktop_file_parses() {
    let config = parse(
        "claude_desktop_config.json",
        r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y","@modelcontextprotocol/server-filesystem","/tmp"]}}}"#,
    )
    .expect("valid");
    let Transport::Stdio { command, args, .. } = &config.servers["fs"].transport else {
        panic!("stdio")
    };
    assert_eq!(command, "npx");
    assert_eq!(args.len(), 3);
}

#[test]
fn debug_output_holds_no_secret() {
    let config: Config = parse(
        "moniker.yaml",
        "servers:\n  a:\n    command: x\n    env: { API_KEY: sk-live-123 }\n  b:\n    url: https://h/mcp\n    headers: { Authorization: Bearer tok-456 }\n",
    )
    .expect("valid");
    for shown in [format!("{config:?}"), format!("{config:#?}")] {
        assert!(!shown.contains("sk-live-123"), "{shown}");
        assert!(!shown.contains("tok-456"), "{shown}");
        assert!(
            shown.contains("API_KEY") && shown.contains("Authorization"),
            "{shown}"
        );
    }
}

#[test]
fn a_report_shows_every_error_in_the_file() {
    let tab = report(
        r#"servers:
  github:
    comand: npx
    tags: [Git, pull request]
  docs:
    url: http://127.0.0.1:9000/mcp
    args: [--verbose]
naming: { profile: portabel }
tools:
  githb/search: { name: web search, aliases: [{ hidden: true }] }
gateway:
	call_timeout: 5
"#,
    );
    // The tab on the last line is a syntax error: only it is reported.
    assert_eq!(tab.errors.len(), 1);
    assert_eq!(tab.errors[0].code, codes::SYNTAX);

    let text = r#"servers:
  github:
    comand: npx
    tags: [Git, pull request]
  docs:
    url: http://127.0.0.1:9000/mcp
    args: [--verbose]
naming: { profile: portabel }
tools:
  githb/search: { name: web search, aliases: [{ hidden: true }] }
gateway: { call_timeout: soon, restart: { max_attempts: -1 } }
actions: { project: { tools: { Create: create_project, new: create_project }, legacy: hide } }
toolsets:
  review: { tols: [x], include: [revew], tags: "git and (github", aliases: { get_pr_info: PR } }
  loop: { include: [loop] }
"#;
    insta::assert_snapshot!(report(text).to_string());
}

#[test]
fn a_syntax_error_report() {
    insta::assert_snapshot!(report("servers:\n  a: { command: x\n  b: 1\n").to_string());
}

/// Text that looks like YAML, to reach past the scanner more often than random text does.
fn yamlish() -> impl Strategy<Value = String> {
    proptest::string::string_regex(
        r#"([ \n\t:{}\[\],\-"'#&*!|>?%@`~.0-9]|servers|mcpServers|command|url|tools|aliases|name|tags|gateway|restart|actions|legacy|toolsets|include|manage|store| and | or |not |\$\{X\}){0,120}"#,
    )
    .expect("regex")
}

/// `FULL` with lines deleted, duplicated or swapped.
fn mutated() -> impl Strategy<Value = String> {
    let lines: Vec<String> = FULL.lines().map(str::to_owned).collect();
    let n = lines.len();
    proptest::collection::vec((0..3u8, 0..n, 0..n), 1..8).prop_map(move |edits| {
        let mut lines = lines.clone();
        for (op, i, j) in edits {
            if lines.is_empty() {
                break;
            }
            let (i, j) = (i % lines.len(), j % lines.len());
            match op {
                0 => {
                    lines.remove(i);
                }
                1 => {
                    let line = lines[i].clone();
                    lines.insert(j, line);
                }
                _ => lines.swap(i, j),
            }
        }
        lines.join("\n")
    })
}

/// Whatever the text: a config or a report whose every span is inside the text, and both can
/// be printed and expanded.
fn check(text: &str) {
    match parse("fuzz.yaml", text) {
        Ok(mut config) => {
            let _ = format!("{config:?}");
            if let Err(report) = config.expand_env(|name| (name.len() % 2 == 0).then(String::new)) {
                check_report(text, &report);
            }
        }
        Err(report) => {
            assert!(!report.errors.is_empty());
            check_report(text, &report);
        }
    }
}

fn check_report(text: &str, report: &ConfigReport) {
    for error in &report.errors {
        if let Some(span) = error.span {
            assert!(span.offset + span.len <= text.len(), "{error:?}");
            assert!(text.is_char_boundary(span.offset), "{error:?}");
            assert!(text.is_char_boundary(span.offset + span.len), "{error:?}");
            assert!(span.line >= 1 && span.column >= 1, "{error:?}");
        }
        assert!(error.code.starts_with("config::"));
    }
    let _ = report.to_string();
}

// 256 cases each by default; `PROPTEST_CASES=100000` for a longer hunt.
proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        check(&text);
    }

    #[test]
    fn yaml_like_text_never_panics(text in yamlish()) {
        check(&text);
    }

    #[test]
    fn mutated_configs_never_panic(text in mutated()) {
        check(&text);
    }
}
