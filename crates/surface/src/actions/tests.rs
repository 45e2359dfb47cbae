#![allow(
    clippy::too_many_lines,
    reason = "a test is one scenario, read from top to bottom"
)]
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn raw(v: &Value) -> Box<RawValue> {
    RawValue::from_string(v.to_string()).unwrap()
}

fn raw_text(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).unwrap()
}

/// Members from `(action, definition)` pairs; the exposed name is `<action>_tool`.
fn merged(summary: Option<&str>, members: &[(&str, Value)]) -> Merged {
    let raws: Vec<(String, Box<RawValue>)> = members
        .iter()
        .map(|(action, def)| (format!("{action}_tool"), raw(def)))
        .collect();
    let members: Vec<Member<'_>> = members
        .iter()
        .zip(&raws)
        .map(|((action, _), (name, def))| Member {
            action,
            name,
            definition: def,
        })
        .collect();
    merge("thing", summary, &members)
}

fn tool(description: &str, schema: Value) -> Value {
    json!({"description": description, "inputSchema": schema})
}

fn props(m: &Merged) -> &Map<String, Value> {
    m.input_schema["properties"].as_object().unwrap()
}

fn keys(m: &Merged) -> Vec<&str> {
    props(m).keys().map(String::as_str).collect()
}

fn spec(action: &str, required: &[&str], declared: Option<&[&str]>) -> ActionSpec {
    ActionSpec {
        action: action.to_owned(),
        required: required.iter().map(|s| (*s).to_owned()).collect(),
        declared: declared.map(|d| d.iter().map(|s| (*s).to_owned()).collect()),
    }
}

#[test]
fn the_schema_has_an_action_enum_and_the_union_of_the_properties_in_order() {
    let m = merged(
        None,
        &[
            (
                "create",
                tool(
                    "Create.",
                    json!({"type": "object", "properties": {"name": {"type": "string"}, "path": {"type": "string"}}}),
                ),
            ),
            (
                "list",
                tool(
                    "List.",
                    json!({"type": "object", "properties": {"limit": {"type": "integer"}, "name": {"type": "string"}}}),
                ),
            ),
        ],
    );
    assert_eq!(m.input_schema["type"], "object");
    assert_eq!(m.input_schema["required"], json!(["action"]));
    assert_eq!(
        props(&m)["action"],
        json!({"type": "string", "enum": ["create", "list"]})
    );
    assert_eq!(keys(&m), ["action", "name", "path", "limit"]);
    // The schema's own keys in a fixed order; no `additionalProperties`, no `$defs`.
    let top: Vec<&str> = m
        .input_schema
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(top, ["type", "properties", "required"]);
}

#[test]
fn identical_properties_merge_into_one_with_the_actions_that_require_it() {
    let name = json!({"type": "string", "description": "Project name"});
    let m = merged(
        None,
        &[
            (
                "create",
                tool(
                    "",
                    json!({"type": "object", "properties": {"name": name, "path": {"type": "string", "description": "Root"}}, "required": ["name", "path"]}),
                ),
            ),
            (
                "list",
                tool("", json!({"type": "object", "properties": {"name": name}})),
            ),
            (
                "delete",
                tool(
                    "",
                    json!({"type": "object", "properties": {"name": name, "force": {"type": "boolean"}}, "required": ["name"]}),
                ),
            ),
        ],
    );
    assert_eq!(
        props(&m)["name"],
        json!({"type": "string", "description": "Project name (required for: create, delete)"})
    );
    assert_eq!(
        props(&m)["path"],
        json!({"type": "string", "description": "Root (required for: create)"})
    );
    // Required by no member: as it was.
    assert_eq!(props(&m)["force"], json!({"type": "boolean"}));
}

