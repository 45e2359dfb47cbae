//! Remote servers (Streamable HTTP, and the legacy HTTP+SSE transport) behind moniker, end to
//! end: a small MCP server written here, on a real socket on 127.0.0.1, and a real `Gateway`
//! driven through client sessions. Every wait is bounded.

#![allow(
    clippy::too_many_lines,
    reason = "a test is one scenario, read from top to bottom"
)]

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use axum::routing::any;
use indexmap::IndexMap;
use moniker_gateway::connect::ServerSpec;
use moniker_gateway::message::Message;
use moniker_gateway::session::Session;

use crate::support::Reply as _;
use moniker_config::GatewaySettings;
use moniker_gateway::{Gateway, ServerEntry, Settings};
use moniker_surface::Rules;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::mpsc;

mod tls;

const WAIT: Duration = Duration::from_secs(20);

async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// Polls `check` until it holds (bounded).
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    within(what, async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// What the result of `remote__echo` is, byte for byte: a number moniker must not rewrite
/// and fields it does not know.
fn echo_result(args: &Value) -> String {
    format!(
        r#"{{"content":[{{"type":"text","text":{}}}],"structuredContent":{{"n":1.0e0,"args":{args}}},"_unknown":{{"keep":[1,2.50,-0.0]}}}}"#,
        json!(args.to_string())
    )
}

/// One POST the test server saw.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    /// The tool of a `tools/call`.
    tool: Option<String>,
    authorization: Option<String>,
    version: Option<String>,
    session: Option<String>,
}

/// A remote MCP server: Streamable HTTP at `/mcp` (or, when `legacy`, only HTTP+SSE: GET
/// `/mcp` for the event stream, POST `/messages?session=...`).
#[derive(Default)]
struct Remote {
    legacy: bool,
    /// The `Authorization` every request must carry (else 401).
    require: Option<String>,
    next_session: AtomicU64,
    sessions: Mutex<HashSet<String>>,
    /// Each session's open event stream (GET): raw SSE text goes in.
    streams: Mutex<HashMap<String, mpsc::UnboundedSender<String>>>,
    /// The next request of a session is answered 404, and the session forgotten.
    forget_once: AtomicBool,
    /// `tools/list` has a third tool.
    extra_tool: AtomicBool,
    initializes: AtomicUsize,
    deletes: Mutex<Vec<String>>,
    seen: Mutex<Vec<Seen>>,
    /// `remote__slow` answers once this is notified.
    release: tokio::sync::Notify,
    /// Events to replay to a GET with `Last-Event-ID`, by that id.
    replay: Mutex<HashMap<String, String>>,
    /// The `Last-Event-ID`s of GETs.
    resumed_from: Mutex<Vec<String>>,
}

/// A test server on a runtime of its own.
struct Apart {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Apart {
    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Stops it: its listener and its connections are closed.
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            within(
                "the server to stop",
                tokio::task::spawn_blocking(move || thread.join()),
            )
            .await
            .expect("join")
            .expect("the server's thread");
        }
    }
}

enum Answer {
    None,
    /// A JSON body (spread over several lines, as some servers write it).
    Json(String),
    /// SSE events (raw text, each ending with a blank line).
    Sse(Vec<String>),
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().expect("lock")
}

