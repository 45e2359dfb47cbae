//! Search mode through a gateway and a fixture server: the listing holds the pinned tools and
//! moniker's `search_tools` and `call_tool`; a search finds a tool by what it does; a found
//! tool is called through `call_tool` by name or alias, exactly as a direct call; a toolset's
//! boundary holds through both.

use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use moniker_fixture::{fixture_bin, fixture_file};
use moniker_gateway::connect::ServerSpec;
use moniker_gateway::session::Session;
use moniker_gateway::{Gateway, ServerEntry, Settings};
use moniker_surface::discovery::{Discovery, Mode};
use moniker_surface::{AliasRule, Override, Rules, ToolsetRule};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::support::Reply as _;

async fn gateway() -> Arc<Gateway> {
    gateway_with(Settings::default()).await
}

async fn gateway_with(settings: Settings) -> Arc<Gateway> {
    let entry = ServerEntry {
        id: "cg".parse().expect("id"),
        spec: ServerSpec::Stdio {
            command: fixture_bin().display().to_string(),
            args: vec![fixture_file("contextgraph.json").display().to_string()],
            env: IndexMap::new(),
            pass_env: moniker_config::PassEnv::default(),
            cwd: None,
        },
        modern: false,
        sandbox: None,
        per_person: None,
    };
    let mut rules = Rules {
        discovery: Discovery {
            mode: Mode::Search,
            pin: vec!["store_memory".into()],
            pin_tags: None,
        },
        ..Rules::default()
    };
    rules.tools.insert(
        "trigger_dream".into(),
        Override {
            aliases: vec![AliasRule {
                name: "dream".parse().expect("alias"),
                hidden: true,
                deprecated: None,
            }],
            ..Override::default()
        },
    );
    rules.toolsets.sets.insert(
        "sleep".into(),
        ToolsetRule {
            tools: vec![
                "trigger_dream".into(),
                "get_dream_status".into(),
                "abort_dream".into(),
            ],
            ..ToolsetRule::default()
        },
    );
    rules.toolsets.sets.insert(
        "zenith".into(),
        ToolsetRule {
            tools: vec!["store_memory".into(), "get_dream_status".into()],
            ..ToolsetRule::default()
        },
    );
    rules.toolsets.sets.insert(
        "listed".into(),
        ToolsetRule {
            tools: vec!["trigger_dream".into(), "store_memory".into()],
            discovery: Some(Discovery::default()),
            ..ToolsetRule::default()
        },
    );
    let started = tokio::time::timeout(
        Duration::from_secs(20),
        Gateway::start(rules, vec![entry], settings),
    );
    match started.await {
        Ok(Ok(gateway)) => gateway,
        _ => panic!("the gateway did not start"),
    }
}

async fn ask(session: &Arc<Session>, method: &str, params: Value) -> Value {
    let line = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let reply = tokio::time::timeout(Duration::from_secs(20), session.reply(&line))
        .await
        .expect("answered")
        .expect("a reply");
    serde_json::from_str(&reply).expect("JSON")
}

