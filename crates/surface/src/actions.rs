//! Action tools (DESIGN "Action tools", seed 004): several exposed tools folded into one tool
//! with an `action` parameter.
//!
//! [`merge`] makes the action tool's input schema and description of its members' definitions;
//! [`dispatch`] checks the arguments of a call to the action tool and makes the arguments of
//! the member's call of them. Pure: no I/O.

use std::collections::{HashMap, HashSet};

use indexmap::IndexMap;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::words::Words;

/// The parameter that chooses the member.
pub const ACTION: &str = "action";

/// One member as the merge sees it: its action, its exposed name, and its exposed definition
/// (a JSON object with `inputSchema`, `description`, ...).
#[derive(Debug, Clone, Copy)]
pub struct Member<'a> {
    pub action: &'a str,
    pub name: &'a str,
    pub definition: &'a RawValue,
}

/// What dispatch needs to know of one action.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionSpec {
    pub action: String,
    /// The member's required parameters, in its order (never `action`).
    pub required: Vec<String>,
    /// The parameters the member declares (its `properties` and its `required`); the others
    /// are dropped. `None`: the member takes anything (it declares no `properties`, or says
    /// that others are allowed with `additionalProperties: true` or a schema, or with
    /// `patternProperties`), and every argument but `action` is passed on.
    pub declared: Option<Vec<String>>,
}

/// An action tool, made of its members.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    pub input_schema: Value,
    pub description: String,
    /// The members' behaviour hints merged as a client needs them ([`Hints::merge`]); `None`
    /// when no member gives any.
    pub annotations: Option<Value>,
    /// One per member, in member order: [`dispatch`] returns an index into them.
    pub specs: Vec<ActionSpec>,
}

/// Where a member's definition is: `#/$defs/<name>` or `#/definitions/<name>`. Both end up in
/// the action tool's `$defs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum DefsKey {
    Defs,
    Definitions,
}

impl DefsKey {
    fn pointer(self) -> &'static str {
        match self {
            Self::Defs => "#/$defs/",
            Self::Definitions => "#/definitions/",
        }
    }
}

/// What a tool says of its behaviour (MCP's `ToolAnnotations` hints), each with the
/// specification's default when it is not said: not read-only, destructive, not idempotent,
/// open world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hints {
    read_only: bool,
    destructive: bool,
    idempotent: bool,
    open_world: bool,
}

impl Hints {
    fn of(annotations: &Map<String, Value>) -> Self {
        let hint = |key: &str, default: bool| {
            annotations
                .get(key)
                .and_then(Value::as_bool)
                .unwrap_or(default)
        };
        let read_only = hint("readOnlyHint", false);
        Self {
            read_only,
            // Meaningful only for a tool that changes something.
            destructive: !read_only && hint("destructiveHint", true),
            idempotent: hint("idempotentHint", false),
            open_world: hint("openWorldHint", true),
        }
    }

    /// The action tool's hints, which a client trusts for any of its calls: read-only and
    /// idempotent only if every member is, destructive and open-world if any member is.
    fn merge(members: impl IntoIterator<Item = Self>) -> Option<Self> {
        members.into_iter().reduce(|a, b| Self {
            read_only: a.read_only && b.read_only,
            destructive: a.destructive || b.destructive,
            idempotent: a.idempotent && b.idempotent,
            open_world: a.open_world || b.open_world,
        })
    }

    /// As few hints as say it exactly (the others are the specification's defaults):
    /// `readOnlyHint` when read-only, else `destructiveHint` said either way (a client must
    /// not have to know its default to know a tool may destroy), `idempotentHint` when true,
    /// `openWorldHint` when false.
    fn to_json(self) -> Value {
        let mut out = Map::new();
        if self.read_only {
            out.insert("readOnlyHint".to_owned(), Value::Bool(true));
        } else {
            out.insert("destructiveHint".to_owned(), Value::Bool(self.destructive));
        }
        if self.idempotent {
            out.insert("idempotentHint".to_owned(), Value::Bool(true));
        }
        if !self.open_world {
            out.insert("openWorldHint".to_owned(), Value::Bool(false));
        }
        Value::Object(out)
    }
}

