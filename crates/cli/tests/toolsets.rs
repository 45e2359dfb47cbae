//! Toolsets end to end: static ones from the config, run-time ones built, equipped and
//! persisted through moniker's management tools, over a real `moniker serve`.

use std::path::{Path, PathBuf};
use std::process::Command;

use moniker_fixture::{Peer, fixture_bin, fixture_file, fixture_server, ran_with, scratch};
use serde_json::{Value, json};

fn moniker() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_moniker"))
}

fn contextgraph() -> String {
    fixture_file("contextgraph.json").display().to_string()
}

/// A config file: the ContextGraph fixture (35 tools, tagged by the override below) and `rest`.
fn config(rest: &str) -> PathBuf {
    let path = scratch().join("moniker.yaml");
    let text = format!(
        "servers:\n{}tools:\n  discover_sub_goals: {{ aliases: [discover_goals], tags: [goals] }}\n  trigger_consolidation: {{ aliases: [consolidate_memories] }}\n  get_ego_state: {{ tags: [goals] }}\n{rest}",
        fixture_server("contextgraph", &[&contextgraph()])
    );
    std::fs::write(&path, text).expect("config");
    path
}

fn serve(config: &Path, args: &[&str]) -> Peer {
    let mut peer = Peer::spawn(
        Command::new(moniker())
            .args(["serve", "--standalone", "-c"])
            .arg(config)
            .args(args)
            .env("RUST_LOG", "moniker=debug,moniker_gateway=debug")
            // The default store is under the data dir: never the user's own in tests.
            .env("XDG_DATA_HOME", scratch()),
    );
    peer.initialize();
    peer
}

fn names(peer: &mut Peer) -> Vec<String> {
    let tools = peer.result("tools/list", json!({}))["tools"].clone();
    tools
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_owned())
        .collect()
}

fn text(response: &Value) -> String {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {response}"))
        .to_owned()
}

const REVIEW: &str = "toolsets:\n  review:\n    tools: [store_memory, discover_goals]\n    tags: goals\n    aliases: { store_memory: remember }\n";

#[test]
fn a_static_toolset_is_what_the_session_sees_and_may_call() {
    let cfg = config(REVIEW);
    let mut peer = serve(&cfg, &["--toolset", "review"]);
    assert_eq!(
        names(&mut peer),
        ["discover_sub_goals", "get_ego_state", "store_memory"]
    );
    let tools = peer.result("tools/list", json!({}))["tools"].clone();
    let store = tools
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "store_memory")
        .expect("listed")
        .clone();
    assert_eq!(store["aliases"], json!(["remember"]));
    // By the toolset's alias, by name, by the config's alias.
    assert_eq!(
        ran_with(&peer.call_tool("remember", json!({"content": "x"}))).0,
        "store_memory"
    );
    assert_eq!(
        ran_with(&peer.call_tool("discover_goals", json!({}))).0,
        "discover_sub_goals"
    );
    // Outside the toolset, by any name: unknown.
    for outside in [
        "search_graph",
        "consolidate_memories",
        "trigger_consolidation",
    ] {
        let r = peer.call_tool(outside, json!({}));
        assert_eq!(r["error"]["code"], -32004, "{outside}: {r}");
        assert_eq!(r["error"]["message"], format!("Unknown tool: {outside}"));
    }
    // Both the name asked for and the canonical name are in the call's log.
    peer.stderr_with(|l| l.contains("requested=remember") && l.contains("name=store_memory"));
}

