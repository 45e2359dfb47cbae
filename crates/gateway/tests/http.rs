//! The Streamable HTTP transport end to end: a real `Gateway` over real fixture server
//! processes, served on a real socket on 127.0.0.1, spoken to with a real HTTP client.
//! Every wait is bounded.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use moniker_config::GatewaySettings;
use moniker_fixture::fixture_bin;
use moniker_gateway::connect::ServerSpec;
use moniker_gateway::serve::http::{self, HttpSettings, Token};
use moniker_gateway::{Gateway, ServerEntry, Settings};
use moniker_surface::Rules;
use moniker_surface::toolsets::ToolsetRule;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(20);

async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// A gateway over one fixture server (run with `args`), served over HTTP.
struct Server {
    url: String,
    addr: SocketAddr,
    gateway: Arc<Gateway>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl Server {
    async fn start(args: &[&str], settings: HttpSettings) -> Self {
        Self::start_with(args, Rules::default(), settings).await
    }

    async fn start_with(args: &[&str], rules: Rules, settings: HttpSettings) -> Self {
        let bin = fixture_bin();
        let entry = ServerEntry {
            id: "fixture".parse().expect("server id"),
            spec: ServerSpec::Stdio {
                command: bin.display().to_string(),
                args: args.iter().map(|a| (*a).to_owned()).collect(),
                env: IndexMap::new(),
                pass_env: moniker_config::PassEnv::default(),
                cwd: None,
            },
            modern: false,
            sandbox: None,
            per_person: None,
        };
        let settings_gw = Settings {
            config: GatewaySettings {
                call_timeout: Duration::from_secs(15),
                ..GatewaySettings::default()
            },
            ..Settings::default()
        };
        let gateway = within(
            "gateway start",
            Gateway::start(rules, vec![entry], settings_gw),
        )
        .await
        .unwrap_or_else(|_| panic!("the gateway did not start"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(moniker_gateway::serve::over_http(
            gateway.clone(),
            listener,
            settings,
            async {
                let _ = stopped.await;
            },
        ));
        Self {
            url: format!("http://{addr}/mcp"),
            addr,
            gateway,
            stop: Some(stop),
            task: Some(task),
        }
    }

    fn client(&self) -> Client {
        Client::new(&self.url)
    }

    /// Stops the transport (which must end by itself) and the servers.
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            within("the HTTP transport to stop", task)
                .await
                .expect("join")
                .expect("serve");
        }
        self.gateway.shutdown().await;
    }
}

/// A raw Streamable HTTP client.
struct Client {
    http: reqwest::Client,
    url: String,
    session: Option<String>,
    token: Option<String>,
    next_id: u64,
}

const BOTH: &str = "application/json, text/event-stream";
const JSON_ONLY: &[(&str, &str)] = &[("Accept", "application/json")];

impl Client {
    fn new(url: &str) -> Self {
        Self {
            // moniker builds reqwest without a default TLS provider: plain http needs none,
            // but reqwest wants one chosen.
            http: {
                let _ = rustls::crypto::ring::default_provider().install_default();
                reqwest::Client::new()
            },
            url: url.to_owned(),
            session: None,
            token: None,
            next_id: 0,
        }
    }

    /// Another client on the same session.
    fn clone_session(&self) -> Self {
        Self {
            http: self.http.clone(),
            url: self.url.clone(),
            session: self.session.clone(),
            token: self.token.clone(),
            next_id: 1000,
        }
    }

    fn with_token(mut self, token: &str) -> Self {
        self.token = Some(token.to_owned());
        self
    }

    fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let mut builder = self.http.request(method, &self.url);
        if let Some(session) = &self.session {
            builder = builder.header("Mcp-Session-Id", session);
        }
        if let Some(token) = &self.token {
            builder = builder.header("Authorization", format!("Bearer {token}"));
        }
        builder
    }

