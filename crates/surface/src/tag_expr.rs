//! Tag expressions: `git and (github or gitlab) and not deprecated`, how they parse (with
//! errors that say where and what was expected), how they match a list of tags and how they
//! are written back. A toolset's `tags` is one (DESIGN "Toolsets").

use std::fmt;
use std::str::FromStr;

use crate::diagnostic::short;
use crate::names::{TAG_RULE, Tag};

/// A boolean expression over tags: `git and (github or gitlab) and not deprecated`.
/// `not` binds tighter than `and`, which binds tighter than `or`; both are left-associative.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagExpr {
    Tag(Tag),
    Not(Box<TagExpr>),
    And(Box<TagExpr>, Box<TagExpr>),
    Or(Box<TagExpr>, Box<TagExpr>),
}

/// Nesting (parentheses and `not`) deeper than this is refused.
pub const TAG_EXPR_MAX_DEPTH: usize = 32;
/// More tags than this in one expression are refused.
pub const TAG_EXPR_MAX_TAGS: usize = 256;

impl TagExpr {
    /// Whether an item with these tags is selected.
    pub fn matches(&self, tags: &[Tag]) -> bool {
        match self {
            Self::Tag(tag) => tags.contains(tag),
            Self::Not(e) => !e.matches(tags),
            Self::And(a, b) => a.matches(tags) && b.matches(tags),
            Self::Or(a, b) => a.matches(tags) || b.matches(tags),
        }
    }

    /// A list of tags means any of them; `None` for no tags.
    pub fn any_of(tags: Vec<Tag>) -> Option<Self> {
        tags.into_iter()
            .map(Self::Tag)
            .reduce(|a, b| Self::Or(Box::new(a), Box::new(b)))
    }

    /// Every tag the expression mentions, in order, repeats included.
    pub fn tags(&self) -> Vec<&Tag> {
        let mut out = Vec::new();
        let mut stack = vec![self];
        while let Some(e) = stack.pop() {
            match e {
                Self::Tag(t) => out.push(t),
                Self::Not(e) => stack.push(e),
                Self::And(a, b) | Self::Or(a, b) => {
                    stack.push(b);
                    stack.push(a);
                }
            }
        }
        out
    }

    fn precedence(&self) -> u8 {
        match self {
            Self::Or(..) => 1,
            Self::And(..) => 2,
            Self::Not(_) => 3,
            Self::Tag(_) => 4,
        }
    }
}

/// The shortest text that parses back to the same expression.
impl fmt::Display for TagExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn part(f: &mut fmt::Formatter<'_>, e: &TagExpr, paren: bool) -> fmt::Result {
            if paren {
                write!(f, "({e})")
            } else {
                write!(f, "{e}")
            }
        }
        match self {
            Self::Tag(tag) => f.write_str(tag.as_str()),
            Self::Not(e) => {
                f.write_str("not ")?;
                part(f, e, e.precedence() < 3)
            }
            Self::And(a, b) | Self::Or(a, b) => {
                let (level, op) = match self {
                    Self::And(..) => (2, " and "),
                    _ => (1, " or "),
                };
                part(f, a, a.precedence() < level)?;
                f.write_str(op)?;
                part(f, b, b.precedence() <= level)
            }
        }
    }
}

/// Why a tag expression does not parse, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (at character {column})")]
pub struct TagExprError {
    /// Byte offset of the offending token in the text (its length when the text ended early).
    pub offset: usize,
    /// Length in bytes of the offending token (0 at the end of the text).
    pub len: usize,
    /// 1-based position of the offending token in the expression, in characters.
    pub column: usize,
    /// What was expected and what was found, lowercase, no trailing period.
    pub message: String,
}

impl FromStr for TagExpr {
    type Err = TagExprError;

    fn from_str(text: &str) -> Result<Self, TagExprError> {
        let mut parser = Parser {
            text,
            tokens: tokenize(text),
            pos: 0,
            depth: 0,
            tags: 0,
        };
        if parser.tokens.is_empty() {
            return Err(parser.fail_at(
                text.len(),
                0,
                "the tag expression is empty: expected a tag".to_owned(),
            ));
        }
        let expr = parser.or()?;
        match parser.tokens.get(parser.pos) {
            None => Ok(expr),
            Some(token) => {
                let message = match token.kind {
                    TokenKind::Close => "unexpected `)`: no `(` is open".to_owned(),
                    _ => format!("expected `and`, `or` or the end, found {}", found(*token)),
                };
                Err(parser.fail(*token, message))
            }
        }
    }
}

