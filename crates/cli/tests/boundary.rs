//! moniker as a boundary, tried the way an attacker would: raw sockets and raw JSON, real child
//! processes, real reloads. Each test names the finding of "Hold the boundary" it proves.
//!
//! The servers are the fixture with `--record`: every line moniker writes to them is kept, so a
//! test reads what really reached a server instead of trusting what moniker answered.

#![allow(
    clippy::too_many_lines,
    reason = "a test is one scenario, read from top to bottom"
)]

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use moniker_fixture::{Peer, fixture_bin, fixture_file, scratch};
use serde_json::{Value, json};

use crate::http::free_port;

/// A tool the `review` toolset does not hold: nothing a `review` client sends may reach it.
const FORBIDDEN: &str = "trigger_consolidation";
const ADMIN: &str = "admin-token-0123";
const REVIEW: &str = "review-token-4567";

/// A config with the contextgraph fixture recording to `record`, two tokens (one bound to
/// `review`), and `rest`: lines of the `http:` section when they start with two spaces, else
/// sections of their own.
fn config(dir: &Path, rest: &str) -> PathBuf {
    config_with(dir, &[], rest, "")
}

/// [`config`], with more arguments for the fixture and more lines in `toolsets:`.
fn config_with(dir: &Path, args: &[&str], rest: &str, toolsets: &str) -> PathBuf {
    let (http, rest) = match rest.starts_with("  ") {
        true => (rest, ""),
        false => ("", rest),
    };
    let record = dir.join("record.jsonl");
    let config = dir.join("moniker.yaml");
    std::fs::write(
        &config,
        format!(
            "servers:\n  cg:\n    command: {}\n    args: [{}, --record, {}{}]\n\
             http:\n  tokens:\n    - {ADMIN}\n    - {{ token: {REVIEW}, toolset: review }}\n{http}\
             toolsets:\n  review:\n    tools: [store_memory, search_graph]\n{toolsets}{rest}",
            json!(fixture_bin().display().to_string()),
            json!(fixture_file("contextgraph.json").display().to_string()),
            json!(record.display().to_string()),
            args.iter().map(|a| format!(", {a}")).collect::<String>(),
        ),
    )
    .expect("config");
    config
}

struct Gate {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Gate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `moniker serve --http` on `bind` (a free port of it) with [`config`].
fn serve_http(rest: &str, bind: &str) -> Gate {
    serve_http_with(&[], rest, "", bind)
}

fn serve_http_with(args: &[&str], rest: &str, toolsets: &str, bind: &str) -> Gate {
    let dir = scratch();
    let config = config_with(&dir, args, rest, toolsets);
    let gate = spawn_gate(dir, &config, bind);
    let deadline = Instant::now() + Duration::from_secs(30);
    while gate.tools(ADMIN).len() <= 10 {
        assert!(
            Instant::now() < deadline,
            "moniker did not list the servers' tools: {}",
            gate.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    gate
}

/// `moniker serve --http` on a free port of `bind` with `config` (its stderr in `dir`), once
/// `/healthz` answers.
fn spawn_gate(dir: PathBuf, config: &Path, bind: &str) -> Gate {
    let port = free_port();
    let stderr = std::fs::File::create(dir.join("stderr.log")).expect("stderr.log");
    let child = Command::new(env!("CARGO_BIN_EXE_moniker"))
        .args(["serve", "--http", &format!("{bind}:{port}"), "-c"])
        .arg(config)
        .env("XDG_DATA_HOME", &dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("moniker serve --http");
    let gate = Gate { child, port, dir };
    let deadline = Instant::now() + Duration::from_secs(30);
    while gate.get("/healthz").0 != 200 {
        assert!(
            Instant::now() < deadline,
            "moniker did not start: {}",
            gate.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    gate
}

/// A raw HTTP/1.1 exchange: (status, headers lowercased, body).
fn raw(port: u16, request: &[u8]) -> (u16, Vec<(String, String)>, String) {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return (0, Vec::new(), String::new());
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    stream.write_all(request).expect("write");
    let mut bytes = Vec::new();
    let _ = stream.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return (0, Vec::new(), text);
    };
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect::<Vec<_>>();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    (status, headers, body)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// The JSON-RPC message of a body: JSON, or the last `data:` of an SSE stream.
fn message_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|_| {
        body.lines()
            .rev()
            .filter_map(|l| l.strip_prefix("data:"))
            .find_map(|d| serde_json::from_str(d.trim()).ok())
            .unwrap_or(Value::Null)
    })
}

/// POSTs `body` (raw bytes, as an attacker writes them) to `path`.
fn post(
    port: u16,
    path: &str,
    token: &str,
    session: Option<&str>,
    extra: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<(String, String)>, Value) {
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
         Authorization: Bearer {token}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(session) = session {
        head.push_str(&format!("Mcp-Session-Id: {session}\r\n"));
    }
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut request = head.into_bytes();
    request.extend_from_slice(body);
    let (status, headers, body) = raw(port, &request);
    (status, headers, message_of(&body))
}

impl Gate {
    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default()
    }

    fn get(&self, path: &str) -> (u16, String) {
        let (status, _, body) = raw(
            self.port,
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        );
        (status, body)
    }

    /// POSTs `body` (raw bytes, as an attacker writes them) to `/mcp`.
    fn post(
        &self,
        token: &str,
        session: Option<&str>,
        extra: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, Vec<(String, String)>, Value) {
        self.post_to("/mcp", token, session, extra, body)
    }

    fn post_to(
        &self,
        path: &str,
        token: &str,
        session: Option<&str>,
        extra: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, Vec<(String, String)>, Value) {
        post(self.port, path, token, session, extra, body)
    }

    /// A new 2025 session of `token`: its id.
    fn session(&self, token: &str) -> String {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {"roots": {}}, "clientInfo": {"name": "attacker", "version": "0"}}});
        let (status, headers, body) = self.post(token, None, &[], init.to_string().as_bytes());
        assert_eq!(status, 200, "{body}");
        let id = headers
            .iter()
            .find(|(k, _)| k == "mcp-session-id")
            .map(|(_, v)| v.clone())
            .expect("a session id");
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.post(token, Some(&id), &[], initialized.to_string().as_bytes());
        id
    }