fn header_str(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn status(code: StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = code;
    response
}

fn json_response(body: String) -> Response {
    let mut response = Response::new(Body::from(body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// An event stream that sends `first`, then whatever comes on `rx`, until the sender goes.
fn sse_response(first: Vec<String>, rx: Option<mpsc::UnboundedReceiver<String>>) -> Response {
    let head = futures_util::stream::iter(
        first
            .into_iter()
            .map(|e| Ok::<Bytes, Infallible>(Bytes::from(e))),
    );
    let tail = futures_util::stream::unfold(rx, |rx| async move {
        let mut rx = rx?;
        let next = rx.recv().await?;
        Some((Ok::<Bytes, Infallible>(Bytes::from(next)), Some(rx)))
    });
    let body = Body::from_stream(futures_util::StreamExt::chain(head, tail));
    let mut response = Response::new(body);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    response
}

fn message_event(data: &str) -> String {
    format!("event: message\ndata: {data}\n\n")
}

impl Remote {
    fn new(legacy: bool) -> Arc<Self> {
        Arc::new(Self {
            legacy,
            ..Self::default()
        })
    }

    /// A Streamable HTTP server that wants `authorization`.
    fn locked(authorization: &str) -> Arc<Self> {
        Arc::new(Self {
            require: Some(authorization.to_owned()),
            ..Self::default()
        })
    }

    /// Serves on a fresh port; the URL of its MCP endpoint.
    async fn serve(self: &Arc<Self>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let app = Router::new()
            .route("/mcp", any(mcp))
            .route("/messages", any(messages))
            .with_state(self.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        format!("http://{addr}/mcp")
    }

    /// Serves on `port` (0: a fresh one) from a runtime of its own, on a thread of its own, so
    /// that stopping it closes every connection it has, as a server that goes away does.
    fn serve_apart(self: &Arc<Self>, port: u16) -> Apart {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (bound_tx, bound) = std::sync::mpsc::channel();
        let remote = self.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                    .await
                    .expect("bind");
                let addr = listener.local_addr().expect("address");
                let _ = bound_tx.send(addr);
                let app = Router::new()
                    .route("/mcp", any(mcp))
                    .route("/messages", any(messages))
                    .with_state(remote);
                tokio::select! {
                    _ = axum::serve(listener, app).into_future() => {}
                    _ = stopped => {}
                }
            });
            // Dropping the runtime ends every connection's task.
            drop(runtime);
        });
        let addr: SocketAddr = bound.recv_timeout(WAIT).expect("the server to bind");
        Apart {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn record(&self, body: &Value, headers: &HeaderMap) {
        lock(&self.seen).push(Seen {
            method: body["method"].as_str().unwrap_or("(response)").to_owned(),
            tool: body["params"]["name"].as_str().map(str::to_owned),
            authorization: header_str(headers, "authorization"),
            version: header_str(headers, "mcp-protocol-version"),
            session: header_str(headers, "mcp-session-id"),
        });
    }

    fn new_session(&self) -> String {
        let id = format!(
            "session-{}",
            self.next_session.fetch_add(1, Ordering::Relaxed) + 1
        );
        lock(&self.sessions).insert(id.clone());
        id
    }

    fn forget(&self, session: &str) {
        lock(&self.sessions).remove(session);
        // Dropping the sender ends the session's event stream.
        lock(&self.streams).remove(session);
    }

    /// Pushes a raw SSE event to every open event stream.
    fn push(&self, event: &str) -> usize {
        let streams = lock(&self.streams);
        streams
            .values()
            .filter(|tx| tx.send(event.to_owned()).is_ok())
            .count()
    }

    fn answer(&self, body: &Value) -> Answer {
        let id = &body["id"];
        let method = body["method"].as_str().unwrap_or_default();
        if id.is_null() {
            return Answer::None;
        }
        match method {
            "initialize" => {
                self.initializes.fetch_add(1, Ordering::Relaxed);
                Answer::Json(format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-03-26","capabilities":{{"tools":{{"listChanged":true}}}},"serverInfo":{{"name":"remote","version":"1.0.0"}}}}}}"#
                ))
            }
            "ping" => Answer::Json(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#)),
            "tools/list" => {
                let schema = r#"{"type":"object","properties":{"text":{"type":"string"}}}"#;
                let mut tools = vec![
                    format!(
                        r#"{{"name":"remote__echo","description":"Echoes its arguments.","inputSchema":{schema}}}"#
                    ),
                    format!(
                        r#"{{"name":"remote__stream_echo","description":"Echoes, with progress.","inputSchema":{schema}}}"#
                    ),
                    format!(
                        r#"{{"name":"remote__slow","description":"Echoes when released.","inputSchema":{schema}}}"#
                    ),
                    format!(
                        r#"{{"name":"remote__resumable","description":"Echoes after a resumption.","inputSchema":{schema}}}"#
                    ),
                ];
                if self.extra_tool.load(Ordering::Relaxed) {
                    tools.push(format!(
                        r#"{{"name":"fresh","description":"Came later.","inputSchema":{schema}}}"#
                    ));
                }
                Answer::Json(format!(
                    "{{\"jsonrpc\":\"2.0\",\n  \"id\":{id},\n  \"result\":{{\"tools\":[{}]}}\n}}\n",
                    tools.join(",\n")
                ))
            }
            "tools/call" => {
                let name = body["params"]["name"].as_str().unwrap_or_default();
                let args = &body["params"]["arguments"];
                let result = echo_result(args);
                match name {
                    "remote__echo" | "remote__slow" | "fresh" => Answer::Json(format!(
                        "{{\"jsonrpc\":\"2.0\",\r\n\"id\":{id},\r\n\"result\":{result}}}"
                    )),
                    "remote__stream_echo" => {
                        let mut events = vec![": a comment\nretry: 2000\n\n".to_owned()];
                        let token = &body["params"]["_meta"]["progressToken"];
                        if !token.is_null() {
                            let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1, "total": 2, "message": "halfway"}});
                            events.push(format!("id: e1\ndata: {progress}\n\n"));
                        }
                        // The response over two data lines, with CRLF line ends.
                        events.push(format!(
                            "id: e2\r\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{id},\r\ndata: \"result\":{result}}}\r\n\r\n"
                        ));
                        Answer::Sse(events)
                    }
                    "remote__resumable" => {
                        // The stream ends after an event with an id; the response comes to a
                        // GET that resumes from it.
                        let key = format!("r{id}");
                        lock(&self.replay).insert(
                            key.clone(),
                            format!(
                                "id: {key}-2\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}\n\n"
                            ),
                        );
                        Answer::Sse(vec![format!(
                            "id: {key}\ndata: {}\n\n",
                            json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "started"}})
                        )])
                    }
                    _ => Answer::Json(format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32602,"message":"no tool {name}"}}}}"#
                    )),
                }
            }
            _ => Answer::Json(format!(
                r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"no method {method}"}}}}"#
            )),
        }
    }
}

