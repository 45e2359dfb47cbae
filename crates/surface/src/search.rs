//! Finding a tool by what a model asks for. [`Ranker`] is BM25 (the `bm25` crate) over
//! [`Words`]; [`Index`] ranks a surface's listed tools with everything moniker knows of each:
//! its name, aliases (hidden ones too), tags, server, description, parameter names, and for
//! an action tool the names of its members. A name or alias asked for exactly is found first,
//! whatever the ranking says.
//!
//! Pure and deterministic: the same surface and query give the same tools in the same order
//! (equal scores keep the surface's order, which is by name).

use std::collections::HashSet;

use bm25::{Embedder, EmbedderBuilder, Scorer, Tokenizer};
use rust_stemmers::{Algorithm, Stemmer};
use serde_json::Value;

use crate::names::Tag;
use crate::surface::{Exposed, Surface};
use crate::vocab::Kind;

/// The words of identifiers and prose: text split at anything that is not a letter or a digit
/// and between the humps of camelCase, lowercased, without English stop words, each reduced
/// to its stem (Snowball), so that `listIssues`, `list_issues` and "listing the issues" meet.
pub struct Words {
    stemmer: Stemmer,
    stop: HashSet<&'static str>,
}

impl Default for Words {
    fn default() -> Self {
        Self {
            stemmer: Stemmer::create(Algorithm::English),
            stop: stop_words::get(stop_words::LANGUAGE::English)
                .iter()
                .copied()
                .collect(),
        }
    }
}

impl Words {
    /// The stems of `text`, in order.
    pub fn of(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for piece in text.split(|c: char| !c.is_alphanumeric()) {
            for word in humps(piece) {
                let word = word.to_lowercase();
                if self.stop.contains(word.as_str()) {
                    continue;
                }
                out.push(self.stemmer.stem(&word).into_owned());
            }
        }
        out
    }
}

impl Tokenizer for Words {
    fn tokenize(&self, input_text: &str) -> Vec<String> {
        self.of(input_text)
    }
}

/// `getPRInfo` → `get`, `PR`, `Info`; `v2` stays whole.
fn humps(piece: &str) -> impl Iterator<Item = &str> {
    let chars: Vec<(usize, char)> = piece.char_indices().collect();
    let mut cuts = vec![0];
    for i in 1..chars.len() {
        let (at, c) = chars[i];
        let before = chars[i - 1].1;
        let next_lower = chars.get(i + 1).is_some_and(|(_, n)| n.is_lowercase());
        // aB, or the B of ABc (the last capital of an acronym starts the next word).
        if c.is_uppercase() && (before.is_lowercase() || (before.is_uppercase() && next_lower)) {
            cuts.push(at);
        }
    }
    cuts.push(piece.len());
    cuts.windows(2)
        .map(move |w| &piece[w[0]..w[1]])
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .into_iter()
}

/// BM25 over documents known by their position.
pub struct Ranker {
    embedder: Embedder<u32, Words>,
    scorer: Scorer<u32, u32>,
}

impl Ranker {
    pub fn new<S: AsRef<str>>(documents: &[S]) -> Self {
        let texts: Vec<&str> = documents.iter().map(AsRef::as_ref).collect();
        let embedder = EmbedderBuilder::<u32, Words>::with_tokenizer_and_fit_to_corpus(
            Words::default(),
            &texts,
        )
        .build();
        let mut scorer = Scorer::new();
        for (i, text) in texts.iter().enumerate() {
            // More than u32::MAX documents cannot have been listed.
            scorer.upsert(&(i as u32), embedder.embed(text));
        }
        Self { embedder, scorer }
    }

    /// The documents that share a word with `query`, best first: (position, score). Equal
    /// scores are in position order.
    pub fn rank(&self, query: &str) -> Vec<(usize, f32)> {
        let mut ranked: Vec<(usize, f32)> = self
            .scorer
            .matches(&self.embedder.embed(query))
            .into_iter()
            .map(|d| (d.id as usize, d.score))
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked
    }
}

/// How often each field is said in a tool's document: BM25 counts words, so a word of the
/// name weighs more than one of the description.
const NAME_WEIGHT: usize = 3;
const ALIAS_WEIGHT: usize = 2;
const TAG_WEIGHT: usize = 2;