    fn tools(&self, token: &str) -> Vec<String> {
        let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
        let (_, _, body) = self.post(
            token,
            None,
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/list"),
            ],
            list.to_string().as_bytes(),
        );
        body["result"]["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn call(&self, token: &str, session: &str, name: &str) -> Value {
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": {}}});
        self.post(token, Some(session), &[], call.to_string().as_bytes())
            .2
    }

    fn record(&self) -> String {
        std::fs::read_to_string(self.dir.join("record.jsonl")).unwrap_or_default()
    }
}

/// A request for [`FORBIDDEN`], to be hidden in a message as whitespace-separated JSON.
fn smuggled(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{FORBIDDEN}","arguments":{{}}}}}}"#
    )
}

/// What a server received, line by line: every line must be one whole JSON-RPC message, none
/// a call of [`FORBIDDEN`], and no raw CR anywhere (Python servers split lines on it).
fn assert_one_message_a_line(record: &str) {
    assert!(!record.contains('\r'), "a raw CR reached the server");
    for line in record.lines() {
        let message: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("the server read a line that is not JSON ({e}): {line}"));
        assert!(message.is_object(), "{line}");
        assert_ne!(
            message["params"]["name"], FORBIDDEN,
            "a smuggled call reached the server: {line}"
        );
    }
}

/// Finding 1: requests smuggled into a stdio server with raw line ends, in every field a
/// client controls, in a session and without one (2026-07-28), never reach it as lines.
#[test]
fn raw_line_ends_never_split_what_reaches_a_stdio_server() {
    let gate = serve_http("", "127.0.0.1");
    let session = gate.session(REVIEW);
    let mut id = 100;
    for end in ["\n", "\r", "\r\n", "\n\r"] {
        let s = |id: u64| format!("{end}{}{end}", smuggled(id));
        // (body, is it a 2026-07-28 request)
        let carriers: Vec<(String, bool)> = vec![
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"store_memory","arguments":{{"content":"x","x":{}}}}}}}"#,
                    s(id)
                ),
                false,
            ),
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"store_memory","arguments":{{"content":"x"}},"_meta":{{"x":{}}}}}}}"#,
                    s(id + 1)
                ),
                false,
            ),
            (
                format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{{"x":{}}}}}"#,
                    s(id + 2)
                ),
                false,
            ),
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{{"level":"info","x":{}}}}}"#,
                    s(id + 3)
                ),
                false,
            ),
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{{"uri":"fixture://info","x":{}}}}}"#,
                    s(id + 4)
                ),
                false,
            ),
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":5,"method":"completion/complete","params":{{"ref":{{"type":"ref/prompt","name":"p"}},"argument":{{"name":"a","value":"b"}},"x":{}}}}}"#,
                    s(id + 5)
                ),
                false,
            ),
            (
                format!(
                    r#"[{end}{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{{"name":"search_graph","arguments":{{"query":"q","x":{}}}}}}}{end}]"#,
                    s(id + 6)
                ),
                false,
            ),
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"store_memory","arguments":{{"content":"x","x":{}}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#,
                    s(id + 7)
                ),
                true,
            ),
        ];
        for (body, modern) in carriers {
            let headers: &[(&str, &str)] = if modern {
                &[
                    ("MCP-Protocol-Version", "2026-07-28"),
                    ("Mcp-Method", "tools/call"),
                    ("Mcp-Name", "store_memory"),
                ]
            } else {
                &[]
            };
            let session = (!modern).then_some(session.as_str());
            let (status, _, answer) = gate.post(REVIEW, session, headers, body.as_bytes());
            assert!(
                matches!(status, 200 | 202),
                "{status} {answer} for {body:?}"
            );
            // The fixture echoes a call's arguments: the smuggled text may come back as data,
            // never as the forbidden tool's own answer.
            assert!(
                !answer
                    .to_string()
                    .contains(&format!(r#"\"tool\":\"{FORBIDDEN}"#)),
                "{answer} for {body:?}"
            );
        }
        id += 10;
    }
    // The forbidden tool is refused when named, and the review calls did reach the server.
    let refused = gate.call(REVIEW, &session, FORBIDDEN);
    assert_eq!(refused["error"]["code"], -32004, "{refused}");
    std::thread::sleep(Duration::from_millis(300));
    let record = gate.record();
    assert!(record.contains("store_memory"), "{record}");
    assert_one_message_a_line(&record);
}