/// A member's definition, read.
struct Parsed<'a> {
    action: &'a str,
    /// The first line of its description.
    summary: Option<String>,
    /// Its behaviour, when its definition has `annotations` (an object).
    hints: Option<Hints>,
    /// `None` when the input schema has no object `properties`.
    properties: Option<Map<String, Value>>,
    required: Vec<String>,
    /// `additionalProperties: false`.
    closed: bool,
    /// Declares that undeclared parameters are welcome.
    open: bool,
    defs: Vec<(DefsKey, String, Value)>,
}

fn parse<'a>(member: &Member<'a>) -> Parsed<'a> {
    let definition: Value = serde_json::from_str(member.definition.get()).unwrap_or(Value::Null);
    let summary = definition
        .get("description")
        .and_then(Value::as_str)
        .and_then(|d| d.trim().lines().next())
        .map(|line| line.trim().to_owned())
        .filter(|line| !line.is_empty());
    let hints = definition
        .get("annotations")
        .and_then(Value::as_object)
        .map(Hints::of);
    let mut parsed = Parsed {
        action: member.action,
        summary,
        hints,
        properties: None,
        required: Vec::new(),
        closed: false,
        open: false,
        defs: Vec::new(),
    };
    let Some(Value::Object(mut schema)) = definition.get("inputSchema").cloned() else {
        return parsed;
    };
    if let Some(Value::Object(properties)) = schema.remove("properties") {
        parsed.properties = Some(properties);
    }
    if let Some(Value::Array(required)) = schema.get("required") {
        for name in required.iter().filter_map(Value::as_str) {
            if name != ACTION && !parsed.required.iter().any(|r| r == name) {
                parsed.required.push(name.to_owned());
            }
        }
    }
    match schema.get("additionalProperties") {
        Some(Value::Bool(false)) => parsed.closed = true,
        Some(Value::Bool(true) | Value::Object(_)) => parsed.open = true,
        _ => {}
    }
    if schema.contains_key("patternProperties") {
        parsed.open = true;
    }
    for (key, field) in [
        (DefsKey::Defs, "$defs"),
        (DefsKey::Definitions, "definitions"),
    ] {
        if let Some(Value::Object(defs)) = schema.remove(field) {
            parsed
                .defs
                .extend(defs.into_iter().map(|(name, def)| (key, name, def)));
        }
    }
    parsed
}

/// One property of the action tool, as its members declare it.
#[derive(Default)]
struct Property<'a> {
    /// The distinct schemas, in member order, each with the actions that declare it so.
    schemas: Vec<(Value, Vec<&'a str>)>,
    /// The actions whose member requires it, in member order.
    required_by: Vec<String>,
}

