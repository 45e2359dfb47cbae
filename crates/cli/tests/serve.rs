//! `moniker serve` end to end: a real moniker process between a raw JSON-RPC client and real
//! fixture server processes, over real pipes.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use moniker_fixture::{Peer, fixture_bin, fixture_file, fixture_server, ran_with};
use serde_json::value::RawValue;
use serde_json::{Value, json};

fn contextgraph() -> String {
    fixture_file("contextgraph.json").display().to_string()
}

const CONTEXTGRAPH_RULES: &str = "tools:\n  discover_sub_goals: { aliases: [discover_goals] }\n  trigger_consolidation: { aliases: [consolidate_memories] }\n";

fn serve(servers: &[String], rest: &str) -> Peer {
    moniker_fixture::serve(Path::new(env!("CARGO_BIN_EXE_moniker")), servers, rest)
}

fn call(peer: &mut Peer, name: &str, arguments: Value) -> Value {
    peer.call_tool(name, arguments)
}

/// The fixture's answer names the origin tool that ran.
fn ran(response: &Value) -> String {
    ran_with(response).0
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn scenario_invoke_tool_using_canonical_name() {
    let mut peer = serve(
        &[fixture_server("contextgraph", &[&contextgraph()])],
        CONTEXTGRAPH_RULES,
    );
    let response = call(&mut peer, "discover_sub_goals", json!({"max_goals": 3}));
    assert_eq!(ran(&response), "discover_sub_goals");
    let log = peer.stderr_with(|l| l.contains("tool call"));
    assert!(
        !log.contains("Resolved tool alias to canonical name"),
        "{log}"
    );
}

#[test]
fn scenario_invoke_tool_using_prd_alias() {
    let mut peer = serve(
        &[fixture_server("contextgraph", &[&contextgraph()])],
        CONTEXTGRAPH_RULES,
    );
    let response = call(&mut peer, "discover_goals", json!({}));
    assert_eq!(ran(&response), "discover_sub_goals");
    let log = peer.stderr_with(|l| l.contains("Resolved tool alias to canonical name"));
    let line = log
        .lines()
        .find(|l| l.contains("Resolved tool alias to canonical name"))
        .unwrap_or_else(|| panic!("no alias log in:\n{log}"));
    assert!(
        line.contains("DEBUG")
            && line.contains("alias=discover_goals")
            && line.contains("canonical=discover_sub_goals"),
        "{line}"
    );
}

#[test]
fn scenario_invoke_consolidation_using_prd_alias() {
    let mut peer = serve(
        &[fixture_server("contextgraph", &[&contextgraph()])],
        CONTEXTGRAPH_RULES,
    );
    let response = call(
        &mut peer,
        "consolidate_memories",
        json!({"strategy": "similarity"}),
    );
    assert_eq!(ran(&response), "trigger_consolidation");
    peer.stderr_with(|l| l.contains("alias=consolidate_memories canonical=trigger_consolidation"));
}

#[test]
fn scenario_tool_list_includes_alias_information() {
    let mut peer = serve(
        &[fixture_server("contextgraph", &[&contextgraph()])],
        CONTEXTGRAPH_RULES,
    );
    let listed = peer.result("tools/list", json!({}));
    let tools = listed["tools"].as_array().expect("tools").clone();
    assert_eq!(tools.len(), 35);
    let find = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed"))
    };
    assert_eq!(
        find("discover_sub_goals")["aliases"],
        json!(["discover_goals"])
    );
    assert_eq!(
        find("trigger_consolidation")["aliases"],
        json!(["consolidate_memories"])
    );
    assert!(
        find("discover_sub_goals")["description"]
            .as_str()
            .expect("description")
            .ends_with("Aliases: discover_goals")
    );
    assert!(find("abort_dream").get("aliases").is_none());
    // One server: the listing says it once, no entry does; no tags configured: none said.
    assert_eq!(listed["_meta"]["io.moniker/server"], "contextgraph");
    assert!(tools.iter().all(|t| t.get("_meta").is_none()), "{tools:?}");
}

#[test]
fn scenario_unknown_tool_returns_error() {
    let mut peer = serve(
        &[fixture_server("contextgraph", &[&contextgraph()])],
        CONTEXTGRAPH_RULES,
    );
    for name in [
        "nonexistent_tool",
        "Discover_Goals",
        "DISCOVER_GOALS",
        "compute_delta_sc",
    ] {
        let response = call(&mut peer, name, json!({}));
        assert_eq!(response["error"]["code"], -32004, "{response}");
        assert_eq!(
            response["error"]["message"],
            format!("Unknown tool: {name}")
        );
    }
}

