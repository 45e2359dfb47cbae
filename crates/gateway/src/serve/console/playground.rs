//! The playground, and "view as": a session of the console's own, as a chosen toolset's
//! client would have it, driven the normal way (`initialize`, then the request), so that what
//! it shows is what such a client gets, byte for byte, and every call is audited under the
//! console's principal.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use askama::Template;
use axum::extract::{Form, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use super::{Desk, Nav, Shared, html, query_toolset, refused};
use moniker_surface::discovery::{Discovery, Mode};
use moniker_surface::{Kind, listing, toolsets};

use crate::message::{self, Message, Params};
use crate::session::Session;

/// The most of a listing a page shows.
pub(super) const MAX_SHOWN: usize = 256 * 1024;

/// What a toolset's client is listed: the listing as it receives it, its size in tokens.
#[derive(Default)]
pub(super) struct Seen {
    pub toolset: String,
    pub text: String,
    pub bytes: usize,
    pub tokens: usize,
    pub tools: usize,
}

/// A request the console sent, and the answer, each as the text that went over.
pub(super) struct Exchange {
    pub sent: String,
    pub answer: String,
}

/// Sends `method` with `params` in a new session of `toolset` (`None`: the whole surface) as
/// `who`, and waits for its answer (at most the gateway's call timeout and a little more).
pub(super) async fn ask(
    shared: &Shared,
    toolset: Option<&str>,
    who: &str,
    method: &str,
    params: Option<&Params>,
) -> Exchange {
    let (session, rx) = open(shared, toolset, who);
    converse(shared, &session, rx, method, params).await
}

/// `search_tools` for `query`, as `toolset`'s client would have it were the toolset in search
/// mode (it is answered whatever its mode: the ranking over what the toolset sees).
async fn search_as(shared: &Shared, toolset: Option<&str>, who: &str, query: &str) -> Exchange {
    let arguments = serde_json::json!({"query": query, "limit": 10}).to_string();
    let params = Params::object(&[("name", r#""search_tools""#), ("arguments", &arguments)]);
    let (session, rx) = open(shared, toolset, who);
    session.answer_search();
    converse(shared, &session, rx, "tools/call", Some(&params)).await
}

/// A session of the console's own, as `who`, and what it sends its client.
fn open(
    shared: &Shared,
    toolset: Option<&str>,
    who: &str,
) -> (Arc<Session>, tokio::sync::mpsc::UnboundedReceiver<Message>) {
    let gateway = shared.gateway.clone();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let session = match toolset {
        Some(toolset) => Session::bound(gateway, tx, toolset.to_owned()),
        None => Session::new(gateway, tx),
    };
    session.identify(who);
    (session, rx)
}

/// Initializes `session`, sends it `method` and waits for the answer.
async fn converse(
    shared: &Shared,
    session: &Arc<Session>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Message>,
    method: &str,
    params: Option<&Params>,
) -> Exchange {
    let gateway = &shared.gateway;
    let initialize = Params::object(&[
        ("protocolVersion", r#""2025-06-18""#),
        ("capabilities", "{}"),
        ("clientInfo", r#"{"name":"moniker console","version":"0"}"#),
    ]);
    let initialize = Message::outgoing("0", "initialize", Some(&initialize));
    session.handle(Ok(message::Incoming::One(initialize)), None);
    let initialized = Message::notification("notifications/initialized", None);
    session.handle(Ok(message::Incoming::One(initialized)), None);
    let request = Message::outgoing("1", method, params);
    let sent = request.text().to_owned();
    session.handle(Ok(message::Incoming::One(request)), None);
    let wait = gateway.settings.config.call_timeout + Duration::from_secs(5);
    let answer = tokio::time::timeout(wait, async {
        while let Some(message) = rx.recv().await {
            if let (Some(method), Some(id)) = (message.method(), message.id()) {
                let refusal = Message::error(
                    Some(id),
                    message::METHOD_NOT_FOUND,
                    &format!("the console's playground does not answer `{method}`"),
                );
                session.handle(Ok(message::Incoming::One(refusal)), None);
                continue;
            }
            let value: Value = serde_json::from_str(message.text()).unwrap_or_default();
            if value.get("id") == Some(&Value::from(1)) {
                return message.text().to_owned();
            }
        }
        "(the session ended without an answer)".to_owned()
    })
    .await
    .unwrap_or_else(|_| "(no answer in time)".to_owned());
    Exchange { sent, answer }
}

/// The listing `toolset`'s client receives.
pub(super) async fn listing_as(shared: &Shared, toolset: Option<&str>, who: &str) -> Seen {
    let exchange = ask(shared, toolset, who, "tools/list", None).await;
    let answer: Value = serde_json::from_str(&exchange.answer).unwrap_or_default();
    seen(
        toolset,
        answer.get("result").cloned().unwrap_or(Value::Null),
    )
    .await
}

/// The listing `toolset`'s client would receive were its discovery mode `mode`: made as a
/// session makes it, from the surface and the toolset's selection (the management tools a
/// session may add at the end aside).
pub(super) async fn listing_in(shared: &Shared, toolset: Option<&str>, mode: Mode) -> Seen {
    let gateway = &shared.gateway;
    let view = gateway.naming.view();
    let surface = &view.surface;
    let rules = gateway.naming.rules();
    let own = toolset
        .and_then(|t| rules.toolsets.sets.get(t))
        .and_then(|t| t.discovery.clone())
        .unwrap_or_else(|| surface.discovery().clone());
    let discovery = Discovery { mode, ..own };
    let selection = toolset.map(|t| gateway.naming.toolset(t, &view));
    let entries = match &selection {
        Some(selection) => discovery.entries(
            Kind::Tool,
            toolsets::entries(surface, selection, Kind::Tool),
        ),
        None => discovery.entries(
            Kind::Tool,
            surface
                .listed(Kind::Tool)
                .map(|e| (e, std::borrow::Cow::Borrowed(&*e.definition))),
        ),
    };
    let server = discovery.server(surface, Kind::Tool, entries.len());
    let text = listing::render(Kind::Tool, entries, &[], server);
    seen(toolset, serde_json::from_str(&text).unwrap_or_default()).await
}

/// What a listing shows, its tokens counted on a blocking thread (the whole listing, with a
/// tokenizer made on first use: not on the thread that serves calls).
async fn seen(toolset: Option<&str>, result: Value) -> Seen {
    let toolset = toolset.unwrap_or("(all)").to_owned();
    tokio::task::spawn_blocking(move || seen_now(toolset, result))
        .await
        .unwrap_or_default()
}

fn seen_now(toolset: String, result: Value) -> Seen {
    let tools = result
        .get("tools")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let text = serde_json::to_string_pretty(&result).unwrap_or_default();
    let compact = result.to_string();
    Seen {
        toolset,
        bytes: compact.len(),
        tokens: tokens(&compact),
        tools,
        text: capped(text),
    }
}

/// The tokens of `text` in o200k (what `moniker stats` counts in).
fn tokens(text: &str) -> usize {
    static BPE: OnceLock<Option<tiktoken_rs::CoreBPE>> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().ok())
        .as_ref()
        .map_or(0, |bpe| bpe.encode_with_special_tokens(text).len())
}

fn capped(mut text: String) -> String {
    if text.len() > MAX_SHOWN {
        text.truncate(crate::message::at_most(&text, MAX_SHOWN).len());
        text.push_str("\n… (cut: the page shows at most 256 KiB)");
    }
    text
}

/// A field of the form made from a tool's input schema.
pub(super) struct Field {
    pub name: String,
    pub kind: String,
    pub description: String,
    pub required: bool,
    /// The values of an `enum` (a select), else empty (a text input).
    pub options: Vec<String>,
    pub value: String,
}

#[derive(Template)]
#[template(path = "console/playground.html")]
struct PlaygroundPage {
    nav: Nav,
    toolsets: Vec<String>,
    toolset: String,
    tools: Vec<String>,
    tool: String,
    fields: Vec<Field>,
    query: String,
    found: Option<Exchange>,
    called: Option<Exchange>,
}

#[derive(serde::Deserialize, Default)]
pub(super) struct PlaygroundQuery {
    #[serde(default)]
    toolset: String,
    #[serde(default)]
    tool: String,
    #[serde(default)]
    q: String,
}

pub(super) async fn page(
    State(shared): State<Arc<Desk>>,
    admin: super::Admin,
    Query(query): Query<PlaygroundQuery>,
) -> Response {
    let found = if query.q.trim().is_empty() {
        None
    } else {
        let toolset = chosen(&shared, &query.toolset).flatten();
        Some(search_as(&shared, toolset, &admin.name, &query.q).await)
    };
    render(
        &shared,
        Nav::of("playground", &admin),
        query,
        found,
        None,
        &[],
    )
    .await
}

/// The page, for the toolset and tool chosen, with a search's and a call's exchanges.
async fn render(
    shared: &Shared,
    nav: Nav,
    query: PlaygroundQuery,
    found: Option<Exchange>,
    called: Option<Exchange>,
    given: &[(String, String)],
) -> Response {
    let toolsets: Vec<String> = shared.gateway.naming.toolset_names().into_iter().collect();
    let toolset = chosen(shared, &query.toolset).flatten();
    let listing = ask(shared, toolset, &nav.who, "tools/list", None).await;
    let answer: Value = serde_json::from_str(&listing.answer).unwrap_or_default();
    let listed: Vec<Value> = answer
        .pointer("/result/tools")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let tools: Vec<String> = listed
        .iter()
        .filter_map(|t| t.get("name")?.as_str().map(str::to_owned))
        .collect();
    let fields = listed
        .iter()
        .find(|t| t.get("name").and_then(Value::as_str) == Some(query.tool.as_str()))
        .map(|t| fields_of(t, given))
        .unwrap_or_default();
    html(&PlaygroundPage {
        nav,
        toolsets,
        toolset: query.toolset,
        tools,
        tool: query.tool,
        fields,
        query: query.q,
        found,
        called,
    })
}

/// The toolset a form chose, when it names one that exists (`Some(None)`: the whole surface).
fn chosen<'a>(shared: &Shared, toolset: &'a str) -> Option<Option<&'a str>> {
    let known: BTreeSet<String> = shared.gateway.naming.toolset_names().into_iter().collect();
    match query_toolset(toolset, &known) {
        Ok(chosen) => Some(chosen),
        Err(()) if toolset.is_empty() => Some(None),
        Err(()) => None,
    }
}

/// The form of a tool: one field per property of its input schema, an action tool's
/// `action` first.
fn fields_of(tool: &Value, given: &[(String, String)]) -> Vec<Field> {
    let schema = tool.get("inputSchema").cloned().unwrap_or(Value::Null);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut fields: Vec<Field> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(name, prop)| Field {
                    name: name.clone(),
                    kind: match prop.get("type") {
                        Some(Value::String(t)) => t.clone(),
                        Some(other) => other.to_string(),
                        None => "any".to_owned(),
                    },
                    description: prop
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    required: required.contains(&name.as_str()),
                    options: prop
                        .get("enum")
                        .and_then(Value::as_array)
                        .map(|e| {
                            e.iter()
                                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                                .collect()
                        })
                        .unwrap_or_default(),
                    value: given
                        .iter()
                        .find(|(k, _)| k.strip_prefix("arg.") == Some(name.as_str()))
                        .map(|(_, v)| v.clone())
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    fields.sort_by_key(|f| f.name != "action");
    fields
}

/// A call from the playground's form: the fields as arguments (each as JSON when it reads as
/// JSON and its schema does not say `string`, else as text), or the raw JSON given.
pub(super) async fn call(
    State(shared): State<Arc<Desk>>,
    admin: super::Admin,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let get = |key: &str| {
        form.iter()
            .find(|(k, _)| k == key)
            .map_or("", |(_, v)| v.as_str())
    };
    if !admin.checks(get("csrf")) {
        return refused(
            StatusCode::FORBIDDEN,
            "this form is not from this console (CSRF)",
        );
    }
    let query = PlaygroundQuery {
        toolset: get("toolset").to_owned(),
        tool: get("tool").to_owned(),
        q: String::new(),
    };
    let Some(toolset) = chosen(&shared, &query.toolset) else {
        return refused(StatusCode::BAD_REQUEST, "no such toolset");
    };
    let arguments = match arguments_of(&form, get("raw")) {
        Ok(arguments) => arguments,
        Err(why) => return refused(StatusCode::BAD_REQUEST, &why),
    };
    let name = Value::String(query.tool.clone()).to_string();
    let params = Params::object(&[("name", &name), ("arguments", &arguments)]);
    let called = ask(&shared, toolset, &admin.name, "tools/call", Some(&params)).await;
    let nav = Nav::of("playground", &admin);
    render(&shared, nav, query, None, Some(called), &form).await
}

fn arguments_of(form: &[(String, String)], raw: &str) -> Result<String, String> {
    if !raw.trim().is_empty() {
        return match serde_json::from_str::<Value>(raw) {
            Ok(Value::Object(_)) => Ok(raw.trim().to_owned()),
            _ => Err("the raw arguments are not a JSON object".to_owned()),
        };
    }
    let mut arguments = serde_json::Map::new();
    for (key, value) in form {
        let Some(name) = key.strip_prefix("arg.") else {
            continue;
        };
        if value.is_empty() {
            continue;
        }
        let is_text = form
            .iter()
            .any(|(k, v)| k == &format!("type.{name}") && v == "string");
        let parsed = match serde_json::from_str::<Value>(value) {
            Ok(v) if !is_text => v,
            _ => Value::String(value.clone()),
        };
        arguments.insert(name.to_owned(), parsed);
    }
    Ok(Value::Object(arguments).to_string())
}
