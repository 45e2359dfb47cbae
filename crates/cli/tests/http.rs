//! `moniker serve --http` end to end: tokens, Origin checks, tokens bound to toolsets, separate
//! session views, and `/metrics` telling an alias call from a name call.

#![allow(
    clippy::too_many_lines,
    reason = "a test is one scenario, read from top to bottom"
)]

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use moniker_fixture::{fixture_file, fixture_server, scratch};
use serde_json::{Value, json};

pub(crate) struct Moniker {
    child: Child,
    pub(crate) base: String,
    config: std::path::PathBuf,
}

impl Drop for Moniker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

fn start(rest: &str) -> Moniker {
    start_with(
        "tools:\n  discover_sub_goals: { aliases: [discover_goals] }\n",
        rest,
        Stdio::null(),
    )
}

/// `moniker serve --http` on a free port with the contextgraph fixture, `tools` and `rest`
/// in its config, its stderr to `stderr`.
fn start_with(tools: &str, rest: &str, stderr: Stdio) -> Moniker {
    start_fixture(&[], tools, rest, stderr)
}

/// [`start_with`], with more arguments for the fixture.
pub(crate) fn start_fixture(args: &[&str], tools: &str, rest: &str, stderr: Stdio) -> Moniker {
    start_serving(&[], args, tools, rest, stderr)
}

/// [`start_fixture`], with more arguments for `serve`.
fn start_serving(serve: &[&str], args: &[&str], tools: &str, rest: &str, stderr: Stdio) -> Moniker {
    let config = scratch().join("moniker.yaml");
    let cg = fixture_file("contextgraph.json").display().to_string();
    let mut all = vec![cg.as_str()];
    all.extend_from_slice(args);
    std::fs::write(
        &config,
        format!(
            "servers:\n{}{tools}{rest}",
            fixture_server("contextgraph", &all)
        ),
    )
    .expect("config");
    let port = free_port();
    let child = Command::new(Path::new(env!("CARGO_BIN_EXE_moniker")))
        .args(["serve", "--http", &format!("127.0.0.1:{port}"), "-c"])
        .arg(&config)
        .args(serve)
        .env("XDG_DATA_HOME", scratch())
        .env("MONIKER_TEST_TOKEN", "s3cret-token")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("moniker serve --http");
    let base = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while ureq::get(&format!("{base}/healthz")).call().is_err() {
        assert!(Instant::now() < deadline, "moniker did not start listening");
        std::thread::sleep(Duration::from_millis(50));
    }
    Moniker {
        child,
        base,
        config,
    }
}

/// Polls `check` every 50 ms for up to 10 s.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into()
}

/// A client session: POSTs with the session id and the token.
pub(crate) struct Client {
    agent: ureq::Agent,
    url: String,
    token: Option<String>,
    session: Option<String>,
    next: u64,
}

impl Client {
    pub(crate) fn new(m: &Moniker, token: Option<&str>) -> Self {
        Self {
            agent: agent(),
            url: format!("{}/mcp", m.base),
            token: token.map(str::to_owned),
            session: None,
            next: 0,
        }
    }

    /// (status, body as JSON when there is one).
    fn post(&mut self, body: &Value, origin: Option<&str>) -> (u16, Value) {
        let mut req = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        if let Some(token) = &self.token {
            req = req.header("Authorization", &format!("Bearer {token}"));
        }
        if let Some(session) = &self.session {
            req = req.header("Mcp-Session-Id", session);
        }
        if let Some(origin) = origin {
            req = req.header("Origin", origin);
        }
        let mut response = req.send(body.to_string()).expect("request");
        if let Some(id) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            self.session = Some(id.to_owned());
        }
        let status = response.status().as_u16();
        let sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("text/event-stream"));
        let text = response.body_mut().read_to_string().unwrap_or_default();
        let json = if sse {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .rfind(|d| !d.is_empty())
                .unwrap_or("null")
                .to_owned()
        } else {
            text
        };
        (status, serde_json::from_str(&json).unwrap_or(Value::Null))
    }

    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let (status, body) = self.post(
            &json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params}),
            None,
        );
        assert_eq!(status, 200, "{method}: {body}");
        body
    }

    pub(crate) fn initialize(&mut self) {
        let body = self.request("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}));
        assert!(body.get("result").is_some(), "{body}");
        let (status, _) = self.post(
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            None,
        );
        assert_eq!(status, 202);
    }

    fn tools(&mut self) -> Vec<String> {
        let body = self.request("tools/list", json!({}));
        body["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["name"].as_str().expect("name").to_owned())
            .collect()
    }

    fn call(&mut self, name: &str) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": {}}))
    }
}

