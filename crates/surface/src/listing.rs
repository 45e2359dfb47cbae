//! Listings both ways. What a server lists, as it listed it: each item is kept as raw JSON so
//! that every field (`title`, `annotations`, `outputSchema`, `_meta`, unknown ones) reaches
//! clients unchanged. And what a client is listed: [`render`] writes the one wire shape of a
//! `tools/list` or `prompts/list` result.

use std::borrow::Borrow;

use serde_json::value::RawValue;

use crate::names::ServerId;
use crate::vocab::Kind;

/// One server's tools and prompts, each a JSON object exactly as the server sent it.
#[derive(Debug, Clone)]
pub struct Listing {
    pub server: ServerId,
    pub tools: Vec<Box<RawValue>>,
    pub prompts: Vec<Box<RawValue>>,
    /// The version the server said it is (`serverInfo.version`), when it said one: the lock
    /// records it beside what its tools were.
    pub version: Option<String>,
}

impl Listing {
    pub fn new(server: ServerId) -> Self {
        Self {
            server,
            tools: Vec::new(),
            prompts: Vec::new(),
            version: None,
        }
    }
}

/// The result of `tools/list` (`{"tools":[...]}`) or `prompts/list` (`{"prompts":[...]}`):
/// `definitions` in their order, then `extra` (moniker's own tools, say), each byte for byte;
/// with `server`, the server every one of `definitions` comes from (the surface's
/// [`Surface::server`](crate::Surface::server): they do not say it), said once in the
/// result's `_meta` when there is one of them.
pub fn render<D: Borrow<RawValue>>(
    kind: Kind,
    definitions: impl IntoIterator<Item = D>,
    extra: &[Box<RawValue>],
    server: Option<&str>,
) -> String {
    let mut out = String::with_capacity(64);
    out.push_str("{\"");
    out.push_str(kind.section());
    out.push_str("\":[");
    let start = out.len();
    let push = |out: &mut String, definition: &RawValue| {
        if out.len() > start {
            out.push(',');
        }
        out.push_str(definition.get());
    };
    for definition in definitions {
        push(&mut out, definition.borrow());
    }
    let said = out.len() > start;
    for definition in extra {
        push(&mut out, definition);
    }
    out.push(']');
    if let Some(server) = server.filter(|_| said) {
        out.push_str(",\"_meta\":{\"");
        out.push_str(crate::definition::META_SERVER);
        out.push_str("\":");
        out.push_str(&crate::definition::string(server));
        out.push('}');
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn a_listing_is_its_definitions_then_the_extra_ones() {
        let (a, b, m) = (
            raw(r#"{"name":"a"}"#),
            raw(r#"{ "name": "b" }"#),
            raw(r#"{"name":"m"}"#),
        );
        let none: [&RawValue; 0] = [];
        assert_eq!(render(Kind::Tool, none, &[], None), r#"{"tools":[]}"#);
        assert_eq!(
            render(Kind::Prompt, [&*a, &*b], &[], None),
            r#"{"prompts":[{"name":"a"},{ "name": "b" }]}"#
        );
        assert_eq!(
            render(Kind::Tool, none, std::slice::from_ref(&m), None),
            r#"{"tools":[{"name":"m"}]}"#
        );
        assert_eq!(
            render(Kind::Tool, vec![a.clone(), b], &[m], None),
            r#"{"tools":[{"name":"a"},{ "name": "b" },{"name":"m"}]}"#
        );
    }

    #[test]
    fn the_server_of_every_definition_is_said_once_when_there_is_one() {
        let (a, m) = (raw(r#"{"name":"a"}"#), raw(r#"{"name":"m"}"#));
        let none: [&RawValue; 0] = [];
        assert_eq!(
            render(Kind::Tool, [&*a], std::slice::from_ref(&m), Some("ctx-sys")),
            r#"{"tools":[{"name":"a"},{"name":"m"}],"_meta":{"io.moniker/server":"ctx-sys"}}"#
        );
        // moniker's own tools alone are of no server of the surface.
        assert_eq!(
            render(Kind::Tool, none, &[m], Some("ctx-sys")),
            r#"{"tools":[{"name":"m"}]}"#
        );
    }
}