/// Finding 1 over stdio: a client of `moniker serve` on stdio frames by LF, so a lone CR
/// inside its line reaches moniker whole; moniker must not pass it on.
#[test]
fn a_lone_cr_from_a_stdio_client_never_reaches_a_server() {
    let dir = scratch();
    let config = config(&dir, "");
    let mut peer = Peer::spawn(
        Command::new(env!("CARGO_BIN_EXE_moniker"))
            .args(["serve", "--standalone", "--toolset", "review", "-c"])
            .arg(&config)
            .env("XDG_DATA_HOME", &dir),
    );
    peer.initialize();
    for (i, end) in ["\r", "\r \r"].into_iter().enumerate() {
        peer.send_raw(&format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"store_memory","arguments":{{"content":"x","x":{end}{}{end}}}}}}}"#,
            50 + i,
            smuggled(500 + i as u64)
        ));
        let answer = peer.response_line(&json!(50 + i));
        assert!(
            !answer.contains(&format!(r#"\"tool\":\"{FORBIDDEN}"#)),
            "{answer}"
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    let record = std::fs::read_to_string(dir.join("record.jsonl")).expect("record");
    assert!(record.contains("store_memory"), "{record}");
    assert_one_message_a_line(&record);
}

/// Finding 2: `/healthz` after a refused reload says where, never what the file says.
#[test]
fn health_never_shows_the_config_text() {
    let gate = serve_http("", "127.0.0.1");
    let config = gate.dir.join("moniker.yaml");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, format!("{text}  oops: [\n")).expect("config");
    let deadline = Instant::now() + Duration::from_secs(10);
    let said = loop {
        let (_, body) = gate.get("/healthz");
        if body.contains("refused") {
            break body;
        }
        assert!(Instant::now() < deadline, "the reload was not refused");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(said.contains("moniker.yaml:"), "{said}");
    for secret in [ADMIN, REVIEW, "oops", "tokens"] {
        assert!(!said.contains(secret), "/healthz shows `{secret}`: {said}");
    }
}

/// Finding 3: a stdio server sees the SDKs' short list of moniker's environment and its own
/// `env:`; moniker's tokens and other servers' secrets only when its config names them.
#[test]
fn a_server_sees_only_the_environment_it_is_given() {
    let dir = scratch();
    let fixture = fixture_bin().display().to_string();
    let cg = fixture_file("contextgraph.json").display().to_string();
    let server = |id: &str, extra: &str| {
        format!(
            "  {id}:\n    command: sh\n    args: [-c, 'env > \"$0\"; exec \"$1\" \"$2\" --name {id}', {}, {}, {}]\n    env: {{ OWN_SETTING: mine }}\n{extra}",
            json!(dir.join(format!("{id}.env")).display().to_string()),
            json!(fixture),
            json!(cg),
        )
    };
    let config = dir.join("moniker.yaml");
    std::fs::write(
        &config,
        format!(
            "servers:\n{}{}{}naming: {{ separator: _ }}\n",
            server("plain", "    prefix: true\n"),
            server("named", "    prefix: true\n    pass_env: [GITHUB_TOKEN]\n"),
            server("all", "    prefix: true\n    pass_env: all\n"),
        ),
    )
    .expect("config");
    let output = Command::new(env!("CARGO_BIN_EXE_moniker"))
        .args(["check", "-c"])
        .arg(&config)
        .env("MONIKER_TOKENS", "tok-secret")
        .env("GITHUB_TOKEN", "ghp_secret")
        .env("HOME", "/home/someone")
        .output()
        .expect("moniker check");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let env = |id: &str| std::fs::read_to_string(dir.join(format!("{id}.env"))).expect("env");
    let plain = env("plain");
    assert!(plain.contains("OWN_SETTING=mine"), "{plain}");
    assert!(plain.contains("HOME=/home/someone"), "{plain}");
    assert!(plain.contains("PATH="), "{plain}");
    assert!(!plain.contains("tok-secret"), "{plain}");
    assert!(!plain.contains("ghp_secret"), "{plain}");
    let named = env("named");
    assert!(named.contains("GITHUB_TOKEN=ghp_secret"), "{named}");
    assert!(!named.contains("tok-secret"), "{named}");
    let all = env("all");
    assert!(
        all.contains("GITHUB_TOKEN=ghp_secret") && all.contains("MONIKER_TOKENS=tok-secret"),
        "{all}"
    );
}

/// Finding 4: a reload that would leave a listener beyond loopback without a token is
/// refused; the tokens keep being asked for.
#[test]
fn a_reload_never_opens_the_endpoint() {
    let gate = serve_http("", "0.0.0.0");
    let config = gate.dir.join("moniker.yaml");
    let text = std::fs::read_to_string(&config).expect("config");
    let start = text.find("http:").expect("http");
    let end = text.find("toolsets:").expect("toolsets");
    std::fs::write(&config, format!("{}{}", &text[..start], &text[end..])).expect("config");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, body) = gate.get("/healthz");
        if body.contains("refused") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the reload was not refused: {}",
            gate.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let (status, _, _) = gate.post("none", None, &[], init.to_string().as_bytes());
    assert_eq!(status, 401);
    assert!(gate.stderr().contains("without a bearer token"));
}

/// Findings 5 and 17: a session lives under the binding its token had; binding the token to a
/// toolset ends its sessions, and a toolset URL never widens an existing session.
#[test]
fn rebinding_a_token_ends_its_sessions() {
    let gate = serve_http("", "127.0.0.1");
    let session = gate.session(ADMIN);
    let answer = gate.call(ADMIN, &session, FORBIDDEN);
    assert!(answer.get("result").is_some(), "{answer}");
    // The review session cannot be widened through another URL.
    let review = gate.session(REVIEW);
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": FORBIDDEN, "arguments": {}}});
    let (status, _, body) = gate.post_to(
        "/mcp/other",
        REVIEW,
        Some(&review),
        &[],
        call.to_string().as_bytes(),
    );
    assert!(matches!(status, 403 | 404), "{status} {body}");

    let config = gate.dir.join("moniker.yaml");
    let text = std::fs::read_to_string(&config).expect("config");
    let bound = text.replace(
        &format!("    - {ADMIN}\n"),
        &format!("    - {{ token: {ADMIN}, toolset: review }}\n"),
    );
    assert_ne!(bound, text);
    std::fs::write(&config, bound).expect("config");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = gate.call(ADMIN, &session, FORBIDDEN);
        if answer.get("result").is_none() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the old session still calls everything: {answer}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // A new session of the token sees the toolset only.
    let fresh = gate.session(ADMIN);
    assert_eq!(gate.call(ADMIN, &fresh, FORBIDDEN)["error"]["code"], -32004);
}

/// Findings 9 and 17: the metrics count every tool's use: a token bound to a toolset may not
/// read them, and the tokenless `--metrics` listener stays on loopback.
#[test]
fn metrics_need_an_unbound_token_and_loopback() {
    let gate = serve_http("", "127.0.0.1");
    let get = |token: &str| {
        raw(
            gate.port,
            format!("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n\r\n").as_bytes(),
        )
    };
    let (status, _, body) = get(REVIEW);
    assert_eq!(status, 403, "{body}");
    assert!(!body.contains("moniker_tool_calls"), "{body}");
    let (status, _, body) = get(ADMIN);
    assert_eq!(status, 200, "{body}");

    let dir = scratch();
    let config = config(&dir, "");
    let output = Command::new(env!("CARGO_BIN_EXE_moniker"))
        .args([
            "serve",
            "--metrics",
            &format!("0.0.0.0:{}", free_port()),
            "-c",
        ])
        .arg(&config)
        .stdin(Stdio::null())
        .output()
        .expect("moniker serve --metrics");
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("refusing to serve metrics"), "{said}");
}

