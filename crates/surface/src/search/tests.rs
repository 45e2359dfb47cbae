#![allow(
    clippy::too_many_lines,
    reason = "a test is one scenario, read from top to bottom"
)]
use proptest::prelude::*;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::*;
use crate::listing::Listing;
use crate::names::ServerId;
use crate::rules::{ActionRule, AliasRule, Legacy, Override, Rules, ServerRules};
use crate::{Name, build};

fn raw(v: &Value) -> Box<RawValue> {
    RawValue::from_string(v.to_string()).unwrap()
}

fn sid(s: &str) -> ServerId {
    s.parse().unwrap()
}

fn tool(name: &str, description: &str, params: &[&str]) -> Box<RawValue> {
    let properties: serde_json::Map<String, Value> = params
        .iter()
        .map(|p| ((*p).to_owned(), json!({"type": "string"})))
        .collect();
    raw(
        &json!({"name": name, "description": description, "inputSchema": {"type": "object", "properties": properties}}),
    )
}

fn alias(name: &str, hidden: bool) -> AliasRule {
    AliasRule {
        name: name.parse().unwrap(),
        hidden,
        deprecated: None,
    }
}

/// - `fs` (tag files): `read_text_file` (alias `cat`, hidden `slurp`), `write_file`,
///   `list_directory`
/// - `gh` (tags git, github): `create_issue`, `list_issues`, `get_pull_request`
/// - `mem`: `create_entities`, `search_nodes`, folded with `create_relations` into the action
///   tool `graph` (legacy names hidden)
fn surface() -> Surface {
    let mut rules = Rules::default();
    for (id, tags) in [
        ("fs", &["files"][..]),
        ("gh", &["git", "github"][..]),
        ("mem", &[][..]),
    ] {
        rules.servers.insert(
            sid(id),
            ServerRules {
                tags: tags.iter().map(|t| t.parse().unwrap()).collect(),
                prefix: None,
            },
        );
    }
    rules.tools.insert(
        "read_text_file".into(),
        Override {
            aliases: vec![alias("cat", false), alias("slurp", true)],
            ..Default::default()
        },
    );
    let name = |n: &str| -> Name { n.parse().unwrap() };
    rules.actions.insert(
        "graph".into(),
        ActionRule {
            tools: [
                ("create".to_owned(), name("create_entities")),
                ("relate".to_owned(), name("create_relations")),
            ]
            .into_iter()
            .collect(),
            legacy: Legacy::Hidden,
            ..Default::default()
        },
    );
    let listings = vec![
        Listing {
            server: sid("fs"),
            tools: vec![
                tool(
                    "read_text_file",
                    "Read the complete contents of a file as text.",
                    &["path", "head", "tail"],
                ),
                tool(
                    "write_file",
                    "Create a new file or completely overwrite an existing file with new content.",
                    &["path", "content"],
                ),
                tool(
                    "list_directory",
                    "Get a detailed listing of all files and directories in a specified path.",
                    &["path"],
                ),
            ],
            prompts: vec![],
            version: None,
        },
        Listing {
            server: sid("gh"),
            tools: vec![
                tool(
                    "create_issue",
                    "Create a new issue in a GitHub repository.",
                    &["owner", "repo", "title", "body"],
                ),
                tool(
                    "list_issues",
                    "List issues in a GitHub repository with filtering options.",
                    &["owner", "repo", "state"],
                ),
                tool(
                    "get_pull_request",
                    "Get details of a specific pull request.",
                    &["owner", "repo", "pull_number"],
                ),
            ],
            prompts: vec![],
            version: None,
        },
        Listing {
            server: sid("mem"),
            tools: vec![
                tool(
                    "create_entities",
                    "Create multiple new entities in the knowledge graph.",
                    &["entities"],
                ),
                tool(
                    "create_relations",
                    "Create multiple new relations between entities in the knowledge graph.",
                    &["relations"],
                ),
                tool(
                    "search_nodes",
                    "Search for nodes in the knowledge graph based on a query.",
                    &["query"],
                ),
            ],
            prompts: vec![],
            version: None,
        },
    ];
    let built = build(&rules, &listings);
    built
        .surface
        .unwrap_or_else(|| panic!("{:?}", built.diagnostics))
}

fn names(found: &[&Exposed]) -> Vec<String> {
    found.iter().map(|e| e.name.clone()).collect()
}

