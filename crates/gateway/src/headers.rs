//! The MCP transport's HTTP header names, for both directions (what clients send moniker, and
//! what moniker sends remote servers).

use axum::http::HeaderName;

pub const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
pub const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
pub const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
pub const EVENT_STREAM: &str = "text/event-stream";
pub const JSON: &str = "application/json";
pub const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
pub const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
/// The prefix of the headers that mirror a tool's `x-mcp-header` parameters.
pub const MCP_PARAM_PREFIX: &str = "mcp-param-";

/// A header value as sent: plain, or `=?base64?...?=` for what a header cannot carry.
pub fn decode_value(value: &str) -> String {
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(payload) => base64_text(payload),
        None => value.to_owned(),
    }
}

/// The text a base64 payload holds: empty when it is not base64 of UTF-8.
fn base64_text(payload: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(payload)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_default()
}

/// `text` as a header value: as it is when it is visible ASCII (spaces inside allowed),
/// else `=?base64?...?=`.
pub fn encode_value(text: &str) -> String {
    use base64::Engine;
    let plain = !text.is_empty()
        && text.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !text.starts_with(' ')
        && !text.ends_with(' ')
        && !text.starts_with("=?base64?");
    if plain {
        text.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(text)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        for text in ["us-west", "a b", "Zürich", " padded ", "", "=?base64?x?="] {
            let encoded = encode_value(text);
            assert!(encoded.is_ascii(), "{encoded}");
            assert_eq!(decode_value(&encoded), text);
        }
        assert_eq!(encode_value("us-west"), "us-west");
    }
}