const TOKENS: &str = "http:\n  tokens:\n    - \"${MONIKER_TEST_TOKEN}\"\n    - { token: review-only-token, toolset: review }\ntoolsets:\n  review:\n    tools: [store_memory, discover_goals]\n    aliases: { store_memory: remember }\n";

#[test]
fn tokens_are_required_and_checked() {
    let m = start(TOKENS);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    assert_eq!(Client::new(&m, None).post(&init, None).0, 401);
    assert_eq!(Client::new(&m, Some("wrong")).post(&init, None).0, 401);
    let mut ok = Client::new(&m, Some("s3cret-token"));
    assert_eq!(ok.post(&init, None).0, 200);
    assert_eq!(
        Client::new(&m, Some("s3cret-token"))
            .post(&init, Some("http://evil.example"))
            .0,
        403
    );
}

#[test]
fn a_token_bound_to_a_toolset_sees_and_calls_only_that_toolset() {
    let m = start(TOKENS);
    let mut bound = Client::new(&m, Some("review-only-token"));
    bound.initialize();
    let tools = bound.tools();
    assert_eq!(
        tools,
        ["discover_sub_goals", "store_memory"],
        "no management tools either"
    );
    assert!(bound.call("remember").get("result").is_some());
    let outside = bound.call("search_graph");
    assert_eq!(outside["error"]["code"], -32004, "{outside}");
    assert_eq!(bound.call("build-toolset")["error"]["code"], -32004);

    // Another session, with the other token, sees everything at the same time.
    let mut full = Client::new(&m, Some("s3cret-token"));
    full.initialize();
    assert_eq!(full.tools().len(), 35);
    assert!(full.call("search_graph").get("result").is_some());
    assert_eq!(bound.tools().len(), 2);
}

/// One thread (the default) or several (`--threads`): the same calls answered, for clients
/// that ask at once.
#[test]
fn one_thread_or_several_serve_clients_at_once() {
    for serve in [&[][..], &["--threads", "3"][..]] {
        let m = start_serving(serve, &[], "", "", Stdio::null());
        let m = &m;
        std::thread::scope(|scope| {
            let clients: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(move || {
                        let mut client = Client::new(m, None);
                        client.initialize();
                        (0..20)
                            .map(|_| client.call("discover_sub_goals"))
                            .filter(|answer| answer.get("result").is_some())
                            .count()
                    })
                })
                .collect();
            for client in clients {
                assert_eq!(client.join().expect("a client"), 20, "{serve:?}");
            }
        });
    }
}

/// `--threads` is for `--http`, and at least one.
#[test]
fn threads_are_for_http_and_at_least_one() {
    for args in [
        &["serve", "--threads", "2"][..],
        &["serve", "--http", "127.0.0.1:0", "--threads", "0"][..],
    ] {
        let out = Command::new(Path::new(env!("CARGO_BIN_EXE_moniker")))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("moniker");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains("--threads"), "{args:?}: {said}");
    }
}

#[test]
fn metrics_count_an_alias_call_as_an_alias_call() {
    let m = start("");
    let mut client = Client::new(&m, None);
    client.initialize();
    client.call("discover_goals");
    client.call("discover_goals");
    client.call("discover_sub_goals");
    client.call("no_such_tool");
    let text = agent()
        .get(&format!("{}/metrics", m.base))
        .call()
        .expect("metrics")
        .body_mut()
        .read_to_string()
        .expect("text");
    for line in [
        "moniker_calls_total{tool=\"discover_sub_goals\",via=\"alias\",outcome=\"ok\"} 2",
        "moniker_calls_total{tool=\"discover_sub_goals\",via=\"name\",outcome=\"ok\"} 1",
        // Unknown names all count under one series (a client cannot grow the metrics).
        "moniker_calls_total{tool=\"<unknown>\",via=\"none\",outcome=\"unknown\"} 1",
        "moniker_call_duration_seconds_count{server=\"contextgraph\"} 3",
        "moniker_server_up{server=\"contextgraph\"} 1",
    ] {
        assert!(text.contains(line), "missing `{line}` in:\n{text}");
    }
}

/// The serde passes over messages' text that moniker's metrics count.
fn message_reads(base: &str) -> u64 {
    let text = agent()
        .get(&format!("{base}/metrics"))
        .call()
        .expect("metrics")
        .body_mut()
        .read_to_string()
        .expect("text");
    text.lines()
        .find_map(|l| l.strip_prefix("moniker_message_reads_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no reads counted in:\n{text}"))
}

