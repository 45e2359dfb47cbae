//! The findability check (`moniker check` in search mode): a tool that a search built from its
//! own description does not find in the first five is as good as missing to a model that finds
//! tools by searching. Each is named with why (no description; another tool's text so close it
//! ranks above) and the fix the config can write.

use super::{Index, Query};
use crate::diagnostic::Diagnostic;
use crate::discovery::compact::{description_of, first_sentence};
use crate::surface::{Exposed, Surface};
use crate::vocab::Kind;

/// The results a tool must be among, for a search of its own description.
const FIRST: usize = 5;

/// The listed tools of `surface` with no description, and those a search of their own
/// description (its first sentence) does not find in the first [`FIRST`] with
/// `index`, as warnings with their fix.
pub fn unfindable(surface: &Surface, index: &Index) -> Vec<Diagnostic> {
    surface
        .listed(Kind::Tool)
        .filter(|tool| tool.withheld.is_none())
        .filter_map(|tool| unfound(surface, index, tool))
        .collect()
}

fn unfound(surface: &Surface, index: &Index, tool: &Exposed) -> Option<Diagnostic> {
    let name = &tool.name;
    let described = description_of(&tool.definition)
        .map(|d| first_sentence(&d))
        .filter(|d| !d.is_empty());
    // No request can be built from what is not there: a model searching for a task finds it
    // by its name's words alone.
    let Some(described) = described else {
        return Some(
            Diagnostic::warning(
                "search::unfindable",
                format!("`{name}` has no description: a search for what it does cannot find it"),
            )
            .help(format!(
                "say what it does: `tools: {{ {name}: {{ description: \"...\" }} }}`"
            )),
        );
    };
    let query = Query {
        text: &described,
        tags: &[],
        limit: FIRST,
        toolsets: &[],
        ..Default::default()
    };
    let found = index.search(surface, query, None, |_| true);
    if found.iter().any(|e| e.name == tool.name) {
        return None;
    }
    let above: Vec<String> = found
        .iter()
        .take(3)
        .map(|e| format!("`{}`", e.name))
        .collect();
    let twin = found
        .iter()
        .find(|e| description_of(&e.definition).is_some_and(|d| first_sentence(&d) == described));
    let diagnostic = Diagnostic::warning(
        "search::unfindable",
        format!(
            "a search of `{name}`'s own description (\"{described}\") does not find it in the first {FIRST}: {} rank above it",
            above.join(", ")
        ),
    );
    Some(match twin {
        Some(twin) => diagnostic.help(format!(
            "it says what `{}` says: fold both into an action tool (`actions:`), or say what sets it apart: `tools: {{ {name}: {{ description: \"...\" }} }}`",
            twin.name
        )),
        None => diagnostic.help(format!(
            "say what sets it apart in its description (`tools: {{ {name}: {{ description: \"...\" }} }}`), or give it an alias of the words people use (`aliases:`)"
        )),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::search::Meaning;
    use crate::{Listing, Rules, build};

    #[test]
    fn twins_past_the_first_five_and_the_undescribed_are_named_with_their_fix() {
        let tool = |name: &str, description: Option<&str>| {
            let mut t = json!({"name": name, "inputSchema": {"type": "object"}});
            if let Some(d) = description {
                t["description"] = json!(d);
            }
            serde_json::value::RawValue::from_string(t.to_string()).unwrap()
        };
        let mut tools: Vec<_> = (0..7)
            .map(|i| {
                tool(
                    &format!("fetch_page_{i}"),
                    Some("Fetch a web page and return its text."),
                )
            })
            .collect();
        tools.push(tool("zq_xv", None));
        tools.push(tool(
            "create_issue",
            Some("Open a new issue in a repository's tracker."),
        ));
        let listing = Listing {
            server: "web".parse().unwrap(),
            tools,
            prompts: Vec::new(),
            version: None,
        };
        let surface = build(&Rules::default(), &[&listing]).surface.unwrap();
        let index = Index::build(&surface, Meaning::shipped(), None);
        let named = unfindable(&surface, &index);
        let said: Vec<String> = named.iter().map(ToString::to_string).collect();
        let of = |name: &str| {
            said.iter()
                .filter(|d| d.contains(&format!("`{name}`")))
                .count()
        };
        assert_eq!(of("zq_xv"), 1, "{said:#?}");
        assert!(
            said.iter().any(|d| d.contains("has no description")),
            "{said:#?}"
        );
        // Two of the seven twins are past the first five: named, each with the action tool.
        let twins = named
            .iter()
            .filter(|d| d.message.contains("own description"))
            .count();
        assert_eq!(twins, 2, "{said:#?}");
        assert!(
            named
                .iter()
                .filter(|d| d.message.contains("own description"))
                .all(|d| d.help.as_deref().is_some_and(|h| h.contains("action tool")))
        );
        assert!(
            !said.iter().any(|d| d.contains("`create_issue`'s own")),
            "{said:#?}"
        );
    }
}