/// Makes an action tool of its members: the input schema (an `action` enum and the union of
/// the members' parameters), the description (`summary`, or a generated line, then one line
/// per action) and what [`dispatch`] needs.
pub fn merge(tool_name: &str, summary: Option<&str>, members: &[Member<'_>]) -> Merged {
    let parsed: Vec<Parsed<'_>> = members.iter().map(parse).collect();

    let mut defs = Map::new();
    let mut properties: IndexMap<String, Property> = IndexMap::new();
    for member in &parsed {
        let renames = place_defs(&mut defs, member);
        for (name, schema) in member.properties.iter().flatten() {
            // The action tool's own parameter: the member's is never passed on.
            if name == ACTION {
                continue;
            }
            let mut schema = schema.clone();
            rewrite_refs(&mut schema, &renames);
            drop_header_annotations(&mut schema);
            let property = properties.entry(name.clone()).or_default();
            match property.schemas.iter_mut().find(|(s, _)| *s == schema) {
                Some((_, by)) => by.push(member.action),
                None => property.schemas.push((schema, vec![member.action])),
            }
        }
    }
    for member in &parsed {
        for name in &member.required {
            if let Some(property) = properties.get_mut(name) {
                property.required_by.push(member.action.to_owned());
            }
        }
    }

    let mut actions: Vec<&str> = Vec::with_capacity(parsed.len());
    for member in &parsed {
        if !actions.contains(&member.action) {
            actions.push(member.action);
        }
    }
    let mut out_properties = Map::new();
    out_properties.insert(
        ACTION.to_owned(),
        json!({"type": "string", "enum": actions}),
    );
    let mut required = vec![ACTION.to_owned()];
    for (name, mut property) in properties {
        let mut schema = match property.schemas.len() {
            1 => property.schemas.pop().map_or(Value::Bool(true), |(s, _)| s),
            _ => same_but_described(&property).unwrap_or_else(|| any_of(property.schemas)),
        };
        // Required by every action: required, said once (no list of every action).
        let by_all = actions
            .iter()
            .all(|a| property.required_by.iter().any(|r| r == a));
        if by_all {
            required.push(name.clone());
        } else if !property.required_by.is_empty() {
            note_required(&mut schema, &property.required_by, &actions);
        }
        out_properties.insert(name, schema);
    }

    let mut input_schema = Map::new();
    input_schema.insert("type".to_owned(), json!("object"));
    input_schema.insert("properties".to_owned(), Value::Object(out_properties));
    input_schema.insert("required".to_owned(), json!(required));
    if !parsed.is_empty() && parsed.iter().all(|m| m.closed) {
        input_schema.insert("additionalProperties".to_owned(), Value::Bool(false));
    }
    if !defs.is_empty() {
        input_schema.insert("$defs".to_owned(), Value::Object(defs));
    }

    // A member that says nothing of its behaviour has the specification's defaults.
    let no_hints = Hints::of(&Map::new());
    let merged = parsed
        .iter()
        .any(|m| m.hints.is_some())
        .then(|| Hints::merge(parsed.iter().map(|m| m.hints.unwrap_or(no_hints))))
        .flatten();
    let description = describe(tool_name, summary, &parsed, merged, &input_schema);
    Merged {
        input_schema: Value::Object(input_schema),
        description,
        annotations: merged.map(Hints::to_json),
        specs: parsed.iter().map(spec).collect(),
    }
}

fn spec(member: &Parsed<'_>) -> ActionSpec {
    let declared = match &member.properties {
        Some(properties) if !member.open => {
            let mut declared: Vec<String> = properties
                .keys()
                .filter(|k| *k != ACTION)
                .cloned()
                .collect();
            // A required parameter is passed on even when the member forgot to declare it.
            for name in &member.required {
                if !declared.contains(name) {
                    declared.push(name.clone());
                }
            }
            Some(declared)
        }
        _ => None,
    };
    ActionSpec {
        action: member.action.to_owned(),
        required: member.required.clone(),
        declared,
    }
}

/// The schemas of a parameter that differ only in their descriptions, as one schema whose
/// description says each distinct one after the actions it is for (`a, b: ...; c: ...`, as
/// GitHub's hand-made action tools say `For a: ...`); `None` when they differ otherwise.
fn same_but_described(property: &Property<'_>) -> Option<Value> {
    let mut bare: Option<Value> = None;
    let mut described: Vec<(String, Vec<&str>)> = Vec::new();
    // "The project's number" and "The project's number." say one thing.
    let same = |d: &str| d.trim().trim_end_matches('.').to_lowercase();
    for (schema, actions) in &property.schemas {
        let mut without = schema.as_object()?.clone();
        if let Some(d) = without
            .remove("description")
            .and_then(|d| d.as_str().map(str::to_owned))
        {
            match described.iter_mut().find(|(s, _)| same(s) == same(&d)) {
                Some((said, by)) => {
                    if d.trim().len() > said.trim().len() {
                        *said = d;
                    }
                    by.extend(actions);
                }
                None => described.push((d, actions.clone())),
            }
        }
        let without = Value::Object(without);
        match &bare {
            None => bare = Some(without),
            Some(first) if *first == without => {}
            Some(_) => return None,
        }
    }
    let mut merged = bare?;
    if let Some(object) = merged.as_object_mut() {
        let description = match described.as_slice() {
            [] => None,
            // One thing said (some members may say nothing): it holds for all.
            [(only, _)] => Some(only.clone()),
            parts => {
                let last = parts.len() - 1;
                let parts: Vec<String> = parts
                    .iter()
                    .enumerate()
                    .map(|(i, (d, by))| {
                        // Before a "; ", a full stop that ends a sentence goes; "e.g.",
                        // "example.com." and "..." keep theirs (their last word has another).
                        let d = d.trim();
                        let d = match d.strip_suffix('.') {
                            Some(cut)
                                if i < last
                                    && !cut.rsplit(' ').next().unwrap_or(cut).contains('.') =>
                            {
                                cut
                            }
                            _ => d,
                        };
                        format!("{}: {d}", by.join(", "))
                    })
                    .collect();
                Some(parts.join("; "))
            }
        };
        if let Some(description) = description {
            object.insert("description".to_owned(), Value::String(description));
        }
    }
    Some(merged)
}

/// The schemas of a parameter that differ in more than their descriptions, as an `anyOf`
/// whose branches say which actions each is for (a `$ref` branch stays as it is: a keyword
/// beside it is ignored by older validators).
fn any_of(schemas: Vec<(Value, Vec<&str>)>) -> Value {
    let branches: Vec<Value> = schemas
        .into_iter()
        .map(|(mut schema, by)| {
            if let Some(object) = schema.as_object_mut().filter(|o| !o.contains_key("$ref")) {
                let by = by.join(", ");
                let description = match object.get("description").and_then(Value::as_str) {
                    Some(d) if !d.trim().is_empty() => format!("{by}: {}", d.trim()),
                    _ => format!("For {by}"),
                };
                object.insert("description".to_owned(), Value::String(description));
            }
            schema
        })
        .collect();
    json!({ "anyOf": branches })
}

/// Says in a property's description which actions require it: `required for: a, b` (seed
/// 004's form), or, when at least three more actions require it than do not, the shorter
/// `required except for: c`.
fn note_required(schema: &mut Value, required_by: &[String], actions: &[&str]) {
    let others: Vec<&str> = actions
        .iter()
        .copied()
        .filter(|a| !required_by.iter().any(|r| r == a))
        .collect();
    let note = if required_by.len() >= others.len() + 3 {
        format!("required except for: {}", others.join(", "))
    } else {
        format!("required for: {}", required_by.join(", "))
    };
    match schema {
        Value::Object(object) => {
            let description = match object.get("description").and_then(Value::as_str) {
                Some(d) if !d.trim().is_empty() => format!("{} ({note})", d.trim_end()),
                _ => capitalised(&note),
            };
            object.insert("description".to_owned(), Value::String(description));
        }
        // `true` takes anything, as `{}` does.
        Value::Bool(true) => *schema = json!({ "description": capitalised(&note) }),
        _ => {}
    }
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn describe(
    tool_name: &str,
    summary: Option<&str>,
    members: &[Parsed<'_>],
    merged: Option<Hints>,
    schema: &Map<String, Value>,
) -> String {
    let mut out = match summary.map(str::trim).filter(|s| !s.is_empty()) {
        Some(summary) => summary.to_owned(),
        None => {
            let n = members.len();
            let s = if n == 1 { "" } else { "s" };
            format!("{tool_name}: one tool for {n} action{s}.")
        }
    };
    // Each action with what it says beyond its name, the tool's description and its
    // parameters' names and values (the enum lists every action; what it requires is said by
    // the schema).
    let words = Words::default();
    let mut said: HashSet<String> = words.of(&out).into_iter().collect();
    let properties = schema.get("properties").and_then(Value::as_object);
    for (name, property) in properties.into_iter().flatten() {
        said.extend(words.of(name));
        // The actions' names say what each is, not what another one does.
        if name == ACTION {
            continue;
        }
        let values = property.get("enum").and_then(Value::as_array);
        for value in values.into_iter().flatten().filter_map(Value::as_str) {
            said.extend(words.of(value));
        }
    }
    let lines: Vec<String> = members
        .iter()
        .filter_map(|member| {
            let summary = member
                .summary
                .as_deref()
                .filter(|s| tells_more(&words, &said, member.action, s));
            let note = merged.and_then(|m| differs(m, member.hints));
            if summary.is_none() && note.is_none() {
                return None;
            }
            let summary = summary.map(|s| format!(": {s}")).unwrap_or_default();
            Some(format!(
                "\n- {}{summary}{}",
                member.action,
                note.unwrap_or("")
            ))
        })
        .collect();
    if !lines.is_empty() {
        out.push_str("\n\nActions:");
        out.extend(lines);
    }
    out
}

/// Whether an action's `summary` says a word (a stem, not a stop word) that neither its name
/// nor the rest of the tool (`said`) does: "Cancel a workflow run" says nothing
/// `cancel_workflow_run` does not; nor does "Re-run" say more than `rerun` (a word cut by a
/// hyphen is read joined too).
fn tells_more(words: &Words, said: &HashSet<String>, action: &str, summary: &str) -> bool {
    let name = words.of(action);
    let new = |text: &str| {
        words
            .of(text)
            .iter()
            .any(|w| !said.contains(w) && !name.contains(w))
    };
    new(summary) && new(&summary.replace('-', ""))
}

/// What an action's description says of its behaviour where the action tool's hints do not
/// hold for it: a read-only action of a tool that is not, a safe action of a destructive one.
fn differs(merged: Hints, member: Option<Hints>) -> Option<&'static str> {
    let member = member?;
    if member.read_only && !merged.read_only {
        Some(" (read-only)")
    } else if merged.destructive && !member.destructive {
        Some(" (not destructive)")
    } else {
        None
    }
}

/// Adds a member's definitions to the action tool's `$defs`: a definition that is there
/// already, the same, is shared; one that differs is renamed `<action>_<name>`. Returns where
/// each of the member's definitions went, to rewrite its `$ref`s with.
fn place_defs(
    root: &mut Map<String, Value>,
    member: &Parsed<'_>,
) -> HashMap<(DefsKey, String), String> {
    let mut renames: HashMap<(DefsKey, String), String> = member
        .defs
        .iter()
        .map(|(key, name, _)| ((*key, name.clone()), name.clone()))
        .collect();
    if member.defs.is_empty() {
        return renames;
    }
    let originals: HashSet<&str> = member.defs.iter().map(|(_, n, _)| n.as_str()).collect();
    // A rename changes the `$ref`s of the definitions that use it, which may then differ from
    // the ones they were the same as: again until nothing changes. Each definition is renamed
    // at most once, to a name nothing else has, so this ends.
    for _ in 0..=member.defs.len() {
        let mut placed: IndexMap<String, Value> = IndexMap::new();
        let mut clash = None;
        for (key, name, def) in &member.defs {
            let mut def = def.clone();
            rewrite_refs(&mut def, &renames);
            let target = renames
                .get(&(*key, name.clone()))
                .cloned()
                .unwrap_or_else(|| name.clone());
            let differs = root
                .get(&target)
                .or_else(|| placed.get(&target))
                .is_some_and(|there| *there != def);
            if differs {
                clash = Some((*key, name.clone()));
                break;
            }
            placed.insert(target, def);
        }
        match clash {
            Some((key, name)) => {
                let fresh = fresh_name(member.action, &name, root, &renames, &originals);
                renames.insert((key, name), fresh);
            }
            None => {
                for (name, def) in placed {
                    root.entry(name).or_insert(def);
                }
                return renames;
            }
        }
    }
    renames
}

/// `<action>_<name>`, or `<action>_<name>_2`, ...: a name no definition has.
fn fresh_name(
    action: &str,
    name: &str,
    root: &Map<String, Value>,
    renames: &HashMap<(DefsKey, String), String>,
    originals: &HashSet<&str>,
) -> String {
    let base = format!("{action}_{name}");
    let taken = |candidate: &str| {
        root.contains_key(candidate)
            || originals.contains(candidate)
            || renames.values().any(|v| v == candidate)
    };
    let mut candidate = base.clone();
    let mut n = 2;
    while taken(&candidate) {
        candidate = format!("{base}_{n}");
        n += 1;
    }
    candidate
}

/// Points every `$ref` to a member's definition at its place in the action tool's `$defs`.
/// Data (`enum`, `const`, `default`, `examples`) is left alone, whatever it holds.
/// MCP 2026-07-28's `x-mcp-header` (a parameter mirrored in an `Mcp-Param-*` header) names a
/// header of the member's server; in a merged schema it would claim that header for every
/// member: it is taken out, wherever it is in the parameter's schema.
fn drop_header_annotations(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            map.remove("x-mcp-header");
            for value in map.values_mut() {
                drop_header_annotations(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(drop_header_annotations),
        _ => {}
    }
}

fn rewrite_refs(schema: &mut Value, renames: &HashMap<(DefsKey, String), String>) {
    if renames.is_empty() {
        return;
    }
    match schema {
        Value::Object(object) => {
            for (key, value) in object.iter_mut() {
                match key.as_str() {
                    "$ref" => {
                        if let Value::String(reference) = value {
                            if let Some(new) = rewrite_ref(reference, renames) {
                                *reference = new;
                            }
                        }
                    }
                    "enum" | "const" | "default" | "examples" => {}
                    // Maps of names to schemas: a parameter may be called `default`.
                    "properties" | "patternProperties" | "$defs" | "definitions"
                    | "dependentSchemas" => {
                        if let Value::Object(schemas) = value {
                            for schema in schemas.values_mut() {
                                rewrite_refs(schema, renames);
                            }
                        }
                    }
                    _ => rewrite_refs(value, renames),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                rewrite_refs(item, renames);
            }
        }
        _ => {}
    }
}

fn rewrite_ref(reference: &str, renames: &HashMap<(DefsKey, String), String>) -> Option<String> {
    for key in [DefsKey::Defs, DefsKey::Definitions] {
        let Some(rest) = reference.strip_prefix(key.pointer()) else {
            continue;
        };
        let (segment, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let name = segment.replace("~1", "/").replace("~0", "~");
        if let Some(new) = renames.get(&(key, name)) {
            let new = new.replace('~', "~0").replace('/', "~1");
            return Some(format!("{}{new}{tail}", DefsKey::Defs.pointer()));
        }
    }
    None
}

/// Checks the arguments of a call to an action tool and makes the member's of them: returns
/// the index of the member's spec and its arguments (an object's JSON text), or the message of
/// the error result to answer with. The member's arguments are the call's without `action`
/// and without those the member does not declare; the others keep their order and their
/// exact text (`1.50` stays `1.50`).
pub fn dispatch(
    specs: &[ActionSpec],
    arguments: Option<&RawValue>,
) -> Result<(usize, String), String> {
    let valid = || {
        specs
            .iter()
            .map(|s| s.action.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let missing_action = || {
        format!(
            "Missing required parameter: {ACTION}. Valid actions: {}",
            valid()
        )
    };
    let Some(arguments) = arguments else {
        return Err(missing_action());
    };
    // Not an object (`null` included): no action.
    let Ok(args) = serde_json::from_str::<IndexMap<String, &RawValue>>(arguments.get()) else {
        return Err(missing_action());
    };
    let is_null = |raw: &RawValue| raw.get().trim() == "null";
    let Some(action) = args.get(ACTION).copied().filter(|raw| !is_null(raw)) else {
        return Err(missing_action());
    };
    let name = serde_json::from_str::<String>(action.get());
    let index = name
        .as_ref()
        .ok()
        .and_then(|name| specs.iter().position(|s| s.action == *name));
    let Some(index) = index else {
        let shown = name.unwrap_or_else(|_| action.get().to_owned());
        return Err(format!(
            "Unknown action: {shown}. Valid actions: {}",
            valid()
        ));
    };
    let spec = &specs[index];

    let missing: Vec<&str> = spec
        .required
        .iter()
        .filter(|r| *r != ACTION)
        .filter(|r| args.get(r.as_str()).is_none_or(|raw| is_null(raw)))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "Missing required parameter(s) for action \"{}\": {}",
            spec.action,
            missing.join(", ")
        ));
    }

    let mut out = String::with_capacity(arguments.get().len());
    out.push('{');
    for (key, raw) in &args {
        if key == ACTION {
            continue;
        }
        if let Some(declared) = &spec.declared {
            if !declared.iter().any(|d| d == key) {
                continue;
            }
        }
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(&Value::String(key.clone()).to_string());
        out.push(':');
        out.push_str(raw.get());
    }
    out.push('}');
    Ok((index, out))
}

#[cfg(test)]
mod tests;
