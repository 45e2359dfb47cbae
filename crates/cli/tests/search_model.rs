//! `discovery.model` over a real `moniker serve` in search mode: a model's folder is run whole
//! (`$MONIKER_TEST_MODEL`, which the test command fetches), and one that is missing or not a
//! model gives way to the shipped table, with a warning, while search goes on working.

use std::path::Path;

use moniker_fixture::{Peer, fixture_file, fixture_server, scratch, serve};
use serde_json::json;

fn moniker() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_moniker"))
}

/// `moniker serve` in search mode over the ContextGraph fixture, its model `model`.
fn searching(model: &Path) -> Peer {
    let contextgraph = fixture_file("contextgraph.json").display().to_string();
    let rest = format!(
        "discovery: {{ mode: search, model: {} }}\n",
        json!(model.display().to_string())
    );
    serve(
        moniker(),
        &[fixture_server("contextgraph", &[&contextgraph])],
        &rest,
    )
}

/// The tools `search_tools` finds for `query`, best first.
fn found(peer: &mut Peer, query: &str) -> Vec<String> {
    let response = peer.call_tool("search_tools", json!({"query": query, "limit": 5}));
    let text = response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {response}"));
    // A compact line each: `- name(parameters) [server]: what it does`.
    text.lines()
        .filter_map(|l| l.strip_prefix("- "))
        .map(|l| l.split('(').next().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_missing_or_broken_model_gives_way_to_the_table_with_a_warning() {
    let broken = scratch().join("broken-model");
    std::fs::create_dir_all(&broken).expect("dir");
    for name in ["model.safetensors", "config.json", "tokenizer.json"] {
        std::fs::write(broken.join(name), b"not a model").expect("write");
    }
    for model in [scratch().join("no-such-model"), broken] {
        let mut peer = searching(&model);
        peer.stderr_with(|l| {
            l.contains("WARN")
                && l.contains("discovery.model")
                && l.contains("the table moniker ships")
        });
        let tools = found(&mut peer, "store a memory");
        assert!(tools.iter().any(|t| t == "store_memory"), "{tools:?}");
    }
}

#[test]
fn a_models_folder_is_run_whole() {
    let Some(dir) = std::env::var_os("MONIKER_TEST_MODEL") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs the model's tests: set MONIKER_TEST_MODEL (scripts/test does)"
        );
        return;
    };
    let mut peer = searching(Path::new(&dir));
    let tools = found(&mut peer, "keep this in mind for later");
    assert!(tools.iter().any(|t| t == "store_memory"), "{tools:?}");
    peer.stderr_with(|l| l.contains("search model loaded"));
    assert!(!peer.stderr_with(|_| true).contains("WARN"), "no fallback");
}