fn find(surface: &Surface, text: &str, limit: usize) -> Vec<String> {
    let index = Index::new(surface);
    let exact = surface.resolve(Kind::Tool, text.trim()).map(|r| r.exposed);
    let query = Query {
        text,
        tags: &[],
        limit,
        toolsets: &[],
        ..Default::default()
    };
    names(&index.search(surface, query, exact, |_| true))
}

#[test]
fn words_split_identifiers_and_prose_alike() {
    let words = Words::default();
    assert_eq!(words.of("listIssues"), words.of("list_issues"));
    assert_eq!(words.of("list-issues"), ["list", "issu"]);
    assert_eq!(words.of("getPRInfo"), ["get", "pr", "info"]);
    assert_eq!(words.of("Listing the issues"), ["list", "issu"]);
    assert_eq!(words.of("read v2 files"), ["read", "v2", "file"]);
    assert!(words.of("the of and").is_empty());
}

#[test]
fn a_request_in_words_finds_its_tool_first() {
    let s = surface();
    assert_eq!(find(&s, "open an issue on github", 1), ["create_issue"]);
    assert_eq!(
        find(&s, "what files are in this folder directory", 1),
        ["list_directory"]
    );
    assert_eq!(
        find(&s, "overwrite a file with new content", 1),
        ["write_file"]
    );
    assert_eq!(find(&s, "pull request details", 1), ["get_pull_request"]);
}

#[test]
fn tags_and_server_names_are_words_of_a_tool() {
    let s = surface();
    // "github" is a tag of every gh tool and a word of the descriptions; "files" a tag.
    let found = find(&s, "github", 10);
    assert_eq!(found.len(), 3);
    assert!(
        found
            .iter()
            .all(|n| ["create_issue", "list_issues", "get_pull_request"].contains(&n.as_str()))
    );
    assert!(find(&s, "mem", 10).contains(&"graph".to_owned()));
}

#[test]
fn an_action_tool_is_found_by_its_members_words_and_hidden_names() {
    let s = surface();
    assert_eq!(find(&s, "relations between entities", 1), ["graph"]);
    // `create_relations` is a hidden legacy name: it finds the action tool, which is shown.
    assert_eq!(find(&s, "create_relations", 1), ["graph"]);
}

#[test]
fn a_hidden_alias_finds_its_tool_and_is_not_shown_as_a_name() {
    let s = surface();
    let index = Index::new(&s);
    let exact = s.resolve(Kind::Tool, "slurp").map(|r| r.exposed);
    let query = Query {
        text: "slurp",
        tags: &[],
        limit: 3,
        toolsets: &[],
        ..Default::default()
    };
    let found = index.search(&s, query, exact, |_| true);
    assert_eq!(found[0].name, "read_text_file");
    assert!(!found[0].definition.get().contains("slurp"));
}

#[test]
fn tags_and_keep_bound_the_results() {
    let s = surface();
    let index = Index::new(&s);
    let github: Vec<crate::Tag> = vec!["github".parse().unwrap()];
    let query = Query {
        text: "create",
        tags: &github,
        limit: 10,
        toolsets: &[],
        ..Default::default()
    };
    assert_eq!(
        names(&index.search(&s, query, None, |_| true)),
        ["create_issue"]
    );
    let query = Query {
        text: "create",
        tags: &[],
        limit: 10,
        toolsets: &[],
        ..Default::default()
    };
    let found = names(&index.search(&s, query, None, |e| e.name != "create_issue"));
    assert!(!found.contains(&"create_issue".to_owned()));
    assert!(found.contains(&"write_file".to_owned()), "{found:?}");
    // The exact tool is kept out too when `keep` says so.
    let exact = s.resolve(Kind::Tool, "create_issue").map(|r| r.exposed);
    let query = Query {
        text: "create_issue",
        tags: &[],
        limit: 10,
        toolsets: &[],
        ..Default::default()
    };
    assert!(
        !names(&index.search(&s, query, exact, |e| e.name != "create_issue"))
            .contains(&"create_issue".to_owned())
    );
}

#[test]
fn a_query_of_tags_only_lists_the_tagged_tools_by_name() {
    let s = surface();
    let index = Index::new(&s);
    let files: Vec<crate::Tag> = vec!["files".parse().unwrap()];
    let query = Query {
        text: " ",
        tags: &files,
        limit: 10,
        toolsets: &[],
        ..Default::default()
    };
    assert_eq!(
        names(&index.search(&s, query, None, |_| true)),
        ["list_directory", "read_text_file", "write_file"]
    );
}

