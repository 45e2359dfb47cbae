//! JSON-RPC 2.0 messages, parsed once where they enter moniker (a line from a client or a
//! server) into an owned [`Message`]: the text as it came, which is what is relayed, and where
//! in it lie the parts that routing needs (kind, id, method, params, result or error, and the
//! params' `name`, `uri`, progress token and cancelled request id). Messages moniker writes
//! itself are built with the same parts known, so nothing moniker serialised is parsed back.
//!
//! Rewrites splice: a new envelope around the bytes of the old parts, a params object with
//! some fields replaced and the others as they came. Whatever moniker does not own (results,
//! errors, arguments, unknown fields, number formats, key order) keeps its bytes.

use std::borrow::Cow;
use std::fmt;

use serde_json::value::RawValue;

mod head;

pub(crate) use head::{CAPABILITIES_KEY, PROTOCOL_VERSION_KEY, counted};
pub use head::{Edit, Field, passes};
use head::{Head, Span};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// A limit of moniker's on what one client may have at once was reached (requests in
/// progress, batch size, streams, subscriptions): the error names the limit.
pub const LIMIT: i64 = -32043;

/// Messages in one batch, at most: a longer one is refused before any of its elements is read.
pub const MAX_BATCH: usize = 256;

/// What a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Request,
    Notification,
    /// A response with a `result`.
    Result,
    /// A response with an `error`.
    Error,
    /// An array of messages moniker wrote (the answers to a batch); its parts are not read.
    Batch,
}

/// One message, owned: its text and where its parts are.
#[derive(Clone)]
pub struct Message {
    text: Box<str>,
    kind: Kind,
    id: Option<Span>,
    method: Option<Span>,
    /// Params, result or error.
    body: Option<Span>,
    head: Head,
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message")
            .field("kind", &self.kind)
            .field("id", &self.id())
            .field("method", &self.method())
            .finish_non_exhaustive()
    }
}

/// What a line holds: one message, or a batch of them (each of which may be invalid).
#[derive(Debug)]
pub enum Incoming {
    One(Message),
    Batch(Vec<Result<Message, Invalid>>),
}

/// Why a line or a batch element is not a message, with the id to answer to when one was
/// readable (raw JSON).
#[derive(Debug, Clone)]
pub struct Invalid {
    pub code: i64,
    pub message: String,
    pub id: Option<String>,
}

impl Invalid {
    /// The error response that answers it.
    pub fn answer(&self) -> Message {
        Message::error(self.id.as_deref(), self.code, &self.message)
    }
}

/// Parses one line (or one HTTP body). Its raw CRs and LFs become spaces first (see
/// [`flatten`]): what moniker relays of it can never be read as two lines.
pub fn parse(text: String) -> Result<Incoming, Invalid> {
    let text = flatten(text);
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        let Batch(items) = match serde_json::from_str(&text) {
            Ok(batch) => batch,
            Err(e) if e.is_data() => {
                return Err(Invalid {
                    code: LIMIT,
                    message: format!(
                        "a batch of more than {MAX_BATCH} messages (at most {MAX_BATCH} messages in a batch)"
                    ),
                    id: None,
                });
            }
            Err(e) => return Err(parse_error(&e)),
        };
        if items.is_empty() {
            return Err(invalid(None, "empty batch"));
        }
        return Ok(Incoming::Batch(
            items
                .into_iter()
                .map(|raw| match raw.get().starts_with('[') {
                    true => Err(invalid(None, "nested batch")),
                    false => classify(raw.get().into()),
                })
                .collect(),
        ));
    }
    classify(text.into_boxed_str()).map(Incoming::One)
}

/// The elements of a batch, unread; reading stops (a data error) at the one past
/// [`MAX_BATCH`], so a client's long array costs no more than its text.
struct Batch<'a>(Vec<&'a RawValue>);

impl<'de> serde::Deserialize<'de> for Batch<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Elements;
        impl<'de> serde::de::Visitor<'de> for Elements {
            type Value = Batch<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a batch")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Batch<'de>, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<&'de RawValue>()? {
                    if items.len() == MAX_BATCH {
                        return Err(serde::de::Error::custom("too many messages"));
                    }
                    items.push(item);
                }
                Ok(Batch(items))
            }
        }
        d.deserialize_seq(Elements)
    }
}

/// Parses a line that must hold one message (what a server sends, an element of a batch).
pub fn parse_one(text: String) -> Result<Message, Invalid> {
    match parse(text)? {
        Incoming::One(message) => Ok(message),
        Incoming::Batch(_) => Err(invalid(None, "a batch where one message was expected")),
    }
}

/// `text` with every raw CR and LF replaced by a space. In valid JSON they can only stand
/// between tokens, where they mean nothing (inside a string they must be escaped), so the
/// values, their bytes and every part's place stay as they are; in invalid JSON they change
/// nothing that is answered. A client's `{"x":\n{...}}` would otherwise reach a
/// newline-delimited server as two lines, the second one a request of the client's making.
pub fn flatten(text: String) -> String {
    if has_line_end(&text) {
        text.replace(['\r', '\n'], " ")
    } else {
        text
    }
}

/// Whether `text` holds a raw CR or LF.
pub fn has_line_end(text: &str) -> bool {
    memchr::memchr2(b'\r', b'\n', text.as_bytes()).is_some()
}

