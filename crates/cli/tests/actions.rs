//! Action tools end to end: the ctx-sys migration of seed 004 (`examples/ctxsys.yaml`) through
//! a real `moniker serve` in front of the fixture serving `fixtures/ctxsys.json`.

use std::path::Path;

use moniker_fixture::{Peer, fixture_file, fixture_server, ran_with, repo_root};
use serde_json::{Map, Value, json};

/// The example's rules, in front of the fixture.
fn serve_ctxsys(legacy: &str) -> Peer {
    let example =
        std::fs::read_to_string(repo_root().join("examples/ctxsys.yaml")).expect("example");
    let rules = &example[example.find("actions:").expect("an actions section")..];
    let rules = if legacy.is_empty() {
        rules.to_owned()
    } else {
        rules.replace(
            "    tools: {",
            &format!("    legacy: {legacy}\n    tools: {{"),
        )
    };
    let file = fixture_file("ctxsys.json").display().to_string();
    moniker_fixture::serve(
        Path::new(env!("CARGO_BIN_EXE_moniker")),
        &[fixture_server("ctxsys", &[&file])],
        &rules,
    )
}

/// The seed's migration guide: old tool, new tool, action.
const GUIDE: [(&str, &str, &str); 30] = [
    ("create_project", "project", "create"),
    ("list_projects", "project", "list"),
    ("set_active_project", "project", "set_active"),
    ("delete_project", "project", "delete"),
    ("add_entity", "entity", "add"),
    ("get_entity", "entity", "get"),
    ("search_entities", "entity", "search"),
    ("index_codebase", "index", "codebase"),
    ("sync_from_git", "index", "sync"),
    ("index_document", "index", "document"),
    ("get_index_status", "index", "status"),
    ("store_message", "message", "store"),
    ("get_history", "message", "history"),
    ("summarize_session", "session", "summarize"),
    ("search_decisions", "decision", "search"),
    ("list_sessions", "session", "list"),
    ("link_entities", "graph", "link"),
    ("query_graph", "graph", "query"),
    ("get_graph_stats", "graph", "stats"),
    ("context_query", "context_query", ""),
    ("checkpoint_save", "checkpoint", "save"),
    ("checkpoint_load", "checkpoint", "load"),
    ("checkpoint_list", "checkpoint", "list"),
    ("memory_spill", "memory", "spill"),
    ("memory_recall", "memory", "recall"),
    ("memory_status", "memory", "status"),
    ("reflection_store", "reflection", "store"),
    ("reflection_query", "reflection", "query"),
    ("hooks_install", "hooks", "install"),
    ("hooks_impact_report", "hooks", "impact_report"),
];

/// The origin tools' schemas, by name.
fn origin_schemas() -> Map<String, Value> {
    let text = std::fs::read_to_string(fixture_file("ctxsys.json")).expect("fixture");
    let v: Value = serde_json::from_str(&text).expect("json");
    v["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| {
            (
                t["name"].as_str().expect("name").to_owned(),
                t["inputSchema"].clone(),
            )
        })
        .collect()
}

/// A value of the schema's type.
fn sample(schema: &Value) -> Value {
    match schema["type"].as_str() {
        Some("integer") | Some("number") => json!(1),
        Some("boolean") => json!(true),
        Some("array") => json!([]),
        Some("object") => json!({}),
        _ => match schema["enum"].as_array() {
            Some(values) => values[0].clone(),
            None => json!("x"),
        },
    }
}

/// Arguments that satisfy the tool's required parameters.
fn required_args(schema: &Value) -> Map<String, Value> {
    let mut args = Map::new();
    for name in schema["required"].as_array().into_iter().flatten() {
        let name = name.as_str().expect("name");
        args.insert(name.to_owned(), sample(&schema["properties"][name]));
    }
    args
}

#[test]
fn thirty_tools_become_twelve() {
    let mut peer = serve_ctxsys("");
    let tools = peer.result("tools/list", json!({}))["tools"]
        .as_array()
        .expect("tools")
        .clone();
    let mut names: Vec<&str> = tools
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "checkpoint",
            "context_query",
            "decision",
            "entity",
            "graph",
            "hooks",
            "index",
            "memory",
            "message",
            "project",
            "reflection",
            "session"
        ]
    );
    let project = tools
        .iter()
        .find(|t| t["name"] == "project")
        .expect("project");
    let schema = &project["inputSchema"];
    assert_eq!(schema["required"], json!(["action"]));
    assert_eq!(
        schema["properties"]["action"]["enum"],
        json!(["create", "list", "set_active", "delete"])
    );
    let name = schema["properties"]["name"]["description"]
        .as_str()
        .expect("description");
    assert!(
        name.ends_with("(required for: create, set_active, delete)"),
        "{name}"
    );
    let description = project["description"].as_str().expect("description");
    assert!(description.starts_with("Manage projects."), "{description}");
    for action in ["create", "list", "set_active", "delete"] {
        assert!(
            description.contains(&format!("- {action}")),
            "{description}"
        );
    }
}

#[test]
fn every_row_of_the_migration_guide_works_by_action_and_by_old_name() {
    let mut peer = serve_ctxsys("");
    let schemas = origin_schemas();
    for (old, tool, action) in GUIDE {
        let args = required_args(&schemas[old]);
        let by_old = peer.call_tool(old, Value::Object(args.clone()));
        assert_eq!(
            ran_with(&by_old),
            (old.to_owned(), Value::Object(args.clone())),
            "{old}: {by_old}"
        );
        if action.is_empty() {
            continue;
        }
        let mut with_action = args.clone();
        with_action.insert("action".into(), json!(action));
        let by_action = peer.call_tool(tool, Value::Object(with_action));
        assert_eq!(
            ran_with(&by_action),
            (old.to_owned(), Value::Object(args)),
            "{tool} {action}: {by_action}"
        );
    }
    peer.stderr_with(|l| l.contains("Resolved legacy name to action tool member"));
}

