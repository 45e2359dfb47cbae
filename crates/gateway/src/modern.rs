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

use crate::message::{self, Field, Message, Params};

pub(crate) mod client;
pub(crate) mod input;
pub(crate) mod server;

/// The stateless protocol version.
pub const MODERN_VERSION: &str = "2026-07-28";
use crate::message::{CAPABILITIES_KEY, PROTOCOL_VERSION_KEY};
const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
/// The version a request names is not one moniker speaks (2026-07-28).
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// The HTTP routing headers disagree with the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// A request needs a capability the client did not declare (HTTP 400).
pub const MISSING_CAPABILITY: i64 = -32021;
/// The -32021 answer to request `id` of a client that did not declare what its server asked
/// for (`sampling/createMessage`, `elicitation/create`, `roots/list`): `requiredCapabilities`
/// is a `ClientCapabilities` object naming each (`{"sampling": {}}`).
pub(crate) fn missing_capability(id: &str, methods: &[&str]) -> Message {
    let mut names: Vec<&str> = methods
        .iter()
        .filter_map(|method| match *method {
            "sampling/createMessage" => Some("sampling"),
            "elicitation/create" => Some("elicitation"),
            "roots/list" => Some("roots"),
            _ => None,
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    let required: Vec<String> = names
        .iter()
        .map(|n| format!("{}:{{}}", message::string(n)))
        .collect();
    let data = format!(r#"{{"requiredCapabilities":{{{}}}}}"#, required.join(","));
    Message::error_with(
        Some(id),
        MISSING_CAPABILITY,
        &format!(
            "the server asked the client for what it did not declare: {}",
            names.join(", ")
        ),
        Some(&data),
    )
}

/// `params` without the 2026-07-28 envelope, for a server of the 2025 era; `None` when it has
/// none (the params go as they are). A `_meta` left empty goes too.
pub(crate) fn without_envelope(params: &Params) -> Option<Params> {
    Field::ENVELOPE
        .iter()
        .any(|f| params.has(*f))
        .then(|| params.without(&Field::ENVELOPE))
}

/// The params field whose value `Mcp-Name` mirrors, for the methods that name something.
pub(crate) fn name_field(method: &str) -> Option<Field> {
    match method {
        "tools/call" | "prompts/get" => Some(Field::Name),
        "resources/read" => Some(Field::Uri),
        _ => None,
    }
}

/// The protocol version of a request's envelope, if it has one.
pub(crate) fn version_of(request: &Message) -> Option<String> {
    request.str_of(Field::Version).map(|v| v.into_owned())
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
    /// What a request's envelope declares (read with the message).
    fn of(request: &Message) -> Self {
        let has = |field: Field| request.field(field).is_some();
        Self {
            sampling: has(Field::Sampling),
            elicitation: has(Field::Elicitation),
            roots: has(Field::Roots),
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

/// What a request's `params._meta` envelope says (recorded where the request was read).
pub(crate) fn envelope(request: &Message) -> Envelope {
    let Some(version) = request.field(Field::Version) else {
        return Envelope::None;
    };
    let id = request.id().unwrap_or("null");
    let declared = request.field(Field::Capabilities).is_some();
    match message::unquote(version) {
        Some(version) if declared && version == MODERN_VERSION => {
            Envelope::Modern(Answerable::of(request))
        }
        Some(version) if declared => {
            let data = serde_json::json!({"supported": [MODERN_VERSION], "requested": version});
            Envelope::Refused(Message::error_with(
                Some(id),
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                Some(&data.to_string()),
            ))
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
    // The result's own keys decide (recorded where it was read), not its bytes: a tool's
    // content may hold the words.
    let has = |field: Field| reply.field(field).is_some();
    let mut added = String::new();
    if !has(Field::ResultType) {
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
    if is_list && !has(Field::TtlMs) {
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
    // What it opts in to, read once here (its only reader).
    let Some(filter) = request
        .field(Field::Notifications)
        .and_then(message::fields)
    else {
        return Filter::default();
    };
    let on = |key: &str| filter.get(key).is_some_and(|v| v.get() == "true");
    let uris: Vec<String> = filter
        .get("resourceSubscriptions")
        .and_then(|u| message::read::<Vec<String>>(u.get()))
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

    /// A server's result, as it arrives (read, its head known).
    fn from_server(id: &str, result: &str) -> Message {
        message::parse_one(format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#
        ))
        .expect("a result")
    }

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
        let list = from_server("1", r#"{"tools":[]}"#);
        let out = answer(list, "tools/list", true, 0);
        assert_eq!(
            out.result_text(),
            Some(r#"{"resultType":"complete","ttlMs":0,"cacheScope":"private","tools":[]}"#)
        );
        let out = answer(
            from_server("1", r#"{"tools":[]}"#),
            "tools/list",
            false,
            30000,
        );
        assert_eq!(
            out.result_text(),
            Some(r#"{"resultType":"complete","ttlMs":30000,"cacheScope":"public","tools":[]}"#)
        );
        let empty = answer(from_server("2", "{}"), "tools/call", false, 5);
        assert_eq!(empty.result_text(), Some(r#"{"resultType":"complete"}"#));
        let kept = answer(
            from_server("3", r#"{"resultType":"input_required","x":1.50}"#),
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
        let of = |params: &str| {
            let text =
                format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#);
            let Ok(crate::message::Incoming::One(m)) = crate::message::parse(text) else {
                panic!("{params}")
            };
            m.params_with(&[]).unwrap()
        };
        let without = |params: &str| without_envelope(&of(params)).map(|p| p.text().to_owned());
        let params = r#"{"name":"t","arguments":{"x":"io.modelcontextprotocol/protocolVersion"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c"},"progressToken":7,"io.modelcontextprotocol/related-task":{"taskId":"a"}}}"#;
        assert_eq!(
            without(params).as_deref(),
            Some(
                r#"{"name":"t","arguments":{"x":"io.modelcontextprotocol/protocolVersion"},"_meta":{"progressToken":7,"io.modelcontextprotocol/related-task":{"taskId":"a"}}}"#
            )
        );
        let only =
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"uri":"a://b"}"#;
        assert_eq!(without(only).as_deref(), Some(r#"{"uri":"a://b"}"#));
        // Words in the arguments are not an envelope.
        assert_eq!(
            without(r#"{"arguments":{"io.modelcontextprotocol/protocolVersion":1}}"#),
            None
        );
    }

    #[test]
    fn words_in_a_tools_content_are_not_its_results_keys() {
        let content = r#"{"content":[{"type":"text","text":"\"resultType\" and \"ttlMs\""}]}"#;
        let out = answer(from_server("4", content), "tools/call", false, 5);
        assert_eq!(
            out.result_text()
                .map(|r| r.starts_with(r#"{"resultType":"complete","content""#)),
            Some(true),
            "{out:?}"
        );
        let listed = r#"{"tools":[{"name":"t","description":"says \"ttlMs\""}]}"#;
        let out = answer(from_server("5", listed), "tools/list", true, 7);
        assert!(
            out.result_text()
                .is_some_and(|r| r.starts_with(r#"{"resultType":"complete","ttlMs":7,"#)),
            "{out:?}"
        );
    }
}