/// `/mcp`: Streamable HTTP, or the legacy transport's event stream.
async fn mcp(State(remote): State<Arc<Remote>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    let session = header_str(&headers, "mcp-session-id");
    if remote.require.is_some() && header_str(&headers, "authorization") != remote.require {
        let mut response = Response::new(Body::from("missing or wrong token"));
        *response.status_mut() = StatusCode::UNAUTHORIZED;
        return response;
    }
    if remote.legacy {
        if parts.method != Method::GET {
            return status(StatusCode::METHOD_NOT_ALLOWED);
        }
        let id = remote.new_session();
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&remote.streams).insert(id.clone(), tx);
        let endpoint = format!("event: endpoint\ndata: /messages?session={id}\n\n");
        return sse_response(vec![endpoint], Some(rx));
    }
    match parts.method {
        Method::POST => {
            let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
                return status(StatusCode::BAD_REQUEST);
            };
            let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
                return status(StatusCode::BAD_REQUEST);
            };
            remote.record(&value, &headers);
            if value["method"] == "initialize" {
                let id = remote.new_session();
                let Answer::Json(body) = remote.answer(&value) else {
                    return status(StatusCode::INTERNAL_SERVER_ERROR);
                };
                let mut response = json_response(body);
                response.headers_mut().insert(
                    "mcp-session-id",
                    header::HeaderValue::from_str(&id).expect("id"),
                );
                return response;
            }
            let Some(session) = session else {
                return status(StatusCode::BAD_REQUEST);
            };
            if !lock(&remote.sessions).contains(&session) {
                return status(StatusCode::NOT_FOUND);
            }
            if remote.forget_once.swap(false, Ordering::SeqCst) {
                remote.forget(&session);
                return status(StatusCode::NOT_FOUND);
            }
            if value["params"]["name"] == "remote__slow" {
                remote.release.notified().await;
            }
            match remote.answer(&value) {
                Answer::None => status(StatusCode::ACCEPTED),
                Answer::Json(body) => json_response(body),
                Answer::Sse(events) => sse_response(events, None),
            }
        }
        Method::GET => {
            let Some(session) = session else {
                return status(StatusCode::BAD_REQUEST);
            };
            if !lock(&remote.sessions).contains(&session) {
                return status(StatusCode::NOT_FOUND);
            }
            if let Some(last) = header_str(&headers, "last-event-id") {
                lock(&remote.resumed_from).push(last.clone());
                if let Some(event) = lock(&remote.replay).remove(&last) {
                    return sse_response(vec![event], None);
                }
            }
            let (tx, rx) = mpsc::unbounded_channel();
            lock(&remote.streams).insert(session, tx);
            sse_response(vec![": stream open\n\n".to_owned()], Some(rx))
        }
        Method::DELETE => {
            let Some(session) = session else {
                return status(StatusCode::BAD_REQUEST);
            };
            lock(&remote.deletes).push(session.clone());
            remote.forget(&session);
            status(StatusCode::OK)
        }
        _ => status(StatusCode::METHOD_NOT_ALLOWED),
    }
}