/// Why a message with a lone surrogate escape is refused.
pub const LONE_SURROGATE: &str = "Parse error: a string escapes a lone UTF-16 surrogate (such as `\\ud800` without its pair), which is no text";

fn parse_error(e: &serde_json::Error) -> Invalid {
    Invalid {
        code: PARSE_ERROR,
        message: format!("Parse error: {e}"),
        id: None,
    }
}

fn invalid(id: Option<&RawValue>, why: &str) -> Invalid {
    Invalid {
        code: INVALID_REQUEST,
        message: format!("Invalid Request: {why}"),
        id: id.map(|id| id.get().to_owned()),
    }
}

/// Whether `text` (JSON) escapes a lone UTF-16 surrogate in some string or key: `\ud800` not
/// followed by its low half, or a low half (`\udc00`) alone. Such a string is no text: Node's
/// `JSON.parse` and Python's `json` take it, serde_json does not, so one reader of moniker's
/// would read what another gives up on. It is refused where the message enters, once, so no
/// later reader (parameter rules, seals, toolsets, actions, search) ever meets it.
pub fn lone_surrogate(text: &str) -> bool {
    let bytes = text.as_bytes();
    let unit = |at: usize| -> Option<u32> {
        let hex = bytes.get(at..at + 4)?;
        u32::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
    };
    let mut at = 0;
    while let Some(found) = memchr::memchr(b'\\', &bytes[at..]) {
        let escape = at + found;
        if bytes.get(escape + 1) != Some(&b'u') {
            // `\\`, `\"`, `\n`...: two bytes, whatever the second is.
            at = escape + 2;
            continue;
        }
        at = escape + 6;
        match unit(escape + 2) {
            Some(0xD800..=0xDBFF) => {
                let low = (bytes.get(escape + 6..escape + 8) == Some(b"\\u"))
                    .then(|| unit(escape + 8))
                    .flatten();
                if !matches!(low, Some(0xDC00..=0xDFFF)) {
                    return true;
                }
                at = escape + 12;
            }
            Some(0xDC00..=0xDFFF) => return true,
            _ => {}
        }
    }
    false
}

fn classify(text: Box<str>) -> Result<Message, Invalid> {
    let top = match head::read(&text) {
        Ok(top) => top,
        Err(e) if e.is_syntax() || e.is_eof() => return Err(parse_error(&e)),
        // The head's own refusals (a key named twice, or in another case) say why.
        Err(e) if !e.to_string().starts_with("invalid type") => {
            return Err(invalid(None, &e.to_string()));
        }
        Err(_) => return Err(invalid(None, "not a JSON-RPC object")),
    };
    let span_of =
        |part: &str| Span::at(part.as_ptr() as usize - text.as_ptr() as usize, part.len());
    let id = top.id.filter(|id| id.get() != "null");
    if top.jsonrpc != Some("2.0") {
        return Err(invalid(id, "`jsonrpc` must be \"2.0\""));
    }
    if let Some(id) = id {
        let first = id.get().as_bytes().first().copied().unwrap_or(b'n');
        if !(first == b'"' || first == b'-' || first.is_ascii_digit()) {
            return Err(invalid(None, "`id` must be a string or a number"));
        }
    }
    if lone_surrogate(&text) {
        return Err(Invalid {
            code: PARSE_ERROR,
            message: LONE_SURROGATE.to_owned(),
            id: id.map(|id| id.get().to_owned()),
        });
    }
    let (kind, id, body) = match (top.method, top.result, top.error) {
        (Some(_), None, None) => match (id, top.id) {
            (Some(id), _) => (Kind::Request, Some(id), top.params),
            (None, Some(_)) => return Err(invalid(None, "`id` must not be null")),
            (None, None) => (Kind::Notification, None, top.params),
        },
        (None, Some(result), None) => match id {
            Some(id) => (Kind::Result, Some(id), Some(result)),
            None => return Err(invalid(None, "a response needs an `id`")),
        },
        (None, None, Some(error)) => match top.id {
            Some(id) => (Kind::Error, Some(id), Some(error)),
            None => return Err(invalid(None, "a response needs an `id`")),
        },
        _ => {
            return Err(invalid(
                id,
                "expected a request, a notification or a response",
            ));
        }
    };
    let id = id.map(|v| span_of(v.get()));
    let method = top.method.map(span_of);
    let head = top.head;
    Ok(Message {
        kind,
        id,
        method,
        body,
        head,
        text,
    })
}

/// Writes an envelope, noting where its parts land.
struct Writer {
    out: String,
    id: Option<Span>,
    method: Option<Span>,
    body: Option<Span>,
    head: Head,
}