#[test]
fn bridge_tools_are_listed_with_clean_names_and_prompts_are_callable() {
    let bridge = fixture_file("bridge.json").display().to_string();
    let rules = "naming: { strip_prefixes: [local_bridge_] }\nserver_tags: { github-custom: [git, github, version-control], thinking: [reasoning] }\ntools:\n  local_bridge_github_custom__get_pr_info: { tags: [pull-request] }\n  bridge/local_bridge_filesystem__search: { name: filesystem_search }\n  bridge/local_bridge_brave_search__search: { name: web_search, tags: [web] }\nprompts:\n  local_bridge_thinking__analyze: { name: think }\n";
    let mut peer = serve(&[fixture_server("bridge", &[&bridge])], rules);
    let tools = peer.result("tools/list", json!({}))["tools"].clone();
    let names: Vec<&str> = tools
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "filesystem_search",
            "get_pr_info",
            "list_prs",
            "read_file",
            "web_search"
        ]
    );
    let pr = &tools[1];
    assert_eq!(pr["_meta"]["io.moniker/server"], "github-custom");
    assert_eq!(
        pr["_meta"]["io.moniker/tags"],
        json!(["git", "github", "pull-request", "version-control"])
    );
    assert!(
        !tools.to_string().contains("local_bridge"),
        "origin names leak: {tools}"
    );
    assert_eq!(
        ran(&call(
            &mut peer,
            "get_pr_info",
            json!({"repo": "r", "number": 1})
        )),
        "local_bridge_github_custom__get_pr_info"
    );

    let prompts = peer.result("prompts/list", json!({}))["prompts"].clone();
    let names: Vec<&str> = prompts
        .as_array()
        .expect("prompts")
        .iter()
        .map(|p| p["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["generate_playbook", "think"]);
    let got = peer.result(
        "prompts/get",
        json!({"name": "think", "arguments": {"problem": "p"}}),
    );
    let text = got["messages"][0]["content"]["text"]
        .as_str()
        .expect("text");
    assert!(text.starts_with("local_bridge_thinking__analyze"), "{text}");
    let unknown = peer.call("prompts/get", json!({"name": "analyze"}));
    assert_eq!(unknown["error"]["code"], -32004);
    assert_eq!(unknown["error"]["message"], "Unknown prompt: analyze");
}

/// The raw bytes of a response's `result`.
fn raw_result(line: &str) -> String {
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        result: &'a RawValue,
    }
    serde_json::from_str::<Envelope<'_>>(line)
        .expect("a result")
        .result
        .get()
        .to_owned()
}

#[test]
fn results_arrive_byte_for_byte_as_the_server_sent_them() {
    let file = contextgraph();
    let mut direct = Peer::spawn(Command::new(fixture_bin()).args([&file, "--extra-fields"]));
    direct.initialize();
    let params = json!({"name": "store_memory", "arguments": {"content": "x", "importance": 0.50}});
    let id = direct.send_request("tools/call", params.clone());
    let direct_line = direct.response_line(&id);

    let mut peer = serve(
        &[fixture_server("contextgraph", &[&file, "--extra-fields"])],
        "",
    );
    let id = peer.send_request("tools/call", params);
    let line = peer.response_line(&id);
    let (a, b) = (raw_result(&direct_line), raw_result(&line));
    assert_eq!(a, b);
    for needle in [
        "\"_cognitive_pulse\"",
        "1.0e0",
        "12345678901234567890123",
        "future_content",
        "0.50",
    ] {
        assert!(b.contains(needle), "{needle} lost: {b}");
    }
}

#[test]
fn a_server_that_crashes_mid_call_fails_fast_restarts_and_its_tools_return() {
    let cg = contextgraph();
    let mut peer = serve(
        &[
            fixture_server("cg", &[&cg, "--crash-after", "2"]),
            fixture_server("other", &["--name", "other"]),
        ],
        "tools:\n  other/echo: { name: other_echo }\ngateway: { restart: { initial_delay: 100ms, max_delay: 1s } }\n",
    );
    peer.result("tools/list", json!({}));
    assert_eq!(
        ran(&call(&mut peer, "store_memory", json!({}))),
        "store_memory"
    );
    let started = Instant::now();
    let crashed = call(&mut peer, "store_memory", json!({}));
    assert_eq!(crashed["error"]["code"], -32041, "{crashed}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the failed call took {:?}",
        started.elapsed()
    );
    // The other server keeps serving while `cg` is away.
    let echo = call(&mut peer, "other_echo", json!({"text": "hi"}));
    assert!(echo.get("result").is_some(), "{echo}");
    // It comes back, with its tools.
    peer.wait_for("list_changed", |m| {
        m["method"] == "notifications/tools/list_changed"
    });
    wait_until("store_memory to work again", || {
        let r = call(&mut peer, "store_memory", json!({}));
        r.get("result").is_some()
    });
    let tools = peer.result("tools/list", json!({}))["tools"]
        .as_array()
        .expect("tools")
        .len();
    assert_eq!(tools, 36);
}