fn listed(reply: &Value) -> Vec<String> {
    reply["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// `search_tools`' result as `{"tools": [...]}`: for a tool's exact name, its full definition
/// (and the listing's `_meta`); else each compact line's name.
async fn search_result(session: &Arc<Session>, arguments: Value) -> Value {
    let reply = ask(
        session,
        "tools/call",
        json!({"name": "search_tools", "arguments": arguments}),
    )
    .await;
    let result = &reply["result"];
    assert_eq!(result["isError"], Value::Null, "{reply}");
    let text = result["content"][0]["text"].as_str().expect("text");
    if let Ok(named) = serde_json::from_str::<Value>(text) {
        // A tool's exact name: its full definition, in the text as in the structured result.
        assert_eq!(named, result["structuredContent"]);
        return named;
    }
    assert_eq!(result["structuredContent"], Value::Null, "{reply}");
    let names: Vec<Value> = compact_names(text)
        .into_iter()
        .map(|name| json!({"name": name}))
        .collect();
    json!({ "tools": names })
}

/// The names of a compact answer's lines (`- name(parameters) [server]: ...`), in order.
fn compact_names(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("- "))
        .map(|l| l.split('(').next().unwrap_or_default().to_owned())
        .collect()
}

async fn search(session: &Arc<Session>, arguments: Value) -> Vec<String> {
    listed(&json!({"result": search_result(session, arguments).await}))
}

#[tokio::test]
async fn search_mode_lists_pins_finds_tools_and_calls_them_like_direct_calls() {
    let gateway = gateway().await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let session = Session::new(gateway.clone(), tx);

    let list = ask(&session, "tools/list", json!({})).await;
    assert_eq!(listed(&list), ["store_memory", "search_tools", "call_tool"]);
    // One server: the listing says it once, as it lists one of its tools (the pinned one).
    assert_eq!(list["result"]["_meta"], json!({"io.moniker/server": "cg"}));
    let found = search_result(&session, json!({"query": "dream"})).await;
    assert_eq!(
        found["_meta"],
        json!({"io.moniker/server": "cg"}),
        "{found}"
    );

    let found = search(
        &session,
        json!({"query": "start an offline consolidation dream cycle", "limit": 3}),
    )
    .await;
    assert_eq!(found.len(), 3, "{found:?}");
    assert_eq!(found[0], "trigger_dream", "{found:?}");
    // A hidden alias finds its tool, shown by its name.
    assert_eq!(
        search(&session, json!({"query": "dream", "limit": 1})).await,
        ["trigger_dream"]
    );
    // A query with no word to read finds nothing (an empty list, not an error).
    assert!(
        search(&session, json!({"query": "?! ..."}))
            .await
            .is_empty()
    );

    for name in ["trigger_dream", "dream"] {
        let reply = ask(
            &session,
            "tools/call",
            json!({"name": "call_tool", "arguments": {"name": name, "arguments": {"depth": 2}}}),
        )
        .await;
        let text = reply["result"]["content"][0]["text"]
            .as_str()
            .expect("text");
        assert_eq!(
            text,
            r#"{"tool":"trigger_dream","arguments":{"depth": 2}}"#.replace(": 2", ":2"),
            "{reply}"
        );
    }
    // A direct call of a tool that is not listed is still a call.
    let reply = ask(
        &session,
        "tools/call",
        json!({"name": "get_dream_status", "arguments": {}}),
    )
    .await;
    assert!(
        reply["result"]["content"][0]["text"]
            .as_str()
            .expect("text")
            .contains("get_dream_status")
    );

    let unknown = ask(
        &session,
        "tools/call",
        json!({"name": "call_tool", "arguments": {"name": "no_such_tool"}}),
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32004, "{unknown}");
    let bad = ask(
        &session,
        "tools/call",
        json!({"name": "call_tool", "arguments": {"arguments": {}}}),
    )
    .await;
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    let bad = ask(
        &session,
        "tools/call",
        json!({"name": "search_tools", "arguments": {"query": "x", "tags": ["Not A Tag"]}}),
    )
    .await;
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_toolsets_boundary_holds_through_search_and_call_tool() {
    let gateway = gateway().await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let session = Session::bound(gateway.clone(), tx, "sleep".into());

    let list = ask(&session, "tools/list", json!({})).await;
    assert_eq!(
        listed(&list),
        ["search_tools", "call_tool"],
        "nothing of the toolset is pinned"
    );
    // moniker's own tools alone: no server of the surface to say.
    assert_eq!(list["result"].get("_meta"), None, "{list}");
    let found = search(
        &session,
        json!({"query": "memory dream status", "limit": 50}),
    )
    .await;
    assert!(!found.is_empty());
    for name in &found {
        assert!(
            ["trigger_dream", "get_dream_status", "abort_dream"].contains(&name.as_str()),
            "{found:?}"
        );
    }
    assert!(
        search(&session, json!({"query": "store_memory"}))
            .await
            .is_empty(),
        "outside the toolset"
    );
    let refused = ask(
        &session,
        "tools/call",
        json!({"name": "call_tool", "arguments": {"name": "store_memory", "arguments": {}}}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32004, "{refused}");
    let reply = ask(
        &session,
        "tools/call",
        json!({"name": "call_tool", "arguments": {"name": "abort_dream"}}),
    )
    .await;
    assert!(
        reply["result"]["content"][0]["text"]
            .as_str()
            .expect("text")
            .contains("abort_dream"),
        "{reply}"
    );

    // A toolset that says `list` lists its tools, and has no search tools.
    let (tx, _rx) = mpsc::unbounded_channel();
    let session = Session::bound(gateway.clone(), tx, "listed".into());
    let list = ask(&session, "tools/list", json!({})).await;
    assert_eq!(listed(&list), ["store_memory", "trigger_dream"]);
    assert_eq!(list["result"]["_meta"], json!({"io.moniker/server": "cg"}));
    let refused = ask(
        &session,
        "tools/call",
        json!({"name": "search_tools", "arguments": {"query": "dream"}}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32004, "{refused}");
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_toolset_named_in_a_search_ranks_its_tools_higher() {
    let gateway = gateway().await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let session = Session::new(gateway.clone(), tx);
    let sorted = |mut found: Vec<String>| {
        found.sort();
        found
    };
    // The config's toolset `zenith` holds `get_dream_status` and `store_memory`; no tool
    // says the word.
    let theirs = ["get_dream_status", "store_memory"];
    let found = search(&session, json!({"query": "apex", "limit": 2})).await;
    assert_ne!(sorted(found.clone()), theirs, "{found:?}");
    let found = search(&session, json!({"query": "zenith", "limit": 2})).await;
    assert_eq!(sorted(found.clone()), theirs, "{found:?}");

    // A session with a toolset is told nothing of the others: naming one finds nothing.
    let (tx, _rx) = mpsc::unbounded_channel();
    let bound = Session::bound(gateway.clone(), tx, "sleep".into());
    // (Named, `zenith` would bring its `get_dream_status`, which `sleep` has too.)
    let found = search(&bound, json!({"query": "zenith", "limit": 3})).await;
    assert!(found.is_empty(), "{found:?}");
    gateway.shutdown().await;
}

/// A table in moniker's format (`model/distill.py`): `tokens`, each with its vector.
fn table(tokens: &[(&str, [i8; 2])]) -> Vec<u8> {
    let mut out = b"moniker-static-embeddings 1\n".to_vec();
    out.extend(2u32.to_le_bytes());
    out.extend((tokens.len() as u32).to_le_bytes());
    for _ in tokens {
        out.extend(1.0f32.to_le_bytes());
    }
    for (_, v) in tokens {
        out.extend(v.iter().map(|x| x.to_le_bytes()[0]));
    }
    for (token, _) in tokens {
        out.extend(token.as_bytes());
        out.push(b'\n');
    }
    out
}

/// `discovery.model`: the index is built with the table the settings give. In this one
/// "zebra" means what "dream" means, so a query no word of which a tool has finds the
/// dream tools; with the shipped table the same query finds others.
#[tokio::test]
async fn a_configured_model_is_the_one_search_uses() {
    let model = moniker_surface::search::Model::parse(std::borrow::Cow::Owned(table(&[
        ("zebra", [100, 0]),
        ("dream", [100, 0]),
        ("memory", [0, 100]),
    ])))
    .expect("a table");
    let configured = gateway_with(Settings {
        search_model: Some(moniker_surface::search::Meaning::Table(Arc::new(model))),
        ..Settings::default()
    })
    .await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let session = Session::new(configured.clone(), tx);
    let found = search(&session, json!({"query": "zebra", "limit": 10})).await;
    assert!(found.contains(&"trigger_dream".to_owned()), "{found:?}");
    assert!(found.iter().all(|n| n.contains("dream")), "{found:?}");
    configured.shutdown().await;

    let shipped = gateway().await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let session = Session::new(shipped.clone(), tx);
    let elsewhere = search(&session, json!({"query": "zebra", "limit": 10})).await;
    assert!(
        !elsewhere.iter().any(|n| n.contains("dream")),
        "the shipped table found what the configured one did: {elsewhere:?}"
    );
    shipped.shutdown().await;
}

/// The files of a cache directory that hold indexes, each with when it was made (its birth
/// time; `None` where the file system keeps none): a file written again is a new file.
fn cached(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Option<std::time::SystemTime>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "index"))
                .map(|p| {
                    let made = std::fs::metadata(&p).and_then(|m| m.created()).ok();
                    (p, made)
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// The index is built off the request path (the gateway builds it once its surface is there,
/// before any search) and kept on disk: a restart with the same surface and table reads it
/// instead of building it; a file that is not whole is built again and written anew.
#[tokio::test]
async fn the_index_is_built_ahead_and_a_restart_reads_it_from_the_cache() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let cache = dir.path().join("search");
    let settings = || Settings {
        search_cache: Some(cache.clone()),
        search_ahead: true,
        ..Settings::default()
    };
    let first = gateway_with(settings()).await;
    // No search yet: the index is built on a thread of its own, and saved.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while cached(&cache).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no index was built ahead"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (tx, _rx) = mpsc::unbounded_channel();
    let session = Session::new(first.clone(), tx);
    let query = json!({"query": "start an offline consolidation dream cycle", "limit": 3});
    let found = search(&session, query.clone()).await;
    first.shutdown().await;
    let saved = cached(&cache);
    assert_eq!(saved.len(), 1, "{saved:?}");
    let path = saved[0].0.clone();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("file").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let bytes = std::fs::read(&path).expect("the index");

    // A restart: the same answers, from the same file (not made again).
    tokio::time::sleep(Duration::from_millis(20)).await;
    let second = gateway_with(settings()).await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let session = Session::new(second.clone(), tx);
    assert_eq!(search(&session, query.clone()).await, found);
    second.shutdown().await;
    assert_eq!(cached(&cache), saved);

    // A file cut short is not an index: built again, the same answers, a new whole file.
    std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("cut");
    let third = gateway_with(settings()).await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let session = Session::new(third.clone(), tx);
    assert_eq!(search(&session, query).await, found);
    third.shutdown().await;
    let again = cached(&cache);
    assert_eq!(again.len(), 1);
    if saved[0].1.is_some() {
        assert_ne!(again[0].1, saved[0].1, "made anew");
    }
    assert_eq!(std::fs::read(&path).expect("the index"), bytes);
}

/// A search answers with a compact line per tool (no schema, no `null`, no JSON in its text):
/// a tenth of the full definitions' bytes; a tool's exact name gives its full definition; a
/// `call_tool` whose arguments miss a required parameter is refused with the definition, and
/// the server is not called.
#[tokio::test]
async fn a_search_answers_compact_lines_and_the_definition_on_demand() {
    let gateway = gateway().await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let session = Session::new(gateway.clone(), tx);
    // search_tools says what is behind it: the tools a search reaches, by server (the pinned
    // store_memory is listed, not behind).
    let list = ask(&session, "tools/list", json!({})).await;
    let search_tool = &list["result"]["tools"][1];
    assert_eq!(search_tool["name"], "search_tools");
    let described = search_tool["description"].as_str().expect("a description");
    assert!(
        described.contains("Behind it: 34 tools of 1 server: cg (34: "),
        "{described}"
    );
    let arguments =
        json!({"name": "search_tools", "arguments": {"query": "store a memory", "limit": 5}});
    let reply = ask(&session, "tools/call", arguments).await;
    let result = &reply["result"];
    let text = result["content"][0]["text"].as_str().expect("text");
    assert!(
        serde_json::from_str::<Value>(text).is_err(),
        "plain text: {text}"
    );
    assert!(!reply.to_string().contains("inputSchema") && !reply.to_string().contains("null"));
    let line = text
        .lines()
        .find(|l| l.starts_with("- store_memory("))
        .unwrap_or_else(|| panic!("store_memory is found: {text}"));
    assert!(
        line.contains("content: string") && line.contains("[cg]"),
        "{line}"
    );
    // The full definitions of the same tools, as the answer gave them before.
    let names = compact_names(text);
    assert!(names.len() >= 3, "{text}");
    let mut full = 0;
    for name in &names {
        let named = search_result(&session, json!({"query": name})).await;
        assert_eq!(named["tools"][0]["name"], json!(name));
        assert!(named["tools"][0]["inputSchema"].is_object(), "{named}");
        full += 2 * named["tools"][0].to_string().len();
    }
    let compact = result.to_string().len();
    // The fixture's schemas are small (a few parameters, short descriptions): a third here;
    // real servers' (measured in the guide) far more.
    assert!(compact * 2 < full, "compact {compact} bytes, full {full}");

    let call = json!({"name": "call_tool", "arguments": {"name": "store_memory", "arguments": {"rationale": "x"}}});
    let refused = ask(&session, "tools/call", call).await;
    assert_eq!(refused["result"]["isError"], json!(true), "{refused}");
    let why = refused["result"]["content"][0]["text"]
        .as_str()
        .expect("why");
    assert!(
        why.contains("missing content") && why.contains("\"inputSchema\""),
        "{why}"
    );
    let called = json!({"name": "call_tool", "arguments": {"name": "store_memory", "arguments": {"content": "x", "rationale": "y"}}});
    let answered = ask(&session, "tools/call", called).await;
    assert_ne!(answered["result"]["isError"], json!(true), "{answered}");
}

/// Each search is counted by what followed it: a call of the tool at its rank, a search that
/// found nothing, one followed by another search (no call) or by the session's end.
#[tokio::test]
async fn searches_are_counted_by_the_call_that_follows_them() {
    let gateway = gateway().await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let session = Session::new(gateway.clone(), tx);
    let counted = || {
        gateway
            .services
            .metrics
            .searches()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .collect::<Vec<_>>()
    };
    let found = search(
        &session,
        json!({"query": "start an offline consolidation dream cycle", "limit": 3}),
    )
    .await;
    assert_eq!(found.len(), 3, "{found:?}");
    let call = json!({"name": "call_tool", "arguments": {"name": found[1], "arguments": {}}});
    ask(&session, "tools/call", call).await;
    assert_eq!(counted(), [("called_2", 1)]);
    assert!(
        search(&session, json!({"query": "?! ..."}))
            .await
            .is_empty()
    );
    search(&session, json!({"query": "dream status"})).await;
    search(&session, json!({"query": "abort the dream", "limit": 1})).await;
    // A direct call of a tool the search did not show.
    let direct = json!({"name": "store_memory", "arguments": {"content": "x"}});
    ask(&session, "tools/call", direct).await;
    search(&session, json!({"query": "dream status"})).await;
    drop(session);
    assert_eq!(
        counted(),
        [
            ("empty", 1),
            ("called_2", 1),
            ("called_other", 1),
            ("no_call", 2)
        ]
    );
    let rendered = gateway.services.metrics.render();
    assert!(rendered.contains("moniker_searches_total{outcome=\"no_call\"} 2"));
    // The bytes each shown tool took: `get_dream_status` was shown twice.
    let shown = rendered
        .lines()
        .find(|l| l.starts_with("moniker_search_shown_bytes_total{tool=\"get_dream_status\"}"))
        .unwrap_or_else(|| panic!("{rendered}"));
    let bytes: u64 = shown
        .rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a count");
    assert!(bytes > 40, "{shown}");
}