impl Writer {
    /// A message of `capacity` bytes of parts (ids, names, bodies): room for them and for the
    /// longest frame around them, a request's `{"jsonrpc":"2.0","id":,"method":"","params":}`
    /// (45 bytes), so that writing never grows it.
    fn new(capacity: usize) -> Self {
        let mut out = String::with_capacity(45 + capacity);
        out.push_str(r#"{"jsonrpc":"2.0""#);
        Self {
            out,
            id: None,
            method: None,
            body: None,
            head: Head::default(),
        }
    }

    fn part(&mut self, key: &str, value: &str) -> Span {
        self.out.push_str(",\"");
        self.out.push_str(key);
        self.out.push_str("\":");
        let at = Span::at(self.out.len(), value.len());
        self.out.push_str(value);
        at
    }

    fn id(mut self, id: &str) -> Self {
        self.id = Some(self.part("id", id));
        self
    }

    fn method(mut self, method: &str) -> Self {
        self.out.push_str(r#","method":"#);
        let quoted = string(method);
        // The name itself, inside its quotes.
        self.method = Some(Span::at(self.out.len() + 1, method.len()));
        if quoted.len() != method.len() + 2 {
            // A name with escapes: its part is the unescaped form, which is not in the text.
            self.method = None;
        }
        self.out.push_str(&quoted);
        self
    }

    fn body(mut self, key: &str, value: Option<&str>) -> Self {
        if let Some(value) = value {
            self.body = Some(self.part(key, value));
        }
        self
    }

    /// Params whose head is known: it lands with them.
    fn params(mut self, params: Option<&Params>) -> Self {
        if let Some(params) = params {
            let at = self.part("params", &params.text);
            self.head = params.head.shifted(i64::from(at.start));
            self.body = Some(at);
        }
        self
    }

    fn finish(mut self, kind: Kind) -> Message {
        self.out.push('}');
        Message {
            text: self.out.into_boxed_str(),
            kind,
            id: self.id,
            method: self.method,
            body: self.body,
            head: self.head,
        }
    }
}

/// A params object and its head (places in its own text): what moniker sends on, built by
/// editing a client's params or written by moniker with its fields known. Nothing reads it
/// again to know them.
#[derive(Debug, Clone)]
pub struct Params {
    text: String,
    head: Head,
}

impl PartialEq<&str> for Params {
    fn eq(&self, other: &&str) -> bool {
        self.text == *other
    }
}

impl Params {
    /// An object of `fields` (raw JSON values) written by moniker; the fields the head
    /// records are known where they land.
    pub fn object(fields: &[(&str, &str)]) -> Self {
        let (text, head) = head::object(fields, head::Scope::Params);
        Self { text, head }
    }

    /// An empty object.
    pub fn empty() -> Self {
        Self::object(&[])
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// A recorded field's value, raw JSON.
    pub fn get(&self, field: Field) -> Option<&str> {
        self.head.get(field).map(|s| s.get(&self.text))
    }

    pub fn has(&self, field: Field) -> bool {
        self.head.has(field)
    }

    /// The same params with `edits` made (spliced; the head follows).
    pub fn edit(&self, edits: &[Edit<'_>]) -> Self {
        let edited = head::edit(&self.text, Span::at(0, self.text.len()), &self.head, edits);
        Self {
            text: edited.text,
            head: edited.head,
        }
    }

    /// Without `fields`, and without a `_meta` that they leave empty.
    pub fn without(&self, fields: &[Field]) -> Self {
        if self.head.holds_only(&self.text, Field::Meta, fields) {
            // `_meta` holds only some of them: it goes, with them in it, in the same pass.
            let drops: Vec<Edit<'_>> = fields
                .iter()
                .filter(|f| f.scope() != head::Scope::Meta)
                .map(|f| Edit::Drop(*f))
                .chain([Edit::Drop(Field::Meta)])
                .collect();
            return self.edit(&drops);
        }
        let drops: Vec<Edit<'_>> = fields.iter().map(|f| Edit::Drop(*f)).collect();
        let out = self.edit(&drops);
        match out.get(Field::Meta).is_some_and(is_empty_object) {
            true => out.edit(&[Edit::Drop(Field::Meta)]),
            false => out,
        }
    }
}

impl Message {
    /// A request of moniker's (its params, if any, are not read again: its head is empty).
    pub fn request(id: &str, method: &str, params: Option<&str>) -> Self {
        Writer::new(id.len() + method.len() + params.map_or(0, str::len))
            .id(id)
            .method(method)
            .body("params", params)
            .finish(Kind::Request)
    }

    /// A request of moniker's with params whose head is known (what it sends to a server).
    pub fn outgoing(id: &str, method: &str, params: Option<&Params>) -> Self {
        Writer::new(id.len() + method.len() + params.map_or(0, |p| p.text.len()))
            .id(id)
            .method(method)
            .params(params)
            .finish(Kind::Request)
    }

    /// A notification of moniker's with params whose head is known.
    pub fn notification_of(method: &str, params: Option<&Params>) -> Self {
        Writer::new(method.len() + params.map_or(0, |p| p.text.len()))
            .method(method)
            .params(params)
            .finish(Kind::Notification)
    }

    /// A result of moniker's, an object of `fields` (raw JSON values), the fields the head
    /// records known (`resultType` and the rest: what an era's answer looks at).
    pub fn result_object(id: &str, fields: &[(&str, &str)]) -> Self {
        Self::response_object(id, "result", fields)
    }

    /// A response of moniker's whose `key` (`result` or `error`) is an object of `fields`,
    /// its head known.
    fn response_object(id: &str, key: &str, fields: &[(&str, &str)]) -> Self {
        let (kind, scope) = response_kind(key);
        let (body, head) = head::object(fields, scope);
        let mut writer = Writer::new(id.len() + body.len()).id(id);
        let at = writer.part(key, &body);
        writer.head = head.shifted(i64::from(at.start));
        writer.body = Some(at);
        writer.finish(kind)
    }

    /// A notification of moniker's.
    pub fn notification(method: &str, params: Option<&str>) -> Self {
        Writer::new(method.len() + params.map_or(0, str::len))
            .method(method)
            .body("params", params)
            .finish(Kind::Notification)
    }

    /// `{"jsonrpc":"2.0","id":ID,"result":RESULT}`: the result's bytes as given.
    pub fn result(id: &str, result: &str) -> Self {
        Writer::new(id.len() + result.len())
            .id(id)
            .body("result", Some(result))
            .finish(Kind::Result)
    }

    /// An error response of moniker's. `id` is `None` when the request's id could not be read.
    pub fn error(id: Option<&str>, code: i64, message: &str) -> Self {
        Self::error_with(id, code, message, None)
    }

    /// An error response of moniker's with `data` (raw JSON).
    pub fn error_with(id: Option<&str>, code: i64, message: &str, data: Option<&str>) -> Self {
        let code = code.to_string();
        let message = string(message);
        let mut fields = vec![("code", code.as_str()), ("message", message.as_str())];
        fields.extend(data.map(|d| ("data", d)));
        Self::response_object(id.unwrap_or("null"), "error", &fields)
    }

    /// The code of an error response.
    pub fn error_code(&self) -> Option<i64> {
        self.field(Field::ErrorCode)?.parse().ok()
    }

    /// moniker's `notifications/cancelled` of its request `id`.
    pub fn cancellation(id: u64, reason: &str) -> Self {
        let params = Params::object(&[("requestId", &id.to_string()), ("reason", &string(reason))]);
        Self::notification_of("notifications/cancelled", Some(&params))
    }

    /// The answers to a batch, as one array.
    pub fn batch(items: &[Message]) -> Self {
        let mut text = String::from("[");
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(item.text());
        }
        text.push(']');
        Self {
            text: text.into_boxed_str(),
            kind: Kind::Batch,
            id: None,
            method: None,
            body: None,
            head: Head::default(),
        }
    }

    /// The message as it came (or as moniker wrote it): what goes on the wire.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn into_text(self) -> String {
        self.text.into_string()
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn is_request(&self) -> bool {
        self.kind == Kind::Request
    }

    pub fn is_response(&self) -> bool {
        matches!(self.kind, Kind::Result | Kind::Error)
    }

    fn part(&self, span: Option<Span>) -> Option<&str> {
        span.map(|s| s.get(&self.text))
    }

    /// The id, raw JSON (`7`, `"a"`), of a request or a response.
    pub fn id(&self) -> Option<&str> {
        self.part(self.id)
    }

    /// The id of a response to one of moniker's requests (moniker's ids are numbers).
    pub fn our_id(&self) -> Option<u64> {
        self.id()?.parse().ok()
    }

    pub fn method(&self) -> Option<&str> {
        self.part(self.method)
    }

    /// The params, raw JSON.
    pub fn params(&self) -> Option<&str> {
        match self.kind {
            Kind::Request | Kind::Notification => self.part(self.body),
            _ => None,
        }
    }

    /// The result of a successful response, raw JSON.
    pub fn result_text(&self) -> Option<&str> {
        (self.kind == Kind::Result)
            .then(|| self.part(self.body))
            .flatten()
    }

    /// The error object of an error response, raw JSON.
    pub fn error_text(&self) -> Option<&str> {
        (self.kind == Kind::Error)
            .then(|| self.part(self.body))
            .flatten()
    }

    /// A field the head records (of the params and their `_meta` for a request or a
    /// notification, of the result for a result), raw JSON.
    pub fn field(&self, field: Field) -> Option<&str> {
        self.part(self.head.get(field))
    }

    /// A recorded field that is a string, unescaped.
    pub fn str_of(&self, field: Field) -> Option<Cow<'_, str>> {
        unquote(self.field(field)?)
    }

    /// `params.name`, unescaped, when it is a string.
    pub fn name(&self) -> Option<Cow<'_, str>> {
        self.str_of(Field::Name)
    }

    /// `params.uri`, unescaped, when it is a string.
    pub fn uri(&self) -> Option<Cow<'_, str>> {
        self.str_of(Field::Uri)
    }

