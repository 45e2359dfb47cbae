#![allow(
    clippy::too_many_lines,
    reason = "a test is one scenario, read from top to bottom"
)]
use proptest::prelude::*;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::io::Cursor;

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
            let query = Query { text: &t.name, tags: &[], limit: 3, toolsets: &[] };
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

/// The model `crates/surface/model/fetch.sh` puts in `$MONIKER_TEST_MODEL` (the test command
/// does), loaded once. Without it a model test is skipped, but never under `CI`.
fn test_model() -> Option<Meaning> {
    static MODEL: std::sync::OnceLock<Option<Meaning>> = std::sync::OnceLock::new();
    MODEL.get_or_init(|| model_of("MONIKER_TEST_MODEL")).clone()
}

/// all-mpnet-base-v2, from the folder `$MONIKER_TEST_MPNET` names (`fetch.sh DIR
/// all-mpnet-base-v2`; scripts/test sets it); `None` outside CI when it is not set.
fn test_mpnet() -> Option<Meaning> {
    static MODEL: std::sync::OnceLock<Option<Meaning>> = std::sync::OnceLock::new();
    MODEL.get_or_init(|| model_of("MONIKER_TEST_MPNET")).clone()
}

/// The model in the folder the variable `var` names.
fn model_of(var: &str) -> Option<Meaning> {
    let Some(dir) = std::env::var_os(var) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs the model's tests: set {var} (scripts/test does)"
        );
        eprintln!("{var} is not set: its model's tests are skipped");
        return None;
    };
    let dir = std::path::Path::new(&dir);
    let read = |name: &str| std::fs::read(dir.join(name)).expect(name);
    let weights = std::fs::File::open(dir.join("model.safetensors")).expect("model.safetensors");
    let encoder = Encoder::new(weights, &read("config.json"), &read("tokenizer.json"))
        .expect("the model loads");
    Some(Meaning::Encoder(std::sync::Arc::new(encoder)))
}

#[test]
fn with_the_model_a_request_sharing_no_word_with_its_tool_finds_it() {
    if let Some(model) = test_model() {
        no_shared_word(model);
    }
}

#[test]
fn with_mpnet_a_request_sharing_no_word_with_its_tool_finds_it() {
    if let Some(model) = test_mpnet() {
        no_shared_word(model);
    }
}

/// Requests that share no word with their tool find it in `model`'s first three, fused and
/// by meaning alone, and not by their words.
fn no_shared_word(model: Meaning) {
    let s = surface();
    let index = Index::build(&s, model, None);
    assert!(index.fell_back().is_none());
    for (request, tool) in [
        ("report a bug", "create_issue"),
        ("show me what is in this folder", "list_directory"),
        ("save some text to disk", "write_file"),
    ] {
        let query = Query {
            text: request,
            tags: &[],
            limit: 3,
            toolsets: &[],
        };
        let by_words = names(&index.search_by(Part::Lexical, &s, query, None, |_| true));
        assert!(
            !by_words.iter().any(|n| n == tool),
            "{request}: the words alone find it: {by_words:?}"
        );
        for part in [Part::Fused, Part::Semantic] {
            let found = names(&index.search_by(part, &s, query, None, |_| true));
            assert!(
                found.iter().any(|n| n == tool),
                "{request} ({part:?}): {found:?}"
            );
        }
    }
}

