//! The token audit of `moniker stats`: what each tool of the listing costs a model (its name,
//! description and input schema, in tokens), the text repeated across tools (a parameter
//! described the same way in many tools, a sentence of boilerplate), and what each choice
//! would save. Pure over the listed definitions and a token counter.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// One tool's cost.
#[derive(Debug, Serialize)]
pub struct ToolCost {
    pub name: String,
    pub name_tokens: usize,
    pub description_tokens: usize,
    pub schema_tokens: usize,
    /// The whole definition as listed (names of fields, `_meta`, ...).
    pub total_tokens: usize,
}

/// A text found in more than one tool.
#[derive(Debug, Serialize)]
pub struct Repeated {
    /// `parameter` (a parameter's description) or `sentence` (of a tool's description).
    pub kind: &'static str,
    pub text: String,
    pub tools: usize,
    pub tokens_each: usize,
    /// What saying it once would save: every repetition after the first.
    pub tokens_repeated: usize,
}

#[derive(Debug, Serialize)]
pub struct Audit {
    pub tools: Vec<ToolCost>,
    pub repeated: Vec<Repeated>,
    pub listing_tokens: usize,
}

/// The audit of `definitions` (the listed tools' JSON) and `listing` (the `tools/list` result
/// they make), with `count` the token counter.
pub fn audit(definitions: &[&str], listing: &str, count: &dyn Fn(&str) -> usize) -> Audit {
    let mut tools = Vec::new();
    let mut parameters: BTreeMap<String, usize> = BTreeMap::new();
    let mut sentences: BTreeMap<String, usize> = BTreeMap::new();
    for text in definitions {
        let Ok(definition) = serde_json::from_str::<Value>(text) else {
            continue;
        };
        let name = definition["name"].as_str().unwrap_or_default().to_owned();
        let description = definition["description"].as_str().unwrap_or_default();
        let schema = definition
            .get("inputSchema")
            .map(Value::to_string)
            .unwrap_or_default();
        tools.push(ToolCost {
            name_tokens: count(&name),
            description_tokens: count(description),
            schema_tokens: count(&schema),
            total_tokens: count(text),
            name,
        });
        let mut seen_here = Vec::new();
        for sentence in split_sentences(description) {
            if !seen_here.contains(&sentence) {
                *sentences.entry(sentence.clone()).or_default() += 1;
                seen_here.push(sentence);
            }
        }
        if let Some(properties) = definition["inputSchema"]["properties"].as_object() {
            for property in properties.values() {
                if let Some(d) = property["description"].as_str().filter(|d| d.len() >= 12) {
                    *parameters.entry(d.to_owned()).or_default() += 1;
                }
            }
        }
    }
    let mut repeated: Vec<Repeated> = parameters
        .into_iter()
        .map(|(text, n)| ("parameter", text, n))
        .chain(sentences.into_iter().map(|(text, n)| ("sentence", text, n)))
        .filter(|(_, _, n)| *n > 1)
        .map(|(kind, text, n)| {
            let each = count(&text);
            Repeated {
                kind,
                tokens_each: each,
                tokens_repeated: each * (n - 1),
                tools: n,
                text,
            }
        })
        .collect();
    repeated.sort_by(|a, b| {
        b.tokens_repeated
            .cmp(&a.tokens_repeated)
            .then(a.text.cmp(&b.text))
    });
    Audit {
        tools,
        repeated,
        listing_tokens: count(listing),
    }
}

/// The sentences of a description worth counting (some words long); moniker's own
/// `Aliases:` line is one.
fn split_sentences(description: &str) -> Vec<String> {
    description
        .split(['\n', '.'])
        .map(str::trim)
        .filter(|s| s.split_whitespace().count() >= 4)
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> usize {
        text.split_whitespace()
            .count()
            .max(usize::from(!text.is_empty()))
    }

    #[test]
    fn costs_and_repeats_are_counted() {
        let a = r#"{"name":"create_project","description":"Create a project. Requires an active workspace to be set first.","inputSchema":{"type":"object","properties":{"workspace_id":{"type":"string","description":"The workspace the project lives in"}}}}"#;
        let b = r#"{"name":"delete_project","description":"Delete a project. Requires an active workspace to be set first.","inputSchema":{"type":"object","properties":{"workspace_id":{"type":"string","description":"The workspace the project lives in"}}}}"#;
        let listing = format!(r#"{{"tools":[{a},{b}]}}"#);
        let audit = audit(&[a, b], &listing, &words);
        assert_eq!(audit.tools.len(), 2);
        assert_eq!(audit.listing_tokens, words(&listing));
        assert_eq!(audit.tools[0].name, "create_project");
        assert!(audit.tools[0].description_tokens > 0 && audit.tools[0].schema_tokens > 0);
        let kinds: Vec<(&str, &str, usize)> = audit
            .repeated
            .iter()
            .map(|r| (r.kind, r.text.as_str(), r.tools))
            .collect();
        assert!(
            kinds.contains(&("parameter", "The workspace the project lives in", 2)),
            "{kinds:?}"
        );
        assert!(
            kinds.contains(&(
                "sentence",
                "Requires an active workspace to be set first",
                2
            )),
            "{kinds:?}"
        );
        assert!(
            audit
                .repeated
                .iter()
                .all(|r| r.tokens_repeated == r.tokens_each)
        );
    }
}