#[test]
fn limits_and_empty_results() {
    let s = surface();
    assert_eq!(find(&s, "file", 2).len(), 2);
    // Words that mean nothing here find nothing, by words or by meaning.
    assert!(find(&s, "zebra quantum", 5).is_empty());
    assert!(find(&s, "", 5).len() <= 5);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any name or alias (hidden too) of any tool, asked for as it is, finds that tool (or
    /// its action tool) first, whatever surrounds it in the surface.
    #[test]
    fn every_tool_is_found_by_each_of_its_names(pick in 0usize..64) {
        let s = surface();
        let all: Vec<(&Exposed, &String)> = s
            .tools()
            .iter()
            .flat_map(|t| std::iter::once(&t.name).chain(&t.aliases).chain(&t.hidden_aliases).map(move |n| (t, n)))
            .collect();
        let (tool, name) = all[pick % all.len()];
        let found = find(&s, name, 1);
        let expected = match (&tool.member_of, tool.listed) {
            (Some((action, _)), false) => action.clone(),
            _ => tool.name.clone(),
        };
        prop_assert_eq!(found, vec![expected]);
    }

    /// The ranking alone (no exact match) finds a tool by its exact name among many similar
    /// generated ones, and the order is the same every time.
    #[test]
    fn the_ranking_finds_names_and_is_deterministic(words in proptest::collection::btree_set("[a-z]{3,8}", 4..12)) {
        let words: Vec<String> = words.into_iter().collect();
        let mut tools = Vec::new();
        for (i, w) in words.iter().enumerate() {
            let next = &words[(i + 1) % words.len()];
            tools.push(tool(&format!("{w}_{next}"), &format!("Does {w} with {next}."), &[]));
        }
        let listing = Listing { server: sid("gen"), tools, prompts: vec![], version: None, };
        let built = build(&Rules::default(), &[listing]);
        let s = built.surface.unwrap();
        let index = Index::new(&s);
        for t in s.tools() {
            let query = Query { text: &t.name, tags: &[], limit: 3, toolsets: &[], ..Default::default() };
            let first = names(&index.search(&s, query, None, |_| true));
            let again = names(&index.search(&s, query, None, |_| true));
            prop_assert_eq!(&first, &again);
            prop_assert_eq!(&first[0], &t.name);
        }
    }
}

/// The semantic half finds what shares no word with the tool: its name, aliases, tags,
/// description and parameters say none of the request's words.
#[test]
fn a_request_in_other_words_finds_its_tool() {
    let s = surface();
    for (request, tool) in [
        ("report a bug", "create_issue"),
        (
            "which documents are stored in this folder",
            "list_directory",
        ),
    ] {
        let index = Index::new(&s);
        let query = Query {
            text: request,
            tags: &[],
            limit: 3,
            toolsets: &[],
            ..Default::default()
        };
        let by_words = names(&index.search_by(Part::Lexical, &s, query, None, |_| true));
        assert!(
            !by_words.iter().any(|n| n == tool),
            "{request}: the words alone find it"
        );
        let found = names(&index.search(&s, query, None, |_| true));
        assert!(found.iter().any(|n| n == tool), "{request}: {found:?}");
    }
}

#[test]
fn a_toolset_named_in_the_query_ranks_its_tools_higher() {
    let s = surface();
    let index = Index::new(&s);
    let triage: BTreeSet<String> = ["list_issues", "get_pull_request"]
        .map(str::to_owned)
        .into();
    assert_eq!(
        index.named(
            "what is in the bug triage?",
            ["bug-triage", "files", "review"]
        ),
        ["bug-triage"]
    );
    let search = |text: &str, toolsets: &[&BTreeSet<String>]| {
        let query = Query {
            text,
            tags: &[],
            limit: 2,
            toolsets,
            ..Default::default()
        };
        let mut found = names(&index.search(&s, query, None, |_| true));
        found.sort();
        found
    };
    // No tool says "triage": naming the toolset brings its tools up.
    assert_ne!(
        search("my triage", &[]),
        ["get_pull_request", "list_issues"]
    );
    assert_eq!(
        search("my triage", &[&triage]),
        ["get_pull_request", "list_issues"]
    );
    // It weighs as a word does: a request that says what it wants still finds it first.
    let query = Query {
        text: "write a file, triage",
        tags: &[],
        limit: 1,
        toolsets: &[&triage],
        ..Default::default()
    };
    assert_eq!(
        names(&index.search(&s, query, None, |_| true)),
        ["write_file"]
    );
    // It ranks; it does not bound: tags and `keep` still do.
    let query = Query {
        text: "triage these files",
        tags: &[],
        limit: 10,
        toolsets: &[&triage],
        ..Default::default()
    };
    let found = names(&index.search(&s, query, None, |e| e.name != "list_issues"));
    assert!(!found.contains(&"list_issues".to_owned()), "{found:?}");
    assert!(found.contains(&"write_file".to_owned()), "{found:?}");
}

#[test]
fn the_semantic_ranking_reads_a_descriptions_first_words() {
    assert_eq!(first_words("one two  three\nfour", 2), "one two");
    assert_eq!(first_words("  one two", 1), "  one");
    assert_eq!(first_words("one two", 5), "one two");
    assert_eq!(first_words("", 3), "");
}

/// The fused ranking holds what either half finds, nothing else, and the same way each time;
/// a tool both halves put first is first.
#[test]
fn the_fusion_keeps_what_either_half_finds() {
    let s = surface();
    let index = Index::new(&s);
    for text in [
        "open an issue on github",
        "zzqx list",
        "overwrite a file with new content",
        "report a bug",
    ] {
        let by = |part| {
            let query = Query {
                text,
                tags: &[],
                limit: 100,
                toolsets: &[],
                ..Default::default()
            };
            names(&index.search_by(part, &s, query, None, |_| true))
        };
        let (fused, lexical, semantic) = (by(Part::Fused), by(Part::Lexical), by(Part::Semantic));
        let either: BTreeSet<&String> = lexical.iter().chain(&semantic).collect();
        assert_eq!(fused.iter().collect::<BTreeSet<_>>(), either, "{text}");
        assert_eq!(fused.len(), either.len(), "{text}: each tool once");
        assert_eq!(by(Part::Fused), fused, "{text}: deterministic");
        if !lexical.is_empty() && lexical.first() == semantic.first() {
            assert_eq!(fused.first(), lexical.first(), "{text}");
        }
    }
}

/// A rebuild after a change gives the index a whole build gives (the same vectors, the same
/// ranking), reusing the vectors of the documents whose text did not change; a cancelled one
/// gives nothing.
#[test]
fn a_rebuild_reuses_unchanged_documents_and_can_be_cancelled() {
    let of = |description: &str| {
        let listing = Listing {
            server: sid("fs"),
            tools: vec![
                tool(
                    "read_text_file",
                    "Read the complete contents of a file as text.",
                    &["path"],
                ),
                tool("write_file", description, &["path", "content"]),
                tool(
                    "list_directory",
                    "List the entries of a directory.",
                    &["path"],
                ),
            ],
            prompts: Vec::new(),
            version: None,
        };
        build(&Rules::default(), &[&listing]).surface.unwrap()
    };
    let before = of("Create or overwrite a file with new content.");
    let after = of("Write text into a file, replacing what it held.");
    let first = Index::new(&before);
    let rebuilt = Index::rebuild(&after, Meaning::shipped(), None, Some(&first), &|| false)
        .expect("not cancelled");
    let whole = Index::new(&after);
    assert_eq!(rebuilt.vectors.flat(), whole.vectors.flat());
    assert_eq!(rebuilt.texts, whole.texts);
    let query = Query {
        text: "replace what a file holds",
        tags: &[],
        limit: 3,
        toolsets: &[],
        ..Default::default()
    };
    let ranked = |index: &Index| names(&index.search(&after, query, None, |_| true));
    assert_eq!(ranked(&rebuilt), ranked(&whole));
    assert!(
        Index::rebuild(&after, Meaning::shipped(), None, Some(&first), &|| true).is_none(),
        "cancelled"
    );
}

#[test]
fn a_request_that_names_a_server_finds_its_tools_first() {
    let listing = |server: &str, tools: Vec<Box<RawValue>>| Listing {
        server: sid(server),
        tools,
        prompts: vec![],
        version: None,
    };
    let listings = vec![
        listing(
            "archive",
            vec![tool(
                "read_lines",
                "Read the lines of a text file, from the first to the last.",
                &["path", "first", "last"],
            )],
        ),
        listing(
            "commander",
            vec![
                tool("read_file", "Read a file.", &["path"]),
                tool("start_process", "Start a program.", &["command"]),
            ],
        ),
    ];
    let built = build(&Rules::default(), &listings);
    let s = built.surface.expect("the surface");
    // The archive's tool says more of the request's words; the commander is the server named.
    // Its name is a word of its tools too, but one word among the request's: without the
    // server's own ranking, the archive's tool stays first (seen with the share at 0).
    assert_eq!(find(&s, "read the lines of a text file", 1), ["read_lines"]);
    assert_eq!(
        find(&s, "with commander, read the lines of a text file", 1),
        ["read_file"]
    );
}