    /// The progress token (raw JSON): `params._meta.progressToken` of a request,
    /// `params.progressToken` of a notification.
    pub fn progress_token(&self) -> Option<&str> {
        self.field(self.progress_field())
    }

    fn progress_field(&self) -> Field {
        match self.kind {
            Kind::Request => Field::MetaProgressToken,
            _ => Field::ProgressToken,
        }
    }

    /// `params.requestId` (raw JSON) of a cancellation.
    pub fn request_id(&self) -> Option<&str> {
        self.field(Field::RequestId)
    }

    /// `params.cursor` (raw JSON), unless `null`.
    pub fn cursor(&self) -> Option<&str> {
        self.field(Field::Cursor).filter(|c| *c != "null")
    }

    /// `params.arguments`, raw JSON.
    pub fn arguments(&self) -> Option<&str> {
        self.field(Field::Arguments)
    }

    /// The params are an object.
    fn params_object(&self) -> Option<Span> {
        self.body
            .filter(|_| matches!(self.kind, Kind::Request | Kind::Notification))
            .filter(|b| self.text.as_bytes().get(b.start as usize) == Some(&b'{'))
    }

    /// The params, to send on: as they came, or with `edits` made (spliced: the head
    /// follows). `None` when the message has no params object.
    pub fn params_with(&self, edits: &[Edit<'_>]) -> Option<Params> {
        let at = self.params_object()?;
        let text = at.get(&self.text);
        let head = self.head.shifted(-i64::from(at.start));
        if edits.is_empty() {
            return Some(Params {
                text: text.to_owned(),
                head,
            });
        }
        let edited = head::edit(text, Span::at(0, text.len()), &head, edits);
        Some(Params {
            text: edited.text,
            head: edited.head,
        })
    }

    /// The params of a routed call: `name` set, `arguments` set when given, and the progress
    /// token inside `_meta` swapped when given; every other byte as it came. `None` when the
    /// params are not an object. Spliced by the parts' places: nothing is parsed again.
    pub fn call_params(
        &self,
        name: &str,
        arguments: Option<&str>,
        progress_token: Option<&str>,
    ) -> Option<Params> {
        let mut edits = [Edit::Drop(Field::Name); 3];
        let mut n = 0;
        let sets = [
            Some((Field::Name, name)),
            arguments.map(|arguments| (Field::Arguments, arguments)),
            progress_token
                .filter(|_| self.head.has(Field::MetaProgressToken))
                .map(|token| (Field::MetaProgressToken, token)),
        ];
        // A value already as it would be written (a name the server knows the tool by, when
        // it is the one the client called) is not written again: the bytes are the same.
        for (field, value) in sets.into_iter().flatten() {
            if self.field(field) != Some(value) {
                edits[n] = Edit::Set(field, value);
                n += 1;
            }
        }
        self.params_with(&edits[..n])
    }

    /// The same message with one recorded field's value replaced (the progress token of a
    /// `notifications/progress`, the request id of a `notifications/cancelled`).
    fn with_field(&self, field: Field, value: &str) -> Option<Self> {
        let span = self.head.get(field)?;
        Some(self.splice(span, value))
    }

    /// The same notification under another progress token.
    pub fn with_progress_token(&self, token: &str) -> Option<Self> {
        self.with_field(self.progress_field(), token)
    }

    /// The same cancellation of another request.
    pub fn with_request_id(&self, id: &str) -> Option<Self> {
        self.with_field(Field::RequestId, id)
    }

    /// The same message under another id (a request or response relayed between ids).
    pub fn with_id(&self, id: &str) -> Self {
        match self.id {
            Some(span) if self.kind != Kind::Batch => self.splice(span, id),
            _ => self.clone(),
        }
    }

    /// The message with `with` put in at byte `at` of its text (inside a part, between the
    /// fields its index records); every part and field where it lands.
    pub fn inserted(&self, at: usize, with: &str) -> Self {
        self.splice(Span::at(at, 0), with)
    }

    /// The message with the bytes at `span` (a part or a recorded field's value) replaced;
    /// every other part where it lands.
    fn splice(&self, span: Span, with: &str) -> Self {
        let (start, end) = (span.start as usize, span.end as usize);
        // At its length: the box it becomes takes it as it is (no shrinking copy).
        let mut text = String::with_capacity(self.text.len() - (end - start) + with.len());
        text.push_str(&self.text[..start]);
        text.push_str(with);
        text.push_str(&self.text[end..]);
        let moved = |s: Span| head::moved(s, span, with.len());
        Self {
            text: text.into_boxed_str(),
            kind: self.kind,
            id: self.id.map(moved),
            method: self.method.map(moved),
            body: self.body.map(moved),
            head: self.head.spliced(span, with.len()),
        }
    }
}

/// A JSON string literal.
pub fn string(s: &str) -> String {
    // Serializing a str cannot fail.
    serde_json::to_string(s).unwrap_or_default()
}

/// A JSON string's value, when `raw` is one (read without serde when it has no escapes).
pub fn unquote(raw: &str) -> Option<Cow<'_, str>> {
    match unescaped(raw) {
        Some(plain) => Some(Cow::Borrowed(plain)),
        None => read::<Cow<'_, str>>(raw),
    }
}