#[test]
fn a_required_property_without_a_description_gets_one() {
    let m = merged(
        None,
        &[
            (
                "create",
                tool(
                    "",
                    json!({"type": "object", "properties": {"name": {"type": "string"}, "blank": {"type": "string", "description": "  "}, "any": true}, "required": ["name", "blank", "any"]}),
                ),
            ),
            (
                "delete",
                tool(
                    "",
                    json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
                ),
            ),
        ],
    );
    // Required by every action: in `required`, said once.
    assert_eq!(props(&m)["name"], json!({"type": "string"}));
    assert_eq!(m.input_schema["required"], json!(["action", "name"]));
    assert_eq!(props(&m)["blank"]["description"], "Required for: create");
    assert_eq!(
        props(&m)["any"],
        json!({"description": "Required for: create"})
    );
}

#[test]
fn differing_properties_become_any_of_the_distinct_schemas() {
    let id_string = json!({"type": "string", "description": "Id"});
    let id_number = json!({"type": "integer", "description": "Id"});
    let m = merged(
        None,
        &[
            (
                "get",
                tool(
                    "",
                    json!({"type": "object", "properties": {"id": id_string}, "required": ["id"]}),
                ),
            ),
            (
                "find",
                tool(
                    "",
                    json!({"type": "object", "properties": {"id": id_number}}),
                ),
            ),
            (
                "delete",
                tool(
                    "",
                    json!({"type": "object", "properties": {"id": id_string}, "required": ["id"]}),
                ),
            ),
            (
                "other",
                tool(
                    "",
                    json!({"type": "object", "properties": {"q": id_number}}),
                ),
            ),
        ],
    );
    // Compared before the suffix; each variant says the actions it is for before its
    // member's own description.
    assert_eq!(
        props(&m)["id"],
        json!({"anyOf": [
            {"type": "string", "description": "get, delete: Id"},
            {"type": "integer", "description": "find: Id"},
        ], "description": "Required for: get, delete"})
    );
    // Required by none: the `anyOf` alone, its variants saying which action takes which.
    let m = merged(
        None,
        &[
            (
                "a",
                tool("", json!({"properties": {"x": {"type": "string"}}})),
            ),
            (
                "b",
                tool("", json!({"properties": {"x": {"type": "number"}}})),
            ),
        ],
    );
    assert_eq!(
        props(&m)["x"],
        json!({"anyOf": [
            {"type": "string", "description": "For a"},
            {"type": "number", "description": "For b"},
        ]})
    );
    // A `$ref` variant is left as it is (older validators ignore what is beside a `$ref`).
    let m = merged(
        None,
        &[
            (
                "a",
                tool(
                    "",
                    json!({"properties": {"x": {"$ref": "#/$defs/X"}}, "$defs": {"X": {"type": "string"}}}),
                ),
            ),
            (
                "b",
                tool("", json!({"properties": {"x": {"type": "number"}}})),
            ),
        ],
    );
    assert_eq!(
        props(&m)["x"],
        json!({"anyOf": [{"$ref": "#/$defs/X"}, {"type": "number", "description": "For b"}]})
    );
}

#[test]
fn nested_schemas_are_carried_whole() {
    let tags = json!({
        "type": "array",
        "items": {"type": "string", "enum": ["a", "b"], "format": "uri"},
        "default": [],
        "minItems": 1,
        "x-vendor": {"keep": true}
    });
    let target = json!({"oneOf": [{"type": "string"}, {"type": "object", "properties": {"id": {"type": "integer", "default": 1.50}}}]});
    let m = merged(
        None,
        &[(
            "tag",
            tool(
                "",
                json!({"type": "object", "properties": {"tags": tags, "target": target}}),
            ),
        )],
    );
    assert_eq!(props(&m)["tags"], tags);
    assert_eq!(props(&m)["target"], target);
}