#[test]
fn the_models_index_read_from_the_cache_is_the_one_built_fresh() {
    #[derive(Default)]
    struct Counted(std::sync::Mutex<(std::collections::HashMap<String, Vec<u8>>, usize)>);
    impl Cache for Counted {
        fn load(&self, key: &str) -> Option<Vec<u8>> {
            let mut held = self.0.lock().unwrap();
            held.1 += 1;
            held.0.get(key).cloned()
        }
        fn save(&self, key: &str, bytes: &[u8]) {
            self.0
                .lock()
                .unwrap()
                .0
                .insert(key.to_owned(), bytes.to_vec());
        }
    }
    let Some(model) = test_model() else { return };
    let s = surface();
    let cache = Counted::default();
    let fresh = Index::build(&s, model.clone(), Some(&cache));
    assert_eq!(cache.0.lock().unwrap().0.len(), 1, "the build is saved");
    let cached = Index::build(&s, model.clone(), Some(&cache));
    assert_eq!(
        cache.0.lock().unwrap().1,
        2,
        "the second build reads the cache"
    );
    assert_eq!(fresh.vectors.flat(), cached.vectors.flat());
    assert!(matches!(cached.meaning(), Meaning::Encoder(_)));
    for text in ["report a bug", "read a file", "graph"] {
        let query = Query {
            text,
            tags: &[],
            limit: 9,
            toolsets: &[],
        };
        assert_eq!(
            names(&fresh.search(&s, query, None, |_| true)),
            names(&cached.search(&s, query, None, |_| true)),
        );
    }
    // The table's index of the same surface is another one: not read for the model's.
    let table = Index::build(&s, Meaning::shipped(), Some(&cache));
    assert_eq!(cache.0.lock().unwrap().0.len(), 2);
    assert_ne!(table.vectors.flat().len(), fresh.vectors.flat().len());
}

/// A BERT of width 4, one layer, one head and a vocabulary of `[CLS]`, `[SEP]` and `a`, as
/// `model.safetensors`, its `config.json` and its `tokenizer.json`; `wrong` names a tensor
/// given one column too many.
fn tiny_bert(wrong: Option<&str>) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    tiny_model(false, wrong, 0.0, 1.0)
}

/// [`tiny_bert`], or as an MPNet (`mpnet`: its names, `<s>` and `</s>`, no segments, its
/// buckets of relative positions, each `relative` apart: 0 gives none), its word vectors
/// times `words`.
fn tiny_model(
    mpnet: bool,
    wrong: Option<&str>,
    relative: f32,
    words: f32,
) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let (attention, attended, attended_norm) = if mpnet {
        (
            ["q", "k", "v"].map(|p| format!("attention.attn.{p}")),
            "attention.attn.o",
            "attention.LayerNorm",
        )
    } else {
        (
            ["query", "key", "value"].map(|p| format!("attention.self.{p}")),
            "attention.output.dense",
            "attention.output.LayerNorm",
        )
    };
    let mut shapes: Vec<(String, Vec<usize>)> = vec![
        ("embeddings.word_embeddings.weight".into(), vec![3, 4]),
        ("embeddings.position_embeddings.weight".into(), vec![130, 4]),
    ];
    if mpnet {
        shapes.push(("encoder.relative_attention_bias.weight".into(), vec![32, 1]));
    } else {
        shapes.push(("embeddings.token_type_embeddings.weight".into(), vec![2, 4]));
    }
    for norm in [
        "embeddings.LayerNorm".to_owned(),
        format!("encoder.layer.0.{attended_norm}"),
        "encoder.layer.0.output.LayerNorm".to_owned(),
    ] {
        shapes.push((format!("{norm}.weight"), vec![4]));
        shapes.push((format!("{norm}.bias"), vec![4]));
    }
    let denses = attention.iter().map(String::as_str).chain([
        attended,
        "intermediate.dense",
        "output.dense",
    ]);
    for dense in denses {
        shapes.push((format!("encoder.layer.0.{dense}.weight"), vec![4, 4]));
        shapes.push((format!("encoder.layer.0.{dense}.bias"), vec![4]));
    }
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = shapes
        .into_iter()
        .map(|(name, mut shape)| {
            if wrong == Some(name.as_str()) {
                *shape.last_mut().expect("a shape") += 1;
            }
            let count: usize = shape.iter().product();
            let value = |i: usize| match name.as_str() {
                n if n.contains("relative") => i as f32 * relative,
                n if n.contains("word_embeddings") => ((i % 7) as f32 / 7.0 - 0.4) * words,
                _ => (i % 7) as f32 / 7.0 - 0.4,
            };
            let values: Vec<u8> = (0..count).flat_map(|i| value(i).to_le_bytes()).collect();
            (name, shape, values)
        })
        .collect();
    let views = bytes.iter().map(|(name, shape, data)| {
        let view =
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), data)
                .expect("a tensor");
        (name.clone(), view)
    });
    let weights = safetensors::serialize(views, None).expect("serialised");
    let (config, tokenizer): (&[u8], &[u8]) = if mpnet {
        (
            br#"{"model_type": "mpnet", "vocab_size": 3, "hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 4, "hidden_act": "gelu", "max_position_embeddings": 130, "relative_attention_num_buckets": 32, "layer_norm_eps": 1e-5}"#,
            br#"{"model": {"vocab": {"<s>": 0, "</s>": 1, "a": 2}}}"#,
        )
    } else {
        (
            br#"{"vocab_size": 3, "hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 4, "hidden_act": "gelu", "max_position_embeddings": 130, "type_vocab_size": 2, "layer_norm_eps": 1e-12}"#,
            br#"{"model": {"vocab": {"[CLS]": 0, "[SEP]": 1, "a": 2}}}"#,
        )
    };
    (weights, config.to_vec(), tokenizer.to_vec())
}