    /// A POST of `body` with the usual headers plus `extra` (which replace them).
    async fn post(&self, body: &str, extra: &[(&str, &str)]) -> reqwest::Response {
        let mut builder = self.request(reqwest::Method::POST);
        let defaults = [
            ("Content-Type", "application/json"),
            ("Accept", BOTH),
            ("MCP-Protocol-Version", "2025-06-18"),
        ];
        for (name, value) in defaults {
            if !extra.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                builder = builder.header(name, value);
            }
        }
        for (name, value) in extra {
            builder = builder.header(*name, *value);
        }
        within("POST", builder.body(body.to_owned()).send())
            .await
            .expect("POST sent")
    }

    fn next_request(&mut self, method: &str, params: Value) -> (Value, String) {
        self.next_id += 1;
        let id = json!(self.next_id);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        (id, body.to_string())
    }

    /// A request answered as JSON: the whole response message.
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.call_with(method, params, &[]).await
    }

    /// [`Client::call`] with more headers.
    async fn call_with(&mut self, method: &str, params: Value, extra: &[(&str, &str)]) -> Value {
        let (id, body) = self.next_request(method, params);
        let response = self.post(&body, extra).await;
        assert_eq!(response.status(), StatusCode::OK, "{method}");
        assert_eq!(content_type(&response), "application/json");
        let value: Value = serde_json::from_str(&text(response).await).expect("JSON");
        assert_eq!(value["id"], id, "{value}");
        value
    }

    async fn initialize(&mut self) -> Value {
        let (_, body) = self.next_request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {"sampling": {}}, "clientInfo": {"name": "http-test", "version": "0"}}),
        );
        let response = self.post(&body, &[]).await;
        assert_eq!(response.status(), StatusCode::OK);
        let session = response
            .headers()
            .get("mcp-session-id")
            .expect("a session id")
            .to_str()
            .expect("visible ASCII")
            .to_owned();
        self.session = Some(session);
        let value: Value = serde_json::from_str(&text(response).await).expect("JSON");
        assert!(value["result"]["protocolVersion"].is_string(), "{value}");
        let response = self
            .post(
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                &[],
            )
            .await;
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        value
    }

    async fn get_stream(&self, last_event_id: Option<&str>) -> Sse {
        let mut builder = self
            .request(reqwest::Method::GET)
            .header("Accept", "text/event-stream");
        if let Some(id) = last_event_id {
            builder = builder.header("Last-Event-ID", id);
        }
        let response = within("GET", builder.send()).await.expect("GET sent");
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(content_type(&response), "text/event-stream");
        Sse::new(response)
    }
}

fn content_type(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

async fn text(response: reqwest::Response) -> String {
    within("a body", response.text()).await.expect("body")
}

/// One server-sent event.
#[derive(Debug)]
struct Event {
    id: Option<String>,
    data: Value,
}

/// An SSE response, read event by event.
struct Sse {
    response: reqwest::Response,
    buf: String,
    /// The ids of the priming events seen (an id and empty data).
    primes: Vec<String>,
}

impl Sse {
    fn new(response: reqwest::Response) -> Self {
        Self {
            response,
            buf: String::new(),
            primes: Vec::new(),
        }
    }

    /// The next event with data (comments skipped); `None` when the stream ended.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut id = None;
                let mut data = Vec::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v).to_owned());
                    }
                }
                if data.concat().is_empty() {
                    self.primes.extend(id);
                    continue;
                }
                let data = serde_json::from_str(&data.join("\n")).expect("JSON data");
                return Some(Event { id, data });
            }
            let chunk = within("an SSE chunk", self.response.chunk())
                .await
                .expect("SSE read")?;
            self.buf
                .push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
        }
    }

    async fn event(&mut self) -> Event {
        self.next()
            .await
            .expect("an event, not the end of the stream")
    }

    /// The next event whose data satisfies `pred`; others are skipped.
    async fn wait_for(&mut self, pred: impl Fn(&Value) -> bool) -> Event {
        loop {
            let event = self.event().await;
            if pred(&event.data) {
                return event;
            }
        }
    }
}

/// Sends raw bytes of HTTP/1.1 and returns the response's head.
async fn raw(addr: SocketAddr, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = within("connect", tokio::net::TcpStream::connect(addr))
        .await
        .expect("connect");
    // The server may answer and close before it has read everything.
    let _ = within("write", tcp.write_all(request.as_bytes())).await;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = within("a response", tcp.read(&mut buf))
            .await
            .expect("read");
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

fn tool_text(response: &Value) -> String {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {response}"))
        .to_owned()
}

fn error_code(body: &str) -> i64 {
    let value: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {body}"));
    value["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no error code: {body}"))
}

fn settings() -> HttpSettings {
    HttpSettings::default()
}