/// The inside of a JSON string that has no escapes, which is its value as it is.
fn unescaped(raw: &str) -> Option<&str> {
    raw.strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .filter(|r| !r.bytes().any(|b| b == b'\\' || b == b'"' || b < 0x20))
}

/// Whether `text` is nothing but braces and white space: an object with nothing in it (`{}`,
/// `{ }`).
fn is_empty_object(text: &str) -> bool {
    text.trim_start_matches('{')
        .trim_end_matches('}')
        .trim()
        .is_empty()
}

/// The kind of a response whose `key` is `result` or `error`, and the scope of its object.
fn response_kind(key: &str) -> (Kind, head::Scope) {
    match key {
        "error" => (Kind::Error, head::Scope::Error),
        _ => (Kind::Result, head::Scope::Result),
    }
}

/// Reads (part of) a message's text as `T`: one serde pass, counted.
pub fn read<'a, T: serde::Deserialize<'a>>(raw: &'a str) -> Option<T> {
    counted(|| serde_json::from_str(raw).ok())
}

/// The fields of a JSON object, borrowed and in order.
pub type Fields<'a> = indexmap::IndexMap<Cow<'a, str>, &'a RawValue>;

/// Reads an object's fields; `None` when `raw` is not an object.
pub fn fields(raw: &str) -> Option<Fields<'_>> {
    read(raw)
}

/// A string field of an object, unescaped.
pub fn str_field<'a>(fields: &Fields<'a>, key: &str) -> Option<Cow<'a, str>> {
    unquote(fields.get(key)?.get())
}

/// Writes fields back as an object; values keep their bytes.
pub fn object<'a>(fields: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::from("{");
    for (i, (key, value)) in fields.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&string(key));
        out.push(':');
        out.push_str(value);
    }
    out.push('}');
    out
}