#[test]
fn a_server_that_never_answers_times_out_and_others_keep_serving() {
    let cg = contextgraph();
    let mut peer = serve(
        &[
            fixture_server("cg", &[&cg, "--hang-tools", "store_memory"]),
            fixture_server("other", &["--name", "other"]),
        ],
        "gateway: { call_timeout: 1s }\n",
    );
    let hung = peer.send_request(
        "tools/call",
        json!({"name": "store_memory", "arguments": {}}),
    );
    // Meanwhile others answer at once.
    let echo = call(&mut peer, "echo", json!({}));
    assert!(echo.get("result").is_some(), "{echo}");
    let started = Instant::now();
    let line = peer.response_line(&hung);
    let response: Value = serde_json::from_str(&line).expect("json");
    assert_eq!(response["error"]["code"], -32042, "{response}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_server_that_writes_garbage_still_serves() {
    let mut peer = serve(
        &[fixture_server(
            "noisy",
            &[&contextgraph(), "--garbage", "--stderr-noise"],
        )],
        "",
    );
    assert_eq!(
        ran(&call(&mut peer, "store_memory", json!({}))),
        "store_memory"
    );
    assert_eq!(
        peer.result("tools/list", json!({}))["tools"]
            .as_array()
            .expect("tools")
            .len(),
        35
    );
}

#[test]
fn a_server_that_cannot_start_is_left_out() {
    let broken = "  broken:\n    command: /nonexistent/moniker-test-server\n".to_owned();
    let mut peer = serve(&[broken, fixture_server("cg", &[&contextgraph()])], "");
    assert_eq!(
        peer.result("tools/list", json!({}))["tools"]
            .as_array()
            .expect("tools")
            .len(),
        35
    );
    peer.stderr_with(|l| l.contains("server failed to start"));
}

#[test]
fn malformed_and_huge_client_messages_get_errors_and_the_session_goes_on() {
    let mut peer = serve(&[fixture_server("cg", &[&contextgraph()])], "");
    peer.send_raw("{this is not json");
    let error = peer.message();
    assert_eq!(error["error"]["code"], -32700, "{error}");
    assert_eq!(error["id"], Value::Null);
    peer.send_raw(r#"{"jsonrpc":"2.0","id":5}"#);
    assert_eq!(peer.message()["error"]["code"], -32600);
    peer.send_raw(&format!(
        r#"{{"jsonrpc":"2.0","id":6,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(17 * 1024 * 1024)
    ));
    let error = peer.message();
    assert_eq!(error["error"]["code"], -32600, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .expect("message")
            .contains("over the limit")
    );
    let unknown = peer.call("no/such/method", json!({}));
    assert_eq!(unknown["error"]["code"], -32601);
    assert_eq!(peer.result("ping", json!({})), json!({}));
}

#[test]
fn batches_are_answered_together() {
    let mut peer = serve(&[fixture_server("cg", &[&contextgraph()])], "");
    peer.send_raw(r#"[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"utl_status"}}]"#);
    let reply = peer.message();
    let items = reply
        .as_array()
        .unwrap_or_else(|| panic!("not a batch: {reply}"));
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["id"], "a");
    assert_eq!(items[1]["id"], "b");
    assert_eq!(ran(&items[1]), "utl_status");
}

#[test]
fn list_changed_from_a_server_reaches_the_client() {
    let mut peer = serve(
        &[fixture_server(
            "cg",
            &[&contextgraph(), "--list-changed-after", "1"],
        )],
        "",
    );
    // A change is news to a client that has the list.
    peer.result("tools/list", json!({}));
    call(&mut peer, "store_memory", json!({}));
    peer.wait_for("list_changed", |m| {
        m["method"] == "notifications/tools/list_changed"
    });
    let tools = peer.result("tools/list", json!({}))["tools"].clone();
    assert!(
        tools
            .as_array()
            .expect("tools")
            .iter()
            .any(|t| t["name"] == "fixture_added_tool"),
        "{tools}"
    );
    assert_eq!(
        ran(&call(&mut peer, "fixture_added_tool", json!({}))),
        "fixture_added_tool"
    );
}

#[test]
fn progress_flows_back_under_the_clients_token() {
    let mut peer = serve(
        &[fixture_server("cg", &[&contextgraph(), "--progress", "3"])],
        "",
    );
    let id = peer.send_request(
        "tools/call",
        json!({"name": "store_memory", "arguments": {}, "_meta": {"progressToken": "tok-1"}}),
    );
    let line = peer.response_line(&id);
    assert!(line.contains("\"result\""), "{line}");
    let progress: Vec<&Value> = peer
        .backlog
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 3, "{:?}", peer.backlog);
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "tok-1")
    );
}

