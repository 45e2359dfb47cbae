//! MCP 2026-07-28, the stateless era, on both sides of the gateway: its room. No `initialize`
//! and no session; each request carries its protocol version and the client's capabilities in
//! `params._meta` (`io.modelcontextprotocol/protocolVersion`, `.../clientCapabilities`),
//! `server/discover` says what a server speaks, and every result says `resultType` (lists also
//! their cache hints). A request without the envelope is a 2025 one, answered as before: both
//! eras on the same endpoint.
//!
//! Here: the envelope and its keys, `server/discover`, results and their cache hints,
//! `subscriptions/listen`, and the input-required translation ([`input`]). The sessions
//! (client side) and `connect` (server side) both use it; it uses neither. The calls parked
//! for a client's input are the gateway's ([`crate::parked`]).

use crate::message::{self, Message};

pub(crate) mod input;

/// The stateless protocol version.
pub const MODERN_VERSION: &str = "2026-07-28";
const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
/// The version a request names is not one moniker speaks (2026-07-28).
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// The HTTP routing headers disagree with the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// A request needs a capability the client did not declare (HTTP 400).
pub const MISSING_CAPABILITY: i64 = -32021;
pub(crate) const PROTOCOL_VERSION_META: &str = PROTOCOL_VERSION_KEY;
/// The `_meta` keys of the 2026-07-28 envelope: what a 2025-era server never sees (the
/// official SDKs refuse a request that carries them on a handshake connection).
const ENVELOPE_KEYS: [&str; 4] = [
    PROTOCOL_VERSION_KEY,
    CAPABILITIES_KEY,
    CLIENT_INFO_META,
    "io.modelcontextprotocol/logLevel",
];

/// `params` without the 2026-07-28 envelope, for a server of the 2025 era; `None` when it has
/// none (the params go as they are). A `_meta` left empty goes too.
pub(crate) fn without_envelope(params: &str) -> Option<String> {
    if !params.contains("io.modelcontextprotocol/") {
        return None;
    }
    let fields = message::fields(params)?;
    let meta = message::fields(fields.get("_meta")?.get())?;
    if !ENVELOPE_KEYS.iter().any(|k| meta.contains_key(*k)) {
        return None;
    }
    let kept: Vec<(&str, &str)> = meta
        .iter()
        .filter(|(k, _)| !ENVELOPE_KEYS.contains(&k.as_ref()))
        .map(|(k, v)| (k.as_ref(), v.get()))
        .collect();
    let kept = (!kept.is_empty()).then(|| message::object(kept));
    let out = fields.iter().filter_map(|(k, v)| match k.as_ref() {
        "_meta" => kept.as_deref().map(|m| ("_meta", m)),
        key => Some((key, v.get())),
    });
    Some(message::object(out))
}
pub(crate) const CAPABILITIES_META: &str = CAPABILITIES_KEY;
pub(crate) const CLIENT_INFO_META: &str = "io.modelcontextprotocol/clientInfo";

/// The params key whose value `Mcp-Name` mirrors, for the methods that name something.
pub(crate) fn name_key(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// The protocol version of a request's envelope, if it has one.
pub(crate) fn version_of(request: &Message) -> Option<String> {
    let params = request.params()?;
    if !params.contains(PROTOCOL_VERSION_KEY) {
        return None;
    }
    let fields = message::fields(params)?;
    let meta = message::fields(fields.get("_meta")?.get())?;
    message::str_field(&meta, PROTOCOL_VERSION_KEY).map(|v| v.into_owned())
}

/// The kinds of input a 2026-07-28 client declared it answers (`clientCapabilities`), read
/// with the envelope: a server's request for any other is refused at once during its calls,
/// as a 2025 client without the capability would be (a server asks for roots when it likes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Answerable {
    pub sampling: bool,
    pub elicitation: bool,
    pub roots: bool,
}