fn token(secret: &str, toolset: Option<&str>) -> Token {
    Token {
        token: secret.to_owned(),
        toolset: toolset.map(str::to_owned),
        name: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_creates_a_session_and_delete_ends_it() {
    let server = Server::start(&[], settings()).await;
    let mut client = server.client();
    let init = client.initialize().await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    let session = client.session.clone().expect("session");
    assert!(session.len() >= 32, "{session}");
    assert!(session.bytes().all(|b| b.is_ascii_graphic()), "{session}");
    // Each initialize is a session of its own.
    let mut other = server.client();
    other.initialize().await;
    assert_ne!(other.session, client.session);

    let response = client
        .request(reqwest::Method::DELETE)
        .send()
        .await
        .expect("DELETE");
    assert!(response.status().is_success(), "{}", response.status());
    let (_, body) = client.next_request("tools/list", json!({}));
    let response = client.post(&body, &[]).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let response = client
        .request(reqwest::Method::DELETE)
        .send()
        .await
        .expect("DELETE");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let response = client
        .request(reqwest::Method::GET)
        .header("Accept", "text/event-stream")
        .send()
        .await
        .expect("GET");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    // The other session is untouched.
    let listed = other.call("tools/list", json!({})).await;
    assert!(listed["result"]["tools"].is_array());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_and_call_over_json() {
    let server = Server::start(&[], settings()).await;
    let mut client = server.client();
    client.initialize().await;
    let listed = client.call("tools/list", json!({})).await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["echo"]);
    let called = client
        .call(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}}),
        )
        .await;
    let echoed: Value = serde_json::from_str(&tool_text(&called)).expect("JSON text");
    assert_eq!(echoed, json!({"text": "hi"}));
    // A protocol error is a JSON-RPC error in a 200 response.
    let unknown = client
        .call("tools/call", json!({"name": "nope", "arguments": {}}))
        .await;
    assert_eq!(unknown["error"]["code"], -32004);
    // Without MCP-Protocol-Version (2025-03-26 clients) it works too.
    let (_, body) = client.next_request("ping", json!({}));
    let response = client
        .request(reqwest::Method::POST)
        .header("Content-Type", "application/json")
        .header("Accept", BOTH)
        .body(body)
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status(), StatusCode::OK);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_tools_list_and_call_over_sse() {
    let server = Server::start(&[], settings()).await;
    let mut client = server.client();
    let sse_only = [("Accept", "text/event-stream")];
    let (_, body) = client.next_request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    let response = client.post(&body, &sse_only).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(content_type(&response), "text/event-stream");
    client.session = Some(
        response.headers()["mcp-session-id"]
            .to_str()
            .expect("id")
            .to_owned(),
    );
    let mut stream = Sse::new(response);
    let init = stream.event().await;
    assert_eq!(init.data["result"]["protocolVersion"], "2025-11-25");
    assert!(stream.next().await.is_none(), "one event, then the end");
    client
        .post(
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            &sse_only,
        )
        .await;

    // A 2025-11-25 session's GET stream starts with a priming event.
    let mut get = client.get_stream(None).await;
    let (id, body) = client.next_request("tools/list", json!({}));
    let response = client.post(&body, &sse_only).await;
    assert_eq!(content_type(&response), "text/event-stream");
    let mut stream = Sse::new(response);
    let listed = stream.event().await;
    assert_eq!(listed.data["id"], id);
    assert_eq!(listed.data["result"]["tools"][0]["name"], "echo");
    assert!(stream.next().await.is_none());

    let (id, body) =
        client.next_request("tools/call", json!({"name": "echo", "arguments": {"n": 7}}));
    let response = client
        .post(
            &body,
            &[("MCP-Protocol-Version", "2025-11-25"), sse_only[0]],
        )
        .await;
    let mut stream = Sse::new(response);
    let called = stream.event().await;
    assert_eq!(called.data["id"], id);
    assert_eq!(tool_text(&called.data), r#"{"n":7}"#);
    assert!(stream.next().await.is_none());
    // POST streams carry no priming event; the GET stream had one.
    assert!(stream.primes.is_empty());
    let nothing = tokio::time::timeout(Duration::from_millis(200), get.next()).await;
    assert!(nothing.is_err(), "{nothing:?}");
    assert_eq!(get.primes, ["0"]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_and_responses_get_202() {
    let server = Server::start(&[], settings()).await;
    let mut client = server.client();
    client.initialize().await;
    for body in [
        r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#,
        r#"{"jsonrpc":"2.0","id":12345,"result":{}}"#,
        r#"[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}]"#,
    ] {
        // Even a client that accepts neither JSON nor SSE may send these.
        let response = client.post(body, &[("Accept", "text/html")]).await;
        assert_eq!(response.status(), StatusCode::ACCEPTED, "{body}");
        assert_eq!(text(response).await, "", "{body}");
    }
    // A batch with a request in it gets the array of answers.
    let response = client
        .post(
            r#"[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]"#,
            &[],
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let value: Value = serde_json::from_str(&text(response).await).expect("JSON");
    assert_eq!(value, json!([{"jsonrpc": "2.0", "id": "a", "result": {}}]));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_or_unknown_session() {
    let server = Server::start(&[], settings()).await;
    let mut client = server.client();
    let (_, body) = client.next_request("tools/list", json!({}));
    let response = client.post(&body, &[]).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let get = client
        .request(reqwest::Method::GET)
        .header("Accept", "text/event-stream")
        .send()
        .await
        .expect("GET");
    // Without a session there is no stream to open nor session to end: 405, as 2026-07-28
    // servers answer.
    assert_eq!(get.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(get.headers()["allow"], "POST");
    let delete = client
        .request(reqwest::Method::DELETE)
        .send()
        .await
        .expect("DELETE");
    assert_eq!(delete.status(), StatusCode::METHOD_NOT_ALLOWED);

    client.session = Some("no-such-session".into());
    let response = client.post(&body, &[]).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let get = client
        .request(reqwest::Method::GET)
        .header("Accept", "text/event-stream")
        .send()
        .await
        .expect("GET");
    assert_eq!(get.status(), StatusCode::NOT_FOUND);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_version_header_is_checked() {
    let server = Server::start(&[], settings()).await;
    let mut client = server.client();
    // On initialize too.
    let (_, body) = client.next_request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    let response = client
        .post(&body, &[("MCP-Protocol-Version", "1999-01-01")])
        .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(response.headers().get("mcp-session-id").is_none());

    client.initialize().await;
    for (version, status) in [
        ("2025-03-26", StatusCode::OK),
        ("2025-06-18", StatusCode::OK),
        ("2025-11-25", StatusCode::OK),
        ("2099-12-31", StatusCode::BAD_REQUEST),
        ("banana", StatusCode::BAD_REQUEST),
    ] {
        let (_, body) = client.next_request("ping", json!({}));
        let response = client
            .post(&body, &[("MCP-Protocol-Version", version)])
            .await;
        assert_eq!(response.status(), status, "{version}");
    }
    let get = client
        .request(reqwest::Method::GET)
        .header("Accept", "text/event-stream")
        .header("MCP-Protocol-Version", "2099-12-31")
        .send()
        .await
        .expect("GET");
    assert_eq!(get.status(), StatusCode::BAD_REQUEST);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_and_headers() {
    let server = Server::start(
        &[],
        HttpSettings {
            max_body: Some(2048),
            ..settings()
        },
    )
    .await;
    let mut client = server.client();
    client.initialize().await;

    // Over the limit: 413 (with and without a Content-Length the server can trust).
    let big =
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x".repeat(4096)}})
            .to_string();
    let response = client.post(&big, &[]).await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // Chunked, without a Content-Length: refused while it streams.
    let session = client.session.clone().expect("session");
    let mut chunked = String::new();
    for piece in big.as_bytes().chunks(512) {
        chunked.push_str(&format!(
            "{:x}\r\n{}\r\n",
            piece.len(),
            String::from_utf8_lossy(piece)
        ));
    }
    chunked.push_str("0\r\n\r\n");
    let head = raw(
        server.addr,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json\r\nMcp-Session-Id: {session}\r\nTransfer-Encoding: chunked\r\n\r\n{chunked}"
        ),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");

    // Not JSON: 400 with a parse error.
    let response = client.post(r#"{"jsonrpc":"2.0","id":1,"#, &[]).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(error_code(&text(response).await), -32700);
    // JSON but not JSON-RPC: 400 with an invalid request.
    let response = client.post(r#"{"hello":"world"}"#, &[]).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(error_code(&text(response).await), -32600);
    // Not application/json: 415.
    let response = client
        .post(
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            &[("Content-Type", "text/plain")],
        )
        .await;
    assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    // A request from a client that accepts neither JSON nor SSE: 406.
    let response = client
        .post(
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            &[("Accept", "text/html")],
        )
        .await;
    assert_eq!(response.status(), StatusCode::NOT_ACCEPTABLE);
    // GET must accept SSE.
    let get = client
        .request(reqwest::Method::GET)
        .header("Accept", "application/json")
        .send()
        .await
        .expect("GET");
    assert_eq!(get.status(), StatusCode::NOT_ACCEPTABLE);
    // initialize in a batch, without a session.
    let fresh = server.client();
    let response = fresh
        .post(
            r#"[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}]"#,
            &[],
        )
        .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    // Other methods: 405.
    let put = client
        .request(reqwest::Method::PUT)
        .send()
        .await
        .expect("PUT");
    assert_eq!(put.status(), StatusCode::METHOD_NOT_ALLOWED);
    // The session still works.
    let pong = client.call("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_tokens() {
    let server = Server::start(
        &[],
        HttpSettings {
            tokens: vec![
                token("alpha-secret", Some("review")),
                token("beta-secret", None),
            ],
            ..settings()
        },
    )
    .await;
    // No token.
    let mut anonymous = server.client();
    let (_, body) = anonymous.next_request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    let response = anonymous.post(&body, &[]).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let challenge = response.headers()["www-authenticate"]
        .to_str()
        .expect("ASCII");
    assert!(challenge.starts_with("Bearer"), "{challenge}");
    // A wrong token, and another scheme.
    let wrong = server.client().with_token("alpha-secreT");
    let response = wrong.post(&body, &[]).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert!(
        response.headers()["www-authenticate"]
            .to_str()
            .expect("ASCII")
            .contains("invalid_token")
    );
    let response = anonymous
        .post(&body, &[("Authorization", "Basic YWxwaGEtc2VjcmV0")])
        .await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);

    // The right tokens.
    let mut alpha = server.client().with_token("alpha-secret");
    alpha.initialize().await;
    assert_eq!(alpha.call("ping", json!({})).await["result"], json!({}));
    let mut beta = server.client().with_token("beta-secret");
    beta.initialize().await;

    // A session is bound to the token that created it.
    let mut stolen = server.client().with_token("beta-secret");
    stolen.session = alpha.session.clone();
    let (_, ping) = stolen.next_request("ping", json!({}));
    let response = stolen.post(&ping, &[]).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let mut unauthenticated = server.client();
    unauthenticated.session = alpha.session.clone();
    let response = unauthenticated.post(&ping, &[]).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let get = stolen
        .request(reqwest::Method::GET)
        .header("Accept", "text/event-stream")
        .send()
        .await
        .expect("GET");
    assert_eq!(get.status(), StatusCode::FORBIDDEN);
    let delete = stolen
        .request(reqwest::Method::DELETE)
        .send()
        .await
        .expect("DELETE");
    assert_eq!(delete.status(), StatusCode::FORBIDDEN);
    assert_eq!(alpha.call("ping", json!({})).await["result"], json!({}));

    // The health check needs no token.
    let health = reqwest::get(format!("http://{}/healthz", server.addr))
        .await
        .expect("GET /healthz");
    assert_eq!(health.status(), StatusCode::OK);
    assert_eq!(text(health).await, "ok");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_limited_to_a_toolset_binds_its_sessions_to_it() {
    let mut rules = Rules::default();
    rules.toolsets.sets.insert(
        "echo-only".into(),
        ToolsetRule {
            tools: vec!["echo".into()],
            ..ToolsetRule::default()
        },
    );
    let server = Server::start_with(
        &["--sample-tool"],
        rules,
        HttpSettings {
            tokens: vec![token("limited", Some("echo-only")), token("full", None)],
            ..settings()
        },
    )
    .await;
    let names = |listed: &Value| -> Vec<String> {
        listed["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    };
    let mut limited = server.client().with_token("limited");
    limited.initialize().await;
    assert_eq!(
        names(&limited.call("tools/list", json!({})).await),
        ["echo"]
    );
    let refused = limited
        .call(
            "tools/call",
            json!({"name": "fixture_sample", "arguments": {}}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32004, "{refused}");
    let echoed = limited
        .call(
            "tools/call",
            json!({"name": "echo", "arguments": {"ok": 1}}),
        )
        .await;
    assert_eq!(tool_text(&echoed), r#"{"ok":1}"#);

    let mut full = server.client().with_token("full");
    full.initialize().await;
    assert_eq!(
        names(&full.call("tools/list", json!({})).await),
        ["echo", "fixture_sample"]
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_and_host_are_checked() {
    let server = Server::start(
        &[],
        HttpSettings {
            allowed_origins: vec!["https://app.example".into()],
            allowed_hosts: vec!["mcp.example".into()],
            ..settings()
        },
    )
    .await;
    let mut client = server.client();
    client.initialize().await;
    let (_, ping) = client.next_request("ping", json!({}));
    for origin in [
        "http://evil.example",
        "http://localhost.evil.example:80",
        "null",
        "https://app.example:8443",
    ] {
        let response = client.post(&ping, &[("Origin", origin)]).await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{origin}");
    }
    for origin in [
        "http://localhost:6274",
        "http://127.0.0.1:3000",
        "http://[::1]:8080",
        "https://app.example",
    ] {
        let response = client.post(&ping, &[("Origin", origin)]).await;
        assert_eq!(response.status(), StatusCode::OK, "{origin}");
        assert_eq!(
            response.headers()["access-control-allow-origin"],
            origin,
            "{origin}"
        );
    }
    for host in ["evil.example", "evil.example:80", "10.1.2.3"] {
        let response = client.post(&ping, &[("Host", host)]).await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{host}");
    }
    for host in [
        "localhost",
        "localhost:9",
        "127.0.0.1:1",
        "[::1]:80",
        "mcp.example:443",
    ] {
        let response = client.post(&ping, &[("Host", host)]).await;
        assert_eq!(response.status(), StatusCode::OK, "{host}");
    }
    // A CORS preflight from an allowed origin.
    let preflight = client
        .request(reqwest::Method::OPTIONS)
        .header("Origin", "http://localhost:6274")
        .header("Access-Control-Request-Method", "POST")
        .send()
        .await
        .expect("OPTIONS");
    assert_eq!(preflight.status(), StatusCode::NO_CONTENT);
    let allowed = preflight.headers()["access-control-allow-headers"]
        .to_str()
        .expect("ASCII");
    assert!(allowed.contains("mcp-session-id"), "{allowed}");

    // A toolset in the URL that is not UTF-8 is read after Host and Origin: a bad Host is
    // refused first, and the toolset's own refusal carries the CORS headers and, since the
    // request has a body, closes the connection.
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let request = |host: &str| {
        format!(
            "POST /mcp/%FF HTTP/1.1\r\nHost: {host}\r\nOrigin: http://localhost:6274\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let head = raw(server.addr, &request("evil.example")).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let head = raw(server.addr, &request("localhost"))
        .await
        .to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 400"), "{head}");
    assert!(
        head.contains("access-control-allow-origin: http://localhost:6274"),
        "{head}"
    );
    assert!(head.contains("connection: close"), "{head}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_get_their_own_answers_and_both_hear_list_changed() {
    let server = Server::start(
        &["--delay-ms", "300", "--list-changed-after", "1"],
        settings(),
    )
    .await;
    let mut a = server.client();
    let mut b = server.client();
    a.initialize().await;
    b.initialize().await;
    let mut stream_a = a.get_stream(None).await;
    let mut stream_b = b.get_stream(None).await;

    // Concurrent calls, each answered in its own session.
    let (ra, rb) = tokio::join!(
        a.call(
            "tools/call",
            json!({"name": "echo", "arguments": {"who": "a"}})
        ),
        b.call(
            "tools/call",
            json!({"name": "echo", "arguments": {"who": "b"}})
        ),
    );
    assert_eq!(tool_text(&ra), r#"{"who":"a"}"#);
    assert_eq!(tool_text(&rb), r#"{"who":"b"}"#);

    // The fixture's tools changed after its first call: both sessions hear of it.
    for stream in [&mut stream_a, &mut stream_b] {
        let event = stream
            .wait_for(|d| d["method"] == "notifications/tools/list_changed")
            .await;
        assert!(event.id.is_some());
    }
    let listed = a.call("tools/list", json!({})).await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"fixture_added_tool"), "{names:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_get_stream_and_resumes_after_last_event_id() {
    let server = Server::start(&["--progress", "3"], settings()).await;
    let mut client = server.client();
    client.initialize().await;

    // A client that accepts only JSON gets its progress on the GET stream. Sent while no
    // stream is open, it is kept until one opens.
    let called = client
        .call_with(
            "tools/call",
            json!({"name": "echo", "arguments": {}, "_meta": {"progressToken": "tok-1"}}),
            JSON_ONLY,
        )
        .await;
    assert_eq!(tool_text(&called), "{}");
    let mut stream = client.get_stream(None).await;
    let mut ids = Vec::new();
    for step in 1..=3 {
        let event = stream.event().await;
        assert_eq!(event.data["method"], "notifications/progress");
        // The client's own token, not moniker's.
        assert_eq!(event.data["params"]["progressToken"], "tok-1");
        assert_eq!(event.data["params"]["progress"], step);
        ids.push(event.id.expect("an event id"));
    }
    assert!(stream.primes.is_empty(), "no priming before 2025-11-25");
    drop(stream);

    // Resuming after the first event replays the two after it.
    let mut resumed = client.get_stream(Some(&ids[0])).await;
    for step in 2..=3 {
        let event = resumed.event().await;
        assert_eq!(event.data["params"]["progress"], step);
        assert_eq!(event.id.as_deref(), Some(ids[step as usize - 1].as_str()));
    }
    // A call while the stream is open: its progress comes on it, live.
    let called = client
        .call_with(
            "tools/call",
            json!({"name": "echo", "arguments": {"x": 1}, "_meta": {"progressToken": 42}}),
            JSON_ONLY,
        )
        .await;
    assert_eq!(tool_text(&called), r#"{"x":1}"#);
    for step in 1..=3 {
        let event = resumed.event().await;
        assert_eq!(event.data["params"]["progressToken"], 42);
        assert_eq!(event.data["params"]["progress"], step);
    }
    drop(resumed);
    // A stream without Last-Event-ID starts after what was delivered: nothing is replayed.
    let mut fresh = client.get_stream(None).await;
    let pong = client.call("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}));
    let nothing = tokio::time::timeout(Duration::from_millis(300), fresh.next()).await;
    assert!(nothing.is_err(), "unexpected: {nothing:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_of_a_call_comes_on_its_post_stream_before_the_answer() {
    let server = Server::start(&["--progress", "3"], settings()).await;
    let mut client = server.client();
    client.initialize().await;
    let mut get = client.get_stream(None).await;
    for token in [json!("p-1"), json!(7)] {
        let (id, body) = client.next_request(
            "tools/call",
            json!({"name": "echo", "arguments": {"k": 1}, "_meta": {"progressToken": token}}),
        );
        // The client accepts both: a request that asks for progress is answered as a stream.
        let response = client.post(&body, &[]).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(content_type(&response), "text/event-stream");
        let mut stream = Sse::new(response);
        for step in 1..=3 {
            let event = stream.event().await;
            assert_eq!(
                event.data["method"], "notifications/progress",
                "{:?}",
                event.data
            );
            assert_eq!(event.data["params"]["progressToken"], token);
            assert_eq!(event.data["params"]["progress"], step);
        }
        let answer = stream.event().await;
        assert_eq!(answer.data["id"], id);
        assert_eq!(tool_text(&answer.data), r#"{"k":1}"#);
        assert!(stream.next().await.is_none());
    }
    // None of it went to the GET stream.
    let nothing = tokio::time::timeout(Duration::from_millis(300), get.next()).await;
    assert!(nothing.is_err(), "{nothing:?}");
    // Without a progress token, the answer is JSON.
    let plain = client
        .call("tools/call", json!({"name": "echo", "arguments": {}}))
        .await;
    assert_eq!(tool_text(&plain), "{}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_get_stream_replaces_the_old_one() {
    let server = Server::start(&["--progress", "1"], settings()).await;
    let mut client = server.client();
    client.initialize().await;
    let mut first = client.get_stream(None).await;
    let mut second = client.get_stream(None).await;
    assert!(first.next().await.is_none(), "the first stream ends");
    client
        .call_with(
            "tools/call",
            json!({"name": "echo", "arguments": {}, "_meta": {"progressToken": "p"}}),
            JSON_ONLY,
        )
        .await;
    let event = second.event().await;
    assert_eq!(event.data["method"], "notifications/progress");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_request_goes_out_on_the_get_stream_and_its_answer_comes_back() {
    let server = Server::start(&["--sample-tool"], settings()).await;
    let mut client = server.client();
    client.initialize().await;
    let mut stream = client.get_stream(None).await;

    let (id, body) = client.next_request(
        "tools/call",
        json!({"name": "fixture_sample", "arguments": {}}),
    );
    let poster = client.clone_session();
    let call = tokio::spawn(async move {
        let response = poster.post(&body, &[]).await;
        assert_eq!(response.status(), StatusCode::OK);
        text(response).await
    });

    let request = stream
        .wait_for(|d| d["method"] == "sampling/createMessage")
        .await;
    let sample_id = request.data["id"].clone();
    assert!(!sample_id.is_null(), "{:?}", request.data);
    assert_eq!(request.data["params"]["maxTokens"], 10);
    let answer = json!({
        "jsonrpc": "2.0",
        "id": sample_id,
        "result": {"role": "assistant", "content": {"type": "text", "text": "sampled!"}, "model": "test-model"}
    });
    let response = client.post(&answer.to_string(), &[]).await;
    assert_eq!(response.status(), StatusCode::ACCEPTED);

    let body = within("the sampling call's answer", call)
        .await
        .expect("join");
    let value: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(value["id"], id);
    let text = tool_text(&value);
    assert!(
        text.contains("sampled!") && text.contains("test-model"),
        "{text}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_does_not_cancel_its_call() {
    // Disconnection is not cancellation (the spec): the call runs to its end. The fixture
    // adds a tool after its first answered call, which every session hears of.
    let server = Server::start(
        &["--delay-ms", "800", "--list-changed-after", "1"],
        settings(),
    )
    .await;
    let mut client = server.client();
    client.initialize().await;
    let mut stream = client.get_stream(None).await;
    let (_, body) = client.next_request(
        "tools/call",
        json!({"name": "echo", "arguments": {"gone": true}}),
    );
    let abandoned = client
        .request(reqwest::Method::POST)
        .header("Content-Type", "application/json")
        .header("Accept", BOTH)
        .timeout(Duration::from_millis(200))
        .body(body)
        .send()
        .await;
    assert!(abandoned.is_err(), "the client gave up first");
    stream
        .wait_for(|d| d["method"] == "notifications/tools/list_changed")
        .await;
    // An explicit cancellation does cancel: no answer comes.
    let (id, body) = client.next_request(
        "tools/call",
        json!({"name": "echo", "arguments": {"cancel": "me"}}),
    );
    let poster = client.clone_session();
    let call = tokio::spawn(async move { poster.post(&body, &[]).await.status() });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let cancel =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}});
    let response = client.post(&cancel.to_string(), &[]).await;
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let status = within("the cancelled call's POST", call)
        .await
        .expect("join");
    assert_eq!(
        status,
        StatusCode::ACCEPTED,
        "no answer for a cancelled request"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_are_dropped() {
    let server = Server::start(
        &[],
        HttpSettings {
            session_idle: Some(Duration::from_millis(300)),
            ..settings()
        },
    )
    .await;
    let mut idle = server.client();
    idle.initialize().await;
    let mut streaming = server.client();
    streaming.initialize().await;
    // An open stream keeps its session in use.
    let _stream = streaming.get_stream(None).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (_, ping) = idle.next_request("ping", json!({}));
    let response = idle.post(&ping, &[]).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(streaming.call("ping", json!({})).await["result"], json!({}));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_open_streams() {
    let server = Server::start(&[], settings()).await;
    let mut client = server.client();
    client.initialize().await;
    let mut stream = client.get_stream(None).await;
    let started = std::time::Instant::now();
    let reader = tokio::spawn(async move { stream.next().await.is_none() });
    server.stop().await;
    assert!(within("the stream to end", reader).await.expect("join"));
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn check_bind_requires_a_token_off_loopback() {
    let open = HttpSettings::default();
    let with_token = HttpSettings {
        tokens: vec![token("s3cret", None)],
        ..HttpSettings::default()
    };
    let any: SocketAddr = "0.0.0.0:8080".parse().expect("addr");
    let lan: SocketAddr = "192.168.1.5:8080".parse().expect("addr");
    let v6: SocketAddr = "[::]:8080".parse().expect("addr");
    for addr in [any, lan, v6] {
        let refused = http::check_bind(addr, &open).expect_err("refused");
        assert!(refused.contains("token"), "{refused}");
        assert!(http::check_bind(addr, &with_token).is_ok());
    }
    for addr in ["127.0.0.1:8080", "[::1]:0"] {
        let addr: SocketAddr = addr.parse().expect("addr");
        assert!(http::check_bind(addr, &open).is_ok());
    }
    let blank = HttpSettings {
        tokens: vec![token("has space", None)],
        ..HttpSettings::default()
    };
    assert!(http::check_bind(any, &blank).is_err());
}

#[test]
fn token_debug_hides_the_secret() {
    let settings = HttpSettings {
        tokens: vec![token("top-secret-value", Some("review"))],
        ..HttpSettings::default()
    };
    let shown = format!("{settings:?}");
    assert!(!shown.contains("top-secret-value"), "{shown}");
    assert!(shown.contains("review"), "{shown}");
}

/// The `_meta` envelope of a 2026-07-28 request.
fn envelope(version: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_is_answered_without_a_session() {
    let server = Server::start(&[], settings()).await;
    let mut client = server.client();
    let modern = |method: &'static str| {
        [
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", method),
        ]
    };

    let (_, body) =
        client.next_request("server/discover", json!({"_meta": envelope("2026-07-28")}));
    let response = client.post(&body, &modern("server/discover")).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get("mcp-session-id").is_none());
    let discovered: Value = serde_json::from_str(&text(response).await).expect("JSON");
    let result = &discovered["result"];
    assert_eq!(result["resultType"], "complete");
    assert!(
        result["supportedVersions"]
            .as_array()
            .expect("versions")
            .contains(&json!("2026-07-28")),
        "{result}"
    );
    assert!(result["capabilities"]["tools"].is_object(), "{result}");

    let (_, body) = client.next_request("tools/list", json!({"_meta": envelope("2026-07-28")}));
    let response = client.post(&body, &modern("tools/list")).await;
    assert_eq!(response.status(), StatusCode::OK);
    let listed: Value = serde_json::from_str(&text(response).await).expect("JSON");
    let result = &listed["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["cacheScope"], "public");
    assert_eq!(result["ttlMs"], 0);
    assert_eq!(result["tools"][0]["name"], "echo");

    let call =
        json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": envelope("2026-07-28")});
    let (_, body) = client.next_request("tools/call", call.clone());
    let mut headers = modern("tools/call").to_vec();
    headers.push(("Mcp-Name", "echo"));
    let response = client.post(&body, &headers).await;
    let called: Value = serde_json::from_str(&text(response).await).expect("JSON");
    assert_eq!(called["result"]["resultType"], "complete", "{called}");
    assert!(called["result"]["content"].is_array(), "{called}");

    // The headers must agree with the body.
    let (_, body) = client.next_request("tools/call", call);
    let mut wrong = modern("tools/call").to_vec();
    wrong.push(("Mcp-Name", "other"));
    let response = client.post(&body, &wrong).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let refused: Value = serde_json::from_str(&text(response).await).expect("JSON");
    assert_eq!(refused["error"]["code"], -32020, "{refused}");

    // A version moniker does not speak names the ones it does.
    let (_, body) = client.next_request("tools/list", json!({"_meta": envelope("2099-01-01")}));
    let response = client
        .post(
            &body,
            &[
                ("MCP-Protocol-Version", "2099-01-01"),
                ("Mcp-Method", "tools/list"),
            ],
        )
        .await;
    let refused: Value = serde_json::from_str(&text(response).await).expect("JSON");
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    assert_eq!(refused["error"]["data"]["supported"], json!(["2026-07-28"]));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toolset_bounds_the_resources_reachable_through_it() {
    let mut rules = Rules::default();
    rules.toolsets.sets.insert(
        "docs".into(),
        ToolsetRule {
            tools: vec!["echo".into()],
            resources: vec!["fixture://".into()],
            ..ToolsetRule::default()
        },
    );
    rules.toolsets.sets.insert(
        "none".into(),
        ToolsetRule {
            tools: vec!["echo".into()],
            ..ToolsetRule::default()
        },
    );
    let server = Server::start_with(&[], rules, settings()).await;
    let headers = |method: &'static str| {
        [
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", method),
        ]
    };
    let list = |path: &'static str| {
        let url = format!("{}{path}", server.url);
        async move {
            let mut client = Client::new(&url);
            let (_, body) =
                client.next_request("resources/list", json!({"_meta": envelope("2026-07-28")}));
            let response = client.post(&body, &headers("resources/list")).await;
            let value: Value = serde_json::from_str(&text(response).await).expect("JSON");
            value["result"]["resources"]
                .as_array()
                .map(|r| {
                    r.iter()
                        .map(|r| r["uri"].as_str().unwrap_or_default().to_owned())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        }
    };
    let all = list("").await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(list("/docs").await, all, "a prefix that covers them all");
    assert!(
        list("/none").await.is_empty(),
        "a toolset without resources reaches none"
    );

    let mut client = Client::new(&format!("{}/none", server.url));
    let read = json!({"uri": all[0], "_meta": envelope("2026-07-28")});
    let (_, body) = client.next_request("resources/read", read);
    let mut with_name = headers("resources/read").to_vec();
    with_name.push(("Mcp-Name", &all[0]));
    let response = client.post(&body, &with_name).await;
    let refused: Value = serde_json::from_str(&text(response).await).expect("JSON");
    assert_eq!(refused["error"]["code"], -32002, "{refused}");
    server.stop().await;
}