#[test]
fn definitions_are_merged_and_conflicts_renamed_with_their_refs() {
    let point = json!({"type": "object", "properties": {"x": {"type": "number"}}});
    let other_point = json!({"type": "object", "properties": {"lat": {"type": "number"}}});
    let m = merged(
        None,
        &[
            (
                "create",
                tool(
                    "",
                    json!({
                        "type": "object",
                        "properties": {"at": {"$ref": "#/$defs/Point"}},
                        "$defs": {"Point": point, "Shared": {"type": "string"}}
                    }),
                ),
            ),
            (
                "move",
                tool(
                    "",
                    json!({
                        "type": "object",
                        "properties": {
                            "to": {"$ref": "#/$defs/Point"},
                            "path": {"type": "array", "items": {"$ref": "#/$defs/Path"}},
                            "label": {"$ref": "#/definitions/Shared"},
                            "x": {"$ref": "#/$defs/Point/properties/lat"},
                            // Data, not a reference.
                            "example": {"type": "object", "default": {"$ref": "#/$defs/Point"}}
                        },
                        "$defs": {
                            "Point": other_point,
                            "Path": {"type": "array", "items": {"$ref": "#/$defs/Point"}}
                        },
                        "definitions": {"Shared": {"type": "string"}}
                    }),
                ),
            ),
        ],
    );
    assert_eq!(
        m.input_schema["$defs"],
        json!({
            "Point": point,
            "Shared": {"type": "string"},
            "move_Point": other_point,
            "Path": {"type": "array", "items": {"$ref": "#/$defs/move_Point"}}
        })
    );
    assert_eq!(props(&m)["at"], json!({"$ref": "#/$defs/Point"}));
    assert_eq!(props(&m)["to"], json!({"$ref": "#/$defs/move_Point"}));
    assert_eq!(
        props(&m)["path"],
        json!({"type": "array", "items": {"$ref": "#/$defs/Path"}})
    );
    // Identical definitions are shared; `definitions` live in `$defs` now.
    assert_eq!(props(&m)["label"], json!({"$ref": "#/$defs/Shared"}));
    assert_eq!(
        props(&m)["x"],
        json!({"$ref": "#/$defs/move_Point/properties/lat"})
    );
    assert_eq!(
        props(&m)["example"]["default"],
        json!({"$ref": "#/$defs/Point"})
    );
    assert!(m.input_schema.get("definitions").is_none());
}

#[test]
fn a_renamed_definition_renames_the_ones_that_use_it() {
    // `Wrapper` is written the same in both members but means different things, since the
    // `Inner` it refers to differs.
    let member = |inner: Value| {
        tool(
            "",
            json!({
                "properties": {"w": {"$ref": "#/$defs/Wrapper"}},
                "$defs": {"Wrapper": {"items": {"$ref": "#/$defs/Inner"}}, "Inner": inner}
            }),
        )
    };
    let m = merged(
        None,
        &[
            ("a", member(json!({"type": "string"}))),
            ("b", member(json!({"type": "integer"}))),
            // Takes `b_Inner`'s would-be name as its own definition name.
            (
                "c",
                tool(
                    "",
                    json!({"properties": {"v": {"$ref": "#/$defs/b_Inner"}}, "$defs": {"b_Inner": {"type": "null"}}}),
                ),
            ),
        ],
    );
    let defs = m.input_schema["$defs"].as_object().unwrap();
    assert_eq!(
        defs.keys().map(String::as_str).collect::<Vec<_>>(),
        ["Wrapper", "Inner", "b_Wrapper", "b_Inner", "c_b_Inner"]
    );
    assert_eq!(
        defs["b_Wrapper"],
        json!({"items": {"$ref": "#/$defs/b_Inner"}})
    );
    assert_eq!(
        props(&m)["w"],
        json!({"anyOf": [{"$ref": "#/$defs/Wrapper"}, {"$ref": "#/$defs/b_Wrapper"}]})
    );
    assert_eq!(props(&m)["v"], json!({"$ref": "#/$defs/c_b_Inner"}));
}

#[test]
fn additional_properties_false_only_when_every_member_says_so() {
    let closed = tool(
        "",
        json!({"type": "object", "properties": {"a": {}}, "additionalProperties": false}),
    );
    let m = merged(None, &[("x", closed.clone()), ("y", closed.clone())]);
    assert_eq!(m.input_schema["additionalProperties"], json!(false));
    for open in [
        tool("", json!({"type": "object", "properties": {"b": {}}})),
        tool(
            "",
            json!({"type": "object", "properties": {"b": {}}, "additionalProperties": true}),
        ),
        json!({"description": "no schema"}),
    ] {
        let m = merged(None, &[("x", closed.clone()), ("y", open)]);
        assert!(m.input_schema.get("additionalProperties").is_none());
    }
}

