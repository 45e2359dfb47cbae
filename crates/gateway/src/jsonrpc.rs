//! JSON-RPC 2.0 over raw JSON: messages are read as borrowed slices of the line they came in,
//! and written by splicing those slices into new envelopes, so that whatever moniker does not
//! own (results, errors, arguments, unknown fields) keeps its bytes.

use std::borrow::Cow;

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::value::RawValue;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// Unknown tool or prompt, after alias resolution and within the session's view.
pub const UNKNOWN_NAME: i64 = -32004;
/// The route's server is not connected.
pub const SERVER_GONE: i64 = -32041;
/// The server did not answer within the call timeout.
pub const TIMEOUT: i64 = -32042;

/// One message, borrowed from the text it was read from.
#[derive(Debug, Clone, Copy)]
pub enum Message<'a> {
    Request {
        id: &'a RawValue,
        method: &'a str,
        params: Option<&'a RawValue>,
    },
    Notification {
        method: &'a str,
        params: Option<&'a RawValue>,
    },
    Response {
        id: &'a RawValue,
        outcome: Outcome<'a>,
    },
}

#[derive(Debug, Clone, Copy)]
pub enum Outcome<'a> {
    Result(&'a RawValue),
    Error(&'a RawValue),
}

/// What a line holds: one message, or a batch of them (each of which may be invalid).
#[derive(Debug)]
pub enum Parsed<'a> {
    One(Message<'a>),
    Batch(Vec<Result<Message<'a>, Invalid<'a>>>),
}

/// Why a line or a batch element is not a message, with the id to answer to when one was
/// readable.
#[derive(Debug, Clone)]
pub struct Invalid<'a> {
    pub code: i64,
    pub message: String,
    pub id: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    /// Borrowed: a method name with escapes in it is not one that exists.
    #[serde(borrow, default)]
    method: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// `Some` for any value that is present, `null` included (serde maps `null` to `None`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Parses one line.
pub fn parse(text: &str) -> Result<Parsed<'_>, Invalid<'_>> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        let items: Vec<&RawValue> = serde_json::from_str(text).map_err(|e| parse_error(&e))?;
        if items.is_empty() {
            return Err(invalid(None, "empty batch"));
        }
        return Ok(Parsed::Batch(
            items.into_iter().map(|raw| classify(raw.get())).collect(),
        ));
    }
    // Parse errors and shape errors differ: the first is not JSON at all.
    serde_json::from_str::<serde::de::IgnoredAny>(text).map_err(|e| parse_error(&e))?;
    classify(text).map(Parsed::One)
}

fn parse_error(e: &serde_json::Error) -> Invalid<'static> {
    Invalid {
        code: PARSE_ERROR,
        message: format!("Parse error: {e}"),
        id: None,
    }
}

fn invalid<'a>(id: Option<&'a RawValue>, why: &str) -> Invalid<'a> {
    Invalid {
        code: INVALID_REQUEST,
        message: format!("Invalid Request: {why}"),
        id,
    }
}

fn classify(text: &str) -> Result<Message<'_>, Invalid<'_>> {
    let env: Envelope<'_> =
        serde_json::from_str(text).map_err(|_| invalid(None, "not a JSON-RPC object"))?;
    let id = env.id.filter(|id| id.get() != "null");
    if env.jsonrpc != Some("2.0") {
        return Err(invalid(id, "`jsonrpc` must be \"2.0\""));
    }
    if let Some(id) = id {
        let first = id.get().as_bytes().first().copied().unwrap_or(b'n');
        if !(first == b'"' || first == b'-' || first.is_ascii_digit()) {
            return Err(invalid(None, "`id` must be a string or a number"));
        }
    }
    match (env.method, env.result, env.error) {
        (Some(method), None, None) => match (id, env.id) {
            (Some(id), _) => Ok(Message::Request {
                id,
                method,
                params: env.params,
            }),
            (None, Some(_)) => Err(invalid(None, "`id` must not be null")),
            (None, None) => Ok(Message::Notification {
                method,
                params: env.params,
            }),
        },
        (None, Some(result), None) => match id {
            Some(id) => Ok(Message::Response {
                id,
                outcome: Outcome::Result(result),
            }),
            None => Err(invalid(None, "a response needs an `id`")),
        },
        (None, None, Some(error)) => match env.id {
            Some(id) => Ok(Message::Response {
                id,
                outcome: Outcome::Error(error),
            }),
            None => Err(invalid(None, "a response needs an `id`")),
        },
        _ => Err(invalid(
            id,
            "expected a request, a notification or a response",
        )),
    }
}

