use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::json;

use super::*;

fn schema(value: &Value) -> Box<RawValue> {
    RawValue::from_string(value.to_string()).unwrap()
}

fn github_search() -> Value {
    json!({
        "type": "object",
        "properties": {
            "repository": {"type": "string", "description": "owner/name"},
            "tenant": {"type": "string"},
            "max_results": {"type": "integer"},
            "query": {"type": "string"}
        },
        "required": ["repository", "tenant", "query"]
    })
}

fn rules(pairs: &[(&str, ParamRule)]) -> BTreeMap<String, ParamRule> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn listed(shaped: &Shaped) -> Value {
    serde_json::from_str(shaped.schema.as_deref().expect("a changed schema")).unwrap()
}

fn sent(params: &Params, args: &Value) -> Value {
    let text = params
        .arguments(Some(&args.to_string()))
        .expect("accepted")
        .expect("rewritten");
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_renamed_parameter_is_listed_by_its_new_name_and_sent_by_the_old_one() {
    let shaped = shape(
        &rules(&[(
            "repository",
            ParamRule {
                rename: Some("repo".into()),
                aliases: vec!["repository_name".into()],
                description: Some("The repository, as owner/name.".into()),
                ..ParamRule::default()
            },
        )]),
        Some(&schema(&github_search())),
    );
    assert!(shaped.problems.is_empty(), "{:?}", shaped.problems);
    let listed = listed(&shaped);
    let names: Vec<&String> = listed["properties"].as_object().unwrap().keys().collect();
    assert_eq!(
        names,
        ["repo", "tenant", "max_results", "query"],
        "order kept"
    );
    assert_eq!(
        listed["properties"]["repo"]["description"],
        "The repository, as owner/name."
    );
    assert_eq!(listed["required"], json!(["repo", "tenant", "query"]));
    for name in ["repo", "repository_name", "repository"] {
        assert_eq!(
            sent(&shaped.params, &json!({ name: "a/b", "query": "q" })),
            json!({"repository": "a/b", "query": "q"}),
            "sent as `{name}`"
        );
    }
    let twice = shaped
        .params
        .arguments(Some(r#"{"repo":"a/b","repository_name":"c/d"}"#))
        .unwrap_err();
    assert!(twice.contains("given twice"), "{twice}");
}

#[test]
fn a_fixed_parameter_is_never_listed_always_sent_and_refused_from_a_client() {
    let secret = "tenant-4f1c";
    let shaped = shape(
        &rules(&[
            (
                "tenant",
                ParamRule {
                    fixed: Some(Fixed(json!(secret))),
                    ..ParamRule::default()
                },
            ),
            (
                "max_results",
                ParamRule {
                    default: Some(json!(10)),
                    ..ParamRule::default()
                },
            ),
        ]),
        Some(&schema(&github_search())),
    );
    let text = shaped.schema.clone().unwrap();
    assert!(!text.contains("tenant") && !text.contains(secret), "{text}");
    let listed = listed(&shaped);
    assert_eq!(listed["properties"]["max_results"]["default"], 10);
    assert_eq!(listed["required"], json!(["repository", "query"]));
    assert_eq!(
        sent(&shaped.params, &json!({"repository": "a/b", "query": "q"})),
        json!({"repository": "a/b", "query": "q", "max_results": 10, "tenant": secret})
    );
    assert_eq!(
        sent(&shaped.params, &json!({"max_results": 3})),
        json!({"max_results": 3, "tenant": secret}),
        "a default is only a default"
    );
    let refused = shaped
        .params
        .arguments(Some(r#"{"tenant":"someone-else"}"#))
        .unwrap_err();
    assert!(
        refused.contains("`tenant` is set by the gateway"),
        "{refused}"
    );
    assert!(!refused.contains(secret) && !refused.contains("someone-else"));
    assert!(
        !format!("{:?}", shaped.params).contains(secret),
        "Debug hides it"
    );
    // No arguments at all still carry the fixed value.
    let none: Value =
        serde_json::from_str(&shaped.params.arguments(None).unwrap().unwrap()).unwrap();
    assert_eq!(none, json!({"max_results": 10, "tenant": secret}));
}

#[test]
fn a_hidden_parameter_is_refused_and_a_rule_the_schema_does_not_bear_out_is_a_problem() {
    let shaped = shape(
        &rules(&[
            (
                "query",
                ParamRule {
                    hidden: true,
                    ..ParamRule::default()
                },
            ),
            (
                "max_result",
                ParamRule {
                    hidden: true,
                    ..ParamRule::default()
                },
            ),
            (
                "tenant",
                ParamRule {
                    rename: Some("repository".into()),
                    ..ParamRule::default()
                },
            ),
        ]),
        Some(&schema(&github_search())),
    );
    assert_eq!(
        shaped.problems,
        [
            Problem::Unknown {
                param: "max_result".into(),
                close: Some("max_results".into())
            },
            Problem::Collision {
                name: "repository".into()
            },
            Problem::RequiredHidden {
                param: "query".into()
            },
        ]
    );
    let refused = shaped
        .params
        .arguments(Some(r#"{"query":"x"}"#))
        .unwrap_err();
    assert!(refused.contains("not accepted"), "{refused}");
}

#[test]
fn arguments_that_are_not_an_object_go_as_they_are() {
    let shaped = shape(
        &rules(&[(
            "tenant",
            ParamRule {
                fixed: Some(Fixed(json!("t"))),
                ..ParamRule::default()
            },
        )]),
        Some(&schema(&github_search())),
    );
    assert_eq!(shaped.params.arguments(Some("[1,2]")), Ok(None));
    assert_eq!(shaped.params.arguments(Some("not json")), Ok(None));
    assert!(shape(&BTreeMap::new(), None).params.is_empty());
}

proptest! {
    /// An object the rules cannot read (a key or value no `String` holds: a lone surrogate
    /// escape, wherever it stands) is refused, never sent as it came past a `fixed` or `hidden`
    /// rule (the finding: `{"\ud800": 0, "tenant": "mine"}` reached the server whole).
    #[test]
    fn an_object_the_rules_cannot_read_is_refused(
        surrogate in prop_oneof![Just("\\ud800"), Just("\\udfff"), Just("\\ud83d x")],
        in_key in any::<bool>(),
        before in any::<bool>(),
    ) {
        let shaped = shape(
            &rules(&[
                ("tenant", ParamRule { fixed: Some(Fixed(json!("t"))), ..ParamRule::default() }),
                ("q", ParamRule { hidden: true, ..ParamRule::default() }),
            ]),
            Some(&schema(&github_search())),
        );
        let odd = if in_key {
            format!(r#""{surrogate}": 0"#)
        } else {
            format!(r#""x": "{surrogate}""#)
        };
        let mine = r#""tenant": "mine""#;
        let text = if before { format!("{{{odd}, {mine}}}") } else { format!("{{{mine}, {odd}}}") };
        // Refused, or sent with the rules applied; never as it came.
        let sent = shaped.params.arguments(Some(&text));
        match &sent {
            Err(_) => {}
            Ok(Some(out)) => prop_assert!(out.contains(r#""tenant":"t""#) && !out.contains("mine"), "{text}: {out}"),
            Ok(None) => prop_assert!(false, "{text} went as it came"),
        }
        if in_key {
            prop_assert!(matches!(&sent, Err(why) if why.contains("cannot be read")), "{text}: {sent:?}");
        }
    }
}

/// Every tool input schema the repository holds: the seeds' fixtures and the captured
/// inventories of real npm and PyPI servers (the findability benchmark's).
fn schemas() -> &'static [(String, Value)] {
    static ALL: std::sync::LazyLock<Vec<(String, Value)>> = std::sync::LazyLock::new(read_schemas);
    &ALL
}

fn read_schemas() -> Vec<(String, Value)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in [
        "fixtures",
        "bench/findability/inventories",
        "bench/findability/inventories-heldout",
        "bench/findability/inventories-pypi",
    ] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        files.extend(
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "json")),
        );
    }
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let inventory: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for tool in inventory["tools"].as_array().into_iter().flatten() {
            let name = tool["name"].as_str().unwrap_or_default();
            out.push((
                format!("{}:{name}", file.display()),
                tool["inputSchema"].clone(),
            ));
        }
    }
    out
}

/// What a rule does to one parameter, chosen by the property test.
#[derive(Debug, Clone)]
enum Pick {
    Keep,
    Rename,
    RenameWithAlias,
    Alias,
    Default,
    Fixed,
    Hidden,
    HiddenWithDefault,
    Describe,
}

fn pick() -> impl Strategy<Value = Pick> {
    prop_oneof![
        Just(Pick::Keep),
        Just(Pick::Rename),
        Just(Pick::RenameWithAlias),
        Just(Pick::Alias),
        Just(Pick::Default),
        Just(Pick::Fixed),
        Just(Pick::Hidden),
        Just(Pick::HiddenWithDefault),
        Just(Pick::Describe),
    ]
}

fn rule_of(i: usize, pick: &Pick) -> Option<ParamRule> {
    let fresh = |what: &str| format!("{what}_{i}_moniker");
    let rule = match pick {
        Pick::Keep => return None,
        Pick::Rename => ParamRule {
            rename: Some(fresh("new")),
            ..ParamRule::default()
        },
        Pick::RenameWithAlias => ParamRule {
            rename: Some(fresh("new")),
            aliases: vec![fresh("old")],
            ..ParamRule::default()
        },
        Pick::Alias => ParamRule {
            aliases: vec![fresh("old")],
            ..ParamRule::default()
        },
        Pick::Default => ParamRule {
            default: Some(json!({ "default": i })),
            ..ParamRule::default()
        },
        Pick::Fixed => ParamRule {
            fixed: Some(Fixed(json!({ "fixed": i }))),
            ..ParamRule::default()
        },
        Pick::Hidden => ParamRule {
            hidden: true,
            ..ParamRule::default()
        },
        Pick::HiddenWithDefault => ParamRule {
            hidden: true,
            default: Some(json!({ "default": i })),
            ..ParamRule::default()
        },
        Pick::Describe => ParamRule {
            description: Some(fresh("text")),
            ..ParamRule::default()
        },
    };
    Some(rule)
}

/// The round trip, for one schema, one rule per parameter (`picks`, cycled) and the listed
/// parameters a client gives (`give`, cycled; required ones always): what reaches the server
/// is exactly what the client gave, under the server's names, with the defaults and fixed
/// values the rules add, and nothing else.
fn round_trip(where_: &str, schema_value: &Value, picks: &[Pick], give: &[bool]) {
    let properties: Vec<String> = schema_value["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    let required: BTreeSet<String> = schema_value["required"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let chosen: BTreeMap<String, ParamRule> = properties
        .iter()
        .enumerate()
        .filter_map(|(i, name)| {
            rule_of(i, &picks[i % picks.len()]).map(|rule| (name.clone(), rule))
        })
        .collect();
    let shaped = shape(&chosen, Some(&schema(schema_value)));
    let problem = |p: &&Problem| !matches!(p, Problem::RequiredHidden { .. });
    let problems: Vec<&Problem> = shaped.problems.iter().filter(problem).collect();
    assert!(problems.is_empty(), "{where_}: {problems:?}");
    if chosen.is_empty() {
        assert!(shaped.schema.is_none(), "{where_}: no rule, no change");
        return;
    }
    let listed: Value = serde_json::from_str(shaped.schema.as_deref().unwrap()).unwrap();
    let listed_props = listed["properties"].as_object().unwrap();
    let listed_required: BTreeSet<&str> = listed["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // The client's arguments: a marker per listed parameter it gives, by a name it may use.
    let mut args = serde_json::Map::new();
    let mut expect = serde_json::Map::new();
    for (i, origin) in properties.iter().enumerate() {
        let rule = chosen.get(origin);
        let withheld = rule.is_some_and(|r| r.hidden || r.fixed.is_some());
        let exposed = rule
            .and_then(|r| r.rename.clone())
            .unwrap_or_else(|| origin.clone());
        assert_eq!(
            listed_props.contains_key(&exposed),
            !withheld,
            "{where_}: `{exposed}` listed iff not withheld"
        );
        if withheld {
            let value =
                rule.and_then(|r| r.fixed.as_ref().map(|f| f.0.clone()).or(r.default.clone()));
            if let Some(value) = value {
                expect.insert(origin.clone(), value);
            }
            continue;
        }
        let default = rule.and_then(|r| r.default.clone());
        let must = listed_required.contains(exposed.as_str());
        assert_eq!(
            must,
            required.contains(origin) && default.is_none(),
            "{where_}: `{exposed}` required iff the server requires it and it has no default"
        );
        if must || give[i % give.len()] {
            // An alias, where there is one, stands for the parameter as well as its name.
            let by = rule
                .and_then(|r| r.aliases.first().cloned())
                .filter(|_| i % 2 == 0)
                .unwrap_or(exposed);
            args.insert(by, json!({ "given": i }));
            expect.insert(origin.clone(), json!({ "given": i }));
        } else if let Some(default) = default {
            expect.insert(origin.clone(), default);
        }
    }
    let back = sent(&shaped.params, &Value::Object(args));
    assert_eq!(back, Value::Object(expect), "{where_}");
    fixed_are_refused(where_, &chosen, &shaped.params);
}

fn fixed_are_refused(where_: &str, chosen: &BTreeMap<String, ParamRule>, params: &Params) {
    for (origin, rule) in chosen {
        if rule.fixed.is_some() {
            let refused = params.arguments(Some(&json!({ origin: 1 }).to_string()));
            assert!(refused.is_err(), "{where_}: `{origin}` is fixed");
        }
    }
}

#[test]
fn the_repository_holds_schemas_to_try() {
    let schemas = schemas();
    assert!(schemas.len() > 300, "{} schemas", schemas.len());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The round trip holds for every schema the repository holds, under any rules.
    #[test]
    fn the_round_trip_holds_for_every_schema(
        picks in proptest::collection::vec(pick(), 1..6),
        give in proptest::collection::vec(any::<bool>(), 1..5),
    ) {
        for (where_, schema) in schemas() {
            round_trip(where_, schema, &picks, &give);
        }
    }
}