/// Finding 8: a secret in a server's URL (query values, userinfo) never shows in logs or in
/// a command's errors.
#[test]
fn secrets_in_a_server_url_are_never_shown() {
    let dir = scratch();
    let config = dir.join("moniker.yaml");
    let port = free_port();
    std::fs::write(
        &config,
        format!(
            "servers:\n  remote:\n    url: \"http://user:pa55word@127.0.0.1:{port}/mcp?api_key=${{API_KEY}}&v=1\"\n"
        ),
    )
    .expect("config");
    let output = Command::new(env!("CARGO_BIN_EXE_moniker"))
        .args(["check", "--log", "trace", "-c"])
        .arg(&config)
        .env("API_KEY", "sk-very-secret")
        .env("XDG_DATA_HOME", &dir)
        .output()
        .expect("moniker check");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(said.contains("api_key=***"), "{said}");
    assert!(!said.contains("sk-very-secret"), "{said}");
    assert!(!said.contains("pa55word"), "{said}");
}

/// Finding 14: a server that redirects elsewhere never gets moniker's configured headers
/// sent on to the other host.
#[test]
fn configured_headers_never_follow_a_redirect_elsewhere() {
    use std::net::TcpListener;
    use std::sync::{Arc, Mutex};
    let elsewhere = TcpListener::bind("127.0.0.1:0").expect("bind");
    let elsewhere_port = elsewhere.local_addr().expect("addr").port();
    let redirecting = TcpListener::bind("127.0.0.1:0").expect("bind");
    let redirecting_port = redirecting.local_addr().expect("addr").port();
    let seen = Arc::new(Mutex::new(String::new()));
    let heard = seen.clone();
    // The other host: records whatever reaches it.
    elsewhere.set_nonblocking(true).expect("nonblocking");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    let other = std::thread::spawn(move || {
        while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
            match elsewhere.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(false).ok();
                    s.set_read_timeout(Some(Duration::from_secs(2))).ok();
                    let mut buf = [0u8; 4096];
                    let n = s.read(&mut buf).unwrap_or(0);
                    heard
                        .lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                    let _ = s.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    });
    // The server: every request is sent to the other host.
    let location = format!("http://127.0.0.1:{elsewhere_port}/mcp");
    std::thread::spawn(move || {
        for stream in redirecting.incoming() {
            let Ok(mut s) = stream else { break };
            s.set_read_timeout(Some(Duration::from_secs(2))).ok();
            let mut buf = [0u8; 8192];
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                format!("HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes(),
            );
        }
    });
    let dir = scratch();
    let config = dir.join("moniker.yaml");
    std::fs::write(
        &config,
        format!(
            "servers:\n  remote:\n    url: http://127.0.0.1:{redirecting_port}/mcp\n    headers: {{ X-Api-Key: header-secret }}\n"
        ),
    )
    .expect("config");
    let output = Command::new(env!("CARGO_BIN_EXE_moniker"))
        .args(["check", "-c"])
        .arg(&config)
        .env("XDG_DATA_HOME", &dir)
        .output()
        .expect("moniker check");
    assert!(!output.status.success());
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = other.join();
    let reached = seen.lock().unwrap().clone();
    assert!(
        !reached.contains("header-secret"),
        "the configured header followed the redirect: {reached}"
    );
}

