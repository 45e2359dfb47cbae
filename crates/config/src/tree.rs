//! YAML text -> a tree that keeps the span of every node and map key, and every key of a map
//! in file order (duplicates included: the decoder reports them with their place).
//!
//! Built from `saphyr-parser` events with an explicit stack, so that no input, however deep
//! or large, can overflow the call stack or the memory.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle};

use crate::report::{ConfigError, codes};
use crate::source::{Positions, Span};

/// Deeper than any config needs, shallow enough for the recursive code that walks and drops a
/// tree.
const MAX_DEPTH: usize = 64;
/// Values in the tree, aliases expanded: bounds "billion laughs" documents.
const MAX_NODES: usize = 200_000;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub value: Value,
    pub span: Span,
    /// A collection written inline (`[a, b]`, `{a: b}`), or any scalar: it starts where it is.
    pub inline: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Scalar(Scalar),
    Seq(Vec<Node>),
    Map(Vec<Entry>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Scalar {
    /// As written (unquoted, unescaped).
    pub text: String,
    pub kind: ScalarKind,
}

impl Scalar {
    /// How an error names it: `nothing`, or what it is and its text (`a string `x``).
    fn describe(&self) -> String {
        let what = match self.kind {
            ScalarKind::Null => return "nothing".to_owned(),
            ScalarKind::Bool(_) => "a boolean",
            ScalarKind::Int(_) | ScalarKind::Float(_) => "a number",
            ScalarKind::Str => "a string",
        };
        format!("{what} `{}`", shorten(&self.text))
    }
}

/// The YAML 1.2 core schema type of a scalar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ScalarKind {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    /// `None` when the key is a list or a map, which no config key is.
    pub key: Option<String>,
    pub key_span: Span,
    /// What the key is when it is not a string (`a list`), for the error.
    pub key_kind: &'static str,
    pub value: Node,
}

impl Node {
    pub fn is_null(&self) -> bool {
        matches!(
            self.value,
            Value::Scalar(Scalar {
                kind: ScalarKind::Null,
                ..
            })
        )
    }

    /// How an error names what was found: `a map`, `a string `x``.
    pub fn describe(&self) -> String {
        match &self.value {
            Value::Seq(_) => "a list".to_owned(),
            Value::Map(_) => "a map".to_owned(),
            Value::Scalar(s) => s.describe(),
        }
    }

    /// How deep the tree under this node goes (1 for a scalar).
    fn depth(&self) -> usize {
        1 + match &self.value {
            Value::Scalar(_) => 0,
            Value::Seq(items) => items.iter().map(Node::depth).max().unwrap_or(0),
            Value::Map(entries) => entries.iter().map(|e| e.value.depth()).max().unwrap_or(0),
        }
    }

    /// How many nodes the tree under this node has, itself included.
    fn count(&self) -> usize {
        1 + match &self.value {
            Value::Scalar(_) => 0,
            Value::Seq(items) => items.iter().map(Node::count).sum(),
            Value::Map(entries) => entries.iter().map(|e| 1 + e.value.count()).sum(),
        }
    }
}

/// Long values are cut in messages: they are there to be recognized, not read.
pub(crate) use moniker_surface::diagnostic::short as shorten;

enum Frame {
    Seq {
        start: Span,
        inline: bool,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        start: Span,
        inline: bool,
        anchor: usize,
        entries: Vec<Entry>,
        key: Option<Node>,
    },
}

struct Builder<'a> {
    positions: Positions<'a>,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    nodes: usize,
    root: Option<Node>,
    documents: usize,
}

/// Boxed: errors are rare and `Result`s of the builder stay small.
fn syntax(message: impl Into<String>, span: Span) -> Box<ConfigError> {
    Box::new(ConfigError::new(codes::SYNTAX, message, "").with_span(span))
}