#[test]
fn build_equip_call_restart_and_equip_again() {
    let cfg = config("");
    let store = scratch().join("toolsets.json");
    let store_arg = store.display().to_string();
    let mut peer = serve(&cfg, &["--manage", "--store", &store_arg]);
    let all = names(&mut peer);
    assert_eq!(all.len(), 35 + 7, "35 tools and the management tools");
    assert!(all.contains(&"build-toolset".to_owned()));

    let built = peer.call_tool(
        "build-toolset",
        json!({"name": "memory", "tools": [{"name": "store_memory", "alias": "remember"}, {"name": "search_graph", "alias": "find"}, "inject_context"], "description": "Memory work."}),
    );
    assert_eq!(built["result"]["isError"], false, "{built}");
    let equipped = peer.call_tool("equip-toolset", json!({"name": "memory"}));
    assert_eq!(equipped["result"]["isError"], false, "{equipped}");
    peer.wait_for("list_changed", |m| {
        m["method"] == "notifications/tools/list_changed"
    });
    let listed = names(&mut peer);
    assert_eq!(
        listed[..3],
        ["inject_context", "search_graph", "store_memory"]
    );
    assert_eq!(listed.len(), 3 + 7);
    assert_eq!(
        ran_with(&peer.call_tool("find", json!({"query": "q"}))).0,
        "search_graph"
    );
    assert_eq!(
        peer.call_tool("utl_status", json!({}))["error"]["code"],
        -32004
    );
    let active = peer.call_tool("get-active-toolset", json!({}));
    assert!(text(&active).contains("\"memory\""), "{active}");
    drop(peer);

    // A new moniker finds the toolset in the store.
    let mut peer = serve(&cfg, &["--manage", "--store", &store_arg]);
    let saved = peer.call_tool("list-saved-toolsets", json!({}));
    assert!(text(&saved).contains("remember"), "{saved}");
    assert_eq!(
        peer.call_tool("remember", json!({}))["error"]["code"],
        -32004,
        "not equipped yet"
    );
    peer.call_tool("equip-toolset", json!({"name": "memory"}));
    assert_eq!(
        ran_with(&peer.call_tool("remember", json!({"content": "c"}))).0,
        "store_memory"
    );
    // Unequip: everything again.
    peer.call_tool("unequip-toolset", json!({}));
    assert_eq!(names(&mut peer).len(), 42);
    // Delete it.
    let deleted = peer.call_tool("delete-toolset", json!({"name": "memory"}));
    assert_eq!(deleted["result"]["isError"], false, "{deleted}");
    assert_eq!(
        peer.call_tool("equip-toolset", json!({"name": "memory"}))["result"]["isError"],
        true
    );
    drop(peer);
    // And `serve --toolset` with a saved toolset: a fresh one.
    let mut peer = serve(&cfg, &["--manage", "--store", &store_arg]);
    peer.call_tool(
        "build-toolset",
        json!({"name": "tiny", "tools": ["utl_status"]}),
    );
    drop(peer);
    let mut peer = serve(&cfg, &["--toolset", "tiny", "--store", &store_arg]);
    assert_eq!(names(&mut peer), ["utl_status"]);
}

#[test]
fn invalid_toolsets_are_refused_with_the_reason() {
    let cfg = config("");
    let store = scratch().join("toolsets.json").display().to_string();
    let mut peer = serve(&cfg, &["--manage", "--store", &store]);
    let cases = [
        (
            json!([{"name": "store_memory", "alias": "Remember"}]),
            "`^[a-z0-9][a-z0-9_-]{1,63}$`",
        ),
        (
            json!([{"name": "store_memory", "alias": "same"}, {"name": "search_graph", "alias": "same"}]),
            "same",
        ),
        (
            json!([{"name": "store_memory", "alias": "search_graph"}]),
            "search_graph",
        ),
        (
            json!([{"name": "store_memory", "alias": "consolidate_memories"}]),
            "consolidate_memories",
        ),
        (json!(["no_such_tool"]), "no_such_tool"),
    ];
    for (tools, needle) in cases {
        let r = peer.call_tool("build-toolset", json!({"name": "bad", "tools": tools}));
        assert_eq!(r["result"]["isError"], true, "{tools}: {r}");
        let message = text(&r);
        assert!(
            message.contains("was not saved") && message.contains(needle),
            "{tools}: {message}"
        );
    }
    let saved = peer.call_tool("list-saved-toolsets", json!({}));
    assert!(!text(&saved).contains("\"bad\""), "{saved}");
}

