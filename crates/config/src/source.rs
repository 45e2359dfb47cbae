//! Where things are in the config text: a [`Span`] for every dotted path, so that diagnostics
//! found long after parsing (by the naming core) can still be shown in the file.

use std::collections::HashMap;
use std::fmt::{self, Write as _};

/// A place in the config text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Byte offset of the start in [`Source::text`].
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
    /// 1-based line of the start.
    pub line: usize,
    /// 1-based column of the start, in characters (what an editor shows).
    pub column: usize,
}

/// The places recorded for one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Spans {
    /// The key, for map entries.
    pub key: Option<Span>,
    /// The whole value.
    pub value: Span,
    /// Where a diagnostic about this entry should point: the value when it fits on a line
    /// (a scalar or a flow collection), else the key.
    pub point: Span,
}

/// The config text, its file name, and the span of every path the parser visited.
#[derive(Clone)]
pub struct Source {
    pub file_name: String,
    pub text: String,
    spans: HashMap<String, Spans>,
    /// `servers` or `mcpServers`: the key the servers were read from, for paths built after
    /// parsing (env expansion).
    servers_key: String,
}

impl Source {
    /// A source with no recorded spans.
    pub fn new(file_name: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            file_name: file_name.into(),
            text: text.into(),
            spans: HashMap::new(),
            servers_key: "servers".to_owned(),
        }
    }

    pub(crate) fn with_spans(
        file_name: &str,
        text: &str,
        spans: HashMap<String, Spans>,
        servers_key: &str,
    ) -> Self {
        Self {
            spans,
            servers_key: servers_key.to_owned(),
            ..Self::new(file_name, text)
        }
    }

    /// Where to show a diagnostic about `path` (a [`moniker_surface::vocab::path`]): the value
    /// when it is a scalar or a flow collection (`[a, b]`, `{ a: b }`), else the key.
    pub fn span(&self, path: &str) -> Option<Span> {
        self.spans.get(path).map(|s| s.point)
    }

    /// The key of the map entry at `path`, if it is one.
    pub fn key_span(&self, path: &str) -> Option<Span> {
        self.spans.get(path).and_then(|s| s.key)
    }

    /// The whole value at `path` (a block collection spans several lines).
    pub fn value_span(&self, path: &str) -> Option<Span> {
        self.spans.get(path).map(|s| s.value)
    }

    /// The key the servers came from: `servers`, or `mcpServers` in a Claude Desktop file.
    pub fn servers_key(&self) -> &str {
        &self.servers_key
    }

    /// A rustc-style excerpt of the line `span` starts on, with `^^^` under the span and
    /// `label` after it:
    ///
    /// ```text
    ///  --> moniker.yaml:3:5
    ///   |
    /// 3 |     comand: npx
    ///   |     ^^^^^^ servers.github.comand
    /// ```
    pub fn excerpt(&self, span: Span, label: &str) -> String {
        excerpt(&self.file_name, &self.text, span, label)
    }
}

impl Default for Source {
    fn default() -> Self {
        Self::new("", "")
    }
}

/// Not derived: the text may hold secrets written in the file.
impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Source")
            .field("file_name", &self.file_name)
            .field("text_len", &self.text.len())
            .field("spans", &self.spans.len())
            .finish_non_exhaustive()
    }
}

pub(crate) fn excerpt(file_name: &str, text: &str, span: Span, label: &str) -> String {
    let mut out = String::new();
    let line_text = text.lines().nth(span.line.saturating_sub(1)).unwrap_or("");
    let number = span.line.to_string();
    let pad = " ".repeat(number.len());
    // `write!` to a String cannot fail.
    let _ = writeln!(out, "{pad}--> {file_name}:{}:{}", span.line, span.column);
    let _ = writeln!(out, "{pad} |");
    // Tabs are shown as one space so that the carets stay under the text they mark.
    let shown: String = line_text
        .chars()
        .map(|c| if c == '\t' { ' ' } else { c })
        .collect();
    let _ = writeln!(out, "{number} | {shown}");
    // How many characters of the line the span covers, at least one.
    let start = span.column.saturating_sub(1);
    let covered = text
        .get(span.offset..span.offset.saturating_add(span.len).min(text.len()))
        .map_or(0, |s| s.lines().next().unwrap_or("").chars().count());
    let room = shown.chars().count().saturating_sub(start);
    let carets = covered.min(room).max(1);
    let _ = write!(out, "{pad} | {}{}", " ".repeat(start), "^".repeat(carets));
    if !label.is_empty() {
        let _ = write!(out, " {label}");
    }
    out
}

/// Turns the parser's markers (character indexes, 0-based columns) into [`Span`]s.
pub(crate) struct Positions<'a> {
    text: &'a str,
    /// Byte offset of every character, and of the end; empty when the text is ASCII.
    offsets: Vec<usize>,
}

impl<'a> Positions<'a> {
    pub fn new(text: &'a str) -> Self {
        let offsets = if text.is_ascii() {
            Vec::new()
        } else {
            char_offsets(text)
        };
        Self { text, offsets }
    }

    fn byte(&self, char_index: usize) -> usize {
        if self.offsets.is_empty() {
            return char_index.min(self.text.len());
        }
        self.offsets
            .get(char_index)
            .copied()
            .unwrap_or(self.text.len())
    }

    pub fn span(&self, span: saphyr_parser::Span) -> Span {
        let offset = self.byte(span.start.index());
        let end = self.byte(span.end.index()).max(offset);
        Span {
            offset,
            len: end - offset,
            line: span.start.line().max(1),
            column: span.start.col() + 1,
        }
    }

    pub fn text(&self) -> &'a str {
        self.text
    }
}

/// The byte offset of every character of `text`, and of its end.
fn char_offsets(text: &str) -> Vec<usize> {
    text.char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpt_marks_the_span() {
        let text = "servers:\n  github:\n    comand: npx\n";
        let span = Span {
            offset: 23,
            len: 6,
            line: 3,
            column: 5,
        };
        assert_eq!(&text[23..29], "comand");
        let shown = excerpt("moniker.yaml", text, span, "here");
        assert_eq!(
            shown,
            " --> moniker.yaml:3:5\n  |\n3 |     comand: npx\n  |     ^^^^^^ here"
        );
    }

    #[test]
    fn excerpt_survives_spans_outside_the_text() {
        let span = Span {
            offset: 500,
            len: 9,
            line: 40,
            column: 80,
        };
        let shown = excerpt("f", "a: b\n", span, "");
        assert!(shown.contains('^'), "{shown}");
    }

    #[test]
    fn debug_does_not_show_the_text() {
        let source = Source::new("f.yaml", "env: { TOKEN: hunter2 }");
        assert!(!format!("{source:?}").contains("hunter2"));
    }
}