/// Finding 6: one token cannot lock the others out by opening sessions: at its share, its own
/// least recently used idle session ends; other tokens keep opening theirs.
#[test]
fn one_token_cannot_fill_the_sessions_of_everyone() {
    let gate = serve_http("  max_sessions_per_token: 3\n", "127.0.0.1");
    let first = gate.session(REVIEW);
    for _ in 0..20 {
        gate.session(REVIEW);
    }
    let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"});
    let (status, _, _) = gate.post(REVIEW, Some(&first), &[], ping.to_string().as_bytes());
    assert_eq!(status, 404, "the oldest idle session of the token ended");
    let admin = gate.session(ADMIN);
    let answer = gate.call(ADMIN, &admin, FORBIDDEN);
    assert!(answer.get("result").is_some(), "{answer}");
}

/// Finding 7: a connection that sends half a header is closed, and half-open connections
/// cannot keep a well-behaved client out for longer than the header timeout.
#[test]
fn half_sent_headers_do_not_hold_the_listener() {
    let gate = serve_http("  max_connections: 8\n", "127.0.0.1");
    let opened = Instant::now();
    let mut held: Vec<TcpStream> = (0..8)
        .filter_map(|_| TcpStream::connect(("127.0.0.1", gate.port)).ok())
        .collect();
    for stream in &mut held {
        let _ = stream.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    }
    // A well-behaved client still gets in: once the half-sent headers time out.
    let (status, _) = gate.get("/healthz");
    assert_eq!(status, 200);
    assert!(opened.elapsed() < Duration::from_secs(20));
    for mut stream in held {
        stream
            .set_read_timeout(Some(Duration::from_secs(15)))
            .expect("timeout");
        let mut buf = [0u8; 1024];
        // Closed by moniker (EOF, a 408 then EOF, or a reset): never left open.
        match stream.read(&mut buf) {
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                panic!("a half-sent header was left open")
            }
            Ok(_) | Err(_) => {}
        }
        assert!(opened.elapsed() < Duration::from_secs(20));
    }
}

/// The SSE stream of a session (GET), read in a thread: what it received so far.
fn listen(port: u16, token: &str, session: &str) -> std::sync::Arc<std::sync::Mutex<String>> {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let heard = seen.clone();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .write_all(
            format!(
                "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
                 Accept: text/event-stream\r\nMcp-Session-Id: {session}\r\n\r\n"
            )
            .as_bytes(),
        )
        .expect("GET");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 {
                break;
            }
            heard
                .lock()
                .expect("lock")
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    seen
}

/// The JSON-RPC requests that came on a session's stream.
fn requests_in(stream: &str) -> Vec<Value> {
    stream
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .filter(|m| m.get("method").is_some() && m.get("id").is_some())
        .collect()
}

/// Finding 11: a server's request goes to the client whose call is in progress on that
/// server, and to nobody when two clients have calls there (a stdio server names no call):
/// never to the other caller, who would answer it and read what it holds.
#[test]
fn a_servers_request_reaches_only_the_client_it_concerns() {
    let gate = serve_http_with(&["--sample-tool"], "", "", "127.0.0.1");
    let a = gate.session(ADMIN);
    let b = gate.session(ADMIN);
    let heard_a = listen(gate.port, ADMIN, &a);
    let heard_b = listen(gate.port, ADMIN, &b);
    std::thread::sleep(Duration::from_millis(300));
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "fixture_sample", "arguments": {}}}).to_string();
    let port = gate.port;
    let (a2, call_a) = (a.clone(), call.clone());
    let first =
        std::thread::spawn(move || post(port, "/mcp", ADMIN, Some(&a2), &[], call_a.as_bytes()).2);
    // A's call waits for A's answer to the server's sampling request.
    let deadline = Instant::now() + Duration::from_secs(10);
    let asked = loop {
        let requests = requests_in(&heard_a.lock().expect("lock"));
        if let Some(request) = requests.first() {
            break request.clone();
        }
        assert!(Instant::now() < deadline, "A was never asked");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(asked["method"], "sampling/createMessage");
    // B calls the same server meanwhile: two calls there, and its server's request cannot be
    // told apart. It is refused to the server, and reaches neither A nor B.
    let second = gate.post(ADMIN, Some(&b), &[], call.as_bytes()).2;
    assert_eq!(second["result"]["isError"], true, "{second}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        requests_in(&heard_a.lock().expect("lock")).len(),
        1,
        "A was asked B's request"
    );
    assert!(requests_in(&heard_b.lock().expect("lock")).is_empty());
    // A answers its own: its call ends with its answer.
    let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"role": "assistant", "content": {"type": "text", "text": "A's answer"}, "model": "m"}});
    let (status, _, _) = gate.post(ADMIN, Some(&a), &[], answer.to_string().as_bytes());
    assert_eq!(status, 202);
    let done = first.join().expect("A's call");
    assert!(done.to_string().contains("A's answer"), "{done}");
}