/// Parses `text` as one YAML document. `Ok(None)` for a text with no document (empty, or only
/// comments).
pub(crate) fn parse(text: &str) -> Result<Option<Node>, Box<ConfigError>> {
    let mut builder = Builder {
        positions: Positions::new(text),
        stack: Vec::new(),
        anchors: HashMap::new(),
        nodes: 0,
        root: None,
        documents: 0,
    };
    let mut parser = Parser::new_from_str(text);
    while let Some(event) = parser.next_event() {
        match event {
            Ok((event, span)) => {
                let span = builder.positions.span(span);
                if !builder.event(event, span)? {
                    break;
                }
            }
            Err(error) => {
                let marker = *error.marker();
                let span = builder.positions.span(saphyr_parser::Span::empty(marker));
                let mut e = syntax(error.info().to_owned(), span);
                if error.info().contains("tab") {
                    e.help = Some(
                        "indent with spaces: YAML does not allow tabs for indentation".to_owned(),
                    );
                }
                return Err(e);
            }
        }
    }
    Ok(builder.root)
}

impl Builder<'_> {
    /// Handles one event; `false` once the document is complete.
    fn event(&mut self, event: Event<'_>, span: Span) -> Result<bool, Box<ConfigError>> {
        match event {
            Event::Nothing | Event::StreamStart | Event::DocumentEnd => {}
            Event::StreamEnd => return Ok(false),
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    let mut e = syntax(
                        "the file holds several YAML documents; moniker reads one",
                        span,
                    );
                    e.help = Some("remove the `---` line and merge the documents".to_owned());
                    return Err(e);
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                let forced_string = tag.as_ref().is_some_and(|t| {
                    t.suffix == "str" && (t.is_yaml_core_schema() || t.handle == "!!")
                });
                let kind = if style != ScalarStyle::Plain || forced_string {
                    ScalarKind::Str
                } else {
                    resolve(&text)
                };
                let node = Node {
                    value: Value::Scalar(Scalar {
                        text: text.into_owned(),
                        kind,
                    }),
                    span,
                    inline: true,
                };
                self.complete(node, anchor)?;
            }
            Event::Alias(id) => self.alias(id, span)?,
            Event::SequenceStart(anchor, _) => {
                let inline = self.opens_inline(span, '[');
                self.open(Frame::Seq {
                    start: span,
                    inline,
                    anchor,
                    items: Vec::new(),
                })?;
            }
            Event::MappingStart(anchor, _) => {
                let inline = self.opens_inline(span, '{');
                self.open(Frame::Map {
                    start: span,
                    inline,
                    anchor,
                    entries: Vec::new(),
                    key: None,
                })?;
            }
            Event::SequenceEnd | Event::MappingEnd => self.close(span)?,
        }
        Ok(true)
    }

    /// `*id`: the node its anchor named, again (counted again, as deep as it is).
    fn alias(&mut self, id: usize, span: Span) -> Result<(), Box<ConfigError>> {
        let Some(node) = self.anchors.get(&id) else {
            return Err(syntax("alias to an unknown anchor", span));
        };
        if self.stack.len() + node.depth() > MAX_DEPTH {
            return Err(too_deep(span));
        }
        self.nodes += node.count();
        if self.nodes > MAX_NODES {
            return Err(too_large(span));
        }
        let node = node.clone();
        self.complete(node, 0)
    }

    /// The end of the open list or map (at `span`): it is complete.
    fn close(&mut self, span: Span) -> Result<(), Box<ConfigError>> {
        let Some(frame) = self.stack.pop() else {
            return Ok(());
        };
        let (start, inline, anchor, value) = match frame {
            Frame::Seq {
                start,
                inline,
                anchor,
                items,
            } => (start, inline, anchor, Value::Seq(items)),
            Frame::Map {
                start,
                inline,
                anchor,
                entries,
                key: _,
            } => (start, inline, anchor, Value::Map(entries)),
        };
        let end = span.offset + span.len;
        let node = Node {
            value,
            span: Span {
                len: end.saturating_sub(start.offset),
                ..start
            },
            inline,
        };
        self.complete(node, anchor)
    }

    /// Whether the collection that starts at `span` is written inline: its start event covers
    /// the opening bracket (and any anchor or tag before it); a block one covers nothing.
    fn opens_inline(&self, span: Span, bracket: char) -> bool {
        span.len > 0
            && self
                .positions
                .text()
                .get(span.offset..span.offset + span.len)
                .is_some_and(|s| s.trim_end().ends_with(bracket))
    }

    fn open(&mut self, frame: Frame) -> Result<(), Box<ConfigError>> {
        let span = match &frame {
            Frame::Seq { start, .. } | Frame::Map { start, .. } => *start,
        };
        if self.stack.len() >= MAX_DEPTH {
            return Err(too_deep(span));
        }
        self.count(span)?;
        self.stack.push(frame);
        Ok(())
    }

    fn count(&mut self, span: Span) -> Result<(), Box<ConfigError>> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(too_large(span));
        }
        Ok(())
    }

    /// A node is complete: it is an item, a key, a value, or the document.
    fn complete(&mut self, node: Node, anchor: usize) -> Result<(), Box<ConfigError>> {
        if matches!(node.value, Value::Scalar(_)) {
            self.count(node.span)?;
        }
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { entries, key, .. }) => match key.take() {
                None => *key = Some(node),
                Some(k) => {
                    let (name, kind) = match k.value {
                        Value::Scalar(s) => (Some(s.text), "a string"),
                        Value::Seq(_) => (None, "a list"),
                        Value::Map(_) => (None, "a map"),
                    };
                    entries.push(Entry {
                        key: name,
                        key_span: k.span,
                        key_kind: kind,
                        value: node,
                    });
                }
            },
        }
        Ok(())
    }
}