/// `raw` (an object that is not a message's params: a result's part, a reference) with some
/// fields set (replaced in place, or appended) and the others untouched.
pub fn with_fields(raw: &str, set: &[(&str, &str)]) -> Option<String> {
    let fields = fields(raw)?;
    let mut out: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| {
            let value = set
                .iter()
                .find(|(key, _)| key == k)
                .map_or(v.get(), |(_, new)| *new);
            (k.as_ref(), value)
        })
        .collect();
    for (key, value) in set {
        if !fields.contains_key(*key) {
            out.push((key, value));
        }
    }
    Some(object(out))
}

/// `text` to at most `most` bytes, cut at a character's boundary: what moniker keeps of a
/// peer's text it does not need whole (a name in a log line, an error it reports).
pub fn at_most(text: &str, most: usize) -> &str {
    let mut end = text.len().min(most);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// One reading at the edge: a lone surrogate escape anywhere in a message (a key, a
        /// value, nested, in a batch element) is refused where it is parsed, with its id when it
        /// has one; a surrogate pair, an escaped backslash before `ud800` and every other
        /// escape pass.
        #[test]
        fn a_lone_surrogate_is_refused_where_the_message_enters(
            lone in proptest::prop_oneof![
                proptest::strategy::Just(r"\ud800"),
                proptest::strategy::Just(r"\uDBFF"),
                proptest::strategy::Just(r"\udc00"),
                proptest::strategy::Just(r"\ud800\u0041"),
                proptest::strategy::Just(r"\ud83d"),
            ],
            place in 0..4usize,
        ) {
            let message = match place {
                0 => format!(r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"x","arguments":{{"{lone}":0,"tenant":"mine"}}}}}}"#),
                1 => format!(r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"x","arguments":{{"a":["{lone}"]}}}}}}"#),
                2 => format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"tools":[{{"name":"t","description":"a{lone}b"}}]}}}}"#),
                _ => format!(r#"{{"jsonrpc":"2.0","id":7,"method":"x","params":{{"_meta":{{"{lone}":1}}}}}}"#),
            };
            proptest::prop_assert!(lone_surrogate(&message));
            let refused = parse(message.clone()).expect_err("refused");
            proptest::prop_assert_eq!(refused.code, PARSE_ERROR);
            // With its id, unless the head itself could not read the part (`_meta`'s keys).
            proptest::prop_assert!(refused.id.as_deref() == Some("7") || (place == 3 && refused.id.is_none()));
            let batch = format!("[{message}]");
            let parsed = parse(batch);
            proptest::prop_assert!(matches!(parsed, Ok(Incoming::Batch(ref items)) if items[0].is_err()), "{:?}", parsed);
        }
    }

    #[test]
    fn pairs_and_other_escapes_are_text() {
        for text in [
            r#"{"a":"\ud83d\ude00"}"#,
            r#"{"a":"\\ud800"}"#,
            r#"{"a":"\\\\","b":"\u00e9\n\"\\u"}"#,
            r#"{"a":"\uD83D\uDE00"}"#,
            r#"{"a":"\"}"#,
        ] {
            assert!(!lone_surrogate(text), "{text}");
        }
        assert!(lone_surrogate(r#"{"a":"\\\ud800"}"#));
        assert!(lone_surrogate(r#"{"a":"\ud800\ud800"}"#));
        assert!(lone_surrogate(r#"{"a":"\ud800"#));
    }

    fn one(text: &str) -> Message {
        match parse(text.to_owned()) {
            Ok(Incoming::One(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    /// A batch past the limit is refused before its elements are read: what it costs is
    /// about its text (a million elements would otherwise be a million messages at once).
    #[test]
    fn an_oversized_batch_costs_about_its_text() {
        let text = format!("[{}1]", "1,".repeat(1 << 20));
        let info = allocation_counter::measure(|| {
            let e = parse(std::hint::black_box(text.clone())).expect_err("too long");
            assert_eq!(e.code, LIMIT, "{}", e.message);
        });
        assert!(
            info.bytes_max < 2 * text.len() as u64,
            "{} bytes at most held for a text of {}",
            info.bytes_max,
            text.len()
        );
        let ok = format!("[{}1]", "1,".repeat(MAX_BATCH - 1));
        assert!(matches!(parse(ok), Ok(Incoming::Batch(items)) if items.len() == MAX_BATCH));
    }

    #[test]
    fn classifies_messages() {
        let m = one(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"t"}}}"#,
        );
        assert_eq!(m.kind(), Kind::Request);
        assert_eq!(m.id(), Some("7"));
        assert_eq!(m.method(), Some("tools/call"));
        assert_eq!(m.name().as_deref(), Some("x"));
        assert_eq!(m.progress_token(), Some("\"t\""));
        let m = one(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert_eq!(m.kind(), Kind::Notification);
        assert_eq!(m.params(), None);
        let m = one(
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":3,"progress":1}}"#,
        );
        assert_eq!(m.progress_token(), Some("3"));
        let m = one(r#"{"jsonrpc":"2.0","id":"a","result":{"n": 1.50}}"#);
        assert_eq!(m.kind(), Kind::Result);
        assert_eq!(m.result_text(), Some(r#"{"n": 1.50}"#));
        let m = one(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"x"}}"#);
        assert_eq!(m.kind(), Kind::Error);
        assert_eq!(m.id(), Some("null"));
        let m = one(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"r1"}}"#,
        );
        assert_eq!(m.request_id(), Some("\"r1\""));
    }

    #[test]
    fn rejects_what_is_not_a_message() {
        let e = parse("{not json".into()).unwrap_err();
        assert_eq!(e.code, PARSE_ERROR);
        for bad in [
            r#"{"id":1,"method":"x"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#,
            r#"[1]"#,
            r#"42"#,
            r#"[]"#,
        ] {
            match parse(bad.into()) {
                Err(e) => assert_eq!(e.code, INVALID_REQUEST, "{bad}"),
                Ok(Incoming::Batch(items)) => assert!(
                    items
                        .iter()
                        .all(|i| i.as_ref().is_err_and(|e| e.code == INVALID_REQUEST)),
                    "{bad}"
                ),
                Ok(other) => panic!("{bad}: {other:?}"),
            }
        }
        // The id is kept when readable, so the error can answer it.
        let e = parse(r#"{"jsonrpc":"1.0","id":5,"method":"x"}"#.into()).unwrap_err();
        assert_eq!(e.id.as_deref(), Some("5"));
    }

    #[test]
    fn batches_hold_each_element() {
        let Ok(Incoming::Batch(items)) =
            parse(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"bad":true}]"#.into())
        else {
            panic!()
        };
        assert!(items[0].is_ok() && items[1].is_err());
        assert_eq!(items[0].as_ref().unwrap().method(), Some("ping"));
    }

    #[test]
    fn built_messages_know_their_parts() {
        let m = Message::result("\"abc\"", r#"{"x":1.0e0}"#);
        assert_eq!(
            m.text(),
            r#"{"jsonrpc":"2.0","id":"abc","result":{"x":1.0e0}}"#
        );
        assert_eq!(m.id(), Some("\"abc\""));
        assert_eq!(m.result_text(), Some(r#"{"x":1.0e0}"#));
        let m = Message::error(None, -32700, "bad \"x\"");
        assert_eq!(
            m.text(),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad \"x\""}}"#
        );
        let params = Params::object(&[("name", "\"a\"")])
            .edit(&[Edit::Set(Field::MetaProgressToken, "\"m-1\"")]);
        assert_eq!(params, r#"{"name":"a","_meta":{"progressToken":"m-1"}}"#);
        let m = Message::outgoing("3", "tools/call", Some(&params));
        assert_eq!(m.our_id(), Some(3));
        assert_eq!(m.method(), Some("tools/call"));
        assert_eq!(m.progress_token(), Some("\"m-1\""));
        let m = Message::notification_of(
            "notifications/cancelled",
            Some(&Params::object(&[("requestId", "4")])),
        );
        assert_eq!(m.request_id(), Some("4"));
        // Built and parsed agree.
        let parsed = one(m.text());
        assert_eq!(parsed.method(), m.method());
        assert_eq!(parsed.request_id(), m.request_id());
    }

    #[test]
    fn params_are_rewritten_by_splicing() {
        let m = one(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alias","arguments":{"b":1.50,"a":[]},"_meta":{"progressToken":1}}}"#,
        );
        assert_eq!(
            m.call_params("\"origin\"", None, None).unwrap(),
            r#"{"name":"origin","arguments":{"b":1.50,"a":[]},"_meta":{"progressToken":1}}"#
        );
        assert_eq!(
            m.call_params("\"o\"", Some(r#"{"x":1}"#), Some("\"m-1\""))
                .unwrap(),
            r#"{"name":"o","arguments":{"x":1},"_meta":{"progressToken":"m-1"}}"#
        );
        // The name already as the server knows it: the params as they came, head and all.
        let same = m.call_params("\"alias\"", None, None).unwrap();
        assert_eq!(
            same,
            &m.text()[m.text().find("{\"name").unwrap()..m.text().len() - 1]
        );
        assert_eq!(
            same.head.get(Field::Name).map(|s| s.get(&same.text)),
            Some("\"alias\"")
        );
        // Written otherwise (an escape): set as moniker writes it.
        let escaped =
            one(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\u0061lias"}}"#);
        assert_eq!(
            escaped.call_params("\"alias\"", None, None).unwrap(),
            r#"{"name":"alias"}"#
        );
        let bare = one(r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{ }}"#);
        assert_eq!(
            bare.call_params("\"o\"", Some("{}"), None).unwrap(),
            r#"{ "name":"o","arguments":{}}"#
        );
        let progress = one(
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"moniker-1","progress":0.50}}"#,
        );
        assert_eq!(
            progress.with_progress_token("7").unwrap().text(),
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":0.50}}"#
        );
        assert_eq!(with_fields("\"abc\"", &[]), None);
        let relayed = one(r#"{"jsonrpc":"2.0","id":9,"result":{"n":1.50}}"#).with_id("\"c\"");
        assert_eq!(
            relayed.text(),
            r#"{"jsonrpc":"2.0","id":"c","result":{"n":1.50}}"#
        );
    }

    mod framing {
        use super::super::*;
        use proptest::prelude::*;
        use serde_json::Value;

        /// Any JSON value a client can send: strings with any characters (control characters,
        /// line ends, quotes, backslashes, non-ASCII), numbers, nesting.
        fn value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                any::<f64>()
                    .prop_filter("finite", |f| f.is_finite())
                    .prop_map(Value::from),
                any::<String>().prop_map(Value::String),
                prop::sample::select(vec!["\n", "\r", "\r\n", "a\nb", "\u{2028}", "\\n", "\"}"])
                    .prop_map(|s| Value::String(s.to_owned())),
            ];
            leaf.prop_recursive(4, 32, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                    prop::collection::vec((any::<String>(), inner), 0..5)
                        .prop_map(|kv| Value::Object(kv.into_iter().collect())),
                ]
            })
        }

        /// `value` written with `ws` (cycled) between every two tokens: the whitespace a
        /// client may put there, raw CR and LF included.
        fn render(value: &Value, ws: &[&str], at: &mut usize, out: &mut String) {
            fn gap(ws: &[&str], at: &mut usize, out: &mut String) {
                out.push_str(ws[*at % ws.len()]);
                *at += 1;
            }
            match value {
                Value::Array(items) => {
                    out.push('[');
                    for (i, item) in items.iter().enumerate() {
                        gap(ws, at, out);
                        if i > 0 {
                            out.push(',');
                            gap(ws, at, out);
                        }
                        render(item, ws, at, out);
                    }
                    gap(ws, at, out);
                    out.push(']');
                }
                Value::Object(fields) => {
                    out.push('{');
                    for (i, (k, v)) in fields.iter().enumerate() {
                        gap(ws, at, out);
                        if i > 0 {
                            out.push(',');
                            gap(ws, at, out);
                        }
                        out.push_str(&string(k));
                        gap(ws, at, out);
                        out.push(':');
                        gap(ws, at, out);
                        render(v, ws, at, out);
                    }
                    gap(ws, at, out);
                    out.push('}');
                }
                other => out.push_str(&other.to_string()),
            }
        }

        proptest! {
            /// Whatever a client sends as arguments, with whatever whitespace, what moniker
            /// writes to a server for it is one line, and the arguments arrive unchanged.
            #[test]
            fn what_reaches_a_server_is_one_line(
                arguments in value(),
                ws in prop::collection::vec(
                    prop::sample::select(vec!["", " ", "\t", "\n", "\r", "\r\n", "\n\r", " \r "]),
                    1..8,
                ),
            ) {
                let mut at = 0;
                let mut args = String::new();
                render(&arguments, &ws, &mut at, &mut args);
                let text = format!(
                    "{{{}\"jsonrpc\":\"2.0\",\"id\":1,{}\"method\":\"tools/call\",\"params\":{{\"name\":\"t\",{}\"arguments\":{args}{}}}}}",
                    ws[0], ws[ws.len() - 1], ws[0], ws[ws.len() - 1]
                );
                let Ok(Incoming::One(message)) = parse(text) else {
                    return Err(TestCaseError::fail("a valid message was refused"));
                };
                let params = message.call_params("\"origin\"", None, Some("\"moniker-1\""));
                let sent = Message::outgoing("9", "tools/call", params.as_ref());
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                let wire = rt.block_on(async {
                    let (writing, mut reading) = tokio::io::duplex(1 << 20);
                    let (to, writer) = crate::framing::lines(writing, crate::framing::Backlog::at_most(usize::MAX));
                    to.send(sent).unwrap();
                    drop(to);
                    writer.await.unwrap();
                    let mut wire = Vec::new();
                    tokio::io::AsyncReadExt::read_to_end(&mut reading, &mut wire).await.unwrap();
                    wire
                });
                prop_assert_eq!(wire.iter().filter(|b| **b == b'\n').count(), 1);
                prop_assert!(!wire.contains(&b'\r'));
                prop_assert_eq!(wire.last(), Some(&b'\n'));
                let back: Value = serde_json::from_slice(&wire).unwrap();
                // What the client meant (read by the same parser: serde_json's float reading
                // is not exact, and is the same on both sides).
                let meant: Value = serde_json::from_str(&args).unwrap();
                prop_assert_eq!(&back["params"]["arguments"], &meant);
                prop_assert_eq!(&back["params"]["name"], "origin");
            }

            /// A batch's elements, a notification's params, a response's result: every
            /// message parsed is one line, whatever whitespace it came with.
            #[test]
            fn every_parsed_message_is_one_line(
                value in value(),
                ws in prop::collection::vec(prop::sample::select(vec![" ", "\n", "\r", "\r\n"]), 1..4),
            ) {
                let mut at = 0;
                let mut v = String::new();
                render(&value, &ws, &mut at, &mut v);
                for text in [
                    format!("[{}{{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{{\"x\":{v}}}}}{}]", ws[0], ws[0]),
                    format!("{{\"jsonrpc\":\"2.0\",\"id\":{}2,\"result\":{v}}}", ws[0]),
                ] {
                    let texts: Vec<String> = match parse(text).unwrap() {
                        Incoming::One(m) => vec![m.into_text()],
                        Incoming::Batch(items) => items.into_iter().map(|m| m.unwrap().into_text()).collect(),
                    };
                    for t in texts {
                        prop_assert!(!has_line_end(&t), "{t:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn string_fields_unescape() {
        let f = fields(r#"{"name":"a\u0062c","n":1}"#).unwrap();
        assert_eq!(str_field(&f, "name").as_deref(), Some("abc"));
        assert_eq!(str_field(&f, "n"), None);
        let m = one(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"name":"a\u0062c"}}"#);
        assert_eq!(m.name().as_deref(), Some("abc"));
    }
}