/// Finding 18, after start: a server whose new listing would take a name another has keeps
/// the rest of its listing; the name is served by neither (by rule, not by who listed first),
/// and the collision is said at `warn`, with its fix, and in `/healthz`.
#[test]
fn a_colliding_new_listing_is_refused_out_loud() {
    let dir = scratch();
    let other = dir.join("other.json");
    std::fs::write(
        &other,
        json!({"tools": [{"name": "fixture_added_tool", "inputSchema": {"type": "object"}}]})
            .to_string(),
    )
    .expect("inventory");
    let fixture = json!(fixture_bin().display().to_string());
    let config = dir.join("moniker.yaml");
    std::fs::write(
        &config,
        format!(
            "servers:\n  growing:\n    command: {fixture}\n    args: [--list-changed-after, \"1\"]\n  other:\n    command: {fixture}\n    args: [{}]\n",
            json!(other.display().to_string())
        ),
    )
    .expect("config");
    let gate = spawn_gate(dir, &config, "127.0.0.1");
    let session = gate.session("none");
    let answer = gate.call("none", &session, "echo");
    assert!(answer.get("result").is_some(), "{answer}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let health = loop {
        let (_, body) = gate.get("/healthz");
        if body.contains("growing") {
            break body;
        }
        assert!(Instant::now() < deadline, "{body}\n{}", gate.stderr());
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(health.contains("naming::duplicate"), "{health}");
    let log = gate.stderr();
    assert!(log.contains("WARN"), "{log}");
    assert!(
        log.contains("growing/fixture_added_tool"),
        "the fix is in the log: {log}"
    );
    // Both servers still serve the rest; the name both claim is served by neither.
    let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"});
    let (_, _, tools) = gate.post("none", Some(&session), &[], list.to_string().as_bytes());
    let names = tools.to_string();
    assert!(
        names.contains("\"echo\"") && !names.contains("fixture_added_tool"),
        "{names}"
    );
}

/// Finding 16: a slow Redis (here stopped with SIGSTOP) never holds requests: they are
/// answered from the toolsets last read. (Each request used to wait up to 500 ms for Redis,
/// one after the other: 20 of them took 10 s and more.)
#[test]
fn a_stopped_redis_holds_no_request() {
    let Some(redis) = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("redis-server"))
            .find(|p| p.is_file())
    }) else {
        eprintln!("skipped: redis-server is not installed (scripts/test installs it)");
        return;
    };
    let redis_port = free_port();
    let dir = scratch();
    /// Ends the Redis server whatever happens (woken first, if it was stopped).
    struct Redis(Child);
    impl Drop for Redis {
        fn drop(&mut self) {
            let _ = Command::new("kill")
                .args(["-CONT", &self.0.id().to_string()])
                .status();
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let server = Command::new(redis)
        .args([
            "--port",
            &redis_port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
        ])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server");
    let server = Redis(server);
    // The store is read once at start: `review` is there, saved through "another replica".
    let cli = |args: &[&str]| {
        Command::new("redis-cli")
            .args(["-p", &redis_port.to_string()])
            .args(args)
            .output()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cli(&["ping"]).is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("PONG")) {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let saved =
        json!({"version": 1, "name": "saved", "tools": [{"name": "search_graph"}]}).to_string();
    cli(&["hset", "moniker:toolsets", "saved", &saved]).expect("redis-cli");
    let gate = serve_http_with(
        &[],
        "",
        &format!("  manage: true\n  store: redis://127.0.0.1:{redis_port}/0\n"),
        "127.0.0.1",
    );
    let list = |path: &str| {
        let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
        gate.post_to(
            path,
            ADMIN,
            None,
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/list"),
            ],
            list.to_string().as_bytes(),
        )
    };
    let (status, _, body) = list("/mcp/saved");
    assert_eq!(status, 200, "{body}\n{}", gate.stderr());
    assert_eq!(
        body["result"]["tools"].as_array().map(Vec::len),
        Some(1),
        "{body}"
    );
    // Redis stops answering (its process stopped): requests go on, from what was read.
    let signal = |name: &str| {
        Command::new("kill")
            .args([name, &server.0.id().to_string()])
            .status()
            .expect("kill")
    };
    assert!(signal("-STOP").success());
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    for _ in 0..20 {
        let (status, _, body) = list("/mcp/saved");
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body["result"]["tools"].as_array().map(Vec::len),
            Some(1),
            "{body}"
        );
    }
    let took = started.elapsed();
    signal("-CONT");
    assert!(
        took < Duration::from_secs(5),
        "20 requests took {took:?} while Redis was stopped: they waited for it"
    );
    drop(gate);
}

/// Finding 15: what one client can make moniker hold is bounded, with an error that names the
/// limit: a batch of more messages than a session may have in progress is refused whole; a
/// stateless client has a bounded number of listen streams.
#[test]
fn a_client_cannot_grow_what_moniker_holds_without_bound() {
    let gate = serve_http("", "127.0.0.1");
    let session = gate.session(ADMIN);
    let batch: Vec<Value> = (0..300)
        .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "ping"}))
        .collect();
    let (status, _, body) = gate.post(
        ADMIN,
        Some(&session),
        &[],
        Value::Array(batch).to_string().as_bytes(),
    );
    // Refused as the body is read, before any of its messages is: the body is a bad request.
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], -32043, "{body}");
    assert!(body.to_string().contains("at most 256"), "{body}");
    // A batch within the limit is answered whole, in order.
    let batch: Vec<Value> = (0..200)
        .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "ping"}))
        .collect();
    let (_, _, body) = gate.post(
        ADMIN,
        Some(&session),
        &[],
        Value::Array(batch).to_string().as_bytes(),
    );
    let answers = body.as_array().expect("answers");
    assert_eq!(answers.len(), 200);
    assert!(answers.iter().enumerate().all(|(i, a)| a["id"] == i));

    // Stateless listen streams: 16 open at once per token, the 17th refused.
    let listen = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}, "notifications": {"toolsListChanged": true}}}).to_string();
    let open = || {
        let mut stream = TcpStream::connect(("127.0.0.1", gate.port)).expect("connect");
        stream
            .write_all(
                format!(
                    "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {REVIEW}\r\n\
                     Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
                     MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\n\
                     Content-Length: {}\r\n\r\n{listen}",
                    listen.len()
                )
                .as_bytes(),
            )
            .expect("listen");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut seen = String::new();
        let mut buf = [0u8; 4096];
        while !seen.contains("\n\n") || !seen.contains("data:") {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
            }
        }
        (stream, seen)
    };
    let held: Vec<(TcpStream, String)> = (0..16).map(|_| open()).collect();
    for (_, seen) in &held {
        assert!(seen.contains("acknowledged"), "{seen}");
    }
    let (_, refused) = open();
    assert!(refused.contains("-32043"), "{refused}");
}