/// `/messages?session=...`: the legacy transport's POSTs; answers go on the event stream.
async fn messages(State(remote): State<Arc<Remote>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if !remote.legacy || parts.method != Method::POST {
        return status(StatusCode::NOT_FOUND);
    }
    let session = parts
        .uri
        .query()
        .and_then(|q| q.strip_prefix("session="))
        .unwrap_or_default()
        .to_owned();
    let Some(tx) = lock(&remote.streams).get(&session).cloned() else {
        return status(StatusCode::NOT_FOUND);
    };
    let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
        return status(StatusCode::BAD_REQUEST);
    };
    let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
        return status(StatusCode::BAD_REQUEST);
    };
    remote.record(&value, &parts.headers);
    match remote.answer(&value) {
        Answer::None => {}
        Answer::Json(body) => {
            // One data line per line of the body.
            let data: Vec<String> = body
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| format!("data: {l}\n"))
                .collect();
            let _ = tx.send(format!("event: message\n{}\n", data.concat()));
        }
        Answer::Sse(events) => {
            for event in events {
                let _ = tx.send(event);
            }
        }
    }
    status(StatusCode::ACCEPTED)
}

fn settings() -> Settings {
    Settings {
        config: GatewaySettings {
            call_timeout: Duration::from_secs(10),
            start_timeout: Duration::from_secs(5),
            restart_initial_delay: Duration::from_millis(100),
            restart_max_delay: Duration::from_millis(500),
            ..GatewaySettings::default()
        },
        ..Settings::default()
    }
}

fn remote_entry(id: &str, url: &str, headers: &[(&str, &str)]) -> ServerEntry {
    ServerEntry {
        id: id.parse().expect("server id"),
        spec: ServerSpec::Http {
            url: url.to_owned(),
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<IndexMap<_, _>>(),
            tls: Default::default(),
            auth: Default::default(),
            forward: Default::default(),
        },
        modern: false,
        sandbox: None,
        per_person: None,
    }
}

async fn start(entries: Vec<ServerEntry>) -> Arc<Gateway> {
    within(
        "gateway start",
        Gateway::start(Rules::default(), entries, settings()),
    )
    .await
    .unwrap_or_else(|_| panic!("the gateway did not start"))
}

/// A client session of the gateway's, initialized.
struct Client {
    session: Arc<Session>,
    rx: mpsc::UnboundedReceiver<Message>,
    next_id: u64,
}

impl Client {
    async fn new(gateway: &Arc<Gateway>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut client = Self {
            session: Session::new(gateway.clone(), tx),
            rx,
            next_id: 0,
        };
        let init = client
            .call(
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "remote-test", "version": "0"}}),
            )
            .await;
        assert!(init["result"]["protocolVersion"].is_string(), "{init}");
        let none = within(
            "initialized",
            client
                .session
                .reply(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
        )
        .await;
        assert!(none.is_none());
        client
    }

    /// A request; the reply line as the session wrote it.
    async fn call_raw(&mut self, method: &str, params: Value) -> String {
        self.next_id += 1;
        let line =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
                .to_string();
        within(method, self.session.reply(&line))
            .await
            .unwrap_or_else(|| panic!("no reply to {method}"))
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let line = self.call_raw(method, params).await;
        serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"))
    }

    async fn tool_names(&mut self) -> Vec<String> {
        let listed = self.call("tools/list", json!({})).await;
        let mut names: Vec<String> = listed["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools in {listed}"))
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect();
        names.sort();
        names
    }

    /// The next message the session sent on its own that satisfies `pred`.
    async fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        within(what, async {
            loop {
                let line = self
                    .rx
                    .recv()
                    .await
                    .map(Message::into_text)
                    .expect("the session's channel");
                let value: Value = serde_json::from_str(&line).expect("JSON");
                if pred(&value) {
                    return value;
                }
            }
        })
        .await
    }
}