fn too_deep(span: Span) -> Box<ConfigError> {
    syntax(
        format!("values are nested more than {MAX_DEPTH} levels deep"),
        span,
    )
}

fn too_large(span: Span) -> Box<ConfigError> {
    syntax(
        format!("the document has more than {MAX_NODES} values (aliases expanded)"),
        span,
    )
}

/// The YAML 1.2 core schema, for plain scalars.
fn resolve(text: &str) -> ScalarKind {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return ScalarKind::Null,
        "true" | "True" | "TRUE" => return ScalarKind::Bool(true),
        "false" | "False" | "FALSE" => return ScalarKind::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return ScalarKind::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return ScalarKind::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return ScalarKind::Float(f64::NAN),
        _ => {}
    }
    let digits = |s: &str, radix: u32| !s.is_empty() && s.chars().all(|c| c.is_digit(radix));
    for (prefix, radix) in [("0x", 16), ("0o", 8)] {
        if let Some(rest) = text.strip_prefix(prefix) {
            if digits(rest, radix) {
                return i64::from_str_radix(rest, radix)
                    .map_or(ScalarKind::Float(f64::INFINITY), ScalarKind::Int);
            }
            return ScalarKind::Str;
        }
    }
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits(unsigned, 10) {
        // Too large for i64: still a number.
        return text.parse::<i64>().map_or_else(
            |_| ScalarKind::Float(text.parse().unwrap_or(f64::INFINITY)),
            ScalarKind::Int,
        );
    }
    if is_float(unsigned) {
        if let Ok(f) = text.parse::<f64>() {
            return ScalarKind::Float(f);
        }
    }
    ScalarKind::Str
}

