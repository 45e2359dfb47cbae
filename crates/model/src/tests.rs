//! The model run whole, on its own (a small BERT and MPNet made here, and all-MiniLM-L6-v2 and
//! all-mpnet-base-v2 where the test command fetched them) and as search's meaning, ranking a
//! surface of three servers.

use std::io::Cursor;
use std::sync::{Arc, OnceLock};

use moniker_surface::search::{Cache, Encode, Index, Meaning, Part, Query};
use moniker_surface::{Exposed, Kind, Listing, Rules, ServerId, Surface, build};
use serde_json::{Value, json};

use super::Encoder;

/// A tool of `name`, its `description` and string parameters `params`.
fn tool(name: &str, description: &str, params: &[&str]) -> Box<serde_json::value::RawValue> {
    let properties: serde_json::Map<String, Value> = params
        .iter()
        .map(|p| ((*p).to_owned(), json!({"type": "string"})))
        .collect();
    let text = json!({"name": name, "description": description, "inputSchema": {"type": "object", "properties": properties}});
    serde_json::value::RawValue::from_string(text.to_string()).expect("a tool")
}

/// Three servers' tools, as their own descriptions put them: `fs` (files), `gh` (issues and
/// pull requests), `mem` (a knowledge graph).
fn surface() -> Surface {
    let listing = |server: &str, tools: Vec<Box<serde_json::value::RawValue>>| Listing {
        server: server.parse::<ServerId>().expect("an id"),
        tools,
        prompts: Vec::new(),
        version: None,
    };
    let fs = listing(
        "fs",
        vec![
            tool(
                "read_text_file",
                "Read the complete contents of a file as text.",
                &["path"],
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
    );
    let gh = listing(
        "gh",
        vec![
            tool(
                "create_issue",
                "Create a new issue in a GitHub repository.",
                &["owner", "repo", "title"],
            ),
            tool(
                "list_issues",
                "List issues in a GitHub repository with filtering options.",
                &["owner", "repo"],
            ),
            tool(
                "get_pull_request",
                "Get details of a specific pull request.",
                &["owner", "repo", "pull_number"],
            ),
        ],
    );
    let mem = listing(
        "mem",
        vec![
            tool(
                "create_entities",
                "Create multiple new entities in the knowledge graph.",
                &["entities"],
            ),
            tool(
                "search_nodes",
                "Search for nodes in the knowledge graph based on a query.",
                &["query"],
            ),
        ],
    );
    build(&Rules::default(), &[&fs, &gh, &mem])
        .surface
        .expect("the names fit")
}

fn names(found: &[&Exposed]) -> Vec<String> {
    found.iter().map(|e| e.name.to_string()).collect()
}

/// The model `crates/surface/model/fetch.sh` puts in `$MONIKER_TEST_MODEL` (the test command
/// does), loaded once. Without it a model test is skipped, but never under `CI`.
fn test_model() -> Option<Meaning> {
    static MODEL: OnceLock<Option<Meaning>> = OnceLock::new();
    MODEL.get_or_init(|| model_of("MONIKER_TEST_MODEL")).clone()
}

/// all-mpnet-base-v2, from the folder `$MONIKER_TEST_MPNET` names (`fetch.sh DIR
/// all-mpnet-base-v2`; scripts/test sets it); `None` outside CI when it is not set.
fn test_mpnet() -> Option<Meaning> {
    static MODEL: OnceLock<Option<Meaning>> = OnceLock::new();
    MODEL.get_or_init(|| model_of("MONIKER_TEST_MPNET")).clone()
}

/// The model in the folder the variable `var` names, as search's meaning.
fn model_of(var: &str) -> Option<Meaning> {
    let encoder: Arc<dyn Encode> = encoder_of(var)?;
    Some(Meaning::Encoder(encoder))
}

/// The encoder in the folder the variable `var` names.
fn encoder_of(var: &str) -> Option<Arc<Encoder>> {
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
    Some(Arc::new(encoder))
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
            ..Default::default()
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
    assert_eq!(fresh.vectors().flat(), cached.vectors().flat());
    assert!(matches!(cached.meaning(), Meaning::Encoder(_)));
    for text in ["report a bug", "read a file", "graph"] {
        let query = Query {
            text,
            tags: &[],
            limit: 9,
            toolsets: &[],
            ..Default::default()
        };
        assert_eq!(
            names(&fresh.search(&s, query, None, |_| true)),
            names(&cached.search(&s, query, None, |_| true)),
        );
    }
    // The table's index of the same surface is another one: not read for the model's.
    let table = Index::build(&s, Meaning::shipped(), Some(&cache));
    assert_eq!(cache.0.lock().unwrap().0.len(), 2);
    assert_ne!(table.vectors().flat().len(), fresh.vectors().flat().len());
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

/// The encoder of [`test_model`], loaded once.
fn test_encoder() -> Option<Arc<Encoder>> {
    static ENCODER: OnceLock<Option<Arc<Encoder>>> = OnceLock::new();
    ENCODER
        .get_or_init(|| encoder_of("MONIKER_TEST_MODEL"))
        .clone()
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
                ..Default::default()
            };
            let exact = s.resolve(Kind::Tool, text).map(|r| r.exposed);
            for found in index.search_by(part, &s, query, exact, in_fs) {
                assert!(in_fs(found), "{text} ({part:?}): {} is outside", found.name);
            }
        }
    }
}

/// The weights at eight bits a value (what the packages carry) give the vectors the floats give,
/// for BERT and MPNet; a matrix at eight bits without its scales is refused, by name.
#[test]
fn weights_at_eight_bits_give_the_same_vectors() {
    for mpnet in [false, true] {
        let (weights, config, tokenizer) = tiny_model(mpnet, None, 0.1, 1.0);
        let eight = crate::eight_bit_file(&weights).expect("converted");
        let floats = Encoder::new(Cursor::new(weights), &config, &tokenizer).expect("floats");
        let bytes = Encoder::new(Cursor::new(eight.clone()), &config, &tokenizer).expect("bytes");
        let (a, b) = (
            floats.embed("a a a").expect("a"),
            bytes.embed("a a a").expect("a"),
        );
        let cosine: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!(cosine > 0.999, "{cosine}");
        assert_ne!(floats.fingerprint(), bytes.fingerprint());
        // A file at eight bits already stays as it is.
        assert_eq!(crate::eight_bit_file(&eight).expect("again"), eight);
    }
    let (weights, config, tokenizer) = tiny_bert(None);
    let eight = crate::eight_bit_file(&weights).expect("converted");
    let read = safetensors::SafeTensors::deserialize(&eight).expect("safetensors");
    let kept: Vec<(String, safetensors::tensor::TensorView<'_>)> = read
        .tensors()
        .into_iter()
        .filter(|(name, _)| !name.ends_with("query.weight.scale"))
        .collect();
    let unscaled = safetensors::serialize(kept, None).expect("serialised");
    let why = Encoder::new(Cursor::new(unscaled), &config, &tokenizer)
        .expect_err("no scales")
        .to_string();
    assert!(why.contains("query.weight.scale"), "{why}");
}