#[test]
fn a_corrupt_store_is_moved_aside_and_static_toolsets_keep_working() {
    let cfg = config(REVIEW);
    let dir = scratch();
    let store = dir.join("toolsets.json");
    std::fs::write(&store, "{ this is not a store").expect("corrupt store");
    let mut peer = serve(&cfg, &["--manage", "--store", &store.display().to_string()]);
    peer.stderr_with(|l| l.contains("moved aside"));
    let aside: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1);
    assert_eq!(
        std::fs::read_to_string(aside[0].path()).expect("kept"),
        "{ this is not a store"
    );
    let r = peer.call_tool("equip-toolset", json!({"name": "review"}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(
        ran_with(&peer.call_tool("remember", json!({}))).0,
        "store_memory"
    );
}

#[test]
fn references_to_a_server_that_is_gone_are_stale_not_fatal() {
    let path = scratch().join("moniker.yaml");
    std::fs::write(
        &path,
        format!(
            "servers:\n{}  gone:\n    command: /nonexistent/server\ntoolsets:\n  mixed:\n    tools: [store_memory, tool_from_gone]\n",
            fixture_server("contextgraph", &[&contextgraph()])
        ),
    )
    .expect("config");
    let mut peer = serve(&path, &["--toolset", "mixed"]);
    assert_eq!(names(&mut peer), ["store_memory"]);
    peer.stderr_with(|l| l.contains("tool_from_gone"));
}

#[test]
fn moniker_list_shows_a_toolset() {
    let cfg = config(REVIEW);
    let out = Command::new(moniker())
        .args(["list", "--json", "--toolset", "review", "-c"])
        .arg(&cfg)
        .env("XDG_DATA_HOME", scratch())
        .output()
        .expect("list");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Value = serde_json::from_slice(&out.stdout).expect("json");
    let names: Vec<&str> = rows
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        ["discover_sub_goals", "get_ego_state", "store_memory"]
    );
    let store = rows
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["name"] == "store_memory")
        .expect("row");
    assert_eq!(store["toolset_aliases"], json!(["remember"]));
    let _ = fixture_bin();
}

/// SIGKILL moniker while clients build toolsets as fast as they can: every toolset whose
/// `build-toolset` was answered survives, and the store still reads.
#[test]
fn sigkill_while_writing_the_store_loses_nothing_acknowledged() {
    let cfg = config("");
    let store = scratch().join("toolsets.json");
    let store_arg = store.display().to_string();
    let mut acknowledged: Vec<String> = Vec::new();
    for round in 0..8 {
        let mut peer = serve(&cfg, &["--manage", "--store", &store_arg]);
        // Pipeline a burst of builds, read some answers, then kill mid-burst. Eight bursts of
        // 31 stay within the 256 toolsets a store keeps.
        let ids: Vec<(Value, String)> = (0..31)
            .map(|i| {
                let name = format!("r{round}-t{i}");
                let id = peer.send_request("tools/call", json!({"name": "build-toolset", "arguments": {"name": name, "tools": ["utl_status"]}}));
                (id, name)
            })
            .collect();
        for (id, name) in ids.iter().take(3 + round * 4) {
            let response: Value = serde_json::from_str(&peer.response_line(id)).expect("json");
            assert_eq!(response["result"]["isError"], false, "{response}");
            acknowledged.push(name.clone());
        }
        peer.child.kill().expect("SIGKILL");
        let _ = peer.child.wait();
    }
    let mut peer = serve(&cfg, &["--manage", "--store", &store_arg]);
    let saved = text(&peer.call_tool("list-saved-toolsets", json!({})));
    for name in &acknowledged {
        assert!(
            saved.contains(&format!("\"{name}\"")),
            "{name} was acknowledged but is gone"
        );
    }
    assert!(!peer.stderr().contains("moved aside"), "{}", peer.stderr());
}