/// `(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`
fn is_float(s: &str) -> bool {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some((int, frac)) => {
            all_digits(int) && all_digits(frac) && (!int.is_empty() || !frac.is_empty())
        }
        None => !mantissa.is_empty() && all_digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && all_digits(e)
    });
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(text: &str) -> Node {
        parse(text).expect("valid yaml").expect("a document")
    }

    #[test]
    fn core_schema() {
        for (text, kind) in [
            ("~", ScalarKind::Null),
            ("", ScalarKind::Null),
            ("True", ScalarKind::Bool(true)),
            ("12", ScalarKind::Int(12)),
            ("-3", ScalarKind::Int(-3)),
            ("0x1f", ScalarKind::Int(31)),
            ("0o17", ScalarKind::Int(15)),
            ("1.5", ScalarKind::Float(1.5)),
            (".5", ScalarKind::Float(0.5)),
            ("1e3", ScalarKind::Float(1000.0)),
            ("yes", ScalarKind::Str),
            ("1.2.3", ScalarKind::Str),
            ("30s", ScalarKind::Str),
            ("0xg", ScalarKind::Str),
            ("-", ScalarKind::Str),
            (".", ScalarKind::Str),
        ] {
            assert_eq!(resolve(text), kind, "{text}");
        }
        assert!(matches!(
            resolve("99999999999999999999"),
            ScalarKind::Float(_)
        ));
    }

    #[test]
    fn quoted_and_tagged_scalars_are_strings() {
        let node = root("a: '12'\nb: !!str 13\nc: 14\n");
        let Value::Map(entries) = node.value else {
            panic!("a map")
        };
        let kinds: Vec<_> = entries
            .iter()
            .map(|e| match &e.value.value {
                Value::Scalar(s) => s.kind,
                _ => panic!("a scalar"),
            })
            .collect();
        assert_eq!(
            kinds,
            [ScalarKind::Str, ScalarKind::Str, ScalarKind::Int(14)]
        );
    }

    #[test]
    fn spans_are_bytes_and_columns_are_characters() {
        let text = "é: [a, b]\nnext:\n  - x\n";
        let node = root(text);
        let Value::Map(entries) = node.value else {
            panic!("a map")
        };
        let e = &entries[0];
        assert_eq!(e.key.as_deref(), Some("é"));
        assert_eq!(e.key_span.offset, 0);
        assert_eq!(e.key_span.len, 2);
        assert!(e.value.inline);
        assert_eq!(e.value.span.column, 4);
        assert_eq!(&text[e.value.span.offset..][..e.value.span.len], "[a, b]");
        assert!(!entries[1].value.inline);
        assert_eq!(entries[1].key_span.line, 2);
    }

    #[test]
    fn duplicate_keys_are_kept() {
        let Value::Map(entries) = root("a: 1\na: 2\n").value else {
            panic!("a map")
        };
        assert_eq!(entries.len(), 2);
    }

    #[test]
    fn empty_documents() {
        assert_eq!(parse("").expect("ok"), None);
        assert_eq!(parse("# only a comment\n").expect("ok"), None);
        assert!(root("---\n").is_null());
    }

    #[test]
    fn limits() {
        for deep in [
            "[".repeat(100_000),
            "{a: ".repeat(100_000),
            "- ".repeat(100_000) + "x",
            (0..5_000)
                .map(|i| format!("{}a:\n", " ".repeat(i)))
                .collect(),
        ] {
            assert!(parse(&deep).is_err());
        }
        let deep_flow = format!("{}{}", "[".repeat(100), "]".repeat(100));
        let err = parse(&deep_flow).expect_err("too deep");
        assert!(err.message.contains("nested"), "{}", err.message);
        let mut laughs = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let p = i - 1;
            laughs.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let err = parse(&laughs).expect_err("too large");
        assert!(err.message.contains("more than"), "{}", err.message);
    }

    #[test]
    fn aliases_are_expanded() {
        let Value::Map(entries) = root("a: &x {k: v}\nb: *x\n").value else {
            panic!("a map")
        };
        assert_eq!(entries[0].value.value, entries[1].value.value);
    }

    #[test]
    fn several_documents_are_refused() {
        let err = parse("a: 1\n---\nb: 2\n").expect_err("two documents");
        assert_eq!(err.code, codes::SYNTAX);
        assert_eq!(err.span.map(|s| s.line), Some(2));
    }

    #[test]
    fn syntax_errors_have_a_place() {
        let err = parse("a:\n\tb: 1\n").expect_err("tab");
        assert_eq!(err.code, codes::SYNTAX);
        let span = err.span.expect("span");
        assert_eq!((span.line, span.column), (2, 2));
        assert!(err.help.is_some());
    }
}