/// `{"jsonrpc":"2.0","id":ID,"result":RESULT}`: the result's bytes as given.
pub fn result(id: &RawValue, result: &str) -> String {
    let mut out = String::with_capacity(40 + id.get().len() + result.len());
    out.push_str(r#"{"jsonrpc":"2.0","id":"#);
    out.push_str(id.get());
    out.push_str(r#","result":"#);
    out.push_str(result);
    out.push('}');
    out
}

/// An error response carrying a server's error object unchanged.
pub fn error_raw(id: &RawValue, error: &str) -> String {
    let mut out = String::with_capacity(40 + id.get().len() + error.len());
    out.push_str(r#"{"jsonrpc":"2.0","id":"#);
    out.push_str(id.get());
    out.push_str(r#","error":"#);
    out.push_str(error);
    out.push('}');
    out
}

/// An error response built by moniker. `id` is `None` when the request's id could not be read.
pub fn error(id: Option<&RawValue>, code: i64, message: &str) -> String {
    let error = format!(r#"{{"code":{code},"message":{}}}"#, string(message));
    error_raw(id.unwrap_or(NULL.as_ref()), &error)
}

pub fn request(id: &str, method: &str, params: Option<&str>) -> String {
    let mut out = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":{}"#, string(method));
    if let Some(params) = params {
        out.push_str(r#","params":"#);
        out.push_str(params);
    }
    out.push('}');
    out
}

pub fn notification(method: &str, params: Option<&str>) -> String {
    let mut out = format!(r#"{{"jsonrpc":"2.0","method":{}"#, string(method));
    if let Some(params) = params {
        out.push_str(r#","params":"#);
        out.push_str(params);
    }
    out.push('}');
    out
}

/// A JSON string literal.
pub fn string(s: &str) -> String {
    // Serializing a str cannot fail.
    serde_json::to_string(s).unwrap_or_default()
}

static NULL: std::sync::LazyLock<Box<RawValue>> =
    std::sync::LazyLock::new(|| RawValue::from_string("null".to_owned()).unwrap_or_default());

/// The fields of a JSON object, borrowed and in order.
pub type Fields<'a> = IndexMap<Cow<'a, str>, &'a RawValue>;

/// Reads an object's fields; `None` when `raw` is not an object.
pub fn fields(raw: &RawValue) -> Option<Fields<'_>> {
    serde_json::from_str(raw.get()).ok()
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

/// `raw` with some fields set (replaced in place, or appended) and the others untouched.
pub fn with_fields(raw: &RawValue, set: &[(&str, &str)]) -> Option<String> {
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

/// A string field of an object, unescaped.
pub fn str_field<'a>(fields: &Fields<'a>, key: &str) -> Option<Cow<'a, str>> {
    let raw = fields.get(key)?;
    serde_json::from_str::<Cow<'a, str>>(raw.get()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Message<'_> {
        match parse(text) {
            Ok(Parsed::One(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn classifies_messages() {
        let m = one(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}"#);
        assert!(
            matches!(m, Message::Request { id, method: "tools/call", params: Some(p) } if id.get() == "7" && p.get() == r#"{"name":"x"}"#)
        );
        let m = one(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(matches!(
            m,
            Message::Notification {
                method: "notifications/initialized",
                params: None
            }
        ));
        let m = one(r#"{"jsonrpc":"2.0","id":"a","result":{"n": 1.50}}"#);
        assert!(
            matches!(m, Message::Response { outcome: Outcome::Result(r), .. } if r.get() == r#"{"n": 1.50}"#)
        );
        let m = one(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"x"}}"#);
        assert!(matches!(
            m,
            Message::Response {
                outcome: Outcome::Error(_),
                ..
            }
        ));
    }

    #[test]
    fn rejects_what_is_not_a_message() {
        let e = parse("{not json").unwrap_err();
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
            match parse(bad) {
                Err(e) => assert_eq!(e.code, INVALID_REQUEST, "{bad}"),
                Ok(Parsed::Batch(items)) => assert!(
                    items
                        .iter()
                        .all(|i| i.as_ref().is_err_and(|e| e.code == INVALID_REQUEST)),
                    "{bad}"
                ),
                Ok(other) => panic!("{bad}: {other:?}"),
            }
        }
        // The id is kept when readable, so the error can answer it.
        let e = parse(r#"{"jsonrpc":"1.0","id":5,"method":"x"}"#).unwrap_err();
        assert_eq!(e.id.map(RawValue::get), Some("5"));
    }

    #[test]
    fn batches_hold_each_element() {
        let Ok(Parsed::Batch(items)) =
            parse(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"bad":true}]"#)
        else {
            panic!()
        };
        assert!(items[0].is_ok() && items[1].is_err());
    }

    #[test]
    fn envelopes_splice_raw_bytes() {
        let id = RawValue::from_string("\"abc\"".into()).unwrap();
        assert_eq!(
            result(&id, r#"{"x":1.0e0}"#),
            r#"{"jsonrpc":"2.0","id":"abc","result":{"x":1.0e0}}"#
        );
        assert_eq!(
            error(None, -32700, "bad \"x\""),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad \"x\""}}"#
        );
        let params = RawValue::from_string(
            r#"{"name":"alias","arguments":{"b":1.50,"a":[]},"_meta":{"progressToken":1}}"#.into(),
        )
        .unwrap();
        assert_eq!(
            with_fields(&params, &[("name", "\"origin\"")]).unwrap(),
            r#"{"name":"origin","arguments":{"b":1.50,"a":[]},"_meta":{"progressToken":1}}"#
        );
        assert_eq!(with_fields(&id, &[]), None);
    }

    #[test]
    fn string_fields_unescape() {
        let raw = RawValue::from_string(r#"{"name":"a\u0062c","n":1}"#.into()).unwrap();
        let f = fields(&raw).unwrap();
        assert_eq!(str_field(&f, "name").as_deref(), Some("abc"));
        assert_eq!(str_field(&f, "n"), None);
    }
}