/// A message is read once where it enters: a call costs one serde pass for the client's
/// request and one for the server's answer, whatever the era, with the names, the envelope,
/// the progress token and the trace context all in play.
#[test]
fn a_call_is_read_once_on_each_side() {
    // A 2025 call over stdio, by an alias, with a progress token and a trace context.
    let port = free_port();
    let config = scratch().join("moniker.yaml");
    let cg = fixture_file("contextgraph.json").display().to_string();
    std::fs::write(
        &config,
        format!(
            "servers:\n{}tools:\n  discover_sub_goals: {{ aliases: [discover_goals] }}\n",
            fixture_server("cg", &[&cg])
        ),
    )
    .expect("config");
    let mut peer = moniker_fixture::Peer::spawn(
        Command::new(Path::new(env!("CARGO_BIN_EXE_moniker")))
            .args(["serve", "--metrics", &format!("127.0.0.1:{port}"), "-c"])
            .arg(&config),
    );
    peer.initialize();
    let base = format!("http://127.0.0.1:{port}");
    let call = json!({"name": "discover_goals", "arguments": {"goal": "x"}, "_meta": {"progressToken": "p1", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}});
    // The first call warms what is read once per session (nothing per call).
    let first = peer.result("tools/call", call.clone());
    assert!(first.get("content").is_some(), "{first}");
    let before = message_reads(&base);
    let again = peer.result("tools/call", call);
    assert!(again.get("content").is_some(), "{again}");
    let stdio = message_reads(&base) - before;
    assert!(
        stdio <= 2,
        "a 2025 call over stdio took {stdio} serde passes"
    );

    // A 2026-07-28 call over HTTP, without a session, to the same kind of server.
    let m = start("");
    let modern = |id: u64| {
        agent()
            .post(&format!("{}/mcp", m.base))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", "tools/call")
            .header("Mcp-Name", "discover_goals")
            .send(
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "discover_goals", "arguments": {"goal": "x"},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
                    "progressToken": id,
                }}})
                .to_string(),
            )
            .expect("post")
            .body_mut()
            .read_to_string()
            .expect("body")
    };
    let first = modern(1);
    assert!(first.contains("\"resultType\":\"complete\""), "{first}");
    let before = message_reads(&m.base);
    let again = modern(2);
    assert!(again.contains("\"content\""), "{again}");
    let http = message_reads(&m.base) - before;
    assert!(
        http <= 2,
        "a 2026-07-28 call over HTTP took {http} serde passes"
    );
}