/// MPNet's pass runs: its own names and frame, and its bias by relative position counts (the
/// same weights with a bias give another vector); a BERT's files are not an MPNet's.
#[test]
fn a_small_mpnet_runs_and_its_relative_bias_counts() {
    let vector = |relative: f32| {
        let (weights, config, tokenizer) = tiny_model(true, None, relative, 1.0);
        let encoder = Encoder::new(Cursor::new(weights), &config, &tokenizer).expect("it loads");
        encoder.embed("a a a a").expect("a known word")
    };
    let (plain, biased) = (vector(0.0), vector(0.5));
    for v in [&plain, &biased] {
        let norm: f32 = v.iter().map(|x| x * x).sum();
        assert!(
            (norm - 1.0).abs() < 1e-5 && v.iter().all(|x| x.is_finite()),
            "{v:?}"
        );
    }
    assert!(
        plain.iter().zip(&biased).any(|(a, b)| (a - b).abs() > 1e-4),
        "{plain:?} {biased:?}"
    );
    let refused = |(weights, config, tokenizer): (Vec<u8>, Vec<u8>, Vec<u8>)| {
        Encoder::new(Cursor::new(weights), &config, &tokenizer)
            .expect_err("refused")
            .to_string()
    };
    let bias = Some("encoder.relative_attention_bias.weight");
    let why = refused(tiny_model(true, bias, 0.5, 1.0));
    assert!(why.contains("relative_attention_bias"), "{why}");
    let (bert, mpnet) = (
        tiny_model(false, None, 0.0, 1.0),
        tiny_model(true, None, 0.0, 1.0),
    );
    // BERT's tensors under MPNet's config; then BERT's vocabulary, which has no `<s>`.
    let why = refused((bert.0.clone(), mpnet.1.clone(), mpnet.2));
    assert!(why.contains("no tensor"), "{why}");
    let why = refused((bert.0, mpnet.1, bert.2));
    assert!(why.contains("<s>"), "{why}");
}

#[test]
fn a_small_bert_runs_and_a_tensor_of_the_wrong_shape_is_refused() {
    let (weights, config, tokenizer) = tiny_bert(None);
    let encoder = Encoder::new(Cursor::new(weights), &config, &tokenizer).expect("it loads");
    let vector = encoder.embed("a a").expect("a known word");
    assert_eq!(vector.len(), 4);
    let norm: f32 = vector.iter().map(|v| v * v).sum();
    assert!(
        (norm - 1.0).abs() < 1e-5 && vector.iter().all(|v| v.is_finite()),
        "{vector:?}"
    );
    assert_eq!(encoder.embed("\u{2603}"), None);
    for wrong in [
        "embeddings.word_embeddings.weight",
        "embeddings.position_embeddings.weight",
        "encoder.layer.0.attention.self.value.weight",
        "encoder.layer.0.output.LayerNorm.bias",
    ] {
        let (weights, config, tokenizer) = tiny_bert(Some(wrong));
        let why = Encoder::new(Cursor::new(weights), &config, &tokenizer)
            .expect_err(wrong)
            .to_string();
        assert!(why.contains(wrong) && why.contains("not"), "{wrong}: {why}");
    }
}