#[test]
fn sampling_requests_from_a_server_reach_the_client_and_back() {
    let mut peer = serve(&[fixture_server("cg", &["--sample-tool"])], "");
    let id = peer.send_request(
        "tools/call",
        json!({"name": "fixture_sample", "arguments": {}}),
    );
    let request = peer.wait_for("sampling request", |m| {
        m["method"] == "sampling/createMessage"
    });
    peer.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"role": "assistant", "content": {"type": "text", "text": "sampled!"}, "model": "m"}}));
    let line = peer.response_line(&id);
    assert!(line.contains("sampled!"), "{line}");
}

#[test]
fn cancelled_calls_get_no_answer_and_the_session_goes_on() {
    let mut peer = serve(
        &[fixture_server(
            "cg",
            &[&contextgraph(), "--delay-ms", "1500"],
        )],
        "",
    );
    let id = peer.send_request(
        "tools/call",
        json!({"name": "store_memory", "arguments": {}}),
    );
    peer.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "user"}),
    );
    assert_eq!(peer.result("ping", json!({})), json!({}));
    let deadline = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < deadline {
        if let Some(Some(line)) = peer.line_within(Duration::from_millis(100)) {
            let v: Value = serde_json::from_str(&line).expect("json");
            assert_ne!(
                v.get("id"),
                Some(&id),
                "a cancelled call was answered: {line}"
            );
        }
    }
}

/// The pids of live processes whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| {
            let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let zombie = stat
                .rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'));
            (!zombie && String::from_utf8_lossy(&cmdline).contains(marker)).then_some(pid)
        })
        .collect()
}

#[test]
fn servers_end_with_moniker_when_its_client_leaves() {
    let marker = format!("marker-eof-{}", std::process::id());
    let mut peer = serve(&[fixture_server("cg", &["--name", &marker])], "");
    // Servers start behind `initialize`: waited for, not assumed (a loaded machine).
    wait_until("the server to start", || {
        !processes_with(&marker).is_empty()
    });
    peer.close_stdin();
    assert!(
        peer.wait_exit(Duration::from_secs(10))
            .is_some_and(|s| s.success()),
        "moniker did not exit cleanly"
    );
    wait_until("the servers to end", || processes_with(&marker).is_empty());
}

#[test]
fn servers_end_when_moniker_is_killed() {
    let marker = format!("marker-kill-{}", std::process::id());
    let mut peer = serve(
        &[
            fixture_server("a", &["--name", &marker]),
            fixture_server("b", &["--name", &format!("{marker}-b")]),
        ],
        "tools:\n  b/echo: { name: b_echo }\n",
    );
    // Both started (behind `initialize`, in their own time on a loaded machine).
    wait_until("both servers to start", || {
        processes_with(&marker).len() >= 2
    });
    peer.child.kill().expect("SIGKILL moniker");
    let _ = peer.child.wait();
    wait_until("the servers to end after SIGKILL", || {
        processes_with(&marker).is_empty()
    });
}

#[test]
fn listings_come_in_pages_when_a_page_size_is_set() {
    let mut peer = serve(
        &[fixture_server("cg", &[&contextgraph()])],
        "gateway: { page_size: 10 }\n",
    );
    let mut names = Vec::new();
    let mut cursor = Value::Null;
    let mut pages = 0;
    loop {
        let params = if cursor.is_null() {
            json!({})
        } else {
            json!({"cursor": cursor})
        };
        let page = peer.result("tools/list", params);
        let tools = page["tools"].as_array().expect("tools");
        assert!(tools.len() <= 10);
        // One server: each page says it once (and a next page's cursor beside it).
        assert_eq!(page["_meta"], json!({"io.moniker/server": "cg"}), "{page}");
        names.extend(
            tools
                .iter()
                .map(|t| t["name"].as_str().expect("name").to_owned()),
        );
        pages += 1;
        match page.get("nextCursor") {
            Some(next) => cursor = next.clone(),
            None => break,
        }
    }
    assert_eq!((pages, names.len()), (4, 35));
    let bad = peer.call("tools/list", json!({"cursor": "nonsense"}));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}