impl Answerable {
    fn of(capabilities: &str) -> Self {
        let fields = message::fields(capabilities);
        let has = |key: &str| fields.as_ref().is_some_and(|c| c.contains_key(key));
        Self {
            sampling: has("sampling"),
            elicitation: has("elicitation"),
            roots: has("roots"),
        }
    }

    /// Whether the client answers a server's request of `method`.
    pub(crate) fn answers(self, method: &str) -> bool {
        match method {
            "sampling/createMessage" => self.sampling,
            "elicitation/create" => self.elicitation,
            "roots/list" => self.roots,
            _ => false,
        }
    }
}

/// What a request's envelope says, when it has one.
pub(crate) enum Envelope {
    /// A 2025 request (no envelope).
    None,
    /// A 2026-07-28 request, and what its client declared it answers.
    Modern(Answerable),
    /// An envelope moniker cannot serve: the answer.
    Refused(Message),
}

/// Reads a request's `params._meta` envelope (only when its text names the key: a 2025
/// request is not parsed again).
pub(crate) fn envelope(request: &Message) -> Envelope {
    let Some(params) = request.params() else {
        return Envelope::None;
    };
    if !params.contains(PROTOCOL_VERSION_KEY) {
        return Envelope::None;
    }
    let id = request.id().unwrap_or("null");
    let meta = message::fields(params)
        .and_then(|f| f.get("_meta").map(|m| m.get().to_owned()))
        .and_then(|m| {
            message::fields(&m).map(|f| {
                (
                    message::str_field(&f, PROTOCOL_VERSION_KEY).map(|v| v.into_owned()),
                    f.get(CAPABILITIES_KEY).map(|c| Answerable::of(c.get())),
                )
            })
        });
    match meta {
        Some((Some(version), Some(can))) if version == MODERN_VERSION => Envelope::Modern(can),
        Some((Some(version), Some(_))) => {
            let data = serde_json::json!({"supported": [MODERN_VERSION], "requested": version});
            let error = format!(
                r#"{{"code":{UNSUPPORTED_PROTOCOL_VERSION},"message":"Unsupported protocol version","data":{data}}}"#
            );
            Envelope::Refused(Message::error_raw(id, &error))
        }
        _ => Envelope::Refused(missing_envelope(request)),
    }
}

/// The methods of the 2025 era that 2026-07-28 removed: a request of the new era for one is
/// not found (HTTP 404), though a 2025 session keeps them.
pub(crate) const REMOVED: [&str; 5] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// The answer to a 2026-07-28 request whose envelope is missing or incomplete (-32602; HTTP
/// 400).
pub(crate) fn missing_envelope(request: &Message) -> Message {
    Message::error(
        Some(request.id().unwrap_or("null")),
        message::INVALID_PARAMS,
        &format!(
            "params._meta must carry `{PROTOCOL_VERSION_KEY}` (a string) and `{CAPABILITIES_KEY}`"
        ),
    )
}

/// `server/discover`'s result: the versions moniker speaks on this endpoint, and the
/// capabilities it serves (`capabilities`: the object's members, as `initialize` has them).
pub(crate) fn discover(handshake_versions: &[&str], capabilities: &str) -> String {
    let mut versions: Vec<&str> = handshake_versions.to_vec();
    versions.push(MODERN_VERSION);
    let versions: Vec<String> = versions.iter().map(|v| message::string(v)).collect();
    format!(
        r#"{{"supportedVersions":[{}],"capabilities":{{{capabilities}}},"_meta":{{"{SERVER_INFO_KEY}":{{"name":"moniker","version":"{}"}}}},"ttlMs":0,"cacheScope":"public","resultType":"complete"}}"#,
        versions.join(","),
        env!("CARGO_PKG_VERSION")
    )
}