// -------------------------------------------------------------------------------------------
// "Hold the boundary, round two": each test names its finding; each failed on the code before
// the change that made it pass.

/// A stateless (2026-07-28) `tools/call` of `name` with `arguments` to `path`.
fn call_at(gate: &Gate, path: &str, name: &str, arguments: Value) -> Value {
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
    gate.post_to(
        path,
        ADMIN,
        None,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", name),
        ],
        call.to_string().as_bytes(),
    )
    .2
}

/// Finding 1: a toolset chosen by tag listed an action tool whole (it carries the union of
/// its members' tags), and `{"action": "trigger"}` then ran a member the toolset does not
/// hold. Now the toolset offers the action tool made of its selected members alone.
#[test]
fn a_toolset_by_tag_reaches_only_the_members_it_selects() {
    let gate = serve_http_with(
        &[],
        "tools:\n  search_graph: { tags: [read] }\n\
         actions:\n  memory:\n    tools: { search: search_graph, trigger: trigger_consolidation }\n",
        "  readonly:\n    tags: [read]\n",
        "127.0.0.1",
    );
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
    let (_, _, listed) = gate.post_to(
        "/mcp/readonly",
        ADMIN,
        None,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ],
        list.to_string().as_bytes(),
    );
    let tools = listed["result"]["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 1, "{listed}");
    assert_eq!(tools[0]["name"], "memory");
    assert_eq!(
        tools[0]["inputSchema"]["properties"]["action"]["enum"],
        json!(["search"]),
        "{listed}"
    );
    assert!(!tools[0].to_string().contains("trigger"), "{listed}");

    let refused = call_at(
        &gate,
        "/mcp/readonly",
        "memory",
        json!({"action": "trigger"}),
    );
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let text = refused["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("Unknown action: trigger") && text.contains("Valid actions: search"),
        "{refused}"
    );
    let found = call_at(
        &gate,
        "/mcp/readonly",
        "memory",
        json!({"action": "search", "query": "x"}),
    );
    assert!(found.get("result").is_some(), "{found}");
    let record = gate.record();
    assert!(record.contains("search_graph"), "the selected member ran");
    assert!(
        !record.contains(FORBIDDEN),
        "a member the toolset does not select reached its server"
    );
}

/// Finding 12: the protected-resource metadata of `/mcp/<name>` answered 200 for a toolset
/// that exists and 404 for one that does not, so anyone could list them. Every name a
/// toolset could have is answered alike.
#[test]
fn toolset_names_cannot_be_enumerated() {
    let gate = serve_http(
        "  auth:\n    issuer: https://idp.example.com\n    resource: https://gw.example.com/mcp\n",
        "127.0.0.1",
    );
    let (known, body) = gate.get("/.well-known/oauth-protected-resource/mcp/review");
    assert_eq!(known, 200, "{body}");
    let (unknown, other) = gate.get("/.well-known/oauth-protected-resource/mcp/no-such-set");
    assert_eq!(unknown, 200, "{other}");
    let shape = |text: &str| {
        let mut v: Value = serde_json::from_str(text).expect("JSON");
        v["resource"] = Value::Null;
        v
    };
    assert_eq!(
        shape(&body),
        shape(&other),
        "the two answers differ only by name"
    );
    let (not_a_name, _) = gate.get("/.well-known/oauth-protected-resource/mcp/a/b");
    assert_eq!(not_a_name, 404);
}

/// Finding 13: the session caps were checked before `initialize` was answered and recorded
/// after: 200 initializes at once left 26 sessions under a cap of 5. Sessions being opened
/// now count against the caps.
#[test]
fn session_caps_hold_against_initializes_sent_at_once() {
    let gate = serve_http("  max_sessions_per_token: 5\n", "127.0.0.1");
    let port = gate.port;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "racer", "version": "0"}}}).to_string();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(100));
    let racers: Vec<_> = (0..100)
        .map(|_| {
            let (init, barrier) = (init.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let (status, headers, _) = post(port, "/mcp", REVIEW, None, &[], init.as_bytes());
                (status == 200)
                    .then(|| {
                        headers
                            .into_iter()
                            .find(|(k, _)| k == "mcp-session-id")
                            .map(|(_, v)| v)
                    })
                    .flatten()
            })
        })
        .collect();
    let ids: Vec<String> = racers
        .into_iter()
        .filter_map(|r| r.join().expect("racer"))
        .collect();
    let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}).to_string();
    let live = ids
        .iter()
        .filter(|id| gate.post(REVIEW, Some(id), &[], ping.as_bytes()).0 == 200)
        .count();
    assert!(
        live <= 5,
        "{live} sessions of one token are live under a cap of 5 ({} initializes answered)",
        ids.len()
    );
}