/// The raw text of a reply's `result`.
fn raw_result(line: &str) -> String {
    let fields: HashMap<String, Box<RawValue>> =
        serde_json::from_str(line).unwrap_or_else(|_| panic!("not an object: {line}"));
    fields
        .get("result")
        .unwrap_or_else(|| panic!("no result in {line}"))
        .get()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_tools_are_listed_and_called_with_their_bytes() {
    let remote = Remote::new(false);
    let url = remote.serve().await;
    let gateway = start(vec![remote_entry(
        "remote",
        &url,
        &[("Authorization", "Bearer s3cret")],
    )])
    .await;
    let mut client = Client::new(&gateway).await;
    assert_eq!(
        client.tool_names().await,
        ["echo", "resumable", "slow", "stream_echo"]
    );

    let args = json!({"text": "hi", "n": 2});
    let line = client
        .call_raw("tools/call", json!({"name": "echo", "arguments": args}))
        .await;
    assert_eq!(raw_result(&line), echo_result(&args), "{line}");
    // Over SSE too (without a progress token), the bytes are the server's.
    let line = client
        .call_raw(
            "tools/call",
            json!({"name": "stream_echo", "arguments": args}),
        )
        .await;
    assert_eq!(raw_result(&line), echo_result(&args), "{line}");
    // Errors of the server's pass through.
    let value = client
        .call("tools/call", json!({"name": "nope", "arguments": {}}))
        .await;
    assert_eq!(value["error"]["code"], -32004, "{value}");

    // The spec's headers reach the server on every request; the session id after
    // `initialize`, and the protocol version the server answered after it.
    let seen = lock(&remote.seen).clone();
    assert!(seen.len() >= 5, "{seen:?}");
    for s in &seen {
        assert_eq!(s.authorization.as_deref(), Some("Bearer s3cret"), "{s:?}");
    }
    assert_eq!(seen[0].method, "initialize");
    assert_eq!(seen[0].session, None);
    for s in &seen[1..] {
        assert_eq!(s.session.as_deref(), Some("session-1"), "{s:?}");
        assert_eq!(s.version.as_deref(), Some("2025-03-26"), "{s:?}");
    }
    assert_eq!(seen[1].method, "notifications/initialized");
    assert_eq!(remote.initializes.load(Ordering::Relaxed), 1);

    // Ending the gateway ends the session on the server.
    gateway.shutdown().await;
    drop(client);
    eventually("the session to be deleted", || {
        lock(&remote.deletes).as_slice() == ["session-1"]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_from_an_sse_answer_reaches_the_client() {
    let remote = Remote::new(false);
    let url = remote.serve().await;
    let gateway = start(vec![remote_entry("remote", &url, &[])]).await;
    let mut client = Client::new(&gateway).await;
    let args = json!({"text": "slowly"});
    let line = client
        .call_raw(
            "tools/call",
            json!({"name": "stream_echo", "arguments": args, "_meta": {"progressToken": "tok-1"}}),
        )
        .await;
    assert_eq!(raw_result(&line), echo_result(&args));
    let progress = client
        .wait_for("progress", |v| v["method"] == "notifications/progress")
        .await;
    assert_eq!(progress["params"]["progressToken"], "tok-1", "{progress}");
    assert_eq!(progress["params"]["message"], "halfway");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_on_the_get_stream_makes_moniker_list_again() {
    let remote = Remote::new(false);
    let url = remote.serve().await;
    let gateway = start(vec![remote_entry("remote", &url, &[])]).await;
    let mut client = Client::new(&gateway).await;
    assert_eq!(
        client.tool_names().await,
        ["echo", "resumable", "slow", "stream_echo"]
    );
    eventually("the GET stream to open", || {
        !lock(&remote.streams).is_empty()
    })
    .await;
    remote.extra_tool.store(true, Ordering::Relaxed);
    let pushed = remote.push(
        "id: g1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n",
    );
    assert_eq!(pushed, 1);
    client
        .wait_for("list_changed", |v| {
            v["method"] == "notifications/tools/list_changed"
        })
        .await;
    assert_eq!(
        client.tool_names().await,
        ["echo", "fresh", "resumable", "slow", "stream_echo"]
    );
    let args = json!({"text": "new"});
    let line = client
        .call_raw("tools/call", json!({"name": "fresh", "arguments": args}))
        .await;
    assert_eq!(raw_result(&line), echo_result(&args));

    // The GET stream dropped by the server is opened again, from the last event id.
    let before = lock(&remote.streams).len();
    assert_eq!(before, 1);
    lock(&remote.streams).clear();
    eventually("the GET stream to open again", || {
        !lock(&remote.streams).is_empty()
    })
    .await;
    assert_eq!(lock(&remote.resumed_from).as_slice(), ["g1"]);
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_call_blocks_no_other_and_can_be_cancelled() {
    let remote = Remote::new(false);
    let url = remote.serve().await;
    let gateway = start(vec![remote_entry("remote", &url, &[])]).await;
    let mut client = Client::new(&gateway).await;
    let session = client.session.clone();
    let slow = tokio::spawn(async move {
        session
            .reply(r#"{"jsonrpc":"2.0","id":"slow-1","method":"tools/call","params":{"name":"slow","arguments":{"text":"late"}}}"#)
            .await
    });
    let r = remote.clone();
    eventually("the slow call to reach the server", move || {
        lock(&r.seen)
            .iter()
            .any(|s| s.tool.as_deref() == Some("remote__slow"))
    })
    .await;
    // Meanwhile other calls are answered.
    for text in ["a", "b", "c"] {
        let args = json!({ "text": text });
        let line = client
            .call_raw("tools/call", json!({"name": "echo", "arguments": args}))
            .await;
        assert_eq!(raw_result(&line), echo_result(&args));
    }
    assert!(!slow.is_finished());
    remote.release.notify_one();
    let line = within("the slow call", slow)
        .await
        .expect("join")
        .expect("a reply");
    assert_eq!(raw_result(&line), echo_result(&json!({"text": "late"})));

    // A cancelled call: the cancellation reaches the server, the client hears nothing more.
    let session = client.session.clone();
    let slow = tokio::spawn(async move {
        session
            .reply(r#"{"jsonrpc":"2.0","id":"slow-2","method":"tools/call","params":{"name":"slow","arguments":{}}}"#)
            .await
    });
    let r = remote.clone();
    eventually("the second slow call to reach the server", move || {
        lock(&r.seen)
            .iter()
            .filter(|s| s.tool.as_deref() == Some("remote__slow"))
            .count()
            == 2
    })
    .await;
    let none = within(
        "the cancellation",
        client.session.reply(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow-2"}}"#,
        ),
    )
    .await;
    assert!(none.is_none());
    assert_eq!(
        within("the cancelled call", slow).await.expect("join"),
        None
    );
    let r = remote.clone();
    eventually("the cancellation to reach the server", move || {
        lock(&r.seen)
            .iter()
            .any(|s| s.method == "notifications/cancelled")
    })
    .await;
    remote.release.notify_one();
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_stream_that_ends_early_is_resumed() {
    let remote = Remote::new(false);
    let url = remote.serve().await;
    let gateway = start(vec![remote_entry("remote", &url, &[])]).await;
    let mut client = Client::new(&gateway).await;
    let args = json!({"text": "again"});
    let line = client
        .call_raw(
            "tools/call",
            json!({"name": "resumable", "arguments": args}),
        )
        .await;
    assert_eq!(raw_result(&line), echo_result(&args), "{line}");
    let resumed = lock(&remote.resumed_from).clone();
    assert!(resumed.iter().any(|id| id.starts_with('r')), "{resumed:?}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_session_is_established_again() {
    let remote = Remote::new(false);
    let url = remote.serve().await;
    let gateway = start(vec![remote_entry("remote", &url, &[])]).await;
    let mut client = Client::new(&gateway).await;
    let args = json!({"text": "one"});
    let line = client
        .call_raw("tools/call", json!({"name": "echo", "arguments": args}))
        .await;
    assert_eq!(raw_result(&line), echo_result(&args));

    remote.forget_once.store(true, Ordering::SeqCst);
    let value = client
        .call("tools/call", json!({"name": "echo", "arguments": args}))
        .await;
    assert_eq!(value["error"]["code"], -32041, "{value}");
    eventually("a new initialize", || {
        remote.initializes.load(Ordering::Relaxed) == 2
    })
    .await;
    // Once the supervisor has connected again, calls work.
    let gw = gateway.clone();
    eventually("the server to be up again", || {
        gw.servers
            .server_status()
            .values()
            .all(|s| s.up && s.last_error.is_none())
    })
    .await;
    let args = json!({"text": "two"});
    let line = client
        .call_raw("tools/call", json!({"name": "echo", "arguments": args}))
        .await;
    assert_eq!(raw_result(&line), echo_result(&args), "{line}");
    let seen = lock(&remote.seen).clone();
    let last = seen.last().expect("requests");
    assert_eq!(last.session.as_deref(), Some("session-2"), "{seen:?}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_goes_away_fails_calls_at_once_and_is_reconnected() {
    let remote = Remote::new(false);
    let server = remote.serve_apart(0);
    let addr = server.addr;
    let gateway = start(vec![remote_entry("remote", &server.url(), &[])]).await;
    let mut client = Client::new(&gateway).await;
    let args = json!({"text": "before"});
    let line = client
        .call_raw("tools/call", json!({"name": "echo", "arguments": args}))
        .await;
    assert_eq!(raw_result(&line), echo_result(&args));
    // A call in flight when the server goes away fails at once, not at its timeout.
    let session = client.session.clone();
    let slow = tokio::spawn(async move {
        session
            .reply(r#"{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"slow","arguments":{}}}"#)
            .await
    });
    let r = remote.clone();
    eventually("the slow call to reach the server", move || {
        lock(&r.seen)
            .iter()
            .any(|s| s.tool.as_deref() == Some("remote__slow"))
    })
    .await;
    let started = std::time::Instant::now();
    server.stop().await;
    let line = within("the slow call to fail", slow)
        .await
        .expect("join")
        .expect("a reply");
    let value: Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(value["error"]["code"], -32041, "{value}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let gw = gateway.clone();
    eventually("the server to be down", move || {
        gw.servers
            .server_status()
            .values()
            .all(|s| !s.up && s.last_error.is_some())
    })
    .await;
    let value = client
        .call("tools/call", json!({"name": "echo", "arguments": args}))
        .await;
    assert!(
        value["error"]["code"] == -32041 || value["error"]["code"] == -32004,
        "{value}"
    );
    let why = gateway.servers.server_status()["remote"]
        .last_error
        .clone()
        .expect("a reason");
    assert!(why.contains(&addr.to_string()), "{why}");

    // Back on the same port: moniker connects again by itself.
    let server = remote.serve_apart(addr.port());
    let gw = gateway.clone();
    eventually("the server to be up again", move || {
        gw.servers.server_status().values().all(|s| s.up)
    })
    .await;
    let args = json!({"text": "after"});
    let line = client
        .call_raw("tools/call", json!({"name": "echo", "arguments": args}))
        .await;
    assert_eq!(raw_result(&line), echo_result(&args), "{line}");
    gateway.shutdown().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_of_the_legacy_transport_works() {
    let remote = Remote::new(true);
    let url = remote.serve().await;
    let gateway = start(vec![remote_entry(
        "remote",
        &url,
        &[("Authorization", "Bearer legacy")],
    )])
    .await;
    let mut client = Client::new(&gateway).await;
    assert_eq!(
        client.tool_names().await,
        ["echo", "resumable", "slow", "stream_echo"]
    );
    let args = json!({"text": "old"});
    let line = client
        .call_raw("tools/call", json!({"name": "echo", "arguments": args}))
        .await;
    assert_eq!(raw_result(&line), echo_result(&args), "{line}");
    let line = client
        .call_raw(
            "tools/call",
            json!({"name": "stream_echo", "arguments": args, "_meta": {"progressToken": 9}}),
        )
        .await;
    assert_eq!(raw_result(&line), echo_result(&args), "{line}");
    let progress = client
        .wait_for("progress", |v| v["method"] == "notifications/progress")
        .await;
    assert_eq!(progress["params"]["progressToken"], 9, "{progress}");

    // Server-initiated messages come on the same stream.
    remote.extra_tool.store(true, Ordering::Relaxed);
    assert_eq!(
        remote.push(&message_event(
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#
        )),
        1
    );
    client
        .wait_for("list_changed", |v| {
            v["method"] == "notifications/tools/list_changed"
        })
        .await;
    assert_eq!(
        client.tool_names().await,
        ["echo", "fresh", "resumable", "slow", "stream_echo"]
    );

    let seen = lock(&remote.seen).clone();
    assert_eq!(seen[0].method, "initialize", "{seen:?}");
    for s in &seen {
        assert_eq!(s.authorization.as_deref(), Some("Bearer legacy"), "{s:?}");
    }

    // The end of the event stream is the end of the connection: moniker connects again.
    lock(&remote.streams).clear();
    eventually("a new connection", || {
        remote.next_session.load(Ordering::Relaxed) >= 2 && lock(&remote.streams).len() == 1
    })
    .await;
    let gw = gateway.clone();
    eventually("the server to be up again", || {
        gw.servers.server_status().values().all(|s| s.up)
    })
    .await;
    let line = client
        .call_raw("tools/call", json!({"name": "echo", "arguments": args}))
        .await;
    assert_eq!(raw_result(&line), echo_result(&args), "{line}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_fails_to_start_and_the_others_serve() {
    let remote = Remote::new(false);
    let url = remote.serve().await;
    // A port nobody listens on: bound, then closed.
    let closed = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr: SocketAddr = listener.local_addr().expect("address");
        format!("http://{addr}/mcp")
    };
    let locked = Remote::locked("Bearer right");
    let locked_url = locked.serve().await;
    let nowhere = url.replace("/mcp", "/nowhere");
    let gateway = start(vec![
        remote_entry("remote", &url, &[]),
        remote_entry("gone", &closed, &[("Authorization", "Bearer hidden-value")]),
        remote_entry("bad", "not a url", &[]),
        remote_entry("locked", &locked_url, &[("Authorization", "Bearer wrong")]),
        remote_entry("nowhere", &nowhere, &[]),
        remote_entry("tls", "https://127.0.0.1:1/mcp", &[]),
    ])
    .await;
    let status = gateway.servers.server_status();
    let gone = &status["gone"];
    assert!(!gone.up);
    let why = gone.last_error.clone().expect("a reason");
    assert!(why.contains(&closed), "{why}");
    assert!(!why.contains("hidden-value"), "{why}");
    assert!(!why.contains('\n'), "{why}");
    let reason = |id: &str| {
        let s = &status[id];
        assert!(!s.up, "{id}");
        let why = s.last_error.clone().expect("a reason");
        assert!(!why.contains('\n'), "{why}");
        why
    };
    let why = reason("bad");
    assert!(why.contains("not a url"), "{why}");
    let why = reason("locked");
    assert!(why.contains("401") && why.contains(&locked_url), "{why}");
    assert!(why.contains("missing or wrong token"), "{why}");
    assert!(!why.contains("Bearer"), "{why}");
    let why = reason("nowhere");
    assert!(why.contains(&nowhere) && why.contains("404"), "{why}");
    let why = reason("tls");
    assert!(why.contains("https://127.0.0.1:1/mcp"), "{why}");
    assert!(status["remote"].up);

    let mut client = Client::new(&gateway).await;
    assert_eq!(
        client.tool_names().await,
        ["echo", "resumable", "slow", "stream_echo"]
    );
    let args = json!({"text": "still here"});
    let line = client
        .call_raw("tools/call", json!({"name": "echo", "arguments": args}))
        .await;
    assert_eq!(raw_result(&line), echo_result(&args));
    gateway.shutdown().await;
}

/// `@modelcontextprotocol/server-everything`, when the e2e suite's node_modules are there.
fn everything() -> Option<std::path::PathBuf> {
    let index = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/e2e/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !index.is_file() {
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "skipped: {} is absent (run `npm ci` in tests/e2e)",
                index.display()
            );
        }
        return None;
    }
    let node = std::process::Command::new("node").arg("--version").output();
    if !node.is_ok_and(|o| o.status.success()) {
        #[allow(clippy::print_stderr)]
        {
            eprintln!("skipped: `node` is not installed");
        }
        return None;
    }
    Some(index)
}

/// Runs server-everything with `transport` on a free port; the child and the port.
async fn run_everything(index: &std::path::Path, transport: &str) -> (tokio::process::Child, u16) {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address").port()
    };
    let child = tokio::process::Command::new("node")
        .arg(index)
        .arg(transport)
        .env("PORT", port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node");
    within("server-everything to listen", async {
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    (child, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_streamable_http_and_sse() {
    let Some(index) = everything() else {
        return;
    };
    for (transport, path) in [("streamableHttp", "/mcp"), ("sse", "/sse")] {
        let (mut child, port) = run_everything(&index, transport).await;
        let url = format!("http://127.0.0.1:{port}{path}");
        let gateway = start(vec![remote_entry("everything", &url, &[])]).await;
        let status = gateway.servers.server_status();
        assert!(status.values().all(|s| s.up), "{transport}: {status:?}");
        let mut client = Client::new(&gateway).await;
        let names = client.tool_names().await;
        assert!(names.iter().any(|n| n == "echo"), "{transport}: {names:?}");
        let value = client
            .call(
                "tools/call",
                json!({"name": "echo", "arguments": {"message": "through moniker"}}),
            )
            .await;
        assert_eq!(
            value["result"]["content"][0]["text"], "Echo: through moniker",
            "{transport}: {value}"
        );
        // Progress on the answer's event stream.
        let value = client
            .call(
                "tools/call",
                json!({"name": "trigger-long-running-operation", "arguments": {"duration": 0.2, "steps": 2}, "_meta": {"progressToken": "p"}}),
            )
            .await;
        assert!(
            value["result"]["content"].is_array(),
            "{transport}: {value}"
        );
        let progress = client
            .wait_for("progress", |v| v["method"] == "notifications/progress")
            .await;
        assert_eq!(progress["params"]["progressToken"], "p", "{transport}");
        // A request of the server's to the client (sampling) during a call, and its answer.
        let session = client.session.clone();
        let call = tokio::spawn(async move {
            session
                .reply(r#"{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"trigger-sampling-request","arguments":{"prompt":"hi"}}}"#)
                .await
        });
        let request = client
            .wait_for("sampling", |v| v["method"] == "sampling/createMessage")
            .await;
        let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"role": "assistant", "content": {"type": "text", "text": "sampled here"}, "model": "test", "stopReason": "endTurn"}});
        let none = within("the answer", client.session.reply(&answer.to_string())).await;
        assert!(none.is_none());
        let line = within("the sampling call", call)
            .await
            .expect("join")
            .expect("a reply");
        assert!(line.contains("sampled here"), "{transport}: {line}");
        gateway.shutdown().await;
        let _ = child.kill().await;
    }
}