/// Weights that overflow give a text no vector (not one of NaNs that would rank every tool
/// alike), alone or among others.
#[test]
fn a_model_that_overflows_gives_no_vector() {
    let (weights, config, tokenizer) = tiny_model(false, None, 0.0, f32::MAX);
    let encoder = Encoder::new(Cursor::new(weights), &config, &tokenizer).expect("it loads");
    assert_eq!(encoder.embed("a a"), None);
    assert_eq!(
        encoder.embed_all(&["a", "a a"]).expect("it runs"),
        [None, None]
    );
}

/// The weights are read a tensor at a time, so the file's length is checked against its
/// header: a file cut short, or with bytes after its last tensor, is not the model.
#[test]
fn a_weights_file_of_another_length_is_refused() {
    let (weights, config, tokenizer) = tiny_model(false, None, 0.0, 1.0);
    let load = |weights: &[u8]| Encoder::new(Cursor::new(weights), &config, &tokenizer);
    load(&weights).expect("it loads whole");
    for wrong in [
        &weights[..weights.len() - 1],
        &[&weights[..], b"!"].concat(),
    ] {
        let why = load(wrong).expect_err("refused").to_string();
        assert!(why.contains("not the") && why.contains("header"), "{why}");
    }
    let why = load(&weights[..4]).expect_err("refused").to_string();
    assert!(why.contains("model.safetensors"), "{why}");
}

#[test]
fn a_model_whose_files_are_not_one_is_refused() {
    let tokenizer = br#"{"model": {"vocab": {"[CLS]": 0, "[SEP]": 1, "a": 2}}}"#;
    let config = br#"{"vocab_size": 3, "hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 4, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "max_position_embeddings": 8, "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0}"#;
    let refused = |weights: &[u8], config: &[u8], tokenizer: &[u8]| {
        Encoder::new(Cursor::new(weights), config, tokenizer).expect_err("refused")
    };
    assert!(
        refused(b"not safetensors", config, tokenizer)
            .to_string()
            .contains("model.safetensors")
    );
    assert!(
        refused(b"", b"{}", tokenizer)
            .to_string()
            .contains("config.json")
    );
    assert!(
        refused(b"", config, b"[]")
            .to_string()
            .contains("tokenizer.json")
    );
    let wider = br#"{"model": {"vocab": {"[CLS]": 0, "[SEP]": 1, "a": 2, "b": 3}}}"#;
    assert!(
        refused(b"", config, wider)
            .to_string()
            .contains("more word pieces than the model")
    );
    let empty = String::from_utf8_lossy(config).replace("\"hidden_size\": 4", "\"hidden_size\": 0");
    assert!(
        refused(b"", empty.as_bytes(), tokenizer)
            .to_string()
            .contains("a width or the vocabulary is 0")
    );
    let roberta = String::from_utf8_lossy(config).replace("{", "{\"model_type\": \"roberta\", ");
    assert!(
        refused(b"", roberta.as_bytes(), tokenizer)
            .to_string()
            .contains("a model of type roberta, not BERT's or MPNet's")
    );
    let relu = String::from_utf8_lossy(config).replace("\"gelu\"", "\"relu\"");
    assert!(
        refused(b"", relu.as_bytes(), tokenizer)
            .to_string()
            .contains("not BERT's gelu")
    );
}