/// Finding 4: one pool of 1,024 connections with no share per address, so one host without
/// credentials held every place (renewing its sockets as the header timeout closed them) and
/// a valid token's ping waited. Now, when every place is taken, a client of an address below
/// its share takes the oldest place of the address that holds the most.
#[test]
fn one_address_cannot_hold_every_connection() {
    let gate = serve_http("  max_connections: 8\n", "127.0.0.1");
    let from = |ip: [u8; 4]| {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("socket");
        socket
            .bind(&std::net::SocketAddr::from((ip, 0)).into())
            .expect("bind a loopback source");
        socket
            .connect(&std::net::SocketAddr::from(([127, 0, 0, 1], gate.port)).into())
            .expect("connect");
        TcpStream::from(socket)
    };
    // The attacker's host takes every place, sending nothing.
    let held: Vec<TcpStream> = (0..8).map(|_| from([127, 0, 0, 2])).collect();
    std::thread::sleep(Duration::from_millis(300));
    // A client of another address is answered at once, well within the header timeout the
    // attacker's sockets would otherwise hold the places for (10 s).
    let mut client = from([127, 0, 0, 1]);
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    client
        .write_all(
            format!(
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer {ADMIN}\r\n\
                 Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
                 Content-Length: {}\r\n\r\n{ping}",
                ping.len()
            )
            .as_bytes(),
        )
        .expect("write");
    let mut answer = Vec::new();
    let _ = client.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 "), "no answer: {answer:?}");
    // The place came from the attacker: its oldest connection was closed.
    let mut oldest = &held[0];
    oldest
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut byte = [0u8; 1];
    assert!(
        matches!(oldest.read(&mut byte), Ok(0) | Err(_)),
        "the attacker's oldest connection is still open"
    );
}

/// Finding 2: a server's listing was gathered whole (10,000 pages of up to 16 MiB) before
/// anything looked at it: a 200 MB listing held 1.64 GB. A listing past the budget is refused
/// page by page, said at `warn`, and the other servers serve on.
#[test]
fn a_listing_past_its_budget_is_refused_and_holds_little() {
    let dir = scratch();
    let inventory = dir.join("huge.json");
    // 40,000 tools of about 1.2 KB: 48 MB, past the 32 MiB and 20,000 items of the budget.
    let padding = "p".repeat(1_100);
    let tools: Vec<Value> = (0..40_000)
        .map(|i| json!({"name": format!("huge_{i}"), "description": padding, "inputSchema": {"type": "object"}}))
        .collect();
    std::fs::write(
        &inventory,
        json!({"serverInfo": {"name": "huge", "version": "1"}, "tools": tools}).to_string(),
    )
    .expect("inventory");
    let huge = format!(
        "servers:\n  huge:\n    command: {}\n    args: [{}, --page-size, 500]\n",
        json!(fixture_bin().display().to_string()),
        json!(inventory.display().to_string()),
    );
    let config = dir.join("moniker.yaml");
    std::fs::write(
        &config,
        format!(
            "{huge}  cg:\n    command: {}\n    args: [{}]\nhttp:\n  tokens: [{ADMIN}]\n",
            json!(fixture_bin().display().to_string()),
            json!(fixture_file("contextgraph.json").display().to_string()),
        ),
    )
    .expect("config");
    let gate = spawn_gate(dir, &config, "127.0.0.1");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !gate.stderr().contains("over moniker's budget") {
        assert!(
            Instant::now() < deadline,
            "the listing was not refused: {}",
            gate.stderr()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let tools = gate.tools(ADMIN);
    assert!(tools.len() > 10, "the other server serves on");
    assert!(!tools.iter().any(|t| t.starts_with("huge_")));
    let (_, health) = gate.get("/healthz");
    assert!(
        health.contains("server `huge`") && health.contains("budget::listing"),
        "{health}"
    );
    // What it held at its peak, against the 48 MB the server sent: bounded by the budget.
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", gate.child.id())).expect("/proc status");
    let peak_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    assert!(
        peak_kib < 256 * 1024,
        "moniker peaked at {} MiB for a 48 MB listing",
        peak_kib / 1024
    );
}

/// Finding 7, its last part: the requests in progress were bounded per session (1,024) while
/// a token may hold 1,000 sessions. All of a token's sessions together now hold at most
/// 4,096: a batch past that is refused at once, naming the limit.
#[test]
fn a_token_holds_its_requests_in_progress_together() {
    let gate = serve_http_with(&["--hang-tools", "search_graph"], "", "", "127.0.0.1");
    let batch = |from: usize| {
        let calls: Vec<Value> = (from..from + 250)
            .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "search_graph", "arguments": {"query": "x"}}}))
            .collect();
        Value::Array(calls).to_string()
    };
    // 4 sessions of 1,000 hanging calls each (4 batches of 250): 4,000 of the token's 4,096.
    let mut held = Vec::new();
    for s in 0..4 {
        let session = gate.session(REVIEW);
        for b in 0..4 {
            let body = batch(s * 1_000 + b * 250);
            let mut stream = TcpStream::connect(("127.0.0.1", gate.port)).expect("connect");
            stream
                .write_all(
                    format!(
                        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {REVIEW}\r\n\
                         Mcp-Session-Id: {session}\r\nContent-Type: application/json\r\n\
                         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                )
                .expect("write");
            held.push(stream);
        }
    }
    // Let moniker read them all.
    std::thread::sleep(Duration::from_secs(2));
    let fifth = gate.session(REVIEW);
    let (status, _, body) = gate.post(REVIEW, Some(&fifth), &[], batch(9_000).as_bytes());
    assert_eq!(body["error"]["code"], -32043, "{status} {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("4096")),
        "{body}"
    );
    // Another token is not concerned.
    let admin = gate.session(ADMIN);
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let (status, _, _) = gate.post(ADMIN, Some(&admin), &[], ping.to_string().as_bytes());
    assert_eq!(status, 200);
    drop(held);
}