#[test]
fn binding_beyond_loopback_needs_a_token() {
    let config = scratch().join("moniker.yaml");
    std::fs::write(&config, "servers: {}\n").expect("config");
    let out = Command::new(Path::new(env!("CARGO_BIN_EXE_moniker")))
        .args(["serve", "--http", "0.0.0.0:0", "-c"])
        .arg(&config)
        .env_remove("MONIKER_TOKENS")
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(78),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("token"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn metrics_beside_stdio() {
    let port = free_port();
    let config = scratch().join("moniker.yaml");
    let cg = fixture_file("contextgraph.json").display().to_string();
    std::fs::write(
        &config,
        format!(
            "servers:\n{}tools:\n  discover_sub_goals: {{ aliases: [discover_goals] }}\n",
            fixture_server("cg", &[&cg])
        ),
    )
    .expect("config");
    let mut peer = moniker_fixture::Peer::spawn(
        Command::new(Path::new(env!("CARGO_BIN_EXE_moniker")))
            .args(["serve", "--metrics", &format!("127.0.0.1:{port}"), "-c"])
            .arg(&config),
    );
    peer.initialize();
    peer.call_tool("discover_goals", json!({}));
    let text = agent()
        .get(&format!("http://127.0.0.1:{port}/metrics"))
        .call()
        .expect("metrics")
        .body_mut()
        .read_to_string()
        .expect("text");
    assert!(
        text.contains(
            "moniker_calls_total{tool=\"discover_sub_goals\",via=\"alias\",outcome=\"ok\"} 1"
        ),
        "{text}"
    );
    let foreign = agent()
        .get(&format!("http://127.0.0.1:{port}/metrics"))
        .header("Host", "evil.example")
        .call()
        .expect("answer");
    assert_eq!(foreign.status().as_u16(), 403);
}

#[test]
fn tokens_are_reloaded_live_and_a_broken_config_changes_nothing() {
    let m = start("http:\n  tokens: [first-token]\n");
    let mut first = Client::new(&m, Some("first-token"));
    first.initialize();
    assert!(first.tools().contains(&"discover_sub_goals".to_owned()));

    // A new token replaces the first: new requests are checked against it at once.
    let text = std::fs::read_to_string(&m.config).expect("config");
    let swapped = text.replace("tokens: [first-token]", "tokens: [second-token]");
    std::fs::write(&m.config, &swapped).expect("config");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    eventually("the second token is let in", || {
        Client::new(&m, Some("second-token")).post(&init, None).0 == 200
    });
    assert_eq!(
        Client::new(&m, Some("first-token")).post(&init, None).0,
        401
    );

    // A broken file: nothing changes, and /healthz says where the problem is.
    std::fs::write(&m.config, format!("{swapped}tools: [oops\n")).expect("config");
    let health = || {
        agent()
            .get(&format!("{}/healthz", m.base))
            .call()
            .map(|mut r| r.body_mut().read_to_string().unwrap_or_default())
            .unwrap_or_default()
    };
    eventually("/healthz names the refused reload", || {
        health().contains("config reload refused")
    });
    let said = health();
    assert!(said.starts_with("ok\n"), "{said}");
    assert!(said.contains("moniker.yaml:"), "{said}");
    let mut second = Client::new(&m, Some("second-token"));
    second.initialize();
    assert!(second.tools().contains(&"discover_sub_goals".to_owned()));

    // Fixed: /healthz is plain again.
    std::fs::write(&m.config, &swapped).expect("config");
    eventually("/healthz is ok again", || health() == "ok");
}

#[test]
fn deprecated_names_are_announced_counted_and_retired_on_their_day() {
    let tools = "tools:\n  discover_sub_goals:\n    aliases:\n      - { name: discover_goals, deprecated: { since: 2026-01-01, remove_after: 2099-12-31 } }\n      - { name: old_goals, deprecated: { since: 2020-01-01, remove_after: 2020-06-30, use: discover_sub_goals } }\n";
    let log = scratch().join("serve.stderr");
    let m = start_with(
        tools,
        "",
        Stdio::from(std::fs::File::create(&log).expect("log")),
    );
    let with_config = |args: &[&str]| {
        let mut command = crate::check::moniker(args);
        command.arg("-c").arg(&m.config);
        crate::check::run(&mut command)
    };

    // `check` counts the days left, and says the name that is over can go.
    let (code, stdout, stderr) = with_config(&["check"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stderr.contains("deprecation::scheduled"), "{stderr}");
    assert!(
        stderr
            .contains("`discover_goals` (of `discover_sub_goals`) is deprecated since 2026-01-01"),
        "{stderr}"
    );
    assert!(stderr.contains("days left"), "{stderr}");
    assert!(stderr.contains("deprecation::expired"), "{stderr}");
    assert!(
        stderr.contains("`old_goals` (of `discover_sub_goals`) stopped resolving after 2020-06-30"),
        "{stderr}"
    );
    assert!(stderr.contains("remove it from the config"), "{stderr}");

    // The listing says it; the deprecated alias answers; the retired one is unknown.
    let mut client = Client::new(&m, None);
    client.initialize();
    let listed = client.request("tools/list", json!({}));
    let description = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "discover_sub_goals")
        .and_then(|t| t["description"].as_str())
        .expect("discover_sub_goals listed")
        .to_owned();
    assert!(
        description.contains("Deprecated name `discover_goals` (since 2026-01-01; stops working after 2099-12-31): use `discover_sub_goals`."),
        "{description}"
    );
    for _ in 0..2 {
        let answer = client.call("discover_goals");
        assert!(answer.get("result").is_some(), "{answer}");
    }
    let gone = client.call("old_goals");
    assert_eq!(gone["error"]["code"], json!(-32004), "{gone}");

    // Counted per alias in the metrics, and warned about once per session.
    let metrics = agent()
        .get(&format!("{}/metrics", m.base))
        .call()
        .map(|mut r| r.body_mut().read_to_string().unwrap_or_default())
        .expect("metrics");
    assert!(
        metrics.contains("moniker_alias_calls_total{alias=\"discover_goals\",tool=\"discover_sub_goals\",deprecated=\"true\"} 2"),
        "{metrics}"
    );
    eventually("the warning in the log", || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("called the deprecated name")
    });
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        said.matches("called the deprecated name").count(),
        1,
        "{said}"
    );

    // `moniker stats --from` shows who still calls what, beside the schedule.
    let (code, stdout, stderr) = with_config(&["stats", "--from", &m.base]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let row = |name: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in:\n{stdout}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(
        row("discover_goals").starts_with("discover_goals discover_sub_goals 2 until 2099-12-31"),
        "{stdout}"
    );
    assert!(
        row("old_goals").contains("0 removed after 2020-06-30 (over: remove it)"),
        "{stdout}"
    );
}