/// A 2026-07-28 answer: a result gets `resultType` (when the server did not say), and a list
/// its cache hints: `ttl_ms` (the smallest of the servers behind it), `private` when it
/// depends on who asks (a toolset). Errors pass as they are; the result's other bytes are
/// kept.
pub(crate) fn answer(reply: Message, method: &str, private: bool, ttl_ms: u64) -> Message {
    let Some(result) = reply.result_text() else {
        return reply;
    };
    let body = result.trim_start();
    if !body.starts_with('{') {
        return reply;
    }
    // The result's own keys decide, not its bytes: a tool's content may hold the words. (The
    // keys are read only when the words are there at all.)
    let keys = (result.contains("\"resultType\"") || result.contains("\"ttlMs\""))
        .then(|| message::fields(result))
        .flatten();
    let has = |key: &str| keys.as_ref().is_some_and(|k| k.contains_key(key));
    let mut added = String::new();
    if !has("resultType") {
        added.push_str(r#""resultType":"complete","#);
    }
    // Lists and resource reads carry cache hints (`resources/read` too, in 2026-07-28).
    let is_list = matches!(
        method,
        "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
    );
    if is_list && !has("ttlMs") {
        let scope = if private { "private" } else { "public" };
        added.push_str(&format!(r#""ttlMs":{ttl_ms},"cacheScope":"{scope}","#));
    }
    if added.is_empty() {
        return reply;
    }
    let rest = body[1..].trim_start();
    let spliced = if rest.starts_with('}') {
        format!("{{{}}}", added.trim_end_matches(','))
    } else {
        format!("{{{added}{rest}")
    };
    Message::result(reply.id().unwrap_or("null"), &spliced)
}

/// The most resources one `subscriptions/listen` subscribes to.
pub(crate) const MAX_RESOURCE_SUBSCRIPTIONS: usize = 256;

/// What a `subscriptions/listen` request opts in to.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Filter {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    /// `resourceSubscriptions`: the URIs whose updates it wants (at most
    /// [`MAX_RESOURCE_SUBSCRIPTIONS`]).
    pub uris: Vec<String>,
}

pub(crate) fn listen_filter(request: &Message) -> Filter {
    let filter = request
        .params()
        .and_then(message::fields)
        .and_then(|f| f.get("notifications").map(|n| n.get().to_owned()));
    let Some(filter) = filter.as_deref().and_then(message::fields) else {
        return Filter::default();
    };
    let on = |key: &str| filter.get(key).is_some_and(|v| v.get() == "true");
    let uris: Vec<String> = filter
        .get("resourceSubscriptions")
        .and_then(|u| serde_json::from_str::<Vec<String>>(u.get()).ok())
        .unwrap_or_default();
    let mut unique: Vec<String> = Vec::new();
    for uri in uris {
        if unique.len() == MAX_RESOURCE_SUBSCRIPTIONS {
            break;
        }
        if !unique.contains(&uri) {
            unique.push(uri);
        }
    }
    Filter {
        tools: on("toolsListChanged"),
        prompts: on("promptsListChanged"),
        resources: on("resourcesListChanged"),
        uris: unique,
    }
}

/// `notifications/subscriptions/acknowledged` for the listen request `id` (raw JSON): what of
/// `filter` is honored.
pub(crate) fn acknowledged(id: &str, filter: &Filter) -> Message {
    let mut honored = Vec::new();
    for (on, key) in [
        (filter.tools, "toolsListChanged"),
        (filter.prompts, "promptsListChanged"),
        (filter.resources, "resourcesListChanged"),
    ] {
        if on {
            honored.push(format!(r#""{key}":true"#));
        }
    }
    if !filter.uris.is_empty() {
        let uris: Vec<String> = filter.uris.iter().map(|u| message::string(u)).collect();
        honored.push(format!(r#""resourceSubscriptions":[{}]"#, uris.join(",")));
    }
    let params = format!(
        r#"{{"notifications":{{{}}},"_meta":{{"io.modelcontextprotocol/subscriptionId":{id}}}}}"#,
        honored.join(",")
    );
    Message::notification("notifications/subscriptions/acknowledged", Some(&params))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(params: &str) -> Message {
        message::parse_one(format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{params}}}"#
        ))
        .expect("a request")
    }

    #[test]
    fn envelopes_are_read_and_checked() {
        assert!(matches!(envelope(&request("{}")), Envelope::None));
        let modern = r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#;
        assert!(matches!(envelope(&request(modern)), Envelope::Modern(_)));
        let future = r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}"#;
        let Envelope::Refused(answer) = envelope(&request(future)) else {
            panic!("refused");
        };
        assert!(
            answer.text().contains("-32022")
                && answer.text().contains(r#""supported":["2026-07-28"]"#),
            "{}",
            answer.text()
        );
        let partial = r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#;
        let Envelope::Refused(answer) = envelope(&request(partial)) else {
            panic!("refused");
        };
        assert!(answer.text().contains("-32602"), "{}", answer.text());
    }

    #[test]
    fn results_say_their_type_and_lists_their_cache_hints() {
        let list = Message::result("1", r#"{"tools":[]}"#);
        let out = answer(list, "tools/list", true, 0);
        assert_eq!(
            out.result_text(),
            Some(r#"{"resultType":"complete","ttlMs":0,"cacheScope":"private","tools":[]}"#)
        );
        let out = answer(
            Message::result("1", r#"{"tools":[]}"#),
            "tools/list",
            false,
            30000,
        );
        assert_eq!(
            out.result_text(),
            Some(r#"{"resultType":"complete","ttlMs":30000,"cacheScope":"public","tools":[]}"#)
        );
        let empty = answer(Message::result("2", "{}"), "tools/call", false, 5);
        assert_eq!(empty.result_text(), Some(r#"{"resultType":"complete"}"#));
        let kept = answer(
            Message::result("3", r#"{"resultType":"input_required","x":1.50}"#),
            "tools/call",
            false,
            5,
        );
        assert_eq!(
            kept.result_text(),
            Some(r#"{"resultType":"input_required","x":1.50}"#)
        );
    }

    #[test]
    fn a_2025_server_never_sees_the_envelope() {
        let params = r#"{"name":"t","arguments":{"x":"io.modelcontextprotocol/protocolVersion"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c"},"progressToken":7,"io.modelcontextprotocol/related-task":{"taskId":"a"}}}"#;
        assert_eq!(
            without_envelope(params).as_deref(),
            Some(
                r#"{"name":"t","arguments":{"x":"io.modelcontextprotocol/protocolVersion"},"_meta":{"progressToken":7,"io.modelcontextprotocol/related-task":{"taskId":"a"}}}"#
            )
        );
        let only =
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"uri":"a://b"}"#;
        assert_eq!(
            without_envelope(only).as_deref(),
            Some(r#"{"uri":"a://b"}"#)
        );
        // Words in the arguments are not an envelope.
        assert_eq!(
            without_envelope(r#"{"arguments":{"io.modelcontextprotocol/protocolVersion":1}}"#),
            None
        );
    }

    #[test]
    fn words_in_a_tools_content_are_not_its_results_keys() {
        let content = r#"{"content":[{"type":"text","text":"\"resultType\" and \"ttlMs\""}]}"#;
        let out = answer(Message::result("4", content), "tools/call", false, 5);
        assert_eq!(
            out.result_text()
                .map(|r| r.starts_with(r#"{"resultType":"complete","content""#)),
            Some(true),
            "{out:?}"
        );
        let listed = r#"{"tools":[{"name":"t","description":"says \"ttlMs\""}]}"#;
        let out = answer(Message::result("5", listed), "tools/list", true, 7);
        assert!(
            out.result_text()
                .is_some_and(|r| r.starts_with(r#"{"resultType":"complete","ttlMs":7,"#)),
            "{out:?}"
        );
    }
}