impl serde::Serialize for TagExpr {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for TagExpr {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TokenKind {
    Word,
    Open,
    Close,
}

#[derive(Debug, Clone, Copy)]
struct Token<'t> {
    kind: TokenKind,
    text: &'t str,
    offset: usize,
}

fn tokenize<'t>(text: &'t str) -> Vec<Token<'t>> {
    let mut out = Vec::new();
    let mut word: Option<usize> = None;
    let end_word = |out: &mut Vec<Token<'t>>, start: Option<usize>, end: usize| {
        if let Some(start) = start {
            out.push(Token {
                kind: TokenKind::Word,
                text: &text[start..end],
                offset: start,
            });
        }
    };
    for (i, c) in text.char_indices() {
        let kind = match c {
            '(' => Some(TokenKind::Open),
            ')' => Some(TokenKind::Close),
            c if c.is_whitespace() => None,
            _ => {
                word.get_or_insert(i);
                continue;
            }
        };
        end_word(&mut out, word.take(), i);
        if let Some(kind) = kind {
            out.push(Token {
                kind,
                text: &text[i..i + 1],
                offset: i,
            });
        }
    }
    end_word(&mut out, word, text.len());
    out
}

/// How an error names a token it did not expect: `` `AND` (operators are lowercase: `and`) ``.
fn found(token: Token<'_>) -> String {
    let lower = token.text.to_ascii_lowercase();
    if token.text != lower && matches!(lower.as_str(), "and" | "or" | "not") {
        format!("`{}` (operators are lowercase: `{lower}`)", token.text)
    } else {
        format!("`{}`", short(token.text))
    }
}

struct Parser<'t> {
    text: &'t str,
    tokens: Vec<Token<'t>>,
    pos: usize,
    depth: usize,
    tags: usize,
}

impl Parser<'_> {
    fn column(&self, offset: usize) -> usize {
        self.text
            .get(..offset)
            .map_or(1, |before| before.chars().count() + 1)
    }

    fn fail_at(&self, offset: usize, len: usize, message: String) -> TagExprError {
        TagExprError {
            offset,
            len,
            column: self.column(offset),
            message,
        }
    }

    fn fail(&self, token: Token<'_>, message: String) -> TagExprError {
        self.fail_at(token.offset, token.text.len(), message)
    }

    fn peek_word(&self, word: &str) -> bool {
        self.tokens
            .get(self.pos)
            .is_some_and(|t| t.kind == TokenKind::Word && t.text == word)
    }

    fn or(&mut self) -> Result<TagExpr, TagExprError> {
        let mut left = self.and()?;
        while self.peek_word("or") {
            self.pos += 1;
            let right = self.and()?;
            left = TagExpr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<TagExpr, TagExprError> {
        let mut left = self.unary()?;
        while self.peek_word("and") {
            self.pos += 1;
            let right = self.unary()?;
            left = TagExpr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn deeper(&mut self, token: Token<'_>) -> Result<(), TagExprError> {
        self.depth += 1;
        if self.depth > TAG_EXPR_MAX_DEPTH {
            return Err(self.fail(
                token,
                format!(
                    "the tag expression is nested too deeply: at most {TAG_EXPR_MAX_DEPTH} levels of `not` and `(`"
                ),
            ));
        }
        Ok(())
    }

    fn unary(&mut self) -> Result<TagExpr, TagExprError> {
        const EXPECTED: &str = "expected a tag, `not` or `(`";
        let Some(&token) = self.tokens.get(self.pos) else {
            let after = match self.pos.checked_sub(1).and_then(|p| self.tokens.get(p)) {
                Some(t) => format!(" after `{}`", short(t.text)),
                None => String::new(),
            };
            return Err(self.fail_at(
                self.text.len(),
                0,
                format!("{EXPECTED}{after}, found the end of the expression"),
            ));
        };
        self.pos += 1;
        match token.kind {
            TokenKind::Close => Err(self.fail(token, format!("{EXPECTED}, found `)`"))),
            TokenKind::Open => {
                self.deeper(token)?;
                let inner = self.or()?;
                match self.tokens.get(self.pos) {
                    Some(t) if t.kind == TokenKind::Close => self.pos += 1,
                    Some(&t) => {
                        return Err(self.fail(
                            t,
                            format!("expected `and`, `or` or `)`, found {}", found(t)),
                        ));
                    }
                    None => {
                        let column = self.column(token.offset);
                        return Err(self.fail_at(
                            self.text.len(),
                            0,
                            format!(
                                "expected `)` to close the `(` at character {column}, found the end of the expression"
                            ),
                        ));
                    }
                }
                self.depth -= 1;
                Ok(inner)
            }
            TokenKind::Word if token.text == "not" => {
                self.deeper(token)?;
                let inner = self.unary()?;
                self.depth -= 1;
                Ok(TagExpr::Not(Box::new(inner)))
            }
            TokenKind::Word if matches!(token.text, "and" | "or") => {
                Err(self.fail(token, format!("{EXPECTED}, found `{}`", token.text)))
            }
            TokenKind::Word => {
                self.tags += 1;
                if self.tags > TAG_EXPR_MAX_TAGS {
                    return Err(self.fail(
                        token,
                        format!("the tag expression is too long: at most {TAG_EXPR_MAX_TAGS} tags"),
                    ));
                }
                match token.text.parse::<Tag>() {
                    Ok(tag) => Ok(TagExpr::Tag(tag)),
                    Err(_) => Err(self.fail(
                        token,
                        format!("{} is not a tag: a tag {TAG_RULE}", found(token)),
                    )),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