#[test]
fn members_without_a_usable_schema_add_no_properties_and_take_anything() {
    let m = merged(
        None,
        &[
            ("none", json!({"description": "No schema."})),
            ("string", json!({"inputSchema": "object"})),
            (
                "list",
                tool(
                    "",
                    json!({"type": "object", "properties": ["a"], "required": ["a"]}),
                ),
            ),
            ("empty", tool("", json!({"type": "object"}))),
            (
                "open",
                tool(
                    "",
                    json!({"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "string"}}),
                ),
            ),
            (
                "pattern",
                tool(
                    "",
                    json!({"type": "object", "properties": {"b": {}}, "patternProperties": {"^x_": {}}}),
                ),
            ),
            (
                "closed",
                tool(
                    "",
                    json!({"type": "object", "properties": {"c": {}, "action": {"type": "integer"}}, "required": ["c", "d", "action"]}),
                ),
            ),
        ],
    );
    assert_eq!(keys(&m), ["action", "a", "b", "c"]);
    assert_eq!(
        m.specs,
        [
            spec("none", &[], None),
            spec("string", &[], None),
            spec("list", &["a"], None),
            spec("empty", &[], None),
            spec("open", &[], None),
            spec("pattern", &[], None),
            // A member's own `action` is shadowed by the action tool's; a required parameter
            // it forgot to declare is passed on.
            spec("closed", &["c", "d"], Some(&["c", "d"])),
        ]
    );
    assert_eq!(
        props(&m)["action"]["enum"],
        json!([
            "none", "string", "list", "empty", "open", "pattern", "closed"
        ])
    );
    // Not even a JSON object: nothing but its action.
    let text = raw_text("[1, 2]");
    let m = merge(
        "t",
        None,
        &[Member {
            action: "odd",
            name: "odd_tool",
            definition: &text,
        }],
    );
    assert_eq!(m.specs, [spec("odd", &[], None)]);
    // An action with nothing to say is in the enum only.
    assert_eq!(m.description, "t: one tool for 1 action.");
}

#[test]
fn the_description_says_what_each_action_adds_to_its_name() {
    let members = [
        (
            "create",
            tool(
                "Register a project.\nIt is indexed later.",
                json!({"type": "object", "properties": {"name": {}, "path": {}}, "required": ["name", "path"]}),
            ),
        ),
        (
            "list",
            tool("\n  List projects.  \n", json!({"type": "object"})),
        ),
        ("delete", json!({"inputSchema": {"required": ["name"]}})),
        ("noop", tool("", json!({}))),
        // Words of the name, the tool's description or the parameters say nothing new;
        // neither does "Re-run" beside `rerun`.
        ("rerun", tool("Re-run the Project's path.", json!({}))),
        (
            "archive",
            tool("Archive projects, keep their data.", json!({})),
        ),
    ];
    let m = merged(Some("Manage projects."), &members);
    assert_eq!(
        m.description,
        "Manage projects.\n\nActions:\n- create: Register a project.\n- archive: Archive projects, keep their data."
    );
    assert_eq!(
        m.input_schema["properties"]["action"]["enum"],
        json!(["create", "list", "delete", "noop", "rerun", "archive"])
    );
    let m = merged(None, &members);
    assert!(
        m.description
            .starts_with("thing: one tool for 6 actions.\n\nActions:\n- create: "),
        "{}",
        m.description
    );
    assert_eq!(merged(Some("  "), &members).description, m.description);
}

fn project_specs() -> Vec<ActionSpec> {
    vec![
        spec("create", &["name", "path"], Some(&["name", "path", "n"])),
        spec("list", &[], Some(&["limit"])),
        spec("set_active", &["name"], Some(&["name"])),
        spec("delete", &["name"], None),
    ]
}

fn call(args: Option<&str>) -> Result<(usize, String), String> {
    let raw = args.map(raw_text);
    dispatch(&project_specs(), raw.as_deref())
}

const VALID: &str = "Valid actions: create, list, set_active, delete";

#[test]
fn a_missing_action_names_the_valid_ones() {
    let expected = format!("Missing required parameter: action. {VALID}");
    for args in [
        None,
        Some("null"),
        Some("[]"),
        Some(r#""create""#),
        Some("12"),
        Some("{}"),
        Some(r#"{"name":"x"}"#),
        Some(r#"{"action":null,"name":"x"}"#),
    ] {
        assert_eq!(call(args), Err(expected.clone()), "{args:?}");
    }
}

#[test]
fn an_unknown_action_names_the_valid_ones() {
    for (args, shown) in [
        (r#"{"action":"archive"}"#, "archive"),
        (r#"{"action":"Create"}"#, "Create"),
        (r#"{"action":""}"#, ""),
        (r#"{"action":5}"#, "5"),
        (r#"{"action":true}"#, "true"),
        (r#"{"action":{"a": [1]}}"#, r#"{"a": [1]}"#),
        (r#"{"action":["create"]}"#, r#"["create"]"#),
    ] {
        assert_eq!(
            call(Some(args)),
            Err(format!("Unknown action: {shown}. {VALID}")),
            "{args}"
        );
    }
}

#[test]
fn missing_required_parameters_are_named_in_the_members_order() {
    assert_eq!(
        call(Some(r#"{"action":"create"}"#)),
        Err(r#"Missing required parameter(s) for action "create": name, path"#.to_owned())
    );
    assert_eq!(
        call(Some(r#"{"path":"/p","action":"create","name":null}"#)),
        Err(r#"Missing required parameter(s) for action "create": name"#.to_owned())
    );
    assert_eq!(
        call(Some(r#"{"action":"set_active"}"#)),
        Err(r#"Missing required parameter(s) for action "set_active": name"#.to_owned())
    );
    // Empty and false are values.
    assert!(call(Some(r#"{"action":"set_active","name":""}"#)).is_ok());
    assert!(call(Some(r#"{"action":"set_active","name":false}"#)).is_ok());
}

#[test]
fn arguments_pass_through_byte_for_byte_without_action_and_undeclared_ones() {
    let specs = [spec("create", &["name"], Some(&["name", "n"]))];
    let args = raw_text(r#"{"action":"create","name":"x","n":1.50,"junk":true}"#);
    assert_eq!(
        dispatch(&specs, Some(&args)),
        Ok((0, r#"{"name":"x","n":1.50}"#.to_owned()))
    );
    assert_eq!(
        call(Some(
            r#"{"action":"create","name":"x","path":"/p","n":1.50,"junk":true}"#
        )),
        Ok((0, r#"{"name":"x","path":"/p","n":1.50}"#.to_owned()))
    );
    // Order kept, values as written (spaces inside values, escapes, big numbers).
    assert_eq!(
        call(Some(
            r#"{ "n" : 1e400 , "path": "a\u00e9\"b", "action" : "create", "name": { "deep" : [ 1.0, -0 ] } }"#
        )),
        Ok((
            0,
            r#"{"n":1e400,"path":"a\u00e9\"b","name":{ "deep" : [ 1.0, -0 ] }}"#.to_owned()
        ))
    );
    // Undeclared dropped, even everything.
    assert_eq!(
        call(Some(r#"{"action":"list","junk":1}"#)),
        Ok((1, "{}".to_owned()))
    );
    // A member that takes anything gets everything but `action`.
    assert_eq!(
        call(Some(
            r#"{"action":"delete","name":"x","keep_data":true,"zz":[]}"#
        )),
        Ok((3, r#"{"name":"x","keep_data":true,"zz":[]}"#.to_owned()))
    );
    // Keys are written as JSON strings.
    assert_eq!(
        call(Some(
            r#"{"action":"delete","name":"x","a\"b":1,"\u00e9":2}"#
        )),
        Ok((3, "{\"name\":\"x\",\"a\\\"b\":1,\"é\":2}".to_owned()))
    );
}

fn fixture_tools(file: &str) -> Vec<Value> {
    let path = format!("{}/../../fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["tools"].as_array().unwrap().clone()
}

/// Seed 004's `project` tool, from the ctx-sys fixture's four project tools.
fn ctxsys_project() -> Merged {
    let tools = fixture_tools("ctxsys.json");
    let members = [
        ("create", "create_project"),
        ("list", "list_projects"),
        ("set_active", "set_active_project"),
        ("delete", "delete_project"),
    ];
    let raws: Vec<Box<RawValue>> = members
        .iter()
        .map(|(_, name)| {
            let def = tools.iter().find(|t| t["name"] == *name).unwrap();
            raw(def)
        })
        .collect();
    let members: Vec<Member<'_>> = members
        .iter()
        .zip(&raws)
        .map(|((action, name), definition)| Member {
            action,
            name,
            definition,
        })
        .collect();
    merge("project", Some("Manage projects."), &members)
}

#[test]
fn the_ctxsys_project_tool() {
    let m = ctxsys_project();
    insta::assert_json_snapshot!(json!({
        "description": m.description,
        "inputSchema": m.input_schema,
    }));
    assert_eq!(
        m.specs,
        [
            spec(
                "create",
                &["name", "path"],
                Some(&["name", "path", "description"])
            ),
            spec("list", &[], Some(&["limit"])),
            spec("set_active", &["name"], Some(&["name"])),
            spec("delete", &["name"], Some(&["name", "confirm"])),
        ]
    );
    let call = |args: &str| dispatch(&m.specs, Some(&raw_text(args)));
    assert_eq!(
        call(r#"{"action":"archive"}"#),
        Err("Unknown action: archive. Valid actions: create, list, set_active, delete".to_owned())
    );
    assert_eq!(
        call(r#"{"action":"create"}"#),
        Err(r#"Missing required parameter(s) for action "create": name, path"#.to_owned())
    );
    assert_eq!(
        call(r#"{"action":"delete","name":"p","confirm":true,"keep_data":true}"#),
        Ok((3, r#"{"name":"p","confirm":true}"#.to_owned()))
    );
    assert_eq!(call(r#"{"action":"list"}"#), Ok((1, "{}".to_owned())));
}

#[test]
fn merging_is_deterministic() {
    assert_eq!(ctxsys_project(), ctxsys_project());
}

/// Any JSON value, with the keys of the project specs frequent.
fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        3 => Just("action".to_owned()),
        2 => prop_oneof![Just("name"), Just("path"), Just("n"), Just("limit")].prop_map(str::to_owned),
        2 => any::<String>(),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop_oneof![
            Just("create"),
            Just("list"),
            Just("set_active"),
            Just("delete"),
            Just("")
        ]
        .prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn dispatch_never_panics(args in json_value(), absent in proptest::bool::weighted(0.05)) {
        let specs = project_specs();
        let raw = raw(&args);
        let result = dispatch(&specs, (!absent).then_some(&*raw));
        match result {
            Ok((index, text)) => {
                let spec = &specs[index];
                let out: Map<String, Value> = serde_json::from_str(&text).unwrap();
                prop_assert!(!out.contains_key("action"));
                prop_assert_eq!(&args["action"], &json!(spec.action));
                for r in &spec.required {
                    prop_assert!(!out.get(r).unwrap_or(&Value::Null).is_null());
                }
                if let Some(declared) = &spec.declared {
                    prop_assert!(out.keys().all(|k| declared.contains(k)));
                }
                // The values' text as sent (parsing floats back may not give the same bits).
                let sent: IndexMap<String, &RawValue> = serde_json::from_str(raw.get()).unwrap();
                let passed: IndexMap<String, &RawValue> = serde_json::from_str(&text).unwrap();
                for (k, v) in &passed {
                    prop_assert_eq!(sent[k].get(), v.get());
                }
                let order: Vec<&String> = sent.keys().filter(|k| passed.contains_key(*k)).collect();
                prop_assert_eq!(order, passed.keys().collect::<Vec<_>>());
            }
            Err(message) => prop_assert!(message.contains("action"), "{}", message),
        }
    }

    #[test]
    fn dispatch_never_panics_on_any_json_text(text in "[ {}\\[\\]\",:a-z0-9.eE+\\-\\\\]{0,40}") {
        if let Ok(raw) = RawValue::from_string(text) {
            let _ = dispatch(&project_specs(), Some(&raw));
        }
    }

    #[test]
    fn merge_never_panics(defs in proptest::collection::vec(json_value(), 0..4)) {
        let raws: Vec<Box<RawValue>> = defs.iter().map(|d| raw(&json!({"inputSchema": d, "description": d}))).collect();
        let names: Vec<String> = (0..raws.len()).map(|i| format!("a{i}")).collect();
        let members: Vec<Member<'_>> = raws.iter().zip(&names).map(|(definition, action)| Member { action, name: action, definition }).collect();
        let m = merge("t", None, &members);
        prop_assert_eq!(m.specs.len(), members.len());
        prop_assert_eq!(&m.input_schema["required"], &json!(["action"]));
    }
}

#[test]
fn header_annotations_of_members_are_dropped_from_the_merged_schema() {
    let m = merged(
        None,
        &[
            (
                "create",
                tool(
                    "Create.",
                    json!({"type": "object", "properties": {
                        "region": {"type": "string", "x-mcp-header": "Region"},
                        "spec": {"type": "object", "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}}}
                    }}),
                ),
            ),
            (
                "list",
                tool(
                    "List.",
                    json!({"type": "object", "properties": {"region": {"type": "string"}}}),
                ),
            ),
        ],
    );
    let text = m.input_schema.to_string();
    assert!(!text.contains("x-mcp-header"), "{text}");
    // Without its annotation, `region` is the same in both members: one schema.
    assert_eq!(props(&m)["region"]["type"], "string", "{text}");
}

#[test]
fn schemas_that_differ_only_in_their_descriptions_become_one() {
    let m = merged(
        None,
        &[
            (
                "save",
                tool(
                    "Save.",
                    json!({"type": "object", "properties": {"label": {"type": "string", "description": "Optional label."}}}),
                ),
            ),
            (
                "load",
                tool(
                    "Load.",
                    json!({"type": "object", "properties": {"label": {"type": "string", "description": "Checkpoint label."}}}),
                ),
            ),
            (
                "drop",
                tool(
                    "Drop.",
                    json!({"type": "object", "properties": {"label": {"type": "integer"}}}),
                ),
            ),
        ],
    );
    // With `drop`'s integer the types differ: anyOf, as before.
    assert!(props(&m)["label"]["anyOf"].is_array(), "{}", m.input_schema);
    let m = merged(
        None,
        &[
            (
                "save",
                tool(
                    "Save.",
                    json!({"type": "object", "properties": {"label": {"type": "string", "description": "Optional label."}}}),
                ),
            ),
            (
                "load",
                tool(
                    "Load.",
                    json!({"type": "object", "properties": {"label": {"type": "string", "description": "Checkpoint label."}}}),
                ),
            ),
        ],
    );
    assert_eq!(
        props(&m)["label"],
        json!({"type": "string", "description": "save: Optional label; load: Checkpoint label."})
    );
    let label = |description: &str| {
        tool(
            "Do.",
            json!({"type": "object", "properties": {"label": {"type": "string", "description": description}}}),
        )
    };
    let m = merged(
        None,
        &[
            ("a", label("A label, e.g.")),
            ("b", label("Wait...")),
            ("c", label("Last")),
            ("d", label("A label, e.g.")),
        ],
    );
    // One text, several actions: said once, for all of them; a sentence's full stop goes
    // before a "; ", that of "e.g." and "..." stays.
    assert_eq!(
        props(&m)["label"]["description"],
        "a, d: A label, e.g.; b: Wait...; c: Last"
    );
    // One description said twice, but for a full stop: once, the longer way.
    let m = merged(
        None,
        &[
            (
                "get",
                tool(
                    "Get.",
                    json!({"properties": {"n": {"type": "number", "description": "The project's number"}}}),
                ),
            ),
            (
                "put",
                tool(
                    "Put.",
                    json!({"properties": {"n": {"type": "number", "description": " the Project's number. "}}}),
                ),
            ),
        ],
    );
    assert_eq!(
        props(&m)["n"],
        json!({"type": "number", "description": " the Project's number. "})
    );
}

/// The members' behaviour hints merged as a client trusts them for any call: read-only and
/// idempotent only if every member is, destructive and open-world if any is (a member that
/// says nothing has the specification's defaults); an action whose hints differ says so.
#[test]
fn annotations_are_merged_for_the_safest_reading() {
    let with = |description: &str, annotations: Value| {
        let mut t = tool(description, json!({"type": "object"}));
        t["annotations"] = annotations;
        t
    };
    let m = merged(
        None,
        &[
            (
                "list",
                with(
                    "List runs.",
                    json!({"readOnlyHint": true, "openWorldHint": false}),
                ),
            ),
            (
                "rerun",
                with(
                    "Rerun a run.",
                    json!({"destructiveHint": false, "idempotentHint": true, "openWorldHint": false}),
                ),
            ),
            (
                "delete",
                with(
                    "Delete a run.",
                    json!({"destructiveHint": true, "idempotentHint": true, "openWorldHint": false}),
                ),
            ),
        ],
    );
    assert_eq!(
        m.annotations,
        Some(json!({"destructiveHint": true, "openWorldHint": false}))
    );
    // A hint that differs is said, whether or not the summary says more than the name.
    assert!(
        m.description.contains("- list: List runs. (read-only)"),
        "{}",
        m.description
    );
    assert!(
        m.description
            .contains("- rerun: Rerun a run. (not destructive)"),
        "{}",
        m.description
    );
    assert!(
        m.description.contains("- delete: Delete a run.\n")
            || m.description.ends_with("- delete: Delete a run."),
        "{}",
        m.description
    );

    // Every member read-only: so is the action tool, and no action needs a note.
    let m = merged(
        None,
        &[
            ("get", with("Get.", json!({"readOnlyHint": true}))),
            (
                "list",
                with(
                    "List.",
                    json!({"readOnlyHint": true, "idempotentHint": true}),
                ),
            ),
        ],
    );
    // Said in as few hints as say it: the others are the specification's defaults.
    assert_eq!(m.annotations, Some(json!({"readOnlyHint": true})));
    assert!(!m.description.contains('('), "{}", m.description);

    // One member says nothing: it counts as the specification's default (it may write).
    let m = merged(
        None,
        &[
            ("get", with("Get.", json!({"readOnlyHint": true}))),
            ("put", tool("Put.", json!({"type": "object"}))),
        ],
    );
    assert_eq!(m.annotations, Some(json!({"destructiveHint": true})));
    // No member says anything: neither does the action tool.
    let m = merged(
        None,
        &[("a", tool("A.", json!({}))), ("b", tool("B.", json!({})))],
    );
    assert_eq!(m.annotations, None);
}

/// A parameter most actions require says which do not: shorter, and the same information.
#[test]
fn a_parameter_required_by_all_actions_but_one_says_the_one() {
    let member = |required: &[&str]| {
        tool(
            "Does.",
            json!({"type": "object", "properties": {"run_id": {"type": "number", "description": "The run"}}, "required": required}),
        )
    };
    let m = merged(
        None,
        &[
            ("start", member(&[])),
            ("rerun", member(&["run_id"])),
            ("cancel", member(&["run_id"])),
            ("logs", member(&["run_id"])),
            ("delete", member(&["run_id"])),
        ],
    );
    assert_eq!(
        props(&m)["run_id"]["description"],
        "The run (required except for: start)"
    );
    // Fewer than three more: said as the list (seed 004's form).
    let m = merged(
        None,
        &[
            ("start", member(&[])),
            ("rerun", member(&["run_id"])),
            ("cancel", member(&["run_id"])),
        ],
    );
    assert_eq!(
        props(&m)["run_id"]["description"],
        "The run (required for: rerun, cancel)"
    );
}
