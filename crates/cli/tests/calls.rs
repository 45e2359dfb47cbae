//! A call from end to end: the limits of its server and its tool (`call_timeout`,
//! `max_in_flight`) against the fixture's delay, and its one line in the audit log.

#![allow(
    clippy::too_many_lines,
    reason = "a test is one scenario, read from top to bottom"
)]

use std::path::Path;
use std::process::Stdio;

use moniker_fixture::{Peer, fixture_server, scratch};
use serde_json::{Value, json};

use crate::http::{Client, start_fixture};

/// A fixture server (its one tool `echo`, prefixed with the id) answering after `delay_ms`,
/// with `extra` lines in its entry.
fn slow_server(id: &str, delay_ms: u32, extra: &str) -> String {
    let delay = delay_ms.to_string();
    format!(
        "{}    prefix: true\n{extra}",
        fixture_server(id, &["--delay-ms", &delay])
    )
}

fn error_of(response: &Value) -> (i64, String) {
    let error = &response["error"];
    (
        error["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("no error: {response}")),
        error["message"].as_str().unwrap_or_default().to_owned(),
    )
}

#[test]
fn a_server_and_a_tool_have_their_own_limits() {
    let servers = [
        // The tool's own timeout (5 s) is more specific than its server's (0.2 s).
        slow_server("a", 1000, "    call_timeout: 200ms\n"),
        slow_server("b", 1000, "    call_timeout: 200ms\n"),
        slow_server("c", 800, "    max_in_flight: 1\n"),
    ];
    let rest = "tools:\n  a/echo: { call_timeout: 5s }\n";
    let mut peer: Peer =
        moniker_fixture::serve(Path::new(env!("CARGO_BIN_EXE_moniker")), &servers, rest);

    let a = peer.call_tool("a_echo", json!({}));
    assert!(a.get("result").is_some(), "the tool's 5 s hold: {a}");

    let b = peer.call_tool("b_echo", json!({}));
    let (code, message) = error_of(&b);
    assert_eq!(code, -32042, "{b}");
    assert!(
        message.contains("0.2 s") && message.contains("`servers.b.call_timeout`"),
        "{message}"
    );

    // Two calls at once to a server that takes one: the second is refused at once, with the
    // time-out's code, naming the limit; the first is answered.
    let first = peer.send_request("tools/call", json!({"name": "c_echo", "arguments": {}}));
    let second = peer.send_request("tools/call", json!({"name": "c_echo", "arguments": {}}));
    let second: Value = serde_json::from_str(&peer.response_line(&second)).expect("json");
    let first: Value = serde_json::from_str(&peer.response_line(&first)).expect("json");
    assert!(first.get("result").is_some(), "{first}");
    let (code, message) = error_of(&second);
    assert_eq!(code, -32042, "{second}");
    assert!(
        message.contains("`servers.c.max_in_flight`") && message.contains("1 call at once"),
        "{message}"
    );
    // Its place is free again once the first ended.
    let again = peer.call_tool("c_echo", json!({}));
    assert!(again.get("result").is_some(), "{again}");

    // An id already in progress names no second request: it is refused, and the first one
    // still gets its answer.
    peer.send(&json!({"jsonrpc": "2.0", "id": "twice", "method": "tools/call", "params": {"name": "a_echo", "arguments": {}}}));
    peer.send(&json!({"jsonrpc": "2.0", "id": "twice", "method": "tools/call", "params": {"name": "a_echo", "arguments": {}}}));
    let first: Value = serde_json::from_str(&peer.response_line(&json!("twice"))).expect("json");
    let second: Value = serde_json::from_str(&peer.response_line(&json!("twice"))).expect("json");
    let (refused, answered) = match first.get("error") {
        Some(_) => (first, second),
        None => (second, first),
    };
    assert_eq!(error_of(&refused).0, -32600, "{refused}");
    assert!(answered.get("result").is_some(), "{answered}");
}

#[test]
fn a_limit_is_a_config_error_when_it_cannot_work() {
    let dir = scratch();
    let config = dir.join("moniker.yaml");
    std::fs::write(
        &config,
        format!(
            "servers:\n{}    max_in_flight: 0\n    call_timeout: soon\n",
            fixture_server("a", &[])
        ),
    )
    .expect("config");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_moniker"))
        .args(["check", "--offline", "-c"])
        .arg(&config)
        .output()
        .expect("check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("max_in_flight"), "{stderr}");
    assert!(stderr.contains("call_timeout"), "{stderr}");
}

const SECRET: &str = "s3cret-token";
const UNNAMED: &str = "unnamed-token-0123";

/// Every kind of call, each with its line: by name, by alias, by an action, through
/// `call_tool` in search mode, an unknown name, a timed-out call. The token's
/// name is there; its secret is nowhere in the log.
#[test]
fn every_call_has_one_audit_line_and_no_secret() {
    let dir = scratch();
    let audit = dir.join("logs").join("audit.jsonl");
    let tools = "tools:\n  discover_sub_goals: { aliases: [discover_goals] }\n  trigger_dream: { call_timeout: 300ms }\n";
    let rest = format!(
        "actions:\n  dream:\n    tools: {{ status: get_dream_status, abort: abort_dream }}\n\
         discovery:\n  mode: search\n\
         audit: {}\n\
         http:\n  tokens:\n    - {{ token: \"${{MONIKER_TEST_TOKEN}}\", name: ci-bot }}\n    - {UNNAMED}\n",
        json!(audit.display().to_string())
    );
    let m = start_fixture(
        &["--hang-tools", "trigger_dream"],
        tools,
        &rest,
        Stdio::null(),
    );
    let mut client = Client::new(&m, Some(SECRET));
    client.initialize();
    let call = |client: &mut Client, name: &str, arguments: Value| {
        client.request("tools/call", json!({"name": name, "arguments": arguments}))
    };
    let ok = |v: &Value| assert!(v.get("result").is_some(), "{v}");
    ok(&call(&mut client, "store_memory", json!({"content": "x"})));
    ok(&call(&mut client, "discover_goals", json!({})));
    ok(&call(&mut client, "dream", json!({"action": "status"})));
    ok(&call(
        &mut client,
        "call_tool",
        json!({"name": "search_graph", "arguments": {"query": "q"}}),
    ));
    let unknown = call(&mut client, "no_such_tool", json!({}));
    assert_eq!(error_of(&unknown).0, -32004);
    let timed_out = call(&mut client, "trigger_dream", json!({}));
    assert_eq!(error_of(&timed_out).0, -32042);

    // A token without a name is named by its place, never by anything made of its secret.
    let mut other = Client::new(&m, Some(UNNAMED));
    other.initialize();
    let by_place = call(&mut other, "store_memory", json!({"content": "y"}));
    assert!(by_place.get("result").is_some(), "{by_place}");

    let text = std::fs::read_to_string(&audit).expect("the audit log");
    assert!(!text.contains(SECRET) && !text.contains(UNNAMED), "{text}");
    let (unnamed, named): (Vec<&str>, Vec<&str>) =
        text.lines().partition(|l| l.contains("\"token #2\""));
    assert_eq!(unnamed.len(), 1, "{text}");
    let text = named.join("\n");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
        .collect();
    assert_eq!(lines.len(), 6, "one line a call:\n{text}");
    for line in &lines {
        assert_eq!(line["principal"], "ci-bot", "{line}");
        assert_eq!(line["method"], "tools/call", "{line}");
        assert!(
            line["time"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{line}"
        );
        assert!(line["duration_ms"].as_f64().is_some(), "{line}");
    }
    let pick = |name: &str| {
        lines
            .iter()
            .find(|l| l["name"] == name)
            .unwrap_or_else(|| panic!("no line for {name}:\n{text}"))
            .clone()
    };
    let direct = pick("store_memory");
    assert_eq!(
        (
            &direct["via"],
            &direct["server"],
            &direct["origin"],
            &direct["outcome"]
        ),
        (
            &json!("name"),
            &json!("contextgraph"),
            &json!("store_memory"),
            &json!("ok")
        )
    );
    let alias = pick("discover_goals");
    assert_eq!(
        (&alias["via"], &alias["tool"], &alias["origin"]),
        (
            &json!("alias"),
            &json!("discover_sub_goals"),
            &json!("discover_sub_goals")
        )
    );
    let action = pick("dream");
    assert_eq!(
        (&action["via"], &action["origin"]),
        (&json!("action"), &json!("get_dream_status"))
    );
    let found = pick("search_graph");
    assert_eq!(found["through"], "call_tool");
    assert_eq!(found["outcome"], "ok");
    let refused = pick("no_such_tool");
    assert_eq!(
        (&refused["outcome"], &refused["code"]),
        (&json!("unknown"), &json!(-32004))
    );
    let late = pick("trigger_dream");
    assert_eq!(
        (&late["outcome"], &late["code"], &late["server"]),
        (&json!("timeout"), &json!(-32042), &json!("contextgraph"))
    );
    assert!(
        late["duration_ms"].as_f64().unwrap_or(0.0) >= 300.0,
        "{late}"
    );
}