/// The encoder of [`test_model`].
fn test_encoder() -> Option<std::sync::Arc<Encoder>> {
    match test_model()? {
        Meaning::Encoder(encoder) => Some(encoder),
        Meaning::Table(_) => None,
    }
}

#[test]
fn the_models_pass_gives_the_vectors_of_the_pass_it_replaced() {
    let Some(encoder) = test_encoder() else {
        return;
    };
    // The first twelve values of each text's vector as candle-transformers' `BertModel`
    // (0.11, 32-bit floats, the same word pieces) gave them, when moniker ran it.
    let reference: [(&str, [f32; 12]); 2] = [
        (
            "find files modified last week",
            [
                0.00097, 0.03276, 0.02544, -0.00687, 0.07553, 0.03759, -0.00188, -0.00222,
                -0.01709, 0.04547, -0.00281, 0.05453,
            ],
        ),
        (
            "a tool that lists the files in a folder and tells their sizes, owners and when they changed last",
            [
                -0.01350, 0.07125, -0.06031, 0.04956, 0.06233, -0.01602, 0.07765, 0.03101,
                -0.05638, 0.00205, 0.05060, 0.03062,
            ],
        ),
    ];
    for (text, expected) in reference {
        let vector = encoder.embed(text).expect("known words");
        assert_eq!(vector.len(), 384);
        for (got, want) in vector.iter().zip(expected) {
            // Within 2e-5 of candle's when the weights were 32-bit floats; at eight bits a
            // weight, within 2.6e-3 (a value is about 0.05; the 24 differences' root mean
            // square is 1.1e-3).
            assert!((got - want).abs() < 5e-3, "{text}: {got} against {want}");
        }
    }
}

#[test]
fn with_the_model_a_text_has_one_vector_alone_or_among_many() {
    let Some(encoder) = test_encoder() else {
        return;
    };
    // Enough word pieces for several groups, so several threads run them.
    let texts: Vec<String> = (0..120)
        .map(|i| match i % 3 {
            0 => format!("read file number {i}"),
            1 => "list the issues of a repository, with their labels, authors and states, "
                .repeat(1 + i % 7),
            // No letter or digit: no word piece, no vector.
            _ => "\u{2603} \u{2603} \u{2603}".to_owned(),
        })
        .collect();
    let together = encoder.embed_all(&texts).expect("runs");
    for (text, vector) in texts.iter().zip(&together) {
        let alone = encoder.embed(text);
        match (vector, alone) {
            (Some(vector), Some(alone)) => {
                let gap = vector.iter().zip(&alone).map(|(a, b)| (a - b).abs());
                assert!(gap.fold(0.0, f32::max) < 1e-5, "{text}");
            }
            (vector, alone) => assert_eq!(vector.is_some(), alone.is_some(), "{text}"),
        }
    }
    assert_eq!(together.iter().filter(|v| v.is_some()).count(), 80);
}

#[test]
fn with_the_model_the_bound_holds_in_every_ranking() {
    let Some(model) = test_model() else { return };
    let s = surface();
    let index = Index::build(&s, model, None);
    let in_fs = |e: &Exposed| e.origin().is_some_and(|o| o.server.as_str() == "fs");
    for part in [Part::Fused, Part::Lexical, Part::Semantic] {
        for text in [
            "create a new issue",
            "write",
            "knowledge graph",
            "report a bug",
        ] {
            let query = Query {
                text,
                tags: &[],
                limit: 9,
                toolsets: &[],
            };
            let exact = s.resolve(Kind::Tool, text).map(|r| r.exposed);
            for found in index.search_by(part, &s, query, exact, in_fs) {
                assert!(in_fs(found), "{text} ({part:?}): {} is outside", found.name);
            }
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
    };
    let ranked = |index: &Index| names(&index.search(&after, query, None, |_| true));
    assert_eq!(ranked(&rebuilt), ranked(&whole));
    assert!(
        Index::rebuild(&after, Meaning::shipped(), None, Some(&first), &|| true).is_none(),
        "cancelled"
    );
}