fn error_text(response: &Value) -> String {
    assert_eq!(response["result"]["isError"], true, "{response}");
    response["result"]["content"][0]["text"]
        .as_str()
        .expect("text")
        .to_owned()
}

#[test]
fn bad_actions_and_missing_parameters_are_tool_errors_naming_the_choices() {
    let mut peer = serve_ctxsys("");
    let r = peer.call_tool("project", json!({"action": "archive"}));
    assert_eq!(
        error_text(&r),
        "Unknown action: archive. Valid actions: create, list, set_active, delete"
    );
    let r = peer.call_tool("project", json!({"name": "x"}));
    assert_eq!(
        error_text(&r),
        "Missing required parameter: action. Valid actions: create, list, set_active, delete"
    );
    let r = peer.call_tool("project", json!({"action": "create"}));
    assert_eq!(
        error_text(&r),
        "Missing required parameter(s) for action \"create\": name, path"
    );
    let r = peer.call_tool("project", json!({"action": "create", "name": "n"}));
    assert_eq!(
        error_text(&r),
        "Missing required parameter(s) for action \"create\": path"
    );
}

#[test]
fn the_action_and_undeclared_arguments_are_dropped_and_values_keep_their_bytes() {
    let mut peer = serve_ctxsys("");
    let id = peer.send_request("tools/call", json!({"name": "project", "arguments": {}}));
    let _ = peer.response_line(&id);
    // Raw text, so that 1.50 stays 1.50.
    peer.send_raw(r#"{"jsonrpc":"2.0","id":"raw","method":"tools/call","params":{"name":"project","arguments":{"action":"create","name":"n","path":"/p","description":{"depth":1.50},"junk":true}}}"#);
    let line = peer.response_line(&json!("raw"));
    let response: Value = serde_json::from_str(&line).expect("json");
    let text = response["result"]["content"][0]["text"]
        .as_str()
        .expect("text");
    assert!(
        text.contains(r#""arguments":{"name":"n","path":"/p","description":{"depth":1.50}}"#),
        "{text}"
    );
}

#[test]
fn legacy_listed_marks_old_names_deprecated_and_off_removes_them() {
    let mut peer = serve_ctxsys("listed");
    let tools = peer.result("tools/list", json!({}))["tools"]
        .as_array()
        .expect("tools")
        .clone();
    // 11 action tools, `context_query`, and the 29 members under their old names.
    assert_eq!(tools.len(), 41);
    let old = tools
        .iter()
        .find(|t| t["name"] == "create_project")
        .expect("listed");
    assert!(
        old["description"]
            .as_str()
            .expect("d")
            .starts_with("[Deprecated — use \"project\" with action \"create\"]"),
        "{old}"
    );
    drop(peer);

    let mut peer = serve_ctxsys("off");
    let r = peer.call_tool("create_project", json!({"name": "n", "path": "/p"}));
    assert_eq!(r["error"]["code"], -32004, "{r}");
    assert_eq!(
        ran_with(&peer.call_tool("project", json!({"action": "list"}))).0,
        "list_projects"
    );
}

#[test]
fn stats_audits_the_tokens_of_each_tool_and_the_text_they_repeat() {
    let example =
        std::fs::read_to_string(repo_root().join("examples/ctxsys.yaml")).expect("example");
    let rules = &example[example.find("actions:").expect("an actions section")..];
    let file = fixture_file("ctxsys.json").display().to_string();
    let config = moniker_fixture::scratch().join("moniker.yaml");
    std::fs::write(
        &config,
        format!("servers:\n{}{rules}", fixture_server("ctxsys", &[&file])),
    )
    .expect("config");
    let mut command = crate::check::moniker(&["stats", "--json", "-c"]);
    command.arg(&config);
    let (code, stdout, stderr) = crate::check::run(&mut command);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("JSON");
    let tools = report["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 12, "{report}");
    for tool in tools {
        let parts = ["name_tokens", "description_tokens", "schema_tokens"]
            .map(|k| tool[k].as_u64().expect("a count"));
        assert!(
            tool["total_tokens"].as_u64().expect("total") >= parts.iter().sum::<u64>(),
            "{tool}"
        );
    }
    let repeated = report["repeated"].as_array().expect("repeated");
    assert!(
        repeated
            .iter()
            .any(|r| r["text"] == "Maximum number of results" && r["tools"] == 8),
        "{report}"
    );
    let savings = &report["savings"];
    // Search mode lists moniker's two tools (no pins): a fraction of the listing.
    assert!(
        savings["search_mode"].as_u64().expect("search_mode") * 4
            < savings["listing_tokens"].as_u64().expect("listing"),
        "{savings}"
    );
    // Without action tools a one-server listing is the server's own entries and the
    // listing's `_meta` naming the server once (about ten tokens), nothing per entry.
    let own = savings["servers_own_listings"].as_u64().expect("own");
    let without = savings["without_action_tools"].as_u64().expect("without");
    assert!((own..own + 20).contains(&without), "{savings}");
    // The action tools say what their members did (every parameter and its description,
    // which action each is for) in a few tokens more or less than the members themselves.
    let listing = savings["listing_tokens"].as_u64().expect("listing");
    assert!(listing.abs_diff(without) * 20 < without, "{savings}");
    assert!(
        savings["names_only_for_clients_that_defer_loading"].as_u64()
            < savings["listing_tokens"].as_u64(),
        "{savings}"
    );
}