/// The listed tools of a surface, ranked for a query.
pub struct Index {
    ranker: Ranker,
    /// Document `i` is the surface's tool `tools[i]`.
    tools: Vec<usize>,
}

/// What a search asks for.
#[derive(Debug, Clone, Copy)]
pub struct Query<'q> {
    pub text: &'q str,
    /// Only tools with one of these tags (none: any tool).
    pub tags: &'q [Tag],
    pub limit: usize,
}

impl Index {
    pub fn new(surface: &Surface) -> Self {
        let all = surface.tools();
        let mut tools = Vec::new();
        let mut documents: Vec<String> = Vec::new();
        for (i, tool) in all.iter().enumerate() {
            if tool.listed {
                tools.push(i);
                documents.push(document(tool));
            }
        }
        // A member that is not listed is found through its action tool: its names, aliases
        // and description are the action tool's words too.
        for member in all.iter().filter(|t| !t.listed) {
            let Some((action_tool, _)) = &member.member_of else {
                continue;
            };
            let at = tools
                .iter()
                .position(|&i| all[i].name == *action_tool && all[i].member_of.is_none());
            if let Some(at) = at {
                documents[at].push('\n');
                documents[at].push_str(&document(member));
            }
        }
        Self {
            ranker: Ranker::new(&documents),
            tools,
        }
    }

    /// The tools for `query`, best first, at most `query.limit`: `exact` (the tool a name or
    /// alias equal to the query names, resolved by the caller, who knows the session's
    /// toolset) first, then the ranking; only tools `keep` accepts. A query without words
    /// but with tags gives the tools with those tags, by name.
    pub fn search<'s>(
        &self,
        surface: &'s Surface,
        query: Query<'_>,
        exact: Option<&'s Exposed>,
        keep: impl Fn(&Exposed) -> bool,
    ) -> Vec<&'s Exposed> {
        let tagged =
            |e: &Exposed| query.tags.is_empty() || e.tags.iter().any(|t| query.tags.contains(t));
        let accept = |e: &Exposed| keep(e) && tagged(e);
        let all = surface.tools();
        let ranked: Vec<&'s Exposed> = if query.text.trim().is_empty() {
            self.tools.iter().map(|&i| &all[i]).collect()
        } else {
            self.ranker
                .rank(query.text)
                .into_iter()
                .map(|(doc, _)| &all[self.tools[doc]])
                .collect()
        };
        let exact = exact.map(|e| shown(surface, e));
        let mut out: Vec<&'s Exposed> = Vec::with_capacity(query.limit);
        for tool in exact.into_iter().chain(ranked) {
            if out.len() == query.limit {
                break;
            }
            if accept(tool) && !out.iter().any(|o| std::ptr::eq(*o, tool)) {
                out.push(tool);
            }
        }
        out
    }
}

/// What a search shows for a tool: the tool, or for a member that is not listed, its action
/// tool.
fn shown<'s>(surface: &'s Surface, tool: &'s Exposed) -> &'s Exposed {
    match (&tool.member_of, tool.listed) {
        (Some((action_tool, _)), false) => surface
            .resolve(Kind::Tool, action_tool)
            .map_or(tool, |r| r.exposed),
        _ => tool,
    }
}

/// The words a tool is found by, each field said as often as it weighs.
fn document(tool: &Exposed) -> String {
    let mut out = String::new();
    let mut say = |text: &str, times: usize| {
        for _ in 0..times {
            out.push_str(text);
            out.push('\n');
        }
    };
    say(&tool.name, NAME_WEIGHT);
    for alias in tool.aliases.iter().chain(&tool.hidden_aliases) {
        say(alias, ALIAS_WEIGHT);
    }
    for tag in &tool.tags {
        say(tag.as_str(), TAG_WEIGHT);
    }
    say(&tool.server_name, 1);
    let definition: Value = serde_json::from_str(tool.definition.get()).unwrap_or(Value::Null);
    if let Some(description) = definition.get("description").and_then(Value::as_str) {
        say(description, 1);
    }
    let properties = definition
        .get("inputSchema")
        .or_else(|| definition.get("arguments"))
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    for name in properties.into_iter().flat_map(|p| p.keys()) {
        say(name, 1);
    }
    out
}

#[cfg(test)]
mod tests;
